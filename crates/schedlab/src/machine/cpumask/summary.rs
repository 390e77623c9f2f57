//! A CPU mask that also keeps a one-bit-per-word summary of which of its
//! 64-bit words are non-empty: the two-level bitmap that makes a search of
//! a sparse mask on a large machine cost the words that have CPUs, not all
//! of them.
//!
//! sched_ext's built-in idle masks are the case: on a busy 4,096-CPU
//! machine a wakeup's `cpumask_any_and_distribute()` over the idle mask
//! would otherwise read 64 words (of the idle mask, the task's affinity and
//! the LLC span) to find that nothing is idle. The summary is kept exact
//! by every mutation, so a search gives the same answer as the plain mask's.

use std::ops::Deref;

use super::{CpuMask, WORD_BITS};

/// A [`CpuMask`] with a summary of its non-empty words. It reads like a
/// `CpuMask` (it dereferences to one); it changes only through its own
/// methods, which keep the summary exact.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SummaryMask {
    mask: CpuMask,
    /// Bit `i`: word `i` of `mask` has a CPU.
    nonempty: Vec<u64>,
}

impl Deref for SummaryMask {
    type Target = CpuMask;
    fn deref(&self) -> &CpuMask {
        &self.mask
    }
}

impl SummaryMask {
    /// Masks of up to this many words are searched word by word: the
    /// summary only pays off when it lets a search skip words.
    const DIRECT_WORDS: usize = 8;

    /// An empty mask of `nr_cpus` CPUs.
    pub fn new(nr_cpus: usize) -> Self {
        let mask = CpuMask::new(nr_cpus);
        let nonempty = vec![0; mask.words().len().div_ceil(WORD_BITS)];
        SummaryMask { mask, nonempty }
    }

    fn refresh(&mut self, word: usize) {
        let (i, b) = (word / WORD_BITS, 1u64 << (word % WORD_BITS));
        if self.mask.words().get(word).is_some_and(|&w| w != 0) {
            self.nonempty[i] |= b;
        } else if let Some(s) = self.nonempty.get_mut(i) {
            *s &= !b;
        }
    }

    /// Refreshes the summary of every word `other` has CPUs in.
    fn refresh_words_of(&mut self, other: &CpuMask) {
        for (i, &w) in other.words().iter().enumerate() {
            if w != 0 {
                self.refresh(i);
            }
        }
    }

    /// Adds `cpu`.
    pub fn set(&mut self, cpu: usize) {
        self.mask.set(cpu);
        self.refresh(cpu / WORD_BITS);
    }

    /// Removes `cpu`.
    pub fn clear(&mut self, cpu: usize) {
        self.mask.clear(cpu);
        self.refresh(cpu / WORD_BITS);
    }

    /// `self |= other`.
    pub fn or_assign(&mut self, other: &CpuMask) {
        self.mask.or_assign(other);
        self.refresh_words_of(other);
    }

    /// `self &= !other`.
    pub fn andnot_assign(&mut self, other: &CpuMask) {
        self.mask.andnot_assign(other);
        self.refresh_words_of(other);
    }

    /// Whether no CPU is in the mask: one summary word per 4,096 CPUs is
    /// read, not every word of the mask.
    pub fn is_empty(&self) -> bool {
        self.nonempty.iter().all(|&s| s == 0)
    }

    /// The first non-empty word index in `lo..hi`, by the summary.
    fn next_nonempty(&self, lo: usize, hi: usize) -> Option<usize> {
        if lo >= hi {
            return None;
        }
        let mut i = lo / WORD_BITS;
        let mut s = *self.nonempty.get(i)? & (!0u64 << (lo % WORD_BITS));
        loop {
            if s != 0 {
                let word = i * WORD_BITS + s.trailing_zeros() as usize;
                return (word < hi).then_some(word);
            }
            i += 1;
            if i * WORD_BITS >= hi {
                return None;
            }
            s = *self.nonempty.get(i)?;
        }
    }

    /// [`CpuMask::next_and_wrap`], reading only the words the summary
    /// says have CPUs. Same answer, same order.
    pub fn next_and_wrap(&self, a: &CpuMask, b: Option<&CpuMask>, start: usize) -> Option<usize> {
        let x = self.mask.words();
        if x.len() <= Self::DIRECT_WORDS {
            return self.mask.next_and_wrap(a, b, start);
        }
        let y = a.words();
        let z = b.map(CpuMask::words);
        let word = |i: usize| x[i] & y.get(i).copied().unwrap_or(0) & z.map_or(!0, |z| z.get(i).copied().unwrap_or(0));
        let start = if start >= self.mask.nr_bits() { 0 } else { start };
        let (si, sb) = (start / WORD_BITS, start % WORD_BITS);
        let first = word(si);
        let above = first & (!0u64 << sb);
        if above != 0 {
            return Some(si * WORD_BITS + above.trailing_zeros() as usize);
        }
        // The words after the start's, then those before it.
        for (lo, hi) in [(si + 1, x.len()), (0, si)] {
            let mut from = lo;
            while let Some(i) = self.next_nonempty(from, hi) {
                let w = word(i);
                if w != 0 {
                    return Some(i * WORD_BITS + w.trailing_zeros() as usize);
                }
                from = i + 1;
            }
        }
        let below = first & ((1u64 << sb) - 1);
        (below != 0).then(|| si * WORD_BITS + below.trailing_zeros() as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// After any sequence of changes the summary is exact and a search
        /// finds what the plain mask's search finds.
        #[test]
        fn searches_agree_with_the_plain_mask(
            nr in proptest::sample::select(vec![1usize, 63, 64, 65, 600, 1024, 4096, 5000]),
            ops in proptest::collection::vec((0u8..4, 0usize..5000, 0usize..5000), 0..200),
            a in proptest::collection::vec(0usize..5000, 0..300),
            b in proptest::option::of(proptest::collection::vec(0usize..5000, 0..3000)),
            start in 0usize..5100,
        ) {
            let m = |v: &[usize]| CpuMask::from_cpus(nr, v.iter().map(|&x| x % nr));
            let mut s = SummaryMask::new(nr);
            let mut plain = CpuMask::new(nr);
            for &(op, c, d) in &ops {
                let (c, d) = (c % nr, d % nr);
                match op {
                    0 => { s.set(c); plain.set(c); }
                    1 => { s.clear(c); plain.clear(c); }
                    2 => { let o = m(&[c, d]); s.or_assign(&o); plain.or_assign(&o); }
                    _ => { let o = m(&[c, d]); s.andnot_assign(&o); plain.andnot_assign(&o); }
                }
            }
            proptest::prop_assert_eq!(&*s, &plain);
            proptest::prop_assert_eq!(s.is_empty(), plain.is_empty());
            for (i, &w) in plain.words().iter().enumerate() {
                let bit = s.nonempty[i / WORD_BITS] >> (i % WORD_BITS) & 1;
                proptest::prop_assert_eq!(bit == 1, w != 0, "word {}", i);
            }
            let (ma, mb) = (m(&a), b.as_deref().map(m));
            proptest::prop_assert_eq!(s.next_and_wrap(&ma, mb.as_ref(), start), plain.next_and_wrap(&ma, mb.as_ref(), start));
            // Fill the mask more for the search, through the summary-keeping ops.
            for &c in &a { s.set(c % nr); plain.set(c % nr); }
            proptest::prop_assert_eq!(s.next_and_wrap(&ma, mb.as_ref(), start), plain.next_and_wrap(&ma, mb.as_ref(), start));
            let all = CpuMask::full(nr);
            proptest::prop_assert_eq!(s.next_and_wrap(&all, None, start), plain.next_and_wrap(&all, None, start));
        }
    }

    #[test]
    fn an_empty_mask_finds_nothing_and_a_lone_cpu_is_found_from_anywhere() {
        let mut s = SummaryMask::new(4096);
        let all = CpuMask::full(4096);
        assert_eq!(s.next_and_wrap(&all, None, 100), None);
        assert!(s.is_empty());
        s.set(4000);
        assert!(!s.is_empty());
        for start in [0, 3999, 4000, 4001, 4095, 5000] {
            assert_eq!(s.next_and_wrap(&all, None, start), Some(4000), "from {start}");
        }
        s.clear(4000);
        assert!(s.is_empty());
        assert_eq!(s.next_and_wrap(&all, None, 0), None);
    }
}
