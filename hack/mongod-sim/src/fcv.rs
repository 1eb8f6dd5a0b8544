//! featureCompatibilityVersion (FCV) as mongod keeps it: the document
//! `{_id: "featureCompatibilityVersion", version: "X.Y"[, targetVersion,
//! previousVersion]}` in `admin.system.version`, parsed by the binary with
//! `FeatureCompatibilityVersionParser::parse` (codes 4926900–4926904, 5070601);
//! the startup check (`FeatureCompatibility::initializeForStartup`: an FCV the
//! binary cannot run is "UPGRADE PROBLEM", exit code 62); `getParameter`
//! (`featureCompatibilityVersion is not yet known.`, 258, before initiate); and
//! `setFeatureCompatibilityVersion` (`confirm: true` since 7.0 → 7369100, an
//! unknown field before 7.0 → 40415, the
//! permitted transitions → 5147403, a transitional document then the final one,
//! each waited for with `w: "majority"`).

use crate::commands::{
    db_of, not_primary, wait_for_write_concern, write_ops, CmdResult, WaitFailure, WriteConcern,
};
use crate::error::{self, fail, CmdError};
use crate::member::Member;
use crate::state::{DurableState, Op, FCV_ID, SYSTEM_VERSION_NS};
use crate::values::{render_document, type_name};
use crate::version::{Release, ServerVersion};
use bson::{doc, Bson, Document};

/// What an FCV document means to a binary (mongod's FCV enum, without the
/// config-server-only transition).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fcv {
    /// `{version: X}`.
    Version(Release),
    /// `{version: from, targetVersion: to}`: an upgrade started and not finished.
    Upgrading { from: Release, to: Release },
    /// `{version: to, targetVersion: to, previousVersion: from}`.
    Downgrading { from: Release, to: Release },
}

impl std::fmt::Display for Fcv {
    /// As mongod's `multiversion::toString` (used in its messages).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fcv::Version(v) => write!(f, "{v}"),
            Fcv::Upgrading { from, to } => write!(f, "upgrading from {from} to {to}"),
            Fcv::Downgrading { from, to } => write!(f, "downgrading from {from} to {to}"),
        }
    }
}

impl Fcv {
    /// Position in mongod's FCV enum order: a version, then the downgrades to it,
    /// then the upgrades from it.
    fn order_key(self) -> (Release, u8) {
        match self {
            Fcv::Version(v) => (v, 0),
            Fcv::Downgrading { to, .. } => (to, 1),
            Fcv::Upgrading { from, .. } => (from, 2),
        }
    }

    /// The document that stores this FCV.
    pub fn document(self) -> Document {
        match self {
            Fcv::Version(v) => doc! { "_id": FCV_ID, "version": v.to_string() },
            Fcv::Upgrading { from, to } => {
                doc! { "_id": FCV_ID, "version": from.to_string(), "targetVersion": to.to_string() }
            }
            Fcv::Downgrading { from, to } => doc! {
                "_id": FCV_ID, "version": to.to_string(), "targetVersion": to.to_string(),
                "previousVersion": from.to_string(),
            },
        }
    }
}

pub const INVALID_FCV_VALUE: i32 = 4926900;
const INVALID_PREVIOUS_VERSION: i32 = 4926901;
const MISSING_PREVIOUS_VERSION: i32 = 4926902;
const UNEXPECTED_PREVIOUS_VERSION: i32 = 4926903;
const INVALID_FCV_DOCUMENT: i32 = 4926904;
const INVALID_UPGRADE_DOCUMENT: i32 = 5070601;
pub const CONFIRM_REQUIRED: i32 = 7369100;
pub const TRANSITION_NOT_PERMITTED: i32 = 5147403;
pub const UNKNOWN_FCV: i32 = 258;
pub const REMOVING_FCV_DOCUMENT: i32 = 40670;

/// mongod's `feature_compatibility_version_documentation::kCompatibilityLink`.
fn compatibility_link(binary: ServerVersion) -> String {
    format!(
        "https://docs.mongodb.com/master/release-notes/{}-compatibility/#feature-compatibility",
        binary.last_lts()
    )
}

/// mongod's `feature_compatibility_version_documentation::kUpgradeLink`.
fn upgrade_link(binary: ServerVersion) -> String {
    format!(
        "https://docs.mongodb.com/master/release-notes/{}/#upgrade-procedures",
        binary.last_lts()
    )
}

/// `FeatureCompatibilityVersionParser::parseVersion`: one of the binary's three
/// FCVs, else 4926900 (7.0 and later name the value; earlier releases do not).
pub fn parse_version(binary: ServerVersion, value: &str) -> Result<Release, CmdError> {
    if let Some(r) = Release::parse(value).filter(|r| binary.can_run(*r)) {
        return Ok(r);
    }
    let [lts, cont, latest] = binary.runnable_fcvs();
    let link = compatibility_link(binary);
    let msg = if binary >= ServerVersion::new(7, 0, 0) {
        format!("Invalid feature compatibility version value '{value}'; expected '{lts}' or '{cont}' or '{latest}'. See {link}.")
    } else {
        format!("Invalid feature compatibility version value, expected '{lts}' or '{cont}' or '{latest}. See {link}.")
    };
    fail(INVALID_FCV_VALUE, msg)
}

/// `FeatureCompatibilityVersionParser::parse` of a whole document: the IDL
/// parse of `version` / `targetVersion` / `previousVersion` (errors carry the
/// document as context), then the shape of upgrading and downgrading states.
pub fn parse_document(binary: ServerVersion, doc: &Document) -> Result<Fcv, CmdError> {
    let link = compatibility_link(binary);
    let context = format!(
        "Invalid featureCompatibilityVersion document in {SYSTEM_VERSION_NS}: {}. See {link}.",
        render_document(doc)
    );
    let with_context =
        |e: CmdError| CmdError::new(e.code, format!("{context} :: caused by :: {}", e.errmsg));
    let field = |name: &str, required: bool| -> Result<Option<Release>, CmdError> {
        match doc.get(name) {
            None if required => fail(
                error::IDL_REQUIRED_FIELD_MISSING,
                format!(
                    "BSON field 'FeatureCompatibilityVersionParser.{name}' is missing but a required field"
                ),
            ),
            None => Ok(None),
            Some(Bson::String(s)) => parse_version(binary, s).map(Some),
            Some(other) => fail(
                error::TYPE_MISMATCH,
                format!(
                    "BSON field 'FeatureCompatibilityVersionParser.{name}' is the wrong type '{}', expected type 'string'",
                    type_name(other)
                ),
            ),
        }
    };
    let version = field("version", true)
        .map_err(with_context)?
        .expect("required");
    let target = field("targetVersion", false).map_err(with_context)?;
    let previous = field("previousVersion", false).map_err(with_context)?;
    let latest = binary.release();
    if let Some(p) = previous {
        if p != latest {
            return Err(with_context(CmdError::new(
                INVALID_PREVIOUS_VERSION,
                "when present, 'previousVersion' field must be the latest binary version",
            )));
        }
    }
    let (lts, cont) = (binary.last_lts(), binary.last_continuous());
    if (version == lts || version == cont) && Some(version) == target {
        return match previous {
            Some(from) => Ok(Fcv::Downgrading { from, to: version }),
            None => fail(
                MISSING_PREVIOUS_VERSION,
                format!("Missing field previousVersion in downgrading states for featureCompatibilityVersion document in {SYSTEM_VERSION_NS}: {}. See {link}.", render_document(doc)),
            ),
        };
    }
    if previous.is_some() {
        return fail(
            UNEXPECTED_PREVIOUS_VERSION,
            format!("Unexpected field previousVersion in non-downgrading states for featureCompatibilityVersion document in {SYSTEM_VERSION_NS}: {}. See {link}.", render_document(doc)),
        );
    }
    let invalid = |code| {
        CmdError::new(
            code,
            format!(
                "Invalid featureCompatibilityVersion document in {SYSTEM_VERSION_NS}: {}. See {link}.",
                render_document(doc)
            ),
        )
    };
    match target {
        Some(t) if t == lts || version == latest => Err(invalid(INVALID_FCV_DOCUMENT)),
        Some(to) if version == lts || version == cont => Ok(Fcv::Upgrading { from: version, to }),
        Some(_) => Err(invalid(INVALID_UPGRADE_DOCUMENT)),
        None => Ok(Fcv::Version(version)),
    }
}

/// The FCV of `disk` as `binary` reads it: None without an FCV document.
pub fn current(binary: ServerVersion, disk: &DurableState) -> Option<Result<Fcv, CmdError>> {
    disk.fcv_document().map(|d| parse_document(binary, d))
}

/// Why a member refuses to start (what mongod logs before it exits).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} (exit code {exit_code})")]
pub struct StartupError {
    /// The process exit code: 62 (`ExitCode::needDowngrade`) for an FCV the
    /// binary cannot run, 14 (`ExitCode::abrupt`, a fatal log) otherwise.
    pub exit_code: i32,
    /// mongod's log id (20573 "Wrong mongod version", 40652 missing FCV document).
    pub log_id: i32,
    /// The log message (`msg`).
    pub log_msg: &'static str,
    /// The error text mongod logs.
    pub message: String,
}

/// mongod's startup checks on the data it finds (`initializeForStartup` and
/// `fassertInitializedAfterStartup`): an FCV document the binary cannot parse
/// stops it with "UPGRADE PROBLEM" and exit code 62; data without an FCV
/// document (outside an unfinished initial sync) stops it as well.
pub fn startup_check(binary: ServerVersion, disk: &DurableState) -> Result<(), StartupError> {
    match disk.fcv_document() {
        Some(doc) => match parse_document(binary, doc) {
            Ok(_) => Ok(()),
            Err(e) => Err(StartupError {
                exit_code: 62,
                log_id: 20573,
                log_msg: "Wrong mongod version",
                message: format!(
                    "UPGRADE PROBLEM: Found an invalid featureCompatibilityVersion document (ERROR: {}: {}). If the current featureCompatibilityVersion is below {}, see the documentation on upgrading at {}.",
                    e.code_name, e.errmsg, binary.last_lts(), upgrade_link(binary)
                ),
            }),
        },
        None if !disk.initial_sync_pending && disk.data.values().any(|c| !c.is_empty()) => {
            Err(StartupError {
                exit_code: 14,
                log_id: 40652,
                log_msg: "Unable to start up mongod due to missing featureCompatibilityVersion document. Please run with --repair to restore the document.",
                message: "Unable to start up mongod due to missing featureCompatibilityVersion document. Please run with --repair to restore the document.".into(),
            })
        }
        None => Ok(()),
    }
}

/// What the FCV op observer says about a write of `doc` (the FCV document):
/// mongod parses it with the binary and fails the write if it cannot.
pub(crate) fn check_write(binary: ServerVersion, doc: &Document) -> Result<(), CmdError> {
    parse_document(binary, doc).map(|_| ())
}

/// `getParameter`: `featureCompatibilityVersion` (explicitly or with `"*"`) is the
/// stored document without `_id`; before the data has one, 258.
pub(crate) fn get_parameter(member: &Member, body: &Document) -> CmdResult {
    let mut d = Document::new();
    let all = matches!(body.get("getParameter"), Some(Bson::String(s)) if s == "*");
    if all || body.contains_key("featureCompatibilityVersion") {
        let Some(mut fcv) = member.disk().fcv_document().cloned() else {
            return fail(UNKNOWN_FCV, "featureCompatibilityVersion is not yet known.");
        };
        fcv.remove("_id");
        d.insert("featureCompatibilityVersion", fcv);
    }
    Ok(d)
}

/// A failed write-concern wait as the command's error (64 / 11602).
pub(crate) fn wait_failure_error(f: WaitFailure) -> CmdError {
    match f {
        WaitFailure::TimedOut => CmdError::new(
            error::WRITE_CONCERN_FAILED,
            "waiting for replication timed out",
        ),
        WaitFailure::SteppedDown => CmdError::new(
            error::INTERRUPTED_DUE_TO_REPL_STATE_CHANGE,
            "operation was interrupted because a replica set state change occurred",
        ),
    }
}

/// Writes the FCV document (update or insert) and waits for a majority.
async fn write_fcv(member: &Member, fcv: Fcv, wc: &WriteConcern) -> Result<(), CmdError> {
    let doc = fcv.document();
    let op = if member.disk().fcv_document().is_some() {
        Op::Update {
            ns: SYSTEM_VERSION_NS.into(),
            doc,
        }
    } else {
        Op::Insert {
            ns: SYSTEM_VERSION_NS.into(),
            doc,
        }
    };
    let (optime, generation) = write_ops(member, vec![op])?;
    wait_for_write_concern(member, optime, generation, wc)
        .await
        .map_err(wait_failure_error)
}

/// `setFeatureCompatibilityVersion`, as mongod's command runs on a replica-set
/// primary (checks in mongod's order).
pub(crate) async fn set_fcv(member: &Member, body: &Document) -> CmdResult {
    if db_of(body) != "admin" {
        return fail(
            error::UNAUTHORIZED,
            "setFeatureCompatibilityVersion may only be run against the admin database.",
        );
    }
    if !member.is_writable_primary() {
        return Err(not_primary());
    }
    let binary = member.version();
    let requested = match body.get("setFeatureCompatibilityVersion") {
        Some(Bson::String(s)) => parse_version(binary, s)?,
        Some(other) => {
            return fail(
                error::TYPE_MISMATCH,
                format!(
                    "BSON field 'setFeatureCompatibilityVersion.setFeatureCompatibilityVersion' is the wrong type '{}', expected type 'string'",
                    type_name(other)
                ),
            )
        }
        None => unreachable!("dispatched on the command name"),
    };
    if body.contains_key("confirm") && !binary.knows_fcv_confirm() {
        return fail(
            error::IDL_UNKNOWN_FIELD,
            "BSON field 'setFeatureCompatibilityVersion.confirm' is an unknown field.",
        );
    }
    let confirm = match body.get("confirm") {
        None => false,
        Some(Bson::Boolean(b)) => *b,
        Some(other) => {
            return fail(
                error::TYPE_MISMATCH,
                format!(
                    "BSON field 'setFeatureCompatibilityVersion.confirm' is the wrong type '{}', expected type 'bool'",
                    type_name(other)
                ),
            )
        }
    };
    let current = match current(binary, &member.disk()) {
        Some(r) => r?,
        None => return fail(UNKNOWN_FCV, "featureCompatibilityVersion is not yet known."),
    };
    let requested_fcv = Fcv::Version(requested);
    let upgrade = requested_fcv.order_key() > current.order_key();
    if binary >= ServerVersion::new(7, 0, 0) && !confirm {
        let msg = if upgrade {
            format!("Once you have upgraded to {requested}, you will not be able to downgrade FCV and binary version without support assistance. Please re-run this command with 'confirm: true' to acknowledge this and continue with the FCV upgrade.")
        } else {
            "Once you have downgraded the FCV, if you choose to downgrade the binary version, it will require support assistance. Please re-run this command with 'confirm: true' to acknowledge this and continue with the FCV downgrade.".to_string()
        };
        return fail(CONFIRM_REQUIRED, msg);
    }
    // mongod always waits for a majority, with the client's wtimeout if any.
    let wc = WriteConcern {
        w: None,
        wtimeout: crate::commands::write_concern(body).wtimeout,
    };
    if requested_fcv == current {
        let (optime, generation) = crate::commands::last_op(member)?;
        let mut reply = doc! {};
        if let Err(f) = wait_for_write_concern(member, optime, generation, &wc).await {
            reply.insert(
                "writeConcernError",
                crate::commands::write_concern_error(f, body),
            );
        }
        return Ok(reply);
    }
    let (latest, lts, cont) = (
        binary.release(),
        binary.last_lts(),
        binary.last_continuous(),
    );
    let transitional = match current {
        Fcv::Version(v) if requested == latest && (v == lts || v == cont) => Fcv::Upgrading {
            from: v,
            to: latest,
        },
        Fcv::Version(v) if v == latest && requested == lts => Fcv::Downgrading {
            from: latest,
            to: lts,
        },
        Fcv::Upgrading { to, .. } | Fcv::Downgrading { to, .. } if to == requested => current,
        _ => {
            return fail(
                TRANSITION_NOT_PERMITTED,
                format!("cannot set featureCompatibilityVersion to '{requested}' while featureCompatibilityVersion is '{current}'"),
            )
        }
    };
    let direction = if upgrade { "upgrade" } else { "downgrade" };
    tracing::info!(member = %member.listen(), id = 6744300, upgradeOrDowngrade = direction,
        fromVersion = %current, toVersion = %requested, "setFeatureCompatibilityVersion command called");
    if transitional != current {
        write_fcv(member, transitional, &wc).await?;
        tracing::info!(member = %member.listen(), id = 6744301, upgradeOrDowngrade = direction,
            "setFeatureCompatibilityVersion has set the FCV to the transitional state");
    }
    write_fcv(member, requested_fcv, &wc).await?;
    tracing::info!(member = %member.listen(), id = 6744302, upgradeOrDowngrade = direction,
        fromVersion = %current, toVersion = %requested, "setFeatureCompatibilityVersion succeeded");
    Ok(doc! {})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> ServerVersion {
        ServerVersion::parse(s).unwrap()
    }

    #[test]
    fn documents_parse_as_the_binary_reads_them() {
        let r = |s| Release::parse(s).unwrap();
        assert_eq!(
            parse_document(v("8.0"), &doc! {"_id": FCV_ID, "version": "7.0"}),
            Ok(Fcv::Version(r("7.0")))
        );
        assert_eq!(
            parse_document(
                v("8.0"),
                &doc! {"_id": FCV_ID, "version": "7.0", "targetVersion": "8.0"}
            ),
            Ok(Fcv::Upgrading {
                from: r("7.0"),
                to: r("8.0")
            })
        );
        assert_eq!(
            parse_document(
                v("8.0"),
                &doc! {"_id": FCV_ID, "version": "7.0", "targetVersion": "7.0", "previousVersion": "8.0"}
            ),
            Ok(Fcv::Downgrading {
                from: r("8.0"),
                to: r("7.0")
            })
        );
        let e = parse_document(
            v("7.0"),
            &doc! {"_id": FCV_ID, "version": "7.0", "targetVersion": "8.0"},
        )
        .unwrap_err();
        assert_eq!(e.code, INVALID_FCV_VALUE);
        assert!(e.errmsg.ends_with(":: caused by :: Invalid feature compatibility version value '8.0'; expected '6.0' or '6.3' or '7.0'. See https://docs.mongodb.com/master/release-notes/6.0-compatibility/#feature-compatibility."), "{}", e.errmsg);
    }

    #[test]
    fn startup_refuses_data_the_binary_cannot_run_with_mongods_message() {
        let mut disk = DurableState::default();
        disk.data.insert(
            SYSTEM_VERSION_NS.into(),
            vec![doc! {"_id": FCV_ID, "version": "6.0"}],
        );
        assert_eq!(startup_check(v("7.0.14"), &disk), Ok(()));
        let e = startup_check(v("8.0.3"), &disk).unwrap_err();
        assert_eq!(e.exit_code, 62);
        // The text a real 8.0 mongod logs for FCV 6.0 data (log id 20573).
        assert_eq!(e.message, "UPGRADE PROBLEM: Found an invalid featureCompatibilityVersion document (ERROR: Location4926900: Invalid featureCompatibilityVersion document in admin.system.version: { _id: \"featureCompatibilityVersion\", version: \"6.0\" }. See https://docs.mongodb.com/master/release-notes/7.0-compatibility/#feature-compatibility. :: caused by :: Invalid feature compatibility version value '6.0'; expected '7.0' or '7.3' or '8.0'. See https://docs.mongodb.com/master/release-notes/7.0-compatibility/#feature-compatibility.). If the current featureCompatibilityVersion is below 7.0, see the documentation on upgrading at https://docs.mongodb.com/master/release-notes/7.0/#upgrade-procedures.");
        disk.data.insert(
            SYSTEM_VERSION_NS.into(),
            vec![doc! {"_id": FCV_ID, "version": "8.0"}],
        );
        assert_eq!(startup_check(v("7.0.14"), &disk).unwrap_err().exit_code, 62);
        assert_eq!(startup_check(v("8.0.0"), &disk), Ok(()));
    }

    #[test]
    fn a_6_0_binary_words_the_error_as_6_0_did() {
        let e = parse_version(v("6.0.5"), "4.4").unwrap_err();
        assert_eq!(e.errmsg, "Invalid feature compatibility version value, expected '5.0' or '5.3' or '6.0. See https://docs.mongodb.com/master/release-notes/5.0-compatibility/#feature-compatibility.");
    }
}
