//! A test guest whose `assign` allocates without bound: it keeps adding
//! 1 MiB chunks, each written to, to a list it never frees.
//!
//! It exists so the host's end-to-end tests can show that a guest growing
//! its linear memory is stopped at the host's memory cap (invariant 7 of
//! docs/design.md): the refused `memory.grow` makes the allocator fail, the guest
//! aborts with a trap, the failure is reported, and the group keeps its last
//! good assignment. `info` answers normally so that the module can be
//! uploaded and bound to a group before it misbehaves.
//!
//! Never call `assign` natively: it would eat the test machine's memory.

use assignd_guest_sdk::{AssignError, Assignment, Assignor, GroupInput, Info};

/// Size of each chunk: large enough to reach any cap quickly, small enough
/// that the last successful chunk lands close to the cap.
const CHUNK: usize = 1 << 20;

pub struct MemoryHog;

impl Assignor for MemoryHog {
    fn info() -> Info {
        Info::new(
            "memory-hog",
            "0.1.0",
            "test guest: assign allocates without bound, to exercise the host's memory cap",
        )
    }

    fn assign(_input: &GroupInput) -> Result<Assignment, AssignError> {
        let mut hoard: Vec<Vec<u8>> = Vec::new();
        loop {
            // A non-zero fill writes every byte, so the pages are really
            // used; `black_box` keeps the optimizer from proving the
            // chunks dead and dropping the allocations.
            let chunk = vec![0xA5u8; CHUNK];
            hoard.push(std::hint::black_box(chunk));
            std::hint::black_box(&mut hoard);
        }
    }
}

assignd_guest_sdk::export_assignor!(MemoryHog);
