//! BPF C schedulers compiled natively against the shim and run in the
//! simulator: the shipped ones, and test schedulers (tests/shim/) that
//! exercise maps, kptrs, timers, iterators, rodata, syscall programs,
//! UEI and division by zero.

use std::path::{Path, PathBuf};
use std::rc::Rc;

use schedlab::sched::ext::check::Checked;
use schedlab_host::{self as host, HostedScheduler, LoadConfig};
use schedlab::sched::ext::ops::ExtOps;
use schedlab::sched::ext::EnableState;
use schedlab::sched::sim::Sim;
use schedlab::sched::task::TaskState;

use crate::{cfg, load_with, manifest, shipped, sim};

fn test_sched(name: &str) -> PathBuf {
    manifest().join("tests/shim").join(format!("{name}.bpf.c"))
}

/// The shared hog mix for `ms` milliseconds (seed 11, 100 hackbench loops).
fn mixed(cpus: usize, ms: u32) -> String {
    crate::hog_mix(cpus, &format!("{ms}ms"), 11, 100)
}

fn run_checked(ops: HostedScheduler, toml: &str) -> (Sim, Rc<Checked<HostedScheduler>>) {
    let ops = Rc::new(Checked::new(ops));
    let mut s = sim(toml);
    s.scx_enable(ops.clone()).unwrap_or_else(|e| panic!("load refused: {e}"));
    s.run();
    (s, ops)
}

#[test]
fn shipped_schedulers_compile_load_and_run() {
    for name in ["simple", "qmap", "central", "cpu0"] {
        let ops = load_with(&shipped(name), &cfg());
        let (s, ops) = run_checked(ops, &mixed(4, 500));
        assert!(s.scx.exit.is_none(), "{name}: {:?}", s.scx.exit);
        assert_eq!(s.scx.state, EnableState::Enabled, "{name}");
        assert!(ops.violations().is_empty(), "{name}: {:#?}", ops.violations());
        for t in &s.tasks {
            assert!(t.stats.runtime_ns > 0 || t.state == TaskState::New, "{name}: task {} never ran", t.name);
        }
    }
}

/// `struct feat_report` of tests/shim/features.bpf.c.
#[repr(C)]
#[derive(Default, Debug)]
struct FeatReport {
    enqueued: u64,
    dispatched: u64,
    iterated: u64,
    timer_fires: u64,
    slices: u64,
    runs_cpu0: u64,
    runs_cpu1: u64,
    nr_pids: u64,
    even_weight: u32,
    even_first: u32,
    any_even: [u32; 3],
    bias: i32,
    weight_sum: u32,
    tag: [u8; 8],
    uei_kind: i32,
    uei_code: i64,
    uei_reason: [u8; 32],
    uei_msg: [[u8; 32]; 2],
}

/// Runs a syscall program with a `T` as its context.
fn syscall<T: Default>(ops: &HostedScheduler, sim: &mut Sim, name: &str) -> (i32, T) {
    let mut ctx = T::default();
    // SAFETY: T is a plain repr(C) struct of integers; the program writes
    // within its size.
    let bytes = unsafe { std::slice::from_raw_parts_mut((&mut ctx as *mut T).cast::<u8>(), std::mem::size_of::<T>()) };
    let r = ops.run_syscall(sim, name, bytes).unwrap_or_else(|e| panic!("{e}"));
    (r, ctx)
}

fn c_str(b: &[u8]) -> &str {
    std::str::from_utf8(&b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())]).unwrap()
}

fn features_cfg() -> LoadConfig {
    let mut c = cfg();
    c.rodata = vec![
        ("bias".into(), "-7".into()),
        ("weights".into(), "5,6".into()),
        ("weights[3]".into(), "9".into()),
        ("tag".into(), "hello".into()),
        ("slice_ns".into(), "3000000".into()),
    ];
    c
}

#[test]
fn features_scheduler_uses_every_part_of_the_shim() {
    let hosted = Rc::new(load_with(&test_sched("features"), &features_cfg()));
    assert_eq!(hosted.name(), "features");
    assert_eq!(hosted.timeout_ms(), 5000);
    let ops = Rc::new(Checked::new(hosted.clone()));
    let mut s = sim(&mixed(4, 600));
    s.scx_enable(ops.clone()).unwrap_or_else(|e| panic!("load refused: {e}"));
    s.run_until(300_000_000);
    assert!(s.scx.exit.is_none(), "{:?}", s.scx.exit);
    assert!(ops.violations().is_empty(), "{:#?}", ops.violations());

    let (r, rep) = syscall::<FeatReport>(&hosted, &mut s, "report");
    assert_eq!(r, 0);
    assert!(rep.enqueued > 50 && rep.dispatched > 50 && rep.iterated > 0, "{rep:?}");
    // A 5 ms timer over the first 300 ms.
    assert!((55..=61).contains(&rep.timer_fires), "{rep:?}");
    assert_eq!(rep.slices, 0, "x / 0 == 0");
    assert!(rep.runs_cpu0 > 0 && rep.runs_cpu1 > 0 && rep.runs_cpu1 != u64::MAX, "{rep:?}");
    assert!(rep.nr_pids >= 10, "{rep:?}");
    assert_eq!((rep.even_weight, rep.even_first), (2, 0), "CPUs 0 and 2 of 4");
    assert_eq!(rep.any_even, [2, 0, 2], "any_distribute rotates");
    assert_eq!((rep.bias, rep.weight_sum, c_str(&rep.tag)), (-7, 5 + 6 + 3 + 9, "hello"));
    assert_eq!(rep.uei_kind, 0, "no exit yet");

    s.scx_unregister();
    s.run();
    let (_, rep) = syscall::<FeatReport>(&hosted, &mut s, "report");
    assert_eq!(rep.uei_kind, 64, "UEI_RECORD saw SCX_EXIT_UNREG");
    assert_eq!(c_str(&rep.uei_reason), "unregistered from user space");
}

#[repr(C)]
#[derive(Default, Debug, PartialEq)]
struct DivReport {
    u64_div: u64,
    u64_mod: u64,
    u32_div: u32,
    u32_mod: u32,
    s64_div: i64,
    s64_mod: i64,
    s32_div: i32,
    s32_mod: i32,
    min_div: i64,
    min_mod: i64,
    min32_div: i32,
    min32_mod: i32,
    mem_div: u64,
}

#[test]
fn division_by_zero_follows_bpf() {
    let ops = load_with(&test_sched("features"), &cfg());
    let mut s = sim(&mixed(2, 10));
    let (_, d) = syscall::<DivReport>(&ops, &mut s, "divide");
    let want = DivReport {
        u64_div: 0,
        u64_mod: 1234567,
        u32_div: 0,
        u32_mod: 77,
        s64_div: 0,
        s64_mod: -99,
        s32_div: 0,
        s32_mod: -99,
        min_div: i64::MIN,
        min_mod: 0,
        min32_div: i32::MIN,
        min32_mod: 0,
        mem_div: 0,
    };
    assert_eq!(d, want);
}

#[repr(C)]
#[derive(Default, Debug)]
struct MapReport {
    fifo: [u32; 3],
    lifo: [u32; 3],
    push_full: i64,
    pop_empty: i64,
    exist_push: i64,
    lru_has: [u32; 4],
    noexist_again: i64,
}

#[test]
fn queue_stack_and_lru_maps_behave_as_in_bpf() {
    let ops = load_with(&test_sched("features"), &cfg());
    let mut s = sim(&mixed(2, 10));
    let (_, m) = syscall::<MapReport>(&ops, &mut s, "map_semantics");
    assert_eq!(m.fifo, [1, 2, 3]);
    assert_eq!(m.lifo, [3, 2, 1]);
    assert_eq!(m.pop_empty, -2, "-ENOENT");
    assert_eq!(m.push_full, -7, "-E2BIG");
    assert_eq!(m.exist_push, 0, "BPF_EXIST makes room");
    assert_eq!(m.lru_has, [1, 0, 1, 1], "1 was least recently used");
    assert_eq!(m.noexist_again, -17, "-EEXIST");
    assert_eq!(ops.map_len("stk"), Some(8));
    assert_eq!(ops.map_lookup("recent", &3u32.to_ne_bytes(), 0, 1), Some(1u64.to_ne_bytes().to_vec()));
}

#[test]
fn each_load_has_its_own_globals() {
    let a = load_with(&test_sched("features"), &cfg());
    let b = load_with(&test_sched("features"), &cfg());
    assert!(b.cache_hit(), "the second load reuses the compiled object");
    let mut s = sim(&mixed(2, 10));
    for want in 1..=3 {
        assert_eq!(a.run_syscall(&mut s, "bump", &mut []).unwrap(), want);
    }
    assert_eq!(b.run_syscall(&mut s, "bump", &mut []).unwrap(), 1);
    assert_eq!(b.rodata_bytes("bias").unwrap(), (-3i32).to_ne_bytes());
    b.set_rodata("bias", "12").unwrap();
    assert_eq!(b.rodata_bytes("bias").unwrap(), 12i32.to_ne_bytes());
    assert_eq!(a.rodata_bytes("bias").unwrap(), (-3i32).to_ne_bytes());
}

#[test]
fn a_load_after_unloading_starts_fresh() {
    // The first load opens the cached object in place; once it is gone,
    // the next load must not find its globals (whether the dynamic loader
    // unmapped the object or kept it resident).
    let mut s = sim(&mixed(2, 10));
    let a = load_with(&test_sched("features"), &cfg());
    for want in 1..=2 {
        assert_eq!(a.run_syscall(&mut s, "bump", &mut []).unwrap(), want);
    }
    a.set_rodata("bias", "7").unwrap();
    drop(a);
    let b = load_with(&test_sched("features"), &cfg());
    assert_eq!(b.run_syscall(&mut s, "bump", &mut []).unwrap(), 1);
    assert_eq!(b.rodata_bytes("bias").unwrap(), (-3i32).to_ne_bytes());
}

#[test]
fn rodata_and_flags_are_checked_by_name() {
    let mut c = cfg();
    c.rodata = vec![("nope".into(), "1".into())];
    let e = host::load_owned(&test_sched("features"), &c).err().expect("unknown rodata refused").to_string();
    assert!(e.contains("unknown rodata `nope`") && e.contains("slice_ns") && e.contains("weights"), "{e}");
    c.rodata = vec![("use_timer".into(), "maybe".into())];
    let e = host::load_owned(&test_sched("features"), &c).err().expect("bad bool").to_string();
    assert!(e.contains("expected true or false"), "{e}");
    c.rodata = vec![("bias".into(), "3000000000".into())];
    assert!(host::load_owned(&test_sched("features"), &c).is_err());
    c.rodata = vec![];
    c.ops_flags = vec!["FROBNICATE".into()];
    let e = host::load_owned(&test_sched("features"), &c).err().expect("bad flag").to_string();
    assert!(e.contains("ENQ_LAST"), "{e}");
    c.ops_flags = vec!["SCX_OPS_ENQ_LAST".into(), "switch_partial".into()];
    let ops = load_with(&test_sched("features"), &c);
    assert_eq!(ops.flags(), (1 << 1) | (1 << 3));
    assert!(ops.programs().contains(&"report".to_string()));
    assert!(ops.run_syscall(&mut sim(&mixed(2, 10)), "nope", &mut []).is_err());
}

#[test]
fn bad_arguments_eject_instead_of_crashing() {
    let cases = [
        (0, "pointer is not a task"),
        (1, "NULL task"),
        (2, "invalid cpumask pointer"),
        (3, "is not a map of this scheduler"),
        (4, "bpf_spin_lock held"),
        (5, "invalid bpf_cpumask pointer"),
        (6, "invalid cpumask pointer"),
    ];
    for (mode, msg) in cases {
        let mut c = cfg();
        c.rodata = vec![("mode".into(), mode.to_string())];
        let ops = Rc::new(load_with(&test_sched("badarg"), &c));
        let mut s = sim(&mixed(4, 300));
        s.scx_enable(ops).unwrap_or_else(|e| panic!("{e}"));
        s.run();
        let exit = s.scx.exit.clone().unwrap_or_else(|| panic!("mode {mode}: no exit"));
        assert_eq!(exit.kind, schedlab::sched::ext::ops::ExitKind::Error, "mode {mode}: {exit:?}");
        assert!(exit.msg.contains(msg), "mode {mode}: {}", exit.msg);
        assert_eq!(s.scx.state, EnableState::Disabled);
        let m = s.metrics.iter().find(|m| m.name == "hb").expect("hackbench");
        assert_eq!(m.exited, m.nr_tasks, "mode {mode}: hackbench finished under fair");
    }
}

/// Real-world check without vendoring: compile, load and run the schedulers
/// listed in `$SCHEDLAB_EXTRA_SCHEDS` (colon-separated .bpf.c paths, e.g.
/// from a sched-ext/scx checkout). Run with `--ignored`.
#[test]
#[ignore]
fn external_schedulers_from_env() {
    let list = std::env::var("SCHEDLAB_EXTRA_SCHEDS").unwrap_or_default();
    let mut failed = Vec::new();
    for path in list.split(':').filter(|p| !p.is_empty()) {
        let ops = match host::load_owned(Path::new(path), &cfg()) {
            Ok(o) => o,
            Err(e) => {
                failed.push(format!("{path}: {e}"));
                continue;
            }
        };
        let (s, ops) = run_checked(ops, &mixed(4, 500));
        let ran = s.tasks.iter().filter(|t| t.stats.runtime_ns > 0).count();
        eprintln!("{path}: exit {:?}, {} violations, {ran} tasks ran", s.scx.exit, ops.violations().len());
        if s.scx.exit.is_some() || !ops.violations().is_empty() {
            failed.push(format!("{path}: {:?} {:?}", s.scx.exit, ops.violations().first()));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
