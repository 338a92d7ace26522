//! Where a log stops being readable: the file, the offset and why. The
//! chain's proof (`chain.rs`) and the reader (`read.rs`) both name one; a
//! scan reports them, and `assignd log check` and `log repair` show them.

use std::path::PathBuf;

/// Where a log stops being readable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub file: PathBuf,
    pub offset: u64,
    pub reason: String,
    /// Bytes from `offset` to the end of that file (0 for a missing file).
    pub bytes_after: u64,
}
