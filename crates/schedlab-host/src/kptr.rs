//! Referenced kernel objects BPF code holds: tasks (bpf_task_acquire /
//! release / from_pid) and `struct bpf_cpumask` (kernel/bpf/cpumask.c).
//!
//! A `bpf_cpumask` is a boxed [`BpfCpumaskC`] with a reference count; the
//! host keeps every live one in a registry by address, which is how
//! arguments are checked. The last release moves it to the call's
//! graveyard, so it is freed when the outermost call returns, as RCU would.
//! Bits at or past `nr_cpu_ids` are never set, as in the kernel.

use schedlab::sched::ext::abi::{CpumaskC, TaskStructC, CPUMASK_WORDS, NR_CPUS};
use schedlab::sched::ext::kfuncs as k;
use schedlab::sched::sim::Sim;

use super::state::{bad, with_ctx, with_ctx_fast, BpfCpumaskC, HostState};

pub(super) extern "C" fn bpf_task_from_pid(pid: i32) -> *mut TaskStructC {
    with_ctx(|sim, h| k::scx_bpf_task_from_pid(sim, pid).map_or(std::ptr::null_mut(), |p| h.task_ptr(sim, p)))
}

/// Any task, the idle tasks included, may be acquired.
pub(super) extern "C" fn bpf_task_acquire(p: *mut TaskStructC) -> *mut TaskStructC {
    with_ctx(|sim, h| if h.who(sim, p, "bpf_task_acquire").is_some() { p } else { std::ptr::null_mut() })
}

pub(super) extern "C" fn bpf_task_release(p: *mut TaskStructC) {
    with_ctx(|sim, h| {
        h.who(sim, p, "bpf_task_release");
    })
}

fn nr_cpus(sim: &mut Sim) -> u32 {
    k::scx_bpf_nr_cpu_ids(sim).min(NR_CPUS as u32)
}

fn bit(m: &CpumaskC, cpu: u32) -> bool {
    m.bits[cpu as usize / 64] & (1 << (cpu % 64)) != 0
}

/// The bits of the last word covering CPUs below `to` (`to` > 0) that
/// name CPUs below it.
#[inline]
fn tail(to: u32) -> u64 {
    !0 >> ((64 - to % 64) % 64)
}

/// The lowest CPU in `[from, to)` whose bit is set in `word(w)` (word `w`
/// of a mask, computed), looking at whole words.
#[inline(always)]
fn find(from: u32, to: u32, word: impl Fn(usize) -> u64) -> Option<u32> {
    if from >= to {
        return None;
    }
    let last = (to - 1) as usize / 64;
    let mut w = from as usize / 64;
    let mut bits = word(w) & (!0 << (from % 64));
    loop {
        if w == last {
            bits &= tail(to);
            return (bits != 0).then(|| (w * 64) as u32 + bits.trailing_zeros());
        }
        if bits != 0 {
            return Some((w * 64) as u32 + bits.trailing_zeros());
        }
        w += 1;
        bits = word(w);
    }
}

/// How many CPUs below `nr` are set in `m`.
fn weight(m: &CpumaskC, nr: u32) -> u32 {
    if nr == 0 {
        return 0;
    }
    let last = (nr - 1) as usize / 64;
    let whole: u32 = m.bits[..last].iter().map(|w| w.count_ones()).sum();
    whole + (m.bits[last] & tail(nr)).count_ones()
}

/// Whether every CPU below `nr` is set in `m`.
fn full(m: &CpumaskC, nr: u32) -> bool {
    if nr == 0 {
        return true;
    }
    let last = (nr - 1) as usize / 64;
    m.bits[..last].iter().all(|&w| w == !0) && m.bits[last] & tail(nr) == tail(nr)
}

/// Sets every CPU below `nr` in `m` (the others are left as they are).
fn set_all(m: &mut CpumaskC, nr: u32) {
    if nr == 0 {
        return;
    }
    let last = (nr - 1) as usize / 64;
    m.bits[..last].fill(!0);
    m.bits[last] |= tail(nr);
}

/// Whether `f(w)` is non-zero for any word of a mask, eight words at a time
/// (each eight are combined without branches).
#[inline(always)]
fn any_word(f: impl Fn(usize) -> u64) -> bool {
    (0..CPUMASK_WORDS / 8).any(|c| (c * 8..c * 8 + 8).fold(0, |acc, w| acc | f(w)) != 0)
}

/// A registered bpf_cpumask by address, or an ejection.
fn owned<'a>(sim: &mut Sim, h: &HostState, m: *mut BpfCpumaskC, what: &str) -> Option<&'a mut BpfCpumaskC> {
    if h.owned(m as usize) {
        // SAFETY: the registry holds the box at this address until the last
        // release; the reference is used only within the calling kfunc,
        // while no registry borrow is live.
        Some(unsafe { &mut *m })
    } else {
        bad(sim, format!("{what}: invalid bpf_cpumask pointer {:#x}", m as usize));
        None
    }
}

pub(super) extern "C" fn bpf_cpumask_create() -> *mut BpfCpumaskC {
    with_ctx(|_, h| {
        let mut b = Box::new(BpfCpumaskC { mask: CpumaskC::default(), usage: 1, _pad: 0 });
        let p: *mut BpfCpumaskC = &mut *b;
        h.inner.borrow_mut().cpumasks.insert(p as usize, b);
        p
    })
}

pub(super) extern "C" fn bpf_cpumask_acquire(m: *mut BpfCpumaskC) -> *mut BpfCpumaskC {
    with_ctx(|sim, h| match owned(sim, h, m, "bpf_cpumask_acquire") {
        Some(c) => {
            c.usage += 1;
            m
        }
        None => std::ptr::null_mut(),
    })
}

pub(super) extern "C" fn bpf_cpumask_release(m: *mut BpfCpumaskC) {
    with_ctx(|sim, h| {
        let Some(c) = owned(sim, h, m, "bpf_cpumask_release") else { return };
        c.usage -= 1;
        if c.usage == 0 {
            let mut i = h.inner.borrow_mut();
            h.forget_mask(m as usize);
            if let Some(b) = i.cpumasks.remove(&(m as usize)) {
                i.grave_masks.push(b);
                h.hold_call_memory();
            }
        }
    })
}

/// Reads a `const struct cpumask *` argument.
fn read<'a>(sim: &mut Sim, h: &HostState, m: *const CpumaskC, what: &str) -> Option<&'a CpumaskC> {
    h.mask(sim, m, what)
}

pub(super) extern "C" fn bpf_cpumask_first(m: *const CpumaskC) -> u32 {
    with_ctx(|sim, h| {
        let nr = nr_cpus(sim);
        read(sim, h, m, "bpf_cpumask_first").map_or(nr, |m| find(0, nr, |w| m.bits[w]).unwrap_or(nr))
    })
}

pub(super) extern "C" fn bpf_cpumask_first_zero(m: *const CpumaskC) -> u32 {
    with_ctx(|sim, h| {
        let nr = nr_cpus(sim);
        read(sim, h, m, "bpf_cpumask_first_zero").map_or(nr, |m| find(0, nr, |w| !m.bits[w]).unwrap_or(nr))
    })
}

/// Checks two `const struct cpumask *` arguments, `a` first.
fn two<'a>(
    sim: &mut Sim,
    h: &HostState,
    a: *const CpumaskC,
    b: *const CpumaskC,
    what: &str,
) -> Option<(&'a CpumaskC, &'a CpumaskC)> {
    Some((read(sim, h, a, what)?, read(sim, h, b, what)?))
}

pub(super) extern "C" fn bpf_cpumask_first_and(a: *const CpumaskC, b: *const CpumaskC) -> u32 {
    with_ctx(|sim, h| {
        let nr = nr_cpus(sim);
        two(sim, h, a, b, "bpf_cpumask_first_and").map_or(nr, |(a, b)| find(0, nr, |w| a.bits[w] & b.bits[w]).unwrap_or(nr))
    })
}

fn edit(m: *mut BpfCpumaskC, what: &str, f: impl FnOnce(&mut CpumaskC, u32) -> bool) -> bool {
    with_ctx(|sim, h| {
        let nr = nr_cpus(sim);
        owned(sim, h, m, what).is_some_and(|c| f(&mut c.mask, nr))
    })
}

fn set(m: &mut CpumaskC, cpu: u32, on: bool) {
    if on {
        m.bits[cpu as usize / 64] |= 1 << (cpu % 64);
    } else {
        m.bits[cpu as usize / 64] &= !(1 << (cpu % 64));
    }
}

pub(super) extern "C" fn bpf_cpumask_set_cpu(cpu: u32, m: *mut BpfCpumaskC) {
    edit(m, "bpf_cpumask_set_cpu", |m, nr| {
        if cpu < nr {
            set(m, cpu, true);
        }
        false
    });
}

pub(super) extern "C" fn bpf_cpumask_clear_cpu(cpu: u32, m: *mut BpfCpumaskC) {
    edit(m, "bpf_cpumask_clear_cpu", |m, nr| {
        if cpu < nr {
            set(m, cpu, false);
        }
        false
    });
}

pub(super) extern "C" fn bpf_cpumask_test_cpu(cpu: u32, m: *const CpumaskC) -> bool {
    // A mask the caches know.
    let fast = with_ctx_fast(|sim, h| {
        if !h.mask_known(m) {
            return None;
        }
        // SAFETY: as in HostState::mask: a live mask the host owns or lent.
        let m = unsafe { &*m };
        let nr = nr_cpus(sim);
        Some(cpu < nr && bit(m, cpu))
    });
    fast.unwrap_or_else(|| test_cpu_full(cpu, m))
}

#[inline(never)]
extern "C" fn test_cpu_full(cpu: u32, m: *const CpumaskC) -> bool {
    with_ctx(|sim, h| {
        let nr = nr_cpus(sim);
        read(sim, h, m, "bpf_cpumask_test_cpu").is_some_and(|m| cpu < nr && bit(m, cpu))
    })
}

pub(super) extern "C" fn bpf_cpumask_test_and_set_cpu(cpu: u32, m: *mut BpfCpumaskC) -> bool {
    edit(m, "bpf_cpumask_test_and_set_cpu", |m, nr| {
        let was = cpu < nr && bit(m, cpu);
        if cpu < nr {
            set(m, cpu, true);
        }
        was
    })
}

pub(super) extern "C" fn bpf_cpumask_test_and_clear_cpu(cpu: u32, m: *mut BpfCpumaskC) -> bool {
    edit(m, "bpf_cpumask_test_and_clear_cpu", |m, nr| {
        let was = cpu < nr && bit(m, cpu);
        if cpu < nr {
            set(m, cpu, false);
        }
        was
    })
}

pub(super) extern "C" fn bpf_cpumask_setall(m: *mut BpfCpumaskC) {
    edit(m, "bpf_cpumask_setall", |m, nr| {
        set_all(m, nr);
        false
    });
}

pub(super) extern "C" fn bpf_cpumask_clear(m: *mut BpfCpumaskC) {
    edit(m, "bpf_cpumask_clear", |m, _| {
        *m = CpumaskC::default();
        false
    });
}

/// The word operation of `bpf_cpumask_and/or/xor`.
#[derive(Clone, Copy)]
enum MaskOp {
    And,
    Or,
    Xor,
}

impl MaskOp {
    #[cfg(not(target_arch = "x86_64"))]
    #[inline(always)]
    fn word(self, x: u64, y: u64) -> u64 {
        match self {
            MaskOp::And => x & y,
            MaskOp::Or => x | y,
            MaskOp::Xor => x ^ y,
        }
    }
}

/// `*d = op(*a, *b)` word by word over the whole mask, stray bits past
/// `nr_cpu_ids` included; whether the result has any bit set. `a` and `b`
/// may be `d`: each word is read before the same word is written. A mask
/// overlapping `d` only in part (no valid arguments do) is copied first,
/// so every word is still read before any is written.
///
/// # Safety
/// `a` and `b` must be readable and `d` writable masks, with no reference
/// to any of them live.
#[inline(always)]
unsafe fn combine(d: *mut CpumaskC, a: *const CpumaskC, b: *const CpumaskC, op: MaskOp) -> bool {
    let size = std::mem::size_of::<CpumaskC>();
    let part = |x: *const CpumaskC| x != d.cast_const() && (x as usize).abs_diff(d as usize) < size;
    let copies: (CpumaskC, CpumaskC);
    let (a, b) = if part(a) || part(b) {
        // SAFETY: the caller's; the copies are separate from `d`.
        copies = unsafe { (*a, *b) };
        (&raw const copies.0, &raw const copies.1)
    } else {
        (a, b)
    };
    // SAFETY: the caller's, with `a` and `b` now apart from `d` or equal to it.
    unsafe { combine_words(d, a, b, op) }
}

/// [`combine`]'s loop in SSE2, which every x86-64 CPU has: two words a
/// lane, each lane read before the same lane is written. The portable
/// loop was vectorised or not as the code around its inlined copies
/// happened to be (scalar, the three kfuncs' own code took 26-28 % more
/// instructions under scx_lavd).
///
/// # Safety
/// As [`combine`]'s, with `a` and `b` each either `d` or apart from it.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn combine_words(d: *mut CpumaskC, a: *const CpumaskC, b: *const CpumaskC, op: MaskOp) -> bool {
    use std::arch::x86_64::{
        __m128i, _mm_and_si128, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128, _mm_setzero_si128,
        _mm_storeu_si128, _mm_xor_si128,
    };
    const _: () = assert!(std::mem::size_of::<CpumaskC>() % 16 == 0);
    let (d, a, b) = (d.cast::<__m128i>(), a.cast::<__m128i>(), b.cast::<__m128i>());
    // SAFETY: lanes `0..size/16` of each mask lie inside it (the caller's);
    // the unaligned loads and stores need no alignment; SSE2 is part of
    // the x86-64 baseline.
    unsafe {
        let mut any = _mm_setzero_si128();
        for i in 0..std::mem::size_of::<CpumaskC>() / 16 {
            let (x, y) = (_mm_loadu_si128(a.add(i)), _mm_loadu_si128(b.add(i)));
            let v = match op {
                MaskOp::And => _mm_and_si128(x, y),
                MaskOp::Or => _mm_or_si128(x, y),
                MaskOp::Xor => _mm_xor_si128(x, y),
            };
            _mm_storeu_si128(d.add(i), v);
            any = _mm_or_si128(any, v);
        }
        _mm_movemask_epi8(_mm_cmpeq_epi8(any, _mm_setzero_si128())) != 0xffff
    }
}

/// [`combine`]'s loop elsewhere: eight words at a time, each eight read
/// whole before they are written (vector code even when `d` is `a` or
/// `b`, where a word-by-word loop stays scalar).
///
/// # Safety
/// As [`combine`]'s, with `a` and `b` each either `d` or apart from it.
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
unsafe fn combine_words(d: *mut CpumaskC, a: *const CpumaskC, b: *const CpumaskC, op: MaskOp) -> bool {
    let (d, a, b) = (d.cast::<[u64; 8]>(), a.cast::<[u64; 8]>(), b.cast::<[u64; 8]>());
    let mut any = 0;
    for c in 0..CPUMASK_WORDS / 8 {
        // SAFETY: words `8c..8c+8` of each mask (the caller's); `d`'s are
        // written after `a`'s and `b`'s are read.
        unsafe {
            let (x, y) = (a.add(c).read(), b.add(c).read());
            let v: [u64; 8] = std::array::from_fn(|i| op.word(x[i], y[i]));
            d.add(c).write(v);
            any |= v.iter().fold(0, |acc, w| acc | w);
        }
    }
    any != 0
}

/// dst = op(a, b); `a` and `b` are read before `dst` is written (they may alias).
#[inline(always)]
fn binop(d: *mut BpfCpumaskC, a: *const CpumaskC, b: *const CpumaskC, what: &str, op: MaskOp) -> bool {
    with_ctx(|sim, h| {
        if two(sim, h, a, b, what).is_none() || owned(sim, h, d, what).is_none() {
            return false;
        }
        // SAFETY: all three were checked just now as live masks; no
        // reference to them is used any more.
        unsafe { combine(std::ptr::addr_of_mut!((*d).mask), a, b, op) }
    })
}

pub(super) extern "C" fn bpf_cpumask_and(d: *mut BpfCpumaskC, a: *const CpumaskC, b: *const CpumaskC) -> bool {
    binop(d, a, b, "bpf_cpumask_and", MaskOp::And)
}

pub(super) extern "C" fn bpf_cpumask_or(d: *mut BpfCpumaskC, a: *const CpumaskC, b: *const CpumaskC) {
    binop(d, a, b, "bpf_cpumask_or", MaskOp::Or);
}

pub(super) extern "C" fn bpf_cpumask_xor(d: *mut BpfCpumaskC, a: *const CpumaskC, b: *const CpumaskC) {
    binop(d, a, b, "bpf_cpumask_xor", MaskOp::Xor);
}

#[inline(always)]
fn pred2(a: *const CpumaskC, b: *const CpumaskC, what: &str, f: impl Fn(&CpumaskC, &CpumaskC) -> bool) -> bool {
    with_ctx(|sim, h| two(sim, h, a, b, what).is_some_and(|(a, b)| f(a, b)))
}

pub(super) extern "C" fn bpf_cpumask_equal(a: *const CpumaskC, b: *const CpumaskC) -> bool {
    pred2(a, b, "bpf_cpumask_equal", |a, b| a.bits == b.bits)
}

pub(super) extern "C" fn bpf_cpumask_intersects(a: *const CpumaskC, b: *const CpumaskC) -> bool {
    pred2(a, b, "bpf_cpumask_intersects", |a, b| any_word(|w| a.bits[w] & b.bits[w]))
}

pub(super) extern "C" fn bpf_cpumask_subset(a: *const CpumaskC, b: *const CpumaskC) -> bool {
    pred2(a, b, "bpf_cpumask_subset", |a, b| !any_word(|w| a.bits[w] & !b.bits[w]))
}

pub(super) extern "C" fn bpf_cpumask_empty(m: *const CpumaskC) -> bool {
    with_ctx(|sim, h| read(sim, h, m, "bpf_cpumask_empty").is_some_and(|m| !any_word(|w| m.bits[w])))
}

pub(super) extern "C" fn bpf_cpumask_full(m: *const CpumaskC) -> bool {
    with_ctx(|sim, h| {
        let nr = nr_cpus(sim);
        read(sim, h, m, "bpf_cpumask_full").is_some_and(|m| full(m, nr))
    })
}

pub(super) extern "C" fn bpf_cpumask_copy(d: *mut BpfCpumaskC, s: *const CpumaskC) {
    with_ctx(|sim, h| {
        if read(sim, h, s, "bpf_cpumask_copy").is_none() || owned(sim, h, d, "bpf_cpumask_copy").is_none() {
            return;
        }
        // SAFETY: both were checked just now as live masks, no reference
        // to them is used any more; a move copes with any overlap as the
        // copy through a temporary did.
        unsafe { std::ptr::copy(s, std::ptr::addr_of_mut!((*d).mask), 1) };
    })
}

pub(super) extern "C" fn bpf_cpumask_weight(m: *const CpumaskC) -> u32 {
    with_ctx(|sim, h| {
        let nr = nr_cpus(sim);
        read(sim, h, m, "bpf_cpumask_weight").map_or(0, |m| weight(m, nr))
    })
}

/// The CPU any_distribute picks after `start` among the CPUs below `nr`
/// set in `word(w)`: the first set one after `start`, wrapping (CPUs
/// `(start + i) % nr` for i from 1 to nr, as one search from
/// `(start + 1) % nr` to `nr` and one from 0).
#[inline(always)]
fn pick_after(start: u32, nr: u32, word: impl Fn(usize) -> u64) -> Option<u32> {
    if nr == 0 {
        return None;
    }
    let next = start.wrapping_add(1);
    let from = if next < nr { next } else { next % nr };
    // Most often the first candidate is set.
    if word(from as usize / 64) & (1 << (from % 64)) != 0 {
        return Some(from);
    }
    find(from + 1, nr, &word).or_else(|| find(0, from, &word))
}

/// cpumask_any_distribute(): the next set CPU after the previous pick,
/// wrapping, so successive calls spread. Deterministic: one rotor per
/// scheduler instead of the kernel's per-CPU one.
#[inline(always)]
fn distribute(sim: &mut Sim, h: &HostState, word: impl Fn(usize) -> u64) -> u32 {
    let nr = nr_cpus(sim);
    let start = h.rotor.get();
    match pick_after(start, nr, word) {
        Some(c) => {
            h.rotor.set(c);
            c
        }
        None => nr,
    }
}

pub(super) extern "C" fn bpf_cpumask_any_distribute(m: *const CpumaskC) -> u32 {
    // A mask the caches know (scx_lavd walks the CPUs of one with it).
    let fast = with_ctx_fast(|sim, h| {
        if !h.mask_known(m) {
            return None;
        }
        // SAFETY: as in HostState::mask: a live mask the host owns or lent.
        let m = unsafe { &*m };
        Some(distribute(sim, h, |w| m.bits[w]))
    });
    fast.unwrap_or_else(|| any_distribute_full(m))
}

#[inline(never)]
extern "C" fn any_distribute_full(m: *const CpumaskC) -> u32 {
    with_ctx(|sim, h| match read(sim, h, m, "bpf_cpumask_any_distribute") {
        Some(m) => distribute(sim, h, |w| m.bits[w]),
        None => nr_cpus(sim),
    })
}

pub(super) extern "C" fn bpf_cpumask_any_and_distribute(a: *const CpumaskC, b: *const CpumaskC) -> u32 {
    with_ctx(|sim, h| match two(sim, h, a, b, "bpf_cpumask_any_and_distribute") {
        Some((a, b)) => distribute(sim, h, |w| a.bits[w] & b.bits[w]),
        None => nr_cpus(sim),
    })
}

#[cfg(test)]
#[path = "kptr_tests.rs"]
mod tests;
