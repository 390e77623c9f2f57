//! Perfetto traces decoded again, with message types that mirror perfetto's
//! .proto files (field numbers from protos/perfetto/trace/...). Shared by
//! the simulator's trace tests (tests/integration/trace.rs) and the CLI's
//! real-mode trace test (crates/schedlab-cli/tests/real.rs), which include
//! this file with `#[path]`; each uses only part of it.
#![allow(dead_code)]

use prost::Message;

/// trace.proto
#[derive(Clone, PartialEq, Message)]
pub struct Trace {
    #[prost(message, repeated, tag = "1")]
    pub packet: Vec<TracePacket>,
}

/// trace_packet.proto (the fields used here)
#[derive(Clone, PartialEq, Message)]
pub struct TracePacket {
    #[prost(uint64, optional, tag = "8")]
    pub timestamp: Option<u64>,
    #[prost(message, optional, tag = "1")]
    pub ftrace_events: Option<FtraceEventBundle>,
    #[prost(message, optional, tag = "2")]
    pub process_tree: Option<ProcessTree>,
    #[prost(uint32, optional, tag = "10")]
    pub trusted_packet_sequence_id: Option<u32>,
}

/// ftrace_event_bundle.proto
#[derive(Clone, PartialEq, Message)]
pub struct FtraceEventBundle {
    #[prost(uint32, optional, tag = "1")]
    pub cpu: Option<u32>,
    #[prost(message, repeated, tag = "2")]
    pub event: Vec<FtraceEvent>,
}

/// ftrace_event.proto
#[derive(Clone, PartialEq, Message)]
pub struct FtraceEvent {
    #[prost(uint64, optional, tag = "1")]
    pub timestamp: Option<u64>,
    #[prost(uint32, optional, tag = "2")]
    pub pid: Option<u32>,
    #[prost(message, optional, tag = "4")]
    pub sched_switch: Option<SchedSwitch>,
    #[prost(message, optional, tag = "17")]
    pub sched_wakeup: Option<SchedWaking>,
    #[prost(message, optional, tag = "20")]
    pub sched_waking: Option<SchedWaking>,
    #[prost(message, optional, tag = "114")]
    pub sched_wakeup_new: Option<SchedWaking>,
}

/// sched.proto: SchedSwitchFtraceEvent
#[derive(Clone, PartialEq, Message)]
pub struct SchedSwitch {
    #[prost(string, optional, tag = "1")]
    pub prev_comm: Option<String>,
    #[prost(int32, optional, tag = "2")]
    pub prev_pid: Option<i32>,
    #[prost(int32, optional, tag = "3")]
    pub prev_prio: Option<i32>,
    #[prost(int64, optional, tag = "4")]
    pub prev_state: Option<i64>,
    #[prost(string, optional, tag = "5")]
    pub next_comm: Option<String>,
    #[prost(int32, optional, tag = "6")]
    pub next_pid: Option<i32>,
    #[prost(int32, optional, tag = "7")]
    pub next_prio: Option<i32>,
}

/// sched.proto: SchedWakingFtraceEvent / SchedWakeupFtraceEvent / SchedWakeupNewFtraceEvent
#[derive(Clone, PartialEq, Message)]
pub struct SchedWaking {
    #[prost(string, optional, tag = "1")]
    pub comm: Option<String>,
    #[prost(int32, optional, tag = "2")]
    pub pid: Option<i32>,
    #[prost(int32, optional, tag = "3")]
    pub prio: Option<i32>,
    #[prost(int32, optional, tag = "4")]
    pub success: Option<i32>,
    #[prost(int32, optional, tag = "5")]
    pub target_cpu: Option<i32>,
}

/// ps/process_tree.proto
#[derive(Clone, PartialEq, Message)]
pub struct ProcessTree {
    #[prost(message, repeated, tag = "1")]
    pub processes: Vec<Process>,
    #[prost(message, repeated, tag = "2")]
    pub threads: Vec<Thread>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Process {
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    #[prost(int32, optional, tag = "2")]
    pub ppid: Option<i32>,
    #[prost(string, repeated, tag = "3")]
    pub cmdline: Vec<String>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Thread {
    #[prost(int32, optional, tag = "1")]
    pub tid: Option<i32>,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
    #[prost(int32, optional, tag = "3")]
    pub tgid: Option<i32>,
}

/// Decodes a whole trace file.
pub fn decode(bytes: &[u8]) -> Trace {
    Trace::decode(bytes).expect("the trace decodes as perfetto.protos.Trace")
}

/// Decoded ftrace events per CPU, in file order.
pub fn per_cpu(trace: &Trace, n: usize) -> Vec<Vec<FtraceEvent>> {
    let mut out = vec![Vec::new(); n];
    for p in &trace.packet {
        if let Some(b) = &p.ftrace_events {
            assert_eq!(p.trusted_packet_sequence_id, Some(1));
            let c = b.cpu.expect("bundle has a cpu") as usize;
            if out.len() <= c {
                out.resize(c + 1, Vec::new());
            }
            out[c].extend(b.event.iter().cloned());
        }
    }
    out
}

/// Every thread the process trees name: tid -> (name, tgid).
pub fn threads(trace: &Trace) -> std::collections::BTreeMap<i32, (String, i32)> {
    let mut threads = std::collections::BTreeMap::new();
    for p in &trace.packet {
        if let Some(t) = &p.process_tree {
            for th in &t.threads {
                assert!(threads.insert(th.tid.unwrap(), (th.name.clone().unwrap(), th.tgid.unwrap())).is_none(), "thread {:?} described twice", th.tid);
            }
        }
    }
    threads
}
