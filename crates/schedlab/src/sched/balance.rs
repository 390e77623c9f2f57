//! Fair-class placement and load balancing (kernel/sched/fair.c):
//! select_task_rq_fair with wake_affine and select_idle_sibling, fork
//! balancing, and sched_balance_rq at sched-domain granularity, driven
//! periodically from the tick, when a CPU becomes newly idle, and on behalf
//! of idle CPUs by the nohz idle balancer.

use crate::machine::cpumask::CpuMask;
use crate::sched::cgroup::Cq;
use crate::engine::{Cpu, TaskId};
use crate::sched::features::Feature;
use crate::sched::wf;
use crate::sched::sim::Sim;
use crate::sched::task::ClassId;
use crate::engine::time::{Ns, NSEC_PER_MSEC};
use crate::sched::group_memo::GroupMemo;
use crate::sched::group_tree::{Walk, TREE_MIN_GROUPS};
use crate::sched::topology::{Group, SchedDomain, NO_GROUP_ID};

const SCHED_CAPACITY_SCALE: u64 = 1024;

/// Why a balance pass runs (enum cpu_idle_type).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IdleType {
    /// Periodic balancing on a busy CPU (CPU_NOT_IDLE).
    NotIdle,
    /// Periodic balancing on an idle CPU (CPU_IDLE).
    Idle,
    /// newidle balance: the CPU is about to go idle (CPU_NEWLY_IDLE).
    NewlyIdle,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum GroupType {
    HasSpare,
    FullyBusy,
    Overloaded,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Migration {
    Load,
    Util,
    Task,
}

/// A group's statistics (`struct sg_lb_stats`, the part both walks use).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct GroupStats {
    pub(crate) load: u64,
    pub(crate) util: u64,
    pub(crate) runnable: u64,
    pub(crate) nr_running: u32,
    pub(crate) h_nr_running: u32,
    pub(crate) idle_cpus: u32,
    pub(crate) weight: u32,
    pub(crate) capacity: u64,
    pub(crate) avg_load: u64,
}

/// One CPU's part of its groups' statistics (what `group_stats` sums).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CpuShare {
    load: u64,
    util: u64,
    runnable: u64,
    nr_running: u32,
    h_nr_running: u32,
    idle: u32,
}

impl GroupStats {
    /// Replaces one CPU's share `old` by `new`: the statistics are then
    /// what summing the group afresh gives (the sums are exact integers,
    /// so the order of changes does not matter).
    pub(crate) fn reshare(&mut self, old: &CpuShare, new: &CpuShare) {
        self.load = self.load.wrapping_sub(old.load).wrapping_add(new.load);
        self.util = self.util.wrapping_sub(old.util).wrapping_add(new.util);
        self.runnable = self.runnable.wrapping_sub(old.runnable).wrapping_add(new.runnable);
        self.nr_running = self.nr_running.wrapping_sub(old.nr_running).wrapping_add(new.nr_running);
        self.h_nr_running = self.h_nr_running.wrapping_sub(old.h_nr_running).wrapping_add(new.h_nr_running);
        self.idle_cpus = self.idle_cpus.wrapping_sub(old.idle).wrapping_add(new.idle);
        self.set_avg_load();
    }

    /// avg_load from load and capacity.
    fn set_avg_load(&mut self) {
        // A one-CPU group's capacity is the scale itself: no division (a
        // 4,096-CPU domain without SMT has 4,096 such groups). The other
        // case's divisor is checked, not clamped to at least 1: a clamped
        // divisor would let the compiler hoist the division above the test.
        let scaled = self.load * SCHED_CAPACITY_SCALE;
        self.avg_load = if self.capacity == SCHED_CAPACITY_SCALE { self.load } else { scaled.checked_div(self.capacity).unwrap_or(scaled) };
    }

    pub(crate) fn classify(&self, pct: u64) -> GroupType {
        let cap = self.capacity;
        if self.nr_running > self.weight && (cap * 100 < self.util * pct || cap * pct < self.runnable * 100) {
            return GroupType::Overloaded;
        }
        let has_capacity = self.nr_running < self.weight
            || (cap * pct >= self.runnable * 100 && cap * 100 > self.util * pct);
        if has_capacity {
            GroupType::HasSpare
        } else {
            GroupType::FullyBusy
        }
    }
}

/// Nohz idle balancing state (`struct nohz` in fair.c).
#[derive(Clone, Debug)]
pub(crate) struct Nohz {
    /// CPUs whose tick is stopped because they are idle (`nohz.idle_cpus_mask`);
    /// changed only through `enter_idle` / `exit_idle`, which keep `nr_cpus`.
    idle_cpus: CpuMask,
    /// CPUs in `idle_cpus` (`nohz.nr_cpus`): the tick of a busy CPU on a
    /// machine with none idle, the common case under load, looks no
    /// further, where finding no idle CPU in the mask reads all its words.
    nr_cpus: u32,
    /// When an idle load balance is next due (`nohz.next_balance`).
    pub next_balance: Ns,
}

impl Nohz {
    /// Every CPU idle, as at boot.
    pub(crate) fn new(nr_cpus: usize) -> Self {
        Nohz { idle_cpus: CpuMask::full(nr_cpus), nr_cpus: nr_cpus as u32, next_balance: 0 }
    }

    /// `cpu` goes idle and stops its tick (nohz_balance_enter_idle).
    pub(crate) fn enter_idle(&mut self, cpu: Cpu) {
        if !self.idle_cpus.test(cpu as usize) {
            self.idle_cpus.set(cpu as usize);
            self.nr_cpus += 1;
        }
    }

    /// `cpu` leaves idle (nohz_balance_exit_idle).
    pub(crate) fn exit_idle(&mut self, cpu: Cpu) {
        if self.idle_cpus.test(cpu as usize) {
            self.idle_cpus.clear(cpu as usize);
            self.nr_cpus -= 1;
        }
    }
}

/// How many groups ahead a domain walk prefetches.
pub(crate) const GROUPS_AHEAD: usize = 8;

/// What a balance walk of a domain finds: the balancing CPU's own group's
/// statistics, the busiest other group (type, statistics, group) and the
/// domain's total load, capacity and utilisation.
type BusyPicks<'a> = (GroupStats, Option<(GroupType, GroupStats, Group<'a>)>, [u64; 3]);

impl Sim {
    /// idle_cpu(): nothing running or queued.
    #[inline]
    pub(crate) fn idle_cpu(&self, cpu: Cpu) -> bool {
        let rq = self.rq(cpu);
        rq.curr.is_none() && rq.nr_running == 0
    }

    /// The CPU's fair load average (`cpu_load()`, `cfs_rq->avg.load_avg`).
    pub(crate) fn cpu_load(&self, cpu: Cpu) -> u64 {
        self.rq(cpu).cfs.avg.load_avg
    }

    /// The CPU's fair utilisation, capped at SCHED_CAPACITY_SCALE (`cpu_util_cfs()`).
    pub(crate) fn cpu_util(&self, cpu: Cpu) -> u64 {
        self.rq(cpu).cfs.avg.util_avg.min(SCHED_CAPACITY_SCALE)
    }

    /// task_h_load(): a task's load as its CPU sees it (scaled down
    /// through the group entities above it, when it is in a cgroup).
    fn task_h_load(&self, p: TaskId) -> u64 {
        if self.task(p).cgrp != 0 {
            return self.task_h_load_group(p);
        }
        self.task(p).se.avg.load_avg
    }

    /// wake_wide(): many-to-many wakeup patterns spread instead of pulling to the waker.
    fn wake_wide(&self, p: TaskId) -> bool {
        let Some(waker) = self.rq(self.this_cpu).curr else { return false };
        let factor = self.llc_size(self.this_cpu);
        let (mut master, mut slave) = (self.task(waker).wakee_flips, self.task(p).wakee_flips);
        if master < slave {
            std::mem::swap(&mut master, &mut slave);
        }
        !(slave < factor || master < slave * factor)
    }

    fn wake_affine_idle(&self, this_cpu: Cpu, prev: Cpu, sync: bool) -> Option<Cpu> {
        if self.idle_cpu(this_cpu) && self.topo.cpus_share_cache(this_cpu as usize, prev as usize) {
            return Some(if self.idle_cpu(prev) { prev } else { this_cpu });
        }
        if sync && self.rq(this_cpu).nr_running == 1 {
            return Some(this_cpu);
        }
        if self.idle_cpu(prev) {
            return Some(prev);
        }
        None
    }

    fn wake_affine_weight(&self, sd: &SchedDomain, p: TaskId, this_cpu: Cpu, prev: Cpu, sync: bool) -> Option<Cpu> {
        let mut this_eff = self.cpu_load(this_cpu) as i64;
        if sync {
            if let Some(cur) = self.rq(this_cpu).curr {
                let cl = self.task_h_load(cur) as i64;
                if cl > this_eff {
                    return Some(this_cpu);
                }
                this_eff -= cl;
            }
        }
        let task_load = self.task_h_load(p) as i64;
        this_eff += task_load;
        let bias = self.features.on(Feature::WA_BIAS);
        if bias {
            this_eff *= 100;
        }
        this_eff *= SCHED_CAPACITY_SCALE as i64;
        let mut prev_eff = self.cpu_load(prev) as i64 - task_load;
        if bias {
            prev_eff *= 100 + (sd.imbalance_pct as i64 - 100) / 2;
        }
        prev_eff *= SCHED_CAPACITY_SCALE as i64;
        if sync {
            prev_eff += 1;
        }
        (this_eff < prev_eff).then_some(this_cpu)
    }

    /// wake_affine(): pull the wakee to the waker's CPU, or leave it at prev.
    fn wake_affine(&self, sd: &SchedDomain, p: TaskId, this_cpu: Cpu, prev: Cpu, sync: bool) -> Cpu {
        let mut target = None;
        if self.features.on(Feature::WA_IDLE) {
            target = self.wake_affine_idle(this_cpu, prev, sync);
        }
        if target.is_none() && self.features.on(Feature::WA_WEIGHT) {
            target = self.wake_affine_weight(sd, p, this_cpu, prev, sync);
        }
        if target == Some(this_cpu) {
            this_cpu
        } else {
            prev
        }
    }

    /// select_task_rq_fair().
    pub(crate) fn select_task_rq_fair(&mut self, p: TaskId, prev_cpu: Cpu, wake_flags: u32) -> Cpu {
        let this_cpu = self.this_cpu;
        if wake_flags & wf::FORK != 0 {
            return self.with_group_memo(|sim, memo| sim.find_idlest_cpu(p, this_cpu, prev_cpu, memo));
        }
        let prev_cpu = self.select_cache_cpu(p, prev_cpu);
        let sync = wake_flags & wf::SYNC != 0;
        let allowed_here = self.task(p).allowed_on(this_cpu as usize);
        let want_affine = allowed_here && !self.wake_wide(p);
        let mut new_cpu = prev_cpu;
        if want_affine {
            let domains = &self.domains[this_cpu as usize];
            if let Some(sd) = domains.iter().find(|sd| sd.flags.wake_affine && sd.spans(prev_cpu as usize)) {
                if this_cpu != prev_cpu {
                    new_cpu = self.wake_affine(sd, p, this_cpu, prev_cpu, sync);
                }
            }
        }
        self.select_idle_sibling(p, prev_cpu, new_cpu)
    }

    fn allowed_idle(&self, p: TaskId, cpu: Cpu) -> bool {
        self.task(p).allowed_on(cpu as usize) && self.idle_cpu(cpu)
    }

    /// select_idle_sibling(): an idle CPU sharing the LLC with `target`, else target.
    fn select_idle_sibling(&mut self, p: TaskId, prev: Cpu, target: Cpu) -> Cpu {
        if self.allowed_idle(p, target) {
            return target;
        }
        let share = |a: Cpu, b: Cpu, s: &Sim| s.topo.cpus_share_cache(a as usize, b as usize);
        if prev != target && share(prev, target, self) && self.allowed_idle(p, prev) {
            return prev;
        }
        let recent = self.task(p).recent_used_cpu;
        self.task_mut(p).recent_used_cpu = prev;
        if recent != prev && recent != target && share(recent, target, self) && self.allowed_idle(p, recent) {
            return recent;
        }
        let llc = self.topo.llc_of(target as usize);
        let smt = self.core_has_smt(target);
        let mut has_idle_core = false;
        if smt {
            has_idle_core = self.llc_has_idle_cores[llc];
            if !has_idle_core && share(prev, target, self) {
                if let Some(c) = self.select_idle_smt(p, prev) {
                    return c;
                }
            }
        }
        if let Some(c) = self.select_idle_cpu(p, target, has_idle_core) {
            return c;
        }
        target
    }

    fn select_idle_smt(&self, p: TaskId, prev: Cpu) -> Option<Cpu> {
        self.topo
            .smt_siblings(prev as usize)
            .iter()
            .map(|c| c as Cpu)
            .find(|&c| c != prev && self.allowed_idle(p, c))
    }

    /// update_idle_cpu_scan(): SIS_UTIL's scan budget for the LLC, from the
    /// utilisation a balance of the LLC's domain just summed. The number of
    /// CPUs worth scanning drops quadratically with the LLC's average
    /// utilisation and reaches zero around 85 % (1 / imbalance_pct).
    fn update_idle_cpu_scan(&self, cpu: Cpu, sd: &SchedDomain, sum_util: u64, idle: IdleType) {
        if !self.features.on(Feature::SIS_UTIL) || idle == IdleType::NewlyIdle {
            return;
        }
        let llc_weight = self.llc_size(cpu) as u64;
        if sd.span_weight as u64 != llc_weight {
            return;
        }
        let x = sum_util / llc_weight.max(1);
        let pct = sd.imbalance_pct as u64;
        let tmp = (x * x * pct * pct / (10_000 * SCHED_CAPACITY_SCALE)).min(SCHED_CAPACITY_SCALE);
        let y = (SCHED_CAPACITY_SCALE - tmp) * llc_weight / SCHED_CAPACITY_SCALE;
        self.llc_nr_idle_scan[self.topo.llc_of(cpu as usize)].set(y as u32);
    }

    /// select_idle_cpu(): scan the LLC from target+1 for an idle core or CPU.
    fn select_idle_cpu(&mut self, p: TaskId, target: Cpu, has_idle_core: bool) -> Option<Cpu> {
        let llc = self.topo.llc_of(target as usize);
        let mut nr = u32::MAX;
        if self.features.on(Feature::SIS_UTIL) {
            // The budget the last balance of the LLC left (none left: an
            // overloaded LLC is unlikely to have an idle CPU or core).
            nr = self.llc_nr_idle_scan[llc].get();
            if nr == 0 {
                return None;
            }
        }
        let start = (target as usize + 1) % self.nr_cpus();
        let (found, idle_cpu, scanned) = if has_idle_core {
            self.scan_idle_cores(p, llc, start)
        } else {
            let (found, scanned) = self.scan_idle_cpus(p, llc, start, nr);
            (found, None, scanned)
        };
        self.rq_mut(target).stats.idle_scans += scanned;
        let cost = scanned * self.costs.scan_cpu_ns;
        self.charge_irq(self.this_cpu, cost);
        if has_idle_core && found.is_none() {
            self.llc_has_idle_cores[llc] = false;
        }
        found.or(idle_cpu)
    }

    /// select_idle_cpu()'s scan for an idle core: the LLC's span & the
    /// task's CPUs from `start`, one core at a time; the first wholly idle
    /// core (its first CPU), the first idle allowed CPU met on the way, and
    /// how many CPUs were looked at. The span is walked without building
    /// the intersection; whether the task may run anywhere, as most may, is
    /// tested once here rather than per CPU (as Task::allowed_on would).
    fn scan_idle_cores(&self, p: TaskId, llc: usize, start: usize) -> (Option<Cpu>, Option<Cpu>, u64) {
        let llc_span = &self.topo.llc_span[llc];
        let task = self.task(p);
        let anywhere = task.allowed_everywhere();
        let allowed = |c: usize| anywhere || task.cpus_allowed.test(c);
        let in_span = |c: usize| llc_span.test(c) && allowed(c);
        let mut seen_cores = CpuMask::new(self.nr_cpus());
        let (mut scanned, mut idle_cpu) = (0u64, None);
        for c in llc_span.iter_wrap(start).filter(|&c| allowed(c)) {
            scanned += 1;
            if seen_cores.test(c) {
                continue;
            }
            let sib = self.topo.smt_siblings(c);
            seen_cores.or_assign(sib);
            let mut all_idle = true;
            for s in sib.iter() {
                if self.idle_cpu(s as Cpu) {
                    if idle_cpu.is_none() && in_span(s) {
                        idle_cpu = Some(s as Cpu);
                    }
                } else {
                    all_idle = false;
                }
            }
            if all_idle {
                return (Some(c as Cpu), idle_cpu, scanned);
            }
        }
        (None, idle_cpu, scanned)
    }

    /// select_idle_cpu()'s scan for an idle CPU: the first of at most `nr`
    /// CPUs of the LLC's span & the task's CPUs from `start`, and how many
    /// were looked at. Apart from the core scan, so that none of its state
    /// is carried through this loop, which a wakeup on a busy machine runs
    /// for every CPU of its scan budget.
    fn scan_idle_cpus(&self, p: TaskId, llc: usize, start: usize, mut nr: u32) -> (Option<Cpu>, u64) {
        let task = self.task(p);
        let anywhere = task.allowed_everywhere();
        let mut scanned = 0u64;
        for c in self.topo.llc_span[llc].iter_wrap(start).filter(|&c| anywhere || task.cpus_allowed.test(c)) {
            scanned += 1;
            if self.idle_cpu(c as Cpu) {
                return (Some(c as Cpu), scanned);
            }
            nr -= 1;
            if nr == 0 {
                break;
            }
        }
        (None, scanned)
    }

    /// Starts loading what `group_stats` reads of a group's first two
    /// CPUs (the first 80 bytes of their runqueues) some groups before the
    /// walk gets there: a walk of a 4,096-CPU domain reads 4,096
    /// runqueues, ~700 bytes apart, and the hardware prefetcher follows
    /// the CPUs of a group (neighbours in memory) but not the jump to the
    /// next group. Prefetching every CPU of the group measured slower.
    #[inline]
    pub(crate) fn prefetch_group(&self, group: Option<Group<'_>>) {
        if !self.lookahead() {
            return;
        }
        for &c in group.map_or(&[][..], |g| &g.cpus[..g.cpus.len().min(2)]) {
            if let Some(rq) = self.rqs.get(c as usize) {
                crate::sched::prefetch(rq);
                crate::sched::prefetch(&rq.cfs.avg.util_sum);
            }
        }
    }

    /// Runs a walk `f` with the group memo, if kept, brought up to date
    /// with the CPUs marked since its last use. The memo is out of the
    /// simulator meanwhile; a walk only reads the simulator, so it marks
    /// nothing.
    fn with_group_memo<R>(&mut self, f: impl FnOnce(&Sim, Option<&mut GroupMemo>) -> R) -> R {
        let mut memo = self.group_memo.take();
        if memo.is_some() {
            self.clear_balance_marks(memo.as_deref_mut());
        }
        let r = f(self, memo.as_deref_mut());
        self.group_memo = memo;
        r
    }

    /// A group's statistics: kept ones from `memo` if it has them,
    /// otherwise summed (and kept there).
    #[inline]
    pub(crate) fn kept_group_stats(&self, g: &Group<'_>, memo: Option<&mut GroupMemo>) -> GroupStats {
        let Some(m) = memo.filter(|_| g.id != NO_GROUP_ID) else { return self.group_stats(g.cpus) };
        if let Some(s) = m.get(g.id) {
            debug_assert_eq!(*s, self.group_stats(g.cpus), "kept statistics of group {} are stale", g.id);
            return s.clone();
        }
        let s = self.group_stats(g.cpus);
        m.put(g.id, &s);
        s
    }

    /// A group's statistics, summed over its CPUs' shares. Its cores are
    /// not among them (the kernel keeps them in the group itself,
    /// `sched_group->cores`): only sibling_imbalance reads them, of two
    /// groups, in the balances that get that far ([`Sim::group_cores`]).
    pub(crate) fn group_stats(&self, group: &[Cpu]) -> GroupStats {
        let mut s = GroupStats::default();
        for &c in group {
            let sh = self.cpu_share(c);
            s.load += sh.load;
            s.util += sh.util;
            s.runnable += sh.runnable;
            s.nr_running += sh.nr_running;
            s.h_nr_running += sh.h_nr_running;
            s.idle_cpus += sh.idle;
        }
        s.weight = group.len() as u32;
        s.capacity = s.weight as u64 * SCHED_CAPACITY_SCALE;
        s.set_avg_load();
        s
    }

    /// The cores of a group: its CPUs that are their core's
    /// lowest-numbered sibling (validated: thread 0).
    pub(crate) fn group_cores(&self, group: &[Cpu]) -> u32 {
        group.iter().filter(|&&c| self.topo.cpus[c as usize].thread == 0).count() as u32
    }

    /// What `cpu` adds to the statistics of each group holding it.
    #[inline]
    pub(crate) fn cpu_share(&self, cpu: Cpu) -> CpuShare {
        let rq = self.rq(cpu);
        CpuShare {
            load: rq.cfs.avg.load_avg,
            util: self.cpu_util(cpu),
            runnable: rq.cfs.avg.runnable_avg,
            nr_running: rq.nr_running,
            h_nr_running: rq.cfs.h_nr_runnable,
            idle: self.idle_cpu(cpu) as u32,
        }
    }

    /// Periodic balancing from the tick (trigger_load_balance).
    pub(crate) fn trigger_load_balance(&mut self, cpu: Cpu) {
        if self.now() >= self.rq(cpu).next_balance {
            let idle = if self.idle_cpu(cpu) { IdleType::Idle } else { IdleType::NotIdle };
            self.rebalance_domains(cpu, idle);
        }
        self.nohz_balancer_kick(cpu);
    }

    /// sched_balance_domains(): balance each level whose interval has passed.
    pub(crate) fn rebalance_domains(&mut self, cpu: Cpu, mut idle: IdleType) {
        let now = self.now();
        let mut next = now + 60 * 1000 * NSEC_PER_MSEC;
        for level in 0..self.domains[cpu as usize].len() {
            let (busy_factor, max_interval) = {
                let sd = &self.domains[cpu as usize][level];
                (sd.busy_factor as u64, sd.max_interval_ms)
            };
            let st = &self.rq(cpu).domains[level];
            let mut interval_ms = st.balance_interval_ms;
            if idle == IdleType::NotIdle {
                interval_ms *= busy_factor;
            }
            let interval = interval_ms.clamp(1, max_interval.max(1) * busy_factor) * NSEC_PER_MSEC;
            if now >= st.last_balance + interval {
                if self.sched_balance_rq(cpu, level, idle) > 0 {
                    // The CPU now has work: further levels balance as busy.
                    idle = IdleType::NotIdle;
                }
                self.rq_mut(cpu).domains[level].last_balance = now;
            }
            let st = &self.rq(cpu).domains[level];
            next = next.min(st.last_balance + interval);
        }
        self.rq_mut(cpu).next_balance = next;
    }

    /// Newly idle balancing (sched_balance_newidle); true if a task was pulled.
    pub(crate) fn sched_balance_newidle(&mut self, cpu: Cpu) -> bool {
        // Not worth it when this CPU's idle periods are short, or when no CPU
        // has anything queued to give.
        if self.rq(cpu).avg_idle < self.tunables.fair.migration_cost_ns || self.rd.nr_overloaded == 0 {
            return false;
        }
        for level in 0..self.domains[cpu as usize].len() {
            if !self.domains[cpu as usize][level].flags.balance_newidle {
                continue;
            }
            if self.sched_balance_rq(cpu, level, IdleType::NewlyIdle) > 0 {
                return true;
            }
            if self.rq(cpu).nr_running > 0 {
                return true;
            }
        }
        false
    }

    /// A busy CPU kicks an idle one to balance for all idle CPUs (nohz_balancer_kick).
    fn nohz_balancer_kick(&mut self, cpu: Cpu) {
        let now = self.now();
        if self.nohz.nr_cpus == 0 || now < self.nohz.next_balance || self.rq(cpu).nr_running < 2 {
            return;
        }
        let Some(ilb) = self.nohz.idle_cpus.iter().find(|&c| c as Cpu != cpu && self.idle_cpu(c as Cpu)) else {
            return;
        };
        self.nohz.next_balance = now + self.costs.tick_ns();
        let ilb = ilb as Cpu;
        self.rq_mut(ilb).nohz_kick = true;
        self.send_ipi(ilb);
    }

    /// The kicked idle CPU balances on behalf of every idle CPU due (nohz_idle_balance).
    pub(crate) fn nohz_idle_balance(&mut self, ilb: Cpu) {
        if !std::mem::take(&mut self.rq_mut(ilb).nohz_kick) {
            return;
        }
        let now = self.now();
        let mut next = now + 60 * 1000 * NSEC_PER_MSEC;
        let idle: Vec<usize> = self.nohz.idle_cpus.iter().filter(|&c| c as Cpu != ilb).chain(std::iter::once(ilb as usize)).collect();
        for c in idle {
            let c = c as Cpu;
            if !self.idle_cpu(c) {
                continue;
            }
            if now >= self.rq(c).next_balance {
                self.rebalance_domains(c, IdleType::Idle);
                if self.rq(c).nr_running > 0 {
                    self.resched_curr(c);
                }
            }
            next = next.min(self.rq(c).next_balance);
        }
        self.nohz.next_balance = next.max(now + self.costs.tick_ns());
    }

    /// should_we_balance(): one CPU per group does the work.
    fn should_we_balance(&self, cpu: Cpu, sd: &SchedDomain, idle: IdleType) -> bool {
        if idle == IdleType::NewlyIdle {
            return self.rq(cpu).nr_running == 0;
        }
        let Some(local) = sd.groups.groups().next() else { return true };
        match local.cpus.iter().find(|&&c| self.idle_cpu(c as Cpu)) {
            Some(&first_idle) => first_idle == cpu,
            None => local.cpus.first() == Some(&cpu),
        }
    }

    /// One balance pass of `cpu` at domain `level` (sched_balance_rq); returns tasks moved.
    pub(crate) fn sched_balance_rq(&mut self, cpu: Cpu, level: usize, idle: IdleType) -> u32 {
        let sd = self.domains[cpu as usize][level].clone();
        self.rq_mut(cpu).stats.balance_runs += 1;
        let cost = sd.span_weight as u64 * self.costs.scan_cpu_ns;
        if idle == IdleType::NewlyIdle {
            self.charge_irq(cpu, cost);
        }
        if !self.should_we_balance(cpu, &sd, idle) {
            return 0;
        }
        let busiest = self.with_group_memo(|sim, memo| sim.find_busiest(cpu, level, &sd, idle, memo));
        let Some((busiest_rq, migration, imbalance)) = busiest else {
            let st = &mut self.rq_mut(cpu).domains[level];
            st.nr_balance_failed = 0;
            if st.balance_interval_ms < sd.max_interval_ms {
                st.balance_interval_ms *= 2;
            }
            return 0;
        };
        let moved = self.detach_attach_tasks(cpu, busiest_rq, &sd, level, idle, migration, imbalance);
        let st = &mut self.rq_mut(cpu).domains[level];
        if moved > 0 {
            st.nr_balance_failed = 0;
            st.balance_interval_ms = sd.min_interval_ms;
            self.resched_curr(cpu);
            return moved;
        }
        if idle != IdleType::NewlyIdle {
            st.nr_balance_failed += 1;
        }
        if st.nr_balance_failed > sd.cache_nice_tries + 2 {
            st.nr_balance_failed = sd.cache_nice_tries + 1;
            if self.active_balance(busiest_rq, cpu) {
                self.rq_mut(cpu).domains[level].balance_interval_ms = sd.min_interval_ms;
                return 1;
            }
        }
        let st = &mut self.rq_mut(cpu).domains[level];
        if st.balance_interval_ms < sd.max_interval_ms {
            st.balance_interval_ms *= 2;
        }
        0
    }

    /// find_busiest_group() + calculate_imbalance() + find_busiest_queue().
    fn find_busiest(&self, cpu: Cpu, level: usize, sd: &SchedDomain, idle: IdleType, mut memo: Option<&mut GroupMemo>) -> Option<(Cpu, Migration, i64)> {
        let pct = sd.imbalance_pct as u64;
        let by_tree = memo.as_deref_mut().and_then(|m| self.busiest_by_tree(sd, pct, m));
        let (local, busiest, [total_load, total_cap, sum_util]) = match by_tree {
            Some(picks) => {
                #[cfg(debug_assertions)]
                {
                    let key = |p: &BusyPicks<'_>| (p.0.clone(), p.1.as_ref().map(|(t, s, g)| (*t, s.clone(), g.id)), p.2);
                    debug_assert_eq!(key(&picks), key(&self.busiest_by_walk(cpu, sd, pct, None)), "the tree and the walk disagree");
                }
                picks
            }
            None => self.busiest_by_walk(cpu, sd, pct, memo),
        };
        self.update_idle_cpu_scan(cpu, sd, sum_util, idle);
        let (bty, bs, bgroup) = busiest?;
        let lty = local.classify(pct);
        if lty > bty {
            return None;
        }
        let sds_avg_load = total_load * SCHED_CAPACITY_SCALE / total_cap.max(1);
        if lty == GroupType::Overloaded
            && (local.avg_load >= bs.avg_load || local.avg_load >= sds_avg_load || 100 * bs.avg_load <= pct * local.avg_load) {
                return None;
            }
        let prefer_sibling = level > 0 && !self.domains[cpu as usize][level - 1].flags.numa;
        let local_cpus = sd.groups.groups().next().map_or(&[][..], |g| g.cpus);
        let sibling_imb = self.sibling_imbalance(idle, (&bs, bgroup.cpus), (&local, local_cpus));
        let forced = prefer_sibling && lty == GroupType::HasSpare && sibling_imb > 1;
        if !forced && bty != GroupType::Overloaded {
            if idle == IdleType::NotIdle {
                return None;
            }
            if bs.weight > 1 && local.idle_cpus <= bs.idle_cpus + 1 {
                return None;
            }
            if bs.h_nr_running == 1 {
                return None;
            }
        }
        // calculate_imbalance()
        let (migration, imbalance): (Migration, i64) = if lty == GroupType::HasSpare {
            if bty > GroupType::FullyBusy && !sd.flags.share_llc {
                let imb = local.capacity.max(local.util) as i64 - local.util as i64;
                if idle != IdleType::NotIdle && imb == 0 {
                    (Migration::Task, 1)
                } else {
                    (Migration::Util, imb)
                }
            } else {
                let mut imb = if bs.weight == 1 || prefer_sibling {
                    sibling_imb
                } else {
                    (local.idle_cpus as i64 - bs.idle_cpus as i64).max(0)
                };
                if sd.flags.numa && imb <= 2 && local.nr_running < (sd.span_weight / 4).max(1) {
                    // adjust_numa_imbalance(): tolerate a small imbalance between nodes.
                    imb = 0;
                }
                (Migration::Task, imb >> 1)
            }
        } else {
            if lty < GroupType::Overloaded && (local.avg_load >= bs.avg_load || local.avg_load >= sds_avg_load) {
                return None;
            }
            let a = (bs.avg_load as i64 - sds_avg_load as i64) * bs.capacity as i64;
            let b = (sds_avg_load as i64 - local.avg_load as i64) * local.capacity as i64;
            (Migration::Load, a.min(b) / SCHED_CAPACITY_SCALE as i64)
        };
        if imbalance <= 0 {
            return None;
        }
        // find_busiest_queue()
        let busiest_rq = bgroup
            .cpus
            .iter()
            .map(|&c| c as Cpu)
            .filter(|&c| self.rq(c).cfs.h_nr_runnable > 0)
            .max_by_key(|&c| {
                let rq = self.rq(c);
                match migration {
                    Migration::Load => (self.cpu_load(c), rq.cfs.h_nr_runnable as u64, std::cmp::Reverse(c)),
                    Migration::Util => (self.cpu_util(c), rq.cfs.h_nr_runnable as u64, std::cmp::Reverse(c)),
                    Migration::Task => (rq.cfs.h_nr_runnable as u64, self.cpu_load(c), std::cmp::Reverse(c)),
                }
            })?;
        Some((busiest_rq, migration, imbalance))
    }

    /// The balancing CPU's own group, the busiest other one with fair
    /// tasks (the first of equally busy ones) and the domain's total load,
    /// capacity and utilisation, by walking the domain's groups in the
    /// CPU's order.
    fn busiest_by_walk<'a>(&self, cpu: Cpu, sd: &'a SchedDomain, pct: u64, mut memo: Option<&mut GroupMemo>) -> BusyPicks<'a> {
        let mut local = GroupStats::default();
        let mut busiest: Option<(GroupType, GroupStats, Group<'_>)> = None;
        let (mut total_load, mut total_cap, mut sum_util) = (0u64, 0u64, 0u64);
        // `cpu`'s domain lists its own group first.
        let mut ahead = sd.groups.groups().skip(GROUPS_AHEAD);
        for (i, g) in sd.groups.groups().enumerate() {
            if memo.is_none() {
                self.prefetch_group(ahead.next());
            }
            let s = self.kept_group_stats(&g, memo.as_deref_mut());
            total_load += s.load;
            total_cap += s.capacity;
            sum_util += s.util;
            debug_assert_eq!(i == 0, g.contains(cpu), "cpu{cpu}'s own group is not its first");
            if i == 0 {
                local = s;
                continue;
            }
            if s.h_nr_running == 0 {
                continue;
            }
            let ty = s.classify(pct);
            let pick = match &busiest {
                None => true,
                Some((bty, bs, _)) => {
                    ty > *bty
                        || (ty == *bty
                            && match ty {
                                GroupType::Overloaded | GroupType::FullyBusy => s.avg_load > bs.avg_load,
                                GroupType::HasSpare => s.idle_cpus < bs.idle_cpus || (s.idle_cpus == bs.idle_cpus && s.nr_running > bs.nr_running),
                            })
                }
            };
            if pick {
                busiest = Some((ty, s, g));
            }
        }
        (local, busiest, [total_load, total_cap, sum_util])
    }

    /// [`Self::busiest_by_walk`] through the span's tree in `memo`. None
    /// when the domain's groups are not a shared span walked as a rotation.
    fn busiest_by_tree<'a>(&self, sd: &'a SchedDomain, pct: u64, memo: &mut GroupMemo) -> Option<BusyPicks<'a>> {
        let (first, lists) = sd.groups.shared().filter(|(_, l)| l.len() >= TREE_MIN_GROUPS)?;
        let local = sd.groups.rotation()?;
        let (ls, pick, totals) = memo.tree_pick(Walk::Busiest, first, lists.len(), pct, local, |k| self.group_stats(&lists[k]))?;
        let busiest = pick.map(|(k, s)| (s.classify(pct), s, sd.groups.shared_group(k)));
        Some((ls, busiest, totals))
    }

    /// The busiest and the local group's statistics, with their CPUs.
    fn sibling_imbalance(&self, idle: IdleType, (busiest, busiest_cpus): (&GroupStats, &[Cpu]), (local, local_cpus): (&GroupStats, &[Cpu])) -> i64 {
        if idle == IdleType::NotIdle || busiest.nr_running == 0 {
            return 0;
        }
        let (nb, nl) = (self.group_cores(busiest_cpus).max(1) as i64, self.group_cores(local_cpus).max(1) as i64);
        if nb == nl {
            return (busiest.nr_running as i64 - local.nr_running as i64).max(0);
        }
        let mut imb = (nl * busiest.nr_running as i64 - nb * local.nr_running as i64).max(0);
        imb = (2 * imb + nl + nb) / (nl + nb);
        if imb <= 1 && local.nr_running == 0 && busiest.nr_running > 1 {
            imb = 2;
        }
        imb
    }

    /// detach_tasks() + attach_tasks(): move queued fair tasks from `src` to `dst`.
    #[allow(clippy::too_many_arguments)]
    fn detach_attach_tasks(&mut self, dst: Cpu, src: Cpu, sd: &SchedDomain, level: usize, idle: IdleType, migration: Migration, mut imbalance: i64) -> u32 {
        if self.rq(src).nr_running <= 1 {
            return 0;
        }
        let now = self.now();
        // Least recently run first, like walking cfs_tasks from its tail.
        let loop_max = self.tunables.fair.nr_migrate.min(self.rq(src).nr_running) as usize;
        // Coldest first, at most loop_max of them other than the running
        // task. Read one at a time, each the next above the last seen: a
        // move takes only the moved task off src's list, so the walk sees
        // what a list taken at the start would hold, without reading
        // loop_max entries (and growing a vector) where a newly idle
        // balance mostly stops at the first.
        let running = self.rq(src).curr;
        let mut seen: Option<(Ns, TaskId)> = None;
        let mut examined = 0;
        let failed = self.rq(dst).domains[level].nr_balance_failed;
        debug_assert!(src != dst, "detach_attach_tasks: balancing cpu{src} with itself");
        debug_assert!(sd.span.test(src as usize) && sd.span.test(dst as usize), "detach_attach_tasks: cpu{src} or cpu{dst} is outside the {} domain", sd.level);
        let (src_before, dst_before) = (self.rq(src).nr_running, self.rq(dst).nr_running);
        let mut moved = 0;
        let mut throttled_on_arrival = false;
        while examined < loop_max {
            let lru = &self.rq(src).cfs.lru;
            let Some(&(stamp, p)) = (match &seen {
                None => lru.first(),
                Some(s) => lru.next_above(s),
            }) else {
                break;
            };
            seen = Some((stamp, p));
            if Some(p) == running {
                continue;
            }
            examined += 1;
            if idle != IdleType::NotIdle && self.rq(src).nr_running <= 1 {
                break;
            }
            let t = self.task(p);
            if t.class != ClassId::Fair || t.se.sched_delayed || !t.allowed_on(dst as usize) {
                continue;
            }
            // throttled_lb_pair(): a task of a throttled group stays put.
            let tg = t.cgrp;
            if tg != 0 && (self.throttled_hierarchy(Cq { cpu: src, tg }) || self.throttled_hierarchy(Cq { cpu: dst, tg })) {
                continue;
            }
            let t = self.task(p);
            let mut hot = now.saturating_sub(t.se.exec_start) < self.tunables.fair.migration_cost_ns && t.se.exec_start != 0;
            // llc_balancing: leaving the preferred LLC counts as hot, joining it as cold.
            match self.migrate_llc_pref(p, src, dst) {
                d if d < 0 => hot = true,
                d if d > 0 => hot = false,
                _ => {}
            }
            if hot && failed <= sd.cache_nice_tries {
                continue;
            }
            match migration {
                Migration::Load => {
                    let load = self.task_h_load(p).max(1) as i64;
                    if (load >> failed.min(63)) > imbalance {
                        continue;
                    }
                    imbalance -= load;
                }
                Migration::Util => {
                    let util = self.task(p).se.avg.util_avg as i64;
                    if util > imbalance {
                        continue;
                    }
                    imbalance -= util;
                }
                Migration::Task => imbalance -= 1,
            }
            // Pre (can_migrate_task()): a queued fair task of `src`, not
            // running, allowed on `dst`.
            debug_assert!(self.task(p).on_rq && self.task(p).cpu == src && self.rq(src).curr != Some(p), "detach_attach_tasks: task {p} is not waiting on cpu{src}");
            self.move_queued_task(p, dst);
            debug_assert!(self.task(p).on_rq && self.task(p).cpu == dst, "detach_attach_tasks: task {p} did not arrive on cpu{dst}");
            // check_enqueue_throttle(): arriving in a group whose runtime on
            // `dst` is spent throttles it there, taking its queued tasks off
            // dst's count.
            throttled_on_arrival |= tg != 0 && self.throttled_hierarchy(Cq { cpu: dst, tg });
            self.charge_irq(dst, self.costs.migrate_task_ns);
            moved += 1;
            if idle == IdleType::NewlyIdle || imbalance <= 0 {
                break;
            }
        }
        // Post: exactly `moved` tasks went from `src` to `dst`, and `src`
        // kept its running task.
        debug_assert_eq!(self.rq(src).nr_running + moved, src_before, "detach_attach_tasks: cpu{src} lost other than {moved} tasks");
        debug_assert!(
            self.rq(dst).nr_running == dst_before + moved || throttled_on_arrival && self.rq(dst).nr_running < dst_before + moved,
            "detach_attach_tasks: cpu{dst} gained other than {moved} tasks ({} -> {})",
            dst_before,
            self.rq(dst).nr_running
        );
        debug_assert!(running.is_none() || self.rq(src).curr == running, "detach_attach_tasks: cpu{src}'s running task moved");
        moved
    }

    /// Active balancing: the stopper on `src` pushes its running task to `dst`.
    fn active_balance(&mut self, src: Cpu, dst: Cpu) -> bool {
        let Some(p) = self.rq(src).curr else { return false };
        if self.rq(src).nr_running != 1 || self.task(p).class != ClassId::Fair || !self.task(p).allowed_on(dst as usize) || !self.idle_cpu(dst) {
            return false;
        }
        self.preempt_and_migrate(src, p, dst);
        // Post: the task left `src` for `dst`.
        debug_assert!(self.task(p).cpu == dst && self.rq(src).curr != Some(p), "active_balance: task {p} did not move from cpu{src} to cpu{dst}");
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classify_groups() {
        let g = GroupStats { nr_running: 3, weight: 2, util: 2048, runnable: 3000, capacity: 2048, ..Default::default() };
        assert_eq!(g.classify(117), GroupType::Overloaded);
        let g = GroupStats { nr_running: 1, weight: 2, util: 1024, runnable: 1024, capacity: 2048, ..Default::default() };
        assert_eq!(g.classify(117), GroupType::HasSpare);
        let g = GroupStats { nr_running: 2, weight: 2, util: 2048, runnable: 2048, capacity: 2048, ..Default::default() };
        assert_eq!(g.classify(117), GroupType::FullyBusy);
    }
}
