//! Shared by the end-to-end tests: the real `assignd` binary, the
//! misbehaving guests of `tests/guests/` built from source once per test
//! binary, hand-written WAT fixtures, and scratch files.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

pub const BAD_GUESTS: &[&str] = &[
    "test-guest-spin-forever",
    "test-guest-memory-hog",
    "test-guest-panicking",
    "test-guest-invalid-output",
    "test-guest-spin-when-told",
];

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// A scratch directory unique to this test process and `name`.
pub fn scratch(name: &str) -> PathBuf {
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("e2e-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The component file of a misbehaving guest (package name), built on
/// first use.
pub fn bad_guest(package: &str) -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    let dir = BUILT.get_or_init(|| {
        let out = scratch("guests");
        assignd_guest_build::build(&workspace_root(), BAD_GUESTS, &out)
            .unwrap_or_else(|e| panic!("building the test guests: {e}"));
        out
    });
    dir.join(format!("{package}.wasm"))
}

/// A component that exports something other than the assignor interface.
pub const OTHER_WORLD_WAT: &str = r#"
(component
  (core module $m (func (export "f") (result i32) i32.const 42))
  (core instance $i (instantiate $m))
  (func (export "hello") (result u32) (canon lift (core func $i "f")))
)"#;

/// A component that imports a WASI interface.
pub const WASI_IMPORT_WAT: &str = r#"
(component
  (import "wasi:cli/environment@0.2.0" (instance))
)"#;

pub fn write(dir: &Path, name: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Runs `assignd` with `args`, with a cache directory of its own.
pub fn assignd(args: &[&str]) -> Output {
    let cache = scratch("cache");
    Command::new(env!("CARGO_BIN_EXE_assignd"))
        .args(args)
        .env("ASSIGND_CACHE_DIR", &cache)
        .output()
        .expect("cannot start assignd")
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Asserts the run failed with exit `code`, printed nothing on stdout and
/// exactly one `error: …` line on stderr containing `needle`.
pub fn assert_one_error_line(output: &Output, code: i32, needle: &str) {
    let err = stderr(output);
    assert_eq!(
        output.status.code(),
        Some(code),
        "exit status; stderr: {err}"
    );
    assert!(
        output.stdout.is_empty(),
        "stdout must be empty, got: {}",
        stdout(output)
    );
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "exactly one line on stderr, got: {err:?}");
    assert!(
        lines[0].starts_with("error: "),
        "line starts with error: {err:?}"
    );
    assert!(lines[0].contains(needle), "expected {needle:?} in {err:?}");
}

/// The small example input of DESIGN.md's contract (three members).
pub fn example_input() -> PathBuf {
    workspace_root().join("examples/group.json")
}
