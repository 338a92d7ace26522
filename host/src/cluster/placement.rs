//! Which node should own which shard: [`plan`], a pure function of the
//! live nodes and the current owners, so that every node computes the same
//! plan from the same etcd snapshot and acts only on its own part of it
//! (it claims the free shards the plan gives it and releases the ones the
//! plan takes away).
//!
//! The plan is balanced (every node owns its share, the shard count over
//! the node count, give or take one) and sticky (a shard stays with its
//! owner while the owner is live and within its share), so a node that
//! joins takes only its share from the others, and a node that leaves
//! moves only its own shards.

use std::collections::BTreeMap;

use crate::protocol::shard::ShardId;

/// The owner each shard should have, given the live `nodes` and the
/// `owners` the shards have now (owners not among `nodes` are ignored:
/// their lease is ending). Every shard gets an owner if there is a node.
pub fn plan(
    shard_count: u32,
    nodes: &[String],
    owners: &BTreeMap<ShardId, String>,
) -> BTreeMap<ShardId, String> {
    let mut nodes: Vec<&String> = nodes.iter().collect();
    nodes.sort();
    nodes.dedup();
    if nodes.is_empty() {
        return BTreeMap::new();
    }
    let count = nodes.len() as u32;
    // The first `shard_count % count` nodes (in name order) take one more.
    let share = |i: usize| shard_count / count + u32::from((i as u32) < shard_count % count);
    let index: BTreeMap<&String, usize> = nodes.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let mut owned = vec![0u32; nodes.len()];
    let mut plan = BTreeMap::new();
    let mut free = Vec::new();
    for shard in 0..shard_count {
        match owners.get(&shard).and_then(|owner| index.get(owner)) {
            Some(&i) if owned[i] < share(i) => {
                owned[i] += 1;
                plan.insert(shard, nodes[i].clone());
            }
            _ => free.push(shard),
        }
    }
    // Free shards go to the nodes under their share, in node order.
    let mut i = 0;
    for shard in free {
        while owned[i] >= share(i) {
            i += 1;
        }
        owned[i] += 1;
        plan.insert(shard, nodes[i].clone());
    }
    plan
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("node-{i}")).collect()
    }

    fn counts(plan: &BTreeMap<ShardId, String>) -> BTreeMap<&str, u32> {
        let mut counts = BTreeMap::new();
        for owner in plan.values() {
            *counts.entry(owner.as_str()).or_default() += 1;
        }
        counts
    }

    #[test]
    fn a_node_that_joins_takes_only_its_share() {
        let two = names(2);
        let before = plan(64, &two, &BTreeMap::new());
        assert_eq!(
            counts(&before).values().copied().collect::<Vec<_>>(),
            [32, 32]
        );
        let three = names(3);
        let after = plan(64, &three, &before);
        let moved = (0..64).filter(|s| before[s] != after[s]).count();
        assert_eq!(moved, 21, "the new node's share moves, nothing else");
        assert!(after.values().filter(|o| *o == "node-2").count() == 21);
    }

    #[test]
    fn a_node_that_leaves_moves_only_its_own_shards() {
        let three = names(3);
        let before = plan(64, &three, &BTreeMap::new());
        let two = vec!["node-0".to_owned(), "node-2".to_owned()];
        let after = plan(64, &two, &before);
        for shard in 0..64 {
            if before[&shard] != "node-1" {
                assert_eq!(before[&shard], after[&shard], "shard {shard} moved");
            }
        }
        assert_eq!(
            counts(&after).values().copied().collect::<Vec<_>>(),
            [32, 32]
        );
    }

    #[test]
    fn no_node_no_plan() {
        assert!(plan(8, &[], &BTreeMap::new()).is_empty());
    }

    proptest! {
        #[test]
        fn every_shard_has_one_owner_and_shares_differ_by_at_most_one(
            shard_count in 1u32..200,
            node_count in 1usize..9,
            owners in proptest::collection::btree_map(0u32..200, 0usize..12, 0..200),
        ) {
            let nodes = names(node_count);
            let owners: BTreeMap<ShardId, String> = owners
                .into_iter()
                .map(|(s, n)| (s, format!("node-{n}")))
                .collect();
            let planned = plan(shard_count, &nodes, &owners);
            prop_assert_eq!(planned.len() as u32, shard_count);
            prop_assert!(planned.values().all(|o| nodes.contains(o)));
            let counts = counts(&planned);
            let min = nodes.iter().map(|n| counts.get(n.as_str()).copied().unwrap_or(0)).min().unwrap();
            let max = counts.values().copied().max().unwrap();
            prop_assert!(max - min <= 1, "{:?}", counts);
            // Sticky: a live owner within its share keeps every shard.
            for (node, &owned) in &counts {
                let had = owners.values().filter(|o| o == node).count() as u32;
                if had <= owned {
                    for (shard, owner) in &owners {
                        if owner == node && *shard < shard_count {
                            prop_assert_eq!(&planned[shard], owner);
                        }
                    }
                }
            }
            // The same inputs give the same plan on every node.
            prop_assert_eq!(plan(shard_count, &nodes, &owners), planned);
        }
    }
}
