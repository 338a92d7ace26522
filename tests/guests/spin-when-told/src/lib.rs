//! A test guest that answers a plain round-robin assignment (each topic's
//! partition `p` on the `p mod n`-th of its `n` subscribers, in input order;
//! so that it passes the registry's self-test and can be uploaded) unless
//! the group binds it with a param that tells it to go wrong:
//!
//! - `spin=yes`: `assign` loops forever, logging a line first, until the
//!   host's fuel or time limit stops it;
//! - `trap=yes`: `assign` panics with [`TRAP_MESSAGE`] (the SDK's panic hook
//!   logs the message, then the guest traps);
//! - `recurse=yes`: `assign` recurses without end, until the host's wasm
//!   stack limit stops it (a stack overflow trap);
//! - `hog=yes`: `assign` allocates 1 MiB chunks, each written to, without
//!   end (as the `memory-hog` guest does), until the host's memory cap
//!   stops it;
//! - `grow=yes`: `assign` asks for its memory to grow to 4 GiB in one
//!   `memory.grow`, then writes to every new page; under the host's memory
//!   cap the grow itself is refused. Natively it refuses instead;
//! - `log_flood=yes`: `assign` makes one line of `line_mib` MiB (default
//!   [`FLOOD_LINE_MIB`]) and logs it again and again, until the host's
//!   time limit stops it; each line is copied into the host and cut there;
//! - `invalid=yes`: the round-robin answer with task 0 on a member index
//!   past the last member, which the host's validation refuses;
//! - `standbys=N`: the round-robin answer plus, for each task, standbys on
//!   the `N` subscribers after its owner (as many as there are): a valid
//!   answer of any size, for the host's cap on rows per task;
//! - `shift=K`: each topic's partition `p` on the `(p + K) mod n`-th
//!   subscriber instead (and its standbys after that one): bound in place
//!   of a round-robin, an answer that moves every task, every time it is
//!   asked until the moves are done.
//!
//! It exists so the host's end-to-end tests and benchmarks
//! (host/benches/hostile_guests.sh) can bind a group to a guest that goes
//! wrong only once live, and check that the failure is visible on the
//! group while another group keeps being served; its round-robin answer
//! also serves as an uploaded assignor distinct from the built-ins.
//!
//! Never call `assign` natively with `spin`, `recurse`, `hog` or
//! `log_flood`: outside the sandbox nothing stops them.

use assignd_guest_sdk::{AssignError, Assignment, Assignor, GroupInput, Info, NO_MEMBER};

/// The panic message of `trap=yes`, for tests that look for it.
pub const TRAP_MESSAGE: &str = "spin-when-told: told to trap";

/// The size of `log_flood`'s line by default, in MiB: the most wasmtime
/// copies out of a guest in one call to the host (its hostcall fuel,
/// 128 MiB by default); a longer line traps before it reaches the host.
pub const FLOOD_LINE_MIB: u64 = 128;

/// `hog`'s chunk: as the `memory-hog` guest's.
const HOG_CHUNK: usize = 1 << 20;

pub struct SpinWhenTold;

impl Assignor for SpinWhenTold {
    fn info() -> Info {
        Info::new(
            "spin-when-told",
            "0.1.0",
            "test guest: round-robin; an endless loop with spin=yes, a panic with trap=yes, \
             endless recursion with recurse=yes, endless allocation with hog=yes, a 4 GiB \
             memory.grow with grow=yes, endless log lines of line_mib MiB with log_flood=yes, \
             an invalid answer with invalid=yes, N standbys per task with standbys=N, \
             each partition K subscribers further with shift=K",
        )
    }

    fn assign(input: &GroupInput) -> Result<Assignment, AssignError> {
        let told = |mode: &str| input.param(mode, "no") == "yes";
        if told("trap") {
            panic!("{TRAP_MESSAGE}");
        }
        if told("spin") {
            assignd_guest_sdk::log::warn("told to spin");
            let mut counter = 0u64;
            loop {
                counter = std::hint::black_box(counter).wrapping_add(1);
            }
        }
        if told("recurse") {
            let depth = recurse(0);
            return Err(AssignError::Failed(format!("recursion ended at {depth}")));
        }
        if told("hog") {
            hog();
        }
        if told("grow") {
            return Err(grow());
        }
        if told("log_flood") {
            let mib = input.param_u64("line_mib", FLOOD_LINE_MIB)?;
            log_flood(usize::try_from(mib << 20).unwrap_or(usize::MAX));
        }
        let standbys = input.param_u64("standbys", 0)? as usize;
        let shift = input.param_u64("shift", 0)? as usize;
        let mut out = round_robin(input, standbys, shift);
        if told("invalid")
            && let Some(owner) = out.active_owner.first_mut()
        {
            *owner = input.members.len() as u32;
        }
        Ok(out)
    }
}

/// The members subscribed to `topic`, in input order.
fn subscribers(input: &GroupInput, topic: usize) -> Vec<u32> {
    (0..input.members.len() as u32)
        .filter(|&m| input.subscribes(&input.members[m as usize], topic as u32))
        .collect()
}

/// Each topic's partition `p` on the `(p + shift) mod n`-th of its `n`
/// subscribers, with standbys on the `standbys` subscribers after it (as
/// many as there are).
fn round_robin(input: &GroupInput, standbys: usize, shift: usize) -> Assignment {
    let mut out = Assignment {
        active_owner: vec![NO_MEMBER; input.task_count()],
        ..Assignment::default()
    };
    for (topic, &offset) in input
        .topic_offsets()
        .iter()
        .enumerate()
        .take(input.topics.len())
    {
        let subscribers = subscribers(input, topic);
        if subscribers.is_empty() {
            continue;
        }
        for p in 0..input.topics[topic].partitions as usize {
            let task = offset + p as u32;
            let first = p + shift % subscribers.len();
            out.active_owner[task as usize] = subscribers[first % subscribers.len()];
            for k in 1..=standbys.min(subscribers.len() - 1) {
                out.standbys
                    .push(task, subscribers[(first + k) % subscribers.len()]);
            }
        }
    }
    out
}

/// Recurses until the stack runs out. The end test on an opaque value and
/// the work after the call keep the compiler from turning it into a loop.
#[inline(never)]
fn recurse(depth: u64) -> u64 {
    if depth == std::hint::black_box(u64::MAX) {
        return depth;
    }
    recurse(depth + 1).rotate_left(1) ^ depth
}

fn hog() -> ! {
    let mut hoard: Vec<Vec<u8>> = Vec::new();
    loop {
        // A non-zero fill writes every byte; `black_box` keeps the chunks.
        let chunk = vec![0xA5u8; HOG_CHUNK];
        hoard.push(std::hint::black_box(chunk));
        std::hint::black_box(&mut hoard);
    }
}

/// One `memory.grow` to 4 GiB, then a write to every new page; the error
/// says how it ended if the sandbox let it end at all.
#[cfg(target_arch = "wasm32")]
fn grow() -> AssignError {
    use core::arch::wasm32::{memory_grow, memory_size};
    const PAGE: usize = 64 << 10;
    const PAGES_4_GIB: usize = 1 << 16;
    let pages = PAGES_4_GIB - memory_size(0);
    let first = memory_grow(0, pages);
    if first == usize::MAX {
        return AssignError::Failed(format!("memory.grow by {pages} pages was refused"));
    }
    for page in first..first + pages {
        let byte = core::ptr::with_exposed_provenance_mut::<u8>(page * PAGE);
        // SAFETY: the page was just added to this guest's linear memory,
        // which nothing else uses.
        unsafe { byte.write_volatile(0xA5) };
    }
    AssignError::Failed(format!("grew by {pages} pages and wrote to each"))
}

#[cfg(not(target_arch = "wasm32"))]
fn grow() -> AssignError {
    AssignError::UnsupportedInput("grow=yes needs a wasm32 guest".into())
}

fn log_flood(line_len: usize) -> ! {
    // `repeat` doubles with bulk copies: the line costs little fuel.
    let line = "x".repeat(line_len);
    loop {
        assignd_guest_sdk::log::warn(std::hint::black_box(&line));
    }
}

assignd_guest_sdk::export_assignor!(SpinWhenTold);
