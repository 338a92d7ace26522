//! Loads: the `load_band` param (how far a member's load may stray from its
//! share) and the dense view of a group's known task loads. The host's
//! rebalance trigger reads the band through the same function as the
//! built-in balancers, so both agree on what "in band" means.

use std::collections::BTreeMap;

use crate::model::{AssignError, GroupInput};

/// The largest load a task or a member's capacity may have, in any unit.
pub const LOAD_MAX: f64 = 1e15;

/// The largest utilisation a member may report (1.0 is fully used).
pub const UTILISATION_MAX: f64 = 10.0;

/// The longest load unit, in bytes.
pub const LOAD_UNIT_LEN_MAX: usize = 32;

/// Whether `unit` is a load unit: 1 to [`LOAD_UNIT_LEN_MAX`] bytes of
/// visible ASCII (e.g. "records/s").
pub fn is_load_unit(unit: &str) -> bool {
    (1..=LOAD_UNIT_LEN_MAX).contains(&unit.len()) && unit.bytes().all(|b| b.is_ascii_graphic())
}

/// The param naming the band: a preset or a number 0 < b <= 1.
pub const BAND_PARAM: &str = "load_band";

/// The band when the group sets none.
pub const BAND_DEFAULT: f64 = 0.1;

/// The named bands, as (preset, fraction of the share).
pub const BAND_PRESETS: [(&str, f64); 3] = [("tight", 0.05), ("default", 0.1), ("loose", 0.25)];

/// The band of `params`: a member is in band when its load L is within
/// S*(1-b) ..= S*(1+b) of its share S. Unset gives [`BAND_DEFAULT`]; a
/// preset name gives its fraction; otherwise a number 0 < b <= 1.
pub fn band(params: &BTreeMap<String, String>) -> Result<f64, AssignError> {
    let Some(raw) = params.get(BAND_PARAM) else {
        return Ok(BAND_DEFAULT);
    };
    let value = raw.trim();
    if let Some((_, b)) = BAND_PRESETS.iter().find(|(name, _)| *name == value) {
        return Ok(*b);
    }
    match value.parse::<f64>() {
        Ok(b) if b > 0.0 && b <= 1.0 => Ok(b),
        _ => Err(AssignError::InvalidParam(format!(
            "param {BAND_PARAM}={raw:?} is neither tight, default or loose nor a number in (0, 1]"
        ))),
    }
}

impl GroupInput {
    /// One entry per task: its known load, or None when the host has no
    /// report for it (unknown, which is not zero). Rows for tasks out of
    /// range are ignored; a later row for the same task wins.
    pub fn task_loads(&self) -> Vec<Option<f64>> {
        let mut loads = vec![None; self.task_count()];
        for (task, load) in self.loads.iter() {
            if let Some(slot) = loads.get_mut(task as usize) {
                *slot = Some(load);
            }
        }
        loads
    }

    /// Whether every task's load is known (and the group has a load unit):
    /// only then do loads describe the whole group.
    pub fn loads_complete(&self) -> bool {
        self.load_unit.is_some() && self.task_loads().iter().all(Option::is_some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Topic;

    fn params(value: Option<&str>) -> BTreeMap<String, String> {
        value
            .map(|v| (BAND_PARAM.to_owned(), v.to_owned()))
            .into_iter()
            .collect()
    }

    #[test]
    fn band_presets_numbers_and_default() {
        assert_eq!(band(&params(None)), Ok(0.1));
        assert_eq!(band(&params(Some("tight"))), Ok(0.05));
        assert_eq!(band(&params(Some("default"))), Ok(0.1));
        assert_eq!(band(&params(Some("loose"))), Ok(0.25));
        assert_eq!(band(&params(Some(" 0.2 "))), Ok(0.2));
        assert_eq!(band(&params(Some("1"))), Ok(1.0));
    }

    #[test]
    fn band_refuses_out_of_range_and_garbage() {
        for bad in ["0", "-0.1", "1.01", "NaN", "inf", "wide", ""] {
            match band(&params(Some(bad))) {
                Err(AssignError::InvalidParam(m)) => assert!(m.contains(BAND_PARAM), "{m}"),
                other => panic!("{bad:?} gave {other:?}"),
            }
        }
    }

    #[test]
    fn task_loads_are_dense_with_unknowns() {
        let mut input = GroupInput {
            topics: vec![Topic {
                name: "t".into(),
                partitions: 3,
            }],
            ..GroupInput::default()
        };
        input.loads.push(2, 7.5);
        input.loads.push(0, 1.0);
        input.loads.push(9, 3.0);
        input.loads.push(0, 2.0);
        assert_eq!(input.task_loads(), vec![Some(2.0), None, Some(7.5)]);
        input.load_unit = Some("records/s".into());
        assert!(!input.loads_complete());
        input.loads.push(1, 0.0);
        assert!(input.loads_complete());
    }
}
