//! Loading and unloading a scheduler (scx_enable / scx_disable_workfn),
//! tasks entering and leaving ext, bypass mode, ejection on errors, the
//! watchdog and the bypass load balancer.

use std::rc::Rc;

use crate::machine::cpumask::CpuMask;
use crate::engine::{Cpu, Event, TaskId};
use crate::sched::features::Feature;
use crate::sched::ext::dsq::{Dsq, DsqKind};
use crate::sched::ext::ops::{dsq_id, ops_flags, ExitInfo, ExitKind, ExtOps, Op, WATCHDOG_MAX_TIMEOUT_MS};
use crate::sched::ext::EnableState;
use crate::sched::{deq, enq};
use crate::sched::sim::Sim;
use crate::sched::task::{ClassId, Policy, TaskState};
use crate::engine::time::Ns;

/// Why a scheduler was refused at load time (scx_enable's errors).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LoadError {
    #[error("a sched_ext scheduler is already loaded")]
    Busy,
    #[error("invalid ops.flags 0x{0:x}: unknown bits 0x{1:x}")]
    UnknownFlags(u64, u64),
    #[error("ops.timeout_ms {0} is above the maximum of {max} ms", max = WATCHDOG_MAX_TIMEOUT_MS)]
    Timeout(u32),
    #[error("the machine has {0} CPUs; hosted schedulers support up to {max}", max = crate::sched::ext::abi::NR_CPUS)]
    TooManyCpus(usize),
    /// The return value, and what scx_bpf_error() said if init called it
    /// (the kernel logs that message, not the return value).
    #[error("ops.init() failed ({ret}){}", if said.is_empty() { String::new() } else { format!(": {said}") })]
    InitFailed { ret: i32, said: String },
}

/// The bypass load balancer's period, threshold and batch (6.19).
const BYPASS_LB_THRESH_PCT: usize = 125;
const BYPASS_LB_BATCH: usize = 256;
/// Switching one task back to fair while disabling (rq lock, class change,
/// ops.disable and ops.exit_task): about a microsecond.
const DISABLE_TASK_NS: Ns = 1_000;

impl Sim {
    /// Whether a task of `policy` belongs to ext with the current scheduler.
    pub(crate) fn scx_wants(&self, policy: Policy) -> bool {
        self.scx.state == EnableState::Enabled
            && match policy {
                Policy::Ext => true,
                Policy::Other | Policy::Batch | Policy::Idle => self.scx.switch_all,
                Policy::Fifo | Policy::Rr => false,
            }
    }

    /// scx_enable(): validate, create the built-in DSQs, ops.init(), then
    /// move every eligible task into ext.
    pub fn scx_enable(&mut self, ops: Rc<dyn ExtOps>) -> Result<(), LoadError> {
        self.scx_build_views();
        if self.scx.state != EnableState::Disabled {
            return Err(LoadError::Busy);
        }
        let flags = ops.flags();
        if flags & !ops_flags::ALL != 0 {
            return Err(LoadError::UnknownFlags(flags, flags & !ops_flags::ALL));
        }
        if ops.timeout_ms() > WATCHDOG_MAX_TIMEOUT_MS {
            return Err(LoadError::Timeout(ops.timeout_ms()));
        }
        let n = self.nr_cpus();
        if n > crate::sched::ext::abi::NR_CPUS {
            return Err(LoadError::TooManyCpus(n));
        }
        let nodes = self.topo.nr_nodes();
        let mut st = crate::sched::ext::ScxSched::new(n, nodes);
        // The statistics carry over; a swap, as a take would build (and
        // zero) another quarter-megabyte histogram only to drop it.
        std::mem::swap(&mut st.stats, &mut self.scx.stats);
        for op in Op::ALL {
            st.has[op.index()] = ops.has(op);
        }
        st.traces_switch = ops.traces_sched_switch();
        st.ops_flags = flags;
        st.name = ops.name().to_string();
        st.switch_all = flags & ops_flags::SWITCH_PARTIAL == 0;
        st.builtin_idle = !ops.has(Op::UpdateIdle) || flags & ops_flags::KEEP_BUILTIN_IDLE != 0;
        let t = ops.timeout_ms();
        st.timeout_ns = if t == 0 { WATCHDOG_MAX_TIMEOUT_MS } else { t } as Ns * 1_000_000;
        st.dsp_max_batch = match ops.dispatch_max_batch() {
            0 => crate::sched::ext::ops::DSP_MAX_BATCH_DFL,
            b => b,
        };
        for c in 0..n {
            st.dsqs.push(Dsq::new(dsq_id::LOCAL_ON | c as u64, DsqKind::Local(c as Cpu), self.topo.node_of(c) as u32));
        }
        for node in 0..nodes {
            st.dsqs.push(Dsq::new(dsq_id::GLOBAL, DsqKind::Global(node as u32), node as u32));
        }
        for c in 0..n {
            st.dsqs.push(Dsq::new(dsq_id::BYPASS, DsqKind::Bypass(c as Cpu), self.topo.node_of(c) as u32));
        }
        st.ops = Some(ops);
        st.state = EnableState::Enabled;
        st.rng = crate::engine::rng::Rng::new(self.seed, crate::engine::rng::Stream::Scheduler);
        st.bypass_lb_intv_ns = self.scx.bypass_lb_intv_ns;
        st.smt_active = self.topo.max_smt() > 1;
        // scx_idle_update_selcpu_topology(), from the first CPU's spans.
        let llc_weight = |c: usize| self.topo.llc_size(c);
        let numa_weight = |c: usize| self.topo.node_span[self.topo.node_of(c)].weight();
        st.selcpu_topo_llc = n > 0 && llc_weight(0) < n;
        st.selcpu_topo_numa = n > 0
            && flags & ops_flags::BUILTIN_IDLE_PER_NODE == 0
            && numa_weight(0) < n
            && (0..n).any(|c| llc_weight(c) != numa_weight(c));
        st.load_error = self.scx.load_error.take();
        st.origin = self.scx.origin.take();
        st.llc_masks = (0..self.topo.nr_llcs()).map(|l| CpuMask::from_cpus(n, (0..n).filter(|&c| self.topo.llc_of(c) == l)).into()).collect();
        st.node_masks = (0..nodes).map(|x| CpuMask::from_cpus(n, (0..n).filter(|&c| self.topo.node_of(c) == x)).into()).collect();
        *self.scx = st;
        // The per-CPU part starts afresh with the scheduler instance.
        for rq in &mut self.rqs {
            rq.scx = crate::sched::ext::ScxRq::default();
        }
        for c in 0..n {
            if self.rq(c as Cpu).curr.is_none() {
                self.scx_set_builtin_idle(c as Cpu, true);
            }
        }
        let this = self.this_cpu;
        let ret = self.scx_call(Op::Init, this, None, |o, s| if o.has(Op::Init) { o.init(s) } else { 0 }).unwrap_or(0);
        if ret != 0 || self.scx.exit.is_some() {
            let said = self.scx.exit.as_ref().map(|e| e.msg.clone()).unwrap_or_default();
            // scx_error("ops.init() failed (%d)") and the disable path: the
            // exit is recorded and ops.exit() sees it.
            let now = self.now();
            let info = self.scx.exit.clone().unwrap_or_else(|| ExitInfo {
                kind: ExitKind::Error,
                exit_code: 0,
                reason: ExitKind::Error.reason().to_string(),
                msg: format!("ops.init() failed ({ret})"),
                at_ns: now,
            });
            self.scx.exit = Some(info.clone());
            if self.scx.has(Op::Exit) {
                self.scx_call(Op::Exit, this, None, |o, s| o.exit(s, &info));
            }
            self.scx.counters_at_exit = self.scx.ops.as_ref().map(|o| o.counters()).unwrap_or_default();
            self.scx.ops = None;
            self.scx.state = EnableState::Disabled;
            return Err(LoadError::InitFailed { ret, said });
        }
        self.scx.stats.enabled_at = Some(self.now());
        // Every cgroup before any task (scx_cgroup_init, ext/cgroup.rs); a
        // failure has queued the ejection, and no task is initialised.
        let cgroups_ok = self.scx_cgroup_init().is_ok();
        // Tasks already alive: ops.init_task(fork=false), then switch class.
        for p in (0..self.tasks.len() as TaskId).filter(|_| cgroups_ok) {
            let st = self.task(p).state;
            if matches!(st, TaskState::Dead | TaskState::New) {
                continue;
            }
            if self.scx_wants(self.task(p).policy) && self.scx_init_task(p, false) {
                self.scx_change_class(p, ClassId::Ext);
            }
        }
        self.scx_arm_watchdog();
        // The loader's work after bpf_map__attach_struct_ops() returns.
        if let Some(ops) = self.scx.ops.clone() {
            ops.attached(self);
        }
        Ok(())
    }

    /// From now on every task carries its C `task_struct` view: the tasks
    /// that exist get theirs as if they had had it from their start (built
    /// and linked into their thread groups in creation order, the dead ones
    /// then unlinked). Called when a scheduler is loaded or enabled.
    pub fn scx_build_views(&mut self) {
        if self.scx_views {
            return;
        }
        self.scx_views = true;
        for p in 0..self.tasks.len() as TaskId {
            self.scx_task_added(p);
        }
        for p in 0..self.tasks.len() as TaskId {
            if self.task(p).state == crate::sched::task::TaskState::Dead {
                self.scx_unlink_thread(p);
            }
        }
    }

    /// Fills in the C `task_struct` of a task that was just added (tasks are
    /// created before or after the scheduler loads); nothing before the
    /// views are built.
    pub(crate) fn scx_task_added(&mut self, p: TaskId) {
        if !self.scx_views {
            return;
        }
        let t = &mut self.tasks[p as usize];
        let c = &mut t.scx.c;
        c.pid = p as i32 + 1;
        c.tgid = t.tgid as i32;
        self.scx_task_added_comm(p);
        self.scx_sync_task_c(p);
    }

    /// The C task_struct's `comm` from the task's name.
    fn scx_task_added_comm(&mut self, p: TaskId) {
        let t = &mut self.tasks[p as usize];
        if !t.scx.c.is_built() {
            return;
        }
        let name = t.name.as_bytes();
        let len = name.len().min(15);
        t.scx.c.comm = [0; 16];
        t.scx.c.comm[..len].copy_from_slice(&name[..len]);
    }

    /// Refreshes the C task_struct fields the kernel owns.
    pub(crate) fn scx_sync_task_c(&mut self, p: TaskId) {
        let t = &mut self.tasks[p as usize];
        if !t.scx.c.is_built() {
            return;
        }
        let parent = t.parent;
        let c = &mut t.scx.c;
        c.prio = t.prio;
        c.static_prio = t.static_prio;
        c.normal_prio = t.prio;
        c.rt_priority = t.rt_priority;
        c.policy = match t.policy {
            Policy::Other => 0,
            Policy::Fifo => 1,
            Policy::Rr => 2,
            Policy::Batch => 3,
            Policy::Idle => 5,
            Policy::Ext => 7,
        };
        c.nr_cpus_allowed = t.nr_cpus_allowed as i32;
        c.cpus_mask.assign(&t.cpus_allowed);
        c.cpu = t.cpu;
        c.se.load.weight = t.se.load.weight;
        c.se.load.inv_weight = t.se.load.inv_weight;
        // p->scx.weight is the cgroup-scale weight (100 for nice 0) of the
        // task's static priority, not of se.load, which goes stale while the
        // task is in ext (see sched_setattr).
        let w = crate::sched::task::LoadWeight::for_nice(t.nice, t.policy).weight;
        c.scx.weight = ((w * 100 + 512) / 1024).clamp(1, 10_000) as u32;
        if let Some(pp) = parent {
            let pc: *mut crate::sched::ext::abi::TaskStructC = &mut *self.tasks[pp as usize].scx.c;
            self.tasks[p as usize].scx.c.real_parent = pc;
        }
        self.scx_link_thread(p);
        self.scx_sync_sched_class(p);
    }

    /// scx_init_task(): ops.init_task(); a failure ejects the scheduler and
    /// the task stays in fair.
    pub(crate) fn scx_init_task(&mut self, p: TaskId, fork: bool) -> bool {
        self.scx_sync_task_c(p);
        let cpu = self.this_cpu;
        let ret = if self.scx.has(Op::InitTask) {
            self.scx_call(Op::InitTask, cpu, Some(p), |o, s| o.init_task(s, p, fork)).unwrap_or(0)
        } else {
            0
        };
        if ret != 0 {
            let comm = self.task_comm(p);
            self.scx_error(format!("ops.init_task() failed ({ret}) for {comm}"));
            return false;
        }
        self.task_mut(p).scx.inited = true;
        true
    }

    /// scx_enable_task(): ops.enable() and the weight.
    fn scx_enable_task(&mut self, p: TaskId) {
        self.scx_sync_task_c(p);
        let cpu = self.this_cpu;
        self.task_mut(p).scx.enabled = true;
        if self.scx.has(Op::Enable) {
            self.scx_call(Op::Enable, cpu, Some(p), |o, s| o.enable(s, p));
        }
        if self.scx.has(Op::SetWeight) {
            let w = self.task(p).scx.c.scx.weight;
            self.scx_call(Op::SetWeight, cpu, Some(p), |o, s| o.set_weight(s, p, w));
        }
    }

    /// scx_disable_task() + ops.exit_task().
    fn scx_exit_task(&mut self, p: TaskId, cancelled: bool) {
        let cpu = self.this_cpu;
        if self.task(p).scx.enabled {
            self.task_mut(p).scx.enabled = false;
            if self.scx.has(Op::Disable) {
                self.scx_call(Op::Disable, cpu, Some(p), |o, s| o.disable(s, p));
            }
        }
        if self.task(p).scx.inited {
            self.task_mut(p).scx.inited = false;
            if self.scx.has(Op::ExitTask) {
                self.scx_call(Op::ExitTask, cpu, Some(p), |o, s| o.exit_task(s, p, cancelled));
            }
        }
    }

    /// A new task (wake_up_new_task): it joins ext if the scheduler wants it.
    pub(crate) fn scx_fork(&mut self, p: TaskId) {
        self.scx_task_added(p);
        if self.scx_wants(self.task(p).policy) && self.scx_init_task(p, true) {
            self.task_mut(p).class = ClassId::Ext;
            self.scx_sync_sched_class(p);
        }
    }

    /// ext's task_fork hook: scx_post_fork() enables the task.
    pub(crate) fn scx_post_fork(&mut self, p: TaskId) {
        self.scx_enable_task(p);
    }

    /// A task exited: sched_ext_free().
    pub(crate) fn scx_task_dead(&mut self, p: TaskId) {
        if (p as usize) < self.tasks.len() {
            self.scx_unlink_thread(p);
        }
        if (p as usize) < self.tasks.len() && (self.task(p).scx.inited || self.task(p).scx.enabled) {
            self.scx_exit_task(p, false);
            if let Some(ops) = self.scx.ops.clone() {
                ops.task_freed(self, p);
            }
        }
    }

    /// The policy changed (sched_setattr): the new class, as the kernel's
    /// __setscheduler_class() would choose it.
    pub(crate) fn scx_class_for(&mut self, p: TaskId) -> ClassId {
        let t = self.task(p);
        if t.policy.is_rt() {
            return ClassId::Rt;
        }
        if self.scx_wants(t.policy) {
            if !self.task(p).scx.inited && !self.scx_init_task(p, false) {
                return ClassId::Fair;
            }
            return ClassId::Ext;
        }
        ClassId::Fair
    }

    /// Moves `p` between fair and ext (the switch loops of scx_enable and
    /// scx_disable_workfn: dequeue and put, change class, enqueue and set).
    pub(crate) fn scx_change_class(&mut self, p: TaskId, to: ClassId) {
        let from = self.task(p).class;
        if from == to {
            return;
        }
        self.finish_delayed_dequeue(p);
        let c = self.sched_change_begin(p, deq::MOVE);
        if from == ClassId::Ext {
            self.scx_exit_task(p, false);
        }
        self.task_mut(p).class = to;
        self.scx_sync_sched_class(p);
        if to == ClassId::Ext {
            self.scx_enable_task(p);
            if self.task(p).scx.slice() == 0 {
                let s = self.scx_slice_dfl();
                self.task_mut(p).scx.c.scx.slice = s;
            }
        } else if to == ClassId::Fair {
            self.reset_fair_entity_for_switch(p);
        }
        self.sched_change_end(p, c, enq::MOVE);
        if c.queued {
            if c.running {
                self.resched_curr(c.cpu);
            } else {
                self.wakeup_preempt(c.cpu, p, 0);
            }
        }
    }

    /// scx_exit(): record the first exit request and schedule the disable
    /// work. Later requests are ignored, as in the kernel.
    pub(crate) fn scx_exit(&mut self, kind: ExitKind, exit_code: i64, msg: String) {
        if self.scx.state != EnableState::Enabled || self.scx.exit.is_some() {
            return;
        }
        let now = self.now();
        self.scx.exit = Some(ExitInfo { kind, exit_code, reason: kind.reason().to_string(), msg, at_ns: now });
        if kind.is_error() {
            self.scx_dump();
        }
        // The disable work runs from a kthread shortly after.
        self.engine.schedule(now + self.scx.cost_acc + 10_000, Event::ScxDisable);
    }

    /// The hard-lockup detector fired on `cpu`. Since 6.19 sched_ext hooks
    /// it and ejects the BPF scheduler (scx_hardlockup); before, the
    /// machine would panic or hang, which we only count.
    pub(crate) fn scx_hardlockup(&mut self, cpu: Cpu) {
        self.scx.stats.hardlockups += 1;
        if self.features.on(Feature::SCX_BYPASS_PERCPU) {
            self.scx_error(format!("hard lockup - CPU {cpu}"));
        }
    }

    /// A runtime error in the scheduler's use of the interface (SCX_EXIT_ERROR).
    pub fn scx_error(&mut self, msg: String) {
        self.scx_exit(ExitKind::Error, 0, msg);
    }

    /// The debug dump of an error exit: ops.dump, dump_cpu, dump_task.
    fn scx_dump(&mut self) {
        let this = self.this_cpu;
        if self.scx.has(Op::Dump) {
            self.scx_call(Op::Dump, this, None, |o, s| o.dump(s));
        }
        if self.scx.has(Op::DumpCpu) {
            for c in 0..self.nr_cpus() as Cpu {
                let idle = self.rq(c).curr.is_none();
                self.scx_call(Op::DumpCpu, c, None, |o, s| o.dump_cpu(s, c, idle));
            }
        }
    }

    /// Unload the scheduler as its user space would (SCX_EXIT_UNREG).
    pub fn scx_unregister(&mut self) {
        self.scx_exit(ExitKind::Unreg, 0, String::new());
    }

    /// scx_disable_workfn(), first part: bypass, then switch tasks back.
    pub(crate) fn on_scx_disable(&mut self) {
        if self.scx.state != EnableState::Enabled {
            return;
        }
        let now = self.now();
        self.scx.state = EnableState::Disabling;
        self.scx.stats.disable_started_at = Some(now);
        self.scx_bypass(true);
        // Cgroup support goes before tasks are switched (scx_cgroup_exit).
        self.scx_cgroup_exit();
        self.scx.disable_queue = (0..self.tasks.len() as TaskId).rev().filter(|&p| self.task(p).class == ClassId::Ext).collect();
        // Before tasks can be switched, the disable path needs an RCU grace
        // period (and the fork rwsem): every task preempted right now may be
        // inside a read-side section (PREEMPT_RCU) and must run once first.
        // Tasks stuck behind a long queue are what stalls RCU in experiment 002.
        let mut left = 0;
        for p in 0..self.tasks.len() as TaskId {
            let t = self.task(p);
            let waiting = t.class == ClassId::Ext && t.on_rq && t.state == TaskState::Runnable && self.rq(t.cpu).curr != Some(p);
            self.task_mut(p).scx.gp_pending = waiting;
            left += waiting as u32;
        }
        self.scx.gp_left = left;
        if left == 0 {
            self.engine.schedule(now + DISABLE_TASK_NS, Event::ScxDisableStep);
        }
    }

    /// A task ran: it can no longer hold up the disable's grace period.
    pub(crate) fn scx_gp_task_ran(&mut self, p: TaskId) {
        if self.scx.gp_left == 0 || !self.task(p).scx.gp_pending {
            return;
        }
        self.task_mut(p).scx.gp_pending = false;
        self.scx.gp_left -= 1;
        if let Some(ws) = self.task(p).wait_start {
            let w = self.now() - ws;
            let m = &mut self.scx.stats.max_wait_while_disabling_ns;
            *m = (*m).max(w);
        }
        if self.scx.gp_left == 0 {
            let now = self.now();
            self.scx.stats.disable_gp_done_at = Some(now);
            self.engine.schedule(now + DISABLE_TASK_NS, Event::ScxDisableStep);
        }
    }

    /// scx_bypass(true): every runnable ext task is requeued so that it
    /// lands in a bypass DSQ; decisions stop going to the BPF scheduler.
    fn scx_bypass(&mut self, on: bool) {
        self.scx.bypassing = on;
        if !on {
            return;
        }
        for c in 0..self.nr_cpus() as Cpu {
            // Each runqueue's tasks are cycled under its lock.
            let remote = c != self.this_cpu;
            if remote {
                self.scx_rq_lock(c);
            }
            self.rqs[c as usize].scx.flags |= crate::sched::ext::rq_flags::BYPASSING;
            let queued: Vec<TaskId> = self.tasks_queued_in_ext(c);
            for p in queued {
                self.scx_requeue(p);
            }
            self.resched_curr(c);
            if remote {
                self.scx_rq_unlock(c);
            }
        }
        let intv = self.scx.bypass_lb_intv_ns;
        if self.features.on(Feature::SCX_BYPASS_PERCPU) && !self.scx.bypass_lb_armed && intv > 0 {
            self.scx.bypass_lb_armed = true;
            let now = self.now();
            self.engine.schedule(now + intv, Event::ScxBypassLb);
        }
    }

    /// Ext tasks queued (not running) on `cpu`'s runqueue, in id order.
    fn tasks_queued_in_ext(&self, cpu: Cpu) -> Vec<TaskId> {
        (0..self.tasks.len() as TaskId)
            .filter(|&p| {
                let t = self.task(p);
                t.class == ClassId::Ext && t.cpu == cpu && self.task(p).scx.queued() && self.rq(cpu).curr != Some(p)
            })
            .collect()
    }

    /// Dequeue and enqueue in place (DEQUEUE_SAVE | DEQUEUE_MOVE).
    fn scx_requeue(&mut self, p: TaskId) {
        let cpu = self.task(p).cpu;
        EXT.dequeue_task(self, cpu, p, deq::SAVE | deq::MOVE);
        EXT.enqueue_task(self, cpu, p, enq::RESTORE | enq::MOVE);
    }

    /// The disable work switches tasks back to fair one by one. Each switch
    /// needs the task's runqueue lock, which CPUs hold while they balance
    /// (and, with shared bypass DSQs, while they wait for the DSQ lock) and
    /// while they pull tasks off it, so a contended machine makes the
    /// disable slow; the switch itself holds the lock too.
    pub(crate) fn on_scx_disable_step(&mut self) {
        let now = self.now();
        self.scx_track_disable_waits();
        let mut t = now;
        let mut n = 0;
        while let Some(p) = self.scx.disable_queue.pop() {
            if self.task(p).class == ClassId::Ext {
                let cpu = self.task(p).cpu;
                let wait = self.rqs[cpu as usize].scx.lock(t, DISABLE_TASK_NS);
                self.scx.stats.rq_lock_wait_ns += wait;
                t += wait + DISABLE_TASK_NS;
                let saved = self.this_cpu;
                self.this_cpu = cpu;
                self.scx_change_class(p, ClassId::Fair);
                self.this_cpu = saved;
            }
            n += 1;
            if n == 32 || t > now + 100_000 {
                break;
            }
        }
        if !self.scx.disable_queue.is_empty() {
            self.engine.schedule(t.max(now + 1), Event::ScxDisableStep);
            return;
        }
        // Every task is in fair: ops.exit() and tear down.
        let info = self.scx.exit.clone().unwrap_or(ExitInfo {
            kind: ExitKind::Done,
            exit_code: 0,
            reason: String::new(),
            msg: String::new(),
            at_ns: now,
        });
        let this = self.this_cpu;
        if self.scx.has(Op::Exit) {
            self.scx_call(Op::Exit, this, None, |o, s| o.exit(s, &info));
        }
        self.scx.stats.disable_done_at = Some(t);
        self.scx.state = EnableState::Disabled;
        self.scx.bypassing = false;
        self.scx.counters_at_exit = self.scx.ops.as_ref().map(|o| o.counters()).unwrap_or_default();
        self.scx.ops = None;
        for r in self.rqs.iter_mut().map(|rq| &mut rq.scx) {
            r.flags = 0;
        }
    }

    /// Longest current wait of a runnable ext task, for the disable report
    /// (the hung-task / RCU-stall symptom of experiment 002).
    fn scx_track_disable_waits(&mut self) {
        let now = self.now();
        let mut worst = self.scx.stats.max_wait_while_disabling_ns;
        for t in &self.tasks {
            if t.class == ClassId::Ext {
                if let Some(ws) = t.wait_start {
                    worst = worst.max(now - ws);
                }
            }
        }
        self.scx.stats.max_wait_while_disabling_ns = worst;
    }

    fn scx_arm_watchdog(&mut self) {
        if !self.scx.watchdog_armed {
            self.scx.watchdog_armed = true;
            let at = self.now() + self.scx.timeout_ns / 2;
            self.engine.schedule(at, Event::ScxWatchdog);
        }
    }

    /// scx_watchdog_workfn(): a runnable task that has not run for
    /// timeout_ms ejects the scheduler.
    pub(crate) fn on_scx_watchdog(&mut self) {
        self.scx.watchdog_armed = false;
        if self.scx.state != EnableState::Enabled {
            return;
        }
        let now = self.now();
        let timeout = self.scx.timeout_ns;
        let stalled = (0..self.tasks.len() as TaskId).find(|&p| {
            let t = self.task(p);
            t.class == ClassId::Ext
                && self.task(p).scx.queued()
                && self.rq(t.cpu).curr != Some(p)
                && self.task(p).scx.runnable_at.is_some_and(|at| now - at > timeout)
        });
        if let Some(p) = stalled {
            let at = self.task(p).scx.runnable_at.unwrap_or(now);
            let ms = (now - at) / 1_000_000;
            let comm = self.task_comm(p);
            if std::env::var_os("SCHEDLAB_DEBUG_STALL").is_some() {
                let t = self.task(p);
                eprintln!("STALL {comm}: cpu {} dsq {:?} ops_state {:?} vtime {} curr {:?} cpus {:?}", t.cpu, t.scx.dsq, t.scx.ops_state, t.scx.c.scx.dsq_vtime, self.rq(t.cpu).curr, t.cpus_allowed);
            }
            self.scx_exit(ExitKind::ErrorStall, 0, format!("{comm} failed to run for {}.{:03}s", ms / 1000, ms % 1000));
            return;
        }
        self.scx_arm_watchdog();
    }

    /// The bypass load balancer (6.19, scx_bypass_lb_timerfn): within each
    /// node, a CPU whose bypass DSQ holds more than 125% of the per-CPU
    /// target gives its oldest tasks to CPUs below the target. Tasks stay
    /// on the donor's runqueue until the receiver consumes them.
    pub(crate) fn on_scx_bypass_lb(&mut self) {
        self.scx.bypass_lb_armed = false;
        if !self.scx.bypassing || !self.features.on(Feature::SCX_BYPASS_PERCPU) {
            return;
        }
        let intv = self.scx.bypass_lb_intv_ns;
        if intv == 0 {
            return;
        }
        let min_delta = (intv / 4).div_ceil(crate::sched::ext::ops::SLICE_BYPASS_NS) as usize;
        for node in 0..self.topo.nr_nodes() {
            let cpus: Vec<Cpu> = (0..self.nr_cpus() as Cpu).filter(|&c| self.topo.node_of(c as usize) == node).collect();
            let nr = |s: &Sim, c: Cpu| s.scx.dsqs[s.scx.bypass_dsq(c) as usize].nr();
            let total: usize = cpus.iter().map(|&c| nr(self, c)).sum();
            if total == 0 {
                continue;
            }
            let target = total.div_ceil(cpus.len());
            let donor_target = (target * BYPASS_LB_THRESH_PCT).div_ceil(100);
            let mut donees = CpuMask::from_cpus(self.nr_cpus(), cpus.iter().filter(|&&c| nr(self, c) < target).map(|&c| c as usize));
            let mut received = CpuMask::new(self.nr_cpus());
            for &donor in &cpus {
                if donees.is_empty() {
                    break;
                }
                let have = nr(self, donor);
                if have <= donor_target || have - donor_target < min_delta {
                    continue;
                }
                let dsq = self.scx.bypass_dsq(donor);
                let mut cursor = None;
                let mut moved = 0;
                // The donor's rq lock, IRQs off, for a batch at a time:
                // CPUs pulling from the donor wait meanwhile.
                self.scx_rq_lock(donor);
                while nr(self, donor) > donor_target && !donees.is_empty() {
                    let Some((key, p)) = self.scx.dsqs[dsq as usize].next_after(cursor, false, u64::MAX) else { break };
                    cursor = Some(key);
                    let allowed = donees.and(&self.task(p).cpus_allowed);
                    let Some(to) = allowed.iter_wrap((donor as usize + 1) % self.nr_cpus()).next() else { continue };
                    self.scx_dispatch_dequeue(p);
                    let to_dsq = self.scx.bypass_dsq(to as Cpu);
                    self.scx_dispatch_enqueue(to_dsq, p, crate::sched::ext::ops::enq_flags::NESTED);
                    received.set(to);
                    if nr(self, to as Cpu) >= target {
                        donees.clear(to);
                    }
                    moved += 1;
                    self.scx.stats.bypass_lb_moved += 1;
                    self.scx.cost_acc += self.costs.migrate_task_ns / 4;
                    if moved % BYPASS_LB_BATCH == 0 {
                        // Both locks are dropped and retaken every batch.
                        self.scx.cost_acc += 2 * self.costs.dsq_lock_ns;
                        self.scx_rq_unlock(donor);
                        self.scx_rq_lock(donor);
                    }
                }
                self.scx_rq_unlock(donor);
            }
            for c in received.iter() {
                self.resched_curr(c as Cpu);
            }
        }
        self.scx.bypass_lb_armed = true;
        let now = self.now();
        self.engine.schedule(now + intv, Event::ScxBypassLb);
    }

    /// trace_sched_switch() in __schedule(): the scheduler's tracepoint
    /// program runs on `cpu` for every switch while it is enabled, as a
    /// tracing program outside any op (charged one callback's cost).
    pub(crate) fn scx_trace_sched_switch(&mut self, cpu: Cpu, preempt: bool, prev: Option<TaskId>, next: Option<TaskId>) {
        if self.scx.state != EnableState::Enabled {
            return;
        }
        let Some(ops) = self.scx.ops.clone() else { return };
        let saved = self.this_cpu;
        self.this_cpu = cpu;
        self.scx.cost_acc += self.costs.scx_op_ns;
        ops.sched_switch(self, preempt, prev, next);
        self.this_cpu = saved;
    }

    /// A kernel tracepoint fires on `cpu` (see [`super::ops::TraceEvent`]):
    /// the scheduler's program for it runs there, outside any op (charged
    /// one callback's cost), if it attached one.
    pub fn scx_trace_event(&mut self, cpu: Cpu, ev: &super::ops::TraceEvent) {
        if self.scx.state != EnableState::Enabled {
            return;
        }
        let Some(ops) = self.scx.ops.clone() else { return };
        if !ops.traces(ev.name()) {
            return;
        }
        let saved = self.this_cpu;
        self.this_cpu = cpu;
        self.scx.cost_acc += self.costs.scx_op_ns;
        ops.trace_event(self, ev);
        self.this_cpu = saved;
    }

    /// __set_task_comm(): `trace_task_rename()` with the old name still in
    /// place, then the new name (15 bytes at most, as `comm` holds).
    pub fn set_task_comm(&mut self, p: TaskId, comm: &str) {
        let cpu = self.task(p).cpu;
        let mut name = comm.to_string();
        while name.len() > 15 {
            name.pop();
        }
        self.scx_trace_event(cpu, &super::ops::TraceEvent::TaskRename { task: p, comm: name.clone() });
        self.task_mut(p).name = name;
        self.scx_task_added_comm(p);
    }

    /// A scheduler timer fires (bpf_timer).
    pub(crate) fn on_scx_timer(&mut self, id: u64, gen: u32) {
        let Some(&(g, cpu)) = self.scx.timers.get(&id) else { return };
        if g != gen || self.scx.state != EnableState::Enabled {
            return;
        }
        self.scx.timers.remove(&id);
        self.this_cpu = cpu;
        // A timer callback is not an op: it runs without an op frame (the
        // unlocked context, where scx_bpf_dsq_move() is allowed).
        let Some(ops) = self.scx.ops.clone() else { return };
        self.scx.cost_acc += self.costs.scx_op_ns;
        ops.timer_fired(self, id);
    }
}

use crate::sched::SchedClass;
static EXT: &crate::sched::ext::class::ExtClass = &crate::sched::ext::EXT_CLASS;

impl Sim {
    /// sched_setattr() on `p` moved it between classes or changed its
    /// weight: the matching ext hooks (switching_to/from_scx, set_weight).
    pub(crate) fn scx_setattr(&mut self, p: TaskId, old: ClassId, new: ClassId) {
        self.scx_sync_sched_class(p);
        if !self.scx.enabled() {
            return;
        }
        let old_weight = self.task(p).scx.c.scx.weight;
        if old == ClassId::Ext && new != ClassId::Ext {
            self.scx_exit_task(p, false);
            self.reset_fair_entity_for_switch(p);
        } else if new == ClassId::Ext && old != ClassId::Ext {
            self.scx_enable_task(p);
        } else if new == ClassId::Ext {
            self.scx_sync_task_c(p);
            let w = self.task(p).scx.c.scx.weight;
            if w != old_weight && self.scx.has(Op::SetWeight) {
                let cpu = self.this_cpu;
                self.scx_call(Op::SetWeight, cpu, Some(p), |o, s| o.set_weight(s, p, w));
            }
        } else {
            self.scx_sync_task_c(p);
        }
    }

    /// set_cpus_allowed_scx(): the C mask follows, and an ext task's
    /// scheduler hears about it (ops.set_cpumask).
    pub(crate) fn scx_set_cpumask(&mut self, p: TaskId) {
        self.scx_sync_task_c(p);
        if self.task(p).class == ClassId::Ext && self.scx.has(Op::SetCpumask) {
            let cpu = self.this_cpu;
            self.scx_call(Op::SetCpumask, cpu, Some(p), |o, s| o.set_cpumask(s, p));
        }
    }

    /// A task comes (back) to fair from another class: start from a clean
    /// lag, as attach_task_cfs_rq() + place_entity() would.
    pub(crate) fn reset_fair_entity_for_switch(&mut self, p: TaskId) {
        let base = self.base_slice_ns;
        let se = &mut self.task_mut(p).se;
        se.vlag = 0;
        se.rel_deadline = false;
        se.sched_delayed = false;
        if !se.custom_slice {
            se.slice = base;
        }
    }
}
