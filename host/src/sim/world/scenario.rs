//! What a schedule draws about its groups: their names (spread over the
//! shards), each group's first config and scenario (membership, churn,
//! losses), and the config changes the chaos phase makes.

use std::collections::BTreeMap;

use super::World;
use super::assignor_calls::ASSIGNORS;
use crate::protocol::group::{GroupConfig, LearnerMode, TopicConfig};
use crate::protocol::shard::shard_of;
use crate::sim::rng::Rng;

/// The groups one schedule runs at most (at least two, on two shards, when
/// the host has more than one).
const GROUPS_MAX: u64 = 3;

/// Topic names a schedule draws from (at most this many at once).
const TOPIC_NAMES: [&str; 4] = ["t0", "t1", "t2", "t3"];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Membership {
    Static,
    Dynamic,
    Mixed,
}

/// What a schedule draws besides the group config.
#[derive(Clone, Debug)]
pub(super) struct Scenario {
    pub(super) membership: Membership,
    pub(super) members_max: usize,
    pub(super) lost_response_p: f64,
    /// Probability that a step is a random event rather than the next
    /// heartbeat, answer or tick.
    pub(super) chaos_p: f64,
    /// Probability that a new process is slow to release revoked tasks.
    pub(super) slow_p: f64,
    pub(super) racks: bool,
    /// How fast learners catch up, per process: one of these (lag per ms).
    pub(super) catch_up_per_ms: [u64; 3],
}

fn draw_partitions(rng: &mut Rng) -> u32 {
    if rng.chance(0.5) {
        rng.range(1, 8) as u32
    } else {
        rng.range(1, 64) as u32
    }
}

pub(super) fn draw(rng: &mut Rng) -> (GroupConfig, Scenario) {
    let topics = (0..rng.range(1, 3))
        .map(|i| TopicConfig {
            name: TOPIC_NAMES[i as usize].into(),
            partitions: draw_partitions(rng),
        })
        .collect();
    let heartbeat_interval_ms = rng.range(100, 300);
    let session_timeout_ms = heartbeat_interval_ms * rng.range(3, 6);
    let assignor = (*rng.pick(&ASSIGNORS)).to_owned();
    let mut params = BTreeMap::new();
    if assignor == "learner-aware" && rng.chance(0.3) {
        params.insert("num_standby".to_owned(), "1".to_owned());
    }
    let config = GroupConfig {
        topics,
        assignor,
        params,
        session_timeout_ms,
        registration_timeout_ms: rng.range(session_timeout_ms, 4_000),
        expansion_timeout_ms: rng.range(150, 600),
        heartbeat_interval_ms,
        learners: *rng.pick(&[
            LearnerMode::Host,
            LearnerMode::Host,
            LearnerMode::Assignor,
            LearnerMode::Off,
        ]),
        acceptable_recovery_lag: *rng.pick(&[0, 50, 1_000, 10_000]),
        max_learners: rng.range(1, 4) as u32,
        probing_interval_ms: rng.range(1_000, 3_000),
        scale_down_timeout_ms: rng.range(1_500, 5_000),
        ..GroupConfig::with_topics(Vec::new())
    };
    let scenario = Scenario {
        membership: *rng.pick(&[
            Membership::Static,
            Membership::Static,
            Membership::Dynamic,
            Membership::Mixed,
            Membership::Mixed,
        ]),
        members_max: rng.range(2, 10) as usize,
        lost_response_p: *rng.pick(&[0.0, 0.02, 0.05, 0.1]),
        chaos_p: *rng.pick(&[0.05, 0.1, 0.15]),
        slow_p: *rng.pick(&[0.0, 0.1, 0.3]),
        racks: rng.chance(0.3),
        catch_up_per_ms: [2, 20, 200],
    };
    (config, scenario)
}

/// The names of a schedule's groups: two to [`GROUPS_MAX`], the second on
/// another shard than the first when there is more than one (a third may
/// share a shard with either).
pub(super) fn draw_group_names(rng: &mut Rng, shard_count: u32) -> Vec<String> {
    let count = rng.range(2, GROUPS_MAX) as usize;
    let mut names: Vec<String> = Vec::new();
    while names.len() < count {
        let name = format!("g{}", rng.below(10_000));
        let spans = names.len() != 1
            || shard_count == 1
            || shard_of(&name, shard_count) != shard_of(&names[0], shard_count);
        if spans && !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

impl World {
    /// A config change: partitions, topics added or removed, another
    /// assignor, other learner settings, other timeouts.
    pub(super) fn mutate_config(&mut self, lane: usize) -> GroupConfig {
        let mut config = self.group(lane).config.clone();
        match self.rng.weighted(&[4, 2, 2, 1, 1, 3]) {
            0 => {
                let i = self.rng.below(config.topics.len() as u64) as usize;
                config.topics[i].partitions = draw_partitions(&mut self.rng);
            }
            1 if config.topics.len() < TOPIC_NAMES.len() => {
                let name = TOPIC_NAMES
                    .iter()
                    .find(|n| !config.topics.iter().any(|t| t.name == **n))
                    .expect("fewer topics than names");
                config.topics.push(TopicConfig {
                    name: (*name).into(),
                    partitions: draw_partitions(&mut self.rng),
                });
            }
            2 if config.topics.len() > 1 => {
                let i = self.rng.below(config.topics.len() as u64) as usize;
                config.topics.remove(i);
            }
            3 => config.assignor = (*self.rng.pick(&ASSIGNORS)).to_owned(),
            4 => {
                config.acceptable_recovery_lag = *self.rng.pick(&[0, 50, 1_000, 10_000]);
                config.max_learners = self.rng.range(1, 4) as u32;
                if self.rng.chance(0.3) {
                    config.learners = *self.rng.pick(&[
                        LearnerMode::Host,
                        LearnerMode::Assignor,
                        LearnerMode::Off,
                    ]);
                }
            }
            _ => self.mutate_timeouts(&mut config),
        }
        config
    }

    /// Raises or lowers some of the group's timeouts, each to a value the
    /// core accepts: wider than the first draw, so that a change can cut a
    /// lease given under the old values short (a session timeout below the
    /// expansion timeout, a registration timeout below the session timeout),
    /// which the core must not act on before the lease ends.
    fn mutate_timeouts(&mut self, config: &mut GroupConfig) {
        let rng = &mut self.rng;
        let mut changed = false;
        while !changed {
            // Each timeout, in this order, with its range.
            for (timeout, lo, hi) in [
                (&mut config.heartbeat_interval_ms, 50, 400),
                (&mut config.session_timeout_ms, 150, 2_500),
                (&mut config.registration_timeout_ms, 100, 5_000),
                (&mut config.expansion_timeout_ms, 50, 1_200),
                (&mut config.scale_down_timeout_ms, 200, 6_000),
            ] {
                if rng.chance(0.4) {
                    *timeout = rng.range(lo, hi);
                    changed = true;
                }
            }
        }
        // The core refuses a heartbeat interval at or above the session or
        // the registration timeout.
        let floor = config
            .session_timeout_ms
            .min(config.registration_timeout_ms);
        if config.heartbeat_interval_ms >= floor {
            config.heartbeat_interval_ms = floor / 3;
        }
    }
}
