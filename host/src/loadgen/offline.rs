//! `assignd loadgen input` and `assignd loadgen score`: load-aware
//! assignment offline, for groups larger than a fleet on this machine can
//! run. `input` writes a GroupInput (the `assignd run` format) of one
//! topic whose tasks carry `--task-load`'s loads at time 0, every member
//! holding an equal count of them (what a group balanced by counts has
//! before its loads are known); `score` weighs an input's current
//! assignment and an assignor's answer with the input's loads: the most
//! loaded member over the mean before and after, whether every member is
//! in the band, and the tasks and load moved. It owns those two documents'
//! figures; running the assignor is `assignd run`'s.

use std::collections::BTreeMap;
use std::path::PathBuf;

use assignd_guest_sdk::json::{input_to_json, parse_assignment, parse_input};
use assignd_guest_sdk::load::{BAND_PARAM, band};
use assignd_guest_sdk::model::{GroupInput, Member, NO_MEMBER, TaskLoads as Rows, Topic};
use assignd_guest_sdk::validate::InputLimits;
use serde_json::json;

use super::load_figures::spread;
use super::task_load::{TaskLoad, TaskLoads};
use super::{LoadTestError, out_line};

/// The topic of a generated input.
const TOPIC: &str = "orders";

/// What `assignd loadgen input` writes: its flags, by the same names.
#[derive(Clone, Debug)]
pub struct InputSettings {
    pub members: u32,
    pub tasks: u32,
    pub task_load: String,
    pub load_seed: u64,
    /// The input's load_unit; None writes the input of a group balancing
    /// counts (no loads).
    pub load_unit: Option<String>,
    pub load_band: Option<String>,
    /// Where to write it (default: stdout).
    pub out: Option<PathBuf>,
}

/// What `assignd loadgen score` reads: its flags, by the same names.
#[derive(Clone, Debug)]
pub struct ScoreSettings {
    /// The input with loads (its current assignment is "before").
    pub input: PathBuf,
    /// The assignor's answer to it, or to the same group without loads.
    pub assignment: PathBuf,
}

/// The generated input.
pub fn generate(settings: &InputSettings) -> Result<GroupInput, LoadTestError> {
    let usage = LoadTestError::Usage;
    let kind =
        TaskLoad::parse(&settings.task_load).map_err(|e| usage(format!("--task-load {e}")))?;
    let loads = TaskLoads::new(kind, settings.tasks, settings.members, settings.load_seed);
    let mut params = BTreeMap::new();
    if let Some(b) = &settings.load_band {
        params.insert(BAND_PARAM.to_owned(), b.clone());
    }
    band(&params).map_err(|e| usage(format!("--load-band: {e}")))?;
    let members: Vec<Member> = (0..settings.members)
        .map(|m| Member {
            id: format!("m{m:05}"),
            name: None,
            rack: None,
            capacity: 1,
            subscription: 0,
            load_capacity: None,
            utilisation: None,
        })
        .collect();
    // Equal counts, in blocks of consecutive partitions.
    let (m, t) = (u64::from(settings.members), u64::from(settings.tasks));
    let active_owner: Vec<u32> = (0..t).map(|p| (p * m / t) as u32).collect();
    let mut rows = Rows::default();
    if settings.load_unit.is_some() {
        for (p, load) in loads.loads(0.0).into_iter().enumerate() {
            rows.push(p as u32, load);
        }
    }
    Ok(GroupInput {
        topics: vec![Topic {
            name: TOPIC.to_owned(),
            partitions: settings.tasks,
        }],
        subscriptions: vec![vec![0]],
        members,
        active_owner,
        learners: Default::default(),
        standbys: Default::default(),
        lags: Default::default(),
        params,
        load_unit: settings.load_unit.clone(),
        loads: rows,
    })
}

/// `assignd loadgen input`: writes the generated input.
pub fn input(settings: InputSettings) -> Result<(), LoadTestError> {
    let doc = input_to_json(&generate(&settings)?);
    let text = serde_json::to_string(&doc).expect("JSON");
    match &settings.out {
        Some(path) => std::fs::write(path, text)
            .map_err(|e| LoadTestError::Failed(format!("cannot write {}: {e}", path.display()))),
        None => {
            out_line(&text);
            Ok(())
        }
    }
}

/// The figures of one answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Score {
    pub band: f64,
    pub before: f64,
    pub after: f64,
    pub in_band_before: bool,
    pub in_band_after: bool,
    /// Members outside the band before and after.
    pub outside_before: u32,
    pub outside_after: u32,
    pub tasks_moved: u64,
    pub load_moved: f64,
    pub load_total: f64,
}

/// Weighs `input`'s current owners and `answer` with `input`'s loads.
pub fn score_of(input: &GroupInput, answer: &[u32]) -> Result<Score, String> {
    let loads = input.task_loads();
    if loads.iter().any(Option::is_none) {
        return Err("the input lacks the load of some task (write it with --load-unit)".into());
    }
    let loads: Vec<f64> = loads.into_iter().flatten().collect();
    let band = band(&input.params).map_err(|e| e.to_string())?;
    let per_member = |owners: &[u32]| {
        let mut sums = vec![0.0; input.members.len()];
        for (task, &owner) in owners.iter().enumerate() {
            if owner != NO_MEMBER {
                sums[owner as usize] += loads[task];
            }
        }
        sums
    };
    let before = spread(&per_member(&input.active_owner), band).ok_or("no load")?;
    let after = spread(&per_member(answer), band).ok_or("no load")?;
    let mut score = Score {
        band,
        before: before.max_over_mean,
        after: after.max_over_mean,
        in_band_before: before.in_band,
        in_band_after: after.in_band,
        outside_before: before.outside,
        outside_after: after.outside,
        tasks_moved: 0,
        load_moved: 0.0,
        load_total: loads.iter().sum(),
    };
    for (task, (&was, &now)) in input.active_owner.iter().zip(answer).enumerate() {
        if was != NO_MEMBER && was != now {
            score.tasks_moved += 1;
            score.load_moved += loads[task];
        }
    }
    Ok(score)
}

/// `assignd loadgen score`: prints one line of figures, and the same as
/// JSON on the next.
pub fn score(settings: ScoreSettings) -> Result<(), LoadTestError> {
    let read = |path: &PathBuf| {
        std::fs::read_to_string(path)
            .map_err(|e| LoadTestError::Failed(format!("cannot read {}: {e}", path.display())))
    };
    let input = parse_input(&read(&settings.input)?, &InputLimits::default())
        .map_err(|e| LoadTestError::Usage(format!("--input: {e}")))?;
    let answer = parse_assignment(&input, &read(&settings.assignment)?)
        .map_err(|e| LoadTestError::Usage(format!("--assignment: {e}")))?;
    let s = score_of(&input, &answer.active_owner).map_err(LoadTestError::Usage)?;
    out_line(&format!(
        "members={} tasks={} band={} max_over_mean_before={:.3} max_over_mean_after={:.3} members_outside_band_before={} members_outside_band_after={} tasks_moved={} load_moved={:.1} load_moved_percent={:.2}",
        input.members.len(),
        input.task_count(),
        s.band,
        s.before,
        s.after,
        s.outside_before,
        s.outside_after,
        s.tasks_moved,
        s.load_moved,
        100.0 * s.load_moved / s.load_total,
    ));
    out_line(
        &json!({
            "members": input.members.len(),
            "tasks": input.task_count(),
            "band": s.band,
            "max_over_mean": {"before": s.before, "after": s.after},
            "in_band": {"before": s.in_band_before, "after": s.in_band_after},
            "members_outside_band": {"before": s.outside_before, "after": s.outside_after},
            "tasks_moved": s.tasks_moved,
            "load_moved": s.load_moved,
            "load_total": s.load_total,
        })
        .to_string(),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(load_unit: Option<&str>) -> InputSettings {
        InputSettings {
            members: 4,
            tasks: 10,
            task_load: "zipf".into(),
            load_seed: 1,
            load_unit: load_unit.map(str::to_owned),
            load_band: Some("loose".into()),
            out: None,
        }
    }

    #[test]
    fn a_generated_input_balances_counts_and_carries_the_loads() {
        let input = generate(&settings(Some("records/s"))).unwrap();
        assert_eq!(input.active_owner, [0, 0, 0, 1, 1, 2, 2, 2, 3, 3]);
        assert_eq!(input.loads.len(), 10);
        assert_eq!(input.params[BAND_PARAM], "loose");
        // Through the offline format and back.
        let text = input_to_json(&input).to_string();
        let again = parse_input(&text, &InputLimits::default()).unwrap();
        assert_eq!(again.task_loads(), input.task_loads());
        assert_eq!(again.load_unit.as_deref(), Some("records/s"));
        let counts = generate(&settings(None)).unwrap();
        assert!(counts.loads.is_empty() && counts.load_unit.is_none());
    }

    #[test]
    fn a_score_weighs_before_and_after_and_counts_the_moves() {
        let mut input = generate(&settings(Some("u"))).unwrap();
        input.loads = Rows::default();
        for (task, load) in [10.0, 10.0, 10.0, 10.0].into_iter().enumerate() {
            input.loads.push(task as u32, load);
        }
        input.topics[0].partitions = 4;
        input.active_owner = vec![0, 0, 0, 1];
        input.members.truncate(2);
        let s = score_of(&input, &[0, 0, 1, 1]).unwrap();
        assert_eq!((s.before, s.after), (1.5, 1.0));
        assert_eq!((s.in_band_before, s.in_band_after), (false, true));
        assert_eq!((s.outside_before, s.outside_after), (2, 0));
        assert_eq!((s.tasks_moved, s.load_moved, s.load_total), (1, 10.0, 40.0));
        let counts = generate(&settings(None)).unwrap();
        assert!(score_of(&counts, &counts.active_owner).is_err());
    }
}
