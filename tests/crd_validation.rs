//! The generated CRD refuses bad `MongoDB` objects the way the API server will:
//! its schema defaults, ranges and CEL rules (FedState's immutability rules and
//! ours) are run through the project's kube-apiserver-faithful admission library.

use crd_admission::{Admission, FieldError};
use kube::CustomResourceExt;
use mongodb_member_operator::api::MongoDB;
use serde_json::{json, Value};

fn admission() -> Admission {
    let crd = serde_json::to_value(MongoDB::crd()).expect("CRD serializes");
    let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    Admission::new(schema).expect("the generated schema and its CEL rules compile")
}

fn object(spec: Value) -> Value {
    json!({
        "apiVersion": "middleware.fedstate.io/v1alpha1",
        "kind": "MongoDB",
        "metadata": {"name": "demo", "namespace": "default"},
        "spec": spec,
    })
}

fn minimal() -> Value {
    object(json!({"members": 2, "credentialsSecretRef": {"name": "demo-credentials"}}))
}

fn errors_text(errors: &[FieldError]) -> String {
    errors
        .iter()
        .map(|e| format!("{}: {}", e.field, e.detail))
        .collect::<Vec<_>>()
        .join("\n")
}

fn create(mut new: Value) -> Result<Value, String> {
    admission()
        .admit(&mut new, None)
        .map(|_| new)
        .map_err(|e| errors_text(&e))
}

fn update(old: &Value, mut new: Value) -> Result<Value, String> {
    admission()
        .admit(&mut new, Some(old))
        .map(|_| new)
        .map_err(|e| errors_text(&e))
}

#[test]
fn a_minimal_object_gets_fedstate_defaults_and_ours() {
    let admitted = create(minimal()).expect("admitted");
    let spec = &admitted["spec"];
    assert_eq!(spec["type"], "ReplicaSet");
    assert_eq!(spec["image"], "mongo:7.0");
    assert_eq!(spec["imagePullPolicy"], "IfNotPresent");
    assert_eq!(spec["persistence"]["storage"], "1Gi");
    assert_eq!(spec["resources"]["limits"]["memory"], "1Gi");
    assert_eq!(spec["replSetName"], "replset-0");
    assert_eq!(spec["removedMemberPvcPolicy"], "Retain");
    assert_eq!(spec["replicaSetSettings"]["electionTimeoutMillis"], 10000);
    assert_eq!(spec["credentialsSecretRef"]["keyfileKey"], "keyfile");
    assert_eq!(spec["rsInit"], false);
}

#[test]
fn credentials_are_required_one_way_or_the_other() {
    let error = create(object(json!({"members": 1}))).unwrap_err();
    assert!(
        error.contains("set spec.credentialsSecretRef (preferred) or spec.rootPassword"),
        "{error}"
    );
    create(object(
        json!({"members": 1, "rootPassword": "fallback-secret"}),
    ))
    .expect("rootPassword fallback admitted");
}

#[test]
fn member_counts_outside_zero_to_fifty_are_refused() {
    let mut bad = minimal();
    bad["spec"]["members"] = json!(-1);
    assert!(create(bad).unwrap_err().contains("spec.members"));
    let mut bad = minimal();
    bad["spec"]["members"] = json!(51);
    assert!(create(bad).unwrap_err().contains("spec.members"));
    let mut zero = minimal();
    zero["spec"]["members"] = json!(0);
    create(zero).expect("a cluster may host no member");
}

#[test]
fn images_of_every_release_are_accepted_so_fedstates_default_can_be_propagated() {
    // FedState's webhook defaults the image to mongo:3.6; refusing it here would
    // stop Karmada from creating the object, with nothing in the member cluster
    // saying why. The operator refuses releases older than 4.4 in status instead.
    for image in [
        "mongo:3.6",
        "mongo:4.2.24",
        "registry:5000/mongo:4.0",
        "mongo:4.4",
        "mongo:7.0.14",
        "mongo",
    ] {
        let mut any = minimal();
        any["spec"]["image"] = json!(image);
        create(any).unwrap_or_else(|e| panic!("{image} refused: {e}"));
    }
    let mut empty = minimal();
    empty["spec"]["image"] = json!("");
    assert!(create(empty).is_err(), "an empty image is still refused");
}

#[test]
fn any_config_entry_is_admitted_so_fedstates_payload_can_be_propagated() {
    // FedState copies configSet keys as they are (its sample: LOG_LEVEL); the
    // operator reports the entries it does not pass to mongod, in status.
    let mut fedstate = minimal();
    fedstate["spec"]["config"] = json!([
        {"name": "LOG_LEVEL", "value": "info"},
        {"name": "keyFile", "value": "/tmp/k"},
        {"name": "storage.wiredTiger.engineConfig.cacheSizeGB", "value": "1"},
    ]);
    create(fedstate).expect("admitted");
    let mut nameless = minimal();
    nameless["spec"]["config"] = json!([{"name": "", "value": "1"}]);
    assert!(create(nameless).is_err(), "an entry needs a name");
}

#[test]
fn fedstate_immutable_fields_cannot_change() {
    let old = create(object(json!({
        "members": 2, "rootPassword": "first", "memberConfigRef": "demo-hostconf",
        "customConfigRef": "demo-custom", "persistence": {"storage": "1Gi"},
        "dbUserSpec": {"enable": true, "name": "app", "user": "appuser"},
        "metricsExporterSpec": {"enable": true},
    })))
    .expect("admitted");
    let cases: [(&str, Value, &str); 6] = [
        (
            "/spec/rootPassword",
            json!("second"),
            "spec.rootPassword is immutable",
        ),
        (
            "/spec/memberConfigRef",
            json!("other"),
            "spec.memberConfigRef is immutable",
        ),
        (
            "/spec/customConfigRef",
            json!("other"),
            "spec.customConfigRef is immutable",
        ),
        (
            "/spec/dbUserSpec/enable",
            json!(false),
            "spec.dbUserSpec.enable is immutable",
        ),
        (
            "/spec/dbUserSpec/user",
            json!("other"),
            "immutable while enabled",
        ),
        (
            "/spec/replSetName",
            json!("other"),
            "spec.replSetName is immutable",
        ),
    ];
    for (pointer, value, message) in cases {
        let mut new = old.clone();
        *new.pointer_mut(pointer)
            .unwrap_or_else(|| panic!("{pointer} exists")) = value;
        let error = update(&old, new).expect_err(pointer);
        assert!(error.contains(message), "{pointer}: {error}");
    }
    let mut scaled = old.clone();
    scaled["spec"]["members"] = json!(3);
    update(&old, scaled).expect("members may change");
    let mut without_exporter = old.clone();
    without_exporter["spec"]["metricsExporterSpec"]["enable"] = json!(false);
    update(&old, without_exporter).expect("the exporter may be disabled again");
}

#[test]
fn long_names_are_accepted_at_admission_like_fedstate_writes_them() {
    let mut long = minimal();
    long["metadata"]["name"] = json!("a".repeat(50));
    create(long).expect("FedState sets no length limit; the operator reports names it cannot use");
}
