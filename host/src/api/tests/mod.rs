//! The API in process: the router that `assignd serve` runs, driven with
//! `tower::ServiceExt::oneshot`, over a runtime with a manual clock and a
//! sink that keeps every record. Every error mapping is checked, and every
//! refused request is checked to change nothing: the same group view and
//! not one record more. Successful flows replay the persisted records into
//! a fresh core and compare: the sink saw them in apply order.
//!
//! One file per concern; this one holds what they share: the fixture (an
//! app over a runtime with a manual clock and a recording sink) and the
//! helpers that send requests and check answers.

mod assignors;
mod auth;
mod bindings;
mod console;
mod errors;
mod groups_and_members;
mod load_trigger;
mod member_tokens;
mod openapi;
mod preview;
mod refused_requests;
mod routing;

use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use serde_json::{Value, json};
use tower::ServiceExt;

use super::wire::{ErrorCode, GroupConfigDoc, HeartbeatResponseBody};
use super::{ApiError, app, openapi};
use crate::plugins::{EngineConfig, Limits, PluginEngine};
use crate::protocol::core::{Coordinator, MEMBERS_PER_GROUP_MAX, ProtocolError};
use crate::protocol::group::{GroupConfig, Record, Task, TopicConfig};
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
