//! Group statistics kept through a burst of forks.
//!
//! A workload starts all its tasks in one instant, and each fork walks the
//! sched domains from the widest down (`sched_balance_find_dst_cpu()`),
//! summing every CPU's load, utilisation and runnable counts into the
//! statistics of every group it passes. On a 4,096-CPU machine that is
//! 4,096 runqueues read per fork, although a fork changes one or two of
//! them: the CPU the task lands on and the one that forked it.
//!
//! While a burst runs, the statistics of each group (a set of CPUs shared
//! by the domains of every CPU it spans, numbered by
//! [`Group::id`](crate::sched::topology::Group)) are kept after they are
//! first summed, and dropped when one of the group's CPUs may have changed:
//! after each fork, the groups of the forking CPU and of the new task's
//! CPU; all of them when a task migrated (a balance pass moved work between
//! other CPUs). The walk then sums only what changed, and places every task
//! where the full walk would. Debug builds check every kept statistic
//! against a fresh sum.

use crate::engine::Cpu;
use crate::sched::balance::GroupStats;
use crate::sched::sim::Sim;

/// The statistics of the shared groups, by group id, during a burst.
#[derive(Debug, Default)]
pub(crate) struct GroupMemo {
    /// A group's statistics, or None to be summed on the next walk.
    stats: Vec<Option<GroupStats>>,
    /// `ids[starts[c]..starts[c + 1]]`: the groups holding CPU c.
    starts: Vec<u32>,
    ids: Vec<u32>,
    /// The simulator's migration count when the memo was last brought up
    /// to date.
    migrations: u64,
    /// Whether a burst is under way (the memo is kept between bursts for
    /// its tables).
    active: bool,
}

impl GroupMemo {
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

    /// Whether a burst is under way.
    #[inline]
    pub(crate) fn active(&self) -> bool {
        self.active
    }
}

impl Sim {
    /// Starts a burst of forks: group statistics are kept from here until
    /// [`Sim::group_memo_end`]. Under sched_ext the fair class places no
    /// task, and a BPF scheduler may move any CPU's queue in a callback,
    /// so no burst starts then.
    pub(crate) fn group_memo_begin(&mut self) {
        if self.scx.enabled() || self.group_memo_off() {
            return;
        }
        let mut memo = self.group_memo.take().unwrap_or_else(|| Box::new(self.group_memo_tables()));
        memo.stats.iter_mut().for_each(|s| *s = None);
        memo.migrations = self.migrations;
        memo.active = true;
        self.group_memo = Some(memo);
    }

    /// After a fork: drops the statistics of every group holding one of
    /// `cpus`, or all of them if a task migrated since the last call.
    pub(crate) fn group_memo_touch(&mut self, cpus: [Cpu; 2]) {
        let migrations = self.migrations;
        let Some(memo) = self.group_memo.as_deref_mut().filter(|m| m.active) else { return };
        if memo.migrations != migrations {
            memo.migrations = migrations;
            memo.stats.iter_mut().for_each(|s| *s = None);
            return;
        }
        for c in cpus {
            let c = c as usize;
            let (Some(&a), Some(&b)) = (memo.starts.get(c), memo.starts.get(c + 1)) else { continue };
            for &id in &memo.ids[a as usize..b as usize] {
                memo.stats[id as usize] = None;
            }
        }
    }

    /// Ends the burst.
    pub(crate) fn group_memo_end(&mut self) {
        if let Some(memo) = self.group_memo.as_deref_mut() {
            memo.active = false;
        }
    }

    /// The tables of a memo for this machine's domains: how many shared
    /// groups, and the groups holding each CPU.
    fn group_memo_tables(&self) -> GroupMemo {
        let n = self.nr_cpus();
        let mut seen = std::collections::BTreeSet::new();
        let mut holders: Vec<Vec<u32>> = vec![Vec::new(); n];
        let mut nr_ids = 0;
        for sd in self.domains.iter().flatten() {
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
        let mut starts = Vec::with_capacity(n + 1);
        let mut ids = Vec::new();
        for h in holders {
            starts.push(ids.len() as u32);
            ids.extend(h);
        }
        starts.push(ids.len() as u32);
        GroupMemo { stats: vec![None; nr_ids], starts, ids, migrations: 0, active: false }
    }
}
