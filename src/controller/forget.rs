//! Stage `forget` (MongoDB I/O): forgetting a lost cluster, only when an SRE
//! asked for it on this cluster's object (annotation
//! [`crate::api::FORGET_CLUSTER_ANNOTATION`]). The pure
//! [`crate::forget::plan_forget`] decides — record the cluster's members as
//! forgotten, say it is done, or refuse — and this stage carries that out and
//! announces it with an Event; the planner removes the members in between.
//! Without a request it does nothing at all.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::events::EventType;

use super::context::PassContext;
use super::events::error_chain;
use super::observe::MongoAnswers;
use crate::api::{ForgetClusterPhase, ForgetClusterStatus, MongoDB};
use crate::forget::{forget_status, plan_forget, ForgetInput, ForgetRequest, ForgetStep};
use crate::mongo::recovery_store::ForgetRecord;
use crate::planner::Step;
use crate::validate::Validated;

/// How soon to look again while the members are being removed: a reconfig
/// and its commitment are not watched objects.
const WHILE_REMOVING: Duration = Duration::from_secs(2);

/// The Events of forgetting a cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::IntoStaticStr)]
enum ForgetNotice {
    /// The cluster's members are recorded as forgotten; their removal starts.
    ForgettingCluster,
    /// Recording the members failed; the next pass tries again.
    ForgetFailed,
    /// No member of the cluster is left in the config: done.
    ClusterForgotten,
}

/// What the stage leaves for status, and when to look again.
pub struct Forgotten {
    /// `status.forgetCluster` after this pass.
    pub status: Option<ForgetClusterStatus>,
    /// When to look again, if sooner than the pass would.
    pub requeue: Option<Duration>,
}

/// Plans and carries out this pass's step of forgetting a cluster.
pub async fn forget(
    ctx: &PassContext,
    mongodb: &MongoDB,
    validated: &Validated,
    answers: &MongoAnswers,
    step: &Step,
) -> Forgotten {
    let request = ForgetRequest::of(mongodb);
    let recorded = mongodb
        .status
        .as_ref()
        .and_then(|s| s.forget_cluster.as_ref());
    let planned = plan_forget(&ForgetInput {
        request: request.clone(),
        recorded,
        step,
        set: answers.reading.as_ref().map(|r| &r.set),
        local_vip: &validated.vip,
    });
    if planned != ForgetStep::Idle {
        tracing::info!(instance = %ctx.instance, step = ?planned, "forget-cluster step");
    }
    let asked = request.as_ref().map_or("", |r| r.request);
    let done = match &planned {
        ForgetStep::Idle | ForgetStep::AwaitPrimary => planned.clone(),
        ForgetStep::Refuse { reason } => {
            let message = format!(
                "forgetting a cluster asked for ({asked:?}) refused: {reason}; this request is \
                 ignored from now on"
            );
            ctx.events
                .publish(EventType::Warning, reason.reason(), message)
                .await;
            planned.clone()
        }
        ForgetStep::Record {
            primary,
            members,
            from_version,
        } => {
            let record = ForgetRecord {
                cluster: validated.vip.clone(),
                instance: ctx.instance.key.clone(),
                request: asked.to_string(),
                forgotten: request.as_ref().map_or("", |r| r.cluster).to_string(),
                from_config_version: *from_version,
                members: members.iter().map(ToString::to_string).collect(),
                at_millis: Timestamp::now().as_millisecond(),
            };
            match ctx
                .gateway
                .record_forgotten(primary, &record, &validated.root)
                .await
            {
                Ok(()) => {
                    let message = format!(
                        "forgetting cluster {} ({asked:?}): {} recorded in the set as \
                         forgotten; removing them one reconfig at a time",
                        record.forgotten,
                        record.members.join(", ")
                    );
                    let reason = ForgetNotice::ForgettingCluster.into();
                    ctx.events
                        .publish(EventType::Warning, reason, message)
                        .await;
                    planned.clone()
                }
                Err(error) => {
                    let message = format!(
                        "recording the members of cluster {} as forgotten: {}",
                        record.forgotten,
                        error_chain(&error)
                    );
                    tracing::warn!(instance = %ctx.instance, %message, "forget-cluster step failed");
                    let reason = ForgetNotice::ForgetFailed.into();
                    ctx.events
                        .publish(EventType::Warning, reason, message)
                        .await;
                    ForgetStep::Idle
                }
            }
        }
        ForgetStep::Finish => {
            let cluster = request.as_ref().map_or("", |r| r.cluster);
            let message = format!(
                "cluster {cluster} forgotten ({asked:?}): none of its members is left in the \
                 config"
            );
            let reason = ForgetNotice::ClusterForgotten.into();
            ctx.events.publish(EventType::Normal, reason, message).await;
            planned.clone()
        }
    };
    let now = Time(Timestamp::now());
    let status = forget_status(request.as_ref(), recorded, &done, &now);
    let removing = status.as_ref().is_some_and(|s| {
        Some(s.request.as_str()) == request.as_ref().map(|r| r.request)
            && s.phase == ForgetClusterPhase::Removing
    });
    Forgotten {
        status,
        requeue: removing.then_some(WHILE_REMOVING),
    }
}
