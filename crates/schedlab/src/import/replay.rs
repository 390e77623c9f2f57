//! The scenario a trace becomes: one `kind = "replay"` workload per task
//! (see `workload::replay`), written as readable TOML. The same events,
//! window and task filter give the same bytes.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::events::SchedEvent;
use super::model::{derive, Step, TaskModel, WokenBy};

/// What to import.
pub struct Options<'a> {
    /// Keep the events in `[from, to)` of the trace's clock.
    pub window: Option<(u64, u64)>,
    /// Keep the tasks this accepts (e.g. `--tasks REGEX` on the comm); the
    /// others' wakeups of kept tasks become timed sleeps.
    pub keep: &'a dyn Fn(&TaskModel) -> bool,
    /// Where the trace came from, for the header comment.
    pub source: &'a str,
    /// The scenario's name.
    pub name: &'a str,
    /// The task group of each trace pid that has one ([`super::task_groups`]):
    /// (path, cpu.weight). Each becomes a `[[cgroup]]` holding its tasks.
    pub groups: &'a BTreeMap<i32, (String, u64)>,
}

/// A duration rounded to microseconds, exact to them: "850us", "2.25ms", "1.500001s".
pub fn fmt_us(ns: u64) -> String {
    let us = ns.saturating_add(500) / 1000;
    let frac = |v: u64, digits: usize| {
        let f = format!("{v:0digits$}");
        let f = f.trim_end_matches('0');
        if f.is_empty() { String::new() } else { format!(".{f}") }
    };
    if us < 1000 {
        format!("{us}us")
    } else if us < 1_000_000 {
        format!("{}{}ms", us / 1000, frac(us % 1000, 3))
    } else {
        format!("{}{}s", us / 1_000_000, frac(us % 1_000_000, 6))
    }
}

fn quote(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// The policy, nice and RT priority a kernel prio stands for.
fn sched_of(prio: i64) -> (Option<&'static str>, i64, Option<i64>) {
    match prio {
        p if p < 0 => (Some("fifo"), 0, Some(99)),
        p if p < 100 => (Some("fifo"), 0, Some((99 - p).max(1))),
        p if p < 140 => (None, p - 120, None),
        _ => (None, 0, None),
    }
}

/// The scenario TOML for `events` (in time order), and how many tasks it has.
pub fn scenario(events: &[SchedEvent], o: &Options<'_>) -> (String, usize) {
    let in_window = |t: u64| o.window.is_none_or(|(a, b)| (a..b).contains(&t));
    let mut times = events.iter().map(|e| e.ts_ns).filter(|&t| in_window(t));
    let t0 = times.next().unwrap_or(0);
    let end = times.next_back().unwrap_or(t0);
    let nr_cpus = events.iter().filter(|e| in_window(e.ts_ns)).map(|e| e.cpu + 1).max().unwrap_or(1);
    let models = derive(events, o.window);
    let all = models.len();
    let kept: Vec<&TaskModel> = models.iter().filter(|m| !m.steps.is_empty() && (o.keep)(m)).collect();
    // Unique names: the comm, with the pid when two kept tasks share it.
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    for m in &kept {
        *count.entry(m.comm.trim()).or_default() += 1;
    }
    let names: BTreeMap<i32, String> = kept
        .iter()
        .map(|m| {
            let c = m.comm.trim();
            let n = if c.is_empty() || count[c] > 1 { format!("{} [{}]", if c.is_empty() { "task" } else { c }, m.pid) } else { c.to_string() };
            (m.pid, n)
        })
        .collect();
    let mut out = String::new();
    let window = o.window.map_or(String::new(), |(a, b)| format!(", window {}..{}", fmt_us(a), fmt_us(b)));
    let _ = writeln!(out, "# Imported by `schedlab import-trace` from {}{window}: {} of the trace's {all} tasks.", o.source, kept.len());
    out.push_str(
        "# One [[workload]] per task: its run bursts (\"run\"), its sleeps ended by a\n\
         # timer (\"sleep\") or by another task (\"wait NAME\", matched by NAME's \"wake\"\n\
         # or \"fork\"), kept as dependencies, not times; \"run to end\": still runnable\n\
         # when the trace ended. Policy and nice come from the trace's priorities;\n\
         # cpus from a task kept waiting while a CPU it never used sat idle;\n\
         # cgroups from the task groups (sessions' autogroups) the trace names.\n",
    );
    let _ = writeln!(out, "name = {}\nseed = 1\nduration = {}\n\n[machine]\ncpus = {nr_cpus}\n", quote(o.name), quote(&fmt_us((end - t0).max(1000))));
    // The task groups of the kept tasks (sessions' autogroups): the kernel
    // schedules each as one entity beside the others, as a cgroup.
    let groups: BTreeMap<&str, u64> = kept.iter().filter_map(|m| o.groups.get(&m.pid)).map(|(p, w)| (p.as_str(), *w)).collect();
    for (path, weight) in &groups {
        let _ = writeln!(out, "[[cgroup]]\npath = {}\nweight = {weight}\n", quote(path));
    }
    for m in &kept {
        let steps = steps_of(m, &names);
        let _ = writeln!(out, "[[workload]]\nkind = \"replay\"\nname = {}\npid = {}", quote(&names[&m.pid]), m.pid);
        let (policy, nice, prio) = sched_of(m.prio);
        if let Some(p) = policy {
            let _ = writeln!(out, "policy = \"{p}\"");
        }
        if nice != 0 {
            let _ = writeln!(out, "nice = {nice}");
        }
        if let Some(p) = prio {
            let _ = writeln!(out, "priority = {p}");
        }
        if let Some(cpus) = &m.pinned {
            let list: Vec<String> = cpus.iter().map(|c| c.to_string()).collect();
            let _ = writeln!(out, "cpus = \"{}\"", list.join(","));
        }
        if let Some((path, _)) = o.groups.get(&m.pid) {
            let _ = writeln!(out, "cgroup = {}", quote(path));
        }
        if m.start_ns > 0 {
            let _ = writeln!(out, "start = {}", quote(&fmt_us(m.start_ns)));
        }
        out.push_str("steps = [");
        let mut line = 0;
        for (i, s) in steps.iter().enumerate() {
            let q = quote(s);
            if i > 0 {
                out.push(',');
                line += 1;
            }
            if line + q.len() > 92 {
                out.push_str("\n    ");
                line = 4;
            } else if i > 0 {
                out.push(' ');
                line += 1;
            }
            line += q.len();
            out.push_str(&q);
        }
        out.push_str("]\n\n");
    }
    (out, kept.len())
}

/// A task's steps as the replay workload spells them.
fn steps_of(m: &TaskModel, names: &BTreeMap<i32, String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut run = 0u64;
    let flush = |out: &mut Vec<String>, run: &mut u64| {
        if *run > 0 {
            out.push(format!("run {}", fmt_us(std::mem::take(run))));
        }
    };
    for s in &m.steps {
        match *s {
            Step::Run(ns) => run += ns,
            Step::Sleep { ns, by } => {
                flush(&mut out, &mut run);
                match by {
                    WokenBy::Task(w) if names.contains_key(&w) => out.push(format!("wait {}", names[&w])),
                    _ if ns >= 500 => out.push(format!("sleep {}", fmt_us(ns))),
                    _ => {}
                }
            }
            Step::Wake(p) | Step::Fork(p) => {
                if let Some(n) = names.get(&p) {
                    flush(&mut out, &mut run);
                    out.push(format!("{} {n}", if matches!(s, Step::Fork(_)) { "fork" } else { "wake" }));
                }
            }
            Step::Exit => {
                flush(&mut out, &mut run);
                out.push("exit".into());
            }
        }
    }
    if m.runnable_at_end {
        out.push("run to end".into());
    } else {
        flush(&mut out, &mut run);
    }
    out
}
