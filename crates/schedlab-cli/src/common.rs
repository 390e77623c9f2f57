//! What `run`, `compare` and `sweep` share: loading a scenario with the
//! command line's overrides, running it, and the output options (CSV,
//! plots, Perfetto trace).

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use schedlab::results::report::Results;
use schedlab::sched::sim::Sim;
use schedlab::results::trace::{PerfettoWriter, Timeline};

use crate::Failure;

pub use schedlab_host::frontend::{attach_timeline, feature_sets, load, sched_label};

/// A failure of the shared front-end code, with the same kind.
impl From<schedlab_host::frontend::Failure> for Failure {
    fn from(f: schedlab_host::frontend::Failure) -> Failure {
        match f {
            schedlab_host::frontend::Failure::Input(m) => Failure::Input(m),
            schedlab_host::frontend::Failure::Io(m) => Failure::Io(m),
        }
    }
}

/// Output options of `run`.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct OutputArgs {
    /// Write the results as CSV tables into this directory:
    /// <scenario>-workloads.csv, -tasks.csv and -cpus.csv.
    #[arg(long, value_name = "DIR")]
    pub csv: Option<PathBuf>,
    /// Write plots (SVG and PNG) into this directory: latency histogram and
    /// CDF per workload, per-CPU utilisation over time.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// Write a Perfetto trace (sched_switch, sched_waking, sched_wakeup_new
    /// per CPU, with thread and process names); open it in ui.perfetto.dev.
    /// With --real: the kernel's own trace, recorded through tracefs (root);
    /// with --vm the guest kernel's, per scheduler (FILE-NAME.ext when several).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Keep only the trace events in this window of simulated time, e.g.
    /// 2s..3s (with --real: of the run's time from the common start).
    #[arg(long, value_name = "FROM..TO", requires = "trace")]
    pub trace_window: Option<String>,
    /// Check the simulator's invariants after every event (runqueue counts,
    /// affinity, EEVDF keys and lag, sched_ext's DSQs and counts), as debug
    /// builds do; a violation stops the run with a message naming it. Slower;
    /// for long runs whose results you doubt.
    #[arg(long)]
    pub check: bool,
}

/// `--trace-window 2s..3s` in nanoseconds.
pub fn parse_window(s: &str) -> Result<(u64, u64), Failure> {
    let bad = |m: String| Failure::Input(format!("--trace-window {s}: {m}"));
    let (a, b) = s.split_once("..").ok_or_else(|| bad("expected FROM..TO, e.g. 2s..3s".into()))?;
    let a = if a.trim().is_empty() { 0 } else { schedlab::engine::time::parse_duration(a).map_err(|e| bad(e.to_string()))? };
    let b = if b.trim().is_empty() { u64::MAX } else { schedlab::engine::time::parse_duration(b).map_err(|e| bad(e.to_string()))? };
    if b <= a {
        return Err(bad("the window ends before it starts".into()));
    }
    Ok((a, b))
}

/// `--trace` of `run --real`: the kernel's own trace, recorded through
/// tracefs (`schedlab_real::TraceRequest`).
pub fn real_trace(out: &OutputArgs) -> Result<Option<schedlab_real::TraceRequest>, Failure> {
    let Some(path) = &out.trace else { return Ok(None) };
    let window = out.trace_window.as_deref().map(parse_window).transpose()?;
    Ok(Some(schedlab_real::TraceRequest { path: path.clone(), window }))
}

/// File-name stem of a scenario path: scenarios/x.toml -> x.
pub fn stem(path: &Path) -> String {
    path.file_stem().map_or("scenario".into(), |s| s.to_string_lossy().into_owned())
}

/// Attaches what `--trace` and `--plot` need, before the run.
pub fn attach(sim: &mut Sim, out: &OutputArgs, duration: u64) -> Result<Option<Rc<RefCell<Timeline>>>, Failure> {
    if let Some(p) = &out.trace {
        let window = out.trace_window.as_deref().map(parse_window).transpose()?;
        let n = sim.nr_cpus();
        let w = PerfettoWriter::create(p, n, window).map_err(|e| Failure::Io(format!("{}: {e}", p.display())))?;
        sim.add_trace_sink(Box::new(w));
    }
    Ok(out.plot.as_ref().map(|_| attach_timeline(sim, duration)))
}

/// After the run: flush the trace, write CSV and plots. Lists what it wrote
/// on stderr unless quiet.
pub fn write_outputs(sim: &mut Sim, results: &Results, timeline: Option<Rc<RefCell<Timeline>>>, out: &OutputArgs, stem: &str, quiet: bool) -> Result<(), Failure> {
    sim.finish_trace().map_err(|e| Failure::Io(format!("{}: {e}", out.trace.as_ref().map_or(String::new(), |p| p.display().to_string()))))?;
    let mut wrote: Vec<PathBuf> = out.trace.iter().cloned().collect();
    if let Some(dir) = &out.csv {
        wrote.extend(schedlab::results::csv::write_results(results, dir, stem).map_err(|e| Failure::Io(format!("{}: {e}", dir.display())))?);
    }
    if let Some(dir) = &out.plot {
        wrote.extend(plot_run(dir, stem, &results.scenario, &results.scheduler, &sim.metrics, timeline.as_ref().map(|t| t.borrow().clone())).map_err(|e| Failure::Io(e.to_string()))?);
    }
    if !quiet {
        for p in wrote {
            eprintln!("schedlab: wrote {}", p.display());
        }
    }
    Ok(())
}

/// Latency histogram and CDF per workload that records latency, and the
/// utilisation heat map of one run.
pub fn plot_run(dir: &Path, stem: &str, title: &str, sched: &str, metrics: &[schedlab::sched::sim::WorkloadMetrics], timeline: Option<Timeline>) -> Result<Vec<PathBuf>, schedlab_plot::PlotError> {
    use schedlab_plot as plot;
    let mut wrote = Vec::new();
    for m in metrics {
        if m.latency.is_empty() {
            continue;
        }
        let series = [(format!("{} under {sched}", m.name), &m.latency)];
        let base = dir.join(format!("{stem}-{}-latency-hist", plot::slug(&m.name)));
        wrote.extend(plot::latency_histogram(&base, &format!("{title}: {} wakeup latency", m.name), &series)?);
        let base = dir.join(format!("{stem}-{}-latency-cdf", plot::slug(&m.name)));
        wrote.extend(plot::latency_cdf(&base, &format!("{title}: {} wakeup latency CDF", m.name), &series)?);
    }
    if let Some(tl) = timeline {
        let base = dir.join(format!("{stem}-cpu-util"));
        wrote.extend(plot::utilisation(&base, &format!("{title}: CPU utilisation under {sched}"), &tl)?);
    }
    Ok(wrote)
}

/// A progress bar on stderr with an ETA, hidden when quiet or when stderr
/// is not a terminal.
pub fn progress_bar(total: usize, what: &str, quiet: bool) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    if quiet || !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let b = indicatif::ProgressBar::new(total as u64);
    b.set_style(indicatif::ProgressStyle::with_template(&format!("{{bar:40}} {{pos}}/{{len}} {what}, {{elapsed}} elapsed, eta {{eta}}")).expect("valid template"));
    b
}

/// A real run's (status, message): 2 is bad input, anything else I/O.
impl From<crate::real::RealFailure> for Failure {
    fn from((code, msg): crate::real::RealFailure) -> Failure {
        if code == 2 {
            Failure::Input(msg)
        } else {
            Failure::Io(msg)
        }
    }
}


/// An I/O error on `p` as a failure naming the file.
pub fn io_err(p: &Path) -> impl Fn(std::io::Error) -> Failure + '_ {
    move |e| Failure::Io(format!("{}: {e}", p.display()))
}
