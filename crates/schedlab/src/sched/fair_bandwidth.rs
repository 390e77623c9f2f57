//! CFS bandwidth control (fair.c's CONFIG_CFS_BANDWIDTH parts): cpu.max.
//!
//! A group with a quota has a global pool (`cfs_b->runtime`) that the
//! period timer refills every period, up to quota + cpu.max.burst
//! (__refill_cfs_bandwidth_runtime). Each of the group's per-CPU runqueues
//! runs on runtime it takes from the pool in slices of
//! `sched_cfs_bandwidth_slice` (5 ms, assign_cfs_rq_runtime); when it runs
//! out and the pool is empty the runqueue is throttled: its group entity
//! leaves the parent's runqueue (throttle_cfs_rq) with every task under it,
//! until the period timer hands out new runtime (distribute_cfs_runtime,
//! unthrottle_cfs_rq). A runqueue that empties gives back what it holds
//! beyond 1 ms (return_cfs_rq_runtime), and the slack timer hands that on
//! to throttled runqueues.
//!
//! Modelled as in the kernel before 6.18's task-based throttling: the
//! whole group entity is dequeued when the runqueue is throttled.

use crate::engine::time::{Ns, NSEC_PER_MSEC};
use crate::engine::{Cpu, Event};
use crate::sched::cgroup::{Cq, CpuMax, Se, GSE, ROOT_TG};
use crate::sched::sim::Sim;
use crate::sched::{deq, enq};

/// sysctl_sched_cfs_bandwidth_slice: 5 ms.
pub(crate) const CFS_BANDWIDTH_SLICE: Ns = 5 * NSEC_PER_MSEC;
/// min_cfs_rq_runtime: what a runqueue keeps when it returns slack (1 ms).
pub(crate) const MIN_CFS_RQ_RUNTIME: Ns = NSEC_PER_MSEC;
/// cfs_bandwidth_slack_period (5 ms) and min_bandwidth_expiration (2 ms).
pub(crate) const CFS_SLACK_PERIOD: Ns = 5 * NSEC_PER_MSEC;
/// The least time left before the period timer fires for slack to be handed out.
pub(crate) const MIN_BANDWIDTH_EXPIRATION: Ns = 2 * NSEC_PER_MSEC;

/// A group's bandwidth state (`struct cfs_bandwidth`).
#[derive(Clone, Debug, Default)]
pub struct CfsBandwidth {
    /// Runtime left in the pool this period.
    pub runtime: i64,
    /// No runtime was taken since the last refill (the timer may stop).
    pub idle: bool,
    /// The period timer is armed; `period_gen` invalidates a stale one.
    pub period_active: bool,
    /// Generation of the armed period timer; a stale timer event carries an older one.
    pub period_gen: u32,
    /// When the period timer next fires.
    pub period_expires: Ns,
    /// The slack timer is armed (`cfs_b->slack_started`).
    pub slack_started: bool,
    /// Generation of the armed slack timer.
    pub slack_gen: u32,
    /// The CPU whose timer it is.
    pub timer_cpu: Cpu,
    /// Throttled runqueues, in throttling order (cfs_b->throttled_cfs_rq).
    pub throttled: Vec<Cpu>,
}

impl Sim {
    /// cfs_bandwidth_used(): some group has a quota.
    #[inline]
    pub(crate) fn cfs_bandwidth_used(&self) -> bool {
        self.cg.bandwidth_used
    }

    fn quota(&self, tg: u32) -> Option<Ns> {
        self.cg.groups[tg as usize].max.quota_ns
    }

    /// cfs_rq_throttled().
    #[inline]
    pub(crate) fn cfs_rq_throttled(&self, q: Cq) -> bool {
        q.tg != ROOT_TG && self.cfs(q).throttled
    }

    /// throttled_hierarchy(): the runqueue or one above it is throttled.
    pub(crate) fn throttled_hierarchy(&self, q: Cq) -> bool {
        if !self.cfs_bandwidth_used() {
            return false;
        }
        let mut g = Some(q.tg);
        while let Some(x) = g {
            if self.cfs_rq_throttled(Cq { cpu: q.cpu, tg: x }) {
                return true;
            }
            g = self.cg.groups[x as usize].parent;
        }
        false
    }

    /// rq->nr_running changes outside activate/deactivate (throttling).
    pub(crate) fn add_nr_running(&mut self, cpu: Cpu, n: i64) {
        self.balance_touch(cpu);
        for _ in 0..n.unsigned_abs() {
            let rq = self.rq_mut(cpu);
            if n > 0 {
                rq.nr_running += 1;
                if rq.nr_running == 2 {
                    self.rd.nr_overloaded += 1;
                }
            } else {
                rq.nr_running -= 1;
                if rq.nr_running == 1 {
                    self.rd.nr_overloaded -= 1;
                }
            }
        }
    }

    /// tg_set_cfs_bandwidth(): a new cpu.max (and burst) for a group. The
    /// pool is refilled, every runqueue starts from zero runtime, and the
    /// throttled ones are let go.
    pub(crate) fn tg_set_cfs_bandwidth(&mut self, g: u32, max: CpuMax) {
        for cpu in 0..self.nr_cpus() as Cpu {
            self.update_curr_fair::<true>(cpu);
        }
        self.cg.groups[g as usize].max = max;
        self.cg.bandwidth_used = self.cg.groups.iter().any(|t| t.max.quota_ns.is_some());
        let b = &mut self.cg.groups[g as usize].bw;
        b.runtime = max.quota_ns.map_or(0, |q| q as i64);
        b.period_active = false;
        b.period_gen = b.period_gen.wrapping_add(1);
        b.idle = false;
        for cpu in 0..self.nr_cpus() as Cpu {
            let q = Cq { cpu, tg: g };
            let cfs = self.cfs_mut(q);
            cfs.runtime_enabled = max.quota_ns.is_some();
            cfs.runtime_remaining = 0;
            if cfs.throttled {
                self.unthrottle_cfs_rq(q);
            }
        }
        if max.quota_ns.is_some() && self.started {
            self.start_cfs_bandwidth(g);
        }
    }

    /// start_cfs_bandwidth(): arms the period timer if it is not running.
    fn start_cfs_bandwidth(&mut self, g: u32) {
        let now = self.now();
        let period = self.cg.groups[g as usize].max.period_ns;
        let cpu = self.this_cpu;
        let b = &mut self.cg.groups[g as usize].bw;
        if b.period_active {
            return;
        }
        b.period_active = true;
        b.period_gen = b.period_gen.wrapping_add(1);
        b.period_expires = now + period;
        b.timer_cpu = cpu;
        let gen = b.period_gen;
        self.engine.schedule(now + period, Event::CfsPeriod { tg: g, gen, slack: false });
    }

    /// __assign_cfs_rq_runtime(): tops a runqueue up from the pool, at
    /// least to `target` (a slice, or 1 ns when throttling is the other way).
    fn assign_cfs_rq_runtime(&mut self, q: Cq, target: Ns) -> bool {
        let remaining = self.cfs(q).runtime_remaining;
        let min_amount = target as i64 - remaining;
        let amount = match self.quota(q.tg) {
            None => min_amount,
            Some(_) => {
                self.start_cfs_bandwidth(q.tg);
                let b = &mut self.cg.groups[q.tg as usize].bw;
                if b.runtime > 0 {
                    let a = b.runtime.min(min_amount);
                    b.runtime -= a;
                    b.idle = false;
                    a
                } else {
                    0
                }
            }
        };
        let cfs = self.cfs_mut(q);
        cfs.runtime_remaining += amount;
        cfs.runtime_remaining > 0
    }

    /// account_cfs_rq_runtime(): charges a runqueue's runtime; when it runs
    /// out and no more can be had, the running task is asked to reschedule
    /// (the throttle happens as it is put away).
    // Group paths only: kept out of line so the flat paths stay small.
    #[cold]
    #[inline(never)]
    pub(crate) fn account_cfs_rq_runtime(&mut self, q: Cq, delta: Ns) {
        if q.tg == ROOT_TG || !self.cfs(q).runtime_enabled {
            return;
        }
        let cfs = self.cfs_mut(q);
        cfs.runtime_remaining -= delta as i64;
        if cfs.runtime_remaining > 0 {
            return;
        }
        if !self.assign_cfs_rq_runtime(q, CFS_BANDWIDTH_SLICE) && self.cfs(q).curr.is_some() {
            self.resched_curr(q.cpu);
        }
    }

    /// check_cfs_rq_runtime(): throttles a runqueue that has run out.
    /// Returns true if it is throttled.
    pub(crate) fn check_cfs_rq_runtime(&mut self, q: Cq) -> bool {
        if q.tg == ROOT_TG || !self.cfs_bandwidth_used() {
            return false;
        }
        let cfs = self.cfs(q);
        if !cfs.runtime_enabled || cfs.runtime_remaining > 0 {
            return false;
        }
        if cfs.throttled {
            return true;
        }
        self.throttle_cfs_rq(q)
    }

    /// check_enqueue_throttle(): the first entity queued on an idle,
    /// out-of-runtime runqueue throttles it at once.
    // Group paths only: kept out of line so the flat paths stay small.
    #[cold]
    #[inline(never)]
    pub(crate) fn check_enqueue_throttle(&mut self, q: Cq) {
        if q.tg == ROOT_TG || !self.cfs_bandwidth_used() {
            return;
        }
        let cfs = self.cfs(q);
        if !cfs.runtime_enabled || cfs.curr.is_some() || cfs.throttled {
            return;
        }
        self.account_cfs_rq_runtime(q, 0);
        if self.cfs(q).runtime_remaining <= 0 {
            self.throttle_cfs_rq(q);
        }
    }

    /// throttle_cfs_rq(): the group entity and the tasks under it leave the
    /// hierarchy above; the runqueue keeps its tasks until unthrottled.
    // Group paths only: kept out of line so the flat paths stay small.
    #[cold]
    #[inline(never)]
    fn throttle_cfs_rq(&mut self, q: Cq) -> bool {
        // A last try for runtime: any at all avoids the throttle.
        if self.assign_cfs_rq_runtime(q, 1) {
            return false;
        }
        let e = GSE | self.cg.idx(q.tg, q.cpu) as u32;
        let on_rq = self.se(e).on_rq;
        // Dequeue the group entity, and each parent left empty by it.
        self.walk_group_hierarchy(q, false, on_rq, |s, pq, e| {
            s.dequeue_entity::<true>(pq, e, deq::SLEEP);
            Some(s.cfs(pq).load_weight == 0)
        });
        let now = self.now();
        let cfs = self.cfs_mut(q);
        cfs.throttled = true;
        cfs.throttled_clock = now;
        self.cg.groups[q.tg as usize].bw.throttled.push(q.cpu);
        if self.rq(q.cpu).curr.is_some() {
            self.resched_curr(q.cpu);
        }
        true
    }

    /// unthrottle_cfs_rq(): the group entity and its tasks come back.
    pub(crate) fn unthrottle_cfs_rq(&mut self, q: Cq) {
        let now = self.now();
        let since = self.cfs(q).throttled_clock;
        self.cfs_mut(q).throttled = false;
        let g = &mut self.cg.groups[q.tg as usize];
        g.stats.throttled_ns += now.saturating_sub(since);
        g.bw.throttled.retain(|&c| c != q.cpu);
        if self.cfs(q).load_weight == 0 {
            return;
        }
        // Enqueue the group entity, and each parent it was the first in,
        // up to the first entity still queued.
        self.walk_group_hierarchy(q, true, true, |s, pq, e| {
            if s.se(e).on_rq {
                return None;
            }
            let slice = s.cfs_min_slice::<true>(s.group_cfs_rq(e));
            if slice != u64::MAX {
                s.se_mut(e).slice = slice;
            }
            s.enqueue_entity::<true>(pq, e, enq::WAKEUP);
            Some(true)
        });
        if self.rq(q.cpu).curr.is_none() && self.rq(q.cpu).cfs.nr_queued > 0 {
            self.resched_curr(q.cpu);
        }
    }

    /// The walk throttle_cfs_rq() and unthrottle_cfs_rq() share (their
    /// for_each_sched_entity() loops): from `q`'s group entity up the
    /// hierarchy, each level's runqueue loses (`add` false) or gains the
    /// tasks queued under `q` in h_nr_queued / h_nr_runnable. While
    /// `changing`, `change` takes the entity out of or into its parent's
    /// runqueue and returns whether the next level changes too, or `None`
    /// when it left this one alone; a level left alone, and every level
    /// once the changes stop, only updates its load average and group
    /// weight. The walk ends below a throttled runqueue; only a walk that
    /// reaches the root changes rq->nr_running.
    fn walk_group_hierarchy(&mut self, q: Cq, add: bool, mut changing: bool, mut change: impl FnMut(&mut Sim, Cq, Se) -> Option<bool>) {
        self.balance_touch(q.cpu);
        let (queued, runnable) = (self.cfs(q).h_nr_queued, self.cfs(q).h_nr_runnable);
        let mut e = GSE | self.cg.idx(q.tg, q.cpu) as u32;
        loop {
            let pq = self.cfs_rq_of(e);
            let changed = if changing { change(self, pq, e) } else { None };
            match changed {
                Some(next) => changing = next,
                None => {
                    changing = false;
                    self.update_load_avg::<true>(pq, Some(e));
                    self.update_cfs_group::<true>(e);
                }
            }
            let cfs = self.cfs_mut(pq);
            if add {
                cfs.h_nr_queued += queued;
                cfs.h_nr_runnable += runnable;
            } else {
                cfs.h_nr_queued -= queued;
                cfs.h_nr_runnable -= runnable;
            }
            if self.cfs_rq_throttled(pq) {
                return;
            }
            match self.parent_entity(e) {
                Some(pe) => e = pe,
                None => break,
            }
        }
        self.add_nr_running(q.cpu, if add { queued as i64 } else { -(queued as i64) });
    }

    /// distribute_cfs_runtime(): hands the pool to throttled runqueues in
    /// order, unthrottling each that gets enough.
    fn distribute_cfs_runtime(&mut self, g: u32) {
        let list = self.cg.groups[g as usize].bw.throttled.clone();
        for cpu in list {
            let pool = self.cg.groups[g as usize].bw.runtime;
            if pool <= 0 {
                break;
            }
            let q = Cq { cpu, tg: g };
            let want = -self.cfs(q).runtime_remaining + 1;
            let give = want.min(pool);
            self.cg.groups[g as usize].bw.runtime -= give;
            self.cfs_mut(q).runtime_remaining += give;
            if self.cfs(q).runtime_remaining > 0 {
                self.unthrottle_cfs_rq(q);
            }
        }
    }

    /// The period timer (do_sched_cfs_period_timer) or the slack timer
    /// (do_sched_cfs_slack_timer) of group `g` fires.
    pub(crate) fn on_cfs_bandwidth_timer(&mut self, g: u32, gen: u32, slack: bool) {
        let cpu = self.cg.groups[g as usize].bw.timer_cpu;
        self.this_cpu = cpu;
        let Some(quota) = self.quota(g) else { return };
        if slack {
            let b = &mut self.cg.groups[g as usize].bw;
            if gen != b.slack_gen || !b.slack_started {
                return;
            }
            b.slack_started = false;
            if b.runtime > CFS_BANDWIDTH_SLICE as i64 {
                self.distribute_cfs_runtime(g);
            }
            return;
        }
        let now = self.now();
        let tg = &mut self.cg.groups[g as usize];
        if gen != tg.bw.period_gen || !tg.bw.period_active {
            return;
        }
        let throttled = !tg.bw.throttled.is_empty();
        tg.stats.nr_periods += 1;
        // __refill_cfs_bandwidth_runtime(): quota more, at most quota + burst.
        let cap = (quota + tg.max.burst_ns) as i64;
        tg.bw.runtime = (tg.bw.runtime + quota as i64).min(cap);
        if tg.bw.idle && !throttled {
            tg.bw.period_active = false;
            return;
        }
        let period = tg.max.period_ns;
        tg.bw.period_expires = now + period;
        let gen = tg.bw.period_gen;
        self.engine.schedule(now + period, Event::CfsPeriod { tg: g, gen, slack: false });
        if !throttled {
            self.cg.groups[g as usize].bw.idle = true;
            return;
        }
        self.cg.groups[g as usize].stats.nr_throttled += 1;
        self.distribute_cfs_runtime(g);
        self.cg.groups[g as usize].bw.idle = false;
    }

    /// return_cfs_rq_runtime(): an emptied runqueue gives back all but
    /// 1 ms, and the slack timer is started if that lets a throttled
    /// runqueue run.
    // Group paths only: kept out of line so the flat paths stay small.
    #[cold]
    #[inline(never)]
    pub(crate) fn return_cfs_rq_runtime(&mut self, q: Cq) {
        let cfs = self.cfs(q);
        if !cfs.runtime_enabled || cfs.nr_queued > 0 {
            return;
        }
        let slack = cfs.runtime_remaining - MIN_CFS_RQ_RUNTIME as i64;
        if slack <= 0 {
            return;
        }
        self.cfs_mut(q).runtime_remaining -= slack;
        let now = self.now();
        let b = &mut self.cg.groups[q.tg as usize].bw;
        b.runtime += slack;
        if b.runtime > CFS_BANDWIDTH_SLICE as i64 && !b.throttled.is_empty() {
            // start_cfs_slack_bandwidth(): not when the refill is near.
            if b.period_active && b.period_expires.saturating_sub(now) < CFS_SLACK_PERIOD + MIN_BANDWIDTH_EXPIRATION {
                return;
            }
            if b.slack_started {
                return;
            }
            b.slack_started = true;
            b.slack_gen = b.slack_gen.wrapping_add(1);
            let gen = b.slack_gen;
            self.engine.schedule(now + CFS_SLACK_PERIOD, Event::CfsPeriod { tg: q.tg, gen, slack: true });
        }
    }

    /// Throttled time so far of runqueues still throttled at the end.
    pub(crate) fn finish_bandwidth_accounting(&mut self) {
        let now = self.now();
        for g in 1..self.cg.groups.len() {
            for cpu in self.cg.groups[g].bw.throttled.clone() {
                let since = self.cfs(Cq { cpu, tg: g as u32 }).throttled_clock;
                self.cg.groups[g].stats.throttled_ns += now.saturating_sub(since);
                self.cfs_mut(Cq { cpu, tg: g as u32 }).throttled_clock = now;
            }
        }
    }
}
