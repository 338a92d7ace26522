//! Serving routing tables (docs/routing.md): who may read them (the
//! group's reader token or the admin token), the table of a group as JSON
//! (built under the shard's lock once per table epoch, serialized outside
//! it, and kept until the next change), and the change signal a watcher
//! sleeps on ([`RouteWatches`]: one `tokio::sync::watch` per watched
//! group, sent the table's epoch when a step's records change it, so a
//! watcher costs nothing while its table does not change).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use assignd_wire::{LookupBody, RoutesBody};
use tokio::sync::watch;

use super::execute::Weight;
use super::{Runtime, RuntimeError, shard};
use crate::protocol::group::Record;

/// What a routes request presents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RoutesAccess {
    /// The admin token (checked by the API).
    Admin,
    /// Another bearer token: its sha256, lowercase hex.
    Token(String),
    /// No token.
    Missing,
}

/// A routing table as served: its epoch, its promise and its JSON.
#[derive(Clone, Debug)]
pub struct ServedRoutes {
    pub epoch: u64,
    pub valid_ms: u64,
    pub json: bytes::Bytes,
}

/// A shard's routing tables already serialized, and the change signals of
/// its watched groups.
#[derive(Default)]
pub(super) struct RouteWatches {
    signals: Mutex<HashMap<String, watch::Sender<u64>>>,
    tables: Mutex<HashMap<String, (u64, bytes::Bytes)>>,
}

impl RouteWatches {
    /// A receiver told each new table epoch of `group`.
    fn subscribe(&self, group: &str, epoch: u64) -> watch::Receiver<u64> {
        let mut signals = self.signals.lock().unwrap_or_else(|e| e.into_inner());
        // Signals nobody listens to any more are dropped here, so the map
        // holds only groups with a watcher (or one that just left).
        signals.retain(|_, sender| sender.receiver_count() > 0);
        signals
            .entry(group.to_owned())
            .or_insert_with(|| watch::Sender::new(epoch))
            .subscribe()
    }

    /// The step's records: each watched group whose table they changed is
    /// told its new epoch.
    pub(super) fn notify(&self, records: &[Record], epoch_of: impl Fn(&str) -> Option<u64>) {
        if !records.iter().any(Record::changes_routes) {
            return;
        }
        let signals = self.signals.lock().unwrap_or_else(|e| e.into_inner());
        if signals.is_empty() {
            return;
        }
        for record in records.iter().filter(|r| r.changes_routes()) {
            if let Some(sender) = signals.get(record.group())
                && let Some(epoch) = epoch_of(record.group())
            {
                sender.send_if_modified(|seen| std::mem::replace(seen, epoch) != epoch);
            }
        }
    }

    /// A shard that stops being served: every watcher wakes (and finds
    /// its group served elsewhere), and no table is kept.
    pub(super) fn close(&self) {
        self.signals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        self.tables
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    fn cached(&self, group: &str, epoch: u64) -> Option<bytes::Bytes> {
        let tables = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        tables
            .get(group)
            .filter(|(cached, _)| *cached == epoch)
            .map(|(_, json)| json.clone())
    }

    fn keep(&self, group: &str, epoch: u64, json: bytes::Bytes) {
        let mut tables = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        tables.insert(group.to_owned(), (epoch, json));
    }
}

/// What one locked step of a routes read gives.
struct Read {
    epoch: u64,
    valid_ms: u64,
    /// The table built, or the one kept for this epoch.
    table: Result<RoutesBody, bytes::Bytes>,
}

impl Runtime {
    /// The routing table of `group`, once it is durable; with
    /// `after_epoch`, a blocking query: once the table's epoch differs
    /// from it, or after `wait` with the table as it is.
    pub async fn routes(
        self: &Arc<Self>,
        group: &str,
        access: &RoutesAccess,
        after_epoch: Option<u64>,
        wait: Duration,
    ) -> Result<ServedRoutes, RuntimeError> {
        let shard = self.shards[self.shard_of(group) as usize].clone();
        let deadline = tokio::time::Instant::now() + wait;
        let mut signal: Option<watch::Receiver<u64>> = None;
        loop {
            let table = self.routes_now(&shard, group, access).await?;
            let Some(after) = after_epoch else {
                return Ok(table);
            };
            if table.epoch != after || tokio::time::Instant::now() >= deadline {
                return Ok(table);
            }
            let receiver = match &mut signal {
                Some(receiver) => receiver,
                None => {
                    // Subscribed, then read again: a change between the
                    // read above and the subscription is not missed.
                    signal = Some(shard.route_watches.subscribe(group, table.epoch));
                    continue;
                }
            };
            match tokio::time::timeout_at(deadline, receiver.changed()).await {
                Ok(Ok(())) | Err(_) => {}
                // The shard stopped being served here: the next read says
                // where it is.
                Ok(Err(_)) => signal = None,
            }
        }
    }

    /// The table as it is now, kept serialized per epoch; renews its
    /// promise.
    async fn routes_now(
        self: &Arc<Self>,
        shard: &Arc<shard::Shard>,
        group: &str,
        access: &RoutesAccess,
    ) -> Result<ServedRoutes, RuntimeError> {
        let watches = &shard.route_watches;
        let read = self
            .execute(group, Weight::Light, |core, now| {
                let Some(found) = core.group(group) else {
                    return Err(crate::protocol::core::ProtocolError::UnknownGroup(
                        group.to_owned(),
                    )
                    .into());
                };
                check_access(group, found.config.reader_token_sha256.as_deref(), access)?;
                let epoch = found.routes_epoch;
                let table = match watches.cached(group, epoch) {
                    Some(json) => Err(json),
                    None => Ok(core.routes(group).expect("the group exists")),
                };
                let valid_ms = core.routes_served(group, now).unwrap_or(0);
                Ok((
                    Read {
                        epoch,
                        valid_ms,
                        table,
                    },
                    crate::protocol::core::Output::default(),
                ))
            })
            .await?;
        let json = match read.table {
            Ok(body) => {
                let json = bytes::Bytes::from(
                    serde_json::to_vec(&body).expect("a routing table always serializes"),
                );
                watches.keep(group, read.epoch, json.clone());
                json
            }
            Err(kept) => kept,
        };
        Ok(ServedRoutes {
            epoch: read.epoch,
            valid_ms: read.valid_ms,
            json,
        })
    }
}

impl Runtime {
    /// Refuses a caller that may not read `group`'s routes (a request
    /// refused for another reason says so only to one that may).
    pub async fn check_routes_access(
        self: &Arc<Self>,
        group: &str,
        access: &RoutesAccess,
    ) -> Result<(), RuntimeError> {
        self.read(group, |core, _| match core.group(group) {
            None => {
                Err(crate::protocol::core::ProtocolError::UnknownGroup(group.to_owned()).into())
            }
            Some(found) => check_access(group, found.config.reader_token_sha256.as_deref(), access),
        })
        .await?
    }

    /// Where `key` of `topic` goes in `group` and who has that task now;
    /// `Ok(None)`: the group has no such topic. Renews the table's
    /// promise, as a table read does.
    pub async fn lookup(
        self: &Arc<Self>,
        group: &str,
        access: &RoutesAccess,
        topic: &str,
        key: &[u8],
    ) -> Result<Option<LookupBody>, RuntimeError> {
        self.execute(group, Weight::Light, |core, now| {
            let Some(found) = core.group(group) else {
                return Err(
                    crate::protocol::core::ProtocolError::UnknownGroup(group.to_owned()).into(),
                );
            };
            check_access(group, found.config.reader_token_sha256.as_deref(), access)?;
            let answer = core.lookup(group, topic, key);
            if answer.is_some() {
                core.routes_served(group, now);
            }
            Ok((answer, crate::protocol::core::Output::default()))
        })
        .await
    }
}

/// Refuses a routes read without the admin token or the group's reader
/// token.
fn check_access(
    group: &str,
    reader_token_sha256: Option<&str>,
    access: &RoutesAccess,
) -> Result<(), RuntimeError> {
    match (access, reader_token_sha256) {
        (RoutesAccess::Admin, _) => Ok(()),
        (RoutesAccess::Token(presented), Some(expected))
            if super::member_token::same(presented, expected) =>
        {
            Ok(())
        }
        (RoutesAccess::Token(_), _) => Err(RuntimeError::ReaderTokenWrong(group.to_owned())),
        (RoutesAccess::Missing, _) => Err(RuntimeError::ReaderTokenMissing(group.to_owned())),
    }
}
