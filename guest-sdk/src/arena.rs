//! [`CallArena`], a bump allocator for guests, opted into with
//!
//! ```ignore
//! #[cfg(target_arch = "wasm32")]
//! #[global_allocator]
//! static ALLOCATOR: assignd_guest_sdk::arena::CallArena = assignd_guest_sdk::arena::CallArena;
//! ```
//!
//! The host runs every call in a fresh instance and drops its memory after
//! it, so a guest's heap lives for one call and freeing is mostly wasted
//! work. Rust's default allocator for wasm32 (dlmalloc) spends some
//! hundred wasm operators on a malloc and a free, and the host calls the
//! guest's allocator once for every string it lowers into the guest
//! (10,000 member ids for 10,000 members). The arena hands out memory by
//! moving a pointer. A block freed or resized while it is the newest is
//! given back or grown in place (a `Vec` growing by `push`, a scratch
//! vector dropped before the next allocation); any other freed block is
//! reclaimed only with the instance. So the memory a call takes is what it
//! allocates in all, not what it holds at once: an assignor that
//! allocates and frees in a long loop should keep the default allocator.
//! The host's memory limit bounds either.
//!
//! It owns only the allocator; the memory it grows belongs to the instance.

#[cfg(any(target_arch = "wasm32", test))]
use core::alloc::Layout;

/// Bytes of a wasm page.
#[cfg(any(target_arch = "wasm32", test))]
const PAGE_BYTES: usize = 1 << 16;

/// Pages the arena asks the host for at least at a time: every
/// `memory.grow` is a call into the host.
#[cfg(any(target_arch = "wasm32", test))]
const GROW_PAGES_MIN: usize = 16;

/// The allocator. On wasm32 it is a [`core::alloc::GlobalAlloc`]; a guest
/// has one thread, which the arena relies on.
pub struct CallArena;

/// The arena's state: blocks are handed out from `next` up to `end`.
/// Addresses from `dirty_end` up were never handed out, so they are still
/// zero (fresh memory of a fresh instance).
#[cfg(any(target_arch = "wasm32", test))]
#[derive(Debug)]
struct Bump {
    next: usize,
    end: usize,
    dirty_end: usize,
}

#[cfg(any(target_arch = "wasm32", test))]
impl Bump {
    const EMPTY: Bump = Bump {
        next: 0,
        end: 0,
        dirty_end: 0,
    };

    /// A block for `layout`; `grow(pages)` adds pages at the end of memory
    /// and returns the old end, or `None` when it cannot.
    #[inline]
    fn alloc(&mut self, layout: Layout, grow: impl FnMut(usize) -> Option<usize>) -> Option<usize> {
        // A mask, not `next_multiple_of`: the alignment is not a constant
        // here, and a division is one of the slowest wasm operators.
        let mask = layout.align() - 1;
        let start = self.next.checked_add(mask)? & !mask;
        let block_end = start.checked_add(layout.size())?;
        if block_end <= self.end {
            self.next = block_end;
            return Some(start);
        }
        self.alloc_grown(layout, grow)
    }

    #[cold]
    fn alloc_grown(
        &mut self,
        layout: Layout,
        mut grow: impl FnMut(usize) -> Option<usize>,
    ) -> Option<usize> {
        let worst = layout.size().checked_add(layout.align())?;
        let pages = worst.div_ceil(PAGE_BYTES).max(GROW_PAGES_MIN);
        let old_end = grow(pages)?;
        if old_end != self.end {
            // Memory grew by someone else in between: start afresh at the
            // new pages (what lies between is not the arena's).
            self.next = old_end;
        }
        self.end = old_end + pages * PAGE_BYTES;
        let mask = layout.align() - 1;
        let start = (self.next + mask) & !mask;
        self.next = start + layout.size();
        Some(start)
    }

    /// A zeroed block: only its part below `dirty_end` needs clearing.
    fn alloc_zeroed(
        &mut self,
        layout: Layout,
        grow: impl FnMut(usize) -> Option<usize>,
    ) -> Option<usize> {
        let start = self.alloc(layout, grow)?;
        let dirty = self.dirty_end.min(start + layout.size());
        if dirty > start {
            // SAFETY: `start..dirty` lies in the block just handed out.
            unsafe { core::ptr::write_bytes(start as *mut u8, 0, dirty - start) };
        }
        Some(start)
    }

    /// Frees a block: given back if it is the newest.
    #[inline]
    fn dealloc(&mut self, ptr: usize, layout: Layout) {
        if ptr + layout.size() == self.next {
            self.note_dirty();
            self.next = ptr;
        }
    }

    /// Grows or shrinks a block: in place if it is the newest and the
    /// memory after it suffices, else by a copy into a new block.
    fn realloc(
        &mut self,
        ptr: usize,
        layout: Layout,
        new_size: usize,
        grow: impl FnMut(usize) -> Option<usize>,
    ) -> Option<usize> {
        let newest = ptr + layout.size() == self.next;
        if newest
            && let Some(block_end) = ptr.checked_add(new_size)
            && block_end <= self.end
        {
            self.note_dirty();
            self.next = block_end;
            return Some(ptr);
        }
        if new_size <= layout.size() {
            return Some(ptr);
        }
        let new_layout = Layout::from_size_align(new_size, layout.align()).ok()?;
        let start = self.alloc(new_layout, grow)?;
        // SAFETY: both blocks are live and distinct (`start` is past the
        // old block, which stays allocated); `layout.size()` bytes of the
        // old one are readable.
        unsafe {
            core::ptr::copy_nonoverlapping(ptr as *const u8, start as *mut u8, layout.size())
        };
        Some(start)
    }

    /// Everything below `next` may have been written.
    #[inline]
    fn note_dirty(&mut self) {
        self.dirty_end = self.dirty_end.max(self.next);
    }
}

#[cfg(target_arch = "wasm32")]
mod global {
    use core::alloc::{GlobalAlloc, Layout};
    use core::cell::UnsafeCell;

    use super::{Bump, CallArena, PAGE_BYTES};

    struct State(UnsafeCell<Bump>);

    // SAFETY: wasm32-unknown-unknown guests have one thread (no `atomics`
    // target feature, no thread spawning in the component model world).
    unsafe impl Sync for State {}

    static STATE: State = State(UnsafeCell::new(Bump::EMPTY));

    fn grow(pages: usize) -> Option<usize> {
        let old_pages = core::arch::wasm32::memory_grow(0, pages);
        (old_pages != usize::MAX).then(|| old_pages * PAGE_BYTES)
    }

    fn state() -> &'static mut Bump {
        // SAFETY: one thread, and no allocator call re-enters another.
        unsafe { &mut *STATE.0.get() }
    }

    fn ptr(address: Option<usize>) -> *mut u8 {
        address.map_or(core::ptr::null_mut(), |a| a as *mut u8)
    }

    // SAFETY: blocks are disjoint, aligned as asked and inside memory the
    // arena grew; a null pointer reports failure.
    unsafe impl GlobalAlloc for CallArena {
        #[inline]
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            ptr(state().alloc(layout, grow))
        }

        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            ptr(state().alloc_zeroed(layout, grow))
        }

        #[inline]
        unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
            state().dealloc(block as usize, layout)
        }

        unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            ptr(state().realloc(block as usize, layout, new_size, grow))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A memory of `pages_max` pages in native memory, grown page by page
    /// as a wasm memory is.
    struct Memory {
        base: usize,
        pages: usize,
        pages_max: usize,
        _buffer: Vec<u8>,
    }

    impl Memory {
        fn new(pages_max: usize) -> Self {
            let buffer = vec![0u8; (pages_max + 1) * PAGE_BYTES];
            let base = (buffer.as_ptr() as usize).next_multiple_of(PAGE_BYTES);
            Memory {
                base,
                pages: 1,
                pages_max,
                _buffer: buffer,
            }
        }

        fn grow(&mut self) -> impl FnMut(usize) -> Option<usize> + '_ {
            |pages| {
                let old = self.pages;
                (old + pages <= self.pages_max).then(|| {
                    self.pages += pages;
                    self.base + old * PAGE_BYTES
                })
            }
        }
    }

    fn layout(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).unwrap()
    }

    #[test]
    fn blocks_are_aligned_disjoint_and_in_grown_memory() {
        let mut memory = Memory::new(64);
        let mut bump = Bump::EMPTY;
        let mut blocks = Vec::new();
        for (i, align) in [1, 8, 4, 16, 2, 64].iter().cycle().take(200).enumerate() {
            let size = 1 + i * 37 % 5000;
            let start = bump.alloc(layout(size, *align), memory.grow()).unwrap();
            assert_eq!(start % align, 0);
            blocks.push((start, start + size));
        }
        blocks.sort();
        assert!(blocks.windows(2).all(|w| w[0].1 <= w[1].0), "overlap");
        let (first, last) = (blocks[0].0, blocks.last().unwrap().1);
        assert!(first >= memory.base + PAGE_BYTES);
        assert!(last <= memory.base + memory.pages * PAGE_BYTES);
    }

    #[test]
    fn the_newest_block_is_given_back_and_grown_in_place() {
        let mut memory = Memory::new(64);
        let mut bump = Bump::EMPTY;
        let a = bump.alloc(layout(100, 4), memory.grow()).unwrap();
        let b = bump.alloc(layout(100, 4), memory.grow()).unwrap();
        // Not the newest: kept, and a grown copy goes after `b`.
        let a2 = bump.realloc(a, layout(100, 4), 200, memory.grow()).unwrap();
        assert!(a2 >= b + 100);
        // The newest grows in place, then is given back.
        let a3 = bump
            .realloc(a2, layout(200, 4), 5000, memory.grow())
            .unwrap();
        assert_eq!(a3, a2);
        bump.dealloc(a3, layout(5000, 4));
        assert_eq!(bump.alloc(layout(8, 4), memory.grow()), Some(a2));
    }

    #[test]
    fn a_zeroed_block_is_zero_even_over_memory_given_back() {
        let mut memory = Memory::new(64);
        let mut bump = Bump::EMPTY;
        let a = bump.alloc(layout(4096, 8), memory.grow()).unwrap();
        // SAFETY: the block is 4096 bytes of the test's memory.
        unsafe { core::ptr::write_bytes(a as *mut u8, 0xAB, 4096) };
        bump.dealloc(a, layout(4096, 8));
        let z = bump.alloc_zeroed(layout(8192, 8), memory.grow()).unwrap();
        assert_eq!(z, a);
        // SAFETY: the block is 8192 bytes of the test's memory.
        let bytes = unsafe { core::slice::from_raw_parts(z as *const u8, 8192) };
        assert!(bytes.iter().all(|&b| b == 0));
    }

    #[test]
    fn a_block_larger_than_the_growth_step_and_a_full_memory() {
        let mut memory = Memory::new(40);
        let mut bump = Bump::EMPTY;
        let big = GROW_PAGES_MIN * PAGE_BYTES * 2;
        let a = bump.alloc(layout(big, 8), memory.grow()).unwrap();
        assert!(a + big <= memory.base + memory.pages * PAGE_BYTES);
        assert_eq!(bump.alloc(layout(big, 8), memory.grow()), None);
    }
}
