//! A group's configuration as an admin sets it: its topics, its assignor
//! binding ([`BindingSpec`], [`CallLimits`]), its timeouts and learner
//! settings, its load settings, and their [`defaults`]. The limits it must
//! keep are checked by the core (`core::check_config`); those of the load
//! settings are here ([`GroupConfig::check_load_settings`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One topic of a group's task set.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicConfig {
    pub name: String,
    pub partitions: u32,
}

/// Who places learners (warm-up copies) in a group.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LearnerMode {
    /// The host makes every assignor safe: an active task that the target
    /// moves to a member not caught up on it stays on its owner, and the new
    /// owner gets a learner first (the assignor's own learners are kept too).
    #[default]
    Host,
    /// The assignor's learners are used as they are, with no host check.
    Assignor,
    /// No learners: tasks move as soon as their owner releases them.
    Off,
}

/// A group's configuration, set by an admin. Every field but `topics` has a
/// default, so the smallest config is `{"topics": [...]}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupConfig {
    pub topics: Vec<TopicConfig>,
    /// A built-in assignor name or a module reference.
    #[serde(default = "defaults::assignor")]
    pub assignor: String,
    #[serde(default)]
    pub params: BTreeMap<String, String>,
    /// How long a silent dynamic member stays in the group.
    #[serde(default = "defaults::session_timeout_ms")]
    pub session_timeout_ms: u64,
    /// How long a silent (or temporarily left) static member keeps its slot.
    #[serde(default = "defaults::registration_timeout_ms")]
    pub registration_timeout_ms: u64,
    /// How long arrivals are batched into one new target, and the longest a
    /// member may take to release a task before it is fenced.
    #[serde(default = "defaults::expansion_timeout_ms")]
    pub expansion_timeout_ms: u64,
    /// How often members should heartbeat.
    #[serde(default = "defaults::heartbeat_interval_ms")]
    pub heartbeat_interval_ms: u64,
    /// Who places learners.
    #[serde(default)]
    pub learners: LearnerMode,
    /// A member whose reported lag on a task is at or under this counts as
    /// caught up on it.
    #[serde(default = "defaults::acceptable_recovery_lag")]
    pub acceptable_recovery_lag: u64,
    /// The most learners the host keeps in the group at once.
    #[serde(default = "defaults::max_learners")]
    pub max_learners: u32,
    /// While learners exist, the assignor is re-asked this often as a safety
    /// net (a learner catching up re-asks at once).
    #[serde(default = "defaults::probing_interval_ms")]
    pub probing_interval_ms: u64,
    /// How long a draining member keeps tasks whose learners elsewhere have
    /// not caught up; then they move anyway and the member is fenced.
    #[serde(default = "defaults::scale_down_timeout_ms")]
    pub scale_down_timeout_ms: u64,
    /// Limits on this group's assignor calls, each under the host's
    /// ceiling.
    #[serde(default)]
    pub assignor_limits: CallLimits,
    /// The assignor that answers when the bound one fails (a trap, a
    /// limit, an invalid answer): the failure still shows on the group,
    /// and the group still gets a target.
    #[serde(default)]
    pub fallback_assignor: Option<String>,
    /// The sha256 (lowercase hex) of the token members must send as a
    /// bearer token, if the group has one. The API sets it from a
    /// plaintext `member_token` and never shows it.
    #[serde(default)]
    pub member_token_sha256: Option<String>,
    /// How long a routing table the host answers stays valid: until then
    /// no task it shows unmoved gets another owner (docs/routing.md).
    /// 0: no promise.
    #[serde(default = "defaults::routes_valid_ms")]
    pub routes_valid_ms: u64,
    /// The sha256 (lowercase hex) of the token that reads the group's
    /// routing table, if it has one. Set from a plaintext `reader_token`,
    /// never shown.
    #[serde(default)]
    pub reader_token_sha256: Option<String>,
    /// The unit of the loads members report (e.g. `records/s`), 1 to
    /// [`LOAD_UNIT_LEN_MAX`] bytes of visible ASCII. None: the group takes
    /// no loads.
    #[serde(default)]
    pub load_unit: Option<String>,
    /// The half-life of the smoothing of a task's reported load. 0: no
    /// smoothing (the latest report wins).
    #[serde(default = "defaults::load_half_life_ms")]
    pub load_half_life_ms: u64,
    /// How long the group's loads must stay outside the band before a
    /// load rebalance.
    #[serde(default = "defaults::load_window_ms")]
    pub load_window_ms: u64,
    /// The least time between two load rebalances.
    #[serde(default = "defaults::load_cooldown_ms")]
    pub load_cooldown_ms: u64,
    /// Nothing moves for any reason but a member leaving.
    #[serde(default)]
    pub frozen: bool,
    /// Free-form `key: value` labels an operator sorts groups by (e.g.
    /// `team: payments`), which a rollout's `label:` selector matches:
    /// at most [`LABELS_MAX`], keys and values of visible ASCII, keys up
    /// to [`LABEL_KEY_LEN_MAX`] bytes and values up to
    /// [`LABEL_VALUE_LEN_MAX`].
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

/// The most labels a group carries.
pub const LABELS_MAX: usize = 16;
/// The longest label key, in bytes.
pub const LABEL_KEY_LEN_MAX: usize = 63;
/// The longest label value, in bytes.
pub const LABEL_VALUE_LEN_MAX: usize = 63;

/// The longest `load_unit`, in bytes.
pub const LOAD_UNIT_LEN_MAX: usize = 32;
/// The longest `load_half_life_ms`: an hour.
pub const LOAD_HALF_LIFE_MS_MAX: u64 = 3_600_000;
/// The longest `load_window_ms`: an hour.
pub const LOAD_WINDOW_MS_MAX: u64 = 3_600_000;
/// The longest `load_cooldown_ms`: a day.
pub const LOAD_COOLDOWN_MS_MAX: u64 = 86_400_000;

/// Limits one binding puts on its assignor calls. Each lowers the host's
/// ceiling (the limits `assignd serve` was started with), never raises it;
/// an unset limit is the ceiling.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallLimits {
    /// Fuel one call may burn (about one unit per wasm instruction).
    #[serde(default)]
    pub fuel_max: Option<u64>,
    /// Wall-clock time one call may take.
    #[serde(default)]
    pub time_limit_ms: Option<u64>,
    /// Memory the guest may grow to.
    #[serde(default)]
    pub memory_max_mib: Option<u64>,
}

/// What a group's assignor binding sets: the part of [`GroupConfig`] that
/// `PUT .../assignor` and a rollback change, and that a
/// [`Binding`](super::Binding) keeps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BindingSpec {
    pub assignor: String,
    pub params: BTreeMap<String, String>,
    pub limits: CallLimits,
    pub fallback: Option<String>,
}

impl BindingSpec {
    /// A binding to `assignor` with no params, limits or fallback.
    pub fn assignor(assignor: &str) -> Self {
        BindingSpec {
            assignor: assignor.to_owned(),
            params: BTreeMap::new(),
            limits: CallLimits::default(),
            fallback: None,
        }
    }
}

/// The defaults of [`GroupConfig`], close to Kafka's where Kafka has one.
pub mod defaults {
    pub fn assignor() -> String {
        "sticky".into()
    }
    /// KIP-848's group.consumer.session.timeout.ms.
    pub fn session_timeout_ms() -> u64 {
        45_000
    }
    pub fn registration_timeout_ms() -> u64 {
        120_000
    }
    pub fn expansion_timeout_ms() -> u64 {
        3_000
    }
    pub fn heartbeat_interval_ms() -> u64 {
        3_000
    }
    /// Kafka Streams' acceptable.recovery.lag.
    pub fn acceptable_recovery_lag() -> u64 {
        10_000
    }
    /// Kafka Streams' max.warmup.replicas.
    pub fn max_learners() -> u32 {
        2
    }
    pub fn probing_interval_ms() -> u64 {
        60_000
    }
    pub fn scale_down_timeout_ms() -> u64 {
        300_000
    }
    /// A router that keeps a blocking query open hears of a change well
    /// within it; a move waits for it only while routers read the group.
    pub fn routes_valid_ms() -> u64 {
        2_000
    }
    /// Long enough to ride out a burst, short enough to follow a shift
    /// within a minute or two.
    pub fn load_half_life_ms() -> u64 {
        30_000
    }
    /// Two half-lives: a passing spike has mostly faded from the smoothed
    /// loads before it could trigger a rebalance.
    pub fn load_window_ms() -> u64 {
        60_000
    }
    /// A move costs a warm-up; at most one load rebalance in five minutes.
    pub fn load_cooldown_ms() -> u64 {
        300_000
    }
}

impl GroupConfig {
    /// A config with the given topics and every default.
    pub fn with_topics(topics: Vec<TopicConfig>) -> Self {
        GroupConfig {
            topics,
            assignor: defaults::assignor(),
            params: BTreeMap::new(),
            session_timeout_ms: defaults::session_timeout_ms(),
            registration_timeout_ms: defaults::registration_timeout_ms(),
            expansion_timeout_ms: defaults::expansion_timeout_ms(),
            heartbeat_interval_ms: defaults::heartbeat_interval_ms(),
            learners: LearnerMode::default(),
            acceptable_recovery_lag: defaults::acceptable_recovery_lag(),
            max_learners: defaults::max_learners(),
            probing_interval_ms: defaults::probing_interval_ms(),
            scale_down_timeout_ms: defaults::scale_down_timeout_ms(),
            assignor_limits: CallLimits::default(),
            fallback_assignor: None,
            member_token_sha256: None,
            routes_valid_ms: defaults::routes_valid_ms(),
            reader_token_sha256: None,
            load_unit: None,
            load_half_life_ms: defaults::load_half_life_ms(),
            load_window_ms: defaults::load_window_ms(),
            load_cooldown_ms: defaults::load_cooldown_ms(),
            frozen: false,
            labels: BTreeMap::new(),
        }
    }

    /// Whether the load settings (unit, smoothing, window, cooldown,
    /// freeze) are all at their defaults: what a cluster whose record
    /// format predates them can keep.
    pub fn load_settings_default(&self) -> bool {
        self.load_unit.is_none()
            && self.load_half_life_ms == defaults::load_half_life_ms()
            && self.load_window_ms == defaults::load_window_ms()
            && self.load_cooldown_ms == defaults::load_cooldown_ms()
            && !self.frozen
    }

    /// Checks the load settings against their limits, in field order: the
    /// first broken is the one named.
    pub fn check_load_settings(&self) -> Result<(), String> {
        if let Some(unit) = &self.load_unit {
            if unit.is_empty() || unit.len() > LOAD_UNIT_LEN_MAX {
                return Err(format!(
                    "load_unit must be 1 to {LOAD_UNIT_LEN_MAX} bytes, got {}",
                    unit.len()
                ));
            }
            if !unit.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(
                    "load_unit must be visible ASCII characters only (e.g. \"records/s\")".into(),
                );
            }
        }
        for (name, value, max) in [
            (
                "load_half_life_ms",
                self.load_half_life_ms,
                LOAD_HALF_LIFE_MS_MAX,
            ),
            ("load_window_ms", self.load_window_ms, LOAD_WINDOW_MS_MAX),
            (
                "load_cooldown_ms",
                self.load_cooldown_ms,
                LOAD_COOLDOWN_MS_MAX,
            ),
        ] {
            if value > max {
                return Err(format!("{name} must be at most {max}, got {value}"));
            }
        }
        Ok(())
    }

    /// Checks the labels against their limits: the first broken one is
    /// named.
    pub fn check_labels(&self) -> Result<(), String> {
        if self.labels.len() > LABELS_MAX {
            return Err(format!(
                "labels: at most {LABELS_MAX} labels, got {}",
                self.labels.len()
            ));
        }
        for (key, value) in &self.labels {
            let visible = |s: &str| s.bytes().all(|b| b.is_ascii_graphic());
            if key.is_empty() || key.len() > LABEL_KEY_LEN_MAX || !visible(key) {
                return Err(format!(
                    "labels: a key must be 1 to {LABEL_KEY_LEN_MAX} bytes of visible ASCII, got {key:?}"
                ));
            }
            if value.len() > LABEL_VALUE_LEN_MAX || !visible(value) {
                return Err(format!(
                    "labels: the value of {key:?} must be at most {LABEL_VALUE_LEN_MAX} bytes of visible ASCII"
                ));
            }
        }
        Ok(())
    }

    /// How many tasks the group's topics make.
    pub fn task_count(&self) -> u64 {
        self.topics.iter().map(|t| u64::from(t.partitions)).sum()
    }

    /// The binding this config sets.
    pub fn binding_spec(&self) -> BindingSpec {
        BindingSpec {
            assignor: self.assignor.clone(),
            params: self.params.clone(),
            limits: self.assignor_limits,
            fallback: self.fallback_assignor.clone(),
        }
    }

    /// Sets the binding part of this config.
    pub fn set_binding(&mut self, spec: BindingSpec) {
        self.assignor = spec.assignor;
        self.params = spec.params;
        self.assignor_limits = spec.limits;
        self.fallback_assignor = spec.fallback;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> GroupConfig {
        GroupConfig::with_topics(vec![TopicConfig {
            name: "orders".into(),
            partitions: 4,
        }])
    }

    /// The smallest config gets every load setting's default.
    #[test]
    fn load_settings_default_when_absent() {
        let config: GroupConfig = serde_json::from_value(serde_json::json!({
            "topics": [{"name": "orders", "partitions": 4}],
        }))
        .unwrap();
        assert_eq!(config.load_unit, None);
        assert_eq!(config.load_half_life_ms, 30_000);
        assert_eq!(config.load_window_ms, 60_000);
        assert_eq!(config.load_cooldown_ms, 300_000);
        assert!(!config.frozen);
        assert!(config.load_settings_default());
        assert_eq!(config.check_load_settings(), Ok(()));
    }

    #[test]
    fn each_load_setting_away_from_its_default_is_told() {
        let changed = [
            GroupConfig {
                load_unit: Some("records/s".into()),
                ..config()
            },
            GroupConfig {
                load_half_life_ms: 0,
                ..config()
            },
            GroupConfig {
                load_window_ms: 0,
                ..config()
            },
            GroupConfig {
                load_cooldown_ms: 0,
                ..config()
            },
            GroupConfig {
                frozen: true,
                ..config()
            },
        ];
        for config in changed {
            assert!(!config.load_settings_default(), "{config:?}");
        }
    }

    /// Each limit: its maximum is taken, one more is refused naming the
    /// field.
    #[test]
    fn each_load_limit_takes_its_maximum_and_refuses_one_more() {
        type Set = fn(&mut GroupConfig, u64);
        let limits: [(&str, u64, Set); 3] = [
            ("load_half_life_ms", LOAD_HALF_LIFE_MS_MAX, |c, v| {
                c.load_half_life_ms = v
            }),
            ("load_window_ms", LOAD_WINDOW_MS_MAX, |c, v| {
                c.load_window_ms = v
            }),
            ("load_cooldown_ms", LOAD_COOLDOWN_MS_MAX, |c, v| {
                c.load_cooldown_ms = v
            }),
        ];
        for (name, max, set) in limits {
            let mut config = config();
            set(&mut config, max);
            assert_eq!(config.check_load_settings(), Ok(()), "{name} at {max}");
            set(&mut config, max + 1);
            assert_eq!(
                config.check_load_settings(),
                Err(format!("{name} must be at most {max}, got {}", max + 1))
            );
        }
        assert_eq!(LOAD_HALF_LIFE_MS_MAX, 3_600_000);
        assert_eq!(LOAD_WINDOW_MS_MAX, 3_600_000);
        assert_eq!(LOAD_COOLDOWN_MS_MAX, 86_400_000);
    }

    #[test]
    fn a_load_unit_is_1_to_32_bytes_of_visible_ascii() {
        let with_unit = |unit: &str| GroupConfig {
            load_unit: Some(unit.into()),
            ..config()
        };
        for unit in ["records/s", "B", &"x".repeat(LOAD_UNIT_LEN_MAX)] {
            assert_eq!(with_unit(unit).check_load_settings(), Ok(()), "{unit:?}");
        }
        for (unit, needle) in [
            ("", "1 to 32 bytes, got 0"),
            (&"x".repeat(LOAD_UNIT_LEN_MAX + 1), "1 to 32 bytes, got 33"),
            ("records per s", "visible ASCII"),
            ("rec\u{7f}", "visible ASCII"),
            ("µs", "visible ASCII"),
        ] {
            let refused = with_unit(unit).check_load_settings().unwrap_err();
            assert!(refused.starts_with("load_unit must be"), "{refused}");
            assert!(refused.contains(needle), "{unit:?}: {refused}");
        }
    }
}
