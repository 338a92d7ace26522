//! Balancing by load against balancing by count on the same groups: 100
//! members × 10,000 tasks and 1,000 × 100,000, one topic, count-balanced
//! to start with, tasks loaded by rank `1000 / k^s` over shuffled ranks
//! (loadgen's `zipf:S`). Prints each group's load spread before and after
//! and what moved, then times both paths. Run with
//! `cargo bench -p assignor-balance --bench load_band`.

use std::hint::black_box;

use assignd_guest_sdk::GroupInput;
use assignd_guest_sdk::testing::{GroupSpec, Subscriptions, group};
use assignor_balance::{EXACT_LEAVES_MAX, LoadOptions, balance, balance_by_load};
use criterion::{Criterion, criterion_group, criterion_main};

const SHAPES: [(u32, u32); 2] = [(100, 10_000), (1_000, 100_000)];
const BAND: f64 = 0.1;

/// A count-balanced group whose tasks carry Zipf loads of exponent `s`.
fn zipf_group(members: u32, tasks: u32, s: f64) -> GroupInput {
    let mut input = group(&GroupSpec {
        members,
        topics: 1,
        partitions: tasks,
        subscriptions: Subscriptions::Homogeneous,
        racks: 0,
    });
    input.active_owner = balance(&input);
    input.load_unit = Some("records/s".into());
    let mut order: Vec<u32> = (0..tasks).collect();
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for i in (1..order.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        order.swap(i, (x % (i as u64 + 1)) as usize);
    }
    for (rank, &task) in order.iter().enumerate() {
        input.loads.push(task, 1000.0 / ((rank + 1) as f64).powf(s));
    }
    input
}

fn options() -> LoadOptions {
    LoadOptions {
        band: BAND,
        exact_leaves_max: EXACT_LEAVES_MAX,
    }
}

/// Max, 99th percentile and min member load over the mean, and how many
/// members are over and under `1 ± BAND` times the mean; then the same
/// over the members holding more than one task (the others each hold one
/// task too heavy to share a member: the water filling's).
fn spread(input: &GroupInput, owners: &[u32]) -> String {
    let members = input.members.len();
    let (mut held, mut count) = (vec![0.0; members], vec![0u32; members]);
    for (task, load) in input.loads.iter() {
        let m = owners[task as usize] as usize;
        held[m] += load;
        count[m] += 1;
    }
    let rest: Vec<f64> = (0..members)
        .filter(|&m| count[m] > 1)
        .map(|m| held[m])
        .collect();
    format!(
        "{}; the {} others: {}",
        ratios(held),
        rest.len(),
        ratios(rest)
    )
}

fn ratios(mut held: Vec<f64>) -> String {
    let mean = held.iter().sum::<f64>() / held.len() as f64;
    held.sort_by(f64::total_cmp);
    let at = |q: f64| held[((held.len() - 1) as f64 * q) as usize] / mean;
    let over = held.iter().filter(|&&h| h > mean * (1.0 + BAND)).count();
    let under = held.iter().filter(|&&h| h < mean * (1.0 - BAND)).count();
    format!(
        "max/mean {:.2}, p99/mean {:.3}, min/mean {:.3}, {over} over and {under} under the band",
        at(1.0),
        at(0.99),
        at(0.0)
    )
}

fn figures() {
    for s in [1.0, 0.5] {
        for (members, tasks) in SHAPES {
            let input = zipf_group(members, tasks, s);
            let owners = balance_by_load(&input, options());
            let moved: Vec<u32> = (0..tasks)
                .filter(|&t| owners[t as usize] != input.active_owner[t as usize])
                .collect();
            let loads = input.task_loads();
            let moved_load: f64 = moved.iter().map(|&t| loads[t as usize].unwrap()).sum();
            let total: f64 = input.loads.load.iter().sum();
            let mut again = input.clone();
            again.active_owner = owners.clone();
            let second = balance_by_load(&again, options());
            let moved_again = (0..tasks as usize)
                .filter(|&t| second[t] != owners[t])
                .count();
            println!("zipf s={s}, {members} x {tasks}:");
            println!("  before: {}", spread(&input, &input.active_owner));
            println!("  after:  {}", spread(&input, &owners));
            println!(
                "  moved {} tasks ({:.2} % of them), {:.1} % of the load; a second call moves {moved_again}",
                moved.len(),
                100.0 * moved.len() as f64 / f64::from(tasks),
                100.0 * moved_load / total
            );
        }
    }
}

fn bench(c: &mut Criterion) {
    figures();
    let mut group = c.benchmark_group("load_band");
    group.sample_size(20);
    for (members, tasks) in SHAPES {
        let input = zipf_group(members, tasks, 1.0);
        let mut settled = input.clone();
        settled.active_owner = balance_by_load(&input, options());
        let shape = format!("{members}x{tasks}");
        group.bench_function(format!("count/{shape}"), |b| {
            b.iter(|| balance(black_box(&input)))
        });
        group.bench_function(format!("load/{shape}"), |b| {
            b.iter(|| balance_by_load(black_box(&input), options()))
        });
        group.bench_function(format!("load_settled/{shape}"), |b| {
            b.iter(|| balance_by_load(black_box(&settled), options()))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
