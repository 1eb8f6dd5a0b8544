//! Deleting a `MultiCloudMongoDB`: FedState's finalizer,
//! `deleteExternalResources` in `controllers/multicloudmongodb_controller.go`,
//! then Kubernetes' garbage collector.

use super::client::delete_by_label;
use super::labels::*;
use super::MultiCloudMongoDB;
use crate::karmada::Objects;

/// `deleteExternalResources`, in its order: PropagationPolicies (by the base
/// labels, the arbiter's, the custom ConfigMap's), Services and ConfigMaps
/// with the base labels, the MongoDB, the OverridePolicies (base, VIP, init).
/// The arbiter Service carries no `app.kubernetes.io/instance` and stays until
/// [`garbage_collect`]. Returns what was deleted.
pub fn delete_external_resources(object: &MultiCloudMongoDB, objects: &mut Objects) -> Vec<String> {
    let name = &object.name;
    let base = base_label(&object.labels, name);
    let vip = cluster_vip_label(&object.labels, name);
    let init = init_label(&object.labels, name);
    let arbiter_pp = one(LABEL_ARBITER, name);
    let custom_pp = one(
        LABEL_CUSTOM_CONFIGMAP_PP,
        &format!("{name}-custom-configmap-pp"),
    );
    let mut deleted = Vec::new();
    for selector in [&base, &arbiter_pp, &custom_pp] {
        delete_by_label(
            &mut objects.propagation_policies,
            "PropagationPolicy",
            selector,
            &mut deleted,
            |p| &p.labels,
        );
    }
    delete_by_label(&mut objects.services, "Service", &base, &mut deleted, |s| {
        &s.labels
    });
    delete_by_label(
        &mut objects.config_maps,
        "ConfigMap",
        &base,
        &mut deleted,
        |c| &c.labels,
    );
    delete_by_label(&mut objects.mongodbs, "MongoDB", &base, &mut deleted, |m| {
        &m.labels
    });
    for selector in [&base, &vip, &init] {
        delete_by_label(
            &mut objects.override_policies,
            "OverridePolicy",
            selector,
            &mut deleted,
            |o| &o.labels,
        );
    }
    deleted
}

/// Kubernetes' garbage collector once the finalizer is gone: everything FedState
/// created with the MultiCloudMongoDB as owner (all but the MongoDB template
/// and the user's ConfigMaps). Returns what was deleted.
pub fn garbage_collect(objects: &mut Objects) -> Vec<String> {
    let mut deleted: Vec<String> = objects
        .services
        .keys()
        .map(|n| format!("Service {n}"))
        .collect();
    objects.services.clear();
    objects.config_maps.retain(|n, c| {
        if !c.user_owned {
            deleted.push(format!("ConfigMap {n}"));
        }
        c.user_owned
    });
    deleted.extend(
        objects
            .propagation_policies
            .keys()
            .map(|n| format!("PropagationPolicy {n}")),
    );
    objects.propagation_policies.clear();
    deleted.extend(
        objects
            .override_policies
            .keys()
            .map(|n| format!("OverridePolicy {n}")),
    );
    objects.override_policies.clear();
    deleted
}
