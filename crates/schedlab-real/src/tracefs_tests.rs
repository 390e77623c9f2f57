//! Unit tests of tracefs.rs: the kernel's text format, the pid map
//! and the conversion.

use super::*;
use schedlab::results::trace::WakeKind;

const SAMPLE: &str = "\
# tracer: nop
#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION
        bash-12991   [001] d..2. 19542.784785: sched_switch: prev_comm=bash prev_pid=12991 prev_prio=120 prev_state=S ==> next_comm=my hog 0 next_pid=4001 next_prio=125
    my hog 0-4001    [001] d..3. 19542.784947: sched_waking: comm=migration/1 pid=21 prio=0 target_cpu=001
 migration/1-21      [001] d..3. 19542.786584: sched_migrate_task: comm=my hog 0 pid=4001 prio=125 orig_cpu=1 dest_cpu=0
      <idle>-0       [000] dNs5. 19542.787475: sched_wakeup_new: comm=a pid=1 pid=4002 prio=120 target_cpu=000
      <idle>-0       [000] d..2. 19542.788068: sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R+ ==> next_comm=x next_pid=9 next_pid=2 next_prio=120
CPU:1 [LOST 12 EVENTS]
        bash-12991   [001] d..2. 19542.788070: sched_stat_runtime: comm=bash pid=12991 runtime=1 [ns]
";

fn lines() -> Vec<Line<'static>> {
    SAMPLE.lines().filter_map(parse_line).collect()
}

#[test]
fn parses_the_kernels_text_format() {
    let l = lines();
    assert_eq!(l.len(), 5, "comments, the LOST mark and other events are skipped");
    assert_eq!((l[0].ts_ns, l[0].cpu, l[0].pid, l[0].comm), (19_542_784_785_000, 1, 12991, "bash"));
    let hog = Thr { comm: "my hog 0", pid: 4001, prio: 125 };
    assert_eq!(l[0].ev, Event::Switch { prev: Thr { comm: "bash", pid: 12991, prio: 120 }, prev_state: "S", next: hog });
    assert_eq!((l[1].comm, l[1].pid), ("my hog 0", 4001), "a header comm with spaces");
    assert_eq!(l[1].ev, Event::Wake { kind: WakeKind::Waking, task: Thr { comm: "migration/1", pid: 21, prio: 0 }, target_cpu: 1 });
    assert_eq!(l[2].ev, Event::Migrate { task: hog, orig_cpu: 1, dest_cpu: 0 });
    // Comms that look like keys.
    assert_eq!(l[3].ev, Event::Wake { kind: WakeKind::WakeupNew, task: Thr { comm: "a pid=1", pid: 4002, prio: 120 }, target_cpu: 0 });
    let Event::Switch { prev, prev_state, next } = l[4].ev else { panic!() };
    assert_eq!((prev.comm, prev.pid, prev_state, next.comm, next.pid), ("swapper/0", 0, "R+", "x next_pid=9", 2));
}

#[test]
fn parses_old_and_variant_lines() {
    let old = "  kworker/0:1-33  [000] 100.5: sched_wakeup: comm=k pid=7 prio=120 success=1 target_cpu=002";
    let l = parse_line(old).unwrap();
    assert_eq!((l.ts_ns, l.cpu), (100_500_000_000, 0), "no flags column, short fraction");
    assert_eq!(l.ev, Event::Wake { kind: WakeKind::Wakeup, task: Thr { comm: "k", pid: 7, prio: 120 }, target_cpu: 2 });
    let tgid = "  a-b [x]-5  (    4) [003] .... 7.000001: sched_waking: comm=z pid=5 prio=98 target_cpu=003";
    let l = parse_line(tgid).unwrap();
    assert_eq!((l.comm, l.pid, l.cpu, l.ts_ns), ("a-b [x]", 5, 3, 7_000_001_000), "record-tgid column and odd comm");
    assert!(parse_line("x-1 [000] 1.0: sched_switch: prev_comm=a prev_pid=1").is_none());
    assert_eq!(state_bits("S|D"), 3);
    assert_eq!(state_bits("R+"), 0);
    assert_eq!(state_bits("I"), 0x80);
}

#[test]
fn converts_to_the_run_s_time_cpus_and_task_pids() {
    let sc = schedlab::workload::scenario::Scenario::parse("duration = \"1s\"\n[machine]\ncpus = 2\n[[workload]]\nkind = \"hog\"\nname = \"my hog\"\ncount = 2\n", "t.toml", &[]).unwrap();
    let sim = schedlab::workload::world::build(&sc, "t.toml").unwrap();
    let out = PerfettoWriter::new(Box::new(std::io::sink()), 2, None);
    // Scenario CPU 0 is host CPU 1; host CPU 0 is not the run's.
    let cpu_map = [1, 3];
    let mut c = Converter::new(out, PidMap::new(&[4001, 4002]), &sim.tasks, 19_542_784_000_000, &cpu_map);
    let l = lines();
    for x in &l {
        c.line(x);
    }
    // Lines 0-2 are on host CPU 1 (the migration is counted, not
    // written); lines 3-4 are on host CPU 0.
    assert_eq!((c.stats.recorded, c.out.events_written, c.stats.migrations, c.stats.task_migrations), (3, 2, 1, 1));
    assert_eq!(c.last_ns, 2_584_000);
    assert!(c.out.is_described(1), "tid 4001 is task 0, trace pid 1");
    assert!(!c.out.is_described(2), "task 1 appears only on a CPU the run does not use");
    let early = parse_line("            bash-12991   [001] d..2. 19542.783999: sched_switch: prev_comm=bash prev_pid=12991 prev_prio=120 prev_state=S ==> next_comm=x next_pid=5 next_prio=120").unwrap();
    c.line(&early);
    assert_eq!(c.stats.recorded, 3, "before the common start");
}

#[test]
fn maps_our_tids_to_task_pids_and_moves_colliding_pids() {
    let m = PidMap::new(&[4001, 4002, 0]);
    assert_eq!(m.trace_pid(4001), 1);
    assert_eq!(m.trace_pid(4002), 2);
    assert_eq!(m.trace_pid(0), 0, "idle stays 0");
    assert_eq!(m.trace_pid(2), 2 + PID_MAX_LIMIT, "kthreadd would look like task 1");
    assert_eq!(m.trace_pid(3), 3 + PID_MAX_LIMIT);
    assert_eq!(m.trace_pid(4), 4, "beyond the tasks' pids");
    assert_eq!(m.trace_pid(12991), 12991);
    assert_eq!(m.task(4002), Some(1));
}
