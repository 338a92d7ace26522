//! The operator's inputs, as the API takes them: start a rollout, list
//! them, read one, pause, resume and abort it. Each input to a rollout is
//! persisted before it is answered and before its commands are performed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::rollout::{GroupCounts, Outputs, Rollout, RolloutRequest, RolloutSpec, RolloutStatus};

use super::state::{Kept, State};
use super::store::RolloutRecord;
use super::{ROLLOUTS_KEPT_MAX, RolloutRefusal, Rollouts, now_ms, starting};

/// The body of `POST /v1/rollouts`: the CLI's flags as strings.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StartRequest {
    /// The rollout's id, 1 to 64 bytes of `[A-Za-z0-9._-]` (one is made
    /// up from the time if absent).
    #[serde(default)]
    pub id: Option<String>,
    /// The assignor module to roll out: a built-in name, a module id or
    /// `name@version`.
    pub module: String,
    /// `prefix:P`, `list:a,b,c` or `label:KEY=VALUE`.
    pub groups: String,
    /// The module's params.
    #[serde(default)]
    pub params: BTreeMap<String, String>,
    /// Cumulative counts or shares of the selected groups
    /// (`1,10%,50%,100%` if absent).
    #[serde(default)]
    pub steps: Option<String>,
    /// How long each step is watched (`5m` if absent; `1s` to `24h`).
    #[serde(default)]
    pub every: Option<String>,
    /// How long the module is shadowed before the first step (`every` if
    /// absent).
    #[serde(default, alias = "shadow")]
    pub shadow_for: Option<String>,
    /// `failures`, `moves>X`, `moves>Rx`, `rebalance_ms>Y` (`failures`
    /// if empty).
    #[serde(default)]
    pub abort_on: Vec<String>,
}

/// A rollout at a glance, one line of `GET /v1/rollouts`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RolloutSummary {
    pub id: String,
    pub module: String,
    /// The selector, as given.
    pub selector: String,
    /// `shadowing`, `step`, `completing`, `rolling_back`, `completed`,
    /// `rolled_back` or `failed`.
    pub phase: String,
    /// Why it is paused, if it is.
    pub paused: Option<String>,
    pub step: usize,
    pub steps: usize,
    #[schema(value_type = Object)]
    pub groups: GroupCounts,
    /// Unix ms.
    pub started_ms: u64,
}

/// `GET /v1/rollouts`: every rollout kept, the running ones and the last
/// finished ones, by id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RolloutList {
    pub rollouts: Vec<RolloutSummary>,
}

impl Rollouts {
    /// Starts a rollout: the spec checked, the module looked up, the
    /// groups selected and checked against the running rollouts.
    pub async fn start(&self, request: StartRequest) -> Result<RolloutStatus, RolloutRefusal> {
        let now = now_ms();
        let request = RolloutRequest {
            id: request.id.unwrap_or_else(|| format!("rollout-{now}")),
            module: request.module,
            params: request.params,
            groups: request.groups,
            steps: request.steps,
            every: request.every,
            shadow: request.shadow_for,
            abort_on: request.abort_on,
        };
        let spec = RolloutSpec::parse(&request)?;
        let client = self.client()?;
        let known = client
            .module_exists(&spec.module)
            .await
            .map_err(RolloutRefusal::Unavailable)?;
        if !known {
            return Err(RolloutRefusal::UnknownModule(spec.module.clone()));
        }
        let groups = starting::select(client, &spec.selector).await?;
        if groups.is_empty() {
            return Err(RolloutRefusal::EmptySelection(spec.selector.to_string()));
        }
        let mut state = self.coordinating().await?;
        let id = spec.id.clone();
        if state.kept.contains_key(&id) {
            return Err(RolloutRefusal::Exists(id));
        }
        for group in &groups {
            if let Some(rollout) = state.active_group(&group.name) {
                return Err(RolloutRefusal::GroupInRollout {
                    group: group.name.clone(),
                    rollout: rollout.to_owned(),
                });
            }
        }
        let (rollout, out) = Rollout::start(spec, groups, now_ms())?;
        let record = RolloutRecord {
            rollout,
            tallies: BTreeMap::new(),
        };
        let bytes = serde_json::to_vec(&record).map_err(|e| {
            RolloutRefusal::Unavailable(format!("a rollout that does not serialize: {e}"))
        })?;
        check_size(bytes.len(), self.store.document_bytes_max())?;
        self.store
            .save(&id, bytes)
            .await
            .map_err(RolloutRefusal::Unavailable)?;
        state.kept.insert(id.clone(), Kept::stored(record));
        self.absorb(&mut state, &id, out).await?;
        state.prune(&self.store, ROLLOUTS_KEPT_MAX).await;
        Ok(state.kept[&id].record.rollout.status())
    }

    /// Every rollout kept, by id.
    pub async fn list(&self) -> Result<RolloutList, RolloutRefusal> {
        let state = self.coordinating().await?;
        let rollouts = state
            .kept
            .values()
            .map(|kept| summary(&kept.record.rollout))
            .collect();
        Ok(RolloutList { rollouts })
    }

    /// One rollout's status.
    pub async fn status(&self, id: &str) -> Result<RolloutStatus, RolloutRefusal> {
        let state = self.coordinating().await?;
        let kept = state
            .kept
            .get(id)
            .ok_or_else(|| RolloutRefusal::UnknownRollout(id.to_owned()))?;
        Ok(kept.record.rollout.status())
    }

    /// Holds rollout `id` where it is.
    pub async fn pause(&self, id: &str, reason: &str) -> Result<RolloutStatus, RolloutRefusal> {
        self.operate(id, |rollout, now| rollout.pause(reason, now))
            .await
    }

    /// Lets rollout `id` go on.
    pub async fn resume(&self, id: &str) -> Result<RolloutStatus, RolloutRefusal> {
        self.operate(id, |rollout, now| rollout.resume(now)).await
    }

    /// Rolls rollout `id` back.
    pub async fn abort(&self, id: &str, reason: &str) -> Result<RolloutStatus, RolloutRefusal> {
        self.operate(id, |rollout, now| rollout.abort(reason, now))
            .await
    }

    async fn operate(
        &self,
        id: &str,
        input: impl FnOnce(&mut Rollout, u64) -> Result<Outputs, crate::rollout::RolloutError>,
    ) -> Result<RolloutStatus, RolloutRefusal> {
        let mut state = self.coordinating().await?;
        let kept = state
            .kept
            .get_mut(id)
            .ok_or_else(|| RolloutRefusal::UnknownRollout(id.to_owned()))?;
        let out = input(&mut kept.record.rollout, now_ms())?;
        self.absorb(&mut state, id, out).await?;
        Ok(state.kept[id].record.rollout.status())
    }

    /// The state, if this node coordinates rollouts.
    async fn coordinating(&self) -> Result<tokio::sync::MutexGuard<'_, State>, RolloutRefusal> {
        let state = self.state.lock().await;
        if !state.coordinating {
            return Err(RolloutRefusal::NotCoordinating);
        }
        Ok(state)
    }

    /// Persists rollout `id` and takes in `out`; a write that fails makes
    /// this node forget every rollout, to load them again from the store.
    async fn absorb(
        &self,
        state: &mut State,
        id: &str,
        out: Outputs,
    ) -> Result<(), RolloutRefusal> {
        let result = state.persist_and_absorb(&self.store, id, out).await;
        if let Err(error) = &result {
            tracing::warn!(rollout = id, %error, "a rollout could not be stored; loading every rollout again");
            state.forget();
        }
        state.gauge();
        self.wake.notify_one();
        result.map_err(RolloutRefusal::Unavailable)
    }
}

/// Refuses a rollout whose document, as it grows (a tally per group,
/// its events), would not fit the store: it starts at most half of it.
fn check_size(start_bytes: usize, max: Option<usize>) -> Result<(), RolloutRefusal> {
    match max {
        Some(max) if start_bytes > max / 2 => {
            Err(RolloutRefusal::Spec(crate::rollout::SpecError::new(
                "groups",
                format!(
                    "too many groups for one rollout in a cluster: its record would pass the {max} bytes etcd keeps; select fewer"
                ),
            )))
        }
        _ => Ok(()),
    }
}

fn summary(rollout: &Rollout) -> RolloutSummary {
    let status = rollout.status();
    RolloutSummary {
        id: status.id,
        module: status.module,
        selector: rollout.spec().selector.to_string(),
        phase: status.phase.name().to_owned(),
        paused: status.paused,
        step: status.step,
        steps: status.steps,
        groups: status.groups,
        started_ms: status.started_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_that_would_outgrow_its_store_is_refused_at_the_start() {
        assert!(
            check_size(10_000_000, None).is_ok(),
            "a data dir has no limit"
        );
        assert!(check_size(1_000, Some(4_000)).is_ok());
        let refused = check_size(2_001, Some(4_000)).unwrap_err();
        assert!(
            refused.to_string().starts_with("groups: too many groups"),
            "{refused}"
        );
    }
}
