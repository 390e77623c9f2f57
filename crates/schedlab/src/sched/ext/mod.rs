//! The sched_ext class (kernel/sched/ext.c, ext_idle.c): tasks are
//! scheduled by a BPF program through dispatch queues.
//!
//! Layout, as in the kernel:
//! - `ops`: the `sched_ext_ops` trait a scheduler implements;
//! - `class`: the `SchedClass` hooks (enqueue, dequeue, pick, tick, ...);
//! - `enqueue`: getting tasks into DSQs (`do_enqueue_task()`, direct
//!   dispatch, `dispatch_enqueue()`);
//! - `dispatch`: getting them out: `balance_one()`, the dispatch buffer,
//!   consuming DSQs, moving tasks between runqueues, deferred work, kicks;
//! - `idle`: built-in idle tracking and the default CPU selection;
//! - `lifecycle`: enable, disable, bypass, ejection, the watchdog;
//! - `kfuncs`: what a scheduler may call.
//!
//! Loading BPF C schedulers compiled natively against the shim (hosting)
//! is the `schedlab-host` crate, above this one: it implements
//! [`ops::ExtOps`] and calls the kfuncs.
//!
//! State lives where sched.h and ext_internal.h keep it:
//! - per task, [`ScxTask`] (`struct sched_ext_entity`, `p->scx`) is the
//!   field `Task::scx`;
//! - per CPU, [`ScxRq`] (`struct scx_rq`, `rq->scx`) is the field
//!   `Rq::scx`, beside `rq.cfs` and `rq.rt`;
//! - scheduler-wide, [`ScxSched`] (`struct scx_sched`, what `scx_root`
//!   points to: the ops, the DSQs, the idle masks, the exit info, the
//!   counters) is `Sim::scx`. The per-CPU local DSQs stay in its DSQ table
//!   (indexed by CPU, see [`ScxSched::local`]) so that one index names any
//!   DSQ.

pub mod abi;
pub mod check;
mod cgroup;
mod class;
mod dispatch;
pub mod dsq;
mod enqueue;
mod idle;
mod invariants;
mod irq;
pub mod kfuncs;
mod lifecycle;
pub mod ops;
pub mod procs;
mod rqlock;
pub mod userdsq;

use std::collections::BTreeMap;
use std::rc::Rc;

use hdrhistogram::Histogram;

use crate::machine::cpumask::{CpuMask, SummaryMask};
use crate::engine::{Cpu, TaskId};
use crate::engine::time::Ns;

pub use class::EXT_CLASS;
use abi::{CpumaskC, SchedExtEntityC, TaskStructC};
use dsq::{Dsq, DsqIdx, DsqKey};
use ops::{ExitInfo, ExtOps, Op};

/// A CPU stuck in the scheduler with interrupts off this long trips the
/// hard-lockup detector (watchdog_thresh, 10 s).
pub const HARDLOCKUP_NS: Ns = 10_000_000_000;

/// `enum scx_enable_state`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EnableState {
    /// No scheduler is loaded (SCX_DISABLED).
    Disabled,
    /// A scheduler is loaded and owns its tasks (SCX_ENABLED).
    Enabled,
    /// Ejection or unload in progress: bypassing, tasks going back to fair.
    Disabling,
}

/// Who owns a task (`SCX_OPSS_*` of `p->scx.ops_state`): the kernel (None),
/// ops.enqueue running (Queueing), the BPF scheduler (Queued), or a
/// dispatch being committed (Dispatching). `qseq` tells a dispatch of an
/// earlier queueing from the current one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpsState {
    /// SCX_OPSS_NONE: the kernel owns the task.
    None,
    /// SCX_OPSS_QUEUEING: ops.enqueue() is running for it.
    Queueing,
    /// SCX_OPSS_QUEUED: the BPF scheduler holds it.
    Queued {
        /// The queueing's sequence number (`SCX_OPSS_QSEQ_MASK` bits).
        qseq: u64,
    },
    /// SCX_OPSS_DISPATCHING: a dispatch of it is being committed.
    Dispatching,
}

/// A task's C `task_struct` view, allocated when it is first written:
/// a simulation that never runs a sched_ext scheduler never builds one
/// (976 bytes a task; 100,000 tasks carried 93 MiB of them). Reading one
/// that was never written reads a fresh task's values.
#[derive(Clone, Debug)]
pub struct TaskView {
    c: Option<Box<TaskStructC>>,
    id: TaskId,
}

impl TaskView {
    /// Not yet built, for task `id`.
    pub fn new(id: TaskId) -> Self {
        TaskView { c: None, id }
    }

    /// Whether the view has been built.
    pub fn is_built(&self) -> bool {
        self.c.is_some()
    }

    /// The C `task_struct`, if built.
    #[inline]
    pub fn built(&self) -> Option<&TaskStructC> {
        self.c.as_deref()
    }

    /// The C `task_struct` to write, if built (without building it).
    #[inline]
    pub fn built_mut(&mut self) -> Option<&mut TaskStructC> {
        self.c.as_deref_mut()
    }

    /// The C `task_struct` of a task a loaded scheduler handles, which is
    /// built (every task's is from the load on, `Sim::scx_build_views`).
    /// Unlike `Deref` this has no path that calls out to stand in for an
    /// unbuilt view: after such a call everything the caller had looked up
    /// (the task, its runqueue, the DSQ) would have to be looked up and
    /// bounds-checked again. An unbuilt view here is a bug, and panics.
    #[inline]
    pub fn live(&self) -> &TaskStructC {
        match &self.c {
            Some(c) => c,
            None => not_built(self.id),
        }
    }

    /// [`TaskView::live`], to write.
    #[inline]
    pub fn live_mut(&mut self) -> &mut TaskStructC {
        match &mut self.c {
            Some(c) => c,
            None => not_built(self.id),
        }
    }
}

#[cold]
#[inline(never)]
fn not_built(id: TaskId) -> ! {
    panic!("task {id}'s C view is used by the scheduler before it was built")
}

thread_local! {
    /// What an unbuilt view reads as (one per thread, never written).
    static UNBUILT: &'static TaskStructC = Box::leak(TaskStructC::new(0));
}

impl std::ops::Deref for TaskView {
    type Target = TaskStructC;
    /// Inlined (the host reads views too): a built view is one load; the
    /// thread-local for an unbuilt one stays out of line.
    #[inline]
    fn deref(&self) -> &TaskStructC {
        match &self.c {
            Some(c) => c,
            None => unbuilt(),
        }
    }
}

/// What an unbuilt view reads as.
#[cold]
#[inline(never)]
fn unbuilt() -> &'static TaskStructC {
    UNBUILT.with(|u| *u)
}

impl std::ops::DerefMut for TaskView {
    #[inline]
    fn deref_mut(&mut self) -> &mut TaskStructC {
        if self.c.is_none() {
            self.build();
        }
        match &mut self.c {
            Some(c) => c,
            None => unreachable!("a task view is built before it is written"),
        }
    }
}

impl TaskView {
    /// Builds the view on its first write; kept out of line, as every
    /// later write finds it built.
    #[cold]
    #[inline(never)]
    fn build(&mut self) {
        self.c = Some(TaskStructC::new(self.id));
    }
}

/// Per-task sched_ext state (`struct sched_ext_entity`, plus the C view):
/// `Task::scx`, the kernel's `p->scx`. A clone (fork's dup_task_struct)
/// carries the parent's values; `Sim::add_task` gives every new task fresh
/// state, as sched_fork()'s init_scx_entity() does.
#[derive(Clone, Debug)]
pub struct ScxTask {
    /// The C `task_struct` hosted schedulers see; `scx.slice` and
    /// `scx.dsq_vtime` in it are the authoritative values. Built for every
    /// task once a sched_ext scheduler can run (`Sim::scx_views`).
    pub c: TaskView,
    /// Who owns the task (`p->scx.ops_state`).
    pub ops_state: OpsState,
    /// The DSQ the task sits in and its position.
    pub dsq: Option<(DsqIdx, DsqKey)>,
    /// ops.init_task() succeeded / ops.enable() was called.
    pub inited: bool,
    /// ops.enable() was called (SCX_TASK_ENABLED).
    pub enabled: bool,
    /// When the task last became runnable without running since (watchdog).
    pub runnable_at: Option<Ns>,
    /// Direct dispatch verdict from select_cpu/enqueue (ddsp_dsq_id/flags).
    pub ddsp: Option<(u64, u64)>,
    /// When the task was inserted into a local DSQ (residence metric).
    pub local_since: Option<Ns>,
    /// Insert flags that travel with the task in its local DSQ (IMMED).
    pub local_flags: u64,
    /// The CPU select_task_rq_scx() chose at the last wakeup (`p->scx.selected_cpu`).
    pub selected_cpu: Option<Cpu>,
    /// Holds up the disable path's grace period until it runs.
    pub gp_pending: bool,
}

impl ScxTask {
    /// Fresh state for task `id` (init_scx_entity()).
    pub fn new(id: TaskId) -> Self {
        ScxTask {
            c: TaskView::new(id),
            ops_state: OpsState::None,
            dsq: None,
            inited: false,
            enabled: false,
            runnable_at: None,
            ddsp: None,
            local_since: None,
            local_flags: 0,
            selected_cpu: None,
            gp_pending: false,
        }
    }

    /// `p->scx` in the C view of a task a loaded scheduler handles (see
    /// [`TaskView::live`]).
    #[inline]
    pub fn cx(&self) -> &SchedExtEntityC {
        &self.c.live().scx
    }

    /// [`ScxTask::cx`], to write.
    #[inline]
    pub fn cx_mut(&mut self) -> &mut SchedExtEntityC {
        &mut self.c.live_mut().scx
    }

    /// The task's remaining slice, ns (`p->scx.slice`).
    #[inline]
    pub fn slice(&self) -> u64 {
        self.cx().slice
    }

    /// `p->scx.flags & f` (SCX_TASK_*).
    #[inline]
    pub fn has_flag(&self, f: u32) -> bool {
        self.cx().flags & f != 0
    }

    /// Sets or clears SCX_TASK_* flag `f` in `p->scx.flags`.
    #[inline]
    pub fn set_flag(&mut self, f: u32, on: bool) {
        let c = self.cx_mut();
        if on {
            c.flags |= f;
        } else {
            c.flags &= !f;
        }
    }

    /// Takes the direct-dispatch verdict (DSQ id, flags) select_cpu or
    /// enqueue left, if any: the kernel owns the task again while it
    /// carries the verdict out (SCX_OPSS_NONE).
    #[inline]
    pub fn take_verdict(&mut self) -> Option<(u64, u64)> {
        let v = self.ddsp.take()?;
        self.ops_state = OpsState::None;
        Some(v)
    }

    /// SCX_TASK_QUEUED: on a runqueue as far as ext is concerned.
    #[inline]
    pub fn queued(&self) -> bool {
        self.has_flag(ops::task_flags::QUEUED)
    }
}

/// `rq->scx` flags.
pub mod rq_flags {
    /// SCX_RQ_IN_BALANCE: balance_scx() is running on this rq.
    pub const IN_BALANCE: u32 = 1 << 0;
    /// SCX_RQ_BAL_KEEP: balance decided to keep running the previous task.
    pub const BAL_KEEP: u32 = 1 << 1;
    /// SCX_RQ_CPU_RELEASED: a higher class took the CPU; ops.cpu_release() was called.
    pub const CPU_RELEASED: u32 = 1 << 2;
    /// SCX_RQ_IN_WAKEUP: a wakeup is enqueueing on this rq.
    pub const IN_WAKEUP: u32 = 1 << 3;
    /// SCX_RQ_BYPASSING: this rq is in bypass mode.
    pub const BYPASSING: u32 = 1 << 4;
}

/// Per-CPU sched_ext state (`struct scx_rq`): `Rq::scx`, the kernel's
/// `rq->scx`. It starts afresh whenever a scheduler is enabled.
///
/// `repr(C)`, with what every pick, enqueue, dequeue and wakeup of the CPU
/// reads or writes in its first 32 bytes (counts, flags, pnt_seq, the lock
/// clock, and one flag standing for all the deferred work): on machines of
/// thousands of CPUs the runqueues outgrow the caches, and each line an
/// event touches is a miss. Within `Rq` those bytes share a line with the
/// RT runqueue's `rt_nr_running`, which every pick and tick reads (a unit
/// test checks that they stay within one line). The rest is rarely used.
#[derive(Clone, Debug)]
#[repr(C)]
pub struct ScxRq {
    /// Runnable ext tasks on this CPU (`rq->scx.nr_running`).
    pub nr_running: u32,
    /// SCX_RQ_* flags (`rq->scx.flags`), see [`rq_flags`].
    pub flags: u32,
    /// Tasks in the local DSQ that were inserted with SCX_ENQ_IMMED.
    pub nr_immed: u32,
    /// The pick in progress chose the idle task (put_prev_task's `next`).
    pub next_idle: bool,
    /// A deferred irq_work for this rq is in flight.
    pub deferred_work_queued: bool,
    /// The kick irq_work is queued (`rq->scx.kick_cpus_irq_work`).
    pub kick_work_queued: bool,
    /// Deferred work may be waiting: set whenever `ddsp_deferred`,
    /// `reenq_local` or `reenq_users` gets some, recomputed once the
    /// deferred work has run. When it is false all three are empty, so
    /// the test every balance and wakeup makes reads this line only.
    pub(crate) deferred_pending: bool,
    /// Incremented on every pick (pnt_seq), for SCX_KICK_WAIT.
    pub pnt_seq: u64,
    /// The simulated time this CPU's rq lock is free again: its own CPU
    /// holds it across balance, remote CPUs while they pull tasks off this
    /// runqueue or move tasks onto it (ext/rqlock.rs).
    pub lock_held_until: Ns,
    /// A reenqueue of the local DSQ is requested: SCX_REENQ_ANY, or 0 for
    /// the IMMED-only pass; None when nothing is pending.
    pub reenq_local: Option<u64>,
    /// Tasks direct-dispatched to another CPU's local DSQ, waiting for the
    /// deferred move (ddsp_deferred_locals).
    pub ddsp_deferred: Vec<TaskId>,
    /// User DSQs (index into `dsqs`) whose reenqueue this CPU runs, with
    /// their SCX_REENQ_* flags (`deferred_reenq_users`, 7.1).
    pub reenq_users: Vec<(u32, u64)>,
    /// CPUs this CPU must kick from its kick irq_work, with SCX_KICK_* flags.
    pub kicks: Vec<(Cpu, u64)>,
    /// cpumask_any_distribute() cursor of this CPU.
    pub distribute_prev: usize,
    /// Reenqueue passes in the current deferred run (loop guard).
    pub reenq_repeat: u32,
    /// scx_bpf_cpuperf_set() target (recorded; CPU speed is not modelled).
    pub cpuperf: u32,
}

impl ScxRq {
    /// Whether any deferred work waits (what `deferred_pending` stands for).
    pub(crate) fn deferred_any(&self) -> bool {
        !self.ddsp_deferred.is_empty() || self.reenq_local.is_some() || !self.reenq_users.is_empty()
    }
}

impl Default for ScxRq {
    /// An idle CPU with the full performance target (SCX_CPUPERF_ONE).
    fn default() -> Self {
        ScxRq {
            nr_running: 0,
            flags: 0,
            nr_immed: 0,
            next_idle: false,
            deferred_work_queued: false,
            kick_work_queued: false,
            deferred_pending: false,
            pnt_seq: 0,
            lock_held_until: 0,
            reenq_local: None,
            ddsp_deferred: Vec::new(),
            reenq_users: Vec::new(),
            kicks: Vec::new(),
            distribute_prev: 0,
            reenq_repeat: 0,
            cpuperf: 1024,
        }
    }
}

/// One entry of the dispatch buffer (`struct scx_dsp_buf_ent`).
#[derive(Clone, Copy, Debug)]
pub struct DspEntry {
    /// The task inserted.
    pub task: TaskId,
    /// Its qseq when ops.dispatch() inserted it, to detect a dequeue in between.
    pub qseq: u64,
    /// The target DSQ id.
    pub dsq_id: u64,
    /// SCX_ENQ_* flags of the insert.
    pub enq_flags: u64,
}

/// What the scheduler is in the middle of: one frame per nested op call.
#[derive(Clone, Copy, Debug)]
pub struct OpFrame {
    /// The op being called.
    pub op: Op,
    /// The CPU it runs on.
    pub cpu: Cpu,
    /// The task select_cpu/enqueue is deciding for (direct dispatch target).
    pub task: Option<TaskId>,
}

/// Counters reported with the results.
#[derive(Clone, Debug)]
pub struct ScxStats {
    /// Calls per op, indexed by `Op::index()`.
    pub op_calls: [u64; Op::ALL.len()],
    /// kfunc calls made by the scheduler.
    pub kfunc_calls: u64,
    /// Tasks dispatched to a DSQ from ops.dispatch().
    pub dispatched: u64,
    /// Direct dispatches from ops.select_cpu() / ops.enqueue().
    pub direct_dispatches: u64,
    /// Dispatches dropped because the task was dequeued in between (qseq mismatch).
    pub stale_dispatches: u64,
    /// Tasks moved from a DSQ to the local DSQ of the CPU that consumed them.
    pub consumed_local: u64,
    /// Tasks moved from a DSQ to another CPU's local DSQ.
    pub consumed_remote: u64,
    /// DSQ entries walked by consume and DSQ iterators.
    pub dsq_scanned: u64,
    /// Tasks reenqueued (scx_bpf_reenqueue_local(), IMMED, bypass).
    pub reenqueued: u64,
    /// scx_bpf_kick_cpu() kicks carried out.
    pub kicks: u64,
    /// Balances that kept the previous task running (SCX_RQ_BAL_KEEP).
    pub keep_prev: u64,
    /// Slices refilled to SCX_SLICE_DFL because a task ran with none set.
    pub dfl_slice_refills: u64,
    /// Deferred irq_works run (remote reenqueues, deferred local dispatches).
    pub deferred_irq_works: u64,
    /// ... of which for another CPU's runqueue (where 7.1's change matters).
    pub deferred_remote: u64,
    /// Tasks the bypass load balancer moved between CPUs.
    pub bypass_lb_moved: u64,
    /// Hard lockups detected (a CPU stuck in the scheduler past HARDLOCKUP_NS).
    pub hardlockups: u64,
    /// CPU time charged to the scheduler's callbacks and kfuncs, ns.
    pub overhead_ns: Ns,
    /// Time spent waiting for DSQ locks, ns.
    pub dsq_lock_wait_ns: Ns,
    /// Time spent waiting for runqueue locks (remote pulls and moves, a
    /// CPU's own schedule() behind them, the disable's class switches), ns.
    pub rq_lock_wait_ns: Ns,
    /// Local DSQ residence (insert to removal), experiment 000's metric,
    /// but for the residences of 1 ns (see `local_residence_instant`);
    /// built at the first record (a histogram is 270 KB to zero, and most
    /// worlds never enable a scheduler). The whole metric is
    /// [`ScxStats::local_residence_all`].
    pub(crate) local_residence: Option<Histogram<u64>>,
    /// Local DSQ residences of 1 ns: tasks a balance inserts and the pick
    /// takes in the same instant, most of them. Counted here and added to
    /// the histogram once, when results are read: recording each costs
    /// some 60 instructions.
    pub(crate) local_residence_instant: u64,
    /// Longest time any ext task waited runnable while disabling.
    pub max_wait_while_disabling_ns: Ns,
    /// When the scheduler became enabled, ns.
    pub enabled_at: Option<Ns>,
    /// When the disable path (ejection or unload) began, ns.
    pub disable_started_at: Option<Ns>,
    /// When the disable path's grace period completed.
    pub disable_gp_done_at: Option<Ns>,
    /// When the disable path finished, ns.
    pub disable_done_at: Option<Ns>,
}

impl ScxStats {
    /// Local DSQ residence, every sample (the histogram with the instant
    /// ones added), if any task left a local DSQ.
    pub fn local_residence_all(&self) -> Option<Histogram<u64>> {
        let n = self.local_residence_instant;
        if n == 0 {
            return self.local_residence.clone();
        }
        let mut h = self.local_residence.clone().unwrap_or_else(crate::sched::metrics::duration_histogram);
        h.saturating_record_n(1, n);
        Some(h)
    }
}

impl Default for ScxStats {
    fn default() -> Self {
        ScxStats {
            op_calls: [0; Op::ALL.len()],
            kfunc_calls: 0,
            dispatched: 0,
            direct_dispatches: 0,
            stale_dispatches: 0,
            consumed_local: 0,
            consumed_remote: 0,
            dsq_scanned: 0,
            reenqueued: 0,
            kicks: 0,
            keep_prev: 0,
            dfl_slice_refills: 0,
            deferred_irq_works: 0,
            deferred_remote: 0,
            bypass_lb_moved: 0,
            hardlockups: 0,
            overhead_ns: 0,
            dsq_lock_wait_ns: 0,
            rq_lock_wait_ns: 0,
            local_residence: None,
            local_residence_instant: 0,
            max_wait_while_disabling_ns: 0,
            enabled_at: None,
            disable_started_at: None,
            disable_gp_done_at: None,
            disable_done_at: None,
        }
    }
}

/// The built-in idle masks (`scx_idle_masks`), global and per node.
#[derive(Clone, Debug)]
pub struct IdleMasks {
    /// Idle CPUs (with a summary of its non-empty words: a search on a
    /// busy large machine skips the words without idle CPUs).
    pub cpu: SummaryMask,
    /// CPUs whose whole core is idle.
    pub smt: SummaryMask,
    /// C copies handed to schedulers by scx_bpf_get_idle_*mask().
    pub cpu_c: CpumaskC,
    /// The C copy of `smt`.
    pub smt_c: CpumaskC,
}

/// The scheduler-wide sched_ext state (`struct scx_sched`, the instance
/// `scx_root` points to), kept in `Sim::scx`. The per-CPU part is
/// [`ScxRq`] in each runqueue, the per-task part [`ScxTask`] in each task.
pub struct ScxSched {
    /// The loaded scheduler's callbacks.
    pub ops: Option<Rc<dyn ExtOps>>,
    has: [bool; Op::ALL.len()],
    /// The scheduler has a `sched_switch` tracepoint program.
    pub(crate) traces_switch: bool,
    /// `ops.flags` (SCX_OPS_*).
    pub ops_flags: u64,
    /// `ops.name`.
    pub name: String,
    /// The published crate (name, version) the scheduler was built from.
    pub origin: Option<(String, String)>,
    /// `scx_enable_state`.
    pub state: EnableState,
    /// Without SCX_OPS_SWITCH_PARTIAL every fair-policy task is in ext.
    pub switch_all: bool,
    /// Bypass mode is on (`scx_bypass()`): tasks are scheduled FIFO without the BPF scheduler.
    pub bypassing: bool,
    /// Built-in idle tracking is on (no ops.update_idle, or KEEP_BUILTIN_IDLE).
    pub builtin_idle: bool,
    /// The watchdog timeout (`ops.timeout_ms`), ns.
    pub timeout_ns: Ns,
    /// The most inserts one ops.dispatch() may make (`ops.dispatch_max_batch`).
    pub dsp_max_batch: u32,
    /// CPUs of the machine (the DSQ table's layout depends on it).
    pub nr_cpus: u32,
    /// Every DSQ: local DSQs, then global and bypass ones, then user DSQs ([`DsqIdx`] indexes it).
    pub dsqs: Vec<Dsq>,
    /// User DSQs by id (scx_bpf_create_dsq()).
    pub user_dsqs: userdsq::UserDsqs,
    /// The global idle masks.
    pub idle: IdleMasks,
    /// Per-node idle masks (SCX_OPS_BUILTIN_IDLE_PER_NODE).
    pub idle_node: Vec<IdleMasks>,
    /// The C cpumask of possible CPUs (scx_bpf_get_possible_cpumask()).
    pub possible_c: CpumaskC,
    /// The op calls in progress, innermost last.
    /// The innermost op call in progress; the outer ones are saved on
    /// the stack of the [`Sim::scx_call`]s that entered them.
    pub frame: Option<OpFrame>,
    /// The ops in progress, one bit per `Op::index()`: what a kfunc's
    /// "called from" check tests without walking the calls.
    pub(crate) frame_ops: u64,
    /// The dispatch buffer of the ops.dispatch() in progress.
    pub dsp_buf: Vec<DspEntry>,
    /// Inserts made by the current ops.dispatch() call (dspc->nr_tasks).
    pub dsp_nr_tasks: u32,
    /// The next queueing sequence number.
    pub next_qseq: u64,
    /// How the scheduler exited, once it has (`struct scx_exit_info`).
    pub exit: Option<ExitInfo>,
    /// The debug dump taken at an error exit (ops.dump output included).
    pub dump: String,
    /// The scheduler's own counters when it was unloaded (its .bss/.data
    /// stay readable to user space after the exit).
    pub counters_at_exit: Vec<(String, u64)>,
    /// Armed scheduler timers: generation and the CPU they fire on.
    pub timers: BTreeMap<u64, (u32, Cpu)>,
    /// Counters reported with the results.
    pub stats: ScxStats,
    /// Scheduler overhead accumulated by the operation in progress, charged
    /// to `cost_cpu` when it ends.
    pub cost_acc: Ns,
    /// The latest clock value BPF has read (scx_bpf_now(),
    /// bpf_ktime_get_ns()): the clock never goes back.
    pub clock_max: Ns,
    /// NUMA nodes of the machine.
    pub nr_nodes: u32,
    /// The watchdog timer is armed.
    pub watchdog_armed: bool,
    /// Tasks not yet switched back to fair while disabling.
    pub disable_queue: Vec<TaskId>,
    /// The bypass load balancer's timer is armed.
    pub bypass_lb_armed: bool,
    /// The machine has SMT (sched_smt_active()).
    pub smt_active: bool,
    /// The default CPU selection searches prev's LLC before the rest
    /// (the `scx_selcpu_topo_llc` static key): only when an LLC does not
    /// span every CPU.
    pub selcpu_topo_llc: bool,
    /// ... and prev's node (`scx_selcpu_topo_numa`): only with several
    /// nodes whose spans differ from the LLCs', and without per-node idle
    /// tracking.
    pub selcpu_topo_numa: bool,
    /// CPUs of each LLC and of each node.
    pub llc_masks: Vec<std::sync::Arc<CpuMask>>,
    /// CPUs of each node.
    pub node_masks: Vec<std::sync::Arc<CpuMask>>,
    /// Why a scheduler scheduled to attach mid-run was refused.
    pub load_error: Option<String>,
    /// Tasks the disable path's grace period still waits for.
    pub gp_left: u32,
    /// sched_ext.bypass_lb_intv_us: the bypass load balancer's period (0 = off).
    pub bypass_lb_intv_ns: Ns,
    /// irq_works raised on the current CPU during this event (kicks,
    /// deferred work before 7.1); they fire when it enables interrupts.
    pub local_irq_work: Vec<crate::engine::Event>,
    /// Kicks queued on any CPU (the sum of every `ScxRq::kicks`' length):
    /// the end of every event looks for its CPU's own kicks only when
    /// this is not 0, instead of reading that CPU's kick list, a cache
    /// miss per event on thousands of CPUs.
    pub kicks_queued: u32,
    /// bpf_get_prandom_u32()'s stream.
    pub rng: crate::engine::rng::Rng,
    /// scx_cgroup_enabled: cgroup ops reach the scheduler.
    pub cgroup_enabled: bool,
    /// SCX_TG_INITED per task group: ops.cgroup_init() succeeded on it.
    pub cgroup_inited: Vec<bool>,
    /// p->scx.cgrp_moving_from of the tasks in a migration.
    pub cgrp_moving_from: BTreeMap<TaskId, u32>,
    /// Per CPU, the DSQ it last consumed a task from (`u32::MAX`: none
    /// yet). Only a hint for the event loop, which prefetches that DSQ's
    /// head task before the CPU's next step ends: on thousands of CPUs
    /// the task a CPU pulls off a shared DSQ sits on a remote runqueue,
    /// and its lines are not in any cache. A dense array, so that reading
    /// it does not itself miss on the runqueue.
    pub(crate) consumed_from: Vec<DsqIdx>,
}

impl ScxSched {
    /// The idle masks of `node` with per-node idle tracking, the global
    /// ones for `None` (what scx_cpu_node_if_enabled() selects).
    pub(crate) fn idle_masks(&self, node: Option<usize>) -> &IdleMasks {
        match node {
            Some(n) => &self.idle_node[n],
            None => &self.idle,
        }
    }

    /// [`idle_masks`](Self::idle_masks), to change.
    pub(crate) fn idle_masks_mut(&mut self, node: Option<usize>) -> &mut IdleMasks {
        match node {
            Some(n) => &mut self.idle_node[n],
            None => &mut self.idle,
        }
    }

    /// The state before any scheduler is loaded.
    pub fn new(nr_cpus: usize, nr_nodes: usize) -> Self {
        let empty = IdleMasks {
            cpu: SummaryMask::new(nr_cpus),
            smt: SummaryMask::new(nr_cpus),
            cpu_c: CpumaskC::default(),
            smt_c: CpumaskC::default(),
        };
        ScxSched {
            traces_switch: false,
            ops: None,
            has: [false; Op::ALL.len()],
            ops_flags: 0,
            name: String::new(),
            origin: None,
            state: EnableState::Disabled,
            switch_all: false,
            bypassing: false,
            builtin_idle: true,
            timeout_ns: ops::WATCHDOG_MAX_TIMEOUT_MS as Ns * 1_000_000,
            dsp_max_batch: ops::DSP_MAX_BATCH_DFL,
            nr_cpus: nr_cpus as u32,
            dsqs: Vec::new(),
            user_dsqs: userdsq::UserDsqs::default(),
            idle: empty.clone(),
            idle_node: vec![empty; nr_nodes],
            possible_c: CpumaskC::from_mask(&CpuMask::full(nr_cpus)),
            frame: None,
            frame_ops: 0,
            dsp_buf: Vec::new(),
            dsp_nr_tasks: 0,
            next_qseq: 0,
            exit: None,
            dump: String::new(),
            counters_at_exit: Vec::new(),
            timers: BTreeMap::new(),
            stats: ScxStats::default(),
            cost_acc: 0,
            clock_max: 0,
            nr_nodes: nr_nodes as u32,
            watchdog_armed: false,
            disable_queue: Vec::new(),
            bypass_lb_armed: false,
            gp_left: 0,
            load_error: None,
            smt_active: false,
            selcpu_topo_llc: false,
            selcpu_topo_numa: false,
            llc_masks: Vec::new(),
            node_masks: Vec::new(),
            bypass_lb_intv_ns: 500_000_000,
            local_irq_work: Vec::new(),
            kicks_queued: 0,
            rng: crate::engine::rng::Rng::new(0, crate::engine::rng::Stream::Scheduler),
            cgroup_enabled: false,
            cgroup_inited: Vec::new(),
            cgrp_moving_from: BTreeMap::new(),
            consumed_from: vec![DsqIdx::MAX; nr_cpus],
        }
    }

    /// The task at the head of the DSQ `cpu` last consumed from: the
    /// likeliest task for its next consume (a prefetch hint, see
    /// `consumed_from`).
    #[inline]
    pub(crate) fn consume_hint(&self, cpu: Cpu) -> Option<TaskId> {
        let &d = self.consumed_from.get(cpu as usize)?;
        Some(self.dsqs.get(d as usize)?.first()?.1)
    }

    /// Whether the scheduler defines `op` (SCX_HAS_OP).
    #[inline]
    pub fn has(&self, op: Op) -> bool {
        self.has[op.index()]
    }

    /// A scheduler is loaded (enabled or being disabled).
    #[inline]
    pub fn enabled(&self) -> bool {
        self.state != EnableState::Disabled
    }

    /// The local DSQ index of `cpu`: local DSQs come first.
    #[inline]
    pub fn local(&self, cpu: Cpu) -> DsqIdx {
        cpu
    }

    /// The global DSQ index of node `node` (SCX_DSQ_GLOBAL is per node).
    pub fn global(&self, node: u32) -> DsqIdx {
        self.nr_cpus + node
    }

    /// The bypass DSQ index of `cpu`.
    pub fn bypass_dsq(&self, cpu: Cpu) -> DsqIdx {
        self.nr_cpus + self.nr_nodes + cpu
    }

    /// The op being executed, if any.
    pub fn current_frame(&self) -> Option<&OpFrame> {
        self.frame.as_ref()
    }
}

#[cfg(test)]
mod layout_tests {
    use std::mem::{offset_of, size_of};

    use super::ScxRq;
    use crate::sched::rq::Rq;

    /// The fields every event of a CPU touches (all before `reenq_local`)
    /// lie within one cache line of its runqueue. If `Rq`'s layout moves
    /// `scx`, move the hot fields (or `scx`) so that this holds again.
    #[test]
    fn hot_fields_share_one_line() {
        let start = offset_of!(Rq, scx);
        let end = start + offset_of!(ScxRq, reenq_local);
        assert_eq!(offset_of!(ScxRq, reenq_local), 32);
        assert_eq!(start / 64, (end - 1) / 64, "ScxRq's hot fields span bytes {start}..{end} of Rq");
        assert!(size_of::<ScxRq>() <= 136, "ScxRq grew to {} bytes", size_of::<ScxRq>());
    }
}
