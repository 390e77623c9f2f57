//! rt-app JSON import, on files written after rt-app's documented examples.

use crate::run;

fn fixture(name: &str) -> String {
    format!("{}/tests/rtapp/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn scenario(file: &str, extra: &str) -> String {
    format!("duration = \"1s\"\n[machine]\npreset = \"2cpu\"\ncstates = false\n{extra}[[workload]]\nkind = \"rtapp\"\nfile = \"{}\"\n", fixture(file))
}

fn build_error(text: &str) -> String {
    let s = schedlab::workload::scenario::Scenario::parse(text, "t.toml", &[]).unwrap();
    schedlab::workload::world::build(&s, "t.toml").err().expect("an error").to_string()
}

#[test]
fn periodic_timer_threads_run_at_their_period() {
    let (s, r) = run(&scenario("periodic.json", ""));
    let w = &r.workloads[0];
    assert_eq!(w.tasks, 2);
    for t in &s.tasks {
        assert_eq!((t.policy, t.rt_priority), (schedlab::sched::task::Policy::Fifo, 20));
        // 2 ms every 10 ms for 1 s.
        assert!(t.stats.runtime_ns.abs_diff(200_000_000) < 3_000_000, "{} ran {}", t.name, t.stats.runtime_ns);
    }
    // The timer wakeups are the workload's latency (rt-app's wu_lat): one per period.
    let l = w.latency.as_ref().unwrap();
    assert!((196..=200).contains(&l.count), "{}", l.count);
    assert!(l.max_ns < 10_000, "{l:?}");
}

#[test]
fn phases_loop_pin_and_exit() {
    let (s, r) = run(&scenario("phases.json", ""));
    let t = &s.tasks[0];
    // 3 rounds of (10 x 1 ms) + (5 x 4 ms).
    assert!(t.exited_at.is_some());
    assert!(r.workloads[0].finished);
    assert!(t.stats.runtime_ns.abs_diff(3 * (10_000_000 + 20_000_000)) < 1_000_000, "{}", t.stats.runtime_ns);
    // The last phase ran pinned on CPU 1 with priority (nice) 5.
    assert_eq!((t.cpu, t.nice), (1, 5));
    // Timer wakeups: round 1 has 10 light + 5 heavy. In rounds 2 and 3 the
    // relative timer A misses once (its reference is a phase old) and
    // restarts from now: 9 each; the absolute timer B stays behind its
    // reference and misses every expiry, as rt-app documents.
    assert_eq!(r.workloads[0].latency.as_ref().unwrap().count, 15 + 2 * 9);
}

#[test]
fn mutex_serialises_the_critical_sections() {
    let (s, r) = run(&scenario("mutex.json", ""));
    assert!(r.workloads[0].finished, "both threads finish 100 rounds");
    for t in &s.tasks {
        assert!(t.stats.runtime_ns >= 100 * 500_000);
    }
    // The mutex is free at the end.
    assert!(s.objs.iter().all(|o| o.tokens == 1 && o.readers.is_empty()));
}

#[test]
fn barrier_and_fork() {
    let (s, r) = run(&scenario("barrier-fork.json", ""));
    let start: Vec<_> = s.tasks.iter().filter(|t| t.parent.is_none()).collect();
    assert_eq!(start.len(), 3, "helper has instance 0");
    let helpers: Vec<_> = s.tasks.iter().filter(|t| t.parent.is_some()).collect();
    assert_eq!(helpers.len(), 20, "one fork per round");
    // Each helper runs its 200 us (plus switch costs) and exits.
    for h in &helpers {
        assert!(h.exited_at.is_some() && h.nice == 10 && (200_000..210_000).contains(&h.stats.runtime_ns), "{} {:?} nice {} ran {}", h.name, h.exited_at, h.nice, h.stats.runtime_ns);
    }
    assert!(r.workloads[0].finished);
    // The barrier holds the leader back to the followers' pace: 20 x 3 ms at least.
    let leader = start.iter().find(|t| t.name.ends_with("leader")).unwrap();
    assert!(leader.exited_at.unwrap() >= 20 * 3_000_000, "{:?}", leader.exited_at);
}

#[test]
fn unsupported_events_are_errors_with_their_path() {
    let e = build_error(&scenario("unsupported.json", ""));
    assert!(e.contains("unsupported.json: tasks.thread0.phases.p1.suspend") && e.contains("\"suspend\" is not supported"), "{e}");
    for (json, want) in [
        (r#"{"tasks": {"t": {"run": 10, "mem": 100}}}"#, "tasks.t.mem: the rt-app event \"mem\" is not supported"),
        (r#"{"tasks": {"t": {"run": 10, "frobnicate": 1}}}"#, "tasks.t.frobnicate: unknown key"),
        (r#"{"tasks": {"t": {"run": 10, "policy": "SCHED_DEADLINE"}}}"#, "tasks.t.policy: SCHED_DEADLINE is not modelled"),
        (r#"{"tasks": {"t": {"run": -5}}}"#, "tasks.t.run: expected a duration in microseconds"),
        (r#"{"tasks": {"t": {"fork": "nobody", "run": 1}}}"#, "tasks.t.fork: fork of \"nobody\""),
        (r#"{"tasks": {"t": {"instance": 2, "run": 1, "timer": {"ref": "shared", "period": 100}}}}"#, "timer \"shared\" is shared by 2 threads"),
        (r#"{"tasks": {"t": {"cpus": [7], "run": 1}}}"#, "tasks.t.cpus[0]: expected a CPU number 0..1"),
        (r#"{"tasks": {"t": {"run": 1}}, "global": {"colour": 1}}"#, "global.colour: unknown global setting"),
    ] {
        let e = build_error(&format!("duration = \"1s\"\n[machine]\npreset = \"2cpu\"\n[[workload]]\nkind = \"rtapp\"\njson = '{json}'\n"));
        assert!(e.contains(want), "{json}: {e}");
    }
}

#[test]
fn malformed_json_names_line_and_column() {
    let e = build_error(&scenario("malformed.json", ""));
    assert!(e.contains("malformed.json:5:4: malformed JSON: expected `,` or `}`"), "{e}");
    let e = build_error(&scenario("missing.json", ""));
    assert!(e.contains("workload.0.file: cannot read") && e.contains("missing.json"), "{e}");
}

/// Found by fuzzing: a thread that forks and meets a barrier nobody else
/// uses, forever, spun through its events without time passing (the
/// simulator stopped with an internal error). Now refused at build time.
#[test]
fn a_thread_that_never_takes_time_is_refused() {
    let json = r#"{"tasks": {"leader": {"fork": "helper", "barrier": "alone"}, "helper": {"instance": 0, "loop": 1, "run": 1000}}}"#;
    let e = build_error(&format!("duration = \"1s\"\n[machine]\npreset = \"2cpu\"\n[[workload]]\nkind = \"rtapp\"\njson = '{json}'\n"));
    assert!(e.contains("tasks.leader") && e.contains("every event of this thread is instant"), "{e}");
    // The same with a run event is fine.
    let json = r#"{"tasks": {"leader": {"fork": "helper", "barrier": "alone", "run": 100}, "helper": {"instance": 0, "loop": 1, "run": 1000}}}"#;
    let s = schedlab::workload::scenario::Scenario::parse(&format!("duration = \"10ms\"\n[machine]\npreset = \"2cpu\"\n[[workload]]\nkind = \"rtapp\"\njson = '{json}'\n"), "t.toml", &[]).unwrap();
    schedlab::workload::world::build(&s, "t.toml").unwrap_or_else(|e| panic!("{e}"));
}

/// rt-app's per-phase `taskgroup`: the thread moves into each phase's
/// group when the phase starts (and back to the task's for a phase without
/// one), so each group is charged exactly that phase's run time.
#[test]
fn a_phase_taskgroup_moves_the_thread_between_cgroups() {
    let json = r#"{"tasks": {"t": {"taskgroup": "base", "loop": 10, "phases": {
        "p1": {"taskgroup": "a", "run": 3000, "sleep": 1000},
        "p2": {"taskgroup": "b", "run": 1000, "sleep": 1000},
        "p3": {"run": 2000, "sleep": 1000}}}}}"#;
    let (s, _) = run(&format!("duration = \"1s\"\n[machine]\npreset = \"2cpu\"\ncstates = false\n[[workload]]\nkind = \"rtapp\"\njson = '''{json}'''\n"));
    let rt = |p: &str| s.cg.groups[s.cg.find(p).unwrap_or_else(|| panic!("no cgroup {p}")) as usize].stats.runtime_ns;
    // 10 loops: 30 ms in /a, 10 ms in /b, 20 ms in /base (its own group).
    for (p, want) in [("/a", 30_000_000u64), ("/b", 10_000_000), ("/base", 20_000_000)] {
        assert!(rt(p).abs_diff(want) < 200_000, "{p} ran {} ns, want {want}", rt(p));
    }
    assert_eq!(s.tasks[0].cgroup, "/base", "the last phase left it in the task's group");
    let bad = json.replace("\"a\"", "\"a/../b\"");
    let e = build_error(&format!("duration = \"1s\"\n[machine]\npreset = \"2cpu\"\n[[workload]]\nkind = \"rtapp\"\njson = '''{bad}'''\n"));
    assert!(e.contains("phases.p1.taskgroup") && e.contains("\".\" and \"..\" are not cgroup names"), "{e}");
}
