//! `schedlab calibrate` on this host's kernel: the machine file it writes
//! loads with `--machine`, and the figures are physically sane (positive,
//! ordered where the kernel orders them). No other wall-clock asserts.

use std::path::{Path, PathBuf};
use std::process::Command;

fn schedlab(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_schedlab")).args(args).output().expect("run schedlab")
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("schedlab-calibrate-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn median(v: &serde_json::Value, key: &str) -> Option<f64> {
    v["figures"][key]["median_ns"].as_f64()
}

#[test]
fn calibrate_writes_a_machine_file_that_runs() {
    let dir = tmpdir("run");
    let file = dir.join("machine.toml");
    let f = file.display().to_string();
    let out = schedlab(&["calibrate", "--quick", "-o", &f, "--json", "-", "--quiet"]);
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        // A host that cannot pin threads or fork (a restricted sandbox) is
        // not a failure of calibrate; anything else is.
        if err.contains("Operation not permitted") || err.contains("Permission denied") {
            eprintln!("skipped: this host does not allow the probes: {err}");
            return;
        }
        panic!("schedlab calibrate failed: {err}");
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("bad JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    eprintln!("{}", serde_json::to_string_pretty(&v["figures"]).unwrap());

    // Every measured figure is a sane distribution.
    for (key, fig) in v["figures"].as_object().expect("figures") {
        if fig.get("unavailable").is_some() {
            continue;
        }
        let (m, p10, p90, n) = (fig["median_ns"].as_f64().unwrap(), fig["p10_ns"].as_f64().unwrap(), fig["p90_ns"].as_f64().unwrap(), fig["n"].as_u64().unwrap());
        assert!(n > 0 && p10 <= m && m <= p90, "{key}: {fig}");
    }
    // Costs of single events are positive and below a second.
    for key in ["context_switch", "context_switch_process", "hrtimer", "hrtimer_default_slack", "hrtimer_busy", "fork", "exit", "msg_write_pipe", "msg_read_pipe", "msg_write_socket", "msg_read_socket"] {
        let m = median(&v, key).unwrap_or_else(|| panic!("{key} not measured: {}", v["figures"][key]));
        assert!(m > 0.0 && m < 1e9, "{key}: {m} ns");
    }
    // A timer-wheel timeout is rounded to jiffies, so it may even end
    // early; it is only bounded.
    assert!(median(&v, "timer_wheel").unwrap().abs() < 1e9);
    // Physics: slack only delays a timer.
    let exact = median(&v, "hrtimer").unwrap();
    assert!(exact <= median(&v, "hrtimer_default_slack").unwrap(), "hrtimer with 1 ns slack later than with the default slack");
    assert!(median(&v, "timer_slack").unwrap() > 0.0, "timer slack not positive");
    if v["figures"]["wakeup_idle"].get("unavailable").is_none() {
        assert!(median(&v, "wakeup_busy").unwrap() > 0.0);
        assert!(median(&v, "wakeup_idle").unwrap() > 0.0);
    }
    // The written costs are those reported, and the file names its topology.
    let text = std::fs::read_to_string(&file).unwrap();
    let t: toml::Table = text.parse().unwrap();
    let costs = t["machine"]["costs"].as_table().expect("[machine.costs]");
    let cs = costs["context_switch"].as_str().expect("context_switch set");
    assert_eq!(cs, format!("{}ns", v["costs"]["context_switch"]));
    assert!(costs.contains_key("timer_slack"), "{text}");
    // The message costs go into the file as measured.
    for key in ["msg_write_pipe", "msg_read_pipe", "msg_write_socket", "msg_read_socket"] {
        let c = costs[key].as_str().unwrap_or_else(|| panic!("{key} not set: {text}"));
        assert_eq!(c, format!("{}ns", v["costs"][key]), "{text}");
    }
    let lscpu = dir.join(t["machine"]["lscpu"].as_str().unwrap());
    let cpus = std::fs::read_to_string(&lscpu).unwrap().lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()).count();

    // The file is a machine for `run --machine`, from another directory too.
    let scenario = format!("{}/../../scenarios/nice-hogs.toml", env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(env!("CARGO_BIN_EXE_schedlab")).args(["run", &scenario, "--machine", &f, "--set", "duration=\"1s\"", "--json", "-", "--quiet"]).current_dir(Path::new("/")).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["nr_cpus"].as_u64(), Some(cpus as u64), "{}", r["machine"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn calibrate_refuses_an_unwritable_output_in_one_line() {
    let dir = tmpdir("bad");
    for bad in [dir.join("missing/machine.toml"), dir.clone(), dir.join("m.lscpu")] {
        let out = schedlab(&["calibrate", "--quick", "-o", &bad.display().to_string()]);
        assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.starts_with("error: -o "), "{err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_machine_file_with_bad_keys_is_bad_input() {
    let dir = tmpdir("keys");
    let m = dir.join("m.toml");
    std::fs::write(&m, "[machine]\ncpus = 2\n[machine.costs]\ncontext_swich = \"2us\"\n").unwrap();
    let scenario = format!("{}/../../scenarios/nice-hogs.toml", env!("CARGO_MANIFEST_DIR"));
    let out = schedlab(&["run", &scenario, "--machine", &m.display().to_string(), "--quiet"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("context_swich"));
    // A value that is not a duration: the file and the field's path are named.
    std::fs::write(&m, "[machine]\ncpus = 2\n[machine.costs]\nmsg_write_socket = \"quick\"\n").unwrap();
    let out = schedlab(&["run", &scenario, "--machine", &m.display().to_string(), "--quiet"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&m.display().to_string()) && err.contains("machine.costs.msg_write_socket") && err.contains("quick"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
