//! The listener shape every client shares (Kafka's
//! `ConsumerRebalanceListener`: assigned, revoked, lost), for applications
//! that would rather implement hooks than match on [`Event`]s: [`listen`]
//! calls them one at a time, in order, and acknowledges a revocation once
//! its hook returned. A task that becomes active warm (a learner or standby
//! promoted) comes to [`Listener::assigned`] too, flagged, so code that
//! only implements `assigned` never misses it.

use tokio::sync::mpsc;

use crate::member::Event;
use crate::{ClientError, Task};

/// The application's hooks. Only `assigned`, `revoked` and `lost` must be
/// written; the others default to doing nothing.
pub trait Listener: Send {
    /// Start processing `tasks`. `promoted`: their state is warm here (they
    /// were learners or standbys).
    fn assigned(&mut self, tasks: &[Task], promoted: bool);
    /// Stop processing `tasks`; once this returns, the member tells the
    /// host they are released and they move to their next owner.
    fn revoked(&mut self, tasks: &[Task]);
    /// Stop `tasks` at once: they may be active elsewhere already (the
    /// member was fenced, replaced, or its lease ran out).
    fn lost(&mut self, tasks: &[Task]);
    /// Start warming these up (replay their state) and report their lag.
    fn learner_started(&mut self, _tasks: &[Task]) {}
    /// Stop warming these up: they went elsewhere.
    fn learner_stopped(&mut self, _tasks: &[Task]) {}
    fn standby_started(&mut self, _tasks: &[Task]) {}
    fn standby_stopped(&mut self, _tasks: &[Task]) {}
    fn joined(&mut self, _member_id: &str) {}
    fn draining(&mut self) {}
    /// The host removed the member; it rejoins unless it was leaving.
    fn fenced(&mut self, _rejoining: bool) {}
    /// Another process took this member's name; the member stops.
    fn replaced(&mut self, _member_name: &str) {}
    fn error(&mut self, _error: &ClientError) {}
}

/// Hands every event of `events` to `listener`, in order, until the member
/// stops (then returns; [`MemberHandle::closed`](crate::MemberHandle::closed)
/// says why).
pub async fn listen(events: &mut mpsc::Receiver<Event>, listener: &mut impl Listener) {
    while let Some(event) = events.recv().await {
        match event {
            Event::Joined { member_id } => listener.joined(&member_id),
            Event::Assigned(tasks) => listener.assigned(&tasks, false),
            Event::Promoted(tasks) => listener.assigned(&tasks, true),
            Event::Revoked { tasks, ack } => {
                listener.revoked(&tasks);
                ack.ack();
            }
            Event::Lost(tasks) => listener.lost(&tasks),
            Event::LearnerStarted(tasks) => listener.learner_started(&tasks),
            Event::LearnerStopped(tasks) => listener.learner_stopped(&tasks),
            Event::StandbyStarted(tasks) => listener.standby_started(&tasks),
            Event::StandbyStopped(tasks) => listener.standby_stopped(&tasks),
            Event::Draining => listener.draining(),
            Event::Drained => {}
            Event::Fenced { rejoining } => listener.fenced(rejoining),
            Event::Replaced { member_name } => listener.replaced(&member_name),
            Event::Error(error) => listener.error(&error),
        }
    }
}
