//! The generated CustomResourceDefinition of `MongoDB`, as checked in under `crds/`.

use kube::CustomResourceExt;

use crate::api::MongoDB;

/// Path of the checked-in CRD, relative to the repository root.
pub const CRD_PATH: &str = "crds/mongodb.yaml";

/// The CRD as YAML, exactly as `crdgen` prints it and `crds/` holds it.
pub fn crd_yaml() -> Result<String, serde_yaml::Error> {
    serde_yaml::to_string(&MongoDB::crd())
}
