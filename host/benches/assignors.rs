//! Benchmarks of the built-in assignors, natively and inside the wasm
//! sandbox, on the grid of Kafka's `ServerSideAssignorBenchmark`, plus the
//! per-call overhead of the sandbox.
//!
//! ```text
//! cargo bench -p assignd --bench assignors                          # default subset
//! ASSIGND_BENCH_GRID=full cargo bench -p assignd --bench assignors  # whole grid
//! cargo bench -p assignd --bench assignors -- sticky/wasm           # criterion filter
//! ```
//!
//! Ids are `<assignor>/<native|wasm>/<full|incremental>/<homogeneous|heterogeneous>/<members>x<partitions per member>`
//! and `overhead/...`. The grid: members {100, 1000, 10000} × partitions
//! per member {10, 50}; 100 topics (fewer when there are fewer partitions);
//! homogeneous subscriptions (every member takes every topic) or
//! heterogeneous ones (`Subscriptions::Heterogeneous { groups: 3 }`: member
//! `m` is in group `m % 3` and subscribes to every topic `t` with
//! `t % 3 != m % 3`, so each topic is shared by two of the three groups).
//! FULL starts from no previous assignment; INCREMENTAL adds one member
//! (subscribed like member index `members` would be) to a group settled on
//! the assignor's own previous answer.
//!
//! The wasm figures go through `PluginEngine::assign`: input check, a fresh
//! store and instance, copying the input in and the answer out, the guest's
//! work, and validation of the answer. The native figures are the bare
//! `Assignor::assign` call. Before each wasm case the bench prints, on
//! stderr, the mean `CallStats` split (instantiate / call / validate) of a
//! few calls.

use std::hint::black_box;
use std::time::Duration;

use assignd::plugins::{EngineConfig, Limits, LoadedModule, PluginEngine};
use assignd_guest_sdk::testing::{self, GroupSpec, Subscriptions};
use assignd_guest_sdk::validate::{InputLimits, check_assignment, check_input};
use assignd_guest_sdk::{AssignError, Assignment, Assignor, GroupInput};
use criterion::{Criterion, criterion_group, criterion_main};

type NativeFn = fn(&GroupInput) -> Result<Assignment, AssignError>;

/// The built-in assignors: name (as in `load_builtin`) and native entry.
const ASSIGNORS: &[(&str, NativeFn)] = &[
    ("range", <assignor_range::Range as Assignor>::assign),
    (
        "round-robin",
        <assignor_round_robin::RoundRobin as Assignor>::assign,
    ),
    ("sticky", <assignor_sticky::Sticky as Assignor>::assign),
    (
        "learner-aware",
        <assignor_learner_aware::LearnerAware as Assignor>::assign,
    ),
];

const TOPICS: u32 = 100;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Native,
    Wasm,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Full,
    Incremental,
}

#[derive(Clone, Copy)]
struct Case {
    assignor: usize,
    mode: Mode,
    kind: Kind,
    heterogeneous: bool,
    members: u32,
    partitions_per_member: u32,
}

impl Case {
    fn id(&self) -> String {
        format!(
            "{}/{}/{}/{}/{}x{}",
            ASSIGNORS[self.assignor].0,
            match self.mode {
                Mode::Native => "native",
                Mode::Wasm => "wasm",
            },
            match self.kind {
                Kind::Full => "full",
                Kind::Incremental => "incremental",
            },
            if self.heterogeneous {
                "heterogeneous"
            } else {
                "homogeneous"
            },
            self.members,
            self.partitions_per_member
        )
    }

    fn tasks(&self) -> u64 {
        u64::from(self.members) * u64::from(self.partitions_per_member)
    }

    fn spec(&self, members: u32) -> GroupSpec {
        let partitions = self.members * self.partitions_per_member;
        let subscriptions = if self.heterogeneous {
            Subscriptions::Heterogeneous { groups: 3 }
        } else {
            Subscriptions::Homogeneous
        };
        GroupSpec {
            partitions,
            ..GroupSpec::grid(
                members,
                self.partitions_per_member,
                TOPICS.min(partitions),
                subscriptions,
            )
        }
    }

    /// The input this case feeds its assignor.
    fn input(&self) -> Result<GroupInput, AssignError> {
        let full = testing::group(&self.spec(self.members));
        match self.kind {
            Kind::Full => Ok(full),
            Kind::Incremental => {
                let previous = (ASSIGNORS[self.assignor].1)(&full)?;
                let settled = testing::settle(&full, &previous);
                // The member that index `members` would be under the same
                // spec (same subscription rule), over the same topics.
                let topics = testing::spec_topics(&self.spec(self.members), self.members);
                Ok(testing::add_member(&settled, "newcomer", topics))
            }
        }
    }
}

/// The cases to run: the whole grid with `ASSIGND_BENCH_GRID=full`, a
/// representative subset otherwise.
fn cases() -> Vec<Case> {
    let full_grid = std::env::var("ASSIGND_BENCH_GRID").is_ok_and(|v| v == "full");
    let mut cases = Vec::new();
    let mut push_all = |assignor, kind, heterogeneous, members, partitions_per_member| {
        for mode in [Mode::Native, Mode::Wasm] {
            cases.push(Case {
                assignor,
                mode,
                kind,
                heterogeneous,
                members,
                partitions_per_member,
            });
        }
    };
    let sizes: &[(u32, u32)] = if full_grid {
        &[
            (100, 10),
            (100, 50),
            (1000, 10),
            (1000, 50),
            (10000, 10),
            (10000, 50),
        ]
    } else {
        &[(1000, 10)]
    };
    for &(members, ppm) in sizes {
        for assignor in 0..ASSIGNORS.len() {
            for heterogeneous in [false, true] {
                for kind in [Kind::Full, Kind::Incremental] {
                    push_all(assignor, kind, heterogeneous, members, ppm);
                }
            }
        }
    }
    // The shapes of sticky's targets in wasm (docs/benchmarks.md; Kafka's
    // published uniform figures are for these shapes): 10,000 × 100,000
    // homogeneous full and incremental, 5,000 × 250,000 heterogeneous full.
    let sticky = ASSIGNORS
        .iter()
        .position(|a| a.0 == "sticky")
        .expect("sticky is built in");
    if !full_grid {
        push_all(sticky, Kind::Full, false, 10000, 10);
        push_all(sticky, Kind::Incremental, false, 10000, 10);
    }
    push_all(sticky, Kind::Full, true, 5000, 50);
    cases
}

/// Criterion's own filter would skip a case anyway; this skips building its
/// input (and its pre-bench calls) too. Plain text, `(a|b)` groups and the
/// anchors `^` and `$` are understood here; a filter with anything else is
/// left to criterion alone.
fn filter_skips(id: &str) -> bool {
    let mut args = std::env::args().skip(1);
    let mut filter = None;
    while let Some(arg) = args.next() {
        if arg.starts_with('-') {
            // Options criterion takes with a value.
            if matches!(
                arg.as_str(),
                "--save-baseline"
                    | "-s"
                    | "--baseline"
                    | "-b"
                    | "--load-baseline"
                    | "--profile-time"
                    | "--sample-size"
                    | "--warm-up-time"
                    | "--measurement-time"
                    | "--nresamples"
                    | "--noise-threshold"
                    | "--confidence-level"
                    | "--significance-level"
                    | "--format"
                    | "--color"
                    | "-c"
                    | "--output-format"
                    | "--plotting-backend"
            ) {
                args.next();
            }
            continue;
        }
        filter = Some(arg);
    }
    let Some(filter) = filter else { return false };
    let start = filter.starts_with('^');
    let end = filter.ends_with('$') && filter.len() > usize::from(start);
    let body = &filter[usize::from(start)..filter.len() - usize::from(end)];
    let mut chars = body.chars().peekable();
    let Some((branches, texts)) = expand_alternatives(&mut chars) else {
        return false;
    };
    // `^a|b$` anchors each branch on its own side: left to criterion.
    if chars.next().is_some() || (branches > 1 && (start || end)) {
        return false;
    }
    !texts.iter().any(|text| match (start, end) {
        (true, true) => id == text,
        (true, false) => id.starts_with(text.as_str()),
        (false, true) => id.ends_with(text.as_str()),
        (false, false) => id.contains(text.as_str()),
    })
}

/// Most plain strings a filter's groups may expand to before the filter
/// is left to criterion.
const FILTER_EXPANSIONS_MAX: usize = 1024;

/// The plain strings `a|b|...` stands for (each branch plain text and
/// `(...)` groups), with its count of top-level branches; `None` for
/// anything else. Stops before a `)` it does not own.
fn expand_alternatives(
    chars: &mut std::iter::Peekable<std::str::Chars>,
) -> Option<(usize, Vec<String>)> {
    let mut texts = Vec::new();
    let mut branches = 0;
    loop {
        let mut branch = vec![String::new()];
        while let Some(&c) = chars.peek() {
            match c {
                '|' | ')' => break,
                '(' => {
                    chars.next();
                    let (_, inner) = expand_alternatives(chars)?;
                    if chars.next() != Some(')') {
                        return None;
                    }
                    branch = branch
                        .iter()
                        .flat_map(|head| inner.iter().map(move |tail| format!("{head}{tail}")))
                        .collect();
                }
                c if c.is_alphanumeric() || "/-_".contains(c) => {
                    chars.next();
                    branch.iter_mut().for_each(|text| text.push(c));
                }
                _ => return None,
            }
            if branch.len() > FILTER_EXPANSIONS_MAX {
                return None;
            }
        }
        texts.extend(branch);
        branches += 1;
        if chars.peek() != Some(&'|') {
            return Some((branches, texts));
        }
        chars.next();
    }
}

fn engine() -> PluginEngine {
    PluginEngine::new(EngineConfig::default()).expect("wasm engine")
}

/// Loads every built-in once; an assignor that does not load (another
/// change may be in flight) is reported and its wasm cases skipped.
fn modules(engine: &PluginEngine) -> Vec<Option<std::sync::Arc<LoadedModule>>> {
    ASSIGNORS
        .iter()
        .map(|(name, _)| match engine.load_builtin(name) {
            Ok(module) => {
                eprintln!(
                    "loaded builtin {name}: compiled in {:.1} ms",
                    module.compile_ms
                );
                Some(module)
            }
            Err(e) => {
                eprintln!("SKIP builtin {name}: does not load: {e}");
                None
            }
        })
        .collect()
}

/// Mean `CallStats` of `calls` wasm calls, printed to stderr; `false` if a
/// call fails.
fn print_stats(
    engine: &PluginEngine,
    module: &LoadedModule,
    input: &GroupInput,
    calls: usize,
    id: &str,
) -> bool {
    let limits = Limits::default();
    let (mut instantiate, mut call, mut validate, mut fuel) = (0.0, 0.0, 0.0, 0u64);
    for _ in 0..calls {
        match engine.assign(module, input, &limits) {
            Ok(outcome) => {
                instantiate += outcome.stats.instantiate_ms;
                call += outcome.stats.call_ms;
                validate += outcome.stats.validate_ms;
                fuel = outcome.stats.fuel;
            }
            Err(e) => {
                eprintln!("SKIP {id}: wasm call failed: {e}");
                return false;
            }
        }
    }
    let n = calls as f64;
    eprintln!(
        "stats {id}: mean of {calls} calls: instantiate_ms={:.4} call_ms={:.4} validate_ms={:.4} fuel={fuel}",
        instantiate / n,
        call / n,
        validate / n,
    );
    true
}

fn grid(c: &mut Criterion) {
    let engine = engine();
    let modules = modules(&engine);
    let limits = Limits::default();
    for case in cases() {
        let id = case.id();
        if filter_skips(&id) {
            continue;
        }
        let input = match case.input() {
            Ok(input) => input,
            Err(e) => {
                eprintln!("SKIP {id}: settling the previous assignment failed: {e}");
                continue;
            }
        };
        let (name, native) = ASSIGNORS[case.assignor];
        let big = case.tasks() >= 100_000;
        let mut group = c.benchmark_group(name);
        if big {
            group
                .sample_size(10)
                .warm_up_time(Duration::from_secs(1))
                .measurement_time(Duration::from_secs(3));
        } else {
            group
                .sample_size(30)
                .warm_up_time(Duration::from_millis(500))
                .measurement_time(Duration::from_secs(2));
        }
        let function = id
            .strip_prefix(name)
            .unwrap()
            .trim_start_matches('/')
            .to_owned();
        match case.mode {
            Mode::Native => {
                if let Err(e) = native(&input) {
                    eprintln!("SKIP {id}: native assign failed: {e}");
                    continue;
                }
                group.bench_function(function, |b| b.iter(|| native(black_box(&input))));
            }
            Mode::Wasm => {
                let Some(module) = &modules[case.assignor] else {
                    eprintln!("SKIP {id}: module not loaded");
                    continue;
                };
                if !print_stats(&engine, module, &input, if big { 5 } else { 20 }, &id) {
                    continue;
                }
                group.bench_function(function, |b| {
                    b.iter(|| {
                        engine
                            .assign(module, black_box(&input), &limits)
                            .expect("wasm assign")
                    })
                });
            }
        }
        group.finish();
    }
}

/// The sandbox's per-call cost at 100 members × 10,000 tasks: `range` in
/// wasm against native `range` with and without the host's checks, plus the
/// `CallStats` split of 200 calls for every built-in.
fn overhead(c: &mut Criterion) {
    let spec = GroupSpec::grid(100, 100, TOPICS, Subscriptions::Homogeneous);
    let input = testing::group(&spec);
    let engine = engine();
    let modules = modules(&engine);
    let limits = Limits::default();
    for (i, (name, _)) in ASSIGNORS.iter().enumerate() {
        if let Some(module) = &modules[i] {
            print_stats(
                &engine,
                module,
                &input,
                200,
                &format!("overhead/{name}/wasm/100x10000"),
            );
        }
    }
    member_scaling(&engine, &modules);
    let range = ASSIGNORS.iter().position(|a| a.0 == "range").unwrap();
    let native = ASSIGNORS[range].1;
    let mut group = c.benchmark_group("overhead");
    group
        .sample_size(50)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    group.bench_function("range/native/100x10000", |b| {
        b.iter(|| native(black_box(&input)).unwrap())
    });
    let rows_max = assignd_guest_sdk::validate::rows_max_for(
        &input,
        limits.output_rows_per_task_max,
        limits.output_rows_max,
    );
    group.bench_function("range/native-checked/100x10000", |b| {
        b.iter(|| {
            let input = black_box(&input);
            check_input(input, &InputLimits::default()).unwrap();
            let out = native(input).unwrap();
            check_assignment(input, &out, rows_max).unwrap();
            out
        })
    });
    if let Some(module) = &modules[range] {
        group.bench_function("range/wasm/100x10000", |b| {
            b.iter(|| {
                engine
                    .assign(module, black_box(&input), &limits)
                    .expect("wasm assign")
            })
        });
    }
    group.finish();
}

/// Where the wasm time goes at 10,000 members × 100,000 tasks: the same
/// group with 1, 10 and 100 topics (so 10,000, 100,000 and 1,000,000
/// subscription entries in the member records), sticky in wasm (`CallStats`)
/// and natively (mean wall time), printed to stderr.
fn member_scaling(engine: &PluginEngine, modules: &[Option<std::sync::Arc<LoadedModule>>]) {
    let sticky = ASSIGNORS.iter().position(|a| a.0 == "sticky").unwrap();
    let Some(module) = &modules[sticky] else {
        return;
    };
    for topics in [1, 10, 100] {
        let id = format!("scaling/sticky/full/homogeneous/10000x10/topics-{topics}");
        if filter_skips(&id) {
            continue;
        }
        let input = testing::group(&GroupSpec::grid(
            10000,
            10,
            topics,
            Subscriptions::Homogeneous,
        ));
        let native = ASSIGNORS[sticky].1;
        let started = std::time::Instant::now();
        for _ in 0..5 {
            black_box(native(black_box(&input)).unwrap());
        }
        eprintln!(
            "native {id}: mean of 5 calls: {:.4} ms",
            started.elapsed().as_secs_f64() * 1e3 / 5.0
        );
        print_stats(engine, module, &input, 5, &id);
    }
}

criterion_group!(benches, overhead, grid);
criterion_main!(benches);
