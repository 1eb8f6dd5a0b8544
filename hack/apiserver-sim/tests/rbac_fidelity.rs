//! Authentication and RBAC against real clients: kubectl (its
//! `Error from server (Forbidden): …` lines, acting as a ServiceAccount with
//! `--as`, since client-go sends no credentials over plain HTTP) and kube-rs
//! (a ServiceAccount token: a metadata-only watch of Secrets, 403 and 401
//! `Status`es), on a server in RBAC mode.

mod common;

use std::sync::Arc;

use apiserver_sim::auth::Unauthenticated;
use apiserver_sim::Authenticator;
use common::TestCluster;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ListParams, PartialObjectMeta, Patch, PatchParams};
use kube::runtime::watcher;

const BINARY: u8 = 4;

/// A namespace `ops`, ServiceAccount `ops/robot` and a Role letting it read
/// pods and list/watch (not get) Secrets, and patch (not create) ConfigMaps.
/// kubectl, without credentials, is an administrator (`system:unsecured`).
fn cluster() -> (TestCluster, Arc<Authenticator>) {
    setup(Authenticator::new().unauthenticated(Unauthenticated::Admin))
}

fn setup(auth: Authenticator) -> (TestCluster, Arc<Authenticator>) {
    let (c, auth) = TestCluster::start_rbac(BINARY, auth);
    let rbac = c.write(
        "rbac.yaml",
        r#"apiVersion: v1
kind: Namespace
metadata:
  name: ops
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: robot
  namespace: ops
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: robot
  namespace: ops
rules:
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch"]
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["list", "watch"]
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["patch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: robot
  namespace: ops
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: robot
subjects:
- kind: ServiceAccount
  name: robot
  namespace: ops
"#,
    );
    c.kubectl_ok(&["apply", "-f", &rbac]);
    c.kubectl_ok(&[
        "-n",
        "ops",
        "create",
        "secret",
        "generic",
        "db",
        "--from-literal=password=hunter2",
    ]);
    (c, auth)
}

const ROBOT: &str = "--as=system:serviceaccount:ops:robot";

#[test]
fn kubectl_prints_forbidden_for_what_the_role_does_not_grant() {
    let (c, _) = cluster();
    let robot = |args: &[&str]| {
        let mut all = vec![ROBOT];
        all.extend_from_slice(args);
        c.kubectl(&all)
    };

    let (ok, out, err) = robot(&["-n", "ops", "get", "pods"]);
    assert!(ok, "granted: {out}{err}");
    assert!(
        err.contains("No resources found in ops namespace."),
        "{err}"
    );

    let (ok, _, err) = robot(&["-n", "ops", "get", "secret", "db"]);
    assert!(!ok);
    assert_eq!(
        err.trim(),
        "Error from server (Forbidden): secrets \"db\" is forbidden: User \"system:serviceaccount:ops:robot\" cannot get resource \"secrets\" in API group \"\" in the namespace \"ops\""
    );

    let (ok, _, err) = robot(&["get", "pods", "-A"]);
    assert!(!ok);
    assert_eq!(
        err.trim(),
        "Error from server (Forbidden): pods is forbidden: User \"system:serviceaccount:ops:robot\" cannot list resource \"pods\" in API group \"\" at the cluster scope"
    );

    let (ok, _, err) = robot(&["-n", "default", "get", "pods"]);
    assert!(!ok);
    assert!(
        err.contains("Error from server (Forbidden): pods is forbidden: User \"system:serviceaccount:ops:robot\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""),
        "a RoleBinding grants in its namespace only: {err}"
    );

    let (ok, _, err) = robot(&["-n", "ops", "delete", "secret", "db", "--wait=false"]);
    assert!(!ok);
    assert!(
        err.contains("Error from server (Forbidden): secrets \"db\" is forbidden: User \"system:serviceaccount:ops:robot\" cannot delete resource \"secrets\" in API group \"\" in the namespace \"ops\""),
        "{err}"
    );

    // Server-side apply that would create the object is also authorized as a
    // create: patch alone is not enough.
    let cm = c.write(
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: ops\ndata:\n  a: b\n",
    );
    let (ok, _, err) = robot(&["apply", "--server-side", "-f", &cm]);
    assert!(!ok);
    assert!(
        err.contains("Error from server (Forbidden)")
            && err.contains("configmaps \"settings\" is forbidden"),
        "{err}"
    );
    c.kubectl_ok(&["apply", "--server-side", "-f", &cm]);
    let (ok, out, err) = robot(&["apply", "--server-side", "--force-conflicts", "-f", &cm]);
    assert!(ok, "patching an existing object: {out}{err}");

    // The bootstrap policy is there, as kube-apiserver reconciles it.
    let bindings = c.kubectl_ok(&["get", "clusterrolebindings"]);
    for binding in [
        "cluster-admin",
        "system:discovery",
        "system:public-info-viewer",
        "system:basic-user",
    ] {
        assert!(bindings.contains(binding), "{bindings}");
    }
}

#[test]
fn anonymous_users_see_health_and_version_only() {
    let (c, _) = TestCluster::start_rbac(BINARY, Authenticator::new());
    let (ok, out, err) = c.kubectl(&["get", "--raw", "/healthz"]);
    assert!(ok, "{out}{err}");
    assert_eq!(out.trim(), "ok");
    let (ok, _, err) = c.kubectl(&["get", "--raw", "/api"]);
    assert!(!ok);
    assert!(
        err.contains("Error from server (Forbidden): forbidden: User \"system:anonymous\" cannot get path \"/api\""),
        "{err}"
    );
}

#[test]
fn kube_rs_watches_secret_metadata_and_gets_a_forbidden_status() {
    let (c, auth) = cluster();
    let token = auth.service_account_token(&c.store(), "ops", "robot");
    let url = c.url();
    c.runtime.block_on(async move {
        let mut config = kube::Config::new(url.parse().unwrap());
        config.auth_info.token = Some(token.into());
        let client = kube::Client::try_from(config).unwrap();

        // list/watch of Secrets by metadata: allowed, and carries no data.
        let metadata: Api<PartialObjectMeta<Secret>> = Api::namespaced(client.clone(), "ops");
        let listed = metadata.list_metadata(&ListParams::default()).await.unwrap();
        assert_eq!(listed.items.len(), 1);
        assert_eq!(listed.items[0].metadata.name.as_deref(), Some("db"));
        let mut events = watcher(metadata, watcher::Config::default()).boxed();
        let mut names = Vec::new();
        while let Some(event) = events.next().await {
            match event.unwrap() {
                watcher::Event::InitApply(secret) => names.push(secret.metadata.name.unwrap()),
                watcher::Event::InitDone => break,
                _ => {}
            }
        }
        assert_eq!(names, ["db"]);

        // get of the one Secret: not granted.
        let secrets: Api<Secret> = Api::namespaced(client.clone(), "ops");
        match secrets.get("db").await {
            Err(kube::Error::Api(status)) => {
                assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"));
                assert_eq!(
                    status.message,
                    "secrets \"db\" is forbidden: User \"system:serviceaccount:ops:robot\" cannot get resource \"secrets\" in API group \"\" in the namespace \"ops\""
                );
            }
            other => panic!("expected a 403, got {other:?}"),
        }

        // Server-side apply of a missing ConfigMap with patch but no create.
        let config_maps: Api<ConfigMap> = Api::namespaced(client, "ops");
        let apply = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "new"}});
        match config_maps
            .patch("new", &PatchParams::apply("robot"), &Patch::Apply(apply))
            .await
        {
            Err(kube::Error::Api(status)) => {
                assert_eq!(status.code, 403);
                assert_eq!(status.message, "configmaps \"new\" is forbidden: ");
            }
            other => panic!("expected a 403, got {other:?}"),
        }
    });

    // A token that names no one, and the robot's once its account is gone: 401.
    let url = c.url();
    let token = auth.service_account_token(&c.store(), "ops", "robot");
    c.kubectl_ok(&["-n", "ops", "delete", "serviceaccount", "robot"]);
    c.runtime.block_on(async move {
        for token in [token, "not-a-token".to_string()] {
            let mut config = kube::Config::new(url.parse().unwrap());
            config.auth_info.token = Some(token.into());
            let client = kube::Client::try_from(config).unwrap();
            let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client, "ops");
            match pods.list(&ListParams::default()).await {
                Err(kube::Error::Api(status)) => {
                    assert_eq!(
                        (status.code, status.reason.as_str(), status.message.as_str()),
                        (401, "Unauthorized", "Unauthorized")
                    );
                }
                other => panic!("expected a 401, got {other:?}"),
            }
        }
    });
}
