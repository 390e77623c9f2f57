//! The sched layer: the simulated kernel. Files are named after their
//! kernel counterparts in kernel/sched/:
//!
//! - [`sim`]: [`Sim`], the whole simulated system (runqueues, tasks, root
//!   domain, loaded sched_ext scheduler); `event_loop` delivers ticks,
//!   timers, IPIs and step ends to the handlers below and runs the
//!   return-from-interrupt path; [`ipc`] (wait objects, spinlocks) and
//!   [`metrics`] (what workloads measure) are the state it holds for them;
//! - [`task`]: `task_struct`: policy, priority, weights, the per-class
//!   entities, statistics, and the behaviour program a task runs;
//! - [`rq`]: `struct rq` and the per-class runqueues (sched.h);
//! - `core`: `schedule()`, wakeups, ticks, the class walk (core.c);
//! - [`fair`] (EEVDF, fair.c), [`rt`] (rt.c), [`ext`] (sched_ext, ext.c):
//!   the classes, reached from the core only through [`SchedClass`];
//! - `balance`: load balancing and idle balancing (fair.c's balancing
//!   half); [`topology`]: the sched-domain builder (topology.c);
//! - [`pelt`] (pelt.c), [`cache`] (cache-aware scheduling), [`features`]
//!   (features.h), `syscalls` (syscalls.c);
//! - `exec`: the behaviour-program interpreter, the model of what a task
//!   does in user space and which system calls it makes.
//!
//! The hosting layer is the `schedlab-host` crate above this one
//! (crates/schedlab-host, with the C side in its `shim/` and the shipped
//! schedulers in `schedulers/`): it compiles BPF C schedulers natively and
//! drives them through [`ext::ops::ExtOps`]; all the hosting `unsafe` is
//! there. Nothing in this crate imports it.
//!
//! May import: [`crate::engine`] and [`crate::machine`]; the only upward
//! reference is the tracepoint hooks of [`crate::results::trace`].

pub(crate) mod balance;
pub mod cache;
pub mod cgroup;
pub(crate) mod core;
pub(crate) mod event_loop;
pub(crate) mod exec;
pub mod ext;
pub mod fair;
pub(crate) mod fair_avg;
pub(crate) mod fair_check;
pub(crate) mod fair_bandwidth;
pub(crate) mod fair_group;
pub(crate) mod fork_balance;
pub(crate) mod group_memo;
pub(crate) mod group_tree;
pub(crate) mod hrtick;
pub mod features;
pub mod ipc;
pub mod metrics;
pub mod ordset;
pub mod pelt;
pub mod rq;
pub mod rt;
pub mod sim;
pub(crate) mod syscalls;
pub mod task;
pub mod topology;

use crate::engine::{Cpu, TaskId};
use crate::sched::sim::Sim;
use crate::sched::task::ClassId;

/// Scheduler tunables (sysctls and debugfs knobs), each part defined beside
/// the class that owns it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tunables {
    /// fair.c's: base slice, migration cost, nr_migrate.
    pub fair: fair::FairTunables,
    /// rt.c's: RR quantum, RT bandwidth, the fair server.
    pub rt: rt::RtTunables,
}

/// Enqueue flags (ENQUEUE_* in kernel/sched/sched.h).
pub mod enq {
    /// The task wakes up (ENQUEUE_WAKEUP).
    pub const WAKEUP: u32 = 0x01;
    /// Restoring a task dequeued with SAVE (ENQUEUE_RESTORE): keep its place.
    pub const RESTORE: u32 = 0x02;
    /// Paired with DEQUEUE_MOVE: an attribute or group change (ENQUEUE_MOVE).
    pub const MOVE: u32 = 0x04;
    /// Queue at the head of its list (ENQUEUE_HEAD, RT).
    pub const HEAD: u32 = 0x10;
    /// The task changed CPU (ENQUEUE_MIGRATED).
    pub const MIGRATED: u32 = 0x40;
    /// A new task's first enqueue (ENQUEUE_INITIAL): place it with a half slice.
    pub const INITIAL: u32 = 0x80;
    /// Requeue of a delayed-dequeue entity (ENQUEUE_DELAYED).
    pub const DELAYED: u32 = 0x200;
    /// select_task_rq() chose the CPU (ENQUEUE_RQ_SELECTED).
    pub const RQ_SELECTED: u32 = 0x1000;
    /// The task is moving between runqueues (task_on_rq_migrating()).
    pub const MIGRATING: u32 = 0x2000;
}

/// Dequeue flags (DEQUEUE_*).
pub mod deq {
    /// The task blocks (DEQUEUE_SLEEP).
    pub const SLEEP: u32 = 0x01;
    /// A temporary dequeue around an attribute change (DEQUEUE_SAVE).
    pub const SAVE: u32 = 0x02;
    /// The task moves group or priority (DEQUEUE_MOVE).
    pub const MOVE: u32 = 0x04;
    /// A delayed dequeue's deferred completion, not subject to delay again (DEQUEUE_SPECIAL).
    pub const SPECIAL: u32 = 0x10;
    /// Completing a delayed dequeue (DEQUEUE_DELAYED).
    pub const DELAYED: u32 = 0x200;
    /// The task is moving between runqueues (task_on_rq_migrating()).
    pub const MIGRATING: u32 = 0x2000;
}

/// Wake flags (WF_*).
pub mod wf {
    /// sched_exec() balancing (WF_EXEC).
    pub const EXEC: u32 = 0x02;
    /// The first wakeup of a forked task (WF_FORK).
    pub const FORK: u32 = 0x04;
    /// A try_to_wake_up() wakeup (WF_TTWU).
    pub const TTWU: u32 = 0x08;
    /// A synchronous wakeup: the waker is about to sleep (WF_SYNC).
    pub const SYNC: u32 = 0x10;
    /// The wakee changed CPU (WF_MIGRATED).
    pub const MIGRATED: u32 = 0x20;
}

/// A scheduling class, shaped like `struct sched_class` (kernel/sched/sched.h).
///
/// Classes hold no state of their own: per-CPU state lives in the runqueue
/// (`rq.cfs`, `rq.rt`) and per-task state in the task, as in the kernel, so
/// the class objects are plain statics walked in priority order.
pub trait SchedClass: Sync {
    /// Which class this is.
    fn id(&self) -> ClassId;

    /// Put `p` on `cpu`'s queue of this class (enqueue_task). The core has
    /// already set `p.cpu`.
    fn enqueue_task(&self, sim: &mut Sim, cpu: Cpu, p: TaskId, flags: u32);

    /// Take `p` off the queue (dequeue_task). Returns false when the class
    /// keeps the task queued anyway (fair's DELAY_DEQUEUE).
    fn dequeue_task(&self, sim: &mut Sim, cpu: Cpu, p: TaskId, flags: u32) -> bool;

    /// sched_yield() by the current task.
    fn yield_task(&self, sim: &mut Sim, cpu: Cpu);

    /// yield_to(): nominate `p` (same class, not running) to run next.
    fn yield_to_task(&self, sim: &mut Sim, cpu: Cpu, p: TaskId) -> bool {
        let _ = (sim, cpu, p);
        false
    }

    /// `p` of this class became runnable on `cpu` while another task of this
    /// class runs there: decide whether to preempt (wakeup_preempt).
    fn wakeup_preempt(&self, sim: &mut Sim, cpu: Cpu, p: TaskId, wake_flags: u32);

    /// Pick the next task of this class, or None (pick_task). Must not change
    /// what is running; set_next_task does that.
    fn pick_task(&self, sim: &mut Sim, cpu: Cpu) -> Option<TaskId>;

    /// `prev` stops running on `cpu` (put_prev_task); it may still be queued.
    fn put_prev_task(&self, sim: &mut Sim, cpu: Cpu, prev: TaskId);

    /// `p` becomes the running task of `cpu` (set_next_task).
    fn set_next_task(&self, sim: &mut Sim, cpu: Cpu, p: TaskId, first: bool);

    /// Choose a CPU for a waking or new task (select_task_rq).
    fn select_task_rq(&self, sim: &mut Sim, p: TaskId, prev_cpu: Cpu, wake_flags: u32) -> Cpu;

    /// The periodic tick while `p` runs (task_tick).
    fn task_tick(&self, sim: &mut Sim, cpu: Cpu, p: TaskId);

    /// Account the current task's runtime up to now (update_curr).
    fn update_curr(&self, sim: &mut Sim, cpu: Cpu);

    /// `p` is about to move to `new_cpu` while not queued (migrate_task_rq).
    fn migrate_task_rq(&self, sim: &mut Sim, p: TaskId, new_cpu: Cpu) {
        let _ = (sim, p, new_cpu);
    }

    /// `p` was woken and enqueued on `cpu` but is not running (task_woken).
    fn task_woken(&self, sim: &mut Sim, cpu: Cpu, p: TaskId) {
        let _ = (sim, cpu, p);
    }

    /// Before picking: pull work if this CPU is about to run something of
    /// lower priority or go idle (balance). Returns true if it has work of this class or above.
    fn balance(&self, sim: &mut Sim, cpu: Cpu, prev: Option<TaskId>) -> bool {
        let _ = (sim, cpu, prev);
        false
    }

    /// A new task is set up by fork (task_fork).
    fn task_fork(&self, sim: &mut Sim, p: TaskId) {
        let _ = (sim, p);
    }
}

/// The class of a class id (`p->sched_class`); idle-policy tasks are in fair.
#[inline(always)]
pub fn class_of(id: ClassId) -> Class {
    match id {
        ClassId::Rt => Class::Rt,
        ClassId::Fair | ClassId::Idle => Class::Fair,
        ClassId::Ext => Class::Ext,
    }
}

/// A scheduling class as a value: what `p->sched_class` points to. Its
/// [`SchedClass`] methods match on it and call the class directly rather
/// than through a vtable, so that the hot paths (enqueue, pick, put/set,
/// update_curr) are direct calls the compiler may inline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// rt_sched_class.
    Rt,
    /// fair_sched_class (and idle-policy tasks).
    Fair,
    /// ext_sched_class.
    Ext,
}

/// Calls method `$m` of the class `$c` names.
macro_rules! dispatch {
    ($c:expr, $m:ident($($a:expr),*)) => {
        match $c {
            Class::Rt => rt::RT_CLASS.$m($($a),*),
            Class::Fair => fair::FAIR_CLASS.$m($($a),*),
            Class::Ext => ext::EXT_CLASS.$m($($a),*),
        }
    };
}

impl SchedClass for Class {
    #[inline(always)]
    fn id(&self) -> ClassId {
        dispatch!(self, id())
    }

    #[inline(always)]
    fn enqueue_task(&self, sim: &mut Sim, cpu: Cpu, p: TaskId, flags: u32) {
        dispatch!(self, enqueue_task(sim, cpu, p, flags))
    }

    #[inline(always)]
    fn dequeue_task(&self, sim: &mut Sim, cpu: Cpu, p: TaskId, flags: u32) -> bool {
        dispatch!(self, dequeue_task(sim, cpu, p, flags))
    }

    #[inline(always)]
    fn yield_task(&self, sim: &mut Sim, cpu: Cpu) {
        dispatch!(self, yield_task(sim, cpu))
    }

    #[inline(always)]
    fn yield_to_task(&self, sim: &mut Sim, cpu: Cpu, p: TaskId) -> bool {
        dispatch!(self, yield_to_task(sim, cpu, p))
    }

    #[inline(always)]
    fn wakeup_preempt(&self, sim: &mut Sim, cpu: Cpu, p: TaskId, wake_flags: u32) {
        dispatch!(self, wakeup_preempt(sim, cpu, p, wake_flags))
    }

    #[inline(always)]
    fn pick_task(&self, sim: &mut Sim, cpu: Cpu) -> Option<TaskId> {
        dispatch!(self, pick_task(sim, cpu))
    }

    #[inline(always)]
    fn put_prev_task(&self, sim: &mut Sim, cpu: Cpu, prev: TaskId) {
        dispatch!(self, put_prev_task(sim, cpu, prev))
    }

    #[inline(always)]
    fn set_next_task(&self, sim: &mut Sim, cpu: Cpu, p: TaskId, first: bool) {
        dispatch!(self, set_next_task(sim, cpu, p, first))
    }

    #[inline(always)]
    fn select_task_rq(&self, sim: &mut Sim, p: TaskId, prev_cpu: Cpu, wake_flags: u32) -> Cpu {
        dispatch!(self, select_task_rq(sim, p, prev_cpu, wake_flags))
    }

    #[inline(always)]
    fn task_tick(&self, sim: &mut Sim, cpu: Cpu, p: TaskId) {
        dispatch!(self, task_tick(sim, cpu, p))
    }

    #[inline(always)]
    fn update_curr(&self, sim: &mut Sim, cpu: Cpu) {
        dispatch!(self, update_curr(sim, cpu))
    }

    #[inline(always)]
    fn migrate_task_rq(&self, sim: &mut Sim, p: TaskId, new_cpu: Cpu) {
        dispatch!(self, migrate_task_rq(sim, p, new_cpu))
    }

    #[inline(always)]
    fn task_woken(&self, sim: &mut Sim, cpu: Cpu, p: TaskId) {
        dispatch!(self, task_woken(sim, cpu, p))
    }

    #[inline(always)]
    fn balance(&self, sim: &mut Sim, cpu: Cpu, prev: Option<TaskId>) -> bool {
        dispatch!(self, balance(sim, cpu, prev))
    }

    #[inline(always)]
    fn task_fork(&self, sim: &mut Sim, p: TaskId) {
        dispatch!(self, task_fork(sim, p))
    }
}

/// Starts loading the cache line holding `x` (`prefetcht0`) into the
/// caches; nothing where the target has no SSE. Only timing changes.
#[inline(always)]
pub(crate) fn prefetch<T>(x: &T) {
    #[cfg(target_feature = "sse")]
    safe_arch::prefetch_t0(x);
    #[cfg(not(target_feature = "sse"))]
    let _ = x;
}
