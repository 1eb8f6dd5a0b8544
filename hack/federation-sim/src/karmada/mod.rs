//! What Karmada does with the objects FedState's control plane writes into the
//! Karmada API server: the objects themselves ([`objects`]: resource
//! templates, the PropagationPolicies and OverridePolicies selecting them),
//! the scheduling of a divided `MongoDB` by static weights ([`scheduler`]),
//! each cluster's copy ([`render`]: the chart's Lua `ReviseReplica`, then the
//! OverridePolicies), propagation to the member clusters and the
//! ResourceBinding's `aggregatedStatus` ([`propagation`]: create, update,
//! withdraw; the chart's Lua `ReflectStatus` and `InterpretHealth`) with the
//! template's status (`AggregateStatus`).
//!
//! Karmada's behaviour, from its source (`karmada-io/karmada`):
//! - static weights: `pkg/scheduler/core/division_algorithm.go`
//!   (`divideReplicasByStaticWeight`): each cluster gets
//!   `weight × replicas / Σweights` rounded down, the remainder goes one by one
//!   to the clusters by weight (descending), then name (`SortClusterByWeight`);
//!   a cluster left with 0 replicas receives nothing;
//! - a template leaves a cluster when its policy stops placing it there (the
//!   member object is deleted, Background, not waited for:
//!   `pkg/util/objectwatcher/objectwatcher.go` `objectWatcherImpl.Delete`);
//!   deleting a PropagationPolicy leaves what it propagated in place; deleting
//!   a template withdraws it everywhere;
//! - a member object deleted behind Karmada's back while its template still
//!   places it there is created again (`recreateResourceIfNeeded` in
//!   `pkg/controllers/status/work_status_controller.go`);
//! - the PropagationPolicy webhook fills in `resourceSelectors[].namespace`
//!   (`pkg/webhook/propagationpolicy/mutating.go`), so FedState's comparison of
//!   a freshly built policy with the stored one never finds them equal when
//!   FedState leaves that namespace out (it rewrites those policies every time);
//! - propagated objects carry `resourcetemplate.karmada.io/generation` (the
//!   template's generation), which the chart's `ReflectStatus` reads.

pub mod objects;
pub mod propagation;
pub mod render;
pub mod scheduler;

pub use objects::*;
pub use propagation::{
    aggregate, read_binding, sync, AggregatedStatusItem, Bindings, ResourceBinding, FIELD_MANAGER,
};
pub use render::{render_member_object, MANAGED_LABEL, TEMPLATE_GENERATION_ANNOTATION};
pub use scheduler::{divide_by_static_weight, placement, schedule_mongodb, TargetCluster};

#[cfg(test)]
mod tests;
