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
fn hackbench_charges_the_machines_message_costs() {
    let hb = |ipc: &str, costs: &str| {
        let (s, r) = run(&format!("duration = \"10s\"\n[machine]\npreset = \"2cpu\"\n{costs}[[workload]]\nkind = \"hackbench\"\ngroups = 1\nfds = 4\nloops = 50\nmode = \"threads\"\nipc = \"{ipc}\"\n"));
        let runtime = |part: &str| s.tasks.iter().filter(|t| t.name.contains(part)).map(|t| t.stats.runtime_ns).sum::<u64>();
        (r.workloads[0].makespan_ns.unwrap(), runtime("-s"), runtime("-r"))
    };
    // 4 senders x 4 receivers x 50 loops = 800 messages, each written and read once.
    let msgs = 4 * 4 * 50;
    let (base, sent, recvd) = hb("socket", "");
    assert!(sent >= msgs * 2_500 && recvd >= msgs * 2_500, "{sent} {recvd}");
    // The socket costs move the socket run only, writes and reads apart.
    let (slow, sent_slow, recvd_slow) = hb("socket", "[machine.costs]\nmsg_write_socket = \"10us\"\nmsg_read_pipe = \"20us\"\n");
    assert!(slow > base, "makespan {slow} not above {base}");
    assert!(sent_slow >= msgs * 10_000, "{sent_slow}");
    // msg_read_pipe (20 us) is not a socket's: it would be 16 ms of reads.
    assert!(recvd_slow < msgs * 10_000, "{recvd_slow}");
    let (fast, _, recvd_fast) = hb("socket", "[machine.costs]\nmsg_read_socket = \"300ns\"\n");
    assert!(fast < base, "makespan {fast} not below {base}");
    assert!(recvd_fast < msgs * 2_500, "{recvd_fast}");
    // Pipes take the pipe costs; a workload's own write_cost still wins.
    let (pipe, _, _) = hb("pipe", "[machine.costs]\nmsg_write_pipe = \"10us\"\nmsg_read_pipe = \"10us\"\n");
    let (pipe_base, _, _) = hb("pipe", "");
    assert!(pipe > pipe_base, "{pipe} {pipe_base}");
    let (s, _) = run("duration = \"10s\"\n[machine]\npreset = \"2cpu\"\n[machine.costs]\nmsg_write_pipe = \"10us\"\n[[workload]]\nkind = \"hackbench\"\ngroups = 1\nfds = 2\nloops = 10\nipc = \"pipe\"\nwrite_cost = \"1us\"\n");
    let sent: u64 = s.tasks.iter().filter(|t| t.name.contains("-s")).map(|t| t.stats.runtime_ns).sum();
    assert!(sent < 2 * 2 * 10 * 10_000, "write_cost did not override the machine: senders ran {sent} ns");
}

#[test]
fn message_cost_fields_reject_bad_durations_by_name() {
    let text = "duration = \"1s\"\n[machine]\npreset = \"2cpu\"\n[machine.costs]\nmsg_read_socket = \"fast\"\n[[workload]]\nkind = \"hog\"\ncount = 1\n";
    let e = schedlab::workload::scenario::Scenario::parse(text, "bad-costs.toml", &[]).expect_err("a bad duration parsed").to_string();
    assert!(e.contains("bad-costs.toml") && e.contains("msg_read_socket"), "{e}");
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

/// The idle-machine wakeup path of a SCHED_FIFO timer sleeper, from the cost
/// model: the CPU leaves the idle state it reached (the deepest one whose
/// target residency the idle period covers), the timer IRQ wakes the task,
/// and the CPU switches to it (same mm: no mm switch).
fn idle_wakeup_path_ns(costs: &schedlab::machine::cost::CostModel, idle_ns: u64) -> u64 {
    costs.idle_exit_ns(idle_ns) + costs.wakeup_ns + costs.context_switch_ns
}

#[test]
fn cyclictest_idle_latency_is_exactly_the_wakeup_path() {
    let costs = schedlab::machine::cost::CostModel::default();
    for (interval_us, cstates) in [(1000, true), (200, true), (1000, false)] {
        let (s, r) = run(&format!(
            "duration = \"500ms\"\n[machine]\npreset = \"2cpu\"\ncstates = {cstates}\n[[workload]]\nkind = \"cyclictest\"\npriority = 99\ninterval = \"{interval_us}us\"\nhistogram = 400\n"
        ));
        let mut c = costs.clone();
        if !cstates {
            c.cstates_off();
        }
        // Idle for the interval less the loop body (1 us) and the wakeup path itself.
        let expect = idle_wakeup_path_ns(&c, interval_us * 1000 - 10_000);
        let w = &r.workloads[0];
        let x = w.latency_exact.as_ref().unwrap();
        eprintln!("cyclictest -i {interval_us} cstates={cstates}: min {} avg {} max {} (cost model {expect})", x.min_ns, x.avg_ns, x.max_ns);
        assert_eq!((x.min_ns, x.max_ns), (expect, expect), "interval {interval_us} us, C-states {cstates}");
        // Every sample in one 1-us bucket of the histogram.
        let h = w.histogram.as_ref().unwrap();
        let samples = w.latency.as_ref().unwrap().count;
        assert_eq!(h.counts[(expect / 1000) as usize], samples);
        assert_eq!(h.overflows, 0);
        assert!(samples >= 500_000 / interval_us - 1 && s.metrics[0].latency_max_ns == expect);
    }
    assert_eq!(idle_wakeup_path_ns(&costs, 990_000), 133_000, "C6 130 us + IRQ/wakeup 1 us + switch 2 us");
}

#[test]
fn cyclictest_histogram_overflows_duration_and_loops() {
    // 133 us latencies overflow a 100-us histogram.
    let base = "duration = \"1s\"\n[machine]\npreset = \"2cpu\"\n[[workload]]\nkind = \"cyclictest\"\npriority = 99\nthreads = 2\ninterval = \"1ms\"\ndistance = \"0us\"\n";
    let (s, r) = run(&format!("{base}histogram = 100\nduration = \"100ms\"\n"));
    let w = &r.workloads[0];
    let h = w.histogram.as_ref().unwrap();
    assert_eq!(h.counts.iter().sum::<u64>(), 0);
    // -D 100ms at -i 1000: 100 cycles per thread, then the threads exit.
    assert_eq!(h.overflows, 200);
    assert!(s.tasks.iter().all(|t| t.exited_at.is_some_and(|e| e <= 101_000_000)));
    let (_, r) = run(&format!("{base}loops = 7\n"));
    assert_eq!(r.workloads[0].latency.as_ref().unwrap().count, 14);
    for (field, bad) in [("histogram", "0"), ("loops", "0"), ("duration", "\"0s\"")] {
        let text = format!("{base}{field} = {bad}\n");
        let s = schedlab::workload::scenario::Scenario::parse(&text, "t.toml", &[]).unwrap();
        let e = schedlab::workload::world::build(&s, "t.toml").err().unwrap().to_string();
        assert!(e.contains(&format!("workload.0.{field}")), "{e}");
    }
}

#[test]
fn hackbench_message_counts_match_the_definition() {
    // Each of groups x fds senders sends `loops` messages to each of the
    // group's fds receivers: groups * fds * fds * loops messages.
    for (groups, fds, loops, mode, ipc) in [(2, 3, 40, "threads", "pipe"), (1, 5, 20, "process", "socket"), (3, 2, 10, "process", "pipe")] {
        let (s, r) = run(&format!(
            "duration = \"10s\"\n[machine]\npreset = \"4cpu\"\n[[workload]]\nkind = \"hackbench\"\ngroups = {groups}\nfds = {fds}\nloops = {loops}\nmode = \"{mode}\"\nipc = \"{ipc}\"\ndatasize = 512\n"
        ));
        let w = &r.workloads[0];
        assert!(w.finished);
        assert_eq!(w.tasks, groups * fds * 2);
        assert_eq!(w.work, (groups * fds * fds * loops) as u64, "messages received");
        for t in s.tasks.iter().filter(|t| t.name.contains("-r")) {
            assert_eq!(t.stats.work, (fds * loops) as u64, "{}", t.name);
        }
        let pids: std::collections::BTreeSet<u32> = s.tasks.iter().map(|t| t.tgid).collect();
        assert_eq!(pids.len(), if mode == "threads" { 1 } else { (groups * fds * 2) as usize });
    }
}

const SCHBENCH: &str = "duration = \"2s\"\n[machine]\npreset = \"4cpu\"\ncstates = false\n[[workload]]\nkind = \"schbench\"\nthreads = 4\ncache_footprint_kb = 64\n";

#[test]
fn schbench_message_mode_reports_wakeup_and_request_latency() {
    let (s, r) = run(&SCHBENCH.replace("2s", "500ms"));
    let w = &r.workloads[0];
    assert_eq!(w.tasks, 5);
    let wake = w.latency.as_ref().unwrap();
    let req = w.request_latency.as_ref().unwrap();
    // A request: usleep(100) + 5 multiplications of sqrt(64K/24)^3 = 140608 ns.
    let floor = 100_000 + 5 * 140_608;
    assert!(req.min_ns >= floor, "request min {} < {floor}", req.min_ns);
    assert!(wake.count > 100 && wake.p50_ns < 100_000, "{wake:?}");
    assert!(w.requests_per_s.unwrap() > 1_000, "{:?}", w.requests_per_s);
    // Every request took a per-CPU lock.
    let acquired: u64 = s.locks.iter().map(|l| l.acquisitions).sum();
    assert_eq!(s.locks.len(), 4);
    assert!(acquired >= w.work && acquired <= w.work + 4);
}

#[test]
fn schbench_rps_reaches_the_requested_rate_below_capacity() {
    // Capacity: 4 CPUs / ~0.8 ms per request ~ 5000 requests/s.
    let (_, r) = run(&format!("{SCHBENCH}rps = 2000\n"));
    let w = &r.workloads[0];
    let rate = w.requests_per_s.unwrap();
    eprintln!("schbench -R 2000: {rate} requests/s, request p99 {} ns, wakeup p99 {} ns", w.request_latency.as_ref().unwrap().p99_ns, w.latency.as_ref().unwrap().p99_ns);
    assert!(rate.abs_diff(2000) <= 60, "{rate} requests/s for -R 2000");
    // Above capacity the rate is bounded by the CPUs.
    let (_, r) = run(&format!("{SCHBENCH}rps = 20000\n"));
    let rate = r.workloads[0].requests_per_s.unwrap();
    eprintln!("schbench -R 20000: {rate} requests/s");
    assert!(rate < 6_000 && rate > 3_000, "{rate}");
}

#[test]
fn stress_yield_defaults_to_two_yielders_per_cpu() {
    let (_, r) = run("duration = \"20ms\"\n[machine]\npreset = \"4cpu\"\n[[workload]]\nkind = \"stress\"\nstressor = \"yield\"\n");
    assert_eq!(r.workloads[0].tasks, 8);
    let (_, r) = run("duration = \"20ms\"\n[machine]\npreset = \"4cpu\"\n[[workload]]\nkind = \"stress\"\nstressor = \"cpu\"\n");
    assert_eq!(r.workloads[0].tasks, 4);
}

#[test]
fn mixed_load_has_every_ingredient() {
    let (s, r) = run("duration = \"300ms\"\n[machine]\ncpus = 8\ncstates = false\n[[workload]]\nkind = \"mixed\"\nfork_pause = \"50ms\"\nfork_burst = 5\n");
    let start: Vec<_> = s.tasks.iter().filter(|t| t.parent.is_none()).collect();
    let count = |part: &str| start.iter().filter(|t| t.name.contains(part)).count();
    // 2 x 8 CPUs = 16 steady threads: 2 yielders, 2 switch pairs, 10 hogs.
    assert_eq!((count("-hog-"), count("-yield-"), count("-switch-")), (10, 2, 4));
    assert_eq!(count("-fifo-"), 1);
    assert!(start.iter().any(|t| t.policy == schedlab::sched::task::Policy::Fifo && t.rt_priority == 50));
    let nices: std::collections::BTreeSet<i32> = start.iter().map(|t| t.nice).collect();
    assert!(nices.len() >= 4, "{nices:?}");
    assert!(s.tasks.iter().filter(|t| t.parent.is_some()).count() >= 10, "fork storms");
    assert!(r.workloads[0].work > 1000);
    let e = schedlab::workload::world::build(
        &schedlab::workload::scenario::Scenario::parse("duration = \"1s\"\n[[workload]]\nkind = \"mixed\"\noversubscription = 0.5\n", "t.toml", &[]).unwrap(),
        "t.toml",
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("workload.0.oversubscription") && e.contains("no room for hogs"), "{e}");
}

#[test]
fn server_serves_requests_in_a_closed_loop() {
    let (s, r) = run("duration = \"500ms\"\n[machine]\ncpus = 8\n[[workload]]\nkind = \"server\"\ninstances = 2\nthreads = 3\nwork = \"50us\"\ndispatch = \"5us\"\nconnections = 2\n");
    let w = &r.workloads[0];
    assert_eq!(w.tasks, 6);
    let req = w.request_latency.as_ref().unwrap();
    // A request: dispatch, the worker's 50 us, the reply.
    assert!(req.min_ns >= 50_000, "{req:?}");
    // Requests completed = latencies recorded + those still in flight.
    assert!(w.work >= req.count && w.work <= req.count + 4, "{} vs {}", w.work, req.count);
    // 2 instances x 2 workers busy 50 us per request: at most 80000/s.
    let rate = w.requests_per_s.unwrap();
    eprintln!("server 2x3 threads: {rate} requests/s, p50 {} ns", req.p50_ns);
    assert!(rate > 20_000 && rate <= 80_000, "{rate}");
    // Each process's threads share its pid and working set.
    assert_eq!(s.tasks.iter().map(|t| t.tgid).collect::<std::collections::BTreeSet<_>>().len(), 2);
    assert!(s.tasks.iter().all(|t| t.working_set == 4 << 20));
}
