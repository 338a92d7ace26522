//! Benchmarks of the contract checks the host runs on every call: the
//! input's structure (`check_input`) and the guest's answer against it
//! (`check_assignment`), at 10,000 members × 100,000 tasks.
//!
//! ```text
//! cargo bench -p assignd --bench validate
//! cargo bench -p assignd --bench validate -- validate/answer   # criterion filter
//! ```
//!
//! Ids are `validate/<answer|answer-with-rows|input>/homogeneous/10000x10`:
//! the grid's 10,000 members × 10 partitions per member over 100 topics,
//! every member subscribed to every topic (as `benches/assignors.rs` builds
//! it). `answer` checks sticky's native answer, which has no learner or
//! standby rows; `answer-with-rows` checks learner-aware's answer with
//! `num_standby=1`, one standby row per task, so that the rows' checks are
//! measured too; `input` checks the input itself. The rows cap is the one
//! the host applies with the default `Limits` (`rows_max_for`).

use std::hint::black_box;
use std::time::Duration;

use assignd::plugins::Limits;
use assignd_guest_sdk::testing::{self, GroupSpec, Subscriptions};
use assignd_guest_sdk::validate::{InputLimits, check_assignment, check_input, rows_max_for};
use assignd_guest_sdk::{Assignment, Assignor, GroupInput};
use criterion::{Criterion, criterion_group, criterion_main};

const MEMBERS: u32 = 10_000;
const PARTITIONS_PER_MEMBER: u32 = 10;
const TOPICS: u32 = 100;

/// The homogeneous grid input with no previous assignment.
fn grid_input() -> GroupInput {
    testing::group(&GroupSpec::grid(
        MEMBERS,
        PARTITIONS_PER_MEMBER,
        TOPICS,
        Subscriptions::Homogeneous,
    ))
}

/// The host's cap on learner and standby rows for `input`.
fn rows_max(input: &GroupInput) -> usize {
    let limits = Limits::default();
    rows_max_for(
        input,
        limits.output_rows_per_task_max,
        limits.output_rows_max,
    )
}

/// Times `check_assignment` of `answer` against `input`, after checking
/// once that the answer is valid (an invalid one would be timed failing
/// early).
fn bench_answer(c: &mut Criterion, id: &str, input: &GroupInput, answer: &Assignment) {
    let rows_max = rows_max(input);
    check_assignment(input, answer, rows_max).expect("the native answer is valid");
    c.bench_function(id, |b| {
        b.iter(|| check_assignment(black_box(input), black_box(answer), rows_max))
    });
}

fn validate(c: &mut Criterion) {
    let input = grid_input();
    let sticky = assignor_sticky::Sticky::assign(&input).expect("sticky assigns");
    assert!(sticky.learners.is_empty() && sticky.standbys.is_empty());
    bench_answer(c, "validate/answer/homogeneous/10000x10", &input, &sticky);

    let mut with_standbys = input.clone();
    with_standbys.params.insert(
        assignor_learner_aware::NUM_STANDBY.to_owned(),
        "1".to_owned(),
    );
    let learner_aware = assignor_learner_aware::LearnerAware::assign(&with_standbys)
        .expect("learner-aware assigns");
    assert!(
        learner_aware.standbys.len() == input.task_count(),
        "learner-aware places one standby per task"
    );
    bench_answer(
        c,
        "validate/answer-with-rows/homogeneous/10000x10",
        &with_standbys,
        &learner_aware,
    );

    let limits = InputLimits::default();
    check_input(&input, &limits).expect("the grid input is valid");
    c.bench_function("validate/input/homogeneous/10000x10", |b| {
        b.iter(|| check_input(black_box(&input), &limits))
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(50)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = validate
}
criterion_main!(benches);
