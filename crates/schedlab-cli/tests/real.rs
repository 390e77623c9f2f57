//! Real mode on this host's kernel: the fair class's nice-0 vs nice-5 share,
//! measured from schedstat, must match the weights 1024 : 335 within 5%, and
//! so must the simulation of the same scenario.

use std::process::Command;

mod common;

use common::trace_skip_reason;

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

/// SIGINT, SIGTERM and SIGHUP, each at its own moment (the later two vary
/// from run to run, between 0.3 and 2.3 s: start-up, calibration or the
/// run): every worker thread and process is killed and reaped, and the
/// exit status is 130.
#[test]
fn real_run_kills_and_reaps_everything_on_sigint() {
    let s = scenario();
    let vary = (std::process::id() as u64 * 2_654_435_761) % 2_000;
    for (signal, after_ms) in [("INT", 1500), ("TERM", 300 + vary), ("HUP", 2300 - vary)] {
        let name = format!("sig{}", signal.to_lowercase());
        let mut child = Command::new(env!("CARGO_BIN_EXE_schedlab"))
            .args(["run", "--real", &s, "--set", "duration=\"30s\"", "--set", &format!("workload.0.name=\"{name}\""), "--quiet"])
            .spawn()
            .expect("spawn schedlab");
        std::thread::sleep(std::time::Duration::from_millis(after_ms));
        let threads = || {
            let mut n = 0;
            for p in std::fs::read_dir("/proc").unwrap().flatten() {
                if let Ok(tasks) = std::fs::read_dir(p.path().join("task")) {
                    for t in tasks.flatten() {
                        if std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.starts_with(&format!("{name}-"))) {
                            n += 1;
                        }
                    }
                }
            }
            n
        };
        if signal == "INT" {
            assert_eq!(threads(), 2, "both hog threads run");
        }
        Command::new("kill").args([&format!("-{signal}"), &child.id().to_string()]).status().expect("kill");
        let status = child.wait().expect("wait");
        // 130 once real mode has taken over its signals; a signal that
        // arrives before that (while the scenario loads) ends the process
        // the default way, before any worker exists.
        use std::os::unix::process::ExitStatusExt;
        assert!(status.code() == Some(130) || status.signal().is_some() && signal != "INT", "SIG{signal} after {after_ms} ms: {status}");
        assert_eq!(threads(), 0, "no worker survives SIG{signal} after {after_ms} ms");
    }
}

#[test]
fn compare_real_puts_the_host_run_beside_its_simulation() {
    let s = scenario();
    let out_dir = std::env::temp_dir().join(format!("schedlab-compare-real-{}", std::process::id()));
    let out = schedlab(&["compare", &s, "--real", "--set", "duration=\"1500ms\"", "--out", out_dir.to_str().unwrap(), "--json", "-", "--quiet"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("bad JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    let labels: Vec<&str> = v["variants"].as_array().unwrap().iter().map(|r| r["label"].as_str().unwrap()).collect();
    assert_eq!(labels, ["eevdf (sim)", "eevdf (real)"]);
    // The real row is a real run: no events, its own hash marker.
    assert_eq!(v["variants"][1]["event_hash"], "real");
    let checks = v["real_vs_sim"][0]["checks"].as_array().unwrap();
    let what: Vec<&str> = checks.iter().map(|c| c["what"].as_str().unwrap()).collect();
    assert_eq!(what, ["tasks that ran", "affinity", "CPU shares"]);
    for c in checks {
        assert_eq!(c["agree"], true, "{c}");
    }
    // The same document is written next to a CSV.
    assert!(out_dir.join("nice-hogs-compare-real.json").is_file());
    assert!(out_dir.join("nice-hogs-compare-real.csv").is_file());
    let _ = std::fs::remove_dir_all(&out_dir);
}

#[test]
fn compare_real_refuses_what_a_host_kernel_cannot_do() {
    let s = scenario();
    let cases: [(&[&str], &str); 3] = [
        (&["--sched", "eevdf,simple"], "--vm"),
        (&["--feature", "RUN_TO_PARITY=on,off"], "--feature"),
        (&["--machine", "8"], "--machine"),
    ];
    for (extra, needle) in cases {
        let mut args = vec!["compare", s.as_str(), "--real", "--quiet"];
        args.extend_from_slice(extra);
        let out = schedlab(&args);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {}", String::from_utf8_lossy(&out.stderr));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.lines().count() == 1 && err.contains(needle), "{extra:?}: {err}");
    }
}

#[path = "../../schedlab/tests/common/perfetto.rs"]
mod perfetto;

/// The tracing tests compare tracefs's state before and after a run, so
/// they run one at a time.
static TRACEFS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn tracefs_lock() -> std::sync::MutexGuard<'static, ()> {
    TRACEFS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether tracefs is mounted, and the schedlab instances in it.
fn tracefs_state() -> (bool, Vec<String>) {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let points: Vec<String> = mounts.lines().filter(|l| l.split(' ').nth(2) == Some("tracefs")).filter_map(|l| l.split(' ').nth(1).map(String::from)).collect();
    let instances = points
        .iter()
        .flat_map(|p| std::fs::read_dir(format!("{p}/instances")).into_iter().flatten().flatten())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("schedlab-"))
        .collect();
    (!points.is_empty(), instances)
}


fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("schedlab-real-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn real_trace_records_the_kernels_switches_of_our_tasks() {
    let _one_at_a_time = tracefs_lock();
    let d = tmp("trace");
    let file = d.join("real.pftrace");
    let before = tracefs_state();
    let s = scenario();
    let out = schedlab(&["run", "--real", &s, "--set", "duration=\"300ms\"", "--trace", file.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    if let Some(why) = trace_skip_reason(&err, out.status.code()) {
        eprintln!("skipped: {why}");
        return;
    }
    assert!(out.status.success(), "{err}");
    assert!(err.contains("events recorded") && err.contains(&format!("wrote {}", file.display())), "{err}");
    assert_eq!(tracefs_state(), before, "the instance is removed, and tracefs unmounted if schedlab mounted it");

    let trace = perfetto::decode(&std::fs::read(&file).unwrap());
    let cpus = perfetto::per_cpu(&trace, 1);
    // Both hogs (trace pids 1 and 2, as in a simulated trace) are pinned
    // to CPU 0 and take turns on it for the whole run.
    let switches_in = |c: usize, pid: i32| cpus.get(c).map_or(0, |evs| evs.iter().filter(|e| e.sched_switch.as_ref().is_some_and(|s| s.next_pid == Some(pid))).count());
    for (pid, name) in [(1, "hogs-0"), (2, "hogs-1")] {
        assert!(switches_in(0, pid) >= 5, "{name} (pid {pid}) runs on CPU 0: {} switches in", switches_in(0, pid));
        for c in 1..cpus.len() {
            assert_eq!(switches_in(c, pid), 0, "{name} is pinned to CPU 0 but ran on CPU {c}");
        }
    }
    let s0: Vec<_> = cpus[0].iter().filter_map(|e| e.sched_switch.as_ref()).collect();
    assert!(s0.iter().any(|s| s.prev_pid == Some(1) && s.next_pid == Some(2) && s.prev_comm.as_deref() == Some("hogs-0") && s.next_comm.as_deref() == Some("hogs-1")), "hogs-0 is preempted by hogs-1");
    assert!(s0.iter().any(|s| s.prev_pid == Some(2) && s.prev_state == Some(0)), "a preempted hog stays runnable (R)");
    // Times are the run's: from the common start, within the 300 ms (and
    // the few ms until tracing stops).
    let ts: Vec<u64> = cpus.iter().flatten().filter_map(|e| e.timestamp).collect();
    assert!(ts.iter().all(|&t| t < 1_000_000_000), "{:?}", ts.iter().max());
    assert!(ts.iter().any(|&t| t > 250_000_000), "events until the end of the run");
    // Named as a simulated trace of the scenario names them.
    let sim = d.join("sim.pftrace");
    let o = schedlab(&["run", &s, "--set", "duration=\"300ms\"", "--trace", sim.to_str().unwrap(), "--quiet"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (real, sim) = (perfetto::threads(&trace), perfetto::threads(&perfetto::decode(&std::fs::read(&sim).unwrap())));
    assert_eq!(real[&1], ("hogs-0".to_string(), 1));
    for pid in [1, 2] {
        assert_eq!(real[&pid], sim[&pid], "pid {pid}: thread name and process as in the simulated trace");
    }

    // --trace-window keeps only its part of the run.
    let out = schedlab(&["run", "--real", &s, "--set", "duration=\"300ms\"", "--trace", file.to_str().unwrap(), "--trace-window", "100ms..200ms", "--quiet"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let trace = perfetto::decode(&std::fs::read(&file).unwrap());
    let ts: Vec<u64> = perfetto::per_cpu(&trace, 1).iter().flatten().filter_map(|e| e.timestamp).collect();
    assert!(ts.len() >= 5 && ts.iter().all(|t| (100_000_000..200_000_000).contains(t)), "{ts:?}");
}

#[test]
fn real_trace_without_privilege_says_what_to_do() {
    let _one_at_a_time = tracefs_lock();
    let d = tmp("unpriv");
    // World-writable, so an unprivileged user could write the trace there.
    Command::new("chmod").arg("777").arg(&d).status().unwrap();
    let file = d.join("t.pftrace");
    let s = scenario();
    let args = ["run", "--real", &s, "--set", "duration=\"100ms\"", "--trace", file.to_str().unwrap(), "--quiet"];
    let root = std::fs::read_to_string("/proc/self/status").unwrap().lines().any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"));
    let out = if root {
        // As nobody, without capabilities.
        match Command::new("setpriv").args(["--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all"]).arg(env!("CARGO_BIN_EXE_schedlab")).args(args).output() {
            Ok(o) => o,
            Err(e) => {
                assert!(std::env::var("CI").map_or(true, |v| v != "true"), "CI=true but setpriv cannot run: {e}");
                eprintln!("skipped: setpriv: {e}");
                return;
            }
        }
    } else {
        schedlab(&args)
    };
    let err = String::from_utf8_lossy(&out.stderr);
    if out.status.success() {
        eprintln!("skipped: this user may use tracefs");
        return;
    }
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(err.contains("tracefs") && err.contains("run as root"), "{err}");
    assert!(!file.exists(), "no trace file is left behind");
}

#[test]
fn real_trace_is_cleaned_up_on_sigint() {
    let _one_at_a_time = tracefs_lock();
    let before = tracefs_state();
    let file = tmp("sigint").join("t.pftrace");
    let s = scenario();
    let child = Command::new(env!("CARGO_BIN_EXE_schedlab"))
        .args(["run", "--real", &s, "--set", "duration=\"30s\"", "--trace", file.to_str().unwrap(), "--quiet"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn schedlab");
    let pid = child.id();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let during = tracefs_state();
    Command::new("kill").args(["-INT", &pid.to_string()]).status().expect("kill");
    let out = child.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&out.stderr);
    if let Some(why) = trace_skip_reason(&err, out.status.code()) {
        eprintln!("skipped: {why}");
        return;
    }
    assert!(during.0 && during.1.contains(&format!("schedlab-{pid}")), "the run traces in its own instance: {during:?}");
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert_eq!(tracefs_state(), before, "instance removed (and tracefs unmounted if schedlab mounted it)");
}

#[test]
fn run_real_refuses_options_a_real_kernel_would_ignore() {
    let s = scenario();
    let cases: [(&[&str], &str); 4] = [
        (&["--feature", "RUN_TO_PARITY=off"], "--feature"),
        (&["--machine", "8"], "--machine"),
        (&["--csv", "/tmp/schedlab-never"], "--csv"),
        (&["--plot", "/tmp/schedlab-never"], "--plot"),
    ];
    for (extra, needle) in cases {
        let mut args = vec!["run", "--real", s.as_str(), "--quiet"];
        args.extend_from_slice(extra);
        let out = schedlab(&args);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {}", String::from_utf8_lossy(&out.stderr));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.lines().count() == 1 && err.contains(needle), "{extra:?}: {err}");
    }
}
