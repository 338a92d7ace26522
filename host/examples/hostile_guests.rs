//! Builds the guests of the hostile-guests benchmark
//! (host/benches/hostile_guests.sh) into one folder:
//!
//! - `spin-when-told.wasm`: the test guest whose params make it loop,
//!   trap, recurse, hog or grow its memory, flood the log, answer
//!   something invalid or something big (tests/guests/spin-when-told);
//! - `invalid-output.wasm`: the test guest that always answers something
//!   invalid (refused by the upload's self-test);
//! - `wasi-import.wasm`: a component importing a WASI interface (refused
//!   before any compile);
//! - `slow-to-compile.wasm`: the crafted component Cranelift takes many
//!   seconds on (`--slow-locals N` locals, 20,000 by default: 29 s here
//!   unbounded, so stopped by the default compile limit);
//! - `start-loop.wasm`: `spin-when-told`'s core module with a start
//!   function that never returns (refused when `info()` is first called).
//!
//! The crafted ones come from tests/e2e/common/crafted.rs, as the
//! end-to-end tests build them.
//!
//!     cargo run --release -p assignd --example hostile_guests -- OUT_DIR [--slow-locals N]

// Only part of it is used here.
#[allow(dead_code)]
#[path = "../../tests/e2e/common/crafted.rs"]
mod crafted;

use std::path::{Path, PathBuf};

const GUESTS: &[&str] = &["test-guest-spin-when-told", "test-guest-invalid-output"];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let out = PathBuf::from(
        args.next()
            .ok_or("usage: hostile_guests OUT_DIR [--slow-locals N]")?,
    );
    let mut slow_locals = 20_000;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--slow-locals" => {
                slow_locals = args.next().ok_or("--slow-locals N")?.parse()?;
            }
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .ok_or("no workspace root")?
        .to_path_buf();
    std::fs::create_dir_all(&out)?;
    assignd_guest_build::build(&root, GUESTS, &out)?;
    for package in GUESTS {
        let built = out.join(format!("{package}.wasm"));
        let short = package.trim_start_matches("test-guest-");
        std::fs::rename(&built, out.join(format!("{short}.wasm")))?;
    }
    std::fs::write(
        out.join("wasi-import.wasm"),
        wat::parse_str(crafted::WASI_IMPORT_WAT)?,
    )?;
    std::fs::write(
        out.join("slow-to-compile.wasm"),
        crafted::slow_to_compile_component_with(slow_locals),
    )?;
    let core = assignd_guest_build::target_dir(&root)
        .join(assignd_guest_build::TARGET)
        .join(assignd_guest_build::PROFILE)
        .join("test_guest_spin_when_told.wasm");
    let start_loop =
        assignd_guest_build::componentize(&crafted::with_start_loop(&std::fs::read(&core)?))?;
    std::fs::write(out.join("start-loop.wasm"), start_loop)?;
    for entry in std::fs::read_dir(&out)? {
        let entry = entry?;
        println!("{} {}", entry.metadata()?.len(), entry.path().display());
    }
    Ok(())
}
