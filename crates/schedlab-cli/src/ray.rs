//! `schedlab sweep --ray [ADDRESS]`: the runs go to a Ray cluster through
//! the schedlab Python package's driver (`python -m schedlab.ray_sweep`),
//! which stores each run's record in the sweep's store as it arrives; the
//! aggregates, files and table are then made here exactly as for a local
//! sweep.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use schedlab_host::frontend::SweepPlan;

use crate::sweep::SweepArgs;
use crate::Failure;

/// The Python that runs the driver: $SCHEDLAB_PYTHON, else python3.
fn python() -> String {
    std::env::var("SCHEDLAB_PYTHON").ok().filter(|p| !p.is_empty()).unwrap_or_else(|| "python3".into())
}

pub fn sweep(a: &SweepArgs, address: &str, dir: &Path) -> Result<(), Failure> {
    let py = python();
    let probe = Command::new(&py).args(["-c", "import schedlab.ray_sweep"]).stdout(Stdio::null()).stderr(Stdio::null()).status();
    if !probe.is_ok_and(|s| s.success()) {
        return Err(Failure::Input(format!("--ray: {py} cannot import the schedlab Python package: run `pip install '.[ray]'` at the repository root (or set SCHEDLAB_PYTHON to a Python that has it)")));
    }
    let file = a.scenario.display().to_string();
    let text = std::fs::read_to_string(&a.scenario).map_err(|e| Failure::Io(format!("{file}: {e}")))?;
    let request = serde_json::json!({
        "file": file,
        "text": text,
        "seeds": a.seeds,
        "params": a.params,
        "sets": a.sets,
        "features": a.features,
        "sched": a.sched,
        "sched_sets": a.sched_sets,
        "op_timeout": a.op_timeout,
        "machine": a.machine,
        "max_wall": a.max_wall,
        "out": dir.display().to_string(),
        "address": if address.is_empty() { None } else { Some(address) },
        "quiet": a.quiet,
    });
    let mut child = Command::new(&py)
        .args(["-m", "schedlab.ray_sweep"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| Failure::Io(format!("--ray: cannot start {py}: {e}")))?;
    child.stdin.take().expect("piped").write_all(request.to_string().as_bytes()).map_err(|e| Failure::Io(format!("--ray: {py}: {e}")))?;
    let out = child.wait_with_output().map_err(|e| Failure::Io(format!("--ray: {py}: {e}")))?;
    if !out.status.success() {
        // The driver printed its one-line error on stderr.
        let code = out.status.code().unwrap_or(1);
        let msg = format!("--ray: the Ray driver failed (exit {code}); see its message above");
        return Err(if code == 2 { Failure::Input(msg) } else { Failure::Io(msg) });
    }
    // The driver's last line: {"ran": N, "errors": [[index, message], ...]}.
    let stdout = String::from_utf8_lossy(&out.stdout);
    let status: serde_json::Value = stdout.lines().last().and_then(|l| serde_json::from_str(l).ok()).ok_or_else(|| Failure::Io(format!("--ray: the Ray driver gave no status line: {stdout:?}")))?;
    let ran = status["ran"].as_u64().unwrap_or(0) as usize;
    let errors: Vec<(usize, String)> = status["errors"]
        .as_array()
        .map(|a| a.iter().filter_map(|e| Some((e.get(0)?.as_u64()? as usize, e.get(1)?.as_str()?.to_string()))).collect())
        .unwrap_or_default();
    let spec = crate::sweep::spec(a);
    let plan = SweepPlan::new(&text, &file, &spec)?;
    let outcome = plan.collect(dir, &errors, ran);
    crate::sweep::finish(a, &plan, dir, &crate::common::stem(&a.scenario), &outcome)
}
