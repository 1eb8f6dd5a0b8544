//! Conversion between the pure replica-set model ([`crate::replset`]) and the BSON
//! documents mongod speaks.
//!
//! A reconfig is built by editing the document `replSetGetConfig` returned, never by
//! writing a fresh one: fields this operator does not model (`buildIndexes`,
//! `secondaryDelaySecs`, `settings.heartbeatTimeoutSecs`, `getLastErrorModes`, …)
//! are carried over untouched, so a reconfig changes only what the planner decided.

use std::collections::BTreeMap;

use mongodb::bson::{doc, oid::ObjectId, Bson, Document};

use crate::hostconf::MemberAddress;
use crate::replset::{
    ClusterWriteConcern, ConfigMember, ConfigSettings, MemberState, MemberStatus, ReplicaSetConfig,
};

/// Why a document could not be read as a replica-set configuration.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ConfigDocError {
    /// A required field is missing or has the wrong type.
    #[error("replica-set config field {0} is missing or malformed")]
    Field(&'static str),
    /// A member host is not `host:port`.
    #[error("replica-set config member host {0:?} is not host:port")]
    Host(String),
}

/// Reads `replSetGetConfig`'s `config` document.
pub fn config_from_document(config: &Document) -> Result<ReplicaSetConfig, ConfigDocError> {
    let set_name = config
        .get_str("_id")
        .map_err(|_| ConfigDocError::Field("_id"))?
        .to_string();
    let version = integer(config.get("version")).ok_or(ConfigDocError::Field("version"))?;
    let term = integer(config.get("term"));
    let members = config
        .get_array("members")
        .map_err(|_| ConfigDocError::Field("members"))?
        .iter()
        .map(|member| {
            member
                .as_document()
                .ok_or(ConfigDocError::Field("members[]"))
                .and_then(member_from_document)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let settings = config.get_document("settings").ok();
    let setting_int = |key: &str, default: i64| {
        settings
            .and_then(|s| integer(s.get(key)))
            .unwrap_or(default)
    };
    let settings = ConfigSettings {
        election_timeout_millis: setting_int("electionTimeoutMillis", 10_000),
        heartbeat_interval_millis: setting_int("heartbeatIntervalMillis", 2_000),
        catch_up_timeout_millis: setting_int("catchUpTimeoutMillis", -1),
        chaining_allowed: settings
            .and_then(|s| s.get_bool("chainingAllowed").ok())
            .unwrap_or(true),
        replica_set_id: settings
            .and_then(|s| s.get_object_id("replicaSetId").ok())
            .map(|id| id.to_hex()),
    };
    Ok(ReplicaSetConfig {
        set_name,
        version,
        term,
        members,
        settings,
    })
}

fn member_from_document(member: &Document) -> Result<ConfigMember, ConfigDocError> {
    let host_text = member
        .get_str("host")
        .map_err(|_| ConfigDocError::Field("members[].host"))?;
    let host =
        MemberAddress::parse(host_text).map_err(|_| ConfigDocError::Host(host_text.to_string()))?;
    let tags = member
        .get_document("tags")
        .map(|tags| {
            tags.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                .collect()
        })
        .unwrap_or_default();
    Ok(ConfigMember {
        id: integer(member.get("_id")).ok_or(ConfigDocError::Field("members[]._id"))?,
        host,
        arbiter_only: member.get_bool("arbiterOnly").unwrap_or(false),
        votes: integer(member.get("votes")).unwrap_or(1).clamp(0, 1) as u8,
        priority: number(member.get("priority")).unwrap_or(1.0),
        hidden: member.get_bool("hidden").unwrap_or(false),
        tags,
        newly_added: member.get_bool("newlyAdded").unwrap_or(false),
    })
}

/// The document for `replSetInitiate`: a brand-new config (mongod generates the
/// `replicaSetId`).
pub fn initiate_document(config: &ReplicaSetConfig) -> Document {
    let members: Vec<Bson> = config
        .members
        .iter()
        .map(|m| Bson::Document(member_document(m, Document::new())))
        .collect();
    doc! {
        "_id": &config.set_name,
        "version": config.version,
        "members": members,
        "settings": settings_document(&config.settings, Document::new()),
    }
}

/// The document for `replSetReconfig`: `current` (as `replSetGetConfig` returned it)
/// with the members and managed settings of `desired`. Members are matched by
/// `_id`; fields not modelled here are kept; `newlyAdded` and `term` are never
/// sent (mongod manages them).
pub fn reconfig_document(current: &Document, desired: &ReplicaSetConfig) -> Document {
    let mut current_members: BTreeMap<i64, Document> = BTreeMap::new();
    if let Ok(members) = current.get_array("members") {
        for member in members.iter().filter_map(Bson::as_document) {
            if let Some(id) = integer(member.get("_id")) {
                current_members.insert(id, member.clone());
            }
        }
    }
    let members: Vec<Bson> = desired
        .members
        .iter()
        .map(|m| {
            Bson::Document(member_document(
                m,
                current_members.remove(&m.id).unwrap_or_default(),
            ))
        })
        .collect();
    let mut document = current.clone();
    document.remove("term");
    document.insert("_id", desired.set_name.clone());
    document.insert("version", desired.version);
    document.insert("members", members);
    let current_settings = current
        .get_document("settings")
        .cloned()
        .unwrap_or_default();
    document.insert(
        "settings",
        settings_document(&desired.settings, current_settings),
    );
    document
}

fn member_document(member: &ConfigMember, mut base: Document) -> Document {
    base.remove("newlyAdded");
    base.insert("_id", member.id);
    base.insert("host", member.host.to_string());
    base.insert("arbiterOnly", member.arbiter_only);
    base.insert("votes", member.votes as i32);
    base.insert("priority", member.priority);
    base.insert("hidden", member.hidden);
    let tags: Document = member
        .tags
        .iter()
        .map(|(k, v)| (k.clone(), Bson::String(v.clone())))
        .collect();
    base.insert("tags", tags);
    base
}

fn settings_document(settings: &ConfigSettings, mut base: Document) -> Document {
    base.insert("electionTimeoutMillis", settings.election_timeout_millis);
    base.insert(
        "heartbeatIntervalMillis",
        settings.heartbeat_interval_millis,
    );
    base.insert("catchUpTimeoutMillis", settings.catch_up_timeout_millis);
    base.insert("chainingAllowed", settings.chaining_allowed);
    if let Some(id) = settings
        .replica_set_id
        .as_deref()
        .and_then(|hex| ObjectId::parse_str(hex).ok())
    {
        base.insert("replicaSetId", id);
    }
    base
}

/// The default write concern of a `getDefaultRWConcern` reply: mongod 5.0+
/// says where it comes from (`defaultWriteConcernSource`: `global` when set
/// with `setDefaultRWConcern`, `implicit` when derived from the config);
/// 4.4 only shows one that was set.
pub fn cluster_write_concern(reply: &Document) -> ClusterWriteConcern {
    let w = reply
        .get_document("defaultWriteConcern")
        .ok()
        .and_then(|wc| wc.get("w"))
        .map(|w| match w {
            Bson::String(w) => w.clone(),
            other => integer(Some(other)).map_or_else(|| other.to_string(), |n| n.to_string()),
        });
    match (reply.get_str("defaultWriteConcernSource").ok(), w) {
        (Some("implicit"), _) => ClusterWriteConcern::Implicit,
        (Some(_), Some(w)) | (None, Some(w)) => ClusterWriteConcern::Global { w },
        (Some(_), None) => ClusterWriteConcern::Unknown,
        (None, None) => ClusterWriteConcern::NotSetBefore50,
    }
}

/// Marks the members mongod counts as `newlyAdded`, which `replSetGetConfig`
/// hides outside test mode (`$_internalIncludeNewlyAdded` is refused with
/// InvalidOptions unless test commands are enabled). What production mongod
/// shows instead: `replSetGetStatus`'s `votingMembersCount` leaves them out
/// (`isVoter()`), so the config's voters minus it is how many there are; and
/// `hello` lists one whose priority in the config is above 0 among the
/// `passives` (its effective priority is 0 until the flag goes). Those are
/// marked first; if more remain (a hidden or priority-0 voter), the voting
/// data members that are not primary are taken, the unhealthy ones first, so
/// that the count of healthy voters is never made smaller than mongod's.
pub fn mark_newly_added(
    config: &mut ReplicaSetConfig,
    voting_members_count: Option<i64>,
    members: &BTreeMap<MemberAddress, MemberStatus>,
    passives: &[MemberAddress],
) {
    let Some(counted) = voting_members_count.and_then(|c| usize::try_from(c).ok()) else {
        return;
    };
    let mut left = config.voting_member_count().saturating_sub(counted);
    let state = |host: &MemberAddress| members.get(host).map(|m| (m.healthy, m.state));
    let rank = |m: &ConfigMember| {
        let shown_passive = m.priority > 0.0 && !m.hidden && passives.contains(&m.host);
        let (healthy, secondary) = match state(&m.host) {
            Some((healthy, s)) => (healthy, s == MemberState::Secondary),
            None => (false, false),
        };
        (!shown_passive, healthy, secondary)
    };
    let mut candidates: Vec<usize> = (0..config.members.len())
        .filter(|&i| {
            let m = &config.members[i];
            m.votes > 0
                && !m.arbiter_only
                && state(&m.host).map(|(_, s)| s) != Some(MemberState::Primary)
        })
        .collect();
    candidates.sort_by_key(|&i| rank(&config.members[i]));
    for i in candidates {
        if left == 0 {
            break;
        }
        config.members[i].newly_added = true;
        left -= 1;
    }
}

/// An integer field, whatever numeric BSON type mongod chose for it.
pub fn integer(value: Option<&Bson>) -> Option<i64> {
    match value? {
        Bson::Int32(v) => Some(i64::from(*v)),
        Bson::Int64(v) => Some(*v),
        Bson::Double(v) if v.fract() == 0.0 => Some(*v as i64),
        _ => None,
    }
}

fn number(value: Option<&Bson>) -> Option<f64> {
    match value? {
        Bson::Int32(v) => Some(f64::from(*v)),
        Bson::Int64(v) => Some(*v as f64),
        Bson::Double(v) => Some(*v),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn current_document() -> Document {
        doc! {
            "_id": "replset-0",
            "version": 3,
            "term": 2i64,
            "protocolVersion": 1i64,
            "members": [
                { "_id": 0, "host": "127.0.10.1:30001", "arbiterOnly": false, "buildIndexes": true, "hidden": false,
                  "priority": 1.0, "tags": {}, "secondaryDelaySecs": 0i64, "votes": 1 },
                { "_id": 1, "host": "127.0.11.1:30001", "arbiterOnly": false, "buildIndexes": true, "hidden": false,
                  "priority": 1.0, "tags": { "site": "b" }, "secondaryDelaySecs": 0i64, "votes": 1, "newlyAdded": true },
            ],
            "settings": { "electionTimeoutMillis": 10000i64, "heartbeatIntervalMillis": 2000, "heartbeatTimeoutSecs": 10,
                          "catchUpTimeoutMillis": -1, "chainingAllowed": true,
                          "replicaSetId": ObjectId::parse_str("65a000000000000000000001").unwrap() },
        }
    }

    #[test]
    fn reads_a_config_whatever_the_numeric_types() {
        let config = config_from_document(&current_document()).unwrap();
        assert_eq!(config.set_name, "replset-0");
        assert_eq!(config.version, 3);
        assert_eq!(config.term, Some(2));
        assert_eq!(config.members.len(), 2);
        assert_eq!(config.members[1].host.to_string(), "127.0.11.1:30001");
        assert!(config.members[1].newly_added);
        assert_eq!(
            config.members[1].tags.get("site").map(String::as_str),
            Some("b")
        );
        assert_eq!(
            config.settings.replica_set_id.as_deref(),
            Some("65a000000000000000000001")
        );
    }

    #[test]
    fn reconfig_document_keeps_unmodelled_fields_and_drops_newly_added_and_term() {
        let current = current_document();
        let mut desired = config_from_document(&current).unwrap();
        desired.version = 4;
        desired.settings.election_timeout_millis = 20_000;
        let sent = reconfig_document(&current, &desired);
        assert!(sent.get("term").is_none());
        assert_eq!(sent.get_i64("version").unwrap(), 4);
        let members = sent.get_array("members").unwrap();
        let second = members[1].as_document().unwrap();
        assert!(second.get("newlyAdded").is_none());
        assert_eq!(second.get_i64("secondaryDelaySecs").unwrap(), 0);
        assert!(second.get_bool("buildIndexes").unwrap());
        let settings = sent.get_document("settings").unwrap();
        assert_eq!(settings.get_i32("heartbeatTimeoutSecs").unwrap(), 10);
        assert_eq!(settings.get_i64("electionTimeoutMillis").unwrap(), 20_000);
        assert_eq!(
            settings.get_object_id("replicaSetId").unwrap().to_hex(),
            "65a000000000000000000001"
        );
        assert_eq!(sent.get_i64("protocolVersion").unwrap(), 1);
    }

    #[test]
    fn reconfig_document_drops_removed_members_and_adds_new_ones() {
        let current = current_document();
        let mut desired = config_from_document(&current).unwrap();
        desired.version = 4;
        desired.members.remove(0);
        let mut added = desired.members[0].clone();
        added.id = 2;
        added.host = MemberAddress::parse("127.0.12.1:30001").unwrap();
        added.votes = 0;
        added.priority = 0.0;
        added.tags.clear();
        desired.members.push(added);
        let sent = reconfig_document(&current, &desired);
        let hosts: Vec<&str> = sent
            .get_array("members")
            .unwrap()
            .iter()
            .map(|m| m.as_document().unwrap().get_str("host").unwrap())
            .collect();
        assert_eq!(hosts, ["127.0.11.1:30001", "127.0.12.1:30001"]);
        let added = sent.get_array("members").unwrap()[1].as_document().unwrap();
        assert_eq!(added.get_i32("votes").unwrap(), 0);
        assert_eq!(added.get_f64("priority").unwrap(), 0.0);
    }

    #[test]
    fn initiate_document_round_trips_through_the_reader() {
        let mut config = config_from_document(&current_document()).unwrap();
        config.version = 1;
        config.term = None;
        config.settings.replica_set_id = None;
        for member in &mut config.members {
            member.newly_added = false;
        }
        let document = initiate_document(&config);
        assert_eq!(config_from_document(&document).unwrap(), config);
    }

    #[test]
    fn malformed_documents_are_errors_not_panics() {
        assert_eq!(
            config_from_document(&doc! {}),
            Err(ConfigDocError::Field("_id"))
        );
        assert_eq!(
            config_from_document(&doc! {"_id": "rs", "version": "x"}),
            Err(ConfigDocError::Field("version"))
        );
        let bad_host = doc! {"_id": "rs", "version": 1, "members": [{"_id": 0, "host": "nohost"}]};
        assert_eq!(
            config_from_document(&bad_host),
            Err(ConfigDocError::Host("nohost".into()))
        );
    }

    #[test]
    fn the_default_write_concern_says_whether_it_was_set() {
        let implicit = doc! {"defaultWriteConcern": {"w": "majority", "wtimeout": 0},
        "defaultWriteConcernSource": "implicit", "ok": 1.0};
        assert_eq!(
            cluster_write_concern(&implicit),
            ClusterWriteConcern::Implicit
        );
        let global = doc! {"defaultWriteConcern": {"w": 1, "wtimeout": 0},
        "defaultWriteConcernSource": "global", "ok": 1.0};
        assert_eq!(
            cluster_write_concern(&global),
            ClusterWriteConcern::Global { w: "1".into() }
        );
        let before_50 = doc! {"ok": 1.0};
        assert_eq!(
            cluster_write_concern(&before_50),
            ClusterWriteConcern::NotSetBefore50
        );
        let set_on_44 = doc! {"defaultWriteConcern": {"w": "majority"}, "ok": 1.0};
        assert_eq!(
            cluster_write_concern(&set_on_44),
            ClusterWriteConcern::Global {
                w: "majority".into()
            }
        );
    }

    #[test]
    fn newly_added_members_are_found_from_what_production_mongod_shows() {
        let address = |port| MemberAddress {
            host: "10.0.0.1".into(),
            port,
        };
        let status = |state, healthy| MemberStatus {
            id: 0,
            healthy,
            state,
            sync_source: String::new(),
            lag_secs: None,
            config_version: None,
            authentication_refused: false,
        };
        let mut document = current_document();
        let three: Vec<Bson> = (0..3)
            .map(|id| Bson::Document(doc! {"_id": id, "host": format!("10.0.0.1:{}", id + 1)}))
            .collect();
        document.insert("members", three);
        let config = config_from_document(&document).unwrap();
        let members: BTreeMap<MemberAddress, MemberStatus> = [
            (address(1), status(MemberState::Primary, true)),
            (address(2), status(MemberState::Secondary, true)),
            (address(3), status(MemberState::Startup2, true)),
        ]
        .into_iter()
        .collect();
        let marked = |count, passives: &[MemberAddress]| {
            let mut config = config.clone();
            mark_newly_added(&mut config, count, &members, passives);
            config
                .members
                .iter()
                .filter(|m| m.newly_added)
                .map(|m| m.host.port)
                .collect::<Vec<_>>()
        };
        assert_eq!(marked(Some(3), &[]), Vec::<u16>::new());
        assert_eq!(marked(None, &[]), Vec::<u16>::new(), "before 4.4");
        assert_eq!(
            marked(Some(2), &[address(2)]),
            vec![2],
            "hello shows it passive"
        );
        assert_eq!(
            marked(Some(2), &[]),
            vec![3],
            "else not the secondary first"
        );
        assert_eq!(marked(Some(1), &[]), vec![2, 3], "never the primary");
    }
}
