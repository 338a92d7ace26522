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
//!
//! Chunks are written without a claim: a module's id is its bytes' hash,
//! so whoever writes a chunk writes the same bytes. A node that copies a
//! module checks the hash of what it read.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::runtime::Handle;

use super::etcd::{Etcd, StoreError, Write, prefix_end};
use super::store::CHUNK_BYTES_MAX;
use crate::plugins::module_id;
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

/// The cluster's modules in etcd. Its [`SharedModules`] calls block on
/// `handle` and must not be made on one of its worker threads.
pub struct EtcdModules {
    etcd: Etcd,
    handle: Handle,
}

fn meta_key(etcd: &Etcd, id: &str) -> Vec<u8> {
    etcd.key(&format!("module-meta/{id}"))
}

fn name_key(etcd: &Etcd, name: &str, version: &str) -> Vec<u8> {
    etcd.key(&format!("module-names/{name}@{version}"))
}

fn chunks_prefix(etcd: &Etcd, id: &str) -> Vec<u8> {
    etcd.key(&format!("module-chunks/{id}/"))
}

impl EtcdModules {
    pub fn new(etcd: Etcd, handle: Handle) -> Self {
        EtcdModules { etcd, handle }
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
            return Ok(());
        }
        let prefix = chunks_prefix(etcd, id);
        let chunks: Vec<Write> = bytes
            .chunks(CHUNK_BYTES_MAX)
            .enumerate()
            .map(|(i, chunk)| {
                let mut key = prefix.clone();
                key.extend_from_slice(format!("{i:06}").as_bytes());
                Write::Put {
                    key,
                    value: chunk.to_vec(),
                }
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
            _ => Ok(()),
        }
    }

    /// Every module of the cluster, by id.
    pub async fn list(&self) -> Result<Vec<(String, ModuleMeta)>, StoreError> {
        let prefix = self.etcd.key("module-meta/");
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

    /// The modules of the cluster that `registry` lacks, with their bytes.
    pub async fn missing(
        &self,
        registry: &Registry,
    ) -> Result<Vec<(String, ModuleMeta, Vec<u8>)>, StoreError> {
        let mut missing = Vec::new();
        for (id, meta) in self.list().await? {
            if registry.get(&id).is_none() {
                let bytes = self.fetch(&id, &meta).await?;
                missing.push((id, meta, bytes));
            }
        }
        Ok(missing)
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

    fn copy_missing(&self, registry: &Registry) -> anyhow::Result<usize> {
        let mut copied = 0;
        for (id, meta, bytes) in self.handle.block_on(self.missing(registry))? {
            // A module that does not load here is skipped, and the others
            // are copied all the same.
            match registry.upload(&meta.name, &meta.version, &bytes) {
                Ok(_) => {
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
