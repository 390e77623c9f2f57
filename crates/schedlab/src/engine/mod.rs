//! The engine layer: what any discrete-event simulation needs and nothing
//! about scheduling.
//!
//! - [`time`]: simulated time in integer nanoseconds and the duration syntax;
//! - [`rng`]: the project's own PRNG with one named stream per purpose;
//! - `timers`: the per-CPU step timers (a tournament tree);
//! - this module: the event queue and the running event-stream hash.
//!
//! May import: nothing else of this crate. Every other layer imports it.
//!
//! # The event queue
//!
//! A priority queue of events ordered by (time, sequence number), so that events at the same instant run in the
//! order they were scheduled, and a running hash of everything processed.
//! One u128 key packs (time, seq) so that one comparison orders two events.
//! The keys only grow (see the `queue` submodule), which lets the queue
//! be a radix heap (a binary heap while it holds a few entries).
//!
//! Two kinds of events stay out of the heap. The end of the running task's
//! current step is a deadline that moves on every switch and every
//! interrupt (in the heap most of its entries would be superseded before
//! they fire): a tournament tree over the CPUs holds one live key per CPU.
//! The scheduler tick, of which a CPU has at most one pending, is re-armed
//! at the next tick boundary, which is never before any tick already
//! pending: such ticks join the back of a FIFO that is sorted by key
//! because every key it receives is above its last (the keys' sequence
//! numbers only grow), and pop from its front. A tick that would not keep
//! the FIFO sorted (one deferred past an interrupts-off window) goes to the
//! heap. All keys come from the same sequence counter, so the merged order
//! is the one a single heap would give.

mod queue;
pub mod rng;
pub mod time;
mod timers;

use crate::engine::queue::RadixQueue;
use crate::engine::time::Ns;
use crate::engine::timers::{CpuTimers, NO_KEY};
use std::collections::VecDeque;

/// Index of a task in the simulator's task table.
pub type TaskId = u32;
/// Index of a CPU.
pub type Cpu = u32;

/// The subject of the next event, as far as a prefetch cares
/// ([`Engine::upcoming`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Upcoming {
    /// A sleep timer of this task.
    Task(TaskId),
    /// The end of the step this CPU runs: the running task may block, and
    /// the CPU pick another.
    Step(Cpu),
    /// A tick or IPI of this CPU.
    Cpu(Cpu),
    /// Another event, or none.
    Other,
}

/// Everything that can happen at an instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The periodic scheduler tick on a busy CPU (nohz idle stops it).
    Tick {
        /// The CPU ticking.
        cpu: Cpu,
    },
    /// The task running on `cpu` reaches the end of its current step.
    /// `gen` invalidates the event when the CPU switched or was delayed since.
    StepDone {
        /// The CPU whose running task finishes its step.
        cpu: Cpu,
        /// The CPU's step generation when the event was armed.
        gen: u32,
    },
    /// A task's sleep timer (hrtimer) expires on `cpu`.
    Timer {
        /// The sleeping task.
        task: TaskId,
        /// The task's timer generation when armed (a cancelled timer is stale).
        gen: u32,
    },
    /// An IPI arrives at `cpu`: reschedule and/or run the queued remote work.
    Ipi {
        /// The CPU receiving it.
        cpu: Cpu,
    },
    /// A workload's tasks are created.
    WorkloadStart {
        /// The workload's index in the scenario.
        workload: u32,
    },
    /// RT bandwidth or fair-server period boundary / activation on `cpu`.
    RtBandwidth {
        /// The CPU whose RT runtime or fair server is refreshed.
        cpu: Cpu,
    },
    /// Deferred sched_ext work for `cpu`'s runqueue, as an irq_work on `on`;
    /// `ipi` when it was sent to the target with irq_work_queue_on().
    ScxDeferred {
        /// The runqueue the work is for.
        cpu: Cpu,
        /// The CPU that runs the irq_work.
        on: Cpu,
        /// Sent to `on` with an IPI.
        ipi: bool,
    },
    /// The sched_ext kick irq_work of `cpu` (scx_bpf_kick_cpu).
    ScxKick {
        /// The CPU whose kick irq_work runs.
        cpu: Cpu,
    },
    /// A BPF scheduler's timer.
    ScxTimer {
        /// The BPF timer (its map value's address).
        id: u64,
        /// Its generation when armed (a cancelled or re-armed timer is stale).
        gen: u32,
    },
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
    /// A cpu.max group's period timer, or its slack timer when `slack`.
    CfsPeriod {
        /// The task group.
        tg: u32,
        /// The timer's generation when armed.
        gen: u32,
        /// The slack timer rather than the period timer.
        slack: bool,
    },
    /// The scenario's `index`-th `[[cgroup_write]]`: a write to a cgroup's files
    /// (cpu.weight, cpu.max, cpu.idle, cgroup.procs) at run time.
    CgroupWrite {
        /// The write's index among the scenario's `[[cgroup_write]]` tables.
        index: u32,
    },
    /// The return from an interrupt whose work was charged to `cpu`
    /// (charge_irq) and that asked for a reschedule: schedule() runs here,
    /// once the handler is done, on the interrupted task's time.
    IrqExit {
        /// The CPU returning from the interrupt.
        cpu: Cpu,
    },
    /// The fair class's high-resolution tick on `cpu` (HRTICK): the
    /// running task's slice is used up.
    HrTick {
        /// The CPU whose hrtick timer fires.
        cpu: Cpu,
        /// The runqueue's hrtick generation when armed (re-armed or cancelled: stale).
        gen: u32,
    },
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
            Event::CfsPeriod { tg, gen, slack } => (17, (tg as u64) << 33 | (gen as u64) << 1 | slack as u64),
            Event::CgroupWrite { index } => (18, index as u64),
            Event::IrqExit { cpu } => (19, cpu as u64),
            Event::HrTick { cpu, gen } => (20, (cpu as u64) << 32 | gen as u64),
        }
    }
}

/// The event queue and the simulated clock.
#[derive(Debug, Default)]
pub struct Engine {
    heap: RadixQueue<Event>,
    steps: CpuTimers,
    /// Pending ticks in key order. See the module docs.
    ticks: TickFifo,
    /// CPUs with timers (ticks of CPUs beyond go to the heap).
    cpus: usize,
    /// Debug builds: which CPUs have a tick pending (at most one each).
    tick_pending: Vec<bool>,
    seq: u64,
    now: Ns,
    processed: u64,
    hash: StreamHash,
    /// Walk a popped timer out of its tree at once ([`Engine::set_lookahead`]).
    lookahead: bool,
}

impl Engine {
    /// An empty queue at time 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// An engine with step timers for `cpus` CPUs.
    pub fn with_cpus(cpus: usize) -> Self {
        let tick_pending = if cfg!(debug_assertions) { vec![false; cpus] } else { Vec::new() };
        Engine { steps: CpuTimers::new(cpus), cpus, tick_pending, ..Self::default() }
    }

    /// With `on`, `pop` walks the timer it pops out of its tree at once,
    /// rather than when the tree is next read, so that [`Engine::upcoming`]
    /// can name that tree's next head while the popped event runs. That
    /// costs a few levels of walking per event (the re-arm that usually
    /// follows climbs only the levels its later key wins): worth it when
    /// the caller prefetches for large simulations, not otherwise. The
    /// order of events is the same either way.
    pub fn set_lookahead(&mut self, on: bool) {
        self.lookahead = on;
    }

    /// Whether `pop` looks ahead ([`Engine::set_lookahead`]).
    #[inline]
    pub fn lookahead(&self) -> bool {
        self.lookahead
    }

    /// Arms `cpu`'s step timer: `Event::StepDone { cpu, gen }` at `at`
    /// (never in the past), replacing whatever it held; None disarms it.
    /// Inlined into the scheduler's `arm_step`, where most steps are set.
    #[inline(always)]
    pub fn set_step(&mut self, cpu: Cpu, at: Option<Ns>, gen: u32) {
        let key = match at {
            Some(at) => {
                self.seq += 1;
                ((at.max(self.now) as u128) << 64) | self.seq as u128
            }
            None => NO_KEY,
        };
        self.steps.gens[cpu as usize] = gen;
        self.steps.set(cpu as usize, key);
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
        let key = ((time as u128) << 64) | self.seq as u128;
        match event {
            Event::Tick { cpu } if (cpu as usize) < self.cpus => self.push_tick(key, cpu),
            _ => self.heap.push(key, event),
        }
    }

    /// `schedule(at, Event::Tick { cpu })` for a CPU with timers: the tick
    /// re-arms itself at every tick, and this path, inlined there, skips
    /// the general one's call and its match on the event.
    #[inline]
    pub fn schedule_tick(&mut self, at: Ns, cpu: Cpu) {
        if (cpu as usize) >= self.cpus {
            self.schedule(at, Event::Tick { cpu });
            return;
        }
        let time = at.max(self.now);
        self.seq += 1;
        let key = ((time as u128) << 64) | self.seq as u128;
        self.push_tick(key, cpu);
    }

    /// Queues the tick of `cpu` (one with timers) under `key`: onto the
    /// ticks' FIFO when it comes after the last one there, as nearly
    /// every tick does, else into the heap.
    #[inline(always)]
    fn push_tick(&mut self, key: u128, cpu: Cpu) {
        if let Some(armed) = self.tick_pending.get_mut(cpu as usize) {
            assert!(!*armed, "a second pending tick on CPU {cpu}");
            *armed = true;
        }
        if self.ticks.last_key().is_none_or(|last| last < key) {
            self.ticks.push_back(key, cpu);
        } else {
            self.heap.push(key, Event::Tick { cpu });
        }
    }

    /// Pops the next event, advancing the clock to it. Inlined into the
    /// event loop, which saves a call and returning the event through memory.
    #[inline(always)]
    pub fn pop(&mut self) -> Option<(Ns, Event)> {
        self.steps.settle();
        let heap = self.heap.peek_key().unwrap_or(NO_KEY);
        let (cpu, step_key) = self.steps.head();
        let (tick_key, tick) = self.ticks.first;
        let (key, event) = if step_key < heap && step_key < tick_key {
            self.steps.take(cpu, self.lookahead);
            (step_key, Event::StepDone { cpu: cpu as Cpu, gen: self.steps.gens[cpu] })
        } else if tick_key < heap {
            self.ticks.pop_front();
            (tick_key, Event::Tick { cpu: tick })
        } else {
            self.heap.pop()?
        };
        if let Event::Tick { cpu } = event {
            if let Some(armed) = self.tick_pending.get_mut(cpu as usize) {
                *armed = false;
            }
        }
        let time = (key >> 64) as Ns;
        debug_assert!(time >= self.now, "time went backwards");
        self.now = time;
        Some((time, event))
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
    pub fn peek_time(&mut self) -> Option<Ns> {
        self.steps.settle();
        let step = self.steps.first().map(|(_, key)| key);
        let tick = Some(self.ticks.first.0).filter(|&key| key != NO_KEY);
        [step, tick, self.heap.peek_key()].into_iter().flatten().min().map(|key| (key >> 64) as Ns)
    }

    /// What the next event will touch first, for prefetching: the task of
    /// a sleep timer, or the CPU of a step end, tick or IPI; the earliest of
    /// the heap and the timer trees (a tree with changes not walked in yet
    /// is passed over). A hint only: an event the current one schedules
    /// may come first.
    #[inline]
    pub fn upcoming(&self) -> Upcoming {
        let (step_key, step) = self.steps.head_hint().map_or((NO_KEY, 0), |(slot, key)| (key, slot as Cpu));
        let (tick_key, tick) = self.ticks.first;
        let heap_key = self.heap.peek_key().unwrap_or(NO_KEY);
        if step_key < heap_key && step_key < tick_key {
            Upcoming::Step(step)
        } else if tick_key < heap_key {
            Upcoming::Cpu(tick)
        } else {
            match self.heap.peek() {
                Some(&Event::Timer { task, .. }) => Upcoming::Task(task),
                Some(&Event::Ipi { cpu }) => Upcoming::Cpu(cpu),
                _ => Upcoming::Other,
            }
        }
    }

    /// Events accounted so far (stale ones excluded).
    pub fn events_processed(&self) -> u64 {
        self.processed
    }

    /// Events still queued (heap, step slots and ticks).
    pub fn pending(&self) -> usize {
        self.heap.len() + self.steps.armed() + self.ticks.len()
    }

    /// The event-stream hash: equal for identical runs.
    pub fn hash(&self) -> u64 {
        self.hash.finish()
    }
}

/// The ticks' FIFO (see the module docs): its front apart, so that the
/// engine's pop, which compares it with the other sources' heads before
/// every event, reads one field rather than a `VecDeque`'s front.
#[derive(Debug)]
struct TickFifo {
    /// The front: the earliest tick's key and CPU ((NO_KEY, 0): none).
    first: (u128, Cpu),
    /// The ticks after it, in key order.
    rest: VecDeque<(u128, Cpu)>,
}

impl Default for TickFifo {
    fn default() -> Self {
        TickFifo { first: (NO_KEY, 0), rest: VecDeque::new() }
    }
}

impl TickFifo {
    /// The key of the last tick, if any.
    #[inline(always)]
    fn last_key(&self) -> Option<u128> {
        match self.rest.back() {
            Some(&(key, _)) => Some(key),
            None => Some(self.first.0).filter(|&key| key != NO_KEY),
        }
    }

    /// Queues a tick whose key is above [`TickFifo::last_key`] (any key
    /// when the FIFO is empty).
    #[inline(always)]
    fn push_back(&mut self, key: u128, cpu: Cpu) {
        if self.first.0 == NO_KEY {
            self.first = (key, cpu);
        } else {
            self.rest.push_back((key, cpu));
        }
    }

    /// Drops the front tick: the next one moves to the front.
    #[inline(always)]
    fn pop_front(&mut self) {
        self.first = self.rest.pop_front().unwrap_or((NO_KEY, 0));
    }

    /// Ticks pending.
    fn len(&self) -> usize {
        usize::from(self.first.0 != NO_KEY) + self.rest.len()
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
    /// Folds one word into the hash.
    #[inline]
    pub fn mix(&mut self, w: u64) {
        let mut x = self.0 ^ w.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        x = (x ^ (x >> 29)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        self.0 = x ^ (x >> 32);
    }

    /// The hash of everything mixed so far (a final avalanche step).
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
        let mut r = crate::engine::rng::Rng::new(3, crate::engine::rng::Stream::Scheduler);
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

    /// Step timers merge with the heap in (time, seq) order, re-arming
    /// replaces a slot's deadline, and disarming removes it.
    #[test]
    fn cpu_timers_merge_in_key_order() {
        let mut e = Engine::with_cpus(5);
        e.schedule(10, Event::Tick { cpu: 0 });
        e.set_step(3, Some(10), 7);
        e.set_step(4, Some(30), 1);
        e.set_step(1, Some(5), 2);
        e.set_step(1, Some(20), 3);
        e.set_step(0, Some(1), 9);
        e.set_step(0, None, 10);
        e.schedule(20, Event::Tick { cpu: 1 });
        assert_eq!(e.peek_time(), Some(10));
        assert_eq!(e.pending(), 5);
        let order: Vec<_> = std::iter::from_fn(|| e.pop()).collect();
        assert_eq!(
            order,
            vec![
                (10, Event::Tick { cpu: 0 }),
                (10, Event::StepDone { cpu: 3, gen: 7 }),
                (20, Event::StepDone { cpu: 1, gen: 3 }),
                (20, Event::Tick { cpu: 1 }),
                (30, Event::StepDone { cpu: 4, gen: 1 }),
            ]
        );
        // One CPU: the leaf is the root.
        let mut one = Engine::with_cpus(1);
        one.set_step(0, Some(7), 1);
        one.set_step(0, Some(9), 2);
        one.schedule(8, Event::End);
        assert_eq!(one.pop(), Some((8, Event::End)));
        assert_eq!(one.pop(), Some((9, Event::StepDone { cpu: 0, gen: 2 })));
        assert_eq!(one.pop(), None);
        // A deadline in the past fires now.
        e.set_step(2, Some(0), 4);
        assert_eq!(e.pop(), Some((30, Event::StepDone { cpu: 2, gen: 4 })));
        assert_eq!(e.pop(), None);
    }

    /// Against the heap alone, holding ticks and superseded step events
    /// that are skipped when they pop (how the engine used to work): the
    /// same live events come out at the same times in the same order.
    #[test]
    fn cpu_timers_match_a_heap_with_stale_entries() {
        for (cpus, seed) in [(37, 11), (1, 3), (2, 4), (128, 5), (1000, 6)] {
            timers_against_the_heap(cpus, seed);
        }
    }

    fn timers_against_the_heap(cpus: usize, seed: u64) {
        let mut e = Engine::with_cpus(cpus);
        let mut old = Engine::new();
        let mut gens = vec![0u32; cpus];
        let mut live: Vec<Option<u32>> = vec![None; cpus];
        let mut tick_pending = vec![false; cpus];
        let mut r = crate::engine::rng::Rng::new(seed, crate::engine::rng::Stream::Scheduler);
        let mut now = 0;
        // The reference's clock: it also pops the stale entries, and when
        // only stale ones are left it runs ahead of the engine's; times
        // are clamped to it so that both clamp alike.
        let mut floor = 0;
        for round in 0..50_000u32 {
            let cpu = r.below(cpus as u64) as usize;
            match r.below(6) {
                0 => {
                    let at = (now + r.below(40)).max(floor);
                    e.schedule(at, Event::Ipi { cpu: cpu as Cpu });
                    old.schedule(at, Event::Ipi { cpu: cpu as Cpu });
                }
                // A CPU has at most one tick pending.
                5 if !tick_pending[cpu] => {
                    let at = (now + r.below(60)).max(floor);
                    tick_pending[cpu] = true;
                    e.schedule(at, Event::Tick { cpu: cpu as Cpu });
                    old.schedule(at, Event::Tick { cpu: cpu as Cpu });
                }
                5 => {}
                1 => {
                    gens[cpu] += 1;
                    live[cpu] = None;
                    e.set_step(cpu as Cpu, None, gens[cpu]);
                }
                _ => {
                    gens[cpu] += 1;
                    // Now and then in the past: it fires at once.
                    let at = (now + r.below(100)).saturating_sub(5);
                    let at = if floor > now { at.max(floor) } else { at };
                    live[cpu] = Some(gens[cpu]);
                    e.set_step(cpu as Cpu, Some(at), gens[cpu]);
                    old.schedule(at, Event::StepDone { cpu: cpu as Cpu, gen: gens[cpu] });
                }
            }
            if round % 2 == 0 {
                let got = e.pop();
                let want = loop {
                    let next = old.pop();
                    if let Some((t, _)) = next {
                        floor = t;
                    }
                    match next {
                        Some((_, Event::StepDone { cpu, gen })) if live[cpu as usize] != Some(gen) => continue,
                        other => break other,
                    }
                };
                assert_eq!(got, want, "{cpus} CPUs, round {round}");
                if let Some((t, ev)) = got {
                    now = t;
                    match ev {
                        Event::StepDone { cpu, .. } => live[cpu as usize] = None,
                        Event::Tick { cpu } => tick_pending[cpu as usize] = false,
                        _ => {}
                    }
                    // Mostly, the handler re-arms the CPU whose event fired
                    // (its next step, its next tick) before anything pops.
                    if let Event::StepDone { cpu, .. } | Event::Tick { cpu } = ev {
                        let c = cpu as usize;
                        match r.below(3) {
                            0 if !tick_pending[c] => {
                                let at = (now + r.below(60)).max(floor);
                                tick_pending[c] = true;
                                e.schedule(at, Event::Tick { cpu });
                                old.schedule(at, Event::Tick { cpu });
                            }
                            1 => {
                                gens[c] += 1;
                                let at = (now + r.below(100)).max(floor);
                                live[c] = Some(gens[c]);
                                e.set_step(cpu, Some(at), gens[c]);
                                old.schedule(at, Event::StepDone { cpu, gen: gens[c] });
                            }
                            _ => {}
                        }
                    }
                }
            }
        }
    }

    /// The prefetch hint names the next event's subject: a sleep timer's
    /// task, a step's, tick's or IPI's CPU; it passes over the step tree
    /// when it has changes not walked in yet, which without lookahead it
    /// has after a step popped.
    #[test]
    fn upcoming_names_the_next_subject() {
        for lookahead in [false, true] {
            let mut e = Engine::with_cpus(8);
            e.set_lookahead(lookahead);
            e.set_step(5, Some(10), 1);
            e.set_step(2, Some(17), 1);
            e.schedule(18, Event::Tick { cpu: 6 });
            assert_eq!(e.pop(), Some((10, Event::StepDone { cpu: 5, gen: 1 })));
            // Without lookahead the step tree just popped from is passed
            // over until it is next read, and the hint misses step 2.
            let want = if lookahead { Upcoming::Step(2) } else { Upcoming::Cpu(6) };
            assert_eq!(e.upcoming(), want, "lookahead {lookahead}");
            assert_eq!(e.pop(), Some((17, Event::StepDone { cpu: 2, gen: 1 })));
            assert_eq!(e.pop(), Some((18, Event::Tick { cpu: 6 })));
        }

        let mut e = Engine::with_cpus(8);
        e.set_lookahead(true);
        assert_eq!(e.upcoming(), Upcoming::Other);
        e.schedule(30, Event::Timer { task: 7, gen: 1 });
        e.schedule(20, Event::Timer { task: 4, gen: 1 });
        e.schedule(25, Event::Ipi { cpu: 1 });
        e.set_step(5, Some(10), 1);
        e.set_step(2, Some(50), 1);
        e.schedule(15, Event::Tick { cpu: 6 });
        e.schedule(27, Event::WorkloadStart { workload: 0 });
        // The step tree is not walked yet, so the hint passes over its
        // step at 10; the ticks' FIFO is always in order.
        assert_eq!(e.upcoming(), Upcoming::Cpu(6));
        assert_eq!(e.pop(), Some((10, Event::StepDone { cpu: 5, gen: 1 })));
        // The popped step left its tree at once: the tick at 15 is next.
        assert_eq!(e.upcoming(), Upcoming::Cpu(6));
        assert_eq!(e.pop(), Some((15, Event::Tick { cpu: 6 })));
        assert_eq!(e.upcoming(), Upcoming::Task(4));
        assert_eq!(e.pop(), Some((20, Event::Timer { task: 4, gen: 1 })));
        assert_eq!(e.upcoming(), Upcoming::Cpu(1));
        assert_eq!(e.pop(), Some((25, Event::Ipi { cpu: 1 })));
        assert_eq!(e.upcoming(), Upcoming::Other);
        assert_eq!(e.pop(), Some((27, Event::WorkloadStart { workload: 0 })));
        assert_eq!(e.upcoming(), Upcoming::Task(7));
        // A step set before the timer, not yet walked in, is passed over.
        e.set_step(3, Some(28), 1);
        assert_eq!(e.upcoming(), Upcoming::Task(7));
        assert_eq!(e.pop(), Some((28, Event::StepDone { cpu: 3, gen: 1 })));
        assert_eq!(e.upcoming(), Upcoming::Task(7));
        assert_eq!(e.pop(), Some((30, Event::Timer { task: 7, gen: 1 })));
        assert_eq!(e.upcoming(), Upcoming::Step(2));
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
