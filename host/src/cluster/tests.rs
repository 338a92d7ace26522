//! The etcd store against a real etcd on loopback ([`LocalEtcd`]): what an
//! owner persisted is what the next owner loads, a second node cannot load
//! an owned shard, an owner whose lease ended never writes again, a torn
//! batch is dropped, compaction keeps the state, and a write waits out a
//! lost quorum.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::etcd::CHUNK_BYTES_MAX;
use super::keys;
use super::local_etcd::LocalEtcd;
use super::store::chunk_key;
use super::{Etcd, EtcdStore, StoreError, Write};
use crate::protocol::core::Coordinator;
use crate::protocol::group::{Group, GroupConfig, Record, TopicConfig};
use crate::protocol::shard::ShardId;
use crate::runtime::{RecordSink, ShardStore};

const SHARD: ShardId = 3;
/// Long enough for any test: nothing renews the leases here, and a test
/// that needs one to end revokes it.
const LEASE_TTL: Duration = Duration::from_secs(120);

/// How long a write retries an unavailable etcd: a bound, not a wait (a
/// write lands as soon as etcd answers). Generous, since restarted etcd
/// members on a loaded 2-core machine take seconds to elect a leader.
const RETRY_FOR: Duration = Duration::from_secs(60);

fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join("assignd-cluster-tests");
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    dir
}

/// A record per group `g{i}` for i in `range`: each configures a group.
fn configured(range: std::ops::Range<usize>) -> Vec<Record> {
    range
        .map(|i| Record::GroupConfigured {
            group: format!("g{i}"),
            config: GroupConfig::with_topics(vec![TopicConfig {
                name: format!("topic-of-group-{i}"),
                partitions: 4,
            }]),
        })
        .collect()
}

fn groups(core: &Coordinator) -> Vec<Group> {
    core.groups().cloned().collect()
}

/// A node: its own connection, lease and store, under `prefix`.
async fn node(cluster: &LocalEtcd, prefix: &str, name: &str) -> Arc<EtcdStore> {
    let etcd = Etcd::connect(cluster.config(prefix))
        .await
        .expect("connect");
    let lease = etcd.grant_lease(LEASE_TTL).await.expect("a lease");
    Arc::new(EtcdStore::new(
        etcd,
        name,
        lease,
        tokio::runtime::Handle::current(),
        RETRY_FOR,
    ))
}

/// `store.load(SHARD)` off the runtime's threads, as the runtime calls it.
async fn load(store: &Arc<EtcdStore>) -> anyhow::Result<(Coordinator, Arc<dyn RecordSink>)> {
    let store = store.clone();
    tokio::task::spawn_blocking(move || store.load(SHARD, 7))
        .await
        .expect("load did not panic")
}

async fn persist(sink: &Arc<dyn RecordSink>, records: Vec<Record>) -> anyhow::Result<()> {
    let sink = sink.clone();
    tokio::task::spawn_blocking(move || sink.persist(&records))
        .await
        .expect("persist did not panic")
}

async fn unload(store: &Arc<EtcdStore>, core: Coordinator) {
    let store = store.clone();
    tokio::task::spawn_blocking(move || store.unloaded(SHARD, core))
        .await
        .expect("unload did not panic");
}

fn applied(records: &[Record]) -> Coordinator {
    let mut core = Coordinator::new(7);
    for record in records {
        core.apply(record);
    }
    core
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_an_owner_persisted_is_what_the_next_owner_loads() {
    let cluster = LocalEtcd::start(&scratch(), 1).await.expect("etcd");
    let a = node(&cluster, "/handover/", "a").await;
    let b = node(&cluster, "/handover/", "b").await;
    let (core, sink) = load(&a).await.expect("a loads the new shard");
    assert!(groups(&core).is_empty());
    let records = configured(0..50);
    for batch in records.chunks(7) {
        persist(&sink, batch.to_vec()).await.expect("persisted");
    }
    drop(sink);
    unload(&a, applied(&records)).await;

    let (core, _sink) = load(&b).await.expect("b loads what a released");
    assert_eq!(groups(&core), groups(&applied(&records)));
    assert_eq!(b.owner(SHARD).await.unwrap().as_deref(), Some("b"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_node_cannot_load_a_shard_its_owner_holds() {
    let cluster = LocalEtcd::start(&scratch(), 1).await.expect("etcd");
    let a = node(&cluster, "/owned/", "a").await;
    let b = node(&cluster, "/owned/", "b").await;
    let (_core, _sink) = load(&a).await.expect("a loads");
    let refused = load(&b).await.err().expect("b is refused");
    assert!(
        format!("{refused:#}").contains("owned by node a"),
        "{refused:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_whose_lease_ended_never_writes_again() {
    let cluster = LocalEtcd::start(&scratch(), 1).await.expect("etcd");
    let a = node(&cluster, "/fenced/", "a").await;
    let b = node(&cluster, "/fenced/", "b").await;
    let (_core, a_sink) = load(&a).await.expect("a loads");
    let before = configured(0..3);
    persist(&a_sink, before.clone()).await.expect("a persists");

    // a's lease ends (as if it had been paused past it) and b takes over.
    let revoker = Etcd::connect(cluster.config("/fenced/")).await.unwrap();
    revoker.revoke_lease(a.lease()).await.expect("revoked");
    let (core, b_sink) = load(&b).await.expect("b takes the shard over");
    assert_eq!(groups(&core), groups(&applied(&before)));

    let refused = persist(&a_sink, configured(3..4))
        .await
        .expect_err("a is fenced");
    assert!(format!("{refused:#}").contains("fenced"), "{refused:#}");
    persist(&b_sink, configured(4..5))
        .await
        .expect("b persists");

    drop(b_sink);
    unload(&b, core).await;
    let c = node(&cluster, "/fenced/", "c").await;
    let (core, _sink) = load(&c).await.expect("c loads");
    let mut expected = before;
    expected.extend(configured(4..5));
    assert_eq!(
        groups(&core),
        groups(&applied(&expected)),
        "a's late write is nowhere"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_its_owner_did_not_finish_is_dropped_by_the_next_owner() {
    let cluster = LocalEtcd::start(&scratch(), 1).await.expect("etcd");
    let a = node(&cluster, "/torn/", "a").await;
    let (core, sink) = load(&a).await.expect("a loads");
    let whole = configured(0..5);
    persist(&sink, whole.clone()).await.expect("persisted");
    // The first chunk of a batch that says more follow, and nothing after:
    // a's write died between two transactions of one batch.
    let log = a.read(SHARD).await.expect("read");
    let claim = a.claim_held(SHARD).expect("a holds the shard");
    a.etcd()
        .guarded(
            &claim,
            &[Write::Put {
                key: chunk_key(a.etcd(), SHARD, log.next_index),
                value: vec![1, 0xde, 0xad],
            }],
        )
        .await
        .expect("the torn chunk is written");
    assert_eq!(a.read(SHARD).await.unwrap().torn_from, Some(log.next_index));
    drop(sink);
    unload(&a, core).await;

    let b = node(&cluster, "/torn/", "b").await;
    let (core, b_sink) = load(&b).await.expect("b loads past the torn batch");
    assert_eq!(groups(&core), groups(&applied(&whole)));
    assert_eq!(
        b.read(SHARD).await.unwrap().torn_from,
        None,
        "the torn chunk is gone"
    );
    persist(&b_sink, configured(5..6))
        .await
        .expect("b appends after it");
    let mut expected = whole;
    expected.extend(configured(5..6));
    let records = b.read(SHARD).await.unwrap().records;
    assert_eq!(records, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_larger_than_a_chunk_comes_back_whole() {
    let cluster = LocalEtcd::start(&scratch(), 1).await.expect("etcd");
    let a = node(&cluster, "/big/", "a").await;
    let (_core, sink) = load(&a).await.expect("a loads");
    let records = configured(0..40_000);
    let mut bytes = Vec::new();
    for record in &records {
        crate::log::frame::encode(record, &mut bytes);
    }
    assert!(
        bytes.len() > 2 * CHUNK_BYTES_MAX,
        "{} bytes span chunks",
        bytes.len()
    );
    persist(&sink, records.clone()).await.expect("persisted");
    let log = a.read(SHARD).await.expect("read");
    assert!(log.chunks >= 3, "{} chunks", log.chunks);
    assert_eq!(log.records, records);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_keeps_the_state_and_drops_the_chunks_before_it() {
    let cluster = LocalEtcd::start(&scratch(), 1).await.expect("etcd");
    let etcd = Etcd::connect(cluster.config("/compact/")).await.unwrap();
    let lease = etcd.grant_lease(LEASE_TTL).await.unwrap();
    let a = Arc::new(
        EtcdStore::new(
            etcd,
            "a",
            lease,
            tokio::runtime::Handle::current(),
            RETRY_FOR,
        )
        .with_compaction_after(8),
    );
    let (_core, sink) = load(&a).await.expect("a loads");
    let mut all = Vec::new();
    for i in 0..30 {
        // The same few groups configured again and again: compaction
        // keeps one snapshot of each.
        let batch = configured(i % 3..i % 3 + 1);
        all.extend(batch.clone());
        persist(&sink, batch).await.expect("persisted");
    }
    let log = a.read(SHARD).await.expect("read");
    assert!(log.chunks <= 9, "{} chunks after compaction", log.chunks);
    let start = a
        .etcd()
        .get(&a.etcd().key(&keys::log_start(SHARD)))
        .await
        .unwrap();
    assert!(start.is_some(), "compaction moved the start");
    assert_eq!(groups(&applied(&log.records)), groups(&applied(&all)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_waits_out_a_lost_quorum_and_lands_when_it_returns() {
    let mut cluster = LocalEtcd::start(&scratch(), 3).await.expect("etcd");
    let a = node(&cluster, "/quorum/", "a").await;
    let (_core, sink) = load(&a).await.expect("a loads");
    persist(&sink, configured(0..1)).await.expect("persisted");
    cluster.kill(1);
    cluster.kill(2);
    let pending = tokio::spawn({
        let sink = sink.clone();
        async move { persist(&sink, configured(1..2)).await }
    });
    // The write cannot land without a quorum.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!pending.is_finished(), "a write landed without a quorum");
    cluster.restart(1).expect("m1 restarts");
    cluster.restart(2).expect("m2 restarts");
    pending
        .await
        .unwrap()
        .expect("the write lands once the quorum is back");
    cluster.wait_healthy().await.expect("etcd answers again");
    let log = a.read(SHARD).await.expect("read");
    assert_eq!(log.records, configured(0..2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_write_is_told_apart_and_claiming_the_shard_again_fences_the_sink_it_had() {
    let mut cluster = LocalEtcd::start(&scratch(), 3).await.expect("etcd");
    let etcd = Etcd::connect(cluster.config("/silent/"))
        .await
        .expect("connect");
    let lease = etcd.grant_lease(LEASE_TTL).await.expect("a lease");
    // Gives up on an unanswered write after a second.
    let a = Arc::new(EtcdStore::new(
        etcd,
        "a",
        lease,
        tokio::runtime::Handle::current(),
        Duration::from_secs(1),
    ));
    let (_core, old_sink) = load(&a).await.expect("a loads");
    persist(&old_sink, configured(0..1))
        .await
        .expect("persisted");
    cluster.kill(1);
    cluster.kill(2);
    let unanswered = persist(&old_sink, configured(1..2))
        .await
        .expect_err("no write lands without a quorum");
    assert!(
        unanswered
            .downcast_ref::<crate::runtime::StorageUnavailable>()
            .is_some(),
        "told apart from a refusal: {unanswered:#}"
    );
    cluster.restart(1).expect("m1 restarts");
    cluster.restart(2).expect("m2 restarts");
    cluster.wait_healthy().await.expect("etcd answers again");

    // The node claims its shard again under the same lease (as after a
    // step-down that kept it) and loads exactly what landed: the
    // unanswered write was not acknowledged, but it may still have landed
    // once the quorum was back (as in the test above).
    a.forget_claims();
    // As a node's placement does, loading is retried while etcd does not
    // answer within this store's one second: the members just restarted
    // may still be catching up (it took longer once in a full run of the
    // unit tests, every test's etcd on the same 2 cores).
    let retried_until = tokio::time::Instant::now() + Duration::from_secs(30);
    let (core, sink) = loop {
        match load(&a).await {
            Err(error)
                if matches!(error.downcast_ref(), Some(StoreError::Unavailable(_)))
                    && tokio::time::Instant::now() < retried_until =>
            {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            loaded => break loaded.expect("a loads its own shard again"),
        }
    };
    let landed = a.read(SHARD).await.expect("read").records;
    assert!(
        landed == configured(0..1) || landed == configured(0..2),
        "the acknowledged batch, and the unanswered one or nothing of it: {landed:?}"
    );
    assert_eq!(groups(&core), groups(&applied(&landed)));
    let refused = persist(&old_sink, configured(2..3))
        .await
        .expect_err("the sink of the earlier claim is fenced");
    assert!(format!("{refused:#}").contains("fenced"), "{refused:#}");
    persist(&sink, configured(3..4))
        .await
        .expect("the new sink persists");
    let log = a.read(SHARD).await.expect("read");
    let mut expected = landed;
    expected.extend(configured(3..4));
    assert_eq!(log.records, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_is_stored_once_for_the_cluster_under_one_name_and_read_back_checked() {
    use super::modules::{EtcdModules, ModuleMeta, PublishError};
    let cluster = LocalEtcd::start(&scratch(), 1).await.expect("etcd");
    let connect = || async {
        EtcdModules::new(
            Etcd::connect(cluster.config("/modules/")).await.unwrap(),
            tokio::runtime::Handle::current(),
        )
    };
    let (a, b) = (connect().await, connect().await);
    // Three chunks' worth.
    let bytes: Vec<u8> = (0..CHUNK_BYTES_MAX * 5 / 2)
        .map(|i| (i * 7 % 251) as u8)
        .collect();
    let id = crate::plugins::module_id(&bytes);
    let meta = ModuleMeta {
        name: "sticky".into(),
        version: "1.0.0".into(),
        size_bytes: bytes.len() as u64,
        uploaded_at_ms: 1,
        chunks: 0,
    };
    a.publish(&id, &meta, &bytes).await.expect("published");
    // Again, from either node: nothing changes.
    a.publish(&id, &meta, &bytes).await.expect("idempotent");
    b.publish(&id, &meta, &bytes).await.expect("idempotent");

    let listed = b.list().await.expect("listed");
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].0, id);
    assert_eq!(listed[0].1.chunks, 3);
    assert_eq!(b.fetch(&id, &listed[0].1).await.expect("read"), bytes);

    // Other bytes under the name: refused, and nothing of them stays.
    let other = b"other bytes".to_vec();
    let other_id = crate::plugins::module_id(&other);
    match b.publish(&other_id, &meta, &other).await {
        Err(PublishError::NameTaken { id: holder, .. }) => assert_eq!(holder, id),
        other => panic!("not refused: {other:?}"),
    }
    assert_eq!(b.list().await.unwrap().len(), 1);

    // A chunk damaged in etcd: the copy is refused, not loaded.
    let raw = Etcd::connect(cluster.config("/modules/")).await.unwrap();
    raw.apply(
        &[],
        &[Write::Put {
            key: raw.key(&keys::module_chunk(&id, 1)),
            value: vec![0; 10],
        }],
    )
    .await
    .unwrap();
    let damaged = b.fetch(&id, &listed[0].1).await.expect_err("damaged");
    assert!(damaged.to_string().contains("do not hash"), "{damaged}");
}

/// Group `group` configured with `assignor`.
fn bound(group: &str, assignor: &str) -> Record {
    let mut config = GroupConfig::with_topics(vec![TopicConfig {
        name: "orders".into(),
        partitions: 4,
    }]);
    config.assignor = assignor.to_owned();
    Record::GroupConfigured {
        group: group.to_owned(),
        config,
    }
}

/// A published module `custom@1.0.0` and its id.
async fn published(modules: &super::modules::EtcdModules) -> String {
    let bytes = b"a module's bytes".to_vec();
    let id = crate::plugins::module_id(&bytes);
    let meta = super::modules::ModuleMeta {
        name: "custom".into(),
        version: "1.0.0".into(),
        size_bytes: bytes.len() as u64,
        uploaded_at_ms: 1,
        chunks: 0,
    };
    modules
        .publish(&id, &meta, &bytes)
        .await
        .expect("published");
    id
}

/// A module a group names (by name or by id) is not deleted, whichever
/// node asks; unbound, it is; and a batch that names it after that never
/// lands (the bind that loses the race to a delete is refused by etcd,
/// and the next owner loads the group as it was).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_a_group_names_is_not_deleted_and_no_bind_lands_after_a_delete() {
    use super::modules::{Deleted, EtcdModules};
    let cluster = LocalEtcd::start(&scratch(), 1).await.expect("etcd");
    let a = node(&cluster, "/delete/", "a").await;
    let modules = EtcdModules::new(
        Etcd::connect(cluster.config("/delete/")).await.unwrap(),
        tokio::runtime::Handle::current(),
    );
    let id = published(&modules).await;
    let (_core, sink) = load(&a).await.expect("a loads");
    persist(
        &sink,
        vec![bound("by-name", "custom@1.0.0"), bound("by-id", &id)],
    )
    .await
    .expect("bound");
    assert_eq!(
        modules.delete(&id, "custom", "1.0.0").await.unwrap(),
        Deleted::InUse(vec!["by-id".into(), "by-name".into()])
    );
    persist(&sink, vec![bound("by-name", "sticky")])
        .await
        .expect("rebound");
    assert_eq!(
        modules.delete(&id, "custom", "1.0.0").await.unwrap(),
        Deleted::InUse(vec!["by-id".into()])
    );
    persist(&sink, vec![bound("by-id", "range")])
        .await
        .expect("rebound");
    assert_eq!(
        modules.delete(&id, "custom", "1.0.0").await.unwrap(),
        Deleted::Done
    );
    assert!(!modules.is_shared(&id).await.unwrap());
    assert!(!modules.is_shared("custom@1.0.0").await.unwrap());
    assert!(modules.list().await.unwrap().is_empty());
    assert_eq!(
        modules.delete(&id, "custom", "1.0.0").await.unwrap(),
        Deleted::Unknown
    );

    // A node that still held the module binds a group to it: refused.
    let refused = persist(&sink, vec![bound("late", "custom@1.0.0")])
        .await
        .expect_err("no bind lands after the delete");
    assert!(format!("{refused:#}").contains("deleted"), "{refused:#}");
    drop(sink);
    unload(&a, Coordinator::new(7)).await;
    let (core, _sink) = load(&a).await.expect("loaded again");
    assert!(core.group("late").is_none());
    assert_eq!(core.group("by-id").unwrap().config.assignor, "range");
}

/// Loading a shard makes the module index say what its groups name: a
/// key that a crash left behind goes, a missing one comes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loading_a_shard_puts_its_module_index_right() {
    use super::modules::{EtcdModules, all_users, user_key};
    let cluster = LocalEtcd::start(&scratch(), 1).await.expect("etcd");
    let a = node(&cluster, "/reindex/", "a").await;
    let raw = Etcd::connect(cluster.config("/reindex/")).await.unwrap();
    let modules = EtcdModules::new(raw.clone(), tokio::runtime::Handle::current());
    let id = published(&modules).await;
    let (core, sink) = load(&a).await.expect("a loads");
    persist(&sink, vec![bound("kept", &id)])
        .await
        .expect("bound");
    drop(sink);
    unload(&a, core).await;
    // What a crash could leave: the index missing the bound group, and
    // naming one that no longer names the module; and another shard's
    // key, which is not this shard's to touch.
    raw.apply(
        &[],
        &[
            super::modules::only(user_key(&raw, &id, "kept")),
            Write::Put {
                key: user_key(&raw, &id, "stale"),
                value: SHARD.to_string().into_bytes(),
            },
            Write::Put {
                key: user_key(&raw, &id, "elsewhere"),
                value: b"0".to_vec(),
            },
        ],
    )
    .await
    .unwrap();
    let (_core, _sink) = load(&a).await.expect("loaded again");
    let mut users = all_users(&raw).await.unwrap();
    users.sort();
    assert_eq!(
        users,
        vec![
            (id.clone(), "elsewhere".into(), "0".into()),
            (id.clone(), "kept".into(), SHARD.to_string()),
        ]
    );
}
