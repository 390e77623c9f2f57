//! The fair class's high-resolution tick (`SCHED_FEAT(HRTICK)`): instead of
//! waiting for the next periodic tick to notice that the running task has
//! used its slice, the class arms a per-runqueue hrtimer for the moment it
//! will have (kernel/sched/core.c: `hrtick_start()`, `hrtick()`;
//! kernel/sched/fair.c: `hrtick_start_fair()`, `hrtick_update()`).
//!
//! The timer is armed when a fair task is picked and re-armed whenever a
//! fair task is enqueued or dequeued on the CPU; `__schedule()` cancels it
//! first. When it fires, the fair class's tick runs with `queued` set, which
//! charges the running task and reschedules without checking the slice
//! (`entity_tick()`): the timer was set to the slice.

use crate::engine::time::Ns;
use crate::engine::{Cpu, Event, TaskId};
use crate::sched::features::Feature;
use crate::sched::sim::Sim;
use crate::sched::task::ClassId;

/// `hrtick_start()`'s floor: the timer is never armed closer than this.
const HRTICK_MIN_NS: Ns = 10_000;

impl Sim {
    /// hrtick_enabled_fair(): the feature is on (high-resolution timers are
    /// taken to be active, as on any current machine).
    #[inline]
    fn hrtick_enabled_fair(&self) -> bool {
        self.features.on(Feature::HRTICK)
    }

    /// hrtick_clear(): `__schedule()` cancels the timer before it picks.
    #[inline]
    pub(crate) fn hrtick_clear(&mut self, cpu: Cpu) {
        if self.hrtick_enabled_fair() {
            let rq = self.rq_mut(cpu);
            rq.hrtick_gen = rq.hrtick_gen.wrapping_add(1);
        }
    }

    /// `__schedule()`'s hrtick_clear() and, for a fair pick,
    /// pick_next_task_fair()'s hrtick_start_fair().
    #[inline]
    pub(crate) fn hrtick_restart(&mut self, cpu: Cpu, next: TaskId) {
        self.hrtick_clear(cpu);
        if self.task(next).class == ClassId::Fair {
            self.hrtick_start_fair(cpu, next);
        }
    }

    /// hrtick_start_fair(): arm the timer for the rest of `p`'s slice when
    /// other fair tasks wait; a task already past its slice is rescheduled.
    /// Inlined up to the test whether there is anything to do, which
    /// mostly there is not (the feature is off by default).
    #[inline]
    pub(crate) fn hrtick_start_fair(&mut self, cpu: Cpu, p: TaskId) {
        if !self.hrtick_enabled_fair() || self.rq(cpu).cfs.h_nr_queued <= 1 {
            return;
        }
        self.hrtick_arm_fair(cpu, p);
    }

    /// hrtick_start_fair() once the hrtick is on and others wait.
    #[inline(never)]
    fn hrtick_arm_fair(&mut self, cpu: Cpu, p: TaskId) {
        let se = &self.task(p).se;
        let ran = se.sum_exec_runtime - se.prev_sum_exec_runtime;
        let Some(delta) = se.slice.checked_sub(ran) else {
            if self.rq(cpu).curr == Some(p) {
                self.resched_curr(cpu);
            }
            return;
        };
        // hrtick_start(): at least 10 us away; re-arming replaces the timer.
        let rq = self.rq_mut(cpu);
        rq.hrtick_gen = rq.hrtick_gen.wrapping_add(1);
        let gen = rq.hrtick_gen;
        let at = self.now() + delta.max(HRTICK_MIN_NS);
        self.engine.schedule(at, Event::HrTick { cpu, gen });
    }

    /// hrtick_update(): after a fair enqueue or dequeue, re-arm for the
    /// running task if it is a fair one.
    #[inline]
    pub(crate) fn hrtick_update(&mut self, cpu: Cpu) {
        if !self.hrtick_enabled_fair() {
            return;
        }
        if let Some(c) = self.rq(cpu).curr.filter(|&c| self.task(c).class == ClassId::Fair) {
            self.hrtick_start_fair(cpu, c);
        }
    }

    /// hrtick(): the timer fires: the running task's class ticks with
    /// `queued` set. For a fair task that charges it and reschedules.
    pub(crate) fn on_hrtick(&mut self, cpu: Cpu) {
        let Some(curr) = self.rq(cpu).curr else { return };
        if self.task(curr).class != ClassId::Fair {
            return;
        }
        self.commit_progress(cpu);
        self.task_tick_fair_queued(curr);
        self.resched_curr(cpu);
        self.arm_step(cpu);
    }
}
