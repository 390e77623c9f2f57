//! The sched_ext kfuncs as C-callable functions.
//!
//! shim/runtime.c defines each kfunc with the kernel's name and forwards it
//! to the function of the same name here, found by [`resolve`] when the
//! object is attached. Each one converts pointers to simulator ids,
//! checks them (a NULL or foreign task pointer, an invalid cpumask or
//! iterator ejects the scheduler through `scx_bpf_error`, as a kernel
//! argument check would), and calls `sched::ext::kfuncs`. The other
//! families live in kptr.rs (tasks, cpumasks) and mapfns.rs (maps, timers).

use std::ffi::{c_char, c_void, CStr};

use schedlab::sched::ext::abi::{CpumaskC, DsqIterC, TaskStructC};
use schedlab::sched::ext::kfuncs as k;
use schedlab::sched::ext::ops::dsq_id;

use super::kobj::Who;
use super::state::{bad, with_ctx, with_ctx_fast, with_ctx_plain};
use super::{kptr, mapfns, rtfns};

/// `struct scx_bpf_select_cpu_and_args`.
#[repr(C)]
pub(super) struct SelectCpuAndArgsC {
    pub prev_cpu: i32,
    pub wake_flags: u64,
    pub flags: u64,
}

const _: () = assert!(std::mem::size_of::<DsqIterC>() <= 96, "DsqIterC must fit in struct bpf_iter_scx_dsq");

/// Converts a string from C (NULL reads as empty).
///
/// # Safety
/// `s` is NULL or a NUL-terminated string.
unsafe fn c_string(s: *const c_char) -> String {
    if s.is_null() {
        return String::new();
    }
    // SAFETY: per the contract.
    unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
}

/// The iterator state inside a `struct bpf_iter_scx_dsq`.
fn iter<'a>(it: *mut DsqIterC) -> Option<&'a mut DsqIterC> {
    // SAFETY: a non-NULL `it` is the address of a `struct bpf_iter_scx_dsq`
    // (96 bytes, 8-aligned, see the assertion above) that the BPF program
    // owns on its stack for the duration of the kfunc.
    (!it.is_null() && (it as usize) % 8 == 0).then(|| unsafe { &mut *it })
}

macro_rules! need {
    ($sim:expr, $opt:expr, $what:expr) => {
        match $opt {
            Some(v) => v,
            None => {
                bad($sim, format!("{}: invalid argument", $what));
                return Default::default();
            }
        }
    };
}

pub(super) extern "C" fn scx_bpf_create_dsq(dsq_id: u64, node: i32) -> i32 {
    with_ctx(|sim, _| k::scx_bpf_create_dsq(sim, dsq_id, node))
}

pub(super) extern "C" fn scx_bpf_destroy_dsq(dsq_id: u64) {
    with_ctx(|sim, _| k::scx_bpf_destroy_dsq(sim, dsq_id))
}

pub(super) extern "C" fn scx_bpf_select_cpu_dfl(
    p: *const TaskStructC,
    prev_cpu: i32,
    wake_flags: u64,
    is_idle: *mut bool,
) -> i32 {
    with_ctx(|sim, h| {
        let Some(p) = h.task_of(sim, p, "scx_bpf_select_cpu_dfl") else { return prev_cpu };
        let (cpu, idle) = k::scx_bpf_select_cpu_dfl(sim, p, prev_cpu, wake_flags);
        if !is_idle.is_null() {
            // SAFETY: the BPF program passes the address of its bool.
            unsafe { *is_idle = idle };
        }
        cpu
    })
}

pub(super) extern "C" fn __scx_bpf_select_cpu_and(
    p: *const TaskStructC,
    cpus: *const CpumaskC,
    args: *const SelectCpuAndArgsC,
) -> i32 {
    with_ctx(|sim, h| {
        if args.is_null() {
            bad(sim, "scx_bpf_select_cpu_and: NULL args".into());
            return -22;
        }
        // SAFETY: non-NULL, pointing at the wrapper's argument struct.
        let a = unsafe { &*args };
        let Some(p) = h.task_of(sim, p, "scx_bpf_select_cpu_and") else { return -22 };
        let (prev_cpu, wake_flags, flags) = (a.prev_cpu, a.wake_flags, a.flags);
        h.with_machine_mask(sim, cpus, "scx_bpf_select_cpu_and", |sim, mask| {
            Some(k::scx_bpf_select_cpu_and(sim, p, prev_cpu, wake_flags, mask, flags))
        })
        .unwrap_or(-22)
    })
}

pub(super) extern "C" fn scx_bpf_dsq_insert(p: *const TaskStructC, dsq_id: u64, slice: u64, enq_flags: u64) -> bool {
    with_ctx(|sim, h| {
        let Some(p) = h.task_of(sim, p, "scx_bpf_dsq_insert") else { return false };
        let Some((dsq_id, enq_flags)) = super::cid::dsq_args(sim, h, dsq_id, enq_flags) else { return false };
        k::scx_bpf_dsq_insert(sim, p, dsq_id, slice, enq_flags)
    })
}

pub(super) extern "C" fn scx_bpf_dsq_insert_vtime(
    p: *const TaskStructC,
    dsq_id: u64,
    slice: u64,
    vtime: u64,
    enq_flags: u64,
) -> bool {
    with_ctx(|sim, h| {
        let Some(p) = h.task_of(sim, p, "scx_bpf_dsq_insert_vtime") else { return false };
        let Some((dsq_id, enq_flags)) = super::cid::dsq_args(sim, h, dsq_id, enq_flags) else { return false };
        k::scx_bpf_dsq_insert_vtime(sim, p, dsq_id, slice, vtime, enq_flags)
    })
}

pub(super) extern "C" fn scx_bpf_dispatch_nr_slots() -> u32 {
    with_ctx(|sim, _| k::scx_bpf_dispatch_nr_slots(sim))
}

pub(super) extern "C" fn scx_bpf_dispatch_cancel() {
    with_ctx(|sim, _| k::scx_bpf_dispatch_cancel(sim))
}

/// 7.1's move_to_local takes enq_flags.
#[allow(non_snake_case)]
pub(super) extern "C" fn scx_bpf_dsq_move_to_local___v2(dsq_id: u64, enq_flags: u64) -> bool {
    with_ctx(|sim, _| k::scx_bpf_dsq_move_to_local(sim, dsq_id, enq_flags))
}

pub(super) extern "C" fn scx_bpf_dsq_move_set_slice(it: *mut DsqIterC, slice: u64) {
    with_ctx(|sim, _| {
        let it = need!(sim, iter(it), "scx_bpf_dsq_move_set_slice");
        k::scx_bpf_dsq_move_set_slice(it, slice)
    })
}

pub(super) extern "C" fn scx_bpf_dsq_move_set_vtime(it: *mut DsqIterC, vtime: u64) {
    with_ctx(|sim, _| {
        let it = need!(sim, iter(it), "scx_bpf_dsq_move_set_vtime");
        k::scx_bpf_dsq_move_set_vtime(it, vtime)
    })
}

pub(super) extern "C" fn scx_bpf_dsq_move(it: *mut DsqIterC, p: *const TaskStructC, dsq_id: u64, enq_flags: u64) -> bool {
    with_ctx(|sim, h| {
        let it = need!(sim, iter(it), "scx_bpf_dsq_move");
        let Some(p) = h.task_of(sim, p, "scx_bpf_dsq_move") else { return false };
        let Some((dsq_id, enq_flags)) = super::cid::dsq_args(sim, h, dsq_id, enq_flags) else { return false };
        k::scx_bpf_dsq_move(sim, it, p, dsq_id, enq_flags)
    })
}

pub(super) extern "C" fn scx_bpf_dsq_move_vtime(
    it: *mut DsqIterC,
    p: *const TaskStructC,
    dsq_id: u64,
    enq_flags: u64,
) -> bool {
    with_ctx(|sim, h| {
        let it = need!(sim, iter(it), "scx_bpf_dsq_move_vtime");
        let Some(p) = h.task_of(sim, p, "scx_bpf_dsq_move_vtime") else { return false };
        let Some((dsq_id, enq_flags)) = super::cid::dsq_args(sim, h, dsq_id, enq_flags) else { return false };
        k::scx_bpf_dsq_move_vtime(sim, it, p, dsq_id, enq_flags)
    })
}

pub(super) extern "C" fn scx_bpf_reenqueue_local() -> u32 {
    with_ctx(|sim, _| k::scx_bpf_reenqueue_local(sim))
}

pub(super) extern "C" fn scx_bpf_dsq_reenq(dsq_id: u64, reenq_flags: u64) {
    with_ctx(|sim, h| {
        // find_dsq_for_dispatch(): a cid-form LOCAL_ON | cid names a CPU.
        if let Some(dsq_id) = super::cid::dsq_in(sim, h, dsq_id) {
            k::scx_bpf_dsq_reenq(sim, dsq_id, reenq_flags)
        }
    })
}

pub(super) extern "C" fn scx_bpf_kick_cpu(cpu: i32, flags: u64) {
    with_ctx(|sim, _| k::scx_bpf_kick_cpu(sim, cpu, flags))
}

pub(super) extern "C" fn scx_bpf_dsq_nr_queued(id: u64) -> i32 {
    // Every id but a LOCAL_ON one of a cid-form scheduler (cid::dsq_in()
    // passes the others as they are) or one naming no CPU (an error):
    // scx_bpfland asks several times a callback.
    let fast = with_ctx_fast(|sim, h| {
        let cpu = (id & dsq_id::LOCAL_CPU_MASK) as i32;
        let plain = id & dsq_id::LOCAL_ON != dsq_id::LOCAL_ON || (!h.cid_form() && cpu >= 0 && (cpu as usize) < sim.nr_cpus());
        plain.then(|| k::scx_bpf_dsq_nr_queued(sim, id))
    });
    fast.unwrap_or_else(|| nr_queued_full(id))
}

#[inline(never)]
extern "C" fn nr_queued_full(id: u64) -> i32 {
    with_ctx(|sim, h| match super::cid::dsq_in(sim, h, id) {
        Some(id) => k::scx_bpf_dsq_nr_queued(sim, id),
        None => -22,
    })
}

pub(super) extern "C" fn scx_bpf_dsq_peek(dsq_id: u64) -> *mut TaskStructC {
    with_ctx(|sim, h| k::scx_bpf_dsq_peek(sim, dsq_id).map_or(std::ptr::null_mut(), |p| h.task_ptr(sim, p)))
}

pub(super) extern "C" fn bpf_iter_scx_dsq_new(it: *mut DsqIterC, dsq_id: u64, flags: u64) -> i32 {
    with_ctx(|sim, _| {
        let Some(it) = iter(it) else {
            bad(sim, "bpf_iter_scx_dsq_new: invalid iterator".into());
            return -22;
        };
        k::bpf_iter_scx_dsq_new(sim, it, dsq_id, flags)
    })
}

pub(super) extern "C" fn bpf_iter_scx_dsq_next(it: *mut DsqIterC) -> *mut TaskStructC {
    with_ctx(|sim, h| {
        let it = need!(sim, iter(it), "bpf_iter_scx_dsq_next");
        k::bpf_iter_scx_dsq_next(sim, it).map_or(std::ptr::null_mut(), |p| h.task_ptr(sim, p))
    })
}

pub(super) extern "C" fn bpf_iter_scx_dsq_destroy(it: *mut DsqIterC) {
    with_ctx(|sim, _| {
        let it = need!(sim, iter(it), "bpf_iter_scx_dsq_destroy");
        k::bpf_iter_scx_dsq_destroy(sim, it)
    })
}

pub(super) extern "C" fn schedlab_exit(code: i64, msg: *const c_char) {
    // SAFETY: the runtime passes its formatted, NUL-terminated buffer.
    let msg = unsafe { c_string(msg) };
    with_ctx(|sim, _| k::scx_bpf_exit(sim, code, msg))
}

pub(super) extern "C" fn schedlab_error(msg: *const c_char) {
    // SAFETY: as schedlab_exit.
    let msg = unsafe { c_string(msg) };
    with_ctx(|sim, _| k::scx_bpf_error(sim, msg))
}

pub(super) extern "C" fn schedlab_dump(msg: *const c_char) {
    // SAFETY: as schedlab_exit.
    let msg = unsafe { c_string(msg) };
    with_ctx(|sim, _| k::scx_bpf_dump(sim, &msg))
}

pub(super) extern "C" fn schedlab_trace(msg: *const c_char) {
    // SAFETY: as schedlab_exit.
    let msg = unsafe { c_string(msg) };
    with_ctx(|_, h| h.inner.borrow_mut().trace.push(msg))
}

pub(super) extern "C" fn scx_bpf_cpuperf_cap(cpu: i32) -> u32 {
    with_ctx(|sim, _| k::scx_bpf_cpuperf_cap(sim, cpu))
}

pub(super) extern "C" fn scx_bpf_cpuperf_cur(cpu: i32) -> u32 {
    with_ctx(|sim, _| k::scx_bpf_cpuperf_cur(sim, cpu))
}

pub(super) extern "C" fn scx_bpf_cpuperf_set(cpu: i32, perf: u32) {
    with_ctx(|sim, _| k::scx_bpf_cpuperf_set(sim, cpu, perf))
}

pub(super) extern "C" fn scx_bpf_nr_node_ids() -> u32 {
    with_ctx(|sim, _| k::scx_bpf_nr_node_ids(sim))
}

pub(super) extern "C" fn scx_bpf_nr_cpu_ids() -> u32 {
    with_ctx(|sim, _| k::scx_bpf_nr_cpu_ids(sim))
}

pub(super) extern "C" fn scx_bpf_cpu_node(cpu: i32) -> i32 {
    // A valid CPU (scx_bpfland asks for each CPU it looks at).
    let fast = with_ctx_fast(|sim, _| (cpu >= 0 && (cpu as usize) < sim.nr_cpus()).then(|| k::scx_bpf_cpu_node(sim, cpu)));
    fast.unwrap_or_else(|| cpu_node_full(cpu))
}

#[inline(never)]
extern "C" fn cpu_node_full(cpu: i32) -> i32 {
    with_ctx(|sim, _| k::scx_bpf_cpu_node(sim, cpu))
}

pub(super) extern "C" fn scx_bpf_get_possible_cpumask() -> *const CpumaskC {
    with_ctx(|sim, h| h.lend(k::scx_bpf_get_possible_cpumask(sim)))
}

pub(super) extern "C" fn scx_bpf_get_online_cpumask() -> *const CpumaskC {
    with_ctx(|sim, h| h.lend(k::scx_bpf_get_online_cpumask(sim)))
}

pub(super) extern "C" fn scx_bpf_get_idle_cpumask_node(node: i32) -> *const CpumaskC {
    with_ctx(|sim, h| h.lend(k::scx_bpf_get_idle_cpumask(sim, Some(node))))
}

pub(super) extern "C" fn scx_bpf_get_idle_cpumask() -> *const CpumaskC {
    with_ctx(|sim, h| h.lend(k::scx_bpf_get_idle_cpumask(sim, None)))
}

pub(super) extern "C" fn scx_bpf_get_idle_smtmask_node(node: i32) -> *const CpumaskC {
    with_ctx(|sim, h| h.lend(k::scx_bpf_get_idle_smtmask(sim, Some(node))))
}

pub(super) extern "C" fn scx_bpf_get_idle_smtmask() -> *const CpumaskC {
    with_ctx(|sim, h| h.lend(k::scx_bpf_get_idle_smtmask(sim, None)))
}

/// The put functions only check that the mask is one the kernel lent.
pub(super) extern "C" fn scx_bpf_put_cpumask(m: *const CpumaskC) {
    with_ctx(|sim, h| {
        if !m.is_null() && !h.mask_ok(m) {
            bad(sim, format!("scx_bpf_put_cpumask: invalid cpumask pointer {:#x}", m as usize));
        }
    })
}

pub(super) extern "C" fn scx_bpf_put_idle_cpumask(m: *const CpumaskC) {
    scx_bpf_put_cpumask(m)
}

pub(super) extern "C" fn scx_bpf_test_and_clear_cpu_idle(cpu: i32) -> bool {
    with_ctx(|sim, _| k::scx_bpf_test_and_clear_cpu_idle(sim, cpu))
}

fn pick(m: *const CpumaskC, flags: u64, node: Option<i32>, any: bool) -> i32 {
    with_ctx(|sim, h| {
        let what = if any { "scx_bpf_pick_any_cpu" } else { "scx_bpf_pick_idle_cpu" };
        h.with_machine_mask(sim, m, what, |sim, mask| {
            Some(if any { k::scx_bpf_pick_any_cpu(sim, mask, flags, node) } else { k::scx_bpf_pick_idle_cpu(sim, mask, flags, node) })
        })
        .unwrap_or(-22)
    })
}

pub(super) extern "C" fn scx_bpf_pick_idle_cpu_node(m: *const CpumaskC, node: i32, flags: u64) -> i32 {
    pick(m, flags, Some(node), false)
}

pub(super) extern "C" fn scx_bpf_pick_idle_cpu(m: *const CpumaskC, flags: u64) -> i32 {
    pick(m, flags, None, false)
}

pub(super) extern "C" fn scx_bpf_pick_any_cpu_node(m: *const CpumaskC, node: i32, flags: u64) -> i32 {
    pick(m, flags, Some(node), true)
}

pub(super) extern "C" fn scx_bpf_pick_any_cpu(m: *const CpumaskC, flags: u64) -> i32 {
    pick(m, flags, None, true)
}

/// An idle task runs on its CPU whenever no other task does.
pub(super) extern "C" fn scx_bpf_task_running(p: *const TaskStructC) -> bool {
    with_ctx(|sim, h| match h.who(sim, p, "scx_bpf_task_running") {
        Some(Who::Task(p)) => k::scx_bpf_task_running(sim, p),
        Some(Who::Idle(cpu)) => sim.rq(cpu).curr.is_none(),
        None => false,
    })
}

pub(super) extern "C" fn scx_bpf_task_cpu(p: *const TaskStructC) -> i32 {
    // The task last handed to C or named by it.
    let fast = with_ctx_fast(|sim, h| {
        let t = h.task_known(p)?;
        (sim.tasks.len() > t as usize).then(|| k::scx_bpf_task_cpu(sim, t))
    });
    fast.unwrap_or_else(|| task_cpu_full(p))
}

#[inline(never)]
extern "C" fn task_cpu_full(p: *const TaskStructC) -> i32 {
    with_ctx(|sim, h| match h.who(sim, p, "scx_bpf_task_cpu") {
        Some(Who::Task(p)) => k::scx_bpf_task_cpu(sim, p),
        Some(Who::Idle(cpu)) => cpu as i32,
        None => 0,
    })
}

pub(super) extern "C" fn scx_bpf_now() -> u64 {
    with_ctx_plain(|sim, _| k::scx_bpf_now(sim))
}

pub(super) extern "C" fn bpf_ktime_get_ns() -> u64 {
    with_ctx_plain(|sim, _| k::bpf_ktime_get_ns(sim))
}

pub(super) extern "C" fn bpf_get_prandom_u32() -> u32 {
    with_ctx(|sim, _| k::bpf_get_prandom_u32(sim))
}

pub(super) extern "C" fn bpf_get_smp_processor_id() -> u32 {
    with_ctx_plain(|sim, _| k::bpf_get_smp_processor_id(sim))
}

/// The host function the runtime asks for by `name`.
pub(super) fn lookup(name: &str) -> Option<*mut c_void> {
    macro_rules! table {
        ($($m:ident :: $f:ident),* $(,)?) => {
            match name {
                $(stringify!($f) => Some($m::$f as *const () as *mut c_void),)*
                _ => None,
            }
        };
    }
    use self as ffi;
    table!(
        ffi::scx_bpf_create_dsq,
        ffi::scx_bpf_destroy_dsq,
        ffi::scx_bpf_select_cpu_dfl,
        ffi::__scx_bpf_select_cpu_and,
        ffi::scx_bpf_dsq_insert,
        ffi::scx_bpf_dsq_insert_vtime,
        ffi::scx_bpf_dispatch_nr_slots,
        ffi::scx_bpf_dispatch_cancel,
        ffi::scx_bpf_dsq_move_to_local___v2,
        ffi::scx_bpf_dsq_move_set_slice,
        ffi::scx_bpf_dsq_move_set_vtime,
        ffi::scx_bpf_dsq_move,
        ffi::scx_bpf_dsq_move_vtime,
        ffi::scx_bpf_reenqueue_local,
        ffi::scx_bpf_dsq_reenq,
        ffi::scx_bpf_kick_cpu,
        ffi::scx_bpf_dsq_nr_queued,
        ffi::scx_bpf_dsq_peek,
        ffi::bpf_iter_scx_dsq_new,
        ffi::bpf_iter_scx_dsq_next,
        ffi::bpf_iter_scx_dsq_destroy,
        ffi::schedlab_exit,
        ffi::schedlab_error,
        ffi::schedlab_dump,
        ffi::schedlab_trace,
        ffi::scx_bpf_cpuperf_cap,
        ffi::scx_bpf_cpuperf_cur,
        ffi::scx_bpf_cpuperf_set,
        ffi::scx_bpf_nr_node_ids,
        ffi::scx_bpf_nr_cpu_ids,
        ffi::scx_bpf_cpu_node,
        ffi::scx_bpf_get_possible_cpumask,
        ffi::scx_bpf_get_online_cpumask,
        ffi::scx_bpf_get_idle_cpumask_node,
        ffi::scx_bpf_get_idle_cpumask,
        ffi::scx_bpf_get_idle_smtmask_node,
        ffi::scx_bpf_get_idle_smtmask,
        ffi::scx_bpf_put_cpumask,
        ffi::scx_bpf_put_idle_cpumask,
        ffi::scx_bpf_test_and_clear_cpu_idle,
        ffi::scx_bpf_pick_idle_cpu_node,
        ffi::scx_bpf_pick_idle_cpu,
        ffi::scx_bpf_pick_any_cpu_node,
        ffi::scx_bpf_pick_any_cpu,
        ffi::scx_bpf_task_running,
        ffi::scx_bpf_task_cpu,
        ffi::scx_bpf_now,
        ffi::bpf_ktime_get_ns,
        ffi::bpf_get_prandom_u32,
        ffi::bpf_get_smp_processor_id,
        rtfns::bpf_get_current_task_btf,
        rtfns::scx_bpf_cpu_curr,
        rtfns::scx_bpf_task_set_slice,
        rtfns::scx_bpf_task_set_dsq_vtime,
        rtfns::scx_bpf_cpu_rq,
        rtfns::scx_bpf_locked_rq,
        rtfns::schedlab_percpu_rq,
        rtfns::schedlab_preempt_count,
        rtfns::schedlab_this_cpu,
        rtfns::scx_bpf_task_cgroup,
        rtfns::bpf_cgroup_acquire,
        rtfns::bpf_cgroup_release,
        rtfns::bpf_cgroup_ancestor,
        rtfns::bpf_cgroup_from_id,
        rtfns::bpf_cgrp_storage_get,
        rtfns::bpf_cgrp_storage_delete,
        rtfns::schedlab_css_next,
        rtfns::bpf_inode_storage_get,
        rtfns::bpf_inode_storage_delete,
        rtfns::bpf_ringbuf_reserve,
        rtfns::bpf_ringbuf_submit,
        rtfns::bpf_ringbuf_discard,
        rtfns::bpf_ringbuf_output,
        rtfns::bpf_ringbuf_query,
        rtfns::schedlab_user_ringbuf_peek,
        rtfns::schedlab_user_ringbuf_release,
        rtfns::bpf_arena_alloc_pages,
        rtfns::bpf_arena_free_pages,
        rtfns::bpf_arena_reserve_pages,
        rtfns::bpf_perf_event_read_value,
        kptr::bpf_task_from_pid,
        kptr::bpf_task_acquire,
        kptr::bpf_task_release,
        kptr::bpf_cpumask_create,
        kptr::bpf_cpumask_acquire,
        kptr::bpf_cpumask_release,
        kptr::bpf_cpumask_first,
        kptr::bpf_cpumask_first_zero,
        kptr::bpf_cpumask_first_and,
        kptr::bpf_cpumask_set_cpu,
        kptr::bpf_cpumask_clear_cpu,
        kptr::bpf_cpumask_test_cpu,
        kptr::bpf_cpumask_test_and_set_cpu,
        kptr::bpf_cpumask_test_and_clear_cpu,
        kptr::bpf_cpumask_setall,
        kptr::bpf_cpumask_clear,
        kptr::bpf_cpumask_and,
        kptr::bpf_cpumask_or,
        kptr::bpf_cpumask_xor,
        kptr::bpf_cpumask_equal,
        kptr::bpf_cpumask_intersects,
        kptr::bpf_cpumask_subset,
        kptr::bpf_cpumask_empty,
        kptr::bpf_cpumask_full,
        kptr::bpf_cpumask_copy,
        kptr::bpf_cpumask_any_distribute,
        kptr::bpf_cpumask_any_and_distribute,
        kptr::bpf_cpumask_weight,
        mapfns::bpf_map_lookup_elem,
        mapfns::bpf_map_update_elem,
        mapfns::bpf_map_delete_elem,
        mapfns::bpf_map_push_elem,
        mapfns::bpf_map_pop_elem,
        mapfns::bpf_map_peek_elem,
        mapfns::bpf_map_lookup_percpu_elem,
        mapfns::bpf_for_each_map_elem,
        mapfns::bpf_task_storage_get,
        mapfns::bpf_task_storage_delete,
        mapfns::bpf_timer_init,
        mapfns::bpf_timer_set_callback,
        mapfns::bpf_timer_start,
        mapfns::bpf_timer_cancel,
    )
}
