//! The C-visible layout of the objects a hosted BPF scheduler dereferences:
//! `struct task_struct` (the subset schedulers read), its `struct
//! sched_ext_entity`, and `struct cpumask`. The shim's vmlinux.h declares the
//! same layouts; a test compiles a probe against it and compares offsets.
//!
//! The ext class keeps the fields BPF may write (`scx.slice`,
//! `scx.dsq_vtime`) here and nowhere else, so a write from a callback is seen
//! by the class without copying.

use crate::machine::cpumask::CpuMask;

/// Bits in a C `struct cpumask` (CONFIG_NR_CPUS of the shim).
pub const NR_CPUS: usize = 4096;
/// 64-bit words in a C `struct cpumask`.
pub const CPUMASK_WORDS: usize = NR_CPUS / 64;

/// `struct cpumask`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpumaskC {
    /// CPU c is bit c % 64 of word c / 64.
    pub bits: [u64; CPUMASK_WORDS],
}

impl Default for CpumaskC {
    fn default() -> Self {
        CpumaskC { bits: [0; CPUMASK_WORDS] }
    }
}

impl CpumaskC {
    /// The C form of `m`.
    pub fn from_mask(m: &CpuMask) -> Self {
        let mut c = CpumaskC::default();
        c.assign(m);
        c
    }

    /// Overwrites this mask with `m` (CPUs past NR_CPUS are dropped).
    pub fn assign(&mut self, m: &CpuMask) {
        // Word by word: both are little-endian u64 bitmaps, CPU c at bit
        // c % 64 of word c / 64 (CPUs past NR_CPUS are dropped).
        let w = m.words();
        let n = w.len().min(CPUMASK_WORDS);
        self.bits[..n].copy_from_slice(&w[..n]);
        self.bits[n..].fill(0);
    }

    /// Whether `cpu` is set (`cpumask_test_cpu()`).
    #[inline]
    pub fn test(&self, cpu: usize) -> bool {
        cpu < NR_CPUS && self.bits[cpu / 64] & (1 << (cpu % 64)) != 0
    }

    /// The mask's first `nr_cpus` bits as a [`CpuMask`].
    pub fn to_mask(&self, nr_cpus: usize) -> CpuMask {
        CpuMask::from_words(nr_cpus, &self.bits)
    }

    /// Whether this mask and `mask` (of the machine's CPUs) share a CPU:
    /// `self.to_mask(n).intersects(mask)` without building the copy. The
    /// copy's words are these with the bits past the machine's CPUs
    /// cleared, and `mask` has none of those bits set.
    #[inline]
    pub fn intersects(&self, mask: &CpuMask) -> bool {
        let any = self.bits.iter().zip(mask.words()).any(|(a, b)| a & b != 0);
        debug_assert_eq!(any, self.to_mask(mask.nr_bits()).intersects(mask));
        any
    }
}

/// `struct sched_ext_entity` (include/linux/sched/ext.h), the fields
/// schedulers use. `dsq` is always NULL here: we expose no DSQ objects.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct SchedExtEntityC {
    /// `p->scx.dsq`: always NULL here (DSQ objects are not exposed).
    pub dsq: u64,
    /// `p->scx.dsq_list.node`'s sequence number (`dsq_seq`), for DSQ iterators.
    pub dsq_seq: u32,
    /// SCX_TASK_DSQ_* flags (`dsq_flags`).
    pub dsq_flags: u32,
    /// SCX_TASK_* flags: QUEUED, RESET_RUNNABLE_AT, DEQD_FOR_SLEEP and the state bits.
    pub flags: u32,
    /// The task's weight on the cgroup scale, 1..10000 (100 = nice 0).
    pub weight: u32,
    /// `sticky_cpu`: set while a remote move keeps the task on one CPU.
    pub sticky_cpu: i32,
    /// `holding_cpu`: the CPU that holds the task during a dispatch move.
    pub holding_cpu: i32,
    /// The CPU select_task_rq_scx() chose at the last wakeup.
    pub selected_cpu: i32,
    /// SCX_KF_* mask of the op in progress: which kfuncs may be called.
    pub kf_mask: u32,
    /// SCX_OPSS_* ownership and qseq (`atomic_long_t ops_state`).
    pub ops_state: u64,
    /// When the task last became runnable, ns (the kernel keeps jiffies; the watchdog reads it).
    pub runnable_at: u64,
    /// `core_sched_at`: core scheduling's FIFO stamp (unused: core scheduling is not modelled).
    pub core_sched_at: u64,
    /// Direct-dispatch target set in ops.select_cpu()/enqueue() (`ddsp_dsq_id`).
    pub ddsp_dsq_id: u64,
    /// Direct-dispatch SCX_ENQ_* flags (`ddsp_enq_flags`).
    pub ddsp_enq_flags: u64,
    /// Remaining slice; BPF may write it.
    pub slice: u64,
    /// Vtime for vtime-ordered DSQs; BPF may write it.
    pub dsq_vtime: u64,
    /// `disallow`: set in ops.init_task() to keep the task out of sched_ext.
    pub disallow: u8,
    /// Padding to the C layout.
    pub _pad: [u8; 7],
    /// `tid` (7.3): the task's sched_ext id, unique and never reused
    /// (`scx_bpf_tid_to_task()` looks it up).
    pub tid: u64,
}

/// `struct load_weight`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct LoadWeightC {
    /// `load_weight.weight`.
    pub weight: u64,
    /// `load_weight.inv_weight`.
    pub inv_weight: u32,
    /// Padding to the C layout.
    pub _pad: u32,
}

/// The fair entity fields BPF schedulers read (`p->se.sum_exec_runtime`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct SchedEntityC {
    /// The fair weight (`se.load`).
    pub load: LoadWeightC,
    /// Total CPU time, ns (`se.sum_exec_runtime`).
    pub sum_exec_runtime: u64,
    /// `se.vruntime` (0 while in sched_ext).
    pub vruntime: u64,
    /// `sum_exec_runtime` when the task was last picked.
    pub prev_sum_exec_runtime: u64,
    /// Migrations (`se.nr_migrations`).
    pub nr_migrations: u64,
}

/// `struct task_struct`, the subset. `schedlab_id` is ours: the simulator's
/// task index, how the host turns a pointer back into a task.
#[repr(C)]
#[derive(Clone, Debug)]
pub struct TaskStructC {
    /// The simulator's task index (ours, not the kernel's).
    pub schedlab_id: u32,
    /// TASK_RUNNING (0) or TASK_INTERRUPTIBLE (1) (`p->__state`).
    pub __state: u32,
    /// PF_* flags (`p->flags`).
    pub flags: u32,
    /// 1 while the task runs on a CPU (`p->on_cpu`).
    pub on_cpu: i32,
    /// task_cpu(p) (`p->thread_info.cpu`).
    pub cpu: u32,
    /// `p->recent_used_cpu`.
    pub recent_used_cpu: i32,
    /// `p->wake_cpu`: the CPU a wakeup in progress targets.
    pub wake_cpu: i32,
    /// TASK_ON_RQ_QUEUED (1) while queued (`p->on_rq`).
    pub on_rq: i32,
    /// Effective priority (`p->prio`).
    pub prio: i32,
    /// 120 + nice (`p->static_prio`).
    pub static_prio: i32,
    /// Priority without boosting (`p->normal_prio`).
    pub normal_prio: i32,
    /// RT priority 1..99 (`p->rt_priority`).
    pub rt_priority: u32,
    /// SCHED_* policy number (`p->policy`).
    pub policy: u32,
    /// CPUs in `cpus_mask` (`p->nr_cpus_allowed`).
    pub nr_cpus_allowed: i32,
    /// Nesting of migrate_disable() (`p->migration_disabled`), always 0.
    pub migration_disabled: u16,
    /// Padding to the C layout.
    pub _pad0: u16,
    /// Process id (`p->pid`): the task index + 1.
    pub pid: i32,
    /// Thread group id (`p->tgid`).
    pub tgid: i32,
    /// Padding to the C layout.
    pub _pad1: i32,
    /// Points at `cpus_mask` (`p->cpus_ptr`).
    pub cpus_ptr: *const CpumaskC,
    // Through `scx`, what the host and the kfuncs touch on every call
    // fills the first four cache lines; with tens of thousands of tasks
    // each further line is a miss per call.
    /// The task's css_set (its cgroup), set by the host before each call.
    pub cgroups: *mut core::ffi::c_void,
    /// User and system CPU time (all simulated work counts as user time).
    pub utime: u64,
    /// System CPU time, ns (`p->stime`): 0.
    pub stime: u64,
    /// The fair entity (`p->se`).
    pub se: SchedEntityC,
    /// The sched_ext entity (`p->scx`).
    pub scx: SchedExtEntityC,
    /// The parent (`p->real_parent`); swapper/0's for workload tasks.
    pub real_parent: *mut TaskStructC,
    /// The thread group leader (`p->group_leader`).
    pub group_leader: *mut TaskStructC,
    /// Non-NULL for user tasks (all simulated tasks); schedulers test it.
    pub mm: *mut core::ffi::c_void,
    /// The task name, NUL-terminated (`p->comm`).
    pub comm: [u8; 16],
    /// NUMA balancing's preferred node: -1, NUMA balancing is not modelled.
    pub numa_preferred_nid: i32,
    /// Padding to the C layout.
    pub _pad2: i32,
    /// NULL: the default NUMA memory policy (no other is modelled).
    pub mempolicy: *mut core::ffi::c_void,
    /// NULL: the root task group (CPU-controller groups are not modelled).
    pub sched_task_group: *mut core::ffi::c_void,
    /// The task's class, one object per class (`procs::sched_class_ptr`).
    pub sched_class: *const u8,
    /// The thread group's signal_struct (its leader's `__schedlab_signal`).
    pub signal: *mut SignalC,
    /// Entry in `signal->thread_head`.
    pub thread_node: ListHeadC,
    /// The task's `struct pid` (`p->thread_pid`).
    pub thread_pid: *mut PidC,
    /// Objective credentials (`p->real_cred`).
    pub real_cred: *const CredC,
    /// Effective credentials (`p->cred`).
    pub cred: *const CredC,
    /// CPUs the task may run on (`p->cpus_mask`). Near the end: 512 bytes
    /// the event path seldom reads, off the lines it does (the layout is
    /// ours; schedulers reach fields by name).
    pub cpus_mask: CpumaskC,
    /// The task's own `struct pid`.
    pub __schedlab_pid: PidC,
    /// The process's `signal_struct` when this task leads its group.
    pub __schedlab_signal: SignalC,
}

/// `struct list_head`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ListHeadC {
    /// Next entry.
    pub next: *mut ListHeadC,
    /// Previous entry.
    pub prev: *mut ListHeadC,
}

/// `struct pid_namespace`: the members schedulers read.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PidNamespaceC {
    /// Nesting level of the namespace (0: the root).
    pub level: u32,
    /// `ns.inum`.
    pub ns_inum: u32,
}

/// `struct upid`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct UpidC {
    /// The pid number in `ns`.
    pub nr: i32,
    /// The namespace.
    pub ns: *const PidNamespaceC,
}

/// `struct pid` in the root namespace only (level 0, one number).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PidC {
    /// The deepest namespace level the pid has a number in.
    pub level: u32,
    /// The pid's number per namespace level.
    pub numbers: [UpidC; 1],
}

/// `struct cred`: uid, gid, suid, sgid, euid, egid, fsuid, fsgid.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CredC {
    /// uid, gid, suid, sgid, euid, egid, fsuid, fsgid.
    pub ids: [u32; 8],
}

/// PIDTYPE_MAX (include/linux/pid_types.h).
pub const PIDTYPE_MAX: usize = 4;

/// `struct signal_struct`: the thread list and the group's pids.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SignalC {
    /// Live threads in the group (`signal->nr_threads`).
    pub nr_threads: i32,
    /// The threads, linked through `task->thread_node`.
    pub thread_head: ListHeadC,
    /// The group's pids by PIDTYPE_* (TGID, PGID, SID).
    pub pids: [*mut PidC; PIDTYPE_MAX],
}

/// PF_* task flags (include/linux/sched.h) the shim exposes.
pub const PF_EXITING: u32 = 0x0000_0004;
/// PF_KTHREAD: a kernel thread.
pub const PF_KTHREAD: u32 = 0x0020_0000;

impl TaskStructC {
    /// A C task for task index `id`: nice 0, SCHED_NORMAL, pid id + 1, its pointers set.
    pub fn new(id: u32) -> Box<TaskStructC> {
        let mut t = Box::new(TaskStructC {
            schedlab_id: id,
            __state: 0,
            flags: 0,
            on_cpu: 0,
            cpu: 0,
            recent_used_cpu: -1,
            wake_cpu: 0,
            on_rq: 0,
            prio: 120,
            static_prio: 120,
            normal_prio: 120,
            rt_priority: 0,
            policy: 0,
            nr_cpus_allowed: 0,
            migration_disabled: 0,
            _pad0: 0,
            pid: id as i32 + 1,
            tgid: id as i32 + 1,
            _pad1: 0,
            cpus_ptr: core::ptr::null(),
            cpus_mask: CpumaskC::default(),
            real_parent: core::ptr::null_mut(),
            group_leader: core::ptr::null_mut(),
            // Any non-NULL value: schedulers only compare it with NULL.
            mm: core::ptr::NonNull::<u8>::dangling().as_ptr().cast(),
            se: SchedEntityC::default(),
            // The kernel hands out tids from 1 and never reuses them;
            // task indexes are never reused either.
            scx: SchedExtEntityC { tid: id as u64 + 1, ..SchedExtEntityC::default() },
            comm: [0; 16],
            utime: 0,
            stime: 0,
            numa_preferred_nid: -1,
            mempolicy: core::ptr::null_mut(),
            sched_task_group: core::ptr::null_mut(),
            cgroups: core::ptr::null_mut(),
            _pad2: 0,
            sched_class: core::ptr::null(),
            signal: core::ptr::null_mut(),
            thread_node: ListHeadC { next: core::ptr::null_mut(), prev: core::ptr::null_mut() },
            thread_pid: core::ptr::null_mut(),
            real_cred: core::ptr::null(),
            cred: core::ptr::null(),
            __schedlab_pid: PidC { level: 0, numbers: [UpidC { nr: 0, ns: core::ptr::null() }] },
            __schedlab_signal: SignalC {
                nr_threads: 0,
                thread_head: ListHeadC { next: core::ptr::null_mut(), prev: core::ptr::null_mut() },
                pids: [core::ptr::null_mut(); PIDTYPE_MAX],
            },
        });
        // The box never moves, so the self-pointers stay valid.
        t.cpus_ptr = &t.cpus_mask;
        crate::sched::ext::procs::init_task_c(&mut t);
        t
    }
}

/// `struct bpf_iter_scx_dsq`: opaque to BPF (the shim declares it as
/// `u64 __opaque[12]`), our cursor inside.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct DsqIterC {
    /// The DSQ iterated.
    pub dsq_id: u64,
    /// Position of the last task returned: (key, seq) in the DSQ's order.
    pub cursor_key: u64,
    /// Sequence number of the last task returned.
    pub cursor_seq: u64,
    /// Only tasks inserted before the iterator was created (seq < this) are visited.
    pub max_seq: u64,
    /// SCX_DSQ_ITER_* flags, plus our internal state bits.
    pub flags: u64,
    /// Slice and vtime set by scx_bpf_dsq_move_set_slice/_vtime for the next move.
    pub slice: u64,
    /// Vtime set by scx_bpf_dsq_move_set_vtime() for the next move.
    pub vtime: u64,
    /// Unused, up to the iterator's opaque size.
    pub _reserved: [u64; 5],
}

/// SCX_DSQ_ITER_REV: iterate from the tail.
pub const DSQ_ITER_REV: u64 = 1 << 16;

#[cfg(test)]
mod tests {
    use super::*;

    /// A C mask read for a machine keeps exactly the bits of the machine's
    /// CPUs, whatever the machine's size against the words.
    #[test]
    fn to_mask_keeps_the_machines_cpus_only() {
        let mut c = CpumaskC::default();
        for cpu in [0, 5, 63, 64, 127, 128, 129, 200, 4095] {
            c.bits[cpu / 64] |= 1 << (cpu % 64);
        }
        for nr in [1, 6, 64, 65, 128, 129, 130, 256, 300, 4096] {
            let m = c.to_mask(nr);
            let want: Vec<usize> = (0..nr).filter(|&cpu| c.test(cpu)).collect();
            assert_eq!(m.nr_bits(), nr);
            assert_eq!(m.iter().collect::<Vec<_>>(), want, "{nr} CPUs");
            assert_eq!(CpumaskC::from_mask(&m).to_mask(nr), m, "{nr} CPUs round trip");
        }
    }
}
