//! The API in process: the router that `assignd serve` runs, driven with
//! `tower::ServiceExt::oneshot`, over a runtime with a manual clock and a
//! sink that keeps every record. Every error mapping is checked, and every
//! refused request is checked to change nothing: the same group view and
//! not one record more. Successful flows replay the persisted records into
//! a fresh core and compare: the sink saw them in apply order.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use serde_json::{Value, json};
use tower::ServiceExt;

use super::wire::{GroupConfigDoc, HeartbeatResponseBody};
use super::{ApiError, app, openapi};
use crate::plugins::{EngineConfig, Limits, PluginEngine};
use crate::protocol::core::{Coordinator, MEMBERS_PER_GROUP_MAX, ProtocolError};
use crate::protocol::group::{GroupConfig, Record, TaskRef, TopicConfig};
use crate::runtime::{Clock, RecordSink, Runtime, RuntimeConfig, RuntimeError};

/// One engine per test binary: each built-in compiles once.
fn engine() -> Arc<PluginEngine> {
    static ENGINE: OnceLock<Arc<PluginEngine>> = OnceLock::new();
    ENGINE
        .get_or_init(|| {
            Arc::new(
                PluginEngine::new(EngineConfig {
                    concurrent_calls_max: 4,
                    ..EngineConfig::default()
                })
                .expect("engine"),
            )
        })
        .clone()
}

/// Keeps every record, in the order persisted.
#[derive(Default)]
struct RecordingSink {
    records: Mutex<Vec<Record>>,
    fail: std::sync::atomic::AtomicBool,
    /// Fails as a storage that does not answer.
    silent: std::sync::atomic::AtomicBool,
}

impl RecordSink for RecordingSink {
    fn persist(&self, records: &[Record]) -> anyhow::Result<()> {
        if self.fail.load(std::sync::atomic::Ordering::SeqCst) {
            anyhow::bail!("disk on fire");
        }
        if self.silent.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(crate::runtime::StorageUnavailable(
                "no answer from etcd at 10.0.0.1:2379".into(),
            )
            .into());
        }
        self.records.lock().unwrap().extend_from_slice(records);
        Ok(())
    }
}

const SEED: u64 = 7;
const GROUP: &str = "orders-app";
const EXPANSION_MS: u64 = 100;
/// The test app's admin token; [`Fixture::send`] sends it unless the
/// request carries an `Authorization` header of its own.
const ADMIN_TOKEN: &str = "test-admin-token-0123456789";

/// Several shards, so that the groups of a test are spread over more
/// than one (the names of most tests land in different shards).
const SHARD_COUNT: u32 = 8;

struct Fixture {
    runtime: Arc<Runtime>,
    app: Router,
    sink: Arc<RecordingSink>,
}

fn fixture() -> Fixture {
    let sink = Arc::new(RecordingSink::default());
    let runtime = Runtime::new(
        RuntimeConfig {
            seed: SEED,
            limits: Limits::default(),
            admission: Default::default(),
            shard_count: SHARD_COUNT,
            unreached_grace_ms: 0,
        },
        Clock::manual(0),
        sink.clone(),
        engine(),
    );
    Fixture {
        app: app(
            runtime.clone(),
            super::AdminToken::new(ADMIN_TOKEN).expect("a valid token"),
        ),
        runtime,
        sink,
    }
}

fn config_json(partitions: u32) -> Value {
    json!({
        "topics": [{"name": "orders", "partitions": partitions}],
        "assignor": "sticky",
        "expansion_timeout_ms": EXPANSION_MS,
        "learners": "off",
    })
}

impl Fixture {
    /// Sends `request` with the admin token unless it has an
    /// `Authorization` header already.
    async fn send(&self, mut request: Request<Body>) -> (StatusCode, Value, axum::http::HeaderMap) {
        if !request.headers().contains_key(header::AUTHORIZATION) {
            request.headers_mut().insert(
                header::AUTHORIZATION,
                format!("Bearer {ADMIN_TOKEN}").parse().unwrap(),
            );
        }
        self.send_as_is(request).await
    }

    /// Sends `request` as it is: no token added.
    async fn send_as_is(
        &self,
        request: Request<Body>,
    ) -> (StatusCode, Value, axum::http::HeaderMap) {
        let response = self.app.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        let json = headers
            .get(header::CONTENT_TYPE)
            .is_none_or(|t| t.as_bytes().starts_with(b"application/json"));
        let value = if bytes.is_empty() {
            Value::Null
        } else if !json {
            // Text (the metrics): as a string.
            Value::String(String::from_utf8_lossy(&bytes).into_owned())
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&bytes)))
        };
        (status, value, headers)
    }

    /// A request with a raw body sent as JSON.
    async fn raw(&self, method: &str, path: &str, body: impl Into<Body>) -> (StatusCode, Value) {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header(header::CONTENT_TYPE, "application/json")
            .body(body.into())
            .unwrap();
        let (status, value, _) = self.send(request).await;
        (status, value)
    }

    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        match body {
            Some(body) => self.raw(method, path, body.to_string()).await,
            None => {
                let request = Request::builder()
                    .method(method)
                    .uri(path)
                    .body(Body::empty())
                    .unwrap();
                let (status, value, _) = self.send(request).await;
                (status, value)
            }
        }
    }

    async fn put_group(&self, config: Value) -> (StatusCode, Value) {
        self.call("PUT", &format!("/v1/groups/{GROUP}"), Some(config))
            .await
    }

    async fn heartbeat(&self, body: Value) -> (StatusCode, Value) {
        self.call("POST", &format!("/v1/groups/{GROUP}/heartbeat"), Some(body))
            .await
    }

    async fn join(&self, name: &str) -> HeartbeatResponseBody {
        let (status, answer) = self
            .heartbeat(json!({
                "member_id": "", "member_name": name, "member_epoch": 0, "topics": ["orders"],
            }))
            .await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        serde_json::from_value(answer).unwrap()
    }

    async fn beat(&self, member: &HeartbeatResponseBody) -> HeartbeatResponseBody {
        let (status, answer) = self
            .heartbeat(json!({
                "member_id": member.member_id,
                "member_epoch": member.member_epoch,
                "owned": member.active,
            }))
            .await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        serde_json::from_value(answer).unwrap()
    }

    async fn view(&self) -> Value {
        let (status, view) = self.call("GET", &format!("/v1/groups/{GROUP}"), None).await;
        assert_eq!(status, StatusCode::OK, "{view}");
        view
    }

    fn record_count(&self) -> usize {
        self.sink.records.lock().unwrap().len()
    }

    /// Everything observable: the groups and the records persisted.
    async fn snapshot(&self) -> (Value, usize) {
        let (_, groups) = self.call("GET", "/v1/groups", None).await;
        let (_, view) = self.call("GET", &format!("/v1/groups/{GROUP}"), None).await;
        (json!({"groups": groups, "view": view}), self.record_count())
    }

    /// Moves past the expansion timeout, ticks, and waits for the
    /// assignor call to be answered.
    async fn assign(&self) {
        self.runtime.clock().advance(EXPANSION_MS);
        self.runtime.tick().await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(120);
        while self.runtime.calls_in_flight() > 0 {
            assert!(Instant::now() < deadline, "the assignor call never ended");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Replays the persisted records into a fresh core: it must equal the
    /// runtime's.
    async fn assert_replay_matches(&self) {
        let records = self.sink.records.lock().unwrap().clone();
        let mut replayed = Coordinator::new(SEED);
        for record in &records {
            replayed.apply(record);
        }
        // Each group's records come from its own shard, in order: one core
        // replaying them all holds every shard's groups.
        let mut live: Vec<_> = self
            .runtime
            .read_every_shard(|core, _| core.groups().cloned().collect::<Vec<_>>())
            .await
            .unwrap()
            .into_iter()
            .flatten()
            .collect();
        live.sort_by(|a, b| a.name.cmp(&b.name));
        let replayed: Vec<_> = replayed.groups().cloned().collect();
        assert_eq!(live, replayed, "replaying the persisted records");
    }
}

/// Asserts an error answer: status, code, and the one error shape.
fn assert_error(answer: &(StatusCode, Value), status: StatusCode, code: &str) {
    assert_eq!(answer.0, status, "{}", answer.1);
    assert_eq!(answer.1["error"]["code"], code, "{}", answer.1);
    assert!(
        answer.1["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{}",
        answer.1
    );
    assert_eq!(
        answer.1.as_object().unwrap().len(),
        1,
        "only `error`: {}",
        answer.1
    );
}

#[test]
fn every_protocol_error_has_a_status() {
    let task = TaskRef::new("orders", 0);
    let cases = [
        (
            ProtocolError::UnknownGroup("g".into()),
            404,
            "unknown_group",
        ),
        (
            ProtocolError::UnknownMember("m".into(), "g".into()),
            404,
            "unknown_member",
        ),
        (
            ProtocolError::Fenced {
                member_id: "m".into(),
            },
            409,
            "fenced",
        ),
        (
            ProtocolError::Replaced {
                member_id: "m".into(),
                member_name: "w".into(),
            },
            409,
            "replaced",
        ),
        (
            ProtocolError::StaleEpoch {
                sent: 5,
                current: 1,
            },
            409,
            "stale_epoch",
        ),
        (ProtocolError::NotOwned { task }, 409, "not_owned"),
        (ProtocolError::GroupFull("g".into()), 409, "group_full"),
        (ProtocolError::Invalid("x".into()), 400, "invalid_request"),
        (
            ProtocolError::NoPreviousBinding("g".into()),
            409,
            "no_previous_binding",
        ),
    ];
    for (error, status, code) in cases {
        let api = ApiError::from(error);
        assert_eq!(
            api.status_and_code(),
            (StatusCode::from_u16(status).unwrap(), code)
        );
    }
    let unknown = ApiError::Runtime(RuntimeError::UnknownAssignor { name: "x".into() });
    assert_eq!(
        unknown.status_and_code(),
        (StatusCode::BAD_REQUEST, "unknown_assignor")
    );
}

#[tokio::test]
async fn put_creates_then_updates_and_get_shows_the_view() {
    let f = fixture();
    let (status, view) = f.put_group(config_json(12)).await;
    assert_eq!(status, StatusCode::CREATED, "{view}");
    assert_eq!(view["name"], GROUP);
    assert_eq!(
        view["config"]["topics"],
        json!([{"name": "orders", "partitions": 12}])
    );
    assert_eq!(
        view["config"]["session_timeout_ms"], 45_000,
        "defaults filled in"
    );
    assert_eq!(view["group_epoch"], 1);
    assert_eq!(view["target_epoch"], 0);
    assert_eq!(view["state"], "assigning");
    assert_eq!(view["members"], json!([]));

    let (status, again) = f.put_group(config_json(12)).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the same config: an update that changes nothing"
    );
    assert_eq!(again, view);

    let mut bigger = config_json(16);
    bigger["assignor"] = json!("range");
    let (status, view) = f.put_group(bigger).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(view["config"]["assignor"], "range");
    assert_eq!(view["group_epoch"], 2);

    let (status, list) = f.call("GET", "/v1/groups", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        list,
        json!({"groups": [{"name": GROUP, "group_epoch": 2, "target_epoch": 0,
                           "state": "assigning", "members": 0, "assignor": "range"}]})
    );
    f.assert_replay_matches().await;
}

#[tokio::test]
async fn members_join_get_tasks_and_the_views_show_them() {
    let f = fixture();
    f.put_group(config_json(6)).await;
    let a = f.join("worker-a").await;
    let b = f.join("worker-b").await;
    assert_eq!((a.member_epoch, a.active.len()), (0, 0), "no target yet");
    // The first target is due an expansion timeout after the first join:
    // beat again then, not a whole heartbeat interval later.
    assert!(a.heartbeat_interval_ms <= EXPANSION_MS.max(100), "{a:?}");
    f.assign().await;
    let a = f.beat(&a).await;
    let b = f.beat(&b).await;
    assert_eq!(
        a.heartbeat_interval_ms, 3_000,
        "stable: the group's interval"
    );
    assert_eq!((a.active.len(), b.active.len()), (3, 3), "{a:?} {b:?}");
    assert!(a.active.iter().all(|t| !b.active.contains(t)));
    // Configured (1), two joins (2, 3): one target for the batch.
    assert_eq!(a.member_epoch, 3);

    let view = f.view().await;
    assert_eq!(view["state"], "stable", "{view}");
    assert_eq!(
        (&view["group_epoch"], &view["target_epoch"]),
        (&json!(3), &json!(3))
    );
    let members = view["members"].as_array().unwrap();
    assert_eq!(members.len(), 2);
    let first = &members[0];
    assert_eq!(first["slot"], "static:worker-a");
    assert_eq!(first["name"], "worker-a");
    assert_eq!(first["member_id"], a.member_id.as_str());
    assert_eq!(first["topics"], json!(["orders"]));
    assert_eq!(first["capacity"], 1);
    assert_eq!(first["reconcile_state"], "stable");
    assert_eq!(first["member_epoch"], 3);
    assert_eq!(first["active"], serde_json::to_value(&a.active).unwrap());
    assert_eq!(first["target"]["active"], first["active"]);
    assert_eq!(first["lags"], json!([]));
    assert_eq!(view["learner_count"], 0);

    // Lags are shown as reported.
    let (status, _) = f
        .heartbeat(json!({
            "member_id": a.member_id, "member_epoch": 3, "lags": [["orders", 4, 1500]],
        }))
        .await;
    assert_eq!(status, StatusCode::OK);
    let view = f.view().await;
    assert_eq!(view["members"][0]["lags"], json!([["orders", 4, 1500]]));

    // The captured assignor input is docs/design.md's GroupInput.
    let (status, input) = f
        .call("GET", &format!("/v1/groups/{GROUP}/assignor-input"), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(input["topics"], json!({"orders": 6}));
    assert_eq!(input["members"][0]["id"], a.member_id.as_str());
    assert_eq!(input["members"][0]["name"], "worker-a");
    assert_eq!(input["members"][0]["lags"], json!([["orders", 4, 1500]]));
    let text = input.to_string();
    let parsed = assignd_guest_sdk::json::parse_input(
        &text,
        &assignd_guest_sdk::validate::InputLimits::default(),
    )
    .expect("the offline contract parses it");
    assert_eq!(parsed.members.len(), 2);

    // A leave removes a dynamic member; a static one keeps its slot, away.
    let (status, left) = f
        .heartbeat(json!({"member_id": b.member_id, "member_epoch": -1}))
        .await;
    assert_eq!(status, StatusCode::OK, "{left}");
    assert_eq!(left["drained"], true);
    let view = f.view().await;
    assert_eq!(view["members"][1]["away"], true);
    f.assert_replay_matches().await;
}

#[tokio::test]
async fn learners_show_in_the_view_with_their_lag() {
    let f = fixture();
    let mut config = config_json(4);
    config["learners"] = json!("host");
    config["max_learners"] = json!(1);
    f.put_group(config).await;
    let a = f.join("worker-a").await;
    f.assign().await;
    let a = f.beat(&a).await;
    assert_eq!(a.active.len(), 4);
    let b = f.join("worker-b").await;
    f.assign().await;
    let b = f.beat(&b).await;
    assert!(b.active.is_empty(), "b is cold: nothing moves yet");
    assert_eq!(b.learner.len(), 1, "one learner at most: {b:?}");
    let task = b.learner[0].clone();
    let view = f.view().await;
    assert_eq!(view["learner_count"], 1);
    assert_eq!(
        view["learners"],
        json!([{"task": task, "slot": "static:worker-b", "member_id": b.member_id, "lag": null}])
    );
    assert_eq!(view["members"][1]["target"]["learner"], json!([task]));
    let (status, _) = f
        .heartbeat(json!({
            "member_id": b.member_id, "member_epoch": b.member_epoch,
            "lags": [[task.topic, task.partition, 50_000]],
        }))
        .await;
    assert_eq!(status, StatusCode::OK);
    let view = f.view().await;
    assert_eq!(view["learners"][0]["lag"], 50_000);
    f.assert_replay_matches().await;
}

#[tokio::test]
async fn drain_by_name_or_id_is_202_then_200() {
    let f = fixture();
    f.put_group(config_json(4)).await;
    let a = f.join("worker-a").await;
    f.join("worker-b").await;
    let path = format!("/v1/groups/{GROUP}/members/worker-b/drain");
    let (status, view) = f.call("POST", &path, None).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{view}");
    assert_eq!(view["members"][1]["draining"], true);
    let (status, _) = f.call("POST", &path, None).await;
    assert_eq!(status, StatusCode::OK, "already draining");
    let by_id = format!("/v1/groups/{GROUP}/members/{}/drain", a.member_id);
    let (status, view) = f.call("POST", &by_id, None).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(view["members"][0]["draining"], true);

    let before = f.snapshot().await;
    let answer = f
        .call(
            "POST",
            &format!("/v1/groups/{GROUP}/members/nobody/drain"),
            None,
        )
        .await;
    assert_error(&answer, StatusCode::NOT_FOUND, "unknown_member");
    let answer = f
        .call(
            "POST",
            "/v1/groups/no-such-group/members/worker-a/drain",
            None,
        )
        .await;
    assert_error(&answer, StatusCode::NOT_FOUND, "unknown_group");
    assert_eq!(f.snapshot().await, before);
    f.assert_replay_matches().await;
}

#[tokio::test]
async fn member_errors_map_to_their_status_and_change_nothing() {
    let f = fixture();
    f.put_group(config_json(4)).await;
    let first = f.join("worker-a").await;
    f.assign().await;
    let a = f.beat(&f.join("worker-b").await).await;
    let b_epoch = a.member_epoch;
    let before = f.snapshot().await;

    // An unknown group, an unknown member.
    let answer = f
        .call(
            "POST",
            "/v1/groups/nope/heartbeat",
            Some(json!({"member_id": "", "member_epoch": 0, "topics": ["orders"]})),
        )
        .await;
    assert_error(&answer, StatusCode::NOT_FOUND, "unknown_group");
    let answer = f
        .heartbeat(json!({"member_id": "m-nobody", "member_epoch": 1}))
        .await;
    assert_error(&answer, StatusCode::NOT_FOUND, "unknown_member");
    // A stale epoch.
    let answer = f
        .heartbeat(json!({"member_id": a.member_id, "member_epoch": b_epoch + 5}))
        .await;
    assert_error(&answer, StatusCode::CONFLICT, "stale_epoch");
    // Reporting a task the member was never given.
    let foreign: Vec<TaskRef> = (0..4)
        .map(|p| TaskRef::new("orders", p))
        .filter(|t| !a.active.contains(&t.clone().into()))
        .take(1)
        .collect();
    let answer = f
        .heartbeat(
            json!({"member_id": a.member_id, "member_epoch": a.member_epoch, "owned": foreign}),
        )
        .await;
    assert_error(&answer, StatusCode::CONFLICT, "not_owned");
    // Invalid requests: a join without topics, an empty topic name, capacity 0,
    // an epoch below -1, a join with a member id but epoch 5.
    for body in [
        json!({"member_id": "", "member_epoch": 0}),
        json!({"member_id": "", "member_epoch": 0, "topics": [""]}),
        json!({"member_id": "", "member_epoch": 0, "topics": ["orders"], "capacity": 0}),
        json!({"member_id": a.member_id, "member_epoch": -2}),
        json!({"member_id": "", "member_epoch": 5, "topics": ["orders"]}),
        json!({"member_id": "", "member_epoch": 0, "topics": ["orders"], "member_name": ""}),
    ] {
        let answer = f.heartbeat(body.clone()).await;
        assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_request");
    }
    assert_eq!(
        f.snapshot().await,
        before,
        "refused requests changed nothing"
    );

    // A restart of worker-a (same name) replaces the first incarnation.
    let again = f.join("worker-a").await;
    assert_ne!(again.member_id, first.member_id);
    let before = f.snapshot().await;
    let answer = f
        .heartbeat(json!({"member_id": first.member_id, "member_epoch": first.member_epoch}))
        .await;
    assert_error(&answer, StatusCode::CONFLICT, "replaced");
    assert_eq!(f.snapshot().await, before);
    f.assert_replay_matches().await;
}

#[tokio::test]
async fn a_full_group_refuses_the_next_member_with_409() {
    let f = fixture();
    f.put_group(config_json(1)).await;
    for i in 0..MEMBERS_PER_GROUP_MAX {
        let request = crate::protocol::core::Heartbeat::join(
            GROUP,
            Some(&format!("w-{i}")),
            vec!["orders".into()],
        );
        // Joins without a member token are rate-limited: slow enough.
        f.runtime.clock().advance(10);
        f.runtime.heartbeat(&request, None).await.unwrap();
    }
    let records = f.record_count();
    let answer = f
        .heartbeat(json!({"member_id": "", "member_epoch": 0, "topics": ["orders"], "member_name": "one-too-many"}))
        .await;
    assert_error(&answer, StatusCode::CONFLICT, "group_full");
    assert_eq!(f.record_count(), records);
}

#[tokio::test]
async fn malformed_bodies_are_invalid_json_and_change_nothing() {
    let f = fixture();
    f.put_group(config_json(4)).await;
    let a = f.join("worker-a").await;
    let before = f.snapshot().await;
    let heartbeat = format!("/v1/groups/{GROUP}/heartbeat");
    let group = format!("/v1/groups/{GROUP}");
    let cases: Vec<(&str, &str, String, &str)> =
        vec![
        ("POST", &heartbeat, "{\"member_id\": ".into(), "EOF"),
        ("POST", &heartbeat, "not json".into(), "expected"),
        ("POST", &heartbeat, String::new(), "EOF"),
        ("POST", &heartbeat, "[]".into(), "HeartbeatRequest"),
        ("POST", &heartbeat, "42".into(), "invalid type"),
        // A missing field, a wrong type, an unknown field.
        ("POST", &heartbeat, json!({"member_id": ""}).to_string(), "member_epoch"),
        (
            "POST",
            &heartbeat,
            json!({"member_id": a.member_id, "member_epoch": "one"}).to_string(),
            "member_epoch",
        ),
        (
            "POST",
            &heartbeat,
            json!({"member_id": a.member_id, "member_epoch": 0, "membr_name": "x"}).to_string(),
            "membr_name",
        ),
        (
            "POST",
            &heartbeat,
            json!({"member_id": a.member_id, "member_epoch": 0, "owned": [["orders"]]}).to_string(),
            "owned",
        ),
        (
            "POST",
            &heartbeat,
            json!({"member_id": a.member_id, "member_epoch": 0, "lags": [["orders", 1, -5]]})
                .to_string(),
            "lags",
        ),
        // Config: no topics, negative timeouts, partitions past u32, an
        // unknown field, an unknown learner mode.
        ("PUT", &group, json!({"assignor": "sticky"}).to_string(), "topics"),
        (
            "PUT",
            &group,
            json!({"topics": [{"name": "orders", "partitions": 4}], "expansion_timeout_ms": -1})
                .to_string(),
            "expansion_timeout_ms",
        ),
        (
            "PUT",
            &group,
            json!({"topics": [{"name": "orders", "partitions": 4}], "session_timeout_ms": -1})
                .to_string(),
            "session_timeout_ms",
        ),
        (
            "PUT",
            &group,
            json!({"topics": [{"name": "orders", "partitions": 5_000_000_000u64}]}).to_string(),
            "partitions",
        ),
        (
            "PUT",
            &group,
            json!({"topics": [{"name": "orders", "partitions": 4}], "colour": "blue"}).to_string(),
            "colour",
        ),
        (
            "PUT",
            &group,
            json!({"topics": [{"name": "orders", "partitions": 4}], "learners": "sometimes"})
                .to_string(),
            "learners",
        ),
    ];
    for (method, path, body, needle) in cases {
        let answer = f.raw(method, path, body.clone()).await;
        assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_json");
        let message = answer.1["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(needle),
            "{method} {body}: expected {needle:?} in {message:?}"
        );
    }
    assert_eq!(f.snapshot().await, before, "nothing changed");
}

#[tokio::test]
async fn configs_out_of_range_are_refused_and_change_nothing() {
    let f = fixture();
    f.put_group(config_json(4)).await;
    let before = f.snapshot().await;
    let topics = json!([{"name": "orders", "partitions": 4}]);
    for (config, code) in [
        (
            json!({"topics": [{"name": "orders", "partitions": 1_000_000_000}]}),
            "invalid_request",
        ),
        (
            json!({"topics": topics, "expansion_timeout_ms": 0}),
            "invalid_request",
        ),
        (
            json!({"topics": topics, "heartbeat_interval_ms": 60_000}),
            "invalid_request",
        ),
        (
            json!({"topics": [{"name": "orders", "partitions": 4}, {"name": "orders", "partitions": 2}]}),
            "invalid_request",
        ),
        (
            json!({"topics": [{"name": "", "partitions": 4}]}),
            "invalid_request",
        ),
        (
            json!({"topics": topics, "assignor": "fastest"}),
            "unknown_assignor",
        ),
        (json!({"topics": topics, "assignor": ""}), "invalid_request"),
    ] {
        let answer = f.put_group(config.clone()).await;
        assert_error(&answer, StatusCode::BAD_REQUEST, code);
    }
    let long_name = "g".repeat(300);
    let answer = f
        .call(
            "PUT",
            &format!("/v1/groups/{long_name}"),
            Some(config_json(4)),
        )
        .await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_request");
    let message = f
        .put_group(json!({"topics": topics, "assignor": "fastest"}))
        .await;
    assert!(
        message.1["error"]["message"]
            .as_str()
            .unwrap()
            .contains("sticky"),
        "names the built-ins: {}",
        message.1
    );
    assert_eq!(f.snapshot().await, before, "nothing changed");
}

#[tokio::test]
async fn a_body_past_its_routes_limit_is_413_and_changes_nothing() {
    let f = fixture();
    f.put_group(config_json(4)).await;
    let before = f.snapshot().await;
    // The heartbeat's limit is its own, far past the other routes'.
    let huge = "x".repeat(assignd_wire::HEARTBEAT_BODY_LEN_MAX_BYTES as usize + 1);
    let answer = f
        .heartbeat(
            json!({"member_id": "", "member_name": huge, "member_epoch": 0, "topics": ["orders"]}),
        )
        .await;
    assert_error(&answer, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");
    drop(huge);
    let name = "x".repeat(10 << 20);
    // Also without a Content-Length (a streamed body).
    let chunks = chunked_body(name.into_bytes());
    let request = Request::builder()
        .method("PUT")
        .uri(format!("/v1/groups/{GROUP}"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(chunks)
        .unwrap();
    let (status, value, _) = f.send(request).await;
    assert_error(
        &(status, value),
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
    );
    assert_eq!(f.snapshot().await, before);
}

/// A body with no known length, in 64 KiB chunks.
fn chunked_body(bytes: Vec<u8>) -> Body {
    Body::new(Chunked(
        bytes
            .chunks(64 << 10)
            .map(axum::body::Bytes::copy_from_slice)
            .collect(),
    ))
}

struct Chunked(std::collections::VecDeque<axum::body::Bytes>);

impl http_body::Body for Chunked {
    type Data = axum::body::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        std::task::Poll::Ready(
            self.0
                .pop_front()
                .map(|chunk| Ok(http_body::Frame::data(chunk))),
        )
    }
}

#[tokio::test]
async fn wrong_content_type_is_415() {
    let f = fixture();
    let request = Request::builder()
        .method("PUT")
        .uri(format!("/v1/groups/{GROUP}"))
        .header(header::CONTENT_TYPE, "text/plain")
        .body(Body::from(config_json(4).to_string()))
        .unwrap();
    let (status, value, _) = f.send(request).await;
    assert_error(
        &(status, value),
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
    );
    let request = Request::builder()
        .method("PUT")
        .uri(format!("/v1/groups/{GROUP}"))
        .body(Body::from(config_json(4).to_string()))
        .unwrap();
    let (status, value, _) = f.send(request).await;
    assert_error(
        &(status, value),
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
    );
    let (_, groups) = f.call("GET", "/v1/groups", None).await;
    assert_eq!(groups, json!({"groups": []}), "nothing created");
}

#[tokio::test]
async fn unknown_routes_and_methods_answer_json() {
    let f = fixture();
    for path in ["/", "/v1", "/v1/groups/a/b/c", "/v2/groups", "/v1/groups/"] {
        let answer = f.call("GET", path, None).await;
        assert_error(&answer, StatusCode::NOT_FOUND, "not_found");
    }
    let answer = f.call("GET", &format!("/v1/groups/{GROUP}"), None).await;
    assert_error(&answer, StatusCode::NOT_FOUND, "unknown_group");
    let answer = f
        .call("GET", &format!("/v1/groups/{GROUP}/assignor-input"), None)
        .await;
    assert_error(&answer, StatusCode::NOT_FOUND, "unknown_group");

    let request = Request::builder()
        .method("DELETE")
        .uri(format!("/v1/groups/{GROUP}"))
        .body(Body::empty())
        .unwrap();
    let (status, value, headers) = f.send(request).await;
    assert_error(
        &(status, value),
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
    );
    let allow = headers[header::ALLOW].to_str().unwrap();
    assert!(allow.contains("GET") && allow.contains("PUT"), "{allow}");
    let answer = f
        .call("GET", &format!("/v1/groups/{GROUP}/heartbeat"), None)
        .await;
    assert_error(
        &answer,
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
    );
}

#[tokio::test]
async fn a_failed_persist_is_503_from_then_on() {
    let f = fixture();
    f.put_group(config_json(4)).await;
    let (status, _) = f.call("GET", "/healthz", None).await;
    assert_eq!(status, StatusCode::OK);
    f.sink.fail.store(true, std::sync::atomic::Ordering::SeqCst);
    let answer = f
        .heartbeat(json!({"member_id": "", "member_epoch": 0, "topics": ["orders"]}))
        .await;
    assert_error(&answer, StatusCode::SERVICE_UNAVAILABLE, "storage_failed");
    assert!(
        !answer.1["error"]["message"]
            .as_str()
            .unwrap()
            .contains("disk on fire"),
        "server errors are not leaked"
    );
    f.sink
        .fail
        .store(false, std::sync::atomic::Ordering::SeqCst);
    let answer = f.call("GET", "/v1/groups", None).await;
    assert_error(&answer, StatusCode::SERVICE_UNAVAILABLE, "storage_failed");
    let (status, health) = f.call("GET", "/healthz", None).await;
    assert_eq!(
        (status, health),
        (
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"status": "storage_failed"})
        )
    );
}

#[tokio::test]
async fn a_silent_storage_is_503_storage_unavailable_with_retry_after() {
    let f = fixture();
    f.put_group(config_json(4)).await;
    f.sink
        .silent
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let request = Request::builder()
        .method("POST")
        .uri(format!("/v1/groups/{GROUP}/heartbeat"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(
            json!({"member_id": "", "member_epoch": 0, "topics": ["orders"]}).to_string(),
        ))
        .unwrap();
    let (status, value, headers) = f.send(request).await;
    assert_error(
        &(status, value.clone()),
        StatusCode::SERVICE_UNAVAILABLE,
        "storage_unavailable",
    );
    assert_eq!(headers[header::RETRY_AFTER], "1");
    assert!(
        !value["error"]["message"]
            .as_str()
            .unwrap()
            .contains("10.0.0.1"),
        "the storage's details are not leaked: {value}"
    );
    // The shard's later requests say the same (it is loaded again from
    // its storage once that answers: cluster mode's node does it).
    let answer = f.call("GET", &format!("/v1/groups/{GROUP}"), None).await;
    assert_error(
        &answer,
        StatusCode::SERVICE_UNAVAILABLE,
        "storage_unavailable",
    );
    let (status, health) = f.call("GET", "/healthz", None).await;
    assert_eq!(
        (status, health),
        (
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"status": "storage_unavailable"})
        )
    );
    let shard = f.runtime.shard_of(GROUP);
    assert_eq!(f.runtime.failed_shards(), vec![shard]);
}

#[test]
fn the_openapi_document_names_every_route() {
    let doc = serde_json::to_value(openapi()).unwrap();
    let paths = doc["paths"].as_object().unwrap();
    for (path, method) in [
        ("/v1/groups/{group}/heartbeat", "post"),
        ("/v1/groups", "get"),
        ("/v1/groups/{group}", "put"),
        ("/v1/groups/{group}", "get"),
        ("/v1/groups/{group}/assignor-input", "get"),
        ("/v1/groups/{group}/members/{member}/drain", "post"),
        ("/v1/groups/{group}/assignor", "put"),
        ("/v1/groups/{group}/assignor/rollback", "post"),
        ("/v1/groups/{group}/assignor/preview", "post"),
        ("/v1/assignors", "post"),
        ("/v1/assignors", "get"),
        ("/v1/assignors/{assignor}", "get"),
        ("/v1/assignors/{assignor}", "delete"),
        ("/v1/openapi.json", "get"),
        ("/healthz", "get"),
        ("/metrics", "get"),
        ("/v1/shards", "get"),
        ("/v1/shards/{shard}/load", "post"),
        ("/v1/shards/{shard}/unload", "post"),
        ("/v1/groups/{group}/coordinator", "get"),
    ] {
        let operation = &paths[path][method];
        assert!(operation.is_object(), "{method} {path} missing: {paths:?}");
        assert!(
            !operation["responses"].as_object().unwrap().is_empty(),
            "{method} {path}"
        );
    }
    assert_eq!(paths.len(), 17, "no route left out or added unnoticed");
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    for name in [
        "HeartbeatRequest",
        "HeartbeatResponseBody",
        "GroupConfigDoc",
        "GroupView",
        "GroupList",
        "ErrorBody",
        "Task",
        "LagRow",
        "AssignorView",
        "AssignorList",
        "BindRequest",
        "BindingView",
        "PreviewRequest",
        "PreviewView",
    ] {
        assert!(
            schemas.contains_key(name),
            "schema {name} missing: {:?}",
            schemas.keys()
        );
    }
    assert_eq!(schemas["Task"]["prefixItems"].as_array().unwrap().len(), 2);
    // Every error response has the error body.
    let heartbeat = &paths["/v1/groups/{group}/heartbeat"]["post"]["responses"];
    for status in ["400", "404", "409", "413", "415"] {
        assert_eq!(
            heartbeat[status]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/ErrorBody",
            "{status}"
        );
    }
}

#[test]
fn the_config_schema_lists_exactly_the_config_fields() {
    use utoipa::PartialSchema;
    let schema = serde_json::to_value(GroupConfigDoc::schema()).unwrap();
    let documented: std::collections::BTreeSet<String> = schema["properties"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    let config = GroupConfig::with_topics(vec![TopicConfig {
        name: "orders".into(),
        partitions: 1,
    }]);
    let mut actual: std::collections::BTreeSet<String> = serde_json::to_value(&config)
        .unwrap()
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    // Internal: the API sets it from a plaintext `member_token` (documented,
    // write-only) and never shows it.
    actual.remove("member_token_sha256");
    actual.insert("member_token".into());
    assert_eq!(
        documented, actual,
        "GroupConfigDoc is out of step with GroupConfig"
    );
    assert_eq!(schema["required"], json!(["topics"]));
}

#[tokio::test]
async fn the_served_document_is_the_generated_one() {
    let f = fixture();
    let (status, doc) = f.call("GET", "/v1/openapi.json", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(doc, serde_json::to_value(openapi()).unwrap());
}

// The assignor registry.

impl Fixture {
    /// Uploads `bytes` as `name@version` with the given content type.
    async fn upload_as(
        &self,
        query: &str,
        content_type: &str,
        bytes: impl Into<Body>,
    ) -> (StatusCode, Value) {
        let request = Request::builder()
            .method("POST")
            .uri(format!("/v1/assignors?{query}"))
            .header(header::CONTENT_TYPE, content_type)
            .body(bytes.into())
            .unwrap();
        let (status, value, _) = self.send(request).await;
        (status, value)
    }

    async fn upload(&self, name: &str, version: &str, bytes: &[u8]) -> (StatusCode, Value) {
        self.upload_as(
            &format!("name={name}&version={version}"),
            "application/wasm",
            bytes.to_vec(),
        )
        .await
    }

    async fn assignor_count(&self) -> usize {
        let (status, list) = self.call("GET", "/v1/assignors", None).await;
        assert_eq!(status, StatusCode::OK, "{list}");
        list["assignors"].as_array().unwrap().len()
    }
}

fn sticky_bytes() -> &'static [u8] {
    crate::plugins::builtin_component("sticky").unwrap()
}

#[tokio::test]
async fn an_upload_is_stored_once_and_listed_with_the_builtins() {
    let f = fixture();
    assert_eq!(f.assignor_count().await, 4, "the built-ins");
    let (status, module) = f.upload("mine", "1.0", sticky_bytes()).await;
    assert_eq!(status, StatusCode::CREATED, "{module}");
    let id = module["id"].as_str().unwrap().to_owned();
    assert_eq!(id.len(), 64, "sha256 hex: {id}");
    assert_eq!(module["name"], "mine");
    assert_eq!(module["version"], "1.0");
    assert_eq!(module["builtin"], false);
    assert_eq!(module["info"]["name"], "sticky");
    assert_eq!(module["size_bytes"], sticky_bytes().len());

    // The same bytes again: the same module, nothing new.
    let (status, again) = f.upload("other", "2", sticky_bytes()).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again, module);
    assert_eq!(f.assignor_count().await, 5);

    // Past the 1 MiB of the other routes: the same component with a 2 MiB
    // custom section appended is another module, and is accepted.
    let mut padded = sticky_bytes().to_vec();
    let payload_len = 2usize << 20;
    let name = b"padding";
    let section_len = 1 + name.len() + payload_len;
    padded.push(0); // custom section
    let mut len = section_len;
    loop {
        let byte = (len & 0x7f) as u8;
        len >>= 7;
        padded.push(if len == 0 { byte } else { byte | 0x80 });
        if len == 0 {
            break;
        }
    }
    padded.push(name.len() as u8);
    padded.extend_from_slice(name);
    padded.resize(padded.len() + payload_len, 0);
    let (status, big) = f.upload("padded", "1", &padded).await;
    assert_eq!(status, StatusCode::CREATED, "{big}");
    assert_eq!(big["size_bytes"], padded.len());
    let (status, _) = f.call("DELETE", "/v1/assignors/padded@1", None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);

    // Other bytes under a taken name and version.
    let range = crate::plugins::builtin_component("range").unwrap();
    let answer = f.upload("mine", "1.0", range).await;
    assert_error(&answer, StatusCode::CONFLICT, "module_name_taken");

    let (_, list) = f.call("GET", "/v1/assignors", None).await;
    let list = list["assignors"].as_array().unwrap().clone();
    let names: Vec<_> = list.iter().map(|a| a["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["range", "round-robin", "sticky", "learner-aware", "mine"]
    );
    assert!(list[..4].iter().all(|a| a["builtin"] == true));
    assert_eq!(
        list[2]["id"], id,
        "a built-in's id is the sha256 of its bytes"
    );

    for reference in [id.as_str(), "mine@1.0"] {
        let (status, shown) = f
            .call("GET", &format!("/v1/assignors/{reference}"), None)
            .await;
        assert_eq!(status, StatusCode::OK, "{shown}");
        assert_eq!(shown, module);
    }
    let (status, shown) = f.call("GET", "/v1/assignors/range", None).await;
    assert_eq!(status, StatusCode::OK, "{shown}");
    assert_eq!(shown["builtin"], true);
    assert_eq!(shown["info"]["name"], "range");
    let answer = f.call("GET", "/v1/assignors/mine@2.0", None).await;
    assert_error(&answer, StatusCode::NOT_FOUND, "unknown_module");
}

#[tokio::test]
async fn bad_uploads_name_what_failed_and_store_nothing() {
    let f = fixture();
    let bytes = sticky_bytes();
    let core_module = wat::parse_str("(module)").unwrap();
    let cases: Vec<(Vec<u8>, StatusCode, &str)> = vec![
        (
            b"not wasm at all".to_vec(),
            StatusCode::BAD_REQUEST,
            "not_wasm",
        ),
        (Vec::new(), StatusCode::BAD_REQUEST, "not_wasm"),
        (core_module, StatusCode::BAD_REQUEST, "core_module"),
        (
            bytes[..bytes.len() / 2].to_vec(),
            StatusCode::BAD_REQUEST,
            "compile_failed",
        ),
    ];
    for (body, status, code) in cases {
        let answer = f.upload("bad", "1", &body).await;
        assert_error(&answer, status, code);
    }
    let answer = f
        .upload_as("name=x&version=1", "application/json", bytes.to_vec())
        .await;
    assert_error(
        &answer,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
    );
    let answer = f
        .upload_as("version=1", "application/octet-stream", bytes.to_vec())
        .await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_query");
    let answer = f.upload("a%40b", "1", bytes).await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_module_name");
    // Over the module cap, 48 MiB (the other routes keep their 1 MiB).
    let huge = vec![0u8; crate::registry::MODULE_LEN_MAX_BYTES + 1];
    let answer = f.upload("huge", "1", &huge).await;
    assert_error(&answer, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");
    // A body whose length is not declared is cut at the limit as well.
    let stream = futures_body(huge);
    let answer = f
        .upload_as("name=huge&version=1", "application/wasm", stream)
        .await;
    assert_error(&answer, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");
    assert_eq!(f.assignor_count().await, 4, "nothing stored");
}

/// A body without a declared length: chunks of 1 MiB.
fn futures_body(bytes: Vec<u8>) -> Body {
    struct Chunks(Vec<axum::body::Bytes>);
    impl http_body::Body for Chunks {
        type Data = axum::body::Bytes;
        type Error = std::io::Error;
        fn poll_frame(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
            let next = (!self.0.is_empty()).then(|| Ok(http_body::Frame::data(self.0.remove(0))));
            std::task::Poll::Ready(next)
        }
    }
    let chunks = bytes
        .chunks(1 << 20)
        .map(axum::body::Bytes::copy_from_slice)
        .collect();
    Body::new(Chunks(chunks))
}

#[tokio::test]
async fn a_group_runs_on_an_uploaded_module_which_cannot_be_deleted_while_bound() {
    let f = fixture();
    let (status, module) = f.upload("mine", "1.0", sticky_bytes()).await;
    assert_eq!(status, StatusCode::CREATED, "{module}");
    let id = module["id"].as_str().unwrap().to_owned();

    let mut config = config_json(6);
    config["assignor"] = json!("mine@1.0");
    let (status, view) = f.put_group(config.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{view}");
    let a = f.join("worker-a").await;
    let b = f.join("worker-b").await;
    f.assign().await;
    let a = f.beat(&a).await;
    let b = f.beat(&b).await;
    assert_eq!((a.active.len(), b.active.len()), (3, 3), "{a:?} {b:?}");

    for reference in [id.as_str(), "mine@1.0"] {
        let answer = f
            .call("DELETE", &format!("/v1/assignors/{reference}"), None)
            .await;
        assert_error(&answer, StatusCode::CONFLICT, "module_in_use");
    }
    // Bound by id instead: still in use.
    config["assignor"] = json!(id);
    let (status, _) = f.put_group(config.clone()).await;
    assert_eq!(status, StatusCode::OK);
    let answer = f.call("DELETE", "/v1/assignors/mine@1.0", None).await;
    assert_error(&answer, StatusCode::CONFLICT, "module_in_use");

    config["assignor"] = json!("sticky");
    let (status, _) = f.put_group(config.clone()).await;
    assert_eq!(status, StatusCode::OK);
    let before = f.record_count();
    let (status, body) = f.call("DELETE", "/v1/assignors/mine@1.0", None).await;
    assert_eq!((status, body), (StatusCode::NO_CONTENT, Value::Null));
    assert_eq!(f.record_count(), before, "a delete writes no record");
    let answer = f.call("GET", &format!("/v1/assignors/{id}"), None).await;
    assert_error(&answer, StatusCode::NOT_FOUND, "unknown_module");
    let answer = f.call("DELETE", &format!("/v1/assignors/{id}"), None).await;
    assert_error(&answer, StatusCode::NOT_FOUND, "unknown_module");
    let answer = f.call("DELETE", "/v1/assignors/sticky", None).await;
    assert_error(&answer, StatusCode::CONFLICT, "builtin_assignor");

    // The deleted module can no longer be bound.
    config["assignor"] = json!(id);
    let answer = f.put_group(config).await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "unknown_assignor");
    f.assert_replay_matches().await;
}

#[tokio::test]
async fn bind_swaps_at_once_rollback_returns_and_bad_binds_change_nothing() {
    let f = fixture();
    let (status, module) = f.upload("mine", "1.0", sticky_bytes()).await;
    assert_eq!(status, StatusCode::CREATED, "{module}");
    let (status, _) = f.put_group(config_json(6)).await;
    assert_eq!(status, StatusCode::CREATED);
    let a = f.join("worker-a").await;
    let b = f.join("worker-b").await;
    f.assign().await;
    let mut a = f.beat(&a).await;
    let mut b = f.beat(&b).await;
    let path = format!("/v1/groups/{GROUP}/assignor");
    let rollback = format!("/v1/groups/{GROUP}/assignor/rollback");

    // Nothing to roll back to yet; bad binds change nothing.
    let before = f.snapshot().await;
    assert_error(
        &f.call("POST", &rollback, None).await,
        StatusCode::CONFLICT,
        "no_previous_binding",
    );
    assert_error(
        &f.call("PUT", &path, Some(json!({"module": "nope@1"})))
            .await,
        StatusCode::BAD_REQUEST,
        "unknown_assignor",
    );
    assert_error(
        &f.call("PUT", &path, Some(json!({"modul": "range"}))).await,
        StatusCode::BAD_REQUEST,
        "invalid_json",
    );
    assert_error(
        &f.call("PUT", &path, Some(json!({"module": ""}))).await,
        StatusCode::BAD_REQUEST,
        "unknown_assignor",
    );
    let too_many: serde_json::Map<String, Value> =
        (0..100).map(|i| (format!("k{i}"), json!("v"))).collect();
    assert_error(
        &f.call(
            "PUT",
            &path,
            Some(json!({"module": "range", "params": too_many})),
        )
        .await,
        StatusCode::BAD_REQUEST,
        "invalid_request",
    );
    assert_error(
        &f.call(
            "PUT",
            "/v1/groups/nope/assignor",
            Some(json!({"module": "range"})),
        )
        .await,
        StatusCode::NOT_FOUND,
        "unknown_group",
    );
    assert_error(
        &f.call("POST", "/v1/groups/nope/assignor/rollback", None)
            .await,
        StatusCode::NOT_FOUND,
        "unknown_group",
    );
    assert_eq!(f.snapshot().await, before);

    // A bind by name@version: the new target is asked at once (the clock
    // does not move), and members get there cooperatively.
    let (status, view) = f
        .call(
            "PUT",
            &path,
            Some(json!({"module": "mine@1.0", "params": {"k": "v"}})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{view}");
    assert_eq!(view["config"]["assignor"], "mine@1.0");
    assert_eq!(view["config"]["params"], json!({"k": "v"}));
    let bindings = view["bindings"].as_array().unwrap();
    assert_eq!(bindings.len(), 2, "{view}");
    assert_eq!(bindings[0]["module"], "sticky");
    assert_eq!(bindings[1]["module"], "mine@1.0");
    assert_eq!(bindings[1]["seq"], 2);
    let deadline = Instant::now() + Duration::from_secs(120);
    while f.runtime.calls_in_flight() > 0 {
        assert!(Instant::now() < deadline, "the assignor call never ended");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let view = f.view().await;
    assert_eq!(view["target_epoch"], view["group_epoch"], "{view}");
    for _ in 0..3 {
        a = f.beat(&a).await;
        b = f.beat(&b).await;
    }
    assert_eq!((a.active.len(), b.active.len()), (3, 3));
    assert_eq!(f.view().await["state"], "stable");

    // Bound: not deletable.
    assert_error(
        &f.call("DELETE", "/v1/assignors/mine@1.0", None).await,
        StatusCode::CONFLICT,
        "module_in_use",
    );

    // Rollback to sticky, then again back to mine@1.0 (like `cd -`).
    let (status, view) = f.call("POST", &rollback, None).await;
    assert_eq!(status, StatusCode::OK, "{view}");
    assert_eq!(view["config"]["assignor"], "sticky");
    assert_eq!(view["config"]["params"], json!({}));
    assert_eq!(view["bindings"][2]["rollback_to"], 1);
    let (status, view) = f.call("POST", &rollback, None).await;
    assert_eq!(status, StatusCode::OK, "{view}");
    assert_eq!(view["config"]["assignor"], "mine@1.0");
    assert_eq!(view["bindings"][3]["rollback_to"], 2);
    assert_eq!(f.view().await["bindings"].as_array().unwrap().len(), 4);

    // Back to a built-in; the module, no longer bound, can go; a rollback
    // to it is then refused and changes nothing.
    let (status, _) = f.call("PUT", &path, Some(json!({"module": "range"}))).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = f.call("DELETE", "/v1/assignors/mine@1.0", None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let before = f.snapshot().await;
    assert_error(
        &f.call("POST", &rollback, None).await,
        StatusCode::BAD_REQUEST,
        "unknown_assignor",
    );
    assert_eq!(f.snapshot().await, before);
    while f.runtime.calls_in_flight() > 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    f.assert_replay_matches().await;
}

#[tokio::test]
async fn preview_shows_moves_and_balance_and_changes_nothing() {
    let f = fixture();
    let (status, _) = f.put_group(config_json(6)).await;
    assert_eq!(status, StatusCode::CREATED);
    let path = format!("/v1/groups/{GROUP}/assignor/preview");

    // No member yet: nothing to assign to.
    let before = f.snapshot().await;
    let answer = f
        .call("POST", &path, Some(json!({"module": "range"})))
        .await;
    assert_error(&answer, StatusCode::CONFLICT, "empty_group");
    assert!(
        answer.1["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no members"),
        "{}",
        answer.1
    );
    assert_eq!(f.snapshot().await, before);

    let a = f.join("worker-a").await;
    let b = f.join("worker-b").await;
    f.assign().await;
    f.beat(&a).await;
    f.beat(&b).await;
    let c = f.join("worker-c").await;
    assert!(c.active.is_empty());

    let before = f.snapshot().await;
    let input_before = f
        .call("GET", &format!("/v1/groups/{GROUP}/assignor-input"), None)
        .await;
    let (status, preview) = f
        .call(
            "POST",
            &path,
            Some(json!({"module": "range", "params": {"k": "v"}})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{preview}");
    assert_eq!(preview["module"], "range");
    assert_eq!(preview["params"]["k"], "v");
    assert_eq!(preview["assignment"].as_array().unwrap().len(), 3);
    let raw_active: usize = preview["assignment"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["active"].as_array().unwrap().len())
        .sum();
    assert_eq!(raw_active, 6, "{preview}");
    assert_eq!(preview["balance_before"]["min"], 0, "{preview}");
    assert_eq!(preview["balance_before"]["max"], 3, "{preview}");
    assert_eq!(preview["balance_before"]["spread"], 3, "{preview}");
    assert_eq!(preview["balance_after"]["spread"], 0, "{preview}");
    assert_eq!(
        preview["balance_after"]["active"]["static:worker-c"], 2,
        "{preview}"
    );
    let moves = preview["moves"].as_array().unwrap();
    assert!(moves.len() >= 2, "{preview}");
    assert!(
        moves
            .iter()
            .filter(|m| m["to"] == "static:worker-c")
            .count()
            == 2,
        "{preview}"
    );
    assert_eq!(preview["learners_created"], json!([]), "{preview}");
    assert_eq!(preview["held_back"], json!([]), "{preview}");

    // Unknown module, unknown group, bad body: refused.
    assert_error(
        &f.call("POST", &path, Some(json!({"module": "nope@1"})))
            .await,
        StatusCode::BAD_REQUEST,
        "unknown_assignor",
    );
    assert_error(
        &f.call(
            "POST",
            "/v1/groups/nope/assignor/preview",
            Some(json!({"module": "range"})),
        )
        .await,
        StatusCode::NOT_FOUND,
        "unknown_group",
    );
    assert_error(
        &f.call("POST", &path, Some(json!({"modul": "range"}))).await,
        StatusCode::BAD_REQUEST,
        "invalid_json",
    );

    // Nothing changed: same views, same input, no record, no call.
    assert_eq!(f.snapshot().await, before);
    assert_eq!(
        f.call("GET", &format!("/v1/groups/{GROUP}/assignor-input"), None)
            .await,
        input_before
    );
    assert_eq!(f.runtime.calls_in_flight(), 0);
    f.assert_replay_matches().await;
}

#[tokio::test]
async fn preview_to_cold_members_creates_learners_and_holds_tasks_back() {
    let f = fixture();
    let mut config = config_json(4);
    config["learners"] = json!("host");
    config["max_learners"] = json!(10);
    f.put_group(config).await;
    let a = f.join("worker-a").await;
    f.assign().await;
    let a = f.beat(&a).await;
    assert_eq!(a.active.len(), 4);
    f.join("worker-b").await;

    let before = f.snapshot().await;
    let (status, preview) = f
        .call(
            "POST",
            &format!("/v1/groups/{GROUP}/assignor/preview"),
            Some(json!({"module": "range"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{preview}");
    // The raw answer gives b two tasks; the host keeps them on a and warms
    // them up on b first.
    let b_raw = preview["assignment"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["member"] == "static:worker-b")
        .unwrap();
    assert_eq!(b_raw["active"].as_array().unwrap().len(), 2, "{preview}");
    assert_eq!(preview["moves"], json!([]), "{preview}");
    let learners = preview["learners_created"].as_array().unwrap();
    assert_eq!(learners.len(), 2, "{preview}");
    assert!(learners.iter().all(|l| l["member"] == "static:worker-b"));
    let held = preview["held_back"].as_array().unwrap();
    assert_eq!(held.len(), 2, "{preview}");
    assert!(
        held.iter()
            .all(|h| h["owner"] == "static:worker-a" && h["wanted"] == "static:worker-b")
    );
    assert_eq!(
        preview["target"]["static:worker-b"]["learner"], b_raw["active"],
        "{preview}"
    );
    assert_eq!(preview["balance_after"]["active"]["static:worker-a"], 4);
    assert_eq!(preview["balance_after"]["spread"], 4);
    assert_eq!(f.snapshot().await, before);
}

#[tokio::test]
async fn a_failing_assignor_keeps_the_target_shows_in_the_view_and_backs_off_while_another_group_is_served()
 {
    let f = fixture();
    let (status, module) = f.upload("mine", "1.0", sticky_bytes()).await;
    assert_eq!(status, StatusCode::CREATED, "{module}");
    let id = module["id"].as_str().unwrap().to_owned();
    let mut config = config_json(6);
    config["assignor"] = json!("mine@1.0");
    let (status, _) = f.put_group(config).await;
    assert_eq!(status, StatusCode::CREATED);
    let a = f.join("worker-a").await;
    let b = f.join("worker-b").await;
    f.assign().await;
    let a = f.beat(&a).await;
    let b = f.beat(&b).await;
    assert_eq!((a.active.len(), b.active.len()), (3, 3));
    assert!(f.view().await.get("assignor_failures").is_none());

    // A second, healthy group.
    let (status, _) = f
        .call("PUT", "/v1/groups/healthy", Some(config_json(4)))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let healthy_join = |name: &'static str| {
        f.call(
            "POST",
            "/v1/groups/healthy/heartbeat",
            Some(json!({
                "member_id": "", "member_name": name, "member_epoch": 0, "topics": ["orders"],
            })),
        )
    };
    let (status, h1) = healthy_join("h1").await;
    assert_eq!(status, StatusCode::OK, "{h1}");

    // The module goes away under the bound group (as if its store broke):
    // every call of the group fails from now on.
    f.runtime.registry().unlist(&id).expect("listed");
    let _c = f.join("worker-c").await;
    f.assign().await;
    let view = f.view().await;
    assert!(
        view["target_epoch"].as_u64() < view["group_epoch"].as_u64(),
        "{view}"
    );
    let failures = &view["assignor_failures"];
    assert_eq!(failures["module"], "mine@1.0", "{view}");
    assert_eq!(failures["code"], "unknown_assignor", "{view}");
    assert!(failures["message"].as_str().unwrap().contains("mine@1.0"));
    assert_eq!(
        (failures["consecutive"].as_u64(), failures["total"].as_u64()),
        (Some(1), Some(1))
    );
    // The last good target stays: the members keep their tasks.
    let a2 = f.beat(&a).await;
    let b2 = f.beat(&b).await;
    assert_eq!((a2.active, b2.active), (a.active.clone(), b.active.clone()));

    // The healthy group is served meanwhile: its member got every task.
    let (status, h1) = f
        .call(
            "POST",
            "/v1/groups/healthy/heartbeat",
            Some(json!({
                "member_id": h1["member_id"], "member_epoch": h1["member_epoch"], "owned": h1["active"],
            })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{h1}");
    assert_eq!(h1["active"].as_array().unwrap().len(), 4, "{h1}");

    // Backoff: the first retry after one expansion timeout, the next after
    // two.
    f.assign().await;
    let consecutive = |view: Value| view["assignor_failures"]["consecutive"].as_u64().unwrap();
    assert_eq!(consecutive(f.view().await), 2);
    f.assign().await;
    assert_eq!(consecutive(f.view().await), 2, "backing off");
    f.assign().await;
    assert_eq!(consecutive(f.view().await), 3);
}

#[tokio::test]
async fn a_failing_preview_is_422_with_the_plugins_message_and_changes_nothing() {
    let f = fixture();
    f.put_group(config_json(4)).await;
    f.join("worker-a").await;
    let before = f.snapshot().await;
    let answer = f
        .call(
            "POST",
            &format!("/v1/groups/{GROUP}/assignor/preview"),
            Some(json!({"module": "learner-aware", "params": {"num_standby": "lots"}})),
        )
        .await;
    assert_error(&answer, StatusCode::UNPROCESSABLE_ENTITY, "assignor_failed");
    let message = answer.1["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("learner-aware") && message.contains("num_standby"),
        "{message}"
    );
    assert_eq!(f.snapshot().await, before);
}

// Authentication.

/// Every operation of the document as (method, path), with each path
/// parameter replaced by a value naming something that exists.
fn documented_operations() -> Vec<(String, String)> {
    let doc = serde_json::to_value(openapi()).unwrap();
    let mut operations = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            let concrete = path
                .replace("{group}", GROUP)
                .replace("{member}", "worker-a")
                .replace("{assignor}", "sticky");
            operations.push((method.to_uppercase(), concrete));
        }
    }
    operations
}

/// The routes open without the admin token.
const OPEN_ROUTES: &[(&str, &str)] = &[
    ("POST", "/v1/groups/{group}/heartbeat"),
    ("GET", "/v1/groups/{group}/coordinator"),
    ("GET", "/v1/openapi.json"),
    ("GET", "/healthz"),
    ("GET", "/metrics"),
];

fn is_open(method: &str, path: &str) -> bool {
    OPEN_ROUTES
        .iter()
        .any(|(m, p)| *m == method && p.replace("{group}", GROUP) == path)
}

impl Fixture {
    /// `method path` with an `Authorization` header of `authorization`
    /// (none if `None`) and a JSON body that would be accepted.
    async fn send_with(
        &self,
        method: &str,
        path: &str,
        authorization: Option<&str>,
    ) -> (StatusCode, Value, axum::http::HeaderMap) {
        let mut request = Request::builder().method(method).uri(path);
        if let Some(value) = authorization {
            request = request.header(header::AUTHORIZATION, value);
        }
        let body = if path.ends_with("/heartbeat") {
            json!({"member_id": "", "member_epoch": 0, "topics": ["orders"]}).to_string()
        } else if (method == "PUT" && path.ends_with("/assignor")) || path.ends_with("/preview") {
            json!({"module": "range"}).to_string()
        } else if method == "PUT" {
            config_json(6).to_string()
        } else {
            String::new()
        };
        let request = if path.starts_with("/v1/assignors") && method == "POST" {
            request
                .uri(format!("{path}?name=mine&version=1"))
                .header(header::CONTENT_TYPE, "application/wasm")
                .body(Body::from(sticky_bytes().to_vec()))
        } else if body.is_empty() {
            request.body(Body::empty())
        } else {
            request
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(body))
        };
        self.send_as_is(request.unwrap()).await
    }
}

#[tokio::test]
async fn every_admin_route_is_401_without_the_token_and_403_with_another() {
    let f = fixture();
    f.put_group(config_json(4)).await;
    f.join("worker-a").await;
    f.assign().await;
    let before = f.snapshot().await;
    let assignors = f.assignor_count().await;
    let operations = documented_operations();
    let admin: Vec<_> = operations
        .iter()
        .filter(|(method, path)| !is_open(method, path))
        .collect();
    assert_eq!(
        operations.len() - admin.len(),
        OPEN_ROUTES.len(),
        "every open route is documented: {operations:?}"
    );
    assert!(admin.len() >= 12, "{admin:?}");
    for (method, path) in &admin {
        for missing in [
            None,
            Some("Basic dXNlcjpwYXNz"),
            Some("Bearer"),
            Some("Bearer "),
            Some(ADMIN_TOKEN),
        ] {
            let (status, value, headers) = f.send_with(method, path, missing).await;
            assert_error(&(status, value), StatusCode::UNAUTHORIZED, "unauthorized");
            assert_eq!(
                headers[header::WWW_AUTHENTICATE],
                "Bearer",
                "{method} {path} {missing:?}"
            );
        }
        for wrong in [
            "Bearer wrong-token-0123456789".to_owned(),
            format!("Bearer {ADMIN_TOKEN}x"),
            format!("Bearer {}", &ADMIN_TOKEN[1..]),
        ] {
            let (status, value, headers) = f.send_with(method, path, Some(&wrong)).await;
            assert_error(&(status, value), StatusCode::FORBIDDEN, "forbidden");
            assert!(
                !headers.contains_key(header::WWW_AUTHENTICATE),
                "{method} {path}"
            );
        }
    }
    assert_eq!(f.snapshot().await, before, "nothing changed");
    assert_eq!(f.assignor_count().await, assignors, "nothing uploaded");

    // With the token (the scheme in any case), none is refused for it.
    for (method, path) in &admin {
        let right = format!("bearer {ADMIN_TOKEN}");
        let (status, value, _) = f.send_with(method, path, Some(&right)).await;
        assert!(
            status != StatusCode::UNAUTHORIZED && status != StatusCode::FORBIDDEN,
            "{method} {path}: {status} {value}"
        );
        if *method == "GET" {
            assert_eq!(status, StatusCode::OK, "{method} {path}: {value}");
        }
    }
}

#[tokio::test]
async fn the_open_routes_need_no_token_and_ignore_one() {
    let f = fixture();
    f.put_group(config_json(4)).await;
    for (method, path) in OPEN_ROUTES {
        let path = path.replace("{group}", GROUP);
        for authorization in [None, Some("Bearer wrong-token-0123456789")] {
            let (status, value, _) = f.send_with(method, &path, authorization).await;
            assert_eq!(status, StatusCode::OK, "{method} {path}: {value}");
        }
    }
    // An unknown route stays 404 without a token.
    let (status, value, _) = f.send_with("GET", "/v1/nothing", None).await;
    assert_error(&(status, value), StatusCode::NOT_FOUND, "not_found");
}

#[tokio::test]
async fn a_refused_request_reads_no_body() {
    let f = fixture();
    f.put_group(config_json(4)).await;
    let before = f.snapshot().await;
    // A body past the limit is not read: the token is checked first.
    let request = Request::builder()
        .method("PUT")
        .uri(format!("/v1/groups/{GROUP}"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(chunked_body(vec![b' '; 10 << 20]))
        .unwrap();
    let (status, value, _) = f.send_as_is(request).await;
    assert_error(&(status, value), StatusCode::UNAUTHORIZED, "unauthorized");
    assert_eq!(f.snapshot().await, before);
}

#[test]
fn the_document_names_the_token_each_route_needs() {
    let doc = serde_json::to_value(openapi()).unwrap();
    let schemes = &doc["components"]["securitySchemes"];
    for name in [super::auth::ADMIN_SCHEME, super::auth::MEMBER_SCHEME] {
        assert_eq!(schemes[name]["type"], "http", "{schemes}");
        assert_eq!(schemes[name]["scheme"], "bearer", "{schemes}");
    }
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            let method = method.to_uppercase();
            if is_open(&method, &path.replace("{group}", GROUP)) {
                assert!(
                    !operation["security"]
                        .as_array()
                        .is_some_and(|s| s.iter().any(|r| r.get("admin_token").is_some())),
                    "{method} {path} is open"
                );
                continue;
            }
            assert_eq!(
                operation["security"],
                json!([{"admin_token": []}]),
                "{method} {path}"
            );
            for status in ["401", "403"] {
                assert_eq!(
                    operation["responses"][status]["content"]["application/json"]["schema"]["$ref"],
                    "#/components/schemas/ErrorBody",
                    "{method} {path} {status}"
                );
            }
        }
    }
}

// Member tokens.

const MEMBER_TOKEN: &str = "member-token-of-orders-app";

impl Fixture {
    /// A heartbeat with `authorization` (none if `None`) as it is.
    async fn heartbeat_as(&self, body: Value, authorization: Option<&str>) -> (StatusCode, Value) {
        let mut request = Request::builder()
            .method("POST")
            .uri(format!("/v1/groups/{GROUP}/heartbeat"))
            .header(header::CONTENT_TYPE, "application/json");
        if let Some(value) = authorization {
            request = request.header(header::AUTHORIZATION, value);
        }
        let (status, value, headers) = self
            .send_as_is(request.body(Body::from(body.to_string())).unwrap())
            .await;
        if status == StatusCode::UNAUTHORIZED {
            assert_eq!(headers[header::WWW_AUTHENTICATE], "Bearer");
        }
        (status, value)
    }
}

fn join_body(name: &str) -> Value {
    json!({"member_id": "", "member_name": name, "member_epoch": 0, "topics": ["orders"]})
}

#[tokio::test]
async fn a_group_without_a_member_token_takes_any_heartbeat() {
    let f = fixture();
    f.put_group(config_json(4)).await;
    assert_eq!(f.view().await["member_token"], false);
    for authorization in [None, Some("Bearer anything-at-all-123"), Some("Basic abc")] {
        let (status, answer) = f.heartbeat_as(join_body("worker-a"), authorization).await;
        assert_eq!(status, StatusCode::OK, "{authorization:?}: {answer}");
    }
}

#[tokio::test]
async fn a_member_token_is_required_on_the_heartbeat_and_never_shown() {
    let f = fixture();
    let mut config = config_json(4);
    config["member_token"] = json!(MEMBER_TOKEN);
    let (status, view) = f.put_group(config).await;
    assert_eq!(status, StatusCode::CREATED, "{view}");
    assert_eq!(view["member_token"], true, "{view}");
    let digest = super::auth::digest_hex(MEMBER_TOKEN);
    let before = f.snapshot().await;
    // The token and its hash appear in no view.
    for path in [
        format!("/v1/groups/{GROUP}"),
        "/v1/groups".to_owned(),
        format!("/v1/groups/{GROUP}/assignor-input"),
    ] {
        let (status, answer) = f.call("GET", &path, None).await;
        assert_eq!(status, StatusCode::OK, "{path}: {answer}");
        let text = answer.to_string();
        assert!(
            !text.contains(&digest) && !text.contains(MEMBER_TOKEN),
            "{path}: {text}"
        );
        assert!(!text.contains("member_token_sha256"), "{path}: {text}");
    }

    // No token, another scheme: 401; another token, the admin token: 403.
    for missing in [None, Some("Basic abc"), Some("Bearer ")] {
        let answer = f.heartbeat_as(join_body("worker-a"), missing).await;
        assert_error(&answer, StatusCode::UNAUTHORIZED, "unauthorized");
    }
    for wrong in [
        "Bearer member-token-of-orders-apq".to_owned(),
        format!("Bearer {ADMIN_TOKEN}"),
    ] {
        let answer = f.heartbeat_as(join_body("worker-a"), Some(&wrong)).await;
        assert_error(&answer, StatusCode::FORBIDDEN, "forbidden");
    }
    assert_eq!(f.snapshot().await, before, "nothing changed");

    // The right token: the member joins and heartbeats.
    let bearer = format!("Bearer {MEMBER_TOKEN}");
    let (status, joined) = f.heartbeat_as(join_body("worker-a"), Some(&bearer)).await;
    assert_eq!(status, StatusCode::OK, "{joined}");
    let beat = json!({"member_id": joined["member_id"], "member_epoch": joined["member_epoch"]});
    let answer = f.heartbeat_as(beat.clone(), None).await;
    assert_error(&answer, StatusCode::UNAUTHORIZED, "unauthorized");
    let (status, answer) = f.heartbeat_as(beat, Some(&bearer)).await;
    assert_eq!(status, StatusCode::OK, "{answer}");

    // The hash survives a replay, and the view still hides it.
    f.assert_replay_matches().await;
    assert!(!f.view().await.to_string().contains(&digest));
}

#[tokio::test]
async fn a_put_without_member_token_keeps_it_and_null_removes_it() {
    let f = fixture();
    let mut config = config_json(4);
    config["member_token"] = json!(MEMBER_TOKEN);
    f.put_group(config).await;
    // A config change that does not name the token keeps it.
    let (status, view) = f.put_group(config_json(6)).await;
    assert_eq!(status, StatusCode::OK, "{view}");
    assert_eq!(view["member_token"], true, "{view}");
    // The config a view shows can be sent back as it is.
    let (status, view) = f.put_group(view["config"].clone()).await;
    assert_eq!(
        (status, &view["member_token"]),
        (StatusCode::OK, &json!(true))
    );
    let answer = f.heartbeat_as(join_body("worker-a"), None).await;
    assert_error(&answer, StatusCode::UNAUTHORIZED, "unauthorized");
    // A new token replaces the old one.
    let mut config = config_json(6);
    config["member_token"] = json!("a-brand-new-member-token");
    f.put_group(config).await;
    let old = format!("Bearer {MEMBER_TOKEN}");
    let answer = f.heartbeat_as(join_body("worker-a"), Some(&old)).await;
    assert_error(&answer, StatusCode::FORBIDDEN, "forbidden");
    let (status, _) = f
        .heartbeat_as(
            join_body("worker-a"),
            Some("Bearer a-brand-new-member-token"),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    // null removes it: the heartbeat is open again.
    let mut config = config_json(6);
    config["member_token"] = Value::Null;
    let (_, view) = f.put_group(config).await;
    assert_eq!(view["member_token"], false, "{view}");
    let (status, answer) = f.heartbeat_as(join_body("worker-b"), None).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    f.assert_replay_matches().await;
}

#[tokio::test]
async fn bad_member_tokens_and_a_direct_hash_are_400_and_change_nothing() {
    let f = fixture();
    let mut config = config_json(4);
    config["member_token"] = json!(MEMBER_TOKEN);
    f.put_group(config).await;
    let before = f.snapshot().await;
    for (token, code) in [
        (json!("short"), "invalid_request"),
        (json!(""), "invalid_request"),
        (json!("has spaces in the middle"), "invalid_request"),
        (json!("x".repeat(1025)), "invalid_request"),
        (json!(12345678901234567u64), "invalid_json"),
        (json!(true), "invalid_json"),
    ] {
        let mut config = config_json(8);
        config["member_token"] = token.clone();
        let answer = f.put_group(config).await;
        assert_error(&answer, StatusCode::BAD_REQUEST, code);
        assert!(
            answer.1["error"]["message"]
                .as_str()
                .unwrap()
                .contains("member_token"),
            "{token}: {}",
            answer.1
        );
    }
    // The hash is internal: setting it directly is refused, even a valid
    // one, and so is a new group with it.
    for group in [GROUP, "another"] {
        let mut config = config_json(8);
        config["member_token_sha256"] = json!(super::auth::digest_hex("attacker-chosen-token"));
        let answer = f
            .call("PUT", &format!("/v1/groups/{group}"), Some(config))
            .await;
        assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_json");
        assert!(
            answer.1["error"]["message"]
                .as_str()
                .unwrap()
                .contains("member_token_sha256"),
            "{}",
            answer.1
        );
    }
    // A good token with a bad config changes nothing either.
    let mut config = config_json(8);
    config["member_token"] = json!("a-brand-new-member-token");
    config["expansion_timeout_ms"] = json!(-1);
    let answer = f.put_group(config).await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_json");
    assert!(
        answer.1["error"]["message"]
            .as_str()
            .unwrap()
            .contains("expansion_timeout_ms"),
        "{}",
        answer.1
    );
    assert_eq!(f.snapshot().await, before, "nothing changed");
    let answer = f
        .heartbeat_as(
            join_body("worker-a"),
            Some("Bearer a-brand-new-member-token"),
        )
        .await;
    assert_error(&answer, StatusCode::FORBIDDEN, "forbidden");
}

#[test]
fn the_document_marks_the_member_token_optional_on_the_heartbeat() {
    let doc = serde_json::to_value(openapi()).unwrap();
    let heartbeat = &doc["paths"]["/v1/groups/{group}/heartbeat"]["post"];
    assert_eq!(
        heartbeat["security"],
        json!([{}, {"member_token": []}]),
        "{heartbeat}"
    );
    for status in ["401", "403"] {
        assert_eq!(
            heartbeat["responses"][status]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/ErrorBody",
            "{status}"
        );
    }
    let config = &doc["components"]["schemas"]["GroupConfigDoc"]["properties"];
    assert_eq!(config["member_token"]["writeOnly"], true, "{config}");
}

/// Past the number of params an assignor accepts, a config is refused, not
/// accepted and never assigned as one of 63 or 64 params would be (the host
/// adds `acceptable_recovery_lag` and `max_learners`, and the guest SDK
/// refuses an input of more than 64); at the limit, the group is assigned.
#[tokio::test(flavor = "multi_thread")]
async fn params_up_to_what_an_assignor_accepts_and_no_more() {
    let f = fixture();
    let params = |count: usize| -> Value {
        (0..count)
            .map(|i| (format!("p{i}"), json!("x")))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    for count in [63, 64] {
        let mut config = config_json(4);
        config["params"] = params(count);
        let answer = f.put_group(config).await;
        assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_request");
        assert!(
            answer.1["error"]["message"]
                .as_str()
                .unwrap()
                .contains("more than 62 params"),
            "{}",
            answer.1
        );
    }
    let mut config = config_json(4);
    config["params"] = params(1);
    config["params"]["p0"] = json!("x".repeat(1025));
    let answer = f.put_group(config).await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_request");
    let (_, groups) = f.call("GET", "/v1/groups", None).await;
    assert_eq!(groups, json!({"groups": []}), "nothing created");

    let mut config = config_json(4);
    config["params"] = params(62);
    config["params"]["p0"] = json!("x".repeat(1024));
    let (status, view) = f.put_group(config).await;
    assert_eq!(status, StatusCode::CREATED, "{view}");
    let member = f.join("a").await;
    f.assign().await;
    let member = f.beat(&member).await;
    assert_eq!(member.active.len(), 4, "{:?}", f.view().await);
}

/// Group names with control, format or bidirectional characters are refused
/// (CR and NUL would reach `/metrics` raw).
#[tokio::test]
async fn group_names_with_invisible_characters_are_refused() {
    let f = fixture();
    for name in [
        "a%0Db",
        "a%00b",
        "a%E2%80%AEb",
        "a%E2%81%A6b",
        "%EF%BB%BFa",
        "a%C2%85b",
    ] {
        let answer = f
            .call("PUT", &format!("/v1/groups/{name}"), Some(config_json(4)))
            .await;
        assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_request");
    }
    let (_, groups) = f.call("GET", "/v1/groups", None).await;
    assert_eq!(groups, json!({"groups": []}), "nothing created");
    let (status, view) = f
        .call(
            "PUT",
            "/v1/groups/caf%C3%A9-%E6%97%A5%E6%9C%AC",
            Some(config_json(4)),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "other Unicode is fine: {view}");
}

/// Member names, like group names, may not hold control, format or
/// bidirectional characters (a name shown as another one); the join is
/// refused and changes nothing.
#[tokio::test]
async fn member_names_with_invisible_characters_are_refused() {
    let f = fixture();
    f.put_group(config_json(4)).await;
    let before = f.snapshot().await;
    for name in [
        "a\rb",
        "a\0b",
        "a\u{202E}b",
        "a\u{2066}b",
        "\u{FEFF}a",
        "a\u{85}b",
    ] {
        let answer = f.heartbeat(join_body(name)).await;
        assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_request");
        assert!(
            answer.1["error"]["message"]
                .as_str()
                .unwrap()
                .contains("member name"),
            "{}",
            answer.1
        );
    }
    assert_eq!(f.snapshot().await, before, "nothing changed");
    f.join("café-日本").await;
}

/// A key twice in a JSON body is refused with 400 `invalid_json`, at any
/// depth, on every JSON body, and changes nothing (taken last-wins, a
/// `member_token` then `null` would remove the token).
#[tokio::test]
async fn duplicate_json_keys_are_refused() {
    let f = fixture();
    let mut config = config_json(4);
    config["member_token"] = json!("a-member-token-0123456789");
    let (status, view) = f.put_group(config).await;
    assert_eq!(status, StatusCode::CREATED, "{view}");
    let before = f.snapshot().await;
    let body = r#"{"topics": [{"name": "orders", "partitions": 4}], "assignor": "sticky",
                   "member_token": "a-member-token-0123456789", "member_token": null}"#;
    let answer = f.raw("PUT", &format!("/v1/groups/{GROUP}"), body).await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_json");
    assert!(
        answer.1["error"]["message"]
            .as_str()
            .unwrap()
            .contains("duplicate key \"member_token\""),
        "{}",
        answer.1
    );
    let nested = r#"{"topics": [{"name": "orders", "partitions": 4, "partitions": 8}],
                     "assignor": "sticky"}"#;
    let answer = f.raw("PUT", &format!("/v1/groups/{GROUP}"), nested).await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_json");
    let params = r#"{"topics": [{"name": "orders", "partitions": 4}], "assignor": "sticky",
                     "params": {"k": "1", "k": "2"}}"#;
    let answer = f.raw("PUT", &format!("/v1/groups/{GROUP}"), params).await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_json");
    let bind = r#"{"module": "range", "module": "sticky"}"#;
    let answer = f
        .raw("PUT", &format!("/v1/groups/{GROUP}/assignor"), bind)
        .await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_json");
    // The member route reads its body in one pass: serde's derive refuses
    // a field twice itself.
    let join = r#"{"member_id": "", "member_epoch": 0, "member_epoch": -1, "topics": ["orders"]}"#;
    let answer = f
        .raw("POST", &format!("/v1/groups/{GROUP}/heartbeat"), join)
        .await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_json");
    let message = answer.1["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("duplicate field `member_epoch`"),
        "{message}"
    );
    let owned = r#"{"member_id": "", "member_epoch": 0, "topics": ["orders"],
                    "owned": [], "owned": [["orders", 0]]}"#;
    let answer = f
        .raw("POST", &format!("/v1/groups/{GROUP}/heartbeat"), owned)
        .await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_json");
    assert_eq!(f.snapshot().await, before, "nothing changed");
}

/// The document says what the routes accept: a capacity up to 2^32 − 1 (not
/// `int32`), and the 415 of bind and preview.
#[test]
fn the_document_has_capacitys_range_and_the_415_of_bind_and_preview() {
    let doc = serde_json::to_value(super::openapi()).unwrap();
    let capacity = &doc["components"]["schemas"]["HeartbeatRequest"]["properties"]["capacity"];
    assert_eq!(capacity["format"], "int64", "{capacity}");
    assert_eq!(capacity["maximum"], json!(4294967295u64), "{capacity}");
    for (path, method) in [
        ("/v1/groups/{group}/assignor", "put"),
        ("/v1/groups/{group}/assignor/preview", "post"),
    ] {
        let responses = &doc["paths"][path][method]["responses"];
        assert!(responses["415"].is_object(), "{path}: {responses}");
    }
}

/// Cluster routing, with two nodes in process: `b` is a plain app on a
/// real listener serving every shard; `a` is a cluster app that serves
/// every shard but [`GROUP`]'s, whose directory names `b` its owner.
mod routing {
    use super::*;
    use crate::cluster::Directory;
    use crate::cluster::node::ClusterView;

    struct TwoNodes {
        a: Fixture,
        b: Fixture,
        b_url: String,
    }

    async fn serve(app: Router) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        url
    }

    /// `a` routes to `owner_url` for the group's shard.
    async fn two_nodes_with_owner_at(owner_url: Option<&str>) -> TwoNodes {
        let b = fixture();
        let b_url = serve(b.app.clone()).await;
        let mut a = fixture();
        let shard = a.runtime.shard_of(GROUP);
        assert!(a.runtime.unload_shard(u64::from(shard)).await.unwrap());
        let directory = Arc::new(Directory::new("a"));
        let mut view = ClusterView::default();
        view.nodes.insert("a".into(), "http://a.invalid".into());
        view.nodes
            .insert("b".into(), owner_url.map_or(b_url.clone(), str::to_owned));
        view.owners.insert(shard, "b".into());
        directory.update(view);
        a.app = super::super::cluster_app(
            a.runtime.clone(),
            super::super::AdminToken::new(ADMIN_TOKEN).unwrap(),
            directory,
        );
        TwoNodes { a, b, b_url }
    }

    #[tokio::test]
    async fn a_heartbeat_for_another_nodes_group_is_redirected_there() {
        let nodes = two_nodes_with_owner_at(None).await;
        let request = Request::builder()
            .method("POST")
            .uri(format!("/v1/groups/{GROUP}/heartbeat?x=1"))
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(
                json!({"member_id": "", "member_epoch": 0, "topics": ["orders"]}).to_string(),
            ))
            .unwrap();
        let (status, body, headers) = nodes.a.send_as_is(request).await;
        let location = format!("{}/v1/groups/{GROUP}/heartbeat?x=1", nodes.b_url);
        assert_eq!(status, StatusCode::TEMPORARY_REDIRECT, "{body}");
        assert_eq!(headers[header::LOCATION], location.as_str());
        assert_eq!(body["error"]["code"], "not_coordinator");
        assert_eq!(body["error"]["location"], location.as_str());
        assert_eq!(nodes.a.record_count(), 0);
        assert_eq!(nodes.b.record_count(), 0, "a redirect is not forwarded");
    }

    #[tokio::test]
    async fn an_admin_request_is_forwarded_to_the_owner_and_its_answer_passed_back() {
        let nodes = two_nodes_with_owner_at(None).await;
        let (status, body) = nodes.a.put_group(config_json(4)).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        assert_eq!(nodes.a.record_count(), 0, "a wrote nothing");
        assert!(nodes.b.record_count() > 0, "b did");
        // Read through either node, the same group.
        assert_eq!(nodes.a.view().await, nodes.b.view().await);
        // The list on a holds b's groups.
        let (status, list) = nodes.a.call("GET", "/v1/groups", None).await;
        assert_eq!(status, StatusCode::OK, "{list}");
        assert_eq!(list["groups"][0]["name"], GROUP, "{list}");
        // The owner's refusals come back as they are: no token, 401.
        let request = Request::builder()
            .method("GET")
            .uri(format!("/v1/groups/{GROUP}"))
            .body(Body::empty())
            .unwrap();
        let (status, body, headers) = nodes.a.send_as_is(request).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
        assert_eq!(headers[header::WWW_AUTHENTICATE], "Bearer");
        // A forwarded request is never forwarded again.
        let request = Request::builder()
            .method("GET")
            .uri(format!("/v1/groups/{GROUP}"))
            .header(super::super::routing::FORWARDED_BY_HEADER, "c")
            .body(Body::empty())
            .unwrap();
        let (status, body, headers) = nodes.a.send(request).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        assert_eq!(body["error"]["code"], "shard_unavailable");
        assert!(headers.contains_key(header::RETRY_AFTER));
    }

    #[tokio::test]
    async fn the_coordinator_route_names_the_owner() {
        let nodes = two_nodes_with_owner_at(None).await;
        let path = format!("/v1/groups/{GROUP}/coordinator");
        let request = Request::builder().uri(&path).body(Body::empty()).unwrap();
        let (status, body, _) = nodes.a.send_as_is(request).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let shard = nodes.a.runtime.shard_of(GROUP);
        assert_eq!(
            body,
            json!({"group": GROUP, "shard": shard, "node": "b", "url": nodes.b_url, "this_node": false})
        );
        // A group of a shard `a` serves: `a`.
        let request = Request::builder()
            .uri("/v1/groups/elsewhere-0/coordinator")
            .body(Body::empty())
            .unwrap();
        let other_shard = nodes.a.runtime.shard_of("elsewhere-0");
        assert_ne!(other_shard, shard);
        let (_, body, _) = nodes.a.send_as_is(request).await;
        assert_eq!(body["node"], "a");
        assert_eq!(body["this_node"], true);
        // One host coordinates everything itself.
        let request = Request::builder().uri(&path).body(Body::empty()).unwrap();
        let (status, body, _) = nodes.b.send_as_is(request).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(
            body,
            json!({"group": GROUP, "shard": shard, "this_node": true})
        );
    }

    #[tokio::test]
    async fn an_owner_that_does_not_answer_is_503_with_retry_after() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let dead = format!("http://{}", listener.local_addr().unwrap());
        drop(listener);
        let nodes = two_nodes_with_owner_at(Some(&dead)).await;
        let before = nodes.a.record_count();
        let request = Request::builder()
            .method("GET")
            .uri(format!("/v1/groups/{GROUP}"))
            .body(Body::empty())
            .unwrap();
        let (status, body, headers) = nodes.a.send(request).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        assert_eq!(body["error"]["code"], "coordinator_unreachable");
        assert!(
            body["error"]["message"].as_str().unwrap().contains("\"b\""),
            "{body}"
        );
        assert!(headers.contains_key(header::RETRY_AFTER));
        assert_eq!(nodes.a.record_count(), before);
    }
}
