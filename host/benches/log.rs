//! Benchmarks of the record log (docs/benchmarks.md, "Record log").
//!
//! ```text
//! cargo bench -p assignd --bench log                  # everything
//! cargo bench -p assignd --bench log -- group-commit  # criterion filter
//! ```
//!
//! - `log/group-commit/<threads>`: durable changes per second. Each of
//!   `<threads>` threads submits one small change (one `MemberReconciled`
//!   record, as a heartbeat writes) at a time through the runtime's
//!   `RecordQueue` into a `LogSink` with `FsyncPolicy::Always` in a folder
//!   under `target/`, and waits until it is durable before the next; the
//!   queue hands the sink every batch that piled up during the last fsync.
//!   One iteration is one durable change, so criterion's throughput line is
//!   changes per second. After each case the bench prints the mean batch
//!   (records per fsync) and the last fsync's duration.
//! - `log/recovery/10000x10`: `assignd::log::recover` of a compacted
//!   data dir holding 10,000 stable groups of 10 static members (30 tasks
//!   each): the scan, each record checked (`check_replay`) and moved into
//!   a fresh `Coordinator` (`apply_owned`), as `assignd serve` does.
//!   `log/recovery-with-writer/10000x10` adds what serve does next: a copy
//!   of the state for the writer's shadow and `LogSink::open_with_state`.
//!   The data dir is built once with the protocol core: configure, join,
//!   the sticky assignor answered natively, heartbeats until stable, every
//!   record through a `LogSink`, then `compact_now()`.
//! - Before the recovery cases the bench prints the log's size before and
//!   after compaction and the size of each group's latest snapshot (the
//!   last `GroupSnapshot` the core wrote for it), summed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use assignd::log::frame::encode;
use assignd::log::{FsyncPolicy, LogSink, ScanMode, scan};
use assignd::protocol::core::{Coordinator, Heartbeat, HeartbeatResponse, Output};
use assignd::protocol::group::{GroupConfig, Record, Slot, Task, TopicConfig};
use assignd::protocol::reconcile::MemberAssignment;
use assignd::runtime::{RecordQueue, RecordSink};
use assignor_sticky::Sticky;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

/// A fresh folder under `target/` (on the same disk as the build: a
/// tmpfs `/tmp` would make fsync free).
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/bench-log")
        .join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    dir
}

const GROUP: &str = "bench";

/// The one record of a change: `slot` now holds one task at `epoch`.
fn change(slot: &str, task: u32, epoch: u64) -> Record {
    Record::MemberReconciled {
        group: GROUP.to_owned(),
        slot: Slot::from_key(slot),
        assignment: MemberAssignment {
            epoch,
            previous_epoch: epoch.saturating_sub(1),
            active: [Task::new("orders", task)].into(),
            ..MemberAssignment::new()
        },
    }
}

fn group_commit(c: &mut Criterion) {
    let mut group = c.benchmark_group("log/group-commit");
    group
        .throughput(Throughput::Elements(1))
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(10));
    for threads in [1usize, 64, 256] {
        let dir = scratch(&format!("group-commit-{threads}"));
        let sink = Arc::new(LogSink::open(&dir, FsyncPolicy::Always, &[]).expect("open"));
        sink.append(&[Record::GroupConfigured {
            group: GROUP.to_owned(),
            config: GroupConfig::with_topics(vec![TopicConfig {
                name: "orders".into(),
                partitions: threads as u32,
            }]),
        }])
        .expect("configure");
        let queue = RecordQueue::start(sink.clone() as Arc<dyn RecordSink>);
        let slots: Vec<String> = (0..threads).map(|t| format!("m-{t:04}")).collect();
        let mut epoch = 0u64;
        let (records_before, fsyncs_before, fsync_micros_before) = (
            sink.stats.records.load(Ordering::Relaxed),
            sink.stats.fsyncs.load(Ordering::Relaxed),
            sink.stats.fsync_micros.load(Ordering::Relaxed),
        );
        let wall = Instant::now();
        group.bench_function(threads.to_string(), |b| {
            b.iter_custom(|iters| {
                let per_thread = iters.div_ceil(threads as u64);
                epoch += per_thread;
                let start = Barrier::new(threads + 1);
                let mut started = Instant::now();
                std::thread::scope(|scope| {
                    for (t, slot) in slots.iter().enumerate() {
                        let (queue, start) = (&queue, &start);
                        scope.spawn(move || {
                            start.wait();
                            for i in 0..per_thread {
                                let record = change(slot, t as u32, epoch - per_thread + i + 1);
                                queue
                                    .submit(vec![record])
                                    .blocking_recv()
                                    .expect("the persist thread answers")
                                    .expect("durable");
                            }
                        });
                    }
                    start.wait();
                    started = Instant::now();
                });
                // Per change: the threads did `per_thread * threads` of
                // them, at least `iters`.
                started
                    .elapsed()
                    .mul_f64(iters as f64 / (per_thread * threads as u64) as f64)
            });
        });
        let wall = wall.elapsed().as_secs_f64();
        let records = sink.stats.records.load(Ordering::Relaxed) - records_before;
        let fsyncs = sink.stats.fsyncs.load(Ordering::Relaxed) - fsyncs_before;
        let fsync_micros = sink.stats.fsync_micros.load(Ordering::Relaxed) - fsync_micros_before;
        if records > 0 {
            // The whole case, warm-up included: a check on criterion's
            // estimate when the fsync latency swings.
            eprintln!(
                "log/group-commit/{threads}: {records} records in {fsyncs} fsyncs ({:.1} per fsync, mean fsync {:.0} µs) over {wall:.1} s: {:.0} changes/s overall",
                records as f64 / fsyncs.max(1) as f64,
                fsync_micros as f64 / fsyncs.max(1) as f64,
                records as f64 / wall,
            );
        }
        drop(queue);
        let _ = std::fs::remove_dir_all(&dir);
    }
    group.finish();
}

const GROUPS: usize = 10_000;
const MEMBERS: usize = 10;
const PARTITIONS: u32 = 30;

/// Feeds an output's assignor calls to the sticky assignor natively, as
/// the runtime would through the wasm engine; every record goes to
/// `records`.
fn absorb(core: &mut Coordinator, out: Output, now: u64, records: &mut Vec<Record>) {
    records.extend(out.records);
    for call in out.assignor_calls {
        let answer =
            assignd_guest_sdk::harness::run::<Sticky>(&call.input).map_err(|e| e.to_string());
        let more = core.assignment_computed(&call.group, call.epoch, answer, now);
        records.extend(more.records);
    }
}

/// What building the data dir measured.
struct Built {
    dir: PathBuf,
    history_bytes: u64,
    history_records: u64,
    compacted_bytes: u64,
    latest_snapshot_bytes: u64,
}

/// 10,000 stable groups of 10 static members, every record through a
/// `LogSink`, then compacted.
fn build_data_dir() -> Built {
    let started = Instant::now();
    let dir = scratch("recovery");
    let sink = LogSink::open(&dir, FsyncPolicy::Never, &[]).expect("open");
    let mut core = Coordinator::new(7);
    let config = GroupConfig {
        expansion_timeout_ms: 10,
        ..GroupConfig::with_topics(vec![TopicConfig {
            name: "orders".into(),
            partitions: PARTITIONS,
        }])
    };
    let names: Vec<String> = (0..GROUPS).map(|g| format!("group-{g:05}")).collect();
    let mut records = Vec::new();
    let mut history_records = 0u64;
    // The size of each group's latest snapshot, as the core wrote it.
    let mut latest: BTreeMap<String, u64> = BTreeMap::new();
    let mut flush = |records: &mut Vec<Record>| {
        history_records += records.len() as u64;
        for record in records.iter() {
            if let Record::GroupSnapshot { group, .. } = record {
                let mut bytes = Vec::new();
                encode(record, &mut bytes);
                latest.insert(group.clone(), bytes.len() as u64);
            }
        }
        sink.append(records).expect("append");
        records.clear();
    };
    // Every group and member arrives at 0; one tick at 10 asks every
    // group's assignor; then the members heartbeat until stable.
    let mut responses: Vec<Vec<HeartbeatResponse>> = Vec::with_capacity(GROUPS);
    for name in &names {
        let out = core.configure(name, config.clone(), 0).expect("configure");
        absorb(&mut core, out, 0, &mut records);
        let mut members = Vec::with_capacity(MEMBERS);
        for m in 0..MEMBERS {
            let request =
                Heartbeat::join(name, Some(&format!("worker-{m}")), vec!["orders".into()]);
            let (response, out) = core.heartbeat(&request, 0).expect("join");
            absorb(&mut core, out, 0, &mut records);
            members.push(response);
        }
        responses.push(members);
        flush(&mut records);
    }
    let out = core.tick(10);
    absorb(&mut core, out, 10, &mut records);
    flush(&mut records);
    for round in 0..3 {
        for (name, members) in names.iter().zip(&mut responses) {
            for response in members.iter_mut() {
                let request = Heartbeat {
                    member_id: response.member_id.clone(),
                    member_epoch: response.member_epoch as i64,
                    owned: Some(response.active.iter().cloned().collect()),
                    topics: None,
                    ..Heartbeat::join(name, None, vec![])
                };
                let (next, out) = core.heartbeat(&request, 20 + round).expect("heartbeat");
                absorb(&mut core, out, 20 + round, &mut records);
                *response = next;
            }
            flush(&mut records);
        }
    }
    let unstable = core.groups().filter(|g| !g.is_stable()).count();
    assert_eq!(unstable, 0, "every group is stable");
    assert_eq!(latest.len(), GROUPS, "every group wrote a snapshot");
    let history_bytes = sink.stats.bytes_written.load(Ordering::Relaxed);
    sink.compact_now().expect("compact");
    let compacted_bytes = sink.stats.log_bytes.load(Ordering::Relaxed);
    eprintln!(
        "log/recovery: built {GROUPS} groups × {MEMBERS} members ({PARTITIONS} tasks each) in {:.1} s; {} compactions on the way",
        started.elapsed().as_secs_f64(),
        sink.stats.compactions.load(Ordering::Relaxed)
    );
    Built {
        dir,
        history_bytes,
        history_records,
        compacted_bytes,
        latest_snapshot_bytes: latest.values().sum(),
    }
}

/// Scan and replay, as `assignd serve` does: each record checked and
/// moved into the core (`apply_owned`: a snapshot's state is not cloned).
fn recover(dir: &Path) -> Coordinator {
    assignd::log::recover(dir, Coordinator::new(1))
        .expect("recover")
        .core
}

/// Everything `assignd serve` does before it listens, but the wasm engine:
/// scan, replay, and the writer opened with a copy of the state.
fn recover_with_writer(dir: &Path) -> (LogSink, Coordinator) {
    let core = recover(dir);
    let sink = LogSink::open_with_state(dir, FsyncPolicy::Always, core.clone()).expect("open");
    (sink, core)
}

fn recovery(c: &mut Criterion) {
    let built = build_data_dir();
    let dir = &built.dir;
    let on_disk: u64 = std::fs::read_dir(dir)
        .expect("the log folder")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .map(|p| p.metadata().expect("metadata").len())
        .sum();
    assert_eq!(on_disk, built.compacted_bytes);
    eprintln!(
        "log/size: history {} records, {:.2} MB written; after compaction {:.2} MB ({:.0} B per group); latest snapshots {:.2} MB; compacted / snapshots = {:.3}",
        built.history_records,
        built.history_bytes as f64 / 1e6,
        built.compacted_bytes as f64 / 1e6,
        built.compacted_bytes as f64 / GROUPS as f64,
        built.latest_snapshot_bytes as f64 / 1e6,
        built.compacted_bytes as f64 / built.latest_snapshot_bytes as f64,
    );
    // A few timed passes of each part, for the split.
    for _ in 0..3 {
        let started = Instant::now();
        let read = scan(dir, ScanMode::Check).expect("scan");
        let scanned = started.elapsed();
        let records = read.records.len();
        drop(read);
        let started = Instant::now();
        let core = recover(dir);
        let replayed = started.elapsed();
        let started = Instant::now();
        let shadow = core.clone();
        let cloned = started.elapsed();
        let started = Instant::now();
        let sink = LogSink::open_with_state(dir, FsyncPolicy::Always, shadow).expect("open");
        let opened = started.elapsed();
        assert_eq!(core.groups().count(), GROUPS);
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        eprintln!(
            "log/recovery split: scan keeping the records (as log check) {:.0} ms ({records} records), recover (scan, check, move into the core) {:.0} ms, clone for the writer {:.0} ms, LogSink::open_with_state {:.0} ms",
            ms(scanned),
            ms(replayed),
            ms(cloned),
            ms(opened),
        );
        drop((sink, core));
    }

    let mut group = c.benchmark_group("log");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(25));
    let id = format!("{GROUPS}x{MEMBERS}");
    // What `assignd serve` keeps (the core, the writer) is dropped outside
    // the timing.
    group.bench_function(format!("recovery/{id}"), |b| {
        b.iter_with_large_drop(|| recover(dir))
    });
    group.bench_function(format!("recovery-with-writer/{id}"), |b| {
        b.iter_with_large_drop(|| recover_with_writer(dir))
    });
    group.finish();
    let _ = std::fs::remove_dir_all(dir);
}

criterion_group!(log, group_commit, recovery);
criterion_main!(log);
