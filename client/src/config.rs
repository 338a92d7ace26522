//! What a member needs to know before it joins.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use assignd_wire::{
    ENDPOINT_BYTES_MAX, METADATA_KEY_BYTES_MAX, METADATA_PAIRS_MAX, METADATA_VALUE_BYTES_MAX,
};

use crate::ClientError;

/// How long one heartbeat may take before it counts as lost, by default.
pub const REQUEST_TIMEOUT_DEFAULT: Duration = Duration::from_secs(5);
/// How long a kept-alive connection to the host may sit unused before the
/// client closes it: under the host's idle timeout (`serve
/// --header-read-timeout-ms`, 10 s by default), so that a request never
/// goes out on a connection the host is closing.
pub const CONNECTION_IDLE_MAX: Duration = Duration::from_secs(5);
/// Events buffered for the application, by default; past this the loop
/// waits for the application to read (and stops heartbeating meanwhile).
pub const EVENT_BUFFER_DEFAULT: usize = 1024;

/// A member's identity and subscription.
#[derive(Clone, PartialEq)]
pub struct MemberConfig {
    /// The host's base URL, e.g. `http://127.0.0.1:7070`; for a cluster,
    /// any node's, or several separated by commas (bootstrap URLs, tried
    /// in turn while none answers): any node redirects the member to the
    /// group's coordinator.
    pub url: String,
    pub group: String,
    /// A static member's name (KIP-345 group instance id): a restart with
    /// the same name within the registration timeout gets the same tasks
    /// back. `None` joins as a dynamic member.
    pub member_name: Option<String>,
    /// The topics to subscribe to; at least one.
    pub topics: Vec<String>,
    pub rack: Option<String>,
    /// This member's relative capacity (1 or more).
    pub capacity: u32,
    /// Where this member serves (a URL or `host:port`), published in the
    /// group's routing table for routers to send its keys to; `None`
    /// publishes none. Change it at run time with
    /// [`MemberHandle::set_endpoint`](crate::MemberHandle::set_endpoint).
    pub endpoint: Option<String>,
    /// Small string pairs published with the endpoint (zone, version, …).
    pub metadata: BTreeMap<String, String>,
    /// The load this member can carry, in the group's load unit, reported
    /// when the host asks for loads; `None`: none. Change it at run time
    /// with [`MemberHandle::set_load_capacity`](crate::MemberHandle::set_load_capacity).
    pub load_capacity: Option<f64>,
    /// How far (relative) a task's load may move from the value the host
    /// has before it is sent again: by default
    /// [`LOAD_THRESHOLD_DEFAULT`](crate::loads::LOAD_THRESHOLD_DEFAULT)
    /// (10 %). A smaller one tracks load closer, for larger heartbeats.
    pub load_threshold: f64,
    /// How long one request may take before it counts as lost.
    pub request_timeout: Duration,
    /// How many events may wait for the application.
    pub event_buffer: usize,
    /// The group's member token, sent as `Authorization: Bearer TOKEN` on
    /// every heartbeat; needed when the group's config has one.
    pub member_token: Option<String>,
    /// The connections to the host, shared with other members of this
    /// process; `None`: the member opens its own.
    pub connections: Option<Connections>,
}

/// The most requests a shared pool has in flight at once, by default
/// (so the most connections it opens): a pool without a bound opens a
/// connection for every request that finds none idle, and 100,000 members
/// churned through the machine's ephemeral ports (18,000 sockets in
/// TIME_WAIT) before the host was even busy.
pub const SHARED_REQUESTS_MAX_DEFAULT: usize = 64;

/// A pool of HTTP connections that members of one process share: a
/// process running many members (a load generator, a worker process with
/// one member per thread of work) holds a few connections to the host
/// rather than one per member, under its file descriptor limit. At most
/// [`SHARED_REQUESTS_MAX_DEFAULT`] requests are in flight at once (a
/// member waits for a turn within its request timeout). Clones share the
/// pool; two configs are equal in it when they share one.
#[derive(Clone)]
pub struct Connections(Arc<Shared>);

struct Shared {
    client: reqwest::Client,
    turns: tokio::sync::Semaphore,
}

impl Connections {
    /// A new pool. The timeouts stay each member's (its `request_timeout`).
    pub fn new() -> Result<Self, ClientError> {
        Self::with_requests_max(SHARED_REQUESTS_MAX_DEFAULT)
    }

    /// A new pool with at most `requests_max` (at least 1) requests, and
    /// connections, at once.
    pub fn with_requests_max(requests_max: usize) -> Result<Self, ClientError> {
        let client = reqwest::Client::builder()
            .pool_idle_timeout(CONNECTION_IDLE_MAX)
            // The transport follows a cluster's redirects itself.
            .redirect(reqwest::redirect::Policy::none())
            .pool_max_idle_per_host(requests_max.max(1))
            .build()
            .map_err(|e| ClientError::Config(format!("HTTP client: {e}")))?;
        Ok(Connections(Arc::new(Shared {
            client,
            turns: tokio::sync::Semaphore::new(requests_max.max(1)),
        })))
    }

    pub(crate) fn client(&self) -> &reqwest::Client {
        &self.0.client
    }

    /// Waits for a turn to send; the request is sent while it is held.
    pub(crate) async fn turn(&self) -> tokio::sync::SemaphorePermit<'_> {
        self.0
            .turns
            .acquire()
            .await
            .expect("the semaphore is never closed")
    }
}

impl PartialEq for Connections {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Connections {}

impl std::fmt::Debug for Connections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Connections(shared)")
    }
}

impl std::fmt::Debug for MemberConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemberConfig")
            .field("url", &self.url)
            .field("group", &self.group)
            .field("member_name", &self.member_name)
            .field("topics", &self.topics)
            .field("rack", &self.rack)
            .field("capacity", &self.capacity)
            .field("endpoint", &self.endpoint)
            .field("metadata", &self.metadata)
            .field("load_capacity", &self.load_capacity)
            .field("load_threshold", &self.load_threshold)
            .field("request_timeout", &self.request_timeout)
            .field("event_buffer", &self.event_buffer)
            // Never printed.
            .field("member_token", &self.member_token.as_ref().map(|_| ".."))
            .field("connections", &self.connections)
            .finish()
    }
}

impl MemberConfig {
    /// A dynamic member of `group` at `url` subscribing to `topics`, with
    /// capacity 1 and no rack.
    pub fn new(
        url: impl Into<String>,
        group: impl Into<String>,
        topics: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        MemberConfig {
            url: url.into(),
            group: group.into(),
            member_name: None,
            topics: topics.into_iter().map(Into::into).collect(),
            rack: None,
            capacity: 1,
            endpoint: None,
            metadata: BTreeMap::new(),
            load_capacity: None,
            load_threshold: crate::loads::LOAD_THRESHOLD_DEFAULT,
            request_timeout: REQUEST_TIMEOUT_DEFAULT,
            event_buffer: EVENT_BUFFER_DEFAULT,
            member_token: None,
            connections: None,
        }
    }

    /// Makes this a static member named `name`.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.member_name = Some(name.into());
        self
    }

    pub fn with_rack(mut self, rack: impl Into<String>) -> Self {
        self.rack = Some(rack.into());
        self
    }

    pub fn with_capacity(mut self, capacity: u32) -> Self {
        self.capacity = capacity;
        self
    }

    /// Publishes `endpoint` (a URL or `host:port`, visible ASCII) as where
    /// this member serves.
    pub fn with_endpoint(mut self, endpoint: impl Into<String>) -> Self {
        self.endpoint = Some(endpoint.into());
        self
    }

    /// Publishes the pair `key` = `value` with the endpoint (at most
    /// [`METADATA_PAIRS_MAX`] pairs).
    pub fn with_metadata(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.metadata.insert(key.into(), value.into());
        self
    }

    /// Reports `capacity` (in the group's load unit) as the load this
    /// member can carry, when the host asks for loads.
    pub fn with_load_capacity(mut self, capacity: f64) -> Self {
        self.load_capacity = Some(capacity);
        self
    }

    /// Resends a task's load once it moved by more than `threshold`
    /// (relative: 0.1 for 10 %) from the value the host has.
    pub fn with_load_threshold(mut self, threshold: f64) -> Self {
        self.load_threshold = threshold;
        self
    }

    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Sends `token` as the group's member token.
    pub fn with_member_token(mut self, token: impl Into<String>) -> Self {
        self.member_token = Some(token.into());
        self
    }

    /// Sends the heartbeats over `connections`, shared with other members.
    pub fn with_connections(mut self, connections: Connections) -> Self {
        self.connections = Some(connections);
        self
    }

    /// The bootstrap URLs in [`MemberConfig::url`].
    pub fn urls(&self) -> impl Iterator<Item = &str> {
        split_urls(&self.url)
    }

    /// Checks what can be checked without asking the host.
    pub fn check(&self) -> Result<(), ClientError> {
        let fail = |m: &str| Err(ClientError::Config(m.to_owned()));
        if self.group.is_empty() {
            return fail("the group name is empty");
        }
        if self.topics.is_empty() {
            return fail("a member must subscribe to at least one topic");
        }
        if self.member_name.as_deref() == Some("") {
            return fail("a static member's name must not be empty");
        }
        if self.capacity == 0 {
            return fail("capacity must be at least 1");
        }
        if !(self.load_threshold.is_finite() && self.load_threshold >= 0.0) {
            return fail("the load threshold must be a finite number, 0 or more");
        }
        if self
            .load_capacity
            .is_some_and(|c| !crate::loads::valid_load_capacity(c))
        {
            return fail("a load capacity must be above 0 and at most 1e15");
        }
        if self.request_timeout.is_zero() {
            return fail("the request timeout must be above zero");
        }
        if self.event_buffer == 0 {
            return fail("the event buffer must hold at least one event");
        }
        if let Some(token) = &self.member_token
            && (token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()))
        {
            return fail("a member token must be visible ASCII characters, at least one");
        }
        check_endpoint(self.endpoint.as_deref(), &self.metadata)
    }
}

/// Checks an endpoint and its metadata against the host's limits
/// (docs/routing.md, "Members' endpoints"), so that a mistake fails where
/// it is made rather than as the host's refusal of a heartbeat.
pub(crate) fn check_endpoint(
    endpoint: Option<&str>,
    metadata: &BTreeMap<String, String>,
) -> Result<(), ClientError> {
    let fail = |m: String| Err(ClientError::Config(m));
    if let Some(endpoint) = endpoint
        && (endpoint.is_empty()
            || endpoint.len() > ENDPOINT_BYTES_MAX
            || !endpoint.bytes().all(|b| b.is_ascii_graphic()))
    {
        return fail(format!(
            "an endpoint must be 1 to {ENDPOINT_BYTES_MAX} bytes of visible ASCII: {endpoint:?}"
        ));
    }
    if metadata.len() > METADATA_PAIRS_MAX {
        return fail(format!(
            "at most {METADATA_PAIRS_MAX} metadata pairs, not {}",
            metadata.len()
        ));
    }
    for (key, value) in metadata {
        if key.is_empty() || key.len() > METADATA_KEY_BYTES_MAX {
            return fail(format!(
                "a metadata key must be 1 to {METADATA_KEY_BYTES_MAX} bytes: {key:?}"
            ));
        }
        if value.len() > METADATA_VALUE_BYTES_MAX {
            return fail(format!(
                "a metadata value must be at most {METADATA_VALUE_BYTES_MAX} bytes: {key:?}"
            ));
        }
        if key.chars().chain(value.chars()).any(char::is_control) {
            return fail(format!("metadata must be visible characters: {key:?}"));
        }
    }
    Ok(())
}

/// The URLs of a comma-separated list (a cluster's nodes), blanks dropped.
pub(crate) fn split_urls(urls: &str) -> impl Iterator<Item = &str> {
    urls.split(',').map(str::trim).filter(|url| !url.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> MemberConfig {
        MemberConfig::new("http://127.0.0.1:7070", "g", ["orders"])
    }

    #[test]
    fn an_endpoint_and_metadata_within_the_hosts_limits_pass() {
        let ok = config()
            .with_endpoint("http://10.0.0.5:8080")
            .with_metadata("zone", "a")
            .with_metadata("version", "");
        assert!(ok.check().is_ok());
        assert!(config().check().is_ok(), "none at all");
    }

    #[test]
    fn an_endpoint_or_metadata_past_the_hosts_limits_is_refused() {
        let long = "x".repeat(ENDPOINT_BYTES_MAX + 1);
        let mut too_many = config();
        for n in 0..=METADATA_PAIRS_MAX {
            too_many = too_many.with_metadata(format!("k{n}"), "v");
        }
        let refused = [
            config().with_endpoint(""),
            config().with_endpoint("http://a b"),
            config().with_endpoint(long),
            config().with_metadata("", "v"),
            config().with_metadata("k".repeat(METADATA_KEY_BYTES_MAX + 1), "v"),
            config().with_metadata("k", "v".repeat(METADATA_VALUE_BYTES_MAX + 1)),
            config().with_metadata("k", "line\nbreak"),
            too_many,
        ];
        for config in refused {
            assert!(
                matches!(config.check(), Err(ClientError::Config(_))),
                "{config:?}"
            );
        }
    }
}
