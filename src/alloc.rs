//! The process allocator, with one change: allocations of
//! `ALLOCATION_LAZY_BYTES_MIN` or more are reserved lazily.
//!
//! Why: kafka-protocol 0.18 sizes a `Vec` from an array length read off the wire
//! before it decodes a single element, so an 18-byte frame claiming 2^31 topics
//! asks for ~100 GB up front. The system allocator refuses and Rust aborts the
//! process: one unauthenticated frame would take the broker down. Every request of
//! every API goes through that decoder, so the fix belongs under all of them, at
//! the allocation itself: a huge allocation becomes an anonymous mapping with
//! `MAP_NORESERVE`, which costs address space but no memory until written. The
//! decoder then fails on its own bounds check at the first missing element (it
//! can write at most as many elements as the frame has bytes, and the frame size
//! is already bounded by `socket.request.max.bytes`), the `Vec` is dropped and the
//! mapping returned. No structure the broker builds legitimately reaches this
//! size, so ordinary allocations are untouched and go to the system allocator.
//!
//! The binary installs it with `#[global_allocator]`; a program embedding the
//! broker should do the same (see docs/embedding.md). With `vm.overcommit_memory=2` the
//! kernel refuses such mappings and the old abort returns; ARCHITECTURE.md lists
//! this limit.
//!
//! This is the one module that needs `unsafe`: `GlobalAlloc` is an unsafe trait
//! and `mmap`/`munmap` are foreign calls. Each block states what it relies on.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::ptr;

use crate::limits::ALLOCATION_LAZY_BYTES_MIN;

/// Alignment an anonymous mapping always has (the smallest page size).
const MAPPING_ALIGNMENT_BYTES: usize = 4096;

/// System allocator, except that huge allocations are lazily committed mappings.
#[derive(Debug, Default, Clone, Copy)]
pub struct LazyHugeAlloc;

fn is_lazy(layout: &Layout) -> bool {
    layout.size() >= ALLOCATION_LAZY_BYTES_MIN && layout.align() <= MAPPING_ALIGNMENT_BYTES
}

fn map_lazily(size: usize) -> *mut u8 {
    // SAFETY: an anonymous private mapping touches no existing memory; the kernel
    // picks the address. MAP_NORESERVE defers commit to first write.
    let address = unsafe {
        libc::mmap(
            ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if address == libc::MAP_FAILED {
        ptr::null_mut()
    } else {
        address.cast()
    }
}

// SAFETY: every pointer handed out is either from `System` (and returned to it) or
// from `map_lazily` (and returned with `munmap`); which one is decided by the
// layout alone, and Rust passes the same layout to `dealloc` as to `alloc`.
unsafe impl GlobalAlloc for LazyHugeAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if is_lazy(&layout) {
            map_lazily(layout.size())
        } else {
            System.alloc(layout)
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if is_lazy(&layout) {
            // Anonymous mappings are zero-filled by the kernel.
            map_lazily(layout.size())
        } else {
            System.alloc_zeroed(layout)
        }
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        if is_lazy(&layout) {
            let result = libc::munmap(pointer.cast(), layout.size());
            debug_assert_eq!(result, 0, "munmap of a mapping we made failed");
        } else {
            System.dealloc(pointer, layout)
        }
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
        match (is_lazy(&layout), is_lazy(&new_layout)) {
            (false, false) => return System.realloc(pointer, layout, new_size),
            (true, true) => {
                // Move the mapping itself: copying would commit every page.
                let moved = libc::mremap(
                    pointer.cast(),
                    layout.size(),
                    new_size,
                    libc::MREMAP_MAYMOVE,
                );
                return if moved == libc::MAP_FAILED {
                    ptr::null_mut()
                } else {
                    moved.cast()
                };
            }
            _ => {}
        }
        // Between the two kinds one side is small, so the copy is small.
        let moved = self.alloc(new_layout);
        if !moved.is_null() {
            ptr::copy_nonoverlapping(pointer, moved, layout.size().min(new_size));
            self.dealloc(pointer, layout);
        }
        moved
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_layouts_map_lazily_and_round_trip() {
        let allocator = LazyHugeAlloc;
        // 64 GiB: far beyond this machine's memory, fine as address space.
        let layout = Layout::from_size_align(64 << 30, 8).expect("valid layout");
        // SAFETY: the layout is non-zero; the pointer is written within bounds and
        // freed with the same layout.
        unsafe {
            let pointer = allocator.alloc(layout);
            assert!(!pointer.is_null());
            *pointer = 7;
            *pointer.add(layout.size() - 1) = 9;
            assert_eq!(*pointer, 7);
            let grown = allocator.realloc(pointer, layout, layout.size() + 4096);
            assert!(!grown.is_null());
            assert_eq!(*grown, 7);
            allocator.dealloc(
                grown,
                Layout::from_size_align(layout.size() + 4096, 8).expect("valid"),
            );
        }
    }

    #[test]
    fn small_layouts_use_the_system_allocator() {
        let allocator = LazyHugeAlloc;
        let layout = Layout::from_size_align(128, 16).expect("valid layout");
        // SAFETY: as above.
        unsafe {
            let pointer = allocator.alloc(layout);
            assert!(!pointer.is_null());
            let grown = allocator.realloc(pointer, layout, 256);
            assert!(!grown.is_null());
            allocator.dealloc(grown, Layout::from_size_align(256, 16).expect("valid"));
        }
    }
}
