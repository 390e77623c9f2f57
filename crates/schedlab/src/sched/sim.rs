//! The simulator: machine, runqueues, tasks and the event loop. Scheduling
//! logic lives in `sched`; behaviour programs are interpreted in `exec`.

use std::collections::VecDeque;

use hdrhistogram::Histogram;

use crate::machine::cost::CostModel;
use crate::machine::cpumask::CpuMask;
use crate::engine::{Cpu, Engine, Event, TaskId};
use crate::sched::features::Features;
use crate::engine::rng::{Rng, Stream};
use crate::sched::rq::{DomainState, Rq};
use crate::sched::task::{Dist, Program, Task};
use crate::engine::time::{Ns, NSEC_PER_MSEC};
use crate::machine::topology::Topology;
use crate::sched::topology::SchedDomain;

/// Scheduler tunables (sysctls and debugfs knobs), with kernel defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tunables {
    /// normalized_sysctl_sched_base_slice before CPU-count scaling (0.7 ms).
    pub base_slice_normalized_ns: Ns,
    /// sysctl_sched_migration_cost: a task that ran this recently is cache hot.
    pub migration_cost_ns: Ns,
    /// sysctl_sched_nr_migrate: tasks moved per balance pass at most.
    pub nr_migrate: u32,
    /// RR quantum (RR_TIMESLICE, 100 ms).
    pub rr_timeslice_ns: Ns,
    /// RT bandwidth period and runtime (sched_rt_period_us / sched_rt_runtime_us).
    pub rt_period_ns: Ns,
    pub rt_runtime_ns: Ns,
    pub rt_bandwidth: RtBandwidth,
    /// Fair deadline server runtime per period (50 ms per 1 s).
    pub fair_server_runtime_ns: Ns,
}

/// How RT tasks are kept from starving the fair class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RtBandwidth {
    /// 6.12+: a deferred deadline server runs fair tasks for 50 ms per second when RT starves them.
    FairServer,
    /// Legacy RT throttling: RT may use 950 ms per second on each CPU.
    Throttle,
    /// No protection (sched_rt_runtime_us = -1).
    Off,
}

impl Default for Tunables {
    fn default() -> Self {
        Tunables {
            base_slice_normalized_ns: 700_000,
            migration_cost_ns: 500_000,
            nr_migrate: 32,
            rr_timeslice_ns: 100 * NSEC_PER_MSEC,
            rt_period_ns: 1_000 * NSEC_PER_MSEC,
            rt_runtime_ns: 950 * NSEC_PER_MSEC,
            rt_bandwidth: RtBandwidth::FairServer,
            fair_server_runtime_ns: 50 * NSEC_PER_MSEC,
        }
    }
}

/// A wait object: a bounded token counter with FIFO wait lists, modelling a
/// pipe or socket buffer (messages), a futex-backed semaphore, or a barrier.
#[derive(Clone, Debug, Default)]
pub struct WaitObj {
    pub tokens: u64,
    pub capacity: u64,
    /// Tasks blocked waiting for a token.
    pub readers: VecDeque<TaskId>,
    /// Tasks blocked waiting for room.
    pub writers: VecDeque<TaskId>,
    /// LLC of the CPU that last posted: a reader in another LLC pulls the
    /// data's cache lines across.
    pub last_post_llc: Option<u32>,
    /// Request stamps carried by the tokens, in order (Some for objects
    /// that carry them: a Post pushes the poster's stamp, a Wait pops it).
    pub stamps: Option<VecDeque<Option<Ns>>>,
    /// Barrier: tasks arrived in the current round.
    pub arrived: u32,
}

/// A spinlock; waiters busy-wait on their CPUs.
#[derive(Clone, Debug, Default)]
pub struct SpinLock {
    pub holder: Option<TaskId>,
    pub spinners: Vec<TaskId>,
    pub acquisitions: u64,
    pub spin_ns: Ns,
}

/// Per-CPU interrupt-disabled windows (long irqsave sections, softirq
/// storms): interrupts that arrive inside one are delivered at its end.
#[derive(Clone, Debug)]
pub struct IrqOffModel {
    pub every: Dist,
    pub length: Dist,
    pub cpus: CpuMask,
    /// Current or next window per CPU, as [start, end).
    windows: Vec<(Ns, Ns)>,
    rngs: Vec<Rng>,
    /// Interrupts deferred, per CPU.
    pub deferred: Vec<u64>,
}

impl IrqOffModel {
    pub fn new(every: Dist, length: Dist, cpus: CpuMask, seed: u64) -> Self {
        let n = cpus.nr_bits();
        IrqOffModel {
            every,
            length,
            cpus,
            windows: vec![(0, 0); n],
            rngs: (0..n).map(|c| Rng::new(seed, Stream::Machine(c as u32))).collect(),
            deferred: vec![0; n],
        }
    }

    /// If `cpu` has interrupts disabled at `t`, when they are enabled again.
    /// Calls must come in non-decreasing `t` per CPU (the event order).
    pub fn disabled_until(&mut self, cpu: Cpu, t: Ns) -> Option<Ns> {
        let c = cpu as usize;
        if !self.cpus.test(c) {
            return None;
        }
        while self.windows[c].1 <= t {
            let end = self.windows[c].1;
            let gap = draw_dist(&mut self.rngs[c], &self.every).max(1);
            let len = draw_dist(&mut self.rngs[c], &self.length);
            self.windows[c] = (end + gap, end + gap + len);
        }
        let (start, end) = self.windows[c];
        (start <= t).then(|| {
            self.deferred[c] += 1;
            end
        })
    }
}

/// Draws a duration from a distribution.
pub fn draw_dist(rng: &mut Rng, d: &Dist) -> Ns {
    match *d {
        Dist::Const(v) => v,
        Dist::Uniform(a, b) => rng.range_inclusive(a, b),
        Dist::Exp(mean) => rng.exponential(mean),
    }
}

/// A threshold a workload counts latencies above.
#[derive(Clone, Debug)]
pub struct Threshold {
    pub label: String,
    pub above_ns: Ns,
    pub count: u64,
}

/// What a workload measured.
#[derive(Clone, Debug)]
pub struct WorkloadMetrics {
    pub name: String,
    pub kind: String,
    pub latency: Histogram<u64>,
    pub thresholds: Vec<Threshold>,
    pub start_ns: Ns,
    pub nr_tasks: u32,
    pub exited: u32,
    pub last_exit_ns: Ns,
    pub work: u64,
    /// Whether the workload's result is a makespan (all its tasks exit).
    pub finite: bool,
    /// Exact extremes and sum of `latency` (the histogram rounds to 3
    /// significant digits; cyclictest prints exact Min/Avg/Max).
    pub latency_min_ns: Ns,
    pub latency_max_ns: Ns,
    pub latency_sum_ns: u128,
    /// cyclictest --histogram=N: per-microsecond counts 0..N-1 us; samples
    /// of N us and above are overflows.
    pub us_histogram: Option<Vec<u64>>,
    pub us_overflows: u64,
    /// Request latencies (schbench, server), next to wakeup latencies.
    pub request_latency: Option<Histogram<u64>>,
    /// Requests/operations count as throughput per second (schbench, server).
    pub reports_rate: bool,
}

impl WorkloadMetrics {
    pub fn new(name: &str, kind: &str) -> Self {
        WorkloadMetrics {
            name: name.to_string(),
            kind: kind.to_string(),
            latency: Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid histogram bounds"),
            thresholds: Vec::new(),
            start_ns: 0,
            nr_tasks: 0,
            exited: 0,
            last_exit_ns: 0,
            work: 0,
            finite: false,
            latency_min_ns: Ns::MAX,
            latency_max_ns: 0,
            latency_sum_ns: 0,
            us_histogram: None,
            us_overflows: 0,
            request_latency: None,
            reports_rate: false,
        }
    }

    /// Records a request latency (from the request's start to its end).
    pub fn record_request(&mut self, ns: Ns) {
        self.request_latency
            .get_or_insert_with(|| Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid histogram bounds"))
            .saturating_record(ns.max(1));
    }

    pub fn record_latency(&mut self, ns: Ns) {
        self.latency.saturating_record(ns.max(1));
        self.latency_min_ns = self.latency_min_ns.min(ns);
        self.latency_max_ns = self.latency_max_ns.max(ns);
        self.latency_sum_ns += ns as u128;
        if let Some(h) = self.us_histogram.as_mut() {
            // cyclictest buckets by whole microseconds (latency / 1000).
            match h.get_mut((ns / 1_000) as usize) {
                Some(b) => *b += 1,
                None => self.us_overflows += 1,
            }
        }
        for t in &mut self.thresholds {
            if ns > t.above_ns {
                t.count += 1;
            }
        }
    }
}

/// The simulated system.
pub struct Sim {
    pub engine: Engine,
    pub topo: Topology,
    /// Sched domains per CPU, lowest level first.
    pub domains: Vec<Vec<SchedDomain>>,
    pub costs: CostModel,
    pub features: Features,
    pub tunables: Tunables,
    /// sysctl_sched_base_slice after scaling by CPU count.
    pub base_slice_ns: Ns,
    pub tasks: Vec<Task>,
    pub programs: Vec<Program>,
    pub objs: Vec<WaitObj>,
    pub locks: Vec<SpinLock>,
    pub rqs: Vec<Rq>,
    pub metrics: Vec<WorkloadMetrics>,
    /// Tasks each workload creates when it starts.
    pub workload_tasks: Vec<Vec<TaskId>>,
    pub task_rngs: Vec<Rng>,
    pub seed: u64,
    pub end_ns: Ns,
    /// The CPU whose event is being handled (smp_processor_id()).
    pub this_cpu: Cpu,
    /// Per-LLC "has idle cores" hint (sd_llc_shared->has_idle_cores).
    pub llc_has_idle_cores: Vec<bool>,
    /// CPUs whose tick is stopped because they are idle (nohz.idle_cpus_mask).
    pub nohz_idle: CpuMask,
    pub nohz_next_balance: Ns,
    /// CPUs with more than one queued task (rd->overloaded, as a count).
    pub nr_overloaded: u32,
    /// The next free process id, for fork().
    pub next_tgid: u32,
    /// Cache-aware scheduling state: per process, per CPU, and totals.
    pub mm_sched: Vec<Option<crate::sched::cache::MmSched>>,
    pub cpu_cache: Vec<crate::sched::cache::CpuCache>,
    pub cache_stats: crate::sched::cache::CacheStats,
    pub finished: bool,
    started: bool,
    /// Run invariant checks after every event (debug builds, tests).
    pub check_invariants: bool,
    pub irqoff: Option<IrqOffModel>,
    /// sched_ext: the loaded BPF scheduler and its DSQs (ext.c).
    pub scx: Box<crate::sched::ext::ScxState>,
    /// A scheduler to load at a later time (Event::ScxAttach).
    pub scx_pending: Option<std::rc::Rc<dyn crate::sched::ext::ops::ExtOps>>,
    /// Tracepoint consumers (Perfetto trace, utilisation timeline); None: tracing off.
    pub tracer: Option<Box<crate::results::trace::Tracer>>,
}

impl Sim {
    /// A machine with idle runqueues; tasks and workloads are added by the builder.
    pub fn new(topo: Topology, costs: CostModel, features: Features, tunables: Tunables, seed: u64, end_ns: Ns) -> Self {
        let n = topo.nr_cpus();
        let domains: Vec<Vec<SchedDomain>> = (0..n).map(|c| topo.sched_domains(c)).collect();
        let factor = 1 + (n.clamp(1, 8) as u64).ilog2() as u64;
        let base_slice_ns = tunables.base_slice_normalized_ns * factor;
        let rqs = (0..n)
            .map(|c| Rq {
                cpu: c as Cpu,
                idle_since: Some(0),
                domains: domains[c]
                    .iter()
                    .map(|d| DomainState { last_balance: 0, balance_interval_ms: d.min_interval_ms, nr_balance_failed: 0 })
                    .collect(),
                avg_idle: 2 * tunables.migration_cost_ns,
                cfs: crate::sched::rq::CfsRq { zero_vruntime: crate::sched::fair::VRUNTIME_BASE, ..Default::default() },
                ..Default::default()
            })
            .collect();
        let nr_llcs = topo.nr_llcs();
        Sim {
            engine: Engine::with_cpus(n),
            nohz_idle: CpuMask::full(n),
            topo,
            domains,
            costs,
            features,
            tunables,
            base_slice_ns,
            tasks: Vec::new(),
            programs: Vec::new(),
            objs: Vec::new(),
            locks: Vec::new(),
            rqs,
            metrics: Vec::new(),
            workload_tasks: Vec::new(),
            task_rngs: Vec::new(),
            seed,
            end_ns,
            this_cpu: 0,
            llc_has_idle_cores: vec![true; nr_llcs],
            nohz_next_balance: 0,
            nr_overloaded: 0,
            next_tgid: 1,
            mm_sched: Vec::new(),
            cpu_cache: vec![Default::default(); n],
            cache_stats: Default::default(),
            finished: false,
            started: false,
            check_invariants: cfg!(debug_assertions),
            irqoff: None,
            scx: Box::new(crate::sched::ext::ScxState::new(n, 1)),
            scx_pending: None,
            tracer: None,
        }
    }

    #[inline]
    pub fn now(&self) -> Ns {
        self.engine.now()
    }

    pub fn nr_cpus(&self) -> usize {
        self.rqs.len()
    }

    #[inline]
    pub fn task(&self, p: TaskId) -> &Task {
        &self.tasks[p as usize]
    }

    #[inline]
    pub fn task_mut(&mut self, p: TaskId) -> &mut Task {
        &mut self.tasks[p as usize]
    }

    #[inline]
    pub fn rq(&self, cpu: Cpu) -> &Rq {
        &self.rqs[cpu as usize]
    }

    #[inline]
    pub fn rq_mut(&mut self, cpu: Cpu) -> &mut Rq {
        &mut self.rqs[cpu as usize]
    }

    /// Adds a task in state New; it starts when its workload starts (or when forked).
    pub fn add_task(&mut self, mut t: Task) -> TaskId {
        let id = self.tasks.len() as TaskId;
        t.id = id;
        t.set_sched_params();
        t.loop_counts = vec![0; self.programs[t.prog as usize].loop_slots as usize];
        self.next_tgid = self.next_tgid.max(t.tgid + 1);
        self.task_rngs.push(Rng::new(self.seed, Stream::Task(id)));
        self.tasks.push(t);
        self.scx_task_added(id);
        id
    }

    /// Runs the simulation to its end time.
    pub fn run(&mut self) {
        self.run_with_progress(&mut |_, _| {});
    }

    /// Schedules the workload starts and the end (once).
    fn start(&mut self) {
        if self.started {
            return;
        }
        self.started = true;
        for w in 0..self.workload_tasks.len() {
            let at = self.metrics[w].start_ns;
            self.engine.schedule(at, Event::WorkloadStart { workload: w as u32 });
        }
        self.engine.schedule(self.end_ns, Event::End);
    }

    /// Processes every event up to and including time `limit`, then pauses;
    /// `run` resumes from there. For tests that intervene mid-run.
    pub fn run_until(&mut self, limit: Ns) {
        self.start();
        while !self.finished && self.engine.peek_time().is_some_and(|t| t <= limit) {
            let (t, ev) = self.engine.pop().expect("peeked");
            self.dispatch(t, ev);
        }
    }

    /// Runs the simulation, calling `progress(now, end)` every few thousand events.
    pub fn run_with_progress(&mut self, progress: &mut dyn FnMut(Ns, Ns)) {
        self.start();
        let mut n: u64 = 0;
        while let Some((t, ev)) = self.engine.pop() {
            if !self.dispatch(t, ev) {
                continue;
            }
            if self.finished {
                break;
            }
            n += 1;
            if n % 65_536 == 0 {
                progress(t, self.end_ns);
            }
        }
        self.finish_accounting();
    }

    /// Handles one event; returns false for a stale event that had no effect.
    fn dispatch(&mut self, t: Ns, ev: Event) -> bool {
        match ev {
            Event::End => {
                self.engine.account(t, &ev);
                self.finished = true;
                return true;
            }
            Event::StepDone { cpu, gen } => {
                if self.rq(cpu).step_gen != gen {
                    return false;
                }
                self.rq_mut(cpu).step_at = None;
                self.engine.account(t, &ev);
                self.this_cpu = cpu;
                self.on_step_done(cpu);
            }
            Event::Tick { cpu } => {
                if self.irq_deferred(cpu, t, ev) {
                    return false;
                }
                self.engine.account(t, &ev);
                self.this_cpu = cpu;
                self.on_tick(cpu);
            }
            Event::Timer { task, gen } => {
                if self.task(task).timer_gen != gen || self.irq_deferred(self.task(task).cpu, t, ev) {
                    return false;
                }
                self.engine.account(t, &ev);
                self.on_timer(task);
            }
            Event::Ipi { cpu } => {
                if self.irq_deferred(cpu, t, ev) {
                    return false;
                }
                self.engine.account(t, &ev);
                self.this_cpu = cpu;
                self.on_ipi(cpu);
            }
            Event::WorkloadStart { workload } => {
                self.engine.account(t, &ev);
                self.start_workload(workload);
            }
            Event::RtBandwidth { cpu } => {
                self.engine.account(t, &ev);
                self.this_cpu = cpu;
                self.on_rt_bandwidth(cpu);
            }
            Event::ScxDeferred { cpu, on, ipi } => {
                // IRQ-off windows are kernel sections. An IPI to a CPU that
                // runs a user task (the case irq_work_queue_on() is for) is
                // taken at once; irq_work raised on the calling CPU waits
                // for that CPU, which was in the kernel, to enable IRQs.
                let in_user = ipi && self.rq(on).curr.is_some() && self.rq(on).irq_until <= t;
                if !in_user && self.irq_deferred(on, t, ev) {
                    return false;
                }
                self.engine.account(t, &ev);
                self.on_scx_deferred(cpu, on);
            }
            Event::ScxKick { cpu } => {
                if self.irq_deferred(cpu, t, ev) {
                    return false;
                }
                self.engine.account(t, &ev);
                self.on_scx_kick(cpu);
            }
            Event::ScxTimer { id, gen } => {
                let cpu = self.scx.timers.get(&id).map(|&(_, c)| c);
                if let Some(c) = cpu {
                    if self.irq_deferred(c, t, ev) {
                        return false;
                    }
                }
                self.engine.account(t, &ev);
                self.on_scx_timer(id, gen);
            }
            Event::ScxWatchdog => {
                self.engine.account(t, &ev);
                self.on_scx_watchdog();
            }
            Event::ScxBypassLb => {
                self.engine.account(t, &ev);
                self.on_scx_bypass_lb();
            }
            Event::ScxDisable => {
                self.engine.account(t, &ev);
                self.on_scx_disable();
            }
            Event::ScxDisableStep => {
                self.engine.account(t, &ev);
                self.on_scx_disable_step();
            }
            Event::ScxAttach => {
                self.engine.account(t, &ev);
                if let Some(ops) = self.scx_pending.take() {
                    if let Err(e) = self.scx_enable(ops) {
                        self.scx.load_error = Some(e.to_string());
                    }
                }
            }
            Event::ScxDetach => {
                self.engine.account(t, &ev);
                self.scx_unregister();
            }
        }
        self.finish_event();
        true
    }

    /// Defers an interrupt that arrives while `cpu` has interrupts disabled.
    fn irq_deferred(&mut self, cpu: Cpu, t: Ns, ev: Event) -> bool {
        // The CPU is still in interrupt or scheduler work charged to it
        // (charge_irq), which runs with interrupts off: take it after.
        let busy_until = self.rqs[cpu as usize].irq_until;
        if busy_until > t {
            self.engine.schedule(busy_until, ev);
            return true;
        }
        let Some(model) = self.irqoff.as_mut() else { return false };
        match model.disabled_until(cpu, t) {
            Some(end) => {
                self.engine.schedule(end, ev);
                true
            }
            None => false,
        }
    }

    /// Return-from-interrupt on the local CPU: reschedule if asked to.
    fn finish_event(&mut self) {
        let cpu = self.this_cpu;
        // Interrupts come back on before the reschedule check, and the kick
        // irq_work runs: kicks of this CPU by itself take effect first.
        self.scx_run_self_kicks();
        if self.rq(cpu).need_resched {
            self.schedule(cpu);
        }
        // Scheduler overhead of sched_ext callbacks, kfuncs and DSQ locks
        // is CPU time of this CPU; its irq_works run after it.
        let cost = std::mem::take(&mut self.scx.cost_acc);
        if cost > 0 {
            self.scx.stats.overhead_ns += cost;
            self.charge_irq(cpu, cost);
            if cost > crate::sched::ext::HARDLOCKUP_NS {
                self.scx_hardlockup(cpu);
            }
        }
        self.scx_flush_local_irq_work();
        if self.check_invariants {
            self.assert_invariants();
        }
    }

    fn start_workload(&mut self, w: u32) {
        let tasks = self.workload_tasks[w as usize].clone();
        for p in tasks {
            // The launcher runs on CPU 0, or on the task's first allowed CPU if
            // it is pinned elsewhere; fork balancing then places the task.
            let parent_cpu = self.task(p).cpus_allowed.first().unwrap_or(0) as Cpu;
            self.this_cpu = parent_cpu;
            self.wake_up_new_task(p);
            self.finish_event();
        }
    }

    fn finish_accounting(&mut self) {
        let now = self.now();
        for c in 0..self.nr_cpus() {
            let rq = &mut self.rqs[c];
            if rq.curr.is_some() {
                rq.stats.busy_ns += now.saturating_sub(rq.busy_since);
                rq.busy_since = now;
            }
            if let Some(p) = rq.curr {
                let cls = crate::sched::class_of(self.tasks[p as usize].class);
                cls.update_curr(self, c as Cpu);
            }
        }
        for t in &mut self.tasks {
            if let Some(ws) = t.wait_start.take() {
                t.stats.wait_ns += now.saturating_sub(ws);
            }
        }
    }
}
