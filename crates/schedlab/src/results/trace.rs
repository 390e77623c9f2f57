//! Scheduler tracepoints and their consumers.
//!
//! The core calls one-line hooks where the kernel has its tracepoints:
//! `sched_switch` (`__schedule`), `sched_waking` (`try_to_wake_up`) and
//! `sched_wakeup_new` (`wake_up_new_task`). With no tracer attached
//! (`Sim::tracer` is `None`) a hook is one branch. Consumers implement
//! [`TraceSink`]: the streaming Perfetto writer ([`PerfettoWriter`]), the
//! per-CPU busy timeline that utilisation plots need ([`Timeline`]), and an
//! in-memory [`Recorder`] for tests.

use std::cell::RefCell;
use std::io::Write;
use std::rc::Rc;

use crate::engine::{Cpu, TaskId};
use crate::sched::sim::Sim;
use crate::sched::task::{Task, TaskState};
use crate::engine::time::Ns;

/// What a task that leaves a CPU does next, as `sched_switch`'s prev_state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrevState {
    /// Preempted (TASK_RUNNING): still runnable.
    Runnable,
    /// Blocked (TASK_INTERRUPTIBLE).
    Sleeping,
    /// Exited (EXIT_DEAD).
    Dead,
}

impl PrevState {
    /// The kernel's `prev_state` bits (`TASK_REPORT` encoding).
    pub fn kernel_bits(self) -> i64 {
        match self {
            PrevState::Runnable => 0,
            PrevState::Sleeping => 1,
            PrevState::Dead => 0x10,
        }
    }

    fn of(t: &Task) -> PrevState {
        match t.state {
            TaskState::Runnable | TaskState::New => PrevState::Runnable,
            TaskState::Blocked => PrevState::Sleeping,
            TaskState::Dead => PrevState::Dead,
        }
    }
}

/// One tracepoint hit. `None` is the CPU's idle task (pid 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceEvent {
    /// `cpu` stops running `prev` and starts `next`.
    Switch {
        /// The CPU switching.
        cpu: Cpu,
        /// The task leaving (None: idle).
        prev: Option<TaskId>,
        /// How it leaves (prev_state).
        prev_state: PrevState,
        /// The task coming in (None: idle).
        next: Option<TaskId>,
    },
    /// Code on `cpu` (run by `waker`) wakes `task`, last on `target_cpu`.
    Waking {
        /// The CPU the waker runs on.
        cpu: Cpu,
        /// The task waking it (None: an interrupt or idle).
        waker: Option<TaskId>,
        /// The task woken.
        task: TaskId,
        /// The CPU it is woken onto.
        target_cpu: Cpu,
    },
    /// A new task is placed on `target_cpu` by its parent on `cpu`.
    WakeupNew {
        /// The CPU the waker runs on.
        cpu: Cpu,
        /// The task waking it (None: an interrupt or idle).
        waker: Option<TaskId>,
        /// The task woken.
        task: TaskId,
        /// The CPU it is woken onto.
        target_cpu: Cpu,
    },
}

impl TraceEvent {
    /// The CPU whose ftrace buffer the event goes to.
    pub fn cpu(&self) -> Cpu {
        match *self {
            TraceEvent::Switch { cpu, .. } | TraceEvent::Waking { cpu, .. } | TraceEvent::WakeupNew { cpu, .. } => cpu,
        }
    }
}

/// A consumer of tracepoint hits. `tasks` is the simulator's task table,
/// for names, priorities and process ids.
pub trait TraceSink {
    /// One tracepoint hit at `ts`; `tasks` to name the tasks involved.
    fn event(&mut self, ts: Ns, ev: &TraceEvent, tasks: &[Task]);
    /// The run ended at `end`; flush whatever is buffered.
    fn finish(&mut self, _end: Ns, _tasks: &[Task]) -> std::io::Result<()> {
        Ok(())
    }
}

/// The sinks attached to a simulator, and the task each CPU runs as the
/// tracer saw it (so `sched_switch` knows its `prev`).
pub struct Tracer {
    sinks: Vec<Box<dyn TraceSink>>,
    curr: Vec<Option<TaskId>>,
}

impl Tracer {
    /// No sinks yet, for `nr_cpus` CPUs.
    pub fn new(nr_cpus: usize) -> Self {
        Tracer { sinks: Vec::new(), curr: vec![None; nr_cpus] }
    }

    /// Attaches a consumer.
    pub fn add(&mut self, sink: Box<dyn TraceSink>) {
        self.sinks.push(sink);
    }

    fn emit(&mut self, ts: Ns, ev: TraceEvent, tasks: &[Task]) {
        for s in &mut self.sinks {
            s.event(ts, &ev, tasks);
        }
    }

    /// Ends the trace: every sink flushes. The first error is returned.
    pub fn finish(mut self, end: Ns, tasks: &[Task]) -> std::io::Result<()> {
        let mut first = Ok(());
        for s in &mut self.sinks {
            let r = s.finish(end, tasks);
            if first.is_ok() {
                first = r;
            }
        }
        first
    }
}

impl Sim {
    /// Attaches a sink, creating the tracer on first use. Attach before `run`.
    pub fn add_trace_sink(&mut self, sink: Box<dyn TraceSink>) {
        let n = self.nr_cpus();
        self.tracer.get_or_insert_with(|| Box::new(Tracer::new(n))).add(sink);
    }

    /// Detaches the tracer and lets its sinks flush (call after `run`).
    pub fn finish_trace(&mut self) -> std::io::Result<()> {
        match self.tracer.take() {
            Some(t) => t.finish(self.now(), &self.tasks),
            None => Ok(()),
        }
    }

    /// sched_switch: `cpu` starts running `next` (None: idle).
    #[inline]
    pub(crate) fn trace_switch(&mut self, cpu: Cpu, next: Option<TaskId>) {
        if self.tracer.is_some() {
            self.trace_switch_slow(cpu, next);
        }
    }

    #[cold]
    fn trace_switch_slow(&mut self, cpu: Cpu, next: Option<TaskId>) {
        let now = self.now();
        let Some(tr) = self.tracer.as_deref_mut() else { return };
        let prev = std::mem::replace(&mut tr.curr[cpu as usize], next);
        if prev == next {
            return;
        }
        let prev_state = prev.map_or(PrevState::Runnable, |p| PrevState::of(&self.tasks[p as usize]));
        tr.emit(now, TraceEvent::Switch { cpu, prev, prev_state, next }, &self.tasks);
    }

    /// sched_waking, from the CPU running the waker.
    #[inline]
    pub(crate) fn trace_waking(&mut self, p: TaskId) {
        if self.tracer.is_some() {
            self.trace_wake_slow(p, false, self.task(p).cpu);
        }
    }

    /// sched_wakeup_new: `p` was placed on `cpu`.
    #[inline]
    pub(crate) fn trace_wakeup_new(&mut self, p: TaskId, cpu: Cpu) {
        if self.tracer.is_some() {
            self.trace_wake_slow(p, true, cpu);
        }
    }

    #[cold]
    fn trace_wake_slow(&mut self, task: TaskId, new: bool, target_cpu: Cpu) {
        let now = self.now();
        let cpu = self.this_cpu;
        let Some(tr) = self.tracer.as_deref_mut() else { return };
        let waker = tr.curr[cpu as usize];
        let ev = if new {
            TraceEvent::WakeupNew { cpu, waker, task, target_cpu }
        } else {
            TraceEvent::Waking { cpu, waker, task, target_cpu }
        };
        tr.emit(now, ev, &self.tasks);
    }
}

/// Keeps every event in memory (tests, small runs).
#[derive(Clone, Default)]
pub struct Recorder(pub Rc<RefCell<Vec<(Ns, TraceEvent)>>>);

impl TraceSink for Recorder {
    fn event(&mut self, ts: Ns, ev: &TraceEvent, _tasks: &[Task]) {
        self.0.borrow_mut().push((ts, *ev));
    }
}

/// Busy time per CPU per time bucket, from the switch events: the data of
/// utilisation-over-time plots. A CPU is busy while it runs a task.
#[derive(Clone, Debug)]
pub struct Timeline {
    /// Width of a bucket (ns).
    pub bucket_ns: Ns,
    /// `busy_ns[cpu][bucket]`.
    pub busy_ns: Vec<Vec<Ns>>,
    since: Vec<Option<Ns>>,
}

impl Timeline {
    /// Empty buckets of `bucket_ns` for `nr_cpus` CPUs.
    pub fn new(nr_cpus: usize, bucket_ns: Ns) -> Self {
        Timeline { bucket_ns: bucket_ns.max(1), busy_ns: vec![Vec::new(); nr_cpus], since: vec![None; nr_cpus] }
    }

    /// A bucket size giving about `buckets` buckets over `duration`.
    pub fn bucket_for(duration: Ns, buckets: u64) -> Ns {
        (duration / buckets.max(1)).max(1_000)
    }

    fn add(&mut self, cpu: usize, from: Ns, to: Ns) {
        let b = self.bucket_ns;
        let row = &mut self.busy_ns[cpu];
        let mut t = from;
        while t < to {
            let i = (t / b) as usize;
            let end = ((i as Ns + 1) * b).min(to);
            if row.len() <= i {
                row.resize(i + 1, 0);
            }
            row[i] += end - t;
            t = end;
        }
    }

    /// Busy fraction of `cpu` in bucket `i` (0..=1).
    pub fn util(&self, cpu: usize, i: usize) -> f64 {
        self.busy_ns[cpu].get(i).copied().unwrap_or(0) as f64 / self.bucket_ns as f64
    }

    /// Buckets recorded so far.
    pub fn nr_buckets(&self) -> usize {
        self.busy_ns.iter().map(|r| r.len()).max().unwrap_or(0)
    }
}

/// A [`Timeline`] shared with the code that plots it after the run.
#[derive(Clone)]
pub struct TimelineSink(pub Rc<RefCell<Timeline>>);

impl TraceSink for TimelineSink {
    fn event(&mut self, ts: Ns, ev: &TraceEvent, _tasks: &[Task]) {
        if let TraceEvent::Switch { cpu, prev, next, .. } = *ev {
            let mut tl = self.0.borrow_mut();
            let c = cpu as usize;
            match (prev, next) {
                (None, Some(_)) => tl.since[c] = Some(ts),
                (Some(_), None) => {
                    if let Some(s) = tl.since[c].take() {
                        tl.add(c, s, ts);
                    }
                }
                _ => {}
            }
        }
    }

    fn finish(&mut self, end: Ns, _tasks: &[Task]) -> std::io::Result<()> {
        let mut tl = self.0.borrow_mut();
        for c in 0..tl.since.len() {
            if let Some(s) = tl.since[c].take() {
                tl.add(c, s, end);
            }
        }
        // Every CPU gets the same number of buckets, idle ones included.
        let n = end.div_ceil(tl.bucket_ns) as usize;
        for row in &mut tl.busy_ns {
            row.resize(n.max(row.len()), 0);
        }
        Ok(())
    }
}

/// Protocol buffer wire format, just what the trace needs.
mod pb {
    pub(super) fn varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    pub(super) fn key(out: &mut Vec<u8>, field: u32, wire: u8) {
        varint(out, ((field as u64) << 3) | wire as u64);
    }

    /// A varint field (uint32/uint64/int32/int64: negative ints as 10 bytes).
    pub(super) fn uint(out: &mut Vec<u8>, field: u32, v: u64) {
        key(out, field, 0);
        varint(out, v);
    }

    pub(super) fn int(out: &mut Vec<u8>, field: u32, v: i64) {
        uint(out, field, v as u64);
    }

    pub(super) fn bytes(out: &mut Vec<u8>, field: u32, b: &[u8]) {
        key(out, field, 2);
        varint(out, b.len() as u64);
        out.extend_from_slice(b);
    }
}

/// Field numbers from perfetto's protos (protos/perfetto/trace/...).
mod fields {
    /// trace.proto: Trace.packet.
    pub(super) const TRACE_PACKET: u32 = 1;
    /// trace_packet.proto: TracePacket.
    pub(super) const PACKET_TIMESTAMP: u32 = 8;
    pub(super) const PACKET_FTRACE_EVENTS: u32 = 1;
    pub(super) const PACKET_PROCESS_TREE: u32 = 2;
    pub(super) const PACKET_SEQUENCE_ID: u32 = 10;
    /// ftrace_event_bundle.proto: FtraceEventBundle.
    pub(super) const BUNDLE_CPU: u32 = 1;
    pub(super) const BUNDLE_EVENT: u32 = 2;
    /// ftrace_event.proto: FtraceEvent.
    pub(super) const EVENT_TIMESTAMP: u32 = 1;
    pub(super) const EVENT_PID: u32 = 2;
    pub(super) const EVENT_COMMON_FLAGS: u32 = 5;
    pub(super) const EVENT_SCHED_SWITCH: u32 = 4;
    pub(super) const EVENT_SCHED_WAKEUP: u32 = 17;
    pub(super) const EVENT_SCHED_WAKING: u32 = 20;
    pub(super) const EVENT_SCHED_WAKEUP_NEW: u32 = 114;
    /// sched.proto: SchedSwitchFtraceEvent.
    pub(super) const SWITCH_PREV_COMM: u32 = 1;
    pub(super) const SWITCH_PREV_PID: u32 = 2;
    pub(super) const SWITCH_PREV_PRIO: u32 = 3;
    pub(super) const SWITCH_PREV_STATE: u32 = 4;
    pub(super) const SWITCH_NEXT_COMM: u32 = 5;
    pub(super) const SWITCH_NEXT_PID: u32 = 6;
    pub(super) const SWITCH_NEXT_PRIO: u32 = 7;
    /// sched.proto: SchedWakingFtraceEvent, SchedWakeupFtraceEvent and
    /// SchedWakeupNewFtraceEvent (one layout).
    pub(super) const WAKE_COMM: u32 = 1;
    pub(super) const WAKE_PID: u32 = 2;
    pub(super) const WAKE_PRIO: u32 = 3;
    pub(super) const WAKE_SUCCESS: u32 = 4;
    pub(super) const WAKE_TARGET_CPU: u32 = 5;
    /// process_tree.proto: ProcessTree, Process, Thread.
    pub(super) const TREE_PROCESSES: u32 = 1;
    pub(super) const TREE_THREADS: u32 = 2;
    pub(super) const PROCESS_PID: u32 = 1;
    pub(super) const PROCESS_PPID: u32 = 2;
    pub(super) const PROCESS_CMDLINE: u32 = 3;
    pub(super) const THREAD_TID: u32 = 1;
    pub(super) const THREAD_NAME: u32 = 2;
    pub(super) const THREAD_TGID: u32 = 3;
}

/// The packet field of [`PerfettoWriter::task_groups`] and its message's
/// fields (not Perfetto's: its readers skip a field they do not know).
pub mod task_group_fields {
    /// TracePacket: the task groups.
    pub const PACKET_TASK_GROUPS: u32 = 1977;
    /// The task groups: one group each.
    pub const TASK_GROUP: u32 = 1;
    /// A group: its path.
    pub const GROUP_PATH: u32 = 1;
    /// A group: its weight (cpu.weight).
    pub const GROUP_WEIGHT: u32 = 2;
    /// A group: a thread's trace pid (repeated).
    pub const GROUP_TID: u32 = 3;
}

/// A task group of the traced host the kernel schedules as one entity (a
/// session's autogroup) and the threads of the trace in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskGroup {
    /// Its name as a cgroup path, e.g. "/autogroup-54".
    pub path: String,
    /// Its weight as cpu.weight (100: the weight of nice 0).
    pub weight: u64,
    /// The trace pids of its threads.
    pub tids: Vec<i64>,
}

/// The pid a task has in traces: task id + 1, as pid 0 is the idle task.
pub fn trace_pid(p: Option<TaskId>) -> i64 {
    p.map_or(0, |p| p as i64 + 1)
}

/// Events per bundle before it is written out.
const BUNDLE_EVENTS: usize = 1024;

/// A thread as an event names it: pid (0 is the CPU's idle task), comm and
/// kernel priority.
#[derive(Clone, Copy, Debug)]
pub struct Who<'a> {
    /// pid (the kernel's: a task id + 1; 0 is idle).
    pub pid: i64,
    /// comm.
    pub comm: &'a str,
    /// prio as the tracepoint reports it.
    pub prio: i64,
}

/// A thread as the process tree names it, with its process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadInfo {
    /// Thread id.
    pub tid: i64,
    /// Thread name.
    pub name: String,
    /// Its process (thread group) id.
    pub tgid: i64,
    /// The process's name (its cmdline in the trace).
    pub process: String,
    /// The parent process, when known.
    pub ppid: Option<i64>,
}

/// What ran a wakeup tracepoint: the task current on the CPU, and the
/// interrupt it ran in, if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Waker {
    /// The current task's pid (the event's pid): the waker in task context,
    /// the interrupted task in an interrupt.
    pub pid: i64,
    /// The trace_entry interrupt-context bits (hardirq 0x08, softirq 0x10,
    /// NMI 0x40), written as FtraceEvent.common_flags; 0 in task context.
    pub irq_flags: u32,
}

/// The wakeup tracepoints a trace can hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WakeKind {
    /// sched_waking, from the waker's CPU.
    Waking,
    /// sched_wakeup, where the task was made runnable.
    Wakeup,
    /// sched_wakeup_new, for a new task.
    WakeupNew,
}

/// Writes a Perfetto protobuf trace as the run goes: per-CPU
/// `FtraceEventBundle`s of sched_switch / sched_waking / sched_wakeup /
/// sched_wakeup_new, and `ProcessTree` packets naming every thread and
/// process that appears. Memory stays bounded: at most `BUNDLE_EVENTS`
/// events per CPU are buffered.
///
/// A simulation feeds it as a [`TraceSink`]; real mode's kernel trace
/// (`real::tracefs`) calls [`PerfettoWriter::switch`], [`PerfettoWriter::wake`]
/// and [`PerfettoWriter::describe`] with the kernel's pids directly.
pub struct PerfettoWriter {
    out: Box<dyn Write>,
    /// Only events in [start, end) are written.
    window: (Ns, Ns),
    bufs: Vec<(Vec<u8>, usize)>,
    /// Which pids and processes the process tree already names.
    described: std::collections::BTreeSet<i64>,
    processes: std::collections::BTreeSet<i64>,
    /// Threads named since the last ProcessTree packet.
    pending: Vec<ThreadInfo>,
    /// Process leaders (lowest task id) by tgid, filled as tasks appear.
    leaders: std::collections::BTreeMap<u32, TaskId>,
    scanned: usize,
    error: Option<std::io::Error>,
    /// Events written to the file so far.
    pub events_written: u64,
}

impl PerfettoWriter {
    /// A writer of Perfetto packets to `out`, keeping only `window` (ns).
    pub fn new(out: Box<dyn Write>, nr_cpus: usize, window: Option<(Ns, Ns)>) -> Self {
        PerfettoWriter {
            out,
            window: window.unwrap_or((0, Ns::MAX)),
            bufs: vec![(Vec::new(), 0); nr_cpus],
            described: Default::default(),
            processes: Default::default(),
            pending: Vec::new(),
            leaders: Default::default(),
            scanned: 0,
            error: None,
            events_written: 0,
        }
    }

    /// Creates `path` and writes to it through a buffer.
    pub fn create(path: &std::path::Path, nr_cpus: usize, window: Option<(Ns, Ns)>) -> std::io::Result<Self> {
        let f = std::fs::File::create(path)?;
        Ok(Self::new(Box::new(std::io::BufWriter::with_capacity(1 << 16, f)), nr_cpus, window))
    }

    /// Whether an event at `ts` is kept (`--trace-window`).
    pub fn in_window(&self, ts: Ns) -> bool {
        ts >= self.window.0 && ts < self.window.1
    }

    /// Whether the process tree names `pid` already (or will, in the next packet).
    pub fn is_described(&self, pid: i64) -> bool {
        pid == 0 || self.described.contains(&pid)
    }

    /// Names a thread and its process in the next ProcessTree packet, once per pid.
    pub fn describe(&mut self, t: ThreadInfo) {
        if t.tid != 0 && self.described.insert(t.tid) {
            self.pending.push(t);
        }
    }

    /// sched_switch on `cpu`: `prev` leaves in `prev_state` (the kernel's
    /// TASK_REPORT bits), `next` runs. The event's pid is `prev`'s.
    pub fn switch(&mut self, ts: Ns, cpu: usize, prev: Who, prev_state: i64, next: Who) {
        if !self.in_window(ts) {
            return;
        }
        let mut body = Vec::with_capacity(64);
        pb::bytes(&mut body, fields::SWITCH_PREV_COMM, prev.comm.as_bytes());
        pb::int(&mut body, fields::SWITCH_PREV_PID, prev.pid);
        pb::int(&mut body, fields::SWITCH_PREV_PRIO, prev.prio);
        pb::int(&mut body, fields::SWITCH_PREV_STATE, prev_state);
        pb::bytes(&mut body, fields::SWITCH_NEXT_COMM, next.comm.as_bytes());
        pb::int(&mut body, fields::SWITCH_NEXT_PID, next.pid);
        pb::int(&mut body, fields::SWITCH_NEXT_PRIO, next.prio);
        self.push(ts, cpu, prev.pid, 0, fields::EVENT_SCHED_SWITCH, &body);
    }

    /// A wakeup tracepoint on `cpu`, run by `waker`, for `task`.
    pub fn wake(&mut self, ts: Ns, cpu: usize, waker: Waker, kind: WakeKind, task: Who, target_cpu: i64) {
        if !self.in_window(ts) {
            return;
        }
        let mut body = Vec::with_capacity(48);
        pb::bytes(&mut body, fields::WAKE_COMM, task.comm.as_bytes());
        pb::int(&mut body, fields::WAKE_PID, task.pid);
        pb::int(&mut body, fields::WAKE_PRIO, task.prio);
        pb::int(&mut body, fields::WAKE_SUCCESS, 1);
        pb::int(&mut body, fields::WAKE_TARGET_CPU, target_cpu);
        let field = match kind {
            WakeKind::Waking => fields::EVENT_SCHED_WAKING,
            WakeKind::Wakeup => fields::EVENT_SCHED_WAKEUP,
            WakeKind::WakeupNew => fields::EVENT_SCHED_WAKEUP_NEW,
        };
        self.push(ts, cpu, waker.pid, waker.irq_flags, field, &body);
    }

    fn push(&mut self, ts: Ns, cpu: usize, pid: i64, common_flags: u32, field: u32, body: &[u8]) {
        if self.bufs.len() <= cpu {
            self.bufs.resize(cpu + 1, (Vec::new(), 0));
        }
        let buf = &mut self.bufs[cpu];
        let mut e = Vec::with_capacity(body.len() + 16);
        pb::uint(&mut e, fields::EVENT_TIMESTAMP, ts);
        pb::uint(&mut e, fields::EVENT_PID, pid as u64);
        if common_flags != 0 {
            pb::uint(&mut e, fields::EVENT_COMMON_FLAGS, common_flags as u64);
        }
        pb::bytes(&mut e, field, body);
        pb::bytes(&mut buf.0, fields::BUNDLE_EVENT, &e);
        buf.1 += 1;
        self.events_written += 1;
        if buf.1 >= BUNDLE_EVENTS {
            self.flush_cpu(cpu, ts);
        }
    }

    /// Writes out everything buffered; `end` stamps the last process tree.
    pub fn finish_at(&mut self, end: Ns) -> std::io::Result<()> {
        for c in 0..self.bufs.len() {
            self.flush_cpu(c, end.min(self.window.1));
        }
        // Threads described but in no event of the window still get named.
        self.describe_pending(end.min(self.window.1));
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.out.flush()
    }

    fn write_packet(&mut self, packet: &[u8]) {
        if self.error.is_some() {
            return;
        }
        let mut head = Vec::with_capacity(8);
        pb::key(&mut head, fields::TRACE_PACKET, 2);
        pb::varint(&mut head, packet.len() as u64);
        if let Err(e) = self.out.write_all(&head).and_then(|_| self.out.write_all(packet)) {
            self.error = Some(e);
        }
    }

    /// One packet naming the task groups of the traced threads: TracePacket
    /// field 1977 (not Perfetto's), repeated `group` (1): `path` (1),
    /// `weight` (2), `tid` (3, repeated). Written by real mode, read by
    /// `schedlab import-trace`.
    pub fn task_groups(&mut self, groups: &[TaskGroup]) {
        if groups.is_empty() {
            return;
        }
        let mut msg = Vec::new();
        for g in groups {
            let mut m = Vec::new();
            pb::bytes(&mut m, task_group_fields::GROUP_PATH, g.path.as_bytes());
            pb::uint(&mut m, task_group_fields::GROUP_WEIGHT, g.weight);
            for &t in &g.tids {
                pb::int(&mut m, task_group_fields::GROUP_TID, t);
            }
            pb::bytes(&mut msg, task_group_fields::TASK_GROUP, &m);
        }
        let mut packet = Vec::new();
        pb::bytes(&mut packet, task_group_fields::PACKET_TASK_GROUPS, &msg);
        pb::uint(&mut packet, fields::PACKET_SEQUENCE_ID, 1);
        self.write_packet(&packet);
    }

    /// A ProcessTree packet for the threads named since the last one.
    fn describe_pending(&mut self, ts: Ns) {
        if self.pending.is_empty() {
            return;
        }
        let mut tree = Vec::new();
        let mut procs: Vec<(i64, &str, Option<i64>)> = Vec::new();
        for t in &self.pending {
            let mut th = Vec::new();
            pb::int(&mut th, fields::THREAD_TID, t.tid);
            pb::bytes(&mut th, fields::THREAD_NAME, t.name.as_bytes());
            pb::int(&mut th, fields::THREAD_TGID, t.tgid);
            pb::bytes(&mut tree, fields::TREE_THREADS, &th);
            if !self.processes.contains(&t.tgid) && !procs.iter().any(|p| p.0 == t.tgid) {
                procs.push((t.tgid, &t.process, t.ppid));
            }
        }
        for (pid, name, ppid) in procs {
            let mut pr = Vec::new();
            pb::int(&mut pr, fields::PROCESS_PID, pid);
            if let Some(pp) = ppid {
                pb::int(&mut pr, fields::PROCESS_PPID, pp);
            }
            pb::bytes(&mut pr, fields::PROCESS_CMDLINE, name.as_bytes());
            pb::bytes(&mut tree, fields::TREE_PROCESSES, &pr);
            self.processes.insert(pid);
        }
        self.pending.clear();
        let mut packet = Vec::new();
        pb::uint(&mut packet, fields::PACKET_TIMESTAMP, ts);
        pb::bytes(&mut packet, fields::PACKET_PROCESS_TREE, &tree);
        pb::uint(&mut packet, fields::PACKET_SEQUENCE_ID, 1);
        self.write_packet(&packet);
    }

    fn flush_cpu(&mut self, cpu: usize, ts: Ns) {
        if self.bufs[cpu].1 == 0 {
            return;
        }
        self.describe_pending(ts);
        let (events, _) = std::mem::take(&mut self.bufs[cpu]);
        let mut bundle = Vec::with_capacity(events.len() + 8);
        pb::uint(&mut bundle, fields::BUNDLE_CPU, cpu as u64);
        bundle.extend_from_slice(&events);
        let mut packet = Vec::with_capacity(bundle.len() + 8);
        pb::bytes(&mut packet, fields::PACKET_FTRACE_EVENTS, &bundle);
        pb::uint(&mut packet, fields::PACKET_SEQUENCE_ID, 1);
        self.write_packet(&packet);
    }

    /// Names a simulated task (thread pid = task id + 1, process = its
    /// leader, the lowest task id of its tgid).
    fn describe_task(&mut self, p: Option<TaskId>, tasks: &[Task]) {
        let Some(p) = p else { return };
        if self.is_described(trace_pid(Some(p))) {
            return;
        }
        for (i, t) in tasks.iter().enumerate().skip(self.scanned) {
            self.leaders.entry(t.tgid).or_insert(i as TaskId);
        }
        self.scanned = tasks.len();
        let t = &tasks[p as usize];
        let leader = self.leaders[&t.tgid];
        self.describe(ThreadInfo { tid: trace_pid(Some(p)), name: t.name.clone(), tgid: trace_pid(Some(leader)), process: tasks[leader as usize].name.clone(), ppid: Some(1) });
    }
}

fn who<'a>(tasks: &'a [Task], p: Option<TaskId>, idle: &'a str) -> Who<'a> {
    match p {
        Some(p) => Who { pid: trace_pid(Some(p)), comm: &tasks[p as usize].name, prio: tasks[p as usize].prio as i64 },
        None => Who { pid: 0, comm: idle, prio: 120 },
    }
}

impl TraceSink for PerfettoWriter {
    fn event(&mut self, ts: Ns, ev: &TraceEvent, tasks: &[Task]) {
        if !self.in_window(ts) {
            return;
        }
        let cpu = ev.cpu();
        match *ev {
            TraceEvent::Switch { cpu, prev, prev_state, next } => {
                self.describe_task(prev, tasks);
                self.describe_task(next, tasks);
                let idle = if prev.is_none() || next.is_none() { format!("swapper/{cpu}") } else { String::new() };
                self.switch(ts, cpu as usize, who(tasks, prev, &idle), prev_state.kernel_bits(), who(tasks, next, &idle));
            }
            TraceEvent::Waking { waker, task, target_cpu, .. } | TraceEvent::WakeupNew { waker, task, target_cpu, .. } => {
                self.describe_task(waker, tasks);
                self.describe_task(Some(task), tasks);
                let kind = if matches!(ev, TraceEvent::Waking { .. }) { WakeKind::Waking } else { WakeKind::WakeupNew };
                self.wake(ts, cpu as usize, Waker { pid: trace_pid(waker), irq_flags: 0 }, kind, who(tasks, Some(task), ""), target_cpu as i64);
            }
        }
    }

    fn finish(&mut self, end: Ns, _tasks: &[Task]) -> std::io::Result<()> {
        self.finish_at(end)
    }
}
