//! Stage `status` (pure, then Kubernetes I/O): what the pass saw and did
//! ([`Report`]), computed into a status by the pure [`crate::status`] and
//! written by server-side apply of the status subresource when it differs
//! from the stored one ([`write`]), with the Warning Events a new status
//! calls for (settings refused, a voting majority lost). Input a pass cannot
//! use is reported here too ([`report_invalid_input`]).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::Api;

use super::context::PassContext;
use super::events::Notice;
use super::{ReconcileError, FIELD_MANAGER};
use crate::api::{ForgetClusterStatus, MongoDB, RecoveryStatus};
use crate::keyfile::KeyfileProgress;
use crate::observe::ObservedSet;
use crate::planner::{Step, WaitReason};
use crate::roll::RollStep;
use crate::service_hold::HeldService;
use crate::status::{
    compute_status, condition, condition_reason, local_member_views, ConditionType, StatusInput,
    TlsSeen,
};
use crate::telemetry::InstanceGauges;
use crate::validate::{InvalidInput, Validated};
use crate::volume_growth::Growth;

/// What a pass has to report in status.
#[derive(Default)]
pub struct Report<'a> {
    /// The object is paused.
    pub paused: bool,
    /// Input the pass could not use.
    pub problem: Option<&'a InvalidInput>,
    /// The checked input.
    pub validated: Option<&'a Validated>,
    /// The replica set as read.
    pub observation: Option<&'a ObservedSet>,
    /// The planner's step, as the status says it.
    pub step: Option<&'a Step>,
    /// The roll's step.
    pub roll: Option<&'a RollStep>,
    /// The featureCompatibilityVersion read this pass.
    pub feature_compatibility_version: Option<String>,
    /// The desired pod revision.
    pub revision: Option<String>,
    /// What the API server refused to apply.
    pub apply_failures: &'a [String],
    /// `status.recovery` after this pass.
    pub recovery: Option<RecoveryStatus>,
    /// `status.forgetCluster` after this pass.
    pub forget_cluster: Option<ForgetClusterStatus>,
    /// The deleted member Services this pass kept.
    pub held_services: &'a [HeldService],
    /// What `grow` did this pass.
    pub growth: Option<&'a Growth>,
    /// Where the keyfile stands (`None`: not known this pass).
    pub keyfile: Option<&'a KeyfileProgress>,
    /// What the pass saw of TLS (`None`: no `spec.tls`, or it stopped before).
    pub tls: Option<TlsSeen<'a>>,
}

/// Computes the status and writes it when it differs from the stored one;
/// whether it did.
pub async fn write(
    ctx: &PassContext,
    mongodb: &MongoDB,
    report: &Report<'_>,
) -> Result<bool, ReconcileError> {
    let instance = &ctx.instance;
    let local_members = report
        .validated
        .map(|validated| local_member_views(&instance.name, validated))
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
        forget_cluster: report.forget_cluster.clone(),
        held_services: report.held_services,
        growth: report.growth,
        keyfile: report.keyfile,
        tls: report.tls,
        now: Time(k8s_openapi::jiff::Timestamp::now()),
    });
    ctx.metrics
        .observed(&instance.key, InstanceGauges::of(&status));
    if mongodb.status.as_ref() == Some(&status) {
        return Ok(false);
    }
    let refused_settings = condition(Some(&status), ConditionType::ConfigAccepted)
        .filter(|c| c.status == "False")
        .filter(|c| condition(mongodb.status.as_ref(), ConditionType::ConfigAccepted) != Some(*c));
    if let Some(refused) = refused_settings {
        let message = refused.message.clone();
        ctx.events
            .publish(EventType::Warning, &refused.reason, message)
            .await;
    }
    // A deleted member Service is announced once, when it is first held.
    let previously_held = condition(mongodb.status.as_ref(), ConditionType::MemberServicesHeld)
        .filter(|c| c.status == "True")
        .map(|c| c.message.as_str())
        .unwrap_or_default();
    for newly_held in report
        .held_services
        .iter()
        .filter(|held| !previously_held.contains(&held.mention()))
    {
        ctx.events
            .publish(
                EventType::Warning,
                Notice::MemberServiceHeld.into(),
                newly_held.describe(),
            )
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
        ctx.events
            .publish(EventType::Warning, lost.reason(), lost.to_string())
            .await;
    }
    let api: Api<MongoDB> = Api::namespaced(ctx.client.clone(), &instance.namespace);
    let patch = serde_json::json!({
        "apiVersion": "middleware.fedstate.io/v1alpha1",
        "kind": "MongoDB",
        "status": status,
    });
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch_status(&instance.name, &params, &Patch::Apply(patch))
        .await
        .map(|_| true)
        .map_err(ReconcileError::StatusFailed)
}

/// Reports input the pass cannot use: a condition, and a Warning Event when
/// the reason is new.
pub async fn report_invalid_input(
    ctx: &PassContext,
    mongodb: &MongoDB,
    invalid: &InvalidInput,
    held_services: &[HeldService],
) -> Result<(), ReconcileError> {
    let reason = invalid.reason();
    if condition_reason(mongodb.status.as_ref(), ConditionType::Ready) != Some(reason) {
        ctx.events
            .publish(EventType::Warning, reason, invalid.to_string())
            .await;
    }
    let report = Report {
        problem: Some(invalid),
        held_services,
        ..Report::default()
    };
    write(ctx, mongodb, &report).await.map(drop)
}
