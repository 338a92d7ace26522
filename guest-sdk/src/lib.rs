//! The assignd guest SDK: write an assignor once in Rust, test and benchmark
//! it natively with `cargo test` / `cargo bench`, build it to a WebAssembly
//! component and run it in assignd.
//!
//! A whole assignor is one `impl` plus one macro line:
//!
//! ```
//! use assignd_guest_sdk::{Assignor, AssignError, Assignment, GroupInput, GroupIndex, Info};
//!
//! pub struct FirstSubscriber;
//!
//! impl Assignor for FirstSubscriber {
//!     fn info() -> Info {
//!         Info::new("first-subscriber", "0.1.0", "every task to its topic's first subscriber")
//!     }
//!
//!     fn assign(input: &GroupInput) -> Result<Assignment, AssignError> {
//!         let index = GroupIndex::new(input);
//!         let mut out = input.empty_assignment();
//!         for (topic, subscribers) in index.topic_subscribers.iter().enumerate() {
//!             if let Some(&first) = subscribers.first() {
//!                 for task in index.topic_tasks(topic as u32) {
//!                     out.active_owner[task as usize] = first;
//!                 }
//!             }
//!         }
//!         Ok(out)
//!     }
//! }
//!
//! assignd_guest_sdk::export_assignor!(FirstSubscriber);
//! ```
//!
//! Test it natively with [`harness::run`], which judges an answer as the
//! host will, and check the whole assignor contract from a property test in
//! one call with [`testing::check_contract`] (valid answers, deterministic,
//! learners and standbys only as declared, and optionally independent of
//! the members' order and of the previous assignment).
//!
//! This crate owns the guest side of the WIT world in `wit/assignor.wit`
//! (version [`WIT_VERSION`]; the text of 0.1, which the host still runs, is
//! kept as published in `wit/v0.1`), the loads' helpers ([`load`]) and the
//! contract checks ([`validate`]) that the host applies to every answer.
//! It must not depend on anything that does not build for
//! `wasm32-unknown-unknown`.

pub mod arena;
pub mod harness;
pub mod index;
#[cfg(feature = "json")]
pub mod json;
pub mod load;
pub mod log;
pub mod model;
pub mod testing;
pub mod validate;

#[cfg(target_arch = "wasm32")]
pub mod glue;

pub use index::GroupIndex;
pub use model::{
    AssignError, Assignment, Capabilities, GroupInput, Info, Member, NO_MEMBER, ParamSpec, TaskId,
    TaskLags, TaskLoads, TaskMembers, Topic,
};

/// The version of the WIT package this SDK speaks (`assignd:assignor@…`).
pub const WIT_VERSION: &str = "0.2.0";

/// The WIT world, for tools that need its text (the host embeds it too).
pub const WIT: &str = include_str!("../wit/assignor.wit");

/// The versions of the WIT package the host runs, oldest first: components
/// built for an older one keep working (they get its input, without what
/// came later).
pub const WIT_VERSIONS: [&str; 2] = ["0.1.0", WIT_VERSION];

/// The text of version 0.1.0 of the world, byte for byte as published (the
/// host runs components built for it).
pub const WIT_0_1: &str = include_str!("../wit/v0.1/assignor.wit");

/// An assignment strategy. Implement it and call [`export_assignor!`].
pub trait Assignor {
    /// Name, version, capabilities and params with their defaults.
    fn info() -> Info;

    /// The target assignment for `input`. Must be a pure function of the
    /// input: no clock, no randomness, no global state.
    fn assign(input: &GroupInput) -> Result<Assignment, AssignError>;
}

impl Info {
    /// An `Info` with no capabilities and no params; add them with the
    /// builder methods.
    pub fn new(name: &str, version: &str, description: &str) -> Self {
        Info {
            name: name.to_owned(),
            version: version.to_owned(),
            description: description.to_owned(),
            capabilities: Capabilities::default(),
            params: Vec::new(),
        }
    }

    pub fn with_capabilities(mut self, capabilities: Capabilities) -> Self {
        self.capabilities = capabilities;
        self
    }

    pub fn with_param(mut self, name: &str, default_value: &str, description: &str) -> Self {
        self.params
            .push(ParamSpec::new(name, default_value, description));
        self
    }
}

#[cfg(target_arch = "wasm32")]
#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "wit",
        world: "plugin",
        pub_export_macro: true,
        default_bindings_module: "assignd_guest_sdk::bindings",
    });
}

/// Exports an [`Assignor`] as the component's `assignor` interface. On
/// native targets it expands to nothing, so the same crate can be tested
/// and benchmarked natively.
#[macro_export]
macro_rules! export_assignor {
    ($assignor:ty) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            struct AssigndExport;

            impl $crate::bindings::exports::assignd::assignor::assignor::Guest for AssigndExport {
                fn info() -> $crate::bindings::assignd::assignor::types::AssignorInfo {
                    $crate::glue::info::<$assignor>()
                }

                fn assign(
                    input: $crate::bindings::assignd::assignor::types::GroupInput,
                ) -> ::core::result::Result<
                    $crate::bindings::assignd::assignor::types::Assignment,
                    $crate::bindings::assignd::assignor::types::AssignError,
                > {
                    $crate::glue::assign::<$assignor>(input)
                }
            }

    $crate::bindings::export!(AssigndExport with_types_in $crate::bindings);
        };
    };
}
