//! The scheduler events every trace reader produces: the subset of the
//! kernel's sched tracepoints the task model needs.

/// How a task left the CPU, from sched_switch's `prev_state`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeftAs {
    /// Still runnable (TASK_RUNNING, or preempted): the burst goes on later.
    Preempted,
    /// Blocked (TASK_INTERRUPTIBLE / TASK_UNINTERRUPTIBLE ...): a sleep starts.
    Blocked,
    /// Exiting (EXIT_ZOMBIE / EXIT_DEAD / TASK_DEAD).
    Dead,
}

impl LeftAs {
    /// Classify the kernel's prev_state letters ("R", "R+", "S", "D", "X", "Z", "I" ...).
    pub fn from_state(s: &str) -> LeftAs {
        if s.contains('X') || s.contains('Z') {
            LeftAs::Dead
        } else if s.is_empty() || s.starts_with('R') {
            LeftAs::Preempted
        } else {
            LeftAs::Blocked
        }
    }
}

/// One thread as a trace names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceTask {
    /// Its pid (the kernel's thread id).
    pub pid: i32,
    /// Its comm.
    pub comm: String,
    /// Its kernel priority (0-139; 100 + 20 + nice for fair tasks).
    pub prio: i64,
}

/// What happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// sched_switch (`__schedule`): `prev` leaves the CPU, `next` runs.
    Switch {
        /// The task switched out.
        prev: TraceTask,
        /// How it left.
        left: LeftAs,
        /// The task switched in.
        next: TraceTask,
    },
    /// sched_waking / sched_wakeup (`try_to_wake_up`) or sched_wakeup_new
    /// (`wake_up_new_task`): `task` is woken by `waker`, the task current
    /// on the waking CPU (pid 0 = the idle task: a timer or an interrupt).
    Wake {
        /// The task woken.
        task: TraceTask,
        /// The pid current on the CPU that woke it.
        waker: i32,
        /// True for a new task's first wakeup (wake_up_new_task).
        new: bool,
    },
    /// sched_process_fork: `parent` made `child` (which is then woken new).
    Fork {
        /// The forking task's pid.
        parent: i32,
        /// The new task.
        child: TraceTask,
    },
    /// sched_process_exit: `task` is exiting (its last switch-out follows).
    Exit {
        /// The exiting task.
        task: TraceTask,
    },
}

/// One event at a time on a CPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchedEvent {
    /// When, in ns of the trace's clock.
    pub ts_ns: u64,
    /// On which CPU.
    pub cpu: u32,
    /// What.
    pub kind: Kind,
}
