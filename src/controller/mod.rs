//! The controller: watches `MongoDB` objects and everything they refer to, and
//! runs one reconcile pass per change, as a pipeline of stages:
//!
//! `dereference` → `validate` → `build` → `apply` → `observe` → `plan` → `record` → `act` →
//! `recover` → `roll` → `status`
//!
//! `pass` lists them; each stage is a module here (I/O) or a pure module of
//! the crate ([`crate::validate`], [`crate::build`], [`crate::observe`],
//! [`crate::planner`], [`crate::status`]). One replica-set step per pass; the
//! next pass is triggered by the change it caused (watched objects) or by a
//! short requeue while MongoDB converges; a status write alone wakes nothing
//! (`desired_state`). Passes read Kubernetes objects from the watches'
//! caches (`caches`) and write only what differs: at rest they send the API
//! server nothing. The [`finalizer`] keeps a deleted object until this
//! cluster's members have left the set.

mod act;
mod apply;
mod caches;
mod dereference;
pub mod finalizer;
mod observe;
mod record;
mod recover;
mod roll;
#[cfg(test)]
mod test_cluster;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use std::hash::{DefaultHasher, Hash, Hasher};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{PartialObjectMeta, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{watcher, Controller, WatchStreamExt};
use kube::{Api, Client, Resource, ResourceExt};

use crate::api::{MongoDB, RecoveryStatus, INSTANCE_LABEL};
use crate::build::{self, names, BuildContext, DesiredObjects};
use crate::hostconf::MemberAddress;
use crate::member::Wanted;
use crate::mongo::MongoGateway;
use crate::observe::ObservedSet;
use crate::planner::{entries_to_record, has_left, plan, PlanInput, Step, WaitReason};
use crate::roll::RollStep;
use crate::status::{
    compute_status, condition, condition_reason, local_member_views, ConditionType, StatusInput,
};
use crate::telemetry::{InstanceGauges, Metrics};
use crate::validate::{validate, InvalidInput, Validated};
use act::{act, ActError};
use apply::{apply, Written};
use caches::{caches, reflect, Cached, Caches};
use dereference::{dereference, DereferenceError};
use finalizer::{FinalizerError, Phase};
use observe::{dropped_members, observe};
use record::record;
use recover::recover;
use roll::roll;

pub use finalizer::FINALIZER;

/// The field manager of everything this operator writes, but the config
/// entries recorded on StatefulSets (the `record` stage has its own).
pub const FIELD_MANAGER: &str = "mongodb-member-operator";
/// How long a primary this operator stepped down is remembered as handing over.
const STEP_DOWN_MEMORY: Duration = Duration::from_secs(60);
/// How soon a paused object is looked at again (status stays fresh).
const WHILE_PAUSED: Duration = Duration::from_secs(30);
/// How soon a failed pass is retried.
const AFTER_FAILURE: Duration = Duration::from_secs(5);
/// How soon an object whose status just changed is looked at again: things
/// are moving (an election, a member catching up), and the status should
/// follow them, not wait for the 30 s look at a set in sync. Once the status
/// stays the same, the step's own requeue applies (at rest: 30 s). A status
/// write itself wakes no pass (`desired_state`).
const AFTER_STATUS_CHANGE: Duration = Duration::from_secs(1);

/// State of the controller: shared by every pass, but for the MongoDB
/// clients, which each pass has of its own (`Context::for_pass`).
#[derive(Clone)]
pub struct Context {
    client: Client,
    caches: Caches,
    written: Arc<Written>,
    gateway: MongoGateway,
    metrics: Arc<Metrics>,
    recorder: Recorder,
    memory: Arc<Mutex<BTreeMap<String, InstanceMemory>>>,
}

/// What the operator remembers between passes (lost on restart, harmlessly).
#[derive(Default, Clone)]
struct InstanceMemory {
    stepped_down: Option<(MemberAddress, Instant)>,
    /// Steps retried in a row for a passing reason (sets the next delay).
    retries: u32,
    /// A primary that refused to step down, how many times in a row, and
    /// until when it is not asked again. Other passes (watch events, waits)
    /// in between neither ask it nor reset the count.
    held_step_down: Option<HeldStepDown>,
    users_fingerprint: Option<String>,
}

/// A primary's refusals to step down in a row.
#[derive(Clone)]
struct HeldStepDown {
    primary: MemberAddress,
    refusals: u32,
    not_before: Instant,
}

/// Event reasons the controller gives of its own; the others are the planner's
/// step reasons and [`InvalidInput`]'s.
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::IntoStaticStr)]
enum Notice {
    /// A primary could not step down: no electable secondary caught up in time.
    StepDownFailed,
    /// The operator's users are in place.
    UsersReady,
    /// A user could not be created or updated.
    UserNotReady,
    /// This cluster's members left the set; the finalizer is released.
    LeftReplicaSet,
    /// The object was deleted while its input was invalid: released without leaving.
    LeftWithoutCleanup,
    /// The API server refused a desired object; the pass went on.
    ApplyFailed,
    /// A member's config entry could not be recorded on its StatefulSet; the
    /// pass went on and the next one tries again.
    RecordFailed,
}

impl Context {
    /// A context for a controller talking to `client`, reading `caches`.
    fn new(client: Client, caches: Caches, metrics: Arc<Metrics>) -> Self {
        let reporter = Reporter {
            controller: FIELD_MANAGER.to_string(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Context {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            caches,
            written: Arc::default(),
            gateway: MongoGateway::new(),
            metrics,
            memory: Arc::default(),
        }
    }

    /// The context of one pass: the shared state, and MongoDB clients of its
    /// own, closed when the pass ends (`MongoGateway::close`). Kept across
    /// passes, the clients (about 130 KiB each, their monitors polling) made
    /// the operator's memory grow with the number of sets — 1,000 sets took
    /// it past 480 MiB in `lab bench` — for connections that serve one pass
    /// every 30 s at rest.
    fn for_pass(&self) -> Context {
        Context {
            gateway: MongoGateway::new(),
            ..self.clone()
        }
    }

    fn memory(&self, key: &str) -> InstanceMemory {
        let memory = self.memory.lock().unwrap_or_else(|p| p.into_inner());
        memory.get(key).cloned().unwrap_or_default()
    }

    fn remember(&self, key: &str, update: impl FnOnce(&mut InstanceMemory)) {
        let mut memory = self.memory.lock().unwrap_or_else(|p| p.into_inner());
        update(memory.entry(key.to_string()).or_default());
    }

    /// A primary that refused to step down and is not asked again yet.
    fn step_down_held(&self, key: &str) -> Option<MemberAddress> {
        let refused = self.memory(key).held_step_down?;
        (Instant::now() < refused.not_before).then_some(refused.primary)
    }

    /// The primary this operator asked to step down within the last minute.
    fn stepped_down_recently(&self, key: &str) -> Option<MemberAddress> {
        let (host, at) = self.memory(key).stepped_down?;
        (at.elapsed() < STEP_DOWN_MEMORY).then_some(host)
    }

    async fn publish(&self, mongodb: &MongoDB, type_: EventType, reason: &str, message: String) {
        let event = Event {
            type_,
            reason: reason.to_string(),
            note: Some(truncate(message, 1000)),
            action: reason.to_string(),
            secondary: None,
        };
        if let Err(error) = self
            .recorder
            .publish(&event, &mongodb.object_ref(&()))
            .await
        {
            tracing::warn!(%error, reason, "could not publish an Event");
        }
    }
}

/// Runs the controller until a shutdown signal.
pub async fn run(
    client: Client,
    namespace: Option<String>,
    concurrency: u16,
    metrics: Arc<Metrics>,
) {
    let (caches, writers, synced) = caches();
    let context = Arc::new(Context::new(
        client.clone(),
        caches.clone(),
        metrics.clone(),
    ));
    let managed = watcher::Config::default().labels(&format!(
        "{}={}",
        build::labels::MANAGED_BY_LABEL,
        build::labels::MANAGER
    ));
    let config = kube::runtime::controller::Config::default().concurrency(concurrency);
    // A pass runs when the object's spec, metadata or deletion changes, never
    // for a status write alone (its own, mostly): `desired_state`.
    let (store, mongodbs_writer) = reflector::store();
    let mongodb_changes = watcher(
        scoped::<MongoDB>(&client, &namespace),
        watcher::Config::default(),
    )
    .default_backoff()
    .modify(MongoDB::slim)
    .reflect(mongodbs_writer)
    .applied_objects()
    .predicate_filter(desired_state, Default::default());
    let controller = Controller::for_stream(mongodb_changes, store.clone()).with_config(config);
    // Member Services carry the instance label; FedState's arbiter Service only
    // its name, `<instance>-mongodb-arbiter`.
    let member_service_of = |service: Service| {
        let instance = match service.labels().get(INSTANCE_LABEL) {
            Some(instance) => instance.clone(),
            None => names::instance_of_arbiter(&service.name_any())?.to_string(),
        };
        Some(ObjectRef::new(&instance).within(&service.namespace()?))
    };
    let pod_instance = |pod: Pod| {
        let instance = pod.labels().get(INSTANCE_LABEL)?.clone();
        Some(ObjectRef::new(&instance).within(&pod.namespace()?))
    };
    let hostconf_store = store.clone();
    let secret_store = store.clone();
    let refers_to_config_map = move |config_map: ConfigMap| {
        let name = config_map.name_any();
        referrers(&hostconf_store, &config_map, |m| {
            let hostconf = names::hostconf(&m.name_any(), m.spec.member_config_ref.as_deref());
            hostconf == name || m.spec.custom_config_ref.as_deref() == Some(name.as_str())
        })
    };
    // Secrets are watched by their metadata only (`Api<PartialObjectMeta<_>>`
    // sends metadata-only list and watch requests): the operator never caches
    // Secret data; `dereference` GETs the one Secret a pass needs.
    let refers_to_secret = move |secret: PartialObjectMeta<Secret>| {
        let name = secret.name_any();
        referrers(&secret_store, &secret, |m| {
            m.spec
                .credentials_secret_ref
                .as_ref()
                .is_some_and(|r| r.name == name)
        })
    };
    // Ready once the MongoDB objects and every cache are listed; passes wait
    // for the caches too. The controller waits on the MongoDB store as well:
    // its readiness wakes only one waiter (kube-runtime's DelayedInit keeps
    // one waker), so this one asks again every second.
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
            }
            Err(error) => tracing::warn!(%error, "the caches were never listed"),
        }
    });
    let stateful_sets = reflect(
        writers.stateful_sets,
        scoped::<StatefulSet>(&client, &namespace),
        managed.clone(),
    );
    let budgets = reflect(
        writers.pod_disruption_budgets,
        scoped::<PodDisruptionBudget>(&client, &namespace),
        managed.clone(),
    );
    let pods = reflect(writers.pods, scoped::<Pod>(&client, &namespace), managed);
    let services = reflect(
        writers.services,
        scoped::<Service>(&client, &namespace),
        watcher::Config::default(),
    );
    let config_maps = reflect(
        writers.config_maps,
        scoped::<ConfigMap>(&client, &namespace),
        watcher::Config::default(),
    );
    let secrets = reflect(
        writers.secrets,
        scoped::<PartialObjectMeta<Secret>>(&client, &namespace),
        watcher::Config::default(),
    );
    controller
        .owns_stream(stateful_sets)
        .owns_stream(budgets)
        .watches_stream(pods, pod_instance)
        .watches_stream(services, member_service_of)
        .watches_stream(config_maps, refers_to_config_map)
        .watches_stream(secrets, refers_to_secret)
        .shutdown_on_signal()
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

/// Claims the object with the finalizer first; runs ordinary passes while it
/// lives, leaving passes once it is deleted, and releases it once a leaving
/// pass reports this cluster's members out of the set.
async fn reconcile(mongodb: Arc<MongoDB>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    ctx.caches.wait_synced().await;
    let started = Instant::now();
    let _in_flight = ctx.metrics.pass_started();
    let ctx = ctx.for_pass();
    let namespace = mongodb.namespace().unwrap_or_default();
    let api: Api<MongoDB> = Api::namespaced(ctx.client.clone(), &namespace);
    let result = match finalizer::phase(&mongodb) {
        Phase::Claim => finalizer::claim(&api, &mongodb)
            .await
            .map(|()| Action::await_change())
            .map_err(ReconcileError::from),
        Phase::Member => pass(&mongodb, &ctx, false).await.map(|pass| pass.action),
        Phase::Leaving => leave(&api, &mongodb, &ctx).await,
        Phase::Released => Ok(Action::await_change()),
    };
    ctx.gateway.close().await;
    ctx.metrics.reconciled(started.elapsed());
    result
}

/// A leaving pass; once this cluster's members are out, the finalizer goes.
async fn leave(
    api: &Api<MongoDB>,
    mongodb: &MongoDB,
    ctx: &Context,
) -> Result<Action, ReconcileError> {
    let PassOutcome { action, left } = pass(mongodb, ctx, true).await?;
    if left {
        finalizer::release(api, mongodb).await?;
        ctx.metrics.forget(&instance_key(mongodb));
        return Ok(Action::await_change());
    }
    Ok(action)
}

fn error_policy(mongodb: Arc<MongoDB>, error: &ReconcileError, ctx: Arc<Context>) -> Action {
    ctx.metrics.failed(error.reason());
    let instance = mongodb.name_any();
    tracing::warn!(%instance, reason = error.reason(), error = %error_chain(error), "reconcile failed");
    Action::requeue(AFTER_FAILURE)
}

/// What a pass decided: when to look again, and (when leaving) whether this
/// cluster's members are out of the set.
struct PassOutcome {
    action: Action,
    left: bool,
}

/// One pass over one object. `leaving`: the object is being deleted and this
/// cluster's members must leave the set.
async fn pass(
    mongodb: &MongoDB,
    ctx: &Context,
    leaving: bool,
) -> Result<PassOutcome, ReconcileError> {
    let paused = mongodb.spec.pause && !leaving;
    let wanted = Wanted::of(mongodb, leaving);
    // dereference: read what the object refers to, as it is (Kubernetes I/O).
    let referenced = dereference(&ctx.client, &ctx.caches, mongodb).await?;
    // validate: check it, or report what the user must fix (pure).
    let validated = match validate(mongodb, &referenced, leaving) {
        Ok(validated) => validated,
        Err(invalid) => return report_invalid_input(ctx, mongodb, &invalid, leaving).await,
    };
    // build: the desired objects, unless paused or leaving (pure).
    let desired = match build_desired(mongodb, &validated, wanted, paused || leaving) {
        Ok(desired) => desired,
        Err(invalid) => return report_invalid_input(ctx, mongodb, &invalid, leaving).await,
    };
    // apply: server-side apply them, StatefulSets last; a refusal is reported (Kubernetes I/O).
    let apply_failures = apply_desired(ctx, mongodb, desired.as_ref()).await;
    // observe: ask the members, read the replica set (MongoDB I/O).
    let answers = observe(&ctx.gateway, mongodb, &validated, wanted).await;
    if let Some(refused) = answers.credentials_refused(mongodb).filter(|_| !leaving) {
        return report_invalid_input(ctx, mongodb, &refused, leaving).await;
    }
    // plan: the planner's input from what was seen, and its one next step (pure).
    let observed_set = answers.reading.as_ref().map(|reading| reading.set.clone());
    let key = instance_key(mongodb);
    let mut input = PlanInput::from_observation(
        mongodb,
        &validated,
        wanted,
        &answers.probes,
        observed_set,
        ctx.stepped_down_recently(&key),
        ctx.step_down_held(&key),
    );
    if input.needs_dropped_members() {
        let reading = answers.reading.as_ref();
        input.dropped_members = dropped_members(&ctx.gateway, reading, &validated.root).await;
    }
    let step = plan(&input);
    tracing::info!(instance = %instance_key(mongodb), step = %step, "planned");
    // record: the config entry each local member is, on its StatefulSet, when it changed (Kubernetes I/O).
    record_entries(ctx, mongodb, &input).await;
    // act: carry the step out unless paused (MongoDB and Kubernetes I/O).
    let acted = if paused {
        None
    } else {
        Some(act(ctx, mongodb, &validated, &answers, &step, leaving).await)
    };
    // recover: a disaster recovery, only as an SRE asked for it on this object (MongoDB I/O).
    let recovered = if paused || leaving {
        None
    } else {
        Some(recover(ctx, mongodb, &validated, &answers, &step).await)
    };
    // roll: once in sync, replace one outdated pod of the whole set at a time (MongoDB and Kubernetes I/O).
    let revision = desired.and_then(|d| d.revision);
    let rolled = match (&revision, &acted) {
        (Some(revision), Some(Ok(_))) if step == Step::InSync => {
            roll(ctx, mongodb, &validated, &answers, revision).await
        }
        _ => None,
    };
    // status: what the pass saw and did, written when it changed (pure, then Kubernetes I/O).
    let reported = step_after_refusal(ctx, &key, &mut input).unwrap_or_else(|| step.clone());
    let report = Report {
        paused,
        problem: None,
        validated: Some(&validated),
        observation: answers.reading.as_ref().map(|reading| &reading.set),
        step: Some(&reported),
        roll: rolled.as_ref().map(|rolled| &rolled.step),
        feature_compatibility_version: rolled.as_ref().and_then(|rolled| rolled.fcv.clone()),
        revision,
        apply_failures: &apply_failures,
        recovery: recovered.as_ref().and_then(|r| r.status.clone()),
    };
    let status_changed = write_status(ctx, mongodb, &report).await?;

    let requeue = match acted {
        Some(acted) => acted?.requeue,
        None => WHILE_PAUSED,
    };
    let sooner = [
        rolled.and_then(|rolled| rolled.requeue),
        recovered.and_then(|recovered| recovered.requeue),
        status_changed.then_some(AFTER_STATUS_CHANGE),
    ];
    let requeue = sooner.into_iter().flatten().fold(requeue, Duration::min);
    if leaving && has_left(&input, &step) {
        let message = "this cluster's members have left the replica set".to_string();
        ctx.publish(
            mongodb,
            EventType::Normal,
            Notice::LeftReplicaSet.into(),
            message,
        )
        .await;
        return Ok(PassOutcome {
            action: Action::await_change(),
            left: true,
        });
    }
    Ok(PassOutcome {
        action: Action::requeue(requeue),
        left: false,
    })
}

/// When this pass's step-down was refused (held until its retry), the step
/// the passes plan until then, which the status reports: what the removal
/// waits for and how far behind the closest secondary is. No pass follows the
/// status write to say it (a status write wakes none), and the retry may be
/// minutes away.
fn step_after_refusal(ctx: &Context, key: &str, input: &mut PlanInput) -> Option<Step> {
    let held = ctx.step_down_held(key);
    if held.is_none() || held == input.step_down_held {
        return None;
    }
    input.step_down_held = held;
    Some(plan(input))
}

/// The desired objects for the members this cluster runs, or `None` when
/// nothing is to be applied (paused, or leaving).
fn build_desired(
    mongodb: &MongoDB,
    validated: &Validated,
    wanted: Wanted,
    hold: bool,
) -> Result<Option<DesiredObjects>, InvalidInput> {
    if hold {
        return Ok(None);
    }
    let ctx =
        BuildContext::from_mongodb(mongodb)?.with_content_digest(validated.content_digest.clone());
    let targets = validated.member_targets(wanted);
    let root_password = &validated.root.password;
    Ok(Some(build::desired_objects(&ctx, root_password, &targets)?))
}

/// Applies `desired` (nothing when `None`); each refusal is a Warning Event
/// and a failure in the metrics, and is returned for status.
async fn apply_desired(
    ctx: &Context,
    mongodb: &MongoDB,
    desired: Option<&DesiredObjects>,
) -> Vec<String> {
    let Some(desired) = desired else {
        return Vec::new();
    };
    let namespace = mongodb.namespace().unwrap_or_default();
    let mut refused = Vec::new();
    let failures = apply(&ctx.client, &ctx.caches, &ctx.written, &namespace, desired).await;
    for failure in failures {
        let message = error_chain(&failure);
        let reason = Notice::ApplyFailed.into();
        ctx.metrics.failed(reason);
        ctx.publish(mongodb, EventType::Warning, reason, message.clone())
            .await;
        refused.push(message);
    }
    refused
}

/// Records the local members' config entries that changed; each refusal is a
/// Warning Event and a failure in the metrics.
async fn record_entries(ctx: &Context, mongodb: &MongoDB, input: &PlanInput) {
    let entries = entries_to_record(input);
    if entries.is_empty() {
        return;
    }
    let namespace = mongodb.namespace().unwrap_or_default();
    for failure in record(&ctx.client, &namespace, &mongodb.name_any(), &entries).await {
        let reason = Notice::RecordFailed.into();
        ctx.metrics.failed(reason);
        ctx.publish(mongodb, EventType::Warning, reason, error_chain(&failure))
            .await;
    }
}

/// Reports input the pass cannot use: a condition, and a Warning Event when the
/// reason is new. A leaving object is released without cleanup.
async fn report_invalid_input(
    ctx: &Context,
    mongodb: &MongoDB,
    invalid: &InvalidInput,
    leaving: bool,
) -> Result<PassOutcome, ReconcileError> {
    let reason = invalid.reason();
    let instance = instance_key(mongodb);
    tracing::warn!(%instance, reason, message = %invalid, leaving, "cannot proceed");
    if leaving {
        let message = format!("deleted without leaving the replica set cleanly: {invalid}");
        ctx.publish(
            mongodb,
            EventType::Warning,
            Notice::LeftWithoutCleanup.into(),
            message,
        )
        .await;
        return Ok(PassOutcome {
            action: Action::await_change(),
            left: true,
        });
    }
    if condition_reason(mongodb.status.as_ref(), ConditionType::Ready) != Some(reason) {
        ctx.publish(mongodb, EventType::Warning, reason, invalid.to_string())
            .await;
    }
    let report = Report {
        problem: Some(invalid),
        ..Report::default()
    };
    write_status(ctx, mongodb, &report).await?;
    Ok(PassOutcome {
        action: Action::await_change(),
        left: false,
    })
}

/// What a pass has to report in status.
#[derive(Default)]
struct Report<'a> {
    paused: bool,
    problem: Option<&'a InvalidInput>,
    validated: Option<&'a Validated>,
    observation: Option<&'a ObservedSet>,
    step: Option<&'a Step>,
    roll: Option<&'a RollStep>,
    feature_compatibility_version: Option<String>,
    revision: Option<String>,
    apply_failures: &'a [String],
    recovery: Option<RecoveryStatus>,
}

/// Computes the status and writes it when it differs from the stored one;
/// whether it did.
async fn write_status(
    ctx: &Context,
    mongodb: &MongoDB,
    report: &Report<'_>,
) -> Result<bool, ReconcileError> {
    let instance = mongodb.name_any();
    let local_members = report
        .validated
        .map(|validated| local_member_views(&instance, validated))
        .unwrap_or_default();
    let status = compute_status(&StatusInput {
        mongodb,
        paused: report.paused,
        problem: report.problem,
        observation: report.observation,
        local_members: &local_members,
        step: report.step,
        roll: report.roll,
        feature_compatibility_version: report.feature_compatibility_version.clone(),
        revision: report.revision.clone(),
        apply_failures: report.apply_failures,
        recovery: report.recovery.clone(),
        now: Time(k8s_openapi::jiff::Timestamp::now()),
    });
    ctx.metrics
        .observed(&instance_key(mongodb), InstanceGauges::of(&status));
    if mongodb.status.as_ref() == Some(&status) {
        return Ok(false);
    }
    let refused_settings = condition(Some(&status), ConditionType::ConfigAccepted)
        .filter(|c| c.status == "False")
        .filter(|c| condition(mongodb.status.as_ref(), ConditionType::ConfigAccepted) != Some(*c));
    if let Some(refused) = refused_settings {
        let message = refused.message.clone();
        ctx.publish(mongodb, EventType::Warning, &refused.reason, message)
            .await;
    }
    // A lost voting majority is announced once, when it is first seen.
    let majority_lost = match report.step {
        Some(Step::Wait {
            reason: lost @ WaitReason::VotingMajorityLost { .. },
        }) => Some(lost),
        _ => None,
    };
    let previous_degraded = condition_reason(mongodb.status.as_ref(), ConditionType::Degraded);
    if let Some(lost) = majority_lost.filter(|lost| previous_degraded != Some(lost.reason())) {
        ctx.publish(mongodb, EventType::Warning, lost.reason(), lost.to_string())
            .await;
    }
    let api: Api<MongoDB> =
        Api::namespaced(ctx.client.clone(), &mongodb.namespace().unwrap_or_default());
    let patch = serde_json::json!({
        "apiVersion": "middleware.fedstate.io/v1alpha1",
        "kind": "MongoDB",
        "status": status,
    });
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch_status(&instance, &params, &Patch::Apply(patch))
        .await
        .map(|_| true)
        .map_err(ReconcileError::StatusFailed)
}

/// `namespace/name`, the key of the controller's memory.
fn instance_key(mongodb: &MongoDB) -> String {
    format!(
        "{}/{}",
        mongodb.namespace().unwrap_or_default(),
        mongodb.name_any()
    )
}

/// An error and its sources, joined with ": ".
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

fn truncate(mut text: String, limit: usize) -> String {
    if text.len() > limit {
        let mut cut = limit;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    text
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
