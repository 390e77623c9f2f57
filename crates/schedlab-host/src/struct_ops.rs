//! The `struct sched_ext_ops` side of a hosted scheduler: the kernel's
//! calls into the BPF program (kernel/sched/ext.c's `SCX_CALL_OP*` through
//! `bpf_struct_ops` trampolines). Each [`ExtOps`] callback packs its
//! arguments as the BPF_PROG context (`u64 *ctx`) and the C argument
//! structs (`struct scx_init_task_args` and friends) the shim declares,
//! then calls the program guarded (fault.rs).

use std::ffi::{c_char, c_void, CString};

use schedlab::engine::{Cpu, TaskId};
use schedlab::sched::ext::abi::TaskStructC;
use schedlab::sched::ext::ops::{CgroupInitArgs, CpuReleaseReason, ExitInfo, ExtOps, Op};
use schedlab::sched::sim::Sim;

use super::maps::{self, MapKind};
use super::loader;
use super::kobj::Who;
use super::state::{bad, Callee};
use super::{mapfns, rtfns, HostedScheduler};

/// `struct scx_init_task_args` and friends, as the shim declares them.
#[repr(C)]
pub(super) struct InitTaskArgsC {
    pub(super) fork: bool,
    pub(super) cgroup: *mut c_void,
}
/// `struct scx_cgroup_init_args`.
#[repr(C)]
pub(super) struct CgroupInitArgsC {
    pub(super) weight: u32,
    pub(super) bw_period_us: u64,
    pub(super) bw_quota_us: u64,
    pub(super) bw_burst_us: u64,
    pub(super) sched_idle: bool,
}
#[repr(C)]
pub(super) struct ExitTaskArgsC {
    pub(super) cancelled: bool,
}
#[repr(C)]
pub(super) struct CpuAcquireArgsC {
    pub(super) _unused: u8,
}
#[repr(C)]
pub(super) struct CpuReleaseArgsC {
    pub(super) reason: u32,
    pub(super) task: *mut TaskStructC,
}
#[repr(C)]
pub(super) struct DumpCtxC {
    pub(super) kind: u32,
    pub(super) exit_code: i64,
    pub(super) reason: *const c_char,
    pub(super) at_ns: u64,
    pub(super) at_jiffies: u64,
}
impl DumpCtxC {
    /// The context of a dump taken now (ops.dump*, outside an exit).
    fn now(sim: &Sim) -> DumpCtxC {
        DumpCtxC { kind: 0, exit_code: 0, reason: c"".as_ptr(), at_ns: schedlab::sched::ext::kfuncs::bpf_time(sim.now()), at_jiffies: 0 }
    }
}
#[repr(C)]
pub(super) struct ExitInfoC {
    pub(super) kind: u32,
    pub(super) exit_code: i64,
    pub(super) flags: u64,
    pub(super) reason: *const c_char,
    pub(super) bt: *mut u64,
    pub(super) bt_len: u32,
    pub(super) msg: *const c_char,
    pub(super) dump: *const c_char,
    pub(super) exit_cpu: i32,
}

impl HostedScheduler {
    pub(super) fn f(&self, op: Op) -> usize {
        self.fns[op.index()]
    }

    /// Calls callback `op`, a BPF_PROG `RET name(u64 *ctx)`, with `args`
    /// (which outlive the call) as its context, guarded (fault.rs). None:
    /// not defined, or it faulted (the scheduler is then ejected). After a
    /// fault nothing but ops.exit is called, as the object's state cannot
    /// be trusted.
    #[inline(always)]
    fn call_op(&self, sim: &mut Sim, op: Op, args: &mut [u64]) -> Option<u64> {
        let f = self.state.op_fn(op);
        debug_assert_eq!(f, if self.state.dead() && op != Op::Exit { 0 } else { self.f(op) });
        if f == 0 {
            return None;
        }
        self.state.call_op(sim, op, f, args.as_mut_ptr() as u64)
    }

    #[inline(always)]
    pub(super) fn call_void(&self, sim: &mut Sim, op: Op, args: &mut [u64]) {
        self.call_op(sim, op, args);
    }

    #[inline(always)]
    pub(super) fn call_s32(&self, sim: &mut Sim, op: Op, args: &mut [u64]) -> Option<i32> {
        self.call_op(sim, op, args).map(|r| r as i32)
    }

    #[inline(always)]
    fn call_bool(&self, sim: &mut Sim, op: Op, args: &mut [u64]) -> Option<bool> {
        self.call_op(sim, op, args).map(|r| r as u8 != 0)
    }

    #[inline]
    pub(super) fn task(&self, sim: &mut Sim, p: TaskId) -> u64 {
        self.state.task_ptr(sim, p) as u64
    }

    /// Task group `g`'s `struct cgroup` address.
    fn cgroup(&self, sim: &mut Sim, g: u32) -> u64 {
        rtfns::cgroup_ptr(sim, &self.state, g) as u64
    }

    /// bpf_task_storage_free(): a dead task's values in every task storage
    /// map go (freed when the outermost call returns), with their timers.
    fn free_task_storage(&self, sim: &mut Sim, p: TaskId) {
        let owner = maps::owner_key(p);
        self.state.hold_call_memory();
        let freed: Vec<usize> = {
            let mut inner = self.state.inner.borrow_mut();
            let inner = &mut *inner;
            let mut freed = Vec::new();
            for (i, m) in inner.maps.iter_mut().enumerate() {
                if m.def.kind == MapKind::TaskStorage && m.storage_delete(owner, &mut inner.grave) == 0 {
                    freed.push(i);
                }
            }
            freed
        };
        for i in freed {
            mapfns::forget_timers(sim, &self.state, i, &owner.to_ne_bytes());
        }
    }
}

fn cstring(s: &str) -> CString {
    CString::new(s.replace('\0', " ")).unwrap_or_default()
}

impl ExtOps for HostedScheduler {
    fn name(&self) -> &str {
        &self.name
    }

    fn flags(&self) -> u64 {
        // SCX_OPS_TID_TO_TASK (7.3) is the host's (cid.rs, scx_bpf_tid_to_task).
        (self.ops().flags | self.extra_flags) & !super::cid::OPS_TID_TO_TASK
    }

    fn timeout_ms(&self) -> u32 {
        self.ops().timeout_ms
    }

    fn dispatch_max_batch(&self) -> u32 {
        self.ops().dispatch_max_batch
    }

    fn has(&self, op: Op) -> bool {
        // The cid form's set_cmask() follows ops.enable() (struct_ops_cid.rs).
        self.f(op) != 0 || (op == Op::Enable && self.cid_form() && self.f(Op::SetCpumask) != 0)
    }

    /// The scheduler's own counters: every 8-byte integer global of .bss
    /// and .data with its value now, as a loader reads them from the
    /// object's data maps after the run.
    fn counters(&self) -> Vec<(String, u64)> {
        self.globals
            .iter()
            .filter(|g| g.size == 8 && g.nr_elems == 0 && matches!(g.kind, loader::ro_kind::SIGNED | loader::ro_kind::UNSIGNED))
            .map(|g| (g.name.clone(), u64::from_ne_bytes(loader::read_rodata(g).try_into().unwrap_or([0; 8]))))
            .collect()
    }

    fn select_cpu(&self, sim: &mut Sim, p: TaskId, prev_cpu: Cpu, wake_flags: u64) -> Cpu {
        let mut a = [self.task(sim, p), self.cpu_arg(prev_cpu), wake_flags];
        match self.call_s32(sim, Op::SelectCpu, &mut a).map(|c| self.cpu_ret(sim, c)) {
            Some(cpu) if cpu >= 0 => cpu as Cpu,
            Some(cpu) => {
                bad(sim, format!("invalid CPU {cpu} from ops.select_cpu()"));
                prev_cpu
            }
            None => prev_cpu,
        }
    }

    fn enqueue(&self, sim: &mut Sim, p: TaskId, enq_flags: u64) {
        let mut a = [self.task(sim, p), enq_flags];
        self.call_void(sim, Op::Enqueue, &mut a)
    }

    fn dequeue(&self, sim: &mut Sim, p: TaskId, deq_flags: u64) {
        let mut a = [self.task(sim, p), deq_flags];
        self.call_void(sim, Op::Dequeue, &mut a)
    }

    fn dispatch(&self, sim: &mut Sim, cpu: Cpu, prev: Option<TaskId>) {
        let prev = prev.map_or(0, |p| self.task(sim, p));
        self.call_void(sim, Op::Dispatch, &mut [self.cpu_arg(cpu), prev])
    }

    fn tick(&self, sim: &mut Sim, p: TaskId) {
        let mut a = [self.task(sim, p)];
        self.call_void(sim, Op::Tick, &mut a)
    }

    fn runnable(&self, sim: &mut Sim, p: TaskId, enq_flags: u64) {
        let mut a = [self.task(sim, p), enq_flags];
        self.call_void(sim, Op::Runnable, &mut a)
    }

    fn running(&self, sim: &mut Sim, p: TaskId) {
        let mut a = [self.task(sim, p)];
        self.call_void(sim, Op::Running, &mut a)
    }

    fn stopping(&self, sim: &mut Sim, p: TaskId, runnable: bool) {
        let mut a = [self.task(sim, p), runnable as u64];
        self.call_void(sim, Op::Stopping, &mut a)
    }

    fn quiescent(&self, sim: &mut Sim, p: TaskId, deq_flags: u64) {
        let mut a = [self.task(sim, p), deq_flags];
        self.call_void(sim, Op::Quiescent, &mut a)
    }

    fn yield_(&self, sim: &mut Sim, from: TaskId, to: Option<TaskId>) -> bool {
        let mut a = [self.task(sim, from), to.map_or(0, |t| self.task(sim, t))];
        self.call_bool(sim, Op::Yield, &mut a).unwrap_or(false)
    }

    fn set_weight(&self, sim: &mut Sim, p: TaskId, weight: u32) {
        let mut a = [self.task(sim, p), weight as u64];
        self.call_void(sim, Op::SetWeight, &mut a)
    }

    fn set_cpumask(&self, sim: &mut Sim, p: TaskId) {
        if self.cid_form() {
            return self.cid_set_cmask(sim, p);
        }
        let t = self.task(sim, p);
        let mask = t + std::mem::offset_of!(TaskStructC, cpus_mask) as u64;
        self.call_void(sim, Op::SetCpumask, &mut [t, mask])
    }

    fn update_idle(&self, sim: &mut Sim, cpu: Cpu, idle: bool) {
        self.call_void(sim, Op::UpdateIdle, &mut [self.cpu_arg(cpu), idle as u64])
    }

    fn cpu_acquire(&self, sim: &mut Sim, cpu: Cpu) {
        let mut args = CpuAcquireArgsC { _unused: 0 };
        self.call_void(sim, Op::CpuAcquire, &mut [cpu as u64, &mut args as *mut CpuAcquireArgsC as u64])
    }

    fn cpu_release(&self, sim: &mut Sim, cpu: Cpu, reason: CpuReleaseReason, task: Option<TaskId>) {
        let task = task.map_or(std::ptr::null_mut(), |t| self.state.task_ptr(sim, t));
        // SCX_CPU_PREEMPT_RT or SCX_CPU_PREEMPT_UNKNOWN.
        let reason = match reason {
            CpuReleaseReason::Rt => 0,
            CpuReleaseReason::Other => 3,
        };
        let mut args = CpuReleaseArgsC { reason, task };
        self.call_void(sim, Op::CpuRelease, &mut [cpu as u64, &mut args as *mut CpuReleaseArgsC as u64])
    }

    fn init_task(&self, sim: &mut Sim, p: TaskId, fork: bool) -> i32 {
        let g = sim.task(p).cgrp;
        let cgroup = rtfns::cgroup_ptr(sim, &self.state, g).cast();
        let mut args = InitTaskArgsC { fork, cgroup };
        let mut a = [self.task(sim, p), &mut args as *mut InitTaskArgsC as u64];
        self.call_s32(sim, Op::InitTask, &mut a).unwrap_or(0)
    }

    fn exit_task(&self, sim: &mut Sim, p: TaskId, cancelled: bool) {
        let mut args = ExitTaskArgsC { cancelled };
        let mut a = [self.task(sim, p), &mut args as *mut ExitTaskArgsC as u64];
        self.call_void(sim, Op::ExitTask, &mut a)
    }

    fn task_freed(&self, sim: &mut Sim, p: TaskId) {
        self.free_task_storage(sim, p);
    }

    fn enable(&self, sim: &mut Sim, p: TaskId) {
        if self.cid_form() {
            return self.cid_enable(sim, p);
        }
        let mut a = [self.task(sim, p)];
        self.call_void(sim, Op::Enable, &mut a)
    }

    fn disable(&self, sim: &mut Sim, p: TaskId) {
        let mut a = [self.task(sim, p)];
        self.call_void(sim, Op::Disable, &mut a)
    }

    fn dump(&self, sim: &mut Sim) {
        let mut ctx = DumpCtxC::now(sim);
        self.call_void(sim, Op::Dump, &mut [&mut ctx as *mut DumpCtxC as u64])
    }

    fn dump_cpu(&self, sim: &mut Sim, cpu: Cpu, idle: bool) {
        let mut ctx = DumpCtxC::now(sim);
        let cpu = self.cpu_arg(cpu);
        self.call_void(sim, Op::DumpCpu, &mut [&mut ctx as *mut DumpCtxC as u64, cpu, idle as u64])
    }

    fn dump_task(&self, sim: &mut Sim, p: TaskId) {
        let mut ctx = DumpCtxC::now(sim);
        let t = self.task(sim, p);
        self.call_void(sim, Op::DumpTask, &mut [&mut ctx as *mut DumpCtxC as u64, t])
    }

    fn cgroup_init(&self, sim: &mut Sim, cgrp: u32, args: &CgroupInitArgs) -> i32 {
        let cg = self.cgroup(sim, cgrp);
        let mut a = CgroupInitArgsC {
            weight: args.weight,
            bw_period_us: args.bw_period_us,
            bw_quota_us: args.bw_quota_us,
            bw_burst_us: args.bw_burst_us,
            sched_idle: args.idle,
        };
        self.call_s32(sim, Op::CgroupInit, &mut [cg, &mut a as *mut CgroupInitArgsC as u64]).unwrap_or(0)
    }

    fn cgroup_exit(&self, sim: &mut Sim, cgrp: u32) {
        let cg = self.cgroup(sim, cgrp);
        self.call_void(sim, Op::CgroupExit, &mut [cg])
    }

    fn cgroup_prep_move(&self, sim: &mut Sim, p: TaskId, from: u32, to: u32) -> i32 {
        let mut a = [self.task(sim, p), self.cgroup(sim, from), self.cgroup(sim, to)];
        self.call_s32(sim, Op::CgroupPrepMove, &mut a).unwrap_or(0)
    }

    fn cgroup_move(&self, sim: &mut Sim, p: TaskId, from: u32, to: u32) {
        let mut a = [self.task(sim, p), self.cgroup(sim, from), self.cgroup(sim, to)];
        self.call_void(sim, Op::CgroupMove, &mut a)
    }

    fn cgroup_cancel_move(&self, sim: &mut Sim, p: TaskId, from: u32, to: u32) {
        let mut a = [self.task(sim, p), self.cgroup(sim, from), self.cgroup(sim, to)];
        self.call_void(sim, Op::CgroupCancelMove, &mut a)
    }

    fn cgroup_set_weight(&self, sim: &mut Sim, cgrp: u32, weight: u32) {
        let mut a = [self.cgroup(sim, cgrp), weight as u64];
        self.call_void(sim, Op::CgroupSetWeight, &mut a)
    }

    fn cgroup_set_bandwidth(&self, sim: &mut Sim, cgrp: u32, period_us: u64, quota_us: u64, burst_us: u64) {
        let mut a = [self.cgroup(sim, cgrp), period_us, quota_us, burst_us];
        self.call_void(sim, Op::CgroupSetBandwidth, &mut a)
    }

    fn cgroup_set_idle(&self, sim: &mut Sim, cgrp: u32, idle: bool) {
        let mut a = [self.cgroup(sim, cgrp), idle as u64];
        self.call_void(sim, Op::CgroupSetIdle, &mut a)
    }

    fn init(&self, sim: &mut Sim) -> i32 {
        self.state.inner.borrow_mut().tid_to_task = (self.ops().flags | self.extra_flags) & super::cid::OPS_TID_TO_TASK != 0;
        if self.cid_form() {
            return self.cid_init(sim);
        }
        self.call_s32(sim, Op::Init, &mut []).unwrap_or(0)
    }

    fn exit(&self, sim: &mut Sim, info: &ExitInfo) {
        let (reason, msg, dump) = (cstring(&info.reason), cstring(&info.msg), cstring(""));
        let mut ei = ExitInfoC {
            kind: info.kind as u32,
            exit_code: info.exit_code,
            // SCX_EFLAG_INITIALIZED: the host only exits schedulers it initialised.
            flags: 1,
            reason: reason.as_ptr(),
            bt: std::ptr::null_mut(),
            bt_len: 0,
            msg: msg.as_ptr(),
            dump: dump.as_ptr(),
            exit_cpu: -1,
        };
        self.call_void(sim, Op::Exit, &mut [&mut ei as *mut ExitInfoC as u64]);
    }

    fn attached(&self, sim: &mut Sim) {
        if self.cid_form() {
            self.cid_renotify_idle(sim);
        }
        let runs = std::mem::take(&mut *self.after_attach.borrow_mut());
        for r in runs {
            let mut ctx = r.ctx.clone();
            match self.run_syscall_on(sim, &r.prog, &mut ctx, r.cpu) {
                Ok(0) => {}
                Ok(ret) if r.fail => {
                    // The loader bails out; its exit unregisters the scheduler.
                    bad(sim, format!("loader: SEC(\"syscall\") {}() returned {ret} after the attach ({})", r.prog, r.origin));
                    return;
                }
                Ok(_) => {}
                Err(e) => {
                    bad(sim, format!("loader: {e} ({})", r.origin));
                    return;
                }
            }
        }
    }

    fn traces_sched_switch(&self) -> bool {
        self.tp_sched_switch != 0
    }

    fn sched_switch(&self, sim: &mut Sim, preempt: bool, prev: Option<TaskId>, next: Option<TaskId>) {
        let f = self.tp_sched_switch;
        if f == 0 || self.state.dead() {
            return;
        }
        let cpu = sim.this_cpu;
        let who = |p: Option<TaskId>| p.map_or(Who::Idle(cpu), Who::Task);
        let prev_state = prev.map_or(0, |p| u64::from(sim.task(p).state != schedlab::sched::task::TaskState::Runnable));
        let (prev, next) = (self.state.who_ptr(sim, who(prev)) as u64, self.state.who_ptr(sim, who(next)) as u64);
        // BPF_PROG(..., bool preempt, prev, next, unsigned int prev_state).
        let mut ctx = [u64::from(preempt), prev, next, prev_state];
        self.state.call_c(sim, Callee::Tracepoint("sched_switch"), f, [ctx.as_mut_ptr() as u64, 0, 0, 0]);
    }

    fn traces(&self, tp: &str) -> bool {
        crate::tracepoints::HOSTED.contains(&tp) && self.tracepoints.contains_key(tp)
    }

    fn trace_event(&self, sim: &mut Sim, ev: &schedlab::sched::ext::ops::TraceEvent) {
        self.fire_tracepoint(sim, ev);
    }

    fn timer_fired(&self, sim: &mut Sim, timer: u64) {
        if self.state.dead() {
            return;
        }
        let Some((cb, map, mut key, value)) = mapfns::timer_target(&self.state, sim, timer) else { return };
        // `cb` is the callback the program passed to bpf_timer_set_callback():
        // `int cb(void *map, void *key, void *value)`; map and value are live
        // addresses of this scheduler's map; `key` outlives the call.
        let k = key.as_mut_ptr() as u64;
        self.state.call_c(sim, Callee::Timer, cb, [map as u64, k, value as u64, 0]);
    }
}
