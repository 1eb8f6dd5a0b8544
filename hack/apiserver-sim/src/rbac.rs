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
//! The objects are read from the [`Store`] at each request (no informer lag).

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{json, Value};

use crate::auth::{UserInfo, AUTHENTICATED, MASTERS, UNAUTHENTICATED};
use crate::error::ApiError;
use crate::registry::Gvr;
use crate::store::{ListOptions, Store, WriteOptions};

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

/// The authorizer attributes of a request, as `RequestInfoFactory.NewRequestInfo`
/// computes them (API prefixes `api` (groupless) and `apis`).
pub fn request_attributes(
    user: UserInfo,
    method: &str,
    path: &str,
    query: &HashMap<String, String>,
) -> Attributes {
    let mut info = Attributes {
        user: Some(user),
        verb: method.to_ascii_lowercase(),
        resource_request: false,
        path: path.to_string(),
        ..Default::default()
    };
    let trimmed = path.trim_matches('/');
    let mut parts: Vec<&str> = if trimmed.is_empty() {
        Vec::new()
    } else {
        trimmed.split('/').collect()
    };
    if parts.len() < 3 {
        return info;
    }
    let prefix = parts[0];
    if prefix != "api" && prefix != "apis" {
        return info;
    }
    parts.remove(0);
    if prefix == "apis" {
        if parts.len() < 3 {
            return info;
        }
        info.api_group = parts.remove(0).to_string();
    }
    info.resource_request = true;
    info.api_version = parts.remove(0).to_string();
    if parts[0] == "watch" || parts[0] == "proxy" {
        if parts.len() < 2 {
            return info;
        }
        info.verb = parts.remove(0).to_string();
    } else {
        info.verb = match method {
            "POST" => "create",
            "GET" | "HEAD" => "get",
            "PUT" => "update",
            "PATCH" => "patch",
            "DELETE" => "delete",
            _ => "",
        }
        .to_string();
    }
    if parts[0] == "namespaces" && parts.len() > 1 {
        info.namespace = parts[1].to_string();
        if parts.len() > 2 && !matches!(parts[2], "status" | "finalize") {
            parts.drain(..2);
        }
    }
    if parts.len() >= 3 && info.verb != "proxy" {
        info.subresource = parts[2].to_string();
    }
    if parts.len() >= 2 {
        info.name = parts[1].to_string();
    }
    info.resource = parts[0].to_string();

    if info.name.is_empty() && info.verb == "get" {
        info.verb = match query.get("watch").map(|w| w.to_ascii_lowercase()) {
            Some(w) if w != "false" && w != "0" => "watch",
            _ => "list",
        }
        .to_string();
        if let Some(name) = query
            .get("fieldSelector")
            .and_then(|s| exact_match(s, "metadata.name"))
        {
            if valid_path_segment_name(&name) {
                info.name = name;
            }
        }
    }
    if info.name.is_empty() && info.verb == "delete" {
        info.verb = "deletecollection".to_string();
    }
    info
}

/// `fields.Selector.RequiresExactMatch(field)`: the value of a `field=value`
/// or `field==value` term.
fn exact_match(selector: &str, field: &str) -> Option<String> {
    selector.split(',').find_map(|term| {
        let term = term.trim();
        if term.contains("!=") {
            return None;
        }
        let (key, value) = term.split_once("==").or_else(|| term.split_once('='))?;
        (key.trim() == field).then(|| value.trim().to_string())
    })
}

/// `path.IsValidPathSegmentName`.
fn valid_path_segment_name(name: &str) -> bool {
    name != "." && name != ".." && !name.contains('/') && !name.contains('%')
}

/// One rule of a Role or ClusterRole (`rbac/v1 PolicyRule`).
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRule {
    /// Verbs (`*` for all).
    #[serde(default)]
    pub verbs: Vec<String>,
    /// API groups (`*` for all).
    #[serde(default)]
    pub api_groups: Vec<String>,
    /// Resources (`*`, `resource/subresource`, `*/subresource`).
    #[serde(default)]
    pub resources: Vec<String>,
    /// Object names; empty allows every name.
    #[serde(default)]
    pub resource_names: Vec<String>,
    /// Non-resource URLs (`*`, exact, or a `prefix*`).
    #[serde(default, rename = "nonResourceURLs")]
    pub non_resource_urls: Vec<String>,
}

impl PolicyRule {
    /// A rule from its JSON form.
    pub fn from_value(value: &Value) -> Option<Self> {
        serde_json::from_value(value.clone()).ok()
    }
}

fn verb_matches(rule: &PolicyRule, verb: &str) -> bool {
    rule.verbs.iter().any(|v| v == "*" || v == verb)
}

fn api_group_matches(rule: &PolicyRule, group: &str) -> bool {
    rule.api_groups.iter().any(|g| g == "*" || g == group)
}

fn resource_matches(rule: &PolicyRule, combined: &str, subresource: &str) -> bool {
    rule.resources.iter().any(|r| {
        r == "*"
            || r == combined
            || (!subresource.is_empty()
                && r.len() == subresource.len() + 2
                && r.starts_with("*/")
                && r.ends_with(subresource))
    })
}

fn resource_name_matches(rule: &PolicyRule, name: &str) -> bool {
    rule.resource_names.is_empty() || rule.resource_names.iter().any(|n| n == name)
}

fn non_resource_url_matches(rule: &PolicyRule, url: &str) -> bool {
    rule.non_resource_urls.iter().any(|u| {
        u == "*" || u == url || (u.ends_with('*') && url.starts_with(u.trim_end_matches('*')))
    })
}

/// `RuleAllows`: whether `rule` covers the request.
pub fn rule_allows(attributes: &Attributes, rule: &PolicyRule) -> bool {
    if attributes.resource_request {
        let combined = if attributes.subresource.is_empty() {
            attributes.resource.clone()
        } else {
            format!("{}/{}", attributes.resource, attributes.subresource)
        };
        return verb_matches(rule, &attributes.verb)
            && api_group_matches(rule, &attributes.api_group)
            && resource_matches(rule, &combined, &attributes.subresource)
            && resource_name_matches(rule, &attributes.name);
    }
    verb_matches(rule, &attributes.verb) && non_resource_url_matches(rule, &attributes.path)
}

/// The authorizer's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Allowed, and by what (`RBAC: allowed by …`; empty for `system:masters`).
    Allow(String),
    /// Not allowed; the reason is empty unless resolving roles failed
    /// (`RBAC: clusterrole.rbac.authorization.k8s.io "x" not found`).
    Deny(String),
}

impl Decision {
    /// Allowed?
    pub fn allowed(&self) -> bool {
        matches!(self, Decision::Allow(_))
    }
}

/// The privileged-group authorizer, then RBAC over the store's objects.
pub fn authorize(store: &Store, attributes: &Attributes) -> Decision {
    let Some(user) = &attributes.user else {
        return Decision::Deny(String::new());
    };
    if user.in_group(MASTERS) {
        return Decision::Allow(String::new());
    }
    let mut errors: Vec<String> = Vec::new();
    let list = |resource: &str, namespace: Option<&str>| {
        store
            .list(
                &Gvr::new(GROUP, "v1", resource),
                namespace,
                &ListOptions::default(),
            )
            .map(|l| l.items)
    };
    match list("clusterrolebindings", None) {
        Err(e) => errors.push(e.message),
        Ok(bindings) => {
            for binding in &bindings {
                let Some(subject) = applies_to(user, binding, "") else {
                    continue;
                };
                match role_rules(store, binding, "") {
                    Err(e) => errors.push(e),
                    Ok(rules) => {
                        if rules.iter().any(|r| rule_allows(attributes, r)) {
                            return Decision::Allow(format!(
                                "RBAC: allowed by ClusterRoleBinding {:?} of {} {:?} to {}",
                                name_of(binding),
                                str_at(binding, "/roleRef/kind"),
                                str_at(binding, "/roleRef/name"),
                                describe_subject(subject, "")
                            ));
                        }
                    }
                }
            }
        }
    }
    if !attributes.namespace.is_empty() {
        let namespace = attributes.namespace.as_str();
        match list("rolebindings", Some(namespace)) {
            Err(e) => errors.push(e.message),
            Ok(bindings) => {
                for binding in &bindings {
                    let Some(subject) = applies_to(user, binding, namespace) else {
                        continue;
                    };
                    match role_rules(store, binding, namespace) {
                        Err(e) => errors.push(e),
                        Ok(rules) => {
                            if rules.iter().any(|r| rule_allows(attributes, r)) {
                                return Decision::Allow(format!(
                                    "RBAC: allowed by RoleBinding {:?} of {} {:?} to {}",
                                    format!("{}/{namespace}", name_of(binding)),
                                    str_at(binding, "/roleRef/kind"),
                                    str_at(binding, "/roleRef/name"),
                                    describe_subject(subject, namespace)
                                ));
                            }
                        }
                    }
                }
            }
        }
    }
    if errors.is_empty() {
        Decision::Deny(String::new())
    } else {
        Decision::Deny(format!("RBAC: {}", aggregate(errors)))
    }
}

/// `utilerrors.NewAggregate(errs).Error()`: one message, or `[a, b]`, duplicates dropped.
fn aggregate(errors: Vec<String>) -> String {
    let mut seen: Vec<String> = Vec::new();
    for e in errors {
        if !seen.contains(&e) {
            seen.push(e);
        }
    }
    if seen.len() == 1 {
        seen.remove(0)
    } else {
        format!("[{}]", seen.join(", "))
    }
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn name_of(v: &Value) -> &str {
    str_at(v, "/metadata/name")
}

/// The first subject of `binding` that is `user` (`appliesTo`).
fn applies_to<'a>(user: &UserInfo, binding: &'a Value, namespace: &str) -> Option<&'a Value> {
    binding
        .get("subjects")?
        .as_array()?
        .iter()
        .find(|s| applies_to_user(user, s, namespace))
}

fn applies_to_user(user: &UserInfo, subject: &Value, namespace: &str) -> bool {
    let name = str_at(subject, "/name");
    match str_at(subject, "/kind") {
        "User" => user.name == name,
        "Group" => user.in_group(name),
        "ServiceAccount" => {
            let sa_namespace = match str_at(subject, "/namespace") {
                "" => namespace,
                ns => ns,
            };
            !sa_namespace.is_empty()
                && user.name == crate::auth::service_account_user(sa_namespace, name)
        }
        _ => false,
    }
}

fn describe_subject(subject: &Value, binding_namespace: &str) -> String {
    let kind = str_at(subject, "/kind");
    let name = str_at(subject, "/name");
    if kind == "ServiceAccount" {
        let ns = match str_at(subject, "/namespace") {
            "" => binding_namespace,
            ns => ns,
        };
        return format!("{kind} {:?}", format!("{name}/{ns}"));
    }
    format!("{kind} {name:?}")
}

/// The rules of the role `binding` refers to (`GetRoleReferenceRules`); the
/// error a lister gives when it is missing.
fn role_rules(store: &Store, binding: &Value, namespace: &str) -> Result<Vec<PolicyRule>, String> {
    let name = str_at(binding, "/roleRef/name");
    let (kind, role) = match str_at(binding, "/roleRef/kind") {
        "Role" => (
            "role",
            store.get(&Gvr::new(GROUP, "v1", "roles"), Some(namespace), name),
        ),
        "ClusterRole" => (
            "clusterrole",
            store.get(&Gvr::new(GROUP, "v1", "clusterroles"), None, name),
        ),
        other => return Err(format!("unsupported role reference kind: {other:?}")),
    };
    let role = role.map_err(|_| format!("{kind}.{GROUP} {name:?} not found"))?;
    Ok(role
        .get("rules")
        .and_then(Value::as_array)
        .map(|rules| rules.iter().filter_map(PolicyRule::from_value).collect())
        .unwrap_or_default())
}

/// What a request asks to act as (`Impersonate-User`, `Impersonate-Group`,
/// `Impersonate-Uid` headers; `kubectl --as`, `--as-group`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Impersonation {
    /// `Impersonate-User`.
    pub user: Option<String>,
    /// Every `Impersonate-Group`.
    pub groups: Vec<String>,
    /// `Impersonate-Uid`.
    pub uid: Option<String>,
}

/// The user a request acts as, as kube-apiserver's impersonation filter
/// decides it: `requester` must be allowed to `impersonate` the user
/// (`users`, or `serviceaccounts` in their namespace), each group (`groups`)
/// and the uid (`uids.authentication.k8s.io`); a ServiceAccount without groups
/// gets its fixed groups; `system:authenticated` is added unless a group says
/// otherwise.
pub fn impersonate(
    store: &Store,
    requester: UserInfo,
    asked: &Impersonation,
) -> Result<UserInfo, ApiError> {
    let Some(name) = asked.user.as_deref() else {
        if asked.groups.is_empty() && asked.uid.is_none() {
            return Ok(requester);
        }
        return Err(ApiError::internal(
            "requested impersonation of groups or a uid without impersonating a user",
        ));
    };
    let check = |resource: &str, group: &str, namespace: &str, object: &str| {
        let attributes = Attributes {
            user: Some(requester.clone()),
            verb: "impersonate".to_string(),
            resource_request: true,
            api_group: group.to_string(),
            namespace: namespace.to_string(),
            resource: resource.to_string(),
            name: object.to_string(),
            ..Default::default()
        };
        match authorize(store, &attributes) {
            Decision::Allow(_) => Ok(()),
            Decision::Deny(reason) => Err(forbidden(&attributes, &reason)),
        }
    };
    let mut groups = asked.groups.clone();
    let service_account = name
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.split_once(':'));
    match service_account {
        Some((namespace, account)) => {
            check("serviceaccounts", "", namespace, account)?;
            if groups.is_empty() {
                groups = vec![
                    crate::auth::SERVICE_ACCOUNTS.to_string(),
                    format!("{}:{namespace}", crate::auth::SERVICE_ACCOUNTS),
                ];
            }
        }
        None => check("users", "", "", name)?,
    }
    for group in &asked.groups {
        check("groups", "", "", group)?;
    }
    if let Some(uid) = &asked.uid {
        check("uids", "authentication.k8s.io", "", uid)?;
    }
    if name == crate::auth::ANONYMOUS {
        if !groups.iter().any(|g| g == UNAUTHENTICATED) {
            groups.push(UNAUTHENTICATED.to_string());
        }
    } else if !groups
        .iter()
        .any(|g| g == AUTHENTICATED || g == UNAUTHENTICATED)
    {
        groups.push(AUTHENTICATED.to_string());
    }
    Ok(UserInfo {
        name: name.to_string(),
        uid: asked.uid.clone().unwrap_or_default(),
        groups,
    })
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

/// The default ClusterRoles and ClusterRoleBindings kube-apiserver's bootstrap
/// policy creates that matter to these clients (others are not created):
/// `cluster-admin` for `system:masters`, `system:discovery` and
/// `system:basic-user` for authenticated users, `system:public-info-viewer`
/// for everyone. Objects already there are left alone.
pub fn ensure_bootstrap_policy(store: &Store) {
    let meta = |name: &str| {
        json!({
            "name": name,
            "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
            "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
        })
    };
    let roles = [
        (
            "cluster-admin",
            json!([
                {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                {"nonResourceURLs": ["*"], "verbs": ["*"]},
            ]),
        ),
        (
            "system:discovery",
            json!([{"nonResourceURLs": [
                "/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi",
                "/openapi/*", "/readyz", "/version", "/version/"
            ], "verbs": ["get"]}]),
        ),
        (
            "system:public-info-viewer",
            json!([{"nonResourceURLs": [
                "/healthz", "/livez", "/readyz", "/version", "/version/"
            ], "verbs": ["get"]}]),
        ),
        (
            "system:basic-user",
            json!([
                {"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], "verbs": ["create"]},
                {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]},
            ]),
        ),
    ];
    let bindings: [(&str, &[&str]); 4] = [
        ("cluster-admin", &[MASTERS]),
        ("system:discovery", &[AUTHENTICATED]),
        (
            "system:public-info-viewer",
            &[AUTHENTICATED, UNAUTHENTICATED],
        ),
        ("system:basic-user", &[AUTHENTICATED]),
    ];
    let opts = WriteOptions::manager("kube-apiserver");
    for (name, rules) in roles {
        let role = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": meta(name), "rules": rules,
        });
        let _ = store.create(&Gvr::new(GROUP, "v1", "clusterroles"), None, role, &opts);
    }
    for (name, groups) in bindings {
        let subjects: Vec<Value> = groups
            .iter()
            .map(|g| json!({"apiGroup": GROUP, "kind": "Group", "name": g}))
            .collect();
        let binding = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": meta(name),
            "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": name},
            "subjects": subjects,
        });
        let _ = store.create(
            &Gvr::new(GROUP, "v1", "clusterrolebindings"),
            None,
            binding,
            &opts,
        );
    }
}

#[cfg(test)]
mod tests {
    //! Cases mirror `plugin/pkg/auth/authorizer/rbac/rbac_test.go`
    //! (`TestAuthorizer`, `TestRuleMatches`) and requestinfo's tests.
    use super::*;

    fn rule(verbs: &str, groups: &str, resources: &str, urls: &str) -> Value {
        let split = |s: &str| -> Vec<String> { s.split(',').map(String::from).collect() };
        json!({"verbs": split(verbs), "apiGroups": split(groups), "resources": split(resources), "nonResourceURLs": split(urls)})
    }

    fn subjects(list: &[&str]) -> Vec<Value> {
        list.iter()
            .map(|s| {
                let (kind, name) = s.split_once(':').unwrap();
                match kind {
                    "ServiceAccount" => {
                        let (ns, name) = name.split_once(':').unwrap_or(("", name));
                        json!({"kind": kind, "name": name, "namespace": ns})
                    }
                    _ => json!({"kind": kind, "name": name, "apiGroup": GROUP}),
                }
            })
            .collect()
    }

    struct Cluster(Store);

    impl Cluster {
        fn new() -> Self {
            Cluster(Store::new())
        }
        fn create(&self, resource: &str, ns: Option<&str>, obj: Value) {
            if let Some(ns) = ns {
                let _ = self.0.create(
                    &Gvr::core("namespaces"),
                    None,
                    json!({"metadata": {"name": ns}}),
                    &WriteOptions::default(),
                );
            }
            self.0
                .create(
                    &Gvr::new(GROUP, "v1", resource),
                    ns,
                    obj,
                    &WriteOptions::default(),
                )
                .unwrap();
        }
        fn cluster_role(&self, name: &str, rules: &[Value]) -> &Self {
            self.create(
                "clusterroles",
                None,
                json!({"metadata": {"name": name}, "rules": rules}),
            );
            self
        }
        fn role(&self, ns: &str, name: &str, rules: &[Value]) -> &Self {
            self.create(
                "roles",
                Some(ns),
                json!({"metadata": {"name": name}, "rules": rules}),
            );
            self
        }
        fn cluster_binding(&self, role: &str, who: &[&str]) -> &Self {
            let name = format!("{role}-{}", who.join("-").replace(':', "."));
            self.create(
                "clusterrolebindings",
                None,
                json!({"metadata": {"name": name}, "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": role}, "subjects": subjects(who)}),
            );
            self
        }
        fn binding(&self, ns: &str, kind: &str, role: &str, who: &[&str]) -> &Self {
            let name = format!("{role}-{}", who.join("-").replace(':', "."));
            self.create(
                "rolebindings",
                Some(ns),
                json!({"metadata": {"name": name}, "roleRef": {"apiGroup": GROUP, "kind": kind, "name": role}, "subjects": subjects(who)}),
            );
            self
        }
        fn allows(&self, a: &Attributes) -> bool {
            authorize(&self.0, a).allowed()
        }
    }

    fn user(name: &str, groups: &str) -> Option<UserInfo> {
        Some(UserInfo {
            name: name.into(),
            uid: String::new(),
            groups: groups
                .split(',')
                .filter(|g| !g.is_empty())
                .map(String::from)
                .collect(),
        })
    }

    /// `defaultAttributes{user, groups, verb, resource, subresource, namespace, apiGroup}`.
    fn res(
        u: &str,
        groups: &str,
        verb: &str,
        resource: &str,
        sub: &str,
        ns: &str,
        group: &str,
    ) -> Attributes {
        Attributes {
            user: user(u, groups),
            verb: verb.into(),
            resource_request: true,
            resource: resource.into(),
            subresource: sub.into(),
            namespace: ns.into(),
            api_group: group.into(),
            ..Default::default()
        }
    }

    fn url(u: &str, groups: &str, verb: &str, path: &str) -> Attributes {
        Attributes {
            user: user(u, groups),
            verb: verb.into(),
            path: path.into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_cluster_role_bound_in_a_namespace_allows_there_only() {
        let c = Cluster::new();
        c.cluster_role("admin", &[rule("*", "*", "*", "*")])
            .binding(
                "ns1",
                "ClusterRole",
                "admin",
                &["User:admin", "Group:admins"],
            );
        for a in [
            res("admin", "", "get", "Pods", "", "ns1", ""),
            res("admin", "", "watch", "Pods", "", "ns1", ""),
            res("admin", "group1", "watch", "Foobar", "", "ns1", ""),
            res("joe", "admins", "watch", "Foobar", "", "ns1", ""),
            res("joe", "group1,admins", "watch", "Foobar", "", "ns1", ""),
        ] {
            assert!(c.allows(&a), "incorrectly restricted {a:?}");
        }
        for a in [
            res("admin", "", "GET", "Pods", "", "ns2", ""),
            res("admin", "", "GET", "Nodes", "", "", ""),
            res("admin", "admins", "GET", "Pods", "", "ns2", ""),
            res("admin", "admins", "GET", "Nodes", "", "", ""),
        ] {
            assert!(!c.allows(&a), "incorrectly passed {a:?}");
        }
    }

    #[test]
    fn non_resource_urls_match_exactly_or_by_prefix() {
        let c = Cluster::new();
        c.cluster_role("non-resource-url-getter", &[rule("get", "", "", "/apis")])
            .cluster_role("non-resource-url", &[rule("*", "", "", "/apis")])
            .cluster_role("non-resource-url-prefix", &[rule("get", "", "", "/apis/*")])
            .cluster_binding("non-resource-url-getter", &["User:foo", "Group:bar"])
            .cluster_binding("non-resource-url", &["User:admin", "Group:admin"])
            .cluster_binding(
                "non-resource-url-prefix",
                &["User:prefixed", "Group:prefixed"],
            );
        for a in [
            url("foo", "", "get", "/apis"),
            url("", "bar", "get", "/apis"),
            url("admin", "", "get", "/apis"),
            url("", "admin", "get", "/apis"),
            url("admin", "", "watch", "/apis"),
            url("", "admin", "watch", "/apis"),
            url("prefixed", "", "get", "/apis/v1"),
            url("", "prefixed", "get", "/apis/v1"),
            url("prefixed", "", "get", "/apis/v1/foobar"),
            url("", "prefixed", "get", "/apis/v1/foorbar"),
        ] {
            assert!(c.allows(&a), "incorrectly restricted {a:?}");
        }
        for a in [
            url("foo", "", "watch", "/apis"),
            url("", "bar", "watch", "/apis"),
            url("foo", "", "get", "/api/v1"),
            url("", "bar", "get", "/api/v1"),
            url("admin", "", "get", "/api/v1"),
            url("", "admin", "get", "/api/v1"),
            url("prefixed", "", "get", "/api/v1"),
            url("", "prefixed", "get", "/api/v1"),
        ] {
            assert!(!c.allows(&a), "incorrectly passed {a:?}");
        }
    }

    #[test]
    fn subresources_are_their_own_resources() {
        let c = Cluster::new();
        c.cluster_role("pods", &[rule("*", "*", "pods", "*")])
            .cluster_role("status", &[rule("*", "*", "pods/status", "*")])
            .binding("ns1", "ClusterRole", "pods", &["User:a"])
            .binding("ns1", "ClusterRole", "status", &["User:b"]);
        assert!(c.allows(&res("a", "", "get", "pods", "", "ns1", "")));
        assert!(!c.allows(&res("a", "", "get", "pods", "status", "ns1", "")));
        assert!(c.allows(&res("b", "", "get", "pods", "status", "ns1", "")));
        assert!(!c.allows(&res("b", "", "get", "pods", "", "ns1", "")));
        assert!(!c.allows(&res("a", "", "create", "pods", "exec", "ns1", "")));
    }

    #[test]
    fn rule_matching_follows_the_evaluation_helpers() {
        let r = |v: Value| PolicyRule::from_value(&v).unwrap();
        let req = |verb: &str, group: &str, resource: &str, sub: &str| {
            res("u", "", verb, resource, sub, "ns", group)
        };
        // star verb, exact match other
        let star_verb = r(rule("*", "group1", "resource1", ""));
        assert!(rule_allows(
            &req("verb1", "group1", "resource1", ""),
            &star_verb
        ));
        assert!(rule_allows(
            &req("verb2", "group1", "resource1", ""),
            &star_verb
        ));
        assert!(!rule_allows(
            &req("verb1", "group2", "resource1", ""),
            &star_verb
        ));
        assert!(!rule_allows(
            &req("verb1", "group1", "resource2", ""),
            &star_verb
        ));
        // star group
        let star_group = r(rule("verb1", "*", "resource1", ""));
        assert!(rule_allows(
            &req("verb1", "group2", "resource1", ""),
            &star_group
        ));
        assert!(!rule_allows(
            &req("verb2", "group1", "resource1", ""),
            &star_group
        ));
        // star resource: not a subresource
        let star_resource = r(rule("verb1", "group1", "*", ""));
        assert!(rule_allows(
            &req("verb1", "group1", "resource2", ""),
            &star_resource
        ));
        assert!(rule_allows(
            &req("verb1", "group1", "resource2", "sub"),
            &star_resource
        ));
        // tuple expansion
        let tuple = r(
            json!({"verbs": ["verb1", "verb2"], "apiGroups": ["group1", "group2"], "resources": ["resource1", "resource2"]}),
        );
        for (v, g, res_) in [
            ("verb1", "group1", "resource1"),
            ("verb2", "group2", "resource2"),
            ("verb1", "group2", "resource1"),
        ] {
            assert!(rule_allows(&req(v, g, res_, ""), &tuple));
        }
        // subresource expansion
        let sub = r(rule("*", "*", "resource1/subresource1", ""));
        assert!(rule_allows(
            &req("verb1", "group1", "resource1", "subresource1"),
            &sub
        ));
        assert!(!rule_allows(
            &req("verb1", "group1", "resource1", "subresource2"),
            &sub
        ));
        assert!(!rule_allows(
            &req("verb1", "group1", "resource2", "subresource1"),
            &sub
        ));
        assert!(!rule_allows(&req("verb1", "group1", "resource1", ""), &sub));
        // star subresource
        let star_sub = r(rule("*", "*", "*/subresource1", ""));
        assert!(rule_allows(
            &req("verb1", "group1", "resource1", "subresource1"),
            &star_sub
        ));
        assert!(rule_allows(
            &req("verb1", "group1", "resource2", "subresource1"),
            &star_sub
        ));
        assert!(!rule_allows(
            &req("verb1", "group1", "resource1", "subresource2"),
            &star_sub
        ));
        assert!(!rule_allows(
            &req("verb1", "group1", "resource1", ""),
            &star_sub
        ));
        // resource names
        let names = r(
            json!({"verbs": ["get"], "apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "resourceNames": ["mongodbs.middleware.fedstate.io"]}),
        );
        let mut named = req(
            "get",
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            "",
        );
        named.namespace.clear();
        named.name = "mongodbs.middleware.fedstate.io".into();
        assert!(rule_allows(&named, &names));
        named.name = "other.example.com".into();
        assert!(!rule_allows(&named, &names));
        named.name.clear();
        named.verb = "list".into();
        assert!(!rule_allows(&named, &names), "a list names no object");
        // non-resource URLs
        let star_url = r(json!({"verbs": ["verb1"], "nonResourceURLs": ["*"]}));
        assert!(rule_allows(
            &url("u", "", "verb1", "/foo/bar/one"),
            &star_url
        ));
        assert!(!rule_allows(&url("u", "", "verb2", "/foo"), &star_url));
        let sub_path = r(json!({"verbs": ["verb1"], "nonResourceURLs": ["/foo/*"]}));
        assert!(!rule_allows(&url("u", "", "verb1", "/foo"), &sub_path));
        assert!(rule_allows(&url("u", "", "verb1", "/foo/bar"), &sub_path));
        assert!(!rule_allows(&url("u", "", "verb1", "/bar/foo"), &sub_path));
    }

    #[test]
    fn service_accounts_roles_and_masters() {
        let c = Cluster::new();
        c.role("ops", "reader", &[rule("get,list", "", "secrets", "")])
            .binding("ops", "Role", "reader", &["ServiceAccount:ops:robot"])
            .role("ops", "lister", &[rule("list", "", "pods", "")])
            // a ServiceAccount subject without namespace is in the binding's namespace
            .binding("ops", "Role", "lister", &["ServiceAccount:robot"]);
        let robot = UserInfo::service_account("ops", "robot", "uid");
        let mut a = res("", "", "get", "secrets", "", "ops", "");
        a.user = Some(robot.clone());
        assert!(c.allows(&a));
        a.verb = "list".into();
        a.resource = "pods".into();
        assert!(c.allows(&a));
        a.namespace = "default".into();
        assert!(!c.allows(&a), "a RoleBinding grants in its namespace only");
        a.user = Some(UserInfo::service_account("other", "robot", "uid"));
        a.namespace = "ops".into();
        assert!(!c.allows(&a));
        let mut admin = res(
            "kubernetes-admin",
            "system:masters",
            "delete",
            "nodes",
            "",
            "",
            "",
        );
        assert_eq!(authorize(&c.0, &admin), Decision::Allow(String::new()));
        admin.user = user("kubernetes-admin", "");
        assert!(!c.allows(&admin));
    }

    #[test]
    fn a_missing_role_is_the_reason_of_the_denial() {
        let c = Cluster::new();
        c.cluster_binding("gone", &["User:alice"]).binding(
            "ns1",
            "Role",
            "missing",
            &["User:alice"],
        );
        let a = res("alice", "", "list", "pods", "", "ns1", "");
        assert_eq!(
            authorize(&c.0, &a),
            Decision::Deny(
                "RBAC: [clusterrole.rbac.authorization.k8s.io \"gone\" not found, role.rbac.authorization.k8s.io \"missing\" not found]".into()
            )
        );
        let a = res("alice", "", "list", "pods", "", "", "");
        assert_eq!(
            authorize(&c.0, &a),
            Decision::Deny("RBAC: clusterrole.rbac.authorization.k8s.io \"gone\" not found".into())
        );
        assert_eq!(
            authorize(&c.0, &res("bob", "", "list", "pods", "", "ns1", "")),
            Decision::Deny(String::new()),
            "bindings of other users are not resolved"
        );
    }

    #[test]
    fn bootstrap_policy_allows_discovery_to_authenticated_users_and_health_to_everyone() {
        let store = Store::new();
        ensure_bootstrap_policy(&store);
        ensure_bootstrap_policy(&store); // idempotent
        let none = HashMap::new();
        let sa = UserInfo::service_account("ops", "robot", "uid");
        for path in [
            "/api",
            "/api/v1",
            "/apis",
            "/apis/apps/v1",
            "/version",
            "/healthz",
            "/openapi/v3",
            "/openapi/v3/apis/apps/v1",
        ] {
            let a = request_attributes(sa.clone(), "GET", path, &none);
            assert!(!a.resource_request, "{path}");
            assert!(authorize(&store, &a).allowed(), "{path}");
        }
        let anonymous = UserInfo::anonymous();
        for (path, allowed) in [
            ("/healthz", true),
            ("/version", true),
            ("/readyz", true),
            ("/api", false),
            ("/apis", false),
            ("/openapi/v3", false),
        ] {
            let a = request_attributes(anonymous.clone(), "GET", path, &none);
            assert_eq!(authorize(&store, &a).allowed(), allowed, "{path}");
        }
        let a = request_attributes(sa.clone(), "GET", "/api/v1/namespaces/ops/pods", &none);
        assert!(!authorize(&store, &a).allowed());
        let a = request_attributes(sa, "POST", "/healthz", &none);
        assert!(!authorize(&store, &a).allowed(), "only get");
    }

    #[test]
    fn request_attributes_follow_requestinfo() {
        let u = UserInfo::anonymous();
        let q = |pairs: &[(&str, &str)]| -> HashMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let none = q(&[]);
        let check = |method: &str,
                     path: &str,
                     query: &HashMap<String, String>,
                     expected: (&str, &str, &str, &str, &str, &str)| {
            let a = request_attributes(u.clone(), method, path, query);
            assert!(a.resource_request, "{method} {path}");
            assert_eq!(
                (
                    a.verb.as_str(),
                    a.api_group.as_str(),
                    a.namespace.as_str(),
                    a.resource.as_str(),
                    a.name.as_str(),
                    a.subresource.as_str()
                ),
                expected,
                "{method} {path}"
            );
        };
        check(
            "GET",
            "/api/v1/namespaces",
            &none,
            ("list", "", "", "namespaces", "", ""),
        );
        check(
            "GET",
            "/api/v1/namespaces/other",
            &none,
            ("get", "", "other", "namespaces", "other", ""),
        );
        check(
            "GET",
            "/api/v1/namespaces/other/pods",
            &none,
            ("list", "", "other", "pods", "", ""),
        );
        check(
            "GET",
            "/api/v1/namespaces/other/pods/foo",
            &none,
            ("get", "", "other", "pods", "foo", ""),
        );
        check(
            "HEAD",
            "/api/v1/namespaces/other/pods/foo",
            &none,
            ("get", "", "other", "pods", "foo", ""),
        );
        check(
            "GET",
            "/api/v1/pods",
            &none,
            ("list", "", "", "pods", "", ""),
        );
        check(
            "GET",
            "/api/v1/namespaces/other/pods/foo/status",
            &none,
            ("get", "", "other", "pods", "foo", "status"),
        );
        check(
            "PUT",
            "/api/v1/namespaces/other/finalize",
            &none,
            ("update", "", "other", "namespaces", "other", "finalize"),
        );
        check(
            "GET",
            "/api/v1/watch/pods",
            &none,
            ("watch", "", "", "pods", "", ""),
        );
        check(
            "GET",
            "/api/v1/pods",
            &q(&[("watch", "true")]),
            ("watch", "", "", "pods", "", ""),
        );
        check(
            "GET",
            "/api/v1/pods",
            &q(&[("watch", "false")]),
            ("list", "", "", "pods", "", ""),
        );
        check(
            "GET",
            "/api/v1/watch/namespaces/other/pods",
            &none,
            ("watch", "", "other", "pods", "", ""),
        );
        check(
            "GET",
            "/apis/extensions/v1beta1/namespaces/other/extensions",
            &none,
            ("list", "extensions", "other", "extensions", "", ""),
        );
        check(
            "GET",
            "/apis/extensions/v1beta1/extensions",
            &none,
            ("list", "extensions", "", "extensions", "", ""),
        );
        check(
            "POST",
            "/api/v1/namespaces/other/pods",
            &none,
            ("create", "", "other", "pods", "", ""),
        );
        check(
            "POST",
            "/api/v1/namespaces/other/pods/foo/exec",
            &none,
            ("create", "", "other", "pods", "foo", "exec"),
        );
        check(
            "PATCH",
            "/apis/middleware.fedstate.io/v1alpha1/namespaces/db/mongodbs/demo/status",
            &none,
            (
                "patch",
                "middleware.fedstate.io",
                "db",
                "mongodbs",
                "demo",
                "status",
            ),
        );
        check(
            "DELETE",
            "/api/v1/namespaces/other/pods/foo",
            &none,
            ("delete", "", "other", "pods", "foo", ""),
        );
        check(
            "DELETE",
            "/api/v1/namespaces/other/pods",
            &none,
            ("deletecollection", "", "other", "pods", "", ""),
        );
        // a single-name field selector names the object (resourceNames apply)
        check(
            "GET",
            "/api/v1/namespaces/other/pods",
            &q(&[("fieldSelector", "metadata.name=foo")]),
            ("list", "", "other", "pods", "foo", ""),
        );
        check(
            "GET",
            "/api/v1/namespaces/other/pods",
            &q(&[
                ("fieldSelector", "metadata.name==foo,status.phase=Running"),
                ("watch", "1"),
            ]),
            ("watch", "", "other", "pods", "foo", ""),
        );
        check(
            "GET",
            "/api/v1/namespaces/other/pods",
            &q(&[("fieldSelector", "metadata.name!=foo")]),
            ("list", "", "other", "pods", "", ""),
        );
        for path in [
            "/",
            "/healthz",
            "/api",
            "/api/v1",
            "/apis",
            "/apis/apps",
            "/apis/apps/v1",
            "/version",
            "/openapi/v3/apis/apps/v1",
        ] {
            let a = request_attributes(u.clone(), "GET", path, &none);
            assert!(!a.resource_request, "{path}");
            assert_eq!((a.verb.as_str(), a.path.as_str()), ("get", path));
        }
    }

    #[test]
    fn forbidden_messages_are_kube_apiservers() {
        let sa = UserInfo::service_account("mmo", "op", "uid");
        let none = HashMap::new();
        let e = forbidden(
            &request_attributes(sa.clone(), "GET", "/api/v1/namespaces/db/secrets", &none),
            "",
        );
        assert_eq!((e.code, e.reason.as_str()), (403, "Forbidden"));
        assert_eq!(
            e.message,
            "secrets is forbidden: User \"system:serviceaccount:mmo:op\" cannot list resource \"secrets\" in API group \"\" in the namespace \"db\""
        );
        assert_eq!(e.details, Some(json!({"kind": "secrets"})));
        let e = forbidden(
            &request_attributes(
                sa.clone(),
                "POST",
                "/api/v1/namespaces/db/pods/db-0/exec",
                &none,
            ),
            "",
        );
        assert_eq!(
            e.message,
            "pods \"db-0\" is forbidden: User \"system:serviceaccount:mmo:op\" cannot create resource \"pods/exec\" in API group \"\" in the namespace \"db\""
        );
        assert_eq!(e.details, Some(json!({"kind": "pods", "name": "db-0"})));
        let e = forbidden(
            &request_attributes(sa.clone(), "GET", "/apis/apps/v1/statefulsets", &none),
            "RBAC: role.rbac.authorization.k8s.io \"x\" not found",
        );
        assert_eq!(
            e.message,
            "statefulsets.apps is forbidden: User \"system:serviceaccount:mmo:op\" cannot list resource \"statefulsets\" in API group \"apps\" at the cluster scope: RBAC: role.rbac.authorization.k8s.io \"x\" not found"
        );
        assert_eq!(
            e.details,
            Some(json!({"kind": "statefulsets", "group": "apps"}))
        );
        let e = forbidden(
            &request_attributes(UserInfo::anonymous(), "GET", "/metrics", &none),
            "",
        );
        assert_eq!(
            e.message,
            "forbidden: User \"system:anonymous\" cannot get path \"/metrics\""
        );
        assert_eq!(e.details, Some(json!({})));
        let create = request_attributes(sa, "PATCH", "/api/v1/namespaces/db/secrets/s", &none);
        let e = forbidden_create_on_patch(&create, "");
        assert_eq!(e.message, "secrets \"s\" is forbidden: ");
    }
}
