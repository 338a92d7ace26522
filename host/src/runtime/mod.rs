//! The runtime: glues the sans-IO protocol core to time, persistence and
//! the plugin engine. It owns the one [`Coordinator`] behind a
//! `std::sync::Mutex` (core calls take microseconds; the lock is never held
//! across an await, a persist or an assignor call), reads the clock and
//! passes the time into every core call, ticks the core's timers, and
//! handles every core [`Output`] the same way:
//!
//! 1. its records are queued for the [`RecordSink`] under the lock, so the
//!    sink sees them in apply order; the caller's answer waits until they
//!    are durable;
//! 2. its assignor calls each run on `spawn_blocking`, off every request
//!    path, and their answers go back into the core (whose output is
//!    handled the same way).
//!
//! It also measures how late it runs itself (ticks that fire after their
//! deadline, heartbeats that wait for the core) and hands that to the core
//! with every tick and heartbeat, so that members are not expired for the
//! host's own lateness and are told to beat less often instead.
//!
//! It knows nothing of HTTP: the `api` module maps its results and errors.

mod assignors;
mod clock;
mod lateness;
mod member_token;
pub mod observe;
mod preview;
mod sink;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::plugins::{BUILTIN_NAMES, Limits, PluginEngine};
use crate::protocol::core::{Coordinator, Heartbeat, HeartbeatResponse, Output, ProtocolError};
use crate::protocol::group::{BindingSpec, GroupConfig, Millis};
use crate::registry::{Entry, Registry, RegistryError, Resolved};

pub use clock::Clock;
pub use lateness::Lateness;
pub use member_token::{AdmissionPolicy, MemberTokenChange};
pub use preview::Preview;
pub use sink::{CountingSink, PersistError, RecordQueue, RecordSink};

/// How often the core's timers are advanced by default.
pub const TICK_INTERVAL_MS: u64 = 50;

/// Why the runtime refused or could not finish a request.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The core refused the input; nothing changed.
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    /// A config names an assignor this host cannot run; nothing changed.
    #[error(
        "assignor {name:?} is neither a built-in assignor ({}) nor an uploaded module (by id or name@version)",
        BUILTIN_NAMES.join(", ")
    )]
    UnknownAssignor { name: String },
    /// The module registry refused an upload or a delete; nothing changed.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// A preview on a group with no members (none that is not draining):
    /// there is nothing to assign to; nothing changed.
    #[error(
        "group {0:?} has no members to assign to; a preview needs at least one member that is not draining"
    )]
    EmptyGroup(String),
    /// A preview's candidate trapped, passed a limit or answered an
    /// invalid assignment; nothing changed.
    #[error("assignor {module:?} failed: {message}")]
    AssignorFailed { module: String, message: String },
    /// The change was applied but could not be made durable; from now on
    /// every request is refused.
    #[error(transparent)]
    Storage(#[from] PersistError),
    /// A heartbeat without a bearer token to a group with a member
    /// token; nothing changed.
    #[error("group {0:?} needs its member token: send `Authorization: Bearer TOKEN`")]
    MemberTokenMissing(String),
    /// A heartbeat whose bearer token is not its group's member token;
    /// nothing changed.
    #[error("the token is not group {0:?}'s member token")]
    MemberTokenWrong(String),
    /// A heartbeat to a group without a member token on a host that
    /// requires one (`serve --require-member-token`); nothing changed.
    #[error(
        "this host requires a member token of every group, and group {0:?} has none: an admin must set `member_token` in its config"
    )]
    MemberTokenRequired(String),
    /// A config that would leave its group without a member token on a
    /// host that requires one; nothing changed.
    #[error(
        "this host requires a member token of every group (serve --require-member-token): group {0:?}'s config needs `member_token`"
    )]
    ConfigWithoutMemberToken(String),
    /// A join that would create a member in a group without a member
    /// token, while the group's join bucket is empty; nothing changed.
    #[error(
        "group {group:?} has no member token and takes new members at a limited rate; retry in {retry_after_ms} ms"
    )]
    JoinRateLimited { group: String, retry_after_ms: u64 },
    /// A bug: the core panicked while holding its lock.
    #[error("internal error: {0}")]
    Internal(&'static str),
}

/// The runtime's settings.
#[derive(Clone, Copy, Debug)]
pub struct RuntimeConfig {
    /// Member ids derive from this seed (see `Coordinator::new`).
    pub seed: u64,
    /// Limits of every assignor call.
    pub limits: Limits,
    /// How groups without a member token are treated.
    pub admission: AdmissionPolicy,
}

/// The coordinator at run time; share it as `Arc<Runtime>`.
pub struct Runtime {
    core: Mutex<Coordinator>,
    clock: Clock,
    queue: RecordQueue,
    registry: Arc<Registry>,
    limits: Limits,
    admission: member_token::Admission,
    calls_in_flight: AtomicU64,
    calls_finished: AtomicU64,
    /// Rebalances in progress, fed every record under the core's lock.
    rebalances: Mutex<observe::Rebalances>,
    /// How late the host runs (see [`Lateness`]).
    lateness: Lateness,
}

impl Runtime {
    pub fn new(
        config: RuntimeConfig,
        clock: Clock,
        sink: Arc<dyn RecordSink>,
        engine: Arc<PluginEngine>,
    ) -> Arc<Self> {
        Self::recovered(
            config,
            Coordinator::new(config.seed),
            clock,
            sink,
            Arc::new(Registry::in_memory(engine)),
        )
    }

    /// A runtime around a core rebuilt from the record log. Its timers
    /// start afresh: every member gets its full session or registration
    /// timeout from now, so a restarted host causes no rebalance if members
    /// come back in time.
    pub fn recovered(
        config: RuntimeConfig,
        mut core: Coordinator,
        clock: Clock,
        sink: Arc<dyn RecordSink>,
        registry: Arc<Registry>,
    ) -> Arc<Self> {
        core.restarted(clock.now());
        // Metrics recorded from here on reach `GET /metrics`.
        crate::telemetry::handle();
        Arc::new(Runtime {
            core: Mutex::new(core),
            clock,
            queue: RecordQueue::start(sink),
            registry,
            limits: config.limits,
            admission: member_token::Admission::new(config.admission),
            calls_in_flight: AtomicU64::new(0),
            calls_finished: AtomicU64::new(0),
            rebalances: Mutex::default(),
            lateness: Lateness::default(),
        })
    }

    /// Whether persisting has failed: every request is refused from then
    /// on.
    pub fn failed(&self) -> bool {
        self.queue.failed()
    }

    /// The uploaded modules, and the engine every assignor runs in.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// The clock every core call is given.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// How late the host runs, as the core is told.
    pub fn lateness(&self) -> &Lateness {
        &self.lateness
    }

    /// Assignor calls started and not yet answered.
    pub fn calls_in_flight(&self) -> u64 {
        self.calls_in_flight.load(Ordering::SeqCst)
    }

    /// Assignor calls answered so far (successfully or not).
    pub fn calls_finished(&self) -> u64 {
        self.calls_finished.load(Ordering::SeqCst)
    }

    /// Runs `step` on the core, under the lock, with the current time;
    /// queues its records for persistence before the lock is released;
    /// starts its assignor calls; and returns once its records (and all
    /// before them) are durable. An error from `step` changed nothing.
    async fn execute<T>(
        self: &Arc<Self>,
        step: impl FnOnce(&mut Coordinator, Millis) -> Result<(T, Output), RuntimeError>,
    ) -> Result<T, RuntimeError> {
        if self.queue.failed() {
            return Err(PersistError("an earlier persist failed".into()).into());
        }
        let (value, durable, calls) = {
            let mut core = self
                .core
                .lock()
                .map_err(|_| RuntimeError::Internal("the coordinator core panicked earlier"))?;
            let now = self.clock.now();
            let (value, output) = step(&mut core, now)?;
            if !output.records.is_empty() {
                let mut rebalances = self.rebalances.lock().unwrap_or_else(|e| e.into_inner());
                rebalances.observe(&output.records, now, observe::record);
            }
            let durable = self.queue.submit(output.records);
            (value, durable, output.assignor_calls)
        };
        self.start_assignor_calls(calls);
        durable
            .await
            .map_err(|_| PersistError("the persistence thread has stopped".into()))??;
        Ok(value)
    }

    /// Reads the core once everything applied before is durable, so that
    /// nothing is shown that a crash could take back.
    pub async fn read<T>(
        self: &Arc<Self>,
        read: impl FnOnce(&Coordinator, Millis) -> T,
    ) -> Result<T, RuntimeError> {
        self.execute(|core, now| Ok((read(core, now), Output::default())))
            .await
    }

    /// Creates or replaces a group's config; returns whether the group was
    /// created. The assignor must be one this host can run: a built-in, or
    /// an uploaded module by id or `name@version`. It is resolved under the
    /// core's lock, which a delete also takes to check that no group names
    /// the module, so a module cannot vanish from under a binding.
    /// `member_token` sets, removes or keeps the group's member token (in
    /// place of `config.member_token_sha256`), under the same lock.
    pub async fn configure(
        self: &Arc<Self>,
        group: &str,
        mut config: GroupConfig,
        member_token: MemberTokenChange,
    ) -> Result<bool, RuntimeError> {
        crate::protocol::core::check_config(&config)?;
        self.check_params(&config.binding_spec()).await?;
        self.execute(|core, now| {
            self.check_resolves(&config.binding_spec())?;
            let created = core.group(group).is_none();
            config.member_token_sha256 = member_token.apply(core.group(group));
            self.admission
                .check_config(group, config.member_token_sha256.as_deref())?;
            let output = core.configure(group, config, now)?;
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
        self.execute(|core, now| {
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
    async fn check_params(&self, spec: &BindingSpec) -> Result<(), RuntimeError> {
        let registry = self.registry.clone();
        let module = spec.assignor.clone();
        let spec = spec.clone();
        tokio::task::spawn_blocking(move || -> Result<(), RuntimeError> {
            for name in std::iter::once(&spec.assignor).chain(&spec.fallback) {
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
    fn check_resolves(&self, spec: &BindingSpec) -> Result<(), RuntimeError> {
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
        self.execute(|core, now| {
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

    /// Deletes an uploaded module (by id or `name@version`) that no group's
    /// config names. The check and the unlisting happen under the core's
    /// lock, and the answer waits until every change before it is durable,
    /// so a config that stopped naming the module is in the log before the
    /// module's files go.
    pub async fn delete_assignor(self: &Arc<Self>, reference: &str) -> Result<Entry, RuntimeError> {
        let registry = self.registry.clone();
        let _mutation = registry.mutation.lock().await;
        let id = match registry.resolve(reference) {
            None => return Err(RegistryError::Unknown(reference.to_owned()).into()),
            Some(Resolved::Builtin(name)) => {
                return Err(RegistryError::Builtin(name.to_owned()).into());
            }
            Some(Resolved::Uploaded(id)) => id,
        };
        let entry = self
            .execute(|core, _| {
                let bound: Vec<&str> = core
                    .groups()
                    .filter(|g| {
                        std::iter::once(&g.config.assignor)
                            .chain(&g.config.fallback_assignor)
                            .any(|name| {
                                registry.resolve(name) == Some(Resolved::Uploaded(id.clone()))
                            })
                    })
                    .map(|g| g.name.as_str())
                    .collect();
                if !bound.is_empty() {
                    return Err(RegistryError::InUse {
                        id: id.clone(),
                        groups: bound.join(", "),
                    }
                    .into());
                }
                let entry = registry.unlist(&id).expect("a resolved module is listed");
                Ok((entry, Output::default()))
            })
            .await?;
        registry.remove_files(&id)?;
        Ok(entry)
    }

    /// One member heartbeat (join, heartbeat, leave). `member_token_sha256`
    /// is the sha256 (lowercase hex) of the bearer token the member sent,
    /// if any: a group with a member token refuses a heartbeat without it
    /// (`MemberTokenMissing`) or with another (`MemberTokenWrong`).
    pub async fn heartbeat(
        self: &Arc<Self>,
        request: &Heartbeat,
        member_token_sha256: Option<&str>,
    ) -> Result<HeartbeatResponse, RuntimeError> {
        let arrived = self.clock.now();
        self.execute(|core, now| {
            // A heartbeat that waited for the core: the host runs late.
            self.lateness.observe(now.saturating_sub(arrived), now);
            self.admission.admit(
                core.group(&request.group),
                request,
                member_token_sha256,
                now,
            )?;
            Ok(core.heartbeat_loaded(request, now, self.lateness.load(now))?)
        })
        .await
    }

    /// An admin drain of a member (by member id or static name); returns
    /// whether the drain started now (false: it was already draining).
    pub async fn drain(self: &Arc<Self>, group: &str, member: &str) -> Result<bool, RuntimeError> {
        self.execute(|core, now| {
            let output = core.drain(group, member, now)?;
            Ok((!output.records.is_empty(), output))
        })
        .await
    }

    /// Advances the core's timers once, judging members' silence with the
    /// host's lateness taken off.
    pub async fn tick(self: &Arc<Self>) -> Result<(), RuntimeError> {
        self.execute(|core, now| Ok(((), core.tick_loaded(now, self.lateness.load(now)))))
            .await
    }

    /// Scans the core once (under its lock) and sets the group and member
    /// gauges (after it).
    pub fn refresh_gauges(&self) {
        let figures = match self.core.lock() {
            Ok(core) => observe::scan(&core),
            Err(_) => return,
        };
        observe::publish(&figures);
    }

    /// Ticks every `period` until the runtime is dropped (the task holds no
    /// strong reference) or the task is aborted; refreshes the gauges at
    /// most once a second, after a tick. A tick that fires after its
    /// deadline tells the runtime it runs late (a stalled process, starved
    /// workers).
    pub fn spawn_ticker(self: &Arc<Self>, period: Duration) -> tokio::task::JoinHandle<()> {
        let weak: Weak<Runtime> = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(period);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut failing = false;
            let mut scanned: Option<Instant> = None;
            loop {
                let deadline = interval.tick().await;
                let Some(runtime) = weak.upgrade() else {
                    return;
                };
                let late_ms = u64::try_from(deadline.elapsed().as_millis()).unwrap_or(u64::MAX);
                runtime.lateness.observe(late_ms, runtime.clock.now());
                match runtime.tick().await {
                    Ok(()) => failing = false,
                    Err(error) if !failing => {
                        // Logged once per run of failures, not every 50 ms.
                        tracing::error!(%error, "tick failed");
                        failing = true;
                    }
                    Err(_) => {}
                }
                if scanned.is_none_or(|at| {
                    at.elapsed() >= Duration::from_millis(observe::SCAN_INTERVAL_MS)
                }) {
                    runtime.refresh_gauges();
                    scanned = Some(Instant::now());
                }
            }
        })
    }
}
