//! Debug checks of the fair class's invariants: what EEVDF's math (see
//! fair.rs) and the group hierarchy (fair_group.rs) promise after every
//! event. The kernel has no such checks at run time (it has SCHED_WARN_ON
//! in a few places); the simulator runs them after every event in debug
//! builds and with `--check`, and a violation names what broke as a
//! [`CfsViolation`].

use crate::engine::{Cpu, TaskId};
use crate::sched::cgroup::{Cq, Se, GSE, MIN_SHARES};
use crate::sched::fair::{calc_delta_fair, vdiff};
use crate::sched::sim::Sim;
use crate::sched::task::{ClassId, NICE_0_LOAD};

/// One broken fair-class invariant, as [`Sim::check_cfs`] and
/// [`check_saved_lag`] find it. `tg` is the task group's index (0 = the
/// CPU's root runqueue); an entity id with [`GSE`] set is a group entity.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CfsViolation {
    /// A timeline entry keyed by something other than the entity's deadline.
    #[error("entity {entity:#x}: timeline key {key} != deadline {deadline}")]
    TimelineKey {
        /// The entity.
        entity: Se,
        /// Its key in the timeline.
        key: u64,
        /// Its deadline.
        deadline: u64,
    },
    /// A timeline entry holding another vruntime than its entity's: the
    /// vruntime changed while the entity was on the timeline.
    #[error("entity {entity:#x}: timeline holds vruntime {held} != its vruntime {vruntime}")]
    TimelineVruntime {
        /// The entity.
        entity: Se,
        /// The vruntime its entry holds.
        held: u64,
        /// Its vruntime.
        vruntime: u64,
    },
    /// An entity on a runqueue's timeline that is not queued there.
    #[error("entity {entity:#x} on cpu{cpu}/tg{tg}'s timeline but not queued there")]
    NotQueued {
        /// The entity.
        entity: Se,
        /// The runqueue's CPU.
        cpu: Cpu,
        /// The runqueue's task group.
        tg: u32,
    },
    /// The LRU list of a flat runqueue and its queue disagree.
    #[error("cpu{cpu}: {lru} on the LRU list, {queued} queued")]
    Lru {
        /// The CPU.
        cpu: Cpu,
        /// Entities on the LRU list.
        lru: usize,
        /// Entities queued.
        queued: usize,
    },
    /// nr_queued does not count the queued entities.
    #[error("cpu{cpu}/tg{tg}: {queued} queued, nr_queued {nr_queued}")]
    NrQueued {
        /// The runqueue's CPU.
        cpu: Cpu,
        /// The runqueue's task group.
        tg: u32,
        /// Entities found queued.
        queued: usize,
        /// The runqueue's nr_queued.
        nr_queued: u32,
    },
    /// The runqueue's load is not the sum of its entities' weights.
    #[error("cpu{cpu}/tg{tg}: load {load} != Σ entity weights {sum}")]
    Load {
        /// The runqueue's CPU.
        cpu: Cpu,
        /// The runqueue's task group.
        tg: u32,
        /// The runqueue's load.weight.
        load: u64,
        /// The sum of its entities' weights.
        sum: u64,
    },
    /// avg_load / avg_vruntime no longer match the timeline.
    #[error("cpu{cpu}: avg sums drifted ({sum_w} vs {sum_weight}, {sum_key} vs {sum_w_vruntime})")]
    SumsDrifted {
        /// The CPU.
        cpu: Cpu,
        /// The runqueue's avg_load (sum of scaled weights).
        sum_w: u64,
        /// The same sum recomputed from the timeline.
        sum_weight: u64,
        /// The runqueue's avg_vruntime (sum of weighted keys).
        sum_key: i128,
        /// The same sum recomputed from the timeline.
        sum_w_vruntime: i128,
    },
    /// The weighted lags do not sum to zero (within rounding).
    #[error("cpu{cpu}: Σ weighted lag = {sum_lag}, load {load}")]
    LagSum {
        /// The CPU.
        cpu: Cpu,
        /// Σ weight × lag over the queued entities.
        sum_lag: i128,
        /// The runqueue's load, the rounding allowance.
        load: i128,
    },
    /// A live lag beyond the sanity bound (runaway virtual time).
    #[error("cpu{cpu}: task {task} lag {lag} ns exceeds ±{bound} ns")]
    LagBound {
        /// The CPU.
        cpu: Cpu,
        /// The task.
        task: TaskId,
        /// Its lag, ns.
        lag: i128,
        /// The bound, ns.
        bound: i128,
    },
    /// The pick is not the earliest eligible deadline.
    #[error("cpu{cpu}: pick {pick:#x} is not the earliest eligible deadline ({earliest:#x})")]
    Pick {
        /// The CPU.
        cpu: Cpu,
        /// The entity pick_eevdf() chose.
        pick: Se,
        /// The eligible entity with the earliest deadline.
        earliest: Se,
    },
    /// A dequeued task's saved lag beyond entity_lag()'s clamp.
    #[error("task {task}: saved vlag {vlag} beyond the clamp {limit}")]
    SavedLag {
        /// The task.
        task: TaskId,
        /// Its saved `se.vlag`.
        vlag: i64,
        /// The clamp entity_lag() applies.
        limit: i64,
    },
    /// A group entity queued without queued members, or the reverse
    /// (a throttled group's entity is out of the hierarchy).
    #[error("cpu{cpu}: group {group} entity on_rq={on_rq} with {queued} queued")]
    GroupOnRq {
        /// The CPU.
        cpu: Cpu,
        /// The group's path.
        group: String,
        /// Whether the group entity is queued.
        on_rq: bool,
        /// Entities queued in the group's runqueue.
        queued: u32,
    },
    /// A queued group entity's weight outside [MIN_SHARES, the group's shares].
    #[error("cpu{cpu}: group {group} weight {weight} outside [{MIN_SHARES}, {shares}]")]
    GroupWeight {
        /// The CPU.
        cpu: Cpu,
        /// The group's path.
        group: String,
        /// The group entity's weight on this CPU.
        weight: u64,
        /// The group's tg->shares.
        shares: u64,
    },
    /// A task queued in a group other than its own cgroup's.
    #[error("task {task}: in group {group} but its cgroup is {cgroup}")]
    TaskGroup {
        /// The task.
        task: TaskId,
        /// The group it is queued in.
        group: String,
        /// Its cgroup path.
        cgroup: String,
    },
    /// h_nr_queued does not count the tasks queued in the group or below.
    #[error("cpu{cpu}: group {group} h_nr_queued {have}, {tasks} tasks queued in it")]
    HNrQueued {
        /// The CPU.
        cpu: Cpu,
        /// The group's path.
        group: String,
        /// The group runqueue's h_nr_queued.
        have: u32,
        /// Tasks found queued in the group or below.
        tasks: u32,
    },
}

impl Sim {
    /// Debug checks of the EEVDF state of one CPU: its root runqueue and
    /// every group runqueue on it.
    pub(crate) fn check_cfs(&self, cpu: Cpu) -> Result<(), CfsViolation> {
        self.check_cfs_rq(Cq::root(cpu))?;
        if self.cg.enabled() {
            for g in 1..self.cg.groups.len() as u32 {
                self.check_cfs_rq(Cq { cpu, tg: g })?;
            }
            self.check_hierarchy(cpu)?;
        }
        Ok(())
    }

    /// Debug checks of one runqueue's EEVDF state.
    fn check_cfs_rq(&self, q: Cq) -> Result<(), CfsViolation> {
        let (cpu, tg) = (q.cpu, q.tg);
        let cfs = self.cfs(q);
        let mut sum_w: u64 = 0;
        let mut sum_key: i128 = 0;
        for &(d, p, v) in &cfs.timeline {
            let se = self.se(p);
            if se.deadline != d {
                return Err(CfsViolation::TimelineKey { entity: p, key: d, deadline: se.deadline });
            }
            if se.vruntime != v {
                return Err(CfsViolation::TimelineVruntime { entity: p, held: v, vruntime: se.vruntime });
            }
            if !se.on_rq || self.cfs_rq_of(p) != q {
                return Err(CfsViolation::NotQueued { entity: p, cpu, tg });
            }
            sum_w += se.load.weight;
            sum_key += self.entity_key::<true>(q, p) as i128 * se.load.weight as i128;
        }
        let curr = cfs.curr.filter(|&c| self.se(c).on_rq);
        let curr_w = curr.map_or(0, |c| self.se(c).load.weight);
        let queued = cfs.timeline.len() + usize::from(curr.is_some());
        if tg == 0 && !self.cg.enabled() && cfs.lru.len() != queued {
            return Err(CfsViolation::Lru { cpu, lru: cfs.lru.len(), queued });
        }
        if cfs.nr_queued as usize != queued {
            return Err(CfsViolation::NrQueued { cpu, tg, queued, nr_queued: cfs.nr_queued });
        }
        // Σ weights: the runqueue's load is its entities' weights (group entities' shares included).
        if cfs.load_weight != sum_w + curr_w {
            return Err(CfsViolation::Load { cpu, tg, load: cfs.load_weight, sum: sum_w + curr_w });
        }
        if sum_w != cfs.sum_weight || sum_key != cfs.sum_w_vruntime {
            return Err(CfsViolation::SumsDrifted {
                cpu,
                sum_w,
                sum_weight: cfs.sum_weight,
                sum_key,
                sum_w_vruntime: cfs.sum_w_vruntime,
            });
        }
        // Σ lag = 0 within rounding, and each lag within its bound after placement.
        let (_, load) = self.avg_sums::<true>(q);
        if load > 0 {
            let v = self.avg_vruntime::<true>(q);
            let entities: Vec<Se> = cfs.timeline.iter().map(|&(_, p, _)| p).chain(curr).collect();
            let mut sum_lag: i128 = 0;
            for &p in &entities {
                let se = self.se(p);
                sum_lag += vdiff(v, se.vruntime) as i128 * se.load.weight as i128;
            }
            // Flooring V is off by < 1 in virtual time: Σ w_i (V - v_i) is within Σ w_i of zero.
            if sum_lag.abs() > load {
                return Err(CfsViolation::LagSum { cpu, sum_lag, load });
            }
            // A sanity bound on live lags, in service time. Ideal EEVDF keeps
            // |lag| below one request plus the quantum (r_max + q; q is the
            // tick here). Linux departs from the ideal: an entity is placed
            // with up to its dequeue clamp (2 r), a protected entity overruns
            // by r + q, and placing or reweighting a heavy entity shifts the
            // others' lags (Σ w_i vlag_i = 0 lets one entity carry the rest).
            // 4 n (r_max + q) covers all of that; what it catches is runaway
            // virtual time. A group entity stands for its members: it may
            // be owed what they are, so its bound counts them too.
            let r_max = entities.iter().map(|&p| self.se(p).slice).max().unwrap_or(0);
            let n = if tg == 0 && !self.cg.enabled() { entities.len() as i128 } else { cfs.h_nr_queued.max(1) as i128 };
            let bound = 4 * n * (r_max + self.costs.tick_ns()) as i128;
            for &p in &entities {
                let se = self.se(p);
                let lag = vdiff(v, se.vruntime) as i128 * se.load.weight as i128 / NICE_0_LOAD as i128;
                if lag.abs() > bound && p & GSE == 0 {
                    return Err(CfsViolation::LagBound { cpu, task: p, lag, bound });
                }
            }
        }
        // The pick is the earliest eligible deadline (without slice protection and buddies).
        if let Some(pick) = self.pick_eevdf::<true>(q, false) {
            let eligible_min = cfs
                .timeline
                .iter()
                .map(|&(_, p, _)| p)
                .chain(curr)
                .filter(|&p| self.entity_eligible::<true>(q, p))
                .min_by_key(|&p| (self.se(p).deadline as i128 - cfs.zero_vruntime as i128, p));
            if let Some(m) = eligible_min {
                if self.se(m).deadline != self.se(pick).deadline && cfs.nr_queued > 1 {
                    return Err(CfsViolation::Pick { cpu, pick, earliest: m });
                }
            }
        }
        Ok(())
    }

    /// Debug checks across one CPU's hierarchy: every queued group entity
    /// stands for a non-empty runqueue, the h_nr counts add up, and every
    /// queued task sits in its own cgroup's runqueue.
    fn check_hierarchy(&self, cpu: Cpu) -> Result<(), CfsViolation> {
        for g in 1..self.cg.groups.len() as u32 {
            let q = Cq { cpu, tg: g };
            let e = GSE | self.cg.idx(g, cpu) as u32;
            let cfs = self.cfs(q);
            let se = self.se(e);
            let tg = &self.cg.groups[g as usize];
            // A throttled runqueue's entity is out of the hierarchy: never picked.
            if se.on_rq != (cfs.nr_queued > 0 && !cfs.throttled) {
                return Err(CfsViolation::GroupOnRq { cpu, group: tg.path.clone(), on_rq: se.on_rq, queued: cfs.nr_queued });
            }
            if se.on_rq && (se.load.weight < MIN_SHARES.min(tg.shares) || se.load.weight > tg.shares.max(MIN_SHARES)) {
                return Err(CfsViolation::GroupWeight { cpu, group: tg.path.clone(), weight: se.load.weight, shares: tg.shares });
            }
        }
        // h_nr_queued of each runqueue: the tasks queued in it or below.
        let mut counts = vec![0u32; self.cg.groups.len()];
        for &(_, p) in &self.rq(cpu).cfs.lru {
            let t = self.task(p);
            let group = &self.cg.groups[t.cgrp as usize].path;
            if *group != t.cgroup {
                return Err(CfsViolation::TaskGroup { task: p, group: group.clone(), cgroup: t.cgroup.clone() });
            }
            let mut g = Some(t.cgrp);
            while let Some(x) = g {
                counts[x as usize] += 1;
                if self.cfs_rq_throttled(Cq { cpu, tg: x }) {
                    break;
                }
                g = self.cg.groups[x as usize].parent;
            }
        }
        for (g, &tasks) in counts.iter().enumerate() {
            let have = self.cfs(Cq { cpu, tg: g as u32 }).h_nr_queued;
            if have != tasks {
                return Err(CfsViolation::HNrQueued { cpu, group: self.cg.groups[g].path.clone(), have, tasks });
            }
        }
        Ok(())
    }
}

/// The kernel's own lag bound: a dequeued entity's saved lag is clamped to
/// max(2 slices, a tick) of service (entity_lag), whatever happened before.
pub(crate) fn check_saved_lag(sim: &Sim, p: TaskId) -> Result<(), CfsViolation> {
    let t = sim.task(p);
    if t.se.on_rq || t.class != ClassId::Fair || t.se.rel_deadline {
        return Ok(());
    }
    let limit = calc_delta_fair((2 * t.se.slice).max(sim.costs.tick_ns()), &t.se.load) as i64;
    // A reweight while dequeued rescales vlag by old/new weight, which maps
    // the old clamp onto the new one up to fixed-point rounding.
    if t.se.vlag.abs() > limit + limit / 1000 + 2 {
        return Err(CfsViolation::SavedLag { task: p, vlag: t.se.vlag, limit });
    }
    Ok(())
}

/// Panics with the violation when one CPU's fair state breaks an invariant
/// (the after-every-event check of debug builds and `--check`).
pub(crate) fn assert_cfs_invariants(sim: &Sim, cpu: Cpu) {
    if let Err(e) = sim.check_cfs(cpu) {
        panic!("EEVDF invariant violated at t={}: {e}", sim.now());
    }
}
