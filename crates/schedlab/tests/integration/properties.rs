//! Properties over random small scenarios: the engine's invariants hold
//! after every event, and time is conserved.

use proptest::prelude::*;

use crate::sim;

const POLICIES: [&str; 6] = ["other", "other", "batch", "idle", "fifo", "rr"];

fn scenario(cpus: usize, tasks: &[(i32, u8, u16, u16, usize)], seed: u64) -> String {
    let mut s = format!("seed = {seed}\nduration = \"200ms\"\n[machine]\ncpus = {cpus}\n[scheduler]\nrt_bandwidth = \"throttle\"\n");
    for (i, &(nice, mask, run_us, sleep_us, policy)) in tasks.iter().enumerate() {
        let allowed: Vec<String> = (0..cpus).filter(|c| mask & (1 << c) != 0).map(|c| c.to_string()).collect();
        let cpus_line = if allowed.is_empty() { String::new() } else { format!("cpus = \"{}\"\n", allowed.join(",")) };
        let sleep = if sleep_us == 0 { String::new() } else { format!("sleep = \"exp:{sleep_us}us\"\n") };
        let policy = POLICIES[policy % POLICIES.len()];
        let prio = if policy == "fifo" || policy == "rr" { format!("priority = {}\n", 1 + (nice + 20) * 2) } else { String::new() };
        s.push_str(&format!("[[workload]]\nkind = \"hog\"\nname = \"t{i}\"\nnice = {nice}\npolicy = \"{policy}\"\n{prio}run = \"exp:{}us\"\n{sleep}{cpus_line}", run_us.max(1)));
    }
    s
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold_and_time_is_conserved(
        cpus in 1usize..=6,
        tasks in prop::collection::vec((-20i32..=19, any::<u8>(), 1u16..3000, 0u16..3000, 0usize..6), 1..10),
        seed in 0u64..(i64::MAX as u64),
    ) {
        let text = scenario(cpus, &tasks, seed);
        if std::env::var_os("SCHEDLAB_PRINT").is_some() { eprintln!("=====\n{text}"); }
        let mut s = sim(&text);
        s.check_invariants = true;
        s.run();
        let end = s.now();
        let mut total_runtime = 0;
        for t in &s.tasks {
            // Runnable time splits into running and waiting; neither exceeds the run.
            prop_assert!(t.stats.runtime_ns + t.stats.wait_ns <= end, "{}: {} + {} > {}", t.name, t.stats.runtime_ns, t.stats.wait_ns, end);
            prop_assert!(t.cpus_allowed.test(t.cpu as usize));
            total_runtime += t.stats.runtime_ns;
        }
        let busy: u64 = s.rqs.iter().map(|rq| rq.stats.busy_ns).sum();
        prop_assert!(total_runtime <= busy, "tasks ran {} ns on {} ns of busy CPU", total_runtime, busy);
        prop_assert!(busy <= end * cpus as u64);
    }
}

const PRESETS: [&str; 4] = ["2cpu", "ryzen-3900x", "guest-16", "amd-16c"];

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// Whole workloads on real topologies: every task finishes or keeps
    /// running, invariants hold, and the run is reproducible.
    #[test]
    fn mixed_workloads_on_real_topologies(
        preset in 0usize..PRESETS.len(),
        hogs in 0u32..40,
        groups in 1u32..3,
        fds in 1u32..6,
        rt_threads in 0u32..4,
        seed in 0u64..1_000_000,
        features in any::<u8>(),
    ) {
        let mut text = format!(
            "seed = {seed}\nduration = \"150ms\"\n[machine]\npreset = \"{}\"\n[features]\nRUN_TO_PARITY = {}\nPLACE_LAG = {}\nDELAY_DEQUEUE = {}\nNEXT_BUDDY = {}\nPREEMPT_SHORT = {}\nSIS_UTIL = {}\nSCHED_CACHE = {}\nSC_VISIT = {}\n",
            PRESETS[preset], features & 1 != 0, features & 2 != 0, features & 4 != 0, features & 8 != 0, features & 16 != 0, features & 32 != 0, features & 64 != 0, features & 128 != 0,
        );
        if hogs > 0 {
            text.push_str(&format!("[[workload]]\nkind = \"hog\"\ncount = {hogs}\nrun = \"exp:1ms\"\nsleep = \"exp:700us\"\nnice = {}\n", (seed % 10) as i32 - 5));
        }
        text.push_str(&format!("[[workload]]\nkind = \"hackbench\"\ngroups = {groups}\nfds = {fds}\nloops = 30\nmode = \"{}\"\n", if seed % 2 == 0 { "threads" } else { "process" }));
        if rt_threads > 0 {
            text.push_str(&format!("[[workload]]\nkind = \"cyclictest\"\nthreads = {rt_threads}\npriority = 90\ninterval = \"300us\"\n"));
        }
        let mut a = sim(&text);
        a.run();
        let mut b = sim(&text);
        b.run();
        prop_assert_eq!(a.engine.hash(), b.engine.hash());
        // No lost wakeups: nobody waits for data that is there, or for room that is free.
        for (i, o) in a.objs.iter().enumerate() {
            prop_assert!(o.tokens == 0 || o.readers.is_empty(), "object {}: readers wait on {} tokens", i, o.tokens);
            prop_assert!(o.tokens >= o.capacity || o.writers.is_empty(), "object {}: writers wait with room", i);
        }
        let hb = a.metrics.iter().find(|m| m.kind == "hackbench").unwrap();
        if hogs == 0 {
            prop_assert_eq!(hb.exited, hb.nr_tasks, "hackbench alone did not finish in 150 ms");
        } else {
            prop_assert!(a.tasks.iter().filter(|t| t.name.starts_with("hb-")).any(|t| t.stats.runtime_ns > 0));
        }
    }
}

/// One random step of a random program (see `random_programs_keep_invariants`).
fn op_from(s: &mut schedlab::sched::sim::Sim, kind: u8, arg: u16, cpus: usize) -> schedlab::sched::task::Op {
    use schedlab::machine::cpumask::CpuMask;
    use schedlab::sched::task::{Dist, Op, Policy};
    let arg64 = arg as u64;
    match kind % 9 {
        0 | 1 => Op::Run(Dist::Exp(1 + arg64 * 1_000)),
        2 => Op::Sleep(Dist::Exp(1 + arg64 * 700)),
        3 => Op::Yield,
        4 => {
            let policy = [Policy::Other, Policy::Batch, Policy::Idle, Policy::Fifo, Policy::Rr][arg as usize % 5];
            Op::SetSched { policy, nice: (arg % 40) as i32 - 20, rt_priority: 1 + (arg % 99) as u32 }
        }
        5 => {
            let mask = CpuMask::from_cpus(cpus, (0..cpus).filter(|c| arg & (1 << c) != 0));
            s.set_affinity_op(if mask.is_empty() { CpuMask::full(cpus) } else { mask })
        }
        6 => Op::Lock { lock: 0, ple_ns: if arg % 2 == 0 { Some(20_000) } else { None } },
        7 => Op::Unlock { lock: 0 },
        _ => Op::YieldTo { slot: 0 },
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Random programs mixing runs, sleeps, yields, yield_to, policy, nice
    /// and affinity changes and a shared spinlock: the invariants hold after
    /// every event, affinity is respected and time is conserved.
    #[test]
    fn random_programs_keep_invariants(
        cpus in 1usize..=4,
        programs in prop::collection::vec(prop::collection::vec((any::<u8>(), any::<u16>()), 1..8), 1..6),
        seed in 0u64..1_000_000,
    ) {
        use schedlab::machine::cpumask::CpuMask;
        use schedlab::sched::task::{Dist, Op, Policy};
        use schedlab::workload::{add_program, add_workload, new_task, spawn};
        let mut s = sim(&format!("seed = {seed}\nduration = \"100ms\"\n[machine]\ncpus = {cpus}\n"));
        s.locks.push(schedlab::sched::sim::SpinLock::default());
        let w = add_workload(&mut s, "random", "test", false);
        let n = programs.len();
        for (i, steps) in programs.iter().enumerate() {
            let mut ops: Vec<Op> = steps.iter().map(|&(k, a)| op_from(&mut s, k, a, cpus)).collect();
            // Never leave the lock held forever: release it at the end of each pass.
            ops.push(Op::Run(Dist::Const(10_000)));
            ops.push(Op::Loop { to: 0, count: None, slot: 0 });
            let prog = add_program(&mut s, ops);
            let mut t = new_task(format!("r{i}"), w, i as u32 + 1, Policy::Other, 0, 0, CpuMask::full(cpus), prog);
            t.peers = vec![((i + 1) % n) as u32];
            spawn(&mut s, w, t);
        }
        s.run();
        let end = s.now();
        for t in &s.tasks {
            prop_assert!(t.cpus_allowed.test(t.cpu as usize));
            prop_assert!(t.stats.runtime_ns + t.stats.wait_ns <= end);
        }
    }
}

/// Prefetching (`Sim::force_lookahead`) changes only speed: with it on
/// and off, a run pauses with the same `ran_on` masks (batched when on)
/// and ends with the same results and event hash, its invariants checked
/// after every event either way.
/// Balancing keeps group statistics between walks (here forced on for the
/// whole run; a 192-CPU machine keeps them by default only while a
/// workload starts): fork placement and balance passes decide as full
/// walks do, with the same results and event hash. Debug builds also check
/// every kept statistic against a fresh sum, so a write that does not mark
/// its CPU fails here. The machine has SMT, LLCs and two nodes; some tasks
/// are pinned; the second and third workloads start while the first runs,
/// migrates and balances.
#[test]
fn kept_group_stats_change_nothing_but_speed() {
    let toml = "seed = 3\nduration = \"60ms\"\n[machine]\npreset = \"epyc-2s-192\"\n\
        [[workload]]\nkind = \"hog\"\nname = \"a\"\ncount = 300\nrun = \"exp:3ms\"\nsleep = \"exp:2ms\"\n\
        [[workload]]\nkind = \"hog\"\nname = \"b\"\ncount = 150\nrun = \"exp:200us\"\nsleep = \"exp:1ms\"\ncpus = \"0-40\"\nstart = \"20ms\"\n\
        [[workload]]\nkind = \"hog\"\nname = \"c\"\ncount = 100\nrun = \"exp:1ms\"\nsleep = \"exp:1ms\"\nstart = \"30ms\"\n";
    // Group scheduling: weights, a bandwidth limit that throttles, and a
    // run-time move of a workload between groups.
    let groups = "seed = 5\nduration = \"250ms\"\n[machine]\ncpus = 24\n\
        [[cgroup]]\npath = \"/db\"\nweight = 400\n\
        [[cgroup]]\npath = \"/batch\"\nweight = 50\nmax = \"20ms 50ms\"\n\
        [[workload]]\nkind = \"hog\"\nname = \"db\"\ncount = 30\nrun = \"exp:3ms\"\nsleep = \"exp:1ms\"\ncgroup = \"/db\"\n\
        [[workload]]\nkind = \"hog\"\nname = \"batch\"\ncount = 40\ncgroup = \"/batch\"\n\
        [[workload]]\nkind = \"hog\"\nname = \"io\"\ncount = 20\nrun = \"exp:200us\"\nsleep = \"exp:2ms\"\n\
        [[cgroup_write]]\nat = \"100ms\"\npath = \"/db\"\nprocs = \"io\"\n";
    // A domain of 32 groups (the top of 256 CPUs in LLCs of 8), which
    // fork placement and balancing read through their trees (spans of 16
    // groups or more); debug builds check each tree's answer against the
    // walk.
    let wide = "seed = 9\nduration = \"60ms\"\n[machine]\ncpus = 256\n\
        [[workload]]\nkind = \"hog\"\nname = \"a\"\ncount = 500\nrun = \"exp:3ms\"\nsleep = \"exp:2ms\"\n\
        [[workload]]\nkind = \"hog\"\nname = \"b\"\ncount = 100\nrun = \"exp:200us\"\nsleep = \"exp:1ms\"\ncpus = \"0-63\"\nstart = \"20ms\"\n\
        [[workload]]\nkind = \"hog\"\nname = \"c\"\ncount = 200\nrun = \"exp:1ms\"\nsleep = \"exp:4ms\"\nstart = \"30ms\"\n";
    for (name, toml) in [("flat", toml), ("groups", groups), ("wide", wide)] {
        let run = |keep: bool| {
            let mut s = sim(toml);
            s.keep_group_stats(keep);
            s.run();
            let cpus: Vec<u32> = s.tasks.iter().map(|t| t.cpu).collect();
            let r = schedlab::results::report::Results::collect(&s, "test", "eevdf");
            (cpus, serde_json::to_string(&r).expect("results serialize"), s.engine.hash())
        };
        let (full, kept) = (run(false), run(true));
        assert_eq!(full.2, kept.2, "{name}: event hash differs");
        assert_eq!(full.0, kept.0, "{name}: tasks ended on other CPUs");
        assert!(full.1 == kept.1, "{name}: results differ");
    }
}

#[test]
fn lookahead_changes_nothing_but_speed() {
    let toml = "seed = 7\nduration = \"300ms\"\n[machine]\ncpus = 24\n\
        [[workload]]\nkind = \"hog\"\nname = \"cpu\"\ncount = 40\nrun = \"exp:3ms\"\nsleep = \"exp:2ms\"\n\
        [[workload]]\nkind = \"hog\"\nname = \"io\"\ncount = 60\nrun = \"exp:200us\"\nsleep = \"exp:1ms\"\ncpus = \"0-11\"\n";
    let run = |on: bool| {
        let mut s = sim(toml);
        s.force_lookahead(on);
        s.run_until(120_000_000);
        let paused: Vec<String> = s.tasks.iter().map(|t| t.ran_on.to_cpulist()).collect();
        s.run();
        let r = schedlab::results::report::Results::collect(&s, "test", "eevdf");
        (paused, serde_json::to_string(&r).expect("results serialize"), s.engine.hash())
    };
    let (off, on) = (run(false), run(true));
    assert!(off.0.iter().any(|m| m.contains(',') || m.contains('-')), "no task migrated: the test exercises nothing");
    assert_eq!(off.0, on.0, "ran_on differs at the pause");
    assert_eq!(off.2, on.2, "event hash differs");
    assert!(off.1 == on.1, "results differ");
}
