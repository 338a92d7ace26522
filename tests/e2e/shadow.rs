//! Shadow assignors end to end, on the real `assignd serve`:
//!
//! - a group on `sticky` shadowed by `round-robin` gets comparisons (both
//!   sides' moves, the disagreement) as members join, while its records
//!   are exactly those of a twin group without a shadow, but for the
//!   `ShadowBound` record: the shadow changed nothing;
//! - a failing shadow (the `spin-when-told` guest, spinning then
//!   trapping) leaves the live group's targets and heartbeats alone, shows
//!   its failure code in the comparisons and the metrics, and the host
//!   logs no ERROR line;
//! - `assignd group shadow --off` ends it, `--promote` binds it live
//!   (which ends it); a kill -9 and restart keeps the binding and starts
//!   the comparisons over; bad requests change nothing.
//!
//! Every wait polls with a deadline; servers are killed by drop guards.

use crate::common;

use crate::common::{ADMIN_TOKEN, Member, Server};

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use assignd::log::read::{ScanMode, scan};
use assignd::protocol::group::Record;
use serde_json::{Value, json};

const DEADLINE: Duration = Duration::from_secs(60);

/// `assignd serve` logging at `info`, its stderr kept for a look at the end.
/// Shadow calls run at `SCHED_IDLE`, on the CPU nothing else wants: a
/// wall-clock ceiling of 30 s keeps a busy test machine from failing them.
fn serve(data_dir: &Path) -> (Server, Arc<Mutex<String>>) {
    let mut server = Server::start_with(data_dir, &["--time-limit-ms", "30000"], |command| {
        command
            .env("RUST_LOG", "info")
            .stderr(std::process::Stdio::piped());
    });
    let stderr = Arc::new(Mutex::new(String::new()));
    let mut pipe = server.child.stderr.take().expect("piped stderr");
    let kept = stderr.clone();
    std::thread::spawn(move || {
        let mut chunk = [0u8; 8192];
        while let Ok(n) = pipe.read(&mut chunk) {
            if n == 0 {
                break;
            }
            let text = String::from_utf8_lossy(&chunk[..n]);
            kept.lock().unwrap().push_str(&text);
        }
    });
    (server, stderr)
}

fn create(server: &Server, group: &str) {
    let config = json!({
        "topics": [{"name": "orders", "partitions": 12}],
        "assignor": "sticky",
        "expansion_timeout_ms": 100,
    });
    let (status, view) = server.call("PUT", &format!("/v1/groups/{group}"), Some(&config));
    assert_eq!(status, 201, "{view}");
}

fn shadow(server: &Server, group: &str, body: Value) -> Value {
    let (status, answer) = server.call("PUT", &format!("/v1/groups/{group}/shadow"), Some(&body));
    assert_eq!(status, 200, "{answer}");
    answer
}

fn get_shadow(server: &Server, group: &str) -> Value {
    let (status, answer) = server.call("GET", &format!("/v1/groups/{group}/shadow"), None);
    assert_eq!(status, 200, "{answer}");
    answer
}

fn view(server: &Server, group: &str) -> Value {
    let (status, view) = server.call("GET", &format!("/v1/groups/{group}"), None);
    assert_eq!(status, 200, "{view}");
    view
}

/// Heartbeats every member until the group is stable at a target that
/// gives every task an owner and has no learners left; its view.
fn settle(server: &Server, group: &str, members: &mut [Member]) -> Value {
    let deadline = Instant::now() + DEADLINE;
    loop {
        for member in members.iter_mut() {
            member.heartbeat(server, group);
        }
        let view = view(server, group);
        let held: usize = members.iter().map(|m| m.active.len()).sum();
        let held = if members.is_empty() { 12 } else { held };
        let warm = view["learner_count"] == 0;
        let at_target = view["target_epoch"] == view["group_epoch"];
        if view["state"] == "stable" && at_target && warm && held == 12 {
            return view;
        }
        assert!(Instant::now() < deadline, "{group} not stable: {view}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Polls the group's shadow until `done` holds.
fn shadow_until(server: &Server, group: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let shadow = get_shadow(server, group);
        if done(&shadow) {
            return shadow;
        }
        assert!(Instant::now() < deadline, "{group}: {what}: {shadow}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every record of the data dir's logs, by group (the server is down).
fn records(data_dir: &Path) -> BTreeMap<String, Vec<Record>> {
    let mut by_group: BTreeMap<String, Vec<Record>> = BTreeMap::new();
    let shards = std::fs::read_dir(data_dir.join("shards")).expect("the shards");
    for shard in shards.flatten().filter(|e| e.path().is_dir()) {
        let read = scan(&shard.path(), ScanMode::Check).expect("a readable log");
        for record in read.records {
            by_group
                .entry(record.group().to_owned())
                .or_default()
                .push(record);
        }
    }
    by_group
}

/// A record's type, as its variant's name.
fn kind(record: &Record) -> String {
    let debug = format!("{record:?}");
    debug
        .split([' ', '{', '('])
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// The targets installed, without the group's name.
fn targets(records: &[Record]) -> Vec<String> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::TargetInstalled { epoch, target, .. } => Some(format!("{epoch} {target:?}")),
            _ => None,
        })
        .collect()
}

/// The CLI against `server`, expected to succeed; its stdout.
fn cli(server: &Server, args: &[&str]) -> String {
    let mut all = vec!["group"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--host", &server.base, "--token", ADMIN_TOKEN]);
    let output = common::assignd(&all);
    assert!(
        output.status.success(),
        "{args:?}: {}",
        common::stderr(&output)
    );
    common::stdout(&output)
}

#[test]
fn a_shadow_is_compared_changes_nothing_and_can_be_ended_promoted_and_kept() {
    let data_dir = common::scratch("shadow");
    let (server, stderr) = serve(&data_dir);
    create(&server, "plain");
    create(&server, "shadowed");
    let bound = shadow(&server, "shadowed", json!({"assignor": "round-robin"}));
    assert_eq!(bound["binding"]["assignor"], "round-robin", "{bound}");
    assert_eq!(bound["comparisons"], json!([]), "{bound}");

    // The same membership, one change at a time, on both groups, each
    // from its first (empty) target.
    settle(&server, "plain", &mut []);
    settle(&server, "shadowed", &mut []);
    let mut views = BTreeMap::new();
    for group in ["plain", "shadowed"] {
        let mut members = vec![
            Member::join(&server, group, "a"),
            Member::join(&server, group, "b"),
        ];
        settle(&server, group, &mut members);
        members.push(Member::join(&server, group, "c"));
        views.insert(group, settle(&server, group, &mut members));
    }
    // The join's own call, or (if the shadow's previous call still ran
    // then, and the join's went without one) the calls that move tasks to
    // the joiner once it caught up.
    let shadowed = shadow_until(&server, "shadowed", "three members compared", |s| {
        s["comparisons"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["members"] == 3))
    });
    let join = shadowed["comparisons"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|c| c["members"] == 3)
        .unwrap()
        .clone();
    assert!(["join", "caught_up"].contains(&join["reason"].as_str().unwrap()));
    assert_eq!(join["live"]["assignor"], "sticky", "{join}");
    assert_eq!(join["shadow"]["assignor"], "round-robin", "{join}");
    for side in ["live", "shadow"] {
        assert!(join[side]["moved"].is_u64(), "{join}");
        assert!(join[side]["failure"].is_null(), "{join}");
        assert!(join[side]["elapsed_ms"].as_f64().unwrap() > 0.0, "{join}");
        assert!(join[side]["fuel"].as_u64().unwrap() > 0, "{join}");
    }
    assert!(join["disagreeing_tasks"].as_u64().unwrap() > 0, "{join}");
    assert!(shadowed["totals"]["disagreements"].as_u64().unwrap() >= 1);
    // The group view shows the shadow and the history of its targets.
    let group_view = view(&server, "shadowed");
    assert_eq!(group_view["shadow"]["binding"]["assignor"], "round-robin");
    let history = group_view["rebalances"].as_array().unwrap();
    assert!(
        history.iter().any(|r| r["reason"] == "join")
            && history.iter().all(|r| r["moved"].is_u64()),
        "{group_view}"
    );
    assert!(view(&server, "plain").get("shadow").is_none());
    // Both groups' members hold the same tasks: sticky's, not round-robin's.
    let held = |view: &Value| -> BTreeMap<String, Value> {
        view["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| (m["name"].as_str().unwrap().to_owned(), m["active"].clone()))
            .collect()
    };
    assert_eq!(held(&views["plain"]), held(&views["shadowed"]));

    // The table names both sides.
    let table = cli(&server, &["shadow", "shadowed"]);
    assert!(table.starts_with("shadow: round-robin"), "{table}");
    assert!(table.contains("join"), "{table}");
    ends_and_promotes(&server);

    // kill -9 and restart: the binding is back, its comparisons start over.
    drop(server);
    let (server, _) = serve(&data_dir);
    let back = get_shadow(&server, "shadowed");
    assert_eq!(back["binding"]["assignor"], "round-robin", "{back}");
    assert_eq!(back["comparisons"], json!([]), "{back}");
    assert_eq!(back["totals"]["compared"], 0, "{back}");
    drop(server);

    let records = records(&data_dir);
    let (plain, shadowed) = (&records["plain"], &records["shadowed"]);
    assert!(!targets(plain).is_empty());
    assert_eq!(targets(plain), targets(shadowed), "the same targets");
    let kinds = |records: &[Record]| records.iter().map(kind).collect::<BTreeSet<_>>();
    let extra: Vec<String> = kinds(shadowed).difference(&kinds(plain)).cloned().collect();
    assert_eq!(extra, ["ShadowBound"]);
    assert!(
        records["ended"]
            .iter()
            .any(|r| matches!(r, Record::ShadowBound { shadow: None, .. })),
        "--off wrote the shadow's end"
    );
    assert!(!stderr.lock().unwrap().contains("ERROR"));
}

/// `--off` ends a shadow; `--promote` binds it live, which ends it too.
fn ends_and_promotes(server: &Server) {
    for group in ["ended", "promoted"] {
        create(server, group);
        cli(
            server,
            &[
                "shadow",
                group,
                "range",
                "--param",
                "unused=1",
                "--fuel-max",
                "100000000",
            ],
        );
        let bound = get_shadow(server, group);
        assert_eq!(
            bound["binding"]["params"],
            json!({"unused": "1"}),
            "{bound}"
        );
        assert_eq!(
            bound["binding"]["limits"]["fuel_max"], 100_000_000,
            "{bound}"
        );
    }
    cli(server, &["shadow", "ended", "--off"]);
    let ended = get_shadow(server, "ended");
    assert!(ended["binding"].is_null(), "{ended}");
    cli(server, &["shadow", "promoted", "--promote"]);
    let promoted = view(server, "promoted");
    assert_eq!(promoted["config"]["assignor"], "range", "{promoted}");
    assert_eq!(
        promoted["config"]["params"],
        json!({"unused": "1"}),
        "{promoted}"
    );
    assert!(get_shadow(server, "promoted")["binding"].is_null());
    // Nothing to promote now: one error line, a failing exit.
    let output = common::assignd(&[
        "group",
        "shadow",
        "promoted",
        "--promote",
        "--host",
        &server.base,
        "--token",
        ADMIN_TOKEN,
    ]);
    common::assert_one_error_line(&output, 1, "no_shadow");
}

#[test]
fn bad_shadow_requests_are_refused_and_change_nothing() {
    let data_dir = common::scratch("shadow-refused");
    let (server, _) = serve(&data_dir);
    create(&server, "g");
    let before = settle(&server, "g", &mut []);
    let cases = [
        (
            "g",
            json!({"assignor": "no-such-module"}),
            400,
            "unknown_assignor",
        ),
        (
            "g",
            json!({"assignor": "learner-aware", "params": {"num_standby": "two"}}),
            400,
            "params_rejected",
        ),
        (
            "g",
            json!({"assignor": "range", "colour": "red"}),
            400,
            "invalid_json",
        ),
        ("nobody", json!({"assignor": "range"}), 404, "unknown_group"),
    ];
    for (group, body, status, code) in cases {
        let (got, error) = server.call("PUT", &format!("/v1/groups/{group}/shadow"), Some(&body));
        assert_eq!(got, status, "{body}: {error}");
        assert_eq!(error["error"]["code"], code, "{body}: {error}");
        assert!(error["error"]["message"].is_string(), "{error}");
    }
    let (status, error) = server.call("GET", "/v1/groups/nobody/shadow", None);
    assert_eq!(
        (status, &error["error"]["code"]),
        (404, &json!("unknown_group"))
    );
    assert_eq!(view(&server, "g"), before, "nothing changed");
    assert!(get_shadow(&server, "g")["binding"].is_null());
}

#[test]
fn a_failing_shadow_leaves_the_live_group_alone() {
    let data_dir = common::scratch("shadow-failing");
    let (server, stderr) = serve(&data_dir);
    let bytes = std::fs::read(common::bad_guest("test-guest-spin-when-told")).expect("guest");
    let (status, module) = server.upload("spinner", "0.1.0", &bytes);
    assert_eq!(status, 201, "{module}");
    create(&server, "live");
    shadow(
        &server,
        "live",
        json!({"assignor": "spinner@0.1.0", "params": {"spin": "yes"},
               "limits": {"time_limit_ms": 200}}),
    );
    let mut members = vec![Member::join(&server, "live", "a")];
    settle(&server, "live", &mut members);
    let spun = shadow_until(&server, "live", "a spinning shadow's failure", |s| {
        s["totals"]["shadow_failures"].as_u64() >= Some(1)
    });
    let failure = spun["comparisons"][0]["shadow"]["failure"]
        .as_str()
        .unwrap()
        .to_owned();
    // Fuel or the clock stops it, whichever comes first on this machine.
    assert!(
        failure.starts_with("timeout: ") || failure.starts_with("out_of_fuel: "),
        "{failure}"
    );
    assert!(
        spun["comparisons"][0]["live"]["failure"].is_null(),
        "{spun}"
    );

    // Now trapping: the live group still gets its targets.
    shadow(
        &server,
        "live",
        json!({"assignor": "spinner@0.1.0", "params": {"trap": "yes"}}),
    );
    members.push(Member::join(&server, "live", "b"));
    let settled = settle(&server, "live", &mut members);
    assert!(members.iter().all(|m| m.active.len() == 6), "{settled}");
    let trapped = shadow_until(&server, "live", "a trapping shadow's failure", |s| {
        s["comparisons"].as_array().is_some_and(|c| {
            c.iter().any(|c| {
                c["shadow"]["failure"]
                    .as_str()
                    .is_some_and(|f| f.contains("told to trap"))
            })
        })
    });
    assert!(
        trapped["totals"]["compared"].as_u64() >= Some(1),
        "{trapped}"
    );

    let text = metrics(&server, "/metrics?groups=true");
    assert!(
        text.contains("assignd_shadow_failures_total{module=\"spinner@0.1.0\",code="),
        "{text}"
    );
    assert!(
        text.contains("assignd_group_shadow_failures{group=\"live\"}"),
        "{text}"
    );
    assert!(text.contains("assignd_group_shadow_moved{group=\"live\",side=\"live\"}"));
    let default = metrics(&server, "/metrics");
    assert!(
        !default.contains("assignd_group_shadow_failures{"),
        "no group by default"
    );
    drop(server);
    let logged = stderr.lock().unwrap().clone();
    assert!(logged.contains("shadow assignor failed"), "logged at info");
    assert!(!logged.contains("ERROR"), "{logged}");
}

fn metrics(server: &Server, path: &str) -> String {
    let url = format!("{}{path}", server.base);
    let mut response = Server::agent().get(&url).call().expect("metrics");
    response.body_mut().read_to_string().expect("the metrics")
}
