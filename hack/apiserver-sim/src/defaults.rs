//! Defaulting and create-time status of built-in kinds: the small subset of
//! kube-apiserver's defaulting functions that clients observe (Service type and
//! port protocol, StatefulSet policies, Deployment strategy, Pod restart policy
//! and phase, …).

use serde_json::{json, Value};

fn default_field(obj: &mut Value, key: &str, value: Value) {
    if let Some(o) = obj.as_object_mut() {
        o.entry(key.to_string()).or_insert(value);
    }
}

fn default_ports(ports: Option<&mut Value>, target_port: bool) {
    if let Some(Value::Array(ports)) = ports {
        for p in ports {
            default_field(p, "protocol", json!("TCP"));
            if target_port {
                if let Some(port) = p.get("port").cloned() {
                    default_field(p, "targetPort", port);
                }
            }
        }
    }
}

fn default_pod_spec(spec: &mut Value) {
    default_field(spec, "restartPolicy", json!("Always"));
    default_field(spec, "dnsPolicy", json!("ClusterFirst"));
    default_field(spec, "schedulerName", json!("default-scheduler"));
    default_field(spec, "terminationGracePeriodSeconds", json!(30));
    default_field(spec, "securityContext", json!({}));
    for list in ["containers", "initContainers"] {
        if let Some(Value::Array(cs)) = spec.get_mut(list) {
            for c in cs {
                let image = c
                    .get("image")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let latest = image.ends_with(":latest")
                    || !image.rsplit('/').next().unwrap_or("").contains(':');
                default_field(
                    c,
                    "imagePullPolicy",
                    json!(if latest { "Always" } else { "IfNotPresent" }),
                );
                default_field(c, "terminationMessagePath", json!("/dev/termination-log"));
                default_field(c, "terminationMessagePolicy", json!("File"));
                default_ports(c.get_mut("ports"), false);
            }
        }
    }
}

/// Applies the defaults of a built-in kind to an object about to be stored.
pub fn apply_defaults(kind: &str, obj: &mut Value) {
    match kind {
        "Service" => {
            if let Some(spec) = obj.get_mut("spec") {
                default_field(spec, "type", json!("ClusterIP"));
                default_field(spec, "sessionAffinity", json!("None"));
                default_ports(spec.get_mut("ports"), true);
            }
        }
        "Pod" => {
            if let Some(spec) = obj.get_mut("spec") {
                default_pod_spec(spec);
            }
        }
        "StatefulSet" => {
            if let Some(spec) = obj.get_mut("spec") {
                default_field(spec, "replicas", json!(1));
                default_field(spec, "podManagementPolicy", json!("OrderedReady"));
                default_field(spec, "revisionHistoryLimit", json!(10));
                default_field(
                    spec,
                    "updateStrategy",
                    json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}),
                );
                default_field(
                    spec,
                    "persistentVolumeClaimRetentionPolicy",
                    json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
                );
                if let Some(tspec) = spec.pointer_mut("/template/spec") {
                    default_pod_spec(tspec);
                }
            }
        }
        // `SetDefaults_Deployment` (pkg/apis/apps/v1/defaults.go): a
        // RollingUpdate strategy with 25% surge and unavailability, ten old
        // ReplicaSets kept, a 600 s progress deadline.
        "Deployment" => {
            if let Some(spec) = obj.get_mut("spec") {
                default_field(spec, "replicas", json!(1));
                default_field(spec, "strategy", json!({}));
                if let Some(strategy) = spec.get_mut("strategy") {
                    default_field(strategy, "type", json!("RollingUpdate"));
                    if strategy.get("type") == Some(&json!("RollingUpdate")) {
                        default_field(strategy, "rollingUpdate", json!({}));
                        if let Some(rolling) = strategy.get_mut("rollingUpdate") {
                            default_field(rolling, "maxUnavailable", json!("25%"));
                            default_field(rolling, "maxSurge", json!("25%"));
                        }
                    }
                }
                default_field(spec, "revisionHistoryLimit", json!(10));
                default_field(spec, "progressDeadlineSeconds", json!(600));
                if let Some(tspec) = spec.pointer_mut("/template/spec") {
                    default_pod_spec(tspec);
                }
            }
        }
        // `SetDefaults_ReplicaSet`: one replica.
        "ReplicaSet" => {
            if let Some(spec) = obj.get_mut("spec") {
                default_field(spec, "replicas", json!(1));
                if let Some(tspec) = spec.pointer_mut("/template/spec") {
                    default_pod_spec(tspec);
                }
            }
        }
        "Secret" => default_field(obj, "type", json!("Opaque")),
        "PersistentVolumeClaim" => {
            if let Some(spec) = obj.get_mut("spec") {
                default_field(spec, "volumeMode", json!("Filesystem"));
            }
        }
        _ => {}
    }
}

/// The status a built-in object starts with (its status is not writable on create).
pub fn initial_status(kind: &str) -> Option<Value> {
    match kind {
        "Pod" => Some(json!({"phase": "Pending", "qosClass": "BestEffort"})),
        "Namespace" => Some(json!({"phase": "Active"})),
        "PersistentVolumeClaim" => Some(json!({"phase": "Pending"})),
        "Service" => Some(json!({"loadBalancer": {}})),
        "StatefulSet" => Some(json!({"replicas": 0, "availableReplicas": 0})),
        // `replicas` is the one ReplicaSetStatus field without `omitempty`.
        "ReplicaSet" => Some(json!({"replicas": 0})),
        "Deployment" | "PodDisruptionBudget" => Some(json!({})),
        _ => None,
    }
}
