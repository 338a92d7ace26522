//! The admin commands on a group: configure, bind (a hot swap), rollback
//! and drain. Each checks what it names (the assignor resolves, its params
//! are accepted, the member token policy holds) before the core changes
//! anything, and runs as one step under its shard's lock.

use std::sync::Arc;

use crate::protocol::core::ProtocolError;
use crate::protocol::group::{BindingSpec, GroupConfig};
use crate::registry::Resolved;

use super::execute::{FORMAT_WITH_LOADS, FORMAT_WITH_ROUTES, FORMAT_WITH_SHADOWS, Weight};
use super::{Runtime, RuntimeError, TokenChanges};

impl Runtime {
    /// Creates or replaces a group's config; returns whether the group was
    /// created. The assignor must be one this host can run: a built-in, or
    /// an uploaded module by id or `name@version`. It is resolved under the
    /// core's lock, which a delete also takes to check that no group names
    /// the module, so a module cannot vanish from under a binding.
    /// `tokens` set, remove or keep the group's member and reader tokens
    /// (in place of `config.member_token_sha256` and
    /// `config.reader_token_sha256`), under the same lock.
    pub async fn configure(
        self: &Arc<Self>,
        group: &str,
        mut config: GroupConfig,
        tokens: TokenChanges,
    ) -> Result<bool, RuntimeError> {
        crate::protocol::core::check_config(&config)?;
        if matches!(tokens.reader, super::TokenChange::Set(Some(_))) {
            self.check_format_level("a reader token", FORMAT_WITH_ROUTES)?;
        }
        if config.routes_valid_ms != crate::protocol::group::defaults::routes_valid_ms() {
            self.check_format_level(
                "a routes_valid_ms other than the default",
                FORMAT_WITH_ROUTES,
            )?;
        }
        if !config.load_settings_default() {
            self.check_format_level(
                "a load_unit, load_half_life_ms, load_window_ms, load_cooldown_ms or frozen other than the default",
                FORMAT_WITH_LOADS,
            )?;
        }
        if !config.labels.is_empty() {
            self.check_format_level("a label", FORMAT_WITH_SHADOWS)?;
        }
        self.check_params(&config.binding_spec()).await?;
        self.execute(group, Weight::Light, |core, now| {
            self.check_resolves(&config.binding_spec())?;
            let created = core.group(group).is_none();
            let current = core.group(group).map(|g| &g.config);
            config.member_token_sha256 = tokens
                .member
                .apply(current.and_then(|c| c.member_token_sha256.as_ref()));
            config.reader_token_sha256 = tokens
                .reader
                .apply(current.and_then(|c| c.reader_token_sha256.as_ref()));
            self.admission
                .check_config(group, config.member_token_sha256.as_deref())?;
            if created {
                self.group_cap.admit()?;
            }
            let output = core.configure(group, config, now).inspect_err(|_| {
                if created {
                    self.group_cap.release();
                }
            })?;
            Ok((created, output))
        })
        .await
    }

    /// Binds a group to an assignor (a built-in, or an uploaded module by
    /// id or `name@version`) and params: a hot swap, its new target asked
    /// for at once. Resolved under the core's lock, as for `configure`.
    /// Returns whether the binding changed.
    pub async fn bind(
        self: &Arc<Self>,
        group: &str,
        spec: BindingSpec,
    ) -> Result<bool, RuntimeError> {
        self.check_params(&spec).await?;
        self.execute(group, Weight::Light, |core, now| {
            if core.group(group).is_none() {
                return Err(ProtocolError::UnknownGroup(group.to_owned()).into());
            }
            self.check_resolves(&spec)?;
            let output = core.bind(group, spec, now)?;
            Ok((!output.records.is_empty(), output))
        })
        .await
    }

    /// Whether a binding's assignor and fallback accept its params (see
    /// `Registry::check_params`), off the async workers. A reference that
    /// does not resolve is left to `check_resolves`, under the core's lock.
    pub(super) async fn check_params(&self, spec: &BindingSpec) -> Result<(), RuntimeError> {
        let registry = self.registry.clone();
        let module = spec.assignor.clone();
        let spec = spec.clone();
        let shared = self.shared_modules.get().cloned();
        tokio::task::spawn_blocking(move || -> Result<(), RuntimeError> {
            let names = || std::iter::once(&spec.assignor).chain(&spec.fallback);
            if let Some(shared) = &shared
                && names().any(|name| registry.resolve(name).is_none())
            {
                // Uploaded through another node, and not copied here yet.
                if let Err(error) = shared.copy_missing(&registry) {
                    tracing::warn!(%error, "copying the cluster's modules failed");
                }
            }
            if let Some(shared) = &shared {
                for name in names() {
                    // Deleted from the cluster since this node copied it:
                    // it goes here too (and the bind is refused as
                    // unknown), rather than a batch that names it be
                    // refused by etcd.
                    if let Some(Resolved::Uploaded(id)) = registry.resolve(name)
                        && !shared.is_shared(name)?
                    {
                        let _mutation = registry.mutation.blocking_lock();
                        registry.unlist(&id);
                        registry.remove_files(&id)?;
                    }
                }
            }
            for name in names() {
                if registry.resolve(name).is_some() {
                    registry.check_params(name, &spec.params)?;
                }
            }
            Ok(())
        })
        .await
        .map_err(|join_error| RuntimeError::AssignorFailed {
            module,
            message: format!("checking the params panicked: {join_error}"),
        })?
    }

    /// Whether this host can run a binding's assignor and its fallback.
    pub(super) fn check_resolves(&self, spec: &BindingSpec) -> Result<(), RuntimeError> {
        for name in std::iter::once(&spec.assignor).chain(&spec.fallback) {
            if self.registry.resolve(name).is_none() {
                return Err(RuntimeError::UnknownAssignor { name: name.clone() });
            }
        }
        Ok(())
    }

    /// Binds a group back to its previous binding. A module deleted since
    /// is `unknown_assignor`; nothing changes.
    pub async fn rollback(self: &Arc<Self>, group: &str) -> Result<(), RuntimeError> {
        self.execute(group, Weight::Light, |core, now| {
            let previous = core
                .group(group)
                .ok_or_else(|| ProtocolError::UnknownGroup(group.to_owned()))?
                .previous_binding()
                .ok_or_else(|| ProtocolError::NoPreviousBinding(group.to_owned()))?;
            self.check_resolves(&previous.spec())?;
            Ok(((), core.rollback(group, now)?))
        })
        .await
    }

    /// An admin drain of a member (by member id or static name); returns
    /// whether the drain started now (false: it was already draining).
    pub async fn drain(self: &Arc<Self>, group: &str, member: &str) -> Result<bool, RuntimeError> {
        self.execute(group, Weight::Light, |core, now| {
            let output = core.drain(group, member, now)?;
            Ok((!output.records.is_empty(), output))
        })
        .await
    }
}
