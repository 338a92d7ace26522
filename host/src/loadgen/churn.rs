//! The churn grammar of `assignd loadgen --churn` and `assignd demo
//! --churn`: `scale:FROM->TO@TIME`, `kill:N@TIME` and `leave:N@TIME`,
//! comma-separated in increasing time order, parsed into timed events and
//! checked against the member count they start from. It knows nothing of
//! the members the events are applied to (the fleet does that).

use std::time::Duration;

/// The most members a churn event may bring a group to.
pub const CHURN_MEMBERS_MAX: u32 = 10_000;

/// What a churn event does to every group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChurnKind {
    /// Members are added (they join cold) or the newest drain (their
    /// tasks move as the new owners warm up, then they leave).
    Scale { from: u32, to: u32 },
    /// The newest N members vanish without leaving (as kill -9); the host
    /// notices at the session timeout.
    Kill(u32),
    /// The newest N members stop and leave at once (their tasks are free
    /// at once, to cold owners).
    Leave(u32),
}

/// One churn event, `at` after measuring starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChurnEvent {
    /// The event as written.
    pub spec: String,
    pub at: Duration,
    pub kind: ChurnKind,
}

impl ChurnEvent {
    /// The member count per group after this event, given the count before.
    pub fn members_after(&self, before: u32) -> u32 {
        match self.kind {
            ChurnKind::Scale { to, .. } => to,
            ChurnKind::Kill(n) | ChurnKind::Leave(n) => before - n,
        }
    }
}

/// The grammar, for error messages and `--help`.
pub const CHURN_GRAMMAR: &str = "EVENT[,EVENT]... where EVENT is scale:FROM->TO@TIME, kill:N@TIME or leave:N@TIME, and TIME is seconds or milliseconds after measuring starts (10s, 2.5s, 500ms), increasing";

/// Parses a churn spec: comma-separated events in increasing time order.
pub fn parse_churn(spec: &str) -> Result<Vec<ChurnEvent>, String> {
    let mut events: Vec<ChurnEvent> = Vec::new();
    for part in spec.split(',') {
        let part = part.trim();
        let event =
            parse_event(part).map_err(|e| format!("{part:?}: {e} (expected {CHURN_GRAMMAR})"))?;
        if let Some(last) = events.last()
            && event.at <= last.at
        {
            return Err(format!(
                "{part:?}: comes at or before {:?}; events must be in increasing time order",
                last.spec
            ));
        }
        events.push(event);
    }
    Ok(events)
}

fn parse_event(part: &str) -> Result<ChurnEvent, String> {
    let (what, at) = part.rsplit_once('@').ok_or_else(|| "no @TIME".to_owned())?;
    let at = parse_time(at.trim())?;
    let (verb, arg) = what
        .split_once(':')
        .ok_or_else(|| "no KIND: (scale:, kill: or leave:)".to_owned())?;
    let count = |text: &str| -> Result<u32, String> {
        let n: u32 = text
            .trim()
            .parse()
            .map_err(|_| format!("{text:?} is not a member count"))?;
        if n > CHURN_MEMBERS_MAX {
            return Err(format!("{n} members is over {CHURN_MEMBERS_MAX}"));
        }
        Ok(n)
    };
    let kind = match verb.trim() {
        "scale" => {
            let (from, to) = arg
                .split_once("->")
                .ok_or_else(|| "scale needs FROM->TO".to_owned())?;
            let (from, to) = (count(from)?, count(to)?);
            if from == to {
                return Err("scale needs FROM and TO to differ".to_owned());
            }
            if to == 0 {
                return Err("scale needs TO of at least 1".to_owned());
            }
            ChurnKind::Scale { from, to }
        }
        "kill" | "leave" => {
            let n = count(arg)?;
            if n == 0 {
                return Err(format!("{} needs N of at least 1", verb.trim()));
            }
            if verb.trim() == "kill" {
                ChurnKind::Kill(n)
            } else {
                ChurnKind::Leave(n)
            }
        }
        other => return Err(format!("unknown kind {other:?}")),
    };
    Ok(ChurnEvent {
        spec: part.to_owned(),
        at,
        kind,
    })
}

fn parse_time(text: &str) -> Result<Duration, String> {
    let (number, scale) = if let Some(ms) = text.strip_suffix("ms") {
        (ms, 1e-3)
    } else if let Some(s) = text.strip_suffix('s') {
        (s, 1.0)
    } else {
        return Err(format!("time {text:?} needs a unit (s or ms)"));
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("time {text:?} is not a number"))?;
    if !value.is_finite() || value < 0.0 || value * scale > 86_400.0 {
        return Err(format!("time {text:?} must be between 0 and 1 day"));
    }
    Ok(Duration::from_secs_f64(value * scale))
}

/// Checks that the events fit `members` per group at the start: a scale
/// starts from the count in force, kills and leaves keep one member.
pub fn check_churn(events: &[ChurnEvent], members: u32) -> Result<(), String> {
    let mut count = members;
    for event in events {
        match event.kind {
            ChurnKind::Scale { from, .. } if from != count => {
                return Err(format!(
                    "{:?}: the groups have {count} members then, not {from}",
                    event.spec
                ));
            }
            ChurnKind::Kill(n) | ChurnKind::Leave(n) if n >= count => {
                return Err(format!(
                    "{:?}: the groups have {count} members then; at least one must stay",
                    event.spec
                ));
            }
            _ => {}
        }
        count = event.members_after(count);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_churn_spec_parses_into_timed_events_and_is_checked_against_the_counts() {
        let events =
            parse_churn("scale:10->20@10s, kill:2@12.5s,leave:3@13000ms,scale:15->4@20s").unwrap();
        let kinds: Vec<(ChurnKind, Duration)> = events.iter().map(|e| (e.kind, e.at)).collect();
        assert_eq!(
            kinds,
            vec![
                (
                    ChurnKind::Scale { from: 10, to: 20 },
                    Duration::from_secs(10)
                ),
                (ChurnKind::Kill(2), Duration::from_millis(12_500)),
                (ChurnKind::Leave(3), Duration::from_secs(13)),
                (
                    ChurnKind::Scale { from: 15, to: 4 },
                    Duration::from_secs(20)
                ),
            ]
        );
        assert_eq!(events[1].spec, "kill:2@12.5s");
        assert_eq!(check_churn(&events, 10), Ok(()));
        assert!(check_churn(&events, 9).unwrap_err().contains("not 10"));
        for bad in [
            "",
            "scale:1->1@1s",
            "scale:1->0@1s",
            "scale:1-2@1s",
            "kill:0@1s",
            "kill:x@1s",
            "scale:1->2@-1s",
            "scale:1->2@1h",
            "scale:1->20000@1s",
        ] {
            assert!(parse_churn(bad).is_err(), "{bad:?}");
        }
    }
}
