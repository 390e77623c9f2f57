//! Fixed-size CPU bitmaps: the simulator's counterpart of the kernel's
//! `struct cpumask`, plus the kernel/taskset "cpulist" text format.
//!
//! A [`CpuMask`] always knows how many CPUs the machine has (`nr_bits`), so
//! that formatting, complement-like operations (`full`) and range checks need
//! no extra context. Bits at or above `nr_bits` are kept zero at all times;
//! every operation relies on that invariant (e.g. `weight` is a plain
//! popcount).

use std::fmt::{self, Write as _};
use std::iter::FusedIterator;

const WORD_BITS: usize = u64::BITS as usize;

/// Masks of up to this many words are stored inline, so that cloning a mask
/// on ordinary machines (up to 256 CPUs) never touches the allocator. Larger
/// machines pay one allocation per clone, which is still O(words).
const INLINE_WORDS: usize = 4;

#[derive(Clone, Debug)]
enum Words {
    // Unused trailing words stay zero.
    Inline([u64; INLINE_WORDS]),
    Heap(Box<[u64]>),
    /// Heap words shared by clones ([`CpuMask::shared`]), copied on a
    /// holder's first write.
    Shared(std::sync::Arc<[u64]>),
}

/// A set of CPU ids `0..nr_bits`, stored as a bitmap of 64-bit words.
///
/// All operations are O(number of words). Binary operations expect both
/// masks to have the same `nr_bits` (checked with `debug_assert!`); in
/// release builds a size mismatch is tolerated and never sets bits beyond
/// `self.nr_bits()`.
///
/// Equality, ordering and hashing consider `nr_bits` too, so the empty mask
/// of an 8-CPU machine differs from the empty mask of a 16-CPU machine. The
/// ordering is a deterministic total order suitable for `BTreeMap` keys; it
/// is not a numeric order of the bit patterns.
#[derive(Clone, Debug)]
pub struct CpuMask {
    nr_bits: usize,
    words: Words,
}

// By `nr_bits`, then the used words: the same whichever way the words
// are stored.
impl PartialEq for CpuMask {
    fn eq(&self, other: &Self) -> bool {
        self.nr_bits == other.nr_bits && self.words() == other.words()
    }
}

impl Eq for CpuMask {}

impl PartialOrd for CpuMask {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for CpuMask {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.nr_bits, self.words()).cmp(&(other.nr_bits, other.words()))
    }
}

impl std::hash::Hash for CpuMask {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.nr_bits.hash(state);
        self.words().hash(state);
    }
}

/// Why a cpulist string was rejected by [`CpuMask::parse_cpulist`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpuListError {
    /// Two commas in a row, or a leading/trailing comma.
    #[error("empty item at position {position} in CPU list \"{list}\"")]
    EmptyItem {
        /// 1-based position of the empty item among the comma-separated items.
        position: usize,
        /// The whole list as given.
        list: String,
    },
    /// Something that should be a CPU number is not a decimal number or `N`.
    #[error("invalid CPU number \"{text}\" in \"{item}\": expected a decimal number or N")]
    BadNumber {
        /// The offending text.
        text: String,
        /// The item it appeared in.
        item: String,
    },
    /// A range whose start is above its end, such as `7-3`.
    #[error("reversed range \"{item}\": {start} is greater than {end}")]
    ReversedRange {
        /// The item as given.
        item: String,
        /// First CPU of the range.
        start: usize,
        /// Last CPU of the range.
        end: usize,
    },
    /// A malformed `:stride` or `:used/group` suffix.
    #[error("invalid stride in \"{item}\": {reason}")]
    BadStride {
        /// The item as given.
        item: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The list names a CPU the machine does not have.
    #[error("CPU {cpu} is out of range: {}", machine_size(*nr_cpus))]
    OutOfRange {
        /// The highest CPU the offending item selects.
        cpu: usize,
        /// Number of CPUs of the machine.
        nr_cpus: usize,
    },
}

fn machine_size(nr_cpus: usize) -> String {
    match nr_cpus {
        0 => "the machine has no CPUs".to_string(),
        1 => "the machine has 1 CPU (0)".to_string(),
        n => format!("the machine has {n} CPUs (0-{})", n - 1),
    }
}

/// Shared words made this mask's own: copied first unless this is their
/// only holder.
#[inline(never)]
fn unshare(w: &mut std::sync::Arc<[u64]>) -> &mut [u64] {
    std::sync::Arc::make_mut(w)
}

#[inline]
fn words_for(nr_bits: usize) -> usize {
    nr_bits.div_ceil(WORD_BITS)
}

fn bit(cpu: usize) -> u64 {
    1u64 << (cpu % WORD_BITS)
}

impl CpuMask {
    /// An empty mask for a machine with `nr_cpus` CPUs.
    pub fn new(nr_cpus: usize) -> Self {
        let n = words_for(nr_cpus);
        let words = if n <= INLINE_WORDS {
            Words::Inline([0; INLINE_WORDS])
        } else {
            Words::Heap(vec![0; n].into_boxed_slice())
        };
        CpuMask {
            nr_bits: nr_cpus,
            words,
        }
    }

    /// A mask for `nr_cpus` CPUs holding the given bitmap words (CPU c at
    /// bit c % 64 of word c / 64); missing words are empty and bits at or
    /// above `nr_cpus` are dropped.
    pub fn from_words(nr_cpus: usize, words: &[u64]) -> Self {
        let mut mask = Self::new(nr_cpus);
        let dst = mask.words_mut();
        let n = dst.len().min(words.len());
        dst[..n].copy_from_slice(&words[..n]);
        mask.clear_tail();
        mask
    }

    /// A mask with all `nr_cpus` CPUs set.
    pub fn full(nr_cpus: usize) -> Self {
        let mut mask = Self::new(nr_cpus);
        mask.words_mut().fill(!0);
        mask.clear_tail();
        mask
    }

    /// A mask with only `cpu` set (empty if `cpu` is out of range).
    pub fn single(nr_cpus: usize, cpu: usize) -> Self {
        let mut mask = Self::new(nr_cpus);
        mask.set(cpu);
        mask
    }

    /// A mask with the given CPUs set; like [`set`](Self::set), CPUs out of
    /// range trip a `debug_assert!` and are otherwise ignored.
    pub fn from_cpus(nr_cpus: usize, cpus: impl IntoIterator<Item = usize>) -> Self {
        let mut mask = Self::new(nr_cpus);
        for cpu in cpus {
            mask.set(cpu);
        }
        mask
    }

    /// Number of CPUs this mask can hold (the machine size).
    pub fn nr_bits(&self) -> usize {
        self.nr_bits
    }

    /// This mask, with words that its clones share instead of copying
    /// (copied on a clone's first write): for a mask that many holders keep
    /// unchanged, such as the `cpus_allowed` of every task allowed
    /// everywhere on a machine of thousands of CPUs, which then costs no
    /// memory per task and stays in the caches. Masks of up to 256 CPUs
    /// are inline and stay so.
    pub fn shared(self) -> Self {
        let words = match self.words {
            Words::Heap(w) => Words::Shared(w.into()),
            w => w,
        };
        CpuMask { nr_bits: self.nr_bits, words }
    }

    /// The bitmap words, `nr_bits` rounded up to whole words.
    #[inline]
    pub(crate) fn words(&self) -> &[u64] {
        match &self.words {
            Words::Inline(w) => &w[..words_for(self.nr_bits)],
            Words::Heap(w) => w,
            Words::Shared(w) => w,
        }
    }

    /// Inlined: every write to a mask goes through it, and the words are
    /// almost always the mask's own; a shared copy is made out of line.
    #[inline]
    fn words_mut(&mut self) -> &mut [u64] {
        let n = words_for(self.nr_bits);
        match &mut self.words {
            Words::Inline(w) => &mut w[..n],
            Words::Heap(w) => w,
            Words::Shared(w) => unshare(w),
        }
    }

    /// Restores the "no bits at or above nr_bits" invariant after word-wide
    /// writes.
    fn clear_tail(&mut self) {
        let used = self.nr_bits % WORD_BITS;
        if used != 0 {
            if let Some(last) = self.words_mut().last_mut() {
                *last &= (1u64 << used) - 1;
            }
        }
    }

    /// Adds `cpu`. Out-of-range CPUs are a caller bug: they trip a
    /// `debug_assert!` and are ignored in release builds.
    pub fn set(&mut self, cpu: usize) {
        debug_assert!(
            cpu < self.nr_bits,
            "CpuMask::set({cpu}) on a {}-CPU mask",
            self.nr_bits
        );
        if cpu < self.nr_bits {
            self.words_mut()[cpu / WORD_BITS] |= bit(cpu);
        }
    }

    /// Removes `cpu`. Out-of-range CPUs are handled as in [`set`](Self::set).
    pub fn clear(&mut self, cpu: usize) {
        debug_assert!(
            cpu < self.nr_bits,
            "CpuMask::clear({cpu}) on a {}-CPU mask",
            self.nr_bits
        );
        if cpu < self.nr_bits {
            self.words_mut()[cpu / WORD_BITS] &= !bit(cpu);
        }
    }

    /// Whether `cpu` is in the mask; `false` for out-of-range CPUs.
    pub fn test(&self, cpu: usize) -> bool {
        cpu < self.nr_bits && self.words()[cpu / WORD_BITS] & bit(cpu) != 0
    }

    /// Number of CPUs in the mask (popcount).
    pub fn weight(&self) -> usize {
        self.words().iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Whether no CPU is set.
    pub fn is_empty(&self) -> bool {
        self.words().iter().all(|&w| w == 0)
    }

    /// The lowest CPU in the mask.
    pub fn first(&self) -> Option<usize> {
        self.next_set(0)
    }

    /// The lowest CPU in the mask that is `>= from`.
    #[inline]
    pub fn next_set(&self, from: usize) -> Option<usize> {
        self.scan_from(from, |w| w)
    }

    /// The lowest CPU id `>= from` (and below `nr_bits`) that is not set.
    fn next_clear(&self, from: usize) -> Option<usize> {
        // Inverting turns the zero tail into ones, hence the final bound check.
        self.scan_from(from, |w| !w)
            .filter(|&cpu| cpu < self.nr_bits)
    }

    /// Finds the first set bit `>= from` in the words transformed by `view`.
    /// Inlined: an idle-CPU search calls it once per CPU it looks at.
    #[inline]
    fn scan_from(&self, from: usize, view: impl Fn(u64) -> u64) -> Option<usize> {
        if from >= self.nr_bits {
            return None;
        }
        let words = self.words();
        let mut idx = from / WORD_BITS;
        let mut word = view(words[idx]) & (!0u64 << (from % WORD_BITS));
        loop {
            if word != 0 {
                return Some(idx * WORD_BITS + word.trailing_zeros() as usize);
            }
            idx += 1;
            word = view(*words.get(idx)?);
        }
    }

    /// Iterates over the CPUs in the mask in ascending order.
    pub fn iter(&self) -> Iter<'_> {
        let words = self.words();
        Iter {
            words,
            idx: 0,
            current: words.first().copied().unwrap_or(0),
        }
    }

    /// Iterates like the kernel's `for_each_cpu_wrap(cpu, mask, start)`: the
    /// CPUs `>= start` in ascending order, then those below `start`. A
    /// `start` beyond the mask simply yields every CPU in ascending order.
    ///
    /// Load balancing and idle-CPU searches use this so that CPUs starting
    /// their scan at different points spread out instead of all hitting the
    /// lowest-numbered CPU.
    pub fn iter_wrap(&self, start: usize) -> IterWrap<'_> {
        let words = self.words();
        if start < self.nr_bits {
            let idx = start / WORD_BITS;
            let current = words[idx] & (!0u64 << (start % WORD_BITS));
            return IterWrap { words, start, idx, current, wrapped: false };
        }
        IterWrap { words, start, idx: 0, current: words.first().copied().unwrap_or(0), wrapped: true }
    }

    /// The intersection of two masks.
    pub fn and(&self, other: &CpuMask) -> CpuMask {
        let mut out = self.clone();
        out.and_assign(other);
        out
    }

    /// The union of two masks.
    pub fn or(&self, other: &CpuMask) -> CpuMask {
        let mut out = self.clone();
        out.or_assign(other);
        out
    }

    /// `self &= other`.
    pub fn and_assign(&mut self, other: &CpuMask) {
        self.debug_check_size(other);
        let theirs = other.words();
        for (i, w) in self.words_mut().iter_mut().enumerate() {
            *w &= theirs.get(i).copied().unwrap_or(0);
        }
    }

    /// `self |= other`.
    pub fn or_assign(&mut self, other: &CpuMask) {
        self.debug_check_size(other);
        for (w, t) in self.words_mut().iter_mut().zip(other.words()) {
            *w |= t;
        }
        // A larger `other` may carry bits beyond our size.
        self.clear_tail();
    }

    /// `self &= !other`: removes the CPUs of `other`.
    pub fn andnot_assign(&mut self, other: &CpuMask) {
        self.debug_check_size(other);
        for (w, t) in self.words_mut().iter_mut().zip(other.words()) {
            *w &= !t;
        }
    }

    /// Whether the two masks share at least one CPU.
    pub fn intersects(&self, other: &CpuMask) -> bool {
        self.debug_check_size(other);
        self.words()
            .iter()
            .zip(other.words())
            .any(|(a, b)| a & b != 0)
    }

    /// Whether every CPU of `self` is also in `other`.
    pub fn is_subset_of(&self, other: &CpuMask) -> bool {
        self.debug_check_size(other);
        let theirs = other.words();
        self.words()
            .iter()
            .enumerate()
            .all(|(i, w)| w & !theirs.get(i).copied().unwrap_or(0) == 0)
    }

    /// The lowest CPU present in both masks, without building the
    /// intersection.
    pub fn first_and(&self, other: &CpuMask) -> Option<usize> {
        self.debug_check_size(other);
        self.words()
            .iter()
            .zip(other.words())
            .enumerate()
            .find_map(|(i, (a, b))| {
                let both = a & b;
                (both != 0).then(|| i * WORD_BITS + both.trailing_zeros() as usize)
            })
    }

    /// The first CPU of `self & a` (and `& b` when given) at or after
    /// `start`, else the lowest one below it: what
    /// `iter_wrap(start).find(..)` over the intersection finds, without
    /// building it (the kernel's `cpumask_next_and_wrap()`). A `start`
    /// beyond the mask searches from CPU 0.
    pub fn next_and_wrap(&self, a: &CpuMask, b: Option<&CpuMask>, start: usize) -> Option<usize> {
        self.debug_check_size(a);
        let (x, y) = (self.words(), a.words());
        let z = b.map(CpuMask::words);
        let word = |i: usize| x[i] & y.get(i).copied().unwrap_or(0) & z.map_or(!0, |z| z.get(i).copied().unwrap_or(0));
        let found = |i: usize, w: u64| Some(i * WORD_BITS + w.trailing_zeros() as usize);
        let start = if start >= self.nr_bits { 0 } else { start };
        let (si, sb) = (start / WORD_BITS, start % WORD_BITS);
        if si >= x.len() {
            return None;
        }
        let first = word(si);
        let above = first & (!0u64 << sb);
        if above != 0 {
            return found(si, above);
        }
        for i in si + 1..x.len() {
            let w = word(i);
            if w != 0 {
                return found(i, w);
            }
        }
        for i in 0..si {
            let w = word(i);
            if w != 0 {
                return found(i, w);
            }
        }
        let below = first & ((1u64 << sb) - 1);
        (below != 0).then(|| si * WORD_BITS + below.trailing_zeros() as usize)
    }

    fn debug_check_size(&self, other: &CpuMask) {
        debug_assert_eq!(
            self.nr_bits, other.nr_bits,
            "CpuMask operation on masks of different sizes"
        );
    }

    /// Parses the kernel / `taskset -c` cpulist syntax for a machine with
    /// `nr_cpus` CPUs.
    ///
    /// Items are separated by commas and may be surrounded by whitespace:
    /// `N` (single CPU), `A-B` (inclusive range), `A-B:S` (every S-th CPU of
    /// the range, e.g. `0-15:2` = even CPUs) and the kernel's
    /// `A-B:U/G` (the first U CPUs of every group of G, e.g. `0-15:2/8` =
    /// 0,1,8,9). As in the kernel, the letter `N` stands for the last CPU,
    /// so `2-N` means "CPU 2 and up". A blank string is the empty mask,
    /// matching what [`to_cpulist`](Self::to_cpulist) prints for it.
    pub fn parse_cpulist(s: &str, nr_cpus: usize) -> Result<CpuMask, CpuListError> {
        let mut mask = CpuMask::new(nr_cpus);
        if s.trim().is_empty() {
            return Ok(mask);
        }
        for (i, raw) in s.split(',').enumerate() {
            let item = raw.trim();
            if item.is_empty() {
                return Err(CpuListError::EmptyItem {
                    position: i + 1,
                    list: s.to_string(),
                });
            }
            let region = Region::parse(item, nr_cpus)?;
            region.check_fits(nr_cpus)?;
            region.apply(&mut mask);
        }
        Ok(mask)
    }

    /// Formats the mask in canonical cpulist form, e.g. `0-3,8,10-11`: runs
    /// of two or more consecutive CPUs become ranges. The empty mask gives
    /// an empty string.
    pub fn to_cpulist(&self) -> String {
        let mut out = String::new();
        let mut from = 0;
        while let Some(start) = self.next_set(from) {
            let end = self.next_clear(start).unwrap_or(self.nr_bits) - 1;
            if !out.is_empty() {
                out.push(',');
            }
            // Writing into a String cannot fail.
            let _ = if start == end {
                write!(out, "{start}")
            } else {
                write!(out, "{start}-{end}")
            };
            from = end + 1;
        }
        out
    }
}

impl fmt::Display for CpuMask {
    /// Displays the mask as a cpulist (see [`CpuMask::to_cpulist`]).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_cpulist())
    }
}

impl<'a> IntoIterator for &'a CpuMask {
    type Item = usize;
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

/// One parsed cpulist item: CPUs `start..=end`, taking the first `used` of
/// every `group` CPUs (a plain range has `used == group == 1`).
struct Region {
    start: usize,
    end: usize,
    used: usize,
    group: usize,
}

impl Region {
    fn parse(item: &str, nr_cpus: usize) -> Result<Region, CpuListError> {
        let (range, stride) = match item.split_once(':') {
            Some((range, stride)) => (range, Some(stride)),
            None => (item, None),
        };
        let number = |text: &str| parse_cpu_number(text.trim(), item, nr_cpus);
        let (start, end) = match range.split_once('-') {
            Some((a, b)) => (number(a)?, number(b)?),
            None => {
                let cpu = number(range)?;
                (cpu, cpu)
            }
        };
        if start > end {
            return Err(CpuListError::ReversedRange {
                item: item.to_string(),
                start,
                end,
            });
        }
        let (used, group) = match stride {
            Some(stride) => parse_stride(stride.trim(), item)?,
            None => (1, 1),
        };
        Ok(Region {
            start,
            end,
            used,
            group,
        })
    }

    /// The highest CPU this item actually selects; with a stride that can be
    /// below `end`, and only selected CPUs should be able to be out of range.
    fn last_selected(&self) -> usize {
        let last_group = self.start + (self.end - self.start) / self.group * self.group;
        self.end.min(last_group + (self.used - 1))
    }

    fn check_fits(&self, nr_cpus: usize) -> Result<(), CpuListError> {
        let cpu = self.last_selected();
        if cpu >= nr_cpus {
            return Err(CpuListError::OutOfRange { cpu, nr_cpus });
        }
        Ok(())
    }

    fn apply(&self, mask: &mut CpuMask) {
        let mut group_start = self.start;
        loop {
            let group_end = self.end.min(group_start + (self.used - 1));
            for cpu in group_start..=group_end {
                mask.set(cpu);
            }
            match group_start.checked_add(self.group) {
                Some(next) if next <= self.end => group_start = next,
                _ => break,
            }
        }
    }
}

/// Parses one CPU number. `usize::from_str` would also accept a leading
/// `+`, which is not cpulist syntax, hence the explicit digit check.
fn parse_cpu_number(text: &str, item: &str, nr_cpus: usize) -> Result<usize, CpuListError> {
    let bad = || CpuListError::BadNumber {
        text: text.to_string(),
        item: item.to_string(),
    };
    if text == "N" {
        // "N" on a machine without CPUs can only be out of range.
        return nr_cpus
            .checked_sub(1)
            .ok_or(CpuListError::OutOfRange { cpu: 0, nr_cpus });
    }
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    text.parse().map_err(|_| bad())
}

/// Parses the part after ':' into (used, group).
fn parse_stride(text: &str, item: &str) -> Result<(usize, usize), CpuListError> {
    let bad = |reason: &str| CpuListError::BadStride {
        item: item.to_string(),
        reason: reason.to_string(),
    };
    let number = |t: &str| -> Result<usize, CpuListError> {
        let t = t.trim();
        if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad(
                "expected \":stride\" or \":used/group\" with decimal numbers",
            ));
        }
        t.parse()
            .map_err(|_| bad("expected \":stride\" or \":used/group\" with decimal numbers"))
    };
    let (used, group) = match text.split_once('/') {
        Some((u, g)) => (number(u)?, number(g)?),
        None => (1, number(text)?),
    };
    if group == 0 {
        return Err(bad("the stride (group size) must be at least 1"));
    }
    if used == 0 || used > group {
        return Err(bad("the used count must be between 1 and the group size"));
    }
    Ok((used, group))
}

/// Ascending iterator over the CPUs of a [`CpuMask`].
#[derive(Clone, Debug)]
pub struct Iter<'a> {
    words: &'a [u64],
    idx: usize,
    current: u64,
}

impl Iterator for Iter<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        while self.current == 0 {
            self.idx += 1;
            self.current = *self.words.get(self.idx)?;
        }
        let cpu = self.idx * WORD_BITS + self.current.trailing_zeros() as usize;
        // Clears the lowest set bit.
        self.current &= self.current - 1;
        Some(cpu)
    }
}

impl FusedIterator for Iter<'_> {}

/// Iterator returned by [`CpuMask::iter_wrap`]. It holds the mask's words
/// and the word being walked (its CPUs already yielded cleared), so that a
/// step is a trailing-zero count rather than a fresh search from a CPU id
/// (an idle-CPU search of an LLC takes one step per CPU it looks at).
#[derive(Clone, Debug)]
pub struct IterWrap<'a> {
    words: &'a [u64],
    start: usize,
    idx: usize,
    current: u64,
    /// Walking the CPUs below `start`, after those from `start` up.
    wrapped: bool,
}

impl Iterator for IterWrap<'_> {
    type Item = usize;

    #[inline(always)]
    fn next(&mut self) -> Option<usize> {
        loop {
            if self.current != 0 {
                let cpu = self.idx * WORD_BITS + self.current.trailing_zeros() as usize;
                if self.wrapped && cpu >= self.start {
                    self.current = 0;
                    self.idx = self.words.len();
                    return None;
                }
                self.current &= self.current - 1;
                return Some(cpu);
            }
            self.idx += 1;
            if self.idx >= self.words.len() {
                if self.wrapped {
                    return None;
                }
                self.wrapped = true;
                self.idx = 0;
                self.current = self.words.first().copied().unwrap_or(0);
                continue;
            }
            self.current = self.words[self.idx];
        }
    }
}

impl FusedIterator for IterWrap<'_> {}

mod summary;
pub use summary::SummaryMask;

#[cfg(test)]
mod tests;
