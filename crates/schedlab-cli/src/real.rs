//! `schedlab run --real` (this host's kernel) and `run --real --vm` (a
//! sched_ext kernel booted under qemu), printed beside the simulation.

use std::io::Write;
use std::path::{Path, PathBuf};

use schedlab_real::{self as real, RealError, RealOptions};
use schedlab::results::report::Results;
use schedlab::workload::scenario::Scenario;

#[derive(clap::Args, Debug, Default)]
pub struct RealArgs {
    /// Run the scenario's workloads for real on this kernel (threads and
    /// processes, real sleeps, pipes, sockets, futexes, sched_setattr) and
    /// print the measured results in the simulator's format.
    #[arg(long)]
    pub real: bool,
    /// With --real: boot a sched_ext kernel under qemu, load the --sched
    /// scheduler with libbpf (the real verifier), run the scenario inside and
    /// print the guest's results beside the simulated ones.
    #[arg(long, requires = "real")]
    pub vm: bool,
    /// With --vm: guest CPUs (default: the scenario's CPU count, at most 4).
    #[arg(long, requires = "vm", value_name = "N")]
    pub vm_cpus: Option<usize>,
    /// With --real: also simulate the scenario on a machine of the same CPU
    /// count and print both (always done with --vm).
    #[arg(long, requires = "real")]
    pub compare: bool,
    /// With --real: run the workloads without making the scenario's cgroups
    /// (by default they are made under a scratch cgroup, or the run is
    /// refused when this host cannot).
    #[arg(long = "no-cgroups", requires = "real")]
    pub no_cgroups: bool,
}

/// Exit status and message of a failed real run: 2 bad input or missing
/// privilege, 1 I/O, 130 interrupted.
pub type RealFailure = (u8, String);

fn load(path: &Path, sets: &[String]) -> Result<Scenario, RealFailure> {
    Scenario::load(path, sets).map_err(|e| match e {
        schedlab::workload::scenario::ScenarioError::Io { .. } => (1, e.to_string()),
        other => (2, other.to_string()),
    })
}

fn sched_label(s: &Scenario) -> String {
    match (s.scheduler.kind.as_str(), s.scheduler.sched.as_deref()) {
        ("ext", Some(x)) => format!("ext:{}", Path::new(x).file_name().map_or(x.to_string(), |f| f.to_string_lossy().trim_end_matches(".bpf.c").to_string())),
        (k, _) => k.to_string(),
    }
}

/// Simulates the scenario on `cpus` CPUs (the real machine's count).
pub fn simulate_like(s: &Scenario, file: &str, cpus: usize) -> Result<Results, RealFailure> {
    let mut s = s.clone();
    s.machine.preset = None;
    s.machine.sysfs = None;
    s.machine.lscpu = None;
    s.machine.cpus = Some(cpus);
    let mut sim = schedlab_host::world::build(&s, file).map_err(|e| (2, e.to_string()))?;
    sim.run();
    Ok(Results::collect(&sim, &s.title(file), &sched_label(&s)))
}

/// The entry point of `run --real [--vm]`.
pub fn run(args: &RealArgs, path: PathBuf, sets: Vec<String>, json: Option<PathBuf>, quiet: bool, trace: Option<real::TraceRequest>) -> Result<(), RealFailure> {
    let file = path.display().to_string();
    let scenario = load(&path, &sets)?;
    if args.vm {
        return crate::vm::run(args, &path, &scenario, &sets, json, quiet, trace.as_ref());
    }
    // Inside the guest of --vm the scheduler is already loaded; the host names it.
    let guest_label = std::env::var("SCHEDLAB_REAL_LABEL").ok();
    if scenario.scheduler.kind == "ext" && guest_label.is_none() {
        return Err((2, format!("{file}: scheduler.kind is \"ext\": this host's kernel cannot load it here; add --vm to boot a sched_ext kernel under qemu, or --sched eevdf")));
    }
    let mut opts = RealOptions { scheduler: guest_label.clone().unwrap_or_else(|| sched_label(&scenario)), trace, no_cgroups: args.no_cgroups, ..Default::default() };
    if guest_label.is_some() {
        // Emulated CPUs are slow to create threads.
        opts.setup_ns = 2_000_000_000;
        opts.grace_ns = 20_000_000_000;
        opts.busy_clock = real::BusyClock::Poll;
    }
    if !quiet {
        eprintln!("schedlab: running {} for real on this host for {}", scenario.title(&file), schedlab::engine::time::fmt_ns(scenario.duration.0));
    }
    let run = run_on_host(&scenario, &file, &opts)?;
    for l in run.trace.iter().flat_map(|t| t.lines()).filter(|_| !quiet) {
        eprintln!("schedlab: {l}");
    }
    let nr = run.results.nr_cpus;
    emit(&run.results, json.as_deref(), quiet)?;
    if !quiet {
        print!("{}", run.summary());
        if args.compare {
            let sim = simulate_like(&scenario, &file, nr)?;
            println!("\n--- simulated on {nr} CPUs ---");
            print!("{}", sim.summary());
            print!("{}", side_by_side(&run.results, &sim));
        }
    }
    Ok(())
}

/// One real run on this host. An interrupted run (every worker already
/// killed and reaped) ends the process with status 130; other errors are
/// the caller's.
pub fn run_or_exit(s: &Scenario, file: &str, opts: &RealOptions) -> Result<real::RealRun, RealError> {
    match real::run(s, file, opts) {
        Err(RealError::Interrupted) => {
            eprintln!("schedlab: {}", RealError::Interrupted);
            std::process::exit(130);
        }
        other => other,
    }
}

/// [`run_or_exit`] with its errors as exit statuses: 2 bad input or missing
/// privilege, 1 I/O.
pub fn run_on_host(s: &Scenario, file: &str, opts: &RealOptions) -> Result<real::RealRun, RealFailure> {
    run_or_exit(s, file, opts).map_err(|e| match e {
        RealError::Input(_) | RealError::Privilege(_) => (2, e.to_string()),
        _ => (1, e.to_string()),
    })
}

pub fn emit(r: &Results, json: Option<&Path>, quiet: bool) -> Result<(), RealFailure> {
    match json {
        Some(p) if p.as_os_str() == "-" => std::io::stdout().write_all(r.to_json().as_bytes()).map_err(|e| (1, e.to_string())),
        Some(p) => std::fs::write(p, r.to_json()).map_err(|e| (1, format!("{}: {e}", p.display()))),
        None => {
            let _ = quiet;
            Ok(())
        }
    }
}

/// Per-task CPU shares, real next to simulated: the comparison that does not
/// depend on the machine's speed.
pub fn side_by_side(real: &Results, sim: &Results) -> String {
    let share = |r: &Results, i: usize| {
        let total: u64 = r.tasks.iter().map(|t| t.runtime_ns).sum::<u64>().max(1);
        r.tasks.get(i).map_or(0.0, |t| t.runtime_ns as f64 * 100.0 / total as f64)
    };
    let mut rows = vec![vec!["task".to_string(), "real share".into(), "sim share".into(), "real switches".into(), "sim switches".into()]];
    for (i, t) in real.tasks.iter().enumerate().take(32) {
        let s = sim.tasks.get(i);
        rows.push(vec![t.name.clone(), format!("{:.1}%", share(real, i)), format!("{:.1}%", share(sim, i)), t.switches.to_string(), s.map_or("-".into(), |s| s.switches.to_string())]);
    }
    let mut out = String::from("\nreal vs simulated\n");
    out.push_str(&schedlab::results::report::table(&rows));
    for (rw, sw) in real.workloads.iter().zip(&sim.workloads) {
        if let (Some(a), Some(b)) = (&rw.latency, &sw.latency) {
            out.push_str(&format!(
                "{}: wakeup latency p50 {} / {}, p99 {} / {}, max {} / {} (real / sim)\n",
                rw.name,
                schedlab::engine::time::fmt_ns(a.p50_ns),
                schedlab::engine::time::fmt_ns(b.p50_ns),
                schedlab::engine::time::fmt_ns(a.p99_ns),
                schedlab::engine::time::fmt_ns(b.p99_ns),
                schedlab::engine::time::fmt_ns(a.max_ns),
                schedlab::engine::time::fmt_ns(b.max_ns)
            ));
        }
        if let (Some(a), Some(b)) = (rw.makespan_ns, sw.makespan_ns) {
            out.push_str(&format!("{}: makespan {} / {} (real / sim)\n", rw.name, schedlab::engine::time::fmt_ns(a), schedlab::engine::time::fmt_ns(b)));
        }
    }
    out
}
