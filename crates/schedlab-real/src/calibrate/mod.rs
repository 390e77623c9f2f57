//! `schedlab calibrate`: measures what scheduling work costs on the live
//! kernel and writes a machine file (`--machine machine.toml`) whose
//! `[machine.costs]` are those measurements.
//!
//! Every figure is a distribution, reported as its median, 10th and 90th
//! percentiles and sample count ([`Stat`]). Single events (one wakeup, one
//! timer expiry, one fork) are one sample each; figures that need a
//! baseline subtracted are measured in rounds that take the figure and its
//! baseline back to back, and each round gives one sample of the
//! difference, so the spread is that of the difference itself.
//!
//! The probes (`probes.rs`) are written for a noisy machine with few CPUs:
//! every thread is pinned, a "busy" CPU is one running a `SCHED_IDLE`
//! spinner (which any normal task preempts at once), and the total run time
//! is bounded by [`Options::quick`] (about 1 s) or the default (about
//! 4 s). How each figure is measured is written next to its probe in
//! `probes.rs`; how it maps onto the simulator's cost model in [`mod@file`].

use std::fmt::Write as _;

use schedlab::machine::topology::Topology;

use crate::{sys, RealError};

pub mod file;
mod probes;

/// A distribution's summary: median, 10th and 90th percentiles (nearest
/// rank) and the number of samples, in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stat {
    /// Number of samples.
    pub n: usize,
    /// The median.
    pub median: f64,
    /// The 10th percentile.
    pub p10: f64,
    /// The 90th percentile.
    pub p90: f64,
}

impl Stat {
    /// The summary of `samples` (ns); None when there are none. NaNs are
    /// dropped.
    pub fn of(samples: &[f64]) -> Option<Stat> {
        let mut v: Vec<f64> = samples.iter().copied().filter(|x| !x.is_nan()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        Some(Stat { n: v.len(), median: median_sorted(&v), p10: percentile_sorted(&v, 10.0), p90: percentile_sorted(&v, 90.0) })
    }

    /// Paired blocks: the summary of `median(a[i]) - median(b[i])` over the
    /// block pairs, so slow drift of the machine (frequency, other load)
    /// cancels within a pair and shows in the spread across pairs.
    pub fn paired(a: &[Vec<f64>], b: &[Vec<f64>]) -> Option<Stat> {
        let d: Vec<f64> = a.iter().zip(b).filter_map(|(x, y)| Some(Stat::of(x)?.median - Stat::of(y)?.median)).collect();
        Stat::of(&d)
    }

    /// This distribution moved by `-by` (a constant baseline subtracted).
    pub fn minus(self, by: f64) -> Stat {
        Stat { n: self.n, median: self.median - by, p10: self.p10 - by, p90: self.p90 - by }
    }

    /// "1.93 us (p10 1.80 us, p90 2.10 us, n=30)".
    pub fn describe(&self) -> String {
        format!("{} (p10 {}, p90 {}, n={})", fmt(self.median), fmt(self.p10), fmt(self.p90), self.n)
    }
}

/// The median of sorted, non-empty `v` (the mean of the middle two for an
/// even count).
fn median_sorted(v: &[f64]) -> f64 {
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The `p`th percentile of sorted, non-empty `v` by nearest rank: the
/// smallest sample with at least p% of the samples at or below it.
fn percentile_sorted(v: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

/// A duration in ns for people: "850 ns", "1.93 us", "2.41 ms" (signed).
pub fn fmt(ns: f64) -> String {
    let a = ns.abs();
    if a < 1_000.0 {
        format!("{ns:.0} ns")
    } else if a < 1_000_000.0 {
        format!("{:.2} us", ns / 1e3)
    } else {
        format!("{:.2} ms", ns / 1e6)
    }
}

/// One measured figure.
#[derive(Clone, Debug)]
pub struct Figure {
    /// Its name in the machine file's comments and the report ("context_switch").
    pub key: &'static str,
    /// What it is, in a few words.
    pub what: &'static str,
    /// The measurement, or why there is none on this machine.
    pub stat: Result<Stat, String>,
}

/// Every figure of one calibration, and the machine it ran on.
#[derive(Clone, Debug)]
pub struct Calibration {
    /// The figures, in the order measured.
    pub figures: Vec<Figure>,
    /// The topology as `lscpu -p` prints it (generated from sysfs where
    /// lscpu is missing).
    pub lscpu: String,
    /// The tick rate (CONFIG_HZ) measured from the jiffies counter, if
    /// /proc/timer_list could be read.
    pub hz: Option<u32>,
    /// The kernel's release (uname -r).
    pub kernel: String,
    /// The CPUs the probes used: the waker's (and the one-CPU probes'),
    /// and the target's in the same LLC (None on a single CPU).
    pub cpus: (usize, Option<usize>),
    /// The idle states cpuidle declares on the target CPU: (name, exit
    /// latency us, target residency us, disabled).
    pub cpuidle: Vec<(String, u64, u64, bool)>,
    /// This thread's timer slack (the default SCHED_OTHER slack), ns.
    pub default_slack_ns: u64,
    /// Wall time the probes took, seconds.
    pub wall_s: f64,
}

impl Calibration {
    /// The figure named `key`, if it was measured.
    pub fn get(&self, key: &str) -> Option<Stat> {
        self.figures.iter().find(|f| f.key == key).and_then(|f| f.stat.clone().ok())
    }

    /// The figures as an aligned table for the terminal.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let w = self.figures.iter().map(|f| f.key.len()).max().unwrap_or(0);
        for f in &self.figures {
            let v = match &f.stat {
                Ok(s) => s.describe(),
                Err(why) => why.clone(),
            };
            let _ = writeln!(out, "  {:w$}  {v}  [{}]", f.key, f.what);
        }
        out
    }
}

/// How long to measure.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// About a quarter of the samples: ~1 s instead of ~4 s.
    pub quick: bool,
}

/// Runs every probe on this host and returns the figures.
pub fn run(opts: &Options) -> Result<Calibration, RealError> {
    let t0 = std::time::Instant::now();
    let lscpu = lscpu_text()?;
    let topo = Topology::from_lscpu(&lscpu).map_err(|e| RealError::Io(format!("the topology lscpu printed: {e}")))?;
    let allowed = sys::allowed_cpus();
    let (a, b, xllc) = pick_cpus(&topo, &allowed);
    let figures = probes::all(&probes::Plan::new(opts.quick), a, b, xllc);
    Ok(Calibration {
        figures,
        lscpu,
        hz: measure_hz(),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim().to_string(),
        cpus: (a, b),
        cpuidle: cpuidle(b),
        default_slack_ns: sys::timer_slack(),
        wall_s: t0.elapsed().as_secs_f64(),
    })
}

/// Two CPUs this process may use in one LLC, on different cores where
/// there are (an SMT sibling shares more than the LLC), and a CPU in
/// another LLC than the first, if any. On one CPU both are that CPU.
fn pick_cpus(topo: &Topology, allowed: &[usize]) -> (usize, Option<usize>, Option<usize>) {
    let ok: Vec<usize> = allowed.iter().copied().filter(|&c| c < topo.nr_cpus()).collect();
    let a = ok.first().copied().unwrap_or(0);
    let info = |c: usize| topo.cpu_info(c).cloned();
    let same = |c: usize| c != a && topo.llc_of(c) == topo.llc_of(a);
    let other_core = ok.iter().copied().find(|&c| same(c) && info(c).map(|i| i.core) != info(a).map(|i| i.core));
    let b = other_core.or_else(|| ok.iter().copied().find(|&c| same(c)));
    let x = ok.iter().copied().find(|&c| topo.llc_of(c) != topo.llc_of(a));
    (a, b, x)
}

/// `lscpu -p`, or the same columns generated from /sys when lscpu is
/// missing (a minimal guest).
fn lscpu_text() -> Result<String, RealError> {
    if let Ok(o) = std::process::Command::new("lscpu").arg("-p").output() {
        if o.status.success() {
            return Ok(String::from_utf8_lossy(&o.stdout).into_owned());
        }
    }
    let t = Topology::from_sysfs(std::path::Path::new("/sys/devices/system/cpu")).map_err(|e| RealError::Io(format!("lscpu is missing and /sys/devices/system/cpu cannot be read: {e}")))?;
    Ok(lscpu_of(&t))
}

/// A topology as `lscpu -p` output: core, socket, node, and the LLC as
/// the L3 column (L1 and L2 per core).
pub fn lscpu_of(t: &Topology) -> String {
    let mut s = String::from("# generated by schedlab calibrate from /sys/devices/system/cpu\n# CPU,Core,Socket,Node,,L1d,L1i,L2,L3\n");
    for c in 0..t.nr_cpus() {
        if let Some(i) = t.cpu_info(c) {
            let _ = writeln!(s, "{},{},{},{},,{},{},{},{}", i.cpu, i.core, i.package, i.node, i.core, i.core, i.core, i.llc);
        }
    }
    s
}

/// CONFIG_HZ from the jiffies counter: /proc/timer_list (root) prints
/// `now at N nsecs` and `jiffies: J`; two reads 200 ms apart give jiffies
/// per second, snapped to the usual rates when within 5%.
fn measure_hz() -> Option<u32> {
    let read = || -> Option<(f64, f64)> {
        let t = std::fs::read_to_string("/proc/timer_list").ok()?;
        let now = t.lines().find_map(|l| l.strip_prefix("now at "))?.split_whitespace().next()?.parse::<f64>().ok()?;
        let j = t.lines().find_map(|l| l.strip_prefix("jiffies: "))?.trim().parse::<f64>().ok()?;
        Some((now, j))
    };
    let (t0, j0) = read()?;
    std::thread::sleep(std::time::Duration::from_millis(200));
    let (t1, j1) = read()?;
    let rate = (j1 - j0) / ((t1 - t0) / 1e9);
    [100u32, 250, 300, 1000].into_iter().find(|&hz| (rate / hz as f64 - 1.0).abs() < 0.05)
}

/// The idle states of `cpu` as cpuidle declares them.
fn cpuidle(cpu: Option<usize>) -> Vec<(String, u64, u64, bool)> {
    let dir = format!("/sys/devices/system/cpu/cpu{}/cpuidle", cpu.unwrap_or(0));
    let mut out = Vec::new();
    for i in 0.. {
        let st = format!("{dir}/state{i}");
        let Ok(name) = std::fs::read_to_string(format!("{st}/name")) else { break };
        let num = |f: &str| std::fs::read_to_string(format!("{st}/{f}")).ok().and_then(|s| s.trim().parse::<u64>().ok()).unwrap_or(0);
        out.push((name.trim().to_string(), num("latency"), num("residency"), num("disable") != 0));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        let s = Stat::of(&v).unwrap();
        assert_eq!((s.n, s.median, s.p10, s.p90), (10, 5.5, 1.0, 9.0));
        let s = Stat::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.p10, s.p90), (2.0, 1.0, 3.0));
        assert_eq!(Stat::of(&[]), None);
        assert_eq!(Stat::of(&[f64::NAN, 4.0]).unwrap().n, 1);
    }

    #[test]
    fn paired_blocks_subtract_medians() {
        let a = vec![vec![10.0, 12.0, 11.0], vec![20.0, 21.0, 22.0]];
        let b = vec![vec![1.0, 1.0, 1.0], vec![2.0, 2.0, 2.0]];
        let s = Stat::paired(&a, &b).unwrap();
        assert_eq!(s.n, 2);
        assert_eq!((s.p10, s.p90, s.median), (10.0, 19.0, 14.5));
        assert_eq!(s.minus(4.5).median, 10.0);
    }

    #[test]
    fn durations_read_well() {
        assert_eq!(fmt(850.4), "850 ns");
        assert_eq!(fmt(1_930.0), "1.93 us");
        assert_eq!(fmt(-2_410_000.0), "-2.41 ms");
    }

    #[test]
    fn generated_lscpu_parses_back() {
        let t = Topology::preset("ryzen-3900x").unwrap();
        let back = Topology::from_lscpu(&lscpu_of(&t)).unwrap();
        assert_eq!(back.nr_cpus(), t.nr_cpus());
        assert_eq!(back.nr_llcs(), t.nr_llcs());
        assert_eq!(back.nr_cores(), t.nr_cores());
    }
}
