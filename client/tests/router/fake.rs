//! The router's loop against a fake host: an axum server that answers the
//! routes query as the host does (at once without `after_epoch`; with it,
//! once the table's epoch differs or after `wait_ms`), with faults a test
//! queues ahead of it, recording every query.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use assignd_client::wire::{RouteMember, RoutesBody, TaskRanges};
use assignd_client::{ClientError, RouteError, Router, RouterConfig, RouterError, Task};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;
use tokio::sync::Notify;

/// How long any wait in these tests may take before it fails.
const DEADLINE: Duration = Duration::from_secs(10);
const TOKEN: &str = "reader-token-0123456789";

/// An answer the fake gives instead of the table.
enum Fault {
    Error(u16, &'static str),
    ErrorRetryAfter(u16, &'static str, u64),
    Redirect(String),
}

/// One query as the fake saw it.
#[derive(Clone, Debug)]
struct Seen {
    after_epoch: Option<u64>,
    wait_ms: Option<u64>,
    authorization: Option<String>,
    at: Instant,
}

struct Inner {
    table: Mutex<RoutesBody>,
    /// The `Assignd-Routes-Waited-Ms` every answer carries, if any.
    waited_ms: Mutex<Option<u64>>,
    /// Told when the table changes, unless the change is made silently.
    changed: Notify,
    faults: Mutex<VecDeque<Fault>>,
    seen: Mutex<Vec<Seen>>,
    arrived: Notify,
}

struct FakeHost {
    url: String,
    inner: Arc<Inner>,
}

async fn routes(
    State(inner): State<Arc<Inner>>,
    Path(group): Path<String>,
    Query(query): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    assert_eq!(group, "orders");
    let number = |key: &str| query.get(key).map(|v| v.parse::<u64>().unwrap());
    let seen = Seen {
        after_epoch: number("after_epoch"),
        wait_ms: number("wait_ms"),
        authorization: headers
            .get(header::AUTHORIZATION)
            .map(|v| v.to_str().unwrap().to_owned()),
        at: Instant::now(),
    };
    inner.seen.lock().unwrap().push(seen.clone());
    inner.arrived.notify_waiters();
    if let Some(fault) = inner.faults.lock().unwrap().pop_front() {
        return fault.into_response();
    }
    if seen.authorization.as_deref() != Some(&format!("Bearer {TOKEN}")) {
        let body =
            json!({"error": {"code": "forbidden", "message": "not the group's reader token"}});
        return (StatusCode::FORBIDDEN, axum::Json(body)).into_response();
    }
    if let Some(after) = seen.after_epoch {
        let wait = Duration::from_millis(seen.wait_ms.unwrap_or(20_000));
        let _ = tokio::time::timeout(wait, async {
            loop {
                let changed = inner.changed.notified();
                if inner.table.lock().unwrap().epoch != after {
                    return;
                }
                changed.await;
            }
        })
        .await;
    }
    let table = inner.table.lock().unwrap().clone();
    let mut answer = axum::Json(table).into_response();
    if let Some(waited_ms) = *inner.waited_ms.lock().unwrap() {
        answer
            .headers_mut()
            .insert("assignd-routes-waited-ms", waited_ms.into());
    }
    answer
}

impl IntoResponse for Fault {
    fn into_response(self) -> Response {
        let error = |code: &str| axum::Json(json!({"error": {"code": code, "message": "fake"}}));
        match self {
            Fault::Error(status, code) => {
                (StatusCode::from_u16(status).unwrap(), error(code)).into_response()
            }
            Fault::ErrorRetryAfter(status, code, seconds) => (
                StatusCode::from_u16(status).unwrap(),
                [(header::RETRY_AFTER, seconds.to_string())],
                error(code),
            )
                .into_response(),
            Fault::Redirect(to) => (
                StatusCode::TEMPORARY_REDIRECT,
                [(header::LOCATION, to)],
                error("not_coordinator"),
            )
                .into_response(),
        }
    }
}

impl FakeHost {
    async fn start(table: RoutesBody) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let inner = Arc::new(Inner {
            table: Mutex::new(table),
            waited_ms: Mutex::new(None),
            changed: Notify::new(),
            faults: Mutex::new(VecDeque::new()),
            seen: Mutex::new(Vec::new()),
            arrived: Notify::new(),
        });
        let app = axum::Router::new()
            .route("/v1/groups/{group}/routes", get(routes))
            .with_state(inner.clone());
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        FakeHost { url, inner }
    }

    fn config(&self) -> RouterConfig {
        RouterConfig::new(&self.url, "orders")
            .with_token(TOKEN)
            .with_wait_ms(300)
    }

    fn set_table(&self, table: RoutesBody) {
        *self.inner.table.lock().unwrap() = table;
        self.inner.changed.notify_waiters();
    }

    /// A change the waiting queries are not told of (as if the host's
    /// watch were slow): only a new query sees it.
    fn set_table_silently(&self, table: RoutesBody) {
        *self.inner.table.lock().unwrap() = table;
    }

    /// Every later answer says it waited `waited_ms` before the read.
    fn say_waited(&self, waited_ms: u64) {
        *self.inner.waited_ms.lock().unwrap() = Some(waited_ms);
    }

    fn fault(&self, fault: Fault) {
        self.inner.faults.lock().unwrap().push_back(fault);
    }

    fn seen(&self) -> Vec<Seen> {
        self.inner.seen.lock().unwrap().clone()
    }

    /// Waits until `n` queries arrived.
    async fn wait_for_queries(&self, n: usize) -> Vec<Seen> {
        tokio::time::timeout(DEADLINE, async {
            loop {
                let arrived = self.inner.arrived.notified();
                let seen = self.seen();
                if seen.len() >= n {
                    return seen;
                }
                arrived.await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("{n} queries never arrived"))
    }
}

/// Epoch `epoch` of a group whose topic `orders` (4 partitions) is all
/// `owner`'s, serving at `http://{owner}`.
fn table(epoch: u64, owner: &str) -> RoutesBody {
    let member = RouteMember {
        member_name: None,
        endpoint: Some(format!("http://{owner}")),
        metadata: BTreeMap::new(),
    };
    let tasks: Vec<Task> = (0..4).map(|p| Task::new("orders", p)).collect();
    RoutesBody {
        group: "orders".into(),
        epoch,
        group_epoch: epoch,
        valid_ms: 60_000,
        topics: BTreeMap::from([("orders".to_owned(), 4)]),
        members: BTreeMap::from([(owner.to_owned(), member)]),
        active: BTreeMap::from([(owner.to_owned(), TaskRanges::from_tasks(&tasks))]),
        ..RoutesBody::default()
    }
}

fn endpoint_of(router: &Router, key: &str) -> Option<String> {
    let route = router.owner_of("orders", key).unwrap();
    route.owner.and_then(|owner| owner.endpoint.clone())
}

/// Waits for the next new table and returns its epoch.
async fn next_epoch(
    changes: &mut tokio::sync::watch::Receiver<Option<Arc<assignd_client::RouteTable>>>,
) -> u64 {
    tokio::time::timeout(DEADLINE, changes.changed())
        .await
        .expect("no new table in time")
        .unwrap();
    changes.borrow_and_update().as_ref().unwrap().epoch()
}

#[tokio::test]
async fn the_router_fetches_the_table_then_watches_it_and_is_told_of_a_change() {
    let host = FakeHost::start(table(1, "m-1")).await;
    let router = Router::start(host.config()).unwrap();
    assert_eq!(router.owner_of("orders", "k"), Err(RouteError::NoTable));
    router.ready(DEADLINE).await.unwrap();
    assert_eq!(endpoint_of(&router, "k").as_deref(), Some("http://m-1"));
    assert!(router.is_fresh());
    let mut changes = router.changes();
    changes.borrow_and_update();
    // Two blocking queries run out unchanged: the table's bound moves on,
    // and nobody is told.
    let first_sent = router.table().unwrap().sent_at();
    host.wait_for_queries(4).await;
    assert!(!changes.has_changed().unwrap());
    assert!(router.table().unwrap().sent_at() > first_sent);
    host.set_table(table(2, "m-2"));
    assert_eq!(next_epoch(&mut changes).await, 2);
    assert_eq!(endpoint_of(&router, "k").as_deref(), Some("http://m-2"));
    assert_eq!(router.epoch(), Some(2));
    let seen = host.wait_for_queries(5).await;
    // The first query asks for the table as it is; every later one waits
    // past the epoch held, with the token.
    assert_eq!((seen[0].after_epoch, seen[0].wait_ms), (None, None));
    assert_eq!((seen[1].after_epoch, seen[1].wait_ms), (Some(1), Some(300)));
    assert_eq!(seen.last().unwrap().after_epoch, Some(2));
    let bearer = format!("Bearer {TOKEN}");
    assert!(
        seen.iter()
            .all(|s| s.authorization.as_deref() == Some(bearer.as_str()))
    );
    assert_eq!(
        router.owner_of("refunds", "k"),
        Err(RouteError::UnknownTopic("refunds".into()))
    );
}

#[tokio::test]
async fn a_503_with_retry_after_is_waited_out_then_the_router_recovers() {
    let host = FakeHost::start(table(1, "m-1")).await;
    host.fault(Fault::ErrorRetryAfter(503, "too_many_watchers", 1));
    let router = Router::start(host.config()).unwrap();
    router.ready(DEADLINE).await.unwrap();
    let seen = host.wait_for_queries(2).await;
    // The pause is at least what the host asked (a lower bound, which no
    // load can break).
    assert!(seen[1].at - seen[0].at >= Duration::from_millis(950));
    assert_eq!(seen[1].after_epoch, None, "still no table after the 503");
    assert_eq!(router.epoch(), Some(1));
}

#[tokio::test]
async fn a_node_that_refuses_connections_is_passed_over_for_the_next_url() {
    let host = FakeHost::start(table(7, "m-1")).await;
    // A port nobody listens on: a dead node.
    let dead = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dead_url = format!("http://{}", dead.local_addr().unwrap());
    drop(dead);
    let config = RouterConfig {
        url: format!("{dead_url}, {}", host.url),
        ..host.config()
    };
    let router = Router::start(config).unwrap();
    router.ready(DEADLINE).await.unwrap();
    assert_eq!(router.epoch(), Some(7));
    assert_eq!(endpoint_of(&router, "x").as_deref(), Some("http://m-1"));
}

#[tokio::test]
async fn a_host_failure_moves_the_router_to_the_next_url() {
    let failing = FakeHost::start(table(1, "stale")).await;
    failing.fault(Fault::Error(500, "internal"));
    let healthy = FakeHost::start(table(4, "m-1")).await;
    let config = RouterConfig {
        url: format!("{},{}", failing.url, healthy.url),
        ..healthy.config()
    };
    let router = Router::start(config).unwrap();
    router.ready(DEADLINE).await.unwrap();
    assert_eq!(router.epoch(), Some(4));
    assert_eq!(failing.seen().len(), 1);
}

#[tokio::test]
async fn a_redirect_is_followed_with_the_token() {
    let coordinator = FakeHost::start(table(3, "m-1")).await;
    let other = FakeHost::start(table(0, "nobody")).await;
    other.fault(Fault::Redirect(format!(
        "{}/v1/groups/orders/routes",
        coordinator.url
    )));
    let router = Router::start(other.config()).unwrap();
    router.ready(DEADLINE).await.unwrap();
    assert_eq!(router.epoch(), Some(3));
    let seen = coordinator.wait_for_queries(1).await;
    assert_eq!(
        seen[0].authorization.as_deref(),
        Some(format!("Bearer {TOKEN}").as_str())
    );
}

#[tokio::test]
async fn a_wrong_token_fails_ready_with_the_hosts_refusal() {
    let host = FakeHost::start(table(1, "m-1")).await;
    let router = Router::start(host.config().with_token("not-the-token")).unwrap();
    let error = router.ready(DEADLINE).await.unwrap_err();
    match &error {
        RouterError::Refused(ClientError::Api { status, code, .. }) => {
            assert_eq!((*status, code.as_str()), (403, "forbidden"));
        }
        other => panic!("{other:?}"),
    }
    assert!(error.to_string().contains("forbidden"), "{error}");
    // Asked again slowly, not at once.
    assert_eq!(host.seen().len(), 1);
}

/// A refusal is asked again slowly; once the host serves the table,
/// `ready` succeeds.
#[tokio::test]
async fn a_refusal_is_asked_again_and_an_answer_clears_it() {
    let host = FakeHost::start(table(1, "m-1")).await;
    host.fault(Fault::Error(404, "group_not_found"));
    let router = Router::start(host.config()).unwrap();
    match router.ready(DEADLINE).await {
        Err(RouterError::Refused(error)) => assert_eq!(error.code(), Some("group_not_found")),
        other => panic!("{other:?}"),
    }
    // Until the next query is answered, `ready` says the refusal again.
    assert!(router.ready(DEADLINE).await.is_err());
    assert_eq!(next_epoch(&mut router.changes()).await, 1);
    router.ready(DEADLINE).await.unwrap();
    let seen = host.seen();
    assert!(seen[1].at - seen[0].at >= Duration::from_millis(4_900));
    assert_eq!(router.epoch(), Some(1));
}

#[tokio::test]
async fn ready_times_out_with_the_last_error() {
    let dead = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", dead.local_addr().unwrap());
    drop(dead);
    let router = Router::start(RouterConfig::new(url, "orders")).unwrap();
    match router.ready(Duration::from_millis(300)).await {
        Err(RouterError::Timeout { last_error, .. }) => assert!(last_error.is_some()),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_misroute_fetches_the_table_at_once_unless_its_route_is_old() {
    let host = FakeHost::start(table(1, "m-1")).await;
    let router = Router::start(host.config().with_wait_ms(20_000)).unwrap();
    router.ready(DEADLINE).await.unwrap();
    let route = router.owner_of("orders", "k").unwrap();
    let mut changes = router.changes();
    changes.borrow_and_update();
    host.wait_for_queries(2).await;
    // The blocking query is not told; only the misroute's fetch sees it.
    host.set_table_silently(table(2, "m-2"));
    router.misrouted(&route);
    assert_eq!(next_epoch(&mut changes).await, 2);
    assert_eq!(router.misroutes(), 1);
    let seen = host.wait_for_queries(3).await;
    assert_eq!(seen[2].after_epoch, None, "a fetch of the table as it is");
    // A route of an older table than the one held asks nothing more.
    router.misrouted(&route);
    assert_eq!(router.misroutes(), 2);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let plain = host
        .seen()
        .iter()
        .filter(|s| s.after_epoch.is_none())
        .count();
    assert_eq!(plain, 2, "the first query and the one fetch");
}

#[tokio::test]
async fn a_lower_epoch_answered_past_the_one_held_replaces_it() {
    let host = FakeHost::start(table(5, "m-1")).await;
    let router = Router::start(host.config()).unwrap();
    router.ready(DEADLINE).await.unwrap();
    let mut changes = router.changes();
    changes.borrow_and_update();
    host.wait_for_queries(2).await;
    // The router's table came from a host that no longer serves the group.
    host.set_table(table(3, "m-3"));
    assert_eq!(next_epoch(&mut changes).await, 3);
    assert_eq!(endpoint_of(&router, "k").as_deref(), Some("http://m-3"));
}

#[tokio::test]
async fn a_config_that_cannot_work_is_refused_before_starting() {
    for config in [
        RouterConfig::new("http://127.0.0.1:1", ""),
        RouterConfig::new("not a url", "orders"),
        RouterConfig::new("http://127.0.0.1:1", "orders").with_wait_ms(0),
        RouterConfig::new("http://127.0.0.1:1", "orders").with_token("a b"),
    ] {
        assert!(
            matches!(Router::start(config.clone()), Err(ClientError::Config(_))),
            "{config:?}"
        );
    }
}

/// Epoch `epoch` of [`table`], promising `valid_ms`.
fn table_valid_for(epoch: u64, valid_ms: u64) -> RoutesBody {
    RoutesBody {
        valid_ms,
        ..table(epoch, "m-1")
    }
}

#[tokio::test]
async fn the_bound_counts_from_the_send_time_plus_the_wait_the_host_reports() {
    let host = FakeHost::start(table_valid_for(1, 2_000)).await;
    // Answered at once, yet the host says the query waited 1.5 s before
    // it read the table: the promise runs 2 s from then.
    host.say_waited(1_500);
    let router = Router::start(host.config().with_wait_ms(20_000)).unwrap();
    router.ready(DEADLINE).await.unwrap();
    let held = router.table().unwrap();
    assert_eq!(held.waited(), Duration::from_millis(1_500));
    assert_eq!(
        held.fresh_until() - held.sent_at(),
        Duration::from_millis(3_500)
    );
    let sent = held.sent_at();
    assert!(held.is_fresh_at(sent + Duration::from_millis(3_499)));
    assert!(!held.is_fresh_at(sent + Duration::from_millis(3_500)));
}

#[tokio::test]
async fn an_answer_without_the_waited_header_counts_from_the_send_time() {
    let host = FakeHost::start(table_valid_for(1, 2_000)).await;
    let router = Router::start(host.config()).unwrap();
    router.ready(DEADLINE).await.unwrap();
    let held = router.table().unwrap();
    assert_eq!(held.waited(), Duration::ZERO);
    assert_eq!(
        held.fresh_until() - held.sent_at(),
        Duration::from_millis(2_000)
    );
}

#[tokio::test]
async fn a_query_past_a_promising_table_waits_half_its_bound_at_most() {
    let host = FakeHost::start(table_valid_for(1, 2_000)).await;
    let router = Router::start(host.config().with_wait_ms(20_000)).unwrap();
    router.ready(DEADLINE).await.unwrap();
    let seen = host.wait_for_queries(2).await;
    assert_eq!(
        (seen[1].after_epoch, seen[1].wait_ms),
        (Some(1), Some(1_000))
    );
    // A table that promises nothing: the configured wait.
    let mut changes = router.changes();
    changes.borrow_and_update();
    host.set_table(table_valid_for(2, 0));
    assert_eq!(next_epoch(&mut changes).await, 2);
    let seen = host.wait_for_queries(3).await;
    assert_eq!(
        (seen[2].after_epoch, seen[2].wait_ms),
        (Some(2), Some(20_000))
    );
}

#[tokio::test]
async fn a_configured_wait_under_half_the_bound_is_kept() {
    let host = FakeHost::start(table_valid_for(1, 2_000)).await;
    let router = Router::start(host.config().with_wait_ms(300)).unwrap();
    router.ready(DEADLINE).await.unwrap();
    let seen = host.wait_for_queries(2).await;
    assert_eq!(seen[1].wait_ms, Some(300));
}
