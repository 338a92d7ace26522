//! The feature level against a real etcd on loopback: it rises only once
//! every live node reads the higher version, a node of the previous
//! release (no announced support) holds it back, a node that cannot
//! write the level refuses to join, and a raise computed before a node
//! registered does not land.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{Features, read, set_level};
use crate::cluster::Etcd;
use crate::cluster::local_etcd::LocalEtcd;
use crate::log::frame::FormatSupport;

const LEASE_TTL: Duration = Duration::from_secs(120);
const NEW: FormatSupport = FormatSupport::WITH_TEST_VERSION;
const OLD: FormatSupport = FormatSupport::BUILD;

fn scratch() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join("assignd-features-tests");
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    dir
}

/// Registers `name` as `Node::join` does; with a support, joins the
/// feature level too (`None`: a node of the previous release).
async fn register(
    etcd: &Etcd,
    name: &str,
    support: Option<FormatSupport>,
) -> (i64, anyhow::Result<Features>) {
    let lease = etcd.grant_lease(LEASE_TTL).await.expect("a lease");
    let key = etcd.key(&crate::cluster::keys::node(name));
    let url = format!("http://{name}").into_bytes();
    etcd.claim(key, url, lease)
        .await
        .expect("etcd answers")
        .expect("a free name");
    let Some(support) = support else {
        return (lease, Ok(Features::new(OLD)));
    };
    let features = Features::new(support);
    let joined = features.join(etcd, name, lease).await;
    (lease, joined.map(|()| features))
}

/// One placement round's features part, by `features` of the node of the
/// lowest name.
async fn round(etcd: &Etcd, features: &Features) -> u8 {
    let prefix = etcd.key(crate::cluster::keys::NODES);
    let (nodes, revision) = etcd
        .range(&prefix, &super::prefix_end(&prefix), 100)
        .await
        .expect("the nodes");
    let nodes: BTreeMap<String, String> = nodes
        .into_iter()
        .map(|(k, v)| (super::last_segment(&k), String::from_utf8(v).unwrap()))
        .collect();
    features
        .refresh(etcd, &nodes, revision, true)
        .await
        .expect("refreshed");
    features.level().load(Ordering::SeqCst)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_level_rises_only_once_every_live_node_reads_the_higher_version() {
    let cluster = LocalEtcd::start(&scratch(), 1).await.expect("etcd");
    let etcd = Etcd::connect(cluster.config("/rise/")).await.unwrap();
    let (_, a) = register(&etcd, "a", Some(NEW)).await;
    let a = a.expect("a joins an empty cluster");
    let (b_lease, b) = register(&etcd, "b", Some(OLD)).await;
    b.expect("b joins at the previous release's level");
    let (c_lease, _) = register(&etcd, "c", None).await;

    assert_eq!(round(&etcd, &a).await, 4, "b and c read only 4");
    etcd.revoke_lease(b_lease).await.unwrap();
    assert_eq!(round(&etcd, &a).await, 4, "c, unannounced, counts as 4");
    let shown = read(&etcd).await.unwrap();
    assert!(!shown.nodes["c"].registered);
    assert_eq!(shown.nodes["c"].support, FormatSupport::PREVIOUS_RELEASE);

    etcd.revoke_lease(c_lease).await.unwrap();
    let (_, c) = register(&etcd, "c", Some(NEW)).await;
    let c = c.expect("c, upgraded, joins");
    assert_eq!(round(&etcd, &a).await, 8, "every live node reads 8");
    assert_eq!(read(&etcd).await.unwrap().format_version, 8);
    assert_eq!(round(&etcd, &c).await, 8, "c writes at the level it reads");

    // A node that reads only up to 7 cannot join a cluster at 8.
    let (_, old) = register(&etcd, "d", Some(OLD)).await;
    let refused = old.expect_err("refused").to_string();
    assert!(
        refused.contains("writes record format version 8, newer than this assignd reads (1 to 7)"),
        "{refused}"
    );
    // Nor lowers it, by hand or automatically.
    let at_eight = read(&etcd).await.unwrap();
    assert!(at_eight.refuse(7).unwrap().contains("never lowered"));

    // A node of the previous release does not check: it registers, and
    // gets no shard placed on it.
    let (_, _) = register(&etcd, "e", None).await;
    assert_eq!(round(&etcd, &a).await, 8);
    let live = ["a", "c", "e"].map(String::from);
    assert_eq!(a.placeable(live.iter()), ["a", "c"].map(String::from));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raise_computed_before_a_node_registered_does_not_land() {
    let cluster = LocalEtcd::start(&scratch(), 1).await.expect("etcd");
    let etcd = Etcd::connect(cluster.config("/race/")).await.unwrap();
    let (_, a) = register(&etcd, "a", Some(NEW)).await;
    a.expect("a joins");
    let before = read(&etcd).await.unwrap();
    assert_eq!(before.highest_safe(), Some(8));
    // A node of the previous release registers after the read.
    let (_, _) = register(&etcd, "b", None).await;
    assert!(!set_level(&etcd, &before, 8).await.unwrap());
    let after = read(&etcd).await.unwrap();
    assert_eq!(after.format_version, 4);
    assert_eq!(after.highest_safe(), Some(4));
    assert!(
        after
            .refuse(5)
            .unwrap()
            .contains("node b reads format versions 1 to 4")
    );
}

#[test]
fn no_level_is_safe_when_the_nodes_write_ranges_do_not_meet() {
    use super::{ClusterFeatures, NodeSupport};
    let node = |read_max, write_min, write_max| NodeSupport {
        support: FormatSupport {
            read_max,
            write_min,
            write_max,
        },
        registered: true,
    };
    let cluster = |nodes: Vec<NodeSupport>| ClusterFeatures {
        format_version: 4,
        nodes: nodes
            .into_iter()
            .enumerate()
            .map(|(i, n)| (format!("n{i}"), n))
            .collect(),
        revision: 1,
    };
    assert_eq!(
        cluster(vec![node(4, 4, 4), node(6, 5, 6)]).highest_safe(),
        None
    );
    assert_eq!(
        cluster(vec![node(6, 4, 6), node(6, 5, 6)]).highest_safe(),
        Some(6)
    );
    // A node that reads 6 but writes only up to 5 holds the level at 5.
    assert_eq!(
        cluster(vec![node(6, 4, 5), node(6, 4, 6)]).highest_safe(),
        Some(5)
    );
    assert_eq!(cluster(vec![]).highest_safe(), None);
    // With no node live, no level is set by hand: nothing says who reads it.
    assert!(
        cluster(vec![])
            .refuse(5)
            .unwrap()
            .contains("no node is live")
    );
    assert_eq!(cluster(vec![node(6, 4, 6)]).refuse(6), None);
    assert!(
        cluster(vec![node(6, 4, 6)])
            .refuse(7)
            .unwrap()
            .contains("node n0")
    );
}
