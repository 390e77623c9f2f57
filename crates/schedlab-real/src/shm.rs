//! The shared memory the controller and its worker processes use: per-task
//! result slots, per-workload fork counters, spinlock words, futex
//! semaphores and latency sample arrays. Mapped before the fork, so every
//! worker sees the same pages.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

use super::sys;

const SLOT_WORDS: usize = 24;
const RUNTIME: usize = 0;
const WAIT: usize = 1;
const SWITCHES: usize = 2;
const VOLUNTARY: usize = 3;
const MIGRATIONS: usize = 4;
const WAKEUPS: usize = 5;
const WORK: usize = 6;
/// Exit time + 1 (0: did not exit).
const EXITED: usize = 7;
const ENDED: usize = 8;
const LATE: usize = 9;
const LAST_CPU: usize = 10;
/// (what << 32) | errno of a failed attribute change.
const ERROR: usize = 11;
const FINISHED: usize = 12;
const NSAMPLES: usize = 13;
/// The task's thread id (gettid), for mapping a kernel trace.
const TID: usize = 14;
/// Bitmap of the CPUs the task saw itself on (sched_getcpu), 512 CPUs.
const RAN_ON: usize = 16;
pub(crate) const RAN_ON_CPUS: usize = 512;

pub(crate) struct Shm {
    base: *mut u8,
    len: usize,
    ntasks: usize,
    nworkloads: usize,
    nlocks: usize,
    nsems: usize,
    /// Per task: first sample index and capacity.
    sample_at: Vec<(usize, usize)>,
}

// SAFETY: the mapping is only reached through atomics, which may be shared
// between threads (and processes).
unsafe impl Send for Shm {}
// SAFETY: as above.
unsafe impl Sync for Shm {}

pub(crate) struct Slot<'a>(&'a [AtomicU64]);

impl Shm {
    pub(crate) fn new(ntasks: usize, nworkloads: usize, nlocks: usize, nsems: usize, samples: &[usize]) -> std::io::Result<Shm> {
        let mut sample_at = Vec::new();
        let mut total = 0;
        for &n in samples {
            sample_at.push((total, n));
            total += n;
        }
        let words = ntasks * SLOT_WORDS + nworkloads * 2 + nlocks + nsems + total;
        let len = words * 8;
        let base = sys::map_shared(len)?;
        Ok(Shm { base, len, ntasks, nworkloads, nlocks, nsems, sample_at })
    }

    fn words(&self, first: usize, n: usize) -> &[AtomicU64] {
        assert!((first + n) * 8 <= self.len.max(8));
        // SAFETY: the range lies inside the mapping (checked above), which is
        // zero-filled, 8-byte aligned and lives as long as self; AtomicU64 has
        // the layout of u64.
        unsafe { std::slice::from_raw_parts((self.base as *const AtomicU64).add(first), n) }
    }

    pub(crate) fn task(&self, i: usize) -> Slot<'_> {
        Slot(self.words(i * SLOT_WORDS, SLOT_WORDS))
    }

    fn workload_base(&self) -> usize {
        self.ntasks * SLOT_WORDS
    }

    pub(crate) fn add_fork(&self, w: usize, runtime_ns: u64) {
        let ws = self.words(self.workload_base() + 2 * w, 2);
        ws[0].fetch_add(1, Relaxed);
        ws[1].fetch_add(runtime_ns, Relaxed);
    }

    pub(crate) fn forks(&self, w: usize) -> u64 {
        self.words(self.workload_base() + 2 * w, 2)[0].load(Relaxed)
    }

    pub(crate) fn fork_runtime(&self, w: usize) -> u64 {
        self.words(self.workload_base() + 2 * w, 2)[1].load(Relaxed)
    }

    fn u32_word(&self, at: usize) -> &AtomicU32 {
        let w = &self.words(at, 1)[0];
        // SAFETY: the low half of an aligned, shared u64 word is an aligned u32
        // (x86-64 and every little-endian target), used only as a u32 from here on.
        unsafe { &*(w as *const AtomicU64 as *const AtomicU32) }
    }

    /// The spinlock word of lock `l` (0 free, 1 held).
    pub(crate) fn lock(&self, l: usize) -> &AtomicU32 {
        assert!(l < self.nlocks);
        self.u32_word(self.workload_base() + 2 * self.nworkloads + l)
    }

    /// The token count of semaphore `s` (also its futex word).
    pub(crate) fn sem(&self, s: usize) -> &AtomicU32 {
        assert!(s < self.nsems);
        self.u32_word(self.workload_base() + 2 * self.nworkloads + self.nlocks + s)
    }

    fn sample_words(&self, task: usize) -> &[AtomicU64] {
        let (first, n) = self.sample_at[task];
        self.words(self.workload_base() + 2 * self.nworkloads + self.nlocks + self.nsems + first, n)
    }

    pub(crate) fn push_sample(&self, task: usize, ns: u64) {
        let slot = self.task(task);
        let k = slot.0[NSAMPLES].load(Relaxed) as usize;
        let arr = self.sample_words(task);
        if k < arr.len() {
            arr[k].store(ns, Relaxed);
            slot.0[NSAMPLES].store(k as u64 + 1, Relaxed);
        }
    }

    pub(crate) fn samples(&self, task: usize) -> Vec<u64> {
        let k = self.task(task).0[NSAMPLES].load(Relaxed) as usize;
        self.sample_words(task)[..k].iter().map(|a| a.load(Relaxed)).collect()
    }
}

impl Drop for Shm {
    fn drop(&mut self) {
        // SAFETY: base/len came from map_shared; Slots borrow self, so none outlive it.
        unsafe { sys::unmap(self.base, self.len) };
    }
}

/// Per-task counters measured over the run.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Counters {
    pub runtime_ns: u64,
    pub wait_ns: u64,
    pub switches: u64,
    pub voluntary: u64,
    pub migrations: u64,
    pub wakeups: u64,
}

impl Slot<'_> {
    pub(crate) fn store_counters(&self, c: &Counters) {
        self.0[RUNTIME].store(c.runtime_ns, Relaxed);
        self.0[WAIT].store(c.wait_ns, Relaxed);
        self.0[SWITCHES].store(c.switches, Relaxed);
        self.0[VOLUNTARY].store(c.voluntary, Relaxed);
        self.0[MIGRATIONS].store(c.migrations, Relaxed);
        self.0[WAKEUPS].store(c.wakeups, Relaxed);
    }
    pub(crate) fn runtime_ns(&self) -> u64 {
        self.0[RUNTIME].load(Relaxed)
    }
    pub(crate) fn wait_ns(&self) -> u64 {
        self.0[WAIT].load(Relaxed)
    }
    pub(crate) fn switches(&self) -> u64 {
        self.0[SWITCHES].load(Relaxed)
    }
    pub(crate) fn voluntary(&self) -> u64 {
        self.0[VOLUNTARY].load(Relaxed)
    }
    pub(crate) fn migrations(&self) -> u64 {
        self.0[MIGRATIONS].load(Relaxed)
    }
    pub(crate) fn wakeups(&self) -> u64 {
        self.0[WAKEUPS].load(Relaxed)
    }
    pub(crate) fn add_work(&self) {
        self.0[WORK].fetch_add(1, Relaxed);
    }
    pub(crate) fn work(&self) -> u64 {
        self.0[WORK].load(Relaxed)
    }
    pub(crate) fn set_exited(&self, at: u64) {
        self.0[EXITED].store(at + 1, Relaxed);
    }
    pub(crate) fn exited_ns(&self) -> Option<u64> {
        self.0[EXITED].load(Relaxed).checked_sub(1)
    }
    pub(crate) fn set_ended(&self, at: u64, cpu: u32) {
        self.0[ENDED].store(at, Relaxed);
        self.0[LAST_CPU].store(cpu as u64, Relaxed);
        self.0[FINISHED].store(1, Relaxed);
    }
    pub(crate) fn ended_ns(&self) -> u64 {
        self.0[ENDED].load(Relaxed)
    }
    pub(crate) fn finished(&self) -> bool {
        self.0[FINISHED].load(Relaxed) == 1
    }
    pub(crate) fn set_late(&self, ns: u64) {
        self.0[LATE].store(ns, Relaxed);
    }
    pub(crate) fn started_late_ns(&self) -> u64 {
        self.0[LATE].load(Relaxed)
    }
    /// Notes that the task is running on `cpu` now.
    pub(crate) fn saw_cpu(&self, cpu: u32) {
        let c = (cpu as usize).min(RAN_ON_CPUS - 1);
        let w = &self.0[RAN_ON + c / 64];
        let bit = 1u64 << (c % 64);
        if w.load(Relaxed) & bit == 0 {
            w.fetch_or(bit, Relaxed);
        }
    }
    /// The CPUs the task saw itself on, ascending.
    pub(crate) fn cpus_seen(&self) -> Vec<usize> {
        (0..RAN_ON_CPUS).filter(|&c| self.0[RAN_ON + c / 64].load(Relaxed) & (1 << (c % 64)) != 0).collect()
    }
    pub(crate) fn set_tid(&self, tid: i32) {
        self.0[TID].store(tid as u32 as u64, Relaxed);
    }
    /// The task's thread id; 0 until its thread started.
    pub(crate) fn tid(&self) -> i32 {
        self.0[TID].load(Relaxed) as u32 as i32
    }
    pub(crate) fn last_cpu(&self) -> u32 {
        self.0[LAST_CPU].load(Relaxed) as u32
    }
    /// Records a failed call: `what` 1 = sched_setattr, 2 = sched_setaffinity,
    /// 3 = a step real mode does not execute.
    pub(crate) fn set_error(&self, what: u64, errno: i32) {
        self.0[ERROR].store((what << 32) | errno as u32 as u64, Relaxed);
    }
    pub(crate) fn error(&self) -> Option<String> {
        let v = self.0[ERROR].load(Relaxed);
        if v == 0 {
            return None;
        }
        if v >> 32 == 3 {
            return Some("its program has steps real mode does not execute yet (skipped)".into());
        }
        let call = if v >> 32 == 1 { "sched_setattr" } else { "sched_setaffinity" };
        Some(format!("{call} failed: {}", std::io::Error::from_raw_os_error((v & 0xffff_ffff) as i32)))
    }
}
