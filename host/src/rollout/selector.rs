//! [`Selector`]: which groups a rollout takes, as `--groups` spells it.
//! The shell resolves it against the groups it sees with the pure
//! [`Selector::matches`]; the machine only ever gets the resulting names.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::limits::{ROLLOUT_GROUPS_MAX, SpecError};
use crate::protocol::core::GROUP_NAME_LEN_MAX;
use crate::protocol::group::{LABEL_KEY_LEN_MAX, LABEL_VALUE_LEN_MAX};

/// Which groups a rollout takes. In JSON, its text form (`prefix:orders-`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Selector {
    /// `prefix:P`: every group whose name starts with `P` (not empty).
    Prefix(String),
    /// `list:a,b,c`: exactly these groups (those that exist).
    List(BTreeSet<String>),
    /// `label:K=V`: every group whose config's `labels` map `K` to `V`.
    Label { key: String, value: String },
}

impl Selector {
    /// Whether the group `name`, with its config's `labels`, is selected.
    pub fn matches(&self, name: &str, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Selector::Prefix(prefix) => name.starts_with(prefix.as_str()),
            Selector::List(names) => names.contains(name),
            Selector::Label { key, value } => labels.get(key) == Some(value),
        }
    }
}

fn refused(message: String) -> SpecError {
    SpecError::new("groups", message)
}

fn parse_list(names: &str) -> Result<Selector, SpecError> {
    let mut set = BTreeSet::new();
    for name in names.split(',') {
        if name.is_empty() || name.len() > GROUP_NAME_LEN_MAX {
            return Err(refused(format!(
                "list: group names must be 1 to {GROUP_NAME_LEN_MAX} bytes, got {name:?}"
            )));
        }
        if !set.insert(name.to_owned()) {
            return Err(refused(format!("list: {name:?} is named twice")));
        }
    }
    if set.len() > ROLLOUT_GROUPS_MAX {
        return Err(refused(format!(
            "list: at most {ROLLOUT_GROUPS_MAX} groups, got {}",
            set.len()
        )));
    }
    Ok(Selector::List(set))
}

fn parse_label(pair: &str) -> Result<Selector, SpecError> {
    let Some((key, value)) = pair.split_once('=') else {
        return Err(refused(format!("label: {pair:?} is not KEY=VALUE")));
    };
    if key.is_empty() || key.len() > LABEL_KEY_LEN_MAX || value.len() > LABEL_VALUE_LEN_MAX {
        return Err(refused(format!(
            "label: the key must be 1 to {LABEL_KEY_LEN_MAX} bytes and the value at most {LABEL_VALUE_LEN_MAX}"
        )));
    }
    Ok(Selector::Label {
        key: key.to_owned(),
        value: value.to_owned(),
    })
}

impl FromStr for Selector {
    type Err = SpecError;

    fn from_str(text: &str) -> Result<Self, SpecError> {
        match text.split_once(':') {
            Some(("prefix", "")) => Err(refused(
                "prefix: must not be empty (to take every group, label them)".into(),
            )),
            Some(("prefix", prefix)) if prefix.len() <= GROUP_NAME_LEN_MAX => {
                Ok(Selector::Prefix(prefix.to_owned()))
            }
            Some(("prefix", _)) => Err(refused(format!(
                "prefix: at most {GROUP_NAME_LEN_MAX} bytes"
            ))),
            Some(("list", names)) => parse_list(names),
            Some(("label", pair)) => parse_label(pair),
            _ => Err(refused(format!(
                "{text:?} is none of prefix:P, list:a,b,c or label:KEY=VALUE"
            ))),
        }
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Selector::Prefix(prefix) => write!(f, "prefix:{prefix}"),
            Selector::List(names) => {
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                write!(f, "list:{}", names.join(","))
            }
            Selector::Label { key, value } => write!(f, "label:{key}={value}"),
        }
    }
}

impl TryFrom<String> for Selector {
    type Error = SpecError;

    fn try_from(text: String) -> Result<Self, SpecError> {
        text.parse()
    }
}

impl From<Selector> for String {
    fn from(selector: Selector) -> String {
        selector.to_string()
    }
}
