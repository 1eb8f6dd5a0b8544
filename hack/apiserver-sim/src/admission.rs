//! Admission of custom resources: a thin adapter over the `crd-admission` crate
//! (structural-schema validation, defaulting, pruning and CEL rules), turning its
//! refusals into 422 Invalid Status errors.

use serde_json::Value;

use crate::error::ApiError;

/// The compiled admission rules of one CRD version.
pub struct CustomAdmission {
    inner: crd_admission::Admission,
}

impl CustomAdmission {
    /// Compiles the rules of an `openAPIV3Schema`; `Err` carries a message for a 422.
    pub fn new(schema: &Value) -> Result<Self, String> {
        crd_admission::Admission::new(schema)
            .map(|inner| CustomAdmission { inner })
            .map_err(|e| format!("{e:?}"))
    }

    /// Defaults, prunes and validates `new` (with `old` for transition rules);
    /// returns the paths of the unknown fields it pruned.
    pub fn admit(
        &self,
        kind: &str,
        group: &str,
        name: &str,
        new: &mut Value,
        old: Option<&Value>,
    ) -> Result<Vec<String>, ApiError> {
        self.inner
            .admit_reporting(new, old)
            .map(|admitted| admitted.unknown_fields)
            .map_err(|errors| {
                ApiError::from_status(&crd_admission::invalid_status(kind, group, name, &errors))
            })
    }
}
