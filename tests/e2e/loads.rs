//! Load reports against the real binary: members asked for a full report
//! report their tasks' loads, utilisation and load capacity; the group view
//! and `/metrics?groups=true` show each member's load against its share and
//! the group's imbalance; a report past a bound is refused with 400; and a
//! host killed with SIGKILL and restarted on the same data dir knows no
//! loads (they are soft state), so it asks every member for a full report
//! again and shows its loads incomplete until they all came.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{self, Member, Server};

const GROUP: &str = "loads-app";
const DEADLINE: Duration = Duration::from_secs(30);

fn configure(server: &Server) {
    let config = json!({
        "topics": [{"name": "orders", "partitions": 4}],
        "assignor": "range",
        "learners": "off",
        "expansion_timeout_ms": 100,
        "load_unit": "records/s",
        "load_half_life_ms": 0,
    });
    let (status, view) = server.call("PUT", &format!("/v1/groups/{GROUP}"), Some(&config));
    assert_eq!(status, 201, "{view}");
}

/// Heartbeats every member until the group is stable with each holding two
/// tasks; the last answer of each.
fn settle(server: &Server, members: &mut [Member]) -> Vec<Value> {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let answers: Vec<Value> = members
            .iter_mut()
            .map(|m| beat(server, m, json!({})))
            .collect();
        let view = group_view(server);
        if view["state"] == "stable" && members.iter().all(|m| m.active.len() == 2) {
            return answers;
        }
        assert!(Instant::now() < deadline, "not stable in time: {view}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One heartbeat with `extra` fields; its 200 answer.
fn beat(server: &Server, member: &mut Member, extra: Value) -> Value {
    let (status, answer) = member.try_heartbeat(server, GROUP, extra);
    assert_eq!(status, 200, "{}: {answer}", member.name);
    answer
}

/// Every task the member holds at `load` each (two neighbours as one
/// range `[topic, first, last, load]`), with a utilisation and a load
/// capacity.
fn report(member: &Member, load: f64) -> Value {
    let held: Vec<&(String, u64)> = member.active.iter().collect();
    let loads = match held[..] {
        [(topic, first), (_, last)] if first + 1 == *last => json!([[topic, first, last, load]]),
        _ => held.iter().map(|(t, p)| json!([t, p, load])).collect(),
    };
    json!({"loads": loads, "utilisation": load / 40.0, "load_capacity": 100.0})
}

fn group_view(server: &Server) -> Value {
    let (status, view) = server.call("GET", &format!("/v1/groups/{GROUP}"), None);
    assert_eq!(status, 200, "{view}");
    view
}

fn member_view<'a>(view: &'a Value, member: &Member) -> &'a Value {
    view["members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["member_id"] == member.member_id.as_str())
        .unwrap_or_else(|| panic!("{} not in {view}", member.name))
}

/// The value of the series `name{labels}` in a `?groups=true` scrape.
fn group_metric(server: &Server, name: &str, labels: &str) -> Option<f64> {
    let mut response = Server::agent()
        .get(format!("{}/metrics?groups=true", server.base))
        .call()
        .expect("GET /metrics");
    let text = response.body_mut().read_to_string().expect("the metrics");
    let series = format!("{name}{{{labels}}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&series))
        .map(|value| value.parse().expect("a number"))
}

#[test]
fn loads_reach_the_group_view_and_the_metrics_and_a_restart_asks_for_them_again() {
    let dir = common::scratch("loads");
    let server = Server::start(&dir, &[]);
    configure(&server);
    let a = Member::join_dynamic(&server, GROUP, "a", &["orders"]);
    let b = Member::join_dynamic(&server, GROUP, "b", &["orders"]);
    let mut members = [a, b];
    let answers = settle(&server, &mut members);
    for answer in &answers {
        assert_eq!(answer["load_report"], "full", "{answer}");
    }
    let [a, b] = &mut members;
    let answer = beat(&server, a, report(a, 30.0));
    assert_eq!(answer["load_report"], "changes", "{answer}");
    let view = group_view(&server);
    assert_eq!(view["loads"]["complete"], false, "{view}");
    let answer = beat(&server, b, report(b, 10.0));
    assert_eq!(answer["load_report"], "changes", "{answer}");

    let view = group_view(&server);
    let loads = &view["loads"];
    assert_eq!(loads["unit"], "records/s", "{view}");
    assert_eq!(loads["complete"], true, "{view}");
    assert_eq!(loads["total"], 80.0, "{view}");
    assert_eq!(loads["imbalance"], 1.5, "{view}");
    assert_eq!(loads["by_load_capacity"], true, "{view}");
    let a_load = &member_view(&view, a)["load"];
    assert_eq!(
        (&a_load["load"], &a_load["share"], &a_load["ratio"]),
        (&json!(60.0), &json!(40.0), &json!(1.5)),
        "{view}"
    );
    assert_eq!(a_load["utilisation"], 0.75, "{view}");
    assert_eq!(a_load["load_capacity"], 100.0, "{view}");
    assert_eq!(member_view(&view, b)["load"]["ratio"], 0.5, "{view}");

    let g = format!("group=\"{GROUP}\"");
    let unit = format!("{g},unit=\"records/s\"");
    assert_eq!(
        group_metric(&server, "assignd_group_load", &unit),
        Some(80.0)
    );
    assert_eq!(
        group_metric(&server, "assignd_group_load_imbalance", &g),
        Some(1.5)
    );
    assert_eq!(
        group_metric(&server, "assignd_group_loads_complete", &g),
        Some(1.0)
    );

    // Past a bound: refused, naming the field, and nothing changes.
    let (status, refused) = a.try_heartbeat(&server, GROUP, json!({"loads": [["orders", 0, -1]]}));
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["error"]["code"], "invalid_request", "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("loads"), "{message}");
    assert_eq!(group_view(&server)["loads"], view["loads"]);

    // kill -9, and a restart on the same data dir: the members and their
    // tasks are back, their loads are not.
    drop(server);
    let server = Server::start(&dir, &[]);
    let view = group_view(&server);
    assert_eq!(view["loads"]["complete"], false, "{view}");
    assert_eq!(view["loads"]["total"], 0.0, "{view}");
    assert_eq!(
        group_metric(&server, "assignd_group_loads_complete", &g),
        Some(0.0)
    );
    let answer = beat(&server, a, json!({}));
    assert_eq!(answer["load_report"], "full", "{answer}");
    let answer = beat(&server, a, report(a, 30.0));
    assert_eq!(answer["load_report"], "changes", "{answer}");
    assert_eq!(group_view(&server)["loads"]["complete"], false);
    let answer = beat(&server, b, report(b, 10.0));
    assert_eq!(answer["load_report"], "changes", "{answer}");
    let view = group_view(&server);
    assert_eq!(view["loads"]["complete"], true, "{view}");
    assert_eq!(view["loads"]["imbalance"], 1.5, "{view}");
}
