//! Run summaries and side-by-side comparison tables (`schedlab compare`),
//! in the shape of the experiments' tables: one row per scheduler or feature
//! setting, with max latency, spikes over a threshold, percentiles and
//! throughput. Sweeps store the same summaries per run.

use serde::{Deserialize, Serialize};

use crate::results::report::{table, Results};
use crate::engine::time::fmt_ns;

/// What one workload measured in one run: all integers, so a summary
/// written to JSON and read back is identical.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkloadSummary {
    /// The workload's name.
    pub name: String,
    /// Its kind.
    pub kind: String,
    /// Latency samples recorded.
    pub samples: u64,
    /// Median wakeup latency.
    pub p50_ns: Option<u64>,
    /// 99th percentile.
    pub p99_ns: Option<u64>,
    /// 99.9th percentile.
    pub p999_ns: Option<u64>,
    /// Largest.
    pub max_ns: Option<u64>,
    /// (threshold, samples above it).
    pub over: Vec<(u64, u64)>,
    /// First start to last exit, when every task finished.
    pub makespan_ns: Option<u64>,
    /// Units of work done (loops, messages, requests).
    pub work: u64,
    /// Work per simulated second (per makespan for workloads that finish).
    pub work_per_s: u64,
    /// CPU time of its tasks.
    pub runtime_ns: u64,
}

/// The sched_ext scheduler's end state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScxSummary {
    /// The scheduler's ops name.
    pub name: String,
    /// Its state at the end (enabled, disabled, ...).
    pub state: String,
    /// "kind (reason): message", or empty when it did not exit.
    pub exit: String,
    /// CPU time spent in its callbacks.
    pub overhead_ns: u64,
}

/// One run, reduced to what comparisons and sweeps aggregate.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunSummary {
    /// The variant ("eevdf", "ext:simple RUN_TO_PARITY=off", ...).
    pub label: String,
    /// The scheduler as results name it (eevdf, ext:simple, ...).
    pub scheduler: String,
    /// Features switched from their defaults.
    pub features_changed: Vec<String>,
    /// The run's seed.
    pub seed: u64,
    /// Simulated time (or measured time of a real run).
    pub sim_time_ns: u64,
    /// Events processed.
    pub events: u64,
    /// The event-stream hash ("real" for a real run).
    pub event_hash: String,
    /// Per workload.
    pub workloads: Vec<WorkloadSummary>,
    /// The sched_ext scheduler, if one ran.
    pub sched_ext: Option<ScxSummary>,
    /// "stopped by --max-wall 30s at 1.2s of 10s simulated" when the run
    /// stopped early ([`Results::partial`]); absent for a complete run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial: Option<String>,
}

impl RunSummary {
    /// A run's results reduced for comparisons and sweeps.
    pub fn from_results(label: &str, r: &Results) -> RunSummary {
        RunSummary::from_value(label, &serde_json::to_value(r).expect("results serialize"))
    }

    /// From a results document as JSON: a simulation's, or a real run's
    /// (which has the same shape, e.g. written by a guest kernel's run).
    pub fn from_value(label: &str, r: &serde_json::Value) -> RunSummary {
        let u = |v: &serde_json::Value| v.as_u64();
        let s = |v: &serde_json::Value| v.as_str().unwrap_or("").to_string();
        let sim_time_ns = u(&r["sim_time_ns"]).unwrap_or(0);
        let workloads = r["workloads"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|w| {
                let lat = &w["latency"];
                let makespan_ns = u(&w["makespan_ns"]);
                let work = u(&w["work"]).unwrap_or(0);
                let span = makespan_ns.unwrap_or(sim_time_ns).max(1);
                WorkloadSummary {
                    name: s(&w["name"]),
                    kind: s(&w["kind"]),
                    samples: u(&lat["count"]).unwrap_or(0),
                    p50_ns: u(&lat["p50_ns"]),
                    p99_ns: u(&lat["p99_ns"]),
                    p999_ns: u(&lat["p999_ns"]),
                    max_ns: u(&lat["max_ns"]),
                    over: w["thresholds"].as_array().into_iter().flatten().map(|t| (u(&t["above_ns"]).unwrap_or(0), u(&t["count"]).unwrap_or(0))).collect(),
                    makespan_ns,
                    work,
                    work_per_s: (work as u128 * 1_000_000_000 / span as u128) as u64,
                    runtime_ns: u(&w["runtime_ns"]).unwrap_or(0),
                }
            })
            .collect();
        let sched_ext = r["sched_ext"].as_object().map(|x| {
            let e = &x["exit"];
            ScxSummary {
                name: s(&x["name"]),
                state: s(&x["state"]),
                exit: if e.is_object() { exit_text(&s(&e["kind"]), &s(&e["reason"]), &s(&e["msg"])) } else { String::new() },
                overhead_ns: u(&x["overhead_ns"]).unwrap_or(0),
            }
        });
        RunSummary {
            label: label.to_string(),
            scheduler: s(&r["scheduler"]),
            features_changed: r["features_changed"].as_array().into_iter().flatten().map(s).collect(),
            seed: u(&r["seed"]).unwrap_or(0),
            sim_time_ns,
            events: u(&r["events"]).unwrap_or(0),
            event_hash: s(&r["event_hash"]),
            workloads,
            sched_ext,
            partial: r["partial"].as_object().map(|p| {
                let of = u(&p["duration_ns"]).unwrap_or(0);
                format!("stopped by {} at {} of {} simulated", s(&p["reason"]), fmt_ns(sim_time_ns), fmt_ns(of))
            }),
        }
    }
}

/// "KIND (reason): message", as the comparison tables show an exit.
pub fn exit_text(kind: &str, reason: &str, msg: &str) -> String {
    format!("{kind} ({reason}){}", if msg.is_empty() { String::new() } else { format!(": {msg}") })
}

/// One CSV row of a comparison: a variant's numbers for one workload.
#[derive(Serialize)]
struct CompareRow<'a> {
    variant: &'a str,
    scheduler: &'a str,
    features: String,
    seed: u64,
    workload: &'a str,
    kind: &'a str,
    samples: u64,
    p50_ns: Option<u64>,
    p99_ns: Option<u64>,
    p999_ns: Option<u64>,
    max_ns: Option<u64>,
    thresholds: Vec<crate::results::report::ThresholdCount>,
    makespan_ns: Option<u64>,
    work: u64,
    work_per_s: u64,
    runtime_ns: u64,
    sched_ext_state: Option<&'a str>,
    sched_ext_exit: Option<&'a str>,
}

/// The comparison as CSV: one row per (variant, workload).
pub fn to_csv(runs: &[RunSummary]) -> String {
    let mut rows = Vec::new();
    for r in runs {
        for w in &r.workloads {
            rows.push(CompareRow {
                variant: &r.label,
                scheduler: &r.scheduler,
                features: r.features_changed.join(" "),
                seed: r.seed,
                workload: &w.name,
                kind: &w.kind,
                samples: w.samples,
                p50_ns: w.p50_ns,
                p99_ns: w.p99_ns,
                p999_ns: w.p999_ns,
                max_ns: w.max_ns,
                thresholds: w.over.iter().map(|&(above_ns, count)| crate::results::report::ThresholdCount { above_ns, count }).collect(),
                makespan_ns: w.makespan_ns,
                work: w.work,
                work_per_s: w.work_per_s,
                runtime_ns: w.runtime_ns,
                sched_ext_state: r.sched_ext.as_ref().map(|x| x.state.as_str()),
                sched_ext_exit: r.sched_ext.as_ref().map(|x| x.exit.as_str()),
            });
        }
    }
    crate::results::csv::table(&rows)
}

/// The comparison as JSON.
pub fn to_json(scenario: &str, runs: &[RunSummary], agreement: Option<&[crate::results::agreement::Agreement]>) -> String {
    #[derive(Serialize)]
    struct Doc<'a> {
        schedlab_version: &'static str,
        scenario: &'a str,
        variants: &'a [RunSummary],
        #[serde(skip_serializing_if = "Option::is_none")]
        real_vs_sim: Option<&'a [crate::results::agreement::Agreement]>,
    }
    serde_json::to_string_pretty(&Doc { schedlab_version: env!("CARGO_PKG_VERSION"), scenario, variants: runs, real_vs_sim: agreement }).expect("serialize") + "\n"
}

/// A count with its share: "12 (0.31%)".
fn count_share(n: u64, of: u64) -> String {
    if of == 0 {
        return n.to_string();
    }
    format!("{n} ({:.2}%)", n as f64 * 100.0 / of as f64)
}

/// Work per second with a magnitude suffix: 950, 12.3k, 4.56M.
pub fn fmt_rate(v: u64) -> String {
    match v {
        v if v >= 10_000_000 => format!("{:.1}M", v as f64 / 1e6),
        v if v >= 1_000_000 => format!("{:.2}M", v as f64 / 1e6),
        v if v >= 10_000 => format!("{:.1}k", v as f64 / 1e3),
        v => v.to_string(),
    }
}

/// Side-by-side tables: one per workload, one row per variant, then the
/// sched_ext outcomes when a variant loaded one.
pub fn tables(runs: &[RunSummary]) -> String {
    let mut out = String::new();
    let Some(first) = runs.first() else { return out };
    for (wi, w0) in first.workloads.iter().enumerate() {
        let cells: Vec<(&RunSummary, &WorkloadSummary)> = runs.iter().filter_map(|r| r.workloads.get(wi).map(|w| (r, w))).collect();
        let lat = cells.iter().any(|(_, w)| w.max_ns.is_some());
        let finite = cells.iter().any(|(_, w)| w.makespan_ns.is_some()) || w0.kind == "hackbench";
        let thresholds: Vec<u64> = w0.over.iter().map(|o| o.0).collect();
        let mut head = vec!["variant".to_string()];
        if lat {
            head.extend(["max latency", "p50", "p99", "p99.9", "samples"].map(String::from));
            head.extend(thresholds.iter().map(|t| format!("spikes >{}", fmt_ns(*t))));
        }
        if finite {
            head.push("makespan".into());
        }
        head.push("work/s".into());
        let mut rows = vec![head];
        for (r, w) in &cells {
            let mut row = vec![if r.partial.is_some() { format!("{} (partial)", r.label) } else { r.label.clone() }];
            let f = |v: Option<u64>| v.map_or("-".to_string(), fmt_ns);
            if lat {
                row.extend([f(w.max_ns), f(w.p50_ns), f(w.p99_ns), f(w.p999_ns), w.samples.to_string()]);
                for t in &thresholds {
                    let n = w.over.iter().find(|o| o.0 == *t).map_or(0, |o| o.1);
                    row.push(count_share(n, w.samples));
                }
            }
            if finite {
                row.push(w.makespan_ns.map_or("unfinished".into(), fmt_ns));
            }
            row.push(fmt_rate(w.work_per_s));
            rows.push(row);
        }
        out.push_str(&format!("{} ({})\n", w0.name, w0.kind));
        out.push_str(&table(&rows));
        out.push('\n');
    }
    if runs.iter().any(|r| r.sched_ext.is_some()) {
        let mut rows = vec![["variant", "sched_ext", "state", "exit", "overhead"].map(String::from).to_vec()];
        for r in runs {
            match &r.sched_ext {
                Some(x) => rows.push(vec![r.label.clone(), x.name.clone(), x.state.clone(), if x.exit.is_empty() { "-".into() } else { x.exit.clone() }, fmt_ns(x.overhead_ns)]),
                None => rows.push(vec![r.label.clone(), "-".into(), "-".into(), "-".into(), "-".into()]),
            }
        }
        out.push_str(&table(&rows));
        out.push('\n');
    }
    out
}
