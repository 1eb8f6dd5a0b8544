//! Stage `roll` (MongoDB and Kubernetes I/O): once the membership is in sync,
//! replaces the pod of one outdated local member — one member of the whole set
//! at a time, under the restart lease kept in the replica set. Reads the shared
//! roll state from the primary, publishes this cluster's member reports when
//! they changed, asks the pure [`crate::roll::plan_roll`] for the one step and
//! carries it out. Every step taken under the lease first renews it; a pod is
//! deleted with its uid as precondition, and only if the member does not
//! answer as primary right then.

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::future::join_all;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, Preconditions};
use kube::runtime::events::EventType;
use kube::Api;

use super::act::step_down_backoff;
use super::context::{HeldStepDown, PassContext};
use super::events::{error_chain, Notice};
use super::observe::MongoAnswers;
use crate::api::MongoDB;
use crate::build::names;
use crate::hostconf::MemberAddress;
use crate::member::MemberSlot;
use crate::mongo::{codes, MongoError};
use crate::observe::ObservedSet;
use crate::replset::MemberState;
use crate::roll::{
    majority_stays_up, plan_roll, DesiredPods, Lease, RestartCaveat, RollInput, RollObservation,
    RollStep, LEASE_TTL_MILLIS,
};
use crate::validate::Validated;

/// How soon the roll looks again while it is under way: the lease of another
/// cluster and the members' health are not watched objects.
const WHILE_ROLLING: Duration = Duration::from_secs(2);
/// `replSetStepDown` before a restart: the primary stays ineligible this long,
/// longer than its restart takes to begin.
const STEP_DOWN_SECS: i64 = 60;
/// How long the primary waits for an electable secondary to catch up.
const STEP_DOWN_CATCH_UP_SECS: i64 = 10;

/// What the roll stage did.
pub struct Rolled {
    /// The step planned (for status).
    pub step: RollStep,
    /// When to look again, if sooner than the pass would.
    pub requeue: Option<Duration>,
    /// The featureCompatibilityVersion read this pass.
    pub fcv: Option<String>,
}

/// Why a roll step could not be carried out.
#[derive(Debug, thiserror::Error)]
pub enum RollError {
    /// A command to mongod failed.
    #[error("{step}: {source}")]
    Mongo {
        step: String,
        #[source]
        source: MongoError,
    },
    /// The pod could not be deleted.
    #[error("{step}: {source}")]
    Kube {
        step: String,
        #[source]
        source: kube::Error,
    },
}

/// Plans and carries out one roll step; `None` when the set cannot be read
/// (no primary: nothing is restarted then).
pub async fn roll(
    ctx: &PassContext,
    mongodb: &MongoDB,
    validated: &Validated,
    answers: &MongoAnswers,
    desired: DesiredPods<'_>,
) -> Option<Rolled> {
    let reading = answers.reading.as_ref()?;
    let primary = reading.set.primary.clone()?;
    let credentials = &validated.root;
    let shared = match ctx.gateway.read_roll_state(&primary, credentials).await {
        Ok(shared) => shared,
        Err(error) => {
            tracing::info!(%error, "the roll state could not be read");
            return None;
        }
    };
    let versions = local_versions(ctx, validated, answers).await;
    let fcv = ctx
        .gateway
        .feature_compatibility_version(&primary, credentials)
        .await
        .inspect_err(
            |error| tracing::info!(%error, "the featureCompatibilityVersion could not be read"),
        )
        .ok();
    let observed = RollObservation {
        set: &reading.set,
        probes: &answers.probes,
        versions: &versions,
        shared,
        fcv: fcv.clone(),
    };
    let mut input =
        RollInput::from_observation(mongodb, validated, observed, desired, unix_millis());
    input.step_down_held = ctx.step_down_held();
    for member in &input.local {
        let report = member.report(input.reports.get(&member.address), input.now_millis);
        if input.reports.get(&member.address) == Some(&report) {
            continue;
        }
        let published = ctx
            .gateway
            .publish_report(&primary, &member.address, &report, credentials)
            .await;
        match published {
            Ok(()) => {
                input.reports.insert(member.address.clone(), report);
            }
            Err(error) => {
                tracing::info!(member = %member.address, %error, "the member report could not be written")
            }
        }
    }
    let (keys_run, modes_run) = (input.keys_run(), input.modes_run());
    ctx.remember(|memory| {
        memory.keys_run = Some(keys_run);
        memory.modes_run = Some(modes_run);
    });
    let step = plan_roll(&input);
    tracing::info!(instance = %ctx.instance.name, roll = %step, "roll step");
    let requeue = (step != RollStep::UpToDate).then_some(WHILE_ROLLING);
    match carry_out(ctx, validated, &reading.set, &step).await {
        Ok(Some(message)) => {
            ctx.metrics.step_taken((&step).into());
            let kind = match step {
                RollStep::StopOnKeyfileMismatch { .. } => EventType::Warning,
                _ => EventType::Normal,
            };
            ctx.events.publish(kind, (&step).into(), message).await;
        }
        Ok(None) => {}
        Err(error) => {
            let message = error_chain(&error);
            ctx.metrics.failed((&step).into());
            ctx.events
                .publish(EventType::Warning, (&step).into(), message)
                .await;
        }
    }
    Some(Rolled { step, requeue, fcv })
}

/// Carries out `step`; the message of its Event when it did something.
async fn carry_out(
    ctx: &PassContext,
    validated: &Validated,
    set: &ObservedSet,
    step: &RollStep,
) -> Result<Option<String>, RollError> {
    let Some(primary) = set.primary.as_ref() else {
        return Ok(None);
    };
    let gateway = &ctx.gateway;
    let credentials = &validated.root;
    let mongo = |source| RollError::Mongo {
        step: step.to_string(),
        source,
    };
    match step {
        RollStep::UpToDate | RollStep::Wait { .. } => Ok(None),
        RollStep::Acquire { lease } => {
            let taken = gateway
                .acquire_lease(primary, lease, credentials)
                .await
                .map_err(mongo)?;
            Ok(taken.then(|| format!("took the restart lease for {}", lease.member)))
        }
        RollStep::TakeOver { held, lease, why } => {
            let taken = gateway
                .take_over_lease(primary, held, lease, credentials)
                .await
                .map_err(mongo)?;
            Ok(taken.then(|| {
                format!(
                    "took the restart lease for {} over from {}: {why}",
                    lease.member, held.member
                )
            }))
        }
        RollStep::Renew { lease, .. } => {
            renew(ctx, validated, primary, lease).await.map_err(mongo)?;
            Ok(None)
        }
        RollStep::StepDown { lease, primary } => {
            if !renew(ctx, validated, primary, lease).await.map_err(mongo)? {
                return Ok(None);
            }
            let sent = gateway
                .step_down(
                    primary,
                    STEP_DOWN_SECS,
                    STEP_DOWN_CATCH_UP_SECS,
                    credentials,
                )
                .await;
            match sent {
                Ok(()) => Ok(Some(format!("stepped {primary} down before its restart"))),
                Err(error) if error.code() == Some(codes::EXCEEDED_TIME_LIMIT) => {
                    // mongod refused writes while it waited: asked again only
                    // after the membership path's back-off.
                    let refusals = ctx
                        .memory()
                        .held_step_down
                        .filter(|held| held.primary == *primary)
                        .map_or(0, |held| held.refusals);
                    let retry_in = step_down_backoff(refusals);
                    ctx.remember(|memory| {
                        memory.held_step_down = Some(HeldStepDown {
                            primary: primary.clone(),
                            refusals: refusals.saturating_add(1),
                            not_before: Instant::now() + retry_in,
                        })
                    });
                    let message = format!(
                        "primary {primary} could not step down before its restart: no electable \
                         secondary caught up within {STEP_DOWN_CATCH_UP_SECS} s; trying again in {} s",
                        retry_in.as_secs()
                    );
                    ctx.events
                        .publish(EventType::Warning, Notice::StepDownFailed.into(), message)
                        .await;
                    Ok(None)
                }
                Err(error) if error.code() == Some(codes::NOT_WRITABLE_PRIMARY) => Ok(None),
                Err(error) => Err(mongo(error)),
            }
        }
        RollStep::Restart {
            lease,
            slot,
            pod_uid,
            caveat,
        } => {
            if !renew(ctx, validated, primary, lease).await.map_err(mongo)? {
                return Ok(None);
            }
            // An arbiter is never primary (and answers only `hello`).
            if *caveat != Some(RestartCaveat::NoPossibleSuccessor) && *slot != MemberSlot::Arbiter {
                let state = gateway.member_state(&lease.member, credentials).await;
                if state.is_ok_and(|state| state == Some(MemberState::Primary)) {
                    tracing::info!(member = %lease.member, "the member is primary again; not restarted");
                    return Ok(None);
                }
            }
            // Another cluster's reconfig (a removal) may have landed since the
            // pass read the set: read it again, and restart only when its
            // config is the one planned with and a voting majority stays up.
            let fresh = gateway
                .observe_set(
                    std::slice::from_ref(primary),
                    &set.config.set_name,
                    credentials,
                )
                .await
                .map_err(mongo)?
                .set;
            if fresh.config.version != set.config.version {
                tracing::info!(member = %lease.member, "the config changed since the roll planned; re-planning");
                return Ok(None);
            }
            if let Err(reason) = majority_stays_up(&fresh, &lease.member) {
                tracing::info!(member = %lease.member, %reason, "not restarted");
                return Ok(None);
            }
            if let Some(caveat) = caveat {
                let message = format!("restarting {}: {caveat}", lease.member);
                ctx.events
                    .publish(EventType::Warning, caveat.into(), message)
                    .await;
            }
            let instance = &ctx.instance;
            let pod = format!("{}-0", names::slot(&instance.name, *slot));
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: Some(pod_uid.clone()),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            let deleted = Api::<Pod>::namespaced(ctx.client.clone(), &instance.namespace)
                .delete(&pod, &params)
                .await;
            match deleted {
                Ok(_) => Ok(Some(format!(
                    "restarting {slot} ({}): pod {pod} deleted, re-created on the new revision",
                    lease.member
                ))),
                // Gone or replaced since the pass read it: the next pass sees.
                Err(kube::Error::Api(response)) if matches!(response.code, 404 | 409) => Ok(None),
                Err(source) => Err(RollError::Kube {
                    step: step.to_string(),
                    source,
                }),
            }
        }
        RollStep::RaiseFeatureCompatibility { version } => {
            gateway
                .set_feature_compatibility_version(primary, version, credentials)
                .await
                .map_err(mongo)?;
            Ok(Some(format!(
                "raised the featureCompatibilityVersion to {version}"
            )))
        }
        RollStep::Release { lease } => {
            let released = gateway
                .release_lease(primary, lease, credentials)
                .await
                .map_err(mongo)?;
            Ok(released.then(|| format!("{} is back: released the restart lease", lease.member)))
        }
        RollStep::StopOnKeyfileMismatch { lease, reason } => {
            let released = gateway
                .release_lease(primary, lease, credentials)
                .await
                .map_err(mongo)?;
            Ok(released.then(|| format!("released the restart lease and stopped: {reason}")))
        }
    }
}

/// Renews `lease` (the same taking, a new expiry); `false` when it is not
/// this taking any more (taken over): nothing more may be done under it.
async fn renew(
    ctx: &PassContext,
    validated: &Validated,
    primary: &MemberAddress,
    lease: &Lease,
) -> Result<bool, MongoError> {
    let renewed = Lease {
        expires_at_millis: unix_millis() + LEASE_TTL_MILLIS,
        ..lease.clone()
    };
    let kept = ctx
        .gateway
        .renew_lease(primary, lease, &renewed, &validated.root)
        .await?;
    if !kept {
        tracing::warn!(member = %lease.member, "the restart lease was taken over; nothing done under it");
    }
    Ok(kept)
}

/// The server version of each local member that answered.
async fn local_versions(
    ctx: &PassContext,
    validated: &Validated,
    answers: &MongoAnswers,
) -> BTreeMap<MemberAddress, String> {
    let local = answers
        .probes
        .keys()
        .filter(|address| address.host == validated.vip);
    let asked = local.map(|address| async move {
        let credentials = (!answers.arbiters.contains(address)).then_some(&validated.root);
        let version = ctx.gateway.server_version(address, credentials).await;
        (address.clone(), version.ok())
    });
    join_all(asked)
        .await
        .into_iter()
        .filter_map(|(address, version)| Some((address, version?)))
        .collect()
}

fn unix_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
