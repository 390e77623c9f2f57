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
//! [`Group::id`](crate::sched::topology::Group)) are kept once summed,
//! with each CPU's share of them ([`CpuShare`]), and changed by the
//! difference when a CPU's share changes. Every function that writes what
//! the sums read marks the CPU
//! ([`Sim::balance_touch`](crate::sched::sim::Sim::balance_touch)):
//! `rq->curr` in [`Sim::set_curr`]; `rq->nr_running` in activate, dequeue
//! and throttling; the root fair runqueue's averages in `update_load_avg`
//! and where a task's average moves between runqueues (migration, a
//! cgroup move); `h_nr_runnable` in the enqueue and dequeue walks,
//! `add_h_nr` and the throttling walk. A walk first brings the shares of
//! the CPUs marked since the last one up to date (a marked CPU's
//! runqueue is still in the cache; re-summing its groups read every
//! other CPU's too). Debug builds check every kept statistic against a
//! fresh sum, so a writer that does not mark fails the tests.
//!
//! The marks cost a few instructions each, several per event, so the memo
//! is kept throughout only on machines of
//! [`GROUP_MEMO_MIN_CPUS`](crate::sched::sim::GROUP_MEMO_MIN_CPUS) CPUs or
//! more; on smaller ones, only while a workload starts its tasks, where
//! every fork walks the machine and only the forking CPU and the new
//! task's change between two forks.
//!
//! Both walks also keep, per shared span of
//! [`TREE_MIN_GROUPS`](crate::sched::group_tree::TREE_MIN_GROUPS) groups
//! or more, a tree over its groups ordered
//! as the walk compares them ([`GroupTree`]): the idlest (fork) or
//! busiest (balance) group other than the walking CPU's own is then found
//! in a few dozen steps instead of a walk of every group (512 groups at
//! the top of a 4,096-CPU machine). A group whose statistics change is
//! marked in a bitmap per walk and read again before that walk's tree is
//! next used.

use crate::engine::Cpu;
use crate::sched::balance::{CpuShare, GroupStats};
use crate::sched::group_tree::{group_key, GroupTree, Walk};
use crate::sched::sim::Sim;
use crate::sched::topology::SchedDomain;

/// The statistics of the shared groups, by group id.
#[derive(Clone, Debug)]
pub(crate) struct GroupMemo {
    /// A group's statistics, or None until a walk first sums them.
    stats: Vec<Option<GroupStats>>,
    /// `ids[starts[c]..starts[c + 1]]`: the groups holding CPU c.
    starts: Vec<u32>,
    ids: Vec<u32>,
    /// `shares[c]`: what CPU c added to its groups when they were last
    /// brought up to date (empty until the first walk fills it).
    shares: Vec<CpuShare>,
    /// The walks' trees, built on first use.
    trees: Vec<GroupTree>,
    /// `tree_at[walk][id]`: the walk's tree of the span whose first group
    /// is `id`, or NO_TREE.
    tree_at: [Vec<u32>; 2],
    /// Bit `id` of `changed[walk]`: group `id`'s statistics changed
    /// since the walk's tree last read them (a bit per group: changes come
    /// several times per event on a large machine, tree reads only at
    /// walks).
    changed: [Vec<u64>; 2],
}

/// What a walk of a span through its tree finds: the walking CPU's own
/// group's statistics, the group it picks among the others (index in the
/// span, statistics), and the span's total load, capacity and
/// utilisation.
pub(crate) type TreePick = (GroupStats, Option<(usize, GroupStats)>, [u64; 3]);

const NO_TREE: u32 = u32::MAX;

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
        let words = nr_ids.div_ceil(64);
        Some(GroupMemo {
            stats: vec![None; nr_ids],
            starts,
            ids,
            shares: Vec::new(),
            trees: Vec::new(),
            tree_at: [vec![NO_TREE; nr_ids], vec![NO_TREE; nr_ids]],
            changed: [vec![0; words], vec![0; words]],
        })
    }

    /// CPU `cpu`'s share is now `share`: the kept statistics of every
    /// group holding it change by the difference, and the trees re-read
    /// those groups.
    pub(crate) fn reshare(&mut self, cpu: usize, share: CpuShare) {
        let old = std::mem::replace(&mut self.shares[cpu], share);
        if old == share {
            return;
        }
        let (a, b) = (self.starts[cpu] as usize, self.starts[cpu + 1] as usize);
        // Until a tree is built the marks are not read (a tree's build
        // reads every group of its span).
        let trees = !self.trees.is_empty();
        for &id in &self.ids[a..b] {
            if let Some(s) = &mut self.stats[id as usize] {
                s.reshare(&old, &share);
            }
            if trees {
                for d in &mut self.changed {
                    d[id as usize / 64] |= 1 << (id % 64);
                }
            }
        }
    }

    /// The group `walk` picks among the `len` shared groups from id
    /// `first` in a domain of `pct`, other than group `local`, as a walk
    /// of them in the order `local + 1, .., len - 1, 0, .., local - 1`
    /// finds it (the first of equal ones); with `local`'s statistics and
    /// the span's totals. `sum(k)` sums group k's statistics. None when
    /// the span's tree was built for another `pct` (the caller walks).
    pub(crate) fn tree_pick(&mut self, walk: Walk, first: u32, len: usize, pct: u64, local: usize, sum: impl Fn(usize) -> GroupStats) -> Option<TreePick> {
        let w = walk as usize;
        let t = match self.tree_at[w].get(first as usize) {
            Some(&NO_TREE) => self.build_tree(walk, first, len, pct, &sum),
            Some(&t) => t as usize,
            None => return None,
        };
        if self.trees[t].pct != pct || self.trees[t].len != len {
            return None;
        }
        // Bring the groups changed since up to date.
        let (lo, hi) = (first as usize, first as usize + len);
        for i in lo / 64..hi.div_ceil(64) {
            let span = (i * 64).max(lo)..((i + 1) * 64).min(hi);
            if span.is_empty() {
                continue;
            }
            let mask = (!0u64 >> (64 - span.len())) << (span.start % 64);
            let mut bits = self.changed[w][i] & mask;
            self.changed[w][i] &= !mask;
            while bits != 0 {
                let id = i * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let k = id - lo;
                let s = self.stats[id].get_or_insert_with(|| sum(k));
                self.trees[t].set(k, group_key(walk, s, pct), s);
            }
        }
        let tree = &self.trees[t];
        let pick = tree.first_except(local);
        let stats = |k: usize| self.stats[lo + k].clone().expect("a tree's groups are summed");
        Some((stats(local), pick.map(|k| (k, stats(k))), tree.totals()))
    }

    /// Builds `walk`'s tree of the span at `first`, summing the groups
    /// the memo does not keep.
    fn build_tree(&mut self, walk: Walk, first: u32, len: usize, pct: u64, sum: &impl Fn(usize) -> GroupStats) -> usize {
        let w = walk as usize;
        let mut tree = GroupTree::new(len, pct);
        for k in 0..len {
            let id = first as usize + k;
            let s = self.stats[id].get_or_insert_with(|| sum(k));
            tree.set(k, group_key(walk, s, pct), s);
            // What changed before is in the tree now.
            self.changed[w][id / 64] &= !(1 << (id % 64));
        }
        let t = self.trees.len();
        self.tree_at[w][first as usize] = t as u32;
        self.trees.push(tree);
        t
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

    /// Clears the marks of the CPUs marked since the last walk, bringing
    /// the statistics kept in `memo` (when given) up to date with their
    /// shares. The first time, every CPU's share is taken.
    pub(crate) fn clear_balance_marks(&mut self, mut memo: Option<&mut GroupMemo>) {
        if let Some(m) = memo.as_deref_mut() {
            if m.shares.is_empty() {
                m.shares = (0..self.nr_cpus()).map(|c| self.cpu_share(c as Cpu)).collect();
            }
        }
        let mut marked = std::mem::take(&mut self.balance_marked);
        for &c in &marked {
            self.rqs[c as usize].balance_marked = false;
            if let Some(m) = memo.as_deref_mut() {
                m.reshare(c as usize, self.cpu_share(c));
            }
        }
        marked.clear();
        self.balance_marked = marked;
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

