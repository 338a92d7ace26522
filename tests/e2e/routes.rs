//! The routing API through the real binary (docs/routing.md): the reader
//! token, members' endpoints (durable across a kill -9), the table and a
//! lookup, the blocking query, the event stream and its resumption, the
//! cap on watchers, and a stream whose reader never reads.

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::common::{Member, Server};
use serde_json::{Value, json};

const GROUP: &str = "kv";
const READER_TOKEN: &str = "e2e-reader-token-77a1";
const WITHIN: Duration = Duration::from_secs(30);

fn config() -> Value {
    json!({
        "topics": [{"name": "orders", "partitions": 12}],
        "expansion_timeout_ms": 100,
        "heartbeat_interval_ms": 200,
        "learners": "off",
        "reader_token": READER_TOKEN,
    })
}

/// `GET path` with `token` (none if `None`): status, answer, headers.
pub fn get_as(
    server: &Server,
    path: &str,
    token: Option<&str>,
) -> (u16, Value, ureq::http::HeaderMap) {
    let url = format!("{}{path}", server.base);
    let mut request = Server::agent().get(&url);
    if let Some(token) = token {
        request = request.header("authorization", &format!("Bearer {token}"));
    }
    let mut response = request.call().unwrap_or_else(|e| panic!("GET {url}: {e}"));
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.body_mut().read_to_string().unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::Null),
        headers,
    )
}

fn routes(server: &Server, query: &str) -> Value {
    let (status, table, _) = get_as(
        server,
        &format!("/v1/groups/{GROUP}/routes{query}"),
        Some(READER_TOKEN),
    );
    assert_eq!(status, 200, "{table}");
    table
}

/// Joins a dynamic member publishing `endpoint`, and heartbeats it until
/// the group is stable.
fn join_serving(server: &Server, endpoint: &str) -> Member {
    let body = json!({
        "member_id": "", "member_epoch": 0, "topics": ["orders"],
        "endpoint": endpoint, "metadata": {"zone": "a"},
    });
    Member::join_with(server, GROUP, "serving", body)
}

fn settle(server: &Server, members: &mut [Member]) {
    let deadline = Instant::now() + WITHIN;
    loop {
        for member in members.iter_mut() {
            member.heartbeat(server, GROUP);
        }
        let (_, view) = server.call("GET", &format!("/v1/groups/{GROUP}"), None);
        if view["state"] == "stable" && members.iter().all(|m| !m.active.is_empty()) {
            return;
        }
        assert!(Instant::now() < deadline, "never stable: {view}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_reader_token_reads_the_routes_and_nothing_else() {
    let server = Server::start(&common::scratch("routes-reader"), &[]);
    let (status, view) = server.call("PUT", &format!("/v1/groups/{GROUP}"), Some(&config()));
    assert_eq!(status, 201, "{view}");
    assert_eq!(view["reader_token"], true, "{view}");
    assert!(!view.to_string().contains("reader_token_sha256"), "{view}");

    let path = format!("/v1/groups/{GROUP}/routes");
    let (status, refused, headers) = get_as(&server, &path, None);
    assert_eq!(
        (status, &refused["error"]["code"]),
        (401, &json!("unauthorized"))
    );
    assert_eq!(headers["www-authenticate"], "Bearer");
    let (status, refused, _) = get_as(&server, &path, Some("not-the-reader-token-0000"));
    assert_eq!(
        (status, &refused["error"]["code"]),
        (403, &json!("forbidden"))
    );
    for token in [READER_TOKEN, common::ADMIN_TOKEN] {
        let (status, table, headers) = get_as(&server, &path, Some(token));
        assert_eq!(status, 200, "{table}");
        assert_eq!(
            headers["assignd-routes-epoch"],
            table["epoch"].to_string().as_str()
        );
        assert_eq!(table["unowned"], json!([["orders", 0, 11]]));
    }
    // The reader token opens nothing else.
    let (status, _, _) = get_as(&server, &format!("/v1/groups/{GROUP}"), Some(READER_TOKEN));
    assert_eq!(status, 403);
    // A lookup of a topic the group does not have, and a bad query.
    let lookup = format!("/v1/groups/{GROUP}/routes/lookup");
    let (status, refused, _) = get_as(
        &server,
        &format!("{lookup}?topic=refunds&key=k"),
        Some(READER_TOKEN),
    );
    assert_eq!(
        (status, &refused["error"]["code"]),
        (404, &json!("unknown_topic"))
    );
    let (status, refused, _) = get_as(
        &server,
        &format!("{lookup}?topic=orders"),
        Some(READER_TOKEN),
    );
    assert_eq!(
        (status, &refused["error"]["code"]),
        (400, &json!("invalid_query"))
    );
    let (status, refused, _) = get_as(
        &server,
        &format!("{path}?after_epoch=x"),
        Some(READER_TOKEN),
    );
    assert_eq!(
        (status, &refused["error"]["code"]),
        (400, &json!("invalid_query"))
    );
    // Removing the token leaves the routes to the admin token.
    let mut without = config();
    without["reader_token"] = Value::Null;
    let (status, view) = server.call("PUT", &format!("/v1/groups/{GROUP}"), Some(&without));
    assert_eq!((status, &view["reader_token"]), (200, &json!(false)));
    let (status, _, _) = get_as(&server, &path, Some(READER_TOKEN));
    assert_eq!(status, 403);
}

#[test]
fn endpoints_and_the_table_epoch_survive_a_kill_9() {
    let data_dir = common::scratch("routes-durable");
    let server = Server::start(&data_dir, &[]);
    server.call("PUT", &format!("/v1/groups/{GROUP}"), Some(&config()));
    let mut members = [join_serving(&server, "http://10.0.0.5:8080")];
    settle(&server, &mut members);
    let before = routes(&server, "");
    let id = members[0].member_id.clone();
    assert_eq!(before["members"][&id]["endpoint"], "http://10.0.0.5:8080");
    assert_eq!(before["active"][&id], json!([["orders", 0, 11]]));
    let (_, view) = server.call("GET", &format!("/v1/groups/{GROUP}"), None);
    assert_eq!(
        view["members"][0]["endpoint"], "http://10.0.0.5:8080",
        "{view}"
    );
    assert_eq!(
        view["members"][0]["metadata"],
        json!({"zone": "a"}),
        "{view}"
    );

    server.signal(libc::SIGKILL);
    drop(server);
    let server = Server::start(&data_dir, &[]);
    let after = routes(&server, "");
    assert_eq!(after["members"], before["members"]);
    assert_eq!(after["active"], before["active"]);
    assert_eq!(after["epoch"], before["epoch"], "the epoch is the records'");
    let (status, found, _) = get_as(
        &server,
        &format!("/v1/groups/{GROUP}/routes/lookup?topic=orders&key=customer-42"),
        Some(READER_TOKEN),
    );
    assert_eq!(status, 200, "{found}");
    assert_eq!(
        found["partition"], 9,
        "Kafka's murmur2 of customer-42, mod 12"
    );
    assert_eq!(found["owner"]["endpoint"], "http://10.0.0.5:8080");
}

#[test]
fn a_blocking_query_answers_on_a_change_and_otherwise_when_its_wait_ends() {
    let server = Server::start(&common::scratch("routes-blocking"), &[]);
    server.call("PUT", &format!("/v1/groups/{GROUP}"), Some(&config()));
    // The new group's first (empty) target is a change too: wait for it.
    let deadline = Instant::now() + WITHIN;
    loop {
        let (_, view) = server.call("GET", &format!("/v1/groups/{GROUP}"), None);
        if view["target_epoch"] == view["group_epoch"] {
            break;
        }
        assert!(Instant::now() < deadline, "no first target: {view}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let epoch = routes(&server, "")["epoch"].as_u64().unwrap();
    // Nothing changes: the answer is the same table, once the wait ends.
    let same = routes(&server, &format!("?after_epoch={epoch}&wait_ms=200"));
    assert_eq!(same["epoch"], epoch);
    // A member joins while a query waits: it is answered the new table.
    let changed = std::thread::scope(|scope| {
        let waiting =
            scope.spawn(|| routes(&server, &format!("?after_epoch={epoch}&wait_ms=20000")));
        wait_for_watchers(&server, 1);
        let mut members = [join_serving(&server, "http://a:1")];
        settle(&server, &mut members);
        waiting.join().unwrap()
    });
    assert!(changed["epoch"].as_u64().unwrap() > epoch, "{changed}");
    assert_eq!(
        changed["members"].as_object().unwrap().len(),
        1,
        "{changed}"
    );
}

fn wait_for_watchers(server: &Server, count: u64) {
    let deadline = Instant::now() + WITHIN;
    while server.metric("assignd_routes_watchers") != Some(count as f64) {
        assert!(Instant::now() < deadline, "never {count} watchers");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn past_the_watcher_cap_a_watch_is_refused_with_retry_after() {
    let server = Server::start(
        &common::scratch("routes-cap"),
        &["--routes-watchers-max", "2"],
    );
    server.call("PUT", &format!("/v1/groups/{GROUP}"), Some(&config()));
    let epoch = routes(&server, "")["epoch"].as_u64().unwrap();
    let query = format!("/v1/groups/{GROUP}/routes?after_epoch={epoch}&wait_ms=3000");
    std::thread::scope(|scope| {
        let waiting: Vec<_> = (0..2)
            .map(|_| scope.spawn(|| get_as(&server, &query, Some(READER_TOKEN)).0))
            .collect();
        wait_for_watchers(&server, 2);
        let (status, refused, headers) = get_as(&server, &query, Some(READER_TOKEN));
        assert_eq!(
            (status, &refused["error"]["code"]),
            (503, &json!("too_many_watchers"))
        );
        assert_eq!(headers["retry-after"], "1");
        // A plain read is no watcher: it is answered.
        assert_eq!(routes(&server, "")["epoch"], epoch);
        for waiting in waiting {
            assert_eq!(waiting.join().unwrap(), 200);
        }
    });
    wait_for_watchers(&server, 0);
    assert_eq!(
        get_as(&server, &query.replace("3000", "10"), Some(READER_TOKEN)).0,
        200
    );
}

/// An event stream opened with a raw socket: the request is sent, the
/// head read; `events` reads each following event's id and data.
struct Stream {
    reader: BufReader<TcpStream>,
}

impl Stream {
    fn open(server: &Server, last_event_id: Option<u64>) -> Stream {
        let address = server.base.trim_start_matches("http://");
        let mut socket = TcpStream::connect(address).unwrap();
        socket.set_read_timeout(Some(WITHIN)).unwrap();
        let resume = last_event_id.map_or(String::new(), |id| format!("Last-Event-ID: {id}\r\n"));
        write!(
            socket,
            "GET /v1/groups/{GROUP}/routes HTTP/1.1\r\nHost: {address}\r\nAccept: text/event-stream\r\n\
             Authorization: Bearer {READER_TOKEN}\r\n{resume}\r\n"
        )
        .unwrap();
        let mut reader = BufReader::new(socket);
        let mut status = String::new();
        reader.read_line(&mut status).unwrap();
        assert!(status.starts_with("HTTP/1.1 200"), "{status}");
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if line == "\r\n" {
                break;
            }
        }
        Stream { reader }
    }

    /// The next event's id and table (chunk sizes and comments skipped).
    fn next_event(&mut self) -> (u64, Value) {
        let (mut id, mut data) = (None, None);
        loop {
            let mut line = String::new();
            assert!(
                self.reader.read_line(&mut line).unwrap() > 0,
                "the stream ended"
            );
            let line = line.trim_end();
            if let Some(value) = line.strip_prefix("id: ") {
                id = value.parse().ok();
            } else if let Some(value) = line.strip_prefix("data: ") {
                data = Some(serde_json::from_str(value).unwrap());
            } else if line.is_empty()
                && let (Some(id), Some(data)) = (id, data.take())
            {
                return (id, data);
            }
        }
    }
}

#[test]
fn an_event_stream_sends_each_new_table_and_resumes_after_last_event_id() {
    let server = Server::start(&common::scratch("routes-stream"), &[]);
    server.call("PUT", &format!("/v1/groups/{GROUP}"), Some(&config()));
    let mut stream = Stream::open(&server, None);
    let (first, table) = stream.next_event();
    assert_eq!(table["epoch"], first);
    let mut members = [join_serving(&server, "http://a:1")];
    settle(&server, &mut members);
    let settled = routes(&server, "")["epoch"].as_u64().unwrap();
    let mut seen = first;
    while seen < settled {
        let (id, table) = stream.next_event();
        assert!(id > seen, "epochs only rise: {seen} then {id}");
        assert_eq!(table["epoch"], id);
        seen = id;
    }
    // Resumed after an older table: the newest at once.
    let mut resumed = Stream::open(&server, Some(first));
    let (id, table) = resumed.next_event();
    assert_eq!(id, settled);
    assert_eq!(
        table["members"][&members[0].member_id]["endpoint"],
        "http://a:1"
    );
}

#[test]
fn a_stream_whose_reader_never_reads_is_closed_and_frees_its_place() {
    let server = Server::start(
        &common::scratch("routes-slow"),
        &["--routes-slow-reader-ms", "200"],
    );
    server.call("PUT", &format!("/v1/groups/{GROUP}"), Some(&config()));
    let mut members = [join_serving(&server, "http://a:1")];
    settle(&server, &mut members);
    // A reader that reads the head and then nothing.
    let stalled = Stream::open(&server, None);
    wait_for_watchers(&server, 1);
    // Tables of about 4 KiB, one per change, until the socket's buffers
    // are full and the stream has waited past its slow-reader time.
    let big = |round: usize| -> Value {
        (0..16)
            .map(|k| (format!("k{k}"), json!(format!("{round:0>250}"))))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    let deadline = Instant::now() + WITHIN;
    let mut round = 0;
    while server.metric("assignd_routes_watchers") != Some(0.0) {
        assert!(
            Instant::now() < deadline,
            "the stalled stream was never closed"
        );
        round += 1;
        let (status, answer) =
            members[0].try_heartbeat(&server, GROUP, json!({"metadata": big(round)}));
        assert_eq!(status, 200, "{answer}");
    }
    // Closed by the host: the socket ends once what was sent is read.
    let mut rest = Vec::new();
    let mut socket = stalled.reader;
    socket.get_mut().set_read_timeout(Some(WITHIN)).unwrap();
    socket.read_to_end(&mut rest).unwrap();
    assert!(!rest.is_empty());
}
