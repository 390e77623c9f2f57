//! The word-wise cpumask helpers against bit-by-bit references (the
//! kfuncs as they were written before), over random masks with stray bits
//! past `nr_cpu_ids` and random `nr_cpu_ids`.

use super::*;

/// A random mask: empty, full, sparse, dense or random words, each kind
/// sometimes with stray bits anywhere (past any `nr_cpu_ids`).
fn mask(rng: &mut fastrand::Rng) -> CpumaskC {
    let mut m = CpumaskC::default();
    match rng.u8(..6) {
        0 => {}
        1 => m.bits = [!0; CPUMASK_WORDS],
        2 => (0..rng.usize(1..6)).for_each(|_| set(&mut m, rng.u32(..NR_CPUS as u32), true)),
        3 => {
            // Full below a random CPU, with a few holes.
            set_all_ref(&mut m, rng.u32(..=NR_CPUS as u32));
            (0..rng.usize(0..3)).for_each(|_| set(&mut m, rng.u32(..NR_CPUS as u32), false));
        }
        4 => m.bits.iter_mut().for_each(|w| *w = rng.u64(..)),
        _ => {
            // Random low words only, as masks of a small machine look.
            let n = rng.usize(0..4);
            m.bits[..n].iter_mut().for_each(|w| *w = rng.u64(..) & rng.u64(..));
        }
    }
    if rng.bool() {
        (0..rng.usize(1..4)).for_each(|_| set(&mut m, rng.u32(..NR_CPUS as u32), true));
    }
    m
}

/// A random `nr_cpu_ids`: small, on and around word boundaries, or the most.
fn nr(rng: &mut fastrand::Rng) -> u32 {
    match rng.u8(..5) {
        0 => rng.u32(0..=3),
        1 => rng.u32(1..=64) * 64 + rng.u32(0..=2) - 1,
        2 => NR_CPUS as u32,
        _ => rng.u32(0..=300),
    }
    .min(NR_CPUS as u32)
}

fn first_ref(m: &CpumaskC, nr: u32) -> u32 {
    (0..nr).find(|&c| bit(m, c)).unwrap_or(nr)
}

fn first_zero_ref(m: &CpumaskC, nr: u32) -> u32 {
    (0..nr).find(|&c| !bit(m, c)).unwrap_or(nr)
}

fn and_ref(a: &CpumaskC, b: &CpumaskC) -> CpumaskC {
    let mut r = CpumaskC::default();
    for w in 0..CPUMASK_WORDS {
        r.bits[w] = a.bits[w] & b.bits[w];
    }
    r
}

fn set_all_ref(m: &mut CpumaskC, nr: u32) {
    (0..nr).for_each(|c| set(m, c, true));
}

/// The old distribute's pick, rotor update included.
fn distribute_ref(rotor: &mut u32, m: &CpumaskC, nr: u32) -> u32 {
    let start = *rotor;
    match (1..=nr).map(|i| (start + i) % nr.max(1)).find(|&c| bit(m, c)) {
        Some(c) => {
            *rotor = c;
            c
        }
        None => nr,
    }
}

/// `d = op(a, b)` with a and b read whole first, and whether any bit is set.
fn binop_ref(d: &mut CpumaskC, a: CpumaskC, b: CpumaskC, op: fn(u64, u64) -> u64) -> bool {
    for w in 0..CPUMASK_WORDS {
        d.bits[w] = op(a.bits[w], b.bits[w]);
    }
    d.bits.iter().any(|&w| w != 0)
}

fn distribute_new(rotor: &mut u32, word: impl Fn(usize) -> u64, nr: u32) -> u32 {
    match pick_after(*rotor, nr, word) {
        Some(c) => {
            *rotor = c;
            c
        }
        None => nr,
    }
}

#[test]
fn single_mask_queries_match_bit_by_bit() {
    let mut rng = fastrand::Rng::with_seed(7);
    for i in 0..20_000 {
        let (m, nr) = (mask(&mut rng), nr(&mut rng));
        let what = format!("case {i}, nr {nr}");
        assert_eq!(find(0, nr, |w| m.bits[w]).unwrap_or(nr), first_ref(&m, nr), "first {what}");
        assert_eq!(find(0, nr, |w| !m.bits[w]).unwrap_or(nr), first_zero_ref(&m, nr), "first_zero {what}");
        assert_eq!(weight(&m, nr), (0..nr).filter(|&c| bit(&m, c)).count() as u32, "weight {what}");
        assert_eq!(full(&m, nr), (0..nr).all(|c| bit(&m, c)), "full {what}");
        assert_eq!(!any_word(|w| m.bits[w]), m.bits.iter().all(|&w| w == 0), "empty {what}");
        let cpu = rng.u32(..NR_CPUS as u32 + 8);
        let from = cpu.min(nr + 2);
        assert_eq!(find(from, nr, |w| m.bits[w]), (from..nr).find(|&c| bit(&m, c)), "find from {from} {what}");
        let (mut s, mut r) = (m, m);
        set_all(&mut s, nr);
        set_all_ref(&mut r, nr);
        assert_eq!(s, r, "setall {what}");
    }
}

#[test]
fn two_mask_queries_match_bit_by_bit() {
    let mut rng = fastrand::Rng::with_seed(11);
    for i in 0..20_000 {
        let (a, nr) = (mask(&mut rng), nr(&mut rng));
        // Sometimes the same mask, or one close to it.
        let b = match rng.u8(..4) {
            0 => a,
            1 => {
                let mut b = a;
                set(&mut b, rng.u32(..NR_CPUS as u32), rng.bool());
                b
            }
            _ => mask(&mut rng),
        };
        let what = format!("case {i}, nr {nr}");
        let and = and_ref(&a, &b);
        assert_eq!(find(0, nr, |w| a.bits[w] & b.bits[w]).unwrap_or(nr), first_ref(&and, nr), "first_and {what}");
        let inter = a.bits.iter().zip(&b.bits).any(|(x, y)| x & y != 0);
        assert_eq!(any_word(|w| a.bits[w] & b.bits[w]), inter, "intersects {what}");
        let subset = a.bits.iter().zip(&b.bits).all(|(x, y)| x & !y == 0);
        assert_eq!(!any_word(|w| a.bits[w] & !b.bits[w]), subset, "subset {what}");
    }
}

#[test]
fn distribute_matches_the_modulo_walk() {
    let mut rng = fastrand::Rng::with_seed(13);
    for i in 0..3_000 {
        let (a, nr) = (mask(&mut rng), nr(&mut rng));
        let b = mask(&mut rng);
        let and = and_ref(&a, &b);
        // The rotor starts anywhere below nr (or at 0), or, though no pick
        // leaves it there, at or past nr; then it follows the picks.
        let start = match nr {
            0 => rng.u32(..3),
            _ if rng.u8(..4) == 0 => rng.u32(nr..nr * 3),
            _ => rng.u32(..nr),
        };
        let (mut r_new, mut r_ref) = (start, start);
        for step in 0..20 {
            let what = format!("case {i}, nr {nr}, step {step}");
            let use_and = rng.bool();
            let (got, want) = if use_and {
                (distribute_new(&mut r_new, |w| a.bits[w] & b.bits[w], nr), distribute_ref(&mut r_ref, &and, nr))
            } else {
                (distribute_new(&mut r_new, |w| a.bits[w], nr), distribute_ref(&mut r_ref, &a, nr))
            };
            assert_eq!(got, want, "pick {what}");
            assert_eq!(r_new, r_ref, "rotor {what}");
        }
    }
}

type Op = fn(u64, u64) -> u64;
const OPS: [(&str, MaskOp, Op); 3] =
    [("and", MaskOp::And, |x, y| x & y), ("or", MaskOp::Or, |x, y| x | y), ("xor", MaskOp::Xor, |x, y| x ^ y)];

#[test]
fn binops_match_copying_ones_with_any_aliasing() {
    let mut rng = fastrand::Rng::with_seed(17);
    for i in 0..3_000 {
        let (name, op, f) = OPS[i % 3];
        let (a, b, d0) = (mask(&mut rng), mask(&mut rng), mask(&mut rng));
        let what = format!("{name}, case {i}");
        // Separate masks.
        let (mut d, mut r) = (d0, d0);
        // SAFETY: three separate live masks.
        let got = unsafe { combine(&mut d, &a, &b, op) };
        assert_eq!((got, d), (binop_ref(&mut r, a, b, f), r), "{what}");
        // dst is a, dst is b, all three the same.
        for alias in 0..3 {
            let (mut d, mut r) = (a, a);
            let other = if alias == 2 { a } else { b };
            let p: *mut CpumaskC = &mut d;
            // SAFETY: `p` is a live mask, no reference to it is used meanwhile.
            let got = unsafe {
                match alias {
                    0 => combine(p, p, &other, op),
                    1 => combine(p, &other, p, op),
                    _ => combine(p, p, p, op),
                }
            };
            let want = match alias {
                0 => binop_ref(&mut r, a, other, f),
                1 => binop_ref(&mut r, other, a, f),
                _ => binop_ref(&mut r, a, a, f),
            };
            assert_eq!((got, d), (want, r), "{what}, alias {alias}");
        }
        // A source overlapping dst in part (no valid arguments do).
        let mut buf = [0u64; 2 * CPUMASK_WORDS];
        buf.iter_mut().for_each(|w| *w = rng.u64(..));
        let shift = rng.usize(1..CPUMASK_WORDS);
        let base: *mut u64 = buf.as_mut_ptr();
        // SAFETY: both masks lie inside `buf`.
        let (src, dst) = unsafe {
            let (x, y) = (base.cast::<CpumaskC>(), base.add(shift).cast::<CpumaskC>());
            if rng.bool() { (x, y) } else { (y, x) }
        };
        // SAFETY: reads of masks inside `buf`.
        let (sa, mut r) = unsafe { (*src, *dst) };
        let want = binop_ref(&mut r, sa, b, f);
        // SAFETY: as above; no reference into `buf` is live.
        let got = unsafe { combine(dst, src, &b, op) };
        // SAFETY: as above.
        assert_eq!((got, unsafe { *dst }), (want, r), "{what}, overlap by {shift} words");
    }
}
