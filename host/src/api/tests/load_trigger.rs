//! The load trigger through the runtime: the runtime tells the core that
//! the built-in `sticky` balances load, members report loads outside the
//! band, and after the load window the group's view shows a target
//! installed for reason `load`; a group bound to `range` (which balances
//! counts only) is never rebalanced for load.

use assignd_wire::Task;

use super::*;

const WINDOW_MS: u64 = 3_000;

fn load_config(assignor: &str) -> Value {
    let mut config = config_json(4);
    config["assignor"] = json!(assignor);
    config["load_unit"] = json!("records/s");
    config["load_half_life_ms"] = json!(0);
    config["load_window_ms"] = json!(WINDOW_MS);
    config["load_cooldown_ms"] = json!(1_000);
    config["heartbeat_interval_ms"] = json!(1_000);
    config
}

/// A hot partition 0, the rest cold: outside a 10 % band whatever the
/// assignment.
fn load_of(task: &Task) -> f64 {
    if task.partition == 0 { 1_000.0 } else { 1.0 }
}

impl Fixture {
    async fn beat_loads(&self, member: &HeartbeatResponseBody) -> HeartbeatResponseBody {
        let loads: Vec<Value> = member
            .active
            .iter()
            .map(|t| json!([t.topic, t.partition, load_of(t)]))
            .collect();
        let (status, answer) = self
            .heartbeat(json!({
                "member_id": member.member_id,
                "member_epoch": member.member_epoch,
                "owned": member.active,
                "loads": loads,
            }))
            .await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        serde_json::from_value(answer).unwrap()
    }

    /// A second later: a tick, its assignor call answered, and every
    /// member's report.
    async fn second_with_loads(&self, members: &mut [HeartbeatResponseBody]) {
        self.runtime.clock().advance(1_000);
        self.runtime.tick().await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(120);
        while self.runtime.calls_in_flight() > 0 {
            assert!(Instant::now() < deadline, "the assignor call never ended");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        for member in members.iter_mut() {
            *member = self.beat_loads(member).await;
        }
    }
}

/// Two members of a group with loads bound to `assignor`, settled.
async fn settled_pair(assignor: &str) -> (Fixture, Vec<HeartbeatResponseBody>) {
    let f = fixture();
    let (status, view) = f.put_group(load_config(assignor)).await;
    assert_eq!(status, StatusCode::CREATED, "{view}");
    let mut members = vec![f.join("a").await, f.join("b").await];
    f.assign().await;
    for _ in 0..3 {
        for member in members.iter_mut() {
            *member = f.beat(member).await;
        }
    }
    assert_eq!(f.view().await["last_rebalance"]["reason"], "config");
    (f, members)
}

#[tokio::test]
async fn loads_outside_the_band_rebalance_a_sticky_group_for_load() {
    let (f, mut members) = settled_pair("sticky").await;
    let mut seconds = 0;
    while f.view().await["last_rebalance"]["reason"] != "load" {
        seconds += 1;
        assert!(seconds <= 20, "no load rebalance: {}", f.view().await);
        f.second_with_loads(&mut members).await;
    }
    let view = f.view().await;
    assert_eq!(view["load_trigger"]["assignor_balances_load"], true);
    assert!(
        seconds * 1_000 > WINDOW_MS,
        "not before the window: after {seconds} s"
    );
    assert_eq!(view["last_rebalance"]["epoch"], view["target_epoch"]);
    f.assert_replay_matches().await;
}

#[tokio::test]
async fn a_group_whose_assignor_balances_counts_is_not_rebalanced_for_load() {
    let (f, mut members) = settled_pair("range").await;
    for _ in 0..15 {
        f.second_with_loads(&mut members).await;
    }
    let view = f.view().await;
    assert_eq!(view["load_trigger"]["assignor_balances_load"], false);
    assert_eq!(view["last_rebalance"]["reason"], "config");
    assert!(view["load_trigger"]["outside_band_since_ms"].is_null());
}

#[test]
fn the_openapi_document_describes_the_views_of_the_trigger() {
    let doc = serde_json::to_value(openapi()).unwrap();
    let schemas = &doc["components"]["schemas"];
    let group = &schemas["GroupView"]["properties"];
    for field in ["last_rebalance", "load_trigger"] {
        assert!(group[field].is_object(), "GroupView lacks {field}");
    }
    let last = &schemas["LastRebalanceView"]["properties"];
    for field in ["epoch", "reason", "at_ms"] {
        assert!(last[field].is_object(), "LastRebalanceView lacks {field}");
    }
    let trigger = &schemas["LoadTriggerView"]["properties"];
    for field in [
        "outside_band_since_ms",
        "last_load_rebalance_ms",
        "cooldown_until_ms",
        "assignor_balances_load",
    ] {
        assert!(trigger[field].is_object(), "LoadTriggerView lacks {field}");
    }
}
