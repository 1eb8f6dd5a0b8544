//! Stage `observe` (MongoDB I/O): asks the members what they hold and reads the
//! replica set through its seeds. Which members to ask and which seeds to use
//! are decided by the pure [`crate::observe`]; nothing here decides.

use std::collections::{BTreeMap, BTreeSet};

use futures::future::join_all;

use crate::api::{MongoDB, TlsMode};
use crate::build::BuildContext;
use crate::hostconf::MemberAddress;
use crate::member::Wanted;
use crate::mongo::{codes, MongoGateway, SetReading};
use crate::observe::{
    known_replica_set_id, local_members_to_ask, remote_members_to_ask, seeds, DroppedMembers,
    MemberProbe, MemberToAsk,
};
use crate::validate::{InvalidInput, RootCredentials, Validated};

/// What the members answered this pass.
pub struct MongoAnswers {
    /// What each member asked directly answered (absent: it did not answer).
    pub probes: BTreeMap<MemberAddress, MemberProbe>,
    /// The members asked as arbiters, without credentials.
    pub arbiters: BTreeSet<MemberAddress>,
    /// The replica set as read through the seeds, when it could be.
    pub reading: Option<SetReading>,
    /// When members refused the root user and none answered with it: the
    /// credentials are wrong, not the members unreachable.
    pub credentials_refused: Option<InvalidInput>,
    /// With `spec.tls`, the mode each local data member that answered runs.
    pub tls_modes: BTreeMap<MemberAddress, TlsMode>,
}

/// Asks the local members (and, while no set is known, the other clusters'),
/// then reads the set when anything says it exists. Never fails: a member that
/// does not answer is one the planner waits for.
pub async fn observe(
    gateway: &MongoGateway,
    mongodb: &MongoDB,
    validated: &Validated,
    wanted: Wanted,
) -> MongoAnswers {
    let credentials = &validated.root;
    let known_id = known_replica_set_id(mongodb);
    let local = local_members_to_ask(validated, wanted);
    let mut arbiters: BTreeSet<MemberAddress> = arbiters_of(&local);
    let (mut probes, mut refused_credentials) = ask(gateway, local, credentials).await;
    let tls_modes = match mongodb.spec.tls {
        Some(_) => tls_modes(gateway, &probes, &arbiters, credentials).await,
        None => BTreeMap::new(),
    };
    let remote = remote_members_to_ask(validated, known_id, &probes);
    arbiters.extend(arbiters_of(&remote));
    let (remote_probes, remote_refused) = ask(gateway, remote, credentials).await;
    probes.extend(remote_probes);
    refused_credentials.extend(remote_refused);
    let reading = match seeds(validated, known_id, &probes) {
        Some(seeds) => {
            let set_name = &mongodb.spec.repl_set_name;
            match gateway.observe_set(&seeds, set_name, credentials).await {
                Ok(reading) => Some(reading),
                Err(error) => {
                    tracing::info!(%error, "the replica set could not be read");
                    None
                }
            }
        }
        None => None,
    };
    if reading.is_none() && gateway.forget_answers_from_memory() {
        // A member answered from memory, without the credentials: asked
        // again, so that credentials the set now refuses show as such.
        return Box::pin(observe(gateway, mongodb, validated, wanted)).await;
    }
    let answered_with_credentials = probes.keys().any(|address| !arbiters.contains(address));
    let credentials_refused = credentials_refused(
        mongodb,
        &refused_credentials,
        answered_with_credentials,
        &reading,
    );
    MongoAnswers {
        probes,
        arbiters,
        reading,
        credentials_refused,
        tls_modes,
    }
}

/// The TLS mode each of the data members among `probes` runs, for those
/// that say.
async fn tls_modes(
    gateway: &MongoGateway,
    probes: &BTreeMap<MemberAddress, MemberProbe>,
    arbiters: &BTreeSet<MemberAddress>,
    credentials: &RootCredentials,
) -> BTreeMap<MemberAddress, TlsMode> {
    let questions = probes
        .keys()
        .filter(|address| !arbiters.contains(*address))
        .map(|address| async move { (address, gateway.tls_mode(address, credentials).await) });
    join_all(questions)
        .await
        .into_iter()
        .filter_map(|(address, mode)| Some((address.clone(), mode.ok()?)))
        .collect()
}

/// The addresses of the arbiters among `members`.
fn arbiters_of<'a>(members: impl IntoIterator<Item = &'a MemberToAsk>) -> BTreeSet<MemberAddress> {
    members
        .into_iter()
        .filter(|member| member.arbiter)
        .map(|member| member.address.clone())
        .collect()
}

/// `refused` as the credentials refused, when no member answered with them
/// (an arbiter is asked without) and the set could not be read either.
fn credentials_refused(
    mongodb: &MongoDB,
    refused: &[MemberAddress],
    answered_with_credentials: bool,
    reading: &Option<SetReading>,
) -> Option<InvalidInput> {
    if refused.is_empty() || answered_with_credentials || reading.is_some() {
        return None;
    }
    let secret = BuildContext::from_mongodb(mongodb)
        .ok()?
        .credentials()
        .secret_name()
        .to_string();
    Some(InvalidInput::CredentialsRefused {
        secret,
        members: refused.iter().map(ToString::to_string).collect(),
    })
}

/// Asks each of `members` directly, at once (an arbiter without
/// credentials); those that do not answer are left out, and those that
/// refuse the credentials listed apart.
async fn ask(
    gateway: &MongoGateway,
    members: impl IntoIterator<Item = MemberToAsk>,
    credentials: &RootCredentials,
) -> (BTreeMap<MemberAddress, MemberProbe>, Vec<MemberAddress>) {
    let questions = members.into_iter().map(|member| async move {
        let answer = if member.arbiter {
            gateway.ask_arbiter(&member.address).await
        } else {
            gateway.ask_member(&member.address, credentials).await
        };
        (member.address, answer)
    });
    let mut probes = BTreeMap::new();
    let mut refused = Vec::new();
    for (address, answer) in join_all(questions).await {
        match answer {
            Ok(probe) => {
                probes.insert(address, probe);
            }
            Err(error) => {
                tracing::debug!(member = %address, %error, "member did not answer");
                if error.code() == Some(codes::AUTHENTICATION_FAILED) {
                    refused.push(address);
                }
            }
        }
    }
    (probes, refused)
}

/// The members disaster recoveries dropped, as recorded in the set and read
/// from its primary; asked only when the planner needs them
/// ([`crate::planner::PlanInput::needs_dropped_members`]).
pub async fn dropped_members(
    gateway: &MongoGateway,
    reading: Option<&SetReading>,
    credentials: &RootCredentials,
) -> DroppedMembers {
    let Some(primary) = reading.and_then(|r| r.set.primary.as_ref()) else {
        return DroppedMembers::Unreadable;
    };
    match gateway.dropped_members(primary, credentials).await {
        Ok(dropped) => DroppedMembers::Read(dropped),
        Err(error) => {
            tracing::info!(%error, "the recovery records could not be read");
            DroppedMembers::Unreadable
        }
    }
}
