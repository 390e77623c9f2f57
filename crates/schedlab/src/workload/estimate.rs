//! What a scenario will cost in memory, estimated from its text before
//! anything is built, so that a scenario too big for this machine is refused
//! up front with the estimate, instead of being OOM-killed halfway.
//!
//! The estimate counts the tasks each workload creates (with the defaults
//! its builder uses) and the per-CPU state, at the sizes measured on the
//! engine bench (about 1.5 KB per task at 20,000 tasks; per-CPU runqueues,
//! timers, masks and sched domains). It errs on the high side.

use crate::workload::rtapp::{self, Json};
use crate::workload::scenario::{Scenario, WorkloadSpec};

/// Bytes of simulator state per task (task_struct, entity, stats, latency
/// histograms, program state), rounded up from measurement.
pub const TASK_BYTES: u64 = 4 << 10;
/// Bytes of per-CPU state (runqueue, timers, idle state, sched domains).
pub const CPU_BYTES: u64 = 64 << 10;
/// Bytes per pair of CPUs: masks that are kept per CPU and per domain level.
pub const CPU_PAIR_BYTES: u64 = 64;

/// The simulator's memory estimate for a scenario on `nr_cpus` CPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Estimate {
    /// Tasks the workloads create at start (fork storms: the most alive at once).
    pub tasks: u64,
    /// CPUs of the machine.
    pub cpus: u64,
}

impl Estimate {
    /// Bytes: tasks × [`TASK_BYTES`] + CPUs × [`CPU_BYTES`] + CPUs² × [`CPU_PAIR_BYTES`].
    pub fn bytes(&self) -> u64 {
        self.tasks
            .saturating_mul(TASK_BYTES)
            .saturating_add(self.cpus.saturating_mul(CPU_BYTES))
            .saturating_add(self.cpus.saturating_mul(self.cpus).saturating_mul(CPU_PAIR_BYTES))
    }
}

/// Tasks of one rt-app description: Σ "instance" over "tasks" (default 1
/// each); 0 when the JSON does not parse (the builder reports that).
fn rtapp_tasks(text: &str) -> u64 {
    let Ok(Json::Obj(top)) = rtapp::parse(text, "") else { return 0 };
    let Some((_, Json::Obj(tasks))) = top.iter().find(|(k, _)| k == "tasks") else { return 0 };
    tasks
        .iter()
        .map(|(_, t)| match t {
            Json::Obj(f) => f.iter().find(|(k, _)| k == "instance").map_or(1, |(_, v)| if let Json::Int(n) = v { (*n).max(0) as u64 } else { 1 }),
            _ => 1,
        })
        .fold(0u64, u64::saturating_add)
}

/// Counts the tasks a scenario's workloads create on `nr_cpus` CPUs, with
/// each builder's defaults. rt-app files named by path are read here too
/// (a file that cannot be read counts 0: building reports it).
pub fn estimate(s: &Scenario, nr_cpus: usize) -> Estimate {
    let n = nr_cpus as u64;
    let mut tasks = 0u64;
    for w in &s.workloads {
        let t: u64 = match w {
            WorkloadSpec::Hog(h) => h.count as u64,
            WorkloadSpec::Cyclictest(c) => {
                if c.smp {
                    n
                } else {
                    c.threads.unwrap_or(1) as u64
                }
            }
            WorkloadSpec::Hackbench(h) => 2 * h.groups.unwrap_or(10) as u64 * h.fds.unwrap_or(20) as u64,
            WorkloadSpec::Stress(st) => {
                let workers = st.workers.filter(|&w| w > 0).map_or(n, u64::from);
                match st.stressor.as_str() {
                    "switch" => 2 * workers,
                    "fork" => 2 * workers,
                    _ => workers,
                }
            }
            WorkloadSpec::Vm(v) => v.vms.unwrap_or(2) as u64 * v.vcpus.unwrap_or(16) as u64,
            WorkloadSpec::Schbench(sb) => {
                let m = sb.message_threads.unwrap_or(1) as u64;
                m.saturating_mul(1 + sb.threads.map_or(n, u64::from))
            }
            WorkloadSpec::Mixed(m) => {
                let steady = (m.oversubscription.unwrap_or(2.0).clamp(0.0, 100.0) * n as f64).ceil() as u64;
                let switch = 2 * m.switch_pairs.map_or(n / 4, u64::from);
                let fifo = m.fifo_tasks.map_or((n / 6).max(1), u64::from);
                let forkers = 2 * m.fork_workers.unwrap_or(2) as u64;
                steady + switch + fifo + forkers
            }
            WorkloadSpec::Server(sv) => {
                let instances = sv.instances.unwrap_or(4) as u64;
                let threads = sv.threads.unwrap_or(4) as u64;
                let connections = sv.connections.map_or(2 * threads.saturating_sub(1), u64::from);
                instances.saturating_mul(threads + connections)
            }
            WorkloadSpec::Rtapp(r) => match (&r.json, &r.file) {
                (Some(j), _) => rtapp_tasks(j),
                (None, Some(f)) => std::fs::read_to_string(r.base_dir.join(f)).map_or(0, |t| rtapp_tasks(&t)),
                (None, None) => 0,
            },
            WorkloadSpec::Replay(_) => 1,
        };
        tasks = tasks.saturating_add(t);
    }
    Estimate { tasks, cpus: n }
}

/// Memory this machine can give a run: MemAvailable from /proc/meminfo
/// (None where that cannot be read: then nothing is refused).
pub fn available_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// "1.5 GiB", "300 MiB", "12 KiB".
pub fn fmt_bytes(b: u64) -> String {
    const UNITS: [(&str, u64); 4] = [("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    for (name, size) in UNITS {
        if b >= size {
            let v = b as f64 / size as f64;
            return if v >= 10.0 { format!("{v:.0} {name}") } else { format!("{v:.1} {name}") };
        }
    }
    format!("{b} B")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn est(text: &str, cpus: usize) -> Estimate {
        estimate(&Scenario::parse(&format!("duration = \"1s\"\n{text}"), "t.toml", &[]).unwrap(), cpus)
    }

    #[test]
    fn counts_each_builders_tasks() {
        let e = est(
            "[[workload]]\nkind = \"hog\"\ncount = 5\n[[workload]]\nkind = \"hackbench\"\ngroups = 2\nfds = 3\n\
             [[workload]]\nkind = \"cyclictest\"\nsmp = true\n[[workload]]\nkind = \"stress\"\nstressor = \"switch\"\n\
             [[workload]]\nkind = \"rtapp\"\njson = '{\"tasks\": {\"a\": {\"instance\": 3}, \"b\": {}}}'\n",
            8,
        );
        assert_eq!(e, Estimate { tasks: 5 + 12 + 8 + 16 + 4, cpus: 8 });
    }

    #[test]
    fn huge_counts_saturate_instead_of_overflowing() {
        let e = est("[[workload]]\nkind = \"vm\"\nvms = 4000000000\nvcpus = 4000000000\n", 4);
        assert!(e.bytes() > 1 << 60, "{}", e.bytes());
        assert_eq!(fmt_bytes(3 << 29), "1.5 GiB");
        assert_eq!(fmt_bytes(300 << 20), "300 MiB");
    }
}
