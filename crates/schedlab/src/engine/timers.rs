//! The engine's per-CPU timers: a tournament (winner) tree over the CPUs'
//! (time, seq) keys, for the step events of which a CPU has at most one
//! pending (the ticks keep a FIFO of their own: see the engine module).
//!
//! Most events pop one of these timers and re-arm it, so the walk that
//! puts a changed key back into the tree runs about once per event, over
//! most of the tree's height; it was the simulator's costliest function
//! and is kept to a few instructions per level (see [`CpuTimers::walk`]).
//! On a machine of a few CPUs a scan of the leaves is cheaper still, and
//! replaces the walks there (see `CpuTimers::scan`).

/// No pending event in a slot.
pub(super) const NO_KEY: u128 = u128::MAX;

/// Per-CPU timers: a tournament (winner) tree over the slots' keys. Each
/// node holds the least key below it and a slot holding that key.
/// Re-arming or cancelling a slot replays its path towards the root and
/// stops at the first node the change does not reach.
///
/// A key is a u128 (time << 64 | seq), but the nodes hold only its time,
/// and each slot its seq: the seqs are unique, so two keys with the same
/// time (rare but for disarmed slots) are told apart by the seqs of the
/// slots that hold them, and the tree orders keys exactly as u128
/// compares do. A level of a walk then compares and selects 64 bits
/// where it did 128, and stores one word less.
#[derive(Debug)]
pub(super) struct CpuTimers {
    /// `keys[k]`: the time of the least key below node k, where node k's
    /// children are 2k and 2k+1 and node n + i is slot i's leaf (u64::MAX:
    /// disarmed, see `seqs`). The keys are in the nodes rather than once
    /// per slot so that a level's loads depend on the node index only, not
    /// on the slot the level below found. n is a power of two.
    keys: Vec<u64>,
    /// `win[k]`: a slot below node k holding the least key (`win[n + i] =
    /// i`).
    win: Vec<u32>,
    /// `seqs[i]`: the seq of slot i's key (u64::MAX: disarmed, its key
    /// NO_KEY), and `seqs[n] = 0`, the seq of node 0 (see
    /// [`CpuTimers::walk`]), whose "slot" n stands for no slot.
    seqs: Vec<u64>,
    /// The generation each armed slot's event carries (step timers).
    pub(super) gens: Vec<u32>,
    /// Keys set since the tree was last read, not yet walked into it:
    /// a handler often sets one CPU's step more than once (a switch, then
    /// the first step of the task switched in) and re-arms the CPU whose
    /// step or tick just popped; only each slot's last key is walked, when
    /// the tree is next read ([`settle`](Self::settle)). The tree's content
    /// depends on the keys only, so the order of the walks does not matter
    /// (and a key that finds the list full is walked at once). A fixed
    /// array, not a Vec: a handler sets one to three slots.
    pending: [(usize, u128); PENDING_MAX],
    /// Entries in use in `pending`.
    npending: usize,
    /// A tree of at most [`SCAN_MAX`] slots is never walked: a set writes
    /// its key in `leaves` and marks the tree `dirty`, and the next read
    /// scans them for the least key and puts it at the root (node 1). On a
    /// few CPUs that takes fewer instructions than a walk, each of whose
    /// levels pays for a parent, a sibling and a select. The nodes
    /// between the root and the leaves are then stale and never read, and
    /// `pending` stays empty.
    scan: bool,
    dirty: bool,
    /// A scanned tree's keys, whole: a set writes one entry, and the
    /// scan compares whole keys; it puts the least key's time at the root
    /// and its seq in `seqs`, which is all that is read of the tree.
    leaves: [u128; SCAN_MAX],
}

/// Keys kept unwalked at most (see `CpuTimers::pending`).
const PENDING_MAX: usize = 4;

/// Trees of at most this many slots are scanned, not walked (see
/// `CpuTimers::scan`); smaller ones are padded to `SCAN_MIN` slots, so
/// that a scan is over 4 or 8 leaves.
const SCAN_MAX: usize = 8;
const SCAN_MIN: usize = 4;

/// An engine without CPUs has a tree of disarmed slots all the same, so
/// that its root can be read without a test.
impl Default for CpuTimers {
    fn default() -> Self {
        Self::new(0)
    }
}

impl CpuTimers {
    pub(super) fn new(cpus: usize) -> Self {
        let mut n = cpus.max(1).next_power_of_two();
        if n < SCAN_MIN {
            // Disarmed slots that are never armed: a scan of 4 leaves
            // costs about what one of 1 or 2 does.
            n = SCAN_MIN;
        }
        let mut win = vec![0u32; 2 * n];
        for (i, leaf) in win[n..].iter_mut().enumerate() {
            *leaf = i as u32;
        }
        // Every key is NO_KEY: any slot below a node may stand for it.
        for k in (1..n).rev() {
            win[k] = win[2 * k];
        }
        let mut keys = vec![u64::MAX; 2 * n];
        let mut seqs = vec![u64::MAX; n + 1];
        // Node 0, above the root, stops both loops of a walk: no slot
        // wins it (its "slot" n is none) and no key is less than its
        // (0, 0), seqs starting at 1.
        (keys[0], win[0], seqs[n]) = (0, n as u32, 0);
        CpuTimers { keys, win, seqs, gens: vec![0; n], pending: [(0, NO_KEY); PENDING_MAX], npending: 0, scan: n <= SCAN_MAX, dirty: false, leaves: [NO_KEY; SCAN_MAX] }
    }

    /// How many slots (CPUs, padded to a power of two, at least
    /// `SCAN_MIN`).
    #[inline]
    pub(super) fn slots(&self) -> usize {
        self.keys.len() / 2
    }

    /// The full key of the tree's node `k` whose winner is `slot`.
    #[inline(always)]
    fn full_key(&self, k: usize, slot: usize) -> u128 {
        (self.keys[k] as u128) << 64 | self.seqs[slot] as u128
    }

    /// The key slot `slot` holds (NO_KEY when disarmed).
    #[inline]
    pub(super) fn key(&self, slot: usize) -> u128 {
        match self.pending[..self.npending].iter().find(|p| p.0 == slot) {
            Some(&(_, key)) => key,
            None if self.scan => self.leaves[slot],
            None => self.full_key(self.slots() + slot, slot),
        }
    }

    /// Slots holding a key.
    pub(super) fn armed(&self) -> usize {
        (0..self.slots()).filter(|&i| self.key(i) != NO_KEY).count()
    }

    /// Sets slot `slot`'s key (NO_KEY disarms it), to be walked into the
    /// tree when it is next read.
    #[inline]
    pub(super) fn set(&mut self, slot: usize, key: u128) {
        debug_assert!(slot < self.slots(), "slot {slot} of {}", self.slots());
        if self.scan {
            self.leaves[slot & (SCAN_MAX - 1)] = key;
            self.dirty = true;
            return;
        }
        let n = self.npending;
        match self.pending[..n].iter_mut().find(|p| p.0 == slot) {
            Some(p) => p.1 = key,
            None if n < PENDING_MAX => {
                self.pending[n] = (slot, key);
                self.npending = n + 1;
            }
            None => self.walk_now(slot, key),
        }
    }

    /// `walk`, out of line: for a set that finds `pending` full (rare),
    /// so that `set`, inlined where steps are armed, stays small.
    #[cold]
    #[inline(never)]
    fn walk_now(&mut self, slot: usize, key: u128) {
        self.walk(slot, key);
    }

    /// Disarms the slot a pop took; with `at_once`, walks that (and any
    /// other pending key) into the tree now, so that the next head is
    /// known while the popped event runs.
    #[inline]
    pub(super) fn take(&mut self, slot: usize, at_once: bool) {
        self.set(slot, NO_KEY);
        if at_once {
            self.settle();
        }
    }

    /// Walks the pending keys into the tree.
    #[inline(always)]
    pub(super) fn settle(&mut self) {
        if self.dirty {
            self.rescan();
        }
        while self.npending > 0 {
            self.npending -= 1;
            let (slot, key) = self.pending[self.npending & (PENDING_MAX - 1)];
            self.walk(slot, key);
        }
    }

    /// Puts the least leaf and its slot at the root of a scanned tree
    /// (see [`CpuTimers::scan`]): a tree of 4 or of 8 slots, each with a
    /// scan of fixed length, unrolled.
    #[inline(always)]
    fn rescan(&mut self) {
        self.dirty = false;
        let (slot, key) = if self.keys.len() == 2 * SCAN_MIN {
            least::<SCAN_MIN>(&self.leaves)
        } else {
            least::<SCAN_MAX>(&self.leaves)
        };
        self.keys[1] = (key >> 64) as u64;
        self.win[1] = slot;
        self.seqs[slot as usize] = key as u64;
    }

    /// Stores `key` for `slot` and replays its path towards the root.
    ///
    /// First come the nodes `slot` won (with its old key): each takes the
    /// lesser of its two children, the sibling's key being in the sibling
    /// node. Above them a node's winner is another slot, which stays
    /// below it with its key unchanged, so the node's new least key is
    /// the lesser of that key and the one coming up: the node is replaced
    /// while the key coming up is less, and the walk ends at the first
    /// node it is not. Keys are unique but for NO_KEY, and which disarmed
    /// slot stands for a disarmed subtree does not matter. Node 0, above
    /// the root, ends either loop, which saves a test per level.
    ///
    /// The nodes compare times; equal times (mostly two disarmed slots)
    /// take a branch that compares the two winners' seqs.
    ///
    /// Node indices are masked with the tables' length less one (a power
    /// of two, and every index is below it anyway) so that the compiler
    /// can drop the bounds checks.
    #[inline(always)]
    fn walk(&mut self, slot: usize, key: u128) {
        let (time, seq) = ((key >> 64) as u64, key as u64);
        let (keys, win, seqs) = (&mut self.keys[..], &mut self.win[..], &mut self.seqs[..]);
        let m = keys.len().wrapping_sub(1);
        let win = &mut win[..m + 1];
        let mut node = (m / 2 + 1 + slot) & m;
        if keys[node] == time && seqs[slot] == seq {
            return;
        }
        keys[node] = time;
        seqs[slot] = seq;
        let s = slot as u32;
        let (mut cand, mut cand_time) = (s, time);
        loop {
            let parent = node / 2;
            if win[parent & m] != s {
                break;
            }
            let sib = (node ^ 1) & m;
            let (other, other_time) = (win[sib], keys[sib]);
            // Which of two keys is less is a coin toss the branch
            // predictor loses: select without a branch.
            let less = if other_time != cand_time { other_time < cand_time } else { seqs[other as usize] < seqs[cand as usize] };
            let mask = (less as u64).wrapping_neg();
            cand_time ^= (cand_time ^ other_time) & mask;
            cand ^= (cand ^ other) & mask as u32;
            win[parent & m] = cand;
            keys[parent & m] = cand_time;
            node = parent;
        }
        loop {
            let parent = (node / 2) & m;
            let parent_time = keys[parent];
            let less = if cand_time != parent_time { cand_time < parent_time } else { seqs[cand as usize] < seqs[win[parent] as usize] };
            if !less {
                break;
            }
            win[parent] = cand;
            keys[parent] = cand_time;
            node = parent;
        }
    }

    /// The slot at the head of the tree and its key, if the tree is
    /// settled and a slot is armed (a hint of what fires next; `first` is
    /// the truth).
    #[inline]
    pub(super) fn head_hint(&self) -> Option<(usize, u128)> {
        if self.npending != 0 || self.dirty {
            return None;
        }
        self.first()
    }

    /// The slot with the earliest key, if any is armed (on a settled tree).
    #[inline]
    pub(super) fn first(&self) -> Option<(usize, u128)> {
        let (slot, key) = self.head();
        (key != NO_KEY).then_some((slot, key))
    }

    /// The root of a settled tree: the slot with the earliest key and
    /// that key, which is NO_KEY when no slot is armed (the slot is then
    /// any).
    #[inline(always)]
    pub(super) fn head(&self) -> (usize, u128) {
        debug_assert!(self.npending == 0 && !self.dirty, "head() on an unsettled tree");
        let slot = self.win[1] as usize;
        (slot, self.full_key(1, slot))
    }
}

/// The first of `leaves` holding the least of their first N keys (the
/// slot standing for the whole tree when every key is NO_KEY does not
/// matter), and that key.
#[inline(always)]
fn least<const N: usize>(leaves: &[u128]) -> (u32, u128) {
    let leaves: &[u128; N] = leaves[..N].try_into().expect("N leaves");
    let (mut best, mut best_key) = (0u32, leaves[0]);
    for (i, &key) in leaves.iter().enumerate().skip(1) {
        if key < best_key {
            (best, best_key) = (i as u32, key);
        }
    }
    (best, best_key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config::with_cases(512))]

        /// Against a set of (key, slot) over random arms, re-arms,
        /// disarms and reads, with keys unique but for NO_KEY as the
        /// engine's are, in any time order (a re-armed slot may move
        /// earlier or later), several sets of a slot between two reads,
        /// and the earliest slot disarmed on some reads, as a pop does.
        #[test]
        fn agrees_with_a_btree_set(
            size in proptest::sample::select(vec![1usize, 2, 3, 5, 37, 128, 4096]),
            ops in proptest::collection::vec((0u32..u32::MAX, 0u8..6, 0u64..40), 1..500),
        ) {
            let mut t = CpuTimers::new(size);
            let mut reference = BTreeSet::new();
            let mut keys = vec![NO_KEY; size];
            let mut seq = 0u64;
            for (pick, op, time) in ops {
                // Mostly four hot slots (spread over the tree), as when a
                // handful of CPUs are busy.
                let mut slot = if pick % 3 == 0 { pick as usize } else { pick as usize % 4 * 977 } % size;
                let key = match op {
                    0 => NO_KEY,
                    1..=3 => {
                        seq += 1;
                        (time as u128) << 64 | seq as u128
                    }
                    _ => {
                        t.settle();
                        let want = reference.first().map(|&(key, slot)| (slot, key));
                        proptest::prop_assert_eq!(t.first(), want);
                        proptest::prop_assert_eq!(t.armed(), reference.len());
                        proptest::prop_assert_eq!(t.key(slot), keys[slot]);
                        // A pop: the earliest slot is disarmed (and often
                        // re-armed before the next read).
                        match want {
                            Some((first, _)) if op == 5 => {
                                slot = first;
                                NO_KEY
                            }
                            _ => continue,
                        }
                    }
                };
                if keys[slot] != NO_KEY {
                    reference.remove(&(keys[slot], slot));
                }
                keys[slot] = key;
                if key != NO_KEY {
                    reference.insert((key, slot));
                }
                t.set(slot, key);
                proptest::prop_assert_eq!(t.key(slot), key);
            }
            t.settle();
            proptest::prop_assert_eq!(t.first(), reference.first().map(|&(key, slot)| (slot, key)));
        }
    }
}
