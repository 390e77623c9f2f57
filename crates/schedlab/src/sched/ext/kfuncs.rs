//! The sched_ext kfuncs, with the kernel's names and argument rules
//! (kernel/sched/ext.c, ext_idle.c). The host layer's `extern "C"` entry
//! points convert pointers and call these; Rust schedulers call them
//! directly. A rule violation does what the kernel does: `scx_error()`,
//! which ejects the scheduler, and a harmless return value.

use crate::engine::{Cpu, TaskId};
use crate::sched::ext::abi::{CpumaskC, DsqIterC};
use crate::sched::sim::Sim;

use crate::sched::ext::dsq::DsqKind;
use crate::sched::ext::ops::{dsq_id, enq_flags, kick_flags, ops_flags, pick_idle_flags, ExitKind, Op};
use crate::sched::ext::abi::{TaskStructC, DSQ_ITER_REV};
use crate::sched::ext::OpsState;
use crate::sched::task::{ClassId, TaskState};

/// -EINVAL, -ENOENT, -EEXIST, -EBUSY, -ENODEV as kfuncs return them.
pub const EINVAL: i32 = -22;
/// -ENOENT: no such DSQ or entry.
pub const ENOENT: i32 = -2;
/// -EEXIST: the DSQ id is taken.
pub const EEXIST: i32 = -17;
/// -EBUSY: the resource is in use.
pub const EBUSY: i32 = -16;
/// -ENODEV: the node or device does not exist.
pub const ENODEV: i32 = -19;

/// Internal iterator flags, above the user-visible ones.
const ITER_HAS_SLICE: u64 = 1 << 30;
const ITER_HAS_VTIME: u64 = 1 << 31;
const ITER_STARTED: u64 = 1 << 32;

/// Per-call accounting shared by every kfunc.
#[inline]
fn kf(sim: &mut Sim) {
    sim.scx.stats.kfunc_calls += 1;
    sim.scx.cost_acc += sim.costs.scx_kfunc_ns;
}

/// The innermost op being executed, if any.
fn current_op(sim: &Sim) -> Option<Op> {
    sim.scx.current_frame().map(|f| f.op)
}

/// Whether any frame on the op stack is `op` (kfuncs allowed "from" an op
/// stay allowed in what it calls).
#[inline]
fn in_op(sim: &Sim, ops: &[Op]) -> bool {
    sim.scx.frame_ops & Op::mask(ops) != 0
}

/// The kf_mask check of kernels before 7.1 (7.1 rejects such programs at
/// load time with the same matrix; we can only check at run time).
#[inline]
fn allowed(sim: &mut Sim, name: &str, ops: &[Op]) -> bool {
    in_op(sim, ops) || disallowed(sim, name)
}

/// A kfunc called from an op that may not call it: the scheduler errors out.
#[cold]
fn disallowed(sim: &mut Sim, name: &str) -> bool {
    let from = current_op(sim).map_or("a non-scheduler context", |o| o.name());
    sim.scx_error(format!("{name}() called from ops.{from}, which may not call it"));
    false
}

/// Inlined (the kfuncs it serves are inlined into the host's shims);
/// the error is out of line.
#[inline]
fn valid_cpu(sim: &mut Sim, cpu: i32, what: &str) -> Option<Cpu> {
    if cpu >= 0 && (cpu as usize) < sim.nr_cpus() {
        Some(cpu as Cpu)
    } else {
        invalid_cpu(sim, cpu, what)
    }
}

#[cold]
#[inline(never)]
fn invalid_cpu(sim: &mut Sim, cpu: i32, what: &str) -> Option<Cpu> {
    sim.scx_error(format!("invalid CPU {cpu}{what}"));
    None
}

/// The CPU the calling op runs on (smp_processor_id()).
#[inline]
fn this_cpu(sim: &Sim) -> Cpu {
    sim.scx.current_frame().map_or(sim.this_cpu, |f| f.cpu)
}

/// The stable C `task_struct` of a task.
#[inline]
pub fn task_c(sim: &mut Sim, p: TaskId) -> *mut TaskStructC {
    &mut *sim.task_mut(p).scx.c
}

/// [`task_c`] if the task's view is built (it is for every task once a
/// scheduler can run), None otherwise: the host's fast path, which has
/// nothing to call.
#[inline]
pub fn task_c_built(sim: &mut Sim, p: TaskId) -> Option<*mut TaskStructC> {
    sim.task_mut(p).scx.c.built_mut().map(|c| c as *mut TaskStructC)
}

/// The task a C `task_struct` pointer stands for: the host reads the
/// pointer's `schedlab_id` and this confirms the pointer is the one we
/// handed out for that task.
pub fn task_checked(sim: &Sim, c: *const TaskStructC, id: u32) -> Option<TaskId> {
    let t = &sim.tasks.get(id as usize)?.scx;
    std::ptr::eq(&*t.c, c).then_some(id)
}

/// scx_bpf_select_cpu_dfl(): the default idle-CPU search; returns the CPU and
/// whether it was idle (and is now claimed).
#[inline]
pub fn scx_bpf_select_cpu_dfl(sim: &mut Sim, p: TaskId, prev_cpu: i32, wake_flags: u64) -> (i32, bool) {
    kf(sim);
    if !allowed(sim, "scx_bpf_select_cpu_dfl", &[Op::SelectCpu, Op::Enqueue]) {
        return (prev_cpu, false);
    }
    let Some(prev) = valid_cpu(sim, prev_cpu, "") else { return (prev_cpu, false) };
    if !sim.scx.builtin_idle {
        sim.scx_error("built-in idle tracking is disabled".into());
        return (prev_cpu, false);
    }
    let (cpu, idle) = sim.scx_select_cpu_dfl(p, prev, wake_flags, None, 0);
    (cpu as i32, idle)
}

/// scx_bpf_select_cpu_and(): the default search within `cpus_allowed`;
/// a negative errno if no idle CPU was found.
pub fn scx_bpf_select_cpu_and(sim: &mut Sim, p: TaskId, prev_cpu: i32, wake_flags: u64, cpus_allowed: &CpumaskC, flags: u64) -> i32 {
    kf(sim);
    if !allowed(sim, "scx_bpf_select_cpu_and", &[Op::SelectCpu, Op::Enqueue]) {
        return EINVAL;
    }
    let Some(prev) = valid_cpu(sim, prev_cpu, "") else { return EINVAL };
    if !sim.scx.builtin_idle {
        sim.scx_error("built-in idle tracking is disabled".into());
        return EBUSY;
    }
    if !cpus_allowed.intersects(&sim.task(p).cpus_allowed) {
        return EBUSY;
    }
    // The mask is copied only for a search that reads it: with nothing
    // idle the default selection answers prev, unclaimed, either way.
    let found = if sim.scx_select_cpu_dfl_finds_none() {
        sim.scx_select_cpu_dfl(p, prev, wake_flags, None, flags)
    } else {
        let mask = cpus_allowed.to_mask(sim.nr_cpus());
        sim.scx_select_cpu_dfl(p, prev, wake_flags, Some(&mask), flags)
    };
    match found {
        (cpu, true) => cpu as i32,
        _ => EBUSY,
    }
}

/// Checks shared by every insert and move: the flags a scheduler may pass,
/// and SCX_ENQ_IMMED only into local DSQs (scx_vet_enq_flags, 7.1).
/// Inlined into every insert and move; the errors are out of line.
#[inline]
fn vet_enq_flags(sim: &mut Sim, id: u64, flags: u64) -> Option<u64> {
    let is_local = id == dsq_id::LOCAL || id & dsq_id::LOCAL_ON == dsq_id::LOCAL_ON;
    if flags & enq_flags::INTERNAL_MASK != 0 || (flags & enq_flags::IMMED != 0 && !is_local) {
        return bad_enq_flags(sim, id, flags);
    }
    if is_local && sim.scx.ops_flags & ops_flags::ALWAYS_ENQ_IMMED != 0 {
        return Some(flags | enq_flags::IMMED);
    }
    Some(flags)
}

/// [`vet_enq_flags`]' errors, in its order.
#[cold]
#[inline(never)]
fn bad_enq_flags(sim: &mut Sim, id: u64, flags: u64) -> Option<u64> {
    if flags & enq_flags::INTERNAL_MASK != 0 {
        sim.scx_error(format!("invalid enq_flags 0x{flags:x}"));
    } else {
        sim.scx_error(format!("SCX_ENQ_IMMED on a non-local DSQ 0x{id:x}"));
    }
    None
}

/// scx_dsq_insert_commit(): a verdict for the task being enqueued is a
/// direct dispatch; from ops.dispatch it goes into the dispatch buffer.
/// Inlined into the inserts; the errors are out of line.
#[inline]
fn insert_commit(sim: &mut Sim, p: TaskId, id: u64, flags: u64) -> bool {
    let frame = sim.scx.current_frame().copied();
    if let Some(f) = frame.filter(|f| matches!(f.op, Op::SelectCpu | Op::Enqueue)) {
        if f.task != Some(p) || sim.task(p).scx.ddsp.is_some() {
            bad_direct_dispatch(sim, f.task, p);
            return false;
        }
        sim.task_mut(p).scx.ddsp = Some((id, flags));
        let c = sim.task_mut(p).scx.cx_mut();
        c.ddsp_dsq_id = id;
        c.ddsp_enq_flags = flags;
        return true;
    }
    if sim.scx.dsp_buf.len() >= sim.scx.dsp_max_batch as usize {
        dispatch_overflow(sim);
        return false;
    }
    let qseq = match sim.task(p).scx.ops_state {
        OpsState::Queued { qseq } => qseq,
        _ => 0,
    };
    sim.scx.dsp_buf.push(crate::sched::ext::DspEntry { task: p, qseq, dsq_id: id, enq_flags: flags });
    sim.scx.dsp_nr_tasks += 1;
    true
}

/// A direct dispatch of a task other than the one being scheduled, or of
/// one already dispatched.
#[cold]
#[inline(never)]
fn bad_direct_dispatch(sim: &mut Sim, task: Option<TaskId>, p: TaskId) {
    if task != Some(p) {
        let (a, b) = (task.map(|t| sim.task_comm(t)).unwrap_or_default(), sim.task_comm(p));
        sim.scx_error(format!("scheduling for {a} but trying to direct-dispatch {b}"));
    } else {
        let comm = sim.task_comm(p);
        sim.scx_error(format!("{comm} already direct-dispatched"));
    }
}

#[cold]
#[inline(never)]
fn dispatch_overflow(sim: &mut Sim) {
    sim.scx_error("dispatch buffer overflow".into());
}

#[inline]
fn set_slice(sim: &mut Sim, p: TaskId, slice: u64) {
    let c = sim.task_mut(p).scx.cx_mut();
    if slice != 0 {
        c.slice = slice;
    } else if c.slice == 0 {
        c.slice = 1;
    }
}

/// scx_bpf_dsq_insert() (scx_bpf_dispatch() before 6.13).
#[inline]
pub fn scx_bpf_dsq_insert(sim: &mut Sim, p: TaskId, dsq_id: u64, slice: u64, enq_flags: u64) -> bool {
    kf(sim);
    if !allowed(sim, "scx_bpf_dsq_insert", &[Op::SelectCpu, Op::Enqueue, Op::Dispatch]) {
        return false;
    }
    let Some(f) = vet_enq_flags(sim, dsq_id, enq_flags) else { return false };
    set_slice(sim, p, slice);
    insert_commit(sim, p, dsq_id, f)
}

/// scx_bpf_dsq_insert_vtime() (scx_bpf_dispatch_vtime() before 6.13).
#[inline]
pub fn scx_bpf_dsq_insert_vtime(sim: &mut Sim, p: TaskId, dsq_id: u64, slice: u64, vtime: u64, enq_flags: u64) -> bool {
    kf(sim);
    if !allowed(sim, "scx_bpf_dsq_insert_vtime", &[Op::SelectCpu, Op::Enqueue, Op::Dispatch]) {
        return false;
    }
    let Some(f) = vet_enq_flags(sim, dsq_id, enq_flags) else { return false };
    set_slice(sim, p, slice);
    sim.task_mut(p).scx.cx_mut().dsq_vtime = vtime;
    insert_commit(sim, p, dsq_id, f | enq_flags::DSQ_PRIQ)
}

/// scx_bpf_dispatch_nr_slots(): room left in the dispatch buffer.
pub fn scx_bpf_dispatch_nr_slots(sim: &mut Sim) -> u32 {
    kf(sim);
    if !allowed(sim, "scx_bpf_dispatch_nr_slots", &[Op::Dispatch]) {
        return 0;
    }
    sim.scx.dsp_max_batch.saturating_sub(sim.scx.dsp_buf.len() as u32)
}

/// scx_bpf_dispatch_cancel(): drop the latest buffered insert.
pub fn scx_bpf_dispatch_cancel(sim: &mut Sim) {
    kf(sim);
    if !allowed(sim, "scx_bpf_dispatch_cancel", &[Op::Dispatch]) {
        return;
    }
    if sim.scx.dsp_buf.pop().is_none() {
        sim.scx_error("dispatch buffer underflow".into());
    }
}

/// scx_bpf_dsq_move_to_local() (scx_bpf_consume() before 6.13): move the
/// first task of a user DSQ that this CPU can run into its local DSQ.
/// `enq_flags` is 7.1's second argument (0 for the older form).
#[inline]
pub fn scx_bpf_dsq_move_to_local(sim: &mut Sim, id: u64, enq_flags: u64) -> bool {
    kf(sim);
    if !allowed(sim, "scx_bpf_dsq_move_to_local", &[Op::Dispatch]) {
        return false;
    }
    let Some(enq_flags) = vet_enq_flags(sim, dsq_id::LOCAL, enq_flags) else { return false };
    let cpu = this_cpu(sim);
    sim.scx_flush_dispatch_buf(cpu);
    let dsq = match sim.scx.user_dsqs.get(&id) {
        Some(&d) if id & dsq_id::BUILTIN == 0 => d,
        _ if id == dsq_id::GLOBAL => sim.scx.global(sim.topo.node_of(cpu as usize) as u32),
        _ => {
            sim.scx_error(format!("invalid DSQ ID 0x{id:016x}"));
            return false;
        }
    };
    if sim.scx_consume_dsq(cpu, dsq, enq_flags) {
        sim.scx.dsp_nr_tasks += 1;
        true
    } else {
        false
    }
}

/// scx_bpf_dsq_move_set_slice(): the slice the next move through `it` gives.
pub fn scx_bpf_dsq_move_set_slice(it: &mut DsqIterC, slice: u64) {
    it.slice = slice;
    it.flags |= ITER_HAS_SLICE;
}

/// scx_bpf_dsq_move_set_vtime(): the vtime the next move through `it` gives.
pub fn scx_bpf_dsq_move_set_vtime(it: &mut DsqIterC, vtime: u64) {
    it.vtime = vtime;
    it.flags |= ITER_HAS_VTIME;
}

fn dsq_move(sim: &mut Sim, it: &mut DsqIterC, p: TaskId, id: u64, flags: u64, vtime: bool) -> bool {
    kf(sim);
    let from = current_op(sim);
    if from.is_some() && !in_op(sim, &[Op::Dispatch]) {
        let name = from.map_or("?", |o| o.name());
        sim.scx_error(format!("scx_bpf_dsq_move() called from ops.{name}, which may not call it"));
        return false;
    }
    if sim.scx_aborting() {
        return false;
    }
    let Some(f) = vet_enq_flags(sim, id, flags) else { return false };
    // Only a task still in the iterated DSQ, queued before the iterator.
    let src = sim.scx.user_dsqs.get(&it.dsq_id).copied();
    match (src, sim.task(p).scx.dsq) {
        (Some(s), Some((d, key))) if s == d && key.1 < it.max_seq => {}
        _ => return false,
    }
    let cpu = this_cpu(sim);
    if it.flags & ITER_HAS_SLICE != 0 {
        sim.task_mut(p).scx.c.scx.slice = it.slice;
    }
    if it.flags & ITER_HAS_VTIME != 0 {
        sim.task_mut(p).scx.c.scx.dsq_vtime = it.vtime;
    }
    it.flags &= !(ITER_HAS_SLICE | ITER_HAS_VTIME);
    sim.scx_dispatch_dequeue(p);
    let dst = sim.scx_find_dsq(cpu, id, p);
    let f = if vtime { f | enq_flags::DSQ_PRIQ } else { f };
    match sim.scx.dsqs[dst as usize].kind {
        DsqKind::Local(target) => sim.scx_dispatch_to_local(target, p, f),
        _ => sim.scx_dispatch_enqueue(dst, p, f),
    }
    if in_op(sim, &[Op::Dispatch]) {
        sim.scx.dsp_nr_tasks += 1;
    }
    true
}

/// scx_bpf_dsq_move() (scx_bpf_dispatch_from_dsq() in 6.12).
pub fn scx_bpf_dsq_move(sim: &mut Sim, it: &mut DsqIterC, p: TaskId, dsq_id: u64, enq_flags: u64) -> bool {
    dsq_move(sim, it, p, dsq_id, enq_flags, false)
}

/// scx_bpf_dsq_move_vtime() (scx_bpf_dispatch_vtime_from_dsq() in 6.12).
pub fn scx_bpf_dsq_move_vtime(sim: &mut Sim, it: &mut DsqIterC, p: TaskId, dsq_id: u64, enq_flags: u64) -> bool {
    dsq_move(sim, it, p, dsq_id, enq_flags, true)
}

/// scx_bpf_reenqueue_local(): every task in this CPU's local DSQ goes back
/// through ops.enqueue() now; returns how many (the legacy, synchronous form).
pub fn scx_bpf_reenqueue_local(sim: &mut Sim) -> u32 {
    kf(sim);
    if !allowed(sim, "scx_bpf_reenqueue_local", &[Op::CpuRelease, Op::Dispatch]) {
        return 0;
    }
    let cpu = this_cpu(sim);
    sim.scx_reenq_local(cpu, crate::sched::ext::ops::REENQ_ANY)
}

/// scx_bpf_dsq_reenq() (7.1): asynchronous reenqueue of a local or user DSQ.
pub fn scx_bpf_dsq_reenq(sim: &mut Sim, id: u64, reenq_flags: u64) {
    kf(sim);
    if reenq_flags & !crate::sched::ext::ops::REENQ_ANY != 0 {
        sim.scx_error(format!("invalid SCX_REENQ flags 0x{reenq_flags:x}"));
        return;
    }
    let cpu = if id == dsq_id::LOCAL {
        this_cpu(sim)
    } else if id & dsq_id::LOCAL_ON == dsq_id::LOCAL_ON {
        let Some(c) = valid_cpu(sim, (id & dsq_id::LOCAL_CPU_MASK) as i32, "") else { return };
        c
    } else if let Some(&dsq) = sim.scx.user_dsqs.get(&id) {
        // A user DSQ: reenqueued from this CPU's deferred work.
        let cpu = this_cpu(sim);
        sim.scx_schedule_reenq_user(cpu, dsq, crate::sched::ext::ops::REENQ_ANY);
        return;
    } else if id & dsq_id::BUILTIN == 0 {
        sim.scx_error(format!("non-existent DSQ 0x{id:x} for reenq"));
        return;
    } else {
        sim.scx_error(format!("DSQ 0x{id:x} not allowed for reenq"));
        return;
    };
    sim.scx_schedule_reenq_local(cpu, crate::sched::ext::ops::REENQ_ANY);
}

/// scx_bpf_create_dsq().
pub fn scx_bpf_create_dsq(sim: &mut Sim, id: u64, node: i32) -> i32 {
    kf(sim);
    if id & dsq_id::BUILTIN != 0 || node >= sim.topo.nr_nodes() as i32 || (node < 0 && node != -1) {
        return EINVAL;
    }
    if sim.scx.user_dsqs.contains_key(&id) {
        return EEXIST;
    }
    let idx = sim.scx.dsqs.len() as u32;
    sim.scx.dsqs.push(crate::sched::ext::dsq::Dsq::new(id, DsqKind::User, node.max(0) as u32));
    sim.scx.user_dsqs.insert(id, idx);
    0
}

/// scx_bpf_destroy_dsq().
pub fn scx_bpf_destroy_dsq(sim: &mut Sim, id: u64) {
    kf(sim);
    let Some(&idx) = sim.scx.user_dsqs.get(&id) else { return };
    let nr = sim.scx.dsqs[idx as usize].nr();
    if nr > 0 {
        sim.scx_error(format!("attempting to destroy in-use dsq 0x{id:016x} (nr={nr})"));
        return;
    }
    sim.scx.user_dsqs.remove(&id);
    sim.scx.dsqs[idx as usize].destroyed = true;
}

/// scx_bpf_dsq_nr_queued(): LOCAL, LOCAL_ON|cpu or a user DSQ.
/// Always inlined: the host's fast path (scx_bpfland asks several times a
/// callback) has tested the id's kind and CPU already, and inlined the
/// tests fold into its own.
#[inline(always)]
pub fn scx_bpf_dsq_nr_queued(sim: &mut Sim, id: u64) -> i32 {
    kf(sim);
    if id == dsq_id::LOCAL {
        let c = this_cpu(sim);
        return sim.scx.dsqs[sim.scx.local(c) as usize].nr() as i32;
    }
    if id & dsq_id::LOCAL_ON == dsq_id::LOCAL_ON {
        let Some(c) = valid_cpu(sim, (id & dsq_id::LOCAL_CPU_MASK) as i32, "") else { return ENOENT };
        return sim.scx.dsqs[sim.scx.local(c) as usize].nr() as i32;
    }
    match sim.scx.user_dsqs.get(&id) {
        Some(&d) if id & dsq_id::BUILTIN == 0 => sim.scx.dsqs[d as usize].nr() as i32,
        _ => ENOENT,
    }
}

/// scx_bpf_dsq_peek() (6.19+): the first task of a user DSQ.
#[inline]
pub fn scx_bpf_dsq_peek(sim: &mut Sim, id: u64) -> Option<TaskId> {
    kf(sim);
    let d = match sim.scx.user_dsqs.get(&id) {
        Some(&d) if id & dsq_id::BUILTIN == 0 => d,
        _ => return bad_peek(sim, id),
    };
    sim.scx.dsqs[d as usize].first().map(|(_, p)| p)
}

/// scx_bpf_dsq_peek()'s errors.
#[cold]
#[inline(never)]
fn bad_peek(sim: &mut Sim, id: u64) -> Option<TaskId> {
    if id & dsq_id::BUILTIN != 0 {
        sim.scx_error(format!("peek disallowed on builtin DSQ 0x{id:x}"));
    } else {
        sim.scx_error(format!("peek on non-existent DSQ 0x{id:x}"));
    }
    None
}

/// bpf_iter_scx_dsq_new(): iterate a user DSQ; sees only tasks queued
/// before this call.
pub fn bpf_iter_scx_dsq_new(sim: &mut Sim, it: &mut DsqIterC, id: u64, flags: u64) -> i32 {
    kf(sim);
    *it = DsqIterC::default();
    if flags & !DSQ_ITER_REV != 0 {
        return EINVAL;
    }
    let Some(&d) = sim.scx.user_dsqs.get(&id).filter(|_| id & dsq_id::BUILTIN == 0) else { return ENOENT };
    it.dsq_id = id;
    it.flags = flags;
    it.max_seq = sim.scx.dsqs[d as usize].seq + 1;
    0
}

/// bpf_iter_scx_dsq_next().
pub fn bpf_iter_scx_dsq_next(sim: &mut Sim, it: &mut DsqIterC) -> Option<TaskId> {
    let &d = sim.scx.user_dsqs.get(&it.dsq_id)?;
    let cursor = (it.flags & ITER_STARTED != 0).then_some((it.cursor_key, it.cursor_seq));
    let (key, p) = sim.scx.dsqs[d as usize].next_after(cursor, it.flags & DSQ_ITER_REV != 0, it.max_seq)?;
    it.cursor_key = key.0;
    it.cursor_seq = key.1;
    it.flags |= ITER_STARTED;
    Some(p)
}

/// bpf_iter_scx_dsq_destroy().
pub fn bpf_iter_scx_dsq_destroy(_sim: &mut Sim, it: &mut DsqIterC) {
    *it = DsqIterC::default();
}

/// scx_bpf_kick_cpu(): make `cpu` reschedule (IDLE: only if idle; PREEMPT:
/// end its ext task's slice; WAIT: wait until it has switched).
pub fn scx_bpf_kick_cpu(sim: &mut Sim, cpu: i32, flags: u64) {
    kf(sim);
    let Some(c) = valid_cpu(sim, cpu, "") else { return };
    if sim.scx.bypassing {
        return;
    }
    if flags & kick_flags::IDLE != 0 && flags & (kick_flags::PREEMPT | kick_flags::WAIT) != 0 {
        sim.scx_error("PREEMPT/WAIT cannot be used with SCX_KICK_IDLE".into());
        return;
    }
    if flags & kick_flags::IDLE != 0 && sim.rq(c).curr.is_some() {
        return;
    }
    let saved = sim.this_cpu;
    sim.this_cpu = this_cpu(sim);
    sim.scx_queue_kick(c, flags);
    sim.this_cpu = saved;
}

/// scx_bpf_exit_bstr(): the scheduler unregisters itself (SCX_EXIT_UNREG_BPF).
pub fn scx_bpf_exit(sim: &mut Sim, exit_code: i64, msg: String) {
    kf(sim);
    sim.scx_exit(ExitKind::UnregBpf, exit_code, msg);
}

/// scx_bpf_error_bstr(): the scheduler reports an error (SCX_EXIT_ERROR_BPF).
pub fn scx_bpf_error(sim: &mut Sim, msg: String) {
    kf(sim);
    sim.scx_exit(ExitKind::ErrorBpf, 0, msg);
}

/// scx_bpf_dump_bstr(): text for the debug dump, from ops.dump*() only.
pub fn scx_bpf_dump(sim: &mut Sim, text: &str) {
    kf(sim);
    if !in_op(sim, &[Op::Dump, Op::DumpCpu, Op::DumpTask]) {
        sim.scx_error("scx_bpf_dump() must only be called from ops.dump() and friends".into());
        return;
    }
    sim.scx.dump.push_str(text);
}

/// scx_bpf_cpuperf_cap/cur/set(): all CPUs have full capacity here; the
/// target is recorded but does not change CPU speed.
pub fn scx_bpf_cpuperf_cap(sim: &mut Sim, cpu: i32) -> u32 {
    kf(sim);
    valid_cpu(sim, cpu, "").map_or(0, |_| 1024)
}

/// scx_bpf_cpuperf_cur(): the CPU's performance target (0..SCX_CPUPERF_ONE).
pub fn scx_bpf_cpuperf_cur(sim: &mut Sim, cpu: i32) -> u32 {
    kf(sim);
    valid_cpu(sim, cpu, "").map_or(0, |c| sim.rqs[c as usize].scx.cpuperf)
}

/// scx_bpf_cpuperf_set(): records the CPU's performance target; above SCX_CPUPERF_ONE is an error.
pub fn scx_bpf_cpuperf_set(sim: &mut Sim, cpu: i32, perf: u32) {
    kf(sim);
    let Some(c) = valid_cpu(sim, cpu, "") else { return };
    if perf > 1024 {
        sim.scx_error(format!("Invalid cpuperf target {perf} for CPU {cpu}"));
        return;
    }
    sim.rqs[c as usize].scx.cpuperf = perf;
}

/// scx_bpf_nr_cpu_ids(): the number of possible CPU ids.
pub fn scx_bpf_nr_cpu_ids(sim: &mut Sim) -> u32 {
    kf(sim);
    sim.nr_cpus() as u32
}

/// scx_bpf_nr_node_ids(): the number of NUMA node ids.
pub fn scx_bpf_nr_node_ids(sim: &mut Sim) -> u32 {
    kf(sim);
    sim.topo.nr_nodes() as u32
}

/// scx_bpf_get_possible_cpumask(): every CPU of the machine.
pub fn scx_bpf_get_possible_cpumask(sim: &mut Sim) -> &CpumaskC {
    kf(sim);
    &sim.scx.possible_c
}

/// scx_bpf_get_online_cpumask(): every CPU (hotplug is not modelled, so all are online).
pub fn scx_bpf_get_online_cpumask(sim: &mut Sim) -> &CpumaskC {
    kf(sim);
    &sim.scx.possible_c
}

/// cpu_none_mask: what the idle-mask kfuncs hand out after an error.
static CPU_NONE: CpumaskC = CpumaskC { bits: [0; crate::sched::ext::abi::CPUMASK_WORDS] };

fn idle_mask(sim: &mut Sim, node: Option<i32>, smt: bool) -> &CpumaskC {
    kf(sim);
    let node = match node {
        Some(n) => match validate_node(sim, n) {
            Ok(n) => Some(n),
            Err(_) => return &CPU_NONE,
        },
        None if sim.scx.ops_flags & ops_flags::BUILTIN_IDLE_PER_NODE != 0 => {
            sim.scx_error("SCX_OPS_BUILTIN_IDLE_PER_NODE enabled".into());
            return &CPU_NONE;
        }
        None => None,
    };
    if !sim.scx.builtin_idle {
        sim.scx_error("built-in idle tracking is disabled".into());
        return &CPU_NONE;
    }
    let smt_active = sim.scx.smt_active;
    let (cpu, smtm) = sim.scx_idle_masks_c(node);
    if smt && smt_active {
        smtm
    } else {
        cpu
    }
}

/// scx_bpf_get_idle_cpumask[_node]().
pub fn scx_bpf_get_idle_cpumask(sim: &mut Sim, node: Option<i32>) -> &CpumaskC {
    idle_mask(sim, node, false)
}

/// scx_bpf_get_idle_smtmask[_node](): CPUs whose whole core is idle.
pub fn scx_bpf_get_idle_smtmask(sim: &mut Sim, node: Option<i32>) -> &CpumaskC {
    idle_mask(sim, node, true)
}

/// scx_bpf_test_and_clear_cpu_idle(): claim `cpu` if it is idle.
pub fn scx_bpf_test_and_clear_cpu_idle(sim: &mut Sim, cpu: i32) -> bool {
    kf(sim);
    let Some(c) = valid_cpu(sim, cpu, "") else { return false };
    if !sim.scx.builtin_idle {
        sim.scx_error("built-in idle tracking is disabled".into());
        return false;
    }
    sim.scx_test_and_clear_idle(c)
}

/// validate_node(): the node a `_node` idle kfunc may use, or its errno:
/// per-node idle tracking must be on, NUMA_NO_NODE (-1) is -ENOENT without
/// an error, anything else out of range is an error.
fn validate_node(sim: &mut Sim, node: i32) -> Result<usize, i32> {
    if sim.scx.ops_flags & ops_flags::BUILTIN_IDLE_PER_NODE == 0 {
        sim.scx_error("per-node idle tracking is disabled".into());
        return Err(-95);
    }
    if node == -1 {
        return Err(-2);
    }
    if node < 0 || node as usize >= sim.topo.nr_nodes() {
        sim.scx_error(format!("invalid node {node}"));
        return Err(EINVAL);
    }
    Ok(node as usize)
}

/// The search node of scx_bpf_pick_{idle,any}_cpu[_node](): `Ok(None)` for
/// the global masks (the plain kfunc, which per-node tracking forbids).
fn pick_node(sim: &mut Sim, node: Option<i32>) -> Result<Option<usize>, i32> {
    match node {
        Some(n) => validate_node(sim, n).map(Some),
        None if sim.scx.ops_flags & ops_flags::BUILTIN_IDLE_PER_NODE != 0 => {
            sim.scx_error("per-node idle tracking is enabled".into());
            Err(EBUSY)
        }
        None => Ok(None),
    }
}

/// scx_bpf_pick_idle_cpu[_node](): claim an idle CPU in `cpus_allowed`;
/// the `_node` one starts in `node` and goes on to the others, nearest
/// first, unless SCX_PICK_IDLE_IN_NODE.
pub fn scx_bpf_pick_idle_cpu(sim: &mut Sim, cpus_allowed: &CpumaskC, flags: u64, node: Option<i32>) -> i32 {
    kf(sim);
    let node = match pick_node(sim, node) {
        Ok(n) => n,
        Err(e) => return e,
    };
    if !sim.scx.builtin_idle {
        sim.scx_error("built-in idle tracking is disabled".into());
        return EBUSY;
    }
    let mask = cpus_allowed.to_mask(sim.nr_cpus());
    sim.scx_pick_idle(&mask, flags, node).map_or(EBUSY, |c| c as i32)
}

/// scx_bpf_pick_any_cpu[_node](): an idle CPU if there is one, else any
/// allowed CPU (spread round-robin; in `node` with SCX_PICK_IDLE_IN_NODE).
pub fn scx_bpf_pick_any_cpu(sim: &mut Sim, cpus_allowed: &CpumaskC, flags: u64, node: Option<i32>) -> i32 {
    kf(sim);
    let node = match pick_node(sim, node) {
        Ok(n) => n,
        Err(e) => return e,
    };
    let mut mask = cpus_allowed.to_mask(sim.nr_cpus());
    if sim.scx.builtin_idle {
        if let Some(c) = sim.scx_pick_idle(&mask, flags, node) {
            return c as i32;
        }
    }
    if let Some(n) = node.filter(|_| flags & pick_idle_flags::IN_NODE != 0) {
        mask.and_assign(&sim.node_mask(n));
    }
    let this = this_cpu(sim) as usize;
    let start = (sim.rqs[this].scx.distribute_prev + 1) % sim.nr_cpus();
    match mask.iter_wrap(start).next() {
        Some(c) => {
            sim.rqs[this].scx.distribute_prev = c;
            c as i32
        }
        None => EBUSY,
    }
}

/// scx_bpf_task_running(): `p` is the current task of its CPU.
pub fn scx_bpf_task_running(sim: &mut Sim, p: TaskId) -> bool {
    kf(sim);
    sim.rq(sim.task(p).cpu).curr == Some(p)
}

/// scx_bpf_task_cpu(): the CPU whose runqueue `p` belongs to.
#[inline]
pub fn scx_bpf_task_cpu(sim: &mut Sim, p: TaskId) -> i32 {
    kf(sim);
    sim.task(p).cpu as i32
}

/// scx_bpf_cpu_node(): the NUMA node of `cpu`.
#[inline]
pub fn scx_bpf_cpu_node(sim: &mut Sim, cpu: i32) -> i32 {
    kf(sim);
    valid_cpu(sim, cpu, "").map_or(0, |c| sim.topo.node_of(c as usize) as i32)
}

/// The uptime BPF clocks show when the simulation starts. A scheduler
/// loads long after its machine booted, and schedulers compare the clock
/// with zero-initialised state (scx_pair: `started_at + pair_batch_dur_ns`
/// is long past at its first dispatch, so it starts on the first cgroup it
/// finds); a clock that starts at 0 makes such state look fresh. The
/// simulator's own time (traces, results) still starts at 0.
pub const BPF_CLOCK_BOOT_NS: u64 = 60 * crate::engine::time::NSEC_PER_SEC;

/// A simulator time as BPF's clocks show it.
pub fn bpf_time(ns: u64) -> u64 {
    ns + BPF_CLOCK_BOOT_NS
}

/// A time on BPF's clocks (a `BPF_F_TIMER_ABS` expiry) as simulator time.
pub fn sim_time(bpf_ns: u64) -> u64 {
    bpf_ns.saturating_sub(BPF_CLOCK_BOOT_NS)
}

/// scx_bpf_now(): the simulated clock, as BPF sees it.
#[inline]
pub fn scx_bpf_now(sim: &mut Sim) -> u64 {
    kf(sim);
    bpf_time(clock(sim))
}

/// bpf_ktime_get_ns(): the simulated clock, as BPF sees it.
#[inline]
pub fn bpf_ktime_get_ns(sim: &mut Sim) -> u64 {
    bpf_time(clock(sim))
}

/// The clock BPF reads: the event's time plus the overhead the operation in
/// progress has spent so far, never behind what any CPU read before. The
/// kernel's clock is monotonic across CPUs; here an operation's overhead is
/// charged to its CPU after the event, while other CPUs' events at earlier
/// times may follow, and a scheduler subtracting the two readings (scx_cosmos:
/// `now - last_run_at` in ops.stopping) would underflow.
#[inline]
fn clock(sim: &mut Sim) -> u64 {
    let t = (sim.now() + sim.scx.cost_acc).max(sim.scx.clock_max);
    sim.scx.clock_max = t;
    t
}

/// bpf_get_smp_processor_id(): the CPU the program runs on.
#[inline]
pub fn bpf_get_smp_processor_id(sim: &mut Sim) -> u32 {
    this_cpu(sim)
}

/// bpf_get_prandom_u32() from the run's seeded scheduler stream.
pub fn bpf_get_prandom_u32(sim: &mut Sim) -> u32 {
    (sim.scx.rng.next_u64() >> 32) as u32
}

/// bpf_task_from_pid(): a live task by pid (pids are task index + 1).
pub fn scx_bpf_task_from_pid(sim: &mut Sim, pid: i32) -> Option<TaskId> {
    kf(sim);
    let id = pid.checked_sub(1)?;
    let p = TaskId::try_from(id).ok()?;
    ((p as usize) < sim.tasks.len() && (p as usize) < sim.tasks.len() && sim.task(p).state != TaskState::Dead).then_some(p)
}

/// Arms a scheduler timer (bpf_timer_start) to fire on the calling CPU at `at_ns`.
pub fn scx_timer_start(sim: &mut Sim, timer_id: u64, at_ns: u64) {
    let cpu = this_cpu(sim);
    let gen = sim.scx.timers.get(&timer_id).map_or(0, |&(g, _)| g.wrapping_add(1));
    sim.scx.timers.insert(timer_id, (gen, cpu));
    let at = at_ns.max(sim.now());
    sim.engine.schedule(at, crate::engine::Event::ScxTimer { id: timer_id, gen });
}

/// bpf_timer_cancel(): returns whether the timer was pending.
pub fn scx_timer_cancel(sim: &mut Sim, timer_id: u64) -> bool {
    sim.scx.timers.remove(&timer_id).is_some()
}

/// Whether `p` is in the ext class (for hosts that check task arguments).
pub fn task_is_ext(sim: &Sim, p: TaskId) -> bool {
    sim.task(p).class == ClassId::Ext
}

/// scx_bpf_cpu_curr() / scx_bpf_cpu_rq(): what runs on `cpu`, `Some(None)`
/// while its idle task does; `None` (and an error) for an invalid CPU, as
/// kf_cpu_valid() reports it.
#[inline]
pub fn scx_bpf_cpu_curr(sim: &mut Sim, cpu: i32) -> Option<Option<TaskId>> {
    kf(sim);
    let c = valid_cpu(sim, cpu, "")?;
    Some(sim.rq(c).curr.filter(|&p| (p as usize) < sim.tasks.len()))
}

/// scx_bpf_locked_rq(): the CPU whose rq the calling op holds locked, or
/// an error when no op is running (a timer callback, a syscall program).
pub fn scx_bpf_locked_rq(sim: &mut Sim) -> Option<Cpu> {
    kf(sim);
    match sim.scx.current_frame() {
        Some(f) => Some(f.cpu),
        None => {
            sim.scx_error("scx_bpf_locked_rq() called while not holding an rq lock".into());
            None
        }
    }
}
