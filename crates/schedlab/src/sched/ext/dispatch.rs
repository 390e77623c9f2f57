//! Getting tasks out of DSQs to run: balance_one() and ops.dispatch(),
//! the dispatch buffer (flush_dispatch_buf(), finish_dispatch()),
//! consume_dispatch_q(), dispatch_to_local_dsq() and moving tasks between
//! runqueues; then the deferred work that reenqueues (SCX_ENQ_IMMED,
//! reenq_local(), user DSQs) and the CPU kicks (ext.c, 7.1). Putting tasks
//! into DSQs is `enqueue`.
use crate::engine::{Cpu, Event, TaskId};
use crate::sched::features::Feature;
use crate::sched::deq;
use crate::sched::enq;
use crate::sched::ext::dsq::{DsqIdx, DsqKind};
use crate::sched::ext::ops::{dsq_id, enq_flags, kick_flags, ops_flags, reenq_reason, task_flags, Op, DSP_MAX_LOOPS, REENQ_ANY, REENQ_LOCAL_MAX_REPEAT};
use crate::sched::ext::{rq_flags, DspEntry, OpsState};
use crate::sched::sim::Sim;
use crate::sched::task::{ClassId, TaskState};

impl Sim {
    /// Whether the shared-DSQ loops must stop at once because the scheduler
    /// is being ejected (6.19+ `scx_aborting`; before, CPUs kept scanning).
    pub(crate) fn scx_aborting(&self) -> bool {
        self.scx.exit.is_some() && self.features.on(Feature::SCX_BYPASS_PERCPU)
    }

    /// finish_dispatch(): commit one buffered insert, unless the task was
    /// dequeued or re-enqueued since (its qseq changed): then drop it quietly.
    fn scx_finish_dispatch(&mut self, cpu: Cpu, e: DspEntry) {
        match self.task(e.task).scx.ops_state {
            OpsState::Queued { qseq } if qseq == e.qseq => {}
            _ => {
                self.scx.stats.stale_dispatches += 1;
                return;
            }
        }
        self.task_mut(e.task).scx.ops_state = OpsState::Dispatching;
        self.scx.stats.dispatched += 1;
        let dsq = self.scx_find_dsq(cpu, e.dsq_id, e.task);
        if let DsqKind::Local(target) = self.scx.dsqs[dsq as usize].kind {
            self.scx_dispatch_to_local(target, e.task, e.enq_flags);
        } else {
            self.scx_dispatch_enqueue(dsq, e.task, e.enq_flags);
        }
    }

    /// flush_dispatch_buf().
    #[inline]
    pub(crate) fn scx_flush_dispatch_buf(&mut self, cpu: Cpu) {
        if !self.scx.dsp_buf.is_empty() {
            self.scx_flush_dispatch_buf_work(cpu);
        }
    }

    #[inline(never)]
    fn scx_flush_dispatch_buf_work(&mut self, cpu: Cpu) {
        let mut buf = std::mem::take(&mut self.scx.dsp_buf);
        for e in buf.iter().copied() {
            self.scx_finish_dispatch(cpu, e);
        }
        buf.clear();
        if self.scx.dsp_buf.is_empty() {
            self.scx.dsp_buf = buf;
        }
    }

    /// task_can_run_on_remote_rq().
    pub(crate) fn scx_can_run_on(&mut self, p: TaskId, cpu: Cpu, enforce: bool) -> bool {
        if !self.task(p).allowed_on(cpu as usize) {
            if enforce {
                let comm = self.task_comm(p);
                self.scx_error(format!("SCX_DSQ_LOCAL[_ON] target CPU {cpu} not allowed for {comm}"));
            }
            return false;
        }
        true
    }

    /// dispatch_to_local_dsq(): put a task the scheduler released into
    /// `dst`'s local DSQ, moving it between runqueues if needed.
    pub(crate) fn scx_dispatch_to_local(&mut self, dst: Cpu, p: TaskId, flags: u64) {
        let src = self.task(p).cpu;
        let this = self.this_cpu;
        if src == dst && src == this {
            let local = self.scx.local(dst);
            self.scx_dispatch_enqueue(local, p, flags);
            return;
        }
        // Everything below happens under the source's rq lock (switched
        // to from this CPU's own when the task is elsewhere).
        let fallback = src != dst && !self.scx_can_run_on(p, dst, true);
        let staying = !fallback && (src == dst || self.rq(src).curr == Some(p));
        if !fallback && !staying {
            self.scx_move_remote_to_local(p, dst, flags);
            return;
        }
        let remote = src != this;
        if remote {
            self.scx_rq_lock(src);
        }
        if staying {
            // Already on the target, or still on its CPU (being switched
            // out): it stays on the source.
            let local = self.scx.local(src);
            self.scx_dispatch_enqueue(local, p, flags);
        } else {
            let g = self.scx.global(self.topo.node_of(src as usize) as u32);
            self.scx_dispatch_enqueue(g, p, flags | enq_flags::GDSQ_FALLBACK);
        }
        if remote {
            self.scx_rq_unlock(src);
        }
    }

    /// move_remote_task_to_local_dsq(): deactivate on the source runqueue,
    /// set_task_cpu(), activate on the destination with a sticky CPU so that
    /// enqueue puts it straight into the local DSQ. ops.runnable/quiescent
    /// are not called for this internal migration.
    ///
    /// The source's rq lock is held for the detach, the destination's for
    /// the attach; either is a remote lock with its wait unless it is this
    /// CPU's own (consume_remote_task() and switch_rq_lock()).
    pub(crate) fn scx_move_remote_to_local(&mut self, p: TaskId, dst: Cpu, flags: u64) {
        let src = self.task(p).cpu;
        debug_assert_eq!(self.task(p).class, ClassId::Ext, "only ext tasks sit in DSQs");
        debug_assert_ne!(src, dst);
        let detach_ns = self.costs.rq_detach_ns.min(self.costs.migrate_task_ns);
        self.scx_rq_locked_work(src, detach_ns);
        // deactivate_task(), set_task_cpu() and activate_task() of an ext
        // task (no class to look up; ext has no migrate_task_rq hook),
        // with their flags constant.
        self.scx_dequeue_task(src, p, deq::MOVE | deq::MIGRATING);
        self.finish_dequeue(src, p);
        self.set_task_cpu_common(p, src, dst);
        self.task_mut(p).scx.c.live_mut().cpu = dst;
        let hflags = if flags & enq_flags::HEAD != 0 { enq::HEAD } else { 0 };
        self.rq_add_running(dst);
        let extra = flags & !(enq_flags::HEAD | enq_flags::WAKEUP);
        self.scx_enqueue_task(dst, p, enq::MOVE | enq::MIGRATING | hflags, extra, Some(dst));
        self.task_mut(p).on_rq = true;
        self.scx_rq_locked_work(dst, self.costs.migrate_task_ns - detach_ns);
        // Wake the destination if it idles (resched if its class is below ours).
        if self.rq(dst).curr.is_none() {
            self.resched_curr(dst);
        }
    }

    /// consume_dispatch_q(): move the first task of `dsq` this CPU can run
    /// into its local DSQ. Tasks it cannot run are skipped, at a cost.
    /// Inlined up to the test for an empty DSQ (balance tries the global
    /// DSQ on every pick; most schedulers leave it empty).
    #[inline]
    pub(crate) fn scx_consume_dsq(&mut self, cpu: Cpu, dsq: DsqIdx, flags: u64) -> bool {
        if self.scx.dsqs[dsq as usize].nr() == 0 {
            return false;
        }
        self.scx_consume_dsq_work(cpu, dsq, flags)
    }

    #[inline(never)]
    fn scx_consume_dsq_work(&mut self, cpu: Cpu, dsq: DsqIdx, flags: u64) -> bool {
        let bypass_dsq = matches!(self.scx.dsqs[dsq as usize].kind, DsqKind::Bypass(_));
        if self.scx_aborting() && !bypass_dsq {
            return false;
        }
        // One walk from the head; nothing changes the DSQ during it. The
        // head is nearly always taken (most tasks may run anywhere): it is
        // tested before setting up the walk over the blocks.
        let list = &self.scx.dsqs[dsq as usize].list;
        let (scanned, found) = match list.first() {
            Some((_, p)) if self.tasks[p as usize].allowed_on(cpu as usize) => (1u64, Some(p)),
            _ => {
                let mut scanned = 0u64;
                let mut found = None;
                for (_, p) in list.iter() {
                    scanned += 1;
                    if self.tasks[p as usize].allowed_on(cpu as usize) {
                        found = Some(p);
                        break;
                    }
                }
                (scanned, found)
            }
        };
        self.scx.stats.dsq_scanned += scanned;
        self.scx_dsq_lock(dsq, scanned);
        let Some(p) = found else { return false };
        if let Some(hint) = self.scx.consumed_from.get_mut(cpu as usize) {
            *hint = dsq;
        }
        // dispatch_dequeue() of a task in a shared DSQ, inlined: nothing
        // of a local DSQ's accounting (the IMMED count, the residence
        // clock, which such a task does not run) applies to it.
        let t = &mut self.tasks[p as usize].scx;
        let d = &mut self.scx.dsqs[dsq as usize];
        match t.dsq {
            Some((at, key)) if at == dsq && t.local_since.is_none() && !matches!(d.kind, DsqKind::Local(_)) => {
                t.dsq = None;
                d.remove(key);
            }
            _ => self.scx_dispatch_dequeue(p),
        }
        if self.task(p).cpu == cpu {
            self.scx.stats.consumed_local += 1;
            let local = self.scx.local(cpu);
            self.scx_dispatch_enqueue(local, p, flags);
        } else {
            self.scx.stats.consumed_remote += 1;
            self.scx_move_remote_to_local(p, cpu, flags);
        }
        true
    }

    /// pick_task_scx()'s balance_one(): make sure the local DSQ has
    /// something to run, or decide to keep running the previous task
    /// (SCX_RQ_BAL_KEEP). Returns the previous task and whether to keep it.
    ///
    /// The runqueue is looked up once for what comes before the scheduler
    /// is called (pnt_seq, the own rq lock, the flags) and once after.
    pub(crate) fn scx_balance_one(&mut self, cpu: Cpu) -> (Option<TaskId>, bool) {
        let c = cpu as usize;
        let now = self.now();
        let acc = self.scx.cost_acc;
        let r = &mut self.rqs[c];
        let prev = r.curr;
        r.scx.pnt_seq += 1;
        // scx_rq_lock_own(): wait for the remote holders ahead of us.
        let wait = r.scx.lock(now.max(r.irq_until) + acc, 0);
        let released = r.scx.flags & rq_flags::CPU_RELEASED != 0;
        r.scx.flags = (r.scx.flags & !(rq_flags::BAL_KEEP | rq_flags::CPU_RELEASED)) | rq_flags::IN_BALANCE;
        self.scx.cost_acc = acc + wait;
        self.scx.stats.rq_lock_wait_ns += wait;
        if released && self.scx.has(Op::CpuAcquire) && !self.scx.bypassing {
            self.scx_call(Op::CpuAcquire, cpu, None, |o, s| o.cpu_acquire(s, cpu));
        }
        let have = self.scx_balance_inner(cpu, prev);
        let keep = have == Balance::Keep;
        let r = &mut self.rqs[c].scx;
        if keep {
            r.flags |= rq_flags::BAL_KEEP;
        }
        // IMMED tasks queued behind another cannot run at once (the count,
        // rarely non-zero, is tested first).
        if have != Balance::None && r.nr_immed > 0 && self.scx.dsqs[self.scx.local(cpu) as usize].nr() > 1 {
            self.scx_schedule_reenq_local(cpu, 0);
        }
        let until = self.engine.now() + self.scx.cost_acc;
        let r = &mut self.rqs[c].scx;
        r.flags &= !rq_flags::IN_BALANCE;
        if !r.deferred_pending {
            debug_assert!(!r.deferred_any(), "deferred work of CPU {cpu} without deferred_pending");
            r.lock_held_until = r.lock_held_until.max(until);
            return (prev, keep);
        }
        // Work deferred while balancing runs now (the balance callback).
        self.scx_run_deferred_work(cpu);
        let until = self.now() + self.scx.cost_acc;
        let r = &mut self.rqs[c].scx;
        r.lock_held_until = r.lock_held_until.max(until);
        (prev, keep)
    }

    fn scx_balance_inner(&mut self, cpu: Cpu, prev: Option<TaskId>) -> Balance {
        let c = cpu as usize;
        let prev_ext = prev.filter(|&p| self.task(p).class == ClassId::Ext);
        let prev_queued = prev_ext.filter(|&p| self.task(p).scx.queued() && self.task(p).state == TaskState::Runnable);
        if let Some(p) = prev_queued {
            self.update_curr_scx(cpu);
            if self.task(p).scx.slice() > 0 && !self.scx.bypassing {
                return Balance::Keep;
            }
        }
        let local = self.scx.local(cpu);
        if self.scx.dsqs[local as usize].nr() > 0 {
            return Balance::Tasks;
        }
        let g = self.scx.global(self.topo.node_of(c) as u32);
        if self.scx_consume_dsq(cpu, g, 0) {
            return Balance::Tasks;
        }
        if self.scx.bypassing {
            if self.features.on(Feature::SCX_BYPASS_PERCPU) && self.scx_consume_dsq(cpu, self.scx.bypass_dsq(cpu), 0) {
                return Balance::Tasks;
            }
            return if prev_queued.is_some() { Balance::Keep } else { Balance::None };
        }
        if self.scx.has(Op::Dispatch) {
            let mut loops = DSP_MAX_LOOPS;
            loop {
                self.scx.dsp_nr_tasks = 0;
                self.scx_call(Op::Dispatch, cpu, None, |o, s| o.dispatch(s, cpu, prev_ext));
                self.scx_flush_dispatch_buf(cpu);
                if self.scx.bypassing {
                    break;
                }
                if let Some(p) = prev_queued {
                    if self.task(p).scx.slice() > 0 {
                        return Balance::Keep;
                    }
                }
                if self.scx.dsqs[local as usize].nr() > 0 {
                    return Balance::Tasks;
                }
                if self.scx_consume_dsq(cpu, g, 0) {
                    return Balance::Tasks;
                }
                loops -= 1;
                if loops == 0 {
                    // The scheduler keeps dispatching elsewhere: retry later.
                    self.scx_queue_kick(cpu, 0);
                    break;
                }
                if self.scx.dsp_nr_tasks == 0 {
                    break;
                }
            }
        }
        // Nothing else to run: keep prev unless the scheduler asked to see it
        // (SCX_OPS_ENQ_LAST).
        if prev_queued.is_some() && (self.scx.ops_flags & ops_flags::ENQ_LAST == 0 || self.scx.bypassing) {
            return Balance::Keep;
        }
        Balance::None
    }

    /// schedule_reenq_local(): ask for `cpu`'s local DSQ to be reenqueued
    /// (`flags` = SCX_REENQ_ANY for every task, 0 for the IMMED pass).
    pub(crate) fn scx_schedule_reenq_local(&mut self, cpu: Cpu, flags: u64) {
        if self.scx.bypassing {
            return;
        }
        let r = &mut self.rqs[cpu as usize].scx;
        r.reenq_local = Some(r.reenq_local.unwrap_or(0) | flags);
        r.deferred_pending = true;
        self.scx_schedule_deferred(cpu);
    }

    /// schedule_dsq_reenq() for user DSQ `dsq`: this CPU reenqueues it.
    pub(crate) fn scx_schedule_reenq_user(&mut self, cpu: Cpu, dsq: u32, flags: u64) {
        if self.scx.bypassing {
            return;
        }
        let r = &mut self.rqs[cpu as usize].scx;
        match r.reenq_users.iter_mut().find(|(d, _)| *d == dsq) {
            Some(e) => e.1 |= flags,
            None => r.reenq_users.push((dsq, flags)),
        }
        r.deferred_pending = true;
        self.scx_schedule_deferred(cpu);
    }

    /// schedule_deferred_locked() / schedule_deferred(): deferred work of
    /// `cpu` runs at the end of that CPU's balance or wakeup if one is in
    /// progress (balance callback, wakeup hook); otherwise through irq_work,
    /// on the target CPU (7.1, an IPI) or on the calling CPU (before 7.1:
    /// when it enables interrupts again).
    pub(crate) fn scx_schedule_deferred(&mut self, cpu: Cpu) {
        let r = &self.rqs[cpu as usize].scx;
        if r.flags & (rq_flags::IN_BALANCE | rq_flags::IN_WAKEUP) != 0 || r.deferred_work_queued {
            return;
        }
        self.rqs[cpu as usize].scx.deferred_work_queued = true;
        self.scx.stats.deferred_irq_works += 1;
        let this = self.this_cpu;
        if cpu != this {
            self.scx.stats.deferred_remote += 1;
        }
        if self.features.on(Feature::SCX_DEFERRED_ON_TARGET) && cpu != this {
            let at = self.now() + self.scx.cost_acc + self.costs.ipi_ns;
            self.engine.schedule(at, Event::ScxDeferred { cpu, on: cpu, ipi: true });
        } else {
            self.scx.local_irq_work.push(Event::ScxDeferred { cpu, on: this, ipi: false });
        }
    }

    /// The deferred irq_work runs on `on` for `cpu`'s runqueue.
    pub(crate) fn on_scx_deferred(&mut self, cpu: Cpu, on: Cpu) {
        self.this_cpu = on;
        self.rqs[cpu as usize].scx.deferred_work_queued = false;
        if !self.scx.enabled() {
            return;
        }
        if on != cpu {
            // Working on a remote runqueue: its lock and cache lines come over.
            self.scx.cost_acc += self.costs.xllc_msg_ns;
        }
        self.scx_run_deferred(cpu);
    }

    /// run_deferred(): remote direct dispatches, then a requested reenqueue
    /// of the local DSQ.
    #[inline]
    pub(crate) fn scx_run_deferred(&mut self, cpu: Cpu) {
        // Runs at every balance and wakeup; there is rarely anything to do.
        let r = &self.rqs[cpu as usize].scx;
        debug_assert!(r.deferred_pending || !r.deferred_any(), "deferred work of CPU {cpu} without deferred_pending");
        if !r.deferred_pending {
            return;
        }
        self.scx_run_deferred_work(cpu);
    }

    // Kept out of line so that callers inline only the check above.
    #[inline(never)]
    fn scx_run_deferred_work(&mut self, cpu: Cpu) {
        let c = cpu as usize;
        let r = &mut self.rqs[c].scx;
        if !r.deferred_any() {
            // The flag outlived the work (a run nested in this CPU's own
            // deferred run took it): nothing to do, as the lists say.
            r.deferred_pending = false;
            return;
        }
        if !self.scx.enabled() {
            return;
        }
        while !self.rqs[c].scx.ddsp_deferred.is_empty() {
            let p = self.rqs[c].scx.ddsp_deferred.remove(0);
            let Some((id, flags)) = self.task_mut(p).scx.ddsp.take() else { continue };
            if !self.task(p).scx.queued() || self.task(p).cpu != cpu || self.task(p).scx.dsq.is_some() {
                continue;
            }
            let target = (id & dsq_id::LOCAL_CPU_MASK) as Cpu;
            self.scx_dispatch_to_local(target, p, flags);
        }
        self.rqs[c].scx.reenq_repeat = 0;
        while let Some(flags) = self.rqs[c].scx.reenq_local.take() {
            self.rqs[c].scx.reenq_repeat += 1;
            if self.rqs[c].scx.reenq_repeat > REENQ_LOCAL_MAX_REPEAT {
                self.scx_error(format!("SCX_ENQ_REENQ on SCX_DSQ_LOCAL repeated {} times", REENQ_LOCAL_MAX_REPEAT));
                break;
            }
            self.scx_reenq_local(cpu, flags);
        }
        // process_deferred_reenq_users(): reenq_user() of each DSQ, every
        // task from the head back to ops.enqueue() (SCX_TASK_REENQ_KFUNC).
        while !self.rqs[c].scx.reenq_users.is_empty() {
            let (dsq, flags) = self.rqs[c].scx.reenq_users.remove(0);
            if self.scx.dsqs[dsq as usize].destroyed || flags & REENQ_ANY == 0 {
                continue;
            }
            let tasks: Vec<TaskId> = self.scx.dsqs[dsq as usize].list.values().collect();
            for p in tasks {
                if self.scx.bypassing || self.task(p).scx.dsq.map(|d| d.0) != Some(dsq) {
                    continue;
                }
                self.scx_dispatch_dequeue(p);
                self.scx.stats.reenqueued += 1;
                self.task_mut(p).scx.c.scx.flags |= reenq_reason::KFUNC;
                let tcpu = self.task(p).cpu;
                self.scx_do_enqueue(tcpu, p, enq_flags::REENQ, None);
                self.task_mut(p).scx.c.scx.flags &= !reenq_reason::MASK;
            }
        }
        let r = &mut self.rqs[c].scx;
        r.deferred_pending = r.deferred_any();
    }

    /// reenq_local(): walk the local DSQ from the head. The first task may
    /// stay if the CPU can take it now; every other IMMED task goes back to
    /// ops.enqueue() with SCX_ENQ_REENQ, and with SCX_REENQ_ANY all do.
    pub(crate) fn scx_reenq_local(&mut self, cpu: Cpu, flags: u64) -> u32 {
        let local = self.scx.local(cpu);
        let open = self.scx_rq_is_open(cpu, 0);
        let tasks: Vec<TaskId> = self.scx.dsqs[local as usize].list.values().collect();
        let mut picked = Vec::new();
        for (i, &p) in tasks.iter().enumerate() {
            let immed = self.task(p).scx.has_flag(task_flags::IMMED);
            let reason = if flags & REENQ_ANY != 0 {
                reenq_reason::KFUNC
            } else if immed && !(i == 0 && open) {
                reenq_reason::IMMED
            } else {
                continue;
            };
            picked.push((p, reason));
        }
        for &(p, _) in &picked {
            self.scx_dispatch_dequeue(p);
        }
        for &(p, reason) in &picked {
            self.scx.stats.reenqueued += 1;
            self.task_mut(p).scx.c.scx.flags |= reason;
            self.scx_do_enqueue(cpu, p, enq_flags::REENQ, None);
            self.task_mut(p).scx.c.scx.flags &= !reenq_reason::MASK;
        }
        picked.len() as u32
    }

    /// scx_bpf_kick_cpu(): queue the kick on this CPU's kick irq_work.
    pub(crate) fn scx_queue_kick(&mut self, target: Cpu, flags: u64) {
        let this = self.this_cpu;
        let r = &mut self.rqs[this as usize].scx;
        r.kicks.push((target, flags));
        self.scx.kicks_queued += 1;
        if !r.kick_work_queued {
            r.kick_work_queued = true;
            self.scx.local_irq_work.push(Event::ScxKick { cpu: this });
        }
    }

    /// Raises the irq_works queued on this CPU during the event just
    /// handled: they run when it enables interrupts again, after the
    /// scheduler work it was doing.
    /// The test is inlined into every event's end; the work stays out of line.
    #[inline]
    pub(crate) fn scx_flush_local_irq_work(&mut self) {
        if !self.scx.local_irq_work.is_empty() {
            self.scx_flush_local_irq_work_now();
        }
    }

    #[inline(never)]
    fn scx_flush_local_irq_work_now(&mut self) {
        let cpu = self.this_cpu;
        let at = self.now().max(self.rq(cpu).irq_until);
        for ev in std::mem::take(&mut self.scx.local_irq_work) {
            self.engine.schedule(at, ev);
        }
    }

    /// Runs the kicks this CPU queued for itself during the event just
    /// handled, ahead of `finish_event`'s reschedule check.
    ///
    /// scx_bpf_kick_cpu() only records a kick and raises the kick irq_work
    /// of the calling CPU, which runs as soon as that CPU enables interrupts
    /// again: leaving the timer interrupt, or at the end of ttwu's IRQ-off
    /// section, before the reschedule the wakeup asked for. So a self-kick
    /// from ops.select_cpu/ops.enqueue ends the slice of the task being
    /// preempted, not the woken one's. Kicks of other CPUs stay in the
    /// irq_work event at `irq_until`, where their IPIs leave from; kicks
    /// queued during the switch itself (ops.dispatch, ops.stopping, ...)
    /// run after it, as on the kernel, where __schedule() keeps interrupts off.
    ///
    /// Inlined up to the test for no kicks at all (the common case on every
    /// event); the search and the work stay out of line.
    #[inline]
    pub(crate) fn scx_run_self_kicks(&mut self) {
        if self.scx.kicks_queued != 0 && !self.rqs[self.this_cpu as usize].scx.kicks.is_empty() {
            self.scx_run_self_kicks_now();
        }
    }

    #[inline(never)]
    fn scx_run_self_kicks_now(&mut self) {
        let cpu = self.this_cpu;
        let c = cpu as usize;
        if !self.rqs[c].scx.kicks.iter().any(|&(target, _)| target == cpu) {
            return;
        }
        let kicks = std::mem::take(&mut self.rqs[c].scx.kicks);
        let (own, others): (Vec<_>, Vec<_>) = kicks.into_iter().partition(|&(target, _)| target == cpu);
        self.scx.kicks_queued -= own.len() as u32;
        if others.is_empty() {
            // Nothing left for the irq_work: drop it unless already raised.
            let work = Event::ScxKick { cpu };
            let raised = self.scx.local_irq_work.len();
            self.scx.local_irq_work.retain(|&e| e != work);
            if self.scx.local_irq_work.len() != raised {
                self.rqs[c].scx.kick_work_queued = false;
            }
        }
        self.rqs[c].scx.kicks = others;
        if !self.scx.enabled() {
            return;
        }
        for (target, flags) in own {
            self.scx_kick_one(cpu, target, flags);
        }
    }

    /// kick_cpus_irq_workfn(): preempt or wake the CPUs kicked from `cpu`.
    pub(crate) fn on_scx_kick(&mut self, cpu: Cpu) {
        self.this_cpu = cpu;
        let kicks = std::mem::take(&mut self.rqs[cpu as usize].scx.kicks);
        self.scx.kicks_queued -= kicks.len() as u32;
        self.rqs[cpu as usize].scx.kick_work_queued = false;
        if !self.scx.enabled() {
            return;
        }
        for (target, flags) in kicks {
            self.scx_kick_one(cpu, target, flags);
        }
    }

    /// kick_one_cpu() / kick_one_cpu_if_idle(): one kick `cpu` carries out.
    fn scx_kick_one(&mut self, cpu: Cpu, target: Cpu, flags: u64) {
        self.scx.stats.kicks += 1;
        let curr = self.rq(target).curr;
        if flags & kick_flags::IDLE != 0 && curr.is_some() {
            return;
        }
        if curr.is_some_and(|c| matches!(self.task(c).class, ClassId::Rt)) {
            return;
        }
        if flags & kick_flags::PREEMPT != 0 {
            if let Some(c) = curr.filter(|&c| self.task(c).class == ClassId::Ext) {
                self.task_mut(c).scx.c.scx.slice = 0;
            }
        }
        if target == cpu {
            self.rq_mut(cpu).need_resched = true;
        } else {
            self.resched_curr(target);
        }
        if flags & kick_flags::WAIT != 0 && target != cpu && curr.is_some() {
            // The kicker waits until the target has switched.
            self.scx.cost_acc += 2 * self.costs.ipi_ns + self.costs.context_switch_ns;
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Balance {
    None,
    Tasks,
    Keep,
}
