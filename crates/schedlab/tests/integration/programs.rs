//! Behaviour-program steps built by hand: fork and exit, spinlocks with
//! pause-loop exits and yield_to, sched_yield.

use crate::sim;
use schedlab::machine::cpumask::CpuMask;
use schedlab::sched::sim::SpinLock;
use schedlab::sched::task::{Dist, Op, Policy, TaskState};
use schedlab::workload::{add_program, add_workload, new_task, spawn};

const EMPTY_1CPU: &str = "duration = \"1s\"\n[machine]\npreset = \"1cpu\"\ncstates = false\n";
const EMPTY_2CPU: &str = "duration = \"1s\"\n[machine]\npreset = \"2cpu\"\ncstates = false\n";

#[test]
fn fork_creates_children_that_run_and_exit() {
    let mut s = sim(EMPTY_2CPU);
    let w = add_workload(&mut s, "forker", "test", true);
    let child = add_program(&mut s, vec![Op::Run(Dist::Const(100_000)), Op::Exit]);
    let parent = add_program(&mut s, vec![Op::Fork { prog: child }, Op::Sleep(Dist::Const(1_000_000)), Op::Loop { to: 0, count: Some(5), slot: 0 }, Op::Exit]);
    let n = s.nr_cpus();
    spawn(&mut s, w, new_task("parent".into(), w, 1, Policy::Other, 0, 0, CpuMask::full(n), parent));
    s.run();
    assert_eq!(s.tasks.len(), 6);
    for t in &s.tasks {
        assert_eq!(t.state, TaskState::Dead, "{} did not exit", t.name);
    }
    for t in s.tasks.iter().skip(1) {
        assert_eq!(t.parent, Some(0));
        assert!(t.stats.runtime_ns >= 100_000, "child ran {}", t.stats.runtime_ns);
    }
    assert_eq!(s.metrics[w as usize].exited, 6);
}

fn lock_pair(ple: Option<u64>, lag_credit: bool) -> (u64, u64) {
    let mut s = sim(&format!("{EMPTY_1CPU}[features]\nYIELD_TO_LAG_CREDIT = {lag_credit}\n"));
    s.locks.push(SpinLock::default());
    let w = add_workload(&mut s, "vcpus", "test", false);
    // The holder keeps the lock for 2 ms at a time, then works unlocked.
    let holder = add_program(&mut s, vec![
        Op::Lock { lock: 0, ple_ns: ple },
        Op::Run(Dist::Const(2_000_000)),
        Op::Unlock { lock: 0 },
        Op::Work,
        Op::Run(Dist::Const(1_000_000)),
        Op::Loop { to: 0, count: None, slot: 0 },
    ]);
    let mut a = new_task("a".into(), w, 1, Policy::Other, 0, 0, CpuMask::full(1), holder);
    let mut b = a.clone();
    b.name = "b".into();
    a.peers = vec![1];
    b.peers = vec![0];
    spawn(&mut s, w, a);
    spawn(&mut s, w, b);
    s.run();
    let l = &s.locks[0];
    assert!(l.acquisitions > 10);
    (s.metrics[w as usize].work, l.spin_ns)
}

#[test]
fn spinners_burn_cpu_until_the_holder_runs() {
    // Two tasks on one CPU contend for a lock: whoever is preempted while
    // holding it makes the other spin until the tick preempts the spinner.
    let (work, spin) = lock_pair(None, false);
    assert!(spin > 100_000_000, "spin time {spin}");
    // With pause-loop exits the spinner yields to the holder after 50 us.
    let (work_ple, spin_ple) = lock_pair(Some(50_000), false);
    assert!(spin_ple < spin / 4, "PLE spin {spin_ple} vs {spin}");
    assert!(work_ple > work, "PLE work {work_ple} vs {work}");
}

#[test]
fn yield_to_lag_credit_changes_the_schedule() {
    let (_, spin_plain) = lock_pair(Some(50_000), false);
    let (work_credit, spin_credit) = lock_pair(Some(50_000), true);
    assert!(work_credit > 0);
    assert_ne!(spin_plain, spin_credit);
}

#[test]
fn sched_yield_alternates_equal_tasks() {
    let mut s = sim(EMPTY_1CPU);
    let w = add_workload(&mut s, "yielders", "test", false);
    let prog = add_program(&mut s, vec![Op::Run(Dist::Const(50_000)), Op::Work, Op::Yield, Op::Loop { to: 0, count: None, slot: 0 }]);
    for i in 0..2 {
        spawn(&mut s, w, new_task(format!("y{i}"), w, 1, Policy::Other, 0, 0, CpuMask::full(1), prog));
    }
    s.run();
    let (a, b) = (&s.tasks[0].stats, &s.tasks[1].stats);
    // Each yield hands the CPU over: about one switch per 50 us run.
    assert!(a.switches > 5_000 && b.switches > 5_000, "{} {}", a.switches, b.switches);
    assert!(a.work.abs_diff(b.work) <= 2, "{} vs {}", a.work, b.work);
}

fn two_hogs_with_change(change: impl FnOnce(&mut schedlab::sched::sim::Sim) -> Op, machine: &str) -> schedlab::sched::sim::Sim {
    let mut s = sim(&format!("duration = \"10s\"\n[machine]\npreset = \"{machine}\"\ncstates = false\n"));
    let change = change(&mut s);
    let w = add_workload(&mut s, "hogs", "test", false);
    let n = s.nr_cpus();
    let plain = add_program(&mut s, vec![Op::Run(Dist::Const(100_000_000)), Op::Loop { to: 0, count: None, slot: 0 }]);
    let changer = add_program(&mut s, vec![Op::Run(Dist::Const(2_500_000_000)), change, Op::Run(Dist::Const(100_000_000)), Op::Loop { to: 2, count: None, slot: 0 }]);
    spawn(&mut s, w, new_task("a".into(), w, 1, Policy::Other, 0, 0, CpuMask::single(n, 0), plain));
    spawn(&mut s, w, new_task("b".into(), w, 2, Policy::Other, 0, 0, CpuMask::single(n, 0), changer));
    s.run();
    s
}

#[test]
fn renice_while_running_changes_the_share_from_then_on() {
    let s = two_hogs_with_change(|_| Op::SetSched { policy: Policy::Other, nice: 5, rt_priority: 0 }, "1cpu");
    let (a, b) = (s.tasks[0].stats.runtime_ns as f64, s.tasks[1].stats.runtime_ns as f64);
    // 5 s at 1:1, then 5 s at 1024:335.
    let expect_b = 2.5e9 + 5e9 * 335.0 / 1359.0;
    assert!((b / expect_b - 1.0).abs() < 0.02, "b ran {b}, expected {expect_b}");
    assert!((a + b - 10e9).abs() < 1e7);
}

#[test]
fn becoming_fifo_takes_the_cpu_except_for_the_fair_server() {
    let s = two_hogs_with_change(|_| Op::SetSched { policy: Policy::Fifo, nice: 0, rt_priority: 10 }, "1cpu");
    let a = s.tasks[0].stats.runtime_ns;
    assert_eq!(s.tasks[1].prio, 89);
    // 2.5 s before the change, then 50 ms per second from the fair server.
    assert!((2_650_000_000..=2_800_000_000).contains(&a), "fair task ran {a}");
}

#[test]
fn setaffinity_moves_a_running_task_at_once() {
    let s = two_hogs_with_change(|s| s.set_affinity_op(CpuMask::single(2, 1)), "2cpu");
    let b = &s.tasks[1];
    assert_eq!(b.cpu, 1);
    assert_eq!(b.stats.migrations, 1);
    // Shared CPU 0 until it had 2.5 s (at 5 s), then alone on CPU 1.
    assert!((7_400_000_000..=7_600_000_000).contains(&b.stats.runtime_ns), "{}", b.stats.runtime_ns);
    assert!((7_400_000_000..=7_600_000_000).contains(&s.tasks[0].stats.runtime_ns));
}
