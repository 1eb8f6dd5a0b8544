//! Disaster recovery's MongoDB I/O: the forced reconfig an SRE asked for
//! ([`crate::recovery`]), and the record of each recovery, and of each lost
//! cluster forgotten on request ([`crate::forget`]), in the replica set, in
//! `mongodb_member_operator.recoveries`, which every cluster's operator
//! reads before it adds a member that holds a config: one a recovery dropped,
//! or one removed with its forgotten cluster, is not re-added as it is.
//!
//! Documents: `{_id: "<vip>/<fromConfigVersion>", cluster, instance, request,
//! fromConfigVersion, kept: [host], dropped: [host], at}` for a recovery, and
//! `{_id: "forget/<forgotten vip>/<fromConfigVersion>", kind:
//! "forgetCluster", cluster, instance, request, forgotten, fromConfigVersion,
//! dropped: [host], at}` for a forgotten cluster (`cluster`: the VIP of the
//! cluster that carried it out; `at` in Unix milliseconds), each written
//! with an upsert (w:"majority") on the primary the pass observed, so a pass
//! that repeats it changes nothing.

use mongodb::bson::{doc, Bson, Document};

use super::roll_store::{first_batch, majority, write_outcome};
use super::{integer, reconfig_document, MongoError, MongoGateway};
use crate::hostconf::MemberAddress;
use crate::observe::DroppedMember;
use crate::replset::ReplicaSetConfig;
use crate::validate::RootCredentials;

/// The collection of the recovery records.
pub const COLLECTION: &str = "recoveries";
/// The `kind` of a forgotten cluster's record.
const FORGET_KIND: &str = "forgetCluster";

/// A recovery as recorded in the set.
#[derive(Clone, Debug, PartialEq)]
pub struct RecoveryRecord {
    /// The VIP of the cluster that forced it.
    pub cluster: String,
    /// `namespace/name` of the object it was asked on.
    pub instance: String,
    /// The request (the annotation's value).
    pub request: String,
    /// The config version it started from.
    pub from_config_version: i64,
    /// The members kept.
    pub kept: Vec<String>,
    /// The members dropped.
    pub dropped: Vec<String>,
    /// When it was recorded (Unix milliseconds).
    pub at_millis: i64,
}

/// A lost cluster forgotten on request, as recorded in the set before any of
/// its members is removed.
#[derive(Clone, Debug, PartialEq)]
pub struct ForgetRecord {
    /// The VIP of the cluster that carries it out.
    pub cluster: String,
    /// `namespace/name` of the object it was asked on.
    pub instance: String,
    /// The request (the annotation's value).
    pub request: String,
    /// The VIP of the cluster forgotten.
    pub forgotten: String,
    /// The config version its removals start from.
    pub from_config_version: i64,
    /// Its members (`host:port`).
    pub members: Vec<String>,
    /// When it was recorded (Unix milliseconds).
    pub at_millis: i64,
}

impl MongoGateway {
    /// `replSetReconfig` with `force: true`, sent to `member` directly (any
    /// member the forced config keeps: no primary is needed). Only ever sent
    /// for a recovery an SRE asked for.
    pub async fn force_reconfig(
        &self,
        member: &MemberAddress,
        current_document: &Document,
        forced: &ReplicaSetConfig,
        credentials: &RootCredentials,
    ) -> Result<(), MongoError> {
        let client = self.client(std::slice::from_ref(member), true, None, credentials)?;
        let config = reconfig_document(current_document, forced);
        let command = doc! {"replSetReconfig": config, "force": true, "maxTimeMS": 10_000i64};
        Self::run(&client, command, None, &member.to_string())
            .await
            .map(drop)
    }

    /// Writes `record` into the set through `primary` (an upsert: once).
    pub async fn record_recovery(
        &self,
        primary: &MemberAddress,
        record: &RecoveryRecord,
        credentials: &RootCredentials,
    ) -> Result<(), MongoError> {
        let id = format!("{}/{}", record.cluster, record.from_config_version);
        let document = doc! {
            "_id": &id,
            "cluster": &record.cluster,
            "instance": &record.instance,
            "request": &record.request,
            "fromConfigVersion": record.from_config_version,
            "kept": &record.kept,
            "dropped": &record.dropped,
            "at": record.at_millis,
        };
        self.upsert_record(primary, &id, document, credentials)
            .await
    }

    /// Writes `record` into the set through `primary` (an upsert: once).
    pub async fn record_forgotten(
        &self,
        primary: &MemberAddress,
        record: &ForgetRecord,
        credentials: &RootCredentials,
    ) -> Result<(), MongoError> {
        let id = format!("forget/{}/{}", record.forgotten, record.from_config_version);
        let document = doc! {
            "_id": &id,
            "kind": FORGET_KIND,
            "cluster": &record.cluster,
            "instance": &record.instance,
            "request": &record.request,
            "forgotten": &record.forgotten,
            "fromConfigVersion": record.from_config_version,
            "dropped": &record.members,
            "at": record.at_millis,
        };
        self.upsert_record(primary, &id, document, credentials)
            .await
    }

    /// Upserts `document` as record `id` (w:"majority") through `primary`.
    async fn upsert_record(
        &self,
        primary: &MemberAddress,
        id: &str,
        document: Document,
        credentials: &RootCredentials,
    ) -> Result<(), MongoError> {
        let command = doc! {
            "update": COLLECTION,
            "updates": [{"q": {"_id": id}, "u": document, "upsert": true}],
            "writeConcern": majority(),
        };
        let reply = self.on_primary(primary, command, credentials).await?;
        write_outcome(&reply).map(drop)
    }

    /// Every member a recorded recovery dropped, read from `primary`
    /// (readConcern "majority").
    pub async fn dropped_members(
        &self,
        primary: &MemberAddress,
        credentials: &RootCredentials,
    ) -> Result<Vec<DroppedMember>, MongoError> {
        let command = doc! {
            "find": COLLECTION,
            "filter": {},
            "readConcern": {"level": "majority"},
        };
        let reply = self.on_primary(primary, command, credentials).await?;
        Ok(first_batch(&reply)?
            .iter()
            .filter_map(Bson::as_document)
            .flat_map(dropped_by)
            .collect())
    }
}

/// The members one record dropped, each with a line saying which recovery
/// or forgetting.
fn dropped_by(document: &Document) -> Vec<DroppedMember> {
    let text = |key: &str| document.get_str(key).unwrap_or("?").to_owned();
    let at = integer(document.get("at"))
        .and_then(|millis| k8s_openapi::jiff::Timestamp::from_millisecond(millis).ok())
        .map_or_else(|| "?".to_string(), |at| at.to_string());
    let forgotten = document.get_str("kind") == Ok(FORGET_KIND);
    let recovery = if forgotten {
        format!(
            "cluster {} forgotten by cluster {} on {} at {at}, asked for: {:?}",
            text("forgotten"),
            text("cluster"),
            text("instance"),
            text("request")
        )
    } else {
        format!(
            "forced in cluster {} on {} at {at}, asked for: {:?}",
            text("cluster"),
            text("instance"),
            text("request")
        )
    };
    document
        .get_array("dropped")
        .map(|hosts| {
            hosts
                .iter()
                .filter_map(Bson::as_str)
                .filter_map(|host| MemberAddress::parse(host).ok())
                .map(|host| DroppedMember {
                    host,
                    recovery: recovery.clone(),
                    forgotten,
                })
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_names_each_member_it_dropped_and_the_recovery() {
        let document = doc! {
            "_id": "10.0.0.1/7", "cluster": "10.0.0.1", "instance": "default/weather",
            "request": "clusters b and c burnt down", "fromConfigVersion": 7i64,
            "kept": ["10.0.0.1:30001"], "dropped": ["10.0.0.2:30001", "not a host", "10.0.0.3:30002"],
            "at": 1_700_000_000_000i64,
        };
        let dropped = dropped_by(&document);
        let hosts: Vec<String> = dropped.iter().map(|d| d.host.to_string()).collect();
        assert_eq!(hosts, ["10.0.0.2:30001", "10.0.0.3:30002"]);
        assert!(dropped[0].recovery.contains("cluster 10.0.0.1"));
        assert!(dropped[0].recovery.contains("clusters b and c burnt down"));
        assert!(dropped[0].recovery.contains("2023-11-14T22:13:20Z"));
        assert!(!dropped[0].forgotten);
    }

    #[test]
    fn a_forgotten_clusters_record_names_its_members_as_forgotten() {
        let document = doc! {
            "_id": "forget/10.0.0.3/9", "kind": "forgetCluster", "cluster": "10.0.0.1",
            "instance": "default/weather", "request": "10.0.0.3 lost in the fire",
            "forgotten": "10.0.0.3", "fromConfigVersion": 9i64,
            "dropped": ["10.0.0.3:30001", "10.0.0.3:30002"], "at": 1_700_000_000_000i64,
        };
        let dropped = dropped_by(&document);
        assert_eq!(dropped.len(), 2);
        assert!(dropped.iter().all(|d| d.forgotten));
        assert!(dropped[0]
            .recovery
            .contains("cluster 10.0.0.3 forgotten by cluster 10.0.0.1"));
        assert!(dropped[0].recovery.contains("lost in the fire"));
    }
}
