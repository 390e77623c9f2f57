//! The cid form of the struct_ops calls (`struct sched_ext_ops_cid`, 7.3):
//! what kernel/sched/ext/ext.c does differently when the root is
//! cid-form (scx_is_cid_type()). struct_ops.rs calls these for a cid-form
//! scheduler; a cpu-form one never reaches them.
//!
//! - CPU arguments become cids (scx_cpu_arg()): ops.dispatch, update_idle,
//!   dump_cid, select_cid's prev_cid, cid_online / cid_offline; the cid
//!   select_cid returns becomes a CPU (scx_cpu_ret()).
//! - ops.set_cmask gets the task's affinity as a `struct scx_cmask` the host
//!   writes into this CPU's scratch in the scheduler's arena
//!   (scx_fill_cmask_scratch()).
//! - ops.enable(p, args) gets the same cmask's arena address in `args`,
//!   then set_cmask() delivers it, before set_weight() (__scx_enable_task()).
//! - ops.init_cids() runs before ops.init(), after the layout is built and
//!   before it is published and the caps exist (scx_root_enable()).
//! - the cpuctl_* ops are the cgroup_* ops of the cpu form; they sit in the
//!   same slots (schedlab_cid.h) and need nothing here.

use schedlab::engine::{Cpu, TaskId};
use schedlab::sched::ext::ops::Op;
use schedlab::sched::sim::Sim;

use super::cid;
use super::state::{bad, Callee};
use super::HostedScheduler;

/// `struct scx_enable_args`.
#[repr(C)]
struct EnableArgsC {
    cmask_arena_addr: u64,
}

impl HostedScheduler {
    /// Whether the scheduler is cid-form.
    pub(super) fn cid_form(&self) -> bool {
        cid::is_cid(&self.state)
    }

    /// scx_cpu_arg(): a CPU argument as the scheduler sees it.
    pub(super) fn cpu_arg(&self, cpu: Cpu) -> u64 {
        if !self.cid_form() {
            return cpu as u64;
        }
        cid::cid_of(&self.state, cpu).map_or(cpu as u64, |c| c as u32 as u64)
    }

    /// scx_cpu_ret(): a CPU the scheduler returned (a cid for the cid
    /// form; negative values pass, an invalid cid is an error).
    pub(super) fn cpu_ret(&self, sim: &mut Sim, v: i32) -> i32 {
        if v < 0 || !self.cid_form() {
            return v;
        }
        cid::cpu_of(sim, &self.state, v).map_or(-22, |c| c as i32)
    }

    /// scx_fill_cmask_scratch(): `p`'s affinity as a cmask of cids in this
    /// CPU's arena scratch; its address (0 if there is none).
    fn fill_scratch(&self, sim: &mut Sim, p: TaskId) -> u64 {
        let inner = self.state.inner.borrow();
        let Some(st) = inner.cid.as_ref() else { return 0 };
        let (Some(t), Some(&at)) = (st.live(), st.scratch.get(sim.this_cpu as usize)) else { return 0 };
        let task = schedlab::sched::ext::kfuncs::task_c(sim, p);
        // SAFETY: the task's boxed task_struct, alive while the task is.
        let mask = unsafe { &(*task).cpus_mask };
        let n = t.nr_cids();
        // SAFETY: the scratch holds cmask_bytes(n) bytes of arena memory.
        unsafe { cid::Cmask(at as *mut u8).fill(0, n, t, |cpu| mask.test(cpu)) };
        at as u64
    }

    /// ops.set_cmask(p, cmask).
    pub(super) fn cid_set_cmask(&self, sim: &mut Sim, p: TaskId) {
        if self.f(Op::SetCpumask) == 0 {
            return;
        }
        let t = self.task(sim, p);
        let m = self.fill_scratch(sim, p);
        self.call_void(sim, Op::SetCpumask, &mut [t, m]);
    }

    /// __scx_enable_task()'s cid part: ops.enable(p, &args) with the
    /// affinity cmask, then ops.set_cmask() with the same mask.
    pub(super) fn cid_enable(&self, sim: &mut Sim, p: TaskId) {
        if self.f(Op::Enable) != 0 {
            let m = self.fill_scratch(sim, p);
            let mut args = EnableArgsC { cmask_arena_addr: m };
            let t = self.task(sim, p);
            self.call_void(sim, Op::Enable, &mut [t, &mut args as *mut EnableArgsC as u64]);
        }
        self.cid_set_cmask(sim, p);
    }

    /// scx_root_enable() from the cid layout to ops.init(): the layout,
    /// ops.init_cids(), the kernel's arena objects. Err: the enable fails.
    pub(super) fn cid_enable_root(&self, sim: &mut Sim) -> Result<(), String> {
        let f = self.state.inner.borrow().cid.as_ref().map_or(0, |s| s.tail.init_cids);
        let dead = self.state.dead();
        cid::enable_cids(sim, &self.state, |sim| {
            if f == 0 || dead {
                return 0;
            }
            let mut args: [u64; 0] = [];
            self.state.call_c(sim, Callee::Named("init_cids"), f, [args.as_mut_ptr() as u64, 0, 0, 0]).map_or(0, |r| r as i32)
        })
    }

    /// 7.3's re-notify when the enable lifts bypass
    /// (unbypass_renotify_idle(), SCX_RQ_ROOT_IDLE_RENOTIFY): every CPU is
    /// forced through a re-pick, and one that is idle delivers
    /// ops.update_idle(cid, true) to the root, which would otherwise never
    /// hear that a CPU idle since before the enable is idle. Delivered
    /// here, on each idle CPU, right after the attach.
    pub(super) fn cid_renotify_idle(&self, sim: &mut Sim) {
        if self.f(Op::UpdateIdle) == 0 || sim.scx.bypassing {
            return;
        }
        let saved = sim.this_cpu;
        for cpu in 0..sim.nr_cpus() as Cpu {
            if sim.rq(cpu).curr.is_none() && !self.state.dead() {
                sim.this_cpu = cpu;
                self.call_void(sim, Op::UpdateIdle, &mut [self.cpu_arg(cpu), 1]);
            }
        }
        sim.this_cpu = saved;
    }

    /// ops.init() of a cid-form scheduler: the cid enable steps first.
    pub(super) fn cid_init(&self, sim: &mut Sim) -> i32 {
        if let Err(e) = self.cid_enable_root(sim) {
            bad(sim, e);
            return -22;
        }
        self.call_s32(sim, Op::Init, &mut []).unwrap_or(0)
    }
}
