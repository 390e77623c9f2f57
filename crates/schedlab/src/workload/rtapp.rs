//! rt-app import: tasks described in rt-app's JSON format (doc/tutorial.txt
//! of the rt-app repository) become behaviour programs.
//!
//! Supported: `global.default_policy`; per task `instance`, `loop`, `delay`,
//! `policy`, `priority` (RT priority, or the nice value of fair policies, as
//! rt-app applies it), `nice`, `cpus`, `taskgroup` and `phases` (each with
//! `loop`, `policy`, `priority`, `nice`, `cpus`, `taskgroup`: rt-app moves the
//! thread into it when the phase starts); the events `run`,
//! `runtime`, `sleep`, `timer` (`ref`, `period`, `mode` relative/absolute;
//! its wakeup latency is the workload's latency, rt-app's wu_lat), `lock`
//! and `unlock` (a blocking mutex), `barrier`, `fork`, `yield`. Event keys
//! may carry suffixes (`run0`, `sleep1`) and repeat, as rt-app and workgen
//! allow; events run in file order. C-style comments are allowed.
//!
//! Not modelled, and an error naming the key and its JSON path: the events
//! `wait`, `signal`, `broad`, `sync`, `suspend`, `resume`, `mem`, `iorun`,
//! and SCHED_DEADLINE, uclamp and NUMA binding. `run` is not scaled by CPU
//! capacity (the machine has one capacity), so it equals `runtime`. Global
//! settings about logging, calibration and memory locking have no effect;
//! `global.duration` is not applied: the scenario's duration ends the run.
//! A timer shared by several threads (a `ref` without the "unique" prefix
//! used by more than one thread) is an error: its shared expiry is not
//! modelled. A forked thread is a new process with its parent's attributes,
//! then the forked task's own policy and affinity.

use std::collections::BTreeMap;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::machine::cpumask::CpuMask;
use crate::engine::TaskId;
use crate::workload::scenario::RtappSpec;
use crate::sched::ipc::WaitObj;
use crate::sched::sim::Sim;
use crate::sched::task::{Dist, Op, Policy, Program};
use crate::engine::time::{Ns, NSEC_PER_USEC};
use crate::workload::common::{check_nice, check_rt, new_task, BuildError};

/// A JSON value that keeps object keys in file order, duplicates included.
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    /// `null`.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A number with a fraction or exponent.
    Float(f64),
    /// A string.
    Str(String),
    /// An array.
    Arr(Vec<Json>),
    /// An object, keys in file order (rt-app's event order matters).
    Obj(Vec<(String, Json)>),
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Json;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_unit<E>(self) -> Result<Json, E> {
                Ok(Json::Null)
            }
            fn visit_bool<E>(self, v: bool) -> Result<Json, E> {
                Ok(Json::Bool(v))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Json, E> {
                Ok(Json::Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Json, E> {
                i64::try_from(v).map(Json::Int).map_err(|_| E::custom("number too large"))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Json, E> {
                Ok(Json::Float(v))
            }
            fn visit_str<E>(self, v: &str) -> Result<Json, E> {
                Ok(Json::Str(v.to_string()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Json, A::Error> {
                let mut v = Vec::new();
                while let Some(x) = a.next_element()? {
                    v.push(x);
                }
                Ok(Json::Arr(v))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Json, A::Error> {
                let mut v = Vec::new();
                while let Some((k, x)) = a.next_entry::<String, Json>()? {
                    v.push((k, x));
                }
                Ok(Json::Obj(v))
            }
        }
        d.deserialize_any(V)
    }
}

impl Json {
    fn kind(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "a boolean",
            Json::Int(_) | Json::Float(_) => "a number",
            Json::Str(_) => "a string",
            Json::Arr(_) => "an array",
            Json::Obj(_) => "an object",
        }
    }
}

/// Blanks out /* */ and // comments (json-c accepts them), keeping every
/// other character and line break in place so that error positions hold.
fn strip_comments(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let (mut i, mut in_str) = (0, false);
    while i < b.len() {
        let c = b[i];
        if in_str {
            out.push(c);
            if c == b'\\' && i + 1 < b.len() {
                out.push(b[i + 1]);
                i += 1;
            } else if c == b'"' {
                in_str = false;
            }
        } else if c == b'"' {
            in_str = true;
            out.push(c);
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let end = text[i + 2..].find("*/").map_or(b.len(), |e| i + 2 + e + 2);
            out.extend(b[i..end].iter().map(|&x| if x == b'\n' { b'\n' } else { b' ' }));
            i = end;
            continue;
        } else if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                out.push(b' ');
                i += 1;
            }
            continue;
        } else {
            out.push(c);
        }
        i += 1;
    }
    // Only ASCII bytes were replaced, by ASCII spaces.
    String::from_utf8(out).expect("comment stripping keeps UTF-8")
}

/// The longest duration an rt-app event may give, in microseconds (10^12,
/// about 11.6 days): far beyond any run, far below the clock's overflow.
pub const MAX_US: u64 = 1_000_000_000_000;

/// Parses rt-app JSON; errors are "FILE:LINE:COLUMN: what".
pub fn parse(text: &str, file: &str) -> Result<Json, BuildError> {
    serde_json::from_str::<Json>(&strip_comments(text)).map_err(|e| {
        let msg = e.to_string();
        let msg = msg.split(" at line ").next().unwrap_or(&msg).to_string();
        BuildError::RtappJson { file: file.to_string(), line: e.line(), column: e.column(), msg }
    })
}

/// The kinds of event rt-app has that are not modelled here.
const UNSUPPORTED_EVENTS: &[&str] = &["wait", "signal", "broad", "sync", "suspend", "resume", "mem", "iorun", "pmu"];
/// Keys that configure what is not modelled.
const UNSUPPORTED_PROPS: &[&str] = &["dl-runtime", "dl-period", "dl-deadline", "period", "deadline", "util_min", "util_max", "membind_nodes"];
/// Global keys that only concern rt-app's own logging, calibration and setup.
const INERT_GLOBALS: &[&str] = &[
    "duration", "calibration", "pi_enabled", "lock_pages", "logdir", "log_basename", "log_size", "ftrace", "gnuplot", "io_device", "mem_buffer_size", "cumulative_slack",
];

/// Scheduling attributes set at task or phase level.
#[derive(Clone, Debug, Default)]
struct Attrs {
    policy: Option<Policy>,
    priority: Option<i64>,
    nice: Option<i64>,
    cpus: Option<CpuMask>,
}

struct Builder<'a> {
    sim: &'a mut Sim,
    file: String,
    default_policy: Policy,
    mutexes: BTreeMap<String, u32>,
    barriers: BTreeMap<String, (u32, u32)>,
    /// Per task name: the program forked copies of it run.
    fork_progs: BTreeMap<String, u32>,
}

impl Builder<'_> {
    fn err(&self, path: &str, msg: impl std::fmt::Display) -> BuildError {
        BuildError::Rtapp { file: self.file.clone(), path: path.to_string(), msg: msg.to_string() }
    }

    /// A scenario-field error from the shared checks, placed in this file:
    /// its field is the JSON path.
    fn within(&self, e: BuildError) -> BuildError {
        match e {
            BuildError::Field { field, msg } => BuildError::Rtapp { file: self.file.clone(), path: field, msg },
            other => other,
        }
    }

    fn us(&self, v: &Json, path: &str) -> Result<Ns, BuildError> {
        match v {
            // Found by fuzzing: larger values overflowed the simulated clock.
            Json::Int(n) if *n > MAX_US as i64 => Err(self.err(path, format!("{n} us is longer than the longest duration the simulator takes ({MAX_US} us, about 11 days)"))),
            Json::Float(f) if *f > MAX_US as f64 => Err(self.err(path, format!("{f} us is longer than the longest duration the simulator takes ({MAX_US} us, about 11 days)"))),
            Json::Int(n) if *n >= 0 => Ok(*n as Ns * NSEC_PER_USEC),
            Json::Float(f) if *f >= 0.0 => Ok((*f * NSEC_PER_USEC as f64) as Ns),
            _ => Err(self.err(path, format!("expected a duration in microseconds (a number >= 0), got {}", v.kind()))),
        }
    }

    fn int(&self, v: &Json, path: &str) -> Result<i64, BuildError> {
        match v {
            Json::Int(n) => Ok(*n),
            _ => Err(self.err(path, format!("expected an integer, got {}", v.kind()))),
        }
    }

    fn string<'j>(&self, v: &'j Json, path: &str) -> Result<&'j str, BuildError> {
        match v {
            Json::Str(s) => Ok(s),
            _ => Err(self.err(path, format!("expected a string, got {}", v.kind()))),
        }
    }

    /// A `taskgroup`: a cgroup path below rt-app's cgroup mount, "" or "/"
    /// for the root. Returns the absolute path.
    fn taskgroup(&self, v: &Json, path: &str) -> Result<String, BuildError> {
        let g = self.string(v, path)?;
        let abs = if g.starts_with('/') { g.to_string() } else { format!("/{g}") };
        if abs != "/" {
            crate::sched::cgroup::check_path(&abs).map_err(|e| self.err(path, e.to_string()))?;
        }
        Ok(abs)
    }

    fn policy(&self, v: &Json, path: &str) -> Result<Policy, BuildError> {
        let s = self.string(v, path)?;
        match s {
            "SCHED_OTHER" => Ok(Policy::Other),
            "SCHED_FIFO" => Ok(Policy::Fifo),
            "SCHED_RR" => Ok(Policy::Rr),
            "SCHED_IDLE" => Ok(Policy::Idle),
            "SCHED_BATCH" => Ok(Policy::Batch),
            "SCHED_DEADLINE" => Err(self.err(path, "SCHED_DEADLINE is not modelled: use SCHED_FIFO or SCHED_OTHER")),
            _ => Err(self.err(path, format!("unknown policy {s:?}: expected SCHED_OTHER, SCHED_FIFO, SCHED_RR, SCHED_IDLE or SCHED_BATCH"))),
        }
    }

    fn cpus(&self, v: &Json, path: &str) -> Result<CpuMask, BuildError> {
        let n = self.sim.nr_cpus();
        let Json::Arr(list) = v else {
            return Err(self.err(path, format!("expected an array of CPU numbers such as [0, 2], got {}", v.kind())));
        };
        let mut m = CpuMask::new(n);
        for (i, c) in list.iter().enumerate() {
            match c {
                Json::Int(c) if (0..n as i64).contains(c) => m.set(*c as usize),
                _ => return Err(self.err(&format!("{path}[{i}]"), format!("expected a CPU number 0..{}", n - 1))),
            }
        }
        if m.is_empty() {
            return Err(self.err(path, "the CPU list is empty"));
        }
        Ok(m)
    }

    /// Reads a scheduling property into `a`; false if `key` is not one.
    fn attr(&self, key: &str, v: &Json, path: &str, a: &mut Attrs) -> Result<bool, BuildError> {
        match key {
            "policy" => a.policy = Some(self.policy(v, path)?),
            "priority" => a.priority = Some(self.int(v, path)?),
            "nice" => a.nice = Some(self.int(v, path)?),
            "cpus" => a.cpus = Some(self.cpus(v, path)?),
            k if UNSUPPORTED_PROPS.contains(&k) => {
                return Err(self.err(path, format!("{k:?} is not supported: SCHED_DEADLINE, uclamp and NUMA binding are not modelled")))
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// (policy, nice, RT priority) for attributes over defaults.
    fn sched(&self, a: &Attrs, base: &Attrs, path: &str) -> Result<(Policy, i32, u32), BuildError> {
        let policy = a.policy.or(base.policy).unwrap_or(self.default_policy);
        let prio = a.priority.or(base.priority);
        let (nice, rt) = if policy.is_rt() {
            // rt-app's default RT priority is 10.
            (a.nice.or(base.nice).unwrap_or(0), prio.unwrap_or(10))
        } else {
            // For fair policies rt-app applies `priority` as the nice value.
            (a.nice.or(base.nice).or(prio).unwrap_or(0), 0)
        };
        let nice = i32::try_from(nice).map_err(|_| self.err(path, format!("nice {nice} is outside -20..19")))?;
        let nice = check_nice(nice, path).map_err(|e| self.within(e))?;
        let rt = u32::try_from(rt).map_err(|_| self.err(path, format!("priority {rt} is outside 1..99")))?;
        check_rt(policy, rt, &format!("{path}.priority")).map_err(|e| self.within(e))?;
        Ok((policy, nice, rt))
    }

    /// Compiles one event into ops.
    fn event(&mut self, key: &str, v: &Json, path: &str, timers: &mut BTreeMap<String, u32>, ops: &mut Vec<Op>) -> Result<(), BuildError> {
        // rt-app matches event kinds by prefix ("run0", "sleep2").
        let kind = ["runtime", "run", "sleep", "timer", "unlock", "lock", "barrier", "fork", "yield"]
            .into_iter()
            .find(|k| key.starts_with(k))
            .or_else(|| UNSUPPORTED_EVENTS.iter().copied().find(|k| key.starts_with(k)));
        match kind {
            Some("run") | Some("runtime") => ops.push(Op::Run(Dist::Const(self.us(v, path)?))),
            Some("sleep") => ops.push(Op::Sleep(Dist::Const(self.us(v, path)?))),
            Some("timer") => {
                let Json::Obj(fields) = v else {
                    return Err(self.err(path, format!("expected an object such as {{\"ref\": \"unique\", \"period\": 10000}}, got {}", v.kind())));
                };
                let (mut name, mut period, mut absolute) = (None, None, false);
                for (k, x) in fields {
                    let p = format!("{path}.{k}");
                    match k.as_str() {
                        "ref" => name = Some(self.string(x, &p)?.to_string()),
                        "period" => period = Some(self.us(x, &p)?),
                        "mode" => {
                            absolute = match self.string(x, &p)? {
                                "absolute" => true,
                                "relative" => false,
                                m => return Err(self.err(&p, format!("unknown timer mode {m:?}: expected \"relative\" or \"absolute\""))),
                            }
                        }
                        _ => return Err(self.err(&p, "unknown timer field: expected ref, period or mode")),
                    }
                }
                let name = name.ok_or_else(|| self.err(path, "the timer needs a \"ref\" name"))?;
                let period = period.filter(|&p| p > 0).ok_or_else(|| self.err(path, "the timer needs a positive \"period\" (us)"))?;
                let n = timers.len() as u32;
                let slot = *timers.entry(name).or_insert(n);
                ops.push(Op::Timer { slot, period: Dist::Const(period), absolute, record: true });
            }
            Some(k @ ("lock" | "unlock")) => {
                let name = self.string(v, path)?.to_string();
                let obj = match self.mutexes.get(&name) {
                    Some(&o) => o,
                    None => {
                        // An unlocked mutex: one token (Wait takes it, Post gives it back).
                        self.sim.objs.push(WaitObj { tokens: 1, capacity: 1, ..Default::default() });
                        let o = (self.sim.objs.len() - 1) as u32;
                        self.mutexes.insert(name, o);
                        o
                    }
                };
                ops.push(if k == "lock" { Op::Wait { obj } } else { Op::Post { obj, sync: false } });
            }
            Some("barrier") => {
                let name = self.string(v, path)?;
                let &(obj, parties) = self.barriers.get(name).expect("barriers are counted first");
                ops.push(Op::Barrier { obj, parties });
            }
            Some("fork") => {
                let name = self.string(v, path)?;
                let prog = *self.fork_progs.get(name).ok_or_else(|| self.err(path, format!("fork of {name:?}: no task of that name in \"tasks\"")))?;
                ops.push(Op::Fork { prog });
            }
            Some("yield") => ops.push(Op::Yield),
            Some(k) => return Err(self.err(path, format!("the rt-app event {k:?} is not supported by schedlab: remove it or replace it with run/sleep/timer/lock/barrier events"))),
            None => return Err(self.err(path, format!("unknown key {key:?}: not an rt-app event or property"))),
        }
        Ok(())
    }
}

fn loop_count(b: &Builder, v: &Json, path: &str) -> Result<Option<u32>, BuildError> {
    match b.int(v, path)? {
        -1 => Ok(None),
        n if n >= 1 => u32::try_from(n).map(Some).map_err(|_| b.err(path, "loop count too large")),
        n => Err(b.err(path, format!("loop {n}: expected -1 (forever) or a count >= 1"))),
    }
}

/// Collects the barrier names a task's events use.
fn barrier_names(v: &Json, out: &mut Vec<String>) {
    if let Json::Obj(fields) = v {
        for (k, x) in fields {
            match x {
                Json::Str(s) if k.starts_with("barrier") => out.push(s.clone()),
                Json::Obj(_) if k == "phases" || !k.starts_with("timer") => barrier_names(x, out),
                _ => {}
            }
        }
    }
}

/// One compiled task: what its threads start with, and its program.
struct Compiled {
    name: String,
    instances: u32,
    attrs: (Policy, i32, u32),
    cpus: Option<CpuMask>,
    cgroup: Option<String>,
    prog: Vec<Op>,
    /// Ops that set the task's own attributes, for forked copies.
    prologue: Vec<Op>,
    finite: bool,
}

fn compile_task(b: &mut Builder, name: &str, v: &Json, path: &str) -> Result<Compiled, BuildError> {
    let Json::Obj(fields) = v else {
        return Err(b.err(path, format!("a task must be an object of properties and events, got {}", v.kind())));
    };
    let mut task = Attrs::default();
    let (mut instances, mut task_loop, mut delay, mut cgroup) = (1u32, None, 0, None);
    let mut phases: Vec<(String, &Json)> = Vec::new();
    let mut events: Vec<(&String, &Json)> = Vec::new();
    for (k, x) in fields {
        let p = format!("{path}.{k}");
        match k.as_str() {
            "instance" => instances = u32::try_from(b.int(x, &p)?).map_err(|_| b.err(&p, "expected a count >= 0"))?,
            "loop" => task_loop = loop_count(b, x, &p)?,
            "delay" => delay = b.us(x, &p)?,
            "taskgroup" => {
                let g = b.taskgroup(x, &p)?;
                if g != "/" {
                    cgroup = Some(g);
                }
            }
            "phases" => {
                let Json::Obj(ph) = x else { return Err(b.err(&p, format!("expected an object of phases, got {}", x.kind()))) };
                if ph.is_empty() {
                    return Err(b.err(&p, "no phases"));
                }
                phases.extend(ph.iter().map(|(n, v)| (format!("{p}.{n}"), v)));
            }
            _ => {
                if !b.attr(k, x, &p, &mut task)? {
                    events.push((k, x));
                }
            }
        }
    }
    if !phases.is_empty() && !events.is_empty() {
        return Err(b.err(&format!("{path}.{}", events[0].0), "events beside \"phases\": put them in a phase"));
    }
    if phases.is_empty() && events.is_empty() {
        return Err(b.err(path, "the task has no events: give e.g. \"run\": 1000, \"sleep\": 9000"));
    }
    let attrs = b.sched(&task, &Attrs::default(), path)?;
    let mut prologue = Vec::new();
    let (policy, nice, rt) = attrs;
    prologue.push(Op::SetSched { policy, nice, rt_priority: rt });
    if let Some(c) = &task.cpus {
        prologue.push(b.sim.set_affinity_op(c.clone()));
    }
    let mut ops = Vec::new();
    if delay > 0 {
        ops.push(Op::Sleep(Dist::Const(delay)));
    }
    let top = ops.len() as u32;
    let mut slots = 0u32;
    let mut timers = BTreeMap::new();
    let any_phase_cpus = phases.iter().any(|(_, v)| matches!(v, Json::Obj(f) if f.iter().any(|(k, _)| k == "cpus")));
    let any_phase_sched = phases.iter().any(|(_, v)| matches!(v, Json::Obj(f) if f.iter().any(|(k, _)| ["policy", "priority", "nice"].contains(&k.as_str()))));
    let any_phase_group = phases.iter().any(|(_, v)| matches!(v, Json::Obj(f) if f.iter().any(|(k, _)| k == "taskgroup")));
    let single = [(path.to_string(), v)];
    let list: Vec<(String, &Json)> = if phases.is_empty() { single.to_vec() } else { phases };
    for (ppath, pv) in &list {
        let in_phase = !std::ptr::eq(*pv, v);
        let mut phase = Attrs::default();
        let mut phase_loop = Some(1);
        let mut phase_group: Option<String> = None;
        let mut body = Vec::new();
        let Json::Obj(pf) = pv else { return Err(b.err(ppath, format!("a phase must be an object of events, got {}", pv.kind()))) };
        for (k, x) in pf {
            let p = format!("{ppath}.{k}");
            if in_phase {
                if k == "loop" {
                    phase_loop = loop_count(b, x, &p)?;
                    continue;
                }
                if b.attr(k, x, &p, &mut phase)? {
                    continue;
                }
                if k == "taskgroup" {
                    phase_group = Some(b.taskgroup(x, &p)?);
                    continue;
                }
                if ["instance", "delay", "phases"].contains(&k.as_str()) {
                    return Err(b.err(&p, format!("{k:?} belongs to the task, not to a phase")));
                }
            } else if ["policy", "priority", "nice", "cpus", "loop", "instance", "delay", "taskgroup"].contains(&k.as_str()) || UNSUPPORTED_PROPS.contains(&k.as_str()) {
                continue;
            }
            b.event(k, x, &p, &mut timers, &mut body)?;
        }
        if body.is_empty() {
            return Err(b.err(ppath, "the phase has no events"));
        }
        // Phase attributes apply when the phase starts; phases that set none
        // return to the task's own (rt-app keeps the last ones set; this
        // differs only when phases set different parameters).
        if any_phase_sched {
            let (policy, nice, rt) = b.sched(&phase, &task, ppath)?;
            ops.push(Op::SetSched { policy, nice, rt_priority: rt });
        }
        if any_phase_cpus {
            let c = phase.cpus.clone().or_else(|| task.cpus.clone()).unwrap_or_else(|| CpuMask::full(b.sim.nr_cpus()));
            ops.push(b.sim.set_affinity_op(c));
        }
        // A phase's taskgroup: rt-app moves the thread there when the phase
        // starts (phases without one go back to the task's).
        if any_phase_group {
            let g = phase_group.or_else(|| cgroup.clone()).unwrap_or_else(|| "/".to_string());
            ops.push(Op::SetCgroup { group: b.sim.cg.mkdir(&g) });
        }
        let start = ops.len() as u32;
        ops.extend(body);
        match phase_loop {
            Some(1) => {}
            count => {
                ops.push(Op::Loop { to: start, count, slot: slots });
                slots += 1;
            }
        }
    }
    // A thread loops over its phases `loop` times (default forever).
    let finite = task_loop.is_some();
    // Forever, with nothing that takes time or can block, the thread would
    // spin through its events without simulated time passing.
    let takes_time = |o: &Op| match o {
        Op::Run(_) | Op::Sleep(_) | Op::SleepPeriodic { .. } | Op::Timer { .. } | Op::Wait { .. } | Op::Lock { .. } => true,
        Op::Barrier { parties, .. } => *parties > 1,
        _ => false,
    };
    if task_loop != Some(1) && !ops[top as usize..].iter().any(takes_time) {
        return Err(b.err(
            &format!("tasks.{name}"),
            "every event of this thread is instant (no run, sleep, timer, lock, or a barrier or resource another thread posts) and it loops forever, so no time would pass: add a run or sleep event, or give it a finite \"loop\"",
        ));
    }
    if task_loop != Some(1) {
        ops.push(Op::Loop { to: top, count: task_loop, slot: slots });
    }
    ops.push(Op::Exit);
    Ok(Compiled { name: name.to_string(), instances, attrs, cpus: task.cpus, cgroup, prog: ops, prologue, finite })
}

fn register(sim: &mut Sim, id: u32, ops: Vec<Op>) {
    let loop_slots = ops.iter().filter_map(|o| if let Op::Loop { slot, .. } = o { Some(slot + 1) } else { None }).max().unwrap_or(0);
    sim.programs[id as usize] = Program { ops, loop_slots };
}

/// Adds the tasks an rt-app description defines.
pub fn build(sim: &mut Sim, w: u32, tgid: u32, spec: &RtappSpec, prefix: &str) -> Result<Vec<TaskId>, BuildError> {
    let (file, text) = match (&spec.file, &spec.json) {
        (Some(f), None) => {
            let path = spec.base_dir.join(f);
            let text = std::fs::read_to_string(&path).map_err(|e| BuildError::Read { field: format!("{prefix}.file"), path: path.display().to_string(), err: e.to_string() })?;
            (path.display().to_string(), text)
        }
        (None, Some(j)) => (format!("{prefix}.json"), j.clone()),
        _ => return Err(BuildError::field(prefix, "give either file = \"x.json\" (relative to the scenario) or json = '...' with rt-app's JSON")),
    };
    let root = parse(&text, &file)?;
    let Json::Obj(top) = &root else { return Err(BuildError::RtappFile { file, msg: "expected a JSON object with \"tasks\" (and optionally \"global\")".into() }) };
    let mut b = Builder { sim, file: file.clone(), default_policy: Policy::Other, mutexes: BTreeMap::new(), barriers: BTreeMap::new(), fork_progs: BTreeMap::new() };
    let mut tasks = None;
    for (k, v) in top {
        match k.as_str() {
            "tasks" => tasks = Some(v),
            // Kept by rt-app for backward compatibility; resources are created on use.
            "resources" => {}
            "global" => {
                let Json::Obj(g) = v else { return Err(b.err("global", format!("expected an object, got {}", v.kind()))) };
                for (gk, gv) in g {
                    match gk.as_str() {
                        "default_policy" => b.default_policy = b.policy(gv, "global.default_policy")?,
                        k if INERT_GLOBALS.contains(&k) => {}
                        k => return Err(b.err(&format!("global.{k}"), format!("unknown global setting: expected one of default_policy, {}", INERT_GLOBALS.join(", ")))),
                    }
                }
            }
            k => return Err(b.err(k, "unknown top-level key: expected \"tasks\", \"global\" or \"resources\"")),
        }
    }
    let Some(Json::Obj(tasks)) = tasks else { return Err(b.err("tasks", "missing or not an object: rt-app needs \"tasks\": { \"name\": { ... } }")) };
    if tasks.is_empty() {
        return Err(b.err("tasks", "no tasks"));
    }
    // Barriers wait for every thread that uses them; forked threads cannot.
    let forked: Vec<String> = tasks.iter().flat_map(|(_, t)| {
        let mut v = Vec::new();
        fork_names(t, &mut v);
        v
    }).collect();
    for (name, t) in tasks {
        let mut used = Vec::new();
        barrier_names(t, &mut used);
        used.sort();
        used.dedup();
        if !used.is_empty() && forked.contains(name) {
            return Err(b.err(&format!("tasks.{name}"), "a forked task cannot use a barrier (rt-app must know how many threads wait)"));
        }
        let inst = match t {
            Json::Obj(f) => f.iter().find(|(k, _)| k == "instance").and_then(|(_, v)| if let Json::Int(n) = v { Some(*n as u32) } else { None }).unwrap_or(1),
            _ => 1,
        };
        for u in used {
            let n = b.barriers.len();
            let e = b.barriers.entry(u).or_insert((n as u32, 0));
            e.1 += inst;
        }
    }
    for (_, (obj, _)) in b.barriers.iter_mut() {
        b.sim.objs.push(WaitObj::default());
        *obj = (b.sim.objs.len() - 1) as u32;
    }
    // Reserve one program per task for forked copies, so forks may refer to any task.
    for (name, _) in tasks {
        b.sim.programs.push(Program::default());
        b.fork_progs.insert(name.clone(), (b.sim.programs.len() - 1) as u32);
    }
    let mut compiled = Vec::new();
    let mut timer_users: BTreeMap<String, u32> = BTreeMap::new();
    for (name, t) in tasks {
        let c = compile_task(&mut b, name, t, &format!("tasks.{name}"))?;
        let mut refs = Vec::new();
        timer_refs(t, &mut refs);
        refs.sort();
        refs.dedup();
        for r in refs.into_iter().filter(|r| !r.starts_with("unique")) {
            *timer_users.entry(r).or_default() += c.instances.max(1);
        }
        compiled.push(c);
    }
    if let Some((r, n)) = timer_users.iter().find(|(_, &n)| n > 1) {
        return Err(b.err("tasks", format!("timer {r:?} is shared by {n} threads; shared rt-app timers are not modelled: give each thread its own with a \"unique\" prefix")));
    }
    let sim = b.sim;
    let name = sim.metrics[w as usize].name.clone();
    let n = sim.nr_cpus();
    let mut ids = Vec::new();
    let pid = tgid;
    let mut finite = true;
    for c in compiled {
        let start = {
            sim.programs.push(Program::default());
            (sim.programs.len() - 1) as u32
        };
        register(sim, start, c.prog.clone());
        let fork_prog = *b.fork_progs.get(&c.name).expect("reserved");
        let mut fork_ops = c.prologue.clone();
        // Loop targets move by the prologue's length.
        let shift = fork_ops.len() as u32;
        fork_ops.extend(c.prog.iter().map(|o| match o {
            Op::Loop { to, count, slot } => Op::Loop { to: to + shift, count: *count, slot: *slot },
            o => *o,
        }));
        register(sim, fork_prog, fork_ops);
        if c.instances > 0 {
            finite &= c.finite;
        }
        for i in 0..c.instances {
            let (policy, nice, rt) = c.attrs;
            let allowed = c.cpus.clone().unwrap_or_else(|| CpuMask::full(n));
            let label = if c.instances > 1 { format!("{name}-{}-{i}", c.name) } else { format!("{name}-{}", c.name) };
            // rt-app's threads share one process.
            let mut t = new_task(label, w, pid, policy, nice, rt, allowed, start);
            if let Some(g) = &c.cgroup {
                t.cgroup = g.clone();
            }
            ids.push(sim.add_task(t));
        }
    }
    sim.metrics[w as usize].finite = finite;
    Ok(ids)
}

fn fork_names(v: &Json, out: &mut Vec<String>) {
    if let Json::Obj(fields) = v {
        for (k, x) in fields {
            match x {
                Json::Str(s) if k.starts_with("fork") => out.push(s.clone()),
                Json::Obj(_) => fork_names(x, out),
                _ => {}
            }
        }
    }
}

fn timer_refs(v: &Json, out: &mut Vec<String>) {
    if let Json::Obj(fields) = v {
        for (k, x) in fields {
            if k.starts_with("timer") {
                if let Json::Obj(f) = x {
                    if let Some((_, Json::Str(r))) = f.iter().find(|(k, _)| k == "ref") {
                        out.push(r.clone());
                    }
                }
            } else if matches!(x, Json::Obj(_)) {
                timer_refs(x, out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_order_and_duplicates() {
        let j = parse("{\"a\": 1, \"run\": 2, \"run\": 3}", "t.json").unwrap();
        assert_eq!(j, Json::Obj(vec![("a".into(), Json::Int(1)), ("run".into(), Json::Int(2)), ("run".into(), Json::Int(3))]));
    }

    #[test]
    fn comments_keep_positions() {
        let text = "{\n /* a\n comment */ \"x\": // tail\n 1,\n}";
        let e = parse(text, "t.json").unwrap_err().to_string();
        assert!(e.starts_with("t.json:5:1: malformed JSON"), "{e}");
        assert_eq!(parse("{\"s\": \"/* not a comment */\"}", "t").unwrap(), Json::Obj(vec![("s".into(), Json::Str("/* not a comment */".into()))]));
    }
}
