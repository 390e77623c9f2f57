//! What every workload builder needs (the kinds in mod.rs and rt-app
//! import alike): the error type, CPU-list and priority checks, and a new
//! task with its scheduler-visible attributes. It sits below both, so
//! that rtapp.rs and the kinds do not import each other.

use crate::machine::cpumask::CpuMask;
use crate::sched::sim::Sim;
use crate::sched::task::{Policy, RtEntity, SchedEntity, Task, TaskState, TaskStats};
use crate::workload::scenario::CpuList;

/// A workload could not be built. The message names the scenario field
/// (or, for rt-app, the file and the JSON path) to fix.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// A scenario field holds a value the workload cannot use.
    #[error("{field}: {msg}")]
    Field {
        /// The dotted scenario path, e.g. `workload.0.count`.
        field: String,
        /// What is wrong and how to fix it.
        msg: String,
    },
    /// A file the workload names cannot be read.
    #[error("{field}: cannot read {path}: {err}")]
    Read {
        /// The scenario field naming the file.
        field: String,
        /// The path tried.
        path: String,
        /// The I/O error.
        err: String,
    },
    /// rt-app JSON that does not parse.
    #[error("{file}:{line}:{column}: malformed JSON: {msg}")]
    RtappJson {
        /// The rt-app file (or the scenario field holding the JSON).
        file: String,
        /// Line and column of the error.
        line: usize,
        /// Column of the error.
        column: usize,
        /// The JSON parser's message.
        msg: String,
    },
    /// An rt-app description that parses but cannot be simulated.
    #[error("{file}: {path}: {msg}")]
    Rtapp {
        /// The rt-app file (or the scenario field holding the JSON).
        file: String,
        /// The JSON path of the offending value, e.g. `tasks.t0.run`.
        path: String,
        /// What is wrong and how to fix it.
        msg: String,
    },
    /// An rt-app document without the expected top-level object.
    #[error("{file}: {msg}")]
    RtappFile {
        /// The rt-app file (or the scenario field holding the JSON).
        file: String,
        /// What is wrong.
        msg: String,
    },
}

impl BuildError {
    /// A bad value in scenario field `field`.
    pub fn field(field: impl Into<String>, msg: impl Into<String>) -> Self {
        BuildError::Field { field: field.into(), msg: msg.into() }
    }
}

pub(crate) fn cpus(sim: &Sim, list: &Option<CpuList>, field: &str) -> Result<CpuMask, BuildError> {
    match list {
        None => Ok(CpuMask::full(sim.nr_cpus())),
        Some(CpuList(s)) => CpuMask::parse_cpulist(s, sim.nr_cpus()).map_err(|e| BuildError::field(field, e.to_string())).and_then(|m| {
            if m.is_empty() {
                Err(BuildError::field(field, "the CPU list is empty"))
            } else {
                Ok(m)
            }
        }),
    }
}

/// `"{base}-{i}"`, the name of a workload's `i`-th task, written through
/// `itoa`: `format!` costs several times more, which shows when a workload
/// starts tens of thousands of tasks.
pub(crate) fn indexed_name(base: &str, i: u32) -> String {
    let mut digits = itoa::Buffer::new();
    let digits = digits.format(i);
    let mut name = String::with_capacity(base.len() + 1 + digits.len());
    name.push_str(base);
    name.push('-');
    name.push_str(digits);
    debug_assert_eq!(name, format!("{base}-{i}"));
    name
}

/// A task with the scheduler-visible attributes filled in, state New.
#[allow(clippy::too_many_arguments)]
pub fn new_task(name: String, workload: u32, tgid: u32, policy: Policy, nice: i32, rt_priority: u32, allowed: CpuMask, prog: u32) -> Task {
    Task {
        id: 0,
        name,
        workload,
        tgid,
        cgroup: "/".into(),
        cgrp: 0,
        policy,
        nice,
        rt_priority,
        static_prio: 0,
        prio: 0,
        class: crate::sched::task::ClassId::Fair,
        nr_cpus_allowed: allowed.weight() as u32,
        ran_on: CpuMask::new(allowed.nr_bits()),
        ran_on_last: u32::MAX,
        cpus_allowed: allowed,
        state: TaskState::New,
        cpu: 0,
        on_rq: false,
        se: SchedEntity::default(),
        rt: RtEntity::default(),
        working_set: 0,
        prog,
        pc: 0,
        loop_counts: Vec::new(),
        run_left: None,
        ple_deadline: None,
        next_wake: 0,
        measure_on_run: false,
        timer_gen: 0,
        wait_start: None,
        refill_left: 0,
        spinning: None,
        spin_start: 0,
        spin_retry: false,
        peers: Vec::new(),
        parent: None,
        wakee_flips: 0,
        wakee_flip_decay_ts: 0,
        last_wakee: None,
        recent_used_cpu: 0,
        last_ran: 0,
        created_at: 0,
        exited_at: None,
        stats: TaskStats::default(),
        stamp: None,
        woken_at: None,
        cpu_lock: None,
        timers: Vec::new(),
        scx: crate::sched::ext::ScxTask::new(0),
    }
}

pub(crate) fn check_nice(nice: i32, prefix: &str) -> Result<i32, BuildError> {
    if (-20..=19).contains(&nice) {
        Ok(nice)
    } else {
        Err(BuildError::field(format!("{prefix}.nice"), format!("{nice} is outside -20..19")))
    }
}

pub(crate) fn check_rt(policy: Policy, prio: u32, field: &str) -> Result<(), BuildError> {
    if policy.is_rt() && !(1..=99).contains(&prio) {
        return Err(BuildError::field(field, format!("SCHED_FIFO/SCHED_RR need priority 1..99, got {prio}")));
    }
    Ok(())
}
