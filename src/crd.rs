//! The generated CustomResourceDefinition of `MongoDB`, as checked in under `crds/`.

use kube::CustomResourceExt;
use serde_json::Value;

use crate::api::MongoDB;

/// Path of the checked-in CRD, relative to the repository root.
pub const CRD_PATH: &str = "crds/mongodb.yaml";

/// The CRD as YAML, exactly as `crdgen` prints it and `crds/` holds it. Object
/// keys are sorted, so the text does not depend on whether some crate in the
/// build enables serde_json's `preserve_order`.
pub fn crd_yaml() -> Result<String, serde_yaml::Error> {
    let crd = serde_json::to_value(MongoDB::crd())
        .map_err(<serde_yaml::Error as serde::ser::Error>::custom)?;
    serde_yaml::to_string(&sorted(crd))
}

fn sorted(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(entries.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sorted).collect()),
        other => other,
    }
}
