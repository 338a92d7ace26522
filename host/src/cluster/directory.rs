//! [`Directory`]: what a node knows of who coordinates which shard, for
//! routing requests. The node's placement rounds refresh it (every
//! [`super::node_machine::PLACEMENT_INTERVAL_MS_MAX`] at most); the API reads it to
//! redirect a heartbeat or forward an admin request to the owner. It may
//! be a round stale: a stale answer costs the caller one more hop (the
//! node it was sent to redirects again, or answers 503 while the shard is
//! between owners), never a wrong answer, because only the owner serves.

use std::sync::RwLock;

use super::view::ClusterView;
use crate::protocol::shard::ShardId;

/// A node of the cluster, as the directory knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeAddress {
    pub name: String,
    /// Its advertised base URL (`serve --advertise`).
    pub url: String,
}

/// The cluster's nodes and the shards' owners, as last read.
pub struct Directory {
    me: String,
    view: RwLock<ClusterView>,
}

impl Directory {
    /// An empty directory of the node named `me`.
    pub fn new(me: impl Into<String>) -> Self {
        Directory {
            me: me.into(),
            view: RwLock::new(ClusterView::default()),
        }
    }

    /// This node's name.
    pub fn me(&self) -> &str {
        &self.me
    }

    /// Replaces what the directory knows with `view`.
    pub fn update(&self, view: ClusterView) {
        *self.view.write().unwrap_or_else(|e| e.into_inner()) = view;
    }

    /// Names `to` as `shard`'s owner until the next update: a node that
    /// has just handed the shard over sends requests on to its successor
    /// at once, not to itself until its next placement round.
    pub fn hand_over(&self, shard: ShardId, to: &str) {
        let mut view = self.view.write().unwrap_or_else(|e| e.into_inner());
        view.owners.insert(shard, to.to_owned());
    }

    /// What the directory knows now.
    pub fn view(&self) -> ClusterView {
        self.view.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The owner of `shard` and where it is reached, if the shard has an
    /// owner that is a live node.
    pub fn owner(&self, shard: ShardId) -> Option<NodeAddress> {
        let view = self.view.read().unwrap_or_else(|e| e.into_inner());
        let name = view.owners.get(&shard)?;
        let url = view.nodes.get(name)?;
        Some(NodeAddress {
            name: name.clone(),
            url: url.clone(),
        })
    }

    /// Every live node but this one.
    pub fn others(&self) -> Vec<NodeAddress> {
        let view = self.view.read().unwrap_or_else(|e| e.into_inner());
        view.nodes
            .iter()
            .filter(|(name, _)| **name != self.me)
            .map(|(name, url)| NodeAddress {
                name: name.clone(),
                url: url.clone(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owner_is_known_only_while_it_is_a_live_node() {
        let directory = Directory::new("a");
        assert_eq!(directory.owner(0), None);
        let mut view = ClusterView::default();
        view.nodes.insert("a".into(), "http://a".into());
        view.nodes.insert("b".into(), "http://b".into());
        view.owners.insert(0, "b".into());
        // Deregistered (leaving) but still holding its claim.
        view.owners.insert(1, "c".into());
        directory.update(view);
        assert_eq!(
            directory.owner(0),
            Some(NodeAddress {
                name: "b".into(),
                url: "http://b".into()
            })
        );
        assert_eq!(directory.owner(1), None);
        assert_eq!(directory.owner(2), None);
        let others: Vec<String> = directory.others().into_iter().map(|n| n.name).collect();
        assert_eq!(others, ["b"]);
    }
}
