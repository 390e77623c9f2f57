//! Cache-aware scheduling (CONFIG_SCHED_CACHE, experiment 004).
//!
//! Each process (mm) keeps, per CPU, how much it ran there, halved every
//! 10 ms epoch, next to the CPU's own decayed runtime. Periodically a task of
//! the process scans CPUs, averages the process's occupancy fraction per LLC
//! and moves the process's preferred CPU to the best LLC when that is more
//! than twice as occupied as the current one (task_cache_work). Wakeups then
//! start from the preferred CPU, unless that LLC is over-aggregated, and load
//! balancing does not pull tasks out of their preferred LLC (llc_balancing).
//!
//! Which CPUs the scan reads is the source document's change: SC_NODE scans the CPUs of
//! the current node, SC_VISIT only the CPUs the process visited recently
//! (evicted after `EPOCH_AFFINITY_TIMEOUT` epochs), neither scans every CPU.

use crate::machine::cpumask::CpuMask;
use crate::engine::{Cpu, TaskId};
use crate::sched::features::Feature;
use crate::sched::sim::Sim;
use crate::sched::task::NICE_0_LOAD;
use crate::engine::time::{Ns, NSEC_PER_MSEC};

/// One epoch; occupancy halves every epoch.
pub(crate) const EPOCH_PERIOD_NS: Ns = 10 * NSEC_PER_MSEC;
/// Occupancy older than this many epochs is gone (and "small" is below 1024 >> 5).
pub(crate) const EPOCH_OLD: u32 = 5;
/// A visited CPU not used for this many epochs leaves the scan set.
pub(crate) const EPOCH_AFFINITY_TIMEOUT: u64 = 5;

/// Per-process cache-occupancy state (mm->pcpu_sched and friends).
#[derive(Clone, Debug)]
pub(crate) struct MmSched {
    /// Per CPU: decayed runtime of the process there, and the epoch it was last decayed at.
    pub runtime: Vec<(u64, u64)>,
    /// CPUs the process ran on recently, with the epoch of the last visit.
    pub visited: CpuMask,
    /// Per CPU: the epoch of the process's last visit there.
    pub last_visit: Vec<u64>,
    /// The preferred CPU (mm->mm_sched_cpu): its LLC is where the process's cache is.
    pub preferred: Option<Cpu>,
    /// Next time a scan may run for this process (one per epoch).
    pub next_scan: Ns,
}

/// Per-CPU epoch clock and decayed total runtime.
#[derive(Clone, Debug, Default)]
pub(crate) struct CpuCache {
    /// The CPU's current epoch (rq->cpu_epoch).
    pub epoch: u64,
    /// Decayed runtime of all processes on this CPU (rq->cpu_runtime).
    pub runtime: u64,
}

/// Totals reported for the seed-004 experiment.
#[derive(Clone, Debug, Default)]
pub struct CacheStats {
    /// Preferred-LLC scans run.
    pub scans: u64,
    /// CPUs visited by those scans.
    pub cpus_scanned: u64,
    /// Times a process's preferred CPU changed.
    pub preference_changes: u64,
}

fn decay(v: u64, epochs: u64) -> u64 {
    if epochs >= 64 {
        0
    } else {
        v >> epochs
    }
}

impl Sim {
    fn cache_on(&self) -> bool {
        self.features.on(Feature::SCHED_CACHE)
    }

    fn mm_entry(&mut self, tgid: u32) -> &mut MmSched {
        let n = self.nr_cpus();
        let idx = tgid as usize;
        if self.mm_sched.len() <= idx {
            self.mm_sched.resize_with(idx + 1, || None);
        }
        self.mm_sched[idx].get_or_insert_with(|| MmSched {
            runtime: vec![(0, 0); n],
            visited: CpuMask::new(n),
            last_visit: vec![0; n],
            preferred: None,
            next_scan: 0,
        })
    }

    /// Brings a CPU's epoch clock up to now, decaying its runtime.
    fn cpu_epoch(&mut self, cpu: Cpu) -> u64 {
        let now_epoch = self.now() / EPOCH_PERIOD_NS;
        let c = &mut self.cpu_cache[cpu as usize];
        if now_epoch > c.epoch {
            c.runtime = decay(c.runtime, now_epoch - c.epoch);
            c.epoch = now_epoch;
        }
        now_epoch
    }

    /// account_mm_sched(): charge `delta` of `p`'s runtime to its process on `cpu`.
    ///
    /// Inlined up to the test whether cache-aware scheduling is on at all.
    #[inline]
    pub(crate) fn account_mm_sched(&mut self, cpu: Cpu, p: TaskId, delta: Ns) {
        if !self.cache_on() || self.task(p).nr_cpus_allowed == 1 {
            return;
        }
        self.account_mm_sched_on(cpu, p, delta);
    }

    /// account_mm_sched() with the feature on.
    #[inline(never)]
    fn account_mm_sched_on(&mut self, cpu: Cpu, p: TaskId, delta: Ns) {
        let epoch = self.cpu_epoch(cpu);
        self.cpu_cache[cpu as usize].runtime += delta;
        let tgid = self.task(p).tgid;
        let mm = self.mm_entry(tgid);
        let slot = &mut mm.runtime[cpu as usize];
        slot.0 = decay(slot.0, epoch - slot.1) + delta;
        slot.1 = epoch;
        mm.visited.set(cpu as usize);
        mm.last_visit[cpu as usize] = epoch;
    }

    /// The process's share of what ran on `cpu` lately, in NICE_0_LOAD units (fraction_mm_sched).
    fn fraction_mm_sched(&mut self, cpu: Cpu, tgid: u32) -> u64 {
        let epoch = self.cpu_epoch(cpu);
        let total = self.cpu_cache[cpu as usize].runtime;
        let mm = self.mm_entry(tgid);
        let (rt, at) = mm.runtime[cpu as usize];
        let rt = decay(rt, epoch.saturating_sub(at));
        NICE_0_LOAD * rt / (total + 1)
    }

    /// Called from the tick: once per epoch per process, run task_cache_work.
    pub(crate) fn task_tick_cache(&mut self, cpu: Cpu, p: TaskId) {
        if !self.cache_on() || self.task(p).nr_cpus_allowed == 1 {
            return;
        }
        let now = self.now();
        let tgid = self.task(p).tgid;
        if now < self.mm_entry(tgid).next_scan {
            return;
        }
        self.mm_entry(tgid).next_scan = now + EPOCH_PERIOD_NS;
        self.task_cache_work(cpu, p);
    }

    /// task_cache_work(): pick the process's preferred LLC.
    fn task_cache_work(&mut self, cpu: Cpu, p: TaskId) {
        let tgid = self.task(p).tgid;
        let n = self.nr_cpus();
        let epoch = self.cpu_epoch(cpu);
        let mut cpus = if self.features.on(Feature::SC_VISIT) {
            let mm = self.mm_entry(tgid);
            // Evict CPUs not visited within the affinity timeout.
            for c in mm.visited.clone().iter() {
                if epoch.saturating_sub(mm.last_visit[c]) > EPOCH_AFFINITY_TIMEOUT {
                    mm.visited.clear(c);
                }
            }
            mm.visited.clone()
        } else if self.features.on(Feature::SC_NODE) {
            self.topo.node_span[self.topo.node_of(cpu as usize)].clone()
        } else {
            CpuMask::full(n)
        };
        cpus.and_assign(&self.task(p).cpus_allowed);
        let preferred_llc = self.mm_entry(tgid).preferred.map(|c| self.topo.llc_of(c as usize));
        let (mut best_avg, mut best_cpu, mut curr_avg) = (0u64, None, 0u64);
        let mut scanned = 0u64;
        while let Some(first) = cpus.first() {
            let llc = self.topo.llc_of(first);
            let span = self.topo.llc_span[llc].and(&cpus);
            let (mut sum, mut nr, mut m_occ, mut m_cpu) = (0u64, 0u64, 0u64, first as Cpu);
            for c in span.iter() {
                let occ = self.fraction_mm_sched(c as Cpu, tgid);
                sum += occ;
                nr += 1;
                if occ > m_occ {
                    m_occ = occ;
                    m_cpu = c as Cpu;
                }
            }
            scanned += nr;
            let avg = sum / nr.max(1);
            if avg > best_avg {
                best_avg = avg;
                best_cpu = Some(m_cpu);
            }
            if preferred_llc == Some(llc) {
                curr_avg = avg;
            }
            cpus.andnot_assign(&span);
        }
        self.cache_stats.scans += 1;
        self.cache_stats.cpus_scanned += scanned;
        // The scan reads remote per-CPU data: charge it to this CPU.
        let cost = scanned * self.costs.scan_cpu_ns;
        self.charge_irq(cpu, cost);
        if best_avg < (NICE_0_LOAD >> EPOCH_OLD) {
            return;
        }
        // Move only when the best LLC is more than twice as occupied.
        if best_avg > 2 * curr_avg {
            let mm = self.mm_entry(tgid);
            if mm.preferred != best_cpu {
                mm.preferred = best_cpu;
                self.cache_stats.preference_changes += 1;
            }
        }
    }

    /// An LLC is over-aggregated when its utilisation passes half its capacity
    /// or it runs more tasks than it has CPUs: cache-aware wakeups stop
    /// steering there (the "inhibit if over aggregated" follow-up).
    fn llc_overaggregated(&self, llc: usize) -> bool {
        let span = &self.topo.llc_span[llc];
        let weight = span.weight() as u64;
        let util: u64 = span.iter().map(|c| self.cpu_util(c as Cpu)).sum();
        let nr: u64 = span.iter().map(|c| self.rq(c as Cpu).nr_running as u64).sum();
        util * 2 > weight * 1024 || nr > weight
    }

    /// select_cache_cpu(): start the wakeup search from the preferred CPU.
    pub(crate) fn select_cache_cpu(&self, p: TaskId, prev: Cpu) -> Cpu {
        if !self.cache_on() || self.task(p).nr_cpus_allowed == 1 {
            return prev;
        }
        let Some(Some(mm)) = self.mm_sched.get(self.task(p).tgid as usize) else { return prev };
        let Some(pref) = mm.preferred else { return prev };
        let llc = self.topo.llc_of(pref as usize);
        // Already in the preferred LLC: no migration within it.
        if self.topo.llc_of(prev as usize) == llc || !self.task(p).allowed_on(pref as usize) || self.llc_overaggregated(llc) {
            return prev;
        }
        pref
    }

    /// llc_balancing: moving `p` from `src` to `dst` takes it out of its
    /// preferred LLC (negative), into it (positive), or neither (zero).
    pub(crate) fn migrate_llc_pref(&self, p: TaskId, src: Cpu, dst: Cpu) -> i32 {
        if !self.cache_on() {
            return 0;
        }
        let Some(Some(mm)) = self.mm_sched.get(self.task(p).tgid as usize) else { return 0 };
        let Some(pref) = mm.preferred else { return 0 };
        let llc = self.topo.llc_of(pref as usize);
        let (s, d) = (self.topo.llc_of(src as usize), self.topo.llc_of(dst as usize));
        if s == d {
            0
        } else if s == llc {
            -1
        } else if d == llc {
            1
        } else {
            0
        }
    }
}
