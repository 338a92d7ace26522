//! The heartbeat's whole HTTP stack in process, against a bare handler:
//! what assignd's request path costs per request over what routing and
//! JSON alone cost, without sockets, so that the figure holds still on a
//! small shared machine (host/benches/heartbeat_ratio.py measures the same
//! ratio over sockets with wrk, which shares the cores with the server).
//!
//! ```text
//! cargo bench -p assignd --bench http_stack
//! cargo bench -p assignd --bench http_stack -- http-stack/assignd/steady/64-shards
//! ```
//!
//! - `http-stack/bare/steady`: a `POST /v1/groups/{group}/heartbeat`
//!   through an axum router with the bare handler only
//!   (host/examples/bare_heartbeat/handler.rs, the ceiling that
//!   heartbeat_ratio.py serves): it parses the body and answers one of the
//!   size assignd answers, with assignd's own wire types.
//! - `http-stack/assignd/steady/64-shards` and `.../1-shard`: the same
//!   requests through `assignd::api::app`, the router `assignd serve` runs
//!   with every layer (request timer, trace span, panic catcher, body
//!   limit, the heartbeat's large-body admission, the member credential),
//!   over a runtime of 64 shards (serve's default) or of 1.
//! - `http-stack/assignd/core-only`: the same heartbeats as the core's
//!   input, straight to `Runtime::heartbeat` on the 64-shard runtime: the
//!   shard's lock, lateness, admission and the protocol core; no HTTP, no
//!   JSON. The HTTP ids less this one is what the layers and JSON cost.
//!
//! Every id cycles through the steady heartbeats of 1,000 members (100
//! groups × 10 members × 100 tasks of one topic), as heartbeat_ratio.py's
//! wrk script does: each member's id, epoch and owned tasks (as ranges,
//! with `task_ranges`), written as the client library writes them. The
//! members are settled through the app itself, as that script's `settle`
//! does: groups configured, members joined, every member heartbeating
//! (reporting lag 0 on its learner tasks) until every group is stable and
//! every member holds its share at an unchanged epoch. The bare handler
//! gets the 64-shard runtime's bodies. Every answer is checked to be 200
//! (core-only: `Ok`), and every HTTP answer's body is read to the end. The
//! request is built in the timed loop in every HTTP id alike, from a
//! prebuilt URI and body (what hyper hands the router).
//!
//! The runtimes run as `assignd serve` runs them: the real clock
//! (`Clock::monotonic`), every shard's timers ticking, serve's log filter
//! (RUST_LOG, else `warn`) and its metrics recorder. Records go to a
//! `CountingSink` in memory: a steady heartbeat writes none. A host is
//! settled only when one of its ids runs, so a filtered run settles only
//! what it measures (the bare id needs the 64-shard host's bodies).
//!
//! How it is timed: a sample runs its whole batch of requests inside one
//! `block_on` on a multi-thread tokio runtime of 2 workers
//! (`iter_custom`, as criterion's `to_async` does). The timed loop is the
//! request path alone, on the bench's thread, as a server's worker runs
//! it: no wake-up and no thread hand-over per request, which a `block_on`
//! per iteration would add (microseconds of park and unpark, more than
//! some layers cost), while the shards' timer tasks run on the workers as
//! they do under serve. The figures are CPU time of the request path,
//! allocated with jemalloc as the `assignd` binary allocates.

use std::cell::OnceCell;
use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "../examples/bare_heartbeat/handler.rs"]
mod bare_handler;

use assignd::api::wire::{
    GroupList, GroupState, HeartbeatRequest, HeartbeatResponseBody, LagRow, heartbeat_request,
};
use assignd::api::{AdminToken, app};
use assignd::plugins::{EngineConfig, Limits, PluginEngine};
use assignd::protocol::core::Heartbeat;
use assignd::protocol::group::Task;
use assignd::protocol::shard::SHARD_COUNT_DEFAULT;
use assignd::runtime::{Clock, CountingSink, Runtime, RuntimeConfig, TICK_INTERVAL_MS};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{Method, Request, StatusCode, Uri, header};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use tower::ServiceExt;

/// The allocator of the `assignd` binary and of the bare handler's.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const GROUPS: usize = 100;
const MEMBERS_PER_GROUP: usize = 10;
const PARTITIONS: u32 = 100;
const TOPIC: &str = "orders";
/// heartbeat_ratio.py's group config: no member expires while settling.
const SESSION_TIMEOUT_MS: u64 = 300_000;
const HEARTBEAT_INTERVAL_MS: u64 = 5_000;
const ADMIN_TOKEN: &str = "http-stack-bench-admin-token-0123456789";
const SEED: u64 = 32;
/// The tokio runtime's workers: the cores of the machine the figures are
/// quoted for.
const WORKERS: usize = 2;
const SETTLE_TIME_MAX: Duration = Duration::from_secs(300);
/// Between two sweeps of heartbeats while settling: the groups' expansion
/// timeouts and assignor calls run on the clock, not on heartbeats.
const SWEEP_PAUSE: Duration = Duration::from_millis(500);

/// One member as the settling sweeps know it.
struct Member {
    group: String,
    id: String,
    epoch: i64,
    owned: Vec<Task>,
    learner: Vec<Task>,
    /// Its last answer changed nothing and it holds its share.
    steady: bool,
}

/// One member's steady heartbeat, as a request and as the core's input.
struct Beat {
    uri: Uri,
    body: Bytes,
    input: Heartbeat,
}

/// A settled runtime and its app, and its members' steady heartbeats.
struct Host {
    runtime: Arc<Runtime>,
    app: Router,
    beats: Vec<Beat>,
}

fn heartbeat_path(group: &str) -> String {
    format!("/v1/groups/{group}/heartbeat")
}

/// A member's heartbeat as `assignd_client` writes it: its id and epoch,
/// the tasks it holds as ranges, lag 0 on its learner tasks.
fn heartbeat_body(member: &Member) -> HeartbeatRequest {
    HeartbeatRequest {
        member_id: member.id.clone(),
        member_name: None,
        member_epoch: member.epoch,
        topics: (member.epoch == assignd_wire::JOIN_EPOCH).then(|| vec![TOPIC.to_owned()]),
        rack: None,
        capacity: Some(1),
        owned: Some(member.owned.clone()),
        lags: Some(
            member
                .learner
                .iter()
                .map(|task| LagRow(task.topic.clone(), task.partition, 0))
                .collect(),
        ),
        drain: false,
        task_ranges: true,
        endpoint: None,
        metadata: None,
        ..HeartbeatRequest::default()
    }
}

/// Sends `request` through `app`; its status and whole body.
async fn send(app: &Router, request: Request<Body>) -> (StatusCode, Bytes) {
    let response = app.clone().oneshot(request).await.expect("infallible");
    let status = response.status();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("a body in memory");
    (status, body)
}

/// An admin request with the admin token.
fn admin_request(method: Method, path: &str, body: Body) -> Request<Body> {
    Request::builder()
        .method(method)
        .uri(path)
        .header(header::AUTHORIZATION, format!("Bearer {ADMIN_TOKEN}"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(body)
        .expect("a valid request")
}

fn json_request(uri: Uri, body: Bytes) -> Request<Body> {
    Request::post(uri)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body))
        .expect("a valid request")
}

async fn configure_groups(app: &Router) -> Vec<String> {
    let config = json!({
        "topics": [{"name": TOPIC, "partitions": PARTITIONS}],
        "session_timeout_ms": SESSION_TIMEOUT_MS,
        "heartbeat_interval_ms": HEARTBEAT_INTERVAL_MS,
    })
    .to_string();
    let groups: Vec<String> = (0..GROUPS).map(|g| format!("group-{g:03}")).collect();
    for group in &groups {
        let request = admin_request(
            Method::PUT,
            &format!("/v1/groups/{group}"),
            config.clone().into(),
        );
        let (status, body) = send(app, request).await;
        assert!(status.is_success(), "PUT {group}: {status} {body:?}");
    }
    groups
}

/// Sends every member's heartbeat once and takes in its answer.
async fn sweep(app: &Router, members: &mut [Member]) {
    let share = PARTITIONS as usize / MEMBERS_PER_GROUP;
    for member in members {
        let body = serde_json::to_vec(&heartbeat_body(member)).expect("JSON");
        let uri = heartbeat_path(&member.group).parse().expect("a valid path");
        let (status, answer) = send(app, json_request(uri, body.into())).await;
        if status == StatusCode::TOO_MANY_REQUESTS {
            // A join past the group's join rate: the next sweep retries.
            continue;
        }
        assert_eq!(status, StatusCode::OK, "heartbeat: {answer:?}");
        let answer: HeartbeatResponseBody = serde_json::from_slice(&answer).expect("an answer");
        let (sent_epoch, sent_owned) = (member.epoch, std::mem::take(&mut member.owned));
        member.id = answer.member_id;
        member.epoch = i64::try_from(answer.member_epoch).expect("an epoch");
        // The member releases revoking tasks at once: it holds its active ones.
        member.owned = sorted(answer.active);
        member.learner = sorted(answer.learner);
        member.steady = member.epoch == sent_epoch
            && member.owned == sent_owned
            && member.owned.len() == share
            && answer.revoking.is_empty()
            && member.learner.is_empty();
    }
}

fn sorted(mut tasks: Vec<Task>) -> Vec<Task> {
    tasks.sort();
    tasks
}

async fn every_group_stable(app: &Router) -> bool {
    let (status, body) = send(app, admin_request(Method::GET, "/v1/groups", Body::empty())).await;
    assert_eq!(status, StatusCode::OK, "GET /v1/groups: {body:?}");
    let listing: GroupList = serde_json::from_slice(&body).expect("a group list");
    listing.groups.len() == GROUPS
        && listing
            .groups
            .iter()
            .all(|g| g.state == GroupState::Stable && g.members == MEMBERS_PER_GROUP)
}

/// Configures the groups, joins their members and heartbeats them until
/// every group is stable and every member steady; returns the members.
async fn settle(app: &Router) -> Vec<Member> {
    let mut members: Vec<Member> = configure_groups(app)
        .await
        .into_iter()
        .flat_map(|group| std::iter::repeat_n(group, MEMBERS_PER_GROUP))
        .map(|group| Member {
            group,
            id: String::new(),
            epoch: assignd_wire::JOIN_EPOCH,
            owned: Vec::new(),
            learner: Vec::new(),
            steady: false,
        })
        .collect();
    let started = Instant::now();
    loop {
        sweep(app, &mut members).await;
        if every_group_stable(app).await && members.iter().all(|m| m.steady) {
            break;
        }
        assert!(
            started.elapsed() < SETTLE_TIME_MAX,
            "not settled after {SETTLE_TIME_MAX:?}: {} members not steady",
            members.iter().filter(|m| !m.steady).count()
        );
        tokio::time::sleep(SWEEP_PAUSE).await;
    }
    eprintln!(
        "{} members in {GROUPS} groups settled in {:.1} s",
        members.len(),
        started.elapsed().as_secs_f64()
    );
    members
}

fn steady_beats(members: &[Member]) -> Vec<Beat> {
    members
        .iter()
        .map(|member| {
            let body = heartbeat_body(member);
            Beat {
                uri: heartbeat_path(&member.group).parse().expect("a valid path"),
                body: serde_json::to_vec(&body).expect("JSON").into(),
                input: heartbeat_request(member.group.clone(), body),
            }
        })
        .collect()
}

/// One engine for every host; compiled built-ins are cached across runs
/// in the bench's scratch folder.
fn engine() -> Arc<PluginEngine> {
    let cache_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("http_stack-engine-cache");
    Arc::new(
        PluginEngine::new(EngineConfig {
            cache_dir: Some(cache_dir),
            ..EngineConfig::default()
        })
        .expect("the wasm engine"),
    )
}

/// A runtime of `shard_count` shards as `assignd serve` runs one (in
/// memory), its app, and its members settled.
fn start_host(rt: &tokio::runtime::Runtime, engine: Arc<PluginEngine>, shard_count: u32) -> Host {
    rt.block_on(async {
        let runtime = Runtime::new(
            RuntimeConfig {
                seed: SEED,
                limits: Limits::default(),
                admission: Default::default(),
                shard_count,
                unreached_grace_ms: 0,
            },
            Clock::monotonic(),
            Arc::new(CountingSink::default()),
            engine,
        );
        runtime.spawn_ticker(Duration::from_millis(TICK_INTERVAL_MS));
        let admin = AdminToken::new(ADMIN_TOKEN).expect("a valid token");
        let app = app(runtime.clone(), admin);
        let members = settle(&app).await;
        eprintln!("{shard_count} shards: settled");
        Host {
            runtime,
            app,
            beats: steady_beats(&members),
        }
    })
}

/// One steady heartbeat through `app`, checked and read to the end.
async fn heartbeat_over_http(app: &Router, beat: &Beat) -> Bytes {
    let (status, body) = send(app, json_request(beat.uri.clone(), beat.body.clone())).await;
    assert_eq!(status, StatusCode::OK, "{body:?}");
    body
}

/// Benchmarks `id`: the heartbeats of `target` in turn through its app,
/// cycling on from sample to sample.
fn bench_http<'a>(
    c: &mut Criterion,
    id: &str,
    rt: &tokio::runtime::Runtime,
    target: impl Fn() -> (&'a Router, &'a [Beat]),
) {
    let mut next = 0;
    c.bench_function(id, |b| {
        let (app, beats) = target();
        b.iter_custom(|iters| {
            rt.block_on(async {
                let started = Instant::now();
                for _ in 0..iters {
                    black_box(heartbeat_over_http(app, &beats[next]).await);
                    next = (next + 1) % beats.len();
                }
                started.elapsed()
            })
        })
    });
}

/// Benchmarks `id`: the heartbeats of `host` in turn, straight to its
/// runtime, cycling on from sample to sample.
fn bench_core<'a>(
    c: &mut Criterion,
    id: &str,
    rt: &tokio::runtime::Runtime,
    host: impl Fn() -> &'a Host,
) {
    let mut next = 0;
    c.bench_function(id, |b| {
        let host = host();
        b.iter_custom(|iters| {
            rt.block_on(async {
                let started = Instant::now();
                for _ in 0..iters {
                    let beat = &host.beats[next];
                    black_box(host.runtime.heartbeat(&beat.input, None).await).expect("steady");
                    next = (next + 1) % host.beats.len();
                }
                started.elapsed()
            })
        })
    });
}

/// Logs as `assignd serve` logs: RUST_LOG, else warnings and worse, so
/// the request span costs what it costs there.
fn init_logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter)
        .init();
}

/// The answers' sizes for one member, bare and assignd's: the bare
/// handler answers a body of the same shape and size.
fn print_answer_sizes(rt: &tokio::runtime::Runtime, bare: &Router, host: &Host) {
    let beat = &host.beats[0];
    let (bare, assignd) = rt.block_on(async {
        (
            heartbeat_over_http(bare, beat).await,
            heartbeat_over_http(&host.app, beat).await,
        )
    });
    eprintln!(
        "one steady heartbeat: request {} bytes; answer bare {} bytes, assignd {} bytes",
        beat.body.len(),
        bare.len(),
        assignd.len()
    );
}

fn http_stack(c: &mut Criterion) {
    init_logs();
    assignd::metric_catalog::install();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let engine = engine();
    let bare = bare_handler::router();
    let sharded_host = OnceCell::new();
    let sharded = || {
        sharded_host.get_or_init(|| {
            let host = start_host(&rt, engine.clone(), SHARD_COUNT_DEFAULT);
            print_answer_sizes(&rt, &bare, &host);
            host
        })
    };
    bench_http(c, "http-stack/bare/steady", &rt, || {
        (&bare, &sharded().beats[..])
    });
    let id = format!("http-stack/assignd/steady/{SHARD_COUNT_DEFAULT}-shards");
    bench_http(c, &id, &rt, || {
        let host = sharded();
        (&host.app, &host.beats[..])
    });
    bench_core(c, "http-stack/assignd/core-only", &rt, sharded);
    // Its timers stop: only the measured host ticks.
    if let Some(host) = sharded_host.get() {
        host.runtime.stop_timers();
    }
    let one_shard = OnceCell::new();
    bench_http(c, "http-stack/assignd/steady/1-shard", &rt, || {
        let host = one_shard.get_or_init(|| start_host(&rt, engine.clone(), 1));
        (&host.app, &host.beats[..])
    });
}

criterion_group!(benches, http_stack);
criterion_main!(benches);
