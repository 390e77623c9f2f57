//! The runtime's wider BPF features (issue 11, section 2), through the
//! normal hosting path: tests/shim/runtime.bpf.c schedules the hog mix
//! while it checks the current task, scx_bpf_cpu_curr / cpu_rq /
//! locked_rq, interrupt context, perf counters and task storage lifetime,
//! and its SEC("syscall") programs check rbtree and list ordering, object
//! references, ring buffers, dynptrs, arena pages, resilient locks,
//! strings, cgroups and map-in-map hashes.

use std::rc::Rc;

use schedlab::sched::ext::check::Checked;
use schedlab_host::HostedScheduler;
use schedlab::sched::sim::Sim;
use schedlab::sched::task::TaskState;

use crate::{cfg, load_with, manifest, sim};

fn runtime_sched() -> HostedScheduler {
    load_with(&manifest().join("tests/shim/runtime.bpf.c"), &cfg())
}

/// Runs a syscall program with a `T` as its context.
fn syscall<T: Default>(ops: &HostedScheduler, sim: &mut Sim, name: &str) -> T {
    let mut ctx = T::default();
    // SAFETY: T is a plain repr(C) struct of integers; the program writes
    // within its size.
    let bytes = unsafe { std::slice::from_raw_parts_mut((&mut ctx as *mut T).cast::<u8>(), std::mem::size_of::<T>()) };
    let r = ops.run_syscall(sim, name, bytes).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r, 0, "{name} returned {r}");
    ctx
}

#[repr(C)]
#[derive(Default, Debug)]
struct SchedReport {
    tick_checks: u64,
    tick_bad: u64,
    hardirq_ticks: u64,
    timer_checks: u64,
    timer_bad: u64,
    perf_reads: u64,
    perf_last: u64,
    perf_bad: u64,
}

/// 4 CPUs: hogs, and a hackbench group that finishes (its tasks die).
fn scenario(ms: u32, hogs: bool) -> String {
    let hogs = if hogs { "[[workload]]\nkind = \"hog\"\nname = \"hogs\"\ncount = 6\n" } else { "" };
    format!(
        "seed = 5\nduration = \"{ms}ms\"\n[machine]\npreset = \"4cpu\"\n{hogs}\
         [[workload]]\nkind = \"hackbench\"\nname = \"hb\"\ngroups = 1\nfds = 2\nloops = 40\n"
    )
}

#[test]
fn current_task_rq_views_irq_context_perf_and_storage_lifetime() {
    let hosted = Rc::new(runtime_sched());
    let mut s = sim(&scenario(400, true));
    for cpu in 0..4 {
        // PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES on each CPU.
        assert!(hosted.perf_event_install(&s, "pmu", cpu, cpu, 0, 0));
    }
    let ops = Rc::new(Checked::new(hosted.clone()));
    s.scx_enable(ops.clone()).unwrap_or_else(|e| panic!("load refused: {e}"));
    s.run();
    assert!(s.scx.exit.is_none(), "{:?}", s.scx.exit);
    assert!(ops.violations().is_empty(), "{:#?}", ops.violations());

    let r: SchedReport = syscall(&hosted, &mut s, "sched_report");
    assert!(r.tick_checks > 300, "{r:?}");
    assert_eq!(r.tick_bad, 0, "current, cpu_curr, cpu_rq, locked_rq and per_cpu_ptr agree in ops.tick: {r:?}");
    assert_eq!(r.hardirq_ticks, r.tick_checks, "the tick runs in hard interrupt context");
    // A 3 ms timer over 400 ms, in softirq context, current = the CPU's task or idle task.
    assert!((120..=134).contains(&r.timer_checks), "{r:?}");
    assert_eq!(r.timer_bad, 0, "{r:?}");
    assert!(r.perf_reads >= r.tick_checks / 2 && r.perf_bad == 0, "{r:?}");
    let busy0 = s.rqs[0].stats.busy_ns;
    assert!(r.perf_last > 0 && r.perf_last % 3 == 0 && r.perf_last / 3 <= busy0, "cycles at 3/ns: {r:?} busy {busy0}");

    // Task storage lives as long as its task: the hackbench tasks are dead
    // and their values gone; every live task still has one.
    let dead = s.tasks.iter().filter(|t| t.state == TaskState::Dead).count();
    let live = s.tasks.iter().filter(|t| t.state != TaskState::Dead).count();
    assert!(dead >= 4, "hackbench finished");
    assert_eq!(hosted.map_len("task_ctxs"), Some(live));
}

#[repr(C)]
#[derive(Default, Debug)]
struct IdleReport {
    pid: i32,
    cpu: i32,
    task_cpu: i32,
    running: i32,
    is_idle: i32,
    same_as_curr: i32,
    storage: i32,
    irq: i32,
    comm: [u8; 16],
    cgroup_level: u64,
    cgroup_id: u64,
    cgroup_same: u64,
    cgroup_val: u64,
}

#[test]
fn current_task_on_an_idle_cpu_is_its_idle_task() {
    let hosted = Rc::new(runtime_sched());
    let mut s = sim(&scenario(500, false));
    s.scx_enable(Rc::new(Checked::new(hosted.clone()))).unwrap_or_else(|e| panic!("{e}"));
    s.run();
    assert!(s.tasks.iter().all(|t| t.state == TaskState::Dead), "hackbench finished");
    let r: IdleReport = syscall(&hosted, &mut s, "idle_check");
    let comm = std::str::from_utf8(&r.comm[..r.comm.iter().position(|&c| c == 0).unwrap()]).unwrap();
    assert_eq!((r.pid, r.is_idle, r.running, r.same_as_curr), (0, 1, 1, 1), "{r:?}");
    assert_eq!(r.task_cpu, r.cpu);
    assert_eq!(comm, format!("swapper/{}", r.cpu));
    assert_eq!((r.storage, r.irq), (1, 0), "idle tasks have task storage; a syscall runs in task context");
    assert_eq!((r.cgroup_level, r.cgroup_id, r.cgroup_same, r.cgroup_val), (0, 1, 1, 5), "the root cgroup");
    let r: IdleReport = syscall(&hosted, &mut s, "idle_check");
    assert_eq!(r.cgroup_val, 10, "cgroup storage persists");
    assert!(s.scx.exit.is_none(), "{:?}", s.scx.exit);
}

#[repr(C)]
#[derive(Default, Debug)]
struct DsReport {
    added: i32,
    popped: i32,
    order_bad: i32,
    stable_bad: i32,
    bst_bad: i32,
    depth: i32,
    readd_err: i32,
    remove_again_null: i32,
    removed_key: i32,
    lock_missing: i32,
    list_order: [i32; 7],
    list_len: i32,
}

#[test]
fn rbtree_list_and_object_semantics() {
    let hosted = runtime_sched();
    let mut s = sim(&scenario(10, false));
    let r: DsReport = syscall(&hosted, &mut s, "ds_check");
    assert_eq!((r.added, r.popped), (200, 199), "one node was removed by reference: {r:?}");
    assert_eq!((r.order_bad, r.stable_bad, r.bst_bad), (0, 0, 0), "ascending, equal keys in insertion order: {r:?}");
    // A red-black tree of 200 nodes is at most 2 log2(201) high.
    assert!((8..=15).contains(&r.depth), "{r:?}");
    assert_eq!((r.readd_err, r.remove_again_null), (-22, 1), "a node is in one tree at a time: {r:?}");
    assert!((0..50).contains(&r.removed_key), "{r:?}");
    assert_eq!(r.list_order, [0, 1, 2, 3, 4, 5, -1]);
    assert_eq!(r.list_len, 6);
    // Run again: the tree and list were left empty and work the same.
    let r2: DsReport = syscall(&hosted, &mut s, "ds_check");
    assert_eq!((r2.added, r2.popped, r2.depth, r2.list_order), (r.added, r.popped, r.depth, r.list_order));
}

#[test]
fn rbtree_without_its_lock_ejects_the_scheduler() {
    let hosted = Rc::new(runtime_sched());
    let mut s = sim(&scenario(50, true));
    s.scx_enable(Rc::new(Checked::new(hosted.clone()))).unwrap_or_else(|e| panic!("{e}"));
    s.run_until(10_000_000);
    let r = hosted.run_syscall(&mut s, "rb_unlocked", &mut []).unwrap();
    assert_eq!(r, 0);
    s.run();
    let exit = s.scx.exit.clone().expect("ejected");
    assert!(exit.msg.contains("bpf_rbtree_first: the bpf_spin_lock"), "{exit:?}");
}

#[repr(C)]
#[derive(Default, Debug)]
struct RbReport {
    out_ret: i64,
    full_after: i64,
    avail_before: i64,
    avail_after: i64,
    size: i64,
    dynptr_ret: i64,
    dynptr_read: i64,
    bad_flags: i64,
}

#[repr(C)]
#[derive(Default, Debug)]
struct DrainReport {
    first: i64,
    second: i64,
    sum: u64,
}

#[test]
fn ring_buffers_order_capacity_and_dynptrs() {
    let hosted = runtime_sched();
    let mut s = sim(&scenario(10, false));
    let r: RbReport = syscall(&hosted, &mut s, "rb_phase1");
    assert_eq!((r.out_ret, r.avail_before, r.size, r.bad_flags), (0, 48, 4096, 1), "{r:?}");
    assert_eq!(hosted.ringbuf_consume("events"), Some(vec![]), "the first record is still reserved");
    let r: RbReport = syscall(&hosted, &mut s, "rb_phase2");
    assert_eq!((r.dynptr_ret, r.dynptr_read), (0, 1), "{r:?}");
    // 72 bytes in use, then 1032-byte records until the 4095-byte limit.
    assert_eq!((r.full_after, r.avail_after), (3, 72 + 3 * 1032), "{r:?}");
    let got = hosted.ringbuf_consume("events").unwrap();
    let word = |v: &[u8], at: usize| u64::from_ne_bytes(v[at..at + 8].try_into().unwrap());
    assert_eq!(got.len(), 4, "discarded records are skipped: {got:?}");
    assert_eq!(got[..3].iter().map(|v| v[0]).collect::<Vec<_>>(), [1, 2, 3], "reservation order");
    assert_eq!((got[3].len(), word(&got[3], 8)), (16, 0x1122_3344_5566_7788));
    assert_eq!(hosted.ringbuf_consume("events"), Some(vec![]));

    for v in [10u64, 20, 30] {
        assert_eq!(hosted.user_ringbuf_push("commands", &v.to_ne_bytes()), Some(0));
    }
    assert_eq!(hosted.user_ringbuf_push("commands", &[0; 5000]), Some(-7), "E2BIG");
    let d: DrainReport = syscall(&hosted, &mut s, "urb_drain");
    assert_eq!((d.first, d.second, d.sum), (2, 1, 60), "{d:?}");
    assert_eq!(hosted.user_ringbuf_push("events", &[0; 8]), None, "not a user ring buffer");
}

#[repr(C)]
#[derive(Default, Debug)]
struct MiscReport {
    p1: u64,
    p2: u64,
    p3: u64,
    p4: u64,
    hinted: u64,
    zeroed: u64,
    list_sum: u64,
    bad_node: u64,
    lock1: i32,
    lock2: i32,
    strcmp_lt: i32,
    strcmp_eq: i32,
    strcmp_gt: i32,
    strcmp_prefix: i32,
    inner_val: u64,
    inner_missing: u64,
    inode_val: u64,
    inode_null: u64,
}

#[test]
fn arena_pages_locks_strings_maps_of_maps_and_inode_storage() {
    let hosted = runtime_sched();
    let mut s = sim(&scenario(10, false));
    let r: MiscReport = syscall(&hosted, &mut s, "misc_check");
    assert_eq!(r.p1 % 4096, 0, "{r:?}");
    assert_eq!(r.p2, r.p1 + 4096, "first fit after page 0: {r:?}");
    assert_eq!((r.p3, r.zeroed), (r.p1, 1), "a freed page is reused, zeroed: {r:?}");
    assert_eq!((r.hinted, r.bad_node), (1, 1), "{r:?}");
    assert_eq!((r.p4, r.list_sum), (r.p1 + 3 * 4096, 55), "__arena pointers are plain pointers: {r:?}");
    assert_eq!((r.lock1, r.lock2), (0, -35), "AA on a resilient lock is -EDEADLK");
    assert_eq!((r.strcmp_lt, r.strcmp_eq, r.strcmp_gt, r.strcmp_prefix), (-1, 0, 1, 0));
    assert_eq!((r.inner_val, r.inner_missing), (77, 1), "HASH_OF_MAPS slot 3 is inner0");
    assert_eq!((r.inode_val, r.inode_null), (4, 1));
    assert_eq!(hosted.map_len("arena"), Some(5), "pages allocated");
}

/// The same scenario and seed twice: identical results, event hash and
/// scheduler counters (the runtime keeps no address- or hash-ordered state
/// that reaches the simulation).
#[test]
fn runtime_scheduler_runs_are_byte_identical() {
    let once = || {
        let hosted = Rc::new(runtime_sched());
        let mut s = sim(&scenario(200, true));
        for cpu in 0..4 {
            hosted.perf_event_install(&s, "pmu", cpu, cpu, 0, 1);
        }
        s.scx_enable(Rc::new(Checked::new(hosted.clone()))).unwrap_or_else(|e| panic!("{e}"));
        s.run();
        let r: SchedReport = syscall(&hosted, &mut s, "sched_report");
        let res = schedlab::results::report::Results::collect(&s, "test", "runtime");
        (res.to_json(), res.event_hash, format!("{r:?}"))
    };
    assert_eq!(once(), once());
}
