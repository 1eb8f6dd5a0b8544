//! Stage `act` (MongoDB and Kubernetes I/O): carries out the one step the
//! planner returned — initiate, reconfig, step down, delete a departed member's
//! StatefulSet — and, once the set is in sync, keeps the operator's users.
//!
//! A reconfig is sent to the primary with the observed config version + 1; the
//! errors another cluster's concurrent change causes (10107, 109, 308) are
//! retried with exponential backoff and jitter (`backon`). mongod's 103 is a
//! refusal of the config itself, retried that way only when a re-read shows
//! the config moved meanwhile; otherwise it is reported (a Warning Event and
//! the refusal in status, naming mongod's rule) and tried again after
//! [`AFTER_REFUSAL`].

use std::time::{Duration, Instant};

use backon::{BackoffBuilder, ExponentialBuilder};
use kube::runtime::events::EventType;

use super::apply;
use super::context::{HeldStepDown, PassContext};
use super::events::Notice;
use super::observe::MongoAnswers;
use crate::api::MongoDB;
use crate::build::{self, names};
use crate::hostconf::MemberAddress;
use crate::mongo::{codes, MongoError, UserSpec};
use crate::observe::ObservedSet;
use crate::planner::{plan, Change, PlanInput, Refusal, Step};
use crate::validate::{RootCredentials, Validated};

/// How soon to look again after each kind of step.
const AFTER_CHANGE: Duration = Duration::from_secs(1);
const WHILE_WAITING: Duration = Duration::from_secs(3);
const AFTER_REFUSAL: Duration = Duration::from_secs(30);
const IN_SYNC: Duration = Duration::from_secs(30);
/// An initiate refused because the member cannot reach itself is tried again
/// this soon: the network may be fixed at any time.
const WHILE_SELF_UNREACHABLE: Duration = Duration::from_secs(5);

/// Why a step could not be carried out.
#[derive(Debug, thiserror::Error)]
pub enum ActError {
    /// mongod refused or did not answer.
    #[error("{step} failed: {source}")]
    Mongo {
        /// The step, as a person reads it.
        step: String,
        /// What mongod said.
        #[source]
        source: MongoError,
    },
    /// The API server refused a deletion.
    #[error("{step} failed: {source}")]
    Kube {
        /// The step, as a person reads it.
        step: String,
        /// What the API server said.
        #[source]
        source: kube::Error,
    },
    /// A reconfig was planned without an observed config and primary (a planner bug).
    #[error("a reconfig was planned without an observed config and primary")]
    NoObservedConfig,
}

/// What carrying out the step means for the next pass.
pub struct Acted {
    /// When to look again.
    pub requeue: Duration,
    /// When this pass's step-down was refused (held until its retry), the
    /// step the passes plan until then, which the status reports: what the
    /// removal waits for and how far behind the closest secondary is. No pass
    /// follows the status write to say it (a status write wakes none), and
    /// the retry may be minutes away.
    pub replanned: Option<Step>,
}

/// Carries out `step` (planned from `input`), publishes its Event and
/// remembers what the next passes need (a primary asked to step down,
/// conflicts in a row); once the set is in sync and this cluster stays in it,
/// keeps the operator's users. On failure a Warning Event names the step.
pub async fn act(
    ctx: &PassContext,
    mongodb: &MongoDB,
    validated: &Validated,
    answers: &MongoAnswers,
    input: &mut PlanInput,
    step: &Step,
    leaving: bool,
) -> Result<Acted, ActError> {
    let memory = ctx.memory();
    let attempt = memory.retries;
    let refusals = memory
        .held_step_down
        .filter(|r| matches!(step, Step::StepDown { primary, .. } if *primary == r.primary))
        .map_or(0, |r| r.refusals);
    let result = carry_out(ctx, validated, answers, step, attempt, refusals).await;
    let outcome = match result {
        Ok(outcome) => outcome,
        Err(error) => {
            ctx.events
                .publish(EventType::Warning, step.reason(), error.to_string())
                .await;
            return Err(error);
        }
    };
    if let Some((type_, reason, message)) = outcome.event {
        if matches!(type_, EventType::Normal) {
            ctx.metrics.step_taken(reason);
        }
        ctx.events.publish(type_, reason, message).await;
    }
    ctx.remember(|memory| {
        memory.retries = if outcome.retry {
            memory.retries.saturating_add(1)
        } else {
            0
        };
        if let Some(host) = &outcome.stepped_down {
            memory.stepped_down = Some((host.clone(), Instant::now()));
            memory.held_step_down = None;
        }
        if let Some((primary, retry_in)) = &outcome.step_down_refused {
            memory.held_step_down = Some(HeldStepDown {
                primary: primary.clone(),
                refusals: refusals.saturating_add(1),
                not_before: Instant::now() + *retry_in,
            });
        }
        if *step == Step::InSync {
            memory.held_step_down = None;
        }
    });
    if *step == Step::InSync && !leaving {
        ensure_users(ctx, mongodb, validated, answers).await;
    }
    let refused = outcome.refused.map(|reason| Step::Refuse { reason });
    Ok(Acted {
        requeue: outcome.requeue,
        replanned: refused.or_else(|| replanned_after_refusal(ctx, input)),
    })
}

/// The step planned again with the primary that refused to step down this
/// pass held (`input` then holds it too); `None` when no step-down was newly
/// refused.
fn replanned_after_refusal(ctx: &PassContext, input: &mut PlanInput) -> Option<Step> {
    let held = ctx.step_down_held();
    if held.is_none() || held == input.step_down_held {
        return None;
    }
    input.step_down_held = held;
    Some(plan(input))
}

/// What one step did.
struct Outcome {
    /// The Event to publish: type, reason, message.
    event: Option<(EventType, &'static str, String)>,
    requeue: Duration,
    stepped_down: Option<MemberAddress>,
    /// A primary that refused to step down, and how long it is left alone.
    step_down_refused: Option<(MemberAddress, Duration)>,
    /// The step could not be done for a passing reason (another cluster's
    /// reconfig, no caught-up secondary): retried with a growing delay.
    retry: bool,
    /// mongod refused the reconfig itself: what status reports this pass.
    refused: Option<Refusal>,
}

impl Outcome {
    fn after(requeue: Duration) -> Self {
        Outcome {
            event: None,
            requeue,
            stepped_down: None,
            step_down_refused: None,
            retry: false,
            refused: None,
        }
    }

    fn done(reason: &'static str, message: String) -> Self {
        Outcome {
            event: Some((EventType::Normal, reason, message)),
            ..Outcome::after(AFTER_CHANGE)
        }
    }
}

async fn carry_out(
    ctx: &PassContext,
    validated: &Validated,
    answers: &MongoAnswers,
    step: &Step,
    attempt: u32,
    refusals: u32,
) -> Result<Outcome, ActError> {
    let credentials = &validated.root;
    let mongo = |source| ActError::Mongo {
        step: step.to_string(),
        source,
    };
    match step {
        Step::Initiate { config, on } => {
            let hosts: Vec<String> = config.members.iter().map(|m| m.host.to_string()).collect();
            let sent = ctx.gateway.initiate(on, config, credentials).await;
            if let Err(error) = &sent {
                if error.code() == Some(codes::NODE_NOT_FOUND) {
                    // The member cannot reach its own VIP:NodePort: a refusal
                    // status keeps for as long as it lasts, not a failure.
                    let refusal = Refusal::MemberCannotReachItself {
                        on: on.clone(),
                        hosts: hosts.join(", "),
                        message: error.to_string(),
                    };
                    return Ok(Outcome {
                        event: Some((EventType::Warning, refusal.reason(), refusal.to_string())),
                        refused: Some(refusal),
                        ..Outcome::after(WHILE_SELF_UNREACHABLE)
                    });
                }
            }
            sent.map_err(mongo)?;
            let message = format!(
                "initiated replica set {} on {on} with {}",
                config.set_name,
                hosts.join(", ")
            );
            Ok(Outcome::done(step.reason(), message))
        }
        Step::Reconfig { config, change } => {
            let reading = answers.reading.as_ref().ok_or(ActError::NoObservedConfig)?;
            let primary = reading
                .set
                .primary
                .as_ref()
                .ok_or(ActError::NoObservedConfig)?;
            let document = &reading.config_document;
            let sent = ctx
                .gateway
                .reconfig(primary, document, config, credentials)
                .await;
            match sent {
                Ok(()) => {
                    let from = reading.set.config.version;
                    let message = format!("{change}: config version {from} → {}", config.version);
                    Ok(Outcome::done(step.reason(), message))
                }
                Err(error)
                    if error
                        .code()
                        .is_some_and(|c| codes::RETRYABLE_RECONFIG.contains(&c)) =>
                {
                    tracing::info!(%error, attempt, "reconfig conflicted with another change; retrying");
                    Ok(Outcome {
                        retry: true,
                        ..Outcome::after(conflict_backoff(attempt))
                    })
                }
                Err(MongoError::Command { code, message, .. })
                    if code == codes::NEW_CONFIG_INCOMPATIBLE =>
                {
                    let now = ctx.gateway.config_version(primary, credentials).await;
                    if now
                        .as_ref()
                        .map_or(true, |v| *v != reading.set.config.version)
                    {
                        tracing::info!(
                            ?now,
                            message,
                            attempt,
                            "reconfig refused after the config moved; retrying"
                        );
                        return Ok(Outcome {
                            retry: true,
                            ..Outcome::after(conflict_backoff(attempt))
                        });
                    }
                    let refusal = refusal_of(change, &message);
                    Ok(Outcome {
                        event: Some((
                            EventType::Warning,
                            refusal.reason(),
                            format!("refused: {refusal}"),
                        )),
                        refused: Some(refusal),
                        ..Outcome::after(AFTER_REFUSAL)
                    })
                }
                Err(error) => Err(mongo(error)),
            }
        }
        Step::SetClusterWriteConcern { primary, w } => {
            let found = ctx
                .gateway
                .set_default_write_concern(primary, *w, credentials)
                .await
                .map_err(mongo)?;
            if let Some(found) = found {
                tracing::info!(%primary, ?found, "a cluster-wide write concern is already set; kept");
                return Ok(Outcome::after(AFTER_CHANGE));
            }
            let message = format!(
                "the cluster-wide default write concern is now {w} (mongod's implicit default \
                 for the set hostconf lists), so no reconfig is refused for changing it"
            );
            Ok(Outcome::done(step.reason(), message))
        }
        Step::StepDown {
            primary,
            step_down_secs,
            secondary_catch_up_period_secs,
        } => {
            let step_down_secs = i64::from(*step_down_secs);
            let catch_up_secs = i64::from(*secondary_catch_up_period_secs);
            let sent = ctx
                .gateway
                .step_down(primary, step_down_secs, catch_up_secs, credentials)
                .await;
            match sent {
                Ok(()) => Ok(Outcome {
                    stepped_down: Some(primary.clone()),
                    ..Outcome::done(
                        step.reason(),
                        format!(
                            "asked primary {primary} to step down before it leaves the replica set"
                        ),
                    )
                }),
                Err(error) if error.code() == Some(codes::EXCEEDED_TIME_LIMIT) => {
                    // Each try refuses writes while mongod waits for a secondary
                    // to catch up: never retry at a fixed short pace.
                    let retry_in = step_down_backoff(refusals);
                    let set = answers.reading.as_ref().map(|reading| &reading.set);
                    let message =
                        step_down_refused(primary, set, *secondary_catch_up_period_secs, retry_in);
                    Ok(Outcome {
                        event: Some((EventType::Warning, Notice::StepDownFailed.into(), message)),
                        step_down_refused: Some((primary.clone(), retry_in)),
                        ..Outcome::after(retry_in)
                    })
                }
                // No longer primary since the plan was made: plan again.
                Err(error) if error.code() == Some(codes::NOT_WRITABLE_PRIMARY) => {
                    tracing::info!(%primary, "the planned primary is no longer primary; re-planning");
                    Ok(Outcome::after(AFTER_CHANGE))
                }
                Err(error) => Err(mongo(error)),
            }
        }
        Step::DeleteStatefulSet { slot, delete_pvc } => {
            let instance = &ctx.instance;
            let stateful_set = names::slot(&instance.name, *slot);
            apply::delete_member(&ctx.client, &instance.namespace, &stateful_set, *delete_pvc)
                .await
                .map_err(|source| ActError::Kube {
                    step: step.to_string(),
                    source,
                })?;
            let message = format!("{slot} left the replica set; {step}");
            Ok(Outcome::done(step.reason(), message))
        }
        Step::ResyncMember { slot, .. } => {
            let instance = &ctx.instance;
            let stateful_set = names::slot(&instance.name, *slot);
            apply::wipe_member_data(&ctx.client, &instance.namespace, &stateful_set)
                .await
                .map_err(|source| ActError::Kube {
                    step: step.to_string(),
                    source,
                })?;
            Ok(Outcome {
                event: Some((EventType::Warning, step.reason(), step.to_string())),
                ..Outcome::after(AFTER_CHANGE)
            })
        }
        Step::Wait { .. } => Ok(Outcome::after(WHILE_WAITING)),
        Step::Refuse { reason } => Ok(Outcome {
            event: Some((
                EventType::Warning,
                reason.reason(),
                format!("refused: {reason}"),
            )),
            ..Outcome::after(AFTER_REFUSAL)
        }),
        Step::InSync => Ok(Outcome::after(IN_SYNC)),
    }
}

/// The refusal a 103 on `change` stands for, by the rule mongod's message
/// names (`replication_coordinator_impl.cpp` `_doReplSetReconfig`,
/// `repl_set_config_checks.cpp` `validateOldAndNewConfigsCompatible`).
fn refusal_of(change: &Change, message: &str) -> Refusal {
    let change = change.to_string();
    if message.contains("implicit default write concern") {
        Refusal::ImplicitWriteConcernWouldChange { change }
    } else if message.contains("PSA topology") {
        Refusal::PsaSecondaryWouldBeElectable { change }
    } else {
        Refusal::ReconfigRefused {
            change,
            message: message.to_string(),
        }
    }
}

/// The delay before retry `attempt` (0-based) of a conflicting reconfig:
/// exponential from 500 ms to 30 s, with jitter.
pub fn conflict_backoff(attempt: u32) -> Duration {
    backoff(attempt, Duration::from_millis(500), Duration::from_secs(30))
}

/// The delay before retry `attempt` (0-based) of a step-down mongod refused
/// for want of a caught-up secondary: exponential from 5 s to 5 min, with
/// jitter.
pub fn step_down_backoff(attempt: u32) -> Duration {
    backoff(attempt, Duration::from_secs(5), Duration::from_secs(300))
}

fn backoff(attempt: u32, min: Duration, max: Duration) -> Duration {
    ExponentialBuilder::default()
        .with_min_delay(min)
        .with_max_delay(max)
        .with_jitter()
        .without_max_times()
        .build()
        .nth(attempt as usize)
        .unwrap_or(max)
}

/// What a refused step-down waits for: mongod's candidates to take over and
/// how far behind the primary each is, the closest first (the figure the
/// held step-down's condition names), and when it is tried again.
fn step_down_refused(
    primary: &MemberAddress,
    set: Option<&ObservedSet>,
    catch_up_secs: u32,
    retry_in: Duration,
) -> String {
    let lags: Vec<String> = set
        .map(|s| s.successor_lags(primary))
        .unwrap_or_default()
        .into_iter()
        .map(|(host, lag)| match lag {
            Some(lag) => format!("{host} {lag} s behind"),
            None => format!("{host} lag unknown"),
        })
        .collect();
    let secondaries = if lags.is_empty() {
        "no electable secondary".to_string()
    } else {
        lags.join(", ")
    };
    format!(
        "primary {primary} could not step down: no electable secondary caught up within \
         {catch_up_secs} s ({secondaries}); trying again in {} s",
        retry_in.as_secs()
    )
}

/// The users the operator keeps: clusterAdmin and clusterMonitor, and the
/// database user when `spec.dbUserSpec` enables one. Passwords are derived from
/// the root password unless the spec gives the database user's.
fn operator_users(mongodb: &MongoDB, root_password: &str) -> Vec<UserSpec> {
    let role = |role: &str, db: &str| (role.to_string(), db.to_string());
    let admin = build::secrets::ADMIN_USER;
    let monitor = build::secrets::MONITOR_USER;
    let mut users = vec![
        UserSpec {
            database: "admin".into(),
            name: admin.into(),
            password: build::derive_user_password(root_password, admin),
            roles: vec![role("clusterAdmin", "admin")],
        },
        UserSpec {
            database: "admin".into(),
            name: monitor.into(),
            password: build::derive_user_password(root_password, monitor),
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
    users
}

/// Creates or updates the operator's users once per change of their passwords
/// (idempotent, so a restart only repeats it once).
async fn ensure_users(
    ctx: &PassContext,
    mongodb: &MongoDB,
    validated: &Validated,
    answers: &MongoAnswers,
) {
    let Some(reading) = &answers.reading else {
        return;
    };
    let root = &validated.root;
    let users = operator_users(mongodb, &root.password);
    let identities: Vec<String> = users
        .iter()
        .map(|u| format!("{}/{}/{}", u.database, u.name, u.password))
        .collect();
    let fingerprint = build::fingerprint(&identities.join("\n"));
    if ctx.memory().users_fingerprint.as_deref() == Some(fingerprint.as_str()) {
        return;
    }
    let seeds: Vec<MemberAddress> = reading.set.members.keys().cloned().collect();
    let set_name = &mongodb.spec.repl_set_name;
    let ensured = ensure_each(ctx, &seeds, set_name, &users, root).await;
    let (type_, reason, message) = match &ensured {
        Ok(()) => {
            let names: Vec<&str> = users.iter().map(|u| u.name.as_str()).collect();
            let message = format!("users {} are in place", names.join(", "));
            (EventType::Normal, Notice::UsersReady, message)
        }
        Err(message) => (EventType::Warning, Notice::UserNotReady, message.clone()),
    };
    ctx.events.publish(type_, reason.into(), message).await;
    if ensured.is_ok() {
        ctx.remember(|m| m.users_fingerprint = Some(fingerprint));
    }
}

/// Ensures each user in turn; stops at the first failure, saying which user.
async fn ensure_each(
    ctx: &PassContext,
    seeds: &[MemberAddress],
    set_name: &str,
    users: &[UserSpec],
    root: &RootCredentials,
) -> Result<(), String> {
    for user in users {
        if let Err(error) = ctx.gateway.ensure_user(seeds, set_name, user, root).await {
            return Err(format!("user {} on {}: {error}", user.name, user.database));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::fixtures;
    use crate::replset::MemberState;

    #[test]
    fn a_refused_reconfig_names_mongods_rule() {
        let change = Change::UpdateSettings;
        let implicit = "Reconfig attempted to install a config that would change the implicit \
                        default write concern. Use the setDefaultRWConcern command to set a \
                        cluster-wide write concern and try the reconfig again.";
        assert_eq!(
            refusal_of(&change, implicit).reason(),
            "ImplicitWriteConcernWouldChange"
        );
        let psa = "Rejecting reconfig where the new config has a PSA topology and the secondary \
                   is electable, but the old config contains only one writable node.";
        assert_eq!(
            refusal_of(&change, psa).reason(),
            "PsaSecondaryWouldBeElectable"
        );
        assert_eq!(refusal_of(&change, "other").reason(), "ReconfigRefused");
    }

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

    #[test]
    fn a_refused_step_down_backs_off_to_minutes_and_says_what_it_waits_for() {
        let first = step_down_backoff(0);
        assert!(
            first >= Duration::from_secs(5) && first <= Duration::from_secs(20),
            "{first:?}"
        );
        assert!(step_down_backoff(6) > first);
        assert!(step_down_backoff(100) <= Duration::from_secs(600), "capped");

        let host = |port| MemberAddress {
            host: "10.0.0.1".into(),
            port,
        };
        let member = |id, port| crate::replset::ConfigMember {
            id,
            host: host(port),
            arbiter_only: false,
            votes: 1,
            priority: 1.0,
            hidden: false,
            tags: Default::default(),
            newly_added: false,
        };
        let status = |state, lag| crate::replset::MemberStatus {
            id: 0,
            healthy: true,
            state,
            sync_source: String::new(),
            lag_secs: lag,
            config_version: None,
            authentication_refused: false,
        };
        let set = ObservedSet {
            config: crate::replset::ReplicaSetConfig {
                set_name: "replset-0".into(),
                version: 3,
                term: None,
                members: vec![
                    member(0, 30001),
                    member(1, 30002),
                    member(2, 30003),
                    member(3, 30004),
                ],
                settings: crate::replset::ConfigSettings::from_desired(&Default::default(), None),
            },
            primary: Some(host(30001)),
            members: [
                (host(30001), status(MemberState::Primary, Some(0))),
                (host(30002), status(MemberState::Secondary, Some(42))),
                // No candidate of mongod's, however close: not named.
                (host(30003), status(MemberState::Recovering, Some(2))),
                (
                    host(30004),
                    crate::replset::MemberStatus {
                        healthy: false,
                        ..status(MemberState::Secondary, Some(3))
                    },
                ),
            ]
            .into_iter()
            .collect(),
            config_committed: true,
            write_concern: Default::default(),
        };
        let message = step_down_refused(&host(30001), Some(&set), 10, Duration::from_secs(40));
        assert!(
            message.contains("(10.0.0.1:30002 42 s behind)"),
            "the lag the held step-down names, and only it: {message}"
        );
        assert!(
            message.contains("within 10 s") && message.contains("again in 40 s"),
            "{message}"
        );
    }

    #[test]
    fn the_operator_keeps_its_two_users_and_the_enabled_database_user() {
        let mut mongodb = fixtures::mongodb();
        let names = |users: Vec<UserSpec>| {
            users
                .into_iter()
                .map(|u| format!("{}@{}", u.name, u.database))
                .collect::<Vec<_>>()
        };
        let two = names(operator_users(&mongodb, "root-pw"));
        assert_eq!(
            two,
            vec![
                format!("{}@admin", build::secrets::ADMIN_USER),
                format!("{}@admin", build::secrets::MONITOR_USER)
            ]
        );
        mongodb.spec.db_user_spec.enable = true;
        mongodb.spec.db_user_spec.name = "app".into();
        mongodb.spec.db_user_spec.user = "writer".into();
        let users = operator_users(&mongodb, "root-pw");
        assert_eq!(users[2].name, "writer");
        assert_eq!(
            users[2].roles,
            vec![("readWrite".to_string(), "app".to_string())]
        );
        assert_eq!(
            users[2].password,
            build::derive_user_password("root-pw", "writer"),
            "derived without a spec password"
        );
        mongodb.spec.db_user_spec.password = Some("given".into());
        assert_eq!(operator_users(&mongodb, "root-pw")[2].password, "given");
    }
}
