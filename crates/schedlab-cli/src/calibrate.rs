//! `schedlab calibrate -o machine.toml`: measures this host's scheduling
//! costs (`schedlab_real::calibrate`) and writes a machine file for
//! `--machine`, with the topology beside it (`machine.lscpu`).

use std::path::{Path, PathBuf};

use schedlab_real::calibrate;

use crate::Failure;

/// Options of `calibrate`.
#[derive(clap::Args, Clone, Debug)]
pub struct CalibrateArgs {
    /// The machine file to write (TOML); the topology goes beside it as
    /// FILE.lscpu (`lscpu -p` output), which the machine file names.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub out: PathBuf,
    /// Take about a quarter of the samples: ~1 s instead of ~4 s, with
    /// wider spreads.
    #[arg(long)]
    pub quick: bool,
    /// Also write every figure as JSON to this file ("-" for stdout):
    /// {"figures": {KEY: {"median_ns", "p10_ns", "p90_ns", "n"} or
    /// {"unavailable": WHY}}, "costs": {FIELD: ns}, "hz", "kernel"}.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Print nothing but errors.
    #[arg(long, short)]
    pub quiet: bool,
    /// Calibrate inside the sched_ext guest kernel under qemu (as `run
    /// --real --vm`: scripts/scx-vm) instead of on this host; the machine
    /// file describes the guest.
    #[arg(long)]
    pub vm: bool,
    /// With --vm: the guest's CPU count (default 2).
    #[arg(long, value_name = "N", requires = "vm")]
    pub vm_cpus: Option<usize>,
    /// With --vm: calibrate under this sched_ext scheduler, loaded in the
    /// guest (a shipped name, crate:NAME or a .bpf.c path); default: the
    /// guest kernel's fair class.
    #[arg(long, value_name = "NAME|PATH", requires = "vm")]
    pub sched: Option<String>,
}

/// The figures and the costs set from them, as JSON.
/// `lscpu` is the topology side file's name, as the machine file names it.
fn to_json(c: &calibrate::Calibration, lscpu: &str) -> serde_json::Value {
    use serde_json::json;
    let figures: serde_json::Map<String, serde_json::Value> = c
        .figures
        .iter()
        .map(|f| {
            let v = match &f.stat {
                Ok(s) => json!({"median_ns": s.median, "p10_ns": s.p10, "p90_ns": s.p90, "n": s.n, "what": f.what}),
                Err(why) => json!({"unavailable": why, "what": f.what}),
            };
            (f.key.to_string(), v)
        })
        .collect();
    let (set, left) = calibrate::file::costs(c);
    let costs: serde_json::Map<String, serde_json::Value> = set.iter().map(|m| (m.field.to_string(), json!(m.ns))).collect();
    let kept: serde_json::Map<String, serde_json::Value> = left.iter().map(|(f, why)| (f.to_string(), json!(why))).collect();
    let machine_file = calibrate::file::machine_toml(c, lscpu);
    json!({"machine_file": machine_file, "lscpu": c.lscpu, "kernel": c.kernel, "cpus": [c.cpus.0, c.cpus.1], "hz": c.hz, "wall_s": c.wall_s, "default_slack_ns": c.default_slack_ns, "figures": figures, "costs": costs, "defaults_kept": kept})
}

/// Checks that `path` can be written before minutes are spent measuring
/// (creates it empty; the real text replaces it at the end).
fn writable(path: &Path, what: &str) -> Result<(), Failure> {
    if path.is_dir() {
        return Err(Failure::Input(format!("-o {}: is a directory; give the machine file's path, e.g. machine.toml", path.display())));
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map(drop)
        .map_err(|e| Failure::Input(format!("-o {}: cannot write {what} {}: {e}", path.display(), path.display())))
}

/// `schedlab calibrate`.
pub fn calibrate(a: CalibrateArgs) -> Result<(), Failure> {
    let side = calibrate::file::lscpu_path(&a.out);
    if side == a.out {
        return Err(Failure::Input(format!("-o {}: the topology is written to FILE.lscpu beside the machine file; name the machine file FILE.toml", a.out.display())));
    }
    writable(&a.out, "the machine file")?;
    writable(&side, "the topology")?;
    if let Some(j) = a.json.as_deref().filter(|j| j.as_os_str() != "-") {
        writable(j, "the JSON")?;
    }
    if a.vm {
        return in_vm(&a, &side);
    }
    if !a.quiet {
        eprintln!("schedlab: calibrating on this host ({}); keep it otherwise idle", if a.quick { "quick, ~1 s" } else { "~4 s" });
    }
    let c = calibrate::run(&calibrate::Options { quick: a.quick }).map_err(|e| Failure::Io(e.to_string()))?;
    calibrate::file::write(&c, &a.out).map_err(|e| Failure::Io(format!("{}: {e}", a.out.display())))?;
    let json = serde_json::to_string_pretty(&to_json(&c, &file_name(&side))).unwrap_or_default() + "\n";
    match a.json.as_deref() {
        Some(j) if j.as_os_str() == "-" => print!("{json}"),
        Some(j) => std::fs::write(j, json).map_err(crate::common::io_err(j))?,
        None => {}
    }
    let to_stdout = a.json.as_deref().is_some_and(|j| j.as_os_str() == "-");
    if !a.quiet && !to_stdout {
        print!("Measured on Linux {} in {:.1} s (median, p10, p90, samples):\n{}", c.kernel, c.wall_s, c.table());
        let (set, left) = calibrate::file::costs(&c);
        println!("[machine.costs] set:");
        for m in &set {
            println!("  {} = {}  ({})", m.field, calibrate::fmt(m.ns as f64), m.from);
        }
        for (f, why) in &left {
            println!("  {f}: default kept ({why})");
        }
        match c.hz {
            Some(hz) => println!("  hz = {hz}"),
            None => println!("  hz: not measured"),
        }
    }
    if !a.quiet {
        eprintln!("schedlab: wrote {} and {}", a.out.display(), side.display());
    }
    Ok(())
}

fn file_name(p: &Path) -> String {
    p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

/// `calibrate --vm`: boots the sched_ext guest (scripts/scx-vm) with
/// `/calibrate` holding the options, so its init runs `schedlab calibrate`
/// under the guest's fair class or the `--sched` scheduler instead of a
/// scenario; the guest's JSON (figures, machine file, topology) comes back
/// on the serial console, and the files are written here.
fn in_vm(a: &CalibrateArgs, side: &Path) -> Result<(), Failure> {
    use crate::vm;
    let name = file_name(&a.out);
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)) {
        return Err(Failure::Input(format!("-o {}: with --vm, name the machine file with letters, digits, '.', '-' and '_' only", a.out.display())));
    }
    let cpus = match a.vm_cpus {
        Some(0) => return Err(Failure::Input("--vm-cpus: at least 1".into())),
        Some(n) => n,
        None => 2,
    };
    // The guest's staging wants a scenario (its loader profile is resolved
    // for the scenario's machine); this one is never run.
    let sched = a.sched.as_ref().map_or(String::new(), |n| format!("[scheduler]\nkind = \"ext\"\nsched = {}\n", toml::Value::String(n.clone())));
    let text = format!("duration = \"1s\"\n[machine]\ncpus = {cpus}\n{sched}[[workload]]\nkind = \"hog\"\ncount = 1\n");
    let here = std::env::current_dir().map_err(|e| Failure::Io(e.to_string()))?;
    let scenario = std::env::temp_dir().join(format!("schedlab-calibrate-{}.toml", std::process::id()));
    std::fs::write(&scenario, &text).map_err(crate::common::io_err(&scenario))?;
    let s = schedlab::workload::scenario::Scenario::parse(&text, &scenario.display().to_string(), &[]).map_err(|e| Failure::Input(e.to_string()));
    let base = here.join("calibrate").display().to_string();
    let entry = a.sched.as_deref().map_or(("eevdf", None), |n| (n, Some(n)));
    let opts = format!("-o /tmp/{name}{}", if a.quick { " --quick" } else { "" });
    let booted = s.and_then(|s| {
        let variants = vm::guest_variants([entry], &base)?;
        Ok(vm::interruptible(|| vm::boot_with(&scenario, &s, &variants, &[], cpus, a.quiet, None, &[("calibrate", opts)]))?)
    });
    let _ = std::fs::remove_file(&scenario);
    let guest = booted?;
    let g = guest.scheds.first().ok_or_else(|| Failure::Io(format!("--vm: the guest reported nothing (its console: {})", guest.console.display())))?;
    let problems = g.problems();
    let json = match (&g.json, problems.is_empty()) {
        (Some(j), true) => j,
        _ => return Err(Failure::Io(format!("--vm: {} (the guest's console: {})", problems.join("; "), guest.console.display()))),
    };
    let machine = json["machine_file"].as_str().unwrap_or_default();
    let lscpu = json["lscpu"].as_str().unwrap_or_default();
    std::fs::write(side, lscpu).map_err(crate::common::io_err(side))?;
    std::fs::write(&a.out, machine).map_err(crate::common::io_err(&a.out))?;
    let mut all = json.clone();
    all["guest"] = serde_json::json!({"kernel": guest.version, "cpus": guest.cpus, "scheduler": g.name, "state": g.state, "ops": g.ops, "exit_kind": g.exit_name(), "console": guest.console});
    let text = serde_json::to_string_pretty(&all).unwrap_or_default() + "\n";
    match a.json.as_deref() {
        Some(j) if j.as_os_str() == "-" => print!("{text}"),
        Some(j) => std::fs::write(j, text).map_err(crate::common::io_err(j))?,
        None => {}
    }
    if !a.quiet && a.json.as_deref().is_none_or(|j| j.as_os_str() != "-") {
        print!("{}", guest.header());
        if !g.builtin {
            print!("{}", vm::describe(g));
        }
        println!("Measured in the guest under {} (median, p10, p90, samples):", g.name);
        for (key, f) in json["figures"].as_object().into_iter().flatten() {
            let v = match (f["median_ns"].as_f64(), f["p10_ns"].as_f64(), f["p90_ns"].as_f64(), f["n"].as_u64()) {
                (Some(median), Some(p10), Some(p90), Some(n)) => calibrate::Stat { n: n as usize, median, p10, p90 }.describe(),
                _ => f["unavailable"].as_str().unwrap_or("?").to_string(),
            };
            println!("  {key:24}{v}");
        }
    }
    if !a.quiet {
        eprintln!("schedlab: wrote {} and {}", a.out.display(), side.display());
    }
    Ok(())
}
