//! Reader of tracefs `trace` text and `trace-cmd report` text, on top of
//! the tracefs line parser ([`super::tracefs_line::parse_line`]), which
//! real mode's trace reader shares. The `perf script` reader
//! ([`super::perf_script`]) reads its lines' fields the same way and
//! shares the collection of events (`Collect`).

use super::events::{Kind, LeftAs, SchedEvent, TraceTask};
use super::tracefs_line::{parse_line, Event, Thr, IRQ_CONTEXT};
use super::ImportError;
use crate::results::trace::WakeKind;

/// The sched events this reader needs; a line naming one of them that does
/// not parse is an error, other lines (headers, other events) are skipped.
pub(crate) const NEEDED: [&str; 6] = ["sched_switch", "sched_waking", "sched_wakeup", "sched_wakeup_new", "sched_process_fork", "sched_process_exit"];

fn task(t: Thr<'_>) -> TraceTask {
    TraceTask { pid: t.pid, comm: t.comm.to_string(), prio: t.prio }
}

/// Events of a text trace as they are read, and what [`Collect::finish`]
/// needs to tidy them.
#[derive(Default)]
pub(crate) struct Collect {
    out: Vec<SchedEvent>,
    has_waking: bool,
    wakeups: Vec<usize>,
}

impl Collect {
    /// One parsed event at `ts_ns` on `cpu`, in the task `pid` (the waker
    /// of a wakeup).
    pub(crate) fn push(&mut self, ts_ns: u64, cpu: u32, pid: i32, ev: Event<'_>) {
        let kind = match ev {
            Event::Switch { prev, prev_state, next } => Kind::Switch { prev: task(prev), left: LeftAs::from_state(prev_state), next: task(next) },
            Event::Wake { kind, task: t, .. } => {
                self.has_waking |= kind == WakeKind::Waking;
                if kind == WakeKind::Wakeup {
                    self.wakeups.push(self.out.len());
                }
                Kind::Wake { task: task(t), waker: pid, new: kind == WakeKind::WakeupNew }
            }
            Event::Fork { parent, child } => Kind::Fork { parent: parent.pid, child: task(child) },
            Event::Exit { task: t } => Kind::Exit { task: task(t) },
            Event::Migrate { .. } => return,
        };
        self.out.push(SchedEvent { ts_ns, cpu, kind });
    }

    /// The events in time order (stable for equal times). When both
    /// sched_waking and sched_wakeup are in the trace, sched_wakeup events
    /// are dropped (the waking one names the waker's CPU first). `end` is
    /// the offset to name when there is no sched_switch at all.
    pub(crate) fn finish(self, end: usize) -> Result<Vec<SchedEvent>, ImportError> {
        let mut out = self.out;
        if self.has_waking {
            let mut drop = vec![false; out.len()];
            for i in self.wakeups {
                drop[i] = true;
            }
            let mut i = 0;
            out.retain(|_| {
                i += 1;
                !drop[i - 1]
            });
        }
        if !out.iter().any(|e| matches!(e.kind, Kind::Switch { .. })) {
            return Err(ImportError { offset: end, expected: "at least one sched_switch event (record sched_switch and sched_waking)".into() });
        }
        out.sort_by_key(|e| e.ts_ns);
        Ok(out)
    }
}

/// Read every sched event of `text`, in time order (stable for equal
/// times); sched_wakeup events are dropped when sched_waking ones are there.
pub fn read(text: &str) -> Result<Vec<SchedEvent>, ImportError> {
    read_lines(text, tracefs_line, &LineForm { head: "a tracefs line '<comm>-<pid> [cpu] <secs.usecs>", event_prefix: ": " })
}

/// A tracefs line as (time, CPU, task, event); an event in interrupt
/// context names no task (0, as the idle task): the task it interrupted is
/// not the waker of a wakeup there (a timer's, an I/O completion's).
fn tracefs_line(line: &str) -> Option<(u64, u32, i32, Event<'_>)> {
    parse_line(line).map(|l| (l.ts_ns, l.cpu, if l.irq_flags & IRQ_CONTEXT != 0 { 0 } else { l.pid }, l.ev))
}

/// A text format's line parser: (time in ns, CPU, task, event) of a line.
pub(crate) type ParseLine = for<'a> fn(&'a str) -> Option<(u64, u32, i32, Event<'a>)>;

/// How a text format's lines look, for [`read_lines`]'s error on a line
/// that names a needed event and does not parse.
pub(crate) struct LineForm {
    /// The expected line's shape up to the event's prefix.
    pub(crate) head: &'static str,
    /// What stands right before the event's name (": " in tracefs text,
    /// "sched:" in perf script output).
    pub(crate) event_prefix: &'static str,
}

/// The line walk of the text readers: comments and blank lines skipped,
/// each other line `parse`d into (time, CPU, task, event) and collected; a
/// line that `parse` refuses but that names one of the [`NEEDED`] events is
/// an error at its byte offset, other lines are skipped.
pub(crate) fn read_lines(text: &str, parse: ParseLine, form: &LineForm) -> Result<Vec<SchedEvent>, ImportError> {
    let mut c = Collect::default();
    let mut offset = 0;
    for raw in text.split_inclusive('\n') {
        let at = offset;
        offset += raw.len();
        let line = raw.trim_end_matches(['\n', '\r']);
        if line.trim_start().starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let Some((ts, cpu, pid, ev)) = parse(line) else {
            if let Some(ev) = NEEDED.iter().find(|e| line.contains(&format!("{}{e}: ", form.event_prefix))) {
                return Err(ImportError { offset: at, expected: format!("{}{}{ev}: <fields>' with all its fields", form.head, form.event_prefix) });
            }
            continue;
        };
        c.push(ts, cpu, pid, ev);
    }
    c.finish(offset)
}
