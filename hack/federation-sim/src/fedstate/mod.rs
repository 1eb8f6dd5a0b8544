//! FedState's control plane (`fedstate/fedstate` at commit `d28f763`),
//! reproduced from its source as pure functions over the objects it keeps in
//! the Karmada API server ([`crate::karmada::Objects`]). Each function names the
//! Go code it follows; nothing here is FedState's code. One module per Go file:
//!
//! - `api/v1alpha1/multicloudmongodb_types.go`, `condition.go` and
//!   `pkg/model/scheduler.go`: [`api`], the [`MultiCloudMongoDB`];
//! - `api/v1alpha1/multicloudmongodb_webhook.go`: [`webhook`] ([`admit`];
//!   defaults: image `mongo:3.6`, a root password of 8 random bytes in base64,
//!   and a `resource` default that panics the webhook, so a `MultiCloudMongoDB`
//!   without `spec.resource` is refused);
//! - `pkg/driver/k8s/label.go`: [`labels`];
//! - `pkg/driver/k8s/obj.go`: [`objects`] (the `MongoDB` payload,
//!   [`generate_mongo`], the Services' and hostconf's names, hostconf's data);
//! - `pkg/controller/multicloudmongodb/core.go`: [`handlers`], one reconcile
//!   pass ([`Pass`]) of the handler chain (GetScheduleStatus, VIPAllocator,
//!   ClusterScale, UpsertArbiter, HostConfigMap, MongoDependency, Mongo,
//!   Status); the policies it writes are those of `pkg/driver/karmada/obj.go`,
//!   built in the handlers as FedState builds them;
//! - `pkg/driver/k8s/client.go`: [`client`], `ScaleDownCleaner` and the
//!   `Ensure`/`Upsert*` helpers;
//! - `controllers/multicloudmongodb_controller.go`: [`controller`], deletion
//!   ([`delete_external_resources`], [`garbage_collect`]).
//!
//! Where Go iterates a map, the order is drawn at random (the `config[]` of the
//! payload, the clusters of a scale-up); where FedState panics, the pass fails
//! with an error saying so.

pub mod api;
pub mod client;
pub mod controller;
pub mod handlers;
pub mod labels;
pub mod objects;
pub mod webhook;

pub use api::*;
pub use controller::{delete_external_resources, garbage_collect};
pub use handlers::{ChainParams, Deviations, Handled, Pass, Suspended, ARBITER_ROLE};
pub use labels::*;
pub use objects::*;
pub use webhook::{admit, generate_root_password, DEFAULT_IMAGE};

/// The FedState commit this module follows.
pub const COMMIT: &str = "d28f763";

#[cfg(test)]
mod tests;
