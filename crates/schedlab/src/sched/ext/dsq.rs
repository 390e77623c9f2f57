//! Dispatch queues (`struct scx_dispatch_q`): FIFO or vtime-ordered lists of
//! tasks. One ordered map serves both orders: a FIFO DSQ keys tasks by an
//! insertion counter (head inserts count down, tail inserts count up), a
//! vtime DSQ by `dsq_vtime`; the DSQ's sequence number breaks ties and tells
//! an iterator which tasks were queued before it started.

use std::collections::BTreeMap;

use crate::engine::{Cpu, TaskId};
use crate::engine::time::Ns;

/// Where a DSQ lives; `Dsq::index` in `ScxSched::dsqs`.
pub type DsqIdx = u32;

/// What kind of DSQ this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DsqKind {
    /// A CPU's local DSQ (SCX_DSQ_LOCAL, `rq->scx.local_dsq`): what the CPU runs next.
    Local(Cpu),
    /// SCX_DSQ_GLOBAL, one per NUMA node.
    Global(u32),
    /// The per-CPU bypass DSQ (6.19+).
    Bypass(Cpu),
    /// A DSQ the scheduler created with scx_bpf_create_dsq().
    User,
}

/// Ordering a DSQ has been used with; mixing is an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DsqOrder {
    /// Empty: either order may be used next.
    Unset,
    /// FIFO inserts (scx_bpf_dsq_insert()).
    Fifo,
    /// Priority-queue inserts by vtime (scx_bpf_dsq_insert_vtime()).
    Vtime,
}

/// A position in a DSQ: (order key, sequence number).
pub type DsqKey = (u64, u64);

const FIFO_MID: u64 = 1 << 63;

/// A dispatch queue (`struct scx_dispatch_q`).
#[derive(Clone, Debug)]
pub struct Dsq {
    /// The DSQ id schedulers name it by (SCX_DSQ_LOCAL_ON | cpu, SCX_DSQ_GLOBAL, or a user id).
    pub id: u64,
    /// Which kind it is.
    pub kind: DsqKind,
    /// The NUMA node it belongs to.
    pub node: u32,
    /// The queued tasks in order: FIFO keys or (vtime, seq).
    pub list: BTreeMap<DsqKey, TaskId>,
    /// The ordering in use.
    pub order: DsqOrder,
    /// Incremented on every insert (dsq->seq).
    pub seq: u64,
    head_ctr: u64,
    tail_ctr: u64,
    /// The simulated time the DSQ's spinlock is free again.
    pub lock_free_at: Ns,
    /// Time CPUs spent waiting for and holding this DSQ's lock.
    pub lock_wait_ns: Ns,
    /// Time the lock was held, ns.
    pub lock_hold_ns: Ns,
    /// scx_bpf_destroy_dsq() was called; inserts are refused.
    pub destroyed: bool,
}

impl Dsq {
    /// An empty DSQ.
    pub fn new(id: u64, kind: DsqKind, node: u32) -> Self {
        Dsq {
            id,
            kind,
            node,
            list: BTreeMap::new(),
            order: DsqOrder::Unset,
            seq: 0,
            head_ctr: FIFO_MID,
            tail_ctr: FIFO_MID,
            lock_free_at: 0,
            lock_wait_ns: 0,
            lock_hold_ns: 0,
            destroyed: false,
        }
    }

    /// Queued tasks (`dsq->nr`).
    #[inline]
    pub fn nr(&self) -> usize {
        self.list.len()
    }

    /// A built-in DSQ (local, global, bypass), not a user one.
    pub fn is_builtin(&self) -> bool {
        self.kind != DsqKind::User
    }

    /// Inserts `p` at the tail (or head) in FIFO order; returns its key.
    pub fn insert_fifo(&mut self, p: TaskId, head: bool) -> DsqKey {
        self.seq += 1;
        let k = if head {
            self.head_ctr -= 1;
            self.head_ctr
        } else {
            self.tail_ctr += 1;
            self.tail_ctr
        };
        let key = (k, self.seq);
        self.list.insert(key, p);
        key
    }

    /// Inserts `p` ordered by `vtime`; ties keep insertion order.
    pub fn insert_vtime(&mut self, p: TaskId, vtime: u64) -> DsqKey {
        self.seq += 1;
        let key = (vtime, self.seq);
        self.list.insert(key, p);
        key
    }

    /// Removes the entry at `key`, returning its task; an emptied DSQ forgets its ordering.
    pub fn remove(&mut self, key: DsqKey) -> Option<TaskId> {
        let p = self.list.remove(&key);
        if self.list.is_empty() {
            self.order = DsqOrder::Unset;
            if self.kind != DsqKind::User {
                // Built-in DSQs are FIFO only; reset the counters to keep keys small.
                self.head_ctr = FIFO_MID;
                self.tail_ctr = FIFO_MID;
            }
        }
        p
    }

    /// The first entry: the head of a FIFO, the lowest vtime of a priority queue.
    pub fn first(&self) -> Option<(DsqKey, TaskId)> {
        self.list.iter().next().map(|(&k, &p)| (k, p))
    }

    /// The entry after `key` (or before it when `rev`), skipping entries
    /// inserted at or after `max_seq`.
    pub fn next_after(&self, key: Option<DsqKey>, rev: bool, max_seq: u64) -> Option<(DsqKey, TaskId)> {
        use std::ops::Bound::{Excluded, Unbounded};
        if rev {
            let hi = key.map_or(Unbounded, Excluded);
            self.list.range((Unbounded, hi)).rev().find(|(k, _)| k.1 < max_seq).map(|(&k, &p)| (k, p))
        } else {
            let lo = key.map_or(Unbounded, Excluded);
            self.list.range((lo, Unbounded)).find(|(k, _)| k.1 < max_seq).map(|(&k, &p)| (k, p))
        }
    }

    /// Takes the DSQ's lock at simulated time `at` for `hold` ns: returns the
    /// time spent waiting. Callers serialise in event order, so this is a
    /// FIFO spinlock in simulated time.
    pub fn lock(&mut self, at: Ns, hold: Ns) -> Ns {
        let start = at.max(self.lock_free_at);
        let wait = start - at;
        self.lock_free_at = start + hold;
        self.lock_wait_ns += wait;
        self.lock_hold_ns += hold;
        wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_head_and_tail() {
        let mut d = Dsq::new(1, DsqKind::User, 0);
        d.insert_fifo(1, false);
        d.insert_fifo(2, false);
        d.insert_fifo(3, true);
        let order: Vec<_> = d.list.values().copied().collect();
        assert_eq!(order, vec![3, 1, 2]);
    }

    #[test]
    fn iterator_sees_only_older_tasks() {
        let mut d = Dsq::new(1, DsqKind::User, 0);
        d.insert_vtime(1, 50);
        d.insert_vtime(2, 10);
        let max_seq = d.seq + 1;
        d.insert_vtime(3, 5);
        let mut seen = vec![];
        let mut cur = None;
        while let Some((k, p)) = d.next_after(cur, false, max_seq) {
            seen.push(p);
            cur = Some(k);
        }
        assert_eq!(seen, vec![2, 1]);
        let mut rev = vec![];
        let mut cur = None;
        while let Some((k, p)) = d.next_after(cur, true, u64::MAX) {
            rev.push(p);
            cur = Some(k);
        }
        assert_eq!(rev, vec![1, 2, 3]);
    }

    #[test]
    fn lock_serialises_in_simulated_time() {
        let mut d = Dsq::new(1, DsqKind::User, 0);
        assert_eq!(d.lock(100, 50), 0);
        assert_eq!(d.lock(120, 50), 30);
        assert_eq!(d.lock(300, 10), 0);
        assert_eq!(d.lock_wait_ns, 30);
    }
}
