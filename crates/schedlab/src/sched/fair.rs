//! The fair class: EEVDF as in kernel/sched/fair.c (6.6+, following the
//! 6.17+ slice-protection rules), with a flat cfs_rq per CPU.
//!
//! # The math
//!
//! Each entity i has a weight w_i and a virtual runtime v_i that advances by
//! delta * 1024 / w_i while it runs. The queue's virtual time is the weighted
//! average
//!
//! ```text
//!     V = Σ w_i v_i / Σ w_i
//! ```
//!
//! over all queued entities, the running one included. An entity's lag is
//! `lag_i = w_i (V - v_i)`: the service it is owed. Σ lag_i = 0 by definition
//! of V. An entity is *eligible* when lag_i >= 0, i.e. V >= v_i. Keys are
//! kept relative to `zero_vruntime` so the sums stay small:
//!
//! ```text
//!     V - zero = Σ w_i (v_i - zero) / Σ w_i
//!     eligible  <=>  Σ w_i (v_i - zero) >= (v - zero) Σ w_i
//! ```
//!
//! which is how eligibility is tested, without a division. Each entity asks
//! for a slice; its virtual deadline is v_i + slice * 1024 / w_i, and the pick
//! is the eligible entity with the earliest deadline.

use crate::engine::{Cpu, TaskId};
use crate::sched::features::Feature;
use crate::sched::{deq, enq, wf, SchedClass};
use crate::sched::sim::Sim;
use crate::sched::task::{ClassId, LoadWeight, Policy, NICE_0_LOAD};
use crate::engine::time::{Ns, NSEC_PER_MSEC};

/// The fair class's tunables (sysctls and debugfs knobs of fair.c and
/// core.c), with the kernel's defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FairTunables {
    /// normalized_sysctl_sched_base_slice before CPU-count scaling (0.7 ms).
    pub base_slice_normalized_ns: Ns,
    /// sysctl_sched_migration_cost: a task that ran this recently is cache hot.
    pub migration_cost_ns: Ns,
    /// sysctl_sched_nr_migrate: tasks moved per balance pass at most.
    pub nr_migrate: u32,
}

impl Default for FairTunables {
    fn default() -> Self {
        FairTunables { base_slice_normalized_ns: 700_000, migration_cost_ns: 500_000, nr_migrate: 32 }
    }
}

/// Where virtual time starts. The timeline is a BTreeSet ordered by the raw
/// u64 deadline, whereas the kernel compares with signed differences; starting
/// far from zero keeps every vruntime and deadline clear of the wrap, so the
/// two orders agree (2^62 ns of virtual time is decades even at nice 19).
pub const VRUNTIME_BASE: u64 = 1 << 62;

impl crate::sched::rq::CfsRq {
    /// An empty fair runqueue whose zero_vruntime starts at
    /// [`VRUNTIME_BASE`] (`init_cfs_rq()`).
    pub fn new() -> Self {
        crate::sched::rq::CfsRq { zero_vruntime: VRUNTIME_BASE, ..Default::default() }
    }
}

pub struct FairClass;
pub static FAIR_CLASS: FairClass = FairClass;

/// delta * weight / lw.weight with the kernel's fixed-point inverse (__calc_delta).
pub fn calc_delta(delta: u64, weight: u64, lw: &LoadWeight) -> u64 {
    let mut fact = weight;
    let mut shift: u32 = 32;
    let hi = fact >> 32;
    if hi != 0 {
        let fs = 64 - hi.leading_zeros();
        shift -= fs;
        fact >>= fs;
    }
    fact *= lw.inv_weight as u64;
    let hi = fact >> 32;
    if hi != 0 {
        let fs = 64 - hi.leading_zeros();
        shift -= fs;
        fact >>= fs;
    }
    ((delta as u128 * fact as u128) >> shift) as u64
}

/// Real time to virtual time for an entity (calc_delta_fair).
#[inline]
pub fn calc_delta_fair(delta: u64, lw: &LoadWeight) -> u64 {
    if lw.weight == NICE_0_LOAD {
        delta
    } else {
        calc_delta(delta, NICE_0_LOAD, lw)
    }
}

#[inline]
fn vdiff(a: u64, b: u64) -> i64 {
    a.wrapping_sub(b) as i64
}

impl Sim {
    #[inline]
    fn entity_key(&self, cpu: Cpu, p: TaskId) -> i64 {
        vdiff(self.task(p).se.vruntime, self.rq(cpu).cfs.zero_vruntime)
    }

    /// Σ w (v - zero) and Σ w including the running entity.
    fn avg_sums(&self, cpu: Cpu) -> (i128, i128) {
        let cfs = &self.rq(cpu).cfs;
        let mut avg = cfs.sum_w_vruntime;
        let mut load = cfs.sum_weight as i128;
        if let Some(c) = cfs.curr {
            let se = &self.task(c).se;
            if se.on_rq {
                avg += self.entity_key(cpu, c) as i128 * se.load.weight as i128;
                load += se.load.weight as i128;
            }
        }
        (avg, load)
    }

    /// V, the load-weighted average vruntime of the queue (avg_vruntime).
    pub fn avg_vruntime(&self, cpu: Cpu) -> u64 {
        let (mut avg, load) = self.avg_sums(cpu);
        if load > 0 {
            // Floor division, so that V never runs ahead of the true average.
            if avg < 0 {
                avg -= load - 1;
            }
            avg /= load;
        }
        self.rq(cpu).cfs.zero_vruntime.wrapping_add(avg as i64 as u64)
    }

    /// V >= vruntime, by cross-multiplying (vruntime_eligible).
    pub fn vruntime_eligible(&self, cpu: Cpu, vruntime: u64) -> bool {
        let (avg, load) = self.avg_sums(cpu);
        avg >= vdiff(vruntime, self.rq(cpu).cfs.zero_vruntime) as i128 * load
    }

    #[inline]
    pub fn entity_eligible(&self, cpu: Cpu, p: TaskId) -> bool {
        self.vruntime_eligible(cpu, self.task(p).se.vruntime)
    }

    /// Moves zero_vruntime to V so keys stay small (update_zero_vruntime).
    fn update_zero_vruntime(&mut self, cpu: Cpu) {
        let v = self.avg_vruntime(cpu);
        let cfs = &mut self.rq_mut(cpu).cfs;
        let delta = vdiff(v, cfs.zero_vruntime) as i128;
        cfs.sum_w_vruntime -= cfs.sum_weight as i128 * delta;
        cfs.zero_vruntime = v;
    }

    /// Lag limit: an entity may be owed, or owe, at most max(2 slices, a tick) of service.
    fn entity_lag(&self, avruntime: u64, p: TaskId) -> i64 {
        let se = &self.task(p).se;
        let vlag = vdiff(avruntime, se.vruntime);
        let limit = calc_delta_fair((2 * se.slice).max(self.costs.tick_ns()), &se.load) as i64;
        vlag.clamp(-limit, limit)
    }

    fn update_entity_lag(&mut self, cpu: Cpu, p: TaskId) {
        let v = self.avg_vruntime(cpu);
        let lag = self.entity_lag(v, p);
        self.task_mut(p).se.vlag = lag;
    }

    /// Adds an entity to the timeline and the average (__enqueue_entity).
    fn enqueue_timeline(&mut self, cpu: Cpu, p: TaskId) {
        let key = self.entity_key(cpu, p) as i128;
        let (w, deadline, slice) = {
            let se = &self.task(p).se;
            (se.load.weight, se.deadline, se.slice)
        };
        let cfs = &mut self.rq_mut(cpu).cfs;
        cfs.sum_w_vruntime += key * w as i128;
        cfs.sum_weight += w;
        let fresh = cfs.timeline.insert((deadline, p));
        debug_assert!(fresh, "task {p} already on the timeline");
        *cfs.slices.entry(slice).or_insert(0) += 1;
    }

    /// Removes an entity from the timeline and the average (__dequeue_entity).
    fn dequeue_timeline(&mut self, cpu: Cpu, p: TaskId) {
        let key = self.entity_key(cpu, p) as i128;
        let (w, deadline, slice) = {
            let se = &self.task(p).se;
            (se.load.weight, se.deadline, se.slice)
        };
        let cfs = &mut self.rq_mut(cpu).cfs;
        let was = cfs.timeline.remove(&(deadline, p));
        debug_assert!(was, "task {p} not on the timeline");
        cfs.sum_w_vruntime -= key * w as i128;
        cfs.sum_weight -= w;
        if let Some(n) = cfs.slices.get_mut(&slice) {
            *n -= 1;
            if *n == 0 {
                cfs.slices.remove(&slice);
            }
        }
    }

    /// The shortest slice among queued entities, the running one included (cfs_rq_min_slice).
    fn cfs_min_slice(&self, cpu: Cpu) -> Ns {
        let cfs = &self.rq(cpu).cfs;
        let mut min = u64::MAX;
        if let Some(c) = cfs.curr {
            if self.task(c).se.on_rq {
                min = self.task(c).se.slice;
            }
        }
        if let Some((&s, _)) = cfs.slices.iter().next() {
            min = min.min(s);
        }
        min
    }

    /// Places an entity at enqueue: vruntime from V and its preserved lag,
    /// deadline one (virtual) slice later (place_entity).
    fn place_entity(&mut self, cpu: Cpu, p: TaskId, flags: u32) {
        let base_slice = self.base_slice_ns;
        let v = self.avg_vruntime(cpu);
        let place_lag = self.features.on(Feature::PLACE_LAG);
        let initial_half = self.features.on(Feature::PLACE_DEADLINE_INITIAL);
        let nr_queued = self.rq(cpu).cfs.nr_queued;
        // Load of the queue the entity joins, current entity included.
        let (_, load) = self.avg_sums(cpu);
        let se = &mut self.tasks[p as usize].se;
        if !se.custom_slice {
            se.slice = base_slice;
        }
        let mut vslice = calc_delta_fair(se.slice, &se.load);
        let mut lag: i64 = 0;
        if place_lag && nr_queued > 0 && se.vlag != 0 {
            // Joining changes V: placing at V - lag and then adding w would
            // shift V by w*lag/(W+w) and shrink the lag. Inflate it by (W+w)/W
            // so that the lag is what remains after the join.
            let load = load.max(1);
            lag = ((se.vlag as i128 * (load + se.load.weight as i128)) / load) as i64;
        }
        se.vruntime = v.wrapping_sub(lag as u64);
        if se.rel_deadline {
            se.deadline = se.deadline.wrapping_add(se.vruntime);
            se.rel_deadline = false;
            return;
        }
        if initial_half && flags & enq::INITIAL != 0 {
            vslice /= 2;
        }
        se.deadline = se.vruntime.wrapping_add(vslice);
    }

    /// Starts a new request when the current one is used up (update_deadline).
    fn update_deadline(&mut self, p: TaskId) -> bool {
        let base = self.base_slice_ns;
        let se = &mut self.tasks[p as usize].se;
        if vdiff(se.vruntime, se.deadline) < 0 {
            return false;
        }
        if !se.custom_slice {
            se.slice = base;
        }
        se.deadline = se.vruntime.wrapping_add(calc_delta_fair(se.slice, &se.load));
        true
    }

    #[inline]
    fn protect_slice(&self, p: TaskId) -> bool {
        let se = &self.task(p).se;
        vdiff(se.vprot, se.vruntime) > 0
    }

    fn cancel_protect_slice(&mut self, p: TaskId) {
        if self.protect_slice(p) {
            let se = &mut self.task_mut(p).se;
            se.vprot = se.vruntime;
        }
    }

    /// Protect the slice of the entity about to run: up to its deadline, or
    /// for the shortest queued slice under RUN_TO_PARITY, or for one base
    /// slice without it (set_protect_slice).
    fn set_protect_slice(&mut self, cpu: Cpu, p: TaskId) {
        let mut slice = self.tunables.fair.base_slice_normalized_ns;
        if self.features.on(Feature::RUN_TO_PARITY) {
            slice = self.cfs_min_slice(cpu);
        }
        let se = &mut self.tasks[p as usize].se;
        slice = slice.min(se.slice);
        let mut vprot = se.deadline;
        if slice != se.slice {
            let v = se.vruntime.wrapping_add(calc_delta_fair(slice, &se.load));
            if vdiff(v, vprot) < 0 {
                vprot = v;
            }
        }
        se.vprot = vprot;
    }

    fn update_protect_slice(&mut self, cpu: Cpu, p: TaskId) {
        let slice = self.cfs_min_slice(cpu);
        let se = &mut self.tasks[p as usize].se;
        let v = se.vruntime.wrapping_add(calc_delta_fair(slice, &se.load));
        if vdiff(v, se.vprot) < 0 {
            se.vprot = v;
        }
    }

    fn clear_buddies(&mut self, cpu: Cpu, p: TaskId) {
        let cfs = &mut self.rq_mut(cpu).cfs;
        if cfs.next == Some(p) {
            cfs.next = None;
        }
    }

    /// Charges the running fair task's runtime since its exec_start (update_curr).
    pub fn update_curr_fair(&mut self, cpu: Cpu) {
        let Some(p) = self.rq(cpu).cfs.curr else { return };
        let delta = self.update_se(p);
        if delta == 0 {
            return;
        }
        let se = &mut self.tasks[p as usize].se;
        se.vruntime = se.vruntime.wrapping_add(calc_delta_fair(delta, &se.load));
        self.rqs[cpu as usize].fair_time += delta;
        self.account_mm_sched(cpu, p, delta);
        let resched = self.update_deadline(p);
        self.update_zero_vruntime(cpu);
        if self.rq(cpu).cfs.nr_queued <= 1 || self.rq(cpu).curr != Some(p) {
            return;
        }
        if resched || !self.protect_slice(p) {
            self.resched_curr(cpu);
            self.clear_buddies(cpu, p);
        }
    }

    /// Refreshes the runqueue's and an entity's load averages (update_load_avg).
    fn update_load_avg(&mut self, cpu: Cpu, p: Option<TaskId>) {
        let now = self.now();
        let rq = &mut self.rqs[cpu as usize];
        let running = rq.cfs.curr.is_some();
        let (lw, nr) = (rq.cfs.load_weight, rq.cfs.h_nr_runnable as u64);
        rq.cfs.avg.update_rq(now, lw, nr, running);
        if let Some(p) = p {
            let t = &mut self.tasks[p as usize];
            let on_rq = t.se.on_rq && !t.se.sched_delayed;
            let is_running = rq.cfs.curr == Some(p);
            t.se.avg.update_entity(now, t.se.load.weight, on_rq, is_running);
        }
    }

    /// enqueue_entity(): place, account and queue an entity.
    fn enqueue_entity(&mut self, cpu: Cpu, p: TaskId, flags: u32) {
        let is_curr = self.rq(cpu).cfs.curr == Some(p);
        if is_curr {
            self.place_entity(cpu, p, flags);
        }
        self.update_curr_fair(cpu);
        self.update_load_avg(cpu, Some(p));
        if !is_curr {
            self.place_entity(cpu, p, flags);
        }
        let w = self.task(p).se.load.weight;
        {
            let cfs = &mut self.rq_mut(cpu).cfs;
            cfs.load_weight += w;
            cfs.nr_queued += 1;
            cfs.h_nr_runnable += 1;
        }
        if flags & enq::MIGRATED != 0 {
            self.task_mut(p).se.exec_start = 0;
        }
        if !is_curr {
            self.enqueue_timeline(cpu, p);
        }
        let stamp = self.task(p).se.lru_stamp;
        self.rq_mut(cpu).cfs.lru.insert((stamp, p));
        self.task_mut(p).se.on_rq = true;
        self.update_zero_vruntime(cpu);
    }

    /// A delayed (still queued) entity is woken (requeue_delayed_entity).
    fn requeue_delayed_entity(&mut self, cpu: Cpu, p: TaskId) {
        if self.features.on(Feature::DELAY_ZERO) {
            self.update_entity_lag(cpu, p);
            if self.task(p).se.vlag > 0 {
                let is_curr = self.rq(cpu).cfs.curr == Some(p);
                self.rq_mut(cpu).cfs.nr_queued -= 1;
                if !is_curr {
                    self.dequeue_timeline(cpu, p);
                }
                self.task_mut(p).se.vlag = 0;
                self.place_entity(cpu, p, 0);
                if !is_curr {
                    self.enqueue_timeline(cpu, p);
                }
                self.rq_mut(cpu).cfs.nr_queued += 1;
            }
        }
        self.update_load_avg(cpu, Some(p));
        self.task_mut(p).se.sched_delayed = false;
        self.rq_mut(cpu).cfs.h_nr_runnable += 1;
    }

    /// dequeue_entity(): returns false if the dequeue is delayed instead.
    fn dequeue_entity(&mut self, cpu: Cpu, p: TaskId, flags: u32) -> bool {
        let sleep = flags & deq::SLEEP != 0;
        self.update_curr_fair(cpu);
        self.clear_buddies(cpu, p);
        if flags & deq::DELAYED == 0 {
            let delay = sleep && flags & deq::SPECIAL == 0;
            if self.features.on(Feature::DELAY_DEQUEUE) && delay && !self.entity_eligible(cpu, p) {
                self.update_load_avg(cpu, Some(p));
                self.task_mut(p).se.sched_delayed = true;
                self.rq_mut(cpu).cfs.h_nr_runnable -= 1;
                return false;
            }
        }
        self.update_load_avg(cpu, Some(p));
        self.update_entity_lag(cpu, p);
        if self.rq(cpu).cfs.curr != Some(p) {
            self.dequeue_timeline(cpu, p);
        }
        if self.features.on(Feature::PLACE_REL_DEADLINE) && !sleep {
            let se = &mut self.task_mut(p).se;
            se.deadline = se.deadline.wrapping_sub(se.vruntime);
            se.rel_deadline = true;
        }
        let (w, delayed, stamp) = {
            let se = &mut self.task_mut(p).se;
            se.on_rq = false;
            (se.load.weight, se.sched_delayed, se.lru_stamp)
        };
        let cfs = &mut self.rq_mut(cpu).cfs;
        cfs.lru.remove(&(stamp, p));
        cfs.load_weight -= w;
        cfs.nr_queued -= 1;
        if !delayed {
            cfs.h_nr_runnable -= 1;
        }
        if self.check_invariants {
            if let Err(e) = check_saved_lag(self, p) {
                panic!("EEVDF invariant violated at t={}: {e}", self.now());
            }
        }
        if flags & deq::DELAYED != 0 || delayed {
            // finish_delayed_dequeue_entity()
            let zero = self.features.on(Feature::DELAY_ZERO);
            let se = &mut self.task_mut(p).se;
            se.sched_delayed = false;
            if zero && se.vlag > 0 {
                se.vlag = 0;
            }
        }
        self.update_zero_vruntime(cpu);
        true
    }

    /// The EEVDF pick: the eligible entity with the earliest virtual deadline,
    /// keeping a protected current entity (pick_eevdf).
    pub fn pick_eevdf(&self, cpu: Cpu, protect: bool) -> Option<TaskId> {
        let cfs = &self.rq(cpu).cfs;
        let first = cfs.timeline.iter().next().map(|&(_, p)| p);
        let mut curr = cfs.curr.filter(|&c| self.task(c).se.on_rq);
        if cfs.nr_queued == 1 {
            return curr.or(first);
        }
        if let Some(c) = curr {
            if !self.entity_eligible(cpu, c) {
                curr = None;
            }
        }
        if let Some(c) = curr {
            if protect && self.protect_slice(c) {
                return Some(c);
            }
        }
        // The timeline is in deadline order: the first eligible entity is the pick.
        let best = cfs.timeline.iter().map(|&(_, p)| p).find(|&p| self.entity_eligible(cpu, p));
        match (best, curr) {
            (None, c) => c.or(first),
            (Some(b), Some(c)) if vdiff(self.task(c).se.deadline, self.task(b).se.deadline) < 0 => Some(c),
            (Some(b), _) => Some(b),
        }
    }

    /// pick_next_entity(): an eligible buddy first, then EEVDF.
    fn pick_next_entity(&self, cpu: Cpu) -> Option<TaskId> {
        if self.features.on(Feature::PICK_BUDDY) {
            if let Some(b) = self.rq(cpu).cfs.next {
                if self.task(b).se.on_rq && !self.task(b).se.sched_delayed && self.entity_eligible(cpu, b) {
                    return Some(b);
                }
            }
        }
        self.pick_eevdf(cpu, true)
    }

    /// pick_task_fair(): finishes delayed dequeues the pick runs into.
    pub fn pick_task_fair(&mut self, cpu: Cpu) -> Option<TaskId> {
        loop {
            if self.rq(cpu).cfs.nr_queued == 0 {
                return None;
            }
            if self.rq(cpu).cfs.curr.is_some() {
                self.update_curr_fair(cpu);
            }
            let p = self.pick_next_entity(cpu)?;
            if self.task(p).se.sched_delayed {
                self.dequeue_entity(cpu, p, deq::SLEEP | deq::DELAYED);
                self.finish_dequeue(cpu, p);
                continue;
            }
            return Some(p);
        }
    }

    /// yield_task_fair(): give up the rest of the current request.
    fn yield_task_fair(&mut self, cpu: Cpu) {
        let Some(p) = self.rq(cpu).curr else { return };
        if self.rq(cpu).nr_running <= 1 || self.task(p).class != ClassId::Fair {
            return;
        }
        self.clear_buddies(cpu, p);
        self.update_curr_fair(cpu);
        // Forfeit the remaining request, only if eligible: an ineligible
        // yielder pushed further right would run away from V.
        if self.entity_eligible(cpu, p) {
            let se = &mut self.task_mut(p).se;
            se.vruntime = se.deadline;
            se.deadline = se.deadline.wrapping_add(calc_delta_fair(se.slice, &se.load));
        }
    }

    /// YIELD_TO_LAG_CREDIT: make a not-yet-eligible yield_to() target eligible
    /// by crediting it lag up to V, within the lag bound (experiment 003).
    fn credit_entity_vlag(&mut self, cpu: Cpu, p: TaskId) {
        if self.entity_eligible(cpu, p) {
            return;
        }
        let v = self.avg_vruntime(cpu);
        let limit = calc_delta_fair((2 * self.task(p).se.slice).max(self.costs.tick_ns()), &self.task(p).se.load);
        let in_tree = self.rq(cpu).cfs.curr != Some(p);
        if in_tree {
            self.dequeue_timeline(cpu, p);
        }
        let se = &mut self.task_mut(p).se;
        let owed = vdiff(se.vruntime, v).max(0) as u64;
        let credit = owed.min(limit);
        se.vruntime = se.vruntime.wrapping_sub(credit);
        se.deadline = se.deadline.wrapping_sub(credit);
        if in_tree {
            self.enqueue_timeline(cpu, p);
        }
    }

    /// Forfeit, cancel slice protection and reschedule, at most once per 6 ms per rq.
    fn yield_to_local_force_resched(&mut self, cpu: Cpu) {
        self.yield_task_fair(cpu);
        if self.rq(cpu).nr_running <= 1 {
            return;
        }
        let now = self.now();
        if let Some(last) = self.rq(cpu).yield_to_resched_last {
            if now - last <= 6 * NSEC_PER_MSEC {
                return;
            }
        }
        self.rq_mut(cpu).yield_to_resched_last = Some(now);
        if let Some(c) = self.rq(cpu).curr {
            self.cancel_protect_slice(c);
        }
        self.resched_curr(cpu);
    }

    /// check_preempt_wakeup_fair().
    fn check_preempt_wakeup_fair(&mut self, cpu: Cpu, p: TaskId, wake_flags: u32) {
        let Some(curr) = self.rq(cpu).curr else { return };
        if curr == p {
            return;
        }
        if self.features.on(Feature::NEXT_BUDDY) && wake_flags & wf::FORK == 0 && !self.task(p).se.sched_delayed {
            self.rq_mut(cpu).cfs.next = Some(p);
        }
        if self.rq(cpu).need_resched || !self.features.on(Feature::WAKEUP_PREEMPTION) {
            return;
        }
        let cse_idle = self.task(curr).policy == Policy::Idle;
        let pse_idle = self.task(p).policy == Policy::Idle;
        if cse_idle && !pse_idle {
            self.resched_curr(cpu);
            return;
        }
        if cse_idle != pse_idle {
            return;
        }
        if !matches!(self.task(p).policy, Policy::Other | Policy::Ext) {
            return;
        }
        self.update_curr_fair(cpu);
        let preempt_short = self.features.on(Feature::PREEMPT_SHORT) && self.task(p).se.slice < self.task(curr).se.slice;
        if self.pick_eevdf(cpu, !preempt_short) == Some(p) {
            if preempt_short {
                self.cancel_protect_slice(curr);
            }
            self.resched_curr(cpu);
            return;
        }
        if self.features.on(Feature::RUN_TO_PARITY) && preempt_short {
            self.update_protect_slice(cpu, curr);
        }
    }

    /// A dequeued entity changes weight (reweight_entity with !on_rq): vlag
    /// is kept as V - v, while the lag that must be preserved is w (V - v),
    /// so vlag scales by old/new weight; so does a relative deadline.
    pub(crate) fn reweight_dequeued_fair(&mut self, p: TaskId, new: LoadWeight) {
        let se = &mut self.task_mut(p).se;
        debug_assert!(!se.on_rq);
        let (old_w, new_w) = (se.load.weight as i128, new.weight.max(1) as i128);
        se.vlag = (se.vlag as i128 * old_w / new_w) as i64;
        if se.rel_deadline {
            se.deadline = (se.deadline as i64 as i128 * old_w / new_w) as i64 as u64;
        }
        se.load = new;
        if self.check_invariants {
            if let Err(e) = check_saved_lag(self, p) {
                panic!("EEVDF invariant violated at t={}: {e}", self.now());
            }
        }
    }

    /// Finishes a pending delayed dequeue, as the kernel does before changing
    /// a task's scheduling parameters or affinity.
    pub(crate) fn finish_delayed_dequeue(&mut self, p: TaskId) {
        if self.task(p).se.sched_delayed && self.task(p).on_rq {
            let cpu = self.task(p).cpu;
            self.dequeue_entity(cpu, p, deq::SLEEP | deq::DELAYED);
            self.finish_dequeue(cpu, p);
        }
    }

    /// Debug checks of the EEVDF state of one CPU.
    pub fn check_cfs(&self, cpu: Cpu) -> Result<(), CfsViolation> {
        let cfs = &self.rq(cpu).cfs;
        let mut sum_w: u64 = 0;
        let mut sum_key: i128 = 0;
        for &(d, p) in &cfs.timeline {
            let se = &self.task(p).se;
            if se.deadline != d {
                return Err(CfsViolation::TimelineKey { task: p, key: d, deadline: se.deadline });
            }
            if !se.on_rq || self.task(p).cpu != cpu {
                return Err(CfsViolation::NotQueued { task: p, cpu });
            }
            sum_w += se.load.weight;
            sum_key += self.entity_key(cpu, p) as i128 * se.load.weight as i128;
        }
        let queued = cfs.timeline.len() + cfs.curr.filter(|&c| self.task(c).se.on_rq).map_or(0, |_| 1);
        if cfs.lru.len() != queued || cfs.nr_queued as usize != queued {
            return Err(CfsViolation::Counts { cpu, lru: cfs.lru.len(), queued, nr_queued: cfs.nr_queued });
        }
        if sum_w != cfs.sum_weight || sum_key != cfs.sum_w_vruntime {
            return Err(CfsViolation::SumsDrifted { cpu, sum_w, sum_weight: cfs.sum_weight, sum_key, sum_w_vruntime: cfs.sum_w_vruntime });
        }
        // Σ lag = 0 within rounding, and each lag within its bound after placement.
        let (avg, load) = self.avg_sums(cpu);
        if load > 0 {
            let v = self.avg_vruntime(cpu);
            let mut sum_lag: i128 = 0;
            let entities = cfs.timeline.iter().map(|&(_, p)| p).chain(cfs.curr.filter(|&c| self.task(c).se.on_rq));
            for p in entities {
                let se = &self.task(p).se;
                sum_lag += vdiff(v, se.vruntime) as i128 * se.load.weight as i128;
            }
            // Flooring V is off by < 1 in virtual time: Σ w_i (V - v_i) is within Σ w_i of zero.
            let _ = avg;
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
            // virtual time.
            let entities: Vec<TaskId> = cfs.timeline.iter().map(|&(_, p)| p).chain(cfs.curr.filter(|&c| self.task(c).se.on_rq)).collect();
            let r_max = entities.iter().map(|&p| self.task(p).se.slice).max().unwrap_or(0);
            let n = entities.len() as i128;
            let bound = 4 * n * (r_max + self.costs.tick_ns()) as i128;
            for &p in &entities {
                let se = &self.task(p).se;
                let lag_real = vdiff(v, se.vruntime) as i128 * se.load.weight as i128 / NICE_0_LOAD as i128;
                if lag_real.abs() > bound {
                    return Err(CfsViolation::LagBound { cpu, task: p, lag: lag_real, bound });
                }
            }
        }
        // The pick is the earliest eligible deadline (without slice protection and buddies).
        if let Some(pick) = self.pick_eevdf(cpu, false) {
            let eligible_min = cfs
                .timeline
                .iter()
                .map(|&(_, p)| p)
                .chain(cfs.curr.filter(|&c| self.task(c).se.on_rq))
                .filter(|&p| self.entity_eligible(cpu, p))
                .min_by_key(|&p| (self.task(p).se.deadline as i128 - self.rq(cpu).cfs.zero_vruntime as i128, p));
            if let Some(m) = eligible_min {
                if self.task(m).se.deadline != self.task(pick).se.deadline && cfs.nr_queued > 1 {
                    return Err(CfsViolation::Pick { cpu, pick, earliest: m });
                }
            }
        }
        Ok(())
    }
}

/// An EEVDF invariant that does not hold (what [`Sim::check_cfs`] and
/// [`check_saved_lag`] find).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CfsViolation {
    /// A timeline entry keyed by something other than the deadline.
    #[error("task {task}: timeline key {key} != deadline {deadline}")]
    TimelineKey { task: TaskId, key: u64, deadline: u64 },
    /// A task on a CPU's timeline that is not queued there.
    #[error("task {task} on cpu{cpu}'s timeline but not queued there")]
    NotQueued { task: TaskId, cpu: Cpu },
    /// The LRU list, the queue and nr_queued disagree.
    #[error("cpu{cpu}: {lru} on the LRU list, {queued} queued, nr_queued {nr_queued}")]
    Counts { cpu: Cpu, lru: usize, queued: usize, nr_queued: u32 },
    /// avg_load / avg_vruntime no longer match the timeline.
    #[error("cpu{cpu}: avg sums drifted ({sum_w} vs {sum_weight}, {sum_key} vs {sum_w_vruntime})")]
    SumsDrifted { cpu: Cpu, sum_w: u64, sum_weight: u64, sum_key: i128, sum_w_vruntime: i128 },
    /// The weighted lags do not sum to zero (within rounding).
    #[error("cpu{cpu}: Σ weighted lag = {sum_lag}, load {load}")]
    LagSum { cpu: Cpu, sum_lag: i128, load: i128 },
    /// A live lag beyond the sanity bound (runaway virtual time).
    #[error("cpu{cpu}: task {task} lag {lag} ns exceeds ±{bound} ns")]
    LagBound { cpu: Cpu, task: TaskId, lag: i128, bound: i128 },
    /// The pick is not the earliest eligible deadline.
    #[error("cpu{cpu}: pick {pick} is not the earliest eligible deadline ({earliest})")]
    Pick { cpu: Cpu, pick: TaskId, earliest: TaskId },
    /// A dequeued task's saved lag beyond entity_lag()'s clamp.
    #[error("task {task}: saved vlag {vlag} beyond the clamp {limit}")]
    SavedLag { task: TaskId, vlag: i64, limit: i64 },
}

/// The kernel's own lag bound: a dequeued entity's saved lag is clamped to
/// max(2 slices, a tick) of service (entity_lag), whatever happened before.
pub fn check_saved_lag(sim: &Sim, p: TaskId) -> Result<(), CfsViolation> {
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

pub fn assert_cfs_invariants(sim: &Sim, cpu: Cpu) {
    if let Err(e) = sim.check_cfs(cpu) {
        panic!("EEVDF invariant violated at t={}: {e}", sim.now());
    }
}

impl SchedClass for FairClass {
    fn id(&self) -> ClassId {
        ClassId::Fair
    }

    fn enqueue_task(&self, sim: &mut Sim, cpu: Cpu, p: TaskId, flags: u32) {
        if flags & enq::DELAYED != 0 {
            sim.requeue_delayed_entity(cpu, p);
            return;
        }
        sim.enqueue_entity(cpu, p, flags);
    }

    fn dequeue_task(&self, sim: &mut Sim, cpu: Cpu, p: TaskId, flags: u32) -> bool {
        sim.dequeue_entity(cpu, p, flags)
    }

    fn yield_task(&self, sim: &mut Sim, cpu: Cpu) {
        sim.yield_task_fair(cpu);
    }

    fn yield_to_task(&self, sim: &mut Sim, cpu: Cpu, p: TaskId) -> bool {
        let t = sim.task(p);
        if !t.se.on_rq || t.se.sched_delayed {
            return false;
        }
        let pcpu = t.cpu;
        sim.rq_mut(pcpu).cfs.next = Some(p);
        if sim.features.on(Feature::YIELD_TO_LAG_CREDIT) {
            sim.update_curr_fair(pcpu);
            sim.credit_entity_vlag(pcpu, p);
            sim.yield_to_local_force_resched(cpu);
        } else {
            sim.yield_task_fair(cpu);
        }
        true
    }

    fn wakeup_preempt(&self, sim: &mut Sim, cpu: Cpu, p: TaskId, wake_flags: u32) {
        sim.check_preempt_wakeup_fair(cpu, p, wake_flags);
    }

    fn pick_task(&self, sim: &mut Sim, cpu: Cpu) -> Option<TaskId> {
        sim.pick_task_fair(cpu)
    }

    fn put_prev_task(&self, sim: &mut Sim, cpu: Cpu, prev: TaskId) {
        if sim.task(prev).se.on_rq {
            sim.update_curr_fair(cpu);
            sim.enqueue_timeline(cpu, prev);
        }
        sim.rq_mut(cpu).cfs.curr = None;
        sim.update_load_avg(cpu, Some(prev));
    }

    fn set_next_task(&self, sim: &mut Sim, cpu: Cpu, p: TaskId, _first: bool) {
        sim.clear_buddies(cpu, p);
        if sim.task(p).se.on_rq {
            sim.dequeue_timeline(cpu, p);
            sim.update_load_avg(cpu, Some(p));
            sim.set_protect_slice(cpu, p);
        }
        sim.rq_mut(cpu).cfs.curr = Some(p);
        let now = sim.now();
        let old = sim.task(p).se.lru_stamp;
        if sim.task(p).se.on_rq {
            let lru = &mut sim.rq_mut(cpu).cfs.lru;
            lru.remove(&(old, p));
            lru.insert((now, p));
        }
        let se = &mut sim.task_mut(p).se;
        se.lru_stamp = now;
        se.exec_start = now;
        se.prev_sum_exec_runtime = se.sum_exec_runtime;
    }

    fn select_task_rq(&self, sim: &mut Sim, p: TaskId, prev_cpu: Cpu, wake_flags: u32) -> Cpu {
        sim.select_task_rq_fair(p, prev_cpu, wake_flags)
    }

    fn task_tick(&self, sim: &mut Sim, cpu: Cpu, p: TaskId) {
        sim.update_curr_fair(cpu);
        sim.update_load_avg(cpu, Some(p));
        sim.task_tick_cache(cpu, p);
    }

    fn update_curr(&self, sim: &mut Sim, cpu: Cpu) {
        sim.update_curr_fair(cpu);
    }

    fn migrate_task_rq(&self, sim: &mut Sim, p: TaskId, new_cpu: Cpu) {
        // Move the task's load contribution between the runqueue averages.
        let old = sim.task(p).cpu;
        let now = sim.now();
        let w = sim.task(p).se.load.weight;
        let mut avg = sim.task(p).se.avg;
        sim.rqs[old as usize].cfs.avg.detach(&avg, w);
        let rq = &mut sim.rqs[new_cpu as usize];
        let (lw, nr, running) = (rq.cfs.load_weight, rq.cfs.h_nr_runnable as u64, rq.cfs.curr.is_some());
        rq.cfs.avg.update_rq(now, lw, nr, running);
        rq.cfs.avg.attach(&mut avg, w);
        sim.task_mut(p).se.avg = avg;
    }

    fn task_fork(&self, sim: &mut Sim, p: TaskId) {
        let now = sim.now();
        let w = sim.task(p).se.load.weight;
        sim.task_mut(p).se.avg = crate::sched::pelt::SchedAvg::new_task(w, now);
    }
}
