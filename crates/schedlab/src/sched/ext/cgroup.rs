//! sched_ext and cgroups (kernel/sched/ext.c, CONFIG_EXT_GROUP_SCHED): the
//! cgroup ops a scheduler sees and when.
//!
//! - At enable, after ops.init() and before any ops.init_task(),
//!   `scx_cgroup_init()` walks the existing tree pre-order and calls
//!   ops.cgroup_init() with each cgroup's knobs; from then on cgroup ops
//!   are on (`scx_cgroup_enabled`). At disable, before tasks are switched
//!   back, `scx_cgroup_exit()` walks it post-order with ops.cgroup_exit().
//! - A write to cgroup.procs: `scx_cgroup_can_attach()` calls
//!   ops.cgroup_prep_move() for every task of the set (a failure cancels
//!   the ones prepared with ops.cgroup_cancel_move() and refuses the
//!   write); `sched_move_task()` then calls ops.cgroup_move() between the
//!   dequeue and the enqueue (`scx_cgroup_move_task()`).
//! - Writes to cpu.weight, cpu.max and cpu.idle reach
//!   ops.cgroup_set_weight / set_bandwidth / set_idle when the value changes
//!   (`scx_group_set_weight()` and friends).
//!
//! cpu.max is not enforced on sched_ext tasks: bandwidth control is CFS's
//! (its throttling dequeues fair group entities), and ext.c only passes the
//! limit to the BPF scheduler (init args and ops.cgroup_set_bandwidth), as
//! 7.1 does. A scheduler that wants the limit enforces it itself.
//!
//! Cgroups are named by their task group index (`Sim::cg`); the host turns
//! that into a `struct cgroup`.

use crate::engine::TaskId;
use crate::sched::cgroup::{CpuMax, ROOT_TG};
use crate::sched::ext::ops::{CgroupInitArgs, Op};
use crate::sched::sim::Sim;
use crate::sched::task::ClassId;
use crate::sched::{deq, enq};

/// RUNTIME_INF in cpu.max's microseconds, as ops see "max".
pub(super) const BW_QUOTA_INF: u64 = u64::MAX;

/// cpu.max in the microseconds ext.c hands to ops: (period, quota, burst).
pub(super) fn bw_us(max: &CpuMax) -> (u64, u64, u64) {
    let quota = max.quota_ns.map_or(BW_QUOTA_INF, |q| q / 1000);
    (max.period_ns / 1000, quota, max.burst_ns / 1000)
}

impl Sim {
    /// Task groups in pre-order from the root (css_for_each_descendant_pre):
    /// children in creation order.
    pub(crate) fn cgroup_preorder(&self) -> Vec<u32> {
        let n = self.cg.groups.len();
        let mut children: Vec<Vec<u32>> = vec![Vec::new(); n];
        for g in 1..n {
            if let Some(p) = self.cg.groups[g].parent {
                children[p as usize].push(g as u32);
            }
        }
        let mut out = Vec::with_capacity(n);
        let mut stack = vec![ROOT_TG];
        while let Some(g) = stack.pop() {
            out.push(g);
            stack.extend(children[g as usize].iter().rev());
        }
        out
    }

    /// Task groups in post-order (css_for_each_descendant_post): every
    /// cgroup after all of its descendants.
    fn cgroup_postorder(&self) -> Vec<u32> {
        let n = self.cg.groups.len();
        let mut children: Vec<Vec<u32>> = vec![Vec::new(); n];
        for g in 1..n {
            if let Some(p) = self.cg.groups[g].parent {
                children[p as usize].push(g as u32);
            }
        }
        fn walk(g: u32, children: &[Vec<u32>], out: &mut Vec<u32>) {
            for &c in &children[g as usize] {
                walk(c, children, out);
            }
            out.push(g);
        }
        let mut out = Vec::with_capacity(n);
        walk(ROOT_TG, &children, &mut out);
        out
    }

    /// A cgroup's `struct scx_cgroup_init_args` (tg->scx's copy of the knobs).
    pub(crate) fn scx_cgroup_args(&self, g: u32) -> CgroupInitArgs {
        let tg = &self.cg.groups[g as usize];
        let (bw_period_us, bw_quota_us, bw_burst_us) = bw_us(&tg.max);
        CgroupInitArgs { weight: tg.weight, bw_period_us, bw_quota_us, bw_burst_us, idle: tg.idle }
    }

    /// Whether ops.cgroup_init() succeeded on `g` (SCX_TG_INITED).
    pub(crate) fn scx_cgroup_inited(&self, g: u32) -> bool {
        self.scx.cgroup_inited.get(g as usize).copied().unwrap_or(false)
    }

    /// scx_cgroup_init(): ops.cgroup_init() on every cgroup, pre-order,
    /// then cgroup ops are on. Err(ret): a cgroup_init failed (the
    /// scheduler is being ejected with "ops.cgroup_init() failed").
    pub(crate) fn scx_cgroup_init(&mut self) -> Result<(), i32> {
        self.scx.cgroup_inited = vec![false; self.cg.groups.len()];
        let cpu = self.this_cpu;
        for g in self.cgroup_preorder() {
            if self.scx.has(Op::CgroupInit) {
                let args = self.scx_cgroup_args(g);
                let ret = self.scx_call(Op::CgroupInit, cpu, None, |o, s| o.cgroup_init(s, g, &args)).unwrap_or(0);
                if ret != 0 || self.scx.exit.is_some() {
                    if self.scx.exit.is_none() {
                        self.scx_error(format!("ops.cgroup_init() failed ({ret})"));
                    }
                    return Err(ret);
                }
            }
            self.scx.cgroup_inited[g as usize] = true;
        }
        self.scx.cgroup_enabled = true;
        Ok(())
    }

    /// scx_cgroup_exit(): cgroup ops off, ops.cgroup_exit() on every
    /// initialised cgroup, post-order.
    pub(crate) fn scx_cgroup_exit(&mut self) {
        self.scx.cgroup_enabled = false;
        let cpu = self.this_cpu;
        for g in self.cgroup_postorder() {
            if !self.scx_cgroup_inited(g) {
                continue;
            }
            self.scx.cgroup_inited[g as usize] = false;
            if self.scx.has(Op::CgroupExit) {
                self.scx_call(Op::CgroupExit, cpu, None, |o, s| o.cgroup_exit(s, g));
            }
        }
        self.scx.cgrp_moving_from.clear();
    }

    /// The scheduler owns `p` (p->scx.sched set: ops.init_task() done).
    fn scx_owns(&self, p: TaskId) -> bool {
        self.scx.ops.is_some() && self.task(p).scx.inited
    }

    /// scx_cgroup_can_attach(): ops.cgroup_prep_move() for each task of the
    /// set moving to `to`; 0, or the error of the first that refuses (the
    /// ones prepared before it get ops.cgroup_cancel_move()).
    pub(crate) fn scx_cgroup_can_attach(&mut self, tasks: &[TaskId], to: u32) -> i32 {
        if !self.scx.cgroup_enabled {
            return 0;
        }
        let cpu = self.this_cpu;
        for &p in tasks {
            let from = self.task(p).cgrp;
            // sched_move_task() omits identity moves; so do the ops.
            if from == to || !self.scx_owns(p) {
                continue;
            }
            if self.scx.has(Op::CgroupPrepMove) {
                let ret = self.scx_call(Op::CgroupPrepMove, cpu, Some(p), |o, s| o.cgroup_prep_move(s, p, from, to)).unwrap_or(0);
                if ret != 0 {
                    self.scx_cgroup_cancel_attach(tasks, to);
                    return ret;
                }
            }
            self.scx.cgrp_moving_from.insert(p, from);
        }
        0
    }

    /// scx_cgroup_cancel_attach(): the migration did not happen; every task
    /// with a prepared move gets ops.cgroup_cancel_move().
    pub(crate) fn scx_cgroup_cancel_attach(&mut self, tasks: &[TaskId], to: u32) {
        let cpu = self.this_cpu;
        for &p in tasks {
            let Some(from) = self.scx.cgrp_moving_from.remove(&p) else { continue };
            if self.scx.has(Op::CgroupCancelMove) {
                self.scx_call(Op::CgroupCancelMove, cpu, Some(p), |o, s| o.cgroup_cancel_move(s, p, from, to));
            }
        }
    }

    /// scx_cgroup_move_task(): called by sched_move_task() once `p` is in
    /// its new group, between the dequeue and the enqueue.
    pub(crate) fn scx_cgroup_move_task(&mut self, p: TaskId) {
        if !self.scx.cgroup_enabled {
            return;
        }
        let Some(from) = self.scx.cgrp_moving_from.remove(&p) else { return };
        let to = self.task(p).cgrp;
        if self.scx.has(Op::CgroupMove) && self.scx_owns(p) {
            let cpu = self.task(p).cpu;
            self.scx_call(Op::CgroupMove, cpu, Some(p), |o, s| o.cgroup_move(s, p, from, to));
        }
    }

    /// sched_move_task() for a task outside fair: an ext task is taken off
    /// its queue and the CPU (DEQUEUE_SAVE | DEQUEUE_MOVE), changes group,
    /// gets ops.cgroup_move(), and is put back; other classes only change
    /// group.
    pub(crate) fn sched_move_task_other(&mut self, p: TaskId, g: u32) {
        let class = self.task(p).class;
        if class != ClassId::Ext {
            self.task_mut(p).cgrp = g;
            self.scx_cgroup_move_task(p);
            return;
        }
        let c = self.sched_change_begin(p, deq::MOVE);
        self.task_mut(p).cgrp = g;
        self.scx_cgroup_move_task(p);
        self.sched_change_end(p, c, enq::MOVE);
        if c.running {
            self.resched_curr(c.cpu);
        }
    }

    /// scx_group_set_weight(): cpu.weight of `g` becomes `weight`.
    pub(crate) fn scx_group_set_weight(&mut self, g: u32, weight: u32) {
        if self.scx.cgroup_enabled && self.scx_cgroup_inited(g) && self.scx.has(Op::CgroupSetWeight) && self.cg.groups[g as usize].weight != weight {
            let cpu = self.this_cpu;
            self.scx_call(Op::CgroupSetWeight, cpu, None, |o, s| o.cgroup_set_weight(s, g, weight));
        }
    }

    /// scx_group_set_idle(): cpu.idle of `g` becomes `idle`.
    pub(crate) fn scx_group_set_idle(&mut self, g: u32, idle: bool) {
        if self.scx.cgroup_enabled && self.scx_cgroup_inited(g) && self.scx.has(Op::CgroupSetIdle) && self.cg.groups[g as usize].idle != idle {
            let cpu = self.this_cpu;
            self.scx_call(Op::CgroupSetIdle, cpu, None, |o, s| o.cgroup_set_idle(s, g, idle));
        }
    }

    /// scx_group_set_bandwidth(): cpu.max / cpu.max.burst of `g` become `max`.
    pub(crate) fn scx_group_set_bandwidth(&mut self, g: u32, max: &CpuMax) {
        let new = bw_us(max);
        if self.scx.cgroup_enabled
            && self.scx_cgroup_inited(g)
            && self.scx.has(Op::CgroupSetBandwidth)
            && bw_us(&self.cg.groups[g as usize].max) != new
        {
            let cpu = self.this_cpu;
            let (period, quota, burst) = new;
            self.scx_call(Op::CgroupSetBandwidth, cpu, None, |o, s| o.cgroup_set_bandwidth(s, g, period, quota, burst));
        }
    }

    /// A write of several tasks into cgroup.procs (a process's threads move
    /// together): the cpuset's check, then scx_cgroup_can_attach, then
    /// sched_move_task() for each. false: refused (nothing moved).
    pub fn cgroup_attach_tasks(&mut self, tasks: &[TaskId], g: u32) -> bool {
        self.cgroup_attach(tasks, g, true)
    }

    /// [`Sim::cgroup_attach_tasks`]; `threadgroup`: a write to cgroup.procs
    /// (the whole process) rather than cgroup.threads. On success the
    /// `cgroup_attach_task` tracepoint fires for the first task (the
    /// leader), as cgroup_attach_task() does after the migration.
    pub(crate) fn cgroup_attach(&mut self, tasks: &[TaskId], g: u32, threadgroup: bool) -> bool {
        let eff = self.cg.groups[g as usize].effective_cpus.clone();
        let live: Vec<TaskId> = tasks.iter().copied().filter(|&p| self.task(p).state != crate::sched::task::TaskState::Dead).collect();
        // cpuset_can_attach() runs first (cpuset's subsystem id is lower).
        if live.iter().any(|&p| self.task(p).cpus_allowed.and(&eff).is_empty()) {
            return false;
        }
        if self.scx_cgroup_can_attach(&live, g) != 0 {
            return false;
        }
        for &p in &live {
            if self.task(p).cgrp == g {
                continue;
            }
            let mask = self.task(p).cpus_allowed.and(&eff);
            self.sched_move_task(p, g);
            self.task_mut(p).cgroup = self.cg.groups[g as usize].path.clone();
            if mask != self.task(p).cpus_allowed {
                self.set_cpus_allowed(p, mask);
            }
        }
        if let Some(&leader) = live.first() {
            let cpu = self.this_cpu;
            self.scx_trace_event(cpu, &super::ops::TraceEvent::CgroupAttachTask { cgrp: g, leader, threadgroup });
        }
        true
    }
}
