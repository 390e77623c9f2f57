//! The command line: real runs, and bad input that must fail cleanly.

use std::path::PathBuf;
use std::process::{Command, Output};

fn schedlab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_schedlab")).args(args).output().expect("run schedlab")
}

fn scenario_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios")
}

fn write_tmp(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("schedlab-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

const GOOD: &str = "seed = 1\nduration = \"100ms\"\n[machine]\npreset = \"4cpu\"\n[[workload]]\nkind = \"hog\"\ncount = 2\ncpus = \"0\"\n";

/// A bad scenario must exit 2 with one line on stderr naming file and key, and never panic.
fn assert_bad(name: &str, text: &str, must_contain: &[&str]) {
    let p = write_tmp(name, text);
    let out = schedlab(&["run", p.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "expected one line: {err}");
    assert!(err.contains(name), "error must name the file: {err}");
    for m in must_contain {
        assert!(err.contains(m), "error must mention {m:?}: {err}");
    }
}

#[test]
fn unknown_key() {
    assert_bad("unknown-key.toml", &GOOD.replace("count = 2", "count = 2\ncuont = 3"), &["workload.0.cuont", "unknown field", ":8:"]);
}

#[test]
fn bad_duration() {
    assert_bad("bad-duration.toml", &GOOD.replace("\"100ms\"", "\"100 parsecs\""), &["duration", "expected", ":2:"]);
}

#[test]
fn cpu_out_of_range() {
    assert_bad("cpu-range.toml", &GOOD.replace("cpus = \"0\"", "cpus = \"0-9\""), &["workload.0.cpus", "out of range", "4 CPUs"]);
}

#[test]
fn unknown_preset() {
    assert_bad("preset.toml", &GOOD.replace("\"4cpu\"", "\"cray-1\""), &["machine.preset", "cray-1", "ryzen-3900x"]);
}

#[test]
fn unknown_feature() {
    assert_bad("feature.toml", &format!("{GOOD}[features]\nRUN_TO_PARTY = true\n"), &["features.RUN_TO_PARTY", "RUN_TO_PARITY"]);
}

#[test]
fn syntax_error_has_a_line() {
    assert_bad("syntax.toml", &GOOD.replace("count = 2", "count = = 2"), &[":7:"]);
}

/// Found by fuzzing: a scenario without `duration` said ".: expected a duration".
#[test]
fn missing_duration_is_named() {
    assert_bad("nodur.toml", "[[workload]]\nkind = \"hog\"\ncount = 1\n", &["duration: missing", "duration = \"10s\""]);
}

/// A scenario bigger than this machine's memory is refused up front with
/// the estimate (issue 13 §4), not OOM-killed halfway.
#[test]
fn scenario_too_big_for_memory_is_refused_up_front() {
    assert_bad("huge.toml", "duration = \"1s\"\n[[workload]]\nkind = \"hog\"\ncount = 4000000000\n", &["needs about", "4000000000 tasks", "available here"]);
}

#[test]
fn missing_file_is_an_io_error() {
    let out = schedlab(&["run", "/nonexistent/x.toml"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn shipped_scenario_runs_and_json_is_deterministic() {
    let s = scenario_dir().join("nice-hogs.toml");
    let a = schedlab(&["run", s.to_str().unwrap(), "--json", "-", "--quiet"]);
    let b = schedlab(&["run", s.to_str().unwrap(), "--json", "-", "--quiet"]);
    assert!(a.status.success());
    assert_eq!(a.stdout, b.stdout);
    let v: serde_json::Value = serde_json::from_slice(&a.stdout).unwrap();
    assert_eq!(v["seed"], 42);
    assert_eq!(v["sim_time_ns"], 10_000_000_000u64);
    assert!(v["events"].as_u64().unwrap() > 1000);
    assert_eq!(v["event_hash"].as_str().unwrap().len(), 16);
    assert_eq!(v["tasks"].as_array().unwrap().len(), 2);
    assert_eq!(v["cpus"].as_array().unwrap().len(), 4);
}

#[test]
fn set_and_seed_overrides() {
    let s = scenario_dir().join("nice-hogs.toml");
    let out = schedlab(&["run", s.to_str().unwrap(), "--set", "workload.0.count=1", "--set", "workload.0.nice=0", "--seed", "7", "--set", "duration=\"1s\"", "--json", "-", "-q"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["seed"], 7);
    assert_eq!(v["tasks"].as_array().unwrap().len(), 1);
}

#[test]
fn feature_flag_from_cli() {
    let s = scenario_dir().join("nice-hogs.toml");
    let out = schedlab(&["run", s.to_str().unwrap(), "--feature", "RUN_TO_PARITY=off", "--json", "-", "-q"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["features_changed"][0], "NO_RUN_TO_PARITY");
    let bad = schedlab(&["run", s.to_str().unwrap(), "--feature", "NOPE"]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn every_shipped_scenario_runs() {
    for entry in std::fs::read_dir(scenario_dir()).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_some_and(|e| e == "toml") {
            let out = schedlab(&["run", p.to_str().unwrap(), "--set", "duration=\"50ms\"", "-q"]);
            assert!(out.status.success(), "{}: {}", p.display(), String::from_utf8_lossy(&out.stderr));
        }
    }
}

#[test]
fn list_shows_everything() {
    let out = schedlab(&["list"]);
    let s = String::from_utf8_lossy(&out.stdout);
    for want in ["epyc-2s-192", "cyclictest", "RUN_TO_PARITY", "YIELD_TO_LAG_CREDIT", "eevdf"] {
        assert!(s.contains(want), "list lacks {want}");
    }
}

#[test]
fn machine_from_lscpu_and_sysfs() {
    // A 2-socket, 4-core, SMT2 machine as `lscpu -p` prints it.
    let mut lscpu = String::from("# CPU,Core,Socket,Node,,L1d,L1i,L2,L3\n");
    for cpu in 0..8 {
        let core = cpu % 4;
        let socket = core / 2;
        lscpu.push_str(&format!("{cpu},{core},{socket},{socket},,{core},{core},{core},{socket}\n"));
    }
    let lp = write_tmp("lscpu.txt", &lscpu);
    let scen = write_tmp("imported.toml", &format!("duration = \"50ms\"\n[machine]\nlscpu = \"{}\"\n[[workload]]\nkind = \"hog\"\ncount = 8\n", lp.display()));
    let out = schedlab(&["run", scen.to_str().unwrap(), "--json", "-", "-q"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["nr_cpus"], 8);
    // --machine with a path overrides the scenario's preset.
    let s = scenario_dir().join("nice-hogs.toml");
    let out = schedlab(&["run", s.to_str().unwrap(), "--machine", lp.to_str().unwrap(), "--set", "duration=\"50ms\"", "--json", "-", "-q"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["nr_cpus"], 8);
    // This host's own layout, when sysfs is there.
    if std::path::Path::new("/sys/devices/system/cpu/online").exists() {
        let out = schedlab(&["run", s.to_str().unwrap(), "--machine", "/sys/devices/system/cpu", "--set", "duration=\"50ms\"", "-q"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let out = schedlab(&["run", s.to_str().unwrap(), "--machine", "12", "--set", "duration=\"50ms\"", "--json", "-", "-q"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["nr_cpus"], 12);
}

#[test]
fn nonsense_values_are_rejected_not_defaulted() {
    assert_bad("spin.toml", &GOOD.replace("count = 2", "count = 2\nrun = \"0ns\""), &["workload.0.run", "spin forever"]);
    assert_bad("nice.toml", &GOOD.replace("count = 2", "count = 2\nnice = 25"), &["workload.0.nice", "-20..19"]);
    assert_bad("prio.toml", &GOOD.replace("count = 2", "count = 2\npolicy = \"fifo\""), &["workload.0.priority", "1..99"]);
    assert_bad("slice.toml", &format!("{GOOD}[scheduler]\nbase_slice = \"0ns\"\n"), &["scheduler.base_slice"]);
    assert_bad("hz.toml", &GOOD.replace("preset = \"4cpu\"", "preset = \"4cpu\"\nhz = 7"), &["machine.hz"]);
}

/// `--sched-args` read with a loader profile (`--sched-profile`): good flags
/// run, an unknown one is one line naming it and the flags it could be.
#[test]
fn sched_args_and_profile() {
    let p = write_tmp("sched-args.toml", GOOD);
    let shim = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../schedlab-host/tests/shim");
    let (src, prof) = (shim.join("loader.bpf.c"), shim.join("loader.toml"));
    let run = |args: &str| {
        schedlab(&[
            "run",
            p.to_str().unwrap(),
            "--sched",
            src.to_str().unwrap(),
            "--sched-profile",
            prof.to_str().unwrap(),
            "--sched-args",
            args,
            "--json",
            "-",
        ])
    };
    let out = run("-s 2000 --nosmt -m 0x3");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json = String::from_utf8_lossy(&out.stdout);
    assert!(json.contains("\"primary_mask\": 3") || json.contains("\"primary_mask\":3"), "{json}");
    let out = run("-q 1");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("unknown flag `-q` for loader-test; it accepts: -s, --slice-us"), "{err}");
    // Flags without a profile to read them with are refused too.
    let out = schedlab(&["run", p.to_str().unwrap(), "--sched", "simple", "--sched-args", "-s 1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no loader profile"), "{err}");
}

/// `--check` runs the invariant checks without changing a result: the JSON
/// is byte-identical with and without it; with --real it is refused.
#[test]
fn check_flag_keeps_results_identical() {
    let p = write_tmp("check.toml", GOOD);
    let plain = schedlab(&["run", p.to_str().unwrap(), "--json", "-", "--quiet"]);
    let checked = schedlab(&["run", p.to_str().unwrap(), "--json", "-", "--quiet", "--check"]);
    assert_eq!(plain.status.code(), Some(0), "{}", String::from_utf8_lossy(&plain.stderr));
    assert_eq!(checked.status.code(), Some(0), "{}", String::from_utf8_lossy(&checked.stderr));
    assert!(!plain.stdout.is_empty());
    assert_eq!(plain.stdout, checked.stdout);
    let real = schedlab(&["run", p.to_str().unwrap(), "--real", "--check"]);
    let err = String::from_utf8_lossy(&real.stderr);
    assert_eq!(real.status.code(), Some(2), "{err}");
    assert!(err.contains("--check"), "{err}");
}

/// A scheduler that faults (issue 13) is ejected, not fatal: `run` exits 0
/// with the error exit in the JSON (op, address, file:line), twice the
/// same; `compare` runs every variant and shows the exit; `sweep` completes
/// every run and names the ejected ones; `--op-timeout` is checked.
#[test]
fn faulting_scheduler_is_ejected_in_run_compare_and_sweep() {
    // Sleeping hogs: enough enqueues to reach the default fault_after (20).
    let p = write_tmp("fault.toml", &GOOD.replace("count = 2\ncpus = \"0\"", "count = 6\nrun = \"1ms\"\nsleep = \"1ms\""));
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../schedlab-host/tests/schedulers/null_deref.bpf.c");
    let src = src.to_str().unwrap();
    let run = || schedlab(&["run", p.to_str().unwrap(), "--sched", src, "--sched-set", "fault_after=3", "--json", "-", "--quiet"]);
    let (a, b) = (run(), run());
    assert_eq!(a.status.code(), Some(0), "{}", String::from_utf8_lossy(&a.stderr));
    assert_eq!(a.stdout, b.stdout, "deterministic");
    let json: serde_json::Value = serde_json::from_slice(&a.stdout).expect("JSON");
    let exit = &json["sched_ext"]["exit"];
    assert_eq!(exit["kind"], "ERROR", "{exit}");
    let msg = exit["msg"].as_str().unwrap_or_default();
    assert!(msg.starts_with("ops.enqueue(): invalid memory access: write to address 0x0"), "{msg}");
    assert!(msg.contains("null_deref.bpf.c:") && msg.contains("verifier would have rejected"), "{msg}");

    let out_dir = std::env::temp_dir().join(format!("schedlab-cli-fault-{}", std::process::id()));
    let cmp = schedlab(&["compare", p.to_str().unwrap(), "--sched", &format!("simple,{src}"), "--out", out_dir.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&cmp.stdout);
    assert_eq!(cmp.status.code(), Some(0), "{}", String::from_utf8_lossy(&cmp.stderr));
    assert!(text.contains("ERROR (runtime error): ops.enqueue(): invalid memory access"), "{text}");

    let sweep_dir = out_dir.join("sweep");
    let sw = schedlab(&[
        "sweep",
        p.to_str().unwrap(),
        "--sched",
        src,
        "--seeds",
        "1..2",
        "--param",
        "scheduler.options.fault_after=3,1000000",
        "--out",
        sweep_dir.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&sw.stdout);
    assert_eq!(sw.status.code(), Some(0), "{}", String::from_utf8_lossy(&sw.stderr));
    assert!(text.contains("2 runs failed:"), "{text}");
    assert!(text.contains("seed 1 scheduler.options.fault_after=3: sched_ext ejected: ERROR (runtime error): ops.enqueue()"), "{text}");
    assert!(!text.contains("fault_after=1000000: sched_ext ejected"), "{text}");
    let agg: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(sweep_dir.join("fault-sweep.json")).unwrap()).unwrap();
    assert_eq!(agg["failed"].as_array().map(Vec::len), Some(2), "{agg}");

    let bad = schedlab(&["run", p.to_str().unwrap(), "--sched", src, "--op-timeout", "soon"]);
    let err = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(bad.status.code(), Some(2), "{err}");
    assert!(err.contains("scheduler.op_timeout"), "{err}");
    let _ = std::fs::remove_dir_all(&out_dir);
}
