//! Importing recorded scheduler traces (issue 15 §1): readers that turn a
//! trace file into one common stream of scheduler events
//! ([`events::SchedEvent`]), and the derivation of a per-task workload from
//! that stream ([`model`]): run bursts, sleeps each ended by a timer or by
//! a wakeup from another task, exits.
//!
//! What lives here: one reader per trace format (Perfetto protobuf,
//! [`perfetto`]; `perf script` text, [`perf_script`]; tracefs / trace-cmd
//! text, [`tracefs_text`], on the line parser [`tracefs_line`], which real
//! mode's trace reader in `schedlab-real` shares), format detection from
//! the content, the task model ([`model`]) and the scenario it becomes
//! ([`replay`]). What it
//! may import: `engine`, `machine`, `results` (the wake kinds) and std; the
//! simulator never calls into it.


pub mod events;
pub mod model;
pub mod perf_script;
pub mod perfetto;
pub mod replay;
pub mod tracefs_line;
pub mod tracefs_text;

use std::fmt;

/// A trace that cannot be read: where, and what was expected there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImportError {
    /// Byte offset into the trace file where reading stopped.
    pub offset: usize,
    /// What was expected at that offset.
    pub expected: String,
}

impl fmt::Display for ImportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at byte {}: expected {}", self.offset, self.expected)
    }
}

impl std::error::Error for ImportError {}

/// The trace formats [`read`] recognises, told apart by content.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// The text of tracefs's `trace` file or `trace-cmd report`.
    TracefsText,
    /// `perf script` output of `perf sched record`.
    PerfScript,
    /// A Perfetto protobuf trace (schedlab's own, or traced's).
    Perfetto,
}

/// Which format `data` is in, from its content (never the file name).
pub fn detect(data: &[u8]) -> Result<Format, ImportError> {
    let Ok(text) = std::str::from_utf8(data) else {
        if perfetto::looks_like(data) {
            return Ok(Format::Perfetto);
        }
        return Err(ImportError {
            offset: utf8_error_at(data),
            expected: "a text trace (tracefs / trace-cmd / perf script lines) or a Perfetto trace (starting with a TracePacket)".into(),
        });
    };
    if text.lines().any(|l| tracefs_line::parse_line(l).is_some()) {
        return Ok(Format::TracefsText);
    }
    if perf_script::looks_like(text) {
        return Ok(Format::PerfScript);
    }
    if perfetto::looks_like(data) {
        return Ok(Format::Perfetto);
    }
    Err(ImportError { offset: 0, expected: "tracefs / trace-cmd text, perf script output or a Perfetto trace, with sched_switch and sched_waking events".into() })
}

fn utf8_error_at(data: &[u8]) -> usize {
    std::str::from_utf8(data).err().map_or(0, |e| e.valid_up_to())
}

/// Read a trace in any recognised format into scheduler events, in time order.
pub fn read(data: &[u8]) -> Result<Vec<events::SchedEvent>, ImportError> {
    match detect(data)? {
        Format::TracefsText => tracefs_text::read(std::str::from_utf8(data).expect("detect checked UTF-8")),
        Format::PerfScript => perf_script::read(std::str::from_utf8(data).expect("detect checked UTF-8")),
        Format::Perfetto => perfetto::read(data),
    }
}

/// The task groups a trace names, trace pid -> (path, cpu.weight): the
/// sessions' autogroups of a `run --real --trace` recording; other traces
/// name none.
pub fn task_groups(data: &[u8]) -> Result<std::collections::BTreeMap<i32, (String, u64)>, ImportError> {
    match detect(data)? {
        Format::Perfetto => perfetto::task_groups(data),
        _ => Ok(Default::default()),
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod tests_formats;
