//! The four assignors shipped inside the `assignd` binary, built from
//! `assignors/*` by the build script.

include!(concat!(env!("OUT_DIR"), "/builtin.rs"));

/// Names of the built-in assignors, in a stable order.
pub const BUILTIN_NAMES: &[&str] = &["range", "round-robin", "sticky", "learner-aware"];

/// The component bytes of a built-in assignor.
pub fn builtin_component(name: &str) -> Option<&'static [u8]> {
    BUILTIN_COMPONENTS
        .iter()
        .find(|(builtin, _)| *builtin == name)
        .map(|(_, bytes)| *bytes)
}
