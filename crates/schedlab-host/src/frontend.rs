//! What the `schedlab` command line and the Python package share: turning
//! options (seed, `--set`, `--feature`, `--sched`, `--machine`) into
//! scenario overrides, loading and running a scenario quietly, the variants
//! of a comparison, and a sweep's plan (grid, store keys, one run, the
//! aggregates). Both front ends call these, so a Python run and a CLI run of
//! the same inputs give the same bytes.
//!
//! Sits on top of the core's [`schedlab::workload`] and
//! [`schedlab::results`] and of hosting ([`crate::world`]: a run may load a
//! hosted scheduler); nothing below imports it.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use schedlab::results::compare::RunSummary;
use schedlab::results::report::Results;
use schedlab::results::sweep::{self, AggRow, Failed, GridError, Job, Outcome};
use schedlab::results::trace::{Timeline, TimelineSink};
use schedlab::sched::sim::Sim;
use schedlab::workload::scenario::{Scenario, ScenarioError};
use crate::world;

/// Why a front-end action failed: bad input (exit code 2) or an I/O or
/// internal error (exit code 1). The message is one line naming the file,
/// field and fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// Bad input (exit code 2): the message names file, line and field.
    Input(String),
    /// An I/O or internal failure (exit code 1).
    Io(String),
}

impl Failure {
    /// The message without the kind.
    pub fn message(&self) -> String {
        match self {
            Failure::Input(m) | Failure::Io(m) => m.clone(),
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message())
    }
}

impl From<ScenarioError> for Failure {
    fn from(e: ScenarioError) -> Failure {
        match e {
            ScenarioError::Io { .. } => Failure::Io(e.to_string()),
            other => Failure::Input(other.to_string()),
        }
    }
}

impl From<GridError> for Failure {
    fn from(e: GridError) -> Failure {
        Failure::Input(e.to_string())
    }
}

/// `--feature` values as scenario overrides (one value each).
pub fn feature_sets(features: &[String]) -> Result<Vec<String>, Failure> {
    let mut sets = Vec::new();
    for f in features {
        let mut probe = schedlab::sched::features::Features::default();
        probe.apply(f).map_err(|e| Failure::Input(format!("--feature {f}: {e}")))?;
        let (name, on) = match f.split_once('=') {
            Some((n, v)) => (n.trim().to_string(), schedlab::sched::features::parse_switch(v.trim()).unwrap_or(true)),
            None => match f.strip_prefix("NO_") {
                Some(n) => (n.to_string(), false),
                None => (f.clone(), true),
            },
        };
        sets.push(format!("features.{name}={on}"));
    }
    Ok(sets)
}

/// `--sched` and `--sched-set` as scenario overrides. A path is taken from
/// the current directory, not the scenario's.
pub fn sched_args(sched: Option<&str>, sched_sets: &[String]) -> Result<Vec<String>, Failure> {
    let mut sets = Vec::new();
    match sched {
        None => {}
        Some("eevdf") => sets.push("scheduler.kind=\"eevdf\"".to_string()),
        Some(s) => {
            sets.push("scheduler.kind=\"ext\"".to_string());
            let p = Path::new(s);
            let name = if p.is_file() || p.is_dir() { p.canonicalize().map_err(|e| Failure::Io(format!("--sched {s}: {e}")))?.display().to_string() } else { s.to_string() };
            sets.push(format!("scheduler.sched={}", toml::Value::String(name)));
        }
    }
    for kv in sched_sets {
        let (k, v) = kv.split_once('=').ok_or_else(|| Failure::Input(format!("--sched-set {kv}: expected NAME=VALUE, e.g. dsp_batch=8")))?;
        let k = k.trim();
        if k.is_empty() || !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(Failure::Input(format!("--sched-set {kv}: {k:?} is not an option name")));
        }
        let v = v.trim();
        // Numbers and booleans as themselves, anything else as a string.
        let val = if v.parse::<i64>().is_ok() || v == "true" || v == "false" { v.to_string() } else { toml::Value::String(v.to_string()).to_string() };
        sets.push(format!("scheduler.options.{k}={val}"));
    }
    Ok(sets)
}

/// `--op-timeout DURATION` as the scenario's `scheduler.op_timeout` (the
/// scenario parser checks the value).
pub fn op_timeout_arg(d: Option<&str>) -> Option<String> {
    d.map(|d| format!("scheduler.op_timeout={}", toml::Value::String(d.trim().to_string())))
}

/// `--machine` applied to a loaded scenario: a preset, a CPU count, a copy
/// of /sys/devices/system/cpu, a file of `lscpu -p` output, or a TOML file
/// with a `[machine]` table (as `schedlab calibrate` writes), which
/// replaces the scenario's whole machine, costs included; its relative
/// `lscpu` / `sysfs` paths are taken from the file's directory. The
/// `machine.*` overrides among `sets` apply to that file's table, so that
/// `--set machine.costs.wakeup=...` still holds beside `--machine FILE`.
pub fn apply_machine(scenario: &mut Scenario, m: &str, sets: &[String]) -> Result<(), Failure> {
    if let Some(spec) = machine_file(Path::new(m), sets)? {
        scenario.machine = spec;
        return Ok(());
    }
    let spec = &mut scenario.machine;
    spec.preset = None;
    spec.cpus = None;
    spec.sysfs = None;
    spec.lscpu = None;
    let as_path = Path::new(m);
    if as_path.exists() {
        let abs = as_path.canonicalize().map_err(|e| Failure::Io(format!("--machine {m}: {e}")))?;
        if abs.is_dir() {
            spec.sysfs = Some(abs);
        } else {
            spec.lscpu = Some(abs);
        }
    } else if let Ok(n) = m.parse::<usize>() {
        spec.cpus = Some(n);
    } else {
        spec.preset = Some(m.to_string());
    }
    Ok(())
}

/// The `[machine]` table of `path` when it is a TOML file with one (None
/// for anything else: a directory, an `lscpu -p` file, a name).
fn machine_file(path: &Path, sets: &[String]) -> Result<Option<schedlab::workload::scenario::MachineSpec>, Failure> {
    let Ok(text) = std::fs::read_to_string(path) else { return Ok(None) };
    let Ok(mut table) = text.parse::<toml::Table>() else { return Ok(None) };
    let Some(machine) = table.remove("machine") else { return Ok(None) };
    let m = path.display();
    let mut root = toml::Table::new();
    root.insert("machine".into(), machine);
    for set in sets.iter().filter(|x| x.starts_with("machine.")) {
        schedlab::workload::scenario::apply_set(&mut root, set).map_err(|e| Failure::Input(format!("--set {set} (on --machine {m}): {e}")))?;
    }
    let machine = root.remove("machine").unwrap_or_else(|| toml::Value::Table(toml::Table::new()));
    let mut spec: schedlab::workload::scenario::MachineSpec = serde_path_to_error::deserialize(machine).map_err(|e| {
        let msg = e.inner().message().to_string();
        // An unknown key is reported at its parent: name the key itself.
        let key = msg.strip_prefix("unknown field `").and_then(|r| r.split('`').next());
        let path = match (e.path().to_string(), key) {
            (p, Some(k)) if p == "." || p.is_empty() => format!("machine.{k}"),
            (p, Some(k)) => format!("machine.{p}.{k}"),
            (p, None) if p == "." || p.is_empty() => "machine".to_string(),
            (p, None) => format!("machine.{p}"),
        };
        Failure::Input(format!("--machine {m}: {path}: {msg}"))
    })?;
    let dir = path.canonicalize().map_err(|e| Failure::Io(format!("--machine {m}: {e}")))?.parent().map(Path::to_path_buf).unwrap_or_default();
    for p in [&mut spec.lscpu, &mut spec.sysfs].into_iter().flatten() {
        if p.is_relative() {
            *p = dir.join(&*p);
        }
    }
    Ok(Some(spec))
}

/// Loads `path` with overrides (in order) and an optional machine.
pub fn load(path: &Path, sets: &[String], machine: Option<&str>) -> Result<Scenario, Failure> {
    let mut s = Scenario::load(path, sets)?;
    if let Some(m) = machine {
        apply_machine(&mut s, m, sets)?;
    }
    Ok(s)
}

/// Parses scenario `text` (named `file` in messages, its directory the base
/// of relative paths) with overrides and an optional machine.
pub fn parse(text: &str, file: &str, sets: &[String], machine: Option<&str>) -> Result<Scenario, Failure> {
    let mut s = Scenario::parse(text, file, sets)?;
    if let Some(m) = machine {
        apply_machine(&mut s, m, sets)?;
    }
    Ok(s)
}

/// The scheduler's name as results show it: eevdf, ext:simple, ext:x.
pub fn sched_label(s: &Scenario) -> String {
    match (s.scheduler.kind.as_str(), s.scheduler.sched.as_deref()) {
        ("ext", Some(x)) => format!("ext:{}", Path::new(x).file_name().map_or(x.to_string(), |f| f.to_string_lossy().trim_end_matches(".bpf.c").to_string())),
        (k, _) => k.to_string(),
    }
}

/// A finished run and what plots need from it.
pub struct Ran {
    /// The simulator after the run.
    pub sim: Sim,
    /// Its results.
    pub results: Results,
    /// The utilisation timeline, when plots asked for one.
    pub timeline: Option<Rc<RefCell<Timeline>>>,
}

/// Builds and runs a scenario without printing (compare, sweep).
/// `keep_going(now, end)` is asked every 65,536 events; false stops the
/// run and gives `Ok(None)` (an interrupted run has no results).
pub fn run_quiet_with(scenario: &Scenario, file: &str, want_timeline: bool, keep_going: &mut dyn FnMut(u64, u64) -> bool) -> Result<Option<Ran>, Failure> {
    run_controlled(scenario, file, want_timeline, None, keep_going)
}

/// Builds and runs a scenario without printing (compare, sweep).
pub fn run_quiet(scenario: &Scenario, file: &str, want_timeline: bool) -> Result<Ran, Failure> {
    run_bounded(scenario, file, want_timeline, None)
}

/// [`run_quiet`] under a wall-time bound (`--max-wall`): a run still going
/// when `max_wall` has passed stops there, and its results, covering the
/// time simulated so far, are marked partial ([`Results::partial`]).
pub fn run_bounded(scenario: &Scenario, file: &str, want_timeline: bool, max_wall: Option<MaxWall>) -> Result<Ran, Failure> {
    Ok(run_controlled(scenario, file, want_timeline, max_wall, &mut |_, _| true)?.expect("only keep_going interrupts"))
}

/// The run behind the others: stops early with partial results when
/// `max_wall` passes, and with `Ok(None)` when `keep_going(now, end)`
/// (asked every 65,536 events) says false.
pub fn run_controlled(
    scenario: &Scenario,
    file: &str,
    want_timeline: bool,
    max_wall: Option<MaxWall>,
    keep_going: &mut dyn FnMut(u64, u64) -> bool,
) -> Result<Option<Ran>, Failure> {
    let mut sim = world::build(scenario, file).map_err(|e| Failure::Input(e.to_string()))?;
    let timeline = want_timeline.then(|| attach_timeline(&mut sim, scenario.duration.0));
    let clock = max_wall.map(MaxWall::start);
    let mut interrupted = false;
    let completed = sim.run_while(&mut |now, end| {
        interrupted = !keep_going(now, end);
        !interrupted && clock.as_ref().is_none_or(|c| !c.expired())
    });
    if interrupted {
        return Ok(None);
    }
    if !completed {
        sim.finish_early();
    }
    sim.finish_trace().map_err(|e| Failure::Io(e.to_string()))?;
    let mut results = Results::collect(&sim, &scenario.title(file), &sched_label(scenario));
    if let (false, Some(m)) = (completed, max_wall) {
        results.mark_partial(&m.reason(), scenario.duration.0);
    }
    Ok(Some(Ran { sim, results, timeline }))
}

/// `--max-wall DURATION`: the wall time one run may take before it stops
/// with partial results. Wall time, so where a bounded run stops is not
/// deterministic; a run that ends within its bound is unaffected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaxWall {
    /// The bound as given, in nanoseconds.
    pub ns: u64,
}

impl MaxWall {
    /// Parses the option's value ("30s", "5m", "1.5s"); `None` for no bound.
    pub fn parse(text: Option<&str>) -> Result<Option<MaxWall>, Failure> {
        let Some(t) = text else { return Ok(None) };
        match schedlab::engine::time::parse_duration(t) {
            Ok(0) => Err(Failure::Input(format!("--max-wall: {t:?} is zero: give a wall time such as 30s or 5m, or leave the option out for no bound"))),
            Ok(ns) => Ok(Some(MaxWall { ns })),
            Err(e) => Err(Failure::Input(format!("--max-wall: {e}; e.g. --max-wall 30s or --max-wall 5m"))),
        }
    }

    /// What results name as the reason ("--max-wall 30s").
    pub fn reason(&self) -> String {
        format!("--max-wall {}", schedlab::engine::time::fmt_ns(self.ns))
    }

    /// Starts the clock for one run.
    pub fn start(self) -> WallClock {
        WallClock { limit: std::time::Duration::from_nanos(self.ns), started: std::time::Instant::now() }
    }
}

/// One run's wall clock under a [`MaxWall`] bound.
pub struct WallClock {
    limit: std::time::Duration,
    started: std::time::Instant,
}

impl WallClock {
    /// True once the bound has passed.
    pub fn expired(&self) -> bool {
        self.started.elapsed() >= self.limit
    }
}

/// A utilisation timeline of 400 buckets, attached before the run.
pub fn attach_timeline(sim: &mut Sim, duration: u64) -> Rc<RefCell<Timeline>> {
    let tl = Rc::new(RefCell::new(Timeline::new(sim.nr_cpus(), Timeline::bucket_for(duration, 400))));
    sim.add_trace_sink(Box::new(TimelineSink(tl.clone())));
    tl
}

/// One variant of a comparison: its label and the overrides that make it.
#[derive(Clone, Debug)]
pub struct Variant {
    /// How results name the variant ("" for the scheduler's own label).
    pub label: String,
    /// The `--set` overrides that make it.
    pub sets: Vec<String>,
}

/// What `compare` varies and fixes.
#[derive(Clone, Debug, Default)]
pub struct CompareSpec {
    /// Schedulers, comma-separated (None: the scenario's).
    pub sched: Option<String>,
    /// `NAME=on,off` (a grid axis) or one setting for all.
    pub features: Vec<String>,
    /// `--seed` for every variant.
    pub seed: Option<u64>,
    /// `--set` overrides for every variant.
    pub sets: Vec<String>,
    /// `--sched-set` read-only options for every sched_ext variant.
    pub sched_sets: Vec<String>,
    /// `--op-timeout` for every sched_ext variant.
    pub op_timeout: Option<String>,
}

/// The variants: schedulers x every combination of the listed feature settings.
pub fn variants(a: &CompareSpec) -> Result<Vec<Variant>, Failure> {
    let scheds: Vec<Option<String>> = match &a.sched {
        Some(list) => list.split(',').map(|s| s.trim()).filter(|s| !s.is_empty()).map(|s| Some(s.to_string())).collect(),
        None => vec![None],
    };
    if scheds.is_empty() {
        return Err(Failure::Input("--sched: expected a comma-separated list, e.g. eevdf,simple".into()));
    }
    // Each --feature is a list of settings; the grid is their product.
    let mut grids: Vec<Vec<(String, String)>> = vec![Vec::new()];
    let mut fixed = Vec::new();
    for f in &a.features {
        let settings: Vec<String> = match f.split_once('=') {
            Some((name, vals)) if vals.contains(',') => vals.split(',').map(|v| format!("{}={}", name.trim(), v.trim())).collect(),
            _ => {
                fixed.push(f.clone());
                continue;
            }
        };
        let mut next = Vec::new();
        for g in &grids {
            for s in &settings {
                let sets = feature_sets(std::slice::from_ref(s))?;
                next.push([g.clone(), vec![(s.clone(), sets[0].clone())]].concat());
            }
        }
        grids = next;
    }
    let fixed_sets = feature_sets(&fixed)?;
    let mut out = Vec::new();
    for s in &scheds {
        let sched_sets = sched_args(s.as_deref(), if s.as_deref() == Some("eevdf") { &[] } else { &a.sched_sets })?;
        for g in &grids {
            let mut label: Vec<String> = s.iter().cloned().collect();
            label.extend(g.iter().map(|(l, _)| l.clone()));
            let mut sets = a.sets.clone();
            if let Some(seed) = a.seed {
                sets.push(format!("seed={seed}"));
            }
            sets.extend(fixed_sets.iter().cloned());
            sets.extend(sched_sets.iter().cloned());
            sets.extend(op_timeout_arg(a.op_timeout.as_deref()));
            sets.extend(g.iter().map(|(_, set)| set.clone()));
            out.push(Variant { label: label.join(" "), sets });
        }
    }
    Ok(out)
}

/// What a sweep varies and fixes.
#[derive(Clone, Debug, Default)]
pub struct SweepSpec {
    /// `1..10` (inclusive), `1,5,9` or one seed.
    pub seeds: String,
    /// `PATH=V1,V2,...`, one grid axis each (the first varies slowest).
    pub params: Vec<String>,
    /// `--set` overrides for every run.
    pub sets: Vec<String>,
    /// `--feature` settings for every run.
    pub features: Vec<String>,
    /// `--sched` for every run.
    pub sched: Option<String>,
    /// `--sched-set` options for every run.
    pub sched_sets: Vec<String>,
    /// `--op-timeout` for every run.
    pub op_timeout: Option<String>,
    /// `--machine` for every run.
    pub machine: Option<String>,
    /// `--max-wall`: each run's wall-time bound; a run that reaches it
    /// fails (its partial results are not aggregated nor stored, so a
    /// resumed sweep runs it again).
    pub max_wall: Option<String>,
}

/// A sweep, planned: its grid, its jobs with their store keys, and how to
/// run one job. Local (rayon) and distributed (Ray) sweeps share it, so
/// their stores and aggregates are the same.
#[derive(Clone, Debug)]
pub struct SweepPlan {
    /// The scenario as messages and the aggregate JSON name it.
    pub file: String,
    /// The scenario's text.
    pub text: String,
    /// The seeds, in order.
    pub seeds: Vec<u64>,
    /// The grid axes: (parameter path, values).
    pub params: Vec<(String, Vec<String>)>,
    /// The grid points: one (parameter, value) list each.
    pub points: Vec<Vec<(String, String)>>,
    /// One job per (point, seed), points varying slowest.
    pub jobs: Vec<Job>,
    /// `--machine` for every run.
    pub machine: Option<String>,
    /// Each run's wall-time bound (not part of the store key).
    pub max_wall: Option<MaxWall>,
}

/// A sweep's aggregates over its outcome, and their CSV and JSON.
pub struct Aggregates {
    /// The metric names, in column order.
    pub names: Vec<String>,
    /// One row per (point, workload, metric).
    pub rows: Vec<AggRow>,
    /// The runs that failed or were ejected with an error.
    pub failed: Vec<Failed>,
    /// The aggregates as CSV (`<scenario>-sweep.csv`).
    pub csv: String,
    /// The aggregates as JSON (`<scenario>-sweep.json`).
    pub json: String,
}

impl SweepPlan {
    /// Plans a sweep of scenario `text` named `file`. Every grid point is
    /// loaded once here, so bad input fails before anything runs.
    pub fn new(text: &str, file: &str, a: &SweepSpec) -> Result<SweepPlan, Failure> {
        let seeds = sweep::parse_seeds(&a.seeds)?;
        let params: Vec<(String, Vec<String>)> = a.params.iter().map(|p| sweep::parse_param(p)).collect::<Result<_, _>>()?;
        let mut base = a.sets.clone();
        base.extend(feature_sets(&a.features)?);
        base.extend(sched_args(a.sched.as_deref(), &a.sched_sets)?);
        base.extend(op_timeout_arg(a.op_timeout.as_deref()));
        if let Some(m) = &a.machine {
            // Part of the key, so runs on another machine are not reused.
            base.push(format!("# machine={m}"));
        }
        let points = sweep::grid(&params);
        let jobs = sweep::jobs(text, &base, &points, &seeds);
        let max_wall = MaxWall::parse(a.max_wall.as_deref())?;
        let plan = SweepPlan { file: file.to_string(), text: text.to_string(), seeds, params, points, jobs, machine: a.machine.clone(), max_wall };
        for (i, _) in plan.points.iter().enumerate() {
            let job = plan.jobs.iter().find(|j| j.point == i).expect("a job per point");
            plan.scenario(job)?;
        }
        Ok(plan)
    }

    /// The scenario of one job.
    pub fn scenario(&self, job: &Job) -> Result<Scenario, Failure> {
        let mut sets: Vec<String> = job.overrides.iter().filter(|s| !s.starts_with('#')).cloned().collect();
        sets.push(format!("seed={}", job.seed));
        parse(&self.text, &self.file, &sets, self.machine.as_deref())
    }

    /// Runs one job: its summary, or why it failed.
    pub fn run(&self, job: &Job) -> Result<RunSummary, Failure> {
        Ok(self.run_while(job, &mut |_, _| true)?.expect("only keep_going interrupts"))
    }

    /// [`Self::run`], stopped with `Ok(None)` when `keep_going(now, end)`
    /// says false (Ctrl-C in Python). A run that reaches the plan's
    /// `--max-wall` fails: its partial results are neither aggregated nor
    /// stored, so a resumed sweep runs it again.
    pub fn run_while(&self, job: &Job, keep_going: &mut dyn FnMut(u64, u64) -> bool) -> Result<Option<RunSummary>, Failure> {
        let s = self.scenario(job)?;
        let Some(r) = run_controlled(&s, &self.file, false, self.max_wall, keep_going)? else { return Ok(None) };
        let summary = RunSummary::from_results(&sched_label(&s), &r.results);
        match summary.partial {
            Some(p) => Err(Failure::Io(format!("{p}; a partial run is not aggregated: give a larger --max-wall and run the sweep again (it resumes)"))),
            None => Ok(Some(summary)),
        }
    }

    /// Runs job `index` where it is (a worker), panics caught: the record
    /// text the store keeps, or the error [`sweep::execute`] would report.
    pub fn run_record(&self, index: usize) -> Result<String, String> {
        let job = self.jobs.get(index).ok_or_else(|| format!("job {index}: the sweep has {} jobs", self.jobs.len()))?;
        sweep::guarded_run(&|j: &Job| self.run(j), job)
            .map(|summary| sweep::record_text(job, summary))
            .map_err(|e| sweep::job_error(job, &e.to_string()))
    }

    /// Collects an outcome from the store after the jobs ran elsewhere:
    /// `errors` are the failed jobs (by index, with [`Self::run_record`]'s
    /// message), `ran` how many ran this time. A job with neither a record
    /// nor an error is reported as failed.
    pub fn collect(&self, dir: &Path, errors: &[(usize, String)], ran: usize) -> Outcome {
        let mut out = Outcome { records: Vec::new(), jobs: Vec::new(), errors: Vec::new(), reused: 0, ran: 0 };
        for (i, job) in self.jobs.iter().enumerate() {
            if let Some((_, e)) = errors.iter().find(|(k, _)| *k == i) {
                out.errors.push((job.clone(), e.clone()));
            } else if let Some(r) = sweep::load(dir, job) {
                out.records.push(r);
                out.jobs.push(job.clone());
            } else {
                out.errors.push((job.clone(), sweep::job_error(job, &format!("no record in {}", dir.join("runs").display()))));
            }
        }
        out.ran = ran.min(out.records.len());
        out.reused = out.records.len() - out.ran;
        out
    }

    /// The aggregates over the runs that completed; the failed ones (not
    /// run, or their scheduler ejected with an error) are named.
    pub fn aggregates(&self, outcome: &Outcome) -> Aggregates {
        let names: Vec<String> = self.params.iter().map(|p| p.0.clone()).collect();
        let rows = sweep::aggregate(&self.points, &outcome.jobs, &outcome.records);
        let failed = sweep::failures(&self.points, outcome);
        let csv = sweep::aggregate_csv(&names, &rows);
        let json = sweep::aggregate_json(&self.file, &self.params, &self.seeds, &rows, &failed);
        Aggregates { names, rows, failed, csv, json }
    }

    /// Writes `<dir>/<stem>-sweep.{csv,json}` atomically; returns the paths.
    pub fn write(&self, dir: &Path, stem: &str, agg: &Aggregates) -> Result<Vec<PathBuf>, Failure> {
        let csv_path = dir.join(format!("{stem}-sweep.csv"));
        let json_path = dir.join(format!("{stem}-sweep.json"));
        for (p, text) in [(&csv_path, &agg.csv), (&json_path, &agg.json)] {
            schedlab::results::csv::write_atomic(p, text.as_bytes()).map_err(|e| Failure::Io(format!("{}: {e}", p.display())))?;
        }
        Ok(vec![csv_path, json_path])
    }
}

/// The summary table of a sweep, as `schedlab sweep` prints it.
pub fn sweep_report(plan: &SweepPlan, outcome: &Outcome, agg: &Aggregates) -> String {
    format!(
        "schedlab sweep: {}, {} runs ({} ran, {} reused), median [min..max] over {} seeds\n\n{}{}",
        plan.file,
        plan.jobs.len(),
        outcome.ran,
        outcome.reused,
        plan.seeds.len(),
        sweep::aggregate_table(&agg.names, &agg.rows),
        sweep::failures_text(&agg.failed)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "seed = 3\nduration = \"20ms\"\n[machine]\npreset = \"2cpu\"\n[[workload]]\nkind = \"hog\"\ncount = 3\n";

    #[test]
    fn variants_are_the_product_of_schedulers_and_feature_settings() {
        let spec = CompareSpec { sched: Some("eevdf,simple".into()), features: vec!["RUN_TO_PARITY=on,off".into()], seed: Some(4), ..Default::default() };
        let v = variants(&spec).unwrap();
        let labels: Vec<&str> = v.iter().map(|v| v.label.as_str()).collect();
        assert_eq!(labels, ["eevdf RUN_TO_PARITY=on", "eevdf RUN_TO_PARITY=off", "simple RUN_TO_PARITY=on", "simple RUN_TO_PARITY=off"]);
        assert!(v[3].sets.contains(&"seed=4".to_string()) && v[3].sets.contains(&"features.RUN_TO_PARITY=false".to_string()));
        assert!(matches!(variants(&CompareSpec { features: vec!["NOPE=on,off".into()], ..Default::default() }), Err(Failure::Input(m)) if m.contains("NOPE")));
    }

    #[test]
    fn a_record_run_elsewhere_aggregates_like_a_local_sweep() {
        let spec = SweepSpec { seeds: "1..2".into(), params: vec!["workload.0.count=1,2".into()], ..Default::default() };
        let plan = SweepPlan::new(BASE, "t.toml", &spec).unwrap();
        assert_eq!(plan.jobs.len(), 4);
        let tmp = std::env::temp_dir().join(format!("schedlab-frontend-{}", std::process::id()));
        let (local, remote) = (tmp.join("local"), tmp.join("remote"));
        let outcome = sweep::execute(&local, &plan.jobs, &|j: &Job| plan.run(j), &|_, _| {}).unwrap();
        std::fs::create_dir_all(remote.join("runs")).unwrap();
        for i in 0..plan.jobs.len() {
            let text = plan.run_record(i).unwrap();
            sweep::store_record(&remote, &plan.jobs[i].key, &text).unwrap();
        }
        let collected = plan.collect(&remote, &[], plan.jobs.len());
        assert_eq!((collected.ran, collected.reused, collected.errors.len()), (4, 0, 0));
        assert_eq!(plan.aggregates(&outcome).json, plan.aggregates(&collected).json);
        assert_eq!(plan.aggregates(&outcome).csv, plan.aggregates(&collected).csv);
        // A job without a record and without an error is a failure, named.
        std::fs::remove_file(remote.join("runs").join(format!("{}.json", plan.jobs[1].key))).unwrap();
        let partial = plan.collect(&remote, &[], 0);
        assert_eq!(partial.errors.len(), 1);
        assert!(partial.errors[0].1.contains("no record"));
        let _ = std::fs::remove_dir_all(&tmp);
        assert!(matches!(SweepPlan::new(BASE, "t.toml", &SweepSpec { seeds: "x".into(), ..Default::default() }), Err(Failure::Input(_))));
    }
}
