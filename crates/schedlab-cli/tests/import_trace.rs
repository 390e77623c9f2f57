//! `schedlab import-trace` (issue 15 §1): a real trace of nice-hogs,
//! recorded with `run --real --trace` on this host, imported and replayed
//! in the simulator, gives the real run's CPU shares within 5%; bad traces
//! are one line with the offset and exit code 2.

use std::process::Command;

fn schedlab(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_schedlab")).args(args).output().expect("run schedlab")
}

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("schedlab-import-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The hogs' runtimes (nice 0, nice 5) from a results JSON.
fn runtimes(json: &[u8]) -> (f64, f64) {
    let v: serde_json::Value = serde_json::from_slice(json).unwrap_or_else(|e| panic!("bad JSON ({e}): {}", String::from_utf8_lossy(json)));
    let tasks = v["tasks"].as_array().expect("tasks");
    let rt = |name: &str| tasks.iter().find(|t| t["name"] == name).and_then(|t| t["runtime_ns"].as_u64()).unwrap_or_else(|| panic!("no task {name}")) as f64;
    (rt("hogs-0"), rt("hogs-1"))
}

/// None when `run --real --trace` can record here; else why not (which
/// fails the test under CI=true), as in tests/real.rs.
fn trace_skip_reason(stderr: &str, code: Option<i32>) -> Option<String> {
    if code != Some(2) || !stderr.contains("tracefs") {
        return None;
    }
    let why = stderr.trim().to_string();
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("CI=true but the real-mode trace test cannot run: {why}");
    }
    Some(why)
}

#[test]
fn a_real_trace_of_nice_hogs_replays_with_the_real_shares() {
    let d = tmp("nice-hogs");
    let trace = d.join("real.pftrace");
    let scenario = format!("{}/../../scenarios/nice-hogs.toml", env!("CARGO_MANIFEST_DIR"));
    let out = schedlab(&["run", "--real", &scenario, "--set", "duration=\"3s\"", "--trace", trace.to_str().unwrap(), "--json", "-", "--quiet"]);
    let err = String::from_utf8_lossy(&out.stderr);
    if let Some(why) = trace_skip_reason(&err, out.status.code()) {
        eprintln!("skipped: {why}");
        return;
    }
    assert!(out.status.success(), "{err}");
    let (r0, r1) = runtimes(&out.stdout);
    let real = r0 / (r0 + r1);
    // Every task of the trace, and only the hogs with the run's last 100 ms
    // (where they exit) left out: their bursts then run on to the end, so
    // the simulated scheduler, not the recorded work, sets the shares.
    for (what, extra) in [("all tasks", vec![]), ("the hogs, runnable to the end", vec!["--tasks", "^hogs-", "--window", "0..2.9s"])] {
        let toml = d.join("replay.toml");
        let mut args = vec!["import-trace", trace.to_str().unwrap(), "-o", toml.to_str().unwrap()];
        args.extend(extra.iter().copied());
        let o = schedlab(&args);
        assert!(o.status.success(), "{what}: {}", String::from_utf8_lossy(&o.stderr));
        let text = std::fs::read_to_string(&toml).unwrap();
        let again = schedlab(&args);
        assert!(again.status.success());
        assert_eq!(std::fs::read_to_string(&toml).unwrap(), text, "{what}: the same trace gives the same scenario");
        let o = schedlab(&["run", toml.to_str().unwrap(), "--json", "-", "--quiet"]);
        assert!(o.status.success(), "{what}: {}\n{text}", String::from_utf8_lossy(&o.stderr));
        let (s0, s1) = runtimes(&o.stdout);
        let sim = s0 / (s0 + s1);
        eprintln!("{what}: nice-0 share real {:.1}%, replayed {:.1}% (nice-5 {:.1}% / {:.1}%)", 100.0 * real, 100.0 * sim, 100.0 * (1.0 - real), 100.0 * (1.0 - sim));
        assert!((sim / real - 1.0).abs() < 0.05 && ((1.0 - sim) / (1.0 - real) - 1.0).abs() < 0.05, "{what}: replayed shares {sim:.3} / {:.3} are not within 5% of the real {real:.3} / {:.3}\n{text}", 1.0 - sim, 1.0 - real);
    }
}

#[test]
fn a_bad_trace_is_one_line_with_its_offset_and_exit_code_2() {
    let d = tmp("bad");
    let f = d.join("cut.txt");
    let good = "          <idle>-0       [000] d..2.  100.000000: sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=a next_pid=10 next_prio=120\n";
    std::fs::write(&f, format!("{good}           a-10 [000] d..2. 100.1: sched_switch: prev_comm=a prev_pid=10\n")).unwrap();
    let o = schedlab(&["import-trace", f.to_str().unwrap(), "-o", d.join("x.toml").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(&format!("cut.txt: at byte {}: expected a tracefs line", good.len())), "{err}");
    std::fs::write(&f, b"\x0a\x05\x0a\x09").unwrap();
    let o = schedlab(&["import-trace", f.to_str().unwrap(), "-o", "-"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("at byte 0: expected a length-delimited field of 5 bytes within its message (2 left)"), "{err}");
    let o = schedlab(&["import-trace", f.to_str().unwrap(), "-o", "-", "--tasks", "("]);
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
}
