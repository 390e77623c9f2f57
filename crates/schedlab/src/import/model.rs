//! The task model derived from a trace's scheduler events: for each task,
//! the sequence of what it did (run bursts, sleeps and what ended each
//! sleep, exit), independent of where and when the recorded scheduler ran
//! it, so that a replay under another scheduler keeps the work and the
//! dependencies between tasks rather than the recorded timing.

use std::collections::BTreeMap;

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
}

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
}

type Tasks = BTreeMap<i32, (TaskModel, Track)>;

fn entry<'a>(tasks: &'a mut Tasks, pid: i32, comm: &str, prio: i64, start_ns: u64) -> Option<&'a mut (TaskModel, Track)> {
    if pid == 0 {
        return None;
    }
    let e = tasks.entry(pid).or_insert_with(|| (TaskModel { pid, comm: comm.to_string(), prio, start_ns, steps: Vec::new() }, Track::default()));
    e.0.comm = comm.to_string();
    e.0.prio = prio;
    Some(e)
}

/// Derive the task model from events in time order, keeping those in
/// `[window.0, window.1)` (ns of the trace clock) when a window is given.
/// The idle tasks (pid 0) are not tasks of the workload.
pub fn derive(events: &[SchedEvent], window: Option<(u64, u64)>) -> Vec<TaskModel> {
    let in_window = |t: u64| window.is_none_or(|(a, b)| (a..b).contains(&t));
    let t0 = events.iter().map(|e| e.ts_ns).find(|&t| in_window(t)).unwrap_or(0);
    let mut tasks = Tasks::new();
    for ev in events.iter().filter(|e| in_window(e.ts_ns)) {
        let ts = ev.ts_ns;
        match &ev.kind {
            Kind::Switch { prev, left, next } => {
                if let Some((m, t)) = entry(&mut tasks, prev.pid, &prev.comm, prev.prio, ts - t0) {
                    if let Some(since) = t.on_cpu_since.take() {
                        t.burst += ts - since;
                    }
                    if *left != LeftAs::Preempted {
                        if t.burst > 0 {
                            m.steps.push(Step::Run(std::mem::take(&mut t.burst)));
                        }
                        if *left == LeftAs::Dead {
                            m.steps.push(Step::Exit);
                        } else {
                            t.blocked_since = Some(ts);
                            t.woken = None;
                        }
                    }
                }
                if let Some((m, t)) = entry(&mut tasks, next.pid, &next.comm, next.prio, ts - t0) {
                    if let Some(since) = t.blocked_since.take() {
                        // Switched in without a wakeup in the trace: a wakeup
                        // not recorded; the sleep ended by the time it ran.
                        let (at, by) = t.woken.take().unwrap_or((ts, WokenBy::Timer));
                        m.steps.push(Step::Sleep { ns: at - since, by });
                    }
                    t.on_cpu_since = Some(ts);
                }
            }
            Kind::Wake { task, waker, .. } => {
                let by = if *waker == 0 || *waker == task.pid { WokenBy::Timer } else { WokenBy::Task(*waker) };
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
                    if let Some((m, t)) = tasks.get_mut(&w) {
                        // The waker's burst so far, then the wakeup, so the
                        // replay wakes at the same point of its work.
                        if let Some(since) = t.on_cpu_since {
                            t.burst += ts - since;
                            t.on_cpu_since = Some(ts);
                        }
                        if t.burst > 0 {
                            m.steps.push(Step::Run(std::mem::take(&mut t.burst)));
                        }
                        m.steps.push(Step::Wake(task.pid));
                    }
                }
            }
        }
    }
    tasks
        .into_values()
        .map(|(mut m, mut t)| {
            if let Some(since) = t.on_cpu_since {
                let end = events.iter().rev().map(|e| e.ts_ns).find(|&x| in_window(x)).unwrap_or(since);
                t.burst += end - since;
            }
            if t.burst > 0 {
                m.steps.push(Step::Run(t.burst));
            }
            m
        })
        .collect()
}
