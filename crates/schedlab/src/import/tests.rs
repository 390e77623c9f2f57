//! Tests of the trace readers and the task model.

use super::events::{Kind, LeftAs};
use super::model::{derive, Step, WokenBy};
use super::{detect, read, Format};

/// Two tasks ping-ponging on CPU 0 (a wakes b, b wakes a), one task on
/// CPU 1 sleeping on a timer (woken with the idle task current), then
/// preempted once and exiting.
pub(super) const PINGPONG: &str = "\
# tracer: nop
#
          <idle>-0       [000] d..2.  100.000000: sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=ping pid next_pid=10 next_prio=120
          <idle>-0       [001] d..2.  100.000000: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=tick next_pid=30 next_prio=115
       ping pid-10      [000] d..3.  100.002000: sched_waking: comm=pong pid=20 prio=120 target_cpu=000
       ping pid-10      [000] d..3.  100.002000: sched_wakeup: comm=pong pid=20 prio=120 target_cpu=000
       ping pid-10      [000] d..2.  100.003000: sched_switch: prev_comm=ping pid prev_pid=10 prev_prio=120 prev_state=S ==> next_comm=pong next_pid=20 next_prio=120
            tick-30      [001] d..2.  100.001000: sched_switch: prev_comm=tick prev_pid=30 prev_prio=115 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
          <idle>-0       [001] dNh3.  100.011000: sched_waking: comm=tick pid=30 prio=115 target_cpu=001
          <idle>-0       [001] d..2.  100.011000: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=tick next_pid=30 next_prio=115
            pong-20      [000] d..3.  100.004000: sched_waking: comm=ping pid pid=10 prio=120 target_cpu=000
            pong-20      [000] d..2.  100.005000: sched_switch: prev_comm=pong prev_pid=20 prev_prio=120 prev_state=S ==> next_comm=ping pid next_pid=10 next_prio=120
            tick-30      [001] d..2.  100.012000: sched_switch: prev_comm=tick prev_pid=30 prev_prio=115 prev_state=R+ ==> next_comm=kworker/1:1 next_pid=40 next_prio=120
     kworker/1:1-40      [001] d..2.  100.013000: sched_switch: prev_comm=kworker/1:1 prev_pid=40 prev_prio=120 prev_state=I ==> next_comm=tick next_pid=30 next_prio=115
            tick-30      [001] d..2.  100.015000: sched_switch: prev_comm=tick prev_pid=30 prev_prio=115 prev_state=X ==> next_comm=swapper/1 next_pid=0 next_prio=120
       ping pid-10      [000] d..2.  100.006000: sched_switch: prev_comm=ping pid prev_pid=10 prev_prio=120 prev_state=D ==> next_comm=swapper/0 next_pid=0 next_prio=120
";

#[test]
fn tracefs_text_is_detected_and_read_in_time_order() {
    assert_eq!(detect(PINGPONG.as_bytes()), Ok(Format::TracefsText));
    let ev = read(PINGPONG.as_bytes()).unwrap();
    assert!(ev.windows(2).all(|w| w[0].ts_ns <= w[1].ts_ns));
    // sched_wakeup is dropped when sched_waking is there: 3 wakes, 10 switches.
    assert_eq!(ev.iter().filter(|e| matches!(e.kind, Kind::Wake { .. })).count(), 3);
    assert_eq!(ev.iter().filter(|e| matches!(e.kind, Kind::Switch { .. })).count(), 10);
    let Kind::Switch { prev, left, .. } = &ev.iter().find(|e| e.ts_ns == 100_003_000_000).unwrap().kind else { panic!("not a switch") };
    assert_eq!((prev.pid, prev.comm.as_str(), *left), (10, "ping pid", LeftAs::Blocked));
}

#[test]
fn the_model_keeps_bursts_timer_sleeps_wakers_and_exits() {
    let tasks = derive(&read(PINGPONG.as_bytes()).unwrap(), None);
    let pids: Vec<i32> = tasks.iter().map(|t| t.pid).collect();
    assert_eq!(pids, [10, 20, 30, 40]);
    let ping = &tasks[0];
    assert_eq!(ping.comm, "ping pid");
    assert_eq!(
        ping.steps,
        [
            Step::Run(2_000_000),
            Step::Wake(20),
            Step::Run(1_000_000),
            Step::Sleep { ns: 1_000_000, by: WokenBy::Task(20) },
            Step::Run(1_000_000),
        ]
    );
    let pong = &tasks[1];
    assert_eq!(pong.start_ns, 2_000_000);
    // First seen woken by ping: it starts by waiting for ping.
    assert_eq!(pong.steps, [Step::Sleep { ns: 0, by: WokenBy::Task(10) }, Step::Run(1_000_000), Step::Wake(10), Step::Run(1_000_000)]);
    // Sleep from 1 ms to its timer wakeup at 11 ms; a preemption at 12 ms
    // does not split the burst; exits at 15 ms after 1 + 1 + 2 ms of CPU.
    let tick = &tasks[2];
    assert_eq!(tick.prio, 115);
    assert_eq!(tick.steps, [Step::Run(1_000_000), Step::Sleep { ns: 10_000_000, by: WokenBy::Timer }, Step::Run(3_000_000), Step::Exit]);
    assert_eq!(tick.cpu_ns(), 4_000_000);
}

#[test]
fn a_window_keeps_only_its_events() {
    let ev = read(PINGPONG.as_bytes()).unwrap();
    let tasks = derive(&ev, Some((100_010_000_000, 100_014_000_000)));
    let pids: Vec<i32> = tasks.iter().map(|t| t.pid).collect();
    assert_eq!(pids, [30, 40]);
    // Times count from the first event in the window (the timer wakeup at
    // 11 ms); tick runs 11-12 ms, is preempted, and is back at 13 ms, the
    // window's last event: 1 ms of CPU. A timer wakeup of a task not seen
    // before is no dependency.
    assert_eq!(tasks[0].start_ns, 0);
    assert_eq!(tasks[0].steps, [Step::Run(1_000_000)]);
    assert_eq!(tasks[1].start_ns, 1_000_000);
    assert_eq!(tasks[1].steps, [Step::Run(1_000_000)]);
}

#[test]
fn bad_traces_name_the_offset_and_what_was_expected() {
    let e = detect(b"\x00\x01\xffperfetto").unwrap_err();
    assert_eq!(e.offset, 2);
    assert!(e.expected.contains("text trace"), "{e}");
    let e = detect(b"hello\nworld\n").unwrap_err();
    assert!(e.to_string().starts_with("at byte 0: expected tracefs"), "{e}");
    // A sched_switch line cut short: the error points at its first byte.
    let good = PINGPONG.lines().nth(2).unwrap();
    let text = format!("{good}\n          ping-10 [000] d..2. 100.1: sched_switch: prev_comm=ping prev_pid=10\n");
    let e = read(text.as_bytes()).unwrap_err();
    assert_eq!(e.offset, good.len() + 1);
    assert!(e.expected.contains("sched_switch"), "{e}");
    // Only wakeups: no switch to derive runs from.
    let waking = PINGPONG.lines().nth(4).unwrap();
    let e = read(waking.as_bytes()).unwrap_err();
    assert!(e.expected.contains("sched_switch"), "{e}");
}

/// Two hogs taking turns on CPU 0 every 10 ms for 1 s, with CPU 1 idle all
/// along, are pinned to CPU 0; a task that ran on both CPUs is not.
#[test]
fn tasks_kept_waiting_beside_an_idle_cpu_are_taken_as_pinned() {
    use super::events::{SchedEvent, TraceTask};
    let t = |pid: i32| TraceTask { pid, comm: format!("t{pid}"), prio: 120 };
    let sw = |ts: u64, cpu: u32, prev: i32, left: LeftAs, next: i32| SchedEvent { ts_ns: ts, cpu, kind: Kind::Switch { prev: t(prev), left, next: t(next) } };
    let mut ev = vec![sw(0, 1, 0, LeftAs::Preempted, 3), sw(1_000, 1, 3, LeftAs::Blocked, 0), sw(2_000, 0, 3, LeftAs::Blocked, 1)];
    for i in 1..100u64 {
        let (a, b) = if i % 2 == 1 { (1, 2) } else { (2, 1) };
        ev.push(sw(i * 10_000_000, 0, a, LeftAs::Preempted, b));
    }
    let tasks = derive(&ev, None);
    let pinned: Vec<(i32, Option<Vec<u32>>)> = tasks.iter().map(|m| (m.pid, m.pinned.clone())).collect();
    assert_eq!(pinned, [(1, Some(vec![0])), (2, Some(vec![0])), (3, None)]);
    // Runnable from their start to the end: CPU hogs, not cut bursts.
    assert!(tasks[0].runnable_at_end && tasks[1].runnable_at_end && !tasks[2].runnable_at_end);
}
