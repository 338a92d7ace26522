//! Writing a whole file durably: after a crash at any instant the file is
//! either absent (or its previous version) or holds all of the new bytes,
//! never a part of them. Every file the host writes whole goes through
//! [`write_file`]: the record log's new segments and `HEAD`, uploaded
//! modules and their sidecars, the generated admin token.
//!
//! It owns the order of the steps only; each caller chooses the temporary
//! file's name, how it is created (and so its permissions: the data dir's
//! files are readable by their owner only, [`private_file`]) and what its
//! errors say.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

/// The folder whose entry a rename changes, to make that change durable.
#[derive(Clone, Copy, Debug)]
pub enum Folder<'a> {
    /// Opened by the caller, which keeps it open (the record log does).
    Open(&'a File),
    /// Opened for the fsync after the rename.
    Path(&'a Path),
}

/// The step of [`write_file`] that failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Creating the temporary file.
    Create,
    /// Writing the bytes to the temporary file, or fsyncing it.
    Write,
    /// Renaming the temporary file into place.
    Rename,
    /// Opening or fsyncing the folder after the rename.
    SyncFolder,
}

/// Why [`write_file`] failed. Before [`Step::SyncFolder`], `path` is as it
/// was and the temporary file, if it was created, has been removed; at that
/// step the rename happened but may not survive a crash.
#[derive(Debug, thiserror::Error)]
#[error("{source}")]
pub struct WriteError {
    pub step: Step,
    #[source]
    pub source: io::Error,
}

/// Writes `parts`, in order, to `path` whole or not at all, and returns the
/// file open for writing at their end:
///
/// 1. `create(temp)` makes the temporary file, next to `path` so the rename
///    stays inside one file system;
/// 2. the bytes are written and the file fsynced: a rename can reach the
///    disk before the data it names, so without it a crash could leave
///    `path` empty or short;
/// 3. `temp` is renamed over `path`: a rename is atomic, so `path` names the
///    old file or the new one, never a half-written one;
/// 4. `folder` (the one holding `path`) is fsynced: the rename is a change
///    of the folder, and until that is on disk a crash can undo it.
///
/// A failure after the temporary file is created and before the rename is
/// done removes it (best effort), so no half-written leftover stays. A
/// failure to create it removes nothing: a file that was there (created by
/// someone else, with `create_new`) is not this call's to remove.
pub fn write_file(
    temp: &Path,
    path: &Path,
    parts: &[&[u8]],
    create: impl FnOnce(&Path) -> io::Result<File>,
    folder: Folder<'_>,
) -> Result<File, WriteError> {
    let failed = |step: Step| {
        move |source: io::Error| {
            if matches!(step, Step::Write | Step::Rename) {
                let _ = std::fs::remove_file(temp);
            }
            WriteError { step, source }
        }
    };
    let mut file = create(temp).map_err(failed(Step::Create))?;
    parts
        .iter()
        .try_for_each(|part| file.write_all(part))
        .and_then(|()| file.sync_all())
        .map_err(failed(Step::Write))?;
    std::fs::rename(temp, path).map_err(failed(Step::Rename))?;
    match folder {
        Folder::Open(folder) => folder.sync_all(),
        Folder::Path(folder) => File::open(folder).and_then(|folder| folder.sync_all()),
    }
    .map_err(failed(Step::SyncFolder))?;
    Ok(file)
}

/// Creates (or empties) a file only its owner may read and write (0600 on
/// unix): the data dir holds every group's state and the admin token.
pub fn private_file(path: &Path) -> io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("assignd-durable-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn the_file_is_in_place_whole_and_private_and_the_temporary_gone() {
        let dir = scratch("written");
        let (temp, path) = (dir.join("file.tmp"), dir.join("file"));
        std::fs::write(&path, b"the old version, longer than the new").unwrap();
        let mut file = write_file(
            &temp,
            &path,
            &[b"head", b"er and body"],
            private_file,
            Folder::Path(&dir),
        )
        .unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"header and body");
        assert!(!temp.exists());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // The file returned is the one in place, open at its end.
        file.write_all(b"!").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"header and body!");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_failure_leaves_the_old_file_and_no_temporary() {
        let dir = scratch("failed");
        let (temp, path) = (dir.join("file.tmp"), dir.join("file"));
        std::fs::write(&path, b"old").unwrap();
        // A read-only file cannot be written: the write step fails after
        // the temporary file exists.
        let read_only = |temp: &Path| {
            std::fs::write(temp, b"")?;
            File::open(temp)
        };
        let error = write_file(&temp, &path, &[b"new"], read_only, Folder::Path(&dir))
            .map(|_| ())
            .unwrap_err();
        assert_eq!(error.step, Step::Write);
        assert!(!temp.exists(), "the temporary file is removed");
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        // A rename into a folder that does not exist.
        let error = write_file(
            &temp,
            &dir.join("missing").join("file"),
            &[b"new"],
            private_file,
            Folder::Path(&dir),
        )
        .map(|_| ())
        .unwrap_err();
        assert_eq!(error.step, Step::Rename);
        assert!(!temp.exists(), "the temporary file is removed");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
