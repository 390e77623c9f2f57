use crate::{run, sim};
use schedlab::sched::task::TaskState;

#[test]
fn a_hog_per_cpu_stays_put() {
    let (s, r) = run("duration = \"2s\"\n[machine]\npreset = \"4cpu\"\n[[workload]]\nkind = \"hog\"\ncount = 4\n");
    for t in &s.tasks {
        assert_eq!(t.stats.migrations, 0, "{} migrated", t.name);
    }
    for c in &r.cpus {
        assert!(c.util_ppm > 990_000, "cpu{} util {}", c.cpu, c.util_ppm);
    }
}

#[test]
fn idle_cpus_pull_work() {
    // Start four hogs, then pile them all onto CPU 0 by hand: periodic, newidle
    // and nohz idle balancing must spread them back over the idle CPUs.
    let mut s = sim("duration = \"3s\"\n[machine]\npreset = \"4cpu\"\n[[workload]]\nkind = \"hog\"\ncount = 4\n");
    s.end_ns = 3_000_000_000;
    s.run_until(10_000_000);
    // Keep the CPUs we empty from pulling straight back while we pile up.
    let avg_idle = s.rqs[0].avg_idle;
    for rq in &mut s.rqs {
        rq.avg_idle = 0;
    }
    for p in 0..4u32 {
        let cpu = s.task(p).cpu;
        if cpu != 0 {
            let c = s.rq(cpu).curr;
            assert_eq!(c, Some(p));
            s.preempt_and_migrate(cpu, p, 0);
        }
    }
    assert_eq!(s.rq(0).nr_running, 4);
    for rq in &mut s.rqs {
        rq.avg_idle = avg_idle;
    }
    let busy_before: Vec<u64> = s.rqs.iter().map(|rq| rq.stats.busy_ns).collect();
    s.run();
    for (c, before) in busy_before.iter().enumerate().skip(1) {
        let busy = s.rqs[c].stats.busy_ns - before;
        assert!(busy > 2_800_000_000, "cpu{c} stayed idle: busy {busy}");
    }
    assert!(s.tasks.iter().all(|t| t.state == TaskState::Runnable));
}

#[test]
fn affinity_is_never_violated() {
    // Invariant checks run after every event and assert the affinity of every
    // running and queued task; this scenario stresses wakeup placement,
    // balancing and RT push/pull with mixed masks.
    let mut s = sim(r#"
duration = "1s"
seed = 11
[machine]
preset = "ryzen-3900x"
[[workload]]
kind = "hog"
count = 6
cpus = "0-2,12-14"
run = "exp:1ms"
sleep = "exp:1ms"
[[workload]]
kind = "hog"
count = 6
cpus = "3,15"
run = "exp:2ms"
sleep = "exp:500us"
[[workload]]
kind = "cyclictest"
threads = 3
affinity = "4-5"
priority = 60
interval = "500us"
"#);
    s.check_invariants = true;
    s.run();
    for t in &s.tasks {
        assert!(t.cpus_allowed.test(t.cpu as usize));
    }
}

#[test]
fn balancing_spreads_more_tasks_than_cpus() {
    let (s, r) = run("duration = \"3s\"\n[machine]\npreset = \"4cpu\"\n[[workload]]\nkind = \"hog\"\nname = \"h\"\ncount = 8\n");
    for c in &r.cpus {
        assert!(c.util_ppm > 990_000, "cpu{} util {}", c.cpu, c.util_ppm);
    }
    let per_task: Vec<u64> = s.tasks.iter().map(|t| t.stats.runtime_ns).collect();
    let (min, max) = (per_task.iter().min().unwrap(), per_task.iter().max().unwrap());
    // 8 tasks on 4 CPUs: each ~1.5 s of 3 s.
    assert!(*min > 1_200_000_000 && *max < 1_800_000_000, "{per_task:?}");
}

#[test]
fn wakeups_find_idle_cpus_in_the_llc() {
    // Two sleepers and three idle CPUs: wakeups should never wait behind a hog.
    let (s, _) = run("duration = \"1s\"\n[machine]\npreset = \"4cpu\"\n[[workload]]\nkind = \"hog\"\nname = \"busy\"\n[[workload]]\nkind = \"hog\"\nname = \"s\"\ncount = 2\nrun = \"200us\"\nsleep = \"1ms\"\n");
    for t in s.tasks.iter().filter(|t| t.name.starts_with("s-")) {
        assert!(t.stats.wait_ns < 1_000_000, "{} waited {}", t.name, t.stats.wait_ns);
    }
}
