//! The fair class: EEVDF as in kernel/sched/fair.c (6.6+, following the
//! 6.17+ slice-protection rules). Every function works on one cfs_rq
//! ([`Cq`]: a CPU's root runqueue or a task group's on that CPU) and one
//! entity ([`Se`]: a task or a group's entity); the hierarchy's walks and
//! group weights are in fair_group.rs. With no cgroups, every task is an
//! entity of its CPU's root runqueue, `rq.cfs`.
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
//! which is how eligibility is tested, without a division (fair_avg.rs). Each entity asks
//! for a slice; its virtual deadline is v_i + slice * 1024 / w_i, and the pick
//! is the eligible entity with the earliest deadline.

use crate::engine::{Cpu, TaskId};
use crate::sched::cgroup::{Cq, Se, GSE};
use crate::sched::features::Feature;
use crate::sched::{deq, enq, wf, SchedClass};
use crate::sched::fair_check::check_saved_lag;
use crate::sched::sim::{Sim, NO_CURR};
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
pub(crate) const VRUNTIME_BASE: u64 = 1 << 62;

impl crate::sched::rq::CfsRq {
    /// An empty fair runqueue whose zero_vruntime starts at
    /// `VRUNTIME_BASE` (`init_cfs_rq()`).
    pub fn new() -> Self {
        crate::sched::rq::CfsRq { zero_vruntime: VRUNTIME_BASE, ..Default::default() }
    }
}

/// The fair class (`fair_sched_class`): EEVDF.
pub(crate) struct FairClass;
/// The fair class object.
pub(crate) static FAIR_CLASS: FairClass = FairClass;

/// delta * weight / lw.weight with the kernel's fixed-point inverse (__calc_delta).
pub(crate) fn calc_delta(delta: u64, weight: u64, lw: &LoadWeight) -> u64 {
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
pub(crate) fn calc_delta_fair(delta: u64, lw: &LoadWeight) -> u64 {
    if lw.weight == NICE_0_LOAD {
        delta
    } else {
        calc_delta(delta, NICE_0_LOAD, lw)
    }
}

#[inline]
pub(crate) fn vdiff(a: u64, b: u64) -> i64 {
    a.wrapping_sub(b) as i64
}

/// place_entity's lag inflated by (W + w) / W, truncated toward zero as
/// the kernel's division is: `vlag * (load + w) / load` (`load` >= 1). In
/// 64 bits when the product fits, as it does for lags within their
/// bounds (a 128-bit division is a library call, several times the cost);
/// both divisions truncate toward zero, so the quotient is the same.
#[inline]
fn inflate_lag(vlag: i64, load: i128, w: u64) -> i64 {
    debug_assert!(load >= 1, "load {load}");
    let wide = |vlag: i64| ((vlag as i128 * (load + w as i128)) / load) as i64;
    let fast = match (i64::try_from(load), i64::try_from(w)) {
        (Ok(l), Ok(w)) => l.checked_add(w).and_then(|lw| vlag.checked_mul(lw)).map(|p| p / l),
        _ => None,
    };
    match fast {
        Some(lag) => {
            debug_assert_eq!(lag, wide(vlag), "inflate_lag({vlag}, {load}, {w})");
            lag
        }
        None => wide(vlag),
    }
}

impl Sim {
    /// Adds an entity to the timeline and the average (__enqueue_entity).
    pub(crate) fn enqueue_timeline<const G: bool>(&mut self, q: Cq, e: Se) {
        let key = self.entity_key::<G>(q, e) as i128;
        let (w, deadline, slice, vruntime) = {
            let se = self.se_g::<G>(e);
            (se.load.weight, se.deadline, se.slice, se.vruntime)
        };
        let cfs = self.cfs_mut_g::<G>(q);
        cfs.sum_w_vruntime += key * w as i128;
        cfs.sum_weight += w;
        let fresh = cfs.timeline.insert((deadline, e, vruntime));
        debug_assert!(fresh, "entity {e:#x} already on the timeline");
        cfs.slices.add(slice);
        self.note_cfs_first(q);
    }

    /// Removes an entity from the timeline and the average (__dequeue_entity).
    pub(crate) fn dequeue_timeline<const G: bool>(&mut self, q: Cq, e: Se) {
        let key = self.entity_key::<G>(q, e) as i128;
        let (w, deadline, slice, vruntime) = {
            let se = self.se_g::<G>(e);
            (se.load.weight, se.deadline, se.slice, se.vruntime)
        };
        let cfs = self.cfs_mut_g::<G>(q);
        let was = cfs.timeline.remove(&(deadline, e, vruntime));
        debug_assert!(was, "entity {e:#x} not on the timeline");
        cfs.sum_w_vruntime -= key * w as i128;
        cfs.sum_weight -= w;
        cfs.slices.take(slice);
        self.note_cfs_first(q);
    }

    /// Keeps `Sim::cfs_first` of a root runqueue.
    #[inline]
    fn note_cfs_first(&mut self, q: Cq) {
        if q.tg == crate::sched::cgroup::ROOT_TG {
            self.cfs_first[q.cpu as usize] = self.timeline_head_task(q.cpu);
        }
    }

    /// The task at the head of `cpu`'s root fair timeline, which the CPU's
    /// next pick most likely takes; `NO_CURR` when the timeline is empty
    /// or its head is a group entity (not a task to prefetch).
    pub(crate) fn timeline_head_task(&self, cpu: Cpu) -> TaskId {
        match self.rqs[cpu as usize].cfs.timeline.first() {
            Some(&(_, e, _)) if e & GSE == 0 => e,
            _ => NO_CURR,
        }
    }

    /// The shortest slice among queued entities, the running one included (cfs_rq_min_slice).
    pub(crate) fn cfs_min_slice<const G: bool>(&self, q: Cq) -> Ns {
        let cfs = self.cfs_g::<G>(q);
        let mut min = u64::MAX;
        if let Some(c) = cfs.curr {
            if self.se_g::<G>(c).on_rq {
                min = self.se_g::<G>(c).slice;
            }
        }
        if let Some(s) = cfs.slices.min() {
            min = min.min(s);
        }
        min
    }

    /// Places an entity at enqueue: vruntime from V and its preserved lag,
    /// deadline one (virtual) slice later (place_entity).
    pub(crate) fn place_entity<const G: bool>(&mut self, q: Cq, e: Se, flags: u32) {
        let base_slice = self.base_slice_ns;
        // V, and the load of the queue the entity joins, current entity
        // included.
        let (v, load) = self.avg_vruntime_load::<G>(q);
        let place_lag = self.features.on(Feature::PLACE_LAG);
        let initial_half = self.features.on(Feature::PLACE_DEADLINE_INITIAL);
        let nr_queued = self.cfs_g::<G>(q).nr_queued;
        let se = self.se_mut_g::<G>(e);
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
            lag = inflate_lag(se.vlag, load, se.load.weight);
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
    fn update_deadline<const G: bool>(&mut self, e: Se) -> bool {
        let base = self.base_slice_ns;
        let se = self.se_mut_g::<G>(e);
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
    fn protect_slice<const G: bool>(&self, e: Se) -> bool {
        let se = self.se_g::<G>(e);
        vdiff(se.vprot, se.vruntime) > 0
    }

    fn cancel_protect_slice<const G: bool>(&mut self, e: Se) {
        if self.protect_slice::<G>(e) {
            let se = self.se_mut_g::<G>(e);
            se.vprot = se.vruntime;
        }
    }

    /// Protect the slice of the entity about to run: up to its deadline, or
    /// for the shortest queued slice under RUN_TO_PARITY, or for one base
    /// slice without it (set_protect_slice).
    fn set_protect_slice<const G: bool>(&mut self, q: Cq, e: Se) {
        let mut slice = self.tunables.fair.base_slice_normalized_ns;
        if self.features.on(Feature::RUN_TO_PARITY) {
            slice = self.cfs_min_slice::<G>(q);
        }
        let se = self.se_mut_g::<G>(e);
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

    fn update_protect_slice<const G: bool>(&mut self, q: Cq, e: Se) {
        let slice = self.cfs_min_slice::<G>(q);
        let se = self.se_mut_g::<G>(e);
        let v = se.vruntime.wrapping_add(calc_delta_fair(slice, &se.load));
        if vdiff(v, se.vprot) < 0 {
            se.vprot = v;
        }
    }

    /// clear_buddies(): the nominated buddy is cleared up the hierarchy
    /// as far as each level nominates this entity's ancestor (__clear_buddies_next).
    fn clear_buddies<const G: bool>(&mut self, q: Cq, e: Se) {
        if self.cfs_g::<G>(q).next != Some(e) {
            return;
        }
        let mut e = e;
        loop {
            let q = self.cfs_rq_of_g::<G>(e);
            let cfs = self.cfs_mut_g::<G>(q);
            if cfs.next != Some(e) {
                return;
            }
            cfs.next = None;
            match self.parent_entity_g::<G>(e) {
                Some(pe) => e = pe,
                None => return,
            }
        }
    }

    /// Charges the running fair task's runtime since its exec_start, in the
    /// runqueue the task is queued in (update_curr_fair: update_curr of
    /// cfs_rq_of(&rq->curr->se)).
    pub(crate) fn update_curr_fair<const G: bool>(&mut self, cpu: Cpu) {
        let mut q = Cq::root(cpu);
        loop {
            match self.cfs_g::<G>(q).curr {
                None => return,
                Some(c) if !G || c & GSE == 0 => break,
                Some(g) => q = self.group_cfs_rq(g),
            }
        }
        self.update_curr::<G>(q);
    }

    /// update_curr(): charges the current entity of one runqueue for the
    /// time since its exec_start.
    ///
    /// Inlined up to the test whether any time passed since the entity
    /// was last charged: a second call at the same instant, which is
    /// frequent, then costs no call (update_se() would return 0).
    #[inline]
    pub(crate) fn update_curr<const G: bool>(&mut self, q: Cq) {
        let Some(e) = self.cfs_g::<G>(q).curr else { return };
        if self.now() <= self.se_g::<G>(e).exec_start {
            return;
        }
        self.update_curr_charge::<G>(q, e);
    }

    /// update_curr() once time has passed for the running entity `e`.
    #[inline(never)]
    fn update_curr_charge<const G: bool>(&mut self, q: Cq, e: Se) {
        let cpu = q.cpu;
        let is_task = !G || e & GSE == 0;
        let delta = if is_task { self.update_se(e) } else { self.update_se_group(e) };
        if delta == 0 {
            return;
        }
        let se = self.se_mut_g::<G>(e);
        se.vruntime = se.vruntime.wrapping_add(calc_delta_fair(delta, &se.load));
        if is_task {
            self.rqs[cpu as usize].fair_time += delta;
            self.account_mm_sched(cpu, e, delta);
        }
        let resched = self.update_deadline::<G>(e);
        self.follow_zero_vruntime::<G>(q, e);
        if G && q.tg != 0 {
            self.account_cfs_rq_runtime(q, delta);
        }
        let running = if is_task { self.rq(cpu).curr == Some(e) } else { self.rq(cpu).curr.is_some() };
        if self.cfs_g::<G>(q).nr_queued <= 1 || !running {
            return;
        }
        if resched || !self.protect_slice::<G>(e) {
            self.resched_curr(cpu);
            self.clear_buddies::<G>(q, e);
        }
    }

    /// Refreshes the runqueue's and an entity's load averages (update_load_avg).
    /// Always inlined: it runs at every tick, enqueue, dequeue and pick,
    /// and out of line its call and saved registers cost a sixth of it
    /// (the period crossings, `accumulate_periods`, stay out of line).
    #[inline(always)]
    pub(crate) fn update_load_avg<const G: bool>(&mut self, q: Cq, e: Option<Se>) {
        self.balance_touch(q.cpu);
        let now = self.now();
        if let (false, Some(e)) = (G, e) {
            // Flat: the runqueue and the task are apart, and the running
            // task's average is often in step with its runqueue's.
            let (cfs, se) = (&mut self.rqs[q.cpu as usize].cfs, &mut self.tasks[e as usize].se);
            if cfs.curr == Some(e) {
                let on_rq = se.on_rq && !se.sched_delayed;
                let (lw, nr) = (cfs.load_weight, cfs.h_nr_runnable as u64);
                cfs.avg.update_rq_and_curr(&mut se.avg, now, lw, nr, se.load.weight, on_rq);
                return;
            }
        }
        let cfs = self.cfs_mut_g::<G>(q);
        let curr = cfs.curr;
        let (lw, nr) = (cfs.load_weight, cfs.h_nr_runnable as u64);
        cfs.avg.update_rq(now, lw, nr, curr.is_some());
        if let Some(e) = e {
            let se = self.se_mut_g::<G>(e);
            let on_rq = se.on_rq && !se.sched_delayed;
            se.avg.update_entity(now, se.load.weight, on_rq, curr == Some(e));
        }
        if G && q.tg != 0 {
            self.update_tg_load_avg(q);
        }
    }

    /// enqueue_entity(): place, account and queue an entity (the walk up
    /// the hierarchy and the h_nr counts are enqueue_task_fair's).
    pub(crate) fn enqueue_entity<const G: bool>(&mut self, q: Cq, e: Se, flags: u32) {
        let is_curr = self.cfs_g::<G>(q).curr == Some(e);
        if is_curr {
            self.place_entity::<G>(q, e, flags);
        }
        self.update_curr::<G>(q);
        self.update_load_avg::<G>(q, Some(e));
        self.update_cfs_group::<G>(e);
        if !is_curr {
            self.place_entity::<G>(q, e, flags);
        }
        let w = self.se_g::<G>(e).load.weight;
        {
            let cfs = self.cfs_mut_g::<G>(q);
            cfs.load_weight += w;
            cfs.nr_queued += 1;
        }
        let is_task = !G || e & GSE == 0;
        if is_task && flags & enq::MIGRATED != 0 {
            self.task_mut(e).se.exec_start = 0;
        }
        if !is_curr {
            self.enqueue_timeline::<G>(q, e);
        }
        if is_task {
            let stamp = self.task(e).se.lru_stamp;
            self.rq_mut(q.cpu).cfs.lru.insert((stamp, e));
        }
        self.se_mut_g::<G>(e).on_rq = true;
        self.follow_zero_vruntime::<G>(q, e);
        if G && q.tg != 0 && self.cfs_g::<G>(q).nr_queued == 1 {
            self.check_enqueue_throttle(q);
        }
    }

    /// A delayed (still queued) task is woken (requeue_delayed_entity);
    /// clear_delayed() counts it runnable again up the hierarchy.
    pub(crate) fn requeue_delayed_entity<const G: bool>(&mut self, q: Cq, p: TaskId) {
        if self.features.on(Feature::DELAY_ZERO) {
            self.update_entity_lag::<G>(q, p);
            if self.task(p).se.vlag > 0 {
                let is_curr = self.cfs_g::<G>(q).curr == Some(p);
                self.cfs_mut_g::<G>(q).nr_queued -= 1;
                if !is_curr {
                    self.dequeue_timeline::<G>(q, p);
                }
                self.task_mut(p).se.vlag = 0;
                self.place_entity::<G>(q, p, 0);
                if !is_curr {
                    self.enqueue_timeline::<G>(q, p);
                }
                self.cfs_mut_g::<G>(q).nr_queued += 1;
            }
        }
        self.update_load_avg::<G>(q, Some(p));
        self.task_mut(p).se.sched_delayed = false;
        self.add_h_nr::<G>(p, 0, 1);
    }

    /// dequeue_entity(): returns false if the dequeue is delayed instead
    /// (tasks only: a group entity leaves when its runqueue empties). The
    /// walk and the h_nr counts are dequeue_task_fair's.
    pub(crate) fn dequeue_entity<const G: bool>(&mut self, q: Cq, e: Se, flags: u32) -> bool {
        let sleep = flags & deq::SLEEP != 0;
        let is_task = !G || e & GSE == 0;
        self.update_curr::<G>(q);
        self.clear_buddies::<G>(q, e);
        if flags & deq::DELAYED == 0 && is_task {
            let delay = sleep && flags & deq::SPECIAL == 0;
            if self.features.on(Feature::DELAY_DEQUEUE) && delay && !self.entity_eligible::<G>(q, e) {
                self.update_load_avg::<G>(q, Some(e));
                self.task_mut(e).se.sched_delayed = true;
                self.add_h_nr::<G>(e, 0, -1);
                return false;
            }
        }
        self.update_load_avg::<G>(q, Some(e));
        self.update_entity_lag::<G>(q, e);
        if self.cfs_g::<G>(q).curr != Some(e) {
            self.dequeue_timeline::<G>(q, e);
        }
        if self.features.on(Feature::PLACE_REL_DEADLINE) && !sleep {
            let se = self.se_mut_g::<G>(e);
            se.deadline = se.deadline.wrapping_sub(se.vruntime);
            se.rel_deadline = true;
        }
        let (w, delayed, stamp) = {
            let se = self.se_mut_g::<G>(e);
            se.on_rq = false;
            (se.load.weight, se.sched_delayed, se.lru_stamp)
        };
        if is_task {
            self.rq_mut(q.cpu).cfs.lru.remove(&(stamp, e));
        }
        let cfs = self.cfs_mut_g::<G>(q);
        cfs.load_weight -= w;
        cfs.nr_queued -= 1;
        if is_task && self.check_invariants {
            if let Err(err) = check_saved_lag(self, e) {
                panic!("EEVDF invariant violated at t={}: {err}", self.now());
            }
        }
        if flags & deq::DELAYED != 0 || delayed {
            // finish_delayed_dequeue_entity()
            let zero = self.features.on(Feature::DELAY_ZERO);
            let se = self.se_mut_g::<G>(e);
            se.sched_delayed = false;
            if zero && se.vlag > 0 {
                se.vlag = 0;
            }
        }
        if G && q.tg != 0 {
            self.return_cfs_rq_runtime(q);
        }
        self.update_cfs_group::<G>(e);
        self.follow_zero_vruntime::<G>(q, e);
        true
    }

    /// The EEVDF pick: the eligible entity with the earliest virtual deadline,
    /// keeping a protected current entity (pick_eevdf).
    pub(crate) fn pick_eevdf<const G: bool>(&self, q: Cq, protect: bool) -> Option<Se> {
        let cfs = self.cfs_g::<G>(q);
        let first = cfs.timeline.first().map(|&(_, p, _)| p);
        let mut curr = cfs.curr.filter(|&c| self.se_g::<G>(c).on_rq);
        if cfs.nr_queued == 1 {
            return curr.or(first);
        }
        // V does not change during the pick: its sums are taken once
        // (entity_eligible() for each candidate, without recomputing them).
        let (avg, load) = self.avg_sums::<G>(q);
        let zero = cfs.zero_vruntime;
        // Σ w fits 64 bits in practice: one 64 x 64-bit product per test.
        let load64 = i64::try_from(load);
        let eligible_at = |v: u64| match load64 {
            Ok(l) => avg >= i128::from(vdiff(v, zero)) * i128::from(l),
            Err(_) => avg >= i128::from(vdiff(v, zero)) * load,
        };
        let eligible = |e: Se| eligible_at(self.se_g::<G>(e).vruntime);
        if let Some(c) = curr {
            if !eligible(c) {
                curr = None;
            }
        }
        if let Some(c) = curr {
            if protect && self.protect_slice::<G>(c) {
                return Some(c);
            }
        }
        // The timeline is in deadline order: the first eligible entity is the pick.
        let best = cfs.timeline.iter().find(|&&(_, _, v)| eligible_at(v)).map(|&(_, p, _)| p);
        match (best, curr) {
            (None, c) => c.or(first),
            (Some(b), Some(c)) if vdiff(self.se_g::<G>(c).deadline, self.se_g::<G>(b).deadline) < 0 => Some(c),
            (Some(b), _) => Some(b),
        }
    }

    /// pick_next_entity(): an eligible buddy first, then EEVDF.
    fn pick_next_entity<const G: bool>(&self, q: Cq) -> Option<Se> {
        if self.features.on(Feature::PICK_BUDDY) {
            if let Some(b) = self.cfs_g::<G>(q).next {
                let se = self.se_g::<G>(b);
                if se.on_rq && !se.sched_delayed && self.entity_eligible::<G>(q, b) {
                    return Some(b);
                }
            }
        }
        self.pick_eevdf::<G>(q, true)
    }

    /// pick_task_fair(): walks down from the root runqueue, each level
    /// picking among its own entities; finishes delayed dequeues the pick
    /// runs into.
    pub(crate) fn pick_task_fair<const G: bool>(&mut self, cpu: Cpu) -> Option<TaskId> {
        'again: loop {
            let mut q = Cq::root(cpu);
            if self.cfs_g::<G>(q).nr_queued == 0 {
                return None;
            }
            let p = loop {
                if self.cfs_g::<G>(q).curr.is_some() {
                    self.update_curr::<G>(q);
                }
                if G && self.check_cfs_rq_runtime(q) {
                    continue 'again;
                }
                let e = self.pick_next_entity::<G>(q)?;
                if !G || e & GSE == 0 {
                    break e;
                }
                q = self.group_cfs_rq(e);
                debug_assert!(!self.cfs_rq_throttled(q), "picked the entity of a throttled runqueue");
                if self.cfs_g::<G>(q).nr_queued == 0 {
                    debug_assert!(false, "group entity {e:#x} queued with an empty runqueue");
                    return None;
                }
            };
            if self.task(p).se.sched_delayed {
                self.dequeue_task_fair::<G>(cpu, p, deq::SLEEP | deq::DELAYED);
                self.finish_dequeue(cpu, p);
                continue 'again;
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
        let q = self.cfs_rq_of(p);
        self.clear_buddies::<true>(q, p);
        self.update_curr::<true>(q);
        // Forfeit the remaining request, only if eligible: an ineligible
        // yielder pushed further right would run away from V.
        if self.entity_eligible::<true>(q, p) {
            let se = &mut self.task_mut(p).se;
            se.vruntime = se.deadline;
            se.deadline = se.deadline.wrapping_add(calc_delta_fair(se.slice, &se.load));
        }
    }

    /// YIELD_TO_LAG_CREDIT: make a not-yet-eligible yield_to() target eligible
    /// by crediting it lag up to V, within the lag bound (experiment 003).
    fn credit_entity_vlag(&mut self, q: Cq, p: TaskId) {
        if self.entity_eligible::<true>(q, p) {
            return;
        }
        let v = self.avg_vruntime::<true>(q);
        let limit = calc_delta_fair((2 * self.task(p).se.slice).max(self.costs.tick_ns()), &self.task(p).se.load);
        let in_tree = self.cfs(q).curr != Some(p);
        if in_tree {
            self.dequeue_timeline::<true>(q, p);
        }
        let se = &mut self.task_mut(p).se;
        let owed = vdiff(se.vruntime, v).max(0) as u64;
        let credit = owed.min(limit);
        se.vruntime = se.vruntime.wrapping_sub(credit);
        se.deadline = se.deadline.wrapping_sub(credit);
        if in_tree {
            self.enqueue_timeline::<true>(q, p);
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
            self.cancel_protect_slice::<true>(c);
        }
        self.resched_curr(cpu);
    }

    /// check_preempt_wakeup_fair(): compares the two tasks' entities at
    /// the level where their hierarchies meet (find_matching_se).
    fn check_preempt_wakeup_fair<const G: bool>(&mut self, cpu: Cpu, p: TaskId, wake_flags: u32) {
        let Some(curr) = self.rq(cpu).curr else { return };
        if curr == p {
            return;
        }
        if G && self.throttled_hierarchy(self.cfs_rq_of_g::<G>(p)) {
            return;
        }
        if self.features.on(Feature::NEXT_BUDDY) && wake_flags & wf::FORK == 0 && !self.task(p).se.sched_delayed {
            self.set_next_buddy(p);
        }
        if self.rq(cpu).need_resched || !self.features.on(Feature::WAKEUP_PREEMPTION) {
            return;
        }
        let (se, pse) = if G { self.find_matching_se(curr, p) } else { (curr, p) };
        let cse_idle = self.se_is_idle(se);
        let pse_idle = self.se_is_idle(pse);
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
        let q = self.cfs_rq_of_g::<G>(se);
        self.update_curr::<G>(q);
        let preempt_short = self.features.on(Feature::PREEMPT_SHORT) && self.se_g::<G>(pse).slice < self.se_g::<G>(se).slice;
        if self.pick_eevdf::<G>(q, !preempt_short) == Some(pse) {
            if preempt_short {
                self.cancel_protect_slice::<G>(se);
            }
            self.resched_curr(cpu);
            return;
        }
        if self.features.on(Feature::RUN_TO_PARITY) && preempt_short {
            self.update_protect_slice::<G>(q, se);
        }
    }

    /// put_prev_entity(): the entity stops running on its runqueue.
    fn put_prev_entity<const G: bool>(&mut self, q: Cq, e: Se) {
        if self.se_g::<G>(e).on_rq {
            self.update_curr::<G>(q);
        }
        // Throttle a runqueue that has used up its runtime.
        if G {
            self.check_cfs_rq_runtime(q);
        }
        if self.se_g::<G>(e).on_rq {
            self.enqueue_timeline::<G>(q, e);
        }
        self.cfs_mut_g::<G>(q).curr = None;
        self.update_load_avg::<G>(q, Some(e));
    }

    /// set_next_entity(): the entity becomes its runqueue's current one.
    fn set_next_entity<const G: bool>(&mut self, q: Cq, e: Se) {
        self.clear_buddies::<G>(q, e);
        if self.se_g::<G>(e).on_rq {
            self.dequeue_timeline::<G>(q, e);
            self.update_load_avg::<G>(q, Some(e));
            self.set_protect_slice::<G>(q, e);
        }
        self.cfs_mut_g::<G>(q).curr = Some(e);
        let now = self.now();
        if !G || e & GSE == 0 {
            let old = self.task(e).se.lru_stamp;
            if self.task(e).se.on_rq {
                self.rq_mut(q.cpu).cfs.lru.replace(&(old, e), (now, e));
            }
        }
        let se = self.se_mut_g::<G>(e);
        se.lru_stamp = now;
        se.exec_start = now;
        se.prev_sum_exec_runtime = se.sum_exec_runtime;
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
            self.dequeue_task_fair::<true>(cpu, p, deq::SLEEP | deq::DELAYED);
            self.finish_dequeue(cpu, p);
        }
    }
}

/// Calls a fair path in the build for this machine: with task groups, or
/// without them (see [`Sim::cfs_g`]).
macro_rules! by_groups {
    ($sim:ident . $f:ident ( $($a:expr),* )) => {
        if $sim.cg.enabled() {
            $sim.$f::<true>($($a),*)
        } else {
            $sim.$f::<false>($($a),*)
        }
    };
}

impl Sim {
    /// put_prev_task_fair(): put_prev_entity() at every level.
    fn put_prev_task_fair<const G: bool>(&mut self, prev: TaskId) {
        let mut e = prev;
        loop {
            let q = self.cfs_rq_of_g::<G>(e);
            self.put_prev_entity::<G>(q, e);
            match self.parent_entity_g::<G>(e) {
                Some(pe) => e = pe,
                None => break,
            }
        }
    }

    /// set_next_task_fair(): set_next_entity() at every level.
    fn set_next_task_fair<const G: bool>(&mut self, p: TaskId) {
        let mut e = p;
        loop {
            let q = self.cfs_rq_of_g::<G>(e);
            self.set_next_entity::<G>(q, e);
            match self.parent_entity_g::<G>(e) {
                Some(pe) => e = pe,
                None => break,
            }
        }
    }

    /// task_tick_fair() with `queued` set (the hrtick): entity_tick()
    /// charges every level and leaves the reschedule to the caller.
    pub(crate) fn task_tick_fair_queued(&mut self, p: TaskId) {
        by_groups!(self.entity_ticks(p));
    }

    /// entity_tick() at every level: charge the running entity and refresh
    /// the load averages and group shares.
    fn entity_ticks<const G: bool>(&mut self, p: TaskId) {
        let mut e = p;
        loop {
            let q = self.cfs_rq_of_g::<G>(e);
            self.update_curr::<G>(q);
            self.update_load_avg::<G>(q, Some(e));
            self.update_cfs_group::<G>(e);
            match self.parent_entity_g::<G>(e) {
                Some(pe) => e = pe,
                None => break,
            }
        }
    }

    /// task_tick_fair(): entity_tick() at every level.
    fn task_tick_fair<const G: bool>(&mut self, cpu: Cpu, p: TaskId) {
        self.entity_ticks::<G>(p);
        self.task_tick_cache(cpu, p);
    }
}

// The hot hooks only choose the variant with or without groups: they are
// #[inline] so that the core's static dispatch calls the variants directly
// (epyc20k1 -0.8 % instructions, mixed-4cpu -0.4 %).
impl SchedClass for FairClass {
    fn id(&self) -> ClassId {
        ClassId::Fair
    }

    #[inline]
    fn enqueue_task(&self, sim: &mut Sim, cpu: Cpu, p: TaskId, flags: u32) {
        by_groups!(sim.enqueue_task_fair(cpu, p, flags));
        // A delayed task's requeue returns before hrtick_update().
        if flags & enq::DELAYED == 0 {
            sim.hrtick_update(cpu);
        }
    }

    #[inline]
    fn dequeue_task(&self, sim: &mut Sim, cpu: Cpu, p: TaskId, flags: u32) -> bool {
        let done = by_groups!(sim.dequeue_task_fair(cpu, p, flags));
        // ... and so does a delayed dequeue.
        if done {
            sim.hrtick_update(cpu);
        }
        done
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
        sim.set_next_buddy(p);
        if sim.features.on(Feature::YIELD_TO_LAG_CREDIT) {
            sim.update_curr_fair::<true>(pcpu);
            let q = sim.cfs_rq_of(p);
            sim.credit_entity_vlag(q, p);
            sim.yield_to_local_force_resched(cpu);
        } else {
            sim.yield_task_fair(cpu);
        }
        true
    }

    #[inline]
    fn wakeup_preempt(&self, sim: &mut Sim, cpu: Cpu, p: TaskId, wake_flags: u32) {
        by_groups!(sim.check_preempt_wakeup_fair(cpu, p, wake_flags));
    }

    #[inline]
    fn pick_task(&self, sim: &mut Sim, cpu: Cpu) -> Option<TaskId> {
        by_groups!(sim.pick_task_fair(cpu))
    }

    #[inline]
    fn put_prev_task(&self, sim: &mut Sim, _cpu: Cpu, prev: TaskId) {
        by_groups!(sim.put_prev_task_fair(prev));
    }

    #[inline]
    fn set_next_task(&self, sim: &mut Sim, _cpu: Cpu, p: TaskId, _first: bool) {
        by_groups!(sim.set_next_task_fair(p));
    }

    fn select_task_rq(&self, sim: &mut Sim, p: TaskId, prev_cpu: Cpu, wake_flags: u32) -> Cpu {
        sim.select_task_rq_fair(p, prev_cpu, wake_flags)
    }

    fn task_tick(&self, sim: &mut Sim, cpu: Cpu, p: TaskId) {
        by_groups!(sim.task_tick_fair(cpu, p));
    }

    fn update_curr(&self, sim: &mut Sim, cpu: Cpu) {
        by_groups!(sim.update_curr_fair(cpu));
    }

    fn migrate_task_rq(&self, sim: &mut Sim, p: TaskId, new_cpu: Cpu) {
        // Move the task's load contribution between the runqueue averages.
        let old = sim.cfs_rq_of(p);
        let new = Cq { cpu: new_cpu, tg: old.tg };
        let now = sim.now();
        let w = sim.task(p).se.load.weight;
        let mut avg = sim.task(p).se.avg;
        sim.cfs_mut(old).avg.detach(&avg, w);
        sim.balance_touch(old.cpu);
        sim.balance_touch(new_cpu);
        let cfs = sim.cfs_mut(new);
        let (lw, nr, running) = (cfs.load_weight, cfs.h_nr_runnable as u64, cfs.curr.is_some());
        cfs.avg.update_rq(now, lw, nr, running);
        cfs.avg.attach(&mut avg, w);
        sim.task_mut(p).se.avg = avg;
    }

    fn task_fork(&self, sim: &mut Sim, p: TaskId) {
        let now = sim.now();
        let w = sim.task(p).se.load.weight;
        sim.task_mut(p).se.avg = crate::sched::pelt::SchedAvg::new_task(w, now);
    }
}

#[cfg(test)]
mod tests {
    use super::inflate_lag;

    proptest::proptest! {
        /// The 64-bit path agrees with the 128-bit division, sign and
        /// truncation included, and the 128-bit one takes over where the
        /// product does not fit 64 bits (loads up to 2^62, so that it
        /// fits 128).
        #[test]
        fn inflate_lag_is_the_wide_division(vlag in proptest::num::i64::ANY, load in 1i128..(1 << 62), w in 0u64..(1 << 40)) {
            let want = ((vlag as i128 * (load + w as i128)) / load) as i64;
            proptest::prop_assert_eq!(inflate_lag(vlag, load, w), want);
            let small = load % (1 << 20) + 1;
            let want = ((vlag as i128 * (small + w as i128)) / small) as i64;
            proptest::prop_assert_eq!(inflate_lag(vlag, small, w), want);
        }
    }
}
