//! The controller: watches `MongoDB` objects and everything they refer to, and
//! runs the reconcile pipeline for one object at a time:
//!
//! `dereference` → `validate` → `build` → `apply` → `observe` → `plan` → `act` → `status`
//!
//! One replica-set step per pass; the next pass is triggered by the change it
//! caused (watched objects) or by a short requeue while MongoDB converges. A
//! finalizer takes this cluster's members out of the replica set cleanly when the
//! object is deleted.

mod apply;
pub mod dereference;
mod replica_set;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{watcher, Controller};
use kube::{Api, Client, Resource, ResourceExt};

use crate::api::{MongoDB, INSTANCE_LABEL};
use crate::build::{self, BuildContext};
use crate::hostconf::MemberAddress;
use crate::mongo::{MongoGateway, UserSpec};
use crate::planner::{plan, MemberSlot, Step};
use crate::status::{compute_status, LocalMemberView, Problem, StatusInput};
use crate::telemetry::Metrics;
use dereference::{dereference, DereferenceError, Dereferenced};
use replica_set::{act, observe, Wanted};

/// The one field manager of everything this operator writes.
pub const FIELD_MANAGER: &str = "mongodb-member-operator";
/// Finalizer that takes this cluster's members out of the set before deletion.
pub const FINALIZER: &str = "middleware.fedstate.io/leave-replica-set";
/// How long a primary this operator stepped down is remembered as handing over.
const STEP_DOWN_MEMORY: Duration = Duration::from_secs(60);

/// Shared state of the controller.
pub struct Context {
    client: Client,
    gateway: MongoGateway,
    metrics: Arc<Metrics>,
    recorder: Recorder,
    memory: Mutex<BTreeMap<String, InstanceMemory>>,
}

/// What the operator remembers between passes (lost on restart, harmlessly).
#[derive(Default, Clone)]
struct InstanceMemory {
    stepped_down: Option<(MemberAddress, Instant)>,
    conflicts: u32,
    users_fingerprint: Option<String>,
}

impl Context {
    /// A context for a controller talking to `client`.
    pub fn new(client: Client, metrics: Arc<Metrics>) -> Self {
        let reporter = Reporter {
            controller: FIELD_MANAGER.to_string(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Context {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            gateway: MongoGateway::new(),
            metrics,
            memory: Mutex::default(),
        }
    }

    fn memory(&self, key: &str) -> InstanceMemory {
        self.memory
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .cloned()
            .unwrap_or_default()
    }

    fn remember(&self, key: &str, update: impl FnOnce(&mut InstanceMemory)) {
        update(
            self.memory
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(key.to_string())
                .or_default(),
        );
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
    let context = Arc::new(Context::new(client.clone(), metrics.clone()));
    let managed = watcher::Config::default().labels(&format!(
        "{}={}",
        build::labels::MANAGED_BY_LABEL,
        build::labels::MANAGER
    ));
    let controller = Controller::new(
        scoped::<MongoDB>(&client, &namespace),
        watcher::Config::default(),
    )
    .with_config(kube::runtime::controller::Config::default().concurrency(concurrency));
    let store = controller.store();
    let by_instance_label = |object: Service| {
        let name = object.labels().get(INSTANCE_LABEL)?.clone();
        Some(ObjectRef::new(&name).within(&object.namespace()?))
    };
    let hostconf_store = store.clone();
    let secret_store = store.clone();
    metrics.set_ready(true);
    controller
        .owns(scoped::<StatefulSet>(&client, &namespace), managed.clone())
        .owns(
            scoped::<PodDisruptionBudget>(&client, &namespace),
            managed.clone(),
        )
        .watches(
            scoped::<Service>(&client, &namespace),
            watcher::Config::default().labels(INSTANCE_LABEL),
            by_instance_label,
        )
        .watches(
            scoped::<ConfigMap>(&client, &namespace),
            watcher::Config::default(),
            move |config_map: ConfigMap| {
                referrers(&hostconf_store, &config_map, |m| {
                    let name = config_map.name_any();
                    dereference::hostconf_name(m) == name
                        || m.spec.custom_config_ref.as_deref() == Some(name.as_str())
                })
            },
        )
        .watches(
            scoped::<Secret>(&client, &namespace),
            watcher::Config::default(),
            move |secret: Secret| {
                referrers(&secret_store, &secret, |m| {
                    m.spec
                        .credentials_secret_ref
                        .as_ref()
                        .is_some_and(|r| r.name == secret.name_any())
                })
            },
        )
        .shutdown_on_signal()
        .run(reconcile, error_policy, context)
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "reconcile ended with an error");
            }
        })
        .await;
    metrics.set_ready(false);
}

/// An API over `namespace`, or over every namespace when it is `None`.
fn scoped<K: Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>>(
    client: &Client,
    namespace: &Option<String>,
) -> Api<K> {
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

/// Why a pass failed; the reason is bounded (Event reason, metric label).
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// Reading or writing Kubernetes objects failed.
    #[error("{0}")]
    Kube(String),
    /// Talking to mongod failed.
    #[error("{0}")]
    Mongo(String),
    /// Desired objects could not be built or applied.
    #[error("{0}")]
    Apply(String),
}

impl ReconcileError {
    /// PascalCase reason.
    pub fn reason(&self) -> &'static str {
        match self {
            ReconcileError::Kube(_) => "KubernetesError",
            ReconcileError::Mongo(_) => "MongoDBError",
            ReconcileError::Apply(_) => "ApplyFailed",
        }
    }
}

/// Adds the finalizer first; on deletion, runs passes that take this cluster's
/// members out of the set and removes the finalizer only once they are out (or
/// the set is gone). kube-runtime's `finalizer` helper is not used because it
/// drops the finalizer as soon as one cleanup pass succeeds, and leaving takes
/// several passes.
async fn reconcile(mongodb: Arc<MongoDB>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let started = Instant::now();
    let api: Api<MongoDB> =
        Api::namespaced(ctx.client.clone(), &mongodb.namespace().unwrap_or_default());
    let finalizers = mongodb.finalizers();
    let has_finalizer = finalizers.iter().any(|f| f == FINALIZER);
    let result = if mongodb.metadata.deletion_timestamp.is_some() {
        if !has_finalizer {
            return Ok(Action::await_change());
        }
        match pass(&mongodb, &ctx, true).await {
            Ok(Pass { left: true, .. }) => {
                let index = finalizers
                    .iter()
                    .position(|f| f == FINALIZER)
                    .unwrap_or_default();
                let patch = serde_json::json!([
                    {"op": "test", "path": format!("/metadata/finalizers/{index}"), "value": FINALIZER},
                    {"op": "remove", "path": format!("/metadata/finalizers/{index}")},
                ]);
                patch_finalizers(&api, &mongodb, patch)
                    .await
                    .map(|_| Action::await_change())
            }
            Ok(Pass { action, .. }) => Ok(action),
            Err(error) => Err(error),
        }
    } else if !has_finalizer {
        let patch = if finalizers.is_empty() {
            serde_json::json!([
                {"op": "test", "path": "/metadata/finalizers", "value": null},
                {"op": "add", "path": "/metadata/finalizers", "value": [FINALIZER]},
            ])
        } else {
            serde_json::json!([{"op": "add", "path": "/metadata/finalizers/-", "value": FINALIZER}])
        };
        patch_finalizers(&api, &mongodb, patch)
            .await
            .map(|_| Action::await_change())
    } else {
        pass(&mongodb, &ctx, false).await.map(|pass| pass.action)
    };
    ctx.metrics.reconciled(started.elapsed());
    result
}

async fn patch_finalizers(
    api: &Api<MongoDB>,
    mongodb: &MongoDB,
    patch: serde_json::Value,
) -> Result<(), ReconcileError> {
    let patch: json_patch::Patch =
        serde_json::from_value(patch).map_err(|e| ReconcileError::Kube(e.to_string()))?;
    api.patch(
        &mongodb.name_any(),
        &PatchParams::default(),
        &Patch::Json::<()>(patch),
    )
    .await
    .map(drop)
    .map_err(|e| ReconcileError::Kube(format!("updating finalizers: {e}")))
}

/// What a pass decided: when to look again, and (when leaving) whether this
/// cluster's members are out of the set.
struct Pass {
    action: Action,
    left: bool,
}

fn error_policy(mongodb: Arc<MongoDB>, error: &ReconcileError, ctx: Arc<Context>) -> Action {
    ctx.metrics.failed(error.reason());
    tracing::warn!(instance = %mongodb.name_any(), reason = error.reason(), %error, "reconcile failed");
    Action::requeue(Duration::from_secs(5))
}

/// One pass over one object. `leaving`: the object is being deleted and this
/// cluster's members must leave the set.
async fn pass(mongodb: &MongoDB, ctx: &Context, leaving: bool) -> Result<Pass, ReconcileError> {
    let key = format!(
        "{}/{}",
        mongodb.namespace().unwrap_or_default(),
        mongodb.name_any()
    );
    let refs = match dereference(&ctx.client, mongodb).await {
        Ok(refs) => refs,
        Err(DereferenceError::Invalid(problem)) => {
            tracing::warn!(instance = %key, reason = problem.reason, message = %problem.message, leaving, "cannot proceed");
            if leaving {
                ctx.publish(
                    mongodb,
                    EventType::Warning,
                    "LeftWithoutCleanup",
                    format!(
                        "deleted without leaving the replica set cleanly: {}",
                        problem.message
                    ),
                )
                .await;
                return Ok(Pass {
                    action: Action::await_change(),
                    left: true,
                });
            }
            let previous = mongodb
                .status
                .as_ref()
                .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
                .map(|c| c.reason.clone());
            if previous.as_deref() != Some(problem.reason) {
                ctx.publish(
                    mongodb,
                    EventType::Warning,
                    problem.reason,
                    problem.message.clone(),
                )
                .await;
            }
            write_status(
                ctx,
                mongodb,
                &StatusParts {
                    problem: Some(&problem),
                    ..StatusParts::default()
                },
            )
            .await?;
            return Ok(Pass {
                action: Action::await_change(),
                left: false,
            });
        }
        Err(DereferenceError::Kube(error)) => return Err(ReconcileError::Kube(error.to_string())),
    };
    let paused = mongodb.spec.pause && !leaving;
    let wanted = if leaving {
        Wanted {
            members: 0,
            arbiter: false,
        }
    } else {
        Wanted {
            members: mongodb.spec.members.max(0) as u32,
            arbiter: mongodb.spec.arbiter,
        }
    };

    let mut revision = None;
    if !paused && !leaving {
        let build_ctx = BuildContext::from_mongodb(mongodb)
            .map_err(|e| ReconcileError::Apply(e.to_string()))?;
        let targets = apply::wanted_targets(wanted.members, wanted.arbiter, &refs);
        match apply::apply_desired(&ctx.client, &build_ctx, &refs, &targets).await {
            Ok(applied) => revision = applied.revision,
            Err(error) => {
                ctx.publish(
                    mongodb,
                    EventType::Warning,
                    "ApplyFailed",
                    error.to_string(),
                )
                .await;
                return Err(ReconcileError::Apply(error.to_string()));
            }
        }
    }

    let memory = ctx.memory(&key);
    let stepped_down = memory
        .stepped_down
        .clone()
        .filter(|(_, at)| at.elapsed() < STEP_DOWN_MEMORY)
        .map(|(host, _)| host);
    let observation = observe(&ctx.gateway, mongodb, &refs, wanted, stepped_down).await;
    let step = plan(&observation.plan_input);
    tracing::info!(instance = %key, step = %step, "planned");

    let mut requeue = Duration::from_secs(30);
    if !paused {
        let namespace = mongodb.namespace().unwrap_or_default();
        let instance = mongodb.name_any();
        let client = ctx.client.clone();
        let delete = |slot: MemberSlot, delete_pvc: bool| {
            let stateful_set = slot_name(&instance, slot);
            async move { apply::delete_member(&client, &namespace, &stateful_set, delete_pvc).await }
        };
        match act(
            &ctx.gateway,
            mongodb,
            &refs,
            &observation,
            &step,
            memory.conflicts,
            delete,
        )
        .await
        {
            Ok(outcome) => {
                if let Some(note) = &outcome.event {
                    ctx.publish(mongodb, note.type_, note.reason, note.message.clone())
                        .await;
                }
                ctx.remember(&key, |m| {
                    m.conflicts = if outcome.conflict {
                        m.conflicts.saturating_add(1)
                    } else {
                        0
                    };
                    if let Some(host) = &outcome.stepped_down {
                        m.stepped_down = Some((host.clone(), Instant::now()));
                    }
                });
                requeue = outcome.requeue;
            }
            Err(error) => {
                ctx.publish(
                    mongodb,
                    EventType::Warning,
                    step.reason(),
                    format!("{step} failed: {error}"),
                )
                .await;
                write_status(
                    ctx,
                    mongodb,
                    &StatusParts {
                        refs: Some(&refs),
                        observation: observation.set.as_ref(),
                        step: Some(&step),
                        revision,
                        ..StatusParts::default()
                    },
                )
                .await?;
                return Err(ReconcileError::Mongo(error.to_string()));
            }
        }
        if step == Step::InSync && !leaving {
            ensure_users(ctx, mongodb, &refs, &observation, &key).await;
        }
    }

    write_status(
        ctx,
        mongodb,
        &StatusParts {
            paused,
            refs: Some(&refs),
            observation: observation.set.as_ref(),
            step: Some(&step),
            revision,
            ..StatusParts::default()
        },
    )
    .await?;
    if leaving {
        let nothing_left = step == Step::InSync
            || (observation.set.is_none()
                && !observation
                    .plan_input
                    .local_members
                    .iter()
                    .any(|m| m.probe.as_ref().is_some_and(|p| p.has_config)));
        if nothing_left {
            ctx.publish(
                mongodb,
                EventType::Normal,
                "LeftReplicaSet",
                "this cluster's members have left the replica set".to_string(),
            )
            .await;
            return Ok(Pass {
                action: Action::await_change(),
                left: true,
            });
        }
    }
    Ok(Pass {
        action: Action::requeue(requeue),
        left: false,
    })
}

/// Creates or updates the operator-managed users and the database user once per
/// change of their passwords (idempotent, so a restart only repeats it once).
async fn ensure_users(
    ctx: &Context,
    mongodb: &MongoDB,
    refs: &Dereferenced,
    observation: &replica_set::Observation,
    key: &str,
) {
    let Some(set) = &observation.set else { return };
    let root_password = &refs.credentials.root.password;
    let role = |role: &str, db: &str| (role.to_string(), db.to_string());
    let mut users = vec![
        UserSpec {
            database: "admin".into(),
            name: build::secrets::ADMIN_USER.into(),
            password: build::derive_user_password(root_password, build::secrets::ADMIN_USER),
            roles: vec![role("clusterAdmin", "admin")],
        },
        UserSpec {
            database: "admin".into(),
            name: build::secrets::MONITOR_USER.into(),
            password: build::derive_user_password(root_password, build::secrets::MONITOR_USER),
            roles: vec![role("clusterMonitor", "admin"), role("read", "local")],
        },
    ];
    let db_user = &mongodb.spec.db_user_spec;
    if db_user.enable {
        let password = db_user
            .password
            .clone()
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| build::derive_user_password(root_password, &db_user.user));
        users.push(UserSpec {
            database: db_user.name.clone(),
            name: db_user.user.clone(),
            password,
            roles: vec![role("readWrite", &db_user.name)],
        });
    }
    let fingerprint = build::fingerprint(
        &users
            .iter()
            .map(|u| format!("{}/{}/{}", u.database, u.name, u.password))
            .collect::<Vec<_>>()
            .join("\n"),
    );
    if ctx.memory(key).users_fingerprint.as_deref() == Some(fingerprint.as_str()) {
        return;
    }
    let seeds: Vec<MemberAddress> = set.members.keys().cloned().collect();
    for user in &users {
        if let Err(error) = ctx
            .gateway
            .ensure_user(
                &seeds,
                &mongodb.spec.repl_set_name,
                user,
                &refs.credentials.root,
            )
            .await
        {
            ctx.publish(
                mongodb,
                EventType::Warning,
                "UserNotReady",
                format!("user {} on {}: {error}", user.name, user.database),
            )
            .await;
            return;
        }
    }
    ctx.publish(
        mongodb,
        EventType::Normal,
        "UsersReady",
        format!(
            "users {} are in place",
            users
                .iter()
                .map(|u| u.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    )
    .await;
    ctx.remember(key, |m| m.users_fingerprint = Some(fingerprint));
}

/// The pieces of a status write.
#[derive(Default)]
struct StatusParts<'a> {
    paused: bool,
    problem: Option<&'a Problem>,
    refs: Option<&'a Dereferenced>,
    observation: Option<&'a crate::mongo::SetObservation>,
    step: Option<&'a Step>,
    revision: Option<String>,
}

async fn write_status(
    ctx: &Context,
    mongodb: &MongoDB,
    parts: &StatusParts<'_>,
) -> Result<(), ReconcileError> {
    let instance = mongodb.name_any();
    let local_members: Vec<LocalMemberView> = parts
        .refs
        .map(|refs| {
            let mut slots: Vec<MemberSlot> = refs
                .services
                .keys()
                .chain(refs.stateful_sets.keys())
                .copied()
                .collect();
            slots.sort();
            slots.dedup();
            slots
                .into_iter()
                .map(|slot| LocalMemberView {
                    slot,
                    stateful_set: slot_name(&instance, slot),
                    node_port: refs.services.get(&slot).and_then(|s| s.node_port),
                    host: refs.address(slot),
                })
                .collect()
        })
        .unwrap_or_default();
    let db_user_password_fingerprint = mongodb
        .spec
        .db_user_spec
        .password
        .as_deref()
        .filter(|_| mongodb.spec.db_user_spec.enable)
        .map(build::fingerprint);
    let status = compute_status(&StatusInput {
        mongodb,
        paused: parts.paused,
        problem: parts.problem,
        observation: parts.observation,
        local_members: &local_members,
        step: parts.step,
        revision: parts.revision.clone(),
        credentials_from_spec: mongodb.spec.credentials_secret_ref.is_none(),
        db_user_password_fingerprint,
        now: Time(k8s_openapi::jiff::Timestamp::now()),
    });
    if mongodb.status.as_ref() == Some(&status) {
        return Ok(());
    }
    let api: Api<MongoDB> =
        Api::namespaced(ctx.client.clone(), &mongodb.namespace().unwrap_or_default());
    let patch = serde_json::json!({"apiVersion": "middleware.fedstate.io/v1alpha1", "kind": "MongoDB", "status": status});
    api.patch_status(
        &instance,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(patch),
    )
    .await
    .map_err(|e| ReconcileError::Kube(e.to_string()))?;
    Ok(())
}

fn slot_name(instance: &str, slot: MemberSlot) -> String {
    match slot {
        MemberSlot::Data(index) => build::names::member(instance, index),
        MemberSlot::Arbiter => build::names::arbiter(instance),
    }
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
