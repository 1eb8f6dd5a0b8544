//! Karmada's resource interpreter for the `MongoDB` kind, run from the file the
//! Karmada chart ships:
//! `charts/mongodb-member-operator-karmada/templates/resourceinterpretercustomization.yaml`.
//!
//! The scripts are read from that file when the lab starts (never copied here),
//! and each call runs in a fresh Lua 5.1 VM opened like Karmada's (base, table,
//! string and math libraries). Objects cross into Lua the way Karmada hands them
//! over: JSON arrays become plain tables and JSON `null` becomes `nil`; results
//! come back to JSON with Lua's floating-point numbers read as integers when
//! they are whole (what Karmada does when it decodes a script's result).
//!
//! The stand-in uses every operation Karmada performs for a divided workload:
//! `GetReplicas` (the template's replicas), `ReviseReplica` (each cluster's
//! share written into its copy), `ReflectStatus` (what a member cluster reports
//! into the ResourceBinding), `InterpretHealth` (the item's health) and
//! `AggregateStatus` (the status written back to the template).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use mlua::{
    DeserializeOptions, Lua, LuaOptions, LuaSerdeExt, MultiValue, SerializeOptions, StdLib,
};
use serde_json::Value as Json;

/// The chart's customization, relative to the repository root.
pub const CUSTOMIZATION: &str =
    "charts/mongodb-member-operator-karmada/templates/resourceinterpretercustomization.yaml";

/// The operations of a `ResourceInterpreterCustomization`, by the key that holds
/// their script under `spec.customizations`.
const OPERATIONS: [&str; 6] = [
    "replicaResource",
    "replicaRevision",
    "statusReflection",
    "statusAggregation",
    "healthInterpretation",
    "dependencyInterpretation",
];

/// The scripts of one `ResourceInterpreterCustomization`.
#[derive(Clone, Debug)]
pub struct Interpreter {
    source: PathBuf,
    scripts: BTreeMap<String, String>,
}

impl Interpreter {
    /// The chart's customization in this checkout.
    pub fn from_checkout() -> Result<Interpreter> {
        Interpreter::load(
            &Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../..")
                .join(CUSTOMIZATION),
        )
    }

    /// The customization in the YAML file at `path`.
    pub fn load(path: &Path) -> Result<Interpreter> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the interpreter customization {}", path.display()))?;
        Interpreter::from_yaml(&text, path)
    }

    /// The customization in `text`, read from `source`.
    pub fn from_yaml(text: &str, source: &Path) -> Result<Interpreter> {
        let document: Json = serde_yaml::from_str(text)
            .with_context(|| format!("{} is not YAML", source.display()))?;
        if document["kind"] != "ResourceInterpreterCustomization" {
            bail!(
                "{} is not a ResourceInterpreterCustomization",
                source.display()
            );
        }
        let target = &document["spec"]["target"];
        if target["kind"] != "MongoDB" || target["apiVersion"] != "middleware.fedstate.io/v1alpha1"
        {
            bail!(
                "{} does not customize middleware.fedstate.io/v1alpha1 MongoDB",
                source.display()
            );
        }
        let mut scripts = BTreeMap::new();
        for operation in OPERATIONS {
            if let Some(script) =
                document["spec"]["customizations"][operation]["luaScript"].as_str()
            {
                scripts.insert(operation.to_string(), script.to_string());
            }
        }
        Ok(Interpreter {
            source: source.to_path_buf(),
            scripts,
        })
    }

    /// Where the scripts were read from.
    pub fn source(&self) -> &Path {
        &self.source
    }

    /// Runs `function` of `operation`'s script on JSON arguments, in a fresh VM.
    fn call(&self, operation: &str, function: &str, args: &[Json]) -> Result<Vec<Json>> {
        let script = self.scripts.get(operation).ok_or_else(|| {
            anyhow!(
                "{} has no spec.customizations.{operation}",
                self.source.display()
            )
        })?;
        let lua = Lua::new_with(
            StdLib::TABLE | StdLib::STRING | StdLib::MATH,
            LuaOptions::default(),
        )
        .map_err(|e| anyhow!("Lua VM: {e}"))?;
        lua.load(script.as_str())
            .set_name(operation)
            .exec()
            .map_err(|e| anyhow!("{operation} does not load: {e}"))?;
        let into_lua = SerializeOptions::new()
            .set_array_metatable(false)
            .serialize_none_to_null(false)
            .serialize_unit_to_null(false);
        let args = args
            .iter()
            .map(|arg| lua.to_value_with(arg, into_lua))
            .collect::<mlua::Result<MultiValue>>()
            .map_err(|e| anyhow!("{function}: argument to Lua: {e}"))?;
        let entry: mlua::Function = lua
            .globals()
            .get(function)
            .map_err(|e| anyhow!("{operation} defines no {function}: {e}"))?;
        let results: MultiValue = entry
            .call(args)
            .map_err(|e| anyhow!("{function} failed: {e}"))?;
        let from_lua = DeserializeOptions::new().sort_keys(true);
        results
            .into_iter()
            .map(|value| {
                lua.from_value_with::<Json>(value, from_lua)
                    .map(integral_numbers)
                    .map_err(|e| anyhow!("{function}: result from Lua: {e}"))
            })
            .collect()
    }

    fn call_one(&self, operation: &str, function: &str, args: &[Json]) -> Result<Json> {
        let mut results = self.call(operation, function, args)?;
        if results.is_empty() {
            bail!("{function} returned nothing");
        }
        Ok(results.remove(0))
    }

    /// `GetReplicas(template)`: the replicas Karmada divides, and their requirements.
    pub fn get_replicas(&self, template: &Json) -> Result<(i64, Json)> {
        let mut results = self.call(
            "replicaResource",
            "GetReplicas",
            std::slice::from_ref(template),
        )?;
        let replicas = results
            .first()
            .and_then(Json::as_i64)
            .ok_or_else(|| anyhow!("GetReplicas returned no whole number: {results:?}"))?;
        let requirements = if results.len() > 1 {
            results.remove(1)
        } else {
            Json::Null
        };
        Ok((replicas, requirements))
    }

    /// `ReviseReplica(object, replicas)`: the copy of one cluster with its share.
    pub fn revise_replica(&self, object: &Json, replicas: i64) -> Result<Json> {
        self.call_one(
            "replicaRevision",
            "ReviseReplica",
            &[object.clone(), Json::from(replicas)],
        )
    }

    /// `ReflectStatus(observed)`: what a member cluster's object reports.
    pub fn reflect_status(&self, observed: &Json) -> Result<Json> {
        self.call_one(
            "statusReflection",
            "ReflectStatus",
            std::slice::from_ref(observed),
        )
    }

    /// `InterpretHealth(observed)`.
    pub fn interpret_health(&self, observed: &Json) -> Result<bool> {
        let result = self.call_one(
            "healthInterpretation",
            "InterpretHealth",
            std::slice::from_ref(observed),
        )?;
        result
            .as_bool()
            .ok_or_else(|| anyhow!("InterpretHealth returned {result}, not a boolean"))
    }

    /// `AggregateStatus(template, items)`: the template with its aggregated status.
    pub fn aggregate_status(&self, template: &Json, items: &[Json]) -> Result<Json> {
        self.call_one(
            "statusAggregation",
            "AggregateStatus",
            &[template.clone(), Json::Array(items.to_vec())],
        )
    }
}

/// Lua 5.1 has only floating-point numbers; Kubernetes (and Karmada, when it
/// decodes a script's result) reads whole numbers as integers.
fn integral_numbers(value: Json) -> Json {
    match value {
        Json::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 9.0e15 => Json::from(f as i64),
            _ => Json::Number(n),
        },
        Json::Array(items) => Json::Array(items.into_iter().map(integral_numbers).collect()),
        Json::Object(map) => Json::Object(
            map.into_iter()
                .map(|(k, v)| (k, integral_numbers(v)))
                .collect(),
        ),
        other => other,
    }
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
            "replicaResource",
            "replicaRevision",
            "statusReflection",
            "statusAggregation",
            "healthInterpretation",
        ] {
            assert!(
                interpreter.scripts.contains_key(operation),
                "{operation} missing from {}",
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
