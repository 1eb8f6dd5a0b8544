//! The default roles and bindings of kube-apiserver's bootstrap policy
//! (`plugin/pkg/auth/authorizer/rbac/bootstrappolicy`) that these clients need.

use serde_json::{json, Value};

use super::GROUP;
use crate::auth::{AUTHENTICATED, MASTERS, UNAUTHENTICATED};
use crate::registry::Gvr;
use crate::store::{Store, WriteOptions};

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
