//! Benchmarks of the assignor registry and of a hot swap: how long an
//! uploaded module takes to become usable, and how long a group takes to
//! get its new target after it is bound to another assignor.
//!
//! ```text
//! cargo bench -p assignd --bench registry
//! cargo bench -p assignd --bench registry -- upload_to_ready
//! cargo bench -p assignd --bench registry -- swap
//! ```
//!
//! - `upload_to_ready/<builtin>`: `Registry::upload` of a built-in's bytes,
//!   which is all `POST /v1/assignors` does besides reading the body:
//!   header check, sha256, compile with Cranelift (and write the compiled
//!   artifact to the engine's disk cache), world and import checks,
//!   `info()`, the self-test assignment (4 members × 48 tasks), and the
//!   durable store (`<sha256>.wasm` and `.json`, each fsynced, folder
//!   fsynced). Every iteration has a fresh engine (empty in-memory cache),
//!   a fresh, empty disk cache and a fresh modules folder, created and
//!   removed outside the timing, so each one really compiles.
//! - `upload_to_ready_cached/<builtin>`: the same upload into a fresh
//!   engine and modules folder whose disk cache already holds the compiled
//!   artifact (a host restarted on the same data dir, or a module deleted
//!   and uploaded again): `Component::deserialize_file` instead of a
//!   compile.
//! - `swap_to_target/<from>-><to>/100x10000`: a group of 100 dynamic
//!   members over 100 topics × 100 partitions, stable under `<from>`, in a
//!   runtime wired as `assignd serve` wires it (the record log with
//!   `--fsync always` on the disk under `target/`, the built-ins compiled
//!   and already called). Timed: from `Runtime::bind` to `<to>` (what
//!   `PUT /v1/groups/{group}/assignor` calls once it has parsed its JSON)
//!   to the moment the record log has made the `TargetInstalled` record of
//!   the new epoch durable. That includes the params check (one self-test
//!   assignment, on a blocking thread), the core's `bind` (binding record,
//!   epoch bump, the urgent assignor call's input) and its records (made
//!   durable while the call runs), the call on a blocking thread
//!   (`Registry::load` + the sandboxed `assign`), the core's
//!   `assignment_computed` (learner safety, the record) and the log's
//!   write and fsync of that record. Each iteration starts from a fresh
//!   runtime around a clone of the stable core and a fresh log folder,
//!   outside the timing.
//! - `swap_parts/<from>-><to>/<part>`: the pieces of a swap in isolation,
//!   so the figure above is explainable: `check_params`
//!   (`Registry::check_params`: the self-test group assigned with the
//!   binding's params), `core_swap` (the core's `bind`: records and the
//!   assignor input of 10,000 tasks), `load` (the registry's lookup of a
//!   compiled built-in: the sha256 of its bytes), `assign` (the sandboxed
//!   call: input check, instance, marshalling, the guest's work,
//!   validation of the answer) and `install` (the core's
//!   `assignment_computed`: learner safety and the `TargetInstalled`
//!   record).
//!
//! The group uses the default config (learners `host`, so a swap that
//! moves tasks to members that never reported a lag keeps them on their
//! holders and installs learners instead); the cases are
//! `range->sticky`, `sticky->learner-aware`, `learner-aware->round-robin`
//! (the one whose answer moves nearly every task), `round-robin->range`,
//! and `learner-aware->round-robin/learners-off` (the same swap with
//! learners off, so the host's learner safety does nothing). Before the swap cases the bench prints, per case, how many
//! tasks the new target moves and how many learners it creates, and the
//! mean time of the log's write and fsync of the `TargetInstalled` batch.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use assignd::log::{FsyncPolicy, LogSink};
use assignd::plugins::{BUILTIN_NAMES, EngineConfig, Limits, PluginEngine, builtin_component};
use assignd::protocol::core::{Coordinator, Heartbeat, HeartbeatResponse};
use assignd::protocol::group::{
    BindingSpec, GroupConfig, LearnerMode, Millis, Record, TopicConfig,
};
use assignd::registry::Registry;
use assignd::runtime::{Clock, RecordSink, Runtime, RuntimeConfig};
use assignd::sim::assign_natively;
use assignd_guest_sdk::testing::{GroupSpec, Subscriptions, group};
use criterion::{BatchSize, Criterion, SamplingMode, criterion_group, criterion_main};

/// A fresh folder under `target/` (on the same disk as the build: a
/// tmpfs `/tmp` would make fsync free).
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/bench-registry")
        .join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    dir
}

fn engine(cache_dir: Option<PathBuf>) -> Arc<PluginEngine> {
    Arc::new(
        PluginEngine::new(EngineConfig {
            cache_dir,
            ..EngineConfig::default()
        })
        .expect("an engine"),
    )
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

// ---------------------------------------------------------------- uploads

/// One upload of `bytes` into a fresh engine whose disk cache is `cache`
/// and a fresh modules folder `modules`; returns the time of the upload
/// alone.
fn upload_once(bytes: &[u8], cache: &Path, modules: &Path, expect_cached: bool) -> Duration {
    let _ = std::fs::remove_dir_all(modules);
    let registry = Registry::open(engine(Some(cache.to_owned())), modules).expect("a registry");
    let started = Instant::now();
    let (entry, created) = registry
        .upload("bench-upload", "1", bytes)
        .expect("a built-in uploads");
    let elapsed = started.elapsed();
    assert!(created, "a fresh registry stores the module");
    assert_eq!(entry.module.from_disk_cache, expect_cached);
    drop(registry);
    elapsed
}

/// The parts of an upload, measured step by step on a fresh engine with an
/// empty cache, means of `runs`: loading (and within it, compiling), the
/// self-test call, and the upload of the now compiled module (self-test +
/// store).
fn upload_breakdown(name: &str, bytes: &[u8], dir: &Path, runs: u32) {
    let (mut load, mut compile, mut self_test, mut rest) = (0.0, 0.0, 0.0, 0.0);
    let input = group(&GroupSpec::grid(4, 12, 3, Subscriptions::Homogeneous));
    for run in 0..runs {
        let base = dir.join(format!("breakdown-{run}"));
        let engine = engine(Some(base.join("cache")));
        let started = Instant::now();
        let module = engine.load(bytes).expect("loads");
        load += ms(started.elapsed());
        compile += module.compile_ms;
        let started = Instant::now();
        engine
            .assign(&module, &input, &Limits::default())
            .expect("self-test input");
        self_test += ms(started.elapsed());
        let registry = Registry::open(engine, &base.join("modules")).expect("a registry");
        let started = Instant::now();
        registry.upload("x", "1", bytes).expect("uploads");
        rest += ms(started.elapsed());
        drop(registry);
        let _ = std::fs::remove_dir_all(&base);
    }
    let n = f64::from(runs);
    eprintln!(
        "upload parts {name} ({} KB, mean of {runs}): load {:.1} ms (of which compile and write of the cached artifact {:.1} ms), \
         self-test call {:.2} ms, upload of the loaded module (sha256, self-test, store with 4 fsyncs) {:.2} ms",
        bytes.len() / 1024,
        load / n,
        compile / n,
        self_test / n,
        rest / n,
    );
}

fn uploads(c: &mut Criterion) {
    let mut cold = c.benchmark_group("upload_to_ready");
    cold.sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    for &name in BUILTIN_NAMES {
        let bytes = builtin_component(name).expect("a built-in");
        let dir = scratch(&format!("upload-{name}"));
        upload_breakdown(name, bytes, &dir, 3);
        cold.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for i in 0..iters {
                    let cache = dir.join(format!("cache-{i}"));
                    total += upload_once(bytes, &cache, &dir.join("modules"), false);
                    let _ = std::fs::remove_dir_all(&cache);
                }
                total
            })
        });
        let _ = std::fs::remove_dir_all(&dir);
    }
    cold.finish();

    let mut cached = c.benchmark_group("upload_to_ready_cached");
    cached
        .sampling_mode(SamplingMode::Flat)
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2));
    for &name in BUILTIN_NAMES {
        let bytes = builtin_component(name).expect("a built-in");
        let dir = scratch(&format!("upload-cached-{name}"));
        let cache = dir.join("cache");
        // Compile once: the artifact is now in `cache`.
        upload_once(bytes, &cache, &dir.join("modules"), false);
        cached.bench_function(name, |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| upload_once(bytes, &cache, &dir.join("modules"), true))
                    .sum()
            })
        });
        let _ = std::fs::remove_dir_all(&dir);
    }
    cached.finish();
}

// ------------------------------------------------------------------ swaps

const GROUP: &str = "bench";
const MEMBERS: usize = 100;
const TOPICS: u32 = 100;
const PARTITIONS: u32 = 100;
const SEED: u64 = 1;

fn topics() -> Vec<String> {
    (0..TOPICS).map(|t| format!("topic-{t}")).collect()
}

/// The heartbeat a member sends after `last`: its epoch and what it owns.
fn beat(last: &HeartbeatResponse) -> Heartbeat {
    Heartbeat {
        member_id: last.member_id.clone(),
        member_epoch: last.member_epoch as i64,
        topics: None,
        owned: Some(last.active.iter().cloned().collect()),
        ..Heartbeat::join(GROUP, None, Vec::new())
    }
}

/// A core with one group of `MEMBERS` members over `TOPICS × PARTITIONS`
/// tasks, stable under `assignor` (answered natively: the same code as
/// the component), with learner mode `learners`; returns it and the time
/// of its last input.
fn stable_core(assignor: &str, learners: LearnerMode) -> (Coordinator, Millis) {
    let mut core = Coordinator::new(SEED);
    let mut config = GroupConfig::with_topics(
        topics()
            .into_iter()
            .map(|name| TopicConfig {
                name,
                partitions: PARTITIONS,
            })
            .collect(),
    );
    config.learners = learners;
    config.assignor = assignor.to_owned();
    let expansion = config.expansion_timeout_ms;
    core.configure(GROUP, config, 0).expect("a valid config");
    let mut last: Vec<HeartbeatResponse> = (0..MEMBERS)
        .map(|_| {
            core.heartbeat(&Heartbeat::join(GROUP, None, topics()), 0)
                .expect("join")
                .0
        })
        .collect();
    let now = expansion;
    let out = core.tick(now);
    assert_eq!(out.assignor_calls.len(), 1, "one target for the fleet");
    for call in out.assignor_calls {
        let answer = assign_natively(&call.assignor, &call.input);
        core.assignment_computed(GROUP, call.epoch, answer, now);
    }
    for _ in 0..3 {
        for member in &mut last {
            *member = core.heartbeat(&beat(member), now).expect("heartbeat").0;
        }
    }
    let group = core.group(GROUP).expect("configured");
    assert!(
        group.is_stable(),
        "the group under {assignor} is not stable"
    );
    assert_eq!(
        last.iter().map(|m| m.active.len()).sum::<usize>(),
        (TOPICS * PARTITIONS) as usize
    );
    (core, now)
}

/// The record sink of a swap: the real record log, and the time the
/// batch holding the new target was made durable.
struct Probe {
    log: LogSink,
    /// (write + fsync time, when it was durable) of the `TargetInstalled`
    /// batch.
    installed: Mutex<Option<(Duration, Instant)>>,
    signal: Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
}

impl RecordSink for Probe {
    fn persist(&self, records: &[Record]) -> anyhow::Result<()> {
        let started = Instant::now();
        self.log.append(records)?;
        let durable = Instant::now();
        if records
            .iter()
            .any(|r| matches!(r, Record::TargetInstalled { .. }))
        {
            *self.installed.lock().unwrap() = Some((durable - started, durable));
            if let Some(signal) = self.signal.lock().unwrap().take() {
                let _ = signal.send(());
            }
        }
        Ok(())
    }
}

/// One swap's setup: a runtime around a clone of the stable core, over a
/// fresh record log.
struct Swap {
    runtime: Arc<Runtime>,
    probe: Arc<Probe>,
    installed: tokio::sync::oneshot::Receiver<()>,
}

/// The bench's one shard: the stable group, its records to the probe.
struct OneShard {
    core: Mutex<Option<Coordinator>>,
    sink: Arc<Probe>,
}

impl assignd::runtime::ShardStore for OneShard {
    fn load(
        &self,
        _shard: u32,
        _seed: u64,
    ) -> anyhow::Result<(Coordinator, Arc<dyn assignd::runtime::RecordSink>)> {
        let core = self.core.lock().unwrap().take().expect("loaded once");
        Ok((core, self.sink.clone()))
    }

    fn unloaded(&self, _shard: u32, _core: Coordinator) {}
}

fn swap_setup(stable: &Coordinator, now: Millis, registry: &Arc<Registry>, log: &Path) -> Swap {
    let _ = std::fs::remove_dir_all(log);
    let (signal, installed) = tokio::sync::oneshot::channel();
    let probe = Arc::new(Probe {
        log: LogSink::open_with_state(log, FsyncPolicy::Always, stable.clone()).expect("a log"),
        installed: Mutex::new(None),
        signal: Mutex::new(Some(signal)),
    });
    let runtime = Runtime::start(
        RuntimeConfig {
            seed: SEED,
            limits: Limits::default(),
            admission: Default::default(),
            shard_count: 1,
            unreached_grace_ms: 0,
        },
        Clock::manual(now + 1),
        Arc::new(OneShard {
            core: Mutex::new(Some(stable.clone())),
            sink: probe.clone(),
        }),
        registry.clone(),
    )
    .expect("the one shard loads");
    Swap {
        runtime,
        probe,
        installed,
    }
}

/// Waits until the runtime's assignor call has finished (its answer
/// recorded), so nothing of this swap runs into the next one.
async fn settle(runtime: &Runtime) {
    while runtime.calls_finished() == 0 {
        tokio::time::sleep(Duration::from_micros(100)).await;
    }
}

/// The swap cases: every built-in is the new assignor once, with the
/// default learner mode (`host`); and the one swap that moves tasks once
/// more with learners off, to show what the host's learner safety costs.
const SWAPS: [(&str, &str, LearnerMode); 5] = [
    ("range", "sticky", LearnerMode::Host),
    ("sticky", "learner-aware", LearnerMode::Host),
    ("learner-aware", "round-robin", LearnerMode::Host),
    ("round-robin", "range", LearnerMode::Host),
    ("learner-aware", "round-robin", LearnerMode::Off),
];

fn swaps(c: &mut Criterion) {
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let dir = scratch("swap");
    // The built-ins compiled once, as `assignd serve` preloads them.
    let registry = Arc::new(Registry::in_memory(engine(None)));
    for &name in BUILTIN_NAMES {
        registry.engine().load_builtin(name).expect("a built-in");
    }
    let shape = format!("{MEMBERS}x{}", TOPICS * PARTITIONS);
    let mut stables = Vec::new();
    for (from, to, learners) in SWAPS {
        let (core, now) = stable_core(from, learners);
        let case = match learners {
            LearnerMode::Host => format!("{from}->{to}"),
            _ => format!("{from}->{to}/learners-{learners:?}").to_lowercase(),
        };
        describe_swap(&core, now, &case, to, &registry);
        stables.push((case, to, core, now));
    }

    let mut whole = c.benchmark_group("swap_to_target");
    whole
        .sampling_mode(SamplingMode::Flat)
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    for (case, to, stable, now) in &stables {
        let log = dir.join(format!("log-{}", case.replace('/', "-")));
        let mut fsyncs = Vec::new();
        whole.bench_function(format!("{case}/{shape}"), |b| {
            b.iter_custom(|iters| {
                tokio.block_on(async {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let swap = swap_setup(stable, *now, &registry, &log);
                        let started = Instant::now();
                        let changed = swap
                            .runtime
                            .bind(GROUP, BindingSpec::assignor(to))
                            .await
                            .expect("bind");
                        assert!(changed);
                        swap.installed.await.expect("a target is installed");
                        let (fsync, durable) = swap.probe.installed.lock().unwrap().expect("set");
                        total += durable - started;
                        fsyncs.push(fsync);
                        settle(&swap.runtime).await;
                    }
                    total
                })
            })
        });
        let mean = fsyncs.iter().sum::<Duration>() / fsyncs.len().max(1) as u32;
        eprintln!(
            "swap {case}: the log's write + fsync of the TargetInstalled batch: mean {:.3} ms over {} swaps",
            ms(mean),
            fsyncs.len()
        );
    }
    whole.finish();

    let mut parts = c.benchmark_group("swap_parts");
    parts
        .sampling_mode(SamplingMode::Flat)
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    let limits = Limits::default();
    for (case, to, stable, now) in &stables {
        let now = now + 1;
        let mut bound = stable.clone();
        let out = bound
            .bind(GROUP, BindingSpec::assignor(to), now)
            .expect("bind");
        let call = out.assignor_calls.into_iter().next().expect("a call");
        parts.bench_function(format!("{case}/core_swap"), |b| {
            b.iter_batched(
                || stable.clone(),
                |mut core| {
                    let out = core.bind(GROUP, BindingSpec::assignor(to), now);
                    (core, out)
                },
                BatchSize::LargeInput,
            )
        });
        let no_params = std::collections::BTreeMap::new();
        parts.bench_function(format!("{case}/check_params"), |b| {
            b.iter(|| registry.check_params(to, &no_params).expect("accepted"))
        });
        parts.bench_function(format!("{case}/load"), |b| {
            b.iter(|| registry.load(to).expect("a built-in"))
        });
        let module = registry.load(to).expect("a built-in");
        parts.bench_function(format!("{case}/assign"), |b| {
            b.iter(|| {
                registry
                    .engine()
                    .assign(&module, &call.input, &limits)
                    .expect("an answer")
            })
        });
        let answer = registry
            .engine()
            .assign(&module, &call.input, &limits)
            .expect("an answer")
            .assignment;
        parts.bench_function(format!("{case}/install"), |b| {
            b.iter_batched(
                || bound.clone(),
                |mut core| {
                    let out = core.assignment_computed(
                        GROUP,
                        call.epoch,
                        Ok::<_, String>(answer.clone()),
                        now,
                    );
                    (core, out)
                },
                BatchSize::LargeInput,
            )
        });
    }
    parts.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Prints what the swap `from -> to` changes (moves, learners) and the
/// call's own stats, once, before the timed runs.
fn describe_swap(stable: &Coordinator, now: Millis, case: &str, to: &str, registry: &Registry) {
    let mut core = stable.clone();
    let out = core
        .bind(GROUP, BindingSpec::assignor(to), now + 1)
        .expect("bind");
    let call = out.assignor_calls.into_iter().next().expect("a call");
    let module = registry.load(to).expect("a built-in");
    let outcome = registry
        .engine()
        .assign(&module, &call.input, &Limits::default())
        .expect("an answer");
    let answer_moves = call
        .input
        .active_owner
        .iter()
        .zip(&outcome.assignment.active_owner)
        .filter(|(old, new)| old != new)
        .count();
    let before = core.group(GROUP).expect("a group").clone();
    core.assignment_computed(
        GROUP,
        call.epoch,
        Ok::<_, String>(outcome.assignment),
        now + 1,
    );
    let after = core.group(GROUP).expect("a group");
    let (mut moved, mut learners) = (0, 0);
    for (slot, target) in after.target.iter() {
        let old = before.target_of(slot);
        moved += target.active.difference(&old.active).count();
        learners += target.learner.len();
    }
    let s = outcome.stats;
    eprintln!(
        "swap {case}: the answer moves {answer_moves} tasks; the installed target moves {moved} active tasks and has {learners} learners; \
         call: instantiate {:.3} ms, call {:.3} ms, validate {:.3} ms, fuel {:.1} M",
        s.instantiate_ms,
        s.call_ms,
        s.validate_ms,
        s.fuel as f64 / 1e6
    );
}

criterion_group!(benches, uploads, swaps);
criterion_main!(benches);
