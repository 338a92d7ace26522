//! `assignd demo`: the coordinator in process, simulated stateful workers
//! scaled on the default schedule; its output shows every scale event
//! reaching a stable group and no task ever active on two workers.

use crate::common::{assignd, stderr, stdout};

#[test]
fn the_demo_shows_scale_events_reaching_stable_with_no_double_ownership() {
    let output = assignd(&["demo", "--duration", "20", "--listen", "127.0.0.1:0"]);
    let out = stdout(&output);
    assert!(
        output.status.success(),
        "demo failed: {out}\n{}",
        stderr(&output)
    );
    // The host it started, and how to look at it.
    let first = out.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("assignd demo: a coordinator at http://127.0.0.1:"),
        "{first}"
    );
    assert!(out.contains("\nadmin token: "), "{out}");
    assert!(out.contains("/v1/groups/demo"), "{out}");
    let console = out
        .lines()
        .find(|line| line.starts_with("console: http://127.0.0.1:"))
        .unwrap_or_else(|| panic!("the console's URL: {out}"));
    assert!(console.contains("/ui "), "{console}");
    // A live report every second.
    assert!(out.contains("] epoch "), "{out}");
    assert!(out.contains("    worker-1 "), "{out}");
    // The summary: every scale event of the schedule settled.
    let summary: Vec<&str> = out
        .lines()
        .skip_while(|line| !line.starts_with("=== summary"))
        .collect();
    assert!(!summary.is_empty(), "no summary: {out}");
    let scales: Vec<&&str> = summary
        .iter()
        .filter(|line| line.starts_with("scale:"))
        .collect();
    assert_eq!(scales.len(), 4, "four scale events: {out}");
    for line in scales {
        assert!(line.contains(": stable after "), "{line}\n{out}");
        assert!(line.ends_with("double ownership 0"), "{line}");
    }
    assert!(
        summary.iter().any(|line| line.starts_with("kill:1@")),
        "{out}"
    );
    assert!(
        summary
            .iter()
            .any(|line| line.starts_with("double ownership: 0 ")),
        "{out}"
    );
}
