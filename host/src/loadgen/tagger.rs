//! The tagger of `assignd loadgen watchers`: one member of the watched
//! group, spoken to over the wire by hand, whose only job is to change
//! the routing table at an instant the run knows: a heartbeat that
//! carries new metadata (docs/routing.md, "Members' endpoints"). It
//! subscribes to a topic the group does not have, so it holds no task and
//! its heartbeats between changes change nothing. It owns its member id
//! and epoch and the loop that keeps its session.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::json;
use tokio::sync::Mutex;
use tokio::task::JoinHandle;

/// The topic the tagger subscribes to: not one of the group's.
const TAGGER_TOPIC: &str = "tagger-holds-nothing";

/// What the tagger reads of a heartbeat's answer.
#[derive(Deserialize)]
struct Answer {
    member_id: String,
    member_epoch: u64,
    heartbeat_interval_ms: u64,
}

/// The tagger's member id and epoch, as its last answer gave them.
struct Membership {
    member_id: String,
    member_epoch: u64,
}

/// A running tagger.
pub(super) struct Tagger {
    client: reqwest::Client,
    url: String,
    membership: Arc<Mutex<Membership>>,
    beats: JoinHandle<()>,
}

/// When a change's heartbeat was sent and when its answer came.
pub(super) struct Change {
    pub sent: Instant,
    pub answered: Instant,
}

impl Tagger {
    /// Joins group `group` of `host` and keeps beating at the group's
    /// interval.
    pub async fn join(host: &str, group: &str) -> Result<Self, String> {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| format!("HTTP client: {e}"))?;
        let url = format!("{host}/v1/groups/{group}/heartbeat");
        let body = json!({
            "member_id": "", "member_epoch": 0, "topics": [TAGGER_TOPIC],
            "owned": [], "task_ranges": true,
            "endpoint": "http://127.0.0.1:9/tagger", "metadata": {"change": "0"},
        });
        let answer = beat(&client, &url, &body).await?;
        let interval = Duration::from_millis(answer.heartbeat_interval_ms.max(1));
        let membership = Arc::new(Mutex::new(Membership {
            member_id: answer.member_id,
            member_epoch: answer.member_epoch,
        }));
        let beats = tokio::spawn(keep_beating(
            client.clone(),
            url.clone(),
            membership.clone(),
            interval,
        ));
        Ok(Tagger {
            client,
            url,
            membership,
            beats,
        })
    }

    /// Changes the routing table: a heartbeat with metadata `change = n`.
    pub async fn change(&self, n: u32) -> Result<Change, String> {
        let mut membership = self.membership.lock().await;
        let body = json!({
            "member_id": membership.member_id, "member_epoch": membership.member_epoch,
            "owned": [], "task_ranges": true, "metadata": {"change": n.to_string()},
        });
        let sent = Instant::now();
        let answer = beat(&self.client, &self.url, &body).await?;
        let answered = Instant::now();
        membership.member_epoch = answer.member_epoch;
        Ok(Change { sent, answered })
    }

    /// Leaves the group.
    pub async fn leave(self) {
        self.beats.abort();
        let membership = self.membership.lock().await;
        let body = json!({"member_id": membership.member_id, "member_epoch": -1});
        let _ = beat(&self.client, &self.url, &body).await;
    }
}

/// A steady heartbeat every `interval` (it carries no metadata: nothing
/// changes).
async fn keep_beating(
    client: reqwest::Client,
    url: String,
    membership: Arc<Mutex<Membership>>,
    interval: Duration,
) {
    loop {
        tokio::time::sleep(interval).await;
        let mut membership = membership.lock().await;
        let body = json!({
            "member_id": membership.member_id, "member_epoch": membership.member_epoch,
            "owned": [], "task_ranges": true,
        });
        match beat(&client, &url, &body).await {
            Ok(answer) => membership.member_epoch = answer.member_epoch,
            Err(e) => tracing::warn!("the tagger's heartbeat failed: {e}"),
        }
    }
}

async fn beat(
    client: &reqwest::Client,
    url: &str,
    body: &serde_json::Value,
) -> Result<Answer, String> {
    let answer = client
        .post(url)
        .json(body)
        .send()
        .await
        .map_err(|e| format!("POST {url}: {e}"))?;
    let status = answer.status();
    if !status.is_success() {
        let text = answer.text().await.unwrap_or_default();
        return Err(format!("POST {url}: {status}: {text}"));
    }
    answer
        .json()
        .await
        .map_err(|e| format!("POST {url}: unreadable answer: {e}"))
}
