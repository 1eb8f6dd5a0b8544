//! What the API server refuses before this stage ever sees it: the
//! generated CRD's schema and CEL rules, run through the project's
//! kube-apiserver-faithful admission library (`hack/crd-admission`).
//! `validate` trusts these (a name the API cannot hold never reaches a
//! request; a quantity is one).

use kube::CustomResourceExt;
use serde_json::{json, Value};

use crate::api::MongoDB;

fn admit(spec: Value) -> Result<Value, String> {
    let crd = serde_json::to_value(MongoDB::crd()).unwrap();
    let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    let admission = crd_admission::Admission::new(schema).unwrap();
    let mut object = json!({
        "apiVersion": "middleware.fedstate.io/v1alpha1",
        "kind": "MongoDB",
        "metadata": {"name": "demo", "namespace": "default"},
        "spec": spec,
    });
    admission
        .admit(&mut object, None)
        .map(|_| object)
        .map_err(|errors| {
            errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        })
}

fn with_password(mut fields: Value) -> Value {
    fields["rootPassword"] = json!("a-root-password");
    fields
}

#[test]
fn quantities_must_be_kubernetes_quantities() {
    for (spec, field) in [
        (
            json!({"persistence": {"storage": "lots"}}),
            "spec.persistence.storage",
        ),
        (
            json!({"persistence": {"storage": "10 GB"}}),
            "spec.persistence.storage",
        ),
        (
            json!({"resources": {"limits": {"cpu": "two"}}}),
            "spec.resources.limits.cpu",
        ),
        (
            json!({"resources": {"requests": {"memory": "1GiB"}}}),
            "spec.resources.requests.memory",
        ),
        (
            json!({"metricsExporterSpec": {"resources": {"limits": {"cpu": "x"}}}}),
            "spec.metricsExporterSpec.resources.limits.cpu",
        ),
    ] {
        let error = admit(with_password(spec.clone())).unwrap_err();
        assert!(
            error.starts_with(&format!("{field}: Invalid value: ")),
            "{spec}: {error}"
        );
        assert!(error.contains("in body should match '^(\\+|-)?"), "{error}");
    }
    for storage in [
        json!("1Gi"),
        json!("500M"),
        json!(1073741824),
        json!("1.5Gi"),
        json!("2e9"),
    ] {
        admit(with_password(json!({"persistence": {"storage": storage}})))
            .unwrap_or_else(|e| panic!("{storage}: {e}"));
    }
    admit(with_password(
        json!({"resources": {"limits": {"cpu": "1500m", "memory": "1Gi"}, "requests": {"cpu": 1}}}),
    ))
    .expect("quantities admitted");
}

#[test]
fn referenced_names_must_be_names_kubernetes_can_hold() {
    let secret = |reference: Value| json!({"credentialsSecretRef": reference});
    for (spec, field) in [
        (
            secret(json!({"name": "Not_A_Name"})),
            "spec.credentialsSecretRef.name",
        ),
        (
            secret(json!({"name": "keys", "keyfileKey": ""})),
            "spec.credentialsSecretRef.keyfileKey",
        ),
        (
            secret(json!({"name": "keys", "passwordKey": "root password"})),
            "spec.credentialsSecretRef.passwordKey",
        ),
        (
            secret(json!({"name": "keys", "usernameKey": "a/b"})),
            "spec.credentialsSecretRef.usernameKey",
        ),
        (
            with_password(json!({"memberConfigRef": "Bad Name"})),
            "spec.memberConfigRef",
        ),
        (
            with_password(json!({"customConfigRef": "bad/custom"})),
            "spec.customConfigRef",
        ),
        (
            with_password(json!({"customConfigRef": ""})),
            "spec.customConfigRef",
        ),
    ] {
        let error = admit(spec.clone()).unwrap_err();
        assert!(
            error.starts_with(&format!("{field}: Invalid value: ")),
            "{spec}: {error}"
        );
    }
    admit(secret(
        json!({"name": "demo.keys-1", "keyfileKey": "key_file.1", "usernameKey": "user-name"}),
    ))
    .expect("valid names admitted");
    admit(with_password(
        json!({"memberConfigRef": "", "customConfigRef": "demo-custom"}),
    ))
    .expect("an empty memberConfigRef means <name>-hostconf");
}

#[test]
fn an_empty_root_password_is_no_credentials() {
    let error = admit(json!({"rootPassword": ""})).unwrap_err();
    assert!(
        error.contains("set spec.credentialsSecretRef (preferred) or spec.rootPassword"),
        "{error}"
    );
    admit(json!({"rootPassword": "", "credentialsSecretRef": {"name": "keys"}}))
        .expect("the Secret is enough");
}
