//! The sched_ext class with schedulers written in Rust against the same
//! `ExtOps` trait hosted BPF schedulers implement: kernel default paths,
//! user DSQs, remote LOCAL_ON dispatch, errors and ejection, bypass.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

use schedlab::engine::{Cpu, TaskId};
use schedlab::sched::ext::check::Checked;
use schedlab::sched::ext::kfuncs as kf;
use schedlab::sched::ext::ops::{dsq_id, enq_flags, kick_flags, DefaultOps, ExitKind, ExtOps, Op};
use schedlab::sched::ext::EnableState;
use schedlab::sched::sim::Sim;
use schedlab::sched::task::{ClassId, TaskState};

use crate::{runtime_of, sim};

/// The shared hog mix for `secs` seconds (seed 7, 200 hackbench loops).
fn mixed(cpus: usize, secs: u32) -> String {
    crate::hog_mix(cpus, &format!("{secs}s"), 7, 200)
}

fn ext_sim(toml: &str, ops: Rc<dyn ExtOps>) -> Sim {
    let mut s = sim(toml);
    s.scx_enable(ops).unwrap_or_else(|e| panic!("load refused: {e}"));
    s
}


/// scx_simple-like: one vtime-ordered user DSQ.
#[derive(Default)]
struct Vtime {
    vnow: Cell<u64>,
}
const SHARED: u64 = 0;
impl ExtOps for Vtime {
    fn name(&self) -> &str {
        "vtime"
    }
    fn has(&self, op: Op) -> bool {
        matches!(op, Op::SelectCpu | Op::Enqueue | Op::Dispatch | Op::Running | Op::Stopping | Op::Enable | Op::Init)
    }
    fn init(&self, sim: &mut Sim) -> i32 {
        kf::scx_bpf_create_dsq(sim, SHARED, -1)
    }
    fn select_cpu(&self, sim: &mut Sim, p: TaskId, prev: Cpu, wf: u64) -> Cpu {
        let (cpu, idle) = kf::scx_bpf_select_cpu_dfl(sim, p, prev as i32, wf);
        if idle {
            kf::scx_bpf_dsq_insert(sim, p, dsq_id::LOCAL, 5_000_000, 0);
        }
        cpu as Cpu
    }
    fn enqueue(&self, sim: &mut Sim, p: TaskId, f: u64) {
        let c = unsafe_free_vtime(sim, p);
        let floor = self.vnow.get().saturating_sub(5_000_000);
        kf::scx_bpf_dsq_insert_vtime(sim, p, SHARED, 5_000_000, c.max(floor), f);
    }
    fn dispatch(&self, sim: &mut Sim, _cpu: Cpu, _prev: Option<TaskId>) {
        kf::scx_bpf_dsq_move_to_local(sim, SHARED, 0);
    }
    fn running(&self, sim: &mut Sim, p: TaskId) {
        let v = unsafe_free_vtime(sim, p);
        if v > self.vnow.get() {
            self.vnow.set(v);
        }
    }
    fn stopping(&self, sim: &mut Sim, p: TaskId, _runnable: bool) {
        let c = &mut sim.task_mut(p).scx.c.scx;
        let used = 5_000_000 - c.slice.min(5_000_000);
        c.dsq_vtime += used * 100 / c.weight.max(1) as u64;
    }
    fn enable(&self, sim: &mut Sim, p: TaskId) {
        sim.task_mut(p).scx.c.scx.dsq_vtime = self.vnow.get();
    }
}

fn unsafe_free_vtime(sim: &Sim, p: TaskId) -> u64 {
    sim.task(p).scx.c.scx.dsq_vtime
}

/// scx_central-like: CPU 0 hands tasks to other CPUs' local DSQs.
#[derive(Default)]
struct Central {
    queue: RefCell<VecDeque<TaskId>>,
}
impl ExtOps for Central {
    fn name(&self) -> &str {
        "central"
    }
    fn has(&self, op: Op) -> bool {
        matches!(op, Op::SelectCpu | Op::Enqueue | Op::Dispatch)
    }
    fn select_cpu(&self, _sim: &mut Sim, _p: TaskId, _prev: Cpu, _wf: u64) -> Cpu {
        0
    }
    fn enqueue(&self, sim: &mut Sim, p: TaskId, _f: u64) {
        self.queue.borrow_mut().push_back(p);
        kf::scx_bpf_kick_cpu(sim, 0, kick_flags::IDLE);
    }
    fn dispatch(&self, sim: &mut Sim, cpu: Cpu, _prev: Option<TaskId>) {
        if cpu != 0 {
            kf::scx_bpf_kick_cpu(sim, 0, 0);
            return;
        }
        let n = sim.nr_cpus();
        for target in 0..n {
            if kf::scx_bpf_dispatch_nr_slots(sim) == 0 {
                break;
            }
            let local_nr = kf::scx_bpf_dsq_nr_queued(sim, dsq_id::LOCAL_ON | target as u64);
            let busy = sim.rq(target as Cpu).curr.is_some();
            if target != 0 && (local_nr > 0 || busy) {
                continue;
            }
            // The first queued task allowed on `target`.
            let pick = {
                let q = self.queue.borrow();
                q.iter().position(|&p| sim.task(p).cpus_allowed.test(target))
            };
            let Some(i) = pick else { continue };
            let p = self.queue.borrow_mut().remove(i).expect("index from position");
            kf::scx_bpf_dsq_insert(sim, p, dsq_id::LOCAL_ON | target as u64, 3_000_000, 0);
            if target != 0 {
                kf::scx_bpf_kick_cpu(sim, target as i32, kick_flags::IDLE);
            }
        }
        if !self.queue.borrow().is_empty() {
            kf::scx_bpf_kick_cpu(sim, 0, 0);
        }
    }
}

fn all_tasks_ran(s: &Sim) {
    for t in &s.tasks {
        assert!(t.stats.runtime_ns > 0 || t.state == TaskState::New, "task {} ({}) never ran", t.id, t.name);
    }
}

#[test]
fn default_paths_run_every_task_in_ext() {
    let ops = Rc::new(Checked::new(DefaultOps));
    let mut s = ext_sim(&mixed(4, 2), ops.clone());
    s.run();
    assert_eq!(s.scx.state, EnableState::Enabled, "exit: {:?}", s.scx.exit);
    all_tasks_ran(&s);
    assert!(s.tasks.iter().filter(|t| t.state != TaskState::Dead).all(|t| t.class == ClassId::Ext));
    assert!(ops.violations().is_empty(), "{:#?}", ops.violations());
    assert!(ops.calls("running") > 100);
    let m = s.metrics.iter().find(|m| m.name == "hb").expect("hackbench");
    assert_eq!(m.exited, m.nr_tasks, "hackbench finished");
}

/// A FIFO user DSQ whose id has bit 62 set: SCX_DSQ_FLAG_LOCAL_ON
/// without SCX_DSQ_FLAG_BUILTIN is an ordinary user id in the kernel
/// (scx_bpf_create_dsq refuses only bit 63; only both bits mean LOCAL_ON).
struct Bit62;
const BIT62: u64 = (1 << 62) | 7;
impl ExtOps for Bit62 {
    fn name(&self) -> &str {
        "bit62"
    }
    fn has(&self, op: Op) -> bool {
        matches!(op, Op::Enqueue | Op::Dispatch | Op::Init)
    }
    fn init(&self, sim: &mut Sim) -> i32 {
        kf::scx_bpf_create_dsq(sim, BIT62, -1)
    }
    fn enqueue(&self, sim: &mut Sim, p: TaskId, f: u64) {
        kf::scx_bpf_dsq_insert(sim, p, BIT62, 5_000_000, f);
    }
    fn dispatch(&self, sim: &mut Sim, _cpu: Cpu, _prev: Option<TaskId>) {
        if kf::scx_bpf_dsq_nr_queued(sim, BIT62) > 0 {
            assert!(kf::scx_bpf_dsq_move_to_local(sim, BIT62, 0));
        }
    }
}

#[test]
fn a_user_dsq_id_with_bit_62_is_not_a_local_on_id() {
    // 4 CPUs: read as LOCAL_ON | 7, the id would name a CPU that does not
    // exist, and the scheduler would be ejected at its first insert.
    let mut s = ext_sim(&mixed(4, 1), Rc::new(Checked::new(Bit62)));
    s.run();
    assert_eq!(s.scx.state, EnableState::Enabled, "exit: {:?}", s.scx.exit);
    all_tasks_ran(&s);
}

#[test]
fn user_vtime_dsq_shares_cpu_by_weight() {
    let ops = Rc::new(Checked::new(Vtime::default()));
    let mut s = ext_sim(
        r#"
seed = 1
duration = "4s"
[machine]
preset = "1cpu"
[[workload]]
kind = "hog"
name = "n0"
count = 2
[[workload]]
kind = "hog"
name = "n5"
nice = 5
"#,
        ops.clone(),
    );
    s.run();
    assert!(s.scx.exit.is_none(), "{:?}", s.scx.exit);
    assert!(ops.violations().is_empty(), "{:#?}", ops.violations());
    let a = crate::runtime_of(&s, "n0-0") as f64;
    let b = crate::runtime_of(&s, "n5-0") as f64;
    // p->scx.weight: 100 for nice 0, 33 for nice 5. Two nice-0 tasks keep
    // the shared DSQ non-empty, so its vtime order decides.
    let ratio = a / b;
    assert!((2.6..3.5).contains(&ratio), "nice0/nice5 = {ratio}");
}

#[test]
fn central_dispatch_to_remote_local_dsqs() {
    let ops = Rc::new(Checked::new(Central::default()));
    let mut s = ext_sim(&mixed(4, 2), ops.clone());
    s.run();
    assert!(s.scx.exit.is_none(), "{:?}", s.scx.exit);
    all_tasks_ran(&s);
    assert!(ops.violations().is_empty(), "{:#?}", ops.violations());
    assert!(s.scx.stats.consumed_remote + s.scx.stats.dispatched > 100);
    // Every CPU ran ext tasks.
    for c in 0..4 {
        assert!(s.rqs[c].stats.busy_ns > 1_000_000_000, "cpu{c} busy {}", s.rqs[c].stats.busy_ns);
    }
}

#[test]
fn ext_runs_are_deterministic() {
    let run = || {
        let mut s = ext_sim(&mixed(4, 1), Rc::new(Vtime::default()));
        s.run();
        (s.engine.hash(), s.engine.events_processed())
    };
    assert_eq!(run(), run());
}

/// Inserts into a DSQ that does not exist after `after` enqueues.
struct BadDsq {
    n: Cell<u32>,
}
impl ExtOps for BadDsq {
    fn name(&self) -> &str {
        "bad_dsq"
    }
    fn has(&self, op: Op) -> bool {
        matches!(op, Op::Enqueue)
    }
    fn enqueue(&self, sim: &mut Sim, p: TaskId, f: u64) {
        self.n.set(self.n.get() + 1);
        let dsq = if self.n.get() > 50 { 0x5eed } else { dsq_id::GLOBAL };
        kf::scx_bpf_dsq_insert(sim, p, dsq, 0, f);
    }
}

#[test]
fn bad_dsq_ejects_to_fair_and_loses_no_task() {
    let mut s = ext_sim(&mixed(4, 2), Rc::new(BadDsq { n: Cell::new(0) }));
    s.run();
    let exit = s.scx.exit.clone().expect("ejected");
    assert_eq!(exit.kind, ExitKind::Error);
    assert_eq!(exit.reason, "runtime error");
    assert!(exit.msg.contains("non-existent DSQ 0x5eed"), "{}", exit.msg);
    assert_eq!(s.scx.state, EnableState::Disabled);
    assert!(s.tasks.iter().all(|t| t.class != ClassId::Ext), "every task is back in fair");
    let m = s.metrics.iter().find(|m| m.name == "hb").expect("hackbench");
    assert_eq!(m.exited, m.nr_tasks, "hackbench finished under fair");
    all_tasks_ran(&s);
}

/// Drops every 8th task on the floor: the watchdog must catch it.
struct Stall {
    n: Cell<u32>,
}
impl ExtOps for Stall {
    fn name(&self) -> &str {
        "stall"
    }
    fn timeout_ms(&self) -> u32 {
        1000
    }
    fn has(&self, op: Op) -> bool {
        matches!(op, Op::Enqueue)
    }
    fn enqueue(&self, sim: &mut Sim, p: TaskId, f: u64) {
        self.n.set(self.n.get() + 1);
        if self.n.get() % 8 != 0 {
            kf::scx_bpf_dsq_insert(sim, p, dsq_id::GLOBAL, 0, f);
        }
    }
}

#[test]
fn stalled_task_trips_the_watchdog() {
    let mut s = ext_sim(&mixed(4, 4), Rc::new(Stall { n: Cell::new(0) }));
    s.run();
    let exit = s.scx.exit.clone().expect("ejected");
    assert_eq!(exit.kind, ExitKind::ErrorStall);
    assert_eq!(exit.reason, "runnable task stall");
    assert!(exit.msg.contains("failed to run for"), "{}", exit.msg);
    // timeout 1 s, checked every 0.5 s.
    assert!(exit.at_ns <= 2_100_000_000, "detected at {}", exit.at_ns);
    all_tasks_ran(&s);
    assert!(s.tasks.iter().all(|t| t.class != ClassId::Ext));
}

#[test]
fn unknown_ops_flag_refuses_the_load() {
    struct BadFlags;
    impl ExtOps for BadFlags {
        fn name(&self) -> &str {
            "bad_flags"
        }
        fn flags(&self) -> u64 {
            1 << 40
        }
        fn has(&self, _: Op) -> bool {
            false
        }
    }
    let mut s = sim(&mixed(2, 1));
    let err = s.scx_enable(Rc::new(BadFlags)).unwrap_err();
    assert!(err.to_string().contains("invalid ops.flags"), "{err}");
    assert_eq!(s.scx.state, EnableState::Disabled);
}

#[test]
fn unregister_switches_everything_back_to_fair() {
    let ops = Rc::new(Checked::new(Vtime::default()));
    let mut s = ext_sim(&mixed(4, 3), ops.clone());
    s.run_until(1_000_000_000);
    assert!(s.tasks.iter().any(|t| t.class == ClassId::Ext));
    s.scx_unregister();
    s.run();
    let exit = s.scx.exit.clone().expect("exit recorded");
    assert_eq!(exit.kind, ExitKind::Unreg);
    assert_eq!(s.scx.state, EnableState::Disabled);
    assert!(s.tasks.iter().all(|t| t.class != ClassId::Ext));
    assert!(ops.violations().is_empty(), "{:#?}", ops.violations());
    let done = s.scx.stats.disable_done_at.expect("disable finished");
    assert!(done < 1_100_000_000, "disable took until {done}");
}

/// Everything to CPU 0's local DSQ (scx_cpu0-like), for bypass tests.
struct Cpu0;
impl ExtOps for Cpu0 {
    fn name(&self) -> &str {
        "cpu0"
    }
    fn has(&self, op: Op) -> bool {
        matches!(op, Op::SelectCpu | Op::Enqueue)
    }
    fn select_cpu(&self, _sim: &mut Sim, _p: TaskId, _prev: Cpu, _wf: u64) -> Cpu {
        0
    }
    fn enqueue(&self, sim: &mut Sim, p: TaskId, f: u64) {
        if sim.task(p).cpus_allowed.test(0) {
            kf::scx_bpf_dsq_insert(sim, p, dsq_id::LOCAL_ON, 0, f);
        } else {
            kf::scx_bpf_dsq_insert(sim, p, dsq_id::LOCAL, 0, f);
        }
    }
}

/// Loads cpu0, lets it concentrate 2000 hogs on CPU 0 for a second, then
/// unregisters; returns (LB moves, disable duration, longest wait).
fn cpu0_disable(configure: impl Fn(&mut Sim)) -> (u64, u64, u64) {
    let toml = r#"
seed = 3
duration = "8s"
[machine]
preset = "epyc-2s-192"
[[workload]]
kind = "hog"
name = "h"
count = 2000
"#;
    let mut s = sim(toml);
    s.check_invariants = false;
    configure(&mut s);
    s.scx_enable(Rc::new(Cpu0)).expect("loads");
    s.run_until(1_000_000_000);
    let on0 = s.tasks.iter().filter(|t| t.cpu == 0).count();
    assert!(on0 > 1900, "cpu0 concentrates the tasks: {on0}");
    s.scx_unregister();
    s.run();
    assert_eq!(s.scx.state, EnableState::Disabled);
    assert!(s.tasks.iter().all(|t| t.class == ClassId::Fair));
    let st = &s.scx.stats;
    (st.bypass_lb_moved, st.disable_done_at.unwrap() - st.disable_started_at.unwrap(), st.max_wait_while_disabling_ns)
}

#[test]
fn bypass_load_balancer_spreads_a_concentrated_queue() {
    let (moved, took, wait) = cpu0_disable(|_| {});
    let (moved_off, took_off, wait_off) = cpu0_disable(|s| s.scx.bypass_lb_intv_ns = 0);
    eprintln!("cpu0 disable: LB on: moved {moved}, {took} ns, max wait {wait} ns; LB off: {took_off} ns, max wait {wait_off} ns");
    assert!(moved > 500, "moved {moved}");
    assert_eq!(moved_off, 0);
    // 2000 one-tick turns on CPU 0 alone take about 2 s; spread over the
    // node after the first 500 ms balance, far less.
    assert!(took_off > 1_800_000_000, "without the balancer: {took_off} ns");
    assert!(took < took_off / 2, "with the balancer: {took} ns vs {took_off} ns");
    assert!(wait < wait_off);
    let _ = enq_flags::IMMED;
}

/// qmap -I -F N in Rust, for checking experiment 000's mechanism without the host.
struct MiniQmap {
    n: Cell<u64>,
    nth: u64,
    prev: RefCell<std::collections::BTreeMap<TaskId, Cpu>>,
}
impl ExtOps for MiniQmap {
    fn name(&self) -> &str {
        "miniqmap"
    }
    fn flags(&self) -> u64 {
        schedlab::sched::ext::ops::ops_flags::ALWAYS_ENQ_IMMED
    }
    fn has(&self, op: Op) -> bool {
        matches!(op, Op::SelectCpu | Op::Enqueue | Op::Dispatch | Op::Init)
    }
    fn init(&self, sim: &mut Sim) -> i32 {
        kf::scx_bpf_create_dsq(sim, SHARED, -1)
    }
    fn select_cpu(&self, sim: &mut Sim, p: TaskId, prev: Cpu, _wf: u64) -> Cpu {
        self.prev.borrow_mut().insert(p, prev);
        if kf::scx_bpf_test_and_clear_cpu_idle(sim, prev as i32) {
            kf::scx_bpf_dsq_insert(sim, p, dsq_id::LOCAL, 20_000_000, 0);
            return prev;
        }
        let mask = sim.task(p).scx.c.cpus_mask;
        let c = kf::scx_bpf_pick_idle_cpu(sim, &mask, 0, None);
        if c >= 0 {
            kf::scx_bpf_dsq_insert(sim, p, dsq_id::LOCAL, 20_000_000, 0);
            return c as Cpu;
        }
        prev
    }
    fn enqueue(&self, sim: &mut Sim, p: TaskId, f: u64) {
        if f & enq_flags::REENQ == 0 {
            self.n.set(self.n.get() + 1);
            if self.n.get() % self.nth == 0 {
                let cpu = self.prev.borrow().get(&p).copied().unwrap_or(kf::scx_bpf_task_cpu(sim, p) as Cpu);
                kf::scx_bpf_dsq_insert(sim, p, dsq_id::LOCAL_ON | cpu as u64, 20_000_000, f);
                return;
            }
        }
        kf::scx_bpf_dsq_insert(sim, p, SHARED, 20_000_000, f);
        if f & enq_flags::REENQ != 0 {
            let mask = sim.task(p).scx.c.cpus_mask;
            let c = kf::scx_bpf_pick_idle_cpu(sim, &mask, 0, None);
            if c >= 0 {
                kf::scx_bpf_kick_cpu(sim, c, kick_flags::IDLE);
            }
        }
    }
    fn dispatch(&self, sim: &mut Sim, _cpu: Cpu, _prev: Option<TaskId>) {
        kf::scx_bpf_dsq_move_to_local(sim, SHARED, 0);
    }
}

#[test]
fn exp000_probe() {
    let base = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/mixed-load.toml")).unwrap();
    for on_target in [false, true] {
        let mut t = base.replace("cstates = false", "cstates = false\n[machine.irqoff]\nevery = \"exp:500us\"\nlength = \"exp:60us\"");
        t = t.replace("duration = \"2s\"", "duration = \"5s\"");
        let mut s = sim(&t);
        s.check_invariants = false;
        s.features.set(schedlab::sched::features::Feature::SCX_DEFERRED_ON_TARGET, on_target);
        s.scx_enable(Rc::new(MiniQmap { n: Cell::new(0), nth: 50, prev: Default::default() })).unwrap();
        s.run();
        let h = s.scx.stats.local_residence_all().expect("tasks passed through local DSQs");
        let over = |ns: u64| h.count_between(ns + 1, h.max().max(ns + 1));
        eprintln!(
            "on_target={on_target}: n={} p99={} max={} >128us={} >256us={} reenq={} deferred={} remote={} exit={:?}",
            h.len(), h.value_at_quantile(0.99), h.max(), over(128_000), over(256_000), s.scx.stats.reenqueued, s.scx.stats.deferred_irq_works, s.scx.stats.deferred_remote, s.scx.exit
        );
    }
}

/// SWITCH_PARTIAL: only SCHED_EXT tasks join ext; SCHED_OTHER stays in fair.
#[test]
fn switch_partial_moves_only_sched_ext_tasks() {
    struct Partial;
    impl ExtOps for Partial {
        fn name(&self) -> &str {
            "partial"
        }
        fn flags(&self) -> u64 {
            schedlab::sched::ext::ops::ops_flags::SWITCH_PARTIAL
        }
        fn has(&self, _: Op) -> bool {
            false
        }
    }
    let toml = r#"
seed = 2
duration = "1s"
[machine]
preset = "2cpu"
[[workload]]
kind = "hog"
name = "ext"
count = 2
policy = "ext"
[[workload]]
kind = "hog"
name = "fair"
count = 2
"#;
    let mut s = ext_sim(toml, Rc::new(Partial));
    s.run();
    for t in &s.tasks {
        let want = if t.name.starts_with("ext") { ClassId::Ext } else { ClassId::Fair };
        assert_eq!(t.class, want, "{}", t.name);
    }
    // ext sits below fair: two fair hogs keep both CPUs.
    assert!(s.tasks.iter().filter(|t| t.class == ClassId::Fair).all(|t| t.stats.runtime_ns > 400_000_000));
}

/// Records cpu_release reasons, and preempts with kicks.
#[derive(Default)]
struct Releases {
    rt: Cell<u32>,
    acquired: Cell<u32>,
}
impl ExtOps for Releases {
    fn name(&self) -> &str {
        "releases"
    }
    fn has(&self, op: Op) -> bool {
        matches!(op, Op::CpuRelease | Op::CpuAcquire)
    }
    fn cpu_release(&self, sim: &mut Sim, _cpu: Cpu, reason: schedlab::sched::ext::ops::CpuReleaseReason, _t: Option<TaskId>) {
        if reason == schedlab::sched::ext::ops::CpuReleaseReason::Rt {
            self.rt.set(self.rt.get() + 1);
        }
        // The legacy synchronous reenqueue is allowed here.
        kf::scx_bpf_reenqueue_local(sim);
    }
    fn cpu_acquire(&self, _sim: &mut Sim, _cpu: Cpu) {
        self.acquired.set(self.acquired.get() + 1);
    }
}

#[test]
fn rt_preemption_releases_and_reacquires_the_cpu() {
    let toml = r#"
seed = 4
duration = "1s"
[machine]
preset = "1cpu"
[[workload]]
kind = "hog"
name = "ext"
count = 2
[[workload]]
kind = "hog"
name = "rt"
policy = "fifo"
priority = 10
run = "1ms"
sleep = "10ms"
"#;
    let ops = Rc::new(Releases::default());
    let mut s = ext_sim(toml, ops.clone());
    s.run();
    assert!(s.scx.exit.is_none(), "{:?}", s.scx.exit);
    assert!(ops.rt.get() > 50, "cpu_release(RT) {}", ops.rt.get());
    assert!(ops.acquired.get() > 50, "cpu_acquire {}", ops.acquired.get());
}

/// With SCX_OPS_ENQ_LAST, the last runnable task goes back through
/// ops.enqueue() with SCX_ENQ_LAST instead of being kept running.
#[test]
fn enq_last_hands_the_last_task_to_the_scheduler() {
    #[derive(Default)]
    struct Last {
        last: Cell<u32>,
    }
    impl ExtOps for Last {
        fn name(&self) -> &str {
            "last"
        }
        fn flags(&self) -> u64 {
            schedlab::sched::ext::ops::ops_flags::ENQ_LAST
        }
        fn has(&self, op: Op) -> bool {
            matches!(op, Op::Enqueue)
        }
        fn enqueue(&self, sim: &mut Sim, p: TaskId, f: u64) {
            if f & enq_flags::LAST != 0 {
                self.last.set(self.last.get() + 1);
            }
            kf::scx_bpf_dsq_insert(sim, p, dsq_id::LOCAL, 1_000_000, f);
        }
    }
    let toml = "seed = 1\nduration = \"200ms\"\n[machine]\npreset = \"1cpu\"\n[[workload]]\nkind = \"hog\"\nname = \"h\"\n";
    let ops = Rc::new(Last::default());
    let mut s = ext_sim(toml, ops.clone());
    s.run();
    assert!(s.scx.exit.is_none(), "{:?}", s.scx.exit);
    // One task, 1 ms slices checked at 1 ms ticks: it comes back with
    // ENQ_LAST about every other tick.
    assert!(ops.last.get() > 80, "ENQ_LAST enqueues: {}", ops.last.get());
}

/// A kick with SCX_KICK_PREEMPT ends the target's slice at once.
#[test]
fn kick_preempt_cuts_the_running_slice() {
    #[derive(Default)]
    struct Kicker {
        n: Cell<u32>,
    }
    impl ExtOps for Kicker {
        fn name(&self) -> &str {
            "kicker"
        }
        fn has(&self, op: Op) -> bool {
            matches!(op, Op::Enqueue | Op::Tick)
        }
        fn enqueue(&self, sim: &mut Sim, p: TaskId, f: u64) {
            kf::scx_bpf_dsq_insert(sim, p, dsq_id::GLOBAL, 1_000_000_000, f);
        }
        fn tick(&self, sim: &mut Sim, _p: TaskId) {
            // Every 10th tick, preempt CPU 1 from CPU 0.
            if kf::bpf_get_smp_processor_id(sim) == 0 {
                self.n.set(self.n.get() + 1);
                if self.n.get() % 10 == 0 {
                    kf::scx_bpf_kick_cpu(sim, 1, kick_flags::PREEMPT);
                }
            }
        }
    }
    let toml = "seed = 1\nduration = \"1s\"\n[machine]\npreset = \"2cpu\"\n[[workload]]\nkind = \"hog\"\nname = \"h\"\ncount = 4\n";
    let mut s = ext_sim(toml, Rc::new(Kicker::default()));
    s.run();
    assert!(s.scx.exit.is_none(), "{:?}", s.scx.exit);
    // 1 s slices would give CPU 1 one switch; kicks every 10 ms give ~100.
    assert!(s.rqs[1].stats.switches > 60, "cpu1 switches {}", s.rqs[1].stats.switches);
    assert!(s.rqs[0].stats.switches < 10, "cpu0 switches {}", s.rqs[0].stats.switches);
}

/// A CPU that kicks itself with SCX_KICK_PREEMPT from ops.enqueue() of a
/// task its timer woke (as scx_flow does). The kick's irq_work runs when
/// the CPU enables interrupts on the way out of the timer interrupt, before
/// the reschedule the wakeup asked for (ext.c: kick_cpus_irq_workfn() on
/// the local CPU), so it ends the slice of the task being switched out,
/// never the woken one's. Inserted without SCX_ENQ_PREEMPT, the woken task
/// gets the CPU through the kick alone.
#[test]
fn self_kick_from_timer_wakeup_lands_before_the_switch() {
    struct SelfKick {
        preempt_insert: bool,
    }
    impl ExtOps for SelfKick {
        fn name(&self) -> &str {
            "self-kick"
        }
        fn has(&self, op: Op) -> bool {
            matches!(op, Op::Enqueue)
        }
        fn enqueue(&self, sim: &mut Sim, p: TaskId, f: u64) {
            if f & enq_flags::WAKEUP == 0 {
                // New and preempted tasks: the back of the global DSQ, 20 ms slices.
                kf::scx_bpf_dsq_insert(sim, p, dsq_id::GLOBAL, 20_000_000, f);
                return;
            }
            let this = kf::bpf_get_smp_processor_id(sim);
            kf::scx_bpf_kick_cpu(sim, this as i32, kick_flags::PREEMPT);
            let flags = if self.preempt_insert { f | enq_flags::PREEMPT } else { f };
            kf::scx_bpf_dsq_insert(sim, p, dsq_id::LOCAL, 1_000_000, flags);
        }
    }
    // One CPU, a cyclictest thread woken by its timer every ms, and two
    // hogs that start once it sleeps.
    let toml = r#"
seed = 1
duration = "300ms"
[machine]
preset = "1cpu"
cstates = false
[machine.costs]
timer_slack = "0us"
[[workload]]
kind = "hog"
name = "h"
count = 2
start = "5ms"
[[workload]]
kind = "cyclictest"
name = "ct"
interval = "1ms"
"#;
    for preempt_insert in [true, false] {
        let mut s = ext_sim(toml, Rc::new(SelfKick { preempt_insert }));
        s.run();
        assert!(s.scx.exit.is_none(), "{:?}", s.scx.exit);
        let m = s.metrics.iter().find(|m| m.kind == "cyclictest").expect("cyclictest");
        let samples = m.latency.len();
        // Interrupt entry, wakeup, callbacks and one switch: microseconds.
        // A kick landing on the woken task would send it behind the hogs'
        // 20 ms slices.
        assert!(
            m.latency_max_ns < 20_000,
            "preempt_insert={preempt_insert}: max wakeup latency {} ns over {samples} samples",
            m.latency_max_ns
        );
        // Every sample is a timer wakeup that kicked.
        assert!(samples > 250, "preempt_insert={preempt_insert}: {samples} samples");
        assert!(s.scx.stats.kicks >= samples, "preempt_insert={preempt_insert}: {} kicks", s.scx.stats.kicks);
    }
}

/// Two nice-0 hogs on one CPU under a do-nothing scheduler; one is reniced
/// to 5 while in ext (or before the load), then the scheduler is unregistered at 1 s and
/// both run on in the fair class until 3 s. Returns each hog's share of the
/// fair second.
fn fair_share_after_unload(renice_in_ext: bool) -> (f64, f64) {
    let toml = r#"
seed = 1
duration = "3s"
[machine]
preset = "1cpu"
[[workload]]
kind = "hog"
name = "h"
count = 2
"#;
    let mut s = sim(toml);
    let b = s.tasks.iter().find(|t| t.name == "h-1").unwrap().id;
    // Both hogs are running (forked and woken) before anything changes.
    s.run_until(1_000_000);
    if !renice_in_ext {
        s.sched_setattr(b, schedlab::sched::task::Policy::Other, 5, 0);
    }
    s.scx_enable(Rc::new(DefaultOps)).unwrap();
    if renice_in_ext {
        s.sched_setattr(b, schedlab::sched::task::Policy::Other, 5, 0);
    }
    s.run_until(1_000_000_000);
    s.scx_unregister();
    s.run_until(2_000_000_000);
    let before = (runtime_of(&s, "h-0"), runtime_of(&s, "h-1"));
    s.run();
    let (a, b) = (runtime_of(&s, "h-0") - before.0, runtime_of(&s, "h-1") - before.1);
    let total = (a + b) as f64;
    (a as f64 / total, b as f64 / total)
}

/// reweight_task_scx() updates only p->scx.weight: a task reniced while in
/// sched_ext keeps its old se.load and brings it back to the fair class
/// when the scheduler goes away (what `compare --real --vm` measured on a
/// 7.3 kernel after an ejection). Reniced before the load, it keeps nice 5.
#[test]
fn renice_in_ext_leaves_the_fair_weight_stale() {
    let (a, b) = fair_share_after_unload(true);
    assert!((a - 0.5).abs() < 0.02 && (b - 0.5).abs() < 0.02, "stale weights share equally: {a:.3} {b:.3}");
    let (a, b) = fair_share_after_unload(false);
    let want = 1024.0 / (1024.0 + 335.0);
    assert!((a - want).abs() < 0.02, "nice 0 vs nice 5 after a clean unload: {a:.3} {b:.3}");
}

/// The BPF clock is monotonic, as the kernel's: an operation's overhead
/// advances the clock it reads, and an event of another CPU at the same
/// simulated time that follows must not read an earlier time (scx_cosmos's
/// `now - last_run_at` in ops.stopping underflowed on 32 CPUs and starved a
/// task for good).
#[test]
fn the_bpf_clock_never_goes_back() {
    let mut s = sim(&mixed(4, 1));
    s.scx.cost_acc = 50_000;
    let during = kf::bpf_ktime_get_ns(&mut s);
    assert_eq!(during, kf::BPF_CLOCK_BOOT_NS + s.now() + 50_000, "the clock includes the overhead spent so far");
    // The overhead is charged to its CPU; the next event at this time reads the clock.
    s.scx.cost_acc = 0;
    let after = kf::bpf_ktime_get_ns(&mut s);
    let now = kf::scx_bpf_now(&mut s);
    assert!(after >= during && now >= after, "{during} then {after}, {now}");
}
