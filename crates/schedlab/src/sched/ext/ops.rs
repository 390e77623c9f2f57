//! `struct sched_ext_ops` as a trait, the flags a scheduler can pass, and
//! the exit information the kernel hands back (include/linux/sched/ext.h,
//! kernel/sched/ext_internal.h).
//!
//! A scheduler is anything implementing [`ExtOps`]: a BPF C scheduler loaded
//! by `ext::host`, or a Rust one in tests. Each method is one callback; the
//! class calls it exactly where ext.c calls the op, and only if
//! [`ExtOps::has`] says the scheduler defines it (the kernel skips NULL ops
//! and falls back to its default behaviour).

use crate::engine::{Cpu, TaskId};
use crate::sched::sim::Sim;

/// The callbacks of `struct sched_ext_ops`, for [`ExtOps::has`] and for
/// per-op accounting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Op {
    SelectCpu,
    Enqueue,
    Dequeue,
    Dispatch,
    Tick,
    Runnable,
    Running,
    Stopping,
    Quiescent,
    Yield,
    CoreSchedBefore,
    SetWeight,
    SetCpumask,
    UpdateIdle,
    CpuAcquire,
    CpuRelease,
    InitTask,
    ExitTask,
    Enable,
    Disable,
    Dump,
    DumpCpu,
    DumpTask,
    CgroupInit,
    CgroupExit,
    CgroupPrepMove,
    CgroupMove,
    CgroupCancelMove,
    CgroupSetWeight,
    CgroupSetBandwidth,
    CgroupSetIdle,
    CpuOnline,
    CpuOffline,
    Init,
    Exit,
}

impl Op {
    pub const ALL: [Op; 35] = [
        Op::SelectCpu,
        Op::Enqueue,
        Op::Dequeue,
        Op::Dispatch,
        Op::Tick,
        Op::Runnable,
        Op::Running,
        Op::Stopping,
        Op::Quiescent,
        Op::Yield,
        Op::CoreSchedBefore,
        Op::SetWeight,
        Op::SetCpumask,
        Op::UpdateIdle,
        Op::CpuAcquire,
        Op::CpuRelease,
        Op::InitTask,
        Op::ExitTask,
        Op::Enable,
        Op::Disable,
        Op::Dump,
        Op::DumpCpu,
        Op::DumpTask,
        Op::CgroupInit,
        Op::CgroupExit,
        Op::CgroupPrepMove,
        Op::CgroupMove,
        Op::CgroupCancelMove,
        Op::CgroupSetWeight,
        Op::CgroupSetBandwidth,
        Op::CgroupSetIdle,
        Op::CpuOnline,
        Op::CpuOffline,
        Op::Init,
        Op::Exit,
    ];

    /// The member name in `struct sched_ext_ops`.
    pub fn name(self) -> &'static str {
        match self {
            Op::SelectCpu => "select_cpu",
            Op::Enqueue => "enqueue",
            Op::Dequeue => "dequeue",
            Op::Dispatch => "dispatch",
            Op::Tick => "tick",
            Op::Runnable => "runnable",
            Op::Running => "running",
            Op::Stopping => "stopping",
            Op::Quiescent => "quiescent",
            Op::Yield => "yield",
            Op::CoreSchedBefore => "core_sched_before",
            Op::SetWeight => "set_weight",
            Op::SetCpumask => "set_cpumask",
            Op::UpdateIdle => "update_idle",
            Op::CpuAcquire => "cpu_acquire",
            Op::CpuRelease => "cpu_release",
            Op::InitTask => "init_task",
            Op::ExitTask => "exit_task",
            Op::Enable => "enable",
            Op::Disable => "disable",
            Op::Dump => "dump",
            Op::DumpCpu => "dump_cpu",
            Op::DumpTask => "dump_task",
            Op::CgroupInit => "cgroup_init",
            Op::CgroupExit => "cgroup_exit",
            Op::CgroupPrepMove => "cgroup_prep_move",
            Op::CgroupMove => "cgroup_move",
            Op::CgroupCancelMove => "cgroup_cancel_move",
            Op::CgroupSetWeight => "cgroup_set_weight",
            Op::CgroupSetBandwidth => "cgroup_set_bandwidth",
            Op::CgroupSetIdle => "cgroup_set_idle",
            Op::CpuOnline => "cpu_online",
            Op::CpuOffline => "cpu_offline",
            Op::Init => "init",
            Op::Exit => "exit",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// `enum scx_ops_flags`.
pub mod ops_flags {
    pub const KEEP_BUILTIN_IDLE: u64 = 1 << 0;
    pub const ENQ_LAST: u64 = 1 << 1;
    pub const ENQ_EXITING: u64 = 1 << 2;
    pub const SWITCH_PARTIAL: u64 = 1 << 3;
    pub const ENQ_MIGRATION_DISABLED: u64 = 1 << 4;
    pub const ALLOW_QUEUED_WAKEUP: u64 = 1 << 5;
    pub const BUILTIN_IDLE_PER_NODE: u64 = 1 << 6;
    pub const ALWAYS_ENQ_IMMED: u64 = 1 << 7;
    /// Every flag this implementation knows; anything else refuses the load.
    pub const ALL: u64 = (1 << 8) - 1;

    pub const NAMES: [(&str, u64); 8] = [
        ("KEEP_BUILTIN_IDLE", KEEP_BUILTIN_IDLE),
        ("ENQ_LAST", ENQ_LAST),
        ("ENQ_EXITING", ENQ_EXITING),
        ("SWITCH_PARTIAL", SWITCH_PARTIAL),
        ("ENQ_MIGRATION_DISABLED", ENQ_MIGRATION_DISABLED),
        ("ALLOW_QUEUED_WAKEUP", ALLOW_QUEUED_WAKEUP),
        ("BUILTIN_IDLE_PER_NODE", BUILTIN_IDLE_PER_NODE),
        ("ALWAYS_ENQ_IMMED", ALWAYS_ENQ_IMMED),
    ];
}

/// `enum scx_enq_flags` (7.x values: the low 32 bits are the core's
/// ENQUEUE_* flags, which moved in 6.19; 6.12 had HEAD at 0x10).
pub mod enq_flags {
    pub const WAKEUP: u64 = 0x0001;
    pub const HEAD: u64 = 0x0001_0000;
    pub const CPU_SELECTED: u64 = 0x0010_0000;
    /// Insert at the head and take the CPU from the running ext task.
    pub const PREEMPT: u64 = 1 << 32;
    /// Run on the target CPU at once or go back to ops.enqueue (7.1).
    pub const IMMED: u64 = 1 << 33;
    pub const REENQ: u64 = 1 << 40;
    pub const LAST: u64 = 1 << 41;
    /// Bits only the kernel may set; a scheduler passing them is an error.
    pub const INTERNAL_MASK: u64 = 0xff << 56;
    pub const CLEAR_OPSS: u64 = 1 << 56;
    /// Insert into the vtime-ordered list of a DSQ.
    pub const DSQ_PRIQ: u64 = 1 << 57;
    pub const NESTED: u64 = 1 << 58;
    pub const GDSQ_FALLBACK: u64 = 1 << 59;
}

/// `enum scx_deq_flags`.
pub mod deq_flags {
    pub const SLEEP: u64 = 0x01;
    pub const CORE_SCHED_EXEC: u64 = 1 << 32;
    /// A dequeue for a property change (neither sleep nor core-sched; 7.x).
    pub const SCHED_CHANGE: u64 = 1 << 33;
}

/// Why a task comes back to ops.enqueue() with SCX_ENQ_REENQ
/// (`p->scx.flags` bits 12-13, 7.1).
pub mod reenq_reason {
    pub const SHIFT: u32 = 12;
    pub const KFUNC: u32 = 1 << 12;
    pub const IMMED: u32 = 2 << 12;
    pub const PREEMPTED: u32 = 3 << 12;
    pub const MASK: u32 = 3 << 12;
}

/// `p->scx.flags` bits the shim exposes.
pub mod task_flags {
    pub const QUEUED: u32 = 1 << 0;
    pub const IN_CUSTODY: u32 = 1 << 1;
    pub const RESET_RUNNABLE_AT: u32 = 1 << 2;
    pub const DEQD_FOR_SLEEP: u32 = 1 << 3;
    pub const IMMED: u32 = 1 << 5;
}

/// `enum scx_kick_flags`.
pub mod kick_flags {
    pub const IDLE: u64 = 1 << 0;
    pub const PREEMPT: u64 = 1 << 1;
    pub const WAIT: u64 = 1 << 2;
}

/// `enum scx_pick_idle_cpu_flags`.
pub mod pick_idle_flags {
    pub const CORE: u64 = 1 << 0;
    pub const IN_NODE: u64 = 1 << 1;
}

/// Built-in DSQ ids (`enum scx_dsq_id_flags`).
pub mod dsq_id {
    pub const BUILTIN: u64 = 1 << 63;
    pub const LOCAL_ON: u64 = 1 << 62;
    pub const INVALID: u64 = BUILTIN;
    pub const GLOBAL: u64 = BUILTIN | 1;
    pub const LOCAL: u64 = BUILTIN | 2;
    pub const BYPASS: u64 = BUILTIN | 3;
    pub const LOCAL_CPU_MASK: u64 = 0xffff_ffff;
}

/// SCX_REENQ_ANY for scx_bpf_dsq_reenq().
pub const REENQ_ANY: u64 = 1;
/// A local DSQ reenqueued more often than this in one pass is an error.
pub const REENQ_LOCAL_MAX_REPEAT: u32 = 256;

/// SCX_SLICE_DFL (20 ms) and SCX_SLICE_INF.
pub const SLICE_DFL_NS: u64 = 20_000_000;
pub const SLICE_INF: u64 = u64::MAX;
/// The slice tasks get while the scheduler is bypassed (6.19+, 5 ms).
pub const SLICE_BYPASS_NS: u64 = 5_000_000;
/// Default and maximum ops.timeout_ms.
pub const WATCHDOG_MAX_TIMEOUT_MS: u32 = 30_000;
/// Default ops.dispatch_max_batch.
pub const DSP_MAX_BATCH_DFL: u32 = 32;
/// ops.dispatch() is called at most this many times per balance.
pub const DSP_MAX_LOOPS: u32 = 32;

/// `enum scx_exit_kind`, with the kernel's codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ExitKind {
    None = 0,
    Done = 1,
    Unreg = 64,
    UnregBpf = 65,
    UnregKern = 66,
    #[serde(rename = "SYSRQ")]
    SysRq = 67,
    Error = 1024,
    ErrorBpf = 1025,
    ErrorStall = 1026,
}

impl ExitKind {
    /// The reason string ext.c reports for this kind (scx_exit_reason()).
    pub fn reason(self) -> &'static str {
        match self {
            ExitKind::Unreg => "unregistered from user space",
            ExitKind::UnregBpf => "unregistered from BPF",
            ExitKind::UnregKern => "unregistered from the main kernel",
            ExitKind::SysRq => "disabled by sysrq-S",
            ExitKind::Error => "runtime error",
            ExitKind::ErrorBpf => "scx_bpf_error",
            ExitKind::ErrorStall => "runnable task stall",
            ExitKind::None | ExitKind::Done => "<UNKNOWN>",
        }
    }

    pub fn is_error(self) -> bool {
        self as u32 >= ExitKind::Error as u32
    }

    pub const ALL: [ExitKind; 9] = [
        ExitKind::None,
        ExitKind::Done,
        ExitKind::Unreg,
        ExitKind::UnregBpf,
        ExitKind::UnregKern,
        ExitKind::SysRq,
        ExitKind::Error,
        ExitKind::ErrorBpf,
        ExitKind::ErrorStall,
    ];

    /// The kind with the kernel's code `code` (what a UEI records).
    pub fn from_code(code: i64) -> Option<ExitKind> {
        ExitKind::ALL.into_iter().find(|k| *k as i64 == code)
    }

    /// The kernel's name without the prefix: "UNREG", "ERROR_BPF", ...
    pub fn name(self) -> &'static str {
        match self {
            ExitKind::None => "NONE",
            ExitKind::Done => "DONE",
            ExitKind::Unreg => "UNREG",
            ExitKind::UnregBpf => "UNREG_BPF",
            ExitKind::UnregKern => "UNREG_KERN",
            ExitKind::SysRq => "SYSRQ",
            ExitKind::Error => "ERROR",
            ExitKind::ErrorBpf => "ERROR_BPF",
            ExitKind::ErrorStall => "ERROR_STALL",
        }
    }
}

/// `struct scx_exit_info`: what ops.exit() receives and what a run reports.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ExitInfo {
    pub kind: ExitKind,
    pub exit_code: i64,
    pub reason: String,
    pub msg: String,
    /// Simulated time of the exit request.
    pub at_ns: u64,
}

/// `struct scx_cpu_acquire_args` / `scx_cpu_release_args`: why the CPU
/// changes hands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpuReleaseReason {
    /// A higher class (RT) task takes the CPU.
    Rt,
    /// The CPU picked a task of a higher class.
    Other,
}

/// `struct scx_cgroup_init_args`: a cgroup's knobs when ops.cgroup_init()
/// sees it (cpu.weight, cpu.max in microseconds with u64::MAX for "max",
/// cpu.max.burst, cpu.idle).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CgroupInitArgs {
    pub weight: u32,
    pub bw_period_us: u64,
    pub bw_quota_us: u64,
    pub bw_burst_us: u64,
    pub idle: bool,
}

/// A sched_ext scheduler: one method per `sched_ext_ops` member.
///
/// Methods receive the simulator so that they can call kfuncs
/// (`ext::kfuncs`). They take `&self` because callbacks nest as in the
/// kernel (a kfunc such as `scx_bpf_reenqueue_local` calls `ops.enqueue`
/// from inside another op); a scheduler with state uses interior mutability.
/// Default bodies do what the kernel does when the op is NULL, but the class
/// consults [`ExtOps::has`] first and does not call undefined ops at all.
pub trait ExtOps {
    /// `ops.name`.
    fn name(&self) -> &str;
    /// `ops.flags` (SCX_OPS_*).
    fn flags(&self) -> u64 {
        0
    }
    /// `ops.timeout_ms`; 0 means the default.
    fn timeout_ms(&self) -> u32 {
        0
    }
    /// `ops.dispatch_max_batch`; 0 means the default.
    fn dispatch_max_batch(&self) -> u32 {
        0
    }
    /// Whether the scheduler defines `op`.
    fn has(&self, op: Op) -> bool;
    /// The scheduler's own counters (a hosted BPF scheduler's 8-byte
    /// integer globals), as its user space would read them.
    fn counters(&self) -> Vec<(String, u64)> {
        Vec::new()
    }

    /// Pick a CPU for a waking task; may insert it directly (ops.select_cpu).
    fn select_cpu(&self, sim: &mut Sim, p: TaskId, prev_cpu: Cpu, wake_flags: u64) -> Cpu {
        let _ = (sim, p, wake_flags);
        prev_cpu
    }
    /// A task became runnable or was re-queued; insert it somewhere (ops.enqueue).
    fn enqueue(&self, sim: &mut Sim, p: TaskId, enq_flags: u64) {
        let _ = (sim, p, enq_flags);
    }
    /// A task the BPF scheduler owns leaves (ops.dequeue).
    fn dequeue(&self, sim: &mut Sim, p: TaskId, deq_flags: u64) {
        let _ = (sim, p, deq_flags);
    }
    /// The local DSQ of `cpu` is empty: fill it (ops.dispatch).
    fn dispatch(&self, sim: &mut Sim, cpu: Cpu, prev: Option<TaskId>) {
        let _ = (sim, cpu, prev);
    }
    fn tick(&self, sim: &mut Sim, p: TaskId) {
        let _ = (sim, p);
    }
    fn runnable(&self, sim: &mut Sim, p: TaskId, enq_flags: u64) {
        let _ = (sim, p, enq_flags);
    }
    fn running(&self, sim: &mut Sim, p: TaskId) {
        let _ = (sim, p);
    }
    fn stopping(&self, sim: &mut Sim, p: TaskId, runnable: bool) {
        let _ = (sim, p, runnable);
    }
    fn quiescent(&self, sim: &mut Sim, p: TaskId, deq_flags: u64) {
        let _ = (sim, p, deq_flags);
    }
    /// sched_yield() or yield_to(); returns whether `from` yields to `to`.
    fn yield_(&self, sim: &mut Sim, from: TaskId, to: Option<TaskId>) -> bool {
        let _ = (sim, from, to);
        false
    }
    fn set_weight(&self, sim: &mut Sim, p: TaskId, weight: u32) {
        let _ = (sim, p, weight);
    }
    /// The affinity changed; the new mask is in the task's `cpus_mask`.
    fn set_cpumask(&self, sim: &mut Sim, p: TaskId) {
        let _ = (sim, p);
    }
    fn update_idle(&self, sim: &mut Sim, cpu: Cpu, idle: bool) {
        let _ = (sim, cpu, idle);
    }
    fn cpu_acquire(&self, sim: &mut Sim, cpu: Cpu) {
        let _ = (sim, cpu);
    }
    fn cpu_release(&self, sim: &mut Sim, cpu: Cpu, reason: CpuReleaseReason, task: Option<TaskId>) {
        let _ = (sim, cpu, reason, task);
    }
    /// A task enters ext (fork or switch-in); nonzero refuses it (ops.init_task).
    fn init_task(&self, sim: &mut Sim, p: TaskId, fork: bool) -> i32 {
        let _ = (sim, p, fork);
        0
    }
    fn exit_task(&self, sim: &mut Sim, p: TaskId, cancelled: bool) {
        let _ = (sim, p, cancelled);
    }
    fn enable(&self, sim: &mut Sim, p: TaskId) {
        let _ = (sim, p);
    }
    fn disable(&self, sim: &mut Sim, p: TaskId) {
        let _ = (sim, p);
    }
    /// Debug dumps on an error exit: append text to the dump.
    fn dump(&self, sim: &mut Sim) {
        let _ = sim;
    }
    fn dump_cpu(&self, sim: &mut Sim, cpu: Cpu, idle: bool) {
        let _ = (sim, cpu, idle);
    }
    fn dump_task(&self, sim: &mut Sim, p: TaskId) {
        let _ = (sim, p);
    }
    /// A cgroup becomes known (scx_cgroup_init at enable, pre-order);
    /// `cgrp` is its task group index. Nonzero fails the enable.
    fn cgroup_init(&self, sim: &mut Sim, cgrp: u32, args: &CgroupInitArgs) -> i32 {
        let _ = (sim, cgrp, args);
        0
    }
    fn cgroup_exit(&self, sim: &mut Sim, cgrp: u32) {
        let _ = (sim, cgrp);
    }
    /// A task is about to move (scx_cgroup_can_attach); nonzero refuses.
    fn cgroup_prep_move(&self, sim: &mut Sim, p: TaskId, from: u32, to: u32) -> i32 {
        let _ = (sim, p, from, to);
        0
    }
    fn cgroup_move(&self, sim: &mut Sim, p: TaskId, from: u32, to: u32) {
        let _ = (sim, p, from, to);
    }
    fn cgroup_cancel_move(&self, sim: &mut Sim, p: TaskId, from: u32, to: u32) {
        let _ = (sim, p, from, to);
    }
    fn cgroup_set_weight(&self, sim: &mut Sim, cgrp: u32, weight: u32) {
        let _ = (sim, cgrp, weight);
    }
    fn cgroup_set_bandwidth(&self, sim: &mut Sim, cgrp: u32, period_us: u64, quota_us: u64, burst_us: u64) {
        let _ = (sim, cgrp, period_us, quota_us, burst_us);
    }
    fn cgroup_set_idle(&self, sim: &mut Sim, cgrp: u32, idle: bool) {
        let _ = (sim, cgrp, idle);
    }
    /// Scheduler-wide init; nonzero refuses the load (ops.init).
    fn init(&self, sim: &mut Sim) -> i32 {
        let _ = sim;
        0
    }
    fn exit(&self, sim: &mut Sim, info: &ExitInfo) {
        let _ = (sim, info);
    }
    /// A timer the scheduler armed through the host fired (bpf_timer).
    fn timer_fired(&self, sim: &mut Sim, timer: u64) {
        let _ = (sim, timer);
    }
    /// The attach is complete (ops.init() succeeded and the tasks were
    /// switched): what a scheduler's user space does right after
    /// `bpf_map__attach_struct_ops()` (e.g. scx_tickless starting its timer
    /// through a SEC("syscall") program).
    fn attached(&self, sim: &mut Sim) {
        let _ = sim;
    }
    /// Task `p` exited and its task_struct goes (sched_ext_free(), then
    /// bpf_task_storage_free()): not an op, called whether or not the
    /// scheduler defines exit_task. Hosted schedulers drop its local storage.
    fn task_freed(&self, sim: &mut Sim, p: TaskId) {
        let _ = (sim, p);
    }
}

/// A shared scheduler is a scheduler (lets tests keep a handle on a hosted
/// one while the class holds another).
impl<T: ExtOps + ?Sized> ExtOps for std::rc::Rc<T> {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn flags(&self) -> u64 {
        (**self).flags()
    }
    fn timeout_ms(&self) -> u32 {
        (**self).timeout_ms()
    }
    fn dispatch_max_batch(&self) -> u32 {
        (**self).dispatch_max_batch()
    }
    fn has(&self, op: Op) -> bool {
        (**self).has(op)
    }
    fn counters(&self) -> Vec<(String, u64)> {
        (**self).counters()
    }
    fn select_cpu(&self, sim: &mut Sim, p: TaskId, prev_cpu: Cpu, wake_flags: u64) -> Cpu {
        (**self).select_cpu(sim, p, prev_cpu, wake_flags)
    }
    fn enqueue(&self, sim: &mut Sim, p: TaskId, enq_flags: u64) {
        (**self).enqueue(sim, p, enq_flags)
    }
    fn dequeue(&self, sim: &mut Sim, p: TaskId, deq_flags: u64) {
        (**self).dequeue(sim, p, deq_flags)
    }
    fn dispatch(&self, sim: &mut Sim, cpu: Cpu, prev: Option<TaskId>) {
        (**self).dispatch(sim, cpu, prev)
    }
    fn tick(&self, sim: &mut Sim, p: TaskId) {
        (**self).tick(sim, p)
    }
    fn runnable(&self, sim: &mut Sim, p: TaskId, enq_flags: u64) {
        (**self).runnable(sim, p, enq_flags)
    }
    fn running(&self, sim: &mut Sim, p: TaskId) {
        (**self).running(sim, p)
    }
    fn stopping(&self, sim: &mut Sim, p: TaskId, runnable: bool) {
        (**self).stopping(sim, p, runnable)
    }
    fn quiescent(&self, sim: &mut Sim, p: TaskId, deq_flags: u64) {
        (**self).quiescent(sim, p, deq_flags)
    }
    fn yield_(&self, sim: &mut Sim, from: TaskId, to: Option<TaskId>) -> bool {
        (**self).yield_(sim, from, to)
    }
    fn set_weight(&self, sim: &mut Sim, p: TaskId, weight: u32) {
        (**self).set_weight(sim, p, weight)
    }
    fn set_cpumask(&self, sim: &mut Sim, p: TaskId) {
        (**self).set_cpumask(sim, p)
    }
    fn update_idle(&self, sim: &mut Sim, cpu: Cpu, idle: bool) {
        (**self).update_idle(sim, cpu, idle)
    }
    fn cpu_acquire(&self, sim: &mut Sim, cpu: Cpu) {
        (**self).cpu_acquire(sim, cpu)
    }
    fn cpu_release(&self, sim: &mut Sim, cpu: Cpu, reason: CpuReleaseReason, task: Option<TaskId>) {
        (**self).cpu_release(sim, cpu, reason, task)
    }
    fn init_task(&self, sim: &mut Sim, p: TaskId, fork: bool) -> i32 {
        (**self).init_task(sim, p, fork)
    }
    fn exit_task(&self, sim: &mut Sim, p: TaskId, cancelled: bool) {
        (**self).exit_task(sim, p, cancelled)
    }
    fn enable(&self, sim: &mut Sim, p: TaskId) {
        (**self).enable(sim, p)
    }
    fn disable(&self, sim: &mut Sim, p: TaskId) {
        (**self).disable(sim, p)
    }
    fn dump(&self, sim: &mut Sim) {
        (**self).dump(sim)
    }
    fn dump_cpu(&self, sim: &mut Sim, cpu: Cpu, idle: bool) {
        (**self).dump_cpu(sim, cpu, idle)
    }
    fn dump_task(&self, sim: &mut Sim, p: TaskId) {
        (**self).dump_task(sim, p)
    }
    fn cgroup_init(&self, sim: &mut Sim, cgrp: u32, args: &CgroupInitArgs) -> i32 {
        (**self).cgroup_init(sim, cgrp, args)
    }
    fn cgroup_exit(&self, sim: &mut Sim, cgrp: u32) {
        (**self).cgroup_exit(sim, cgrp)
    }
    fn cgroup_prep_move(&self, sim: &mut Sim, p: TaskId, from: u32, to: u32) -> i32 {
        (**self).cgroup_prep_move(sim, p, from, to)
    }
    fn cgroup_move(&self, sim: &mut Sim, p: TaskId, from: u32, to: u32) {
        (**self).cgroup_move(sim, p, from, to)
    }
    fn cgroup_cancel_move(&self, sim: &mut Sim, p: TaskId, from: u32, to: u32) {
        (**self).cgroup_cancel_move(sim, p, from, to)
    }
    fn cgroup_set_weight(&self, sim: &mut Sim, cgrp: u32, weight: u32) {
        (**self).cgroup_set_weight(sim, cgrp, weight)
    }
    fn cgroup_set_bandwidth(&self, sim: &mut Sim, cgrp: u32, period_us: u64, quota_us: u64, burst_us: u64) {
        (**self).cgroup_set_bandwidth(sim, cgrp, period_us, quota_us, burst_us)
    }
    fn cgroup_set_idle(&self, sim: &mut Sim, cgrp: u32, idle: bool) {
        (**self).cgroup_set_idle(sim, cgrp, idle)
    }
    fn init(&self, sim: &mut Sim) -> i32 {
        (**self).init(sim)
    }
    fn exit(&self, sim: &mut Sim, info: &ExitInfo) {
        (**self).exit(sim, info)
    }
    fn timer_fired(&self, sim: &mut Sim, timer: u64) {
        (**self).timer_fired(sim, timer)
    }
    fn attached(&self, sim: &mut Sim) {
        (**self).attached(sim)
    }
    fn task_freed(&self, sim: &mut Sim, p: TaskId) {
        (**self).task_freed(sim, p)
    }
}
