//! A group's config: the limits it must keep ([`check_config`]) and
//! [`Coordinator::configure`], which creates a group or replaces its config,
//! and binds and asks for a new target when the change reaches what the
//! assignor sees.

use std::collections::BTreeSet;

use super::{
    Coordinator, GROUP_NAME_LEN_MAX, HOST_PARAMS, LEARNERS_PER_GROUP_MAX, MEMBER_NAME_LEN_MAX,
    MEMORY_MAX_MIB_MAX, Output, PARAM_KEY_LEN_MAX, PARAM_LEN_MAX, PARAMS_MAX,
    PARTITIONS_PER_TOPIC_MAX, ProtocolError, TASKS_PER_GROUP_MAX, TIMEOUT_MS_MAX,
    TOPICS_PER_GROUP_MAX, invalid, refuse_invisible,
};
use crate::protocol::group::{GroupConfig, Millis, RebalanceReason, Record};

impl Coordinator {
    /// Creates a group or replaces its config. A change to the topics or
    /// the assignor asks for a new target.
    pub fn configure(
        &mut self,
        name: &str,
        config: GroupConfig,
        now: Millis,
    ) -> Result<Output, ProtocolError> {
        self.observe_time(now);
        self.deadlines.mark_group(name);
        if name.is_empty() || name.len() > GROUP_NAME_LEN_MAX {
            return invalid(format!(
                "group name must be 1 to {GROUP_NAME_LEN_MAX} bytes"
            ));
        }
        refuse_invisible("group name", name)?;
        check_config(&config)?;
        let mut out = Output::default();
        let retarget = self.group(name).is_none_or(|g| {
            g.config.topics != config.topics
                || g.config.assignor != config.assignor
                || g.config.params != config.params
                || g.config.learners != config.learners
                || g.config.acceptable_recovery_lag != config.acceptable_recovery_lag
                || g.config.max_learners != config.max_learners
                // Unfrozen: what the freeze held back may move now.
                || (g.config.frozen && !config.frozen)
        });
        if self.group(name).is_some_and(|g| g.config == config) {
            return Ok(out);
        }
        let rebind = self
            .group(name)
            .is_none_or(|g| g.config.binding_spec() != config.binding_spec());
        let binding = rebind.then(|| config.binding_spec());
        self.emit(
            &mut out,
            Record::GroupConfigured {
                group: name.to_owned(),
                config,
            },
        );
        if let Some(spec) = binding {
            self.emit_binding(name, spec, None, now, &mut out);
        }
        if retarget {
            self.bump(name, RebalanceReason::Config, now, &mut out);
        }
        Ok(out)
    }
}

/// Checks a group config against the limits, in a fixed order: the first
/// limit broken is the one named.
pub fn check_config(config: &GroupConfig) -> Result<(), ProtocolError> {
    check_names(config)?;
    check_topics(config)?;
    check_heartbeat_fits(config)?;
    check_member_timeouts(config)?;
    check_assignor_and_params(config)?;
    check_learners(config)?;
    check_fallback_and_limits(config)?;
    check_routes(config)?;
    config.check_load_settings().or_else(invalid)?;
    config.check_labels().or_else(invalid)?;
    check_member_token(config)
}

/// The routes promise in range, and the reader token's digest well formed.
fn check_routes(config: &GroupConfig) -> Result<(), ProtocolError> {
    if config.routes_valid_ms > super::ROUTES_VALID_MS_MAX {
        return invalid(format!(
            "routes_valid_ms must be at most {}, got {}",
            super::ROUTES_VALID_MS_MAX,
            config.routes_valid_ms
        ));
    }
    if let Some(digest) = &config.reader_token_sha256
        && (digest.len() != 64 || !digest.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        return invalid("reader_token_sha256 must be a sha256 in hex".into());
    }
    Ok(())
}

/// The topics: how many, each one's name (unique) and partitions, and the
/// tasks they make together.
fn check_topics(config: &GroupConfig) -> Result<(), ProtocolError> {
    if config.topics.len() > TOPICS_PER_GROUP_MAX {
        return invalid(format!("more than {TOPICS_PER_GROUP_MAX} topics"));
    }
    let mut names = BTreeSet::new();
    for topic in &config.topics {
        if topic.name.is_empty() || topic.name.len() > MEMBER_NAME_LEN_MAX {
            return invalid(format!(
                "topic name {:?} must be 1 to {MEMBER_NAME_LEN_MAX} bytes",
                topic.name
            ));
        }
        if !names.insert(&topic.name) {
            return invalid(format!("topic {:?} appears twice", topic.name));
        }
        if topic.partitions > PARTITIONS_PER_TOPIC_MAX {
            return invalid(format!(
                "topic {:?}: {} partitions, more than the limit of {PARTITIONS_PER_TOPIC_MAX}",
                topic.name, topic.partitions
            ));
        }
    }
    let tasks = config.task_count();
    if tasks > TASKS_PER_GROUP_MAX {
        return invalid(format!(
            "{tasks} tasks, more than the limit of {TASKS_PER_GROUP_MAX}"
        ));
    }
    Ok(())
}

/// Each of `timeouts` (name, value) between 1 and [`TIMEOUT_MS_MAX`].
fn check_timeouts_in_range(timeouts: &[(&str, u64)]) -> Result<(), ProtocolError> {
    for &(name, value) in timeouts {
        if value == 0 || value > TIMEOUT_MS_MAX {
            return invalid(format!(
                "{name} must be between 1 and {TIMEOUT_MS_MAX}, got {value}"
            ));
        }
    }
    Ok(())
}

/// The member timeouts in range, and the heartbeat interval below the
/// session and registration timeouts.
fn check_member_timeouts(config: &GroupConfig) -> Result<(), ProtocolError> {
    check_timeouts_in_range(&[
        ("session_timeout_ms", config.session_timeout_ms),
        ("registration_timeout_ms", config.registration_timeout_ms),
        ("expansion_timeout_ms", config.expansion_timeout_ms),
        ("heartbeat_interval_ms", config.heartbeat_interval_ms),
    ])?;
    if config.heartbeat_interval_ms >= config.session_timeout_ms {
        return invalid("heartbeat_interval_ms must be below session_timeout_ms".into());
    }
    // A static member heard from once per interval would otherwise expire
    // between any two heartbeats, rejoin, and bump the group for ever.
    if config.heartbeat_interval_ms >= config.registration_timeout_ms {
        return invalid("heartbeat_interval_ms must be below registration_timeout_ms".into());
    }
    Ok(())
}

/// The assignor's name, and the params it is given: how many, and each
/// key's and value's size.
fn check_assignor_and_params(config: &GroupConfig) -> Result<(), ProtocolError> {
    if config.assignor.is_empty() || config.assignor.len() > MEMBER_NAME_LEN_MAX {
        return invalid("assignor must name a built-in or uploaded assignor".into());
    }
    // The assignor sees the group's params plus the ones the host adds
    // (`assignor_input`); together they must pass the guest SDK's input
    // check, or no call would ever answer.
    let added = HOST_PARAMS
        .iter()
        .filter(|key| !config.params.contains_key(**key))
        .count();
    if config.params.len() + added > PARAMS_MAX {
        return invalid(format!(
            "more than {} params: an assignor sees at most {PARAMS_MAX}, and the host adds {}",
            PARAMS_MAX - added,
            HOST_PARAMS.join(" and ")
        ));
    }
    if let Some((key, _)) = config
        .params
        .iter()
        .find(|(k, v)| k.is_empty() || k.len() > PARAM_KEY_LEN_MAX || v.len() > PARAM_LEN_MAX)
    {
        return invalid(format!(
            "param {key:?}: keys must be 1 to {PARAM_KEY_LEN_MAX} bytes and values at most {PARAM_LEN_MAX}"
        ));
    }
    Ok(())
}

/// The learners' timeouts in range, and how many learners at once.
fn check_learners(config: &GroupConfig) -> Result<(), ProtocolError> {
    check_timeouts_in_range(&[
        ("probing_interval_ms", config.probing_interval_ms),
        ("scale_down_timeout_ms", config.scale_down_timeout_ms),
    ])?;
    if config.max_learners > LEARNERS_PER_GROUP_MAX {
        return invalid(format!(
            "max_learners must be at most {LEARNERS_PER_GROUP_MAX}, got {}",
            config.max_learners
        ));
    }
    Ok(())
}

/// The fallback assignor's name, and each assignor limit set between 1
/// and its ceiling.
fn check_fallback_and_limits(config: &GroupConfig) -> Result<(), ProtocolError> {
    if let Some(fallback) = &config.fallback_assignor
        && (fallback.is_empty() || fallback.len() > MEMBER_NAME_LEN_MAX)
    {
        return invalid("fallback_assignor must name a built-in or uploaded assignor".into());
    }
    let limits = &config.assignor_limits;
    for (name, value, max) in [
        ("fuel_max", limits.fuel_max, u64::MAX),
        ("time_limit_ms", limits.time_limit_ms, TIMEOUT_MS_MAX),
        ("memory_max_mib", limits.memory_max_mib, MEMORY_MAX_MIB_MAX),
    ] {
        if let Some(value) = value
            && (value == 0 || value > max)
        {
            return invalid(format!(
                "assignor limit {name} must be between 1 and {max}, got {value}"
            ));
        }
    }
    Ok(())
}

/// The member token's digest, if set: 64 lowercase hex digits.
fn check_member_token(config: &GroupConfig) -> Result<(), ProtocolError> {
    if let Some(digest) = &config.member_token_sha256
        && (digest.len() != 64
            || !digest
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
    {
        return invalid("member_token_sha256 must be 64 lowercase hex digits".into());
    }
    Ok(())
}

/// Refuses a config that brings in a name the name rule refuses: a topic,
/// a param key (the assignor's `info()` lists its params by it; a value
/// is the assignor's to read, and may be any text), the assignor and its
/// fallback.
fn check_names(config: &GroupConfig) -> Result<(), ProtocolError> {
    for topic in &config.topics {
        refuse_invisible("topic name", &topic.name)?;
    }
    for key in config.params.keys() {
        refuse_invisible("param key", key)?;
    }
    refuse_invisible("assignor", &config.assignor)?;
    if let Some(fallback) = &config.fallback_assignor {
        refuse_invisible("fallback_assignor", fallback)?;
    }
    Ok(())
}

/// Refuses a group whose members' heartbeats could be past the host's
/// body limit: a member holding every task, scattered so that no ranges
/// form, with a lag on each (and a load on each, when the group takes
/// loads), would be answered 413 on every beat and the group never
/// settle. Refused here, it is one clear error up front.
fn check_heartbeat_fits(config: &GroupConfig) -> Result<(), ProtocolError> {
    use assignd_wire::{
        HEARTBEAT_BODY_BYTES_MAX, heartbeat_bytes_max, heartbeat_with_loads_bytes_max,
    };
    let topics = config
        .topics
        .iter()
        .map(|t| (t.name.as_str(), t.partitions));
    let (len, each, fix) = match config.load_unit {
        None => (heartbeat_bytes_max(topics), "a lag", ""),
        Some(_) => (
            heartbeat_with_loads_bytes_max(topics),
            "a lag and a load",
            ", or no load_unit",
        ),
    };
    if len > HEARTBEAT_BODY_BYTES_MAX {
        return invalid(format!(
            "a member holding every task of this group would send heartbeats of up to {len} bytes \
             (tasks as [topic, partition] pairs with {each} each), more than the heartbeat body \
             limit of {HEARTBEAT_BODY_BYTES_MAX}: use fewer tasks or shorter topic names{fix}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::group::TopicConfig;

    fn topics(name_len: usize) -> GroupConfig {
        GroupConfig::with_topics(
            (0..10)
                .map(|i| TopicConfig {
                    name: format!("{i:0>name_len$}"),
                    partitions: 100_000,
                })
                .collect(),
        )
    }

    /// At the task limit, names short enough for a heartbeat to fit are
    /// taken; one byte longer, the config is refused and nothing changes.
    #[test]
    fn a_group_whose_heartbeat_could_not_fit_is_refused() {
        let mut core = Coordinator::new(7);
        assert!(core.configure("g", topics(12), 0).is_ok());
        let Err(ProtocolError::Invalid(message)) = core.configure("h", topics(13), 0) else {
            panic!("refused as invalid");
        };
        assert!(message.contains("heartbeat body limit"), "{message}");
        assert!(core.group("h").is_none());
    }

    /// A group that takes loads counts a load on every task too: the
    /// names that fit without one are refused with one, naming the way out.
    #[test]
    fn a_group_that_takes_loads_counts_them_in_its_heartbeat() {
        let mut core = Coordinator::new(7);
        let mut config = topics(12);
        config.load_unit = Some("records/s".to_owned());
        let Err(ProtocolError::Invalid(message)) = core.configure("g", config, 0) else {
            panic!("refused as invalid");
        };
        assert!(message.contains("or no load_unit"), "{message}");
        assert!(core.group("g").is_none());
        let mut config = topics(12);
        config.topics.truncate(4);
        config.load_unit = Some("records/s".to_owned());
        assert!(core.configure("g", config, 0).is_ok());
    }
}
