//! mongod's rules, written again for the model federation (`super::world`).
//!
//! The model accepts or rejects a step by these, and the property checkers judge
//! by them: they restate the rules of `docs/replica-set-rules.md` (Part 1)
//! without the code under test (`ReplicaSetConfig::validate`,
//! `replset::reconfig_problems`, `voting_changes`, `voters`, `majority` …).

use std::collections::BTreeSet;

use crate::hostconf::MemberAddress;
use crate::replset::{ConfigMember, ReplicaSetConfig};

/// The hosts that have a vote in `config` (`newlyAdded` voters included).
pub(super) fn voting_hosts(config: &ReplicaSetConfig) -> BTreeSet<&MemberAddress> {
    config
        .members
        .iter()
        .filter(|m| m.votes > 0)
        .map(|m| &m.host)
        .collect()
}

/// The `_id`s of the members that have a vote in `config` (`newlyAdded`
/// voters included): what mongod compares to count voting changes.
pub(super) fn voting_ids(config: &ReplicaSetConfig) -> BTreeSet<i64> {
    config
        .members
        .iter()
        .filter(|m| m.votes > 0)
        .map(|m| m.id)
        .collect()
}

/// Whether `config` lists `host`.
pub(super) fn lists(config: &ReplicaSetConfig, host: &MemberAddress) -> bool {
    config.members.iter().any(|m| &m.host == host)
}

/// Whether a member can be elected: it holds data, votes, is visible and has a
/// priority above 0.
pub(super) fn electable(m: &ConfigMember) -> bool {
    !m.arbiter_only && m.votes == 1 && !m.hidden && m.priority > 0.0
}

/// Whether a member votes in elections now (a `newlyAdded` voter does not).
pub(super) fn votes_now(m: &ConfigMember) -> bool {
    m.votes > 0 && !m.newly_added
}

/// Whether mongod 5.0+'s implicit default write concern for `config` is
/// `{w: "majority"}`: no arbiter, or more data-bearing voters than a
/// majority of the voters (`newlyAdded` members do not vote).
pub(super) fn implicit_majority(config: &ReplicaSetConfig) -> bool {
    let voters = config.members.iter().filter(|m| votes_now(m)).count();
    let arbiters = config.members.iter().filter(|m| m.arbiter_only).count();
    arbiters == 0 || voters - arbiters > voters / 2 + 1
}

/// What in `config` breaks MongoDB's config rules (empty: mongod accepts it).
pub(super) fn config_rule_breaks(config: &ReplicaSetConfig) -> Vec<String> {
    let mut breaks = Vec::new();
    let mut check = |ok: bool, why: String| {
        if !ok {
            breaks.push(why);
        }
    };
    let members = &config.members;
    check(!config.set_name.is_empty(), "no set name".to_owned());
    check(config.version >= 1, format!("version {}", config.version));
    check(
        (1..=50).contains(&members.len()),
        format!("{} members", members.len()),
    );
    let voters = members.iter().filter(|m| m.votes > 0).count();
    check((1..=7).contains(&voters), format!("{voters} voters"));
    check(
        members.iter().any(|m| !m.arbiter_only && m.priority > 0.0),
        "no member can become primary".to_owned(),
    );
    let ids: BTreeSet<i64> = members.iter().map(|m| m.id).collect();
    check(
        ids.len() == members.len(),
        "an _id is used twice".to_owned(),
    );
    let hosts: BTreeSet<&MemberAddress> = members.iter().map(|m| &m.host).collect();
    check(
        hosts.len() == members.len(),
        "a host is listed twice".to_owned(),
    );
    let loopback =
        |h: &MemberAddress| h.host == "localhost" || h.host.starts_with("127.") || h.host == "::1";
    let loopbacks = members.iter().filter(|m| loopback(&m.host)).count();
    check(
        loopbacks == 0 || loopbacks == members.len(),
        "loopback and other hosts mixed".to_owned(),
    );
    for m in members {
        let host = &m.host;
        check(m.id >= 0, format!("{host} has _id {}", m.id));
        check(m.votes <= 1, format!("{host} has {} votes", m.votes));
        check(
            (0.0..=1000.0).contains(&m.priority),
            format!("{host} has priority {}", m.priority),
        );
        if m.arbiter_only {
            check(m.votes == 1, format!("arbiter {host} does not vote"));
            check(m.priority == 0.0, format!("arbiter {host} has a priority"));
        } else if m.priority > 0.0 {
            check(m.votes == 1, format!("non-voter {host} has a priority"));
            check(!m.hidden, format!("hidden {host} has a priority"));
        }
    }
    breaks
}

/// What mongod would reject in `new` as a non-forced reconfig of `old`: the
/// config rules, then version + 1 (mongod asks only for a higher version; the
/// operator always sends exactly the next), the same set name and
/// replicaSetId, the same `_id` and `arbiterOnly` for every host kept, and at
/// most one member (by `_id`) that gains or loses a vote.
pub(super) fn reconfig_rule_breaks(old: &ReplicaSetConfig, new: &ReplicaSetConfig) -> Vec<String> {
    let mut breaks = config_rule_breaks(new);
    if new.version != old.version + 1 {
        breaks.push(format!("version {} after {}", new.version, old.version));
    }
    if new.set_name != old.set_name {
        breaks.push(format!("set name {} after {}", new.set_name, old.set_name));
    }
    if new.settings.replica_set_id != old.settings.replica_set_id {
        breaks.push("another replicaSetId".to_owned());
    }
    for m in &new.members {
        if let Some(before) = old.members.iter().find(|b| b.host == m.host) {
            if before.id != m.id {
                breaks.push(format!("{} changed _id {} to {}", m.host, before.id, m.id));
            }
            if before.arbiter_only != m.arbiter_only {
                breaks.push(format!("{} changed arbiterOnly", m.host));
            }
        }
    }
    let changes = voting_ids(old)
        .symmetric_difference(&voting_ids(new))
        .count();
    if changes > 1 {
        breaks.push(format!("{changes} voting changes"));
    }
    // The PSA rule: two electable data members and an arbiter, from a config
    // where the data-bearing voters are fewer than a majority of the voters.
    let old_voters = old.members.iter().filter(|m| m.votes > 0).count();
    let old_data_voters = old
        .members
        .iter()
        .filter(|m| m.votes > 0 && !m.arbiter_only)
        .count();
    let psa = new.members.len() == 3 && new.members.iter().filter(|m| m.arbiter_only).count() == 1;
    let electable_data = new.members.iter().filter(|m| m.priority > 0.0).count();
    if old_data_voters < old_voters / 2 + 1 && psa && electable_data == 2 {
        breaks.push("PSA with an electable secondary from one writable voter".to_owned());
    }
    breaks
}
