//! A checker for the order of callbacks a scheduler sees, per task: the
//! kernel's state machine (runnable -> running -> stopping -> quiescent).
//! Wrap any scheduler in [`Checked`] and read the violations afterwards.
//!
//! Cgroup ops are checked against ext.c's order too: ops.cgroup_init()
//! pre-order (a parent before its children) and once per cgroup,
//! ops.cgroup_exit() post-order, every other cgroup op and a task's
//! ops.init_task() only on initialised cgroups, and each ops.cgroup_move()
//! or ops.cgroup_cancel_move() closing the ops.cgroup_prep_move() of the same
//! (task, from, to) (scx_cgroup_can_attach / scx_cgroup_move_task).

use std::cell::RefCell;
use std::collections::BTreeMap;

use crate::engine::{Cpu, TaskId};
use crate::sched::ext::ops::{CgroupInitArgs, CpuReleaseReason, ExitInfo, ExtOps, Op};
use crate::sched::sim::Sim;

/// Where a task stands, as the callbacks describe it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum St {
    /// Enabled, not runnable.
    Quiescent,
    /// Runnable, not running.
    Runnable,
    Running,
    /// stopping(p, false): the dequeue's quiescent must follow.
    Stopped,
}

/// Per-task callback counts and the violations found.
#[derive(Debug, Default)]
pub struct CheckLog {
    state: BTreeMap<TaskId, St>,
    /// Calls per op name.
    pub calls: BTreeMap<&'static str, u64>,
    /// The CPUs each task was seen on in ops.running() (called on the CPU
    /// that picked it), for affinity checks.
    pub ran_on: BTreeMap<TaskId, crate::machine::cpumask::CpuMask>,
    /// Violations of the task state machine, at most 32, each with its time.
    pub violations: Vec<String>,
    /// Cgroups seen by ops.cgroup_init(): true while live, false once exited.
    pub cgroups: BTreeMap<u32, bool>,
    /// Every cgroup op in order, as "op(args)" (for order tests).
    pub cgroup_ops: Vec<String>,
    /// Prepared moves: task -> (from, to).
    moving: BTreeMap<TaskId, (u32, u32)>,
}

impl CheckLog {
    fn violate(&mut self, sim: &Sim, v: String) {
        if self.violations.len() < 32 {
            self.violations.push(format!("t={} {v}", sim.now()));
        }
    }

    /// `what` needs cgroup `g` initialised and not exited.
    fn live(&mut self, sim: &Sim, what: &str, g: u32) {
        if self.cgroups.get(&g) != Some(&true) {
            self.violate(sim, format!("{what}: cgroup {g} is not initialised"));
        }
    }
}

/// `inner`, with every callback checked against the task state machine.
pub struct Checked<T: ExtOps> {
    /// The scheduler being checked.
    pub inner: T,
    /// What the checks saw.
    pub log: RefCell<CheckLog>,
}

impl<T: ExtOps> Checked<T> {
    /// Wraps `inner` with an empty log.
    pub fn new(inner: T) -> Self {
        Checked { inner, log: RefCell::new(CheckLog::default()) }
    }

    fn step(&self, sim: &Sim, op: &'static str, p: TaskId, from: &[St], to: Option<St>) {
        let mut log = self.log.borrow_mut();
        *log.calls.entry(op).or_default() += 1;
        let cur = log.state.get(&p).copied();
        match cur {
            Some(s) if !from.contains(&s) => {
                let v = format!("t={} task {p}: ops.{op} in state {s:?}", sim.now());
                if log.violations.len() < 32 {
                    log.violations.push(v);
                }
            }
            None if !from.is_empty() && op != "enable" => {
                let v = format!("t={} task {p}: ops.{op} before ops.enable", sim.now());
                if log.violations.len() < 32 {
                    log.violations.push(v);
                }
            }
            _ => {}
        }
        if let Some(t) = to {
            log.state.insert(p, t);
        }
    }

    /// The wrapped scheduler.
    pub fn inner(&self) -> &T {
        &self.inner
    }

    /// The violations found so far.
    pub fn violations(&self) -> Vec<String> {
        self.log.borrow().violations.clone()
    }

    /// The CPUs `p` was seen running on.
    pub fn ran_on(&self, p: TaskId) -> Option<crate::machine::cpumask::CpuMask> {
        self.log.borrow().ran_on.get(&p).cloned()
    }

    /// The cgroup ops seen, in order.
    pub fn cgroup_ops(&self) -> Vec<String> {
        self.log.borrow().cgroup_ops.clone()
    }

    /// How many times `op` was called.
    pub fn calls(&self, op: &str) -> u64 {
        self.log.borrow().calls.get(op).copied().unwrap_or(0)
    }
}

use St::*;

impl<T: ExtOps> ExtOps for Checked<T> {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn flags(&self) -> u64 {
        self.inner.flags()
    }
    fn timeout_ms(&self) -> u32 {
        self.inner.timeout_ms()
    }
    fn dispatch_max_batch(&self) -> u32 {
        self.inner.dispatch_max_batch()
    }
    fn counters(&self) -> Vec<(String, u64)> {
        self.inner.counters()
    }
    fn has(&self, op: Op) -> bool {
        // The checker needs to see the lifecycle ops; calling an op the
        // inner scheduler lacks runs the trait's default, which is what the
        // kernel does for a NULL op.
        matches!(
            op,
            Op::Runnable
                | Op::Running
                | Op::Stopping
                | Op::Quiescent
                | Op::Enable
                | Op::Disable
                | Op::CgroupInit
                | Op::CgroupExit
                | Op::CgroupPrepMove
                | Op::CgroupMove
                | Op::CgroupCancelMove
        ) || self.inner.has(op)
    }
    fn select_cpu(&self, sim: &mut Sim, p: TaskId, prev_cpu: Cpu, wake_flags: u64) -> Cpu {
        self.inner.select_cpu(sim, p, prev_cpu, wake_flags)
    }
    fn enqueue(&self, sim: &mut Sim, p: TaskId, enq_flags: u64) {
        self.step(sim, "enqueue", p, &[Runnable], None);
        self.inner.enqueue(sim, p, enq_flags)
    }
    fn dequeue(&self, sim: &mut Sim, p: TaskId, deq_flags: u64) {
        self.step(sim, "dequeue", p, &[Runnable, Running, Stopped, Quiescent], None);
        self.inner.dequeue(sim, p, deq_flags)
    }
    fn dispatch(&self, sim: &mut Sim, cpu: Cpu, prev: Option<TaskId>) {
        self.inner.dispatch(sim, cpu, prev)
    }
    fn tick(&self, sim: &mut Sim, p: TaskId) {
        self.step(sim, "tick", p, &[Running], None);
        self.inner.tick(sim, p)
    }
    fn runnable(&self, sim: &mut Sim, p: TaskId, enq_flags: u64) {
        self.step(sim, "runnable", p, &[Quiescent], Some(Runnable));
        if self.inner.has(Op::Runnable) {
            self.inner.runnable(sim, p, enq_flags)
        }
    }
    fn running(&self, sim: &mut Sim, p: TaskId) {
        self.step(sim, "running", p, &[Runnable], Some(Running));
        let n = sim.nr_cpus();
        let cpu = sim.task(p).cpu as usize;
        self.log.borrow_mut().ran_on.entry(p).or_insert_with(|| crate::machine::cpumask::CpuMask::new(n)).set(cpu);
        if self.inner.has(Op::Running) {
            self.inner.running(sim, p)
        }
    }
    fn stopping(&self, sim: &mut Sim, p: TaskId, runnable: bool) {
        self.step(sim, "stopping", p, &[Running], Some(if runnable { Runnable } else { Stopped }));
        if self.inner.has(Op::Stopping) {
            self.inner.stopping(sim, p, runnable)
        }
    }
    fn quiescent(&self, sim: &mut Sim, p: TaskId, deq_flags: u64) {
        self.step(sim, "quiescent", p, &[Runnable, Stopped], Some(Quiescent));
        if self.inner.has(Op::Quiescent) {
            self.inner.quiescent(sim, p, deq_flags)
        }
    }
    fn yield_(&self, sim: &mut Sim, from: TaskId, to: Option<TaskId>) -> bool {
        self.inner.yield_(sim, from, to)
    }
    fn set_weight(&self, sim: &mut Sim, p: TaskId, weight: u32) {
        self.inner.set_weight(sim, p, weight)
    }
    fn set_cpumask(&self, sim: &mut Sim, p: TaskId) {
        self.inner.set_cpumask(sim, p)
    }
    fn update_idle(&self, sim: &mut Sim, cpu: Cpu, idle: bool) {
        self.inner.update_idle(sim, cpu, idle)
    }
    fn cpu_acquire(&self, sim: &mut Sim, cpu: Cpu) {
        self.inner.cpu_acquire(sim, cpu)
    }
    fn cpu_release(&self, sim: &mut Sim, cpu: Cpu, reason: CpuReleaseReason, task: Option<TaskId>) {
        self.inner.cpu_release(sim, cpu, reason, task)
    }
    fn init_task(&self, sim: &mut Sim, p: TaskId, fork: bool) -> i32 {
        {
            let mut log = self.log.borrow_mut();
            // The kernel inits cgroups first so that init_task can rely on them
            // (only when the scheduler takes cgroups at all).
            if !log.cgroups.is_empty() {
                let g = sim.task(p).cgrp;
                log.live(sim, &format!("task {p}: ops.init_task"), g);
            }
        }
        self.inner.init_task(sim, p, fork)
    }
    fn cgroup_init(&self, sim: &mut Sim, cgrp: u32, args: &CgroupInitArgs) -> i32 {
        {
            let mut log = self.log.borrow_mut();
            *log.calls.entry("cgroup_init").or_default() += 1;
            log.cgroup_ops.push(format!("cgroup_init({cgrp})"));
            if log.cgroups.get(&cgrp) == Some(&true) {
                log.violate(sim, format!("ops.cgroup_init: cgroup {cgrp} initialised twice"));
            }
            if let Some(parent) = sim.cg.groups[cgrp as usize].parent {
                log.live(sim, &format!("ops.cgroup_init({cgrp}) before its parent's"), parent);
            }
            log.cgroups.insert(cgrp, true);
        }
        let ret = if self.inner.has(Op::CgroupInit) { self.inner.cgroup_init(sim, cgrp, args) } else { 0 };
        if ret != 0 {
            self.log.borrow_mut().cgroups.remove(&cgrp);
        }
        ret
    }
    fn cgroup_exit(&self, sim: &mut Sim, cgrp: u32) {
        {
            let mut log = self.log.borrow_mut();
            *log.calls.entry("cgroup_exit").or_default() += 1;
            log.cgroup_ops.push(format!("cgroup_exit({cgrp})"));
            log.live(sim, "ops.cgroup_exit", cgrp);
            let live_child = sim.cg.groups.iter().enumerate().find(|(c, g)| g.parent == Some(cgrp) && log.cgroups.get(&(*c as u32)) == Some(&true));
            if let Some((c, _)) = live_child {
                log.violate(sim, format!("ops.cgroup_exit({cgrp}) before its child {c}'s"));
            }
            log.cgroups.insert(cgrp, false);
        }
        if self.inner.has(Op::CgroupExit) {
            self.inner.cgroup_exit(sim, cgrp)
        }
    }
    fn cgroup_prep_move(&self, sim: &mut Sim, p: TaskId, from: u32, to: u32) -> i32 {
        {
            let mut log = self.log.borrow_mut();
            *log.calls.entry("cgroup_prep_move").or_default() += 1;
            log.cgroup_ops.push(format!("cgroup_prep_move({p}, {from}, {to})"));
            log.live(sim, "ops.cgroup_prep_move (from)", from);
            log.live(sim, "ops.cgroup_prep_move (to)", to);
            if sim.task(p).cgrp != from {
                log.violate(sim, format!("ops.cgroup_prep_move: task {p} is in cgroup {}, not {from}", sim.task(p).cgrp));
            }
            if log.moving.insert(p, (from, to)).is_some() {
                log.violate(sim, format!("ops.cgroup_prep_move: task {p} already has a move prepared"));
            }
        }
        let ret = if self.inner.has(Op::CgroupPrepMove) { self.inner.cgroup_prep_move(sim, p, from, to) } else { 0 };
        if ret != 0 {
            self.log.borrow_mut().moving.remove(&p);
        }
        ret
    }
    fn cgroup_move(&self, sim: &mut Sim, p: TaskId, from: u32, to: u32) {
        {
            let mut log = self.log.borrow_mut();
            *log.calls.entry("cgroup_move").or_default() += 1;
            log.cgroup_ops.push(format!("cgroup_move({p}, {from}, {to})"));
            if log.moving.remove(&p) != Some((from, to)) {
                log.violate(sim, format!("ops.cgroup_move({p}, {from}, {to}) without its ops.cgroup_prep_move"));
            }
            if sim.task(p).cgrp != to {
                log.violate(sim, format!("ops.cgroup_move: task {p} is not in cgroup {to} yet"));
            }
        }
        if self.inner.has(Op::CgroupMove) {
            self.inner.cgroup_move(sim, p, from, to)
        }
    }
    fn cgroup_cancel_move(&self, sim: &mut Sim, p: TaskId, from: u32, to: u32) {
        {
            let mut log = self.log.borrow_mut();
            *log.calls.entry("cgroup_cancel_move").or_default() += 1;
            log.cgroup_ops.push(format!("cgroup_cancel_move({p}, {from}, {to})"));
            if log.moving.remove(&p) != Some((from, to)) {
                log.violate(sim, format!("ops.cgroup_cancel_move({p}, {from}, {to}) without its ops.cgroup_prep_move"));
            }
            if sim.task(p).cgrp != from {
                log.violate(sim, format!("ops.cgroup_cancel_move: task {p} left cgroup {from}"));
            }
        }
        if self.inner.has(Op::CgroupCancelMove) {
            self.inner.cgroup_cancel_move(sim, p, from, to)
        }
    }
    fn cgroup_set_weight(&self, sim: &mut Sim, cgrp: u32, weight: u32) {
        {
            let mut log = self.log.borrow_mut();
            log.cgroup_ops.push(format!("cgroup_set_weight({cgrp}, {weight})"));
            log.live(sim, "ops.cgroup_set_weight", cgrp);
        }
        self.inner.cgroup_set_weight(sim, cgrp, weight)
    }
    fn cgroup_set_bandwidth(&self, sim: &mut Sim, cgrp: u32, period_us: u64, quota_us: u64, burst_us: u64) {
        {
            let mut log = self.log.borrow_mut();
            log.cgroup_ops.push(format!("cgroup_set_bandwidth({cgrp}, {period_us}, {quota_us}, {burst_us})"));
            log.live(sim, "ops.cgroup_set_bandwidth", cgrp);
        }
        self.inner.cgroup_set_bandwidth(sim, cgrp, period_us, quota_us, burst_us)
    }
    fn cgroup_set_idle(&self, sim: &mut Sim, cgrp: u32, idle: bool) {
        {
            let mut log = self.log.borrow_mut();
            log.cgroup_ops.push(format!("cgroup_set_idle({cgrp}, {idle})"));
            log.live(sim, "ops.cgroup_set_idle", cgrp);
        }
        self.inner.cgroup_set_idle(sim, cgrp, idle)
    }
    fn exit_task(&self, sim: &mut Sim, p: TaskId, cancelled: bool) {
        self.log.borrow_mut().state.remove(&p);
        self.inner.exit_task(sim, p, cancelled)
    }
    fn enable(&self, sim: &mut Sim, p: TaskId) {
        self.step(sim, "enable", p, &[], Some(Quiescent));
        if self.inner.has(Op::Enable) {
            self.inner.enable(sim, p)
        }
    }
    fn disable(&self, sim: &mut Sim, p: TaskId) {
        if self.inner.has(Op::Disable) {
            self.inner.disable(sim, p)
        }
    }
    fn dump(&self, sim: &mut Sim) {
        self.inner.dump(sim)
    }
    fn dump_cpu(&self, sim: &mut Sim, cpu: Cpu, idle: bool) {
        self.inner.dump_cpu(sim, cpu, idle)
    }
    fn dump_task(&self, sim: &mut Sim, p: TaskId) {
        self.inner.dump_task(sim, p)
    }
    fn init(&self, sim: &mut Sim) -> i32 {
        self.inner.init(sim)
    }
    fn exit(&self, sim: &mut Sim, info: &ExitInfo) {
        self.inner.exit(sim, info)
    }
    fn timer_fired(&self, sim: &mut Sim, timer: u64) {
        self.inner.timer_fired(sim, timer)
    }
    fn traces_sched_switch(&self) -> bool {
        self.inner.traces_sched_switch()
    }
    fn sched_switch(&self, sim: &mut Sim, preempt: bool, prev: Option<TaskId>, next: Option<TaskId>) {
        self.inner.sched_switch(sim, preempt, prev, next)
    }
    fn traces(&self, tp: &str) -> bool {
        self.inner.traces(tp)
    }
    fn trace_event(&self, sim: &mut Sim, ev: &super::ops::TraceEvent) {
        self.inner.trace_event(sim, ev)
    }
    fn attached(&self, sim: &mut Sim) {
        self.inner.attached(sim)
    }
    fn task_freed(&self, sim: &mut Sim, p: TaskId) {
        self.inner.task_freed(sim, p)
    }
}
