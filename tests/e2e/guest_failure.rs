//! Guests that go wrong once live, with the real `assignd serve`: the
//! `spin-when-told` test guest passes its self-test and is uploaded; a
//! healthy group runs `sticky` and its heartbeat latency is measured at
//! rest, then again while another group's guest fails.
//!
//! - A group bound with `spin=yes` from the start (every call loops until
//!   the 200 ms time limit) never gets a target and shows the failure in its
//!   view (module, code, counts).
//! - A group served by the guest's round-robin is swapped to `trap=yes` (the
//!   guest panics), then to `spin=yes`: it keeps its last good target and its
//!   members their tasks throughout, and its view shows each failure (module,
//!   code, the panic message, a growing count).
//!
//! Meanwhile the healthy group's heartbeats are answered as fast as before.
//!
//! - A binding's own limits tighten the host's (a fuel cap, then a time
//!   limit far below the host's), and its fallback (`range`) answers for
//!   the spinning guest: the group gets a target, the failure still shows
//!   (with the fallback's answers counted) and reaches `GET /metrics`.

use crate::common;

use crate::common::Server;

use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The uploaded guest, as groups refer to it.
const MODULE: &str = "spinner@0.1.0";
/// The guest's panic message with `trap=yes` (its `TRAP_MESSAGE`; the
/// guest crate is built for wasm, not linked into this test).
const TRAP_MESSAGE: &str = "spin-when-told: told to trap";
/// How many good-group heartbeats are timed at rest and while failing.
const SAMPLES: usize = 30;

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

    fn bind(&self, group: &str, params: Value) {
        let (status, view) = self.call(
            "PUT",
            &format!("/v1/groups/{group}/assignor"),
            Some(&json!({"module": MODULE, "params": params})),
        );
        assert_eq!(status, 200, "{view}");
        assert_eq!(view["config"]["params"], params, "{view}");
    }

    /// Heartbeats `members` until the group is stable with `per_member`
    /// active tasks on each.
    fn converge(&self, group: &str, members: &mut [Value], per_member: usize) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            for member in members.iter_mut() {
                *member = self.beat(group, member).0;
            }
            let view = self.view(group);
            let settled = members.iter().all(|m| {
                m["revoking"].as_array().is_some_and(Vec::is_empty)
                    && m["active"]
                        .as_array()
                        .is_some_and(|a| a.len() == per_member)
                    && m["member_epoch"] == view["target_epoch"]
            });
            if view["state"] == "stable" && settled {
                return;
            }
            assert!(Instant::now() < deadline, "{group} never settled: {view}");
            std::thread::sleep(Duration::from_millis(20));
        }
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

/// The tests of this file take turns: one's failing guest must not load
/// the machine while another measures its healthy group's latency.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// A server with the guest uploaded, and the healthy group `good`: its
/// one member holding all 8 tasks, and its heartbeat latency at rest.
struct Scene {
    server: Server,
    good: Value,
    at_rest: Vec<Duration>,
    /// The good group's heartbeat latencies while a guest fails.
    failing: Vec<Duration>,
    /// Held until the scene (its server first) is dropped.
    _turn: MutexGuard<'static, ()>,
}

impl Scene {
    fn start(name: &str) -> Scene {
        let turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let bytes = std::fs::read(common::bad_guest("test-guest-spin-when-told")).expect("guest");
        let server = Server::start(&common::scratch(name), &["--time-limit-ms", "200"]);
        let (status, module) = server.upload("spinner", "0.1.0", &bytes);
        assert_eq!(status, 201, "the guest passes its self-test: {module}");

        let (status, answer) =
            server.call("PUT", "/v1/groups/good", Some(&config("sticky", false)));
        assert_eq!(status, 201, "{answer}");
        let mut good = [server.join("good", "g1")];
        server.converge("good", &mut good, 8);
        let [mut good] = good;
        let mut at_rest = Vec::new();
        for _ in 0..SAMPLES {
            let (answer, elapsed) = server.beat("good", &good);
            good = answer;
            at_rest.push(elapsed);
        }
        Scene {
            server,
            good,
            at_rest,
            failing: Vec::new(),
            _turn: turn,
        }
    }

    /// The `bad` group, served by the guest's round-robin: its two
    /// members, converged on 4 tasks each, and its target epoch.
    fn healthy_bad_group(&self) -> ([Value; 2], Value) {
        let (status, answer) =
            self.server
                .call("PUT", "/v1/groups/bad", Some(&config(MODULE, false)));
        assert_eq!(status, 201, "{answer}");
        let mut bad = [self.server.join("bad", "b1"), self.server.join("bad", "b2")];
        self.server.converge("bad", &mut bad, 4);
        let good_target = self.server.view("bad")["target_epoch"].clone();
        (bad, good_target)
    }

    /// Serves the good group (timed) and the `bad` members in turn until
    /// `failed` holds for the bad group's view and enough good heartbeats
    /// were timed in this phase; returns that view.
    fn serve_until(&mut self, bad: &mut [Value], failed: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut timed = 0;
        loop {
            let (answer, elapsed) = self.server.beat("good", &self.good);
            self.good = answer;
            self.failing.push(elapsed);
            timed += 1;
            for member in bad.iter_mut() {
                *member = self.server.beat("bad", member).0;
            }
            let view = self.server.view("bad");
            if failed(&view) && timed >= SAMPLES {
                return view;
            }
            assert!(
                Instant::now() < deadline,
                "no failure shown in time: {view}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The good group kept its tasks and its pace.
    fn assert_good_served_as_fast(self) {
        assert_eq!(
            self.good["active"].as_array().unwrap().len(),
            8,
            "{}",
            self.good
        );
        let (rest, busy) = (median(self.at_rest), median(self.failing));
        assert!(
            busy <= rest * 5 + Duration::from_millis(50),
            "heartbeat median {busy:?} while the guest fails, {rest:?} at rest"
        );
    }
}

fn total(view: &Value) -> u64 {
    view["assignor_failures"]["total"].as_u64().unwrap_or(0)
}

#[test]
fn a_spinning_guest_fails_visibly_and_another_group_is_served_as_fast() {
    let mut scene = Scene::start("guest-failure-spin");

    // The bad group: every call spins until the time limit.
    let (status, answer) = scene
        .server
        .call("PUT", "/v1/groups/bad", Some(&config(MODULE, true)));
    assert_eq!(status, 201, "{answer}");
    let mut bad = [scene.server.join("bad", "b1")];
    let view = scene.serve_until(&mut bad, |view| total(view) >= 2);
    let failures = &view["assignor_failures"];
    assert_eq!(failures["module"], MODULE, "{failures}");
    assert!(
        failures["code"] == "timeout" || failures["code"] == "out_of_fuel",
        "{failures}"
    );
    assert!(failures["consecutive"].as_u64().unwrap() >= 2, "{failures}");
    assert!(failures["at_ms"].as_u64().is_some(), "{failures}");
    // The bad group has no target; its member holds nothing, and is still
    // answered.
    assert_eq!(scene.server.view("bad")["target_epoch"], 0);
    assert!(
        bad[0]["active"].as_array().unwrap().is_empty(),
        "{}",
        bad[0]
    );
    scene.assert_good_served_as_fast();
}

#[test]
fn a_trapping_then_looping_guest_keeps_the_last_good_target_and_another_group_is_served_as_fast() {
    let mut scene = Scene::start("guest-failure-trap");

    // The bad group starts healthy: the guest's round-robin, 4 tasks each.
    let (mut bad, good_target) = scene.healthy_bad_group();
    let held: Vec<Value> = bad.iter().map(|m| m["active"].clone()).collect();
    let kept = |view: &Value, bad: &[Value]| {
        assert_eq!(view["target_epoch"], good_target, "target kept: {view}");
        for (member, held) in bad.iter().zip(&held) {
            assert_eq!(&member["active"], held, "tasks kept: {member}");
            assert!(
                member["revoking"].as_array().unwrap().is_empty(),
                "{member}"
            );
        }
    };

    // Swapped to `trap=yes`: every call panics.
    scene.server.bind("bad", json!({"trap": "yes"}));
    let view = scene.serve_until(&mut bad, |view| total(view) >= 2);
    let failures = &view["assignor_failures"];
    assert_eq!(failures["module"], MODULE, "{failures}");
    assert_eq!(failures["code"], "panicked", "{failures}");
    let message = failures["message"].as_str().unwrap_or_default();
    assert!(message.contains(TRAP_MESSAGE), "{failures}");
    assert!(failures["consecutive"].as_u64().unwrap() >= 2, "{failures}");
    assert_eq!(failures["last_success_ms"], Value::Null, "{failures}");
    kept(&view, &bad);
    let trapped = total(&view);

    // Swapped again, to `spin=yes`: every call loops until the time limit.
    scene.server.bind("bad", json!({"spin": "yes"}));
    let view = scene.serve_until(&mut bad, |view| {
        let code = &view["assignor_failures"]["code"];
        (code == "timeout" || code == "out_of_fuel") && total(view) >= trapped + 2
    });
    assert_eq!(view["assignor_failures"]["module"], MODULE, "{view}");
    kept(&view, &bad);
    scene.assert_good_served_as_fast();
}

/// Binds `group` to the guest with `params`, `limits` and `fallback`.
fn bind_with(server: &Server, group: &str, params: Value, limits: Value, fallback: &str) -> Value {
    let (status, view) = server.call(
        "PUT",
        &format!("/v1/groups/{group}/assignor"),
        Some(&json!({"module": MODULE, "params": params, "limits": limits, "fallback": fallback})),
    );
    assert_eq!(status, 200, "{view}");
    view
}

#[test]
fn a_bindings_limits_tighten_the_hosts_and_its_fallback_serves_the_group() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let bytes = std::fs::read(common::bad_guest("test-guest-spin-when-told")).expect("guest");
    // The host's ceilings: 5 s and 10^12 fuel units per call (the guest's
    // loop burns the default 10^9 in well under 100 ms).
    let server = Server::start(
        &common::scratch("guest-failure-limits"),
        &["--time-limit-ms", "5000", "--fuel-base", "1000000000000"],
    );
    let (status, module) = server.upload("spinner", "0.1.0", &bytes);
    assert_eq!(status, 201, "{module}");
    let (status, answer) = server.call("PUT", "/v1/groups/fb", Some(&config(MODULE, false)));
    assert_eq!(status, 201, "{answer}");
    let mut members = [server.join("fb", "a"), server.join("fb", "b")];
    server.converge("fb", &mut members, 4);

    // Bad limits are refused and change nothing.
    let before = server.view("fb");
    for limits in [
        json!({"time_limit_ms": 0}),
        json!({"memory_max_mib": 5000}),
        json!({"fuel": 1}),
    ] {
        let (status, error) = server.call(
            "PUT",
            "/v1/groups/fb/assignor",
            Some(&json!({"module": MODULE, "limits": limits})),
        );
        assert_eq!(status, 400, "{limits}: {error}");
    }
    let (status, error) = server.call(
        "PUT",
        "/v1/groups/fb/assignor",
        Some(&json!({"module": MODULE, "fallback": "nope@1"})),
    );
    assert_eq!(
        (status, &error["error"]["code"]),
        (400, &json!("unknown_assignor")),
        "{error}"
    );
    assert_eq!(server.view("fb")["bindings"], before["bindings"]);

    // Spinning under a fuel cap of 2,000,000 units: out of fuel at once,
    // and `range` answers instead.
    let view = bind_with(
        &server,
        "fb",
        json!({"spin": "yes"}),
        json!({"fuel_max": 2_000_000}),
        "range",
    );
    let binding = view["bindings"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(binding["limits"]["fuel_max"], 2_000_000, "{binding}");
    assert_eq!(binding["fallback"], "range", "{binding}");
    let deadline = Instant::now() + Duration::from_secs(60);
    let view = loop {
        for member in members.iter_mut() {
            *member = server.beat("fb", member).0;
        }
        let view = server.view("fb");
        if view["state"] == "stable" && view["target_epoch"] == view["group_epoch"] {
            break view;
        }
        assert!(
            Instant::now() < deadline,
            "never served by the fallback: {view}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let failures = &view["assignor_failures"];
    assert_eq!(failures["module"], MODULE, "{failures}");
    assert_eq!(failures["code"], "out_of_fuel", "{failures}");
    assert!(
        failures["message"]
            .as_str()
            .unwrap()
            .contains("after 2000000 units"),
        "the binding's cap, not the host's: {failures}"
    );
    assert_eq!(failures["served_by_fallback"], true, "{failures}");
    assert_eq!(failures["fallback"], "range", "{failures}");
    assert!(
        failures["fallback_answers"].as_u64().unwrap() >= 1,
        "{failures}"
    );
    // Range's layout: a (by name first) gets partitions 0-3, b 4-7.
    server.converge("fb", &mut members, 4);
    let partitions = |member: &Value| -> Vec<u64> {
        member["active"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t[1].as_u64().unwrap())
            .collect()
    };
    let mut held: Vec<Vec<u64>> = members.iter().map(partitions).collect();
    held.iter_mut().for_each(|p| p.sort());
    assert_eq!(held, vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]);

    // A time limit of 100 ms, far under the host's 5 s: the spin stops there.
    bind_with(
        &server,
        "fb",
        json!({"spin": "yes"}),
        json!({"time_limit_ms": 100}),
        "range",
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let failures = loop {
        for member in members.iter_mut() {
            *member = server.beat("fb", member).0;
        }
        let view = server.view("fb");
        if view["assignor_failures"]["code"] == "timeout"
            && view["target_epoch"] == view["group_epoch"]
        {
            break view["assignor_failures"].clone();
        }
        assert!(Instant::now() < deadline, "no timeout shown: {view}");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        failures["message"]
            .as_str()
            .unwrap()
            .contains("time limit of 100 ms"),
        "{failures}"
    );
    assert!(
        failures["fallback_answers"].as_u64().unwrap() >= 2,
        "{failures}"
    );

    // A module named as a fallback is in use.
    let (status, error) = server.call("DELETE", &format!("/v1/assignors/{MODULE}"), None);
    assert_eq!(status, 409, "{error}");

    // The failures reach the metrics.
    let metrics = Server::agent()
        .get(format!("{}/metrics", server.base))
        .call()
        .expect("GET /metrics")
        .body_mut()
        .read_to_string()
        .expect("metrics text");
    let failed = metrics
        .lines()
        .find(|l| {
            l.starts_with("assignd_assignor_failures_total{")
                && l.contains(&format!("module=\"{MODULE}\""))
                && l.contains("code=\"out_of_fuel\"")
        })
        .unwrap_or_else(|| panic!("no failure counter for fb: {metrics}"));
    let count: f64 = failed.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(count >= 1.0, "{failed}");
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("assignd_assignor_calls_total{")
                && l.contains("module=\"range\"")),
        "the fallback's calls are counted: {metrics}"
    );
}

/// The rows an answer may hold follow its input: 8 learner rows and 8
/// standby rows per task by default. An answer over it is refused
/// (`output_too_large`, naming both counts) however valid its rows; the
/// group shows the failure and keeps its last good target, and another
/// group is served as fast. At 8 standbys per task the same answer is
/// installed. (Before the cap, any valid answer up to 16 million rows was
/// checked and installed: 16 million took the host 7.7 s and 4.3 GB
/// outside the call's limits.)
#[test]
fn an_answer_over_the_rows_its_input_allows_is_refused_and_another_group_is_served_as_fast() {
    let mut scene = Scene::start("guest-failure-rows");
    let config = json!({
        "topics": [{"name": "orders", "partitions": 200}],
        "assignor": MODULE,
        "expansion_timeout_ms": 50,
        "learners": "off",
    });
    let (status, answer) = scene.server.call("PUT", "/v1/groups/bad", Some(&config));
    assert_eq!(status, 201, "{answer}");
    // Ten members: nine others for each task's standbys, so that every
    // row is valid on its own.
    let mut bad: Vec<Value> = (0..10)
        .map(|m| scene.server.join("bad", &format!("b{m}")))
        .collect();
    scene.server.converge("bad", &mut bad, 20);
    let good_target = scene.server.view("bad")["target_epoch"].clone();

    scene.server.bind("bad", json!({"standbys": "9"}));
    let view = scene.serve_until(&mut bad, |view| total(view) >= 1);
    let failures = &view["assignor_failures"];
    assert_eq!(failures["code"], "output_too_large", "{failures}");
    let message = failures["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("1800 standby rows, more than the limit of 1600"),
        "{failures}"
    );
    assert_eq!(view["target_epoch"], good_target, "target kept: {view}");

    // At the limit, the answer is installed, standbys and all.
    scene.server.bind("bad", json!({"standbys": "8"}));
    let deadline = Instant::now() + Duration::from_secs(60);
    let view = loop {
        for member in bad.iter_mut() {
            *member = scene.server.beat("bad", member).0;
        }
        let view = scene.server.view("bad");
        if view["target_epoch"] != good_target && view["state"] != "assigning" {
            break view;
        }
        assert!(Instant::now() < deadline, "never installed: {view}");
        std::thread::sleep(Duration::from_millis(10));
    };
    let standbys: usize = view["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["target"]["standby"].as_array().map_or(0, Vec::len))
        .sum();
    assert_eq!(standbys, 1600, "{view}");
    scene.assert_good_served_as_fast();
}

/// The other ways a guest goes wrong once live: endless recursion, endless
/// allocation, one `memory.grow` to 4 GiB, a flood of 128 MiB log lines, an
/// invalid answer. Each fails visibly with its own code, the group keeps
/// its last good target, and another group is served as fast.
/// (host/benches/hostile_guests.sh measures what the same guests cost the
/// host: its memory, a bystander's heartbeats.)
#[test]
fn recursing_hogging_growing_flooding_and_invalid_guests_fail_visibly_and_another_group_is_served_as_fast()
 {
    let mut scene = Scene::start("guest-failure-hostile");
    let (mut bad, good_target) = scene.healthy_bad_group();

    // A binding's memory cap of 16 MiB: the allocation reaches it at once
    // (the host's 512 MiB would take longer than the 200 ms time limit).
    let small = json!({"memory_max_mib": 16});
    for (params, limits, code, needle) in [
        (json!({"recurse": "yes"}), None, "stack_overflow", "stack"),
        (
            json!({"hog": "yes"}),
            Some(&small),
            "memory_limit",
            "past its limit of 16777216 bytes",
        ),
        (
            json!({"grow": "yes"}),
            Some(&small),
            "memory_limit",
            "grow its memory to 4294967296 bytes",
        ),
        (
            json!({"log_flood": "yes"}),
            None,
            "timeout",
            "time limit of 200 ms",
        ),
        (
            json!({"invalid": "yes"}),
            None,
            "invalid_assignment",
            "member index 2",
        ),
    ] {
        let before = total(&scene.server.view("bad"));
        let mut binding = json!({"module": MODULE, "params": params});
        if let Some(limits) = limits {
            binding["limits"] = limits.clone();
        }
        let (status, view) = scene
            .server
            .call("PUT", "/v1/groups/bad/assignor", Some(&binding));
        assert_eq!(status, 200, "{view}");
        let view = scene.serve_until(&mut bad, |view| {
            total(view) > before && view["assignor_failures"]["code"] == code
        });
        let failures = &view["assignor_failures"];
        assert_eq!(failures["module"], MODULE, "{failures}");
        let message = failures["message"].as_str().unwrap_or_default();
        assert!(message.contains(needle), "{params}: {failures}");
        assert_eq!(view["target_epoch"], good_target, "target kept: {view}");
    }
    scene.assert_good_served_as_fast();
}

/// Assignor calls run on threads of their own, 19 nice values below the
/// host's (the lowest a thread gets), while the threads that answer
/// heartbeats keep the host's priority: 16 groups' guests spinning at once
/// on 2 cores get only the CPU the host leaves (docs/benchmarks.md,
/// "Hostile guests", `spin16`).
#[test]
fn guest_calls_run_on_threads_below_the_hosts_priority() {
    let scene = Scene::start("guest-nice");
    // Both groups' assignors have answered: a built-in and the guest.
    let _ = scene.healthy_bad_group();
    let threads = threads_of(scene.server.child.id());
    let nice_of = |name: &str| -> Vec<i64> {
        threads
            .iter()
            .filter(|(thread, _)| thread == name)
            .map(|&(_, nice)| nice)
            .collect()
    };
    let (workers, guests) = (nice_of("assignd-worker"), nice_of("assignd-guest"));
    assert!(!workers.is_empty() && !guests.is_empty(), "{threads:?}");
    let host = workers[0];
    assert!(workers.iter().all(|&nice| nice == host), "{threads:?}");
    assert!(
        guests.iter().all(|&nice| nice == (host + 19).min(19)),
        "every guest thread 19 below the host's {host}: {threads:?}"
    );
}

/// The name and nice value of each thread of process `pid` (none once it
/// has ended).
fn threads_of(pid: u32) -> Vec<(String, i64)> {
    cpu_of_threads(pid)
        .into_values()
        .map(|(name, nice, _)| (name, nice))
        .collect()
}

/// Field `number` of the `stat` file in `dir` (a process's or a thread's
/// folder in /proc), counted as proc(5) does: the state is field 3, the
/// parent 4, the nice value 19.
fn stat_field(dir: &std::path::Path, number: usize) -> Option<i64> {
    let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
    // After the name in brackets, which may hold spaces.
    let (_, fields) = stat.rsplit_once(')')?;
    fields.split_whitespace().nth(number - 3)?.parse().ok()
}

/// The rest of the host's work on a guest's behalf runs below its priority
/// too. An upload's compiler process (every thread of it) runs 19 nice
/// values below the host: a crafted upload keeps a core busy for its whole
/// compile time limit (two at once, both cores here). And the module's own
/// code as it loads runs on the guest threads: the CPU a start function
/// that loops burns in the instance made for `info()` (to its limits, about
/// half a second) is charged to a thread at nice 19, not to one of the
/// host's. (The self-test and a bind's params check go the same way,
/// `GuestThreads::run_blocking`.)
#[cfg(target_os = "linux")]
#[test]
fn an_uploads_compile_and_checks_run_below_the_hosts_priority() {
    let data_dir = common::scratch("upload-nice");
    let server = Server::start(
        &data_dir,
        &[
            "--compile-time-base-ms",
            "3000",
            "--compile-time-per-mib-ms",
            "0",
        ],
    );
    let pid = server.child.id();
    let guest_nice = (host_nice(pid) + 19).min(19);

    // The compile: the child is looked at while it runs (until the
    // upload's answer, which comes at its 3 s limit).
    let compiler_seen_niced = std::thread::scope(|scope| {
        let upload =
            scope.spawn(|| server.upload("slow", "1", &common::slow_to_compile_component()));
        let mut seen = false;
        while !upload.is_finished() {
            seen |= children_of(pid).into_iter().any(|child| {
                let threads = threads_of(child);
                !threads.is_empty() && threads.iter().all(|&(_, nice)| nice == guest_nice)
            });
            std::thread::sleep(Duration::from_millis(20));
        }
        let (status, error) = upload.join().expect("the upload");
        assert_eq!(status, 400, "{error}");
        assert_eq!(error["error"]["code"], "compile_timeout", "{error}");
        seen
    });
    assert!(
        compiler_seen_niced,
        "the compiler process was never seen with every thread at nice {guest_nice}"
    );

    // The module's own code. The built-ins are loaded first (listing them
    // waits for it), so that their compiles are not counted.
    let (status, list) = server.call("GET", "/v1/assignors", None);
    assert_eq!(status, 200, "{list}");
    let before = cpu_of_threads(pid);
    let (status, error) = server.upload("looping", "1", &common::start_loop_component());
    assert_eq!(status, 400, "{error}");
    assert_eq!(error["error"]["code"], "instantiate_failed", "{error}");
    let after = cpu_of_threads(pid);
    // Each thread that used the CPU meanwhile: its name, nice, ticks.
    let busy: Vec<(&str, i64, u64)> = after
        .iter()
        .map(|(tid, (name, nice, ticks))| {
            let earlier = before.get(tid).map_or(0, |(_, _, ticks)| *ticks);
            (name.as_str(), *nice, ticks - earlier)
        })
        .filter(|&(_, _, ticks)| ticks > 0)
        .collect();
    let spent = |on_guest_threads: bool| -> u64 {
        busy.iter()
            .filter(|(name, _, _)| (*name == "assignd-guest") == on_guest_threads)
            .map(|&(_, _, ticks)| ticks)
            .sum()
    };
    let (guests, host) = (spent(true), spent(false));
    eprintln!("CPU ticks of the looping upload: {guests} on guest threads, {host} on the host's");
    assert!(
        guests >= 10 && guests > 4 * host,
        "the upload's CPU, by thread (name, nice, ticks): {busy:?}"
    );
    assert!(
        after
            .values()
            .filter(|(name, _, _)| name == "assignd-guest")
            .all(|&(_, nice, _)| nice == guest_nice),
        "{after:?}"
    );
}

/// Each thread of process `pid`, by id: its name, nice value, and the CPU
/// it has used (user and system, in clock ticks).
fn cpu_of_threads(pid: u32) -> std::collections::BTreeMap<u32, (String, i64, u64)> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Default::default();
    };
    tasks
        .filter_map(|task| {
            let task = task.ok()?;
            let tid = task.file_name().to_str()?.parse().ok()?;
            let dir = task.path();
            let name = std::fs::read_to_string(dir.join("comm")).ok()?;
            let ticks = stat_field(&dir, 14)? + stat_field(&dir, 15)?;
            Some((
                tid,
                (name.trim().to_owned(), stat_field(&dir, 19)?, ticks as u64),
            ))
        })
        .collect()
}

/// The nice value of process `pid`'s main thread.
fn host_nice(pid: u32) -> i64 {
    stat_field(std::path::Path::new(&format!("/proc/{pid}")), 19).expect("the host's nice value")
}

/// The processes whose parent is `pid`.
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(processes) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    processes
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let child: u32 = entry.file_name().to_str()?.parse().ok()?;
            (stat_field(&entry.path(), 4)? == i64::from(pid)).then_some(child)
        })
        .collect()
}
