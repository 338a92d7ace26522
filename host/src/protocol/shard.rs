//! Which shard owns a group. A data dir is created with a fixed number of
//! shards (recorded in it, never changed after); a group belongs to the
//! shard its name hashes to, as a Kafka group belongs to the partition of
//! `__consumer_offsets` its id hashes to. Each shard is one protocol core
//! ([`crate::protocol::core::Coordinator`]) with its own record log, run
//! on its own by the runtime, so nothing here knows of more than one.

/// A shard's number: `0 .. shard_count`.
pub type ShardId = u32;

/// The shard count of a new data dir: many more than this machine's cores,
/// so that the shards of one host can later be spread over many hosts
/// (the unit that moves is a shard).
pub const SHARD_COUNT_DEFAULT: u32 = 64;

/// The most shards a data dir may have: each served shard holds a log
/// segment, its folder and a persistence thread.
pub const SHARD_COUNT_MAX: u32 = 1024;

/// The shard of `group` among `shard_count`: CRC-32C of the name's bytes,
/// modulo the count. Stable across versions and platforms: it decides
/// where a group's records live on disk.
pub fn shard_of(group: &str, shard_count: u32) -> ShardId {
    assert!(
        (1..=SHARD_COUNT_MAX).contains(&shard_count),
        "a shard count of {shard_count}"
    );
    crc32c::crc32c(group.as_bytes()) % shard_count
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_keeps_its_shard_and_groups_spread_over_every_shard() {
        // Pinned: the shard decides which log holds a group's records, so
        // the function may never change under an existing data dir.
        assert_eq!(shard_of("orders", 64), crc32c::crc32c(b"orders") % 64);
        assert_eq!(shard_of("orders", 1), 0);
        let mut counts = vec![0u32; 64];
        for i in 0..6400 {
            counts[shard_of(&format!("group-{i}"), 64) as usize] += 1;
        }
        // 100 expected per shard; a hash this skewed would be a bug.
        assert!(
            counts.iter().all(|&n| (50..=150).contains(&n)),
            "{counts:?}"
        );
    }
}
