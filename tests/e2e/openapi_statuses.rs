//! Every status the host answers is documented for its operation: a walk
//! of every operation of the real binary's OpenAPI document, with good
//! and bad path parameters (not UTF-8, a control character, not a number,
//! unknown), bodies that are missing, not JSON, empty JSON and past the
//! route's size limit, with and without the admin token, and again with
//! the host's one shard unloaded. Each answer's status must be among the
//! operation's documented responses.

use crate::common;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::common::{ADMIN_TOKEN, Server};
use serde_json::{Value, json};

/// One request, raw: the method, the path (already encoded), the
/// headers, the body.
struct Request {
    method: String,
    path: String,
    token: Option<&'static str>,
    content_type: Option<&'static str>,
    body: Vec<u8>,
}

/// Sends `request` on a new connection; returns the answer's status, or
/// `None` if the server closed the connection without one (it may, while
/// a body past the limit is still being written).
fn send(server: &Server, request: &Request) -> Option<u16> {
    let address = server.base.strip_prefix("http://").expect("http base");
    let mut stream = TcpStream::connect(address).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut head = format!(
        "{} {} HTTP/1.1\r\nhost: test\r\nconnection: close\r\ncontent-length: {}\r\n",
        request.method,
        request.path,
        request.body.len()
    );
    if let Some(token) = request.token {
        head.push_str(&format!("authorization: Bearer {token}\r\n"));
    }
    if let Some(content_type) = request.content_type {
        head.push_str(&format!("content-type: {content_type}\r\n"));
    }
    head.push_str("\r\n");
    let written = stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.write_all(&request.body));
    let mut answer = Vec::new();
    let read = stream.read_to_end(&mut answer);
    if answer.is_empty() {
        assert!(
            written.is_err() || read.is_err(),
            "{} {}: no answer",
            request.method,
            request.path
        );
        return None;
    }
    let line = String::from_utf8_lossy(&answer[..answer.len().min(64)]).into_owned();
    let status = line
        .strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {line:?}"));
    Some(status)
}

/// The values each path parameter is tried with: good ones first, then
/// bad ones (percent-encoded as they go on the wire).
fn parameter_values(name: &str) -> &'static [&'static str] {
    match name {
        "group" => &["walked", "unknown-group", "%FF", "a%01b"],
        "member" => &["m1", "%FF", "a%0Ab"],
        "shard" => &["0", "x", "99999", "-1"],
        "assignor" => &["range", "walked-module@1", "nope", "%FF"],
        "id" => &["walked-rollout", "unknown-rollout", "%FF", "a%01b"],
        other => panic!("a path parameter the walk does not know: {other}"),
    }
}

/// Every path of `template` with its parameters set to each of their
/// values, one parameter varied at a time (the others at their first).
fn paths(template: &str) -> Vec<String> {
    let names: Vec<&str> = template
        .split('{')
        .skip(1)
        .map(|rest| rest.split('}').next().unwrap())
        .collect();
    let fill = |varied: Option<(&str, &str)>| {
        names.iter().fold(template.to_owned(), |path, name| {
            let value = match varied {
                Some((v, value)) if v == *name => value,
                _ => parameter_values(name)[0],
            };
            path.replace(&format!("{{{name}}}"), value)
        })
    };
    let mut paths = vec![fill(None)];
    for name in &names {
        for value in &parameter_values(name)[1..] {
            paths.push(fill(Some((name, value))));
        }
    }
    paths
}

/// The largest body the route takes, so that one byte more is refused.
fn body_len_max(path: &str) -> usize {
    if path.ends_with("/heartbeat") {
        assignd_wire::HEARTBEAT_BODY_BYTES_MAX as usize
    } else if path.starts_with("/v1/assignors") {
        assignd::registry::MODULE_UPLOAD_BYTES_MAX
    } else {
        assignd::api::BODY_BYTES_MAX
    }
}

/// The requests the walk sends to one operation.
fn requests(method: &str, template: &str) -> Vec<Request> {
    let upload = template == "/v1/assignors" && method == "POST";
    let query = if upload {
        "?name=walked-module&version=2"
    } else {
        ""
    };
    let with_body = matches!(method, "POST" | "PUT");
    let content_type = if upload {
        "application/wasm"
    } else {
        "application/json"
    };
    let mut requests = Vec::new();
    for path in paths(template) {
        let request = |token, content_type, body: &[u8]| Request {
            method: method.to_owned(),
            path: format!("{path}{query}"),
            token,
            content_type,
            body: body.to_vec(),
        };
        requests.push(request(Some(ADMIN_TOKEN), None, b""));
        requests.push(request(None, None, b""));
        requests.push(request(Some("not-the-admin-token-0123456789"), None, b""));
        if with_body {
            requests.push(request(Some(ADMIN_TOKEN), Some(content_type), b"{}"));
            requests.push(request(Some(ADMIN_TOKEN), Some(content_type), b"{not json"));
            requests.push(request(Some(ADMIN_TOKEN), Some("text/plain"), b"{}"));
        }
    }
    if with_body {
        let path = paths(template).remove(0);
        let past = vec![b' '; body_len_max(template) + 1];
        requests.push(Request {
            method: method.to_owned(),
            path: format!("{path}{query}"),
            token: Some(ADMIN_TOKEN),
            content_type: Some(content_type),
            body: past,
        });
    }
    if upload {
        // No name or version.
        requests.push(Request {
            method: method.to_owned(),
            path: template.to_owned(),
            token: Some(ADMIN_TOKEN),
            content_type: Some(content_type),
            body: b"\0asm".to_vec(),
        });
    }
    requests
}

/// Walks every operation; returns each answer whose status the operation
/// does not document, as `METHOD PATH -> STATUS`.
fn walk(server: &Server, doc: &Value) -> BTreeSet<String> {
    let mut undocumented = BTreeSet::new();
    for (template, item) in doc["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().unwrap() {
            let documented = operation["responses"].as_object().expect("responses");
            let method = method.to_uppercase();
            for request in requests(&method, template) {
                let Some(status) = send(server, &request) else {
                    continue;
                };
                if !documented.contains_key(&status.to_string())
                    && !documented.contains_key("default")
                {
                    undocumented.insert(format!(
                        "{method} {template} -> {status} ({})",
                        request.path
                    ));
                }
            }
        }
    }
    undocumented
}

/// Every answer of every operation, served and with the shard unloaded,
/// is documented for that operation.
#[test]
fn every_status_the_host_answers_is_documented_for_its_operation() {
    let data_dir = common::scratch("openapi-statuses");
    let server = Server::start(&data_dir, &["--shards", "1"]);
    let (status, doc) = server.call("GET", "/v1/openapi.json", None);
    assert_eq!(status, 200);
    let config = json!({"topics": [{"name": "orders", "partitions": 4}]});
    let (status, answer) = server.call("PUT", "/v1/groups/walked", Some(&config));
    assert_eq!(status, 201, "{answer}");
    let guest = std::fs::read(common::bad_guest("test-guest-spin-when-told")).expect("a guest");
    let (status, answer) = server.upload("walked-module", "1", &guest);
    assert_eq!(status, 201, "{answer}");

    let mut undocumented = walk(&server, &doc);
    let (status, answer) = server.call("POST", "/v1/shards/0/unload", None);
    assert_eq!(status, 200, "{answer}");
    undocumented.extend(walk(&server, &doc));
    assert!(
        undocumented.is_empty(),
        "answers the OpenAPI document does not give for their operation:\n{}",
        undocumented.into_iter().collect::<Vec<_>>().join("\n")
    );
}
