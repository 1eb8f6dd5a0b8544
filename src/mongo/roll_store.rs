//! The roll's shared state in the replica set (MongoDB I/O): the restart lease
//! and the member reports, in `mongodb_member_operator.roll`, read with
//! readConcern "majority" and written with w:"majority", always on the primary
//! the pass observed (directly, never whichever member the driver sees as
//! primary by then). Also each member's server version and the set's
//! featureCompatibilityVersion.
//!
//! Documents: `{_id: "lease", member, primary, acquiredAt, expiresAt}` (times
//! in Unix milliseconds) and `{_id: "member/<host:port>", upToDate, version, revision,
//! revisionSince, keyfile, tlsMode}` (`keyfile`: the fingerprints of the keys its
//! pod runs; `tlsMode`: the TLS mode it runs, absent from operators that predate
//! TLS, whose members run none).
//! The lease is taken by an insert (a duplicate `_id` means somebody holds
//! it); renewed and released only by updates and deletes whose filter names
//! its taking (member and acquiredAt), and taken over only by an update whose
//! filter names the very version seen expired (expiresAt too), so that a
//! renewal in between wins: compare-and-swap.

use std::collections::BTreeMap;

use mongodb::bson::{doc, Bson, Document};

use crate::api::{ClusterAuthMode, TlsMode};

use super::{codes, integer, MongoError, MongoGateway};
use crate::hostconf::MemberAddress;
use crate::roll::{Lease, LeaseView, MemberReport, RollState};
use crate::tls::modes::TlsStep;
use crate::validate::RootCredentials;

/// The database of the operator's own documents.
pub const DATABASE: &str = "mongodb_member_operator";
/// The collection of the roll's documents.
pub const COLLECTION: &str = "roll";
const LEASE_ID: &str = "lease";
const REPORT_PREFIX: &str = "member/";
/// How long a w:"majority" write may wait for its acknowledgement.
const MAJORITY_WAIT_MILLIS: i64 = 10_000;

impl MongoGateway {
    /// Reads the lease and the reports from `primary` (readConcern "majority").
    pub async fn read_roll_state(
        &self,
        primary: &MemberAddress,
        credentials: &RootCredentials,
    ) -> Result<RollState, MongoError> {
        let command = doc! {
            "find": COLLECTION,
            "filter": {},
            "readConcern": {"level": "majority"},
        };
        let reply = self.on_primary(primary, command, credentials).await?;
        let batch = first_batch(&reply)?;
        let mut state = RollState {
            lease: LeaseView::Free,
            reports: BTreeMap::new(),
        };
        for document in batch.iter().filter_map(Bson::as_document) {
            let id = document.get_str("_id").unwrap_or_default();
            if id == LEASE_ID {
                state.lease = LeaseView::Held(lease_from(document)?);
            } else if let Some(host) = id.strip_prefix(REPORT_PREFIX) {
                let Ok(member) = MemberAddress::parse(host) else {
                    continue;
                };
                let report = MemberReport {
                    up_to_date: document.get_bool("upToDate").unwrap_or(false),
                    version: document.get_str("version").ok().map(str::to_owned),
                    revision: document.get_str("revision").ok().map(str::to_owned),
                    revision_since_millis: integer(document.get("revisionSince")),
                    keyfile: document.get_array("keyfile").ok().map(|keys| {
                        keys.iter()
                            .filter_map(Bson::as_str)
                            .map(str::to_owned)
                            .collect()
                    }),
                    tls_mode: tls_step(document),
                    membership: document.get_str("membership").ok().map(str::to_owned),
                };
                state.reports.insert(member, report);
            }
        }
        Ok(state)
    }

    /// Takes the free lease; `false` when somebody holds it already.
    pub async fn acquire_lease(
        &self,
        primary: &MemberAddress,
        lease: &Lease,
        credentials: &RootCredentials,
    ) -> Result<bool, MongoError> {
        let command = doc! {
            "insert": COLLECTION,
            "documents": [lease_document(lease)],
            "writeConcern": majority(),
        };
        let reply = self.on_primary(primary, command, credentials).await?;
        match write_outcome(&reply) {
            Err(error) if error.code() == Some(codes::DUPLICATE_KEY) => Ok(false),
            outcome => outcome.map(|n| n == 1),
        }
    }

    /// Renews the lease `current` (the same taking, maybe renewed since) as
    /// `next`; `false` when `current` is not the stored taking any more.
    pub async fn renew_lease(
        &self,
        primary: &MemberAddress,
        current: &Lease,
        next: &Lease,
        credentials: &RootCredentials,
    ) -> Result<bool, MongoError> {
        self.replace_lease(primary, taking(current), next, credentials)
            .await
    }

    /// Replaces a lease that is over (expired, or its member left the set)
    /// with `next`, only if it is still exactly the version seen (a renewal
    /// since wins); `false` otherwise.
    pub async fn take_over_lease(
        &self,
        primary: &MemberAddress,
        held: &Lease,
        next: &Lease,
        credentials: &RootCredentials,
    ) -> Result<bool, MongoError> {
        let mut filter = taking(held);
        filter.insert("expiresAt", held.expires_at_millis);
        self.replace_lease(primary, filter, next, credentials).await
    }

    async fn replace_lease(
        &self,
        primary: &MemberAddress,
        filter: Document,
        next: &Lease,
        credentials: &RootCredentials,
    ) -> Result<bool, MongoError> {
        let command = doc! {
            "update": COLLECTION,
            "updates": [{"q": filter, "u": lease_document(next), "upsert": false}],
            "writeConcern": majority(),
        };
        let reply = self.on_primary(primary, command, credentials).await?;
        write_outcome(&reply).map(|n| n == 1)
    }

    /// Deletes the lease if it is still the taking of `lease`.
    pub async fn release_lease(
        &self,
        primary: &MemberAddress,
        lease: &Lease,
        credentials: &RootCredentials,
    ) -> Result<bool, MongoError> {
        let command = doc! {
            "delete": COLLECTION,
            "deletes": [{"q": taking(lease), "limit": 1}],
            "writeConcern": majority(),
        };
        let reply = self.on_primary(primary, command, credentials).await?;
        write_outcome(&reply).map(|n| n == 1)
    }

    /// Writes what this cluster reports about `member`.
    pub async fn publish_report(
        &self,
        primary: &MemberAddress,
        member: &MemberAddress,
        report: &MemberReport,
        credentials: &RootCredentials,
    ) -> Result<(), MongoError> {
        let id = format!("{REPORT_PREFIX}{member}");
        let version = report.version.clone().map_or(Bson::Null, Bson::String);
        let revision = report.revision.clone().map_or(Bson::Null, Bson::String);
        let since = report.revision_since_millis.map_or(Bson::Null, Bson::Int64);
        let keyfile = report.keyfile.as_ref().map_or(Bson::Null, |keys| {
            Bson::Array(keys.iter().cloned().map(Bson::String).collect())
        });
        let tls_mode = report
            .tls_mode
            .map_or(Bson::Null, |step| Bson::String(step.mode.as_str().into()));
        let cluster_auth = report
            .tls_mode
            .map_or(Bson::Null, |step| Bson::String(step.auth.as_str().into()));
        let membership = report.membership.clone().map_or(Bson::Null, Bson::String);
        let command = doc! {
            "update": COLLECTION,
            "updates": [{
                "q": {"_id": &id},
                "u": {
                    "_id": &id,
                    "upToDate": report.up_to_date,
                    "version": version,
                    "revision": revision,
                    "revisionSince": since,
                    "keyfile": keyfile,
                    "tlsMode": tls_mode,
                    "clusterAuthMode": cluster_auth,
                    "membership": membership,
                },
                "upsert": true,
            }],
            "writeConcern": majority(),
        };
        let reply = self.on_primary(primary, command, credentials).await?;
        write_outcome(&reply).map(drop)
    }

    /// The server version `member` runs (`buildInfo`, which needs no
    /// authentication: mongod's `CmdBuildInfo::requiresAuth`), asked directly;
    /// `None`: without credentials, as an arbiter is. Asked once per mongod
    /// process: remembered by the processId its `hello` shows
    /// ([`MembersSeen`](super::MembersSeen)).
    pub async fn server_version(
        &self,
        member: &MemberAddress,
        credentials: Option<&RootCredentials>,
    ) -> Result<String, MongoError> {
        let target = member.to_string();
        let client = self.cached_client(std::slice::from_ref(member), true, None, credentials)?;
        let hello = Self::hello(&client, &target).await.ok();
        if let Some(version) = hello.as_ref().and_then(|h| self.seen.version(member, h)) {
            return Ok(version);
        }
        let reply = Self::run(&client, doc! {"buildInfo": 1}, None, &target).await?;
        let version = reply
            .get_str("version")
            .map_err(|_| MongoError::Protocol("buildInfo without version".into()))?;
        if let Some(hello) = &hello {
            self.seen.remember_version(member, hello, version);
        }
        Ok(version.to_owned())
    }

    /// The set's featureCompatibilityVersion, asked of `primary`.
    pub async fn feature_compatibility_version(
        &self,
        primary: &MemberAddress,
        credentials: &RootCredentials,
    ) -> Result<String, MongoError> {
        let client = self.client(std::slice::from_ref(primary), true, None, credentials)?;
        let command = doc! {"getParameter": 1, "featureCompatibilityVersion": 1};
        let reply = Self::run(&client, command, None, &primary.to_string()).await?;
        reply
            .get_document("featureCompatibilityVersion")
            .and_then(|fcv| fcv.get_str("version"))
            .map(str::to_owned)
            .map_err(|_| {
                MongoError::Protocol("getParameter without featureCompatibilityVersion".into())
            })
    }

    /// `setFeatureCompatibilityVersion` on `primary`, w:"majority", shaped
    /// for the binary it runs (asked with `buildInfo` first).
    pub async fn set_feature_compatibility_version(
        &self,
        primary: &MemberAddress,
        version: &str,
        credentials: &RootCredentials,
    ) -> Result<(), MongoError> {
        let binary = self.server_version(primary, Some(credentials)).await?;
        let client = self.client(std::slice::from_ref(primary), true, None, credentials)?;
        let command = set_fcv_command(version, &binary);
        Self::run(&client, command, None, &primary.to_string())
            .await
            .map(drop)
    }

    pub(super) async fn on_primary(
        &self,
        primary: &MemberAddress,
        command: Document,
        credentials: &RootCredentials,
    ) -> Result<Document, MongoError> {
        let client = self.client(std::slice::from_ref(primary), true, None, credentials)?;
        Self::run_on(&client, DATABASE, command, None, &primary.to_string()).await
    }
}

/// The documents of a `find` reply (one batch: the operator's collections
/// are small).
pub(super) fn first_batch(reply: &Document) -> Result<&Vec<Bson>, MongoError> {
    reply
        .get_document("cursor")
        .and_then(|cursor| cursor.get_array("firstBatch"))
        .map_err(|_| MongoError::Protocol("find without cursor.firstBatch".into()))
}

/// `setFeatureCompatibilityVersion` as the `binary` (its `buildInfo.version`)
/// parses it: mongod requires `confirm: true` from 7.0 on and refuses the
/// field before (its command is strict: 40415).
fn set_fcv_command(version: &str, binary: &str) -> Document {
    let major: u32 = binary
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(u32::MAX);
    let mut command = doc! {"setFeatureCompatibilityVersion": version};
    if major >= 7 {
        command.insert("confirm", true);
    }
    command.insert("writeConcern", majority());
    command
}

pub(super) fn majority() -> Document {
    doc! {"w": "majority", "wtimeout": MAJORITY_WAIT_MILLIS}
}

fn lease_document(lease: &Lease) -> Document {
    doc! {
        "_id": LEASE_ID,
        "member": lease.member.to_string(),
        "primary": lease.primary,
        "acquiredAt": lease.acquired_at_millis,
        "expiresAt": lease.expires_at_millis,
    }
}

/// The filter naming one taking of the lease.
fn taking(lease: &Lease) -> Document {
    doc! {
        "_id": LEASE_ID,
        "member": lease.member.to_string(),
        "acquiredAt": lease.acquired_at_millis,
    }
}

fn lease_from(document: &Document) -> Result<Lease, MongoError> {
    let invalid = || MongoError::Protocol(format!("lease document {document}"));
    let member = document
        .get_str("member")
        .ok()
        .and_then(|m| MemberAddress::parse(m).ok())
        .ok_or_else(invalid)?;
    Ok(Lease {
        member,
        primary: document.get_bool("primary").unwrap_or(false),
        acquired_at_millis: integer(document.get("acquiredAt")).ok_or_else(invalid)?,
        expires_at_millis: integer(document.get("expiresAt")).ok_or_else(invalid)?,
    })
}

/// The number of documents a write matched (or inserted), or its error: the
/// first write error, else the write-concern error (not acknowledged by a
/// majority: the outcome is unknown, and the next pass reads it back).
pub(super) fn write_outcome(reply: &Document) -> Result<i64, MongoError> {
    let error = |document: &Document| MongoError::Command {
        code: integer(document.get("code")).unwrap_or_default() as i32,
        code_name: document.get_str("codeName").unwrap_or_default().to_owned(),
        message: document.get_str("errmsg").unwrap_or_default().to_owned(),
    };
    if let Ok(errors) = reply.get_array("writeErrors") {
        if let Some(first) = errors.iter().find_map(Bson::as_document) {
            return Err(error(first));
        }
    }
    if let Ok(concern) = reply.get_document("writeConcernError") {
        return Err(error(concern));
    }
    integer(reply.get("n")).ok_or_else(|| MongoError::Protocol(format!("write reply {reply}")))
}

/// The TLS mode and cluster authentication a report says its member runs:
/// `disabled` and `keyFile` when an older operator wrote none, `None` when
/// it has no pod (`null`) or an unknown mode.
fn tls_step(document: &Document) -> Option<TlsStep> {
    let mode = match document.get("tlsMode") {
        None => TlsMode::Disabled,
        Some(mode) => TlsMode::parse(mode.as_str()?)?,
    };
    let auth = match document.get("clusterAuthMode") {
        None | Some(Bson::Null) => ClusterAuthMode::KeyFile,
        Some(auth) => ClusterAuthMode::parse(auth.as_str()?)?,
    };
    Some(TlsStep::of(mode, auth))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duplicate_key_is_a_write_error_and_a_majority_timeout_is_not_success() {
        let duplicate = doc! {"n": 0, "writeErrors": [{"index": 0, "code": 11000, "errmsg": "E11000 duplicate key"}], "ok": 1};
        assert_eq!(
            write_outcome(&duplicate).unwrap_err().code(),
            Some(codes::DUPLICATE_KEY)
        );
        let unacknowledged = doc! {"n": 1, "writeConcernError": {"code": 64, "codeName": "WriteConcernFailed", "errmsg": "waiting for replication timed out"}, "ok": 1};
        assert_eq!(write_outcome(&unacknowledged).unwrap_err().code(), Some(64));
        assert_eq!(write_outcome(&doc! {"n": 1, "ok": 1}).unwrap(), 1);
    }

    #[test]
    fn confirm_goes_only_to_binaries_that_know_it() {
        for (binary, confirm) in [
            ("5.0.30", false),
            ("6.0.19", false),
            ("7.0.14", true),
            ("8.0.3", true),
        ] {
            let command = set_fcv_command("6.0", binary);
            assert_eq!(command.contains_key("confirm"), confirm, "{binary}");
            assert_eq!(command.get_str("setFeatureCompatibilityVersion"), Ok("6.0"));
        }
    }

    #[test]
    fn a_lease_reads_back_as_written() {
        let lease = Lease::new(MemberAddress::parse("10.0.0.1:30001").unwrap(), true, 5);
        assert_eq!(lease_from(&lease_document(&lease)).unwrap(), lease);
        let filter = taking(&lease);
        assert_eq!(filter.get_i64("acquiredAt").unwrap(), 5);
        assert!(
            filter.get("expiresAt").is_none(),
            "a renewal keeps the taking"
        );
    }
}
