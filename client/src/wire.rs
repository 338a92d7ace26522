//! The member side of the heartbeat protocol as it crosses HTTP. The
//! request and answer bodies are the `assignd-wire` crate's, the ones the
//! host reads and writes, and so is the error body; this module reads an
//! answer into the client's own [`HeartbeatResponse`]. It owns the encoding
//! only; what the fields mean to a member is decided in `tracker` and
//! `member`.

use std::collections::BTreeSet;

pub use assignd_wire::{
    ENDPOINT_BYTES_MAX, ErrorBody, ErrorDetail, HeartbeatRequest, HeartbeatResponseBody,
    JOIN_EPOCH, LEAVE_EPOCH, LOAD_MAX, LagRow, LoadItem, LoadReport, METADATA_KEY_BYTES_MAX,
    METADATA_PAIRS_MAX, METADATA_VALUE_BYTES_MAX, RouteMember, RouteMove, RouteOwner, RoutesBody,
    Task, TaskRanges, UTILISATION_MAX, murmur2, partition_for_key,
};
use serde::Deserialize;

/// The 200 answer to a heartbeat, as the member loop uses it: task sets,
/// and the epoch in the signed space of the epoch a request sends.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(try_from = "HeartbeatResponseBody")]
pub struct HeartbeatResponse {
    pub member_id: String,
    pub member_epoch: i64,
    pub heartbeat_interval_ms: u64,
    pub active: BTreeSet<Task>,
    pub revoking: BTreeSet<Task>,
    pub learner: BTreeSet<Task>,
    pub standby: BTreeSet<Task>,
    pub draining: bool,
    pub drained: bool,
    /// How long after answering the host may give this member's tasks to
    /// others if it hears nothing more (absent from hosts before it).
    pub lease_ms: Option<u64>,
    /// How long after *sending* this heartbeat the member may keep
    /// processing its active tasks while none of its later heartbeats
    /// reaches the group's coordinator (a coordinator that died, before
    /// another node takes its shard over). At least `lease_ms`, and equal
    /// to it while the answer has tasks to revoke: the host takes tasks
    /// early only through a heartbeat it got. Absent from hosts before it.
    pub unreached_lease_ms: Option<u64>,
    /// While a heartbeat is in flight, the unreached lease counts only
    /// until that heartbeat's send time plus this: should it reach the
    /// coordinator, the host takes none of the member's tasks sooner than
    /// this after handling it, but the member learns whether it did only
    /// from the answer or its timeout. Absent from hosts before it (then
    /// no unreached lease counts while a heartbeat is in flight).
    pub unreached_flight_ms: Option<u64>,
    /// What the next heartbeat reports of the member's loads (`None` from
    /// a host before loads, and for a group without a load unit).
    pub load_report: LoadReport,
}

impl TryFrom<HeartbeatResponseBody> for HeartbeatResponse {
    type Error = String;

    fn try_from(body: HeartbeatResponseBody) -> Result<Self, String> {
        // The next request sends the epoch back, as an i64.
        let member_epoch = i64::try_from(body.member_epoch)
            .map_err(|_| format!("member_epoch {} past {}", body.member_epoch, i64::MAX))?;
        Ok(HeartbeatResponse {
            member_id: body.member_id,
            member_epoch,
            heartbeat_interval_ms: body.heartbeat_interval_ms,
            active: body.active.into_iter().collect(),
            revoking: body.revoking.into_iter().collect(),
            learner: body.learner.into_iter().collect(),
            standby: body.standby.into_iter().collect(),
            draining: body.draining,
            drained: body.drained,
            lease_ms: body.lease_ms,
            unreached_lease_ms: body.unreached_lease_ms,
            unreached_flight_ms: body.unreached_flight_ms,
            load_report: body.load_report,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(owned: Vec<Task>) -> HeartbeatRequest {
        HeartbeatRequest {
            member_id: "m".into(),
            member_name: None,
            member_epoch: 3,
            topics: None,
            rack: None,
            capacity: Some(1),
            owned: Some(owned),
            lags: Some(Vec::new()),
            drain: false,
            task_ranges: true,
            endpoint: None,
            metadata: None,
            loads: None,
            utilisation: None,
            load_capacity: None,
        }
    }

    /// `owned` of 100,000 tasks was 1.89 MB, over the host's 1 MiB body
    /// limit; runs of partitions go as ranges.
    #[test]
    fn owned_tasks_are_sent_as_ranges_per_topic() {
        let million: Vec<Task> = (0..10)
            .flat_map(|t| (0..100_000).map(move |p| Task::new(format!("topic-{t}"), p)))
            .collect();
        let body = serde_json::to_vec(&request(million)).unwrap();
        assert!(body.len() < 1_000, "{} bytes", body.len());
        let json = serde_json::to_value(request(Vec::new())).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "member_id": "m", "member_epoch": 3, "rack": null, "capacity": 1,
                "owned": [], "lags": [], "drain": false, "task_ranges": true,
            })
        );
    }

    /// The answer of a host asked for `task_ranges` lists runs as ranges;
    /// an older host's `[topic, partition]` items read the same.
    #[test]
    fn an_answers_ranges_and_pairs_read_as_task_sets() {
        let ranged: HeartbeatResponse = serde_json::from_value(serde_json::json!({
            "member_id": "m", "member_epoch": 4, "heartbeat_interval_ms": 3000,
            "active": [["orders", 0, 2], ["orders", 7]], "revoking": [["payments", 1, 3]],
            "learner": [], "standby": [["orders", 9]], "lease_ms": 6000,
        }))
        .unwrap();
        let pairs: HeartbeatResponse = serde_json::from_value(serde_json::json!({
            "member_id": "m", "member_epoch": 4, "heartbeat_interval_ms": 3000,
            "active": [["orders", 0], ["orders", 1], ["orders", 2], ["orders", 7]],
            "revoking": [["payments", 1], ["payments", 2], ["payments", 3]],
            "learner": [], "standby": [["orders", 9]], "lease_ms": 6000,
        }))
        .unwrap();
        assert_eq!(ranged, pairs);
        assert_eq!(ranged.active.len(), 4);
        assert_eq!((ranged.member_epoch, ranged.lease_ms), (4, Some(6000)));
    }

    /// A host that sends the unreached lease gives it beside the lease; an
    /// older host's answer reads as having none, its other fields alike.
    #[test]
    fn an_answer_with_and_without_the_unreached_lease_reads() {
        let answer = |extra: serde_json::Value| {
            let mut json = serde_json::json!({
                "member_id": "m", "member_epoch": 4, "heartbeat_interval_ms": 3000,
                "active": [["orders", 0, 2]], "revoking": [], "learner": [],
                "standby": [["orders", 9]], "draining": false, "drained": false,
                "lease_ms": 6000,
            });
            json.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            serde_json::from_value::<HeartbeatResponse>(json).unwrap()
        };
        let newer = answer(serde_json::json!({"unreached_lease_ms": 11000,
                                              "unreached_flight_ms": 6000}));
        let older = answer(serde_json::json!({}));
        assert_eq!(
            (
                newer.lease_ms,
                newer.unreached_lease_ms,
                newer.unreached_flight_ms
            ),
            (Some(6000), Some(11000), Some(6000))
        );
        assert_eq!(
            (older.lease_ms, older.unreached_lease_ms),
            (Some(6000), None)
        );
        assert_eq!(
            HeartbeatResponse {
                unreached_lease_ms: None,
                unreached_flight_ms: None,
                ..newer
            },
            older,
            "the other fields read alike"
        );
        assert_eq!(older.active.len(), 3);
        assert_eq!(older.standby.len(), 1);
        // Read from bytes as the transport reads it, and `null` as absent.
        let bytes = br#"{"member_id":"m","member_epoch":1,"heartbeat_interval_ms":3000,"lease_ms":6000,"unreached_lease_ms":null}"#;
        let read: HeartbeatResponse = serde_json::from_slice(bytes).unwrap();
        assert_eq!((read.lease_ms, read.unreached_lease_ms), (Some(6000), None));
    }

    #[test]
    fn an_epoch_past_what_a_request_can_send_is_refused() {
        let answer = serde_json::from_value::<HeartbeatResponse>(serde_json::json!({
            "member_id": "m", "member_epoch": u64::MAX, "heartbeat_interval_ms": 3000,
        }));
        assert!(answer.unwrap_err().to_string().contains("member_epoch"));
    }
}
