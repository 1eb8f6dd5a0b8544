//! Validation of built-in kinds: the subset of kube-apiserver's checks that
//! catch a malformed object a controller might write (required fields,
//! StatefulSet selector/template agreement and immutable spec, Service ports,
//! container names and images, PDB policy, immutable Secrets and ConfigMaps,
//! PVC spec immutability). Each failure is a `(field, message)` cause of a 422.

use serde_json::Value;

type Causes = Vec<(String, String)>;

fn s<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str)
}

fn selector_matches(selector: &Value, labels: &Value) -> bool {
    let label = |k: &str| labels.get(k).and_then(Value::as_str);
    let by_labels = selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .is_none_or(|m| m.iter().all(|(k, v)| label(k) == v.as_str()));
    let by_expressions = selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .is_none_or(|exprs| {
            exprs.iter().all(|e| {
                let key = e.get("key").and_then(Value::as_str).unwrap_or_default();
                let values: Vec<&str> = e
                    .get("values")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                match e.get("operator").and_then(Value::as_str) {
                    Some("In") => label(key).is_some_and(|l| values.contains(&l)),
                    Some("NotIn") => label(key).is_none_or(|l| !values.contains(&l)),
                    Some("Exists") => label(key).is_some(),
                    Some("DoesNotExist") => label(key).is_none(),
                    _ => false,
                }
            })
        });
    by_labels && by_expressions
}

fn go_map(labels: &Value) -> String {
    let entries: Vec<String> = labels
        .as_object()
        .map(|m| m.iter().map(|(k, v)| format!("{k:?}:{}", v)).collect())
        .unwrap_or_default();
    format!("map[string]string{{{}}}", entries.join(", "))
}

fn containers(spec: &Value, prefix: &str, out: &mut Causes) {
    match spec.get("containers").and_then(Value::as_array) {
        None => out.push((format!("{prefix}.containers"), "Required value".into())),
        Some(cs) if cs.is_empty() => {
            out.push((format!("{prefix}.containers"), "Required value".into()))
        }
        Some(cs) => {
            let mut names = Vec::new();
            for (i, c) in cs.iter().enumerate() {
                match c
                    .get("name")
                    .and_then(Value::as_str)
                    .filter(|n| !n.is_empty())
                {
                    None => out.push((
                        format!("{prefix}.containers[{i}].name"),
                        "Required value".into(),
                    )),
                    Some(n) if names.contains(&n) => out.push((
                        format!("{prefix}.containers[{i}].name"),
                        format!("Duplicate value: \"{n}\""),
                    )),
                    Some(n) => names.push(n),
                }
                if c.get("image")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
                {
                    out.push((
                        format!("{prefix}.containers[{i}].image"),
                        "Required value".into(),
                    ));
                }
            }
        }
    }
}

fn non_negative(v: &Value, pointer: &str, field: &str, out: &mut Causes) {
    if let Some(n) = v
        .pointer(pointer)
        .and_then(Value::as_i64)
        .filter(|n| *n < 0)
    {
        out.push((
            field.into(),
            format!("Invalid value: {n}: must be greater than or equal to 0"),
        ));
    }
}

fn stateful_set(new: &Value, old: Option<&Value>, out: &mut Causes) {
    let spec = new.get("spec").cloned().unwrap_or(Value::Null);
    non_negative(&spec, "/replicas", "spec.replicas", out);
    match spec.get("selector") {
        None | Some(Value::Null) => out.push(("spec.selector".into(), "Required value".into())),
        Some(sel) => {
            let labels = spec
                .pointer("/template/metadata/labels")
                .cloned()
                .unwrap_or(Value::Object(Default::default()));
            if !selector_matches(sel, &labels) {
                out.push((
                    "spec.template.metadata.labels".into(),
                    format!(
                        "Invalid value: {}: `selector` does not match template `labels`",
                        go_map(&labels)
                    ),
                ));
            }
        }
    }
    if let Some(p) =
        s(&spec, "/podManagementPolicy").filter(|p| *p != "OrderedReady" && *p != "Parallel")
    {
        out.push((
            "spec.podManagementPolicy".into(),
            format!("Unsupported value: \"{p}\": supported values: \"OrderedReady\", \"Parallel\""),
        ));
    }
    match spec.pointer("/template/spec") {
        Some(tspec) => {
            containers(tspec, "spec.template.spec", out);
            if let Some(r) = s(tspec, "/restartPolicy").filter(|r| *r != "Always") {
                out.push((
                    "spec.template.spec.restartPolicy".into(),
                    format!("Unsupported value: \"{r}\": supported values: \"Always\""),
                ));
            }
        }
        None => out.push((
            "spec.template.spec.containers".into(),
            "Required value".into(),
        )),
    }
    if let Some(old) = old {
        let mutable = [
            "replicas",
            "ordinals",
            "template",
            "updateStrategy",
            "persistentVolumeClaimRetentionPolicy",
            "minReadySeconds",
        ];
        let strip = |v: &Value| {
            let mut spec = v.get("spec").cloned().unwrap_or(Value::Null);
            if let Some(o) = spec.as_object_mut() {
                o.retain(|k, _| !mutable.contains(&k.as_str()));
            }
            spec
        };
        if strip(new) != strip(old) {
            out.push((
                "spec".into(),
                "Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden".into(),
            ));
        }
    }
}

fn service(new: &Value, out: &mut Causes) {
    let svc_type = s(new, "/spec/type").unwrap_or("ClusterIP");
    if !matches!(
        svc_type,
        "ClusterIP" | "NodePort" | "LoadBalancer" | "ExternalName"
    ) {
        out.push(("spec.type".into(), format!("Unsupported value: \"{svc_type}\": supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\"")));
    }
    let headless = s(new, "/spec/clusterIP") == Some("None");
    let ports = new
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if ports.is_empty() && svc_type != "ExternalName" && !headless {
        out.push(("spec.ports".into(), "Required value".into()));
    }
    let mut names = Vec::new();
    for (i, p) in ports.iter().enumerate() {
        let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
        if !(1..=65535).contains(&port) {
            out.push((
                format!("spec.ports[{i}].port"),
                format!("Invalid value: {port}: must be between 1 and 65535, inclusive"),
            ));
        }
        let name = p.get("name").and_then(Value::as_str).unwrap_or_default();
        if ports.len() > 1 && name.is_empty() {
            out.push((format!("spec.ports[{i}].name"), "Required value".into()));
        } else if !name.is_empty() && names.contains(&name) {
            out.push((
                format!("spec.ports[{i}].name"),
                format!("Duplicate value: \"{name}\""),
            ));
        }
        names.push(name);
    }
}

fn immutable_data(new: &Value, old: Option<&Value>, out: &mut Causes) {
    let Some(old) = old else { return };
    if old.get("immutable") != Some(&Value::Bool(true)) {
        return;
    }
    for field in ["data", "binaryData"] {
        if new.get(field) != old.get(field) {
            out.push((
                field.into(),
                "Forbidden: field is immutable when `immutable` is set".into(),
            ));
        }
    }
    if new.get("immutable") != Some(&Value::Bool(true)) {
        out.push((
            "immutable".into(),
            "Forbidden: field is immutable when `immutable` is set".into(),
        ));
    }
}

/// The validation causes for a built-in object (`old` on updates).
pub fn validate_builtin(kind: &str, new: &Value, old: Option<&Value>) -> Causes {
    let mut out = Causes::new();
    match kind {
        "StatefulSet" => stateful_set(new, old, &mut out),
        "Deployment" => {
            non_negative(new, "/spec/replicas", "spec.replicas", &mut out);
            match new.pointer("/spec/template/spec") {
                Some(tspec) => containers(tspec, "spec.template.spec", &mut out),
                None => out.push((
                    "spec.template.spec.containers".into(),
                    "Required value".into(),
                )),
            }
        }
        "Pod" => match new.get("spec") {
            Some(spec) => containers(spec, "spec", &mut out),
            None => out.push(("spec.containers".into(), "Required value".into())),
        },
        "Service" => service(new, &mut out),
        "PodDisruptionBudget"
            if new.pointer("/spec/minAvailable").is_some()
                && new.pointer("/spec/maxUnavailable").is_some() =>
        {
            out.push(("spec".into(), "Invalid value: policy.PodDisruptionBudgetSpec: minAvailable and maxUnavailable cannot be both set".into()));
        }
        "Secret" | "ConfigMap" => immutable_data(new, old, &mut out),
        "PersistentVolumeClaim" => {
            if let Some(old) = old {
                let strip = |v: &Value| {
                    let mut spec = v.get("spec").cloned().unwrap_or(Value::Null);
                    if let Some(o) = spec.as_object_mut() {
                        o.remove("resources");
                        o.remove("volumeAttributesClassName");
                        o.remove("volumeName");
                    }
                    spec
                };
                if strip(new) != strip(old) {
                    out.push(("spec".into(), "Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims".into()));
                }
            }
        }
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sts(selector: Value, labels: Value) -> Value {
        json!({"spec": {"replicas": 1, "selector": selector, "template": {"metadata": {"labels": labels},
            "spec": {"containers": [{"name": "c", "image": "i"}]}}, "volumeClaimTemplates": []}})
    }

    #[test]
    fn stateful_set_selector_must_match_template_and_spec_is_mostly_immutable() {
        assert!(validate_builtin(
            "StatefulSet",
            &sts(
                json!({"matchLabels": {"a": "b"}}),
                json!({"a": "b", "c": "d"})
            ),
            None
        )
        .is_empty());
        let bad = validate_builtin(
            "StatefulSet",
            &sts(json!({"matchLabels": {"a": "x"}}), json!({"a": "b"})),
            None,
        );
        assert_eq!(bad[0].0, "spec.template.metadata.labels");
        assert!(bad[0]
            .1
            .contains("`selector` does not match template `labels`"));
        let old = sts(json!({"matchLabels": {"a": "b"}}), json!({"a": "b"}));
        let mut new = old.clone();
        new["spec"]["replicas"] = json!(3);
        assert!(validate_builtin("StatefulSet", &new, Some(&old)).is_empty());
        new["spec"]["volumeClaimTemplates"] = json!([{"metadata": {"name": "data"}}]);
        assert_eq!(
            validate_builtin("StatefulSet", &new, Some(&old))[0].0,
            "spec"
        );
    }

    #[test]
    fn services_need_valid_named_ports() {
        let svc = json!({"spec": {"ports": [{"port": 1, "name": "a"}, {"port": 70000}]}});
        let causes = validate_builtin("Service", &svc, None);
        assert!(causes.iter().any(|(f, _)| f == "spec.ports[1].port"));
        assert!(causes.iter().any(|(f, _)| f == "spec.ports[1].name"));
        assert!(
            validate_builtin("Service", &json!({"spec": {"clusterIP": "None"}}), None).is_empty()
        );
    }
}
