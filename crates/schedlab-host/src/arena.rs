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

use std::collections::BTreeSet;

pub(super) const PAGE: usize = 4096;
/// The arena's alignment (see the module doc).
const ALIGN: usize = 1 << 32;

pub(crate) struct Arena {
    base: *mut u8,
    pages: u32,
    used: BTreeSet<u32>,
    reserved: BTreeSet<u32>,
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
            return Arena { base: std::ptr::null_mut(), pages: 0, used: BTreeSet::new(), reserved: BTreeSet::new() };
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
        Arena { base: base as *mut u8, pages, used: BTreeSet::new(), reserved: BTreeSet::new() }
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
        let pages = (off / PAGE) as u32..=((end - 1) / PAGE) as u32;
        if pages.clone().any(|p| self.reserved.contains(&p)) {
            return false;
        }
        self.used.extend(pages);
        true
    }

    /// Whether `[addr, addr + len)` lies inside the arena's mapping.
    pub(crate) fn contains(&self, addr: usize, len: usize) -> bool {
        let b = self.base as usize;
        !self.base.is_null() && addr >= b && addr.checked_add(len).is_some_and(|e| e <= b + self.pages as usize * PAGE)
    }

    fn free_run(&self, first: u32, cnt: u32) -> bool {
        (first..first + cnt).all(|p| !self.used.contains(&p) && !self.reserved.contains(&p))
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
            (0..=self.pages - cnt).find(|&p| self.free_run(p, cnt))?
        };
        self.used.extend(first..first + cnt);
        Some(self.base as usize + first as usize * PAGE)
    }

    /// bpf_arena_free_pages(): releases the allocated pages among `cnt`
    /// from `addr`; their contents are gone.
    pub(crate) fn free(&mut self, addr: usize, cnt: u32) {
        let Some(first) = self.page_of(addr) else { return };
        let end = first.saturating_add(cnt).min(self.pages);
        for p in first..end {
            if self.used.remove(&p) {
                // SAFETY: page `p` lies inside this arena's mapping.
                unsafe { libc::madvise(self.base.add(p as usize * PAGE).cast(), PAGE, libc::MADV_DONTNEED) };
            }
        }
    }

    /// bpf_arena_reserve_pages(): keeps free pages from being allocated;
    /// -EINVAL outside the arena, -EBUSY if one is allocated.
    pub(crate) fn reserve(&mut self, addr: usize, cnt: u32) -> i64 {
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

    /// Takes the last pages of the arena for `bytes` of globals (libbpf's
    /// place for the `.addr_space.1` section); their start, or None when
    /// they do not fit or are taken.
    pub(crate) fn place_top(&mut self, bytes: usize) -> Option<usize> {
        let cnt = u32::try_from(bytes.div_ceil(PAGE)).ok()?;
        let first = self.pages.checked_sub(cnt)?;
        if cnt == 0 || !self.free_run(first, cnt) {
            return None;
        }
        self.used.extend(first..first + cnt);
        Some(self.base as usize + first as usize * PAGE)
    }

    pub(crate) fn allocated_pages(&self) -> usize {
        self.used.len()
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
}
