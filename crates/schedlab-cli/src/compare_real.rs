//! `schedlab compare --real [--vm]`: every variant simulated and run for
//! real, printed in compare's tables (a "(sim)" and a "(real)" row per
//! variant), then the checks that do not depend on the machine's speed
//! (schedlab::results::agreement). Without --vm the real runs use this host's kernel,
//! one after the other; with --vm one boot of a sched_ext kernel under qemu
//! runs them all, and each simulation gets as many CPUs as the guest.

use rayon::prelude::*;
use schedlab::results::agreement::{self, Agreement, RealScx};
use schedlab::results::compare::{self, RunSummary};
use schedlab_real::RealOptions;
use schedlab::workload::scenario::Scenario;
use serde_json::Value;

use crate::common;
use crate::compare::{CompareArgs, Variant};
use crate::vm;
use crate::Failure;

/// One variant's real side.
struct Real {
    results: Value,
    scx: Option<RealScx>,
    /// What the reader should know (notes of the executor, guest problems).
    notes: Vec<String>,
}

/// What does not apply to a real kernel, refused up front.
fn refuse(a: &CompareArgs, scenarios: &[Scenario], labels: &[String]) -> Result<(), Failure> {
    if !a.features.is_empty() {
        return Err(Failure::Input(
            "--real: kernel features (--feature) cannot be switched on a real kernel from schedlab; compare them in simulation (without --real)".into(),
        ));
    }
    if a.machine.is_some() {
        return Err(Failure::Input("--real: --machine does not apply: the real machine is this host (or the --vm guest, sized by --vm-cpus)".into()));
    }
    if a.plot.is_some() {
        return Err(Failure::Input("--real: --plot is not supported; plot the simulations with compare without --real".into()));
    }
    if !a.vm {
        if let Some((_, l)) = scenarios.iter().zip(labels).find(|(s, _)| s.scheduler.kind == "ext") {
            return Err(Failure::Input(format!(
                "--real: variant {l} is a sched_ext scheduler and this host's kernel cannot load it here; add --vm to run every variant in a sched_ext kernel under qemu"
            )));
        }
    }
    Ok(())
}

/// The real runs on this host, one after another (they would disturb each
/// other in parallel).
fn host_runs(a: &CompareArgs, scenarios: &[Scenario], labels: &[String]) -> Result<Vec<Real>, Failure> {
    let file = a.scenario.display().to_string();
    let mut out = Vec::new();
    for (i, (s, l)) in scenarios.iter().zip(labels).enumerate() {
        if !a.quiet {
            eprintln!("schedlab: running {l} for real on this host ({}/{}), {}", i + 1, scenarios.len(), schedlab::engine::time::fmt_ns(s.duration.0));
        }
        let opts = RealOptions { scheduler: common::sched_label(s), no_cgroups: a.no_cgroups, ..Default::default() };
        let run = crate::real::run_on_host(s, &file, &opts).map_err(Failure::from)?;
        let results = serde_json::to_value(&run.results).map_err(|e| Failure::Io(e.to_string()))?;
        out.push(Real { results, scx: None, notes: run.notes });
    }
    Ok(out)
}

/// All variants in one guest boot.
fn guest_runs(a: &CompareArgs, variants: &[Variant], scenarios: &[Scenario], labels: &[String]) -> Result<(usize, String, Vec<Real>), Failure> {
    let file = a.scenario.display().to_string();
    let cpus = vm::guest_cpus(a.vm_cpus, &scenarios[0], &file).map_err(Failure::from)?;
    let entries = scenarios.iter().zip(labels).map(|(s, l)| (l.as_str(), s.scheduler.sched.as_deref().filter(|_| s.scheduler.kind == "ext")));
    let guest_variants = vm::guest_variants(entries, &file).map_err(Failure::from)?;
    // The loader's options come from an ext variant's scenario (--sched-set
    // applies to every ext variant); the other overrides are common to all.
    let base = scenarios.iter().find(|s| s.scheduler.kind == "ext").unwrap_or(&scenarios[0]);
    let guest = vm::interruptible(|| vm::boot(&a.scenario, base, &guest_variants, &variants[0].sets, cpus, a.quiet, None)).map_err(Failure::from)?;
    let mut out = Vec::new();
    for v in &guest_variants {
        let Some(g) = guest.scheds.iter().find(|g| g.name == v.label) else {
            return Err(Failure::Io(format!("--vm: the guest reported nothing for {} (its console: {})", v.label, guest.console.display())));
        };
        let mut notes = g.run_failures();
        notes.extend(g.notes());
        let results = g.json.clone().unwrap_or(Value::Null);
        out.push(Real { results, scx: g.real_scx(), notes });
    }
    Ok((cpus, guest.header(), out))
}

pub fn compare_real(a: &CompareArgs, variants: &[Variant], labels: &[String], scenarios: &[Scenario]) -> Result<(), Failure> {
    refuse(a, scenarios, labels)?;
    let file = a.scenario.display().to_string();
    let (reals, header, cpus) = if a.vm {
        let (cpus, header, reals) = guest_runs(a, variants, scenarios, labels)?;
        (reals, header, vec![cpus; scenarios.len()])
    } else {
        let reals = host_runs(a, scenarios, labels)?;
        let cpus = reals.iter().map(|r| r.results["nr_cpus"].as_u64().unwrap_or(1) as usize).collect();
        (reals, String::new(), cpus)
    };
    // The simulations, on as many CPUs as the real runs had, in parallel.
    let sims: Vec<Result<Value, Failure>> = scenarios
        .par_iter()
        .zip(cpus.par_iter())
        .map(|(s, &n)| {
            let r = crate::real::simulate_like(s, &file, n).map_err(Failure::from)?;
            serde_json::to_value(&r).map_err(|e| Failure::Io(e.to_string()))
        })
        .collect();
    let mut runs: Vec<RunSummary> = Vec::new();
    let mut checks: Vec<Agreement> = Vec::new();
    let mut notes = Vec::new();
    for ((label, sim), real) in labels.iter().zip(sims).zip(&reals) {
        let sim = sim?;
        runs.push(RunSummary::from_value(&format!("{label} (sim)"), &sim));
        if real.results.is_null() {
            notes.push(format!("{label}: no real results ({})", real.notes.join("; ")));
            continue;
        }
        let mut r = RunSummary::from_value(&format!("{label} (real)"), &real.results);
        r.sched_ext = real.scx.as_ref().map(|x| compare::ScxSummary {
            name: x.name.clone(),
            state: if x.state == "enabled" || !x.attached { x.state.clone() } else { format!("attached, {} when read", x.state) },
            exit: compare::exit_text(x.exit_kind.as_deref().unwrap_or("none"), &x.exit_reason, &x.exit_msg),
            overhead_ns: 0,
        });
        runs.push(r);
        checks.push(agreement::agreement(label, &sim, &real.results, real.scx.as_ref()));
        notes.extend(real.notes.iter().map(|n| format!("{label} (real): {n}")));
    }
    let stem = common::stem(&a.scenario);
    std::fs::create_dir_all(&a.out).map_err(|e| Failure::Io(format!("{}: {e}", a.out.display())))?;
    let title = scenarios[0].title(&file);
    let csv_path = a.out.join(format!("{stem}-compare-real.csv"));
    let json_path = a.out.join(format!("{stem}-compare-real.json"));
    let json = compare::to_json(&title, &runs, Some(&checks));
    let io = common::io_err;
    schedlab::results::csv::write_atomic(&csv_path, compare::to_csv(&runs).as_bytes()).map_err(io(&csv_path))?;
    schedlab::results::csv::write_atomic(&json_path, json.as_bytes()).map_err(io(&json_path))?;
    match a.json.as_deref() {
        Some(p) if p.as_os_str() == "-" => {
            use std::io::Write;
            std::io::stdout().write_all(json.as_bytes()).map_err(|e| Failure::Io(e.to_string()))?;
        }
        Some(p) => std::fs::write(p, &json).map_err(io(p))?,
        None => {}
    }
    if !a.quiet {
        if a.json.as_deref().is_none_or(|p| p.as_os_str() != "-") {
            let machine = if a.vm { header } else { format!("real runs on this host ({} CPUs); simulations on as many CPUs\n", cpus.first().copied().unwrap_or(0)) };
            print!("schedlab compare --real: {title}, seed {}\n{machine}\n{}", scenarios[0].seed, compare::tables(&runs));
            print!("{}", agreement::tables(&checks));
            for n in &notes {
                println!("note: {n}");
            }
        }
        for p in [csv_path, json_path] {
            eprintln!("schedlab: wrote {}", p.display());
        }
    }
    Ok(())
}
