//! A checker for the order of callbacks a scheduler sees, per task: the
//! kernel's state machine (runnable -> running -> stopping -> quiescent).
//! Wrap any scheduler in [`Checked`] and read the violations afterwards.

use std::cell::RefCell;
use std::collections::BTreeMap;

use crate::engine::{Cpu, TaskId};
use crate::sched::ext::ops::{CpuReleaseReason, ExitInfo, ExtOps, Op};
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
    pub calls: BTreeMap<&'static str, u64>,
    /// The CPUs each task was seen on in ops.running() (called on the CPU
    /// that picked it), for affinity checks.
    pub ran_on: BTreeMap<TaskId, crate::machine::cpumask::CpuMask>,
    pub violations: Vec<String>,
}

/// `inner`, with every callback checked against the task state machine.
pub struct Checked<T: ExtOps> {
    pub inner: T,
    pub log: RefCell<CheckLog>,
}

impl<T: ExtOps> Checked<T> {
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

    pub fn violations(&self) -> Vec<String> {
        self.log.borrow().violations.clone()
    }

    /// The CPUs `p` was seen running on.
    pub fn ran_on(&self, p: TaskId) -> Option<crate::machine::cpumask::CpuMask> {
        self.log.borrow().ran_on.get(&p).cloned()
    }

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
        matches!(op, Op::Runnable | Op::Running | Op::Stopping | Op::Quiescent | Op::Enable | Op::Disable) || self.inner.has(op)
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
        self.inner.init_task(sim, p, fork)
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
    fn attached(&self, sim: &mut Sim) {
        self.inner.attached(sim)
    }
    fn task_freed(&self, sim: &mut Sim, p: TaskId) {
        self.inner.task_freed(sim, p)
    }
}
