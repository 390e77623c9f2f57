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

use super::state::{bad, with_ctx, BpfCpumaskC, HostState};

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

/// A registered bpf_cpumask by address, or an ejection.
fn owned<'a>(sim: &mut Sim, h: &HostState, m: *mut BpfCpumaskC, what: &str) -> Option<&'a mut BpfCpumaskC> {
    let known = {
        let i = h.inner.borrow();
        // A global struct bpf_cpumask is used in place (never released).
        i.cpumasks.contains_key(&(m as usize)) || i.global_cpumask(m as usize)
    };
    if known {
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

fn first_set(m: &CpumaskC, nr: u32, from: u32) -> u32 {
    (from..nr).find(|&c| bit(m, c)).unwrap_or(nr)
}

pub(super) extern "C" fn bpf_cpumask_first(m: *const CpumaskC) -> u32 {
    with_ctx(|sim, h| {
        let nr = nr_cpus(sim);
        read(sim, h, m, "bpf_cpumask_first").map_or(nr, |m| first_set(m, nr, 0))
    })
}

pub(super) extern "C" fn bpf_cpumask_first_zero(m: *const CpumaskC) -> u32 {
    with_ctx(|sim, h| {
        let nr = nr_cpus(sim);
        read(sim, h, m, "bpf_cpumask_first_zero").map_or(nr, |m| (0..nr).find(|&c| !bit(m, c)).unwrap_or(nr))
    })
}

fn and(a: &CpumaskC, b: &CpumaskC) -> CpumaskC {
    let mut r = CpumaskC::default();
    for w in 0..CPUMASK_WORDS {
        r.bits[w] = a.bits[w] & b.bits[w];
    }
    r
}

fn two(
    sim: &mut Sim,
    h: &HostState,
    a: *const CpumaskC,
    b: *const CpumaskC,
    what: &str,
) -> Option<(CpumaskC, CpumaskC)> {
    Some((*read(sim, h, a, what)?, *read(sim, h, b, what)?))
}

pub(super) extern "C" fn bpf_cpumask_first_and(a: *const CpumaskC, b: *const CpumaskC) -> u32 {
    with_ctx(|sim, h| {
        let nr = nr_cpus(sim);
        two(sim, h, a, b, "bpf_cpumask_first_and").map_or(nr, |(a, b)| first_set(&and(&a, &b), nr, 0))
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
        (0..nr).for_each(|c| set(m, c, true));
        false
    });
}

pub(super) extern "C" fn bpf_cpumask_clear(m: *mut BpfCpumaskC) {
    edit(m, "bpf_cpumask_clear", |m, _| {
        *m = CpumaskC::default();
        false
    });
}

/// dst = op(a, b); `a` and `b` are read before `dst` is written (they may alias).
fn binop(d: *mut BpfCpumaskC, a: *const CpumaskC, b: *const CpumaskC, what: &str, op: fn(u64, u64) -> u64) -> bool {
    with_ctx(|sim, h| {
        let Some((a, b)) = two(sim, h, a, b, what) else { return false };
        let Some(dst) = owned(sim, h, d, what) else { return false };
        for w in 0..CPUMASK_WORDS {
            dst.mask.bits[w] = op(a.bits[w], b.bits[w]);
        }
        dst.mask.bits.iter().any(|&w| w != 0)
    })
}

pub(super) extern "C" fn bpf_cpumask_and(d: *mut BpfCpumaskC, a: *const CpumaskC, b: *const CpumaskC) -> bool {
    binop(d, a, b, "bpf_cpumask_and", |x, y| x & y)
}

pub(super) extern "C" fn bpf_cpumask_or(d: *mut BpfCpumaskC, a: *const CpumaskC, b: *const CpumaskC) {
    binop(d, a, b, "bpf_cpumask_or", |x, y| x | y);
}

pub(super) extern "C" fn bpf_cpumask_xor(d: *mut BpfCpumaskC, a: *const CpumaskC, b: *const CpumaskC) {
    binop(d, a, b, "bpf_cpumask_xor", |x, y| x ^ y);
}

fn pred2(a: *const CpumaskC, b: *const CpumaskC, what: &str, f: fn(&CpumaskC, &CpumaskC) -> bool) -> bool {
    with_ctx(|sim, h| two(sim, h, a, b, what).is_some_and(|(a, b)| f(&a, &b)))
}

pub(super) extern "C" fn bpf_cpumask_equal(a: *const CpumaskC, b: *const CpumaskC) -> bool {
    pred2(a, b, "bpf_cpumask_equal", |a, b| a.bits == b.bits)
}

pub(super) extern "C" fn bpf_cpumask_intersects(a: *const CpumaskC, b: *const CpumaskC) -> bool {
    pred2(a, b, "bpf_cpumask_intersects", |a, b| a.bits.iter().zip(&b.bits).any(|(x, y)| x & y != 0))
}

pub(super) extern "C" fn bpf_cpumask_subset(a: *const CpumaskC, b: *const CpumaskC) -> bool {
    pred2(a, b, "bpf_cpumask_subset", |a, b| a.bits.iter().zip(&b.bits).all(|(x, y)| x & !y == 0))
}

pub(super) extern "C" fn bpf_cpumask_empty(m: *const CpumaskC) -> bool {
    with_ctx(|sim, h| read(sim, h, m, "bpf_cpumask_empty").is_some_and(|m| m.bits.iter().all(|&w| w == 0)))
}

pub(super) extern "C" fn bpf_cpumask_full(m: *const CpumaskC) -> bool {
    with_ctx(|sim, h| {
        let nr = nr_cpus(sim);
        read(sim, h, m, "bpf_cpumask_full").is_some_and(|m| (0..nr).all(|c| bit(m, c)))
    })
}

pub(super) extern "C" fn bpf_cpumask_copy(d: *mut BpfCpumaskC, s: *const CpumaskC) {
    with_ctx(|sim, h| {
        let Some(src) = read(sim, h, s, "bpf_cpumask_copy").copied() else { return };
        if let Some(dst) = owned(sim, h, d, "bpf_cpumask_copy") {
            dst.mask = src;
        }
    })
}

pub(super) extern "C" fn bpf_cpumask_weight(m: *const CpumaskC) -> u32 {
    with_ctx(|sim, h| {
        let nr = nr_cpus(sim);
        read(sim, h, m, "bpf_cpumask_weight").map_or(0, |m| (0..nr).filter(|&c| bit(m, c)).count() as u32)
    })
}

/// cpumask_any_distribute(): the next set CPU after the previous pick,
/// wrapping, so successive calls spread. Deterministic: one rotor per
/// scheduler instead of the kernel's per-CPU one.
fn distribute(sim: &mut Sim, h: &HostState, m: &CpumaskC) -> u32 {
    let nr = nr_cpus(sim);
    let start = h.inner.borrow().rotor;
    let pick = (1..=nr).map(|i| (start + i) % nr.max(1)).find(|&c| bit(m, c));
    match pick {
        Some(c) => {
            h.inner.borrow_mut().rotor = c;
            c
        }
        None => nr,
    }
}

pub(super) extern "C" fn bpf_cpumask_any_distribute(m: *const CpumaskC) -> u32 {
    with_ctx(|sim, h| match read(sim, h, m, "bpf_cpumask_any_distribute") {
        Some(m) => distribute(sim, h, m),
        None => nr_cpus(sim),
    })
}

pub(super) extern "C" fn bpf_cpumask_any_and_distribute(a: *const CpumaskC, b: *const CpumaskC) -> u32 {
    with_ctx(|sim, h| match two(sim, h, a, b, "bpf_cpumask_any_and_distribute") {
        Some((a, b)) => distribute(sim, h, &and(&a, &b)),
        None => nr_cpus(sim),
    })
}
