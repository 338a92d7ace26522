//! Cluster routing, with two nodes in process: `b` is a plain app on a
//! real listener serving every shard; `a` is a cluster app that serves
//! every shard but [`GROUP`]'s, whose directory names `b` its owner.

use super::*;
use crate::cluster::ClusterView;
use crate::cluster::Directory;

struct TwoNodes {
    a: Fixture,
    b: Fixture,
    b_url: String,
}

async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

/// `a` routes to `owner_url` for the group's shard.
async fn two_nodes_with_owner_at(owner_url: Option<&str>) -> TwoNodes {
    let b = fixture();
    let b_url = serve(b.app.clone()).await;
    let mut a = fixture();
    let shard = a.runtime.shard_of(GROUP);
    assert!(a.runtime.unload_shard(u64::from(shard)).await.unwrap());
    let directory = Arc::new(Directory::new("a"));
    let mut view = ClusterView::default();
    view.nodes.insert("a".into(), "http://a.invalid".into());
    view.nodes
        .insert("b".into(), owner_url.map_or(b_url.clone(), str::to_owned));
    view.owners.insert(shard, "b".into());
    directory.update(view);
    a.app = super::super::cluster_app(
        a.runtime.clone(),
        super::super::AdminToken::new(ADMIN_TOKEN).unwrap(),
        directory,
        Default::default(),
    );
    TwoNodes { a, b, b_url }
}

#[tokio::test]
async fn a_heartbeat_for_another_nodes_group_is_redirected_there() {
    let nodes = two_nodes_with_owner_at(None).await;
    let request = Request::builder()
        .method("POST")
        .uri(format!("/v1/groups/{GROUP}/heartbeat?x=1"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(
            json!({"member_id": "", "member_epoch": 0, "topics": ["orders"]}).to_string(),
        ))
        .unwrap();
    let (status, body, headers) = nodes.a.send_as_is(request).await;
    let location = format!("{}/v1/groups/{GROUP}/heartbeat?x=1", nodes.b_url);
    assert_eq!(status, StatusCode::TEMPORARY_REDIRECT, "{body}");
    assert_eq!(headers[header::LOCATION], location.as_str());
    assert_eq!(body["error"]["code"], "not_coordinator");
    assert_eq!(body["error"]["location"], location.as_str());
    assert_eq!(nodes.a.record_count(), 0);
    assert_eq!(nodes.b.record_count(), 0, "a redirect is not forwarded");
}

#[tokio::test]
async fn an_admin_request_is_forwarded_to_the_owner_and_its_answer_passed_back() {
    let nodes = two_nodes_with_owner_at(None).await;
    let (status, body) = nodes.a.put_group(config_json(4)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(nodes.a.record_count(), 0, "a wrote nothing");
    assert!(nodes.b.record_count() > 0, "b did");
    // Read through either node, the same group.
    assert_eq!(nodes.a.view().await, nodes.b.view().await);
    // The list on a holds b's groups.
    let (status, list) = nodes.a.call("GET", "/v1/groups", None).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    assert_eq!(list["groups"][0]["name"], GROUP, "{list}");
    // The owner's refusals come back as they are: no token, 401.
    let request = Request::builder()
        .method("GET")
        .uri(format!("/v1/groups/{GROUP}"))
        .body(Body::empty())
        .unwrap();
    let (status, body, headers) = nodes.a.send_as_is(request).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert_eq!(headers[header::WWW_AUTHENTICATE], "Bearer");
    // A forwarded request is never forwarded again.
    let request = Request::builder()
        .method("GET")
        .uri(format!("/v1/groups/{GROUP}"))
        .header(super::super::routing::FORWARDED_BY_HEADER, "c")
        .body(Body::empty())
        .unwrap();
    let (status, body, headers) = nodes.a.send(request).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["error"]["code"], "shard_unavailable");
    assert!(headers.contains_key(header::RETRY_AFTER));
}

#[tokio::test]
async fn the_coordinator_route_names_the_owner() {
    let nodes = two_nodes_with_owner_at(None).await;
    let path = format!("/v1/groups/{GROUP}/coordinator");
    let request = Request::builder().uri(&path).body(Body::empty()).unwrap();
    let (status, body, _) = nodes.a.send_as_is(request).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let shard = nodes.a.runtime.shard_of(GROUP);
    assert_eq!(
        body,
        json!({"group": GROUP, "shard": shard, "node": "b", "url": nodes.b_url, "this_node": false})
    );
    // A group of a shard `a` serves: `a`.
    let request = Request::builder()
        .uri("/v1/groups/elsewhere-0/coordinator")
        .body(Body::empty())
        .unwrap();
    let other_shard = nodes.a.runtime.shard_of("elsewhere-0");
    assert_ne!(other_shard, shard);
    let (_, body, _) = nodes.a.send_as_is(request).await;
    assert_eq!(body["node"], "a");
    assert_eq!(body["this_node"], true);
    // One host coordinates everything itself.
    let request = Request::builder().uri(&path).body(Body::empty()).unwrap();
    let (status, body, _) = nodes.b.send_as_is(request).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body,
        json!({"group": GROUP, "shard": shard, "this_node": true})
    );
}

#[tokio::test]
async fn an_owner_that_does_not_answer_is_503_with_retry_after() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let nodes = two_nodes_with_owner_at(Some(&dead)).await;
    let before = nodes.a.record_count();
    let request = Request::builder()
        .method("GET")
        .uri(format!("/v1/groups/{GROUP}"))
        .body(Body::empty())
        .unwrap();
    let (status, body, headers) = nodes.a.send(request).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["error"]["code"], "coordinator_unreachable");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("\"b\""),
        "{body}"
    );
    assert!(headers.contains_key(header::RETRY_AFTER));
    assert_eq!(nodes.a.record_count(), before);
}
