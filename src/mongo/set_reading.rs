//! Reading the replica set: its status, its config with the commitment
//! status, its `newlyAdded` members and default write concern, on the
//! primary the members named or through the seed list.

use std::collections::BTreeMap;

use mongodb::bson::{doc, Bson, Document};
use mongodb::options::{ReadPreference, SelectionCriteria};

use super::config_doc::{self, config_from_document, integer, mark_newly_added};
use super::{seed_text, GatewayClient, MongoError, MongoGateway, SetReading};
use crate::hostconf::MemberAddress;
use crate::observe::ObservedSet;
use crate::replset::{ClusterWriteConcern, MemberState, MemberStatus, ReplicaSetConfig};
use crate::validate::RootCredentials;

impl MongoGateway {
    /// Observes the replica set: `replSetGetStatus`, and the config with its
    /// commitment status from the primary (without a primary, the config from
    /// any member, reported as not committed).
    ///
    /// Read directly on the primary this pass's members named in their
    /// `hello` when it confirms it (`read_set_on`): one client the
    /// roll's questions share, instead of a seed-list client whose monitors
    /// connect to every member. Otherwise through the seed list, where the
    /// driver finds the primary among every member.
    pub async fn observe_set(
        &self,
        seeds: &[MemberAddress],
        set_name: &str,
        credentials: &RootCredentials,
    ) -> Result<SetReading, MongoError> {
        let named = self
            .pass
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .primary
            .clone();
        if let Some((primary, _)) = named {
            match self.read_set_on(&primary, set_name, credentials).await {
                Ok(Some(reading)) => return Ok(reading),
                Ok(None) => {}
                Err(error) => tracing::debug!(%primary, %error, "the named primary was not read"),
            }
        }
        let target = seed_text(seeds);
        let client = self.client(seeds, false, Some(set_name), credentials)?;
        let primary_preferred =
            SelectionCriteria::ReadPreference(ReadPreference::PrimaryPreferred { options: None });
        let status = Self::run(
            &client,
            doc! {"replSetGetStatus": 1},
            Some(primary_preferred),
            &target,
        )
        .await?;
        Self::read_set(&client, status, &target, None).await
    }

    /// The set as `primary`, asked directly, shows it, when it confirms
    /// what a seed-list client would find: it is in `set_name`, PRIMARY in
    /// its own status, and sees a voting majority of its config healthy.
    /// A primary cut off from the majority steps down once it has not
    /// heard from it for an election timeout
    /// (`TopologyCoordinator::checkShouldStandForElection` / liveness
    /// check), and one elected since would have made it step down at the
    /// first heartbeat carrying the higher term; either way, any step
    /// planned on a stale reading is refused by mongod itself (10107, 308),
    /// as it would be through the seed list. `None`: not confirmed.
    async fn read_set_on(
        &self,
        primary: &MemberAddress,
        set_name: &str,
        credentials: &RootCredentials,
    ) -> Result<Option<SetReading>, MongoError> {
        let target = primary.to_string();
        let client = self.client(std::slice::from_ref(primary), true, None, credentials)?;
        let hello = Self::hello(&client, &target).await?;
        let status = Self::ask(&client, doc! {"replSetGetStatus": 1}, &target).await?;
        let confirmed = status.get_str("set") == Ok(set_name)
            && integer(status.get("myState")) == Some(1)
            && members_from_status(&status).0.as_ref() == Some(primary);
        if !confirmed {
            return Ok(None);
        }
        let committed = self.seen.committed_config(primary, &hello, &status);
        let reading = Self::read_set(&client, status, &target, committed).await?;
        if reading.set.config_committed {
            self.seen
                .remember_committed(primary, &hello, &reading.config_document);
        }
        let set = &reading.set;
        let healthy = set
            .config
            .voters()
            .filter(|m| {
                set.members
                    .get(&m.host)
                    .is_some_and(MemberStatus::counts_towards_majority)
            })
            .count();
        Ok((healthy >= set.config.majority()).then_some(reading))
    }

    /// The rest of a reading, `status` being the `replSetGetStatus` read
    /// through `client`: the config from the primary with its commitment
    /// status (`committed`: a config known to be committed still, not asked
    /// again), `newlyAdded` members, the default write concern.
    async fn read_set(
        client: &GatewayClient,
        status: Document,
        target: &str,
        committed: Option<Document>,
    ) -> Result<SetReading, MongoError> {
        let primary_preferred =
            SelectionCriteria::ReadPreference(ReadPreference::PrimaryPreferred { options: None });
        let (primary, members) = members_from_status(&status);
        let (reply, config_committed) = match (&primary, committed) {
            (Some(_), Some(config)) => (doc! {"config": config}, true),
            (Some(_), None) => {
                let on_primary = SelectionCriteria::ReadPreference(ReadPreference::Primary);
                let reply = Self::run(
                    client,
                    doc! {"replSetGetConfig": 1, "commitmentStatus": true},
                    Some(on_primary),
                    target,
                )
                .await?;
                let committed = reply.get_bool("commitmentStatus").unwrap_or(false);
                (reply, committed)
            }
            (None, _) => (
                Self::run(
                    client,
                    doc! {"replSetGetConfig": 1},
                    Some(primary_preferred.clone()),
                    target,
                )
                .await?,
                false,
            ),
        };
        let config_document = reply
            .get_document("config")
            .map_err(|_| MongoError::Protocol("replSetGetConfig without config".into()))?
            .clone();
        let mut config = config_from_document(&config_document)
            .map_err(|e| MongoError::Protocol(e.to_string()))?;
        let voting_members_count = integer(status.get("votingMembersCount"));
        if voting_members_count.is_some_and(|c| (c as usize) < config.voting_member_count()) {
            let passives = Self::passives(client, &config, target).await;
            mark_newly_added(&mut config, voting_members_count, &members, &passives);
        }
        let write_concern = Self::run(
            client,
            doc! {"getDefaultRWConcern": 1},
            Some(primary_preferred),
            target,
        )
        .await
        .map_or(ClusterWriteConcern::Unknown, |reply| {
            config_doc::cluster_write_concern(&reply)
        });
        Ok(SetReading {
            set: ObservedSet {
                config,
                primary,
                members,
                config_committed,
                write_concern,
            },
            config_document,
        })
    }

    /// The `passives` a member's `hello` lists, when it answers with the
    /// config version `config` has (a member that installed another config
    /// could list others).
    async fn passives(
        client: &GatewayClient,
        config: &ReplicaSetConfig,
        target: &str,
    ) -> Vec<MemberAddress> {
        let criteria =
            SelectionCriteria::ReadPreference(ReadPreference::PrimaryPreferred { options: None });
        let Ok(hello) = Self::run(client, doc! {"hello": 1}, Some(criteria), target).await else {
            return Vec::new();
        };
        if integer(hello.get("setVersion")) != Some(config.version) {
            return Vec::new();
        }
        hello
            .get_array("passives")
            .map(|passives| {
                passives
                    .iter()
                    .filter_map(Bson::as_str)
                    .filter_map(|host| MemberAddress::parse(host).ok())
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// The primary and members of a `replSetGetStatus` reply. Of several members
/// shown PRIMARY (a stale one not yet stepped down), the primary is the one
/// whose last optime is of the highest term. A member mongod cannot reach is
/// shown with optimeDate 1970-01-01: it has no lag.
pub(super) fn members_from_status(
    status: &Document,
) -> (Option<MemberAddress>, BTreeMap<MemberAddress, MemberStatus>) {
    let entries: Vec<&Document> = status
        .get_array("members")
        .map(|m| m.iter().filter_map(Bson::as_document).collect())
        .unwrap_or_default();
    let optime_secs = |member: &Document| {
        member
            .get_datetime("optimeDate")
            .ok()
            .map(|d| d.timestamp_millis() / 1000)
            .filter(|secs| *secs > 0)
    };
    let optime_order = |member: &Document| {
        let optime = member.get_document("optime").ok();
        let term = optime.and_then(|o| integer(o.get("t"))).unwrap_or(-1);
        let ts = optime.and_then(|o| o.get_timestamp("ts").ok());
        (term, ts.map(|ts| (ts.time, ts.increment)))
    };
    let primary_entry = entries
        .iter()
        .filter(|m| integer(m.get("state")) == Some(1))
        .max_by_key(|m| optime_order(m));
    let primary = primary_entry.and_then(|m| MemberAddress::parse(m.get_str("name").ok()?).ok());
    let primary_optime = primary_entry.and_then(|m| optime_secs(m));
    let mut members = BTreeMap::new();
    for entry in entries {
        let Some(host) = entry
            .get_str("name")
            .ok()
            .and_then(|name| MemberAddress::parse(name).ok())
        else {
            continue;
        };
        let state = MemberState::from_code(integer(entry.get("state")).unwrap_or(6) as i32);
        let lag_secs = match (primary_optime, optime_secs(entry), state) {
            (_, _, MemberState::Arbiter) => None,
            (Some(primary), Some(own), _) => Some((primary - own).max(0)),
            _ => None,
        };
        members.insert(
            host,
            MemberStatus {
                id: integer(entry.get("_id")).unwrap_or(-1),
                healthy: entry
                    .get("health")
                    .and_then(|h| h.as_f64().or_else(|| integer(Some(h)).map(|v| v as f64)))
                    == Some(1.0),
                state,
                sync_source: entry
                    .get_str("syncSourceHost")
                    .unwrap_or_default()
                    .to_string(),
                lag_secs,
                config_version: integer(entry.get("configVersion")),
                authentication_refused: entry.get_bool("authenticated") == Ok(false),
            },
        );
    }
    (primary, members)
}
