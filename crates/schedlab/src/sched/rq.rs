//! Per-CPU runqueue state (`struct rq`, `struct cfs_rq`, `struct rt_rq`;
//! `struct scx_rq` is in sched/ext).

use std::collections::VecDeque;

use crate::engine::{Cpu, TaskId};
use crate::sched::ordset::{Counts, OrdSet};
use crate::sched::pelt::SchedAvg;
use crate::engine::time::Ns;

/// A fair-class queue: a CPU's root one (`rq.cfs`) or a task group's on
/// one CPU (`tg->cfs_rq[cpu]`, in [`crate::sched::cgroup::TaskGroups`]).
///
/// `repr(C)`, fields in this order: load balancing reads `h_nr_runnable`
/// and the averages of every CPU of a domain, and these come right after
/// [`Rq`]'s own first fields, at the start of the runqueue.
#[derive(Debug, Default)]
#[repr(C)]
pub struct CfsRq {
    /// Tasks queued here or below that are not delayed (h_nr_runnable).
    pub h_nr_runnable: u32,
    /// Queued entities including curr and delayed ones (cfs_rq->nr_queued).
    pub nr_queued: u32,
    /// Runqueue-level load average.
    pub avg: SchedAvg,
    /// Queued entities other than `curr`, ordered by (deadline, entity id:
    /// a task id, or a group entity's with the high bit set), each with its
    /// vruntime: an entity's vruntime changes only off the timeline, so the
    /// pick tests eligibility here without a cache miss per candidate (the
    /// kernel's tree keeps min_vruntime in its nodes for the same reason).
    pub timeline: OrdSet<(u64, TaskId, u64)>,
    /// The running fair entity, if the CPU runs a fair task. It stays queued
    /// (`on_rq`) but lives outside the timeline and the sums below.
    pub curr: Option<TaskId>,
    /// Nominated buddy (yield_to, NEXT_BUDDY).
    pub next: Option<TaskId>,
    /// Tasks queued here or below, delayed ones included (h_nr_queued).
    pub h_nr_queued: u32,
    /// Sum of queued weights, curr and delayed included (cfs_rq->load.weight).
    pub load_weight: u64,
    /// Σ (v_i - zero_vruntime) * w_i over the timeline (cfs_rq->avg_vruntime).
    pub sum_w_vruntime: i128,
    /// Σ w_i over the timeline (cfs_rq->avg_load).
    pub sum_weight: u64,
    /// The reference point keys are taken against; follows the average.
    pub zero_vruntime: u64,
    /// Slices of the timeline's entities, for the minimum slice (cfs_rq_min_slice).
    pub slices: Counts<Ns>,
    /// The root's: queued tasks by the time they were last picked (rq->cfs_tasks, whose
    /// tail holds the cache-coldest tasks that load balancing tries first).
    pub lru: OrdSet<(Ns, TaskId)>,
    /// CFS bandwidth (a group runqueue under cpu.max): runtime left from
    /// the group's pool, whether it is limited, throttled, and since when.
    pub runtime_remaining: i64,
    /// The group is limited by cpu.max here (`cfs_rq->runtime_enabled`).
    pub runtime_enabled: bool,
    /// Out of runtime: the group entity is off the hierarchy (`cfs_rq->throttled`).
    pub throttled: bool,
    /// When the throttle began, ns (`cfs_rq->throttled_clock`).
    pub throttled_clock: Ns,
}

/// The RT-class queue of one CPU: one FIFO list per priority.
#[derive(Debug)]
pub struct RtRq {
    /// One FIFO per priority 0..99 (`rt_prio_array.queue`).
    pub queues: Vec<VecDeque<TaskId>>,
    /// Bit per non-empty priority (`rt_prio_array.bitmap`).
    pub bitmap: [u64; 2],
    /// Queued RT tasks, the running one included (`rt_rq->rt_nr_running`).
    pub rt_nr_running: u32,
    /// Queued RT tasks that could run elsewhere and are not running, by (prio, id).
    pub pushable: OrdSet<(i32, TaskId)>,
    /// RT time consumed in the current bandwidth period.
    pub rt_time: Ns,
    /// RT bandwidth is exhausted for this period (`rt_rq->rt_throttled`).
    pub throttled: bool,
}

impl Default for RtRq {
    fn default() -> Self {
        RtRq {
            queues: (0..100).map(|_| VecDeque::new()).collect(),
            bitmap: [0; 2],
            rt_nr_running: 0,
            pushable: OrdSet::default(),
            rt_time: 0,
            throttled: false,
        }
    }
}

impl RtRq {
    /// Highest (numerically lowest) queued priority, or 100 (MAX_RT_PRIO) if none.
    pub fn highest_prio(&self) -> i32 {
        if self.bitmap[0] != 0 {
            self.bitmap[0].trailing_zeros() as i32
        } else if self.bitmap[1] != 0 {
            64 + self.bitmap[1].trailing_zeros() as i32
        } else {
            100
        }
    }

    /// Updates the bitmap bit of `prio` after its queue changed.
    pub fn mark(&mut self, prio: i32) {
        let p = prio as usize;
        if self.queues[p].is_empty() {
            self.bitmap[p / 64] &= !(1 << (p % 64));
        } else {
            self.bitmap[p / 64] |= 1 << (p % 64);
        }
    }

    /// More than one RT task and one can be pushed (`rt_rq->overloaded`).
    pub fn overloaded(&self) -> bool {
        self.rt_nr_running > 1 && !self.pushable.is_empty()
    }
}

/// Load-balancing state of one CPU at one sched-domain level.
#[derive(Debug, Clone, Default)]
pub struct DomainState {
    /// When this level was last balanced, ns (`sd->last_balance`).
    pub last_balance: Ns,
    /// The current balance interval, ms (`sd->balance_interval`, doubled on balance failure).
    pub balance_interval_ms: u64,
    /// Consecutive failed balance attempts (`sd->nr_balance_failed`).
    pub nr_balance_failed: u32,
}

/// Per-CPU statistics.
#[derive(Debug, Clone, Default)]
pub struct CpuStats {
    /// Time the CPU ran tasks, ns.
    pub busy_ns: Ns,
    /// Context switches (`rq->nr_switches`).
    pub switches: u64,
    /// IPIs the CPU received.
    pub ipis: u64,
    /// Tasks migrated to this CPU.
    pub migrations_in: u64,
    /// Load-balance runs on this CPU.
    pub balance_runs: u64,
    /// Idle-CPU searches (select_idle_sibling() scans) started here.
    pub idle_scans: u64,
}

/// One CPU's runqueue.
///
/// `repr(C)` and cache-line aligned, with what a balance reads of every
/// CPU of a domain first (`curr`, `nr_running`, then the root cfs_rq's
/// `h_nr_runnable` and averages): on a 4,096-CPU domain those reads are
/// the whole cost of a balance, and they touch the runqueue's first 80
/// bytes instead of lines scattered through its ~700.
#[derive(Debug, Default)]
#[repr(C, align(64))]
pub struct Rq {
    /// The running task (`rq->curr`), None when idle.
    pub curr: Option<TaskId>,
    /// All queued tasks of all classes, the running one included (rq->nr_running).
    pub nr_running: u32,
    /// The CPU (`rq->cpu`).
    pub cpu: Cpu,
    /// The root fair runqueue (`rq->cfs`).
    pub cfs: CfsRq,
    // What every event on this CPU reads or writes, together after the
    // fair runqueue's head: on machines of thousands of CPUs the runqueues
    // outgrow the caches, and an event costs a miss per line it touches.
    /// TIF_NEED_RESCHED of the running task: schedule at the next opportunity.
    pub need_resched: bool,
    /// An IPI to this CPU is in flight.
    pub ipi_pending: bool,
    /// An `Event::IrqExit` is queued for this CPU: the reschedule waits for
    /// the interrupt work charged to it (`irq_until`).
    pub irq_exit_pending: bool,
    /// The scheduler tick is armed (false while nohz-idle).
    pub tick_armed: bool,
    /// The nohz idle balancer kicked this CPU.
    pub nohz_kick: bool,
    /// Marked for the kept group statistics of balancing since they were
    /// last brought up to date ([`Sim::balance_touch`](crate::sched::sim::Sim::balance_touch)).
    pub(crate) balance_marked: bool,
    /// The fair server is active: fair tasks run above RT until its budget is used.
    pub fair_server_active: bool,
    /// The RT-bandwidth / fair-server period timer is armed.
    pub bw_timer_armed: bool,
    /// Generation of the running task's step event.
    pub step_gen: u32,
    /// Generation of the hrtick timer (`rq->hrtick_timer`, HRTICK): bumped
    /// to cancel or re-arm it.
    pub hrtick_gen: u32,
    /// Interrupt work on this CPU is being paid for until this time.
    pub irq_until: Ns,
    /// When the pending step event fires, if one is pending.
    pub step_at: Option<Ns>,
    /// When the running task starts (or resumed) making progress; later than
    /// now while a context switch or an interrupt is being paid for.
    pub progress_from: Ns,
    /// Idle since this time (None while running a task).
    pub idle_since: Option<Ns>,
    /// When the current busy stretch began, ns (CPU busy-time accounting).
    pub busy_since: Ns,
    /// Fair runtime received in the current period (fair server).
    pub fair_time: Ns,
    /// When this CPU next runs periodic balancing, ns (`rq->next_balance`):
    /// every tick reads it, so it sits with the tick's other fields.
    pub next_balance: Ns,
    /// Per-CPU counters for the results.
    pub stats: CpuStats,
    // The class runqueues every pick reads past the fair one's head (RT
    // is asked before ext), then the rest.
    /// The RT runqueue (`rq->rt`).
    pub rt: RtRq,
    /// sched_ext state of this CPU (`rq->scx`).
    pub scx: crate::sched::ext::ScxRq,
    /// Process of the last task that ran here (lazy TLB: idle keeps the old mm).
    pub last_tgid: Option<u32>,
    /// Balancing state per sched-domain level, lowest first.
    pub domains: Vec<DomainState>,
    /// Last time the yield_to() lag-credit path forced a local resched (experiment 003).
    pub yield_to_resched_last: Option<Ns>,
    /// Start of the current RT-bandwidth / fair-server period.
    pub bw_period_start: Ns,
    /// Average idle duration (rq->avg_idle), for newidle balance cut-off.
    pub avg_idle: Ns,
}

impl Rq {
    /// No task is running (the idle task is current).
    pub fn is_idle(&self) -> bool {
        self.curr.is_none()
    }
}

/// The root domain's balancing state (`struct root_domain` in sched.h).
/// The simulator has one root domain (no exclusive cpusets).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RootDomain {
    /// CPUs with more than one queued task (`rd->overloaded`, kept as a
    /// count so that it can be updated per CPU).
    pub nr_overloaded: u32,
}
