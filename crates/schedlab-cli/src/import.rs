//! `schedlab import-trace TRACE -o my.toml [--window A..B] [--tasks REGEX]`:
//! a recorded scheduler trace (Perfetto, `perf script`, tracefs /
//! trace-cmd text) as a scenario of `kind = "replay"` workloads, one per
//! task (issue 15 §1).

use std::path::PathBuf;

use clap::Args;

use crate::common::parse_window;
use crate::Failure;

/// `import-trace`'s options.
#[derive(Args)]
pub struct ImportArgs {
    /// The trace: Perfetto (schedlab's `--trace`, or traced's), `perf
    /// script` output of `perf sched record`, or tracefs / trace-cmd text.
    pub trace: PathBuf,
    /// The scenario to write ("-" for stdout).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: PathBuf,
    /// Keep only this part of the trace, from its first event, e.g. 1s..3s.
    #[arg(long, value_name = "A..B")]
    pub window: Option<String>,
    /// Keep only the tasks whose comm matches (a regular expression); the
    /// others' wakeups of kept tasks become timed sleeps.
    #[arg(long, value_name = "REGEX")]
    pub tasks: Option<String>,
}

pub fn import(a: ImportArgs) -> Result<(), Failure> {
    let data = std::fs::read(&a.trace).map_err(|e| Failure::Io(format!("{}: cannot read: {e}", a.trace.display())))?;
    let re = a.tasks.as_deref().map(regex::Regex::new).transpose().map_err(|e| Failure::Input(format!("--tasks: {}", e.to_string().lines().last().unwrap_or("not a regular expression"))))?;
    let window = a.window.as_deref().map(|w| parse_window(w).map_err(|_| Failure::Input(format!("--window {w}: expected FROM..TO, e.g. 1s..3s, from the trace's first event")))).transpose()?;
    let bad = |e: schedlab::import::ImportError| Failure::Input(format!("{}: {e}", a.trace.display()));
    let format = schedlab::import::detect(&data).map_err(bad)?;
    let events = schedlab::import::read(&data).map_err(bad)?;
    let first = events.first().map_or(0, |e| e.ts_ns);
    let window = window.map(|(x, y)| (first.saturating_add(x), first.saturating_add(y)));
    let keep = |m: &schedlab::import::model::TaskModel| re.as_ref().is_none_or(|r| r.is_match(&m.comm));
    let file = a.trace.file_name().map_or_else(|| a.trace.display().to_string(), |f| f.to_string_lossy().into_owned());
    let name = a.output.file_stem().filter(|_| a.output.as_os_str() != "-").map_or_else(|| "replay".to_string(), |s| s.to_string_lossy().into_owned());
    let source = format!("{file} ({format:?})");
    let groups = schedlab::import::task_groups(&data).map_err(bad)?;
    let opts = schedlab::import::replay::Options { window, keep: &keep, source: &source, name: &name, groups: &groups };
    let (text, n) = schedlab::import::replay::scenario(&events, &opts);
    if n == 0 {
        return Err(Failure::Input(format!("{}: no task left to replay (check --tasks and --window)", a.trace.display())));
    }
    if a.output.as_os_str() == "-" {
        print!("{text}");
    } else {
        std::fs::write(&a.output, &text).map_err(|e| Failure::Io(format!("{}: cannot write: {e}", a.output.display())))?;
        eprintln!("schedlab: {} tasks from {} events of {source}; wrote {}", n, events.len(), a.output.display());
    }
    Ok(())
}
