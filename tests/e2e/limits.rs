//! Input and limits, through the real binary: the name rule on every name
//! a request brings in (topics, racks, param keys, assignor references,
//! module names and versions), an upload body cut short, the caps on
//! groups and on uploaded modules, and the connection cap printed at start
//! as the docs give its formula.

use crate::common;

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

use crate::common::{ADMIN_TOKEN, Server};
use serde_json::{Value, json};

/// A raw TCP connection to `server`.
fn connect(server: &Server) -> TcpStream {
    let address = server.base.strip_prefix("http://").expect("http base");
    let stream = TcpStream::connect(address).expect("connect");
    stream.set_nodelay(true).unwrap();
    stream
}

/// Reads until the server closes `stream` (EOF or reset); panics if it is
/// still open at `deadline`.
fn read_until_closed(stream: &mut TcpStream, deadline: Instant) -> Vec<u8> {
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "the server did not close the connection");
        stream.set_read_timeout(Some(left)).unwrap();
        match stream.read(&mut buffer) {
            Ok(0) => return received,
            Ok(n) => received.extend_from_slice(&buffer[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return received,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => panic!("reading: {e}"),
        }
    }
}

#[test]
fn an_upload_body_cut_short_is_400_incomplete_body_not_413() {
    let server = Server::start(&common::scratch("limits-short-upload"), &[]);
    let mut stream = connect(&server);
    let head = format!(
        "POST /v1/assignors?name=short&version=1 HTTP/1.1\r\nhost: test\r\n\
         authorization: Bearer {ADMIN_TOKEN}\r\ncontent-type: application/wasm\r\n\
         content-length: 1000\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(b"\0asm\x0d\0\x01\0\0\0").unwrap();
    stream.shutdown(Shutdown::Write).unwrap();
    let received = read_until_closed(&mut stream, Instant::now() + Duration::from_secs(30));
    let text = String::from_utf8_lossy(&received);
    assert!(text.starts_with("HTTP/1.1 400 "), "{text}");
    let body: Value = serde_json::from_str(text.split_once("\r\n\r\n").expect("a body").1)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    assert_eq!(body["error"]["code"], "incomplete_body", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("cut short"), "{message}");
    let (status, list) = server.call("GET", "/v1/assignors", None);
    assert_eq!(status, 200);
    assert!(
        list["assignors"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["name"] != "short"),
        "nothing stored: {list}"
    );
}

/// Starts `assignd serve --shards SHARDS` under an RLIMIT_NOFILE of
/// `descriptors` (soft and hard) with the default log filter; returns the
/// line it logged with its connection cap.
#[cfg(target_os = "linux")]
fn cap_line_under(descriptors: u64, shards: u32) -> String {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    let dir = common::scratch(&format!("limits-cap-{descriptors}-{shards}"));
    let mut command = Command::new(env!("CARGO_BIN_EXE_assignd"));
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--shards"])
        .arg(shards.to_string())
        .arg("--data-dir")
        .arg(dir.join("data"))
        .env("ASSIGND_ADMIN_TOKEN", ADMIN_TOKEN)
        .env_remove("RUST_LOG")
        .env_remove("ASSIGND_LOG_FORMAT")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    common::limit_descriptors(&mut command, descriptors);
    let mut child = command.spawn().expect("cannot start assignd serve");
    let stderr = child.stderr.take().unwrap();
    let (lines, line) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for text in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = lines.send(text);
        }
    });
    let deadline = Instant::now() + common::SERVE_START_DEADLINE;
    let mut seen = Vec::new();
    let found = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match line.recv_timeout(left) {
            Ok(text) if text.contains("connection cap") => break text,
            Ok(text) => seen.push(text),
            Err(_) => panic!("no connection cap line on stderr in time: {seen:?}"),
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    found
}

#[cfg(target_os = "linux")]
#[test]
fn serve_logs_its_connection_cap_by_the_documented_formula() {
    for (descriptors, shards) in [(1024u64, 64u32), (600, 4)] {
        let expected = (descriptors - 128 - 3 * u64::from(shards)).min(10_000);
        let line = cap_line_under(descriptors, shards);
        assert!(
            line.contains(&format!("connection cap {expected}:")),
            "limit {descriptors}, {shards} shards: {line}"
        );
    }
    // The same formula in the flag's help and the docs.
    let collapse = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
    let help = common::assignd(&["serve", "--help"]);
    let help = collapse(&common::stdout(&help));
    assert!(
        help.contains(
            "(RLIMIT_NOFILE, raised to its hard limit) less 128, less 3 per shard, at most 10000"
        ),
        "serve --help: {help}"
    );
    for doc in ["README.md", "docs/architecture.md"] {
        let text = collapse(&std::fs::read_to_string(common::workspace_root().join(doc)).unwrap())
            .replace("10,000", "10000")
            .replace("1,024", "1024");
        assert!(
            text.contains("the descriptor limit less 128, less 3 per shard, at most 10000, so 704 under a limit of 1024 with 64 shards"),
            "{doc} gives the connection cap's formula"
        );
    }
}

/// The 400 `invalid_request` of a refused name: its message names the
/// field the name came in.
fn assert_name_refused(answer: (u16, Value), field: &str, what: &str) {
    let (status, body) = answer;
    assert_eq!(status, 400, "{what}: {body}");
    assert_eq!(body["error"]["code"], "invalid_request", "{what}: {body}");
    let message = body["error"]["message"].as_str().unwrap();
    let message = message.strip_prefix("invalid request: ").unwrap_or(message);
    assert!(
        message.starts_with(field) && message.contains("are refused"),
        "{what}: {message}"
    );
}

fn config_with(topic: &str) -> Value {
    json!({"topics": [{"name": topic, "partitions": 4}], "assignor": "range"})
}

#[test]
fn names_with_control_or_format_characters_are_refused_wherever_they_enter() {
    let server = Server::start(&common::scratch("limits-names"), &[]);
    for topic in ["a\u{0}b", "a\nb", "a\u{202e}b"] {
        assert_name_refused(
            server.call("PUT", "/v1/groups/g", Some(&config_with(topic))),
            "topic name ",
            &format!("topic {topic:?}"),
        );
    }
    let mut config = config_with("orders");
    config["params"] = json!({"k\n": "1"});
    assert_name_refused(
        server.call("PUT", "/v1/groups/g", Some(&config)),
        "param key ",
        "a param key on a config",
    );
    config["params"] = json!({});
    config["fallback_assignor"] = json!("range\u{200b}");
    assert_name_refused(
        server.call("PUT", "/v1/groups/g", Some(&config)),
        "fallback_assignor ",
        "a fallback assignor",
    );
    let (status, missing) = server.call("GET", "/v1/groups/g", None);
    assert_eq!(status, 404, "nothing was created: {missing}");

    let (status, created) = server.call("PUT", "/v1/groups/g", Some(&config_with("orders")));
    assert_eq!(status, 201, "{created}");
    assert_name_refused(
        server.call(
            "PUT",
            "/v1/groups/g/assignor",
            Some(&json!({"module": "range", "params": {"k\n": "1"}})),
        ),
        "param key ",
        "a param key on a bind",
    );
    let join = |extra: Value| {
        let mut body = json!({"member_id": "", "member_name": "m", "member_epoch": 0,
                              "topics": ["orders"]});
        for (key, value) in extra.as_object().unwrap() {
            body[key] = value.clone();
        }
        server.call("POST", "/v1/groups/g/heartbeat", Some(&body))
    };
    assert_name_refused(join(json!({"rack": "r\nx"})), "rack ", "a rack");
    assert_name_refused(
        join(json!({"topics": ["orders", "a\u{202e}b"]})),
        "topic name ",
        "a subscribed topic",
    );
    let (status, group) = server.call("GET", "/v1/groups/g", None);
    assert_eq!(status, 200);
    assert_eq!(group["members"], json!([]), "nobody joined: {group}");

    // The name is checked before the bytes are.
    for (name, version) in [("a%0Ab", "1"), ("a", "1%E2%80%AE0")] {
        let (status, body) = server.upload(name, version, b"not a component");
        assert_eq!(status, 400, "{name}@{version}: {body}");
        assert_eq!(body["error"]["code"], "invalid_module_name", "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("are refused"), "{message}");
    }
}

/// The 409 of a cap reached: its code, and a message that names the flag.
fn assert_cap_reached(answer: (u16, Value), code: &str, flag: &str) {
    let (status, body) = answer;
    assert_eq!(status, 409, "{code}: {body}");
    assert_eq!(body["error"]["code"], code, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains(flag), "{message}");
}

#[test]
fn groups_past_groups_max_are_refused_and_the_cap_is_in_metrics() {
    let dir = common::scratch("limits-groups-max");
    let config = config_with("orders");
    {
        let server = Server::start(&dir, &["--groups-max", "2", "--shards", "4"]);
        assert_eq!(server.metric("assignd_groups_max"), Some(2.0));
        for group in ["a", "b"] {
            let (status, view) = server.call("PUT", &format!("/v1/groups/{group}"), Some(&config));
            assert_eq!(status, 201, "{view}");
        }
        assert_cap_reached(
            server.call("PUT", "/v1/groups/c", Some(&config)),
            "groups_max_reached",
            "--groups-max",
        );
        let (status, _) = server.call("GET", "/v1/groups/c", None);
        assert_eq!(status, 404, "nothing was created");
        let mut changed = config.clone();
        changed["topics"][0]["partitions"] = json!(8);
        let (status, view) = server.call("PUT", "/v1/groups/a", Some(&changed));
        assert_eq!(status, 200, "a group at the cap is still updated: {view}");
    }
    // Restarted under a lower cap, it serves the groups it has and
    // creates none.
    let server = Server::start(&dir, &["--groups-max", "1"]);
    let (status, _) = server.call("GET", "/v1/groups/b", None);
    assert_eq!(status, 200);
    assert_cap_reached(
        server.call("PUT", "/v1/groups/c", Some(&config)),
        "groups_max_reached",
        "--groups-max",
    );
}

#[test]
fn modules_past_modules_max_or_module_bytes_max_are_refused() {
    let sticky = assignd::plugins::builtin_component("sticky").expect("sticky is built in");
    let range = assignd::plugins::builtin_component("range").expect("range is built in");
    let server = Server::start(
        &common::scratch("limits-modules-max"),
        &["--modules-max", "1"],
    );
    assert_eq!(server.metric("assignd_modules_max"), Some(1.0));
    let (status, module) = server.upload("mine", "1", sticky);
    assert_eq!(status, 201, "{module}");
    assert_cap_reached(
        server.upload("other", "1", range),
        "modules_max_reached",
        "--modules-max",
    );
    let (status, again) = server.upload("mine", "1", sticky);
    assert_eq!(status, 200, "the same bytes again store nothing: {again}");
    assert_eq!(server.metric("assignd_modules"), Some(1.0));
    assert_eq!(
        server.metric("assignd_module_bytes"),
        Some(sticky.len() as f64)
    );
    let (status, _) = server.call("DELETE", "/v1/assignors/mine@1", None);
    assert_eq!(status, 204);
    let (status, module) = server.upload("other", "1", range);
    assert_eq!(status, 201, "a place is free again: {module}");
    drop(server);

    let bytes_max = (sticky.len() + range.len() - 1).to_string();
    let server = Server::start(
        &common::scratch("limits-module-bytes-max"),
        &["--module-bytes-max", &bytes_max],
    );
    assert_eq!(
        server.metric("assignd_module_bytes_max"),
        Some((sticky.len() + range.len() - 1) as f64)
    );
    let (status, module) = server.upload("mine", "1", sticky);
    assert_eq!(status, 201, "{module}");
    assert_cap_reached(
        server.upload("other", "1", range),
        "module_bytes_max_reached",
        "--module-bytes-max",
    );
    let (status, list) = server.call("GET", "/v1/assignors", None);
    assert_eq!(status, 200);
    assert!(
        list["assignors"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["name"] != "other"),
        "nothing stored: {list}"
    );
}

/// In a cluster the modules are stored once, so the cap counts the
/// cluster's: a node refuses an upload past it though it uploaded none.
#[test]
fn a_cluster_counts_its_modules_against_modules_max() {
    let dir = common::scratch("limits-cluster-modules");
    let (_runtime, etcd) = common::local_etcd(&dir, 1);
    let endpoints = etcd.endpoints().join(",");
    let node = |name: &str| {
        Server::start(
            &dir.join(name),
            &[
                "--etcd",
                &endpoints,
                "--etcd-prefix",
                "/limits/",
                "--node",
                name,
                "--shards",
                "4",
                "--modules-max",
                "1",
            ],
        )
    };
    let (n1, n2) = (node("n1"), node("n2"));
    let sticky = assignd::plugins::builtin_component("sticky").expect("sticky is built in");
    let range = assignd::plugins::builtin_component("range").expect("range is built in");
    let (status, module) = n1.upload("mine", "1", sticky);
    assert_eq!(status, 201, "{module}");
    assert_cap_reached(
        n2.upload("other", "1", range),
        "modules_max_reached",
        "--modules-max",
    );
    let (status, list) = n1.call("GET", "/v1/assignors", None);
    assert_eq!(status, 200);
    assert!(
        list["assignors"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["name"] != "other"),
        "the cluster has no second module: {list}"
    );
}
