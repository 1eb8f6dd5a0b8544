//! Authorization, as kube-apiserver does it with `--authorization-mode=RBAC`:
//!
//! - [`request_attributes`] turns a request into authorizer attributes the way
//!   `k8s.io/apiserver/pkg/endpoints/request/requestinfo.go` does (verb from the
//!   method, `list`/`watch` for collection GETs, `deletecollection`, a
//!   `metadata.name` field selector naming the object, `/watch/` paths,
//!   namespaces and subresources; other paths are non-resource URLs).
//! - [`authorize`] is the privileged-group authorizer (`system:masters` may do
//!   anything) followed by the RBAC authorizer
//!   (`plugin/pkg/auth/authorizer/rbac`): every ClusterRoleBinding, then the
//!   RoleBindings of the request's namespace, whose subjects match the user,
//!   contribute their role's rules; a rule allows when verb, API group,
//!   resource (`resource/subresource`, `*`, `*/subresource`), resourceNames and
//!   non-resource URLs (`/prefix*`) match (`pkg/apis/rbac/v1/evaluation_helpers.go`).
//!   A binding whose role is missing adds `RBAC: <error>` to the denial.
//! - [`forbidden`] is the 403 Status kube-apiserver answers
//!   (`responsewriters.Forbidden`).
//! - [`ensure_bootstrap_policy`] stores the default roles and bindings that
//!   matter here (`cluster-admin`, `system:discovery`,
//!   `system:public-info-viewer`, `system:basic-user`), as kube-apiserver's
//!   bootstrap policy reconciles them at start.
//!
//! The objects are read from the [`Store`](crate::store::Store) at each
//! request (no informer lag).

mod authorizer;
mod bootstrap;
mod impersonation;
mod request_info;
#[cfg(test)]
mod tests;

pub use authorizer::{authorize, rule_allows, Decision, PolicyRule};
pub use bootstrap::ensure_bootstrap_policy;
pub use impersonation::{impersonate, Impersonation};
pub use request_info::request_attributes;

use crate::auth::UserInfo;
use crate::error::ApiError;

/// The RBAC API group.
pub const GROUP: &str = "rbac.authorization.k8s.io";

/// What the authorizer is asked (`authorizer.Attributes`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Attributes {
    /// Who asks.
    pub user: Option<UserInfo>,
    /// Kube verb (`get`, `list`, `watch`, `create`, `update`, `patch`,
    /// `delete`, `deletecollection`) or, for non-resource requests, the
    /// lower-case HTTP method.
    pub verb: String,
    /// A request for an API resource (else a non-resource URL).
    pub resource_request: bool,
    /// URL path.
    pub path: String,
    /// API group (`""` for core).
    pub api_group: String,
    /// API version.
    pub api_version: String,
    /// Namespace (`""`: cluster scope).
    pub namespace: String,
    /// Resource (plural).
    pub resource: String,
    /// Subresource (`status`, `exec`, …).
    pub subresource: String,
    /// Object name, if the request names one.
    pub name: String,
}

impl Attributes {
    fn user_name(&self) -> &str {
        self.user.as_ref().map(|u| u.name.as_str()).unwrap_or("")
    }
}

/// The 403 kube-apiserver answers a request the authorizer did not allow.
pub fn forbidden(attributes: &Attributes, reason: &str) -> ApiError {
    let user = attributes.user_name();
    let message = if !attributes.resource_request {
        format!(
            "User {user:?} cannot {} path {:?}",
            attributes.verb, attributes.path
        )
    } else {
        let resource = if attributes.subresource.is_empty() {
            attributes.resource.clone()
        } else {
            format!("{}/{}", attributes.resource, attributes.subresource)
        };
        if attributes.namespace.is_empty() {
            format!(
                "User {user:?} cannot {} resource {resource:?} in API group {:?} at the cluster scope",
                attributes.verb, attributes.api_group
            )
        } else {
            format!(
                "User {user:?} cannot {} resource {resource:?} in API group {:?} in the namespace {:?}",
                attributes.verb, attributes.api_group, attributes.namespace
            )
        }
    };
    // responsewriters' sanitizer: nothing in the message reads as HTML.
    let message = message
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    let why = if reason.is_empty() {
        message
    } else {
        format!("{message}: {reason}")
    };
    ApiError::forbidden_resource(
        &attributes.api_group,
        &attributes.resource,
        &attributes.name,
        &why,
    )
}

/// The 403 of a patch that would create its object (server-side apply) when
/// `create` is not allowed: the patch handler authorizes the create with its
/// own attributes and answers `NewForbidden(resource, name, reason)` (an empty
/// reason leaves `is forbidden: ` as it is).
pub fn forbidden_create_on_patch(attributes: &Attributes, reason: &str) -> ApiError {
    ApiError::forbidden_resource(
        &attributes.api_group,
        &attributes.resource,
        &attributes.name,
        reason,
    )
}
