//! How large a heartbeat's body can be: the host's limit on it, and the
//! largest body a member of a group can need, so that a group whose
//! heartbeat could not fit is refused when it is configured rather than
//! answered 413 on every beat.
//!
//! The bound is of compact JSON as this crate writes it (UTF-8 strings,
//! only `"`, `\` and control characters escaped), the member holding every
//! task of the group as `[topic, partition]` pairs (no ranges) and
//! reporting a lag of `u64::MAX` on each.

/// The largest heartbeat body the host reads. It fits a member holding
/// every task of any group the host accepts, since a group whose
/// [`heartbeat_bytes_max`] is past it is refused: at the host's task
/// limit (1,000,000) that is topic names of up to 12 bytes, at 100,000
/// tasks names of any length (255 bytes: 55 MB). Other routes keep a far
/// smaller limit.
pub const HEARTBEAT_BODY_BYTES_MAX: u64 = 64 << 20;

/// The fields of a heartbeat other than its task lists and subscription:
/// member id, name and rack (each at most 255 bytes, 6 bytes a byte when
/// every one is escaped as `\u00XX`), epoch, capacity, flags and keys; and
/// the endpoint and metadata, escaped the same way.
const HEARTBEAT_FIXED_BYTES_MAX: u64 = (8 << 10) + ENDPOINT_AND_METADATA_BYTES_MAX;

/// The endpoint and metadata pairs at their limits, every byte escaped,
/// with quotes and punctuation.
const ENDPOINT_AND_METADATA_BYTES_MAX: u64 = 6 * crate::ENDPOINT_BYTES_MAX as u64
    + 8
    + crate::METADATA_PAIRS_MAX as u64
        * (6 * (crate::METADATA_KEY_BYTES_MAX + crate::METADATA_VALUE_BYTES_MAX) as u64 + 6);

/// `[`, `,`, `]` and the `,` after an item of a task list.
const TASK_ITEM_PUNCTUATION_BYTES: u64 = 4;
/// A lag row's second `,` and the digits of `u64::MAX`.
const LAG_EXTRA_BYTES: u64 = 1 + 20;
/// A load item's second `,` and the longest number a load in
/// `0..=LOAD_MAX` is written as (`2.2250738585072014e-308` is 23 bytes).
const LOAD_EXTRA_BYTES: u64 = 1 + 24;
/// `utilisation` and `load_capacity` with their keys and numbers, and the
/// `loads` key.
const LOAD_FIXED_BYTES_MAX: u64 = 128;

/// The largest heartbeat a member of a group with `topics` (name,
/// partitions) sends: subscribed to every topic, holding every task and
/// reporting a lag on each, all without ranges.
pub fn heartbeat_bytes_max<'a>(topics: impl IntoIterator<Item = (&'a str, u32)>) -> u64 {
    bytes_max(topics, false)
}

/// [`heartbeat_bytes_max`] for a group that takes loads: the member also
/// reports a load on every task, without ranges, and its utilisation and
/// load capacity.
pub fn heartbeat_with_loads_bytes_max<'a>(topics: impl IntoIterator<Item = (&'a str, u32)>) -> u64 {
    bytes_max(topics, true) + LOAD_FIXED_BYTES_MAX
}

fn bytes_max<'a>(topics: impl IntoIterator<Item = (&'a str, u32)>, loads: bool) -> u64 {
    topics
        .into_iter()
        .map(|(name, partitions)| {
            let name = escaped_len_bytes(name);
            let tasks = u64::from(partitions);
            // Once in `topics`, then once per task in `owned`, in `lags`
            // and, when the group takes loads, in `loads`.
            let lists = if loads { 3 } else { 2 };
            let mut per_task = lists * (name + TASK_ITEM_PUNCTUATION_BYTES) + LAG_EXTRA_BYTES;
            if loads {
                per_task += LOAD_EXTRA_BYTES;
            }
            name + 1 + tasks * per_task + lists * digits_below(partitions)
        })
        .sum::<u64>()
        + HEARTBEAT_FIXED_BYTES_MAX
}

/// The length of `text` as a JSON string, quotes included.
pub fn escaped_len_bytes(text: &str) -> u64 {
    let inner: usize = text
        .chars()
        .map(|c| match c {
            '"' | '\\' | '\u{08}' | '\u{0c}' | '\n' | '\r' | '\t' => 2,
            c if (c as u32) < 0x20 => 6,
            c => c.len_utf8(),
        })
        .sum();
    inner as u64 + 2
}

/// The decimal digits of every number from 0 to `n - 1`, added up.
fn digits_below(n: u32) -> u64 {
    let n = u64::from(n);
    let mut total = 0;
    let (mut low, mut digits) = (0u64, 1u64);
    while low < n {
        let high = if low == 0 { 10 } else { low * 10 };
        total += (high.min(n) - low) * digits;
        low = high;
        digits += 1;
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_below_counts_every_number() {
        for n in [0, 1, 9, 10, 11, 99, 100, 101, 12_345] {
            let expected: u64 = (0..n).map(|p| p.to_string().len() as u64).sum();
            assert_eq!(digits_below(n), expected, "{n}");
        }
    }

    /// A heartbeat as large as a member of the group can make it: the
    /// bound holds it, with no more than the fixed fields' allowance
    /// spare.
    #[test]
    fn the_bound_holds_the_largest_heartbeat_of_a_group() {
        use serde_json::json;
        let long = "t".repeat(255);
        let topics = [
            (long.as_str(), 1_000),
            ("a\"b", 12),
            ("orders", 101),
            ("x", 0),
        ];
        let tasks = || {
            topics
                .iter()
                .flat_map(|&(name, n)| (0..n).map(move |p| (name, p)))
        };
        let body = json!({
            "member_id": "m".repeat(64),
            "member_name": "\u{1}".repeat(255),
            "member_epoch": i64::MIN,
            "topics": topics.iter().map(|(name, _)| name).collect::<Vec<_>>(),
            "rack": "\u{1}".repeat(255),
            "capacity": u32::MAX,
            "owned": tasks().map(|(t, p)| json!([t, p])).collect::<Vec<_>>(),
            "lags": tasks().map(|(t, p)| json!([t, p, u64::MAX])).collect::<Vec<_>>(),
            "drain": false,
            "task_ranges": false,
        });
        let written = serde_json::to_string(&body).unwrap().len() as u64;
        serde_json::from_value::<crate::HeartbeatRequest>(body).expect("a heartbeat");
        let bound = heartbeat_bytes_max(topics);
        assert!(written <= bound, "{written} > {bound}");
        assert!(
            bound - written <= HEARTBEAT_FIXED_BYTES_MAX,
            "{written} / {bound}"
        );
    }

    /// What the limit's doc says fits: the task limit (ten topics of
    /// 100,000) with names of 12 bytes, not 13; 100,000 tasks with names
    /// of 255 bytes.
    #[test]
    fn the_limit_fits_the_groups_its_doc_names() {
        let fits = |len: usize, topics: u32, partitions: u32| {
            let names: Vec<String> = (0..topics).map(|i| format!("{i:0>len$}")).collect();
            let bound = heartbeat_bytes_max(names.iter().map(|name| (name.as_str(), partitions)));
            bound <= HEARTBEAT_BODY_BYTES_MAX
        };
        assert!(fits(12, 10, 100_000));
        assert!(!fits(13, 10, 100_000));
        assert!(fits(255, 1, 100_000));
        assert!(fits(255, 10, 10_000));
    }

    /// With loads: a load on every task, each the longest a load can be
    /// written, and the member's utilisation and load capacity.
    #[test]
    fn the_bound_with_loads_holds_the_largest_heartbeat_of_a_group() {
        use serde_json::json;
        let long = "t".repeat(255);
        let topics = [(long.as_str(), 1_000), ("a\"b", 12), ("orders", 101)];
        let tasks = || {
            topics
                .iter()
                .flat_map(|&(name, n)| (0..n).map(move |p| (name, p)))
        };
        let longest_load = 2.225_073_858_507_201_4e-308_f64;
        assert_eq!(serde_json::to_string(&longest_load).unwrap().len(), 23);
        let body = json!({
            "member_id": "m".repeat(64),
            "member_name": "\u{1}".repeat(255),
            "member_epoch": i64::MIN,
            "topics": topics.iter().map(|(name, _)| name).collect::<Vec<_>>(),
            "rack": "\u{1}".repeat(255),
            "capacity": u32::MAX,
            "owned": tasks().map(|(t, p)| json!([t, p])).collect::<Vec<_>>(),
            "lags": tasks().map(|(t, p)| json!([t, p, u64::MAX])).collect::<Vec<_>>(),
            "loads": tasks().map(|(t, p)| json!([t, p, longest_load])).collect::<Vec<_>>(),
            "utilisation": 1.234_567_890_123_456_7e-5_f64,
            "load_capacity": 9.876_543_210_987_654e14_f64,
            "drain": false,
            "task_ranges": false,
        });
        let written = serde_json::to_string(&body).unwrap().len() as u64;
        serde_json::from_value::<crate::HeartbeatRequest>(body).expect("a heartbeat");
        let bound = heartbeat_with_loads_bytes_max(topics);
        assert!(written <= bound, "{written} > {bound}");
        assert!(bound > heartbeat_bytes_max(topics));
        assert!(
            bound - written <= HEARTBEAT_FIXED_BYTES_MAX + LOAD_FIXED_BYTES_MAX + 1_113 * 2,
            "{written} / {bound}"
        );
    }

    /// What the docs say a group that takes loads can have: 400,000 tasks
    /// with names of 12 bytes, not 600,000; 50,000 with names of 255.
    #[test]
    fn the_limit_with_loads_fits_the_groups_the_docs_name() {
        let fits = |len: usize, topics: u32, partitions: u32| {
            let names: Vec<String> = (0..topics).map(|i| format!("{i:0>len$}")).collect();
            let bound = heartbeat_with_loads_bytes_max(
                names.iter().map(|name| (name.as_str(), partitions)),
            );
            bound <= HEARTBEAT_BODY_BYTES_MAX
        };
        assert!(fits(12, 4, 100_000));
        assert!(!fits(12, 6, 100_000));
        assert!(fits(255, 1, 50_000));
    }

    #[test]
    fn escaped_len_is_what_serde_json_writes() {
        for text in [
            "",
            "orders",
            "a\"b\\c",
            "é€😀",
            "a\u{0}b\nc\u{1f}",
            "\u{7f}",
        ] {
            let written = serde_json::to_string(text).unwrap();
            assert_eq!(escaped_len_bytes(text), written.len() as u64, "{text:?}");
        }
    }
}
