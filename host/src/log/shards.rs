//! The shards of a data dir: one record log per shard, in
//! `DIR/shards/NNNN/`, and the shard count, fixed when the data dir is
//! created, in `DIR/shards/SHARD_COUNT` (a group's shard is its name's
//! hash modulo that count, so the count can never change under existing
//! logs). [`ShardedDir`] is `assignd serve`'s [`ShardStore`]: loading a
//! shard recovers its log and opens it for appending.
//!
//! A data dir written before shards (one log in `DIR/log/`) is migrated
//! on first start: its log is recovered, each group's state is written as
//! a snapshot into its shard's new log, all of it in `DIR/shards.new/`,
//! which is renamed to `DIR/shards/` once complete and durable (a crash
//! before the rename leaves the old log in charge and the migration runs
//! again), and the old folder is then renamed `DIR/log.before-shards/`
//! for the operator to remove.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::durable::{self, Folder};
use crate::protocol::core::Coordinator;
use crate::protocol::group::Record;
use crate::protocol::shard::{SHARD_COUNT_MAX, ShardId, shard_of};
use crate::runtime::{RecordSink, ShardStore};

use super::segment::{io_error, sync_dir};
use super::{FsyncPolicy, LogError, LogSink, log_dir, recover};

/// The file holding a data dir's shard count, in its shards folder.
const SHARD_COUNT_FILE: &str = "SHARD_COUNT";

/// Where a migrated data dir's old log is kept.
const MIGRATED_LOG_DIR: &str = "log.before-shards";

/// The shards folder of a data dir.
pub fn shards_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("shards")
}

/// The log folder of shard `shard` inside a data dir.
pub fn shard_log_dir(data_dir: &Path, shard: ShardId) -> PathBuf {
    shards_dir(data_dir).join(format!("{shard:04}"))
}

/// The shard count a data dir records, if it has shards.
pub fn recorded_shard_count(data_dir: &Path) -> Result<Option<u32>, LogError> {
    let path = shards_dir(data_dir).join(SHARD_COUNT_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error(format!("reading {}", path.display()))(e)),
    };
    match text.trim().parse::<u32>() {
        Ok(count) if (1..=SHARD_COUNT_MAX).contains(&count) => Ok(Some(count)),
        _ => Err(LogError::Corrupt {
            file: path,
            offset: 0,
            reason: format!("{text:?} is not a shard count (1 to {SHARD_COUNT_MAX})"),
        }),
    }
}

/// How opening a data dir went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Opened {
    /// The data dir had shards already.
    Existing,
    /// A new data dir: its shards were created.
    Created,
    /// A data dir of one log was migrated: its groups were spread over the
    /// shards; the old log is kept in `kept`.
    Migrated { groups: usize, kept: PathBuf },
}

/// A data dir's shard logs: the [`ShardStore`] of `assignd serve`.
#[derive(Debug)]
pub struct ShardedDir {
    data_dir: PathBuf,
    shard_count: u32,
    fsync: FsyncPolicy,
}

impl ShardedDir {
    /// Opens the shards of `data_dir` (which the caller has locked),
    /// creating them with `requested` shards (`default` if none) in a new
    /// data dir, or migrating a data dir of one log. A data dir with shards
    /// keeps its count: `requested` must be it or none.
    pub fn open(
        data_dir: &Path,
        requested: Option<u32>,
        default: u32,
        fsync: FsyncPolicy,
    ) -> Result<(Self, Opened), LogError> {
        let (shard_count, opened) = match recorded_shard_count(data_dir)? {
            Some(count) => {
                if let Some(requested) = requested.filter(|&r| r != count) {
                    return Err(LogError::Io {
                        context: format!(
                            "the data dir {} has {count} shards, fixed when it was created; it cannot be served with --shards {requested}",
                            data_dir.display()
                        ),
                        source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
                    });
                }
                (count, Opened::Existing)
            }
            None => {
                let count = requested.unwrap_or(default);
                let opened = create_shards(data_dir, count)?;
                (count, opened)
            }
        };
        Ok((
            ShardedDir {
                data_dir: data_dir.to_owned(),
                shard_count,
                fsync,
            },
            opened,
        ))
    }

    pub fn shard_count(&self) -> u32 {
        self.shard_count
    }
}

impl ShardStore for ShardedDir {
    fn load(
        &self,
        shard: ShardId,
        seed: u64,
    ) -> anyhow::Result<(Coordinator, Arc<dyn RecordSink>)> {
        assert!(
            shard < self.shard_count,
            "shard {shard} of {}",
            self.shard_count
        );
        let dir = shard_log_dir(&self.data_dir, shard);
        // The scan replays every record (checked first) into the core; the
        // writer's shadow (what it compacts from) is a copy of the result.
        let recovered = recover(&dir, Coordinator::new(seed))?;
        let core = recovered.core;
        let sink = LogSink::open_with_state(&dir, self.fsync, core.clone())?;
        tracing::debug!(
            shard,
            records = recovered.records_read,
            groups = core.groups().count(),
            "recovered a shard's log"
        );
        Ok((core, Arc::new(sink)))
    }

    fn unloaded(&self, _shard: ShardId, _core: Coordinator) {
        // The shard's log holds everything: nothing to keep.
    }
}

/// Creates the shards folder of a data dir without one: empty logs, or
/// the groups of the data dir's single log spread over them.
fn create_shards(data_dir: &Path, shard_count: u32) -> Result<Opened, LogError> {
    assert!((1..=SHARD_COUNT_MAX).contains(&shard_count));
    let old_log = log_dir(data_dir);
    let old = if has_segments(&old_log)? {
        Some(recover(&old_log, Coordinator::new(0))?.core)
    } else {
        None
    };
    let building = data_dir.join("shards.new");
    if building.exists() {
        // A migration or creation that did not finish: start it again.
        std::fs::remove_dir_all(&building)
            .map_err(io_error(format!("removing {}", building.display())))?;
    }
    std::fs::create_dir_all(&building)
        .map_err(io_error(format!("creating {}", building.display())))?;
    let mut parts: Vec<Coordinator> = (0..shard_count).map(|_| Coordinator::new(0)).collect();
    let groups = old.as_ref().map_or(0, |core| core.groups().count());
    if let Some(core) = &old {
        for group in core.groups() {
            parts[shard_of(&group.name, shard_count) as usize].apply_owned(Record::GroupSnapshot {
                group: group.name.clone(),
                state: Box::new(group.clone()),
            });
        }
    }
    for (shard, part) in (0..shard_count).zip(parts) {
        let dir = building.join(format!("{shard:04}"));
        // Opening a log in an empty folder writes the state it is given as
        // its first base segment, fsynced with its folder; the folder's own
        // entry is made durable by the fsync of `building` below.
        drop(LogSink::open_with_state(&dir, FsyncPolicy::Always, part)?);
    }
    durable::write_file(
        &building.join(format!("{SHARD_COUNT_FILE}.tmp")),
        &building.join(SHARD_COUNT_FILE),
        &[format!("{shard_count}\n").as_bytes()],
        durable::private_file,
        Folder::Path(&building),
    )
    .map_err(|e| LogError::Io {
        context: format!("writing {}", building.join(SHARD_COUNT_FILE).display()),
        source: e.source,
    })?;
    let shards = shards_dir(data_dir);
    std::fs::rename(&building, &shards).map_err(io_error(format!(
        "renaming {} to {}",
        building.display(),
        shards.display()
    )))?;
    sync_dir(data_dir)?;
    if old.is_none() {
        return Ok(Opened::Created);
    }
    let kept = data_dir.join(MIGRATED_LOG_DIR);
    std::fs::rename(&old_log, &kept).map_err(io_error(format!(
        "renaming {} to {}",
        old_log.display(),
        kept.display()
    )))?;
    sync_dir(data_dir)?;
    Ok(Opened::Migrated { groups, kept })
}

/// Whether `dir` holds a segment file.
fn has_segments(dir: &Path) -> Result<bool, LogError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(io_error(format!("reading {}", dir.display()))(e)),
    };
    for entry in entries {
        let entry = entry.map_err(io_error(format!("reading {}", dir.display())))?;
        if entry.path().extension().is_some_and(|e| e == "seg") {
            return Ok(true);
        }
    }
    Ok(false)
}
