//! The heartbeat loop: one background task per member that runs the
//! member [`Machine`] over HTTP. It sends what the machine builds, sleeps
//! until the machine's timeout (a heartbeat due, or the lease running out,
//! also while a heartbeat is in flight), passes answers, failures, the
//! application's acknowledgements, drains and leaves in with the time, and
//! turns the machine's events into [`Event`]s and its state into the
//! published [`Status`]. Every decision (ids, epochs, the lease, the policy
//! for each error code) is the machine's; HTTP is the transport's.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep_until};

use crate::config::{MemberConfig, check_endpoint};
use crate::loads::{valid_load, valid_load_capacity, valid_utilisation};
use crate::machine::{Failure, Machine, MachineConfig, MachineEvent, Millis, StopReason};
use crate::tracker::Assignment;
use crate::transport::Transport;
use crate::wire::{HeartbeatRequest, HeartbeatResponse, LagRow};
use crate::{ClientError, Task};

/// Random bytes in the prefix of a member's chosen ids (as many as a
/// UUID's).
const ID_PREFIX_RANDOM_BYTES: usize = 16;

/// The prefix of the member ids a member chooses: `c-` and 32 random hex
/// digits. Without randomness (never in practice) the time and the process
/// id stand in; ids then still differ between processes.
fn choose_id_prefix() -> String {
    let mut bytes = [0u8; ID_PREFIX_RANDOM_BYTES];
    if let Err(error) = getrandom::fill(&mut bytes) {
        tracing::warn!(%error, "no random bytes for member ids: using the time and process id");
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let seed = nanos ^ (u128::from(std::process::id()) << 96);
        bytes = seed.to_le_bytes();
    }
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("c-{hex}")
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
    SetEndpoint(Option<String>, BTreeMap<String, String>),
    SetLoads(Vec<(Task, f64)>),
    SetUtilisation(Option<f64>),
    SetLoadCapacity(Option<f64>),
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
    /// While a heartbeat is in flight on the unreached lease, it ends no
    /// later than that heartbeat's send time plus the last answer's
    /// `unreached_flight_ms`.
    pub lease_until: Option<std::time::Instant>,
    /// Why the loop ended, once it has.
    pub stopped: Option<StopReason>,
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

    /// Publishes `endpoint` (`None`: none) and `metadata` in place of the
    /// config's: the next heartbeat carries them (and every later one
    /// until the host has answered one that did). Fails with
    /// [`ClientError::Config`] past the host's limits, changing nothing.
    pub fn set_endpoint(
        &self,
        endpoint: Option<String>,
        metadata: BTreeMap<String, String>,
    ) -> Result<(), ClientError> {
        check_endpoint(endpoint.as_deref(), &metadata)?;
        let _ = self.commands.send(Command::SetEndpoint(endpoint, metadata));
        Ok(())
    }

    /// Sets the current load of an active task, in the group's load unit
    /// (records/s, bytes/s, …: whatever the group's `load_unit` names). It
    /// goes with a later heartbeat once the host asks for loads: all of
    /// them after a join or a coordinator change, else those that moved by
    /// more than the config's `load_threshold`. A task not active here is
    /// ignored, and a task's load is forgotten once it stops being active.
    /// Fails with [`ClientError::Config`] for a load that is not a finite
    /// number from 0 to [`LOAD_MAX`](crate::loads::LOAD_MAX), changing
    /// nothing.
    pub fn set_load(&self, task: Task, load: f64) -> Result<(), ClientError> {
        self.set_loads(vec![(task, load)])
    }

    /// [`set_load`](MemberHandle::set_load) for many tasks at once (all
    /// or none).
    pub fn set_loads(&self, loads: Vec<(Task, f64)>) -> Result<(), ClientError> {
        if let Some((task, load)) = loads.iter().find(|(_, load)| !valid_load(*load)) {
            return Err(ClientError::Config(format!(
                "the load {load} of {task:?} is not a finite number from 0 to 1e15"
            )));
        }
        let _ = self.commands.send(Command::SetLoads(loads));
        Ok(())
    }

    /// Sets the member's measured utilisation of its capacity (1.0: fully
    /// used; at most [`UTILISATION_MAX`](crate::loads::UTILISATION_MAX)), or
    /// `None`: unknown. Reported like loads.
    pub fn set_utilisation(&self, utilisation: Option<f64>) -> Result<(), ClientError> {
        if !utilisation.is_none_or(valid_utilisation) {
            return Err(ClientError::Config(format!(
                "a utilisation must be a finite number from 0 to 10, not {utilisation:?}"
            )));
        }
        let _ = self.commands.send(Command::SetUtilisation(utilisation));
        Ok(())
    }

    /// Sets the load the member can carry, in the group's load unit
    /// (above 0, at most 1e15), or `None`: unknown. Reported like loads.
    pub fn set_load_capacity(&self, capacity: Option<f64>) -> Result<(), ClientError> {
        if !capacity.is_none_or(valid_load_capacity) {
            return Err(ClientError::Config(format!(
                "a load capacity must be above 0 and at most 1e15, not {capacity:?}"
            )));
        }
        let _ = self.commands.send(Command::SetLoadCapacity(capacity));
        Ok(())
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

    /// Waits until the loop ends and says why: left, drained, replaced,
    /// fenced or removed for good. `None` if it ended otherwise (the
    /// runtime shut down).
    pub async fn closed(&self) -> Option<StopReason> {
        let mut status = self.status.clone();
        let stopped = status.wait_for(|status| status.stopped.is_some()).await;
        stopped.ok().and_then(|status| status.stopped)
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
    /// and ends. Fails with [`ClientError::Config`] outside a Tokio runtime.
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
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            ClientError::Config("Member::start must be called within a Tokio runtime".into())
        })?;
        config.check()?;
        let transport = Arc::new(Transport::new(&config)?);
        let (events, receiver) = mpsc::channel(config.event_buffer);
        let (commands, command_receiver) = mpsc::unbounded_channel();
        let (status, status_receiver) = watch::channel(Status::default());
        let origin = Instant::now();
        let mut machine = Machine::new(
            MachineConfig {
                member_name: config.member_name.clone(),
                topics: config.topics.clone(),
                rack: config.rack.clone(),
                capacity: config.capacity,
                endpoint: config.endpoint.clone(),
                metadata: config.metadata.clone(),
                id_prefix: choose_id_prefix(),
            },
            0,
        )
        .with_load_threshold(config.load_threshold);
        machine.set_load_capacity(config.load_capacity);
        let runner = Runner {
            machine,
            origin,
            transport,
            lag_source,
            observer,
            last_error: None,
            application_gone: false,
            leave_replies: Vec::new(),
            events,
            commands: command_receiver,
            ack_sender: commands.clone(),
            status,
        };
        let task = runtime.spawn(runner.run());
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

/// A heartbeat on its way: its answer or failure.
type Sending = Pin<Box<dyn Future<Output = Result<HeartbeatResponse, ClientError>> + Send>>;

/// The shell around one [`Machine`]: it sends what the machine builds,
/// sleeps until the machine's timeout, and passes answers, failures,
/// commands and the time in. It decides nothing itself.
struct Runner {
    machine: Machine,
    /// The instant the machine's time 0 stands for.
    origin: Instant,
    transport: Arc<Transport>,
    lag_source: Box<dyn LagSource>,
    observer: Option<Arc<dyn HeartbeatObserver>>,
    /// The error of the last failed request, for the `Error` event the
    /// machine queues for it and for the answer to `leave`.
    last_error: Option<ClientError>,
    /// The application dropped its receiver: the member leaves.
    application_gone: bool,
    leave_replies: Vec<oneshot::Sender<Result<(), ClientError>>>,
    events: mpsc::Sender<Event>,
    commands: mpsc::UnboundedReceiver<Command>,
    ack_sender: mpsc::UnboundedSender<Command>,
    status: watch::Sender<Status>,
}

impl Runner {
    async fn run(mut self) {
        let mut sending: Option<Sending> = None;
        loop {
            let now = self.now();
            self.machine.tick(now);
            // The state first, so that the application, told of a change,
            // sees it in the status.
            self.publish();
            self.deliver().await;
            if self.machine.stopped().is_some() {
                break;
            }
            if sending.is_none() && self.machine.request_due(now) {
                let lags = self.lag_source.lags(&self.machine.assignment());
                self.machine.report_lags(
                    lags.into_iter()
                        .map(|(task, lag)| LagRow(task.topic, task.partition, lag))
                        .collect(),
                );
                if let Some(request) = self.machine.poll_request(now) {
                    sending = Some(Box::pin(send_observed(
                        Arc::clone(&self.transport),
                        self.observer.clone(),
                        request,
                    )));
                }
            }
            self.publish();
            // Building a leave gives up every task: told at once.
            self.deliver().await;
            let wake = self.machine.poll_timeout().map(|ms| self.instant(ms));
            tokio::select! {
                biased;
                command = self.commands.recv() => {
                    // The loop holds a sender itself, so the channel never
                    // closes while it runs.
                    let Some(command) = command else { break };
                    self.command(command);
                }
                outcome = async { sending.as_mut().expect("guarded").await }, if sending.is_some() => {
                    sending = None;
                    let now = self.now();
                    match outcome {
                        Ok(response) => self.machine.on_answer(&response, now),
                        Err(error) => {
                            tracing::debug!(%error, member_id = ?self.machine.member_id(), "heartbeat failed");
                            self.machine.on_failure(&Failure::from(&error), now);
                            self.last_error = Some(error);
                        }
                    }
                }
                () = sleep_until(wake.unwrap_or_else(Instant::now)), if wake.is_some() => {}
            }
        }
        self.publish();
        let result = match self.machine.leave_failure() {
            Some(_) => Err(self
                .last_error
                .clone()
                .unwrap_or_else(|| ClientError::Transport("the leave failed".into()))),
            None => Ok(()),
        };
        for reply in self.leave_replies.drain(..) {
            let _ = reply.send(result.clone());
        }
    }

    fn command(&mut self, command: Command) {
        let now = self.now();
        match command {
            Command::Ack(ack) => self.machine.ack(ack, now),
            Command::Drain => self.machine.drain(now),
            Command::SetEndpoint(endpoint, metadata) => {
                self.machine.set_endpoint(endpoint, metadata);
            }
            Command::SetLoads(loads) => {
                for (task, load) in loads {
                    self.machine.set_load(task, load);
                }
            }
            Command::SetUtilisation(utilisation) => {
                self.machine.set_utilisation(utilisation);
            }
            Command::SetLoadCapacity(capacity) => {
                self.machine.set_load_capacity(capacity);
            }
            Command::Leave(reply) => {
                self.leave_replies.push(reply);
                self.machine.leave(now);
            }
        }
    }

    fn now(&self) -> Millis {
        self.origin.elapsed().as_millis() as Millis
    }

    fn instant(&self, ms: Millis) -> Instant {
        self.origin + Duration::from_millis(ms)
    }

    /// Hands the machine's events to the application, in order. An
    /// application that stopped listening makes the member leave.
    async fn deliver(&mut self) {
        while let Some(event) = self.machine.poll_event() {
            if self.application_gone {
                continue;
            }
            let event = self.event(event);
            if self.events.send(event).await.is_err() {
                self.application_gone = true;
                self.machine.leave(self.now());
            }
        }
    }

    fn event(&self, event: MachineEvent) -> Event {
        match event {
            MachineEvent::Joined { member_id } => Event::Joined { member_id },
            MachineEvent::Assigned { tasks } => Event::Assigned(tasks),
            MachineEvent::Revoked { ack, tasks } => Event::Revoked {
                tasks,
                ack: RevokeAck {
                    id: ack,
                    commands: self.ack_sender.clone(),
                },
            },
            MachineEvent::LearnerStarted { tasks } => Event::LearnerStarted(tasks),
            MachineEvent::LearnerStopped { tasks } => Event::LearnerStopped(tasks),
            MachineEvent::Promoted { tasks } => Event::Promoted(tasks),
            MachineEvent::StandbyStarted { tasks } => Event::StandbyStarted(tasks),
            MachineEvent::StandbyStopped { tasks } => Event::StandbyStopped(tasks),
            MachineEvent::Draining => Event::Draining,
            MachineEvent::Drained => Event::Drained,
            MachineEvent::Lost { tasks } => Event::Lost(tasks),
            MachineEvent::Fenced { rejoining } => Event::Fenced { rejoining },
            MachineEvent::Replaced { member_name } => Event::Replaced { member_name },
            // The machine queues an error event only for the failure just
            // passed in, which `last_error` holds.
            MachineEvent::Error { failure } => Event::Error(
                self.last_error
                    .clone()
                    .unwrap_or_else(|| ClientError::Transport(format!("{failure:?}"))),
            ),
        }
    }

    fn publish(&self) {
        let machine = &self.machine;
        self.status.send_replace(Status {
            member_id: machine.member_id().map(str::to_owned),
            member_epoch: machine.member_epoch(),
            assignment: machine.assignment(),
            lease_until: machine.lease_until().map(|ms| self.instant(ms).into_std()),
            stopped: machine.stopped(),
        });
    }
}

/// One request through `transport`, shown to `observer`.
async fn send_observed(
    transport: Arc<Transport>,
    observer: Option<Arc<dyn HeartbeatObserver>>,
    request: HeartbeatRequest,
) -> Result<HeartbeatResponse, ClientError> {
    let sent = Instant::now();
    let result = transport.heartbeat(&request).await;
    if let Some(observer) = observer {
        observer.heartbeat(sent.elapsed(), result.as_ref().map(|_| ()));
    }
    result
}
