//! `kind = "replay"`: one task replaying a recorded task's behaviour, step
//! by step (what `schedlab import-trace` writes, one workload per task).
//!
//! Steps, one string each:
//!
//! - `"run 2.5ms"`: burn CPU for this long;
//! - `"sleep 1ms"`: sleep this long (a sleep the trace shows ended by a
//!   timer or by a task left out of the replay);
//! - `"wait NAME"`: block until the replay task NAME wakes it (a sleep the
//!   trace shows ended by NAME); a wakeup posted before the wait lets it
//!   pass at once, so the dependency holds under any scheduler;
//! - `"wake NAME"`: wake the replay task NAME (its matching `wait`);
//! - `"fork NAME"`: start NAME, whose steps begin with `"wait"` on this
//!   task (a wake, spelled for the reader);
//! - `"run to end"`: burn CPU until the run ends (the task was still
//!   runnable when the trace ended);
//! - `"exit"`: the task exits (steps after it are never reached); a task
//!   that exits reports a makespan, from its `start` to its exit.
//!
//! Each (waker, wakee) pair has a wait object of its own (an unbounded
//! token counter), so a wakeup can only end the wait it was recorded for.

use std::collections::BTreeMap;

use crate::engine::time::{parse_duration, Ns, NSEC_PER_SEC};
use crate::engine::TaskId;
use crate::sched::ipc::WaitObj;
use crate::sched::sim::Sim;
use crate::sched::task::{Dist, Op};
use crate::workload::common::{check_nice, cpus, new_task, BuildError};
use crate::workload::scenario::{CpuList, Duration, WorkloadSpec};

/// `kind = "replay"`: one recorded task's steps (see the module documentation).
#[derive(Clone, Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplaySpec {
    /// The task's name, which other replay tasks' `wake` / `wait` / `fork` steps use.
    pub name: String,
    /// The task's pid in the trace (for the reader; unused).
    pub pid: Option<i64>,
    /// Nice value.
    pub nice: Option<i32>,
    /// Scheduling policy: "other", "batch", "idle", "fifo" or "rr".
    pub policy: Option<String>,
    /// RT priority for fifo / rr.
    pub priority: Option<u32>,
    /// CPUs the task may run on (cpulist).
    pub cpus: Option<CpuList>,
    /// The cgroup the task joins (a `[[cgroup]]` path).
    pub cgroup: Option<String>,
    /// When the task starts (default: at 0).
    pub start: Option<Duration>,
    /// What it does, in order.
    pub steps: Vec<String>,
}

/// One parsed step.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Step {
    Run(Ns),
    RunToEnd,
    Sleep(Ns),
    Wait(String),
    Wake(String),
    Exit,
}

fn parse_step(s: &str) -> Result<Step, String> {
    let s = s.trim();
    let (verb, arg) = s.split_once(char::is_whitespace).map_or((s, ""), |(v, a)| (v, a.trim()));
    let dur = |a: &str| parse_duration(a).map_err(|e| e.to_string());
    let name = |a: &str| if a.is_empty() { Err(format!("{verb:?} needs the name of a replay task")) } else { Ok(a.to_string()) };
    Ok(match verb {
        "run" if arg == "to end" => Step::RunToEnd,
        "run" => Step::Run(dur(arg)?),
        "sleep" => Step::Sleep(dur(arg)?),
        "wait" => Step::Wait(name(arg)?),
        "wake" | "fork" => Step::Wake(name(arg)?),
        "exit" if arg.is_empty() => Step::Exit,
        _ => return Err(format!("{s:?} is not a step: expected \"run DURATION\", \"run to end\", \"sleep DURATION\", \"wait NAME\", \"wake NAME\", \"fork NAME\" or \"exit\"")),
    })
}

/// The wait objects of a scenario's replay tasks, one per (waker, wakee)
/// pair, made before any workload is built.
#[derive(Default)]
pub struct Links {
    objs: BTreeMap<(String, String), u32>,
}

impl Links {
    /// Makes the objects every replay workload of `specs` needs, checking
    /// that the names they use are replay tasks.
    pub fn new(sim: &mut Sim, specs: &[WorkloadSpec]) -> Result<Links, BuildError> {
        let mut names = BTreeMap::new();
        for (w, spec) in specs.iter().enumerate() {
            if let WorkloadSpec::Replay(r) = spec {
                if names.insert(r.name.clone(), w).is_some() {
                    return Err(BuildError::field(format!("workload.{w}.name"), format!("{:?}: two replay tasks have this name", r.name)));
                }
            }
        }
        let mut links = Links::default();
        for (w, spec) in specs.iter().enumerate() {
            let WorkloadSpec::Replay(r) = spec else { continue };
            for (i, s) in r.steps.iter().enumerate() {
                let field = || format!("workload.{w}.steps[{i}]");
                let pair = match parse_step(s).map_err(|e| BuildError::field(field(), e))? {
                    Step::Wait(x) => (x, r.name.clone()),
                    Step::Wake(x) => (r.name.clone(), x),
                    _ => continue,
                };
                for n in [&pair.0, &pair.1] {
                    if !names.contains_key(n) {
                        return Err(BuildError::field(field(), format!("{n:?} is not the name of a replay workload")));
                    }
                }
                links.objs.entry(pair).or_insert_with(|| {
                    sim.objs.push(WaitObj { capacity: u64::MAX, ..Default::default() });
                    (sim.objs.len() - 1) as u32
                });
            }
        }
        Ok(links)
    }
}

/// Builds a replay workload's task.
pub fn build(sim: &mut Sim, w: u32, tgid: u32, r: &ReplaySpec, links: &Links, prefix: &str) -> Result<Vec<TaskId>, BuildError> {
    let policy = crate::workload::policy_of(&r.policy, r.priority.unwrap_or(0), prefix)?;
    let nice = check_nice(r.nice.unwrap_or(0), prefix)?;
    let allowed = cpus(sim, &r.cpus, &format!("{prefix}.cpus"))?;
    let obj = |from: &str, to: &str| links.objs[&(from.to_string(), to.to_string())];
    let mut ops = Vec::new();
    for (i, s) in r.steps.iter().enumerate() {
        let step = parse_step(s).map_err(|e| BuildError::field(format!("{prefix}.steps[{i}]"), e))?;
        match step {
            Step::Run(ns) => ops.push(Op::Run(Dist::Const(ns))),
            Step::Sleep(ns) => ops.push(Op::Sleep(Dist::Const(ns))),
            Step::Wait(x) => ops.push(Op::Wait { obj: obj(&x, &r.name) }),
            Step::Wake(x) => ops.push(Op::Post { obj: obj(&r.name, &x), sync: false }),
            Step::Exit => ops.push(Op::Exit),
            Step::RunToEnd => {
                let to = ops.len() as u32;
                ops.push(Op::Run(Dist::Const(NSEC_PER_SEC)));
                ops.push(Op::Loop { to, count: None, slot: 0 });
            }
        }
    }
    // A task that exits has a makespan: from its start to its exit.
    sim.metrics[w as usize].finite = ops.iter().any(|o| matches!(o, Op::Exit));
    let prog = crate::workload::add_program(sim, ops);
    let mut t = new_task(r.name.clone(), w, tgid, policy, nice, r.priority.unwrap_or(0), allowed, prog);
    if let Some(cg) = &r.cgroup {
        if !cg.starts_with('/') {
            return Err(BuildError::field(format!("{prefix}.cgroup"), format!("{cg:?} must be an absolute path such as \"/workload/a\"")));
        }
        t.cgroup = cg.clone();
    }
    Ok(vec![sim.add_task(t)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_parse_and_refuse_what_they_do_not_know() {
        assert_eq!(parse_step("run 2.5ms"), Ok(Step::Run(2_500_000)));
        assert_eq!(parse_step(" run to end "), Ok(Step::RunToEnd));
        assert_eq!(parse_step("sleep 10us"), Ok(Step::Sleep(10_000)));
        assert_eq!(parse_step("wait app 2"), Ok(Step::Wait("app 2".into())));
        assert_eq!(parse_step("fork kid"), Ok(Step::Wake("kid".into())));
        assert_eq!(parse_step("exit"), Ok(Step::Exit));
        assert!(parse_step("jump 3").unwrap_err().contains("not a step"));
        assert!(parse_step("wake").unwrap_err().contains("name"));
        assert!(parse_step("run 3 parsecs").is_err());
    }
}
