//! Admission of custom resources against a CRD version's structural schema and
//! its CEL `x-kubernetes-validations`, as kube-apiserver performs it on
//! create, update and patch: default, prune, validate — with refusals worded
//! as kube-apiserver words them and a 422 `Status` built from them.
//!
//! Test equipment for the apiserver simulator: pure (no I/O, no async), and
//! never panics on any object or schema.
//!
//! ```
//! use crd_admission::{invalid_status, Admission};
//! use serde_json::json;
//!
//! let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
//!     "properties": {"members": {"type": "integer", "minimum": 0}}}}});
//! let admission = Admission::new(&schema).unwrap();
//! let mut obj = json!({"apiVersion": "v1", "kind": "X", "metadata": {"name": "demo"},
//!     "spec": {"members": -1}});
//! let errors = admission.admit(&mut obj, None).unwrap_err();
//! assert_eq!(errors[0].to_string(),
//!     "spec.members: Invalid value: -1: spec.members in body should be greater than or equal to 0");
//! let status = invalid_status("MongoDB", "middleware.fedstate.io", "demo", &errors);
//! assert_eq!(status["code"], 422);
//! ```

mod cel_quantity;
mod cel_rules;
mod errors;
pub mod quantity;
mod schema;
mod structural;
mod validation;

use serde_json::Value;

pub use errors::{invalid_status, FieldError, FieldErrorKind};
pub use schema::SchemaError;

use schema::Node;

/// The detail of the error kube-apiserver adds when schema errors keep the
/// CEL rules from running.
const RULES_NOT_CHECKED: &str = "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation";

/// One CRD version's `schema.openAPIV3Schema`, compiled: types, defaults,
/// patterns and CEL programs.
#[derive(Debug)]
pub struct Admission {
    root: Node,
    has_rules: bool,
}

/// What a successful admission did besides accepting the object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Admitted {
    /// Paths of the fields pruned as unknown (`spec.foo`, `spec.list[0].bar`),
    /// which kube-apiserver reports as `unknown field "spec.foo"` warnings, or
    /// refuses with `fieldValidation=Strict`.
    pub unknown_fields: Vec<String>,
}

impl Admission {
    /// Compiles a CRD version's `openAPIV3Schema`. Fails if the schema is
    /// malformed, a pattern is not a valid regular expression, or a CEL rule
    /// (or `messageExpression`, or `fieldPath`) does not compile — cases in
    /// which kube-apiserver refuses the CRD.
    pub fn new(open_api_v3_schema: &Value) -> Result<Self, SchemaError> {
        let root = Node::compile(open_api_v3_schema, "openAPIV3Schema")?;
        let has_rules = has_rules(&root);
        Ok(Admission { root, has_rules })
    }

    /// Defaults, prunes and validates `new` in place, as kube-apiserver does
    /// on create (`old` = `None`) and update (`old` = the stored object).
    pub fn admit(&self, new: &mut Value, old: Option<&Value>) -> Result<(), Vec<FieldError>> {
        self.admit_reporting(new, old).map(|_| ())
    }

    /// [`Admission::admit`], also reporting the unknown fields it pruned.
    pub fn admit_reporting(
        &self,
        new: &mut Value,
        old: Option<&Value>,
    ) -> Result<Admitted, Vec<FieldError>> {
        self.admit_with(new, old, Vec::new())
    }

    /// [`Admission::admit_reporting`] after the caller's own checks of the
    /// object (kube-apiserver validates `metadata` first): `prior_errors`
    /// come first in the result and, like schema errors, a blocking one
    /// (required, type, enum, too long, too many) keeps the CEL rules from
    /// running.
    pub fn admit_with(
        &self,
        new: &mut Value,
        old: Option<&Value>,
        prior_errors: Vec<FieldError>,
    ) -> Result<Admitted, Vec<FieldError>> {
        let unknown_fields = structural::prune_root(new, &self.root);
        structural::drop_non_nullable_nulls(new, &self.root);
        structural::apply_defaults(new, &self.root);

        let mut errs = prior_errors;
        validation::validate(new, old, &self.root, "", &mut errs);
        validation::validate_embedded_resources(new, &self.root, "", &mut errs);

        // On update, list invariants are only checked if the stored object
        // satisfied them (kube-apiserver's ratcheting of list types).
        let mut old_list_errs = Vec::new();
        if let Some(old) = old {
            validation::validate_list_types(old, &self.root, "", &mut old_list_errs);
        }
        if old_list_errs.is_empty() {
            validation::validate_list_types(new, &self.root, "", &mut errs);
        }

        if self.has_rules {
            if errs.iter().any(is_blocking) {
                errs.push(FieldError::new(
                    "",
                    FieldErrorKind::Invalid,
                    Some(Value::Null),
                    RULES_NOT_CHECKED,
                ));
            } else {
                let site = cel_rules::Site {
                    path: String::new(),
                    old_self: old,
                    ratchet_old: old,
                    ratcheted: false,
                    is_resource: true,
                };
                cel_rules::validate(new, &self.root, site, &mut errs);
            }
        }

        if errs.is_empty() {
            Ok(Admitted { unknown_fields })
        } else {
            Err(errs)
        }
    }
}

/// Schema errors after which kube-apiserver does not run CEL rules.
fn is_blocking(e: &FieldError) -> bool {
    matches!(
        e.kind,
        FieldErrorKind::NotSupported
            | FieldErrorKind::Required
            | FieldErrorKind::TooLong
            | FieldErrorKind::TooMany
            | FieldErrorKind::TypeInvalid
    )
}

fn has_rules(node: &Node) -> bool {
    !node.rules.is_empty()
        || node.properties.values().any(has_rules)
        || node.additional_properties.as_deref().is_some_and(has_rules)
        || node.items.as_deref().is_some_and(has_rules)
}

#[cfg(test)]
mod tests;
