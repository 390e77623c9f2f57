//! The discrete-event engine: a priority queue of events ordered by
//! (time, sequence number), so that events at the same instant run in the
//! order they were scheduled, and a running hash of everything processed.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::time::Ns;

/// Index of a task in the simulator's task table.
pub type TaskId = u32;
/// Index of a CPU.
pub type Cpu = u32;

/// Everything that can happen at an instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The periodic scheduler tick on a busy CPU (nohz idle stops it).
    Tick { cpu: Cpu },
    /// The task running on `cpu` reaches the end of its current step.
    /// `gen` invalidates the event when the CPU switched or was delayed since.
    StepDone { cpu: Cpu, gen: u32 },
    /// A task's sleep timer (hrtimer) expires on `cpu`.
    Timer { task: TaskId, gen: u32 },
    /// An IPI arrives at `cpu`: reschedule and/or run the queued remote work.
    Ipi { cpu: Cpu },
    /// A workload's tasks are created.
    WorkloadStart { workload: u32 },
    /// RT bandwidth or fair-server period boundary / activation on `cpu`.
    RtBandwidth { cpu: Cpu },
    /// Deferred sched_ext work for `cpu`'s runqueue, as an irq_work on `on`;
    /// `ipi` when it was sent to the target with irq_work_queue_on().
    ScxDeferred { cpu: Cpu, on: Cpu, ipi: bool },
    /// The sched_ext kick irq_work of `cpu` (scx_bpf_kick_cpu).
    ScxKick { cpu: Cpu },
    /// A BPF scheduler's timer.
    ScxTimer { id: u64, gen: u32 },
    /// The sched_ext watchdog (every timeout / 2).
    ScxWatchdog,
    /// The bypass-mode load balancer (every 500 ms while bypassing).
    ScxBypassLb,
    /// The disable work starts (after an exit request).
    ScxDisable,
    /// The disable work switches the next batch of tasks back to fair.
    ScxDisableStep,
    /// The scenario's sched_ext scheduler is loaded (attach_at).
    ScxAttach,
    /// ... and unregistered from user space (detach_at).
    ScxDetach,
    /// The end of the simulation.
    End,
}

impl Event {
    /// A compact, stable encoding used for the event-stream hash.
    fn hash_words(&self) -> (u64, u64) {
        match *self {
            Event::Tick { cpu } => (1, cpu as u64),
            Event::StepDone { cpu, gen } => (2, (cpu as u64) << 32 | gen as u64),
            Event::Timer { task, gen } => (3, (task as u64) << 32 | gen as u64),
            Event::Ipi { cpu } => (4, cpu as u64),
            Event::WorkloadStart { workload } => (5, workload as u64),
            Event::RtBandwidth { cpu } => (6, cpu as u64),
            Event::End => (7, 0),
            Event::ScxDeferred { cpu, on, ipi } => (8, (cpu as u64) << 33 | (on as u64) << 1 | ipi as u64),
            Event::ScxKick { cpu } => (9, cpu as u64),
            Event::ScxTimer { id, gen } => (10, id.rotate_left(17) ^ gen as u64),
            Event::ScxWatchdog => (11, 0),
            Event::ScxBypassLb => (12, 0),
            Event::ScxDisable => (13, 0),
            Event::ScxDisableStep => (14, 0),
            Event::ScxAttach => (15, 0),
            Event::ScxDetach => (16, 0),
        }
    }
}

/// A pending event; `key` packs (time, seq) so that one comparison orders them.
#[derive(Clone, Copy, Debug)]
struct Entry {
    key: u128,
    event: Event,
}

impl Entry {
    #[inline]
    fn time(&self) -> Ns {
        (self.key >> 64) as Ns
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    // BinaryHeap is a max-heap: invert so that the earliest (time, seq) pops first.
    fn cmp(&self, other: &Self) -> Ordering {
        other.key.cmp(&self.key)
    }
}

/// The event queue and the simulated clock.
#[derive(Debug, Default)]
pub struct Engine {
    heap: BinaryHeap<Entry>,
    seq: u64,
    now: Ns,
    processed: u64,
    hash: StreamHash,
}

impl Engine {
    pub fn new() -> Self {
        Self::default()
    }

    /// Current simulated time.
    #[inline]
    pub fn now(&self) -> Ns {
        self.now
    }

    /// Schedules `event` at absolute time `at` (never in the past).
    #[inline]
    pub fn schedule(&mut self, at: Ns, event: Event) {
        let time = at.max(self.now);
        self.seq += 1;
        self.heap.push(Entry { key: ((time as u128) << 64) | self.seq as u128, event });
    }

    /// Pops the next event, advancing the clock to it.
    #[inline]
    pub fn pop(&mut self) -> Option<(Ns, Event)> {
        let e = self.heap.pop()?;
        let time = e.time();
        debug_assert!(time >= self.now, "time went backwards");
        self.now = time;
        Some((time, e.event))
    }

    /// Records that an event had an effect; stale (superseded) events are not counted.
    #[inline]
    pub fn account(&mut self, time: Ns, event: &Event) {
        self.processed += 1;
        let (a, b) = event.hash_words();
        self.hash.mix(time);
        self.hash.mix(a);
        self.hash.mix(b);
    }

    /// Mixes an extra observation (e.g. a context switch) into the stream hash.
    #[inline]
    pub fn mix(&mut self, word: u64) {
        self.hash.mix(word);
    }

    /// Time of the next pending event.
    pub fn peek_time(&self) -> Option<Ns> {
        self.heap.peek().map(|e| e.time())
    }

    pub fn events_processed(&self) -> u64 {
        self.processed
    }

    pub fn pending(&self) -> usize {
        self.heap.len()
    }

    pub fn hash(&self) -> u64 {
        self.hash.finish()
    }
}

/// A 64-bit running hash over u64 words (multiply-xorshift mixing). Not
/// cryptographic; it only has to make two different event streams differ.
#[derive(Clone, Copy, Debug)]
pub struct StreamHash(u64);

impl Default for StreamHash {
    fn default() -> Self {
        StreamHash(0x243f_6a88_85a3_08d3)
    }
}

impl StreamHash {
    #[inline]
    pub fn mix(&mut self, w: u64) {
        let mut x = self.0 ^ w.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        x = (x ^ (x >> 29)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        self.0 = x ^ (x >> 32);
    }

    pub fn finish(&self) -> u64 {
        let mut x = self.0;
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^ (x >> 33)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ties_are_fifo() {
        let mut e = Engine::new();
        e.schedule(10, Event::Tick { cpu: 2 });
        e.schedule(5, Event::Tick { cpu: 9 });
        e.schedule(10, Event::Tick { cpu: 1 });
        e.schedule(10, Event::Tick { cpu: 3 });
        let order: Vec<_> = std::iter::from_fn(|| e.pop()).collect();
        assert_eq!(
            order,
            vec![
                (5, Event::Tick { cpu: 9 }),
                (10, Event::Tick { cpu: 2 }),
                (10, Event::Tick { cpu: 1 }),
                (10, Event::Tick { cpu: 3 })
            ]
        );
    }

    #[test]
    fn heap_pops_in_key_order() {
        let mut e = Engine::new();
        let mut r = crate::rng::Rng::new(3, crate::rng::Stream::Scheduler);
        let mut times: Vec<u64> = (0..5000).map(|_| r.below(1000)).collect();
        for (i, &t) in times.iter().enumerate() {
            e.schedule(t, Event::Tick { cpu: i as Cpu });
        }
        let mut popped = Vec::new();
        let mut last = (0, 0);
        while let Some((t, Event::Tick { cpu })) = e.pop() {
            // Same time: in scheduling order.
            assert!((t, cpu) > last || popped.is_empty(), "{:?} after {:?}", (t, cpu), last);
            last = (t, cpu);
            popped.push(t);
        }
        times.sort();
        assert_eq!(popped, times);
    }

    #[test]
    fn past_events_clamp_to_now() {
        let mut e = Engine::new();
        e.schedule(100, Event::End);
        e.pop();
        e.schedule(50, Event::Tick { cpu: 0 });
        assert_eq!(e.pop(), Some((100, Event::Tick { cpu: 0 })));
    }

    #[test]
    fn hash_depends_on_order() {
        let mut a = StreamHash::default();
        let mut b = StreamHash::default();
        a.mix(1);
        a.mix(2);
        b.mix(2);
        b.mix(1);
        assert_ne!(a.finish(), b.finish());
    }
}
