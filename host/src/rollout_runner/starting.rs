//! The groups a new rollout takes: the selector resolved against every
//! group the cluster has (`GET /v1/groups`, and each candidate's view for
//! its labels), and each selected group's binding and shadow as the
//! rollout finds them, which a rollback puts back.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::protocol::group::CallLimits;
use crate::rollout::{BindingRef, GroupStart, Selector};

use super::RolloutRefusal;
use super::client::InProcess;

/// Every group `selector` matches, as it is now.
pub async fn select(
    client: &InProcess,
    selector: &Selector,
) -> Result<Vec<GroupStart>, RolloutRefusal> {
    let names = client
        .group_names()
        .await
        .map_err(|e| RolloutRefusal::Unavailable(format!("listing the groups: {e}")))?;
    let no_labels = BTreeMap::new();
    let by_label = matches!(selector, Selector::Label { .. });
    let mut selected = Vec::new();
    for name in names {
        // Names alone decide but for a label: then every view is read.
        if !by_label && !selector.matches(&name, &no_labels) {
            continue;
        }
        let view = client
            .group(&name)
            .await
            .map_err(|e| RolloutRefusal::Unavailable(format!("reading group {name:?}: {e}")))?;
        // Deleted since it was listed.
        let Some(view) = view else { continue };
        let labels: BTreeMap<String, String> =
            serde_json::from_value(view["config"]["labels"].clone()).unwrap_or_default();
        if selector.matches(&name, &labels) {
            selected.push(group_start(name, &view));
        }
    }
    Ok(selected)
}

/// A group's binding and shadow, from its view.
fn group_start(name: String, view: &Value) -> GroupStart {
    let config = &view["config"];
    let current_binding = BindingRef {
        assignor: config["assignor"].as_str().unwrap_or_default().to_owned(),
        params: strings(&config["params"]),
        limits: limits(&config["assignor_limits"]),
        fallback: config["fallback_assignor"].as_str().map(str::to_owned),
    };
    let shadow = &view["shadow"]["binding"];
    let current_shadow = shadow["assignor"].as_str().map(|assignor| BindingRef {
        assignor: assignor.to_owned(),
        params: strings(&shadow["params"]),
        limits: limits(&shadow["limits"]),
        fallback: None,
    });
    GroupStart {
        name,
        current_binding,
        current_shadow,
    }
}

fn strings(value: &Value) -> BTreeMap<String, String> {
    serde_json::from_value(value.clone()).unwrap_or_default()
}

fn limits(value: &Value) -> CallLimits {
    serde_json::from_value(value.clone()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_group_start_is_its_binding_in_full_and_its_shadow() {
        let view = json!({
            "config": {
                "assignor": "sticky", "params": {"a": "1"},
                "assignor_limits": {"fuel_max": 7}, "fallback_assignor": "range",
            },
            "shadow": {"binding": {"assignor": "range", "params": {}, "limits": {}}},
        });
        let start = group_start("g".into(), &view);
        assert_eq!(start.current_binding.assignor, "sticky");
        assert_eq!(start.current_binding.params["a"], "1");
        assert_eq!(start.current_binding.limits.fuel_max, Some(7));
        assert_eq!(start.current_binding.fallback.as_deref(), Some("range"));
        assert_eq!(start.current_shadow.unwrap().assignor, "range");
        let bare = group_start("h".into(), &json!({"config": {"assignor": "range"}}));
        assert_eq!(bare.current_shadow, None);
    }
}
