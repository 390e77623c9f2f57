//! What workloads measure while the simulation runs: wakeup and request
//! latencies (histograms, exact extremes, thresholds), work done and exits.
//! Behaviour programs record into it (exec.rs `Measure` steps); the results
//! layer reads it after the run.

use hdrhistogram::Histogram;

use crate::engine::time::Ns;

/// A threshold a workload counts latencies above.
#[derive(Clone, Debug)]
pub struct Threshold {
    /// The name reported, e.g. "over_100us".
    pub label: String,
    /// Latencies strictly above this count, ns.
    pub above_ns: Ns,
    /// How many latencies were above.
    pub count: u64,
}

/// What a workload measured.
#[derive(Clone, Debug)]
pub struct WorkloadMetrics {
    /// The workload's name in the scenario.
    pub name: String,
    /// The workload's kind (hog, cyclictest, hackbench, ...).
    pub kind: String,
    /// Wakeup latencies, ns (HDR histogram, 3 significant digits).
    pub latency: Histogram<u64>,
    /// The thresholds counted, as the scenario lists them.
    pub thresholds: Vec<Threshold>,
    /// When the workload started, ns.
    pub start_ns: Ns,
    /// Tasks the workload created (forks included).
    pub nr_tasks: u32,
    /// Tasks of the workload that exited.
    pub exited: u32,
    /// When the last of them exited, ns (the makespan's end).
    pub last_exit_ns: Ns,
    /// Units of work done (`Op::Work`).
    pub work: u64,
    /// Whether the workload's result is a makespan (all its tasks exit).
    pub finite: bool,
    /// Exact extremes and sum of `latency` (the histogram rounds to 3
    /// significant digits; cyclictest prints exact Min/Avg/Max).
    pub latency_min_ns: Ns,
    /// The largest latency recorded, ns, exact.
    pub latency_max_ns: Ns,
    /// The sum of the latencies recorded, ns, for the exact mean.
    pub latency_sum_ns: u128,
    /// cyclictest --histogram=N: per-microsecond counts 0..N-1 us; samples
    /// of N us and above are overflows.
    pub us_histogram: Option<Vec<u64>>,
    /// Samples beyond `us_histogram`'s last bucket.
    pub us_overflows: u64,
    /// Request latencies (schbench, server), next to wakeup latencies.
    pub request_latency: Option<Histogram<u64>>,
    /// Requests/operations count as throughput per second (schbench, server).
    pub reports_rate: bool,
}

/// A histogram of durations as every latency metric keeps them: 1 ns to
/// an hour, at 3 significant digits.
pub fn duration_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid histogram bounds")
}

impl WorkloadMetrics {
    /// Empty metrics for a workload.
    pub fn new(name: &str, kind: &str) -> Self {
        WorkloadMetrics {
            name: name.to_string(),
            kind: kind.to_string(),
            latency: duration_histogram(),
            thresholds: Vec::new(),
            start_ns: 0,
            nr_tasks: 0,
            exited: 0,
            last_exit_ns: 0,
            work: 0,
            finite: false,
            latency_min_ns: Ns::MAX,
            latency_max_ns: 0,
            latency_sum_ns: 0,
            us_histogram: None,
            us_overflows: 0,
            request_latency: None,
            reports_rate: false,
        }
    }

    /// Records a request latency (from the request's start to its end).
    pub fn record_request(&mut self, ns: Ns) {
        self.request_latency
            .get_or_insert_with(duration_histogram)
            .saturating_record(ns.max(1));
    }

    /// Records a wakeup latency (histogram, exact extremes and sum, per-us histogram, thresholds).
    pub fn record_latency(&mut self, ns: Ns) {
        self.latency.saturating_record(ns.max(1));
        self.latency_min_ns = self.latency_min_ns.min(ns);
        self.latency_max_ns = self.latency_max_ns.max(ns);
        self.latency_sum_ns += ns as u128;
        if let Some(h) = self.us_histogram.as_mut() {
            // cyclictest buckets by whole microseconds (latency / 1000).
            match h.get_mut((ns / 1_000) as usize) {
                Some(b) => *b += 1,
                None => self.us_overflows += 1,
            }
        }
        for t in &mut self.thresholds {
            if ns > t.above_ns {
                t.count += 1;
            }
        }
    }
}
