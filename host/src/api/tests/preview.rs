//! Previews: what a candidate assignor would do to a group (its raw
//! answer, the moves, the balance, the learners it creates and the tasks
//! held back), with nothing applied; refused and failing previews.

use super::*;

/// The preview route of [`GROUP`].
fn preview_path() -> String {
    format!("/v1/groups/{GROUP}/assignor/preview")
}

/// The group's assignor input as `GET .../assignor-input` answers it.
async fn assignor_input(f: &Fixture) -> (StatusCode, Value) {
    f.call("GET", &format!("/v1/groups/{GROUP}/assignor-input"), None)
        .await
}

/// [`GROUP`] on `sticky` with six tasks held by worker-a and worker-b, and
/// worker-c just joined with none.
async fn two_busy_members_and_a_new_one(f: &Fixture) {
    let (status, _) = f.put_group(config_json(6)).await;
    assert_eq!(status, StatusCode::CREATED);
    let a = f.join("worker-a").await;
    let b = f.join("worker-b").await;
    f.assign().await;
    f.beat(&a).await;
    f.beat(&b).await;
    let c = f.join("worker-c").await;
    assert!(c.active.is_empty());
}

/// Nothing changed since `before` and `input_before`: same views, same
/// input, no record, no call.
async fn assert_nothing_changed(
    f: &Fixture,
    before: (Value, usize),
    input_before: (StatusCode, Value),
) {
    assert_eq!(f.snapshot().await, before);
    assert_eq!(assignor_input(f).await, input_before);
    assert_eq!(f.runtime.calls_in_flight(), 0);
    f.assert_replay_matches().await;
}

#[tokio::test]
async fn preview_of_a_group_without_members_is_409_and_changes_nothing() {
    let f = fixture();
    let (status, _) = f.put_group(config_json(6)).await;
    assert_eq!(status, StatusCode::CREATED);
    let before = f.snapshot().await;
    let answer = f
        .call("POST", &preview_path(), Some(json!({"module": "range"})))
        .await;
    assert_error(&answer, StatusCode::CONFLICT, "empty_group");
    assert!(
        answer.1["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no members"),
        "{}",
        answer.1
    );
    assert_eq!(f.snapshot().await, before);
}

#[tokio::test]
async fn preview_shows_moves_and_balance_and_changes_nothing() {
    let f = fixture();
    two_busy_members_and_a_new_one(&f).await;
    let before = f.snapshot().await;
    let input_before = assignor_input(&f).await;
    let body = json!({"module": "range", "params": {"k": "v"}});
    let (status, preview) = f.call("POST", &preview_path(), Some(body)).await;
    assert_eq!(status, StatusCode::OK, "{preview}");
    assert_eq!(preview["module"], "range");
    assert_eq!(preview["params"]["k"], "v");
    assert_eq!(preview["assignment"].as_array().unwrap().len(), 3);
    let raw_active: usize = preview["assignment"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["active"].as_array().unwrap().len())
        .sum();
    assert_eq!(raw_active, 6, "{preview}");
    assert_eq!(preview["balance_before"]["min"], 0, "{preview}");
    assert_eq!(preview["balance_before"]["max"], 3, "{preview}");
    assert_eq!(preview["balance_before"]["spread"], 3, "{preview}");
    assert_eq!(preview["balance_after"]["spread"], 0, "{preview}");
    assert_eq!(
        preview["balance_after"]["active"]["static:worker-c"], 2,
        "{preview}"
    );
    let moves = preview["moves"].as_array().unwrap();
    assert!(moves.len() >= 2, "{preview}");
    assert!(
        moves
            .iter()
            .filter(|m| m["to"] == "static:worker-c")
            .count()
            == 2,
        "{preview}"
    );
    assert_eq!(preview["learners_created"], json!([]), "{preview}");
    assert_eq!(preview["held_back"], json!([]), "{preview}");
    assert_nothing_changed(&f, before, input_before).await;
}

#[tokio::test]
async fn previews_of_an_unknown_module_or_group_or_a_bad_body_are_refused_and_change_nothing() {
    let f = fixture();
    two_busy_members_and_a_new_one(&f).await;
    let path = preview_path();
    let before = f.snapshot().await;
    let input_before = assignor_input(&f).await;
    assert_error(
        &f.call("POST", &path, Some(json!({"module": "nope@1"})))
            .await,
        StatusCode::BAD_REQUEST,
        "unknown_assignor",
    );
    assert_error(
        &f.call(
            "POST",
            "/v1/groups/nope/assignor/preview",
            Some(json!({"module": "range"})),
        )
        .await,
        StatusCode::NOT_FOUND,
        "unknown_group",
    );
    assert_error(
        &f.call("POST", &path, Some(json!({"modul": "range"}))).await,
        StatusCode::BAD_REQUEST,
        "invalid_json",
    );
    assert_nothing_changed(&f, before, input_before).await;
}

#[tokio::test]
async fn preview_to_cold_members_creates_learners_and_holds_tasks_back() {
    let f = fixture();
    let mut config = config_json(4);
    config["learners"] = json!("host");
    config["max_learners"] = json!(10);
    f.put_group(config).await;
    let a = f.join("worker-a").await;
    f.assign().await;
    let a = f.beat(&a).await;
    assert_eq!(a.active.len(), 4);
    f.join("worker-b").await;

    let before = f.snapshot().await;
    let (status, preview) = f
        .call(
            "POST",
            &format!("/v1/groups/{GROUP}/assignor/preview"),
            Some(json!({"module": "range"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{preview}");
    // The raw answer gives b two tasks; the host keeps them on a and warms
    // them up on b first.
    let b_raw = preview["assignment"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["member"] == "static:worker-b")
        .unwrap();
    assert_eq!(b_raw["active"].as_array().unwrap().len(), 2, "{preview}");
    assert_eq!(preview["moves"], json!([]), "{preview}");
    let learners = preview["learners_created"].as_array().unwrap();
    assert_eq!(learners.len(), 2, "{preview}");
    assert!(learners.iter().all(|l| l["member"] == "static:worker-b"));
    let held = preview["held_back"].as_array().unwrap();
    assert_eq!(held.len(), 2, "{preview}");
    assert!(
        held.iter()
            .all(|h| h["owner"] == "static:worker-a" && h["wanted"] == "static:worker-b")
    );
    assert_eq!(
        preview["target"]["static:worker-b"]["learner"], b_raw["active"],
        "{preview}"
    );
    assert_eq!(preview["balance_after"]["active"]["static:worker-a"], 4);
    assert_eq!(preview["balance_after"]["spread"], 4);
    assert_eq!(f.snapshot().await, before);
}

#[tokio::test]
async fn a_failing_preview_is_422_with_the_plugins_message_and_changes_nothing() {
    let f = fixture();
    f.put_group(config_json(4)).await;
    f.join("worker-a").await;
    let before = f.snapshot().await;
    let answer = f
        .call(
            "POST",
            &format!("/v1/groups/{GROUP}/assignor/preview"),
            Some(json!({"module": "learner-aware", "params": {"num_standby": "lots"}})),
        )
        .await;
    assert_error(&answer, StatusCode::UNPROCESSABLE_ENTITY, "assignor_failed");
    let message = answer.1["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("learner-aware") && message.contains("num_standby"),
        "{message}"
    );
    assert_eq!(f.snapshot().await, before);
}
