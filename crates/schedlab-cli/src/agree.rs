//! `schedlab agree [--vm]`: how far the simulation is from the real kernel.
//! Each scenario that fits this machine runs for real (on this host's
//! kernel, or with --vm in the sched_ext guest) and is simulated on the
//! calibrated machine (`--machine FILE`, else a quick `calibrate` first);
//! per workload it prints real and simulated latency p50 / p99 / max,
//! makespan and CPU shares with the error of each
//! (`schedlab::results::agree`), and writes the table as CSV and JSON (and
//! a plot with --plot).

use std::path::{Path, PathBuf};

use rayon::prelude::*;
use schedlab::results::agree::{self, ScenarioFigures};
use schedlab::results::report::Results;
use schedlab::workload::scenario::Scenario;
use schedlab_real::{RealError, RealOptions};
use serde_json::Value;

use crate::common::io_err;
use crate::Failure;

/// Options of `agree`.
#[derive(clap::Args, Clone, Debug)]
pub struct AgreeArgs {
    /// Scenario files (default: every scenarios/*.toml under the current
    /// directory, as in a schedlab checkout).
    pub scenarios: Vec<PathBuf>,
    /// The calibrated machine (a machine file from `schedlab calibrate`, with
    /// --vm from `calibrate --vm`); default: calibrate now (quick) and keep
    /// the file in --out.
    #[arg(long, value_name = "FILE")]
    pub machine: Option<PathBuf>,
    /// Override a field of every scenario, e.g. duration="2s" (repeatable).
    #[arg(long = "set", value_name = "PATH=VALUE")]
    pub sets: Vec<String>,
    /// Run the real side in the sched_ext kernel under qemu, one boot per
    /// scenario; sched_ext scenarios then run under their own scheduler.
    #[arg(long)]
    pub vm: bool,
    /// With --vm: the guest's CPU count (default 2).
    #[arg(long, value_name = "N", requires = "vm")]
    pub vm_cpus: Option<usize>,
    /// Directory for agree.csv, agree.json and the calibrated machine file.
    #[arg(long, default_value = "schedlab-out")]
    pub out: PathBuf,
    /// Also print the JSON to stdout ("-") or write it here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write plots (SVG and PNG) of simulated over real figures into this directory.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Print nothing but errors (the files are still written).
    #[arg(long, short)]
    pub quiet: bool,
}

/// The scenario files: those given, else ./scenarios/*.toml, sorted.
fn scenario_files(given: &[PathBuf]) -> Result<Vec<PathBuf>, Failure> {
    if !given.is_empty() {
        return Ok(given.to_vec());
    }
    let dir = Path::new("scenarios");
    let entries = std::fs::read_dir(dir).map_err(|e| {
        Failure::Input(format!("agree: no scenarios given and ./scenarios cannot be read ({e}); name scenario files, or run from a schedlab checkout"))
    })?;
    let mut files: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "toml")).collect();
    files.sort();
    if files.is_empty() {
        return Err(Failure::Input("agree: ./scenarios holds no .toml files; name scenario files".into()));
    }
    Ok(files)
}

/// The machine file: the one given, else a quick calibration written into --out.
fn machine(a: &AgreeArgs) -> Result<PathBuf, Failure> {
    if let Some(m) = &a.machine {
        if !m.is_file() {
            return Err(Failure::Input(format!("--machine {}: not a file; give the machine file `schedlab calibrate -o FILE` wrote", m.display())));
        }
        return Ok(m.clone());
    }
    let out = a.out.join(if a.vm { "agree-machine-vm.toml" } else { "agree-machine.toml" });
    if !a.quiet {
        eprintln!("schedlab: no --machine; calibrating {} first (quick)", if a.vm { "the guest" } else { "this host" });
    }
    crate::calibrate::calibrate(crate::calibrate::CalibrateArgs { out: out.clone(), quick: true, json: None, quiet: true, vm: a.vm, vm_cpus: a.vm_cpus, sched: None })?;
    if !a.quiet {
        eprintln!("schedlab: wrote {}", out.display());
    }
    Ok(out)
}

/// One scenario's two sides, or why there is no real side.
enum Outcome {
    Both { real: Value, sim: Value, notes: Vec<String> },
    Skipped(String),
    Failed(String),
}

/// The simulation on the calibrated machine.
fn simulate(s: &Scenario, file: &str, machine: &Path, sets: &[String]) -> Result<Value, Failure> {
    let mut s = s.clone();
    schedlab_host::frontend::apply_machine(&mut s, &machine.display().to_string(), sets)?;
    let mut sim = schedlab_host::world::build(&s, file).map_err(|e| Failure::Input(e.to_string()))?;
    sim.run();
    let label = crate::common::sched_label(&s);
    serde_json::to_value(Results::collect(&sim, &s.title(file), &label)).map_err(|e| Failure::Io(e.to_string()))
}

/// The real run on this host's kernel.
fn on_host(s: &Scenario, file: &str, quiet: bool) -> Result<Result<(Value, Vec<String>), Outcome>, Failure> {
    if s.scheduler.kind == "ext" {
        return Ok(Err(Outcome::Skipped("a sched_ext scheduler; with --vm it runs in the guest".into())));
    }
    if !quiet {
        eprintln!("schedlab: {file}: running for real for {}", schedlab::engine::time::fmt_ns(s.duration.0));
    }
    let opts = RealOptions { scheduler: crate::common::sched_label(s), ..Default::default() };
    match crate::real::run_or_exit(s, file, &opts) {
        Ok(run) => Ok(Ok((serde_json::to_value(&run.results).map_err(|e| Failure::Io(e.to_string()))?, run.notes))),
        Err(RealError::Privilege(m)) => Err(Failure::Input(format!("agree: {file}: {m}"))),
        Err(RealError::Input(m)) => Ok(Err(Outcome::Skipped(m))),
        Err(e) => Ok(Err(Outcome::Failed(e.to_string()))),
    }
}

/// The real run in the sched_ext guest, on as many CPUs as the simulation.
fn in_guest(path: &Path, s: &Scenario, file: &str, sets: &[String], cpus: usize, quiet: bool) -> Result<(Value, Vec<String>), Outcome> {
    let sched = s.scheduler.sched.as_deref().filter(|_| s.scheduler.kind == "ext");
    let label = crate::common::sched_label(s);
    let variants = crate::vm::guest_variants([(label.as_str(), sched)], file).map_err(|(_, m)| Outcome::Skipped(m))?;
    let guest = crate::vm::interruptible(|| crate::vm::boot(path, s, &variants, sets, cpus, quiet, None)).map_err(|(_, m)| Outcome::Failed(m))?;
    let g = guest.scheds.first().ok_or_else(|| Outcome::Failed(format!("the guest reported nothing (its console: {})", guest.console.display())))?;
    match (&g.json, g.run_failures()) {
        (Some(j), f) if f.is_empty() => Ok((j.clone(), g.notes())),
        (_, f) => Err(Outcome::Failed(format!("{} (the guest's console: {})", f.join("; "), guest.console.display()))),
    }
}

/// `schedlab agree`.
pub fn agree(a: AgreeArgs) -> Result<(), Failure> {
    let files = scenario_files(&a.scenarios)?;
    let mut scenarios = Vec::new();
    for f in &files {
        scenarios.push(schedlab_host::frontend::load(f, &a.sets, None)?);
    }
    std::fs::create_dir_all(&a.out).map_err(io_err(&a.out))?;
    let machine = machine(&a)?;
    let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    // The simulations first, in parallel; the real runs then one at a time
    // on a machine that does nothing else.
    let sims: Vec<Result<Value, Failure>> = scenarios.par_iter().zip(&names).map(|(s, f)| simulate(s, f, &machine, &a.sets)).collect();
    let mut outcomes = Vec::new();
    for (((s, f), path), sim) in scenarios.iter().zip(&names).zip(&files).zip(sims) {
        let sim = match sim {
            Ok(v) => v,
            Err(Failure::Input(m)) => {
                outcomes.push(Outcome::Skipped(format!("does not simulate on the calibrated machine: {m}")));
                continue;
            }
            Err(e) => return Err(e),
        };
        let real = if a.vm {
            let cpus = sim["nr_cpus"].as_u64().unwrap_or(1) as usize;
            if !a.quiet {
                eprintln!("schedlab: {f}: running in the guest on {cpus} CPUs for {}", schedlab::engine::time::fmt_ns(s.duration.0));
            }
            in_guest(path, s, f, &a.sets, cpus, a.quiet)
        } else {
            on_host(s, f, a.quiet)?
        };
        outcomes.push(match real {
            // Figures of a run that skipped steps are not the scenario's.
            Ok((_, notes)) if notes.iter().any(|n| n.contains("steps real mode does not execute")) => {
                Outcome::Skipped("real mode does not execute every step of its workloads yet (request stamps, per-CPU locks, barriers: schbench, servers)".into())
            }
            Ok((real, notes)) => Outcome::Both { real, sim, notes },
            Err(o) => o,
        });
    }
    let figures: Vec<ScenarioFigures> = names
        .iter()
        .zip(outcomes)
        .map(|(f, o)| match o {
            Outcome::Both { real, sim, notes } => ScenarioFigures { notes, ..agree::compare(f, &real, &sim) },
            Outcome::Skipped(why) => ScenarioFigures::not_measured(f, "skipped", &why),
            Outcome::Failed(why) => ScenarioFigures::not_measured(f, "failed", &why),
        })
        .collect();
    write(&a, &machine, &figures)
}

fn kernel() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease").map_or_else(|_| "?".into(), |s| s.trim().to_string())
}

fn write(a: &AgreeArgs, machine: &Path, figures: &[ScenarioFigures]) -> Result<(), Failure> {
    let side = if a.vm { "the sched_ext guest under qemu".to_string() } else { format!("this host, Linux {}", kernel()) };
    let json = serde_json::json!({
        "real": side,
        "machine": machine.display().to_string(),
        "goal": {"median_err_pct": agree::MEDIAN_GOAL_PCT, "share_err_pp": agree::SHARE_GOAL_PP},
        "scenarios": figures,
    });
    let text = serde_json::to_string_pretty(&json).map_err(|e| Failure::Io(e.to_string()))? + "\n";
    let (csv_path, json_path) = (a.out.join("agree.csv"), a.out.join("agree.json"));
    schedlab::results::csv::write_atomic(&csv_path, agree::to_csv(figures).as_bytes()).map_err(io_err(&csv_path))?;
    schedlab::results::csv::write_atomic(&json_path, text.as_bytes()).map_err(io_err(&json_path))?;
    let mut wrote = vec![csv_path, json_path];
    match a.json.as_deref() {
        Some(p) if p.as_os_str() == "-" => print!("{text}"),
        Some(p) => std::fs::write(p, &text).map_err(io_err(p))?,
        None => {}
    }
    if let Some(dir) = &a.plot {
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        wrote.extend(plot(dir, figures).map_err(|e| Failure::Io(e.to_string()))?);
    }
    if !a.quiet {
        if a.json.as_deref().is_none_or(|p| p.as_os_str() != "-") {
            print!("schedlab agree: real on {side}; simulated on {}\n\n{}", machine.display(), agree::tables(figures));
        }
        for p in wrote {
            eprintln!("schedlab: wrote {}", p.display());
        }
    }
    Ok(())
}

/// Simulated over real, per workload: latency p50 and p99, makespan (1 is
/// agreement).
fn plot(dir: &Path, figures: &[ScenarioFigures]) -> Result<Vec<PathBuf>, schedlab_plot::PlotError> {
    let mut categories = Vec::new();
    let mut series: Vec<(String, Vec<schedlab_plot::Bar>)> = ["latency p50", "latency p99", "makespan"].iter().map(|n| (n.to_string(), Vec::new())).collect();
    let ratio = |f: &Option<agree::Figure>| f.as_ref().filter(|f| f.real_ns > 0).map_or(0.0, |f| f.sim_ns as f64 / f.real_ns as f64);
    for s in figures {
        for w in &s.workloads {
            if w.p50.is_none() && w.makespan.is_none() {
                continue;
            }
            let stem = Path::new(&s.scenario).file_stem().map_or(s.scenario.clone(), |x| x.to_string_lossy().into_owned());
            categories.push(format!("{stem}/{}", w.workload));
            for (i, f) in [&w.p50, &w.p99, &w.makespan].into_iter().enumerate() {
                series[i].1.push((ratio(f), None));
            }
        }
    }
    let bars = schedlab_plot::Bars { title: "simulated / real (1 = agreement)".into(), y_desc: "sim / real".into(), categories, series };
    schedlab_plot::bars(&dir.join("agree"), &bars)
}
