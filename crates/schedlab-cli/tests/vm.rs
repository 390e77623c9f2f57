//! Real mode under a sched_ext kernel: every shipped scheduler compiles with
//! clang -target bpf against our headers, loads through libbpf (the real
//! verifier) in Debian's sched_ext kernel under qemu, runs a short mixed
//! workload with every task finishing, and unregisters cleanly.
//!
//! Needs qemu, clang, bpftool, busybox-static, libelf/zlib/zstd static
//! libraries and network access to Debian's archive (scripts/ensure-real-tools
//! installs the tools; .ci/run calls it). Without them the tests are skipped
//! with the reason, except under CI=true, where they fail.

use std::process::Command;

fn repo() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// None when the tools are there; else the reason, which fails the test in CI.
fn skip_reason() -> Option<String> {
    let out = Command::new("bash").arg(repo().join("scripts/scx-vm")).arg("check").output().expect("run bash");
    if out.status.success() {
        return None;
    }
    let why = String::from_utf8_lossy(&out.stderr).trim().replace('\n', "; ");
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("CI=true but the sched_ext VM test cannot run: {why} (scripts/ensure-real-tools installs these)");
    }
    Some(why)
}

fn shipped() -> Vec<&'static str> {
    schedlab::sched::ext::shipped::SHIPPED.iter().map(|s| s.0).collect()
}

#[test]
fn every_shipped_scheduler_compiles_for_bpf() {
    if let Some(why) = skip_reason() {
        eprintln!("skipped: {why}");
        return;
    }
    let dir = std::env::temp_dir().join(format!("schedlab-bpf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for name in shipped() {
        let src = schedlab::sched::ext::shipped::materialize(name, &dir).unwrap().expect("shipped source");
        let out = Command::new("bash").arg(repo().join("scripts/scx-vm")).arg("bpf").arg(&src).output().expect("run scx-vm");
        assert!(out.status.success(), "{name} does not compile for BPF:\n{}", String::from_utf8_lossy(&out.stderr));
        let obj = String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or("").trim().to_string();
        let bytes = std::fs::read(&obj).unwrap_or_else(|e| panic!("{obj}: {e}"));
        // ELF, machine EM_BPF (247).
        assert_eq!(&bytes[..4], b"\x7fELF");
        assert_eq!(u16::from_le_bytes([bytes[18], bytes[19]]), 247, "{obj} is not a BPF object");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_shipped_scheduler_loads_runs_and_unregisters_in_the_vm() {
    if let Some(why) = skip_reason() {
        eprintln!("skipped: {why}");
        return;
    }
    let scenario = format!("{}/tests/data/vm-mixed.toml", env!("CARGO_MANIFEST_DIR"));
    let names = shipped().join(",");
    let t0 = std::time::Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_schedlab")).args(["run", "--real", "--vm", &scenario, "--sched", &names, "--json", "-", "--quiet"]).output().expect("run schedlab");
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    eprintln!("qemu run of {names}: {:.1}s", t0.elapsed().as_secs_f64());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("no JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    let all = v.as_array().expect("one entry per scheduler");
    assert_eq!(all.len(), shipped().len(), "{v:#}");
    for g in all {
        let name = &g["scheduler"];
        assert_eq!(g["state"], "enabled", "{name}: {g:#}");
        assert_eq!(g["ops"], *name, "{name}: ops name");
        assert_eq!(g["exit_kind"], "UNREG", "{name}: {g:#}");
        assert_eq!(g["state_after_detach"], "disabled", "{name}");
        assert_eq!(g["problems"].as_array().map(Vec::len), Some(0), "{name}: {:#}", g["problems"]);
        let tasks = g["results"]["tasks"].as_array().expect("tasks");
        for t in tasks {
            assert!(t["runtime_ns"].as_u64().unwrap() > 0, "{name}: {} never ran", t["name"]);
            // The hogs are pinned to CPU 0.
            if t["workload"] == "hogs" {
                assert_eq!(t["cpu"], 0, "{name}: {} left its CPU", t["name"]);
            }
        }
        let hb = g["results"]["workloads"].as_array().unwrap().iter().find(|w| w["kind"] == "hackbench").unwrap();
        assert_eq!(hb["finished"], true, "{name}: hackbench did not finish");
    }
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}
