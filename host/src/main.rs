//! The `assignd` binary: parses the command line and hands over to
//! [`assignd::cli`].

/// jemalloc rather than glibc's malloc: under steady heartbeats glibc's
/// malloc and free took 15 % of the server's CPU, and the threads a large
/// group's steps start doubled the peak RSS through glibc's per-thread
/// arenas (docs/benchmarks.md has both, side by side).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    assignd::cli::main()
}
