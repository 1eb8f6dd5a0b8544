//! Validation of built-in kinds: the subset of kube-apiserver's checks that
//! catch a malformed object a controller might write (required fields,
//! StatefulSet selector/template agreement and immutable spec, Service ports,
//! container names and images, PDB policy, immutable Secrets and ConfigMaps,
//! PVC spec immutability). Each failure is a `(field, message)` cause of a 422.

use crd_admission::quantity::Quantity;
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

/// `volume.beta.kubernetes.io/storage-class`, the class before `spec.storageClassName`.
pub const BETA_STORAGE_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";

fn annotation<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj.pointer("/metadata/annotations")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

/// A quantity field as the Go type reads it (a JSON string or number); `None`
/// when absent or unparseable.
pub fn quantity_at(obj: &Value, pointer: &str) -> Option<Quantity> {
    match obj.pointer(pointer)? {
        Value::String(text) => Quantity::parse(text).ok(),
        Value::Number(n) => Quantity::parse(&n.to_string()).ok(),
        _ => None,
    }
}

/// The first unparseable quantity among a claim's requests, limits and
/// capacity, with the Go parse error: kube-apiserver fails to decode such a
/// body (a 400), before any validation.
pub fn persistent_volume_claim_quantity_error(claim: &Value) -> Option<&'static str> {
    [
        "/spec/resources/requests",
        "/spec/resources/limits",
        "/status/capacity",
        "/status/allocatedResources",
    ]
    .iter()
    .filter_map(|p| claim.pointer(p).and_then(Value::as_object))
    .flat_map(|m| m.values())
    .find_map(|v| match v {
        Value::String(text) => Quantity::parse(text).err(),
        Value::Number(n) => Quantity::parse(&n.to_string()).err(),
        _ => None,
    })
}

/// `ValidatePersistentVolumeClaim` (the spec's access modes and storage
/// request) and, on update, `ValidatePersistentVolumeClaimUpdate`
/// (kubernetes/kubernetes `pkg/apis/core/validation/validation.go`): the spec
/// is immutable except `volumeName` (set once, by the binder), a
/// `storageClassName` set where there was none, `volumeAttributesClassName`,
/// and `resources.requests.storage` of a **bound** claim; that request may not
/// go below `status.capacity` (RecoverVolumeExpansionFailure, beta and on by
/// default since 1.32, GA in 1.34: a decrease is allowed down to just above
/// the capacity, to recover from a failed expansion).
fn persistent_volume_claim(new: &Value, old: Option<&Value>, out: &mut Causes) {
    let spec = new.get("spec").cloned().unwrap_or(Value::Null);
    if spec
        .get("accessModes")
        .and_then(Value::as_array)
        .is_none_or(|a| a.is_empty())
    {
        out.push((
            "spec.accessModes".into(),
            "Required value: at least 1 access mode is required".into(),
        ));
    }
    match spec.pointer("/resources/requests/storage") {
        None | Some(Value::Null) => {
            out.push(("spec.resources[storage]".into(), "Required value".into()))
        }
        Some(raw) => {
            if quantity_at(&spec, "/resources/requests/storage").is_some_and(|q| q.sign() <= 0) {
                let text = raw
                    .as_str()
                    .map(String::from)
                    .unwrap_or_else(|| raw.to_string());
                out.push((
                    "spec.resources[storage]".into(),
                    format!("Invalid value: \"{text}\": must be greater than zero"),
                ));
            }
        }
    }
    let Some(old) = old else { return };
    let mut new_spec = spec.clone();
    let mut old_spec = old.get("spec").cloned().unwrap_or(Value::Null);
    let set = |spec: &mut Value, field: &str, value: Option<Value>| {
        if let Some(o) = spec.as_object_mut() {
            match value {
                Some(v) => o.insert(field.into(), v),
                None => o.remove(field),
            };
        }
    };
    // The PV controller sets volumeName once.
    if s(&old_spec, "/volumeName").unwrap_or_default().is_empty() {
        set(
            &mut old_spec,
            "volumeName",
            new_spec.get("volumeName").cloned(),
        );
    }
    // storageClassName: from the beta annotation, or where there was none.
    let old_class = old_spec.get("storageClassName").and_then(Value::as_str);
    let new_class = new_spec.get("storageClassName").and_then(Value::as_str);
    let old_annotation = annotation(old, BETA_STORAGE_CLASS_ANNOTATION);
    let new_annotation = annotation(new, BETA_STORAGE_CLASS_ANNOTATION);
    let from_annotation = old_annotation.is_some()
        && old_class.is_none()
        && new_class.is_some()
        && new_class == old_annotation
        && new_annotation.is_none_or(|a| Some(a) == old_annotation);
    if from_annotation {
        set(&mut new_spec, "storageClassName", None);
    } else {
        if new_annotation.unwrap_or_default() != old_annotation.unwrap_or_default() {
            out.push((
                format!("metadata.annotations[{BETA_STORAGE_CLASS_ANNOTATION}]"),
                format!(
                    "Invalid value: \"{}\": field is immutable",
                    new_annotation.unwrap_or_default()
                ),
            ));
        }
        let from_nil = new_class.is_some()
            && old_class.is_none()
            && old_annotation.is_none_or(|a| Some(a) == new_class);
        if from_nil {
            set(&mut new_spec, "storageClassName", None);
        }
    }
    // A bound claim's storage request may change (expansion).
    let bound = s(new, "/status/phase") == Some("Bound");
    if bound && new_spec.pointer("/resources/requests").is_some() {
        let old_request = old_spec.pointer("/resources/requests/storage").cloned();
        if let Some(requests) = new_spec
            .pointer_mut("/resources/requests")
            .and_then(Value::as_object_mut)
        {
            match old_request {
                Some(v) => requests.insert("storage".into(), v),
                None => requests.remove("storage"),
            };
        }
    }
    let old_vac = old_spec.get("volumeAttributesClassName").cloned();
    set(&mut new_spec, "volumeAttributesClassName", old_vac);
    // Semantic equality: quantities compare by value ("1Gi" == "1024Mi").
    for list in ["requests", "limits"] {
        let pointer = format!("/resources/{list}");
        let Some(old_map) = old_spec
            .pointer(&pointer)
            .and_then(Value::as_object)
            .cloned()
        else {
            continue;
        };
        if let Some(new_map) = new_spec
            .pointer_mut(&pointer)
            .and_then(Value::as_object_mut)
        {
            for (key, value) in new_map.iter_mut() {
                let same = old_map.get(key).is_some_and(|o| {
                    let q = |v: &Value| quantity_at(&serde_json::json!({ "q": v }), "/q");
                    q(o).is_some() && q(o) == q(value)
                });
                if same {
                    *value = old_map[key].clone();
                }
            }
        }
    }
    if new_spec != old_spec {
        out.push(("spec".into(), "Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims".into()));
    }
    let zero = Quantity::from_i64(0);
    let old_size =
        quantity_at(old, "/spec/resources/requests/storage").unwrap_or_else(|| zero.clone());
    let new_size =
        quantity_at(new, "/spec/resources/requests/storage").unwrap_or_else(|| zero.clone());
    let status_size = quantity_at(old, "/status/capacity/storage").unwrap_or(zero);
    if new_size < old_size && new_size <= status_size {
        out.push((
            "spec.resources.requests.storage".into(),
            "Forbidden: field can not be less than status.capacity".into(),
        ));
    }
    let mode = |v: &Value| v.pointer("/spec/volumeMode").cloned();
    if mode(new) != mode(old) {
        let shown = match mode(new) {
            Some(Value::String(m)) => format!("\"{m}\""),
            _ => "null".into(),
        };
        out.push((
            "volumeMode".into(),
            format!("Invalid value: {shown}: field is immutable"),
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
        "PersistentVolumeClaim" => persistent_volume_claim(new, old, &mut out),
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
