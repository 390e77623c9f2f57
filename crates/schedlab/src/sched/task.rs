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
    /// SCHED_OTHER (SCHED_NORMAL): the fair class, weighted by nice.
    Other,
    /// SCHED_FIFO: RT, runs until it blocks or a higher priority preempts it.
    Fifo,
    /// SCHED_RR: RT with a round-robin quantum among equal priorities.
    Rr,
    /// SCHED_BATCH: fair, but never preempts on wakeup.
    Batch,
    /// SCHED_IDLE: fair with the minimal weight (`WEIGHT_IDLEPRIO`).
    Idle,
    /// SCHED_EXT: scheduled by the loaded sched_ext scheduler.
    Ext,
}

impl Policy {
    /// SCHED_FIFO or SCHED_RR (`rt_policy()`).
    pub fn is_rt(self) -> bool {
        matches!(self, Policy::Fifo | Policy::Rr)
    }

    /// Parses a policy name as scenarios write it ("other"/"normal"/"fair", "fifo", "rr", "batch", "idle", "ext"), case-insensitive.
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

    /// The uapi constant's name, e.g. `SCHED_FIFO`.
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

/// MAX_RT_PRIO: prio values below it are RT (prio = 99 - rt_priority).
pub const MAX_RT_PRIO: i32 = 100;
/// DEFAULT_PRIO: the static priority of nice 0 (MAX_RT_PRIO + 20).
pub const DEFAULT_PRIO: i32 = 120;
/// The load weight of a nice-0 task (`NICE_0_LOAD` without the fixed-point shift).
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
/// WMULT_IDLEPRIO: 2^32 / WEIGHT_IDLEPRIO.
pub const WMULT_IDLEPRIO: u32 = 1_431_655_765;

/// A load weight and its inverse, as `struct load_weight`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadWeight {
    /// The weight (`load_weight.weight`), 1024 at nice 0.
    pub weight: u64,
    /// 2^32 / weight (`load_weight.inv_weight`), for `__calc_delta()`.
    pub inv_weight: u32,
}

impl LoadWeight {
    /// The weight of a task with this nice and policy (`set_load_weight()`): SCHED_IDLE gets WEIGHT_IDLEPRIO, others the nice table entry (nice clamped to -20..19).
    pub fn for_nice(nice: i32, policy: Policy) -> Self {
        if policy == Policy::Idle {
            return LoadWeight { weight: WEIGHT_IDLEPRIO as u64, inv_weight: WMULT_IDLEPRIO };
        }
        let i = (nice.clamp(-20, 19) + 20) as usize;
        LoadWeight { weight: PRIO_TO_WEIGHT[i] as u64, inv_weight: PRIO_TO_WMULT[i] }
    }
}

/// The fair-class scheduling entity (`struct sched_entity`), flat (no group hierarchy).
///
/// `repr(C)` with the runtime clock first: every class charges runtime
/// through it (`update_se`), and under sched_ext it is all that is read of
/// the entity, so it shares a cache line with the end of [`Task::scx`].
#[derive(Clone, Debug, Default)]
#[repr(C)]
pub struct SchedEntity {
    /// When the running entity's runtime was last accounted (`se->exec_start`), ns.
    pub exec_start: Ns,
    /// Total CPU time consumed, ns (`se->sum_exec_runtime`).
    pub sum_exec_runtime: Ns,
    /// The entity's weight (`se->load`).
    pub load: LoadWeight,
    /// Virtual runtime in weighted ns (`se->vruntime`), relative to the cfs_rq's zero-lag point V.
    pub vruntime: u64,
    /// Virtual deadline (`se->deadline`): vruntime + the slice scaled by weight.
    pub deadline: u64,
    /// Slice-protection horizon (RUN_TO_PARITY): the entity is protected while vruntime < vprot.
    pub vprot: u64,
    /// Virtual lag preserved across sleep, or the relative deadline when `rel_deadline`.
    pub vlag: i64,
    /// Requested slice in ns (`se->slice`), the base slice unless set by sched_attr.
    pub slice: Ns,
    /// The slice was set through sched_attr (`se->custom_slice`).
    pub custom_slice: bool,
    /// `vlag` holds the relative deadline, not the lag (`se->rel_deadline`).
    pub rel_deadline: bool,
    /// Dequeue was delayed (DELAY_DEQUEUE): the entity sleeps but stays queued until its lag is eligible (`se->sched_delayed`).
    pub sched_delayed: bool,
    /// Queued in the cfs_rq (includes the running entity and delayed entities).
    pub on_rq: bool,
    /// When the entity was last picked to run: its place in `cfs.lru`.
    pub lru_stamp: Ns,
    /// `sum_exec_runtime` when the entity was last picked (`se->prev_sum_exec_runtime`), for the slice check.
    pub prev_sum_exec_runtime: Ns,
    /// PELT load / runnable / util averages (`se->avg`).
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
    /// Queued on the RT runqueue (`rt_se->on_rq`).
    pub on_rq: bool,
}

/// Which scheduling class a task belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ClassId {
    /// rt_sched_class: SCHED_FIFO / SCHED_RR.
    Rt,
    /// fair_sched_class: SCHED_OTHER / BATCH / IDLE (EEVDF).
    Fair,
    /// sched_ext: below fair (above idle).
    Ext,
    /// idle_sched_class: the per-CPU idle task.
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
///
/// An explicit tag byte (`repr(u8)`) rather than one folded into `Dist`'s:
/// the interpreter's dispatch on the step is then a load and a jump.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(u8)]
pub enum Op {
    /// Burn CPU for a duration.
    Run(Dist),
    /// Relative sleep (nanosleep); SCHED_OTHER tasks get timer slack.
    Sleep(Dist),
    /// cyclictest's loop: advance the task's next wake time by `period`, sleep
    /// until it (clock_nanosleep TIMER_ABSTIME), and on return record the
    /// latency now - intended into the workload's histogram.
    SleepPeriodic {
        /// The cyclictest interval (`-i`), ns.
        period: Ns,
    },
    /// Take one token from a wait object, blocking while it has none
    /// (pipe/socket read, futex wait, semaphore down).
    Wait {
        /// The wait object (pipe, futex, semaphore) to take a token from.
        obj: ObjId,
    },
    /// Put one token into a wait object, blocking while it is full (pipe write).
    /// Wakes one waiting reader; `sync` marks a WF_SYNC wakeup.
    Post {
        /// The wait object to put a token into.
        obj: ObjId,
        /// A synchronous wakeup (WF_SYNC): the poster is about to sleep.
        sync: bool,
    },
    /// sched_yield().
    Yield,
    /// yield_to() the task in `slot` of the task's peer list.
    YieldTo {
        /// Index of the target in the task's `peers`.
        slot: u32,
    },
    /// Acquire a spinlock, busy-waiting while it is held. With `ple_ns`, a
    /// spinning vCPU exits after that long and yields to the holder (pause-loop exit).
    Lock {
        /// The spinlock.
        lock: LockId,
        /// Pause-loop-exit window: spin this long, then yield to the holder.
        ple_ns: Option<Ns>,
    },
    /// Release a spinlock taken by `Lock`.
    Unlock {
        /// The spinlock.
        lock: LockId,
    },
    /// Create a child task running `prog`, with the parent's attributes.
    Fork {
        /// The program the child runs.
        prog: ProgId,
    },
    /// sched_setattr() on itself: policy, nice and RT priority.
    SetSched {
        /// The new policy.
        policy: Policy,
        /// The new nice value, -20..19.
        nice: i32,
        /// The new RT priority, 1..99 (RT policies).
        rt_priority: u32,
    },
    /// sched_setaffinity() on itself.
    SetAffinity {
        /// The new `cpus_allowed`: an index into `Sim::affinity_masks`
        /// (a mask is too large to copy at every step the interpreter takes).
        mask: u32,
    },
    /// Move itself into task group `group` (rt-app's per-phase
    /// `taskgroup`: the thread's tid written into the group's tasks file,
    /// `cgroup_attach_task` -> `sched_move_task`).
    SetCgroup {
        /// The task group (index into `Sim::cg.groups`).
        group: u32,
    },
    /// Exit.
    Exit,
    /// Jump back to `to` until `count` iterations are done (`None` = forever).
    /// `slot` is the task-local counter this loop uses.
    Loop {
        /// Index of the op to jump back to.
        to: u32,
        /// Iterations, or `None` for forever.
        count: Option<u32>,
        /// Index into the task's `loop_counts`.
        slot: u32,
    },
    /// Count one unit of work done (throughput metric of the workload).
    Work,
    /// Note the start of a request (gettimeofday before handling it); a
    /// `Post` to a stamped wait object carries this stamp to its reader.
    Stamp,
    /// Record a latency into the workload's histograms (schbench, server).
    Record {
        /// Which latency to record.
        what: Measure,
    },
    /// Take the spinlock of the CPU the task is on (`base + cpu`), as
    /// schbench's lock_this_cpu(); `UnlockCpu` releases the one taken.
    LockCpu {
        /// Lock id of CPU 0's lock; CPU c uses `base + c`.
        base: LockId,
    },
    /// Release the per-CPU lock taken by `LockCpu`.
    UnlockCpu,
    /// Wait until `parties` tasks have reached the barrier in `obj`; the
    /// last one wakes the others (rt-app's barrier event).
    Barrier {
        /// The wait object that holds the barrier's waiters.
        obj: ObjId,
        /// How many tasks must arrive before all proceed.
        parties: u32,
    },
    /// rt-app's timer event: sleep until the timer in task slot `slot`
    /// next expires (its reference plus `period`), recording the wakeup
    /// latency when `record`. A missed expiry does not sleep; in relative
    /// mode it also moves the reference to now. An exponential period makes
    /// the expiries a Poisson process (schbench -R arrivals).
    Timer {
        /// Index into the task's `timers`.
        slot: u32,
        /// Time between expiries.
        period: Dist,
        /// Absolute mode: expiries stay on the original grid when one is missed.
        absolute: bool,
        /// Record the wakeup latency (now - expiry) into the workload's histogram.
        record: bool,
    },
}

/// `Op::Timer`'s expiry rule, for the simulator and real mode alike: timer
/// `slot` of `timers` advances by `period` from its reference (`now` at its
/// first use). Returns the expiry to sleep until, or None when it has
/// already passed: a missed expiry does not sleep, and a relative (not
/// `absolute`) timer then restarts from now.
pub fn next_timer_expiry(timers: &mut Vec<Option<Ns>>, slot: usize, now: Ns, period: Ns, absolute: bool) -> Option<Ns> {
    if timers.len() <= slot {
        timers.resize(slot + 1, None);
    }
    let next = timers[slot].unwrap_or(now) + period;
    timers[slot] = Some(next);
    if next > now {
        return Some(next);
    }
    if !absolute {
        timers[slot] = Some(now);
    }
    None
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
    /// The steps, executed from index 0.
    pub ops: Vec<Op>,
    /// How many loop counters (`Op::Loop` slots) a task running it needs.
    pub loop_slots: u32,
}

/// Per-task statistics (schedstat-like).
#[derive(Clone, Debug, Default, Serialize)]
pub struct TaskStats {
    /// Time on a CPU, ns (`se.sum_exec_runtime`).
    pub runtime_ns: Ns,
    /// Time runnable but not running, ns (schedstat run_delay).
    pub wait_ns: Ns,
    /// Times switched in (schedstat pcount).
    pub switches: u64,
    /// Switches out because the task blocked (`nvcsw`).
    pub voluntary_switches: u64,
    /// Times the task changed CPU (`se.nr_migrations`).
    pub migrations: u64,
    /// Times the task was woken.
    pub wakeups: u64,
    /// Units of work completed (`Op::Work`).
    pub work: u64,
}

/// A simulated task (`struct task_struct`, the parts the scheduler reads).
///
/// `repr(C)`, fields in the order the hot path wants them (see below), and
/// line-aligned: what every event on the task reads under sched_ext (up to
/// the fair entity's clock) then fills exactly seven cache lines, where the
/// same bytes at an arbitrary offset in the task array span eight or nine.
#[derive(Clone, Debug)]
#[repr(C, align(64))]
pub struct Task {
    // What the event path reads and writes, together at the start: with
    // tens of thousands of tasks the tasks do not fit in the caches, and
    // each event touches one or two of them.
    /// The task's pid (index into `Sim::tasks`).
    pub id: TaskId,
    /// Lifecycle state.
    pub state: TaskState,
    /// task_cpu(p): the runqueue the task belongs to.
    pub cpu: Cpu,
    /// Queued on its runqueue (task_on_rq_queued).
    pub on_rq: bool,
    /// The class the task is scheduled by (`p->sched_class`).
    pub class: ClassId,
    /// Scheduling policy (`p->policy`).
    pub policy: Policy,
    /// `p->prio`: the effective priority; below 100 is RT.
    pub prio: i32,
    /// Timer generation: a stale Timer event for this task is ignored.
    pub timer_gen: u32,
    /// The behaviour program the task runs.
    pub prog: ProgId,
    /// Index of the current step in the program.
    pub pc: u32,
    /// Number of CPUs in `cpus_allowed` (`p->nr_cpus_allowed`).
    pub nr_cpus_allowed: u32,
    /// Index of the scenario workload that created the task (its
    /// counters are bumped as the program runs).
    pub workload: u32,
    /// Process (mm) this thread belongs to (a switch compares it, lazy TLB).
    pub tgid: u32,
    /// The task group of `cgroup` (0: the root); a hosted scheduler's
    /// every call on the task reads it.
    pub cgrp: u32,
    /// The CPU `ran_on` last recorded: a switch-in on the same CPU leaves
    /// the mask (heap words beyond 256 CPUs) untouched.
    pub ran_on_last: Cpu,
    /// `p->recent_used_cpu`: a candidate for select_idle_sibling().
    pub recent_used_cpu: Cpu,
    /// wake_wide()'s `p->wakee_flips`: how often the task switched the task it wakes, decayed each second.
    pub wakee_flips: u32,
    /// The task this one last woke (`p->last_wakee`).
    pub last_wakee: Option<TaskId>,
    /// CPUs the task may run on (`p->cpus_ptr`): every wakeup and every
    /// DSQ scan reads its size (`allowed_on`).
    pub cpus_allowed: CpuMask,
    /// Spinning on this lock (while on CPU) since `spin_start`.
    pub spinning: Option<LockId>,
    /// Record the wakeup latency when the task next gets on a CPU (set by SleepPeriodic).
    pub measure_on_run: bool,
    /// The spinner was switched back in and must re-check the lock.
    pub spin_retry: bool,
    /// CPU time left in the current `Run` step.
    pub run_left: Option<Ns>,
    /// Cache refill time still to be paid before the task progresses.
    pub refill_left: Ns,
    /// Time the task last became runnable-but-not-running (for wait accounting).
    pub wait_start: Option<Ns>,
    /// Last time this task was switched out (task_hot).
    pub last_ran: Ns,
    /// Bytes of cache the task needs warm; drives the migration refill penalty.
    pub working_set: u64,
    /// When `wakee_flips` was last halved (`p->wakee_flip_decay_ts`), ns.
    pub wakee_flip_decay_ts: Ns,
    /// Per-task statistics for the results.
    pub stats: TaskStats,
    /// sched_ext state (`p->scx`, `struct sched_ext_entity`): before
    /// the fair entity, whose clock (its first fields) is all the ext
    /// class reads of it.
    pub scx: crate::sched::ext::ScxTask,
    /// The fair-class entity (`p->se`).
    pub se: SchedEntity,
    // Read by a few steps only (stamped wait objects, periodic sleeps).
    /// Request start (Op::Stamp), carried through stamped wait objects.
    pub stamp: Option<Ns>,
    /// When a `Post` woke the task from a `Wait` (for Measure::Wakeup).
    pub woken_at: Option<Ns>,
    /// Intended wake time for latency measurement (SleepPeriodic).
    pub next_wake: Ns,
    /// Iterations done per loop slot.
    pub loop_counts: Vec<u32>,
    /// The RT-class entity (`p->rt`).
    pub rt: RtEntity,
    // The rest: identity, setup, results, sched_ext's entity.
    /// `comm`: the workload name and an index.
    pub name: String,
    /// The cgroup path the task belongs to, e.g. "/web" ("/" for the root).
    pub cgroup: String,
    /// Nice value, -20..19.
    pub nice: i32,
    /// RT priority 1..99 (`p->rt_priority`); 0 for other policies.
    pub rt_priority: u32,
    /// `p->static_prio`: 120 + nice.
    pub static_prio: i32,
    /// Every CPU the task has run on (results: affinity checks).
    pub ran_on: CpuMask,
    /// Pause-loop exit time while spinning.
    pub ple_deadline: Option<Ns>,
    /// When the task began spinning on `spinning`, ns.
    pub spin_start: Ns,
    /// Peer tasks for YieldTo (e.g. the vCPUs of the same VM).
    pub peers: Vec<TaskId>,
    /// The task that forked this one (`p->real_parent`); `None` for workload tasks.
    pub parent: Option<TaskId>,
    /// When the task was created, ns.
    pub created_at: Ns,
    /// When the task exited, ns.
    pub exited_at: Option<Ns>,
    /// The per-CPU lock taken by Op::LockCpu.
    pub cpu_lock: Option<LockId>,
    /// rt-app timers: next expiry per timer slot (None before first use).
    pub timers: Vec<Option<Ns>>,
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

    /// TASK_RUNNING: runnable or on a CPU.
    pub fn is_running_state(&self) -> bool {
        self.state == TaskState::Runnable
    }

    /// Starts loading the lines of the task that an event on it reads:
    /// its head (state, CPU, affinity, step, counters) and, with `ext`,
    /// its sched_ext entity and the fair entity's clock after it, else the
    /// whole fair entity. One field in each line (the task is line-aligned;
    /// a test checks that these cover the lines). Only timing changes.
    #[inline(always)]
    pub(crate) fn prefetch(&self, ext: bool) {
        use crate::sched::prefetch;
        prefetch(self);
        prefetch(&self.cpus_allowed);
        prefetch(&self.run_left);
        prefetch(&self.stats);
        if ext {
            prefetch(&self.scx.dsq);
            prefetch(&self.scx.local_since);
        }
        prefetch(&self.se);
        if !ext {
            prefetch(&self.se.prev_sum_exec_runtime);
            prefetch(&self.se.avg.util_sum);
        }
    }

    /// Whether the task may run on `cpu` (`cpumask_test_cpu(cpu, p->cpus_ptr)`).
    /// A task allowed everywhere (`nr_cpus_allowed`, kept with the mask,
    /// covers the machine) is answered without reading the mask, whose
    /// words live on the heap beyond 256 CPUs.
    #[inline]
    pub fn allowed_on(&self, cpu: usize) -> bool {
        self.allowed_everywhere() || self.cpus_allowed.test(cpu)
    }

    /// Whether the task may run on every CPU, as most may: a scan over
    /// many CPUs tests this once instead of each CPU's bit.
    #[inline]
    pub fn allowed_everywhere(&self) -> bool {
        self.nr_cpus_allowed as usize == self.cpus_allowed.nr_bits()
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

    /// The lines [`Task::prefetch`] touches are every line from the task's
    /// start to the end of what each class reads: through the fair
    /// entity's clock under sched_ext, through the whole fair entity else.
    #[test]
    fn prefetch_covers_the_hot_lines() {
        use std::collections::BTreeSet;
        use std::mem::{align_of, offset_of, size_of};
        assert_eq!(align_of::<Task>(), 64);
        let line = |off: usize| off / 64;
        let head = [0, offset_of!(Task, cpus_allowed), offset_of!(Task, run_left), offset_of!(Task, stats)];
        let ext = [offset_of!(Task, scx.dsq), offset_of!(Task, scx.local_since), offset_of!(Task, se)];
        let fair = [offset_of!(Task, se), offset_of!(Task, se.prev_sum_exec_runtime), offset_of!(Task, se.avg.util_sum)];
        let got = |extra: &[usize]| head.iter().chain(extra).map(|&o| line(o)).collect::<BTreeSet<_>>();
        let want = |end: usize| (0..=line(end - 1)).collect::<BTreeSet<_>>();
        let clock_end = offset_of!(Task, se.sum_exec_runtime) + size_of::<Ns>();
        assert_eq!(got(&ext), want(clock_end), "sched_ext");
        let se_end = offset_of!(Task, se) + size_of::<SchedEntity>();
        let mut fair_lines = want(offset_of!(Task, scx));
        fair_lines.extend(line(offset_of!(Task, se))..=line(se_end - 1));
        assert_eq!(got(&fair), fair_lines, "fair");
    }
}
