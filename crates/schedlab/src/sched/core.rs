//! The scheduler core (kernel/sched/core.c): enqueue/dequeue, wakeups,
//! rescheduling, __schedule, the tick, and the CPU time model that turns
//! scheduling decisions into elapsed time.

use crate::engine::{Cpu, Event, TaskId};
use crate::sched::{class_of, deq, enq, fair_check, wf, Class, SchedClass};
use crate::sched::sim::{Sim, NO_CURR};
use crate::sched::task::{ClassId, TaskState};
use crate::engine::time::Ns;


/// What [`Sim::sched_change_begin`] found and undid: the task's CPU, and
/// whether it was queued and running there (the kernel's `struct
/// sched_change_ctx`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct SchedChange {
    /// task_cpu(p) at the start of the change.
    pub(crate) cpu: Cpu,
    /// The task was queued (task_on_rq_queued).
    pub(crate) queued: bool,
    /// The task was the CPU's current task.
    pub(crate) running: bool,
}

impl Sim {
    /// Puts `p` on `cpu`'s runqueue (activate_task / enqueue_task).
    pub(crate) fn activate_task(&mut self, cpu: Cpu, p: TaskId, flags: u32) {
        debug_assert_eq!(self.task(p).cpu, cpu);
        let cls = class_of(self.task(p).class);
        if flags & enq::DELAYED == 0 {
            self.rq_add_running(cpu);
        }
        cls.enqueue_task(self, cpu, p, flags);
        let t = self.task_mut(p);
        t.on_rq = true;
    }

    /// Book-keeping before a task joins `cpu`'s runqueue (the core's add_nr_running()).
    #[inline(always)]
    pub(crate) fn rq_add_running(&mut self, cpu: Cpu) {
        self.balance_touch(cpu);
        let rq = self.rq_mut(cpu);
        rq.nr_running += 1;
        if rq.nr_running == 2 {
            self.rd.nr_overloaded += 1;
        }
    }

    /// Takes `p` off its runqueue (deactivate_task / dequeue_task). Returns
    /// false when the class keeps it queued as a delayed dequeue.
    pub(crate) fn deactivate_task(&mut self, cpu: Cpu, p: TaskId, flags: u32) -> bool {
        let cls = class_of(self.task(p).class);
        if !cls.dequeue_task(self, cpu, p, flags) {
            return false;
        }
        self.finish_dequeue(cpu, p);
        true
    }

    /// Book-keeping once a task has really left its runqueue.
    pub(crate) fn finish_dequeue(&mut self, cpu: Cpu, p: TaskId) {
        self.balance_touch(cpu);
        let rq = self.rq_mut(cpu);
        rq.nr_running -= 1;
        if rq.nr_running == 1 {
            self.rd.nr_overloaded -= 1;
        }
        self.task_mut(p).on_rq = false;
    }

    /// Moves a non-running, non-queued task to `new_cpu` (set_task_cpu).
    pub(crate) fn set_task_cpu(&mut self, p: TaskId, new_cpu: Cpu) {
        let old = self.task(p).cpu;
        if old == new_cpu {
            return;
        }
        class_of(self.task(p).class).migrate_task_rq(self, p, new_cpu);
        self.set_task_cpu_common(p, old, new_cpu);
    }

    /// What [`Sim::set_task_cpu`] does whatever the class: for a class
    /// without a migrate_task_rq hook (ext), all of it.
    #[inline(always)]
    pub(crate) fn set_task_cpu_common(&mut self, p: TaskId, old: Cpu, new_cpu: Cpu) {
        let same_llc = self.topo.cpus_share_cache(old as usize, new_cpu as usize);
        let ws = self.task(p).working_set;
        let refill = self.costs.refill_ns(ws, same_llc);
        let t = self.task_mut(p);
        t.cpu = new_cpu;
        t.stats.migrations += 1;
        t.refill_left = t.refill_left.max(refill);
        t.se.exec_start = 0;
        self.rq_mut(new_cpu).stats.migrations_in += 1;
    }

    /// Moves a queued, not running task between runqueues (move_queued_task /
    /// detach_task + attach_task).
    pub(crate) fn move_queued_task(&mut self, p: TaskId, dst: Cpu) {
        let src = self.task(p).cpu;
        debug_assert!(self.rq(src).curr != Some(p));
        self.deactivate_task(src, p, deq::MOVE | deq::SAVE | deq::MIGRATING);
        self.set_task_cpu(p, dst);
        self.activate_task(dst, p, enq::MOVE | enq::RESTORE | enq::MIGRATED | enq::MIGRATING);
        // The task's queue wait (wait_start) simply continues on the new CPU.
        self.wakeup_preempt(dst, p, 0);
    }

    /// Asks `cpu` to reschedule (resched_curr). Locally this happens on return
    /// from the current event; a remote CPU is sent an IPI, which also pays
    /// the idle-state exit latency if the CPU was idle.
    pub(crate) fn resched_curr(&mut self, cpu: Cpu) {
        let rq = self.rq_mut(cpu);
        if rq.need_resched {
            return;
        }
        rq.need_resched = true;
        if cpu != self.this_cpu {
            self.send_ipi(cpu);
        }
    }

    /// Sends an IPI to `cpu`; arrival includes delivery and idle exit.
    pub(crate) fn send_ipi(&mut self, cpu: Cpu) {
        let now = self.now();
        let exit = match self.rq(cpu).idle_since {
            Some(since) => self.costs.idle_exit_ns(now - since),
            None => 0,
        };
        let polling = self.rq(cpu).idle_since.is_some() && exit == 0;
        let rq = self.rq_mut(cpu);
        if rq.ipi_pending {
            return;
        }
        rq.ipi_pending = true;
        // A polling idle CPU sees TIF_NEED_RESCHED without an interrupt.
        let delay = if polling { 100 } else { self.costs.ipi_ns + exit };
        self.engine.schedule(now + delay, Event::Ipi { cpu });
    }

    /// An IPI arrives: the nohz idle-balance kick and/or a reschedule.
    pub(crate) fn on_ipi(&mut self, cpu: Cpu) {
        let rq = self.rq_mut(cpu);
        rq.ipi_pending = false;
        rq.stats.ipis += 1;
        if self.rq(cpu).curr.is_none() {
            self.nohz_idle_balance(cpu);
            if self.rq(cpu).nr_running > 0 {
                self.rq_mut(cpu).need_resched = true;
            }
        }
    }

    /// Checks whether the newly queued `p` should preempt `cpu`'s current task
    /// (wakeup_preempt).
    pub(crate) fn wakeup_preempt(&mut self, cpu: Cpu, p: TaskId, wake_flags: u32) {
        let Some(curr) = self.rq(cpu).curr else {
            if self.task(p).class != ClassId::Ext {
                self.scx_higher_class_wakeup(cpu);
            }
            self.resched_curr(cpu);
            return;
        };
        let pc = self.task(p).class;
        let cc = self.task(curr).class;
        if pc == cc {
            class_of(pc).wakeup_preempt(self, cpu, p, wake_flags);
        } else if pc < cc {
            if pc != ClassId::Ext {
                self.scx_higher_class_wakeup(cpu);
            }
            self.resched_curr(cpu);
        }
    }

    /// try_to_wake_up(): make a blocked task runnable.
    pub(crate) fn try_to_wake_up(&mut self, p: TaskId, wake_flags: u32) {
        let t = self.task(p);
        if matches!(t.state, TaskState::Runnable | TaskState::Dead | TaskState::New) {
            return;
        }
        let now = self.now();
        self.task_mut(p).stats.wakeups += 1;
        self.trace_waking(p);
        self.task_mut(p).state = TaskState::Runnable;
        if self.task(p).on_rq {
            // ttwu_runnable(): still queued (a delayed dequeue); requeue in place.
            let cpu = self.task(p).cpu;
            if self.task(p).se.sched_delayed {
                self.activate_task(cpu, p, enq::DELAYED | enq::WAKEUP);
            }
            if self.rq(cpu).curr != Some(p) {
                self.task_mut(p).wait_start = Some(now);
                self.wakeup_preempt(cpu, p, wake_flags);
            }
            return;
        }
        let prev_cpu = self.task(p).cpu;
        let cls = class_of(self.task(p).class);
        let mut cpu = cls.select_task_rq(self, p, prev_cpu, wake_flags | wf::TTWU);
        if !self.task(p).allowed_on(cpu as usize) {
            cpu = self.select_fallback_rq(p, prev_cpu);
        }
        let mut flags = enq::WAKEUP;
        if self.task(p).nr_cpus_allowed > 1 {
            flags |= enq::RQ_SELECTED;
        }
        let mut wflags = wake_flags | wf::TTWU;
        if cpu != prev_cpu {
            flags |= enq::MIGRATED;
            wflags |= wf::MIGRATED;
            self.set_task_cpu(p, cpu);
        }
        self.activate_task(cpu, p, flags);
        self.task_mut(p).wait_start = Some(now);
        self.wakeup_preempt(cpu, p, wflags);
        class_of(self.task(p).class).task_woken(self, cpu, p);
        // wake_wide() bookkeeping on the waker (record_wakee).
        if let Some(waker) = self.rq(self.this_cpu).curr {
            self.record_wakee(waker, p);
        }
    }

    fn record_wakee(&mut self, waker: TaskId, wakee: TaskId) {
        let now = self.now();
        let t = self.task_mut(waker);
        if now > t.wakee_flip_decay_ts + 1_000_000_000 {
            t.wakee_flips >>= 1;
            t.wakee_flip_decay_ts = now;
        }
        if t.last_wakee != Some(wakee) {
            t.last_wakee = Some(wakee);
            t.wakee_flips += 1;
        }
    }

    /// select_fallback_rq(): the first allowed CPU, preferring the task's node.
    pub(crate) fn select_fallback_rq(&self, p: TaskId, prev: Cpu) -> Cpu {
        let t = self.task(p);
        let node = self.topo.node_of(prev as usize);
        t.cpus_allowed
            .iter()
            .find(|&c| self.topo.node_of(c) == node)
            .or_else(|| t.cpus_allowed.first())
            .unwrap_or(0) as Cpu
    }

    /// wake_up_new_task(): place a new task with fork balancing and enqueue it.
    pub(crate) fn wake_up_new_task(&mut self, p: TaskId) {
        let now = self.now();
        let parent_cpu = self.this_cpu;
        {
            let t = self.task_mut(p);
            t.state = TaskState::Runnable;
            t.cpu = parent_cpu;
            t.created_at = now;
            t.recent_used_cpu = parent_cpu;
        }
        self.scx_fork(p);
        let cls = class_of(self.task(p).class);
        cls.task_fork(self, p);
        let mut cpu = cls.select_task_rq(self, p, parent_cpu, wf::FORK);
        if !self.task(p).allowed_on(cpu as usize) {
            cpu = self.select_fallback_rq(p, parent_cpu);
        }
        self.task_mut(p).cpu = cpu;
        self.activate_task(cpu, p, enq::INITIAL);
        self.trace_wakeup_new(p, cpu);
        self.task_mut(p).wait_start = Some(now);
        self.wakeup_preempt(cpu, p, wf::FORK);
        class_of(self.task(p).class).task_woken(self, cpu, p);
    }

    /// sched_change_begin(): takes `p` off its queue (`deq_flags`, DEQUEUE_SAVE
    /// and the caller's) and off the CPU if it runs, so that its class,
    /// priority, weight or group can change; [`Sim::sched_change_end`] puts
    /// it back under whatever class it has then. The running task's progress
    /// is accounted first, as the kernel's update_rq_clock() +
    /// dequeue_task() do.
    pub(crate) fn sched_change_begin(&mut self, p: TaskId, deq_flags: u32) -> SchedChange {
        let cpu = self.task(p).cpu;
        let running = self.rq(cpu).curr == Some(p);
        let queued = self.task(p).on_rq;
        let cls = class_of(self.task(p).class);
        if running {
            self.commit_progress(cpu);
            cls.update_curr(self, cpu);
        }
        if queued {
            cls.dequeue_task(self, cpu, p, deq::SAVE | deq_flags);
        }
        if running {
            cls.put_prev_task(self, cpu, p);
        }
        SchedChange { cpu, queued, running }
    }

    /// sched_change_end(): the other half of [`Sim::sched_change_begin`]:
    /// `p` goes back on its queue (ENQUEUE_RESTORE and `enq_flags`) and
    /// becomes the CPU's current task again if it was running. Preemption
    /// checks stay with the caller (check_class_changed() and friends).
    pub(crate) fn sched_change_end(&mut self, p: TaskId, c: SchedChange, enq_flags: u32) {
        let cls = class_of(self.task(p).class);
        if c.queued {
            cls.enqueue_task(self, c.cpu, p, enq::RESTORE | enq_flags);
        }
        if c.running {
            cls.set_next_task(self, c.cpu, p, false);
        }
    }

    /// Account the running task's progress up to now.
    #[inline]
    pub(crate) fn commit_progress(&mut self, cpu: Cpu) {
        let now = self.now();
        let Some(p) = self.rq(cpu).curr else { return };
        let from = self.rq(cpu).progress_from;
        if now <= from {
            return;
        }
        let mut elapsed = now - from;
        self.rq_mut(cpu).progress_from = now;
        let t = &mut self.tasks[p as usize];
        if let Some(l) = t.spinning {
            // Spinning burns CPU without progress.
            self.locks[l as usize].spin_ns += elapsed;
            return;
        }
        let refill = elapsed.min(t.refill_left);
        t.refill_left -= refill;
        elapsed -= refill;
        if let Some(left) = t.run_left.as_mut() {
            *left = left.saturating_sub(elapsed);
        }
    }

    /// (Re)arms the event at which the running task's current step completes.
    /// An event already pending for the same instant is kept: it acts on
    /// whatever runs on the CPU when it fires.
    pub(crate) fn arm_step(&mut self, cpu: Cpu) {
        let rq = &self.rqs[cpu as usize];
        let from = rq.progress_from;
        let at = rq.curr.and_then(|p| {
            let t = &self.tasks[p as usize];
            match t.spinning {
                Some(_) if t.spin_retry => Some(from),
                Some(_) => t.ple_deadline.map(|d| d.max(from)),
                None => Some(from + t.refill_left + t.run_left.unwrap_or(0)),
            }
        });
        if at.is_some() && at == rq.step_at {
            return;
        }
        let rq = self.rq_mut(cpu);
        rq.step_gen = rq.step_gen.wrapping_add(1);
        rq.step_at = at;
        let gen = rq.step_gen;
        self.engine.set_step(cpu, at, gen);
    }

    /// Cancels the pending step event of `cpu`.
    pub(crate) fn cancel_step(&mut self, cpu: Cpu) {
        let rq = self.rq_mut(cpu);
        rq.step_gen = rq.step_gen.wrapping_add(1);
        rq.step_at = None;
        let gen = rq.step_gen;
        self.engine.set_step(cpu, None, gen);
    }

    /// Charges `ns` of interrupt work to `cpu`: the running task makes no
    /// progress meanwhile, and a switch made on return starts after it.
    pub(crate) fn charge_irq(&mut self, cpu: Cpu, ns: Ns) {
        if ns == 0 {
            return;
        }
        let now = self.now();
        self.commit_progress(cpu);
        let rq = self.rq_mut(cpu);
        rq.progress_from = rq.progress_from.max(now) + ns;
        rq.irq_until = rq.irq_until.max(now) + ns;
        if rq.curr.is_some() {
            self.arm_step(cpu);
        }
    }

    /// __schedule(): put the current task away, pick the next and switch.
    pub(crate) fn schedule(&mut self, cpu: Cpu) {
        let now = self.now();
        let prev = self.rq(cpu).curr;
        if let Some(p) = prev {
            self.commit_progress(cpu);
            class_of(self.task(p).class).update_curr(self, cpu);
            let state = self.task(p).state;
            if state != TaskState::Runnable && self.task(p).on_rq {
                let flags = if state == TaskState::Dead { deq::SLEEP | deq::SPECIAL } else { deq::SLEEP };
                self.deactivate_task(cpu, p, flags);
            }
        }
        let next = self.pick_next_task(cpu, prev);
        if let Some(n) = next {
            self.scx_switch_class(cpu, n);
        }
        // clear_tsk_need_resched(prev), after the pick as in __schedule():
        // a reschedule asked for while prev was still current (mostly its
        // own update_curr() finding the slice used up) is answered by this
        // very switch, not by a second one at the end of it. Here the pick
        // does not put prev away: a request put_prev_task() makes below
        // stays, as it must when sched_ext puts prev back into the local
        // DSQ of a CPU that is going idle (SCX_ENQ_LAST).
        self.rq_mut(cpu).need_resched = false;
        if next == prev {
            if let Some(p) = prev {
                self.hrtick_restart(cpu, p);
                self.arm_step(cpu);
            }
            return;
        }
        if let Some(p) = prev {
            self.rqs[cpu as usize].scx.next_idle = next.is_none();
            class_of(self.task(p).class).put_prev_task(self, cpu, p);
            self.rqs[cpu as usize].scx.next_idle = false;
            if self.task(p).state == TaskState::Dead {
                self.scx_task_dead(p);
            }
            let t = self.task_mut(p);
            t.last_ran = now;
            t.stats.switches += 1;
            if t.state == TaskState::Runnable {
                t.wait_start = Some(now);
            } else {
                t.stats.voluntary_switches += 1;
            }
        }
        self.rq_mut(cpu).stats.switches += 1;
        self.engine.mix(((cpu as u64) << 32) | next.map_or(u32::MAX, |n| n) as u64);
        if self.scx.traces_switch {
            let preempt = prev.is_some_and(|p| self.task(p).state == TaskState::Runnable);
            self.scx_trace_sched_switch(cpu, preempt, prev, next);
        }
        match next {
            Some(n) => {
                self.switch_in(cpu, n, prev.is_none());
                self.hrtick_restart(cpu, n);
            }
            None => {
                self.hrtick_clear(cpu);
                self.switch_to_idle(cpu);
            }
        }
    }


    fn switch_in(&mut self, cpu: Cpu, n: TaskId, from_idle: bool) {
        let now = self.now();
        self.trace_switch(cpu, Some(n));
        self.scx_gp_task_ran(n);
        class_of(self.task(n).class).set_next_task(self, cpu, n, true);
        let start = now.max(self.rq(cpu).irq_until);
        // Interrupt work still charged to this CPU is not the new task's
        // time: its clock starts when that work is done.
        if start > now {
            self.task_mut(n).se.exec_start = start;
        }
        let migration_cost = self.tunables.fair.migration_cost_ns;
        let mut switch_cost = self.costs.context_switch_ns;
        if self.rq(cpu).last_tgid != Some(self.task(n).tgid) {
            switch_cost += self.costs.mm_switch_ns;
        }
        let tgid = self.task(n).tgid;
        self.rq_mut(cpu).last_tgid = Some(tgid);
        let t = self.task_mut(n);
        if t.ran_on_last != cpu {
            t.ran_on_last = cpu;
            self.note_ran_on(n, cpu);
        }
        self.set_curr(cpu, Some(n));
        {
            let rq = self.rq_mut(cpu);
            rq.progress_from = start + switch_cost;
            if from_idle {
                // rq->avg_idle: a running average (1/8 weight) of idle periods,
                // capped at twice the migration cost.
                if let Some(since) = rq.idle_since.take() {
                    let delta = (now - since) as i64;
                    let avg = rq.avg_idle as i64;
                    rq.avg_idle = ((avg + (delta - avg) / 8).max(0) as Ns).min(2 * migration_cost);
                }
                rq.busy_since = now;
            }
        }
        if from_idle {
            self.nohz.exit_idle(cpu);
            self.update_idle_core(cpu, false);
            self.scx_update_idle(cpu, false);
        }
        let t = self.task_mut(n);
        // A spinner coming back on a CPU looks at the lock again first.
        t.spin_retry = t.spinning.is_some();
        if let Some(ws) = t.wait_start.take() {
            t.stats.wait_ns += now - ws;
            let g = t.cgrp;
            if g != 0 {
                self.cg.charge(g, now - ws, true);
            }
        }
        self.arm_step(cpu);
        if !self.rq(cpu).tick_armed {
            let tick = self.costs.tick_ns();
            let next_tick = (now / tick + 1) * tick;
            self.rq_mut(cpu).tick_armed = true;
            self.engine.schedule(next_tick, Event::Tick { cpu });
        }
    }

    fn switch_to_idle(&mut self, cpu: Cpu) {
        let now = self.now();
        self.trace_switch(cpu, None);
        self.cancel_step(cpu);
        self.set_curr(cpu, None);
        {
            let rq = self.rq_mut(cpu);
            rq.stats.busy_ns += now.saturating_sub(rq.busy_since);
            rq.idle_since = Some(now);
        }
        self.nohz.enter_idle(cpu);
        self.update_idle_core(cpu, true);
        self.scx_update_idle(cpu, true);
    }

    /// Keeps the LLC's has_idle_cores hint (set when a whole core goes idle).
    fn update_idle_core(&mut self, cpu: Cpu, idle: bool) {
        if !idle {
            return;
        }
        let core_idle = self.topo.smt_siblings(cpu as usize).iter().all(|c| self.rqs[c].curr.is_none());
        if core_idle {
            let llc = self.topo.llc_of(cpu as usize);
            self.llc_has_idle_cores[llc] = true;
        }
    }

    /// pick_next_task(): the classes in priority order, highest first
    /// (for_each_active_class), newidle balance before idling. The fair
    /// class is asked only when its root runqueue has entities, since its
    /// pick would begin by finding it empty, and ext only while a
    /// scheduler is loaded, as next_active_class() skips it.
    fn pick_next_task(&mut self, cpu: Cpu, prev: Option<TaskId>) -> Option<TaskId> {
        self.balance_rt(cpu, prev);
        for _attempt in 0..3 {
            if self.rq(cpu).fair_server_active {
                if let Some(p) = self.pick_task_fair::<true>(cpu) {
                    return Some(p);
                }
                if let Some(p) = Class::Ext.pick_task(self, cpu) {
                    return Some(p);
                }
            }
            if let Some(p) = Class::Rt.pick_task(self, cpu) {
                return Some(p);
            }
            if self.rq(cpu).cfs.nr_queued > 0 {
                if let Some(p) = Class::Fair.pick_task(self, cpu) {
                    return Some(p);
                }
            }
            if self.scx.enabled() {
                if let Some(p) = Class::Ext.pick_task(self, cpu) {
                    return Some(p);
                }
            }
            // Nothing runnable: newly idle balance may pull work.
            if !self.sched_balance_newidle(cpu) {
                break;
            }
        }
        None
    }

    /// The scheduler tick on a busy CPU (sched_tick).
    pub(crate) fn on_tick(&mut self, cpu: Cpu) {
        let now = self.now();
        let Some(curr) = self.rq(cpu).curr else {
            // nohz: an idle CPU's tick stops.
            self.rq_mut(cpu).tick_armed = false;
            return;
        };
        self.commit_progress(cpu);
        class_of(self.task(curr).class).task_tick(self, cpu, curr);
        self.rt_bandwidth_tick(cpu);
        self.trigger_load_balance(cpu);
        self.arm_step(cpu);
        // The tick hrtimer is forwarded to the next period boundary, so a
        // late (IRQ-deferred) tick does not shift the ones after it.
        let tick = self.costs.tick_ns();
        self.engine.schedule_tick((now / tick + 1) * tick, cpu);
    }

    /// A sleep timer fires on the CPU the task slept on.
    pub(crate) fn on_timer(&mut self, p: TaskId) {
        let cpu = self.task(p).cpu;
        self.this_cpu = cpu;
        let now = self.now();
        // An idle CPU first leaves its idle state; the handler runs after.
        if let Some(since) = self.rq(cpu).idle_since {
            let exit = self.costs.idle_exit_ns(now - since);
            if exit > 0 && self.rq(cpu).irq_until < now {
                self.rq_mut(cpu).idle_since = Some(now);
                self.rq_mut(cpu).irq_until = now + exit;
                let gen = self.task(p).timer_gen;
                self.engine.schedule(now + exit, Event::Timer { task: p, gen });
                return;
            }
        }
        let cost = self.costs.wakeup_ns;
        self.charge_irq(cpu, cost);
        self.try_to_wake_up(p, 0);
    }

    /// yield_to(): core part (same class, target not running); returns true if yielded.
    pub(crate) fn yield_to(&mut self, cpu: Cpu, target: TaskId) -> bool {
        let curr = match self.rq(cpu).curr {
            Some(c) => c,
            None => return false,
        };
        let t = self.task(target);
        if t.state != TaskState::Runnable || !t.on_rq || t.class != self.task(curr).class {
            return false;
        }
        let tcpu = t.cpu;
        if self.rq(tcpu).curr == Some(target) {
            return false;
        }
        let cls = class_of(self.task(curr).class);
        let yielded = cls.yield_to_task(self, cpu, target);
        if yielded && tcpu != cpu {
            self.resched_curr(tcpu);
        }
        yielded
    }

    /// Charges `p`'s execution since its exec_start (update_se): advances
    /// exec_start and the runtime totals, and returns the delta (0 if none).
    pub(crate) fn update_se(&mut self, p: TaskId) -> Ns {
        let now = self.now();
        let t = &mut self.tasks[p as usize];
        if now <= t.se.exec_start {
            return 0;
        }
        let delta = now - t.se.exec_start;
        t.se.exec_start = now;
        t.se.sum_exec_runtime += delta;
        t.stats.runtime_ns += delta;
        let g = t.cgrp;
        if g != 0 {
            self.cg.charge(g, delta, false);
        }
        delta
    }

    /// Preempts `p` running on `src` and moves it to `dst` (the migration
    /// stopper used by active balancing).
    pub fn preempt_and_migrate(&mut self, src: Cpu, p: TaskId, dst: Cpu) {
        let now = self.now();
        self.commit_progress(src);
        class_of(self.task(p).class).update_curr(self, src);
        class_of(self.task(p).class).put_prev_task(self, src, p);
        self.set_curr(src, None);
        {
            let rq = self.rq_mut(src);
            rq.stats.busy_ns += now.saturating_sub(rq.busy_since);
            rq.busy_since = now;
        }
        let t = self.task_mut(p);
        t.last_ran = now;
        t.stats.switches += 1;
        t.wait_start = Some(now);
        self.move_queued_task(p, dst);
        // src now has no current task: let it pick (or idle) right away.
        self.rq_mut(src).idle_since = None;
        self.cancel_step(src);
        let saved = self.this_cpu;
        self.this_cpu = src;
        self.schedule_from_none(src);
        self.this_cpu = saved;
        self.resched_curr(dst);
    }

    /// schedule() on a CPU whose current task was taken away.
    fn schedule_from_none(&mut self, cpu: Cpu) {
        self.rq_mut(cpu).need_resched = false;
        match self.pick_next_task(cpu, None) {
            Some(n) => {
                self.rq_mut(cpu).stats.switches += 1;
                self.switch_in(cpu, n, false);
            }
            None => self.switch_to_idle(cpu),
        }
    }

    /// Runs every check the engine promises after an event (debug builds).
    pub(crate) fn assert_invariants(&self) {
        // Cost is O(queued tasks), not O(all tasks ever created): it runs after
        // every event. Saved lags of dequeued tasks are checked at dequeue.
        let overloaded = self.rqs.iter().filter(|rq| rq.nr_running > 1).count() as u32;
        assert_eq!(self.rd.nr_overloaded, overloaded, "overloaded-CPU count drifted");
        let rt_queued: u32 = self.rqs.iter().map(|rq| rq.rt.rt_nr_running).sum();
        assert_eq!(self.rt_queued, rt_queued, "queued-RT-task count drifted");
        for (c, rq) in self.rqs.iter().enumerate() {
            assert_eq!(rq.curr.unwrap_or(NO_CURR), self.curr_of[c], "cpu{c}: curr_of disagrees with rq->curr");
            assert_eq!(self.timeline_head_task(c as Cpu), self.cfs_first[c], "cpu{c}: cfs_first disagrees with the timeline");
            assert_eq!(
                rq.nr_running,
                rq.cfs.h_nr_queued + rq.rt.rt_nr_running + self.rqs[c].scx.nr_running,
                "cpu{c}: nr_running disagrees with the class queues"
            );
            let fair = rq.cfs.lru.iter().map(|&(_, p)| p);
            let rt_lists = if rq.rt.rt_nr_running > 0 { &rq.rt.queues[..] } else { &[] };
            let rt = rt_lists.iter().flatten().copied();
            for p in fair.chain(rt) {
                let t = self.task(p);
                assert!(t.on_rq && t.cpu as usize == c, "task {p} queued on cpu{c} but not marked so");
                assert!(t.cpus_allowed.test(c), "task {p} queued on cpu{c} outside its affinity");
                assert!(t.class != ClassId::Idle);
            }
            if let Some(p) = rq.curr {
                let t = self.task(p);
                assert_eq!(t.cpu as usize, c, "running task {p} not on its rq");
                assert!(t.cpus_allowed.test(c), "task {p} runs on cpu{c} outside its affinity");
                assert!(t.on_rq, "running task {p} is not queued");
            }
            if rq.cfs.curr.is_some() || rq.cfs.nr_queued > 0 {
                fair_check::assert_cfs_invariants(self, c as Cpu);
            }
        }
        self.check_scx();
    }
}
