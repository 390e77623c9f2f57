//! The line parser of the kernel's trace text (tracefs's `trace` file,
//! `trace-cmd report`): the sched_switch, sched_waking / sched_wakeup /
//! sched_wakeup_new and sched_migrate_task lines, as [`Line`]s.
//!
//! [`tracefs_text`](super::tracefs_text) reads recorded traces with it, and
//! real mode (the `schedlab-real` crate) reads the trace of its own runs.

use crate::results::trace::WakeKind;

/// A thread as an event's fields name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Thr<'a> {
    /// Its comm (up to 15 bytes in the kernel; may contain spaces).
    pub comm: &'a str,
    /// Its pid (the kernel's, i.e. the thread id).
    pub pid: i32,
    /// Its kernel priority (0-139; 120 is nice 0).
    pub prio: i64,
}

/// The scheduler events the reader understands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// sched_switch: `prev` leaves the CPU in `prev_state` ("R", "S", "D", "R+", ...), `next` runs.
    Switch {
        /// The task switched out.
        prev: Thr<'a>,
        /// Its state as the kernel prints it.
        prev_state: &'a str,
        /// The task switched in.
        next: Thr<'a>,
    },
    /// sched_waking / sched_wakeup / sched_wakeup_new.
    Wake {
        /// Which of the three.
        kind: WakeKind,
        /// The task woken.
        task: Thr<'a>,
        /// The CPU it is to run on.
        target_cpu: i64,
    },
    /// sched_migrate_task.
    Migrate {
        /// The task moved.
        task: Thr<'a>,
        /// The CPU it leaves.
        orig_cpu: i64,
        /// The CPU it goes to.
        dest_cpu: i64,
    },
    /// sched_process_fork (no priorities: `prio` is 120).
    Fork {
        /// The forking task.
        parent: Thr<'a>,
        /// The new task.
        child: Thr<'a>,
    },
    /// sched_process_exit.
    Exit {
        /// The exiting task.
        task: Thr<'a>,
    },
}

/// One line of the `trace` file: `<comm>-<pid> [cpu] <flags> <secs.usecs>: <event>: <fields>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Line<'a> {
    /// The timestamp, in ns (the text has microseconds).
    pub ts_ns: u64,
    /// The CPU it happened on.
    pub cpu: u32,
    /// The task the event happened in (common_pid): the waker of a wakeup.
    pub pid: i32,
    /// That task's comm.
    pub comm: &'a str,
    /// The interrupt context the event happened in, as the kernel's
    /// trace_entry flag bits ([`IRQ_CONTEXT`]; 0: task context, or a line
    /// without the flags column): in an interrupt, `pid` is the task the
    /// interrupt came in on, not the waker of a wakeup.
    pub irq_flags: u32,
    /// The event and its fields.
    pub ev: Event<'a>,
}

/// trace_entry flags (include/linux/trace_events.h): TRACE_FLAG_HARDIRQ,
/// TRACE_FLAG_SOFTIRQ, TRACE_FLAG_NMI.
pub const TRACE_FLAG_HARDIRQ: u32 = 0x08;
/// Serving a softirq.
pub const TRACE_FLAG_SOFTIRQ: u32 = 0x10;
/// In an NMI.
pub const TRACE_FLAG_NMI: u32 = 0x40;
/// The flag bits of an interrupt context.
pub const IRQ_CONTEXT: u32 = TRACE_FLAG_HARDIRQ | TRACE_FLAG_SOFTIRQ | TRACE_FLAG_NMI;

/// The interrupt-context bits of the latency-format flags column
/// ("d.h2.", "dNs1", ...): its third letter, as trace_print_lat_fmt
/// prints it (Z: NMI in a hardirq, z: NMI, H: hardirq in a softirq, h:
/// hardirq, s: softirq).
fn irq_flags(column: &str) -> u32 {
    match column.chars().nth(2) {
        Some('Z') => TRACE_FLAG_NMI | TRACE_FLAG_HARDIRQ,
        Some('z') => TRACE_FLAG_NMI,
        Some('H') => TRACE_FLAG_HARDIRQ | TRACE_FLAG_SOFTIRQ,
        Some('h') => TRACE_FLAG_HARDIRQ,
        Some('s') => TRACE_FLAG_SOFTIRQ,
        _ => 0,
    }
}

/// The events [`parse_line`] reads (the ones a recording enables).
pub const EVENTS: [&str; 5] = ["sched_switch", "sched_waking", "sched_wakeup", "sched_wakeup_new", "sched_migrate_task"];

/// Every event [`parse_line`] and [`parse_event`] read: [`EVENTS`] and the
/// process events a recorded trace may have.
pub const PARSED: [&str; 7] = ["sched_switch", "sched_waking", "sched_wakeup", "sched_wakeup_new", "sched_migrate_task", "sched_process_fork", "sched_process_exit"];

/// Parses a line of the kernel's text output; None for anything else
/// (comments, `[LOST n EVENTS]` marks, other events).
pub fn parse_line(line: &str) -> Option<Line<'_>> {
    // The header ends at ": <event>: ". Every marker is longer than a comm
    // (15 bytes), so the first one found is not inside the header's comm.
    let (at, name) = line.match_indices(": sched_").find_map(|(i, _)| {
        let rest = &line[i + 2..];
        PARSED.iter().find(|e| rest.strip_prefix(**e).is_some_and(|r| r.starts_with(": "))).map(|e| (i, *e))
    })?;
    let fields = &line[at + 2 + name.len() + 2..];
    let head = line[..at].trim_end();
    let (head, ts) = head.rsplit_once(' ')?;
    let ts_ns = parse_ts(ts)?;
    let open = head.rfind('[')?;
    let close = open + head[open..].find(']')?;
    let cpu = head[open + 1..close].trim().parse().ok()?;
    let mut task = head[..open].trim_end();
    if task.ends_with(')') {
        // record-tgid adds "(tgid)" after comm-pid.
        task = task[..task.rfind('(')?].trim_end();
    }
    let (comm, pid) = task.rsplit_once('-')?;
    let (comm, pid) = (comm.trim_start(), pid.parse().ok()?);
    let ev = parse_event(name, fields)?;
    // The flags column, when the line has one, sits between the CPU and the time.
    let irq_flags = head[close + 1..].split_whitespace().next().map_or(0, irq_flags);
    Some(Line { ts_ns, cpu, pid, comm, irq_flags, ev })
}

/// The fields of event `name` (one of [`PARSED`]), as the kernel prints
/// them after `name: `; None when they do not parse.
pub fn parse_event<'a>(name: &str, fields: &'a str) -> Option<Event<'a>> {
    let num = |v: &str| v.parse::<i64>().ok();
    Some(match name {
        "sched_switch" => {
            let v = values(fields, &["prev_comm=", "prev_pid=", "prev_prio=", "prev_state=", "==> next_comm=", "next_pid=", "next_prio="])?;
            Event::Switch { prev: thr(v[0], v[1], v[2])?, prev_state: v[3], next: thr(v[4], v[5], v[6])? }
        }
        "sched_process_fork" => {
            let v = values(fields, &["comm=", "pid=", "child_comm=", "child_pid="])?;
            Event::Fork { parent: thr(v[0], v[1], "120")?, child: thr(v[2], v[3], "120")? }
        }
        "sched_process_exit" => {
            // Kernels since 6.10 print group_dead= after prio.
            let v = values(fields, &["comm=", "pid=", "prio="]).or_else(|| values(fields, &["comm=", "pid=", "prio=", "group_dead="]))?;
            Event::Exit { task: thr(v[0], v[1], v[2])? }
        }
        "sched_migrate_task" => {
            let v = values(fields, &["comm=", "pid=", "prio=", "orig_cpu=", "dest_cpu="])?;
            Event::Migrate { task: thr(v[0], v[1], v[2])?, orig_cpu: num(v[3])?, dest_cpu: num(v[4])? }
        }
        "sched_waking" | "sched_wakeup" | "sched_wakeup_new" => {
            let kind = match name {
                "sched_waking" => WakeKind::Waking,
                "sched_wakeup" => WakeKind::Wakeup,
                _ => WakeKind::WakeupNew,
            };
            // Kernels before 4.x print a success= field before target_cpu.
            let v = values(fields, &["comm=", "pid=", "prio=", "target_cpu="]).or_else(|| {
                let v = values(fields, &["comm=", "pid=", "prio=", "success=", "target_cpu="])?;
                Some(vec![v[0], v[1], v[2], v[4]])
            })?;
            Event::Wake { kind, task: thr(v[0], v[1], v[2])?, target_cpu: num(v[3])? }
        }
        _ => return None,
    })
}

fn thr<'a>(comm: &'a str, pid: &str, prio: &str) -> Option<Thr<'a>> {
    Some(Thr { comm, pid: pid.parse().ok()?, prio: prio.parse().ok()? })
}

/// `secs.fraction` to nanoseconds.
pub(crate) fn parse_ts(s: &str) -> Option<u64> {
    let (secs, frac) = s.split_once('.').unwrap_or((s, ""));
    if frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let f: u64 = if frac.is_empty() { 0 } else { frac.parse().ok()? };
    // A timestamp past u64 nanoseconds (584 years) is not a kernel's: not a line.
    secs.parse::<u64>().ok()?.checked_mul(1_000_000_000)?.checked_add(f * 10u64.pow(9 - frac.len() as u32))
}

/// The values of `key=value` fields in this order. A value whose key ends
/// in `comm=` may hold spaces (and even look like a key): each place the
/// next key could start is tried until the rest of the line parses. Other
/// values are one word.
fn values<'a>(s: &'a str, keys: &[&str]) -> Option<Vec<&'a str>> {
    fn go<'a>(s: &'a str, keys: &[&str], out: &mut Vec<&'a str>) -> bool {
        let Some((key, more)) = keys.split_first() else { return true };
        let Some(rest) = s.strip_prefix(key) else { return false };
        let Some(next) = more.first() else {
            let v = rest.trim_end();
            out.push(v);
            return key.ends_with("comm=") || !v.contains(' ');
        };
        let sep = format!(" {next}");
        let ends: Vec<usize> = if key.ends_with("comm=") { rest.match_indices(&sep).map(|(i, _)| i).collect() } else { rest.find(' ').into_iter().collect() };
        for end in ends {
            let n = out.len();
            out.push(&rest[..end]);
            if go(&rest[end + 1..], more, out) {
                return true;
            }
            out.truncate(n);
        }
        false
    }
    let mut out = Vec::with_capacity(keys.len());
    go(s, keys, &mut out).then_some(out)
}
