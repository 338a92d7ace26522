//! A guest that goes wrong once live, with the real `assignd serve`: the
//! `spin-when-told` test guest passes its self-test and is uploaded, one
//! group binds it with `spin=yes` (so every call loops until the 200 ms
//! time limit), another group runs `sticky`. The failing group keeps its
//! target and shows the failure in its view (module, code, counts); the
//! healthy group's heartbeats are answered as fast as before meanwhile.

mod common;

use common::Server;

use std::time::{Duration, Instant};

use serde_json::{Value, json};

impl Server {
    fn join(&self, group: &str, name: &str) -> Value {
        let (status, answer) = self.call(
            "POST",
            &format!("/v1/groups/{group}/heartbeat"),
            Some(&json!({
                "member_id": "", "member_name": name, "member_epoch": 0, "topics": ["orders"],
            })),
        );
        assert_eq!(status, 200, "{name} joins {group}: {answer}");
        answer
    }

    /// One heartbeat of `member` (its last answer), timed.
    fn beat(&self, group: &str, member: &Value) -> (Value, Duration) {
        let started = Instant::now();
        let (status, answer) = self.call(
            "POST",
            &format!("/v1/groups/{group}/heartbeat"),
            Some(&json!({
                "member_id": member["member_id"],
                "member_epoch": member["member_epoch"],
                "owned": member["active"],
            })),
        );
        let elapsed = started.elapsed();
        assert_eq!(status, 200, "heartbeat in {group}: {answer}");
        (answer, elapsed)
    }

    fn view(&self, group: &str) -> Value {
        let (status, view) = self.call("GET", &format!("/v1/groups/{group}"), None);
        assert_eq!(status, 200, "{view}");
        view
    }
}

fn config(assignor: &str, spin: bool) -> Value {
    let params = if spin {
        json!({"spin": "yes"})
    } else {
        json!({})
    };
    json!({
        "topics": [{"name": "orders", "partitions": 8}],
        "assignor": assignor,
        "params": params,
        "expansion_timeout_ms": 50,
        "learners": "off",
    })
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

#[test]
fn a_spinning_guest_fails_visibly_and_another_group_is_served_as_fast() {
    let bytes = std::fs::read(common::bad_guest("test-guest-spin-when-told")).expect("guest");
    let dir = common::scratch("guest-failure");
    let server = Server::start(&dir, &["--time-limit-ms", "200"]);
    let (status, module) = server.upload("spinner", "0.1.0", &bytes);
    assert_eq!(status, 201, "the guest passes its self-test: {module}");

    // The healthy group, converged, and its heartbeat latency at rest.
    let (status, answer) = server.call("PUT", "/v1/groups/good", Some(&config("sticky", false)));
    assert_eq!(status, 201, "{answer}");
    let mut good = server.join("good", "g1");
    let deadline = Instant::now() + Duration::from_secs(60);
    while good["active"].as_array().is_none_or(|a| a.len() != 8) {
        assert!(
            Instant::now() < deadline,
            "the good group never assigned: {good}"
        );
        std::thread::sleep(Duration::from_millis(20));
        good = server.beat("good", &good).0;
    }
    let mut at_rest = Vec::new();
    for _ in 0..30 {
        let (answer, elapsed) = server.beat("good", &good);
        good = answer;
        at_rest.push(elapsed);
    }

    // The bad group: every call spins until the time limit.
    let (status, answer) = server.call(
        "PUT",
        "/v1/groups/bad",
        Some(&config("spinner@0.1.0", true)),
    );
    assert_eq!(status, 201, "{answer}");
    let mut bad = server.join("bad", "b1");
    let mut failing = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    let failures = loop {
        let (answer, elapsed) = server.beat("good", &good);
        good = answer;
        failing.push(elapsed);
        bad = server.beat("bad", &bad).0;
        let view = server.view("bad");
        let failures = view["assignor_failures"].clone();
        if failures["total"].as_u64().unwrap_or(0) >= 2 && failing.len() >= 30 {
            break failures;
        }
        assert!(
            Instant::now() < deadline,
            "no failure shown in time: {view}"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(failures["module"], "spinner@0.1.0", "{failures}");
    assert!(
        failures["code"] == "timeout" || failures["code"] == "out_of_fuel",
        "{failures}"
    );
    assert!(failures["consecutive"].as_u64().unwrap() >= 2, "{failures}");
    assert!(failures["at_ms"].as_u64().is_some(), "{failures}");
    // The bad group has no target; its member holds nothing, and is still
    // answered.
    assert_eq!(server.view("bad")["target_epoch"], 0);
    assert!(bad["active"].as_array().unwrap().is_empty(), "{bad}");
    // The good group kept its tasks and its pace.
    assert_eq!(good["active"].as_array().unwrap().len(), 8, "{good}");
    let (rest, busy) = (median(at_rest), median(failing));
    assert!(
        busy <= rest * 5 + Duration::from_millis(50),
        "heartbeat median {busy:?} while the guest spins, {rest:?} at rest"
    );
}
