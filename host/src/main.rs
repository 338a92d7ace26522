//! The `assignd` binary: parses the command line and hands over to
//! [`assignd::cli`].

fn main() -> std::process::ExitCode {
    assignd::cli::main()
}
