//! The engine's queue for events other than the per-CPU timers: a radix
//! heap over the u128 (time, seq) keys.
//!
//! Most of what it holds are task sleep timers, some tens of thousands
//! with 20,000-40,000 tasks. A binary heap's pop walks a path of
//! scattered entries to the bottom of a table of that size; a radix heap
//! instead files each entry in a bucket by the highest digit in which its
//! key differs from the last key popped (and that digit), and only ever
//! moves entries down (a pop re-files the one bucket that held the
//! minimum), in sequential passes over short vectors.
//!
//! It relies on the engine's keys being monotone: no key pushed is below
//! the last one popped from this queue. The engine clamps times to its
//! clock, which is the time of the last event popped from any source, and
//! draws every key's low half from a counter that only grows, so each new
//! key exceeds every key popped before it, this queue's included. A new
//! key may well be below this queue's current minimum, though, so the
//! minimum is found without moving the reference point: the reference is
//! the last key popped, never the minimum merely looked at.
//!
//! A queue of up to some thousands of entries (the sleep timers of a few
//! thousand tasks, and IPIs) is a binary heap
//! instead: there a pop, which re-files a bucket (several entries, some
//! 40 instructions each) and may scan the next, costs more than a walk
//! down the heap's levels, and a push of a key later than most, as the
//! engine's usually are, stops at once; the heap (128 KiB at most) stays
//! within the L2 cache. The queue turns radix when the heap would outgrow
//! [`SMALL_MAX`] entries, and back when it is empty. Keys are unique, so
//! either pops the same entry.

/// A min-queue of `(key, T)` pairs with unique keys, each pushed key
/// above the last key popped.
#[derive(Debug)]
pub(super) struct RadixQueue<T> {
    /// The entries whose key differs from `last` first in digit l
    /// (counting from the least significant), where it is d, are in
    /// bucket l * RADIX + d; every key in a bucket is below every key in
    /// the buckets after it.
    buckets: Vec<Vec<(u128, T)>>,
    /// Bit i of word i / 64 set: bucket i is not empty.
    nonempty: [u64; BUCKETS / 64],
    /// The last key popped (0 before any).
    last: u128,
    /// The least key held (u128::MAX when empty) and where it is, so that
    /// peeking, which the engine does before every event, is a field read.
    min: u128,
    min_bucket: usize,
    min_index: usize,
    /// Entries in the buckets.
    len: usize,
    /// While not `radix`: every entry, as a binary min-heap on the key
    /// (the buckets are empty).
    small: Vec<(u128, T)>,
    radix: bool,
}

/// The most entries held as a binary heap (see the module docs). The
/// unit tests use a few, so that their sequences cross into the buckets
/// and back.
const SMALL_MAX: usize = if cfg!(test) { 32 } else { 4096 };

/// Bits per digit. An entry moves to a lower bucket each time the one it
/// is in holds the minimum, and it moves about as often as there are
/// digits in the count of entries between it and the minimum: in base 2
/// that is as many moves as a binary heap has levels, in base 256 an
/// eighth of it, for 256 times as many buckets (4,096, whose empty
/// vectors cost nothing; a pop that empties the minimum's bucket also
/// scans a shorter one for the next minimum). Base 16 re-filed twice as
/// often: the run loop of 4,096 CPUs with 40,960 tasks took 2 % more
/// instructions.
const DIGIT: usize = 8;
const RADIX: usize = 1 << DIGIT;
const BUCKETS: usize = 128 / DIGIT * RADIX;

impl<T> Default for RadixQueue<T> {
    fn default() -> Self {
        RadixQueue {
            buckets: (0..BUCKETS).map(|_| Vec::new()).collect(),
            nonempty: [0; BUCKETS / 64],
            last: 0,
            min: u128::MAX,
            min_bucket: 0,
            min_index: 0,
            len: 0,
            small: Vec::new(),
            radix: false,
        }
    }
}

impl<T: Copy> RadixQueue<T> {
    /// How many entries are held.
    #[inline]
    pub(super) fn len(&self) -> usize {
        self.len + self.small.len()
    }

    /// The bucket for `key` relative to `last` (`key` above it).
    #[inline]
    fn bucket(key: u128, last: u128) -> usize {
        debug_assert!(key > last, "key {key:#x} not above the last popped {last:#x}");
        let level = (127 - (key ^ last).leading_zeros()) as usize / DIGIT;
        level * RADIX + (key >> (level * DIGIT)) as usize % RADIX
    }

    /// Adds `value` under `key`, which must exceed the last key popped.
    #[inline]
    pub(super) fn push(&mut self, key: u128, value: T) {
        debug_assert!(key > self.last, "key {key:#x} not above the last popped {:#x}", self.last);
        if !self.radix && self.small.len() < SMALL_MAX {
            self.small_push(key, value);
            return;
        }
        self.radix_push(key, value);
    }

    /// `push` into the buckets, moving the heap's entries there first if
    /// it is full.
    #[inline(never)]
    fn radix_push(&mut self, key: u128, value: T) {
        if !self.radix {
            // Outgrown: every entry goes to its bucket.
            self.radix = true;
            let mut small = std::mem::take(&mut self.small);
            self.len = small.len();
            for &(k, v) in &small {
                self.file(k, v);
            }
            small.clear();
            self.small = small;
        }
        self.file(key, value);
        self.len += 1;
    }

    /// Sifts a new entry up the heap from the bottom (a hole moves up
    /// while its parent's key is greater).
    #[inline]
    fn small_push(&mut self, key: u128, value: T) {
        let h = &mut self.small;
        let mut i = h.len();
        h.push((key, value));
        while i > 0 {
            let parent = (i - 1) / 2;
            if h[parent].0 < key {
                break;
            }
            h[i] = h[parent];
            i = parent;
        }
        h[i] = (key, value);
    }

    /// Removes the heap's least entry. The hole at the top moves down to
    /// a leaf along the lesser children, then the last entry fills it,
    /// sifting up (Floyd's bottom-up pop): the last entry, a late key,
    /// belongs near the bottom, so this takes one comparison per level
    /// where a sift down from the top takes two.
    #[inline(always)]
    fn small_pop(&mut self) -> Option<(u128, T)> {
        let h = &mut self.small;
        let last = h.pop()?;
        let Some(&top) = h.first() else { return Some(last) };
        let n = h.len();
        let mut i = 0;
        loop {
            let mut child = 2 * i + 1;
            if child + 1 < n {
                // Which child is less is a coin toss the branch predictor
                // loses: an add, not a branch.
                child += (h[child + 1].0 < h[child].0) as usize;
            } else if child >= n {
                break;
            }
            h[i] = h[child];
            i = child;
        }
        while i > 0 {
            let parent = (i - 1) / 2;
            if h[parent].0 < last.0 {
                break;
            }
            h[i] = h[parent];
            i = parent;
        }
        h[i] = last;
        Some(top)
    }

    /// Puts an entry in its bucket relative to `last`, keeping the
    /// minimum's place (a push, and a pop re-filing its bucket).
    #[inline]
    fn file(&mut self, key: u128, value: T) {
        let b = Self::bucket(key, self.last);
        let bucket = &mut self.buckets[b];
        if key < self.min {
            (self.min, self.min_bucket, self.min_index) = (key, b, bucket.len());
        }
        bucket.push((key, value));
        self.nonempty[b / 64] |= 1 << (b % 64);
    }

    /// The least key held.
    #[inline]
    pub(super) fn peek_key(&self) -> Option<u128> {
        if !self.radix {
            return self.small.first().map(|e| e.0);
        }
        (self.len > 0).then_some(self.min)
    }

    /// The value under the least key.
    #[inline]
    pub(super) fn peek(&self) -> Option<&T> {
        if !self.radix {
            return self.small.first().map(|e| &e.1);
        }
        if self.len == 0 {
            return None;
        }
        self.buckets[self.min_bucket].get(self.min_index).map(|e| &e.1)
    }

    /// Removes and returns the entry with the least key. Always inlined
    /// (into the engine's pop, itself inlined into the event loop), with
    /// the buckets' pop out of line.
    #[inline(always)]
    pub(super) fn pop(&mut self) -> Option<(u128, T)> {
        if !self.radix {
            let popped = self.small_pop()?;
            self.last = popped.0;
            return Some(popped);
        }
        self.radix_pop()
    }

    /// `pop` from the buckets.
    #[inline(never)]
    fn radix_pop(&mut self) -> Option<(u128, T)> {
        if self.len == 1 {
            // The last entry: the queue is a heap again.
            self.radix = false;
        }
        if self.len == 0 {
            return None;
        }
        let b = self.min_bucket;
        let mut moved = std::mem::take(&mut self.buckets[b]);
        let popped = moved.swap_remove(self.min_index);
        self.len -= 1;
        self.nonempty[b / 64] &= !(1 << (b % 64));
        self.last = popped.0;
        // Buckets below b are empty (their keys would be below the
        // minimum), those above keep their first differing bit against
        // the new reference, and bucket b's rest differs from it lower
        // down: only that one is re-filed, and its least key becomes the
        // minimum.
        self.min = u128::MAX;
        for &(key, value) in &moved {
            self.file(key, value);
        }
        // Give the emptied vector back so that its capacity is reused.
        moved.clear();
        self.buckets[b] = moved;
        if self.min == u128::MAX && self.len > 0 {
            // Bucket b held only the minimum: the next is in the first
            // non-empty bucket above it, left as it is until it is
            // popped from.
            let nb = self.first_above(b);
            let bucket = &self.buckets[nb];
            let (i, &(key, _)) = bucket.iter().enumerate().min_by_key(|(_, e)| e.0).expect("a non-empty bucket");
            (self.min, self.min_bucket, self.min_index) = (key, nb, i);
        }
        Some(popped)
    }

    /// The first non-empty bucket after `b` (there must be one).
    #[inline]
    fn first_above(&self, b: usize) -> usize {
        let mut w = b / 64;
        let mut bits = self.nonempty[w] & (!1u64).wrapping_shl((b % 64) as u32);
        while bits == 0 {
            w += 1;
            bits = self.nonempty[w];
        }
        w * 64 + bits.trailing_zeros() as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    /// Against std's BinaryHeap on random monotone sequences: pushes at
    /// some time from the last popped one on (below the queue's minimum,
    /// at it, far beyond), with the sequence number in the low half, as
    /// the engine builds its keys, and pops and peeks in between.
    fn against_the_heap(ops: &[(u8, u64)]) {
        let mut q = RadixQueue::<u32>::default();
        let mut heap = BinaryHeap::new();
        let (mut seq, mut now) = (0u64, 0u64);
        for (n, &(op, x)) in ops.iter().enumerate() {
            if op < 5 {
                // Spreads of a few ns to the whole u64 range.
                let spread = [4, 1000, 1 << 20, 1 << 40, u64::MAX][op as usize];
                let time = now.saturating_add(x % spread);
                seq += 1;
                let key = (time as u128) << 64 | seq as u128;
                q.push(key, n as u32);
                heap.push(Reverse((key, n as u32)));
            } else {
                let want = heap.pop().map(|Reverse(e)| e);
                assert_eq!(q.pop(), want);
                if let Some((key, _)) = want {
                    now = (key >> 64) as u64;
                }
            }
            assert_eq!(q.peek_key(), heap.peek().map(|Reverse(e)| e.0));
            assert_eq!(q.peek().copied(), heap.peek().map(|Reverse(e)| e.1));
            assert_eq!(q.len(), heap.len());
        }
        while let Some(Reverse(want)) = heap.pop() {
            assert_eq!(q.pop(), Some(want));
        }
        assert_eq!(q.pop(), None);
    }

    proptest! {
        #[test]
        fn radix_queue_matches_a_binary_heap(ops in proptest::collection::vec((0u8..8, any::<u64>()), 0..600)) {
            against_the_heap(&ops);
        }

        /// As many pops as pushes: the queue crosses between a heap and
        /// buckets both ways.
        #[test]
        fn crossing_between_heap_and_buckets(ops in proptest::collection::vec((0u8..10, any::<u64>()), 0..3000)) {
            against_the_heap(&ops);
        }
    }

    /// Keys differing only in the sequence half, and in the top bit.
    #[test]
    fn extreme_keys() {
        let mut q = RadixQueue::<()>::default();
        for key in [u128::MAX - 1, 1, 3, 2, 1 << 127, 1 << 64] {
            q.push(key, ());
        }
        let order: Vec<_> = std::iter::from_fn(|| q.pop().map(|e| e.0)).collect();
        assert_eq!(order, vec![1, 2, 3, 1 << 64, 1 << 127, u128::MAX - 1]);
    }
}
