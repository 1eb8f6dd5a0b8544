//! Stage `apply` (Kubernetes I/O): server-side apply of the desired objects under
//! one field manager, StatefulSets last. Full desired objects are applied, never
//! read-modify-written; a StatefulSet is only ever deleted by a planner step.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::dereference::Dereferenced;
use super::FIELD_MANAGER;
use crate::build::{self, BuildContext, BuildError, MemberRole, MemberTarget};
use crate::planner::MemberSlot;

/// What applying produced that the status reports.
pub struct Applied {
    /// Revision of the member pod template.
    pub revision: Option<String>,
}

/// Why applying failed.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The desired objects could not be built.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// The API server refused or failed.
    #[error("applying {kind} {name}: {source}")]
    Kube {
        /// Object kind.
        kind: &'static str,
        /// Object name.
        name: String,
        /// What the API server said.
        source: kube::Error,
    },
}

/// The members this cluster should run: data members `0..spec.members` and the
/// arbiter when `spec.arbiter`, each once its propagated Service exists.
pub fn wanted_targets(spec_members: u32, arbiter: bool, refs: &Dereferenced) -> Vec<MemberTarget> {
    let slots = (0..spec_members)
        .map(MemberSlot::Data)
        .chain(arbiter.then_some(MemberSlot::Arbiter));
    slots
        .filter_map(|slot| {
            let service = refs.services.get(&slot)?;
            let role = match slot {
                MemberSlot::Data(index) => MemberRole::Data { index },
                MemberSlot::Arbiter => MemberRole::Arbiter,
            };
            Some(MemberTarget {
                role,
                selector: service.selector.clone(),
                host: refs.address(slot).map(|a| a.to_string()),
            })
        })
        .collect()
}

/// Applies every desired object of the instance.
pub async fn apply_desired(
    client: &Client,
    ctx: &BuildContext<'_>,
    refs: &Dereferenced,
    targets: &[MemberTarget],
) -> Result<Applied, ApplyError> {
    let namespace = ctx.namespace();
    let root_password = refs.credentials.root.password.as_str();
    let mut secrets = vec![
        build::monitor_credentials_secret(ctx, root_password),
        build::admin_credentials_secret(ctx, root_password),
    ];
    secrets.extend(build::derived_credentials_secret(ctx)?);
    secrets.extend(build::db_user_secret(ctx, root_password)?);
    secrets.extend(build::image_pull_secret(ctx));
    for secret in &secrets {
        apply(
            Api::<Secret>::namespaced(client.clone(), namespace),
            secret,
            "Secret",
        )
        .await?;
    }
    let mut services = vec![build::headless_service(ctx)];
    services.extend(build::metrics_service(ctx));
    for service in &services {
        apply(
            Api::<Service>::namespaced(client.clone(), namespace),
            service,
            "Service",
        )
        .await?;
    }
    apply(
        Api::<PodDisruptionBudget>::namespaced(client.clone(), namespace),
        &build::member_pod_disruption_budget(ctx),
        "PodDisruptionBudget",
    )
    .await?;
    let mut revision = None;
    for target in targets {
        let member = build::member_stateful_set(ctx, target)?;
        apply(
            Api::<StatefulSet>::namespaced(client.clone(), namespace),
            &member.stateful_set,
            "StatefulSet",
        )
        .await?;
        revision = Some(member.revision);
    }
    Ok(Applied { revision })
}

/// Deletes a member's StatefulSet and, when asked, its PVC. "Not found" is success.
/// The PVC goes first: a crash in between repeats the same step (the StatefulSet
/// still exists), where the other order could leave a PVC nothing reports. The
/// PVC's protection finalizer keeps it until the pod is gone.
pub async fn delete_member(
    client: &Client,
    namespace: &str,
    stateful_set: &str,
    delete_pvc: bool,
) -> Result<(), kube::Error> {
    if delete_pvc {
        let claim = build::names::data_claim(stateful_set);
        ignore_not_found(
            Api::<PersistentVolumeClaim>::namespaced(client.clone(), namespace)
                .delete(&claim, &DeleteParams::default())
                .await
                .map(drop),
        )?;
    }
    ignore_not_found(
        Api::<StatefulSet>::namespaced(client.clone(), namespace)
            .delete(stateful_set, &DeleteParams::foreground())
            .await
            .map(drop),
    )
}

fn ignore_not_found(result: Result<(), kube::Error>) -> Result<(), kube::Error> {
    match result {
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        other => other,
    }
}

async fn apply<K>(api: Api<K>, object: &K, kind: &'static str) -> Result<(), ApplyError>
where
    K: Resource + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
    K::DynamicType: Default,
{
    let name = object.name_any();
    let mut value = serde_json::to_value(object).map_err(|e| ApplyError::Kube {
        kind,
        name: name.clone(),
        source: kube::Error::SerdeError(e),
    })?;
    value["apiVersion"] =
        serde_json::Value::String(K::api_version(&Default::default()).to_string());
    value["kind"] = serde_json::Value::String(K::kind(&Default::default()).to_string());
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(value),
    )
    .await
    .map(drop)
    .map_err(|source| ApplyError::Kube { kind, name, source })
}
