//! Member tokens: a group's token required on the heartbeat and never
//! shown, kept or removed by a config update, and bad tokens refused.

use super::*;

const MEMBER_TOKEN: &str = "member-token-of-orders-app";

impl Fixture {
    /// A heartbeat with `authorization` (none if `None`) as it is.
    async fn heartbeat_as(&self, body: Value, authorization: Option<&str>) -> (StatusCode, Value) {
        let mut request = Request::builder()
            .method("POST")
            .uri(format!("/v1/groups/{GROUP}/heartbeat"))
            .header(header::CONTENT_TYPE, "application/json");
        if let Some(value) = authorization {
            request = request.header(header::AUTHORIZATION, value);
        }
        let (status, value, headers) = self
            .send_as_is(request.body(Body::from(body.to_string())).unwrap())
            .await;
        if status == StatusCode::UNAUTHORIZED {
            assert_eq!(headers[header::WWW_AUTHENTICATE], "Bearer");
        }
        (status, value)
    }
}

pub(super) fn join_body(name: &str) -> Value {
    json!({"member_id": "", "member_name": name, "member_epoch": 0, "topics": ["orders"]})
}

#[tokio::test]
async fn a_group_without_a_member_token_takes_any_heartbeat() {
    let f = fixture();
    f.put_group(config_json(4)).await;
    assert_eq!(f.view().await["member_token"], false);
    for authorization in [None, Some("Bearer anything-at-all-123"), Some("Basic abc")] {
        let (status, answer) = f.heartbeat_as(join_body("worker-a"), authorization).await;
        assert_eq!(status, StatusCode::OK, "{authorization:?}: {answer}");
    }
}

#[tokio::test]
async fn a_member_token_is_required_on_the_heartbeat_and_never_shown() {
    let f = fixture();
    let mut config = config_json(4);
    config["member_token"] = json!(MEMBER_TOKEN);
    let (status, view) = f.put_group(config).await;
    assert_eq!(status, StatusCode::CREATED, "{view}");
    assert_eq!(view["member_token"], true, "{view}");
    let digest = crate::api::auth::digest_hex(MEMBER_TOKEN);
    let before = f.snapshot().await;
    // The token and its hash appear in no view.
    for path in [
        format!("/v1/groups/{GROUP}"),
        "/v1/groups".to_owned(),
        format!("/v1/groups/{GROUP}/assignor-input"),
    ] {
        let (status, answer) = f.call("GET", &path, None).await;
        assert_eq!(status, StatusCode::OK, "{path}: {answer}");
        let text = answer.to_string();
        assert!(
            !text.contains(&digest) && !text.contains(MEMBER_TOKEN),
            "{path}: {text}"
        );
        assert!(!text.contains("member_token_sha256"), "{path}: {text}");
    }

    // No token, another scheme: 401; another token, the admin token: 403.
    for missing in [None, Some("Basic abc"), Some("Bearer ")] {
        let answer = f.heartbeat_as(join_body("worker-a"), missing).await;
        assert_error(&answer, StatusCode::UNAUTHORIZED, "unauthorized");
    }
    for wrong in [
        "Bearer member-token-of-orders-apq".to_owned(),
        format!("Bearer {ADMIN_TOKEN}"),
    ] {
        let answer = f.heartbeat_as(join_body("worker-a"), Some(&wrong)).await;
        assert_error(&answer, StatusCode::FORBIDDEN, "forbidden");
    }
    assert_eq!(f.snapshot().await, before, "nothing changed");

    // The right token: the member joins and heartbeats.
    let bearer = format!("Bearer {MEMBER_TOKEN}");
    let (status, joined) = f.heartbeat_as(join_body("worker-a"), Some(&bearer)).await;
    assert_eq!(status, StatusCode::OK, "{joined}");
    let beat = json!({"member_id": joined["member_id"], "member_epoch": joined["member_epoch"]});
    let answer = f.heartbeat_as(beat.clone(), None).await;
    assert_error(&answer, StatusCode::UNAUTHORIZED, "unauthorized");
    let (status, answer) = f.heartbeat_as(beat, Some(&bearer)).await;
    assert_eq!(status, StatusCode::OK, "{answer}");

    // The hash survives a replay, and the view still hides it.
    f.assert_replay_matches().await;
    assert!(!f.view().await.to_string().contains(&digest));
}

#[tokio::test]
async fn a_put_without_member_token_keeps_it_and_null_removes_it() {
    let f = fixture();
    let mut config = config_json(4);
    config["member_token"] = json!(MEMBER_TOKEN);
    f.put_group(config).await;
    // A config change that does not name the token keeps it.
    let (status, view) = f.put_group(config_json(6)).await;
    assert_eq!(status, StatusCode::OK, "{view}");
    assert_eq!(view["member_token"], true, "{view}");
    // The config a view shows can be sent back as it is.
    let (status, view) = f.put_group(view["config"].clone()).await;
    assert_eq!(
        (status, &view["member_token"]),
        (StatusCode::OK, &json!(true))
    );
    let answer = f.heartbeat_as(join_body("worker-a"), None).await;
    assert_error(&answer, StatusCode::UNAUTHORIZED, "unauthorized");
    // A new token replaces the old one.
    let mut config = config_json(6);
    config["member_token"] = json!("a-brand-new-member-token");
    f.put_group(config).await;
    let old = format!("Bearer {MEMBER_TOKEN}");
    let answer = f.heartbeat_as(join_body("worker-a"), Some(&old)).await;
    assert_error(&answer, StatusCode::FORBIDDEN, "forbidden");
    let (status, _) = f
        .heartbeat_as(
            join_body("worker-a"),
            Some("Bearer a-brand-new-member-token"),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    // null removes it: the heartbeat is open again.
    let mut config = config_json(6);
    config["member_token"] = Value::Null;
    let (_, view) = f.put_group(config).await;
    assert_eq!(view["member_token"], false, "{view}");
    let (status, answer) = f.heartbeat_as(join_body("worker-b"), None).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    f.assert_replay_matches().await;
}

#[tokio::test]
async fn bad_member_tokens_and_a_direct_hash_are_400_and_change_nothing() {
    let f = fixture();
    let mut config = config_json(4);
    config["member_token"] = json!(MEMBER_TOKEN);
    f.put_group(config).await;
    let before = f.snapshot().await;
    for (token, code) in [
        (json!("short"), "invalid_request"),
        (json!(""), "invalid_request"),
        (json!("has spaces in the middle"), "invalid_request"),
        (json!("x".repeat(1025)), "invalid_request"),
        (json!(12345678901234567u64), "invalid_json"),
        (json!(true), "invalid_json"),
    ] {
        let mut config = config_json(8);
        config["member_token"] = token.clone();
        let answer = f.put_group(config).await;
        assert_error(&answer, StatusCode::BAD_REQUEST, code);
        assert!(
            answer.1["error"]["message"]
                .as_str()
                .unwrap()
                .contains("member_token"),
            "{token}: {}",
            answer.1
        );
    }
    // The hash is internal: setting it directly is refused, even a valid
    // one, and so is a new group with it.
    for group in [GROUP, "another"] {
        let mut config = config_json(8);
        config["member_token_sha256"] =
            json!(crate::api::auth::digest_hex("attacker-chosen-token"));
        let answer = f
            .call("PUT", &format!("/v1/groups/{group}"), Some(config))
            .await;
        assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_json");
        assert!(
            answer.1["error"]["message"]
                .as_str()
                .unwrap()
                .contains("member_token_sha256"),
            "{}",
            answer.1
        );
    }
    // A good token with a bad config changes nothing either.
    let mut config = config_json(8);
    config["member_token"] = json!("a-brand-new-member-token");
    config["expansion_timeout_ms"] = json!(-1);
    let answer = f.put_group(config).await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_json");
    assert!(
        answer.1["error"]["message"]
            .as_str()
            .unwrap()
            .contains("expansion_timeout_ms"),
        "{}",
        answer.1
    );
    assert_eq!(f.snapshot().await, before, "nothing changed");
    let answer = f
        .heartbeat_as(
            join_body("worker-a"),
            Some("Bearer a-brand-new-member-token"),
        )
        .await;
    assert_error(&answer, StatusCode::FORBIDDEN, "forbidden");
}

#[test]
fn the_document_marks_the_member_token_optional_on_the_heartbeat() {
    let doc = serde_json::to_value(openapi()).unwrap();
    let heartbeat = &doc["paths"]["/v1/groups/{group}/heartbeat"]["post"];
    assert_eq!(
        heartbeat["security"],
        json!([{}, {"member_token": []}]),
        "{heartbeat}"
    );
    for status in ["401", "403"] {
        assert_eq!(
            heartbeat["responses"][status]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/ErrorBody",
            "{status}"
        );
    }
    let config = &doc["components"]["schemas"]["GroupConfigDoc"]["properties"];
    assert_eq!(config["member_token"]["writeOnly"], true, "{config}");
}
