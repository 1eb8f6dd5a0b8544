//! A `ResourceInterpreterCustomization` (`config.karmada.io/v1alpha1`): the
//! kind it customizes and the Lua script of each operation.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value as Json;

use crate::{Error, Interpreter};

/// An operation of a customization, by what Karmada asks of the script.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operation {
    /// `replicaResource`: `GetReplicas`.
    ReplicaResource,
    /// `replicaRevision`: `ReviseReplica`.
    ReplicaRevision,
    /// `statusReflection`: `ReflectStatus`.
    StatusReflection,
    /// `statusAggregation`: `AggregateStatus`.
    StatusAggregation,
    /// `healthInterpretation`: `InterpretHealth`.
    HealthInterpretation,
    /// `dependencyInterpretation`: `GetDependencies`.
    DependencyInterpretation,
}

impl Operation {
    /// Every operation.
    pub const ALL: [Operation; 6] = [
        Operation::ReplicaResource,
        Operation::ReplicaRevision,
        Operation::StatusReflection,
        Operation::StatusAggregation,
        Operation::HealthInterpretation,
        Operation::DependencyInterpretation,
    ];

    /// The key under `spec.customizations` that holds its script.
    pub fn key(self) -> &'static str {
        match self {
            Operation::ReplicaResource => "replicaResource",
            Operation::ReplicaRevision => "replicaRevision",
            Operation::StatusReflection => "statusReflection",
            Operation::StatusAggregation => "statusAggregation",
            Operation::HealthInterpretation => "healthInterpretation",
            Operation::DependencyInterpretation => "dependencyInterpretation",
        }
    }
}

/// Why a customization could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CustomizationError {
    /// The file could not be read.
    #[error("reading the interpreter customization {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The text is not YAML.
    #[error("{path} is not YAML: {message}")]
    NotYaml {
        /// Where the text came from.
        path: PathBuf,
        /// The parser's complaint.
        message: String,
    },
    /// The document is of another kind.
    #[error("{0} is not a ResourceInterpreterCustomization")]
    NotACustomization(PathBuf),
}

/// The scripts of one `ResourceInterpreterCustomization`, and what it targets.
#[derive(Clone, Debug)]
pub struct Customization {
    source: PathBuf,
    api_version: String,
    kind: String,
    scripts: BTreeMap<Operation, String>,
}

impl Customization {
    /// The customization in the YAML file at `path`.
    pub fn load(path: &Path) -> Result<Customization, CustomizationError> {
        let text = std::fs::read_to_string(path).map_err(|source| CustomizationError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Customization::from_yaml(&text, path)
    }

    /// The customization in `text`, read from `source`.
    pub fn from_yaml(text: &str, source: &Path) -> Result<Customization, CustomizationError> {
        let document: Json =
            serde_yaml::from_str(text).map_err(|error| CustomizationError::NotYaml {
                path: source.to_path_buf(),
                message: error.to_string(),
            })?;
        if document["kind"] != "ResourceInterpreterCustomization" {
            return Err(CustomizationError::NotACustomization(source.to_path_buf()));
        }
        let target = &document["spec"]["target"];
        let customizations = &document["spec"]["customizations"];
        Ok(Customization {
            source: source.to_path_buf(),
            api_version: target["apiVersion"].as_str().unwrap_or_default().into(),
            kind: target["kind"].as_str().unwrap_or_default().into(),
            scripts: Operation::ALL
                .into_iter()
                .filter_map(|operation| {
                    let script = customizations[operation.key()]["luaScript"].as_str()?;
                    Some((operation, script.to_string()))
                })
                .collect(),
        })
    }

    /// Where the customization was read from.
    pub fn source(&self) -> &Path {
        &self.source
    }

    /// Whether it customizes `api_version` `kind` (`spec.target`).
    pub fn targets(&self, api_version: &str, kind: &str) -> bool {
        self.api_version == api_version && self.kind == kind
    }

    /// The script of `operation`, if the customization has one.
    pub fn script(&self, operation: Operation) -> Option<&str> {
        self.scripts.get(&operation).map(String::as_str)
    }

    /// `operation`'s script loaded into a fresh VM; `None` when the
    /// customization has no script for it.
    pub fn interpreter(&self, operation: Operation) -> Option<Result<Interpreter, Error>> {
        self.script(operation)
            .map(|script| Interpreter::new(script, operation.key()))
    }
}
