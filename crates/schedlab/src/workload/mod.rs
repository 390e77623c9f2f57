//! The workload layer: what runs on the simulated machine, and how a
//! scenario file becomes a ready-to-run simulator.
//!
//! - [`scenario`]: the TOML scenario format and `--set` overrides;
//! - [`world`]: builds a [`Sim`] from a scenario
//!   (machine, costs, tunables, features, scheduler, workloads);
//! - this module: the workload kinds (hog, cyclictest, hackbench, schbench,
//!   stress-ng stressors, VMs, servers...), each turned into tasks and
//!   behaviour programs;
//! - [`rtapp`]: rt-app JSON task descriptions as behaviour programs.
//!
//! May import: [`crate::engine`], [`crate::machine`], [`crate::sched`]
//! (tasks, programs, the `Sim` it fills) and the hosting layer (to load a
//! scenario's sched_ext scheduler).
//!
//! # Workload kinds
//!
//! Workload models: each turns a scenario entry into tasks and behaviour
//! programs, mirroring the flags of the tool it models.

pub mod cgroups;
mod common;
pub mod estimate;
pub mod replay;
pub mod rtapp;
pub mod scenario;
pub mod world;


use crate::machine::cpumask::CpuMask;
use crate::engine::TaskId;
use crate::workload::scenario::{
    parse_policy, CyclictestSpec, DistSpec, HackbenchSpec, HogSpec, MixedSpec, SchbenchSpec, ServerSpec, StressSpec, VmSpec, WorkloadSpec,
};
use crate::sched::ipc::{SpinLock, WaitObj};
use crate::sched::metrics::{Threshold, WorkloadMetrics};
use crate::sched::sim::Sim;
use crate::sched::task::{Dist, Measure, Op, Policy, Program, Task};
use crate::engine::time::{Ns, NSEC_PER_MSEC, NSEC_PER_USEC};

// The helpers rtapp.rs shares with the kinds here live below both, in
// common.rs; they are re-exported under their old paths.
pub use common::{new_task, BuildError};
pub(crate) use common::{check_nice, check_rt, cpus, indexed_name};

/// Adds the workload `spec` (index `w`) to the simulator; `links` are the
/// wait objects of the scenario's replay workloads ([`replay::Links::new`]).
pub fn build(sim: &mut Sim, w: u32, spec: &WorkloadSpec, links: &replay::Links) -> Result<(), BuildError> {
    let next_tgid = sim.next_tgid;
    let prefix = format!("workload.{w}");
    let (name, start) = match spec {
        WorkloadSpec::Hog(h) => (h.name.clone(), h.start),
        WorkloadSpec::Cyclictest(c) => (c.name.clone(), c.start),
        WorkloadSpec::Hackbench(h) => (h.name.clone(), h.start),
        WorkloadSpec::Stress(s) => (s.name.clone(), s.start),
        WorkloadSpec::Vm(v) => (v.name.clone(), v.start),
        WorkloadSpec::Schbench(s) => (s.name.clone(), s.start),
        WorkloadSpec::Mixed(m) => (m.name.clone(), m.start),
        WorkloadSpec::Server(s) => (s.name.clone(), s.start),
        WorkloadSpec::Rtapp(r) => (r.name.clone(), r.start),
        WorkloadSpec::Replay(r) => (Some(r.name.clone()), r.start),
    };
    let mut m = WorkloadMetrics::new(&name.unwrap_or_else(|| format!("{}{w}", spec.kind())), spec.kind());
    m.start_ns = start.map_or(0, |d| d.0);
    sim.metrics.push(m);
    sim.workload_tasks.push(Vec::new());
    let tasks = match spec {
        WorkloadSpec::Hog(h) => build_hog(sim, w, next_tgid, h, &prefix)?,
        WorkloadSpec::Cyclictest(c) => build_cyclictest(sim, w, next_tgid, c, &prefix)?,
        WorkloadSpec::Hackbench(h) => build_hackbench(sim, w, next_tgid, h, &prefix)?,
        WorkloadSpec::Stress(s) => build_stress(sim, w, next_tgid, s, &prefix)?,
        WorkloadSpec::Vm(v) => build_vm(sim, w, next_tgid, v, &prefix)?,
        WorkloadSpec::Schbench(s) => build_schbench(sim, w, next_tgid, s, &prefix)?,
        WorkloadSpec::Mixed(m) => build_mixed(sim, w, next_tgid, m, &prefix)?,
        WorkloadSpec::Server(s) => build_server(sim, w, next_tgid, s, &prefix)?,
        WorkloadSpec::Rtapp(r) => crate::workload::rtapp::build(sim, w, next_tgid, r, &prefix)?,
        WorkloadSpec::Replay(r) => replay::build(sim, w, next_tgid, r, links, &prefix)?,
    };
    sim.metrics[w as usize].nr_tasks = tasks.len() as u32;
    sim.workload_tasks[w as usize] = tasks;
    Ok(())
}

/// Registers a behaviour program and returns its id.
pub fn add_program(sim: &mut Sim, ops: Vec<Op>) -> u32 {
    let loop_slots = ops.iter().filter_map(|o| if let Op::Loop { slot, .. } = o { Some(slot + 1) } else { None }).max().unwrap_or(0);
    sim.programs.push(Program { ops, loop_slots });
    (sim.programs.len() - 1) as u32
}

/// Adds an empty workload (for tasks built by hand) and returns its index.
pub fn add_workload(sim: &mut Sim, name: &str, kind: &str, finite: bool) -> u32 {
    let mut m = WorkloadMetrics::new(name, kind);
    m.finite = finite;
    sim.metrics.push(m);
    sim.workload_tasks.push(Vec::new());
    (sim.metrics.len() - 1) as u32
}

/// Adds a task that starts with workload `w`.
pub fn spawn(sim: &mut Sim, w: u32, t: Task) -> TaskId {
    let id = sim.add_task(t);
    sim.workload_tasks[w as usize].push(id);
    sim.metrics[w as usize].nr_tasks += 1;
    id
}

fn build_hog(sim: &mut Sim, w: u32, tgid: u32, h: &HogSpec, prefix: &str) -> Result<Vec<TaskId>, BuildError> {
    if h.count == 0 {
        return Err(BuildError::field(format!("{prefix}.count"), "must be at least 1"));
    }
    if let Some(n) = h.nice.as_ref().and_then(|n| n.count()) {
        if n != h.count as usize {
            return Err(BuildError::field(format!("{prefix}.nice"), format!("{n} values for {} tasks: give one value or one per task", h.count)));
        }
    }
    let policy = policy_of(&h.policy, h.priority.unwrap_or(0), prefix)?;
    let allowed = cpus(sim, &h.cpus, &format!("{prefix}.cpus"))?;
    let run = h.run.as_ref().map(|d| d.0).unwrap_or(Dist::Const(100 * NSEC_PER_MSEC));
    let never_waits = h.sleep.as_ref().is_none_or(|s| s.0.mean() == 0);
    if run.mean() == 0 && never_waits {
        return Err(BuildError::field(format!("{prefix}.run"), "a task that neither runs nor sleeps would spin forever: give run a positive duration"));
    }
    let mut ops = vec![Op::Run(run), Op::Work];
    if h.yield_after_run {
        ops.push(Op::Yield);
    }
    if let Some(s) = &h.sleep {
        ops.push(Op::Sleep(s.0));
    }
    ops.push(Op::Loop { to: 0, count: None, slot: 0 });
    let prog = add_program(sim, ops);
    let mut ids = Vec::new();
    for i in 0..h.count {
        let nice = check_nice(h.nice.as_ref().map_or(0, |n| n.get(i as usize)), prefix)?;
        let pid = if h.threads { tgid } else { tgid + i };
        let mut t = new_task(indexed_name(&sim.metrics[w as usize].name, i), w, pid, policy, nice, h.priority.unwrap_or(0), allowed.clone(), prog);
        if let Some(s) = h.slice {
            if !(100 * NSEC_PER_USEC..=100 * NSEC_PER_MSEC).contains(&s.0) {
                return Err(BuildError::field(format!("{prefix}.slice"), format!("{} is outside 0.1ms..100ms", crate::engine::time::fmt_ns(s.0))));
            }
            t.se.slice = s.0;
            t.se.custom_slice = true;
        }
        t.working_set = h.working_set.unwrap_or(0);
        if let Some(cg) = &h.cgroup {
            if !cg.starts_with('/') {
                return Err(BuildError::field(format!("{prefix}.cgroup"), format!("{cg:?} must be an absolute path such as \"/workload/a\"")));
            }
            t.cgroup = cg.clone();
        }
        ids.push(sim.add_task(t));
    }
    Ok(ids)
}

fn build_cyclictest(sim: &mut Sim, w: u32, tgid: u32, c: &CyclictestSpec, prefix: &str) -> Result<Vec<TaskId>, BuildError> {
    let prio = c.priority.unwrap_or(0);
    let policy = policy_of(&c.policy, prio, prefix)?;
    let nice = check_nice(c.nice.unwrap_or(0), prefix)?;
    let interval = c.interval.map_or(1000 * NSEC_PER_USEC, |d| d.0);
    if interval == 0 {
        return Err(BuildError::field(format!("{prefix}.interval"), "must be positive"));
    }
    let (threads, distance, pin): (u32, Ns, Vec<CpuMask>) = if c.smp {
        let n = sim.nr_cpus();
        (n as u32, 0, (0..n).map(|cpu| CpuMask::single(n, cpu)).collect())
    } else {
        let threads = c.threads.unwrap_or(1);
        if threads == 0 {
            return Err(BuildError::field(format!("{prefix}.threads"), "must be at least 1"));
        }
        let distance = c.distance.map_or(500 * NSEC_PER_USEC, |d| d.0);
        let pin = match &c.affinity {
            Some(_) => {
                let mask = cpus(sim, &c.affinity, &format!("{prefix}.affinity"))?;
                let list: Vec<usize> = mask.iter().collect();
                (0..threads as usize).map(|i| CpuMask::single(sim.nr_cpus(), list[i % list.len()])).collect()
            }
            None => vec![CpuMask::full(sim.nr_cpus()); threads as usize],
        };
        (threads, distance, pin)
    };
    if c.loops == Some(0) {
        return Err(BuildError::field(format!("{prefix}.loops"), "must be at least 1 (leave it out to run until the end)"));
    }
    if c.duration.is_some_and(|d| d.0 == 0) {
        return Err(BuildError::field(format!("{prefix}.duration"), "must be positive, e.g. \"30s\" (leave it out to run until the end)"));
    }
    let m = &mut sim.metrics[w as usize];
    for t in c.spikes_above.clone().unwrap_or_default() {
        m.thresholds.push(Threshold { label: format!(">{}", crate::engine::time::fmt_ns(t.0)), above_ns: t.0, count: 0 });
    }
    match c.histogram {
        Some(0) => return Err(BuildError::field(format!("{prefix}.histogram"), "must be at least 1 (us), e.g. 400")),
        Some(n) if n > 10_000_000 => return Err(BuildError::field(format!("{prefix}.histogram"), format!("{n} buckets is too many: at most 10000000 (10 s)"))),
        Some(n) => m.us_histogram = Some(vec![0; n as usize]),
        None => {}
    }
    let start = m.start_ns;
    let mut ids = Vec::new();
    for i in 0..threads {
        let period = interval + i as Ns * distance;
        // -D and -l: the number of cycles before the thread exits.
        let by_duration = c.duration.map(|d| (d.0 / period).max(1));
        let cycles = match (by_duration, c.loops) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        // cyclictest's loop body: clock_nanosleep, clock_gettime, histogram update (~1 us).
        let mut ops = vec![Op::SleepPeriodic { period }, Op::Run(Dist::Const(NSEC_PER_USEC))];
        match cycles {
            None => ops.push(Op::Loop { to: 0, count: None, slot: 0 }),
            Some(n) => {
                // A u32 loop counter runs out after 4e9 cycles; an outer loop extends it.
                let inner = n.min(u32::MAX as u64) as u32;
                ops.push(Op::Loop { to: 0, count: Some(inner), slot: 0 });
                let outer = n / inner as u64;
                if outer > 1 {
                    ops.push(Op::Loop { to: 0, count: Some(outer.min(u32::MAX as u64) as u32), slot: 1 });
                }
                ops.push(Op::Exit);
            }
        }
        let prog = add_program(sim, ops);
        let mut t = new_task(format!("cyclictest-{i}"), w, tgid, policy, nice, prio, pin[i as usize].clone(), prog);
        if let Some(cg) = &c.cgroup {
            if !cg.starts_with('/') {
                return Err(BuildError::Field { field: format!("{prefix}.cgroup"), msg: format!("{cg:?} must be an absolute path such as \"/workload/a\"") });
            }
            t.cgroup = cg.clone();
        }
        let id = sim.add_task(t);
        // cyclictest starts each thread's clock at its own creation time, so
        // its wakeups have an arbitrary phase against the tick.
        let phase = sim.task_rngs[id as usize].below(period);
        sim.task_mut(id).next_wake = start + phase;
        ids.push(id);
    }
    Ok(ids)
}

fn build_hackbench(sim: &mut Sim, w: u32, tgid: u32, h: &HackbenchSpec, prefix: &str) -> Result<Vec<TaskId>, BuildError> {
    let groups = h.groups.unwrap_or(10);
    let fds = h.fds.unwrap_or(20);
    let loops = h.loops.unwrap_or(100);
    if groups == 0 || fds == 0 || loops == 0 {
        return Err(BuildError::field(prefix, "groups, fds and loops must be at least 1"));
    }
    let threads = match h.mode.as_deref().unwrap_or("process") {
        "threads" | "thread" => true,
        "process" => false,
        other => return Err(BuildError::field(format!("{prefix}.mode"), format!("{other:?} is not a mode: expected \"threads\" or \"process\""))),
    };
    let pipe = match h.ipc.as_deref().unwrap_or("socket") {
        "pipe" => true,
        "socket" => false,
        other => return Err(BuildError::field(format!("{prefix}.ipc"), format!("{other:?} is not an ipc kind: expected \"pipe\" or \"socket\""))),
    };
    let datasize = h.datasize.unwrap_or(100).max(1);
    // Buffer room in messages: a pipe holds 16 pages; a unix stream socket's
    // send buffer (wmem_default, 212992 bytes) is charged per skb truesize
    // (~datasize + 576 bytes of overhead for small messages).
    let capacity = if pipe { (65536 / datasize).max(1) } else { (212_992 / (datasize + 576)).max(1) };
    // The machine's cost of a write and a read that neither block nor wake
    // anyone (calibrate measures them); blocking and waking are the
    // scheduler's, charged where it pays them.
    let (wdef, rdef) = sim.costs.msg_ns(pipe, datasize);
    let write_cost = h.write_cost.map_or(wdef, |d| d.0);
    let read_cost = h.read_cost.map_or(rdef, |d| d.0);
    // What a thread refills after a migration; hackbench's own data is a
    // 100-byte buffer, so by default nothing (set it to model the stack and
    // socket lines a thread keeps hot).
    let working_set = h.working_set.unwrap_or(0);
    let allowed = cpus(sim, &h.cpus, &format!("{prefix}.cpus"))?;
    let nice = check_nice(h.nice.unwrap_or(0), prefix)?;
    sim.metrics[w as usize].finite = true;
    let mut ids = Vec::new();
    let mut pid = tgid;
    for g in 0..groups {
        let first_obj = sim.objs.len() as u32;
        for _ in 0..fds {
            sim.objs.push(WaitObj { tokens: 0, capacity, ..Default::default() });
        }
        // Receivers: read fds * loops messages from their own fd.
        for r in 0..fds {
            // Work counts messages received.
            let prog = add_program(sim, vec![Op::Wait { obj: first_obj + r }, Op::Run(Dist::Const(read_cost)), Op::Work, Op::Loop { to: 0, count: Some(fds * loops), slot: 0 }, Op::Exit]);
            let mut t = new_task(format!("hb-g{g}-r{r}"), w, if threads { tgid } else { pid }, Policy::Other, nice, 0, allowed.clone(), prog);
            t.working_set = working_set;
            pid += 1;
            ids.push(sim.add_task(t));
        }
        // Senders: write one message to every receiver, `loops` times.
        let mut ops = Vec::new();
        for r in 0..fds {
            ops.push(Op::Run(Dist::Const(write_cost)));
            ops.push(Op::Post { obj: first_obj + r, sync: true });
        }
        ops.push(Op::Loop { to: 0, count: Some(loops), slot: 0 });
        ops.push(Op::Exit);
        let prog = add_program(sim, ops);
        for s in 0..fds {
            let mut t = new_task(format!("hb-g{g}-s{s}"), w, if threads { tgid } else { pid }, Policy::Other, nice, 0, allowed.clone(), prog);
            t.working_set = working_set;
            pid += 1;
            ids.push(sim.add_task(t));
        }
    }
    Ok(ids)
}

/// The policy a workload asks for: explicit, or SCHED_FIFO when it gives an
/// RT priority (as rt-tests do), else SCHED_OTHER.
pub(crate) fn policy_of(policy: &Option<String>, prio: u32, prefix: &str) -> Result<Policy, BuildError> {
    let policy = match policy {
        Some(p) => parse_policy(p).map_err(|e| BuildError::field(format!("{prefix}.policy"), e.to_string()))?,
        None if prio > 0 => Policy::Fifo,
        None => Policy::Other,
    };
    check_rt(policy, prio, &format!("{prefix}.priority"))?;
    Ok(policy)
}

fn build_stress(sim: &mut Sim, w: u32, tgid: u32, s: &StressSpec, prefix: &str) -> Result<Vec<TaskId>, BuildError> {
    let n = sim.nr_cpus();
    let prio = s.priority.unwrap_or(0);
    let policy = policy_of(&s.policy, prio, prefix)?;
    let nice = check_nice(s.nice.unwrap_or(0), prefix)?;
    let allowed = cpus(sim, &s.cpus, &format!("{prefix}.cpus"))?;
    // stress-ng's N = 0: one worker per CPU; the yield stressor's default
    // here is two per CPU so that every yield has someone to yield to.
    let per_cpu = if s.stressor == "yield" { 2 } else { 1 };
    let workers = match s.workers {
        None | Some(0) => per_cpu * allowed.weight() as u32,
        Some(k) => k,
    };
    let name = sim.metrics[w as usize].name.clone();
    let mut ids = Vec::new();
    let mut add = |sim: &mut Sim, label: String, pid: u32, mask: CpuMask, prog: u32| {
        ids.push(sim.add_task(new_task(label, w, pid, policy, nice, prio, mask, prog)));
    };
    match s.stressor.as_str() {
        "cpu" => {
            // A CPU-bound loop; a bogo op is one unit of computation.
            let cost = s.op_cost.map_or(NSEC_PER_MSEC, |d| d.0.max(1));
            let prog = add_program(sim, vec![Op::Run(Dist::Const(cost)), Op::Work, Op::Loop { to: 0, count: None, slot: 0 }]);
            for i in 0..workers {
                add(sim, format!("{name}-cpu-{i}"), tgid + i, allowed.clone(), prog);
            }
        }
        "yield" => {
            // sched_yield() in a loop; a bogo op is one yield.
            let cost = s.op_cost.map_or(NSEC_PER_USEC, |d| d.0.max(1));
            let prog = add_program(sim, vec![Op::Run(Dist::Const(cost)), Op::Yield, Op::Work, Op::Loop { to: 0, count: None, slot: 0 }]);
            for i in 0..workers {
                add(sim, format!("{name}-yield-{i}"), tgid + i, allowed.clone(), prog);
            }
        }
        "switch" => {
            // A parent and a child exchange one-byte messages over two pipes,
            // pinned to the same CPU, so every message is a context switch.
            let cost = s.op_cost.map_or(NSEC_PER_USEC, |d| d.0.max(1));
            let cpus: Vec<usize> = allowed.iter().collect();
            for i in 0..workers {
                let ping = sim.objs.len() as u32;
                sim.objs.push(WaitObj { tokens: 0, capacity: 1, ..Default::default() });
                sim.objs.push(WaitObj { tokens: 0, capacity: 1, ..Default::default() });
                let pong = ping + 1;
                let parent = add_program(sim, vec![Op::Run(Dist::Const(cost)), Op::Post { obj: ping, sync: true }, Op::Wait { obj: pong }, Op::Work, Op::Loop { to: 0, count: None, slot: 0 }]);
                let child = add_program(sim, vec![Op::Wait { obj: ping }, Op::Run(Dist::Const(cost)), Op::Post { obj: pong, sync: true }, Op::Loop { to: 0, count: None, slot: 0 }]);
                let mask = CpuMask::single(n, cpus[i as usize % cpus.len()]);
                add(sim, format!("{name}-switch-{i}"), tgid + 2 * i, mask.clone(), parent);
                add(sim, format!("{name}-switch-{i}-child"), tgid + 2 * i + 1, mask, child);
            }
        }
        "fork" => {
            // fork(); the child runs briefly and exits; the parent waits for it.
            let cost = s.op_cost.map_or(20 * NSEC_PER_USEC, |d| d.0.max(1));
            let child_run = s.child_run.map_or(50 * NSEC_PER_USEC, |d| d.0);
            let burst = s.burst.unwrap_or(1).max(1);
            for i in 0..workers {
                let done = sim.objs.len() as u32;
                sim.objs.push(WaitObj { tokens: 0, capacity: u64::MAX, ..Default::default() });
                let child = add_program(sim, vec![Op::Run(Dist::Const(child_run)), Op::Post { obj: done, sync: false }, Op::Exit]);
                let mut ops = vec![
                    Op::Run(Dist::Const(cost)),
                    Op::Fork { prog: child },
                    Op::Wait { obj: done },
                    Op::Work,
                    Op::Loop { to: 0, count: Some(burst), slot: 0 },
                ];
                if let Some(p) = &s.pause {
                    ops.push(Op::Sleep(p.0));
                }
                ops.push(Op::Loop { to: 0, count: None, slot: 1 });
                let prog = add_program(sim, ops);
                add(sim, format!("{name}-fork-{i}"), tgid + i, allowed.clone(), prog);
            }
        }
        other => return Err(BuildError::field(format!("{prefix}.stressor"), format!("{other:?} is not a stressor: expected \"cpu\", \"yield\", \"switch\" or \"fork\""))),
    }
    Ok(ids)
}

fn build_vm(sim: &mut Sim, w: u32, tgid: u32, v: &VmSpec, prefix: &str) -> Result<Vec<TaskId>, BuildError> {
    let vms = v.vms.unwrap_or(2);
    let vcpus = v.vcpus.unwrap_or(16);
    if vms == 0 || vcpus == 0 {
        return Err(BuildError::field(prefix, "vms and vcpus must be at least 1"));
    }
    let work = v.work.as_ref().map_or(Dist::Exp(200 * NSEC_PER_USEC), |d| d.0);
    let critical = v.critical.as_ref().map_or(Dist::Exp(20 * NSEC_PER_USEC), |d| d.0);
    if work.mean() == 0 && critical.mean() == 0 {
        return Err(BuildError::field(format!("{prefix}.work"), "guest work and critical section cannot both be empty"));
    }
    let ple = match v.ple_window {
        None => Some(50 * NSEC_PER_USEC),
        Some(d) if d.0 == 0 => None,
        Some(d) => Some(d.0),
    };
    let allowed = cpus(sim, &v.cpus, &format!("{prefix}.cpus"))?;
    let name = sim.metrics[w as usize].name.clone();
    let mut ids = Vec::new();
    for vm in 0..vms {
        let lock = sim.locks.len() as u32;
        sim.locks.push(SpinLock::default());
        let prog = add_program(sim, vec![
            Op::Run(work),
            Op::Lock { lock, ple_ns: ple },
            Op::Run(critical),
            Op::Unlock { lock },
            Op::Work,
            Op::Loop { to: 0, count: None, slot: 0 },
        ]);
        let first = sim.tasks.len() as TaskId;
        let members: Vec<TaskId> = (0..vcpus).map(|i| first + i).collect();
        for i in 0..vcpus {
            let mut t = new_task(format!("{name}-vm{vm}-vcpu{i}"), w, tgid + vm, Policy::Other, 0, 0, allowed.clone(), prog);
            // yield_to() targets the lock holder; the peers are the VM's vCPUs.
            t.peers = members.iter().copied().filter(|&m| m != first + i).collect();
            ids.push(sim.add_task(t));
        }
    }
    Ok(ids)
}

fn dist_or(d: &Option<DistSpec>, default: Dist) -> Dist {
    d.as_ref().map_or(default, |d| d.0)
}

/// A wait object used as a message queue; `stamped` queues carry request stamps.
fn new_queue(sim: &mut Sim, capacity: u64, stamped: bool) -> u32 {
    sim.objs.push(WaitObj { capacity, stamps: stamped.then(Default::default), ..Default::default() });
    (sim.objs.len() - 1) as u32
}

fn build_schbench(sim: &mut Sim, w: u32, tgid: u32, s: &SchbenchSpec, prefix: &str) -> Result<Vec<TaskId>, BuildError> {
    let allowed = cpus(sim, &s.cpus, &format!("{prefix}.cpus"))?;
    let nice = check_nice(s.nice.unwrap_or(0), prefix)?;
    let msg_threads = s.message_threads.unwrap_or(1);
    let workers = s.threads.unwrap_or(allowed.weight() as u32);
    if msg_threads == 0 || workers == 0 {
        return Err(BuildError::field(prefix, "message_threads and threads must be at least 1"));
    }
    let footprint = s.cache_footprint_kb.unwrap_or(256) * 1024;
    let ops = s.operations.unwrap_or(5);
    // schbench sizes three square matrices of longs to fill the footprint and
    // multiplies them naively: n^3 multiply-adds, ~1 ns each.
    let n = ((footprint / 24) as f64).sqrt() as u64;
    let op_cost = dist_or(&s.op_cost, Dist::Const((n * n * n).max(1)));
    let sleep = dist_or(&s.sleep, Dist::Const(100 * NSEC_PER_USEC));
    let rps = s.rps.unwrap_or(0);
    let m = &mut sim.metrics[w as usize];
    m.reports_rate = true;
    m.request_latency = Some(crate::sched::metrics::duration_histogram());
    // One lock per CPU, as schbench's per_cpu_locks.
    let lock_base = sim.locks.len() as u32;
    if !s.no_locking {
        for _ in 0..sim.nr_cpus() {
            sim.locks.push(SpinLock::default());
        }
    }
    // The request: simulated networking, then the math under this CPU's lock.
    let mut request = vec![Op::Stamp, Op::Sleep(sleep)];
    if !s.no_locking {
        request.push(Op::LockCpu { base: lock_base });
    }
    for _ in 0..ops {
        request.push(Op::Run(op_cost));
    }
    if !s.no_locking {
        request.push(Op::UnlockCpu);
    }
    request.extend([Op::Record { what: Measure::Request }, Op::Work]);
    let name = sim.metrics[w as usize].name.clone();
    let mut ids = Vec::new();
    for mt in 0..msg_threads {
        let gap = (1_000_000_000 * msg_threads as u64).checked_div(rps);
        let (msg_prog, worker_prog) = if let Some(gap) = gap {
            // RPS mode: Poisson arrivals at this thread's share of -R, on an
            // absolute timeline so that timer slack does not lower the rate.
            // schbench drops requests beyond 8 pending per worker; here the
            // message thread waits for room instead.
            let queue = new_queue(sim, 8 * workers as u64, false);
            let msg = add_program(sim, vec![
                Op::Timer { slot: 0, period: Dist::Exp(gap.max(1)), absolute: true, record: false },
                Op::Post { obj: queue, sync: false },
                Op::Loop { to: 0, count: None, slot: 0 },
            ]);
            let mut worker = vec![Op::Wait { obj: queue }, Op::Record { what: Measure::Wakeup }];
            worker.extend(request.iter().cloned());
            worker.push(Op::Loop { to: 0, count: None, slot: 0 });
            (msg, add_program(sim, worker))
        } else {
            // Message mode: a worker posts its message thread and waits; the
            // message thread wakes the waiting workers.
            let ready = new_queue(sim, u64::MAX, false);
            let go = new_queue(sim, u64::MAX, false);
            let msg = add_program(sim, vec![Op::Wait { obj: ready }, Op::Run(Dist::Const(NSEC_PER_USEC)), Op::Post { obj: go, sync: false }, Op::Loop { to: 0, count: None, slot: 0 }]);
            let mut worker = vec![Op::Post { obj: ready, sync: false }, Op::Wait { obj: go }, Op::Record { what: Measure::Wakeup }];
            worker.extend(request.iter().cloned());
            worker.push(Op::Loop { to: 0, count: None, slot: 0 });
            (msg, add_program(sim, worker))
        };
        // All threads belong to one process, as schbench's pthreads.
        ids.push(sim.add_task(new_task(format!("{name}-msg{mt}"), w, tgid, Policy::Other, nice, 0, allowed.clone(), msg_prog)));
        for i in 0..workers {
            let mut t = new_task(format!("{name}-msg{mt}-w{i}"), w, tgid, Policy::Other, nice, 0, allowed.clone(), worker_prog);
            t.working_set = footprint;
            ids.push(sim.add_task(t));
        }
    }
    Ok(ids)
}

fn build_server(sim: &mut Sim, w: u32, tgid: u32, s: &ServerSpec, prefix: &str) -> Result<Vec<TaskId>, BuildError> {
    let allowed = cpus(sim, &s.cpus, &format!("{prefix}.cpus"))?;
    let nice = check_nice(s.nice.unwrap_or(0), prefix)?;
    let instances = s.instances.unwrap_or(4);
    let threads = s.threads.unwrap_or(4);
    if instances == 0 {
        return Err(BuildError::field(format!("{prefix}.instances"), "must be at least 1"));
    }
    if threads < 2 {
        return Err(BuildError::field(format!("{prefix}.threads"), format!("{threads}: a process needs a dispatcher and at least one worker: give 2 or more")));
    }
    let workers = threads - 1;
    let connections = s.connections.unwrap_or(2 * workers);
    if connections == 0 {
        return Err(BuildError::field(format!("{prefix}.connections"), "must be at least 1"));
    }
    let work = dist_or(&s.work, Dist::Exp(50 * NSEC_PER_USEC));
    let dispatch = dist_or(&s.dispatch, Dist::Const(5 * NSEC_PER_USEC));
    if work.mean() == 0 {
        return Err(BuildError::field(format!("{prefix}.work"), "must be positive, e.g. \"exp:50us\""));
    }
    let working_set = s.working_set.unwrap_or(4 << 20);
    let m = &mut sim.metrics[w as usize];
    m.reports_rate = true;
    m.request_latency = Some(crate::sched::metrics::duration_histogram());
    let name = m.name.clone();
    let mut ids = Vec::new();
    for inst in 0..instances {
        let requests = new_queue(sim, u64::MAX, true);
        let replies = new_queue(sim, u64::MAX, true);
        // The connections' first requests: replies without a stamp, so the
        // dispatcher starts by sending `connections` requests.
        let o = &mut sim.objs[replies as usize];
        o.tokens = connections as u64;
        o.stamps = Some(std::iter::repeat_n(None, connections as usize).collect());
        let dispatcher = add_program(sim, vec![
            Op::Wait { obj: replies },
            Op::Record { what: Measure::Request },
            Op::Run(dispatch),
            Op::Stamp,
            Op::Post { obj: requests, sync: false },
            Op::Loop { to: 0, count: None, slot: 0 },
        ]);
        let worker = add_program(sim, vec![
            Op::Wait { obj: requests },
            Op::Run(work),
            Op::Post { obj: replies, sync: false },
            Op::Work,
            Op::Loop { to: 0, count: None, slot: 0 },
        ]);
        let pid = tgid + inst;
        let mut t = new_task(format!("{name}-p{inst}-dispatch"), w, pid, Policy::Other, nice, 0, allowed.clone(), dispatcher);
        t.working_set = working_set;
        ids.push(sim.add_task(t));
        for i in 0..workers {
            let mut t = new_task(format!("{name}-p{inst}-w{i}"), w, pid, Policy::Other, nice, 0, allowed.clone(), worker);
            t.working_set = working_set;
            ids.push(sim.add_task(t));
        }
    }
    Ok(ids)
}

fn build_mixed(sim: &mut Sim, w: u32, tgid: u32, m: &MixedSpec, prefix: &str) -> Result<Vec<TaskId>, BuildError> {
    let allowed = cpus(sim, &m.cpus, &format!("{prefix}.cpus"))?;
    let ncpus = allowed.weight() as u32;
    let factor = m.oversubscription.unwrap_or(2.0);
    if !(factor > 0.0 && factor <= 100.0) {
        return Err(BuildError::field(format!("{prefix}.oversubscription"), format!("{factor} is not a factor: expected a number in (0, 100], e.g. 2.0")));
    }
    let yielders = m.yielders.unwrap_or(ncpus / 4);
    let pairs = m.switch_pairs.unwrap_or(ncpus / 4);
    let steady = (factor * ncpus as f64).round() as u32;
    let hogs = steady.saturating_sub(yielders + 2 * pairs);
    if hogs == 0 {
        return Err(BuildError::field(
            format!("{prefix}.oversubscription"),
            format!("{factor} x {ncpus} CPUs = {steady} threads leaves no room for hogs next to {yielders} yielders and {pairs} switch pairs: raise it or lower those"),
        ));
    }
    let nice = m.nice.clone().unwrap_or_else(|| vec![-5, 0, 0, 5, 10, 0, 0, 0, 5, -5, 0, 19]);
    if nice.is_empty() {
        return Err(BuildError::field(format!("{prefix}.nice"), "give at least one nice level"));
    }
    let cpus = m.cpus.clone();
    let name = sim.metrics[w as usize].name.clone();
    let mut ids = Vec::new();
    let mut tgid = tgid;
    // Each part is built by its own model, named after the part.
    let mut part = |sim: &mut Sim, label: &str, spec: WorkloadSpec, tgid: &mut u32| -> Result<(), BuildError> {
        sim.metrics[w as usize].name = format!("{name}-{label}");
        let built = match &spec {
            WorkloadSpec::Hog(h) => build_hog(sim, w, *tgid, h, prefix),
            WorkloadSpec::Stress(s) => build_stress(sim, w, *tgid, s, prefix),
            _ => unreachable!("mixed is made of hogs and stressors"),
        };
        sim.metrics[w as usize].name = name.clone();
        ids.extend(built?);
        *tgid = sim.next_tgid;
        Ok(())
    };
    let hog = |count: u32, nice: Option<crate::workload::scenario::OneOrMany<i32>>, policy: Option<String>, priority: Option<u32>, run: Dist, sleep: Dist| HogSpec {
        name: None,
        count,
        nice,
        cpus: cpus.clone(),
        policy,
        priority,
        slice: None,
        run: Some(DistSpec(run)),
        sleep: Some(DistSpec(sleep)),
        start: None,
        working_set: None,
        yield_after_run: false,
        cgroup: None,
        threads: false,
    };
    let stress = |stressor: &str, workers: u32, burst: Option<u32>, pause: Option<DistSpec>| StressSpec {
        name: None,
        stressor: stressor.into(),
        workers: Some(workers),
        op_cost: None,
        child_run: None,
        pause,
        burst,
        cpus: cpus.clone(),
        nice: None,
        policy: None,
        priority: None,
        start: None,
    };
    let levels: Vec<i32> = (0..hogs as usize).map(|i| nice[i % nice.len()]).collect();
    let run = dist_or(&m.run, Dist::Exp(4 * NSEC_PER_MSEC));
    let sleep = dist_or(&m.sleep, Dist::Exp(NSEC_PER_MSEC));
    part(sim, "hog", WorkloadSpec::Hog(hog(hogs, Some(crate::workload::scenario::OneOrMany::Many(levels)), None, None, run, sleep)), &mut tgid)?;
    if yielders > 0 {
        part(sim, "yield", WorkloadSpec::Stress(stress("yield", yielders, None, None)), &mut tgid)?;
    }
    if pairs > 0 {
        part(sim, "switch", WorkloadSpec::Stress(stress("switch", pairs, None, None)), &mut tgid)?;
    }
    let fifo = m.fifo_tasks.unwrap_or((ncpus / 6).max(1));
    if fifo > 0 {
        let run = dist_or(&m.fifo_run, Dist::Exp(2 * NSEC_PER_MSEC));
        let every = dist_or(&m.fifo_every, Dist::Exp(50 * NSEC_PER_MSEC));
        part(sim, "fifo", WorkloadSpec::Hog(hog(fifo, None, Some("fifo".into()), Some(m.fifo_priority.unwrap_or(50)), run, every)), &mut tgid)?;
    }
    let forkers = m.fork_workers.unwrap_or(2);
    if forkers > 0 {
        let pause = DistSpec(dist_or(&m.fork_pause, Dist::Exp(200 * NSEC_PER_MSEC)));
        part(sim, "fork", WorkloadSpec::Stress(stress("fork", forkers, Some(m.fork_burst.unwrap_or(50)), Some(pause))), &mut tgid)?;
    }
    Ok(ids)
}
