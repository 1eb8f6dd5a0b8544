//! Cases mirror `plugin/pkg/auth/authorizer/rbac/rbac_test.go`
//! (`TestAuthorizer`, `TestRuleMatches`) and requestinfo's tests.

use std::collections::HashMap;

use serde_json::{json, Value};

use super::*;
use crate::registry::Gvr;
use crate::store::{Store, WriteOptions};

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
    c.cluster_binding("gone", &["User:alice"])
        .binding("ns1", "Role", "missing", &["User:alice"]);
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
