//! A member's endpoint on the wire, through the member's public API: the
//! join carries the config's, `MemberHandle::set_endpoint` reaches the
//! next heartbeat, and a change past the host's limits is refused before
//! anything is sent. (The rule itself is the machine's, proven by the
//! conformance vector `a_member_publishes_its_endpoint_and_changes_it`.)

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use assignd_client::wire::HeartbeatResponseBody;
use assignd_client::{ClientError, Member, MemberConfig, NoLags};
use axum::extract::State;
use axum::routing::post;
use serde_json::{Value, json};

const DEADLINE: Duration = Duration::from_secs(10);

type Bodies = Arc<Mutex<Vec<Value>>>;

async fn heartbeat(
    State(bodies): State<Bodies>,
    body: String,
) -> axum::Json<HeartbeatResponseBody> {
    bodies
        .lock()
        .unwrap()
        .push(serde_json::from_str(&body).unwrap());
    axum::Json(HeartbeatResponseBody {
        member_id: "m-1".into(),
        member_epoch: 1,
        heartbeat_interval_ms: 20,
        ..HeartbeatResponseBody::default()
    })
}

/// The first body at or after `from` for which `matches` holds, and its
/// index.
async fn body_where(
    bodies: &Bodies,
    from: usize,
    matches: impl Fn(&Value) -> bool,
) -> (usize, Value) {
    tokio::time::timeout(DEADLINE, async {
        loop {
            let found = bodies
                .lock()
                .unwrap()
                .iter()
                .enumerate()
                .skip(from)
                .find(|(_, body)| matches(body))
                .map(|(i, body)| (i, body.clone()));
            if let Some(found) = found {
                return found;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("no such heartbeat in time")
}

#[tokio::test]
async fn a_members_endpoint_goes_on_its_join_and_a_change_on_the_next_heartbeat() {
    let bodies = Bodies::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let app = axum::Router::new()
        .route("/v1/groups/{group}/heartbeat", post(heartbeat))
        .with_state(bodies.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let config = MemberConfig::new(&url, "orders", ["orders"])
        .with_endpoint("http://10.0.0.5:8080")
        .with_metadata("zone", "a");
    let (member, _events) = Member::start(config, NoLags).unwrap();
    let (_, join) = body_where(&bodies, 0, |b| b["member_epoch"] == 0).await;
    assert_eq!(join["endpoint"], "http://10.0.0.5:8080");
    assert_eq!(join["metadata"], json!({"zone": "a"}));
    let (seen, beat) = body_where(&bodies, 1, |_| true).await;
    assert!(
        beat.get("endpoint").is_none() && beat.get("metadata").is_none(),
        "{beat}"
    );

    member.set_endpoint(None, BTreeMap::new()).unwrap();
    let (_, change) = body_where(&bodies, seen + 1, |b| b.get("endpoint").is_some()).await;
    assert_eq!(
        (&change["endpoint"], &change["metadata"]),
        (&json!(""), &json!({}))
    );

    let too_long = "x".repeat(assignd_client::wire::ENDPOINT_BYTES_MAX + 1);
    assert!(matches!(
        member.set_endpoint(Some(too_long), BTreeMap::new()),
        Err(ClientError::Config(_))
    ));
}
