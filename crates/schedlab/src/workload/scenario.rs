//! Scenario files: TOML with a seed, a duration, a machine, a scheduler,
//! feature switches and a list of workloads. `--set a.b.c=value` overrides any
//! field by dotted path before the file is interpreted.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::de::{self, Deserializer};
use serde::Deserialize;

use crate::sched::task::{Dist, Policy};
use crate::engine::time::{parse_duration, DurationError, Ns};

/// A scenario error: where it is, what is wrong and what is expected.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The scenario file cannot be read.
    #[error("{file}: cannot read: {source}")]
    Io {
        /// The file.
        file: String,
        /// Why.
        source: std::io::Error,
    },
    /// Bad input: what is wrong, where, and what is expected.
    #[error("{file}{line}: {msg}")]
    Invalid {
        /// The file.
        file: String,
        /// ":LINE" when the line is known, else "".
        line: String,
        /// The field and the message.
        msg: String,
    },
}

impl ScenarioError {
    /// A bad-input error at `line` (1-based) of `file`.
    pub fn invalid(file: &str, line: Option<usize>, msg: impl Into<String>) -> Self {
        ScenarioError::Invalid {
            file: file.to_string(),
            line: line.map(|l| format!(":{l}")).unwrap_or_default(),
            // One line per error, whatever the parser said.
            msg: msg.into().trim().replace('\n', "; "),
        }
    }
}

/// A duration written as "10s" / "200us" / an integer number of nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Duration(pub Ns);

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(u64),
            Str(String),
        }
        match Raw::deserialize(d).map_err(|_| de::Error::custom("expected a duration such as \"10s\", \"200us\" or an integer number of ns"))? {
            Raw::Int(v) => Ok(Duration(v)),
            Raw::Str(s) => parse_duration(&s).map(Duration).map_err(de::Error::custom),
        }
    }
}

/// A duration distribution: "5ms", "exp:5ms", "uniform:1ms..3ms".
#[derive(Clone, Debug, PartialEq)]
pub struct DistSpec(pub Dist);

impl<'de> Deserialize<'de> for DistSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        parse_dist(&s).map(DistSpec).map_err(de::Error::custom)
    }
}

/// A duration distribution that does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DistError {
    /// A constant or exponential mean that is not a duration.
    #[error("{0}; expected \"5ms\", \"exp:5ms\" or \"uniform:1ms..3ms\"")]
    Duration(DurationError),
    /// `uniform:` without the `..` between its bounds.
    #[error("{text:?}: expected \"5ms\", \"exp:5ms\" or \"uniform:1ms..3ms\"")]
    NoRange {
        /// The distribution as written.
        text: String,
    },
    /// A bound of `uniform:A..B` that is not a duration.
    #[error(transparent)]
    Bound(DurationError),
    /// `uniform:A..B` with A > B.
    #[error("{text:?}: the lower bound is above the upper bound")]
    Inverted {
        /// The distribution as written.
        text: String,
    },
}

/// Parses "5ms" (constant), "exp:5ms" (exponential with that mean) or
/// "uniform:1ms..3ms".
pub fn parse_dist(s: &str) -> Result<Dist, DistError> {
    if let Some(rest) = s.strip_prefix("exp:") {
        return parse_duration(rest).map(Dist::Exp).map_err(DistError::Duration);
    }
    if let Some(rest) = s.strip_prefix("uniform:") {
        let (a, b) = rest.split_once("..").ok_or_else(|| DistError::NoRange { text: s.to_string() })?;
        let (a, b) = (parse_duration(a).map_err(DistError::Bound)?, parse_duration(b).map_err(DistError::Bound)?);
        if a > b {
            return Err(DistError::Inverted { text: s.to_string() });
        }
        return Ok(Dist::Uniform(a, b));
    }
    parse_duration(s).map(Dist::Const).map_err(DistError::Duration)
}

/// One value or one per task.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany<T> {
    /// The same value for every task.
    One(T),
    /// One value per task, in task order (the last repeats).
    Many(Vec<T>),
}

impl<T: Clone> OneOrMany<T> {
    /// The value for task `i`.
    pub fn get(&self, i: usize) -> T {
        match self {
            OneOrMany::One(v) => v.clone(),
            OneOrMany::Many(v) => v[i.min(v.len() - 1)].clone(),
        }
    }
    /// Number of values given, or None for a single value applied to all.
    pub fn count(&self) -> Option<usize> {
        match self {
            OneOrMany::One(_) => None,
            OneOrMany::Many(v) => Some(v.len()),
        }
    }
}

/// A CPU list ("0-3,8") or a single CPU number.
#[derive(Clone, Debug, PartialEq)]
pub struct CpuList(pub String);

impl<'de> Deserialize<'de> for CpuList {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(u64),
            Str(String),
        }
        match Raw::deserialize(d).map_err(|_| de::Error::custom("expected a CPU list such as \"0-3,8\" or a CPU number"))? {
            Raw::Int(v) => Ok(CpuList(v.to_string())),
            Raw::Str(s) => Ok(CpuList(s)),
        }
    }
}

/// A scenario file: the machine, the scheduler, the features and the workloads to simulate for `duration`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// A name for reports (default: the file's stem).
    #[serde(default)]
    pub name: Option<String>,
    /// Free text for the reader.
    #[serde(default)]
    pub description: Option<String>,
    /// The seed of every random stream of the run.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Simulated time to run.
    pub duration: Duration,
    /// The machine (`[machine]`).
    #[serde(default)]
    pub machine: MachineSpec,
    /// The scheduler (`[scheduler]`).
    #[serde(default)]
    pub scheduler: SchedulerSpec,
    /// Kernel feature switches by their kernel names (`[features]`).
    #[serde(default)]
    pub features: BTreeMap<String, toml::Value>,
    /// The workloads (`[[workload]]` tables).
    #[serde(default, rename = "workload")]
    pub workloads: Vec<WorkloadSpec>,
    /// The cgroup v2 tree (`[[cgroup]]` tables).
    #[serde(default, rename = "cgroup")]
    pub cgroups: Vec<CgroupSpec>,
    /// Writes to cgroup files at run time (`[[cgroup_write]]` tables).
    #[serde(default, rename = "cgroup_write")]
    pub cgroup_writes: Vec<CgroupWriteSpec>,
    /// The scenario's text, to name the line of a field found wrong later.
    #[serde(skip)]
    pub source_text: String,
}

/// A write to a cgroup's files at run time, as `echo 500 > cpu.weight` or
/// `echo PID > cgroup.procs` would do it then.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CgroupWriteSpec {
    /// When, from the start of the run.
    pub at: Duration,
    /// The cgroup written (a `[[cgroup]]` path or one of its parents).
    pub path: String,
    /// cpu.weight, 1..10000.
    pub weight: Option<i64>,
    /// cpu.max: "QUOTA PERIOD" or "max".
    pub max: Option<String>,
    /// cpu.idle.
    pub idle: Option<bool>,
    /// cgroup.procs: the named workload's tasks move into `path`.
    pub procs: Option<String>,
}

/// A cgroup: `path` and the files of its cpu and cpuset controllers.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CgroupSpec {
    /// The cgroup's path, e.g. "/web" (its parents exist implicitly).
    pub path: String,
    /// cpu.weight, 1..10000 (default 100).
    pub weight: Option<i64>,
    /// cpu.max: "QUOTA PERIOD" such as "50ms 100ms", or "max".
    pub max: Option<String>,
    /// cpu.max.burst: unused quota carried into the next period, up to this.
    pub burst: Option<Duration>,
    /// cpuset.cpus (default: the parent's).
    pub cpus: Option<CpuList>,
    /// cpu.idle.
    pub idle: Option<bool>,
}

fn default_seed() -> u64 {
    1
}

/// `[machine]`: a preset, a CPU count or an imported layout, and the costs.
#[derive(Clone, Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct MachineSpec {
    /// A machine preset by name (`schedlab list presets`).
    pub preset: Option<String>,
    /// A flat machine of this many CPUs.
    pub cpus: Option<usize>,
    /// Import a real machine's layout: a copy of /sys/devices/system/cpu.
    pub sysfs: Option<PathBuf>,
    /// Import a real machine's layout: a file holding `lscpu -p` output.
    pub lscpu: Option<PathBuf>,
    /// CONFIG_HZ: the tick rate.
    pub hz: Option<u32>,
    /// false = C-states disabled (idle=poll).
    pub cstates: Option<bool>,
    /// Overrides of the cost model (`[machine.costs]`).
    #[serde(default)]
    pub costs: CostSpec,
    /// Windows during which CPUs run with interrupts disabled.
    pub irqoff: Option<IrqOffSpec>,
    /// Kernel feature switches the machine's kernel runs with
    /// (`[machine.features]`, e.g. `HRTICK = true` as `schedlab calibrate`
    /// measures it); the scenario's `[features]` and `--feature` override
    /// them.
    #[serde(default)]
    pub features: BTreeMap<String, toml::Value>,
}

/// IRQ-disabled windows: on each CPU, windows of `length` separated by gaps
/// of `every`, during which timer interrupts and IPIs wait.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IrqOffSpec {
    /// Gap between IRQ-off windows on a CPU.
    pub every: DistSpec,
    /// Length of a window.
    pub length: DistSpec,
    /// The CPUs with windows (default: all).
    pub cpus: Option<CpuList>,
}

/// `[machine.costs]`: overrides of the cost model's defaults.
#[derive(Clone, Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct CostSpec {
    /// Direct cost of a context switch.
    pub context_switch: Option<Duration>,
    /// IPI delivery latency.
    pub ipi: Option<Duration>,
    /// Cost of a wakeup (try_to_wake_up) on the waking CPU.
    pub wakeup: Option<Duration>,
    /// Timer slack of SCHED_OTHER sleeps.
    pub timer_slack: Option<Duration>,
    /// Cost of scanning one CPU in select_idle_sibling and the balancer.
    pub scan_cpu: Option<Duration>,
    /// Cost of migrating a task (the balancer's per-task work).
    pub migrate_task: Option<Duration>,
    /// Cost of switching address spaces between processes.
    pub mm_switch: Option<Duration>,
    /// Cost of a message between LLCs (cache-line transfer).
    pub xllc_msg: Option<Duration>,
    /// Taking and releasing another CPU's runqueue lock, uncontended.
    pub rq_lock: Option<Duration>,
    /// The part of `migrate_task` done under the source runqueue's lock.
    pub rq_detach: Option<Duration>,
    /// One 100-byte pipe write() that neither blocks nor wakes anyone.
    pub msg_write_pipe: Option<Duration>,
    /// One 100-byte pipe read() with data in the pipe.
    pub msg_read_pipe: Option<Duration>,
    /// One 100-byte unix stream socket write() that neither blocks nor wakes anyone.
    pub msg_write_socket: Option<Duration>,
    /// One 100-byte unix stream socket read() with data queued.
    pub msg_read_socket: Option<Duration>,
}

/// `[scheduler]`: the class that runs the workloads and its tunables.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchedulerSpec {
    /// "eevdf" (the fair class alone) or "ext" (a sched_ext scheduler, `sched`).
    #[serde(default = "default_kind")]
    pub kind: String,
    /// "fair_server" (default), "throttle" or "off".
    pub rt_bandwidth: Option<String>,
    /// sysctl_sched_base_slice (before the ilog2(CPUs) scaling).
    pub base_slice: Option<Duration>,
    /// sysctl_sched_migration_cost: how long a task stays cache-hot.
    pub migration_cost: Option<Duration>,
    /// ext: a shipped scheduler's name (simple, qmap, central, cpu0, flow),
    /// `crate:NAME[@VERSION]` (a published scx scheduler), or the path of a
    /// `.bpf.c` file or a scheduler's directory, relative to the scenario file.
    pub sched: Option<String>,
    /// ext: include directories searched before the scheduler's own and
    /// schedlab's, relative to the scenario file (`--sched-include`).
    #[serde(default)]
    pub include: Vec<String>,
    /// ext: read-only settings (`const volatile` globals) by name, as a
    /// scheduler's user space sets rodata before loading it.
    #[serde(default)]
    pub options: BTreeMap<String, toml::Value>,
    /// ext: SCX_OPS_* flags to add to ops.flags, without the prefix
    /// (e.g. "ALWAYS_ENQ_IMMED"), as a loader sets them on the skeleton.
    #[serde(default)]
    pub ops_flags: Vec<String>,
    /// ext: the loader profile (a TOML file, relative to the scenario):
    /// what the scheduler's user space sets up before attaching. Default:
    /// the shipped profile of a published scx scheduler, if it has one;
    /// "none" loads with the object's defaults only.
    pub profile: Option<String>,
    /// ext: the scheduler's own command line, read through its profile's
    /// flags (e.g. "-s 5000 -m performance" for scx_bpfland).
    pub args: Option<String>,
    /// ext: when the scheduler is loaded (default 0) and unregistered.
    pub attach_at: Option<Duration>,
    /// When the sched_ext scheduler is unregistered from user space (default: never).
    pub detach_at: Option<Duration>,
    /// ext: sched_ext.bypass_lb_intv_us, the bypass load balancer's period
    /// (default 500ms; "0s" turns it off).
    pub bypass_lb_interval: Option<Duration>,
    /// ext: the wall time one callback may run before it is taken for an
    /// endless loop and the scheduler is ejected (default 5s; "0s": no
    /// limit). Decides nothing in a run whose callbacks return.
    pub op_timeout: Option<Duration>,
}

impl Default for SchedulerSpec {
    fn default() -> Self {
        SchedulerSpec {
            kind: default_kind(),
            rt_bandwidth: None,
            base_slice: None,
            migration_cost: None,
            sched: None,
            include: Vec::new(),
            options: BTreeMap::new(),
            ops_flags: Vec::new(),
            profile: None,
            args: None,
            attach_at: None,
            detach_at: None,
            bypass_lb_interval: None,
            op_timeout: None,
        }
    }
}

fn default_kind() -> String {
    "eevdf".to_string()
}

/// A workload entry; `kind` selects the model.
#[derive(Clone, Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum WorkloadSpec {
    /// CPU-bound tasks, with optional sleeps (`kind = "hog"`).
    Hog(HogSpec),
    /// cyclictest's timer-latency threads.
    Cyclictest(CyclictestSpec),
    /// hackbench's message groups.
    Hackbench(HackbenchSpec),
    /// stress-ng stressors (cpu, yield, switch, fork).
    Stress(StressSpec),
    /// Overcommitted KVM guests with a guest spinlock.
    Vm(VmSpec),
    /// schbench's message and worker threads.
    Schbench(SchbenchSpec),
    /// The source documents' mixed desktop load.
    Mixed(MixedSpec),
    /// A request server with a client load.
    Server(ServerSpec),
    /// An rt-app JSON description.
    Rtapp(RtappSpec),
    /// One recorded task's steps (`schedlab import-trace`).
    Replay(crate::workload::replay::ReplaySpec),
}

impl WorkloadSpec {
    /// The workload's kind as written in the scenario.
    pub fn kind(&self) -> &'static str {
        match self {
            WorkloadSpec::Hog(_) => "hog",
            WorkloadSpec::Cyclictest(_) => "cyclictest",
            WorkloadSpec::Hackbench(_) => "hackbench",
            WorkloadSpec::Stress(_) => "stress",
            WorkloadSpec::Vm(_) => "vm",
            WorkloadSpec::Schbench(_) => "schbench",
            WorkloadSpec::Mixed(_) => "mixed",
            WorkloadSpec::Server(_) => "server",
            WorkloadSpec::Rtapp(_) => "rtapp",
            WorkloadSpec::Replay(_) => "replay",
        }
    }
}

/// The workload kinds and a line on each (`schedlab list workloads`).
pub const WORKLOAD_KINDS: &[(&str, &str)] = &[
    ("hog", "CPU-bound tasks (optionally run/sleep cycles) with nice, policy and affinity"),
    ("cyclictest", "rt-tests cyclictest: periodic timer wakeups, latency = wake time - intended time"),
    ("hackbench", "rt-tests hackbench: groups of senders writing to every receiver over pipes or sockets"),
    ("stress", "stress-ng stressors: cpu, yield, switch (pipe ping-pong pairs), fork (fork + wait storms); reports bogo ops"),
    ("vm", "overcommitted KVM guests: vCPU threads whose guest work takes a guest spinlock; pause-loop exits yield_to the holder"),
    ("schbench", "schbench: message threads waking worker threads (or -R requests/s), per-CPU lock, cache footprint; wakeup and request latency, RPS"),
    ("mixed", "experiment 000's background load: oversubscribed hogs at mixed nice, yielders, switch pairs, SCHED_FIFO bursts, fork storms"),
    ("server", "multi-instance server: N processes of a dispatcher and M-1 workers sharing a working set; request latency and throughput"),
    ("replay", "one task of a recorded trace (schedlab import-trace): steps \"run 2ms\", \"sleep 1ms\", \"wait NAME\", \"wake NAME\", \"fork NAME\", \"run to end\", \"exit\""),
    ("rtapp", "rt-app JSON import (file = \"x.json\"): run, runtime, sleep, timer, lock/unlock, barrier, fork, yield, loop, phases"),
];

/// schbench (Chris Mason's scheduler benchmark): `-m` message threads, each
/// with `-t` workers. A worker asks its message thread for work and waits to
/// be woken (wakeup latency: from the wake to running); it then handles a
/// request: a 100 us usleep (simulated networking), then `-n` matrix
/// multiplications over its `-F` cache footprint under the lock of the CPU it
/// is on (request latency: from the start of the request to its end). With
/// `-R`, the message threads instead issue requests at that total rate
/// (Poisson arrivals) to a queue their workers serve. Reports wakeup and
/// request latency percentiles and the achieved requests per second.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchbenchSpec {
    /// A name for results (default: the kind and its index).
    pub name: Option<String>,
    /// -m: message threads (default 1).
    pub message_threads: Option<u32>,
    /// -t: workers per message thread (default: one per allowed CPU).
    pub threads: Option<u32>,
    /// -n: matrix multiplications per request (default 5).
    pub operations: Option<u32>,
    /// -F: cache footprint in KiB (default 256): each worker's matrices.
    pub cache_footprint_kb: Option<u64>,
    /// CPU time of one matrix multiplication (default: 1 ns per
    /// multiply-add of the footprint's matrices, n = sqrt(F / 24 bytes)).
    pub op_cost: Option<DistSpec>,
    /// The usleep at the start of each request (default "100us").
    pub sleep: Option<DistSpec>,
    /// -R: requests per second over all message threads (default 0: message mode).
    pub rps: Option<u64>,
    /// -L: no per-CPU locking during the CPU work.
    #[serde(default)]
    pub no_locking: bool,
    /// CPUs the tasks may run on (cpulist).
    pub cpus: Option<CpuList>,
    /// Nice value of the tasks.
    pub nice: Option<i32>,
    /// When the workload starts (default: at 0).
    pub start: Option<Duration>,
}

/// Experiment 000's background load as one workload: `oversubscription` x CPUs
/// threads of steady load (run/sleep hogs at mixed nice levels, sched_yield()
/// loops and pinned pipe ping-pong pairs), periodic SCHED_FIFO bursts and
/// periodic fork storms. The same mix as scenarios/mixed-load.toml writes out
/// with hog and stress entries.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MixedSpec {
    /// A name for results (default: the kind and its index).
    pub name: Option<String>,
    /// Threads of steady load per CPU: hogs + yielders + switch threads (default 2.0).
    pub oversubscription: Option<f64>,
    /// Nice levels the hogs take in turn (default [-5, 0, 0, 5, 10, 0, 0, 0, 5, -5, 0, 19]).
    pub nice: Option<Vec<i32>>,
    /// Hog run and sleep lengths (default "exp:4ms" / "exp:1ms").
    pub run: Option<DistSpec>,
    /// Sleep between bursts.
    pub sleep: Option<DistSpec>,
    /// sched_yield() loops (default CPUs / 4) and switch pairs (default CPUs / 4).
    pub yielders: Option<u32>,
    /// Pinned ping-pong pairs.
    pub switch_pairs: Option<u32>,
    /// SCHED_FIFO burst tasks (default CPUs / 6, at least 1), their priority
    /// (50), burst length ("exp:2ms") and gap between bursts ("exp:50ms").
    pub fifo_tasks: Option<u32>,
    /// SCHED_FIFO priority of the periodic RT task.
    pub fifo_priority: Option<u32>,
    /// Run time of each RT activation.
    pub fifo_run: Option<DistSpec>,
    /// Period of the RT activations.
    pub fifo_every: Option<DistSpec>,
    /// Fork-storm workers (default 2), forks per storm (50) and pause between storms ("exp:200ms").
    pub fork_workers: Option<u32>,
    /// Forks per burst.
    pub fork_burst: Option<u32>,
    /// Pause between fork bursts.
    pub fork_pause: Option<DistSpec>,
    /// CPUs the tasks may run on (cpulist).
    pub cpus: Option<CpuList>,
    /// When the workload starts (default: at 0).
    pub start: Option<Duration>,
}

/// A multi-instance server (Redis-like, experiment 004's second workload):
/// `instances` processes, each of `threads` threads: one dispatcher and
/// `threads - 1` workers sharing the process's `working_set`. The
/// dispatcher keeps `connections` requests in flight: it hands each to the
/// workers through a queue, a worker serves it with the process's data and
/// replies through a second queue, and the dispatcher handles the reply
/// (request latency: dispatch to reply handled) and sends the next request.
/// Reports request latency and throughput (requests per second).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSpec {
    /// A name for results (default: the kind and its index).
    pub name: Option<String>,
    /// Processes (default 4).
    pub instances: Option<u32>,
    /// Threads per process, the dispatcher included (default 4).
    pub threads: Option<u32>,
    /// Bytes of data each process works on (default 4 MiB).
    pub working_set: Option<u64>,
    /// Worker CPU time per request (default "exp:50us").
    pub work: Option<DistSpec>,
    /// Dispatcher CPU time per request: reply handling and the next dispatch (default "5us").
    pub dispatch: Option<DistSpec>,
    /// Requests in flight per process (default 2 per worker).
    pub connections: Option<u32>,
    /// CPUs the tasks may run on (cpulist).
    pub cpus: Option<CpuList>,
    /// Nice value of the tasks.
    pub nice: Option<i32>,
    /// When the workload starts (default: at 0).
    pub start: Option<Duration>,
}

/// rt-app: tasks described in rt-app's JSON format, read from `file`
/// (relative to the scenario) or given inline in `json`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RtappSpec {
    /// A name for results (default: the kind and its index).
    pub name: Option<String>,
    /// An rt-app JSON file (relative to the scenario's directory).
    pub file: Option<String>,
    /// The rt-app JSON inline.
    pub json: Option<String>,
    /// When the workload starts (default: at 0).
    pub start: Option<Duration>,
    /// The scenario file's directory, for `file`.
    #[serde(skip)]
    pub base_dir: PathBuf,
}

/// Overcommitted virtual machines (experiment 003): each VM is a host process with
/// `vcpus` vCPU threads. Guest work alternates between unlocked work and a
/// critical section under a VM-wide guest spinlock. A vCPU that spins longer
/// than the pause-loop-exit window exits to the host, which calls yield_to()
/// on the lock holder's vCPU (kvm_vcpu_on_spin). Reports completed guest
/// operations (throughput).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VmSpec {
    /// A name for results (default: the kind and its index).
    pub name: Option<String>,
    /// Number of VMs (default 2).
    pub vms: Option<u32>,
    /// vCPUs per VM (default 16).
    pub vcpus: Option<u32>,
    /// Guest work outside the lock, per operation (default "exp:200us").
    pub work: Option<DistSpec>,
    /// Critical section under the guest lock (default "exp:20us").
    pub critical: Option<DistSpec>,
    /// Pause-loop-exit window (default "50us"); "0ns" disables PLE.
    pub ple_window: Option<Duration>,
    /// CPUs the tasks may run on (cpulist).
    pub cpus: Option<CpuList>,
    /// When the workload starts (default: at 0).
    pub start: Option<Duration>,
}

/// stress-ng: one stressor with N workers (`--cpu N`, `--yield N`, `--switch N`, `--fork N`).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StressSpec {
    /// A name for results (default: the kind and its index).
    pub name: Option<String>,
    /// "cpu", "yield", "switch" or "fork".
    pub stressor: String,
    /// Number of workers; 0 or absent = one per CPU (stress-ng's N = 0).
    pub workers: Option<u32>,
    /// CPU time per bogo op (cpu: the work between checks; others: the syscall cost).
    pub op_cost: Option<Duration>,
    /// fork: CPU time of each child before it exits.
    pub child_run: Option<Duration>,
    /// fork: pause between fork bursts, and forks per burst (a fork storm).
    pub pause: Option<DistSpec>,
    /// Requests per client burst.
    pub burst: Option<u32>,
    /// CPUs the tasks may run on (cpulist).
    pub cpus: Option<CpuList>,
    /// Nice value of the tasks.
    pub nice: Option<i32>,
    /// Scheduling policy: "other", "batch", "idle", "fifo" or "rr".
    pub policy: Option<String>,
    /// RT priority for fifo / rr.
    pub priority: Option<u32>,
    /// When the workload starts (default: at 0).
    pub start: Option<Duration>,
}

/// `kind = "hog"`: CPU-bound tasks, optionally sleeping between runs.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HogSpec {
    /// A name for results (default: the kind and its index).
    pub name: Option<String>,
    /// How many tasks.
    #[serde(default = "one")]
    pub count: u32,
    /// Nice value: one for all, or one per task.
    pub nice: Option<OneOrMany<i32>>,
    /// CPUs the tasks may run on (cpulist).
    pub cpus: Option<CpuList>,
    /// Scheduling policy: "other", "batch", "idle", "fifo" or "rr".
    pub policy: Option<String>,
    /// RT priority for fifo / rr.
    pub priority: Option<u32>,
    /// Custom slice (sched_attr.sched_runtime), 0.1 ms .. 100 ms.
    pub slice: Option<Duration>,
    /// Run length per cycle; default: run forever.
    pub run: Option<DistSpec>,
    /// Sleep between runs; without it the task never sleeps.
    pub sleep: Option<DistSpec>,
    /// When the workload starts (default: at 0).
    pub start: Option<Duration>,
    /// Cache working set in bytes (migration refill penalty).
    pub working_set: Option<u64>,
    /// Call sched_yield() after every run.
    #[serde(default, rename = "yield")]
    pub yield_after_run: bool,
    /// The cgroup the tasks join: a `[[cgroup]]` path (or an intermediate one).
    pub cgroup: Option<String>,
    /// The tasks are threads of one process (one mm) instead of separate processes.
    #[serde(default)]
    pub threads: bool,
}

fn one() -> u32 {
    1
}

/// `kind = "cyclictest"`: periodic timer threads recording wakeup latency.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CyclictestSpec {
    /// A name for results (default: the kind and its index).
    pub name: Option<String>,
    /// -t: number of threads (default 1).
    pub threads: Option<u32>,
    /// -i: base interval (default 1000 us).
    pub interval: Option<Duration>,
    /// -d: distance between thread intervals (default 500 us; 0 with --smp).
    pub distance: Option<Duration>,
    /// -p: RT priority; 0 = SCHED_OTHER.
    pub priority: Option<u32>,
    /// "fifo", "rr" or "other" (default: fifo if priority > 0).
    pub policy: Option<String>,
    /// -a: CPUs to pin threads to, round robin.
    pub affinity: Option<CpuList>,
    /// -S / --smp: one thread per CPU, each pinned, distance 0.
    #[serde(default)]
    pub smp: bool,
    /// Nice value of SCHED_OTHER threads.
    pub nice: Option<i32>,
    /// Count latencies above these thresholds (e.g. ["100us"]).
    pub spikes_above: Option<Vec<Duration>>,
    /// -h / --histogram=N: per-microsecond latency histogram up to N us;
    /// latencies of N us and more are counted as overflows.
    pub histogram: Option<u32>,
    /// -D: run for this long, then the threads exit (default: the scenario's duration).
    pub duration: Option<Duration>,
    /// The cgroup the threads join: a `[[cgroup]]` path (or an intermediate one).
    pub cgroup: Option<String>,
    /// -l: number of cycles per thread, then it exits (default: unlimited).
    pub loops: Option<u64>,
    /// When the workload starts (default: at 0).
    pub start: Option<Duration>,
}

/// `kind = "hackbench"`: groups of senders and receivers over pipes or sockets.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HackbenchSpec {
    /// A name for results (default: the kind and its index).
    pub name: Option<String>,
    /// -g: groups (default 10).
    pub groups: Option<u32>,
    /// -f: file descriptors (senders and receivers) per group (default 20).
    pub fds: Option<u32>,
    /// -l: messages each sender sends to each receiver (default 100).
    pub loops: Option<u32>,
    /// "threads" (-T) or "process" (-P, default).
    pub mode: Option<String>,
    /// "pipe" (-p) or "socket" (default).
    pub ipc: Option<String>,
    /// -s: message size in bytes (default 100).
    pub datasize: Option<u64>,
    /// CPUs the tasks may run on (cpulist).
    pub cpus: Option<CpuList>,
    /// Nice value of the tasks.
    pub nice: Option<i32>,
    /// CPU cost of one write (default: the machine's `msg_write_pipe` or
    /// `msg_write_socket` plus the copy beyond 100 bytes).
    pub write_cost: Option<Duration>,
    /// CPU time a receiver spends per message (default: the machine's
    /// `msg_read_pipe` or `msg_read_socket` plus the copy beyond 100 bytes).
    pub read_cost: Option<Duration>,
    /// Bytes each thread refills after a migration (default 0: none).
    pub working_set: Option<u64>,
    /// When the workload starts (default: at 0).
    pub start: Option<Duration>,
}

impl Scenario {
    /// Reads a scenario file, applies `--set` overrides and validates it.
    pub fn load(path: &Path, sets: &[String]) -> Result<Scenario, ScenarioError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Io { file: file.clone(), source })?;
        Scenario::parse(&text, &file, sets)
    }

    /// Parses scenario `text` (named `file` in messages) and applies the `--set` overrides in order.
    pub fn parse(text: &str, file: &str, sets: &[String]) -> Result<Scenario, ScenarioError> {
        let mut value: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            let line = e.span().map(|s| text[..s.start].lines().count().max(1));
            ScenarioError::invalid(file, line, e.message().to_string())
        })?;
        for s in sets {
            apply_set(&mut value, s).map_err(|m| ScenarioError::invalid(file, None, format!("--set {s}: {m}")))?;
        }
        if !value.contains_key("duration") {
            return Err(ScenarioError::invalid(file, None, "duration: missing: give the simulated time, e.g. duration = \"10s\" (or --set duration=10s)"));
        }
        let de = toml::Value::Table(value);
        let scenario: Scenario = serde_path_to_error::deserialize(de).map_err(|e| {
            let mut path = e.path().to_string().replace("workload[", "workload.").replace(']', "");
            let msg = e.inner().message().to_string();
            let mut leaf = e.path().iter().next_back().map(|s| s.to_string()).unwrap_or_default();
            // An unknown key is reported at its parent; name the key itself.
            if let Some(rest) = msg.strip_prefix("unknown field `") {
                if let Some(key) = rest.split('`').next() {
                    leaf = key.to_string();
                    path = if path == "." || path.is_empty() { key.to_string() } else { format!("{path}.{key}") };
                }
            }
            let line = find_key_line(text, &leaf);
            ScenarioError::invalid(file, line, format!("{path}: {msg}"))
        })?;
        let base = Path::new(file).parent().map(Path::to_path_buf).unwrap_or_default();
        let mut scenario = scenario;
        scenario.source_text = text.to_string();
        for w in &mut scenario.workloads {
            if let WorkloadSpec::Rtapp(r) = w {
                r.base_dir = base.clone();
            }
        }
        if scenario.duration.0 == 0 {
            return Err(ScenarioError::invalid(file, find_key_line(text, "duration"), "duration: must be positive, e.g. \"10s\""));
        }
        Ok(scenario)
    }

    /// The line of `key` in the `idx`th `[[table]]` of the scenario (or of
    /// the table's header when the key is not written there).
    pub fn table_key_line(&self, table: &str, idx: usize, key: &str) -> Option<usize> {
        let header = format!("[[{table}]]");
        let mut seen = 0usize;
        let mut start = None;
        for (i, l) in self.source_text.lines().enumerate() {
            let t = l.trim();
            if t.starts_with('[') {
                if start.is_some() {
                    break;
                }
                if t == header {
                    if seen == idx {
                        start = Some(i + 1);
                    }
                    seen += 1;
                }
                continue;
            }
            if start.is_some() && t.starts_with(key) && t[key.len()..].trim_start().starts_with('=') {
                return Some(i + 1);
            }
        }
        start
    }

    /// The title results use: the scenario's name, else `file`'s stem.
    pub fn title(&self, file: &str) -> String {
        self.name.clone().unwrap_or_else(|| {
            Path::new(file).file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default()
        })
    }
}

fn find_key_line(text: &str, key: &str) -> Option<usize> {
    if key.is_empty() {
        return None;
    }
    text.lines().position(|l| {
        let l = l.trim_start();
        l.starts_with(key) && l[key.len()..].trim_start().starts_with('=')
    }).map(|i| i + 1)
}

/// A `--set PATH=VALUE` override that cannot be applied.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SetError {
    /// No `=` in the override.
    #[error("expected dotted.path=value")]
    NoValue,
    /// A path part under an array that is not a number.
    #[error("{part:?} is not an index into {array}")]
    NotAnIndex {
        /// The path part as written.
        part: String,
        /// The path of the array.
        array: String,
    },
    /// An index past the end of an array.
    #[error("index {index} out of range: {array} has {len} entries")]
    OutOfRange {
        /// The index given.
        index: usize,
        /// The path of the array.
        array: String,
        /// The array's length.
        len: usize,
    },
    /// A path that goes below a plain value.
    #[error("{path} is not a table")]
    NotATable {
        /// The path of the plain value.
        path: String,
    },
}

/// Applies "a.b.0.c=value"; the value is parsed as TOML, or taken as a string.
pub fn apply_set(root: &mut toml::Table, spec: &str) -> Result<(), SetError> {
    let (path, raw) = spec.split_once('=').ok_or(SetError::NoValue)?;
    let parts: Vec<&str> = path.trim().split('.').collect();
    let value: toml::Value = format!("v = {raw}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.trim().to_string()));
    let mut cur: &mut toml::Value = root.entry(parts[0].to_string()).or_insert_with(|| {
        toml::Value::Table(Default::default())
    });
    // Accept "workload.0" for the [[workload]] array.
    for (i, part) in parts.iter().enumerate().skip(1) {
        let last = i == parts.len() - 1;
        cur = match cur {
            toml::Value::Table(t) => {
                if last {
                    t.insert(part.to_string(), value);
                    return Ok(());
                }
                t.entry(part.to_string()).or_insert_with(|| toml::Value::Table(Default::default()))
            }
            toml::Value::Array(a) => {
                let idx: usize = part.parse().map_err(|_| SetError::NotAnIndex { part: part.to_string(), array: parts[..i].join(".") })?;
                let len = a.len();
                let slot = a.get_mut(idx).ok_or_else(|| SetError::OutOfRange { index: idx, array: parts[..i].join("."), len })?;
                if last {
                    *slot = value;
                    return Ok(());
                }
                slot
            }
            _ => return Err(SetError::NotATable { path: parts[..i].join(".") }),
        };
    }
    if parts.len() == 1 {
        root.insert(parts[0].to_string(), value);
    }
    Ok(())
}

/// A scheduling policy name that is not one of the modelled policies.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown policy {0:?}: expected other, batch, idle, ext, fifo or rr")]
pub struct PolicyError(pub String);

/// Parses a policy name (other, batch, idle, ext, fifo, rr).
pub fn parse_policy(s: &str) -> Result<Policy, PolicyError> {
    Policy::parse(s).ok_or_else(|| PolicyError(s.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "seed = 3\nduration = \"1s\"\n[machine]\npreset = \"4cpu\"\n[[workload]]\nkind = \"hog\"\ncount = 2\n";

    #[test]
    fn parses_and_overrides() {
        let s = Scenario::parse(BASE, "t.toml", &["workload.0.count=8".into(), "machine.preset=2cpu".into(), "seed=9".into()]).unwrap();
        assert_eq!(s.seed, 9);
        assert_eq!(s.machine.preset.as_deref(), Some("2cpu"));
        match &s.workloads[0] {
            WorkloadSpec::Hog(h) => assert_eq!(h.count, 8),
            _ => panic!(),
        }
    }

    #[test]
    fn errors_name_file_key_and_line() {
        let e = Scenario::parse(&BASE.replace("count = 2", "count = 2\nbogus = 1"), "t.toml", &[]).unwrap_err().to_string();
        assert!(e.starts_with("t.toml:8: workload.0.bogus: unknown field"), "{e}");
        assert!(e.contains("bogus"), "{e}");
        let e = Scenario::parse(&BASE.replace("\"1s\"", "\"1xs\""), "t.toml", &[]).unwrap_err().to_string();
        assert!(e.starts_with("t.toml:2: duration:") && e.contains("expected"), "{e}");
    }

    #[test]
    fn dists() {
        assert_eq!(parse_dist("5ms"), Ok(Dist::Const(5_000_000)));
        assert_eq!(parse_dist("exp:1us"), Ok(Dist::Exp(1000)));
        assert_eq!(parse_dist("uniform:1us..2us"), Ok(Dist::Uniform(1000, 2000)));
        assert!(parse_dist("uniform:3us..2us").is_err());
    }
}
