//! The few etcd operations cluster mode is built from, each bounded by a
//! timeout: a node's lease, claiming and releasing a key under it, reading
//! a key range page by page at one revision, and transactions guarded by a
//! claim (fencing).
//!
//! Every call either answers within [`EtcdConfig::request_timeout`] or fails
//! with [`StoreError::Unavailable`]: with its quorum lost etcd does not
//! answer at all, and nothing here may wait on it for ever.
//!
//! Each etcd member has its own connection, and a call that fails on one
//! member (it is down, refuses the connection, or gives no answer within
//! [`EtcdConfig::attempt_timeout`]) is tried on the next, round after
//! round, within the same bound; the member that last answered is tried
//! first. (`etcdv3client`'s own balanced channel over several endpoints
//! fails a call that lands on a member that is down instead of trying
//! another.) The attempt bound is what moves a write on when etcd's
//! leader dies: a follower that has not yet noticed forwards the write to
//! the dead leader and holds it, unanswered, until etcd's own request
//! timeout (7 s by default), while a new leader is elected within about
//! a second; the write sent again after the bound lands there. This is
//! what etcd's Go client does too: its balancer moves to the next
//! endpoint on `Unavailable`, and its callers bound each request.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use etcdv3client::ErrKind;
use etcdv3client::EtcdClient;
use etcdv3client::pb::{self, compare, request_op, response_op};

/// How cluster mode reaches etcd.
#[derive(Clone, Debug)]
pub struct EtcdConfig {
    /// Client URLs of the etcd members (`http://127.0.0.1:2379`, ...).
    pub endpoints: Vec<String>,
    /// Every key of the cluster starts with it (ends with `/`).
    pub prefix: String,
    /// The longest one etcd request may take before it counts as failed,
    /// over every member it is tried on.
    pub request_timeout: Duration,
    /// The longest one attempt of a request on one member may take before
    /// it is tried on the next.
    pub attempt_timeout: Duration,
}

impl EtcdConfig {
    /// The default bound on one request: longer than etcd's own leader
    /// election (1 s by default) so that a lost leader is waited out, far
    /// shorter than a member's session.
    pub const REQUEST_TIMEOUT_DEFAULT: Duration = Duration::from_secs(3);

    /// The default bound on one attempt: half of etcd's election timeout
    /// (1 s by default), so that a write held by a member whose leader died
    /// is sent again while the new leader is elected, not after; a healthy
    /// member answers in milliseconds, and a write tried again is safe
    /// (see `Etcd::bounded`).
    pub const ATTEMPT_TIMEOUT_DEFAULT: Duration = Duration::from_millis(500);

    pub fn new(endpoints: Vec<String>, prefix: &str) -> Self {
        let mut prefix = prefix.to_owned();
        if !prefix.ends_with('/') {
            prefix.push('/');
        }
        EtcdConfig {
            endpoints,
            prefix,
            request_timeout: Self::REQUEST_TIMEOUT_DEFAULT,
            attempt_timeout: Self::ATTEMPT_TIMEOUT_DEFAULT,
        }
    }
}

/// Why a storage operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// etcd did not answer in time, or not at all (no quorum, no member
    /// reachable). Nothing was written, or it is unknown whether it was:
    /// the caller retries or gives up, it never assumes.
    #[error("etcd is unavailable: {0}")]
    Unavailable(String),
    /// The claim the write was guarded by is gone: the lease ran out, or
    /// another node holds the key now. This node must never write again
    /// under that claim.
    #[error("fenced: {0}")]
    Fenced(String),
    /// What etcd holds is not what this version wrote.
    #[error("the cluster's state in etcd is corrupt: {0}")]
    Corrupt(String),
    /// What etcd holds was written whole by an assignd this one cannot
    /// read (a newer record format version, an unknown record type): not
    /// damage, and never to be cut or misread.
    #[error("this assignd cannot read the cluster's state in etcd: {0}")]
    Unreadable(String),
    /// etcd answered that it knows no such lease: the lease expired (or
    /// was revoked). etcd is available; every key put under the lease is
    /// gone.
    #[error("the lease has expired (etcd no longer knows it): {0}")]
    LeaseExpired(String),
}

/// A key this node holds under its lease; the revision it was last put
/// at (its mod revision) is the fencing token every guarded write
/// compares. Nothing but a claim puts the key, so a write guarded by an
/// earlier claim of the same key (one in flight when this node gave up
/// on it, say) can never land after a new claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    pub key: Vec<u8>,
    pub revision: i64,
}

/// One write of a guarded transaction.
#[derive(Clone, Debug)]
pub enum Write {
    Put {
        key: Vec<u8>,
        value: Vec<u8>,
    },
    /// Deletes every key in `[from, to)`.
    DeleteRange {
        from: Vec<u8>,
        to: Vec<u8>,
    },
}

/// The most bytes in one chunk of a value cut into several keys (a
/// shard's log batch, a module). etcd refuses a request over 1.5 MiB by
/// default (`--max-request-bytes`), and gRPC an answer over 4 MiB: two
/// chunks fit one transaction, and a page of six chunks one answer.
pub const CHUNK_BYTES_MAX: usize = 512 << 10;

/// etcd's default limit on one request (`--max-request-bytes`).
const ETCD_REQUEST_BYTES_MAX: usize = 3 << 19;
/// gRPC's default limit on one answer.
const GRPC_ANSWER_BYTES_MAX: usize = 4 << 20;
const _: () = assert!(2 * CHUNK_BYTES_MAX < ETCD_REQUEST_BYTES_MAX);
const _: () = assert!(6 * CHUNK_BYTES_MAX < GRPC_ANSWER_BYTES_MAX);

/// The pause after every member failed one attempt of a call, before the
/// next round.
const ROUND_PAUSE: Duration = Duration::from_millis(50);

/// One etcd member's connection, made when first needed and made again
/// after a call on it failed.
struct Member {
    endpoint: String,
    client: Mutex<Option<EtcdClient>>,
}

/// A connection to etcd: one per member.
#[derive(Clone)]
pub struct Etcd {
    members: Arc<[Member]>,
    /// The member tried first: the one that last answered.
    preferred: Arc<AtomicUsize>,
    config: EtcdConfig,
}

impl std::fmt::Debug for Etcd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Etcd")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// The end of the range of every key that starts with `prefix`.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    // Every byte was 0xff: etcd's "to the end of the keyspace".
    vec![0]
}

impl Etcd {
    /// Connects to the first member that answers (within the request
    /// timeout); the others are connected to when a call needs them.
    pub async fn connect(config: EtcdConfig) -> Result<Self, StoreError> {
        if config.endpoints.is_empty() {
            return Err(StoreError::Unavailable("no etcd endpoint given".into()));
        }
        let members = config
            .endpoints
            .iter()
            .map(|endpoint| Member {
                endpoint: endpoint.clone(),
                client: Mutex::new(None),
            })
            .collect();
        let etcd = Etcd {
            members,
            preferred: Arc::new(AtomicUsize::new(0)),
            config,
        };
        etcd.bounded("connecting", |_client| async { Ok(()) })
            .await?;
        Ok(etcd)
    }

    pub fn config(&self) -> &EtcdConfig {
        &self.config
    }

    /// `suffix` under the cluster's prefix.
    pub fn key(&self, suffix: &str) -> Vec<u8> {
        format!("{}{suffix}", self.config.prefix).into_bytes()
    }

    /// The connection to member `i`, made if there is none.
    async fn client(&self, i: usize) -> Result<EtcdClient, String> {
        let member = &self.members[i];
        if let Some(client) = member
            .client
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
        {
            return Ok(client);
        }
        let client = EtcdClient::new(vec![member.endpoint.clone()], None)
            .await
            .map_err(|e| e.to_string())?;
        *member.client.lock().unwrap_or_else(|e| e.into_inner()) = Some(client.clone());
        Ok(client)
    }

    /// Makes `call` on the preferred member, and on each other member in
    /// turn while it fails, round after round, all within the request
    /// timeout; each attempt within the attempt timeout. A call that fails
    /// on a member drops that member's connection (the next call connects
    /// again) and makes the next member the preferred one.
    ///
    /// A call tried again on another member may have landed on the first:
    /// every write here is safe to repeat (a claim repeated finds its own
    /// key and claims it again, a guarded write puts the same bytes).
    async fn bounded<T, F, Fut>(&self, what: &str, mut call: F) -> Result<T, StoreError>
    where
        F: FnMut(EtcdClient) -> Fut,
        Fut: Future<Output = Result<T, etcdv3client::Error>>,
    {
        let deadline = Instant::now() + self.config.request_timeout;
        let count = self.members.len();
        let first = self.preferred.load(Ordering::SeqCst) % count;
        // The last failure on each member.
        let mut failures: Vec<Option<String>> = vec![None; count];
        for k in 0.. {
            let i = (first + k) % count;
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            let bound = self.config.attempt_timeout.min(left);
            let attempt = async {
                let client = self.client(i).await?;
                Ok(call(client).await)
            };
            let failure = match tokio::time::timeout(bound, attempt).await {
                Ok(Ok(Ok(answer))) => {
                    self.preferred.store(i, Ordering::SeqCst);
                    return Ok(answer);
                }
                // etcd answered (it knows no such lease): every member
                // would say the same, and etcd is not unavailable.
                Ok(Ok(Err(e))) if e.kind() == ErrKind::LeaseNotFound => {
                    self.preferred.store(i, Ordering::SeqCst);
                    return Err(StoreError::LeaseExpired(format!("{what}: {e}")));
                }
                Ok(Ok(Err(e))) => e.to_string(),
                Ok(Err(e)) => e,
                Err(_) => format!("no answer within {} ms", bound.as_millis()),
            };
            *self.members[i]
                .client
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = None;
            self.preferred.store((i + 1) % count, Ordering::SeqCst);
            failures[i] = Some(failure);
            if (k + 1) % count == 0 {
                // Every member failed in this round (etcd between leaders,
                // or without its quorum): a short pause before the next.
                let left = deadline.saturating_duration_since(Instant::now());
                tokio::time::sleep(ROUND_PAUSE.min(left)).await;
            }
        }
        let mut failures: Vec<String> = (self.members.iter().zip(failures))
            .filter_map(|(member, failure)| Some(format!("{}: {}", member.endpoint, failure?)))
            .collect();
        if failures.is_empty() {
            failures.push(format!(
                "no answer within {} ms",
                self.config.request_timeout.as_millis()
            ));
        }
        Err(StoreError::Unavailable(format!(
            "{what}: {}",
            failures.join("; ")
        )))
    }

    pub(super) async fn txn(
        &self,
        what: &str,
        request: pb::TxnRequest,
    ) -> Result<pb::TxnResponse, StoreError> {
        self.bounded(what, |mut client| {
            let request = request.clone();
            async move { client.kv.txn(request).await }
        })
        .await
    }

    async fn range_request(
        &self,
        what: &str,
        request: pb::RangeRequest,
    ) -> Result<pb::RangeResponse, StoreError> {
        self.bounded(what, |mut client| {
            let request = request.clone();
            async move { client.kv.range(request).await }
        })
        .await
    }

    /// A new lease of `ttl`; returns its id.
    pub async fn grant_lease(&self, ttl: Duration) -> Result<i64, StoreError> {
        let ttl_s = ttl.as_secs().max(1) as i64;
        let request = pb::LeaseGrantRequest { ttl: ttl_s, id: 0 };
        let answer = self
            .bounded("granting a lease", |mut client| async move {
                client.lease.lease_grant(request).await
            })
            .await?;
        if !answer.error.is_empty() {
            return Err(StoreError::Unavailable(format!(
                "granting a lease: {}",
                answer.error
            )));
        }
        Ok(answer.id)
    }

    /// Renews `lease` once; returns the TTL it has now (0: it is gone).
    pub async fn renew_lease(&self, lease: i64) -> Result<i64, StoreError> {
        let renewed = |mut client: EtcdClient| async move {
            let request = tokio_stream::once(pb::LeaseKeepAliveRequest { id: lease });
            let mut answers = client.lease.lease_keep_alive(request).await?;
            answers.message().await.map_err(etcdv3client::Error::from)
        };
        match self.bounded("renewing the lease", renewed).await? {
            Some(answer) => Ok(answer.ttl),
            None => Err(StoreError::Unavailable(
                "renewing the lease: the stream ended".into(),
            )),
        }
    }

    /// Revokes `lease`: every key put under it is deleted at once.
    pub async fn revoke_lease(&self, lease: i64) -> Result<(), StoreError> {
        self.bounded("revoking the lease", |mut client| async move {
            client
                .lease
                .lease_revoke(pb::LeaseRevokeRequest { id: lease })
                .await
        })
        .await
        .map(|_| ())
    }

    /// Puts `key` = `value` under `lease` if no such key exists; returns
    /// the claim, or `None` if the key is held already.
    pub async fn claim(
        &self,
        key: Vec<u8>,
        value: Vec<u8>,
        lease: i64,
    ) -> Result<Option<Claim>, StoreError> {
        let request = pb::TxnRequest {
            compare: vec![created_at(&key, 0)],
            success: vec![put(&key, value, lease)],
            failure: vec![],
        };
        let answer = self.txn("claiming a key", request).await?;
        Ok(answer.succeeded.then(|| Claim {
            key,
            revision: answer.header.map_or(0, |h| h.revision),
        }))
    }

    /// Claims `key` again for its holder: puts `value` again if the key
    /// holds `value` under `lease`, so that the claim gets a new revision
    /// and every write guarded by the one before is refused. `None` if
    /// the key is held otherwise (by another value, under another lease)
    /// or not at all.
    pub async fn reclaim(
        &self,
        key: Vec<u8>,
        value: Vec<u8>,
        lease: i64,
    ) -> Result<Option<Claim>, StoreError> {
        let request = pb::TxnRequest {
            compare: held_under(&key, &value, lease),
            success: vec![put(&key, value, lease)],
            failure: vec![],
        };
        let answer = self.txn("claiming a key again", request).await?;
        Ok(answer.succeeded.then(|| Claim {
            key,
            revision: answer.header.map_or(0, |h| h.revision),
        }))
    }

    /// Deletes `key` if it holds `value` under `lease`: a claim of this
    /// node's that it does not know it holds (its answer was lost), given
    /// up without knowing its revision. Whether it was deleted.
    pub async fn release_own(
        &self,
        key: Vec<u8>,
        value: Vec<u8>,
        lease: i64,
    ) -> Result<bool, StoreError> {
        let end = {
            let mut end = key.clone();
            end.push(0);
            end
        };
        let delete = operation(&Write::DeleteRange {
            from: key.clone(),
            to: end,
        });
        let request = pb::TxnRequest {
            compare: held_under(&key, &value, lease),
            success: vec![delete],
            failure: vec![],
        };
        let answer = self.txn("releasing a claim", request).await?;
        Ok(answer.succeeded)
    }

    /// The value of `key` and its create revision, if it exists.
    pub async fn get(&self, key: &[u8]) -> Result<Option<(Vec<u8>, i64)>, StoreError> {
        let request = pb::RangeRequest {
            key: key.to_vec(),
            ..Default::default()
        };
        let answer = self.range_request("reading a key", request).await?;
        Ok(answer
            .kvs
            .into_iter()
            .next()
            .map(|kv| (kv.value, kv.create_revision)))
    }

    /// Every key in `[from, to)` with its value, in key order, read at one
    /// revision `page` keys at a time (so that no answer passes gRPC's
    /// message limit). Returns them with that revision.
    pub async fn range(
        &self,
        from: &[u8],
        to: &[u8],
        page: i64,
    ) -> Result<(Vec<(Vec<u8>, Vec<u8>)>, i64), StoreError> {
        self.range_at(from, to, page, 0).await
    }

    /// Every key under each of `prefixes`, read in one transaction: one
    /// revision for all (returned), unpaged (each prefix holds a few
    /// hundred small keys at most).
    pub async fn prefixes_at_once(
        &self,
        prefixes: &[Vec<u8>],
    ) -> Result<(Vec<Vec<(Vec<u8>, Vec<u8>)>>, i64), StoreError> {
        let ranges = prefixes.iter().map(|prefix| pb::RequestOp {
            request: Some(request_op::Request::RequestRange(pb::RangeRequest {
                key: prefix.clone(),
                range_end: prefix_end(prefix),
                ..Default::default()
            })),
        });
        let request = pb::TxnRequest {
            compare: vec![],
            success: ranges.collect(),
            failure: vec![],
        };
        let answer = self.txn("reading ranges at one revision", request).await?;
        let revision = answer.header.map_or(0, |h| h.revision);
        let ranges = answer
            .responses
            .into_iter()
            .map(|op| match op.response {
                Some(response_op::Response::ResponseRange(range)) => range
                    .kvs
                    .into_iter()
                    .map(|pair| (pair.key, pair.value))
                    .collect(),
                _ => Vec::new(),
            })
            .collect();
        Ok((ranges, revision))
    }

    /// [`Etcd::range`] at `revision` (0: the latest), so that two ranges
    /// read one snapshot.
    pub async fn range_at(
        &self,
        from: &[u8],
        to: &[u8],
        page: i64,
        mut revision: i64,
    ) -> Result<(Vec<(Vec<u8>, Vec<u8>)>, i64), StoreError> {
        let mut kvs = Vec::new();
        let mut start = from.to_vec();
        loop {
            let request = pb::RangeRequest {
                key: start.clone(),
                range_end: to.to_vec(),
                limit: page,
                revision,
                ..Default::default()
            };
            let answer = self.range_request("reading a range", request).await?;
            if revision == 0 {
                revision = answer.header.as_ref().map_or(0, |h| h.revision);
            }
            let more = answer.more;
            for pair in answer.kvs {
                start = pair.key.clone();
                start.push(0);
                kvs.push((pair.key, pair.value));
            }
            if !more {
                return Ok((kvs, revision));
            }
        }
    }

    /// Applies `writes` at once if `claim` still holds (its key exists,
    /// last put at the revision the claim got), else nothing and
    /// [`StoreError::Fenced`]. Returns the revision of the write.
    pub async fn guarded(&self, claim: &Claim, writes: &[Write]) -> Result<i64, StoreError> {
        let request = pb::TxnRequest {
            compare: vec![put_at(&claim.key, claim.revision)],
            success: writes.iter().map(operation).collect(),
            failure: vec![],
        };
        let answer = self.txn("a guarded write", request).await?;
        if !answer.succeeded {
            return Err(StoreError::Fenced(format!(
                "{} is no longer held under revision {}",
                String::from_utf8_lossy(&claim.key),
                claim.revision
            )));
        }
        Ok(answer.header.map_or(0, |h| h.revision))
    }

    /// [`Etcd::guarded`], applied only if every key of `present` exists
    /// too: a batch that makes a group name a module carries the module's
    /// key here, so that it never lands after the module was deleted.
    /// Either failing is [`StoreError::Fenced`]: the writer's state is
    /// ahead of what etcd allows, and its shard is loaded again.
    pub async fn guarded_if_present(
        &self,
        claim: &Claim,
        present: &[Vec<u8>],
        writes: &[Write],
    ) -> Result<i64, StoreError> {
        let mut compare = vec![put_at(&claim.key, claim.revision)];
        compare.extend(present.iter().map(|key| exists(key)));
        let request = pb::TxnRequest {
            compare,
            success: writes.iter().map(operation).collect(),
            failure: vec![],
        };
        let answer = self.txn("a guarded write", request).await?;
        if !answer.succeeded {
            return Err(StoreError::Fenced(format!(
                "{} is no longer held under revision {}, or one of {} modules it binds was deleted",
                String::from_utf8_lossy(&claim.key),
                claim.revision,
                present.len()
            )));
        }
        Ok(answer.header.map_or(0, |h| h.revision))
    }

    /// Applies `writes` at once if every key of `present` exists and every
    /// range `[from, to)` of `empty` holds no key (no claim guards them);
    /// returns whether they were applied.
    pub async fn apply_if(
        &self,
        present: &[Vec<u8>],
        empty: &[(Vec<u8>, Vec<u8>)],
        writes: &[Write],
    ) -> Result<bool, StoreError> {
        let mut compare: Vec<pb::Compare> = present.iter().map(|key| exists(key)).collect();
        compare.extend(empty.iter().map(|(from, to)| {
            // Over a range, a compare holds if it holds for every key, and
            // an empty range compares as one absent key (create revision
            // 0): so "every create revision is 0" is "no key".
            let mut none = created_at(from, 0);
            none.range_end = to.clone();
            none
        }));
        let request = pb::TxnRequest {
            compare,
            success: writes.iter().map(operation).collect(),
            failure: vec![],
        };
        Ok(self.txn("a write", request).await?.succeeded)
    }

    /// Applies `writes` at once if none of `absent` exists (no claim
    /// guards them); returns whether they were applied.
    pub async fn apply(&self, absent: &[Vec<u8>], writes: &[Write]) -> Result<bool, StoreError> {
        let request = pb::TxnRequest {
            compare: absent.iter().map(|key| created_at(key, 0)).collect(),
            success: writes.iter().map(operation).collect(),
            failure: vec![],
        };
        Ok(self.txn("a write", request).await?.succeeded)
    }

    /// Compacts etcd's history up to `revision`: the versions of keys
    /// before it are dropped (reading at an older revision fails from
    /// then on). A revision compacted already is fine.
    pub async fn compact(&self, revision: i64) -> Result<(), StoreError> {
        let compacted = self
            .bounded("compacting", |mut client| async move {
                client
                    .kv
                    .compact(pb::CompactionRequest {
                        revision,
                        physical: false,
                    })
                    .await
            })
            .await;
        match compacted {
            Err(StoreError::Unavailable(reason)) if reason.contains("compacted") => Ok(()),
            other => other.map(|_| ()),
        }
    }

    /// Deletes the claimed key if the claim still holds.
    pub async fn release(&self, claim: &Claim) -> Result<(), StoreError> {
        let end = {
            let mut end = claim.key.clone();
            end.push(0);
            end
        };
        self.guarded(
            claim,
            &[Write::DeleteRange {
                from: claim.key.clone(),
                to: end,
            }],
        )
        .await
        .map(|_| ())
    }
}

/// Holds if `key`'s `target` equals `value`.
fn equal(key: &[u8], target: compare::CompareTarget, value: compare::TargetUnion) -> pb::Compare {
    pb::Compare {
        result: compare::CompareResult::Equal as i32,
        target: target as i32,
        key: key.to_vec(),
        range_end: vec![],
        target_union: Some(value),
    }
}

/// Holds if `key` was created at `revision` (0: it does not exist).
fn created_at(key: &[u8], revision: i64) -> pb::Compare {
    equal(
        key,
        compare::CompareTarget::Create,
        compare::TargetUnion::CreateRevision(revision),
    )
}

/// Holds if `key` exists (its create revision is past 0).
fn exists(key: &[u8]) -> pb::Compare {
    pb::Compare {
        result: compare::CompareResult::Greater as i32,
        ..created_at(key, 0)
    }
}

/// Holds if `key` exists and was last put at `revision`.
fn put_at(key: &[u8], revision: i64) -> pb::Compare {
    equal(
        key,
        compare::CompareTarget::Mod,
        compare::TargetUnion::ModRevision(revision),
    )
}

/// Compares of a transaction: `key` holds `value` under `lease`.
fn held_under(key: &[u8], value: &[u8], lease: i64) -> Vec<pb::Compare> {
    vec![
        equal(
            key,
            compare::CompareTarget::Value,
            compare::TargetUnion::Value(value.to_vec()),
        ),
        equal(
            key,
            compare::CompareTarget::Lease,
            compare::TargetUnion::Lease(lease),
        ),
    ]
}

/// `write` as an operation of a transaction (a put under no lease).
fn operation(write: &Write) -> pb::RequestOp {
    match write {
        Write::Put { key, value } => put(key, value.clone(), 0),
        Write::DeleteRange { from, to } => pb::RequestOp {
            request: Some(request_op::Request::RequestDeleteRange(
                pb::DeleteRangeRequest {
                    key: from.clone(),
                    range_end: to.clone(),
                    ..Default::default()
                },
            )),
        },
    }
}

fn put(key: &[u8], value: Vec<u8>, lease: i64) -> pb::RequestOp {
    pb::RequestOp {
        request: Some(request_op::Request::RequestPut(pb::PutRequest {
            key: key.to_vec(),
            value,
            lease,
            ..Default::default()
        })),
    }
}
