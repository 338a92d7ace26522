//! Routers: readers of a group's routing table from outside the group
//! (docs/routing.md). Each reads the table at random times, over a network
//! that delays and loses its reads and their answers, through the two
//! calls the runtime makes under the shard's lock
//! ([`Coordinator::routes`], then [`Coordinator::routes_served`]), and
//! remembers when it *sent* the read. At other random times it routes a
//! key: a task of the table's topics, to the owner the table gives it
//! (`active` and not `moving`), only while the table is fresh (before its
//! send time plus the wait the host reports plus `valid_ms`); with a stale
//! table it reads again first.
//! Each key routed is checked against what the members themselves process
//! ([`check::check_routed`], invariant 9). A read changes no group and no
//! process, only the promise the core keeps, so it is not a step.
//!
//! Routers draw from their own generator, so a schedule's members, calls
//! and faults are drawn as they would be without them.

use std::collections::BTreeMap;

use assignd_wire::RoutesBody;

use super::World;
use crate::protocol::core::Coordinator;
use crate::protocol::group::{Millis, Task};
use crate::sim::Violation;
use crate::sim::check::{self, Belief, Routed};
use crate::sim::rng::Rng;

/// The `routes_valid_ms` a group with routers draws (the default, 2,000,
/// and shorter).
const ROUTES_VALID_MS: [u64; 4] = [250, 500, 1_000, 2_000];

/// How long a router waits before it reads again after a read the host
/// did not serve (its group's shard between nodes, a 503).
const RETRY_MS: (u64, u64) = (20, 200);

/// The table a router routes by.
#[derive(Clone, Debug)]
struct Table {
    epoch: u64,
    /// When the read that got it was sent.
    sent_ms: Millis,
    /// How long the read waited at the host before the table was read
    /// (the answer's `Assignd-Routes-Waited-Ms`).
    waited_ms: u64,
    valid_ms: u64,
    topics: Vec<(String, u32)>,
    /// The owner the table gives each task it shows active and not moving.
    owners: BTreeMap<Task, String>,
}

impl Table {
    fn of(body: RoutesBody, sent_ms: Millis, waited_ms: u64) -> Table {
        let mut owners: BTreeMap<Task, String> = BTreeMap::new();
        for (member_id, ranges) in &body.active {
            for task in ranges.tasks() {
                owners.insert(task, member_id.clone());
            }
        }
        for moving in &body.moving {
            for task in moving.tasks.tasks() {
                owners.remove(&task);
            }
        }
        Table {
            epoch: body.epoch,
            sent_ms,
            waited_ms,
            valid_ms: body.valid_ms,
            topics: body.topics.into_iter().collect(),
            owners,
        }
    }

    /// The end of its promise as a router can count it: from when it
    /// sent the read, plus the wait the host reports, plus `valid_ms`
    /// (never later than the host's own count, from when it read the
    /// table).
    fn valid_until_ms(&self) -> Millis {
        self.sent_ms
            .saturating_add(self.waited_ms)
            .saturating_add(self.valid_ms)
    }
}

/// Where a router's read is.
#[derive(Debug)]
enum Read {
    /// On its way to the host, handled at `reaches_ms`.
    Travelling { sent_ms: Millis, reaches_ms: Millis },
    /// Handled; its answer (`None`: not served) arrives at `arrives_ms`.
    Answering {
        arrives_ms: Millis,
        table: Option<Table>,
    },
    /// The read or its answer was lost: the router gives up at
    /// `gives_up_ms`.
    Lost { gives_up_ms: Millis },
}

impl Read {
    fn due_ms(&self) -> Millis {
        match self {
            Read::Travelling { reaches_ms, .. } => *reaches_ms,
            Read::Answering { arrives_ms, .. } => *arrives_ms,
            Read::Lost { gives_up_ms } => *gives_up_ms,
        }
    }
}

/// One router of a group, with the habits it drew.
#[derive(Debug)]
pub(super) struct SimRouter {
    /// `g1234/r0`, for traces and messages.
    label: String,
    lane: usize,
    table: Option<Table>,
    read: Option<Read>,
    next_route_ms: Millis,
    /// When it reads again of its own accord (a watch's next answer).
    next_read_ms: Millis,
    /// Time between two keys it routes, `lo..=hi` ms.
    route_gap_ms: (u64, u64),
    /// Time between two reads of its own accord, `lo..=hi` ms.
    read_gap_ms: (u64, u64),
    /// A read's or an answer's one-way delay, `0..=max` ms.
    delay_ms_max: u64,
    /// Probability that a read, or its answer, is lost.
    lost_p: f64,
    /// How long it waits for an answer before it reads again.
    timeout_ms: u64,
}

impl SimRouter {
    fn due_ms(&self) -> Millis {
        let own = match &self.read {
            Some(read) => read.due_ms(),
            None => self.next_read_ms,
        };
        own.min(self.next_route_ms)
    }
}

/// What a schedule's routers do: how many per group, drawn in
/// `routers.0..=routers.1` ([`crate::sim::Options::routers`]); each
/// group with one draws its `routes_valid_ms`. Returns the routers and the
/// valid time each lane drew (`None`: no routers, the config as drawn).
pub(super) fn draw_routers(
    rng: &mut Rng,
    names: &[String],
    lost_p: &[f64],
    routers: (u64, u64),
) -> (Vec<SimRouter>, Vec<Option<u64>>) {
    let mut drawn = Vec::new();
    let mut valid = Vec::new();
    for (lane, name) in names.iter().enumerate() {
        let count = rng.range(routers.0, routers.1);
        if count == 0 {
            valid.push(None);
            continue;
        }
        let valid_ms = *rng.pick(&ROUTES_VALID_MS);
        valid.push(Some(valid_ms));
        for i in 0..count {
            let route_gap_ms = *rng.pick(&[(5, 40), (20, 200), (100, 800)]);
            // Some read often (a watch told of every change), some only
            // when their table is stale.
            let read_gap_ms = *rng.pick(&[
                (50, 300),
                (valid_ms / 2, 2 * valid_ms),
                (3 * valid_ms, 10 * valid_ms),
            ]);
            drawn.push(SimRouter {
                label: format!("{name}/r{i}"),
                lane,
                table: None,
                read: None,
                next_route_ms: rng.range(0, 500),
                next_read_ms: rng.range(0, 500),
                route_gap_ms,
                read_gap_ms,
                delay_ms_max: *rng.pick(&[0, 5, 50]),
                lost_p: lost_p[lane],
                timeout_ms: rng.range(200, 1_000),
            });
        }
    }
    (drawn, valid)
}

impl World {
    /// Every router's reads, answers and keys due until `until_ms`, in
    /// time order (the router drawn first on a tie).
    pub(super) fn routers_until(&mut self, until_ms: Millis) -> Result<(), Violation> {
        loop {
            let next = self
                .routers
                .iter()
                .enumerate()
                .map(|(i, r)| (r.due_ms(), i))
                .min();
            let Some((due, i)) = next.filter(|(due, _)| *due <= until_ms) else {
                return Ok(());
            };
            self.now = self.now.max(due);
            self.router_acts(i)?;
        }
    }

    /// What router `i` has due now: its read's next stage, a key, or a
    /// read of its own accord.
    fn router_acts(&mut self, i: usize) -> Result<(), Violation> {
        let now = self.now;
        let router = &self.routers[i];
        if router.read.as_ref().is_some_and(|r| r.due_ms() <= now) {
            self.read_stage(i);
            return Ok(());
        }
        if router.next_route_ms <= now {
            let (lo, hi) = router.route_gap_ms;
            self.routers[i].next_route_ms = now + self.router_rng.range(lo, hi);
            return self.route_key(i);
        }
        let (lo, hi) = router.read_gap_ms;
        self.routers[i].next_read_ms = now + self.router_rng.range(lo, hi);
        self.send_read(i);
        Ok(())
    }

    /// Router `i` sends a read, unless one is on its way.
    fn send_read(&mut self, i: usize) {
        let now = self.now;
        let router = &mut self.routers[i];
        if router.read.is_some() {
            return;
        }
        let rng = &mut self.router_rng;
        router.read = Some(if rng.chance(router.lost_p) {
            Read::Lost {
                gives_up_ms: now + router.timeout_ms,
            }
        } else {
            Read::Travelling {
                sent_ms: now,
                reaches_ms: now + rng.range(0, router.delay_ms_max),
            }
        });
    }

    /// The next stage of router `i`'s read, due now: the host serves it,
    /// its answer arrives, or the router gives it up.
    fn read_stage(&mut self, i: usize) {
        let now = self.now;
        match self.routers[i].read.take().expect("a read is due") {
            Read::Travelling {
                sent_ms,
                reaches_ms,
            } => {
                let table = self.serve_routes(i, sent_ms, reaches_ms);
                // Served after the host's stall, if it was in one.
                let now = self.now;
                let router = &self.routers[i];
                let rng = &mut self.router_rng;
                self.routers[i].read = Some(if rng.chance(router.lost_p) {
                    Read::Lost {
                        gives_up_ms: sent_ms + router.timeout_ms,
                    }
                } else {
                    Read::Answering {
                        arrives_ms: now + rng.range(0, router.delay_ms_max),
                        table,
                    }
                });
            }
            Read::Answering { table: None, .. } => {
                let retry = now + self.router_rng.range(RETRY_MS.0, RETRY_MS.1);
                let router = &mut self.routers[i];
                router.next_read_ms = router.next_read_ms.min(retry);
            }
            Read::Answering {
                table: Some(table), ..
            } => {
                self.stats.routes_read += 1;
                let router = &mut self.routers[i];
                router.table = Some(table);
                // A read it sent for a stale table counts as its own.
                if router.next_read_ms <= now {
                    let (lo, hi) = router.read_gap_ms;
                    router.next_read_ms = now + self.router_rng.range(lo, hi);
                }
            }
            Read::Lost { .. } => {
                self.note(|w| format!("{}: no answer to its read", w.routers[i].label));
                let router = &mut self.routers[i];
                router.next_read_ms = router.next_read_ms.min(now);
            }
        }
    }

    /// The host serves router `i`'s read (sent at `sent_ms`, there at
    /// `reaches_ms`) now, after a stall if the host is in one: the table,
    /// and the promise it carries, as the runtime's two calls under the
    /// shard's lock give them; `None` if no core serves the group's shard
    /// now (a cluster between nodes) or the group is not configured.
    fn serve_routes(&mut self, i: usize, sent_ms: Millis, reaches_ms: Millis) -> Option<Table> {
        self.wait_out_stall();
        let now = self.now;
        let lane = self.routers[i].lane;
        let (name, shard) = (self.lanes[lane].name.clone(), self.lanes[lane].shard);
        let core: &mut Coordinator = if self.cluster.is_some() {
            let node = self.serving_owner(shard)?;
            &mut self.cluster_served(node, shard).core
        } else {
            &mut self.shards[shard].core
        };
        let body = core.routes(&name)?;
        core.routes_served(&name, now)?;
        let table = Table::of(body, sent_ms, now - reaches_ms);
        self.note(|w| {
            format!(
                "{} reads routes (sent at t={sent_ms}, waited {} ms): epoch {} valid {} ms, {} tasks owned unmoved",
                w.routers[i].label,
                table.waited_ms,
                table.epoch,
                table.valid_ms,
                table.owners.len()
            )
        });
        Some(table)
    }

    /// Router `i` routes a key: a task of its table's topics, to the
    /// owner its table gives it while the table is fresh (checked against
    /// what the members process: invariant 9); with a stale table it
    /// reads again instead.
    fn route_key(&mut self, i: usize) -> Result<(), Violation> {
        let Some(table) = self.routers[i].table.take() else {
            self.stats.keys_deferred += 1;
            self.send_read(i);
            return Ok(());
        };
        let routed = self.route_by(i, &table);
        self.routers[i].table = Some(table);
        routed
    }

    /// [`Self::route_key`] with router `i`'s table (taken out of it
    /// meanwhile).
    fn route_by(&mut self, i: usize, table: &Table) -> Result<(), Violation> {
        let now = self.now;
        if now >= table.valid_until_ms() {
            self.stats.keys_deferred += 1;
            self.send_read(i);
            return Ok(());
        }
        let counts: Vec<u64> = table.topics.iter().map(|(_, p)| u64::from(*p)).collect();
        if counts.iter().all(|&c| c == 0) {
            return Ok(());
        }
        let (topic, partitions) = &table.topics[self.router_rng.weighted(&counts)];
        let partition = self.router_rng.below(u64::from(*partitions)) as u32;
        let task = Task::new(topic.as_str(), partition);
        let Some(member_id) = table.owners.get(&task) else {
            // Nobody processes it, or it is moving: nowhere to send it.
            self.stats.keys_unowned += 1;
            return Ok(());
        };
        let lane = self.routers[i].lane;
        let routed = Routed {
            router: &self.routers[i].label,
            task: &task,
            member_id,
            epoch: table.epoch,
            sent_ms: table.sent_ms,
            valid_until_ms: table.valid_until_ms(),
        };
        let processing: Vec<Belief<'_>> = self
            .processes
            .iter()
            .filter(|p| p.lane == lane && p.is_running())
            .map(|p| p.processing())
            .collect();
        let checked = check::check_routed(&routed, &processing, now);
        let moved = self.moved_since(lane, &task, member_id);
        let router = routed.router;
        if self.trace.is_some() {
            let line = format!(
                "{router} routes {topic}:{partition} to {member_id}{}",
                if moved {
                    " (its target has moved it)"
                } else {
                    ""
                }
            );
            self.note(|_| line);
        }
        checked.map_err(|e| self.violation(format!("{e} (group {})", self.lanes[lane].name)))?;
        self.stats.keys_routed += 1;
        self.stats.keys_routed_across_moves += u64::from(moved);
        Ok(())
    }

    /// Whether the group's target no longer gives `task` to the slot of
    /// `member_id`: a key routed now relies on the promise alone.
    fn moved_since(&self, lane: usize, task: &Task, member_id: &str) -> bool {
        let group = self.group(lane);
        let Some(slot) = group.slot_of(member_id) else {
            return true;
        };
        !group.target_of(slot).active.contains(task)
    }

    /// The settle budget's share for group `lane`'s routers: every move
    /// may wait a table's promise.
    pub(super) fn routes_hold_ms(&self, lane: usize) -> Millis {
        if self.routers.iter().any(|r| r.lane == lane) {
            self.group(lane).config.routes_valid_ms
        } else {
            0
        }
    }
}
