//! The cluster-wide fault state the components obey: a lost cluster (nothing
//! runs, nothing is written to the API), a cut VIP (NodePort listeners closed)
//! and a node whose network does not hairpin (a pod cannot reach itself
//! through its own Service).

/// The faults currently injected into one simulated cluster.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Faults {
    /// The whole cluster is lost: containers are stopped, controllers and the
    /// kubelet make no API writes, NodePort listeners are closed.
    pub cluster_lost: bool,
    /// The cluster's VIP is unreachable: NodePort listeners are closed.
    pub vip_cut: bool,
    /// Pods cannot reach themselves through a Service (the kubelet's
    /// `hairpinMode: none`, or a CNI without hairpin support): a connection
    /// to `VIP:nodePort` from the pod the route leads to is reset. A property
    /// of the cluster's network rather than an outage, so `heal` keeps it.
    pub no_hairpin: bool,
}

impl Faults {
    /// Whether NodePort listeners may accept connections.
    pub fn vip_reachable(&self) -> bool {
        !self.cluster_lost && !self.vip_cut
    }
}
