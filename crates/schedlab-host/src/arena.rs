//! BPF arenas (kernel/bpf/arena.c): a region of up to 4 GiB shared by BPF
//! code and user space, populated page by page with
//! bpf_arena_alloc_pages() and emptied with bpf_arena_free_pages().
//!
//! Natively the region is one anonymous mapping with no page committed
//! until it is touched. In the kernel a BPF program and user space see the
//! arena at different addresses with the same low 32 bits, and `__arena`
//! pointers are converted between the two (cast_kern() / cast_user());
//! here both sides use the mapping's one address, so the casts are the
//! identity and an `__arena` pointer is an ordinary pointer. Allocation is
//! first fit from the lowest page, as the kernel's range tree gives it;
//! freed pages are discarded (MADV_DONTNEED) and read as zeros when they
//! are allocated again, as fresh kernel pages do.
//!
//! The kernel finds an address's page from its low 32 bits only
//! (compute_pgoff()), and libbpf maps the arena at `map_extra`, 4 GiB
//! aligned in the scx headers (1 << 44), so an `__arena` NULL names the
//! first page: scx's arena library reserves pages from NULL as a guard.
//! The mapping here starts on a 4 GiB boundary too, which gives both the
//! same meaning.

pub(super) const PAGE: usize = 4096;
/// The arena's alignment (see the module doc).
const ALIGN: usize = 1 << 32;

pub(crate) struct Arena {
    base: *mut u8,
    pages: u32,
    /// Page bitmaps, bit `p % 64` of word `p / 64` for page `p`: allocated
    /// (or faulted in) pages, and reserved ones (never both).
    used: Bits,
    reserved: Bits,
    /// How many bits `used` has set.
    nr_used: usize,
}

/// A bitmap of pages.
#[derive(Default)]
struct Bits(Vec<u64>);

impl Bits {
    fn new(pages: u32) -> Bits {
        Bits(vec![0; (pages as usize).div_ceil(64)])
    }

    #[cfg(test)]
    fn get(&self, p: u32) -> bool {
        self.0[p as usize / 64] & (1 << (p % 64)) != 0
    }

    /// Calls `f(word index, mask)` for the parts of words covering pages
    /// `[first, end)`.
    fn spans(first: u32, end: u32, mut f: impl FnMut(usize, u64)) {
        let mut p = first;
        while p < end {
            let lo = p % 64;
            let n = (end - p).min(64 - lo);
            let m = if n == 64 { !0 } else { ((1u64 << n) - 1) << lo };
            f(p as usize / 64, m);
            p += n;
        }
    }

    /// Whether any of pages `[first, end)` is set.
    fn any(&self, first: u32, end: u32) -> bool {
        let mut hit = false;
        Bits::spans(first, end, |w, m| hit |= self.0[w] & m != 0);
        hit
    }

    /// Sets pages `[first, end)`; returns how many were not set before.
    fn set(&mut self, first: u32, end: u32) -> usize {
        let mut new = 0;
        Bits::spans(first, end, |w, m| {
            new += (m & !self.0[w]).count_ones() as usize;
            self.0[w] |= m;
        });
        new
    }
}

impl Arena {
    pub(crate) fn new(pages: u32) -> Arena {
        let len = pages as usize * PAGE;
        // Map 4 GiB more than needed and keep the 4 GiB aligned part.
        let span = len + ALIGN;
        // SAFETY: an anonymous private mapping with no address hint; the
        // result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                span,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Arena { base: std::ptr::null_mut(), pages: 0, used: Bits::default(), reserved: Bits::default(), nr_used: 0 };
        }
        let start = p as usize;
        let base = start.next_multiple_of(ALIGN);
        // SAFETY: both ranges lie inside the mapping just made and outside
        // the part kept.
        unsafe {
            if base > start {
                libc::munmap(p, base - start);
            }
            let tail = start + span - (base + len);
            if tail > 0 {
                libc::munmap((base + len) as *mut libc::c_void, tail);
            }
        }
        Arena { base: base as *mut u8, pages, used: Bits::new(pages), reserved: Bits::new(pages), nr_used: 0 }
    }

    /// compute_pgoff(): the page `addr` names, from its low 32 bits (NULL
    /// is the first page); None if it is not page aligned or past the end.
    fn page_of(&self, addr: usize) -> Option<u32> {
        let off = (addr as u32).wrapping_sub(self.base as usize as u32) as usize;
        (off % PAGE == 0 && off / PAGE < self.pages as usize).then_some((off / PAGE) as u32)
    }

    /// User space touching `[addr, addr + len)` through its mapping: a page
    /// not yet allocated is faulted in (arena_vm_fault() allocates it); a
    /// reserved page, or one outside the arena, faults (false).
    pub(crate) fn touch(&mut self, addr: usize, len: usize) -> bool {
        let b = self.base as usize;
        let Some(off) = addr.checked_sub(b) else { return false };
        let Some(end) = off.checked_add(len) else { return false };
        if len == 0 || end > self.pages as usize * PAGE {
            return false;
        }
        let (first, last) = ((off / PAGE) as u32, ((end - 1) / PAGE) as u32);
        if self.reserved.any(first, last + 1) {
            return false;
        }
        self.take(first, last + 1);
        true
    }

    /// Whether `[addr, addr + len)` lies inside the arena's mapping.
    pub(crate) fn contains(&self, addr: usize, len: usize) -> bool {
        let b = self.base as usize;
        !self.base.is_null() && addr >= b && addr.checked_add(len).is_some_and(|e| e <= b + self.pages as usize * PAGE)
    }

    fn free_run(&self, first: u32, cnt: u32) -> bool {
        !self.used.any(first, first + cnt) && !self.reserved.any(first, first + cnt)
    }

    /// Marks pages `[first, end)` allocated.
    fn take(&mut self, first: u32, end: u32) {
        self.nr_used += self.used.set(first, end);
    }

    /// The pages of word `w` that are allocated or reserved, with the bits
    /// past the arena's end counted as taken.
    fn taken_word(&self, w: usize) -> u64 {
        let t = self.used.0[w] | self.reserved.0[w];
        let past = (w as u64 + 1) * 64;
        if past > u64::from(self.pages) {
            t | !0 << (u64::from(self.pages) % 64)
        } else {
            t
        }
    }

    /// The lowest page in `[from, limit)` whose taken state is `taken`;
    /// `limit` if none (`limit` is at most `pages`).
    fn next(&self, from: u32, limit: u32, taken: bool) -> u32 {
        if from >= limit {
            return limit;
        }
        let last = (limit - 1) as usize / 64;
        let mut w = from as usize / 64;
        let flip = if taken { 0 } else { !0 };
        let mut bits = (self.taken_word(w) ^ flip) & (!0 << (from % 64));
        loop {
            if bits != 0 {
                return (w as u32 * 64 + bits.trailing_zeros()).min(limit);
            }
            if w == last {
                return limit;
            }
            w += 1;
            bits = self.taken_word(w) ^ flip;
        }
    }

    /// First fit: the lowest page starting `cnt` free ones (`cnt` is from 1
    /// to `pages`). From each free page it looks for a taken one among the
    /// `cnt` pages there; a run cut short resumes past the taken page, so no
    /// start page is missed.
    fn first_fit(&self, cnt: u32) -> Option<u32> {
        let mut p = 0;
        loop {
            p = self.next(p, self.pages, false);
            let end = p.checked_add(cnt).filter(|&e| e <= self.pages)?;
            let q = self.next(p, end, true);
            if q >= end {
                return Some(p);
            }
            p = q;
        }
    }

    /// bpf_arena_alloc_pages(): `cnt` pages at `addr` (0: the lowest free
    /// run); None if they are not free, `addr` is not a page of the arena,
    /// or `flags` is not 0.
    pub(crate) fn alloc(&mut self, addr: usize, cnt: u32, flags: u64) -> Option<usize> {
        if flags != 0 || cnt == 0 || cnt > self.pages {
            return None;
        }
        let first = if addr != 0 {
            let p = self.page_of(addr)?;
            (p.checked_add(cnt)? <= self.pages && self.free_run(p, cnt)).then_some(p)?
        } else {
            self.first_fit(cnt)?
        };
        self.take(first, first + cnt);
        Some(self.base as usize + first as usize * PAGE)
    }

    /// bpf_arena_free_pages(): releases the allocated pages among `cnt`
    /// from `addr`; their contents are gone.
    pub(crate) fn free(&mut self, addr: usize, cnt: u32) {
        let Some(first) = self.page_of(addr) else { return };
        let end = first.saturating_add(cnt).min(self.pages);
        let base = self.base;
        let mut gone = 0;
        Bits::spans(first, end, |w, m| {
            let mut hit = self.used.0[w] & m;
            self.used.0[w] &= !hit;
            gone += hit.count_ones() as usize;
            while hit != 0 {
                // One run of allocated pages in this word at a time.
                let lo = hit.trailing_zeros();
                let n = (hit >> lo).trailing_ones();
                let p = w * 64 + lo as usize;
                // SAFETY: pages `[p, p + n)` lie inside this arena's mapping.
                unsafe { libc::madvise(base.add(p * PAGE).cast(), n as usize * PAGE, libc::MADV_DONTNEED) };
                hit &= !((((1u128 << n) - 1) as u64) << lo);
            }
        });
        self.nr_used -= gone;
    }

    /// bpf_arena_reserve_pages(): keeps free pages from being allocated;
    /// -EINVAL outside the arena, -EBUSY if one is allocated.
    pub(crate) fn reserve(&mut self, addr: usize, cnt: u32) -> i64 {
        let Some(first) = self.page_of(addr) else { return -22 };
        if first.checked_add(cnt).is_none_or(|e| e > self.pages) {
            return -22;
        }
        if self.used.any(first, first + cnt) {
            return -16;
        }
        self.reserved.set(first, first + cnt);
        0
    }

    /// Takes the last pages of the arena for `bytes` of globals (libbpf's
    /// place for the `.addr_space.1` section); their start, or None when
    /// they do not fit or are taken.
    pub(crate) fn place_top(&mut self, bytes: usize) -> Option<usize> {
        let cnt = u32::try_from(bytes.div_ceil(PAGE)).ok()?;
        let first = self.pages.checked_sub(cnt)?;
        if cnt == 0 || !self.free_run(first, cnt) {
            return None;
        }
        self.take(first, first + cnt);
        Some(self.base as usize + first as usize * PAGE)
    }

    pub(crate) fn allocated_pages(&self) -> usize {
        self.nr_used
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        if !self.base.is_null() {
            // SAFETY: the mapping made in new(), unmapped once.
            unsafe { libc::munmap(self.base.cast(), self.pages as usize * PAGE) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_fit_reuse_and_zeroed_pages() {
        let mut a = Arena::new(8);
        let base = a.base as usize;
        let p0 = a.alloc(0, 2, 0).unwrap();
        assert_eq!(p0, base);
        let p2 = a.alloc(0, 1, 0).unwrap();
        assert_eq!(p2, base + 2 * PAGE);
        // SAFETY: p0 is an allocated page of the arena.
        unsafe { *(p0 as *mut u64) = 42 };
        a.free(p0, 2);
        assert_eq!(a.alloc(0, 1, 0), Some(base), "the lowest free page again");
        // SAFETY: as above.
        assert_eq!(unsafe { *(base as *const u64) }, 0, "a freed page comes back zeroed");
        assert_eq!(a.alloc(base + 2 * PAGE, 1, 0), None, "taken");
        assert_eq!(a.alloc(base + 3 * PAGE, 1, 0), Some(base + 3 * PAGE));
        assert_eq!(a.alloc(base + 1, 1, 0), None, "not page aligned");
        assert_eq!(a.alloc(0, 1, 1), None, "flags must be 0");
        assert_eq!(a.reserve(base + 3 * PAGE, 1), -16);
        assert_eq!(a.reserve(base + 4 * PAGE, 4), 0);
        assert_eq!(a.alloc(0, 2, 0), None, "only page 1 is left");
        assert_eq!(a.alloc(0, 1, 0), Some(base + PAGE));
        assert_eq!(a.allocated_pages(), 4);
        assert!(a.touch(base + PAGE + 8, 16), "allocated");
        assert!(!a.touch(base + 4 * PAGE, 8), "reserved");
        assert!(!a.touch(base + 8 * PAGE - 8, 16), "past the end");
    }

    #[test]
    fn user_space_faults_pages_in() {
        let mut a = Arena::new(4);
        let base = a.base as usize;
        a.alloc(0, 1, 0).unwrap();
        assert!(a.touch(base + PAGE - 8, 16), "page 0 allocated, page 1 faulted in");
        assert_eq!(a.alloc(0, 1, 0), Some(base + 2 * PAGE), "the faulted-in page is taken");
        assert_eq!(a.place_top(100), Some(base + 3 * PAGE), "globals take the last page");
        assert_eq!(a.place_top(100), None, "taken");
    }

    #[test]
    fn null_names_the_first_page_as_in_the_kernel() {
        let mut a = Arena::new(16);
        let base = a.base as usize;
        assert_eq!(base % ALIGN, 0, "4 GiB aligned");
        assert_eq!(a.reserve(0, 2), 0, "NULL reserves from the first page");
        assert_eq!(a.alloc(0, 1, 0), Some(base + 2 * PAGE));
        assert_eq!(a.alloc(PAGE * 5, 1, 0), Some(base + 5 * PAGE), "an offset names the same page as the full address");
        assert_eq!(a.reserve(16 * PAGE, 1), -22, "past the end");
    }

    /// The allocator as it was with ordered sets of pages and a first fit
    /// that tries every start page: the reference for the bitmaps.
    struct RefArena {
        base: usize,
        pages: u32,
        used: std::collections::BTreeSet<u32>,
        reserved: std::collections::BTreeSet<u32>,
    }

    impl RefArena {
        fn page_of(&self, addr: usize) -> Option<u32> {
            let off = (addr as u32).wrapping_sub(self.base as u32) as usize;
            (off % PAGE == 0 && off / PAGE < self.pages as usize).then_some((off / PAGE) as u32)
        }

        fn touch(&mut self, addr: usize, len: usize) -> bool {
            let Some(off) = addr.checked_sub(self.base) else { return false };
            let Some(end) = off.checked_add(len) else { return false };
            if len == 0 || end > self.pages as usize * PAGE {
                return false;
            }
            let pages = (off / PAGE) as u32..=((end - 1) / PAGE) as u32;
            if pages.clone().any(|p| self.reserved.contains(&p)) {
                return false;
            }
            self.used.extend(pages);
            true
        }

        fn free_run(&self, first: u32, cnt: u32) -> bool {
            (first..first + cnt).all(|p| !self.used.contains(&p) && !self.reserved.contains(&p))
        }

        fn alloc(&mut self, addr: usize, cnt: u32, flags: u64) -> Option<usize> {
            if flags != 0 || cnt == 0 || cnt > self.pages {
                return None;
            }
            let first = if addr != 0 {
                let p = self.page_of(addr)?;
                (p.checked_add(cnt)? <= self.pages && self.free_run(p, cnt)).then_some(p)?
            } else {
                (0..=self.pages - cnt).find(|&p| self.free_run(p, cnt))?
            };
            self.used.extend(first..first + cnt);
            Some(self.base + first as usize * PAGE)
        }

        fn free(&mut self, addr: usize, cnt: u32) {
            let Some(first) = self.page_of(addr) else { return };
            let end = first.saturating_add(cnt).min(self.pages);
            for p in first..end {
                self.used.remove(&p);
            }
        }

        fn reserve(&mut self, addr: usize, cnt: u32) -> i64 {
            let Some(first) = self.page_of(addr) else { return -22 };
            if first.checked_add(cnt).is_none_or(|e| e > self.pages) {
                return -22;
            }
            if (first..first + cnt).any(|p| self.used.contains(&p)) {
                return -16;
            }
            self.reserved.extend(first..first + cnt);
            0
        }

        fn place_top(&mut self, bytes: usize) -> Option<usize> {
            let cnt = u32::try_from(bytes.div_ceil(PAGE)).ok()?;
            let first = self.pages.checked_sub(cnt)?;
            if cnt == 0 || !self.free_run(first, cnt) {
                return None;
            }
            self.used.extend(first..first + cnt);
            Some(self.base + first as usize * PAGE)
        }
    }

    /// Random allocations, frees, reservations, faults and placements give
    /// the same results and leave the same pages taken as the reference.
    #[test]
    fn bitmaps_match_the_reference_first_fit() {
        for seed in 0..300u64 {
            let mut rng = fastrand::Rng::with_seed(seed);
            let pages = match seed % 6 {
                0 => 64,
                1 => 128,
                2 => rng.u32(1..8),
                3 => rng.u32(60..70),
                _ => rng.u32(1..400),
            };
            let mut a = Arena::new(pages);
            let base = a.base as usize;
            let mut r = RefArena { base, pages, used: Default::default(), reserved: Default::default() };
            // Mostly small runs, sometimes long ones (or too long).
            let cnt = |rng: &mut fastrand::Rng| if rng.u8(..10) == 0 { rng.u32(0..=pages + 2) } else { rng.u32(1..6) };
            // A page's address (sometimes its offset only, or unaligned, or past the end).
            let addr = |rng: &mut fastrand::Rng| {
                let p = rng.usize(0..pages as usize + 3);
                match rng.u8(..8) {
                    0 => p * PAGE,
                    1 => base + p * PAGE + rng.usize(1..PAGE),
                    _ => base + p * PAGE,
                }
            };
            for step in 0..400 {
                let what = format!("seed {seed}, {pages} pages, step {step}");
                match rng.u8(..16) {
                    0..=6 => {
                        let (n, f) = (cnt(&mut rng), u64::from(rng.u8(..40) == 0));
                        assert_eq!(a.alloc(0, n, f), r.alloc(0, n, f), "alloc(0, {n}) {what}");
                    }
                    7 => {
                        let (at, n) = (addr(&mut rng), cnt(&mut rng));
                        assert_eq!(a.alloc(at, n, 0), r.alloc(at, n, 0), "alloc({at:#x}, {n}) {what}");
                    }
                    8..=11 => {
                        let (at, n) = (addr(&mut rng), cnt(&mut rng));
                        a.free(at, n);
                        r.free(at, n);
                    }
                    12 => {
                        let (at, n) = (addr(&mut rng), cnt(&mut rng));
                        assert_eq!(a.reserve(at, n), r.reserve(at, n), "reserve({at:#x}, {n}) {what}");
                    }
                    13 | 14 => {
                        let at = base + rng.usize(0..pages as usize * PAGE + 2 * PAGE);
                        let len = rng.usize(0..3 * PAGE);
                        assert_eq!(a.touch(at, len), r.touch(at, len), "touch({at:#x}, {len}) {what}");
                    }
                    _ => {
                        let bytes = rng.usize(0..4 * PAGE);
                        assert_eq!(a.place_top(bytes), r.place_top(bytes), "place_top({bytes}) {what}");
                    }
                }
                assert_eq!(a.allocated_pages(), r.used.len(), "{what}");
            }
            for p in 0..pages {
                assert_eq!(a.used.get(p), r.used.contains(&p), "page {p} allocated, seed {seed}");
                assert_eq!(a.reserved.get(p), r.reserved.contains(&p), "page {p} reserved, seed {seed}");
            }
        }
    }
}
