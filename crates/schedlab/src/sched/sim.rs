//! [`Sim`]: the state of the whole simulated system (the machine, the
//! per-CPU runqueues, the task table, the root domain, the loaded sched_ext
//! scheduler, what workloads measure) and its constructor and accessors.
//! The event loop is in event_loop.rs, scheduling logic in the rest of
//! `sched`, behaviour programs in exec.rs.

use crate::engine::rng::{Rng, Stream};
use crate::engine::time::Ns;
use crate::engine::{Cpu, Engine, Event, TaskId};
use crate::machine::cost::CostModel;
use crate::machine::cpumask::CpuMask;
use crate::machine::irqoff::IrqOffModel;
use crate::machine::topology::Topology;
use crate::sched::features::Features;
use crate::sched::balance::Nohz;
use crate::sched::group_memo::GroupMemo;
use crate::sched::rq::{CfsRq, DomainState, RootDomain, Rq};
use crate::sched::task::{Program, Task};
use crate::sched::topology::SchedDomain;

/// How many `ran_on` records [`Sim::note_ran_on`] batches.
const RAN_ON_BATCH: usize = 1024;

/// From how many CPUs balancing keeps group statistics between walks
/// (below, only through a workload's start: [`Sim::keep_group_stats`]).
/// They pay where walks are long and cost their marks everywhere:
/// measured in instructions with them on throughout, +4.9 % on a 192-CPU
/// EPYC with 20,000 tasks, even at 512 CPUs, -4 % at 1,024 and -31 % at
/// 4,096 (EEVDF, 10 tasks per CPU running 2 ms and sleeping 4 ms).
pub const GROUP_MEMO_MIN_CPUS: usize = 512;

/// `Sim::curr_of` of an idle CPU.
pub(crate) const NO_CURR: TaskId = TaskId::MAX;

// Where these lived before sim.rs was split; kept for code that names them here.
pub use crate::engine::rng::draw_dist;
pub use crate::sched::ipc::{SpinLock, WaitObj};
pub use crate::sched::metrics::{Threshold, WorkloadMetrics};
pub use crate::sched::rt::RtBandwidth;
pub use crate::sched::Tunables;

/// The simulated system.
pub struct Sim {
    /// Simulated time and the event queue.
    pub engine: Engine,
    /// The machine: CPUs, cores, LLCs, nodes.
    pub topo: Topology,
    /// Sched domains per CPU, lowest level first.
    pub(crate) domains: Vec<Vec<SchedDomain>>,
    /// Costs of switches, IPIs, idle exit, migration and cache refill.
    pub costs: CostModel,
    /// Scheduler features (features.h) and their current values.
    pub features: Features,
    /// Sysctls and debugfs knobs.
    pub(crate) tunables: Tunables,
    /// sysctl_sched_base_slice after scaling by CPU count.
    pub(crate) base_slice_ns: Ns,
    /// Every task ever created, indexed by pid.
    pub tasks: Vec<Task>,
    /// Behaviour programs, shared by the tasks of a workload.
    pub programs: Vec<Program>,
    /// The CPU masks `Op::SetAffinity` steps set, by index.
    pub affinity_masks: Vec<CpuMask>,
    /// Wait objects: pipes, futexes, semaphores, barriers.
    pub objs: Vec<WaitObj>,
    /// Spinlocks.
    pub locks: Vec<SpinLock>,
    /// One runqueue per CPU.
    pub rqs: Vec<Rq>,
    /// Every runqueue's `curr` again, side by side (`NO_CURR` when idle),
    /// so that the event loop can prefetch the task an upcoming event's
    /// CPU runs without first waiting for that CPU's runqueue. Written
    /// only by [`Sim::set_curr`].
    pub(crate) curr_of: Vec<TaskId>,
    /// The task at the head of each root fair timeline (`NO_CURR`: none,
    /// or a group entity), which a CPU's next pick most likely takes: the
    /// event loop prefetches it before a step ends. Written only by
    /// `note_cfs_first`.
    pub(crate) cfs_first: Vec<TaskId>,
    /// Every CPU, its words shared with the `cpus_allowed` of each task
    /// allowed everywhere ([`CpuMask::shared`]).
    pub(crate) full_mask: CpuMask,
    /// Switch-ins on a CPU new to the task, not yet set in its `ran_on`
    /// ([`Sim::note_ran_on`]).
    ran_on_log: Vec<(TaskId, Cpu)>,
    /// [`Sim::force_lookahead`]'s choice, if made.
    pub(crate) lookahead_forced: Option<bool>,
    /// The CPUs of each LLC (`sd_llc_size`) and of each core, counted
    /// once: on a 4,096-CPU machine each count is 64 words of popcount,
    /// and wakeups ask for them.
    llc_weight: Vec<u32>,
    core_weight: Vec<u32>,
    /// What each workload measures.
    pub metrics: Vec<WorkloadMetrics>,
    /// Tasks each workload creates when it starts.
    pub(crate) workload_tasks: Vec<Vec<TaskId>>,
    /// One RNG stream per task (real mode hands each task its own).
    pub task_rngs: Vec<Rng>,
    /// The run's seed; every stream derives from it.
    pub seed: u64,
    /// When the run ends, ns.
    pub end_ns: Ns,
    /// The CPU whose event is being handled (smp_processor_id()); the
    /// hosting layer sets it around a SEC("syscall") program run on a CPU.
    pub this_cpu: Cpu,
    /// The context the event is handled in ([`IrqCtx`]): what
    /// in_hardirq() / in_serving_softirq() see.
    pub irq_ctx: IrqCtx,
    /// Per-LLC "has idle cores" hint (sd_llc_shared->has_idle_cores).
    pub(crate) llc_has_idle_cores: Vec<bool>,
    /// Per-LLC SIS_UTIL scan budget (sd_llc_shared->nr_idle_scan): how many
    /// CPUs select_idle_cpu() may look at. Refreshed by update_idle_cpu_scan()
    /// when a balance of the LLC's domain gathers its statistics; it starts at
    /// what an idle LLC's balance writes (the LLC's size), as on a machine
    /// that ran before the scenario began.
    pub(crate) llc_nr_idle_scan: Vec<std::cell::Cell<u32>>,
    /// Nohz idle balancing state (fair.c's `nohz`).
    pub(crate) nohz: Nohz,
    /// The root domain's balancing state (`struct root_domain`).
    pub(crate) rd: RootDomain,
    /// The next free process id, for fork().
    pub(crate) next_tgid: u32,
    /// Each process's (tgid's) thread group leader, its first task
    /// (sched/ext/procs.rs).
    pub(crate) thread_groups: std::collections::BTreeMap<u32, TaskId>,
    /// Cache-aware scheduling state: per process, per CPU, and totals.
    pub(crate) mm_sched: Vec<Option<crate::sched::cache::MmSched>>,
    /// Per-CPU cache footprint (cache-aware scheduling).
    pub(crate) cpu_cache: Vec<crate::sched::cache::CpuCache>,
    /// Cache-aware scheduling counters for the results.
    pub cache_stats: crate::sched::cache::CacheStats,
    /// The run ended (time reached `end_ns` or every finite workload finished).
    pub finished: bool,
    pub(crate) started: bool,
    /// Run invariant checks after every event (debug builds, tests).
    pub check_invariants: bool,
    /// The IRQ-off window model, when the scenario enables one.
    pub irqoff: Option<IrqOffModel>,
    /// sched_ext: the loaded BPF scheduler, its DSQs and counters
    /// (`struct scx_sched`, the kernel's `scx_root`); the per-CPU and
    /// per-task parts are `Rq::scx` and `Task::scx`.
    pub scx: Box<crate::sched::ext::ScxSched>,
    /// A scheduler to load at a later time (Event::ScxAttach).
    pub(crate) scx_pending: Option<std::rc::Rc<dyn crate::sched::ext::ops::ExtOps>>,
    /// Tasks carry their C `task_struct` views: set once a sched_ext
    /// scheduler is loaded or enabled ([`Sim::scx_build_views`]); a
    /// simulation without one never builds them.
    pub(crate) scx_views: bool,
    /// RT tasks queued on any runqueue: the sum of every `rt_nr_running`.
    /// The RT class's pick answers "none" from here when it is 0, without
    /// reading the CPU's RT runqueue, which on thousands of CPUs is a
    /// cache miss on every pick of a machine with no RT task.
    pub(crate) rt_queued: u32,
    /// Tracepoint consumers (Perfetto trace, utilisation timeline); None: tracing off.
    pub(crate) tracer: Option<Box<crate::results::trace::Tracer>>,
    /// The cgroup tree and the task groups' per-CPU fair state.
    pub cg: Box<crate::sched::cgroup::TaskGroups>,
    /// Group statistics kept between balance walks (None: summed on
    /// every walk, see [`Sim::keep_group_stats`]).
    pub(crate) group_memo: Option<Box<GroupMemo>>,
    /// The CPUs marked since the group memo was last brought up to date.
    pub(crate) balance_marked: Vec<Cpu>,
    /// [`Sim::keep_group_stats`]'s choice; None: by the machine's size.
    pub(crate) group_memo_pref: Option<bool>,
}

impl Sim {
    /// A machine with idle runqueues; tasks and workloads are added by the builder.
    pub fn new(topo: Topology, costs: CostModel, features: Features, tunables: Tunables, seed: u64, end_ns: Ns) -> Self {
        let n = topo.nr_cpus();
        let domains: Vec<Vec<SchedDomain>> = topo.all_sched_domains();
        let group_memo = if n >= GROUP_MEMO_MIN_CPUS { GroupMemo::new(&domains, n).map(Box::new) } else { None };
        let factor = 1 + (n.clamp(1, 8) as u64).ilog2() as u64;
        let base_slice_ns = tunables.fair.base_slice_normalized_ns * factor;
        let rqs = (0..n)
            .map(|c| Rq {
                cpu: c as Cpu,
                idle_since: Some(0),
                domains: domains[c]
                    .iter()
                    .map(|d| DomainState { last_balance: 0, balance_interval_ms: d.min_interval_ms, nr_balance_failed: 0 })
                    .collect(),
                avg_idle: 2 * tunables.fair.migration_cost_ns,
                cfs: CfsRq::new(),
                ..Default::default()
            })
            .collect();
        let nr_llcs = topo.nr_llcs();
        let llc_weight: Vec<u32> = topo.llc_span.iter().map(|m| m.weight() as u32).collect();
        let core_weight = topo.core_span.iter().map(|m| m.weight() as u32).collect();
        let llc_nr_idle_scan = llc_weight.iter().map(|&w| std::cell::Cell::new(w)).collect();
        Sim {
            engine: Engine::with_cpus(n),
            nohz: Nohz::new(n),
            topo,
            domains,
            costs,
            features,
            tunables,
            base_slice_ns,
            tasks: Vec::new(),
            programs: Vec::new(),
            affinity_masks: Vec::new(),
            objs: Vec::new(),
            locks: Vec::new(),
            rqs,
            curr_of: vec![NO_CURR; n],
            cfs_first: vec![NO_CURR; n],
            full_mask: CpuMask::full(n).shared(),
            ran_on_log: Vec::new(),
            lookahead_forced: None,
            llc_weight,
            core_weight,
            metrics: Vec::new(),
            workload_tasks: Vec::new(),
            task_rngs: Vec::new(),
            seed,
            end_ns,
            this_cpu: 0,
            irq_ctx: IrqCtx::Task,
            llc_has_idle_cores: vec![true; nr_llcs],
            llc_nr_idle_scan,
            rd: RootDomain::default(),
            next_tgid: 1,
            thread_groups: std::collections::BTreeMap::new(),
            mm_sched: Vec::new(),
            cpu_cache: vec![Default::default(); n],
            cache_stats: Default::default(),
            finished: false,
            started: false,
            check_invariants: cfg!(debug_assertions),
            irqoff: None,
            scx: Box::new(crate::sched::ext::ScxSched::new(n, 1)),
            scx_pending: None,
            scx_views: false,
            rt_queued: 0,
            tracer: None,
            cg: Box::new(crate::sched::cgroup::TaskGroups::new(n)),
            group_memo,
            balance_marked: Vec::new(),
            group_memo_pref: None,
        }
    }

    /// Current simulated time, ns.
    #[inline]
    pub fn now(&self) -> Ns {
        self.engine.now()
    }

    /// Sets `rq->curr` (None: the idle task), and its copy in `curr_of`.
    #[inline]
    pub(crate) fn set_curr(&mut self, cpu: Cpu, p: Option<TaskId>) {
        self.rqs[cpu as usize].curr = p;
        self.curr_of[cpu as usize] = p.unwrap_or(NO_CURR);
        self.balance_touch(cpu);
    }

    /// Number of CPUs sharing `cpu`'s LLC (`sd_llc_size`); 0 for a CPU
    /// that does not exist.
    #[inline]
    pub(crate) fn llc_size(&self, cpu: Cpu) -> u32 {
        self.topo.cpus.get(cpu as usize).and_then(|i| self.llc_weight.get(i.llc)).copied().unwrap_or(0)
    }

    /// Whether `cpu`'s core has more than one hardware thread.
    #[inline]
    pub(crate) fn core_has_smt(&self, cpu: Cpu) -> bool {
        self.topo.cpus.get(cpu as usize).and_then(|i| self.core_weight.get(i.core)).is_some_and(|&w| w > 1)
    }

    /// Whether the tasks and runqueues outgrow the caches (decided when
    /// the run starts): then the event loop and the balancer's domain walks
    /// prefetch, the engine looks ahead for them, and `ran_on` bits are set
    /// in batches. The engine holds the flag.
    #[inline]
    pub(crate) fn lookahead(&self) -> bool {
        self.engine.lookahead()
    }

    /// Prefetches (or not) whatever the size of the simulation, which
    /// otherwise decides it when the run starts. Only the speed differs:
    /// results and the event hash are the same either way (tests, benches).
    pub fn force_lookahead(&mut self, on: bool) {
        self.lookahead_forced = Some(on);
    }

    /// Marks `cpu` for the kept group statistics: its current task, task
    /// count or root fair runqueue changes.
    #[inline(always)]
    pub(crate) fn balance_touch(&mut self, cpu: Cpu) {
        if self.group_memo.is_some() {
            self.balance_mark(cpu);
        }
    }

    /// [`Sim::balance_touch`] with the memo kept: out of line, so that the
    /// many small functions it is in stay small where it is not.
    #[inline(never)]
    fn balance_mark(&mut self, cpu: Cpu) {
        let rq = &mut self.rqs[cpu as usize];
        if !rq.balance_marked {
            rq.balance_marked = true;
            self.balance_marked.push(cpu);
        }
    }

    /// Records that task `p` runs on `cpu`, in its `ran_on` mask. With
    /// [`Sim::lookahead`] the bits are set in batches: on a machine of thousands
    /// of CPUs the mask is 512 bytes per task, and setting one bit at each
    /// switch is a miss the switch waits for, where a batch's misses
    /// overlap. Every way a run pauses or ends ([`Sim::flush_ran_on`])
    /// sets the rest.
    #[inline]
    pub(crate) fn note_ran_on(&mut self, p: TaskId, cpu: Cpu) {
        if !self.lookahead() {
            self.tasks[p as usize].ran_on.set(cpu as usize);
            return;
        }
        self.ran_on_log.push((p, cpu));
        if self.ran_on_log.len() >= RAN_ON_BATCH {
            self.flush_ran_on();
        }
    }

    /// Sets the `ran_on` bits [`Sim::note_ran_on`] has recorded.
    pub(crate) fn flush_ran_on(&mut self) {
        for (p, cpu) in self.ran_on_log.drain(..) {
            self.tasks[p as usize].ran_on.set(cpu as usize);
        }
    }

    /// Number of CPUs (`nr_cpu_ids`).
    pub fn nr_cpus(&self) -> usize {
        self.rqs.len()
    }

    /// The task with pid `p`.
    #[inline]
    pub fn task(&self, p: TaskId) -> &Task {
        &self.tasks[p as usize]
    }

    /// The task with pid `p`, mutably.
    #[inline]
    pub fn task_mut(&mut self, p: TaskId) -> &mut Task {
        &mut self.tasks[p as usize]
    }

    /// `cpu_rq(cpu)`.
    #[inline]
    pub fn rq(&self, cpu: Cpu) -> &Rq {
        &self.rqs[cpu as usize]
    }

    /// `cpu_rq(cpu)`, mutably.
    #[inline]
    pub(crate) fn rq_mut(&mut self, cpu: Cpu) -> &mut Rq {
        &mut self.rqs[cpu as usize]
    }

    /// Adds a task in state New; it starts when its workload starts (or when forked).
    /// An `Op::SetAffinity` step setting `cpus`: the mask goes into
    /// [`Self::affinity_masks`] (once; equal masks share an entry).
    pub fn set_affinity_op(&mut self, cpus: CpuMask) -> crate::sched::task::Op {
        let mask = match self.affinity_masks.iter().position(|m| *m == cpus) {
            Some(i) => i,
            None => {
                self.affinity_masks.push(cpus);
                self.affinity_masks.len() - 1
            }
        };
        crate::sched::task::Op::SetAffinity { mask: mask as u32 }
    }

    /// Makes room for `n` more tasks (a hint: tasks can still be added
    /// past it).
    pub fn reserve_tasks(&mut self, n: usize) {
        self.tasks.reserve(n);
        self.task_rngs.reserve(n);
    }

    pub(crate) fn add_task(&mut self, mut t: Task) -> TaskId {
        let id = self.tasks.len() as TaskId;
        t.id = id;
        t.scx = crate::sched::ext::ScxTask::new(id);
        t.set_sched_params();
        t.loop_counts = vec![0; self.programs[t.prog as usize].loop_slots as usize];
        // Tasks allowed everywhere share one mask's words: on a machine of
        // thousands of CPUs that is 512 bytes less per task, and the words
        // an idle-CPU search reads stay in the caches.
        if t.cpus_allowed == self.full_mask {
            t.cpus_allowed = self.full_mask.clone();
        }
        self.next_tgid = self.next_tgid.max(t.tgid + 1);
        self.task_rngs.push(Rng::new(self.seed, Stream::Task(id)));
        self.tasks.push(t);
        self.scx_task_added(id);
        id
    }
}

/// The kernel context an event runs in (preempt_count()'s HARDIRQ and
/// SOFTIRQ bits): the tick, hrtimer wakeups, the RT period timer, IPIs and
/// irq_work run in hard interrupt context; bpf_timer callbacks and the
/// bypass load balancer's timer in softirq (their hrtimers are soft);
/// everything else (task steps, workqueue items, attach and detach) in
/// task context.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IrqCtx {
    /// Process context.
    Task,
    /// Softirq context (in_serving_softirq()).
    SoftIrq,
    /// Hard interrupt context (in_hardirq()).
    HardIrq,
}

impl IrqCtx {
    /// The context an event is handled in.
    pub fn of(ev: &Event) -> IrqCtx {
        match ev {
            Event::Tick { .. }
            | Event::Timer { .. }
            | Event::Ipi { .. }
            | Event::RtBandwidth { .. }
            | Event::CfsPeriod { .. }
            | Event::ScxDeferred { .. }
            | Event::ScxKick { .. }
            | Event::HrTick { .. } => IrqCtx::HardIrq,
            Event::ScxTimer { .. } | Event::ScxBypassLb => IrqCtx::SoftIrq,
            _ => IrqCtx::Task,
        }
    }

    /// The preempt_count() bits of this context (HARDIRQ_OFFSET 1 << 16,
    /// SOFTIRQ_OFFSET 1 << 8).
    pub fn preempt_count(self) -> u32 {
        match self {
            IrqCtx::Task => 0,
            IrqCtx::SoftIrq => 1 << 8,
            IrqCtx::HardIrq => 1 << 16,
        }
    }
}
