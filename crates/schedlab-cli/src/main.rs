//! The `schedlab` command line.
//!
//! Exit codes: 0 success; 1 an I/O or internal error; 2 bad input (scenario,
//! option or value), with a one-line message naming the file, field and fix.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};
use schedlab::sched::features::FEATURES;
use schedlab::results::report::{table, Results};
use schedlab::workload::scenario::WORKLOAD_KINDS;
use schedlab::machine::topology::{presets, Topology};
use schedlab_host::frontend::MaxWall;
use schedlab_host::world;

mod agree;
mod calibrate;
mod common;
mod compare;
mod compare_real;
mod import;
mod ray;
mod real;
mod sweep;
mod vm;

#[derive(Parser)]
#[command(
    name = "schedlab",
    version,
    about = "Deterministic simulator of the Linux CPU scheduler",
    after_help = "Exit codes: 0 success; 1 I/O or internal error (a file cannot be read or written); 2 bad input (scenario, option or value: the message names the file, field and fix)."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Simulate a scenario and print a summary.
    Run {
        /// Scenario file (TOML).
        scenario: PathBuf,
        /// Override the scenario's seed (0 ..= 2^63-1, as TOML integers are signed).
        #[arg(long, value_parser = clap::value_parser!(u64).range(0..=i64::MAX as u64))]
        seed: Option<u64>,
        /// Override any scenario field by dotted path, e.g. workload.0.count=8.
        #[arg(long = "set", value_name = "PATH=VALUE")]
        sets: Vec<String>,
        /// Set a kernel feature, e.g. RUN_TO_PARITY=off or NO_PLACE_LAG.
        #[arg(long = "feature", value_name = "NAME[=on|off]")]
        features: Vec<String>,
        /// Run under this scheduler instead of the scenario's: eevdf, a
        /// shipped sched_ext scheduler (simple, qmap, central, cpu0, flow), a
        /// published scx scheduler (crate:scx_bpfland, crate:scx_flow@2.2.5;
        /// fetched with cargo once, then cached), or the path of a sched_ext
        /// .bpf.c file or scheduler directory, which is compiled and loaded.
        #[arg(long, value_name = "NAME|crate:NAME[@VER]|PATH")]
        sched: Option<String>,
        /// An include directory for the sched_ext scheduler's build, searched
        /// before its own and schedlab's (repeatable).
        #[arg(long = "sched-include", value_name = "DIR")]
        sched_includes: Vec<PathBuf>,
        /// Set a sched_ext scheduler's read-only option (a `const volatile`
        /// global), as its user space would before loading it.
        #[arg(long = "sched-set", value_name = "NAME=VALUE")]
        sched_sets: Vec<String>,
        /// The sched_ext scheduler's own command line, read with its loader
        /// profile's flags, e.g. --sched crate:scx_bpfland --sched-args "-s 5000 -m performance".
        #[arg(long = "sched-args", value_name = "ARGS", allow_hyphen_values = true)]
        sched_cmdline: Option<String>,
        /// A loader profile (TOML) for the sched_ext scheduler instead of the
        /// shipped one ("none": the object's defaults only).
        #[arg(long = "sched-profile", value_name = "FILE")]
        sched_profile: Option<String>,
        /// Wall time one sched_ext callback may run before it is taken for an
        /// endless loop and the scheduler is ejected (default 5s; 0 = no limit).
        #[arg(long = "op-timeout", value_name = "DURATION")]
        op_timeout: Option<String>,
        /// Stop the run after this much wall time (e.g. 30s, 5m) and report
        /// what was simulated so far, marked partial ("partial" in the JSON).
        #[arg(long = "max-wall", value_name = "DURATION")]
        max_wall: Option<String>,
        /// Use a machine preset, a CPU count, a copy of /sys/devices/system/cpu
        /// or a file of `lscpu -p` output instead of the scenario's machine.
        #[arg(long)]
        machine: Option<String>,
        /// Write the results as JSON to this file ("-" for stdout).
        #[arg(long)]
        json: Option<PathBuf>,
        /// Print nothing but errors.
        #[arg(long, short)]
        quiet: bool,
        #[command(flatten)]
        out: common::OutputArgs,
        #[command(flatten)]
        real: real::RealArgs,
    },
    /// Run a scenario under several schedulers and/or feature settings and
    /// print them side by side; writes CSV and JSON (and plots with --plot).
    Compare(compare::CompareArgs),
    /// Run a grid of seeds x parameter values in parallel, resumably, and
    /// aggregate across seeds (median and spread).
    Sweep(sweep::SweepArgs),
    /// Measure this host's scheduling costs (context switch, wakeups, timers,
    /// migration, fork/exit, idle exit) and write a machine file for --machine.
    Calibrate(calibrate::CalibrateArgs),
    /// Run each scenario that fits this machine for real and simulated on
    /// the calibrated machine, and print how far apart they are: latency
    /// p50 / p99 / max, makespan and CPU shares, with the error of each.
    Agree(agree::AgreeArgs),
    /// Turn a recorded scheduler trace (Perfetto, perf script, tracefs
    /// text) into a scenario replaying each task: its bursts, its sleeps,
    /// and who woke it.
    #[command(name = "import-trace")]
    ImportTrace(import::ImportArgs),
    /// List machine presets, workload kinds, kernel features and schedulers.
    List {
        /// One of: presets, workloads, features, schedulers (default: all).
        what: Option<String>,
    },
    /// Fetch published schedulers into the cache ($SCHEDLAB_CACHE_DIR, else
    /// ~/.cache/schedlab) without running anything, e.g. before going
    /// offline or in CI; prints each one's main source.
    Fetch {
        /// crate:NAME[@VERSION] (a shipped name or a path is printed as it resolves).
        #[arg(required = true, value_name = "crate:NAME[@VER]")]
        scheds: Vec<String>,
    },
}

enum Failure {
    Input(String),
    Io(String),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Run { scenario, seed, mut sets, features, sched, sched_includes, sched_sets, sched_cmdline, sched_profile, op_timeout, max_wall, machine, json, quiet, out, real } => match sched_args(sched, sched_sets).and_then(|mut s| {
            s.extend(loader_args(sched_cmdline, sched_profile)?);
            s.extend(op_timeout_arg(op_timeout.as_deref()));
            s.extend(include_args(&sched_includes)?);
            Ok(s)
        }) {
            Ok(_) if real.real && max_wall.is_some() => Err(Failure::Input("--real: --max-wall bounds a simulation's wall time; a real run lasts the scenario's duration (drop --max-wall, or set duration)".into())),
            Ok(extra) if real.real => {
                sets.extend(extra);
                sets.extend(seed.map(|s| format!("seed={s}")));
                refuse_for_real(machine.as_deref(), &features, &out)
                    .and_then(|()| common::real_trace(&out))
                    .and_then(|trace| real::run(&real, scenario, sets, json, quiet, trace).map_err(Failure::from))
            }
            Ok(extra) => {
                sets.extend(extra);
                schedlab_host::frontend::MaxWall::parse(max_wall.as_deref())
                    .map_err(Failure::from)
                    .and_then(|max_wall| run(scenario, seed, sets, features, machine, max_wall, json, quiet, out))
            }
            Err(e) => Err(e),
        },
        Cmd::Compare(a) => compare::compare(a),
        Cmd::Sweep(a) => sweep::sweep(a),
        Cmd::Calibrate(a) => calibrate::calibrate(a),
        Cmd::Agree(a) => agree::agree(a),
        Cmd::ImportTrace(a) => import::import(a),
        Cmd::List { what } => list(what.as_deref()),
        Cmd::Fetch { scheds } => fetch(&scheds),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Input(m)) => {
            eprintln!("error: {m}");
            ExitCode::from(2)
        }
        Err(Failure::Io(m)) => {
            eprintln!("error: {m}");
            ExitCode::from(1)
        }
    }
}

/// Options that mean nothing to a real kernel are refused, not ignored.
fn refuse_for_real(machine: Option<&str>, features: &[String], out: &common::OutputArgs) -> Result<(), Failure> {
    if machine.is_some() {
        return Err(Failure::Input("--real: --machine does not apply: the real machine is this host (or the --vm guest, sized by --vm-cpus)".into()));
    }
    if let Some(f) = features.first() {
        return Err(Failure::Input(format!("--real: --feature {f}: a real kernel's scheduler features are not schedlab's to switch; compare them in simulation (without --real)")));
    }
    if out.csv.is_some() || out.plot.is_some() {
        return Err(Failure::Input("--real: --csv and --plot are for simulations; use --json for the real results (or compare --real, which writes CSV)".into()));
    }
    if out.check {
        return Err(Failure::Input("--real: --check checks the simulator's invariants; a real run has none to check (drop --check or --real)".into()));
    }
    Ok(())
}

/// `--sched` and `--sched-set` as scenario overrides.
fn sched_args(sched: Option<String>, sched_sets: Vec<String>) -> Result<Vec<String>, Failure> {
    Ok(schedlab_host::frontend::sched_args(sched.as_deref(), &sched_sets)?)
}

pub(crate) use schedlab_host::frontend::op_timeout_arg;

/// `--sched-include DIR...` as the scenario's `scheduler.include`.
fn include_args(dirs: &[PathBuf]) -> Result<Vec<String>, Failure> {
    if dirs.is_empty() {
        return Ok(Vec::new());
    }
    let mut list = Vec::new();
    for d in dirs {
        let abs = d.canonicalize().map_err(|e| Failure::Input(format!("--sched-include {}: {e}; expected an existing directory", d.display())))?;
        if !abs.is_dir() {
            return Err(Failure::Input(format!("--sched-include {}: not a directory", d.display())));
        }
        list.push(toml::Value::String(abs.display().to_string()));
    }
    Ok(vec![format!("scheduler.include={}", toml::Value::Array(list))])
}

/// `--sched-args` and `--sched-profile` as scenario overrides.
fn loader_args(cmdline: Option<String>, profile: Option<String>) -> Result<Vec<String>, Failure> {
    let mut sets = Vec::new();
    if let Some(a) = cmdline {
        sets.push(format!("scheduler.args={}", toml::Value::String(a)));
    }
    if let Some(p) = profile {
        // A path is taken from the current directory, not the scenario's.
        let path = std::path::Path::new(&p);
        let p = if p != "none" {
            path.canonicalize().map_err(|e| Failure::Input(format!("--sched-profile {p}: {e}; give the path of a loader profile (TOML) or \"none\"")))?.display().to_string()
        } else {
            p
        };
        sets.push(format!("scheduler.profile={}", toml::Value::String(p)));
    }
    Ok(sets)
}

#[allow(clippy::too_many_arguments)]
fn run(path: PathBuf, seed: Option<u64>, mut sets: Vec<String>, features: Vec<String>, machine: Option<String>, max_wall: Option<MaxWall>, json: Option<PathBuf>, quiet: bool, out: common::OutputArgs) -> Result<(), Failure> {
    let file = path.display().to_string();
    if let Some(s) = seed {
        sets.push(format!("seed={s}"));
    }
    sets.extend(common::feature_sets(&features)?);
    let scenario = common::load(&path, &sets, machine.as_deref())?;
    let mut sim = world::build(&scenario, &file).map_err(|e| Failure::Input(e.to_string()))?;
    sim.check_invariants |= out.check;
    let timeline = common::attach(&mut sim, &out, scenario.duration.0)?;
    let title = scenario.title(&file);
    if !quiet {
        eprintln!("schedlab: running {title} for {} simulated, seed {}", schedlab::engine::time::fmt_ns(scenario.duration.0), scenario.seed);
    }
    let started = Instant::now();
    let tty = std::io::stderr().is_terminal() && !quiet;
    let mut bar: Option<indicatif::ProgressBar> = None;
    let clock = max_wall.map(MaxWall::start);
    let mut progress = |now: u64, end: u64| {
        if clock.as_ref().is_some_and(|c| c.expired()) {
            return false;
        }
        if !tty || started.elapsed().as_secs_f64() < 1.0 {
            return true;
        }
        let b = bar.get_or_insert_with(|| {
            let b = indicatif::ProgressBar::new(end / 1_000_000);
            b.set_style(indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} ms simulated, eta {eta}").expect("valid template"));
            b
        });
        b.set_position(now / 1_000_000);
        true
    };
    let stopped = !sim.run_while(&mut progress);
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if stopped {
        sim.finish_early();
    }
    let wall = started.elapsed().as_secs_f64();
    let mut results = Results::collect(&sim, &title, &schedlab_host::frontend::sched_label(&scenario));
    if let (true, Some(m)) = (stopped, max_wall) {
        results.mark_partial(&m.reason(), scenario.duration.0);
    }
    if !quiet {
        eprintln!("schedlab: {} events in {:.2}s wall ({:.2} M events/s)", results.events, wall, results.events as f64 / wall.max(1e-9) / 1e6);
        if let Some(m) = max_wall.filter(|_| stopped) {
            eprintln!("schedlab: stopped by {} at {} of {} simulated: the results are partial", m.reason(), schedlab::engine::time::fmt_ns(results.sim_time_ns), schedlab::engine::time::fmt_ns(scenario.duration.0));
        }
    }
    common::write_outputs(&mut sim, &results, timeline, &out, &common::stem(&path), quiet)?;
    match json.as_deref() {
        Some(p) if p.as_os_str() == "-" => {
            std::io::stdout().write_all(results.to_json().as_bytes()).map_err(|e| Failure::Io(e.to_string()))?;
        }
        Some(p) => {
            std::fs::write(p, results.to_json()).map_err(|e| Failure::Io(format!("{}: {e}", p.display())))?;
            if !quiet {
                print!("{}", results.summary());
            }
        }
        None => {
            if !quiet {
                print!("{}", results.summary());
            }
        }
    }
    // The process exits next: freeing a world of thousands of tasks block
    // by block, and its results, would only cost time. Everything the run
    // writes is written and flushed above.
    std::mem::forget(results);
    std::mem::forget(sim);
    Ok(())
}

/// `schedlab fetch`: each scheduler's source, fetched once (crates with
/// their scx_cargo headers), as a run would find it.
fn fetch(scheds: &[String]) -> Result<(), Failure> {
    for name in scheds {
        let main = world::ext_source(name, ".").map_err(|e| Failure::Input(format!("fetch {name}: {e}")))?;
        // The headers a crate builds with are part of what a run needs.
        let cache = schedlab_host::compile::cache_dir();
        let headers = |v: &str| schedlab_host::fetch::scx_cargo_headers(v, &cache);
        schedlab_host::source::resolve(&main, &[], &cache, &headers).map_err(|e| Failure::Input(format!("fetch {name}: {e}")))?;
        println!("{name} {}", main.display());
    }
    Ok(())
}

fn list(what: Option<&str>) -> Result<(), Failure> {
    let all = what.is_none();
    let want = |k: &str| all || what == Some(k);
    if !all && !["presets", "workloads", "features", "schedulers"].contains(&what.unwrap_or("")) {
        return Err(Failure::Input(format!("list: unknown topic {:?}: expected presets, workloads, features or schedulers", what.unwrap_or(""))));
    }
    let mut out = String::new();
    if want("presets") {
        let mut rows = vec![vec!["preset".to_string(), "machine".to_string()]];
        for (name, desc) in presets() {
            let shape = Topology::preset(name).map(|t| t.describe()).unwrap_or_default();
            rows.push(vec![name.to_string(), format!("{desc} [{shape}]")]);
        }
        out.push_str("Machine presets (machine.preset, --machine NAME or --machine N)\n");
        out.push_str(&table(&rows));
        out.push('\n');
    }
    if want("workloads") {
        let mut rows = vec![vec!["kind".to_string(), "models".to_string()]];
        rows.extend(WORKLOAD_KINDS.iter().map(|(k, d)| vec![k.to_string(), d.to_string()]));
        out.push_str("Workloads ([[workload]] kind = ...)\n");
        out.push_str(&table(&rows));
        out.push('\n');
    }
    if want("features") {
        let mut rows = vec![vec!["feature".to_string(), "default".to_string(), "what it does".to_string()]];
        rows.extend(FEATURES.iter().map(|f| vec![f.name.to_string(), if f.default { "on" } else { "off" }.to_string(), f.why.to_string()]));
        out.push_str("Kernel features ([features] NAME = true, --feature NAME=off)\n");
        out.push_str(&table(&rows));
        out.push('\n');
    }
    if want("schedulers") {
        let mut rows = vec![vec!["scheduler".to_string(), "description".to_string()]];
        rows.extend(schedlab::workload::world::SCHEDULERS.iter().map(|(k, d)| vec![k.to_string(), d.to_string()]));
        out.push_str("Schedulers ([scheduler] kind = ...)\n");
        out.push_str(&table(&rows));
        let mut rows = vec![vec!["sched_ext scheduler".to_string(), "description".to_string()]];
        rows.extend(schedlab_host::shipped::SHIPPED.iter().map(|(k, d, _)| vec![k.to_string(), d.to_string()]));
        out.push_str("\nShipped sched_ext schedulers ([scheduler] kind = \"ext\", sched = ...; or --sched NAME)\n");
        out.push_str(&table(&rows));
    }
    print!("{out}");
    Ok(())
}
