//! Real mode: run a scenario's workloads on the live kernel.
//!
//! The simulator's builder turns the scenario into tasks, behaviour programs
//! and wait objects exactly as for a simulation ([`schedlab::workload::world::build`]);
//! this module then executes those programs with real primitives instead of
//! simulating them: one process per simulated tgid, one thread per task;
//! `Run` is busy work measured in thread CPU time, `SleepPeriodic` and
//! rt-app's `Timer` are `clock_nanosleep(TIMER_ABSTIME)`, wait objects are pipes or unix sockets
//! (hackbench, stress switch) or futex semaphores, locks are spinlocks in
//! shared memory, `SetSched` is `sched_setattr`, `SetAffinity` is
//! `sched_setaffinity`, `Yield`/`YieldTo` are `sched_yield`, `Fork` is
//! `fork()`. Every task reads its own schedstat at the start and at the end,
//! so the figures cover exactly the measured window, and the controller
//! builds the same [`Results`] the simulator prints.
//!
//! The run is bounded: tasks stop at the scenario's duration, and the
//! controller kills (SIGKILL) and reaps every worker process after a grace
//! period, on SIGINT/SIGTERM/SIGHUP, or when it fails. Workers die with the
//! controller (PR_SET_PDEATHSIG).
//!
//! The real-mode layer of schedlab, a crate of its own so that what does
//! not run workloads on the live kernel (the Python package) does not link
//! it. It may import the core crate, `schedlab`: [`schedlab::engine`],
//! [`schedlab::sched`] (the tasks and behaviour programs the builder made),
//! [`schedlab::workload`] (the builder), [`schedlab::results`] (to report in
//! the simulator's format) and [`schedlab::import`] (the tracefs line
//! parser). Only the CLI sits above it.

#![deny(missing_docs)]
#![deny(unreachable_pub)]

pub mod calibrate;
mod cgroups;
mod exec;
mod shm;
pub mod sys;
pub mod tracefs;

use std::sync::Arc;

use schedlab::results::report::{CpuResult, Results};
use schedlab::workload::scenario::Scenario;
use schedlab::sched::sim::Sim;
use schedlab::sched::task::{Op, Policy};
use schedlab::engine::time::fmt_ns;

pub use exec::{calibrate_spin, BusyClock};
pub use tracefs::{TraceRequest, TraceStats};

/// Why a real run could not be done.
#[derive(Debug, thiserror::Error)]
pub enum RealError {
    /// The scenario cannot run on this host (e.g. it pins to a CPU the host lacks).
    #[error("{0}")]
    Input(String),
    /// The scenario needs privileges this process lacks.
    #[error("{0}")]
    Privilege(String),
    /// A system call or file failed.
    #[error("{0}")]
    Io(String),
    /// SIGINT, SIGTERM or SIGHUP arrived; everything was cleaned up.
    #[error("interrupted: every worker process was killed and reaped")]
    Interrupted,
}

/// Options of a real run.
#[derive(Clone, Debug)]
pub struct RealOptions {
    /// Time between forking the workers and the common start (thread creation, setup).
    pub setup_ns: u64,
    /// After the scenario's duration, how long to wait for workers before killing them.
    pub grace_ns: u64,
    /// A label for the kernel's scheduler, e.g. "eevdf" or "ext:simple".
    pub scheduler: String,
    /// Record the kernel's scheduler trace through tracefs into a Perfetto file.
    pub trace: Option<TraceRequest>,
    /// Run a scenario's workloads without making its cgroups (`--no-cgroups`).
    pub no_cgroups: bool,
    /// How a `Run` step measures its CPU time (sparse on a host, polled in the VM).
    pub busy_clock: exec::BusyClock,
}

impl Default for RealOptions {
    fn default() -> Self {
        RealOptions { setup_ns: 300_000_000, grace_ns: 3_000_000_000, scheduler: "eevdf".into(), trace: None, no_cgroups: false, busy_clock: exec::BusyClock::Sparse }
    }
}

/// A finished real run.
pub struct RealRun {
    /// The measured run in the simulator's results format.
    pub results: Results,
    /// Kernel release (uname -r).
    pub kernel: String,
    /// Measured window, start to the last task's end.
    pub wall_ns: u64,
    /// Things the reader should know (late starts, failed attribute changes).
    pub notes: Vec<String>,
    /// What `--trace` recorded.
    pub trace: Option<TraceStats>,
}

impl RealRun {
    /// The simulator's summary, with the header saying this was a real run.
    pub fn summary(&self) -> String {
        let s = self.results.summary();
        let mut lines: Vec<String> = s.lines().map(str::to_string).collect();
        if lines.len() > 1 {
            lines[0] = lines[0].replacen("schedlab: ", "schedlab (real): ", 1);
            lines[1] = format!("real run on Linux {}: {} measured", self.kernel, fmt_ns(self.wall_ns));
        }
        let mut out = lines.join("\n") + "\n";
        for n in &self.notes {
            out.push_str(&format!("note: {n}\n"));
        }
        out
    }
}

/// What one task needs to run for real.
#[derive(Clone, Debug)]
pub(crate) struct TaskPlan {
    pub name: String,
    pub workload: usize,
    pub tgid: u32,
    pub policy: Policy,
    pub nice: i32,
    pub rt_priority: u32,
    pub slice_ns: u64,
    pub cpus: Vec<usize>,
    pub prog: usize,
    /// First intended wake time of a cyclictest thread, from the start.
    pub first_wake_ns: u64,
    /// Its task group (index into the simulator's `cg.groups`; 0 the root).
    pub cgrp: u32,
    /// When the task's workload starts, from the common start.
    pub start_ns: u64,
    pub rng: schedlab::engine::rng::Rng,
}

/// A wait object made real.
#[derive(Clone, Copy, Debug)]
pub(crate) enum RealObj {
    /// A pipe or socket pair; a token is a message of `msg` bytes.
    Stream { read_fd: i32, write_fd: i32, msg: usize },
    /// A counting semaphore on a futex word in shared memory.
    Sem { word: usize },
}

/// Everything a worker needs; built before the fork, copied into each worker.
pub(crate) struct Plan {
    pub tasks: Vec<TaskPlan>,
    pub programs: Vec<schedlab::sched::task::Program>,
    pub affinity_masks: Vec<schedlab::machine::cpumask::CpuMask>,
    pub objs: Vec<RealObj>,
    pub shm: shm::Shm,
    pub start_ns: u64,
    pub deadline_ns: u64,
    pub spin_per_us: u64,
    pub busy_clock: exec::BusyClock,
    /// Host CPU of each scenario CPU.
    pub cpu_map: Vec<usize>,
    /// The scenario's [[cgroup_write]]s, applied by the controller on time.
    pub cgroup_writes: Vec<schedlab::sched::cgroup::CgroupWrite>,
    /// Per program and op: a `Run` that stands for a system call real mode
    /// makes anyway ([`syscall_runs`]), so it is not spun.
    pub syscall_runs: Vec<Vec<bool>>,
}

/// The `Run`s that model hackbench's write() and read(): the one just
/// before a `Post` and the one just after a `Wait` on a hackbench object.
/// Real mode writes and reads the message on a real pipe or socket, so the
/// kernel charges that cost itself; spinning the modelled cost as well
/// would pay for every message twice (measured on a 2-vCPU guest: 11.1 us
/// of CPU per socket message with the model's 2 x 2.5 us spun, 2.8-3.4 us
/// with the system calls alone).
fn syscall_runs(programs: &[schedlab::sched::task::Program], hackbench_obj: &[bool]) -> Vec<Vec<bool>> {
    let hb = |op: Option<&Op>, post: bool| match op {
        Some(Op::Post { obj, .. }) if post => hackbench_obj.get(*obj as usize).copied().unwrap_or(false),
        Some(Op::Wait { obj }) if !post => hackbench_obj.get(*obj as usize).copied().unwrap_or(false),
        _ => false,
    };
    programs
        .iter()
        .map(|p| {
            (0..p.ops.len())
                .map(|i| matches!(p.ops[i], Op::Run(_)) && (hb(p.ops.get(i + 1), true) || hb(i.checked_sub(1).and_then(|j| p.ops.get(j)), false)))
                .collect()
        })
        .collect()
}

/// The scenario as real mode builds it: the machine is this host (its usable
/// CPUs, numbered 0..n as the scenario numbers them), and the kernel's own
/// scheduler replaces the simulated sched_ext one.
pub fn host_scenario(s: &Scenario, host_cpus: usize) -> Scenario {
    let mut s = s.clone();
    s.machine.preset = None;
    s.machine.sysfs = None;
    s.machine.lscpu = None;
    s.machine.cpus = Some(host_cpus);
    s.machine.irqoff = None;
    s.scheduler.kind = "eevdf".into();
    s.scheduler.sched = None;
    s.scheduler.options.clear();
    s.scheduler.ops_flags.clear();
    s.scheduler.profile = None;
    s.scheduler.args = None;
    s.scheduler.attach_at = None;
    s.scheduler.detach_at = None;
    s
}

/// Runs `scenario` on this kernel and measures it.
pub fn run(scenario: &Scenario, file: &str, opts: &RealOptions) -> Result<RealRun, RealError> {
    let cpu_map = sys::allowed_cpus();
    let s = host_scenario(scenario, cpu_map.len());
    let sim = schedlab::workload::world::build(&s, file).map_err(|e| RealError::Input(format!("{e} (real mode runs on this host's {} usable CPUs)", cpu_map.len())))?;
    preflight(&sim)?;
    let moves = sim.programs.iter().any(|p| p.ops.iter().any(|o| matches!(o, Op::SetCgroup { .. })));
    if moves && !opts.no_cgroups {
        return Err(RealError::Input(
            "the scenario moves threads between cgroups as they run (an rt-app phase with its own \"taskgroup\"), which real mode does not do yet; pass --no-cgroups to run the workloads without their cgroups".into(),
        ));
    }
    let spin_per_us = calibrate_spin();
    let mut plan = make_plan(&sim, &s, cpu_map.clone(), spin_per_us)?;
    plan.busy_clock = opts.busy_clock;
    // The scenario's cgroups, removed when this goes out of scope: after
    // every worker is reaped, whether the run ends, fails or is interrupted.
    let host_cgroups = if opts.no_cgroups { None } else { cgroups::HostCgroups::create(&sim, &cpu_map)? };
    sys::catch_interrupts();
    // The kernel trace is set up, or refused, before anything starts.
    let mut ktrace = match opts.trace.as_ref().map(|t| tracefs::Recording::open(t, s.duration.0, cpu_map.len())).transpose() {
        Ok(k) => k,
        Err(e) => {
            sys::clear_interrupts();
            return Err(e);
        }
    };
    let stat_before = proc_stat();
    let now = sys::now_ns();
    plan.start_ns = now + opts.setup_ns + 2_000_000 * sim.tasks.len() as u64;
    plan.deadline_ns = plan.start_ns + s.duration.0;
    let plan = Arc::new(plan);
    if let Some(k) = &mut ktrace {
        k.arm(plan.start_ns, plan.deadline_ns + 100_000_000);
    }
    let outcome = spawn_and_wait(&plan, plan.deadline_ns + opts.grace_ns, host_cgroups.as_ref());
    if let Some(k) = &mut ktrace {
        k.stop();
    }
    let stat_after = proc_stat();
    close_objs(&plan);
    // Converted while SIGINT/SIGTERM only set the flag, so the ftrace
    // instance is removed whatever happens (dropping it removes it).
    let trace = match (ktrace, &outcome) {
        (Some(k), Ok(())) => Some(k.finish(&sim.tasks, &plan)),
        _ => None,
    };
    sys::clear_interrupts();
    outcome?;
    let trace = trace.transpose()?;
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").map(|s| s.trim().to_string()).unwrap_or_else(|_| "?".into());
    let mut sim = sim;
    if let Some(h) = &host_cgroups {
        h.read_stats(&mut sim);
    }
    let mut run = collect(sim, &s, file, &plan, &opts.scheduler, kernel, stat_before, stat_after);
    if opts.no_cgroups && !run.results.cgroups.is_empty() {
        run.notes.push("--no-cgroups: the scenario's cgroups were not made; every workload ran in schedlab's own cgroup".into());
    }
    run.trace = trace;
    Ok(run)
}

/// Refuses what this process may not do, with the fix, before anything starts.
fn preflight(sim: &Sim) -> Result<(), RealError> {
    let mut need: Vec<(String, Policy, i32, u32)> = Vec::new();
    for t in &sim.tasks {
        need.push((t.name.clone(), t.policy, t.nice, t.rt_priority));
    }
    for (i, p) in sim.programs.iter().enumerate() {
        for op in &p.ops {
            if let Op::SetSched { policy, nice, rt_priority } = op {
                need.push((format!("program {i} (sched_setattr at run time)"), *policy, *nice, *rt_priority));
            }
        }
    }
    // The most demanding request of each kind, tried for real on a probe thread.
    let rt = need.iter().filter(|n| n.1.is_rt()).max_by_key(|n| n.3).cloned();
    let neg = need.iter().filter(|n| !n.1.is_rt() && n.2 < 0).min_by_key(|n| n.2).cloned();
    for (what, policy, nice, prio) in rt.into_iter().chain(neg) {
        let p = policy;
        let r = std::thread::spawn(move || sys::sched_setattr(0, exec::policy_num(p), if p.is_rt() { 0 } else { nice }, prio, 0)).join().unwrap_or(Ok(()));
        if let Err(e) = r {
            let ask = if policy.is_rt() { format!("{} priority {prio}", policy.kernel_name()) } else { format!("nice {nice}") };
            let who = if sys::is_root() { "this process is root but lacks CAP_SYS_NICE (a container?)".to_string() } else { format!("this process is not root and RLIMIT_RTPRIO is {}", sys::rtprio_limit()) };
            return Err(RealError::Privilege(format!(
                "{what} asks for {ask}, which the kernel refused ({e}): {who}. Run as root (sudo schedlab run --real ...), grant CAP_SYS_NICE (setcap cap_sys_nice+ep), raise the rtprio/nice limits in /etc/security/limits.conf, or change the scenario (--set workload.N.policy=\"other\")"
            )));
        }
    }
    Ok(())
}

fn make_plan(sim: &Sim, s: &Scenario, cpu_map: Vec<usize>, spin_per_us: u64) -> Result<Plan, RealError> {
    // Which workload uses each object decides its kind: hackbench's ipc choice,
    // semaphores for unbounded objects (fork completion), pipes otherwise.
    let mut obj_workload: Vec<Option<usize>> = vec![None; sim.objs.len()];
    for t in &sim.tasks {
        for op in &sim.programs[t.prog as usize].ops {
            if let Op::Wait { obj } | Op::Post { obj, .. } = op {
                obj_workload[*obj as usize].get_or_insert(t.workload as usize);
            }
        }
    }
    let nsems = sim.objs.iter().filter(|o| o.capacity == u64::MAX).count();
    let samples: Vec<usize> = sim
        .tasks
        .iter()
        .map(|t| {
            // Room for one sample per period of the task's periodic sleep or
            // recording rt-app timer (an exponential period: its mean, twice).
            let period = sim.programs[t.prog as usize].ops.iter().find_map(|o| match o {
                Op::SleepPeriodic { period } => Some(*period),
                Op::Timer { period, record: true, .. } => Some(period.mean() / 2),
                _ => None,
            });
            period.map_or(0, |p| (s.duration.0 / p.max(1)) as usize + 16).min(4_000_000)
        })
        .collect();
    let shm = shm::Shm::new(sim.tasks.len(), sim.metrics.len(), sim.locks.len(), nsems, &samples).map_err(|e| RealError::Io(format!("shared memory: {e}")))?;
    let mut objs = Vec::new();
    let mut hackbench_obj = vec![false; sim.objs.len()];
    let mut sem = 0;
    for (i, o) in sim.objs.iter().enumerate() {
        if o.capacity == u64::MAX {
            objs.push(RealObj::Sem { word: sem });
            sem += 1;
            continue;
        }
        let hb = obj_workload[i].and_then(|w| match &s.workloads[w] {
            schedlab::workload::scenario::WorkloadSpec::Hackbench(h) => Some(h),
            _ => None,
        });
        hackbench_obj[i] = hb.is_some();
        let socket = hb.is_some_and(|h| h.ipc.as_deref().unwrap_or("socket") == "socket");
        let msg = hb.map_or(1, |h| h.datasize.unwrap_or(100).max(1) as usize);
        let (r, w) = if socket { sys::socketpair() } else { sys::pipe() }.map_err(|e| RealError::Io(format!("creating wait object {i}: {e}")))?;
        objs.push(RealObj::Stream { read_fd: r, write_fd: w, msg });
    }
    let tasks = sim
        .tasks
        .iter()
        .map(|t| TaskPlan {
            name: t.name.clone(),
            workload: t.workload as usize,
            tgid: t.tgid,
            policy: t.policy,
            nice: t.nice,
            rt_priority: t.rt_priority,
            slice_ns: if t.se.custom_slice { t.se.slice } else { 0 },
            cpus: t.cpus_allowed.iter().map(|c| cpu_map[c]).collect(),
            prog: t.prog as usize,
            first_wake_ns: t.next_wake,
            cgrp: t.cgrp,
            start_ns: sim.metrics[t.workload as usize].start_ns,
            rng: sim.task_rngs[t.id as usize].clone(),
        })
        .collect();
    Ok(Plan { tasks, programs: sim.programs.clone(), affinity_masks: sim.affinity_masks.clone(), objs, shm, start_ns: 0, deadline_ns: 0, spin_per_us, busy_clock: exec::BusyClock::Sparse, cpu_map, cgroup_writes: {
        // In time order (stable: equal times keep the scenario's order, as the simulator's event queue does).
        let mut w = sim.cg.writes.clone();
        w.sort_by_key(|w| w.at);
        w
    }, syscall_runs: syscall_runs(&sim.programs, &hackbench_obj) })
}

fn close_objs(plan: &Plan) {
    for o in &plan.objs {
        if let RealObj::Stream { read_fd, write_fd, .. } = *o {
            sys::close(read_fd);
            sys::close(write_fd);
        }
    }
}

/// Forks one worker per process (tgid), waits for all of them, and kills and
/// reaps them all at `kill_at`, on an interrupt, or on any failure.
fn spawn_and_wait(plan: &Arc<Plan>, kill_at: u64, cgroups: Option<&cgroups::HostCgroups>) -> Result<(), RealError> {
    let mut tgids: Vec<u32> = plan.tasks.iter().map(|t| t.tgid).collect();
    tgids.sort_unstable();
    tgids.dedup();
    let mut children: Vec<sys::pid_t> = Vec::new();
    let kill_all = |children: &[sys::pid_t]| {
        for &c in children {
            sys::kill(c, libc::SIGKILL);
        }
        for &c in children {
            while sys::try_wait(c).is_none() {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
    };
    for tgid in tgids {
        match sys::fork() {
            Ok(0) => {
                sys::die_with_parent();
                sys::default_signals_in_child();
                exec::worker(plan, tgid);
                sys::exit_now(0);
            }
            Ok(pid) => {
                children.push(pid);
                // Into its cgroup before the common start, all its threads.
                if let Some(cg) = cgroups {
                    let group = plan.tasks.iter().find(|t| t.tgid == tgid).map_or(0, |t| t.cgrp);
                    if let Err(e) = cg.attach(group, pid) {
                        kill_all(&children);
                        return Err(e);
                    }
                }
            }
            Err(e) => {
                kill_all(&children);
                return Err(RealError::Io(format!("fork: {e}")));
            }
        }
    }
    let mut alive = children.clone();
    let mut killed = false;
    // Worker pid of each tgid, for cgroup.procs writes.
    let mut tgid_list: Vec<u32> = plan.tasks.iter().map(|t| t.tgid).collect();
    tgid_list.sort_unstable();
    tgid_list.dedup();
    let mut writes_done = 0;
    while !alive.is_empty() {
        if let Some(cg) = cgroups {
            while let Some(w) = plan.cgroup_writes.get(writes_done).filter(|w| sys::now_ns() >= plan.start_ns + w.at) {
                let pids: Vec<i32> = match w.procs {
                    None => Vec::new(),
                    Some(wl) => tgid_list.iter().zip(&children).filter(|(g, _)| plan.tasks.iter().any(|t| t.tgid == **g && t.workload == wl as usize)).map(|(_, &p)| p).collect(),
                };
                if let Err(e) = cg.apply(w, &pids) {
                    kill_all(&children);
                    return Err(e);
                }
                writes_done += 1;
            }
        }
        if sys::interrupted() {
            kill_all(&children);
            return Err(RealError::Interrupted);
        }
        if !killed && sys::now_ns() >= kill_at {
            for &c in &alive {
                sys::kill(c, libc::SIGKILL);
            }
            killed = true;
        }
        alive.retain(|&c| sys::try_wait(c).is_none());
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    Ok(())
}

/// Per-CPU busy time from /proc/stat, in ns (index = host CPU).
fn proc_stat() -> Vec<(usize, u64)> {
    let hz = sys::clock_ticks();
    let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let cpu: usize = it.next()?.strip_prefix("cpu")?.parse().ok()?;
            let v: Vec<u64> = it.filter_map(|x| x.parse().ok()).collect();
            // user nice system idle iowait irq softirq steal: busy = all but idle and iowait.
            let busy: u64 = v.iter().take(8).enumerate().filter(|(i, _)| *i != 3 && *i != 4).map(|(_, x)| x).sum();
            Some((cpu, busy * 1_000_000_000 / hz))
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn collect(mut sim: Sim, s: &Scenario, file: &str, plan: &Plan, scheduler: &str, kernel: String, before: Vec<(usize, u64)>, after: Vec<(usize, u64)>) -> RealRun {
    let mut notes = Vec::new();
    let mut end = plan.start_ns;
    let (mut late, mut late_max) = (0, 0);
    let mut failed: Vec<String> = Vec::new();
    let mut escaped: Vec<String> = Vec::new();
    for (i, tp) in plan.tasks.iter().enumerate() {
        let st = plan.shm.task(i);
        let t = &mut sim.tasks[i];
        t.stats.runtime_ns = st.runtime_ns();
        t.stats.wait_ns = st.wait_ns();
        t.stats.switches = st.switches();
        t.stats.voluntary_switches = st.voluntary();
        t.stats.migrations = st.migrations();
        t.stats.wakeups = st.wakeups();
        t.stats.work = st.work();
        let (cgrp, ran, waited) = (t.cgrp, t.stats.runtime_ns, t.stats.wait_ns);
        sim.cg.charge(cgrp, ran, false);
        sim.cg.charge(cgrp, waited, true);
        let t = &mut sim.tasks[i];
        t.cpu = plan.cpu_map.iter().position(|&c| c as u32 == st.last_cpu()).unwrap_or(0) as u32;
        // Host CPU ids back to the scenario's. A CPU outside the map means
        // the task escaped its affinity onto a CPU the run does not use.
        let nr = t.ran_on.nr_bits();
        t.ran_on = schedlab::machine::cpumask::CpuMask::new(nr);
        for c in st.cpus_seen() {
            if let Some(i) = plan.cpu_map.iter().position(|&m| m == c) {
                t.ran_on.set(i);
            } else {
                escaped.push(format!("{} ran on host CPU {c}, outside the run's CPUs", tp.name));
            }
        }
        let m = &mut sim.metrics[tp.workload];
        m.work += st.work();
        if let Some(x) = st.exited_ns() {
            m.exited += 1;
            m.last_exit_ns = m.last_exit_ns.max(x.saturating_sub(plan.start_ns));
        }
        end = end.max(st.ended_ns());
        if st.started_late_ns() > 0 {
            late += 1;
            late_max = late_max.max(st.started_late_ns());
        }
        if let Some(e) = st.error() {
            failed.push(format!("{}: {e}", tp.name));
        }
        for lat in plan.shm.samples(i) {
            m.record_latency(lat);
        }
        if !st.finished() {
            failed.push(format!("{}: did not reach the end of the run (killed)", tp.name));
        }
    }
    if !escaped.is_empty() {
        notes.push(escaped.join("; "));
    }
    if late > 0 {
        notes.push(format!("{late} tasks were still being set up at the common start (up to {} late): their runs start that much later", schedlab::engine::time::fmt_ns(late_max)));
    }
    if !failed.is_empty() {
        notes.push(format!("{} tasks had problems: {}", failed.len(), failed.join("; ")));
    }
    let forks: u64 = (0..sim.metrics.len()).map(|w| plan.shm.forks(w)).sum();
    if forks > 0 {
        notes.push(format!("{forks} forked children ran; their CPU time is in their workload's total"));
    }
    let wall = end.saturating_sub(plan.start_ns);
    let title = s.title(file);
    let mut results = Results::collect(&sim, &title, &format!("real:{scheduler}"));
    for (w, wr) in results.workloads.iter_mut().enumerate() {
        wr.runtime_ns += plan.shm.fork_runtime(w);
    }
    results.sim_time_ns = wall;
    let machine_ns = wall as u128 * plan.cpu_map.len() as u128;
    for c in &mut results.cgroups {
        c.cpu_share_ppm = (c.runtime_ns as u128 * 1_000_000).checked_div(machine_ns).unwrap_or(0) as u64;
    }
    results.events = 0;
    results.event_hash = "real".into();
    results.machine = format!("host ({} usable CPUs: {})", plan.cpu_map.len(), cpulist(&plan.cpu_map));
    results.features_changed.clear();
    results.cpus = plan
        .cpu_map
        .iter()
        .enumerate()
        .map(|(i, &c)| {
            let b = before.iter().find(|x| x.0 == c).map_or(0, |x| x.1);
            let a = after.iter().find(|x| x.0 == c).map_or(0, |x| x.1);
            let busy = a.saturating_sub(b);
            CpuResult { cpu: i as u32, busy_ns: busy, util_ppm: if wall == 0 { 0 } else { (busy as u128 * 1_000_000 / wall as u128).min(1_000_000) as u64 }, switches: 0, ipis: 0, migrations_in: 0 }
        })
        .collect();
    // CPU time the run's CPUs spent on anything but the run's own tasks:
    // other processes, the hypervisor's steal, and kernel work the tasks'
    // schedstat does not hold (softirqs, kworkers, process set-up and
    // teardown: up to ~15 % for fork- and pipe-heavy runs on an idle
    // machine here). Beyond a fifth of the machine, other load competed.
    let busy: u64 = results.cpus.iter().map(|c| c.busy_ns).sum();
    let own: u64 = results.workloads.iter().map(|w| w.runtime_ns).sum();
    let other = busy.saturating_sub(own);
    if machine_ns > 0 && other as u128 * 5 > machine_ns {
        notes.push(format!(
            "the run's CPUs were busy {} beyond its own tasks ({:.0}% of their time): other load likely competed, so shares and latencies are disturbed; run on an otherwise idle machine",
            schedlab::engine::time::fmt_ns(other),
            other as f64 * 100.0 / machine_ns as f64
        ));
    }
    RealRun { results, kernel, wall_ns: wall, notes, trace: None }
}

fn cpulist(cpus: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if i == j { cpus[i].to_string() } else { format!("{}-{}", cpus[i], cpus[j]) });
        i = j + 1;
    }
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hackbenchs_message_runs_are_left_to_the_syscall() {
        let text = "duration = \"1s\"\n[machine]\ncpus = 2\n[[workload]]\nkind = \"hackbench\"\ngroups = 1\nfds = 2\nloops = 3\n[[workload]]\nkind = \"stress\"\nstressor = \"switch\"\nworkers = 1\n";
        let s = Scenario::parse(text, "t.toml", &[]).unwrap();
        let sim = schedlab::workload::world::build(&s, "t.toml").unwrap();
        // The objects hackbench's tasks use, as make_plan finds them.
        let mut hb = vec![false; sim.objs.len()];
        for t in sim.tasks.iter().filter(|t| t.workload == 0) {
            for op in &sim.programs[t.prog as usize].ops {
                if let Op::Wait { obj } | Op::Post { obj, .. } = op {
                    hb[*obj as usize] = true;
                }
            }
        }
        let paid = syscall_runs(&sim.programs, &hb);
        for t in &sim.tasks {
            let ops = &sim.programs[t.prog as usize].ops;
            let runs = ops.iter().filter(|o| matches!(o, Op::Run(_))).count();
            let skipped = paid[t.prog as usize].iter().filter(|p| **p).count();
            match t.workload {
                // A receiver's one read, a sender's write per receiver: all of them.
                0 => assert!(runs > 0 && skipped == runs, "{}: {skipped} of {runs}", t.name),
                // The switch stressor's pipes are real too, but its op cost is its own work.
                _ => assert_eq!(skipped, 0, "{}", t.name),
            }
            assert!(ops.iter().zip(&paid[t.prog as usize]).all(|(o, p)| !p || matches!(o, Op::Run(_))));
        }
    }
}
