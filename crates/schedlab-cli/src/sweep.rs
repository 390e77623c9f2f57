//! `schedlab sweep`: a grid of seeds x parameter values, in parallel,
//! resumable, aggregated across seeds.

use std::path::{Path, PathBuf};

use schedlab_host::frontend::SweepPlan;
use schedlab::results::sweep;

use crate::common;
use crate::Failure;

#[derive(clap::Args, Debug)]
pub struct SweepArgs {
    /// Scenario file (TOML).
    pub scenario: PathBuf,
    /// Seeds: 1..10 (inclusive), 1,5,9 or 3.
    #[arg(long, default_value = "1..5")]
    pub seeds: String,
    /// A scenario field and its values, e.g. workload.0.count=2,4,8;
    /// repeat for a grid (the first varies slowest).
    #[arg(long = "param", value_name = "PATH=V1,V2,...")]
    pub params: Vec<String>,
    /// Override a scenario field for every run.
    #[arg(long = "set", value_name = "PATH=VALUE")]
    pub sets: Vec<String>,
    /// Set a kernel feature for every run, e.g. RUN_TO_PARITY=off.
    #[arg(long = "feature", value_name = "NAME[=on|off]")]
    pub features: Vec<String>,
    /// Scheduler for every run (eevdf, a shipped sched_ext name or a .bpf.c).
    #[arg(long, value_name = "NAME|FILE")]
    pub sched: Option<String>,
    #[arg(long = "sched-set", value_name = "NAME=VALUE")]
    pub sched_sets: Vec<String>,
    /// Wall time one sched_ext callback may run before it is taken for an
    /// endless loop and the scheduler is ejected (default 5s; 0 = no limit).
    #[arg(long = "op-timeout", value_name = "DURATION")]
    pub op_timeout: Option<String>,
    /// Wall time each run may take; a run that reaches it fails with that
    /// reason (named under the aggregates, not stored: a resumed sweep runs
    /// it again).
    #[arg(long = "max-wall", value_name = "DURATION")]
    pub max_wall: Option<String>,
    /// Machine preset, CPU count, sysfs copy or lscpu -p file.
    #[arg(long)]
    pub machine: Option<String>,
    /// Output directory: runs/<key>.json per finished run (reused when the
    /// sweep is started again), <scenario>-sweep.csv and .json aggregates.
    /// Default: schedlab-out/<scenario>-sweep.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Runs at once (default: one per CPU).
    #[arg(long, short = 'j')]
    pub jobs: Option<usize>,
    /// Write plots of the aggregates (SVG and PNG) into this directory.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// Print nothing but errors.
    #[arg(long, short)]
    pub quiet: bool,
    /// Run each (point, seed) as a task on a Ray cluster at ADDRESS (a
    /// local one when no address is given), through the schedlab Python
    /// package (`pip install '.[ray]'`; $SCHEDLAB_PYTHON, else python3). Same
    /// store, same aggregates.
    #[arg(long, value_name = "ADDRESS", num_args = 0..=1, default_missing_value = "")]
    pub ray: Option<String>,
}

/// What the sweep varies and fixes, for the shared planner.
pub fn spec(a: &SweepArgs) -> schedlab_host::frontend::SweepSpec {
    schedlab_host::frontend::SweepSpec {
        seeds: a.seeds.clone(),
        params: a.params.clone(),
        sets: a.sets.clone(),
        features: a.features.clone(),
        sched: a.sched.clone(),
        sched_sets: a.sched_sets.clone(),
        op_timeout: a.op_timeout.clone(),
        machine: a.machine.clone(),
        max_wall: a.max_wall.clone(),
    }
}

pub fn sweep(a: SweepArgs) -> Result<(), Failure> {
    let file = a.scenario.display().to_string();
    let text = std::fs::read_to_string(&a.scenario).map_err(|e| Failure::Io(format!("{file}: {e}")))?;
    let plan = SweepPlan::new(&text, &file, &spec(&a))?;
    let stem = common::stem(&a.scenario);
    let dir = a.out.clone().unwrap_or_else(|| PathBuf::from("schedlab-out").join(format!("{stem}-sweep")));
    if let Some(address) = &a.ray {
        return crate::ray::sweep(&a, address, &dir);
    }
    if !a.quiet {
        eprintln!("schedlab: sweep of {file}: {} points x {} seeds = {} runs, into {}", plan.points.len(), plan.seeds.len(), plan.jobs.len(), dir.display());
    }
    let bar = common::progress_bar(plan.jobs.len(), "runs", a.quiet);
    let run = |job: &sweep::Job| plan.run(job);
    let progress = |done: usize, _total: usize| bar.set_position(done as u64);
    let pool = rayon::ThreadPoolBuilder::new().num_threads(a.jobs.unwrap_or(0)).build().map_err(|e| Failure::Io(e.to_string()))?;
    let outcome = pool.install(|| sweep::execute(&dir, &plan.jobs, &run, &progress));
    bar.finish_and_clear();
    let outcome = outcome.map_err(|e| Failure::Io(e.to_string()))?;
    finish(&a, &plan, &dir, &stem, &outcome)
}

/// After the runs: the aggregates (over the runs that completed; the
/// failed ones are named), their files and plots, the table, and the exit.
pub fn finish(a: &SweepArgs, plan: &SweepPlan, dir: &Path, stem: &str, outcome: &sweep::Outcome) -> Result<(), Failure> {
    let agg = plan.aggregates(outcome);
    let mut wrote = plan.write(dir, stem, &agg)?;
    if let Some(pd) = &a.plot {
        wrote.extend(plot_sweep(pd, stem, &plan.file, &agg.names, &plan.points, &agg.rows).map_err(|e| Failure::Io(e.to_string()))?);
    }
    if !a.quiet {
        print!("{}", schedlab_host::frontend::sweep_report(plan, outcome, &agg));
        for p in wrote {
            eprintln!("schedlab: wrote {}", p.display());
        }
    }
    if !outcome.errors.is_empty() {
        let errs: Vec<&str> = outcome.errors.iter().map(|(_, e)| e.as_str()).collect();
        return Err(Failure::Input(format!("{} runs failed (the aggregates are over the others):\n  {}", errs.len(), errs.join("\n  "))));
    }
    Ok(())
}

/// Per workload, the headline metric's median with min..max whiskers over
/// the grid points.
fn plot_sweep(dir: &Path, stem: &str, title: &str, names: &[String], points: &[Vec<(String, String)>], rows: &[sweep::AggRow]) -> Result<Vec<PathBuf>, schedlab_plot::PlotError> {
    use schedlab_plot::{self as plot, Bars};
    let mut wrote = Vec::new();
    let label = |p: &Vec<(String, String)>| if p.is_empty() { "all".to_string() } else { p.iter().map(|(k, v)| format!("{}={v}", k.rsplit('.').next().unwrap_or(k))).collect::<Vec<_>>().join(" ") };
    let mut workloads: Vec<String> = Vec::new();
    for r in rows {
        if !workloads.contains(&r.workload) {
            workloads.push(r.workload.clone());
        }
    }
    for w in workloads {
        let mine: Vec<&sweep::AggRow> = rows.iter().filter(|r| r.workload == w).collect();
        let (metrics, y_desc, scale): (&[&str], &str, f64) = if mine.iter().any(|r| r.metric == "p99") {
            (&["p99", "max"], "wakeup latency (µs), median over seeds, whiskers min..max", 1e3)
        } else if mine.iter().any(|r| r.metric == "makespan") {
            (&["makespan"], "makespan (ms), median over seeds, whiskers min..max", 1e6)
        } else {
            (&["work_per_s"], "work per simulated second (1/s), median, whiskers min..max", 1.0)
        };
        let series = metrics
            .iter()
            .map(|m| {
                let vals = points
                    .iter()
                    .map(|p| match mine.iter().find(|r| &r.point == p && r.metric == *m) {
                        Some(r) => (r.stat.median as f64 / scale, Some((r.stat.min as f64 / scale, r.stat.max as f64 / scale))),
                        None => (0.0, None),
                    })
                    .collect();
                (m.to_string(), vals)
            })
            .collect();
        let bars = Bars {
            title: format!("{title}: {w} by {}", if names.is_empty() { "seed".to_string() } else { names.join(" x ") }),
            y_desc: y_desc.to_string(),
            categories: points.iter().map(label).collect(),
            series,
        };
        wrote.extend(plot::bars(&dir.join(format!("{stem}-sweep-{}", plot::slug(&w))), &bars)?);
    }
    Ok(wrote)
}
