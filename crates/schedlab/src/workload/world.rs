//! Builds a simulator from a scenario: machine, costs, tunables, features
//! and workloads, with errors that name the scenario field to fix.
//!
//! A sched_ext scheduler (`scheduler.kind = "ext"`) is not loaded here: the
//! simulator runs one through [`ExtOps`], and compiling and loading a BPF C
//! scheduler is the hosting layer's job (the `schedlab-host` crate, above
//! this one). The builder asks the [`ExtLoader`] it is given for the
//! scheduler and then attaches it; [`build`] and [`build_on`] have none and
//! refuse such scenarios, `schedlab_host::world::build` passes the hosting
//! loader.

use std::rc::Rc;

use crate::machine::cost::CostModel;
use crate::sched::features::{parse_switch, Feature, Features};
use crate::workload::scenario::{Scenario, ScenarioError};
use crate::sched::rt::RtBandwidth;
use crate::sched::sim::Sim;
use crate::sched::Tunables;
use crate::machine::topology::{Topology, TopologyError};
use crate::sched::ext::ops::ExtOps;

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

/// Loads the sched_ext scheduler of a scenario (`scheduler.kind = "ext"`)
/// for the builder. The hosting layer (`schedlab_host::world::Hosting`)
/// implements it for BPF C schedulers; a caller with a scheduler of its own
/// (an [`ExtOps`] in Rust) can too.
pub trait ExtLoader {
    /// Loads the scheduler `s.scheduler` names for `sim`, which is built
    /// (tasks, cgroups) but not started, and does the loader's set-up on
    /// `sim`. The builder then attaches it (`scheduler.attach_at`,
    /// `detach_at`). Errors are the scenario's, naming the field to fix.
    fn load(&self, sim: &mut Sim, s: &Scenario, file: &str) -> Result<Rc<dyn ExtOps>, ScenarioError>;
}

/// The loader of [`build`] and [`build_on`]: none, so a sched_ext scenario
/// is refused.
struct NoLoader;

impl ExtLoader for NoLoader {
    fn load(&self, _sim: &mut Sim, _s: &Scenario, file: &str) -> Result<Rc<dyn ExtOps>, ScenarioError> {
        Err(ScenarioError::invalid(
            file,
            None,
            "scheduler.kind = \"ext\": this program cannot load sched_ext schedulers (build with schedlab_host::world::build, which hosts them)".to_string(),
        ))
    }
}

/// Builds a ready-to-run simulator for a scenario without a sched_ext
/// scheduler (see [`build_with`] for one with).
pub fn build(s: &Scenario, file: &str) -> Result<Sim, ScenarioError> {
    build_on(s, file, topology(s, file)?)
}

/// Builds the simulator for a scenario on a given machine (the scenario's
/// own `[machine]` table chooses only the costs then); no sched_ext
/// scheduler, as [`build`].
pub fn build_on(s: &Scenario, file: &str, topo: Topology) -> Result<Sim, ScenarioError> {
    build_with(s, file, topo, &NoLoader)
}

/// Builds the simulator for a scenario on a given machine, loading its
/// sched_ext scheduler, if it has one, with `ext`.
pub fn build_with(s: &Scenario, file: &str, topo: Topology, ext: &dyn ExtLoader) -> Result<Sim, ScenarioError> {
    let bad = |msg: String| ScenarioError::invalid(file, None, msg);
    let need = crate::workload::estimate::estimate(s, topo.nr_cpus());
    // Below 64 MiB no machine that runs schedlab lacks the memory, and
    // reading /proc/meminfo is a noticeable part of a small run's start.
    let big = need.bytes() >= 64 << 20;
    if let Some(avail) = big.then(crate::workload::estimate::available_bytes).flatten() {
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
    set(&mut costs.rq_lock_ns, &c.rq_lock);
    set(&mut costs.rq_detach_ns, &c.rq_detach);
    set(&mut costs.msg_write_pipe_ns, &c.msg_write_pipe);
    set(&mut costs.msg_read_pipe_ns, &c.msg_read_pipe);
    set(&mut costs.msg_write_socket_ns, &c.msg_write_socket);
    set(&mut costs.msg_read_socket_ns, &c.msg_read_socket);
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
    // The machine's kernel first, then the scenario's own switches.
    let mut features = Features::default();
    for (table, name, v) in s.machine.features.iter().map(|(n, v)| ("machine.features", n, v)).chain(s.features.iter().map(|(n, v)| ("features", n, v))) {
        let f = Feature::from_name(name).ok_or_else(|| bad(format!("{table}.{name}: {}", crate::sched::features::FeatureError::Unknown(name.to_string()))))?;
        let on = match v {
            toml::Value::Boolean(b) => *b,
            toml::Value::String(s) => parse_switch(s).ok_or_else(|| bad(format!("{table}.{name}: {s:?} is not a switch: expected true/false or \"on\"/\"off\"")))?,
            toml::Value::Integer(i) if *i == 0 || *i == 1 => *i == 1,
            other => return Err(bad(format!("{table}.{name}: {other} is not a switch: expected true or false"))),
        };
        features.set(f, on);
    }
    let mut sim = Sim::new(topo, costs, features, tunables, s.seed, s.duration.0);
    // The task table grows to its start-up size at once, instead of by
    // doubling copies of tasks of nearly a kilobyte each.
    sim.reserve_tasks(need.tasks.min(1 << 20) as usize);
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
    let links = crate::workload::replay::Links::new(&mut sim, &s.workloads).map_err(|e| bad(e.to_string()))?;
    for (i, w) in s.workloads.iter().enumerate() {
        crate::workload::build(&mut sim, i as u32, w, &links).map_err(|e| bad(e.to_string()))?;
    }
    crate::workload::cgroups::place_tasks(&mut sim, s, file)?;
    crate::workload::cgroups::build_writes(&mut sim, s, file)?;
    if s.scheduler.kind == "ext" {
        attach_ext(&mut sim, s, file, ext)?;
    }
    sim.check_invariants = cfg!(debug_assertions);
    Ok(sim)
}

/// Loads the scenario's sched_ext scheduler with `ext` and arranges for it
/// to be enabled at `attach_at` and unregistered at `detach_at`.
fn attach_ext(sim: &mut Sim, s: &Scenario, file: &str, ext: &dyn ExtLoader) -> Result<(), ScenarioError> {
    let bad = |msg: String| ScenarioError::invalid(file, None, msg);
    let spec = &s.scheduler;
    // Loading may already run the scheduler's programs on tasks.
    sim.scx_build_views();
    let ops = ext.load(sim, s, file)?;
    let name = spec.sched.as_deref().unwrap_or_default();
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
