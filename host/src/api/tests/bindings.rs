//! Bindings: a bind swaps the target at once, rollback returns to the
//! previous binding, bad binds change nothing; a failing assignor keeps the
//! target; params up to what an assignor accepts.

use super::assignors::sticky_bytes;
use super::*;

/// The bind route of [`GROUP`].
fn bind_path() -> String {
    format!("/v1/groups/{GROUP}/assignor")
}

/// The rollback route of [`GROUP`].
fn rollback_path() -> String {
    format!("/v1/groups/{GROUP}/assignor/rollback")
}

/// `mine@1.0` uploaded, and [`GROUP`] on `sticky` with two members that
/// took up their first target.
async fn two_members_on_sticky_with_mine_uploaded(
    f: &Fixture,
) -> (HeartbeatResponseBody, HeartbeatResponseBody) {
    let (status, module) = f.upload("mine", "1.0", sticky_bytes()).await;
    assert_eq!(status, StatusCode::CREATED, "{module}");
    let (status, _) = f.put_group(config_json(6)).await;
    assert_eq!(status, StatusCode::CREATED);
    let a = f.join("worker-a").await;
    let b = f.join("worker-b").await;
    f.assign().await;
    (f.beat(&a).await, f.beat(&b).await)
}

/// Waits (up to two minutes) until no assignor call is in flight.
async fn wait_for_calls(f: &Fixture) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while f.runtime.calls_in_flight() > 0 {
        assert!(Instant::now() < deadline, "the assignor call never ended");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Binds `mine@1.0` by name@version: the new target is asked at once (the
/// clock does not move), and the members get there cooperatively.
async fn bind_mine_and_converge(
    f: &Fixture,
    mut a: HeartbeatResponseBody,
    mut b: HeartbeatResponseBody,
) {
    let (status, view) = f
        .call(
            "PUT",
            &bind_path(),
            Some(json!({"module": "mine@1.0", "params": {"k": "v"}})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{view}");
    assert_eq!(view["config"]["assignor"], "mine@1.0");
    assert_eq!(view["config"]["params"], json!({"k": "v"}));
    let bindings = view["bindings"].as_array().unwrap();
    assert_eq!(bindings.len(), 2, "{view}");
    assert_eq!(bindings[0]["module"], "sticky");
    assert_eq!(bindings[1]["module"], "mine@1.0");
    assert_eq!(bindings[1]["seq"], 2);
    wait_for_calls(f).await;
    let view = f.view().await;
    assert_eq!(view["target_epoch"], view["group_epoch"], "{view}");
    for _ in 0..3 {
        a = f.beat(&a).await;
        b = f.beat(&b).await;
    }
    assert_eq!((a.active.len(), b.active.len()), (3, 3));
    assert_eq!(f.view().await["state"], "stable");
}

#[tokio::test]
async fn bad_binds_and_a_rollback_with_nothing_to_return_to_change_nothing() {
    let f = fixture();
    two_members_on_sticky_with_mine_uploaded(&f).await;
    let (path, rollback) = (bind_path(), rollback_path());
    let before = f.snapshot().await;
    assert_error(
        &f.call("POST", &rollback, None).await,
        StatusCode::CONFLICT,
        "no_previous_binding",
    );
    let refused_binds = [
        (json!({"module": "nope@1"}), "unknown_assignor"),
        (json!({"modul": "range"}), "invalid_json"),
        (json!({"module": ""}), "unknown_assignor"),
    ];
    for (body, code) in refused_binds {
        let answer = f.call("PUT", &path, Some(body)).await;
        assert_error(&answer, StatusCode::BAD_REQUEST, code);
    }
    let too_many: serde_json::Map<String, Value> =
        (0..100).map(|i| (format!("k{i}"), json!("v"))).collect();
    let body = json!({"module": "range", "params": too_many});
    assert_error(
        &f.call("PUT", &path, Some(body)).await,
        StatusCode::BAD_REQUEST,
        "invalid_request",
    );
    let body = json!({"module": "range"});
    assert_error(
        &f.call("PUT", "/v1/groups/nope/assignor", Some(body)).await,
        StatusCode::NOT_FOUND,
        "unknown_group",
    );
    assert_error(
        &f.call("POST", "/v1/groups/nope/assignor/rollback", None)
            .await,
        StatusCode::NOT_FOUND,
        "unknown_group",
    );
    assert_eq!(f.snapshot().await, before);
}

#[tokio::test]
async fn a_bind_swaps_at_once_and_the_bound_module_cannot_be_deleted() {
    let f = fixture();
    let (a, b) = two_members_on_sticky_with_mine_uploaded(&f).await;
    bind_mine_and_converge(&f, a, b).await;
    assert_error(
        &f.call("DELETE", "/v1/assignors/mine@1.0", None).await,
        StatusCode::CONFLICT,
        "module_in_use",
    );
}

#[tokio::test]
async fn rollback_returns_and_returns_again_then_refuses_a_deleted_module() {
    let f = fixture();
    let (a, b) = two_members_on_sticky_with_mine_uploaded(&f).await;
    bind_mine_and_converge(&f, a, b).await;
    let rollback = rollback_path();

    // Rollback to sticky, then again back to mine@1.0 (like `cd -`).
    let (status, view) = f.call("POST", &rollback, None).await;
    assert_eq!(status, StatusCode::OK, "{view}");
    assert_eq!(view["config"]["assignor"], "sticky");
    assert_eq!(view["config"]["params"], json!({}));
    assert_eq!(view["bindings"][2]["rollback_to"], 1);
    let (status, view) = f.call("POST", &rollback, None).await;
    assert_eq!(status, StatusCode::OK, "{view}");
    assert_eq!(view["config"]["assignor"], "mine@1.0");
    assert_eq!(view["bindings"][3]["rollback_to"], 2);
    assert_eq!(f.view().await["bindings"].as_array().unwrap().len(), 4);

    // Back to a built-in; the module, no longer bound, can go; a rollback
    // to it is then refused and changes nothing.
    let body = json!({"module": "range"});
    let (status, _) = f.call("PUT", &bind_path(), Some(body)).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = f.call("DELETE", "/v1/assignors/mine@1.0", None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let before = f.snapshot().await;
    assert_error(
        &f.call("POST", &rollback, None).await,
        StatusCode::BAD_REQUEST,
        "unknown_assignor",
    );
    assert_eq!(f.snapshot().await, before);
    while f.runtime.calls_in_flight() > 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    f.assert_replay_matches().await;
}

/// [`GROUP`] bound to an uploaded `mine@1.0` (returned by id), with two
/// members that took up its first answer, and no failure shown.
async fn two_members_on_mine(
    f: &Fixture,
) -> (String, HeartbeatResponseBody, HeartbeatResponseBody) {
    let (status, module) = f.upload("mine", "1.0", sticky_bytes()).await;
    assert_eq!(status, StatusCode::CREATED, "{module}");
    let id = module["id"].as_str().unwrap().to_owned();
    let mut config = config_json(6);
    config["assignor"] = json!("mine@1.0");
    let (status, _) = f.put_group(config).await;
    assert_eq!(status, StatusCode::CREATED);
    let a = f.join("worker-a").await;
    let b = f.join("worker-b").await;
    f.assign().await;
    let a = f.beat(&a).await;
    let b = f.beat(&b).await;
    assert_eq!((a.active.len(), b.active.len()), (3, 3));
    assert!(f.view().await.get("assignor_failures").is_none());
    (id, a, b)
}

/// The view after the first failed call of `mine@1.0`: the target behind
/// the group epoch, and the failure named with its code and counts.
fn assert_first_failure_shown(view: &Value) {
    assert!(
        view["target_epoch"].as_u64() < view["group_epoch"].as_u64(),
        "{view}"
    );
    let failures = &view["assignor_failures"];
    assert_eq!(failures["module"], "mine@1.0", "{view}");
    assert_eq!(failures["code"], "unknown_assignor", "{view}");
    assert!(failures["message"].as_str().unwrap().contains("mine@1.0"));
    assert_eq!(
        (failures["consecutive"].as_u64(), failures["total"].as_u64()),
        (Some(1), Some(1))
    );
}

#[tokio::test]
async fn a_failing_assignor_keeps_the_target_shows_in_the_view_and_backs_off_while_another_group_is_served()
 {
    let f = fixture();
    let (id, a, b) = two_members_on_mine(&f).await;

    // A second, healthy group.
    let (status, _) = f
        .call("PUT", "/v1/groups/healthy", Some(config_json(4)))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let healthy_join = |name: &'static str| {
        f.call(
            "POST",
            "/v1/groups/healthy/heartbeat",
            Some(json!({
                "member_id": "", "member_name": name, "member_epoch": 0, "topics": ["orders"],
            })),
        )
    };
    let (status, h1) = healthy_join("h1").await;
    assert_eq!(status, StatusCode::OK, "{h1}");

    // The module goes away under the bound group (as if its store broke):
    // every call of the group fails from now on.
    f.runtime.registry().unlist(&id).expect("listed");
    let _c = f.join("worker-c").await;
    f.assign().await;
    assert_first_failure_shown(&f.view().await);
    // The last good target stays: the members keep their tasks.
    let a2 = f.beat(&a).await;
    let b2 = f.beat(&b).await;
    assert_eq!((a2.active, b2.active), (a.active.clone(), b.active.clone()));

    // The healthy group is served meanwhile: its member got every task.
    let (status, h1) = f
        .call(
            "POST",
            "/v1/groups/healthy/heartbeat",
            Some(json!({
                "member_id": h1["member_id"], "member_epoch": h1["member_epoch"], "owned": h1["active"],
            })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{h1}");
    assert_eq!(h1["active"].as_array().unwrap().len(), 4, "{h1}");

    // Backoff: the first retry after one expansion timeout, the next after
    // two.
    f.assign().await;
    let consecutive = |view: Value| view["assignor_failures"]["consecutive"].as_u64().unwrap();
    assert_eq!(consecutive(f.view().await), 2);
    f.assign().await;
    assert_eq!(consecutive(f.view().await), 2, "backing off");
    f.assign().await;
    assert_eq!(consecutive(f.view().await), 3);
}

/// Past the number of params an assignor accepts, a config is refused, not
/// accepted and never assigned as one of 63 or 64 params would be (the host
/// adds `acceptable_recovery_lag` and `max_learners`, and the guest SDK
/// refuses an input of more than 64); at the limit, the group is assigned.
#[tokio::test(flavor = "multi_thread")]
async fn params_up_to_what_an_assignor_accepts_and_no_more() {
    let f = fixture();
    let params = |count: usize| -> Value {
        (0..count)
            .map(|i| (format!("p{i}"), json!("x")))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    for count in [63, 64] {
        let mut config = config_json(4);
        config["params"] = params(count);
        let answer = f.put_group(config).await;
        assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_request");
        assert!(
            answer.1["error"]["message"]
                .as_str()
                .unwrap()
                .contains("more than 62 params"),
            "{}",
            answer.1
        );
    }
    let mut config = config_json(4);
    config["params"] = params(1);
    config["params"]["p0"] = json!("x".repeat(1025));
    let answer = f.put_group(config).await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_request");
    let (_, groups) = f.call("GET", "/v1/groups", None).await;
    assert_eq!(groups, json!({"groups": []}), "nothing created");

    let mut config = config_json(4);
    config["params"] = params(62);
    config["params"]["p0"] = json!("x".repeat(1024));
    let (status, view) = f.put_group(config).await;
    assert_eq!(status, StatusCode::CREATED, "{view}");
    let member = f.join("a").await;
    f.assign().await;
    let member = f.beat(&member).await;
    assert_eq!(member.active.len(), 4, "{:?}", f.view().await);
}
