//! [`LocalEtcd`]: an etcd cluster of a few members on loopback, in a
//! temporary folder, on free ports, for the tests of cluster mode. Each
//! member can be killed and started again, to take the quorum away and
//! give it back.

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use super::etcd::{Etcd, EtcdConfig};

/// How long a started cluster may take to answer.
const HEALTHY_WITHIN: Duration = Duration::from_secs(30);

/// The etcd binary: `$ASSIGND_ETCD`, else `etcd` on the PATH.
pub fn etcd_binary() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("ASSIGND_ETCD") {
        return Ok(PathBuf::from(path));
    }
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join("etcd"))
        .find(|path| path.is_file());
    found.context(
        "the cluster tests need etcd 3.4 or later: install Debian's etcd-server \
         (`apt-get install etcd-server`) or set ASSIGND_ETCD to an etcd binary",
    )
}

struct Member {
    name: String,
    client_port: u16,
    peer_port: u16,
    child: Option<Child>,
}

/// A running etcd cluster on loopback; dropping it stops every member and
/// removes its folder.
pub struct LocalEtcd {
    binary: PathBuf,
    dir: PathBuf,
    members: Vec<Member>,
}

/// The ports [`free_port`] handed out in this process, never twice: a
/// member killed and started again binds its port again, and a cluster
/// started meanwhile must not have been given it.
static HANDED_OUT: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

/// The lowest port [`free_port`] looks at.
const PORT_FLOOR: u16 = 10_000;

/// A port free now, not handed out before in this process, and below the
/// kernel's range of ephemeral ports where there is room: a connection's
/// own port comes from that range, and one of the many the members and
/// nodes open could take a killed member's port before it is started
/// again (a member that cannot bind its port never joins its cluster).
fn free_port() -> anyhow::Result<u16> {
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32_768);
    if let Some(span) = ephemeral_low.checked_sub(PORT_FLOOR).filter(|&s| s > 0) {
        // Processes start at different places, so that two at once rarely
        // try the same ports.
        let start = (std::process::id() as u64 * 7_919 % u64::from(span)) as u16;
        for step in 0..span {
            let port = PORT_FLOOR + (start + step) % span;
            if !handed_out.contains(&port) && TcpListener::bind(("127.0.0.1", port)).is_ok() {
                handed_out.insert(port);
                return Ok(port);
            }
        }
    }
    loop {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        if handed_out.insert(port) {
            return Ok(port);
        }
    }
}

impl LocalEtcd {
    /// Starts `size` members in a new folder under `parent` and waits
    /// until the cluster answers.
    pub async fn start(parent: &Path, size: usize) -> anyhow::Result<Self> {
        let binary = etcd_binary()?;
        let dir = parent.join(format!("etcd-{}-{}", std::process::id(), free_port()?));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let mut members = Vec::with_capacity(size);
        for i in 0..size {
            members.push(Member {
                name: format!("m{i}"),
                client_port: free_port()?,
                peer_port: free_port()?,
                child: None,
            });
        }
        let mut cluster = LocalEtcd {
            binary,
            dir,
            members,
        };
        for i in 0..size {
            cluster.spawn(i, "new")?;
        }
        if let Err(error) = cluster.wait_healthy().await {
            bail!("{error:#}; {}", cluster.members_report());
        }
        Ok(cluster)
    }

    /// Each member's ports, whether it still runs, and the last lines of
    /// its log: what a cluster that never answered leaves to go on, since
    /// its folder goes with it.
    fn members_report(&mut self) -> String {
        let dir = self.dir.clone();
        self.members
            .iter_mut()
            .map(|member| {
                let state = match member.child.as_mut().map(Child::try_wait) {
                    None => "not started".to_owned(),
                    Some(Ok(None)) => "running".to_owned(),
                    Some(Ok(Some(status))) => format!("exited ({status})"),
                    Some(Err(e)) => format!("unknown ({e})"),
                };
                let log = std::fs::read_to_string(dir.join(format!("{}.log", member.name)))
                    .unwrap_or_default();
                let lines: Vec<&str> = log.lines().collect();
                let tail = lines[lines.len().saturating_sub(5)..].join(" | ");
                format!(
                    "{} (client port {}, peer port {}): {state}; its log ends: {tail}",
                    member.name, member.client_port, member.peer_port
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    fn initial_cluster(&self) -> String {
        self.members
            .iter()
            .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer_port))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn spawn(&mut self, i: usize, state: &str) -> anyhow::Result<()> {
        let initial_cluster = self.initial_cluster();
        let member = &self.members[i];
        let data = self.dir.join(&member.name);
        let log = std::fs::File::create(self.dir.join(format!("{}.log", member.name)))?;
        let client = format!("http://127.0.0.1:{}", member.client_port);
        let peer = format!("http://127.0.0.1:{}", member.peer_port);
        let child = Command::new(&self.binary)
            .arg("--name")
            .arg(&member.name)
            .arg("--data-dir")
            .arg(&data)
            .args(["--listen-client-urls", &client])
            .args(["--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &initial_cluster])
            .args(["--initial-cluster-state", state])
            .args(["--initial-cluster-token", "assignd-test"])
            // Quick elections, so that a test losing the leader waits
            // little.
            .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", self.binary.display()))?;
        self.members[i].child = Some(child);
        Ok(())
    }

    /// Client URLs of every member.
    pub fn endpoints(&self) -> Vec<String> {
        self.members
            .iter()
            .map(|m| format!("http://127.0.0.1:{}", m.client_port))
            .collect()
    }

    /// A client config for this cluster with `prefix`.
    pub fn config(&self, prefix: &str) -> EtcdConfig {
        EtcdConfig::new(self.endpoints(), prefix)
    }

    /// Kills member `i` (SIGKILL).
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.members[i].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts member `i` again on its data.
    pub fn restart(&mut self, i: usize) -> anyhow::Result<()> {
        self.kill(i);
        self.spawn(i, "existing")
    }

    /// Waits until a write through every endpoint succeeds.
    pub async fn wait_healthy(&self) -> anyhow::Result<()> {
        let deadline = Instant::now() + HEALTHY_WITHIN;
        let mut config = self.config("/health/");
        config.request_timeout = Duration::from_secs(1);
        loop {
            let tried = async {
                let etcd = Etcd::connect(config.clone()).await?;
                etcd.grant_lease(Duration::from_secs(1)).await
            };
            match tried.await {
                Ok(_) => return Ok(()),
                Err(e) if Instant::now() > deadline => {
                    bail!(
                        "etcd in {} did not answer within {HEALTHY_WITHIN:?}: {e}",
                        self.dir.display()
                    )
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }
}

impl Drop for LocalEtcd {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
