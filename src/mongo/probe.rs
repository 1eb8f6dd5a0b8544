//! Asking one member directly what it holds: its config, set name and state.
//! The `hello` comes from the driver's monitor (the handshake it makes on
//! every new client, without credentials), so a member whose answers are
//! remembered ([`super::seen`]) and proven unchanged costs that one command
//! and no authenticated connection.

use mongodb::bson::{doc, Document};

use super::config_doc::{config_from_document, integer};
use super::seen::state_in_hello;
use super::{codes, MongoError, MongoGateway};
use crate::hostconf::MemberAddress;
use crate::observe::MemberProbe;
use crate::replset::MemberState;
use crate::validate::RootCredentials;

impl MongoGateway {
    /// Asks one member, directly, what it holds: a config (and which), its set
    /// name and its state.
    pub async fn ask_member(
        &self,
        member: &MemberAddress,
        credentials: &RootCredentials,
    ) -> Result<MemberProbe, MongoError> {
        let target = member.to_string();
        let client = self.client(std::slice::from_ref(member), true, None, credentials)?;
        let hello = Self::hello(&client, &target).await?;
        self.saw_hello(member, &hello);
        let user = user_fingerprint(credentials);
        if let Some(probe) = self.seen.probe(member, &hello, &user) {
            self.answered_from_memory();
            return Ok(MemberProbe {
                me: me_in(&hello),
                ..probe
            });
        }
        let set_name = hello.get_str("setName").ok().map(str::to_string);
        let probe = match Self::ask(&client, doc! {"replSetGetConfig": 1}, &target).await {
            Ok(reply) => {
                let config_document = reply
                    .get_document("config")
                    .map_err(|_| MongoError::Protocol("replSetGetConfig without config".into()))?;
                let config = config_from_document(config_document)
                    .map_err(|e| MongoError::Protocol(e.to_string()))?;
                let (state, too_stale) =
                    match Self::ask(&client, doc! {"replSetGetStatus": 1}, &target).await {
                        Ok(status) => (
                            integer(status.get("myState"))
                                .map(|code| MemberState::from_code(code as i32)),
                            status.get_bool("tooStale").unwrap_or(false),
                        ),
                        // REMOVED: it shows its config, but not a status ("Our
                        // replica set config is invalid or we are not a member of it").
                        Err(error) if error.code() == Some(codes::INVALID_REPLICA_SET_CONFIG) => {
                            (Some(MemberState::Removed), false)
                        }
                        Err(_) => (None, false),
                    };
                MemberProbe {
                    has_config: true,
                    replica_set_id: config.settings.replica_set_id,
                    set_name: Some(config.set_name),
                    state,
                    me: me_in(&hello),
                    too_stale,
                }
            }
            Err(error) if error.code() == Some(codes::NOT_YET_INITIALIZED) => MemberProbe {
                has_config: false,
                replica_set_id: None,
                set_name,
                state: None,
                me: None,
                too_stale: false,
            },
            // A member that is not in its own config any more: it holds one,
            // but not one it can show.
            Err(error) if error.code() == Some(codes::INVALID_REPLICA_SET_CONFIG) => MemberProbe {
                has_config: true,
                replica_set_id: None,
                set_name,
                state: Some(MemberState::Removed),
                me: None,
                too_stale: false,
            },
            Err(error) => return Err(error),
        };
        self.seen.remember_probe(member, &hello, &user, &probe);
        Ok(probe)
    }

    /// Asks an arbiter, directly and without credentials: the monitor's
    /// `hello` is the one question it answers that tells its state. mongod
    /// answers without `setName` while it has no config, or has one without
    /// itself (REMOVED): either way an arbiter that may be added.
    pub async fn ask_arbiter(&self, member: &MemberAddress) -> Result<MemberProbe, MongoError> {
        let target = member.to_string();
        let client = self.anonymous_client(member)?;
        let hello = Self::hello(&client, &target).await?;
        self.saw_hello(member, &hello);
        Ok(probe_from_hello(&hello))
    }

    /// The state `member` reports now (`replSetGetStatus`'s `myState`,
    /// asked directly): a fresh answer, not the pass's first `hello`.
    pub async fn member_state(
        &self,
        member: &MemberAddress,
        credentials: &RootCredentials,
    ) -> Result<Option<MemberState>, MongoError> {
        let target = member.to_string();
        let client = self.client(std::slice::from_ref(member), true, None, credentials)?;
        let status = Self::ask(&client, doc! {"replSetGetStatus": 1}, &target).await?;
        Ok(integer(status.get("myState")).map(|code| MemberState::from_code(code as i32)))
    }
}

/// The user of `credentials` and its password's fingerprint: what a
/// remembered answer was given to.
pub(super) fn user_fingerprint(credentials: &RootCredentials) -> String {
    format!(
        "{}:{}",
        credentials.username,
        crate::build::fingerprint(&credentials.password)
    )
}

/// The host a member goes by in its config (`hello`'s `me`), when it found itself there.
fn me_in(hello: &Document) -> Option<MemberAddress> {
    hello
        .get_str("me")
        .ok()
        .and_then(|me| MemberAddress::parse(me).ok())
}

/// What a member's `hello` tells of it (`TopologyCoordinator::fillHelloForReplSet`).
pub(super) fn probe_from_hello(hello: &Document) -> MemberProbe {
    let set_name = hello.get_str("setName").ok().map(str::to_string);
    MemberProbe {
        has_config: set_name.is_some(),
        replica_set_id: None,
        me: me_in(hello),
        state: state_in_hello(hello),
        set_name,
        too_stale: false,
    }
}
