//! Reader of `perf script` output of `perf sched record` (or of `perf
//! record -e sched:sched_switch -e sched:sched_waking ...`): lines such as
//!
//! ```text
//!  hogs-0  1234 [000] 12345.678901:       sched:sched_switch: prev_comm=hogs-0 prev_pid=1234 ...
//! ```
//!
//! with the default fields (comm, tid or pid/tid, `[cpu]`, time, event,
//! trace). The event's fields are the kernel's text, read by
//! [`super::tracefs_line::parse_event`].

use super::tracefs_line::{parse_event, parse_ts, Event, PARSED};
use super::tracefs_text::{read_lines, LineForm};
use super::events::SchedEvent;
use super::ImportError;

/// One `perf script` line: time, CPU, the task it happened in, the event.
pub fn parse_line(line: &str) -> Option<(u64, u32, i32, Event<'_>)> {
    let (at, name) = line.match_indices("sched:").find_map(|(i, _)| {
        let rest = &line[i + 6..];
        PARSED.iter().find(|e| rest.strip_prefix(**e).is_some_and(|r| r.starts_with(": ") || r == ":")).map(|e| (i, *e))
    })?;
    let fields = line.get(at + 6 + name.len() + 2..).unwrap_or("");
    let head = line[..at].trim_end().strip_suffix(':')?;
    let (head, ts) = head.trim_end().rsplit_once(|c: char| c.is_ascii_whitespace())?;
    let ts_ns = parse_ts(ts)?;
    let head = head.trim_end();
    let cpu_text = head.strip_suffix(']')?;
    let open = cpu_text.rfind('[')?;
    let cpu = cpu_text[open + 1..].trim().parse().ok()?;
    // "<comm> <tid>" or "<comm> <pid>/<tid>"; the comm may hold spaces.
    let (_, tid) = cpu_text[..open].trim_end().rsplit_once(|c: char| c.is_ascii_whitespace())?;
    let tid = tid.rsplit('/').next()?.parse().ok()?;
    Some((ts_ns, cpu, tid, parse_event(name, fields)?))
}

/// Whether `text` has a `perf script` sched line.
pub fn looks_like(text: &str) -> bool {
    text.lines().any(|l| parse_line(l).is_some())
}

/// Read every sched event of `perf script` text, in time order.
pub fn read(text: &str) -> Result<Vec<SchedEvent>, ImportError> {
    read_lines(text, parse_line, &LineForm { head: "a perf script line '<comm> <tid> [cpu] <secs.usecs>: ", event_prefix: "sched:" })
}
