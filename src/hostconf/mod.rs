//! Parser of the **hostconf** ConfigMap: the list of every member of the
//! cross-cluster replica set, written by the control plane and propagated to
//! every member cluster.
//!
//! [`HostConf::from_config_map_data`] reads either of two formats — FedState's
//! (keys `datas` and `arbiters`) or the structured one (key `members.yaml`) —
//! and checks the rules of the whole list; [`HostConf::to_fedstate_data`] writes
//! FedState's. The list is a set: nothing is derived from the order of its
//! entries. Every error names the key and the line at fault.
//!
//! The formats, their rules and their error messages are described for users
//! in [`docs/hostconf.md`](https://github.com/fedstate/mongodb-member-operator/blob/main/docs/hostconf.md).

mod address;
mod error;
mod fedstate;
mod structured;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};

pub use address::{AddressError, MemberAddress};
use error::quote;
pub use error::{EntryProblem, HostConfError, Position};

const DATAS: &str = "datas";
const ARBITERS: &str = "arbiters";
const MEMBERS_YAML: &str = "members.yaml";
const MAX_MEMBERS: usize = 50;
const MAX_VOTERS: usize = 7;

/// One member listed in hostconf. `votes` and `priority` are `None` when the
/// control plane leaves them to the operator (always, in the FedState format).
#[derive(Clone, Debug, PartialEq)]
pub struct HostConfMember {
    pub address: MemberAddress,
    pub arbiter: bool,
    pub votes: Option<u8>,
    pub priority: Option<f64>,
    pub hidden: bool,
    pub tags: BTreeMap<String, String>,
}

/// Every member of the replica set, as the control plane listed it (order
/// carries no meaning).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct HostConf {
    pub members: Vec<HostConfMember>,
}

/// Collects members, refusing duplicates and a second arbiter.
#[derive(Default)]
struct Builder {
    members: Vec<HostConfMember>,
    seen: HashMap<MemberAddress, (&'static str, Position)>,
    arbiter_at: Option<Position>,
}

impl Builder {
    fn push(
        &mut self,
        key: &'static str,
        at: Position,
        member: HostConfMember,
    ) -> Result<(), HostConfError> {
        let problem = if let Some(&(first_key, first_at)) = self.seen.get(&member.address) {
            Some(EntryProblem::Duplicate {
                address: member.address.clone(),
                first_key,
                first_at,
                same_key: first_key == key,
            })
        } else {
            match (member.arbiter, self.arbiter_at) {
                (true, Some(first_at)) => Some(EntryProblem::SecondArbiter { first_at }),
                _ => None,
            }
        };
        if let Some(problem) = problem {
            return Err(HostConfError::At { key, at, problem });
        }
        if member.arbiter {
            self.arbiter_at = Some(at);
        }
        self.seen.insert(member.address.clone(), (key, at));
        self.members.push(member);
        Ok(())
    }
}

impl HostConf {
    /// Parses a ConfigMap's `data` in either format; holding both formats, or
    /// neither, is an error. Keys of neither format are ignored.
    pub fn from_config_map_data(
        data: &BTreeMap<String, String>,
    ) -> Result<HostConf, HostConfError> {
        let fedstate_key = [DATAS, ARBITERS]
            .into_iter()
            .find(|k| data.contains_key(*k));
        let conf = match (fedstate_key, data.get(MEMBERS_YAML)) {
            (Some(fedstate_key), Some(_)) => {
                return Err(HostConfError::MixedFormats { fedstate_key })
            }
            (Some(_), None) => fedstate::parse(data)?,
            (None, Some(yaml)) => structured::parse(yaml)?,
            (None, None) => {
                return Err(HostConfError::NoFormat {
                    keys: key_list(data),
                })
            }
        };
        conf.check_whole_list()?;
        Ok(conf)
    }

    /// The data-bearing members (every member but the arbiter).
    pub fn data_members(&self) -> impl Iterator<Item = &HostConfMember> {
        self.members.iter().filter(|m| !m.arbiter)
    }

    /// The arbiter, if one is listed.
    pub fn arbiter(&self) -> Option<&HostConfMember> {
        self.members.iter().find(|m| m.arbiter)
    }

    /// Members whose host is this cluster's VIP (an IPv6 VIP may be given with
    /// or without brackets).
    pub fn local_to(&self, vip: &str) -> impl Iterator<Item = &HostConfMember> + '_ {
        let vip = vip
            .strip_prefix('[')
            .and_then(|v| v.strip_suffix(']'))
            .unwrap_or(vip)
            .to_owned();
        self.members.iter().filter(move |m| m.address.host == vip)
    }

    /// Renders the FedState format: one `host:'<host>:<port>'` line per member,
    /// always both keys (`arbiters` empty when there is no arbiter), lines
    /// joined by `\n` without a trailing newline, since FedState's control
    /// plane reads its own hostconf without skipping an empty last line.
    /// Votes, priority, hidden and tags are not part of the format.
    pub fn to_fedstate_data(&self) -> BTreeMap<String, String> {
        let line = |m: &HostConfMember| format!("host:'{}'", m.address);
        let datas: Vec<String> = self.data_members().map(line).collect();
        BTreeMap::from([
            (DATAS.to_owned(), datas.join("\n")),
            (
                ARBITERS.to_owned(),
                self.arbiter().map(line).unwrap_or_default(),
            ),
        ])
    }

    /// The rules of the whole list, in both formats: at most 50 members, at
    /// most 7 given a vote explicitly, and a data-bearing member that may
    /// become primary.
    fn check_whole_list(&self) -> Result<(), HostConfError> {
        let count = self.members.len();
        if count > MAX_MEMBERS {
            return Err(HostConfError::TooManyMembers { count });
        }
        let voters = self
            .members
            .iter()
            .filter(|m| m.votes == Some(1) || (m.arbiter && m.votes.is_none()))
            .count();
        if voters > MAX_VOTERS {
            return Err(HostConfError::TooManyVoters { count: voters });
        }
        let may_be_primary = self
            .data_members()
            .any(|m| !m.hidden && m.votes != Some(0) && m.priority.is_none_or(|p| p > 0.0));
        if !may_be_primary {
            return Err(HostConfError::NoElectableMember);
        }
        Ok(())
    }
}

/// The keys of `data`, quoted, for an error that found neither format.
fn key_list(data: &BTreeMap<String, String>) -> String {
    if data.is_empty() {
        return "(none)".to_owned();
    }
    let shown: Vec<String> = data.keys().take(10).map(|k| quote(k)).collect();
    let more = if data.len() > 10 { ", …" } else { "" };
    format!("{}{more}", shown.join(", "))
}
