//! `assignd group shadow NAME …`: bind a shadow assignor beside a group's
//! live one, end it, promote it, or show its comparisons as a table. The
//! requests are `PUT`, `DELETE` and `GET /v1/groups/{group}/shadow`;
//! promoting binds the shadow's assignor live with `PUT .../assignor`,
//! which ends the shadow.

use clap::Args;
use serde_json::{Value, json};

use super::{Remote, bind_body, failure, parse_param, print, segment};
use crate::cli::Failure;

/// `group shadow`: with REF, bind it; with `--off`, end the shadow; with
/// `--promote`, make it live; with none of them, show it.
#[derive(Debug, Args)]
pub struct ShadowArgs {
    name: String,
    /// The shadow assignor: a built-in name, a module id, or name@version.
    #[arg(value_name = "REF", conflicts_with_all = ["off", "promote"])]
    module: Option<String>,
    /// A param of the shadow; repeatable.
    #[arg(long = "param", value_name = "KEY=VALUE", value_parser = parse_param,
          requires = "module")]
    params: Vec<(String, String)>,
    /// Fuel one shadow call may burn, under the host's ceiling.
    #[arg(long, value_name = "UNITS", requires = "module")]
    fuel_max: Option<u64>,
    /// Wall-clock limit of one shadow call, under the host's ceiling.
    #[arg(long, value_name = "MS", requires = "module")]
    time_limit_ms: Option<u64>,
    /// Memory a shadow call may grow to, under the host's ceiling.
    #[arg(long, value_name = "MIB", requires = "module")]
    memory_max_mib: Option<u64>,
    /// End the group's shadow.
    #[arg(long, conflicts_with = "promote")]
    off: bool,
    /// Bind the shadow's assignor, params and limits as the group's live
    /// binding (keeping its fallback); that ends the shadow.
    #[arg(long)]
    promote: bool,
    /// Show the shadow as the host's JSON rather than a table.
    #[arg(long, conflicts_with_all = ["module", "off", "promote"])]
    json: bool,
}

pub(super) fn shadow(remote: &Remote, args: ShadowArgs) -> Result<(), Failure> {
    let path = format!("/v1/groups/{}/shadow", segment(&args.name));
    if args.off {
        remote.delete(&path)?;
        outln!("the shadow of {} is ended", args.name);
        return Ok(());
    }
    if args.promote {
        return promote(remote, &args.name, &path);
    }
    let Some(module) = args.module else {
        let answer = remote.get(&path)?.unwrap_or(Value::Null);
        if args.json {
            print(Some(answer));
        } else {
            outln!("{}", table(&answer));
        }
        return Ok(());
    };
    let mut body = bind_body(
        module,
        args.params,
        None,
        [
            ("fuel_max", args.fuel_max),
            ("time_limit_ms", args.time_limit_ms),
            ("memory_max_mib", args.memory_max_mib),
        ],
    );
    let object = body.as_object_mut().expect("bind_body is an object");
    object.remove("fallback");
    let module = object.remove("module").expect("bind_body names the module");
    object.insert("assignor".into(), module);
    print(remote.put_json(&path, &body)?);
    Ok(())
}

/// Binds the shadow live, keeping the group's fallback, and prints the
/// group's view.
fn promote(remote: &Remote, name: &str, shadow_path: &str) -> Result<(), Failure> {
    let shadow = remote.get(shadow_path)?.unwrap_or(Value::Null);
    let binding = &shadow["binding"];
    if binding.is_null() {
        return Err(failure(format!(
            "no_shadow: group {name:?} has no shadow assignor to promote"
        )));
    }
    let view = remote.get(&format!("/v1/groups/{}", segment(name)))?;
    let fallback = view
        .as_ref()
        .map_or(&Value::Null, |v| &v["config"]["fallback_assignor"]);
    let body = json!({
        "module": binding["assignor"],
        "params": binding["params"],
        "limits": binding["limits"],
        "fallback": fallback,
    });
    let answer = remote.put_json(&format!("/v1/groups/{}/assignor", segment(name)), &body)?;
    print(answer);
    Ok(())
}

/// The shadow's binding, totals and comparisons as text.
fn table(shadow: &Value) -> String {
    let mut out = String::new();
    let binding = &shadow["binding"];
    if binding.is_null() {
        out.push_str("no shadow bound\n");
    } else {
        out.push_str(&format!(
            "shadow: {} params {} limits {} (bound at epoch {})\n",
            text(&binding["assignor"]),
            binding["params"],
            binding["limits"],
            binding["epoch"]
        ));
    }
    let totals = &shadow["totals"];
    out.push_str(&format!(
        "compared {}, disagreed {}, shadow failures {}, live failures {}, skipped {}; moved: live {}, shadow {}\n",
        totals["compared"],
        totals["disagreements"],
        totals["shadow_failures"],
        totals["live_failures"],
        totals["skipped"],
        totals["live_moved"],
        totals["shadow_moved"],
    ));
    let comparisons = shadow["comparisons"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if comparisons.is_empty() {
        out.push_str("no comparisons yet\n");
        return out;
    }
    let header = [
        "epoch",
        "reason",
        "moved live/shadow",
        "disagreeing",
        "spread live/shadow",
        "imbalance live/shadow",
        "ms live/shadow",
        "fuel live/shadow",
        "failure",
    ];
    let rows: Vec<Vec<String>> = comparisons.iter().map(row).collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].len())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        padded.join("  ").trim_end().to_owned() + "\n"
    };
    out.push_str(&line(header.iter().map(|h| (*h).to_owned()).collect()));
    for r in rows {
        out.push_str(&line(r));
    }
    out.trim_end().to_owned()
}

/// One comparison's cells.
fn row(comparison: &Value) -> Vec<String> {
    let (live, shadow) = (&comparison["live"], &comparison["shadow"]);
    let pair = |key: &str, show: fn(&Value) -> String| {
        format!("{}/{}", show(&live[key]), show(&shadow[key]))
    };
    let failure = [("live", live), ("shadow", shadow)]
        .iter()
        .filter_map(|(side, s)| s["failure"].as_str().map(|f| format!("{side}: {f}")))
        .collect::<Vec<_>>()
        .join("; ");
    vec![
        comparison["epoch"].to_string(),
        text(&comparison["reason"]),
        pair("moved", text),
        text(&comparison["disagreeing_tasks"]),
        pair("count_spread", text),
        pair("load_imbalance", |v| fixed(v, 2)),
        pair("elapsed_ms", |v| fixed(v, 1)),
        pair("fuel", text),
        if failure.is_empty() {
            "-".into()
        } else {
            failure
        },
    ]
}

/// A value as a cell: a string unquoted, null as `-`.
fn text(value: &Value) -> String {
    match value {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A number with `digits` decimals, null as `-`.
fn fixed(value: &Value, digits: usize) -> String {
    value
        .as_f64()
        .map_or_else(|| "-".into(), |n| format!("{n:.digits$}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_shows_both_sides_and_failures() {
        let shadow = json!({
            "binding": {"assignor": "range", "params": {}, "limits": {}, "epoch": 3, "at_ms": 10},
            "totals": {"compared": 1, "disagreements": 1, "shadow_failures": 1, "live_failures": 0,
                       "skipped": 0, "live_moved": 2, "shadow_moved": 0},
            "comparisons": [{
                "epoch": 4, "at_ms": 20, "reason": "join", "tasks": 6, "members": 2,
                "live": {"assignor": "sticky", "failure": null, "moved": 2, "learners_started": 0,
                         "count_spread": 0, "load_imbalance": null, "elapsed_ms": 1.5, "fuel": 900},
                "shadow": {"assignor": "range", "failure": "trap: unreachable", "moved": null,
                           "learners_started": null, "count_spread": null, "load_imbalance": null,
                           "elapsed_ms": 3.0, "fuel": null},
                "disagreeing_tasks": null,
            }],
        });
        let table = table(&shadow);
        assert!(table.starts_with("shadow: range params {}"), "{table}");
        assert!(
            table.contains("compared 1, disagreed 1, shadow failures 1"),
            "{table}"
        );
        let last = table.lines().last().unwrap();
        for cell in [
            "4",
            "join",
            "2/-",
            "1.5/3.0",
            "900/-",
            "shadow: trap: unreachable",
        ] {
            assert!(last.contains(cell), "{cell} in {last:?}");
        }
        let none = super::table(&json!({"binding": null, "totals": {}, "comparisons": []}));
        assert!(none.starts_with("no shadow bound"), "{none}");
    }
}
