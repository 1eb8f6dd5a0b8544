//! Stages `observe` and `act` (MongoDB I/O): gather the facts the planner needs
//! from the members themselves, and carry out the one step it returns.
//!
//! Every member listed in hostconf, and every local member with a known address,
//! is asked directly what it holds; the set is then read through the seed list.
//! A reconfig is sent to the primary with the observed config version + 1; the
//! errors another cluster's concurrent change causes (10107, 103, 109, 308) are
//! retried with exponential backoff and jitter (`backon`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use futures::future::join_all;
use kube::runtime::events::EventType;

use super::dereference::Dereferenced;
use crate::api::MongoDB;
use crate::hostconf::MemberAddress;
use crate::mongo::{codes, MemberAnswer, MongoError, MongoGateway, SetObservation};
use crate::planner::{
    LocalMemberFacts, MemberHealth, MemberProbe, MemberSlot, Observed, ObservedSet, PlanInput, Step,
};

/// What the planner and the status are computed from.
pub struct Observation {
    /// The planner's input.
    pub plan_input: PlanInput,
    /// The replica set as read through the seed list, when it could be.
    pub set: Option<SetObservation>,
}

/// What this cluster wants: `spec.members` and `spec.arbiter`, or nothing when
/// the object is being deleted.
#[derive(Clone, Copy, Debug)]
pub struct Wanted {
    /// Data members wanted here.
    pub members: u32,
    /// Whether the arbiter is wanted here.
    pub arbiter: bool,
}

/// Asks the members what they hold and reads the set.
///
/// Local members are asked when their pod runs (a member that cannot answer
/// would only cost a connection timeout). Members of other clusters are asked
/// only while there is no evidence of a set yet — no recorded `replicaSetId`
/// and no local member with a config — because only the initiate decision and
/// finding an existing set need them.
pub async fn observe(
    gateway: &MongoGateway,
    mongodb: &MongoDB,
    refs: &Dereferenced,
    wanted: Wanted,
    stepped_down_recently: Option<MemberAddress>,
) -> Observation {
    let credentials = &refs.credentials.root;
    let mut slots: BTreeSet<MemberSlot> = (0..wanted.members).map(MemberSlot::Data).collect();
    if wanted.arbiter {
        slots.insert(MemberSlot::Arbiter);
    }
    slots.extend(refs.stateful_sets.keys().copied());
    slots.extend(refs.services.keys().copied());

    let local_addresses: Vec<(MemberSlot, Option<MemberAddress>)> = slots
        .iter()
        .map(|slot| (*slot, refs.address(*slot)))
        .collect();
    let running_locals: BTreeSet<MemberAddress> = local_addresses
        .iter()
        .filter(|(slot, _)| refs.stateful_sets.get(slot).is_some_and(|s| s.pod_running))
        .filter_map(|(_, address)| address.clone())
        .collect();
    let mut answers = ask(gateway, running_locals.iter().cloned(), credentials).await;
    let known_replica_set_id = mongodb
        .status
        .as_ref()
        .and_then(|s| s.replica_set_id.clone());
    if known_replica_set_id.is_none() && !answers.values().any(|a| a.config.is_some() || a.removed)
    {
        let remote = refs
            .hostconf
            .members
            .iter()
            .map(|m| m.address.clone())
            .filter(|a| !running_locals.contains(a) && a.host != refs.vip);
        answers.extend(ask(gateway, remote, credentials).await);
    }

    let probes: BTreeMap<MemberAddress, MemberProbe> = answers
        .iter()
        .map(|(address, answer)| (address.clone(), probe_of(answer)))
        .collect();
    let local_members: Vec<LocalMemberFacts> = local_addresses
        .iter()
        .map(|(slot, address)| LocalMemberFacts {
            slot: *slot,
            address: address.clone(),
            stateful_set_exists: refs.stateful_sets.contains_key(slot),
            pod_running: refs.stateful_sets.get(slot).is_some_and(|s| s.pod_running),
            probe: address.as_ref().and_then(|a| probes.get(a).cloned()),
        })
        .collect();
    let local_hosts: BTreeSet<&MemberAddress> = local_addresses
        .iter()
        .filter_map(|(_, a)| a.as_ref())
        .collect();
    let remote_probes = probes
        .iter()
        .filter(|(address, _)| !local_hosts.contains(address) && address.host != refs.vip)
        .map(|(a, p)| (a.clone(), p.clone()))
        .collect();

    let someone_has_config =
        probes.values().any(|p| p.has_config) || known_replica_set_id.is_some();
    let set_name = &mongodb.spec.repl_set_name;
    let set = if someone_has_config {
        let mut seeds: BTreeSet<MemberAddress> = answers
            .iter()
            .filter(|(_, a)| a.config.is_some())
            .map(|(address, _)| address.clone())
            .collect();
        seeds.extend(refs.hostconf.members.iter().map(|m| m.address.clone()));
        let seeds: Vec<MemberAddress> = seeds.into_iter().collect();
        match gateway.observe_set(&seeds, set_name, credentials).await {
            Ok(set) => Some(set),
            Err(error) => {
                tracing::info!(%error, "the replica set could not be read");
                None
            }
        }
    } else {
        None
    };
    let observed = match &set {
        Some(set) => Observed::Configured(ObservedSet {
            config: set.config.clone(),
            primary: set.primary.clone(),
            member_health: set
                .members
                .iter()
                .map(|(host, m)| {
                    (
                        host.clone(),
                        MemberHealth {
                            state: m.state,
                            healthy: m.healthy,
                            lag_secs: m.lag_secs,
                        },
                    )
                })
                .collect(),
            config_committed: set.config_committed,
            stepped_down_recently,
        }),
        None => Observed::Unreachable,
    };
    let plan_input = PlanInput {
        local_vip: refs.vip.clone(),
        set_name: set_name.clone(),
        desired_members: wanted.members,
        arbiter_wanted: wanted.arbiter,
        rs_init: mongodb.spec.rs_init,
        settings: mongodb.spec.replica_set_settings.clone(),
        pvc_policy: mongodb.spec.removed_member_pvc_policy,
        known_replica_set_id,
        hostconf: refs.hostconf.clone(),
        local_members,
        remote_probes,
        observed,
    };
    Observation { plan_input, set }
}

/// Asks each of `members` directly, at once; those that do not answer are left out.
async fn ask(
    gateway: &MongoGateway,
    members: impl Iterator<Item = MemberAddress>,
    credentials: &crate::mongo::RootCredentials,
) -> BTreeMap<MemberAddress, MemberAnswer> {
    join_all(members.map(|address| async move {
        let answer = gateway.ask_member(&address, credentials).await;
        (address, answer)
    }))
    .await
    .into_iter()
    .filter_map(|(address, answer)| match answer {
        Ok(answer) => Some((address, answer)),
        Err(error) => {
            tracing::debug!(member = %address, %error, "member did not answer");
            None
        }
    })
    .collect()
}

fn probe_of(answer: &MemberAnswer) -> MemberProbe {
    MemberProbe {
        has_config: answer.config.is_some() || answer.removed,
        replica_set_id: answer
            .config
            .as_ref()
            .and_then(|c| c.settings.replica_set_id.clone()),
        set_name: answer
            .config
            .as_ref()
            .map(|c| c.set_name.clone())
            .or_else(|| answer.set_name.clone()),
        state: answer.state,
    }
}

/// What carrying out a step did, for Events and the next pass.
pub struct Outcome {
    /// The Event to publish, if the step deserves one.
    pub event: Option<Note>,
    /// When to look again.
    pub requeue: Duration,
    /// A primary this pass asked to step down.
    pub stepped_down: Option<MemberAddress>,
    /// The step was a retryable conflict with another cluster's change.
    pub conflict: bool,
}

/// An Event to publish.
#[derive(Clone, Debug)]
pub struct Note {
    /// Normal or Warning.
    pub type_: EventType,
    /// PascalCase reason.
    pub reason: &'static str,
    /// What happened, for a person.
    pub message: String,
}

/// How soon to look again after each kind of step.
const AFTER_CHANGE: Duration = Duration::from_secs(1);
const WHILE_WAITING: Duration = Duration::from_secs(3);
const AFTER_REFUSAL: Duration = Duration::from_secs(30);
const IN_SYNC: Duration = Duration::from_secs(30);

/// The delay before retry `attempt` (0-based) of a conflicting reconfig:
/// exponential from 500 ms to 30 s, with jitter.
pub fn conflict_backoff(attempt: u32) -> Duration {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(500))
        .with_max_delay(Duration::from_secs(30))
        .with_jitter()
        .without_max_times()
        .build()
        .nth(attempt as usize)
        .unwrap_or(Duration::from_secs(30))
}

/// Carries out `step`. Kubernetes deletions go through `delete_member`.
pub async fn act<F, Fut>(
    gateway: &MongoGateway,
    mongodb: &MongoDB,
    refs: &Dereferenced,
    observation: &Observation,
    step: &Step,
    attempt: u32,
    delete_member: F,
) -> Result<Outcome, ActError>
where
    F: FnOnce(MemberSlot, bool) -> Fut,
    Fut: std::future::Future<Output = Result<(), kube::Error>>,
{
    let credentials = &refs.credentials.root;
    let set_name = &mongodb.spec.repl_set_name;
    let seeds = seeds(observation);
    let done = |reason, message: String| Outcome {
        event: Some(Note {
            type_: EventType::Normal,
            reason,
            message,
        }),
        requeue: AFTER_CHANGE,
        stepped_down: None,
        conflict: false,
    };
    match step {
        Step::Initiate { config } => {
            let local = config
                .members
                .iter()
                .map(|m| &m.host)
                .find(|host| host.host == refs.vip)
                .ok_or(ActError::NoLocalMemberToInitiate)?;
            gateway.initiate(local, config, credentials).await?;
            let hosts: Vec<String> = config.members.iter().map(|m| m.host.to_string()).collect();
            Ok(done(
                "Initiate",
                format!(
                    "initiated replica set {} on {local} with {}",
                    config.set_name,
                    hosts.join(", ")
                ),
            ))
        }
        Step::Reconfig { config, change } => {
            let Some(set) = &observation.set else {
                return Err(ActError::NoObservedConfig);
            };
            match gateway
                .reconfig(&seeds, set_name, &set.config_document, config, credentials)
                .await
            {
                Ok(()) => Ok(done(
                    step.reason(),
                    format!(
                        "{change}: config version {} → {}",
                        set.config.version, config.version
                    ),
                )),
                Err(error)
                    if error
                        .code()
                        .is_some_and(|code| codes::RETRYABLE_RECONFIG.contains(&code)) =>
                {
                    tracing::info!(%error, attempt, "reconfig conflicted with another change; retrying");
                    Ok(Outcome {
                        event: None,
                        requeue: conflict_backoff(attempt),
                        stepped_down: None,
                        conflict: true,
                    })
                }
                Err(error) => Err(error.into()),
            }
        }
        Step::StepDown {
            primary,
            step_down_secs,
            secondary_catch_up_period_secs,
        } => {
            match gateway.step_down(&seeds, set_name, i64::from(*step_down_secs), i64::from(*secondary_catch_up_period_secs), credentials).await {
                Ok(()) => Ok(Outcome {
                    event: Some(Note { type_: EventType::Normal, reason: "StepDown", message: format!("asked primary {primary} to step down before it leaves the replica set") }),
                    requeue: AFTER_CHANGE,
                    stepped_down: Some(primary.clone()),
                    conflict: false,
                }),
                Err(error) if error.code() == Some(codes::EXCEEDED_TIME_LIMIT) => Ok(Outcome {
                    event: Some(Note { type_: EventType::Warning, reason: "StepDownFailed", message: format!("primary {primary} could not step down: no electable secondary caught up in time ({error})") }),
                    requeue: WHILE_WAITING,
                    stepped_down: None,
                    conflict: false,
                }),
                Err(error) => Err(error.into()),
            }
        }
        Step::DeleteStatefulSet { slot, delete_pvc } => {
            delete_member(*slot, *delete_pvc).await?;
            Ok(done(
                "DeleteStatefulSet",
                format!("{slot} left the replica set; {step}"),
            ))
        }
        Step::Wait { .. } => Ok(Outcome {
            event: None,
            requeue: WHILE_WAITING,
            stepped_down: None,
            conflict: false,
        }),
        Step::Refuse { reason } => Ok(Outcome {
            event: Some(Note {
                type_: EventType::Warning,
                reason: reason.reason(),
                message: format!("refused: {reason}"),
            }),
            requeue: AFTER_REFUSAL,
            stepped_down: None,
            conflict: false,
        }),
        Step::InSync => Ok(Outcome {
            event: None,
            requeue: IN_SYNC,
            stepped_down: None,
            conflict: false,
        }),
    }
}

/// The members to reach the set through: those that answered with a config, else hostconf.
fn seeds(observation: &Observation) -> Vec<MemberAddress> {
    match &observation.set {
        Some(set) if !set.members.is_empty() => set.members.keys().cloned().collect(),
        _ => observation
            .plan_input
            .hostconf
            .members
            .iter()
            .map(|m| m.address.clone())
            .collect(),
    }
}

/// Why a step could not be carried out.
#[derive(Debug, thiserror::Error)]
pub enum ActError {
    /// mongod refused or did not answer.
    #[error(transparent)]
    Mongo(#[from] MongoError),
    /// The API server refused a deletion.
    #[error("deleting a member's StatefulSet: {0}")]
    Kube(#[from] kube::Error),
    /// The initiate config lists no member of this cluster (a planner bug).
    #[error("the initiate config lists no member of this cluster")]
    NoLocalMemberToInitiate,
    /// A reconfig was planned without an observed config (a planner bug).
    #[error("a reconfig was planned without an observed config")]
    NoObservedConfig,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflict_backoff_grows_and_stays_bounded() {
        let first = conflict_backoff(0);
        let later = conflict_backoff(8);
        assert!(
            first >= Duration::from_millis(500) && first <= Duration::from_secs(2),
            "{first:?}"
        );
        assert!(later > first, "{later:?} after {first:?}");
        assert!(conflict_backoff(100) <= Duration::from_secs(60));
    }
}
