//! Durable changes per second through etcd, cluster mode's store, beside
//! the local record log in the same run (docs/benchmarks.md, "Cluster
//! mode").
//!
//! ```text
//! cargo bench -p assignd --bench cluster     # needs etcd (apt-get install etcd-server)
//! ```
//!
//! A 3-member etcd on loopback (`LocalEtcd`, its data under `target/`, so
//! on the build's disk). `cluster/etcd-commit/<shards>x<threads>`: each of
//! `<threads>` threads per shard submits one change at a time (one small
//! record: a group's config, about the size of a heartbeat's
//! `MemberReconciled`) through the
//! runtime's `RecordQueue` into the shard's `EtcdStore` sink, and waits
//! until it is durable (a guarded etcd transaction answered) before the
//! next; the queue hands the sink every batch that piled up meanwhile, one
//! transaction per batch. `cluster/local-commit/1x<threads>` is the same
//! into a `LogSink` with `FsyncPolicy::Always` (the single host's store),
//! for the ratio. One iteration is one durable change: criterion's
//! throughput is changes per second.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use assignd::cluster::EtcdStore;
use assignd::cluster::local_etcd::LocalEtcd;
use assignd::log::{FsyncPolicy, LogSink};
use assignd::protocol::group::{GroupConfig, Record, TopicConfig};
use assignd::runtime::{RecordQueue, RecordSink, ShardStore};
use criterion::{BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main};

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/bench-cluster")
        .join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    dir
}

fn configure(group: &str, partitions: u32) -> Record {
    Record::GroupConfigured {
        group: group.to_owned(),
        config: GroupConfig::with_topics(vec![TopicConfig {
            name: "orders".into(),
            partitions,
        }]),
    }
}

/// The one record of a change: a config of `group` (about 60 bytes, as
/// a heartbeat's `MemberReconciled`; valid in any state, so that the
/// sinks' shadow cores accept it whatever came before).
fn change(group: &str, partitions: u32) -> Record {
    configure(group, partitions)
}

/// Runs `threads` submitters on each of `queues` (one group per queue)
/// as one criterion case named `name`.
fn commit_case(
    group: &mut BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    queues: &[RecordQueue],
    threads: usize,
) {
    let submitters = queues.len() * threads;
    let mut changes = 0u64;
    let wall = Instant::now();
    group.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let per_thread = iters.div_ceil(submitters as u64);
            changes += per_thread * submitters as u64;
            let start = Barrier::new(submitters + 1);
            let mut started = Instant::now();
            std::thread::scope(|scope| {
                for (q, queue) in queues.iter().enumerate() {
                    for t in 0..threads {
                        let start = &start;
                        let group = format!("bench-{q}");
                        scope.spawn(move || {
                            start.wait();
                            for i in 0..per_thread {
                                let record = change(&group, (t as u64 + i) as u32 % 64 + 1);
                                queue
                                    .submit(vec![record])
                                    .blocking_recv()
                                    .expect("the persist thread answers")
                                    .expect("durable");
                            }
                        });
                    }
                }
                start.wait();
                started = Instant::now();
            });
            started
                .elapsed()
                .mul_f64(iters as f64 / (per_thread * submitters as u64) as f64)
        });
    });
    eprintln!(
        "{name}: {changes} changes over {:.1} s: {:.0} changes/s overall",
        wall.elapsed().as_secs_f64(),
        changes as f64 / wall.elapsed().as_secs_f64()
    );
}

fn etcd_commit(c: &mut Criterion) {
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let etcd_dir = scratch("etcd");
    let cluster = match tokio.block_on(LocalEtcd::start(&etcd_dir, 3)) {
        Ok(cluster) => cluster,
        Err(e) => panic!("{e:#}"),
    };
    let mut group = c.benchmark_group("cluster");
    group
        .throughput(Throughput::Elements(1))
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(10));

    // The single host's store, side by side.
    for threads in [1usize, 64] {
        let dir = scratch(&format!("local-{threads}"));
        let sink = Arc::new(LogSink::open(&dir, FsyncPolicy::Always, &[]).expect("open"));
        sink.append(&[configure("bench-0", threads as u32)])
            .expect("configure");
        let queues = [RecordQueue::start(sink as Arc<dyn RecordSink>)];
        commit_case(
            &mut group,
            &format!("local-commit/1x{threads}"),
            &queues,
            threads,
        );
    }

    let store = Arc::new(tokio.block_on(async {
        let etcd = assignd::cluster::Etcd::connect(cluster.config("/bench/"))
            .await
            .expect("etcd");
        let lease = etcd
            .grant_lease(Duration::from_secs(600))
            .await
            .expect("a lease");
        EtcdStore::new(
            etcd,
            "bench",
            lease,
            tokio.handle().clone(),
            Duration::from_secs(60),
        )
    }));
    let mut next_shard: assignd::protocol::shard::ShardId = 0;
    for (shards, threads) in [(1usize, 1usize), (1, 64), (1, 256), (4, 64)] {
        let queues: Vec<RecordQueue> = (0..shards)
            .map(|q| {
                let shard = next_shard;
                next_shard += 1;
                let (_core, sink) = store.load(shard, 7).expect("a shard loads");
                sink.persist(&[configure(&format!("bench-{q}"), threads as u32)])
                    .expect("configure");
                RecordQueue::start(sink)
            })
            .collect();
        commit_case(
            &mut group,
            &format!("etcd-commit/{shards}x{threads}"),
            &queues,
            threads,
        );
    }
    group.finish();
    drop(cluster);
    let _ = std::fs::remove_dir_all(&etcd_dir);
}

criterion_group!(benches, etcd_commit);
criterion_main!(benches);
