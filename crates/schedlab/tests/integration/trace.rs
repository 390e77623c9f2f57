//! The Perfetto trace, decoded again (tests/common/perfetto.rs) and checked
//! event by event against the simulation.

use std::cell::RefCell;
use std::io::Write;
use std::rc::Rc;

use crate::perfetto::{decode, per_cpu, FtraceEvent, Trace};
use schedlab::results::trace::{PerfettoWriter, PrevState, Recorder, TraceEvent, trace_pid};

/// A writer into a shared buffer.
#[derive(Clone, Default)]
struct Shared(Rc<RefCell<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Mixed load with forks, sleeps, preemption and migrations on 4 CPUs.
const SCENARIO: &str = r#"
duration = "60ms"
[machine]
preset = "4cpu"
[[workload]]
kind = "hog"
name = "hogs"
count = 6
nice = [0, 5, 0, 5, 0, 5]
run = "exp:2ms"
sleep = "exp:1ms"
[[workload]]
kind = "cyclictest"
threads = 2
interval = "1ms"
[[workload]]
kind = "hackbench"
groups = 1
fds = 2
loops = 20
mode = "process"
"#;

/// Runs `toml` with a Perfetto writer (optionally windowed) and a recorder.
fn traced(toml: &str, window: Option<(u64, u64)>) -> (schedlab::sched::sim::Sim, Vec<(u64, TraceEvent)>, Trace) {
    let mut sim = crate::sim(toml);
    let buf = Shared::default();
    let rec = Recorder::default();
    let n = sim.nr_cpus();
    sim.add_trace_sink(Box::new(PerfettoWriter::new(Box::new(buf.clone()), n, window)));
    sim.add_trace_sink(Box::new(rec.clone()));
    sim.run();
    sim.finish_trace().unwrap();
    let bytes = buf.0.borrow().clone();
    let trace = decode(&bytes);
    let events = rec.0.borrow().clone();
    (sim, events, trace)
}

fn pid(p: Option<u32>) -> i32 {
    trace_pid(p) as i32
}

#[test]
fn perfetto_trace_matches_the_simulation_event_by_event() {
    let (sim, events, trace) = traced(SCENARIO, None);
    let n = sim.nr_cpus();
    let decoded = per_cpu(&trace, n);
    // Every recorded event is in the file, on its CPU, in order, with its fields.
    let mut next = vec![0usize; n];
    for (ts, ev) in &events {
        let c = ev.cpu() as usize;
        let d = &decoded[c][next[c]];
        next[c] += 1;
        assert_eq!(d.timestamp, Some(*ts));
        match *ev {
            TraceEvent::Switch { prev, prev_state, next, .. } => {
                let s = d.sched_switch.as_ref().expect("a sched_switch");
                assert_eq!(s.prev_pid, Some(pid(prev)));
                assert_eq!(s.next_pid, Some(pid(next)));
                assert_eq!(d.pid, Some(pid(prev) as u32), "the event's pid is the task switched out");
                assert_eq!(s.prev_state, Some(prev_state.kernel_bits()));
                let name = |p: Option<u32>| p.map_or(format!("swapper/{c}"), |p| sim.task(p).name.clone());
                assert_eq!(s.prev_comm.as_deref(), Some(name(prev).as_str()));
                assert_eq!(s.next_comm.as_deref(), Some(name(next).as_str()));
                if let Some(p) = next {
                    assert_eq!(s.next_prio, Some(sim.task(p).prio));
                }
            }
            TraceEvent::Waking { waker, task, target_cpu, .. } | TraceEvent::WakeupNew { waker, task, target_cpu, .. } => {
                let w = if matches!(ev, TraceEvent::Waking { .. }) { d.sched_waking.as_ref() } else { d.sched_wakeup_new.as_ref() };
                let w = w.expect("the matching wakeup event");
                assert_eq!(w.pid, Some(pid(Some(task))));
                assert_eq!(w.target_cpu, Some(target_cpu as i32));
                assert_eq!(w.comm.as_deref(), Some(sim.task(task).name.as_str()));
                assert_eq!(d.pid, Some(pid(waker) as u32));
            }
        }
    }
    for c in 0..n {
        assert_eq!(next[c], decoded[c].len(), "cpu{c}: the file has events the simulation did not record");
    }

    // The events agree with the simulator's own counters.
    for (c, on_cpu) in decoded.iter().enumerate() {
        let switches = events.iter().filter(|(_, e)| matches!(e, TraceEvent::Switch { cpu, .. } if *cpu as usize == c)).count() as u64;
        assert_eq!(switches, sim.rqs[c].stats.switches, "cpu{c}: sched_switch count");
        // Per CPU, each switch starts from what the previous one switched to,
        // timestamps never go back, and the last one leaves what runs now.
        let mut curr = None;
        let mut last_ts = 0;
        for e in on_cpu {
            let ts = e.timestamp.unwrap();
            assert!(ts >= last_ts, "cpu{c}: time went back");
            last_ts = ts;
            if let Some(s) = &e.sched_switch {
                assert_eq!(s.prev_pid, Some(pid(curr)), "cpu{c} at {ts}: prev is not what ran");
                curr = match s.next_pid.unwrap() {
                    0 => None,
                    p => Some(p as u32 - 1),
                };
            }
        }
        assert_eq!(curr, sim.rqs[c].curr, "cpu{c}: last switch vs the running task");
    }
    let mut woken = 0;
    for t in &sim.tasks {
        let out = events.iter().filter(|(_, e)| matches!(e, TraceEvent::Switch { prev: Some(p), .. } if *p == t.id)).count() as u64;
        assert_eq!(out, t.stats.switches, "{}: switches out", t.name);
        let vol = events
            .iter()
            .filter(|(_, e)| matches!(e, TraceEvent::Switch { prev: Some(p), prev_state, .. } if *p == t.id && *prev_state != PrevState::Runnable))
            .count() as u64;
        assert_eq!(vol, t.stats.voluntary_switches, "{}: voluntary switches", t.name);
        let wakings = events.iter().filter(|(_, e)| matches!(e, TraceEvent::Waking { task, .. } if *task == t.id)).count() as u64;
        assert_eq!(wakings, t.stats.wakeups, "{}: sched_waking count", t.name);
        let new = events.iter().filter(|(_, e)| matches!(e, TraceEvent::WakeupNew { task, .. } if *task == t.id)).count();
        assert_eq!(new, 1, "{}: one sched_wakeup_new", t.name);
        woken += wakings;
    }
    assert!(woken > 100, "the scenario exercises wakeups ({woken})");
    assert!(sim.tasks.len() > 10, "hackbench forked its workers");

    // Every pid in the events is described once, with its process.
    let mut threads = std::collections::BTreeMap::new();
    let mut procs = std::collections::BTreeSet::new();
    for p in &trace.packet {
        if let Some(t) = &p.process_tree {
            assert!(p.timestamp.is_some());
            for th in &t.threads {
                assert!(threads.insert(th.tid.unwrap(), (th.name.clone().unwrap(), th.tgid.unwrap())).is_none(), "thread described twice");
            }
            for pr in &t.processes {
                assert!(procs.insert(pr.pid.unwrap()), "process described twice");
            }
        }
    }
    for t in &sim.tasks {
        let (name, tgid) = &threads[&pid(Some(t.id))];
        assert_eq!(name, &t.name);
        let leader = sim.tasks.iter().find(|o| o.tgid == t.tgid).unwrap();
        assert_eq!(*tgid, pid(Some(leader.id)), "{}: tgid is its process leader's pid", t.name);
        assert!(procs.contains(tgid));
    }
}

#[test]
fn trace_window_keeps_only_its_events() {
    let (lo, hi) = (20_000_000, 30_000_000);
    let (sim, events, trace) = traced(SCENARIO, Some((lo, hi)));
    let decoded: Vec<FtraceEvent> = per_cpu(&trace, sim.nr_cpus()).into_iter().flatten().collect();
    let inside = events.iter().filter(|(ts, _)| (lo..hi).contains(ts)).count();
    assert!(inside > 50 && inside < events.len());
    assert_eq!(decoded.len(), inside);
    assert!(decoded.iter().all(|e| (lo..hi).contains(&e.timestamp.unwrap())));
}

#[test]
fn tracing_does_not_change_the_simulation() {
    let mut plain = crate::sim(SCENARIO);
    plain.run();
    let (traced, _, _) = traced(SCENARIO, None);
    assert_eq!(plain.engine.hash(), traced.engine.hash());
}

#[test]
fn timeline_adds_up_to_the_busy_time() {
    let mut sim = crate::sim(SCENARIO);
    let tl = schedlab::results::trace::TimelineSink(Rc::new(RefCell::new(schedlab::results::trace::Timeline::new(sim.nr_cpus(), 1_000_000))));
    sim.add_trace_sink(Box::new(tl.clone()));
    sim.run();
    sim.finish_trace().unwrap();
    let tl = tl.0.borrow();
    assert_eq!(tl.nr_buckets(), 60);
    for c in 0..sim.nr_cpus() {
        let sum: u64 = tl.busy_ns[c].iter().sum();
        assert_eq!(sum, sim.rqs[c].stats.busy_ns, "cpu{c}");
        assert!(tl.busy_ns[c].iter().all(|&b| b <= 1_000_000));
    }
}
