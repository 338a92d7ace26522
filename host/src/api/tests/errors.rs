//! Error mapping: every protocol error's status and code, JSON answers for
//! unknown routes and methods, and storage failures answered 503.

use super::*;

#[test]
fn every_protocol_error_has_a_status() {
    let task = Task::new("orders", 0);
    let cases = [
        (
            ProtocolError::UnknownGroup("g".into()),
            404,
            "unknown_group",
        ),
        (
            ProtocolError::UnknownMember("m".into(), "g".into()),
            404,
            "unknown_member",
        ),
        (
            ProtocolError::Fenced {
                member_id: "m".into(),
            },
            409,
            "fenced",
        ),
        (
            ProtocolError::Replaced {
                member_id: "m".into(),
                member_name: "w".into(),
            },
            409,
            "replaced",
        ),
        (
            ProtocolError::StaleEpoch {
                sent: 5,
                current: 1,
            },
            409,
            "stale_epoch",
        ),
        (ProtocolError::NotOwned { task }, 409, "not_owned"),
        (ProtocolError::GroupFull("g".into()), 409, "group_full"),
        (ProtocolError::Invalid("x".into()), 400, "invalid_request"),
        (
            ProtocolError::NoPreviousBinding("g".into()),
            409,
            "no_previous_binding",
        ),
    ];
    for (error, status, code) in cases {
        let api = ApiError::from(error);
        let (answered_status, answered_code) = api.status_and_code();
        assert_eq!(
            (answered_status, answered_code.as_str()),
            (StatusCode::from_u16(status).unwrap(), code)
        );
    }
    let unknown = ApiError::Runtime(RuntimeError::UnknownAssignor { name: "x".into() });
    assert_eq!(
        unknown.status_and_code(),
        (StatusCode::BAD_REQUEST, ErrorCode::UnknownAssignor)
    );
}

#[tokio::test]
async fn unknown_routes_and_methods_answer_json() {
    let f = fixture();
    for path in ["/", "/v1", "/v1/groups/a/b/c", "/v2/groups", "/v1/groups/"] {
        let answer = f.call("GET", path, None).await;
        assert_error(&answer, StatusCode::NOT_FOUND, "not_found");
    }
    let answer = f.call("GET", &format!("/v1/groups/{GROUP}"), None).await;
    assert_error(&answer, StatusCode::NOT_FOUND, "unknown_group");
    let answer = f
        .call("GET", &format!("/v1/groups/{GROUP}/assignor-input"), None)
        .await;
    assert_error(&answer, StatusCode::NOT_FOUND, "unknown_group");

    let request = Request::builder()
        .method("DELETE")
        .uri(format!("/v1/groups/{GROUP}"))
        .body(Body::empty())
        .unwrap();
    let (status, value, headers) = f.send(request).await;
    assert_error(
        &(status, value),
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
    );
    let allow = headers[header::ALLOW].to_str().unwrap();
    assert!(allow.contains("GET") && allow.contains("PUT"), "{allow}");
    let answer = f
        .call("GET", &format!("/v1/groups/{GROUP}/heartbeat"), None)
        .await;
    assert_error(
        &answer,
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
    );
}

#[tokio::test]
async fn a_failed_persist_is_503_from_then_on() {
    let f = fixture();
    f.put_group(config_json(4)).await;
    let (status, _) = f.call("GET", "/healthz", None).await;
    assert_eq!(status, StatusCode::OK);
    f.sink.fail.store(true, std::sync::atomic::Ordering::SeqCst);
    let answer = f
        .heartbeat(json!({"member_id": "", "member_epoch": 0, "topics": ["orders"]}))
        .await;
    assert_error(&answer, StatusCode::SERVICE_UNAVAILABLE, "storage_failed");
    assert!(
        !answer.1["error"]["message"]
            .as_str()
            .unwrap()
            .contains("disk on fire"),
        "server errors are not leaked"
    );
    f.sink
        .fail
        .store(false, std::sync::atomic::Ordering::SeqCst);
    let answer = f.call("GET", "/v1/groups", None).await;
    assert_error(&answer, StatusCode::SERVICE_UNAVAILABLE, "storage_failed");
    let (status, health) = f.call("GET", "/healthz", None).await;
    assert_eq!(
        (status, health),
        (
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"status": "storage_failed"})
        )
    );
}

#[tokio::test]
async fn a_silent_storage_is_503_storage_unavailable_with_retry_after() {
    let f = fixture();
    f.put_group(config_json(4)).await;
    f.sink
        .silent
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let request = Request::builder()
        .method("POST")
        .uri(format!("/v1/groups/{GROUP}/heartbeat"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(
            json!({"member_id": "", "member_epoch": 0, "topics": ["orders"]}).to_string(),
        ))
        .unwrap();
    let (status, value, headers) = f.send(request).await;
    assert_error(
        &(status, value.clone()),
        StatusCode::SERVICE_UNAVAILABLE,
        "storage_unavailable",
    );
    assert_eq!(headers[header::RETRY_AFTER], "1");
    assert!(
        !value["error"]["message"]
            .as_str()
            .unwrap()
            .contains("10.0.0.1"),
        "the storage's details are not leaked: {value}"
    );
    // The shard's later requests say the same (it is loaded again from
    // its storage once that answers: cluster mode's node does it).
    let answer = f.call("GET", &format!("/v1/groups/{GROUP}"), None).await;
    assert_error(
        &answer,
        StatusCode::SERVICE_UNAVAILABLE,
        "storage_unavailable",
    );
    let (status, health) = f.call("GET", "/healthz", None).await;
    assert_eq!(
        (status, health),
        (
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"status": "storage_unavailable"})
        )
    );
    let shard = f.runtime.shard_of(GROUP);
    assert_eq!(f.runtime.failed_shards(), vec![shard]);
}
