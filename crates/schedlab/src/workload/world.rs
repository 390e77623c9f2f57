//! Builds a simulator from a scenario: machine, costs, tunables, features
//! and workloads, with errors that name the scenario field to fix.

use crate::machine::cost::CostModel;
use crate::sched::features::{parse_switch, Feature, Features};
use crate::workload::scenario::{Scenario, ScenarioError};
use crate::sched::rt::RtBandwidth;
use crate::sched::sim::Sim;
use crate::sched::Tunables;
use crate::machine::topology::{Topology, TopologyError};
use std::path::{Path, PathBuf};

/// Scheduler kinds this build can simulate.
pub const SCHEDULERS: &[(&str, &str)] = &[
    ("eevdf", "the fair class (EEVDF) with RT above it, as in Linux 6.6+"),
    ("ext", "a sched_ext scheduler (scheduler.sched: a shipped name or a .bpf.c path) below RT"),
];

/// Resolves the machine section to a topology.
pub fn topology(s: &Scenario, file: &str) -> Result<Topology, ScenarioError> {
    let m = &s.machine;
    let given = [m.preset.is_some(), m.cpus.is_some(), m.sysfs.is_some(), m.lscpu.is_some()].iter().filter(|&&b| b).count();
    let bad = |msg: String| ScenarioError::invalid(file, None, msg);
    if given > 1 {
        return Err(bad("machine: give one of preset, cpus, sysfs or lscpu".into()));
    }
    let base = std::path::Path::new(file).parent().unwrap_or(std::path::Path::new("."));
    if let Some(p) = &m.sysfs {
        return Topology::from_sysfs(&base.join(p)).map_err(|e| bad(format!("machine.sysfs: {e}")));
    }
    if let Some(p) = &m.lscpu {
        let path = base.join(p);
        let text = std::fs::read_to_string(&path).map_err(|e| bad(format!("machine.lscpu: cannot read {}: {e}", path.display())))?;
        return Topology::from_lscpu(&text).map_err(|e| bad(format!("machine.lscpu: {e}")));
    }
    let empty = |o: &Option<std::path::PathBuf>| o.as_ref().is_some_and(|p| p.as_os_str().is_empty());
    if empty(&m.sysfs) || empty(&m.lscpu) {
        return Err(bad("machine: sysfs / lscpu need a path".into()));
    }
    if let Some(n) = m.cpus {
        return machine_of_size(n).map_err(|e| bad(format!("machine.cpus: {e}")));
    }
    let preset = m.preset.as_deref().unwrap_or("4cpu");
    Topology::preset(preset).map_err(|e| bad(format!("machine.preset: {e}")))
}

/// `--machine N`: one LLC up to 16 CPUs; beyond that, LLCs of 8 CPUs.
pub fn machine_of_size(n: usize) -> Result<Topology, TopologyError> {
    if n <= 16 || n % 8 != 0 {
        Topology::flat(n)
    } else {
        Topology::uniform(&format!("{n}cpu"), 1, 1, n / 8, 8, 1)
    }
}

/// Builds a ready-to-run simulator.
pub fn build(s: &Scenario, file: &str) -> Result<Sim, ScenarioError> {
    build_on(s, file, topology(s, file)?)
}

/// Builds the simulator for a scenario on a given machine (the scenario's
/// own `[machine]` table chooses only the costs then).
pub fn build_on(s: &Scenario, file: &str, topo: Topology) -> Result<Sim, ScenarioError> {
    let bad = |msg: String| ScenarioError::invalid(file, None, msg);
    let need = crate::workload::estimate::estimate(s, topo.nr_cpus());
    if let Some(avail) = crate::workload::estimate::available_bytes() {
        if need.bytes() > avail {
            use crate::workload::estimate::{fmt_bytes, CPU_BYTES, TASK_BYTES};
            return Err(bad(format!(
                "workload: this scenario needs about {} of memory ({} tasks x {} + {} CPUs x {} and more per CPU pair), more than the {} available here: reduce the workloads' task counts or the machine",
                fmt_bytes(need.bytes()),
                need.tasks,
                fmt_bytes(TASK_BYTES),
                need.cpus,
                fmt_bytes(CPU_BYTES),
                fmt_bytes(avail)
            )));
        }
    }
    if !SCHEDULERS.iter().any(|k| k.0 == s.scheduler.kind) {
        let known: Vec<&str> = SCHEDULERS.iter().map(|s| s.0).collect();
        return Err(bad(format!("scheduler.kind: unknown scheduler {:?}: expected one of {}", s.scheduler.kind, known.join(", "))));
    }
    let sc = &s.scheduler;
    if sc.kind != "ext" && (sc.sched.is_some() || !sc.options.is_empty() || !sc.ops_flags.is_empty() || sc.profile.is_some() || sc.args.is_some()) {
        return Err(bad("scheduler.sched/options/ops_flags/profile/args: these configure a sched_ext scheduler: set scheduler.kind = \"ext\"".into()));
    }
    let mut costs = CostModel::default();
    if let Some(hz) = s.machine.hz {
        if !(100..=10_000).contains(&hz) {
            return Err(bad(format!("machine.hz: {hz} is not a tick rate: expected 100, 250, 300 or 1000")));
        }
        costs.hz = hz;
    }
    if s.machine.cstates == Some(false) {
        costs.cstates_off();
    }
    let c = &s.machine.costs;
    let set = |dst: &mut u64, v: &Option<crate::workload::scenario::Duration>| {
        if let Some(d) = v {
            *dst = d.0;
        }
    };
    set(&mut costs.context_switch_ns, &c.context_switch);
    set(&mut costs.ipi_ns, &c.ipi);
    set(&mut costs.wakeup_ns, &c.wakeup);
    set(&mut costs.timer_slack_ns, &c.timer_slack);
    set(&mut costs.scan_cpu_ns, &c.scan_cpu);
    set(&mut costs.migrate_task_ns, &c.migrate_task);
    set(&mut costs.mm_switch_ns, &c.mm_switch);
    set(&mut costs.xllc_msg_ns, &c.xllc_msg);
    let mut tunables = Tunables::default();
    if let Some(b) = &s.scheduler.rt_bandwidth {
        tunables.rt.rt_bandwidth = match b.as_str() {
            "fair_server" => RtBandwidth::FairServer,
            "throttle" => RtBandwidth::Throttle,
            "off" => RtBandwidth::Off,
            other => return Err(bad(format!("scheduler.rt_bandwidth: {other:?}: expected \"fair_server\", \"throttle\" or \"off\""))),
        };
    }
    if let Some(d) = s.scheduler.base_slice {
        if !(100_000..=100_000_000).contains(&d.0) {
            return Err(bad(format!("scheduler.base_slice: {} is outside 0.1ms..100ms", crate::engine::time::fmt_ns(d.0))));
        }
        tunables.fair.base_slice_normalized_ns = d.0;
    }
    if let Some(d) = s.scheduler.migration_cost {
        tunables.fair.migration_cost_ns = d.0;
    }
    let mut features = Features::default();
    for (name, v) in &s.features {
        let f = Feature::from_name(name).ok_or_else(|| bad(format!("features.{name}: {}", crate::sched::features::FeatureError::Unknown(name.to_string()))))?;
        let on = match v {
            toml::Value::Boolean(b) => *b,
            toml::Value::String(s) => parse_switch(s).ok_or_else(|| bad(format!("features.{name}: {s:?} is not a switch: expected true/false or \"on\"/\"off\"")))?,
            toml::Value::Integer(i) if *i == 0 || *i == 1 => *i == 1,
            other => return Err(bad(format!("features.{name}: {other} is not a switch: expected true or false"))),
        };
        features.set(f, on);
    }
    let mut sim = Sim::new(topo, costs, features, tunables, s.seed, s.duration.0);
    if let Some(irq) = &s.machine.irqoff {
        let n = sim.nr_cpus();
        let cpus = match &irq.cpus {
            Some(crate::workload::scenario::CpuList(l)) => crate::machine::cpumask::CpuMask::parse_cpulist(l, n).map_err(|e| bad(format!("machine.irqoff.cpus: {e}")))?,
            None => crate::machine::cpumask::CpuMask::full(n),
        };
        if irq.every.0.mean() == 0 {
            return Err(bad("machine.irqoff.every: the gap between windows must be positive".into()));
        }
        sim.irqoff = Some(crate::machine::irqoff::IrqOffModel::new(irq.every.0, irq.length.0, cpus, s.seed));
    }
    crate::workload::cgroups::build_tree(&mut sim, s, file)?;
    for (i, w) in s.workloads.iter().enumerate() {
        crate::workload::build(&mut sim, i as u32, w).map_err(|e| bad(e.to_string()))?;
    }
    crate::workload::cgroups::place_tasks(&mut sim, s, file)?;
    crate::workload::cgroups::build_writes(&mut sim, s, file)?;
    if s.scheduler.kind == "ext" {
        attach_ext(&mut sim, s, file)?;
    }
    sim.check_invariants = cfg!(debug_assertions);
    Ok(sim)
}

/// A sched_ext scheduler source or include directory that cannot be found.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The shipped scheduler cannot be written to the cache.
    #[error("{}: {err}", dir.display())]
    Cache {
        /// The cache directory.
        dir: PathBuf,
        /// The I/O error.
        err: std::io::Error,
    },
    /// A published crate that cannot be fetched.
    #[error(transparent)]
    Fetch(#[from] crate::sched::ext::host::fetch::FetchError),
    /// A scheduler directory without one main `.bpf.c`.
    #[error(transparent)]
    Dir(#[from] crate::sched::ext::host::source::ResolveError),
    /// A name that is no shipped scheduler, crate or path.
    #[error("no scheduler {name:?}: expected a shipped one ({shipped}), crate:NAME[@VERSION] (e.g. crate:scx_bpfland), or the path of a .bpf.c file or a scheduler's directory")]
    Unknown {
        /// The name given.
        name: String,
        /// The shipped schedulers, comma-separated.
        shipped: String,
    },
    /// A `scheduler.include` entry that is not a directory.
    #[error("scheduler.include: {0:?} is not a directory (relative paths are taken from the scenario's directory)")]
    NotADirectory(String),
}

/// The path of the scheduler a scenario names: a shipped one, a published
/// crate (`crate:NAME[@VERSION]`, fetched into the cache once), or a
/// `.bpf.c` file or scheduler directory relative to the scenario.
pub fn ext_source(name: &str, scenario_file: &str) -> Result<PathBuf, SourceError> {
    let cache = crate::sched::ext::host::compile::cache_dir();
    if let Some(p) = crate::sched::ext::shipped::materialize(name, &cache).map_err(|err| SourceError::Cache { dir: cache.clone(), err })? {
        return Ok(p);
    }
    if name.starts_with("crate:") {
        let root = crate::sched::ext::host::fetch::fetch(name, &cache)?;
        return Ok(root.join("src/bpf/main.bpf.c"));
    }
    let direct = PathBuf::from(name);
    let rel = Path::new(scenario_file).parent().map(|d| d.join(name)).unwrap_or_else(|| direct.clone());
    for cand in [rel, direct] {
        if cand.is_file() {
            return Ok(cand);
        }
        if cand.is_dir() {
            return crate::sched::ext::host::source::main_of_dir(&cand).map_err(SourceError::Dir);
        }
    }
    let names: Vec<&str> = crate::sched::ext::shipped::SHIPPED.iter().map(|s| s.0).collect();
    Err(SourceError::Unknown { name: name.to_string(), shipped: names.join(", ") })
}

/// `scheduler.include` directories, relative to the scenario file (an
/// absolute path, or one that exists from the current directory, as is).
pub fn ext_includes(dirs: &[String], scenario_file: &str) -> Result<Vec<PathBuf>, SourceError> {
    dirs.iter()
        .map(|d| {
            let direct = PathBuf::from(d);
            let rel = Path::new(scenario_file).parent().map(|p| p.join(d)).unwrap_or_else(|| direct.clone());
            [rel, direct]
                .into_iter()
                .find(|c| c.is_dir())
                .ok_or_else(|| SourceError::NotADirectory(d.clone()))
        })
        .collect()
}

/// The loader profile a scenario's scheduler uses (`scheduler.profile`,
/// else the shipped one of the scheduler it names), resolved for the
/// machine with `scheduler.args`; None without a profile.
pub fn loader_plan(
    spec: &crate::workload::scenario::SchedulerSpec,
    name: &str,
    source: &Path,
    topo: &Topology,
    file: &str,
) -> Result<Option<crate::sched::ext::profile::Plan>, ScenarioError> {
    use crate::sched::ext::profile::{self, args, resolve, Machine, Profile};
    let bad = |msg: String| ScenarioError::invalid(file, None, msg);
    let prof = match spec.profile.as_deref() {
        Some("none") => None,
        Some(p) => {
            let rel = Path::new(file).parent().map(|d| d.join(p)).filter(|c| c.is_file()).unwrap_or_else(|| PathBuf::from(p));
            Some(Profile::load(&rel).map_err(|e| bad(format!("scheduler.profile: {e}")))?)
        }
        None => profile::scheduler_of(name, source).and_then(|(s, _)| profile::shipped(&s)),
    };
    let argv = args::split_words(spec.args.as_deref().unwrap_or("")).map_err(|e| bad(format!("scheduler.args: {e}")))?;
    let Some(prof) = prof else {
        if !argv.is_empty() {
            return Err(bad(format!(
                "scheduler.args: {name} has no loader profile to read its flags with; give one with scheduler.profile (--sched-profile FILE)"
            )));
        }
        return Ok(None);
    };
    let plan = resolve::resolve(&prof, &Machine::new(topo), &argv).map_err(|e| bad(format!("scheduler.profile: {e}")))?;
    Ok(Some(plan))
}

/// A rodata value as text, for the loader's parser.
fn option_text(v: &toml::Value) -> Option<String> {
    match v {
        toml::Value::Boolean(b) => Some(b.to_string()),
        toml::Value::Integer(i) => Some(i.to_string()),
        toml::Value::String(s) => Some(s.clone()),
        _ => None,
    }
}

/// Compiles and loads the scenario's sched_ext scheduler and arranges for it
/// to be enabled at `attach_at` and unregistered at `detach_at`.
fn attach_ext(sim: &mut Sim, s: &Scenario, file: &str) -> Result<(), ScenarioError> {
    let bad = |msg: String| ScenarioError::invalid(file, None, msg);
    let spec = &s.scheduler;
    let name = spec.sched.as_deref().ok_or_else(|| {
        let names: Vec<&str> = crate::sched::ext::shipped::SHIPPED.iter().map(|s| s.0).collect();
        bad(format!("scheduler.sched: missing: name a shipped scheduler ({}) or a .bpf.c file", names.join(", ")))
    })?;
    let path = ext_source(name, file).map_err(|e| bad(format!("scheduler.sched: {e}")))?;
    let mut cfg = crate::sched::ext::host::LoadConfig::default();
    let mut options = Vec::new();
    for (k, v) in &spec.options {
        let text = option_text(v).ok_or_else(|| bad(format!("scheduler.options.{k}: {v} is not a number, boolean or string")))?;
        options.push((k.clone(), text));
    }
    cfg.ops_flags = spec.ops_flags.clone();
    let plan = loader_plan(spec, name, &path, &sim.topo, file)?;
    if let Some(p) = &plan {
        crate::sched::ext::profile::apply::load_config(p, &mut cfg);
    }
    cfg.includes = ext_includes(&spec.include, file).map_err(|e| bad(e.to_string()))?;
    cfg.op_timeout_ns = spec.op_timeout.map(|d| d.0);
    let ops = crate::sched::ext::host::load(&path, &cfg).map_err(|e| bad(format!("scheduler.sched {name}: {e}")))?;
    sim.scx.origin = ops.origin().cloned();
    // The loader's set-up first, then the scenario's own options on top
    // (as --sched-set overrides what the loader chose).
    if let Some(p) = &plan {
        crate::sched::ext::profile::apply::before_attach(&ops, sim, p).map_err(|e| bad(format!("scheduler.profile ({name}): {e}")))?;
    }
    for (k, v) in &options {
        ops.set_rodata(k, v).map_err(|e| bad(format!("scheduler.options.{k}: {e}")))?;
    }
    if let Some(d) = spec.bypass_lb_interval {
        sim.scx.bypass_lb_intv_ns = d.0;
    }
    let at = spec.attach_at.map_or(0, |d| d.0);
    if at == 0 {
        sim.scx_enable(ops).map_err(|e| bad(format!("scheduler.sched {name}: the kernel refused to load it: {e}")))?;
    } else {
        sim.scx_pending = Some(ops);
        sim.engine.schedule(at, crate::engine::Event::ScxAttach);
    }
    if let Some(d) = spec.detach_at {
        if d.0 <= at {
            return Err(bad(format!("scheduler.detach_at: {} is not after attach_at", crate::engine::time::fmt_ns(d.0))));
        }
        sim.engine.schedule(d.0, crate::engine::Event::ScxDetach);
    }
    Ok(())
}
