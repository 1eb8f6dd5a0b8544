//! Karmada's resource interpreter for the `MongoDB` kind, run from the file the
//! Karmada chart ships:
//! `charts/mongodb-member-operator-karmada/templates/resourceinterpretercustomization.yaml`
//! (Karmada's declarative, Lua-scripted interpreter,
//! `pkg/resourceinterpreter/customized/declarative`).
//!
//! The scripts are read from that file when the lab starts (never copied here),
//! and each call runs in a fresh VM set up and converting values as Karmada's
//! ([`karmada_lua`]).
//!
//! The stand-in uses every operation Karmada performs for a divided workload:
//! `GetReplicas` (the template's replicas), `ReviseReplica` (each cluster's
//! share written into its copy), `ReflectStatus` (what a member cluster reports
//! into the ResourceBinding), `InterpretHealth` (the item's health) and
//! `AggregateStatus` (the status written back to the template).

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Result};
use karmada_lua::{Customization, Operation};
use serde_json::Value as Json;

/// The chart's customization, relative to the repository root.
pub const CUSTOMIZATION: &str =
    "charts/mongodb-member-operator-karmada/templates/resourceinterpretercustomization.yaml";

/// The kind the chart's customization must target.
const TARGET: (&str, &str) = ("middleware.fedstate.io/v1alpha1", "MongoDB");

/// The scripts of the chart's `ResourceInterpreterCustomization`.
#[derive(Clone, Debug)]
pub struct Interpreter {
    customization: Customization,
}

impl Interpreter {
    /// The chart's customization in this checkout.
    pub fn from_checkout() -> Result<Interpreter> {
        Interpreter::load(&checkout().join(CUSTOMIZATION))
    }

    /// The customization in the YAML file at `path`.
    pub fn load(path: &Path) -> Result<Interpreter> {
        Interpreter::for_mongodb(Customization::load(path)?)
    }

    /// The customization in `text`, read from `source`.
    pub fn from_yaml(text: &str, source: &Path) -> Result<Interpreter> {
        Interpreter::for_mongodb(Customization::from_yaml(text, source)?)
    }

    fn for_mongodb(customization: Customization) -> Result<Interpreter> {
        if !customization.targets(TARGET.0, TARGET.1) {
            bail!(
                "{} does not customize {} {}",
                customization.source().display(),
                TARGET.0,
                TARGET.1
            );
        }
        Ok(Interpreter { customization })
    }

    /// Where the scripts were read from.
    pub fn source(&self) -> &Path {
        self.customization.source()
    }

    /// `operation`'s script in a fresh VM.
    fn vm(&self, operation: Operation) -> Result<karmada_lua::Interpreter> {
        let vm = self.customization.interpreter(operation).ok_or_else(|| {
            anyhow!(
                "{} has no spec.customizations.{}",
                self.source().display(),
                operation.key()
            )
        })?;
        Ok(vm?)
    }

    /// `GetReplicas(template)`: the replicas Karmada divides, and their requirements.
    pub fn get_replicas(&self, template: &Json) -> Result<(i64, Json)> {
        Ok(self
            .vm(Operation::ReplicaResource)?
            .get_replicas(template)?)
    }

    /// `ReviseReplica(object, replicas)`: the copy of one cluster with its share.
    pub fn revise_replica(&self, object: &Json, replicas: i64) -> Result<Json> {
        Ok(self
            .vm(Operation::ReplicaRevision)?
            .revise_replica(object, replicas)?)
    }

    /// `ReflectStatus(observed)`: what a member cluster's object reports.
    pub fn reflect_status(&self, observed: &Json) -> Result<Json> {
        Ok(self
            .vm(Operation::StatusReflection)?
            .reflect_status(observed)?)
    }

    /// `InterpretHealth(observed)`.
    pub fn interpret_health(&self, observed: &Json) -> Result<bool> {
        Ok(self
            .vm(Operation::HealthInterpretation)?
            .interpret_health(observed)?)
    }

    /// `AggregateStatus(template, items)`: the template with its aggregated status.
    pub fn aggregate_status(&self, template: &Json, items: &[Json]) -> Result<Json> {
        Ok(self
            .vm(Operation::StatusAggregation)?
            .aggregate_status(template, &Json::Array(items.to_vec()))?)
    }
}

/// The repository this crate is built from.
fn checkout() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn chart() -> Interpreter {
        Interpreter::from_checkout().expect("the chart's customization loads")
    }

    #[test]
    fn the_chart_file_customizes_every_operation_the_stand_in_runs() {
        let interpreter = chart();
        for operation in [
            Operation::ReplicaResource,
            Operation::ReplicaRevision,
            Operation::StatusReflection,
            Operation::StatusAggregation,
            Operation::HealthInterpretation,
        ] {
            assert!(
                interpreter.customization.script(operation).is_some(),
                "{} missing from {}",
                operation.key(),
                interpreter.source().display()
            );
        }
    }

    #[test]
    fn replicas_are_the_templates_total_members_and_revision_writes_the_share() {
        let interpreter = chart();
        let template = json!({
            "apiVersion": "middleware.fedstate.io/v1alpha1", "kind": "MongoDB",
            "metadata": {"name": "demo", "namespace": "default"},
            "spec": {"members": 5, "config": [{"name": "b", "value": "1"}, {"name": "a", "value": "2"}]}
        });
        let (replicas, requirements) = interpreter.get_replicas(&template).unwrap();
        assert_eq!(replicas, 5);
        assert_eq!(requirements["namespace"], "default");
        let revised = interpreter.revise_replica(&template, 2).unwrap();
        assert_eq!(revised["spec"]["members"], 2);
        assert_eq!(
            revised["spec"]["config"], template["spec"]["config"],
            "lists keep their order through Lua"
        );
    }

    #[test]
    fn a_customization_for_another_kind_is_refused() {
        let text = "apiVersion: config.karmada.io/v1alpha1\nkind: ResourceInterpreterCustomization\nspec:\n  target:\n    apiVersion: apps/v1\n    kind: Deployment\n";
        assert!(Interpreter::from_yaml(text, Path::new("x.yaml")).is_err());
    }
}
