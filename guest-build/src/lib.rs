//! Builds guest crates of this workspace into WebAssembly components: runs
//! `cargo build --target wasm32-unknown-unknown --profile guest` in a target
//! directory of its own (so it never waits on the outer build's lock), then
//! turns each core module into a component with `wit-component`, in process.
//!
//! Used by the host's build script (the built-in assignors), by the tests
//! (the misbehaving guests) and by `assignd` itself for plugin authors.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The wasm target guests are built for.
pub const TARGET: &str = "wasm32-unknown-unknown";

/// The cargo profile guests are built with (see the workspace Cargo.toml).
pub const PROFILE: &str = "guest";

/// A failed guest build.
#[derive(Debug)]
pub struct BuildError(pub String);

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BuildError {}

/// One built guest.
#[derive(Clone, Debug)]
pub struct Guest {
    /// The cargo package name.
    pub package: String,
    /// The component file.
    pub component: PathBuf,
}

/// Environment variables of an outer cargo build that must not leak into
/// the nested one: they carry flags and wrappers meant for the host target.
const ENV_NOT_INHERITED: &[&str] = &[
    "CARGO_ENCODED_RUSTFLAGS",
    "RUSTFLAGS",
    "RUSTC_WORKSPACE_WRAPPER",
    "CARGO_TARGET_DIR",
    "CARGO_BUILD_TARGET",
    "CARGO_BUILD_TARGET_DIR",
    "CARGO_BUILD_RUSTFLAGS",
    "CARGO_LLVM_COV",
    "CARGO_PRIMARY_PACKAGE",
];

/// The directory guests are built in: `$ASSIGND_GUEST_TARGET_DIR`, or
/// `target/guests` under the workspace root.
pub fn target_dir(workspace_root: &Path) -> PathBuf {
    std::env::var_os("ASSIGND_GUEST_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root.join("target").join("guests"))
}

/// Builds `packages` (cargo package names in the workspace at
/// `workspace_root`) to core modules and turns each into a component in
/// `out_dir`, named `<package>.wasm`.
pub fn build(
    workspace_root: &Path,
    packages: &[&str],
    out_dir: &Path,
) -> Result<Vec<Guest>, BuildError> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let target_dir = target_dir(workspace_root);
    let mut command = Command::new(cargo);
    command
        .current_dir(workspace_root)
        .args(["build", "--quiet", "--target", TARGET, "--profile", PROFILE])
        .arg("--target-dir")
        .arg(&target_dir);
    for package in packages {
        command.args(["-p", package]);
    }
    for var in ENV_NOT_INHERITED {
        command.env_remove(var);
    }
    let status = command
        .status()
        .map_err(|e| BuildError(format!("could not run cargo: {e}")))?;
    if !status.success() {
        return Err(BuildError(format!(
            "building guests {packages:?} for {TARGET} failed ({status}); is the target installed? \
             run `rustup target add {TARGET}`"
        )));
    }
    std::fs::create_dir_all(out_dir)
        .map_err(|e| BuildError(format!("cannot create {}: {e}", out_dir.display())))?;
    let mut guests = Vec::with_capacity(packages.len());
    for package in packages {
        let core_path = target_dir
            .join(TARGET)
            .join(PROFILE)
            .join(format!("{}.wasm", package.replace('-', "_")));
        let core = std::fs::read(&core_path)
            .map_err(|e| BuildError(format!("cannot read {}: {e}", core_path.display())))?;
        let component = componentize(&core).map_err(|e| BuildError(format!("{package}: {e}")))?;
        let component_path = out_dir.join(format!("{package}.wasm"));
        std::fs::write(&component_path, component)
            .map_err(|e| BuildError(format!("cannot write {}: {e}", component_path.display())))?;
        guests.push(Guest {
            package: (*package).to_owned(),
            component: component_path,
        });
    }
    Ok(guests)
}

/// Turns a core module built with wit-bindgen (it carries its WIT world in
/// a custom section) into a component.
pub fn componentize(core_module: &[u8]) -> Result<Vec<u8>, BuildError> {
    wit_component::ComponentEncoder::default()
        .validate(true)
        .module(core_module)
        .map_err(|e| BuildError(format!("not a core module made with wit-bindgen: {e:#}")))?
        .encode()
        .map_err(|e| BuildError(format!("cannot make a component: {e:#}")))
}

/// Paths whose change must rebuild guests (for `cargo:rerun-if-changed`).
pub fn watched_paths(workspace_root: &Path, package_dirs: &[&str]) -> Vec<PathBuf> {
    let mut paths = vec![
        workspace_root.join("Cargo.toml"),
        workspace_root.join("Cargo.lock"),
        workspace_root.join("guest-sdk/src"),
        workspace_root.join("guest-sdk/wit"),
        workspace_root.join("guest-sdk/Cargo.toml"),
    ];
    paths.extend(package_dirs.iter().map(|d| workspace_root.join(d)));
    paths
}
