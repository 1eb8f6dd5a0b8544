//! What an instance's passes saw of its members, kept between passes so
//! that a pass at rest does not ask again what cannot have changed. Each
//! fact is trusted only while what proves it unchanged is unchanged, read
//! from the `hello` the driver's monitor gets at every connection (its
//! handshake: no credentials, no session):
//!
//! - `topologyVersion.processId` is drawn anew each time mongod starts
//!   (4.4+; the awaitable `hello` design), so one process answers with one
//!   binary: its `buildInfo` version holds for as long as the processId does.
//! - `topologyVersion.counter` changes whenever the member's `hello` would:
//!   every member-state change and every config it installs
//!   (`ReplicationCoordinatorImpl::_fulfillTopologyChangePromise`, called by
//!   `_updateMemberStateFromTopologyCoordinator`, which every config
//!   installation and election runs). So while the processId and counter are
//!   those of a probe, the member holds the same config (`replicaSetId`, set
//!   name) and is in the same state; a member that says it is PRIMARY or
//!   SECONDARY is not too stale (mongod reports that from RECOVERING only).
//!
//! - A config the primary reported majority-committed (`replSetGetConfig`'s
//!   `commitmentStatus`: the config held by a majority of the voters, and
//!   the commit point past the config's oplog entry) stays so while that
//!   primary's processId and counter are unchanged (no new config, no
//!   election: the commit point never goes back within a term) and its
//!   status shows every voter healthy at that config's version and term.
//!
//! Lost on restart, harmlessly: the first pass asks everything.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use mongodb::bson::oid::ObjectId;
use mongodb::bson::{Document, RawDocumentBuf};

use super::config_doc::{config_from_document, integer};
use crate::hostconf::MemberAddress;
use crate::observe::MemberProbe;
use crate::replset::MemberState;

/// What an instance's passes saw of its members: shared by the gateways of
/// its passes (cloning shares it).
#[derive(Clone, Default)]
pub struct MembersSeen(Arc<Mutex<Seen>>);

#[derive(Default)]
struct Seen {
    /// By member: a few entries, in a table smaller than a B-tree's node.
    members: HashMap<MemberAddress, MemberSeen>,
    committed: Option<CommittedConfig>,
}

/// The config document a primary reported majority-committed, and the
/// `topologyVersion` it answered with. The config is kept as its BSON bytes:
/// one allocation instead of one per field, for every instance at rest.
struct CommittedConfig {
    primary: MemberAddress,
    topology: TopologyVersion,
    config: RawDocumentBuf,
}

/// One member as last seen.
#[derive(Clone, Debug, Default, PartialEq)]
struct MemberSeen {
    /// The server version of a process, by its processId.
    version: Option<(ObjectId, String)>,
    /// The probe a process answered at a counter, to these credentials.
    probe: Option<ProbeSeen>,
}

#[derive(Clone, Debug, PartialEq)]
struct ProbeSeen {
    topology: TopologyVersion,
    /// The fingerprint of the credentials it answered to.
    user: String,
    probe: MemberProbe,
}

/// A member's `topologyVersion`: which process answered, and at which change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct TopologyVersion {
    process: ObjectId,
    counter: i64,
}

impl TopologyVersion {
    /// The `topologyVersion` of a `hello` reply (absent before 4.4).
    pub(super) fn of(hello: &Document) -> Option<Self> {
        let version = hello.get_document("topologyVersion").ok()?;
        Some(TopologyVersion {
            process: version.get_object_id("processId").ok()?,
            counter: integer(version.get("counter"))?,
        })
    }
}

/// The state a `hello` reply shows without doubt: PRIMARY when it accepts
/// writes (a primary still draining its oplog says neither, and is asked),
/// SECONDARY, ARBITER.
pub(super) fn state_in_hello(hello: &Document) -> Option<MemberState> {
    let flag = |name: &str| hello.get_bool(name).unwrap_or(false);
    if hello.get_str("setName").is_err() {
        None
    } else if flag("arbiterOnly") {
        Some(MemberState::Arbiter)
    } else if flag("isWritablePrimary") || flag("ismaster") {
        Some(MemberState::Primary)
    } else if flag("secondary") {
        Some(MemberState::Secondary)
    } else {
        None
    }
}

impl MembersSeen {
    fn with<T>(&self, f: impl FnOnce(&mut HashMap<MemberAddress, MemberSeen>) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(|p| p.into_inner()).members)
    }

    /// The config `primary` reported majority-committed before, if its
    /// `hello` shows the same process at the same counter and `status`,
    /// its `replSetGetStatus` now, every voter of that config healthy with
    /// its version and term: it is committed still.
    pub(super) fn committed_config(
        &self,
        primary: &MemberAddress,
        hello: &Document,
        status: &Document,
    ) -> Option<Document> {
        let topology = TopologyVersion::of(hello)?;
        let config = {
            let seen = self.0.lock().unwrap_or_else(|p| p.into_inner());
            let committed = seen.committed.as_ref()?;
            (committed.primary == *primary && committed.topology == topology)
                .then(|| committed.config.to_document().ok())??
        };
        let parsed = config_from_document(&config).ok()?;
        let term = parsed.term?;
        let at_config = |entry: &Document| {
            let health = entry
                .get("health")
                .and_then(|h| h.as_f64().or_else(|| integer(Some(h)).map(|v| v as f64)));
            health == Some(1.0)
                && integer(entry.get("configVersion")) == Some(parsed.version)
                && integer(entry.get("configTerm")) == Some(term)
        };
        let entries: Vec<&Document> = status
            .get_array("members")
            .ok()?
            .iter()
            .filter_map(|entry| entry.as_document())
            .collect();
        let every_voter = parsed.voters().all(|voter| {
            entries.iter().any(|entry| {
                let name = entry.get_str("name").ok();
                name.and_then(|name| MemberAddress::parse(name).ok())
                    .as_ref()
                    == Some(&voter.host)
                    && at_config(entry)
            })
        });
        every_voter.then_some(config)
    }

    /// Remembers `config` as the config `primary`, which answered `hello`,
    /// reported majority-committed.
    pub(super) fn remember_committed(
        &self,
        primary: &MemberAddress,
        hello: &Document,
        config: &Document,
    ) {
        let Some(topology) = TopologyVersion::of(hello) else {
            return;
        };
        let Ok(config) = RawDocumentBuf::from_document(config) else {
            return;
        };
        self.0.lock().unwrap_or_else(|p| p.into_inner()).committed = Some(CommittedConfig {
            primary: primary.clone(),
            topology,
            config,
        });
    }

    /// The probe `member` answered before, if its `hello` now proves it
    /// unchanged: the same process at the same counter, to the same
    /// credentials, PRIMARY or SECONDARY then and now.
    pub(super) fn probe(
        &self,
        member: &MemberAddress,
        hello: &Document,
        user: &str,
    ) -> Option<MemberProbe> {
        let topology = TopologyVersion::of(hello)?;
        let state = state_in_hello(hello)?;
        let seen = self.with(|seen| seen.get(member)?.probe.clone())?;
        let unchanged = seen.topology == topology
            && seen.user == user
            && seen.probe.state == Some(state)
            && matches!(state, MemberState::Primary | MemberState::Secondary);
        unchanged.then_some(seen.probe)
    }

    /// Remembers the probe `member` answered after `hello`, when `hello`
    /// can prove it unchanged later.
    pub(super) fn remember_probe(
        &self,
        member: &MemberAddress,
        hello: &Document,
        user: &str,
        probe: &MemberProbe,
    ) {
        let Some(topology) = TopologyVersion::of(hello) else {
            return;
        };
        let seen = ProbeSeen {
            topology,
            user: user.to_string(),
            probe: probe.clone(),
        };
        self.with(|members| members.entry(member.clone()).or_default().probe = Some(seen));
    }

    /// The server version the process that answered `hello` runs, when
    /// known.
    pub(super) fn version(&self, member: &MemberAddress, hello: &Document) -> Option<String> {
        let process = TopologyVersion::of(hello)?.process;
        let (seen, version) = self.with(|seen| seen.get(member)?.version.clone())?;
        (seen == process).then_some(version)
    }

    /// Remembers the server version of the process that answered `hello`.
    pub(super) fn remember_version(&self, member: &MemberAddress, hello: &Document, version: &str) {
        let Some(topology) = TopologyVersion::of(hello) else {
            return;
        };
        self.with(|members| {
            members.entry(member.clone()).or_default().version =
                Some((topology.process, version.to_string()))
        });
    }

    /// Forgets every probe (the versions stay: they hold per process).
    pub(super) fn forget_probes(&self) {
        self.with(|members| members.values_mut().for_each(|m| m.probe = None));
    }

    /// Forgets the members not in `asked`: those a pass no longer asks.
    pub(super) fn keep_only(&self, asked: &BTreeSet<MemberAddress>) {
        self.with(|members| members.retain(|member, _| asked.contains(member)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mongodb::bson::doc;

    fn member(host: &str) -> MemberAddress {
        MemberAddress::parse(host).unwrap()
    }

    /// A secondary's `hello` from process `process` at `counter`.
    fn hello(process: ObjectId, counter: i64, secondary: bool) -> Document {
        doc! {
            "setName": "rs0", "secondary": secondary, "ismaster": false,
            "me": "10.0.0.1:30001",
            "topologyVersion": {"processId": process, "counter": counter},
        }
    }

    fn probe() -> MemberProbe {
        MemberProbe {
            has_config: true,
            replica_set_id: Some("65a000000000000000000001".into()),
            set_name: Some("rs0".into()),
            state: Some(MemberState::Secondary),
            me: Some(member("10.0.0.1:30001")),
            too_stale: false,
        }
    }

    #[test]
    fn a_probe_holds_for_one_process_at_one_counter_to_one_user() {
        let (seen, local) = (MembersSeen::default(), member("10.0.0.1:30001"));
        let process = ObjectId::new();
        seen.remember_probe(&local, &hello(process, 4, true), "root:a", &probe());
        assert_eq!(
            seen.probe(&local, &hello(process, 4, true), "root:a"),
            Some(probe())
        );
        // A new config or a state change moves the counter; a restart, the process.
        assert_eq!(seen.probe(&local, &hello(process, 5, true), "root:a"), None);
        assert_eq!(
            seen.probe(&local, &hello(ObjectId::new(), 4, true), "root:a"),
            None
        );
        // Other credentials are asked with: they may be refused.
        assert_eq!(seen.probe(&local, &hello(process, 4, true), "root:b"), None);
        // Neither PRIMARY nor SECONDARY: its state (RECOVERING, too stale?) is asked.
        assert_eq!(
            seen.probe(&local, &hello(process, 4, false), "root:a"),
            None
        );
        // Before 4.4, no topologyVersion: nothing proves it unchanged.
        let mut old = hello(process, 4, true);
        old.remove("topologyVersion");
        assert_eq!(seen.probe(&local, &old, "root:a"), None);
        seen.forget_probes();
        assert_eq!(seen.probe(&local, &hello(process, 4, true), "root:a"), None);
    }

    #[test]
    fn a_version_holds_for_the_process_that_answered() {
        let (seen, local) = (MembersSeen::default(), member("10.0.0.1:30001"));
        let process = ObjectId::new();
        seen.remember_version(&local, &hello(process, 1, true), "7.0.14");
        assert_eq!(
            seen.version(&local, &hello(process, 9, false)).as_deref(),
            Some("7.0.14")
        );
        assert_eq!(seen.version(&local, &hello(ObjectId::new(), 1, true)), None);
        seen.keep_only(&BTreeSet::new());
        assert_eq!(seen.version(&local, &hello(process, 1, true)), None);
    }

    /// A config of three voters at version 3, term 2.
    fn config() -> Document {
        doc! {
            "_id": "rs0", "version": 3, "term": 2,
            "members": [
                {"_id": 0, "host": "10.0.0.1:30001"},
                {"_id": 1, "host": "10.0.0.2:30001"},
                {"_id": 2, "host": "10.0.0.3:30001"},
            ],
            "settings": {"replicaSetId": ObjectId::new()},
        }
    }

    /// The primary's status: each member healthy or not, at `version` and term 2.
    fn status(healthy: [bool; 3], version: i32) -> Document {
        let members: Vec<Document> = (0..3)
            .map(|i| {
                doc! {
                    "_id": i, "name": format!("10.0.0.{}:30001", i + 1),
                    "health": if healthy[i as usize] { 1.0 } else { 0.0 },
                    "configVersion": if healthy[i as usize] { version } else { -1 },
                    "configTerm": if healthy[i as usize] { 2_i64 } else { -1 },
                }
            })
            .collect();
        doc! {"set": "rs0", "myState": 1, "members": members}
    }

    #[test]
    fn a_committed_config_holds_while_every_voter_holds_it_under_the_same_primary() {
        let (seen, primary) = (MembersSeen::default(), member("10.0.0.1:30001"));
        let process = ObjectId::new();
        let at = |counter| hello(process, counter, false);
        let config = config();
        seen.remember_committed(&primary, &at(7), &config);
        let all = status([true; 3], 3);
        assert_eq!(seen.committed_config(&primary, &at(7), &all), Some(config));
        // A voter down or behind: mongod is asked.
        let one_down = status([true, true, false], 3);
        assert_eq!(seen.committed_config(&primary, &at(7), &one_down), None);
        assert_eq!(
            seen.committed_config(&primary, &at(7), &status([true; 3], 2)),
            None
        );
        // An election or a new config since, or another primary.
        assert_eq!(seen.committed_config(&primary, &at(8), &all), None);
        assert_eq!(
            seen.committed_config(&member("10.0.0.2:30001"), &at(7), &all),
            None
        );
    }
}
