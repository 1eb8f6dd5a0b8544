//! Command errors in mongod's reply shape (`{ok: 0, errmsg, code, codeName}`),
//! with the code names from mongod's `error_codes.yml`.

use bson::{doc, Document};

/// A command failure as mongod reports it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code_name} ({code}): {errmsg}")]
pub struct CmdError {
    pub code: i32,
    pub code_name: &'static str,
    pub errmsg: String,
}

/// InternalError: what a write that killed its process stands on; the client
/// never sees it (a dead member sends no reply).
pub const INTERNAL_ERROR: i32 = 1;
pub const BAD_VALUE: i32 = 2;
pub const FAILED_TO_PARSE: i32 = 9;
pub const USER_NOT_FOUND: i32 = 11;
pub const UNAUTHORIZED: i32 = 13;
pub const TYPE_MISMATCH: i32 = 14;
pub const AUTHENTICATION_FAILED: i32 = 18;
pub const ILLEGAL_OPERATION: i32 = 20;
pub const ALREADY_INITIALIZED: i32 = 23;
pub const MAX_TIME_MS_EXPIRED: i32 = 50;
pub const COMMAND_NOT_FOUND: i32 = 59;
pub const WRITE_CONCERN_FAILED: i32 = 64;
pub const INVALID_OPTIONS: i32 = 72;
pub const NODE_NOT_FOUND: i32 = 74;
pub const UNKNOWN_REPL_WRITE_CONCERN: i32 = 79;
pub const INVALID_REPLICA_SET_CONFIG: i32 = 93;
pub const NOT_YET_INITIALIZED: i32 = 94;
pub const NEW_CONFIG_INCOMPATIBLE: i32 = 103;
pub const NODE_NOT_ELECTABLE: i32 = 104;
pub const CONFIGURATION_IN_PROGRESS: i32 = 109;
pub const COMMAND_FAILED: i32 = 125;
pub const NOT_SECONDARY: i32 = 95;
pub const CONFLICTING_OPERATION_IN_PROGRESS: i32 = 117;
pub const PRIMARY_STEPPED_DOWN: i32 = 189;
pub const EXCEEDED_TIME_LIMIT: i32 = 262;
pub const CURRENT_CONFIG_NOT_COMMITTED_YET: i32 = 308;
pub const DUPLICATE_KEY: i32 = 11000;
pub const INCOMPLETE_TRANSACTION_HISTORY: i32 = 217;
pub const TRANSACTION_TOO_OLD: i32 = 225;
/// A txnNumber on a command that is neither a retryable write nor in a
/// transaction (`service_entry_point_common.cpp`).
pub const NOT_A_RETRYABLE_WRITE_COMMAND: i32 = 50768;
pub const NOT_WRITABLE_PRIMARY: i32 = 10107;
pub const INTERRUPTED_DUE_TO_REPL_STATE_CHANGE: i32 = 11602;
pub const NOT_PRIMARY_NO_SECONDARY_OK: i32 = 13435;
pub const USER_ALREADY_EXISTS: i32 = 51003;
/// `hello.speculativeAuthenticate` names a command other than saslStart or authenticate.
pub const UNKNOWN_SPECULATIVE_AUTHENTICATE: i32 = 51769;
pub const UNSUPPORTED_OP_QUERY_COMMAND: i32 = 352;
pub const INVALID_NAMESPACE: i32 = 73;
pub const NAMESPACE_NOT_FOUND: i32 = 26;
pub const INVALID_PIPELINE_OPERATOR: i32 = 168;
pub const GROUP_FIELDS_NOT_OBJECT: i32 = 15947;
pub const UNKNOWN_GROUP_OPERATOR: i32 = 15952;
pub const GROUP_WITHOUT_ID: i32 = 15955;
pub const LIMIT_NOT_POSITIVE: i32 = 15958;
pub const MATCH_NOT_OBJECT: i32 = 15959;
pub const GROUP_FIELD_NOT_ACCUMULATOR: i32 = 40234;
pub const GROUP_FIELD_NOT_ONE_ACCUMULATOR: i32 = 40238;
pub const STAGE_NOT_ONE_FIELD: i32 = 40323;
pub const UNRECOGNIZED_PIPELINE_STAGE: i32 = 40324;
pub const IDL_REQUIRED_FIELD_MISSING: i32 = 40414;
pub const IDL_UNKNOWN_FIELD: i32 = 40415;
pub const INVALID_SKIP: i32 = 5107200;
pub const INVALID_LIMIT: i32 = 5107201;
pub const INVALID_SSL_CONFIGURATION: i32 = 140;
/// `ClusterAuthMode::set` refusing a transition (5.0+).
pub const ILLEGAL_CLUSTER_AUTH_MODE_TRANSITION: i32 = 5579202;

/// The codeName mongod uses for `code`.
pub fn code_name(code: i32) -> &'static str {
    match code {
        INTERNAL_ERROR => "InternalError",
        NAMESPACE_NOT_FOUND => "NamespaceNotFound",
        BAD_VALUE => "BadValue",
        FAILED_TO_PARSE => "FailedToParse",
        USER_NOT_FOUND => "UserNotFound",
        UNAUTHORIZED => "Unauthorized",
        TYPE_MISMATCH => "TypeMismatch",
        AUTHENTICATION_FAILED => "AuthenticationFailed",
        ILLEGAL_OPERATION => "IllegalOperation",
        ALREADY_INITIALIZED => "AlreadyInitialized",
        MAX_TIME_MS_EXPIRED => "MaxTimeMSExpired",
        COMMAND_NOT_FOUND => "CommandNotFound",
        WRITE_CONCERN_FAILED => "WriteConcernFailed",
        NODE_NOT_FOUND => "NodeNotFound",
        UNKNOWN_REPL_WRITE_CONCERN => "UnknownReplWriteConcern",
        INVALID_REPLICA_SET_CONFIG => "InvalidReplicaSetConfig",
        NOT_YET_INITIALIZED => "NotYetInitialized",
        NEW_CONFIG_INCOMPATIBLE => "NewReplicaSetConfigurationIncompatible",
        NODE_NOT_ELECTABLE => "NodeNotElectable",
        CONFIGURATION_IN_PROGRESS => "ConfigurationInProgress",
        COMMAND_FAILED => "CommandFailed",
        NOT_SECONDARY => "NotSecondary",
        CONFLICTING_OPERATION_IN_PROGRESS => "ConflictingOperationInProgress",
        PRIMARY_STEPPED_DOWN => "PrimarySteppedDown",
        EXCEEDED_TIME_LIMIT => "ExceededTimeLimit",
        CURRENT_CONFIG_NOT_COMMITTED_YET => "CurrentConfigNotCommittedYet",
        DUPLICATE_KEY => "DuplicateKey",
        INCOMPLETE_TRANSACTION_HISTORY => "IncompleteTransactionHistory",
        TRANSACTION_TOO_OLD => "TransactionTooOld",
        NOT_A_RETRYABLE_WRITE_COMMAND => "Location50768",
        NOT_WRITABLE_PRIMARY => "NotWritablePrimary",
        INTERRUPTED_DUE_TO_REPL_STATE_CHANGE => "InterruptedDueToReplStateChange",
        NOT_PRIMARY_NO_SECONDARY_OK => "NotPrimaryNoSecondaryOk",
        USER_ALREADY_EXISTS => "Location51003",
        UNSUPPORTED_OP_QUERY_COMMAND => "UnsupportedOpQueryCommand",
        INVALID_SSL_CONFIGURATION => "InvalidSSLConfiguration",
        ILLEGAL_CLUSTER_AUTH_MODE_TRANSITION => "Location5579202",
        INVALID_NAMESPACE => "InvalidNamespace",
        INVALID_PIPELINE_OPERATOR => "InvalidPipelineOperator",
        GROUP_FIELDS_NOT_OBJECT => "Location15947",
        UNKNOWN_GROUP_OPERATOR => "Location15952",
        GROUP_WITHOUT_ID => "Location15955",
        LIMIT_NOT_POSITIVE => "Location15958",
        MATCH_NOT_OBJECT => "Location15959",
        GROUP_FIELD_NOT_ACCUMULATOR => "Location40234",
        GROUP_FIELD_NOT_ONE_ACCUMULATOR => "Location40238",
        STAGE_NOT_ONE_FIELD => "Location40323",
        UNRECOGNIZED_PIPELINE_STAGE => "Location40324",
        IDL_REQUIRED_FIELD_MISSING => "Location40414",
        // Before 7.0 (the only releases that throw it here) it had no name.
        IDL_UNKNOWN_FIELD => "Location40415",
        INVALID_SKIP => "Location5107200",
        INVALID_LIMIT => "Location5107201",
        28 => "PathNotViable",
        40 => "ConflictingUpdateOperators",
        52 => "DollarPrefixedFieldName",
        56 => "EmptyFieldName",
        66 => "ImmutableField",
        INVALID_OPTIONS => "InvalidOptions",
        258 => "UnknownFeatureCompatibilityVersion",
        40670 => "Location40670",
        4926900 => "Location4926900",
        4926901 => "Location4926901",
        4926902 => "Location4926902",
        4926903 => "Location4926903",
        4926904 => "Location4926904",
        5070601 => "Location5070601",
        5147403 => "Location5147403",
        7369100 => "Location7369100",
        _ => "UnknownError",
    }
}

impl CmdError {
    pub fn new(code: i32, errmsg: impl Into<String>) -> Self {
        CmdError {
            code,
            code_name: code_name(code),
            errmsg: errmsg.into(),
        }
    }

    /// The error reply document.
    pub fn to_document(&self) -> Document {
        doc! { "ok": 0.0, "errmsg": self.errmsg.clone(), "code": self.code, "codeName": self.code_name }
    }
}

/// Shorthand for a failing command result.
pub fn fail<T>(code: i32, errmsg: impl Into<String>) -> Result<T, CmdError> {
    Err(CmdError::new(code, errmsg))
}
