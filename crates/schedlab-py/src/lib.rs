//! `schedlab._native`: the simulator for the `schedlab` Python package
//! (python/schedlab). Thin: every decision is the library's
//! ([`schedlab_host::frontend`]), shared with the CLI, so a run from Python and
//! the CLI's `--json` for the same scenario and seed are the same bytes.
//! The Python layer turns what this returns into dicts, DataFrames and
//! numpy arrays.
//!
//! Long work runs on its own thread with the GIL released; the calling
//! thread wakes every 50 ms to let Python handle signals, and a Ctrl-C
//! stops the simulation at its next progress check (every 65,536 events)
//! and raises KeyboardInterrupt.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyOSError};
use pyo3::prelude::*;
use rayon::prelude::*;
use schedlab_host::frontend::{self, CompareSpec, Failure, MaxWall, SweepPlan, SweepSpec};
use schedlab::results::compare::{self as cmp, RunSummary};
use schedlab::results::sweep;

create_exception!(_native, InputError, PyException, "Bad input: the CLI's one-line message (exit code 2).");

fn to_py(f: Failure) -> PyErr {
    match f {
        Failure::Input(m) => InputError::new_err(m),
        Failure::Io(m) => PyOSError::new_err(m),
    }
}

/// Runs `work` on its own thread with the GIL released, waking to let
/// Python handle signals; on KeyboardInterrupt (or any signal handler's
/// exception) sets the cancel flag, waits for the work to stop and raises.
fn interruptible<T: Send>(py: Python<'_>, work: impl FnOnce(&AtomicBool) -> T + Send) -> PyResult<T> {
    let cancel = AtomicBool::new(false);
    let finished = AtomicBool::new(false);
    let wait = |limit: Option<u32>| {
        let mut n = 0;
        while !finished.load(Ordering::Acquire) && limit.is_none_or(|l| n < l) {
            std::thread::sleep(Duration::from_millis(5));
            n += 1;
        }
        finished.load(Ordering::Acquire)
    };
    std::thread::scope(|sc| {
        let handle = std::thread::Builder::new()
            .name("schedlab".into())
            // The simulator's recursion (hosted schedulers' callbacks) wants
            // what a main thread has.
            .stack_size(64 << 20)
            .spawn_scoped(sc, || {
                // Set even when the work panics, so the waiter never hangs.
                struct Done<'a>(&'a AtomicBool);
                impl Drop for Done<'_> {
                    fn drop(&mut self) {
                        self.0.store(true, Ordering::Release);
                    }
                }
                let _done = Done(&finished);
                work(&cancel)
            })
            .map_err(|e| PyOSError::new_err(format!("cannot start the simulation thread: {e}")))?;
        // Wake every 50 ms to let Python run its signal handlers.
        while !py.allow_threads(|| wait(Some(10))) {
            if let Err(e) = py.check_signals() {
                cancel.store(true, Ordering::Relaxed);
                py.allow_threads(|| wait(None));
                let _ = handle.join();
                return Err(e);
            }
        }
        handle.join().map_err(|p| {
            let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()));
            pyo3::exceptions::PyRuntimeError::new_err(format!("internal error (panic): {}", msg.unwrap_or_else(|| "no message".into())))
        })
    })
}

const INTERRUPTED: &str = "interrupted";

/// One run's outputs, as text and numbers the Python layer wraps.
#[pyclass(frozen, module = "schedlab._native")]
struct NativeRun {
    /// The CLI's `--json` text.
    #[pyo3(get)]
    json: String,
    /// (suffix, CSV text) per table the CLI's `--csv` writes.
    #[pyo3(get)]
    tables: Vec<(String, String)>,
    /// Per workload with latency: (name, [(value_ns, count)], [(quantile, value_ns)]).
    #[pyo3(get)]
    latency: Vec<WorkloadLatency>,
}

/// (workload name, [(value_ns, count)] per recorded bucket, [(quantile, value_ns)]).
type WorkloadLatency = (String, Vec<(u64, u64)>, Vec<(f64, u64)>);

/// (store key, seed, the grid point as [(param, value)]).
type JobRow = (String, u64, Vec<(String, String)>);

/// The quantiles `latency()` reports (as the CLI's tables: p50 .. max).
const QUANTILES: [f64; 6] = [0.5, 0.9, 0.99, 0.999, 0.9999, 1.0];

/// Simulates scenario `text` (named `file`; its directory is the base of
/// relative paths) with overrides in order, an optional machine.
#[pyfunction]
#[pyo3(signature = (text, file, sets, machine=None, max_wall=None))]
fn run(py: Python<'_>, text: String, file: String, sets: Vec<String>, machine: Option<String>, max_wall: Option<String>) -> PyResult<NativeRun> {
    let out = interruptible(py, |cancel| -> Result<NativeRun, Failure> {
        let s = frontend::parse(&text, &file, &sets, machine.as_deref())?;
        let max_wall = MaxWall::parse(max_wall.as_deref())?;
        let ran = frontend::run_controlled(&s, &file, false, max_wall, &mut |_, _| !cancel.load(Ordering::Relaxed))?;
        let Some(ran) = ran else { return Err(Failure::Io(INTERRUPTED.into())) };
        let tables = schedlab::results::csv::results_tables(&ran.results).into_iter().map(|(n, t)| (n.to_string(), t)).collect();
        let latency = ran
            .sim
            .metrics
            .iter()
            .filter(|m| !m.latency.is_empty())
            .map(|m| {
                let h = &m.latency;
                let buckets = h.iter_recorded().map(|v| (v.value_iterated_to(), v.count_at_value())).collect();
                let qs = QUANTILES.iter().map(|&q| (q, if q >= 1.0 { h.max() } else { h.value_at_quantile(q) })).collect();
                (m.name.clone(), buckets, qs)
            })
            .collect();
        Ok(NativeRun { json: ran.results.to_json(), tables, latency })
    })?;
    out.map_err(to_py)
}

/// Compares variants of scenario `text`: (comparison JSON, CSV, tables text,
/// seed). The CLI's `compare`, without writing files.
#[pyfunction]
#[pyo3(signature = (text, file, sched, features, seed, sets, sched_sets, op_timeout=None, machine=None, max_wall=None))]
#[allow(clippy::too_many_arguments)]
fn compare(
    py: Python<'_>,
    text: String,
    file: String,
    sched: Option<String>,
    features: Vec<String>,
    seed: Option<u64>,
    sets: Vec<String>,
    sched_sets: Vec<String>,
    op_timeout: Option<String>,
    machine: Option<String>,
    max_wall: Option<String>,
) -> PyResult<(String, String, String, u64)> {
    let spec = CompareSpec { sched, features, seed, sets, sched_sets, op_timeout };
    let out = interruptible(py, |cancel| -> Result<(String, String, String, u64), Failure> {
        let max_wall = MaxWall::parse(max_wall.as_deref())?;
        let variants = frontend::variants(&spec)?;
        let mut scenarios = Vec::new();
        for v in &variants {
            scenarios.push(frontend::parse(&text, &file, &v.sets, machine.as_deref())?);
        }
        let ran: Vec<Result<RunSummary, Failure>> = variants
            .par_iter()
            .zip(scenarios.par_iter())
            .map(|(v, s)| {
                let r = frontend::run_controlled(s, &file, false, max_wall, &mut |_, _| !cancel.load(Ordering::Relaxed))?.ok_or_else(|| Failure::Io(INTERRUPTED.into()))?;
                let label = if v.label.is_empty() { frontend::sched_label(s) } else { v.label.clone() };
                Ok(RunSummary::from_results(&label, &r.results))
            })
            .collect();
        let runs = ran.into_iter().collect::<Result<Vec<_>, _>>()?;
        let title = scenarios[0].title(&file);
        Ok((cmp::to_json(&title, &runs, None), cmp::to_csv(&runs), cmp::tables(&runs), scenarios[0].seed))
    })?;
    out.map_err(to_py)
}

/// A planned sweep (`schedlab_host::frontend::SweepPlan`): its jobs, one job's
/// run (on a Ray worker), the store, the aggregates.
#[pyclass(frozen, module = "schedlab._native")]
struct NativeSweep {
    plan: SweepPlan,
}

#[pymethods]
impl NativeSweep {
    #[new]
    #[pyo3(signature = (text, file, seeds, params, sets, features, sched, sched_sets, op_timeout=None, machine=None, max_wall=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        text: String,
        file: String,
        seeds: String,
        params: Vec<String>,
        sets: Vec<String>,
        features: Vec<String>,
        sched: Option<String>,
        sched_sets: Vec<String>,
        op_timeout: Option<String>,
        machine: Option<String>,
        max_wall: Option<String>,
    ) -> PyResult<Self> {
        let spec = SweepSpec { seeds, params, sets, features, sched, sched_sets, op_timeout, machine, max_wall };
        SweepPlan::new(&text, &file, &spec).map(|plan| NativeSweep { plan }).map_err(to_py)
    }

    /// (key, seed, point as [(param, value)]) per job, in job order.
    #[getter]
    fn jobs(&self) -> Vec<JobRow> {
        self.plan.jobs.iter().map(|j| (j.key.clone(), j.seed, self.plan.points[j.point].clone())).collect()
    }

    /// The parameter names, in grid order.
    #[getter]
    fn params(&self) -> Vec<String> {
        self.plan.params.iter().map(|p| p.0.clone()).collect()
    }

    /// The stored record text of job `index` in `dir`, if complete.
    fn stored(&self, dir: PathBuf, index: usize) -> Option<String> {
        let job = self.plan.jobs.get(index)?;
        sweep::load(&dir, job)?;
        std::fs::read_to_string(dir.join("runs").join(format!("{}.json", job.key))).ok()
    }

    /// Runs job `index` here: (true, record text) or (false, error).
    fn run_record(&self, py: Python<'_>, index: usize) -> PyResult<(bool, String)> {
        let out = interruptible(py, |_| self.plan.run_record(index))?;
        Ok(match out {
            Ok(t) => (true, t),
            Err(e) => (false, e),
        })
    }

    /// Stores job `index`'s record text (from a worker) in `dir`, atomically.
    fn store(&self, dir: PathBuf, index: usize, text: &str) -> PyResult<()> {
        let job = self.plan.jobs.get(index).ok_or_else(|| InputError::new_err(format!("job {index}: the sweep has {} jobs", self.plan.jobs.len())))?;
        let rec: sweep::Record = serde_json::from_str(text).map_err(|e| InputError::new_err(format!("job {index}: not a run record: {e}")))?;
        if rec.key != job.key {
            return Err(InputError::new_err(format!("job {index}: the record is for run {}, not {}", rec.key, job.key)));
        }
        std::fs::create_dir_all(dir.join("runs")).map_err(|e| PyOSError::new_err(format!("{}: {e}", dir.display())))?;
        sweep::store_record(&dir, &job.key, text).map_err(|e| PyOSError::new_err(e.to_string()))
    }

    /// Runs every job without a stored record here, in parallel (`threads`;
    /// 0: one per CPU), with a bar of runs done / total and the ETA on
    /// stderr when `progress`: (ran, [(index, error)]).
    #[pyo3(signature = (dir, threads=0, progress=false))]
    fn run_local(&self, py: Python<'_>, dir: PathBuf, threads: usize, progress: bool) -> PyResult<(usize, Vec<(usize, String)>)> {
        let plan = &self.plan;
        let out = interruptible(py, |cancel| -> Result<(usize, Vec<(usize, String)>), Failure> {
            let run = |job: &sweep::Job| -> Result<RunSummary, Failure> { plan.run_while(job, &mut |_, _| !cancel.load(Ordering::Relaxed))?.ok_or_else(|| Failure::Io(INTERRUPTED.into())) };
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().map_err(|e| Failure::Io(e.to_string()))?;
            let bar = progress.then(|| {
                let b = indicatif::ProgressBar::new(plan.jobs.len() as u64);
                b.set_style(indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} runs, {elapsed} elapsed, eta {eta}").expect("valid template"));
                b
            });
            let outcome = pool.install(|| sweep::execute(&dir, &plan.jobs, &run, &|done, _| bar.iter().for_each(|b| b.set_position(done as u64)))).map_err(|e| Failure::Io(e.to_string()))?;
            bar.iter().for_each(|b| b.finish_and_clear());
            let errors = outcome.errors.iter().map(|(j, e)| (plan.jobs.iter().position(|k| k.key == j.key).unwrap_or(0), e.clone())).collect();
            Ok((outcome.ran, errors))
        })?;
        out.map_err(to_py)
    }

    /// Collects the store after the runs (`errors` by job index, `ran` this
    /// time), writes `<dir>/<stem>-sweep.{csv,json}`: (csv, json, report
    /// text, [(index, error)] of failed runs, paths written).
    fn finish(&self, dir: PathBuf, stem: &str, errors: Vec<(usize, String)>, ran: usize) -> PyResult<(String, String, String, Vec<String>)> {
        let outcome = self.plan.collect(&dir, &errors, ran);
        let agg = self.plan.aggregates(&outcome);
        let paths = self.plan.write(&dir, stem, &agg).map_err(to_py)?;
        let report = frontend::sweep_report(&self.plan, &outcome, &agg);
        Ok((agg.csv, agg.json, report, paths.iter().map(|p| p.display().to_string()).collect()))
    }
}

/// `--sched` / `--sched-set` / `--op-timeout` and `--feature` values as
/// overrides, as the CLI's `run` makes them: (scheduler sets, feature sets).
#[pyfunction]
#[pyo3(signature = (sched, sched_sets, op_timeout, features))]
fn option_sets(sched: Option<String>, sched_sets: Vec<String>, op_timeout: Option<String>, features: Vec<String>) -> PyResult<(Vec<String>, Vec<String>)> {
    let mut s = frontend::sched_args(sched.as_deref(), &sched_sets).map_err(to_py)?;
    s.extend(frontend::op_timeout_arg(op_timeout.as_deref()));
    let f = frontend::feature_sets(&features).map_err(to_py)?;
    Ok((s, f))
}

/// A scenario given as a dict (as JSON text) in TOML.
#[pyfunction]
fn json_to_toml(json: &str) -> PyResult<String> {
    let v: serde_json::Value = serde_json::from_str(json).map_err(|e| InputError::new_err(format!("<dict>: {e}")))?;
    let t: toml::Value = serde_json::from_value(v).map_err(|e| InputError::new_err(format!("<dict>: cannot be TOML: {e}")))?;
    toml::to_string(&t).map_err(|e| InputError::new_err(format!("<dict>: cannot be TOML: {e}")))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("InputError", m.py().get_type::<InputError>())?;
    m.add("VERSION", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(compare, m)?)?;
    m.add_function(wrap_pyfunction!(json_to_toml, m)?)?;
    m.add_function(wrap_pyfunction!(option_sets, m)?)?;
    m.add_class::<NativeRun>()?;
    m.add_class::<NativeSweep>()?;
    Ok(())
}
