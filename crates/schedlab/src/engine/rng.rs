//! The project's own PRNG: xoshiro256++ seeded through SplitMix64.
//!
//! Every consumer of randomness draws from its own stream, derived from the
//! scenario seed and a stable stream identifier, so adding a new random
//! consumer never shifts the numbers another one sees.

use crate::engine::time::Ns;

/// SplitMix64 step; used to expand seeds into generator state.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Stable identifiers of random streams. The numeric values are part of the
/// determinism contract: never renumber an existing stream.
#[derive(Clone, Copy, Debug)]
pub enum Stream {
    /// Per-workload behaviour randomness (run lengths, sleeps), keyed by workload index.
    Workload(u32),
    /// Per-task randomness, keyed by task id.
    Task(u32),
    /// Machine noise (IRQ windows, jitter), keyed by CPU.
    Machine(u32),
    /// Randomness a hosted scheduler asks for (bpf_get_prandom_u32).
    Scheduler,
}

impl Stream {
    fn key(self) -> u64 {
        match self {
            Stream::Workload(i) => (1 << 32) | i as u64,
            Stream::Task(i) => (2 << 32) | i as u64,
            Stream::Machine(i) => (3 << 32) | i as u64,
            Stream::Scheduler => 4 << 32,
        }
    }
}

/// xoshiro256++ generator. One cache line (aligned to it): a task's
/// stream is read with the task, and the event loop prefetches it as one.
#[derive(Clone, Debug)]
#[repr(align(64))]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// A generator for `stream` under the scenario `seed`.
    pub fn new(seed: u64, stream: Stream) -> Self {
        let mut sm = seed ^ stream.key().wrapping_mul(0xd134_2543_de82_ef95);
        let mut s = [0u64; 4];
        for w in &mut s {
            *w = splitmix64(&mut sm);
        }
        if s == [0; 4] {
            s[0] = 1;
        }
        Rng { s }
    }

    /// The next 64 random bits (xoshiro256++).
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        Self::step(&mut self.s)
    }

    /// Advances the state `s` by one output and returns it.
    #[inline(always)]
    fn step(s: &mut [u64; 4]) -> u64 {
        let result = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// The next 32 random bits (the high half of a 64-bit draw).
    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    /// Uniform in `[0, n)` without modulo bias (Lemire's method); 0 when n == 0.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        loop {
            let m = (self.next_u64() as u128) * (n as u128);
            let lo = m as u64;
            if lo >= n || lo >= n.wrapping_neg() % n {
                return (m >> 64) as u64;
            }
        }
    }

    /// Uniform in `[lo, hi]`.
    pub fn range_inclusive(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        lo + self.below(hi - lo + 1)
    }

    /// Exponentially distributed with the given mean, computed with integer
    /// arithmetic only (inverse CDF over a fixed-point log2), so that results
    /// are identical on every platform.
    pub fn exponential(&mut self, mean: u64) -> u64 {
        // u in (0, 1] as a 53-bit fraction; -ln(u) = -log2(u) * ln 2.
        let u = (self.next_u64() >> 11) + 1; // 1 ..= 2^53
        let neg_log2_q32 = neg_log2_fraction_q32(u, 53);
        // ln 2 in Q32
        const LN2_Q32: u128 = 2_977_044_472;
        let neg_ln_q32 = (neg_log2_q32 as u128 * LN2_Q32) >> 32;
        ((mean as u128 * neg_ln_q32) >> 32).min(u64::MAX as u128) as u64
    }
}

/// -log2(x / 2^bits) in Q32 fixed point, for 1 <= x <= 2^bits, as the
/// bit-by-bit squaring method gives it ([`log2_fraction_by_squaring`]):
/// that method defines the numbers every draw has given, so this is held
/// to its bits, which [`log2_fraction_q64_approx`] finds in far fewer
/// steps for all but about one x in a million.
///
/// # Why the approximation gives the same bits
///
/// Let L = log2(m) for x's mantissa m = x / 2^lz in [1, 2). The squaring
/// method's steps square a Q62 mantissa and halve it when it reaches 2,
/// and both round down, each by less than 2^-62 of a value of at least
/// 1: step k loses τ_k < 2^-61 / ln 2 (1 + 2^-60) < 2^-60.4 in log2
/// terms. The
/// method keeps `bits so far + log2(mantissa) = 2^k log2(m_k)` for an m_k
/// that loses τ_k 2^-k at step k, with a mantissa in [1, 2), so its 32
/// bits are exactly floor(2^32 L') for L' = L - Σ τ_k 2^-k, within
/// 2^-60.4 below L, i.e. 2^32 L' is within 2^-28.4 below 2^32 L.
///
/// The approximation gives X ~ 2^64 L within E = 300 (below). Where the
/// low half of X is at least [`APPROX_MARGIN`] from both ends of its
/// range, 2^32 L lies more than 2^-28.4 above floor(X / 2^32) and below
/// the next integer, so floor(2^32 L') = floor(2^32 L) = X >> 32. Elsewhere
/// (about 2^-20 of the x) the squaring runs.
#[inline]
fn neg_log2_fraction_q32(x: u64, bits: u32) -> u64 {
    let lz = 63 - x.leading_zeros(); // floor(log2 x)
    let approx = log2_fraction_q64_approx(x << (63 - lz));
    let low = approx as u32;
    let frac = if (APPROX_MARGIN..=u32::MAX - APPROX_MARGIN).contains(&low) {
        approx >> 32
    } else {
        log2_fraction_by_squaring(x << (62 - lz), 32)
    };
    debug_assert_eq!(frac, log2_fraction_by_squaring(x << (62 - lz), 32), "x {x}");
    // log2(x) = lz + frac; -log2(x/2^bits) = bits - lz - frac
    (((bits - lz) as u64) << 32).saturating_sub(frac)
}

/// How far (in units of 2^-64) the low half of the approximation must
/// be from a multiple of 2^32 for its high half to be the squaring
/// method's bits: the bound E on its error (300) plus the squaring's
/// rounding (2^3.6, under 13), with room to spare.
const APPROX_MARGIN: u32 = 2048;

/// The first `n` (at most 64) bits of log2(m) for the mantissa `m` in
/// [1, 2) held in Q62, by repeated squaring: each step squares m, and a
/// square of 2 or more halves it and gives a 1 bit. The draws' numbers
/// are defined by these exact integer steps (see
/// [`neg_log2_fraction_q32`]); a `const fn`, so that the tables below are
/// built from it at compile time.
const fn log2_fraction_by_squaring(mut m: u64, n: u32) -> u64 {
    let mut frac: u64 = 0;
    let mut i = 0;
    while i < n {
        // m < 2 in Q62: the square is below 4 and fits 64 bits again.
        m = ((m as u128 * m as u128) >> 62) as u64;
        frac <<= 1;
        if m >= 1 << 63 {
            m >>= 1;
            frac |= 1;
        }
        i += 1;
    }
    frac
}

/// Table entries: one per interval of the mantissa cut by its first 8
/// fraction bits.
const LOG2_TABLE: usize = 256;

/// `R[i] = floor(2^63 / c_i)` for the midpoint c_i = 1 + (2i + 1) / 512
/// of the i-th interval: r_i = R[i] / 2^63 brings a mantissa of that
/// interval within 1/513 of 1.
static LOG2_RECIPROCALS: [u64; LOG2_TABLE] = {
    let mut t = [0u64; LOG2_TABLE];
    let mut i = 0;
    while i < LOG2_TABLE {
        t[i] = ((1u128 << 63) * 512 / (513 + 2 * i as u128)) as u64;
        i += 1;
    }
    t
};

/// `-log2(r_i)` in Q64 for the reciprocals above (r_i in (1/2, 1)): 1 -
/// log2(2 r_i), where 2 r_i is R[i] read as Q62, its log by 64 steps of
/// squaring, which round it down by less than 14 units of 2^-64 (13,
/// and the last bit).
static LOG2_OF_RECIPROCALS: [u64; LOG2_TABLE] = {
    let mut t = [0u64; LOG2_TABLE];
    let mut i = 0;
    while i < LOG2_TABLE {
        t[i] = log2_fraction_by_squaring(LOG2_RECIPROCALS[i], 64).wrapping_neg();
        i += 1;
    }
    t
};

/// log2(e) in Q62, rounded down.
const LOG2_E_Q62: i128 = 6_653_256_548_922_161_245;

/// log2(m) in Q64 (wrapping) for the mantissa m = `mant` / 2^63 in [1, 2),
/// within E = 300 units of 2^-64 of the true value.
///
/// log2(m) = log2(m r_i) - log2(r_i): the table gives the second term,
/// and y = m r_i = 1 + z with |z| < 1/513 + 2^-62 < 2^-9. ln(1 + z) is its
/// series to z^5; the terms left out are below |z|^6 / 6 (1 + 2^-8) in
/// all, 171 units, which 1 / ln 2 makes 247. z is exact to a unit, each
/// product and quotient rounds by a unit (under 10 in all, 15 once
/// scaled by 1 / ln 2), log2(e) by
/// less than 2^-62 of a term below 2^-9, and the table entry by 14: in
/// all, under 300. The sum wraps: a true value within E of 0 or of 1
/// may come out on the other side, where the margin test sends it to
/// the squaring.
#[inline(always)]
fn log2_fraction_q64_approx(mant: u64) -> u64 {
    let i = (mant >> 55) as usize % LOG2_TABLE;
    let p = u128::from(mant) * u128::from(LOG2_RECIPROCALS[i]);
    // y = p / 2^126; z = y - 1 in Q64.
    let z = ((p >> 62) as i128 - (1i128 << 64)) as i64;
    let mul = |a: i64, b: i64| ((i128::from(a) * i128::from(b)) >> 64) as i64;
    let z2 = mul(z, z);
    let z3 = mul(z2, z);
    let z4 = mul(z2, z2);
    let z5 = mul(z4, z);
    let ln = z - z2 / 2 + z3 / 3 - z4 / 4 + z5 / 5;
    let log2_y = ((i128::from(ln) * LOG2_E_Q62) >> 62) as i64;
    LOG2_OF_RECIPROCALS[i].wrapping_add(log2_y as u64)
}

/// A distribution of durations used by behaviour programs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Dist {
    /// Always this duration ("5ms").
    Const(Ns),
    /// Uniform between the two bounds, inclusive ("uniform:1ms..3ms").
    Uniform(Ns, Ns),
    /// Exponential with this mean ("exp:5ms").
    Exp(Ns),
}

impl Dist {
    /// The distribution's mean.
    pub fn mean(&self) -> Ns {
        match *self {
            Dist::Const(v) | Dist::Exp(v) => v,
            Dist::Uniform(a, b) => (a + b) / 2,
        }
    }

    /// Draws a duration from this distribution.
    pub fn draw(&self, rng: &mut Rng) -> Ns {
        match *self {
            Dist::Const(v) => v,
            Dist::Uniform(a, b) => rng.range_inclusive(a, b),
            Dist::Exp(mean) => rng.exponential(mean),
        }
    }
}

/// Draws a duration from a distribution.
pub fn draw_dist(rng: &mut Rng, d: &Dist) -> Ns {
    d.draw(rng)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_independent_and_reproducible() {
        let mut a = Rng::new(42, Stream::Workload(0));
        let mut b = Rng::new(42, Stream::Workload(0));
        let mut c = Rng::new(42, Stream::Workload(1));
        let xs: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        let zs: Vec<u64> = (0..8).map(|_| c.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs, zs);
    }

    #[test]
    fn below_is_in_range_and_covers() {
        let mut r = Rng::new(1, Stream::Scheduler);
        let mut seen = [0u32; 7];
        for _ in 0..7000 {
            seen[r.below(7) as usize] += 1;
        }
        assert!(seen.iter().all(|&n| n > 800 && n < 1200), "{seen:?}");
    }

    #[test]
    fn exponential_mean_is_close() {
        let mut r = Rng::new(7, Stream::Task(3));
        let n = 200_000u64;
        let sum: u64 = (0..n).map(|_| r.exponential(1_000_000)).sum();
        let mean = sum / n;
        assert!((980_000..1_020_000).contains(&mean), "mean {mean}");
    }

    /// The squaring in 128-bit arithmetic throughout, as first written.
    fn neg_log2_wide(x: u64, bits: u32) -> u64 {
        let lz = 63 - x.leading_zeros();
        let int_part = (bits - lz) as u64;
        let mut m: u128 = (x as u128) << (62 - lz);
        let mut frac: u64 = 0;
        for i in (0..32).rev() {
            m = (m * m) >> 62;
            if m >= (2u128 << 62) {
                m >>= 1;
                frac |= 1 << i;
            }
        }
        (int_part << 32).saturating_sub(frac)
    }

    /// An exponential draw as first written, its log by the squaring.
    fn exponential_alone(r: &mut Rng, mean: u64) -> u64 {
        let u = (r.next_u64() >> 11) + 1;
        let neg_ln_q32 = (neg_log2_wide(u, 53) as u128 * 2_977_044_472) >> 32;
        ((mean as u128 * neg_ln_q32) >> 32).min(u64::MAX as u128) as u64
    }

    /// How far the approximation is from 2^64 log2(m) as 64 steps of
    /// squaring give it (those within 14 units below the true value).
    fn approx_error(x: u64) -> u64 {
        let lz = 63 - x.leading_zeros();
        let approx = log2_fraction_q64_approx(x << (63 - lz));
        let squared = log2_fraction_by_squaring(x << (62 - lz), 64);
        approx.wrapping_sub(squared).min(squared.wrapping_sub(approx))
    }

    proptest::proptest! {
        /// A stream's numbers are the ones the draws were first defined
        /// by, whatever other draws come between them.
        #[test]
        fn draws_are_the_squaring_ones(seed: u64, ops in proptest::collection::vec((0u8..4, 1u64..1 << 40), 1..64)) {
            let (mut a, mut b) = (Rng::new(seed, Stream::Task(1)), Rng::new(seed, Stream::Task(1)));
            for (op, x) in ops {
                let (got, want) = match op {
                    0 | 1 => (a.exponential(x), exponential_alone(&mut b, x)),
                    2 => (a.next_u64(), b.next_u64()),
                    _ => (a.below(x), b.below(x)),
                };
                proptest::prop_assert_eq!(got, want);
            }
        }

        /// The log gives the squaring's bits over the whole range, and
        /// the approximation stays within its bound (with 14 units for
        /// the reference's own rounding).
        #[test]
        fn log_is_the_squaring_one(x in 1u64..=(1 << 53), shift in 0u32..53) {
            for x in [x, (x >> shift).max(1)] {
                proptest::prop_assert_eq!(neg_log2_fraction_q32(x, 53), neg_log2_wide(x, 53));
                proptest::prop_assert!(approx_error(x) <= 300 + 14, "x {}: {}", x, approx_error(x));
            }
        }
    }

    /// Mantissas next to 1 and to 2, where the log is near a whole number
    /// of 2^-32 and the squaring takes over, and a million from a stream.
    #[test]
    fn log_at_the_edges() {
        for x in (1u64..1 << 12).chain((1 << 52)..(1 << 52) + (1 << 12)).chain((1 << 53) - (1 << 12)..=1 << 53) {
            assert_eq!(neg_log2_fraction_q32(x, 53), neg_log2_wide(x, 53), "{x}");
        }
        for k in 0..=53 {
            for x in [(1u64 << k).saturating_sub(1).max(1), 1 << k, (1 << k) + 1] {
                assert_eq!(neg_log2_fraction_q32(x, 53), neg_log2_wide(x, 53), "{x}");
            }
        }
        let mut r = Rng::new(5, Stream::Scheduler);
        let mut worst = 0;
        for _ in 0..1_000_000 {
            let x = (r.next_u64() >> 11) + 1;
            assert_eq!(neg_log2_fraction_q32(x, 53), neg_log2_wide(x, 53), "{x}");
            worst = worst.max(approx_error(x));
        }
        assert!(worst <= 300 + 14, "approximation off by {worst}");
    }

    #[test]
    fn log2_e_constant() {
        let want = std::f64::consts::LOG2_E * (1u64 << 62) as f64;
        assert!((LOG2_E_Q62 as f64 - want).abs() < 2048.0);
    }

    #[test]
    fn neg_log2_exact_points() {
        assert_eq!(neg_log2_fraction_q32(1 << 53, 53), 0);
        assert_eq!(neg_log2_fraction_q32(1 << 52, 53), 1 << 32);
        let v = neg_log2_fraction_q32(3 << 51, 53); // log2(4/3) = 0.415037...
        let expect = (0.415_037_499_278_843_8_f64 * 4294967296.0) as u64;
        assert!(v.abs_diff(expect) < 16, "{v} vs {expect}");
    }
}
