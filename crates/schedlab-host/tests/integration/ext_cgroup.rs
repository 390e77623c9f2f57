//! sched_ext and cgroups (issue 12 §3): the cgroup ops in ext.c's order
//! (checked by `Checked` on a Rust scheduler), and the kernel's scx_flatcg,
//! unmodified, giving cgroups their weighted shares.

use std::cell::RefCell;
use std::rc::Rc;

use schedlab::engine::TaskId;
use schedlab::results::report::Results;
use schedlab::sched::ext::check::Checked;
use schedlab_host::compile::cache_dir;
use schedlab::sched::ext::ops::{CgroupInitArgs, ExtOps, Op};
use schedlab::sched::ext::EnableState;
use schedlab::sched::sim::Sim;

use crate::{manifest, sim};

/// The kernel's scx_flatcg from schedlab's cache (`scripts/kernel-src`).
fn flatcg() -> String {
    let p = cache_dir().join("kernel-src/7.3.4/tools/sched_ext/scx_flatcg.bpf.c");
    assert!(p.is_file(), "{} is missing: run `scripts/kernel-src 7.3` once (it needs the Debian archive)", p.display());
    p.display().to_string()
}

/// Scenario text under scx_flatcg.
fn under_flatcg(toml: &str) -> String {
    format!("{toml}\n[scheduler]\nkind = \"ext\"\nsched = {:?}\n", flatcg())
}

fn cgroup_share(s: &Sim, path: &str) -> f64 {
    let g = s.cg.find(path).unwrap_or_else(|| panic!("no cgroup {path}"));
    let total: u64 = s.cg.groups.iter().filter(|t| t.parent == Some(0)).map(|t| t.stats.runtime_ns).sum();
    s.cg.groups[g as usize].stats.runtime_ns as f64 / total as f64
}

fn still_enabled(s: &Sim) {
    assert_eq!(s.scx.state, EnableState::Enabled, "scx_flatcg was ejected: {:?}", s.scx.exit);
}

#[test]
fn flatcg_gives_cgroups_their_weights() {
    let text = std::fs::read_to_string(manifest().join("../../scenarios/flatcg-weights.toml")).expect("shipped scenario");
    let mut s = sim(&under_flatcg(&text));
    s.run();
    still_enabled(&s);
    let (batch, web) = (cgroup_share(&s, "/batch"), cgroup_share(&s, "/web"));
    // Within 5% of the weights 100 : 300 (measured: 25.0% / 75.0%).
    assert!((batch / 0.25 - 1.0).abs() < 0.05 && (web / 0.75 - 1.0).abs() < 0.05, "/batch {batch:.4}, /web {web:.4}");
    let r = Results::collect(&s, "flatcg-weights", "ext");
    let x = r.sched_ext.as_ref().expect("a sched_ext section");
    assert!(x.exit.is_none());
    // ops.cgroup_init for the root, /batch and /web, before any task.
    assert_eq!(s.scx.stats.op_calls[Op::CgroupInit.index()], 3);
}

#[test]
fn flatcg_compounds_weights_down_a_nested_tree() {
    // /a (100) holds /a/x (100) and /a/y (300); /b (300): x 1/16, y 3/16, b 3/4.
    let mut s = sim(&under_flatcg(
        "seed = 1\nduration = \"4s\"\n[machine]\ncpus = 2\n\
         [[cgroup]]\npath = \"/a\"\nweight = 100\n[[cgroup]]\npath = \"/a/x\"\nweight = 100\n\
         [[cgroup]]\npath = \"/a/y\"\nweight = 300\n[[cgroup]]\npath = \"/b\"\nweight = 300\n\
         [[workload]]\nkind = \"hog\"\nname = \"x\"\ncount = 3\ncgroup = \"/a/x\"\n\
         [[workload]]\nkind = \"hog\"\nname = \"y\"\ncount = 3\ncgroup = \"/a/y\"\n\
         [[workload]]\nkind = \"hog\"\nname = \"b\"\ncount = 3\ncgroup = \"/b\"\n",
    ));
    s.run();
    still_enabled(&s);
    let total = (2 * 4_000_000_000u64) as f64;
    let rt = |p: &str| s.cg.groups[s.cg.find(p).unwrap() as usize].stats.runtime_ns as f64 / total;
    for (p, want) in [("/a/x", 1.0 / 16.0), ("/a/y", 3.0 / 16.0), ("/b", 0.75)] {
        assert!((rt(p) / want - 1.0).abs() < 0.05, "{p}: {:.4} against {want:.4}", rt(p));
    }
}

#[test]
fn flatcg_follows_weight_writes_and_task_moves() {
    let mut s = sim(&under_flatcg(
        "seed = 1\nduration = \"3s\"\n[machine]\ncpus = 2\n\
         [[cgroup]]\npath = \"/a\"\nweight = 100\n[[cgroup]]\npath = \"/b\"\nweight = 300\n\
         [[workload]]\nkind = \"hog\"\nname = \"a\"\ncount = 4\ncgroup = \"/a\"\n\
         [[workload]]\nkind = \"hog\"\nname = \"b\"\ncount = 4\ncgroup = \"/b\"\n",
    ));
    s.run_until(1_000_000_000);
    let (a, b) = (s.cg.find("/a").unwrap(), s.cg.find("/b").unwrap());
    let before = |s: &Sim| (s.cg.groups[a as usize].stats.runtime_ns, s.cg.groups[b as usize].stats.runtime_ns);
    let (ra, rb) = before(&s);
    // cpu.weight of /a to 300: ops.cgroup_set_weight, then 1 : 1.
    s.cgroup_set_weight(a, 300);
    assert_eq!(s.scx.stats.op_calls[Op::CgroupSetWeight.index()], 1);
    s.run_until(2_000_000_000);
    let (ra2, rb2) = before(&s);
    let share = (ra2 - ra) as f64 / ((ra2 - ra) + (rb2 - rb)) as f64;
    assert!((share - 0.5).abs() < 0.025, "/a's share after the weight write {share:.4}");
    // Move one of /b's hogs into /a: ops.cgroup_move, and flatcg keeps going.
    let p = s.tasks.iter().find(|t| t.name == "b-0").unwrap().id;
    assert!(s.cgroup_attach_task(p, a));
    assert_eq!(s.scx.stats.op_calls[Op::CgroupMove.index()], 1);
    s.run();
    still_enabled(&s);
    assert!(s.task(p).stats.runtime_ns > 0);
}

/// A scheduler with no callbacks but the cgroup ones, which it records,
/// and a prep_move that refuses to move task `refuse`.
#[derive(Default)]
struct CgLog {
    seen: RefCell<Vec<String>>,
    refuse: std::cell::Cell<TaskId>,
}

impl ExtOps for CgLog {
    fn name(&self) -> &str {
        "cglog"
    }
    fn has(&self, op: Op) -> bool {
        matches!(op, Op::CgroupInit | Op::CgroupExit | Op::CgroupPrepMove | Op::CgroupSetBandwidth | Op::CgroupSetWeight | Op::CgroupSetIdle)
    }
    fn cgroup_init(&self, _sim: &mut Sim, cgrp: u32, args: &CgroupInitArgs) -> i32 {
        self.seen.borrow_mut().push(format!("init {cgrp} w{} q{}", args.weight, args.bw_quota_us));
        0
    }
    fn cgroup_prep_move(&self, _sim: &mut Sim, p: TaskId, _from: u32, to: u32) -> i32 {
        if p == self.refuse.get() {
            return -16;
        }
        self.seen.borrow_mut().push(format!("prep {p} {to}"));
        0
    }
}

#[test]
fn cgroup_ops_follow_the_kernels_order() {
    let ops = Rc::new(Checked::new(CgLog { refuse: TaskId::MAX.into(), ..Default::default() }));
    let mut s = sim(
        "seed = 1\nduration = \"1s\"\n[machine]\ncpus = 2\n\
         [[cgroup]]\npath = \"/a/b\"\nweight = 200\n[[cgroup]]\npath = \"/c\"\nmax = \"50ms 100ms\"\n\
         [[workload]]\nkind = \"hog\"\nname = \"h\"\ncount = 3\ncgroup = \"/a/b\"\n",
    );
    s.scx_enable(ops.clone()).unwrap_or_else(|e| panic!("{e}"));
    let (a, ab, c) = (s.cg.find("/a").unwrap(), s.cg.find("/a/b").unwrap(), s.cg.find("/c").unwrap());
    // Pre-order from the root, with each cgroup's knobs, before any init_task.
    assert_eq!(
        ops.inner().seen.borrow().clone(),
        vec!["init 0 w100 q18446744073709551615".to_string(), format!("init {a} w100 q18446744073709551615"), format!("init {ab} w200 q18446744073709551615"), format!("init {c} w100 q50000")]
    );
    s.run_until(100_000_000);
    // A move: prep_move, then move (after the task changed group).
    let h: Vec<TaskId> = s.tasks.iter().filter(|t| t.name.starts_with("h-")).map(|t| t.id).collect();
    assert!(s.cgroup_attach_task(h[0], c));
    // Knob writes reach the ops only when the value changes.
    s.cgroup_set_weight(c, 100);
    s.cgroup_set_weight(c, 500);
    s.cgroup_set_max(c, schedlab::sched::cgroup::parse_max("20ms 100ms").unwrap());
    s.cgroup_set_idle(c, true);
    // A refused move of two tasks: the one prepared is cancelled, nothing moves.
    ops.inner().refuse.set(h[2]);
    assert!(!s.cgroup_attach_tasks(&[h[1], h[2]], a));
    assert_eq!(s.task(h[1]).cgrp, ab);
    ops.inner().refuse.set(TaskId::MAX);
    // Both of a process's tasks: prep, prep, move, move.
    assert!(s.cgroup_attach_tasks(&[h[1], h[2]], a));
    s.run_until(200_000_000);
    s.scx_unregister();
    s.run();
    let (p0, p1, p2) = (h[0], h[1], h[2]);
    let want = vec![
        "cgroup_init(0)".to_string(),
        format!("cgroup_init({a})"),
        format!("cgroup_init({ab})"),
        format!("cgroup_init({c})"),
        format!("cgroup_prep_move({p0}, {ab}, {c})"),
        format!("cgroup_move({p0}, {ab}, {c})"),
        format!("cgroup_set_weight({c}, 500)"),
        format!("cgroup_set_bandwidth({c}, 100000, 20000, 0)"),
        format!("cgroup_set_idle({c}, true)"),
        format!("cgroup_prep_move({p1}, {ab}, {a})"),
        format!("cgroup_prep_move({p2}, {ab}, {a})"),
        format!("cgroup_cancel_move({p1}, {ab}, {a})"),
        format!("cgroup_prep_move({p1}, {ab}, {a})"),
        format!("cgroup_prep_move({p2}, {ab}, {a})"),
        format!("cgroup_move({p1}, {ab}, {a})"),
        format!("cgroup_move({p2}, {ab}, {a})"),
        // Post-order at disable.
        format!("cgroup_exit({ab})"),
        format!("cgroup_exit({a})"),
        format!("cgroup_exit({c})"),
        "cgroup_exit(0)".to_string(),
    ];
    assert_eq!(ops.cgroup_ops(), want);
    assert!(ops.violations().is_empty(), "{:#?}", ops.violations());
    assert_eq!(s.task(p1).cgroup, "/a");
}

fn u64s(h: &schedlab_host::HostedScheduler, name: &str) -> Vec<u64> {
    let b = h.global_bytes(name).unwrap_or_else(|| panic!("no global {name}"));
    b.chunks(8).map(|c| u64::from_ne_bytes(c.try_into().unwrap())).collect()
}

#[test]
fn bpf_code_reads_the_cgroup_tree() {
    // /c first, then /a/b: root id 1, /c 2, /a 3, /a/b 4.
    let h = Rc::new(crate::load_with(&manifest().join("tests/shim/cgroups.bpf.c"), &crate::cfg()));
    let mut s = sim(
        "seed = 1\nduration = \"200ms\"\n[machine]\ncpus = 2\n\
         [[cgroup]]\npath = \"/c\"\nweight = 300\nmax = \"50ms 100ms\"\n[[cgroup]]\npath = \"/a/b\"\nweight = 200\n\
         [[workload]]\nkind = \"hog\"\nname = \"b\"\ncount = 2\ncgroup = \"/a/b\"\n\
         [[workload]]\nkind = \"hog\"\nname = \"c\"\ncount = 1\ncgroup = \"/c\"\n",
    );
    s.scx_enable(h.clone()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.scx.state, EnableState::Enabled, "{:?}", s.scx.exit);
    let g = |n: &str| u64s(&h, n)[0];
    let ids = |n: &str, nr: &str| u64s(&h, n)[..g(nr) as usize].to_vec();
    assert_eq!(ids("pre_ids", "nr_pre"), [1, 2, 3, 4], "descendants, pre-order");
    assert_eq!(ids("post_ids", "nr_post"), [2, 4, 3, 1], "descendants, post-order");
    assert_eq!(ids("child_ids", "nr_child"), [2, 3], "children of the root");
    assert_eq!(ids("up_ids", "nr_up"), [4, 3, 1], "ancestors of /a/b, up");
    assert_eq!(g("deep_level"), 2);
    assert_eq!(ids("anc_ids", "nr_anc"), [1, 3, 4], "bpf_cgroup_ancestor(/a/b, 0..=2)");
    // ancestors[] agrees with bpf_cgroup_ancestor, and past the cgroup is NULL.
    assert_eq!(g("anc_beyond_null"), 1);
    s.run_until(100_000_000);
    assert_eq!(s.scx.state, EnableState::Enabled, "{:?}", s.scx.exit);
    // Every task (ops.init_task at fork): its cgroup three ways, and the
    // storage its cgroup's ops.cgroup_init made.
    assert_eq!(g("tasks_seen"), 3);
    assert_eq!(g("task_cgroup_mismatch"), 0);
    assert_eq!(g("storage_missing"), 0);
    assert_eq!(g("weight_sum"), 2 * 200 + 300);
    s.scx_unregister();
    s.run();
    assert_eq!(s.scx.state, EnableState::Disabled);
    assert_eq!(g("exits"), 4, "ops.cgroup_exit for every cgroup at disable");
}

#[test]
fn a_pointer_that_is_no_cgroup_ejects_the_scheduler() {
    let h = Rc::new(crate::load_with(&manifest().join("tests/shim/cgroups.bpf.c"), &crate::cfg()));
    h.set_rodata("pass_bad_cgroup", "true").unwrap_or_else(|e| panic!("{e}"));
    let mut s = sim("seed = 1\nduration = \"50ms\"\n[machine]\ncpus = 1\n[[cgroup]]\npath = \"/a\"\n");
    let e = s.scx_enable(h).expect_err("ops.init passed a bad cgroup pointer").to_string();
    assert!(e.contains("bpf_cgroup_release: invalid cgroup pointer"), "{e}");
}

/// The kernel's scx_pair (from schedlab's cache) on 4 CPUs for 1 s, with /a
/// and /b running 4 hogs each, and `extra` workloads.
fn under_scx_pair(extra: &str) -> Sim {
    let src = cache_dir().join("kernel-src/7.3.4/tools/sched_ext/scx_pair.bpf.c");
    assert!(src.is_file(), "{} is missing: run `scripts/kernel-src 7.3` once (it needs the Debian archive)", src.display());
    sim(&format!(
        "seed = 1\nduration = \"1s\"\n[machine]\ncpus = 4\n\
         [[cgroup]]\npath = \"/a\"\n[[cgroup]]\npath = \"/b\"\n\
         [[workload]]\nkind = \"hog\"\nname = \"a\"\ncount = 4\ncgroup = \"/a\"\n\
         [[workload]]\nkind = \"hog\"\nname = \"b\"\ncount = 4\ncgroup = \"/b\"\n\
         {extra}[scheduler]\nkind = \"ext\"\nsched = {:?}\n",
        src.display().to_string()
    ))
}

/// The kernel's scx_pair, unmodified, with its loader profile
/// (profiles/scx_pair.toml: resized rodata arrays, pair_ctx's max_entries,
/// one BPF queue per cgroup index in cgrp_q_arr): the two CPUs of a pair
/// (CPU c and c + nr_cpu_ids / 2) never run tasks of different cgroups at
/// the same time, and both cgroups get the CPUs.
#[test]
fn scx_pair_co_schedules_each_pair_by_cgroup() {
    let mut s = under_scx_pair("");
    // Sampled every 50 us: (samples where both CPUs of a pair ran a task,
    // those where the two tasks were of different cgroups). A CPU runs its
    // task once the context switch to it is paid for (`progress_from`).
    let (mut together, mut apart) = (0u64, 0u64);
    let cg = |s: &Sim, c: u32| s.rq(c).curr.filter(|_| s.rq(c).progress_from <= s.now()).map(|p| s.task(p).cgrp);
    for step in 1..=20_000u64 {
        s.run_until(step * 50_000);
        for c in 0..2 {
            if let (Some(x), Some(y)) = (cg(&s, c), cg(&s, c + 2)) {
                together += 1;
                apart += u64::from(x != y);
            }
        }
    }
    s.run();
    assert_eq!(s.scx.state, EnableState::Enabled, "scx_pair was ejected: {:?}", s.scx.exit);
    assert!(together > 30_000, "the pairs ran together in only {together} of 40000 samples");
    assert_eq!(apart, 0, "a pair ran two cgroups at once in {apart} of {together} samples");
    for p in ["/a", "/b"] {
        let rt = s.cg.groups[s.cg.find(p).unwrap() as usize].stats.runtime_ns;
        assert!(rt > 500_000_000, "{p} ran only {rt} ns");
    }
}

/// Hosted `SEC("tp_btf/sched_switch")` programs run on every context
/// switch: scx_pair's counts each time an RT task takes a pair CPU from one
/// of its tasks (nr_preemptions) and kicks the pair CPU. A FIFO cyclictest
/// thread on CPU 0 wakes every 1 ms for 1 s.
#[test]
fn scx_pair_sees_rt_preemption_through_its_sched_switch_tracepoint() {
    let mut s = under_scx_pair(
        "[[workload]]\nkind = \"cyclictest\"\nname = \"rt\"\nthreads = 1\naffinity = \"0\"\ninterval = \"1ms\"\npolicy = \"fifo\"\npriority = 50\n",
    );
    s.run();
    assert_eq!(s.scx.state, EnableState::Enabled, "scx_pair was ejected: {:?}", s.scx.exit);
    let counters = s.scx.ops.as_ref().expect("loaded").counters();
    let get = |n: &str| counters.iter().find(|(k, _)| k == n).map_or(0, |c| c.1);
    assert!((990..=1000).contains(&get("nr_preemptions")), "{counters:?}");
    assert!(get("nr_kicks") >= get("nr_preemptions"), "{counters:?}");
}
