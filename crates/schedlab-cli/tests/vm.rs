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

mod common;

use common::repo;

/// None when the tools are there; else the reason, which fails the test in CI.
fn skip_reason() -> Option<String> {
    common::vm_skip_reason()
}

/// One guest at a time: two emulated 2-CPU guests at once on a small
/// machine starve each other's vCPUs for long stretches, which the workload
/// in them sees as scheduling delays of seconds.
static ONE_GUEST: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_guest() -> std::sync::MutexGuard<'static, ()> {
    ONE_GUEST.lock().unwrap_or_else(|e| e.into_inner())
}

fn shipped() -> Vec<&'static str> {
    schedlab_host::shipped::SHIPPED.iter().map(|s| s.0).collect()
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
        let src = schedlab_host::shipped::materialize(name, &dir).unwrap().expect("shipped source");
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

#[path = "../../schedlab/tests/common/perfetto.rs"]
mod perfetto;

/// `run --real --vm --trace`: one scheduler, the guest's own report, and
/// the guest kernel's trace of the run (a window of it) in Perfetto format.
#[test]
fn run_real_vm_loads_runs_and_unregisters() {
    if let Some(why) = skip_reason() {
        eprintln!("skipped: {why}");
        return;
    }
    let _one = one_guest();
    let scenario = format!("{}/tests/data/vm-mixed.toml", env!("CARGO_MANIFEST_DIR"));
    let dir = std::env::temp_dir().join(format!("schedlab-vmtrace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("simple.pftrace");
    let run = || {
        let out = Command::new(env!("CARGO_BIN_EXE_schedlab"))
            .args(["run", "--real", "--vm", &scenario, "--sched", "simple", "--json", "-", "--quiet", "--trace", trace.to_str().unwrap(), "--trace-window", "500ms..1500ms"])
            .output()
            .expect("run schedlab");
        eprintln!("{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("no JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
        (out, v)
    };
    let (mut out, mut v) = run();
    // The guest is emulated (TCG, both vCPUs on one host thread): in about
    // one CI run in four a hackbench sender of this 2 s run never gets to
    // run in the guest (sessions 13 and 14; under investigation). Only that
    // kind of problem earns one more run; the second must be clean.
    let starved = |v: &serde_json::Value| {
        let p = v[0]["problems"].as_array().cloned().unwrap_or_default();
        !p.is_empty() && p.iter().filter_map(|x| x.as_str()).all(|x| x.contains("never ran") || x.contains("did not finish") || x.contains("did not reach the end"))
    };
    if starved(&v) {
        eprintln!("the guest starved a task ({}); running it once more", v[0]["problems"]);
        (out, v) = run();
    }
    let g = &v.as_array().expect("one entry per scheduler")[0];
    assert_eq!(g["state"], "enabled", "{g:#}");
    assert_eq!(g["ops"], "simple");
    assert_eq!(g["exit_kind"], "UNREG", "{g:#}");
    assert_eq!(g["state_after_detach"], "disabled");
    let output = || format!("{:#}\nthe guest's output:\n{}\nloader: {:#}\nconsole: {}", g["problems"], g["output"].as_array().into_iter().flatten().filter_map(|l| l.as_str()).collect::<Vec<_>>().join("\n"), g["loader"], g["console"]);
    assert_eq!(g["problems"].as_array().map(Vec::len), Some(0), "{}", output());
    // The scheduler's own counters, read from its .bss after the detach.
    assert!(g["counters"]["nr_dispatched"].as_u64().unwrap() > 0, "{:#}", g["counters"]);
    for t in g["results"]["tasks"].as_array().expect("tasks") {
        assert!(t["runtime_ns"].as_u64().unwrap() > 0, "{} never ran", t["name"]);
        // The hogs are pinned to CPU 0, and only ever ran there.
        if t["workload"] == "hogs" {
            assert_eq!(t["ran_on"], "0", "{} left its CPU", t["name"]);
        }
    }
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    // The guest kernel's own switches under the BPF scheduler: the pinned
    // hogs (pids 1 and 2, named as in a simulated trace) take turns on CPU
    // 0 and never appear on CPU 1, within the window only.
    let t = perfetto::decode(&std::fs::read(&trace).unwrap_or_else(|e| panic!("{}: {e}", trace.display())));
    let cpus = perfetto::per_cpu(&t, 2);
    let switches_in = |c: usize, pid: i32| cpus[c].iter().filter(|e| e.sched_switch.as_ref().is_some_and(|s| s.next_pid == Some(pid))).count();
    for pid in [1, 2] {
        assert!(switches_in(0, pid) >= 1, "hog pid {pid} is switched in on CPU 0 in the guest's trace");
        assert_eq!(switches_in(1, pid), 0, "hog pid {pid} is pinned to CPU 0");
    }
    assert_eq!(perfetto::threads(&t)[&1].0, "hogs-0");
    let ts: Vec<u64> = cpus.iter().flatten().filter_map(|e| e.timestamp).collect();
    assert!(!ts.is_empty() && ts.iter().all(|t| (500_000_000..1_500_000_000).contains(t)), "events outside the window: {:?}..{:?}", ts.iter().min(), ts.iter().max());
    let _ = std::fs::remove_dir_all(&dir);
}

/// cgroup v2 in the guest with tasks left in the scenario's root cgroup
/// beside a child cgroup (threaded mode, real/cgroups.rs): under the guest's
/// fair class the root's hog competes with /web's group entity as a peer,
/// 1024 against 3072, as simulated; scx_simple ignores cgroups and splits
/// CPU 0 evenly.
#[test]
fn root_cgroup_tasks_compete_with_child_cgroups_in_the_vm() {
    if let Some(why) = skip_reason() {
        eprintln!("skipped: {why}");
        return;
    }
    let _one = one_guest();
    let scenario = format!("{}/tests/data/cgroup-root-tasks.toml", env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(env!("CARGO_BIN_EXE_schedlab"))
        .args(["run", "--real", "--vm", &scenario, "--sched", "simple,eevdf", "--json", "-", "--quiet"])
        .output()
        .expect("run schedlab");
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("no JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    for (g, want) in v.as_array().expect("one entry per scheduler").iter().zip([("simple", 0.5), ("eevdf", 0.75)]) {
        assert_eq!(g["scheduler"], want.0, "{g:#}");
        assert_eq!(g["problems"].as_array().map(Vec::len), Some(0), "{:#}", g["problems"]);
        let rt = |name: &str| g["results"]["tasks"].as_array().unwrap().iter().find(|t| t["name"] == name).and_then(|t| t["runtime_ns"].as_u64()).unwrap_or_else(|| panic!("{name}: {g:#}")) as f64;
        let web = rt("web-0") / (rt("web-0") + rt("loose-0"));
        assert!((web - want.1).abs() < 0.05 * want.1, "{}: /web's share of CPU 0 is {web:.3}, want {} +- 5%", want.0, want.1);
        let cg = &g["results"]["cgroups"][0];
        assert_eq!((cg["path"].as_str(), cg["cpus"].as_str()), (Some("/web"), Some("0")), "{cg}");
    }
}

/// The published crates the VM compare runs beside the shipped schedulers.
const P2DQ: &str = "crate:scx_p2dq@1.1.4";
const LAYERED: &str = "crate:scx_layered@1.1.4";

/// `compare --real --vm`: the guest kernel's fair class, every shipped
/// scheduler, scx_p2dq and scx_layered from their crates and one that fails on purpose, in one boot, each beside its
/// simulation. Loading, every task running, affinity and the exit kind must
/// agree for all; CPU shares for the fair class and the schedulers that
/// share the pinned hogs' CPU plainly.
#[test]
fn compare_real_vm_agrees_with_the_simulation() {
    if let Some(why) = skip_reason() {
        eprintln!("skipped: {why}");
        return;
    }
    let _one = one_guest();
    let scenario = format!("{}/tests/data/vm-mixed.toml", env!("CARGO_MANIFEST_DIR"));
    let error = format!("{}/../schedlab-host/tests/schedulers/error.bpf.c", env!("CARGO_MANIFEST_DIR"));
    // Published multi-object crates too: linked with libbpf's static
    // linker; p2dq set up by its profile's [arena_lib] step in the guest,
    // layered by its [layer_specs] step (writes into members of map
    // elements: scx-load's `member` lines).
    let names = format!("eevdf,{},{P2DQ},{LAYERED},{error}", shipped().join(","));
    let out_dir = std::env::temp_dir().join(format!("schedlab-vm-compare-{}", std::process::id()));
    let t0 = std::time::Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_schedlab"))
        .args(["compare", &scenario, "--real", "--vm", "--sched", &names, "--out", out_dir.to_str().unwrap(), "--json", "-", "--quiet"])
        .output()
        .expect("run schedlab");
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    eprintln!("qemu compare of {names}: {:.1}s", t0.elapsed().as_secs_f64());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("no JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    let all = v["real_vs_sim"].as_array().expect("checks per variant");
    assert_eq!(all.len(), shipped().len() + 4, "{v:#}");
    let check = |a: &serde_json::Value, what: &str| a["checks"].as_array().unwrap().iter().find(|c| c["what"] == what).cloned();
    for a in all {
        let variant = a["variant"].as_str().unwrap();
        let plain = variant == "eevdf" || ["simple", "qmap", "central", "cpu0"].contains(&variant);
        for what in ["tasks that ran", "affinity"] {
            let c = check(a, what).unwrap_or_else(|| panic!("{variant}: no {what} check"));
            assert_eq!(c["agree"], true, "{variant}: {c}");
        }
        if variant != "eevdf" {
            let loaded = check(a, "loaded").expect("loaded");
            assert_eq!(loaded["agree"], true, "{variant}: {loaded}");
            let exit = check(a, "exit kind").expect("exit kind");
            assert_eq!(exit["agree"], true, "{variant}: {exit}");
            let want = if variant.ends_with("error.bpf.c") { "ERROR_BPF" } else { "UNREG" };
            assert_eq!(exit["real"], want, "{variant}: {exit}");
        }
        if plain {
            let c = check(a, "CPU shares").expect("shares");
            assert_eq!(c["agree"], true, "{variant}: {c}");
        }
    }
    let _ = std::fs::remove_dir_all(&out_dir);
}

/// The processes of session `sid`, as (pid, comm).
fn session_members(sid: i32) -> Vec<(i32, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else { continue };
        // pid (comm) state ppid pgrp session ...: comm may hold spaces.
        let Some((head, rest)) = stat.rsplit_once(')') else { continue };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.get(3).and_then(|s| s.parse::<i32>().ok()) == Some(sid) {
            out.push((pid, head.split_once('(').map_or("", |x| x.1).to_string()));
        }
    }
    out
}

/// `run --real --vm` killed at different points (SIGINT while it prepares
/// and builds, SIGTERM at a varying moment while qemu runs) leaves nothing
/// behind: no process of its session (the scx-vm script, cargo, qemu),
/// no staged guest directory; and it exits 130.
#[test]
fn killed_vm_runs_leave_nothing_behind() {
    if let Some(why) = skip_reason() {
        eprintln!("skipped: {why}");
        return;
    }
    let _one = one_guest();
    let scenario = format!("{}/tests/data/vm-mixed.toml", env!("CARGO_MANIFEST_DIR"));
    let cache = std::env::var_os("SCHEDLAB_CACHE_DIR").map(std::path::PathBuf::from).unwrap_or_else(|| std::path::PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/schedlab"));
    // The second kill lands 0-7 s into the guest's life, varying by run.
    let extra_ms = (std::process::id() as u64 * 2_654_435_761) % 7_000;
    for (signal, in_qemu) in [("INT", false), ("TERM", true)] {
        // Its own session, so everything it starts can be found afterwards.
        let mut child = Command::new("setsid").arg(env!("CARGO_BIN_EXE_schedlab")).args(["run", &scenario, "--real", "--vm", "--sched", "simple", "--quiet"]).spawn().expect("setsid schedlab");
        let sid = child.id() as i32;
        let t0 = std::time::Instant::now();
        if in_qemu {
            while !session_members(sid).iter().any(|(_, c)| c.starts_with("qemu-system")) {
                assert!(t0.elapsed().as_secs() < 600, "qemu never started");
                assert!(child.try_wait().unwrap().is_none(), "schedlab ended before qemu started");
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            std::thread::sleep(std::time::Duration::from_millis(extra_ms));
        } else {
            std::thread::sleep(std::time::Duration::from_millis(1000));
        }
        let during = session_members(sid);
        eprintln!("SIG{signal} after {:.1}s; the session then: {during:?}", t0.elapsed().as_secs_f64());
        Command::new("kill").args([&format!("-{signal}"), &sid.to_string()]).status().expect("kill");
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            assert!(t0.elapsed().as_secs() < 900, "schedlab did not exit after SIG{signal}");
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        assert_eq!(status.code(), Some(130), "SIG{signal}");
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert_eq!(session_members(sid), vec![], "SIG{signal}: nothing of the run survives");
        assert!(!cache.join(format!("guest-{sid}")).exists(), "SIG{signal}: the staged guest is removed");
    }
}

/// `calibrate --vm` under a shipped sched_ext scheduler: the guest loads
/// it, calibrates, unregisters it, and the machine file it sends back (with
/// the guest's topology beside it) runs with `--machine`.
#[test]
fn calibrate_vm_writes_the_guests_machine_file() {
    if let Some(why) = skip_reason() {
        eprintln!("skipped: {why}");
        return;
    }
    let _one = one_guest();
    let dir = std::env::temp_dir().join(format!("schedlab-calibrate-vm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("guest.toml");
    let f = file.display().to_string();
    let bin = env!("CARGO_BIN_EXE_schedlab");
    let out = Command::new(bin).args(["calibrate", "--vm", "--quick", "--sched", "simple", "-o", &f, "--json", "-", "--quiet"]).output().expect("run schedlab");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["guest"]["scheduler"], "simple", "{}", v["guest"]);
    assert_eq!(v["guest"]["exit_kind"], "UNREG", "{}", v["guest"]);
    assert_eq!(v["guest"]["cpus"], 2);
    assert!(v["figures"]["context_switch"]["median_ns"].as_f64().unwrap() > 0.0);
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("lscpu = \"guest.lscpu\"") && text.contains("context_switch = "), "{text}");
    let scenario = repo().join("scenarios/nice-hogs.toml");
    let out = Command::new(bin).args(["run", &scenario.display().to_string(), "--machine", &f, "--set", "duration=\"1s\"", "--json", "-", "--quiet"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["nr_cpus"], 2);
    let _ = std::fs::remove_dir_all(&dir);
}
