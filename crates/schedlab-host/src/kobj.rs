//! Kernel objects lent to BPF code: each CPU's idle task, `struct rq`
//! views (cgroups: cgroup.rs), and the per-CPU variables bpf_per_cpu_ptr()
//! resolves (`runqueues`, `__preempt_count`).
//!
//! All are boxed and owned by the scheduler's host state, so the addresses
//! BPF keeps stay valid while the scheduler is loaded. A view is refreshed
//! from the simulator each time it is handed out.

use std::ffi::c_void;

use schedlab::engine::{Cpu, TaskId};
use schedlab::sched::ext::abi::{TaskStructC, PF_KTHREAD};
use schedlab::sched::sim::Sim;

use super::maps::IDLE_OWNER;

/// PF_IDLE (include/linux/sched.h).
pub(super) const PF_IDLE: u32 = 0x0000_0002;
/// The id of the root cgroup (cgroup v2's root kernfs node).
pub(super) const ROOT_CGROUP_ID: u64 = 1;

/// `struct scx_rq` of the shim (schedlab_kobj.h).
#[repr(C)]
#[derive(Default)]
pub(super) struct ScxRqC {
    pub extra_enq_flags: u64,
    pub nr_running: u32,
    pub flags: u32,
    pub cpuperf_target: u32,
    pub cpu_released: bool,
    pub _pad: [u8; 3],
    pub pnt_seq: u64,
    pub local_dsq_nr: u32,
    pub _pad1: u32,
}

/// `struct rq` of the shim: the clocks scx's `rq___local` reads first.
#[repr(C)]
pub(super) struct RqC {
    pub clock_task: u64,
    pub clock_pelt: u64,
    pub lost_idle_time: u64,
    pub prev_steal_time_rq: u64,
    pub clock: u64,
    pub nr_running: u32,
    pub cpu: i32,
    pub online: i32,
    pub _pad: i32,
    pub curr: *mut TaskStructC,
    pub idle: *mut TaskStructC,
    pub scx: ScxRqC,
}

#[repr(C)]
pub(super) struct KernfsNodeC {
    pub id: u64,
    pub name: *const core::ffi::c_char,
}

#[repr(C)]
pub(super) struct CssC {
    pub cgroup: *mut CgroupC,
    pub parent: *mut CssC,
}

#[repr(C)]
pub(super) struct CgroupC {
    pub self_: CssC,
    pub flags: u64,
    pub level: i32,
    pub max_depth: i32,
    pub kn: *mut KernfsNodeC,
    /// Each controller's css (`cgrp->subsys[]`): the cpu controller's is
    /// the cgroup's `struct task_group` (cgroup.rs), the others its `self`.
    pub subsys: [*mut CssC; CGROUP_SUBSYS_COUNT],
    /// A flexible array in C; cgroup.rs allocates its slots right after.
    pub ancestors: [*mut CgroupC; 0],
}

/// `cpu_cgrp_id` (schedlab_kobj.h).
pub(super) const CPU_CGRP_ID: usize = 1;

/// `struct scx_task_group` (include/linux/sched/ext.h).
#[repr(C)]
#[derive(Default)]
pub(super) struct ScxTaskGroupC {
    pub flags: u32,
    pub weight: u32,
    pub bw_period_us: u64,
    pub bw_quota_us: u64,
    pub bw_burst_us: u64,
    pub idle: bool,
}

/// `struct task_group` as far as BPF reads it: its css, then `scx`.
#[repr(C)]
pub(super) struct TaskGroupC {
    pub css: CssC,
    pub scx: ScxTaskGroupC,
}

/// CGROUP_SUBSYS_COUNT of the shim's `struct css_set`.
pub(super) const CGROUP_SUBSYS_COUNT: usize = 14;

/// `struct css_set` (include/linux/cgroup-defs.h): the task's css in each
/// subsystem and its cgroup on the default hierarchy.
#[repr(C)]
pub(super) struct CssSetC {
    pub subsys: [*mut CssC; CGROUP_SUBSYS_COUNT],
    pub dfl_cgrp: *mut CgroupC,
}

/// Who a `struct task_struct *` from C is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Who {
    Task(TaskId),
    /// The idle task (swapper/N) of a CPU.
    Idle(Cpu),
}

impl Who {
    /// The local storage owner key of this task.
    pub(super) fn owner(self) -> u64 {
        match self {
            Who::Task(p) => p as u64,
            Who::Idle(c) => IDLE_OWNER + c as u64,
        }
    }
}

#[derive(Default)]
#[allow(clippy::vec_box)] // boxes keep their addresses, which BPF holds; the Vecs only own them
pub(super) struct Kobjs {
    idle: Vec<Box<TaskStructC>>,
    rqs: Vec<Box<RqC>>,
    /// The preempt count bpf_this_cpu_ptr(&__preempt_count) points at.
    preempt: Box<i32>,
}

fn idle_task(cpu: Cpu) -> Box<TaskStructC> {
    let mut t = TaskStructC::new(u32::MAX - cpu);
    t.pid = 0;
    t.tgid = 0;
    t.flags = PF_IDLE | PF_KTHREAD;
    t.cpu = cpu;
    t.mm = std::ptr::null_mut();
    t.nr_cpus_allowed = 1;
    t.cpus_mask.bits[cpu as usize / 64] |= 1 << (cpu % 64);
    let name = format!("swapper/{cpu}");
    let n = name.len().min(15);
    t.comm[..n].copy_from_slice(&name.as_bytes()[..n]);
    schedlab::sched::ext::procs::init_idle_c(&mut t);
    t
}

impl Kobjs {
    fn ensure(&mut self, nr_cpus: usize) {
        while self.idle.len() < nr_cpus {
            let cpu = self.idle.len() as Cpu;
            self.idle.push(idle_task(cpu));
        }
    }

    /// CPU `cpu`'s idle task, with `on_cpu` as it is now.
    pub(super) fn idle_ptr(&mut self, sim: &Sim, cpu: Cpu) -> *mut TaskStructC {
        self.ensure(sim.nr_cpus());
        let t = &mut self.idle[cpu as usize];
        t.on_cpu = sim.rq(cpu).curr.is_none() as i32;
        &mut **t
    }

    /// [`idle_ptr`](Self::idle_ptr) of a CPU of the machine once every
    /// CPU's idle task exists (None before then: that call builds them),
    /// with no allocation and nothing that could panic.
    #[inline]
    pub(super) fn idle_ptr_built(&mut self, sim: &Sim, cpu: Cpu) -> Option<*mut TaskStructC> {
        let nr = sim.nr_cpus();
        if self.idle.len() < nr || cpu as usize >= nr {
            return None;
        }
        let t = &mut self.idle[cpu as usize];
        t.on_cpu = sim.rq(cpu).curr.is_none() as i32;
        Some(&mut **t)
    }

    /// Whether `addr` is an idle task this state lent.
    pub(super) fn idle_of(&self, addr: usize) -> Option<Cpu> {
        self.idle.iter().position(|t| std::ptr::eq(&**t, addr as *const TaskStructC)).map(|c| c as Cpu)
    }

    /// The preempt count of the current context, where
    /// bpf_this_cpu_ptr(&__preempt_count) points.
    pub(super) fn preempt_count(&mut self, sim: &Sim) -> *mut c_void {
        *self.preempt = sim.irq_ctx.preempt_count() as i32;
        (&mut *self.preempt as *mut i32).cast()
    }

    /// CPU `cpu`'s `struct rq`, refreshed; `curr` is a task pointer from
    /// the caller (the running task, or the idle task).
    pub(super) fn rq(&mut self, sim: &Sim, cpu: Cpu, curr: *mut TaskStructC) -> *mut RqC {
        let idle = self.idle_ptr(sim, cpu);
        while self.rqs.len() < sim.nr_cpus() {
            self.rqs.push(Box::new(RqC {
                clock_task: 0,
                clock_pelt: 0,
                lost_idle_time: 0,
                prev_steal_time_rq: 0,
                clock: 0,
                nr_running: 0,
                cpu: self.rqs.len() as i32,
                online: 1,
                _pad: 0,
                curr: std::ptr::null_mut(),
                idle: std::ptr::null_mut(),
                scx: ScxRqC::default(),
            }));
        }
        self.refresh_rq(sim, cpu, curr, idle)
    }

    /// [`rq`](Self::rq) of a CPU of the machine once every CPU's idle task
    /// and `struct rq` exist (None before then: that call builds them),
    /// with no allocation and nothing that could panic.
    #[inline]
    pub(super) fn rq_built(&mut self, sim: &Sim, cpu: Cpu, curr: *mut TaskStructC) -> Option<*mut RqC> {
        if self.rqs.len() < sim.nr_cpus() {
            return None;
        }
        let idle = self.idle_ptr_built(sim, cpu)?;
        Some(self.refresh_rq(sim, cpu, curr, idle))
    }

    /// CPU `cpu`'s `struct rq` (which exists) with its fields as they are now.
    #[inline(always)]
    fn refresh_rq(&mut self, sim: &Sim, cpu: Cpu, curr: *mut TaskStructC, idle: *mut TaskStructC) -> *mut RqC {
        let now = schedlab::sched::ext::kfuncs::bpf_time(sim.now());
        let (rq, srq) = (sim.rq(cpu), &sim.rqs[cpu as usize].scx);
        let v = &mut self.rqs[cpu as usize];
        // No IRQ-time or steal accounting and full capacity: every clock is now.
        v.clock = now;
        v.clock_task = now;
        v.clock_pelt = now;
        v.nr_running = rq.nr_running;
        v.curr = curr;
        v.idle = idle;
        v.scx.nr_running = srq.nr_running;
        v.scx.flags = srq.flags;
        v.scx.cpuperf_target = srq.cpuperf;
        v.scx.pnt_seq = srq.pnt_seq;
        v.scx.local_dsq_nr = sim.scx.dsqs.get(sim.scx.local(cpu) as usize).map_or(0, |d| d.nr() as u32);
        &mut **v
    }
}
