//! Helpers shared by the CLI's integration test binaries (each uses some).
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

/// The repository's root.
pub fn repo() -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// None when the sched_ext guest's tools are there (scripts/scx-vm check);
/// else the reason, which fails the calling test under CI=true.
pub fn vm_skip_reason() -> Option<String> {
    let out = Command::new("bash").arg(repo().join("scripts/scx-vm")).arg("check").output().expect("run bash");
    if out.status.success() {
        return None;
    }
    let why = String::from_utf8_lossy(&out.stderr).trim().replace('\n', "; ");
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("CI=true but the sched_ext VM test cannot run: {why} (scripts/ensure-real-tools installs these)");
    }
    Some(why)
}

/// None when `run --real --trace` can record here (`code` and `stderr` of
/// such a run); else why not, which fails the calling test under CI=true.
pub fn trace_skip_reason(stderr: &str, code: Option<i32>) -> Option<String> {
    if code != Some(2) || !stderr.contains("tracefs") {
        return None;
    }
    let why = stderr.trim().to_string();
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("CI=true but the real-mode trace test cannot run: {why}");
    }
    Some(why)
}
