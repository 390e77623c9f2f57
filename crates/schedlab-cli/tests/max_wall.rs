//! `--max-wall`: a run stopped by its wall-time bound reports what it
//! simulated, marked partial; compare marks the variant, sweep fails the run
//! and names it. The bound is tiny (1ms) against a 100 s scenario, so the
//! run stops at the first check (after 65,536 events) on any machine: no
//! assertion depends on how fast this machine is.

use std::path::PathBuf;
use std::process::{Command, Output};

fn schedlab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_schedlab")).args(args).output().expect("run schedlab")
}

fn mixed() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/mixed.toml").display().to_string()
}

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("schedlab-max-wall-{}-{name}", std::process::id()))
}

fn json(out: &Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("no JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

#[test]
fn run_stops_with_partial_results() {
    let out = schedlab(&["run", &mixed(), "--set", "duration=\"100s\"", "--max-wall", "1ms", "--json", "-", "--quiet"]);
    let v = json(&out);
    let p = &v["partial"];
    assert_eq!(p["reason"], "--max-wall 1.00ms", "{p}");
    assert_eq!(p["duration_ns"], 100_000_000_000u64);
    let simulated = v["sim_time_ns"].as_u64().unwrap();
    assert!(simulated > 0 && simulated < 100_000_000_000, "stopped inside the run: {simulated}");
    // The books are closed at the stop: no CPU was busy longer than the
    // time simulated, and the tasks' runtime is the CPUs' busy time.
    let busy: Vec<u64> = v["cpus"].as_array().unwrap().iter().map(|c| c["busy_ns"].as_u64().unwrap()).collect();
    assert!(busy.iter().all(|&b| b <= simulated), "busy {busy:?} > simulated {simulated}");
    let runtime: u64 = v["tasks"].as_array().unwrap().iter().map(|t| t["runtime_ns"].as_u64().unwrap()).sum();
    assert!(runtime <= busy.iter().sum::<u64>(), "runtime {runtime} > busy {busy:?}");
    assert!(runtime > 0);

    // The summary says so, on the human path too.
    let out = schedlab(&["run", &mixed(), "--set", "duration=\"100s\"", "--max-wall", "1ms"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("PARTIAL: stopped by --max-wall 1.00ms after"), "{text}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("the results are partial"));
}

#[test]
fn a_run_within_its_bound_is_complete() {
    let bounded = json(&schedlab(&["run", &mixed(), "--set", "duration=\"20ms\"", "--max-wall", "10m", "--json", "-", "--quiet"]));
    let plain = json(&schedlab(&["run", &mixed(), "--set", "duration=\"20ms\"", "--json", "-", "--quiet"]));
    assert!(bounded.get("partial").is_none());
    assert_eq!(bounded, plain, "a bound that is not reached changes nothing");
}

#[test]
fn bad_max_wall_is_refused() {
    for (arg, want) in [("5parsecs", "unknown unit"), ("0s", "is zero"), ("", "no number")] {
        let out = schedlab(&["run", &mixed(), "--max-wall", arg]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{arg}: {err}");
        assert!(err.contains("--max-wall") && err.contains(want), "{arg}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
    let out = schedlab(&["run", &mixed(), "--real", "--max-wall", "1s"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--real: --max-wall"));
}

#[test]
fn compare_marks_the_variant_partial() {
    let dir = tmp("compare");
    let out = schedlab(&["compare", &mixed(), "--sched", "eevdf,simple", "--set", "duration=\"100s\"", "--max-wall", "1ms", "--out", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("eevdf (partial)") && text.contains("simple (partial)"), "{text}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("mixed-compare.json")).unwrap()).unwrap();
    let runs = v["runs"].as_array().or_else(|| v["variants"].as_array()).expect("runs");
    assert!(runs.iter().all(|r| r["partial"].as_str().is_some_and(|p| p.starts_with("stopped by --max-wall 1.00ms at "))), "{v:#}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sweep_fails_a_run_that_reaches_its_bound() {
    let dir = tmp("sweep");
    let out = schedlab(&["sweep", &mixed(), "--seeds", "1..2", "--set", "duration=\"100s\"", "--max-wall", "1ms", "--out", dir.to_str().unwrap(), "-j", "1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "failed runs of a sweep exit 2: {err}");
    assert!(format!("{text}{err}").contains("stopped by --max-wall 1.00ms"), "{text}\n{err}");
    // Not stored: a resumed sweep runs them again.
    let stored = std::fs::read_dir(dir.join("runs")).map(|d| d.count()).unwrap_or(0);
    assert_eq!(stored, 0);
    let _ = std::fs::remove_dir_all(&dir);
}
