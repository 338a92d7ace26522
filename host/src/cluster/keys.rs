//! The cluster's etcd keyspace: every key a node reads or writes is built
//! here, relative to the cluster's prefix ([`super::Etcd::key`] puts the
//! prefix in front; the simulator's lease store uses them as they are).
//!
//! ```text
//! shard-count                      the cluster's shard count (no lease)
//! admin-token-sha256               the admin token's digest (no lease)
//! nodes/NAME                       a live node's advertised URL, under its lease
//! owners/NNNN                      shard NNNN's owner's name, under its lease:
//!                                  the claim every write of the shard is guarded by
//! shards/NNNN/start                the index of the shard's first live log chunk
//! shards/NNNN/log/IIIIIIIIIIIIIIIIIIII
//!                                  one chunk of the shard's log (20 digits)
//! features/format_version          the cluster's record format level
//! features/nodes/NAME              what a live node reads and writes, under its lease
//! module-meta/ID                   an uploaded module's metadata
//! module-names/NAME@VERSION        the id a module's name and version stand for
//! module-chunks/ID/CCCCCC          a module's bytes, in chunks (6 digits)
//! module-users/REF/GROUP           a group that uses the module REF names
//! rollouts/ID                      a rollout (JSON), written by shard 0's owner
//! ```
//!
//! Owners are kept apart from the logs so that a placement round reads
//! every owner in one small range. It owns the spelling of keys only: what
//! is stored under them is up to the modules that write them.

use crate::protocol::shard::ShardId;

/// The cluster setting holding its shard count.
pub const SHARD_COUNT: &str = "shard-count";

/// The cluster setting holding the SHA-256 of its admin token.
pub const ADMIN_TOKEN_SHA256: &str = "admin-token-sha256";

/// The prefix of every live node's registration.
pub const NODES: &str = "nodes/";

/// The prefix of every shard's owner.
pub const OWNERS: &str = "owners/";

/// The prefix of the cluster's format level and of the nodes' supports.
pub const FEATURES: &str = "features/";

/// The cluster's record format level.
pub const FORMAT_VERSION: &str = "features/format_version";

/// The prefix of every uploaded module's metadata.
pub const MODULE_META: &str = "module-meta/";

/// The prefix of every module user (`module-users/REF/GROUP`).
pub const MODULE_USERS: &str = "module-users/";

/// The prefix of every rollout.
pub const ROLLOUTS: &str = "rollouts/";

/// `rollouts/ID`: rollout `id`, written under shard 0's claim.
pub fn rollout(id: &str) -> String {
    format!("{ROLLOUTS}{id}")
}

/// `nodes/NAME`: node `name`'s registration.
pub fn node(name: &str) -> String {
    format!("{NODES}{name}")
}

/// `owners/NNNN`: the claim of `shard`.
pub fn owner(shard: ShardId) -> String {
    format!("{OWNERS}{shard:04}")
}

/// `shards/NNNN/start`: the index of `shard`'s first live chunk.
pub fn log_start(shard: ShardId) -> String {
    format!("shards/{shard:04}/start")
}

/// `shards/NNNN/log/`: the prefix of `shard`'s log chunks.
pub fn log_prefix(shard: ShardId) -> String {
    format!("shards/{shard:04}/log/")
}

/// `shards/NNNN/log/IIIIIIIIIIIIIIIIIIII`: chunk `index` of `shard`'s log
/// (zero-padded, so that key order is index order).
pub fn log_chunk(shard: ShardId, index: u64) -> String {
    format!("{}{index:020}", log_prefix(shard))
}

/// `features/nodes/NAME`: what node `name` reads and writes.
pub fn feature_support(name: &str) -> String {
    format!("{FEATURES}nodes/{name}")
}

/// `module-meta/ID`.
pub fn module_meta(id: &str) -> String {
    format!("{MODULE_META}{id}")
}

/// `module-names/NAME@VERSION`.
pub fn module_name(name: &str, version: &str) -> String {
    format!("module-names/{name}@{version}")
}

/// `module-chunks/ID/`: the prefix of module `id`'s chunks.
pub fn module_chunks(id: &str) -> String {
    format!("module-chunks/{id}/")
}

/// `module-chunks/ID/CCCCCC`: chunk `index` of module `id`.
pub fn module_chunk(id: &str, index: usize) -> String {
    format!("{}{index:06}", module_chunks(id))
}

/// `module-users/REF/`: the prefix of the groups that use `reference`.
pub fn module_users_of(reference: &str) -> String {
    format!("{MODULE_USERS}{reference}/")
}

/// `module-users/REF/GROUP`.
pub fn module_user(reference: &str, group: &str) -> String {
    format!("{}{group}", module_users_of(reference))
}

/// The last segment of a key: the name of `nodes/NAME`, the shard of
/// `owners/NNNN`, the index of a log chunk.
pub fn last_segment(key: &str) -> &str {
    key.rsplit('/').next().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_spelled_as_the_layout_draws_them() {
        assert_eq!(node("a"), "nodes/a");
        assert_eq!(owner(7), "owners/0007");
        assert_eq!(log_start(7), "shards/0007/start");
        assert_eq!(log_chunk(7, 3), "shards/0007/log/00000000000000000003");
        assert_eq!(feature_support("a"), "features/nodes/a");
        assert_eq!(module_chunk("id", 2), "module-chunks/id/000002");
        assert_eq!(module_user("r@1", "g"), "module-users/r@1/g");
        assert_eq!(last_segment(&owner(12)), "0012");
        assert_eq!(rollout("r1"), "rollouts/r1");
    }
}
