//! Kubernetes `Status` errors: the failure kinds the simulated API server answers
//! with, and their wire form (`kind: Status`, `reason`, `code`, `details`).

use serde_json::{json, Value};

/// A failed API call, rendered on the wire as a `meta/v1 Status` object.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// HTTP status code (404, 409, 422, …).
    pub code: u16,
    /// Machine-readable reason (`NotFound`, `AlreadyExists`, `Conflict`, …).
    pub reason: String,
    /// Human-readable message, worded like kube-apiserver's.
    pub message: String,
    /// `details` of the Status (name, group, kind, causes), if any.
    pub details: Option<Value>,
}

impl ApiError {
    fn new(code: u16, reason: &str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason: reason.to_string(),
            message: message.into(),
            details: None,
        }
    }

    fn with_details(mut self, group: &str, resource: &str, name: &str) -> Self {
        let mut d = json!({ "name": name, "kind": resource });
        if !group.is_empty() {
            d["group"] = json!(group);
        }
        self.details = Some(d);
        self
    }

    /// `<resource>.<group> "<name>" not found`.
    pub fn not_found(group: &str, resource: &str, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", qualified(group, resource)),
        )
        .with_details(group, resource, name)
    }

    /// 404 for a path that names no served resource.
    pub fn no_such_resource() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .with_details_raw(json!({}))
    }

    /// `<resource>.<group> "<name>" already exists`.
    pub fn already_exists(group: &str, resource: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", qualified(group, resource)),
        )
        .with_details(group, resource, name)
    }

    /// Optimistic-concurrency failure (stale `resourceVersion`, failed precondition).
    pub fn conflict(group: &str, resource: &str, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                qualified(group, resource)
            ),
        )
        .with_details(group, resource, name)
    }

    /// The standard stale-resourceVersion conflict.
    pub fn stale(group: &str, resource: &str, name: &str) -> Self {
        Self::conflict(
            group,
            resource,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// Server-side apply conflict: `conflicts` holds `(manager, field path)` pairs.
    pub fn apply_conflict(
        group: &str,
        resource: &str,
        name: &str,
        conflicts: &[(String, String)],
    ) -> Self {
        let n = conflicts.len();
        let mut msg = format!(
            "Apply failed with {n} conflict{}: ",
            if n == 1 { "" } else { "s" }
        );
        let parts: Vec<String> = conflicts
            .iter()
            .map(|(m, f)| format!("conflict with \"{m}\": {f}"))
            .collect();
        msg.push_str(&parts.join("\n"));
        let causes: Vec<Value> = conflicts
            .iter()
            .map(|(m, f)| json!({"type": "FieldManagerConflict", "message": format!("conflict with \"{m}\""), "field": f}))
            .collect();
        let mut e = Self::new(409, "Conflict", msg).with_details(group, resource, name);
        if let Some(d) = e.details.as_mut() {
            d["causes"] = Value::Array(causes);
        }
        e
    }

    /// 422 Invalid with field causes `(field, message)`.
    pub fn invalid(group: &str, kind: &str, name: &str, causes: &[(String, String)]) -> Self {
        let parts: Vec<String> = causes.iter().map(|(f, m)| format!("{f}: {m}")).collect();
        let msg = if parts.is_empty() {
            format!("{} \"{name}\" is invalid", qualified(group, kind))
        } else {
            format!(
                "{} \"{name}\" is invalid: {}",
                qualified(group, kind),
                parts.join(", ")
            )
        };
        let mut e = Self::new(422, "Invalid", msg).with_details(group, kind, name);
        if let Some(d) = e.details.as_mut() {
            d["causes"] = Value::Array(
                causes
                    .iter()
                    .map(|(f, m)| json!({"reason": "FieldValueInvalid", "message": m, "field": f}))
                    .collect(),
            );
        }
        e
    }

    /// Build an error from a complete Status object (e.g. one produced by crd-admission).
    pub fn from_status(status: &Value) -> Self {
        ApiError {
            code: status.get("code").and_then(Value::as_u64).unwrap_or(500) as u16,
            reason: status
                .get("reason")
                .and_then(Value::as_str)
                .unwrap_or("InternalError")
                .to_string(),
            message: status
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            details: status.get("details").cloned(),
        }
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_allowed(verb: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!("the server does not allow this method on the requested resource ({verb})"),
        )
    }

    /// 406 NotAcceptable.
    pub fn not_acceptable(message: impl Into<String>) -> Self {
        Self::new(406, "NotAcceptable", message)
    }

    /// 415 UnsupportedMediaType.
    pub fn unsupported_media_type(content_type: &str, accepted: &[&str]) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format ({content_type}) - accepted media types include: {}",
                accepted.join(", ")
            ),
        )
    }

    /// 410 Expired (a resourceVersion too old for the watch history or a stale continue token).
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 410 Gone: kube-apiserver's watch cache before 1.19 answered a too-old
    /// resourceVersion with this reason (`errors.NewGone`).
    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Gone", message)
    }

    /// 403 Forbidden (e.g. creating in a terminating namespace).
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    /// 401 Unauthorized: a credential that authenticates no one.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// 403 Forbidden as kube-apiserver's `NewForbidden(groupResource, name, err)`
    /// builds it: `<resource>[.<group>] ["<name>"] is forbidden: <why>`, or
    /// `forbidden: <why>` without a resource; details name what was refused.
    pub fn forbidden_resource(group: &str, resource: &str, name: &str, why: &str) -> Self {
        let message = if group.is_empty() && resource.is_empty() {
            format!("forbidden: {why}")
        } else if name.is_empty() {
            format!("{} is forbidden: {why}", qualified(group, resource))
        } else {
            format!(
                "{} \"{name}\" is forbidden: {why}",
                qualified(group, resource)
            )
        };
        let mut details = serde_json::Map::new();
        for (key, value) in [("name", name), ("group", group), ("kind", resource)] {
            if !value.is_empty() {
                details.insert(key.to_string(), json!(value));
            }
        }
        Self::new(403, "Forbidden", message).with_details_raw(Value::Object(details))
    }

    /// 500 InternalError.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// 503 ServiceUnavailable (fault injection).
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(503, "ServiceUnavailable", message)
    }

    /// 429 TooManyRequests (fault injection).
    pub fn too_many_requests() -> Self {
        Self::new(
            429,
            "TooManyRequests",
            "the server has received too many requests and has asked us to try again later",
        )
        .with_details_raw(json!({"retryAfterSeconds": 1}))
    }

    fn with_details_raw(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// The `meta/v1 Status` object for this error.
    pub fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        s
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}

/// `resource.group`, or `resource` for the core group.
pub fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}
