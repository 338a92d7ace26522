//! Uploaded modules at run time: uploads, deletes, and in cluster mode the
//! port to the cluster's shared copy of them ([`SharedModules`]). A delete
//! checks, under every shard's lock, that no group's config names the
//! module; it never touches a group.

use std::sync::{Arc, MutexGuard};

use crate::protocol::core::Output;
use crate::registry::{Entry, Registry, RegistryError, Resolved};

use super::execute::{Weight, lock_shard};
use super::scope::Scope;
use super::{Runtime, RuntimeError, shard};

/// Where a cluster keeps its uploaded modules: stored once, with a copy
/// in every node's registry. Its calls block: make them off the async
/// threads.
pub trait SharedModules: Send + Sync + 'static {
    /// Makes `entry`, just uploaded here as `bytes`, the cluster's;
    /// returns once that is durable. Refused if the cluster has another
    /// module of its name.
    fn publish(&self, entry: &Entry, bytes: &[u8]) -> Result<(), RegistryError>;
    /// Copies into `registry` every module of the cluster it lacks, and
    /// removes from it those the cluster deleted; returns how many it
    /// copied.
    fn copy_missing(&self, registry: &Registry) -> anyhow::Result<usize>;
    /// Deletes `entry` from the cluster unless a group of any node names
    /// it (`RegistryError::InUse`); once it returns `Ok`, no bind of it
    /// can land anywhere.
    fn delete(&self, entry: &Entry) -> Result<(), RegistryError>;
    /// Whether the module `reference` names (uploaded, held by the
    /// registry) is still the cluster's.
    fn is_shared(&self, reference: &str) -> Result<bool, RegistryError>;
}

impl Runtime {
    /// Cluster mode: uploads go to `modules` too, and a binding that
    /// names a module the registry lacks copies the cluster's first.
    pub fn share_modules(&self, modules: Arc<dyn SharedModules>) {
        assert!(
            self.shared_modules.set(modules).is_ok(),
            "the shared modules are set once"
        );
    }

    /// Cluster mode: copies into the registry the cluster's modules it
    /// lacks (blocking); `Ok(0)` on one host.
    pub fn copy_missing_modules(&self) -> anyhow::Result<usize> {
        match self.shared_modules.get() {
            Some(modules) => modules.copy_missing(&self.registry),
            None => Ok(0),
        }
    }

    /// Uploads a module (blocking: it compiles): validated and stored in
    /// the registry and, in cluster mode, made the cluster's before the
    /// answer. Returns the entry and whether it is new to the registry.
    pub fn upload_module(
        &self,
        name: &str,
        version: &str,
        bytes: &[u8],
    ) -> Result<(Entry, bool), RuntimeError> {
        let Some(shared) = self.shared_modules.get() else {
            return Ok(self.registry.upload(name, version, bytes)?);
        };
        // The cluster's names first, so that a taken one is refused here
        // before anything is compiled.
        if let Err(error) = shared.copy_missing(&self.registry) {
            tracing::warn!(%error, "copying the cluster's modules before an upload failed");
        }
        let (entry, created) = self.registry.upload(name, version, bytes)?;
        if let Err(error) = shared.publish(&entry, bytes) {
            if created && matches!(error, RegistryError::NameTaken { .. }) {
                // Another node gave the name to other bytes meanwhile: the
                // cluster's module wins, and this copy goes.
                let _mutation = self.registry.mutation.blocking_lock();
                self.registry.unlist(&entry.module.id);
                let _ = self.registry.remove_files(&entry.module.id);
            }
            return Err(error.into());
        }
        Ok((entry, created))
    }

    /// Deletes an uploaded module (by id or `name@version`) that no group's
    /// config names. The check and the unlisting happen under the core's
    /// lock, and the answer waits until every change before it is durable,
    /// so a config that stopped naming the module is in the log before the
    /// module's files go.
    pub async fn delete_assignor(self: &Arc<Self>, reference: &str) -> Result<Entry, RuntimeError> {
        if let Some(shared) = self.shared_modules.get().cloned() {
            return self.delete_shared_assignor(shared, reference).await;
        }
        let registry = self.registry.clone();
        let _mutation = registry.mutation.lock().await;
        let id = match registry.resolve(reference) {
            None => return Err(RegistryError::Unknown(reference.to_owned()).into()),
            Some(Resolved::Builtin(name)) => {
                return Err(RegistryError::Builtin(name.to_owned()).into());
            }
            Some(Resolved::Uploaded(id)) => id,
        };
        let entry = self.unlist_if_unbound(&registry, &id)?;
        // A config that stopped naming the module must be durable before
        // the module's files go.
        for shard in self.shards.iter() {
            match self
                .execute_on(shard, Scope::Shard, Weight::Light, |_, _| {
                    Ok(((), Output::default()))
                })
                .await
            {
                Ok(()) | Err(RuntimeError::ShardNotServed { .. }) => {}
                Err(error) => return Err(error),
            }
        }
        registry.remove_files(&id)?;
        Ok(entry)
    }

    /// Unlists the uploaded module `id` if no group of any shard names it
    /// (as its assignor or its fallback). Every shard's lock is held at
    /// once (in shard order; nothing else takes two), so that no config
    /// can come to name the module between the check and the unlisting.
    fn unlist_if_unbound(&self, registry: &Registry, id: &str) -> Result<Entry, RuntimeError> {
        let states: Vec<MutexGuard<'_, Option<shard::Served>>> =
            self.shards.iter().map(|shard| lock_shard(shard)).collect();
        let mut bound = Vec::new();
        for (shard, state) in self.shards.iter().zip(&states) {
            let Some(served) = state.as_ref() else {
                return Err(RuntimeError::ShardNotServed {
                    shard: shard.id,
                    group: None,
                });
            };
            bound.extend(
                served
                    .core
                    .groups()
                    .filter(|g| {
                        std::iter::once(&g.config.assignor)
                            .chain(&g.config.fallback_assignor)
                            .any(|name| {
                                registry.resolve(name) == Some(Resolved::Uploaded(id.to_owned()))
                            })
                    })
                    .map(|g| g.name.clone()),
            );
        }
        if !bound.is_empty() {
            bound.sort();
            return Err(RegistryError::InUse {
                id: id.to_owned(),
                groups: bound.join(", "),
            }
            .into());
        }
        Ok(registry.unlist(id).expect("a resolved module is listed"))
    }

    /// Cluster mode's delete: a module is the cluster's, and the groups
    /// that may name it live on every node's shards, so the check is
    /// etcd's (`SharedModules::delete`: an index key per group that
    /// names a module, written with the records that make it name it);
    /// then the copy here goes. The other nodes drop theirs at their next
    /// sync, or at once when a bind names it.
    async fn delete_shared_assignor(
        self: &Arc<Self>,
        shared: Arc<dyn SharedModules>,
        reference: &str,
    ) -> Result<Entry, RuntimeError> {
        let registry = self.registry.clone();
        let reference = reference.to_owned();
        tokio::task::spawn_blocking(move || -> Result<Entry, RuntimeError> {
            if registry.resolve(&reference).is_none()
                && let Err(error) = shared.copy_missing(&registry)
            {
                tracing::warn!(%error, "copying the cluster's modules failed");
            }
            let _mutation = registry.mutation.blocking_lock();
            let entry = match registry.resolve(&reference) {
                None => return Err(RegistryError::Unknown(reference).into()),
                Some(Resolved::Builtin(name)) => {
                    return Err(RegistryError::Builtin(name.to_owned()).into());
                }
                Some(Resolved::Uploaded(id)) => registry.get(&id).expect("a resolved module"),
            };
            shared.delete(&entry)?;
            registry.unlist(&entry.module.id);
            registry.remove_files(&entry.module.id)?;
            Ok(entry)
        })
        .await
        .map_err(|join_error| {
            RuntimeError::from(RegistryError::Storage(format!(
                "deleting the module panicked: {join_error}"
            )))
        })?
    }
}
