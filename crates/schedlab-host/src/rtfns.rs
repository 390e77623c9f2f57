//! The runtime's wider kfuncs and helpers as C-callable functions: the
//! current and per-CPU kernel objects (kernel/sched/ext.c's
//! scx_bpf_cpu_curr / scx_bpf_cpu_rq / scx_bpf_locked_rq /
//! scx_bpf_task_cgroup, kernel/bpf/cgroup kfuncs; the objects: cgroup.rs), cgroup and inode local
//! storage (bpf_cgrp_storage.c, bpf_inode_storage.c), ring buffers
//! (ringbuf.c), arenas (arena.c) and perf event reads (bpf_trace.c).
//! Arguments are checked as in ffi.rs: what the verifier would refuse
//! ejects the scheduler; what the kernel reports at run time is returned.

use std::ffi::c_void;

use schedlab::sched::ext::abi::TaskStructC;
use schedlab::sched::ext::kfuncs as k;
use schedlab::sched::sim::Sim;

use super::kobj::{CgroupC, CssC, RqC, Who};
use super::maps::{MapKind, E2BIG, EINVAL, ENOENT};
use super::perf::PerfValueC;
use super::state::{bad, with_ctx, with_ctx_fast, HostState};

/// -EAGAIN, -ENODATA.
const EAGAIN: i64 = 11;
const ENODATA: i64 = 61;
/// BPF_RB_NO_WAKEUP | BPF_RB_FORCE_WAKEUP.
const RB_WAKEUP_FLAGS: u64 = 3;

/// The index of map `map` if it is of one of `kinds`, else an ejection.
fn map_of(sim: &mut Sim, h: &HostState, map: *mut c_void, kinds: &[MapKind], what: &str) -> Option<usize> {
    let i = h.map_at(map as usize);
    match i {
        Some(i) if kinds.contains(&h.inner.borrow().maps[i].def.kind) => Some(i),
        Some(i) => {
            let (name, kind) = {
                let inner = h.inner.borrow();
                (inner.maps[i].def.name.clone(), inner.maps[i].def.kind)
            };
            bad(sim, format!("{what}: map `{name}` is a {kind:?} map, not {kinds:?}"));
            None
        }
        None => {
            bad(sim, format!("{what}: {:#x} is not a map of this scheduler", map as usize));
            None
        }
    }
}

/// The task on `cpu` as a C pointer: the running task or the idle task.
/// (Inlined: out of line, its every caller pays a call and a prologue for
/// a few instructions.)
#[inline]
pub(super) fn curr_ptr(sim: &mut Sim, h: &HostState, cpu: u32, curr: Option<u32>) -> *mut TaskStructC {
    match curr {
        Some(p) => h.task_ptr(sim, p),
        None => h.who_ptr(sim, Who::Idle(cpu)),
    }
}

/// scx_bpf_task_set_slice() / scx_bpf_task_set_dsq_vtime() (7.1): what a
/// direct write to `p->scx.slice` / `dsq_vtime` did before; false for a
/// task this scheduler does not own (an idle task).
fn task_set(p: *mut TaskStructC, v: u64, vtime: bool, what: &str) -> bool {
    with_ctx(|sim, h| match h.who(sim, p, what) {
        Some(Who::Task(p)) => {
            let c = &mut sim.task_mut(p).scx.c.scx;
            if vtime {
                c.dsq_vtime = v;
            } else {
                c.slice = v;
            }
            true
        }
        _ => false,
    })
}

pub(super) extern "C" fn scx_bpf_task_set_slice(p: *mut TaskStructC, slice: u64) -> bool {
    task_set(p, slice, false, "scx_bpf_task_set_slice")
}

pub(super) extern "C" fn scx_bpf_task_set_dsq_vtime(p: *mut TaskStructC, vtime: u64) -> bool {
    task_set(p, vtime, true, "scx_bpf_task_set_dsq_vtime")
}

/// The task running on the op's CPU (`current`): on an idle CPU, its idle task.
pub(super) extern "C" fn bpf_get_current_task_btf() -> *mut TaskStructC {
    with_ctx(|sim, h| {
        let cpu = k::bpf_get_smp_processor_id(sim);
        let curr = sim.rq(cpu).curr.filter(|&p| (p as usize) < sim.tasks.len());
        curr_ptr(sim, h, cpu, curr)
    })
}

/// [`curr_ptr`] in its common case, which has nothing to build or
/// register (None: any other case): the view of a task whose registration
/// is current, or an idle task that exists. For a kfunc's fast path
/// (state::with_ctx_fast): it allocates nothing and cannot panic.
#[inline(always)]
fn curr_ptr_known(sim: &mut Sim, h: &HostState, cpu: u32, curr: Option<u32>) -> Option<*mut TaskStructC> {
    match curr {
        Some(p) => h.task_ptr_known(sim, p),
        None => h.inner.try_borrow_mut().ok()?.kobjs.idle_ptr_built(sim, cpu),
    }
}

pub(super) extern "C" fn scx_bpf_cpu_curr(cpu: i32) -> *mut TaskStructC {
    // A CPU of the machine (scx_lavd asks for each CPU it looks at, several
    // times a callback): the kfunc, and the answer's pointer when it needs
    // no more than a look (anything else takes the full path for the
    // pointer only, the kfunc having run).
    let fast = with_ctx_fast(|sim, h| {
        if cpu < 0 || cpu as usize >= sim.nr_cpus() {
            return None;
        }
        Some(match k::scx_bpf_cpu_curr(sim, cpu) {
            Some(curr) => curr_ptr_known(sim, h, cpu as u32, curr).ok_or(curr),
            None => Ok(std::ptr::null_mut()),
        })
    });
    match fast {
        Some(Ok(c)) => c,
        Some(Err(curr)) => curr_full(cpu as u32, curr),
        None => cpu_curr_full(cpu),
    }
}

#[inline(never)]
extern "C" fn cpu_curr_full(cpu: i32) -> *mut TaskStructC {
    with_ctx(|sim, h| match k::scx_bpf_cpu_curr(sim, cpu) {
        Some(curr) => curr_ptr(sim, h, cpu as u32, curr),
        None => std::ptr::null_mut(),
    })
}

/// The pointer for `curr` (CPU `cpu`'s running task, None: idle) that a
/// fast path could not answer.
#[inline(never)]
fn curr_full(cpu: u32, curr: Option<u32>) -> *mut TaskStructC {
    with_ctx(|sim, h| curr_ptr(sim, h, cpu, curr))
}

fn rq_view(sim: &mut Sim, h: &HostState, cpu: u32, curr: Option<u32>) -> *mut RqC {
    let c = curr_ptr(sim, h, cpu, curr);
    h.inner.borrow_mut().kobjs.rq(sim, cpu, c)
}

pub(super) extern "C" fn scx_bpf_cpu_rq(cpu: i32) -> *mut RqC {
    with_ctx(|sim, h| match k::scx_bpf_cpu_curr(sim, cpu) {
        Some(curr) => rq_view(sim, h, cpu as u32, curr),
        None => std::ptr::null_mut(),
    })
}

pub(super) extern "C" fn scx_bpf_locked_rq() -> *mut RqC {
    with_ctx(|sim, h| match k::scx_bpf_locked_rq(sim) {
        Some(cpu) => {
            let curr = sim.rq(cpu).curr.filter(|&p| (p as usize) < sim.tasks.len());
            rq_view(sim, h, cpu, curr)
        }
        None => std::ptr::null_mut(),
    })
}

/// bpf_per_cpu_ptr(&runqueues, cpu): NULL past the last CPU, no error.
pub(super) extern "C" fn schedlab_percpu_rq(cpu: u32) -> *mut RqC {
    // A CPU of the machine whose views exist (scx_lavd asks for several
    // CPUs a callback): the refreshed view without catch_unwind (anything
    // else takes the full path, which does the same and more).
    let fast = with_ctx_fast(|sim, h| {
        if cpu as usize >= sim.nr_cpus() {
            return None;
        }
        let curr = sim.rq(cpu).curr.filter(|&p| (p as usize) < sim.tasks.len());
        let c = curr_ptr_known(sim, h, cpu, curr)?;
        h.inner.try_borrow_mut().ok()?.kobjs.rq_built(sim, cpu, c)
    });
    fast.unwrap_or_else(|| percpu_rq_full(cpu))
}

#[inline(never)]
extern "C" fn percpu_rq_full(cpu: u32) -> *mut RqC {
    with_ctx(|sim, h| {
        if cpu as usize >= sim.nr_cpus() {
            return std::ptr::null_mut();
        }
        let curr = sim.rq(cpu).curr.filter(|&p| (p as usize) < sim.tasks.len());
        rq_view(sim, h, cpu, curr)
    })
}

/// bpf_this_cpu_ptr(&__preempt_count): the current context's count.
pub(super) extern "C" fn schedlab_preempt_count() -> *mut c_void {
    with_ctx(|sim, h| h.inner.borrow_mut().kobjs.preempt_count(sim))
}

/// The CPU running the current op or event, for per-CPU variables.
pub(super) extern "C" fn schedlab_this_cpu() -> u32 {
    with_ctx(|sim, _| k::bpf_get_smp_processor_id(sim))
}

/// Task group `g`'s `struct cgroup`, created on first use.
pub(super) fn cgroup_ptr(sim: &mut Sim, h: &HostState, g: u32) -> *mut CgroupC {
    let mut i = h.inner.borrow_mut();
    if let Some(p) = i.cgroups.ptr(g) {
        i.cgroups.sync_tg(sim, g);
        return p;
    }
    match i.cgroups.ensure(sim) {
        Ok(()) => {
            i.cgroups.sync_tg(sim, g);
            i.cgroups.ptr(g).unwrap_or(std::ptr::null_mut())
        }
        Err(e) => {
            drop(i);
            bad(sim, e);
            std::ptr::null_mut()
        }
    }
}

/// The task group of a cgroup pointer from C, or an ejection naming `what`.
fn cgroup_of(sim: &mut Sim, h: &HostState, cg: *mut CgroupC, what: &str) -> Option<u32> {
    let g = h.inner.borrow().cgroups.group_of(cg as usize);
    if g.is_none() {
        bad(sim, format!("{what}: invalid cgroup pointer {:#x}", cg as usize));
    }
    g
}

fn cgroup_ok(sim: &mut Sim, h: &HostState, cg: *mut CgroupC, what: &str) -> bool {
    cgroup_of(sim, h, cg, what).is_some()
}

/// The task's cgroup (its task group's), acquired; an idle task is in the root.
pub(super) extern "C" fn scx_bpf_task_cgroup(p: *mut TaskStructC) -> *mut CgroupC {
    with_ctx(|sim, h| match h.who(sim, p, "scx_bpf_task_cgroup") {
        Some(Who::Task(t)) => {
            let g = sim.task(t).cgrp;
            cgroup_ptr(sim, h, g)
        }
        Some(Who::Idle(_)) => cgroup_ptr(sim, h, schedlab::sched::cgroup::ROOT_TG),
        None => std::ptr::null_mut(),
    })
}

/// Cgroups never go away in the simulator: acquiring only checks the pointer.
pub(super) extern "C" fn bpf_cgroup_acquire(cg: *mut CgroupC) -> *mut CgroupC {
    with_ctx(|sim, h| if cgroup_ok(sim, h, cg, "bpf_cgroup_acquire") { cg } else { std::ptr::null_mut() })
}

pub(super) extern "C" fn bpf_cgroup_release(cg: *mut CgroupC) {
    with_ctx(|sim, h| {
        cgroup_ok(sim, h, cg, "bpf_cgroup_release");
    })
}

/// The ancestor at `level` (the root is level 0, the cgroup itself its own
/// level), acquired; NULL for a level outside 0..=cgrp->level.
pub(super) extern "C" fn bpf_cgroup_ancestor(cg: *mut CgroupC, level: i32) -> *mut CgroupC {
    with_ctx(|sim, h| {
        let Some(g) = cgroup_of(sim, h, cg, "bpf_cgroup_ancestor") else { return std::ptr::null_mut() };
        let a = h.inner.borrow().cgroups.ancestor(g, level);
        match a {
            Some(a) => cgroup_ptr(sim, h, a),
            None => std::ptr::null_mut(),
        }
    })
}

/// The cgroup with id `id` (kn->id), acquired; NULL if there is none.
pub(super) extern "C" fn bpf_cgroup_from_id(id: u64) -> *mut CgroupC {
    with_ctx(|sim, h| {
        let made = h.inner.borrow_mut().cgroups.ensure(sim);
        if let Err(e) = made {
            bad(sim, e);
            return std::ptr::null_mut();
        }
        let g = h.inner.borrow().cgroups.group_with_id(id);
        match g {
            Some(g) => cgroup_ptr(sim, h, g),
            None => std::ptr::null_mut(),
        }
    })
}

/// The css after `pos` (NULL: the first) in a bpf_iter_css walk from
/// `start` in `order` (BPF_CGROUP_ITER_*), over the simulator's tree.
pub(super) extern "C" fn schedlab_css_next(start: *mut CssC, pos: *mut CssC, order: u64) -> *mut CssC {
    with_ctx(|sim, h| {
        // A css is its cgroup's `self`, at the same address.
        let Some(s) = cgroup_of(sim, h, start.cast(), "bpf_iter_css_next") else { return std::ptr::null_mut() };
        let walk = h.inner.borrow().cgroups.walk(sim, s, order);
        let next = if pos.is_null() {
            walk.first().copied()
        } else {
            let Some(p) = cgroup_of(sim, h, pos.cast(), "bpf_iter_css_next") else { return std::ptr::null_mut() };
            walk.iter().position(|&g| g == p).and_then(|i| walk.get(i + 1).copied())
        };
        next.map_or(std::ptr::null_mut(), |g| cgroup_ptr(sim, h, g).cast())
    })
}

fn storage_get(map: *mut c_void, owner: Option<u64>, value: *mut c_void, flags: u64, kind: MapKind, what: &str) -> *mut c_void {
    with_ctx(|sim, h| {
        let Some(i) = map_of(sim, h, map, &[kind], what) else { return std::ptr::null_mut() };
        let Some(owner) = owner else { return std::ptr::null_mut() };
        let vs = h.inner.borrow().maps[i].def.value_size as usize;
        // SAFETY: BPF passes NULL or a value of the map's value size.
        let init = (!value.is_null()).then(|| unsafe { std::slice::from_raw_parts(value.cast::<u8>(), vs) });
        let r = h.inner.borrow_mut().maps[i].storage_get(owner, init, flags);
        match r {
            Ok(v) => v.cast(),
            Err(e) => {
                bad(sim, format!("{what}: invalid argument ({e})"));
                std::ptr::null_mut()
            }
        }
    })
}

fn storage_delete(map: *mut c_void, owner: Option<u64>, kind: MapKind, what: &str) -> i64 {
    with_ctx(|sim, h| {
        let Some(i) = map_of(sim, h, map, &[kind], what) else { return -EINVAL };
        let Some(owner) = owner else { return -EINVAL };
        h.hold_call_memory();
        let mut inner = h.inner.borrow_mut();
        let inner = &mut *inner;
        inner.maps[i].storage_delete(owner, &mut inner.grave)
    })
}

fn cgroup_owner(cg: *mut CgroupC, what: &str) -> Option<u64> {
    let ok = with_ctx(|sim, h| cgroup_ok(sim, h, cg, what));
    ok.then_some(cg as u64)
}

pub(super) extern "C" fn bpf_cgrp_storage_get(map: *mut c_void, cg: *mut CgroupC, value: *mut c_void, flags: u64) -> *mut c_void {
    let owner = cgroup_owner(cg, "bpf_cgrp_storage_get");
    storage_get(map, owner, value, flags, MapKind::CgrpStorage, "bpf_cgrp_storage_get")
}

pub(super) extern "C" fn bpf_cgrp_storage_delete(map: *mut c_void, cg: *mut CgroupC) -> i64 {
    let owner = cgroup_owner(cg, "bpf_cgrp_storage_delete");
    storage_delete(map, owner, MapKind::CgrpStorage, "bpf_cgrp_storage_delete")
}

/// No inodes are simulated: any inode pointer BPF obtained is its own
/// owner key; NULL gets NULL, as in the kernel.
pub(super) extern "C" fn bpf_inode_storage_get(map: *mut c_void, inode: *mut c_void, value: *mut c_void, flags: u64) -> *mut c_void {
    let owner = (!inode.is_null()).then_some(inode as u64);
    storage_get(map, owner, value, flags, MapKind::InodeStorage, "bpf_inode_storage_get")
}

pub(super) extern "C" fn bpf_inode_storage_delete(map: *mut c_void, inode: *mut c_void) -> i64 {
    let owner = (!inode.is_null()).then_some(inode as u64);
    storage_delete(map, owner, MapKind::InodeStorage, "bpf_inode_storage_delete")
}

pub(super) extern "C" fn bpf_ringbuf_reserve(map: *mut c_void, size: u64, flags: u64) -> *mut c_void {
    with_ctx(|sim, h| {
        let Some(i) = map_of(sim, h, map, &[MapKind::Ringbuf], "bpf_ringbuf_reserve") else {
            return std::ptr::null_mut();
        };
        if flags != 0 {
            return std::ptr::null_mut();
        }
        let mut inner = h.inner.borrow_mut();
        inner.maps[i].ring().and_then(|r| r.reserve(size)).map_or(std::ptr::null_mut(), |p| p.cast())
    })
}

fn commit(data: *mut c_void, flags: u64, discard: bool) {
    with_ctx(|sim, h| {
        let what = if discard { "bpf_ringbuf_discard" } else { "bpf_ringbuf_submit" };
        if flags & !RB_WAKEUP_FLAGS != 0 {
            bad(sim, format!("{what}: invalid flags {flags:#x}"));
        }
        let done = h.inner.borrow_mut().maps.iter_mut().any(|m| {
            m.def.kind == MapKind::Ringbuf && m.ring().is_some_and(|r| r.commit(data as usize, discard))
        });
        if !done {
            bad(sim, format!("{what}: {:#x} is not a reserved ring buffer record", data as usize));
        }
    })
}

pub(super) extern "C" fn bpf_ringbuf_submit(data: *mut c_void, flags: u64) {
    commit(data, flags, false)
}

pub(super) extern "C" fn bpf_ringbuf_discard(data: *mut c_void, flags: u64) {
    commit(data, flags, true)
}

pub(super) extern "C" fn bpf_ringbuf_output(map: *mut c_void, data: *const c_void, size: u64, flags: u64) -> i64 {
    with_ctx(|sim, h| {
        let Some(i) = map_of(sim, h, map, &[MapKind::Ringbuf], "bpf_ringbuf_output") else { return -EINVAL };
        if flags & !RB_WAKEUP_FLAGS != 0 {
            return -EINVAL;
        }
        if data.is_null() && size > 0 {
            bad(sim, "bpf_ringbuf_output: NULL data".into());
            return -EINVAL;
        }
        let mut inner = h.inner.borrow_mut();
        let Some(r) = inner.maps[i].ring() else { return -EINVAL };
        let Some(p) = r.reserve(size) else { return -EAGAIN };
        // SAFETY: BPF passes `size` readable bytes; reserve() made room for them.
        unsafe { std::ptr::copy_nonoverlapping(data.cast::<u8>(), p, size as usize) };
        r.commit(p as usize, false);
        0
    })
}

pub(super) extern "C" fn bpf_ringbuf_query(map: *mut c_void, flags: u64) -> u64 {
    with_ctx(|sim, h| {
        let kinds = [MapKind::Ringbuf, MapKind::UserRingbuf];
        let Some(i) = map_of(sim, h, map, &kinds, "bpf_ringbuf_query") else { return 0 };
        h.inner.borrow_mut().maps[i].ring().map_or(0, |r| r.query(flags))
    })
}

/// The oldest record of a USER_RINGBUF for bpf_user_ringbuf_drain(): its
/// length, with its address in `*data`; -ENODATA when empty.
pub(super) extern "C" fn schedlab_user_ringbuf_peek(map: *mut c_void, data: *mut *mut c_void) -> i64 {
    with_ctx(|sim, h| {
        let what = "bpf_user_ringbuf_drain";
        let Some(i) = map_of(sim, h, map, &[MapKind::UserRingbuf], what) else { return -EINVAL };
        let mut inner = h.inner.borrow_mut();
        match inner.maps[i].ring().and_then(|r| r.peek()) {
            Some((p, len)) => {
                // SAFETY: the runtime passes the address of its local pointer.
                unsafe { *data = p.cast() };
                len as i64
            }
            None => -ENODATA,
        }
    })
}

/// Releases the record schedlab_user_ringbuf_peek() returned.
pub(super) extern "C" fn schedlab_user_ringbuf_release(map: *mut c_void) {
    with_ctx(|sim, h| {
        let Some(i) = map_of(sim, h, map, &[MapKind::UserRingbuf], "bpf_user_ringbuf_drain") else { return };
        if let Some(r) = h.inner.borrow_mut().maps[i].ring() {
            r.consume(1);
        }
    })
}

pub(super) extern "C" fn bpf_arena_alloc_pages(map: *mut c_void, addr: *mut c_void, cnt: u32, node: i32, flags: u64) -> *mut c_void {
    with_ctx(|sim, h| {
        let Some(i) = map_of(sim, h, map, &[MapKind::Arena], "bpf_arena_alloc_pages") else {
            return std::ptr::null_mut();
        };
        if node != -1 && (node < 0 || node as u32 >= k::scx_bpf_nr_node_ids(sim)) {
            return std::ptr::null_mut();
        }
        let mut inner = h.inner.borrow_mut();
        inner.maps[i].arena().and_then(|a| a.alloc(addr as usize, cnt, flags)).map_or(std::ptr::null_mut(), |p| p as *mut c_void)
    })
}

pub(super) extern "C" fn bpf_arena_free_pages(map: *mut c_void, ptr: *mut c_void, cnt: u32) {
    with_ctx(|sim, h| {
        let Some(i) = map_of(sim, h, map, &[MapKind::Arena], "bpf_arena_free_pages") else { return };
        if let Some(a) = h.inner.borrow_mut().maps[i].arena() {
            a.free(ptr as usize, cnt);
        }
    })
}

pub(super) extern "C" fn bpf_arena_reserve_pages(map: *mut c_void, ptr: *mut c_void, cnt: u32) -> i32 {
    with_ctx(|sim, h| {
        let Some(i) = map_of(sim, h, map, &[MapKind::Arena], "bpf_arena_reserve_pages") else { return -22 };
        h.inner.borrow_mut().maps[i].arena().map_or(-22, |a| a.reserve(ptr as usize, cnt) as i32)
    })
}

/// CPU `cpu`'s busy time so far, the running task's current stretch included.
pub(super) fn cpu_busy_ns(sim: &Sim, cpu: u32) -> u64 {
    let rq = sim.rq(cpu);
    let running = if rq.curr.is_some() { sim.now().saturating_sub(rq.busy_since) } else { 0 };
    rq.stats.busy_ns + running
}

pub(super) extern "C" fn bpf_perf_event_read_value(map: *mut c_void, flags: u64, buf: *mut PerfValueC, size: u32) -> i64 {
    with_ctx(|sim, h| {
        let what = "bpf_perf_event_read_value";
        let Some(i) = map_of(sim, h, map, &[MapKind::PerfEventArray], what) else { return -EINVAL };
        if buf.is_null() || size as usize != std::mem::size_of::<PerfValueC>() || flags & !0xffff_ffff != 0 {
            if !buf.is_null() && size as usize >= std::mem::size_of::<PerfValueC>() {
                // SAFETY: BPF passes a buffer of `size` bytes.
                unsafe { *buf = PerfValueC::default() };
            }
            return -EINVAL;
        }
        let this = k::bpf_get_smp_processor_id(sim);
        let idx = if flags == 0xffff_ffff { this } else { flags as u32 };
        let slot = {
            let mut inner = h.inner.borrow_mut();
            let slots = inner.maps[i].perf_slots();
            match slots.map(|s| s.get(idx as usize).copied()) {
                Some(Some(s)) => Ok(s.event),
                _ => Err(-E2BIG),
            }
        };
        let r = match slot {
            Err(e) => Err(e),
            Ok(None) => Err(-ENOENT),
            Ok(Some(ev)) if ev.cpu != this => Err(-EINVAL),
            Ok(Some(ev)) => {
                let t = sim.now().saturating_sub(ev.t0);
                Ok(PerfValueC { counter: ev.count(cpu_busy_ns(sim, this)), enabled: t, running: t })
            }
        };
        // SAFETY: checked non-NULL and of the struct's size above.
        let out = unsafe { &mut *buf };
        match r {
            Ok(v) => {
                *out = v;
                0
            }
            Err(e) => {
                *out = PerfValueC::default();
                e
            }
        }
    })
}
