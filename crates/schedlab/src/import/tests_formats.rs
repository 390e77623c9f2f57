//! Tests of the Perfetto and perf script readers and of the replay scenario.

use super::events::{Kind, LeftAs};
use super::model::{derive, Step, WokenBy};
use super::replay::{fmt_us, scenario, Options};
use super::{detect, read, Format};
use crate::results::trace::{PerfettoWriter, WakeKind, Waker, Who};

/// A Vec<u8> the writer can own while the test keeps a handle.
#[derive(Clone, Default)]
struct Buf(std::rc::Rc<std::cell::RefCell<Vec<u8>>>);

impl std::io::Write for Buf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// schedlab's own writer: a pings b (wake), b runs and sleeps, a exits.
fn own_trace() -> Vec<u8> {
    let buf = Buf::default();
    let mut w = PerfettoWriter::new(Box::new(buf.clone()), 2, None);
    let (idle, a, b) = (Who { pid: 0, comm: "swapper", prio: 120 }, Who { pid: 1, comm: "a", prio: 120 }, Who { pid: 2, comm: "b", prio: 125 });
    w.switch(1_000, 0, idle, 0, a);
    w.wake(3_000_000, 0, Waker { pid: 1, irq_flags: 0 }, WakeKind::Waking, b, 1);
    w.switch(3_100_000, 1, idle, 0, b);
    w.switch(4_000_000, 1, b, 1, idle);
    w.switch(5_000_000, 0, a, 0x10, idle);
    w.finish_at(6_000_000).unwrap();
    drop(w);
    let v = buf.0.borrow().clone();
    v
}

#[test]
fn schedlabs_own_perfetto_trace_reads_back() {
    let data = own_trace();
    assert_eq!(detect(&data), Ok(Format::Perfetto));
    let ev = read(&data).unwrap();
    assert_eq!(ev.len(), 5);
    let Kind::Wake { task, waker, new } = &ev[1].kind else { panic!("{:?}", ev[1]) };
    assert_eq!((task.pid, task.comm.as_str(), task.prio, *waker, *new), (2, "b", 125, 1, false));
    let Kind::Switch { prev, left, .. } = &ev[4].kind else { panic!() };
    assert_eq!((prev.pid, *left), (1, LeftAs::Dead));
    let tasks = derive(&ev, None);
    assert_eq!(tasks[0].steps, [Step::Run(2_999_000), Step::Wake(2), Step::Run(2_000_000), Step::Exit]);
    assert_eq!(tasks[1].steps, [Step::Sleep { ns: 0, by: WokenBy::Task(1) }, Step::Run(900_000)]);
}

/// Protobuf by hand: a key, a varint, a length-delimited field.
fn pb_key(out: &mut Vec<u8>, field: u32, wire: u8) {
    pb_varint(out, ((field as u64) << 3) | wire as u64);
}
fn pb_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}
fn pb_bytes(out: &mut Vec<u8>, field: u32, b: &[u8]) {
    pb_key(out, field, 2);
    pb_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}
fn pb_packed(out: &mut Vec<u8>, field: u32, v: &[i64]) {
    let mut b = Vec::new();
    for &x in v {
        pb_varint(&mut b, x as u64);
    }
    pb_bytes(out, field, &b);
}

#[test]
fn traceds_compact_sched_reads_with_implied_prev_and_waker() {
    // CPU 0: 1 ms swapper -> t10 (comm "x"), 3 ms t10 -> idle (S); a
    // waking of t20 at 2 ms (current: t10, the waker).
    let mut cs = Vec::new();
    pb_bytes(&mut cs, 5, b"x");
    pb_bytes(&mut cs, 5, b"swapper/0");
    pb_bytes(&mut cs, 5, b"y");
    pb_packed(&mut cs, 1, &[1_000_000, 2_000_000]);
    pb_packed(&mut cs, 2, &[0, 1]);
    pb_packed(&mut cs, 3, &[10, 0]);
    pb_packed(&mut cs, 4, &[120, 120]);
    pb_packed(&mut cs, 6, &[0, 1]);
    pb_packed(&mut cs, 7, &[2_000_000]);
    pb_packed(&mut cs, 8, &[20]);
    pb_packed(&mut cs, 9, &[0]);
    pb_packed(&mut cs, 10, &[-1i32 as i64 + 121]);
    pb_packed(&mut cs, 11, &[2]);
    let mut bundle = Vec::new();
    pb_key(&mut bundle, 1, 0);
    pb_varint(&mut bundle, 0);
    pb_bytes(&mut bundle, 4, &cs);
    let mut packet = Vec::new();
    pb_bytes(&mut packet, 1, &bundle);
    let mut trace = Vec::new();
    pb_bytes(&mut trace, 1, &packet);
    let ev = read(&trace).unwrap();
    assert_eq!(ev.len(), 3);
    let Kind::Wake { task, waker, .. } = &ev[1].kind else { panic!("{ev:?}") };
    assert_eq!((task.pid, task.comm.as_str(), *waker), (20, "y", 10));
    let Kind::Switch { prev, left, next } = &ev[2].kind else { panic!() };
    assert_eq!((prev.pid, prev.comm.as_str(), *left, next.pid), (10, "x", LeftAs::Blocked, 0));

    // Cut short: the error names the offset of the packet that overruns.
    let e = read(&trace[..trace.len() - 3]).unwrap_err();
    assert_eq!(e.offset, 0);
    assert!(e.expected.contains("length-delimited"), "{e}");
}

const PERF: &str = "\
            perf 1000 [000]   10.000000:       sched:sched_switch: prev_comm=perf prev_pid=1000 prev_prio=120 prev_state=S ==> next_comm=app next_pid=11 next_prio=120
             app    11 [000]   10.002000:       sched:sched_process_fork: comm=app pid=11 child_comm=app child_pid=12
             app    11 [000]   10.002500:       sched:sched_wakeup_new: comm=app pid=12 prio=120 target_cpu=001
         swapper     0 [001]   10.003000:       sched:sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=app next_pid=12 next_prio=120
             app 11/12 [001]   10.004000:       sched:sched_process_exit: comm=app pid=12 prio=120
             app    12 [001]   10.004000:       sched:sched_switch: prev_comm=app prev_pid=12 prev_prio=120 prev_state=X ==> next_comm=swapper/1 next_pid=0 next_prio=120
";

#[test]
fn perf_script_reads_forks_and_exits() {
    assert_eq!(detect(PERF.as_bytes()), Ok(Format::PerfScript));
    let ev = read(PERF.as_bytes()).unwrap();
    assert_eq!(ev.len(), 6);
    let tasks = derive(&ev, None);
    let app = tasks.iter().find(|t| t.pid == 11).unwrap();
    assert_eq!(app.steps, [Step::Run(2_000_000), Step::Fork(12), Step::Run(2_000_000)]);
    let kid = tasks.iter().find(|t| t.pid == 12).unwrap();
    assert_eq!(kid.steps, [Step::Sleep { ns: 0, by: WokenBy::Task(11) }, Step::Run(1_000_000), Step::Exit]);
    // A sched line cut short: its offset.
    let first = PERF.lines().next().unwrap();
    let bad = format!("{first}\n  app 11 [000] 10.1: sched:sched_switch: prev_comm=app\n");
    let e = read(bad.as_bytes()).unwrap_err();
    assert_eq!(e.offset, first.len() + 1);
    assert!(e.expected.contains("perf script line"), "{e}");
}

#[test]
fn the_scenario_is_readable_deterministic_and_runs() {
    let ev = read(PERF.as_bytes()).unwrap();
    let keep = |_: &super::model::TaskModel| true;
    let o = Options { window: None, keep: &keep, source: "perf.txt", name: "t", groups: &Default::default() };
    let (text, n) = scenario(&ev, &o);
    // perf itself only leaves the CPU (no run seen): not a task to replay.
    assert_eq!(n, 2);
    assert_eq!(text, scenario(&ev, &o).0, "same trace, same bytes");
    // Runnable from the first event to the last: a task that runs on.
    assert!(text.contains("steps = [\"run 2ms\", \"fork app [12]\", \"run to end\"]"), "{text}");
    assert!(text.contains("steps = [\"wait app [11]\", \"run 1ms\", \"exit\"]"), "{text}");
    let s = crate::workload::scenario::Scenario::parse(&text, "t.toml", &[]).unwrap();
    let run = || {
        let mut sim = crate::workload::world::build(&s, "t.toml").unwrap();
        sim.run_until(s.duration.0);
        sim.tasks.iter().map(|t| t.se.sum_exec_runtime).collect::<Vec<_>>()
    };
    let a = run();
    assert_eq!(a, run());
    assert!(a[1] >= 1_000_000 && a.iter().sum::<u64>() >= 3_900_000, "the child ran after the fork: {a:?}");
    // Leaving the parent out: the child's wait becomes a timed sleep.
    let keep = |m: &super::model::TaskModel| m.pid != 11;
    let (text, _) = scenario(&ev, &Options { keep: &keep, ..o });
    assert!(text.contains("steps = [\"run 1ms\", \"exit\"]"), "{text}");
}

#[test]
fn durations_are_exact_to_the_microsecond() {
    assert_eq!(fmt_us(850_000), "850us");
    assert_eq!(fmt_us(2_250_000), "2.25ms");
    assert_eq!(fmt_us(1_500_001_000), "1.500001s");
    assert_eq!(fmt_us(3_000_000_000), "3s");
    for ns in [1_000, 999_000, 1_234_567_000, 61_000_000_000] {
        assert_eq!(crate::engine::time::parse_duration(&fmt_us(ns)), Ok(ns));
    }
}

/// Deterministic mutations of small traces of each format (flipped,
/// inserted and deleted bytes) never panic a reader, the model or the
/// scenario writer, and what they write parses.
#[test]
fn mutated_traces_never_panic() {
    let n: u64 = std::env::var("SCHEDLAB_IMPORT_MUTATIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(300);
    let seeds = [own_trace(), PERF.as_bytes().to_vec(), super::tests::PINGPONG.as_bytes().to_vec()];
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut built = 0;
    for i in 0..n * seeds.len() as u64 {
        let mut d = seeds[(i % seeds.len() as u64) as usize].clone();
        for _ in 0..1 + rnd() % 4 {
            let at = (rnd() as usize) % d.len().max(1);
            match rnd() % 3 {
                0 if !d.is_empty() => d[at] ^= 1 << (rnd() % 8),
                1 => d.insert(at.min(d.len()), rnd() as u8),
                _ if !d.is_empty() => {
                    d.remove(at);
                }
                _ => {}
            }
        }
        let Ok(ev) = read(&d) else { continue };
        let _ = derive(&ev, Some((ev[0].ts_ns, ev[0].ts_ns + 1_000_000)));
        let keep = |_: &super::model::TaskModel| true;
        let (text, n) = scenario(&ev, &Options { window: None, keep: &keep, source: "m", name: "m", groups: &Default::default() });
        if n > 0 {
            let s = crate::workload::scenario::Scenario::parse(&text, "m.toml", &[]).unwrap_or_else(|e| panic!("{e}\n{text}"));
            if ev.iter().all(|e| e.cpu < 64) {
                built += crate::workload::world::build(&s, "m.toml").map(|_| 1).unwrap_or_else(|e| panic!("{e}\n{text}"));
            }
        }
    }
    assert!(built >= n / 4, "mutations that still read and build: {built} of {}", n * 3);
}

/// A wakeup in an interrupt (a timer's, on whatever task the interrupt came
/// in on) has no task for waker, in text and in Perfetto traces: the sleep
/// ends on time in the replay instead of waiting for the interrupted task.
#[test]
fn a_wakeup_in_an_interrupt_is_no_dependency_on_the_interrupted_task() {
    let text = "\
 a-1 [000] d..2.  100.000000: sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=a next_pid=1 next_prio=120
 b-2 [001] d..2.  100.000000: sched_switch: prev_comm=b prev_pid=2 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
 a-1 [000] d.h2.  100.001000: sched_waking: comm=b pid=2 prio=120 target_cpu=001
 a-1 [000] d..2.  100.002000: sched_waking: comm=b pid=2 prio=120 target_cpu=001
";
    let ev = read(text.as_bytes()).unwrap();
    let wakers: Vec<i32> = ev.iter().filter_map(|e| if let Kind::Wake { waker, .. } = e.kind { Some(waker) } else { None }).collect();
    assert_eq!(wakers, [0, 1], "in the hardirq (h) the waker is no task; in task context it is a");
    let buf = Buf::default();
    let mut w = PerfettoWriter::new(Box::new(buf.clone()), 2, None);
    let (idle, a, b) = (Who { pid: 0, comm: "swapper", prio: 120 }, Who { pid: 1, comm: "a", prio: 120 }, Who { pid: 2, comm: "b", prio: 120 });
    w.switch(1_000, 0, idle, 0, a);
    w.switch(1_000, 1, b, 1, idle);
    w.wake(1_000_000, 0, Waker { pid: 1, irq_flags: crate::import::tracefs_line::TRACE_FLAG_HARDIRQ }, WakeKind::Waking, b, 1);
    w.switch(1_100_000, 1, idle, 0, b);
    w.finish_at(2_000_000).unwrap();
    drop(w);
    let data = buf.0.borrow().clone();
    let ev = read(&data).unwrap();
    let tasks = derive(&ev, None);
    let b = tasks.iter().find(|t| t.pid == 2).unwrap();
    assert_eq!(b.steps[0], Step::Sleep { ns: 999_000, by: WokenBy::Timer });
    assert!(!tasks.iter().find(|t| t.pid == 1).unwrap().steps.iter().any(|s| matches!(s, Step::Wake(_))));
}

/// The task groups real mode writes (sessions' autogroups) read back, and
/// each becomes a cgroup of the replay holding its tasks.
#[test]
fn task_groups_read_back_and_become_cgroups() {
    use crate::results::trace::TaskGroup;
    let buf = Buf::default();
    let mut w = PerfettoWriter::new(Box::new(buf.clone()), 1, None);
    let (idle, a, b) = (Who { pid: 0, comm: "swapper", prio: 120 }, Who { pid: 1, comm: "a", prio: 120 }, Who { pid: 2, comm: "b", prio: 139 });
    w.switch(1_000, 0, idle, 0, a);
    w.switch(2_000_000, 0, a, 1, b);
    w.switch(4_000_000, 0, b, 1, idle);
    w.task_groups(&[TaskGroup { path: "/autogroup-5".into(), weight: 100, tids: vec![1] }, TaskGroup { path: "/autogroup-9".into(), weight: 3, tids: vec![2] }]);
    w.finish_at(5_000_000).unwrap();
    drop(w);
    let data = buf.0.borrow().clone();
    let groups = super::task_groups(&data).unwrap();
    assert_eq!(groups[&1], ("/autogroup-5".to_string(), 100));
    assert_eq!(groups[&2], ("/autogroup-9".to_string(), 3));
    let ev = read(&data).unwrap();
    let keep = |_: &super::model::TaskModel| true;
    let (text, n) = scenario(&ev, &Options { window: None, keep: &keep, source: "t", name: "t", groups: &groups });
    assert_eq!(n, 2);
    assert!(text.contains("[[cgroup]]\npath = \"/autogroup-9\"\nweight = 3\n"), "{text}");
    assert!(text.contains("name = \"b\"\npid = 2\nnice = 19\ncgroup = \"/autogroup-9\"\n"), "{text}");
    crate::workload::scenario::Scenario::parse(&text, "t.toml", &[]).unwrap_or_else(|e| panic!("{e}\n{text}"));
}
