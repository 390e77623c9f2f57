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
    /// Print nothing but errors.
    #[arg(long, short)]
    pub quiet: bool,
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
    if !a.quiet {
        eprintln!("schedlab: calibrating on this host ({}); keep it otherwise idle", if a.quick { "quick, ~1.5 s" } else { "~5 s" });
    }
    let c = calibrate::run(&calibrate::Options { quick: a.quick }).map_err(|e| Failure::Io(e.to_string()))?;
    calibrate::file::write(&c, &a.out).map_err(|e| Failure::Io(format!("{}: {e}", a.out.display())))?;
    if !a.quiet {
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
        eprintln!("schedlab: wrote {} and {}", a.out.display(), side.display());
    }
    Ok(())
}
