//! The map helpers and bpf_timer as C-callable functions.
//!
//! A map argument is the address of the scheduler's map variable; it must
//! be one the loader registered (a bad one ejects). Per-CPU maps use the
//! CPU the simulator is running the op on.

use std::ffi::c_void;

use schedlab::sched::ext::abi::TaskStructC;
use schedlab::sched::ext::kfuncs as k;
use schedlab::sched::sim::Sim;

use super::maps::{self, EBUSY, EINVAL};
use super::state::{bad, with_ctx, with_ctx_fast, Callee, HostState, Timer};

/// The callback faulted.
const EFAULT: i64 = 14;

/// `BPF_F_TIMER_ABS`.
const TIMER_ABS: u64 = 1;
/// Marks a `struct bpf_timer` the host initialised (second opaque word).
const TIMER_MAGIC: u64 = 0x7363_686c_6162_746d;

#[inline]
fn map_index(sim: &mut Sim, h: &HostState, map: *mut c_void, what: &str) -> Option<usize> {
    let i = h.map_at(map as usize);
    if i.is_none() {
        bad(sim, format!("{what}: {:#x} is not a map of this scheduler", map as usize));
    }
    i
}

/// The `len` bytes at `p`, or an ejection when `p` is NULL.
fn bytes<'a>(sim: &mut Sim, p: *const c_void, len: u32, what: &str) -> Option<&'a [u8]> {
    if len == 0 {
        return Some(&[]);
    }
    if p.is_null() {
        bad(sim, format!("{what}: NULL pointer argument"));
        return None;
    }
    // SAFETY: BPF passes pointers to objects of the map's key/value size
    // (the verifier's guarantee; the shim trusts the scheduler here). The
    // slice is used only within the calling helper.
    Some(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len as usize) })
}

fn cpu_info(sim: &mut Sim) -> (u32, u32) {
    (k::bpf_get_smp_processor_id(sim), k::scx_bpf_nr_cpu_ids(sim))
}

/// The 4-byte key of an array map at `key` (not NULL).
#[inline]
fn array_key(key: *const c_void) -> u32 {
    // SAFETY: BPF passes a pointer to a key of the map's size, 4 bytes for
    // the array maps that have a view (the verifier's guarantee, as in
    // bytes()); it may be unaligned (a byte buffer on the stack).
    unsafe { key.cast::<u32>().read_unaligned() }
}

pub(super) extern "C" fn bpf_map_lookup_elem(map: *mut c_void, key: *const c_void) -> *mut c_void {
    // An array map already looked up: its value's address, with the same
    // accounting (cpu_info) and answer as the full path.
    let fast = with_ctx_fast(|sim, h| {
        let v = h.array_view(map as usize).filter(|_| !key.is_null())?;
        let (cpu, nr) = cpu_info(sim);
        Some(v.at(array_key(key), cpu, nr).cast())
    });
    fast.unwrap_or_else(|| lookup_full(map, key))
}

/// bpf_map_lookup_elem() of a map without a view.
#[inline(never)]
extern "C" fn lookup_full(map: *mut c_void, key: *const c_void) -> *mut c_void {
    with_ctx(|sim, h| {
        let Some(i) = map_index(sim, h, map, "bpf_map_lookup_elem") else { return std::ptr::null_mut() };
        let ks = h.inner.borrow().maps[i].def.key_size;
        let Some(key) = bytes(sim, key, ks, "bpf_map_lookup_elem") else { return std::ptr::null_mut() };
        let (cpu, nr) = cpu_info(sim);
        let r = h.inner.borrow_mut().maps[i].lookup(key, cpu, nr).cast();
        h.note_array(map as usize, i);
        r
    })
}

pub(super) extern "C" fn bpf_map_lookup_percpu_elem(map: *mut c_void, key: *const c_void, cpu: u32) -> *mut c_void {
    let fast = with_ctx_fast(|sim, h| {
        let v = h.array_view(map as usize).filter(|v| v.percpu() && !key.is_null())?;
        let nr = k::scx_bpf_nr_cpu_ids(sim);
        Some(v.at(array_key(key), cpu, nr).cast())
    });
    fast.unwrap_or_else(|| lookup_percpu_full(map, key, cpu))
}

/// bpf_map_lookup_percpu_elem() of a map without a view.
#[inline(never)]
extern "C" fn lookup_percpu_full(map: *mut c_void, key: *const c_void, cpu: u32) -> *mut c_void {
    with_ctx(|sim, h| {
        let Some(i) = map_index(sim, h, map, "bpf_map_lookup_percpu_elem") else { return std::ptr::null_mut() };
        let ks = h.inner.borrow().maps[i].def.key_size;
        let Some(key) = bytes(sim, key, ks, "bpf_map_lookup_percpu_elem") else { return std::ptr::null_mut() };
        let nr = k::scx_bpf_nr_cpu_ids(sim);
        let r = h.inner.borrow_mut().maps[i].lookup_percpu(key, cpu, nr).cast();
        h.note_array(map as usize, i);
        r
    })
}

pub(super) extern "C" fn bpf_map_update_elem(map: *mut c_void, key: *const c_void, value: *const c_void, flags: u64) -> i64 {
    with_ctx(|sim, h| {
        let Some(i) = map_index(sim, h, map, "bpf_map_update_elem") else { return -EINVAL };
        let (ks, vs) = {
            let d = &h.inner.borrow().maps[i].def;
            (d.key_size, d.value_size)
        };
        let Some(key) = bytes(sim, key, ks, "bpf_map_update_elem") else { return -EINVAL };
        let Some(value) = bytes(sim, value, vs, "bpf_map_update_elem") else { return -EINVAL };
        let (cpu, nr) = cpu_info(sim);
        h.inner.borrow_mut().maps[i].update(key, value, flags, cpu, nr)
    })
}

/// Drops the timers living in the removed element `key` of map `i`.
pub(super) fn forget_timers(sim: &mut Sim, h: &HostState, i: usize, key: &[u8]) {
    let gone: Vec<u64> = {
        let mut inner = h.inner.borrow_mut();
        let ids = inner.timers.iter().filter(|(_, t)| t.map == i && t.key == key).map(|(&id, _)| id).collect();
        inner.timers.retain(|_, t| !(t.map == i && t.key == key));
        ids
    };
    for id in gone {
        k::scx_timer_cancel(sim, id);
    }
}

pub(super) extern "C" fn bpf_map_delete_elem(map: *mut c_void, key: *const c_void) -> i64 {
    with_ctx(|sim, h| {
        let Some(i) = map_index(sim, h, map, "bpf_map_delete_elem") else { return -EINVAL };
        let ks = h.inner.borrow().maps[i].def.key_size;
        let Some(key) = bytes(sim, key, ks, "bpf_map_delete_elem") else { return -EINVAL };
        h.hold_call_memory();
        let r = {
            let mut inner = h.inner.borrow_mut();
            let inner = &mut *inner;
            inner.maps[i].delete(key, &mut inner.grave)
        };
        if r == 0 {
            forget_timers(sim, h, i, key);
        }
        r
    })
}

pub(super) extern "C" fn bpf_map_push_elem(map: *mut c_void, value: *const c_void, flags: u64) -> i64 {
    with_ctx(|sim, h| {
        let Some(i) = map_index(sim, h, map, "bpf_map_push_elem") else { return -EINVAL };
        let vs = h.inner.borrow().maps[i].def.value_size;
        let Some(value) = bytes(sim, value, vs, "bpf_map_push_elem") else { return -EINVAL };
        h.inner.borrow_mut().maps[i].push(value, flags)
    })
}

fn pop(map: *mut c_void, value: *mut c_void, remove: bool) -> i64 {
    with_ctx(|sim, h| {
        let what = if remove { "bpf_map_pop_elem" } else { "bpf_map_peek_elem" };
        let Some(i) = map_index(sim, h, map, what) else { return -EINVAL };
        let vs = h.inner.borrow().maps[i].def.value_size as usize;
        if value.is_null() {
            bad(sim, format!("{what}: NULL value"));
            return -EINVAL;
        }
        // SAFETY: BPF passes a buffer of the map's value size.
        let out = unsafe { std::slice::from_raw_parts_mut(value.cast::<u8>(), vs) };
        h.hold_call_memory();
        let mut inner = h.inner.borrow_mut();
        let inner = &mut *inner;
        inner.maps[i].pop(out, remove, &mut inner.grave)
    })
}

pub(super) extern "C" fn bpf_map_pop_elem(map: *mut c_void, value: *mut c_void) -> i64 {
    pop(map, value, true)
}

pub(super) extern "C" fn bpf_map_peek_elem(map: *mut c_void, value: *mut c_void) -> i64 {
    pop(map, value, false)
}

// The callback: `long cb(void *map, void *key, void *value, void *ctx)`:
// 0 continues, 1 stops.

pub(super) extern "C" fn bpf_for_each_map_elem(map: *mut c_void, cb: *mut c_void, ctx: *mut c_void, flags: u64) -> i64 {
    with_ctx(|sim, h| {
        let Some(i) = map_index(sim, h, map, "bpf_for_each_map_elem") else { return -EINVAL };
        if cb.is_null() || flags != 0 {
            return -EINVAL;
        }
        let (cpu, nr) = cpu_info(sim);
        let mut idx = Vec::new();
        let elems = h.inner.borrow_mut().maps[i].elems(cpu, nr, &mut idx);
        let mut n = 0;
        for (key, value) in elems {
            n += 1;
            // The runtime passes the callback the BPF program named, an
            // EachCb. key and value point into storage that stays allocated
            // until the outermost call returns (removals go to the
            // graveyard; `idx` lives to the end of this loop). The callback
            // runs in this kfunc's context, guarded (fault.rs).
            let args = [map as u64, key as u64, value as u64, ctx as u64];
            match h.call_c(sim, Callee::ForEach, cb as usize, args) {
                Some(0) => {}
                Some(_) => break,
                None => return -EFAULT,
            }
        }
        n
    })
}

pub(super) extern "C" fn bpf_task_storage_get(
    map: *mut c_void,
    task: *mut TaskStructC,
    value: *mut c_void,
    flags: u64,
) -> *mut c_void {
    // The last map looked up, a task the lookup caches know, and a value
    // it has (scx_bpfland and scx_cosmos call this several times a
    // callback).
    let fast = with_ctx_fast(|_, h| {
        let i = h.map_known(map as usize)?;
        let p = h.task_known(task)?;
        let mut inner = h.inner.try_borrow_mut().ok()?;
        inner.maps.get_mut(i)?.storage_present(maps::owner_key(p), flags, true).map(|v| v.cast())
    });
    fast.unwrap_or_else(|| task_storage_get_full(map, task, value, flags))
}

#[inline(never)]
extern "C" fn task_storage_get_full(map: *mut c_void, task: *mut TaskStructC, value: *mut c_void, flags: u64) -> *mut c_void {
    with_ctx(|sim, h| {
        let Some(i) = map_index(sim, h, map, "bpf_task_storage_get") else { return std::ptr::null_mut() };
        let Some(p) = h.who(sim, task, "bpf_task_storage_get") else { return std::ptr::null_mut() };
        // One borrow and one map index for the size and the lookup (nearly
        // every call, many per op); bytes() touches only `sim`.
        let r = {
            let mut inner = h.inner.borrow_mut();
            let m = &mut inner.maps[i];
            let init = if value.is_null() { None } else { bytes(sim, value, m.def.value_size, "bpf_task_storage_get") };
            m.storage_get(p.owner(), init, flags)
        };
        match r {
            Ok(v) => v.cast(),
            Err(e) => {
                bad(sim, format!("bpf_task_storage_get: invalid argument ({e})"));
                std::ptr::null_mut()
            }
        }
    })
}

pub(super) extern "C" fn bpf_task_storage_delete(map: *mut c_void, task: *mut TaskStructC) -> i64 {
    with_ctx(|sim, h| {
        let Some(i) = map_index(sim, h, map, "bpf_task_storage_delete") else { return -EINVAL };
        let Some(p) = h.who(sim, task, "bpf_task_storage_delete") else { return -EINVAL };
        h.hold_call_memory();
        let r = {
            let mut inner = h.inner.borrow_mut();
            let inner = &mut *inner;
            inner.maps[i].storage_delete(p.owner(), &mut inner.grave)
        };
        if r == 0 {
            forget_timers(sim, h, i, &p.owner().to_ne_bytes());
        }
        r
    })
}

/// The two words of a `struct bpf_timer`.
fn timer_words<'a>(sim: &mut Sim, t: *mut c_void, what: &str) -> Option<&'a mut [u64; 2]> {
    if t.is_null() || (t as usize) % 8 != 0 {
        bad(sim, format!("{what}: invalid bpf_timer pointer {:#x}", t as usize));
        return None;
    }
    // SAFETY: a `struct bpf_timer` is two 8-aligned u64s inside a map value
    // the host owns; used only within the calling helper.
    Some(unsafe { &mut *t.cast::<[u64; 2]>() })
}

fn timer_id(sim: &mut Sim, h: &HostState, t: *mut c_void, what: &str) -> Option<u64> {
    let w = timer_words(sim, t, what)?;
    let id = w[0];
    (w[1] == TIMER_MAGIC && h.inner.borrow().timers.contains_key(&id)).then_some(id)
}

pub(super) extern "C" fn bpf_timer_init(t: *mut c_void, map: *mut c_void, _flags: u64) -> i64 {
    with_ctx(|sim, h| {
        let Some(i) = map_index(sim, h, map, "bpf_timer_init") else { return -EINVAL };
        if timer_id(sim, h, t, "bpf_timer_init").is_some() {
            return -EBUSY;
        }
        let Some(w) = timer_words(sim, t, "bpf_timer_init") else { return -EINVAL };
        let mut inner = h.inner.borrow_mut();
        let Some(key) = inner.maps[i].key_of_value_addr(t as usize) else {
            let name = inner.maps[i].def.name.clone();
            drop(inner);
            bad(sim, format!("bpf_timer_init: the timer is not inside a value of map `{name}`"));
            return -EINVAL;
        };
        inner.next_timer += 1;
        let id = inner.next_timer;
        inner.timers.insert(id, Timer { map: i, key, cb: 0 });
        *w = [id, TIMER_MAGIC];
        0
    })
}

pub(super) extern "C" fn bpf_timer_set_callback(t: *mut c_void, cb: *mut c_void) -> i64 {
    with_ctx(|sim, h| {
        let Some(id) = timer_id(sim, h, t, "bpf_timer_set_callback") else { return -EINVAL };
        if let Some(timer) = h.inner.borrow_mut().timers.get_mut(&id) {
            timer.cb = cb as usize;
        }
        0
    })
}

pub(super) extern "C" fn bpf_timer_start(t: *mut c_void, nsecs: u64, flags: u64) -> i64 {
    with_ctx(|sim, h| {
        let Some(id) = timer_id(sim, h, t, "bpf_timer_start") else { return -EINVAL };
        if h.inner.borrow().timers.get(&id).is_none_or(|t| t.cb == 0) {
            return -EINVAL;
        }
        // `nsecs` and the expiry are on BPF's clock (CLOCK_MONOTONIC); the
        // timer event goes on the simulator's.
        let at = if flags & TIMER_ABS != 0 { nsecs } else { k::bpf_ktime_get_ns(sim).saturating_add(nsecs) };
        k::scx_timer_start(sim, id, k::sim_time(at));
        0
    })
}

pub(super) extern "C" fn bpf_timer_cancel(t: *mut c_void) -> i64 {
    with_ctx(|sim, h| {
        let Some(id) = timer_id(sim, h, t, "bpf_timer_cancel") else { return -EINVAL };
        i64::from(k::scx_timer_cancel(sim, id))
    })
}

/// What the host needs to run timer `id`'s callback: (callback, map
/// address, key, value address), or None if the timer or its element is gone.
pub(super) fn timer_target(h: &HostState, sim: &mut Sim, id: u64) -> Option<(usize, usize, Vec<u8>, usize)> {
    let (cpu, nr) = cpu_info(sim);
    let mut inner = h.inner.borrow_mut();
    let t = inner.timers.get(&id)?;
    let (cb, mi, key) = (t.cb, t.map, t.key.clone());
    let map_addr = *inner.map_addr.iter().find(|(_, &i)| i == mi)?.0;
    let m = &mut inner.maps[mi];
    let value = if m.def.kind.is_storage() {
        let owner = u64::from_ne_bytes(key.get(..8)?.try_into().ok()?);
        m.storage_get(owner, None, 0).ok()?
    } else {
        m.lookup(&key, cpu, nr)
    };
    if cb == 0 || value.is_null() {
        inner.timers.remove(&id);
        return None;
    }
    Some((cb, map_addr, key, value as usize))
}
