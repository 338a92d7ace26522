//! Load-aware assignment against the real binary: `assignd loadgen`'s
//! simulated members report Zipf-skewed task loads through the client, the
//! host's load trigger asks the sticky assignor for a load rebalance, and
//! the group reaches its band with a bounded number of rebalances and
//! moves, then stays there while the loads stay put. Read from the group
//! view (its imbalance and its last rebalance), polled with deadlines, and
//! from the loadgen's own report.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{ADMIN_TOKEN, Server, scratch};

const GROUP: &str = "lb-0";
const MEMBERS: u32 = 6;
const TASKS: u32 = 60;
/// The default band, `load_band` unset.
const BAND: f64 = 0.1;
const WINDOW_MS: u64 = 1_000;
const COOLDOWN_MS: u64 = 2_000;
/// The loadgen's whole measurement: converging and then staying.
const DURATION_S: u64 = 25;
/// How long the group may take to reach its band.
const CONVERGE_S: u64 = 40;
/// How long it must then stay without another load rebalance: several
/// windows and cooldowns.
const STAY: Duration = Duration::from_millis(4 * (WINDOW_MS + COOLDOWN_MS));
/// The most load rebalances to reach the band (one should do: the sticky
/// balancer moves into the band in one answer).
const LOAD_REBALANCES_MAX: u64 = 2;
/// The most tasks moved: far fewer than a reshuffle of all 60.
const TASKS_MOVED_MAX: u64 = 30;

/// The loadgen child, killed if the test fails before it ends, and the
/// files its output goes to.
struct Loadgen {
    child: Child,
    out: PathBuf,
    err: PathBuf,
}

impl Drop for Loadgen {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Loadgen {
    /// Its stdout and stderr so far.
    fn output(&self) -> String {
        let read = |path: &PathBuf| std::fs::read_to_string(path).unwrap_or_default();
        format!("{}\n{}", read(&self.out), read(&self.err))
    }

    /// Waits for it to end, by `within`; whether it succeeded.
    fn wait_by(&mut self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status.success();
            }
            assert!(Instant::now() < deadline, "loadgen did not end in time");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn start_loadgen(server: &Server, dir: &Path) -> Loadgen {
    let members = MEMBERS.to_string();
    let tasks = TASKS.to_string();
    let window = WINDOW_MS.to_string();
    let cooldown = COOLDOWN_MS.to_string();
    let duration = DURATION_S.to_string();
    let report = dir.join("report.json");
    let (out, err) = (dir.join("stdout.txt"), dir.join("stderr.txt"));
    let file = |path: &PathBuf| std::fs::File::create(path).expect("an output file");
    let child = Command::new(env!("CARGO_BIN_EXE_assignd"))
        .args(["loadgen", "--host", &server.base, "--token", ADMIN_TOKEN])
        .args(["--prefix", "lb", "--groups", "1", "--members", &members])
        .args(["--tasks", &tasks, "--interval-ms", "200"])
        .args(["--expansion-timeout-ms", "300", "--assignor", "sticky"])
        .args(["--changelog-len", "1000", "--replay-rate", "50000"])
        .args(["--task-load", "zipf:0.7", "--load-unit", "records/s"])
        .args(["--load-window-ms", &window, "--load-cooldown-ms", &cooldown])
        .args(["--load-half-life-ms", "0", "--load-sample-ms", "200"])
        .args([
            "--duration",
            &duration,
            "--report",
            report.to_str().unwrap(),
        ])
        .stdin(Stdio::null())
        .stdout(file(&out))
        .stderr(file(&err))
        .spawn()
        .expect("cannot start assignd loadgen");
    Loadgen { child, out, err }
}

/// The host's imbalance of a group view (the largest member's load over
/// its share), when its loads are complete and every member is inside the
/// band; None otherwise.
fn in_band_imbalance(view: &serde_json::Value) -> Option<f64> {
    let loads = &view["loads"];
    if loads["complete"] != true {
        return None;
    }
    let members = view["members"].as_array()?;
    let inside = members.iter().all(|m| {
        m["load"]["ratio"]
            .as_f64()
            .is_some_and(|r| (1.0 - BAND..=1.0 + BAND).contains(&r))
    });
    inside.then(|| loads["imbalance"].as_f64()).flatten()
}

/// The epoch and reason of the last target the host installed.
fn last_rebalance(view: &serde_json::Value) -> (u64, String) {
    let last = &view["last_rebalance"];
    (
        last["epoch"].as_u64().unwrap_or(0),
        last["reason"].as_str().unwrap_or("").to_owned(),
    )
}

/// Whether the group holds every task on a stable target, nothing
/// warming or moving.
fn settled(view: &serde_json::Value) -> bool {
    let members = view["members"].as_array().map_or(&[][..], Vec::as_slice);
    let active: usize = members
        .iter()
        .map(|m| m["active"].as_array().map_or(0, Vec::len))
        .sum();
    view["state"] == "stable"
        && view["group_epoch"] == view["target_epoch"]
        && view["learner_count"] == 0
        && members.len() == MEMBERS as usize
        && members
            .iter()
            .all(|m| m["revoking"].as_array().is_none_or(Vec::is_empty))
        && active == TASKS as usize
}

fn view(server: &Server) -> serde_json::Value {
    let (status, view) = server.call("GET", &format!("/v1/groups/{GROUP}"), None);
    if status == 404 {
        return serde_json::Value::Null;
    }
    assert_eq!(status, 200, "{view}");
    view
}

/// Polls the view until the group is settled inside its band after a load
/// rebalance; that view.
fn converged(server: &Server, loadgen: &mut Loadgen) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(CONVERGE_S);
    loop {
        let view = view(server);
        // A load rebalance's moves to cold members finish with the
        // learners' promotion (a target of reason caught_up).
        let load_rebalanced = view["load_trigger"]["last_load_rebalance_ms"].is_u64();
        if settled(&view) && load_rebalanced && in_band_imbalance(&view).is_some() {
            return view;
        }
        if let Some(status) = loadgen.child.try_wait().expect("wait") {
            panic!(
                "loadgen ended ({status}) before the group converged: {view:#}\n{}",
                loadgen.output()
            );
        }
        assert!(
            Instant::now() < deadline,
            "the group did not settle inside its band after a load rebalance within {CONVERGE_S} s: {view:#}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn skewed_loads_converge_inside_the_band_and_stay_there() {
    let dir = scratch("load-balance");
    let server = Server::start(&dir.join("data"), &["--fsync", "never"]);
    let mut loadgen = start_loadgen(&server, &dir);

    let view_in_band = converged(&server, &mut loadgen);
    let (epoch, _) = last_rebalance(&view_in_band);
    // The loads stay put: no target follows, and the group stays inside.
    let stay_until = Instant::now() + STAY;
    while Instant::now() < stay_until {
        let view = view(&server);
        assert_eq!(
            last_rebalance(&view).0,
            epoch,
            "a rebalance after the band was reached: {view:#}"
        );
        assert!(
            in_band_imbalance(&view).is_some(),
            "the group left its band: {view:#}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    assert!(
        loadgen.wait_by(Duration::from_secs(DURATION_S + 60)),
        "loadgen failed: {}",
        loadgen.output()
    );
    let text = std::fs::read_to_string(dir.join("report.json")).expect("the report was written");
    let report: serde_json::Value = serde_json::from_str(&text).expect("the report is JSON");
    let load = &report["load"];
    assert_eq!(report["double_ownership"], 0, "{report:#}");
    assert_eq!(load["reported"], true, "{load:#}");
    // The first assignment balanced counts (no loads known yet): outside.
    assert!(
        load["max_over_mean"]["first"].as_f64().unwrap() > 1.0 + BAND,
        "{load:#}"
    );
    assert!(
        load["max_over_mean"]["last"].as_f64().unwrap() <= 1.0 + BAND,
        "{load:#}"
    );
    let load_rebalances = load["load_rebalances"].as_u64().unwrap();
    assert!(
        (1..=LOAD_REBALANCES_MAX).contains(&load_rebalances),
        "{load:#}"
    );
    let moved = load["tasks_moved"].as_u64().unwrap();
    assert!((1..=TASKS_MOVED_MAX).contains(&moved), "{load:#}");
    assert!(
        load["outside_band_s"].as_f64().unwrap() < DURATION_S as f64,
        "{load:#}"
    );
}
