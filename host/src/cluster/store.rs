//! [`EtcdStore`]: cluster mode's [`ShardStore`]. A shard's records live in
//! etcd, under the cluster's prefix, and only the shard's owner writes them.
//!
//! Keys of shard `NNNN` (under the prefix):
//! - `owners/NNNN`: the owning node's name, put under that node's
//!   lease. Its create revision is the claim every write of the shard is
//!   guarded by, so a node whose lease ran out (it was paused, or cut off
//!   from etcd) can never write again, even if it comes back believing it
//!   owns the shard.
//! - `shards/NNNN/log/IIIIIIIIIIIIIIIIIIII`: the shard's log as chunks, in
//!   index order. Each persisted batch of records is framed as the local
//!   log frames it (length, CRC32C, record) and cut into chunks of at most
//!   [`CHUNK_BYTES_MAX`]; a chunk's first byte says whether the batch goes
//!   on in the next one. A batch whose last chunk is missing (its owner
//!   died between the transactions of one batch: a torn write) was never
//!   acknowledged; the next owner ignores it and deletes it.
//! - `shards/NNNN/start`: the index of the first live chunk. Compaction
//!   writes one `GroupSnapshot` per group as a new batch, then moves
//!   `start` to it and deletes every chunk before, in one transaction.
//!
//! Loading a shard claims it (this node becomes its owner, or loading
//! fails naming the owner), reads its chunks at one revision and replays
//! them through the core's one `apply` path; unloading releases the claim.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::runtime::Handle;

use super::etcd::{CHUNK_BYTES_MAX, Claim, Etcd, StoreError, Write, prefix_end};
use super::keys;
use super::modules::{self, bindings};
use crate::log::frame::{self, Decoded};
use crate::protocol::core::Coordinator;
use crate::protocol::group::Record;
use crate::protocol::shard::ShardId;
use crate::runtime::{RecordSink, ShardStore, StorageUnavailable};

/// Chunks written by one transaction.
const CHUNKS_PER_TXN: usize = 2;

/// Chunks read by one range request.
const CHUNKS_PER_PAGE: i64 = 6;

/// Chunks written since the last compaction after which the next persist
/// compacts: a shard's log in etcd stays within about this many chunks
/// beyond its groups' snapshots.
pub const COMPACT_AFTER_CHUNKS: u64 = 1024;

/// How long a write retries while etcd is unavailable before it fails.
/// Shorter than the node's lease TTL: past it the claim is at risk anyway.
const RETRY_INTERVAL: Duration = Duration::from_millis(200);

/// Index writes (`module-users/...`) in one transaction: within etcd's
/// 128 operations a transaction (`--max-txn-ops`).
const INDEX_OPS_PER_TXN: usize = 64;

/// The chunk flag: the batch goes on in the next chunk.
const CHUNK_MORE: u8 = 1;
/// The chunk flag: the batch ends in this chunk.
const CHUNK_LAST: u8 = 0;

/// A node's shards in etcd.
pub struct EtcdStore {
    etcd: Etcd,
    node: String,
    /// The lease claims are taken under (a node that stepped down has a
    /// new one).
    lease: AtomicI64,
    handle: Handle,
    /// How long a write may keep retrying an unavailable etcd.
    retry_for: Duration,
    /// A shard's sink compacts after writing this many chunks.
    compact_after_chunks: u64,
    /// The claims of the shards this node serves.
    claims: Mutex<HashMap<ShardId, Claim>>,
    /// The frame format version records are written at: the cluster's
    /// level (`features.rs`).
    format_level: Arc<AtomicU8>,
}

impl std::fmt::Debug for EtcdStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdStore")
            .field("node", &self.node)
            .field("lease", &self.lease())
            .finish_non_exhaustive()
    }
}

/// The key naming `shard`'s owner. Owners are kept apart from the logs
/// so that a placement round reads every owner in one small range.
pub fn owner_key(etcd: &Etcd, shard: ShardId) -> Vec<u8> {
    etcd.key(&keys::owner(shard))
}

pub(super) fn chunk_key(etcd: &Etcd, shard: ShardId, index: u64) -> Vec<u8> {
    etcd.key(&keys::log_chunk(shard, index))
}

/// A shard's log as read from etcd.
#[derive(Debug, Default)]
pub struct ReadLog {
    pub records: Vec<Record>,
    /// The index the next chunk goes to.
    pub next_index: u64,
    /// Chunks of a torn batch at the end, which the owner deletes.
    pub torn_from: Option<u64>,
    /// Chunks from `start` on.
    pub chunks: u64,
}

impl EtcdStore {
    /// A store for node `node`, whose claims go under `lease`. Its blocking
    /// calls ([`ShardStore`], [`RecordSink`]) run etcd requests on `handle`
    /// and must not be made on one of its worker threads.
    pub fn new(etcd: Etcd, node: &str, lease: i64, handle: Handle, retry_for: Duration) -> Self {
        EtcdStore {
            etcd,
            node: node.to_owned(),
            lease: AtomicI64::new(lease),
            handle,
            retry_for,
            compact_after_chunks: COMPACT_AFTER_CHUNKS,
            claims: Mutex::default(),
            format_level: Arc::new(AtomicU8::new(frame::FORMAT_VERSION)),
        }
    }

    /// Writes records at the version `level` holds when they are written.
    pub fn with_format_level(mut self, level: Arc<AtomicU8>) -> Self {
        self.format_level = level;
        self
    }

    /// Compacts each shard's log after `chunks` chunks instead of
    /// [`COMPACT_AFTER_CHUNKS`].
    pub fn with_compaction_after(mut self, chunks: u64) -> Self {
        self.compact_after_chunks = chunks.max(1);
        self
    }

    pub fn etcd(&self) -> &Etcd {
        &self.etcd
    }

    /// The lease this node's claims are held under.
    pub fn lease(&self) -> i64 {
        self.lease.load(Ordering::SeqCst)
    }

    /// Claims from now on go under `lease`.
    pub fn set_lease(&self, lease: i64) {
        self.lease.store(lease, Ordering::SeqCst);
    }

    /// The claim of a shard this node has loaded.
    pub fn claim_held(&self, shard: ShardId) -> Option<Claim> {
        self.claims
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&shard)
            .cloned()
    }

    /// Forgets every claim this node holds: its lease is over, and with
    /// it the claims. An unload then releases nothing.
    pub fn forget_claims(&self) {
        self.claims
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// Who owns `shard` now, if anyone.
    pub async fn owner(&self, shard: ShardId) -> Result<Option<String>, StoreError> {
        let owner = self.etcd.get(&owner_key(&self.etcd, shard)).await?;
        Ok(owner.map(|(name, _)| String::from_utf8_lossy(&name).into_owned()))
    }

    /// Claims `shard` for this node: its claim, or an error naming the
    /// node that holds it. A shard this node holds already under its
    /// lease (it stopped serving it for an unanswered write, or stepped
    /// down while etcd did not answer and then kept its lease) is claimed
    /// again, which fences every write of its earlier claim.
    pub async fn claim(&self, shard: ShardId) -> Result<Claim, StoreError> {
        let key = owner_key(&self.etcd, shard);
        let me = self.node.clone().into_bytes();
        if let Some(claim) = self
            .etcd
            .claim(key.clone(), me.clone(), self.lease())
            .await?
        {
            return Ok(claim);
        }
        if let Some(claim) = self.etcd.reclaim(key, me, self.lease()).await? {
            return Ok(claim);
        }
        let owner = self.owner(shard).await?;
        let held_by = match owner.as_deref() {
            None => "(none: its owner's lease just ended; try again)".to_owned(),
            Some(owner) if owner == self.node => {
                format!("{owner} (this node) under its earlier lease, which ends within its TTL")
            }
            Some(owner) => owner.to_owned(),
        };
        Err(StoreError::Fenced(format!(
            "shard {shard} is owned by node {held_by}"
        )))
    }

    /// Reads `shard`'s log: every whole batch from `start` on, decoded.
    pub async fn read(&self, shard: ShardId) -> Result<ReadLog, StoreError> {
        let start = match self
            .etcd
            .get(&self.etcd.key(&keys::log_start(shard)))
            .await?
        {
            None => 0,
            Some((text, _)) => parse_index(&text)?,
        };
        let from = chunk_key(&self.etcd, shard, start);
        let to = prefix_end(&self.etcd.key(&keys::log_prefix(shard)));
        let (chunks, _revision) = self.etcd.range(&from, &to, CHUNKS_PER_PAGE).await?;
        let mut log = ReadLog {
            next_index: start,
            ..ReadLog::default()
        };
        let mut batch = Vec::new();
        let mut batch_start = start;
        for (key, value) in chunks {
            let index = index_of(&key)?;
            if index != log.next_index {
                return Err(StoreError::Corrupt(format!(
                    "shard {shard}: chunk {index} follows chunk {}",
                    log.next_index.wrapping_sub(1)
                )));
            }
            log.next_index += 1;
            log.chunks += 1;
            let (&flag, payload) = value.split_first().ok_or_else(|| {
                StoreError::Corrupt(format!("shard {shard}: chunk {index} is empty"))
            })?;
            if batch.is_empty() {
                batch_start = index;
            }
            batch.extend_from_slice(payload);
            match flag {
                CHUNK_MORE => {}
                CHUNK_LAST => {
                    decode_batch(shard, batch_start, &batch, &mut log.records)?;
                    batch.clear();
                }
                other => {
                    return Err(StoreError::Corrupt(format!(
                        "shard {shard}: chunk {index} has flag {other}"
                    )));
                }
            }
        }
        if log.next_index > batch_start && !batch.is_empty() {
            log.torn_from = Some(batch_start);
        }
        Ok(log)
    }

    /// Makes the module index of `shard` (its `module-users/` keys) say
    /// what its loaded groups name: a crash between a batch and its index
    /// deletes leaves a key too many (which only holds a delete back), and
    /// a log from before the index has none.
    async fn reconcile_bindings(
        &self,
        shard: ShardId,
        claim: &Claim,
        core: &Coordinator,
    ) -> Result<(), StoreError> {
        let etcd = &self.etcd;
        let me = shard.to_string();
        let expected = bindings(core, core.groups().map(|g| g.name.as_str()));
        let indexed: std::collections::BTreeSet<(String, String)> = modules::all_users(etcd)
            .await?
            .into_iter()
            .filter(|(_, _, owner)| *owner == me)
            .map(|(reference, group, _)| (reference, group))
            .collect();
        let writes: Vec<Write> = indexed
            .difference(&expected)
            .map(|(reference, group)| modules::only(modules::user_key(etcd, reference, group)))
            .chain(
                expected
                    .difference(&indexed)
                    .map(|(reference, group)| Write::Put {
                        key: modules::user_key(etcd, reference, group),
                        value: me.clone().into_bytes(),
                    }),
            )
            .collect();
        for txn in writes.chunks(INDEX_OPS_PER_TXN) {
            etcd.guarded(claim, txn).await?;
        }
        Ok(())
    }

    fn block_on<T>(&self, future: impl Future<Output = T>) -> T {
        self.handle.block_on(future)
    }
}

/// Decodes one whole batch: frames back to back, to its last byte. The
/// simulator's cluster layer decodes its modelled store's batches with it.
pub(crate) fn decode_batch(
    shard: ShardId,
    index: u64,
    mut bytes: &[u8],
    out: &mut Vec<Record>,
) -> Result<(), StoreError> {
    while !bytes.is_empty() {
        match frame::decode(bytes) {
            Decoded::Record {
                record,
                frame_bytes,
            } => {
                out.push(record);
                bytes = &bytes[frame_bytes..];
            }
            Decoded::Unreadable { reason, .. } => {
                return Err(StoreError::Unreadable(format!(
                    "shard {shard}: the batch at chunk {index}: {reason}"
                )));
            }
            other => {
                return Err(StoreError::Corrupt(format!(
                    "shard {shard}: the batch at chunk {index} does not decode: {other:?}"
                )));
            }
        }
    }
    Ok(())
}

fn index_of(key: &[u8]) -> Result<u64, StoreError> {
    let digits = key.rsplit(|&b| b == b'/').next().unwrap_or_default();
    parse_index(digits)
}

fn parse_index(text: &[u8]) -> Result<u64, StoreError> {
    std::str::from_utf8(text)
        .ok()
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| {
            StoreError::Corrupt(format!(
                "{:?} is not a chunk index",
                String::from_utf8_lossy(text)
            ))
        })
}

impl ShardStore for EtcdStore {
    fn load(
        &self,
        shard: ShardId,
        seed: u64,
    ) -> anyhow::Result<(Coordinator, Arc<dyn RecordSink>)> {
        let claim = self.block_on(self.claim(shard))?;
        let loaded = self.block_on(async {
            let log = self.read(shard).await?;
            if let Some(torn) = log.torn_from {
                tracing::warn!(
                    shard,
                    from_chunk = torn,
                    "a batch its owner did not finish writing is dropped"
                );
                self.etcd
                    .guarded(
                        &claim,
                        &[Write::DeleteRange {
                            from: chunk_key(&self.etcd, shard, torn),
                            to: prefix_end(&self.etcd.key(&keys::log_prefix(shard))),
                        }],
                    )
                    .await?;
            }
            Ok::<_, StoreError>(log)
        });
        let log = match loaded {
            Ok(log) => log,
            Err(e) => {
                let _ = self.block_on(self.etcd.release(&claim));
                return Err(e.into());
            }
        };
        let mut core = Coordinator::new(seed);
        for record in log.records {
            if let Err(reason) = core.check_replay(&record) {
                let _ = self.block_on(self.etcd.release(&claim));
                anyhow::bail!(
                    "shard {shard} in etcd: a record does not fit the log before it: {reason}"
                );
            }
            core.apply_owned(record);
        }
        if let Err(e) = self.block_on(self.reconcile_bindings(shard, &claim, &core)) {
            let _ = self.block_on(self.etcd.release(&claim));
            return Err(e.into());
        }
        let next_index = log.torn_from.unwrap_or(log.next_index);
        self.claims
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(shard, claim.clone());
        let sink = EtcdSink {
            etcd: self.etcd.clone(),
            shard,
            claim,
            handle: self.handle.clone(),
            retry_for: self.retry_for,
            compact_after_chunks: self.compact_after_chunks,
            format_level: self.format_level.clone(),
            state: Mutex::new(SinkState {
                next_index,
                chunks_since_compaction: log.chunks,
                shadow: core.clone(),
            }),
        };
        Ok((core, Arc::new(sink)))
    }

    fn unloaded(&self, shard: ShardId, _core: Coordinator) {
        let claim = self
            .claims
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&shard);
        if let Some(claim) = claim
            && let Err(e) = self.block_on(self.etcd.release(&claim))
        {
            // The lease ends it anyway; until then nobody else can load
            // the shard.
            tracing::warn!(shard, error = %e, "releasing the shard failed");
        }
    }

    fn format_level(&self) -> Option<u8> {
        Some(self.format_level.load(Ordering::SeqCst))
    }
}

/// One shard's writer into etcd.
struct EtcdSink {
    etcd: Etcd,
    shard: ShardId,
    claim: Claim,
    handle: Handle,
    retry_for: Duration,
    compact_after_chunks: u64,
    format_level: Arc<AtomicU8>,
    state: Mutex<SinkState>,
}

struct SinkState {
    next_index: u64,
    chunks_since_compaction: u64,
    /// The shard as its persisted records give it: what compaction writes.
    shadow: Coordinator,
}

impl EtcdSink {
    /// Writes `bytes` as one batch from chunk `index` on; returns the index
    /// after it.
    async fn write_batch(&self, index: u64, bytes: &[u8]) -> Result<u64, StoreError> {
        let chunks: Vec<&[u8]> = if bytes.is_empty() {
            vec![&[]]
        } else {
            bytes.chunks(CHUNK_BYTES_MAX).collect()
        };
        let last = chunks.len() - 1;
        let puts: Vec<Write> = chunks
            .iter()
            .enumerate()
            .map(|(i, chunk)| {
                let mut value = Vec::with_capacity(chunk.len() + 1);
                value.push(if i == last { CHUNK_LAST } else { CHUNK_MORE });
                value.extend_from_slice(chunk);
                Write::Put {
                    key: chunk_key(&self.etcd, self.shard, index + i as u64),
                    value,
                }
            })
            .collect();
        for txn in puts.chunks(CHUNKS_PER_TXN) {
            self.with_retry(txn).await?;
        }
        Ok(index + chunks.len() as u64)
    }

    /// A guarded write, retried while etcd is unavailable for at most
    /// `retry_for`. A put of the same chunk again is harmless: the claim
    /// makes this node the only writer, and it writes the same bytes.
    async fn with_retry(&self, writes: &[Write]) -> Result<i64, StoreError> {
        self.with_retry_if_present(&[], writes).await
    }

    /// [`EtcdSink::with_retry`], applied only while every key of `present`
    /// exists.
    async fn with_retry_if_present(
        &self,
        present: &[Vec<u8>],
        writes: &[Write],
    ) -> Result<i64, StoreError> {
        let give_up = Instant::now() + self.retry_for;
        loop {
            match self
                .etcd
                .guarded_if_present(&self.claim, present, writes)
                .await
            {
                Err(StoreError::Unavailable(reason)) if Instant::now() < give_up => {
                    tracing::warn!(shard = self.shard, %reason, "etcd unavailable; retrying the write");
                    tokio::time::sleep(RETRY_INTERVAL).await;
                }
                other => return other,
            }
        }
    }

    /// Writes the shadow's groups as snapshots, then moves `start` to them
    /// and deletes every chunk before.
    async fn compact(&self, state: &mut SinkState) -> Result<(), StoreError> {
        let mut bytes = Vec::new();
        let version = self.format_level.load(Ordering::SeqCst);
        for group in state.shadow.groups() {
            frame::encode_at(
                &Record::GroupSnapshot {
                    group: group.name.clone(),
                    state: Box::new(group.clone()),
                },
                version,
                &mut bytes,
            );
        }
        let start = state.next_index;
        state.next_index = self.write_batch(start, &bytes).await?;
        self.with_retry(&[
            Write::Put {
                key: self.etcd.key(&keys::log_start(self.shard)),
                value: start.to_string().into_bytes(),
            },
            Write::DeleteRange {
                from: self.etcd.key(&keys::log_prefix(self.shard)),
                to: chunk_key(&self.etcd, self.shard, start),
            },
        ])
        .await?;
        state.chunks_since_compaction = state.next_index - start;
        Ok(())
    }
}

impl RecordSink for EtcdSink {
    fn persist(&self, records: &[Record]) -> anyhow::Result<()> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let mut bytes = Vec::new();
        let version = self.format_level.load(Ordering::SeqCst);
        for record in records {
            frame::encode_at(record, version, &mut bytes);
        }
        // The module index follows the groups' configs: a key that a group
        // now names an uploaded module lands before the batch (and only
        // while the module is the cluster's), and one that it no longer
        // does goes after it, so the index never says less than the log.
        let touched: std::collections::BTreeSet<&str> = records.iter().map(Record::group).collect();
        let before = bindings(&state.shadow, touched.iter().copied());
        for record in records {
            state.shadow.apply(record);
        }
        let after = bindings(&state.shadow, touched.iter().copied());
        let me = self.shard.to_string();
        self.handle
            .block_on(async {
                let added: Vec<&(String, String)> = after.difference(&before).collect();
                for txn in added.chunks(INDEX_OPS_PER_TXN) {
                    let present: Vec<Vec<u8>> = txn
                        .iter()
                        .map(|(reference, _)| modules::reference_key(&self.etcd, reference))
                        .collect();
                    let puts: Vec<Write> = txn
                        .iter()
                        .map(|(reference, group)| Write::Put {
                            key: modules::user_key(&self.etcd, reference, group),
                            value: me.clone().into_bytes(),
                        })
                        .collect();
                    self.with_retry_if_present(&present, &puts).await?;
                }
                let index = state.next_index;
                let next = self.write_batch(index, &bytes).await?;
                state.chunks_since_compaction += next - index;
                state.next_index = next;
                let removed: Vec<Write> = before
                    .difference(&after)
                    .map(|(reference, group)| {
                        modules::only(modules::user_key(&self.etcd, reference, group))
                    })
                    .collect();
                for txn in removed.chunks(INDEX_OPS_PER_TXN) {
                    self.with_retry(txn).await?;
                }
                if state.chunks_since_compaction >= self.compact_after_chunks {
                    self.compact(&mut state).await?;
                }
                Ok::<_, StoreError>(())
            })
            .map_err(|error| match error {
                // Told apart: the runtime refuses the shard's requests as
                // `storage_unavailable`, and the node loads it again from what
                // landed once etcd answers.
                StoreError::Unavailable(_) => {
                    anyhow::Error::new(StorageUnavailable(error.to_string()))
                }
                error => error.into(),
            })
    }
}
