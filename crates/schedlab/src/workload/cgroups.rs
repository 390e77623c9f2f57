//! A scenario's `[[cgroup]]` tables into the simulator's cgroup tree, and
//! the workloads' tasks into their cgroups, with errors that name the file,
//! the line and the field to fix.

use crate::engine::time::fmt_ns;
use crate::machine::cpumask::CpuMask;
use crate::sched::cgroup::{check_path, parse_max, shares_of_weight, CGROUP_WEIGHT_MAX, CGROUP_WEIGHT_MIN};
use crate::sched::sim::Sim;
use crate::sched::task::WEIGHT_IDLEPRIO;
use crate::workload::scenario::{CpuList, Scenario, ScenarioError, WorkloadSpec};

/// Creates the declared cgroups (and their implicit ancestors) with their
/// weight, cpu.max, cpuset and cpu.idle.
pub fn build_tree(sim: &mut Sim, s: &Scenario, file: &str) -> Result<(), ScenarioError> {
    let n = sim.nr_cpus();
    for (i, c) in s.cgroups.iter().enumerate() {
        let bad = |key: &str, msg: String| ScenarioError::invalid(file, s.table_key_line("cgroup", i, key), format!("cgroup.{i}.{key}: {msg}"));
        check_path(&c.path).map_err(|e| bad("path", e.to_string()))?;
        if c.path.trim_end_matches('/').is_empty() {
            return Err(bad("path", "the root cgroup \"/\" has no cpu.weight, cpu.max or cpuset to set: name a child such as \"/web\"".into()));
        }
        if let Some(g) = sim.cg.find(&c.path) {
            if sim.cg.groups[g as usize].declared {
                return Err(bad("path", format!("{:?} is declared twice: merge the two `[[cgroup]]` tables", c.path)));
            }
        }
        let weight = match c.weight {
            None => 100,
            Some(w) if (CGROUP_WEIGHT_MIN as i64..=CGROUP_WEIGHT_MAX as i64).contains(&w) => w as u32,
            Some(w) => return Err(bad("weight", format!("{w} is out of range: cpu.weight takes 1..10000 (100 is the default)"))),
        };
        let mut max = match &c.max {
            None => Default::default(),
            Some(m) => parse_max(m).map_err(|e| bad("max", e.to_string()))?,
        };
        if let Some(b) = c.burst {
            match max.quota_ns {
                Some(q) if b.0 <= q => max.burst_ns = b.0,
                Some(q) => return Err(bad("burst", format!("{} is above the quota {}: cpu.max.burst takes 0..quota (the kernel refuses more with EINVAL)", fmt_ns(b.0), fmt_ns(q)))),
                None => return Err(bad("burst", "cpu.max.burst needs a quota: give max = \"QUOTA PERIOD\" too".into())),
            }
        }
        let cpus = match &c.cpus {
            None => None,
            Some(CpuList(l)) => {
                let m = CpuMask::parse_cpulist(l, n).map_err(|e| bad("cpus", format!("{e} (the machine has CPUs 0-{})", n - 1)))?;
                if m.is_empty() {
                    return Err(bad("cpus", "the CPU list is empty: leave cpus out to use the parent's".into()));
                }
                Some(m)
            }
        };
        let g = sim.cg.mkdir(&c.path);
        let tg = &mut sim.cg.groups[g as usize];
        tg.declared = true;
        tg.weight = weight;
        tg.idle = c.idle.unwrap_or(false);
        tg.shares = if tg.idle { WEIGHT_IDLEPRIO as u64 } else { shares_of_weight(weight) };
        tg.cpus = cpus;
        if max.quota_ns.is_some() {
            sim.tg_set_cfs_bandwidth(g, max);
        } else {
            sim.cg.groups[g as usize].max = max;
        }
    }
    sim.cg.update_effective_cpus();
    Ok(())
}

/// Puts every task into its workload's cgroup (cgroup.procs), restricting
/// its affinity to the cgroup's CPUs. A path no `[[cgroup]]` table creates is
/// an error, except rt-app's taskgroups, which rt-app creates itself; a
/// cpuset that leaves a task no CPU is refused, as the kernel refuses such
/// an affinity (EINVAL).
pub fn place_tasks(sim: &mut Sim, s: &Scenario, file: &str) -> Result<(), ScenarioError> {
    let n = sim.nr_cpus();
    for p in 0..sim.tasks.len() {
        // Most tasks stay in the root: test before copying the path.
        if sim.tasks[p].cgroup == "/" {
            continue;
        }
        let path = sim.tasks[p].cgroup.clone();
        let w = sim.tasks[p].workload as usize;
        let spec = s.workloads.get(w);
        let g = match sim.cg.find(&path) {
            Some(g) => g,
            None if matches!(spec, Some(WorkloadSpec::Rtapp(_))) => sim.cg.mkdir(&path),
            None => {
                let known: Vec<&str> = sim.cg.groups.iter().skip(1).map(|g| g.path.as_str()).collect();
                let fix = if known.is_empty() {
                    format!("declare it with a `[[cgroup]]` table (path = {path:?})")
                } else {
                    format!("declare it with a `[[cgroup]]` table or use one of {}", known.join(", "))
                };
                return Err(ScenarioError::invalid(
                    file,
                    s.table_key_line("workload", w, "cgroup"),
                    format!("workload.{w}.cgroup: unknown cgroup path {path:?}: {fix}"),
                ));
            }
        };
        let eff = sim.cg.groups[g as usize].effective_cpus.clone();
        let mask = sim.tasks[p].cpus_allowed.and(&eff);
        if mask.is_empty() {
            let decl = declaring(sim, s, g);
            let line = decl.and_then(|i| s.table_key_line("cgroup", i, "cpus"));
            let field = decl.map_or_else(|| format!("workload.{w}.cpus"), |i| format!("cgroup.{i}.cpus"));
            return Err(ScenarioError::invalid(
                file,
                line,
                format!(
                    "{field}: cgroup {path:?} runs on CPUs {} but workload.{w}'s tasks may only use {}: the kernel refuses an affinity outside the cpuset (EINVAL); give the cgroup or the workload CPUs in common",
                    eff.to_cpulist(),
                    sim.tasks[p].cpus_allowed.to_cpulist()
                ),
            ));
        }
        debug_assert_eq!(mask.nr_bits(), n);
        let t = &mut sim.tasks[p];
        t.cgrp = g;
        t.cgroup = sim.cg.groups[g as usize].path.clone();
        t.nr_cpus_allowed = mask.weight() as u32;
        t.cpus_allowed = mask;
    }
    Ok(())
}

/// The `[[cgroup_write]]` tables, checked as the kernel checks the writes
/// (weight range, cpu.max syntax, a cpuset the moved tasks can run in) and
/// resolved to groups and workloads, for the run to apply at their times.
pub fn build_writes(sim: &mut Sim, s: &Scenario, file: &str) -> Result<(), ScenarioError> {
    for (i, c) in s.cgroup_writes.iter().enumerate() {
        let bad = |key: &str, msg: String| ScenarioError::invalid(file, s.table_key_line("cgroup_write", i, key), format!("cgroup_write.{i}.{key}: {msg}"));
        if c.at.0 >= s.duration.0 {
            return Err(bad("at", format!("{} is not before the end of the run ({}): the write would never happen", fmt_ns(c.at.0), fmt_ns(s.duration.0))));
        }
        check_path(&c.path).map_err(|e| bad("path", e.to_string()))?;
        let group = match sim.cg.find(&c.path) {
            Some(0) => return Err(bad("path", "the root cgroup has no cpu.weight, cpu.max or cpu.idle, and its cgroup.procs is not modelled: name a `[[cgroup]]`".into())),
            Some(g) => g,
            None => {
                let known: Vec<&str> = sim.cg.groups.iter().skip(1).map(|g| g.path.as_str()).collect();
                return Err(bad("path", format!("unknown cgroup path {:?}: a write needs an existing cgroup ({})", c.path, if known.is_empty() { "declare one with a `[[cgroup]]` table".to_string() } else { known.join(", ") })));
            }
        };
        let weight = match c.weight {
            None => None,
            Some(w) if (CGROUP_WEIGHT_MIN as i64..=CGROUP_WEIGHT_MAX as i64).contains(&w) => Some(w as u32),
            Some(w) => return Err(bad("weight", format!("{w} is out of range: cpu.weight takes 1..10000"))),
        };
        let max = c.max.as_deref().map(parse_max).transpose().map_err(|e| bad("max", e.to_string()))?;
        let procs = match &c.procs {
            None => None,
            Some(name) => {
                let names: Vec<&str> = sim.metrics.iter().map(|m| m.name.as_str()).collect();
                let w = names.iter().position(|n| n == name).ok_or_else(|| bad("procs", format!("no workload is named {name:?}: expected one of {}", names.iter().map(|n| format!("{n:?}")).collect::<Vec<_>>().join(", "))))?;
                let eff = &sim.cg.groups[group as usize].effective_cpus;
                if let Some(t) = sim.tasks.iter().find(|t| t.workload as usize == w && t.cpus_allowed.and(eff).is_empty()) {
                    return Err(bad(
                        "procs",
                        format!("cgroup {:?} runs on CPUs {} but {} may only use {}: the kernel refuses the move (EINVAL)", c.path, eff.to_cpulist(), t.name, t.cpus_allowed.to_cpulist()),
                    ));
                }
                Some(w as u32)
            }
        };
        if weight.is_none() && max.is_none() && c.idle.is_none() && procs.is_none() {
            return Err(bad("path", "the write changes nothing: give weight, max, idle or procs".into()));
        }
        sim.cg.writes.push(crate::sched::cgroup::CgroupWrite { at: c.at.0, group, weight, max, idle: c.idle, procs });
    }
    Ok(())
}

/// The `[[cgroup]]` table whose cpuset a group's effective CPUs come from.
fn declaring(sim: &Sim, s: &Scenario, g: u32) -> Option<usize> {
    let mut g = Some(g);
    while let Some(x) = g {
        let tg = &sim.cg.groups[x as usize];
        if tg.cpus.is_some() {
            return s.cgroups.iter().position(|c| crate::sched::cgroup::normalize(&c.path) == tg.path);
        }
        g = tg.parent;
    }
    None
}
