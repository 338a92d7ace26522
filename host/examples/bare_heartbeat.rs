//! The ceiling of the heartbeat benchmark (host/benches/heartbeat_ratio.py):
//! an axum server with the member route `POST /v1/groups/{group}/heartbeat`
//! and nothing behind it. It parses a member's heartbeat body and answers
//! a body of the shape and size assignd answers a settled member (its
//! `owned` as `active`, the other lists empty), both with assignd's own
//! wire types, so what it costs is what HTTP and JSON alone cost on this
//! machine. It owns no state and checks nothing of the protocol.
//!
//!     cargo build --release -p assignd --example bare_heartbeat
//!     target/release/examples/bare_heartbeat --listen 127.0.0.1:0
//!
//! It prints `listening on http://ADDR` (the real address) as
//! `assignd serve` does, and serves until killed.

use assignd_wire::{HeartbeatRequest, HeartbeatResponseBody};
use axum::extract::Path;
use axum::routing::post;
use axum::{Json, Router};

/// What a steady answer tells a member, as a settled assignd group would
/// with the benchmark's config: the numbers only size the body.
const HEARTBEAT_INTERVAL_MS: u64 = 5_000;
const LEASE_MS: u64 = 300_000;

/// Parses the request and writes the answer with assignd's own wire types
/// (`assignd-wire`: the same serde code, the same ranges reader and
/// writer), so the ceiling costs what assignd's JSON costs.
async fn heartbeat(
    Path(_group): Path<String>,
    Json(request): Json<HeartbeatRequest>,
) -> Json<HeartbeatResponseBody> {
    Json(HeartbeatResponseBody {
        member_epoch: u64::try_from(request.member_epoch).unwrap_or(0),
        member_id: request.member_id,
        heartbeat_interval_ms: HEARTBEAT_INTERVAL_MS,
        active: request.owned.unwrap_or_default(),
        revoking: Vec::new(),
        learner: Vec::new(),
        standby: Vec::new(),
        draining: request.drain,
        drained: false,
        lease_ms: Some(LEASE_MS),
        unreached_lease_ms: Some(LEASE_MS),
        unreached_flight_ms: Some(LEASE_MS),
        task_ranges: request.task_ranges,
    })
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
