//! Replays the fuzz corpus (`fuzz/corpus/TARGET/*`) through the fuzz
//! targets (`fuzz/src/targets.rs`): every input a fuzzer kept, and every
//! input that once crashed schedlab, must run without a panic. No fuzzing
//! happens here; `scripts/fuzz` does that.

use std::path::PathBuf;

#[allow(dead_code)]
#[path = "../../../../fuzz/src/targets.rs"]
mod targets;

fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a corpus entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{}: the corpus is empty", dir.display());
    files.into_iter().map(|p| (p.display().to_string(), std::fs::read(&p).expect("a corpus file"))).collect()
}

/// Runs every input of one target, naming the inputs that panic.
fn replay(target: &str, f: fn(&[u8])) {
    let mut failed = Vec::new();
    let inputs = corpus(target);
    for (name, data) in &inputs {
        if std::panic::catch_unwind(|| f(data)).is_err() {
            failed.push(name.clone());
        }
    }
    assert!(failed.is_empty(), "{} of {} {target} inputs panic: {failed:#?}", failed.len(), inputs.len());
}

#[test]
fn scenario() {
    replay("scenario", targets::scenario);
}

#[test]
fn rtapp() {
    replay("rtapp", targets::rtapp);
}

#[test]
fn lscpu() {
    replay("lscpu", targets::lscpu);
}

#[test]
fn sysfs() {
    replay("sysfs", targets::sysfs);
}

#[test]
fn tracefs() {
    replay("tracefs", targets::tracefs);
}

#[test]
fn import_trace() {
    replay("import_trace", targets::import_trace);
}

#[test]
fn import_perfetto() {
    replay("import_perfetto", targets::import_perfetto);
}

#[test]
fn import_perf() {
    replay("import_perf", targets::import_perf);
}

#[test]
fn profile() {
    replay("profile", targets::profile);
}

#[test]
fn ext_ops() {
    replay("ext_ops", targets::ext_ops);
}
