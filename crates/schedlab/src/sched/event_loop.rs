//! The event loop: takes events off the engine's queue in `(time, seq)`
//! order and delivers them to their handlers (tick, timer, IPI, step end,
//! workload start, RT bandwidth, sched_ext's deferred work), the way the
//! kernel's interrupt entry does; then runs the return-from-interrupt path
//! (`finish_event`): the reschedule check, with sched_ext's hooks around
//! it.

use crate::engine::time::Ns;
use crate::engine::{Cpu, Event, TaskId, Upcoming};
use crate::sched::ext::abi::TaskStructC;
use crate::sched::{prefetch, SchedClass};
use crate::sched::sim::{IrqCtx, Sim, NO_CURR};
use crate::sched::task::TaskState;

/// Prefetches what a hosted scheduler's callbacks read of a task's C
/// `task_struct`: its head (ids, state, affinity), `se` and `scx`.
#[inline(always)]
fn prefetch_task_c(c: &TaskStructC) {
    prefetch(c);
    prefetch(&c.nr_cpus_allowed);
    prefetch(&c.cpus_ptr);
    prefetch(&c.se);
    prefetch(&c.scx);
    prefetch(&c.scx.runnable_at);
    prefetch(&c.scx.slice);
}

/// Above this many bytes of task and runqueue state, a simulation
/// prefetches ([`Sim::lookahead`]). Measured on a host with 1 MiB of L2
/// per core and 32 MiB of L3: EEVDF on 192 CPUs with 20,000 tasks (17 MB)
/// ran 5 % slower with it, and 4,096 CPUs with 100,000 tasks (85 MB) 14 %
/// faster.
const LOOKAHEAD_BYTES: usize = 32 << 20;

/// The same under a hosted scheduler, whose events read more lines of
/// each task (its C `task_struct` and sched_ext state): 512 CPUs with
/// 5,120 tasks (9 MB) ran 10 % faster with it, 1,024 CPUs (19 MB) 20 %.
const LOOKAHEAD_BYTES_HOSTED: usize = 4 << 20;

impl Sim {
    /// Runs the simulation to its end time.
    pub fn run(&mut self) {
        self.run_with_progress(&mut |_, _| {});
    }

    /// Schedules the workload starts and the end (once).
    fn start(&mut self) {
        if self.started {
            return;
        }
        self.started = true;
        let lookahead = self.lookahead_forced.unwrap_or_else(|| self.outgrows_caches());
        self.engine.set_lookahead(lookahead);
        for w in 0..self.workload_tasks.len() {
            let at = self.metrics[w].start_ns;
            self.engine.schedule(at, Event::WorkloadStart { workload: w as u32 });
        }
        for (i, w) in self.cg.writes.iter().enumerate() {
            self.engine.schedule(w.at, Event::CgroupWrite { index: i as u32 });
        }
        self.engine.schedule(self.end_ns, Event::End);
    }

    /// Whether the tasks and runqueues outgrow the caches, so that
    /// prefetching pays; below that it only adds instructions.
    fn outgrows_caches(&self) -> bool {
        use std::mem::size_of;
        let (task, limit) = if self.scx_views {
            (size_of::<crate::sched::task::Task>() + size_of::<TaskStructC>(), LOOKAHEAD_BYTES_HOSTED)
        } else {
            (size_of::<crate::sched::task::Task>(), LOOKAHEAD_BYTES)
        };
        self.tasks.len() * task + self.rqs.len() * size_of::<crate::sched::rq::Rq>() > limit
    }

    /// Processes every event up to and including time `limit`, then pauses;
    /// `run` resumes from there. For tests that intervene mid-run.
    pub fn run_until(&mut self, limit: Ns) {
        self.start();
        while !self.finished && self.engine.peek_time().is_some_and(|t| t <= limit) {
            let (t, ev) = self.engine.pop().expect("peeked");
            self.dispatch(t, ev);
        }
        self.flush_ran_on();
    }

    /// Runs the simulation, calling `progress(now, end)` every few thousand events.
    pub(crate) fn run_with_progress(&mut self, progress: &mut dyn FnMut(Ns, Ns)) {
        self.run_while(&mut |now, end| {
            progress(now, end);
            true
        });
    }

    /// `Self::run_with_progress` that stops when `keep_going(now, end)`,
    /// asked every 65,536 events, says false (an interrupt from a caller:
    /// Ctrl-C in Python). Returns false when stopped early; the run's
    /// results are then incomplete.
    pub fn run_while(&mut self, keep_going: &mut dyn FnMut(Ns, Ns) -> bool) -> bool {
        self.start();
        let mut n: u64 = 0;
        while let Some((t, ev)) = self.engine.pop() {
            if self.lookahead() {
                self.prefetch_upcoming(&ev);
            }
            if !self.dispatch(t, ev) {
                continue;
            }
            if self.finished {
                break;
            }
            n += 1;
            if n % 65_536 == 0 && !keep_going(t, self.end_ns) {
                self.flush_ran_on();
                return false;
            }
        }
        self.finish_accounting();
        true
    }

    /// Closes the books of a run that [`Self::run_while`] stopped early
    /// (`--max-wall`): CPU busy time, running tasks' runtime and waiting
    /// tasks' wait time are charged up to now, as at the scenario's end, so
    /// the results cover exactly the time simulated. The run cannot resume.
    pub fn finish_early(&mut self) {
        if !self.finished {
            self.finished = true;
            self.finish_accounting();
        }
    }

    /// Asks the CPU to start loading what the next event reads first
    /// while the current event runs: the task whose sleep timer it is, or
    /// the runqueue of the CPU whose step, tick or IPI it is and the task
    /// running there (before a step's end, also the task a fair pick would
    /// take next). With tens of thousands of tasks and thousands of
    /// CPUs these structures are not in any cache, and each event
    /// otherwise begins with a wait on memory. Under a hosted scheduler,
    /// the current event's task (prefetched during the last event) leads
    /// to its C `task_struct`, which is prefetched too; before a step's
    /// end, the CPU's local DSQ and the head of the DSQ it consumed from
    /// last (its task, then its C view and runqueue), before a wakeup the
    /// woken task's runqueue. A prefetch changes
    /// nothing but timing; a wrong guess costs a line of bandwidth.
    /// Out of line: inlined, its sched_ext part cost the event loop
    /// instructions on every event of runs that never prefetch.
    #[inline(never)]
    fn prefetch_upcoming(&self, current: &Event) {
        let ext = self.scx_views;
        if ext {
            let p = match *current {
                Event::Timer { task, .. } => task,
                Event::StepDone { cpu, .. } | Event::Tick { cpu } => self.curr_of.get(cpu as usize).copied().unwrap_or(NO_CURR),
                _ => NO_CURR,
            };
            if let Some(t) = self.tasks.get(p as usize) {
                if let Some(c) = t.scx.c.built() {
                    prefetch_task_c(c);
                }
                // A woken task is enqueued on its previous CPU unless
                // ops.select_cpu() finds another idle: that runqueue.
                if let Event::Timer { .. } = *current {
                    self.prefetch_scx_rq(t.cpu);
                }
            }
            if let Event::StepDone { cpu, .. } = *current {
                // The CPU's local DSQ, whose own lines came in during the
                // last event (below): its head block next.
                if let Some(d) = self.scx.dsqs.get(self.scx.local(cpu) as usize) {
                    d.prefetch_head_block();
                }
                // A step's end that blocks the task most likely pulls the
                // head of the DSQ this CPU consumed from last, which sits
                // on a remote runqueue: its task was prefetched during the
                // last event (below); its C view and runqueue follow now.
                if let Some(t) = self.scx.consume_hint(cpu).and_then(|h| self.tasks.get(h as usize)) {
                    if let Some(c) = t.scx.c.built() {
                        prefetch_task_c(c);
                    }
                    self.prefetch_scx_rq(t.cpu);
                }
            }
        }
        let next = self.engine.upcoming();
        match next {
            Upcoming::Task(p) => self.prefetch_task(p, ext),
            Upcoming::Step(c) | Upcoming::Cpu(c) => {
                if let Some(rq) = self.rqs.get(c as usize) {
                    prefetch(rq);
                    prefetch(&rq.step_gen);
                    prefetch(&rq.next_balance);
                }
                if let Some(&p) = self.curr_of.get(c as usize) {
                    self.prefetch_task(p, ext);
                }
                if let (Upcoming::Step(_), true) = (next, ext) {
                    if let Some(d) = self.scx.dsqs.get(self.scx.local(c) as usize) {
                        d.prefetch();
                    }
                    if let Some(t) = self.scx.consume_hint(c).and_then(|h| self.tasks.get(h as usize)) {
                        t.prefetch(true);
                    }
                }
                // A step's end may block the running task: the fair pick
                // that follows most likely takes the timeline's head.
                if let (Upcoming::Step(_), false) = (next, ext) {
                    if let Some(t) = self.cfs_first.get(c as usize).and_then(|&p| self.tasks.get(p as usize)) {
                        t.prefetch(false);
                    }
                }
            }
            Upcoming::Other => {}
        }
    }

    /// Prefetches what sched_ext reads of runqueue `cpu` when it moves a
    /// task on or off it (counts, the sched_ext state and its lock).
    #[inline(always)]
    fn prefetch_scx_rq(&self, cpu: Cpu) {
        if let Some(rq) = self.rqs.get(cpu as usize) {
            prefetch(rq);
            prefetch(&rq.nr_running);
            prefetch(&rq.scx.nr_running);
            prefetch(&rq.scx.lock_held_until);
        }
    }

    /// Prefetches task `p` (see `Task::prefetch`) and its random stream,
    /// which its next step draws from.
    #[inline(always)]
    fn prefetch_task(&self, p: TaskId, ext: bool) {
        if let Some(t) = self.tasks.get(p as usize) {
            t.prefetch(ext);
        }
        if let Some(r) = self.task_rngs.get(p as usize) {
            prefetch(r);
        }
    }

    /// Handles one event; returns false for a stale event that had no effect.
    /// Inlined into the event loop: a call per event, with the event
    /// passed through memory, cost more than the loop's other work.
    #[inline(always)]
    fn dispatch(&mut self, t: Ns, ev: Event) -> bool {
        // Each arm sets its context (IrqCtx::of gives the same, checked in
        // debug builds): a store, where classifying the event again was a
        // second match on it.
        match ev {
            Event::End => {
                self.irq_ctx = IrqCtx::Task;
                self.engine.account(t, &ev);
                self.finished = true;
                return true;
            }
            Event::StepDone { cpu, gen } => {
                self.irq_ctx = IrqCtx::Task;
                if self.rq(cpu).step_gen != gen {
                    return false;
                }
                self.rq_mut(cpu).step_at = None;
                self.engine.account(t, &ev);
                self.this_cpu = cpu;
                self.on_step_done(cpu);
            }
            Event::Tick { cpu } => {
                self.irq_ctx = IrqCtx::HardIrq;
                if self.irq_deferred(cpu, t, ev) {
                    return false;
                }
                self.engine.account(t, &ev);
                self.this_cpu = cpu;
                self.on_tick(cpu);
            }
            Event::Timer { task, gen } => {
                self.irq_ctx = IrqCtx::HardIrq;
                if self.task(task).timer_gen != gen || self.irq_deferred(self.task(task).cpu, t, ev) {
                    return false;
                }
                self.engine.account(t, &ev);
                self.on_timer(task);
            }
            Event::Ipi { cpu } => {
                self.irq_ctx = IrqCtx::HardIrq;
                if self.irq_deferred(cpu, t, ev) {
                    return false;
                }
                self.engine.account(t, &ev);
                self.this_cpu = cpu;
                self.on_ipi(cpu);
            }
            Event::WorkloadStart { workload } => {
                self.irq_ctx = IrqCtx::Task;
                self.engine.account(t, &ev);
                self.start_workload(workload);
            }
            Event::HrTick { cpu, gen } => {
                self.irq_ctx = IrqCtx::HardIrq;
                if self.rq(cpu).hrtick_gen != gen || self.irq_deferred(cpu, t, ev) {
                    return false;
                }
                self.engine.account(t, &ev);
                self.this_cpu = cpu;
                self.on_hrtick(cpu);
            }
            Event::IrqExit { cpu } => {
                self.irq_ctx = IrqCtx::Task;
                self.engine.account(t, &ev);
                self.this_cpu = cpu;
                self.rq_mut(cpu).irq_exit_pending = false;
            }
            Event::CgroupWrite { index } => {
                self.irq_ctx = IrqCtx::Task;
                // Written from user space; the writer is taken to run on
                // CPU 0 (its own cost is not modelled).
                self.engine.account(t, &ev);
                self.this_cpu = 0;
                self.cgroup_write(index);
            }
            Event::RtBandwidth { cpu } => {
                self.irq_ctx = IrqCtx::HardIrq;
                self.engine.account(t, &ev);
                self.this_cpu = cpu;
                self.on_rt_bandwidth(cpu);
            }
            Event::ScxDeferred { cpu, on, ipi } => {
                self.irq_ctx = IrqCtx::HardIrq;
                // IRQ-off windows are kernel sections. An IPI to a CPU that
                // runs a user task (the case irq_work_queue_on() is for) is
                // taken at once; irq_work raised on the calling CPU waits
                // for that CPU, which was in the kernel, to enable IRQs.
                let in_user = ipi && self.rq(on).curr.is_some() && self.rq(on).irq_until <= t;
                if !in_user && self.irq_deferred(on, t, ev) {
                    return false;
                }
                self.engine.account(t, &ev);
                self.on_scx_deferred(cpu, on);
            }
            Event::ScxKick { cpu } => {
                self.irq_ctx = IrqCtx::HardIrq;
                if self.irq_deferred(cpu, t, ev) {
                    return false;
                }
                self.engine.account(t, &ev);
                self.on_scx_kick(cpu);
            }
            Event::ScxTimer { id, gen } => {
                self.irq_ctx = IrqCtx::SoftIrq;
                let cpu = self.scx.timers.get(&id).map(|&(_, c)| c);
                if let Some(c) = cpu {
                    if self.irq_deferred(c, t, ev) {
                        return false;
                    }
                }
                self.engine.account(t, &ev);
                self.on_scx_timer(id, gen);
            }
            Event::ScxWatchdog => {
                self.irq_ctx = IrqCtx::Task;
                self.engine.account(t, &ev);
                self.on_scx_watchdog();
            }
            Event::ScxBypassLb => {
                self.irq_ctx = IrqCtx::SoftIrq;
                self.engine.account(t, &ev);
                self.on_scx_bypass_lb();
            }
            Event::ScxDisable => {
                self.irq_ctx = IrqCtx::Task;
                self.engine.account(t, &ev);
                self.on_scx_disable();
            }
            Event::ScxDisableStep => {
                self.irq_ctx = IrqCtx::Task;
                self.engine.account(t, &ev);
                self.on_scx_disable_step();
            }
            Event::ScxAttach => {
                self.irq_ctx = IrqCtx::Task;
                self.engine.account(t, &ev);
                if let Some(ops) = self.scx_pending.take() {
                    if let Err(e) = self.scx_enable(ops) {
                        self.scx.load_error = Some(e.to_string());
                    }
                }
            }
            Event::ScxDetach => {
                self.irq_ctx = IrqCtx::Task;
                self.engine.account(t, &ev);
                self.scx_unregister();
            }
            Event::CfsPeriod { tg, gen, slack } => {
                self.irq_ctx = IrqCtx::HardIrq;
                self.engine.account(t, &ev);
                self.on_cfs_bandwidth_timer(tg, gen, slack);
            }
        }
        debug_assert_eq!(self.irq_ctx, IrqCtx::of(&ev));
        self.finish_event();
        true
    }

    /// Defers an interrupt that arrives while `cpu` has interrupts disabled.
    fn irq_deferred(&mut self, cpu: Cpu, t: Ns, ev: Event) -> bool {
        // The CPU is still in interrupt or scheduler work charged to it
        // (charge_irq), which runs with interrupts off: take it after.
        let busy_until = self.rqs[cpu as usize].irq_until;
        if busy_until > t {
            self.engine.schedule(busy_until, ev);
            return true;
        }
        let Some(model) = self.irqoff.as_mut() else { return false };
        match model.disabled_until(cpu, t) {
            Some(end) => {
                self.engine.schedule(end, ev);
                true
            }
            None => false,
        }
    }

    /// Return-from-interrupt on the local CPU: reschedule if asked to.
    /// Inlined into the event loop up to its tests; the reschedule itself
    /// stays out of line.
    #[inline(always)]
    fn finish_event(&mut self) {
        let cpu = self.this_cpu;
        // Interrupts come back on, then the reschedule check, as on a
        // return from interrupt; the classes' work around it is theirs.
        self.scx_irq_exit_begin(cpu);
        if self.rq(cpu).need_resched {
            self.finish_resched(cpu);
        }
        self.scx_irq_exit_end(cpu);
        if self.check_invariants {
            self.assert_invariants();
        }
    }

    /// `finish_event`'s reschedule, `cpu` having been asked to.
    #[inline(never)]
    fn finish_resched(&mut self, cpu: Cpu) {
        let until = self.rq(cpu).irq_until;
        // A task that is preempted is switched at the return from the
        // interrupt. A task that blocks calls schedule() itself, at once,
        // and the idle task leaves at once too: the task switched in
        // starts its clock when the handler is done (switch_in).
        let preempted = self.rq(cpu).curr.is_some_and(|c| self.task(c).state == TaskState::Runnable);
        if preempted && until > self.now() {
            // The handler's work charged to this CPU runs first, on the
            // interrupted task's time (as without IRQ_TIME_ACCOUNTING);
            // schedule() comes at its exit, so the task switched in is
            // not charged for it.
            if !self.rq(cpu).irq_exit_pending {
                self.rq_mut(cpu).irq_exit_pending = true;
                self.engine.schedule(until, Event::IrqExit { cpu });
            }
        } else {
            self.schedule(cpu);
        }
    }

    fn start_workload(&mut self, w: u32) {
        let tasks = self.workload_tasks[w as usize].clone();
        let burst = self.group_memo_burst_begin();
        for p in tasks {
            // The launcher runs on CPU 0, or on the task's first allowed CPU if
            // it is pinned elsewhere; fork balancing then places the task.
            let parent_cpu = self.task(p).cpus_allowed.first().unwrap_or(0) as Cpu;
            self.this_cpu = parent_cpu;
            self.wake_up_new_task(p);
            self.finish_event();
        }
        self.group_memo_burst_end(burst);
    }

    fn finish_accounting(&mut self) {
        self.flush_ran_on();
        let now = self.now();
        for c in 0..self.nr_cpus() {
            let rq = &mut self.rqs[c];
            if rq.curr.is_some() {
                rq.stats.busy_ns += now.saturating_sub(rq.busy_since);
                rq.busy_since = now;
            }
            if let Some(p) = rq.curr {
                let cls = crate::sched::class_of(self.tasks[p as usize].class);
                cls.update_curr(self, c as Cpu);
            }
        }
        for t in &mut self.tasks {
            if let Some(ws) = t.wait_start.take() {
                t.stats.wait_ns += now.saturating_sub(ws);
                if t.cgrp != 0 {
                    self.cg.charge(t.cgrp, now.saturating_sub(ws), true);
                }
            }
        }
        if self.cfs_bandwidth_used() {
            self.finish_bandwidth_accounting();
        }
    }
}
