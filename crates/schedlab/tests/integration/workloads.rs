use crate::run;

#[test]
fn hackbench_delivers_every_message_and_finishes() {
    let (s, r) = run("duration = \"10s\"\n[machine]\npreset = \"4cpu\"\n[[workload]]\nkind = \"hackbench\"\ngroups = 2\nfds = 3\nloops = 40\nmode = \"threads\"\nipc = \"pipe\"\n");
    let w = &r.workloads[0];
    assert!(w.finished, "hackbench did not finish");
    assert_eq!(w.tasks, 2 * 3 * 2);
    assert!(w.makespan_ns.unwrap() > 0);
    // Every receiver consumed fds * loops messages; every buffer is empty.
    assert!(s.objs.iter().all(|o| o.tokens == 0 && o.readers.is_empty() && o.writers.is_empty()));
    let receiver_runs: u64 = s.tasks.iter().filter(|t| t.name.contains("-r")).map(|t| t.stats.runtime_ns).sum();
    assert!(receiver_runs >= 2 * 3 * 3 * 40 * 1_500, "receivers ran {receiver_runs} ns");
}

#[test]
fn cyclictest_on_idle_machine_pays_only_the_wakeup_path() {
    let (_, r) = run("duration = \"1s\"\n[machine]\npreset = \"2cpu\"\ncstates = false\n[[workload]]\nkind = \"cyclictest\"\npriority = 99\ninterval = \"1ms\"\n");
    let l = r.workloads[0].latency.as_ref().unwrap();
    // Constant up to the histogram's 3 significant digits.
    assert!(l.max_ns - l.min_ns <= l.max_ns / 500, "idle machine latency must be constant: {} .. {}", l.min_ns, l.max_ns);
    // C-states off: IRQ + wakeup (1 us) + context switch (2 us); the idle CPU kept the task's mm.
    assert!((3_000..=3_010).contains(&l.max_ns), "{}", l.max_ns);
    // With C-states the deepest state's exit latency (130 us) is added.
    let (_, r) = run("duration = \"1s\"\n[machine]\npreset = \"2cpu\"\n[[workload]]\nkind = \"cyclictest\"\npriority = 99\ninterval = \"1ms\"\n");
    let l = r.workloads[0].latency.as_ref().unwrap();
    assert!(l.p50_ns > 130_000, "{}", l.p50_ns);
}

#[test]
fn sched_other_cyclictest_pays_timer_slack() {
    let (_, r) = run("duration = \"1s\"\n[machine]\npreset = \"2cpu\"\ncstates = false\n[[workload]]\nkind = \"cyclictest\"\ninterval = \"1ms\"\n");
    let l = r.workloads[0].latency.as_ref().unwrap();
    assert!(l.p50_ns >= 50_000 && l.p50_ns < 60_000, "{}", l.p50_ns);
}

#[test]
fn irq_off_windows_delay_wakeups() {
    let base = "duration = \"2s\"\n[machine]\npreset = \"1cpu\"\ncstates = false\n";
    let ct = "[[workload]]\nkind = \"cyclictest\"\npriority = 99\ninterval = \"1ms\"\nspikes_above = [\"10us\"]\n";
    let (_, quiet) = run(&format!("{base}{ct}"));
    let (s, noisy) = run(&format!("{base}[machine.irqoff]\nevery = \"exp:500us\"\nlength = \"30us\"\n{ct}"));
    let q = quiet.workloads[0].latency.as_ref().unwrap();
    let n = noisy.workloads[0].latency.as_ref().unwrap();
    assert!(q.max_ns < 5_000);
    // A timer that fires inside a window waits for its end: up to 30 us more.
    assert!(n.max_ns > 20_000 && n.max_ns <= 35_000, "max {}", n.max_ns);
    let spikes = noisy.workloads[0].thresholds[0].count;
    // Windows cover ~30/530 of the time: some percent of wakeups are hit.
    assert!(spikes > 20 && spikes < 300, "spikes {spikes}");
    assert!(s.irqoff.as_ref().unwrap().deferred[0] >= spikes);
}

#[test]
fn stress_cpu_counts_bogo_ops_on_every_cpu() {
    let (_, r) = run("duration = \"1s\"\n[machine]\npreset = \"4cpu\"\n[[workload]]\nkind = \"stress\"\nstressor = \"cpu\"\n");
    let w = &r.workloads[0];
    assert_eq!(w.tasks, 4);
    // 4 workers x 1000 ms / 1 ms per op, less switch overheads.
    assert!((3_950..=4_000).contains(&w.work), "{}", w.work);
    assert!(r.cpus.iter().all(|c| c.util_ppm > 990_000));
}

#[test]
fn stress_yield_alternates_yielders() {
    let (s, r) = run("duration = \"100ms\"\n[machine]\npreset = \"1cpu\"\n[[workload]]\nkind = \"stress\"\nstressor = \"yield\"\nworkers = 2\n");
    let w = &r.workloads[0];
    // Each yield hands the CPU to the other worker: a switch per op.
    let switches: u64 = s.tasks.iter().map(|t| t.stats.switches).sum();
    assert!(w.work > 10_000, "{}", w.work);
    assert!(switches + 2 >= w.work, "{switches} switches for {} yields", w.work);
    assert!(s.tasks[0].stats.work.abs_diff(s.tasks[1].stats.work) <= 2);
}

#[test]
fn stress_switch_ping_pongs_on_one_cpu() {
    let (s, r) = run("duration = \"100ms\"\n[machine]\npreset = \"2cpu\"\ncstates = false\n[[workload]]\nkind = \"stress\"\nstressor = \"switch\"\nworkers = 1\n");
    let w = &r.workloads[0];
    // One round trip: two 1 us ops and two switches of 2.5 us (different mm).
    let per_round = 2 * 1_000 + 2 * 2_500;
    let expect = 100_000_000 / per_round;
    assert!(w.work.abs_diff(expect) < expect / 20, "{} rounds, expected ~{expect}", w.work);
    assert!(s.tasks.iter().all(|t| t.cpu == 0 && t.stats.migrations == 0));
}

#[test]
fn stress_fork_storms_create_and_reap_children() {
    let (s, r) = run("duration = \"200ms\"\n[machine]\npreset = \"2cpu\"\n[[workload]]\nkind = \"stress\"\nstressor = \"fork\"\nworkers = 2\nburst = 10\npause = \"10ms\"\n");
    let w = &r.workloads[0];
    let children = s.tasks.iter().filter(|t| t.parent.is_some()).count() as u64;
    assert!(w.work >= 100, "{}", w.work);
    // Every reaped child exited; at most one per worker is still in flight.
    let exited = s.tasks.iter().filter(|t| t.parent.is_some() && t.exited_at.is_some()).count() as u64;
    assert!(children - exited <= 2 && exited >= w.work, "{children} children, {exited} exited, {} reaped", w.work);
    let parents: Vec<u32> = s.tasks.iter().filter(|t| t.parent.is_none()).map(|t| t.tgid).collect();
    assert!(s.tasks.iter().filter(|t| t.parent.is_some()).all(|t| !parents.contains(&t.tgid)), "children need their own process ids");
}
