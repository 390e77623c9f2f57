//! Reader of tracefs `trace` text and `trace-cmd report` text, on top of
//! the tracefs line parser ([`super::tracefs_line::parse_line`]), which
//! real mode's trace reader shares.

use super::events::{Kind, LeftAs, SchedEvent, TraceTask};
use super::ImportError;
use super::tracefs_line::{parse_line, Event, Thr};
use crate::results::trace::WakeKind;

/// The sched events this reader needs; a line naming one of them that does
/// not parse is an error, other lines (headers, other events) are skipped.
const NEEDED: [&str; 4] = [": sched_switch: ", ": sched_waking: ", ": sched_wakeup: ", ": sched_wakeup_new: "];

fn task(t: Thr<'_>) -> TraceTask {
    TraceTask { pid: t.pid, comm: t.comm.to_string(), prio: t.prio }
}

/// Read every sched event of `text`, in time order (stable for equal times).
/// When both sched_waking and sched_wakeup are in the trace, sched_wakeup
/// lines are dropped (the waking one names the waker's CPU first).
pub fn read(text: &str) -> Result<Vec<SchedEvent>, ImportError> {
    let mut out = Vec::new();
    let mut offset = 0;
    let mut has_waking = false;
    let mut wakeups = Vec::new();
    for raw in text.split_inclusive('\n') {
        let at = offset;
        offset += raw.len();
        let line = raw.trim_end_matches(['\n', '\r']);
        if line.trim_start().starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let Some(l) = parse_line(line) else {
            if let Some(ev) = NEEDED.iter().find(|e| line.contains(**e)) {
                return Err(ImportError {
                    offset: at,
                    expected: format!("a tracefs line '<comm>-<pid> [cpu] <secs.usecs>: {}: <fields>' with all its fields", ev.trim_matches([':', ' '])),
                });
            }
            continue;
        };
        let kind = match l.ev {
            Event::Switch { prev, prev_state, next } => Kind::Switch { prev: task(prev), left: LeftAs::from_state(prev_state), next: task(next) },
            Event::Wake { kind, task: t, .. } => {
                has_waking |= kind == WakeKind::Waking;
                if kind == WakeKind::Wakeup {
                    wakeups.push(out.len());
                }
                Kind::Wake { task: task(t), waker: l.pid, new: kind == WakeKind::WakeupNew }
            }
            Event::Migrate { .. } => continue,
        };
        out.push(SchedEvent { ts_ns: l.ts_ns, cpu: l.cpu, kind });
    }
    if has_waking {
        let mut drop = vec![false; out.len()];
        for i in wakeups {
            drop[i] = true;
        }
        let mut i = 0;
        out.retain(|_| {
            i += 1;
            !drop[i - 1]
        });
    }
    if !out.iter().any(|e| matches!(e.kind, Kind::Switch { .. })) {
        return Err(ImportError { offset, expected: "at least one sched_switch line (record with -e sched_switch -e sched_waking)".into() });
    }
    out.sort_by_key(|e| e.ts_ns);
    Ok(out)
}
