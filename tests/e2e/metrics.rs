//! Operability end to end, on the real binary:
//!
//! - `GET /metrics` (no token) describes every metric with HELP and TYPE
//!   lines, and its figures move as a group forms: installed targets and
//!   rebalance durations, members and groups by state, epochs, HTTP latency
//!   of the heartbeat route (by its template), log appends and fsyncs,
//!   assignor calls and their fuel;
//! - `assignd serve --log-format json` writes one JSON object per line on
//!   stderr (an assignor call's lines carry its span's group, epoch and
//!   module), while stdout keeps its single `listening on` line.
//!
//! Every wait polls with a deadline; servers are killed by drop guards.

use crate::common;

use crate::common::{ADMIN_TOKEN, Server};

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const DEADLINE: Duration = Duration::from_secs(60);

/// Every metric the host describes, with its Prometheus type.
const METRICS: &[(&str, &str)] = &[
    ("assignd_groups", "gauge"),
    ("assignd_members", "gauge"),
    ("assignd_tasks_revoking", "gauge"),
    ("assignd_learners_pending", "gauge"),
    ("assignd_rebalances_total", "counter"),
    ("assignd_rebalance_seconds", "histogram"),
    ("assignd_members_removed_total", "counter"),
    ("assignd_assignor_calls_total", "counter"),
    ("assignd_assignor_failures_total", "counter"),
    ("assignd_assignor_call_seconds", "histogram"),
    ("assignd_assignor_fuel", "histogram"),
    ("assignd_shadow_calls_total", "counter"),
    ("assignd_shadow_failures_total", "counter"),
    ("assignd_shadow_call_seconds", "histogram"),
    ("assignd_shadow_calls_dropped_total", "counter"),
    ("assignd_rollout_events_total", "counter"),
    ("assignd_rollouts", "gauge"),
    ("assignd_rollout_commands_total", "counter"),
    ("assignd_http_request_seconds", "histogram"),
    ("assignd_log_write_seconds", "histogram"),
    ("assignd_log_fsync_seconds", "histogram"),
    ("assignd_log_batch_records", "histogram"),
    ("assignd_log_records_total", "counter"),
];

/// The per-group families of `GET /metrics?groups=true`.
const GROUP_METRICS: &[&str] = &[
    "assignd_group_members",
    "assignd_group_epoch",
    "assignd_group_target_epoch",
    "assignd_group_tasks_revoking",
    "assignd_group_learners_pending",
    "assignd_group_shadow_compared",
    "assignd_group_shadow_disagreements",
    "assignd_group_shadow_failures",
    "assignd_group_shadow_moved",
];

fn scrape(server: &Server) -> String {
    scrape_path(server, "/metrics?groups=true")
}

fn scrape_path(server: &Server, path: &str) -> String {
    let mut response = Server::agent()
        .get(format!("{}{path}", server.base))
        .call()
        .expect("GET /metrics");
    assert_eq!(response.status().as_u16(), 200, "no token needed");
    response
        .body_mut()
        .read_to_string()
        .expect("the metrics text")
}

/// The sum of every sample of `name` whose labels include all of
/// `labels` (0 if there is none).
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (series_name, series_labels) = match series.split_once('{') {
                Some((n, rest)) => (n, rest.strip_suffix('}')?),
                None => (series, ""),
            };
            if series_name != name {
                return None;
            }
            let present: BTreeSet<&str> = series_labels.split(',').collect();
            labels
                .iter()
                .all(|(k, v)| present.contains(format!("{k}=\"{v}\"").as_str()))
                .then(|| value.parse::<f64>().expect("a number"))
        })
        .sum()
}

/// Polls `check` on fresh scrapes until it holds.
fn eventually(server: &Server, what: &str, check: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let text = scrape(server);
        if check(&text) {
            return text;
        }
        assert!(Instant::now() < deadline, "{what}: not in time:\n{text}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A dynamic member over raw HTTP: what it was told last.
struct Member {
    id: String,
    epoch: u64,
    active: Vec<Value>,
}

fn heartbeat(server: &Server, group: &str, body: &Value) -> Value {
    let (status, answer) =
        server.call("POST", &format!("/v1/groups/{group}/heartbeat"), Some(body));
    assert_eq!(status, 200, "heartbeat: {answer}");
    answer
}

impl Member {
    fn join(server: &Server, group: &str) -> Member {
        let answer = heartbeat(
            server,
            group,
            &json!({"member_id": "", "member_epoch": 0, "topics": ["orders"]}),
        );
        let mut member = Member {
            id: String::new(),
            epoch: 0,
            active: Vec::new(),
        };
        member.absorb(&answer);
        member
    }

    /// Reports holding its active tasks (revoked ones released).
    fn beat(&mut self, server: &Server, group: &str) {
        let answer = heartbeat(
            server,
            group,
            &json!({"member_id": self.id, "member_epoch": self.epoch, "owned": self.active}),
        );
        self.absorb(&answer);
    }

    fn absorb(&mut self, answer: &Value) {
        self.id = answer["member_id"].as_str().expect("member_id").to_owned();
        self.epoch = answer["member_epoch"].as_u64().expect("member_epoch");
        self.active = answer["active"].as_array().expect("active").clone();
    }
}

/// Creates `group` (6 tasks, no learners, short batching) and joins
/// `count` members; heartbeats them until the group is stable with every
/// task active. Returns the group's view.
fn stable_group(server: &Server, group: &str, count: usize) -> Value {
    let config = json!({
        "topics": [{"name": "orders", "partitions": 6}],
        "assignor": "range",
        "learners": "off",
        "expansion_timeout_ms": 100,
    });
    let (status, view) = server.call("PUT", &format!("/v1/groups/{group}"), Some(&config));
    assert_eq!(status, 201, "{view}");
    let mut members: Vec<Member> = (0..count).map(|_| Member::join(server, group)).collect();
    let deadline = Instant::now() + DEADLINE;
    loop {
        for member in &mut members {
            member.beat(server, group);
        }
        let (status, view) = server.call("GET", &format!("/v1/groups/{group}"), None);
        assert_eq!(status, 200, "{view}");
        let held: usize = members.iter().map(|m| m.active.len()).sum();
        if view["state"] == "stable" && held == 6 {
            return view;
        }
        assert!(Instant::now() < deadline, "not stable in time: {view}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn metrics_are_described_and_move_as_a_group_forms() {
    let server = Server::start(&common::scratch("metrics"), &[]);
    let group = "metrics-app";
    let heartbeat_route = [
        ("method", "POST"),
        ("route", "/v1/groups/{group}/heartbeat"),
        ("status", "200"),
    ];

    let before = scrape(&server);
    let heartbeats_before = sample(
        &before,
        "assignd_http_request_seconds_count",
        &heartbeat_route,
    );
    let fsyncs_before = sample(&before, "assignd_log_fsync_seconds_count", &[]);
    let records_before = sample(&before, "assignd_log_records_total", &[]);
    let rebalances_before = sample(&before, "assignd_rebalances_total", &[]);

    let view = stable_group(&server, group, 3);
    let epoch = view["group_epoch"].as_u64().unwrap() as f64;
    let g = [("group", group)];

    // The gauges follow within the ticker's second.
    let text = eventually(&server, "the group's gauges", |text| {
        sample(
            text,
            "assignd_group_members",
            &[("group", group), ("state", "stable")],
        ) == 3.0
            && sample(text, "assignd_group_members", &g) == 3.0
            && sample(text, "assignd_members", &[("state", "stable")]) == 3.0
            && sample(text, "assignd_group_epoch", &g) == epoch
            && sample(text, "assignd_group_target_epoch", &g) == epoch
            && sample(text, "assignd_groups", &[("state", "stable")]) >= 1.0
    });
    assert_eq!(sample(&text, "assignd_group_tasks_revoking", &g), 0.0);
    assert_eq!(sample(&text, "assignd_group_learners_pending", &g), 0.0);
    assert_eq!(sample(&text, "assignd_tasks_revoking", &[]), 0.0);
    assert_eq!(sample(&text, "assignd_learners_pending", &[]), 0.0);
    assert_eq!(
        sample(&text, "assignd_groups", &[("state", "assigning")]),
        0.0
    );

    // Counters and histograms moved.
    assert!(
        sample(&text, "assignd_rebalances_total", &[]) >= rebalances_before + 1.0,
        "{text}"
    );
    assert!(
        sample(&text, "assignd_rebalances_total", &[("reason", "config")]) >= 1.0,
        "the group's creation opened the batch its members joined in: {text}"
    );
    assert!(
        sample(&text, "assignd_rebalance_seconds_count", &[]) >= 1.0,
        "{text}"
    );
    let module = [("module", "range")];
    assert!(sample(&text, "assignd_assignor_calls_total", &module) >= 1.0);
    assert!(sample(&text, "assignd_assignor_call_seconds_count", &module) >= 1.0);
    assert!(sample(&text, "assignd_assignor_fuel_count", &module) >= 1.0);
    assert!(sample(&text, "assignd_assignor_fuel_sum", &module) > 0.0);
    let heartbeats = sample(
        &text,
        "assignd_http_request_seconds_count",
        &heartbeat_route,
    );
    assert!(
        heartbeats >= heartbeats_before + 6.0,
        "{heartbeats_before} -> {heartbeats}"
    );
    assert!(sample(&text, "assignd_log_fsync_seconds_count", &[]) > fsyncs_before);
    assert!(sample(&text, "assignd_log_write_seconds_count", &[]) >= 1.0);
    assert!(sample(&text, "assignd_log_batch_records_count", &[]) >= 1.0);
    assert!(sample(&text, "assignd_log_records_total", &[]) > records_before);

    // Routes are templates, never raw paths: no series names the group
    // in its route.
    assert!(
        !text.contains(&format!("route=\"/v1/groups/{group}")),
        "a raw path as a label"
    );
    // An unknown path is one bounded series.
    let (status, _) = server.call("GET", "/no/such/path", None);
    assert_eq!(status, 404);
    eventually(&server, "the unmatched route", |text| {
        sample(
            text,
            "assignd_http_request_seconds_count",
            &[("route", "unmatched"), ("status", "404")],
        ) >= 1.0
    });

    // Every metric has its help and type.
    let families = METRICS
        .iter()
        .copied()
        .chain(GROUP_METRICS.iter().map(|name| (*name, "gauge")));
    for (name, kind) in families {
        assert!(
            text.lines()
                .any(|l| l.starts_with(&format!("# HELP {name} "))),
            "no HELP line for {name}:\n{text}"
        );
        assert!(
            text.lines().any(|l| l == format!("# TYPE {name} {kind}")),
            "no TYPE line for {name} ({kind}):\n{text}"
        );
    }
}

/// Sends every line of `stream` to the returned channel.
fn lines(stream: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { return };
            if sender.send(line).is_err() {
                return;
            }
        }
    });
    receiver
}

/// The next line, within the deadline.
fn next_line(receiver: &mpsc::Receiver<String>, deadline: Instant, what: &str) -> String {
    let left = deadline.saturating_duration_since(Instant::now());
    receiver
        .recv_timeout(left)
        .unwrap_or_else(|e| panic!("{what}: no line in time ({e})"))
}

#[test]
fn serve_writes_json_logs_on_stderr_and_only_its_address_on_stdout() {
    let (server, stdout, stderr) =
        serve_with_json_logs("json-logs", "info,assignd::runtime::assignors=debug", &[]);

    // Every stderr line is a JSON object; the first says it is serving.
    let deadline = Instant::now() + DEADLINE;
    let parse = |line: &str| -> Value {
        serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"))
    };
    let serving = loop {
        let line = parse(&next_line(&stderr, deadline, "stderr"));
        assert!(line["level"].is_string(), "{line}");
        assert!(line["timestamp"].is_string(), "{line}");
        if line["fields"]["message"] == "serving" {
            break line;
        }
    };
    assert_eq!(serving["level"], "INFO");
    assert!(serving["fields"]["address"].is_string(), "{serving}");

    // An assignor call's lines carry its span: group, epoch, module.
    stable_group(&server, "json-app", 1);
    let answered = loop {
        let line = parse(&next_line(&stderr, deadline, "stderr"));
        if line["fields"]["message"] == "assignor answered" {
            break line;
        }
    };
    let span = answered["spans"]
        .as_array()
        .and_then(|spans| spans.iter().find(|s| s["name"] == "assignor_call"))
        .unwrap_or_else(|| panic!("no assignor_call span: {answered}"));
    assert_eq!(span["group"], "json-app", "{answered}");
    assert_eq!(span["module"], "range", "{answered}");
    assert!(span["epoch"].as_u64().is_some_and(|e| e >= 1), "{answered}");

    // Nothing more on stdout.
    assert!(
        stdout.try_recv().is_err(),
        "stdout has only the listening line"
    );
}

/// Starts `assignd serve --log-format json` with `extra` arguments and
/// `RUST_LOG=filter`: the server (killed on drop), its stdout lines after
/// the `listening on` one, and its stderr lines.
fn serve_with_json_logs(
    name: &str,
    filter: &str,
    extra: &[&str],
) -> (Server, mpsc::Receiver<String>, mpsc::Receiver<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_assignd"))
        .args(["serve", "--log-format", "json", "--listen", "127.0.0.1:0"])
        .args(extra)
        .arg("--data-dir")
        .arg(common::scratch(name))
        .env("ASSIGND_ADMIN_TOKEN", ADMIN_TOKEN)
        .env("RUST_LOG", filter)
        .env_remove("ASSIGND_LOG_FORMAT")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot start assignd serve");
    let stdout = lines(child.stdout.take().unwrap());
    let stderr = lines(child.stderr.take().unwrap());
    let mut server = Server {
        child,
        base: String::new(),
    };
    let deadline = Instant::now() + common::SERVE_START_DEADLINE;
    let first = next_line(&stdout, deadline, "stdout");
    server.base = first
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line: {first:?}"))
        .to_owned();
    (server, stdout, stderr)
}

/// An assignor call started while the previous call's answer is handled
/// (the group moved on during the call) opens its span beside the previous
/// one, not inside it (nested, every log line of a failing group would
/// carry one more `assignor_call` span than the last). Members join while a
/// spinning guest's calls run (each fails at the 200 ms time limit), so
/// answers come back stale and the next call starts from the answer.
#[test]
fn assignor_call_spans_do_not_nest_across_calls() {
    let (server, _stdout, stderr) =
        serve_with_json_logs("span-nesting", "warn", &["--time-limit-ms", "200"]);
    let bytes = std::fs::read(common::bad_guest("test-guest-spin-when-told")).expect("guest");
    let (status, module) = server.upload("spinner", "0.1.0", &bytes);
    assert_eq!(status, 201, "{module}");
    let group = "spans-app";
    let config = json!({
        "topics": [{"name": "orders", "partitions": 8}],
        "assignor": "spinner@0.1.0",
        "params": {"spin": "yes"},
        "expansion_timeout_ms": 50,
        "learners": "off",
    });
    let (status, view) = server.call("PUT", &format!("/v1/groups/{group}"), Some(&config));
    assert_eq!(status, 201, "{view}");

    let deadline = Instant::now() + DEADLINE;
    let mut failures = Vec::new();
    while failures.len() < 3 {
        assert!(
            Instant::now() < deadline,
            "not enough failed calls logged: {failures:?}"
        );
        // Two joins 100 ms apart: the second lands while the first one's
        // call spins, whose stale answer starts the next call at once;
        // that one fails for the current epoch and logs it.
        Member::join(&server, group);
        std::thread::sleep(Duration::from_millis(100));
        Member::join(&server, group);
        std::thread::sleep(Duration::from_millis(600));
        while let Ok(line) = stderr.try_recv() {
            let line: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
            // "assignor failed" (its `message` field is the failure's, as
            // the line has a second `message`).
            if line["target"]
                .as_str()
                .is_some_and(|t| t.starts_with("assignd::protocol::core"))
                && line["fields"]["consecutive"].is_u64()
            {
                failures.push(line);
            }
        }
    }
    for line in &failures {
        let calls: Vec<&Value> = line["spans"]
            .as_array()
            .unwrap_or_else(|| panic!("no spans: {line}"))
            .iter()
            .filter(|span| span["name"] == "assignor_call")
            .collect();
        assert_eq!(calls.len(), 1, "one assignor_call span per line: {line}");
        assert_eq!(calls[0]["epoch"], line["fields"]["epoch"], "{line}");
    }
}

/// Every family is described on the first scrape, not only after its first
/// event (at start `/metrics` would show 2 families), and the series whose
/// labels are known are there at zero.
#[test]
fn every_metric_is_described_at_the_first_scrape() {
    let server = Server::start(&common::scratch("metrics-at-start"), &[]);
    let text = scrape_path(&server, "/metrics");
    for (name, kind) in METRICS {
        assert!(
            text.lines()
                .any(|l| l.starts_with(&format!("# HELP {name} "))),
            "no HELP line for {name} at start:\n{text}"
        );
        assert!(
            text.lines().any(|l| l == format!("# TYPE {name} {kind}")),
            "no TYPE line for {name} ({kind}) at start:\n{text}"
        );
    }
    let present = |series: &str| {
        text.lines().any(|l| {
            l.strip_prefix(series)
                .is_some_and(|rest| rest.starts_with(' '))
        })
    };
    for series in [
        "assignd_groups{state=\"stable\"}",
        "assignd_groups{state=\"assigning\"}",
        "assignd_members{state=\"revoking\"}",
        "assignd_tasks_revoking",
        "assignd_learners_pending",
        "assignd_rebalances_total{reason=\"join\"}",
        "assignd_rebalances_total{reason=\"load\"}",
        "assignd_members_removed_total{reason=\"expired\"}",
        "assignd_members_removed_total{reason=\"fenced\"}",
        "assignd_assignor_calls_total{module=\"sticky\"}",
        "assignd_assignor_call_seconds_count{module=\"range\"}",
        "assignd_rebalance_seconds_count",
        "assignd_log_fsync_seconds_count",
        "assignd_log_records_total",
    ] {
        assert!(present(series), "no {series} at start:\n{text}");
    }
}

/// By default `/metrics` names no group, so it does not grow with the
/// groups (naming each, it would take 24 MB per scrape at 10,000) and 40
/// groups scrape no larger than one (but for the HTTP latency series their
/// creation added); `?groups=true` has the per-group gauges;
/// `serve --metrics-auth` puts it behind the admin token.
#[test]
fn metrics_name_no_group_unless_asked_and_can_need_the_admin_token() {
    let server = Server::start(&common::scratch("metrics-groups"), &[]);
    stable_group(&server, "first", 1);
    let config = json!({"topics": [{"name": "orders", "partitions": 6}], "assignor": "range"});
    for g in 0..40 {
        let (status, view) = server.call("PUT", &format!("/v1/groups/g-{g}"), Some(&config));
        assert_eq!(status, 201, "{view}");
    }
    let text = eventually(&server, "41 groups scanned", |text| {
        sample(text, "assignd_groups", &[]) == 41.0
    });
    assert!(
        text.contains("assignd_group_epoch{group=\"g-39\"}"),
        "?groups=true has the per-group gauges:\n{text}"
    );
    let default = scrape_path(&server, "/metrics");
    assert!(!default.contains("group=\""), "a group named:\n{default}");
    assert!(!default.contains("g-39"), "a group named:\n{default}");
    let (status, error) = server.call("GET", "/metrics?groups=maybe", None);
    assert_eq!(status, 400, "{error}");
    assert_eq!(error["error"]["code"], "invalid_query");

    let guarded = Server::start(&common::scratch("metrics-auth"), &["--metrics-auth"]);
    let response = Server::agent()
        .get(format!("{}/metrics", guarded.base))
        .call()
        .expect("GET /metrics");
    assert_eq!(response.status().as_u16(), 401, "no token: refused");
    let response = Server::agent()
        .get(format!("{}/metrics", guarded.base))
        .header("authorization", "Bearer another-token-of-16-chars")
        .call()
        .expect("GET /metrics");
    assert_eq!(response.status().as_u16(), 403, "another token: refused");
    let mut response = Server::agent()
        .get(format!("{}/metrics", guarded.base))
        .header("authorization", format!("Bearer {ADMIN_TOKEN}"))
        .call()
        .expect("GET /metrics");
    assert_eq!(response.status().as_u16(), 200, "the admin token");
    let text = response.body_mut().read_to_string().expect("text");
    assert!(text.contains("# TYPE assignd_groups gauge"), "{text}");
}
