//! The runtime's figures about groups, for `GET /metrics`. It owns two
//! things and changes nothing in the core:
//!
//! - [`scan`]: one pass over a shard's core (under its lock, when
//!   `GET /metrics` is scraped, never on a member's request path) that counts
//!   groups and members by state, epochs, tasks moving and learners;
//!   [`publish`] turns the result into gauges after the lock is released;
//! - [`Rebalances`]: fed every record the core emits, in apply order (under
//!   the same lock), it counts installed targets per group and times each
//!   rebalance, from the epoch bump that started it to the group's next
//!   snapshot (which the core writes each time the group becomes stable).
//!   The sans-IO core keeps no such timing: this is the runtime's view.
//!
//! The recorder gets host-wide figures only (a state, a reason, never a
//! group or a member id); the per-group figures of the last scan are
//! rendered on demand by [`render_groups`].

use std::collections::HashMap;

use metrics::Unit;

use crate::protocol::core::Coordinator;
use crate::protocol::group::{Group, Millis, Phase, RebalanceReason, Record, RemovalReason};
use crate::protocol::reconcile::MemberState;
use crate::telemetry::{Family, Kind};

/// Member states counted per group: a static member away, a draining
/// member, or else where it is in reaching its target.
pub const MEMBER_STATES: [&str; 5] = ["stable", "revoking", "unreleased", "away", "draining"];

/// One group's figures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupFigures {
    pub name: String,
    /// By [`Group::phase`], the rule the API's group view shows too.
    pub state: Phase,
    pub group_epoch: u64,
    pub target_epoch: u64,
    /// Members per state, in the order of [`MEMBER_STATES`].
    pub members: [u64; MEMBER_STATES.len()],
    /// Tasks members must release and still hold.
    pub tasks_revoking: u64,
    /// Learner tasks in the installed target.
    pub learners_pending: u64,
}

/// Every group's figures: copies only, so the lock is short.
pub fn scan(core: &Coordinator) -> Vec<GroupFigures> {
    core.groups().map(group_figures).collect()
}

fn group_figures(group: &Group) -> GroupFigures {
    let mut members = [0; MEMBER_STATES.len()];
    for (slot, member) in &group.members {
        let state = if member.away {
            3
        } else if member.draining {
            4
        } else {
            match group.holdings.member(slot).map(|held| held.state) {
                Some(MemberState::Stable) | None => 0,
                Some(MemberState::UnrevokedTasks) => 1,
                Some(MemberState::UnreleasedTasks) => 2,
            }
        };
        members[state] += 1;
    }
    GroupFigures {
        name: group.name.clone(),
        state: group.phase(),
        group_epoch: group.group_epoch,
        target_epoch: group.target_epoch,
        members,
        tasks_revoking: group
            .holdings
            .members()
            .map(|(_, held)| held.revoking.len() as u64)
            .sum(),
        learners_pending: group.learner_count() as u64,
    }
}

/// The last scan, for [`render_groups`].
static LAST_SCAN: std::sync::Mutex<Vec<GroupFigures>> = std::sync::Mutex::new(Vec::new());

/// Sets the host-wide gauges of a scan (outside the core's lock), and
/// keeps it for [`render_groups`]. The recorder gets no per-group series:
/// its size, and a default scrape's, must not grow with the groups.
pub fn publish(figures: &[GroupFigures]) {
    let mut groups = [0u64; Phase::ALL.len()];
    let mut members = [0u64; MEMBER_STATES.len()];
    let (mut revoking, mut learners) = (0, 0);
    for group in figures {
        groups[group.state as usize] += 1;
        for (total, count) in members.iter_mut().zip(group.members) {
            *total += count;
        }
        revoking += group.tasks_revoking;
        learners += group.learners_pending;
    }
    for (state, count) in Phase::ALL.iter().zip(groups) {
        metrics::gauge!("assignd_groups", "state" => state.label()).set(count as f64);
    }
    for (state, count) in MEMBER_STATES.iter().zip(members) {
        metrics::gauge!("assignd_members", "state" => *state).set(count as f64);
    }
    metrics::gauge!("assignd_tasks_revoking").set(revoking as f64);
    metrics::gauge!("assignd_learners_pending").set(learners as f64);
    let mut last = LAST_SCAN.lock().unwrap_or_else(|e| e.into_inner());
    last.clear();
    last.extend_from_slice(figures);
}

/// The per-group families, rendered from the last scan in Prometheus' text
/// format (`GET /metrics?groups=true`): members by state, the epochs,
/// tasks moving and learners of each group. Only groups that exist now
/// appear (a deleted group's series go with it).
pub fn render_groups(text: &mut String) {
    use std::fmt::Write;
    let last = LAST_SCAN.lock().unwrap_or_else(|e| e.into_inner());
    let family = |text: &mut String, name: &str, help: &str| {
        let _ = write!(text, "# HELP {name} {help}\n# TYPE {name} gauge\n");
    };
    family(
        text,
        "assignd_group_members",
        "Members of a group by state (as assignd_members)",
    );
    for group in last.iter() {
        let name = label_value(&group.name);
        for (state, count) in MEMBER_STATES.iter().zip(group.members) {
            let _ = writeln!(
                text,
                "assignd_group_members{{group=\"{name}\",state=\"{state}\"}} {count}"
            );
        }
    }
    type Gauge = (&'static str, &'static str, fn(&GroupFigures) -> u64);
    let gauges: [Gauge; 4] = [
        (
            "assignd_group_epoch",
            "A group's epoch: bumped whenever the group needs a new target",
            |g| g.group_epoch,
        ),
        (
            "assignd_group_target_epoch",
            "The epoch of a group's installed target",
            |g| g.target_epoch,
        ),
        (
            "assignd_group_tasks_revoking",
            "Tasks of a group its members have been asked to release and still hold",
            |g| g.tasks_revoking,
        ),
        (
            "assignd_group_learners_pending",
            "Learner tasks in a group's installed target",
            |g| g.learners_pending,
        ),
    ];
    for (metric, help, value) in gauges {
        family(text, metric, help);
        for group in last.iter() {
            let _ = writeln!(
                text,
                "{metric}{{group=\"{}\"}} {}",
                label_value(&group.name),
                value(group)
            );
        }
    }
}

/// A label value escaped as Prometheus' text format requires (backslash,
/// double quote, line feed); any other control character (a name from
/// before they were refused) as U+FFFD, which the format has no escape
/// for: a line never breaks whatever a name holds.
pub fn label_value(value: &str) -> std::borrow::Cow<'_, str> {
    if !value
        .chars()
        .any(|c| c == '\\' || c == '"' || c.is_control())
    {
        return std::borrow::Cow::Borrowed(value);
    }
    let mut escaped = String::with_capacity(value.len() + 8);
    for c in value.chars() {
        match c {
            '\\' => escaped.push_str("\\\\"),
            '"' => escaped.push_str("\\\""),
            '\n' => escaped.push_str("\\n"),
            c if c.is_control() => escaped.push(char::REPLACEMENT_CHARACTER),
            c => escaped.push(c),
        }
    }
    std::borrow::Cow::Owned(escaped)
}

/// What a batch of records says about rebalances.
#[derive(Clone, Debug, PartialEq)]
pub enum RebalanceEvent<'a> {
    /// A target was installed for `group`.
    Installed { group: &'a str },
    /// `group` is stable again, `seconds` after the epoch bump that
    /// started its rebalance.
    Finished { group: &'a str, seconds: f64 },
    /// A member was taken out of `group` by the host or by itself.
    Removed {
        group: &'a str,
        slot: &'a str,
        reason: RemovalReason,
    },
}

/// Rebalances in progress: each group's first epoch bump since it was
/// last stable. Groups whose rebalance started before this process (a
/// recovered log) are not timed.
#[derive(Debug, Default)]
pub struct Rebalances {
    started_ms: HashMap<String, Millis>,
}

impl Rebalances {
    /// Reads records in apply order, at `now`.
    pub fn observe<'a>(
        &mut self,
        records: &'a [Record],
        now: Millis,
        mut event: impl FnMut(RebalanceEvent<'a>),
    ) {
        for record in records {
            match record {
                Record::GroupEpochBumped { group, .. } if !self.started_ms.contains_key(group) => {
                    self.started_ms.insert(group.clone(), now);
                }
                Record::TargetInstalled { group, .. } => {
                    event(RebalanceEvent::Installed { group });
                }
                Record::MemberRemoved {
                    group,
                    slot,
                    reason,
                } => {
                    event(RebalanceEvent::Removed {
                        group,
                        slot,
                        reason: *reason,
                    });
                }
                Record::GroupSnapshot { group, .. } => {
                    if let Some(started) = self.started_ms.remove(group) {
                        event(RebalanceEvent::Finished {
                            group,
                            seconds: now.saturating_sub(started) as f64 / 1e3,
                        });
                    }
                }
                _ => {}
            }
        }
    }
}

/// Counts or times one event in the metrics; `core` has applied the
/// records the event comes from (it knows why a target was installed).
pub fn record(event: RebalanceEvent<'_>, core: &Coordinator) {
    match event {
        RebalanceEvent::Installed { group } => {
            let reason = core
                .liveness(group)
                .and_then(|l| l.rebalances.last)
                .map_or(RebalanceReason::Recovered, |last| last.reason);
            metrics::counter!("assignd_rebalances_total", "reason" => reason.label()).increment(1)
        }
        RebalanceEvent::Finished { seconds, .. } => {
            metrics::histogram!("assignd_rebalance_seconds").record(seconds)
        }
        RebalanceEvent::Removed {
            group,
            slot,
            reason,
        } => {
            let label = reason.label();
            metrics::counter!("assignd_members_removed_total", "reason" => label).increment(1);
            // A member removed by the host may still believe it holds its
            // tasks until its next heartbeat: the operator needs to see it.
            if reason == RemovalReason::Left {
                tracing::debug!(group, slot, reason = label, "member removed");
            } else {
                tracing::info!(group, slot, reason = label, "member removed");
            }
        }
    }
}

/// The families this file records: groups and members (set from each
/// scan), installed targets, rebalance times and removed members.
pub const GROUP_FAMILIES: &[Family] = &[
    Family::new(
        "assignd_groups",
        Kind::Gauge,
        Unit::Count,
        "Groups by state (stable, assigning: a new target is wanted, reconciling: members are moving to the target)",
    ),
    Family::new(
        "assignd_members",
        Kind::Gauge,
        Unit::Count,
        "Members of every group by state (stable, revoking: must release tasks, unreleased: waits for tasks others release, away: a static member gone for now, draining)",
    ),
    Family::new(
        "assignd_tasks_revoking",
        Kind::Gauge,
        Unit::Count,
        "Tasks members of every group have been asked to release and still hold (tasks moving)",
    ),
    Family::new(
        "assignd_learners_pending",
        Kind::Gauge,
        Unit::Count,
        "Learner tasks in the installed targets of every group (warming up before ownership moves)",
    ),
    Family::new(
        "assignd_rebalances_total",
        Kind::Counter,
        Unit::Count,
        "Targets installed (one per assignment the host accepted), every group, by reason (the first change of the batch a target answers: join, leave, expiry, fence, subscription, config, caught_up, probing, drain, load, recovered)",
    ),
    Family::new(
        "assignd_rebalance_seconds",
        Kind::Histogram,
        Unit::Seconds,
        "From the epoch bump that started a rebalance to the group being stable again",
    ),
    Family::new(
        "assignd_members_removed_total",
        Kind::Counter,
        Unit::Count,
        "Members taken out of a group, by reason (left, expired, fenced, drain_timed_out)",
    ),
];

/// Sets the group families' series whose labels are known to zero: every
/// group state, member state and removal reason.
pub fn zero_group_series() {
    for state in Phase::ALL {
        metrics::gauge!("assignd_groups", "state" => state.label()).set(0.0);
    }
    for state in MEMBER_STATES {
        metrics::gauge!("assignd_members", "state" => state).set(0.0);
    }
    metrics::gauge!("assignd_tasks_revoking").set(0.0);
    metrics::gauge!("assignd_learners_pending").set(0.0);
    for reason in RebalanceReason::ALL {
        metrics::counter!("assignd_rebalances_total", "reason" => reason.label()).absolute(0);
    }
    for reason in [
        RemovalReason::Left,
        RemovalReason::Expired,
        RemovalReason::Fenced,
        RemovalReason::DrainTimedOut,
    ] {
        metrics::counter!("assignd_members_removed_total", "reason" => reason.label()).absolute(0);
    }
    // Registered without a sample: rendered with zero counts.
    let _ = metrics::histogram!("assignd_rebalance_seconds");
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use assignor_sticky::Sticky;

    use super::*;
    use crate::protocol::core::{Heartbeat, HeartbeatResponse, Output};
    use crate::protocol::group::{AssignorFailure, GroupConfig, LearnerMode, TopicConfig};

    const EXPANSION_MS: u64 = 100;

    fn config(partitions: u32, learners: LearnerMode) -> GroupConfig {
        GroupConfig {
            expansion_timeout_ms: EXPANSION_MS,
            learners,
            ..GroupConfig::with_topics(vec![TopicConfig {
                name: "orders".into(),
                partitions,
            }])
        }
    }

    /// Answers every assignor call with the native sticky assignor; keeps
    /// the records.
    fn absorb(core: &mut Coordinator, out: Output, now: Millis, log: &mut Vec<Record>) {
        log.extend(out.records);
        for call in out.assignor_calls {
            let answer = assignd_guest_sdk::harness::run::<Sticky>(&call.input)
                .map_err(|e| AssignorFailure::new("harness", e.to_string()));
            let more = core.assignment_computed(&call.group, call.epoch, answer, now);
            absorb(core, more, now, log);
        }
    }

    fn beat(
        core: &mut Coordinator,
        group: &str,
        last: &HeartbeatResponse,
        now: Millis,
        log: &mut Vec<Record>,
    ) -> HeartbeatResponse {
        let request = Heartbeat {
            member_id: last.member_id.clone(),
            member_epoch: last.member_epoch as i64,
            topics: None,
            owned: Some(last.active.iter().cloned().collect()),
            ..Heartbeat::join(group, None, vec![])
        };
        let (response, out) = core.heartbeat(&request, now).unwrap();
        absorb(core, out, now, log);
        response
    }

    /// Creates `group` with `members` dynamic members at time 0 and brings
    /// it to stable at `EXPANSION_MS`; returns the members' last answers.
    fn stable_group(
        core: &mut Coordinator,
        group: &str,
        members: usize,
        log: &mut Vec<Record>,
    ) -> Vec<HeartbeatResponse> {
        stable_groups(core, &[group], members, log)
            .pop()
            .expect("one group")
    }

    /// Creates `groups` at time 0, joins `members` to each, and drives
    /// them to stable together (time only moves forward in a core).
    fn stable_groups(
        core: &mut Coordinator,
        groups: &[&str],
        members: usize,
        log: &mut Vec<Record>,
    ) -> Vec<Vec<HeartbeatResponse>> {
        let mut answers: Vec<Vec<HeartbeatResponse>> = Vec::new();
        for group in groups {
            let out = core
                .configure(group, config(12, LearnerMode::Off), 0)
                .unwrap();
            absorb(core, out, 0, log);
            answers.push(
                (0..members)
                    .map(|_| {
                        let join = Heartbeat::join(group, None, vec!["orders".into()]);
                        let (response, out) = core.heartbeat(&join, 0).unwrap();
                        absorb(core, out, 0, log);
                        response
                    })
                    .collect(),
            );
        }
        let out = core.tick(EXPANSION_MS);
        absorb(core, out, EXPANSION_MS, log);
        for _ in 0..3 {
            for (group, answers) in groups.iter().zip(&mut answers) {
                for answer in answers {
                    *answer = beat(core, group, answer, EXPANSION_MS, log);
                }
            }
        }
        answers
    }

    #[test]
    fn scan_counts_groups_and_members_by_state() {
        let mut core = Coordinator::new(7);
        let mut log = Vec::new();
        let mut answers = stable_group(&mut core, "a", 3, &mut log);
        let figures = scan(&core);
        assert_eq!(figures.len(), 1);
        let a = &figures[0];
        assert_eq!(a.state, Phase::Stable, "{a:?}");
        assert_eq!(a.members, [3, 0, 0, 0, 0]);
        assert_eq!((a.tasks_revoking, a.learners_pending), (0, 0));
        assert_eq!(a.group_epoch, a.target_epoch);

        // A fourth member joins: the group wants a new target.
        let join = Heartbeat::join("a", None, vec!["orders".into()]);
        let (fourth, out) = core.heartbeat(&join, 200).unwrap();
        absorb(&mut core, out, 200, &mut log);
        let a = &scan(&core)[0];
        assert_eq!(a.state, Phase::Assigning);
        assert_eq!(a.group_epoch, a.target_epoch + 1);
        assert_eq!(a.members.iter().sum::<u64>(), 4);

        // Its target is installed; the old members must release tasks.
        let out = core.tick(200 + EXPANSION_MS);
        absorb(&mut core, out, 200 + EXPANSION_MS, &mut log);
        let now = 200 + EXPANSION_MS;
        answers[0] = beat(&mut core, "a", &answers[0], now, &mut log);
        let a = &scan(&core)[0];
        assert_eq!(a.state, Phase::Reconciling);
        assert_eq!(a.group_epoch, a.target_epoch);
        assert_eq!(a.members[1], 1, "one member revoking: {a:?}");
        assert_eq!(a.tasks_revoking, answers[0].revoking.len() as u64);
        assert!(a.tasks_revoking > 0);

        // Everyone releases: stable again.
        let mut all = answers;
        all.push(fourth);
        for _ in 0..3 {
            for answer in &mut all {
                *answer = beat(&mut core, "a", answer, now, &mut log);
            }
        }
        let a = &scan(&core)[0];
        assert_eq!(a.state, Phase::Stable, "{a:?}");
        assert_eq!(a.members, [4, 0, 0, 0, 0]);

        // A drain shows at once.
        let out = core.drain("a", &all[0].member_id, now).unwrap();
        absorb(&mut core, out, now, &mut log);
        assert_eq!(scan(&core)[0].members[4], 1);
    }

    #[test]
    fn a_rebalance_is_timed_from_its_first_bump_to_the_next_snapshot() {
        let mut core = Coordinator::new(7);
        let mut log = Vec::new();
        stable_group(&mut core, "a", 2, &mut log);
        // Replay the records as the runtime would see them, batch by
        // batch: the bump at 0, the snapshot at EXPANSION_MS.
        let bumped = log
            .iter()
            .position(|r| matches!(r, Record::GroupEpochBumped { .. }))
            .unwrap();
        let mut rebalances = Rebalances::default();
        let mut events = Vec::new();
        rebalances.observe(&log[..=bumped], 0, |e| events.push(e));
        rebalances.observe(&log[bumped + 1..], EXPANSION_MS, |e| events.push(e));
        let installed = log
            .iter()
            .filter(|r| matches!(r, Record::TargetInstalled { .. }))
            .count();
        assert!(installed >= 1);
        let mut expected = vec![RebalanceEvent::Installed { group: "a" }; installed];
        expected.push(RebalanceEvent::Finished {
            group: "a",
            seconds: EXPANSION_MS as f64 / 1e3,
        });
        assert_eq!(events, expected);
        assert!(rebalances.started_ms.is_empty());
        // A snapshot without a bump seen (a recovered group) is not timed.
        let mut events = Vec::new();
        rebalances.observe(&log, 5_000, |e| events.push(e));
        assert!(events.contains(&RebalanceEvent::Finished {
            group: "a",
            seconds: 0.0
        }));
        let snapshot_only: Vec<Record> = log
            .iter()
            .filter(|r| matches!(r, Record::GroupSnapshot { .. }))
            .cloned()
            .collect();
        let mut events = Vec::new();
        rebalances.observe(&snapshot_only, 6_000, |e| events.push(e));
        assert_eq!(events, []);
    }

    #[test]
    fn a_member_that_does_not_release_in_time_is_reported_fenced() {
        let mut core = Coordinator::new(7);
        let mut log = Vec::new();
        let answers = stable_group(&mut core, "a", 2, &mut log);
        // A third member joins; once its target is installed, the first
        // member is told to release tasks and never answers again.
        let join = Heartbeat::join("a", None, vec!["orders".into()]);
        let (mut third, out) = core.heartbeat(&join, EXPANSION_MS).unwrap();
        absorb(&mut core, out, EXPANSION_MS, &mut log);
        let installed_at = 2 * EXPANSION_MS;
        let out = core.tick(installed_at);
        absorb(&mut core, out, installed_at, &mut log);
        let told = beat(&mut core, "a", &answers[0], installed_at, &mut log);
        assert!(!told.revoking.is_empty(), "{told:?}");
        let fenced_at =
            installed_at + EXPANSION_MS + config(12, LearnerMode::Off).heartbeat_interval_ms;
        let mut second = answers[1].clone();
        let mut now = installed_at;
        let mut removed = Vec::new();
        let mut rebalances = Rebalances::default();
        while removed.is_empty() {
            now += 50;
            assert!(now < fenced_at + 1_000, "never fenced");
            let before = log.len();
            second = beat(&mut core, "a", &second, now, &mut log);
            third = beat(&mut core, "a", &third, now, &mut log);
            let out = core.tick(now);
            absorb(&mut core, out, now, &mut log);
            rebalances.observe(&log[before..], now, |e| {
                if let RebalanceEvent::Removed { slot, reason, .. } = e {
                    removed.push((slot.to_owned(), reason));
                }
            });
        }
        assert!(now >= fenced_at, "fenced at {now}, before {fenced_at}");
        assert_eq!(removed, [(told.member_id, RemovalReason::Fenced)]);
    }

    /// The ticker's scan holds the core's lock: over 1,000 groups of 4
    /// members it takes about 1 ms optimised (opt-level 2), 8 ms in a debug
    /// build; the bound is loose, for a loaded machine's debug build.
    #[test]
    fn a_scan_counts_a_thousand_stable_groups() {
        // Its cost is measured by `cargo bench --bench heartbeat`
        // (`metrics_scan/groups/1000`), not here.
        let mut core = Coordinator::new(7);
        let mut log = Vec::new();
        let names: Vec<String> = (0..1_000).map(|g| format!("group-{g}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        stable_groups(&mut core, &names, 4, &mut log);
        let figures = scan(&core);
        publish(&figures);
        let states: BTreeMap<&str, usize> = figures.iter().fold(BTreeMap::new(), |mut m, f| {
            *m.entry(f.state.label()).or_default() += 1;
            m
        });
        assert_eq!(states, BTreeMap::from([("stable", 1_000)]));
    }
}
