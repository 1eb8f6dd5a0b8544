//! The model's lost volumes: a member whose PVC is lost (or that the planner
//! resyncs) comes back empty. It re-installs the config from the primary's
//! heartbeat when it is in it (mongod's uninitialized node answering the
//! primary), is in initial sync (STARTUP2, never electable) until it caught
//! up, and keeps whatever vote its entry had: what the planner must take.

use super::world::World;
use crate::hostconf::MemberAddress;
use crate::member::MemberSlot;

impl World {
    /// The node of `cluster`'s `slot` loses its data.
    pub fn lose_volume(&mut self, cluster: usize, slot: MemberSlot) -> Result<(), String> {
        let in_config = self.set.as_ref().and_then(|s| {
            s.owners
                .values()
                .any(|key| *key == (cluster, slot))
                .then(|| s.config.settings.replica_set_id.clone())
                .flatten()
        });
        let node = self
            .nodes
            .get_mut(&(cluster, slot))
            .ok_or("no such StatefulSet")?;
        node.holds = in_config;
        node.emptied = true;
        Ok(())
    }

    /// Running emptied nodes finish their initial sync.
    pub fn finish_resyncs(&mut self) {
        for node in self.nodes.values_mut().filter(|n| n.running()) {
            node.emptied = false;
        }
    }

    /// Whether the node `host` reaches is emptied and not resynced yet.
    pub fn emptied(&self, host: &MemberAddress) -> bool {
        self.node_at(host)
            .and_then(|key| self.nodes.get(&key))
            .is_some_and(|n| n.emptied && n.running())
    }
}
