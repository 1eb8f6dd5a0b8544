//! Stage `grow` (Kubernetes I/O): the members' data volumes brought to
//! `spec.persistence.storage` as the pure [`crate::volume_growth`] plans it —
//! claims expanded by a patch of their storage request, then each
//! StatefulSet deleted with orphan propagation for `apply` to bring it back
//! with the larger claim template, its pod left running. What the API server
//! refuses (a StorageClass without `allowVolumeExpansion`) is reported.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{DeleteParams, Patch, PatchParams, PropagationPolicy};
use kube::runtime::events::EventType;
use kube::Api;
use serde_json::json;

use super::context::PassContext;
use super::events::{error_chain, Notice};
use crate::api::MongoDB;
use crate::member::Wanted;
use crate::status::{condition, ConditionType};
use crate::validate::Validated;
use crate::volume_growth::{plan_growth, Growth, GrowthStep};

/// Plans and carries out this pass's step towards the spec's storage.
pub async fn grow(
    ctx: &PassContext,
    mongodb: &MongoDB,
    validated: &Validated,
    wanted: Wanted,
) -> Growth {
    let volumes = validated.volumes(&ctx.instance.name, wanted);
    let step = plan_growth(&mongodb.spec.persistence.storage, &volumes);
    let namespace = &ctx.instance.namespace;
    let refused = match &step {
        GrowthStep::Expand { claims, to } => {
            let api = Api::<PersistentVolumeClaim>::namespaced(ctx.client.clone(), namespace);
            let patch = json!({"spec": {"resources": {"requests": {"storage": to}}}});
            let mut refused = None;
            for claim in claims {
                let patched = api
                    .patch(claim, &PatchParams::default(), &Patch::Merge(&patch))
                    .await;
                match patched {
                    Ok(_) => {
                        let message = format!("claim {claim} asks for {}", to.0);
                        ctx.events
                            .publish(EventType::Normal, Notice::ClaimExpanded.into(), message)
                            .await;
                    }
                    Err(error) => {
                        refused = Some(format!("claim {claim}: {}", said(&error)));
                        break;
                    }
                }
            }
            refused
        }
        GrowthStep::ReplaceTemplate { stateful_set } => {
            let api = Api::<StatefulSet>::namespaced(ctx.client.clone(), namespace);
            let orphan = DeleteParams {
                propagation_policy: Some(PropagationPolicy::Orphan),
                ..DeleteParams::default()
            };
            match api.delete(stateful_set, &orphan).await {
                Ok(_) => {
                    let message = format!(
                        "StatefulSet {stateful_set} deleted with its pod left running, to be \
                         applied again with a claim template of {}",
                        mongodb.spec.persistence.storage.0
                    );
                    ctx.events
                        .publish(
                            EventType::Normal,
                            Notice::ClaimTemplateReplaced.into(),
                            message,
                        )
                        .await;
                    None
                }
                Err(kube::Error::Api(status)) if status.code == 404 => None,
                Err(error) => Some(format!(
                    "StatefulSet {stateful_set}: {}",
                    error_chain(&error)
                )),
            }
        }
        _ => None,
    };
    // A refusal is announced once, not on every pass that meets it again.
    let known = condition(mongodb.status.as_ref(), ConditionType::VolumesMatchSpec)
        .is_some_and(|c| Some(&c.message) == refused.as_ref());
    if let Some(message) = refused.as_ref().filter(|_| !known) {
        ctx.events
            .publish(
                EventType::Warning,
                Notice::StorageChangeRefused.into(),
                message.clone(),
            )
            .await;
    }
    Growth { step, refused }
}

/// What the API server said, without the envelope of its answer.
fn said(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => format!("{} ({})", status.message, status.reason),
        other => error_chain(other),
    }
}
