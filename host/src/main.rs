//! The `assignd` binary: parses the command line and hands over to
//! [`assignd::cli`].

/// jemalloc rather than glibc's malloc: the request path allocates and
/// frees many small blocks on two or more workers, where glibc's arenas and
/// their consolidation cost a tenth of a heartbeat (docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    assignd::cli::main()
}
