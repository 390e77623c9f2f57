//! Control groups: the cgroup v2 tree of a scenario and the cpu and cpuset
//! controllers' files (kernel/sched/core.c's cpu_cgroup_* handlers,
//! kernel/cgroup/cpuset.c's effective masks).
//!
//! Each cgroup is a task group (`struct task_group`): a weight (cpu.weight,
//! turned into `tg->shares`), a bandwidth limit (cpu.max), a CPU set
//! (cpuset.cpus, intersected with the parent's effective set) and the
//! cpu.idle flag. Group 0 is the root. The per-CPU group entities and
//! runqueues that fair group scheduling uses live here too, indexed by
//! `group * nr_cpus + cpu`; the root's per-CPU runqueue is `rq.cfs` itself,
//! so with no cgroups configured nothing here is touched.

use serde::Serialize;

use crate::engine::time::{parse_duration, Ns, NSEC_PER_MSEC, NSEC_PER_SEC, NSEC_PER_USEC};
use crate::engine::{Cpu, TaskId};
use crate::machine::cpumask::CpuMask;
use crate::sched::rq::CfsRq;
use crate::sched::sim::Sim;
use crate::sched::task::{LoadWeight, SchedEntity, TaskState, NICE_0_LOAD, WEIGHT_IDLEPRIO};

/// The root task group.
pub const ROOT_TG: u32 = 0;
/// cpu.weight's range and default (CGROUP_WEIGHT_MIN / _MAX / _DFL).
pub const CGROUP_WEIGHT_MIN: u32 = 1;
/// The largest cpu.weight (CGROUP_WEIGHT_MAX).
pub const CGROUP_WEIGHT_MAX: u32 = 10_000;
/// The default cpu.weight (CGROUP_WEIGHT_DFL), equal to a nice-0 task's share.
pub const CGROUP_WEIGHT_DFL: u32 = 100;
/// The smallest weight a group entity gets on a CPU (MIN_SHARES).
pub const MIN_SHARES: u64 = 2;
/// cpu.max's period limits (min_cfs_quota_period 1 ms, max_cfs_quota_period 1 s)
/// and the smallest quota (1 ms).
pub const MIN_CFS_QUOTA_PERIOD: Ns = NSEC_PER_MSEC;
/// The longest cpu.max period (max_cfs_quota_period, 1 s).
pub const MAX_CFS_QUOTA_PERIOD: Ns = NSEC_PER_SEC;
/// The default period of cpu.max ("max 100000").
pub const DEFAULT_CFS_PERIOD: Ns = 100 * NSEC_PER_MSEC;

/// Entity ids: a task's id, or `GSE | index` for a group's entity on a CPU.
pub type Se = u32;
/// The bit that marks an entity id as a group entity.
pub const GSE: Se = 1 << 31;

/// A fair runqueue: the root one of a CPU (`tg == ROOT_TG`, `rq.cfs`) or a
/// group's on that CPU (`tg->cfs_rq[cpu]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cq {
    /// The CPU whose runqueue this is.
    pub cpu: Cpu,
    /// The task group (`ROOT_TG` for the CPU's `rq.cfs`).
    pub tg: u32,
}

impl Cq {
    /// The root fair runqueue of `cpu` (`&rq->cfs`).
    #[inline]
    pub fn root(cpu: Cpu) -> Cq {
        Cq { cpu, tg: ROOT_TG }
    }
}

/// tg->shares from cpu.weight (sched_weight_from_cgroup: 100 is NICE_0_LOAD).
pub fn shares_of_weight(weight: u32) -> u64 {
    (weight as u64 * NICE_0_LOAD + CGROUP_WEIGHT_DFL as u64 / 2) / CGROUP_WEIGHT_DFL as u64
}

/// cpu.max: a quota per period, or no limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct CpuMax {
    /// None: "max" (RUNTIME_INF).
    pub quota_ns: Option<Ns>,
    /// The period in ns after which the quota is refilled (cfs_b->period).
    pub period_ns: Ns,
    /// cpu.max.burst: unused quota a period may carry into the next, up to this.
    pub burst_ns: Ns,
}

impl Default for CpuMax {
    fn default() -> Self {
        CpuMax { quota_ns: None, period_ns: DEFAULT_CFS_PERIOD, burst_ns: 0 }
    }
}

/// Why a cpu.max value or a cgroup path is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CgroupError {
    /// cpu.max is not one or two words.
    #[error("{value:?}: {MAX_EXPECTED}")]
    MaxShape {
        /// The value given.
        value: String,
    },
    /// A cpu.max word is neither a duration nor microseconds.
    #[error("{value:?}: {word}: {err}; {MAX_EXPECTED}")]
    MaxWord {
        /// The value given.
        value: String,
        /// "quota" or "period".
        word: &'static str,
        /// Why the word does not parse.
        err: crate::engine::time::DurationError,
    },
    /// The period is outside the kernel's 1ms..1s.
    #[error("{value:?}: the period must be within 1ms..1s (the kernel refuses others with EINVAL)")]
    Period {
        /// The value given.
        value: String,
    },
    /// The quota is below the kernel's 1ms.
    #[error("{value:?}: the quota must be at least 1ms (the kernel refuses less with EINVAL)")]
    Quota {
        /// The value given.
        value: String,
    },
    /// A cgroup path that is not absolute.
    #[error("{path:?} must be an absolute path such as \"/web\"")]
    Relative {
        /// The path given.
        path: String,
    },
    /// A cgroup path with an empty component ("//").
    #[error("{path:?} has an empty component")]
    EmptyComponent {
        /// The path given.
        path: String,
    },
    /// A cgroup path with "." or "..".
    #[error("{path:?}: \".\" and \"..\" are not cgroup names")]
    DotComponent {
        /// The path given.
        path: String,
    },
}

/// What cpu.max accepts, for its error messages.
const MAX_EXPECTED: &str = "expected \"QUOTA PERIOD\" such as \"50ms 100ms\", or \"max\"";

/// One cpu.max word: a duration ("50ms") or, as the file takes it, a number of microseconds.
fn max_word(w: &str) -> Result<Ns, crate::engine::time::DurationError> {
    if let Ok(us) = w.parse::<u64>() {
        return Ok(us * NSEC_PER_USEC);
    }
    parse_duration(w)
}

/// Parses cpu.max: "QUOTA PERIOD", "max", "max PERIOD" or "QUOTA" (period
/// 100ms), with durations ("50ms 100ms") or microseconds ("50000 100000");
/// checks the kernel's limits (tg_set_cfs_bandwidth: period 1ms..1s, quota
/// at least 1ms).
pub fn parse_max(s: &str) -> Result<CpuMax, CgroupError> {
    let value = || s.to_string();
    let words: Vec<&str> = s.split_whitespace().collect();
    let (q, p) = match words.as_slice() {
        [q] => (*q, None),
        [q, p] => (*q, Some(*p)),
        _ => return Err(CgroupError::MaxShape { value: value() }),
    };
    let period_ns = match p {
        Some(p) => max_word(p).map_err(|err| CgroupError::MaxWord { value: value(), word: "period", err })?,
        None => DEFAULT_CFS_PERIOD,
    };
    if !(MIN_CFS_QUOTA_PERIOD..=MAX_CFS_QUOTA_PERIOD).contains(&period_ns) {
        return Err(CgroupError::Period { value: value() });
    }
    let quota_ns = if q == "max" {
        None
    } else {
        let quota = max_word(q).map_err(|err| CgroupError::MaxWord { value: value(), word: "quota", err })?;
        if quota < MIN_CFS_QUOTA_PERIOD {
            return Err(CgroupError::Quota { value: value() });
        }
        Some(quota)
    };
    Ok(CpuMax { quota_ns, period_ns, burst_ns: 0 })
}

/// What a cgroup's tasks received (cpu.stat): usage, time spent waiting
/// on a runqueue, and bandwidth throttling. A cgroup counts its descendants.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CgroupStats {
    /// CPU time the group's tasks ran, ns (cpu.stat usage_usec).
    pub runtime_ns: Ns,
    /// Time the group's tasks waited runnable on a runqueue, ns.
    pub wait_ns: Ns,
    /// Time the group was throttled by cpu.max, ns (cpu.stat throttled_usec).
    pub throttled_ns: Ns,
    /// Periods in which the group was throttled (cpu.stat nr_throttled).
    pub nr_throttled: u64,
    /// Bandwidth periods that elapsed while the group was active (cpu.stat nr_periods).
    pub nr_periods: u64,
}

/// One cgroup / task group.
#[derive(Clone, Debug)]
pub struct TaskGroup {
    /// The cgroup's path, e.g. "/web/api" ("/" for the root).
    pub path: String,
    /// The parent group's index (None for the root).
    pub parent: Option<u32>,
    /// Depth in the hierarchy: 0 for the root (`se->depth` of its entities is this).
    pub depth: u32,
    /// Declared by a `[[cgroup]]` table (false: an implicit intermediate one).
    pub declared: bool,
    /// cpu.weight.
    pub weight: u32,
    /// tg->shares: from the weight, or WEIGHT_IDLEPRIO for an idle group.
    pub shares: u64,
    /// cpu.max: quota and period.
    pub max: CpuMax,
    /// cpuset.cpus as written (None: inherit).
    pub cpus: Option<CpuMask>,
    /// cpuset.cpus.effective: the written set within the parent's effective
    /// set (the parent's when empty or not written).
    pub effective_cpus: CpuMask,
    /// cpu.idle.
    pub idle: bool,
    /// tg->load_avg: Σ of the per-CPU runqueues' last published load averages.
    pub load_avg: i64,
    /// What the group's tasks received (cpu.stat), descendants included.
    pub stats: CgroupStats,
    /// cpu.max's runtime pool and timers.
    pub bw: crate::sched::fair_bandwidth::CfsBandwidth,
}

/// A write to a group's files at a moment of the run (`[[cgroup_write]]`).
#[derive(Clone, Debug, PartialEq)]
pub struct CgroupWrite {
    /// When, from the start of the run (ns).
    pub at: Ns,
    /// The group written.
    pub group: u32,
    /// cpu.weight.
    pub weight: Option<u32>,
    /// cpu.max.
    pub max: Option<CpuMax>,
    /// cpu.idle.
    pub idle: Option<bool>,
    /// cgroup.procs: every live task of this workload moves into `group`.
    pub procs: Option<u32>,
}

/// The task groups and their per-CPU fair state.
#[derive(Debug)]
pub struct TaskGroups {
    /// Every group, the root first; a parent precedes its children.
    pub groups: Vec<TaskGroup>,
    /// The scenario's run-time writes, in scenario order.
    pub writes: Vec<CgroupWrite>,
    /// CPUs per group in the per-CPU tables (the machine's CPU count).
    pub nr_cpus: usize,
    /// `tg->cfs_rq[cpu]` at `group * nr_cpus + cpu` (the root's slots unused: rq.cfs).
    pub cfs_rqs: Vec<CfsRq>,
    /// `tg->se[cpu]`, same index: the group's entity in its parent's runqueue.
    pub ses: Vec<SchedEntity>,
    /// cfs_rq->tg_load_avg_contrib, same index.
    pub load_contrib: Vec<u64>,
    /// Some group has a quota (cfs_bandwidth_used()).
    pub bandwidth_used: bool,
}

impl TaskGroups {
    /// The root group alone.
    pub fn new(nr_cpus: usize) -> Self {
        let root = TaskGroup {
            path: "/".into(),
            parent: None,
            depth: 0,
            declared: true,
            weight: CGROUP_WEIGHT_DFL,
            shares: NICE_0_LOAD,
            max: CpuMax::default(),
            cpus: None,
            effective_cpus: CpuMask::full(nr_cpus),
            idle: false,
            load_avg: 0,
            stats: CgroupStats::default(),
            bw: Default::default(),
        };
        let mut g = TaskGroups { groups: Vec::new(), writes: Vec::new(), nr_cpus, cfs_rqs: Vec::new(), ses: Vec::new(), load_contrib: Vec::new(), bandwidth_used: false };
        g.push(root);
        g
    }

    fn push(&mut self, tg: TaskGroup) -> u32 {
        self.groups.push(tg);
        for _ in 0..self.nr_cpus {
            self.cfs_rqs.push(CfsRq::new());
            // init_tg_cfs_entry(): the group entity starts at NICE_0_LOAD.
            self.ses.push(SchedEntity { load: LoadWeight::default(), custom_slice: true, ..Default::default() });
            self.load_contrib.push(0);
        }
        (self.groups.len() - 1) as u32
    }

    /// Group scheduling is on: some cgroup besides the root exists.
    #[inline]
    pub fn enabled(&self) -> bool {
        self.groups.len() > 1
    }

    /// The index of the group with this path, if it exists.
    pub fn find(&self, path: &str) -> Option<u32> {
        let path = normalize(path);
        self.groups.iter().position(|g| g.path == path).map(|i| i as u32)
    }

    /// mkdir: the cgroup at `path`, creating missing ancestors with the
    /// defaults (weight 100, no limit, the parent's CPUs).
    pub fn mkdir(&mut self, path: &str) -> u32 {
        let path = normalize(path);
        if let Some(g) = self.find(&path) {
            return g;
        }
        let parent_path = match path.rfind('/') {
            Some(0) | None => "/".to_string(),
            Some(i) => path[..i].to_string(),
        };
        let parent = self.mkdir(&parent_path);
        let p = &self.groups[parent as usize];
        let tg = TaskGroup {
            path,
            parent: Some(parent),
            depth: p.depth + 1,
            declared: false,
            weight: CGROUP_WEIGHT_DFL,
            shares: NICE_0_LOAD,
            max: CpuMax::default(),
            cpus: None,
            effective_cpus: p.effective_cpus.clone(),
            idle: false,
            load_avg: 0,
            stats: CgroupStats::default(),
            bw: Default::default(),
        };
        self.push(tg)
    }

    /// Recomputes cpuset.cpus.effective down the tree (cpuset's
    /// update_cpumasks_hier): the written set within the parent's, or the
    /// parent's when that leaves nothing.
    pub fn update_effective_cpus(&mut self) {
        for g in 1..self.groups.len() {
            let parent = self.groups[g].parent.expect("non-root group has a parent") as usize;
            let pe = self.groups[parent].effective_cpus.clone();
            let eff = match &self.groups[g].cpus {
                Some(m) => {
                    let e = m.and(&pe);
                    if e.is_empty() {
                        pe
                    } else {
                        e
                    }
                }
                None => pe,
            };
            self.groups[g].effective_cpus = eff;
        }
    }

    /// Is `anc` the group `g` or one of its ancestors?
    pub fn is_ancestor(&self, anc: u32, mut g: u32) -> bool {
        loop {
            if g == anc {
                return true;
            }
            match self.groups[g as usize].parent {
                Some(p) => g = p,
                None => return false,
            }
        }
    }

    /// Index of a group's per-CPU state.
    #[inline]
    pub fn idx(&self, tg: u32, cpu: Cpu) -> usize {
        tg as usize * self.nr_cpus + cpu as usize
    }

    /// Charges `ns` of `what` to a group and its ancestors (cpuacct / cpu.stat).
    pub fn charge(&mut self, mut g: u32, ns: Ns, wait: bool) {
        loop {
            let s = &mut self.groups[g as usize].stats;
            if wait {
                s.wait_ns += ns;
            } else {
                s.runtime_ns += ns;
            }
            match self.groups[g as usize].parent {
                Some(p) => g = p,
                None => return,
            }
        }
    }
}

/// A cgroup path without a trailing slash ("/" for the root).
pub fn normalize(path: &str) -> String {
    let t = path.trim_end_matches('/');
    if t.is_empty() {
        "/".into()
    } else {
        t.to_string()
    }
}

/// Checks a cgroup path: absolute, no empty or dot components.
pub fn check_path(path: &str) -> Result<(), CgroupError> {
    if !path.starts_with('/') {
        return Err(CgroupError::Relative { path: path.to_string() });
    }
    for c in path.split('/').skip(1) {
        if c.is_empty() && path != "/" && !path.ends_with('/') {
            return Err(CgroupError::EmptyComponent { path: path.to_string() });
        }
        if c == "." || c == ".." {
            return Err(CgroupError::DotComponent { path: path.to_string() });
        }
    }
    Ok(())
}

impl Sim {
    /// sched_group_set_shares(): a new cpu.weight for group `g`.
    pub fn cgroup_set_weight(&mut self, g: u32, weight: u32) {
        let weight = weight.clamp(CGROUP_WEIGHT_MIN, CGROUP_WEIGHT_MAX);
        self.scx_group_set_weight(g, weight);
        let tg = &mut self.cg.groups[g as usize];
        tg.weight = weight;
        if tg.idle {
            return;
        }
        tg.shares = shares_of_weight(weight);
        self.update_group_entities(g);
    }

    /// Writing cpu.max / cpu.max.burst (tg_set_cfs_bandwidth).
    pub fn cgroup_set_max(&mut self, g: u32, max: CpuMax) {
        self.scx_group_set_bandwidth(g, &max);
        self.tg_set_cfs_bandwidth(g, max);
    }

    /// sched_group_set_idle(): cpu.idle on or off; an idle group's shares
    /// drop to WEIGHT_IDLEPRIO and its entities count as SCHED_IDLE.
    pub fn cgroup_set_idle(&mut self, g: u32, idle: bool) {
        self.scx_group_set_idle(g, idle);
        let tg = &mut self.cg.groups[g as usize];
        if tg.idle == idle {
            return;
        }
        tg.idle = idle;
        tg.shares = if idle { WEIGHT_IDLEPRIO as u64 } else { shares_of_weight(tg.weight) };
        self.update_group_entities(g);
    }

    /// The scenario's `index`-th `[[cgroup_write]]`, happening now: cpu.weight,
    /// cpu.max and cpu.idle as written, then cgroup.procs: one write per
    /// process of the workload (each moves its whole thread group).
    pub(crate) fn cgroup_write(&mut self, index: u32) {
        let w = self.cg.writes[index as usize].clone();
        if let Some(x) = w.weight {
            self.cgroup_set_weight(w.group, x);
        }
        if let Some(m) = w.max {
            self.cgroup_set_max(w.group, m);
        }
        if let Some(i) = w.idle {
            self.cgroup_set_idle(w.group, i);
        }
        if let Some(wl) = w.procs {
            let mut tgids: Vec<u32> = self.tasks.iter().filter(|t| t.workload == wl && t.state != TaskState::Dead).map(|t| t.tgid).collect();
            tgids.sort_unstable();
            tgids.dedup();
            for tgid in tgids {
                let procs: Vec<TaskId> = self.tasks.iter().filter(|t| t.tgid == tgid && t.state != TaskState::Dead).map(|t| t.id).collect();
                self.cgroup_attach_tasks(&procs, w.group);
            }
        }
    }

    /// After a shares change, every CPU's group entity is reweighted
    /// (__sched_group_set_shares: update_cfs_group for each CPU).
    fn update_group_entities(&mut self, g: u32) {
        for cpu in 0..self.nr_cpus() as Cpu {
            let e = GSE | self.cg.idx(g, cpu) as u32;
            self.update_curr_fair::<true>(cpu);
            self.update_cfs_group::<true>(e);
        }
    }

    /// Writing a task's pid into cgroup.procs (cgroup_attach_task ->
    /// sched_move_task, and cpuset_attach's affinity update): the task is
    /// taken off its queue, moved to the group's runqueue and put back.
    /// Returns false if the kernel would refuse the move (the group's CPUs
    /// exclude every CPU the task may use, or the sched_ext scheduler's
    /// ops.cgroup_prep_move() refused it). See `cgroup_attach_tasks`
    /// (sched/ext/cgroup.rs).
    pub fn cgroup_attach_task(&mut self, p: TaskId, g: u32) -> bool {
        if self.task(p).state == TaskState::Dead {
            return self.task(p).cgrp == g;
        }
        self.cgroup_attach(&[p], g, false)
    }
}
