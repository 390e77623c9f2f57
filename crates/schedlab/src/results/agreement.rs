//! Real against simulated: the checks of a real run (`compare --real`) that
//! do not depend on the machine's speed. Under qemu's TCG emulation absolute
//! timings mean nothing, so what can agree is whether the scheduler loaded,
//! whether every task ran, whether affinity held, how CPU time was shared
//! between tasks under contention, how the scheduler exited, and the
//! scheduler's own counters (shown side by side, without a verdict: their
//! totals scale with the machine's speed).
//!
//! Both sides are results documents as JSON ([`crate::results::report::Results`]),
//! the simulated one and the real one the executor wrote (possibly inside a
//! guest kernel).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::machine::cpumask::CpuMask;
use crate::results::report::table;

/// Largest difference, in percentage points, between a task's real and
/// simulated share of its workload's CPU time that still counts as agreeing.
pub const SHARE_TOLERANCE_PP: f64 = 5.0;

/// What a real sched_ext run reported beyond the results document: the
/// sysfs state while loaded, the ops name, the exit its user-space exit info
/// recorded, and its own counters read from its .bss/.data maps.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RealScx {
    /// The ops name the kernel reported.
    pub name: String,
    /// /sys/kernel/sched_ext/state once loaded ("enabled").
    pub state: String,
    /// /sys/kernel/sched_ext/root/ops.
    pub ops: String,
    /// The loader attached it; a scheduler that misbehaves may have been
    /// ejected before its state could be read.
    pub attached: bool,
    /// sched_ext's state once detached.
    pub state_after_detach: String,
    /// scx_exit_kind name ("UNREG", "ERROR_BPF", ...), None when none was recorded.
    pub exit_kind: Option<String>,
    /// The exit reason as the kernel reported it.
    pub exit_reason: String,
    /// The exit message.
    pub exit_msg: String,
    /// The scheduler's own integer globals, by name.
    pub counters: BTreeMap<String, u64>,
}

/// One check: what each side showed and whether they agree.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Check {
    /// What is checked ("loaded", "tasks that ran", ...).
    pub what: &'static str,
    /// The real run's value.
    pub real: String,
    /// The simulation's value.
    pub sim: String,
    /// They agree within the check's tolerance.
    pub agree: bool,
}

/// A scheduler counter on both sides.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Counter {
    /// The global's name.
    pub name: String,
    /// Its value in the real run.
    pub real: Option<u64>,
    /// Its value in the simulation.
    pub sim: Option<u64>,
}

/// The checks of one variant.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Agreement {
    /// The variant's label.
    pub variant: String,
    /// Every check.
    pub checks: Vec<Check>,
    /// The scheduler's counters side by side.
    pub counters: Vec<Counter>,
}

impl Agreement {
    /// Every check agrees.
    pub fn agrees(&self) -> bool {
        self.checks.iter().all(|c| c.agree)
    }

    /// The checks that do not agree, one line each.
    pub fn disagreements(&self) -> Vec<String> {
        self.checks.iter().filter(|c| !c.agree).map(|c| format!("{}: real {} vs simulated {}", c.what, c.real, c.sim)).collect()
    }
}

fn tasks(r: &Value) -> &[Value] {
    r["tasks"].as_array().map_or(&[], Vec::as_slice)
}

fn runtime(t: &Value) -> u64 {
    t["runtime_ns"].as_u64().unwrap_or(0)
}

/// Tasks that ran at all, of all tasks.
fn ran(r: &Value) -> (usize, usize) {
    let t = tasks(r);
    (t.iter().filter(|t| runtime(t) > 0).count(), t.len())
}

/// Names of the tasks seen on a CPU outside their affinity.
fn affinity_violations(r: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let nr = r["nr_cpus"].as_u64().unwrap_or(1) as usize;
    for t in tasks(r) {
        let (Some(allowed), Some(seen)) = (t["cpus_allowed"].as_str(), t["ran_on"].as_str()) else { continue };
        let parse = |s: &str| if s.is_empty() { Ok(CpuMask::new(nr)) } else { CpuMask::parse_cpulist(s, nr) };
        match (parse(allowed), parse(seen)) {
            (Ok(a), Ok(s)) if s.is_subset_of(&a) => {}
            _ => out.push(format!("{} on {seen} (allowed {allowed})", t["name"].as_str().unwrap_or("?"))),
        }
    }
    out
}

/// Per task, its share of its workload's CPU time, for workloads whose
/// tasks share CPUs until the end (no makespan) and that have two or more
/// tasks: the shares the scheduler's fairness decides.
pub fn task_shares(r: &Value) -> BTreeMap<String, f64> {
    let mut by_workload: BTreeMap<&str, Vec<&Value>> = BTreeMap::new();
    for t in tasks(r) {
        by_workload.entry(t["workload"].as_str().unwrap_or("")).or_default().push(t);
    }
    let finite: Vec<&str> =
        r["workloads"].as_array().into_iter().flatten().filter(|w| w["makespan_ns"].is_u64()).filter_map(|w| w["name"].as_str()).collect();
    let mut out = BTreeMap::new();
    for (w, ts) in by_workload {
        let total: u64 = ts.iter().map(|t| runtime(t)).sum();
        if ts.len() < 2 || total == 0 || finite.contains(&w) {
            continue;
        }
        for t in ts {
            out.insert(t["name"].as_str().unwrap_or("?").to_string(), runtime(t) as f64 * 100.0 / total as f64);
        }
    }
    out
}

/// The sim's exit as the real run would report it: a scheduler still
/// enabled at the end of the simulation is unregistered from user space
/// (UNREG) when the real run detaches it.
fn sim_exit(sim: &Value) -> Option<String> {
    let x = &sim["sched_ext"];
    if !x.is_object() {
        return None;
    }
    Some(x["exit"]["kind"].as_str().unwrap_or("UNREG").to_string())
}

/// Compares a real run with the simulation of the same scenario on as many CPUs.
pub fn agreement(variant: &str, sim: &Value, real: &Value, scx: Option<&RealScx>) -> Agreement {
    let mut checks = Vec::new();
    if let Some(x) = scx {
        let sim_loaded = sim["sched_ext"].is_object() && !sim["sched_ext"]["exit"]["msg"].as_str().is_some_and(|m| m.starts_with("ops.init() failed"));
        let real_loaded = x.state == "enabled" || x.attached;
        let real = match (x.state.as_str(), x.ops.is_empty()) {
            ("enabled", false) => format!("enabled (ops {})", x.ops),
            ("enabled", true) => "enabled".into(),
            (st, _) if x.attached => format!("attached, {st} when read"),
            (st, _) => format!("not loaded ({st})"),
        };
        checks.push(Check { what: "loaded", real, sim: if sim_loaded { "enabled".into() } else { "not loaded".into() }, agree: real_loaded == sim_loaded });
    }
    let (rr, rn) = ran(real);
    let (sr, sn) = ran(sim);
    checks.push(Check { what: "tasks that ran", real: format!("{rr}/{rn}"), sim: format!("{sr}/{sn}"), agree: rr == sr && rn == sn });
    let (ra, sa) = (affinity_violations(real), affinity_violations(sim));
    let show = |v: &[String]| if v.is_empty() { "respected".to_string() } else { format!("{} outside: {}", v.len(), v.join(", ")) };
    checks.push(Check { what: "affinity", real: show(&ra), sim: show(&sa), agree: ra.is_empty() == sa.is_empty() });
    let (rs, ss) = (task_shares(real), task_shares(sim));
    if !rs.is_empty() {
        let mut worst: Option<(&String, f64, f64)> = None;
        for (name, r) in &rs {
            let s = ss.get(name).copied().unwrap_or(0.0);
            if worst.is_none_or(|w| (r - s).abs() > (w.1 - w.2).abs()) {
                worst = Some((name, *r, s));
            }
        }
        let (name, r, s) = worst.expect("non-empty");
        checks.push(Check {
            what: "CPU shares",
            real: format!("{name} {r:.1}%"),
            sim: format!("{s:.1}% (largest difference {:.1} pp)", (r - s).abs()),
            agree: (r - s).abs() <= SHARE_TOLERANCE_PP,
        });
    }
    let mut counters = Vec::new();
    if let Some(x) = scx {
        let real_kind = x.exit_kind.clone().unwrap_or_else(|| "none".into());
        let sim_kind = sim_exit(sim).unwrap_or_else(|| "none".into());
        checks.push(Check { what: "exit kind", real: real_kind.clone(), sim: sim_kind.clone(), agree: real_kind == sim_kind });
        let sim_counters: BTreeMap<String, u64> =
            sim["sched_ext"]["counters"].as_object().into_iter().flatten().filter_map(|(k, v)| v.as_u64().map(|v| (k.clone(), v))).collect();
        let mut names: Vec<&String> = x.counters.keys().chain(sim_counters.keys()).collect();
        names.sort();
        names.dedup();
        counters = names.into_iter().map(|n| Counter { name: n.clone(), real: x.counters.get(n).copied(), sim: sim_counters.get(n).copied() }).collect();
    }
    Agreement { variant: variant.to_string(), checks, counters }
}

/// The checks as a table (a row per variant and check), then the counters.
pub fn tables(all: &[Agreement]) -> String {
    let mut rows = vec![["variant", "check", "real", "simulated", ""].map(String::from).to_vec()];
    for a in all {
        for c in &a.checks {
            rows.push(vec![a.variant.clone(), c.what.to_string(), c.real.clone(), c.sim.clone(), if c.agree { "agree".into() } else { "DIFFER".into() }]);
        }
    }
    let mut out = format!("real vs simulated (speed-independent checks; CPU shares agree within {SHARE_TOLERANCE_PP} pp)\n");
    out.push_str(&table(&rows));
    if all.iter().any(|a| !a.counters.is_empty()) {
        let mut rows = vec![["variant", "scheduler counter", "real", "simulated", "real/sim"].map(String::from).to_vec()];
        for a in all {
            for c in &a.counters {
                let f = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
                let ratio = match (c.real, c.sim) {
                    (Some(r), Some(s)) if s > 0 => format!("{:.2}", r as f64 / s as f64),
                    _ => "-".into(),
                };
                rows.push(vec![a.variant.clone(), c.name.clone(), f(c.real), f(c.sim), ratio]);
            }
        }
        out.push_str("\nthe schedulers' own counters (.bss/.data globals; totals scale with the machine's speed)\n");
        out.push_str(&table(&rows));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(tasks: Value, scx: Value) -> Value {
        json!({
            "nr_cpus": 2,
            "workloads": [{"name": "hogs", "kind": "hog"}, {"name": "hb", "kind": "hackbench", "makespan_ns": 5}],
            "tasks": tasks,
            "sched_ext": scx,
        })
    }

    fn task(name: &str, w: &str, rt: u64, allowed: &str, ran_on: &str) -> Value {
        json!({"name": name, "workload": w, "runtime_ns": rt, "cpus_allowed": allowed, "ran_on": ran_on})
    }

    #[test]
    fn agreeing_runs_agree() {
        let sim = doc(json!([task("h0", "hogs", 753, "0", "0"), task("h1", "hogs", 247, "0", "0"), task("b", "hb", 9, "0-1", "0-1")]), json!({"exit": null, "counters": {"nr": 5}}));
        let real = doc(json!([task("h0", "hogs", 7600, "0", "0"), task("h1", "hogs", 2400, "0", "0"), task("b", "hb", 90, "0-1", "1")]), Value::Null);
        let scx = RealScx { state: "enabled".into(), ops: "x".into(), exit_kind: Some("UNREG".into()), counters: [("nr".to_string(), 50)].into(), ..Default::default() };
        let a = agreement("x", &sim, &real, Some(&scx));
        assert!(a.agrees(), "{:?}", a.disagreements());
        let what: Vec<&str> = a.checks.iter().map(|c| c.what).collect();
        assert_eq!(what, ["loaded", "tasks that ran", "affinity", "CPU shares", "exit kind"]);
        assert_eq!(a.counters, vec![Counter { name: "nr".into(), real: Some(50), sim: Some(5) }]);
        // The finishing workload (hackbench) is not a share comparison.
        assert!(a.checks[3].real.starts_with("h"));
    }

    #[test]
    fn each_difference_is_found() {
        let sim = doc(json!([task("h0", "hogs", 750, "0", "0"), task("h1", "hogs", 250, "0", "0")]), json!({"exit": {"kind": "ERROR_BPF", "msg": ""}}));
        // Real: h1 never ran, h0 escaped CPU 0, and the scheduler exited cleanly.
        let real = doc(json!([task("h0", "hogs", 1000, "0", "0-1"), task("h1", "hogs", 0, "0", "")]), Value::Null);
        let scx = RealScx { state: "enabled".into(), exit_kind: Some("UNREG".into()), ..Default::default() };
        let a = agreement("x", &sim, &real, Some(&scx));
        let differ: Vec<&str> = a.checks.iter().filter(|c| !c.agree).map(|c| c.what).collect();
        assert_eq!(differ, ["tasks that ran", "affinity", "CPU shares", "exit kind"]);
        assert!(tables(&[a]).contains("DIFFER"));
    }

    #[test]
    fn a_scheduler_that_failed_to_load() {
        let sim = doc(json!([]), json!({"exit": {"kind": "ERROR", "msg": "ops.init() failed (-12)"}}));
        let scx = RealScx { state: "disabled".into(), exit_kind: Some("ERROR".into()), ..Default::default() };
        let a = agreement("x", &sim, &doc(json!([]), Value::Null), Some(&scx));
        assert!(a.agrees(), "{:?}", a.disagreements());
    }
}
