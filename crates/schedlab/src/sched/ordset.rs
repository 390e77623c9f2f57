//! An ordered set for runqueue orderings (the fair timeline, the cfs_tasks
//! LRU, RT pushable tasks): the kernel's rbtrees, lists and plists. A
//! runqueue holds a handful of entries most of the time, where a sorted
//! vector is several times cheaper than a B-tree (a binary search and a
//! short move, no node allocation); a set that grows past
//! [`OrdSet::SMALL_MAX`] entries (say, a thousand tasks queued on one CPU)
//! moves to [`Blocks`], sorted vectors of at most that many entries in
//! order, and back once it shrinks to a quarter of that, so that a set
//! near the boundary does not convert on every change. [`Counts`] is the
//! multiset of a runqueue's slices.

/// A set of `T` in order.
#[derive(Clone, Debug)]
pub enum OrdSet<T> {
    /// Up to `SMALL_MAX` entries, sorted.
    Small(Vec<T>),
    /// More.
    Big(Blocks<T>),
}

impl<T> Default for OrdSet<T> {
    fn default() -> Self {
        OrdSet::Small(Vec::new())
    }
}

impl<T: Ord + Copy> OrdSet<T> {
    /// The largest set kept as a sorted vector.
    pub const SMALL_MAX: usize = 64;

    /// Entries held.
    #[inline]
    pub fn len(&self) -> usize {
        match self {
            OrdSet::Small(v) => v.len(),
            OrdSet::Big(s) => s.len,
        }
    }

    /// Whether the set is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds `x`; false if it was there already. Always inlined: its
    /// callers are few, and the common case (a sorted vector with room)
    /// is a search and a move.
    #[inline(always)]
    pub fn insert(&mut self, x: T) -> bool {
        match self {
            OrdSet::Small(v) => {
                // An entry above all others (a fresh LRU stamp, a late
                // deadline) goes at the end without a search.
                if v.len() < Self::SMALL_MAX && v.last().is_none_or(|last| *last < x) {
                    v.push(x);
                    return true;
                }
                let Err(at) = v.binary_search(&x) else { return false };
                if v.len() < Self::SMALL_MAX {
                    v.insert(at, x);
                } else {
                    self.grow(x);
                }
                true
            }
            OrdSet::Big(s) => s.insert(x),
        }
    }

    /// A full sorted vector becomes blocks, with `x` (not held) added;
    /// out of line, so that `insert` stays small enough to inline.
    #[cold]
    #[inline(never)]
    fn grow(&mut self, x: T) {
        let OrdSet::Small(v) = self else { unreachable!("grow on a big set") };
        let mut s = Blocks { blocks: vec![std::mem::take(v)], len: Self::SMALL_MAX };
        s.insert(x);
        *self = OrdSet::Big(s);
    }

    /// Removes `x`; false if it was not there.
    #[inline]
    pub fn remove(&mut self, x: &T) -> bool {
        match self {
            OrdSet::Small(v) => {
                let Some(at) = position(v, x) else { return false };
                v.remove(at);
                true
            }
            OrdSet::Big(_) => self.remove_big(x),
        }
    }

    /// `remove` from the blocks, out of line so that the sorted vector's
    /// remove, the common one, is small enough to inline.
    #[inline(never)]
    fn remove_big(&mut self, x: &T) -> bool {
        let OrdSet::Big(s) = self else { unreachable!("remove_big on a small set") };
        let was = s.remove(x);
        if s.len <= Self::SMALL_MAX / 4 {
            let mut v = Vec::with_capacity(Self::SMALL_MAX);
            v.extend(s.blocks.iter().flatten().copied());
            *self = OrdSet::Small(v);
        }
        was
    }

    /// Replaces `old` by `new`, as `remove(old)` then `insert(new)`. When
    /// `new` is above every entry (an LRU entry moving to the back), the
    /// entries after `old` move down one place and `new` takes the last:
    /// one move instead of two (a copy, not a rotation, which moves the
    /// entry it drops as well: three copies).
    #[inline]
    pub fn replace(&mut self, old: &T, new: T) {
        if let OrdSet::Small(v) = self {
            if v.last().is_some_and(|last| *last < new) {
                if let Ok(at) = v.binary_search(old) {
                    v.copy_within(at + 1.., at);
                    let last = v.len() - 1;
                    v[last] = new;
                    return;
                }
            }
        }
        self.replace_apart(old, new);
    }

    /// `replace` as a remove and an insert, out of line: with both
    /// inlined, `replace` would be too big to inline in turn.
    #[inline(never)]
    fn replace_apart(&mut self, old: &T, new: T) {
        self.remove(old);
        self.insert(new);
    }

    /// Whether `x` is in the set.
    pub fn contains(&self, x: &T) -> bool {
        match self {
            OrdSet::Small(v) => v.binary_search(x).is_ok(),
            OrdSet::Big(s) => s.contains(x),
        }
    }

    /// The least entry.
    #[inline]
    pub fn first(&self) -> Option<&T> {
        match self {
            OrdSet::Small(v) => v.first(),
            OrdSet::Big(s) => s.blocks.first().and_then(|b| b.first()),
        }
    }

    /// The least entry above `x` (held or not): a walk in order that
    /// changes the set between steps resumes from the last entry it saw.
    /// Such a walk stays near the front (the balancer reads a few of the
    /// coldest tasks), so the first few entries are read before a search.
    pub fn next_above(&self, x: &T) -> Option<&T> {
        let head = match self {
            OrdSet::Small(v) => v,
            OrdSet::Big(s) => s.blocks.first().map_or(&[][..], |b| b),
        };
        if let Some(e) = head.iter().take(8).find(|e| *e > x) {
            return Some(e);
        }
        match self {
            OrdSet::Small(v) => v.get(v.partition_point(|e| e <= x)),
            OrdSet::Big(s) => s.next_above(x),
        }
    }

    /// Every entry in order.
    #[inline]
    pub fn iter(&self) -> Iter<'_, T> {
        match self {
            OrdSet::Small(v) => Iter::Small(v.iter()),
            OrdSet::Big(s) => Iter::Big(s.blocks.iter().flatten()),
        }
    }
}

impl<'a, T: Ord + Copy> IntoIterator for &'a OrdSet<T> {
    type Item = &'a T;
    type IntoIter = Iter<'a, T>;

    fn into_iter(self) -> Iter<'a, T> {
        self.iter()
    }
}

/// The entries of an [`OrdSet`] in order.
#[derive(Clone, Debug)]
pub enum Iter<'a, T> {
    /// Over the sorted vector.
    Small(std::slice::Iter<'a, T>),
    /// Over the blocks.
    Big(std::iter::Flatten<std::slice::Iter<'a, Vec<T>>>),
}

impl<'a, T> Iterator for Iter<'a, T> {
    type Item = &'a T;

    #[inline]
    fn next(&mut self) -> Option<&'a T> {
        match self {
            Iter::Small(i) => i.next(),
            Iter::Big(i) => i.next(),
        }
    }
}

impl<T> DoubleEndedIterator for Iter<'_, T> {
    #[inline]
    fn next_back(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Small(i) => i.next_back(),
            Iter::Big(i) => i.next_back(),
        }
    }
}

/// Where `x` is in the sorted `v`, if there. The least entry (a
/// timeline's head, just picked) is found without a search.
#[inline]
fn position<T: Ord>(v: &[T], x: &T) -> Option<usize> {
    match v.first() {
        Some(first) if first == x => Some(0),
        _ => v.binary_search(x).ok(),
    }
}

/// A large [`OrdSet`]: sorted vectors of 1 to [`OrdSet::SMALL_MAX`]
/// entries, each block's entries below the next block's. An insert or a
/// remove finds its block by a binary search over the blocks' last
/// entries and moves at most a block's entries; an entry above all
/// others (a fresh LRU stamp, the deadlines of a burst of forks) is
/// pushed onto the last block, or starts a new one, without a search.
/// Unlike a B-tree's nodes, the blocks are allocated only when one
/// splits, and a scan in order reads them as arrays.
#[derive(Clone, Debug)]
pub struct Blocks<T> {
    blocks: Vec<Vec<T>>,
    len: usize,
}

impl<T: Ord + Copy> Blocks<T> {
    const MAX: usize = OrdSet::<T>::SMALL_MAX;

    /// The block that holds `x` if any does: the first whose last entry
    /// is not below `x` (`blocks.len()` when `x` is above all).
    ///
    /// An entry of the first block (a timeline's head, just picked; the
    /// LRU's coldest, pulled by the balancer) is found without a search.
    #[inline]
    fn block_of(&self, x: &T) -> usize {
        if self.blocks.first().and_then(|b| b.last()).is_some_and(|last| last >= x) {
            return 0;
        }
        self.blocks.partition_point(|b| b.last().is_some_and(|last| last < x))
    }

    fn insert(&mut self, x: T) -> bool {
        // Above all (a burst of forks queued on one CPU, each after the
        // last): no search over the blocks, which are then many.
        let above_all = self.blocks.last().and_then(|b| b.last()).is_some_and(|last| *last < x);
        let at = if above_all { self.blocks.len() } else { self.block_of(&x) };
        if at == self.blocks.len() {
            match self.blocks.last_mut() {
                Some(b) if b.len() < Self::MAX => b.push(x),
                _ => {
                    let mut b = Vec::with_capacity(Self::MAX);
                    b.push(x);
                    self.blocks.push(b);
                }
            }
            self.len += 1;
            return true;
        }
        let b = &mut self.blocks[at];
        let Err(i) = b.binary_search(&x) else { return false };
        if b.len() < Self::MAX {
            b.insert(i, x);
        } else {
            // Full: split in halves, x into the half it belongs to.
            let half = Self::MAX / 2;
            let mut right = Vec::with_capacity(Self::MAX);
            right.extend_from_slice(&b[half..]);
            b.truncate(half);
            if i <= half {
                b.insert(i, x);
            } else {
                right.insert(i - half, x);
            }
            self.blocks.insert(at + 1, right);
        }
        self.len += 1;
        true
    }

    fn remove(&mut self, x: &T) -> bool {
        let at = self.block_of(x);
        let Some(b) = self.blocks.get_mut(at) else { return false };
        let Some(i) = position(b, x) else { return false };
        b.remove(i);
        let left = b.len();
        self.len -= 1;
        // A block that falls to a quarter joins the next one if they fit
        // in one, so that the blocks stay few for the entries held.
        if left == 0 {
            self.blocks.remove(at);
        } else if left <= Self::MAX / 4 && self.blocks.get(at + 1).is_some_and(|n| left + n.len() <= Self::MAX) {
            let next = self.blocks.remove(at + 1);
            self.blocks[at].extend_from_slice(&next);
        }
        true
    }

    fn contains(&self, x: &T) -> bool {
        self.blocks.get(self.block_of(x)).is_some_and(|b| b.binary_search(x).is_ok())
    }

    /// The least entry above `x`: in the first block whose last entry is.
    fn next_above(&self, x: &T) -> Option<&T> {
        let b = self.blocks.get(self.blocks.partition_point(|b| b.last().is_some_and(|last| last <= x)))?;
        b.get(b.partition_point(|e| e <= x))
    }
}

/// A multiset of few distinct values, as (value, count) pairs sorted by
/// value: the slices of a runqueue's entities, where nearly every entity
/// has the default slice and a few have their own (sched_attr).
#[derive(Clone, Debug, Default)]
pub struct Counts<T>(Vec<(T, u32)>);

impl<T: Ord + Copy> Counts<T> {
    /// Adds one `x`.
    #[inline]
    pub fn add(&mut self, x: T) {
        match self.0.binary_search_by(|e| e.0.cmp(&x)) {
            Ok(at) => self.0[at].1 += 1,
            Err(at) => self.0.insert(at, (x, 1)),
        }
    }

    /// Takes one `x` away, if there is one.
    #[inline]
    pub fn take(&mut self, x: T) {
        if let Ok(at) = self.0.binary_search_by(|e| e.0.cmp(&x)) {
            self.0[at].1 -= 1;
            if self.0[at].1 == 0 {
                self.0.remove(at);
            }
        }
    }

    /// The least value held.
    #[inline]
    pub fn min(&self) -> Option<T> {
        self.0.first().map(|e| e.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    proptest::proptest! {
        /// Any sequence of inserts, removes and replaces leaves the set a
        /// B-tree set would hold, in the same order, across both
        /// representations. Replaces mostly move an entry to the back, as
        /// the LRU's do.
        #[test]
        fn agrees_with_a_btree_set(ops in proptest::collection::vec((0u8..5, 0u32..200, 0u32..40), 1..600)) {
            let mut set = OrdSet::default();
            let mut reference = BTreeSet::new();
            for (op, x, y) in ops {
                match op {
                    0 | 1 => proptest::prop_assert_eq!(set.insert(x), reference.insert(x)),
                    2 => proptest::prop_assert_eq!(set.remove(&x), reference.remove(&x)),
                    _ => {
                        let new = if op == 3 { reference.last().map_or(y, |&l| l + y) } else { y * 5 };
                        set.replace(&x, new);
                        reference.remove(&x);
                        reference.insert(new);
                    }
                }
                proptest::prop_assert_eq!(set.len(), reference.len());
                proptest::prop_assert_eq!(set.first(), reference.first());
                proptest::prop_assert!(set.contains(&x) == reference.contains(&x));
                proptest::prop_assert_eq!(set.next_above(&y), reference.range(y + 1..).next());
            }
            proptest::prop_assert!(set.iter().eq(reference.iter()));
            proptest::prop_assert!(set.iter().rev().eq(reference.iter().rev()));
        }
    }

    /// Thousands of entries in scattered order, then removed in another:
    /// many blocks split and join, and the set stays the B-tree's.
    #[test]
    fn many_blocks_agree_with_a_btree_set() {
        let mut set = OrdSet::default();
        let mut reference = BTreeSet::new();
        for k in 0..3000u32 {
            let x = k.wrapping_mul(2_654_435_761) % 5000;
            assert_eq!(set.insert(x), reference.insert(x));
        }
        assert!(set.iter().eq(reference.iter()));
        for k in 0..5000u32 {
            let x = k.wrapping_mul(40_503) % 5000;
            assert_eq!(set.remove(&x), reference.remove(&x), "{x}");
            if k % 97 == 0 {
                assert!(set.iter().eq(reference.iter()));
                assert_eq!(set.first(), reference.first());
            }
        }
        assert!(set.is_empty());
    }

    #[test]
    fn counts_hold_a_multiset() {
        let mut c = Counts::default();
        for x in [5u64, 3, 5, 9] {
            c.add(x);
        }
        assert_eq!(c.min(), Some(3));
        c.take(3);
        assert_eq!(c.min(), Some(5));
        c.take(5);
        assert_eq!(c.min(), Some(5));
        c.take(5);
        c.take(7);
        assert_eq!(c.min(), Some(9));
        c.take(9);
        assert_eq!(c.min(), None);
    }

    #[test]
    fn grows_into_blocks_and_shrinks_back() {
        let mut set = OrdSet::default();
        for x in 0..=OrdSet::<u32>::SMALL_MAX as u32 {
            set.insert(x);
        }
        assert!(matches!(set, OrdSet::Big(_)));
        for x in 0..=(OrdSet::<u32>::SMALL_MAX as u32 * 3 / 4) {
            set.remove(&x);
        }
        assert!(matches!(set, OrdSet::Small(_)));
        assert!(set.iter().copied().eq((OrdSet::<u32>::SMALL_MAX as u32 * 3 / 4 + 1)..=OrdSet::<u32>::SMALL_MAX as u32));
    }
}
