//! How far a simulation is from the real kernel, in figures (`schedlab
//! agree`): per scenario and workload, the real and simulated wakeup latency
//! (p50 / p99 / max), makespan and CPU shares, and the error of each.
//!
//! [`crate::results::agreement`] asks whether a real run and its simulation
//! behave alike (loaded, every task ran, affinity held); this module asks how
//! close the numbers are. Both sides are results documents as JSON, the real
//! one as the executor wrote it (possibly inside a guest kernel).
//!
//! The goals are those of the fidelity work: medians (latency p50 and
//! makespan) within [`MEDIAN_GOAL_PCT`] of the real figure, CPU shares within
//! [`SHARE_GOAL_PP`] percentage points.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::engine::time::fmt_ns;
use crate::results::agreement::task_shares;
use crate::results::report::table;

/// Largest relative error of a median (latency p50, makespan), in percent of
/// the real figure, that meets the goal.
pub const MEDIAN_GOAL_PCT: f64 = 20.0;

/// Largest difference of a CPU share, in percentage points, that meets the goal.
pub const SHARE_GOAL_PP: f64 = 2.0;

/// One figure on both sides, in nanoseconds, and the simulation's error
/// relative to the real figure.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Figure {
    /// The real run's value.
    pub real_ns: u64,
    /// The simulation's value.
    pub sim_ns: u64,
    /// (sim - real) / real, in percent; None when the real value is 0.
    pub err_pct: Option<f64>,
}

impl Figure {
    fn new(real_ns: u64, sim_ns: u64) -> Figure {
        let err_pct = (real_ns > 0).then(|| (sim_ns as f64 - real_ns as f64) * 100.0 / real_ns as f64);
        Figure { real_ns, sim_ns, err_pct }
    }

    fn of(real: &Value, sim: &Value) -> Option<Figure> {
        Some(Figure::new(real.as_u64()?, sim.as_u64()?))
    }

    /// "real / sim (+err%)".
    fn cell(f: Option<&Figure>) -> String {
        match f {
            None => "-".into(),
            Some(f) => format!("{} / {} ({})", fmt_ns(f.real_ns), fmt_ns(f.sim_ns), f.err_pct.map_or("-".into(), |e| format!("{e:+.0}%"))),
        }
    }
}

/// One workload of a scenario, real against simulated.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WorkloadFigures {
    /// The workload's name.
    pub workload: String,
    /// Wakeup latency, median.
    pub p50: Option<Figure>,
    /// Wakeup latency, 99th percentile.
    pub p99: Option<Figure>,
    /// Wakeup latency, largest.
    pub max: Option<Figure>,
    /// Time to finish the workload's work, when it finishes.
    pub makespan: Option<Figure>,
    /// The workload's share of the CPU time all the scenario's tasks got
    /// (percent), real.
    pub share_real_pct: f64,
    /// The same, simulated.
    pub share_sim_pct: f64,
}

/// A scenario's comparison, or why it has none.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ScenarioFigures {
    /// The scenario's file.
    pub scenario: String,
    /// "measured", "skipped" (does not fit this machine) or "failed".
    pub status: String,
    /// Why it was skipped or failed; empty when measured.
    pub reason: String,
    /// Per workload, in the scenario's order.
    pub workloads: Vec<WorkloadFigures>,
    /// The largest difference of a task's share of its workload's CPU time
    /// (workloads of two or more tasks sharing CPUs to the end), in points.
    pub task_share_err_pp: Option<f64>,
    /// The largest relative error of a median (latency p50, makespan), in percent.
    pub worst_median_err_pct: Option<f64>,
    /// The largest difference of a share (workload or task), in points.
    pub worst_share_err_pp: Option<f64>,
    /// Medians within [`MEDIAN_GOAL_PCT`] and shares within [`SHARE_GOAL_PP`].
    pub meets_goal: bool,
    /// What the real run's executor noted (other load on its CPUs, tasks
    /// set up late, ...): reasons to doubt its figures.
    pub notes: Vec<String>,
}

impl ScenarioFigures {
    /// A scenario that was not compared, and why.
    pub fn not_measured(scenario: &str, status: &str, reason: &str) -> ScenarioFigures {
        ScenarioFigures {
            scenario: scenario.into(),
            status: status.into(),
            reason: reason.into(),
            workloads: Vec::new(),
            task_share_err_pp: None,
            worst_median_err_pct: None,
            worst_share_err_pp: None,
            meets_goal: false,
            notes: Vec::new(),
        }
    }

    /// What misses the goal, one phrase each ("mixed p50 +45%").
    pub fn misses(&self) -> Vec<String> {
        let mut out = Vec::new();
        for w in &self.workloads {
            for (what, f) in [("p50", &w.p50), ("makespan", &w.makespan)] {
                if let Some(e) = f.as_ref().and_then(|f| f.err_pct).filter(|e| e.abs() > MEDIAN_GOAL_PCT) {
                    out.push(format!("{} {what} {e:+.0}%", w.workload));
                }
            }
            let d = w.share_sim_pct - w.share_real_pct;
            if d.abs() > SHARE_GOAL_PP {
                out.push(format!("{} share {d:+.1} pp", w.workload));
            }
        }
        if let Some(e) = self.task_share_err_pp.filter(|e| *e > SHARE_GOAL_PP) {
            out.push(format!("task shares {e:.1} pp"));
        }
        out
    }
}

fn workloads(r: &Value) -> &[Value] {
    r["workloads"].as_array().map_or(&[], Vec::as_slice)
}

/// Each workload's share of the CPU time the scenario's tasks got.
fn workload_shares(r: &Value) -> BTreeMap<String, f64> {
    let total: u64 = workloads(r).iter().filter_map(|w| w["runtime_ns"].as_u64()).sum();
    workloads(r)
        .iter()
        .map(|w| {
            let rt = w["runtime_ns"].as_u64().unwrap_or(0);
            (w["name"].as_str().unwrap_or("?").to_string(), if total == 0 { 0.0 } else { rt as f64 * 100.0 / total as f64 })
        })
        .collect()
}

/// Compares the real results of `scenario` with its simulation.
pub fn compare(scenario: &str, real: &Value, sim: &Value) -> ScenarioFigures {
    let (rs, ss) = (workload_shares(real), workload_shares(sim));
    let mut out = Vec::new();
    for rw in workloads(real) {
        let name = rw["name"].as_str().unwrap_or("?");
        let Some(sw) = workloads(sim).iter().find(|w| w["name"].as_str() == Some(name)) else { continue };
        let (rl, sl) = (&rw["latency"], &sw["latency"]);
        let lat = |k: &str| if rl.is_object() && sl.is_object() { Figure::of(&rl[k], &sl[k]) } else { None };
        out.push(WorkloadFigures {
            workload: name.to_string(),
            p50: lat("p50_ns"),
            p99: lat("p99_ns"),
            max: lat("max_ns"),
            makespan: Figure::of(&rw["makespan_ns"], &sw["makespan_ns"]),
            share_real_pct: rs.get(name).copied().unwrap_or(0.0),
            share_sim_pct: ss.get(name).copied().unwrap_or(0.0),
        });
    }
    let (rt, st) = (task_shares(real), task_shares(sim));
    let task_share_err_pp = rt.iter().map(|(n, r)| (r - st.get(n).copied().unwrap_or(0.0)).abs()).reduce(f64::max);
    let medians = out.iter().flat_map(|w| [&w.p50, &w.makespan]).filter_map(|f| f.as_ref()?.err_pct.map(f64::abs));
    let worst_median_err_pct = medians.reduce(f64::max);
    let shares = out.iter().map(|w| (w.share_sim_pct - w.share_real_pct).abs()).chain(task_share_err_pp);
    let worst_share_err_pp = shares.reduce(f64::max);
    let meets_goal = worst_median_err_pct.is_none_or(|e| e <= MEDIAN_GOAL_PCT) && worst_share_err_pp.is_none_or(|e| e <= SHARE_GOAL_PP) && !out.is_empty();
    ScenarioFigures {
        scenario: scenario.into(),
        status: "measured".into(),
        reason: String::new(),
        workloads: out,
        task_share_err_pp,
        worst_median_err_pct,
        worst_share_err_pp,
        meets_goal,
        notes: Vec::new(),
    }
}

/// The printed table: one row per workload (real / sim (error)), then the
/// scenarios that were not measured.
pub fn tables(all: &[ScenarioFigures]) -> String {
    let mut rows = vec![["scenario", "workload", "p50 real / sim", "p99 real / sim", "max real / sim", "makespan real / sim", "share real / sim", "task shares", "goal"].map(String::from).to_vec()];
    for s in all.iter().filter(|s| s.status == "measured") {
        let misses = s.misses();
        for (i, w) in s.workloads.iter().enumerate() {
            let goal = match (i, misses.is_empty()) {
                (0, true) => "met".to_string(),
                (0, false) => format!("missed: {}", misses.join(", ")),
                _ => String::new(),
            };
            rows.push(vec![
                if i == 0 { s.scenario.clone() } else { String::new() },
                w.workload.clone(),
                Figure::cell(w.p50.as_ref()),
                Figure::cell(w.p99.as_ref()),
                Figure::cell(w.max.as_ref()),
                Figure::cell(w.makespan.as_ref()),
                format!("{:.1}% / {:.1}%", w.share_real_pct, w.share_sim_pct),
                match (i, s.task_share_err_pp) {
                    (0, Some(e)) => format!("max {e:.1} pp apart"),
                    _ => String::new(),
                },
                goal,
            ]);
        }
    }
    let mut out = table(&rows);
    for s in all.iter().filter(|s| s.status != "measured") {
        out.push_str(&format!("{}: {} ({})\n", s.scenario, s.status, s.reason));
    }
    for s in all {
        for n in &s.notes {
            out.push_str(&format!("note: {}: {n}\n", s.scenario));
        }
    }
    let measured: Vec<&ScenarioFigures> = all.iter().filter(|s| s.status == "measured").collect();
    let met = measured.iter().filter(|s| s.meets_goal).count();
    out.push_str(&format!(
        "goal (medians within {MEDIAN_GOAL_PCT:.0}%, shares within {SHARE_GOAL_PP:.0} points) met by {met} of {} measured scenarios\n",
        measured.len()
    ));
    out
}

/// The same as CSV, one line per workload (every figure in ns, errors in
/// percent or points), then a line per scenario not measured.
pub fn to_csv(all: &[ScenarioFigures]) -> String {
    let mut header: Vec<String> = ["scenario", "status", "reason", "workload"].map(String::from).to_vec();
    for f in ["p50", "p99", "max", "makespan"] {
        header.extend([format!("{f}_real_ns"), format!("{f}_sim_ns"), format!("{f}_err_pct")]);
    }
    header.extend(["share_real_pct", "share_sim_pct", "share_err_pp", "task_share_err_pp", "meets_goal"].map(String::from));
    let num = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.2}"));
    let mut rows = Vec::new();
    for s in all {
        if s.workloads.is_empty() {
            let mut r = vec![s.scenario.clone(), s.status.clone(), s.reason.clone()];
            r.resize(header.len(), String::new());
            rows.push(r);
        }
        for w in &s.workloads {
            let mut r = vec![s.scenario.clone(), s.status.clone(), s.reason.clone(), w.workload.clone()];
            for f in [&w.p50, &w.p99, &w.max, &w.makespan] {
                match f {
                    Some(f) => r.extend([f.real_ns.to_string(), f.sim_ns.to_string(), num(f.err_pct)]),
                    None => r.extend([String::new(), String::new(), String::new()]),
                }
            }
            r.extend([num(Some(w.share_real_pct)), num(Some(w.share_sim_pct)), num(Some(w.share_sim_pct - w.share_real_pct)), num(s.task_share_err_pp), s.meets_goal.to_string()]);
            rows.push(r);
        }
    }
    crate::results::csv::document(&header, &rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(lat_p50: u64, makespan: Option<u64>, rt: [u64; 2]) -> Value {
        json!({
            "workloads": [
                {"name": "ct", "latency": {"p50_ns": lat_p50, "p99_ns": lat_p50 * 4, "max_ns": lat_p50 * 10}, "makespan_ns": null, "runtime_ns": rt[0]},
                {"name": "hb", "latency": null, "makespan_ns": makespan, "runtime_ns": rt[1]},
            ],
            "tasks": [
                {"name": "a", "workload": "hogs", "runtime_ns": 75},
                {"name": "b", "workload": "hogs", "runtime_ns": 25},
            ],
        })
    }

    #[test]
    fn errors_are_relative_to_the_real_figure() {
        let f = compare("x.toml", &doc(100_000, Some(2_000_000), [10, 90]), &doc(110_000, Some(1_000_000), [10, 90]));
        let ct = &f.workloads[0];
        assert_eq!(ct.p50.as_ref().unwrap().err_pct, Some(10.0));
        assert!(ct.makespan.is_none());
        let hb = &f.workloads[1];
        assert_eq!(hb.makespan.as_ref().unwrap().err_pct, Some(-50.0));
        assert_eq!(f.worst_median_err_pct, Some(50.0));
        assert_eq!(f.worst_share_err_pp, Some(0.0));
        assert!(!f.meets_goal);
        assert_eq!(f.misses(), vec!["hb makespan -50%".to_string()]);
    }

    #[test]
    fn shares_count_against_the_goal_in_points() {
        let ok = compare("x.toml", &doc(100, None, [50, 50]), &doc(115, None, [51, 49]));
        assert!(ok.meets_goal, "{ok:?}");
        let off = compare("x.toml", &doc(100, None, [50, 50]), &doc(100, None, [53, 47]));
        assert!(!off.meets_goal);
        assert_eq!(off.misses(), vec!["ct share +3.0 pp".to_string(), "hb share -3.0 pp".to_string()]);
        let text = tables(&[off, ScenarioFigures::not_measured("y.toml", "skipped", "needs 16 CPUs")]);
        assert!(text.contains("y.toml: skipped (needs 16 CPUs)"), "{text}");
        assert!(text.contains("met by 0 of 1 measured"), "{text}");
    }

    #[test]
    fn the_csv_has_one_line_per_workload_and_per_unmeasured_scenario() {
        let all = [compare("x.toml", &doc(100, Some(10), [1, 1]), &doc(100, Some(10), [1, 1])), ScenarioFigures::not_measured("y.toml", "failed", "out of time")];
        let csv = to_csv(&all);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 4, "{csv}");
        let width = lines[0].split(',').count();
        assert!(lines.iter().skip(1).all(|l| l.split(',').count() == width), "{csv}");
        assert!(lines[3].starts_with("y.toml,failed,out of time,,"), "{csv}");
    }
}
