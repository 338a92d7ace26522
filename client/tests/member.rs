//! The heartbeat loop against a fake host: an axum server whose answers
//! each test scripts, recording every request it receives.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use assignd_client::wire::{HeartbeatRequest, HeartbeatResponseBody, LagRow};
use assignd_client::{Assignment, ClientError, Event, Member, MemberConfig, NoLags, Task};
use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};

/// How long any wait in these tests may take before it fails.
const DEADLINE: Duration = Duration::from_secs(10);

/// What the fake host answers.
enum Reply {
    Ok(HeartbeatResponseBody),
    /// A 200 answer as raw JSON (with fields newer than `assignd-wire`'s
    /// body).
    Json(Value),
    /// A 200 answer as raw JSON, after which the node dies: it stops
    /// listening and closes the connection, so every later connection is
    /// refused (as after kill -9).
    JsonThenDie(Value),
    Error(u16, &'static str),
    /// An error answer with `Retry-After: SECONDS`.
    ErrorRetryAfter(u16, &'static str, u64),
    /// `307 Temporary Redirect` to this URL (a cluster node that does not
    /// coordinate the group).
    Redirect(String),
    /// Answer only after this long: past the client's request timeout, the
    /// answer is lost (the host did process the request).
    Late(Duration, HeartbeatResponseBody),
}

type Script = Box<dyn FnMut(usize, &HeartbeatRequest) -> Reply + Send>;

struct Inner {
    script: Mutex<Script>,
    requests: Mutex<Vec<(String, Value)>>,
    /// The `Authorization` header of each request, in order.
    authorizations: Mutex<Vec<Option<String>>>,
    arrived: Notify,
    /// The task accepting connections, until the node dies.
    listening: Mutex<Option<tokio::task::JoinHandle<()>>>,
    address: std::net::SocketAddr,
    /// The node's port once it died: held, so that it refuses connections
    /// and no other test's listener takes it.
    gone: Mutex<Option<DeadNode>>,
}

struct FakeHost {
    url: String,
    inner: Arc<Inner>,
}

async fn heartbeat(
    State(inner): State<Arc<Inner>>,
    Path(group): Path<String>,
    headers: axum::http::HeaderMap,
    body: String,
) -> Response {
    let authorization = headers
        .get(axum::http::header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap().to_owned());
    inner.authorizations.lock().unwrap().push(authorization);
    let raw: Value = serde_json::from_str(&body).expect("the client sends JSON");
    let request: HeartbeatRequest =
        serde_json::from_value(raw.clone()).expect("the client sends a heartbeat");
    let reply = {
        let mut requests = inner.requests.lock().unwrap();
        requests.push((group, raw));
        let index = requests.len() - 1;
        (inner.script.lock().unwrap())(index, &request)
    };
    inner.arrived.notify_waiters();
    match reply {
        Reply::Ok(answer) => axum::Json(answer).into_response(),
        Reply::Json(answer) => axum::Json(answer).into_response(),
        Reply::JsonThenDie(answer) => {
            // Not listening before the answer leaves: the member's next
            // connection is refused, never half-accepted.
            let listening = inner.listening.lock().unwrap().take();
            if let Some(listening) = listening {
                listening.abort();
                let _ = listening.await;
                *inner.gone.lock().unwrap() = Some(DeadNode::at(inner.address));
            }
            (
                [(axum::http::header::CONNECTION, "close")],
                axum::Json(answer),
            )
                .into_response()
        }
        Reply::Late(delay, answer) => {
            tokio::time::sleep(delay).await;
            axum::Json(answer).into_response()
        }
        Reply::Error(status, code) => (
            StatusCode::from_u16(status).unwrap(),
            axum::Json(json!({"error": {"code": code, "message": format!("fake {code}")}})),
        )
            .into_response(),
        Reply::Redirect(location) => (
            StatusCode::TEMPORARY_REDIRECT,
            [(axum::http::header::LOCATION, location.clone())],
            axum::Json(json!({"error": {
                "code": "not_coordinator",
                "message": "fake redirect",
                "location": location,
            }})),
        )
            .into_response(),
        Reply::ErrorRetryAfter(status, code, seconds) => (
            StatusCode::from_u16(status).unwrap(),
            [(axum::http::header::RETRY_AFTER, seconds.to_string())],
            axum::Json(json!({"error": {"code": code, "message": format!("fake {code}")}})),
        )
            .into_response(),
    }
}

impl FakeHost {
    async fn start(script: impl FnMut(usize, &HeartbeatRequest) -> Reply + Send + 'static) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let inner = Arc::new(Inner {
            script: Mutex::new(Box::new(script)),
            requests: Mutex::new(Vec::new()),
            authorizations: Mutex::new(Vec::new()),
            arrived: Notify::new(),
            listening: Mutex::new(None),
            address,
            gone: Mutex::new(None),
        });
        let app = Router::new()
            .route("/v1/groups/{group}/heartbeat", post(heartbeat))
            .with_state(inner.clone());
        let url = format!("http://{address}");
        let listening = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        *inner.listening.lock().unwrap() = Some(listening);
        FakeHost { url, inner }
    }

    fn config(&self) -> MemberConfig {
        MemberConfig::new(&self.url, "billing", ["orders"])
            .with_request_timeout(Duration::from_millis(300))
    }

    /// The `index`th request body (from 0), waiting for it to arrive.
    async fn request(&self, index: usize) -> Value {
        tokio::time::timeout(DEADLINE, async {
            loop {
                let arrived = self.inner.arrived.notified();
                if let Some((group, body)) = self.inner.requests.lock().unwrap().get(index) {
                    assert_eq!(group, "billing");
                    return body.clone();
                }
                arrived.await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("request {index} never arrived"))
    }

    /// The first request at or after `from` for which `matches` holds.
    async fn request_where(&self, from: usize, matches: impl Fn(&Value) -> bool) -> (usize, Value) {
        let mut index = from;
        loop {
            let body = self.request(index).await;
            if matches(&body) {
                return (index, body);
            }
            index += 1;
        }
    }

    fn count(&self) -> usize {
        self.inner.requests.lock().unwrap().len()
    }
}

fn tasks(ps: &[u32]) -> Vec<Task> {
    ps.iter().map(|&p| Task::new("orders", p)).collect()
}

fn set(ps: &[u32]) -> BTreeSet<Task> {
    ps.iter().map(|&p| Task::new("orders", p)).collect()
}

fn answer(member_id: &str, epoch: u64, active: &[u32]) -> HeartbeatResponseBody {
    HeartbeatResponseBody {
        member_id: member_id.into(),
        member_epoch: epoch,
        heartbeat_interval_ms: 20,
        active: tasks(active),
        ..HeartbeatResponseBody::default()
    }
}

async fn next_event(events: &mut mpsc::Receiver<Event>) -> Event {
    tokio::time::timeout(DEADLINE, events.recv())
        .await
        .expect("no event in time")
        .expect("the loop ended")
}

/// The next event that is not a transient error.
async fn next_non_error(events: &mut mpsc::Receiver<Event>) -> Event {
    loop {
        match next_event(events).await {
            Event::Error(_) => continue,
            event => return event,
        }
    }
}

async fn assert_ended(events: &mut mpsc::Receiver<Event>) {
    loop {
        match tokio::time::timeout(DEADLINE, events.recv()).await {
            Ok(None) => return,
            Ok(Some(Event::Error(_))) => continue,
            Ok(Some(event)) => panic!("expected the loop to end, got {event:?}"),
            Err(_) => panic!("the loop did not end in time"),
        }
    }
}

/// The member id a join sent: one the member chose (`c-`, 32 hex digits
/// drawn once per member, `-` and the number of the join), never empty.
fn chosen_id(join: &Value) -> String {
    let id = join["member_id"].as_str().expect("a member id").to_owned();
    let rest = id.strip_prefix("c-").unwrap_or_else(|| panic!("{id:?}"));
    let (hex, n) = rest.split_once('-').unwrap_or_else(|| panic!("{id:?}"));
    assert!(
        hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()),
        "{id:?}"
    );
    assert!(n.parse::<u64>().is_ok_and(|n| n >= 1), "{id:?}");
    id
}

fn owned(body: &Value) -> Value {
    // Ranges (`[topic, first, last]`) read back as their tasks.
    let request: HeartbeatRequest =
        serde_json::from_value(body.clone()).expect("the client sends a heartbeat");
    json!(request.owned)
}

#[tokio::test]
async fn a_join_carries_topics_name_and_capacity_and_later_beats_do_not() {
    let host = FakeHost::start(|_, _| Reply::Ok(answer("m-1", 1, &[]))).await;
    let config = host
        .config()
        .with_name("worker-a")
        .with_rack("az-1")
        .with_capacity(2);
    let (member, mut events) = Member::start(config, NoLags).unwrap();
    let mut join = host.request(0).await;
    chosen_id(&join);
    join["member_id"] = json!("");
    assert_eq!(
        join,
        json!({
            "member_id": "", "member_name": "worker-a", "member_epoch": 0,
            "topics": ["orders"], "rack": "az-1", "capacity": 2,
            "owned": [], "lags": [], "drain": false, "task_ranges": true
        })
    );
    match next_event(&mut events).await {
        Event::Joined { member_id } => assert_eq!(member_id, "m-1"),
        event => panic!("expected Joined, got {event:?}"),
    }
    let beat = host.request(1).await;
    assert_eq!(beat["member_id"], "m-1");
    assert_eq!(beat["member_epoch"], 1);
    assert_eq!(beat["member_name"], "worker-a");
    assert!(beat.get("topics").is_none(), "topics only on join: {beat}");
    assert_eq!(member.member_id().as_deref(), Some("m-1"));
    assert_eq!(member.member_epoch(), 1);
    // A dynamic member sends no name.
    let host = FakeHost::start(|_, _| Reply::Ok(answer("m-2", 1, &[]))).await;
    let (_dynamic, _events) = Member::start(host.config(), NoLags).unwrap();
    assert!(host.request(0).await.get("member_name").is_none());
}

#[tokio::test]
async fn owned_includes_unacknowledged_revocations_and_excludes_acknowledged_ones() {
    // The host gives 0 and 1, then revokes 1 until the member reports it
    // gone, then moves to epoch 2.
    let host = FakeHost::start(|index, request| {
        if index == 0 {
            return Reply::Ok(answer("m-1", 1, &[0, 1]));
        }
        if request
            .owned
            .as_deref()
            .unwrap_or_default()
            .contains(&Task::new("orders", 1))
        {
            let mut revoking = answer("m-1", 1, &[0]);
            revoking.revoking = tasks(&[1]);
            Reply::Ok(revoking)
        } else {
            Reply::Ok(answer("m-1", 2, &[0]))
        }
    })
    .await;
    let (member, mut events) = Member::start(host.config(), NoLags).unwrap();
    assert!(matches!(
        next_event(&mut events).await,
        Event::Joined { .. }
    ));
    match next_event(&mut events).await {
        Event::Assigned(assigned) => assert_eq!(assigned, tasks(&[0, 1])),
        event => panic!("expected Assigned, got {event:?}"),
    }
    let ack = match next_event(&mut events).await {
        Event::Revoked {
            tasks: revoked,
            ack,
        } => {
            assert_eq!(revoked, tasks(&[1]));
            ack
        }
        event => panic!("expected Revoked, got {event:?}"),
    };
    // Several beats while the application is still stopping task 1.
    let first = host.count();
    for index in first..first + 3 {
        assert_eq!(
            owned(&host.request(index).await),
            json!([["orders", 0], ["orders", 1]])
        );
    }
    assert_eq!(
        member.assignment(),
        Assignment {
            active: set(&[0]),
            revoking: set(&[1]),
            ..Assignment::default()
        }
    );
    ack.ack();
    let (index, _) = host
        .request_where(first + 3, |body| owned(body) == json!([["orders", 0]]))
        .await;
    for later in index..index + 3 {
        let body = host.request(later).await;
        assert_eq!(
            owned(&body),
            json!([["orders", 0]]),
            "never again after the ack"
        );
    }
    assert_eq!(host.request(index + 3).await["member_epoch"], 2);
    assert_eq!(member.assignment().revoking, BTreeSet::new());
}

/// Another process took the name. The member stops with `Replaced` and does
/// not rejoin (which would fence the other process).
#[tokio::test]
async fn a_replaced_static_member_loses_its_tasks_and_stops() {
    let host = FakeHost::start(|index, _| match index {
        0 => Reply::Ok(answer("m-1", 1, &[0, 2])),
        _ => Reply::Error(409, "replaced"),
    })
    .await;
    let config = host.config().with_name("worker-a");
    let (member, mut events) = Member::start(config, NoLags).unwrap();
    assert!(matches!(
        next_event(&mut events).await,
        Event::Joined { .. }
    ));
    assert!(matches!(next_event(&mut events).await, Event::Assigned(_)));
    match next_event(&mut events).await {
        Event::Lost(lost) => assert_eq!(lost, tasks(&[0, 2])),
        event => panic!("expected Lost, got {event:?}"),
    }
    match next_event(&mut events).await {
        Event::Replaced { member_name } => assert_eq!(member_name, "worker-a"),
        event => panic!("expected Replaced, got {event:?}"),
    }
    assert_ended(&mut events).await;
    assert!(member.is_finished());
    assert_eq!(host.count(), 2, "no rejoin, no leave");
    assert_eq!(member.assignment(), Assignment::default());
}

#[tokio::test]
async fn a_fenced_dynamic_member_loses_its_tasks_and_rejoins_as_a_new_member() {
    let host = FakeHost::start(|index, _| match index {
        0 => Reply::Ok(answer("m-1", 1, &[0])),
        1 => Reply::Error(409, "fenced"),
        _ => Reply::Ok(answer("m-2", 3, &[1])),
    })
    .await;
    let (member, mut events) = Member::start(host.config(), NoLags).unwrap();
    assert!(matches!(
        next_event(&mut events).await,
        Event::Joined { .. }
    ));
    assert!(matches!(next_event(&mut events).await, Event::Assigned(_)));
    match next_event(&mut events).await {
        Event::Lost(lost) => assert_eq!(lost, tasks(&[0])),
        event => panic!("expected Lost, got {event:?}"),
    }
    assert!(matches!(
        next_event(&mut events).await,
        Event::Fenced { rejoining: true }
    ));
    let rejoin = host.request(2).await;
    assert_ne!(
        chosen_id(&rejoin),
        chosen_id(&host.request(0).await),
        "a new member, with a new id"
    );
    assert_eq!(rejoin["member_epoch"], 0);
    assert_eq!(rejoin["topics"], json!(["orders"]));
    assert_eq!(owned(&rejoin), json!([]));
    match next_event(&mut events).await {
        Event::Joined { member_id } => assert_eq!(member_id, "m-2"),
        event => panic!("expected Joined, got {event:?}"),
    }
    match next_event(&mut events).await {
        Event::Assigned(assigned) => assert_eq!(assigned, tasks(&[1])),
        event => panic!("expected Assigned, got {event:?}"),
    }
    assert_eq!(host.request(3).await["member_id"], "m-2");
    assert_eq!(member.member_epoch(), 3);
}

#[tokio::test]
async fn a_lost_answer_is_retried_with_the_same_epoch() {
    let host = FakeHost::start(|index, _| match index {
        0 => Reply::Ok(answer("m-1", 4, &[0])),
        // Processed, but the answer comes after the client gave up.
        1 => Reply::Late(Duration::from_secs(2), answer("m-1", 5, &[0])),
        2 => Reply::Error(503, "unavailable"),
        _ => Reply::Ok(answer("m-1", 5, &[0])),
    })
    .await;
    let (member, mut events) = Member::start(host.config(), NoLags).unwrap();
    assert!(matches!(
        next_event(&mut events).await,
        Event::Joined { .. }
    ));
    assert!(matches!(next_event(&mut events).await, Event::Assigned(_)));
    match next_event(&mut events).await {
        Event::Error(error) => assert!(
            matches!(error, ClientError::Transport(_)),
            "a timeout: {error:?}"
        ),
        event => panic!("expected Error, got {event:?}"),
    }
    match next_event(&mut events).await {
        Event::Error(error) => {
            assert!(error.is_transient());
            assert!(matches!(error, ClientError::Server { status: 503, .. }));
        }
        event => panic!("expected Error, got {event:?}"),
    }
    for index in 1..=3 {
        let body = host.request(index).await;
        assert_eq!(body["member_id"], "m-1");
        assert_eq!(body["member_epoch"], 4, "request {index} keeps the epoch");
        assert_eq!(owned(&body), json!([["orders", 0]]));
    }
    assert_eq!(host.request(4).await["member_epoch"], 5);
    assert_eq!(member.assignment().active, set(&[0]), "nothing was lost");
}

#[tokio::test]
async fn a_join_whose_answer_is_lost_is_retried_with_the_same_id() {
    // The host handled the join but its answer came after the client gave
    // up: the retry must be the same member, so it sends the same id.
    let host = FakeHost::start(|index, request| match index {
        0 => Reply::Late(Duration::from_secs(2), answer(&request.member_id, 0, &[])),
        1 => Reply::Error(503, "unavailable"),
        2 => Reply::Error(409, "fenced"),
        _ => Reply::Ok(answer(&request.member_id, 1, &[0])),
    })
    .await;
    let (member, mut events) = Member::start(host.config(), NoLags).unwrap();
    match next_non_error(&mut events).await {
        Event::Joined { member_id } => assert_eq!(member_id, chosen_id(&host.request(3).await)),
        event => panic!("expected Joined, got {event:?}"),
    }
    let first = chosen_id(&host.request(0).await);
    assert_eq!(
        chosen_id(&host.request(1).await),
        first,
        "a timed-out join is retried as itself"
    );
    assert_eq!(chosen_id(&host.request(2).await), first);
    // Answered `fenced` (the member was removed meanwhile): a new member.
    assert_ne!(chosen_id(&host.request(3).await), first);
    assert_eq!(member.assignment().active, set(&[0]));
}

#[tokio::test]
async fn leave_sends_epoch_minus_one_and_ends_the_loop() {
    let host = FakeHost::start(|_, request| {
        let mut reply = answer("m-1", 2, &[0]);
        if request.member_epoch == -1 {
            reply = answer("m-1", 0, &[]);
            reply.drained = true;
        }
        Reply::Ok(reply)
    })
    .await;
    let config = host.config().with_name("worker-a");
    let (member, mut events) = Member::start(config, NoLags).unwrap();
    assert!(matches!(
        next_event(&mut events).await,
        Event::Joined { .. }
    ));
    assert!(matches!(next_event(&mut events).await, Event::Assigned(_)));
    host.request(1).await;
    let status = member.watch();
    member.leave().await.unwrap();
    let count = host.count();
    let leave = host.request(count - 1).await;
    assert_eq!(leave["member_epoch"], -1);
    assert_eq!(leave["member_id"], "m-1");
    assert_eq!(leave["member_name"], "worker-a");
    // The tasks are given up as the leave goes: nothing processes them
    // after it, whatever the lease of the last answer.
    match next_event(&mut events).await {
        Event::Lost(lost) => assert_eq!(lost, tasks(&[0])),
        event => panic!("expected Lost, got {event:?}"),
    }
    let after = status.borrow().clone();
    assert!(!after.may_process(&Task::new("orders", 0), std::time::Instant::now()));
    assert_eq!(after.stopped, Some(assignd_client::StopReason::Left));
    assert_ended(&mut events).await;
    assert_eq!(host.count(), count, "nothing after the leave");
}

#[tokio::test]
async fn lags_are_reported_for_learners_and_a_caught_up_learner_is_promoted() {
    let mut promoted = false;
    let host = FakeHost::start(move |_, request| {
        let lag = request
            .lags
            .iter()
            .flatten()
            .find(|LagRow(topic, partition, _)| topic == "orders" && *partition == 5)
            .map(|row| row.2);
        promoted |= lag.is_some_and(|lag| lag <= 100);
        match promoted {
            true => Reply::Ok(answer("m-1", 2, &[0, 5])),
            false => {
                let mut warming = answer("m-1", 1, &[0]);
                warming.learner = tasks(&[5]);
                warming.standby = tasks(&[7]);
                Reply::Ok(warming)
            }
        }
    })
    .await;
    // State that catches up 500 records per heartbeat.
    let mut replayed = 0u64;
    let lags = move |assignment: &Assignment| {
        let mut rows = Vec::new();
        for task in &assignment.learner {
            replayed += 500;
            rows.push((task.clone(), 1500u64.saturating_sub(replayed)));
        }
        for task in &assignment.standby {
            rows.push((task.clone(), 7));
        }
        rows
    };
    let (member, mut events) = Member::start(host.config(), lags).unwrap();
    assert!(matches!(
        next_event(&mut events).await,
        Event::Joined { .. }
    ));
    assert!(matches!(next_event(&mut events).await, Event::Assigned(_)));
    match next_event(&mut events).await {
        Event::LearnerStarted(learning) => assert_eq!(learning, tasks(&[5])),
        event => panic!("expected LearnerStarted, got {event:?}"),
    }
    match next_event(&mut events).await {
        Event::StandbyStarted(standby) => assert_eq!(standby, tasks(&[7])),
        event => panic!("expected StandbyStarted, got {event:?}"),
    }
    assert_eq!(
        host.request(0).await["lags"],
        json!([]),
        "nothing to report yet"
    );
    assert_eq!(
        host.request(1).await["lags"],
        json!([["orders", 5, 1000], ["orders", 7, 7]])
    );
    assert_eq!(host.request(2).await["lags"][0], json!(["orders", 5, 500]));
    assert_eq!(host.request(3).await["lags"][0], json!(["orders", 5, 0]));
    match next_event(&mut events).await {
        Event::Promoted(promoted) => assert_eq!(promoted, tasks(&[5])),
        event => panic!("expected Promoted, got {event:?}"),
    }
    assert_eq!(member.assignment().active, set(&[0, 5]));
    assert!(member.assignment().learner.is_empty());
    // The standby the host stopped listing is kept a few answers (it could
    // have been on its way to becoming active), then stopped.
    match next_event(&mut events).await {
        Event::StandbyStopped(stopped) => assert_eq!(stopped, tasks(&[7])),
        event => panic!("expected StandbyStopped, got {event:?}"),
    }
    assert!(member.assignment().standby.is_empty());
}

#[tokio::test]
async fn a_drain_releases_everything_then_leaves() {
    let host = FakeHost::start(|_, request| {
        if request.member_epoch == -1 {
            let mut left = answer("m-1", 0, &[]);
            left.drained = true;
            return Reply::Ok(left);
        }
        if !request.drain {
            return Reply::Ok(answer("m-1", 1, &[0]));
        }
        let mut reply = if request.owned.as_deref().unwrap_or_default().is_empty() {
            let mut drained = answer("m-1", 2, &[]);
            drained.drained = true;
            drained
        } else {
            let mut releasing = answer("m-1", 1, &[]);
            releasing.revoking = tasks(&[0]);
            releasing
        };
        reply.draining = true;
        Reply::Ok(reply)
    })
    .await;
    let (member, mut events) = Member::start(host.config(), NoLags).unwrap();
    assert!(matches!(
        next_event(&mut events).await,
        Event::Joined { .. }
    ));
    assert!(matches!(next_event(&mut events).await, Event::Assigned(_)));
    member.drain();
    let ack = match next_event(&mut events).await {
        Event::Revoked {
            tasks: revoked,
            ack,
        } => {
            assert_eq!(revoked, tasks(&[0]));
            ack
        }
        event => panic!("expected Revoked, got {event:?}"),
    };
    assert!(matches!(next_event(&mut events).await, Event::Draining));
    ack.ack();
    assert!(matches!(next_event(&mut events).await, Event::Drained));
    assert_ended(&mut events).await;
    let count = host.count();
    assert_eq!(host.request(count - 1).await["member_epoch"], -1);
    assert!(member.is_finished());
}

#[tokio::test]
async fn an_unknown_member_loses_its_tasks_and_rejoins_with_its_name() {
    let host = FakeHost::start(|index, _| match index {
        0 => Reply::Ok(answer("m-1", 1, &[0])),
        1 => Reply::Error(404, "unknown_member"),
        _ => Reply::Ok(answer("m-2", 2, &[0])),
    })
    .await;
    let config = host.config().with_name("worker-a");
    let (_member, mut events) = Member::start(config, NoLags).unwrap();
    assert!(matches!(
        next_event(&mut events).await,
        Event::Joined { .. }
    ));
    assert!(matches!(next_event(&mut events).await, Event::Assigned(_)));
    assert!(matches!(
        next_event(&mut events).await,
        Event::Error(ClientError::Api { .. })
    ));
    assert!(matches!(next_event(&mut events).await, Event::Lost(_)));
    let rejoin = host.request(2).await;
    assert_ne!(chosen_id(&rejoin), chosen_id(&host.request(0).await));
    assert_eq!(
        (&rejoin["member_name"], &rejoin["member_epoch"]),
        (&json!("worker-a"), &json!(0))
    );
    assert!(matches!(
        next_non_error(&mut events).await,
        Event::Joined { .. }
    ));
    assert!(matches!(
        next_non_error(&mut events).await,
        Event::Assigned(_)
    ));
}

#[tokio::test]
async fn dropping_the_handle_stops_without_leaving() {
    let host = FakeHost::start(|_, _| Reply::Ok(answer("m-1", 1, &[0]))).await;
    let (member, mut events) = Member::start(host.config().with_name("worker-a"), NoLags).unwrap();
    assert!(matches!(
        next_event(&mut events).await,
        Event::Joined { .. }
    ));
    host.request(2).await;
    member.abort();
    // Events already sent are still delivered, then the channel closes.
    tokio::time::timeout(DEADLINE, async { while events.recv().await.is_some() {} })
        .await
        .expect("the loop ended");
    let requests = host.inner.requests.lock().unwrap().clone();
    assert!(requests.iter().all(|(_, body)| body["member_epoch"] != -1));
}

#[tokio::test]
async fn a_bad_config_is_refused_before_anything_is_sent() {
    let config = MemberConfig::new("http://127.0.0.1:1", "billing", Vec::<String>::new());
    assert!(matches!(
        Member::start(config, NoLags),
        Err(ClientError::Config(_))
    ));
    let config = MemberConfig::new("not a url", "billing", ["orders"]);
    assert!(matches!(
        Member::start(config, NoLags),
        Err(ClientError::Config(_))
    ));
}

#[tokio::test]
async fn a_stale_static_member_rejoins_with_its_name_and_keeps_its_tasks() {
    let host = FakeHost::start(|index, _| match index {
        0 => Reply::Ok(answer("m-1", 1, &[0])),
        1 => Reply::Error(409, "stale_epoch"),
        _ => Reply::Ok(answer("m-2", 1, &[0])),
    })
    .await;
    let (member, mut events) = Member::start(host.config().with_name("worker-a"), NoLags).unwrap();
    assert!(matches!(
        next_event(&mut events).await,
        Event::Joined { .. }
    ));
    assert!(matches!(next_event(&mut events).await, Event::Assigned(_)));
    assert!(matches!(
        next_event(&mut events).await,
        Event::Error(ClientError::Api { .. })
    ));
    let rejoin = host.request(2).await;
    assert_ne!(chosen_id(&rejoin), chosen_id(&host.request(0).await));
    assert_eq!(
        (&rejoin["member_name"], &rejoin["member_epoch"]),
        (&json!("worker-a"), &json!(0))
    );
    assert_eq!(owned(&rejoin), json!([["orders", 0]]), "it still holds 0");
    match next_event(&mut events).await {
        Event::Joined { member_id } => assert_eq!(member_id, "m-2"),
        event => panic!("expected Joined (no Lost), got {event:?}"),
    }
    host.request(3).await;
    assert_eq!(member.assignment().active, set(&[0]));
}

#[tokio::test]
async fn dropping_the_event_receiver_leaves() {
    let host = FakeHost::start(|_, _| Reply::Ok(answer("m-1", 1, &[0]))).await;
    let (member, events) = Member::start(host.config(), NoLags).unwrap();
    host.request(0).await;
    drop(events);
    host.request_where(1, |body| body["member_epoch"] == -1)
        .await;
    tokio::time::timeout(DEADLINE, async {
        while !member.is_finished() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the loop ended");
}

#[tokio::test]
async fn a_member_token_is_sent_as_a_bearer_token_and_never_printed() {
    let host = FakeHost::start(|index, _| match index {
        0 => Reply::Error(401, "unauthorized"),
        _ => Reply::Ok(answer("m-1", 1, &[0])),
    })
    .await;
    let config = host.config().with_member_token("member-token-0123456789");
    assert!(
        !format!("{config:?}").contains("member-token-0123456789"),
        "{config:?}"
    );
    let (_member, mut events) = Member::start(config, NoLags).unwrap();
    // A refusal is an error event and the member retries.
    match next_event(&mut events).await {
        Event::Error(ClientError::Api { status, code, .. }) => {
            assert_eq!(
                (status, code.as_str()),
                (401, assignd_client::codes::UNAUTHORIZED)
            );
        }
        event => panic!("expected the 401, got {event:?}"),
    }
    assert!(matches!(
        next_event(&mut events).await,
        Event::Joined { .. }
    ));
    host.request(1).await;
    let authorizations = host.inner.authorizations.lock().unwrap().clone();
    assert_eq!(
        authorizations[..2],
        [
            Some("Bearer member-token-0123456789".to_owned()),
            Some("Bearer member-token-0123456789".to_owned())
        ]
    );

    // Without a token, no header.
    let host = FakeHost::start(|_, _| Reply::Ok(answer("m-1", 1, &[0]))).await;
    let (_member, _events) = Member::start(host.config(), NoLags).unwrap();
    host.request(0).await;
    assert_eq!(host.inner.authorizations.lock().unwrap()[0], None);

    // A token that cannot be a header is refused before anything is sent.
    for bad in ["", "two words", "line\nbreak"] {
        let config = host.config().with_member_token(bad);
        assert!(
            matches!(Member::start(config, NoLags), Err(ClientError::Config(_))),
            "{bad:?}"
        );
    }
}

/// A host that stops answering: once the lease of its last answer runs out
/// (counted from when that heartbeat was sent), the member may not process
/// and loses every task, before the host could have given them away; when
/// the host answers again, the tasks come back.
#[tokio::test]
async fn a_lease_that_runs_out_stops_every_task_until_the_host_answers_again() {
    const LEASE_MS: u64 = 300;
    let leased = |active: &[u32]| HeartbeatResponseBody {
        lease_ms: Some(LEASE_MS),
        unreached_lease_ms: Some(LEASE_MS),
        unreached_flight_ms: Some(LEASE_MS),
        ..answer("m-1", 1, active)
    };
    let unreachable = Arc::new(Mutex::new(false));
    let down = unreachable.clone();
    let host = FakeHost::start(move |index, _| {
        if index == 0 {
            Reply::Ok(leased(&[0, 1]))
        } else if *down.lock().unwrap() {
            Reply::Error(503, "unavailable")
        } else {
            Reply::Ok(leased(&[0, 1]))
        }
    })
    .await;
    let before_join = std::time::Instant::now();
    let (member, mut events) = Member::start(host.config(), NoLags).unwrap();
    assert!(matches!(
        next_event(&mut events).await,
        Event::Joined { .. }
    ));
    assert!(matches!(next_event(&mut events).await, Event::Assigned(t) if t == tasks(&[0, 1])));
    let status = member.status();
    let first_lease = status.lease_until.expect("the answer carried a lease");
    assert!(first_lease >= before_join + Duration::from_millis(LEASE_MS));
    let zero = Task::new("orders", 0);
    assert!(status.may_process(&zero, first_lease - Duration::from_millis(1)));
    assert!(!status.may_process(&zero, first_lease));
    assert!(!status.may_process(
        &Task::new("orders", 2),
        first_lease - Duration::from_millis(1)
    ));

    *unreachable.lock().unwrap() = true;
    let mark = host.count();
    // The lease is renewed by the answers before the outage: the last one
    // sets when it runs out.
    let lost = loop {
        match next_event(&mut events).await {
            Event::Error(_) => continue,
            Event::Lost(lost) => break lost,
            event => panic!("expected Lost, got {event:?}"),
        }
    };
    let now = std::time::Instant::now();
    let status = member.status();
    let lease = status.lease_until.expect("still the last answer's lease");
    assert!(now >= lease, "lost only once the lease ran out");
    assert!(!member.may_process(&zero));
    assert!(
        !status.may_process(&zero, lease - Duration::from_millis(1)),
        "not held"
    );
    assert_eq!(lost, tasks(&[0, 1]));
    assert!(status.assignment.active.is_empty());
    assert!(host.count() > mark, "the outage was seen");

    // The host answers again: same id and epoch, the tasks come back.
    *unreachable.lock().unwrap() = false;
    let (_, body) = host.request_where(mark, |b| b["owned"] == json!([])).await;
    assert_eq!(body["member_id"], "m-1");
    assert_eq!(body["member_epoch"], 1);
    assert!(matches!(next_non_error(&mut events).await, Event::Assigned(t) if t == tasks(&[0, 1])));
    assert!(member.may_process(&zero));
}

/// A static member the host removed (`fenced`: it expired, or held tasks
/// too long) rejoins under its name: the slot is gone, nobody else has it.
#[tokio::test]
async fn a_fenced_static_member_rejoins_under_its_name() {
    let host = FakeHost::start(|index, _| match index {
        0 => Reply::Ok(answer("m-1", 1, &[0])),
        1 => Reply::Error(409, "fenced"),
        _ => Reply::Ok(answer("m-2", 3, &[0])),
    })
    .await;
    let config = host.config().with_name("worker-a");
    let (_member, mut events) = Member::start(config, NoLags).unwrap();
    assert!(matches!(
        next_event(&mut events).await,
        Event::Joined { .. }
    ));
    assert!(matches!(next_event(&mut events).await, Event::Assigned(_)));
    assert!(matches!(next_event(&mut events).await, Event::Lost(_)));
    assert!(matches!(
        next_event(&mut events).await,
        Event::Fenced { rejoining: true }
    ));
    let rejoin = host.request(2).await;
    // A join with an id of its own choosing, and a new one: the fenced
    // member's old id is gone for good.
    let first = host.request(0).await;
    let id = rejoin["member_id"].as_str().expect("a member id");
    assert!(!id.is_empty() && id != "m-1", "{rejoin}");
    assert_ne!(
        rejoin["member_id"], first["member_id"],
        "a fresh id after fenced"
    );
    assert_eq!(rejoin["member_name"], "worker-a");
    assert_eq!(rejoin["member_epoch"], 0);
}

/// Backpressure: a join refused 429 `join_rate_limited` with `Retry-After`
/// is retried no sooner than the host asked (before, after the client's
/// own 50 ms backoff), with the same chosen id.
#[tokio::test]
async fn a_join_the_host_rate_limits_waits_its_retry_after() {
    let arrivals = Arc::new(Mutex::new(Vec::new()));
    let seen = arrivals.clone();
    let host = FakeHost::start(move |index, _| {
        seen.lock().unwrap().push(std::time::Instant::now());
        match index {
            0 => Reply::ErrorRetryAfter(429, "join_rate_limited", 1),
            _ => Reply::Ok(answer("m-1", 1, &[0])),
        }
    })
    .await;
    let (_member, mut events) = Member::start(host.config(), NoLags).unwrap();
    match next_event(&mut events).await {
        Event::Error(error) => {
            assert_eq!(error.code(), Some("join_rate_limited"));
            assert_eq!(error.retry_after(), Some(Duration::from_secs(1)));
        }
        event => panic!("expected the refusal, got {event:?}"),
    }
    assert!(matches!(
        next_event(&mut events).await,
        Event::Joined { .. }
    ));
    let arrivals = arrivals.lock().unwrap().clone();
    let waited = arrivals[1] - arrivals[0];
    assert!(waited >= Duration::from_secs(1), "retried after {waited:?}");
    let (first, retry) = (host.request(0).await, host.request(1).await);
    assert_eq!(retry["member_id"], first["member_id"], "the same chosen id");
}

/// A node that is gone: its port is bound but not listening, so every
/// connection is refused, and held, so no other test's listener takes it
/// meanwhile (a port merely closed could be).
struct DeadNode {
    url: String,
    _port: tokio::net::TcpSocket,
}

impl DeadNode {
    fn new() -> Self {
        Self::at("127.0.0.1:0".parse().unwrap())
    }

    /// At `address`, the port of a listener that has just closed (its
    /// connections may linger, hence the address reuse).
    fn at(address: std::net::SocketAddr) -> Self {
        let port = tokio::net::TcpSocket::new_v4().unwrap();
        port.set_reuseaddr(true).unwrap();
        port.bind(address).unwrap();
        DeadNode {
            url: format!("http://{}", port.local_addr().unwrap()),
            _port: port,
        }
    }

    /// The heartbeat URL of `billing` there.
    fn heartbeat_url(&self) -> String {
        format!("{}/v1/groups/billing/heartbeat", self.url)
    }
}

/// A cluster node that does not coordinate the group redirects the member
/// to the one that does: the member follows at once (no error event), with
/// its member token, and sends its next heartbeats to the coordinator.
#[tokio::test]
async fn a_redirect_is_followed_with_the_token_and_the_coordinator_remembered() {
    let coordinator = FakeHost::start(|_, _| Reply::Ok(answer("m-1", 1, &[0]))).await;
    let location = format!("{}/v1/groups/billing/heartbeat", coordinator.url);
    let other = FakeHost::start(move |_, _| Reply::Redirect(location.clone())).await;
    let config = other.config().with_member_token("member-token-0123456789");
    let (_member, mut events) = Member::start(config, NoLags).unwrap();
    match next_event(&mut events).await {
        Event::Joined { .. } => {}
        event => panic!("expected the join, got {event:?}"),
    }
    coordinator.request(3).await;
    assert_eq!(
        other.count(),
        1,
        "only the first heartbeat went to the other node"
    );
    let authorizations = coordinator.inner.authorizations.lock().unwrap().clone();
    assert!(
        authorizations
            .iter()
            .all(|a| a.as_deref() == Some("Bearer member-token-0123456789")),
        "{authorizations:?}"
    );
}

/// The coordinator a redirect named stops answering (it died): the member
/// asks the bootstrap URLs again, and the first that does not answer is
/// skipped for the next; none of it within one request is an error event.
#[tokio::test]
async fn a_coordinator_that_stops_answering_is_forgotten_for_the_bootstrap_urls() {
    let dead = DeadNode::new();
    let dead_location = dead.heartbeat_url();
    let bootstrap = FakeHost::start(move |index, _| match index {
        // First to a node that is gone, then served here.
        0 => Reply::Redirect(dead_location.clone()),
        _ => Reply::Ok(answer("m-1", 1, &[0])),
    })
    .await;
    // The first bootstrap URL answers nothing: the second is asked.
    let config = MemberConfig::new(
        format!("{},{}", dead.url, bootstrap.url),
        "billing",
        ["orders"],
    )
    .with_request_timeout(Duration::from_secs(2));
    let (_member, mut events) = Member::start(config, NoLags).unwrap();
    match next_event(&mut events).await {
        Event::Joined { .. } => {}
        event => panic!("expected the join, got {event:?}"),
    }
    bootstrap.request(2).await;
}

/// A shard between owners (503 `shard_unavailable`) is waited out within
/// the request: no error event.
#[tokio::test]
async fn a_shard_between_owners_is_retried_within_the_request() {
    let host = FakeHost::start(|index, _| match index {
        0 | 1 => Reply::ErrorRetryAfter(503, "shard_unavailable", 1),
        _ => Reply::Ok(answer("m-1", 1, &[0])),
    })
    .await;
    let (_member, mut events) = Member::start(host.config(), NoLags).unwrap();
    match next_event(&mut events).await {
        Event::Joined { .. } => {}
        event => panic!("expected the join, got {event:?}"),
    }
    // The join was sent three times, with one member id.
    let ids: BTreeSet<String> = host.inner.requests.lock().unwrap()[..3]
        .iter()
        .map(|(_, body)| body["member_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids.len(), 1, "{ids:?}");
}

/// An answer with a lease and, from a host that sends one, an unreached
/// lease (and its in-flight bound, the plain lease's length), as JSON.
fn leased(active: &[u32], lease_ms: u64, unreached_lease_ms: Option<u64>) -> Value {
    serde_json::to_value(HeartbeatResponseBody {
        lease_ms: Some(lease_ms),
        unreached_lease_ms,
        unreached_flight_ms: unreached_lease_ms.map(|_| lease_ms),
        ..answer("m-1", 1, active)
    })
    .unwrap()
}

/// Joined and assigned `active`: when the assignment arrived.
async fn joined_with(events: &mut mpsc::Receiver<Event>, active: &[u32]) -> std::time::Instant {
    assert!(matches!(next_event(events).await, Event::Joined { .. }));
    match next_event(events).await {
        Event::Assigned(assigned) => assert_eq!(assigned, tasks(active)),
        event => panic!("expected Assigned, got {event:?}"),
    }
    std::time::Instant::now()
}

/// The tasks of the next `Lost` event, and when it came; every event
/// before it must be an error that `expected` accepts.
async fn lost_after_errors(
    events: &mut mpsc::Receiver<Event>,
    expected: impl Fn(&ClientError) -> bool,
) -> (Vec<Task>, std::time::Instant) {
    loop {
        match next_event(events).await {
            Event::Error(error) => assert!(expected(&error), "{error:?}"),
            Event::Lost(lost) => return (lost, std::time::Instant::now()),
            event => panic!("expected Lost, got {event:?}"),
        }
    }
}

/// The member's lease is its plain one, `lease_ms` from `since` at the
/// latest, and it loses tasks 0 and 1 at or after it, with only
/// `expected` errors before. Returns the lease and when they were lost.
async fn lost_at_the_plain_lease(
    member: &assignd_client::MemberHandle,
    events: &mut mpsc::Receiver<Event>,
    since: std::time::Instant,
    lease_ms: u64,
    expected: impl Fn(&ClientError) -> bool,
) -> (std::time::Instant, std::time::Instant) {
    let lease = member.status().lease_until.expect("a lease");
    assert!(
        lease <= since + Duration::from_millis(lease_ms),
        "the plain lease"
    );
    let (lost, at) = lost_after_errors(events, expected).await;
    assert_eq!(lost, tasks(&[0, 1]));
    assert!(at >= lease);
    (lease, at)
}

/// The coordinator dies (kill -9: its port refuses connections) and no
/// other node serves the group yet. No heartbeat can reach a coordinator,
/// so the host keeps the member's tasks until the answer's unreached lease
/// ends: the member processes past its plain lease, and stops at that end.
#[tokio::test]
async fn a_coordinator_that_refuses_connections_leaves_the_tasks_until_the_unreached_lease() {
    const LEASE_MS: u64 = 300;
    const UNREACHED_LEASE_MS: u64 = 1_200;
    let host = FakeHost::start(|_, _| {
        Reply::JsonThenDie(leased(&[0, 1], LEASE_MS, Some(UNREACHED_LEASE_MS)))
    })
    .await;
    let before_join = std::time::Instant::now();
    let (member, mut events) = Member::start(host.config(), NoLags).unwrap();
    joined_with(&mut events, &[0, 1]).await;
    match next_event(&mut events).await {
        Event::Error(ClientError::Unreached(message)) => {
            assert!(message.contains("error sending request"), "{message}");
        }
        event => panic!("expected the refused heartbeat, got {event:?}"),
    }
    // The join's send time plus the unreached lease, not the plain one.
    let lease = member.status().lease_until.expect("a lease");
    assert!(lease >= before_join + Duration::from_millis(UNREACHED_LEASE_MS));
    let plain = lease - Duration::from_millis(UNREACHED_LEASE_MS - LEASE_MS);

    // Past the plain lease, the tasks are still the member's.
    tokio::time::sleep_until((plain + Duration::from_millis(200)).into()).await;
    let zero = Task::new("orders", 0);
    assert!(std::time::Instant::now() < lease);
    assert!(member.may_process(&zero));
    assert_eq!(member.status().lease_until, Some(lease));

    let (lost, at) = lost_after_errors(&mut events, |error| {
        matches!(error, ClientError::Unreached(_))
    })
    .await;
    assert_eq!(lost, tasks(&[0, 1]));
    assert!(at >= lease, "lost only once the unreached lease ran out");
    assert!(at < lease + Duration::from_secs(1), "lost when it ran out");
    assert!(!member.may_process(&zero));
    assert_eq!(host.count(), 1, "only the join reached the node");
}

/// The same outage seen as a timeout (the node accepts and never answers:
/// paused, or cut off after the request went out): the heartbeat may have
/// reached the coordinator, which may then take the tasks after the plain
/// lease, so the member stops when that one ends.
#[tokio::test]
async fn a_coordinator_that_never_answers_leaves_the_tasks_only_until_the_plain_lease() {
    const LEASE_MS: u64 = 600;
    const UNREACHED_LEASE_MS: u64 = 5_000;
    let host = FakeHost::start(|index, _| match index {
        0 => Reply::Json(leased(&[0, 1], LEASE_MS, Some(UNREACHED_LEASE_MS))),
        _ => Reply::Late(Duration::from_secs(30), answer("m-1", 1, &[0, 1])),
    })
    .await;
    let before_join = std::time::Instant::now();
    let (member, mut events) = Member::start(host.config(), NoLags).unwrap();
    let assigned_at = joined_with(&mut events, &[0, 1]).await;
    match next_event(&mut events).await {
        Event::Error(ClientError::Transport(message)) => {
            assert!(message.contains("timed out"), "{message}");
        }
        event => panic!("expected the timeout, got {event:?}"),
    }
    let (lease, at) =
        lost_at_the_plain_lease(&member, &mut events, assigned_at, LEASE_MS, |error| {
            matches!(error, ClientError::Transport(_))
        })
        .await;
    assert!(
        at < before_join + Duration::from_millis(UNREACHED_LEASE_MS),
        "not kept on the unreached lease"
    );
    assert_eq!(member.status().lease_until, Some(lease));
}

/// What counts as reaching no coordinator: a redirect to a node that is
/// gone (its port refuses), and 503 `shard_unavailable` (the node does not
/// serve the group's shard, and processed nothing). Any other failure may
/// have reached it and leaves the plain lease; so does an older host's
/// answer, which has no unreached lease.
#[tokio::test]
async fn only_failures_that_reached_no_coordinator_extend_the_lease() {
    const LEASE_MS: u64 = 1_000;
    const UNREACHED_LEASE_MS: u64 = 5_000;
    enum Failure {
        RedirectToDeadNode,
        Error(u16, &'static str),
    }
    struct Case {
        failure: Failure,
        unreached_lease_ms: Option<u64>,
        /// The heartbeat fails as `Unreached`.
        unreached: bool,
        /// ... and the member keeps its tasks on the unreached lease.
        extended: bool,
    }
    let case = |failure, unreached, extended| Case {
        failure,
        unreached_lease_ms: Some(UNREACHED_LEASE_MS),
        unreached,
        extended,
    };
    let cases = [
        case(Failure::RedirectToDeadNode, true, true),
        case(Failure::Error(503, "shard_unavailable"), true, true),
        case(Failure::Error(503, "storage_unavailable"), false, false),
        case(Failure::Error(503, "coordinator_unreachable"), false, false),
        case(Failure::Error(500, "internal"), false, false),
        case(Failure::Error(400, "invalid_request"), false, false),
        Case {
            unreached_lease_ms: None,
            ..case(Failure::RedirectToDeadNode, true, false)
        },
    ];
    let dead_node = DeadNode::new();
    let dead = dead_node.heartbeat_url();
    for case in cases {
        let dead = dead.clone();
        let label = match case.failure {
            Failure::RedirectToDeadNode => format!("307 to {dead}"),
            Failure::Error(status, code) => format!("{status} {code}"),
        };
        let label = format!("{label}, unreached_lease_ms {:?}", case.unreached_lease_ms);
        let host = FakeHost::start(move |index, _| match (index, &case.failure) {
            (0, _) => Reply::Json(leased(&[0], LEASE_MS, case.unreached_lease_ms)),
            (_, Failure::RedirectToDeadNode) => Reply::Redirect(dead.clone()),
            (_, Failure::Error(status, code)) => Reply::Error(*status, code),
        })
        .await;
        let before_join = std::time::Instant::now();
        let (member, mut events) = Member::start(host.config(), NoLags).unwrap();
        let assigned_at = joined_with(&mut events, &[0]).await;
        match next_event(&mut events).await {
            Event::Error(error) => assert_eq!(
                matches!(error, ClientError::Unreached(_)),
                case.unreached,
                "{label}: {error:?}"
            ),
            event => panic!("{label}: expected an error, got {event:?}"),
        }
        let lease = member.status().lease_until.expect("a lease");
        let plain = assigned_at + Duration::from_millis(LEASE_MS);
        if case.extended {
            // The unreached lease (join's send time + UNREACHED_LEASE_MS),
            // or, while the retry is in flight, the retry's send time +
            // the flight bound: past the plain lease either way.
            let unreached = before_join + Duration::from_millis(UNREACHED_LEASE_MS);
            assert!(
                lease > plain && lease <= unreached + Duration::from_secs(1),
                "{label}: the unreached lease"
            );
        } else {
            assert!(lease <= plain, "{label}: the plain lease");
        }
        member.abort();
    }
}

/// A failure that may have reached the coordinator ends the unreached
/// lease: until the next answer the plain lease holds, a heartbeat that
/// then reaches no coordinator does not bring the longer one back, and the
/// tasks stop when the plain one ends. An answer starts afresh.
#[tokio::test]
async fn a_failure_that_may_have_reached_the_coordinator_brings_the_plain_lease_back() {
    const LEASE_MS: u64 = 1_500;
    const UNREACHED_LEASE_MS: u64 = 6_000;
    #[derive(Clone, Copy)]
    enum Phase {
        Answering,
        CoordinatorGone,
        StorageUnavailable,
    }
    let phase = Arc::new(Mutex::new(Phase::Answering));
    let now = phase.clone();
    let dead_node = DeadNode::new();
    let dead = dead_node.heartbeat_url();
    let host = FakeHost::start(move |_, _| match *now.lock().unwrap() {
        Phase::Answering => Reply::Json(leased(&[0], LEASE_MS, Some(UNREACHED_LEASE_MS))),
        Phase::CoordinatorGone => Reply::Redirect(dead.clone()),
        Phase::StorageUnavailable => Reply::Error(503, "storage_unavailable"),
    })
    .await;
    let (member, mut events) = Member::start(host.config(), NoLags).unwrap();
    joined_with(&mut events, &[0]).await;
    let set_phase = |to| *phase.lock().unwrap() = to;
    let is_unreached = |error: &ClientError| matches!(error, ClientError::Unreached(_));
    let is_storage = |error: &ClientError| matches!(error, ClientError::Server { status: 503, .. });
    // The first error that `wanted` accepts, skipping those of the phase
    // before.
    let next_error = async |events: &mut mpsc::Receiver<Event>,
                            wanted: &dyn Fn(&ClientError) -> bool,
                            skipped: &dyn Fn(&ClientError) -> bool| loop {
        match next_event(events).await {
            Event::Error(error) if wanted(&error) => return,
            Event::Error(error) if skipped(&error) => continue,
            event => panic!("expected an error, got {event:?}"),
        }
    };

    set_phase(Phase::CoordinatorGone);
    next_error(&mut events, &is_unreached, &|_| false).await;
    let extended = member.status().lease_until.expect("a lease");
    let plain = extended - Duration::from_millis(UNREACHED_LEASE_MS - LEASE_MS);
    assert!(extended > std::time::Instant::now() + Duration::from_millis(LEASE_MS));

    set_phase(Phase::StorageUnavailable);
    next_error(&mut events, &is_storage, &is_unreached).await;
    assert_eq!(
        member.status().lease_until,
        Some(plain),
        "the plain lease again"
    );

    set_phase(Phase::CoordinatorGone);
    next_error(&mut events, &is_unreached, &is_storage).await;
    assert_eq!(
        member.status().lease_until,
        Some(plain),
        "not extended again"
    );

    let (lost, at) = lost_after_errors(&mut events, is_unreached).await;
    assert_eq!(lost, tasks(&[0]));
    assert!(at >= plain, "lost once the plain lease ran out");
    assert!(at < extended, "not kept on the unreached lease");

    // An answer, then a coordinator gone again: the new answer's unreached
    // lease holds.
    set_phase(Phase::Answering);
    match next_non_error(&mut events).await {
        Event::Assigned(assigned) => assert_eq!(assigned, tasks(&[0])),
        event => panic!("expected the tasks back, got {event:?}"),
    }
    set_phase(Phase::CoordinatorGone);
    next_error(&mut events, &is_unreached, &|_| false).await;
    let lease = member.status().lease_until.expect("a lease");
    assert!(lease > std::time::Instant::now() + Duration::from_millis(LEASE_MS));
    assert!(member.may_process(&Task::new("orders", 0)));
}

/// A member asked to release tasks is not kept on the unreached lease,
/// even from a host that sends a longer one: the released tasks' fence
/// may come first. (The host sends none then; the member checks too.)
#[tokio::test]
async fn a_member_releasing_tasks_stays_on_the_plain_lease() {
    const LEASE_MS: u64 = 1_000;
    const UNREACHED_LEASE_MS: u64 = 5_000;
    let dead_node = DeadNode::new();
    let dead = dead_node.heartbeat_url();
    let host = FakeHost::start(move |index, _| match index {
        0 => Reply::Json(leased(&[0, 1], LEASE_MS, Some(UNREACHED_LEASE_MS))),
        1 => {
            let mut revoking = leased(&[0], LEASE_MS, Some(UNREACHED_LEASE_MS));
            revoking["revoking"] = json!([["orders", 1]]);
            Reply::Json(revoking)
        }
        _ => Reply::Redirect(dead.clone()),
    })
    .await;
    let (member, mut events) = Member::start(host.config(), NoLags).unwrap();
    joined_with(&mut events, &[0, 1]).await;
    // Not acknowledged: task 1 is still being released.
    let _ack = match next_event(&mut events).await {
        Event::Revoked {
            tasks: revoked,
            ack,
        } => {
            assert_eq!(revoked, tasks(&[1]));
            ack
        }
        event => panic!("expected Revoked, got {event:?}"),
    };
    let revoked_at = std::time::Instant::now();
    match next_event(&mut events).await {
        Event::Error(ClientError::Unreached(_)) => {}
        event => panic!("expected the unreached heartbeat, got {event:?}"),
    }
    lost_at_the_plain_lease(&member, &mut events, revoked_at, LEASE_MS, |error| {
        matches!(error, ClientError::Unreached(_))
    })
    .await;
}

/// A member on its unreached lease whose next heartbeat hangs (it may
/// have reached a coordinator whose answer is then lost) counts on the
/// unreached lease, while that heartbeat is in flight, only until its send
/// time plus the answer's `unreached_flight_ms`: the host, had it handled
/// the heartbeat and told a revocation, could fence that long after. The
/// application is shown that bound while the heartbeat is still out; when
/// the heartbeat times out, the plain lease (long over) holds and every
/// task is lost.
#[tokio::test]
async fn a_heartbeat_in_flight_bounds_the_unreached_lease() {
    const LEASE_MS: u64 = 1_000;
    const UNREACHED_LEASE_MS: u64 = 20_000;
    const FLIGHT_MS: u64 = 1_000;
    #[derive(Clone, Copy)]
    enum Phase {
        Answering,
        CoordinatorGone,
        Hanging,
    }
    let phase = Arc::new(Mutex::new(Phase::Answering));
    let now = phase.clone();
    let dead_node = DeadNode::new();
    let dead = dead_node.heartbeat_url();
    let host = FakeHost::start(move |_, _| match *now.lock().unwrap() {
        Phase::Answering => Reply::Json(
            serde_json::to_value(HeartbeatResponseBody {
                lease_ms: Some(LEASE_MS),
                unreached_lease_ms: Some(UNREACHED_LEASE_MS),
                unreached_flight_ms: Some(FLIGHT_MS),
                ..answer("m-1", 1, &[0])
            })
            .unwrap(),
        ),
        Phase::CoordinatorGone => Reply::Redirect(dead.clone()),
        Phase::Hanging => Reply::Late(Duration::from_secs(60), answer("m-1", 1, &[0])),
    })
    .await;
    let config = host.config().with_request_timeout(Duration::from_secs(5));
    let (member, mut events) = Member::start(config, NoLags).unwrap();
    let joined = joined_with(&mut events, &[0]).await;
    *phase.lock().unwrap() = Phase::CoordinatorGone;
    match next_event(&mut events).await {
        Event::Error(ClientError::Unreached(_)) => {}
        event => panic!("expected the redirect to the dead node, got {event:?}"),
    }
    let extended = member.status().lease_until.expect("a lease");
    assert!(extended > joined + Duration::from_millis(UNREACHED_LEASE_MS - 1_000));
    // Past the plain lease, still the member's.
    tokio::time::sleep_until((joined + Duration::from_millis(LEASE_MS + 500)).into()).await;
    let zero = Task::new("orders", 0);
    assert!(member.may_process(&zero));

    let hanging_from = std::time::Instant::now();
    *phase.lock().unwrap() = Phase::Hanging;
    let deadline = hanging_from + Duration::from_secs(4);
    let bounded = loop {
        let lease = member.status().lease_until.expect("a lease");
        if lease < extended {
            break lease;
        }
        assert!(std::time::Instant::now() < deadline, "never bounded");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // Sent after the phase changed (within one backoff), bounded by it.
    assert!(
        bounded >= hanging_from + Duration::from_millis(FLIGHT_MS - 50),
        "bounded by the heartbeat in flight, not the plain lease"
    );
    assert!(bounded <= hanging_from + Duration::from_millis(1_000 + FLIGHT_MS + 50));
    tokio::time::sleep_until((bounded + Duration::from_millis(50)).into()).await;
    assert!(!member.may_process(&zero), "past the in-flight bound");

    let (lost, _) = lost_after_errors(&mut events, |error| {
        matches!(error, ClientError::Unreached(_) | ClientError::Transport(_))
    })
    .await;
    assert_eq!(lost, tasks(&[0]));
}

/// A listener that records what it was told.
#[derive(Default)]
struct Recorder(Vec<String>);

impl assignd_client::Listener for Recorder {
    fn assigned(&mut self, tasks: &[Task], promoted: bool) {
        self.0
            .push(format!("assigned {tasks:?} promoted={promoted}"));
    }
    fn revoked(&mut self, tasks: &[Task]) {
        self.0.push(format!("revoked {tasks:?}"));
    }
    fn lost(&mut self, tasks: &[Task]) {
        self.0.push(format!("lost {tasks:?}"));
    }
    fn learner_started(&mut self, tasks: &[Task]) {
        self.0.push(format!("learner {tasks:?}"));
    }
}

/// Through the listener, a learner that becomes active reaches `assigned`
/// (flagged warm), so code that implements only the three hooks processes
/// it; a revocation is released once its hook returned.
#[tokio::test]
async fn a_listener_gets_promoted_tasks_as_assigned_and_releases_after_revoked() {
    let host = FakeHost::start(|index, request| {
        let owned = request.owned.clone().unwrap_or_default();
        match index {
            0 => {
                let mut first = answer("m-1", 1, &[0]);
                first.learner = tasks(&[1]);
                Reply::Ok(first)
            }
            1 => Reply::Ok(answer("m-1", 2, &[0, 1])),
            _ if owned.contains(&Task::new("orders", 0)) => {
                let mut revoking = answer("m-1", 3, &[1]);
                revoking.revoking = tasks(&[0]);
                Reply::Ok(revoking)
            }
            _ => Reply::Ok(answer("m-1", 3, &[1])),
        }
    })
    .await;
    let (member, mut events) = Member::start(host.config(), NoLags).unwrap();
    let mut recorder = Recorder::default();
    let listening = tokio::spawn(async move {
        assignd_client::listen(&mut events, &mut recorder).await;
        recorder
    });
    // Released: a heartbeat reports 0 no longer owned.
    let released = tokio::time::timeout(DEADLINE, async {
        for index in 3.. {
            let owned = host.request(index).await["owned"].clone();
            if owned == json!([["orders", 1]]) {
                return;
            }
        }
    })
    .await;
    assert!(released.is_ok(), "the revocation was never released");
    drop(member);
    let recorder = listening.await.unwrap();
    assert_eq!(
        recorder.0[..4],
        [
            "assigned [Task { topic: \"orders\", partition: 0 }] promoted=false",
            "learner [Task { topic: \"orders\", partition: 1 }]",
            "assigned [Task { topic: \"orders\", partition: 1 }] promoted=true",
            "revoked [Task { topic: \"orders\", partition: 0 }]",
        ]
    );
}

/// Loads set through the handle go once the host asks: all of them (with
/// the config's load capacity) after `full`; an invalid one is refused at
/// the call, changing nothing.
#[tokio::test]
async fn loads_set_through_the_handle_reach_the_host_once_it_asks() {
    let host = FakeHost::start(|index, _| {
        let mut answer = answer("m-1", 1, &[0, 1, 2]);
        answer.load_report = if index == 0 {
            assignd_client::wire::LoadReport::None
        } else {
            assignd_client::wire::LoadReport::Full
        };
        Reply::Ok(answer)
    })
    .await;
    let config = host.config().with_load_capacity(300.0);
    let (member, mut events) = Member::start(config, NoLags).unwrap();
    assert!(matches!(
        next_event(&mut events).await,
        Event::Joined { .. }
    ));
    assert!(matches!(next_event(&mut events).await, Event::Assigned(_)));
    let refused = member.set_load(Task::new("orders", 0), f64::NAN);
    assert!(
        matches!(refused, Err(ClientError::Config(_))),
        "{refused:?}"
    );
    assert!(member.set_utilisation(Some(11.0)).is_err());
    member
        .set_loads(vec![
            (Task::new("orders", 0), 7.0),
            (Task::new("orders", 1), 7.0),
            (Task::new("orders", 2), 2.5),
        ])
        .unwrap();
    member.set_utilisation(Some(0.25)).unwrap();
    let (_, beat) = host
        .request_where(1, |body| {
            body.get("loads")
                .is_some_and(|l| l.as_array().unwrap().len() == 2)
        })
        .await;
    assert_eq!(
        beat["loads"],
        json!([["orders", 0, 1, 7.0], ["orders", 2, 2.5]])
    );
    assert_eq!(beat["utilisation"], json!(0.25));
    assert_eq!(beat["load_capacity"], json!(300.0));
}
