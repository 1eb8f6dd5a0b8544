//! PersistentVolumeClaims as kube-apiserver admits them: the spec validation
//! and update rules of `ValidatePersistentVolumeClaim(Update)`, the
//! DefaultStorageClass and PersistentVolumeClaimResize admission plugins.

// `ApiError` carries a whole Kubernetes `Status`, as the store returns it.
#![allow(clippy::result_large_err)]

use std::net::SocketAddr;

use apiserver_sim::{ApiError, ApiServer, Gvr, PatchType, Store, WriteOptions};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{Api, Patch, PatchParams};
use kube::Client;
use serde_json::{json, Value};

fn claims() -> Gvr {
    Gvr::core("persistentvolumeclaims")
}

fn classes() -> Gvr {
    Gvr::new("storage.k8s.io", "v1", "storageclasses")
}

fn mgr() -> WriteOptions {
    WriteOptions::manager("test")
}

fn class(name: &str, extra: Value) -> Value {
    let mut sc = json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": name}, "provisioner": "csi.example.com"});
    if let (Some(sc), Some(extra)) = (sc.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            if k == "metadata" {
                sc["metadata"]
                    .as_object_mut()
                    .unwrap()
                    .extend(v.as_object().unwrap().clone());
            } else {
                sc.insert(k.clone(), v.clone());
            }
        }
    }
    sc
}

fn claim(name: &str, class: Option<&str>, storage: &str) -> Value {
    let mut c = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": storage}}}});
    if let Some(class) = class {
        c["spec"]["storageClassName"] = json!(class);
    }
    c
}

/// A store with the classes `expandable` (allowVolumeExpansion) and `fixed`.
fn store() -> Store {
    let s = Store::new();
    s.create(
        &classes(),
        None,
        class("expandable", json!({"allowVolumeExpansion": true})),
        &mgr(),
    )
    .unwrap();
    s.create(&classes(), None, class("fixed", json!({})), &mgr())
        .unwrap();
    s
}

/// Creates `claim` and reports it Bound with `capacity`, as the binder does.
fn bound(s: &Store, claim: Value, capacity: &str) -> Value {
    let name = claim["metadata"]["name"].as_str().unwrap().to_string();
    s.create(&claims(), Some("default"), claim, &mgr()).unwrap();
    s.patch(
        &claims(),
        Some("default"),
        &name,
        PatchType::Merge,
        &json!({"status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"],
            "capacity": {"storage": capacity}}}),
        &mgr().status(),
    )
    .unwrap()
}

fn resize(s: &Store, name: &str, storage: &str) -> Result<Value, ApiError> {
    s.patch(
        &claims(),
        Some("default"),
        name,
        PatchType::Merge,
        &json!({"spec": {"resources": {"requests": {"storage": storage}}}}),
        &mgr(),
    )
}

fn patch_spec(s: &Store, name: &str, spec: Value) -> Result<Value, ApiError> {
    s.patch(
        &claims(),
        Some("default"),
        name,
        PatchType::Merge,
        &json!({ "spec": spec }),
        &mgr(),
    )
}

const NOT_RESIZABLE: &str = "only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize";

#[test]
fn a_bound_claim_grows_only_where_its_storage_class_allows_expansion() {
    let s = store();
    bound(&s, claim("grows", Some("expandable"), "1Gi"), "1Gi");
    bound(&s, claim("fixed", Some("fixed"), "1Gi"), "1Gi");
    bound(&s, claim("classless", None, "1Gi"), "1Gi");
    bound(&s, claim("unknown", Some("gone"), "1Gi"), "1Gi");

    let grown = resize(&s, "grows", "2Gi").unwrap();
    assert_eq!(grown["spec"]["resources"]["requests"]["storage"], "2Gi");
    assert_eq!(
        grown["status"]["capacity"]["storage"], "1Gi",
        "the capacity is the resizer's to change"
    );
    // The same size written otherwise is no increase, and needs no class.
    resize(&s, "fixed", "1024Mi").unwrap();

    for name in ["fixed", "classless", "unknown"] {
        let e = resize(&s, name, "2Gi").unwrap_err();
        assert_eq!((e.code, e.reason.as_str()), (403, "Forbidden"), "{name}");
        assert_eq!(
            e.message,
            format!("persistentvolumeclaims \"{name}\" is forbidden: {NOT_RESIZABLE}")
        );
    }
    // A class that allows expansion now lets the claim grow.
    s.patch(
        &classes(),
        None,
        "fixed",
        PatchType::Merge,
        &json!({"allowVolumeExpansion": true}),
        &mgr(),
    )
    .unwrap();
    resize(&s, "fixed", "3Gi").unwrap();
}

#[test]
fn an_unbound_claims_storage_request_is_immutable() {
    let s = store();
    s.create(
        &claims(),
        Some("default"),
        claim("pending", Some("expandable"), "1Gi"),
        &mgr(),
    )
    .unwrap();
    let e = resize(&s, "pending", "2Gi").unwrap_err();
    assert_eq!(e.code, 422);
    assert_eq!(
        e.message,
        "PersistentVolumeClaim \"pending\" is invalid: spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims"
    );
    // Semantically the same quantity is no change.
    resize(&s, "pending", "1024Mi").unwrap();
}

#[test]
fn a_storage_request_may_shrink_only_to_recover_and_stay_above_the_capacity() {
    let s = store();
    bound(&s, claim("data", Some("expandable"), "1Gi"), "1Gi");
    let e = resize(&s, "data", "512Mi").unwrap_err();
    assert_eq!(e.code, 422);
    assert_eq!(
        e.message,
        "PersistentVolumeClaim \"data\" is invalid: spec.resources.requests.storage: Forbidden: field can not be less than status.capacity"
    );
    // An expansion to 10Gi that cannot finish: back to 2Gi, still above the
    // 1Gi capacity, is allowed (RecoverVolumeExpansionFailure, on in 1.33).
    resize(&s, "data", "10Gi").unwrap();
    resize(&s, "data", "2Gi").unwrap();
    for at_or_below in ["1Gi", "1073741824", "1G"] {
        let e = resize(&s, "data", at_or_below).unwrap_err();
        assert_eq!(e.code, 422, "{at_or_below}");
        assert!(
            e.message
                .ends_with("spec.resources.requests.storage: Forbidden: field can not be less than status.capacity"),
            "{}",
            e.message
        );
    }
}

#[test]
fn the_rest_of_the_spec_is_immutable_except_what_binding_and_defaulting_set() {
    let s = store();
    bound(&s, claim("data", None, "1Gi"), "1Gi");
    // The binder sets volumeName once; a class may be set where there was none.
    patch_spec(&s, "data", json!({"volumeName": "pvc-1"})).unwrap();
    patch_spec(&s, "data", json!({"storageClassName": "expandable"})).unwrap();
    for (change, field) in [
        (json!({"volumeName": "pvc-2"}), "spec"),
        (json!({"storageClassName": "fixed"}), "spec"),
        (json!({"accessModes": ["ReadWriteMany"]}), "spec"),
        (
            json!({"resources": {"requests": {"storage": "2Gi"}, "limits": {"storage": "3Gi"}}}),
            "spec",
        ),
    ] {
        let e = patch_spec(&s, "data", change.clone()).unwrap_err();
        assert_eq!(e.code, 422, "{change}");
        assert_eq!(e.details.as_ref().unwrap()["causes"][0]["field"], field);
    }
    let e = patch_spec(&s, "data", json!({"volumeMode": "Block"})).unwrap_err();
    let fields: Vec<&str> = e.details.as_ref().unwrap()["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["spec", "volumeMode"]);
    assert!(
        e.message
            .ends_with("volumeMode: Invalid value: \"Block\": field is immutable"),
        "{}",
        e.message
    );
    // The status subresource leaves the spec alone.
    s.patch(
        &claims(),
        Some("default"),
        "data",
        PatchType::Merge,
        &json!({"status": {"capacity": {"storage": "1Gi"}}}),
        &mgr().status(),
    )
    .unwrap();
}

#[test]
fn claims_need_access_modes_and_a_positive_parseable_storage_request() {
    let s = store();
    let mut c = claim("bare", None, "1Gi");
    c["spec"] = json!({});
    let e = s.create(&claims(), Some("default"), c, &mgr()).unwrap_err();
    assert_eq!(e.code, 422);
    assert_eq!(
        e.message,
        "PersistentVolumeClaim \"bare\" is invalid: spec.accessModes: Required value: at least 1 access mode is required, spec.resources[storage]: Required value"
    );
    let e = s
        .create(&claims(), Some("default"), claim("zero", None, "0"), &mgr())
        .unwrap_err();
    assert!(
        e.message
            .ends_with("spec.resources[storage]: Invalid value: \"0\": must be greater than zero"),
        "{}",
        e.message
    );
    let e = s
        .create(
            &claims(),
            Some("default"),
            claim("bad", None, "1 GB"),
            &mgr(),
        )
        .unwrap_err();
    assert_eq!(e.code, 400);
    assert_eq!(
        e.message,
        "PersistentVolumeClaim in version \"v1\" cannot be handled as a PersistentVolumeClaim: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    );
}

#[test]
fn a_claim_naming_no_class_gets_the_default_storage_class() {
    let s = store();
    let none = s
        .create(
            &claims(),
            Some("default"),
            claim("before", None, "1Gi"),
            &mgr(),
        )
        .unwrap();
    assert!(
        none["spec"].get("storageClassName").is_none(),
        "no default class yet"
    );
    let default = json!({"metadata": {"annotations": {"storageclass.kubernetes.io/is-default-class": "true"}}});
    s.create(
        &classes(),
        None,
        class("z-default", default.clone()),
        &mgr(),
    )
    .unwrap();
    s.create(&classes(), None, class("a-default", default), &mgr())
        .unwrap();
    let defaulted = s
        .create(
            &claims(),
            Some("default"),
            claim("after", None, "1Gi"),
            &mgr(),
        )
        .unwrap();
    // The newest default class, then the first by name.
    assert_eq!(defaulted["spec"]["storageClassName"], "a-default");
    let explicit_none = s
        .create(
            &claims(),
            Some("default"),
            claim("none", Some(""), "1Gi"),
            &mgr(),
        )
        .unwrap();
    assert_eq!(explicit_none["spec"]["storageClassName"], "");
    let mut annotated = claim("annotated", None, "1Gi");
    annotated["metadata"]["annotations"] =
        json!({"volume.beta.kubernetes.io/storage-class": "fixed"});
    let annotated = s
        .create(&claims(), Some("default"), annotated, &mgr())
        .unwrap();
    assert!(annotated["spec"].get("storageClassName").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_expansion_is_a_403_status_on_the_wire() {
    let server = ApiServer::start("127.0.0.1:0".parse::<SocketAddr>().unwrap())
        .await
        .unwrap();
    let store = server.store().clone();
    store
        .create(&classes(), None, class("fixed", json!({})), &mgr())
        .unwrap();
    bound(&store, claim("data-db-0", Some("fixed"), "1Gi"), "1Gi");
    let client = Client::try_from(kube::Config::new(server.url().parse().unwrap())).unwrap();
    let api: Api<PersistentVolumeClaim> = Api::namespaced(client, "default");
    let error = api
        .patch(
            "data-db-0",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"resources": {"requests": {"storage": "2Gi"}}}})),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(status) = error else {
        panic!("an API status: {error}")
    };
    assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        status.message,
        format!("persistentvolumeclaims \"data-db-0\" is forbidden: {NOT_RESIZABLE}")
    );
    let stored = api.get("data-db-0").await.unwrap();
    assert_eq!(
        serde_json::to_value(stored.spec.unwrap().resources.unwrap().requests.unwrap()).unwrap()
            ["storage"],
        "1Gi"
    );
}
