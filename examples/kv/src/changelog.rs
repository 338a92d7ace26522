//! A partition's changelog: an append-only file of JSON lines, one per
//! acknowledged PUT, at `DIR/changelog/kv-<partition>` in the data
//! directory every worker shares. It owns the file format only; who may
//! write (the partition's owner, one at a time) is the worker's business.
//!
//! A line is `{"key": ..., "value": ...}` and ends with `\n`. A writer
//! killed mid-line leaves a torn tail without its `\n`; the next owner
//! ends it ([`Changelog::seal`]) before it appends, and readers skip any
//! line that is not a record (a torn write was never acknowledged).

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// One PUT.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub key: String,
    pub value: String,
}

/// The changelog of one partition.
#[derive(Clone, Debug)]
pub struct Changelog {
    path: PathBuf,
}

impl Changelog {
    /// The changelog of `partition` under `data_dir`.
    pub fn new(data_dir: &Path, partition: u32) -> Self {
        Changelog {
            path: data_dir.join("changelog").join(format!("kv-{partition}")),
        }
    }

    /// Appends `record` and waits until it is on disk.
    pub fn append(&self, record: &Record) -> io::Result<()> {
        let mut line = serde_json::to_vec(record)?;
        line.push(b'\n');
        let mut file = self.open_for_append()?;
        file.write_all(&line)?;
        file.sync_data()
    }

    /// Ends a torn tail (a line without its `\n`) at `end`, the offset
    /// after the last complete line, so the next record starts a line of
    /// its own. Creates the file if there is none, durably.
    pub fn seal(&self, end: u64) -> io::Result<()> {
        let created = !self.path.exists();
        let mut file = self.open_for_append()?;
        if file.metadata()?.len() > end {
            file.write_all(b"\n")?;
            file.sync_data()?;
        }
        if created && let Some(dir) = self.path.parent() {
            // The new file's name must survive a crash too.
            File::open(dir)?.sync_all()?;
        }
        Ok(())
    }

    /// The records after byte `from` (complete lines only, skipping lines
    /// that are not records) and the offset after the last complete line.
    pub fn read_from(&self, from: u64) -> io::Result<(Vec<Record>, u64)> {
        let bytes = self.tail(from)?;
        let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let records = bytes[..complete]
            .split(|&b| b == b'\n')
            .filter_map(|line| serde_json::from_slice(line).ok())
            .collect();
        Ok((records, from + complete as u64))
    }

    /// How many complete lines follow byte `from`: a learner's lag.
    pub fn lines_after(&self, from: u64) -> io::Result<u64> {
        let bytes = self.tail(from)?;
        Ok(bytes.iter().filter(|&&b| b == b'\n').count() as u64)
    }

    fn tail(&self, from: u64) -> io::Result<Vec<u8>> {
        let mut file = match File::open(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        file.seek(SeekFrom::Start(from))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        Ok(bytes)
    }

    fn open_for_append(&self) -> io::Result<File> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(key: &str, value: &str) -> Record {
        Record {
            key: key.into(),
            value: value.into(),
        }
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("assignd-kv-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn appended_records_are_read_back_from_an_offset() {
        let log = Changelog::new(&scratch("read"), 3);
        assert_eq!(log.read_from(0).unwrap(), (vec![], 0));
        log.append(&record("a", "1")).unwrap();
        let (records, end) = log.read_from(0).unwrap();
        assert_eq!(records, vec![record("a", "1")]);
        log.append(&record("b", "2")).unwrap();
        assert_eq!(log.lines_after(end).unwrap(), 1);
        let (records, _) = log.read_from(end).unwrap();
        assert_eq!(records, vec![record("b", "2")]);
    }

    #[test]
    fn a_torn_tail_is_sealed_and_skipped() {
        let dir = scratch("torn");
        let log = Changelog::new(&dir, 0);
        log.append(&record("a", "1")).unwrap();
        let (_, end) = log.read_from(0).unwrap();
        let mut file = log.open_for_append().unwrap();
        file.write_all(b"{\"key\":\"b\",\"va").unwrap();
        // The torn line is not complete: not read, not counted.
        assert_eq!(log.read_from(end).unwrap(), (vec![], end));
        assert_eq!(log.lines_after(end).unwrap(), 0);
        log.seal(end).unwrap();
        log.append(&record("c", "3")).unwrap();
        let (records, _) = log.read_from(0).unwrap();
        assert_eq!(records, vec![record("a", "1"), record("c", "3")]);
    }
}
