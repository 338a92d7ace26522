//! [`EtcdModules`]: a cluster's uploaded modules, stored once in etcd, of
//! which every node's registry holds a copy (its data dir keeps the
//! compiled forms as a cache). It is the runtime's
//! [`crate::runtime::SharedModules`] in cluster mode.
//!
//! Keys (under the cluster's prefix), for a module of id `ID` (the sha256
//! of its bytes):
//! - `module-chunks/ID/NNNNNN`: its bytes, cut into chunks of at most
//!   [`CHUNK_BYTES_MAX`], written first;
//! - `module-meta/ID`: its name, version, size, upload time and chunk
//!   count, written last (with its name): a module is the cluster's once
//!   its meta exists, and a meta always has every chunk before it;
//! - `module-names/NAME@VERSION`: the id that has the name, created only
//!   if absent, in the transaction that writes the meta, so that two
//!   nodes cannot give one name to two modules.
//! - `module-users/REF/GROUP` (the shard's id): group `GROUP`'s config
//!   names the uploaded module `REF` (its id or `NAME@VERSION`, as the
//!   config has it). The shard's sink writes it, guarded by the shard's
//!   claim and by the module's key still existing, before the batch that
//!   makes the group name it, and deletes it after the batch that makes
//!   the group stop naming it; loading a shard puts right what a crash in
//!   between left. A delete removes the meta, the name and the chunks in
//!   one transaction that holds only while both `module-users/ID/` and
//!   `module-users/NAME@VERSION/` are empty: a bind and a delete of one
//!   module on two nodes are ordered by etcd, and whichever comes second
//!   is refused.
//!
//! Chunks are written without a claim: a module's id is its bytes' hash,
//! so whoever writes a chunk writes the same bytes. A node that copies a
//! module checks the hash of what it read.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::runtime::Handle;

use super::etcd::{CHUNK_BYTES_MAX, Etcd, StoreError, Write, prefix_end};
use super::keys;
use crate::plugins::{BUILTIN_NAMES, module_id};
use crate::protocol::core::Coordinator;
use crate::protocol::group::GroupConfig;
use crate::registry::{Entry, Registry, RegistryError};
use crate::runtime::SharedModules;

/// Chunks written by one transaction (each at most [`CHUNK_BYTES_MAX`]:
/// within etcd's request limit of 1.5 MiB).
const CHUNKS_PER_TXN: usize = 2;

/// Chunks read by one range request (within gRPC's 4 MiB answer limit).
const CHUNKS_PER_PAGE: i64 = 6;

/// Metas read by one range request.
const METAS_PER_PAGE: i64 = 256;

/// How often a node copies the cluster's new modules into its registry
/// (a bind that names one it lacks copies it at once).
pub const SYNC_INTERVAL: Duration = Duration::from_secs(1);

/// What `module-meta/ID` holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModuleMeta {
    pub name: String,
    pub version: String,
    pub size_bytes: u64,
    pub uploaded_at_ms: u64,
    pub chunks: u64,
}

/// Index keys read by one range request.
const USERS_PER_PAGE: i64 = 512;

/// The cluster's modules in etcd. Its [`SharedModules`] calls block on
/// `handle` and must not be made on one of its worker threads.
pub struct EtcdModules {
    etcd: Etcd,
    handle: Handle,
    /// The ids this node has seen the cluster hold (listed, published, or
    /// in its registry at start): one of them gone from etcd was deleted,
    /// and goes from the registry too. A module uploaded here and not yet
    /// published is not among them.
    known: Mutex<BTreeSet<String>>,
    /// Whether `known` took the registry's modules of the start.
    seeded: AtomicBool,
}

/// What a delete did.
#[derive(Debug, PartialEq, Eq)]
pub enum Deleted {
    /// The module is no longer the cluster's.
    Done,
    /// Groups name it (`GROUP` per index key, sorted).
    InUse(Vec<String>),
    /// The cluster has no such module (deleted meanwhile).
    Unknown,
}

/// The uploaded modules `config` names (not the built-in assignors), as
/// it names them.
pub fn uploaded_references(config: &GroupConfig) -> impl Iterator<Item = &String> {
    std::iter::once(&config.assignor)
        .chain(&config.fallback_assignor)
        .filter(|name| !BUILTIN_NAMES.contains(&name.as_str()))
}

/// Every (module reference, group) of `groups` in `core` whose config
/// names an uploaded module.
pub fn bindings<'a>(
    core: &Coordinator,
    groups: impl IntoIterator<Item = &'a str>,
) -> BTreeSet<(String, String)> {
    groups
        .into_iter()
        .filter_map(|name| core.group(name))
        .flat_map(|group| {
            uploaded_references(&group.config)
                .map(|reference| (reference.clone(), group.name.clone()))
        })
        .collect()
}

/// The key `module-users/REF/GROUP`.
pub fn user_key(etcd: &Etcd, reference: &str, group: &str) -> Vec<u8> {
    etcd.key(&keys::module_user(reference, group))
}

/// The prefix of every key of `module-users/REF/`.
fn users_prefix(etcd: &Etcd, reference: &str) -> Vec<u8> {
    etcd.key(&keys::module_users_of(reference))
}

/// The key that exists while the module `reference` names is the
/// cluster's: its name's for `NAME@VERSION`, its meta's for an id.
pub fn reference_key(etcd: &Etcd, reference: &str) -> Vec<u8> {
    match reference.split_once('@') {
        Some((name, version)) => name_key(etcd, name, version),
        None => meta_key(etcd, reference),
    }
}

/// Every index key of the cluster: (reference, group, shard).
pub async fn all_users(etcd: &Etcd) -> Result<Vec<(String, String, String)>, StoreError> {
    let prefix = etcd.key(keys::MODULE_USERS);
    let (pairs, _) = etcd
        .range(&prefix, &prefix_end(&prefix), USERS_PER_PAGE)
        .await?;
    Ok(pairs
        .into_iter()
        .filter_map(|(key, value)| {
            let rest = String::from_utf8_lossy(&key[prefix.len()..]).into_owned();
            let (reference, group) = rest.split_once('/')?;
            Some((
                reference.to_owned(),
                group.to_owned(),
                String::from_utf8_lossy(&value).into_owned(),
            ))
        })
        .collect())
}

/// The single-key range of `key`, for a delete.
pub fn only(key: Vec<u8>) -> Write {
    let mut to = key.clone();
    to.push(0);
    Write::DeleteRange { from: key, to }
}

fn meta_key(etcd: &Etcd, id: &str) -> Vec<u8> {
    etcd.key(&keys::module_meta(id))
}

fn name_key(etcd: &Etcd, name: &str, version: &str) -> Vec<u8> {
    etcd.key(&keys::module_name(name, version))
}

fn chunks_prefix(etcd: &Etcd, id: &str) -> Vec<u8> {
    etcd.key(&keys::module_chunks(id))
}

impl EtcdModules {
    pub fn new(etcd: Etcd, handle: Handle) -> Self {
        EtcdModules {
            etcd,
            handle,
            known: Mutex::default(),
            seeded: AtomicBool::new(false),
        }
    }

    /// Deletes module `id` (named `name@version`) from the cluster unless
    /// a group names it (by id or by name): one transaction, which holds
    /// only while no index key of either reference exists, so a bind that
    /// another node makes at the same time either lands first (and this is
    /// refused) or is refused itself.
    pub async fn delete(&self, id: &str, name: &str, version: &str) -> Result<Deleted, StoreError> {
        let etcd = &self.etcd;
        let by_name = format!("{name}@{version}");
        let ranges: Vec<(Vec<u8>, Vec<u8>)> = [id, by_name.as_str()]
            .iter()
            .map(|reference| {
                let prefix = users_prefix(etcd, reference);
                let end = prefix_end(&prefix);
                (prefix, end)
            })
            .collect();
        let chunks = chunks_prefix(etcd, id);
        let deleted = etcd
            .apply_if(
                &[meta_key(etcd, id)],
                &ranges,
                &[
                    only(meta_key(etcd, id)),
                    only(name_key(etcd, name, version)),
                    Write::DeleteRange {
                        from: chunks.clone(),
                        to: prefix_end(&chunks),
                    },
                ],
            )
            .await?;
        if deleted {
            self.forget(id);
            return Ok(Deleted::Done);
        }
        let mut groups = BTreeSet::new();
        for (from, to) in &ranges {
            let (users, _) = etcd.range(from, to, USERS_PER_PAGE).await?;
            groups.extend(
                users
                    .into_iter()
                    .map(|(key, _)| String::from_utf8_lossy(&key[from.len()..]).into_owned()),
            );
        }
        if !groups.is_empty() {
            return Ok(Deleted::InUse(groups.into_iter().collect()));
        }
        if etcd.get(&meta_key(etcd, id)).await?.is_none() {
            return Ok(Deleted::Unknown);
        }
        // A bind's index key came and went between the two reads: the
        // module was in use at the transaction.
        Ok(Deleted::InUse(Vec::new()))
    }

    /// Whether the module `reference` names is still the cluster's.
    pub async fn is_shared(&self, reference: &str) -> Result<bool, StoreError> {
        Ok(self
            .etcd
            .get(&reference_key(&self.etcd, reference))
            .await?
            .is_some())
    }

    fn forget(&self, id: &str) {
        self.known
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
    }

    fn know(&self, id: &str) {
        self.known
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.to_owned());
    }

    /// Stores `bytes` as module `id` named `meta.name@meta.version`, unless
    /// the cluster has it already. Refused if the cluster has another
    /// module of that name.
    pub async fn publish(
        &self,
        id: &str,
        meta: &ModuleMeta,
        bytes: &[u8],
    ) -> Result<(), PublishError> {
        let etcd = &self.etcd;
        if etcd.get(&meta_key(etcd, id)).await?.is_some() {
            self.know(id);
            return Ok(());
        }
        let prefix = chunks_prefix(etcd, id);
        let chunks: Vec<Write> = bytes
            .chunks(CHUNK_BYTES_MAX)
            .enumerate()
            .map(|(i, chunk)| Write::Put {
                key: etcd.key(&keys::module_chunk(id, i)),
                value: chunk.to_vec(),
            })
            .collect();
        for txn in chunks.chunks(CHUNKS_PER_TXN) {
            etcd.apply(&[], txn).await?;
        }
        let mut meta = meta.clone();
        meta.chunks = chunks.len() as u64;
        let name = name_key(etcd, &meta.name, &meta.version);
        let written = etcd
            .apply(
                &[name.clone(), meta_key(etcd, id)],
                &[
                    Write::Put {
                        key: name.clone(),
                        value: id.as_bytes().to_vec(),
                    },
                    Write::Put {
                        key: meta_key(etcd, id),
                        value: serde_json::to_vec(&meta).expect("a meta serializes"),
                    },
                ],
            )
            .await?;
        if written {
            self.know(id);
            return Ok(());
        }
        // Another node was first: with these bytes (fine), or with others
        // under the name.
        match etcd.get(&name).await? {
            Some((holder, _)) if holder != id.as_bytes() => {
                let _ = etcd
                    .apply(
                        &[],
                        &[Write::DeleteRange {
                            from: prefix.clone(),
                            to: prefix_end(&prefix),
                        }],
                    )
                    .await;
                Err(PublishError::NameTaken {
                    name: meta.name,
                    version: meta.version,
                    id: String::from_utf8_lossy(&holder).into_owned(),
                })
            }
            _ => {
                self.know(id);
                Ok(())
            }
        }
    }

    /// Every module of the cluster, by id.
    pub async fn list(&self) -> Result<Vec<(String, ModuleMeta)>, StoreError> {
        let prefix = self.etcd.key(keys::MODULE_META);
        let (metas, _) = self
            .etcd
            .range(&prefix, &prefix_end(&prefix), METAS_PER_PAGE)
            .await?;
        metas
            .into_iter()
            .map(|(key, value)| {
                let id = String::from_utf8_lossy(&key[prefix.len()..]).into_owned();
                let meta = serde_json::from_slice(&value).map_err(|e| {
                    StoreError::Corrupt(format!("the meta of module {id} does not parse: {e}"))
                })?;
                Ok((id, meta))
            })
            .collect()
    }

    /// The bytes of module `id`, checked against its id.
    pub async fn fetch(&self, id: &str, meta: &ModuleMeta) -> Result<Vec<u8>, StoreError> {
        let prefix = chunks_prefix(&self.etcd, id);
        let (chunks, _) = self
            .etcd
            .range(&prefix, &prefix_end(&prefix), CHUNKS_PER_PAGE)
            .await?;
        let mut bytes = Vec::with_capacity(meta.size_bytes as usize);
        for (_, chunk) in &chunks {
            bytes.extend_from_slice(chunk);
        }
        if chunks.len() as u64 != meta.chunks || module_id(&bytes) != id {
            return Err(StoreError::Corrupt(format!(
                "module {id} in etcd: {} chunks of {} bytes do not hash to its id",
                chunks.len(),
                bytes.len()
            )));
        }
        Ok(bytes)
    }

    /// The modules of the cluster that `registry` lacks, with their bytes,
    /// and those it was seen to hold that it holds no more (deleted).
    pub async fn missing(
        &self,
        registry: &Registry,
    ) -> Result<(Vec<(String, ModuleMeta, Vec<u8>)>, Vec<String>), StoreError> {
        let mut missing = Vec::new();
        let listed = self.list().await?;
        let ids: BTreeSet<&str> = listed.iter().map(|(id, _)| id.as_str()).collect();
        let gone: Vec<String> = {
            let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
            let gone = known
                .iter()
                .filter(|id| !ids.contains(id.as_str()))
                .cloned()
                .collect();
            known.retain(|id| ids.contains(id.as_str()));
            gone
        };
        for (id, meta) in listed {
            if registry.get(&id).is_none() {
                let bytes = self.fetch(&id, &meta).await?;
                missing.push((id, meta, bytes));
            } else {
                self.know(&id);
            }
        }
        Ok((missing, gone))
    }
}

/// Why a module could not be made the cluster's.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{name}@{version} is already module {id} in this cluster")]
    NameTaken {
        name: String,
        version: String,
        id: String,
    },
}

impl SharedModules for EtcdModules {
    fn publish(&self, entry: &Entry, bytes: &[u8]) -> Result<(), RegistryError> {
        let meta = ModuleMeta {
            name: entry.name.clone(),
            version: entry.version.clone(),
            size_bytes: entry.size_bytes,
            uploaded_at_ms: entry.uploaded_at_ms,
            chunks: 0,
        };
        self.handle
            .block_on(EtcdModules::publish(self, &entry.module.id, &meta, bytes))
            .map_err(|error| match error {
                PublishError::NameTaken { name, version, id } => {
                    RegistryError::NameTaken { name, version, id }
                }
                PublishError::Store(error) => {
                    RegistryError::Storage(format!("storing the module for the cluster: {error}"))
                }
            })
    }

    fn delete(&self, entry: &Entry) -> Result<(), RegistryError> {
        let deleted = self
            .handle
            .block_on(EtcdModules::delete(
                self,
                &entry.module.id,
                &entry.name,
                &entry.version,
            ))
            .map_err(|error| {
                RegistryError::Storage(format!("deleting the module from the cluster: {error}"))
            })?;
        match deleted {
            Deleted::Done => Ok(()),
            Deleted::InUse(groups) => Err(RegistryError::InUse {
                id: entry.module.id.clone(),
                groups: if groups.is_empty() {
                    "(one being bound now)".to_owned()
                } else {
                    groups.join(", ")
                },
            }),
            Deleted::Unknown => Err(RegistryError::Unknown(entry.module.id.clone())),
        }
    }

    fn is_shared(&self, reference: &str) -> Result<bool, RegistryError> {
        self.handle
            .block_on(EtcdModules::is_shared(self, reference))
            .map_err(|error| {
                RegistryError::Storage(format!("reading the cluster's modules: {error}"))
            })
    }

    fn copy_missing(&self, registry: &Registry) -> anyhow::Result<usize> {
        if !self.seeded.swap(true, Ordering::SeqCst) {
            // The first call, at start, before any upload: a module of the
            // registry that the cluster lacks was deleted while this node
            // was away.
            for entry in registry.list() {
                self.know(&entry.module.id);
            }
        }
        let (missing, gone) = self.handle.block_on(self.missing(registry))?;
        if !gone.is_empty() {
            let _mutation = registry.mutation.blocking_lock();
            for id in gone {
                if registry.unlist(&id).is_some() {
                    tracing::info!(id, "module deleted from the cluster: removed here");
                }
                registry.remove_files(&id)?;
            }
        }
        let mut copied = 0;
        for (id, meta, bytes) in missing {
            // A module that does not load here is skipped, and the others
            // are copied all the same.
            match registry.copy(&meta.name, &meta.version, &bytes) {
                Ok(_) => {
                    self.know(&id);
                    tracing::info!(
                        id,
                        name = meta.name,
                        version = meta.version,
                        "module copied from the cluster"
                    );
                    copied += 1;
                }
                Err(error) => {
                    tracing::error!(id, name = meta.name, %error, "a module of the cluster does not load on this node")
                }
            }
        }
        Ok(copied)
    }
}
