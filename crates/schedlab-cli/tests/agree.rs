//! `schedlab agree`: real runs beside simulations on the calibrated machine.
//! On this host: a scenario that fits is measured (its nice shares agree,
//! as `real.rs` checks for run --real), a sched_ext one and one that needs
//! more CPUs are skipped with the reason, and the CSV, JSON and plot are
//! written. In the sched_ext guest (when its tools are there, always under
//! CI=true): the same scenario is measured there. No wall-clock asserts:
//! only shares, which do not depend on the machine's speed.

use std::path::{Path, PathBuf};
use std::process::Command;

fn schedlab(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_schedlab")).args(args).output().expect("run schedlab")
}

mod common;

use common::repo;

fn scenario(name: &str) -> String {
    repo().join("scenarios").join(name).display().to_string()
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("schedlab-agree-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn json_of(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("agree.json")).expect("agree.json written");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("bad agree.json ({e}): {text}"))
}

fn entry<'a>(v: &'a serde_json::Value, file: &str) -> &'a serde_json::Value {
    v["scenarios"].as_array().expect("scenarios").iter().find(|s| s["scenario"].as_str().is_some_and(|f| f.ends_with(file))).unwrap_or_else(|| panic!("{file} not in {v}"))
}

#[test]
fn agree_measures_what_fits_and_skips_the_rest_with_the_reason() {
    let dir = tmpdir("host");
    let d = dir.display().to_string();
    let out = schedlab(&[
        "agree",
        &scenario("nice-hogs.toml"),
        &scenario("exp-000-immed-reenqueue.toml"),
        &scenario("cgroup-containers.toml"),
        "--set",
        "duration=\"2s\"",
        "--out",
        &d,
        "--plot",
        &d,
    ]);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if !out.status.success() && (stderr.contains("Operation not permitted") || stderr.contains("Permission denied")) {
        eprintln!("skipped: this host does not allow real runs: {stderr}");
        return;
    }
    assert!(out.status.success(), "agree failed: {stderr}");
    eprintln!("{stdout}");
    // It calibrated first, since no --machine was given, and kept the file.
    assert!(dir.join("agree-machine.toml").is_file(), "{stderr}");
    let v = json_of(&dir);
    let hogs = entry(&v, "nice-hogs.toml");
    assert_eq!(hogs["status"], "measured", "{hogs}");
    // Two pinned hogs, nice 0 and 5: 75.4 % : 24.6 % on both sides.
    let err = hogs["task_share_err_pp"].as_f64().expect("task shares compared");
    assert!(err < 5.0, "real and simulated nice shares {err:.1} points apart: {hogs}");
    let ext = entry(&v, "exp-000-immed-reenqueue.toml");
    assert_eq!(ext["status"], "skipped");
    assert!(ext["reason"].as_str().unwrap().contains("--vm"), "{ext}");
    let big = entry(&v, "cgroup-containers.toml");
    assert_eq!(big["status"], "skipped");
    assert!(big["reason"].as_str().unwrap().contains("out of range"), "{big}");
    // The table names every scenario; the CSV has a line for each workload
    // measured and each scenario skipped.
    for f in ["nice-hogs.toml", "exp-000-immed-reenqueue.toml: skipped", "cgroup-containers.toml: skipped", "measured scenarios"] {
        assert!(stdout.contains(f), "{f} missing from:\n{stdout}");
    }
    let csv = std::fs::read_to_string(dir.join("agree.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 1 + 2, "{csv}");
    assert!(dir.join("agree.svg").is_file() && dir.join("agree.png").is_file());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn agree_refuses_bad_input_in_one_line() {
    let out = schedlab(&["agree", "/nonexistent/x.toml", "--machine", "/dev/null"]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/x.toml"), "{err}");
    let dir = tmpdir("bad");
    let out = schedlab(&["agree", &scenario("nice-hogs.toml"), "--machine", "/nonexistent/machine.toml", "--out", &dir.display().to_string()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--machine /nonexistent/machine.toml") && err.contains("calibrate"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let out = schedlab(&["agree", &scenario("nice-hogs.toml"), "--set", "duration=\"soon\"", "--machine", "/dev/null"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("duration"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn agree_in_the_sched_ext_guest() {
    if let Some(why) = common::vm_skip_reason() {
        eprintln!("skipped: {why}");
        return;
    }
    let dir = tmpdir("vm");
    // A 2-CPU machine as `calibrate --vm` would describe the guest (its
    // costs left at the defaults: shares do not depend on them).
    let machine = dir.join("guest.toml");
    std::fs::write(&machine, "[machine]\ncpus = 2\nhz = 250\n").unwrap();
    let d = dir.display().to_string();
    let out = schedlab(&["agree", "--vm", &scenario("nice-hogs.toml"), "--set", "duration=\"3s\"", "--machine", &machine.display().to_string(), "--out", &d, "--quiet"]);
    assert!(out.status.success(), "agree --vm failed: {}", String::from_utf8_lossy(&out.stderr));
    let v = json_of(&dir);
    assert!(v["real"].as_str().unwrap().contains("guest"), "{v}");
    let hogs = entry(&v, "nice-hogs.toml");
    assert_eq!(hogs["status"], "measured", "{hogs}");
    let err = hogs["task_share_err_pp"].as_f64().expect("task shares compared");
    assert!(err < 5.0, "guest and simulated nice shares {err:.1} points apart: {hogs}");
    let _ = std::fs::remove_dir_all(&dir);
}
