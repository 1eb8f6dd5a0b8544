//! What `spec.config` means: mongod configuration-file settings, named by
//! their dotted path (`storage.wiredTiger.engineConfig.cacheSizeGB`), each
//! checked and turned into its command-line option, in the order of their
//! names so that the pod template does not change when the control plane
//! sends them in another order (FedState sends a Go map's random order).
//!
//! Only the settings listed in `SETTINGS` and the server parameters listed in
//! `PARAMETERS` (`setParameter.<name>`) are passed to mongod. Anything else — an unknown name (FedState's sample sends
//! `LOG_LEVEL`), a value out of range, a setting the operator owns (`--replSet`,
//! `--keyFile`, `--port` …) — is never passed: mongod refuses unknown options
//! at start, and the pod would crash-loop. Each is reported with the reason, in
//! the `ConfigAccepted` condition and a Warning Event.

use std::collections::BTreeMap;
use std::fmt;

use crate::api::ConfigVar;

/// What a setting's value may be.
#[derive(Clone, Copy, Debug)]
enum Value {
    /// A whole number in the range.
    Integer { min: i64, max: i64 },
    /// A number in the range.
    Number { min: f64, max: f64 },
    /// One of these words.
    OneOf(&'static [&'static str]),
    /// A comma-separated list of these words.
    ListOf(&'static [&'static str]),
    /// `true` (the option is given) or `false` (it is not).
    Switch,
}

/// A configuration-file setting the operator passes to mongod.
#[derive(Clone, Copy, Debug)]
struct Setting {
    /// The dotted configuration-file name, as `spec.config[].name` gives it.
    name: &'static str,
    /// The command-line option mongod reads it from.
    option: &'static str,
    /// What its value may be.
    value: Value,
}

/// The settings `spec.config` may carry, besides `setParameter.<name>`.
const SETTINGS: &[Setting] = &[
    Setting {
        name: "net.compression.compressors",
        option: "--networkMessageCompressors",
        value: Value::ListOf(&["snappy", "zstd", "zlib", "disabled"]),
    },
    Setting {
        name: "net.maxIncomingConnections",
        option: "--maxConns",
        value: Value::Integer {
            min: 1,
            max: 1_000_000,
        },
    },
    Setting {
        name: "operationProfiling.slowOpSampleRate",
        option: "--slowOpSampleRate",
        value: Value::Number { min: 0.0, max: 1.0 },
    },
    Setting {
        name: "operationProfiling.slowOpThresholdMs",
        option: "--slowms",
        value: Value::Integer {
            min: 0,
            max: i32::MAX as i64,
        },
    },
    Setting {
        name: "replication.oplogSizeMB",
        option: "--oplogSize",
        value: Value::Integer {
            min: 990,
            max: 1_073_741_824,
        },
    },
    Setting {
        name: "storage.wiredTiger.collectionConfig.blockCompressor",
        option: "--wiredTigerCollectionBlockCompressor",
        value: Value::OneOf(&["none", "snappy", "zlib", "zstd"]),
    },
    Setting {
        name: "storage.wiredTiger.engineConfig.cacheSizeGB",
        option: "--wiredTigerCacheSizeGB",
        value: Value::Number {
            min: 0.25,
            max: 10_000.0,
        },
    },
    Setting {
        name: "systemLog.quiet",
        option: "--quiet",
        value: Value::Switch,
    },
];

/// Server parameters the operator owns or that would weaken the set's safety.
const OWNED_PARAMETERS: &[&str] = &["authenticationMechanisms", "enableLocalhostAuthBypass"];

/// What a server parameter's value may be.
#[derive(Clone, Copy, Debug)]
enum ParameterValue {
    /// A whole number.
    Integer,
    /// `true` or `false`.
    Boolean,
}

/// The server parameters `spec.config` may set (`setParameter.<name>`): each
/// settable at startup in every release the operator supports (4.4.2 to
/// 8.0). mongod exits at start on a parameter it does not know or cannot
/// set at startup ("Illegal --setParameter parameter"), so any other name
/// is refused rather than passed; the list is kept short on purpose.
const PARAMETERS: &[(&str, ParameterValue)] = &[
    ("cursorTimeoutMillis", ParameterValue::Integer),
    ("diagnosticDataCollectionEnabled", ParameterValue::Boolean),
    ("logLevel", ParameterValue::Integer),
    (
        "maxTransactionLockRequestTimeoutMillis",
        ParameterValue::Integer,
    ),
    ("minSnapshotHistoryWindowInSeconds", ParameterValue::Integer),
    ("notablescan", ParameterValue::Boolean),
    ("transactionLifetimeLimitSeconds", ParameterValue::Integer),
    ("ttlMonitorEnabled", ParameterValue::Boolean),
];

/// An entry of `spec.config` that is not passed to mongod, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefusedSetting {
    /// The name as given.
    pub name: String,
    /// Why it is not passed.
    pub why: String,
}

impl fmt::Display for RefusedSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name, self.why)
    }
}

/// `spec.config` read: the mongod options to pass, and what is refused.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MongodSettings {
    /// Command-line arguments, ordered by setting name.
    pub args: Vec<String>,
    /// Entries that are not passed, ordered by name.
    pub refused: Vec<RefusedSetting>,
}

/// Reads `spec.config`.
pub fn mongod_settings(config: &[ConfigVar]) -> MongodSettings {
    let mut by_name: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for entry in config {
        by_name
            .entry(entry.name.as_str())
            .or_default()
            .push(entry.value.as_str());
    }
    let mut settings = MongodSettings::default();
    for (name, values) in by_name {
        let refuse = |why: String| RefusedSetting {
            name: name.to_string(),
            why,
        };
        if values.len() > 1 {
            settings
                .refused
                .push(refuse(format!("given {} times", values.len())));
            continue;
        }
        match setting_args(name, values[0].trim()) {
            Ok(args) => settings.args.extend(args),
            Err(why) => settings.refused.push(refuse(why)),
        }
    }
    settings
}

/// Whether mongod may be given server parameter `parameter` = `value` at
/// startup by the operator, or why not.
pub fn server_parameter_accepted(parameter: &str, value: &str) -> Result<(), String> {
    if OWNED_PARAMETERS.contains(&parameter) {
        return Err("managed by the operator".to_string());
    }
    if parameter == "featureCompatibilityVersion" {
        return Err(
            "set with spec.featureCompatibilityVersion; mongod refuses it at startup".to_string(),
        );
    }
    let Some((_, kind)) = PARAMETERS.iter().find(|(known, _)| *known == parameter) else {
        return Err(format!(
            "not a server parameter the operator passes to mongod (mongod exits at start on \
             one it does not know); it passes {}",
            PARAMETERS
                .iter()
                .map(|(known, _)| *known)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    };
    match kind {
        ParameterValue::Integer if value.parse::<i64>().is_err() => {
            Err("expected a whole number".to_string())
        }
        ParameterValue::Boolean if !matches!(value, "true" | "false") => {
            Err("expected true or false".to_string())
        }
        _ => Ok(()),
    }
}

/// The arguments of one setting, or why it is refused.
fn setting_args(name: &str, value: &str) -> Result<Vec<String>, String> {
    if let Some(parameter) = name.strip_prefix("setParameter.") {
        server_parameter_accepted(parameter, value)?;
        return Ok(vec![
            "--setParameter".to_string(),
            format!("{parameter}={value}"),
        ]);
    }
    let Some(setting) = SETTINGS.iter().find(|s| s.name == name) else {
        return Err("not a setting the operator passes to mongod; see spec.config".to_string());
    };
    let option = setting.option.to_string();
    match setting.value {
        Value::Integer { min, max } => match value.parse::<i64>() {
            Ok(n) if (min..=max).contains(&n) => Ok(vec![option, n.to_string()]),
            _ => Err(format!("expected a whole number from {min} to {max}")),
        },
        Value::Number { min, max } => match value.parse::<f64>() {
            Ok(n) if (min..=max).contains(&n) => Ok(vec![option, value.to_string()]),
            _ => Err(format!("expected a number from {min} to {max}")),
        },
        Value::OneOf(words) if words.contains(&value) => Ok(vec![option, value.to_string()]),
        Value::OneOf(words) => Err(format!("expected one of {}", words.join(", "))),
        Value::ListOf(words) => {
            let all_known =
                !value.is_empty() && value.split(',').all(|w| words.contains(&w.trim()));
            if all_known {
                Ok(vec![option, value.replace(' ', "")])
            } else {
                Err(format!(
                    "expected a comma-separated list of {}",
                    words.join(", ")
                ))
            }
        }
        Value::Switch => match value {
            "true" => Ok(vec![option]),
            "false" => Ok(Vec::new()),
            _ => Err("expected true or false".to_string()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(entries: &[(&str, &str)]) -> Vec<ConfigVar> {
        entries
            .iter()
            .map(|(name, value)| ConfigVar {
                name: name.to_string(),
                value: value.to_string(),
            })
            .collect()
    }

    #[test]
    fn settings_become_options_in_the_order_of_their_names_whatever_the_input_order() {
        let entries = [
            ("storage.wiredTiger.engineConfig.cacheSizeGB", "1.5"),
            ("operationProfiling.slowOpThresholdMs", "200"),
            ("setParameter.transactionLifetimeLimitSeconds", "90"),
            ("systemLog.quiet", "true"),
        ];
        let forward = mongod_settings(&config(&entries));
        let mut reversed_entries = entries;
        reversed_entries.reverse();
        assert_eq!(forward, mongod_settings(&config(&reversed_entries)));
        assert_eq!(
            forward.args,
            [
                "--slowms",
                "200",
                "--setParameter",
                "transactionLifetimeLimitSeconds=90",
                "--wiredTigerCacheSizeGB",
                "1.5",
                "--quiet"
            ]
        );
        assert!(forward.refused.is_empty());
    }

    #[test]
    fn fedstates_sample_entry_is_refused_and_never_passed() {
        let settings = mongod_settings(&config(&[("LOG_LEVEL", "info")]));
        assert!(settings.args.is_empty());
        assert_eq!(settings.refused.len(), 1);
        assert_eq!(settings.refused[0].name, "LOG_LEVEL");
        assert!(settings.refused[0].to_string().contains("not a setting"));
    }

    #[test]
    fn options_the_operator_owns_and_bad_values_are_refused() {
        let settings = mongod_settings(&config(&[
            ("replSet", "other"),
            ("keyFile", "/tmp/k"),
            ("net.port", "1"),
            ("setParameter.enableLocalhostAuthBypass", "true"),
            ("setParameter.bad name", "1"),
            ("replication.oplogSizeMB", "10"),
            ("operationProfiling.slowOpSampleRate", "2"),
            ("storage.wiredTiger.collectionConfig.blockCompressor", "lz4"),
            ("net.compression.compressors", "snappy,lz4"),
            ("systemLog.quiet", "yes"),
            ("setParameter.x", ""),
        ]));
        assert!(settings.args.is_empty(), "{:?}", settings.args);
        assert_eq!(settings.refused.len(), 11);
    }

    #[test]
    fn a_server_parameter_mongod_would_refuse_at_start_is_never_passed() {
        let settings = mongod_settings(&config(&[
            ("setParameter.LOG_LEVEL", "info"),
            ("setParameter.featureCompatibilityVersion", "7.0"),
            ("setParameter.notablescan", "maybe"),
            ("setParameter.ttlMonitorEnabled", "false"),
        ]));
        assert_eq!(settings.args, ["--setParameter", "ttlMonitorEnabled=false"]);
        let refused: Vec<&str> = settings.refused.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            refused,
            [
                "setParameter.LOG_LEVEL",
                "setParameter.featureCompatibilityVersion",
                "setParameter.notablescan"
            ]
        );
        assert!(settings.refused[0].why.contains("exits at start"));
    }

    #[test]
    fn a_setting_given_twice_is_refused() {
        let settings = mongod_settings(&config(&[
            ("net.maxIncomingConnections", "100"),
            ("net.maxIncomingConnections", "200"),
        ]));
        assert!(settings.args.is_empty());
        assert_eq!(settings.refused[0].why, "given 2 times");
    }

    #[test]
    fn a_false_switch_passes_nothing_and_lists_are_normalised() {
        let settings = mongod_settings(&config(&[
            ("systemLog.quiet", "false"),
            ("net.compression.compressors", "zstd, snappy"),
        ]));
        assert_eq!(
            settings.args,
            ["--networkMessageCompressors", "zstd,snappy"]
        );
    }
}
