//! [`HugePageAlloc`]: the system allocator, with the model's large arrays and its heap on
//! transparent huge pages.
//!
//! **Owns:** the choice of page size for the model's memory: the large arrays (the
//! transport's flows, the channels, circuits and nodes, the event queue's wheel) and the
//! heap of small blocks (a circuit's cell queues, a node's channel list). **Must not touch:**
//! what is allocated or when; a run's results cannot depend on this allocator (nothing in
//! the model reads an address).
//!
//! Why: a full-scale network holds gigabytes of per-connection and per-circuit state, and an
//! event touches a few entries of it at random. With 4 KiB pages nearly every such touch
//! misses the TLB, and the page-table walk misses the cache too (the page tables of 18 GiB
//! are 36 MiB, more than the last-level cache). With 2 MiB pages the tables shrink 512-fold.
//! Linux hands out transparent huge pages to anonymous memory that asks for them with
//! `madvise(MADV_HUGEPAGE)` when `/sys/kernel/mm/transparent_hugepage/enabled` is
//! `madvise` (the common default); with `always` the advice changes nothing, with `never`
//! the kernel ignores it. Measured in `docs/performance.md` ("2026-11-25 (later)"): the
//! full-scale run takes a fifth less time, with the same results.
//!
//! Where the memory comes from, on Linux:
//! - A block of at least [`HUGE_PAGE_THRESHOLD`] bytes gets its own mapping, starting on a
//!   huge-page boundary and advised before anything touches it. It grows by moving its page
//!   tables (`mremap`) to a fresh aligned range, so its huge pages stay whole and nothing is
//!   copied. (glibc would serve such a block from a mapping of its own too, but one that
//!   starts 16 bytes into a page and moves to wherever the kernel likes when it grows, which
//!   splits its huge pages back into small ones.)
//! - Every other block comes from [`System`] (glibc's heap below the program break). The
//!   heap's growth is advised as it appears; for that the allocator sets one glibc option for
//!   the whole process at its first allocation, `M_TOP_PAD` = 32 MiB (the heap grows in
//!   steps of at least 32 MiB instead of 128 KiB), which also fixes glibc's mmap threshold
//!   at 128 KiB. Only the main thread's heap is covered; the simulator runs on one thread.
//!
//! Elsewhere than Linux the allocator is [`System`] as it is.

use std::alloc::{GlobalAlloc, Layout, System};

/// The smallest block that gets a mapping of its own on huge pages (two huge pages: below
/// that, rounding up to whole huge pages would waste too much).
pub const HUGE_PAGE_THRESHOLD: usize = 4 << 20;

/// The size of a transparent huge page on x86-64 and (with 4 KiB base pages) aarch64.
const HUGE_PAGE: usize = 2 << 20;

/// The system allocator, with blocks of at least [`HUGE_PAGE_THRESHOLD`] bytes and the
/// heap's growth on transparent huge pages (module docs). Install it in a binary or a
/// `cdylib` with `#[global_allocator] static ALLOC: HugePageAlloc = HugePageAlloc;`.
#[derive(Debug, Default, Clone, Copy)]
pub struct HugePageAlloc;

/// Whether a block of `size` bytes aligned to `align` gets a mapping of its own.
#[inline]
fn is_large(size: usize, align: usize) -> bool {
    cfg!(target_os = "linux") && size >= HUGE_PAGE_THRESHOLD && align <= HUGE_PAGE
}

// SAFETY: large blocks (by their layout, which the caller passes unchanged to `dealloc` and
// `realloc`) are whole mappings of `large`, aligned to a huge page and so to any alignment
// `is_large` admits; every other block is `System`'s. A block changing class on `realloc`
// is copied into a block of the other class and freed by its own.
unsafe impl GlobalAlloc for HugePageAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if is_large(layout.size(), layout.align()) {
            return large::map(layout.size());
        }
        let p = System.alloc(layout);
        heap::advise_growth();
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if is_large(layout.size(), layout.align()) {
            return large::map(layout.size()); // a fresh anonymous mapping reads as zeros
        }
        let p = System.alloc_zeroed(layout);
        heap::advise_growth();
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if is_large(layout.size(), layout.align()) {
            large::unmap(ptr, layout.size());
        } else {
            System.dealloc(ptr, layout);
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let align = layout.align();
        match (is_large(layout.size(), align), is_large(new_size, align)) {
            (true, true) => large::remap(ptr, layout.size(), new_size),
            (false, false) => {
                let p = System.realloc(ptr, layout, new_size);
                heap::advise_growth();
                p
            }
            _ => {
                // SAFETY: the caller guarantees `new_size` with `align` is a valid layout.
                let new_layout = Layout::from_size_align_unchecked(new_size, align);
                let p = self.alloc(new_layout);
                if !p.is_null() {
                    std::ptr::copy_nonoverlapping(ptr, p, layout.size().min(new_size));
                    self.dealloc(ptr, layout);
                }
                p
            }
        }
    }
}

/// Asks for huge pages on `[start, start + len)`. The advice is a hint: a kernel without
/// transparent huge pages refuses it, and the memory then works as before, so the result is
/// ignored.
#[cfg(target_os = "linux")]
fn advise_range(start: usize, len: usize) {
    // SAFETY: the range is memory this allocator owns; MADV_HUGEPAGE changes no contents and
    // no permissions.
    unsafe {
        libc::madvise(start as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
    }
}

/// Large blocks: each a private anonymous mapping of whole huge pages, starting on a
/// huge-page boundary.
#[cfg(target_os = "linux")]
mod large {
    use super::{advise_range, HUGE_PAGE};

    /// The length of the mapping holding a block of `size` bytes.
    pub(super) fn mapped_len(size: usize) -> usize {
        size.next_multiple_of(HUGE_PAGE)
    }

    /// `len` bytes (a multiple of [`HUGE_PAGE`]) of fresh memory starting on a huge-page
    /// boundary, or null. Maps a huge page more than asked and returns the ends.
    unsafe fn reserve(len: usize) -> *mut u8 {
        let Some(over) = len.checked_add(HUGE_PAGE) else { return std::ptr::null_mut() };
        let p = libc::mmap(std::ptr::null_mut(), over, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0);
        if p == libc::MAP_FAILED {
            return std::ptr::null_mut();
        }
        let base = p as usize;
        let start = base.next_multiple_of(HUGE_PAGE);
        let head = start - base;
        if head > 0 {
            libc::munmap(p, head);
        }
        let tail = over - head - len;
        if tail > 0 {
            libc::munmap((start + len) as *mut libc::c_void, tail);
        }
        start as *mut u8
    }

    /// A new block of `size` bytes, advised, or null.
    pub(super) unsafe fn map(size: usize) -> *mut u8 {
        let len = mapped_len(size);
        let p = reserve(len);
        if !p.is_null() {
            advise_range(p as usize, len);
        }
        p
    }

    pub(super) unsafe fn unmap(ptr: *mut u8, size: usize) {
        libc::munmap(ptr as *mut libc::c_void, mapped_len(size));
    }

    /// The block at `ptr` resized from `old` to `new` bytes, or null (the block is then
    /// unchanged).
    pub(super) unsafe fn remap(ptr: *mut u8, old: usize, new: usize) -> *mut u8 {
        let (old_len, new_len) = (mapped_len(old), mapped_len(new));
        if new_len <= old_len {
            if new_len < old_len {
                libc::munmap(ptr.add(new_len) as *mut libc::c_void, old_len - new_len);
            }
            return ptr;
        }
        // Grow in place when the range after the block is free; else move the page tables
        // (not the contents) to a fresh aligned range, where huge pages stay whole.
        let q = libc::mremap(ptr as *mut libc::c_void, old_len, new_len, 0);
        let q = if q != libc::MAP_FAILED {
            q as *mut u8
        } else {
            let dst = reserve(new_len);
            if dst.is_null() {
                return dst;
            }
            let flags = libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED;
            let q = libc::mremap(ptr as *mut libc::c_void, old_len, new_len, flags, dst as *mut libc::c_void);
            if q == libc::MAP_FAILED {
                libc::munmap(dst as *mut libc::c_void, new_len);
                return std::ptr::null_mut();
            }
            q as *mut u8
        };
        // The mapping keeps its advice when it grows or moves; advising again is cheap and
        // does not rely on that.
        advise_range(q as usize, new_len);
        q
    }
}

/// Without Linux no block is large (`is_large`); these are never called.
#[cfg(not(target_os = "linux"))]
mod large {
    pub(super) unsafe fn map(_size: usize) -> *mut u8 {
        unreachable!("no large blocks outside Linux")
    }
    pub(super) unsafe fn unmap(_ptr: *mut u8, _size: usize) {
        unreachable!("no large blocks outside Linux")
    }
    pub(super) unsafe fn remap(_ptr: *mut u8, _old: usize, _new: usize) -> *mut u8 {
        unreachable!("no large blocks outside Linux")
    }
}

/// The heap's growth. Small blocks (a circuit's cell queues, a node's channel list, a
/// connection's pending acknowledgements) come from the heap below the program break, which
/// grows as the network is built; the whole huge pages it grows by are advised as they
/// appear. `sbrk(0)` reads the break glibc caches, without a system call. The atomics are
/// relaxed: two threads racing here could only advise a range twice or not at all, and the
/// advice is a hint.
#[cfg(target_os = "linux")]
mod heap {
    use super::{advise_range, HUGE_PAGE};
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// The end of the heap advised so far, a multiple of [`HUGE_PAGE`]; 0 before the
    /// first allocation (the heap below the break seen then belongs to whoever loaded us).
    static ADVISED_END: AtomicUsize = AtomicUsize::new(0);

    /// How much more than asked glibc takes from the kernel each time the heap grows
    /// (`M_TOP_PAD`; glibc's default is 128 KiB). glibc writes a header into each growth at
    /// once, so a growth smaller than a huge page is already on small pages when the
    /// allocator sees it; with 32 MiB growths, one huge page in sixteen is lost that way.
    const TOP_PAD: i32 = 32 << 20;

    #[inline]
    pub(super) fn advise_growth() {
        // SAFETY: sbrk(0) only reads the current break.
        let brk = unsafe { libc::sbrk(0) } as usize;
        if brk == usize::MAX {
            return; // no break (sbrk failed): nothing to advise
        }
        let end = brk / HUGE_PAGE * HUGE_PAGE;
        let done = ADVISED_END.load(Ordering::Relaxed);
        if done == 0 {
            ADVISED_END.store(brk.next_multiple_of(HUGE_PAGE), Ordering::Relaxed);
            set_top_pad();
        } else if end > done {
            advise_range(done, end - done);
            ADVISED_END.store(end, Ordering::Relaxed);
        } else if end < done {
            // glibc trimmed the heap; pages it grows back into are new and unadvised.
            ADVISED_END.store(end, Ordering::Relaxed);
        }
    }

    #[cfg(target_env = "gnu")]
    fn set_top_pad() {
        // SAFETY: mallopt takes glibc's own lock; no allocator lock is held here. It also
        // fixes glibc's mmap threshold at its 128 KiB default: blocks from there to
        // HUGE_PAGE_THRESHOLD get glibc mappings of their own, on small pages.
        unsafe {
            libc::mallopt(libc::M_TOP_PAD, TOP_PAD);
        }
    }

    #[cfg(not(target_env = "gnu"))]
    fn set_top_pad() {}
}

#[cfg(not(target_os = "linux"))]
mod heap {
    #[inline]
    pub(super) fn advise_growth() {}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill(p: *mut u8, len: usize) {
        for i in (0..len).step_by(4096) {
            unsafe { *p.add(i) = (i / 4096) as u8 };
        }
    }

    fn check(p: *mut u8, len: usize) {
        for i in (0..len).step_by(4096) {
            assert_eq!(unsafe { *p.add(i) }, (i / 4096) as u8, "byte {i}");
        }
    }

    /// A block keeps its contents through every kind of resize: small to large, large to
    /// larger (moving), larger to large (shrinking in place) and large to small.
    #[test]
    fn blocks_keep_their_contents_across_every_resize() {
        let a = HugePageAlloc;
        let sizes = [64 << 10, HUGE_PAGE_THRESHOLD + 100, 5 * HUGE_PAGE_THRESHOLD, 2 * HUGE_PAGE_THRESHOLD, 1 << 20];
        unsafe {
            let mut layout = Layout::from_size_align(sizes[0], 64).unwrap();
            let mut p = a.alloc(layout);
            assert!(!p.is_null());
            fill(p, layout.size());
            for &new in &sizes[1..] {
                let keep = layout.size().min(new);
                p = a.realloc(p, layout, new);
                assert!(!p.is_null());
                check(p, keep);
                layout = Layout::from_size_align(new, 64).unwrap();
                fill(p, new);
                if is_large(new, 64) {
                    assert_eq!(p as usize % HUGE_PAGE, 0, "a large block starts on a huge page");
                }
            }
            a.dealloc(p, layout);
        }
    }

    #[test]
    fn a_large_zeroed_block_reads_as_zeros() {
        let a = HugePageAlloc;
        let layout = Layout::from_size_align(HUGE_PAGE_THRESHOLD + 1, 8).unwrap();
        unsafe {
            let p = a.alloc_zeroed(layout);
            assert!(!p.is_null());
            assert!(std::slice::from_raw_parts(p, layout.size()).iter().all(|&b| b == 0));
            a.dealloc(p, layout);
        }
    }

    /// The advice reaches the kernel, and stays with a block that grows: the mapping holding
    /// it carries the `hg` (MADV_HUGEPAGE) flag. Whether the kernel then finds free huge
    /// pages depends on the machine, so the test checks the flag, not the pages.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_large_block_is_advised_for_huge_pages() {
        if !std::path::Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists() {
            eprintln!("kernel without transparent huge pages: nothing to check");
            return;
        }
        let a = HugePageAlloc;
        let layout = Layout::from_size_align(2 * HUGE_PAGE_THRESHOLD, 64).unwrap();
        unsafe {
            let p = a.alloc(layout);
            assert!(!p.is_null());
            let flags = vm_flags_at(p as usize).expect("the block's mapping is in /proc/self/smaps");
            assert!(flags.split_whitespace().any(|f| f == "hg"), "VmFlags: {flags}");
            let grown = 8 * HUGE_PAGE_THRESHOLD;
            let q = a.realloc(p, layout, grown);
            assert!(!q.is_null());
            let flags = vm_flags_at(q as usize + grown - 1).expect("the grown block's mapping");
            assert!(flags.split_whitespace().any(|f| f == "hg"), "VmFlags after growth: {flags}");
            a.dealloc(q, Layout::from_size_align(grown, 64).unwrap());
        }
    }

    /// The `VmFlags` line of the mapping holding `addr`, from `/proc/self/smaps`.
    #[cfg(target_os = "linux")]
    fn vm_flags_at(addr: usize) -> Option<String> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let mut inside = false;
        for line in smaps.lines() {
            let first = line.split_whitespace().next().unwrap_or("");
            if let Some((lo, hi)) = first.split_once('-') {
                if let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16)) {
                    inside = lo <= addr && addr < hi;
                    continue;
                }
            }
            if inside {
                if let Some(flags) = line.strip_prefix("VmFlags:") {
                    return Some(flags.trim().to_string());
                }
            }
        }
        None
    }
}
