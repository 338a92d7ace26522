//! The trace of a schedule (kept with [`crate::sim::Options::trace`]): a
//! line per step, record and event, in order, with the cluster's own
//! lines; and how each thing it shows is written in one line: a lane's
//! scenario, a config, a heartbeat and its outcome, a record, an
//! assignor's answer, and where a replay differs from the live group.

use assignd_guest_sdk::{Assignment, GroupInput};

use super::{Lane, World};
use crate::protocol::core::{Heartbeat, HeartbeatResponse, Output, ProtocolError};
use crate::protocol::group::{Group, GroupConfig, Record, Task};
use crate::sim::check::tasks_str;

impl World {
    /// Adds a line to the trace, if one is kept (`line` sees the world).
    pub(super) fn note(&mut self, line: impl FnOnce(&Self) -> String) {
        if self.trace.is_some() {
            self.flush_cluster_notes();
            let line = format!("#{} t={} {}", self.step, self.now, line(self));
            if let Some(trace) = &mut self.trace {
                trace.push(line);
            }
        }
    }

    /// Cluster mode: the cluster's trace lines, into the trace.
    pub(super) fn flush_cluster_notes(&mut self) {
        let Some(cluster) = &mut self.cluster else {
            return;
        };
        let notes = cluster.take_notes();
        if let Some(trace) = &mut self.trace {
            for line in notes {
                trace.push(format!("#{} t={}   {line}", self.step, self.now));
            }
        }
    }
}

/// A group of the schedule and the scenario it drew.
pub(super) fn describe_lane(lane: &Lane) -> String {
    let Lane {
        name,
        shard,
        scenario,
        ..
    } = lane;
    format!(
        "group {name} on shard {shard}: scenario {:?} members<={} lost={} chaos={} slow={} racks={}",
        scenario.membership,
        scenario.members_max,
        scenario.lost_response_p,
        scenario.chaos_p,
        scenario.slow_p,
        scenario.racks
    )
}

/// Group `name`'s config, as the admin sends it.
pub(super) fn describe_config(name: &str, config: &GroupConfig) -> String {
    let topics: Vec<String> = config
        .topics
        .iter()
        .map(|t| format!("{}/{}", t.name, t.partitions))
        .collect();
    format!(
        "configure {} topics=[{}] assignor={} learners={:?} acceptable_lag={} max_learners={} hb={} session={} registration={} expansion={} scale_down={} probing={}",
        name,
        topics.join(" "),
        config.assignor,
        config.learners,
        config.acceptable_recovery_lag,
        config.max_learners,
        config.heartbeat_interval_ms,
        config.session_timeout_ms,
        config.registration_timeout_ms,
        config.expansion_timeout_ms,
        config.scale_down_timeout_ms,
        config.probing_interval_ms
    )
}

/// Process `label`'s heartbeat (its first join, a leave or a heartbeat),
/// what came back and whether its answer was `lost`.
pub(super) fn describe_heartbeat(
    label: &str,
    joining: bool,
    leaving: bool,
    request: &Heartbeat,
    result: &Result<(HeartbeatResponse, Output), ProtocolError>,
    lost: bool,
) -> String {
    let kind = if leaving {
        "leave".to_owned()
    } else if joining {
        format!(
            "join {:?} topics={:?}",
            request.member_id,
            request.topics.clone().unwrap_or_default()
        )
    } else {
        format!(
            "beat {} e{} owned=[{}]{}{}",
            request.member_id,
            request.member_epoch,
            tasks_str(request.owned.iter().flatten()),
            if request.drain { " drain" } else { "" },
            match &request.topics {
                Some(t) => format!(" topics={t:?}"),
                None => String::new(),
            }
        )
    };
    let outcome = match result {
        Ok((r, _)) => format!(
            "{} e{} lease={}{} active=[{}] revoking=[{}] learner=[{}] standby=[{}]{}{}{}",
            r.member_id,
            r.member_epoch,
            r.lease_ms,
            if r.unreached_lease_ms == r.lease_ms {
                String::new()
            } else {
                format!(" unreached={}", r.unreached_lease_ms)
            },
            tasks_str(&r.active),
            tasks_str(&r.revoking),
            tasks_str(&r.learner),
            tasks_str(&r.standby),
            if r.draining { " draining" } else { "" },
            if r.drained { " drained" } else { "" },
            if lost { " (response LOST)" } else { "" }
        ),
        Err(e) => format!("error {}: {e}", e.code()),
    };
    format!("{label} {kind} -> {outcome}")
}

/// A record in one line for the trace.
pub(super) fn describe_record(record: &Record) -> String {
    match record {
        Record::TargetInstalled { epoch, target, .. } => {
            let slots: Vec<String> = target
                .iter()
                .map(|(slot, t)| {
                    format!(
                        "{slot}: a=[{}] l=[{}] s=[{}]",
                        tasks_str(&t.active),
                        tasks_str(&t.learner),
                        tasks_str(&t.standby)
                    )
                })
                .collect();
            format!("TargetInstalled e{epoch} {}", slots.join("; "))
        }
        Record::MemberReconciled {
            slot, assignment, ..
        } => format!(
            "MemberReconciled {slot} {:?} e{} (prev e{}) active=[{}] revoking=[{}]",
            assignment.state,
            assignment.epoch,
            assignment.previous_epoch,
            tasks_str(&assignment.active),
            tasks_str(&assignment.revoking)
        ),
        Record::GroupConfigured { .. } => "GroupConfigured".into(),
        other => {
            let mut text = format!("{other:?}");
            if text.len() > 200 {
                let mut end = 200;
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                text.truncate(end);
                text.push('…');
            }
            text
        }
    }
}

/// An assignor's answer in one line: per member, its active tasks,
/// learners and standbys, and the lags it reported.
pub(super) fn describe_answer(input: &GroupInput, answer: &Assignment) -> String {
    let offsets = input.topic_offsets();
    let task_ref = |task: u32| {
        let topic = offsets.partition_point(|&o| o <= task) - 1;
        Task::new(&input.topics[topic].name, task - offsets[topic])
    };
    let mut rows: Vec<String> = Vec::new();
    for (m, member) in input.members.iter().enumerate() {
        let m = m as u32;
        let active: Vec<_> = (0..answer.active_owner.len() as u32)
            .filter(|&t| answer.active_owner[t as usize] == m)
            .map(task_ref)
            .collect();
        let learner: Vec<_> = answer
            .learners
            .iter()
            .filter(|&(_, x)| x == m)
            .map(|(t, _)| task_ref(t))
            .collect();
        let standby: Vec<_> = answer
            .standbys
            .iter()
            .filter(|&(_, x)| x == m)
            .map(|(t, _)| task_ref(t))
            .collect();
        let lags: Vec<String> = input
            .lags
            .iter()
            .filter(|&(_, x, _)| x == m)
            .map(|(t, _, lag)| {
                let t = task_ref(t);
                format!("{}:{}={lag}", t.topic, t.partition)
            })
            .collect();
        rows.push(format!(
            "{} topics={:?} a=[{}] l=[{}] s=[{}] lags=[{}]",
            member.id,
            input.topics_of(member),
            tasks_str(&active),
            tasks_str(&learner),
            tasks_str(&standby),
            lags.join(" ")
        ));
    }
    rows.join("; ")
}

/// Which field of two groups differs first, for a replay mismatch.
pub(super) fn first_difference(replayed: Option<&Group>, live: &Group) -> String {
    let Some(replayed) = replayed else {
        return "the replay has no group".into();
    };
    let fields: [(&str, bool); 9] = [
        ("config", replayed.config == live.config),
        ("group_epoch", replayed.group_epoch == live.group_epoch),
        ("target_epoch", replayed.target_epoch == live.target_epoch),
        ("members", replayed.members == live.members),
        ("target", replayed.target == live.target),
        ("holdings", replayed.holdings == live.holdings),
        (
            "fenced_member_ids",
            replayed.fenced_member_ids == live.fenced_member_ids,
        ),
        (
            "member_ids_issued",
            replayed.member_ids_issued == live.member_ids_issued,
        ),
        ("dynamic_only", replayed.dynamic_only == live.dynamic_only),
    ];
    let differ: Vec<&str> = fields
        .iter()
        .filter(|(_, same)| !same)
        .map(|(name, _)| *name)
        .collect();
    if differ.is_empty() {
        "another field".into()
    } else {
        differ.join(", ")
    }
}
