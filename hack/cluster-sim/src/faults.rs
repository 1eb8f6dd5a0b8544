//! The cluster-wide fault state the components obey: a lost cluster (nothing
//! runs, nothing is written to the API) and a cut VIP (NodePort listeners closed).

/// The faults currently injected into one simulated cluster.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Faults {
    /// The whole cluster is lost: containers are stopped, controllers and the
    /// kubelet make no API writes, NodePort listeners are closed.
    pub cluster_lost: bool,
    /// The cluster's VIP is unreachable: NodePort listeners are closed.
    pub vip_cut: bool,
}

impl Faults {
    /// Whether NodePort listeners may accept connections.
    pub fn vip_reachable(&self) -> bool {
        !self.cluster_lost && !self.vip_cut
    }
}
