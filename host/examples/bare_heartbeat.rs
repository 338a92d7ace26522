//! The ceiling of the heartbeat benchmark (host/benches/heartbeat_ratio.py):
//! an axum server with the member route `POST /v1/groups/{group}/heartbeat`
//! and nothing behind it. It parses a member's heartbeat body (the shape
//! the client library sends: ids, epoch, `owned` as `[topic, partition]`
//! and `[topic, first, last]` items, lags) and answers a body of the shape
//! and size assignd answers a settled member (its `owned` as `active`, the
//! other lists empty), so what it costs is what HTTP and JSON alone cost on
//! this machine. It owns no state and checks nothing of the protocol.
//!
//!     cargo build --release -p assignd --example bare_heartbeat
//!     target/release/examples/bare_heartbeat --listen 127.0.0.1:0
//!
//! It prints `listening on http://ADDR` (the real address) as
//! `assignd serve` does, and serves until killed.

use std::fmt;

use axum::extract::Path;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde::de::{Error as _, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What a steady answer tells a member, as a settled assignd group would
/// with the benchmark's config: the numbers only size the body.
const HEARTBEAT_INTERVAL_MS: u64 = 5_000;
const LEASE_MS: u64 = 300_000;

/// A member's heartbeat, as `assignd_client` sends it. Every field is
/// parsed for what parsing costs; the answer uses only some.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct HeartbeatRequest {
    member_id: String,
    #[serde(default)]
    member_name: Option<String>,
    member_epoch: i64,
    #[serde(default)]
    topics: Option<Vec<String>>,
    #[serde(default)]
    rack: Option<String>,
    #[serde(default)]
    capacity: Option<u32>,
    #[serde(default)]
    owned: Vec<TaskItem>,
    #[serde(default)]
    lags: Vec<(String, u32, u64)>,
    #[serde(default)]
    drain: bool,
    #[serde(default)]
    task_ranges: bool,
}

/// `[topic, partition]` (first == last) or `[topic, first, last]`.
struct TaskItem {
    topic: String,
    first: u32,
    last: u32,
}

impl<'de> Deserialize<'de> for TaskItem {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Item;
        impl<'de> Visitor<'de> for Item {
            type Value = TaskItem;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("[topic, partition] or [topic, first, last]")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<TaskItem, A::Error> {
                let topic: String = seq
                    .next_element()?
                    .ok_or_else(|| A::Error::invalid_length(0, &self))?;
                let first: u32 = seq
                    .next_element()?
                    .ok_or_else(|| A::Error::invalid_length(1, &self))?;
                let last: u32 = seq.next_element()?.unwrap_or(first);
                if seq.next_element::<serde::de::IgnoredAny>()?.is_some() {
                    return Err(A::Error::invalid_length(4, &self));
                }
                if first > last {
                    return Err(A::Error::custom("a range ends before it starts"));
                }
                Ok(TaskItem { topic, first, last })
            }
        }
        deserializer.deserialize_seq(Item)
    }
}

/// Every task of `items` one by one, or compact as ranges (as assignd
/// answers a request with `task_ranges`).
struct TaskList<'a> {
    items: &'a [TaskItem],
    ranges: bool,
}

impl Serialize for TaskList<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = serializer.serialize_seq(None)?;
        for item in self.items {
            if !self.ranges {
                for partition in item.first..=item.last {
                    seq.serialize_element(&(&item.topic, partition))?;
                }
            } else if item.first == item.last {
                seq.serialize_element(&(&item.topic, item.first))?;
            } else {
                seq.serialize_element(&(&item.topic, item.first, item.last))?;
            }
        }
        seq.end()
    }
}

/// The answer, field for field as assignd writes it.
#[derive(Serialize)]
struct HeartbeatResponse<'a> {
    member_id: &'a str,
    member_epoch: i64,
    heartbeat_interval_ms: u64,
    active: TaskList<'a>,
    revoking: TaskList<'a>,
    learner: TaskList<'a>,
    standby: TaskList<'a>,
    draining: bool,
    drained: bool,
    lease_ms: u64,
}

async fn heartbeat(Path(_group): Path<String>, Json(request): Json<HeartbeatRequest>) -> Response {
    let ranges = request.task_ranges;
    let empty = |ranges| TaskList { items: &[], ranges };
    let response = HeartbeatResponse {
        member_id: &request.member_id,
        member_epoch: request.member_epoch,
        heartbeat_interval_ms: HEARTBEAT_INTERVAL_MS,
        active: TaskList {
            items: &request.owned,
            ranges,
        },
        revoking: empty(ranges),
        learner: empty(ranges),
        standby: empty(ranges),
        draining: request.drain,
        drained: false,
        lease_ms: LEASE_MS,
    };
    Json(&response).into_response()
}

fn listen_address() -> Result<String, String> {
    let mut args = std::env::args().skip(1);
    let mut listen = "127.0.0.1:7071".to_string();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--listen" => listen = args.next().ok_or("--listen needs an ADDR")?,
            other => {
                return Err(format!(
                    "unknown argument {other:?}; usage: bare_heartbeat [--listen ADDR]"
                ));
            }
        }
    }
    Ok(listen)
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> std::process::ExitCode {
    let listen = match listen_address() {
        Ok(listen) => listen,
        Err(message) => {
            eprintln!("bare_heartbeat: {message}");
            return std::process::ExitCode::from(2);
        }
    };
    let listener = match tokio::net::TcpListener::bind(&listen).await {
        Ok(listener) => listener,
        Err(e) => {
            eprintln!("bare_heartbeat: cannot listen on {listen}: {e}");
            return std::process::ExitCode::from(1);
        }
    };
    let address = listener
        .local_addr()
        .expect("a bound listener has an address");
    println!("listening on http://{address}");
    let app = Router::new().route("/v1/groups/{group}/heartbeat", post(heartbeat));
    if let Err(e) = axum::serve(listener, app).await {
        eprintln!("bare_heartbeat: {e}");
        return std::process::ExitCode::from(1);
    }
    std::process::ExitCode::SUCCESS
}
