//! Tests of the PELT sums against the kernel's arithmetic and of the
//! shortcuts taken for speed (reciprocal division, shared decays).
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
