//! The router against the real binary (`ASSIGND_BIN`, else the
//! workspace's `target/debug/assignd`; skipped, saying so, when neither
//! exists): members of this client publish their endpoints, a router with
//! the group's reader token finds them by key and follows a second member's
//! join; the admin token reads the table too, a wrong token is refused; a
//! quiet watch's answer says how long it waited, and the bound counts it.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use assignd_client::{
    ClientError, Event, Member, MemberConfig, MemberHandle, NoLags, RouteTable, Router,
    RouterConfig, RouterError,
};
use tokio::sync::watch;

/// How long any wait may take before the test fails (a rebalance waits
/// out revocations and the routing promise).
const DEADLINE: Duration = Duration::from_secs(60);
const ADMIN_TOKEN: &str = "smoke-admin-token-0123456789";
const READER_TOKEN: &str = "smoke-reader-token-0123456789";
const PARTITIONS: u32 = 8;

fn binary() -> Option<PathBuf> {
    if let Some(bin) = std::env::var_os("ASSIGND_BIN").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(bin));
    }
    let built = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/debug/assignd");
    built.exists().then_some(built)
}

/// `assignd serve` on a free port, with its own data directory; killed
/// and removed on drop.
struct Host {
    url: String,
    child: Child,
    data_dir: PathBuf,
}

impl Host {
    fn start(bin: &PathBuf) -> Host {
        let data_dir = std::env::temp_dir().join(format!(
            "assignd-router-smoke-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        let mut child = Command::new(bin)
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(&data_dir)
            .env("ASSIGND_ADMIN_TOKEN", ADMIN_TOKEN)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
        let mut line = String::new();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        stdout.read_line(&mut line).unwrap();
        let url = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("assignd serve said {line:?}"))
            .to_owned();
        // Drained so that the server never blocks on a full pipe.
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        Host {
            url,
            child,
            data_dir,
        }
    }

    async fn create_group(&self) {
        let config = serde_json::json!({
            "topics": [{"name": "orders", "partitions": PARTITIONS}],
            "heartbeat_interval_ms": 200,
            "expansion_timeout_ms": 500,
            // Stateless members: tasks move as soon as they are released.
            "learners": "off",
            "reader_token": READER_TOKEN,
        });
        let answer = reqwest::Client::new()
            .put(format!("{}/v1/groups/orders", self.url))
            .bearer_auth(ADMIN_TOKEN)
            .json(&config)
            .send()
            .await
            .unwrap();
        let status = answer.status();
        assert!(
            status.is_success(),
            "{status}: {}",
            answer.text().await.unwrap()
        );
    }

    fn router(&self, token: &str) -> Router {
        let config = RouterConfig::new(&self.url, "orders")
            .with_token(token)
            .with_wait_ms(2_000);
        Router::start(config).unwrap()
    }

    /// A member serving at `endpoint` that stops what it is told to stop
    /// at once.
    fn member(&self, endpoint: &str, zone: &str) -> MemberHandle {
        let config = MemberConfig::new(&self.url, "orders", ["orders"])
            .with_endpoint(endpoint)
            .with_metadata("zone", zone);
        let (member, mut events) = Member::start(config, NoLags).unwrap();
        tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                if let Event::Revoked { ack, .. } = event {
                    ack.ack();
                }
            }
        });
        member
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.data_dir);
    }
}

type Changes = watch::Receiver<Option<Arc<RouteTable>>>;

/// Waits, table by table, until `done` holds for the router's newest.
async fn until(changes: &mut Changes, what: &str, done: impl Fn(&RouteTable) -> bool) {
    let reached = tokio::time::timeout(DEADLINE, async {
        loop {
            if changes.borrow_and_update().as_deref().is_some_and(&done) {
                return;
            }
            changes.changed().await.unwrap();
        }
    })
    .await;
    assert!(reached.is_ok(), "timed out waiting until {what}");
}

/// Every partition's owner's endpoint, in order (`None`: nobody).
fn endpoints(table: &RouteTable) -> Vec<Option<String>> {
    (0..PARTITIONS)
        .map(|p| {
            let route = table.owner_of_partition("orders", p).unwrap();
            route.owner.and_then(|owner| owner.endpoint.clone())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_router_finds_each_members_endpoint_and_follows_a_join() {
    let Some(bin) = binary() else {
        eprintln!("no assignd binary (ASSIGND_BIN, target/debug/assignd): smoke test skipped");
        return;
    };
    let host = Host::start(&bin);
    host.create_group().await;
    let first = host.member("http://127.0.0.1:9001", "a");
    let router = host.router(READER_TOKEN);
    router.ready(DEADLINE).await.unwrap();
    let mut changes = router.changes();
    let one = Some("http://127.0.0.1:9001".to_owned());
    until(&mut changes, "the first member owns every partition", |t| {
        endpoints(t).iter().all(|e| *e == one)
    })
    .await;
    let route = router.owner_of("orders", "customer-42").unwrap();
    let owner = route.owner.clone().unwrap();
    assert_eq!(owner.endpoint, one);
    assert_eq!(owner.metadata.get("zone").map(String::as_str), Some("a"));
    assert_eq!(Some(owner.member_id.clone()), first.member_id());

    let second = host.member("http://127.0.0.1:9002", "b");
    let before = router.epoch().unwrap();
    until(&mut changes, "a new table", |t| t.epoch() > before).await;
    let two = Some("http://127.0.0.1:9002".to_owned());
    until(&mut changes, "both members own partitions", |t| {
        let owners = endpoints(t);
        owners.iter().all(|e| *e == one || *e == two)
            && owners.contains(&one)
            && owners.contains(&two)
    })
    .await;

    // A member that moves publishes its new endpoint.
    let three = Some("http://127.0.0.1:9003".to_owned());
    second
        .set_endpoint(three.clone(), [("zone".to_owned(), "c".to_owned())].into())
        .unwrap();
    until(&mut changes, "the moved member's endpoint", |t| {
        endpoints(t).contains(&three) && !endpoints(t).contains(&two)
    })
    .await;

    let admin = host.router(ADMIN_TOKEN);
    admin.ready(DEADLINE).await.unwrap();
    assert!(admin.owner_of("orders", "customer-42").is_ok());
    let refused = host.router("not-a-token-of-this-group");
    match refused.ready(DEADLINE).await {
        Err(RouterError::Refused(ClientError::Api { status: 403, .. })) => {}
        other => panic!("a wrong token: {other:?}"),
    }
    a_quiet_watch_renews_the_bound_from_the_hosts_read(&router).await;
    second.leave().await.unwrap();
    first.leave().await.unwrap();
}

/// In a quiet group a watch runs out (after half the host's default
/// `valid_ms`) and its answer says how long it waited: the table's bound
/// counts from the send time plus that wait.
async fn a_quiet_watch_renews_the_bound_from_the_hosts_read(router: &Router) {
    let renewed = tokio::time::timeout(DEADLINE, async {
        loop {
            let table = router.table().unwrap();
            if !table.waited().is_zero() {
                return table;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("no watch answer said how long it waited");
    assert_eq!(renewed.body().valid_ms, 2_000, "the host's default");
    assert_eq!(
        renewed.fresh_until() - renewed.sent_at(),
        renewed.waited() + Duration::from_millis(2_000)
    );
}
