//! Reader of Perfetto traces (`Trace` protobuf) of sched events: the ones
//! schedlab writes (simulated runs and `run --real --trace`) and the ones
//! Perfetto's `traced` records with the ftrace data source, in either of
//! its encodings: `FtraceEvent`s (sched_switch, sched_waking,
//! sched_wakeup, sched_wakeup_new, sched_process_fork, sched_process_exit;
//! a wakeup whose `common_flags` mark an interrupt context has no task for
//! waker)
//! and the `compact_sched` arrays (switches and wakings; the prev task of a
//! switch is the next of the previous one on that CPU, and the waker of a
//! waking is the task current on its CPU).
//!
//! The protobuf decoding is hand-rolled over the byte slice (as the writer
//! in `results::trace` is), so that an error names the byte offset where
//! the trace stopped making sense. Field numbers are those of Perfetto's
//! `protos/perfetto/trace/` (trace_packet.proto, ftrace_event_bundle.proto,
//! ftrace_event.proto, sched.proto).

use super::events::{Kind, LeftAs, SchedEvent, TraceTask};
use super::tracefs_line::IRQ_CONTEXT;
use super::ImportError;

/// A protobuf message being read: its bytes and their offset in the file.
#[derive(Clone, Copy)]
struct Msg<'a> {
    data: &'a [u8],
    base: usize,
}

/// A field's value by wire type.
#[derive(Clone, Copy)]
enum Val<'a> {
    Int(u64),
    Bytes(Msg<'a>),
    Fixed(u64),
}

impl<'a> Val<'a> {
    fn int(self) -> u64 {
        match self {
            Val::Int(v) | Val::Fixed(v) => v,
            Val::Bytes(_) => 0,
        }
    }
    fn msg(self) -> Option<Msg<'a>> {
        if let Val::Bytes(m) = self {
            Some(m)
        } else {
            None
        }
    }
    fn str(self) -> String {
        self.msg().map(|m| String::from_utf8_lossy(m.data).into_owned()).unwrap_or_default()
    }
}

fn err(offset: usize, expected: impl Into<String>) -> ImportError {
    ImportError { offset, expected: expected.into() }
}

fn varint(data: &[u8], pos: &mut usize, base: usize) -> Result<u64, ImportError> {
    let mut v = 0u64;
    for i in 0..10 {
        let Some(&b) = data.get(*pos) else {
            return Err(err(base + *pos, "the rest of a protobuf varint (the trace is cut short)"));
        };
        *pos += 1;
        v |= ((b & 0x7f) as u64) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(err(base + *pos - 1, "a protobuf varint of at most 10 bytes"))
}

impl<'a> Msg<'a> {
    /// Every field in order, or where the message stops making sense.
    fn fields(self) -> Result<Vec<(u32, Val<'a>, usize)>, ImportError> {
        let (d, base) = (self.data, self.base);
        let mut out = Vec::new();
        let mut pos = 0;
        while pos < d.len() {
            let at = pos;
            let key = varint(d, &mut pos, base)?;
            let (field, wire) = ((key >> 3) as u32, key & 7);
            if field == 0 {
                return Err(err(base + at, "a protobuf field key (field numbers start at 1)"));
            }
            let fixed = |n: usize, pos: &mut usize| -> Result<u64, ImportError> {
                let b = d.get(*pos..*pos + n).ok_or_else(|| err(base + *pos, format!("{n} bytes of a fixed-size protobuf field")))?;
                *pos += n;
                Ok(b.iter().rev().fold(0u64, |a, &x| a << 8 | x as u64))
            };
            let val = match wire {
                0 => Val::Int(varint(d, &mut pos, base)?),
                1 => Val::Fixed(fixed(8, &mut pos)?),
                5 => Val::Fixed(fixed(4, &mut pos)?),
                2 => {
                    let len = varint(d, &mut pos, base)?;
                    let left = d.len() - pos;
                    if len > left as u64 {
                        return Err(err(base + at, format!("a length-delimited field of {len} bytes within its message ({left} left)")));
                    }
                    let m = Msg { data: &d[pos..pos + len as usize], base: base + pos };
                    pos += len as usize;
                    Val::Bytes(m)
                }
                w => return Err(err(base + at, format!("a protobuf wire type 0, 1, 2 or 5 (got {w} for field {field})"))),
            };
            out.push((field, val, base + at));
        }
        Ok(out)
    }

    /// A repeated scalar field's values, packed or not.
    fn packed(self) -> Result<Vec<u64>, ImportError> {
        let mut pos = 0;
        let mut v = Vec::new();
        while pos < self.data.len() {
            v.push(varint(self.data, &mut pos, self.base)?);
        }
        Ok(v)
    }
}

/// Whether `data` looks like a Perfetto trace: a TracePacket (field 1,
/// length-delimited) first (whether it fits is for [`read`] to say).
pub fn looks_like(data: &[u8]) -> bool {
    let mut pos = 1;
    data.first() == Some(&0x0a) && varint(data, &mut pos, 0).is_ok()
}

/// TASK_REPORT bits of sched_switch's prev_state: R (0) and the preempted
/// mark (TASK_REPORT_MAX, 0x100 and up) are runnable; X and Z are dead.
fn left_as(state: i64) -> LeftAs {
    if state & 0x30 != 0 {
        LeftAs::Dead
    } else if state & 0xff == 0 {
        LeftAs::Preempted
    } else {
        LeftAs::Blocked
    }
}

/// The waker of a compact_sched waking, filled in once the events are in
/// time order (the task current on the CPU).
const WAKER_CURRENT: i32 = -1;

#[derive(Default)]
struct Reader {
    out: Vec<SchedEvent>,
    /// Compact switches name no prev: the last next on each CPU.
    current: Vec<Option<TraceTask>>,
}

impl Reader {
    fn current(&mut self, cpu: u32) -> &mut Option<TraceTask> {
        let i = cpu as usize;
        if self.current.len() <= i {
            self.current.resize(i + 1, None);
        }
        &mut self.current[i]
    }

    fn event(&mut self, m: Msg<'_>, cpu: u32) -> Result<(), ImportError> {
        let (mut ts, mut pid, mut flags) = (None, 0i32, 0u64);
        let mut body = None;
        for (f, v, at) in m.fields()? {
            match f {
                1 => ts = Some(v.int()),
                2 => pid = v.int() as i32,
                5 => flags = v.int(),
                4 | 17 | 20 | 114 | 238 | 239 => body = Some((f, v.msg().ok_or_else(|| err(at, format!("FtraceEvent field {f} as a message")))?)),
                _ => {}
            }
        }
        let Some((f, b)) = body else { return Ok(()) };
        let ts = ts.ok_or_else(|| err(m.base, "an FtraceEvent with a timestamp (field 1)"))?;
        let mut s = [const { None }; 8];
        for (k, v, _) in b.fields()? {
            if let Some(slot) = s.get_mut(k as usize) {
                *slot = Some(v);
            }
        }
        let int = |i: usize| s[i].map_or(0, |v| v.int() as i64);
        let int32 = |i: usize| int(i) as i32;
        let text = |i: usize| s[i].map(|v| v.str()).unwrap_or_default();
        let kind = match f {
            4 => {
                let next = TraceTask { pid: int32(6), comm: text(5), prio: int32(7) as i64 };
                *self.current(cpu) = Some(next.clone());
                Kind::Switch { prev: TraceTask { pid: int32(2), comm: text(1), prio: int32(3) as i64 }, left: left_as(int(4)), next }
            }
            238 => Kind::Exit { task: TraceTask { pid: int32(2), comm: text(1), prio: int32(4) as i64 } },
            239 => Kind::Fork { parent: int32(2), child: TraceTask { pid: int32(4), comm: text(3), prio: 120 } },
            // In an interrupt (common_flags), the current task is not the
            // waker: the wakeup is a timer's or a device's (pid 0).
            _ => {
                let waker = if flags as u32 & IRQ_CONTEXT != 0 { 0 } else { pid };
                Kind::Wake { task: TraceTask { pid: int32(2), comm: text(1), prio: int32(3) as i64 }, waker, new: f == 114 }
            }
        };
        self.out.push(SchedEvent { ts_ns: ts, cpu, kind });
        Ok(())
    }

    fn compact(&mut self, m: Msg<'_>, cpu: u32) -> Result<(), ImportError> {
        let mut intern = Vec::new();
        let mut a: [Vec<u64>; 13] = Default::default();
        for (f, v, _) in m.fields()? {
            match (f, v) {
                (5, v) => intern.push(v.str()),
                (1..=12, Val::Bytes(b)) => a[f as usize].extend(b.packed()?),
                (1..=12, v) => a[f as usize].push(v.int()),
                _ => {}
            }
        }
        let comm = |i: Option<&u64>| i.and_then(|&i| intern.get(i as usize)).cloned().unwrap_or_default();
        let n = a[1].len();
        if [2, 3, 4].iter().any(|&k| a[k].len() != n) {
            return Err(err(m.base, "compact_sched switch arrays of one length (timestamp, prev_state, next_pid, next_prio)"));
        }
        let mut ts = 0u64;
        let mut events = Vec::new();
        for i in 0..n {
            ts = ts.wrapping_add(a[1][i]);
            let next = TraceTask { pid: a[3][i] as i32, comm: comm(a[6].get(i)), prio: a[4][i] as i32 as i64 };
            let prev = self.current(cpu).replace(next.clone()).unwrap_or(TraceTask { pid: 0, comm: String::new(), prio: 120 });
            events.push(SchedEvent { ts_ns: ts, cpu, kind: Kind::Switch { prev, left: left_as(a[2][i] as i64), next } });
        }
        let n = a[7].len();
        if [8, 10].iter().any(|&k| a[k].len() != n) {
            return Err(err(m.base, "compact_sched waking arrays of one length (timestamp, pid, prio)"));
        }
        let mut ts = 0u64;
        for i in 0..n {
            ts = ts.wrapping_add(a[7][i]);
            let task = TraceTask { pid: a[8][i] as i32, comm: comm(a[11].get(i)), prio: a[10][i] as i32 as i64 };
            events.push(SchedEvent { ts_ns: ts, cpu, kind: Kind::Wake { task, waker: WAKER_CURRENT, new: false } });
        }
        self.out.extend(events);
        Ok(())
    }
}

/// Read every sched event of a Perfetto trace, in time order (stable for
/// equal times).
pub fn read(data: &[u8]) -> Result<Vec<SchedEvent>, ImportError> {
    let mut r = Reader::default();
    for (f, v, at) in (Msg { data, base: 0 }).fields()? {
        let (1, Some(packet)) = (f, v.msg()) else {
            return Err(err(at, "a TracePacket (field 1 of Trace, length-delimited)"));
        };
        for (f, v, at) in packet.fields()? {
            match f {
                50 => return Err(err(at, "uncompressed packets (this reader does not inflate compressed_packets: record with compression off)")),
                1 => {
                    let bundle = v.msg().ok_or_else(|| err(at, "an FtraceEventBundle (field 1 of TracePacket, a message)"))?;
                    let fields = bundle.fields()?;
                    let cpu = fields.iter().find(|(f, ..)| *f == 1).map_or(0, |(_, v, _)| v.int() as u32);
                    if cpu > 4095 {
                        return Err(err(bundle.base, format!("a CPU number below 4096 (got {cpu})")));
                    }
                    for (f, v, at) in fields {
                        let m = || v.msg().ok_or_else(|| err(at, format!("FtraceEventBundle field {f} as a message")));
                        match f {
                            2 => r.event(m()?, cpu)?,
                            4 => r.compact(m()?, cpu)?,
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
    }
    let mut out = r.out;
    out.sort_by_key(|e| e.ts_ns);
    // Wakers of compact wakings: the task current on the CPU then.
    let mut current: Vec<i32> = Vec::new();
    for e in &mut out {
        let c = e.cpu as usize;
        if current.len() <= c {
            current.resize(c + 1, 0);
        }
        match &mut e.kind {
            Kind::Switch { next, .. } => current[c] = next.pid,
            Kind::Wake { waker, .. } if *waker == WAKER_CURRENT => *waker = current[c],
            _ => {}
        }
    }
    if !out.iter().any(|e| matches!(e.kind, Kind::Switch { .. })) {
        return Err(err(data.len(), "at least one sched_switch event (record the ftrace events sched/sched_switch and sched/sched_waking)"));
    }
    Ok(out)
}

/// The task groups a trace names (real mode writes them:
/// [`PerfettoWriter::task_groups`](crate::results::trace::PerfettoWriter::task_groups)),
/// as trace pid -> (group path, cpu.weight); empty when it names none.
pub fn task_groups(data: &[u8]) -> Result<std::collections::BTreeMap<i32, (String, u64)>, ImportError> {
    use crate::results::trace::task_group_fields as g;
    let mut out = std::collections::BTreeMap::new();
    for (_, packet, _) in (Msg { data, base: 0 }).fields()? {
        let Some(packet) = packet.msg() else { continue };
        for (f, v, at) in packet.fields()? {
            if f != g::PACKET_TASK_GROUPS {
                continue;
            }
            let groups = v.msg().ok_or_else(|| err(at, "the task groups as a message"))?;
            for (f, v, at) in groups.fields()? {
                if f != g::TASK_GROUP {
                    continue;
                }
                let (mut path, mut weight, mut tids) = (String::new(), 100, Vec::new());
                for (f, v, _) in v.msg().ok_or_else(|| err(at, "a task group as a message"))?.fields()? {
                    match (f, v) {
                        (g::GROUP_PATH, v) => path = v.str(),
                        (g::GROUP_WEIGHT, v) => weight = v.int(),
                        (g::GROUP_TID, Val::Bytes(b)) => tids.extend(b.packed()?),
                        (g::GROUP_TID, v) => tids.push(v.int()),
                        _ => {}
                    }
                }
                for t in tids {
                    out.insert(t as i32, (path.clone(), weight));
                }
            }
        }
    }
    Ok(out)
}
