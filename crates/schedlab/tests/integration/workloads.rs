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
