//! A test guest whose `assign` never returns: it spins in a loop that does
//! no I/O and allocates nothing.
//!
//! It exists so the host's end-to-end tests can show that a guest stuck in a
//! loop is stopped by the fuel / time limit (invariant 7 of docs/design.md): the
//! call traps, the failure is reported, and the group keeps its last good
//! assignment. `info` answers normally so that the module can be uploaded
//! and bound to a group before it misbehaves.
//!
//! Never call `assign` natively: nothing there would stop it.

use assignd_guest_sdk::{AssignError, Assignment, Assignor, GroupInput, Info};

pub struct SpinForever;

impl Assignor for SpinForever {
    fn info() -> Info {
        Info::new(
            "spin-forever",
            "0.1.0",
            "test guest: assign loops forever, to exercise the host's fuel and time limits",
        )
    }

    fn assign(_input: &GroupInput) -> Result<Assignment, AssignError> {
        // A loop without side effects could be assumed to terminate and be
        // removed; passing the counter through `black_box` every iteration
        // makes each step observable to the optimizer, so the loop stays.
        let mut counter = 0u64;
        loop {
            counter = std::hint::black_box(counter).wrapping_add(1);
        }
    }
}

assignd_guest_sdk::export_assignor!(SpinForever);
