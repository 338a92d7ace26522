//! The remote subcommands as an operator uses them: the real
//! `assignd serve` on a free port, driven only by `assignd group …` and
//! `assignd assignor …` (the host given by `--host` or `ASSIGND_HOST`). A
//! group is created from flags, shown and listed; the built-ins are
//! listed; a built-in's bytes are uploaded under a new name, shown and
//! deleted. An unknown group and an unreachable host each give exit 1 and
//! one `error:` line.

use crate::common;

use crate::common::Server;

use std::process::{Command, Output, Stdio};

use crate::common::{assert_one_error_line, scratch, stderr, stdout};
use serde_json::Value;

impl Server {
    /// Runs the CLI against this server, the address given by environment.
    fn cli(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_assignd"))
            .args(args)
            .env("ASSIGND_HOST", &self.base)
            .env("ASSIGND_TOKEN", common::ADMIN_TOKEN)
            .stdin(Stdio::null())
            .output()
            .expect("cannot start assignd")
    }

    /// Runs the CLI, asserts exit 0 and nothing on stderr, and parses stdout.
    fn json(&self, args: &[&str]) -> Value {
        let output = self.cli(args);
        assert_eq!(
            output.status.code(),
            Some(0),
            "assignd {args:?}: stderr: {}",
            stderr(&output)
        );
        assert!(
            output.stderr.is_empty(),
            "assignd {args:?}: stderr: {}",
            stderr(&output)
        );
        serde_json::from_str(&stdout(&output))
            .unwrap_or_else(|e| panic!("assignd {args:?}: not JSON ({e}): {}", stdout(&output)))
    }
}

fn assignor_names(list: &Value) -> Vec<String> {
    list["assignors"]
        .as_array()
        .expect("assignors is an array")
        .iter()
        .map(|a| a["name"].as_str().expect("a name").to_owned())
        .collect()
}

#[test]
fn groups_and_assignors_from_the_command_line() {
    let dir = scratch("remote-cli");
    let server = Server::start(&dir.join("data"), &[]);

    // A group from flags alone.
    let created = server.json(&[
        "group",
        "create",
        "billing",
        "--topic",
        "orders:12",
        "--topic",
        "refunds:3",
        "--assignor",
        "range",
    ]);
    assert_eq!(created["name"], "billing");
    assert_eq!(created["config"]["assignor"], "range");
    assert_eq!(
        created["config"]["topics"],
        serde_json::json!([
            {"name": "orders", "partitions": 12},
            {"name": "refunds", "partitions": 3},
        ])
    );

    // A config file, with a flag overriding its assignor; `--host` wins
    // over the environment and may follow the subcommand.
    let config = common::write(
        &dir,
        "payments.json",
        r#"{"topics":[{"name":"payments","partitions":4}],"assignor":"range","max_learners":1}"#,
    );
    let payments = server.json(&[
        "group",
        "create",
        "payments",
        "--config",
        config.to_str().unwrap(),
        "--assignor",
        "round-robin",
        "--host",
        &server.base,
    ]);
    assert_eq!(payments["config"]["assignor"], "round-robin");
    assert_eq!(payments["config"]["max_learners"], 1);

    let shown = server.json(&["group", "show", "billing"]);
    assert_eq!(shown["name"], "billing");
    assert_eq!(shown["config"], created["config"]);
    let listed = server.json(&["group", "list"]);
    let mut names: Vec<&str> = listed["groups"]
        .as_array()
        .expect("groups is an array")
        .iter()
        .map(|g| g["name"].as_str().expect("a name"))
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["billing", "payments"]);

    // The four built-ins.
    let builtins = server.json(&["assignor", "list"]);
    let mut names = assignor_names(&builtins);
    names.sort_unstable();
    assert_eq!(names, ["learner-aware", "range", "round-robin", "sticky"]);

    // A built-in's bytes under a new name: upload, list, show, delete.
    let bytes = assignd::plugins::builtin_component("sticky").expect("sticky is built in");
    let wasm = common::write(&dir, "my-sticky.wasm", bytes);
    let uploaded = server.json(&[
        "assignor",
        "upload",
        wasm.to_str().unwrap(),
        "--name",
        "my-sticky",
        "--version",
        "1.0.0",
    ]);
    assert_eq!(uploaded["name"], "my-sticky");
    assert_eq!(uploaded["version"], "1.0.0");
    assert_eq!(uploaded["builtin"], false);
    let id = uploaded["id"].as_str().expect("an id").to_owned();
    assert_eq!(id.len(), 64, "a sha256 in hex: {id}");
    assert!(assignor_names(&server.json(&["assignor", "list"])).contains(&"my-sticky".into()));
    let by_name = server.json(&["assignor", "show", "my-sticky@1.0.0"]);
    assert_eq!(by_name["id"], id.as_str());
    let by_id = server.json(&["assignor", "show", &id]);
    assert_eq!(by_id, by_name);

    // Hot-swap billing to the upload, then roll back.
    let before = shown["config"]["assignor"].clone();
    let bound = server.json(&[
        "group",
        "bind",
        "billing",
        "my-sticky@1.0.0",
        "--param",
        "note=swapped",
        "--fallback",
        "range",
        "--time-limit-ms",
        "500",
    ]);
    assert_eq!(bound["config"]["assignor"], "my-sticky@1.0.0");
    assert_eq!(bound["config"]["params"]["note"], "swapped");
    assert_eq!(bound["config"]["fallback_assignor"], "range");
    assert_eq!(
        bound["config"]["assignor_limits"],
        serde_json::json!({"fuel_max": null, "time_limit_ms": 500, "memory_max_mib": null})
    );
    let rolled = server.json(&["group", "rollback", "billing"]);
    assert_eq!(rolled["config"]["assignor"], before);
    assert_one_error_line(
        &server.cli(&["group", "bind", "billing", "no-such@1"]),
        1,
        "error: unknown_assignor: ",
    );
    // A preview needs members; billing has none.
    assert_one_error_line(
        &server.cli(&["group", "preview", "billing", "range", "--param", "k=v"]),
        1,
        "error: empty_group: ",
    );
    assert_one_error_line(
        &server.cli(&["group", "preview", "billing", "no-such@1"]),
        1,
        "error: unknown_assignor: ",
    );

    let deleted = server.cli(&["assignor", "delete", "my-sticky@1.0.0"]);
    assert_eq!(deleted.status.code(), Some(0), "{}", stderr(&deleted));
    assert!(deleted.stdout.is_empty() && deleted.stderr.is_empty());
    assert_one_error_line(
        &server.cli(&["assignor", "show", "my-sticky@1.0.0"]),
        1,
        "error: unknown_module: ",
    );

    // Refusals: one line naming the host's error code.
    assert_one_error_line(
        &server.cli(&["group", "show", "nope"]),
        1,
        "error: unknown_group: ",
    );
    assert_one_error_line(
        &server.cli(&["group", "drain", "billing", "ghost"]),
        1,
        "error: unknown_member: ",
    );
    assert_one_error_line(
        &server.cli(&[
            "group",
            "create",
            "bad",
            "--topic",
            "t:1",
            "--assignor",
            "no-such",
        ]),
        1,
        "error: unknown_assignor: ",
    );
    assert_one_error_line(
        &server.cli(&["assignor", "delete", "sticky"]),
        1,
        "error: builtin_assignor: ",
    );
}

#[test]
fn an_unreachable_host_is_one_error_line() {
    // A port that was free a moment ago: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let host = format!("http://127.0.0.1:{port}");
    let output = Command::new(env!("CARGO_BIN_EXE_assignd"))
        .args(["group", "list", "--host", &host])
        .output()
        .expect("cannot start assignd");
    assert_one_error_line(
        &output,
        1,
        &format!("error: cannot reach the host at {host}: "),
    );
}

#[test]
fn bad_command_lines_are_usage_errors() {
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_assignd"))
            .args(args)
            .output()
            .expect("cannot start assignd")
    };
    // Neither a config file nor a topic.
    assert_eq!(run(&["group", "create", "g"]).status.code(), Some(2));
    assert_eq!(
        run(&["group", "create", "g", "--topic", "orders"])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(
        run(&["group", "list", "--host", "127.0.0.1:7070"])
            .status
            .code(),
        Some(2)
    );
}

/// An upload over the host's limit is one `payload_too_large` line naming
/// the limit, not the broken pipe of a write the host stopped reading, and
/// the host holds no new module.
#[test]
fn an_upload_over_the_limit_is_refused_with_the_limit_not_a_broken_pipe() {
    let dir = scratch("remote-cli-too-large");
    let server = Server::start(&dir.join("data"), &[]);
    let file = dir.join("huge.wasm");
    let huge = std::fs::File::create(&file).expect("create");
    huge.set_len(assignd::registry::MODULE_UPLOAD_BYTES_MAX as u64 + 1)
        .expect("a sparse file");
    let path = file.to_str().expect("a UTF-8 path");
    let output = server.cli(&[
        "assignor",
        "upload",
        path,
        "--name",
        "huge",
        "--version",
        "1",
    ]);
    assert_one_error_line(&output, 1, "error: payload_too_large: ");
    assert!(stderr(&output).contains("at most 50331648 bytes (48 MiB)"));
    let listed = server.json(&["assignor", "list"]);
    assert!(
        !listed.to_string().contains("huge"),
        "nothing stored: {listed}"
    );
}
