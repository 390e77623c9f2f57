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
    /// -log2 (Q32) of the uniforms the next draws give, computed by an
    /// exponential draw alongside its own (see [`Rng::exponential`]):
    /// the next draw's is `ahead[ready - 1]`. Any draw other than an
    /// exponential one drops them (`ready = 0`).
    ahead: [u64; LOGS - 1],
    ready: u8,
}

/// Logs an exponential draw computes at a time ([`Rng::exponential`]).
const LOGS: usize = 4;

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
        Rng { s, ahead: [0; LOGS - 1], ready: 0 }
    }

    /// The next 64 random bits (xoshiro256++).
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.ready = 0;
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
    ///
    /// The log's 32 squarings depend on each other, so one log keeps the
    /// multiplier waiting most of the time. A draw that finds no log
    /// ready computes four side by side, in little more than the time of
    /// one: its own and the next three draws' (from a copy of the state).
    /// The stream's next exponential draws take those. The numbers are
    /// the same as one log at a time.
    pub fn exponential(&mut self, mean: u64) -> u64 {
        // u in (0, 1] as a 53-bit fraction; -ln(u) = -log2(u) * ln 2.
        let uniform = |x: u64| (x >> 11) + 1; // 1 ..= 2^53
        let neg_log2_q32 = if self.ready > 0 {
            Self::step(&mut self.s);
            self.ready -= 1;
            self.ahead[self.ready as usize]
        } else {
            let mut peek = self.s;
            let us: [u64; LOGS] = std::array::from_fn(|_| uniform(Self::step(&mut peek)));
            Self::step(&mut self.s);
            let logs = neg_log2_fraction_q32_many(us, 53);
            for (k, &l) in logs[1..].iter().rev().enumerate() {
                self.ahead[k] = l;
            }
            self.ready = (LOGS - 1) as u8;
            logs[0]
        };
        // ln 2 in Q32
        const LN2_Q32: u128 = 2_977_044_472;
        let neg_ln_q32 = (neg_log2_q32 as u128 * LN2_Q32) >> 32;
        ((mean as u128 * neg_ln_q32) >> 32).min(u64::MAX as u128) as u64
    }
}

/// -log2(x / 2^bits) in Q32 fixed point, for 1 <= x <= 2^bits, using the
/// bit-by-bit squaring method (exact integer steps). The draws compute
/// several at a time ([`neg_log2_fraction_q32_many`]); the tests hold them
/// to this.
#[cfg(test)]
fn neg_log2_fraction_q32(x: u64, bits: u32) -> u64 {
    let lz = 63 - x.leading_zeros(); // floor(log2 x)
    let int_part = (bits - lz) as u64; // -floor part contribution
    // mantissa m in [1, 2) as Q62: below 2^63, so each square is one
    // 64 x 64 -> 128-bit multiply and fits 64 bits again after the shift.
    let mut m: u64 = x << (62 - lz);
    let mut frac: u64 = 0;
    for i in (0..32).rev() {
        m = ((m as u128 * m as u128) >> 62) as u64;
        if m >= 1 << 63 {
            m >>= 1;
            frac |= 1 << i;
        }
    }
    // log2(x) = lz + frac; -log2(x/2^bits) = bits - lz - frac
    (int_part << 32).saturating_sub(frac)
}

/// [`neg_log2_fraction_q32`] of each of `xs`, computed side by side (the
/// same steps, interleaved).
///
/// Each mantissa is held doubled, as `M = 2m` in [2^63, 2^64): then
/// m' = floor(m^2 / 2^62) = floor(M^2 / 2^64), the high word of one
/// multiply with no shift to assemble it, which shortens the chain of
/// dependent steps. M is even, so the doubled m' (halved or not) is
/// exact.
#[inline]
fn neg_log2_fraction_q32_many<const N: usize>(xs: [u64; N], bits: u32) -> [u64; N] {
    let lz = xs.map(|x| 63 - x.leading_zeros());
    let mut m2: [u64; N] = std::array::from_fn(|k| xs[k] << (63 - lz[k]));
    let mut frac = [0u64; N];
    for _ in 0..32 {
        for k in 0..N {
            let m = ((m2[k] as u128 * m2[k] as u128) >> 64) as u64;
            // m >= 2: halve it and set the bit. Doubled, the halved m is
            // m with its lowest bit cleared; the other, m + m. The bit is
            // the carry out of m + m, so one add gives both the bit and
            // the other value, and the bits enter frac from the right
            // (after 32 steps the first is bit 31, as frac |= bit << i
            // for i from 31 down would place it).
            let (doubled, top) = m.overflowing_add(m);
            m2[k] = if top { m & !1 } else { doubled };
            frac[k] = frac[k].wrapping_add(frac[k]) + u64::from(top);
        }
    }
    std::array::from_fn(|k| (((bits - lz[k]) as u64) << 32).saturating_sub(frac[k]))
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

    /// An exponential draw with one log at a time, as first written.
    fn exponential_alone(r: &mut Rng, mean: u64) -> u64 {
        let u = (r.next_u64() >> 11) + 1;
        let neg_ln_q32 = (neg_log2_fraction_q32(u, 53) as u128 * 2_977_044_472) >> 32;
        ((mean as u128 * neg_ln_q32) >> 32).min(u64::MAX as u128) as u64
    }

    proptest::proptest! {
        /// A stream's numbers are the same whether its exponential draws
        /// take a log computed ahead or not, whatever other draws come
        /// between them (which drop the log computed ahead).
        #[test]
        fn logs_computed_ahead_change_no_number(seed: u64, ops in proptest::collection::vec((0u8..4, 1u64..1 << 40), 1..64)) {
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

        /// The 64-bit squaring gives the wide one's bits (draws and so
        /// every result depend on them).
        #[test]
        fn narrow_squaring_is_the_wide_one(x in 1u64..=(1 << 53), y in 1u64..=(1 << 53)) {
            proptest::prop_assert_eq!(neg_log2_fraction_q32(x, 53), neg_log2_wide(x, 53));
            let xs = [x, y, (x ^ 1).max(1), (y >> 1).max(1)];
            proptest::prop_assert_eq!(neg_log2_fraction_q32_many(xs, 53), xs.map(|z| neg_log2_wide(z, 53)));
        }
    }

    #[test]
    fn narrow_squaring_at_the_edges() {
        for x in [1u64, 2, 3, (1 << 52) - 1, 1 << 52, (1 << 52) + 1, (1 << 53) - 1, 1 << 53] {
            assert_eq!(neg_log2_fraction_q32(x, 53), neg_log2_wide(x, 53), "{x}");
        }
        let mut r = Rng::new(5, Stream::Scheduler);
        for _ in 0..100_000 {
            let x = (r.next_u64() >> 11) + 1;
            assert_eq!(neg_log2_fraction_q32(x, 53), neg_log2_wide(x, 53), "{x}");
        }
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
