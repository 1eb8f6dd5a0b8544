//! The keyfile the members run, and how a new key reaches them (pure).
//!
//! mongod reads its keyfile as one key or a YAML sequence of at most two
//! (`security_file.cpp` `readSecurityFile`, `security_key.cpp`
//! `setUpSecurityKey`); it authenticates to a peer with its first key, then
//! its second on `AuthenticationFailed` (`authenticate.cpp`
//! `authenticateInternalClient`), and accepts either of its own
//! (`sasl_scram_server_conversation.cpp`). Two members therefore talk while
//! their keyfiles **share a key**: the invariant every restart keeps
//! ([`share_a_key`], checked by the roll before each restart).
//!
//! A new key `D` in the credentials Secret goes in MongoDB's two phases
//! ("Rotate Keys for Self-Managed Replica Sets"): every member onto `[K, D]`,
//! `K` a key every member holds; then, once every member holds `D`, every
//! member onto `[D]`. Each cluster decides only its own template
//! ([`plan_keyfile`]) from what every member's operator reports its pod runs.

#[cfg(test)]
mod properties;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt;

use crate::build::fingerprint;
use crate::hostconf::MemberAddress;

/// The fingerprint of one key ([`fingerprint`]): what pods, reports and
/// status show of it.
pub type KeyFingerprint = String;

/// The keys every member of the config runs, as their operators reported them
/// (`None`: not reported).
pub type KeysRun = BTreeMap<MemberAddress, Option<Vec<KeyFingerprint>>>;

/// A keyfile: one or two keys, in the order mongod tries them. `Debug` shows
/// fingerprints only.
#[derive(Clone, PartialEq, Eq)]
pub struct Keyfile {
    keys: Vec<String>,
}

impl fmt::Debug for Keyfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Keyfile")
            .field(&self.fingerprints())
            .finish()
    }
}

impl Keyfile {
    /// The keyfile of one key, whitespace removed as mongod removes it.
    pub fn of_key(key: &str) -> Keyfile {
        Keyfile {
            keys: vec![strip(key)],
        }
    }

    /// Reads what [`Keyfile::render`] wrote: a YAML sequence of keys, or one
    /// key. `None` when it holds no key or more than two.
    pub fn parse(text: &str) -> Option<Keyfile> {
        let items: Vec<&str> = text
            .lines()
            .filter_map(|line| line.trim_start().strip_prefix('-'))
            .collect();
        let keys: Vec<String> = if items.is_empty() {
            vec![strip(text)]
        } else {
            items.into_iter().map(strip).collect()
        };
        let usable = (1..=2).contains(&keys.len()) && keys.iter().all(|k| !k.is_empty());
        usable.then_some(Keyfile { keys })
    }

    /// The file mongod reads: a YAML sequence, one key per line.
    pub fn render(&self) -> String {
        self.keys.iter().map(|key| format!("- {key}\n")).collect()
    }

    /// The fingerprint of each key, in order.
    pub fn fingerprints(&self) -> Vec<KeyFingerprint> {
        self.keys.iter().map(|key| fingerprint(key)).collect()
    }

    /// Its keys, in order.
    fn keys(&self) -> &[String] {
        &self.keys
    }
}

/// A key as mongod uses it: without whitespace.
fn strip(key: &str) -> String {
    key.chars().filter(|c| !c.is_whitespace()).collect()
}

/// Whether two members running these keys accept each other: they share one.
pub fn share_a_key(a: &[KeyFingerprint], b: &[KeyFingerprint]) -> bool {
    a.iter().any(|key| b.contains(key))
}

/// The keyfile this cluster's members are to run, given the key of the
/// credentials Secret (`desired`, one key), the keyfiles this cluster knows —
/// its template's first, then those its pods run (none: no member built yet,
/// or built before keyfiles were the operator's) — and the keys every member
/// of the config runs (`None`: not read since the operator started):
/// - `[D]` when there is nothing to roll from, or every member holds `D`;
/// - `[K, D]` for the first known key `K` every member holds;
/// - the template's keyfile otherwise: some member's keys are not known, or
///   it holds none of them (it waits, [`keyfile_progress`] says for whom).
///
/// Reports read a pass earlier may be stale: the roll restarts a member onto
/// the result only while it shares a key with every other member's
/// ([`restart_keeps_a_shared_key`]), and a template that cannot be restarted
/// onto is planned again from the keys the pods run.
pub fn plan_keyfile(desired: &Keyfile, known: &[Keyfile], run: Option<&KeysRun>) -> Keyfile {
    let Some(template) = known.first() else {
        return desired.clone();
    };
    let Some(run) = run.filter(|run| !run.is_empty()) else {
        return template.clone();
    };
    let new_key = &desired.keys()[0];
    let everyone_holds = |key: &str| {
        let key = fingerprint(key);
        run.values()
            .all(|keys| keys.as_ref().is_some_and(|keys| keys.contains(&key)))
    };
    if everyone_holds(new_key) {
        return desired.clone();
    }
    match known
        .iter()
        .flat_map(Keyfile::keys)
        .find(|key| *key != new_key && everyone_holds(key))
    {
        Some(old_key) => Keyfile {
            keys: vec![old_key.clone(), new_key.clone()],
        },
        None => template.clone(),
    }
}

/// Where the keyfile stands, for condition `KeyfileInPlace`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::IntoStaticStr, strum::VariantNames)]
pub enum KeyfileReason {
    /// Every member runs the credentials Secret's key alone.
    KeyfileInPlace,
    /// This cluster rolls a keyfile holding the old and the new key onto its
    /// members.
    AddingNewKey,
    /// This cluster's members run the old and the new key; members of other
    /// clusters do not hold the new key yet.
    NewKeyMissingElsewhere,
    /// Members run a key this cluster's credentials Secret does not hold: the
    /// old key, until they are restarted onto the new key alone, or another
    /// cluster's different keyfile.
    OtherKeysRun,
    /// This cluster cannot roll the new key in: members run none of the keys
    /// of its current keyfile, or their keys are not known.
    WaitingForMembers,
    /// What the members run has not been read yet.
    KeysRunUnknown,
}

/// Condition `KeyfileInPlace`'s status, reason and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyfileProgress {
    /// Whether every member runs the credentials Secret's key alone.
    pub in_place: bool,
    /// Why.
    pub reason: KeyfileReason,
    /// What an SRE reads: the members concerned, by host (their cluster's VIP).
    pub message: String,
}

impl KeyfileProgress {
    /// Before any roll has read what the members run.
    pub fn keys_run_unknown() -> KeyfileProgress {
        KeyfileProgress {
            in_place: false,
            reason: KeyfileReason::KeysRunUnknown,
            message: "the keys the members run are read once the set is in sync".to_string(),
        }
    }
}

/// Where the keyfile stands: `desired` is the credentials Secret's key,
/// `planned` what this cluster's template runs, `run` what every member runs.
pub fn keyfile_progress(
    desired: &Keyfile,
    planned: &Keyfile,
    run: &KeysRun,
    local_vip: &str,
) -> KeyfileProgress {
    let progress = |in_place, reason, message: String| KeyfileProgress {
        in_place,
        reason,
        message,
    };
    if run.is_empty() {
        return KeyfileProgress::keys_run_unknown();
    }
    let new_key = desired.fingerprints();
    let planned_keys = planned.fingerprints();
    let members = |pick: &dyn Fn(&Option<Vec<KeyFingerprint>>) -> bool| -> Vec<String> {
        run.iter()
            .filter(|(_, keys)| pick(keys))
            .map(|(member, _)| member.to_string())
            .collect()
    };
    let holds_new =
        |keys: &Option<Vec<KeyFingerprint>>| keys.as_ref().is_some_and(|k| k.contains(&new_key[0]));
    let local = |member: &MemberAddress| member.host == local_vip;
    if run.values().all(|keys| keys.as_ref() == Some(&new_key)) {
        return progress(
            true,
            KeyfileReason::KeyfileInPlace,
            format!(
                "every member of the set runs the credentials Secret's key ({}) alone",
                new_key[0]
            ),
        );
    }
    let lacking_new = members(&|keys| !holds_new(keys));
    if planned_keys.len() == 2 && planned_keys[1] == new_key[0] {
        let local_behind: Vec<String> = run
            .iter()
            .filter(|(member, keys)| local(member) && keys.as_ref() != Some(&planned_keys))
            .map(|(member, _)| member.to_string())
            .collect();
        if !local_behind.is_empty() || lacking_new.is_empty() {
            return progress(
                false,
                KeyfileReason::AddingNewKey,
                format!(
                    "rolling a keyfile holding the old key ({}) and the new one ({}) onto this \
                     cluster's members; not yet on it: {}",
                    planned_keys[0],
                    planned_keys[1],
                    list(&local_behind)
                ),
            );
        }
        return progress(
            false,
            KeyfileReason::NewKeyMissingElsewhere,
            format!(
                "this cluster's members run the old and the new key; {} run a keyfile without \
                 the new key ({}): the credentials Secret of their clusters must hold it too, \
                 then the new key alone is rolled everywhere",
                list(&lacking_new),
                new_key[0]
            ),
        );
    }
    if !lacking_new.is_empty() {
        return progress(
            false,
            KeyfileReason::WaitingForMembers,
            format!(
                "the new key ({}) waits for {}: they run none of the keys of this cluster's \
                 keyfile ({}), or have not reported what they run",
                new_key[0],
                list(&lacking_new),
                planned_keys.join(", ")
            ),
        );
    }
    let other_keys = members(&|keys| keys.as_ref() != Some(&new_key));
    progress(
        false,
        KeyfileReason::OtherKeysRun,
        format!(
            "{} also run a key this cluster's credentials Secret does not hold: the old key, \
             until they are restarted onto the new key alone, or another cluster's different \
             keyfile (the Secret must be the same in every cluster)",
            list(&other_keys)
        ),
    )
}

/// `a, b and c`, or `none`.
fn list(items: &[String]) -> String {
    match items {
        [] => "none".to_string(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// Whether `member` may be restarted onto a keyfile of `keys`: every other
/// member of `run` runs a key among them. `Err`: the first member that would
/// refuse it, or whose keys are not known.
pub fn restart_keeps_a_shared_key(
    member: &MemberAddress,
    keys: &[KeyFingerprint],
    run: &KeysRun,
) -> Result<(), MemberAddress> {
    match run.iter().find(|(other, other_keys)| {
        *other != member
            && !other_keys
                .as_ref()
                .is_some_and(|other_keys| share_a_key(keys, other_keys))
    }) {
        Some((other, _)) => Err(other.clone()),
        None => Ok(()),
    }
}
