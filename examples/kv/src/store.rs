//! A worker's state of every partition: the map replayed from its
//! changelog, how far it is replayed, and whether the worker serves it.
//! It owns the rules that make an acknowledged PUT durable and visible to
//! the next owner; it does not know the group protocol (the worker says
//! when a partition is granted or taken away, and whether its lease still
//! holds).
//!
//! Each partition has one lock. A PUT holds it from the ownership check
//! until its record is on disk, and giving a partition up takes it, so
//! once the worker stops serving a partition (before it acknowledges a
//! revocation) no write of its is in flight; the next owner replays the
//! changelog to its end before it serves.

use std::collections::HashMap;
use std::io;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use crate::changelog::{Changelog, Record};

/// Why a request for a partition's key was not served.
#[derive(Debug)]
pub enum Refusal {
    /// This worker does not serve the partition now.
    NotOwner,
    Io(io::Error),
}

impl From<io::Error> for Refusal {
    fn from(error: io::Error) -> Self {
        Refusal::Io(error)
    }
}

#[derive(Default)]
struct Partition {
    serving: bool,
    map: HashMap<String, String>,
    /// The changelog's offset after the last line applied to `map`.
    replayed: u64,
}

impl Partition {
    fn replay(&mut self, changelog: &Changelog) -> io::Result<()> {
        let (records, end) = changelog.read_from(self.replayed)?;
        for record in records {
            self.map.insert(record.key, record.value);
        }
        self.replayed = end;
        Ok(())
    }
}

/// Every partition of the topic, by number.
pub struct Store {
    changelogs: Vec<Changelog>,
    partitions: Vec<Mutex<Partition>>,
}

impl Store {
    pub fn new(data_dir: &Path, partitions: u32) -> Self {
        Store {
            changelogs: (0..partitions)
                .map(|p| Changelog::new(data_dir, p))
                .collect(),
            partitions: (0..partitions).map(|_| Mutex::default()).collect(),
        }
    }

    pub fn partitions(&self) -> u32 {
        self.partitions.len() as u32
    }

    fn lock(&self, partition: u32) -> MutexGuard<'_, Partition> {
        self.partitions[partition as usize]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// The partition is granted here: replays its changelog to the end,
    /// ends a torn tail a killed owner left, then serves it.
    pub fn serve(&self, partition: u32) -> io::Result<()> {
        let changelog = &self.changelogs[partition as usize];
        let mut state = self.lock(partition);
        state.replay(changelog)?;
        changelog.seal(state.replayed)?;
        state.serving = true;
        Ok(())
    }

    /// Stops serving the partition; returns once no write of it is in
    /// flight. The map is kept: the changelog only grows, so a later
    /// replay goes on from where this one stopped.
    pub fn stop(&self, partition: u32) {
        self.lock(partition).serving = false;
    }

    /// Replays what the owner appended since the last replay (a learner's
    /// or standby's warm-up).
    pub fn warm_up(&self, partition: u32) -> io::Result<()> {
        let changelog = &self.changelogs[partition as usize];
        self.lock(partition).replay(changelog)
    }

    /// The records of the changelog not yet replayed here.
    pub fn lag(&self, partition: u32) -> io::Result<u64> {
        let replayed = self.lock(partition).replayed;
        self.changelogs[partition as usize].lines_after(replayed)
    }

    /// The value of `key`, if this worker serves its partition and
    /// `may_process` (the lease) still holds.
    pub fn get(
        &self,
        partition: u32,
        key: &str,
        may_process: impl Fn() -> bool,
    ) -> Result<Option<String>, Refusal> {
        let state = self.lock(partition);
        if !state.serving || !may_process() {
            return Err(Refusal::NotOwner);
        }
        Ok(state.map.get(key).cloned())
    }

    /// Writes `value` to `key` once it is durable in the changelog. Ok
    /// only if the lease held both before the write and once it is on
    /// disk: a worker stalled past its lease never acknowledges.
    pub fn put(
        &self,
        partition: u32,
        record: Record,
        may_process: impl Fn() -> bool,
    ) -> Result<(), Refusal> {
        let changelog = &self.changelogs[partition as usize];
        let mut state = self.lock(partition);
        if !state.serving || !may_process() {
            return Err(Refusal::NotOwner);
        }
        changelog.append(&record)?;
        // Reads back this record (and nothing else: only the owner writes).
        state.replay(changelog)?;
        if !may_process() {
            return Err(Refusal::NotOwner);
        }
        Ok(())
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

    #[test]
    fn the_next_owner_sees_every_acknowledged_write() {
        let dir = std::env::temp_dir().join(format!("assignd-kv-store-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (old, next) = (Store::new(&dir, 2), Store::new(&dir, 2));
        assert!(matches!(
            old.put(1, record("k", "1"), || true),
            Err(Refusal::NotOwner)
        ));
        old.serve(1).unwrap();
        old.put(1, record("k", "1"), || true).unwrap();
        assert_eq!(next.lag(1).unwrap(), 1);
        next.warm_up(1).unwrap();
        assert_eq!(next.lag(1).unwrap(), 0);
        old.put(1, record("k", "2"), || true).unwrap();
        assert!(matches!(
            old.put(1, record("k", "3"), || false),
            Err(Refusal::NotOwner)
        ));
        old.stop(1);
        assert!(matches!(old.get(1, "k", || true), Err(Refusal::NotOwner)));
        next.serve(1).unwrap();
        assert_eq!(next.get(1, "k", || true).unwrap().as_deref(), Some("2"));
    }
}
