//! The assignor registry as an operator uses it: the real `assignd serve`
//! on a free port, driven over raw HTTP. A built-in's component is
//! uploaded under a new name, a group is bound to it by `name@version`,
//! three members converge on its assignment; the server is killed and
//! restarted on the same data dir, and the module is still listed and
//! still serves the group (a fourth member joins and the group converges
//! again); the group is hot-swapped to `range` and rolled back, and its
//! binding history survives another restart. A guest that loads but answers an invalid assignment fails its
//! self-test and is not stored.

use crate::common;

use crate::common::{Member, Server};

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const GROUP: &str = "orders-app";
const TASKS: u64 = 12;

/// Heartbeats until the group is stable with `per_member` active tasks on
/// every member, no task ever held twice, every task active exactly once.
fn converge(server: &Server, members: &mut [Member], per_member: usize) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        for i in 0..members.len() {
            members[i].heartbeat(server, GROUP);
            let mut holder: BTreeMap<(String, u64), &str> = BTreeMap::new();
            for member in members.iter() {
                for task in member.active.union(&member.revoking) {
                    if let Some(other) = holder.insert(task.clone(), member.name) {
                        panic!("task {task:?} held by {other} and {}", member.name);
                    }
                }
            }
        }
        let (status, view) = server.call("GET", &format!("/v1/groups/{GROUP}"), None);
        assert_eq!(status, 200, "{view}");
        let target_epoch = view["target_epoch"].as_u64().expect("target_epoch");
        let stable = view["state"] == "stable"
            && members.iter().all(|m| {
                m.revoking.is_empty()
                    && m.member_epoch == target_epoch
                    && m.active.len() == per_member
            });
        if stable {
            let all: BTreeSet<_> = members.iter().flat_map(|m| m.active.clone()).collect();
            assert_eq!(all.len() as u64, TASKS, "every task active once");
            return;
        }
        assert!(Instant::now() < deadline, "not stable in time: {view}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn names(list: &Value) -> Vec<String> {
    list["assignors"]
        .as_array()
        .expect("assignors")
        .iter()
        .map(|a| a["name"].as_str().expect("name").to_owned())
        .collect()
}

#[test]
fn an_uploaded_module_serves_a_group_across_a_restart() {
    let data_dir: PathBuf = common::scratch("registry-restart");
    let bytes = assignd::plugins::builtin_component("sticky").expect("sticky is built in");
    let server = Server::start(&data_dir, &[]);

    let (status, module) = server.upload("custom", "1.0", bytes);
    assert_eq!(status, 201, "{module}");
    let id = module["id"].as_str().expect("id").to_owned();
    assert_eq!(module["info"]["name"], "sticky");
    let (status, again) = server.upload("custom", "1.0", bytes);
    assert_eq!((status, &again), (200, &module), "the same bytes again");

    let config = json!({
        "topics": [{"name": "orders", "partitions": TASKS}],
        "assignor": "custom@1.0",
        "expansion_timeout_ms": 200,
    });
    let (status, view) = server.call("PUT", &format!("/v1/groups/{GROUP}"), Some(&config));
    assert_eq!(status, 201, "{view}");
    let mut members = vec![
        Member::join(&server, GROUP, "worker-a"),
        Member::join(&server, GROUP, "worker-b"),
        Member::join(&server, GROUP, "worker-c"),
    ];
    converge(&server, &mut members, 4);

    let (status, error) = server.call("DELETE", &format!("/v1/assignors/{id}"), None);
    assert_eq!(status, 409, "{error}");
    assert_eq!(error["error"]["code"], "module_in_use");

    // kill -9 and restart on the same data dir.
    drop(server);
    let server = Server::start(&data_dir, &[]);
    let (status, list) = server.call("GET", "/v1/assignors", None);
    assert_eq!(status, 200, "{list}");
    assert_eq!(
        names(&list),
        ["range", "round-robin", "sticky", "learner-aware", "custom"]
    );
    let (status, shown) = server.call("GET", "/v1/assignors/custom@1.0", None);
    assert_eq!((status, &shown["id"]), (200, &json!(id)), "{shown}");
    let (status, view) = server.call("GET", &format!("/v1/groups/{GROUP}"), None);
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["config"]["assignor"], "custom@1.0");

    // The members carry on, a fourth joins: a new target from the module.
    let before = view["target_epoch"].as_u64().expect("target_epoch");
    members.push(Member::join(&server, GROUP, "worker-d"));
    converge(&server, &mut members, 3);
    let (_, view) = server.call("GET", &format!("/v1/groups/{GROUP}"), None);
    assert!(
        view["target_epoch"].as_u64().expect("target_epoch") > before,
        "{view}"
    );

    // A hot swap to range, then a rollback to the module: the members
    // carry on (no error, no task held twice), and the binding history
    // survives another restart.
    let bind = format!("/v1/groups/{GROUP}/assignor");
    let (status, view) = server.call("PUT", &bind, Some(&json!({"module": "range"})));
    assert_eq!(
        (status, &view["config"]["assignor"]),
        (200, &json!("range")),
        "{view}"
    );
    converge(&server, &mut members, 3);
    let (status, view) = server.call("POST", &format!("{bind}/rollback"), Some(&json!({})));
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["config"]["assignor"], "custom@1.0");
    converge(&server, &mut members, 3);
    drop(server);
    let server = Server::start(&data_dir, &[]);
    let (_, view) = server.call("GET", &format!("/v1/groups/{GROUP}"), None);
    let history: Vec<(&str, Option<u64>)> = view["bindings"]
        .as_array()
        .unwrap_or_else(|| panic!("bindings: {view}"))
        .iter()
        .map(|b| {
            (
                b["module"].as_str().expect("module"),
                b["rollback_to"].as_u64(),
            )
        })
        .collect();
    assert_eq!(
        history,
        [
            ("custom@1.0", None),
            ("range", None),
            ("custom@1.0", Some(1))
        ]
    );
    let (status, error) = server.call("DELETE", "/v1/assignors/custom@1.0", None);
    assert_eq!(
        (status, &error["error"]["code"]),
        (409, &json!("module_in_use"))
    );

    // Unbound, it can go; after a restart it stays gone.
    let config = json!({
        "topics": [{"name": "orders", "partitions": TASKS}],
        "assignor": "sticky",
        "expansion_timeout_ms": 200,
    });
    let (status, view) = server.call("PUT", &format!("/v1/groups/{GROUP}"), Some(&config));
    assert_eq!(status, 200, "{view}");
    let (status, _) = server.call("DELETE", "/v1/assignors/custom@1.0", None);
    assert_eq!(status, 204);
    drop(server);
    let server = Server::start(&data_dir, &[]);
    let (_, list) = server.call("GET", "/v1/assignors", None);
    assert_eq!(names(&list).len(), 4, "{list}");
}

#[test]
fn a_module_failing_its_self_test_is_not_stored() {
    let data_dir = common::scratch("registry-self-test");
    let bytes = std::fs::read(common::bad_guest("test-guest-invalid-output")).expect("guest");
    let server = Server::start(&data_dir, &[]);
    let (status, error) = server.upload("broken", "1", &bytes);
    assert_eq!(status, 422, "{error}");
    assert_eq!(error["error"]["code"], "self_test_failed");
    let (status, error) = server.upload("garbage", "1", b"not a component");
    assert_eq!(status, 400, "{error}");
    assert_eq!(error["error"]["code"], "not_wasm");
    let other_world = wat::parse_str(common::OTHER_WORLD_WAT).expect("wat");
    let (status, error) = server.upload("other", "1", &other_world);
    assert_eq!(status, 400, "{error}");
    assert_eq!(error["error"]["code"], "wrong_world");
    // An assignor of an older interface version: named in the refusal.
    let older = wat::parse_str(
        r#"(component
             (instance $i)
             (export "assignd:assignor/assignor@0.0.9" (instance $i)))"#,
    )
    .expect("wat");
    let (status, error) = server.upload("older", "1", &older);
    assert_eq!(status, 400, "{error}");
    assert_eq!(error["error"]["code"], "wrong_world");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("assignd:assignor/assignor@0.0.9") && message.contains("@0.1.0"),
        "{message}"
    );
    // A real component cut in half.
    let sticky = assignd::plugins::builtin_component("sticky").expect("sticky is built in");
    let (status, error) = server.upload("truncated", "1", &sticky[..sticky.len() / 2]);
    assert_eq!(status, 400, "{error}");
    assert!(!error["error"]["message"].as_str().unwrap().is_empty());
    let (_, list) = server.call("GET", "/v1/assignors", None);
    assert_eq!(names(&list).len(), 4, "{list}");
    let stored = std::fs::read_dir(data_dir.join("modules"))
        .expect("modules dir")
        .count();
    assert_eq!(stored, 0, "nothing written");
}

#[test]
fn params_the_module_refuses_are_refused_at_bind_and_change_nothing() {
    let server = Server::start(&common::scratch("registry-params"), &[]);
    let (status, created) = server.call(
        "PUT",
        "/v1/groups/g",
        Some(&json!({"topics": [{"name": "orders", "partitions": 4}], "assignor": "range"})),
    );
    assert_eq!(status, 201, "{created}");
    // The group's first assignor call runs off the request path: wait for
    // its target, so "before" is a state nothing else will change.
    let deadline = Instant::now() + Duration::from_secs(60);
    let before = loop {
        let (_, view) = server.call("GET", "/v1/groups/g", None);
        if view["state"] == "stable" {
            break view;
        }
        assert!(Instant::now() < deadline, "not stable in time: {view}");
        std::thread::sleep(Duration::from_millis(20));
    };
    // learner-aware refuses a non-numeric num_standby, by bind or by config.
    let (status, error) = server.call(
        "PUT",
        "/v1/groups/g/assignor",
        Some(&json!({"module": "learner-aware", "params": {"num_standby": "two"}})),
    );
    assert_eq!(status, 400, "{error}");
    assert_eq!(error["error"]["code"], "params_rejected", "{error}");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("learner-aware") && message.contains("num_standby"),
        "{message}"
    );
    let (status, error) = server.call(
        "PUT",
        "/v1/groups/g",
        Some(&json!({
            "topics": [{"name": "orders", "partitions": 4}],
            "assignor": "learner-aware",
            "params": {"num_standby": "-1"},
        })),
    );
    assert_eq!(status, 400, "{error}");
    assert_eq!(error["error"]["code"], "params_rejected", "{error}");
    let (_, after) = server.call("GET", "/v1/groups/g", None);
    assert_eq!(after, before, "nothing changed");
    // The same module with good params binds.
    let (status, view) = server.call(
        "PUT",
        "/v1/groups/g/assignor",
        Some(&json!({"module": "learner-aware", "params": {"num_standby": "1"}})),
    );
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["config"]["assignor"], "learner-aware");
}

/// The compiled artifacts in `DATA_DIR/cache` of the module `id`.
fn artifacts_of(data_dir: &std::path::Path, id: &str) -> Vec<String> {
    std::fs::read_dir(data_dir.join("cache"))
        .expect("the cache dir")
        .map(|file| file.expect("a cache entry").file_name())
        .filter_map(|name| name.to_str().map(str::to_owned))
        .filter(|name| name.starts_with(id))
        .collect()
}

/// The id the registry gives `bytes`: their sha256, in hex.
fn id_of(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A name taken is refused before the bytes are compiled (a component that
/// would fail its self-test is refused as `module_name_taken`, not
/// `self_test_failed`, and leaves no artifact); a refused or deleted module
/// leaves nothing in `DATA_DIR/cache`.
#[test]
fn refused_and_deleted_modules_leave_nothing_in_the_cache() {
    let data_dir = common::scratch("registry-cache");
    let server = Server::start(&data_dir, &[]);
    let spinner = std::fs::read(common::bad_guest("test-guest-spin-when-told")).expect("guest");
    let (status, module) = server.upload("mine", "1", &spinner);
    assert_eq!(status, 201, "{module}");
    let id = module["id"].as_str().expect("id").to_owned();
    assert_eq!(
        artifacts_of(&data_dir, &id).len(),
        1,
        "the upload is cached"
    );

    let looping = std::fs::read(common::bad_guest("test-guest-spin-forever")).expect("guest");
    for _ in 0..3 {
        let (status, error) = server.upload("mine", "1", &looping);
        assert_eq!(status, 409, "{error}");
        assert_eq!(error["error"]["code"], "module_name_taken");
    }
    assert_eq!(
        artifacts_of(&data_dir, &id_of(&looping)),
        Vec::<String>::new()
    );

    let invalid = std::fs::read(common::bad_guest("test-guest-invalid-output")).expect("guest");
    let (status, error) = server.upload("broken", "1", &invalid);
    assert_eq!(status, 422, "{error}");
    assert_eq!(
        artifacts_of(&data_dir, &id_of(&invalid)),
        Vec::<String>::new()
    );

    let (status, answer) = server.call("DELETE", &format!("/v1/assignors/{id}"), None);
    assert_eq!(status, 204, "{answer}");
    assert_eq!(artifacts_of(&data_dir, &id), Vec::<String>::new());
    // Gone from memory too: the same bytes are compiled and cached again.
    let (status, module) = server.upload("mine", "1", &spinner);
    assert_eq!(status, 201, "{module}");
    assert_eq!(artifacts_of(&data_dir, &id).len(), 1, "cached again");
}

/// The data dir and what is in it are not world-readable. `serve` makes the
/// data dir 0700 (so nothing in it is readable by others, whichever part
/// wrote it), and the module store and the compile cache write their files
/// 0600.
#[cfg(unix)]
#[test]
fn the_data_dir_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |path: &std::path::Path| {
        std::fs::metadata(path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .permissions()
            .mode()
            & 0o777
    };
    let data_dir = common::scratch("registry-modes");
    std::fs::set_permissions(&data_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let server = Server::start(&data_dir, &[]);
    assert_eq!(mode(&data_dir), 0o700, "the data dir");
    let spinner = std::fs::read(common::bad_guest("test-guest-spin-when-told")).expect("guest");
    let (status, module) = server.upload("private", "1", &spinner);
    assert_eq!(status, 201, "{module}");
    let id = module["id"].as_str().expect("id");
    for ext in ["wasm", "json"] {
        let path = data_dir.join("modules").join(format!("{id}.{ext}"));
        assert_eq!(mode(&path), 0o600, "{}", path.display());
    }
    let artifacts = artifacts_of(&data_dir, id);
    assert_eq!(artifacts.len(), 1, "{artifacts:?}");
    let path = data_dir.join("cache").join(&artifacts[0]);
    assert_eq!(mode(&path), 0o600, "{}", path.display());
}

/// An upload whose compile runs past its limit is refused 400
/// `compile_timeout`, stores nothing, and the host goes on serving.
#[test]
fn an_upload_that_compiles_too_long_is_refused_and_the_host_goes_on() {
    let data_dir = common::scratch("registry-compile-timeout");
    let server = Server::start(
        &data_dir,
        &[
            "--compile-time-base-ms",
            "1000",
            "--compile-time-per-mib-ms",
            "0",
        ],
    );
    let (status, error) = server.upload("slow", "1", &common::slow_to_compile_component());
    assert_eq!(status, 400, "{error}");
    assert_eq!(error["error"]["code"], "compile_timeout", "{error}");
    assert_unlisted_and_the_host_goes_on(&server, "slow");
}

/// The artifact the compiler process sends back is read up to
/// `--compile-artifact-max-mib`, not to its end: a component whose artifact
/// is larger is refused 400 `compile_output_too_large` naming the limit,
/// nothing of it is stored or cached, and the host goes on; the same
/// component under the default limit uploads.
#[test]
fn an_upload_whose_artifact_is_over_its_limit_is_refused_and_the_host_goes_on() {
    let data_dir = common::scratch("registry-artifact-limit");
    let server = Server::start(&data_dir, &["--compile-artifact-max-mib", "1"]);
    let big = common::big_artifact_component(16_000);
    assert!(big.len() < 2 << 20, "a small upload: {} bytes", big.len());
    let (status, error) = server.upload("big", "1", &big);
    assert_eq!(status, 400, "{error}");
    assert_eq!(
        error["error"]["code"], "compile_output_too_large",
        "{error}"
    );
    let message = error["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("1048576 bytes"), "{error}");
    assert_eq!(artifacts_of(&data_dir, &id_of(&big)), Vec::<String>::new());
    assert_unlisted_and_the_host_goes_on(&server, "big");
    drop(server);

    // Under the default limit the same component compiles: it is refused
    // only later, for what it is (it exports no functions of our world).
    let data_dir = common::scratch("registry-artifact-default");
    let server = Server::start(&data_dir, &[]);
    let (status, error) = server.upload("big", "1", &big);
    assert_eq!(status, 400, "{error}");
    assert_ne!(
        error["error"]["code"], "compile_output_too_large",
        "{error}"
    );
}

/// A component whose start function never returns (a Rust guest's own core
/// module with a looping start function added: every check before
/// instantiation passes) is stopped by the limits of the first instance an
/// upload makes, to call `info()`; it is refused 400 `instantiate_failed`
/// naming the limit, leaves nothing behind, and the host goes on.
#[test]
fn an_upload_whose_start_function_never_returns_is_refused_and_the_host_goes_on() {
    let data_dir = common::scratch("registry-start-loop");
    let server = Server::start(&data_dir, &[]);
    let looping = common::start_loop_component();
    let (status, error) = server.upload("looping", "1", &looping);
    assert_eq!(status, 400, "{error}");
    assert_eq!(error["error"]["code"], "instantiate_failed", "{error}");
    let message = error["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("ran out of fuel") || message.contains("time limit"),
        "{error}"
    );
    assert_eq!(
        artifacts_of(&data_dir, &id_of(&looping)),
        Vec::<String>::new()
    );
    assert_unlisted_and_the_host_goes_on(&server, "looping");
}

/// After a refused upload of `name`: no module of that name is listed, and
/// an honest guest still uploads.
fn assert_unlisted_and_the_host_goes_on(server: &Server, name: &str) {
    let (status, list) = server.call("GET", "/v1/assignors", None);
    assert_eq!(status, 200);
    assert!(
        !list.to_string().contains(&format!("\"{name}\"")),
        "nothing stored: {list}"
    );
    let honest = std::fs::read(common::bad_guest("test-guest-spin-when-told")).expect("guest");
    let (status, module) = server.upload("honest", "1", &honest);
    assert_eq!(status, 201, "{module}");
}
