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
    /// Take about a quarter of the samples: ~1.5 s instead of ~5 s, with
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
}

/// The figures and the costs set from them, as JSON.
fn to_json(c: &calibrate::Calibration) -> serde_json::Value {
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
    json!({"kernel": c.kernel, "cpus": [c.cpus.0, c.cpus.1], "hz": c.hz, "wall_s": c.wall_s, "default_slack_ns": c.default_slack_ns, "figures": figures, "costs": costs, "defaults_kept": kept})
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
    if !a.quiet {
        eprintln!("schedlab: calibrating on this host ({}); keep it otherwise idle", if a.quick { "quick, ~1.5 s" } else { "~5 s" });
    }
    let c = calibrate::run(&calibrate::Options { quick: a.quick }).map_err(|e| Failure::Io(e.to_string()))?;
    calibrate::file::write(&c, &a.out).map_err(|e| Failure::Io(format!("{}: {e}", a.out.display())))?;
    let json = serde_json::to_string_pretty(&to_json(&c)).unwrap_or_default() + "\n";
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
