//! [`RolloutSpec`]: what one rollout does, parsed and checked from the
//! strings the CLI and the HTTP API take ([`RolloutRequest`]), with its
//! limits and defaults. The parts with their own syntax live beside it:
//! the group selector (`selector.rs`), the steps (`steps.rs`) and the
//! abort rules (`rules.rs`); this file owns the request as a whole, the
//! durations, and the module's params.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::limits::{
    ABORT_RULES_MAX, EVERY_MS_DEFAULT, EVERY_MS_MAX, EVERY_MS_MIN, ROLLOUT_ID_LEN_MAX, SpecError,
};
use super::rules::{AbortRule, default_abort_rules};
use super::selector::Selector;
use super::steps::{Step, parse_steps};
use crate::protocol::core::{
    HOST_PARAMS, MEMBER_NAME_LEN_MAX, PARAM_KEY_LEN_MAX, PARAM_LEN_MAX, PARAMS_MAX,
};

/// The steps when none are given: one group, then a tenth, a half, all.
pub const STEPS_DEFAULT: &str = "1,10%,50%,100%";

/// A rollout as asked for: every field as the CLI flag or the HTTP body
/// spells it. [`RolloutSpec::parse`] checks it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RolloutRequest {
    /// Chosen by the shell (unique among its rollouts).
    pub id: String,
    /// The assignor module to roll out (a module reference, as a binding
    /// names it).
    pub module: String,
    #[serde(default)]
    pub params: BTreeMap<String, String>,
    /// `--groups`: `prefix:P`, `list:a,b,c` or `label:K=V`.
    pub groups: String,
    /// `--steps`, e.g. `1,10%,50%,100%` ([`STEPS_DEFAULT`] if absent).
    #[serde(default)]
    pub steps: Option<String>,
    /// `--every`, e.g. `5m` ([`EVERY_MS_DEFAULT`] if absent).
    #[serde(default)]
    pub every: Option<String>,
    /// `--shadow`, the shadow period before the first step (`every` if
    /// absent).
    #[serde(default)]
    pub shadow: Option<String>,
    /// `--abort-on`, each `failures`, `moves>X`, `moves>Rx` or
    /// `rebalance_ms>Y` (`failures` alone if empty).
    #[serde(default)]
    pub abort_on: Vec<String>,
}

/// A checked rollout: what the machine runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RolloutSpec {
    pub id: String,
    pub module: String,
    pub params: BTreeMap<String, String>,
    pub selector: Selector,
    pub steps: Vec<Step>,
    /// How long each step is watched before the next one begins.
    pub every_ms: u64,
    /// How long the module is shadowed on every selected group before
    /// the first step.
    pub shadow_ms: u64,
    /// Any rule that fires rolls the rollout back.
    pub abort_on: Vec<AbortRule>,
}

impl RolloutSpec {
    /// Checks every field of `request`, in field order: the first broken
    /// one is named.
    pub fn parse(request: &RolloutRequest) -> Result<RolloutSpec, SpecError> {
        check_id(&request.id)?;
        check_module(&request.module)?;
        check_params(&request.params)?;
        let selector: Selector = request.groups.parse()?;
        let steps = parse_steps(request.steps.as_deref().unwrap_or(STEPS_DEFAULT))?;
        let every_ms = match &request.every {
            Some(text) => parse_period_ms("every", text)?,
            None => EVERY_MS_DEFAULT,
        };
        let shadow_ms = match &request.shadow {
            Some(text) => parse_period_ms("shadow", text)?,
            None => every_ms,
        };
        if request.abort_on.len() > ABORT_RULES_MAX {
            return Err(SpecError::new(
                "abort-on",
                format!(
                    "at most {ABORT_RULES_MAX} rules, got {}",
                    request.abort_on.len()
                ),
            ));
        }
        let abort_on = if request.abort_on.is_empty() {
            default_abort_rules()
        } else {
            let rules: Result<Vec<AbortRule>, SpecError> =
                request.abort_on.iter().map(|r| r.parse()).collect();
            rules?
        };
        Ok(RolloutSpec {
            id: request.id.clone(),
            module: request.module.clone(),
            params: request.params.clone(),
            selector,
            steps,
            every_ms,
            shadow_ms,
            abort_on,
        })
    }
}

fn check_id(id: &str) -> Result<(), SpecError> {
    let allowed = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-');
    if id.is_empty() || id.len() > ROLLOUT_ID_LEN_MAX || !id.bytes().all(allowed) {
        return Err(SpecError::new(
            "id",
            format!("must be 1 to {ROLLOUT_ID_LEN_MAX} bytes of [A-Za-z0-9._-], got {id:?}"),
        ));
    }
    Ok(())
}

fn check_module(module: &str) -> Result<(), SpecError> {
    if module.is_empty() || module.len() > MEMBER_NAME_LEN_MAX {
        return Err(SpecError::new(
            "module",
            format!("must name an uploaded assignor module (1 to {MEMBER_NAME_LEN_MAX} bytes)"),
        ));
    }
    Ok(())
}

/// The module's params pass the checks a group's binding passes
/// (`protocol::core::check_config`): with the params the host adds, at
/// most [`PARAMS_MAX`], each key and value within its length.
fn check_params(params: &BTreeMap<String, String>) -> Result<(), SpecError> {
    let added = HOST_PARAMS
        .iter()
        .filter(|key| !params.contains_key(**key))
        .count();
    if params.len() + added > PARAMS_MAX {
        return Err(SpecError::new(
            "param",
            format!(
                "more than {} params: an assignor sees at most {PARAMS_MAX}, and the host adds {}",
                PARAMS_MAX - added,
                HOST_PARAMS.join(" and ")
            ),
        ));
    }
    if let Some((key, _)) = params
        .iter()
        .find(|(k, v)| k.is_empty() || k.len() > PARAM_KEY_LEN_MAX || v.len() > PARAM_LEN_MAX)
    {
        return Err(SpecError::new(
            "param",
            format!(
                "{key:?}: keys must be 1 to {PARAM_KEY_LEN_MAX} bytes and values at most {PARAM_LEN_MAX}"
            ),
        ));
    }
    Ok(())
}

/// Splits a `--param K=V` argument at its first `=`.
pub fn parse_param(text: &str) -> Result<(String, String), SpecError> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => Err(SpecError::new(
            "param",
            format!("{text:?} is not KEY=VALUE"),
        )),
    }
}

/// A duration as a whole number and a unit: `250ms`, `30s`, `5m`, `1h`.
pub fn parse_duration_ms(text: &str) -> Result<u64, String> {
    let digits_end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits_end);
    let unit_ms: u64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => 0,
    };
    let number: Option<u64> = number.parse().ok();
    match number.and_then(|n| n.checked_mul(unit_ms)) {
        Some(ms) if unit_ms > 0 => Ok(ms),
        _ => Err(format!(
            "{text:?} is not a duration: a whole number then ms, s, m or h (e.g. 5m)"
        )),
    }
}

/// A duration of `field` within [`EVERY_MS_MIN`] ..= [`EVERY_MS_MAX`].
fn parse_period_ms(field: &'static str, text: &str) -> Result<u64, SpecError> {
    let ms = parse_duration_ms(text).map_err(|e| SpecError::new(field, e))?;
    if !(EVERY_MS_MIN..=EVERY_MS_MAX).contains(&ms) {
        return Err(SpecError::new(
            field,
            format!("must be 1s to 24h, got {text} ({ms} ms)"),
        ));
    }
    Ok(ms)
}
