//! The process's allocator: the system's, with large blocks mapped on huge-page boundaries and
//! backed by huge pages where the kernel offers them on request (Linux with transparent huge
//! pages in `madvise` mode, the default of Ubuntu and Debian; `always` serves them anyway).
//!
//! Opening a snapshot fills a dozen arrays of one entry per event (the trace's columns, the
//! unpickler's memo, the replay's totals and lifetimes): at a million events, ~125 MB touched
//! for the first time. With 4 KiB pages about a fifth of the load's time went to the kernel
//! faulting, clearing and unmapping them. Blocks of [`HUGE_PAGE_MIN_BYTES`] and more are
//! therefore mapped here, 2 MiB-aligned and advised `MADV_HUGEPAGE`, and grown with `mremap`
//! (no copy): load + replay of a 1 M-event file went from 0.37 to 0.29 s here at the same peak
//! memory (BENCHMARKS.md, issue 37). Where the kernel has no huge pages the blocks are plain
//! anonymous mappings, as the system allocator makes for blocks this big anyway; on other
//! systems everything goes to the system allocator.
//!
//! The binary and the benchmarks install it with `#[global_allocator]`; the library itself
//! allocates through whatever allocator its user installs.

use std::alloc::{GlobalAlloc, Layout, System};

/// [`System`] for small blocks; huge-page mappings for blocks of [`HUGE_PAGE_MIN_BYTES`] and more.
pub struct HugePageAlloc;

/// Blocks from this size on are mapped here (two huge pages: a smaller block would gain a few
/// page faults and lose up to half its mapping to rounding).
pub const HUGE_PAGE_MIN_BYTES: usize = 4 << 20;

#[cfg(target_os = "linux")]
mod large {
    //! Blocks of [`HUGE_PAGE_MIN_BYTES`] and more, mapped by this module on huge-page
    //! boundaries. Which allocator made a block is told by its size alone: the `GlobalAlloc`
    //! contract gives `dealloc` and `realloc` the size the block was made with.

    use super::HUGE_PAGE_MIN_BYTES;

    pub const HUGE_PAGE_BYTES: usize = 2 << 20;

    /// The mapping behind a block of `size` bytes: whole huge pages.
    pub fn mapped_len(size: usize) -> usize {
        size.next_multiple_of(HUGE_PAGE_BYTES)
    }

    pub fn is_large(size: usize) -> bool {
        size >= HUGE_PAGE_MIN_BYTES
    }

    /// A zeroed block of `size` bytes (at least [`HUGE_PAGE_MIN_BYTES`]) aligned to a huge page,
    /// advised to be backed by huge pages; null when the system has no room.
    pub fn map(size: usize) -> *mut u8 {
        let len = mapped_len(size);
        let Some(padded) = len.checked_add(HUGE_PAGE_BYTES) else {
            return std::ptr::null_mut();
        };
        #[expect(
            unsafe_code,
            reason = "mmap, munmap and madvise have no safe wrapper in std"
        )]
        // SAFETY: a fresh private anonymous mapping is made, the parts of it outside the aligned
        // range are unmapped (both lie inside the mapping just made), and the advice only
        // concerns the range kept. Nothing else refers to these addresses.
        unsafe {
            let raw = libc::mmap(
                std::ptr::null_mut(),
                padded,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            if raw == libc::MAP_FAILED {
                return std::ptr::null_mut();
            }
            let raw = raw as usize;
            let start = raw.next_multiple_of(HUGE_PAGE_BYTES);
            if start > raw {
                libc::munmap(raw as *mut libc::c_void, start - raw);
            }
            let tail = raw + padded - (start + len);
            if tail > 0 {
                libc::munmap((start + len) as *mut libc::c_void, tail);
            }
            // Advice only: without transparent huge pages the block is served by small pages.
            libc::madvise(start as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
            start as *mut u8
        }
    }

    /// Returns a block [`map`] made for `size` bytes.
    pub fn unmap(ptr: *mut u8, size: usize) {
        #[expect(unsafe_code, reason = "munmap has no safe wrapper in std")]
        // SAFETY: `ptr` and `mapped_len(size)` are exactly the range `map(size)` kept, and the
        // caller (dealloc) gives up the block.
        unsafe {
            libc::munmap(ptr.cast(), mapped_len(size));
        }
    }

    /// Grows or shrinks a block [`map`] made for `old` bytes to `new` bytes (both large): the
    /// kernel moves the pages, nothing is copied. Null when the system has no room (the old
    /// block is then untouched).
    pub fn remap(ptr: *mut u8, old: usize, new: usize) -> *mut u8 {
        let (old_len, new_len) = (mapped_len(old), mapped_len(new));
        if old_len == new_len {
            return ptr;
        }
        #[expect(unsafe_code, reason = "mremap and madvise have no safe wrapper in std")]
        // SAFETY: `ptr`/`old_len` is a whole mapping this module made; mremap either moves it
        // whole to the returned address or fails leaving it as it was.
        unsafe {
            let moved = libc::mremap(ptr.cast(), old_len, new_len, libc::MREMAP_MAYMOVE);
            if moved == libc::MAP_FAILED {
                return std::ptr::null_mut();
            }
            libc::madvise(moved, new_len, libc::MADV_HUGEPAGE);
            moved.cast()
        }
    }
}

// SAFETY: blocks under HUGE_PAGE_MIN_BYTES (or needing more than page alignment) go to `System`
// with the caller's arguments unchanged; larger ones are whole mappings of this module, told
// apart by the size the contract hands back, and moved between the two kinds by copying.
#[expect(unsafe_code, reason = "a global allocator is an unsafe trait")]
unsafe impl GlobalAlloc for HugePageAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        #[cfg(target_os = "linux")]
        if mapped(layout) {
            return large::map(layout.size());
        }
        // SAFETY: forwarded as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // A fresh mapping is zeroed by the kernel.
        #[cfg(target_os = "linux")]
        if mapped(layout) {
            return large::map(layout.size());
        }
        // SAFETY: forwarded as is.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        #[cfg(target_os = "linux")]
        if mapped(layout) {
            large::unmap(ptr, layout.size());
            return;
        }
        // SAFETY: forwarded as is.
        unsafe { System.dealloc(ptr, layout) }
    }

    #[cfg(target_os = "linux")]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY (for the layouts below): the contract makes `new_size` non-zero and, rounded
        // up to `layout.align()`, no more than isize::MAX.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (mapped(layout), mapped(new_layout)) {
            (true, true) => large::remap(ptr, layout.size(), new_size),
            // SAFETY: forwarded as is.
            (false, false) => unsafe { System.realloc(ptr, layout, new_size) },
            _ => {
                // SAFETY: a new block of the new layout; the old one's first bytes copied into it
                // (both hold at least that many); the old one freed with its own layout.
                unsafe {
                    let new = self.alloc(new_layout);
                    if !new.is_null() {
                        std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                        self.dealloc(ptr, layout);
                    }
                    new
                }
            }
        }
    }
}

/// Whether this module maps the block itself (large, and page alignment is enough).
#[cfg(target_os = "linux")]
fn mapped(layout: Layout) -> bool {
    large::is_large(layout.size()) && layout.align() <= 4096
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_keep_their_contents_across_both_kinds() {
        let alloc = HugePageAlloc;
        let big = HUGE_PAGE_MIN_BYTES;
        // (made, grown or shrunk to): small to small, small to large, large to large (a new
        // mapping length, and the same one), large to small.
        for (size, new_size) in [
            (2, 4096),
            (4096, big + 1),
            (big, 3 * big),
            (big + 1, big + 2),
            (9 << 20, 1024),
        ] {
            let layout = Layout::from_size_align(size, 8).expect("layout");
            #[expect(unsafe_code, reason = "exercising the allocator directly")]
            // SAFETY: layouts of non-zero size; every block is written within its size and
            // freed once with the layout it has.
            unsafe {
                let ptr = alloc.alloc_zeroed(layout);
                assert!(!ptr.is_null());
                assert_eq!((*ptr, *ptr.add(size - 1)), (0, 0), "zeroed");
                ptr.write(7);
                ptr.add(size.min(new_size) - 1).write(9);
                let moved = alloc.realloc(ptr, layout, new_size);
                assert!(!moved.is_null());
                assert_eq!(*moved, 7, "{size} -> {new_size}: first byte kept");
                assert_eq!(
                    *moved.add(size.min(new_size) - 1),
                    9,
                    "{size} -> {new_size}: last"
                );
                moved.add(new_size - 1).write(1);
                alloc.dealloc(moved, Layout::from_size_align(new_size, 8).expect("layout"));
            }
        }
    }

    #[test]
    fn large_blocks_are_aligned_to_huge_pages_and_strictly_aligned_ones_still_served() {
        let alloc = HugePageAlloc;
        #[expect(unsafe_code, reason = "exercising the allocator directly")]
        // SAFETY: as above.
        unsafe {
            let layout = Layout::from_size_align(HUGE_PAGE_MIN_BYTES, 64).expect("layout");
            let ptr = alloc.alloc(layout);
            #[cfg(target_os = "linux")]
            assert_eq!(ptr as usize % (2 << 20), 0);
            alloc.dealloc(ptr, layout);
            let layout = Layout::from_size_align(HUGE_PAGE_MIN_BYTES, 1 << 16).expect("layout");
            let ptr = alloc.alloc(layout);
            assert_eq!(ptr as usize % (1 << 16), 0);
            alloc.dealloc(ptr, layout);
        }
    }
}
