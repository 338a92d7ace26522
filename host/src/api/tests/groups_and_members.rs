//! Groups and members: a group created and updated, members joining and
//! heartbeating, learners and draining, as the views show them; member
//! errors and a full group refused without changing anything.

use super::*;

#[tokio::test]
async fn put_creates_then_updates_and_get_shows_the_view() {
    let f = fixture();
    let (status, view) = f.put_group(config_json(12)).await;
    assert_eq!(status, StatusCode::CREATED, "{view}");
    assert_eq!(view["name"], GROUP);
    assert_eq!(
        view["config"]["topics"],
        json!([{"name": "orders", "partitions": 12}])
    );
    assert_eq!(
        view["config"]["session_timeout_ms"], 45_000,
        "defaults filled in"
    );
    assert_eq!(view["group_epoch"], 1);
    assert_eq!(view["target_epoch"], 0);
    assert_eq!(view["state"], "assigning");
    assert_eq!(view["members"], json!([]));

    let (status, again) = f.put_group(config_json(12)).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the same config: an update that changes nothing"
    );
    assert_eq!(again, view);

    let mut bigger = config_json(16);
    bigger["assignor"] = json!("range");
    let (status, view) = f.put_group(bigger).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(view["config"]["assignor"], "range");
    assert_eq!(view["group_epoch"], 2);

    let (status, list) = f.call("GET", "/v1/groups", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        list,
        json!({"groups": [{"name": GROUP, "group_epoch": 2, "target_epoch": 0,
                           "state": "assigning", "members": 0, "assignor": "range"}]})
    );
    f.assert_replay_matches().await;
}

/// The view of the group of two settled members: stable at epoch 3, and
/// worker-a (`a`) shown as it joined, holding what it was answered.
fn assert_stable_view_of_two(view: &Value, a: &HeartbeatResponseBody) {
    assert_eq!(view["state"], "stable", "{view}");
    assert_eq!(
        (&view["group_epoch"], &view["target_epoch"]),
        (&json!(3), &json!(3))
    );
    let members = view["members"].as_array().unwrap();
    assert_eq!(members.len(), 2);
    let first = &members[0];
    assert_eq!(first["slot"], "static:worker-a");
    assert_eq!(first["name"], "worker-a");
    assert_eq!(first["member_id"], a.member_id.as_str());
    assert_eq!(first["topics"], json!(["orders"]));
    assert_eq!(first["capacity"], 1);
    assert_eq!(first["reconcile_state"], "stable");
    assert_eq!(first["member_epoch"], 3);
    assert_eq!(first["active"], serde_json::to_value(&a.active).unwrap());
    assert_eq!(first["target"]["active"], first["active"]);
    assert_eq!(first["lags"], json!([]));
    assert_eq!(view["learner_count"], 0);
}

/// The captured assignor input is docs/design.md's GroupInput, with the
/// lag worker-a (`a`) reported.
async fn assert_input_is_the_offline_contract(f: &Fixture, a: &HeartbeatResponseBody) {
    let (status, input) = f
        .call("GET", &format!("/v1/groups/{GROUP}/assignor-input"), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(input["topics"], json!({"orders": 6}));
    assert_eq!(input["members"][0]["id"], a.member_id.as_str());
    assert_eq!(input["members"][0]["name"], "worker-a");
    assert_eq!(input["members"][0]["lags"], json!([["orders", 4, 1500]]));
    let text = input.to_string();
    let parsed = assignd_guest_sdk::json::parse_input(
        &text,
        &assignd_guest_sdk::validate::InputLimits::default(),
    )
    .expect("the offline contract parses it");
    assert_eq!(parsed.members.len(), 2);
}

#[tokio::test]
async fn members_join_get_tasks_and_the_views_show_them() {
    let f = fixture();
    f.put_group(config_json(6)).await;
    let a = f.join("worker-a").await;
    let b = f.join("worker-b").await;
    assert_eq!((a.member_epoch, a.active.len()), (0, 0), "no target yet");
    // The first target is due an expansion timeout after the first join:
    // beat again then, not a whole heartbeat interval later.
    assert!(a.heartbeat_interval_ms <= EXPANSION_MS.max(100), "{a:?}");
    f.assign().await;
    let a = f.beat(&a).await;
    let b = f.beat(&b).await;
    assert_eq!(
        a.heartbeat_interval_ms, 3_000,
        "stable: the group's interval"
    );
    assert_eq!((a.active.len(), b.active.len()), (3, 3), "{a:?} {b:?}");
    assert!(a.active.iter().all(|t| !b.active.contains(t)));
    // Configured (1), two joins (2, 3): one target for the batch.
    assert_eq!(a.member_epoch, 3);

    assert_stable_view_of_two(&f.view().await, &a);

    // Lags are shown as reported.
    let (status, _) = f
        .heartbeat(json!({
            "member_id": a.member_id, "member_epoch": 3, "lags": [["orders", 4, 1500]],
        }))
        .await;
    assert_eq!(status, StatusCode::OK);
    let view = f.view().await;
    assert_eq!(view["members"][0]["lags"], json!([["orders", 4, 1500]]));

    // The captured assignor input is docs/design.md's GroupInput.
    assert_input_is_the_offline_contract(&f, &a).await;

    // A leave removes a dynamic member; a static one keeps its slot, away.
    let (status, left) = f
        .heartbeat(json!({"member_id": b.member_id, "member_epoch": -1}))
        .await;
    assert_eq!(status, StatusCode::OK, "{left}");
    assert_eq!(left["drained"], true);
    let view = f.view().await;
    assert_eq!(view["members"][1]["away"], true);
    f.assert_replay_matches().await;
}

#[tokio::test]
async fn learners_show_in_the_view_with_their_lag() {
    let f = fixture();
    let mut config = config_json(4);
    config["learners"] = json!("host");
    config["max_learners"] = json!(1);
    f.put_group(config).await;
    let a = f.join("worker-a").await;
    f.assign().await;
    let a = f.beat(&a).await;
    assert_eq!(a.active.len(), 4);
    let b = f.join("worker-b").await;
    f.assign().await;
    let b = f.beat(&b).await;
    assert!(b.active.is_empty(), "b is cold: nothing moves yet");
    assert_eq!(b.learner.len(), 1, "one learner at most: {b:?}");
    let task = b.learner[0].clone();
    let view = f.view().await;
    assert_eq!(view["learner_count"], 1);
    assert_eq!(
        view["learners"],
        json!([{"task": task, "slot": "static:worker-b", "member_id": b.member_id, "lag": null}])
    );
    assert_eq!(view["members"][1]["target"]["learner"], json!([task]));
    let (status, _) = f
        .heartbeat(json!({
            "member_id": b.member_id, "member_epoch": b.member_epoch,
            "lags": [[task.topic, task.partition, 50_000]],
        }))
        .await;
    assert_eq!(status, StatusCode::OK);
    let view = f.view().await;
    assert_eq!(view["learners"][0]["lag"], 50_000);
    f.assert_replay_matches().await;
}

#[tokio::test]
async fn drain_by_name_or_id_is_202_then_200() {
    let f = fixture();
    f.put_group(config_json(4)).await;
    let a = f.join("worker-a").await;
    f.join("worker-b").await;
    let path = format!("/v1/groups/{GROUP}/members/worker-b/drain");
    let (status, view) = f.call("POST", &path, None).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{view}");
    assert_eq!(view["members"][1]["draining"], true);
    let (status, _) = f.call("POST", &path, None).await;
    assert_eq!(status, StatusCode::OK, "already draining");
    let by_id = format!("/v1/groups/{GROUP}/members/{}/drain", a.member_id);
    let (status, view) = f.call("POST", &by_id, None).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(view["members"][0]["draining"], true);

    let before = f.snapshot().await;
    let answer = f
        .call(
            "POST",
            &format!("/v1/groups/{GROUP}/members/nobody/drain"),
            None,
        )
        .await;
    assert_error(&answer, StatusCode::NOT_FOUND, "unknown_member");
    let answer = f
        .call(
            "POST",
            "/v1/groups/no-such-group/members/worker-a/drain",
            None,
        )
        .await;
    assert_error(&answer, StatusCode::NOT_FOUND, "unknown_group");
    assert_eq!(f.snapshot().await, before);
    f.assert_replay_matches().await;
}

#[tokio::test]
async fn member_errors_map_to_their_status_and_change_nothing() {
    let f = fixture();
    f.put_group(config_json(4)).await;
    let first = f.join("worker-a").await;
    f.assign().await;
    let a = f.beat(&f.join("worker-b").await).await;
    let b_epoch = a.member_epoch;
    let before = f.snapshot().await;

    // An unknown group, an unknown member.
    let answer = f
        .call(
            "POST",
            "/v1/groups/nope/heartbeat",
            Some(json!({"member_id": "", "member_epoch": 0, "topics": ["orders"]})),
        )
        .await;
    assert_error(&answer, StatusCode::NOT_FOUND, "unknown_group");
    let answer = f
        .heartbeat(json!({"member_id": "m-nobody", "member_epoch": 1}))
        .await;
    assert_error(&answer, StatusCode::NOT_FOUND, "unknown_member");
    // A stale epoch.
    let answer = f
        .heartbeat(json!({"member_id": a.member_id, "member_epoch": b_epoch + 5}))
        .await;
    assert_error(&answer, StatusCode::CONFLICT, "stale_epoch");
    // Reporting a task the member was never given.
    let foreign: Vec<Task> = (0..4)
        .map(|p| Task::new("orders", p))
        .filter(|t| !a.active.contains(t))
        .take(1)
        .collect();
    let answer = f
        .heartbeat(
            json!({"member_id": a.member_id, "member_epoch": a.member_epoch, "owned": foreign}),
        )
        .await;
    assert_error(&answer, StatusCode::CONFLICT, "not_owned");
    // Invalid requests: a join without topics, an empty topic name, capacity 0,
    // an epoch below -1, a join with a member id but epoch 5.
    for body in [
        json!({"member_id": "", "member_epoch": 0}),
        json!({"member_id": "", "member_epoch": 0, "topics": [""]}),
        json!({"member_id": "", "member_epoch": 0, "topics": ["orders"], "capacity": 0}),
        json!({"member_id": a.member_id, "member_epoch": -2}),
        json!({"member_id": "", "member_epoch": 5, "topics": ["orders"]}),
        json!({"member_id": "", "member_epoch": 0, "topics": ["orders"], "member_name": ""}),
    ] {
        let answer = f.heartbeat(body.clone()).await;
        assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_request");
    }
    assert_eq!(
        f.snapshot().await,
        before,
        "refused requests changed nothing"
    );

    // A restart of worker-a (same name) replaces the first incarnation.
    let again = f.join("worker-a").await;
    assert_ne!(again.member_id, first.member_id);
    let before = f.snapshot().await;
    let answer = f
        .heartbeat(json!({"member_id": first.member_id, "member_epoch": first.member_epoch}))
        .await;
    assert_error(&answer, StatusCode::CONFLICT, "replaced");
    assert_eq!(f.snapshot().await, before);
    f.assert_replay_matches().await;
}

#[tokio::test]
async fn a_full_group_refuses_the_next_member_with_409() {
    let f = fixture();
    f.put_group(config_json(1)).await;
    for i in 0..MEMBERS_PER_GROUP_MAX {
        let request = crate::protocol::core::Heartbeat::join(
            GROUP,
            Some(&format!("w-{i}")),
            vec!["orders".into()],
        );
        // Joins without a member token are rate-limited: slow enough.
        f.runtime.clock().advance(10);
        f.runtime.heartbeat(&request, None).await.unwrap();
    }
    let records = f.record_count();
    let answer = f
        .heartbeat(json!({"member_id": "", "member_epoch": 0, "topics": ["orders"], "member_name": "one-too-many"}))
        .await;
    assert_error(&answer, StatusCode::CONFLICT, "group_full");
    assert_eq!(f.record_count(), records);
}
