//! The probe: reads groups over a running host's admin API, creates
//! them (and binds their shadows), and tells when a group became stable and settled after a churn
//! event. It knows nothing of the members or of how the figures are
//! printed.

use std::time::{Duration, Instant};

use crate::api::wire::{GroupState, GroupView};

/// How often a settling group is probed.
const PROBE_INTERVAL: Duration = Duration::from_millis(100);

/// Reads groups over the admin API.
#[derive(Clone)]
pub struct Admin {
    pub client: reqwest::Client,
    pub host: String,
    pub token: Option<String>,
}

/// Where a group is, as the host shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settling {
    /// The host says stable at the current epoch with the expected members.
    pub stable: bool,
    /// Stable, no learner warming, no member draining, every task active
    /// on exactly one member: nothing is left to move.
    pub settled: bool,
}

impl Admin {
    pub fn new(host: &str, token: Option<String>) -> Result<Self, String> {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .pool_max_idle_per_host(4096)
            .pool_idle_timeout(assignd_client::CONNECTION_IDLE_MAX)
            .build()
            .map_err(|e| format!("HTTP client: {e}"))?;
        Ok(Admin {
            client,
            host: host.trim_end_matches('/').to_owned(),
            token,
        })
    }

    fn authorized(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    /// `PUT /v1/groups/{name}` with `config`.
    pub async fn create_group(&self, name: &str, config: &serde_json::Value) -> Result<(), String> {
        let url = format!("{}/v1/groups/{name}", self.host);
        let answer = self
            .authorized(self.client.put(&url).json(config))
            .send()
            .await
            .map_err(|e| format!("PUT {url}: {e}"))?;
        check(answer, "PUT", &url).await.map(drop)
    }

    /// `PUT /v1/groups/{name}/shadow` with `body`.
    pub async fn bind_shadow(&self, name: &str, body: &serde_json::Value) -> Result<(), String> {
        let url = format!("{}/v1/groups/{name}/shadow", self.host);
        let answer = self
            .authorized(self.client.put(&url).json(body))
            .send()
            .await
            .map_err(|e| format!("PUT {url}: {e}"))?;
        check(answer, "PUT", &url).await.map(drop)
    }

    /// `GET /v1/groups/{name}`.
    pub async fn group(&self, name: &str) -> Result<GroupView, String> {
        self.group_as(name).await
    }

    /// `GET /v1/groups/{name}` as JSON, for fields the typed view may not
    /// name.
    pub async fn group_json(&self, name: &str) -> Result<serde_json::Value, String> {
        self.group_as(name).await
    }

    /// `GET /v1/groups/{name}`, read as `T`.
    async fn group_as<T: serde::de::DeserializeOwned>(&self, name: &str) -> Result<T, String> {
        let url = format!("{}/v1/groups/{name}", self.host);
        let answer = self
            .authorized(self.client.get(&url))
            .send()
            .await
            .map_err(|e| format!("GET {url}: {e}"))?;
        let answer = check(answer, "GET", &url).await?;
        answer
            .json()
            .await
            .map_err(|e| format!("GET {url}: unreadable answer: {e}"))
    }
}

async fn check(
    answer: reqwest::Response,
    method: &str,
    url: &str,
) -> Result<reqwest::Response, String> {
    let status = answer.status();
    if status.is_success() {
        return Ok(answer);
    }
    let body = answer.text().await.unwrap_or_default();
    let hint = if matches!(status.as_u16(), 401 | 403) {
        " (pass the host's admin token with --token or ASSIGND_TOKEN)"
    } else {
        ""
    };
    Err(format!("{method} {url}: {status}: {body}{hint}"))
}

/// Whether `view` is stable and settled with `members` members and
/// `tasks` tasks.
pub fn settling(view: &GroupView, members: usize, tasks: u64) -> Settling {
    let stable = view.state == GroupState::Stable
        && view.group_epoch == view.target_epoch
        && view.members.len() == members;
    let active: usize = view.members.iter().map(|m| m.active.len()).sum();
    let settled = stable
        && view.learner_count == 0
        && view
            .members
            .iter()
            .all(|m| !m.draining && !m.away && m.revoking.is_empty())
        && active as u64 == tasks;
    Settling { stable, settled }
}

/// When a group became stable and settled after an event.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Settled {
    pub stable_s: Option<f64>,
    pub settled_s: Option<f64>,
}

/// Probes group `name` every 100 ms from `since` until it is settled with
/// `members` members, or `until` (the next event). Errors are retried.
pub async fn probe(
    admin: Admin,
    name: String,
    members: usize,
    tasks: u64,
    since: Instant,
    until: Instant,
) -> Settled {
    let mut result = Settled::default();
    while Instant::now() < until {
        let polled = Instant::now();
        if let Ok(view) = admin.group(&name).await {
            let state = settling(&view, members, tasks);
            let at = polled.saturating_duration_since(since).as_secs_f64();
            if state.stable && result.stable_s.is_none() {
                result.stable_s = Some(at);
            }
            if state.settled {
                result.settled_s = Some(at);
                result.stable_s.get_or_insert(at);
                return result;
            }
        }
        tokio::time::sleep_until((polled + PROBE_INTERVAL).into()).await;
    }
    result
}
