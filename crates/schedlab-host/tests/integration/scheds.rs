//! What must hold for sched_ext (issue 3, section 4), with the BPF C
//! schedulers hosted natively:
//!
//! - a generic suite stamped out for every shipped scheduler (simple, qmap,
//!   central, cpu0) on 1, 4 and 64 CPUs under a mixed workload: no watchdog
//!   exit, every task runs, affinity holds, the per-task callback order is
//!   the kernel's, and runs are deterministic;
//! - ejection: each deliberately broken scheduler of tests/schedulers ends
//!   in the right exit kind, and every task carries on under fair;
//! - bypass: cpu0's concentration on `epyc-2s-192` and experiment 002's
//!   affinitized scx_simple load, disabled with per-CPU bypass DSQs (6.19)
//!   and with the old per-node global DSQs.

use std::path::{Path, PathBuf};
use std::rc::Rc;

use schedlab::engine::TaskId;
use schedlab::sched::features::Feature;
use schedlab::sched::ext::check::Checked;
use schedlab_host::HostedScheduler;
use schedlab::sched::ext::ops::{ExitInfo, ExitKind, ExtOps};
use schedlab::sched::ext::EnableState;
use schedlab::sched::sim::Sim;
use schedlab::sched::task::{ClassId, TaskState};
use schedlab::engine::time::Ns;

use crate::{cfg, load_with, manifest, shipped, sim};

const MS: Ns = 1_000_000;

pub(crate) fn broken(name: &str) -> PathBuf {
    manifest().join("tests/schedulers").join(format!("{name}.bpf.c"))
}

fn load(path: &Path) -> HostedScheduler {
    load_with(path, &cfg())
}

fn machine(cpus: usize) -> String {
    match cpus {
        1 | 2 | 4 => format!("[machine]\npreset = \"{cpus}cpu\"\n"),
        n => format!("[machine]\ncpus = {n}\n"),
    }
}

/// Mixed load scaled to the machine: CPU hogs at several nice levels, hogs
/// restricted to a CPU subset and to one CPU, periodic sleepers,
/// cyclictest (SCHED_OTHER, so it is in ext), hackbench, and stress-ng
/// yield and fork workers.
fn mixed(cpus: usize, ms: u64) -> String {
    let last = cpus - 1;
    let (subset, hogs, sleepers) = match cpus {
        1 => ("0".to_string(), 3, 2),
        4 => ("1-2".to_string(), 6, 4),
        n => (format!("{}-{}", n / 8, n / 4 - 1), n * 3 / 4, n / 4),
    };
    // One nice value per task, cycling.
    let nice = |n: usize, levels: &[i32]| format!("{:?}", (0..n).map(|i| levels[i % levels.len()]).collect::<Vec<_>>());
    format!(
        r#"
seed = 5
duration = "{ms}ms"
{machine}
[[workload]]
kind = "hog"
name = "hog"
count = {hogs}
nice = {hog_nice}

[[workload]]
kind = "hog"
name = "subset"
count = 3
cpus = "{subset}"
nice = [0, 5, -3]

[[workload]]
kind = "hog"
name = "single"
count = 2
cpus = "{last}"

[[workload]]
kind = "hog"
name = "sleeper"
count = {sleepers}
run = "exp:500us"
sleep = "exp:2ms"
nice = {sleeper_nice}

[[workload]]
kind = "cyclictest"
name = "ct"
threads = 2
interval = "1ms"

[[workload]]
kind = "hackbench"
name = "hb"
groups = 1
fds = 2
loops = 50
ipc = "pipe"

[[workload]]
kind = "stress"
name = "yield"
stressor = "yield"
workers = 2
op_cost = "20us"

[[workload]]
kind = "stress"
name = "fork"
stressor = "fork"
workers = 1
child_run = "100us"
pause = "2ms"
burst = 2
"#,
        machine = machine(cpus),
        hog_nice = nice(hogs, &[0, -5, 5, 10, 0, 19]),
        sleeper_nice = nice(sleepers, &[0, 3]),
    )
}

/// What a shipped scheduler does with the mixed load on a machine.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Expect {
    /// Serves every task and stays loaded.
    Serve,
    /// Cannot serve the machine and must be ejected by the watchdog.
    Stall,
}

/// How long to simulate, how recently a task may have been created and
/// still not have run (it can be at the back of a long FIFO), and what
/// must happen.
fn plan(sched: &str, cpus: usize) -> (u64, Ns, Expect) {
    match (sched, cpus) {
        // scx_central gives every task SCX_SLICE_INF and its timer never
        // preempts the central CPU. On one CPU the first CPU-bound task
        // the central CPU feeds itself runs forever, and nothing is left
        // running to wake or enqueue anything: the watchdog (30 s, checked
        // every 15 s) must eject it at 45 s, after which fair serves all.
        ("central", 1) => (47_000, 1500 * MS, Expect::Stall),
        // cpu0: everything that may use CPU 0 queues there in FIFO order
        // with 20 ms slices. ~80 tasks make a 1.6 s round, well inside the
        // 30 s watchdog; give every task time for its first turn.
        ("cpu0", 64) => (3000, 2500 * MS, Expect::Serve),
        ("cpu0", 4) => (800, 400 * MS, Expect::Serve),
        // ~10 CPU-bound tasks with 20 ms slices share the one CPU.
        (_, 1) => (1000, 500 * MS, Expect::Serve),
        (_, 64) => (400, 100 * MS, Expect::Serve),
        // Every wakeup waits for the central CPU's next dispatch round.
        ("central", 4) => (1500, 100 * MS, Expect::Serve),
        _ => (600, 100 * MS, Expect::Serve),
    }
}

struct Outcome {
    hash: u64,
    events: u64,
    ran: usize,
}

fn run_generic(sched: &str, cpus: usize) -> Outcome {
    let (ms, slack, expect) = plan(sched, cpus);
    let toml = mixed(cpus, ms);
    let ops = Rc::new(Checked::new(load(&shipped(sched))));
    let mut s = sim(&toml);
    assert!(s.check_invariants, "running tasks are checked against their affinity after every event");
    s.scx_enable(ops.clone()).unwrap_or_else(|e| panic!("{sched}: load refused: {e}"));
    s.run();
    let end = s.now();
    let what = format!("{sched} on {cpus} CPUs");

    match expect {
        Expect::Serve => {
            // No watchdog stall, no error: still the scheduler at the end.
            assert!(s.scx.exit.is_none(), "{what}: {:?}", s.scx.exit);
            assert_eq!(s.scx.state, EnableState::Enabled, "{what}");
        }
        Expect::Stall => {
            let exit = s.scx.exit.clone().unwrap_or_else(|| panic!("{what}: expected a watchdog stall"));
            assert_eq!(exit.kind, ExitKind::ErrorStall, "{what}: {exit:?}");
            assert!(exit.msg.contains("failed to run for"), "{what}: {}", exit.msg);
            let timeout = ops.timeout_ms() as Ns * MS;
            let timeout = if timeout == 0 { 30_000 * MS } else { timeout };
            assert!(exit.at_ns >= timeout && exit.at_ns <= timeout * 3 / 2 + 10 * MS, "{what}: stall detected at {}", exit.at_ns);
            assert_eq!(s.scx.state, EnableState::Disabled, "{what}");
        }
    }
    assert_eq!(s.scx.stats.hardlockups, 0, "{what}");

    // The callback order per task is the kernel's.
    let v = ops.violations();
    assert!(v.is_empty(), "{what}: {v:#?}");
    assert!(ops.calls("running") > 0, "{what}: the scheduler ran tasks");

    // Every task that was runnable long enough ran, and every task ext
    // ran was seen by ops.running() on CPUs of its mask only.
    let mut ran = 0;
    for t in &s.tasks {
        if t.state == TaskState::New {
            continue;
        }
        if t.created_at + slack <= end {
            assert!(t.stats.runtime_ns > 0, "{what}: task {} ({}, created at {}, {:?}) never ran", t.id, t.name, t.created_at, t.state);
        }
        if t.stats.runtime_ns > 0 {
            ran += 1;
        }
        if let Some(on) = ops.ran_on(t.id) {
            assert!(on.is_subset_of(&t.cpus_allowed), "{what}: {} ran on {} outside {}", t.name, on.to_cpulist(), t.cpus_allowed.to_cpulist());
        } else if expect == Expect::Serve && t.stats.runtime_ns > 0 {
            panic!("{what}: task {} ({}) ran but ops.running never saw it", t.id, t.name);
        }
        let want = if expect == Expect::Serve { ClassId::Ext } else { ClassId::Fair };
        if t.state != TaskState::Dead {
            assert_eq!(t.class, want, "{what}: {}", t.name);
        }
    }
    // hackbench finishes (when cpu0 serialises everything on CPU 0 it only
    // makes progress).
    let hb = s.metrics.iter().find(|m| m.name == "hb").expect("hackbench");
    if sched != "cpu0" || cpus == 1 {
        assert_eq!(hb.exited, hb.nr_tasks, "{what}: hackbench finished");
    }
    Outcome { hash: s.engine.hash(), events: s.engine.events_processed(), ran }
}

/// The whole check, then a second run that must be identical.
fn generic(sched: &str, cpus: usize) {
    let a = run_generic(sched, cpus);
    let b = run_generic(sched, cpus);
    assert_eq!((a.hash, a.events, a.ran), (b.hash, b.events, b.ran), "{sched} on {cpus} CPUs is not deterministic");
}

macro_rules! generic_suite {
    ($($sched:ident),* $(,)?) => {$(
        mod $sched {
            #[test]
            fn cpus_1() {
                super::generic(stringify!($sched), 1);
            }
            #[test]
            fn cpus_4() {
                super::generic(stringify!($sched), 4);
            }
            #[test]
            fn cpus_64() {
                super::generic(stringify!($sched), 64);
            }
        }
    )*};
}

generic_suite!(simple, qmap, central, cpu0);

// ---------------------------------------------------------------------------
// Ejection: broken schedulers end in the right exit kind, and every task
// carries on under fair.

/// What an ejection left behind.
pub(crate) struct Ejection {
    pub sim: Sim,
    pub exit: ExitInfo,
}

/// Loads `name` (with rodata `opts`) on 4 CPUs under the mixed load, runs
/// until the scheduler is gone, checks that every task is back in fair and
/// none is lost, then runs to the end and checks that every task alive at
/// the disable either exited or made progress under fair.
fn eject(name: &str, opts: &[(&str, &str)], ms: u64) -> Ejection {
    let mut c = cfg();
    c.rodata = opts.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    eject_with(name, &c, ms)
}

/// [`eject`] with a load configuration.
pub(crate) fn eject_with(name: &str, c: &schedlab_host::LoadConfig, ms: u64) -> Ejection {
    let c = c.clone();
    let ops = Rc::new(Checked::new(load_with(&broken(name), &c)));
    let mut s = sim(&mixed(4, ms));
    s.scx_enable(ops.clone()).unwrap_or_else(|e| panic!("{name}: load refused: {e}"));
    let mut t = 0;
    while s.scx.state != EnableState::Disabled {
        assert!(t < ms * MS, "{name}: still {:?} at the end", s.scx.state);
        t += 10 * MS;
        s.run_until(t);
    }
    let exit = s.scx.exit.clone().unwrap_or_else(|| panic!("{name}: disabled without an exit"));
    let st = &s.scx.stats;
    let (start, done) = (st.disable_started_at.expect("disable started"), st.disable_done_at.expect("disable done"));
    assert!(exit.at_ns <= start && start <= done, "{name}: exit at {} disable {start}..{done}", exit.at_ns);
    assert!(ops.violations().is_empty(), "{name}: {:#?}", ops.violations());

    // Right after the disable: every task is a fair task, and each one that
    // is runnable is queued on exactly the runqueue it names.
    let alive: Vec<TaskId> = s.tasks.iter().filter(|t| !matches!(t.state, TaskState::Dead | TaskState::New)).map(|t| t.id).collect();
    assert!(alive.len() >= 20, "{name}: {} tasks alive", alive.len());
    for t in &s.tasks {
        assert_ne!(t.class, ClassId::Ext, "{name}: {} still in ext after the disable", t.name);
    }
    let queued = s.tasks.iter().filter(|t| t.on_rq).count() as u64;
    let nr_running: u64 = s.rqs.iter().map(|rq| rq.nr_running as u64).sum();
    assert_eq!(queued, nr_running, "{name}: tasks on_rq vs runqueue counts");
    let before: Vec<Ns> = alive.iter().map(|&p| s.task(p).stats.runtime_ns).collect();

    s.run();
    assert_eq!(s.scx.state, EnableState::Disabled);
    assert_eq!(s.scx.exit.as_ref().map(|e| e.kind), Some(exit.kind), "{name}: one exit");
    for (&p, &rt) in alive.iter().zip(&before) {
        let t = s.task(p);
        assert!(t.state == TaskState::Dead || t.stats.runtime_ns > rt, "{name}: {} ({:?}) made no progress after the disable: lost", t.name, t.state);
    }
    for t in &s.tasks {
        assert!(t.class == ClassId::Fair || t.state == TaskState::Dead, "{name}: {} is {:?}", t.name, t.class);
        assert!(t.stats.runtime_ns > 0 || t.state == TaskState::New || t.created_at + 50 * MS > s.now(), "{name}: {} never ran", t.name);
    }
    let hb = s.metrics.iter().find(|m| m.name == "hb").expect("hackbench");
    assert_eq!(hb.exited, hb.nr_tasks, "{name}: hackbench finished under fair");
    Ejection { sim: s, exit }
}

#[test]
fn eject_bad_dsq_is_a_runtime_error() {
    let e = eject("bad_dsq", &[("bad_after", "30")], 600);
    assert_eq!(e.exit.kind, ExitKind::Error, "{:?}", e.exit);
    assert_eq!(e.exit.reason, "runtime error");
    assert!(e.exit.msg.contains("non-existent DSQ 0x5eed"), "{}", e.exit.msg);
}

#[test]
fn eject_bad_cpu_is_a_runtime_error() {
    let e = eject("bad_cpu", &[("bad_after", "5")], 600);
    assert_eq!(e.exit.kind, ExitKind::Error, "{:?}", e.exit);
    assert_eq!(e.exit.reason, "runtime error");
    assert!(e.exit.msg.contains("SCX_DSQ_LOCAL[_ON] target CPU") && e.exit.msg.contains("not allowed for"), "{}", e.exit.msg);
}

#[test]
fn eject_scx_bpf_error() {
    let e = eject("error", &[], 600);
    assert_eq!(e.exit.kind, ExitKind::ErrorBpf, "{:?}", e.exit);
    assert_eq!(e.exit.reason, "scx_bpf_error");
    assert!(e.exit.msg.contains("error.bpf.c: deliberate error at enqueue 100"), "{}", e.exit.msg);
}

#[test]
fn eject_stall_trips_the_watchdog() {
    let e = eject("stall", &[], 3000);
    assert_eq!(e.exit.kind, ExitKind::ErrorStall, "{:?}", e.exit);
    assert_eq!(e.exit.reason, "runnable task stall");
    assert!(e.exit.msg.contains("failed to run for"), "{}", e.exit.msg);
    // timeout_ms = 1000, checked every timeout / 2.
    assert!((1000 * MS..=2100 * MS).contains(&e.exit.at_ns), "detected at {}", e.exit.at_ns);
}

#[test]
fn eject_scx_bpf_exit_is_a_clean_unregister_with_its_code() {
    for (code, want) in [(None, 42), (Some("-7"), -7)] {
        let mut opts = vec![("exit_after", "50")];
        if let Some(c) = code {
            opts.push(("exit_code", c));
        }
        let e = eject("exit", &opts, 600);
        assert_eq!(e.exit.kind, ExitKind::UnregBpf, "{:?}", e.exit);
        assert!(!e.exit.kind.is_error());
        assert_eq!(e.exit.reason, "unregistered from BPF");
        assert_eq!(e.exit.exit_code, want);
        assert!(e.exit.msg.contains("exit.bpf.c: leaving after 50 enqueues"), "{}", e.exit.msg);
        assert!(e.sim.scx.stats.enabled_at.is_some());
    }
}

/// A load that is refused leaves the machine as it was: the run completes
/// under fair and no task ever joins ext.
fn refused(name: &str) -> (Sim, String) {
    let ops = Rc::new(Checked::new(load(&broken(name))));
    let mut s = sim(&mixed(4, 400));
    s.run_until(50 * MS);
    let nr = s.tasks.len();
    let err = s.scx_enable(ops.clone()).expect_err("load refused").to_string();
    assert_eq!(s.scx.state, EnableState::Disabled, "{name}");
    assert!(s.scx.stats.enabled_at.is_none(), "{name}: never enabled");
    assert_eq!(s.tasks.len(), nr);
    assert_eq!(ops.calls("enable") + ops.calls("running") + ops.calls("enqueue"), 0, "{name}: no task callback ran");
    s.run();
    for t in &s.tasks {
        assert_ne!(t.class, ClassId::Ext, "{name}: {}", t.name);
        assert!(t.stats.runtime_ns > 0 || t.state == TaskState::New || t.created_at + 50 * MS > s.now(), "{name}: {} never ran", t.name);
    }
    let hb = s.metrics.iter().find(|m| m.name == "hb").expect("hackbench");
    assert_eq!(hb.exited, hb.nr_tasks, "{name}: hackbench finished");
    (s, err)
}

#[test]
fn init_fail_refuses_the_enable() {
    let (_, err) = refused("init_fail");
    assert!(err.contains("ops.init() failed (-12)"), "{err}");
}

/// The kernel reports a failed ops.init() as an error exit (scx_error
/// "ops.init() failed (%d)", SCX_EXIT_ERROR) and still calls ops.exit()
/// (scx_disable_workfn). `Sim::scx_enable` returns the error but records
/// no exit and never calls ops.exit().
#[test]
fn init_fail_records_an_error_exit() {
    let (s, _) = refused("init_fail");
    let exit = s.scx.exit.clone().expect("the failed enable is recorded as an exit");
    assert_eq!(exit.kind, ExitKind::Error, "{exit:?}");
    assert!(exit.msg.contains("ops.init() failed (-12)"), "{}", exit.msg);
}

#[test]
fn bad_flags_refuses_the_load() {
    let (s, err) = refused("bad_flags");
    assert!(err.contains("invalid ops.flags") && err.contains("0x10000000000"), "{err}");
    assert!(s.scx.exit.is_none(), "no ops callback, no exit: {:?}", s.scx.exit);
}

// ---------------------------------------------------------------------------
// Bypass: disabling a scheduler that concentrated or entangled thousands of
// tasks, with 6.19's per-CPU bypass DSQs and load balancer
// (SCX_BYPASS_PERCPU) and with the old per-node global DSQs.

/// What a disable cost.
#[derive(Debug)]
struct Disable {
    /// disable_started_at .. disable_done_at.
    took: Ns,
    /// Longest runnable wait of an ext task while disabling.
    max_wait: Ns,
    lb_moved: u64,
    lock_wait: Ns,
    /// Time CPUs waited for runqueue locks (remote pulls, the disable's switches).
    rq_wait: Ns,
    hardlockups: u64,
    exit: Option<ExitKind>,
}

/// Loads the shipped `sched` on `toml`'s machine, runs until `unreg_at`,
/// checks the load with `check`, unregisters and runs until the disable is
/// done (every task back in fair).
fn disable_run(toml: &str, sched: &str, percpu: bool, unreg_at: Ns, check: impl Fn(&Sim)) -> Disable {
    let mut s = sim(toml);
    // 2,000+ tasks: the per-event invariant checks would dominate.
    s.check_invariants = false;
    s.features.set(Feature::SCX_BYPASS_PERCPU, percpu);
    s.scx_enable(Rc::new(load(&shipped(sched)))).unwrap_or_else(|e| panic!("{e}"));
    s.run_until(unreg_at);
    assert_eq!(s.scx.state, EnableState::Enabled, "{sched}: {:?}", s.scx.exit);
    check(&s);
    s.scx_unregister();
    let mut t = unreg_at;
    while s.scx.state != EnableState::Disabled {
        t += 50 * MS;
        assert!(t < unreg_at + 20_000 * MS, "{sched}: disable not done after 20 s");
        s.run_until(t);
    }
    assert!(s.tasks.iter().all(|t| t.class == ClassId::Fair), "{sched}: every task back in fair");
    let st = &s.scx.stats;
    Disable {
        took: st.disable_done_at.unwrap() - st.disable_started_at.unwrap(),
        max_wait: st.max_wait_while_disabling_ns,
        lb_moved: st.bypass_lb_moved,
        lock_wait: st.dsq_lock_wait_ns,
        rq_wait: st.rq_lock_wait_ns,
        hardlockups: st.hardlockups,
        exit: s.scx.exit.as_ref().map(|e| e.kind),
    }
}

fn show(what: &str, new: &Disable, old: &Disable) {
    let ms = |ns: Ns| ns as f64 / 1e6;
    eprintln!(
        "{what}: per-CPU bypass DSQs (6.19): disable {:.1} ms, max wait {:.1} ms, LB moved {}, DSQ lock wait {:.1} ms, rq lock wait {:.1} ms, hard lockups {}, exit {:?}",
        ms(new.took), ms(new.max_wait), new.lb_moved, ms(new.lock_wait), ms(new.rq_wait), new.hardlockups, new.exit
    );
    eprintln!(
        "{what}: per-node global DSQs (old):   disable {:.1} ms, max wait {:.1} ms, LB moved {}, DSQ lock wait {:.1} ms, rq lock wait {:.1} ms, hard lockups {}, exit {:?}",
        ms(old.took), ms(old.max_wait), old.lb_moved, ms(old.lock_wait), ms(old.rq_wait), old.hardlockups, old.exit
    );
}

/// scx_cpu0 (hosted) concentrates 2,000 hogs on CPU 0 of the 192-CPU EPYC;
/// then it is unregistered.
#[test]
fn bypass_cpu0_concentration_on_epyc() {
    let toml = "seed = 3\nduration = \"30s\"\n[machine]\npreset = \"epyc-2s-192\"\n[[workload]]\nkind = \"hog\"\nname = \"h\"\ncount = 2000\n";
    let concentrated = |s: &Sim| {
        let on0 = s.tasks.iter().filter(|t| t.cpu == 0).count();
        assert!(on0 > 1900, "cpu0 concentrates the tasks on CPU 0: {on0}");
        let busy = s.rqs.iter().filter(|rq| rq.curr.is_some()).count();
        assert!(busy <= 2, "{busy} CPUs busy under cpu0");
    };
    let new = disable_run(toml, "cpu0", true, 1000 * MS, concentrated);
    let old = disable_run(toml, "cpu0", false, 1000 * MS, concentrated);
    show("cpu0, 2000 hogs, epyc-2s-192", &new, &old);
    assert_eq!(new.exit, Some(ExitKind::Unreg));
    // Per-CPU bypass DSQs keep every task on CPU 0 until the bypass load
    // balancer spreads them over the node.
    assert!(new.lb_moved > 500, "LB moved {}", new.lb_moved);
    assert_eq!(old.lb_moved, 0, "no balancer with per-node DSQs");
    assert!(new.lock_wait < old.lock_wait, "DSQ lock wait: per-CPU {} ns vs per-node {} ns", new.lock_wait, old.lock_wait);
    // With per-node DSQs node 0's CPUs all pull from CPU 0's runqueue at
    // once: they queue on its lock.
    assert!(old.rq_wait > 0, "no runqueue lock wait with per-node DSQs");
    // NOT asserted, because it does not hold in the model: old per-node mode
    // making this disable slower than per-CPU + balancer. Here it is the
    // other way round (per-node ~22 ms, per-CPU ~520 ms): per-CPU bypass
    // DSQs leave the 2,000 tasks on CPU 0 until the balancer's first pass
    // 500 ms in, while with per-node DSQs the 95 other CPUs of node 0 drain
    // the node's DSQ at once, a tick per task (2,000 / 96 ~ 21 ticks). The
    // pulls off CPU 0's runqueue queue on its lock, but a pull holds it for
    // 0.5 us (rq_lock_ns + rq_detach_ns): 2,000 pulls are 1 ms of lock time.
    // At 40 us a pull the order still holds (108 ms vs 582 ms): the tasks the
    // balancer hands out are pulled off CPU 0's runqueue the same way.
    // The seed's stalls are per-CPU DSQs without the balancer (2 s here,
    // 20 s with 20,000 tasks): bypass_load_balancer_spreads_a_concentrated_queue.
    assert!(old.took < new.took, "if this flips, update the comment above: per-CPU {} ns vs per-node {} ns", new.took, old.took);
}

/// Experiment 002's contention case, scaled to 4,000 tasks: scx_simple (hosted)
/// with 20 groups of hogs, each affinitized to its own CPU subset,
/// unregistered at 0.8 s.
#[test]
fn bypass_simple_affinitized_groups_on_epyc() {
    // 2,000 tasks put the two modes level (12 ms each); the gap opens with
    // the load: 4,000 tasks 25 ms vs 41 ms, experiment 002's 8,000 102 ms vs 154 ms.
    let per = 200;
    let base = std::fs::read_to_string(manifest().join("../../scenarios/exp-002-bypass.toml")).expect("experiment 002 scenario");
    let toml = base
        .replace("count = 400", &format!("count = {per}"))
        .replace("[scheduler]\nkind = \"ext\"\nsched = \"simple\"\ndetach_at = \"800ms\"\n", "")
        .replace("duration = \"1800ms\"", "duration = \"30s\"");
    assert!(!toml.contains("[scheduler]") && toml.matches(&format!("count = {per}")).count() == 20, "{toml}");
    let spread = |s: &Sim| {
        let busy = s.rqs.iter().filter(|rq| rq.curr.is_some()).count();
        assert!(busy > 180, "simple keeps the machine busy: {busy} CPUs");
    };
    let new = disable_run(&toml, "simple", true, 800 * MS, spread);
    let old = disable_run(&toml, "simple", false, 800 * MS, spread);
    show(&format!("simple, 20 affinitized groups x {per} hogs, epyc-2s-192"), &new, &old);
    assert_eq!(new.exit, Some(ExitKind::Unreg));
    assert_eq!((new.hardlockups, old.hardlockups), (0, 0));
    assert!(new.took < old.took, "disable: per-CPU {} ns vs per-node {} ns", new.took, old.took);
    assert!(new.lock_wait < old.lock_wait, "DSQ lock wait: per-CPU {} ns vs per-node {} ns", new.lock_wait, old.lock_wait);
}


/// Scheduler overhead is CPU time of the CPU that pays it, so over a run it
/// cannot exceed nr_cpus x elapsed time. With the old per-node bypass DSQs
/// and 3,200 affinitized tasks on 64 CPUs, DSQ lock waits add up to ~163 s
/// of overhead in 0.6 s of a 64-CPU machine (38.4 CPU-seconds): a CPU that
/// waits for the lock is not held up by that wait (it is only charged for
/// it), so it queues again behind the same holders and every wait is
/// counted over and over (`scx_dsq_lock` / `Dsq::lock`).
#[test]
fn bypass_lock_wait_fits_in_cpu_time() {
    let (cpus, per) = (64, 400);
    let mut toml = format!("seed = 1\nduration = \"10s\"\n[machine]\ncpus = {cpus}\n");
    for g in 0..cpus / 8 {
        toml += &format!("[[workload]]\nkind = \"hog\"\nname = \"g{g}\"\ncount = {per}\ncpus = \"{}-{}\"\n", g * 8, g * 8 + 7);
    }
    let mut s = sim(&toml);
    s.check_invariants = false;
    s.features.set(Feature::SCX_BYPASS_PERCPU, false);
    s.scx_enable(Rc::new(load(&shipped("simple")))).unwrap_or_else(|e| panic!("{e}"));
    s.run_until(500 * MS);
    s.scx_unregister();
    let mut t = 500 * MS;
    while s.scx.state != EnableState::Disabled {
        t += 10 * MS;
        s.run_until(t);
    }
    let st = &s.scx.stats;
    let cpu_time = cpus as Ns * s.now();
    assert!(st.dsq_lock_wait_ns <= cpu_time, "DSQ lock wait {} ms > {} CPU-ms available", st.dsq_lock_wait_ns / MS, cpu_time / MS);
    assert!(st.overhead_ns <= cpu_time, "overhead {} ms > {} CPU-ms available", st.overhead_ns / MS, cpu_time / MS);
}
