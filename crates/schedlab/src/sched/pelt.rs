//! Per-entity load tracking (PELT), modelled on Linux 6.x `kernel/sched/pelt.{c,h}`.
//!
//! # The model
//!
//! Time is cut into periods of 1024 units, where one unit is 1024 ns (a cheap
//! stand-in for a microsecond, so a period is ~1 ms). For every entity we keep
//! a geometrically decaying sum of how much of each past period it was
//! runnable / running:
//!
//! ```text
//! sum = u_0 + u_1*y + u_2*y^2 + ...      with y^32 = 1/2
//! ```
//!
//! where `u_i` is the contribution (0..=1024 units) of the period `i` periods
//! ago. A contribution therefore loses half its weight every 32 ms.
//!
//! Because the series is geometric it never has to be stored: when `p`
//! period boundaries are crossed, the whole old sum is multiplied by `y^p`
//! and the new time is added. The new time is split into three segments:
//!
//! ```text
//!   d1: the rest of the period that was partially filled at the last update
//!   p-1 full periods in between
//!   d3: the part of the (new) current period elapsed so far
//!
//!   contrib = d1*y^p + 1024*(y + y^2 + ... + y^(p-1)) + d3
//! ```
//!
//! The middle term is a partial geometric series; it is obtained in closed
//! form from the infinite one, `LOAD_AVG_MAX = 1024 * sum_{n>=0} y^n`, as
//! `LOAD_AVG_MAX - LOAD_AVG_MAX*y^p - 1024`.
//!
//! An average is the sum divided by the largest value that sum could have
//! reached at this point of the current period (an entity that was always
//! runnable), i.e. `LOAD_AVG_MAX - 1024 + period_contrib`. So `util_avg` is
//! the recent fraction of time spent running, scaled to
//! `SCHED_CAPACITY_SCALE`.
//!
//! All arithmetic is integer (`y^n` comes from a fixed-point table), so
//! results are bit-for-bit reproducible on every machine. Frequency and
//! CPU-capacity invariance are not modelled: every CPU is assumed to run at
//! its maximum frequency with capacity 1024, so no scale factors appear and
//! the PELT clock is simply the task clock (`now`, in ns).
//!
//! # Units of the fields (same as the kernel)
//!
//! * task entity: `load_sum` is *unweighted* runnable time (at most
//!   `LOAD_AVG_MAX`); the weight is applied only when computing
//!   `load_avg = weight * load_sum / divider`.
//! * runqueue: `load_sum` is weighted by the queued load, so
//!   `load_avg = load_sum / divider`.
//! * `runnable_sum` and `util_sum` are pre-scaled by `SCHED_CAPACITY_SCALE`
//!   (`contrib << SCHED_CAPACITY_SHIFT`), so `runnable_avg` / `util_avg` come
//!   out directly in capacity units (1024 == one CPU fully busy).

/// Fixed-point shift of CPU capacity: a capacity of 1.0 is `1 << 10`.
pub(crate) const SCHED_CAPACITY_SHIFT: u32 = 10;
/// Capacity of a full CPU (and the value `util_avg` of an always-running task
/// converges to).
pub(crate) const SCHED_CAPACITY_SCALE: u64 = 1 << SCHED_CAPACITY_SHIFT;
/// Half-life of the decay, in periods: `y^LOAD_AVG_PERIOD == 1/2`.
pub(crate) const LOAD_AVG_PERIOD: u64 = 32;
/// Value `1024 * sum_{n>=0} y^n` converges to with the integer arithmetic
/// used here: the largest possible (unweighted) sum.
pub(crate) const LOAD_AVG_MAX: u64 = 47742;
/// Length of one PELT period, in time units of 1024 ns.
pub(crate) const PELT_PERIOD: u64 = 1024;
/// Smallest possible divider (the maximum sum right at a period boundary).
pub(crate) const PELT_MIN_DIVIDER: u64 = LOAD_AVG_MAX - PELT_PERIOD;

/// Nanoseconds are turned into PELT units (~1 us) by this shift.
const NS_TO_UNIT_SHIFT: u32 = 10;

/// `y^n * 2^32` (truncated, using `2^32 - 1` for n = 0) for n in 0..32.
/// These are the kernel's `runnable_avg_yN_inv` values; the unit tests
/// re-derive them.
#[rustfmt::skip]
const RUNNABLE_AVG_YN_INV: [u32; LOAD_AVG_PERIOD as usize] = [
    0xffff_ffff, 0xfa83_b2da, 0xf525_7d14, 0xefe4_b99a, 0xeac0_c6e6, 0xe5b9_06e6,
    0xe0cc_deeb, 0xdbfb_b796, 0xd744_fcc9, 0xd2a8_1d91, 0xce24_8c14, 0xc9b9_bd85,
    0xc567_2a10, 0xc12c_4cc9, 0xbd08_a39e, 0xb8fb_af46, 0xb504_f333, 0xb123_f581,
    0xad58_3ee9, 0xa9a1_5ab4, 0xa5fe_d6a9, 0xa270_4302, 0x9ef5_325f, 0x9b8d_39b9,
    0x9837_f050, 0x94f4_efa8, 0x91c3_d373, 0x8ea4_398a, 0x8b95_c1e3, 0x8898_0e80,
    0x85aa_c367, 0x82cd_8698,
];

/// `(a * mul) >> shift` with a wide intermediate, so it cannot overflow.
#[inline]
fn mul_u64_u32_shr(a: u64, mul: u32, shift: u32) -> u64 {
    ((u128::from(a) * u128::from(mul)) >> shift) as u64
}

/// Decays `val` by `n` periods: approximately `val * y^n`.
///
/// Whole half-lives (`n / 32`) are applied as a right shift and the
/// remainder through the fixed-point table. Beyond 63 half-lives every `u64`
/// has decayed to zero, so that case short-circuits.
#[must_use]
pub(crate) fn decay_load(val: u64, n: u64) -> u64 {
    if n > LOAD_AVG_PERIOD * 63 {
        return 0;
    }
    let val = val >> (n / LOAD_AVG_PERIOD);
    mul_u64_u32_shr(val, RUNNABLE_AVG_YN_INV[(n % LOAD_AVG_PERIOD) as usize], 32)
}

/// Contribution of a delta that crossed `periods >= 1` boundaries:
/// `d1 * y^p + 1024 * (y + ... + y^(p-1)) + d3` (see the module docs).
fn accumulate_pelt_segments(periods: u64, d1: u32, d3: u32) -> u32 {
    // d1 completed the old period, which is now `periods` periods in the past.
    let c1 = decay_load(u64::from(d1), periods);
    // The full periods in between: the infinite series minus its tail from
    // y^p on, minus the y^0 term (that slot is the current period, i.e. d3).
    let c2 = LOAD_AVG_MAX - decay_load(LOAD_AVG_MAX, periods) - PELT_PERIOD;
    // d3 lies in the current period and is not decayed (y^0 == 1).
    (c1 + c2) as u32 + d3
}

/// Adds `delta` time units to the sums, decaying them first if period
/// boundaries were crossed. Returns the number of boundaries crossed.
///
/// Most updates stay within the current period: that case, a few adds,
/// is inlined into the caller; the decay is called.
#[inline]
fn accumulate_sum(delta: u64, sa: &mut SchedAvg, load: u64, runnable: u64, running: bool) -> u64 {
    if delta + u64::from(sa.period_contrib) < PELT_PERIOD {
        // delta < 1024: the whole contribution, undecayed.
        sa.period_contrib += delta as u32;
        add_contrib(sa, delta, load, runnable, running);
        return 0;
    }
    let periods = accumulate_periods(delta, sa, load, runnable, running);
    debug_assert_ne!(periods, 0);
    periods
}

/// [`accumulate_sum`] of a delta that may cross period boundaries.
#[inline(never)]
fn accumulate_periods(
    mut delta: u64,
    sa: &mut SchedAvg,
    load: u64,
    runnable: u64,
    running: bool,
) -> u64 {
    // Without a period crossing, delta < 1024 and it is the whole contribution.
    let mut contrib = delta as u32;

    delta += u64::from(sa.period_contrib);
    let periods = delta / PELT_PERIOD;

    if periods != 0 {
        // Age the history by the number of boundaries crossed ...
        sa.load_sum = decay_load(sa.load_sum, periods);
        sa.runnable_sum = decay_load(sa.runnable_sum, periods);
        sa.util_sum = decay_load(u64::from(sa.util_sum), periods) as u32;

        // ... then compute the contribution of the three segments. When
        // `load` is zero, runnable and running are zero too (enforced by the
        // caller) and `contrib` is not used, so skip computing it.
        delta %= PELT_PERIOD;
        if load != 0 {
            contrib = accumulate_pelt_segments(
                periods,
                (PELT_PERIOD as u32) - sa.period_contrib,
                delta as u32,
            );
        }
    }
    sa.period_contrib = delta as u32;
    add_contrib(sa, u64::from(contrib), load, runnable, running);
    periods
}

/// [`accumulate_periods`] of a runqueue's sums `rq` and its running
/// task's `se`, at the same point of the same period, by `delta` units
/// that cross a boundary ([`SchedAvg::update_rq_and_curr`]). The task is
/// queued (`queued` 1) or not (0); it runs if queued.
#[inline(always)]
fn accumulate_periods_pair(
    delta: u64,
    rq: &mut SchedAvg,
    se: &mut SchedAvg,
    load: u64,
    runnable: u64,
    running: bool,
    queued: u64,
) {
    let pc = rq.period_contrib;
    let delta = delta + u64::from(pc);
    let periods = delta / PELT_PERIOD;
    debug_assert_ne!(periods, 0);
    let d3 = (delta % PELT_PERIOD) as u32;
    for sa in [&mut *rq, &mut *se] {
        sa.load_sum = decay_load(sa.load_sum, periods);
        sa.runnable_sum = decay_load(sa.runnable_sum, periods);
        sa.util_sum = decay_load(u64::from(sa.util_sum), periods) as u32;
        sa.period_contrib = d3;
    }
    let contrib = u64::from(accumulate_pelt_segments(periods, PELT_PERIOD as u32 - pc, d3));
    add_contrib(rq, contrib, load, runnable, running);
    add_contrib(se, contrib, queued, queued, queued != 0);
}

/// Adds a contribution of `contrib` units to the sums, weighted by
/// `load` and `runnable` (the tail of [`accumulate_sum`]).
#[inline(always)]
fn add_contrib(sa: &mut SchedAvg, contrib: u64, load: u64, runnable: u64, running: bool) {
    if load != 0 {
        sa.load_sum = sa.load_sum.saturating_add(load.saturating_mul(contrib));
    }
    if runnable != 0 {
        let add = runnable.saturating_mul(contrib) << SCHED_CAPACITY_SHIFT;
        sa.runnable_sum = sa.runnable_sum.saturating_add(add);
    }
    if running {
        // contrib <= LOAD_AVG_MAX, so the shifted value fits easily in u32.
        let add = (contrib << SCHED_CAPACITY_SHIFT) as u32;
        sa.util_sum = sa.util_sum.saturating_add(add);
    }
}

/// Brings the sums of `sa` up to `now` (ns). Returns `true` when at least
/// one period boundary was crossed, i.e. when the averages should be
/// recomputed.
///
/// * `load`: weight (runqueue) or 0/1 (task) while runnable;
/// * `runnable`: number of runnable tasks represented;
/// * `running`: whether the entity occupied the CPU.
#[inline]
fn update_load_sum(
    now: u64,
    sa: &mut SchedAvg,
    load: u64,
    mut runnable: u64,
    mut running: bool,
) -> bool {
    // Time going backwards: restart the clock at `now`, keep the history.
    let Some(delta) = now.checked_sub(sa.last_update_time) else {
        sa.last_update_time = now;
        return false;
    };

    let delta = delta >> NS_TO_UNIT_SHIFT;
    if delta == 0 {
        return false;
    }
    // Only whole units are consumed; the sub-unit remainder stays pending.
    sa.last_update_time += delta << NS_TO_UNIT_SHIFT;

    // Running implies runnable implies load. An entity may still be marked
    // current after being dequeued (load 0); it must then not accrue either.
    if load == 0 {
        runnable = 0;
        running = false;
    }

    accumulate_sum(delta, sa, load, runnable, running) != 0
}

/// Recomputes the averages from the sums. `load` is the weight applied to
/// `load_sum` (the task weight for an entity, 1 for a runqueue whose sum is
/// already weighted).
fn update_load_avg(sa: &mut SchedAvg, load: u64) {
    let pc = sa.period_contrib as usize;
    // The product fits 64 bits in practice (an entity's sum is at most
    // LOAD_AVG_MAX, a runqueue's comes with load 1), and a 64-bit division
    // is a fraction of the 128-bit one's library call; same quotient.
    sa.load_avg = match load.checked_mul(sa.load_sum) {
        Some(p) => div_by_divider(p, pc),
        None => (u128::from(load) * u128::from(sa.load_sum) / u128::from(sa.divider())) as u64,
    };
    sa.runnable_avg = div_by_divider(sa.runnable_sum, pc);
    sa.util_avg = div_by_divider(u64::from(sa.util_sum), pc);
}

/// Numerators below this are divided through [`DIVIDER_RECIPROCALS`].
const RECIPROCAL_EXACT_BELOW: u64 = 1 << 48;

/// `ceil(2^64 / d)` for every divider `d = PELT_MIN_DIVIDER + pc`
/// (`pc` = `period_contrib`, 0..1024); see [`div_by_divider`].
static DIVIDER_RECIPROCALS: [u64; PELT_PERIOD as usize] = {
    let mut t = [0u64; PELT_PERIOD as usize];
    let mut pc = 0;
    while pc < t.len() {
        let d = (PELT_MIN_DIVIDER + pc as u64) as u128;
        t[pc] = ((1u128 << 64).div_ceil(d)) as u64;
        pc += 1;
    }
    t
};

/// `n / (PELT_MIN_DIVIDER + pc)`: every update that crosses a period
/// divides three sums by the divider, and a multiply by its reciprocal is
/// a fraction of a division's latency.
///
/// Exact for `n < 2^48` (Granlund and Montgomery): with `m = ceil(2^64 /
/// d)`, `m d = 2^64 + e` with `0 <= e < d`, so `n m / 2^64 = n / d + n e /
/// (d 2^64)`. Writing `n = q d + r` (`r <= d - 1`), that is `q + (r + n e /
/// 2^64) / d`, and `n e < 2^48 2^16 = 2^64` (every divider is below 2^16),
/// so the fraction stays below 1 and the floor is `q`. Larger numerators
/// (a runqueue of tens of thousands of heavy tasks) divide.
#[inline(always)]
fn div_by_divider(n: u64, pc: usize) -> u64 {
    debug_assert!(pc < PELT_PERIOD as usize, "period_contrib {pc}");
    let pc = pc & (PELT_PERIOD as usize - 1);
    if n < RECIPROCAL_EXACT_BELOW {
        ((u128::from(n) * u128::from(DIVIDER_RECIPROCALS[pc])) >> 64) as u64
    } else {
        n / (PELT_MIN_DIVIDER + pc as u64)
    }
}

/// Load-tracking state of a task or of a runqueue (`struct sched_avg`).
///
/// `last_update_time` is in ns; sums and `period_contrib` are in PELT units
/// (see the module docs for the scaling of each field).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SchedAvg {
    /// Load average (same units as the weight).
    pub load_avg: u64,
    /// Runnable average (1024 per continuously runnable task).
    pub runnable_avg: u64,
    /// Utilization average (1024 == always running).
    pub util_avg: u64,
    /// Clock (ns) up to which the sums are accounted; advances in whole
    /// 1024 ns units.
    pub last_update_time: u64,
    /// Decayed runnable time; weighted by the queued load for a runqueue,
    /// unweighted for a task.
    pub load_sum: u64,
    /// Decayed runnable time times the number of runnable tasks, scaled by
    /// `SCHED_CAPACITY_SCALE`.
    pub runnable_sum: u64,
    /// Decayed running time, scaled by `SCHED_CAPACITY_SCALE`.
    pub util_sum: u32,
    /// Units already accounted in the current (incomplete) period, 0..1024.
    pub period_contrib: u32,
}

impl SchedAvg {
    /// State of a freshly forked task of the given weight (already scaled
    /// down, nice 0 == 1024), as after `init_entity_runnable_average`.
    ///
    /// `load_avg` starts at the full weight so a new task looks heavy until
    /// it has built real history (that is what the kernel does for tasks).
    /// `util_avg` and `runnable_avg` start at 0, as the kernel leaves them
    /// before `post_init_entity_util_avg`; call [`SchedAvg::post_init_util`]
    /// to apply the kernel's initial-utilization heuristic, then attach the
    /// task to its runqueue with [`SchedAvg::attach`] (which also rebuilds the
    /// sums from these averages). The sums are 0 until then.
    #[must_use]
    pub fn new_task(weight: u64, now: u64) -> Self {
        SchedAvg {
            last_update_time: now,
            load_avg: weight,
            ..SchedAvg::default()
        }
    }

    /// Initial utilization of a new task, as `post_init_entity_util_avg`
    /// without capacity invariance (CPU capacity 1024).
    ///
    /// The task gets a share of the runqueue's current utilization
    /// proportional to its weight, capped at half of the capacity the
    /// runqueue has left; if the runqueue is idle it gets that half outright.
    /// `runnable_avg` is set equal to `util_avg`.
    pub fn post_init_util(&mut self, rq: &SchedAvg, weight: u64) {
        if rq.util_avg < SCHED_CAPACITY_SCALE {
            let cap = (SCHED_CAPACITY_SCALE - rq.util_avg) / 2;
            if cap > 0 {
                self.util_avg = if rq.util_avg != 0 {
                    (rq.util_avg.saturating_mul(weight) / (rq.load_avg + 1)).min(cap)
                } else {
                    cap
                };
            }
        }
        self.runnable_avg = self.util_avg;
    }

    /// The divider that turns sums into averages: the largest sum reachable
    /// at the current position in the period, `LOAD_AVG_MAX - 1024 +
    /// period_contrib` (`get_pelt_divider`).
    #[must_use]
    pub fn divider(&self) -> u64 {
        PELT_MIN_DIVIDER + u64::from(self.period_contrib)
    }

    /// Updates a task's average up to `now` (ns), as `__update_load_avg_se`
    /// (and `__update_load_avg_blocked_se` when `on_rq` is false).
    ///
    /// While the task is on a runqueue it accrues load (unweighted, see the
    /// module docs) and runnable time; `running` says whether it was the
    /// runqueue's current task over the elapsed interval. `weight` is the
    /// task's scaled-down weight (nice 0 == 1024) used for `load_avg`.
    ///
    /// The state over `[last_update_time, now)` is taken to be the one passed
    /// in, so call this at every state change with the *previous* state.
    /// Returns `true` if a period boundary was crossed (averages recomputed).
    #[inline]
    pub fn update_entity(&mut self, now: u64, weight: u64, on_rq: bool, running: bool) -> bool {
        let queued = u64::from(on_rq);
        if update_load_sum(now, self, queued, queued, running) {
            update_load_avg(self, weight);
            true
        } else {
            false
        }
    }

    /// Updates a CFS runqueue's average up to `now` (ns), as
    /// `__update_load_avg_cfs_rq`.
    ///
    /// `load_weight` is the sum of the queued tasks' scaled-down weights,
    /// `nr_runnable` the number of runnable tasks (the kernel's
    /// `h_nr_runnable`, including the running one) and `running` whether the
    /// runqueue had a current task. As for [`SchedAvg::update_entity`] these
    /// describe the interval since the last update. Returns `true` if a
    /// period boundary was crossed.
    #[inline]
    pub fn update_rq(
        &mut self,
        now: u64,
        load_weight: u64,
        nr_runnable: u64,
        running: bool,
    ) -> bool {
        if update_load_sum(now, self, load_weight, nr_runnable, running) {
            update_load_avg(self, 1);
            true
        } else {
            false
        }
    }

    /// [`SchedAvg::update_rq`] of this runqueue's average, then
    /// [`SchedAvg::update_entity`] of its running task's (`se`), to the
    /// same `now`, with the same integer results. The two are mostly at
    /// the same point of the same period (updated together at the last
    /// tick, or when the task was switched in): they then cross the same
    /// periods with the same contribution, computed once, and the six
    /// sums are decayed together, without a call per average.
    #[inline]
    pub fn update_rq_and_curr(
        &mut self,
        se: &mut SchedAvg,
        now: u64,
        load_weight: u64,
        nr_runnable: u64,
        weight: u64,
        on_rq: bool,
    ) {
        if se.last_update_time != self.last_update_time || se.period_contrib != self.period_contrib {
            self.update_rq(now, load_weight, nr_runnable, true);
            se.update_entity(now, weight, on_rq, true);
            return;
        }
        let Some(delta) = now.checked_sub(self.last_update_time) else {
            self.last_update_time = now;
            se.last_update_time = now;
            return;
        };
        let delta = delta >> NS_TO_UNIT_SHIFT;
        if delta == 0 {
            return;
        }
        self.last_update_time += delta << NS_TO_UNIT_SHIFT;
        se.last_update_time = self.last_update_time;
        // update_load_sum's implications, for each.
        let (nr_runnable, rq_running) = if load_weight == 0 { (0, false) } else { (nr_runnable, true) };
        let queued = u64::from(on_rq);
        if delta + u64::from(self.period_contrib) < PELT_PERIOD {
            self.period_contrib += delta as u32;
            se.period_contrib = self.period_contrib;
            add_contrib(self, delta, load_weight, nr_runnable, rq_running);
            add_contrib(se, delta, queued, queued, on_rq);
            return;
        }
        accumulate_periods_pair(delta, self, se, load_weight, nr_runnable, rq_running, queued);
        update_load_avg(self, 1);
        update_load_avg(se, weight);
    }

    /// Adds a task's contribution to this runqueue average
    /// (`attach_entity_load_avg`).
    ///
    /// `self` should already be updated to the current time. The task's decay
    /// window is aligned with the runqueue's (`last_update_time` and
    /// `period_contrib` copied), and its sums are rebuilt from its averages
    /// with the runqueue's divider so sums and averages stay consistent on
    /// both sides (this truncates the sums slightly, as in the kernel).
    /// `weight` is the task's scaled-down weight.
    pub fn attach(&mut self, se: &mut SchedAvg, weight: u64) {
        let divider = self.divider();

        se.last_update_time = self.last_update_time;
        se.period_contrib = self.period_contrib;

        se.util_sum = u32::try_from(se.util_avg.saturating_mul(divider)).unwrap_or(u32::MAX);
        se.runnable_sum = se.runnable_avg.saturating_mul(divider);
        // The entity's load_sum is unweighted: divide the weight back out.
        let weighted = se.load_avg.saturating_mul(divider);
        se.load_sum = if weight != 0 && weight < weighted {
            weighted / weight
        } else {
            1
        };

        self.load_avg = self.load_avg.saturating_add(se.load_avg);
        self.load_sum = self
            .load_sum
            .saturating_add(weight.saturating_mul(se.load_sum));
        self.util_avg = self.util_avg.saturating_add(se.util_avg);
        self.util_sum = self.util_sum.saturating_add(se.util_sum);
        self.runnable_avg = self.runnable_avg.saturating_add(se.runnable_avg);
        self.runnable_sum = self.runnable_sum.saturating_add(se.runnable_sum);
    }

    /// Removes a task's contribution from this runqueue average
    /// (`detach_entity_load_avg`).
    ///
    /// Both should be updated to the same time first. Subtractions saturate
    /// at zero (rounding can make a task's share exceed what is left), and
    /// each sum is then raised to at least `avg * PELT_MIN_DIVIDER` so a sum
    /// never falls below what its remaining average implies.
    pub fn detach(&mut self, se: &SchedAvg, weight: u64) {
        self.load_avg = self.load_avg.saturating_sub(se.load_avg);
        self.load_sum = self
            .load_sum
            .saturating_sub(weight.saturating_mul(se.load_sum))
            .max(self.load_avg.saturating_mul(PELT_MIN_DIVIDER));

        self.util_avg = self.util_avg.saturating_sub(se.util_avg);
        let util_floor = self.util_avg.saturating_mul(PELT_MIN_DIVIDER);
        self.util_sum = self
            .util_sum
            .saturating_sub(se.util_sum)
            .max(u32::try_from(util_floor).unwrap_or(u32::MAX));

        self.runnable_avg = self.runnable_avg.saturating_sub(se.runnable_avg);
        self.runnable_sum = self
            .runnable_sum
            .saturating_sub(se.runnable_sum)
            .max(self.runnable_avg.saturating_mul(PELT_MIN_DIVIDER));
    }
}

/// Utilization-only tracking for RT / DL / IRQ-style time
/// (`update_rt_rq_load_avg` and friends): `running` drives load, runnable
/// and util alike, so `util_avg` is the recent fraction of time spent
/// running that class, scaled to 1024. `running` describes the interval
/// since the last update. Returns `true` if a period boundary was crossed.
/// The simulator does not track RT utilization yet; the unit tests pin the
/// arithmetic so the RT class can adopt it unchanged.
#[cfg(test)]
fn update_util_only(sa: &mut SchedAvg, now: u64, running: bool) -> bool {
    let r = u64::from(running);
    if update_load_sum(now, sa, r, r, running) {
        update_load_avg(sa, 1);
        true
    } else {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    /// One PELT period in ns.
    const PERIOD_NS: u64 = PELT_PERIOD << NS_TO_UNIT_SHIFT;
    const NICE0: u64 = 1024;

    fn within(v: u64, target: u64, pct: u64) -> bool {
        let tol = target * pct / 100;
        v + tol >= target && v <= target + tol
    }

    /// One task alone on one runqueue, updated like the scheduler would:
    /// at every 1 ms tick and at every state change.
    struct Sim {
        now: u64,
        se: SchedAvg,
        rq: SchedAvg,
        weight: u64,
        running: bool,
    }

    impl Sim {
        fn new(weight: u64) -> Self {
            let mut rq = SchedAvg::default();
            let mut se = SchedAvg::new_task(weight, 0);
            rq.attach(&mut se, weight);
            Sim {
                now: 0,
                se,
                rq,
                weight,
                running: false,
            }
        }

        fn sync(&mut self) {
            let r = self.running;
            self.se.update_entity(self.now, self.weight, r, r);
            let w = if r { self.weight } else { 0 };
            self.rq.update_rq(self.now, w, u64::from(r), r);
        }

        /// Advance `ns` in the current state, with 1 ms ticks.
        fn advance(&mut self, ns: u64) {
            let end = self.now + ns;
            while self.now < end {
                self.now = (self.now + MS).min(end);
                self.sync();
            }
        }

        fn set_running(&mut self, running: bool) {
            self.sync();
            self.running = running;
        }
    }

    proptest::proptest! {
        /// The reciprocal gives the quotient over the whole range it is
        /// used for, every divider, with numerators spread over all
        /// magnitudes and at the multiples of the divider, where a
        /// reciprocal that is off shows first.
        #[test]
        fn reciprocal_division_is_exact(pc in 0usize..1024, bits in 0u32..=64, x: u64, k: u64, back in 0u64..3) {
            let d = PELT_MIN_DIVIDER + pc as u64;
            let n = if bits == 64 { x } else { x & ((1u64 << bits) - 1) };
            proptest::prop_assert_eq!(div_by_divider(n, pc), n / d);
            let m = (k % (RECIPROCAL_EXACT_BELOW / d + 1)) * d;
            let m = m.saturating_sub(back);
            proptest::prop_assert_eq!(div_by_divider(m, pc), m / d);
        }

        /// The paired update gives what the two updates give, in step
        /// (from the same point: the shared path) or not, over long and
        /// short steps, idle or loaded runqueues, queued or not.
        #[test]
        fn rq_and_curr_update_as_apart(steps in proptest::collection::vec((0u64..40_000_000, 0u64..3000, 0u64..4, 0u64..2048, proptest::bool::ANY, 0u8..4), 1..40)) {
            let (mut rq, mut se) = (SchedAvg::default(), SchedAvg::new_task(1024, 0));
            rq.attach(&mut se, 1024);
            let (mut rq2, mut se2, mut now) = (rq, se, 0);
            for (dt, lw, nr, weight, on_rq, skew) in steps {
                now += dt;
                if skew == 0 {
                    // Out of step: the runqueue alone moves on first.
                    let t = now - dt / 2;
                    rq.update_rq(t, lw, nr, true);
                    rq2.update_rq(t, lw, nr, true);
                }
                rq.update_rq_and_curr(&mut se, now, lw, nr, weight, on_rq);
                rq2.update_rq(now, lw, nr, true);
                se2.update_entity(now, weight, on_rq, true);
                proptest::prop_assert_eq!((rq, se), (rq2, se2));
            }
        }
    }

    #[test]
    fn reciprocal_division_at_the_edges() {
        for pc in 0..1024usize {
            let d = PELT_MIN_DIVIDER + pc as u64;
            let top = RECIPROCAL_EXACT_BELOW - 1;
            for n in [0, 1, d - 1, d, d + 1, top - d, top - 1, top, top + 1, u64::MAX] {
                assert_eq!(div_by_divider(n, pc), n / d, "{n} / {d}");
            }
            // The last multiples below 2^48, and either side of each.
            let q = top / d;
            for k in q.saturating_sub(64)..=q {
                for n in [k * d - 1, k * d, k * d + d - 1] {
                    assert_eq!(div_by_divider(n, pc), n / d, "{n} / {d}");
                }
            }
        }
    }

    #[test]
    fn table_matches_known_kernel_values() {
        assert_eq!(RUNNABLE_AVG_YN_INV[0], 0xffff_ffff);
        assert_eq!(RUNNABLE_AVG_YN_INV[1], 0xfa83_b2da);
        assert_eq!(RUNNABLE_AVG_YN_INV[16], 0xb504_f333); // 2^32 / sqrt(2)
        assert_eq!(RUNNABLE_AVG_YN_INV[31], 0x82cd_8698);
        // Re-derive every entry (floats only here, in a test).
        let y = 0.5f64.powf(1.0 / LOAD_AVG_PERIOD as f64);
        for (i, &v) in RUNNABLE_AVG_YN_INV.iter().enumerate() {
            let exact = (u32::MAX as f64 * y.powi(i as i32)) as u32;
            assert!(exact.abs_diff(v) <= 1, "index {i}: {v:#x} vs {exact:#x}");
        }
    }

    #[test]
    fn load_avg_max_is_the_integer_series_limit() {
        // Iterating "decay one period, add a full period" converges to
        // LOAD_AVG_MAX with this exact integer arithmetic.
        let mut max = 0;
        for _ in 0..1000 {
            max = decay_load(max, 1) + PELT_PERIOD;
        }
        assert_eq!(max, LOAD_AVG_MAX);
        // Closed form for the middle segment never underflows.
        for p in 1..=LOAD_AVG_PERIOD * 64 {
            let c = accumulate_pelt_segments(p, 0, 0);
            assert!(u64::from(c) <= LOAD_AVG_MAX - PELT_PERIOD);
        }
        // One boundary: the completed period decays once, nothing in between.
        assert_eq!(
            accumulate_pelt_segments(1, 1024, 5),
            decay_load(1024, 1) as u32 + 5
        );
    }

    #[test]
    fn decay_load_halves_every_32_periods() {
        for &v in &[1u64 << 20, 47742, 123_456_789, u64::MAX >> 4] {
            // The table's 2^32 - 1 for y^0 costs up to v / 2^32 of precision.
            let slack = 1 + (v >> 32);
            assert!(decay_load(v, 32).abs_diff(v / 2) <= slack);
            assert!(decay_load(v, 64).abs_diff(v / 4) <= slack);
            // Half a half-life: 1/sqrt(2).
            let want = (v as f64 / 2f64.sqrt()) as u64;
            assert!(decay_load(v, 16).abs_diff(want) <= 1 + v / 1_000_000_000);
            assert!(decay_load(v, 1) < v);
        }
        assert_eq!(decay_load(u64::MAX, LOAD_AVG_PERIOD * 63 + 1), 0);
        assert_eq!(decay_load(u64::MAX, u64::MAX), 0);
        assert_eq!(decay_load(0, 5), 0);
    }

    #[test]
    fn always_running_converges_to_full_util_and_weight() {
        let weight = 2 * NICE0;
        let mut s = Sim::new(weight);
        s.set_running(true);
        s.advance(350 * MS);
        s.sync();

        assert!(s.se.util_avg <= SCHED_CAPACITY_SCALE);
        assert!(within(s.se.util_avg, SCHED_CAPACITY_SCALE, 1), "{:?}", s.se);
        assert!(within(s.se.runnable_avg, SCHED_CAPACITY_SCALE, 1));
        assert!(s.se.load_avg <= weight && within(s.se.load_avg, weight, 1));
        // Entity load_sum is unweighted time.
        assert!(s.se.load_sum <= LOAD_AVG_MAX);
        assert!(s.se.load_sum >= PELT_MIN_DIVIDER * 99 / 100);

        assert!(within(s.rq.util_avg, SCHED_CAPACITY_SCALE, 1));
        assert!(within(s.rq.runnable_avg, SCHED_CAPACITY_SCALE, 1));
        assert!(s.rq.load_avg <= weight && within(s.rq.load_avg, weight, 1));
        // Runqueue load_sum is weighted.
        assert!(s.rq.load_sum <= LOAD_AVG_MAX * weight);
        assert!(s.rq.load_sum >= PELT_MIN_DIVIDER * weight * 99 / 100);
        assert!(u64::from(s.rq.util_sum) <= LOAD_AVG_MAX * SCHED_CAPACITY_SCALE);
    }

    #[test]
    fn half_duty_cycle_converges_to_half_util() {
        let mut s = Sim::new(NICE0);
        let mut samples = Vec::new();
        for cycle in 0..100 {
            s.set_running(true);
            s.advance(4 * MS);
            s.sync();
            if cycle >= 50 {
                samples.push(s.se.util_avg);
            }
            s.set_running(false);
            s.advance(4 * MS);
            s.sync();
            if cycle >= 50 {
                samples.push(s.se.util_avg);
            }
        }
        // Peaks (end of run) and troughs (end of sleep) both stay within
        // +-5% of 512; in theory 1024/(1+y^4) and 1024*y^4/(1+y^4).
        for &u in &samples {
            assert!(within(u, 512, 5), "util {u}");
        }
        let mean = samples.iter().sum::<u64>() / samples.len() as u64;
        assert!(within(mean, 512, 2), "mean {mean}");
        assert!(within(s.rq.util_avg, 512, 5));
    }

    #[test]
    fn util_halves_32_periods_after_stopping() {
        let mut s = Sim::new(NICE0);
        s.set_running(true);
        s.advance(400 * MS);
        s.set_running(false);
        let start = s.se.util_avg;
        let t0 = s.now;

        // Exactly 32 PELT periods (~33.5 ms): halved.
        s.advance(LOAD_AVG_PERIOD * PERIOD_NS);
        s.sync();
        assert!(
            within(s.se.util_avg, start / 2, 1),
            "{} -> {}",
            start,
            s.se.util_avg
        );
        assert!(within(s.rq.util_avg, start / 2, 1));

        // Checked after 32 ms of wall time, i.e. ~30.5 periods: close to
        // start * y^30.5 ~= 0.52 * start (decay is applied per whole period,
        // hence the tolerance).
        let mut s2 = Sim::new(NICE0);
        s2.set_running(true);
        s2.advance(400 * MS);
        s2.set_running(false);
        s2.advance(32 * MS);
        s2.sync();
        let periods = ((32 * MS) >> NS_TO_UNIT_SHIFT) as f64 / PELT_PERIOD as f64;
        let want = (start as f64 * 0.5f64.powf(periods / LOAD_AVG_PERIOD as f64)) as u64;
        assert!(
            within(s2.se.util_avg, want, 3),
            "{start} -> {}",
            s2.se.util_avg
        );
        assert!(within(s2.se.util_avg, start / 2, 6));
        // And the load of a sleeping task decays the same way.
        assert!(within(s.se.load_avg, NICE0 / 2, 2));
        assert!(s.now - t0 == LOAD_AVG_PERIOD * PERIOD_NS);
    }

    #[test]
    fn one_update_or_many_give_the_same_sums() {
        let mut coarse = SchedAvg::new_task(NICE0, 0);
        let mut fine = coarse;
        coarse.update_entity(10 * MS + 12_345, NICE0, true, true);
        let mut t = 0;
        while t < 10 * MS + 12_345 {
            t = (t + 777).min(10 * MS + 12_345);
            fine.update_entity(t, NICE0, true, true);
        }
        assert_eq!(coarse.last_update_time, fine.last_update_time);
        assert_eq!(coarse.period_contrib, fine.period_contrib);
        // Only truncation in the per-period decay differs.
        assert!(coarse.load_sum.abs_diff(fine.load_sum) <= 16);
        assert!(u64::from(coarse.util_sum.abs_diff(fine.util_sum)) <= 16 * 1024);
    }

    #[test]
    fn sub_unit_and_sub_period_updates() {
        let mut sa = SchedAvg::new_task(NICE0, 1000);
        // Less than 1024 ns: nothing consumed.
        assert!(!sa.update_entity(2000, NICE0, true, true));
        assert_eq!(sa.last_update_time, 1000);
        // 500 units inside the first period: sums grow, no recompute.
        assert!(!sa.update_entity(1000 + 500 * 1024 + 7, NICE0, true, true));
        assert_eq!(sa.last_update_time, 1000 + 500 * 1024);
        assert_eq!(sa.period_contrib, 500);
        assert_eq!(sa.load_sum, 500);
        assert_eq!(sa.util_sum, 500 * 1024);
        assert_eq!(sa.runnable_sum, 500 * 1024);
        // Crossing a boundary recomputes the averages.
        assert!(sa.update_entity(1000 + 1100 * 1024, NICE0, true, true));
        assert_eq!(sa.period_contrib, 1100 - 1024);
        assert_eq!(sa.util_avg, u64::from(sa.util_sum) / sa.divider());
    }

    #[test]
    fn dequeued_but_current_accrues_nothing() {
        let mut sa = SchedAvg::new_task(NICE0, 0);
        sa.update_entity(5 * MS, NICE0, false, true);
        assert_eq!((sa.load_sum, sa.runnable_sum, sa.util_sum), (0, 0, 0));
        let mut rq = SchedAvg::default();
        rq.update_rq(5 * MS, 0, 0, true);
        assert_eq!((rq.load_sum, rq.runnable_sum, rq.util_sum), (0, 0, 0));
    }

    #[test]
    fn runqueue_runnable_counts_tasks() {
        let mut rq = SchedAvg::default();
        rq.update_rq(400 * MS, 3 * NICE0, 3, true);
        assert!(within(rq.runnable_avg, 3 * SCHED_CAPACITY_SCALE, 1));
        assert!(within(rq.util_avg, SCHED_CAPACITY_SCALE, 1));
        assert!(within(rq.load_avg, 3 * NICE0, 1));
    }

    #[test]
    fn attach_then_detach_restores_rq() {
        // A busy runqueue with consistent history.
        let mut rq = SchedAvg::default();
        let mut now = 0;
        for i in 0..200 {
            now += MS + 313;
            rq.update_rq(now, 3 * NICE0, 2, i % 3 != 0);
        }
        // A task with history of its own, elsewhere.
        let mut se = SchedAvg::new_task(NICE0, 0);
        for i in 0..100 {
            se.update_entity(i * 3 * MS + 5_000, NICE0, i % 2 == 0, i % 2 == 0);
        }
        let before = rq;
        let (la, ua, ra) = (se.load_avg, se.util_avg, se.runnable_avg);
        rq.attach(&mut se, NICE0);

        assert_eq!(se.last_update_time, rq.last_update_time);
        assert_eq!(se.period_contrib, rq.period_contrib);
        assert_eq!((se.load_avg, se.util_avg, se.runnable_avg), (la, ua, ra));
        assert_eq!(rq.load_avg, before.load_avg + la);
        assert_eq!(rq.util_avg, before.util_avg + ua);
        assert_eq!(rq.runnable_avg, before.runnable_avg + ra);
        assert_eq!(u64::from(se.util_sum), ua * rq.divider());

        rq.detach(&se, NICE0);
        assert_eq!(rq, before);

        // Detaching more than is there saturates instead of wrapping.
        let mut empty = SchedAvg::default();
        empty.detach(&se, NICE0);
        assert_eq!(empty, SchedAvg::default());
    }

    #[test]
    fn attached_task_tracks_with_rq() {
        // After attach, task and runqueue decay in lockstep.
        let mut s = Sim::new(NICE0);
        s.set_running(true);
        s.advance(50 * MS);
        s.sync();
        assert_eq!(s.se.period_contrib, s.rq.period_contrib);
        assert_eq!(s.se.last_update_time, s.rq.last_update_time);
        assert!(s.se.util_avg.abs_diff(s.rq.util_avg) <= 2);
        assert!(s.se.load_avg.abs_diff(s.rq.load_avg) <= 2);
    }

    #[test]
    fn time_going_backwards_resets_without_panic() {
        let mut sa = SchedAvg::new_task(NICE0, 0);
        sa.update_entity(10 * MS, NICE0, true, true);
        let snapshot = sa;
        assert!(!sa.update_entity(5 * MS, NICE0, true, true));
        assert_eq!(sa.last_update_time, 5 * MS);
        assert_eq!(
            SchedAvg {
                last_update_time: snapshot.last_update_time,
                ..sa
            },
            snapshot
        );
        // Accounting resumes from the new origin.
        sa.update_entity(6 * MS, NICE0, true, true);
        assert_eq!(sa.last_update_time, 5 * MS + ((MS >> 10) << 10));

        let mut rq = SchedAvg::default();
        rq.update_rq(3 * MS, NICE0, 1, true);
        assert!(!rq.update_rq(0, NICE0, 1, true));
        assert_eq!(rq.last_update_time, 0);
        let mut rt = SchedAvg::default();
        update_util_only(&mut rt, 3 * MS, true);
        assert!(!update_util_only(&mut rt, MS, true));
        assert_eq!(rt.last_update_time, MS);
    }

    #[test]
    fn new_task_initial_values() {
        let se = SchedAvg::new_task(NICE0, 42);
        assert_eq!(se.load_avg, NICE0);
        assert_eq!(se.last_update_time, 42);
        assert_eq!((se.util_avg, se.runnable_avg, se.load_sum), (0, 0, 0));

        // Idle runqueue: half the capacity.
        let mut a = se;
        a.post_init_util(&SchedAvg::default(), NICE0);
        assert_eq!((a.util_avg, a.runnable_avg), (512, 512));

        // Busy runqueue: weight-proportional share, capped by half the spare.
        let rq = SchedAvg {
            util_avg: 300,
            load_avg: 2047,
            ..SchedAvg::default()
        };
        let mut b = se;
        b.post_init_util(&rq, NICE0);
        assert_eq!(b.util_avg, 300 * 1024 / 2048);
        let rq = SchedAvg {
            util_avg: 900,
            load_avg: 1023,
            ..SchedAvg::default()
        };
        let mut c = se;
        c.post_init_util(&rq, NICE0);
        assert_eq!(c.util_avg, (1024 - 900) / 2);
        // Saturated runqueue: nothing.
        let rq = SchedAvg {
            util_avg: 1100,
            load_avg: 1023,
            ..SchedAvg::default()
        };
        let mut d = se;
        d.post_init_util(&rq, NICE0);
        assert_eq!(d.util_avg, 0);

        // Attach turns the initial load into a consistent unweighted sum.
        let mut rq = SchedAvg::default();
        let mut e = se;
        rq.attach(&mut e, NICE0);
        assert_eq!(e.load_sum, PELT_MIN_DIVIDER);
        assert_eq!(rq.load_avg, NICE0);
        assert_eq!(rq.load_sum, NICE0 * PELT_MIN_DIVIDER);
    }

    #[test]
    fn util_only_tracker() {
        let mut rt = SchedAvg::default();
        let mut t = 0;
        while t < 400 * MS {
            t += MS;
            update_util_only(&mut rt, t, true);
        }
        assert!(within(rt.util_avg, SCHED_CAPACITY_SCALE, 1));
        assert!(rt.load_avg <= 1);
        let u = rt.util_avg;
        update_util_only(&mut rt, t + LOAD_AVG_PERIOD * PERIOD_NS, false);
        assert!(within(rt.util_avg, u / 2, 1));
    }
}
