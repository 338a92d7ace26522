//! The member machine: every decision of a member, without I/O. It owns
//! the member id and epoch, when the next request is due and what it
//! carries, the lease (see [`Machine::lease_until`]), the policy for every
//! failure, drains and leaves, and the order of the events the application
//! is told. It never reads a clock, opens a socket or spawns a task: the
//! shell (`member`, the simulator's member, every other language's client)
//! passes `now` in with each input, sends what [`Machine::poll_request`]
//! builds, sleeps until [`Machine::poll_timeout`] and hands out what
//! [`Machine::poll_event`] yields. What the application has been told
//! about its tasks is the tracker's business, which the machine drives.
//!
//! The rules are listed in `clients/conformance/README.md`; the vectors
//! there are generated from this machine and replayed by every client.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::Task;
use crate::error::{ClientError, codes};
use crate::loads::{LoadBook, LoadFields, valid_load};
use crate::tracker::{Assignment, Change, Tracker};
use crate::wire::{HeartbeatRequest, HeartbeatResponse, JOIN_EPOCH, LEAVE_EPOCH, LagRow};

/// Milliseconds from an origin the shell chooses (a vector's time 0, the
/// instant the Rust client started the member).
pub type Millis = u64;

/// The heartbeat interval used until the host names one.
pub const INTERVAL_BEFORE_JOIN_MS: u64 = 1_000;
/// The shortest interval followed, whatever the host says.
pub const INTERVAL_MS_MIN: u64 = 10;
/// The first retry delay after a failure; it doubles up to
/// [`RETRY_BACKOFF_MS_MAX`], and never past the heartbeat interval.
pub const RETRY_BACKOFF_MS_MIN: u64 = 50;
/// The longest retry delay (Kafka's `retry.backoff.max.ms` default): when a
/// coordinator died, the member reaches the node that takes its shard over
/// within a second of it serving, not a whole interval later.
pub const RETRY_BACKOFF_MS_MAX: u64 = 1_000;
/// How many times a leave is sent when the host does not answer.
pub const LEAVE_ATTEMPTS_MAX: u32 = 3;

/// Who the member is and what it subscribes to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MachineConfig {
    /// A static member's name; `None` joins as a dynamic member.
    pub member_name: Option<String>,
    pub topics: Vec<String>,
    pub rack: Option<String>,
    pub capacity: u32,
    /// Where the member serves (a URL or `host:port`), for the group's
    /// routing table; `None` publishes none. Sent on every join.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Small string pairs shown with the member in the routing table. Sent
    /// on every join unless empty.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
    /// The member ids the machine chooses are `{id_prefix}-{n}` for n = 1,
    /// 2, …: a fresh one for each new join, the same for every retry of a
    /// join (a retried join the host did handle is then the same member).
    /// The shell draws it at random (`c-` and 32 hex digits); a vector
    /// names it.
    pub id_prefix: String,
}

/// What became of a request that got no 200 answer, as the transport
/// classifies it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Failure {
    /// No coordinator of the group can have handled it: every attempt was
    /// refused a connection, redirected, or answered 503
    /// `shard_unavailable`.
    Unreached,
    /// No answer (a timeout, a connection lost after sending): it may have
    /// been handled.
    NoAnswer,
    /// The host refused it with an error code (a 4xx).
    Refused {
        status: u16,
        code: String,
        #[serde(default)]
        retry_after_ms: Option<u64>,
    },
    /// The host failed (a 5xx): it may have been handled.
    Server {
        status: u16,
        #[serde(default)]
        retry_after_ms: Option<u64>,
    },
    /// An answer the client cannot read.
    Unreadable,
}

impl Failure {
    fn code(&self) -> Option<&str> {
        match self {
            Failure::Refused { code, .. } => Some(code),
            _ => None,
        }
    }

    fn retry_after_ms(&self) -> Option<u64> {
        match self {
            Failure::Refused { retry_after_ms, .. } | Failure::Server { retry_after_ms, .. } => {
                *retry_after_ms
            }
            _ => None,
        }
    }

    /// Whether the same request may succeed later.
    fn is_transient(&self) -> bool {
        matches!(
            self,
            Failure::Unreached | Failure::NoAnswer | Failure::Server { .. }
        )
    }
}

impl From<&ClientError> for Failure {
    fn from(error: &ClientError) -> Self {
        let ms = |d: &Option<std::time::Duration>| d.map(|d| d.as_millis() as u64);
        match error {
            ClientError::Api {
                status,
                code,
                retry_after,
                ..
            } => Failure::Refused {
                status: *status,
                code: code.clone(),
                retry_after_ms: ms(retry_after),
            },
            ClientError::Server {
                status,
                retry_after,
                ..
            } => Failure::Server {
                status: *status,
                retry_after_ms: ms(retry_after),
            },
            ClientError::Transport(_) => Failure::NoAnswer,
            ClientError::Unreached(_) => Failure::Unreached,
            ClientError::Decode(_) | ClientError::Config(_) => Failure::Unreadable,
        }
    }
}

/// What the application must learn, in order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum MachineEvent {
    Joined {
        member_id: String,
    },
    /// Newly active tasks without a warm copy here.
    Assigned {
        tasks: Vec<Task>,
    },
    /// Stop processing these, then [`Machine::ack`] `ack`.
    Revoked {
        ack: u64,
        tasks: Vec<Task>,
    },
    LearnerStarted {
        tasks: Vec<Task>,
    },
    LearnerStopped {
        tasks: Vec<Task>,
    },
    /// Learner or standby copies that became active.
    Promoted {
        tasks: Vec<Task>,
    },
    StandbyStarted {
        tasks: Vec<Task>,
    },
    StandbyStopped {
        tasks: Vec<Task>,
    },
    Draining,
    Drained,
    /// Stop these at once: they may be active elsewhere already.
    Lost {
        tasks: Vec<Task>,
    },
    Fenced {
        rejoining: bool,
    },
    Replaced {
        member_name: String,
    },
    Error {
        failure: Failure,
    },
}

/// Why the machine stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The application asked it to leave.
    Left,
    /// A drain finished: the member held nothing and left.
    Drained,
    /// Another process joined with its member name.
    Replaced,
    /// Fenced while leaving or draining.
    Fenced,
    /// The host no longer knew it (`unknown_member`, `unknown_group`)
    /// while it was leaving or draining.
    Removed,
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StopReason::Left => "left",
            StopReason::Drained => "drained",
            StopReason::Replaced => "replaced",
            StopReason::Fenced => "fenced",
            StopReason::Removed => "removed",
        })
    }
}

/// The request in flight.
#[derive(Clone, Copy, Debug)]
struct InFlight {
    sent: Millis,
    leave: bool,
    /// It carries an endpoint changed by [`Machine::set_endpoint`]: should
    /// it fail, the next request carries it again.
    carries_endpoint_change: bool,
}

/// A leave under way, and what comes after it.
#[derive(Clone, Copy, Debug)]
struct Leaving {
    /// `None`: rejoin as a new member (a dynamic member whose epoch went
    /// stale frees its old slot first).
    then: Option<StopReason>,
    attempts: u32,
}

/// The lease: the times are send time plus the last answer's figures.
#[derive(Clone, Copy, Debug, Default)]
struct Lease {
    until: Option<Millis>,
    unreached_until: Option<Millis>,
    /// The last answer's `unreached_flight_ms`: while a request is in
    /// flight, the unreached lease counts only until its send time plus
    /// this (the host, should that request reach it, keeps the tasks that
    /// long after handling it). `None` from a host before it: no
    /// unreached lease while a request is in flight.
    flight_ms: Option<u64>,
    /// A request since the last answer failed in a way that may have
    /// reached the coordinator: the unreached lease no longer holds.
    reached_since_answer: bool,
    /// Every request since the last answer certainly reached no
    /// coordinator: the unreached lease holds.
    on_unreached: bool,
}

/// One member's decisions (see the module doc).
#[derive(Debug)]
pub struct Machine {
    config: MachineConfig,
    tracker: Tracker,
    /// Empty until joined (and again before a rejoin).
    member_id: String,
    /// The id the next join sends.
    join_id: String,
    ids_chosen: u64,
    epoch: i64,
    interval_ms: u64,
    /// Failed requests in a row.
    failures: u32,
    /// The application asked to drain.
    drain: bool,
    /// The application asked to leave.
    leave_asked: bool,
    lags: Vec<LagRow>,
    /// The loads the application set, and what the host has of them.
    loads: LoadBook,
    /// The endpoint and metadata changed since the last request that
    /// carried them was sent: the next one carries them.
    endpoint_changed: bool,
    /// When the next request is due.
    due: Millis,
    /// Something the host must hear of at once happened (an ack, a drain
    /// asked, tasks lost to the lease) after the request in flight, if any,
    /// was built: the next request goes as soon as nothing is in flight.
    send_now: bool,
    in_flight: Option<InFlight>,
    lease: Lease,
    leaving: Option<Leaving>,
    /// The failure that ended the last leave, if one did.
    leave_failure: Option<Failure>,
    stopped: Option<StopReason>,
    events: VecDeque<MachineEvent>,
}

/// The wait before the attempt after `failures` failed requests in a row
/// (from 1): exponential from [`RETRY_BACKOFF_MS_MIN`], at most
/// [`RETRY_BACKOFF_MS_MAX`] and never longer than the heartbeat interval.
pub fn retry_backoff_ms(failures: u32, interval_ms: u64) -> u64 {
    let doubling = 1u64 << failures.saturating_sub(1).min(16);
    (RETRY_BACKOFF_MS_MIN * doubling)
        .min(RETRY_BACKOFF_MS_MAX)
        .min(interval_ms)
}

impl Machine {
    /// A member that wants to join at `now`.
    pub fn new(config: MachineConfig, now: Millis) -> Self {
        let mut machine = Machine {
            config,
            tracker: Tracker::new(),
            member_id: String::new(),
            join_id: String::new(),
            ids_chosen: 0,
            epoch: JOIN_EPOCH,
            interval_ms: INTERVAL_BEFORE_JOIN_MS,
            failures: 0,
            drain: false,
            leave_asked: false,
            lags: Vec::new(),
            loads: LoadBook::default(),
            endpoint_changed: false,
            due: now,
            send_now: false,
            in_flight: None,
            lease: Lease::default(),
            leaving: None,
            leave_failure: None,
            stopped: None,
            events: VecDeque::new(),
        };
        machine.choose_join_id();
        machine
    }

    /// Resends a task's load once it moved by more than `threshold`
    /// relative to the value the host acknowledged (default
    /// [`LOAD_THRESHOLD_DEFAULT`](crate::loads::LOAD_THRESHOLD_DEFAULT)).
    pub fn with_load_threshold(mut self, threshold: f64) -> Self {
        self.loads = LoadBook::new(threshold);
        self
    }

    /// The member id, once joined.
    pub fn member_id(&self) -> Option<&str> {
        (!self.member_id.is_empty()).then_some(self.member_id.as_str())
    }

    /// The member epoch: a fencing token for writes the application makes
    /// on the tasks it holds.
    pub fn member_epoch(&self) -> i64 {
        self.epoch
    }

    pub fn assignment(&self) -> Assignment {
        self.tracker.assignment()
    }

    pub fn stopped(&self) -> Option<StopReason> {
        self.stopped
    }

    /// The failure that ended the last leave (`None` if it was answered,
    /// or the member was out of the group already).
    pub fn leave_failure(&self) -> Option<&Failure> {
        self.leave_failure.as_ref()
    }

    /// Whether a request is in flight.
    pub fn in_flight(&self) -> bool {
        self.in_flight.is_some()
    }

    /// Whether [`poll_request`](Machine::poll_request) would build a
    /// request at `now` (the shell asks its lag source first).
    pub fn request_due(&self, now: Millis) -> bool {
        self.stopped.is_none() && self.in_flight.is_none() && now >= self.due
    }

    /// The application's lag figures; they go in every later heartbeat.
    pub fn report_lags(&mut self, lags: Vec<LagRow>) {
        self.lags = lags;
    }

    /// The application's current load of `task`, in the group's unit. A
    /// task not active here is ignored (its load is forgotten once it is
    /// not active any more). Returns whether the load is one the host
    /// accepts (0 to [`LOAD_MAX`](crate::loads::LOAD_MAX)); an invalid one
    /// changes nothing.
    pub fn set_load(&mut self, task: Task, load: f64) -> bool {
        if !valid_load(load) {
            return false;
        }
        if self.tracker.is_active(&task) {
            self.loads.set_load(task, load);
        }
        true
    }

    /// The member's measured utilisation (1.0 = fully used; `None`:
    /// unknown). Returns whether it is one the host accepts.
    pub fn set_utilisation(&mut self, utilisation: Option<f64>) -> bool {
        self.loads.set_utilisation(utilisation)
    }

    /// The load the member can carry, in the group's unit (`None`:
    /// unknown). Returns whether it is one the host accepts.
    pub fn set_load_capacity(&mut self, capacity: Option<f64>) -> bool {
        self.loads.set_load_capacity(capacity)
    }

    /// The request to send now, if one is due; it is in flight from now
    /// until [`on_answer`](Machine::on_answer) or
    /// [`on_failure`](Machine::on_failure).
    pub fn poll_request(&mut self, now: Millis) -> Option<HeartbeatRequest> {
        if !self.request_due(now) {
            return None;
        }
        let leave = self.leaving.is_some();
        let carries_endpoint_change = !leave && self.endpoint_changed;
        self.in_flight = Some(InFlight {
            sent: now,
            leave,
            carries_endpoint_change,
        });
        self.send_now = false;
        if let Some(leaving) = &mut self.leaving {
            leaving.attempts += 1;
            // Once the host has the leave, a dynamic member's tasks go to
            // others at once: nothing is processed from its sending on.
            self.lose_everything_but_id();
            return Some(self.leave_request());
        }
        let loads = self.loads.build();
        let request = self.heartbeat_request(loads);
        self.endpoint_changed = false;
        Some(request)
    }

    fn heartbeat_request(&self, loads: LoadFields) -> HeartbeatRequest {
        let joining = self.member_id.is_empty();
        let (endpoint, metadata) = self.endpoint_fields(joining);
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
            lags: Some(self.lags.clone()),
            drain: self.drain,
            task_ranges: true,
            endpoint,
            metadata,
            loads: loads.loads,
            utilisation: loads.utilisation,
            load_capacity: loads.load_capacity,
        }
    }

    /// The `endpoint` and `metadata` a heartbeat carries: both, explicit
    /// (`""` for none, `{}` for empty), after a change until an answer to a
    /// request that carried them; else on a join, those set; else neither
    /// (the host keeps what it has).
    fn endpoint_fields(&self, joining: bool) -> (Option<String>, Option<BTreeMap<String, String>>) {
        let config = &self.config;
        if self.endpoint_changed {
            let endpoint = config.endpoint.clone().unwrap_or_default();
            (Some(endpoint), Some(config.metadata.clone()))
        } else if joining {
            let metadata = (!config.metadata.is_empty()).then(|| config.metadata.clone());
            (config.endpoint.clone(), metadata)
        } else {
            (None, None)
        }
    }

    /// The application serves elsewhere now (`None`: nowhere), with these
    /// metadata: both replace the config's, and the next request (join or
    /// heartbeat) carries them, as does every later one until an answer to
    /// one that did.
    pub fn set_endpoint(&mut self, endpoint: Option<String>, metadata: BTreeMap<String, String>) {
        self.config.endpoint = endpoint;
        self.config.metadata = metadata;
        self.endpoint_changed = true;
    }

    fn leave_request(&self) -> HeartbeatRequest {
        HeartbeatRequest {
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
            endpoint: None,
            metadata: None,
            loads: None,
            utilisation: None,
            load_capacity: None,
        }
    }

    /// The 200 answer to the request in flight, at `now`.
    pub fn on_answer(&mut self, response: &HeartbeatResponse, now: Millis) {
        let Some(flight) = self.in_flight.take() else {
            debug_assert!(false, "an answer with no request in flight");
            return;
        };
        if flight.leave {
            self.finish_leave(None, now);
            return;
        }
        self.failures = 0;
        self.take_lease(response, flight.sent);
        let joined = self.member_id.is_empty();
        self.member_id = response.member_id.clone();
        self.epoch = response.member_epoch;
        self.interval_ms = response.heartbeat_interval_ms.max(INTERVAL_MS_MIN);
        let changes = self.tracker.on_response(response);
        self.loads.answered(response.load_report);
        self.forget_inactive_loads();
        if joined {
            self.events.push_back(MachineEvent::Joined {
                member_id: response.member_id.clone(),
            });
        }
        let drained = changes.contains(&Change::Drained);
        self.tell_all(changes);
        self.due = flight.sent + self.interval_ms;
        if drained && self.leaving.is_none() {
            self.begin_leave(Some(StopReason::Drained), now);
        }
        self.after_heartbeat(now);
    }

    fn take_lease(&mut self, response: &HeartbeatResponse, sent: Millis) {
        if self.lease.on_unreached {
            tracing::info!(
                member_id = %self.member_id,
                "a coordinator of the group answers again: off the unreached lease"
            );
        }
        self.lease = Lease {
            until: response.lease_ms.map(|ms| sent + ms),
            unreached_until: response.unreached_lease_ms.map(|ms| sent + ms),
            flight_ms: response.unreached_flight_ms,
            reached_since_answer: false,
            on_unreached: false,
        };
    }

    /// The request in flight failed, as `failure` says, at `now`.
    pub fn on_failure(&mut self, failure: &Failure, now: Millis) {
        let Some(flight) = self.in_flight.take() else {
            debug_assert!(false, "a failure with no request in flight");
            return;
        };
        // The host may not have it: the next request carries it again.
        self.endpoint_changed |= flight.carries_endpoint_change;
        if flight.leave {
            self.leave_failed(failure, now);
        } else {
            self.loads.failed();
            self.judge_lease(failure);
            self.heartbeat_failed(failure, flight.sent, now);
            self.after_heartbeat(now);
        }
        self.settle_leave(now);
    }

    /// After a heartbeat's outcome: a leave, an ack, a drain or a loss
    /// that came while it was in flight goes at once.
    fn after_heartbeat(&mut self, now: Millis) {
        if self.leaving.is_some() || self.send_now {
            self.due = self.due.min(now);
        }
        self.settle_leave(now);
    }

    /// The host must hear of a change at once (after the request in
    /// flight, if any).
    fn hurry(&mut self, now: Millis) {
        self.due = self.due.min(now);
        self.send_now = true;
    }

    /// Which lease holds after a failed heartbeat. While every heartbeat
    /// since the last answer certainly reached no coordinator, the
    /// answer's unreached lease (if later): the host takes tasks early only
    /// through a heartbeat it got. Any other failure may have reached it,
    /// and the plain lease holds again until the next answer.
    fn judge_lease(&mut self, failure: &Failure) {
        let lease = &mut self.lease;
        let unreached = *failure == Failure::Unreached && !lease.reached_since_answer;
        lease.reached_since_answer |= !unreached;
        // The host never answers an unreached lease past the plain one
        // while tasks are to be released (their fence may come first);
        // checked here too. Without the flight bound (a host before it),
        // no extension: the next heartbeat may reach a coordinator.
        let extends = unreached
            && !self.tracker.is_releasing()
            && lease.flight_ms.is_some()
            && lease
                .until
                .zip(lease.unreached_until)
                .is_some_and(|(plain, unreached)| unreached > plain);
        if extends == lease.on_unreached {
            return;
        }
        lease.on_unreached = extends;
        if extends {
            tracing::info!(
                member_id = %self.member_id,
                lease_until_ms = lease.until,
                unreached_until_ms = lease.unreached_until,
                "no heartbeat reaches a coordinator of the group: keeping the tasks on the unreached lease"
            );
        } else {
            tracing::info!(
                member_id = %self.member_id,
                "a heartbeat may have reached the coordinator: back on the last answer's lease"
            );
        }
    }

    fn heartbeat_failed(&mut self, failure: &Failure, sent: Millis, now: Millis) {
        let joined = !self.member_id.is_empty();
        let leaving = self.drain || self.leave_asked || self.tracker.is_draining();
        let error = MachineEvent::Error {
            failure: failure.clone(),
        };
        match failure.code() {
            // Refused to a join too: a retried join whose first attempt
            // the host handled, after which another process took the name.
            Some(codes::REPLACED) => {
                let member_name = self.config.member_name.clone().unwrap_or_default();
                tracing::error!(
                    member_id = %self.member_id,
                    member_name,
                    "another process joined with this member name and took its tasks: stopping this member (two processes must not share a member name)"
                );
                self.lose_everything();
                self.events
                    .push_back(MachineEvent::Replaced { member_name });
                self.stop(StopReason::Replaced);
            }
            Some(codes::FENCED) if joined => {
                self.lose_everything();
                self.events.push_back(MachineEvent::Fenced {
                    rejoining: !leaving,
                });
                if leaving {
                    self.stop(StopReason::Fenced);
                }
                self.due = sent;
            }
            Some(codes::FENCED) => {
                // A join whose id the host has already removed (a retry
                // that came after the member was expired): join anew.
                self.events.push_back(error);
                self.choose_join_id();
                self.retry_later(sent);
            }
            Some(codes::UNKNOWN_MEMBER | codes::UNKNOWN_GROUP) if joined => {
                // The slot is gone (expired, or the group deleted): every
                // task may be elsewhere already. Start over as a new member.
                self.events.push_back(error);
                self.lose_everything();
                if leaving {
                    self.stop(StopReason::Removed);
                } else if failure.code() == Some(codes::UNKNOWN_GROUP) {
                    self.retry_later(sent);
                } else {
                    self.due = sent;
                }
            }
            Some(codes::STALE_EPOCH) if joined => {
                self.events.push_back(error);
                if self.config.member_name.is_some() {
                    // A new incarnation of the name takes the slot with its
                    // tasks as they are: nothing is lost.
                    self.forget_member_id();
                } else {
                    self.lose_everything_but_id();
                    // Free the old slot's tasks now rather than at its
                    // session timeout.
                    self.begin_leave(None, now);
                }
                self.due = sent;
            }
            _ => {
                self.events.push_back(error);
                self.retry_later(sent);
                if let Some(hint) = failure.retry_after_ms() {
                    // The host asked for a pause (backpressure: a join rate
                    // limit, a connection cap), counted from its answer. A
                    // joined member waits no longer than its interval, so
                    // its session holds.
                    let hint = if joined {
                        hint.min(self.interval_ms)
                    } else {
                        hint
                    };
                    let backoff = self.due - sent;
                    self.due = now + backoff.max(hint);
                }
            }
        }
    }

    /// The next attempt after a failure, keeping the member id and epoch
    /// (see [`retry_backoff_ms`]).
    fn retry_later(&mut self, sent: Millis) {
        self.failures = self.failures.saturating_add(1);
        self.due = sent + retry_backoff_ms(self.failures, self.interval_ms);
    }

    /// The application stopped the tasks of the `Revoked` event `ack` at
    /// `now`: they are released by a heartbeat sent at once. An unknown
    /// `ack` (from before a reset, or acknowledged twice) changes nothing.
    pub fn ack(&mut self, ack: u64, now: Millis) {
        let (known, changes) = self.tracker.on_ack(ack);
        if known {
            self.tell_all(changes);
            self.hurry(now);
        }
    }

    /// The application asks the host to drain this member.
    pub fn drain(&mut self, now: Millis) {
        if !self.drain && self.stopped.is_none() {
            self.drain = true;
            self.hurry(now);
        }
    }

    /// The application leaves the group: a leave is sent next (once the
    /// request in flight, if any, is done), then the machine stops.
    pub fn leave(&mut self, now: Millis) {
        if self.stopped.is_some() {
            return;
        }
        self.leave_asked = true;
        match &mut self.leaving {
            Some(leaving) => leaving.then = Some(StopReason::Left),
            None => self.begin_leave(Some(StopReason::Left), now),
        }
        self.settle_leave(now);
    }

    /// Time passed: when the lease in force ran out with no newer answer,
    /// the host may have given every task away (fenced or expired this
    /// member while it was stalled). Every held task stops; the id is kept,
    /// since the host may still count the member, and then the next answer
    /// (sent at once) assigns them again.
    pub fn tick(&mut self, now: Millis) {
        if self.stopped.is_some() || !self.tracker.holds_any() {
            return;
        }
        let Some(end) = self.lease_until() else {
            return;
        };
        if now < end {
            return;
        }
        let held = self.tracker.assignment();
        let why = if self.lease.on_unreached {
            "the unreached lease ran out with no heartbeat reaching a coordinator of the group: stopping every task"
        } else {
            "the lease of the last answer ran out without a newer answer from the host: stopping every task"
        };
        tracing::warn!(
            member_id = %self.member_id,
            active = held.active.len(),
            revoking = held.revoking.len(),
            late_ms = now - end,
            "{why}"
        );
        self.lose_everything_but_id();
        self.hurry(now);
    }

    /// The next event for the application.
    pub fn poll_event(&mut self) -> Option<MachineEvent> {
        self.events.pop_front()
    }

    /// When the machine next wants an input if nothing else happens: the
    /// next request (unless one is in flight), or the end of the lease in
    /// force while it holds tasks. `None` once stopped.
    pub fn poll_timeout(&self) -> Option<Millis> {
        if self.stopped.is_some() {
            return None;
        }
        let due = self.in_flight.is_none().then_some(self.due);
        let lease = self.lease_until().filter(|_| self.tracker.holds_any());
        match (due, lease) {
            (Some(due), Some(lease)) => Some(due.min(lease)),
            (due, lease) => due.or(lease),
        }
    }

    /// The end of the lease in force: the unreached lease while the member
    /// is on it, else the last answer's; `None` before any answer with a
    /// lease. While a request is in flight on the unreached lease, that
    /// lease ends no later than the request's send time plus the last
    /// answer's flight bound (the plain lease from an answer without one).
    pub fn lease_until(&self) -> Option<Millis> {
        let lease = &self.lease;
        if !lease.on_unreached {
            return lease.until;
        }
        let in_flight_bound = match (self.in_flight, lease.flight_ms) {
            (Some(flight), Some(ms)) => Some(flight.sent + ms),
            (Some(_), None) => lease.until,
            (None, _) => lease.unreached_until,
        };
        // `None` orders first: no bound known means no unreached lease.
        let unreached = lease.unreached_until.min(in_flight_bound);
        lease.until.max(unreached)
    }

    /// The end of the last answer's unreached lease (its request's send
    /// time plus `unreached_lease_ms`), whether or not it is in force;
    /// `None` before an answer with one.
    pub fn unreached_lease_until(&self) -> Option<Millis> {
        self.lease.unreached_until
    }

    /// Whether the member is on the unreached lease: every heartbeat since
    /// the last answer certainly reached no coordinator, and that answer's
    /// unreached lease outlasts its plain one (see
    /// [`lease_until`](Machine::lease_until)).
    pub fn on_unreached_lease(&self) -> bool {
        self.lease.on_unreached
    }

    /// Whether the application may process (and commit the output of)
    /// `task` at `now`: it is active here, or being released and not yet
    /// acknowledged, and the lease in force has not run out.
    pub fn may_process(&self, task: &Task, now: Millis) -> bool {
        self.tracker.holds(task) && self.lease_until().is_none_or(|until| now < until)
    }

    fn begin_leave(&mut self, then: Option<StopReason>, now: Millis) {
        self.leaving = Some(Leaving { then, attempts: 0 });
        self.leave_failure = None;
        self.due = now;
    }

    /// Ends a leave that cannot be sent: nothing to leave, nothing in
    /// flight.
    fn settle_leave(&mut self, now: Millis) {
        if self.leaving.is_some() && self.in_flight.is_none() && self.member_id.is_empty() {
            self.finish_leave(None, now);
        }
    }

    fn leave_failed(&mut self, failure: &Failure, now: Millis) {
        let attempts = self.leaving.map_or(LEAVE_ATTEMPTS_MAX, |l| l.attempts);
        let out_already = matches!(
            failure.code(),
            Some(codes::FENCED | codes::REPLACED | codes::UNKNOWN_MEMBER | codes::UNKNOWN_GROUP)
        );
        if out_already {
            self.finish_leave(None, now);
        } else if !failure.is_transient() || attempts >= LEAVE_ATTEMPTS_MAX {
            self.finish_leave(Some(failure.clone()), now);
        } else {
            self.due = now + (RETRY_BACKOFF_MS_MIN << attempts);
        }
    }

    fn finish_leave(&mut self, failure: Option<Failure>, now: Millis) {
        let then = self.leaving.take().and_then(|l| l.then);
        if let Some(failure) = &failure {
            tracing::warn!(member_id = %self.member_id, ?failure, "the leave failed");
        }
        self.leave_failure = failure;
        self.forget_member_id();
        match then {
            Some(reason) => self.stop(reason),
            None => self.due = now,
        }
    }

    fn stop(&mut self, reason: StopReason) {
        let reason = if self.leave_asked {
            StopReason::Left
        } else {
            reason
        };
        self.leaving = None;
        self.stopped.get_or_insert(reason);
    }

    /// Tells the application every held task is lost and forgets the
    /// member id.
    fn lose_everything(&mut self) {
        self.lose_everything_but_id();
        self.forget_member_id();
    }

    fn lose_everything_but_id(&mut self) {
        let lost = self.tracker.reset();
        self.forget_inactive_loads();
        if !lost.is_empty() {
            self.events.push_back(MachineEvent::Lost { tasks: lost });
        }
    }

    /// Out of the group: the next join is a new member, with a new id.
    fn forget_member_id(&mut self) {
        self.member_id.clear();
        self.choose_join_id();
        self.epoch = JOIN_EPOCH;
        // A new member's host has none of its loads, and asks for them.
        self.loads.reset();
    }

    fn forget_inactive_loads(&mut self) {
        let tracker = &self.tracker;
        self.loads.retain_active(|task| tracker.is_active(task));
    }

    fn choose_join_id(&mut self) {
        self.ids_chosen += 1;
        self.join_id = format!("{}-{}", self.config.id_prefix, self.ids_chosen);
    }

    fn tell_all(&mut self, changes: Vec<Change>) {
        self.events
            .extend(changes.into_iter().map(|change| match change {
                Change::Lost(tasks) => MachineEvent::Lost { tasks },
                Change::Revoked { ack, tasks } => MachineEvent::Revoked { ack, tasks },
                Change::LearnerStopped(tasks) => MachineEvent::LearnerStopped { tasks },
                Change::StandbyStopped(tasks) => MachineEvent::StandbyStopped { tasks },
                Change::Promoted(tasks) => MachineEvent::Promoted { tasks },
                Change::Assigned(tasks) => MachineEvent::Assigned { tasks },
                Change::LearnerStarted(tasks) => MachineEvent::LearnerStarted { tasks },
                Change::StandbyStarted(tasks) => MachineEvent::StandbyStarted { tasks },
                Change::Draining => MachineEvent::Draining,
                Change::Drained => MachineEvent::Drained,
            }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// After a coordinator died, a member that failed many times retries
    /// within a second, not a whole interval (3 s by default) later.
    #[test]
    fn the_retry_backoff_doubles_up_to_a_second_and_never_past_the_interval() {
        let backoffs: Vec<u64> = (1..=8).map(|f| retry_backoff_ms(f, 3_000)).collect();
        assert_eq!(backoffs, [50, 100, 200, 400, 800, 1000, 1000, 1000]);
        assert_eq!(retry_backoff_ms(u32::MAX, 3_000), RETRY_BACKOFF_MS_MAX);
        // A short interval still bounds it.
        assert_eq!(retry_backoff_ms(4, 300), 300);
        assert_eq!(retry_backoff_ms(1, 300), RETRY_BACKOFF_MS_MIN);
    }
}
