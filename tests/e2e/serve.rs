//! `assignd serve` as an operator and its members use it: the real binary
//! on a free port, driven over raw HTTP. Three members join a group of 12
//! tasks and heartbeat as a member library would (reporting what they
//! hold, releasing revoked tasks by the next beat) until the group is
//! stable; at every observed point no task is held by two members, and at
//! the end every task is active on exactly one. Waits poll with deadlines;
//! the server is killed by a drop guard whatever happens.

use crate::common;

use crate::common::{Member, Server, tasks};

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// No task is held by two members at this point.
fn assert_no_double_holding(members: &[Member], when: &str) {
    let mut holder: BTreeMap<(String, u64), &str> = BTreeMap::new();
    for member in members {
        for task in member.held() {
            if let Some(other) = holder.insert(task.clone(), member.name) {
                panic!("{when}: task {task:?} held by {other} and {}", member.name);
            }
        }
    }
}

/// Heartbeats every member in turn until the group is stable with
/// `counts` active tasks per member (the host's learner safety moves tasks
/// to the newcomers as they report catching up, a few at a time); checks after every response that no
/// task is held twice, by the members or in the host's view. Returns how
/// many revocations the members were asked for.
fn converge(server: &Server, group: &str, members: &mut [Member], counts: &[usize]) -> usize {
    let all: BTreeSet<(String, u64)> = (0..12).map(|p| ("orders".to_owned(), p)).collect();
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut revoked = BTreeSet::new();
    let mut rounds = 0;
    loop {
        rounds += 1;
        for i in 0..members.len() {
            members[i].heartbeat(server, group);
            for task in &members[i].revoking {
                revoked.insert((members[i].name, task.clone()));
            }
            assert_no_double_holding(members, &format!("round {rounds}"));
        }
        let (status, view) = server.call("GET", &format!("/v1/groups/{group}"), None);
        assert_eq!(status, 200);
        // The host's own view never has a task on two members either.
        let mut seen = BTreeSet::new();
        for member in view["members"].as_array().expect("members") {
            for task in tasks(&member["active"]).union(&tasks(&member["revoking"])) {
                assert!(
                    seen.insert(task.clone()),
                    "host view: {task:?} twice: {view}"
                );
            }
        }
        let target_epoch = view["target_epoch"].as_u64().expect("target_epoch");
        let stable = view["state"] == "stable"
            && members
                .iter()
                .all(|m| m.revoking.is_empty() && m.member_epoch == target_epoch);
        let active: Vec<usize> = members.iter().map(|m| m.active.len()).collect();
        if stable && active == counts {
            let mut owners: BTreeMap<(String, u64), usize> = BTreeMap::new();
            for member in members.iter() {
                for task in &member.active {
                    *owners.entry(task.clone()).or_default() += 1;
                }
            }
            assert_eq!(
                owners.keys().cloned().collect::<BTreeSet<_>>(),
                all,
                "every task active somewhere"
            );
            assert!(owners.values().all(|&n| n == 1), "exactly once: {owners:?}");
            return revoked.len();
        }
        assert!(
            Instant::now() < deadline,
            "not stable after {rounds} rounds: {view}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn three_members_converge_on_twelve_tasks_without_double_ownership() {
    let server = Server::start(&common::scratch("serve-converge"), &[]);
    let group = "orders-app";

    let (status, health) = server.call("GET", "/healthz", None);
    assert_eq!((status, health["status"].as_str()), (200, Some("ok")));

    let config = json!({
        "topics": [{"name": "orders", "partitions": 12}],
        "assignor": "sticky",
        "expansion_timeout_ms": 200,
    });
    let (status, view) = server.call("PUT", &format!("/v1/groups/{group}"), Some(&config));
    assert_eq!(status, 201, "created: {view}");
    assert_eq!(view["config"]["topics"][0]["partitions"], 12);
    let (status, _) = server.call("PUT", &format!("/v1/groups/{group}"), Some(&config));
    assert_eq!(status, 200, "the same config again is an update");

    // worker-a alone gets every task; then b and c join, warm up as
    // learners, and a must release two thirds of its tasks before they are
    // granted elsewhere.
    let mut members = vec![Member::join(&server, group, "worker-a")];
    let revoked = converge(&server, group, &mut members, &[12]);
    assert_eq!(revoked, 0);
    members.push(Member::join(&server, group, "worker-b"));
    members.push(Member::join(&server, group, "worker-c"));
    assert_no_double_holding(&members, "after the joins");
    let revoked = converge(&server, group, &mut members, &[4, 4, 4]);
    assert_eq!(revoked, 8, "a released the tasks b and c took");

    // The summary and the captured assignor input agree with the view.
    let (status, list) = server.call("GET", "/v1/groups", None);
    assert_eq!(status, 200);
    assert_eq!(list["groups"][0]["name"], group);
    assert_eq!(list["groups"][0]["members"], 3);
    assert_eq!(list["groups"][0]["state"], "stable");
    let (status, input) = server.call("GET", &format!("/v1/groups/{group}/assignor-input"), None);
    assert_eq!(status, 200);
    assert_eq!(input["topics"], json!({"orders": 12}));
    assert_eq!(input["members"].as_array().unwrap().len(), 3);

    // An error over the wire has the one error shape.
    let (status, error) = server.call(
        "POST",
        &format!("/v1/groups/{group}/heartbeat"),
        Some(&json!({"member_id": "nobody", "member_epoch": 1})),
    );
    assert_eq!(status, 404);
    assert_eq!(error["error"]["code"], "unknown_member");
}

#[cfg(unix)]
#[test]
fn sigterm_stops_the_server_cleanly() {
    let mut server = Server::start(&common::scratch("serve-sigterm"), &[]);
    let (status, _) = server.call("GET", "/healthz", None);
    assert_eq!(status, 200);
    terminate_and_expect_a_clean_exit(&mut server);
}

/// A supervisor may stop the server the moment it says it listens: the
/// signal handlers are in place by then. (They were installed when the
/// shutdown future was first polled, after the line; a SIGTERM in
/// between killed the process by the default action, unflushed.)
#[cfg(unix)]
#[test]
fn sigterm_as_soon_as_the_server_listens_stops_it_cleanly() {
    for round in 0..20 {
        let mut server = Server::start(&common::scratch(&format!("serve-sigterm-{round}")), &[]);
        terminate_and_expect_a_clean_exit(&mut server);
    }
}

/// Sends SIGTERM to `server` and waits for a successful exit.
#[cfg(unix)]
fn terminate_and_expect_a_clean_exit(server: &mut Server) {
    server.signal(libc::SIGTERM);
    let status = server.exit_by(
        Instant::now() + Duration::from_secs(20),
        "still running after SIGTERM",
    );
    assert!(status.success(), "exit status after SIGTERM: {status}");
}

/// `assignd serve` without an admin token in its environment or flags,
/// on `data_dir`: the child (killed on drop, as a [`Server`]), its base
/// URL, and every stderr line it wrote before its `listening on` line.
fn serve_without_token(data_dir: &std::path::Path) -> (Server, Vec<String>) {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;

    let mut child = Command::new(env!("CARGO_BIN_EXE_assignd"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data_dir)
        .env_remove("ASSIGND_ADMIN_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot start assignd serve");
    let stdout = child.stdout.take().expect("piped stdout");
    let stderr = child.stderr.take().expect("piped stderr");
    let (lines, line) = std::sync::mpsc::channel();
    let stderr_lines = lines.clone();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut text = String::new();
        let _ = reader.read_line(&mut text);
        let _ = lines.send((true, text));
        let _ = std::io::copy(&mut reader, &mut std::io::sink());
    });
    std::thread::spawn(move || {
        for text in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = stderr_lines.send((false, text));
        }
    });
    // The token is found before the listener is bound, so its line comes
    // before the address.
    let mut before = Vec::new();
    let address = loop {
        let (is_stdout, text) = line
            .recv_timeout(common::SERVE_START_DEADLINE)
            .expect("assignd serve printed no line in time");
        if !is_stdout {
            before.push(text);
            continue;
        }
        break text
            .trim_end()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line: {text:?}; stderr: {before:?}"))
            .to_owned();
    };
    (
        Server {
            child,
            base: address,
        },
        before,
    )
}

/// `GET path` with `authorization` (if any): the status, the error code
/// (if any) and the `WWW-Authenticate` header (if any).
fn get_as(
    server: &Server,
    path: &str,
    authorization: Option<&str>,
) -> (u16, Option<String>, Option<String>) {
    let mut request = Server::agent().get(format!("{}{path}", server.base));
    if let Some(value) = authorization {
        request = request.header("authorization", value);
    }
    let mut response = request.call().expect("an answer");
    let status = response.status().as_u16();
    let challenge = response
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_owned());
    let text = response.body_mut().read_to_string().unwrap();
    let code = serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| v["error"]["code"].as_str().map(str::to_owned));
    (status, code, challenge)
}

#[test]
fn without_a_token_serve_generates_one_into_the_data_dir_and_keeps_it() {
    let dir = common::scratch("serve-token");
    let data_dir = dir.join("data");
    let (server, stderr) = serve_without_token(&data_dir);
    let file = data_dir.join("admin-token");
    assert!(
        stderr.contains(&format!("admin token in {}", file.display())),
        "stderr names the token file: {stderr:?}"
    );
    let token = std::fs::read_to_string(&file).expect("the token file");
    let token = token.trim_end().to_owned();
    assert_eq!(token.len(), 64, "{token:?}");
    assert!(token.bytes().all(|b| b.is_ascii_hexdigit()), "{token:?}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "mode {mode:o}");
    }

    let bearer = format!("Bearer {token}");
    assert_eq!(
        get_as(&server, "/v1/groups", None),
        (401, Some("unauthorized".into()), Some("Bearer".into()))
    );
    assert_eq!(
        get_as(&server, "/v1/groups", Some("Bearer wrong-token-0123456789")),
        (403, Some("forbidden".into()), None)
    );
    assert_eq!(get_as(&server, "/v1/groups", Some(&bearer)).0, 200);
    assert_eq!(get_as(&server, "/healthz", None).0, 200);
    assert_eq!(get_as(&server, "/v1/openapi.json", None).0, 200);

    // The CLI: a wrong token and no token are one error line each, the
    // right one lists the groups.
    let cli = |token: Option<&str>| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_assignd"));
        command
            .args(["group", "list", "--host", &server.base])
            .env_remove("ASSIGND_TOKEN");
        if let Some(token) = token {
            command.env("ASSIGND_TOKEN", token);
        }
        command.output().expect("cannot start assignd")
    };
    common::assert_one_error_line(
        &cli(Some("wrong-token-0123456789")),
        1,
        "error: forbidden: ",
    );
    let missing = cli(None);
    common::assert_one_error_line(&missing, 1, "error: unauthorized: ");
    assert!(
        common::stderr(&missing).contains("ASSIGND_TOKEN"),
        "a hint: {}",
        common::stderr(&missing)
    );
    let listed = cli(Some(&token));
    assert!(listed.status.success(), "{}", common::stderr(&listed));
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(listed, json!({"groups": []}));
    drop(server);

    // A restart on the same data dir keeps the token.
    let (server, stderr) = serve_without_token(&data_dir);
    assert!(
        stderr.contains(&format!("admin token in {}", file.display())),
        "{stderr:?}"
    );
    assert_eq!(
        std::fs::read_to_string(&file).unwrap().trim_end(),
        token,
        "the same token"
    );
    assert_eq!(get_as(&server, "/v1/groups", Some(&bearer)).0, 200);
}

#[test]
fn a_bad_admin_token_is_refused_at_start() {
    let dir = common::scratch("serve-bad-token");
    let run = |flag: Option<&str>, env: Option<&str>| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_assignd"));
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.join("data"))
            .env_remove("ASSIGND_ADMIN_TOKEN");
        if let Some(token) = flag {
            command.args(["--admin-token", token]);
        }
        if let Some(token) = env {
            command.env("ASSIGND_ADMIN_TOKEN", token);
        }
        command.output().expect("cannot start assignd")
    };
    common::assert_one_error_line(&run(Some("short"), None), 1, "at least 16 bytes");
    common::assert_one_error_line(&run(Some(""), None), 1, "at least 16 bytes");
    common::assert_one_error_line(&run(None, Some("short")), 1, "at least 16 bytes");
    common::assert_one_error_line(&run(None, Some("")), 1, "at least 16 bytes");
    common::assert_one_error_line(
        &run(Some("with spaces in it, long enough"), None),
        1,
        "visible ASCII",
    );
    assert!(
        !dir.join("data/admin-token").exists(),
        "no file written for a given token"
    );
}

/// The read-only token, from its file or its variable, reads every admin
/// `GET` and changes nothing; one that is the admin token, or too short,
/// stops serve at start with one line.
#[test]
fn the_read_only_token_reads_and_a_bad_one_is_refused_at_start() {
    let dir = common::scratch("serve-read-only");
    let file = dir.join("read-only-token");
    std::fs::write(&file, "read-only-token-0123456789\n").unwrap();
    let file_flag = ["--read-only-token-file", file.to_str().unwrap()];
    let server = Server::start(&dir.join("data"), &file_flag);
    let bearer = "Bearer read-only-token-0123456789";
    assert_eq!(get_as(&server, "/v1/groups", Some(bearer)).0, 200);
    assert_eq!(get_as(&server, "/v1/shards", Some(bearer)).0, 200);
    let mut refused = Server::agent()
        .post(format!("{}/v1/shards/0/unload", server.base))
        .header("authorization", bearer)
        .send_empty()
        .expect("an answer");
    assert_eq!(refused.status().as_u16(), 403);
    let body: Value = serde_json::from_str(&refused.body_mut().read_to_string().unwrap()).unwrap();
    assert_eq!(body["error"]["code"], "read_only_token", "{body}");
    let run = |token: &str| {
        Command::new(env!("CARGO_BIN_EXE_assignd"))
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.join("refused"))
            .env("ASSIGND_ADMIN_TOKEN", common::ADMIN_TOKEN)
            .env("ASSIGND_READ_ONLY_TOKEN", token)
            .output()
            .expect("cannot start assignd")
    };
    common::assert_one_error_line(&run(common::ADMIN_TOKEN), 1, "must differ");
    common::assert_one_error_line(&run("short"), 1, "at least 16 bytes");
}

/// Owned tasks go as ranges per topic, and a member that asks for
/// `task_ranges` gets its answer the same way, so both grow with the
/// topics, not the tasks: a member of 1,000,000 tasks (10 topics × 100,000
/// partitions) heartbeats in well under a kilobyte each way. As pairs, a
/// member owning more than about 55,000 tasks could not heartbeat (an
/// `owned` list of 100,000 tasks is 1.89 MB, over the 1 MiB body limit),
/// and an answer listing every task would be 17 MB at a million. The old
/// `[topic, partition]` items are still accepted and still answered to a
/// member that does not ask for ranges.
#[test]
fn a_member_of_a_million_tasks_heartbeats_in_ranges_both_ways() {
    let server = Server::start(&common::scratch("million-tasks"), &[]);
    const TOPICS: u64 = 10;
    const PARTITIONS: u64 = 100_000;
    let topics: Vec<Value> = (0..TOPICS)
        .map(|t| json!({"name": format!("topic-{t}"), "partitions": PARTITIONS}))
        .collect();
    let names: Vec<String> = (0..TOPICS).map(|t| format!("topic-{t}")).collect();
    let config = json!({
        "topics": topics, "assignor": "range", "learners": "off", "expansion_timeout_ms": 50,
    });
    let (status, view) = server.call("PUT", "/v1/groups/big", Some(&config));
    assert_eq!(status, 201, "{view}");
    // Reads past the HTTP client's default answer limit, for the one
    // answer in pairs below; returns the answer and its size.
    let beat = |body: &Value| -> (Value, usize) {
        let mut response = Server::agent()
            .post(format!("{}/v1/groups/big/heartbeat", server.base))
            .send_json(body)
            .expect("POST heartbeat");
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .with_config()
            .limit(64 << 20)
            .read_to_string()
            .expect("the answer");
        assert_eq!(status, 200, "{}", &text[..text.len().min(500)]);
        (serde_json::from_str(&text).expect("JSON"), text.len())
    };
    let count = |items: &Value| -> u64 {
        items
            .as_array()
            .expect("a task list")
            .iter()
            .map(|item| match item.as_array().expect("an item").as_slice() {
                [_, _] => 1,
                [_, first, last] => last.as_u64().unwrap() - first.as_u64().unwrap() + 1,
                other => panic!("not a task or range: {other:?}"),
            })
            .sum()
    };
    let (mut answer, _) = beat(&json!({
        "member_id": "", "member_epoch": 0, "topics": names, "task_ranges": true,
    }));
    let deadline = Instant::now() + Duration::from_secs(300);
    while count(&answer["active"]) < TOPICS * PARTITIONS {
        assert!(Instant::now() < deadline, "never got its tasks: {answer}");
        std::thread::sleep(Duration::from_millis(100));
        answer = beat(&json!({
            "member_id": answer["member_id"], "member_epoch": answer["member_epoch"],
            "owned": answer["active"], "task_ranges": true,
        }))
        .0;
    }
    let ranges: Vec<Value> = names
        .iter()
        .map(|topic| json!([topic, 0, PARTITIONS - 1]))
        .collect();
    assert_eq!(answer["active"], json!(ranges), "one range per topic");
    let body = json!({
        "member_id": answer["member_id"], "member_epoch": answer["member_epoch"],
        "owned": ranges, "task_ranges": true,
    });
    assert!(body.to_string().len() < 1_000, "{body}");
    let (again, size) = beat(&body);
    assert!(size < 1_000, "a ranged answer of {size} bytes: {again}");
    assert_eq!(again["active"], json!(ranges));
    assert_eq!(again["revoking"], json!([]));
    // Without `task_ranges`, the answer is in pairs, as before.
    let (pairs, size) = beat(&json!({
        "member_id": again["member_id"], "member_epoch": again["member_epoch"], "owned": ranges,
    }));
    assert_eq!(count(&pairs["active"]), TOPICS * PARTITIONS);
    assert_eq!(pairs["active"][0], json!(["topic-0", 0]));
    assert!(size > 10_000_000, "{size} bytes");
    // A range that ends before it starts.
    let (status, answer) = server.call(
        "POST",
        "/v1/groups/big/heartbeat",
        Some(&json!({
            "member_id": again["member_id"], "member_epoch": again["member_epoch"],
            "owned": [["topic-0", 5, 2]],
        })),
    );
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["error"]["code"], "invalid_json");
}

/// Heartbeats every member in turn (20 ms apart) until `done` holds of
/// them, or panics at the deadline.
fn beat_until(
    server: &Server,
    group: &str,
    members: &mut [Member],
    what: &str,
    done: impl Fn(&[Member]) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done(members) {
        assert!(Instant::now() < deadline, "{what}: not in time");
        for member in members.iter_mut() {
            member.heartbeat(server, group);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The expansion timeout batches arrivals only. With learners off and a
/// long expansion timeout, the tasks of a member that leaves, and of one
/// that goes silent and expires, are granted to the member that stays on
/// its heartbeats right after the departure, long before an expansion
/// timeout could have passed.
#[test]
fn a_departure_gives_its_tasks_away_without_waiting_for_the_expansion_timeout() {
    const EXPANSION_MS: u64 = 2_500;
    let server = Server::start(&common::scratch("serve-departure"), &[]);
    let group = "departures";
    let config = json!({
        "topics": [{"name": "orders", "partitions": 4}],
        "learners": "off",
        "expansion_timeout_ms": EXPANSION_MS,
        "heartbeat_interval_ms": 50,
        "session_timeout_ms": 1_000,
    });
    let (status, view) = server.call("PUT", &format!("/v1/groups/{group}"), Some(&config));
    assert_eq!(status, 201, "{view}");
    let two_each = |m: &[Member]| {
        m.iter()
            .all(|m| m.active.len() == 2 && m.revoking.is_empty())
    };
    let mut members = vec![
        Member::join_dynamic(&server, group, "a", &["orders"]),
        Member::join_dynamic(&server, group, "b", &["orders"]),
    ];
    beat_until(&server, group, &mut members, "two members share", two_each);

    // b leaves; a's next heartbeats get b's tasks.
    let mut b = members.pop().unwrap();
    let (status, answer) = b.try_heartbeat(&server, group, json!({"member_epoch": -1}));
    assert_eq!(status, 200, "{answer}");
    let left = Instant::now();
    beat_until(&server, group, &mut members, "the leaver's tasks", |m| {
        m[0].active.len() == 4
    });
    assert!(
        left.elapsed() < Duration::from_millis(EXPANSION_MS),
        "granted {:?} after the leave",
        left.elapsed()
    );

    // c joins (an arrival: batched), then goes silent and expires.
    members.push(Member::join_dynamic(&server, group, "c", &["orders"]));
    beat_until(&server, group, &mut members, "a and c share", two_each);
    let mut a = members.remove(0);
    let deadline = Instant::now() + Duration::from_secs(30);
    let removed = loop {
        a.heartbeat(&server, group);
        let (status, view) = server.call("GET", &format!("/v1/groups/{group}"), None);
        assert_eq!(status, 200);
        if view["members"].as_array().expect("members").len() == 1 {
            break Instant::now();
        }
        assert!(Instant::now() < deadline, "c never expired: {view}");
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut alone = vec![a];
    beat_until(
        &server,
        group,
        &mut alone,
        "the expired member's tasks",
        |m| m[0].active.len() == 4,
    );
    assert!(
        removed.elapsed() < Duration::from_millis(EXPANSION_MS),
        "granted {:?} after the expiry",
        removed.elapsed()
    );
}

/// A join listing a topic the group does not have is accepted (a rolling
/// deploy may subscribe before an admin adds it), the member view shows the
/// subscription, and the topic's tasks come once an admin adds it.
#[test]
fn a_member_may_subscribe_to_a_topic_before_it_is_configured() {
    let server = Server::start(&common::scratch("serve-newtopic"), &[]);
    let group = "rolling";
    let mut config = json!({
        "topics": [{"name": "orders", "partitions": 2}],
        "expansion_timeout_ms": 100,
        "heartbeat_interval_ms": 50,
        "learners": "off",
    });
    let (status, view) = server.call("PUT", &format!("/v1/groups/{group}"), Some(&config));
    assert_eq!(status, 201, "{view}");
    let mut members = vec![Member::join_topics(
        &server,
        group,
        "new-version",
        &["orders", "newtopic"],
    )];
    beat_until(&server, group, &mut members, "orders assigned", |m| {
        m[0].active.len() == 2
    });
    let (_, view) = server.call("GET", &format!("/v1/groups/{group}"), None);
    assert_eq!(
        view["members"][0]["topics"],
        json!(["newtopic", "orders"]),
        "{view}"
    );

    config["topics"] = json!([
        {"name": "orders", "partitions": 2},
        {"name": "newtopic", "partitions": 3},
    ]);
    let (status, view) = server.call("PUT", &format!("/v1/groups/{group}"), Some(&config));
    assert_eq!(status, 200, "{view}");
    beat_until(&server, group, &mut members, "newtopic assigned", |m| {
        m[0].active.len() == 5
    });
}

/// Two live processes with one member name. The second one takes the slot
/// but is granted its tasks only after the last lease the host gave the
/// first one has run out (until then it is told to warm them up); the first
/// one is told `replaced` (not `fenced`, whose advice to rejoin would take
/// the name back), with or without its name in the heartbeat, and is
/// granted nothing.
#[test]
fn a_second_process_with_one_name_waits_for_the_first_ones_lease() {
    let server = Server::start(&common::scratch("serve-duplicate-name"), &[]);
    let group = "duplicates";
    let config = json!({
        "topics": [{"name": "orders", "partitions": 4}],
        "learners": "off",
        "expansion_timeout_ms": 1_500,
        "heartbeat_interval_ms": 100,
    });
    let (status, view) = server.call("PUT", &format!("/v1/groups/{group}"), Some(&config));
    assert_eq!(status, 201, "{view}");
    let mut members = vec![
        Member::join(&server, group, "worker-a"),
        Member::join_dynamic(&server, group, "b", &["orders"]),
    ];
    beat_until(&server, group, &mut members, "two members share", |m| {
        m.iter().all(|m| m.active.len() == 2)
    });
    let mut first = members.remove(0);
    let sent = Instant::now();
    let (status, answer) = first.try_heartbeat(&server, group, json!({}));
    assert_eq!(status, 200, "{answer}");
    let lease = Duration::from_millis(answer["lease_ms"].as_u64().expect("lease_ms"));
    assert!(lease > Duration::ZERO);
    let tasks_of_a = first.active.clone();

    let mut second = Member::join(&server, group, "worker-a");
    assert_ne!(second.member_id, first.member_id);
    assert!(
        second.active.is_empty() || sent.elapsed() >= lease,
        "granted {:?} while the first process's lease of {lease:?} ran",
        second.active
    );
    for extra in [json!({"member_name": "worker-a"}), json!({})] {
        let (status, error) = first.try_heartbeat(&server, group, extra);
        assert_eq!(status, 409, "{error}");
        assert_eq!(error["error"]["code"], "replaced", "{error}");
        let message = error["error"]["message"].as_str().unwrap();
        assert!(message.contains("do not rejoin"), "{message}");
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while second.active != tasks_of_a {
        assert!(
            Instant::now() < deadline,
            "never granted: {:?}",
            second.active
        );
        if second.active.is_empty() {
            assert!(
                second.learner.is_superset(&tasks_of_a),
                "it warms them up meanwhile: {:?}",
                second.learner
            );
        }
        second.heartbeat(&server, group);
        assert!(
            second.active.is_empty() || sent.elapsed() >= lease,
            "granted {:?} {:?} after the first process's last answer, within its lease of {lease:?}",
            second.active,
            sent.elapsed()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Creates `group` (4 tasks, learners off, a 1.5 s expansion and 6 s
/// session timeout, so the longest lease an answer can give is 3 s), in
/// which the static member `worker-a` comes to hold every task; then one
/// more heartbeat of it. Returns the member, when that heartbeat was
/// sent, and the lease its answer gave.
fn worker_a_holds_every_task(server: &Server, group: &str) -> (Member, Instant, Duration) {
    let config = json!({
        "topics": [{"name": "orders", "partitions": 4}],
        "learners": "off",
        "expansion_timeout_ms": 1_500,
        "heartbeat_interval_ms": 100,
        "session_timeout_ms": 6_000,
    });
    let (status, view) = server.call("PUT", &format!("/v1/groups/{group}"), Some(&config));
    assert_eq!(status, 201, "{view}");
    let mut members = vec![Member::join(server, group, "worker-a")];
    beat_until(
        server,
        group,
        &mut members,
        "worker-a holds every task",
        |m| m[0].active.len() == 4,
    );
    let mut first = members.remove(0);
    let sent = Instant::now();
    let (status, answer) = first.try_heartbeat(server, group, json!({}));
    assert_eq!(status, 200, "{answer}");
    let lease = Duration::from_millis(answer["lease_ms"].as_u64().expect("lease_ms"));
    assert!(lease > Duration::from_millis(500), "{answer}");
    (first, sent, lease)
}

/// A second process that takes a name right after a host restart waits for
/// the old process's lease too. The lease the host gave a member is kept in
/// memory only, so a restarted host takes every member that holds tasks to
/// hold the longest lease an answer could give it (here min(session
/// timeout, expansion timeout + the longest interval) = 3 s), and the
/// second process warms the tasks up until then; otherwise a host restarted
/// by kill -9 would grant a new incarnation of the name its tasks at once,
/// while the old process still runs on the lease it was given just before.
#[test]
fn a_takeover_right_after_a_host_restart_waits_for_the_old_processs_lease() {
    let data_dir = common::scratch("serve-restart-takeover");
    let server = Server::start(&data_dir, &[]);
    let group = "restarts";
    let (mut first, sent, lease) = worker_a_holds_every_task(&server, group);
    let tasks_of_a = first.active.clone();

    // kill -9 and start again on the same data dir; the first process
    // keeps running on its lease.
    drop(server);
    let server = Server::start(&data_dir, &[]);
    let mut second = Member::join(&server, group, "worker-a");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(
            second.active.is_empty() || sent.elapsed() >= lease,
            "granted {:?} {:?} after the first process's last answer, within its lease of {lease:?}",
            second.active,
            sent.elapsed()
        );
        if second.active == tasks_of_a {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never granted: {:?}",
            second.active
        );
        second.heartbeat(&server, group);
        std::thread::sleep(Duration::from_millis(20));
    }
    let (status, error) = first.try_heartbeat(&server, group, json!({}));
    assert_eq!(status, 409, "{error}");
}

/// The wait for a lease, with the host restarted during it: a second
/// process took the name of a first one that still runs on its lease, and
/// waits for that lease; the host is killed and started again. The wait is
/// in the log (`HandoverStarted`), so the restarted host does not grant the
/// second process the tasks at once while the first still processes them:
/// it makes the second process wait the longest lease an answer could have
/// given the first (3 s here). The first one is still told `replaced`.
#[test]
fn a_second_process_waiting_for_the_first_ones_lease_waits_on_after_a_host_restart() {
    let data_dir = common::scratch("serve-restart-duplicate");
    let server = Server::start(&data_dir, &[]);
    let group = "duplicates-restart";
    let (mut first, sent, lease) = worker_a_holds_every_task(&server, group);
    let tasks_of_a = first.active.clone();
    let mut second = Member::join(&server, group, "worker-a");
    assert!(
        second.active.is_empty(),
        "granted {:?} at once while the first process's lease runs",
        second.active
    );

    // kill -9 and start again while the second one waits.
    drop(server);
    let server = Server::start(&data_dir, &[]);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        second.heartbeat(&server, group);
        assert!(
            second.active.is_empty() || sent.elapsed() >= lease,
            "granted {:?} {:?} after the first process's last answer, within its lease of {lease:?}",
            second.active,
            sent.elapsed()
        );
        if second.active == tasks_of_a {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never granted: {:?}",
            second.active
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let (status, error) = first.try_heartbeat(&server, group, json!({"member_name": "worker-a"}));
    assert_eq!(status, 409, "{error}");
    assert_eq!(error["error"]["code"], "replaced", "{error}");
}

/// A join whose answer is lost (the member's request timed out, the host
/// had handled it) and is sent again with the id the member chose is one
/// member, not two: before, each retry of a join was a new member, which
/// under overload expired later and bumped the group again and again.
#[test]
fn a_join_retried_after_a_lost_answer_is_one_member() {
    let server = Server::start(&common::scratch("serve-join-retry"), &[]);
    let group = "retries";
    let config = json!({
        "topics": [{"name": "orders", "partitions": 4}],
        "assignor": "sticky",
    });
    let (status, view) = server.call("PUT", &format!("/v1/groups/{group}"), Some(&config));
    assert_eq!(status, 201, "{view}");
    let join = json!({
        "member_id": "c-0f6a4e21d9b54c0e8a7e9b1f3c2d4e5f",
        "member_epoch": 0,
        "topics": ["orders"],
    });
    let path = format!("/v1/groups/{group}/heartbeat");
    let (status, first) = server.call("POST", &path, Some(&join));
    assert_eq!(status, 200, "{first}");
    // The first answer is lost; the member sends the same join again.
    let (status, again) = server.call("POST", &path, Some(&join));
    assert_eq!(status, 200, "{again}");
    assert_eq!(first["member_id"], join["member_id"]);
    assert_eq!(again["member_id"], join["member_id"]);
    let (status, view) = server.call("GET", &format!("/v1/groups/{group}"), None);
    assert_eq!(status, 200);
    let members = view["members"].as_array().expect("members");
    assert_eq!(members.len(), 1, "{view}");
    assert_eq!(members[0]["member_id"], join["member_id"]);
    // An id that is not one is refused, and changes nothing.
    let (status, error) = server.call(
        "POST",
        &path,
        Some(&json!({"member_id": "not an id", "member_epoch": 0, "topics": ["orders"]})),
    );
    assert_eq!(status, 400, "{error}");
    assert_eq!(error["error"]["code"], "invalid_request");
    let (_, view) = server.call("GET", &format!("/v1/groups/{group}"), None);
    assert_eq!(view["members"].as_array().map(Vec::len), Some(1));
}

/// Regression: a host idle since it started, then given its first group,
/// measured the group's first timer (not started yet, so due at 0)
/// against its whole time up: it logged "the host runs late" with
/// late_ms about its idle time and told the first member to beat every
/// 11,250 ms (a quarter of its session timeout) instead of the configured
/// 3,000. Idleness is the point here, so the host is left idle for a
/// fixed time; what is asserted is what the member and `/metrics` see.
#[test]
fn a_host_idle_before_its_first_group_tells_the_first_member_the_configured_interval() {
    let data_dir = common::scratch("serve-idle-first-group");
    let server = Server::start(&data_dir, &[]);
    std::thread::sleep(Duration::from_secs(4));

    let group = "idle-first";
    let config = json!({
        "topics": [{"name": "orders", "partitions": 4}],
        "heartbeat_interval_ms": 3_000,
        "session_timeout_ms": 45_000,
        // Longer than the interval: the join is not asked to come back
        // for the target sooner.
        "expansion_timeout_ms": 10_000,
    });
    let (status, value) = server.call("PUT", &format!("/v1/groups/{group}"), Some(&config));
    assert_eq!(status, 201, "{value}");
    // The shard's timer task has ticked the new group (its first timer
    // started): whatever lateness it measured is in by now.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, shards) = server.call("GET", "/v1/shards", None);
        assert_eq!(status, 200, "{shards}");
        let groups: u64 = shards["shards"]
            .as_array()
            .expect("shards")
            .iter()
            .map(|s| s["groups"].as_u64().expect("groups"))
            .sum();
        assert_eq!(groups, 1, "{shards}");
        let started = shards["shards"]
            .as_array()
            .expect("shards")
            .iter()
            .all(|s| s["timers"].get("start").is_none());
        if started {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the group's timer never started: {shards}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    let (status, answer) = server.call(
        "POST",
        &format!("/v1/groups/{group}/heartbeat"),
        Some(&json!({"member_id": "", "member_epoch": 0, "topics": ["orders"]})),
    );
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["heartbeat_interval_ms"], 3_000, "{answer}");
    // No lateness to speak of: a busy machine may make a timer really late
    // by tens of ms (which `assignd_host_late_total` would count), the
    // defect counted the whole idle time (the level was about 4 s here).
    let late = server
        .metric("assignd_host_late_seconds")
        .expect("the lateness level is exported");
    assert!(late < 0.5, "the host was idle, not late: {late} s");
    assert!(server.metric("assignd_host_late_total").is_some());
}
