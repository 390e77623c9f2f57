//! BPF ring buffers (kernel/bpf/ringbuf.c): RINGBUF, which BPF programs
//! produce into and user space consumes, and USER_RINGBUF, which user space
//! produces into and BPF drains (bpf_user_ringbuf_drain()).
//!
//! Positions and capacity follow the kernel: each record takes an 8-byte
//! header plus its length, rounded up to 8 bytes; a reservation fails when
//! the producer would run `size` or more bytes ahead of the consumer (the
//! kernel's `new_prod_pos - cons_pos > mask` check). Records become
//! visible to the consumer in reservation order: a record reserved but not
//! yet submitted holds back every later one, as its BUSY bit does in the
//! kernel's buffer. Each record's data is its own allocation, so the
//! address BPF holds stays valid until it submits or discards.

use std::collections::VecDeque;

/// BPF_RINGBUF_HDR_SZ.
pub(super) const HDR: u64 = 8;
/// RINGBUF_MAX_RECORD_SZ (UINT_MAX / 4).
pub(super) const MAX_RECORD: u64 = (u32::MAX / 4) as u64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Busy,
    Committed,
    Discarded,
}

struct Record {
    len: u32,
    state: State,
    data: Box<[u64]>,
}

pub(crate) struct RingBuf {
    size: u64,
    cons: u64,
    prod: u64,
    recs: VecDeque<Record>,
}

fn footprint(len: u64) -> u64 {
    (len + HDR).div_ceil(8) * 8
}

impl RingBuf {
    pub(crate) fn new(size: u32) -> RingBuf {
        RingBuf { size: size as u64, cons: 0, prod: 0, recs: VecDeque::new() }
    }

    /// __bpf_ringbuf_reserve(): the record's data, None when it does not fit.
    pub(crate) fn reserve(&mut self, len: u64) -> Option<*mut u8> {
        if len > MAX_RECORD || footprint(len) > self.size {
            return None;
        }
        let new_prod = self.prod + footprint(len);
        if new_prod - self.cons > self.size - 1 {
            return None;
        }
        self.prod = new_prod;
        let data = vec![0u64; (len as usize).div_ceil(8).max(1)].into_boxed_slice();
        self.recs.push_back(Record { len: len as u32, state: State::Busy, data });
        self.recs.back_mut().map(|r| r.data.as_mut_ptr().cast())
    }

    /// bpf_ringbuf_commit(): submits or discards the busy record whose
    /// data is at `addr`; false if there is none.
    pub(crate) fn commit(&mut self, addr: usize, discard: bool) -> bool {
        match self.recs.iter_mut().rev().find(|r| r.state == State::Busy && r.data.as_ptr() as usize == addr) {
            Some(r) => {
                r.state = if discard { State::Discarded } else { State::Committed };
                true
            }
            None => false,
        }
    }

    /// What a consumer (user space's ring_buffer__consume(), or
    /// bpf_user_ringbuf_drain() for a user ring buffer) reads now: the
    /// submitted records in order, up to the first still-busy one;
    /// discarded records are skipped. Their space is released.
    pub(crate) fn consume(&mut self, max: usize) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        while out.len() < max {
            match self.recs.front().map(|r| r.state) {
                Some(State::Committed) | Some(State::Discarded) => {}
                _ => break,
            }
            let Some(r) = self.recs.pop_front() else { break };
            self.cons += footprint(r.len as u64);
            if r.state == State::Committed {
                // SAFETY: `data` holds at least `len` bytes.
                let bytes = unsafe { std::slice::from_raw_parts(r.data.as_ptr().cast::<u8>(), r.len as usize) };
                out.push(bytes.to_vec());
            }
        }
        out
    }

    /// The oldest submitted record, left in place: (data, length).
    pub(crate) fn peek(&mut self) -> Option<(*mut u8, u32)> {
        let r = self.recs.front_mut().filter(|r| r.state == State::Committed)?;
        Some((r.data.as_mut_ptr().cast(), r.len))
    }

    /// User space writes a record into a USER_RINGBUF
    /// (user_ring_buffer__reserve + submit): -E2BIG if it can never fit,
    /// -ENOSPC if the buffer is full now.
    pub(crate) fn user_push(&mut self, data: &[u8]) -> Result<(), i64> {
        let Some(p) = self.reserve(data.len() as u64) else {
            return Err(if footprint(data.len() as u64) > self.size { -7 } else { -28 });
        };
        // SAFETY: reserve() returned room for data.len() bytes.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) };
        self.commit(p as usize, false);
        Ok(())
    }

    /// bpf_ringbuf_query().
    pub(crate) fn query(&self, what: u64) -> u64 {
        match what {
            0 => self.prod - self.cons,
            1 => self.size,
            2 => self.cons,
            3 => self.prod,
            _ => 0,
        }
    }

    /// Records not yet consumed.
    pub(crate) fn len(&self) -> usize {
        self.recs.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_capacity_and_busy_records() {
        let mut rb = RingBuf::new(4096);
        let a = rb.reserve(16).unwrap();
        let b = rb.reserve(3).unwrap();
        assert_eq!(rb.query(3), 24 + 16, "8-byte headers, lengths rounded up to 8");
        // b is submitted first, but a (reserved earlier) is still busy.
        assert!(rb.commit(b as usize, false));
        assert!(rb.consume(usize::MAX).is_empty());
        // SAFETY: a has 16 bytes.
        unsafe { *a = 7 };
        assert!(rb.commit(a as usize, false));
        assert!(!rb.commit(a as usize, false), "a record is committed once");
        let got = rb.consume(usize::MAX);
        assert_eq!(got.len(), 2);
        assert_eq!((got[0][0], got[0].len(), got[1].len()), (7, 16, 3));
        assert_eq!(rb.query(0), 0);
        // Full: 4096 bytes hold at most 4095 of records.
        let big = rb.reserve(4096 - 16).unwrap();
        assert!(rb.reserve(0).is_none(), "8 more bytes would reach the size");
        assert!(rb.commit(big as usize, true));
        assert!(rb.consume(usize::MAX).is_empty(), "discarded records are skipped");
        assert!(rb.reserve(4096).is_none(), "larger than the buffer");
        assert_eq!(rb.user_push(&[0; 5000]), Err(-7));
    }
}
