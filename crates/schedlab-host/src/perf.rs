//! PERF_EVENT_ARRAY maps and bpf_perf_event_read_value()
//! (kernel/trace/bpf_trace.c, kernel/events/core.c).
//!
//! User space opens a perf event per CPU and stores it in the array (a
//! loader profile does, through [`super::HostedScheduler::perf_event_install`]).
//! The simulator has no hardware counters, so each event counts from the
//! CPU's busy time, i.e. the run time of the tasks it ran since the event
//! was installed: cycles and ref-cycles at a nominal 3 GHz (3 per busy ns),
//! instructions at an IPC of 1.5 (9 per 2 busy ns), the software clocks
//! (cpu-clock, task-clock) in busy nanoseconds, and every other event one
//! per busy microsecond. `enabled` and `running` are the nanoseconds since
//! installation (the event is never multiplexed).

/// `PERF_TYPE_HARDWARE` / `PERF_TYPE_SOFTWARE` and the configs modelled.
pub(super) const TYPE_HARDWARE: u32 = 0;
pub(super) const TYPE_SOFTWARE: u32 = 1;

/// An installed event: what it counts, where, and its zero point.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PerfEvent {
    pub type_: u32,
    pub config: u64,
    pub cpu: u32,
    /// CPU busy time and simulated time at installation.
    pub busy0: u64,
    pub t0: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PerfSlot {
    pub event: Option<PerfEvent>,
}

impl PerfSlot {
    pub(crate) fn installed(&self) -> bool {
        self.event.is_some()
    }
}

impl PerfEvent {
    /// The counter after `busy` ns of CPU busy time in total.
    pub(crate) fn count(&self, busy: u64) -> u64 {
        let d = busy.saturating_sub(self.busy0);
        match (self.type_, self.config) {
            // cycles, ref-cycles
            (TYPE_HARDWARE, 0) | (TYPE_HARDWARE, 9) => d * 3,
            // instructions
            (TYPE_HARDWARE, 1) => d * 9 / 2,
            // cpu-clock, task-clock
            (TYPE_SOFTWARE, 0) | (TYPE_SOFTWARE, 1) => d,
            _ => d / 1000,
        }
    }
}

/// `struct bpf_perf_event_value`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct PerfValueC {
    pub counter: u64,
    pub enabled: u64,
    pub running: u64,
}
