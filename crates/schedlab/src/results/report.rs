//! Results: the machine-readable JSON document and the human summary.

use serde::Serialize;

use crate::sched::sim::Sim;
use crate::engine::time::fmt_ns;

/// Wakeup latency of a workload, from its HDR histogram.
#[derive(Debug, Serialize)]
pub struct LatencyStats {
    /// Samples.
    pub count: u64,
    /// Smallest (ns).
    pub min_ns: u64,
    /// Mean (ns).
    pub mean_ns: u64,
    /// Median (ns).
    pub p50_ns: u64,
    /// 90th percentile (ns).
    pub p90_ns: u64,
    /// 99th percentile (ns).
    pub p99_ns: u64,
    /// 99.9th percentile (ns).
    pub p999_ns: u64,
    /// Largest (ns).
    pub max_ns: u64,
}

/// Samples above a threshold (cyclictest's spikes_above).
#[derive(Debug, Serialize)]
pub struct ThresholdCount {
    /// The threshold (ns).
    pub above_ns: u64,
    /// Samples above it.
    pub count: u64,
}

/// One workload's results.
#[derive(Debug, Serialize)]
pub struct WorkloadResult {
    /// Its name.
    pub name: String,
    /// Its kind.
    pub kind: String,
    /// Tasks it created.
    pub tasks: u32,
    /// Wakeup latency, for workloads that measure it.
    pub latency: Option<LatencyStats>,
    /// Samples above each `spikes_above` threshold.
    pub thresholds: Vec<ThresholdCount>,
    /// Start to last exit, for workloads whose tasks all finish (hackbench).
    pub makespan_ns: Option<u64>,
    /// Every task exited before the end.
    pub finished: bool,
    /// Units of work done (loops, messages, requests).
    pub work: u64,
    /// CPU time of its tasks (ns).
    pub runtime_ns: u64,
    /// Exact min / mean / max of `latency` (cyclictest's Min, Avg, Max);
    /// the percentiles above are HDR values, good to 3 significant digits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_exact: Option<ExactLatency>,
    /// cyclictest --histogram: samples per whole microsecond of latency.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub histogram: Option<UsHistogram>,
    /// Request latencies (schbench: start of the request to its end;
    /// server: dispatch to reply handled).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_latency: Option<LatencyStats>,
    /// Completed requests per second of the workload's run (schbench, server).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests_per_s: Option<u64>,
}

/// Latency from every sample, not the histogram's buckets.
#[derive(Debug, Serialize)]
pub struct ExactLatency {
    /// Smallest (ns).
    pub min_ns: u64,
    /// Mean (ns).
    pub avg_ns: u64,
    /// Largest (ns).
    pub max_ns: u64,
}

/// A latency histogram with 1 us buckets: `counts[i]` samples of i us
/// (i * 1000 .. i * 1000 + 999 ns); `overflows` at or above `counts.len()` us.
#[derive(Debug, Serialize)]
pub struct UsHistogram {
    /// Samples per microsecond bucket (cyclictest --histogram).
    pub counts: Vec<u64>,
    /// Samples past the last bucket.
    pub overflows: u64,
}

/// One task's results.
#[derive(Debug, Serialize)]
pub struct TaskResult {
    /// Its task id.
    pub id: u32,
    /// Its name (comm).
    pub name: String,
    /// Its workload's name.
    pub workload: String,
    /// Process id (mm) and cgroup of the task.
    pub tgid: u32,
    /// Its cgroup path at the end.
    pub cgroup: String,
    /// CPU the task was last on.
    pub cpu: u32,
    /// Its CPU affinity at the end, and every CPU it ran on (cpulists).
    pub cpus_allowed: String,
    /// The CPUs it ran on (cpulist).
    pub ran_on: String,
    /// Its policy (SCHED_OTHER, SCHED_FIFO, ...).
    pub policy: &'static str,
    /// Its nice value at the end.
    pub nice: i32,
    /// Its kernel priority (p->prio).
    pub prio: i32,
    /// CPU time (se.sum_exec_runtime, ns).
    pub runtime_ns: u64,
    /// Time runnable but not running (schedstat run_delay, ns).
    pub wait_ns: u64,
    /// Times switched in (nr_switches).
    pub switches: u64,
    /// Voluntary switches (it blocked).
    pub voluntary_switches: u64,
    /// Migrations (nr_migrations).
    pub migrations: u64,
    /// Wakeups (nr_wakeups).
    pub wakeups: u64,
}

/// One CPU's results.
#[derive(Debug, Serialize)]
pub struct CpuResult {
    /// The CPU.
    pub cpu: u32,
    /// Time not idle (ns).
    pub busy_ns: u64,
    /// Busy fraction in parts per million (integer, so JSON is byte-stable).
    pub util_ppm: u64,
    /// Context switches on it.
    pub switches: u64,
    /// IPIs it received.
    pub ipis: u64,
    /// Tasks migrated onto it.
    pub migrations_in: u64,
}

/// Cache-aware scheduling's scan work (experiment 004), when SCHED_CACHE is on.
#[derive(Debug, Serialize)]
pub struct SchedCacheResult {
    /// LLC-preference scans done.
    pub scans: u64,
    /// CPUs visited by those scans.
    pub cpus_scanned: u64,
    /// Times a task's preferred LLC changed.
    pub preference_changes: u64,
}

/// What the sched_ext scheduler did, when one was loaded.
#[derive(Debug, Serialize)]
pub struct ScxResult {
    /// The scheduler's ops name.
    pub name: String,
    /// `crate:NAME@VERSION` when built from a published crate.
    #[serde(rename = "crate", skip_serializing_if = "Option::is_none")]
    pub crate_: Option<String>,
    /// "enabled" while it still ran at the end, "disabled" after an exit,
    /// "disabling" when the disable had not finished.
    pub state: &'static str,
    /// How it exited, if it did (kind, reason, message).
    pub exit: Option<crate::sched::ext::ops::ExitInfo>,
    /// Calls per sched_ext_ops callback (only callbacks that were called).
    pub op_calls: std::collections::BTreeMap<&'static str, u64>,
    /// kfunc calls made by its callbacks.
    pub kfunc_calls: u64,
    /// Tasks dispatched (ops.dispatch inserts).
    pub dispatched: u64,
    /// Direct dispatches from select_cpu / enqueue.
    pub direct_dispatches: u64,
    /// Dispatches dropped because the task's state moved on (stale qseq).
    pub stale_dispatches_dropped: u64,
    /// Tasks consumed from the local CPU's DSQs.
    pub consumed_local: u64,
    /// Tasks moved from another CPU's DSQs.
    pub consumed_remote: u64,
    /// Tasks walked over in DSQ scans.
    pub dsq_tasks_scanned: u64,
    /// Tasks re-enqueued (SCX_ENQ_REENQ / IMMED).
    pub reenqueued: u64,
    /// scx_bpf_kick_cpu() kicks.
    pub kicks: u64,
    /// Times a CPU kept its previous task (SCX_RQ_BAL_KEEP).
    pub keep_prev: u64,
    /// Slices refilled with the default slice.
    pub dfl_slice_refills: u64,
    /// Deferred work run through irq_work.
    pub deferred_irq_works: u64,
    /// ... of those, for another CPU's runqueue (where experiment 000's change acts).
    pub deferred_remote: u64,
    /// CPU time charged for callbacks, kfuncs, DSQ and runqueue locks (incl. waiting).
    pub overhead_ns: u64,
    /// CPU time spent waiting for DSQ locks (ns).
    pub dsq_lock_wait_ns: u64,
    /// CPU time spent waiting for runqueue locks (ns): remote pulls and
    /// moves, schedule() behind them, the disable's class switches.
    pub rq_lock_wait_ns: u64,
    /// Local DSQ residence: insert to removal (experiment 000's metric).
    pub local_dsq_residence: Option<LatencyStats>,
    /// Local-DSQ residences over 128 us.
    pub local_dsq_residence_over_128us: u64,
    /// Local-DSQ residences over 256 us.
    pub local_dsq_residence_over_256us: u64,
    /// Tasks moved by the bypass load balancer.
    pub bypass_lb_moved: u64,
    /// CPUs stuck in the scheduler past the hard-lockup threshold.
    pub hardlockups: u64,
    /// When disabling started (ns).
    pub disable_started_ns: Option<u64>,
    /// When its RCU grace period ended (ns).
    pub disable_grace_period_done_ns: Option<u64>,
    /// When disabling finished (ns).
    pub disable_done_ns: Option<u64>,
    /// Longest wait of a task while disabling (ns).
    pub max_wait_while_disabling_ns: u64,
    /// Text the scheduler wrote from ops.dump*() on an error exit.
    pub dump: String,
    /// The scheduler's own counters (its 8-byte integer .bss/.data
    /// globals) at the end of the run or when it was unloaded.
    pub counters: std::collections::BTreeMap<String, u64>,
}

impl ScxResult {
    fn collect(sim: &Sim) -> Option<ScxResult> {
        let x = &sim.scx;
        if x.name.is_empty() {
            return None;
        }
        let st = &x.stats;
        let residence = st.local_residence_all();
        let over = |ns: u64| match &residence {
            Some(h) if !h.is_empty() => h.count_between(ns + 1, h.max().max(ns + 1)),
            _ => 0,
        };
        Some(ScxResult {
            name: x.name.clone(),
            crate_: x.origin.as_ref().map(|(n, v)| format!("{n}@{v}")),
            state: match x.state {
                crate::sched::ext::EnableState::Enabled => "enabled",
                crate::sched::ext::EnableState::Disabling => "disabling (not finished)",
                crate::sched::ext::EnableState::Disabled => "disabled",
            },
            exit: x.exit.clone(),
            op_calls: crate::sched::ext::ops::Op::ALL
                .iter()
                .filter(|o| st.op_calls[o.index()] > 0)
                .map(|o| (o.name(), st.op_calls[o.index()]))
                .collect(),
            kfunc_calls: st.kfunc_calls,
            dispatched: st.dispatched,
            direct_dispatches: st.direct_dispatches,
            stale_dispatches_dropped: st.stale_dispatches,
            consumed_local: st.consumed_local,
            consumed_remote: st.consumed_remote,
            dsq_tasks_scanned: st.dsq_scanned,
            reenqueued: st.reenqueued,
            kicks: st.kicks,
            keep_prev: st.keep_prev,
            dfl_slice_refills: st.dfl_slice_refills,
            deferred_irq_works: st.deferred_irq_works,
            deferred_remote: st.deferred_remote,
            overhead_ns: st.overhead_ns,
            dsq_lock_wait_ns: st.dsq_lock_wait_ns,
            rq_lock_wait_ns: st.rq_lock_wait_ns,
            local_dsq_residence: residence.as_ref().and_then(latency_stats),
            local_dsq_residence_over_128us: over(128_000),
            local_dsq_residence_over_256us: over(256_000),
            bypass_lb_moved: st.bypass_lb_moved,
            hardlockups: st.hardlockups,
            disable_started_ns: st.disable_started_at,
            disable_grace_period_done_ns: st.disable_gp_done_at,
            disable_done_ns: st.disable_done_at,
            max_wait_while_disabling_ns: st.max_wait_while_disabling_ns,
            dump: x.dump.clone(),
            counters: match &x.ops {
                Some(o) => o.counters(),
                None => x.counters_at_exit.clone(),
            }
            .into_iter()
            .collect(),
        })
    }
}

fn latency_stats(h: &hdrhistogram::Histogram<u64>) -> Option<LatencyStats> {
    (!h.is_empty()).then(|| LatencyStats {
        count: h.len(),
        min_ns: h.min(),
        mean_ns: h.mean() as u64,
        p50_ns: h.value_at_quantile(0.50),
        p90_ns: h.value_at_quantile(0.90),
        p99_ns: h.value_at_quantile(0.99),
        p999_ns: h.value_at_quantile(0.999),
        max_ns: h.max(),
    })
}

/// What one cgroup's tasks received (cpu.stat), its descendants included.
#[derive(Debug, Serialize)]
pub struct CgroupResult {
    /// The cgroup's path.
    pub path: String,
    /// cpu.weight.
    pub weight: u32,
    /// cpu.max as "QUOTA PERIOD" or "max".
    pub max: String,
    /// cpuset.cpus.effective.
    pub cpus: String,
    /// cpu.idle.
    pub idle: bool,
    /// Tasks in the cgroup itself at the end.
    pub tasks: u32,
    /// CPU time of its tasks, descendants included (ns).
    pub runtime_ns: u64,
    /// Its part of the machine's CPU time, in parts per million.
    pub cpu_share_ppm: u64,
    /// Time its tasks waited runnable (ns).
    pub wait_ns: u64,
    /// Time throttled, summed over CPUs (cpu.stat throttled_usec, in ns).
    pub throttled_ns: u64,
    /// Periods in which it was throttled (nr_throttled).
    pub nr_throttled: u64,
    /// Periods elapsed with a quota (nr_periods).
    pub nr_periods: u64,
}

impl CgroupResult {
    fn collect(sim: &Sim) -> Vec<CgroupResult> {
        if !sim.cg.enabled() {
            return Vec::new();
        }
        let total = sim.now() as u128 * sim.nr_cpus() as u128;
        sim.cg
            .groups
            .iter()
            .enumerate()
            .skip(1)
            .map(|(i, g)| CgroupResult {
                path: g.path.clone(),
                weight: g.weight,
                max: match g.max.quota_ns {
                    None => format!("max {}", crate::results::csv::exact_duration(g.max.period_ns)),
                    Some(q) => format!("{} {}", crate::results::csv::exact_duration(q), crate::results::csv::exact_duration(g.max.period_ns)),
                },
                cpus: g.effective_cpus.to_cpulist(),
                idle: g.idle,
                tasks: sim.tasks.iter().filter(|t| t.cgrp as usize == i && t.state != crate::sched::task::TaskState::Dead).count() as u32,
                runtime_ns: g.stats.runtime_ns,
                cpu_share_ppm: (g.stats.runtime_ns as u128 * 1_000_000).checked_div(total).unwrap_or(0) as u64,
                wait_ns: g.stats.wait_ns,
                throttled_ns: g.stats.throttled_ns,
                nr_throttled: g.stats.nr_throttled,
                nr_periods: g.stats.nr_periods,
            })
            .collect()
    }
}

/// One spinlock's results.
#[derive(Debug, Serialize)]
pub struct LockResult {
    /// Its id.
    pub id: u32,
    /// Times taken.
    pub acquisitions: u64,
    /// CPU time burnt spinning on the lock.
    pub spin_ns: u64,
}

/// What a run reports: the document `--json` writes.
#[derive(Debug, Serialize)]
pub struct Results {
    /// The schedlab version that made it.
    pub schedlab_version: &'static str,
    /// The scenario's title.
    pub scenario: String,
    /// The seed.
    pub seed: u64,
    /// The machine (preset, import or "host").
    pub machine: String,
    /// CPUs.
    pub nr_cpus: usize,
    /// The scheduler (eevdf, ext:NAME, real:...).
    pub scheduler: String,
    /// Features switched from their defaults.
    pub features_changed: Vec<String>,
    /// Simulated (or measured) time (ns).
    pub sim_time_ns: u64,
    /// Events processed.
    pub events: u64,
    /// The event-stream hash: equal for identical runs.
    pub event_hash: String,
    /// Per workload.
    pub workloads: Vec<WorkloadResult>,
    /// Per task.
    pub tasks: Vec<TaskResult>,
    /// Per CPU.
    pub cpus: Vec<CpuResult>,
    /// Per spinlock.
    pub locks: Vec<LockResult>,
    /// SCHED_CACHE's counters, when on.
    pub sched_cache: Option<SchedCacheResult>,
    /// The sched_ext scheduler, if one was loaded.
    pub sched_ext: Option<ScxResult>,
    /// Per-cgroup results, when the scenario has cgroups.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cgroups: Vec<CgroupResult>,
    /// Set when the run stopped before the scenario's end (`--max-wall`):
    /// every figure above covers only the `sim_time_ns` simulated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partial: Option<Partial>,
}

/// Why a run stopped early, and how far it got.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Partial {
    /// What stopped it, e.g. "--max-wall 30s".
    pub reason: String,
    /// The simulated time the scenario asked for (ns); `sim_time_ns` is
    /// where the run stopped.
    pub duration_ns: u64,
}

impl Results {
    /// Collects the results of `sim` as it stands now.
    pub fn collect(sim: &Sim, scenario: &str, scheduler: &str) -> Results {
        let now = sim.now();
        let workloads = sim
            .metrics
            .iter()
            .enumerate()
            .map(|(w, m)| {
                let latency = latency_stats(&m.latency);
                let finished = m.finite && m.exited == m.nr_tasks;
                let runtime_ns = sim.tasks.iter().filter(|t| t.workload as usize == w).map(|t| t.stats.runtime_ns).sum();
                WorkloadResult {
                    name: m.name.clone(),
                    kind: m.kind.clone(),
                    tasks: m.nr_tasks,
                    latency,
                    thresholds: m.thresholds.iter().map(|t| ThresholdCount { above_ns: t.above_ns, count: t.count }).collect(),
                    makespan_ns: finished.then(|| m.last_exit_ns - m.start_ns),
                    finished,
                    work: m.work,
                    runtime_ns,
                    latency_exact: (!m.latency.is_empty()).then(|| ExactLatency {
                        min_ns: m.latency_min_ns,
                        avg_ns: (m.latency_sum_ns / m.latency.len() as u128) as u64,
                        max_ns: m.latency_max_ns,
                    }),
                    histogram: m.us_histogram.as_ref().map(|h| UsHistogram { counts: h.clone(), overflows: m.us_overflows }),
                    request_latency: m.request_latency.as_ref().and_then(latency_stats),
                    requests_per_s: m.reports_rate.then(|| {
                        let ran = now.saturating_sub(m.start_ns).max(1);
                        (m.work as u128 * 1_000_000_000 / ran as u128) as u64
                    }),
                }
            })
            .collect();
        // Most tasks share their affinity: its cpulist is written once.
        let mut last_allowed: Option<(crate::machine::cpumask::CpuMask, String)> = None;
        let mut allowed_list = |m: &crate::machine::cpumask::CpuMask| -> String {
            match &last_allowed {
                Some((prev, text)) if prev == m => text.clone(),
                _ => {
                    let text = m.to_cpulist();
                    last_allowed = Some((m.clone(), text.clone()));
                    text
                }
            }
        };
        let tasks = sim
            .tasks
            .iter()
            .map(|t| TaskResult {
                id: t.id,
                name: t.name.clone(),
                workload: sim.metrics[t.workload as usize].name.clone(),
                tgid: t.tgid,
                cgroup: t.cgroup.clone(),
                cpu: t.cpu,
                cpus_allowed: allowed_list(&t.cpus_allowed),
                ran_on: t.ran_on.to_cpulist(),
                policy: t.policy.kernel_name(),
                nice: t.nice,
                prio: t.prio,
                runtime_ns: t.stats.runtime_ns,
                wait_ns: t.stats.wait_ns,
                switches: t.stats.switches,
                voluntary_switches: t.stats.voluntary_switches,
                migrations: t.stats.migrations,
                wakeups: t.stats.wakeups,
            })
            .collect();
        let cpus = sim
            .rqs
            .iter()
            .map(|rq| CpuResult {
                cpu: rq.cpu,
                busy_ns: rq.stats.busy_ns,
                util_ppm: if now == 0 { 0 } else { (rq.stats.busy_ns as u128 * 1_000_000 / now as u128) as u64 },
                switches: rq.stats.switches,
                ipis: rq.stats.ipis,
                migrations_in: rq.stats.migrations_in,
            })
            .collect();
        Results {
            schedlab_version: env!("CARGO_PKG_VERSION"),
            scenario: scenario.to_string(),
            seed: sim.seed,
            machine: sim.topo.name.clone(),
            nr_cpus: sim.nr_cpus(),
            scheduler: scheduler.to_string(),
            features_changed: sim.features.changed(),
            sim_time_ns: now,
            events: sim.engine.events_processed(),
            event_hash: format!("{:016x}", sim.engine.hash()),
            workloads,
            tasks,
            cpus,
            locks: sim
                .locks
                .iter()
                .enumerate()
                .map(|(i, l)| LockResult { id: i as u32, acquisitions: l.acquisitions, spin_ns: l.spin_ns })
                .collect(),
            sched_cache: sim.features.on(crate::sched::features::Feature::SCHED_CACHE).then_some(SchedCacheResult {
                scans: sim.cache_stats.scans,
                cpus_scanned: sim.cache_stats.cpus_scanned,
                preference_changes: sim.cache_stats.preference_changes,
            }),
            sched_ext: ScxResult::collect(sim),
            cgroups: CgroupResult::collect(sim),
            partial: None,
        }
    }

    /// Marks results as those of a run stopped early by `reason`, short of
    /// the scenario's `duration_ns`.
    pub fn mark_partial(&mut self, reason: &str, duration_ns: u64) {
        self.partial = Some(Partial { reason: reason.to_string(), duration_ns });
    }

    /// The results as pretty JSON, newline-terminated.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("results serialize") + "\n"
    }

    /// The human summary: a header and one table per kind of result.
    pub fn summary(&self) -> String {
        let mut out = String::new();
        out.push_str(&format!(
            "schedlab: {} on {} ({} CPUs), scheduler {}{}, seed {}\n",
            self.scenario,
            self.machine,
            self.nr_cpus,
            self.scheduler,
            if self.features_changed.is_empty() { String::new() } else { format!(" [{}]", self.features_changed.join(" ")) },
            self.seed
        ));
        out.push_str(&format!("simulated {}, {} events, hash {}\n", fmt_ns(self.sim_time_ns), self.events, self.event_hash));
        if let Some(p) = &self.partial {
            out.push_str(&format!(
                "PARTIAL: stopped by {} after {} of the {} simulated; every figure below covers only that\n",
                p.reason,
                fmt_ns(self.sim_time_ns),
                fmt_ns(p.duration_ns)
            ));
        }
        out.push('\n');
        let lat: Vec<&WorkloadResult> = self.workloads.iter().filter(|w| w.latency.is_some()).collect();
        if !lat.is_empty() {
            let mut rows = vec![vec!["workload".into(), "samples".into(), "min".into(), "p50".into(), "p90".into(), "p99".into(), "p99.9".into(), "max".into(), "over".into()]];
            for w in lat {
                let l = w.latency.as_ref().unwrap();
                let over = w.thresholds.iter().map(|t| format!(">{}: {}", fmt_ns(t.above_ns), t.count)).collect::<Vec<_>>().join(", ");
                rows.push(vec![w.name.clone(), l.count.to_string(), fmt_ns(l.min_ns), fmt_ns(l.p50_ns), fmt_ns(l.p90_ns), fmt_ns(l.p99_ns), fmt_ns(l.p999_ns), fmt_ns(l.max_ns), over]);
            }
            out.push_str("wakeup latency (actual - intended wake time)\n");
            out.push_str(&table(&rows));
            out.push('\n');
        }
        let req: Vec<&WorkloadResult> = self.workloads.iter().filter(|w| w.request_latency.is_some()).collect();
        if !req.is_empty() {
            let mut rows = vec![vec!["workload".into(), "requests".into(), "per second".into(), "p50".into(), "p90".into(), "p99".into(), "p99.9".into(), "max".into()]];
            for w in req {
                let l = w.request_latency.as_ref().unwrap();
                let rate = w.requests_per_s.map_or("-".into(), |r| r.to_string());
                rows.push(vec![w.name.clone(), l.count.to_string(), rate, fmt_ns(l.p50_ns), fmt_ns(l.p90_ns), fmt_ns(l.p99_ns), fmt_ns(l.p999_ns), fmt_ns(l.max_ns)]);
            }
            out.push_str("request latency\n");
            out.push_str(&table(&rows));
            out.push('\n');
        }
        let mut rows = vec![vec!["workload".into(), "kind".into(), "tasks".into(), "cpu time".into(), "work".into(), "makespan".into()]];
        for w in &self.workloads {
            let makespan = match (w.kind.as_str(), w.makespan_ns) {
                (_, Some(m)) => fmt_ns(m),
                ("hackbench", None) => "unfinished".into(),
                _ => "-".into(),
            };
            rows.push(vec![w.name.clone(), w.kind.clone(), w.tasks.to_string(), fmt_ns(w.runtime_ns), w.work.to_string(), makespan]);
        }
        out.push_str(&table(&rows));
        out.push('\n');
        if self.tasks.len() <= 16 {
            let mut rows = vec![vec!["task".into(), "policy".into(), "nice".into(), "runtime".into(), "share".into(), "wait".into(), "switches".into(), "migrations".into()]];
            let total: u64 = self.tasks.iter().map(|t| t.runtime_ns).sum::<u64>().max(1);
            for t in &self.tasks {
                rows.push(vec![
                    t.name.clone(),
                    t.policy.to_string(),
                    t.nice.to_string(),
                    fmt_ns(t.runtime_ns),
                    format!("{:.1}%", t.runtime_ns as f64 * 100.0 / total as f64),
                    fmt_ns(t.wait_ns),
                    t.switches.to_string(),
                    t.migrations.to_string(),
                ]);
            }
            out.push_str(&table(&rows));
            out.push('\n');
        }
        if !self.locks.is_empty() {
            let acq: u64 = self.locks.iter().map(|l| l.acquisitions).sum();
            let spin: u64 = self.locks.iter().map(|l| l.spin_ns).sum();
            let busy: u64 = self.cpus.iter().map(|c| c.busy_ns).sum::<u64>().max(1);
            out.push_str(&format!(
                "spinlocks: {} acquisitions, {} spinning ({:.1}% of busy CPU time)\n",
                acq,
                fmt_ns(spin),
                spin as f64 * 100.0 / busy as f64
            ));
        }
        if let Some(c) = &self.sched_cache {
            out.push_str(&format!(
                "cache-aware scans: {} scans, {} CPUs read ({:.1} per scan), {} preferred-LLC changes\n",
                c.scans,
                c.cpus_scanned,
                c.cpus_scanned as f64 / c.scans.max(1) as f64,
                c.preference_changes
            ));
        }
        if let Some(x) = &self.sched_ext {
            out.push_str(&format!(
                "sched_ext {}{}: {}, {} callbacks, {} kfunc calls, overhead {} ({} waiting on DSQ locks, {} on runqueue locks)\n",
                x.name,
                x.crate_.as_ref().map(|c| format!(" (crate {c})")).unwrap_or_default(),
                x.state,
                x.op_calls.values().sum::<u64>(),
                x.kfunc_calls,
                fmt_ns(x.overhead_ns),
                fmt_ns(x.dsq_lock_wait_ns),
                fmt_ns(x.rq_lock_wait_ns)
            ));
            if let Some(r) = &x.local_dsq_residence {
                out.push_str(&format!(
                    "  local DSQ residence: p50 {}, p99 {}, max {}; >128us: {}, >256us: {}; reenqueued {}\n",
                    fmt_ns(r.p50_ns),
                    fmt_ns(r.p99_ns),
                    fmt_ns(r.max_ns),
                    x.local_dsq_residence_over_128us,
                    x.local_dsq_residence_over_256us,
                    x.reenqueued
                ));
            }
            if x.hardlockups > 0 {
                out.push_str(&format!("  hard lockups: {} (CPUs stuck in the scheduler for over 10s)\n", x.hardlockups));
            }
            if let Some(e) = &x.exit {
                out.push_str(&format!("  exit: {:?} ({}){}\n", e.kind, e.reason, if e.msg.is_empty() { String::new() } else { format!(": {}", e.msg) }));
            }
            if let (Some(a), Some(b)) = (x.disable_started_ns, x.disable_done_ns) {
                out.push_str(&format!(
                    "  disable took {} (grace period {}), longest wait meanwhile {}, bypass LB moved {}\n",
                    fmt_ns(b - a),
                    x.disable_grace_period_done_ns.map_or("-".into(), |g| fmt_ns(g - a)),
                    fmt_ns(x.max_wait_while_disabling_ns),
                    x.bypass_lb_moved
                ));
            }
        }
        let util: Vec<String> = self.cpus.iter().map(|c| format!("{}", (c.util_ppm + 5_000) / 10_000)).collect();
        out.push_str(&format!("cpu utilisation %: {}\n", util.join(" ")));
        out
    }
}

/// An aligned text table; the first row is the header.
pub fn table(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(|r| r.len()).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols).map(|c| rows.iter().filter_map(|r| r.get(c)).map(|s| s.chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for (i, r) in rows.iter().enumerate() {
        let line: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(c, s)| {
                // Numbers right-aligned, text left-aligned.
                let numeric = c > 0 && s.chars().next().is_some_and(|ch| ch.is_ascii_digit() || ch == '>' || ch == '-');
                if numeric { format!("{s:>w$}", w = widths[c]) } else { format!("{s:<w$}", w = widths[c]) }
            })
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
        if i == 0 {
            out.push_str(&widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>().join("  "));
            out.push('\n');
        }
    }
    out
}
