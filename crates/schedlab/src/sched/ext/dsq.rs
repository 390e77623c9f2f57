//! Dispatch queues (`struct scx_dispatch_q`): FIFO or vtime-ordered lists of
//! tasks. One ordered list serves both orders: a FIFO DSQ keys tasks by an
//! insertion counter (head inserts count down, tail inserts count up), a
//! vtime DSQ by `dsq_vtime`; the DSQ's sequence number breaks ties and tells
//! an iterator which tasks were queued before it started.

use std::collections::BTreeMap;

use crate::engine::{Cpu, TaskId};
use crate::engine::time::Ns;

/// Where a DSQ lives; `Dsq::index` in `ScxSched::dsqs`.
pub type DsqIdx = u32;

/// What kind of DSQ this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DsqKind {
    /// A CPU's local DSQ (SCX_DSQ_LOCAL, `rq->scx.local_dsq`): what the CPU runs next.
    Local(Cpu),
    /// SCX_DSQ_GLOBAL, one per NUMA node.
    Global(u32),
    /// The per-CPU bypass DSQ (6.19+).
    Bypass(Cpu),
    /// A DSQ the scheduler created with scx_bpf_create_dsq().
    User,
}

/// Ordering a DSQ has been used with; mixing is an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DsqOrder {
    /// Empty: either order may be used next.
    Unset,
    /// FIFO inserts (scx_bpf_dsq_insert()).
    Fifo,
    /// Priority-queue inserts by vtime (scx_bpf_dsq_insert_vtime()).
    Vtime,
}

/// A position in a DSQ: (order key, sequence number).
pub type DsqKey = (u64, u64);

const FIFO_MID: u64 = 1 << 63;

/// A DSQ's tasks in key order. Most DSQs hold a handful of tasks (a local
/// DSQ 0-2), where a sorted vector is cheaper than a B-tree, which
/// allocates its root when the first task arrives and frees it when the
/// last one leaves; a DSQ that grows past [`DsqList::SMALL_MAX`] tasks
/// (a shared FIFO or vtime queue of thousands) moves to a B-tree until it
/// empties again.
#[derive(Clone, Debug)]
pub enum DsqList {
    /// Up to `SMALL_MAX` entries, sorted by key.
    Small(Vec<(DsqKey, TaskId)>),
    /// More.
    Big(BTreeMap<DsqKey, TaskId>),
}

impl Default for DsqList {
    fn default() -> Self {
        DsqList::Small(Vec::new())
    }
}

impl DsqList {
    /// The longest list kept as a sorted vector.
    pub const SMALL_MAX: usize = 32;

    /// Entries queued.
    #[inline]
    pub fn len(&self) -> usize {
        match self {
            DsqList::Small(v) => v.len(),
            DsqList::Big(m) => m.len(),
        }
    }

    /// Whether nothing is queued.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds an entry (keys are unique: they carry the DSQ's sequence number).
    pub fn insert(&mut self, key: DsqKey, p: TaskId) {
        match self {
            DsqList::Small(v) if v.len() < Self::SMALL_MAX => {
                let at = v.partition_point(|e| e.0 < key);
                debug_assert!(v.get(at).is_none_or(|e| e.0 != key), "DSQ key {key:?} inserted twice");
                v.insert(at, (key, p));
            }
            DsqList::Small(v) => {
                let mut m: BTreeMap<DsqKey, TaskId> = v.drain(..).collect();
                m.insert(key, p);
                *self = DsqList::Big(m);
            }
            DsqList::Big(m) => {
                m.insert(key, p);
            }
        }
    }

    /// Removes the entry at `key`, returning its task.
    pub fn remove(&mut self, key: &DsqKey) -> Option<TaskId> {
        match self {
            DsqList::Small(v) => {
                let at = v.binary_search_by(|e| e.0.cmp(key)).ok()?;
                Some(v.remove(at).1)
            }
            DsqList::Big(m) => {
                let p = m.remove(key);
                if m.is_empty() {
                    *self = DsqList::Small(Vec::with_capacity(Self::SMALL_MAX));
                }
                p
            }
        }
    }

    /// The task at `key`.
    pub fn get(&self, key: &DsqKey) -> Option<&TaskId> {
        match self {
            DsqList::Small(v) => v.binary_search_by(|e| e.0.cmp(key)).ok().map(|at| &v[at].1),
            DsqList::Big(m) => m.get(key),
        }
    }

    /// The first entry.
    pub fn first(&self) -> Option<(DsqKey, TaskId)> {
        match self {
            DsqList::Small(v) => v.first().copied(),
            DsqList::Big(m) => m.iter().next().map(|(&k, &p)| (k, p)),
        }
    }

    /// Every entry in key order.
    pub fn iter(&self) -> Box<dyn Iterator<Item = (DsqKey, TaskId)> + '_> {
        match self {
            DsqList::Small(v) => Box::new(v.iter().copied()),
            DsqList::Big(m) => Box::new(m.iter().map(|(&k, &p)| (k, p))),
        }
    }

    /// Every task in key order.
    pub fn values(&self) -> impl Iterator<Item = TaskId> + '_ {
        self.iter().map(|(_, p)| p)
    }

    /// The first entry after `key` (before it when `rev`) whose sequence
    /// number is below `max_seq`.
    fn after(&self, key: Option<DsqKey>, rev: bool, max_seq: u64) -> Option<(DsqKey, TaskId)> {
        use std::ops::Bound::{Excluded, Unbounded};
        let older = |e: &(DsqKey, TaskId)| e.0 .1 < max_seq;
        match self {
            DsqList::Small(v) if rev => {
                let end = key.map_or(v.len(), |k| v.partition_point(|e| e.0 < k));
                v[..end].iter().rev().copied().find(older)
            }
            DsqList::Small(v) => {
                let start = key.map_or(0, |k| v.partition_point(|e| e.0 <= k));
                v[start..].iter().copied().find(older)
            }
            DsqList::Big(m) if rev => {
                let hi = key.map_or(Unbounded, Excluded);
                m.range((Unbounded, hi)).rev().map(|(&k, &p)| (k, p)).find(older)
            }
            DsqList::Big(m) => {
                let lo = key.map_or(Unbounded, Excluded);
                m.range((lo, Unbounded)).map(|(&k, &p)| (k, p)).find(older)
            }
        }
    }
}

/// A dispatch queue (`struct scx_dispatch_q`).
#[derive(Clone, Debug)]
pub struct Dsq {
    /// The DSQ id schedulers name it by (SCX_DSQ_LOCAL_ON | cpu, SCX_DSQ_GLOBAL, or a user id).
    pub id: u64,
    /// Which kind it is.
    pub kind: DsqKind,
    /// The NUMA node it belongs to.
    pub node: u32,
    /// The queued tasks in order: FIFO keys or (vtime, seq).
    pub list: DsqList,
    /// The ordering in use.
    pub order: DsqOrder,
    /// Incremented on every insert (dsq->seq).
    pub seq: u64,
    head_ctr: u64,
    tail_ctr: u64,
    /// The simulated time the DSQ's spinlock is free again.
    pub lock_free_at: Ns,
    /// Time CPUs spent waiting for and holding this DSQ's lock.
    pub lock_wait_ns: Ns,
    /// Time the lock was held, ns.
    pub lock_hold_ns: Ns,
    /// scx_bpf_destroy_dsq() was called; inserts are refused.
    pub destroyed: bool,
}

impl Dsq {
    /// An empty DSQ.
    pub fn new(id: u64, kind: DsqKind, node: u32) -> Self {
        Dsq {
            id,
            kind,
            node,
            list: DsqList::default(),
            order: DsqOrder::Unset,
            seq: 0,
            head_ctr: FIFO_MID,
            tail_ctr: FIFO_MID,
            lock_free_at: 0,
            lock_wait_ns: 0,
            lock_hold_ns: 0,
            destroyed: false,
        }
    }

    /// Queued tasks (`dsq->nr`).
    #[inline]
    pub fn nr(&self) -> usize {
        self.list.len()
    }

    /// A built-in DSQ (local, global, bypass), not a user one.
    pub fn is_builtin(&self) -> bool {
        self.kind != DsqKind::User
    }

    /// Inserts `p` at the tail (or head) in FIFO order; returns its key.
    pub fn insert_fifo(&mut self, p: TaskId, head: bool) -> DsqKey {
        self.seq += 1;
        let k = if head {
            self.head_ctr -= 1;
            self.head_ctr
        } else {
            self.tail_ctr += 1;
            self.tail_ctr
        };
        let key = (k, self.seq);
        self.list.insert(key, p);
        key
    }

    /// Inserts `p` ordered by `vtime`; ties keep insertion order.
    pub fn insert_vtime(&mut self, p: TaskId, vtime: u64) -> DsqKey {
        self.seq += 1;
        let key = (vtime, self.seq);
        self.list.insert(key, p);
        key
    }

    /// Removes the entry at `key`, returning its task; an emptied DSQ forgets its ordering.
    pub fn remove(&mut self, key: DsqKey) -> Option<TaskId> {
        let p = self.list.remove(&key);
        if self.list.is_empty() {
            self.order = DsqOrder::Unset;
            if self.kind != DsqKind::User {
                // Built-in DSQs are FIFO only; reset the counters to keep keys small.
                self.head_ctr = FIFO_MID;
                self.tail_ctr = FIFO_MID;
            }
        }
        p
    }

    /// The first entry: the head of a FIFO, the lowest vtime of a priority queue.
    pub fn first(&self) -> Option<(DsqKey, TaskId)> {
        self.list.first()
    }

    /// The entry after `key` (or before it when `rev`), skipping entries
    /// inserted at or after `max_seq`.
    pub fn next_after(&self, key: Option<DsqKey>, rev: bool, max_seq: u64) -> Option<(DsqKey, TaskId)> {
        self.list.after(key, rev, max_seq)
    }

    /// Takes the DSQ's lock at simulated time `at` for `hold` ns: returns the
    /// time spent waiting. Callers serialise in event order, so this is a
    /// FIFO spinlock in simulated time.
    pub fn lock(&mut self, at: Ns, hold: Ns) -> Ns {
        let start = at.max(self.lock_free_at);
        let wait = start - at;
        self.lock_free_at = start + hold;
        self.lock_wait_ns += wait;
        self.lock_hold_ns += hold;
        wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_head_and_tail() {
        let mut d = Dsq::new(1, DsqKind::User, 0);
        d.insert_fifo(1, false);
        d.insert_fifo(2, false);
        d.insert_fifo(3, true);
        let order: Vec<_> = d.list.values().collect();
        assert_eq!(order, vec![3, 1, 2]);
    }

    #[test]
    fn iterator_sees_only_older_tasks() {
        let mut d = Dsq::new(1, DsqKind::User, 0);
        d.insert_vtime(1, 50);
        d.insert_vtime(2, 10);
        let max_seq = d.seq + 1;
        d.insert_vtime(3, 5);
        let mut seen = vec![];
        let mut cur = None;
        while let Some((k, p)) = d.next_after(cur, false, max_seq) {
            seen.push(p);
            cur = Some(k);
        }
        assert_eq!(seen, vec![2, 1]);
        let mut rev = vec![];
        let mut cur = None;
        while let Some((k, p)) = d.next_after(cur, true, u64::MAX) {
            rev.push(p);
            cur = Some(k);
        }
        assert_eq!(rev, vec![1, 2, 3]);
    }

    proptest::proptest! {
        /// DsqList (sorted vector, then B-tree past SMALL_MAX) answers
        /// every query as a plain B-tree does, across both forms.
        #[test]
        fn list_agrees_with_a_btree(ops in proptest::collection::vec((0u8..4, 0u64..80, 0u64..90, proptest::bool::ANY), 1..300)) {
            let mut list = DsqList::default();
            let mut reference: BTreeMap<DsqKey, TaskId> = BTreeMap::new();
            let mut seq = 0u64;
            for (op, a, b, rev) in ops {
                match op {
                    0 | 1 => {
                        seq += 1;
                        list.insert((a, seq), seq as TaskId);
                        reference.insert((a, seq), seq as TaskId);
                    }
                    2 => {
                        let key = reference.keys().nth(a as usize % reference.len().max(1)).copied().unwrap_or((a, b));
                        proptest::prop_assert_eq!(list.remove(&key), reference.remove(&key));
                    }
                    _ => {
                        let key = reference.keys().nth(a as usize % reference.len().max(1)).copied();
                        let cut = if b == 0 { None } else { key };
                        use std::ops::Bound::{Excluded, Unbounded};
                        let want = if rev {
                            reference.range((Unbounded, cut.map_or(Unbounded, Excluded))).rev().map(|(&k, &p)| (k, p)).find(|e| e.0 .1 < b)
                        } else {
                            reference.range((cut.map_or(Unbounded, Excluded), Unbounded)).map(|(&k, &p)| (k, p)).find(|e| e.0 .1 < b)
                        };
                        proptest::prop_assert_eq!(list.after(cut, rev, b), want);
                    }
                }
                proptest::prop_assert_eq!(list.len(), reference.len());
                proptest::prop_assert_eq!(list.first(), reference.iter().next().map(|(&k, &p)| (k, p)));
                proptest::prop_assert!(list.iter().eq(reference.iter().map(|(&k, &p)| (k, p))));
            }
        }
    }

    #[test]
    fn lock_serialises_in_simulated_time() {
        let mut d = Dsq::new(1, DsqKind::User, 0);
        assert_eq!(d.lock(100, 50), 0);
        assert_eq!(d.lock(120, 50), 30);
        assert_eq!(d.lock(300, 10), 0);
        assert_eq!(d.lock_wait_ns, 30);
    }
}
