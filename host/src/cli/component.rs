//! `assignd component new CORE.wasm -o OUT.wasm`: turns the core module a
//! guest crate builds for `wasm32-unknown-unknown` into the component that
//! `assignd run` and `assignd assignor upload` take, in process with
//! `wit-component` (what `wasm-tools component new` does), so a plugin
//! author needs no other tool.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::{EXIT_BAD_INPUT, Failure};

#[derive(Debug, Args)]
pub struct ComponentArgs {
    #[command(subcommand)]
    command: ComponentCommand,
}

#[derive(Debug, Subcommand)]
enum ComponentCommand {
    /// Make a component of a core module built with the guest SDK (cargo
    /// build --target wasm32-unknown-unknown).
    New {
        /// The core module: target/wasm32-unknown-unknown/release/NAME.wasm.
        #[arg(value_name = "CORE.wasm")]
        core: PathBuf,
        /// Where to write the component.
        #[arg(short, long, value_name = "OUT.wasm")]
        output: PathBuf,
    },
}

fn failure(message: String) -> Failure {
    Failure {
        message,
        exit_code: EXIT_BAD_INPUT,
    }
}

pub fn component(args: ComponentArgs) -> Result<(), Failure> {
    match args.command {
        ComponentCommand::New { core, output } => {
            let bytes = std::fs::read(&core)
                .map_err(|e| failure(format!("cannot read {}: {e}", core.display())))?;
            // A component's header: the wasm magic, then version 0x0d, layer 1.
            if bytes.get(4..8) == Some(&[0x0d, 0x00, 0x01, 0x00][..]) {
                return Err(failure(format!(
                    "{} is already a component",
                    core.display()
                )));
            }
            let component = assignd_guest_build::componentize(&bytes)
                .map_err(|e| failure(explained(&core, &e.to_string())))?;
            std::fs::write(&output, component)
                .map_err(|e| failure(format!("cannot write {}: {e}", output.display())))
        }
    }
}

/// The line for a core module that does not become a component: what
/// wit-component said, and, for an import of WASI (the C library's stdio,
/// most often: `printf` links `fd_write`, `fd_close`, `fd_seek`), what to
/// do instead.
fn explained(core: &std::path::Path, error: &str) -> String {
    let mut line = format!("{}: {error}", core.display());
    if error.contains("wasi_snapshot_preview1") || error.contains("wasi:") {
        line.push_str(
            ". The module imports WASI, which an assignor does not have: no stdio \
             (printf, puts, fprintf), files, clock or randomness. Remove those calls and \
             write log lines with the `log` import (assignd:assignor/log); a C module links \
             with `-nostartfiles -Wl,--no-entry` (examples/c-sticky/build.sh)",
        );
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_module_importing_wasi_is_told_stdio_is_unavailable_and_to_log() {
        let core = wat::parse_str(
            r#"(module
                 (import "wasi_snapshot_preview1" "fd_close" (func (param i32) (result i32)))
                 (memory (export "memory") 1))"#,
        )
        .unwrap();
        let error = assignd_guest_build::componentize(&core).expect_err("WASI is refused");
        let line = explained(
            std::path::Path::new("c-sticky.core.wasm"),
            &error.to_string(),
        );
        assert!(line.starts_with("c-sticky.core.wasm: "), "{line}");
        assert!(line.contains("wasi_snapshot_preview1"), "{line}");
        for hint in [
            "no stdio",
            "printf",
            "`log` import",
            "-nostartfiles -Wl,--no-entry",
        ] {
            assert!(line.contains(hint), "{hint}: {line}");
        }
        // Another failure gets no such hint.
        let line = explained(std::path::Path::new("x.wasm"), "not a core module");
        assert_eq!(line, "x.wasm: not a core module");
    }
}
