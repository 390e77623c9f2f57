//! Dispatch queues (`struct scx_dispatch_q`): FIFO or vtime-ordered lists of
//! tasks. One ordered list serves both orders: a FIFO DSQ keys tasks by an
//! insertion counter (head inserts count down, tail inserts count up), a
//! vtime DSQ by `dsq_vtime`; the DSQ's sequence number breaks ties and tells
//! an iterator which tasks were queued before it started.

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

/// One queued task and its position.
type Entry = (DsqKey, TaskId);

/// A key as one number that orders as the key does: comparing it is a
/// single wide comparison instead of one per field with a branch between.
#[inline]
fn ord(k: DsqKey) -> u128 {
    (k.0 as u128) << 64 | k.1 as u128
}

/// A sorted run of entries in a vector whose first `start` slots are
/// unused: taking the head only moves `start` on, and an insert or removal
/// shifts whichever side of its position is shorter (the left side into
/// the free slots). A ring buffer would do the same but pays for wrapping
/// on every access.
#[derive(Clone, Debug, Default)]
struct Block {
    v: Vec<Entry>,
    start: usize,
}

impl Block {
    #[inline]
    fn live(&self) -> &[Entry] {
        &self.v[self.start..]
    }

    #[inline]
    fn len(&self) -> usize {
        self.v.len() - self.start
    }

    #[inline]
    fn is_empty(&self) -> bool {
        self.v.len() == self.start
    }

    #[inline]
    fn front(&self) -> Option<&Entry> {
        self.v.get(self.start)
    }

    /// Drops the unused head slots.
    fn compact(&mut self) {
        self.v.drain(..self.start);
        self.start = 0;
    }

    #[inline]
    fn push_back(&mut self, e: Entry) {
        if self.start > 0 && self.v.len() == self.v.capacity() {
            self.compact();
        }
        self.v.push(e);
    }

    /// Puts `e` at position `at` of the live entries; returns where it
    /// went in `v`.
    fn insert(&mut self, at: usize, e: Entry) -> usize {
        if self.start > 0 && at < self.len() / 2 {
            let s = self.start;
            self.v.copy_within(s..s + at, s - 1);
            self.start -= 1;
            self.v[s - 1 + at] = e;
            s - 1 + at
        } else {
            if self.start > 0 && self.v.len() == self.v.capacity() {
                self.compact();
            }
            self.v.insert(self.start + at, e);
            self.start + at
        }
    }

    /// Takes the entry at position `at` of the live entries.
    #[inline]
    fn remove(&mut self, at: usize) -> Entry {
        let s = self.start;
        let e = self.v[s + at];
        let len = self.len();
        if len == 1 {
            self.v.clear();
            self.start = 0;
        } else if at == 0 {
            self.start += 1;
        } else if at + 1 == len {
            self.v.pop();
        } else if at < len / 2 {
            self.v.copy_within(s..s + at, s + 1);
            self.start += 1;
        } else {
            self.v.remove(s + at);
        }
        e
    }

    /// Moves the live entries from position `at` on into a new block.
    fn split_off(&mut self, at: usize) -> Block {
        Block { v: self.v.split_off(self.start + at), start: 0 }
    }
}

/// A DSQ's tasks in key order, as a list of sorted blocks of at most
/// [`DsqList::BLOCK_MAX`] entries: every key of a block is below every key
/// of the next one, and `firsts` holds each block's first key.
///
/// A local DSQ (0-2 tasks) is one block. A shared queue of thousands is a
/// few hundred blocks: finding a key's place is a binary search over the
/// contiguous `firsts` and then within one block, and inserting or removing
/// shifts at most half a block. Taking the head and appending at the tail
/// (the FIFO moves) shift nothing. Compared with a B-tree this touches
/// fewer cache lines and allocates only when a block splits.
///
/// The block index has free slots at its front too: the head block, which
/// consuming empties every few dozen tasks, is retired by moving `head` on,
/// not by shifting the index of a queue of tens of thousands; the retired
/// slots are dropped together once they are half the index.
#[derive(Clone, Debug, Default)]
pub struct DsqList {
    /// The blocks in key order from `head` on (the ones before it are
    /// retired and empty). None from `head` on is empty, except a single
    /// block of an empty list (kept so that a DSQ going empty and back
    /// does not free and reallocate it).
    blocks: Vec<Block>,
    /// `blocks[i]`'s first key as [`ord`] gives it (stale for a single
    /// empty block).
    firsts: Vec<u128>,
    /// The first block in use.
    head: usize,
    /// Entries in all blocks.
    len: usize,
    /// The entry the last [`insert_any`](Self::insert_any) put in: its
    /// block and its index in the block's vector. Vtime inserts often go
    /// right after the one before: tasks woken at the scheduler's vtime
    /// floor share one vtime and queue behind each other in insertion
    /// order (on hosted `simple` with 128 CPUs, 82 % of the inserts; on
    /// scx_bpfland 40 %). Entries move as others come and go, so the place
    /// is used only once the keys on both sides of it are checked; a stale
    /// hint costs those compares.
    hint: (usize, usize),
}

impl DsqList {
    /// The most entries a block holds; a fuller one splits in two.
    pub const BLOCK_MAX: usize = 64;

    /// Entries queued.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is queued.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The block where `key` is or would go: the last one starting at or
    /// before it (the head block for a key below them all).
    ///
    /// The two ends are tested before searching, two compares: keys past
    /// the last block's first (FIFO tails, vtimes beyond every queued
    /// task's) and below the second block's (vtimes at the scheduler's
    /// floor) need no search. Any other key is searched for among the
    /// blocks in between only. (On hosted `simple` with 128 CPUs about a
    /// quarter of the vtime inserts take one of the ends.)
    #[inline]
    fn block_of(&self, key: u128) -> usize {
        let h = self.head;
        let n = self.firsts.len();
        if n - h <= 1 {
            return h;
        }
        let b = if self.firsts[n - 1] <= key {
            n - 1
        } else if key < self.firsts[h + 1] {
            h
        } else {
            // firsts[h + 1] <= key < firsts[n - 1]: at least one of the
            // searched blocks starts at or before the key.
            h + self.firsts[h + 1..n - 1].partition_point(|&f| f <= key)
        };
        debug_assert_eq!(b, h + self.firsts[h..].partition_point(|&f| f <= key).saturating_sub(1));
        b
    }

    /// Adds an entry (keys are unique: they carry the DSQ's sequence number).
    ///
    /// Inlined for the common case of a list in one block that has room,
    /// with the key going at its end (a local DSQ, a FIFO tail insert): a
    /// push. Anything else, which searches or splits, is out of line.
    #[inline(always)]
    pub fn insert(&mut self, key: DsqKey, p: TaskId) {
        let k = ord(key);
        let h = self.head;
        if self.blocks.len() == h + 1 {
            let blk = &mut self.blocks[h];
            if blk.len() < Self::BLOCK_MAX {
                let empty = match blk.live().last() {
                    None => true,
                    Some(last) if ord(last.0) < k => false,
                    Some(_) => return self.insert_any(key, p),
                };
                blk.push_back((key, p));
                if empty {
                    self.firsts[h] = k;
                }
                self.len += 1;
                return;
            }
        }
        self.insert_any(key, p);
    }

    /// The place right after the last insert's entry, if `k` goes there:
    /// (block, position among its live entries). The entry before the
    /// place is below `k`, and the one after it (in the block, or the next
    /// block's first) above it: that is where a search would put `k`,
    /// whatever moved since the hint was taken.
    #[inline]
    fn after_hint(&self, k: u128) -> Option<(usize, usize)> {
        let (b, i) = self.hint;
        let blk = self.blocks.get(b)?;
        if i < blk.start || ord(blk.v.get(i)?.0) >= k {
            return None;
        }
        let below_next = match blk.v.get(i + 1) {
            Some(next) => k < ord(next.0),
            None => self.firsts.get(b + 1).is_none_or(|&f| k < f),
        };
        below_next.then_some((b, i + 1 - blk.start))
    }

    /// The last insert's block, if `k` belongs in it too: it starts at or
    /// before `k` and the next one (if any) after it. Where the place
    /// right after the last insert is not `k`'s, its block often still is
    /// (on scx_bpfland, 83 % of those inserts): `k` is then searched for
    /// in that block only.
    #[inline]
    fn hinted_block(&self, k: u128) -> Option<usize> {
        let b = self.hint.0;
        if b < self.head || *self.firsts.get(b)? > k {
            return None;
        }
        self.firsts.get(b + 1).is_none_or(|&f| k < f).then_some(b)
    }

    /// [`insert`](Self::insert) in any case.
    #[inline(never)]
    fn insert_any(&mut self, key: DsqKey, p: TaskId) {
        let k = ord(key);
        if self.blocks.is_empty() {
            self.blocks.push(Block::default());
            self.firsts.push(k);
        }
        let (b, at) = match self.after_hint(k) {
            Some(place) => place,
            None => {
                let b = self.hinted_block(k).unwrap_or_else(|| self.block_of(k));
                let live = self.blocks[b].live();
                let at = match live.last() {
                    // Past the block's end (a FIFO tail insert): no search.
                    Some(last) if ord(last.0) < k => live.len(),
                    None => 0,
                    Some(_) => live.partition_point(|e| ord(e.0) < k),
                };
                (b, at)
            }
        };
        debug_assert_eq!(b, self.block_of(k));
        debug_assert_eq!(at, self.blocks[b].live().partition_point(|e| ord(e.0) < k));
        debug_assert!(self.blocks[b].live().get(at).is_none_or(|e| e.0 != key), "DSQ key {key:?} inserted twice");
        let blk = &mut self.blocks[b];
        let i = if at == blk.len() {
            blk.push_back((key, p));
            blk.v.len() - 1
        } else {
            blk.insert(at, (key, p))
        };
        if at == 0 {
            self.firsts[b] = k;
        }
        self.len += 1;
        self.hint = (b, i);
        if blk.len() > Self::BLOCK_MAX {
            let tail = blk.split_off(blk.len() / 2);
            self.firsts.insert(b + 1, ord(tail.v[0].0));
            self.blocks.insert(b + 1, tail);
            // Left pointing nowhere; the next insert searches.
            self.hint = (usize::MAX, 0);
        }
    }

    /// Where the entry at `key` is: (block, position in it).
    #[inline]
    fn find(&self, key: &DsqKey) -> Option<(usize, usize)> {
        // The head is what consuming and picking take: check it before
        // searching.
        if self.blocks.get(self.head)?.front()?.0 == *key {
            return Some((self.head, 0));
        }
        let k = ord(*key);
        let b = self.block_of(k);
        let blk = &self.blocks[b];
        if blk.front()?.0 == *key {
            return Some((b, 0));
        }
        blk.live().binary_search_by(|e| ord(e.0).cmp(&k)).ok().map(|at| (b, at))
    }

    /// Removes the entry at `key`, returning its task.
    ///
    /// Inlined, always, for what consuming and picking do: take the first
    /// entry of the head block when that leaves the block either empty and
    /// the only one (a local DSQ) or too full to merge. A switch does this
    /// twice (the shared DSQ, then the local one), and it is a few moves of
    /// the block's start, less than the call would cost. Anything else is
    /// out of line.
    #[inline(always)]
    pub fn remove(&mut self, key: &DsqKey) -> Option<TaskId> {
        let h = self.head;
        let single = self.blocks.len() == h + 1;
        if let Some(blk) = self.blocks.get_mut(h) {
            let n = blk.len();
            if let Some(&(k, p)) = blk.front() {
                if k == *key && (n == 1 && single || n > Self::BLOCK_MAX / 4) {
                    // What remove_any does here, without its search,
                    // retiring or merging: none applies.
                    self.len -= 1;
                    if n == 1 {
                        blk.v.clear();
                        blk.start = 0;
                    } else {
                        blk.start += 1;
                        if let (Some(next), Some(f)) = (blk.front(), self.firsts.get_mut(h)) {
                            *f = ord(next.0);
                        }
                    }
                    return Some(p);
                }
            }
        }
        self.remove_any(key)
    }

    /// [`remove`](Self::remove) in any case.
    #[inline(never)]
    fn remove_any(&mut self, key: &DsqKey) -> Option<TaskId> {
        let (b, at) = self.find(key)?;
        let blk = &mut self.blocks[b];
        let (_, p) = blk.remove(at);
        self.len -= 1;
        if blk.is_empty() {
            if self.blocks.len() - self.head > 1 {
                if b == self.head {
                    self.retire_head();
                } else {
                    self.blocks.remove(b);
                    self.firsts.remove(b);
                }
            }
            return Some(p);
        }
        if at == 0 {
            self.firsts[b] = ord(blk.live()[0].0);
        }
        if blk.len() < Self::BLOCK_MAX / 4 {
            self.merge_small(b);
        }
        Some(p)
    }

    /// The head block is empty and others follow: the next one becomes the
    /// head; the retired slots go once they are half the index.
    fn retire_head(&mut self) {
        self.blocks[self.head] = Block::default();
        self.head += 1;
        if self.head * 2 >= self.blocks.len() {
            self.blocks.drain(..self.head);
            self.firsts.drain(..self.head);
            self.head = 0;
        }
    }

    /// Joins block `b`, which has become small, with a neighbour if both
    /// fit in one block, so that a list shrunk by removals does not end up
    /// as many near-empty blocks.
    fn merge_small(&mut self, b: usize) {
        let fits = |i: usize, blocks: &[Block]| blocks.get(i).is_some_and(|n| n.len() + blocks[b].len() <= Self::BLOCK_MAX);
        let into = if fits(b + 1, &self.blocks) {
            b
        } else if b > self.head && fits(b - 1, &self.blocks) {
            b - 1
        } else {
            return;
        };
        if into == self.head {
            // The head block's entries go to the front of the next block,
            // which becomes the head: nothing in the index moves.
            let mut merged = std::mem::take(&mut self.blocks[into]);
            merged.compact();
            merged.v.extend_from_slice(self.blocks[into + 1].live());
            self.firsts[into + 1] = ord(merged.v[0].0);
            self.blocks[into + 1] = merged;
            self.retire_head();
            return;
        }
        // Block `into` takes the entries of the one after it.
        let next = self.blocks.remove(into + 1);
        self.firsts.remove(into + 1);
        let blk = &mut self.blocks[into];
        blk.compact();
        blk.v.extend_from_slice(next.live());
    }

    /// The task at `key`.
    pub fn get(&self, key: &DsqKey) -> Option<&TaskId> {
        let (b, at) = self.find(key)?;
        self.blocks[b].live().get(at).map(|e| &e.1)
    }

    /// The first entry.
    #[inline]
    pub fn first(&self) -> Option<(DsqKey, TaskId)> {
        self.blocks.get(self.head)?.front().copied()
    }

    /// Every entry in key order.
    pub fn iter(&self) -> impl Iterator<Item = (DsqKey, TaskId)> + '_ {
        self.blocks[self.head.min(self.blocks.len())..].iter().flat_map(|b| b.live().iter().copied())
    }

    /// Every task in key order.
    pub fn values(&self) -> impl Iterator<Item = TaskId> + '_ {
        self.iter().map(|(_, p)| p)
    }

    /// The first entry after `key` (before it when `rev`) whose sequence
    /// number is below `max_seq`.
    fn after(&self, key: Option<DsqKey>, rev: bool, max_seq: u64) -> Option<(DsqKey, TaskId)> {
        let older = |e: &&Entry| e.0 .1 < max_seq;
        if self.len == 0 {
            return None;
        }
        if rev {
            let (mut b, mut end) = match key {
                None => (self.blocks.len() - 1, self.blocks[self.blocks.len() - 1].len()),
                Some(k) => {
                    let k = ord(k);
                    let b = self.block_of(k);
                    (b, self.blocks[b].live().partition_point(|e| ord(e.0) < k))
                }
            };
            loop {
                if let Some(e) = self.blocks[b].live()[..end].iter().rev().find(older) {
                    return Some(*e);
                }
                if b == self.head {
                    return None;
                }
                b -= 1;
                end = self.blocks[b].len();
            }
        }
        let (b, start) = match key {
            None => (self.head, 0),
            Some(k) => {
                let k = ord(k);
                let b = self.block_of(k);
                (b, self.blocks[b].live().partition_point(|e| ord(e.0) <= k))
            }
        };
        let mut rest = self.blocks[b].live()[start..].iter().chain(self.blocks[b + 1..].iter().flat_map(|b| b.live()));
        rest.find(older).copied()
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

    /// The key of the next FIFO insert at the tail (or head); counts the
    /// insert. The caller puts the task in `list` under it.
    #[inline]
    pub fn fifo_key(&mut self, head: bool) -> DsqKey {
        self.seq += 1;
        let k = if head {
            self.head_ctr -= 1;
            self.head_ctr
        } else {
            self.tail_ctr += 1;
            self.tail_ctr
        };
        (k, self.seq)
    }

    /// The key of the next insert by `vtime` (ties keep insertion order);
    /// counts the insert.
    #[inline]
    pub fn vtime_key(&mut self, vtime: u64) -> DsqKey {
        self.seq += 1;
        (vtime, self.seq)
    }

    /// Inserts `p` at the tail (or head) in FIFO order; returns its key.
    pub fn insert_fifo(&mut self, p: TaskId, head: bool) -> DsqKey {
        let key = self.fifo_key(head);
        self.list.insert(key, p);
        key
    }

    /// Inserts `p` ordered by `vtime`; ties keep insertion order.
    pub fn insert_vtime(&mut self, p: TaskId, vtime: u64) -> DsqKey {
        let key = self.vtime_key(vtime);
        self.list.insert(key, p);
        key
    }

    /// Removes the entry at `key`, returning its task; an emptied DSQ forgets its ordering.
    #[inline]
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
    #[inline]
    pub fn first(&self) -> Option<(DsqKey, TaskId)> {
        self.list.first()
    }

    /// The entry after `key` (or before it when `rev`), skipping entries
    /// inserted at or after `max_seq`.
    pub fn next_after(&self, key: Option<DsqKey>, rev: bool, max_seq: u64) -> Option<(DsqKey, TaskId)> {
        self.list.after(key, rev, max_seq)
    }

    /// Starts loading the DSQ's own lines, what an insert, a pick and a
    /// removal read first. Only timing changes.
    #[inline(always)]
    pub(crate) fn prefetch(&self) {
        use crate::sched::prefetch;
        prefetch(self);
        prefetch(&self.list);
        prefetch(&self.seq);
        prefetch(&self.tail_ctr);
    }

    /// Starts loading the next level once the DSQ's own lines are in: its
    /// head block's header and first key (the entries behind the header
    /// would take one more dependent load). Only timing changes.
    #[inline(always)]
    pub(crate) fn prefetch_head_block(&self) {
        use crate::sched::prefetch;
        let l = &self.list;
        if let Some(b) = l.blocks.get(l.head) {
            prefetch(b);
        }
        if let Some(f) = l.firsts.get(l.head) {
            prefetch(f);
        }
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
    use std::collections::BTreeMap;

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

    impl DsqList {
        /// The block structure's own invariants: blocks in key order, each
        /// sorted, none empty or over-full (but the one block of an empty
        /// list), `firsts` and `len` matching them.
        fn check_blocks(&self) {
            assert_eq!(self.blocks.len(), self.firsts.len());
            assert!(self.head < self.blocks.len() || self.blocks.is_empty());
            assert!(self.blocks[..self.head].iter().all(|b| b.v.is_empty()), "retired blocks are empty");
            let live = &self.blocks[self.head.min(self.blocks.len())..];
            assert_eq!(self.len, live.iter().map(|b| b.len()).sum::<usize>());
            assert!(live.len() <= 1 || live.iter().all(|b| !b.is_empty()));
            for (b, f) in live.iter().zip(&self.firsts[self.head.min(self.firsts.len())..]) {
                assert!(b.len() <= Self::BLOCK_MAX);
                if let Some(e) = b.front() {
                    assert_eq!(ord(e.0), *f);
                }
            }
            assert!(self.iter().zip(self.iter().skip(1)).all(|(a, b)| a.0 < b.0));
        }
    }

    #[test]
    fn blocks_split_and_merge_back() {
        let mut list = DsqList::default();
        for i in 0..1000u64 {
            list.insert((i * 7919 % 1000, i), i as TaskId);
        }
        list.check_blocks();
        assert!(list.blocks.len() >= 1000 / DsqList::BLOCK_MAX);
        for _ in 0..990 {
            let (k, _) = list.first().expect("entries left");
            list.remove(&k);
            list.check_blocks();
        }
        assert_eq!(list.blocks.len() - list.head, 1);
        assert_eq!(list.len(), 10);
    }

    #[test]
    fn runs_of_one_vtime_take_the_place_after_the_last_insert() {
        // Tasks woken at the vtime floor queue behind each other, among
        // others at their own vtimes, while consuming takes the head and
        // blocks split: the list stays what a B-tree holds, and most of
        // the floor inserts (all but those right after another vtime's)
        // find their place without a search.
        let mut list = DsqList::default();
        let mut reference: BTreeMap<DsqKey, TaskId> = BTreeMap::new();
        let (mut hinted, mut floor_inserts) = (0, 0);
        for seq in 1..4000u64 {
            let floor = seq / 200 * 100;
            let key = if seq % 4 == 0 { (floor + seq * 7919 % 1000, seq) } else { (floor, seq) };
            if key.0 == floor {
                floor_inserts += 1;
                hinted += list.after_hint(ord(key)).is_some() as u32;
            }
            list.insert(key, seq as TaskId);
            reference.insert(key, seq as TaskId);
            if seq % 3 == 0 {
                let head = *reference.keys().next().expect("entries queued");
                assert_eq!(list.remove(&head), reference.remove(&head));
            }
            list.check_blocks();
        }
        assert!(list.iter().eq(reference.iter().map(|(&k, &p)| (k, p))));
        assert!(hinted * 2 > floor_inserts, "{hinted} of {floor_inserts} floor inserts took the hint");
    }

    proptest::proptest! {
        /// DsqList answers every query as a plain B-tree does, through
        /// block splits (past BLOCK_MAX entries) and merges (as removals,
        /// from the head or anywhere, shrink it).
        #[test]
        fn list_agrees_with_a_btree(ops in proptest::collection::vec((0u8..8, 0u64..400, 0u64..1200, proptest::bool::ANY), 1..1200)) {
            let mut list = DsqList::default();
            let mut reference: BTreeMap<DsqKey, TaskId> = BTreeMap::new();
            let mut seq = 0u64;
            let n = ops.len();
            for (i, (op, a, b, rev)) in ops.into_iter().enumerate() {
                // The first half mostly inserts (to several blocks), the
                // second mostly removes (merging them again).
                const GROW: [u8; 8] = [0, 0, 0, 0, 0, 2, 3, 5];
                const SHRINK: [u8; 8] = [0, 0, 2, 3, 4, 5, 2, 3];
                let op = if i < n / 2 { GROW[op as usize] } else { SHRINK[op as usize] };
                match op {
                    0 => {
                        seq += 1;
                        // Mostly random keys, sometimes past the tail (FIFO).
                        let k = if rev { a } else { reference.keys().next_back().map_or(a, |k| k.0 + 1) };
                        list.insert((k, seq), seq as TaskId);
                        reference.insert((k, seq), seq as TaskId);
                    }
                    2 => {
                        let key = reference.keys().nth(a as usize % reference.len().max(1)).copied().unwrap_or((a, b));
                        proptest::prop_assert_eq!(list.remove(&key), reference.remove(&key));
                    }
                    3 => {
                        // Consuming: the head goes.
                        let key = reference.keys().next().copied().unwrap_or((a, b));
                        proptest::prop_assert_eq!(list.remove(&key), reference.remove(&key));
                    }
                    4 => {
                        let key = reference.keys().nth(a as usize % reference.len().max(1)).copied().unwrap_or((a, b));
                        proptest::prop_assert_eq!(list.get(&key), reference.get(&key));
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
                list.check_blocks();
                proptest::prop_assert_eq!(list.len(), reference.len());
                proptest::prop_assert_eq!(list.first(), reference.iter().next().map(|(&k, &p)| (k, p)));
            }
            proptest::prop_assert!(list.iter().eq(reference.iter().map(|(&k, &p)| (k, p))));
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
