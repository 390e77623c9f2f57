//! Processes as BPF code sees them: the thread group (`signal_struct` and
//! its thread list, `group_leader`), pids in the root pid namespace,
//! credentials and the task's `sched_class`.
//!
//! A thread group is the workload's process (its `tgid`: `threads = true`
//! puts a workload's tasks in one); its leader is the group's first task,
//! whose `task_struct` carries the group's `signal_struct`. Tasks are never
//! freed (a dead task's `task_struct` stays, like a reaped one under RCU),
//! so the pointers stay valid for the whole run. Every task is in the root
//! pid namespace (`init_pid_ns`, level 0) with root's credentials
//! (`init_cred`: uid and gid 0; workloads do not set users).

use crate::engine::TaskId;
use crate::sched::ext::abi::{CredC, ListHeadC, PidC, PidNamespaceC, TaskStructC, UpidC};
use crate::sched::sim::Sim;
use crate::sched::task::ClassId;

/// PROC_PID_INIT_INO (include/linux/proc_ns.h): the root pid namespace's
/// inode number, what `ns.inum` reads.
pub(crate) const PROC_PID_INIT_INO: u32 = 0xEFFF_FFFC;

/// `init_pid_ns` (kernel/pid.c): the root pid namespace.
static INIT_PID_NS: PidNamespaceC = PidNamespaceC { level: 0, ns_inum: PROC_PID_INIT_INO };

/// `init_cred` (kernel/cred.c): root, every id 0.
static INIT_CRED: CredC = CredC { ids: [0; 8] };

/// One object per scheduling class the simulator has, whose address
/// `p->sched_class` holds (rt, fair, ext, idle: the kernel's class order).
static SCHED_CLASSES: [u64; 4] = [0; 4];

/// The address of `class`'s object (`rt_sched_class`, `fair_sched_class`,
/// `ext_sched_class`, `idle_sched_class`): what `p->sched_class` reads.
pub(crate) fn sched_class_ptr(class: ClassId) -> *const u8 {
    let i = match class {
        ClassId::Rt => 0,
        ClassId::Fair => 1,
        ClassId::Ext => 2,
        ClassId::Idle => 3,
    };
    (&SCHED_CLASSES[i] as *const u64).cast()
}

fn empty_list(h: &mut ListHeadC) {
    let p: *mut ListHeadC = h;
    h.next = p;
    h.prev = p;
}

/// A fresh task_struct's process fields (copy_process()): its own pid in
/// the root namespace, root's credentials, and a thread group of its own
/// until `Sim::scx_link_thread` puts it in its process.
pub(crate) fn init_task_c(t: &mut TaskStructC) {
    t.__schedlab_pid = PidC { level: 0, numbers: [UpidC { nr: t.pid, ns: &INIT_PID_NS }] };
    t.thread_pid = &mut t.__schedlab_pid;
    t.real_cred = &INIT_CRED;
    t.cred = &INIT_CRED;
    empty_list(&mut t.__schedlab_signal.thread_head);
    t.__schedlab_signal.nr_threads = 0;
    t.signal = &mut t.__schedlab_signal;
    t.thread_node = ListHeadC { next: std::ptr::null_mut(), prev: std::ptr::null_mut() };
    t.sched_class = sched_class_ptr(ClassId::Fair);
}

/// An idle task (swapper/N): a kernel thread leading its own group,
/// in the idle class (the hosting layer lends these to BPF).
pub fn init_idle_c(t: &mut TaskStructC) {
    init_task_c(t);
    t.sched_class = sched_class_ptr(ClassId::Idle);
    let me: *mut TaskStructC = t;
    t.group_leader = me;
    link(t, me);
}

/// Adds `t` at the tail of `leader`'s thread list and points its signal,
/// group pids and leader at the group's (copy_process()'s
/// `list_add_tail_rcu(&p->thread_node, &p->signal->thread_head)`).
fn link(t: *mut TaskStructC, leader: *mut TaskStructC) {
    // SAFETY: both are boxed task_structs that live as long as the Sim.
    unsafe {
        let sig: *mut _ = &mut (*leader).__schedlab_signal;
        (*t).signal = sig;
        (*t).group_leader = leader;
        let lp: *mut PidC = &mut (*leader).__schedlab_pid;
        (*sig).pids = [lp; crate::sched::ext::abi::PIDTYPE_MAX];
        (*sig).pids[0] = std::ptr::null_mut(); // PIDTYPE_PID is per task (thread_pid)
        let head: *mut ListHeadC = &mut (*sig).thread_head;
        let node: *mut ListHeadC = &mut (*t).thread_node;
        let last = (*head).prev;
        (*node).next = head;
        (*node).prev = last;
        (*last).next = node;
        (*head).prev = node;
        (*sig).nr_threads += 1;
    }
}

impl Sim {
    /// Puts task `p` into its thread group (copy_process(): CLONE_THREAD
    /// joins the creator's group, otherwise the task leads a new one). The
    /// first task of a tgid leads it. Called whenever the task's C view
    /// is filled; only the first call links.
    pub(crate) fn scx_link_thread(&mut self, p: TaskId) {
        let tgid = self.task(p).tgid;
        let pid = self.task(p).scx.c.pid;
        self.tasks[p as usize].scx.c.__schedlab_pid.numbers[0].nr = pid;
        if !self.tasks[p as usize].scx.c.thread_node.next.is_null() {
            return;
        }
        let leader = *self.thread_groups.entry(tgid).or_insert(p);
        let l: *mut TaskStructC = &mut *self.tasks[leader as usize].scx.c;
        let t: *mut TaskStructC = &mut *self.tasks[p as usize].scx.c;
        link(t, l);
    }

    /// A task exited: it leaves its thread list (__unhash_process()'s
    /// `list_del_rcu(&p->thread_node)`: `next` stays valid for a walker
    /// that holds it). The leader's task_struct, and so the group's
    /// signal_struct, stays while any thread does (as a zombie leader).
    pub(crate) fn scx_unlink_thread(&mut self, p: TaskId) {
        if !self.tasks[p as usize].scx.c.is_built() {
            return;
        }
        let t = &mut self.tasks[p as usize].scx.c;
        let node: *mut ListHeadC = &mut t.thread_node;
        // SAFETY: linked nodes are in boxed task_structs or signal_structs
        // that live as long as the Sim.
        unsafe {
            if (*node).prev.is_null() {
                return;
            }
            let (prev, next) = ((*node).prev, (*node).next);
            (*prev).next = next;
            (*next).prev = prev;
            (*node).prev = std::ptr::null_mut();
            (*t.signal).nr_threads -= 1;
        }
    }

    /// Refreshes `p->sched_class` from the task's class.
    pub(crate) fn scx_sync_sched_class(&mut self, p: TaskId) {
        if !self.tasks[p as usize].scx.c.is_built() {
            return;
        }
        let class = self.task(p).class;
        self.tasks[p as usize].scx.c.sched_class = sched_class_ptr(class);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::scenario::Scenario;

    /// The pids on `t`'s thread list, walked from its signal_struct as
    /// scx_layered walks `leader->signal->thread_head`.
    fn walk(t: &TaskStructC) -> Vec<i32> {
        let mut out = Vec::new();
        let head: *const ListHeadC = &unsafe { &*t.signal }.thread_head;
        let off = std::mem::offset_of!(TaskStructC, thread_node);
        let mut n = unsafe { (*head).next } as *const ListHeadC;
        while !std::ptr::eq(n, head) && out.len() < 64 {
            // SAFETY: every node on the list is a task_struct's thread_node.
            let task = unsafe { &*((n as *const u8).sub(off) as *const TaskStructC) };
            out.push(task.pid);
            n = task.thread_node.next;
        }
        out
    }

    #[test]
    fn thread_groups_pids_and_creds_as_the_kernel_links_them() {
        let text = "duration = \"10ms\"\n[machine]\ncpus = 2\n\
                    [[workload]]\nkind = \"hog\"\nname = \"mt\"\ncount = 3\nthreads = true\n\
                    [[workload]]\nkind = \"hog\"\nname = \"solo\"\ncount = 2\n";
        let sc = Scenario::parse(text, "t.toml", &[]).unwrap();
        let mut sim = crate::workload::world::build(&sc, "t.toml").unwrap();
        // No sched_ext scheduler here: the views are built on demand, for
        // the tasks that exist, as loading one does.
        assert!(!sim.task(0).scx.c.is_built());
        sim.scx_build_views();
        let mt: Vec<TaskId> = (0..sim.tasks.len() as TaskId).filter(|&p| sim.task(p).name.starts_with("mt-")).collect();
        let solo: Vec<TaskId> = (0..sim.tasks.len() as TaskId).filter(|&p| sim.task(p).name.starts_with("solo-")).collect();
        assert_eq!((mt.len(), solo.len()), (3, 2));
        let leader: *const TaskStructC = &*sim.task(mt[0]).scx.c;
        let pids: Vec<i32> = mt.iter().map(|&p| sim.task(p).scx.c.pid).collect();
        for &p in &mt {
            let c = &sim.task(p).scx.c;
            // One thread group: the first thread leads it, every thread
            // shares its signal_struct and is on its list in creation order.
            assert!(std::ptr::eq(c.group_leader, leader));
            assert!(std::ptr::eq(c.signal, &sim.task(mt[0]).scx.c.__schedlab_signal));
            assert_eq!(walk(c), pids);
            // thread_pid is the task's own pid in init_pid_ns; PIDTYPE_TGID
            // is the leader's.
            let pid = unsafe { &*c.thread_pid };
            assert_eq!((pid.level, pid.numbers[0].nr), (0, c.pid));
            let ns = unsafe { &*pid.numbers[0].ns };
            assert_eq!((ns.level, ns.ns_inum), (0, PROC_PID_INIT_INO));
            let tg = unsafe { &*(*c.signal).pids[1] };
            assert_eq!(tg.numbers[0].nr, pids[0]);
            assert_eq!(unsafe { (*c.real_cred).ids }, [0; 8]);
            assert_eq!(c.sched_class, sched_class_ptr(ClassId::Fair));
        }
        assert_eq!(unsafe { (*sim.task(mt[0]).scx.c.signal).nr_threads }, 3);
        // Separate processes lead themselves, alone on their lists.
        for &p in &solo {
            let c = &sim.task(p).scx.c;
            assert!(std::ptr::eq(c.group_leader, &**c));
            assert_eq!(walk(c), vec![c.pid]);
        }
        // A thread exits: it leaves the list (twice is harmless); the rest
        // stay linked around it, the leader's signal_struct stays.
        sim.scx_unlink_thread(mt[1]);
        sim.scx_unlink_thread(mt[1]);
        assert_eq!(walk(&sim.task(mt[2]).scx.c), vec![pids[0], pids[2]]);
        assert_eq!(unsafe { (*sim.task(mt[0]).scx.c.signal).nr_threads }, 2);
        // The leader exits first: its threads still walk the group's list.
        sim.scx_unlink_thread(mt[0]);
        assert_eq!(walk(&sim.task(mt[2]).scx.c), vec![pids[2]]);
    }
}
