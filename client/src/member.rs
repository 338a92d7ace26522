//! The heartbeat loop: one background task per member that joins, beats at
//! the host's interval, turns answers into [`Event`]s, and handles fencing,
//! rejoins, retries, drains and leaves. It owns the member id and epoch and
//! the policy for every error code; it chooses the member id itself (random,
//! as KIP-848 members do) and keeps it across retries of a join, so that a
//! join whose answer was lost and is sent again is the same member. It owns
//! the lease too: the last answer's, counted from when its heartbeat was
//! sent, or that answer's longer unreached lease while every heartbeat
//! since certainly reached no coordinator (a coordinator that died, before
//! another node serves the group); when the lease in force runs out, every
//! task stops (see [`Status::lease_until`]). What to tell the application
//! about tasks is the tracker's business, and HTTP the transport's.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep, sleep_until};

use crate::config::MemberConfig;
use crate::error::codes;
use crate::tracker::{Assignment, Change, Tracker};
use crate::transport::Transport;
use crate::wire::{HeartbeatRequest, HeartbeatResponse, JOIN_EPOCH, LEAVE_EPOCH, LagRow};
use crate::{ClientError, Task};

/// The heartbeat interval used until the host names one.
const INTERVAL_BEFORE_JOIN: Duration = Duration::from_secs(1);
/// The shortest interval followed, whatever the host says.
const INTERVAL_MIN: Duration = Duration::from_millis(10);
/// The first retry delay after a failure; it doubles up to
/// [`RETRY_BACKOFF_MAX`], and never past the heartbeat interval.
const RETRY_BACKOFF_MIN: Duration = Duration::from_millis(50);
/// The longest retry delay (Kafka's `retry.backoff.max.ms` default): when a
/// coordinator died, the member reaches the node that takes its shard over
/// within a second of it serving, not a whole interval later.
const RETRY_BACKOFF_MAX: Duration = Duration::from_secs(1);
/// How many times a leave is tried when the host does not answer.
const LEAVE_ATTEMPTS_MAX: u32 = 3;
/// Random bytes in a member-chosen id (as many as a UUID's).
const MEMBER_ID_RANDOM_BYTES: usize = 16;

/// A fresh member id for a join: `c-` and 32 random hex digits. Without
/// randomness (never in practice) the id is left to the host (empty),
/// which a retried join then cannot match.
fn choose_member_id() -> String {
    let mut bytes = [0u8; MEMBER_ID_RANDOM_BYTES];
    match getrandom::fill(&mut bytes) {
        Ok(()) => {
            let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            format!("c-{hex}")
        }
        Err(error) => {
            tracing::warn!(%error, "no random bytes for a member id: the host will issue one");
            String::new()
        }
    }
}

/// The wait before the attempt after `failures` failed heartbeats in a row
/// (from 1): exponential from [`RETRY_BACKOFF_MIN`], at most
/// [`RETRY_BACKOFF_MAX`] and never longer than the heartbeat `interval`.
fn retry_backoff(failures: u32, interval: Duration) -> Duration {
    let doubling = 2u32.saturating_pow(failures.saturating_sub(1).min(16));
    (RETRY_BACKOFF_MIN * doubling)
        .min(RETRY_BACKOFF_MAX)
        .min(interval)
}

/// Where the application's lag figures come from: the state it keeps for
/// tasks it does not process (learners, standbys) lags behind their
/// changelogs. Called before every heartbeat; the rows are sent as `lags`,
/// and they replace the member's previous report on the host. A learner
/// at or under the group's acceptable recovery lag counts as caught up, and
/// its task moves here.
pub trait LagSource: Send + 'static {
    /// `[task, lag]` (records behind the changelog's end) for the learner
    /// and standby tasks of `assignment`, and for any other task whose
    /// state this member keeps, if it wants the host to know.
    fn lags(&mut self, assignment: &Assignment) -> Vec<(Task, u64)>;
}

impl<F> LagSource for F
where
    F: FnMut(&Assignment) -> Vec<(Task, u64)> + Send + 'static,
{
    fn lags(&mut self, assignment: &Assignment) -> Vec<(Task, u64)> {
        self(assignment)
    }
}

/// Sees every heartbeat's round trip: how long it took and whether the
/// host answered 200. For load generators and metrics; called on the
/// heartbeat loop, so it must be quick.
pub trait HeartbeatObserver: Send + Sync + 'static {
    fn heartbeat(&self, latency: Duration, result: Result<(), &ClientError>);
}

/// A member that keeps no state: it reports no lags.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoLags;

impl LagSource for NoLags {
    fn lags(&mut self, _: &Assignment) -> Vec<(Task, u64)> {
        Vec::new()
    }
}

/// What the application must act on, in order.
#[derive(Debug)]
pub enum Event {
    /// The member joined (or rejoined) and has this member id.
    Joined {
        member_id: String,
    },
    /// Newly active tasks: start processing them.
    Assigned(Vec<Task>),
    /// Stop processing these, then call [`RevokeAck::ack`]. Until then the
    /// member keeps reporting them as owned and nobody else gets them; if
    /// the acknowledgement takes longer than the group's expansion timeout,
    /// the host fences the member.
    Revoked {
        tasks: Vec<Task>,
        ack: RevokeAck,
    },
    /// Start warming these up (replay their changelogs) and report lag.
    LearnerStarted(Vec<Task>),
    /// Stop warming these up; they went elsewhere.
    LearnerStopped(Vec<Task>),
    /// Learner (or standby) tasks that became active: their warm state is
    /// now the active one. No `LearnerStopped` is sent for them. (A caught-up
    /// learner is granted once its old owner has released it; in between the
    /// host lists it nowhere, and the member keeps it as a learner.)
    Promoted(Vec<Task>),
    StandbyStarted(Vec<Task>),
    StandbyStopped(Vec<Task>),
    /// The member is draining (asked by [`MemberHandle::drain`] or by an
    /// admin): its tasks will be revoked as their new owners warm up.
    Draining,
    /// The drain finished: the member holds nothing. The loop leaves the
    /// group and ends.
    Drained,
    /// These tasks are no longer this member's and may already be active
    /// elsewhere: stop processing them at once (no acknowledgement). Also
    /// sent when the member's lease runs out without an answer from the
    /// host (see [`Status::lease_until`]); if the host still counts the
    /// member, the next answer assigns them again.
    Lost(Vec<Task>),
    /// The host removed this member (it expired, or held tasks past the
    /// expansion timeout): it rejoins (`rejoining`), a static member under
    /// its name, a dynamic one as a new member, Kafka's behaviour; a member
    /// that was leaving or draining does not. A `Lost` event with every
    /// held task comes first.
    Fenced {
        rejoining: bool,
    },
    /// Another process joined with this member's name and took its slot
    /// (Kafka's `FENCED_INSTANCE_ID`): two processes share `member_name`.
    /// The loop ends without rejoining, since a rejoin would take the name
    /// back and fence the other process in turn. A `Lost` event with every
    /// held task comes first.
    Replaced {
        member_name: String,
    },
    /// A failed heartbeat. The loop retries with backoff, keeping its epoch
    /// (a lost answer is tolerated by the host) unless the error says the
    /// member must rejoin.
    Error(ClientError),
}

enum Command {
    Ack(u64),
    Drain,
    Leave(oneshot::Sender<Result<(), ClientError>>),
}

/// The release of a revocation. Call [`ack`](RevokeAck::ack) once the
/// application has stopped processing the tasks of its `Revoked` event.
/// Dropping it without acknowledging keeps the tasks owned (the host will
/// eventually fence the member).
#[must_use = "a revocation must be acknowledged once the tasks are stopped"]
pub struct RevokeAck {
    id: u64,
    commands: mpsc::UnboundedSender<Command>,
}

impl RevokeAck {
    /// The tasks are stopped: the next heartbeat (sent at once) no longer
    /// reports them as owned, and the host hands them to their next owner.
    pub fn ack(self) {
        let _ = self.commands.send(Command::Ack(self.id));
    }
}

impl std::fmt::Debug for RevokeAck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RevokeAck").field("id", &self.id).finish()
    }
}

/// Where the member is, as last published by its loop.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Status {
    /// The member id, once joined.
    pub member_id: Option<String>,
    pub member_epoch: i64,
    pub assignment: Assignment,
    /// Until when the member may process its tasks: the send time of the
    /// heartbeat last answered plus the lease in that answer. The host
    /// gives nobody else this member's tasks before then, however long the
    /// member is stalled; after it, they may already be active elsewhere.
    /// `None` before the first answer, or from a host that sends no lease.
    ///
    /// While every heartbeat since that answer certainly reached no
    /// coordinator of the group ([`ClientError::Unreached`]: its node died
    /// and no other serves the group yet), it is the answer's longer
    /// *unreached lease* (`unreached_lease_ms`) instead, as long as no task
    /// is being released: the host takes tasks early only through a
    /// heartbeat it got, so it keeps them that long. A failed heartbeat that
    /// may have reached the coordinator brings the plain lease back.
    pub lease_until: Option<std::time::Instant>,
}

impl Status {
    /// Whether the application may still process (and commit the output
    /// of) `task` at `now`: the task is active here (or being released,
    /// not yet acknowledged) and the lease has not run out. Checked before
    /// each commit, it keeps a stalled process (long GC pause, starved CPU,
    /// suspended VM) from writing after the task went elsewhere, even
    /// before the loop can tell it [`Event::Lost`].
    pub fn may_process(&self, task: &Task, now: std::time::Instant) -> bool {
        let held = self.assignment.active.contains(task) || self.assignment.revoking.contains(task);
        held && self.lease_until.is_none_or(|until| now < until)
    }
}

/// Controls a running member. Dropping it stops the loop without leaving,
/// as a crash would (a static member's slot then waits for its
/// registration timeout, a dynamic member's for its session timeout); call
/// [`leave`](MemberHandle::leave) to leave.
pub struct MemberHandle {
    commands: mpsc::UnboundedSender<Command>,
    status: watch::Receiver<Status>,
    task: Option<JoinHandle<()>>,
}

impl MemberHandle {
    pub fn status(&self) -> Status {
        self.status.borrow().clone()
    }

    pub fn member_id(&self) -> Option<String> {
        self.status.borrow().member_id.clone()
    }

    pub fn member_epoch(&self) -> i64 {
        self.status.borrow().member_epoch
    }

    /// The assignment as the application has been told it.
    pub fn assignment(&self) -> Assignment {
        self.status.borrow().assignment.clone()
    }

    /// Whether the application may process `task` now (see
    /// [`Status::may_process`]).
    pub fn may_process(&self, task: &Task) -> bool {
        self.status
            .borrow()
            .may_process(task, std::time::Instant::now())
    }

    /// A receiver that sees every status the loop publishes.
    pub fn watch(&self) -> watch::Receiver<Status> {
        self.status.clone()
    }

    /// Asks the host to drain this member: its tasks move to other members
    /// as they warm up; then [`Event::Drained`] and the loop leaves.
    pub fn drain(&self) {
        let _ = self.commands.send(Command::Drain);
    }

    /// Leaves the group (member epoch -1) and ends the loop. A static
    /// member's leave is temporary: its slot and tasks wait for its
    /// registration timeout. Stop processing first: a dynamic member's
    /// tasks go to others at once. Returns `Ok` if the loop had already
    /// ended.
    pub async fn leave(mut self) -> Result<(), ClientError> {
        let (reply, answer) = oneshot::channel();
        let result = if self.commands.send(Command::Leave(reply)).is_ok() {
            answer.await.unwrap_or(Ok(()))
        } else {
            Ok(())
        };
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        result
    }

    /// Stops the loop without leaving, as a crash would.
    pub fn abort(self) {
        drop(self);
    }

    /// Whether the loop has ended (left, drained, fenced for good).
    pub fn is_finished(&self) -> bool {
        self.task.as_ref().is_none_or(JoinHandle::is_finished)
    }
}

impl Drop for MemberHandle {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Starts members.
pub struct Member;

impl Member {
    /// Starts the heartbeat loop of a member on the current Tokio runtime;
    /// it joins at once. Events arrive on the receiver until the loop ends
    /// (then it yields `None`). If the receiver is dropped, the loop leaves
    /// and ends.
    pub fn start(
        config: MemberConfig,
        lag_source: impl LagSource,
    ) -> Result<(MemberHandle, mpsc::Receiver<Event>), ClientError> {
        Self::start_inner(config, Box::new(lag_source), None)
    }

    /// [`start`](Member::start), with `observer` told of every heartbeat's
    /// latency and outcome (leaves included).
    pub fn start_observed(
        config: MemberConfig,
        lag_source: impl LagSource,
        observer: Arc<dyn HeartbeatObserver>,
    ) -> Result<(MemberHandle, mpsc::Receiver<Event>), ClientError> {
        Self::start_inner(config, Box::new(lag_source), Some(observer))
    }

    fn start_inner(
        config: MemberConfig,
        lag_source: Box<dyn LagSource>,
        observer: Option<Arc<dyn HeartbeatObserver>>,
    ) -> Result<(MemberHandle, mpsc::Receiver<Event>), ClientError> {
        config.check()?;
        let transport = Transport::new(&config)?;
        let (events, receiver) = mpsc::channel(config.event_buffer);
        let (commands, command_receiver) = mpsc::unbounded_channel();
        let (status, status_receiver) = watch::channel(Status::default());
        let runner = Runner {
            config,
            transport,
            lag_source,
            observer,
            tracker: Tracker::new(),
            member_id: String::new(),
            join_id: choose_member_id(),
            epoch: JOIN_EPOCH,
            interval: INTERVAL_BEFORE_JOIN,
            failures: 0,
            drain: false,
            lease_until: None,
            unreached_until: None,
            unreached_flight: None,
            in_flight_since: None,
            reached_since_answer: false,
            on_unreached_lease: false,
            events,
            commands: command_receiver,
            ack_sender: commands.clone(),
            status,
        };
        let task = tokio::spawn(runner.run());
        Ok((
            MemberHandle {
                commands,
                status: status_receiver,
                task: Some(task),
            },
            receiver,
        ))
    }
}

/// The loop's state.
struct Runner {
    config: MemberConfig,
    transport: Transport,
    lag_source: Box<dyn LagSource>,
    observer: Option<Arc<dyn HeartbeatObserver>>,
    tracker: Tracker,
    /// Empty until joined (and again before a rejoin).
    member_id: String,
    /// The id the next join sends, the same for every retry of that join:
    /// a retried join whose first attempt the host did handle is the same
    /// member. A new one for each join after a removal or leave.
    join_id: String,
    epoch: i64,
    interval: Duration,
    /// Failed heartbeats in a row.
    failures: u32,
    /// The application asked to drain.
    drain: bool,
    /// The lease of the last answer (see [`Status::lease_until`]).
    lease_until: Option<Instant>,
    /// The unreached lease of the last answer: how long the member may
    /// keep its active tasks while no heartbeat since reaches the
    /// coordinator.
    unreached_until: Option<Instant>,
    /// The last answer's `unreached_flight_ms`: while a heartbeat is in
    /// flight, the unreached lease counts only until its send time plus
    /// this (the host, should the heartbeat reach it, keeps the tasks that
    /// long after handling it; the member learns whether it did only from
    /// the answer or its timeout). `None` from a host before it: no
    /// unreached lease while a heartbeat is in flight.
    unreached_flight: Option<Duration>,
    /// When the heartbeat in flight was sent, if one is.
    in_flight_since: Option<Instant>,
    /// A heartbeat since the last answer failed in a way that may have
    /// reached the coordinator: the unreached lease no longer holds.
    reached_since_answer: bool,
    /// The member keeps its tasks on `unreached_until` now (later than
    /// `lease_until`): every heartbeat since the last answer certainly
    /// reached no coordinator.
    on_unreached_lease: bool,
    events: mpsc::Sender<Event>,
    commands: mpsc::UnboundedReceiver<Command>,
    ack_sender: mpsc::UnboundedSender<Command>,
    status: watch::Sender<Status>,
}

/// What the loop does after a heartbeat.
enum Next {
    /// Beat again this long after the last heartbeat was sent.
    After(Duration),
    /// Beat again this long after its answer came: the host's
    /// `Retry-After`, which counts from the answer.
    Pause(Duration),
    /// End the loop.
    Stop,
}

impl Runner {
    async fn run(mut self) {
        let mut next = Instant::now();
        loop {
            let lease_end = self.lease_end().unwrap_or(next);
            tokio::select! {
                biased;
                command = self.commands.recv() => {
                    // The loop holds a sender itself, so the channel never
                    // closes while it runs.
                    let Some(command) = command else { return };
                    match command {
                        Command::Ack(ack) => {
                            let (known, changes) = self.tracker.on_ack(ack);
                            if known {
                                self.publish();
                                if !self.tell_all(changes).await {
                                    self.application_gone().await;
                                    return;
                                }
                                // Release at once: the next owner waits.
                                next = Instant::now();
                            }
                        }
                        Command::Drain => {
                            if !self.drain {
                                self.drain = true;
                                next = Instant::now();
                            }
                        }
                        Command::Leave(reply) => {
                            let result = self.leave().await;
                            let _ = reply.send(result);
                            return;
                        }
                    }
                }
                () = sleep_until(lease_end), if self.lease_ends_first(next) => {
                    if !self.lease_ran_out().await {
                        return;
                    }
                    next = Instant::now();
                }
                () = sleep_until(next) => {
                    let started = Instant::now();
                    match self.beat().await {
                        Next::After(delay) => next = started + delay,
                        Next::Pause(delay) => next = Instant::now() + delay,
                        Next::Stop => return,
                    }
                }
            }
        }
    }

    fn request(&mut self) -> HeartbeatRequest {
        let assignment = self.tracker.assignment();
        let lags = self
            .lag_source
            .lags(&assignment)
            .into_iter()
            .map(|(task, lag)| LagRow(task.topic, task.partition, lag))
            .collect();
        let joining = self.member_id.is_empty();
        HeartbeatRequest {
            member_id: if joining {
                self.join_id.clone()
            } else {
                self.member_id.clone()
            },
            member_name: self.config.member_name.clone(),
            member_epoch: self.epoch,
            topics: joining.then(|| self.config.topics.clone()),
            rack: self.config.rack.clone(),
            capacity: Some(self.config.capacity),
            owned: Some(self.tracker.owned()),
            lags: Some(lags),
            drain: self.drain,
            task_ranges: true,
        }
    }

    async fn beat(&mut self) -> Next {
        let request = self.request();
        let sent = Instant::now();
        self.in_flight_since = Some(sent);
        let outcome = match self.unreached_flight.filter(|_| self.on_unreached_lease) {
            Some(flight) => {
                // This heartbeat may reach the coordinator: should it
                // still be in flight half its bound later (a refusal, a
                // redirect, a 503 come back at once), the application
                // is shown the lease that bound gives (`lease_end`).
                // (Fields, not `&self`, cross the await: the lag source
                // need not be `Sync`.)
                let bounded = self.current_status();
                let status = &self.status;
                let send = send_observed(&self.transport, self.observer.as_deref(), &request);
                tokio::pin!(send);
                tokio::select! {
                    outcome = &mut send => outcome,
                    () = sleep_until(sent + flight / 2) => {
                        status.send_replace(bounded);
                        send.await
                    }
                }
            }
            None => self.send(&request).await,
        };
        self.in_flight_since = None;
        match outcome {
            Ok(response) => self.on_response(response, sent).await,
            Err(error) => {
                let next = self.on_error(error).await;
                if self.on_unreached_lease {
                    self.publish();
                }
                next
            }
        }
    }

    /// The lease in force (see [`Status::lease_until`]): the unreached
    /// lease while the member is on it, else the last answer's.
    fn lease_end(&self) -> Option<Instant> {
        if !self.on_unreached_lease {
            return self.lease_until;
        }
        let in_flight_bound = match (self.in_flight_since, self.unreached_flight) {
            (Some(sent), Some(flight)) => Some(sent + flight),
            (Some(_), None) => self.lease_until,
            (None, _) => self.unreached_until,
        };
        let unreached = self.unreached_until.min(in_flight_bound);
        self.lease_until.max(unreached)
    }

    /// Whether the loop must act on the lease: it runs out before the next
    /// heartbeat while the member holds tasks.
    fn lease_ends_first(&self, next: Instant) -> bool {
        self.lease_end().is_some_and(|until| until < next) && self.tracker.holds_any()
    }

    /// The lease ran out with no newer answer: the host may have given
    /// every task away (fenced or expired this member while it was
    /// stalled). Stop them all; keep the id, since the host may still
    /// count the member, and then its next answer assigns them again.
    /// Returns whether the application still listens.
    async fn lease_ran_out(&mut self) -> bool {
        let held = self.tracker.assignment();
        let late_ms = self
            .lease_end()
            .map_or(0, |until| until.elapsed().as_millis() as u64);
        if self.on_unreached_lease {
            tracing::warn!(
                member_id = %self.member_id,
                active = held.active.len(),
                late_ms,
                "the unreached lease ran out with no heartbeat reaching a coordinator of the group: stopping every task"
            );
        } else {
            tracing::warn!(
                member_id = %self.member_id,
                active = held.active.len(),
                revoking = held.revoking.len(),
                late_ms,
                "the lease of the last answer ran out without a newer answer from the host: stopping every task"
            );
        }
        self.lose_everything_but_id().await
    }

    /// Which lease holds after a failed heartbeat. While every heartbeat
    /// since the last answer certainly reached no coordinator, the
    /// answer's unreached lease (if later): the host takes tasks early only
    /// through a heartbeat it got. Any other failure may have reached it,
    /// and the plain lease holds again until the next answer; if that one
    /// has passed, the loop stops every task at once.
    fn judge_lease(&mut self, error: &ClientError) {
        let unreached = matches!(error, ClientError::Unreached(_)) && !self.reached_since_answer;
        self.reached_since_answer |= !unreached;
        // The host never answers an unreached lease past the plain one
        // while tasks are to be released (their fence may come first);
        // checked here too.
        // (Without the in-flight bound, from a host that sends none, no
        // extension: the next heartbeat may reach a coordinator.)
        let extends = unreached
            && !self.tracker.is_releasing()
            && self.unreached_flight.is_some()
            && self
                .lease_until
                .zip(self.unreached_until)
                .is_some_and(|(lease, unreached)| unreached > lease);
        if extends == self.on_unreached_lease {
            return;
        }
        self.on_unreached_lease = extends;
        if extends {
            // Once per outage: it lasts until an answer, or a failure
            // that may have reached the coordinator.
            tracing::info!(
                member_id = %self.member_id,
                lease_left_ms = self.lease_until.map_or(0, |until| {
                    until.saturating_duration_since(Instant::now()).as_millis() as u64
                }),
                unreached_lease_left_ms = self.unreached_until.map_or(0, |until| {
                    until.saturating_duration_since(Instant::now()).as_millis() as u64
                }),
                "no heartbeat reaches a coordinator of the group: keeping the tasks on the unreached lease"
            );
        } else {
            tracing::info!(
                member_id = %self.member_id,
                "a heartbeat may have reached the coordinator: back on the last answer's lease"
            );
        }
        self.publish();
    }

    async fn on_response(&mut self, response: HeartbeatResponse, sent: Instant) -> Next {
        self.failures = 0;
        self.lease_until = response.lease_ms.map(|ms| sent + Duration::from_millis(ms));
        self.unreached_until = response
            .unreached_lease_ms
            .map(|ms| sent + Duration::from_millis(ms));
        self.unreached_flight = response.unreached_flight_ms.map(Duration::from_millis);
        self.reached_since_answer = false;
        if self.on_unreached_lease {
            self.on_unreached_lease = false;
            tracing::info!(
                member_id = %self.member_id,
                "a coordinator of the group answers again: off the unreached lease"
            );
        }
        let joined = self.member_id.is_empty();
        self.member_id = response.member_id.clone();
        self.epoch = response.member_epoch;
        self.interval = Duration::from_millis(response.heartbeat_interval_ms).max(INTERVAL_MIN);
        let changes = self.tracker.on_response(&response);
        self.publish();
        if joined
            && !self
                .tell(Event::Joined {
                    member_id: response.member_id.clone(),
                })
                .await
        {
            return self.application_gone().await;
        }
        let drained = changes.contains(&Change::Drained);
        if !self.tell_all(changes).await {
            return self.application_gone().await;
        }
        if drained {
            if let Err(error) = self.leave().await {
                tracing::warn!(%error, "leaving after the drain failed");
            }
            return Next::Stop;
        }
        Next::After(self.interval)
    }

    async fn on_error(&mut self, error: ClientError) -> Next {
        tracing::debug!(%error, member_id = %self.member_id, epoch = self.epoch, "heartbeat failed");
        self.judge_lease(&error);
        let joined = !self.member_id.is_empty();
        let is_static = self.config.member_name.is_some();
        let leaving = self.drain || self.tracker.assignment().draining;
        let retry_after = error.retry_after();
        match error.code() {
            Some(codes::REPLACED) if joined => {
                let member_name = self.config.member_name.clone().unwrap_or_default();
                tracing::error!(
                    member_id = %self.member_id,
                    member_name,
                    "another process joined with this member name and took its tasks: stopping this member (two processes must not share a member name)"
                );
                let _ = self.lose_everything().await
                    && self.tell(Event::Replaced { member_name }).await;
                Next::Stop
            }
            Some(codes::FENCED) if joined => {
                let rejoining = !leaving;
                if !self.lose_everything().await
                    || !self.tell(Event::Fenced { rejoining }).await
                    || !rejoining
                {
                    return Next::Stop;
                }
                Next::After(Duration::ZERO)
            }
            Some(codes::FENCED) => {
                // A join whose id the host has already removed (a retry
                // that came after the member was expired): join anew.
                if !self.tell(Event::Error(error)).await {
                    return self.application_gone().await;
                }
                self.join_id = choose_member_id();
                self.retry_later()
            }
            Some(codes::UNKNOWN_MEMBER | codes::UNKNOWN_GROUP) if joined => {
                // The slot is gone (expired, or the group deleted): every
                // task may be elsewhere already. Start over as a new member.
                let group_gone = error.code() == Some(codes::UNKNOWN_GROUP);
                if !self.tell(Event::Error(error)).await || !self.lose_everything().await {
                    return Next::Stop;
                }
                if leaving {
                    return Next::Stop;
                }
                if group_gone {
                    self.retry_later()
                } else {
                    Next::After(Duration::ZERO)
                }
            }
            Some(codes::STALE_EPOCH) if joined => {
                if !self.tell(Event::Error(error)).await {
                    return self.application_gone().await;
                }
                if is_static {
                    // A new incarnation of the name takes the slot with its
                    // tasks as they are: nothing is lost.
                    self.forget_member_id();
                    self.publish();
                } else {
                    if !self.lose_everything_but_id().await {
                        return Next::Stop;
                    }
                    // Free the old slot's tasks now rather than at its
                    // session timeout.
                    let _ = self.leave().await;
                }
                Next::After(Duration::ZERO)
            }
            _ => {
                if !self.tell(Event::Error(error)).await {
                    return self.application_gone().await;
                }
                match (self.retry_later(), retry_after) {
                    // The host asked for a pause (backpressure: a join rate
                    // limit, a connection cap). A joined member waits no
                    // longer than its interval, so its session holds.
                    (Next::After(backoff), Some(hint)) if joined => {
                        Next::Pause(backoff.max(hint.min(self.interval)))
                    }
                    (Next::After(backoff), Some(hint)) => Next::Pause(backoff.max(hint)),
                    (next, _) => next,
                }
            }
        }
    }

    /// The next attempt after a failure, keeping the member id and epoch
    /// (see [`retry_backoff`]).
    fn retry_later(&mut self) -> Next {
        self.failures = self.failures.saturating_add(1);
        Next::After(retry_backoff(self.failures, self.interval))
    }

    /// Tells the application every held task is lost and forgets the
    /// member id. Returns whether the application still listens.
    async fn lose_everything(&mut self) -> bool {
        let listening = self.lose_everything_but_id().await;
        self.forget_member_id();
        self.publish();
        listening
    }

    async fn lose_everything_but_id(&mut self) -> bool {
        let lost = self.tracker.reset();
        self.publish();
        lost.is_empty() || self.tell(Event::Lost(lost)).await
    }

    /// Sends a leave (epoch -1) for the current member id, if joined.
    async fn leave(&mut self) -> Result<(), ClientError> {
        if self.member_id.is_empty() {
            return Ok(());
        }
        let request = HeartbeatRequest {
            member_id: self.member_id.clone(),
            member_name: self.config.member_name.clone(),
            member_epoch: LEAVE_EPOCH,
            topics: None,
            rack: self.config.rack.clone(),
            capacity: Some(self.config.capacity),
            owned: Some(Vec::new()),
            lags: Some(Vec::new()),
            drain: self.drain,
            task_ranges: true,
        };
        let mut result = Ok(());
        for attempt in 0..LEAVE_ATTEMPTS_MAX {
            if attempt > 0 {
                sleep(RETRY_BACKOFF_MIN * 2u32.pow(attempt)).await;
            }
            result = match self.send(&request).await {
                Ok(_) => Ok(()),
                // Already out of the group: nothing to leave.
                Err(error)
                    if matches!(
                        error.code(),
                        Some(
                            codes::FENCED
                                | codes::REPLACED
                                | codes::UNKNOWN_MEMBER
                                | codes::UNKNOWN_GROUP
                        )
                    ) =>
                {
                    Ok(())
                }
                Err(error) => Err(error),
            };
            if !result.as_ref().is_err_and(ClientError::is_transient) {
                break;
            }
        }
        self.forget_member_id();
        self.publish();
        result
    }

    /// Out of the group: the next join is a new member, with a new id.
    fn forget_member_id(&mut self) {
        self.member_id.clear();
        self.join_id = choose_member_id();
        self.epoch = JOIN_EPOCH;
    }

    /// One request, shown to the observer.
    async fn send(&mut self, request: &HeartbeatRequest) -> Result<HeartbeatResponse, ClientError> {
        send_observed(&self.transport, self.observer.as_deref(), request).await
    }

    /// The application dropped its receiver: leave and end.
    async fn application_gone(&mut self) -> Next {
        let _ = self.leave().await;
        Next::Stop
    }

    fn publish(&self) {
        self.status.send_replace(self.current_status());
    }

    fn current_status(&self) -> Status {
        Status {
            member_id: (!self.member_id.is_empty()).then(|| self.member_id.clone()),
            member_epoch: self.epoch,
            assignment: self.tracker.assignment(),
            lease_until: self.lease_end().map(Instant::into_std),
        }
    }

    async fn tell(&mut self, event: Event) -> bool {
        self.events.send(event).await.is_ok()
    }

    async fn tell_all(&mut self, changes: Vec<Change>) -> bool {
        for change in changes {
            let event = match change {
                Change::Lost(tasks) => Event::Lost(tasks),
                Change::Revoked { ack, tasks } => Event::Revoked {
                    tasks,
                    ack: RevokeAck {
                        id: ack,
                        commands: self.ack_sender.clone(),
                    },
                },
                Change::LearnerStopped(tasks) => Event::LearnerStopped(tasks),
                Change::StandbyStopped(tasks) => Event::StandbyStopped(tasks),
                Change::Promoted(tasks) => Event::Promoted(tasks),
                Change::Assigned(tasks) => Event::Assigned(tasks),
                Change::LearnerStarted(tasks) => Event::LearnerStarted(tasks),
                Change::StandbyStarted(tasks) => Event::StandbyStarted(tasks),
                Change::Draining => Event::Draining,
                Change::Drained => Event::Drained,
            };
            if !self.tell(event).await {
                return false;
            }
        }
        true
    }
}

/// One request through `transport`, shown to `observer`.
async fn send_observed(
    transport: &Transport,
    observer: Option<&dyn HeartbeatObserver>,
    request: &HeartbeatRequest,
) -> Result<HeartbeatResponse, ClientError> {
    let sent = Instant::now();
    let result = transport.heartbeat(request).await;
    if let Some(observer) = observer {
        observer.heartbeat(sent.elapsed(), result.as_ref().map(|_| ()));
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    /// After a coordinator died, a member that failed many times retries
    /// within a second, not a whole interval (3 s by default) later.
    #[test]
    fn the_retry_backoff_doubles_up_to_a_second_and_never_past_the_interval() {
        let interval = Duration::from_secs(3);
        let backoffs: Vec<u64> = (1..=8)
            .map(|failures| retry_backoff(failures, interval).as_millis() as u64)
            .collect();
        assert_eq!(backoffs, [50, 100, 200, 400, 800, 1000, 1000, 1000]);
        assert_eq!(retry_backoff(u32::MAX, interval), RETRY_BACKOFF_MAX);
        // A short interval still bounds it.
        let short = Duration::from_millis(300);
        assert_eq!(retry_backoff(4, short), short);
        assert_eq!(retry_backoff(1, short), RETRY_BACKOFF_MIN);
    }
}
