//! `schedlab import-trace` (issue 15 §1): a real trace of nice-hogs,
//! recorded with `run --real --trace` on this host, imported and replayed
//! in the simulator, gives the real run's CPU shares within 5%; a real
//! trace of hackbench, replayed under EEVDF on the calibrated machine,
//! finishes within 25% of the real makespan; bad traces are one line with
//! the offset and exit code 2.

use std::process::Command;
use std::sync::{Mutex, MutexGuard};

mod common;

use common::trace_skip_reason;

fn schedlab(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_schedlab")).args(args).output().expect("run schedlab")
}

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("schedlab-import-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Held by each test that runs a workload on the live host: the real runs
/// measure the host, so two of them at once (the test harness runs this
/// file's tests on parallel threads) would each see the other's load: the
/// hackbench replay then missed its real makespan by 38% on a 2-CPU CI
/// machine while the nice-hogs run overlapped it.
fn live_host() -> MutexGuard<'static, ()> {
    static LIVE_HOST: Mutex<()> = Mutex::new(());
    // A test that failed while holding it leaves the host as quiet as any.
    LIVE_HOST.lock().unwrap_or_else(|e| e.into_inner())
}

/// The hogs' runtimes (nice 0, nice 5) from a results JSON.
fn runtimes(json: &[u8]) -> (f64, f64) {
    let v: serde_json::Value = serde_json::from_slice(json).unwrap_or_else(|e| panic!("bad JSON ({e}): {}", String::from_utf8_lossy(json)));
    let tasks = v["tasks"].as_array().expect("tasks");
    let rt = |name: &str| tasks.iter().find(|t| t["name"] == name).and_then(|t| t["runtime_ns"].as_u64()).unwrap_or_else(|| panic!("no task {name}")) as f64;
    (rt("hogs-0"), rt("hogs-1"))
}


#[test]
fn a_real_trace_of_nice_hogs_replays_with_the_real_shares() {
    let _host = live_host();
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

/// When the last of the replayed tasks whose name starts with `prefix`
/// exits, from the replay's start (its trace's first event): each replay
/// workload's makespan counts from its own `start`.
fn replay_end_ns(scenario: &str, results: &[u8], prefix: &str) -> u64 {
    let sc: toml::Table = scenario.parse().expect("the imported scenario is TOML");
    let start = |name: &str| {
        let w = sc["workload"].as_array().unwrap().iter().find(|w| w["name"].as_str() == Some(name)).unwrap_or_else(|| panic!("no workload {name}"));
        w.get("start").and_then(|s| s.as_str()).map_or(0, |s| schedlab::engine::time::parse_duration(s).unwrap())
    };
    let v: serde_json::Value = serde_json::from_slice(results).unwrap();
    let ours: Vec<&serde_json::Value> = v["workloads"].as_array().unwrap().iter().filter(|w| w["name"].as_str().is_some_and(|n| n.starts_with(prefix))).collect();
    assert!(!ours.is_empty(), "no replayed task named {prefix}*");
    ours.iter()
        .map(|w| {
            let name = w["name"].as_str().unwrap();
            let span = w["makespan_ns"].as_u64().unwrap_or_else(|| panic!("{name} did not finish in the replay"));
            start(name) + span
        })
        .max()
        .unwrap()
}

/// The acceptance of issue 15's trace replay: a real hackbench run (one
/// group of 10 senders and 10 receivers, threads, unix sockets) recorded
/// with `--trace`, every task of the trace imported (what else ran on the
/// host competes in the replay as it did for real, in the sessions'
/// autogroups the trace names), replayed under EEVDF on the machine
/// `calibrate --quick` measured: the replayed hackbench tasks finish within
/// 25% of the real makespan.
#[test]
fn a_real_trace_of_hackbench_replays_with_the_real_makespan() {
    let _host = live_host();
    let d = tmp("hackbench");
    let trace = d.join("real.pftrace");
    let scenario = format!("{}/../../scenarios/hackbench-threads.toml", env!("CARGO_MANIFEST_DIR"));
    let sets = ["workload.0.groups=1", "workload.0.loops=100", "duration=\"10s\""];
    let mut args = vec!["run", "--real", &scenario, "--trace", trace.to_str().unwrap(), "--json", "-", "--quiet"];
    for s in &sets {
        args.extend(["--set", s]);
    }
    let out = schedlab(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    if let Some(why) = trace_skip_reason(&err, out.status.code()) {
        eprintln!("skipped: {why}");
        return;
    }
    assert!(out.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let real = v["workloads"][0]["makespan_ns"].as_u64().unwrap_or_else(|| panic!("the real hackbench did not finish: {v}"));
    let toml = d.join("replay.toml");
    let o = schedlab(&["import-trace", trace.to_str().unwrap(), "-o", toml.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let machine = d.join("machine.toml");
    let o = schedlab(&["calibrate", "--quick", "-o", machine.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Longer than the trace: the replay may take longer than the real run.
    let o = schedlab(&["run", toml.to_str().unwrap(), "--machine", machine.to_str().unwrap(), "--sched", "eevdf", "--set", "duration=\"2s\"", "--json", "-", "--quiet"]);
    let text = std::fs::read_to_string(&toml).unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let sim = replay_end_ns(&text, &o.stdout, "hb-");
    let tasks = text.matches("[[workload]]").count();
    let err_pct = 100.0 * (sim as f64 / real as f64 - 1.0);
    eprintln!("hackbench: real makespan {:.2} ms, replayed {:.2} ms ({err_pct:+.1}%); trace {} bytes, {tasks} tasks", real as f64 / 1e6, sim as f64 / 1e6, std::fs::metadata(&trace).unwrap().len());
    // On a host busy with other sessions' work, the replay also has to
    // share the CPUs among their autogroups as the kernel did, which this
    // acceptance does not measure (README, "Replaying a real trace"):
    // asserted when hackbench had most of the CPUs in the real run.
    let hb_cpu: u64 = v["workloads"][0]["runtime_ns"].as_u64().unwrap();
    let nr_cpus = v["nr_cpus"].as_u64().unwrap();
    let hb_share = hb_cpu as f64 / (nr_cpus * real) as f64;
    if hb_share < QUIET_HOST_SHARE {
        eprintln!("not asserted: the host was busy, hackbench had {:.0}% of the {nr_cpus} CPUs over its makespan (below {:.0}%)", 100.0 * hb_share, 100.0 * QUIET_HOST_SHARE);
        return;
    }
    let busy = foreign_hogs(&text);
    if !busy.is_empty() {
        eprintln!("not asserted: the host was busy, other sessions' tasks ran to the end of the trace: {busy:?}");
        return;
    }
    assert!(err_pct.abs() < 25.0, "replayed makespan {sim} ns is not within 25% of the real {real} ns ({err_pct:+.1}%)\n{text}");
}

/// Tasks of the imported scenario outside the test's own session (no
/// `hb-` or `schedlab` name, in an autogroup other than hackbench's) that
/// were still runnable when the trace ended: CPU hogs of other sessions,
/// such as a compiler. The replay shares the CPUs with them among the
/// autogroups, which this acceptance does not measure (README, "Replaying
/// a real trace"), even when hackbench had most of the CPUs for real.
fn foreign_hogs(scenario: &str) -> Vec<String> {
    let sc: toml::Table = scenario.parse().expect("the imported scenario is TOML");
    let workloads = sc["workload"].as_array().expect("workloads");
    let group = |w: &toml::Value| w.get("cgroup").and_then(|c| c.as_str()).map(str::to_owned);
    let hb_group = workloads.iter().find(|w| w["name"].as_str().is_some_and(|n| n.starts_with("hb-"))).and_then(group);
    workloads
        .iter()
        .filter(|w| {
            let name = w["name"].as_str().unwrap_or("");
            let to_end = w.get("steps").and_then(|s| s.as_array()).is_some_and(|s| s.iter().any(|x| x.as_str() == Some("run to end")));
            to_end && !name.starts_with("hb-") && !name.starts_with("schedlab") && group(w).is_some() && group(w) != hb_group
        })
        .map(|w| w["name"].as_str().unwrap_or("").to_owned())
        .collect()
}

/// Hackbench keeps the CPUs mostly busy by itself (88% of this host's 2
/// CPUs in a run with little else running): below this share of them,
/// other work took a good part.
const QUIET_HOST_SHARE: f64 = 0.75;

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
