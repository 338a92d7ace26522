//! A test guest whose `assign` panics with a known message.
//!
//! It exists so the host's end-to-end tests can show that a guest panic
//! becomes a reported failure rather than a crash (invariant 7 of
//! docs/design.md), and that the message reaches the operator: the SDK's panic
//! hook sends it through the `log` import (prefixed with
//! `assignd_guest_sdk::log::PANIC_PREFIX`) before the panic turns into a
//! trap, so tests can look for [`MESSAGE`] in the host's error. `info`
//! answers normally so that the module can be uploaded and bound to a group
//! before it misbehaves.

use assignd_guest_sdk::{AssignError, Assignment, Assignor, GroupInput, Info};

/// The panic message, for tests that look for it.
pub const MESSAGE: &str = "panicking guest: refusing to assign on purpose";

pub struct Panicking;

impl Assignor for Panicking {
    fn info() -> Info {
        Info::new(
            "panicking",
            "0.1.0",
            "test guest: assign panics, to exercise trap reporting and panic messages",
        )
    }

    fn assign(_input: &GroupInput) -> Result<Assignment, AssignError> {
        panic!("{MESSAGE}");
    }
}

assignd_guest_sdk::export_assignor!(Panicking);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[should_panic(expected = "panicking guest: refusing to assign on purpose")]
    fn assign_panics_with_the_message() {
        let _ = Panicking::assign(&GroupInput::default());
    }
}
