//! Real mode on this host's kernel: the fair class's nice-0 vs nice-5 share,
//! measured from schedstat, must match the weights 1024 : 335 within 5%, and
//! so must the simulation of the same scenario.

use std::process::Command;

fn schedlab(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_schedlab")).args(args).output().expect("run schedlab")
}

fn scenario() -> String {
    format!("{}/../../scenarios/nice-hogs.toml", env!("CARGO_MANIFEST_DIR"))
}

/// runtime(nice 0) / runtime(nice 5) from a results JSON.
fn ratio(json: &[u8]) -> f64 {
    let v: serde_json::Value = serde_json::from_slice(json).unwrap_or_else(|e| panic!("bad JSON ({e}): {}", String::from_utf8_lossy(json)));
    let tasks = v["tasks"].as_array().expect("tasks");
    let rt = |nice: i64| tasks.iter().find(|t| t["nice"] == nice).and_then(|t| t["runtime_ns"].as_u64()).expect("a task of that nice") as f64;
    rt(0) / rt(5).max(1.0)
}

const WANT: f64 = 1024.0 / 335.0;

#[test]
fn real_nice_share_matches_weights() {
    let s = scenario();
    let out = schedlab(&["run", "--real", &s, "--set", "duration=\"3s\"", "--json", "-", "--quiet"]);
    assert!(out.status.success(), "schedlab run --real failed: {}", String::from_utf8_lossy(&out.stderr));
    let real = ratio(&out.stdout);
    let out = schedlab(&["run", &s, "--set", "duration=\"3s\"", "--json", "-", "--quiet"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let sim = ratio(&out.stdout);
    eprintln!("nice 0 : nice 5 runtime ratio: real {real:.3}, simulated {sim:.3}, weights {WANT:.3}");
    assert!((real / WANT - 1.0).abs() < 0.05, "real ratio {real:.3} is not within 5% of {WANT:.3}");
    assert!((sim / WANT - 1.0).abs() < 0.05, "simulated ratio {sim:.3} is not within 5% of {WANT:.3}");
}

#[test]
fn real_mode_explains_what_the_host_lacks() {
    // A CPU this host does not have: a one-line input error (exit 2) naming the field.
    let s = scenario();
    let out = schedlab(&["run", "--real", &s, "--set", "workload.0.cpus=\"4095\"", "--quiet"]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("workload.0.cpus") && err.contains("real mode"), "{err}");
}

#[test]
fn real_hackbench_finishes_and_measures_makespan() {
    let s = format!("{}/../../scenarios/hackbench-process.toml", env!("CARGO_MANIFEST_DIR"));
    let out = schedlab(&["run", "--real", &s, "--set", "workload.0.groups=1", "--set", "workload.0.loops=20", "--set", "duration=\"10s\"", "--json", "-", "--quiet"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let w = &v["workloads"][0];
    assert_eq!(w["finished"], true, "{w}");
    assert!(w["makespan_ns"].as_u64().unwrap() > 0);
}

#[test]
fn real_cyclictest_records_wakeup_latency() {
    let s = format!("{}/../../scenarios/cyclictest-normal.toml", env!("CARGO_MANIFEST_DIR"));
    let out = schedlab(&["run", "--real", &s, "--set", "duration=\"300ms\"", "--set", "workload.1.count=2", "--json", "-", "--quiet"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ct = v["workloads"].as_array().unwrap().iter().find(|w| w["kind"] == "cyclictest").expect("cyclictest workload");
    let n = ct["latency"]["count"].as_u64().unwrap();
    // Periods 1, 1.5, 2 and 2.5 ms over 300 ms: about 770 wakeups.
    assert!(n >= 500, "{n} samples");
}

#[test]
fn real_run_kills_and_reaps_everything_on_sigint() {
    let s = scenario();
    let mut child = Command::new(env!("CARGO_BIN_EXE_schedlab"))
        .args(["run", "--real", &s, "--set", "duration=\"30s\"", "--set", "workload.0.name=\"sigint\"", "--quiet"])
        .spawn()
        .expect("spawn schedlab");
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let threads = || {
        let mut n = 0;
        for p in std::fs::read_dir("/proc").unwrap().flatten() {
            if let Ok(tasks) = std::fs::read_dir(p.path().join("task")) {
                for t in tasks.flatten() {
                    if std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.starts_with("sigint-")) {
                        n += 1;
                    }
                }
            }
        }
        n
    };
    assert_eq!(threads(), 2, "both hog threads run");
    Command::new("kill").args(["-INT", &child.id().to_string()]).status().expect("kill");
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(130));
    assert_eq!(threads(), 0, "no worker survives the interrupt");
}
