//! Requests refused for their body or names, each changing nothing:
//! malformed JSON, configs out of range, a body past its route's limit, a
//! wrong content type, invisible characters in names, duplicate JSON keys.

use super::member_tokens::join_body;
use super::*;

/// Heartbeat bodies that do not parse, each with what its message names.
fn malformed_heartbeats(member_id: &str) -> Vec<(String, &'static str)> {
    vec![
        ("{\"member_id\": ".into(), "EOF"),
        ("not json".into(), "expected"),
        (String::new(), "EOF"),
        ("[]".into(), "HeartbeatRequest"),
        ("42".into(), "invalid type"),
        // A missing field, a wrong type, an unknown field.
        (json!({"member_id": ""}).to_string(), "member_epoch"),
        (
            json!({"member_id": member_id, "member_epoch": "one"}).to_string(),
            "member_epoch",
        ),
        (
            json!({"member_id": member_id, "member_epoch": 0, "membr_name": "x"}).to_string(),
            "membr_name",
        ),
        (
            json!({"member_id": member_id, "member_epoch": 0, "owned": [["orders"]]}).to_string(),
            "owned",
        ),
        (
            json!({"member_id": member_id, "member_epoch": 0, "lags": [["orders", 1, -5]]})
                .to_string(),
            "lags",
        ),
    ]
}

/// Config bodies that do not parse: no topics, negative timeouts,
/// partitions past u32, an unknown field, an unknown learner mode.
fn malformed_configs() -> Vec<(String, &'static str)> {
    let orders = json!([{"name": "orders", "partitions": 4}]);
    vec![
        (json!({"assignor": "sticky"}).to_string(), "topics"),
        (
            json!({"topics": orders, "expansion_timeout_ms": -1}).to_string(),
            "expansion_timeout_ms",
        ),
        (
            json!({"topics": orders, "session_timeout_ms": -1}).to_string(),
            "session_timeout_ms",
        ),
        (
            json!({"topics": [{"name": "orders", "partitions": 5_000_000_000u64}]}).to_string(),
            "partitions",
        ),
        (
            json!({"topics": orders, "colour": "blue"}).to_string(),
            "colour",
        ),
        (
            json!({"topics": orders, "learners": "sometimes"}).to_string(),
            "learners",
        ),
    ]
}

#[tokio::test]
async fn malformed_bodies_are_invalid_json_and_change_nothing() {
    let f = fixture();
    f.put_group(config_json(4)).await;
    let a = f.join("worker-a").await;
    let before = f.snapshot().await;
    let heartbeat = format!("/v1/groups/{GROUP}/heartbeat");
    let group = format!("/v1/groups/{GROUP}");
    let heartbeats = malformed_heartbeats(&a.member_id);
    let cases = (heartbeats
        .into_iter()
        .map(|(body, needle)| ("POST", &heartbeat, body, needle)))
    .chain(
        malformed_configs()
            .into_iter()
            .map(|(body, needle)| ("PUT", &group, body, needle)),
    );
    for (method, path, body, needle) in cases {
        let answer = f.raw(method, path, body.clone()).await;
        assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_json");
        let message = answer.1["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(needle),
            "{method} {body}: expected {needle:?} in {message:?}"
        );
    }
    assert_eq!(f.snapshot().await, before, "nothing changed");
}

#[tokio::test]
async fn configs_out_of_range_are_refused_and_change_nothing() {
    let f = fixture();
    f.put_group(config_json(4)).await;
    let before = f.snapshot().await;
    let topics = json!([{"name": "orders", "partitions": 4}]);
    for (config, code) in [
        (
            json!({"topics": [{"name": "orders", "partitions": 1_000_000_000}]}),
            "invalid_request",
        ),
        (
            json!({"topics": topics, "expansion_timeout_ms": 0}),
            "invalid_request",
        ),
        (
            json!({"topics": topics, "heartbeat_interval_ms": 60_000}),
            "invalid_request",
        ),
        (
            json!({"topics": [{"name": "orders", "partitions": 4}, {"name": "orders", "partitions": 2}]}),
            "invalid_request",
        ),
        (
            json!({"topics": [{"name": "", "partitions": 4}]}),
            "invalid_request",
        ),
        (
            json!({"topics": topics, "assignor": "fastest"}),
            "unknown_assignor",
        ),
        (json!({"topics": topics, "assignor": ""}), "invalid_request"),
        (
            json!({"topics": topics, "load_unit": ""}),
            "invalid_request",
        ),
        (
            json!({"topics": topics, "load_unit": "x".repeat(33)}),
            "invalid_request",
        ),
        (
            json!({"topics": topics, "load_half_life_ms": 3_600_001}),
            "invalid_request",
        ),
        (
            json!({"topics": topics, "load_window_ms": 3_600_001}),
            "invalid_request",
        ),
        (
            json!({"topics": topics, "load_cooldown_ms": 86_400_001}),
            "invalid_request",
        ),
        (json!({"topics": topics, "frozen": "yes"}), "invalid_json"),
    ] {
        let answer = f.put_group(config.clone()).await;
        assert_error(&answer, StatusCode::BAD_REQUEST, code);
    }
    let long_name = "g".repeat(300);
    let answer = f
        .call(
            "PUT",
            &format!("/v1/groups/{long_name}"),
            Some(config_json(4)),
        )
        .await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_request");
    let message = f
        .put_group(json!({"topics": topics, "assignor": "fastest"}))
        .await;
    assert!(
        message.1["error"]["message"]
            .as_str()
            .unwrap()
            .contains("sticky"),
        "names the built-ins: {}",
        message.1
    );
    assert_eq!(f.snapshot().await, before, "nothing changed");
}

#[tokio::test]
async fn a_body_past_its_routes_limit_is_413_and_changes_nothing() {
    let f = fixture();
    f.put_group(config_json(4)).await;
    let before = f.snapshot().await;
    // The heartbeat's limit is its own, far past the other routes'.
    let huge = "x".repeat(assignd_wire::HEARTBEAT_BODY_BYTES_MAX as usize + 1);
    let answer = f
        .heartbeat(
            json!({"member_id": "", "member_name": huge, "member_epoch": 0, "topics": ["orders"]}),
        )
        .await;
    assert_error(&answer, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");
    drop(huge);
    let name = "x".repeat(10 << 20);
    // Also without a Content-Length (a streamed body).
    let chunks = chunked_body(name.into_bytes());
    let request = Request::builder()
        .method("PUT")
        .uri(format!("/v1/groups/{GROUP}"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(chunks)
        .unwrap();
    let (status, value, _) = f.send(request).await;
    assert_error(
        &(status, value),
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
    );
    assert_eq!(f.snapshot().await, before);
}

/// A body with no known length, in 64 KiB chunks.
pub(super) fn chunked_body(bytes: Vec<u8>) -> Body {
    Body::new(Chunked(
        bytes
            .chunks(64 << 10)
            .map(axum::body::Bytes::copy_from_slice)
            .collect(),
    ))
}

struct Chunked(std::collections::VecDeque<axum::body::Bytes>);

impl http_body::Body for Chunked {
    type Data = axum::body::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        std::task::Poll::Ready(
            self.0
                .pop_front()
                .map(|chunk| Ok(http_body::Frame::data(chunk))),
        )
    }
}

#[tokio::test]
async fn wrong_content_type_is_415() {
    let f = fixture();
    let request = Request::builder()
        .method("PUT")
        .uri(format!("/v1/groups/{GROUP}"))
        .header(header::CONTENT_TYPE, "text/plain")
        .body(Body::from(config_json(4).to_string()))
        .unwrap();
    let (status, value, _) = f.send(request).await;
    assert_error(
        &(status, value),
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
    );
    let request = Request::builder()
        .method("PUT")
        .uri(format!("/v1/groups/{GROUP}"))
        .body(Body::from(config_json(4).to_string()))
        .unwrap();
    let (status, value, _) = f.send(request).await;
    assert_error(
        &(status, value),
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
    );
    let (_, groups) = f.call("GET", "/v1/groups", None).await;
    assert_eq!(groups, json!({"groups": []}), "nothing created");
}

/// Group names with control, format or bidirectional characters are refused
/// (CR and NUL would reach `/metrics` raw).
#[tokio::test]
async fn group_names_with_invisible_characters_are_refused() {
    let f = fixture();
    for name in [
        "a%0Db",
        "a%00b",
        "a%E2%80%AEb",
        "a%E2%81%A6b",
        "%EF%BB%BFa",
        "a%C2%85b",
    ] {
        let answer = f
            .call("PUT", &format!("/v1/groups/{name}"), Some(config_json(4)))
            .await;
        assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_request");
    }
    let (_, groups) = f.call("GET", "/v1/groups", None).await;
    assert_eq!(groups, json!({"groups": []}), "nothing created");
    let (status, view) = f
        .call(
            "PUT",
            "/v1/groups/caf%C3%A9-%E6%97%A5%E6%9C%AC",
            Some(config_json(4)),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "other Unicode is fine: {view}");
}

/// Member names, like group names, may not hold control, format or
/// bidirectional characters (a name shown as another one); the join is
/// refused and changes nothing.
#[tokio::test]
async fn member_names_with_invisible_characters_are_refused() {
    let f = fixture();
    f.put_group(config_json(4)).await;
    let before = f.snapshot().await;
    for name in [
        "a\rb",
        "a\0b",
        "a\u{202E}b",
        "a\u{2066}b",
        "\u{FEFF}a",
        "a\u{85}b",
    ] {
        let answer = f.heartbeat(join_body(name)).await;
        assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_request");
        assert!(
            answer.1["error"]["message"]
                .as_str()
                .unwrap()
                .contains("member name"),
            "{}",
            answer.1
        );
    }
    assert_eq!(f.snapshot().await, before, "nothing changed");
    f.join("café-日本").await;
}

/// A key twice in a JSON body is refused with 400 `invalid_json`, at any
/// depth, on every JSON body, and changes nothing (taken last-wins, a
/// `member_token` then `null` would remove the token).
#[tokio::test]
async fn duplicate_json_keys_are_refused() {
    let f = fixture();
    let mut config = config_json(4);
    config["member_token"] = json!("a-member-token-0123456789");
    let (status, view) = f.put_group(config).await;
    assert_eq!(status, StatusCode::CREATED, "{view}");
    let before = f.snapshot().await;
    let body = r#"{"topics": [{"name": "orders", "partitions": 4}], "assignor": "sticky",
                   "member_token": "a-member-token-0123456789", "member_token": null}"#;
    let answer = f.raw("PUT", &format!("/v1/groups/{GROUP}"), body).await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_json");
    assert!(
        answer.1["error"]["message"]
            .as_str()
            .unwrap()
            .contains("duplicate key \"member_token\""),
        "{}",
        answer.1
    );
    let nested = r#"{"topics": [{"name": "orders", "partitions": 4, "partitions": 8}],
                     "assignor": "sticky"}"#;
    let answer = f.raw("PUT", &format!("/v1/groups/{GROUP}"), nested).await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_json");
    let params = r#"{"topics": [{"name": "orders", "partitions": 4}], "assignor": "sticky",
                     "params": {"k": "1", "k": "2"}}"#;
    let answer = f.raw("PUT", &format!("/v1/groups/{GROUP}"), params).await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_json");
    let bind = r#"{"module": "range", "module": "sticky"}"#;
    let answer = f
        .raw("PUT", &format!("/v1/groups/{GROUP}/assignor"), bind)
        .await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_json");
    // The member route reads its body in one pass: serde's derive refuses
    // a field twice itself.
    let join = r#"{"member_id": "", "member_epoch": 0, "member_epoch": -1, "topics": ["orders"]}"#;
    let answer = f
        .raw("POST", &format!("/v1/groups/{GROUP}/heartbeat"), join)
        .await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_json");
    let message = answer.1["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("duplicate field `member_epoch`"),
        "{message}"
    );
    let owned = r#"{"member_id": "", "member_epoch": 0, "topics": ["orders"],
                    "owned": [], "owned": [["orders", 0]]}"#;
    let answer = f
        .raw("POST", &format!("/v1/groups/{GROUP}/heartbeat"), owned)
        .await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_json");
    assert_eq!(f.snapshot().await, before, "nothing changed");
}
