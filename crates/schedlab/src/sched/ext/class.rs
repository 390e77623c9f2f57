//! The sched_ext `SchedClass` hooks (enqueue_task_scx, dequeue_task_scx,
//! put_prev_task_scx, set_next_task_scx, pick_task_scx, task_tick_scx, ...),
//! following 7.1. Where 6.12 differs it is noted.

use crate::engine::{Cpu, TaskId};
use crate::sched::ext::ops::{self, deq_flags, enq_flags, reenq_reason, task_flags, CpuReleaseReason, Op, SLICE_INF};
use crate::sched::ext::{rq_flags, OpFrame, OpsState};
use crate::sched::{deq, enq, wf, SchedClass};
use crate::sched::sim::Sim;
use crate::sched::task::{ClassId, TaskState};

pub struct ExtClass;
/// The sched_ext class object (`ext_sched_class`).
pub static EXT_CLASS: ExtClass = ExtClass;

/// Core enqueue flags as SCX_ENQ_* (the low 32 bits are shared).
fn scx_enq_flags(flags: u32) -> u64 {
    let mut f = 0;
    if flags & enq::WAKEUP != 0 {
        f |= enq_flags::WAKEUP;
    }
    if flags & enq::HEAD != 0 {
        f |= enq_flags::HEAD;
    }
    if flags & enq::RQ_SELECTED != 0 {
        f |= enq_flags::CPU_SELECTED;
    }
    f
}

impl Sim {
    /// Calls one op of the loaded scheduler (SCX_CALL_OP): records the frame
    /// kfuncs check against, counts the call and charges its cost.
    /// Always inlined: its callers are each one op's, and the call would
    /// cost about what the book-keeping does.
    #[inline(always)]
    pub(crate) fn scx_call<R>(&mut self, op: Op, cpu: Cpu, task: Option<TaskId>, f: impl FnOnce(&dyn ops::ExtOps, &mut Sim) -> R) -> Option<R> {
        let ops = self.scx.ops.clone()?;
        // The caller's frame waits here (no stack of frames to grow).
        let outer = self.scx.frame.replace(OpFrame { op, cpu, task });
        let outer_ops = self.scx.frame_ops;
        self.scx.frame_ops |= 1 << op.index();
        self.scx.stats.op_calls[op.index()] += 1;
        self.scx.cost_acc += self.costs.scx_op_ns;
        let r = f(&*ops, self);
        self.scx.frame = outer;
        self.scx.frame_ops = outer_ops;
        Some(r)
    }

    /// update_curr_scx(): charge runtime and burn the slice.
    ///
    /// Inlined up to the test for nothing to charge: a switch updates the
    /// current task two or three times (the core's update, dequeue,
    /// put_prev) in one instant, and only the first finds time to charge.
    #[inline]
    pub(crate) fn update_curr_scx(&mut self, cpu: Cpu) {
        let Some(p) = self.rqs[cpu as usize].curr else { return };
        let t = &self.tasks[p as usize];
        if t.class != ClassId::Ext {
            return;
        }
        // update_se() would find no delta (its own test) and the view is
        // built: every write below would be of zero.
        if self.now() <= t.se.exec_start && t.scx.c.built().is_some() {
            return;
        }
        self.update_curr_scx_work(cpu, p);
    }

    #[inline(never)]
    fn update_curr_scx_work(&mut self, cpu: Cpu, p: TaskId) {
        let delta = self.update_se(p);
        // Nothing ran since the last charge (a second update in one event):
        // the writes below would add and take zero, unless the view is
        // still to be built, which the first write does.
        if delta == 0 && self.task(p).scx.c.built().is_some() {
            return;
        }
        // The ext server (6.19+) budgets sched_ext time like the fair server.
        self.rqs[cpu as usize].fair_time += delta;
        let c = &mut *self.tasks[p as usize].scx.c;
        c.se.sum_exec_runtime += delta;
        c.utime += delta;
        if c.scx.slice != SLICE_INF {
            c.scx.slice -= c.scx.slice.min(delta);
        }
    }

    /// set_task_runnable(): restart the watchdog clock if the task ran since.
    fn scx_set_runnable(&mut self, p: TaskId) {
        let now = self.now();
        let t = &mut self.tasks[p as usize].scx;
        if t.runnable_at.is_none() {
            t.runnable_at = Some(now);
            t.cx_mut().runnable_at = now;
        }
    }

    /// The task leaves the BPF scheduler's custody: ops.dequeue() (7.1: on
    /// every exit from custody; before 7.1 only when the kernel took a
    /// queued task back).
    ///
    /// Inlined up to the op call: most schedulers have no ops.dequeue, and
    /// then leaving custody is clearing the flag.
    #[inline]
    pub(crate) fn scx_leave_custody(&mut self, p: TaskId, flags: u64) {
        let t = &mut self.tasks[p as usize].scx;
        if t.has_flag(task_flags::IN_CUSTODY) {
            t.set_flag(task_flags::IN_CUSTODY, false);
            if self.scx.has(Op::Dequeue) {
                self.scx_call_dequeue(p, flags);
            }
        }
    }

    #[inline(never)]
    fn scx_call_dequeue(&mut self, p: TaskId, flags: u64) {
        let cpu = self.this_cpu;
        self.scx_call(Op::Dequeue, cpu, Some(p), |o, s| o.dequeue(s, p, flags));
    }

    /// ops_dequeue(): the kernel takes the task back.
    #[inline(always)]
    pub(crate) fn scx_ops_dequeue(&mut self, p: TaskId, flags: u64) {
        let t = &mut self.tasks[p as usize].scx;
        assert!(t.ops_state != OpsState::Queueing, "ops.enqueue cannot be interrupted by a dequeue");
        t.ops_state = OpsState::None;
        self.scx_leave_custody(p, flags);
    }

    /// switch_class(): the CPU is about to run a task of a higher class;
    /// tell the scheduler it lost the CPU (ops.cpu_release).
    #[inline]
    pub(crate) fn scx_switch_class(&mut self, cpu: Cpu, next: TaskId) {
        if self.scx.enabled() && self.task(next).class != ClassId::Ext {
            self.scx_switch_class_work(cpu, next);
        }
    }

    #[inline(never)]
    fn scx_switch_class_work(&mut self, cpu: Cpu, next: TaskId) {
        let r = &mut self.rqs[cpu as usize].scx;
        if r.flags & rq_flags::CPU_RELEASED != 0 {
            return;
        }
        if self.scx.has(Op::CpuRelease) || self.scx.has(Op::CpuAcquire) {
            self.rqs[cpu as usize].scx.flags |= rq_flags::CPU_RELEASED;
            if self.scx.has(Op::CpuRelease) && !self.scx.bypassing {
                let reason = if self.task(next).class == ClassId::Rt { CpuReleaseReason::Rt } else { CpuReleaseReason::Other };
                self.scx_call(Op::CpuRelease, cpu, None, |o, s| o.cpu_release(s, cpu, reason, Some(next)));
            }
        }
    }

    /// wakeup_preempt_scx() for a higher class waking on `cpu`: IMMED tasks
    /// in the local DSQ cannot run now and go back to the scheduler.
    pub(crate) fn scx_higher_class_wakeup(&mut self, cpu: Cpu) {
        if self.scx.enabled() && self.rqs[cpu as usize].scx.nr_immed > 0 {
            self.scx_schedule_reenq_local(cpu, 0);
        }
    }

    /// enqueue_task_scx(): `extra` are SCX_ENQ_* flags the core's cannot
    /// carry, `sticky` the CPU whose local DSQ a remote move puts the task
    /// in (`p->scx.sticky_cpu`). Inlined into the class hook and into
    /// [`Sim::scx_move_remote_to_local`], whose constant flags leave only
    /// its own path.
    #[inline(always)]
    pub(crate) fn scx_enqueue_task(&mut self, cpu: Cpu, p: TaskId, flags: u32, extra: u64, sticky: Option<Cpu>) {
        let now = self.now();
        let mut sticky = sticky;
        // The task's and the runqueue's updates, each with one lookup.
        let t = &mut self.tasks[p as usize].scx;
        // set_task_runnable(): restart the watchdog clock if the task ran since.
        let set_runnable = t.runnable_at.is_none();
        if set_runnable {
            t.runnable_at = Some(now);
        }
        let c = t.cx_mut();
        if set_runnable {
            c.runnable_at = now;
        }
        c.flags |= task_flags::QUEUED;
        let r = &mut self.rqs[cpu as usize];
        if flags & enq::RESTORE != 0 && r.curr == Some(p) {
            // The running task put back after a property change stays local.
            sticky = Some(cpu);
        }
        if flags & enq::WAKEUP != 0 {
            r.scx.flags |= rq_flags::IN_WAKEUP;
        }
        r.scx.nr_running += 1;
        let f = scx_enq_flags(flags) | extra;
        let migrating = flags & enq::MIGRATING != 0;
        if self.scx.has(Op::Runnable) && !migrating {
            self.scx_call(Op::Runnable, cpu, Some(p), |o, s| o.runnable(s, p, f));
        }
        self.scx_do_enqueue(cpu, p, f, sticky);
        self.rqs[cpu as usize].scx.flags &= !rq_flags::IN_WAKEUP;
    }

    /// dequeue_task_scx(); the class hook's, and the detach of
    /// [`Sim::scx_move_remote_to_local`] with its flags constant.
    #[inline(always)]
    pub(crate) fn scx_dequeue_task(&mut self, cpu: Cpu, p: TaskId, flags: u32) {
        // The task is looked up once for the test and the custody change,
        // and once more after the ops (which may change anything).
        let t = &mut self.tasks[p as usize].scx;
        if !t.queued() {
            return;
        }
        let sleep = flags & deq::SLEEP != 0;
        let f = if sleep { deq_flags::SLEEP } else { deq_flags::SCHED_CHANGE };
        let migrating = flags & deq::MIGRATING != 0;
        if migrating {
            // An internal migration: the task stays out of custody.
            t.ops_state = OpsState::None;
        } else {
            self.scx_ops_dequeue(p, f);
        }
        if self.scx.has(Op::Stopping) && self.rq(cpu).curr == Some(p) {
            self.update_curr_scx(cpu);
            self.scx_call(Op::Stopping, cpu, Some(p), |o, s| o.stopping(s, p, false));
        }
        if self.scx.has(Op::Quiescent) && !migrating {
            self.scx_call(Op::Quiescent, cpu, Some(p), |o, s| o.quiescent(s, p, f));
        }
        let t = &mut self.tasks[p as usize].scx;
        t.ddsp = None;
        let c = t.cx_mut();
        c.flags &= !(task_flags::QUEUED | task_flags::DEQD_FOR_SLEEP);
        if sleep {
            c.flags |= task_flags::DEQD_FOR_SLEEP;
        }
        let in_dsq = t.dsq.is_some();
        self.rqs[cpu as usize].scx.nr_running -= 1;
        if in_dsq {
            self.scx_dispatch_dequeue_work(p);
        }
    }
}

impl SchedClass for ExtClass {
    fn id(&self) -> ClassId {
        ClassId::Ext
    }

    fn enqueue_task(&self, sim: &mut Sim, cpu: Cpu, p: TaskId, flags: u32) {
        sim.scx_enqueue_task(cpu, p, flags, 0, None);
    }

    fn dequeue_task(&self, sim: &mut Sim, cpu: Cpu, p: TaskId, flags: u32) -> bool {
        sim.scx_dequeue_task(cpu, p, flags);
        true
    }

    fn yield_task(&self, sim: &mut Sim, cpu: Cpu) {
        let Some(p) = sim.rq(cpu).curr else { return };
        if sim.scx.has(Op::Yield) && !sim.scx.bypassing {
            sim.scx_call(Op::Yield, cpu, Some(p), |o, s| o.yield_(s, p, None));
        } else {
            sim.task_mut(p).scx.cx_mut().slice = 0;
        }
    }

    fn yield_to_task(&self, sim: &mut Sim, cpu: Cpu, to: TaskId) -> bool {
        let Some(p) = sim.rq(cpu).curr else { return false };
        if sim.scx.has(Op::Yield) && !sim.scx.bypassing {
            sim.scx_call(Op::Yield, cpu, Some(p), |o, s| o.yield_(s, p, Some(to))).unwrap_or(false)
        } else {
            false
        }
    }

    /// Preemption within ext is the BPF scheduler's business (kicks and
    /// SCX_ENQ_PREEMPT); the class hook does nothing for ext wakeups.
    fn wakeup_preempt(&self, _sim: &mut Sim, _cpu: Cpu, _p: TaskId, _wake_flags: u32) {}

    fn pick_task(&self, sim: &mut Sim, cpu: Cpu) -> Option<TaskId> {
        if !sim.scx.enabled() {
            return None;
        }
        let p = match sim.scx_balance_one(cpu) {
            (Some(prev), true) if sim.task(prev).class == ClassId::Ext => {
                sim.scx.stats.keep_prev += 1;
                prev
            }
            _ => {
                let local = sim.scx.local(cpu);
                sim.scx.dsqs[local as usize].first()?.1
            }
        };
        if sim.task(p).scx.slice() == 0 {
            sim.scx_refill_slice_dfl(p);
        }
        Some(p)
    }

    fn put_prev_task(&self, sim: &mut Sim, cpu: Cpu, p: TaskId) {
        sim.rqs[cpu as usize].scx.pnt_seq += 1;
        sim.task_mut(p).scx.c.live_mut().on_cpu = 0;
        sim.update_curr_scx(cpu);
        let queued = sim.task(p).scx.queued() && sim.task(p).state == TaskState::Runnable;
        if queued && sim.scx.has(Op::Stopping) {
            sim.scx_call(Op::Stopping, cpu, Some(p), |o, s| o.stopping(s, p, true));
        }
        if !queued {
            return;
        }
        sim.scx_set_runnable(p);
        let going_idle = sim.rqs[cpu as usize].scx.next_idle;
        if sim.task(p).scx.slice() > 0 && !sim.scx.bypassing {
            if sim.task(p).scx.has_flag(task_flags::IMMED) {
                // An IMMED task that lost the CPU goes back to the scheduler.
                sim.task_mut(p).scx.cx_mut().flags |= reenq_reason::PREEMPTED;
                sim.scx.stats.reenqueued += 1;
                sim.scx_do_enqueue(cpu, p, enq_flags::REENQ, None);
                sim.task_mut(p).scx.cx_mut().flags &= !reenq_reason::MASK;
            } else {
                // Preempted by a higher class with slice left: first in line again.
                let local = sim.scx.local(cpu);
                sim.scx_dispatch_enqueue(local, p, enq_flags::HEAD);
            }
            return;
        }
        // Going idle (nothing of ext or above runs next): SCX_ENQ_LAST.
        let f = if going_idle { enq_flags::LAST } else { 0 };
        sim.scx_do_enqueue(cpu, p, f, None);
    }

    fn set_next_task(&self, sim: &mut Sim, cpu: Cpu, p: TaskId, _first: bool) {
        let now = sim.now();
        let queued = sim.task(p).scx.queued();
        if queued {
            sim.scx_ops_dequeue(p, deq_flags::CORE_SCHED_EXEC);
            sim.scx_dispatch_dequeue(p);
        }
        sim.task_mut(p).se.exec_start = now;
        if sim.scx.has(Op::Running) && queued {
            sim.scx_call(Op::Running, cpu, Some(p), |o, s| o.running(s, p));
        }
        // clr_task_runnable(p, true): the watchdog clock restarts next time.
        let t = &mut sim.tasks[p as usize].scx;
        t.runnable_at = None;
        t.c.live_mut().on_cpu = 1;
    }

    fn select_task_rq(&self, sim: &mut Sim, p: TaskId, prev_cpu: Cpu, wake_flags: u32) -> Cpu {
        // The core only asks classes about tasks that can run on several
        // CPUs (select_task_rq in core.c).
        if sim.task(p).nr_cpus_allowed == 1 {
            return sim.task(p).cpus_allowed.first().unwrap_or(prev_cpu as usize) as Cpu;
        }
        if wake_flags & wf::EXEC != 0 {
            return prev_cpu;
        }
        sim.scx_select_task_rq(p, prev_cpu, wake_flags)
    }

    fn task_tick(&self, sim: &mut Sim, cpu: Cpu, p: TaskId) {
        sim.update_curr_scx(cpu);
        if sim.scx.bypassing {
            // Bypass: round-robin at tick granularity.
            sim.task_mut(p).scx.cx_mut().slice = 0;
        } else if sim.scx.has(Op::Tick) {
            sim.scx_call(Op::Tick, cpu, Some(p), |o, s| o.tick(s, p));
        }
        if sim.rq(cpu).curr == Some(p) && sim.task(p).scx.slice() == 0 {
            sim.resched_curr(cpu);
        }
    }

    fn update_curr(&self, sim: &mut Sim, cpu: Cpu) {
        sim.update_curr_scx(cpu);
    }

    fn task_woken(&self, sim: &mut Sim, cpu: Cpu, _p: TaskId) {
        // The wakeup hook: deferred work of this runqueue runs now.
        sim.scx_run_deferred(cpu);
    }

    fn task_fork(&self, sim: &mut Sim, p: TaskId) {
        sim.scx_post_fork(p);
    }
}
