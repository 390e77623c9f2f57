//! Tasks: policy and priority as the kernel computes them, the per-class
//! scheduling entities, per-task statistics, and the behaviour program a task
//! runs.

use serde::Serialize;

use crate::machine::cpumask::CpuMask;
use crate::engine::{Cpu, TaskId};
use crate::sched::pelt::SchedAvg;
use crate::engine::time::Ns;

/// Scheduling policy (include/uapi/linux/sched.h).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    Other,
    Fifo,
    Rr,
    Batch,
    Idle,
    Ext,
}

impl Policy {
    pub fn is_rt(self) -> bool {
        matches!(self, Policy::Fifo | Policy::Rr)
    }

    pub fn parse(s: &str) -> Option<Policy> {
        Some(match s.to_ascii_lowercase().as_str() {
            "other" | "normal" | "fair" => Policy::Other,
            "fifo" => Policy::Fifo,
            "rr" => Policy::Rr,
            "batch" => Policy::Batch,
            "idle" => Policy::Idle,
            "ext" => Policy::Ext,
            _ => return None,
        })
    }

    pub fn kernel_name(self) -> &'static str {
        match self {
            Policy::Other => "SCHED_OTHER",
            Policy::Fifo => "SCHED_FIFO",
            Policy::Rr => "SCHED_RR",
            Policy::Batch => "SCHED_BATCH",
            Policy::Idle => "SCHED_IDLE",
            Policy::Ext => "SCHED_EXT",
        }
    }
}

pub const MAX_RT_PRIO: i32 = 100;
pub const DEFAULT_PRIO: i32 = 120;
pub const NICE_0_LOAD: u64 = 1024;

/// sched_prio_to_weight: nice -20..19; each step is ~1.25x (10% CPU per nice level).
pub const PRIO_TO_WEIGHT: [u32; 40] = [
    88761, 71755, 56483, 46273, 36291, 29154, 23254, 18705, 14949, 11916, 9548, 7620, 6100, 4904,
    3906, 3121, 2501, 1991, 1586, 1277, 1024, 820, 655, 526, 423, 335, 272, 215, 172, 137, 110, 87,
    70, 56, 45, 36, 29, 23, 18, 15,
];

/// sched_prio_to_wmult: 2^32 / weight, precomputed so that division becomes multiplication.
pub const PRIO_TO_WMULT: [u32; 40] = [
    48388, 59856, 76040, 92818, 118348, 147320, 184698, 229616, 287308, 360437, 449829, 563644,
    704093, 875809, 1099582, 1376151, 1717300, 2157191, 2708050, 3363326, 4194304, 5237765,
    6557202, 8165337, 10153587, 12820798, 15790321, 19976592, 24970740, 31350126, 39045157,
    49367440, 61356676, 76695844, 95443717, 119304647, 148102320, 186737708, 238609294,
    286331153,
];

/// SCHED_IDLE tasks get the tiny WEIGHT_IDLEPRIO.
pub const WEIGHT_IDLEPRIO: u32 = 3;
pub const WMULT_IDLEPRIO: u32 = 1_431_655_765;

/// A load weight and its inverse, as `struct load_weight`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadWeight {
    pub weight: u64,
    pub inv_weight: u32,
}

impl LoadWeight {
    pub fn for_nice(nice: i32, policy: Policy) -> Self {
        if policy == Policy::Idle {
            return LoadWeight { weight: WEIGHT_IDLEPRIO as u64, inv_weight: WMULT_IDLEPRIO };
        }
        let i = (nice.clamp(-20, 19) + 20) as usize;
        LoadWeight { weight: PRIO_TO_WEIGHT[i] as u64, inv_weight: PRIO_TO_WMULT[i] }
    }
}

/// The fair-class scheduling entity (`struct sched_entity`), flat (no group hierarchy).
#[derive(Clone, Debug, Default)]
pub struct SchedEntity {
    pub load: LoadWeight,
    pub vruntime: u64,
    pub deadline: u64,
    /// Slice-protection horizon (RUN_TO_PARITY): the entity is protected while vruntime < vprot.
    pub vprot: u64,
    /// Virtual lag preserved across sleep, or the relative deadline when `rel_deadline`.
    pub vlag: i64,
    pub slice: Ns,
    pub custom_slice: bool,
    pub rel_deadline: bool,
    pub sched_delayed: bool,
    /// Queued in the cfs_rq (includes the running entity and delayed entities).
    pub on_rq: bool,
    pub exec_start: Ns,
    /// When the entity was last picked to run: its place in `cfs.lru`.
    pub lru_stamp: Ns,
    pub sum_exec_runtime: Ns,
    pub prev_sum_exec_runtime: Ns,
    pub avg: SchedAvg,
}

impl Default for LoadWeight {
    fn default() -> Self {
        LoadWeight::for_nice(0, Policy::Other)
    }
}

/// The RT-class entity.
#[derive(Clone, Debug, Default)]
pub struct RtEntity {
    /// Remaining RR quantum, in ticks.
    pub time_slice: u32,
    pub on_rq: bool,
}

/// Which scheduling class a task belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ClassId {
    Rt,
    Fair,
    /// sched_ext: below fair (above idle).
    Ext,
    Idle,
}

/// Task state as the core sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskState {
    /// Created, not yet woken for the first time.
    New,
    /// TASK_RUNNING: queued on a runqueue or on a CPU.
    Runnable,
    /// Blocked (sleeping, waiting on an object).
    Blocked,
    /// Exited.
    Dead,
}

pub use crate::engine::rng::Dist;

/// Index into the simulator's wait-object table.
pub type ObjId = u32;
/// Index into the simulator's lock table.
pub type LockId = u32;
/// Index into the simulator's program table.
pub type ProgId = u32;

/// One step of a behaviour program. A program is executed by the task while
/// it is on a CPU: instant steps run back to back, `Run` consumes CPU time,
/// blocking steps take the task off the CPU.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// Burn CPU for a duration.
    Run(Dist),
    /// Relative sleep (nanosleep); SCHED_OTHER tasks get timer slack.
    Sleep(Dist),
    /// cyclictest's loop: advance the task's next wake time by `period`, sleep
    /// until it (clock_nanosleep TIMER_ABSTIME), and on return record the
    /// latency now - intended into the workload's histogram.
    SleepPeriodic { period: Ns },
    /// Take one token from a wait object, blocking while it has none
    /// (pipe/socket read, futex wait, semaphore down).
    Wait { obj: ObjId },
    /// Put one token into a wait object, blocking while it is full (pipe write).
    /// Wakes one waiting reader; `sync` marks a WF_SYNC wakeup.
    Post { obj: ObjId, sync: bool },
    /// sched_yield().
    Yield,
    /// yield_to() the task in `slot` of the task's peer list.
    YieldTo { slot: u32 },
    /// Acquire a spinlock, busy-waiting while it is held. With `ple_ns`, a
    /// spinning vCPU exits after that long and yields to the holder (pause-loop exit).
    Lock { lock: LockId, ple_ns: Option<Ns> },
    Unlock { lock: LockId },
    /// Create a child task running `prog`, with the parent's attributes.
    Fork { prog: ProgId },
    /// sched_setattr() on itself: policy, nice and RT priority.
    SetSched { policy: Policy, nice: i32, rt_priority: u32 },
    /// sched_setaffinity() on itself.
    SetAffinity { cpus: CpuMask },
    /// Exit.
    Exit,
    /// Jump back to `to` until `count` iterations are done (`None` = forever).
    /// `slot` is the task-local counter this loop uses.
    Loop { to: u32, count: Option<u32>, slot: u32 },
    /// Count one unit of work done (throughput metric of the workload).
    Work,
    /// Note the start of a request (gettimeofday before handling it); a
    /// `Post` to a stamped wait object carries this stamp to its reader.
    Stamp,
    /// Record a latency into the workload's histograms (schbench, server).
    Record { what: Measure },
    /// Take the spinlock of the CPU the task is on (`base + cpu`), as
    /// schbench's lock_this_cpu(); `UnlockCpu` releases the one taken.
    LockCpu { base: LockId },
    UnlockCpu,
    /// Wait until `parties` tasks have reached the barrier in `obj`; the
    /// last one wakes the others (rt-app's barrier event).
    Barrier { obj: ObjId, parties: u32 },
    /// rt-app's timer event: sleep until the timer in task slot `slot`
    /// next expires (its reference plus `period`), recording the wakeup
    /// latency when `record`. A missed expiry does not sleep; in relative
    /// mode it also moves the reference to now. An exponential period makes
    /// the expiries a Poisson process (schbench -R arrivals).
    Timer { slot: u32, period: Dist, absolute: bool, record: bool },
}

/// What `Op::Record` measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Measure {
    /// From the waker's post to now (the task was woken by a `Post`);
    /// nothing is recorded when the task did not have to block.
    Wakeup,
    /// From the task's request stamp to now.
    Request,
}

/// A behaviour program shared by the tasks of a workload.
#[derive(Clone, Debug, Default)]
pub struct Program {
    pub ops: Vec<Op>,
    pub loop_slots: u32,
}

/// Per-task statistics (schedstat-like).
#[derive(Clone, Debug, Default, Serialize)]
pub struct TaskStats {
    pub runtime_ns: Ns,
    pub wait_ns: Ns,
    pub switches: u64,
    pub voluntary_switches: u64,
    pub migrations: u64,
    pub wakeups: u64,
    pub work: u64,
}

/// A simulated task (`struct task_struct`, the parts the scheduler reads).
#[derive(Clone, Debug)]
pub struct Task {
    pub id: TaskId,
    pub name: String,
    pub workload: u32,
    /// Process (mm) this thread belongs to.
    pub tgid: u32,
    pub cgroup: String,
    /// The task group of `cgroup` (0: the root).
    pub cgrp: u32,
    pub policy: Policy,
    pub nice: i32,
    pub rt_priority: u32,
    pub static_prio: i32,
    pub prio: i32,
    pub class: ClassId,
    pub cpus_allowed: CpuMask,
    pub nr_cpus_allowed: u32,
    /// Every CPU the task has run on (results: affinity checks).
    pub ran_on: CpuMask,
    pub state: TaskState,
    /// task_cpu(p): the runqueue the task belongs to.
    pub cpu: Cpu,
    /// Queued on its runqueue (task_on_rq_queued).
    pub on_rq: bool,
    pub se: SchedEntity,
    pub rt: RtEntity,
    /// Bytes of cache the task needs warm; drives the migration refill penalty.
    pub working_set: u64,
    pub prog: ProgId,
    pub pc: u32,
    pub loop_counts: Vec<u32>,
    /// CPU time left in the current `Run` step.
    pub run_left: Option<Ns>,
    /// Pause-loop exit time while spinning.
    pub ple_deadline: Option<Ns>,
    /// Intended wake time for latency measurement (SleepPeriodic).
    pub next_wake: Ns,
    pub measure_on_run: bool,
    /// Timer generation: a stale Timer event for this task is ignored.
    pub timer_gen: u32,
    /// Time the task last became runnable-but-not-running (for wait accounting).
    pub wait_start: Option<Ns>,
    /// Cache refill time still to be paid before the task progresses.
    pub refill_left: Ns,
    /// Spinning on this lock (while on CPU) since `spin_start`.
    pub spinning: Option<LockId>,
    pub spin_start: Ns,
    /// The spinner was switched back in and must re-check the lock.
    pub spin_retry: bool,
    /// Peer tasks for YieldTo (e.g. the vCPUs of the same VM).
    pub peers: Vec<TaskId>,
    pub parent: Option<TaskId>,
    // wake_wide() bookkeeping
    pub wakee_flips: u32,
    pub wakee_flip_decay_ts: Ns,
    pub last_wakee: Option<TaskId>,
    pub recent_used_cpu: Cpu,
    /// Last time this task was switched out (task_hot).
    pub last_ran: Ns,
    pub created_at: Ns,
    pub exited_at: Option<Ns>,
    pub stats: TaskStats,
    /// Request start (Op::Stamp), carried through stamped wait objects.
    pub stamp: Option<Ns>,
    /// When a `Post` woke the task from a `Wait` (for Measure::Wakeup).
    pub woken_at: Option<Ns>,
    /// The per-CPU lock taken by Op::LockCpu.
    pub cpu_lock: Option<LockId>,
    /// rt-app timers: next expiry per timer slot (None before first use).
    pub timers: Vec<Option<Ns>>,
    /// sched_ext state (`p->scx`, `struct sched_ext_entity`).
    pub scx: crate::sched::ext::ScxTask,
}

impl Task {
    /// Computes static_prio, prio, weight and class from policy, nice and rt_priority
    /// (`__setscheduler_params` / `normal_prio` / `set_load_weight`).
    pub fn set_sched_params(&mut self) {
        self.static_prio = DEFAULT_PRIO + self.nice;
        self.prio = if self.policy.is_rt() {
            MAX_RT_PRIO - 1 - self.rt_priority as i32
        } else {
            self.static_prio
        };
        self.se.load = LoadWeight::for_nice(self.nice, self.policy);
        self.class = if self.policy.is_rt() { ClassId::Rt } else { ClassId::Fair };
    }

    pub fn is_running_state(&self) -> bool {
        self.state == TaskState::Runnable
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weight_tables_are_consistent() {
        for (w, m) in PRIO_TO_WEIGHT.iter().zip(PRIO_TO_WMULT.iter()) {
            let prod = *w as u64 * *m as u64;
            // wmult = 2^32 / weight, rounded
            assert!((prod as i64 - (1i64 << 32)).unsigned_abs() < *w as u64, "{w} {m}");
        }
        assert_eq!(LoadWeight::for_nice(0, Policy::Other).weight, NICE_0_LOAD);
        assert_eq!(LoadWeight::for_nice(5, Policy::Other).weight, 335);
    }
}
