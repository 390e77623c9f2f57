//! `struct sched_ext_ops` as a trait, the flags a scheduler can pass, and
//! the exit information the kernel hands back (include/linux/sched/ext.h,
//! kernel/sched/ext_internal.h).
//!
//! A scheduler is anything implementing [`ExtOps`]: a BPF C scheduler loaded
//! by the hosting crate (`schedlab-host`), or a Rust one in tests. Each method is one callback; the
//! class calls it exactly where ext.c calls the op, and only if
//! [`ExtOps::has`] says the scheduler defines it (the kernel skips NULL ops
//! and falls back to its default behaviour).

use crate::engine::{Cpu, TaskId};
use crate::sched::sim::Sim;

/// The callbacks of `struct sched_ext_ops`, for [`ExtOps::has`] and for
/// per-op accounting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Op {
    /// ops.select_cpu(): pick a CPU for a waking task.
    SelectCpu,
    /// ops.enqueue(): a task became runnable; the scheduler inserts it into a DSQ or keeps it.
    Enqueue,
    /// ops.dequeue(): a task the scheduler holds leaves it.
    Dequeue,
    /// ops.dispatch(): a CPU's local DSQ is empty; the scheduler fills it.
    Dispatch,
    /// ops.tick(): the scheduler tick on a CPU running an ext task.
    Tick,
    /// ops.runnable(): a task became runnable.
    Runnable,
    /// ops.running(): a task starts running on its CPU.
    Running,
    /// ops.stopping(): a task stops running.
    Stopping,
    /// ops.quiescent(): a task is no longer runnable.
    Quiescent,
    /// ops.yield(): sched_yield() or yield_to().
    Yield,
    /// ops.core_sched_before(): core-scheduling order (not called: core scheduling is not modelled).
    CoreSchedBefore,
    /// ops.set_weight(): a task's weight changed.
    SetWeight,
    /// ops.set_cpumask(): a task's affinity changed.
    SetCpumask,
    /// ops.update_idle(): a CPU enters or leaves idle.
    UpdateIdle,
    /// ops.cpu_acquire(): a CPU comes back to sched_ext from a higher class.
    CpuAcquire,
    /// ops.cpu_release(): a higher class takes a CPU.
    CpuRelease,
    /// ops.init_task(): a task enters sched_ext (fork or switch).
    InitTask,
    /// ops.exit_task(): a task leaves sched_ext or exits.
    ExitTask,
    /// ops.enable(): a task starts being scheduled by the scheduler.
    Enable,
    /// ops.disable(): a task stops being scheduled by the scheduler.
    Disable,
    /// ops.dump(): the scheduler-wide part of an error dump.
    Dump,
    /// ops.dump_cpu(): a CPU's part of an error dump.
    DumpCpu,
    /// ops.dump_task(): a task's part of an error dump.
    DumpTask,
    /// ops.cgroup_init(): a cgroup becomes known to the scheduler.
    CgroupInit,
    /// ops.cgroup_exit(): a cgroup goes away.
    CgroupExit,
    /// ops.cgroup_prep_move(): a task is about to change cgroup; may refuse.
    CgroupPrepMove,
    /// ops.cgroup_move(): a task changed cgroup.
    CgroupMove,
    /// ops.cgroup_cancel_move(): a prepared move was cancelled.
    CgroupCancelMove,
    /// ops.cgroup_set_weight(): cpu.weight changed.
    CgroupSetWeight,
    /// ops.cgroup_set_bandwidth(): cpu.max or cpu.max.burst changed.
    CgroupSetBandwidth,
    /// ops.cgroup_set_idle(): cpu.idle changed.
    CgroupSetIdle,
    /// ops.cpu_online(): a CPU came online (not called: hotplug is not modelled).
    CpuOnline,
    /// ops.cpu_offline(): a CPU went offline (not called: hotplug is not modelled).
    CpuOffline,
    /// ops.init(): scheduler-wide initialisation, before any task is enabled.
    Init,
    /// ops.exit(): the scheduler is unloaded or ejected.
    Exit,
}

impl Op {
    /// Every op, in `struct sched_ext_ops` member order (`Op::index()` indexes it).
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

    /// The op's index in [`Op::ALL`], for per-op tables.
    pub fn index(self) -> usize {
        self as usize
    }

    /// The bits of `ops` in a mask indexed by [`Op::index`] (every op
    /// has a bit: see the assertion below).
    #[inline]
    pub const fn mask(ops: &[Op]) -> u64 {
        let mut m = 0;
        let mut i = 0;
        while i < ops.len() {
            m |= 1 << ops[i] as u64;
            i += 1;
        }
        m
    }
}

const _: () = assert!(Op::ALL.len() <= 64, "Op::mask needs one bit per op");

/// `enum scx_ops_flags`.
pub mod ops_flags {
    /// SCX_OPS_KEEP_BUILTIN_IDLE: keep built-in idle tracking even with ops.update_idle().
    pub const KEEP_BUILTIN_IDLE: u64 = 1 << 0;
    /// SCX_OPS_ENQ_LAST: call ops.enqueue() for the last runnable task instead of keeping it running.
    pub const ENQ_LAST: u64 = 1 << 1;
    /// SCX_OPS_ENQ_EXITING: exiting tasks go through ops.enqueue() too.
    pub const ENQ_EXITING: u64 = 1 << 2;
    /// SCX_OPS_SWITCH_PARTIAL: only SCHED_EXT tasks are scheduled by ext, not all fair ones.
    pub const SWITCH_PARTIAL: u64 = 1 << 3;
    /// SCX_OPS_ENQ_MIGRATION_DISABLED: migration-disabled tasks go through ops.enqueue().
    pub const ENQ_MIGRATION_DISABLED: u64 = 1 << 4;
    /// SCX_OPS_ALLOW_QUEUED_WAKEUP: allow the queued-wakeup (ttwu_queue) path.
    pub const ALLOW_QUEUED_WAKEUP: u64 = 1 << 5;
    /// SCX_OPS_BUILTIN_IDLE_PER_NODE: idle masks per NUMA node.
    pub const BUILTIN_IDLE_PER_NODE: u64 = 1 << 6;
    /// SCX_OPS_ALWAYS_ENQ_IMMED: every insert into a local DSQ behaves as SCX_ENQ_IMMED (7.1).
    pub const ALWAYS_ENQ_IMMED: u64 = 1 << 7;
    /// Every flag this implementation knows; anything else refuses the load.
    pub const ALL: u64 = (1 << 8) - 1;

    /// Flag names without the SCX_OPS_ prefix, as profiles and `--ops-flag` spell them.
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

    /// The bits of flag names (`ENQ_LAST` or `SCX_OPS_ENQ_LAST`, any case);
    /// Err: the first name that is no flag.
    pub fn parse(names: &[String]) -> Result<u64, &String> {
        let mut bits = 0;
        for f in names {
            let want = f.trim().trim_start_matches("SCX_OPS_").to_ascii_uppercase();
            bits |= NAMES.iter().find(|(n, _)| *n == want).ok_or(f)?.1;
        }
        Ok(bits)
    }

    /// The flag names, comma-separated, for messages.
    pub fn valid() -> String {
        NAMES.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
    }
}

/// `enum scx_enq_flags` (7.x values: the low 32 bits are the core's
/// ENQUEUE_* flags, which moved in 6.19; 6.12 had HEAD at 0x10).
pub mod enq_flags {
    /// SCX_ENQ_WAKEUP: the task is waking up.
    pub const WAKEUP: u64 = 0x0001;
    /// SCX_ENQ_HEAD: insert at the head of the DSQ.
    pub const HEAD: u64 = 0x0001_0000;
    /// SCX_ENQ_CPU_SELECTED: ops.select_cpu() ran for this wakeup.
    pub const CPU_SELECTED: u64 = 0x0010_0000;
    /// Insert at the head and take the CPU from the running ext task.
    pub const PREEMPT: u64 = 1 << 32;
    /// Run on the target CPU at once or go back to ops.enqueue (7.1).
    pub const IMMED: u64 = 1 << 33;
    /// SCX_ENQ_REENQ: the task is being reenqueued (see [`super::reenq_reason`]).
    pub const REENQ: u64 = 1 << 40;
    /// SCX_ENQ_LAST: the task is the last runnable one on its CPU (SCX_OPS_ENQ_LAST).
    pub const LAST: u64 = 1 << 41;
    /// Bits only the kernel may set; a scheduler passing them is an error.
    pub const INTERNAL_MASK: u64 = 0xff << 56;
    /// SCX_ENQ_CLEAR_OPSS (internal): clear ops_state after the insert.
    pub const CLEAR_OPSS: u64 = 1 << 56;
    /// Insert into the vtime-ordered list of a DSQ.
    pub const DSQ_PRIQ: u64 = 1 << 57;
    /// SCX_ENQ_NESTED (internal): an insert from inside another insert.
    pub const NESTED: u64 = 1 << 58;
    /// SCX_ENQ_GDSQ_FALLBACK (internal): an insert redirected to the global DSQ.
    pub const GDSQ_FALLBACK: u64 = 1 << 59;
}

/// `enum scx_deq_flags`.
pub mod deq_flags {
    /// SCX_DEQ_SLEEP: the task is going to sleep.
    pub const SLEEP: u64 = 0x01;
    /// SCX_DEQ_CORE_SCHED_EXEC: core scheduling takes the task to run elsewhere.
    pub const CORE_SCHED_EXEC: u64 = 1 << 32;
    /// A dequeue for a property change (neither sleep nor core-sched; 7.x).
    pub const SCHED_CHANGE: u64 = 1 << 33;
}

/// Why a task comes back to ops.enqueue() with SCX_ENQ_REENQ
/// (`p->scx.flags` bits 12-13, 7.1).
pub mod reenq_reason {
    /// The shift of the reason field.
    pub const SHIFT: u32 = 12;
    /// SCX_TASK_REENQ_KFUNC: scx_bpf_reenqueue_local() or scx_bpf_dsq_reenq().
    pub const KFUNC: u32 = 1 << 12;
    /// SCX_TASK_REENQ_IMMED: an IMMED task could not run at once.
    pub const IMMED: u32 = 2 << 12;
    /// SCX_TASK_REENQ_PREEMPTED: the task was preempted by a higher class.
    pub const PREEMPTED: u32 = 3 << 12;
    /// The reason field's mask.
    pub const MASK: u32 = 3 << 12;
}

/// `p->scx.flags` bits the shim exposes.
pub mod task_flags {
    /// SCX_TASK_QUEUED: runnable as far as ext is concerned.
    pub const QUEUED: u32 = 1 << 0;
    /// SCX_TASK_IN_CUSTODY: in the BPF scheduler's hands (queued in ops.enqueue() or in a user DSQ); leaving calls ops.dequeue() (7.1).
    pub const IN_CUSTODY: u32 = 1 << 1;
    /// SCX_TASK_RESET_RUNNABLE_AT: the watchdog's runnable_at is reset at the next enqueue.
    pub const RESET_RUNNABLE_AT: u32 = 1 << 2;
    /// SCX_TASK_DEQD_FOR_SLEEP: the last dequeue was for sleep.
    pub const DEQD_FOR_SLEEP: u32 = 1 << 3;
    /// SCX_TASK_IMMED: the task sits in a local DSQ inserted with SCX_ENQ_IMMED.
    pub const IMMED: u32 = 1 << 5;
}

/// `enum scx_kick_flags`.
pub mod kick_flags {
    /// SCX_KICK_IDLE: kick only if the CPU is idle.
    pub const IDLE: u64 = 1 << 0;
    /// SCX_KICK_PREEMPT: preempt the running task.
    pub const PREEMPT: u64 = 1 << 1;
    /// SCX_KICK_WAIT: wait until the CPU has gone through a scheduling round.
    pub const WAIT: u64 = 1 << 2;
}

/// `enum scx_pick_idle_cpu_flags`.
pub mod pick_idle_flags {
    /// SCX_PICK_IDLE_CORE: only CPUs whose whole core is idle.
    pub const CORE: u64 = 1 << 0;
    /// SCX_PICK_IDLE_IN_NODE: only CPUs in the given node.
    pub const IN_NODE: u64 = 1 << 1;
}

/// Built-in DSQ ids (`enum scx_dsq_id_flags`).
pub mod dsq_id {
    /// SCX_DSQ_FLAG_BUILTIN: a built-in DSQ id.
    pub const BUILTIN: u64 = 1 << 63;
    /// SCX_DSQ_FLAG_LOCAL_ON: with BUILTIN, marks a CPU's local DSQ id.
    pub const FLAG_LOCAL_ON: u64 = 1 << 62;
    /// SCX_DSQ_LOCAL_ON: `LOCAL_ON | cpu` names a CPU's local DSQ. Both
    /// bits: a user DSQ id may have bit 62 set (only bit 63 is refused).
    pub const LOCAL_ON: u64 = BUILTIN | FLAG_LOCAL_ON;
    /// SCX_DSQ_INVALID.
    pub const INVALID: u64 = BUILTIN;
    /// SCX_DSQ_GLOBAL: the global DSQ (per node).
    pub const GLOBAL: u64 = BUILTIN | 1;
    /// SCX_DSQ_LOCAL: the local DSQ of the CPU in context.
    pub const LOCAL: u64 = BUILTIN | 2;
    /// SCX_DSQ_BYPASS: the bypass DSQ (6.19+).
    pub const BYPASS: u64 = BUILTIN | 3;
    /// The CPU bits of a LOCAL_ON id.
    pub const LOCAL_CPU_MASK: u64 = 0xffff_ffff;
}

/// SCX_REENQ_ANY for scx_bpf_dsq_reenq().
pub const REENQ_ANY: u64 = 1;
/// A local DSQ reenqueued more often than this in one pass is an error.
pub const REENQ_LOCAL_MAX_REPEAT: u32 = 256;

/// SCX_SLICE_DFL (20 ms) and SCX_SLICE_INF.
pub const SLICE_DFL_NS: u64 = 20_000_000;
/// SCX_SLICE_INF: a slice that never runs out.
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
    /// SCX_EXIT_NONE.
    None = 0,
    /// SCX_EXIT_DONE: finished normally.
    Done = 1,
    /// SCX_EXIT_UNREG: unregistered from user space.
    Unreg = 64,
    /// SCX_EXIT_UNREG_BPF: the scheduler called scx_bpf_exit().
    UnregBpf = 65,
    /// SCX_EXIT_UNREG_KERN: unregistered by the kernel.
    UnregKern = 66,
    /// SCX_EXIT_SYSRQ: sysrq-S.
    #[serde(rename = "SYSRQ")]
    SysRq = 67,
    /// SCX_EXIT_ERROR: a runtime error found by the kernel (here also faults and hung callbacks).
    Error = 1024,
    /// SCX_EXIT_ERROR_BPF: the scheduler called scx_bpf_error().
    ErrorBpf = 1025,
    /// SCX_EXIT_ERROR_STALL: the watchdog found a runnable task stalled.
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

    /// An error kind (code 1024 and above).
    pub fn is_error(self) -> bool {
        self as u32 >= ExitKind::Error as u32
    }

    /// Every kind, in code order.
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
    /// How the scheduler exited.
    pub kind: ExitKind,
    /// The exit code (scx_bpf_exit()'s, or the UEI's).
    pub exit_code: i64,
    /// The kind's reason string.
    pub reason: String,
    /// The message: the error text, or scx_bpf_exit()'s message.
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
    /// cpu.weight, 1..10000.
    pub weight: u32,
    /// cpu.max period, us.
    pub bw_period_us: u64,
    /// cpu.max quota, us; u64::MAX for "max".
    pub bw_quota_us: u64,
    /// cpu.max.burst, us.
    pub bw_burst_us: u64,
    /// cpu.idle.
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
    /// The tick on a CPU running `p` (ops.tick); setting the slice to 0 preempts it.
    fn tick(&self, sim: &mut Sim, p: TaskId) {
        let _ = (sim, p);
    }
    /// `p` became runnable (ops.runnable), before ops.enqueue().
    fn runnable(&self, sim: &mut Sim, p: TaskId, enq_flags: u64) {
        let _ = (sim, p, enq_flags);
    }
    /// `p` starts running on its CPU (ops.running).
    fn running(&self, sim: &mut Sim, p: TaskId) {
        let _ = (sim, p);
    }
    /// `p` stops running; `runnable` says whether it stays runnable (ops.stopping).
    fn stopping(&self, sim: &mut Sim, p: TaskId, runnable: bool) {
        let _ = (sim, p, runnable);
    }
    /// `p` is no longer runnable (ops.quiescent).
    fn quiescent(&self, sim: &mut Sim, p: TaskId, deq_flags: u64) {
        let _ = (sim, p, deq_flags);
    }
    /// sched_yield() or yield_to(); returns whether `from` yields to `to`.
    fn yield_(&self, sim: &mut Sim, from: TaskId, to: Option<TaskId>) -> bool {
        let _ = (sim, from, to);
        false
    }
    /// `p`'s weight changed to `weight`, 1..10000 (ops.set_weight).
    fn set_weight(&self, sim: &mut Sim, p: TaskId, weight: u32) {
        let _ = (sim, p, weight);
    }
    /// The affinity changed; the new mask is in the task's `cpus_mask`.
    fn set_cpumask(&self, sim: &mut Sim, p: TaskId) {
        let _ = (sim, p);
    }
    /// `cpu` enters (`idle`) or leaves idle (ops.update_idle).
    fn update_idle(&self, sim: &mut Sim, cpu: Cpu, idle: bool) {
        let _ = (sim, cpu, idle);
    }
    /// `cpu` is back from a higher class (ops.cpu_acquire).
    fn cpu_acquire(&self, sim: &mut Sim, cpu: Cpu) {
        let _ = (sim, cpu);
    }
    /// A higher class takes `cpu`, with the task that takes it if known (ops.cpu_release).
    fn cpu_release(&self, sim: &mut Sim, cpu: Cpu, reason: CpuReleaseReason, task: Option<TaskId>) {
        let _ = (sim, cpu, reason, task);
    }
    /// A task enters ext (fork or switch-in); nonzero refuses it (ops.init_task).
    fn init_task(&self, sim: &mut Sim, p: TaskId, fork: bool) -> i32 {
        let _ = (sim, p, fork);
        0
    }
    /// `p` leaves ext; `cancelled` when ops.init_task() succeeded but the task never got enabled (ops.exit_task).
    fn exit_task(&self, sim: &mut Sim, p: TaskId, cancelled: bool) {
        let _ = (sim, p, cancelled);
    }
    /// The scheduler starts scheduling `p` (ops.enable).
    fn enable(&self, sim: &mut Sim, p: TaskId) {
        let _ = (sim, p);
    }
    /// The scheduler stops scheduling `p` (ops.disable).
    fn disable(&self, sim: &mut Sim, p: TaskId) {
        let _ = (sim, p);
    }
    /// Debug dumps on an error exit: append text to the dump.
    fn dump(&self, sim: &mut Sim) {
        let _ = sim;
    }
    /// `cpu`'s part of the error dump (ops.dump_cpu).
    fn dump_cpu(&self, sim: &mut Sim, cpu: Cpu, idle: bool) {
        let _ = (sim, cpu, idle);
    }
    /// `p`'s part of the error dump (ops.dump_task).
    fn dump_task(&self, sim: &mut Sim, p: TaskId) {
        let _ = (sim, p);
    }
    /// A cgroup becomes known (scx_cgroup_init at enable, pre-order);
    /// `cgrp` is its task group index. Nonzero fails the enable.
    fn cgroup_init(&self, sim: &mut Sim, cgrp: u32, args: &CgroupInitArgs) -> i32 {
        let _ = (sim, cgrp, args);
        0
    }
    /// Cgroup `cgrp` goes away, or the scheduler is unloaded (ops.cgroup_exit).
    fn cgroup_exit(&self, sim: &mut Sim, cgrp: u32) {
        let _ = (sim, cgrp);
    }
    /// A task is about to move (scx_cgroup_can_attach); nonzero refuses.
    fn cgroup_prep_move(&self, sim: &mut Sim, p: TaskId, from: u32, to: u32) -> i32 {
        let _ = (sim, p, from, to);
        0
    }
    /// `p` moved from cgroup `from` to `to` (ops.cgroup_move).
    fn cgroup_move(&self, sim: &mut Sim, p: TaskId, from: u32, to: u32) {
        let _ = (sim, p, from, to);
    }
    /// A move prepared by ops.cgroup_prep_move() did not happen (ops.cgroup_cancel_move).
    fn cgroup_cancel_move(&self, sim: &mut Sim, p: TaskId, from: u32, to: u32) {
        let _ = (sim, p, from, to);
    }
    /// Cgroup `cgrp`'s cpu.weight changed (ops.cgroup_set_weight).
    fn cgroup_set_weight(&self, sim: &mut Sim, cgrp: u32, weight: u32) {
        let _ = (sim, cgrp, weight);
    }
    /// Cgroup `cgrp`'s cpu.max / cpu.max.burst changed, in us (ops.cgroup_set_bandwidth).
    fn cgroup_set_bandwidth(&self, sim: &mut Sim, cgrp: u32, period_us: u64, quota_us: u64, burst_us: u64) {
        let _ = (sim, cgrp, period_us, quota_us, burst_us);
    }
    /// Cgroup `cgrp`'s cpu.idle changed (ops.cgroup_set_idle).
    fn cgroup_set_idle(&self, sim: &mut Sim, cgrp: u32, idle: bool) {
        let _ = (sim, cgrp, idle);
    }
    /// Scheduler-wide init; nonzero refuses the load (ops.init).
    fn init(&self, sim: &mut Sim) -> i32 {
        let _ = sim;
        0
    }
    /// The scheduler exits; `info` says why (ops.exit).
    fn exit(&self, sim: &mut Sim, info: &ExitInfo) {
        let _ = (sim, info);
    }
    /// A timer the scheduler armed through the host fired (bpf_timer).
    fn timer_fired(&self, sim: &mut Sim, timer: u64) {
        let _ = (sim, timer);
    }
    /// Whether the scheduler attaches a program to the `sched_switch`
    /// tracepoint (`SEC("tp_btf/sched_switch")`), asked once at enable.
    fn traces_sched_switch(&self) -> bool {
        false
    }
    /// The `sched_switch` tracepoint: `prev` leaves the CPU for `next`
    /// (None: the idle task), on every context switch of every class,
    /// `preempt` when `prev` is still runnable.
    fn sched_switch(&self, sim: &mut Sim, preempt: bool, prev: Option<TaskId>, next: Option<TaskId>) {
        let _ = (sim, preempt, prev, next);
    }
    /// Whether the scheduler attaches a program to tracepoint `tp` (one of
    /// [`TraceEvent::name`]'s): asked before each such event.
    fn traces(&self, tp: &str) -> bool {
        let _ = tp;
        false
    }
    /// A kernel tracepoint other than `sched_switch` fired (a cgroup
    /// attach, a rename, a capacity-pressure change); called only when
    /// [`ExtOps::traces`] says the scheduler attached to it.
    fn trace_event(&self, sim: &mut Sim, ev: &TraceEvent) {
        let _ = (sim, ev);
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

/// A kernel tracepoint event a scheduler's `SEC("tp_btf/...")` program
/// may be attached to, with the tracepoint's arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceEvent {
    /// `trace_cgroup_attach_task(dst_cgrp, path, leader, threadgroup)`:
    /// a write to cgroup.procs (`threadgroup`: the whole process) or
    /// cgroup.threads moved `leader` (and its threads) into `cgrp`.
    CgroupAttachTask {
        /// The task group moved into.
        cgrp: u32,
        /// The task written (a process's leader for cgroup.procs).
        leader: TaskId,
        /// Whether the whole thread group moved.
        threadgroup: bool,
    },
    /// `trace_task_rename(task, comm)`: `task` is about to be renamed
    /// (its old name is still in place).
    TaskRename {
        /// The task.
        task: TaskId,
        /// The new name.
        comm: String,
    },
    /// `trace_hw_pressure_update(cpu, hw_pressure)`: CPU `cpu` lost
    /// `pressure` of its 1024 capacity units to thermal or hardware limits.
    HwPressureUpdate {
        /// The CPU.
        cpu: Cpu,
        /// Capacity lost, 0..=1024.
        pressure: u64,
    },
}

impl TraceEvent {
    /// The tracepoint's name (`SEC("tp_btf/NAME")`).
    pub fn name(&self) -> &'static str {
        match self {
            TraceEvent::CgroupAttachTask { .. } => "cgroup_attach_task",
            TraceEvent::TaskRename { .. } => "task_rename",
            TraceEvent::HwPressureUpdate { .. } => "hw_pressure_update",
        }
    }
}

/// A scheduler with no callbacks: every decision takes the kernel's
/// default path (built-in idle selection, the global DSQ), as a BPF
/// scheduler that defines only its name would.
#[derive(Clone, Copy, Debug, Default)]
pub struct DefaultOps;

impl ExtOps for DefaultOps {
    fn name(&self) -> &str {
        "nothing"
    }
    fn has(&self, _op: Op) -> bool {
        false
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
    fn traces_sched_switch(&self) -> bool {
        (**self).traces_sched_switch()
    }
    fn sched_switch(&self, sim: &mut Sim, preempt: bool, prev: Option<TaskId>, next: Option<TaskId>) {
        (**self).sched_switch(sim, preempt, prev, next)
    }
    fn traces(&self, tp: &str) -> bool {
        (**self).traces(tp)
    }
    fn trace_event(&self, sim: &mut Sim, ev: &TraceEvent) {
        (**self).trace_event(sim, ev)
    }
    fn attached(&self, sim: &mut Sim) {
        (**self).attached(sim)
    }
    fn task_freed(&self, sim: &mut Sim, p: TaskId) {
        (**self).task_freed(sim, p)
    }
}
