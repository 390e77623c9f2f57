use crate::{run, runtime_of};

#[test]
fn rt_task_preempts_fair_at_once() {
    let (_, r) = run(r#"
duration = "1s"
[machine]
preset = "1cpu"
cstates = false
[[workload]]
kind = "hog"
count = 2
[[workload]]
kind = "cyclictest"
interval = "1ms"
priority = 80
"#);
    let lat = r.workloads[1].latency.as_ref().unwrap();
    // timer IRQ + wakeup (1 us) + context switch (2 us) + mm switch (0.5 us)
    assert!(lat.max_ns <= 5_000, "RT wakeup latency {} ns", lat.max_ns);
    assert!(lat.count >= 990);
}

#[test]
fn fifo_never_time_slices() {
    let (s, _) = run(r#"
duration = "2s"
[machine]
preset = "1cpu"
[scheduler]
rt_bandwidth = "off"
[[workload]]
kind = "hog"
name = "f"
count = 2
policy = "fifo"
priority = 10
"#);
    assert_eq!(runtime_of(&s, "f-1"), 0, "the second FIFO task must never run");
    assert!(runtime_of(&s, "f-0") > 1_990_000_000);
}

#[test]
fn rr_rotates_every_100ms() {
    let (s, _) = run(r#"
duration = "2s"
[machine]
preset = "1cpu"
[scheduler]
rt_bandwidth = "off"
[[workload]]
kind = "hog"
name = "r"
count = 2
policy = "rr"
priority = 10
"#);
    let a = runtime_of(&s, "r-0");
    let b = runtime_of(&s, "r-1");
    assert!(a.abs_diff(b) <= 110_000_000, "{a} vs {b}");
    let switches = s.tasks[0].stats.switches;
    // 2 s / 100 ms quanta = 20 quanta, 10 each.
    assert!((9..=11).contains(&switches), "switches {switches}");
}

#[test]
fn woken_rt_task_is_pushed_to_a_cpu_running_lower_priority_work() {
    // CPU 0 is owned by a FIFO 90 hog; CPU 1 runs a fair hog. A FIFO 50
    // periodic task that may run anywhere must land on CPU 1 and run at once.
    let (s, r) = run(r#"
duration = "1s"
[machine]
preset = "2cpu"
cstates = false
[scheduler]
rt_bandwidth = "off"
[[workload]]
kind = "hog"
name = "rt90"
policy = "fifo"
priority = 90
cpus = "0"
[[workload]]
kind = "hog"
name = "fair"
cpus = "1"
[[workload]]
kind = "cyclictest"
interval = "1ms"
priority = 50
"#);
    let lat = r.workloads[2].latency.as_ref().unwrap();
    assert!(lat.count >= 990, "the RT task must keep running: {} samples", lat.count);
    assert!(lat.max_ns < 10_000, "max latency {}", lat.max_ns);
    assert!(runtime_of(&s, "fair-0") + runtime_of(&s, "rt90-0") + runtime_of(&s, "cyclictest-0") > 0);
}

#[test]
fn fair_server_gives_fair_tasks_50ms_per_second() {
    let (s, _) = run(r#"
duration = "3s"
[machine]
preset = "1cpu"
[[workload]]
kind = "hog"
name = "rt"
policy = "fifo"
priority = 50
[[workload]]
kind = "hog"
name = "fair"
"#);
    let fair = runtime_of(&s, "fair-0");
    assert!((100_000_000..=200_000_000).contains(&fair), "fair runtime {fair}");
}
