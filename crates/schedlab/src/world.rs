//! Builds a simulator from a scenario: machine, costs, tunables, features
//! and workloads, with errors that name the scenario field to fix.

use crate::cost::CostModel;
use crate::features::{parse_switch, Feature, Features};
use crate::scenario::{Scenario, ScenarioError};
use crate::sim::{RtBandwidth, Sim, Tunables};
use crate::topology::Topology;

/// Scheduler kinds this build can simulate.
pub const SCHEDULERS: &[(&str, &str)] = &[("eevdf", "the fair class (EEVDF) with RT above it, as in Linux 6.6+")];

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
pub fn machine_of_size(n: usize) -> Result<Topology, String> {
    if n <= 16 || n % 8 != 0 {
        Topology::flat(n).map_err(|e| e.to_string())
    } else {
        Topology::uniform(&format!("{n}cpu"), 1, 1, n / 8, 8, 1).map_err(|e| e.to_string())
    }
}

/// Builds a ready-to-run simulator.
pub fn build(s: &Scenario, file: &str) -> Result<Sim, ScenarioError> {
    let bad = |msg: String| ScenarioError::invalid(file, None, msg);
    let topo = topology(s, file)?;
    if s.scheduler.kind != "eevdf" {
        let known: Vec<&str> = SCHEDULERS.iter().map(|s| s.0).collect();
        return Err(bad(format!("scheduler.kind: unknown scheduler {:?}: expected one of {}", s.scheduler.kind, known.join(", "))));
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
    let set = |dst: &mut u64, v: &Option<crate::scenario::Duration>| {
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
        tunables.rt_bandwidth = match b.as_str() {
            "fair_server" => RtBandwidth::FairServer,
            "throttle" => RtBandwidth::Throttle,
            "off" => RtBandwidth::Off,
            other => return Err(bad(format!("scheduler.rt_bandwidth: {other:?}: expected \"fair_server\", \"throttle\" or \"off\""))),
        };
    }
    if let Some(d) = s.scheduler.base_slice {
        if !(100_000..=100_000_000).contains(&d.0) {
            return Err(bad(format!("scheduler.base_slice: {} is outside 0.1ms..100ms", crate::time::fmt_ns(d.0))));
        }
        tunables.base_slice_normalized_ns = d.0;
    }
    if let Some(d) = s.scheduler.migration_cost {
        tunables.migration_cost_ns = d.0;
    }
    let mut features = Features::default();
    for (name, v) in &s.features {
        let f = Feature::from_name(name).ok_or_else(|| bad(format!("features.{name}: {}", crate::features::unknown_feature(name))))?;
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
            Some(crate::scenario::CpuList(l)) => crate::cpumask::CpuMask::parse_cpulist(l, n).map_err(|e| bad(format!("machine.irqoff.cpus: {e}")))?,
            None => crate::cpumask::CpuMask::full(n),
        };
        if irq.every.0.mean() == 0 {
            return Err(bad("machine.irqoff.every: the gap between windows must be positive".into()));
        }
        sim.irqoff = Some(crate::sim::IrqOffModel::new(irq.every.0.clone(), irq.length.0.clone(), cpus, s.seed));
    }
    for (i, w) in s.workloads.iter().enumerate() {
        crate::workload::build(&mut sim, i as u32, w).map_err(bad)?;
    }
    sim.check_invariants = cfg!(debug_assertions);
    Ok(sim)
}
