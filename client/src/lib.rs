//! `assignd-client`: the Rust member library for assignd.
//!
//! A member joins a group over HTTP, heartbeats at the host's interval, and
//! learns its assignment as [`Event`]s:
//!
//! ```no_run
//! # async fn example() -> Result<(), assignd_client::ClientError> {
//! use assignd_client::{Event, Member, MemberConfig, NoLags};
//!
//! let config = MemberConfig::new("http://127.0.0.1:7070", "billing", ["orders"])
//!     .with_name("worker-a");
//! let (member, mut events) = Member::start(config, NoLags)?;
//! while let Some(event) = events.recv().await {
//!     match event {
//!         // Cold tasks, and warm copies (learners, standbys) that became
//!         // active: both are now this member's to process.
//!         Event::Assigned(tasks) | Event::Promoted(tasks) => { /* start processing */ }
//!         Event::Revoked { tasks, ack } => {
//!             /* stop processing, then: */
//!             ack.ack();
//!         }
//!         Event::Lost(tasks) => { /* stop at once: they may be elsewhere already */ }
//!         Event::LearnerStarted(tasks) | Event::StandbyStarted(tasks) => { /* warm up */ }
//!         Event::LearnerStopped(tasks) | Event::StandbyStopped(tasks) => { /* drop the copy */ }
//!         Event::Joined { .. } | Event::Draining | Event::Drained => {}
//!         Event::Fenced { .. } | Event::Replaced { .. } | Event::Error(_) => { /* log it */ }
//!     }
//! }
//! // The loop ended: `closed` says why (left, drained, replaced, ...).
//! println!("stopped: {:?}", member.closed().await);
//! # Ok(())
//! # }
//! ```
//!
//! The protocol (docs/design.md, incremental cooperative rebalancing): a task
//! that moves is first *revoked*; the member keeps reporting it as owned
//! until the application acknowledges it stopped, and only then does the
//! host grant it to its next owner. So with every application acknowledging
//! only after it stopped, no task is ever processed by two members at once.
//!
//! A member that is stalled (starved of CPU, paused, cut off) cannot hear
//! that the host fenced it. Each answer therefore carries a lease: the host
//! gives nobody else the member's tasks until that long after the heartbeat
//! was sent. An application that checks [`MemberHandle::may_process`] (or
//! [`Status::may_process`]) before committing output never writes after its
//! tasks went elsewhere; the loop also sends [`Event::Lost`] when the lease
//! runs out. An answer may also carry a longer *unreached lease*: while no
//! later heartbeat can have reached a coordinator of the group (its node
//! died and no other serves the group yet), the host keeps the member's
//! tasks until that ends, and so does the member ([`Status::lease_until`]).
//!
//! - `wire`: the JSON bodies; `transport`: one request over HTTP/1.1.
//! - [`machine`]: every decision of a member, sans-IO: ids and epochs,
//!   when to send what, the lease, the policy for each error, drains and
//!   leaves. Every client in every language runs a port of it, checked by
//!   the vectors in `clients/conformance/`.
//! - `tracker`: what the application has been told (sans-IO, driven by
//!   the machine).
//! - [`loads`]: which task loads, utilisation and load capacity the next
//!   heartbeat reports (sans-IO, driven by the machine): nothing until
//!   the host asks, then everything or what moved past the threshold
//!   ([`MemberHandle::set_load`]).
//! - `member`: the shell that runs the machine over HTTP, its handle and
//!   events; [`listen`] hands the events to a [`Listener`] (assigned,
//!   revoked, lost: the shape of every client's listener).
//! - [`router`]: for everyone outside the group, who owns a key right now
//!   and at what address: a [`Router`] watches the group's routing table
//!   and answers [`Router::owner_of`] from it without a round trip; keys
//!   map to partitions as Kafka's default partitioner maps them
//!   ([`partition_for_key`]).
//! - `simulated` (cargo feature `simulated`): members with simulated
//!   stateful tasks (changelogs, replay, lag reports), for examples, load
//!   generators and demos.

mod config;
mod error;
mod listener;
pub mod loads;
pub mod machine;
mod member;
pub mod router;
#[cfg(feature = "simulated")]
pub mod simulated;
mod tracker;
mod transport;
pub mod wire;

pub use config::{
    CONNECTION_IDLE_MAX, Connections, EVENT_BUFFER_DEFAULT, MemberConfig, REQUEST_TIMEOUT_DEFAULT,
    SHARED_REQUESTS_MAX_DEFAULT,
};
pub use error::{ClientError, codes};
pub use listener::{Listener, listen};
pub use machine::StopReason;
pub use member::{
    Event, HeartbeatObserver, LagSource, Member, MemberHandle, NoLags, RevokeAck, Status,
};
pub use router::{Route, RouteError, RouteTable, Router, RouterConfig, RouterError};
pub use tracker::Assignment;
pub use wire::Task;
pub use wire::{RouteOwner, RoutesBody, murmur2, partition_for_key};
