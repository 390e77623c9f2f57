//! Sweeps: a grid of seeds x parameter values, run in parallel, each run's
//! summary stored atomically under a key that hashes everything that
//! determines it, so an interrupted sweep started again reuses what
//! finished; and aggregates across seeds (median, quartiles, min, max).
//!
//! The aggregate is computed from the stored summaries as read back, so a
//! resumed sweep and an uninterrupted one give byte-identical output.

use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::results::compare::RunSummary;

/// A `--seeds` or `--param` argument that does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GridError {
    /// `--seeds` that is neither a range, a list nor one seed.
    #[error("--seeds {0}: expected a range like 1..10 (inclusive), a list like 1,5,9 or one seed")]
    Seeds(String),
    /// `--param` without a path or values.
    #[error("--param {0}: expected PATH=V1,V2,..., e.g. workload.0.count=2,4,8")]
    Param(String),
}

/// `--seeds`: `1..10` (inclusive: ten seeds), `1..=10`, `3` or `1,5,9`.
pub fn parse_seeds(s: &str) -> Result<Vec<u64>, GridError> {
    let bad = || GridError::Seeds(s.to_string());
    let s = s.trim();
    if let Some((a, b)) = s.split_once("..") {
        let a: u64 = a.trim().parse().map_err(|_| bad())?;
        let b: u64 = b.trim().trim_start_matches('=').trim().parse().map_err(|_| bad())?;
        if b < a || b - a >= 1_000_000 {
            return Err(bad());
        }
        return Ok((a..=b).collect());
    }
    let v: Result<Vec<u64>, _> = s.split(',').map(|x| x.trim().parse::<u64>()).collect();
    let v = v.map_err(|_| bad())?;
    if v.is_empty() || v.iter().any(|&x| x > i64::MAX as u64) {
        return Err(bad());
    }
    Ok(v)
}

/// `--param path=v1,v2,...`: the dotted scenario path and its values.
pub fn parse_param(s: &str) -> Result<(String, Vec<String>), GridError> {
    let (k, v) = s.split_once('=').ok_or_else(|| GridError::Param(s.to_string()))?;
    let k = k.trim();
    let vals: Vec<String> = v.split(',').map(|x| x.trim().to_string()).filter(|x| !x.is_empty()).collect();
    if k.is_empty() || vals.is_empty() {
        return Err(GridError::Param(s.to_string()));
    }
    Ok((k.to_string(), vals))
}

/// The grid points: every combination of the parameters' values, the
/// first parameter varying slowest.
pub fn grid(params: &[(String, Vec<String>)]) -> Vec<Vec<(String, String)>> {
    let mut points = vec![Vec::new()];
    for (k, vals) in params {
        points = points.into_iter().flat_map(|p| vals.iter().map(move |v| [p.clone(), vec![(k.clone(), v.clone())]].concat())).collect();
    }
    points
}

/// The store key of one run: a hash of the scenario text, the overrides
/// (in order), the seed and the schedlab version.
pub fn run_key(scenario_text: &str, overrides: &[String], seed: u64) -> String {
    let mut h = Sha256::new();
    let doc = serde_json::json!([scenario_text, overrides, seed, env!("CARGO_PKG_VERSION")]);
    h.update(doc.to_string().as_bytes());
    h.finalize().iter().take(16).map(|b| format!("{b:02x}")).collect()
}

/// One run of the grid.
#[derive(Clone, Debug)]
pub struct Job {
    /// The grid point (index into the plan's points).
    pub point: usize,
    /// The run's seed.
    pub seed: u64,
    /// The point's parameters as `path=value` overrides.
    pub overrides: Vec<String>,
    /// The store key: a hash of the scenario text, the overrides and the seed.
    pub key: String,
}

/// What the store keeps per run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The store key it was run under.
    pub key: String,
    /// The run's seed.
    pub seed: u64,
    /// The overrides that made its scenario.
    pub overrides: Vec<String>,
    /// What the run gave.
    pub summary: RunSummary,
}

/// One job per (point, seed), points varying slowest, keyed for the store.
pub fn jobs(scenario_text: &str, base: &[String], points: &[Vec<(String, String)>], seeds: &[u64]) -> Vec<Job> {
    let mut out = Vec::new();
    for (i, p) in points.iter().enumerate() {
        for &seed in seeds {
            let mut overrides = base.to_vec();
            overrides.extend(p.iter().map(|(k, v)| format!("{k}={v}")));
            let key = run_key(scenario_text, &overrides, seed);
            out.push(Job { point: i, seed, overrides, key });
        }
    }
    out
}

fn record_path(dir: &Path, key: &str) -> PathBuf {
    dir.join("runs").join(format!("{key}.json"))
}

/// A stored record, if there is a complete one for `job`.
pub fn load(dir: &Path, job: &Job) -> Option<Record> {
    let text = std::fs::read_to_string(record_path(dir, &job.key)).ok()?;
    let r: Record = serde_json::from_str(&text).ok()?;
    (r.key == job.key && r.seed == job.seed).then_some(r)
}

/// How a sweep went.
pub struct Outcome {
    /// One record per job that completed, in job order.
    pub records: Vec<Record>,
    /// The jobs of `records`, in the same order.
    pub jobs: Vec<Job>,
    /// The jobs that failed to run, with why ("seed S overrides: error").
    pub errors: Vec<(Job, String)>,
    /// Jobs whose record the store already held.
    pub reused: usize,
    /// Jobs run this time.
    pub ran: usize,
}

/// A run the aggregates leave out or flag: it failed to run, or its
/// sched_ext scheduler was ejected with an error exit (a fault, a stall,
/// scx_bpf_error()), so part of it ran under fair.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Failed {
    /// The grid point, as (parameter, value) pairs.
    pub point: Vec<(String, String)>,
    /// The run's seed.
    pub seed: u64,
    /// "run failed: ..." or "sched_ext ejected: KIND (reason): message".
    pub reason: String,
}

/// The failed runs of a sweep, in job order: those that did not run
/// (left out of the aggregates) and those whose scheduler was ejected
/// with an error (aggregated, but named).
pub fn failures(points: &[Vec<(String, String)>], outcome: &Outcome) -> Vec<Failed> {
    let mut out: Vec<(usize, Failed)> = Vec::new();
    let point = |j: &Job| points.get(j.point).cloned().unwrap_or_default();
    for (j, e) in &outcome.errors {
        out.push((j.point, Failed { point: point(j), seed: j.seed, reason: format!("run failed: {e}") }));
    }
    for (j, r) in outcome.jobs.iter().zip(&outcome.records) {
        if let Some(x) = r.summary.sched_ext.as_ref().filter(|x| x.exit.starts_with("ERROR")) {
            out.push((j.point, Failed { point: point(j), seed: j.seed, reason: format!("sched_ext ejected: {}", x.exit) }));
        }
    }
    out.sort_by_key(|(p, f)| (*p, f.seed));
    out.into_iter().map(|(_, f)| f).collect()
}

/// A sweep's store could not be written.
#[derive(Debug, thiserror::Error)]
#[error("{}: {err}", path.display())]
pub struct StoreError {
    /// The directory or record file.
    pub path: PathBuf,
    /// The error.
    pub err: std::io::Error,
}

/// Why one job of a sweep failed.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// The run itself failed (bad scenario, scheduler that did not load,
    /// a partial run): its error, rendered.
    #[error("{0}")]
    Run(String),
    /// The run panicked: the panic's message.
    #[error("internal error (panic): {0}")]
    Panic(String),
    /// Its record could not be stored.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Its record could not be read back.
    #[error("{0}")]
    Record(#[from] serde_json::Error),
}

/// Runs every job that has no stored record, in parallel, storing each
/// result as it finishes; `progress(done, total)` is called after each.
/// A failed run stops nothing else: it is returned in [`Outcome::errors`]
/// (and a panicking run is one, with the panic's message). Err: the
/// store cannot be created.
pub fn execute<E: std::fmt::Display>(
    dir: &Path,
    jobs: &[Job],
    run: &(dyn Fn(&Job) -> Result<RunSummary, E> + Sync),
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Outcome, StoreError> {
    std::fs::create_dir_all(dir.join("runs")).map_err(|err| StoreError { path: dir.to_path_buf(), err })?;
    let total = jobs.len();
    let done = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<Result<(Record, bool), String>> = jobs
        .par_iter()
        .map(|job| {
            let out = match load(dir, job) {
                Some(r) => Ok((r, true)),
                None => guarded_run(run, job).and_then(|summary| {
                    let text = record_text(job, summary);
                    store_record(dir, &job.key, &text)?;
                    // Aggregate what a later resume would read.
                    Ok((serde_json::from_str(&text)?, false))
                }),
            };
            let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            progress(n, total);
            out.map_err(|e| job_error(job, &e.to_string()))
        })
        .collect();
    let mut out = Outcome { records: Vec::with_capacity(total), jobs: Vec::with_capacity(total), errors: Vec::new(), reused: 0, ran: 0 };
    for (job, r) in jobs.iter().zip(results) {
        match r {
            Ok((rec, cached)) => {
                if cached {
                    out.reused += 1;
                } else {
                    out.ran += 1;
                }
                out.records.push(rec);
                out.jobs.push(job.clone());
            }
            Err(e) => out.errors.push((job.clone(), e)),
        }
    }
    Ok(out)
}

/// The text the store keeps for one finished run (pretty JSON of its
/// [`Record`], newline-terminated).
pub fn record_text(job: &Job, summary: RunSummary) -> String {
    let rec = Record { key: job.key.clone(), seed: job.seed, overrides: job.overrides.clone(), summary };
    serde_json::to_string_pretty(&rec).expect("serialize") + "\n"
}

/// Stores a record's text as `<dir>/runs/<key>.json`, atomically. A run
/// done elsewhere (a Ray worker) is stored by the driver through here.
pub fn store_record(dir: &Path, key: &str, text: &str) -> Result<(), StoreError> {
    let path = record_path(dir, key);
    crate::results::csv::write_atomic(&path, text.as_bytes()).map_err(|err| StoreError { path, err })
}

/// A failed job's error as a sweep reports it: "seed S overrides: error".
pub fn job_error(job: &Job, e: &str) -> String {
    format!("seed {} {}: {e}", job.seed, job.overrides.join(" "))
}

/// `run(job)`, with a panic turned into that run's error so the other
/// runs of the sweep complete.
pub fn guarded_run<E: std::fmt::Display>(run: &(dyn Fn(&Job) -> Result<RunSummary, E> + Sync), job: &Job) -> Result<RunSummary, JobError> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(job))) {
        Ok(r) => r.map_err(|e| JobError::Run(e.to_string())),
        Err(p) => {
            let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()));
            Err(JobError::Panic(msg.unwrap_or_else(|| "no message".into())))
        }
    }
}

/// Median and spread of one metric over the seeds of a grid point.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Stat {
    /// Seeds aggregated.
    pub n: usize,
    /// Median over the seeds.
    pub median: u64,
    /// First quartile.
    pub q1: u64,
    /// Third quartile.
    pub q3: u64,
    /// Smallest.
    pub min: u64,
    /// Largest.
    pub max: u64,
}

impl Stat {
    /// Quartiles by linear interpolation between ranks (rounded down),
    /// median of an even count = the mean of the two middle values.
    pub fn of(mut v: Vec<u64>) -> Option<Stat> {
        if v.is_empty() {
            return None;
        }
        v.sort_unstable();
        let q = |f: f64| {
            let pos = f * (v.len() - 1) as f64;
            let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
            let frac = pos - lo as f64;
            (v[lo] as f64 + (v[hi] as f64 - v[lo] as f64) * frac).floor() as u64
        };
        Some(Stat { n: v.len(), median: q(0.5), q1: q(0.25), q3: q(0.75), min: v[0], max: v[v.len() - 1] })
    }
}

/// The metrics aggregated per workload: (name, unit, value).
pub fn metrics(w: &crate::results::compare::WorkloadSummary) -> Vec<(String, &'static str, Option<u64>)> {
    let mut m = vec![
        ("p50".to_string(), "ns", w.p50_ns),
        ("p99".to_string(), "ns", w.p99_ns),
        ("p99.9".to_string(), "ns", w.p999_ns),
        ("max".to_string(), "ns", w.max_ns),
    ];
    for &(t, c) in &w.over {
        m.push((format!("over_{}", crate::results::csv::exact_duration(t)), "count", Some(c)));
    }
    m.push(("makespan".to_string(), "ns", w.makespan_ns));
    m.push(("work_per_s".to_string(), "1/s", Some(w.work_per_s)));
    m
}

/// One aggregate row: a grid point, a workload, a metric.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AggRow {
    /// The grid point, as (parameter, value) pairs.
    pub point: Vec<(String, String)>,
    /// The workload the metric is of.
    pub workload: String,
    /// The metric (p99_ns, makespan_ns, work_per_s, ...).
    pub metric: String,
    /// Its unit ("ns", "/s", ...).
    pub unit: &'static str,
    /// Its spread over the seeds.
    #[serde(flatten)]
    pub stat: Stat,
}

/// Aggregates records (in job order) per grid point over seeds.
pub fn aggregate(points: &[Vec<(String, String)>], jobs: &[Job], records: &[Record]) -> Vec<AggRow> {
    let mut out = Vec::new();
    for (pi, point) in points.iter().enumerate() {
        let recs: Vec<&Record> = jobs.iter().zip(records).filter(|(j, _)| j.point == pi).map(|(_, r)| r).collect();
        let Some(first) = recs.first() else { continue };
        for (wi, w) in first.summary.workloads.iter().enumerate() {
            for (mi, (name, unit, _)) in metrics(w).into_iter().enumerate() {
                let vals: Vec<u64> = recs.iter().filter_map(|r| r.summary.workloads.get(wi).and_then(|w| metrics(w).get(mi).and_then(|m| m.2))).collect();
                if let Some(stat) = Stat::of(vals) {
                    out.push(AggRow { point: point.clone(), workload: w.name.clone(), metric: name, unit, stat });
                }
            }
        }
    }
    out
}

/// The aggregate as CSV: one row per grid point, workload and metric.
pub fn aggregate_csv(params: &[String], rows: &[AggRow]) -> String {
    let mut header: Vec<String> = params.to_vec();
    header.extend(["workload", "metric", "unit", "n", "median", "q1", "q3", "min", "max"].map(String::from));
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut row: Vec<String> = params.iter().map(|p| r.point.iter().find(|(k, _)| k == p).map(|(_, v)| v.clone()).unwrap_or_default()).collect();
            let s = &r.stat;
            row.extend([r.workload.clone(), r.metric.clone(), r.unit.to_string()]);
            row.extend([s.n, s.median as usize, s.q1 as usize, s.q3 as usize, s.min as usize, s.max as usize].map(|v| v.to_string()));
            row
        })
        .collect();
    crate::results::csv::document(&header, &body)
}

/// The aggregate as JSON.
/// `failed`: [`failures`] (the field is left out when none failed).
pub fn aggregate_json(scenario: &str, params: &[(String, Vec<String>)], seeds: &[u64], rows: &[AggRow], failed: &[Failed]) -> String {
    #[derive(Serialize)]
    struct Doc<'a> {
        schedlab_version: &'static str,
        scenario: &'a str,
        params: &'a [(String, Vec<String>)],
        seeds: &'a [u64],
        aggregates: &'a [AggRow],
        #[serde(skip_serializing_if = "<[Failed]>::is_empty")]
        failed: &'a [Failed],
    }
    let doc = Doc { schedlab_version: env!("CARGO_PKG_VERSION"), scenario, params, seeds, aggregates: rows, failed };
    serde_json::to_string_pretty(&doc).expect("serialize") + "\n"
}

/// The failed runs as lines under the table ("" when none failed).
pub fn failures_text(failed: &[Failed]) -> String {
    let mut out = String::new();
    if !failed.is_empty() {
        out.push_str(&format!("\n{} failed:\n", if failed.len() == 1 { "1 run".to_string() } else { format!("{} runs", failed.len()) }));
    }
    for f in failed {
        let point: Vec<String> = f.point.iter().map(|(k, v)| format!("{k}={v}")).collect();
        out.push_str(&format!("  seed {}{}{}: {}\n", f.seed, if point.is_empty() { "" } else { " " }, point.join(" "), f.reason));
    }
    out
}

/// Human table: one row per grid point and workload; the headline metrics
/// as median [min..max] over seeds.
pub fn aggregate_table(params: &[String], rows: &[AggRow]) -> String {
    use crate::engine::time::fmt_ns;
    let mut keys: Vec<(Vec<(String, String)>, String)> = Vec::new();
    for r in rows {
        let k = (r.point.clone(), r.workload.clone());
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let shown = ["p99", "max", "makespan", "work_per_s"];
    let mut metrics_present: Vec<String> = Vec::new();
    for r in rows {
        if (shown.contains(&r.metric.as_str()) || r.metric.starts_with("over_")) && !metrics_present.contains(&r.metric) {
            metrics_present.push(r.metric.clone());
        }
    }
    let mut head: Vec<String> = params.to_vec();
    head.push("workload".into());
    head.push("seeds".into());
    head.extend(metrics_present.iter().map(|m| if m == "work_per_s" { "work/s".to_string() } else { m.clone() }));
    let mut table = vec![head];
    for (point, wl) in keys {
        let mut row: Vec<String> = params.iter().map(|p| point.iter().find(|(k, _)| k == p).map(|(_, v)| v.clone()).unwrap_or_default()).collect();
        row.push(wl.clone());
        let mine: Vec<&AggRow> = rows.iter().filter(|r| r.point == point && r.workload == wl).collect();
        row.push(mine.first().map_or(0, |r| r.stat.n).to_string());
        for m in &metrics_present {
            row.push(match mine.iter().find(|r| &r.metric == m) {
                Some(r) => {
                    let f = |v: u64| match r.unit {
                        "ns" => fmt_ns(v),
                        "1/s" => crate::results::compare::fmt_rate(v),
                        _ => v.to_string(),
                    };
                    let s = &r.stat;
                    if s.min == s.max { f(s.median) } else { format!("{} [{}..{}]", f(s.median), f(s.min), f(s.max)) }
                }
                None => "-".into(),
            });
        }
        table.push(row);
    }
    crate::results::report::table(&table)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_and_params_parse() {
        assert_eq!(parse_seeds("1..4").unwrap(), vec![1, 2, 3, 4]);
        assert_eq!(parse_seeds("1..=2").unwrap(), vec![1, 2]);
        assert_eq!(parse_seeds("7, 9").unwrap(), vec![7, 9]);
        assert!(parse_seeds("4..1").is_err());
        assert!(parse_seeds("x").is_err());
        assert_eq!(parse_param("workload.0.count=2,4").unwrap(), ("workload.0.count".into(), vec!["2".into(), "4".into()]));
        assert!(parse_param("nothing").is_err());
    }

    #[test]
    fn grid_is_the_product_first_parameter_slowest() {
        let g = grid(&[("a".into(), vec!["1".into(), "2".into()]), ("b".into(), vec!["x".into(), "y".into()])]);
        let flat: Vec<String> = g.iter().map(|p| p.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")).collect();
        assert_eq!(flat, ["a=1 b=x", "a=1 b=y", "a=2 b=x", "a=2 b=y"]);
        assert_eq!(grid(&[]).len(), 1);
    }

    #[test]
    fn stats_are_median_and_quartiles() {
        let s = Stat::of(vec![5, 1, 3, 2, 4]).unwrap();
        assert_eq!((s.median, s.q1, s.q3, s.min, s.max, s.n), (3, 2, 4, 1, 5, 5));
        let s = Stat::of(vec![10, 20]).unwrap();
        assert_eq!(s.median, 15);
        assert!(Stat::of(vec![]).is_none());
    }

    #[test]
    fn keys_depend_on_every_input() {
        let k = run_key("a", &["x=1".into()], 1);
        assert_eq!(k.len(), 32);
        assert_ne!(k, run_key("b", &["x=1".into()], 1));
        assert_ne!(k, run_key("a", &["x=2".into()], 1));
        assert_ne!(k, run_key("a", &["x=1".into()], 2));
        assert_eq!(k, run_key("a", &["x=1".into()], 1));
    }
}
