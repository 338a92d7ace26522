//! The HTTP server under hostile clients, through the real binary: slow
//! heads (slowloris), slow bodies, idle keep-alive connections, SIGTERM
//! with slow clients attached, a connection flood past the descriptor
//! limit, and joins without a member token. Every wait polls a condition
//! with a deadline; the timeouts are made small by `serve`'s flags.

use crate::common;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::common::{ADMIN_TOKEN, Server};
use serde_json::json;

/// How long a test waits for the server to close a connection whose
/// timeout is well below it.
const CLOSE_DEADLINE: Duration = Duration::from_secs(10);

/// A raw TCP connection to `server`.
fn connect(server: &Server) -> TcpStream {
    let address = server.base.strip_prefix("http://").expect("http base");
    let stream = TcpStream::connect(address).expect("connect");
    stream.set_nodelay(true).unwrap();
    stream
}

/// Reads until the server closes `stream` (EOF or reset) and returns what
/// it sent; panics if it is still open at `deadline`.
fn read_until_closed(stream: &mut TcpStream, deadline: Instant, what: &str) -> Vec<u8> {
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "{what}: the server did not close the connection in time"
        );
        stream.set_read_timeout(Some(left)).unwrap();
        match stream.read(&mut buffer) {
            Ok(0) => return received,
            Ok(n) => received.extend_from_slice(&buffer[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return received,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => panic!("{what}: reading: {e}"),
        }
    }
}

/// One request on a kept-alive raw connection; returns the status and
/// the JSON answer. The answer must carry a content-length (axum's JSON
/// answers do).
fn request(
    stream: &mut TcpStream,
    method: &str,
    path: &str,
    body: Option<&serde_json::Value>,
) -> (u16, serde_json::Value) {
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nhost: test\r\nauthorization: Bearer {ADMIN_TOKEN}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body.as_bytes()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        if let Some(end) = received.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&received[..end]).to_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length: "))
                .unwrap_or_else(|| panic!("no content-length in {head}"))
                .trim()
                .parse()
                .unwrap();
            if received.len() >= end + 4 + length {
                let status = head[9..12].parse().unwrap();
                let text = &received[end + 4..end + 4 + length];
                let value = serde_json::from_slice(text).unwrap_or(serde_json::Value::Null);
                return (status, value);
            }
        }
        let n = stream.read(&mut buffer).expect("reading the answer");
        assert!(
            n > 0,
            "{method} {path}: the connection closed before the answer"
        );
        received.extend_from_slice(&buffer[..n]);
    }
}

fn status_line(received: &[u8]) -> String {
    String::from_utf8_lossy(received)
        .lines()
        .next()
        .unwrap_or("")
        .to_owned()
}

#[test]
fn slowloris_heads_are_closed_within_the_header_read_timeout() {
    let server = Server::start(
        &common::scratch("hardening-slowloris"),
        &["--header-read-timeout-ms", "300"],
    );
    let mut sockets: Vec<TcpStream> = (0..20)
        .map(|_| {
            let mut socket = connect(&server);
            // A head that never ends.
            socket
                .write_all(b"POST /v1/groups/g/heartbeat HTTP/1.1\r\nhost: test\r\nx-slow: 1\r\n")
                .unwrap();
            socket
        })
        .collect();
    let deadline = Instant::now() + CLOSE_DEADLINE;
    for socket in &mut sockets {
        read_until_closed(socket, deadline, "a slowloris head");
    }
    let (status, _) = server.call("GET", "/healthz", None);
    assert_eq!(status, 200);
}

#[test]
fn a_slow_body_is_answered_408_and_closed() {
    let server = Server::start(
        &common::scratch("hardening-slow-body"),
        &["--body-read-timeout-ms", "300"],
    );
    let mut socket = connect(&server);
    socket
        .write_all(
            b"POST /v1/groups/g/heartbeat HTTP/1.1\r\nhost: test\r\n\
              content-type: application/json\r\ncontent-length: 100\r\n\r\n{\"member",
        )
        .unwrap();
    let received = read_until_closed(&mut socket, Instant::now() + CLOSE_DEADLINE, "a slow body");
    let text = String::from_utf8_lossy(&received);
    assert!(status_line(&received).starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("\"request_timeout\""), "{text}");
}

#[test]
fn an_idle_keep_alive_connection_is_closed() {
    let server = Server::start(
        &common::scratch("hardening-idle"),
        &["--header-read-timeout-ms", "300"],
    );
    let mut socket = connect(&server);
    let (status, _) = request(&mut socket, "GET", "/healthz", None);
    assert_eq!(status, 200);
    // Kept alive after the answer; then idle.
    let received = read_until_closed(
        &mut socket,
        Instant::now() + CLOSE_DEADLINE,
        "an idle keep-alive connection",
    );
    assert!(
        received.is_empty() || status_line(&received).starts_with("HTTP/1.1 408"),
        "{}",
        String::from_utf8_lossy(&received)
    );
}

#[cfg(unix)]
#[test]
fn sigterm_with_slow_clients_attached_exits_within_the_drain_and_frees_the_data_dir() {
    let data_dir = common::scratch("hardening-sigterm");
    let mut server = Server::start(
        &data_dir,
        &[
            "--shutdown-drain-ms",
            "500",
            "--header-read-timeout-ms",
            "600000",
            "--body-read-timeout-ms",
            "600000",
        ],
    );
    // A slow head and a slow body, both still sending while the server
    // shuts down.
    let mut slow_head = connect(&server);
    slow_head
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: test\r\n")
        .unwrap();
    let mut slow_body = connect(&server);
    slow_body
        .write_all(
            b"POST /v1/groups/g/heartbeat HTTP/1.1\r\nhost: test\r\n\
              content-type: application/json\r\ncontent-length: 100000\r\n\r\n",
        )
        .unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let trickle = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if slow_head.write_all(b"x-slow: 1\r\n").is_err()
                    || slow_body.write_all(b" ").is_err()
                {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    let (status, _) = server.call("GET", "/healthz", None);
    assert_eq!(status, 200);

    let signalled = Instant::now();
    server.signal(libc::SIGTERM);
    // The drain (500 ms) plus the runtime's own shutdown grace (2 s) and
    // slack for a loaded machine.
    let status = server.exit_by(
        signalled + Duration::from_secs(10),
        "still running 10 s after SIGTERM with slow clients attached",
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    trickle.join().unwrap();
    assert!(status.success(), "exit status after SIGTERM: {status}");

    // The data dir is free: a new host starts on it.
    let replacement = Server::start(&data_dir, &[]);
    let (status, _) = replacement.call("GET", "/healthz", None);
    assert_eq!(status, 200);
}

/// A group config of about 500 KB (2,000 topics with long names), so that
/// a dozen PUTs pass the log's compaction threshold (4 MiB).
fn big_config(round: usize) -> serde_json::Value {
    let topics: Vec<serde_json::Value> = (0..2_000)
        .map(|i| json!({"name": format!("{round:03}-{i:05}-{}", "t".repeat(230)), "partitions": 1}))
        .collect();
    json!({"topics": topics, "assignor": "range"})
}

/// The bytes of every file under `dir`, its folders' included.
fn dir_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            let metadata = entry.metadata().unwrap();
            if metadata.is_dir() {
                dir_bytes(&entry.path())
            } else {
                metadata.len()
            }
        })
        .sum()
}

#[cfg(target_os = "linux")]
#[test]
fn a_connection_flood_past_the_descriptor_limit_leaves_writes_and_health_intact() {
    // 256 descriptors, soft and hard (serve raises soft to hard): the cap
    // is 256 less the 131 in reserve (128, and 3 for the one shard).
    const DESCRIPTORS: u64 = 256;
    let data_dir = common::scratch("hardening-descriptors");
    let server = Server::start_with(
        &data_dir,
        &["--fsync", "never", "--shards", "1"],
        |command| common::limit_descriptors(command, DESCRIPTORS),
    );
    // One connection opened before the flood, kept alive through it.
    let mut admin = connect(&server);
    let (status, _) = request(&mut admin, "GET", "/healthz", None);
    assert_eq!(status, 200);

    // Idle connections past the limit: those past the cap are answered
    // 503 `too_many_connections` and closed at once.
    let mut flood: Vec<TcpStream> = (0..2 * DESCRIPTORS).map(|_| connect(&server)).collect();
    let deadline = Instant::now() + CLOSE_DEADLINE;
    let mut refused = 0;
    for socket in &mut flood {
        socket
            .set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        let mut first = [0u8; 64];
        match socket.read(&mut first) {
            Ok(n) if n > 0 => {
                assert!(
                    first.starts_with(b"HTTP/1.1 503"),
                    "{:?}",
                    String::from_utf8_lossy(&first)
                );
                read_until_closed(socket, deadline, "a connection past the cap");
                refused += 1;
            }
            _ => {}
        }
    }
    assert!(
        refused >= DESCRIPTORS as usize,
        "{refused} of {} connections refused",
        flood.len()
    );

    // With the flood attached, writes go on, enough of them to compact
    // the log (which needs descriptors of its own).
    let mut written = 0u64;
    let mut topic = serde_json::Value::Null;
    for round in 0..12 {
        let config = big_config(round);
        topic = config["topics"][0]["name"].clone();
        written += config.to_string().len() as u64;
        let (status, answer) = request(&mut admin, "PUT", "/v1/groups/big", Some(&config));
        assert!(
            status == 200 || status == 201,
            "PUT {round}: {status} {answer}"
        );
    }
    let log_bytes = dir_bytes(&data_dir.join("shards"));
    assert!(
        log_bytes < written / 2,
        "the log was compacted: {log_bytes} bytes on disk after {written} written"
    );
    let (status, answer) = request(
        &mut admin,
        "POST",
        "/v1/groups/big/heartbeat",
        Some(&json!({"member_id": "", "member_epoch": 0, "topics": [topic]})),
    );
    assert_eq!(status, 200, "a join during the flood: {answer}");
    let (status, health) = request(&mut admin, "GET", "/healthz", None);
    assert_eq!((status, &health["status"]), (200, &json!("ok")));

    // After the flood: new clients are served.
    drop(flood);
    let deadline = Instant::now() + CLOSE_DEADLINE;
    loop {
        let mut fresh = connect(&server);
        fresh
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let (status, health) = request(&mut fresh, "GET", "/healthz", None);
        if status == 200 {
            assert_eq!(health["status"], "ok");
            break;
        }
        assert_eq!(health["error"]["code"], "too_many_connections");
        assert!(Instant::now() < deadline, "still refused after the flood");
        std::thread::sleep(Duration::from_millis(20));
    }
    // An operator sees the refusals and the open connections.
    let metrics = Server::agent()
        .get(format!("{}/metrics", server.base))
        .call()
        .expect("GET /metrics")
        .body_mut()
        .read_to_string()
        .expect("the metrics text");
    let value = |name: &str| -> f64 {
        metrics
            .lines()
            .find_map(|line| line.strip_prefix(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name} in {metrics}"))
            .parse()
            .expect("a number")
    };
    assert!(
        value("assignd_http_connections_refused_total") >= refused as f64,
        "{refused} refused"
    );
    let open = value("assignd_http_connections");
    assert!(
        (1.0..DESCRIPTORS as f64).contains(&open),
        "{open} connections open"
    );
}

/// A heartbeat to `group` with `token` as its bearer (none: no
/// `Authorization`); the status, the `Retry-After` header and the answer.
fn heartbeat_as(
    server: &Server,
    group: &str,
    token: Option<&str>,
    body: &serde_json::Value,
) -> (u16, Option<String>, serde_json::Value) {
    let url = format!("{}/v1/groups/{group}/heartbeat", server.base);
    let mut request = Server::agent().post(&url);
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let mut response = request.send_json(body).expect("heartbeat");
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    let answer = response.body_mut().read_json().expect("a JSON answer");
    (response.status().as_u16(), retry_after, answer)
}

fn join(name: Option<&str>) -> serde_json::Value {
    json!({"member_id": "", "member_name": name, "member_epoch": 0, "topics": ["orders"]})
}

const MEMBER_TOKEN: &str = "member-token-of-the-e2e-group";

#[test]
fn joins_that_add_members_to_a_group_without_a_member_token_are_rate_limited() {
    let server = Server::start(
        &common::scratch("hardening-join-rate"),
        &[
            "--tokenless-join-burst-max",
            "3",
            "--tokenless-join-rate-per-s",
            "1",
        ],
    );
    let config = json!({"topics": [{"name": "orders", "partitions": 4}]});
    let (status, _) = server.call("PUT", "/v1/groups/open", Some(&config));
    assert_eq!(status, 201);
    let mut with_token = config.clone();
    with_token["member_token"] = json!(MEMBER_TOKEN);
    let (status, _) = server.call("PUT", "/v1/groups/closed", Some(&with_token));
    assert_eq!(status, 201);

    // The burst: three new members, then refused with a retry time.
    for name in ["a", "b", "c"] {
        let (status, _, answer) = heartbeat_as(&server, "open", None, &join(Some(name)));
        assert_eq!(status, 200, "{name}: {answer}");
    }
    let (status, retry_after, answer) = heartbeat_as(&server, "open", None, &join(None));
    assert_eq!(status, 429, "{answer}");
    assert_eq!(answer["error"]["code"], "join_rate_limited");
    let seconds: u64 = retry_after.expect("Retry-After").parse().unwrap();
    assert!((1..=2).contains(&seconds), "Retry-After {seconds}");
    // A static member's restart takes its slot over: not a new member.
    let (status, _, answer) = heartbeat_as(&server, "open", None, &join(Some("a")));
    assert_eq!(status, 200, "a restarts: {answer}");

    // The refill: one more within the retry time (polled, with slack).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, _, answer) = heartbeat_as(&server, "open", None, &join(Some("d")));
        if status == 200 {
            break;
        }
        assert_eq!(answer["error"]["code"], "join_rate_limited");
        assert!(Instant::now() < deadline, "never refilled");
        std::thread::sleep(Duration::from_millis(100));
    }

    // A group with a member token is not limited.
    for i in 0..10 {
        let name = format!("m{i}");
        let (status, _, answer) =
            heartbeat_as(&server, "closed", Some(MEMBER_TOKEN), &join(Some(&name)));
        assert_eq!(status, 200, "{name}: {answer}");
    }
}

#[test]
fn require_member_token_refuses_groups_without_one() {
    let data_dir = common::scratch("hardening-require-token");
    let config = json!({"topics": [{"name": "orders", "partitions": 4}]});
    {
        let before = Server::start(&data_dir, &[]);
        let (status, _) = before.call("PUT", "/v1/groups/old", Some(&config));
        assert_eq!(status, 201);
    }
    let server = Server::start(&data_dir, &["--require-member-token"]);
    let (status, answer) = server.call("PUT", "/v1/groups/new", Some(&config));
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["error"]["code"], "member_token_required");
    let (status, answer) = server.call("GET", "/v1/groups/new", None);
    assert_eq!(status, 404, "nothing was created: {answer}");

    // A group created before the flag: its heartbeats are refused until an
    // admin gives it a token.
    let (status, _, answer) = heartbeat_as(&server, "old", None, &join(None));
    assert_eq!(status, 403, "{answer}");
    assert_eq!(answer["error"]["code"], "member_token_required");
    let mut with_token = config.clone();
    with_token["member_token"] = json!(MEMBER_TOKEN);
    let (status, answer) = server.call("PUT", "/v1/groups/old", Some(&with_token));
    assert_eq!(status, 200, "{answer}");
    let (status, _, answer) = heartbeat_as(&server, "old", Some(MEMBER_TOKEN), &join(None));
    assert_eq!(status, 200, "{answer}");

    // Removing the token is a config without one: refused, token kept.
    let mut without = config.clone();
    without["member_token"] = serde_json::Value::Null;
    let (status, answer) = server.call("PUT", "/v1/groups/old", Some(&without));
    assert_eq!(status, 400, "{answer}");
    let (status, _, answer) = heartbeat_as(&server, "old", None, &join(None));
    assert_eq!(
        (status, &answer["error"]["code"]),
        (401, &json!("unauthorized"))
    );
}

#[cfg(target_os = "linux")]
#[test]
fn a_connection_cap_past_the_descriptor_limit_is_refused_at_start() {
    let dir = common::scratch("hardening-cap-too-high");
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_assignd"));
    command
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--connections-max",
            "200",
            "--shards",
            "4",
        ])
        .arg("--data-dir")
        .arg(dir.join("data"))
        .env("ASSIGND_ADMIN_TOKEN", ADMIN_TOKEN);
    common::limit_descriptors(&mut command, 256);
    let output = command.output().expect("cannot start assignd");
    // 128 in reserve, and 3 for each of the 4 shards.
    common::assert_one_error_line(&output, 1, "at most 116 fit");
    assert!(
        !dir.join("data").exists(),
        "refused before touching the data dir"
    );
}

#[cfg(target_os = "linux")]
#[test]
fn serve_raises_its_soft_descriptor_limit_to_the_hard_one() {
    // 300 connections fit only under the raised limit (512 less 128, less
    // 3 for each of the 4 shards).
    let server = Server::start_with(
        &common::scratch("hardening-raise"),
        &["--connections-max", "300", "--shards", "4"],
        |command| common::limit_descriptors_to(command, 200, 512),
    );
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", server.child.id())).unwrap();
    let open_files = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("a Max open files line");
    let figures: Vec<&str> = open_files.split_whitespace().skip(3).take(2).collect();
    assert_eq!(figures, ["512", "512"], "{open_files}");
}
