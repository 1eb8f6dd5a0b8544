//! The labels FedState puts on what it creates, `pkg/driver/k8s/label.go`.

use crate::karmada::Labels;

/// `app.kubernetes.io/instance` (label.go `LabelKeyInstance`).
pub const LABEL_INSTANCE: &str = "app.kubernetes.io/instance";
/// `app` (label.go `LabelKeyApp`).
pub const LABEL_APP: &str = "app";
/// label.go `ServicePP`.
pub const LABEL_SERVICE_PP: &str = "app.karmada.io/service-pp";
/// label.go `ConfigMapPP`.
pub const LABEL_CONFIGMAP_PP: &str = "app.karmada.io/configmap-pp";
/// label.go `CustomConfigMapPP`.
pub const LABEL_CUSTOM_CONFIGMAP_PP: &str = "app.karmada.io/custom-configmap-pp";
/// label.go `Arbiter`.
pub const LABEL_ARBITER: &str = "app.arbiter.io/instance";
/// label.go `Init`.
pub const LABEL_INIT: &str = "app.mongoinit.io/instance";
/// label.go `ClusterVip`.
pub const LABEL_CLUSTER_VIP: &str = "app.mongoclustervip.io/instance";
/// label.go `LabelClusterVipInstance`: the VIP label on each cluster's MongoDB.
pub const LABEL_CLUSTER_VIP_INSTANCE: &str = "app.multicloudmongodb.io/vip";

fn merge(maps: &[&Labels]) -> Labels {
    let mut merged = Labels::new();
    for map in maps {
        merged.extend(map.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    merged
}

pub(super) fn one(key: &str, value: &str) -> Labels {
    Labels::from([(key.to_string(), value.to_string())])
}

/// `BaseLabel`: the MultiCloudMongoDB's labels plus `app.kubernetes.io/instance`.
pub fn base_label(labels: &Labels, name: &str) -> Labels {
    merge(&[labels, &one(LABEL_INSTANCE, name)])
}

/// `GenerateServiceLabel`: base labels plus `app: <service>`.
pub fn service_label(labels: &Labels, name: &str, service: &str) -> Labels {
    merge(&[&base_label(labels, name), &one(LABEL_APP, service)])
}

/// `GenerateConfigMapLabel`: base labels plus `app: <name>`.
pub fn config_map_label(labels: &Labels, name: &str) -> Labels {
    merge(&[&base_label(labels, name), &one(LABEL_APP, name)])
}

/// `GenerateArbiterLabel`: the given labels plus `app: <service>`, and **no**
/// `app.kubernetes.io/instance`.
pub fn arbiter_label(labels: &Labels, service: &str) -> Labels {
    merge(&[labels, &one(LABEL_APP, service)])
}

pub(super) fn service_pp_label(labels: &Labels, name: &str) -> Labels {
    merge(&[labels, &one(LABEL_SERVICE_PP, name)])
}

pub(super) fn config_map_pp_label(labels: &Labels, name: &str) -> Labels {
    merge(&[labels, &one(LABEL_CONFIGMAP_PP, name)])
}

pub(super) fn custom_config_map_pp_label(labels: &Labels, name: &str) -> Labels {
    merge(&[labels, &one(LABEL_CUSTOM_CONFIGMAP_PP, name)])
}

pub(super) fn init_label(labels: &Labels, name: &str) -> Labels {
    merge(&[labels, &one(LABEL_INIT, name)])
}

pub(super) fn cluster_vip_label(labels: &Labels, name: &str) -> Labels {
    merge(&[labels, &one(LABEL_CLUSTER_VIP, name)])
}
