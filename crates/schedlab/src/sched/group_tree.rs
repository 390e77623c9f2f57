//! A tree over one shared span's balancing groups, ordered as a domain
//! walk compares them: fork placement's `find_idlest_group()` and
//! balancing's `update_sd_pick_busiest()`. Both walks visit the groups in
//! the walking CPU's order (its own group first, then the span's order
//! from there, wrapping) and keep the first group strictly better than
//! the one they hold; a min-tree over (key, group index) finds the same
//! group in two range queries (the groups after the own one, then those
//! before it), with the span's totals kept beside it.

use crate::sched::balance::{GroupStats, GroupType};

/// Spans of fewer groups are walked: the tree's queries and upkeep cost
/// more than a walk of a few groups.
pub(crate) const TREE_MIN_GROUPS: usize = 16;

/// Which walk a tree answers for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Walk {
    /// find_idlest_group(): fork placement.
    Idlest = 0,
    /// update_sd_pick_busiest(): load balancing.
    Busiest = 1,
}

/// A group's rank in a walk: smaller is picked first; equal keys are not
/// better, so the walk keeps the first of them.
pub(crate) type GroupKey = (u8, u64, u64);

/// The key of a group with statistics `s` in a domain of `pct`
/// (imbalance_pct), or None when the walk passes the group over.
///
/// - Idlest: the least busy type; with spare capacity, more idle CPUs,
///   then fewer tasks; otherwise the lesser average load.
/// - Busiest: only groups with fair tasks; the busiest type; with spare
///   capacity, fewer idle CPUs, then more tasks; otherwise the greater
///   average load.
pub(crate) fn group_key(walk: Walk, s: &GroupStats, pct: u64) -> Option<GroupKey> {
    let ty = s.classify(pct);
    let rank = match ty {
        GroupType::HasSpare => 0,
        GroupType::FullyBusy => 1,
        GroupType::Overloaded => 2,
    };
    let spare = ty == GroupType::HasSpare;
    let (idle, nr) = (u64::from(s.idle_cpus), u64::from(s.nr_running));
    match walk {
        Walk::Idlest if spare => Some((rank, !idle, nr)),
        Walk::Idlest => Some((rank, s.avg_load, 0)),
        Walk::Busiest if s.h_nr_running == 0 => None,
        Walk::Busiest if spare => Some((2 - rank, idle, !nr)),
        Walk::Busiest => Some((2 - rank, !s.avg_load, 0)),
    }
}

/// A min-tree over a span's groups by (key, group index), with the span's
/// total load, capacity and utilisation.
#[derive(Clone, Debug)]
pub(crate) struct GroupTree {
    /// Groups in the span.
    pub(crate) len: usize,
    /// The domain's imbalance_pct the keys are classified with.
    pub(crate) pct: u64,
    /// `nodes[size + k]`: group k's entry (None: passed over, or
    /// padding); `nodes[i]`: the least of `nodes[2i]` and `nodes[2i + 1]`.
    nodes: Vec<Option<(GroupKey, u32)>>,
    /// Group k's load, capacity and utilisation, as summed into `total`.
    sums: Vec<[u64; 3]>,
    total: [u64; 3],
}

impl GroupTree {
    /// A tree of `len` groups, none entered yet.
    pub(crate) fn new(len: usize, pct: u64) -> Self {
        let size = len.max(1).next_power_of_two();
        GroupTree { len, pct, nodes: vec![None; 2 * size], sums: vec![[0; 3]; len], total: [0; 3] }
    }

    fn size(&self) -> usize {
        self.nodes.len() / 2
    }

    /// Enters group `k` with its key and statistics.
    pub(crate) fn set(&mut self, k: usize, key: Option<GroupKey>, s: &GroupStats) {
        let new = [s.load, s.capacity, s.util];
        let old = std::mem::replace(&mut self.sums[k], new);
        for ((t, o), n) in self.total.iter_mut().zip(old).zip(new) {
            *t = *t - o + n;
        }
        let mut i = self.size() + k;
        let entry = key.map(|key| (key, k as u32));
        if self.nodes[i] == entry {
            return;
        }
        self.nodes[i] = entry;
        while i > 1 {
            i /= 2;
            let least = match (self.nodes[2 * i], self.nodes[2 * i + 1]) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            // The nodes above depend on this one only.
            if self.nodes[i] == least {
                break;
            }
            self.nodes[i] = least;
        }
    }

    /// The span's total load, capacity and utilisation.
    pub(crate) fn totals(&self) -> [u64; 3] {
        self.total
    }

    /// The group a walk from `local + 1` on, wrapping, and keeping the
    /// first of equal ones, picks (never `local` itself).
    pub(crate) fn first_except(&self, local: usize) -> Option<usize> {
        let pick = match (self.least(local + 1, self.len), self.least(0, local)) {
            (Some(a), Some(b)) => Some(if b.0 < a.0 { b } else { a }),
            (a, b) => a.or(b),
        };
        pick.map(|(_, k)| k as usize)
    }

    /// The least entry of groups `lo..hi`.
    fn least(&self, lo: usize, hi: usize) -> Option<(GroupKey, u32)> {
        let (mut l, mut r) = (lo + self.size(), hi + self.size());
        let mut best: Option<(GroupKey, u32)> = None;
        let mut take = |e: Option<(GroupKey, u32)>| {
            if let Some(e) = e {
                if best.is_none_or(|b| e < b) {
                    best = Some(e);
                }
            }
        };
        while l < r {
            if l & 1 == 1 {
                take(self.nodes[l]);
                l += 1;
            }
            if r & 1 == 1 {
                r -= 1;
                take(self.nodes[r]);
            }
            l /= 2;
            r /= 2;
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(load: u64, nr: u32) -> GroupStats {
        GroupStats { load, capacity: 1024, util: load / 2, nr_running: nr, h_nr_running: nr, weight: 1, ..GroupStats::default() }
    }

    proptest::proptest! {
        /// After any sequence of updates, a range's least entry is its
        /// least key and, among equal keys, its first group; the pick
        /// but the own group is what a walk in the rotated order keeping
        /// the first strictly better group finds; the totals are the sums.
        #[test]
        fn the_tree_finds_what_a_walk_finds(
            len in 1usize..40,
            sets in proptest::collection::vec((0usize..40, proptest::option::of((0u8..3, 0u64..4, 0u64..4)), 0u64..5000), 1..120),
            local in 0usize..40,
        ) {
            let mut t = GroupTree::new(len, 117);
            let mut plain: Vec<(Option<GroupKey>, u64)> = vec![(None, 0); len];
            for &(k, key, load) in &sets {
                let k = k % len;
                plain[k] = (key, load);
                t.set(k, key, &stats(load, 1));
            }
            for lo in 0..=len {
                for hi in lo..=len {
                    let naive = (lo..hi).filter_map(|k| plain[k].0.map(|key| (key, k as u32))).min();
                    proptest::prop_assert_eq!(t.least(lo, hi), naive);
                }
            }
            let local = local % len;
            let mut walk: Option<(GroupKey, usize)> = None;
            for k in (local + 1..len).chain(0..local) {
                if let Some(key) = plain[k].0 {
                    if walk.is_none_or(|(w, _)| key < w) {
                        walk = Some((key, k));
                    }
                }
            }
            proptest::prop_assert_eq!(t.first_except(local), walk.map(|w| w.1));
            let load: u64 = plain.iter().map(|p| p.1).sum();
            proptest::prop_assert_eq!(t.totals(), [load, 1024 * sets.iter().map(|s| s.0 % len).collect::<std::collections::BTreeSet<_>>().len() as u64, plain.iter().map(|p| p.1 / 2).sum::<u64>()]);
        }
    }

    #[test]
    fn the_busiest_walk_passes_over_groups_without_fair_tasks() {
        let idle = GroupStats { capacity: 1024, weight: 1, idle_cpus: 1, ..GroupStats::default() };
        assert_eq!(group_key(Walk::Busiest, &idle, 117), None);
        assert!(group_key(Walk::Idlest, &idle, 117).is_some());
        // Overloaded ranks first for the busiest walk, last for the idlest.
        let over = GroupStats { capacity: 1024, weight: 1, nr_running: 3, h_nr_running: 3, util: 1024, runnable: 3072, avg_load: 900, ..GroupStats::default() };
        assert!(group_key(Walk::Busiest, &over, 117) < group_key(Walk::Busiest, &stats(10, 1), 117));
        assert!(group_key(Walk::Idlest, &over, 117) > group_key(Walk::Idlest, &stats(10, 1), 117));
    }
}
