//! The privileged-group authorizer followed by the RBAC authorizer
//! (`plugin/pkg/auth/authorizer/rbac/rbac.go`), with rule matching as
//! `pkg/apis/rbac/v1/evaluation_helpers.go` does it.

use serde::Deserialize;
use serde_json::Value;

use super::{Attributes, GROUP};
use crate::auth::{UserInfo, MASTERS};
use crate::registry::Gvr;
use crate::store::{ListOptions, Store};

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
