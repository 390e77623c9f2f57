//! Group statistics kept between balance walks.
//!
//! Fork balancing (`sched_balance_find_dst_cpu()`) and every balance pass
//! (`sched_balance_rq()`, most often from a CPU going newly idle) walk a
//! domain's groups and sum each CPU's load, utilisation, runnable average,
//! task counts and idleness into the group's statistics. At the top of a
//! 4,096-CPU machine that is 4,096 runqueues read per walk, while between
//! two walks a few dozen CPUs change (measured on 4,096 CPUs with 40,000 and
//! 100,000 tasks: 31 and 65 CPUs, in 18 and 32 of 512 groups, over tens of
//! thousands of walks).
//!
//! So the statistics of each shared group (numbered by
//! [`Group::id`](crate::sched::topology::Group)) are kept once summed, and
//! dropped when one of its CPUs changes. Every function that writes what
//! the sums read marks the CPU
//! ([`Sim::balance_touch`](crate::sched::sim::Sim::balance_touch)):
//! `rq->curr` in [`Sim::set_curr`]; `rq->nr_running` in activate, dequeue
//! and throttling; the root fair runqueue's averages in `update_load_avg`
//! and where a task's average moves between runqueues (migration, a
//! cgroup move); `h_nr_runnable` in the enqueue and dequeue walks,
//! `add_h_nr` and the throttling walk. A walk first drops the groups of the
//! CPUs marked since the last one, then sums only those. Debug builds check
//! every kept statistic against a fresh sum, so a writer that does not
//! mark fails the tests.
//!
//! The marks cost a few instructions each, several per event, so the memo
//! is kept throughout only on machines of
//! [`GROUP_MEMO_MIN_CPUS`](crate::sched::sim::GROUP_MEMO_MIN_CPUS) CPUs or
//! more; on smaller ones, only while a workload starts its tasks, where
//! every fork walks the machine and only the forking CPU and the new
//! task's change between two forks.

use crate::sched::balance::GroupStats;
use crate::sched::sim::Sim;
use crate::sched::topology::SchedDomain;

/// The statistics of the shared groups, by group id.
#[derive(Clone, Debug)]
pub(crate) struct GroupMemo {
    /// A group's statistics, or None to be summed on the next walk.
    stats: Vec<Option<GroupStats>>,
    /// `ids[starts[c]..starts[c + 1]]`: the groups holding CPU c.
    starts: Vec<u32>,
    ids: Vec<u32>,
}

impl GroupMemo {
    /// A memo for these domains (every CPU's, lowest level first) on a
    /// machine of `nr_cpus` CPUs; None when they share no groups.
    pub(crate) fn new(domains: &[Vec<SchedDomain>], nr_cpus: usize) -> Option<GroupMemo> {
        let mut seen = std::collections::BTreeSet::new();
        let mut holders: Vec<Vec<u32>> = vec![Vec::new(); nr_cpus];
        let mut nr_ids = 0;
        for sd in domains.iter().flatten() {
            let Some((first, lists)) = sd.groups.shared() else { continue };
            if !seen.insert(first) {
                continue;
            }
            for (k, cpus) in lists.iter().enumerate() {
                let id = first + k as u32;
                nr_ids = nr_ids.max(id as usize + 1);
                for &c in cpus.iter() {
                    if let Some(h) = holders.get_mut(c as usize) {
                        h.push(id);
                    }
                }
            }
        }
        if nr_ids == 0 {
            return None;
        }
        let mut starts = Vec::with_capacity(nr_cpus + 1);
        let mut ids = Vec::new();
        for h in holders {
            starts.push(ids.len() as u32);
            ids.extend(h);
        }
        starts.push(ids.len() as u32);
        Some(GroupMemo { stats: vec![None; nr_ids], starts, ids })
    }

    /// Drops the statistics of every group holding `cpu`.
    pub(crate) fn drop_cpu(&mut self, cpu: usize) {
        let (Some(&a), Some(&b)) = (self.starts.get(cpu), self.starts.get(cpu + 1)) else { return };
        for &id in &self.ids[a as usize..b as usize] {
            self.stats[id as usize] = None;
        }
    }

    /// The kept statistics of group `id`, if any.
    #[inline]
    pub(crate) fn get(&self, id: u32) -> Option<&GroupStats> {
        self.stats.get(id as usize)?.as_ref()
    }

    /// Keeps group `id`'s statistics.
    #[inline]
    pub(crate) fn put(&mut self, id: u32, s: &GroupStats) {
        if let Some(slot) = self.stats.get_mut(id as usize) {
            *slot = Some(s.clone());
        }
    }
}

impl Sim {
    /// Keeps group statistics between balance walks (see the `group_memo`
    /// module), or with `false` sums every CPU of every group a walk
    /// passes, whatever the machine's size, which otherwise decides it.
    /// Only the speed differs (tests, benches).
    pub fn keep_group_stats(&mut self, on: bool) {
        self.group_memo_pref = Some(on);
        self.set_group_memo(on);
    }

    fn set_group_memo(&mut self, on: bool) {
        self.group_memo = if on { GroupMemo::new(&self.domains, self.nr_cpus()).map(Box::new) } else { None };
        self.clear_balance_marks(None);
    }

    /// Clears the marks of the CPUs marked since the last walk, dropping
    /// their groups' statistics from `memo` when given.
    pub(crate) fn clear_balance_marks(&mut self, mut memo: Option<&mut GroupMemo>) {
        for c in self.balance_marked.drain(..) {
            self.rqs[c as usize].balance_marked = false;
            if let Some(m) = memo.as_deref_mut() {
                m.drop_cpu(c as usize);
            }
        }
    }

    /// Before a workload forks its tasks: keeps group statistics through
    /// the burst if they are not kept anyway. Returns whether it did.
    pub(crate) fn group_memo_burst_begin(&mut self) -> bool {
        let burst = self.group_memo.is_none() && self.group_memo_pref.is_none();
        if burst {
            self.set_group_memo(true);
        }
        burst
    }

    /// After the burst: stops keeping them if its start did.
    pub(crate) fn group_memo_burst_end(&mut self, burst: bool) {
        if burst {
            self.set_group_memo(false);
        }
    }
}
