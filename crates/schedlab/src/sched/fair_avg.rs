//! The fair class's zero-lag point (fair.c's avg_vruntime family): V, the
//! load-weighted average vruntime of a cfs_rq, kept as sums of keys
//! relative to `zero_vruntime` (see the math in fair.rs); eligibility
//! against it, and the lag an entity carries when it leaves.

use crate::sched::cgroup::{Cq, Se};
use crate::sched::fair::{calc_delta_fair, vdiff};
use crate::sched::sim::Sim;

/// How far (virtual ns, ~4 s) an entity charged, queued or dequeued may
/// be from zero_vruntime before zero moves to V ([`Sim::follow_zero_vruntime`]).
const ZERO_DRIFT_MAX: u64 = 1 << 32;

impl Sim {
    #[inline]
    pub(crate) fn entity_key<const G: bool>(&self, q: Cq, e: Se) -> i64 {
        vdiff(self.se_g::<G>(e).vruntime, self.cfs_g::<G>(q).zero_vruntime)
    }

    /// Σ w (v - zero) and Σ w including the running entity.
    #[inline]
    pub(crate) fn avg_sums<const G: bool>(&self, q: Cq) -> (i128, i128) {
        let cfs = self.cfs_g::<G>(q);
        let mut avg = cfs.sum_w_vruntime;
        let mut load = cfs.sum_weight as i128;
        if let Some(c) = cfs.curr {
            let se = self.se_g::<G>(c);
            if se.on_rq {
                let w = se.load.weight as i128;
                avg += vdiff(se.vruntime, cfs.zero_vruntime) as i128 * w;
                load += w;
            }
        }
        (avg, load)
    }

    /// V, the load-weighted average vruntime of the queue (avg_vruntime).
    pub(crate) fn avg_vruntime<const G: bool>(&self, q: Cq) -> u64 {
        self.avg_vruntime_load::<G>(q).0
    }

    /// V and the queue's load Σ w (the current entity included), from one
    /// reading of the sums: place_entity needs both.
    #[inline]
    pub(crate) fn avg_vruntime_load<const G: bool>(&self, q: Cq) -> (u64, i128) {
        let (avg, load) = self.avg_sums::<G>(q);
        let mut off = 0i64;
        if load > 0 {
            // Floor division, so that V never runs ahead of the true
            // average; in 64 bits when the sums fit, as they do while
            // zero_vruntime follows V (a 128-bit division costs several
            // times more).
            off = match (i64::try_from(avg), i64::try_from(load)) {
                (Ok(a), Ok(l)) => a.div_euclid(l),
                _ => {
                    let mut a = avg;
                    if a < 0 {
                        a -= load - 1;
                    }
                    (a / load) as i64
                }
            };
        }
        (self.cfs_g::<G>(q).zero_vruntime.wrapping_add(off as u64), load)
    }

    /// V >= vruntime, by cross-multiplying (vruntime_eligible).
    pub(crate) fn vruntime_eligible<const G: bool>(&self, q: Cq, vruntime: u64) -> bool {
        let (avg, load) = self.avg_sums::<G>(q);
        avg >= vdiff(vruntime, self.cfs_g::<G>(q).zero_vruntime) as i128 * load
    }

    /// The entity is eligible: its vruntime is at or before the runqueue's weighted average V (`entity_eligible()`).
    #[inline]
    pub(crate) fn entity_eligible<const G: bool>(&self, q: Cq, e: Se) -> bool {
        self.vruntime_eligible::<G>(q, self.se_g::<G>(e).vruntime)
    }

    /// Moves zero_vruntime to V so keys stay small (update_zero_vruntime).
    /// Rare (see [`Sim::follow_zero_vruntime`]), so out of line: inlined,
    /// V's division made its hot caller too big to inline in turn.
    #[cold]
    #[inline(never)]
    pub(super) fn update_zero_vruntime<const G: bool>(&mut self, q: Cq) {
        let v = self.avg_vruntime::<G>(q);
        let cfs = self.cfs_mut_g::<G>(q);
        let delta = vdiff(v, cfs.zero_vruntime) as i128;
        cfs.sum_w_vruntime -= cfs.sum_weight as i128 * delta;
        cfs.zero_vruntime = v;
    }

    /// update_zero_vruntime(), only once the entity `e` just charged,
    /// queued or dequeued is ZERO_DRIFT_MAX from zero_vruntime (saving V's
    /// division on most calls). What the class compares does not depend on
    /// where zero is: moving it by d takes W d off Σ w (v - zero), which
    /// leaves V = zero + ⌊Σ w (v - zero) / W⌋ and every eligibility test as
    /// they were, and V of an empty queue is zero itself, which only sets
    /// where the vruntimes of the entities queued next start (only their
    /// differences are compared). Such an entity is near V (within its lag
    /// bounds, the running one within its slice), so the keys stay small.
    #[inline(always)]
    pub(super) fn follow_zero_vruntime<const G: bool>(&mut self, q: Cq, e: Se) {
        let drift = vdiff(self.se_g::<G>(e).vruntime, self.cfs_g::<G>(q).zero_vruntime);
        if drift.unsigned_abs() > ZERO_DRIFT_MAX {
            self.update_zero_vruntime::<G>(q);
        }
    }

    /// Lag limit: an entity may be owed, or owe, at most max(2 slices, a tick) of service.
    pub(super) fn entity_lag<const G: bool>(&self, avruntime: u64, e: Se) -> i64 {
        let se = self.se_g::<G>(e);
        let vlag = vdiff(avruntime, se.vruntime);
        let limit = calc_delta_fair((2 * se.slice).max(self.costs.tick_ns()), &se.load) as i64;
        vlag.clamp(-limit, limit)
    }

    pub(crate) fn update_entity_lag<const G: bool>(&mut self, q: Cq, e: Se) {
        let v = self.avg_vruntime::<G>(q);
        let lag = self.entity_lag::<G>(v, e);
        self.se_mut_g::<G>(e).vlag = lag;
    }
}
