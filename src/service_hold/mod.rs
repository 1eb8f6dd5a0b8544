//! Member Services held while their member is in the replica set.
//!
//! A member's NodePort Service is how its peers, the other clusters'
//! operators and the applications reach it at `VIP:NodePort`. kube-proxy and
//! the endpoint controllers keep serving a Service that is being deleted for as
//! long as the object exists, so the operator puts its finalizer on every
//! member Service of a live instance and lets one the control plane deleted go
//! only once its member is out of the majority-committed config, or once the
//! instance itself has gone. A control plane that deletes every Service by
//! mistake then takes no member off the network; a member that is removed the
//! ordinary way loses its Service as soon as it has left.

use k8s_openapi::api::core::v1::Service;
use kube::ResourceExt;

use crate::build::names;
use crate::hostconf::MemberAddress;
use crate::observe::ObservedSet;
use crate::validate::node_port;

/// The finalizer on member Services.
pub const SERVICE_FINALIZER: &str = "middleware.fedstate.io/member-service";

/// One member Service of the instance, as far as holding it goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberServiceObject {
    /// `metadata.name`.
    pub name: String,
    /// The Service's nodePort, once allocated.
    pub node_port: Option<u16>,
    /// It has a `deletionTimestamp`.
    pub deleting: bool,
    /// Its finalizers as read, for a patch guarded by them.
    pub finalizers: Vec<String>,
}

impl MemberServiceObject {
    /// Whether it carries [`SERVICE_FINALIZER`].
    pub fn held(&self) -> bool {
        self.finalizers.iter().any(|f| f == SERVICE_FINALIZER)
    }

    /// The member Services among `services`: NodePort Services named after a
    /// member slot of `instance`.
    pub fn of_instance(instance: &str, services: &[Service]) -> Vec<MemberServiceObject> {
        services
            .iter()
            .filter(|s| names::slot_of(instance, &s.name_any()).is_some())
            .filter_map(|service| {
                let node_port = node_port(service)?.and_then(|p| u16::try_from(p).ok());
                Some(MemberServiceObject {
                    name: service.name_any(),
                    node_port,
                    deleting: service.metadata.deletion_timestamp.is_some(),
                    finalizers: service.finalizers().to_vec(),
                })
            })
            .collect()
    }
}

/// Where the instance stands, as far as its Services go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InstanceLife {
    /// The `MongoDB` object lives: every member Service is claimed.
    Live,
    /// It is being deleted and this cluster's members are leaving: nothing
    /// new is claimed, a deleted Service still waits for its member.
    Leaving,
    /// Its members have left (or it was let go): every Service is released.
    Gone,
}

/// What the pass knows of the set's membership.
#[derive(Clone, Copy, Debug)]
pub enum Membership<'a> {
    /// The config the primary reports majority-committed, and this cluster's VIP.
    Committed { set: &'a ObservedSet, vip: &'a str },
    /// No committed config was read this pass (or the VIP is unknown).
    Unknown,
}

impl<'a> Membership<'a> {
    /// What `observation` tells, for the cluster whose VIP is `vip`.
    pub fn of(observation: Option<&'a ObservedSet>, vip: Option<&'a str>) -> Self {
        match (observation, vip) {
            (Some(set), Some(vip)) if set.config_committed => Membership::Committed { set, vip },
            _ => Membership::Unknown,
        }
    }
}

/// Why a deleted member Service is still held.
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::IntoStaticStr, strum::VariantNames)]
pub enum HoldReason {
    /// Its member is in the committed config.
    MemberInReplicaSet,
    /// No committed config was read this pass: whether its member left is not known.
    MembershipUnknown,
}

/// Why a member Service is let go.
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::IntoStaticStr, strum::VariantNames)]
pub enum ReleaseReason {
    /// Its member is not in the committed config.
    MemberLeft,
    /// It has no nodePort: it routes nothing.
    NoNodePort,
    /// The instance has gone from this cluster.
    InstanceGone,
}

/// A deleted member Service still held, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeldService {
    /// The Service's name.
    pub name: String,
    /// The member it routes to, `VIP:nodePort`, when the VIP is known.
    pub address: Option<MemberAddress>,
    /// Why it is held.
    pub reason: HoldReason,
}

/// What this pass does to the member Services' finalizers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServiceHolds {
    /// Live member Services to put the finalizer on.
    pub claim: Vec<MemberServiceObject>,
    /// Held Services to let go.
    pub release: Vec<(MemberServiceObject, ReleaseReason)>,
    /// Deleted Services kept.
    pub held: Vec<HeldService>,
}

/// Plans the finalizers of `services` for an instance in `life`, by what
/// `membership` says.
pub fn plan_holds(
    services: &[MemberServiceObject],
    life: InstanceLife,
    membership: Membership,
) -> ServiceHolds {
    let mut holds = ServiceHolds::default();
    for service in services {
        if life == InstanceLife::Gone {
            if service.held() {
                holds
                    .release
                    .push((service.clone(), ReleaseReason::InstanceGone));
            }
            continue;
        }
        if !service.deleting {
            if !service.held() && life == InstanceLife::Live {
                holds.claim.push(service.clone());
            }
            continue;
        }
        if !service.held() {
            continue;
        }
        let Some(node_port) = service.node_port else {
            holds
                .release
                .push((service.clone(), ReleaseReason::NoNodePort));
            continue;
        };
        match membership {
            Membership::Committed { set, vip } => {
                let address = MemberAddress {
                    host: vip.to_string(),
                    port: node_port,
                };
                if set.config.contains(&address) {
                    holds.held.push(HeldService {
                        name: service.name.clone(),
                        address: Some(address),
                        reason: HoldReason::MemberInReplicaSet,
                    });
                } else {
                    holds
                        .release
                        .push((service.clone(), ReleaseReason::MemberLeft));
                }
            }
            Membership::Unknown => holds.held.push(HeldService {
                name: service.name.clone(),
                address: None,
                reason: HoldReason::MembershipUnknown,
            }),
        }
    }
    holds
}

impl HeldService {
    /// How [`Self::describe`] names the Service: `Service <name> `.
    pub fn mention(&self) -> String {
        format!("Service {} ", self.name)
    }

    /// One line for status: the Service, its member and why it is kept.
    pub fn describe(&self) -> String {
        let member = self
            .address
            .as_ref()
            .map(|a| format!("({a}) "))
            .unwrap_or_default();
        let why = match self.reason {
            HoldReason::MemberInReplicaSet => {
                "its member is in the replica set; released once it has left"
            }
            HoldReason::MembershipUnknown => {
                "no committed replica-set config was read, so whether its member left is unknown"
            }
        };
        format!("{}{member}was deleted and is held: {why}", self.mention())
    }
}

#[cfg(test)]
mod tests;
