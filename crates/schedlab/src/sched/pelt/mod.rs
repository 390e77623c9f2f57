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
mod tests;
