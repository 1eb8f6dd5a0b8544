//! FedState's helpers over the API server, `pkg/driver/k8s/client.go`:
//! `Ensure` of a Service, `UpsertPPEnsure`, `UpsertOpEnsure`,
//! `ScaleDownCleaner` and `DeleteObjByLabel`.

use std::collections::{BTreeMap, BTreeSet};

use rand::seq::SliceRandom;
use rand::Rng;

use super::handlers::{Pass, ARBITER_ROLE};
use super::labels::*;
use crate::karmada::{
    matches, Labels, OverridePolicy, PropagationPolicy, ResourceRef, ServiceTemplate,
    StaticClusterWeight,
};

impl<R: Rng> Pass<'_, R> {
    /// `k8s.Ensure` of a Service template: created when missing (the API server
    /// allocates its nodePort), left alone otherwise.
    pub(super) fn ensure_service(&mut self, service: &str, labels: &Labels) -> Result<(), String> {
        if self.objects.services.contains_key(service) {
            return Ok(());
        }
        let node_port = self
            .node_ports
            .allocate(self.rng)
            .map_err(|e| e.to_string())?;
        self.objects.services.insert(
            service.to_string(),
            ServiceTemplate {
                labels: labels.clone(),
                selector: labels.clone(),
                node_port,
            },
        );
        self.log
            .push(format!("created Service {service} (nodePort {node_port})"));
        Ok(())
    }

    /// `UpsertPPEnsure`, as it behaves against Karmada: created when missing,
    /// rewritten otherwise (policies FedState builds without a selector namespace
    /// never compare equal with the stored ones; for the others the result is
    /// the same).
    pub(super) fn upsert_policy(
        &mut self,
        policy: &str,
        labels: Labels,
        resource: ResourceRef,
        clusters: Vec<String>,
        static_weights: Option<Vec<StaticClusterWeight>>,
    ) {
        let new = PropagationPolicy {
            labels,
            resource,
            clusters,
            static_weights,
        };
        match self.objects.propagation_policies.get_mut(policy) {
            Some(existing) => {
                if existing.clusters != new.clusters
                    || existing.static_weights != new.static_weights
                {
                    self.log.push(format!(
                        "PropagationPolicy {policy}: clusters {:?}",
                        new.clusters
                    ));
                }
                *existing = new;
            }
            None => {
                self.log.push(format!(
                    "created PropagationPolicy {policy}: clusters {:?}",
                    new.clusters
                ));
                self.objects
                    .propagation_policies
                    .insert(policy.to_string(), new);
            }
        }
    }

    /// `UpsertOpEnsure`.
    pub(super) fn upsert_override(&mut self, policy: &str, new: OverridePolicy) {
        if self.objects.override_policies.get(policy) != Some(&new) {
            self.log.push(format!(
                "OverridePolicy {policy}: clusters {:?}",
                new.clusters.as_deref().unwrap_or_default()
            ));
            self.objects
                .override_policies
                .insert(policy.to_string(), new);
        }
    }

    /// `k8s.ScaleDownCleaner`: every member Service whose nodePort no cluster's
    /// `status.result[].connectAddrWithRole` lists is deleted, and every member
    /// Service policy keeps only the clusters whose own members use it.
    pub(super) fn scale_down_cleaner(&mut self) -> Result<(), String> {
        let name = self.name();
        let base = base_label(&self.labels(), &name);
        let listed: Vec<String> = self
            .objects
            .services
            .iter()
            .filter(|(_, s)| matches(&s.labels, &base))
            .map(|(n, _)| n.clone())
            .collect();
        let mut effective: BTreeSet<String> = BTreeSet::new();
        let mut service_with_cluster: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for result in &self.object.status.result {
            let mut used = BTreeSet::new();
            // A Go map: the first address without a Service ends the pass.
            let mut addresses: Vec<(&String, &String)> =
                result.connect_addr_with_role.iter().collect();
            addresses.shuffle(self.rng);
            for (address, role) in addresses {
                if role == ARBITER_ROLE {
                    continue;
                }
                let port: i32 = address
                    .split(':')
                    .nth(1)
                    .ok_or_else(|| format!("FedState panics splitting address {address:?}"))?
                    .parse()
                    .map_err(|e| format!("atoi port err: {e}"))?;
                let service = listed
                    .iter()
                    .find(|s| self.objects.services[*s].node_port == port)
                    .ok_or_else(|| {
                        "get svc by nodeport failed, err: not found service".to_string()
                    })?;
                effective.insert(service.clone());
                used.insert(service.clone());
            }
            service_with_cluster.insert(result.cluster.clone(), used);
        }
        for service in &listed {
            if !effective.contains(service) {
                self.objects.services.remove(service);
                self.log.push(format!("deleted Service {service}"));
            }
        }
        let pp_selector = service_pp_label(&self.labels(), &format!("{name}-service-pp"));
        let policies: Vec<(String, PropagationPolicy)> = self
            .objects
            .propagation_policies
            .iter()
            .filter(|(_, p)| matches(&p.labels, &pp_selector))
            .map(|(n, p)| (n.clone(), p.clone()))
            .collect();
        let mut keep: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (policy_name, policy) in &policies {
            for cluster in &policy.clusters {
                if let Some(services) = service_with_cluster.get(cluster) {
                    for service in services {
                        if policy.resource.name == *service {
                            let clusters = keep.entry(policy_name.clone()).or_default();
                            if !clusters.contains(cluster) {
                                clusters.push(cluster.clone());
                            }
                        }
                    }
                }
            }
        }
        for (policy_name, policy) in policies {
            let wanted = keep.get(&policy_name).cloned().unwrap_or_default();
            let deleted = !keep.contains_key(&policy_name);
            if deleted {
                self.objects.propagation_policies.remove(&policy_name);
                self.log
                    .push(format!("deleted PropagationPolicy {policy_name}"));
            }
            if policy.clusters != wanted {
                if deleted {
                    // UpsertPPEnsure re-creates the deleted policy from the
                    // listed copy, resourceVersion and all: the API server
                    // refuses it and the pass ends here.
                    return Err(format!(
                        "upsert svcpp failed, err: creating PropagationPolicy {policy_name}: resourceVersion should not be set on objects to be created"
                    ));
                }
                self.log.push(format!(
                    "PropagationPolicy {policy_name}: clusters {:?} -> {wanted:?}",
                    policy.clusters
                ));
                if let Some(stored) = self.objects.propagation_policies.get_mut(&policy_name) {
                    stored.clusters = wanted;
                }
            }
        }
        Ok(())
    }
}

/// `k8s.DeleteObjByLabel`: every object of `kind` whose labels match `selector`.
pub(super) fn delete_by_label<T>(
    objects: &mut BTreeMap<String, T>,
    kind: &str,
    selector: &Labels,
    deleted: &mut Vec<String>,
    labels: impl Fn(&T) -> &Labels,
) {
    objects.retain(|name, object| {
        let hit = matches(labels(object), selector);
        if hit {
            deleted.push(format!("{kind} {name}"));
        }
        !hit
    });
}
