//! Stage `recovery` (MongoDB I/O): an explicit disaster recovery, only when an
//! SRE asked for it on this cluster's object (annotation
//! [`crate::api::RECOVERY_ANNOTATION`]). The pure [`crate::recovery::plan_recovery`]
//! decides — report the plan, force it, record it, or refuse — and this stage
//! carries that out and announces each phase with an Event. Without a request
//! it does nothing at all.

use std::time::Duration;

use kube::runtime::events::EventType;
use kube::ResourceExt;

use super::context::{Instance, PassContext};
use super::events::error_chain;
use super::observe::MongoAnswers;
use crate::api::{MongoDB, RecoveryStatus, RECOVERY_ANNOTATION};
use crate::hostconf::MemberAddress;
use crate::member::MemberSlot;
use crate::mongo::recovery_store::RecoveryRecord;
use crate::planner::Step;
use crate::recovery::{plan_recovery, recovery_status, RecoveryInput, RecoveryStep};
use crate::validate::Validated;

/// How soon to look again while a recovery is under way (planned or forced):
/// elections are not watched objects.
const WHILE_RECOVERING: Duration = Duration::from_secs(2);

/// The Events of a recovery.
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::IntoStaticStr)]
enum RecoveryNotice {
    /// The forced reconfig is planned and reported; it is done on a later pass.
    RecoveryPlanned,
    /// The forced reconfig was sent.
    ForcedReconfig,
    /// The forced reconfig or its record failed; the next pass tries again.
    RecoveryFailed,
    /// The recovery is recorded in the set: done.
    RecoveryRecorded,
}

/// What the stage leaves for status, and when to look again.
pub struct Recovered {
    /// `status.recovery` after this pass.
    pub status: Option<RecoveryStatus>,
    /// When to look again, if sooner than the pass would.
    pub requeue: Option<Duration>,
}

/// Plans and carries out this pass's recovery step.
pub async fn recover(
    ctx: &PassContext,
    mongodb: &MongoDB,
    validated: &Validated,
    answers: &MongoAnswers,
    step: &Step,
) -> Recovered {
    let request = mongodb
        .annotations()
        .get(RECOVERY_ANNOTATION)
        .map(|value| value.trim())
        .filter(|value| !value.is_empty());
    let recorded = mongodb.status.as_ref().and_then(|s| s.recovery.as_ref());
    // The forced reconfig goes to a data member: an arbiter is asked nothing
    // but `hello`.
    let local_answering: Vec<MemberAddress> = validated
        .stateful_sets
        .keys()
        .filter(|slot| **slot != MemberSlot::Arbiter)
        .filter_map(|slot| validated.address(*slot))
        .filter(|address| answers.probes.get(address).is_some_and(|p| p.has_config))
        .collect();
    let reading = answers.reading.as_ref();
    let planned = plan_recovery(&RecoveryInput {
        request,
        recorded,
        step,
        set: reading.map(|r| &r.set),
        local_answering: &local_answering,
    });
    if planned != RecoveryStep::Idle {
        tracing::info!(instance = %ctx.instance, step = ?planned, "recovery step");
    }
    let done = match &planned {
        RecoveryStep::Idle | RecoveryStep::AwaitPrimary => planned.clone(),
        RecoveryStep::Report { plan } => {
            let message = format!(
                "disaster recovery asked for ({:?}): {plan}; it is forced on the next pass \
                 unless a voting majority comes back or the plan changes",
                request.unwrap_or_default()
            );
            let reason = RecoveryNotice::RecoveryPlanned.into();
            ctx.events
                .publish(EventType::Warning, reason, message)
                .await;
            planned.clone()
        }
        RecoveryStep::Refuse { reason } => {
            let message = format!(
                "disaster recovery asked for ({:?}) refused: {reason}; this request is ignored \
                 from now on",
                request.unwrap_or_default()
            );
            ctx.events
                .publish(EventType::Warning, reason.reason(), message)
                .await;
            planned.clone()
        }
        RecoveryStep::Force { plan, on } => {
            let forced = match reading {
                Some(reading) => {
                    ctx.gateway
                        .force_reconfig(on, &reading.config_document, &plan.config, &validated.root)
                        .await
                }
                None => Err(crate::mongo::MongoError::Unreachable(on.to_string())),
            };
            match forced {
                Ok(()) => {
                    tracing::warn!(instance = %ctx.instance, member = %on, "forced reconfig sent");
                    let message = format!("forced reconfig sent to {on}: {plan}");
                    let reason = RecoveryNotice::ForcedReconfig.into();
                    ctx.metrics.step_taken(reason);
                    ctx.events
                        .publish(EventType::Warning, reason, message)
                        .await;
                    planned.clone()
                }
                Err(error) => {
                    failed(
                        ctx,
                        format!("forced reconfig on {on}: {}", error_chain(&error)),
                    )
                    .await;
                    RecoveryStep::Idle
                }
            }
        }
        RecoveryStep::Record { primary } => {
            let record = recovery_record(&ctx.instance, validated, recorded);
            match ctx
                .gateway
                .record_recovery(primary, &record, &validated.root)
                .await
            {
                Ok(()) => {
                    let message = format!(
                        "disaster recovery done: the set now has {}; dropped {} (not re-added \
                         unless resynced from scratch)",
                        record.kept.join(", "),
                        record.dropped.join(", ")
                    );
                    let reason = RecoveryNotice::RecoveryRecorded.into();
                    ctx.events.publish(EventType::Normal, reason, message).await;
                    planned.clone()
                }
                Err(error) => {
                    let message = format!("recording the recovery: {}", error_chain(&error));
                    failed(ctx, message).await;
                    RecoveryStep::Idle
                }
            }
        }
    };
    let now =
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now());
    let status = recovery_status(request, recorded, &done, &now);
    let under_way = status.as_ref().is_some_and(|s| {
        Some(s.request.as_str()) == request
            && matches!(
                s.phase,
                crate::api::RecoveryPhase::Planned | crate::api::RecoveryPhase::Forced
            )
    });
    Recovered {
        status,
        requeue: under_way.then_some(WHILE_RECOVERING),
    }
}

/// Says that a recovery step failed; the next pass tries again.
async fn failed(ctx: &PassContext, message: String) {
    tracing::warn!(instance = %ctx.instance, %message, "recovery step failed");
    let reason = RecoveryNotice::RecoveryFailed.into();
    ctx.events
        .publish(EventType::Warning, reason, message)
        .await;
}

/// The record of the recovery `recorded` describes.
fn recovery_record(
    instance: &Instance,
    validated: &Validated,
    recorded: Option<&RecoveryStatus>,
) -> RecoveryRecord {
    RecoveryRecord {
        cluster: validated.vip.clone(),
        instance: instance.key.clone(),
        request: recorded.map(|r| r.request.clone()).unwrap_or_default(),
        from_config_version: recorded
            .and_then(|r| r.from_config_version)
            .unwrap_or_default(),
        kept: recorded.map(|r| r.keeping.clone()).unwrap_or_default(),
        dropped: recorded.map(|r| r.dropping.clone()).unwrap_or_default(),
        at_millis: k8s_openapi::jiff::Timestamp::now().as_millisecond(),
    }
}
