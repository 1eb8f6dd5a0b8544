//! The controller: watches `MongoDB` objects and everything they refer to,
//! and runs one pass per change (`reconcile`), through the finalizer's
//! phases: claim the object, ordinary passes while it lives, leaving passes
//! once it is deleted, then release it.
//!
//! A pass (`pass`) is a pipeline of stages:
//!
//! `dereference` → `validate` → `build` → `apply` → `grow` → `observe` →
//! `hold` → `plan` → `record` → `act` → `recovery` → `forget` → `roll` →
//! `status`
//!
//! Each stage is a module here (I/O: `dereference`, `apply`, `grow`,
//! `observe`, `service_hold`, `record`, `act`, `recovery`, `forget`, `roll`,
//! `status`) or a pure module of the crate under the same name
//! ([`crate::validate`], [`crate::build`], [`crate::volume_growth`],
//! [`crate::observe`], [`crate::service_hold`],
//! [`crate::planner`], [`crate::recovery`], [`crate::forget`], [`crate::roll`],
//! [`crate::status`]). One replica-set step per pass; the next pass is
//! triggered by the change it caused (watched objects) or by a short requeue
//! while MongoDB converges; a status write alone wakes nothing
//! (`desired_state`). Passes read Kubernetes objects from the watches' caches
//! (`caches`) and write only what differs: at rest they send the API server
//! nothing. A pass holds its object's identity, the Events published on it
//! (`events`) and MongoDB clients of its own (`context`). The [`finalizer`]
//! keeps a deleted object until this cluster's members have left the set.

mod act;
mod apply;
mod caches;
mod context;
mod credentials;
mod dereference;
mod events;
pub mod finalizer;
mod forget;
mod grow;
mod keyfile;
mod observe;
mod packed;
mod pass;
mod record;
mod recovery;
mod referenced;
mod roll;
mod rotate;
mod service_hold;
mod status;
#[cfg(test)]
mod test_cluster;
mod turns;
mod vet;

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::PartialObjectMeta;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{watcher, Controller, WatchStreamExt};
use kube::{Api, Client, Resource, ResourceExt};

use crate::api::{MongoDB, INSTANCE_LABEL};
use crate::build::{self, names};
use crate::kube_clients::KubeClients;
use crate::service_hold::{InstanceLife, MemberServiceObject, Membership};
use crate::telemetry::Metrics;
use crate::validate::InvalidInput;
use act::ActError;
use caches::{caches, reflect, Cached};
use context::{Context, PassContext};
use dereference::DereferenceError;
use events::{error_chain, Notice};
use finalizer::{FinalizerError, Phase};
use pass::{pass, PassOutcome};
use turns::{controller_config, Turns};

pub use finalizer::FINALIZER;

/// The field manager of everything this operator writes, but the config
/// entries recorded on StatefulSets (the `record` stage has its own).
pub const FIELD_MANAGER: &str = "mongodb-member-operator";
/// Objects per page of a watch's list (kube-runtime asks for 500).
const LIST_PAGE: u32 = 50;
/// How soon a failed pass is retried.
const AFTER_FAILURE: Duration = Duration::from_secs(5);
/// How soon a cluster whose root password the set refuses asks again: the
/// rsInit cluster's operator may set it on the set meanwhile.
const CREDENTIALS_RECHECK: Duration = Duration::from_secs(5);

/// Runs the controller until a shutdown signal.
pub async fn run(
    clients: KubeClients,
    namespace: Option<String>,
    concurrency: u16,
    metrics: Arc<Metrics>,
) {
    let (caches, writers, synced) = caches();
    let client = clients.watches;
    let managed = listed_in_pages().labels(&format!(
        "{}={}",
        build::labels::MANAGED_BY_LABEL,
        build::labels::MANAGER
    ));
    // A pass runs when the object's spec, metadata or deletion changes, never
    // for a status write alone (its own, mostly): `desired_state`.
    let (store, mongodbs_writer) = reflector::store();
    let turns = Turns::new(concurrency);
    let context = Arc::new(Context::new(
        clients.requests,
        caches.clone(),
        metrics.clone(),
        turns.clone(),
        store.clone(),
    ));
    let mongodb_changes = watcher(scoped::<MongoDB>(&client, &namespace), listed_in_pages())
        .default_backoff()
        .modify(MongoDB::slim)
        .reflect(mongodbs_writer)
        .applied_objects()
        .predicate_filter(desired_state, Default::default());
    let controller =
        Controller::for_stream(mongodb_changes, store.clone()).with_config(controller_config());
    // Member Services carry the instance label; FedState's arbiter Service only
    // its name, `<instance>-mongodb-arbiter` (read by name, `ByName`).
    let member_service_of = |service: Service| {
        let instance = service.labels().get(INSTANCE_LABEL)?.clone();
        Some(ObjectRef::new(&instance).within(&service.namespace()?))
    };
    let arbiter_service_of = |service: PartialObjectMeta<Service>| {
        let name = service.name_any();
        let instance = names::instance_of_arbiter(&name)?;
        Some(ObjectRef::new(instance).within(&service.namespace()?))
    };
    let pod_instance = |pod: Pod| {
        let instance = pod.labels().get(INSTANCE_LABEL)?.clone();
        Some(ObjectRef::new(&instance).within(&pod.namespace()?))
    };
    let claim_instance = |claim: PersistentVolumeClaim| {
        let instance = claim.labels().get(INSTANCE_LABEL)?.clone();
        Some(ObjectRef::new(&instance).within(&claim.namespace()?))
    };
    let hostconf_store = store.clone();
    let secret_store = store.clone();
    // ConfigMaps and Secrets are watched by their metadata only
    // (`Api<PartialObjectMeta<_>>` sends metadata-only list and watch
    // requests); a pass reads the ones it needs by name (`ByName`).
    let refers_to_config_map = move |config_map: PartialObjectMeta<ConfigMap>| {
        let name = config_map.name_any();
        referrers(&hostconf_store, &config_map, |m| {
            let hostconf = names::hostconf(&m.name_any(), m.spec.member_config_ref.as_deref());
            hostconf == name || m.spec.custom_config_ref.as_deref() == Some(name.as_str())
        })
    };
    let refers_to_secret = move |secret: PartialObjectMeta<Secret>| {
        let name = secret.name_any();
        referrers(&secret_store, &secret, |m| {
            let credentials = m.spec.credentials_secret_ref.as_ref().map(|r| &r.name);
            let certificate = m
                .spec
                .tls
                .as_ref()
                .and_then(|t| t.certificate_secret_ref.as_ref());
            credentials == Some(&name) || certificate.is_some_and(|r| r.name == name)
        })
    };
    // Ready once the MongoDB objects and every cache are listed; passes wait
    // for the caches too. The controller waits on the MongoDB store as well:
    // its readiness wakes only one waiter (kube-runtime's DelayedInit keeps
    // one waker), so this one asks again every second. Once ready, it
    // returns the allocator's free memory every minute (`allocator`).
    let listed = store.clone();
    let readiness = metrics.clone();
    let cached = caches.clone();
    let ready = tokio::spawn(async move {
        loop {
            let waited = tokio::time::timeout(Duration::from_secs(1), listed.wait_until_ready());
            match waited.await {
                Ok(Ok(())) => break,
                Ok(Err(error)) => {
                    tracing::warn!(%error, "the MongoDB objects were never listed");
                    return;
                }
                Err(_) => {}
            }
        }
        match cached.wait_listed().await {
            Ok(()) => {
                tracing::info!("MongoDB objects and caches listed: ready");
                synced.set();
                readiness.set_ready(true);
                crate::allocator::release_free_memory_every_minute().await;
            }
            Err(error) => tracing::warn!(%error, "the caches were never listed"),
        }
    });
    let stateful_sets = reflect(
        writers.stateful_sets,
        scoped::<StatefulSet>(&client, &namespace),
        managed.clone(),
    );
    let deployments = reflect(
        writers.deployments,
        scoped::<Deployment>(&client, &namespace),
        managed.clone(),
    );
    let budgets = reflect(
        writers.pod_disruption_budgets,
        scoped::<PodDisruptionBudget>(&client, &namespace),
        managed.clone(),
    );
    let pods = reflect(
        writers.pods,
        scoped::<Pod>(&client, &namespace),
        managed.clone(),
    );
    let claims = reflect(
        writers.claims,
        scoped::<PersistentVolumeClaim>(&client, &namespace),
        managed,
    );
    let services = reflect(
        writers.services,
        scoped::<Service>(&client, &namespace),
        listed_in_pages().labels(INSTANCE_LABEL),
    );
    let named_services = reflect(
        writers.named_services,
        scoped::<PartialObjectMeta<Service>>(&client, &namespace),
        listed_in_pages(),
    );
    let config_maps = reflect(
        writers.config_maps,
        scoped::<PartialObjectMeta<ConfigMap>>(&client, &namespace),
        listed_in_pages(),
    );
    let secrets = reflect(
        writers.secrets,
        scoped::<PartialObjectMeta<Secret>>(&client, &namespace),
        listed_in_pages(),
    );
    controller
        .owns_stream(stateful_sets)
        .owns_stream(deployments)
        .owns_stream(budgets)
        .watches_stream(pods, pod_instance)
        .watches_stream(claims, claim_instance)
        .watches_stream(services, member_service_of)
        .watches_stream(named_services, arbiter_service_of)
        .watches_stream(config_maps, refers_to_config_map)
        .watches_stream(secrets, refers_to_secret)
        .shutdown_on_signal()
        .graceful_shutdown_on(turns.close_on_signal())
        .run(reconcile, error_policy, context)
        .for_each(|result| async move {
            match result {
                // A watch that fails (e.g. a permission the Role lacks) keeps
                // the caches unlisted and every pass waiting: say so.
                Err(kube::runtime::controller::Error::QueueError(error)) => {
                    tracing::warn!(%error, "a watch failed; retrying")
                }
                Err(error) => tracing::debug!(%error, "reconcile ended with an error"),
                Ok(_) => {}
            }
        })
        .await;
    ready.abort();
    metrics.set_ready(false);
}

/// A watch whose (re)list asks for pages of [`LIST_PAGE`] objects: a
/// restarted operator decodes one page of each kind at a time, and the
/// whole objects of a page (their `managedFields` and pod templates
/// included) are slimmed before the next.
fn listed_in_pages() -> watcher::Config {
    watcher::Config::default().page_size(LIST_PAGE)
}

/// What a pass acts on, hashed: the spec (through the generation), labels,
/// annotations (the disaster-recovery request), finalizers and the deletion
/// timestamp — everything but the status.
fn desired_state(mongodb: &MongoDB) -> Option<u64> {
    let meta = &mongodb.metadata;
    let mut hasher = DefaultHasher::new();
    meta.generation.hash(&mut hasher);
    meta.labels.hash(&mut hasher);
    meta.annotations.hash(&mut hasher);
    meta.finalizers.hash(&mut hasher);
    meta.deletion_timestamp
        .as_ref()
        .map(|t| t.0.as_millisecond())
        .hash(&mut hasher);
    Some(hasher.finish())
}

/// An API over `namespace`, or over every namespace when it is `None`.
fn scoped<K>(client: &Client, namespace: &Option<String>) -> Api<K>
where
    K: Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// The `MongoDB` objects in `object`'s namespace that `refers` to it.
fn referrers<K: Resource>(
    store: &Store<MongoDB>,
    object: &K,
    refers: impl Fn(&MongoDB) -> bool,
) -> Vec<ObjectRef<MongoDB>> {
    let namespace = object.meta().namespace.clone();
    store
        .state()
        .iter()
        .filter(|m| m.metadata.namespace == namespace && refers(m))
        .map(|m| ObjectRef::from_obj(m.as_ref()))
        .collect()
}

/// Why a pass failed, by stage: the stage's own error is the source, and
/// [`FailedStage`] — the variant's name — the bounded reason of the metric
/// label and the log line.
#[derive(Debug, thiserror::Error, strum::EnumDiscriminants)]
#[strum_discriminants(name(FailedStage), derive(strum::IntoStaticStr, strum::VariantNames))]
pub enum ReconcileError {
    /// The finalizer list could not be changed.
    #[error(transparent)]
    FinalizerFailed(#[from] FinalizerError),
    /// The referenced objects could not be read.
    #[error(transparent)]
    DereferenceFailed(#[from] DereferenceError),
    /// The planned step could not be carried out.
    #[error(transparent)]
    ActFailed(#[from] ActError),
    /// The status could not be written.
    #[error("writing the status: {0}")]
    StatusFailed(#[source] kube::Error),
}

impl ReconcileError {
    /// The bounded PascalCase reason (metric label, log field).
    pub fn reason(&self) -> &'static str {
        FailedStage::from(self).into()
    }
}

/// Waits for the pass's turn ([`turns`]), then runs it over the object as it
/// is then.
async fn reconcile(mongodb: Arc<MongoDB>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    ctx.caches.wait_synced().await;
    let Some((_turn, mongodb)) = ctx.take_turn(&mongodb).await else {
        return Ok(Action::await_change());
    };
    // Boxed: a pass waiting for its turn holds only this future, not the
    // whole pass's.
    Box::pin(reconcile_now(mongodb, ctx)).await
}

/// Claims the object with the finalizer first; runs ordinary passes while it
/// lives, leaving passes once it is deleted, and releases it once a leaving
/// pass reports this cluster's members out of the set.
async fn reconcile_now(mongodb: Arc<MongoDB>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let started = Instant::now();
    let _in_flight = ctx.metrics.pass_started();
    let pass_ctx = ctx.for_pass(&mongodb);
    let api: Api<MongoDB> = Api::namespaced(ctx.client.clone(), &pass_ctx.instance.namespace);
    let result = match finalizer::phase(&mongodb) {
        Phase::Claim => finalizer::claim(&api, &mongodb)
            .await
            .map(|()| Action::await_change())
            .map_err(ReconcileError::from),
        Phase::Member => member(&mongodb, &pass_ctx).await,
        Phase::Leaving => leave(&api, &mongodb, &pass_ctx).await,
        Phase::Released => Ok(Action::await_change()),
    };
    pass_ctx.gateway.close().await;
    ctx.metrics.reconciled(started.elapsed());
    result
}

/// An ordinary pass; input it cannot use is reported in status, and waits
/// for a change.
async fn member(mongodb: &MongoDB, ctx: &PassContext) -> Result<Action, ReconcileError> {
    match pass(mongodb, ctx, false).await? {
        PassOutcome::Ran(action) => Ok(action),
        PassOutcome::Left => Ok(Action::await_change()),
        PassOutcome::InvalidInput(invalid, held) => {
            let reason = invalid.reason();
            let instance = &ctx.instance;
            tracing::warn!(%instance, reason, message = %invalid, leaving = false, "cannot proceed");
            status::report_invalid_input(ctx, mongodb, &invalid, &held).await?;
            match invalid {
                // The set takes the password once the rsInit cluster's
                // operator has set it there: no object of this cluster changes.
                InvalidInput::CredentialsRefused { .. } => Ok(Action::requeue(CREDENTIALS_RECHECK)),
                _ => Ok(Action::await_change()),
            }
        }
    }
}

/// A leaving pass; once this cluster's members are out, or its input cannot
/// be used (released without leaving), the member Services are let go, then
/// the object's finalizer.
async fn leave(
    api: &Api<MongoDB>,
    mongodb: &MongoDB,
    ctx: &PassContext,
) -> Result<Action, ReconcileError> {
    let (type_, reason, message) = match pass(mongodb, ctx, true).await? {
        PassOutcome::Ran(action) => return Ok(action),
        PassOutcome::Left => (
            EventType::Normal,
            Notice::LeftReplicaSet,
            "this cluster's members have left the replica set".to_string(),
        ),
        PassOutcome::InvalidInput(invalid, _) => {
            let reason = invalid.reason();
            let instance = &ctx.instance;
            tracing::warn!(%instance, reason, message = %invalid, leaving = true, "cannot proceed");
            (
                EventType::Warning,
                Notice::LeftWithoutCleanup,
                format!("deleted without leaving the replica set cleanly: {invalid}"),
            )
        }
    };
    ctx.events.publish(type_, reason.into(), message).await;
    let referenced = dereference::member_services(&ctx.client, &ctx.caches, mongodb).await?;
    let services = MemberServiceObject::of_instance(&ctx.instance.name, &referenced);
    service_hold::hold(ctx, &services, InstanceLife::Gone, Membership::Unknown).await;
    finalizer::release(api, mongodb).await?;
    ctx.forget();
    Ok(Action::await_change())
}

fn error_policy(mongodb: Arc<MongoDB>, error: &ReconcileError, ctx: Arc<Context>) -> Action {
    ctx.metrics.failed(error.reason());
    let instance = mongodb.name_any();
    tracing::warn!(%instance, reason = error.reason(), error = %error_chain(error), "reconcile failed");
    Action::requeue(AFTER_FAILURE)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;
    use crate::api::MongoDBStatus;
    use crate::build::fixtures;

    #[test]
    fn a_status_write_alone_does_not_wake_a_pass_and_the_rest_does() {
        let mongodb = fixtures::mongodb();
        let before = desired_state(&mongodb);
        let mut status_only = mongodb.clone();
        status_only.status = Some(MongoDBStatus {
            state: Some(crate::api::MongoState::Running),
            ..MongoDBStatus::default()
        });
        status_only.metadata.resource_version = Some("999".into());
        assert_eq!(desired_state(&status_only), before);

        let changes: [fn(&mut MongoDB); 5] = [
            |m| m.metadata.generation = Some(m.metadata.generation.unwrap_or(1) + 1),
            |m| {
                m.annotations_mut().insert(
                    "middleware.fedstate.io/disaster-recovery".into(),
                    "two clusters lost".into(),
                );
            },
            |m| {
                m.labels_mut()
                    .insert("example.com/team".into(), "db".into());
            },
            |m| m.finalizers_mut().push(FINALIZER.into()),
            |m| {
                m.metadata.deletion_timestamp =
                    Some(Time(k8s_openapi::jiff::Timestamp::from_second(1).unwrap()))
            },
        ];
        for (index, change) in changes.iter().enumerate() {
            let mut changed = mongodb.clone();
            change(&mut changed);
            assert_ne!(desired_state(&changed), before, "change {index}");
        }
    }
}
