//! `assignd rollout start|status|list|pause|resume|abort`: the rollout
//! routes of a running host (`/v1/rollouts…`), each one request, printed
//! for a person or, with `--json`, as the host answered.

use clap::{Args, Subcommand};
use serde_json::{Map, Value, json};

use super::{HostArgs, Remote, failure, parse_param, segment};
use crate::cli::Failure;

#[derive(Debug, Args)]
pub struct RolloutArgs {
    #[command(flatten)]
    host: HostArgs,
    /// Print the host's JSON answer rather than a summary.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: RolloutCommand,
}

#[derive(Debug, Subcommand)]
enum RolloutCommand {
    /// Roll a module out: shadow it on every selected group, then bind it
    /// to a growing share of them, rolling everything back by itself if a
    /// group turns unhealthy (docs/rollout.md).
    Start {
        /// The module: a built-in name, a module id, or name@version.
        #[arg(value_name = "REF")]
        module: String,
        /// `prefix:P`, `list:a,b,c` or `label:KEY=VALUE`.
        #[arg(long, value_name = "SELECTOR")]
        groups: String,
        /// A param of the module; repeatable.
        #[arg(long = "param", value_name = "KEY=VALUE", value_parser = parse_param)]
        params: Vec<(String, String)>,
        /// How many groups are bound once each step is done: counts or
        /// shares [default: 1,10%,50%,100%].
        #[arg(long)]
        steps: Option<String>,
        /// How long each step is watched, e.g. 5m [default: 5m].
        #[arg(long)]
        every: Option<String>,
        /// How long the module is shadowed before the first step
        /// [default: --every].
        #[arg(long = "shadow")]
        shadow: Option<String>,
        /// `failures`, `moves>X`, `moves>Rx` or `rebalance_ms>Y`;
        /// repeatable [default: failures].
        #[arg(long = "abort-on", value_name = "RULE")]
        abort_on: Vec<String>,
        /// The rollout's id [default: made up from the time].
        #[arg(long)]
        id: Option<String>,
    },
    /// One rollout: phase, step, groups by state, unhealthy groups, the
    /// last events.
    Status { id: String },
    /// Every rollout kept.
    List,
    /// Hold a rollout where it is (health is still judged).
    Pause {
        id: String,
        #[arg(long)]
        reason: String,
    },
    /// Let a paused rollout go on.
    Resume {
        id: String,
        #[arg(long, default_value = "")]
        reason: String,
    },
    /// Roll every group the rollout touched back, now.
    Abort {
        id: String,
        #[arg(long)]
        reason: String,
    },
}

pub fn rollout(args: RolloutArgs) -> Result<(), Failure> {
    let remote = Remote::new(args.host);
    let post = |path: &str, body: &Value| {
        let bytes = body.to_string();
        remote.post(path, Some(("application/json", bytes.as_bytes())))
    };
    let answer = match args.command {
        RolloutCommand::Start {
            module,
            groups,
            params,
            steps,
            every,
            shadow,
            abort_on,
            id,
        } => {
            let params: Map<String, Value> = params
                .into_iter()
                .map(|(k, v)| (k, Value::String(v)))
                .collect();
            let body = json!({
                "id": id, "module": module, "groups": groups, "params": params,
                "steps": steps, "every": every, "shadow_for": shadow, "abort_on": abort_on,
            });
            post("/v1/rollouts", &body)?
        }
        RolloutCommand::Status { id } => remote.get(&path(&id, ""))?,
        RolloutCommand::List => remote.get("/v1/rollouts")?,
        RolloutCommand::Pause { id, reason } => {
            post(&path(&id, "/pause"), &json!({"reason": reason}))?
        }
        RolloutCommand::Resume { id, reason } => {
            post(&path(&id, "/resume"), &json!({"reason": reason}))?
        }
        RolloutCommand::Abort { id, reason } => {
            post(&path(&id, "/abort"), &json!({"reason": reason}))?
        }
    };
    let answer = answer.ok_or_else(|| failure("the host answered nothing".into()))?;
    if args.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&answer).unwrap_or_default()
        );
    } else if let Some(rollouts) = answer["rollouts"].as_array() {
        outln!("{}", list_table(rollouts));
    } else {
        outln!("{}", status_text(&answer));
    }
    Ok(())
}

fn path(id: &str, rest: &str) -> String {
    format!("/v1/rollouts/{}{rest}", segment(id))
}

/// The phase, with its reason and the pause if any.
fn phase_text(status: &Value) -> String {
    let phase = &status["phase"];
    let mut text = phase["phase"].as_str().unwrap_or("?").to_owned();
    if let Some(reason) = phase["reason"].as_str() {
        text.push_str(&format!(" ({reason})"));
    }
    if let Some(paused) = status["paused"].as_str() {
        text.push_str(&format!(", paused: {paused}"));
    }
    text
}

fn counts_text(groups: &Value) -> String {
    [
        "pending",
        "shadowed",
        "bound",
        "restored",
        "unhealthy",
        "failed",
    ]
    .iter()
    .map(|k| format!("{k} {}", groups[k].as_u64().unwrap_or(0)))
    .collect::<Vec<_>>()
    .join(", ")
}

/// A rollout's status for a person.
fn status_text(status: &Value) -> String {
    let mut lines = vec![
        format!(
            "rollout {} of {}",
            status["id"].as_str().unwrap_or("?"),
            status["module"].as_str().unwrap_or("?")
        ),
        format!("phase: {}", phase_text(status)),
        format!(
            "step {} of {} (groups bound after each: {})",
            status["step"], status["steps"], status["step_sizes"]
        ),
        format!("groups: {}", counts_text(&status["groups"])),
    ];
    for unhealthy in status["unhealthy"].as_array().into_iter().flatten() {
        lines.push(format!(
            "unhealthy: {} by {}: {}",
            unhealthy["group"].as_str().unwrap_or("?"),
            unhealthy["rule"].as_str().unwrap_or("?"),
            unhealthy["detail"].as_str().unwrap_or("?")
        ));
    }
    if let Some(failed) = status["failed"].as_array().filter(|f| !f.is_empty()) {
        lines.push(format!(
            "could not be put back: {}",
            Value::Array(failed.clone())
        ));
    }
    if let Some(at) = status["next_decision_ms"].as_u64() {
        lines.push(format!("next decision at {at} (Unix ms)"));
    }
    lines.push("last events:".into());
    for event in status["last_events"].as_array().into_iter().flatten() {
        let mut fields = event.as_object().cloned().unwrap_or_default();
        let seq = fields.remove("seq").unwrap_or(Value::Null);
        let at = fields.remove("at_ms").unwrap_or(Value::Null);
        let kind = fields.remove("event").unwrap_or(Value::Null);
        let kind = kind.as_str().unwrap_or("?");
        let rest = if fields.is_empty() {
            String::new()
        } else {
            format!(" {}", Value::Object(fields))
        };
        lines.push(format!("  #{seq} at {at}: {kind}{rest}"));
    }
    lines.join("\n")
}

fn list_table(rollouts: &[Value]) -> String {
    if rollouts.is_empty() {
        return "no rollouts".into();
    }
    let mut lines = vec![format!(
        "{:<24} {:<24} {:<14} {:>9}  groups",
        "ID", "MODULE", "PHASE", "STEP"
    )];
    for r in rollouts {
        let mut phase = r["phase"].as_str().unwrap_or("?").to_owned();
        if !r["paused"].is_null() {
            phase.push_str(" (paused)");
        }
        lines.push(format!(
            "{:<24} {:<24} {:<14} {:>9}  {}",
            r["id"].as_str().unwrap_or("?"),
            r["module"].as_str().unwrap_or("?"),
            phase,
            format!("{}/{}", r["step"], r["steps"]),
            counts_text(&r["groups"])
        ));
    }
    lines.join("\n")
}
