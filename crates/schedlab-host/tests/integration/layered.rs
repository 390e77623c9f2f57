//! scx_layered 1.1.4 with its loader profile's `[layer_specs]` step (the
//! layer config from its own command line, `f:FILE`), and the tracepoint
//! programs it and scx_p2dq attach.

use std::rc::Rc;

use schedlab::sched::ext::ops::TraceEvent;
use schedlab::sched::ext::EnableState;

use crate::{manifest, sim};

fn u64s(h: &schedlab_host::HostedScheduler, name: &str) -> Vec<u64> {
    let b = h.global_bytes(name).unwrap_or_else(|| panic!("no global {name}"));
    b.chunks(8).map(|c| u64::from_ne_bytes(c.try_into().unwrap())).collect()
}

fn text(h: &schedlab_host::HostedScheduler, name: &str) -> String {
    let b = h.global_bytes(name).unwrap_or_else(|| panic!("no global {name}"));
    String::from_utf8_lossy(&b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())]).into_owned()
}

/// `SEC("tp_btf/cgroup_attach_task")`, `SEC("tp_btf/task_rename")` and
/// `SEC("tp_btf/hw_pressure_update?")` programs get the kernel
/// tracepoints' arguments: the destination cgroup, its path, the leader
/// and whether the whole process moved; the task (with its old name) and
/// the new name; the CPU and the pressure. Each fires once per event, and
/// only for a scheduler that attached a program to it.
#[test]
fn tracepoint_programs_get_the_kernels_arguments() {
    let h = Rc::new(crate::load_with(&manifest().join("tests/shim/tracepoints.bpf.c"), &crate::cfg()));
    let mut s = sim(
        "seed = 1\nduration = \"100ms\"\n[machine]\ncpus = 2\n[[cgroup]]\npath = \"/a/b\"\n\
         [[workload]]\nkind = \"hog\"\nname = \"w\"\ncount = 2\n",
    );
    s.scx_enable(h.clone()).unwrap_or_else(|e| panic!("{e}"));
    s.run_until(10_000_000);
    let g = |k: &str| u64s(&h, k)[0];
    let tasks: Vec<u32> = s.tasks.iter().filter(|t| t.name.starts_with("w-")).map(|t| t.id).collect();
    assert_eq!(tasks.len(), 2);
    let ab = s.cg.find("/a/b").expect("/a/b");
    // A process's threads written to cgroup.procs together.
    assert!(s.cgroup_attach_tasks(&tasks, ab));
    assert_eq!(g("attach_calls"), 1);
    assert_eq!(g("attach_cgrp_id"), ab as u64 + 1, "kn->id of /a/b (the root is 1)");
    assert_eq!(g("attach_pid"), tasks[0] as u64 + 1);
    assert_eq!(g("attach_threadgroup"), 1);
    assert_eq!(text(&h, "attach_path"), "/a/b");
    // One thread back to the root (cgroup.threads).
    assert!(s.cgroup_attach_task(tasks[1], 0));
    assert_eq!((g("attach_calls"), g("attach_cgrp_id"), g("attach_pid"), g("attach_threadgroup")), (2, 1, tasks[1] as u64 + 1, 0));
    assert_eq!(text(&h, "attach_path"), "/");
    // A rename: the program sees the old name in p->comm, the new one in
    // its argument (cut to 15 bytes, as comm holds).
    s.set_task_comm(tasks[0], "renamed-by-prctl-call");
    assert_eq!(g("rename_calls"), 1);
    assert_eq!(g("rename_pid"), tasks[0] as u64 + 1);
    assert_eq!(text(&h, "rename_old"), "w-0");
    assert_eq!(text(&h, "rename_new"), "renamed-by-prct");
    assert_eq!(s.task(tasks[0]).name, "renamed-by-prct");
    // Capacity pressure on CPU 1 (nothing in schedlab's machines changes it).
    s.scx_trace_event(1, &TraceEvent::HwPressureUpdate { cpu: 1, pressure: 700 });
    assert_eq!((g("pressure_calls"), g("pressure_cpu"), g("pressure_value")), (1, 1, 700));
    s.run();
    assert_eq!(s.scx.state, EnableState::Enabled, "{:?}", s.scx.exit);
    assert_eq!(g("attach_calls"), 2, "no other cgroup moves");
}

/// A scheduler without tracepoint programs is not called (and not charged).
#[test]
fn schedulers_without_the_programs_are_not_called() {
    let h = Rc::new(crate::load_with(&crate::shipped("simple"), &crate::cfg()));
    let mut s = sim("seed = 1\nduration = \"20ms\"\n[machine]\ncpus = 1\n[[cgroup]]\npath = \"/a\"\n[[workload]]\nkind = \"hog\"\nname = \"w\"\ncount = 1\n");
    s.scx_enable(h.clone()).unwrap_or_else(|e| panic!("{e}"));
    use schedlab::sched::ext::ops::ExtOps;
    assert!(!h.traces("cgroup_attach_task") && !h.traces("task_rename") && !h.traces("hw_pressure_update"));
    let before = s.scx.cost_acc;
    s.scx_trace_event(0, &TraceEvent::HwPressureUpdate { cpu: 0, pressure: 1 });
    assert_eq!(s.scx.cost_acc, before);
}

/// mixed.toml's load on 8 CPUs for `dur` under scx_layered with `args`
/// (its own command line: layer specs).
fn under_layered(args: &str, dur: &str) -> schedlab::sched::sim::Sim {
    sim(&format!(
        "seed = 1\nduration = {dur:?}\n[machine]\ncpus = 8\n[[workload]]\nkind = \"mixed\"\nname = \"mixed0\"\n\
         [scheduler]\nkind = \"ext\"\nsched = \"crate:scx_layered@1.1.4\"\nargs = {args:?}\n"
    ))
}

/// Samples which task runs on each CPU every 100 µs until `until` and
/// counts, per CPU, the samples where `pick` holds for the running task.
fn sample(s: &mut schedlab::sched::sim::Sim, until: u64, pick: &dyn Fn(&schedlab::sched::sim::Sim, u32) -> bool) -> Vec<u64> {
    let mut per_cpu = vec![0u64; s.nr_cpus()];
    let mut t = s.now();
    while t < until {
        t += 100_000;
        s.run_until(t);
        for (c, n) in per_cpu.iter_mut().enumerate() {
            if let Some(p) = s.rq(c as u32).curr {
                *n += u64::from(pick(s, p));
            }
        }
    }
    per_cpu
}

/// The shipped layer config on 8 CPUs: the Confined layer (mixed.toml's
/// yielders) owns a quarter of the CPUs, 0 and 1 (Linear growth, layer 0),
/// and its tasks run there and nowhere else; a config given with `f:FILE`
/// (the same layers, the Confined one growing Reverse) moves them to CPUs
/// 6 and 7. Renaming a task into the layer's prefix (`task_rename`) moves
/// it there.
#[test]
fn layers_take_effect() {
    let yielder = |s: &schedlab::sched::sim::Sim, p: u32| s.task(p).name.starts_with("mixed0-yield");
    let mut s = under_layered("", "600ms");
    let ran = sample(&mut s, 400_000_000, &yielder);
    assert_eq!(s.scx.state, EnableState::Enabled, "{:?}", s.scx.exit);
    assert!(ran[0] > 100 && ran[1] > 100, "the yielders ran on their layer's CPUs: {ran:?}");
    assert_eq!(ran[2..].iter().sum::<u64>(), 0, "the yielders ran outside the Confined layer's CPUs 0-1: {ran:?}");
    // A hog of the Open layer renamed into the Confined layer's comm
    // prefix (scx_layered's task_rename program marks it; it is matched
    // again when it next wakes) runs on CPUs 0-1 only from then on.
    let hog = s.tasks.iter().find(|t| t.name == "mixed0-hog-1").map(|t| t.id).expect("a hog");
    let before = sample(&mut s, 450_000_000, &|_, p| p == hog);
    assert!(before[2..].iter().sum::<u64>() > 0, "the hog ran outside CPUs 0-1 before: {before:?}");
    s.set_task_comm(hog, "mixed0-yield-x");
    s.run_until(470_000_000);
    let after = sample(&mut s, 600_000_000, &|_, p| p == hog);
    assert_eq!(s.scx.state, EnableState::Enabled, "{:?}", s.scx.exit);
    assert!(after[0] + after[1] > 100, "the renamed hog ran: {after:?}");
    assert_eq!(after[2..].iter().sum::<u64>(), 0, "the renamed hog left the Confined layer's CPUs: {after:?}");

    let dir = std::env::temp_dir().join(format!("schedlab-layered-it-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let shipped = schedlab_host::profile::shipped_data("scx_layered.json").expect("shipped config");
    let f = dir.join("reverse.json");
    std::fs::write(&f, shipped.replacen("\"growth_algo\": \"Linear\"", "\"growth_algo\": \"Reverse\"", 1)).unwrap();
    let mut s = under_layered(&format!("f:{}", f.display()), "300ms");
    let ran = sample(&mut s, 300_000_000, &yielder);
    assert_eq!(s.scx.state, EnableState::Enabled, "{:?}", s.scx.exit);
    assert!(ran[6] > 100 && ran[7] > 100, "{ran:?}");
    assert_eq!(ran[..6].iter().sum::<u64>(), 0, "the yielders ran outside CPUs 6-7: {ran:?}");
    std::fs::remove_dir_all(&dir).ok();
}

/// Tasks moved into a cgroup by a cgroup.procs write at 300 ms are matched
/// again (scx_layered's `cgroup_attach_task` program marks them; they are
/// matched when they next wake) into a Confined layer of that cgroup
/// (`CgroupPrefix "conf"`, the layer's path form) on CPUs 0-1.
#[test]
fn a_cgroup_move_moves_tasks_into_their_layer() {
    let dir = std::env::temp_dir().join(format!("schedlab-layered-cg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("cgroup.json");
    std::fs::write(
        &f,
        r#"[{"name": "conf", "matches": [[{"CgroupPrefix": "conf"}]],
             "kind": {"Confined": {"util_range": [0.5, 0.8], "cpus_range": [2, 2], "growth_algo": "Linear"}}},
            {"name": "rest", "matches": [[]], "kind": {"Open": {}}}]"#,
    )
    .unwrap();
    let mut s = sim(&format!(
        "seed = 1\nduration = \"600ms\"\n[machine]\ncpus = 8\n[[cgroup]]\npath = \"/conf\"\n\
         [[cgroup_write]]\nat = \"300ms\"\npath = \"/conf\"\nprocs = \"web\"\n\
         [[workload]]\nkind = \"hog\"\nname = \"web\"\ncount = 4\nrun = \"exp:2ms\"\nsleep = \"exp:1ms\"\n\
         [[workload]]\nkind = \"hog\"\nname = \"other\"\ncount = 8\nrun = \"exp:2ms\"\nsleep = \"exp:1ms\"\n\
         [scheduler]\nkind = \"ext\"\nsched = \"crate:scx_layered@1.1.4\"\nargs = {:?}\n",
        format!("f:{}", f.display())
    ));
    let web = |s: &schedlab::sched::sim::Sim, p: u32| s.task(p).name.starts_with("web");
    let before = sample(&mut s, 290_000_000, &web);
    assert!(before[2..].iter().sum::<u64>() > 100, "web ran outside CPUs 0-1 before the move: {before:?}");
    s.run_until(320_000_000);
    let after = sample(&mut s, 600_000_000, &web);
    assert_eq!(s.scx.state, EnableState::Enabled, "{:?}", s.scx.exit);
    assert!(after[0] + after[1] > 1000, "web ran in its layer: {after:?}");
    assert_eq!(after[2..].iter().sum::<u64>(), 0, "web ran outside the Confined layer's CPUs after the move: {after:?}");
    std::fs::remove_dir_all(&dir).ok();
}
