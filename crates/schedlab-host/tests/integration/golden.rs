//! Golden event hashes: every shipped scenario (scenarios/*.toml) and the
//! engine bench's 4-CPU mix, cut to a short simulated duration, must
//! produce the event-stream hash recorded in tests/golden/event-hashes.txt.
//! A refactoring that claims "behaviour unchanged" proves it here.
//!
//! When a change is meant to alter behaviour, regenerate the file with
//! `SCHEDLAB_UPDATE_GOLDEN=1 cargo test -p schedlab-host --test integration golden`
//! and say in the commit message why the hashes moved.

use std::collections::BTreeMap;
use std::path::PathBuf;

use schedlab::workload::scenario::Scenario;

/// Simulated time per scenario: long enough to start every workload and
/// run a few hundred scheduling decisions, short enough for a debug build.
const DURATION: &str = "duration=\"150ms\"";

/// The engine bench's 4-CPU mix (benches/engine.rs), run at the golden duration.
const BENCH_MIXED_4CPU: &str = include_str!("../../../schedlab/benches/scenarios/mixed-4cpu.toml");

fn golden_file() -> PathBuf {
    super::manifest().join("tests/golden/event-hashes.txt")
}

fn hash_of(s: &Scenario, file: &str) -> String {
    let mut sim = schedlab_host::world::build(s, file).unwrap_or_else(|e| panic!("{file}: {e}"));
    // The hash does not depend on the checks; skipping them keeps this fast.
    sim.check_invariants = false;
    sim.run();
    format!("{:016x} {}", sim.engine.hash(), sim.engine.events_processed())
}

fn current() -> BTreeMap<String, String> {
    let sets = vec![DURATION.to_string()];
    let mut out = BTreeMap::new();
    let dir = super::manifest().join("../../scenarios");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 10, "expected the shipped scenarios in {}", dir.display());
    for path in files {
        let s = Scenario::load(&path, &sets).unwrap_or_else(|e| panic!("{e}"));
        let name = path.file_stem().expect("file name").to_string_lossy().into_owned();
        out.insert(name, hash_of(&s, &path.to_string_lossy()));
    }
    let s = Scenario::parse(BENCH_MIXED_4CPU, "bench-mixed-4cpu.toml", &sets).unwrap_or_else(|e| panic!("{e}"));
    out.insert("bench-mixed-4cpu".to_string(), hash_of(&s, "bench-mixed-4cpu.toml"));
    out
}

#[test]
fn shipped_scenarios_keep_their_event_hashes() {
    let now = current();
    let text: String = now.iter().map(|(k, v)| format!("{k} {v}\n")).collect();
    let path = golden_file();
    if std::env::var_os("SCHEDLAB_UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e} (create it with SCHEDLAB_UPDATE_GOLDEN=1)", path.display()));
    let diffs: Vec<String> = want
        .lines()
        .zip(text.lines())
        .filter(|(a, b)| a != b)
        .map(|(a, b)| format!("  want {a}\n  got  {b}"))
        .collect();
    assert!(
        diffs.is_empty() && want.lines().count() == text.lines().count(),
        "event hashes changed (hash, events per scenario):\n{}\n{} lines recorded, {} now; if the change is intended, rerun with SCHEDLAB_UPDATE_GOLDEN=1",
        diffs.join("\n"),
        want.lines().count(),
        text.lines().count()
    );
}
