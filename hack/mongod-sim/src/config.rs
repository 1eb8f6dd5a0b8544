//! Replica-set configuration documents: parsing what clients send, the validation
//! rules of `repl_set_config_checks.cpp` (see replica-set-rules.md), the reconfig
//! compatibility checks, and rendering back to the shape `replSetGetConfig` returns.

use crate::version::{Release, ServerVersion};
use bson::{doc, oid::ObjectId, Bson, Document};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

/// One `members[]` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemberConfig {
    pub id: i64,
    pub host: String,
    pub arbiter_only: bool,
    pub build_indexes: bool,
    pub hidden: bool,
    pub priority: f64,
    pub tags: Document,
    pub secondary_delay_secs: i64,
    pub votes: i64,
    pub newly_added: bool,
}

impl MemberConfig {
    /// Counts as a voter (newlyAdded members do not, until the flag is removed).
    pub fn is_voter(&self) -> bool {
        self.votes > 0 && !self.newly_added
    }
    /// May become primary.
    pub fn is_electable(&self) -> bool {
        !self.arbiter_only && self.effective_priority() > 0.0
    }
    /// The priority mongod acts on: 0 while `newlyAdded` (`MemberConfig::getPriority`);
    /// `priority` is the configured one (`getBasePriority`).
    pub fn effective_priority(&self) -> f64 {
        if self.newly_added {
            0.0
        } else {
            self.priority
        }
    }
}

/// `settings` with mongod's defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    pub chaining_allowed: bool,
    pub heartbeat_interval_millis: i64,
    pub heartbeat_timeout_secs: i64,
    pub election_timeout_millis: i64,
    pub catch_up_timeout_millis: i64,
    pub catch_up_takeover_delay_millis: i64,
    pub replica_set_id: Option<ObjectId>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            chaining_allowed: true,
            heartbeat_interval_millis: 2000,
            heartbeat_timeout_secs: 10,
            election_timeout_millis: 10000,
            catch_up_timeout_millis: -1,
            catch_up_takeover_delay_millis: 30000,
            replica_set_id: None,
        }
    }
}

/// A replica-set config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplSetConfig {
    pub set_name: String,
    pub version: i64,
    /// -1 for configs installed by a forced reconfig (compared by version only).
    pub term: i64,
    pub members: Vec<MemberConfig>,
    pub settings: Settings,
}

fn num(v: &Bson) -> Option<f64> {
    match v {
        Bson::Int32(i) => Some(*i as f64),
        Bson::Int64(i) => Some(*i as f64),
        Bson::Double(d) => Some(*d),
        Bson::Boolean(b) => Some(if *b { 1.0 } else { 0.0 }),
        _ => None,
    }
}

fn int_field(d: &Document, key: &str, what: &str) -> Result<Option<i64>, String> {
    match d.get(key) {
        None | Some(Bson::Null) => Ok(None),
        Some(v) => match num(v) {
            Some(n) if n.fract() == 0.0 => Ok(Some(n as i64)),
            _ => Err(format!(
                "Expected field \"{key}\" in {what} to be a number, found {v}"
            )),
        },
    }
}

fn bool_field(d: &Document, key: &str) -> Result<Option<bool>, String> {
    match d.get(key) {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::Boolean(b)) => Ok(Some(*b)),
        Some(v) => num(v)
            .map(|n| Some(n != 0.0))
            .ok_or_else(|| format!("Expected boolean for field \"{key}\"")),
    }
}

/// Is this host string a loopback address (localhost or 127.*)?
fn is_local_host(host: &str) -> bool {
    let name = host.rsplit_once(':').map(|(h, _)| h).unwrap_or(host);
    name == "localhost" || name.starts_with("127.") || name == "::1" || name == "[::1]"
}

impl ReplSetConfig {
    /// Parses a client-supplied config document. Errors carry the message for code 93.
    pub fn parse(d: &Document) -> Result<ReplSetConfig, String> {
        const TOP: &[&str] = &[
            "_id",
            "version",
            "term",
            "members",
            "settings",
            "protocolVersion",
            "writeConcernMajorityJournalDefault",
            "configsvr",
        ];
        for key in d.keys() {
            if !TOP.contains(&key.as_str()) {
                return Err(format!(
                    "Unexpected field {key} in replica set configuration"
                ));
            }
        }
        let set_name = d
            .get_str("_id")
            .map_err(|_| "Missing expected field \"_id\"".to_string())?
            .to_string();
        let version = int_field(d, "version", "replica set configuration")?
            .ok_or("Missing expected field \"version\"")?;
        let term = int_field(d, "term", "replica set configuration")?.unwrap_or(-1);
        if let Some(pv) = int_field(d, "protocolVersion", "replica set configuration")? {
            if pv != 1 {
                return Err("Only protocolVersion 1 is supported".into());
            }
        }
        let members_bson = d
            .get_array("members")
            .map_err(|_| "Missing expected field \"members\"".to_string())?;
        let mut members = Vec::new();
        for m in members_bson {
            let Bson::Document(m) = m else {
                return Err("Expected type object for members entries".into());
            };
            members.push(parse_member(m)?);
        }
        let mut settings = Settings::default();
        if let Some(s) = d.get("settings") {
            let Bson::Document(s) = s else {
                return Err("settings must be an object".into());
            };
            if let Some(v) = bool_field(s, "chainingAllowed")? {
                settings.chaining_allowed = v;
            }
            if let Some(v) = int_field(s, "heartbeatIntervalMillis", "settings")? {
                settings.heartbeat_interval_millis = v;
            }
            if let Some(v) = int_field(s, "heartbeatTimeoutSecs", "settings")? {
                settings.heartbeat_timeout_secs = v;
            }
            if let Some(v) = int_field(s, "electionTimeoutMillis", "settings")? {
                settings.election_timeout_millis = v;
            }
            if let Some(v) = int_field(s, "catchUpTimeoutMillis", "settings")? {
                settings.catch_up_timeout_millis = v;
            }
            if let Some(v) = int_field(s, "catchUpTakeoverDelayMillis", "settings")? {
                settings.catch_up_takeover_delay_millis = v;
            }
            if let Ok(id) = s.get_object_id("replicaSetId") {
                settings.replica_set_id = Some(id);
            }
        }
        const DAY_MS: i64 = 86_400_000;
        for (name, v) in [
            (
                "heartbeatIntervalMillis",
                settings.heartbeat_interval_millis,
            ),
            ("electionTimeoutMillis", settings.election_timeout_millis),
        ] {
            if v <= 0 || v > DAY_MS {
                return Err(format!("{name} must be between 1 and {DAY_MS}, found {v}"));
            }
        }
        Ok(ReplSetConfig {
            set_name,
            version,
            term,
            members,
            settings,
        })
    }

    /// The config validation rules (errors are wrapped as 93 or 103 by the caller).
    pub fn validate(&self) -> Result<(), String> {
        let n = self.members.len();
        if n == 0 || n > 50 {
            return Err(format!("Replica set configuration contains {n} members, but must have at least 1 and no more than 50"));
        }
        let voters = self.members.iter().filter(|m| m.votes > 0).count();
        if voters == 0 || voters > 7 {
            return Err(format!("Replica set configuration contains {voters} voting members, but must be at least 1 and no more than 7"));
        }
        let mut ids = HashSet::new();
        let mut hosts = HashSet::new();
        for m in &self.members {
            if !ids.insert(m.id) {
                return Err(format!(
                    "Found two member configurations with same _id field, members.{}._id == {}",
                    m.id, m.id
                ));
            }
            if !hosts.insert(m.host.to_lowercase()) {
                return Err(format!(
                    "Found two member configurations with same host field, members.host == {}",
                    m.host
                ));
            }
            if m.votes != 0 && m.votes != 1 {
                return Err(format!(
                    "votes field value is {} but must be 0 or 1",
                    m.votes
                ));
            }
            if !(0.0..=1000.0).contains(&m.priority) {
                return Err(format!(
                    "priority field value of {} is out of range",
                    m.priority
                ));
            }
            if m.arbiter_only && m.priority != 0.0 {
                return Err("arbiterOnly members must have priority 0".into());
            }
            if m.priority > 0.0 && m.votes == 0 {
                return Err("priority must be 0 when non-voting (votes:0)".into());
            }
            if m.priority > 0.0 && m.hidden {
                return Err("priority must be 0 when hidden=true".into());
            }
            if m.priority > 0.0 && m.secondary_delay_secs > 0 {
                return Err("priority must be 0 when secondaryDelaySecs is used".into());
            }
            if m.priority > 0.0 && !m.build_indexes {
                return Err("priority must be 0 when buildIndexes=false".into());
            }
            if m.arbiter_only && m.votes != 1 {
                return Err("arbiter must vote (cannot have 0 votes)".into());
            }
        }
        let locals = self
            .members
            .iter()
            .filter(|m| is_local_host(&m.host))
            .count();
        if locals != 0 && locals != n {
            return Err("Either all host names in a replica set configuration must be localhost references, or none must be; found some of each".into());
        }
        if !self
            .members
            .iter()
            .any(|m| !m.arbiter_only && m.priority > 0.0)
        {
            return Err("This config is not valid: at least one member must be electable (priority > 0, not arbiter)".into());
        }
        Ok(())
    }

    /// `ReplSetConfig::validate`'s arbiter rule of 5.3 and later: more than one
    /// arbiter needs every member started with `--setParameter
    /// allowMultipleArbiters=true`, which the sim has not (jstests
    /// `disable_multiple_arbiters.js`, `requires_fcv_53`; the shell drops the
    /// parameter before 5.3.0).
    pub fn check_arbiter_count(&self, binary: ServerVersion) -> Result<(), String> {
        let arbiters = self.members.iter().filter(|m| m.arbiter_only).count();
        if binary.release() >= Release::new(5, 3) && arbiters > 1 {
            return Err("Multiple arbiters are not allowed unless all nodes were started with with --setParameter 'allowMultipleArbiters=true'".into());
        }
        Ok(())
    }

    /// Compare (term, version) as mongod does: configs with term -1 compare by version only.
    pub fn is_newer_than(&self, other: &ReplSetConfig) -> bool {
        if self.term == -1 || other.term == -1 {
            // Forced configs carry term -1; once a primary stamps its term on the
            // same version, the stamped copy wins.
            self.version > other.version
                || (self.version == other.version && self.term > other.term)
        } else {
            (self.term, self.version) > (other.term, other.version)
        }
    }

    /// Should a member holding `self` install `newer` learned from a peer? Same set
    /// name, same replicaSetId (a member of another set is never followed), newer.
    pub fn may_be_replaced_by(&self, newer: &ReplSetConfig) -> bool {
        let same_set_id = match (self.replica_set_id(), newer.replica_set_id()) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        };
        self.set_name == newer.set_name && same_set_id && newer.is_newer_than(self)
    }

    pub fn same_version(&self, other: &ReplSetConfig) -> bool {
        self.version == other.version && self.term == other.term
    }

    pub fn member_by_host(&self, host: &str) -> Option<&MemberConfig> {
        self.members.iter().find(|m| m.host == host)
    }

    pub fn voters(&self) -> impl Iterator<Item = &MemberConfig> {
        self.members.iter().filter(|m| m.is_voter())
    }

    /// Votes needed for a majority.
    pub fn majority(&self) -> usize {
        self.voters().count() / 2 + 1
    }

    /// Whether the implicit default write concern is `{w: "majority"}` (else
    /// `{w: 1}`): mongod's `ReplSetConfig::isImplicitDefaultWriteConcernMajority`
    /// over `_calculateMajorities` — no arbiter, or more data-bearing voters than
    /// a majority of the voters. `newlyAdded` members are no voters here.
    pub fn is_implicit_default_write_concern_majority(&self) -> bool {
        let voters = self.voters().count();
        let arbiters = self.members.iter().filter(|m| m.arbiter_only).count();
        let writable_voters = voters.saturating_sub(arbiters);
        arbiters == 0 || writable_voters > self.majority()
    }

    /// mongod's `ReplSetConfig::isPSASet`: three members, two of them data-bearing
    /// (votes are not looked at).
    pub fn is_psa_set(&self) -> bool {
        self.members.len() == 3 && self.members.iter().filter(|m| !m.arbiter_only).count() == 2
    }

    pub fn replica_set_id(&self) -> Option<ObjectId> {
        self.settings.replica_set_id
    }

    /// The config as `replSetGetConfig` renders it: configured `votes` and
    /// `priority`, without `newlyAdded` (`toBSONWithoutNewlyAdded`).
    pub fn to_document(&self) -> Document {
        let members: Vec<Bson> = self
            .members
            .iter()
            .map(|m| {
                let d = doc! {
                    "_id": m.id as i32, "host": m.host.clone(), "arbiterOnly": m.arbiter_only,
                    "buildIndexes": m.build_indexes, "hidden": m.hidden, "priority": m.priority,
                    "tags": m.tags.clone(), "secondaryDelaySecs": m.secondary_delay_secs, "votes": m.votes as i32,
                };
                Bson::Document(d)
            })
            .collect();
        let mut settings = doc! {
            "chainingAllowed": self.settings.chaining_allowed,
            "heartbeatIntervalMillis": self.settings.heartbeat_interval_millis,
            "heartbeatTimeoutSecs": self.settings.heartbeat_timeout_secs as i32,
            "electionTimeoutMillis": self.settings.election_timeout_millis,
            "catchUpTimeoutMillis": self.settings.catch_up_timeout_millis,
            "catchUpTakeoverDelayMillis": self.settings.catch_up_takeover_delay_millis,
            "getLastErrorModes": {},
            "getLastErrorDefaults": { "w": 1, "wtimeout": 0 },
        };
        if let Some(id) = self.settings.replica_set_id {
            settings.insert("replicaSetId", id);
        }
        doc! {
            "_id": self.set_name.clone(), "version": self.version as i32, "term": self.term,
            "members": members, "protocolVersion": 1_i64, "writeConcernMajorityJournalDefault": true,
            "settings": settings,
        }
    }
}

fn parse_member(m: &Document) -> Result<MemberConfig, String> {
    const KEYS: &[&str] = &[
        "_id",
        "host",
        "arbiterOnly",
        "buildIndexes",
        "hidden",
        "priority",
        "tags",
        "secondaryDelaySecs",
        "slaveDelay",
        "votes",
        "newlyAdded",
    ];
    for key in m.keys() {
        if !KEYS.contains(&key.as_str()) {
            return Err(format!(
                "Unexpected field {key} in replica set member configuration"
            ));
        }
    }
    let id = int_field(m, "_id", "replica set member configuration")?
        .ok_or("Missing expected field \"_id\" in member")?;
    let host = m
        .get_str("host")
        .map_err(|_| "Missing expected field \"host\" in member".to_string())?
        .to_string();
    if !host.contains(':') && host.is_empty() {
        return Err("Empty host field".into());
    }
    let arbiter_only = bool_field(m, "arbiterOnly")?.unwrap_or(false);
    let priority = match m.get("priority") {
        None | Some(Bson::Null) => {
            if arbiter_only {
                0.0
            } else {
                1.0
            }
        }
        Some(v) => num(v).ok_or("priority must be a number")?,
    };
    let tags = match m.get("tags") {
        Some(Bson::Document(t)) => t.clone(),
        _ => Document::new(),
    };
    Ok(MemberConfig {
        id,
        host,
        arbiter_only,
        build_indexes: bool_field(m, "buildIndexes")?.unwrap_or(true),
        hidden: bool_field(m, "hidden")?.unwrap_or(false),
        priority,
        tags,
        secondary_delay_secs: int_field(m, "secondaryDelaySecs", "member")?
            .or(int_field(m, "slaveDelay", "member")?)
            .unwrap_or(0),
        votes: int_field(m, "votes", "member")?.unwrap_or(1),
        newly_added: bool_field(m, "newlyAdded")?.unwrap_or(false),
    })
}

/// The reconfig compatibility checks (all failures are code 103). `psa_rule`:
/// the binary is 5.0 or later, where mongod refuses an electable PSA secondary
/// after a config with one writable voter (see `check_psa_transition`).
pub fn check_reconfig_compatible(
    old: &ReplSetConfig,
    new: &ReplSetConfig,
    force: bool,
    psa_rule: bool,
) -> Result<(), String> {
    if !force && new.version <= old.version {
        return Err(format!(
            "New replica set configuration version must be greater than old, but {} is not greater than {} for replica set {}",
            new.version, old.version, old.set_name));
    }
    if new.set_name != old.set_name {
        return Err(format!(
            "New and old configurations differ in replica set name; old was {}, and new is {}",
            old.set_name, new.set_name
        ));
    }
    if let (Some(a), Some(b)) = (old.replica_set_id(), new.replica_set_id()) {
        if a != b {
            return Err(format!(
                "New and old configurations differ in replica set ID; old was {a}, and new is {b}"
            ));
        }
    }
    for o in &old.members {
        if let Some(n) = new.member_by_host(&o.host) {
            if n.id != o.id {
                return Err(format!("New and old configurations both have members with host of {} but in the new configuration the _id field is {} and in the old configuration it is {} for replica set {}", o.host, n.id, o.id, old.set_name));
            }
            if n.arbiter_only != o.arbiter_only {
                return Err(format!("New and old configurations differ in the setting of the arbiterOnly field for member {}; to make this change, remove then re-add the member", o.host));
            }
            if n.build_indexes != o.build_indexes {
                return Err(format!("New and old configurations differ in the setting of the buildIndexes field for member {}; to make this change, remove then re-add the member", o.host));
            }
        }
    }
    if psa_rule {
        check_psa_transition(old, new)?;
    }
    if !force {
        // Voting membership is compared by `_id` over the members that vote now,
        // as mongod's validateSingleNodeChange does (`votingMembers()`: votes and
        // not newlyAdded, the flag already set on the new config): a member
        // entering or leaving the voter set counts, a voter whose host changes
        // does not, and a new voter, being newlyAdded, does not either.
        let voter_ids =
            |config: &ReplSetConfig| -> HashSet<i64> { config.voters().map(|m| m.id).collect() };
        let (old_voters, new_voters) = (voter_ids(old), voter_ids(new));
        let changes = old_voters.symmetric_difference(&new_voters).count();
        if changes > 1 {
            return Err(
                "Non-force replica set reconfig can only add or remove at most 1 voting member."
                    .into(),
            );
        }
    }
    Ok(())
}

/// mongod 5.0+'s `validateOldAndNewConfigsCompatible` rule for PSA sets: when
/// the old config's election and write quorums need not overlap (fewer writable
/// voters than a majority of voters — configured votes, `newlyAdded` ignored),
/// the new config may not be a PSA set with two members of configured priority
/// above 0 (force reconfigs included). `rs.reconfigForPSASet` gives the vote
/// with priority 0 first and the priority in a second reconfig.
fn check_psa_transition(old: &ReplSetConfig, new: &ReplSetConfig) -> Result<(), String> {
    let old_voters = old.members.iter().filter(|m| m.votes > 0).count();
    let old_arbiters = old.members.iter().filter(|m| m.arbiter_only).count();
    let majority = old_voters / 2 + 1;
    let overlap = old_voters.saturating_sub(old_arbiters) >= majority;
    let electable = new.members.iter().filter(|m| m.priority > 0.0).count();
    if !overlap && new.is_psa_set() && electable > 1 {
        return Err("Rejecting reconfig where the new config has a PSA topology and the secondary is electable, but the old config contains only one writable node. Refer to https://docs.mongodb.com/manual/reference/method/rs.reconfigForPSASet/ for next steps on reconfiguring a PSA set.".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(members: Vec<Document>) -> ReplSetConfig {
        ReplSetConfig::parse(&doc! { "_id": "rs0", "version": 1, "members": members }).unwrap()
    }

    fn hosts(n: usize) -> Vec<Document> {
        (0..n)
            .map(|i| doc! { "_id": i as i32, "host": format!("127.0.0.{}:27017", i + 1) })
            .collect()
    }

    #[test]
    fn unknown_fields_and_missing_members_are_parse_errors() {
        assert!(ReplSetConfig::parse(
            &doc! { "_id": "rs0", "version": 1, "members": [], "bogus": 1 }
        )
        .is_err());
        assert!(ReplSetConfig::parse(&doc! { "_id": "rs0", "version": 1 }).is_err());
        assert!(ReplSetConfig::parse(
            &doc! { "_id": "rs0", "version": 1, "members": [{ "_id": 0, "host": "a:1", "x": 1 }] }
        )
        .is_err());
    }

    #[test]
    fn validation_rules_from_the_manual() {
        assert!(cfg(hosts(3)).validate().is_ok());
        assert!(cfg(hosts(8))
            .validate()
            .unwrap_err()
            .contains("voting members"));
        let mut dup = hosts(2);
        dup[1].insert("_id", 0);
        assert!(cfg(dup).validate().unwrap_err().contains("same _id"));
        let mut hidden = hosts(2);
        hidden[1].insert("hidden", true);
        assert!(cfg(hidden).validate().unwrap_err().contains("hidden"));
        let mut nonvoter = hosts(2);
        nonvoter[1].insert("votes", 0);
        assert!(cfg(nonvoter).validate().unwrap_err().contains("non-voting"));
        let mixed = vec![
            doc! {"_id": 0, "host": "127.0.0.1:1"},
            doc! {"_id": 1, "host": "db.example:1"},
        ];
        assert!(cfg(mixed).validate().unwrap_err().contains("localhost"));
        let all_passive = vec![doc! {"_id": 0, "host": "127.0.0.1:1", "priority": 0}];
        assert!(cfg(all_passive).validate().is_err());
    }

    #[test]
    fn reconfig_allows_one_voting_change_unless_forced() {
        let old = cfg(hosts(3));
        let mut one = cfg(hosts(2));
        one.version = 2;
        assert!(check_reconfig_compatible(&old, &one, false, true).is_ok());
        let mut two = cfg(hosts(1));
        two.version = 2;
        assert!(check_reconfig_compatible(&old, &two, false, true)
            .unwrap_err()
            .contains("at most 1 voting member"));
        assert!(check_reconfig_compatible(&old, &two, true, true).is_ok());
        let mut same_version = cfg(hosts(3));
        same_version.version = 1;
        assert!(check_reconfig_compatible(&old, &same_version, false, true).is_err());
        let mut changed_id = cfg(hosts(3));
        changed_id.version = 2;
        changed_id.members[2].id = 7;
        assert!(check_reconfig_compatible(&old, &changed_id, false, true)
            .unwrap_err()
            .contains("_id"));
    }

    #[test]
    fn a_voter_whose_host_changes_keeps_its_id_and_is_no_voting_change() {
        // mongod's validateSingleNodeChange compares the voters' MemberIds: a
        // member that keeps its `_id` under a new host neither joins nor leaves.
        let old = cfg(hosts(3));
        let mut moved = cfg(hosts(3));
        moved.version = 2;
        moved.members[2].host = "127.0.0.9:27017".into();
        assert_eq!(check_reconfig_compatible(&old, &moved, false, true), Ok(()));
        let mut two_moved = moved.clone();
        two_moved.members[1].host = "127.0.0.8:27017".into();
        assert_eq!(
            check_reconfig_compatible(&old, &two_moved, false, true),
            Ok(())
        );
        // A new `_id` for a host is still refused, and a new voter in place of
        // another is still two changes.
        let mut replaced = cfg(hosts(3));
        replaced.version = 2;
        replaced.members[2].id = 9;
        replaced.members[2].host = "127.0.0.9:27017".into();
        assert!(check_reconfig_compatible(&old, &replaced, false, true)
            .unwrap_err()
            .contains("at most 1 voting member"));
    }

    #[test]
    fn forced_configs_compare_by_version_then_stamped_term() {
        let mut a = cfg(hosts(1));
        a.term = 3;
        let mut forced = a.clone();
        forced.version = 10_005;
        forced.term = -1;
        assert!(forced.is_newer_than(&a));
        let mut stamped = forced.clone();
        stamped.term = 4;
        assert!(stamped.is_newer_than(&forced));
        assert!(!forced.is_newer_than(&stamped));
    }

    /// `data` data-bearing members then `arbiters` arbiters (`_id` 10, 11, ...).
    fn with_arbiters(data: usize, arbiters: usize) -> ReplSetConfig {
        let mut members = hosts(data);
        members.extend((10..10 + arbiters).map(|i| {
            doc! { "_id": i as i32, "host": format!("127.0.0.{i}:27017"), "arbiterOnly": true }
        }));
        cfg(members)
    }

    #[test]
    fn implicit_default_write_concern_as_mongod_calculates_it() {
        let majority = |c: &ReplSetConfig| c.is_implicit_default_write_concern_majority();
        assert!(majority(&with_arbiters(2, 0)));
        assert!(!majority(&with_arbiters(1, 1)));
        assert!(!majority(&with_arbiters(2, 1)));
        // 3 data-bearing of 4 voters is not more than the majority, 3.
        assert!(!majority(&with_arbiters(3, 1)));
        assert!(majority(&with_arbiters(4, 1)));
        // A newlyAdded member is no voter.
        let mut flagged = with_arbiters(4, 1);
        flagged.members[3].newly_added = true;
        assert!(!majority(&flagged));
    }

    #[test]
    fn an_electable_psa_secondary_needs_a_config_with_two_writable_voters_first() {
        let old = with_arbiters(1, 1);
        let mut one_step = with_arbiters(2, 1);
        one_step.version = 2;
        assert!(check_reconfig_compatible(&old, &one_step, false, true)
            .unwrap_err()
            .contains("PSA topology"));
        assert!(check_reconfig_compatible(&old, &one_step, true, true).is_err());
        assert_eq!(
            check_reconfig_compatible(&old, &one_step, false, false),
            Ok(())
        );
        // Votes with priority 0 first (newlyAdded or not), then the priority.
        let mut vote_first = one_step.clone();
        vote_first.members[1].priority = 0.0;
        vote_first.members[1].newly_added = true;
        assert_eq!(
            check_reconfig_compatible(&old, &vote_first, false, true),
            Ok(())
        );
        let mut then_priority = one_step.clone();
        then_priority.version = 3;
        assert_eq!(
            check_reconfig_compatible(&vote_first, &then_priority, false, true),
            Ok(())
        );
    }

    #[test]
    fn a_second_arbiter_needs_a_parameter_from_5_3() {
        let two = with_arbiters(3, 2);
        let v = |s: &str| s.parse::<ServerVersion>().unwrap();
        assert_eq!(two.check_arbiter_count(v("5.0.30")), Ok(()));
        assert!(two
            .check_arbiter_count(v("5.3.0"))
            .unwrap_err()
            .contains("allowMultipleArbiters"));
        assert_eq!(with_arbiters(2, 1).check_arbiter_count(v("8.0.3")), Ok(()));
    }

    #[test]
    fn new_voters_are_newly_added_and_no_voting_change() {
        let old = cfg(hosts(2));
        let mut two_new = cfg(hosts(4));
        two_new.version = 2;
        assert!(check_reconfig_compatible(&old, &two_new, false, true).is_err());
        for m in two_new.members.iter_mut().skip(2) {
            m.newly_added = true;
        }
        assert_eq!(
            check_reconfig_compatible(&old, &two_new, false, true),
            Ok(())
        );
    }
}
