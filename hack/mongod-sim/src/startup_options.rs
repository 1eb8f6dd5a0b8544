//! mongod's command line and configuration file as mongod reads them at
//! start, for the options a container of the official image passes it (the
//! image's entrypoint ends in `exec "$@"`: the arguments reach mongod as
//! given). What mongod refuses makes it exit before it listens:
//!
//! - an option it does not know, on the command line or in the `--config`
//!   YAML file: `OptionsParser::run` fails and the `StartupOptions` parse
//!   initializer (`src/mongo/util/options_parser/options_parser_init.cpp`)
//!   prints the reason and exits with `ExitCode::badOptions` (2);
//! - what storing the options refuses (`storeServerOptions`,
//!   `src/mongo/db/server_options_server_helpers.cpp`, and `storeBaseOptions`
//!   with `applySetParameterOptions`, `src/mongo/db/server_options_helpers.cpp`):
//!   an unknown `setParameter`, one not settable at startup or a bad value for
//!   one, `--fork` without a log file, a `systemLog` file destination without a
//!   path — printed with "try 'mongod --help' for more information", exit 2
//!   (`mongod_options_init.cpp`);
//! - a log file it cannot open: "Error during global initialization" (log id
//!   20574), `FileNotOpen`, exit 1 (`mongod_main.cpp`).
//!
//! `processManagement.fork` with a log file works as mongod does it: the
//! parent exits 0 once the child is ready, which ends a container.
//! Command-line values override the file's (`OptionsParser::run`), and
//! `--bind_ip_all` replaces any `net.bindIp` (`canonicalizeNetBindIpAll`).
//!
//! Only the options below are known: the ones the operator passes, the
//! settings its `spec.config` maps to, and a few common ones; any other is
//! refused as mongod refuses an unknown one (README, *Differences*).

use crate::tls::{ClusterAuthMode, TlsMode, TlsSpec};
use std::collections::BTreeMap;

/// One option: its configuration-file name, its command-line name, and
/// whether it is a switch (no value on the command line).
struct Opt {
    dotted: &'static str,
    cli: Option<&'static str>,
    switch: bool,
}

const fn opt(dotted: &'static str, cli: Option<&'static str>, switch: bool) -> Opt {
    Opt {
        dotted,
        cli,
        switch,
    }
}

/// The options this parser knows (mongod's IDL names: `server_options_*.idl`,
/// `mongod_options*.idl`, `storage/wiredtiger/wiredtiger_global_options.idl`).
const OPTIONS: &[Opt] = &[
    opt("config", Some("config"), false),
    opt("net.bindIp", Some("bind_ip"), false),
    opt("net.bindIpAll", Some("bind_ip_all"), true),
    opt("net.port", Some("port"), false),
    opt("net.maxIncomingConnections", Some("maxConns"), false),
    opt(
        "net.compression.compressors",
        Some("networkMessageCompressors"),
        false,
    ),
    opt("replication.replSetName", Some("replSet"), false),
    opt("replication.oplogSizeMB", Some("oplogSize"), false),
    opt("security.keyFile", Some("keyFile"), false),
    opt("security.authorization", None, false),
    opt("auth", Some("auth"), true),
    opt("storage.dbPath", Some("dbpath"), false),
    opt(
        "storage.wiredTiger.engineConfig.cacheSizeGB",
        Some("wiredTigerCacheSizeGB"),
        false,
    ),
    opt(
        "storage.wiredTiger.collectionConfig.blockCompressor",
        Some("wiredTigerCollectionBlockCompressor"),
        false,
    ),
    opt(
        "operationProfiling.slowOpThresholdMs",
        Some("slowms"),
        false,
    ),
    opt(
        "operationProfiling.slowOpSampleRate",
        Some("slowOpSampleRate"),
        false,
    ),
    opt("operationProfiling.mode", None, false),
    opt("systemLog.destination", None, false),
    opt("systemLog.path", Some("logpath"), false),
    opt("systemLog.logAppend", Some("logappend"), true),
    opt("systemLog.quiet", Some("quiet"), true),
    opt("processManagement.fork", Some("fork"), true),
    opt("processManagement.pidFilePath", Some("pidfilepath"), false),
    // `src/mongo/util/net/ssl_options_server.idl`, `src/mongo/db/server_options_server_helpers.cpp`.
    opt("net.tls.mode", Some("tlsMode"), false),
    opt(
        "net.tls.certificateKeyFile",
        Some("tlsCertificateKeyFile"),
        false,
    ),
    opt("net.tls.CAFile", Some("tlsCAFile"), false),
    opt("net.tls.clusterFile", Some("tlsClusterFile"), false),
    opt(
        "net.tls.allowConnectionsWithoutCertificates",
        Some("tlsAllowConnectionsWithoutCertificates"),
        true,
    ),
    opt("security.clusterAuthMode", Some("clusterAuthMode"), false),
];

/// What a known server parameter accepts from `setParameter` at startup.
#[derive(Clone, Copy)]
enum Param {
    Int,
    Bool,
    Text,
    /// Known, but its `setFromString` always fails with this reason.
    Refused(&'static str),
}

/// The server parameters this parser knows, each present in every release
/// from 4.4 to 8.0 and settable at startup (their IDLs' `set_at`), but
/// `featureCompatibilityVersion`, whose `setFromString` refuses
/// (`FeatureCompatibilityVersionParameter::setFromString`).
const PARAMETERS: &[(&str, Param)] = &[
    ("authenticationMechanisms", Param::Text),
    ("cursorTimeoutMillis", Param::Int),
    ("diagnosticDataCollectionEnabled", Param::Bool),
    ("enableLocalhostAuthBypass", Param::Bool),
    (
        "featureCompatibilityVersion",
        Param::Refused("featureCompatibilityVersion cannot be set via setParameter. See https://docs.mongodb.com/master/release-notes/7.0-compatibility/#feature-compatibility."),
    ),
    ("logLevel", Param::Int),
    ("maxTransactionLockRequestTimeoutMillis", Param::Int),
    ("minSnapshotHistoryWindowInSeconds", Param::Int),
    ("notablescan", Param::Bool),
    ("transactionLifetimeLimitSeconds", Param::Int),
    ("ttlMonitorEnabled", Param::Bool),
];

/// What the process needs from its container: the files it can read, and
/// whether it can create or append to a file at a path.
pub struct Container<'a> {
    pub read_file: &'a dyn Fn(&str) -> Option<Vec<u8>>,
    pub writable: &'a dyn Fn(&str) -> bool,
}

/// The options mongod started with, as the simulator uses them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartupOptions {
    pub repl_set: Option<String>,
    pub port: u16,
    pub key_file: Option<String>,
    /// `--oplogSize` / `replication.oplogSizeMB`, in bytes (MB × 1024²).
    pub oplog_size_bytes: Option<u64>,
    /// `diagnosticDataCollectionEnabled` (on unless set false).
    pub diagnostic_data: bool,
    /// `net.tls.*` and `security.clusterAuthMode` (files read through the
    /// process's filesystem until the runtime sets [`TlsSpec::files`]). Their
    /// combinations are checked when the member starts
    /// ([`TlsSpec::check_options`]).
    pub tls: TlsSpec,
}

/// mongod ended before it listened: its exit code and what it printed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} (exit code {exit_code})")]
pub struct OptionsExit {
    pub exit_code: i32,
    pub message: String,
}

const BAD_OPTIONS: i32 = 2;
const FAIL: i32 = 1;
const TRY_HELP: &str = "try 'mongod --help' for more information";

fn bad_options(reason: String) -> OptionsExit {
    OptionsExit {
        exit_code: BAD_OPTIONS,
        message: format!("{reason}\n{TRY_HELP}"),
    }
}

/// Parsed values by dotted name; `setParameter` apart.
#[derive(Default)]
struct Environment {
    values: BTreeMap<String, String>,
    parameters: BTreeMap<String, String>,
}

/// Reads `args` (`mongod` first) and the `--config` file they name, and
/// applies mongod's startup checks; `Err` is how the process exits.
pub fn parse(args: &[String], container: &Container) -> Result<StartupOptions, OptionsExit> {
    let command_line = parse_command_line(args)?;
    let mut env = Environment::default();
    if let Some(path) = command_line.values.get("config") {
        let text = (container.read_file)(path).ok_or_else(|| {
            bad_options("Error reading config file: No such file or directory".to_string())
        })?;
        parse_yaml(&String::from_utf8_lossy(&text), &mut env)?;
    }
    // The command line overrides the file.
    env.values.extend(command_line.values);
    env.parameters.extend(command_line.parameters);
    store(&env, container)
}

fn parse_command_line(args: &[String]) -> Result<Environment, OptionsExit> {
    let command_line_error =
        |what: String| bad_options(format!("Error parsing command line: {what}"));
    let mut env = Environment::default();
    let mut rest = args.iter().skip(1);
    while let Some(arg) = rest.next() {
        let Some(flag) = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-')) else {
            return Err(command_line_error(
                "too many positional options have been specified on the command line".into(),
            ));
        };
        let (name, inline) = match flag.split_once('=') {
            Some((name, value)) => (name, Some(value.to_string())),
            None => (flag, None),
        };
        let name = if name == "f" { "config" } else { name };
        if name == "setParameter" {
            let value = inline.or_else(|| rest.next().cloned()).ok_or_else(|| {
                command_line_error(
                    "the required argument for option '--setParameter' is missing".into(),
                )
            })?;
            let (key, value) = value
                .split_once('=')
                .ok_or_else(|| bad_options(format!("Illegal option assignment: \"{value}\"")))?;
            env.parameters.insert(key.to_string(), value.to_string());
            continue;
        }
        let Some(known) = OPTIONS.iter().find(|o| o.cli == Some(name)) else {
            return Err(command_line_error(format!(
                "unrecognised option '--{name}'"
            )));
        };
        let value = if known.switch {
            inline.unwrap_or_else(|| "true".into())
        } else {
            inline.or_else(|| rest.next().cloned()).ok_or_else(|| {
                command_line_error(format!(
                    "the required argument for option '--{name}' is missing"
                ))
            })?
        };
        if known.dotted == "auth" {
            env.values
                .insert("security.authorization".into(), "enabled".into());
        } else {
            env.values.insert(known.dotted.to_string(), value);
        }
    }
    Ok(env)
}

/// `OptionsParser::parseConfigFile` of a YAML file: nested maps name options
/// by their dotted path; `setParameter` is a map of parameters.
fn parse_yaml(text: &str, env: &mut Environment) -> Result<(), OptionsExit> {
    let root: serde_yaml::Value = serde_yaml::from_str(text)
        .map_err(|e| bad_options(format!("Error parsing YAML config file: {e}")))?;
    match root {
        serde_yaml::Value::Null => Ok(()),
        serde_yaml::Value::Mapping(map) => add_yaml(&map, "", env),
        _ => Err(bad_options(
            "No map found at top level of YAML config".into(),
        )),
    }
}

fn add_yaml(
    map: &serde_yaml::Mapping,
    parent: &str,
    env: &mut Environment,
) -> Result<(), OptionsExit> {
    for (key, value) in map {
        let field = scalar(key).unwrap_or_default();
        let dotted = if parent.is_empty() {
            field
        } else {
            format!("{parent}.{field}")
        };
        if dotted == "setParameter" {
            let serde_yaml::Value::Mapping(parameters) = value else {
                return Err(bad_options(format!("Unrecognized option: {dotted}")));
            };
            for (name, value) in parameters {
                env.parameters.insert(
                    scalar(name).unwrap_or_default(),
                    scalar(value).unwrap_or_default(),
                );
            }
            continue;
        }
        match value {
            serde_yaml::Value::Mapping(inner) => add_yaml(inner, &dotted, env)?,
            _ if OPTIONS
                .iter()
                .any(|o| o.dotted == dotted && o.dotted != "auth") =>
            {
                env.values.insert(dotted, scalar(value).unwrap_or_default());
            }
            _ => return Err(bad_options(format!("Unrecognized option: {dotted}"))),
        }
    }
    Ok(())
}

fn scalar(value: &serde_yaml::Value) -> Option<String> {
    match value {
        serde_yaml::Value::String(s) => Some(s.clone()),
        serde_yaml::Value::Bool(b) => Some(b.to_string()),
        serde_yaml::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The storing checks, in mongod's order: base options (`setParameter`,
/// the log destination), then the server's (`--fork`), then the log file.
fn store(env: &Environment, container: &Container) -> Result<StartupOptions, OptionsExit> {
    for (name, value) in &env.parameters {
        apply_parameter(name, value).map_err(bad_options)?;
    }
    let get = |name: &str| env.values.get(name).map(String::as_str);
    let is_true = |name: &str| matches!(get(name), Some("true" | "1"));
    let log_path = match (get("systemLog.destination"), get("systemLog.path")) {
        (Some("file"), None) => {
            return Err(bad_options(
                "BadValue: systemLog.path is required if systemLog.destination is to a file".into(),
            ))
        }
        // `--logpath` on the command line means a file destination.
        (Some("file") | None, Some(path)) => Some(path),
        _ => None,
    };
    if is_true("processManagement.fork") && log_path.is_none() {
        return Err(bad_options(
            "BadValue: --fork has to be used with --logpath or --syslog".into(),
        ));
    }
    // `storeMongodOptions` (`src/mongo/db/mongod_options.cpp`).
    let oplog_size_bytes = match get("replication.oplogSizeMB") {
        None => None,
        Some(mb) => match mb.parse::<i64>() {
            Ok(mb) if mb > 0 => Some(mb as u64 * 1024 * 1024),
            Ok(mb) => {
                return Err(bad_options(format!(
                    "BadValue: bad --oplogSize, arg must be greater than 0,found: {mb}"
                )))
            }
            Err(_) => {
                return Err(bad_options(format!(
                    "Error parsing command line: the argument ('{mb}') for option '--oplogSize' is invalid"
                )))
            }
        },
    };
    let diagnostic_data = !matches!(
        env.parameters
            .get("diagnosticDataCollectionEnabled")
            .map(String::as_str),
        Some("false" | "0")
    );
    if let Some(path) = log_path {
        if !(container.writable)(path) {
            return Err(OptionsExit {
                exit_code: FAIL,
                message: format!("Error during global initialization: FileNotOpen: Can't initialize rotatable log file :: caused by :: Failed to open {path}"),
            });
        }
        if is_true("processManagement.fork") {
            return Err(OptionsExit {
                exit_code: 0,
                message: "about to fork child process, waiting until server is ready for connections.\nchild process started successfully, parent exiting".into(),
            });
        }
    }
    // `storeServerOptions`: `ClusterAuthMode::parse`, in the store
    // initializer (exit 2).
    let cluster_auth_mode =
        match get("security.clusterAuthMode") {
            None => None,
            Some(mode) => Some(ClusterAuthMode::parse(mode).ok_or_else(|| {
                bad_options(format!("BadValue: Invalid clusterAuthMode '{mode}'"))
            })?),
        };
    // The `SSLServerOptions` POST initializer: a failure there is "Error
    // during global initialization" (exit 1).
    let mode = match get("net.tls.mode") {
        None => TlsMode::Disabled,
        Some(mode) => TlsMode::parse(mode).ok_or_else(|| OptionsExit {
            exit_code: FAIL,
            message: format!(
                "Error during global initialization: BadValue: unsupported value for tlsMode {mode}"
            ),
        })?,
    };
    let tls = TlsSpec {
        mode,
        certificate_key_file: get("net.tls.certificateKeyFile").map(str::to_string),
        ca_file: get("net.tls.CAFile").map(str::to_string),
        cluster_file: get("net.tls.clusterFile").map(str::to_string),
        allow_connections_without_certificates: is_true(
            "net.tls.allowConnectionsWithoutCertificates",
        ),
        cluster_auth_mode,
        files: None,
    };
    let port = match get("net.port") {
        None => 27017,
        Some(p) => p.parse().map_err(|_| {
            bad_options(format!(
                "Error parsing command line: the argument ('{p}') for option '--port' is invalid"
            ))
        })?,
    };
    Ok(StartupOptions {
        repl_set: get("replication.replSetName").map(str::to_string),
        port,
        key_file: get("security.keyFile").map(str::to_string),
        oplog_size_bytes,
        diagnostic_data,
        tls,
    })
}

/// `applySetParameterOptions`: the parameter must exist, be settable at
/// startup and take the value.
fn apply_parameter(name: &str, value: &str) -> Result<(), String> {
    let Some((_, kind)) = PARAMETERS.iter().find(|(known, _)| *known == name) else {
        return Err(format!(
            "BadValue: Illegal --setParameter parameter: \"{name}\""
        ));
    };
    let bad = |reason: String| format!("BadValue: Bad value for parameter \"{name}\": {reason}");
    match kind {
        Param::Int if value.parse::<i64>().is_err() => {
            Err(bad(format!("Failed to parse \"{value}\" as a number")))
        }
        Param::Bool if !matches!(value, "true" | "false" | "1" | "0") => {
            Err(bad(format!("Failed to parse \"{value}\" as a boolean")))
        }
        Param::Refused(reason) => Err(bad(reason.to_string())),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The operator's arguments, plus `extra`.
    fn operator_args(extra: &[&str]) -> Vec<String> {
        let mut args: Vec<String> = [
            "mongod",
            "--replSet",
            "replset-0",
            "--bind_ip_all",
            "--port",
            "27017",
            "--dbpath",
            "/data/db",
            "--keyFile",
            "/etc/mongodb/keyfile/keyfile",
            "--auth",
        ]
        .map(String::from)
        .into();
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    }

    fn run(extra: &[&str], config: Option<&str>) -> Result<StartupOptions, OptionsExit> {
        let config = config.map(str::to_string);
        let read_file = move |path: &str| {
            (path == "/etc/mongodb/custom/mongod.yaml")
                .then(|| config.clone())
                .flatten()
                .map(String::into_bytes)
        };
        let writable = |path: &str| path.starts_with("/data/db/") || path.starts_with("/tmp/");
        parse(
            &operator_args(extra),
            &Container {
                read_file: &read_file,
                writable: &writable,
            },
        )
    }

    const CONFIG: [&str; 2] = ["--config", "/etc/mongodb/custom/mongod.yaml"];

    #[test]
    fn the_operators_arguments_start_mongod() {
        let started = run(
            &[
                "--setParameter",
                "cursorTimeoutMillis=600000",
                "--oplogSize",
                "2048",
                "--quiet",
                "--slowms=150",
            ],
            None,
        )
        .unwrap();
        assert_eq!(started.repl_set.as_deref(), Some("replset-0"));
        assert_eq!(started.port, 27017);
        assert_eq!(
            started.key_file.as_deref(),
            Some("/etc/mongodb/keyfile/keyfile")
        );
        assert_eq!(started.oplog_size_bytes, Some(2048 * 1024 * 1024));
        assert!(started.diagnostic_data);
        let from_file = run(
            &CONFIG,
            Some("replication:\n  oplogSizeMB: 990\nsetParameter:\n  diagnosticDataCollectionEnabled: false\n"),
        )
        .unwrap();
        assert_eq!(from_file.oplog_size_bytes, Some(990 * 1024 * 1024));
        assert!(!from_file.diagnostic_data);
        let zero = run(&["--oplogSize", "0"], None).unwrap_err();
        assert_eq!(zero.exit_code, 2);
        assert!(zero
            .message
            .starts_with("BadValue: bad --oplogSize, arg must be greater than 0"));
    }

    #[test]
    fn unknown_options_and_parameters_exit_with_code_2() {
        let unknown = run(&["--logLevel", "1"], None).unwrap_err();
        assert_eq!(unknown.exit_code, 2);
        assert!(unknown.message.starts_with(
            "Error parsing command line: unrecognised option '--logLevel'\ntry 'mongod --help'"
        ));
        let parameter = run(&["--setParameter", "LOG_LEVEL=info"], None).unwrap_err();
        assert_eq!(parameter.exit_code, 2);
        assert!(parameter
            .message
            .starts_with("BadValue: Illegal --setParameter parameter: \"LOG_LEVEL\""));
        let fcv = run(&["--setParameter", "featureCompatibilityVersion=7.0"], None).unwrap_err();
        assert!(fcv.message.contains("cannot be set via setParameter"));
        let value = run(&["--setParameter", "notablescan=maybe"], None).unwrap_err();
        assert!(value
            .message
            .contains("Bad value for parameter \"notablescan\""));
        let yaml = run(&CONFIG, Some("storage:\n  journal:\n    enabled: true\n")).unwrap_err();
        assert_eq!(yaml.exit_code, 2);
        assert!(yaml
            .message
            .starts_with("Unrecognized option: storage.journal.enabled"));
        let in_file = run(&CONFIG, Some("setParameter:\n  nope: 1\n")).unwrap_err();
        assert!(in_file
            .message
            .contains("Illegal --setParameter parameter: \"nope\""));
    }

    #[test]
    fn tls_options_on_the_command_line_and_in_the_file() {
        let started = run(
            &[
                "--tlsMode",
                "requireTLS",
                "--tlsCertificateKeyFile",
                "/tls/server.pem",
                "--tlsCAFile=/tls/ca.pem",
                "--tlsAllowConnectionsWithoutCertificates",
                "--clusterAuthMode",
                "sendX509",
            ],
            None,
        )
        .unwrap();
        assert_eq!(started.tls.mode, TlsMode::RequireTls);
        assert_eq!(
            started.tls.certificate_key_file.as_deref(),
            Some("/tls/server.pem")
        );
        assert_eq!(started.tls.ca_file.as_deref(), Some("/tls/ca.pem"));
        assert!(started.tls.allow_connections_without_certificates);
        assert_eq!(
            started.tls.cluster_auth_mode,
            Some(ClusterAuthMode::SendX509)
        );
        let from_file = run(
            &CONFIG,
            Some("net:\n  tls:\n    mode: preferTLS\n    certificateKeyFile: /tls/s.pem\n    clusterFile: /tls/c.pem\nsecurity:\n  clusterAuthMode: x509\n"),
        )
        .unwrap();
        assert_eq!(from_file.tls.mode, TlsMode::PreferTls);
        assert_eq!(from_file.tls.cluster_file.as_deref(), Some("/tls/c.pem"));
        assert_eq!(from_file.tls.cluster_auth_mode, Some(ClusterAuthMode::X509));
        assert_eq!(run(&[], None).unwrap().tls.mode, TlsMode::Disabled);
        let bad_mode = run(&["--tlsMode", "requireSSL"], None).unwrap_err();
        assert_eq!(bad_mode.exit_code, 1);
        assert!(bad_mode
            .message
            .ends_with("unsupported value for tlsMode requireSSL"));
        let bad_auth = run(&["--clusterAuthMode", "X509"], None).unwrap_err();
        assert_eq!(bad_auth.exit_code, 2);
        assert!(bad_auth
            .message
            .starts_with("BadValue: Invalid clusterAuthMode 'X509'"));
    }

    #[test]
    fn a_custom_config_that_fights_the_operators_options() {
        // --bind_ip_all replaces net.bindIp; --port overrides the file's port.
        let started = run(&CONFIG, Some("net:\n  bindIp: 10.0.0.1\n  port: 1234\n")).unwrap();
        assert_eq!(started.port, 27017);
        let fork = run(&CONFIG, Some("processManagement:\n  fork: true\n")).unwrap_err();
        assert_eq!(fork.exit_code, 2);
        assert!(fork
            .message
            .contains("--fork has to be used with --logpath"));
        let no_path = run(&CONFIG, Some("systemLog:\n  destination: file\n")).unwrap_err();
        assert!(no_path.message.contains("systemLog.path is required"));
        let read_only = run(
            &CONFIG,
            Some("systemLog:\n  destination: file\n  path: /var/log/mongodb/mongod.log\n"),
        )
        .unwrap_err();
        assert_eq!(read_only.exit_code, 1);
        assert!(read_only
            .message
            .contains("Failed to open /var/log/mongodb/mongod.log"));
        run(
            &CONFIG,
            Some("systemLog:\n  destination: file\n  path: /data/db/mongod.log\n"),
        )
        .expect("a writable log file is fine");
        let forked = run(
            &CONFIG,
            Some("systemLog:\n  destination: file\n  path: /tmp/mongod.log\nprocessManagement:\n  fork: true\n"),
        )
        .unwrap_err();
        assert_eq!(
            forked.exit_code, 0,
            "the parent exits once the child is ready"
        );
        let missing = run(&CONFIG, None).unwrap_err();
        assert_eq!(missing.exit_code, 2);
    }
}
