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
                .map_err(|e| failure(format!("{}: {e}", core.display())))?;
            std::fs::write(&output, component)
                .map_err(|e| failure(format!("cannot write {}: {e}", output.display())))
        }
    }
}
