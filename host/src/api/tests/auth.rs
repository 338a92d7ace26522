//! The admin token: every admin route is 401 without it and 403 with
//! another, the open routes need none, a refused request reads no body, and
//! the document names the token each route needs. The read-only token:
//! every admin `GET` accepts it, every other admin method refuses it.

use super::assignors::sticky_bytes;
use super::refused_requests::chunked_body;
use super::*;

/// Every operation of the document as (method, path), with each path
/// parameter replaced by a value naming something that exists.
fn documented_operations() -> Vec<(String, String)> {
    let doc = serde_json::to_value(openapi()).unwrap();
    let mut operations = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            let concrete = path
                .replace("{group}", GROUP)
                .replace("{member}", "worker-a")
                .replace("{assignor}", "sticky");
            operations.push((method.to_uppercase(), concrete));
        }
    }
    operations
}

/// The routes open without the admin token.
const OPEN_ROUTES: &[(&str, &str)] = &[
    ("POST", "/v1/groups/{group}/heartbeat"),
    ("GET", "/v1/groups/{group}/coordinator"),
    ("GET", "/v1/openapi.json"),
    ("GET", "/healthz"),
    ("GET", "/metrics"),
];

/// The routes a group's reader token reads, as the admin token does.
const READER_ROUTES: &[&str] = &[
    "/v1/groups/{group}/routes",
    "/v1/groups/{group}/routes/lookup",
];

fn is_open(method: &str, path: &str) -> bool {
    OPEN_ROUTES
        .iter()
        .any(|(m, p)| *m == method && p.replace("{group}", GROUP) == path)
}

impl Fixture {
    /// `method path` with an `Authorization` header of `authorization`
    /// (none if `None`) and a JSON body that would be accepted.
    async fn send_with(
        &self,
        method: &str,
        path: &str,
        authorization: Option<&str>,
    ) -> (StatusCode, Value, axum::http::HeaderMap) {
        let mut request = Request::builder().method(method).uri(path);
        if let Some(value) = authorization {
            request = request.header(header::AUTHORIZATION, value);
        }
        let body = if path.ends_with("/heartbeat") {
            json!({"member_id": "", "member_epoch": 0, "topics": ["orders"]}).to_string()
        } else if (method == "PUT" && path.ends_with("/assignor")) || path.ends_with("/preview") {
            json!({"module": "range"}).to_string()
        } else if method == "PUT" {
            config_json(6).to_string()
        } else {
            String::new()
        };
        let request = if path.ends_with("/routes/lookup") {
            // A lookup the group can answer: its topic and a key.
            request
                .uri(format!("{path}?topic=orders&key=customer-42"))
                .body(Body::empty())
        } else if path.starts_with("/v1/assignors") && method == "POST" {
            request
                .uri(format!("{path}?name=mine&version=1"))
                .header(header::CONTENT_TYPE, "application/wasm")
                .body(Body::from(sticky_bytes().to_vec()))
        } else if body.is_empty() {
            request.body(Body::empty())
        } else {
            request
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(body))
        };
        self.send_as_is(request.unwrap()).await
    }
}

#[tokio::test]
async fn every_admin_route_is_401_without_the_token_and_403_with_another() {
    let f = fixture();
    f.put_group(config_json(4)).await;
    f.join("worker-a").await;
    f.assign().await;
    let before = f.snapshot().await;
    let assignors = f.assignor_count().await;
    let operations = documented_operations();
    let admin: Vec<_> = operations
        .iter()
        .filter(|(method, path)| !is_open(method, path))
        .collect();
    assert_eq!(
        operations.len() - admin.len(),
        OPEN_ROUTES.len(),
        "every open route is documented: {operations:?}"
    );
    assert!(admin.len() >= 12, "{admin:?}");
    for (method, path) in &admin {
        for missing in [
            None,
            Some("Basic dXNlcjpwYXNz"),
            Some("Bearer"),
            Some("Bearer "),
            Some(ADMIN_TOKEN),
        ] {
            let (status, value, headers) = f.send_with(method, path, missing).await;
            assert_error(&(status, value), StatusCode::UNAUTHORIZED, "unauthorized");
            assert_eq!(
                headers[header::WWW_AUTHENTICATE],
                "Bearer",
                "{method} {path} {missing:?}"
            );
        }
        for wrong in [
            "Bearer wrong-token-0123456789".to_owned(),
            format!("Bearer {ADMIN_TOKEN}x"),
            format!("Bearer {}", &ADMIN_TOKEN[1..]),
        ] {
            let (status, value, headers) = f.send_with(method, path, Some(&wrong)).await;
            assert_error(&(status, value), StatusCode::FORBIDDEN, "forbidden");
            assert!(
                !headers.contains_key(header::WWW_AUTHENTICATE),
                "{method} {path}"
            );
        }
    }
    assert_eq!(f.snapshot().await, before, "nothing changed");
    assert_eq!(f.assignor_count().await, assignors, "nothing uploaded");

    // With the token (the scheme in any case), none is refused for it.
    for (method, path) in &admin {
        let right = format!("bearer {ADMIN_TOKEN}");
        let (status, value, _) = f.send_with(method, path, Some(&right)).await;
        assert!(
            status != StatusCode::UNAUTHORIZED && status != StatusCode::FORBIDDEN,
            "{method} {path}: {status} {value}"
        );
        // The rollout routes answer 503 without the runner `serve` adds
        // (tests/e2e/rollout.rs has them served).
        if *method == "GET" && !path.starts_with("/v1/rollouts") {
            assert_eq!(status, StatusCode::OK, "{method} {path}: {value}");
        }
    }
}

#[tokio::test]
async fn the_open_routes_need_no_token_and_ignore_one() {
    let f = fixture();
    f.put_group(config_json(4)).await;
    for (method, path) in OPEN_ROUTES {
        let path = path.replace("{group}", GROUP);
        for authorization in [None, Some("Bearer wrong-token-0123456789")] {
            let (status, value, _) = f.send_with(method, &path, authorization).await;
            assert_eq!(status, StatusCode::OK, "{method} {path}: {value}");
        }
    }
    // An unknown route stays 404 without a token.
    let (status, value, _) = f.send_with("GET", "/v1/nothing", None).await;
    assert_error(&(status, value), StatusCode::NOT_FOUND, "not_found");
}

#[tokio::test]
async fn a_refused_request_reads_no_body() {
    let f = fixture();
    f.put_group(config_json(4)).await;
    let before = f.snapshot().await;
    // A body past the limit is not read: the token is checked first.
    let request = Request::builder()
        .method("PUT")
        .uri(format!("/v1/groups/{GROUP}"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(chunked_body(vec![b' '; 10 << 20]))
        .unwrap();
    let (status, value, _) = f.send_as_is(request).await;
    assert_error(&(status, value), StatusCode::UNAUTHORIZED, "unauthorized");
    assert_eq!(f.snapshot().await, before);
}

#[test]
fn the_document_names_the_token_each_route_needs() {
    let doc = serde_json::to_value(openapi()).unwrap();
    let schemes = &doc["components"]["securitySchemes"];
    for name in [
        crate::api::auth::ADMIN_SCHEME,
        crate::api::auth::MEMBER_SCHEME,
        crate::api::auth::READER_SCHEME,
        crate::api::auth::READ_ONLY_SCHEME,
    ] {
        assert_eq!(schemes[name]["type"], "http", "{schemes}");
        assert_eq!(schemes[name]["scheme"], "bearer", "{schemes}");
    }
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            let method = method.to_uppercase();
            if is_open(&method, &path.replace("{group}", GROUP)) {
                assert!(
                    !operation["security"]
                        .as_array()
                        .is_some_and(|s| s.iter().any(|r| r.get("admin_token").is_some())),
                    "{method} {path} is open"
                );
                continue;
            }
            let expected = if READER_ROUTES.contains(&path.as_str()) {
                json!([{"reader_token": []}, {"admin_token": []}, {"read_only_token": []}])
            } else if method == "GET" {
                json!([{"admin_token": []}, {"read_only_token": []}])
            } else {
                json!([{"admin_token": []}])
            };
            assert_eq!(operation["security"], expected, "{method} {path}");
            for status in ["401", "403"] {
                assert_eq!(
                    operation["responses"][status]["content"]["application/json"]["schema"]["$ref"],
                    "#/components/schemas/ErrorBody",
                    "{method} {path} {status}"
                );
            }
        }
    }
}

/// The test app's read-only token.
const READ_ONLY_TOKEN: &str = "test-read-only-token-0123456789";

/// The fixture's app with [`READ_ONLY_TOKEN`] as the read-only token.
fn fixture_with_read_only() -> Fixture {
    let mut f = fixture();
    let admin = super::super::AdminToken::new(ADMIN_TOKEN)
        .unwrap()
        .with_read_only(READ_ONLY_TOKEN)
        .unwrap();
    f.app = app(f.runtime.clone(), admin);
    f
}

#[tokio::test]
async fn the_read_only_token_reads_every_admin_get_and_changes_nothing() {
    let f = fixture_with_read_only();
    f.put_group(config_json(4)).await;
    f.join("worker-a").await;
    f.assign().await;
    let before = f.snapshot().await;
    let assignors = f.assignor_count().await;
    let read_only = format!("Bearer {READ_ONLY_TOKEN}");
    let admin: Vec<_> = documented_operations()
        .into_iter()
        .filter(|(method, path)| !is_open(method, path))
        .collect();
    let reads = admin.iter().filter(|(method, _)| method == "GET").count();
    assert!(reads >= 5 && admin.len() > reads, "{admin:?}");
    for (method, path) in &admin {
        let (status, value, _) = f.send_with(method, path, Some(&read_only)).await;
        if method == "GET" && path.starts_with("/v1/rollouts") {
            assert_error(
                &(status, value),
                StatusCode::SERVICE_UNAVAILABLE,
                "shard_unavailable",
            );
        } else if method == "GET" {
            assert_eq!(status, StatusCode::OK, "{method} {path}: {value}");
        } else {
            assert_error(&(status, value), StatusCode::FORBIDDEN, "read_only_token");
        }
        // Without it and with another token, as for any admin route.
        let (status, value, _) = f.send_with(method, path, None).await;
        assert_error(&(status, value), StatusCode::UNAUTHORIZED, "unauthorized");
        let wrong = format!("Bearer {READ_ONLY_TOKEN}x");
        let (status, value, _) = f.send_with(method, path, Some(&wrong)).await;
        assert_error(&(status, value), StatusCode::FORBIDDEN, "forbidden");
    }
    assert_eq!(f.snapshot().await, before, "nothing changed");
    assert_eq!(f.assignor_count().await, assignors, "nothing uploaded");
    // The admin token still changes things.
    let (status, value) = f.put_group(config_json(6)).await;
    assert_eq!(status, StatusCode::OK, "{value}");
}

#[tokio::test]
async fn the_token_route_says_what_the_token_may_do() {
    let f = fixture_with_read_only();
    let (status, value) = f.call("GET", "/v1/token", None).await;
    assert_eq!(
        (status, value),
        (StatusCode::OK, json!({"access": "admin"}))
    );
    let read_only = format!("Bearer {READ_ONLY_TOKEN}");
    let (status, value, _) = f.send_with("GET", "/v1/token", Some(&read_only)).await;
    assert_eq!(
        (status, value),
        (StatusCode::OK, json!({"access": "read_only"}))
    );
}

#[tokio::test]
async fn a_host_without_a_read_only_token_refuses_it_as_any_other() {
    let f = fixture();
    f.put_group(config_json(4)).await;
    let read_only = format!("Bearer {READ_ONLY_TOKEN}");
    let (status, value, _) = f.send_with("GET", "/v1/groups", Some(&read_only)).await;
    assert_error(&(status, value), StatusCode::FORBIDDEN, "forbidden");
}

#[test]
fn the_read_only_token_cannot_be_the_admin_token() {
    let admin = super::super::AdminToken::new(ADMIN_TOKEN).unwrap();
    let refused = admin.clone().with_read_only(ADMIN_TOKEN).unwrap_err();
    assert!(refused.contains("differ"), "{refused}");
    assert!(admin.with_read_only("short").is_err());
}
