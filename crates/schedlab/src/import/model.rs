//! The task model derived from a trace's scheduler events: for each task,
//! the sequence of what it did (run bursts, sleeps and what ended each
//! sleep, exit), independent of where and when the recorded scheduler ran
//! it, so that a replay under another scheduler keeps the work and the
//! dependencies between tasks rather than the recorded timing.

use std::collections::{BTreeMap, BTreeSet};

use super::events::{Kind, LeftAs, SchedEvent};

/// What ended a sleep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WokenBy {
    /// A timer or an interrupt (woken with the idle task current, or by
    /// itself): replayed as a sleep of the recorded length.
    Timer,
    /// Another task (the task current on the waking CPU,
    /// `try_to_wake_up`'s caller): replayed as a wait for that task.
    Task(i32),
}

/// One step of a task's recorded behaviour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Ran for this many ns of CPU time (summed across preemptions).
    Run(u64),
    /// Blocked for this many ns (from its switch-out to its wakeup).
    Sleep {
        /// Length of the sleep in the trace.
        ns: u64,
        /// What woke it.
        by: WokenBy,
    },
    /// Woke this task (`try_to_wake_up` on it) at this point of its run.
    Wake(i32),
    /// Forked this task (sched_process_fork) at this point of its run:
    /// the child starts waiting for it.
    Fork(i32),
    /// Exited (switched out dead).
    Exit,
}

/// One task's recorded behaviour.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskModel {
    /// Its pid in the trace.
    pub pid: i32,
    /// Its last comm.
    pub comm: String,
    /// Its last kernel priority seen (120 = nice 0).
    pub prio: i64,
    /// When it first appears, ns from the first event of the trace.
    pub start_ns: u64,
    /// What it did, in order.
    pub steps: Vec<Step>,
    /// Runnable without a break (no sleep) for the second half of the trace
    /// (or the window) at least, and still at its end: a task that would
    /// have gone on running (a CPU hog), not a burst the end happened to cut.
    pub runnable_at_end: bool,
    /// The CPUs it ran on.
    pub ran_on: BTreeSet<u32>,
    /// The CPUs it is taken to be pinned to: those it ran on, when it was
    /// kept waiting (preempted, runnable) for at least [`PINNED_WAIT_NS`]
    /// in all while a CPU outside them sat idle, which a scheduler free to
    /// move it does not do; or when it ran on one CPU only and waited
    /// runnable there for at least [`PINNED_ONE_CPU_WAIT_NS`] in all, which
    /// load balancing does not leave alone that long. None: free to run
    /// anywhere, as far as the trace shows.
    pub pinned: Option<Vec<u32>>,
}

/// Waiting this long in all, runnable, while a CPU outside those a task ran
/// on was idle, shows that the task could not move there.
pub const PINNED_WAIT_NS: u64 = 20_000_000;

/// Waiting this long in all, runnable, on the one CPU a task ever ran on
/// shows that it could not move.
pub const PINNED_ONE_CPU_WAIT_NS: u64 = 200_000_000;

impl TaskModel {
    /// Total CPU time of its run bursts.
    pub fn cpu_ns(&self) -> u64 {
        self.steps.iter().map(|s| if let Step::Run(n) = s { *n } else { 0 }).sum()
    }
}

#[derive(Default)]
struct Track {
    /// Switched in at this time (running now).
    on_cpu_since: Option<u64>,
    /// CPU time of the burst so far.
    burst: u64,
    /// Blocked since, and woken at / by.
    blocked_since: Option<u64>,
    woken: Option<(u64, WokenBy)>,
    /// sched_process_exit seen: its next switch-out is its last.
    exiting: bool,
    exited: bool,
    /// Preempted at this time, with these CPUs idle then.
    waiting: Option<(u64, Vec<u32>)>,
    /// Time spent waiting runnable while each CPU was idle.
    waited_while_idle: BTreeMap<u32, u64>,
    /// Time spent waiting runnable.
    waited: u64,
    /// Runnable without a sleep since (its first appearance or its last wakeup).
    runnable_since: u64,
}

type Tasks = BTreeMap<i32, (TaskModel, Track)>;

fn entry<'a>(tasks: &'a mut Tasks, pid: i32, comm: &str, prio: i64, start_ns: u64) -> Option<&'a mut (TaskModel, Track)> {
    if pid == 0 {
        return None;
    }
    let e = tasks.entry(pid).or_insert_with(|| {
        let m = TaskModel { pid, comm: comm.to_string(), prio, start_ns, steps: Vec::new(), runnable_at_end: false, ran_on: BTreeSet::new(), pinned: None };
        (m, Track { runnable_since: start_ns, ..Track::default() })
    });
    if !comm.is_empty() {
        e.0.comm = comm.to_string();
    }
    e.0.prio = prio;
    Some(e)
}

/// The waker's burst so far, then `step` (a wakeup or a fork), so that the
/// replay does it at the same point of its work.
fn waker_step(tasks: &mut Tasks, waker: i32, ts: u64, step: Step) {
    if let Some((m, t)) = tasks.get_mut(&waker) {
        if let Some(since) = t.on_cpu_since {
            t.burst += ts - since;
            t.on_cpu_since = Some(ts);
        }
        if t.burst > 0 {
            m.steps.push(Step::Run(std::mem::take(&mut t.burst)));
        }
        m.steps.push(step);
    }
}

/// What `derive` takes to run on a CPU that a task it believed there was
/// seen to leave for another (its switch out was lost): no task.
const LOST_PID: i32 = -1;

/// Derive the task model from events in time order, keeping those in
/// `[window.0, window.1)` (ns of the trace clock) when a window is given.
/// The idle tasks (pid 0) are not tasks of the workload.
pub fn derive(events: &[SchedEvent], window: Option<(u64, u64)>) -> Vec<TaskModel> {
    let in_window = |t: u64| window.is_none_or(|(a, b)| (a..b).contains(&t));
    let t0 = events.iter().map(|e| e.ts_ns).find(|&t| in_window(t)).unwrap_or(0);
    let end = events.iter().rev().map(|e| e.ts_ns).find(|&x| in_window(x)).unwrap_or(t0);
    let mut tasks = Tasks::new();
    // The task on each CPU (0: idle), once a switch there is seen.
    let mut current: BTreeMap<u32, i32> = BTreeMap::new();
    for ev in events.iter().filter(|e| in_window(e.ts_ns)) {
        let ts = ev.ts_ns;
        match &ev.kind {
            Kind::Switch { prev, left, next } => {
                let seen_cpu = current.contains_key(&ev.cpu);
                // The task we took to be on this CPU is not the one leaving
                // it: it left for a CPU the trace does not show.
                if let Some(&old) = current.get(&ev.cpu).filter(|&&old| old != prev.pid && old != 0) {
                    if let Some((_, t)) = tasks.get_mut(&old) {
                        if let Some(since) = t.on_cpu_since.take() {
                            t.burst += ts - since;
                        }
                    }
                }
                let idle: Vec<u32> = current.iter().filter(|&(&c, &p)| p == 0 && c != ev.cpu).map(|(&c, _)| c).collect();
                current.insert(ev.cpu, next.pid);
                if let Some((m, t)) = entry(&mut tasks, prev.pid, &prev.comm, prev.prio, ts - t0) {
                    m.ran_on.insert(ev.cpu);
                    match t.on_cpu_since.take() {
                        Some(since) => t.burst += ts - since,
                        // Running when the trace began on a CPU not seen before.
                        None if !seen_cpu && m.steps.is_empty() && t.blocked_since.is_none() => t.burst += ts - t0,
                        None => {}
                    }
                    let left = if t.exiting { LeftAs::Dead } else { *left };
                    if left == LeftAs::Preempted {
                        t.waiting = Some((ts, idle));
                    } else {
                        if t.burst > 0 {
                            m.steps.push(Step::Run(std::mem::take(&mut t.burst)));
                        }
                        if left == LeftAs::Dead {
                            if !t.exited {
                                m.steps.push(Step::Exit);
                            }
                            t.exited = true;
                        } else {
                            t.blocked_since = Some(ts);
                            t.woken = None;
                        }
                    }
                }
                if let Some((m, t)) = entry(&mut tasks, next.pid, &next.comm, next.prio, ts - t0) {
                    m.ran_on.insert(ev.cpu);
                    if let Some(since) = t.blocked_since.take() {
                        // Switched in without a wakeup in the trace: a wakeup
                        // not recorded; the sleep ended by the time it ran.
                        let (at, by) = t.woken.take().unwrap_or((ts, WokenBy::Timer));
                        m.steps.push(Step::Sleep { ns: at - since, by });
                        t.runnable_since = at - t0;
                    }
                    if let Some((since, idle)) = t.waiting.take() {
                        for c in idle {
                            *t.waited_while_idle.entry(c).or_default() += ts - since;
                        }
                        t.waited += ts - since;
                    }
                    // Switched in while taken to be running on another CPU:
                    // its switch out there was lost. Its time there counts
                    // until now, as the end of a window would count it.
                    if let Some(since) = t.on_cpu_since {
                        t.burst += ts - since;
                    }
                    t.on_cpu_since = Some(ts);
                }
                // No other CPU holds it any more; what runs there is unknown
                // (LOST_PID) until its next switch.
                for (&c, p) in current.iter_mut() {
                    if c != ev.cpu && *p == next.pid && next.pid != 0 {
                        *p = LOST_PID;
                    }
                }
            }
            Kind::Wake { task, waker, .. } => {
                // A wakeup by a task not seen running is no dependency the
                // replay can keep: it ends the sleep on time instead.
                let known = tasks.contains_key(waker);
                let by = if *waker == 0 || *waker == task.pid || !known { WokenBy::Timer } else { WokenBy::Task(*waker) };
                let mut woke = false;
                // A task first seen being woken by another task was blocked
                // before the trace began: it starts by waiting for its waker.
                let fresh = !tasks.contains_key(&task.pid);
                if let Some((_, t)) = entry(&mut tasks, task.pid, &task.comm, task.prio, ts - t0) {
                    if fresh && by != WokenBy::Timer {
                        t.blocked_since = Some(ts);
                    }
                    if t.blocked_since.is_some() && t.woken.is_none() {
                        t.woken = Some((ts, by));
                        woke = true;
                    }
                }
                if let (true, WokenBy::Task(w)) = (woke, by) {
                    waker_step(&mut tasks, w, ts, Step::Wake(task.pid));
                }
            }
            Kind::Fork { parent, child } => {
                if *parent == 0 || *parent == child.pid || !tasks.contains_key(parent) || tasks.contains_key(&child.pid) {
                    continue;
                }
                // The child exists from here, waiting for its parent's fork.
                if let Some((_, t)) = entry(&mut tasks, child.pid, &child.comm, child.prio, ts - t0) {
                    t.blocked_since = Some(ts);
                    t.woken = Some((ts, WokenBy::Task(*parent)));
                }
                waker_step(&mut tasks, *parent, ts, Step::Fork(child.pid));
            }
            Kind::Exit { task } => {
                if let Some((_, t)) = tasks.get_mut(&task.pid) {
                    t.exiting = true;
                }
            }
        }
    }
    let all_cpus: BTreeSet<u32> = current.keys().copied().collect();
    tasks
        .into_values()
        .map(|(mut m, mut t)| {
            if let Some(since) = t.on_cpu_since {
                t.burst += end - since;
            }
            if t.burst > 0 {
                m.steps.push(Step::Run(t.burst));
            }
            if let Some((since, idle)) = t.waiting.take() {
                for c in idle {
                    *t.waited_while_idle.entry(c).or_default() += end - since;
                }
                t.waited += end - since;
                t.waiting = Some((since, Vec::new()));
            }
            if t.exiting && !t.exited {
                m.steps.push(Step::Exit);
            }
            // Runnable for at least the second half of the trace.
            let span = end - t0;
            let runnable = span.saturating_sub(t.runnable_since);
            let long = runnable >= span - runnable;
            m.runnable_at_end = long && !t.exiting && !t.exited && t.blocked_since.is_none() && (t.on_cpu_since.is_some() || t.waiting.is_some());
            let outside = t.waited_while_idle.iter().filter(|(c, _)| !m.ran_on.contains(c)).map(|(_, &ns)| ns).max().unwrap_or(0);
            let one_cpu = m.ran_on.len() == 1 && t.waited >= PINNED_ONE_CPU_WAIT_NS;
            if (outside >= PINNED_WAIT_NS || one_cpu) && m.ran_on != all_cpus {
                m.pinned = Some(m.ran_on.iter().copied().collect());
            }
            m
        })
        .collect()
}
