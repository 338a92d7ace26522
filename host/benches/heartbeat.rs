//! Benchmarks of the protocol core's request path, without I/O: what one
//! heartbeat, one join and one timer pass cost the coordinator itself.
//!
//! ```text
//! cargo bench -p assignd --bench heartbeat
//! cargo bench -p assignd --bench heartbeat -- --quick
//! ```
//!
//! - `heartbeat/steady/<members>x<tasks>`: one member of a stable group
//!   heartbeats at its epoch, reporting the tasks it owns; nothing changes.
//! - `heartbeat/steady-unreported/<members>x<tasks>`: the same without
//!   `owned` (a client may omit it when nothing changed).
//! - `heartbeat/join/<members>x<tasks>`: a new dynamic member joins a stable
//!   group (a new slot, a new group epoch, the batch starts). Each sample
//!   starts from a clone of the stable coordinator, outside the timing.
//! - `tick/groups/1000`: one timer pass over 1,000 stable groups of 10
//!   members × 100 tasks, with nothing due.
//! - `heartbeat-million/steady/1x1000000` and `steady-unreported`: one
//!   member holding 1,000,000 tasks, 10 samples.
//! - `heartbeat-million/answer-json-pairs` and `answer-json-ranges`: its
//!   answer written as JSON, `[topic, partition]` items and with
//!   `task_ranges`.
//! - `install/far/5x<tasks>`: installing an answer that moves every task of
//!   a stable group of 5 members, each reporting lag 0 on the 3/5 of the
//!   tasks it keeps standbys of, to the one member that keeps no copy (every
//!   move cold: the learner safety keeps each on its holder), with 3
//!   standbys per task: the answer made safe, its record and its apply.
//!   Each sample starts from a clone of the coordinator with the call in
//!   flight, outside the timing.
//!
//! Groups use the default config (host learner safety on) with tasks spread
//! over 10 topics, and are made stable by driving the core: every member
//! joins, the assignor call is answered natively with `sticky`, and every
//! member heartbeats until it holds its target.

use std::hint::black_box;

use assignd::protocol::core::{Coordinator, Heartbeat, HeartbeatResponse, HostLoad};
use assignd::protocol::group::{BindingSpec, Task};
use assignd::protocol::group::{GroupConfig, Millis, TopicConfig};
use assignd::sim::assign_natively;
use assignd_guest_sdk::{Assignment, NO_MEMBER};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};

const TOPICS: u32 = 10;

fn config(tasks: u32) -> GroupConfig {
    GroupConfig::with_topics(
        (0..TOPICS)
            .map(|t| TopicConfig {
                name: format!("topic-{t}"),
                partitions: tasks / TOPICS,
            })
            .collect(),
    )
}

fn topics() -> Vec<String> {
    (0..TOPICS).map(|t| format!("topic-{t}")).collect()
}

/// The heartbeat a member sends after `last`: its epoch and what it owns.
fn beat(group: &str, last: &HeartbeatResponse) -> Heartbeat {
    Heartbeat {
        member_id: last.member_id.clone(),
        member_epoch: last.member_epoch as i64,
        topics: None,
        owned: Some(last.active.iter().cloned().collect()),
        ..Heartbeat::join(group, None, Vec::new())
    }
}

/// Adds group `name` with `members` members over `tasks` tasks to `core`
/// and drives it to stable; returns each member's last response.
fn stable_group(
    core: &mut Coordinator,
    name: &str,
    members: usize,
    tasks: u32,
    now: Millis,
) -> Vec<HeartbeatResponse> {
    stable_groups(core, &[name.to_owned()], members, tasks, now)
        .pop()
        .expect("one group")
}

/// Adds the groups `names`, each of `members` members over `tasks` tasks,
/// and drives them to stable together (the core's clock never goes back);
/// returns each group's members' last responses.
fn stable_groups(
    core: &mut Coordinator,
    names: &[String],
    members: usize,
    tasks: u32,
    now: Millis,
) -> Vec<Vec<HeartbeatResponse>> {
    let mut last: Vec<Vec<HeartbeatResponse>> = names
        .iter()
        .map(|name| {
            core.configure(name, config(tasks), now)
                .expect("a valid config");
            (0..members)
                .map(|_| {
                    core.heartbeat(&Heartbeat::join(name, None, topics()), now)
                        .expect("join")
                        .0
                })
                .collect()
        })
        .collect();
    let expansion = config(tasks).expansion_timeout_ms;
    let out = core.tick(now + expansion);
    assert_eq!(
        out.assignor_calls.len(),
        names.len(),
        "one target for each group's whole fleet"
    );
    for call in out.assignor_calls {
        let answer = assign_natively(&call.assignor, &call.input);
        core.assignment_computed(&call.group, call.epoch, answer, now + expansion);
    }
    for _ in 0..3 {
        for (name, group) in names.iter().zip(&mut last) {
            for member in group {
                *member = core
                    .heartbeat(&beat(name, member), now + expansion)
                    .expect("heartbeat")
                    .0;
            }
        }
    }
    for (name, last) in names.iter().zip(&last) {
        assert_stable(core, name, last, tasks);
    }
    last
}

fn assert_stable(core: &Coordinator, name: &str, last: &[HeartbeatResponse], tasks: u32) {
    let group = core.group(name).expect("configured");
    assert!(
        group.is_stable(),
        "{name} is not stable: group epoch {}, target epoch {}, holdings {:?}",
        group.group_epoch,
        group.target_epoch,
        group
            .holdings
            .members()
            .map(|(slot, a)| (
                slot,
                a.epoch,
                a.state,
                a.active.len(),
                group.target_of(slot).active.len()
            ))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        last.iter().map(|m| m.active.len()).sum::<usize>(),
        tasks as usize,
        "every task is active"
    );
}

fn steady_and_join(c: &mut Criterion) {
    for (members, tasks) in [(10usize, 100u32), (100, 10_000)] {
        let mut core = Coordinator::new(1);
        let members_last = stable_group(&mut core, "g", members, tasks, 0);
        let now = 10_000;
        let request = beat("g", &members_last[members / 2]);
        let (response, out) = core.heartbeat(&request, now).expect("steady");
        assert!(out.records.is_empty() && out.assignor_calls.is_empty());
        assert_eq!(response.active, members_last[members / 2].active);
        c.bench_function(&format!("heartbeat/steady/{members}x{tasks}"), |b| {
            b.iter(|| black_box(core.heartbeat(black_box(&request), now)))
        });
        // The same heartbeat without `owned` (a client may omit it when
        // nothing changed): the cost of checking the reported tasks.
        let unreported = Heartbeat {
            owned: None,
            ..request.clone()
        };
        c.bench_function(
            &format!("heartbeat/steady-unreported/{members}x{tasks}"),
            |b| b.iter(|| black_box(core.heartbeat(black_box(&unreported), now))),
        );
        let join = Heartbeat::join("g", None, topics());
        c.bench_function(&format!("heartbeat/join/{members}x{tasks}"), |b| {
            b.iter_batched(
                || core.clone(),
                |mut core| {
                    let result = core.heartbeat(black_box(&join), now);
                    (core, result)
                },
                BatchSize::LargeInput,
            )
        });
    }
}

fn tick(c: &mut Criterion) {
    const GROUPS: usize = 1_000;
    let mut core = Coordinator::new(1);
    let names: Vec<String> = (0..GROUPS).map(|g| format!("group-{g}")).collect();
    stable_groups(&mut core, &names, 10, 100, 0);
    let now = 5_000;
    let out = core.tick(now);
    assert!(out.records.is_empty() && out.assignor_calls.is_empty());
    // Nothing is due: the timer table answers that no group needs a visit.
    c.bench_function(&format!("tick/groups/{GROUPS}"), |b| {
        b.iter(|| black_box(core.tick(black_box(now))))
    });
    // The same tick as the scan of every group that ticks did before the
    // timer table (the simulator's reference).
    c.bench_function(&format!("tick-full-scan/groups/{GROUPS}"), |b| {
        b.iter(|| black_box(core.tick_every_group(black_box(now), HostLoad::default())))
    });
    // Every member's session timeout has passed: the tick expires all
    // 10,000 members (one due timer each), removing them and bumping each
    // group; per due timer, divide by 10,000.
    let expired = now + config(100).session_timeout_ms + 1;
    let mut probe = core.clone();
    let out = probe.tick(expired);
    let removed = out
        .records
        .iter()
        .filter(|r| matches!(r, assignd::protocol::group::Record::MemberRemoved { .. }))
        .count();
    assert_eq!(removed, GROUPS * 10, "every member expires");
    c.bench_function(&format!("tick-expiry/members/{}", GROUPS * 10), |b| {
        b.iter_batched(
            || core.clone(),
            |mut core| {
                let out = core.tick(black_box(expired));
                (core, out)
            },
            BatchSize::LargeInput,
        )
    });
    // The runtime's once-a-second scan for the group and member gauges,
    // under the core's lock, and setting the gauges after it.
    c.bench_function(&format!("metrics_scan/groups/{GROUPS}"), |b| {
        b.iter(|| black_box(assignd::runtime::observe::scan(black_box(&core))))
    });
    let figures = assignd::runtime::observe::scan(&core);
    c.bench_function(&format!("metrics_publish/groups/{GROUPS}"), |b| {
        b.iter(|| assignd::runtime::observe::publish(black_box(&figures)))
    });
}

/// One member holding 1,000,000 tasks, 10 topics of 100,000.
fn million(c: &mut Criterion) {
    const TASKS: u32 = 1_000_000;
    let mut core = Coordinator::new(1);
    let last = stable_group(&mut core, "g", 1, TASKS, 0);
    let now = 10_000;
    let request = beat("g", &last[0]);
    let (response, out) = core.heartbeat(&request, now).expect("steady");
    assert!(out.records.is_empty() && out.assignor_calls.is_empty());
    assert_eq!(response.active.len(), TASKS as usize);
    let mut group = c.benchmark_group("heartbeat-million");
    group.sample_size(10);
    group.bench_function("steady/1x1000000", |b| {
        b.iter(|| black_box(core.heartbeat(black_box(&request), now)))
    });
    let unreported = Heartbeat {
        owned: None,
        ..request.clone()
    };
    group.bench_function("steady-unreported/1x1000000", |b| {
        b.iter(|| black_box(core.heartbeat(black_box(&unreported), now)))
    });
    million_answer(&mut group, response);
    group.finish();
}

/// The answer to the million-task member as JSON, both ways.
fn million_answer(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    response: HeartbeatResponse,
) {
    use assignd::api::wire::HeartbeatResponseBody;
    let body = |task_ranges| HeartbeatResponseBody {
        member_id: response.member_id.clone(),
        member_epoch: response.member_epoch,
        heartbeat_interval_ms: response.heartbeat_interval_ms,
        active: response.active.iter().cloned().collect(),
        revoking: Vec::new(),
        learner: Vec::new(),
        standby: Vec::new(),
        draining: false,
        drained: false,
        lease_ms: Some(response.lease_ms),
        unreached_lease_ms: Some(response.unreached_lease_ms),
        unreached_flight_ms: Some(response.unreached_flight_ms),
        load_report: Default::default(),
        task_ranges,
    };
    for (name, ranges) in [("answer-json-pairs", false), ("answer-json-ranges", true)] {
        let body = body(ranges);
        let size = serde_json::to_vec(&body).expect("JSON").len();
        eprintln!("{name}: {size} bytes");
        group.bench_function(format!("{name}/1x1000000"), |b| {
            b.iter(|| black_box(serde_json::to_vec(black_box(&body))))
        });
    }
}

/// A stable group of 5 members with a call in flight (a bind), whose every
/// member reports lag 0 on the tasks of the 3 members before it in the
/// call's order (it keeps their standbys), and the answer that moves each
/// task to the member after its owner's 3 (the one with no copy of it).
fn far_answer_in_flight(tasks: u32) -> (Coordinator, u64, Assignment, Millis) {
    const MEMBERS: usize = 5;
    let mut core = Coordinator::new(1);
    let last = stable_group(&mut core, "g", MEMBERS, tasks, 0);
    let now = 10_000;
    let out = core
        .bind("g", BindingSpec::assignor("range"), now)
        .expect("bound");
    let call = out
        .assignor_calls
        .into_iter()
        .next()
        .expect("a call at once");
    let input = &call.input;
    // Each member's place in the call's input.
    let place: Vec<usize> = last
        .iter()
        .map(|m| {
            input
                .members
                .iter()
                .position(|i| i.id == m.member_id)
                .expect("every member in the input")
        })
        .collect();
    for (index, member) in last.iter().enumerate() {
        let lags: Vec<(Task, u64)> = last
            .iter()
            .enumerate()
            .filter(|&(owner, _)| {
                (1..=3).contains(&((place[index] + MEMBERS - place[owner]) % MEMBERS))
            })
            .flat_map(|(_, m)| m.active.iter().map(|task| (task.clone(), 0)))
            .collect();
        let request = Heartbeat {
            lags: Some(lags),
            ..beat("g", member)
        };
        core.heartbeat(&request, now).expect("lags reported");
    }
    let mut answer = Assignment {
        active_owner: Vec::with_capacity(input.active_owner.len()),
        ..Assignment::default()
    };
    for (task, &owner) in input.active_owner.iter().enumerate() {
        assert_ne!(owner, NO_MEMBER, "every task held");
        answer.active_owner.push((owner + 4) % MEMBERS as u32);
        for k in 1..=3 {
            answer
                .standbys
                .push(task as u32, (owner + k) % MEMBERS as u32);
        }
    }
    (core, call.epoch, answer, now)
}

fn install(c: &mut Criterion) {
    let mut group = c.benchmark_group("install");
    group.sample_size(10);
    for tasks in [10_000u32, 100_000] {
        let (core, epoch, answer, now) = far_answer_in_flight(tasks);
        group.bench_function(format!("far/5x{tasks}"), |b| {
            b.iter_batched(
                || (core.clone(), answer.clone()),
                |(mut core, answer)| {
                    let out = core.assignment_computed("g", epoch, Ok::<_, String>(answer), now);
                    assert_eq!(out.records.len(), 1, "the target installed");
                    (core, out)
                },
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, steady_and_join, tick, million, install);
criterion_main!(benches);
