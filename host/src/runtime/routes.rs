//! Serving routing tables (docs/routing.md): who may read them (the
//! group's reader token or the admin token), the table of a group as JSON
//! (built under the shard's lock once per table epoch, serialized outside
//! it, and kept until the next change: `route_watches.rs`), a blocking
//! query's wait on its group's change signal, and key lookups.

use std::sync::Arc;
use std::time::Duration;

use assignd_wire::{LookupBody, RoutesBody};
use tokio::sync::watch;

use super::execute::Weight;
use super::{Runtime, RuntimeError, shard};

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

/// A routing table as served: its epoch, its promise, its JSON, and how
/// long the request waited before the table was read (its promise runs
/// `valid_ms` from then: a router that adds this wait to the time it sent
/// the request stays within it).
#[derive(Clone, Debug)]
pub struct ServedRoutes {
    pub epoch: u64,
    pub valid_ms: u64,
    pub json: bytes::Bytes,
    pub waited_ms: u64,
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
        let started = tokio::time::Instant::now();
        let deadline = started + wait;
        let mut signal: Option<watch::Receiver<u64>> = None;
        loop {
            // Measured before the read: the promise starts no sooner.
            let waited_ms = started.elapsed().as_millis() as u64;
            let mut table = self.routes_now(&shard, group, access).await?;
            table.waited_ms = waited_ms;
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
            waited_ms: 0,
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
