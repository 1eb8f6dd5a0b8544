//! One reconcile pass of FedState's handler chain,
//! `pkg/controller/multicloudmongodb/core.go`: GetScheduleStatus,
//! ClusterScale, UpsertArbiter, HostConfigMap, MongoDependency, Mongo and
//! Status, with the conditions each sets when the chain unwinds.

use std::collections::BTreeMap;

use rand::seq::SliceRandom;
use rand::Rng;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value as Json};

use super::labels::*;
use super::objects::*;
use super::{ClusterWithReplicaset, MultiCloudMongoDB, ServiceTopology};
use crate::karmada::{
    matches, ConfigMapTemplate, Kind, Labels, MongoDBTemplate, NodePorts, Objects, OverridePolicy,
    Overrider, PropagationPolicy, ResourceBinding, ResourceRef, StaticClusterWeight,
};

/// `mgo.Arbiter`: the role FedState gives the arbiter's address.
pub const ARBITER_ROLE: &str = "ARBITER";

/// Lab-only departures from FedState, chosen per instance. None of them is
/// FedState's behaviour; the default is FedState's.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Deviations {
    /// On a scale-up, keep every cluster on the member Services' policies.
    /// FedState rewrites each policy with only the clusters that scale up
    /// (`ClusterScaleHandler`), which withdraws the Services of every other
    /// cluster: off by default.
    #[serde(default)]
    pub keep_unchanged_clusters_on_scale_up: bool,
}

/// What one pass keeps between handlers (`MultiCloudDBParams`).
#[derive(Clone, Debug, Default)]
pub struct ChainParams {
    /// The scheduler result, sorted by members (descending; ties keep their order).
    pub scheduler: Vec<ClusterWithReplicaset>,
    /// VIP per cluster (the Karmada Cluster objects' `vip` label).
    pub cluster_to_vip: BTreeMap<String, String>,
    /// Clusters with members, in `scheduler` order.
    pub active: Vec<String>,
    /// The arbiter's cluster and its Service's nodePort.
    pub arbiter_map: BTreeMap<String, i32>,
    /// Services per cluster, as the hostconf handler saw their policies.
    pub service_name_with_cluster: BTreeMap<String, Vec<String>>,
}

/// One reconcile pass of FedState's handler chain over one MultiCloudMongoDB.
pub struct Pass<'a, R: Rng> {
    /// The MultiCloudMongoDB (its status is written back).
    pub object: &'a mut MultiCloudMongoDB,
    /// Its objects in the Karmada API server.
    pub objects: &'a mut Objects,
    /// The API server's nodePort allocator.
    pub node_ports: &'a mut NodePorts,
    /// Go's map order and the API server's port choices.
    pub rng: &'a mut R,
    /// Lab-only departures.
    pub deviations: &'a Deviations,
    /// The time conditions are stamped with.
    pub now: String,
    /// The chain's shared parameters.
    pub params: ChainParams,
    /// What the pass did, for people.
    pub log: Vec<String>,
    /// Conditions set by handlers, applied when the chain unwinds (Go `defer`).
    deferred: Vec<(String, String, String, String)>,
}

/// A pass between its handlers and its StatusHandler.
#[derive(Debug, Default)]
pub struct Suspended {
    params: ChainParams,
    /// What the pass did so far, for people.
    pub log: Vec<String>,
    deferred: Vec<(String, String, String, String)>,
}

/// How the part of the chain before the StatusHandler ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Handled {
    /// The StatusHandler is next (it reads the ResourceBinding).
    ReadStatus,
    /// The chain stopped (no replica in the scheduler result).
    Stopped,
}

impl<'a, R: Rng> Pass<'a, R> {
    /// A pass over `object` and its `objects`.
    pub fn new(
        object: &'a mut MultiCloudMongoDB,
        objects: &'a mut Objects,
        node_ports: &'a mut NodePorts,
        rng: &'a mut R,
        deviations: &'a Deviations,
        now: String,
    ) -> Self {
        Pass {
            object,
            objects,
            node_ports,
            rng,
            deviations,
            now,
            params: ChainParams::default(),
            log: Vec::new(),
            deferred: Vec::new(),
        }
    }

    /// Ends the pass for now, keeping what its StatusHandler needs (the I/O
    /// between the handlers and the StatusHandler happens without it).
    pub fn suspend(self) -> Suspended {
        Suspended {
            params: self.params,
            log: self.log,
            deferred: self.deferred,
        }
    }

    /// Takes a suspended pass up again.
    pub fn resume(
        object: &'a mut MultiCloudMongoDB,
        objects: &'a mut Objects,
        node_ports: &'a mut NodePorts,
        rng: &'a mut R,
        deviations: &'a Deviations,
        now: String,
        suspended: Suspended,
    ) -> Self {
        let mut pass = Pass::new(object, objects, node_ports, rng, deviations, now);
        pass.params = suspended.params;
        pass.log = suspended.log;
        pass.deferred = suspended.deferred;
        pass
    }

    pub(super) fn name(&self) -> String {
        self.object.name.clone()
    }

    pub(super) fn labels(&self) -> Labels {
        self.object.labels.clone()
    }

    fn defer_condition(&mut self, type_: &str, status: &str, reason: &str, message: String) {
        self.deferred.push((
            type_.to_string(),
            status.to_string(),
            reason.to_string(),
            message,
        ));
    }

    /// Applies the deferred conditions, innermost handler first.
    pub fn finish(&mut self) {
        for (type_, status, reason, message) in self.deferred.drain(..).rev() {
            self.object
                .status
                .set_condition(&type_, &status, &reason, &message, &self.now);
        }
    }

    /// The handlers up to (not including) the StatusHandler, given the VIP of
    /// every cluster. `Err` ends the pass (FedState requeues it).
    pub fn handle(&mut self, vips: &BTreeMap<String, String>) -> Result<Handled, String> {
        if !self.get_schedule_status()? {
            return Ok(Handled::Stopped);
        }
        self.params.cluster_to_vip = vips.clone();
        self.cluster_scale()?;
        self.upsert_arbiter()?;
        self.host_config_map()?;
        self.mongo_dependency()?;
        self.mongo()?;
        Ok(Handled::ReadStatus)
    }

    /// `GetScheduleStatusHandler`: false when the scheduler result asks for no member.
    fn get_schedule_status(&mut self) -> Result<bool, String> {
        let annotation = self.object.scheduler_annotation();
        self.params.scheduler = self.object.scheduler_result.cluster_with_replicaset.clone();
        self.defer_condition(
            "ServerScheduledResult",
            "True",
            "GetSchedulerSuccess",
            format!(
                "Get Scheduler Result From MultiCloudMongoDB Annotations Success ({}/{}): {annotation}",
                self.object.namespace, self.object.name
            ),
        );
        let total: i32 = self.params.scheduler.iter().map(|c| c.replicaset).sum();
        Ok(total != 0)
    }

    /// `sort.Slice` by members, descending. Below 12 elements Go sorts by
    /// insertion, which keeps ties in their order: so does a stable sort.
    fn sort_scheduler(&mut self) {
        self.params
            .scheduler
            .sort_by_key(|c| std::cmp::Reverse(c.replicaset));
    }

    /// `ClusterScaleHandler`.
    fn cluster_scale(&mut self) -> Result<(), String> {
        self.sort_scheduler();
        self.params.active = self
            .params
            .scheduler
            .iter()
            .filter(|c| c.replicaset != 0)
            .map(|c| c.cluster.clone())
            .collect();
        let name = self.name();
        let mut scale_up: Vec<(String, i32)> = Vec::new();
        let mut scale_down: BTreeMap<String, i32> = BTreeMap::new();
        match self.objects.config_maps.get(&hostconf_name(&name)) {
            Some(hostconf) => {
                let datas = hostconf.data.get("datas").cloned().unwrap_or_default();
                let mut host_with_size: BTreeMap<String, i32> = BTreeMap::new();
                for line in datas.split('\n') {
                    let host = line
                        .split("host:'")
                        .nth(1)
                        .ok_or_else(|| {
                            format!(
                                "FedState panics reading hostconf line {line:?} (index out of range in ClusterScaleHandler)"
                            )
                        })?
                        .trim_end_matches('\'');
                    let address = host.split(':').next().unwrap_or_default();
                    for (cluster, vip) in &self.params.cluster_to_vip {
                        if address == vip {
                            *host_with_size.entry(cluster.clone()).or_default() += 1;
                        }
                    }
                }
                for entry in &self.params.scheduler {
                    let Some(have) = host_with_size.get(&entry.cluster) else {
                        if entry.replicaset > 0 {
                            scale_up.push((entry.cluster.clone(), entry.replicaset));
                        }
                        continue;
                    };
                    if entry.replicaset > *have {
                        scale_up.push((entry.cluster.clone(), entry.replicaset));
                    }
                    if entry.replicaset < *have {
                        scale_down.insert(entry.cluster.clone(), entry.replicaset);
                    }
                }
            }
            None => {
                for entry in &self.params.scheduler {
                    scale_up.push((entry.cluster.clone(), entry.replicaset));
                }
            }
        }
        let total = self.object.spec.replicaset.unwrap_or_default();
        if !scale_down.is_empty() {
            self.log.push(format!(
                "waiting for the clusters to scale down: {scale_down:?}"
            ));
            // Go's defer: set even when ScaleDownCleaner fails.
            let ok = self.object.status.result.iter().all(|r| {
                scale_down
                    .get(&r.cluster)
                    .is_none_or(|want| r.replicaset_status == Some(i64::from(*want)))
            });
            let mut outcome = Ok(());
            if ok {
                outcome = self.scale_down_cleaner();
            }
            match &outcome {
                Ok(()) => self.defer_condition(
                    "ServerWaitingScaleDown",
                    "True",
                    "WaitingMemberScaleDown",
                    format!("Waiting for member clusters to undergo capacity reduction SpecReplicaset: {total}"),
                ),
                Err(error) => self.defer_condition(
                    "ServerWaitingScaleDown",
                    "False",
                    "CheckFailed",
                    format!("Update PP and SVC and ConfigMap failed, err: {error}"),
                ),
            }
            return outcome;
        }
        self.defer_condition(
            "ServerCheck",
            "True",
            "CheckSuccess",
            format!("The number of member clusters is the same as the number of control plane copies, check, SpecReplicaset: {total}"),
        );
        // clustersToScaleUp is a Go map: its clusters come in random order.
        scale_up.shuffle(self.rng);
        if self.deviations.keep_unchanged_clusters_on_scale_up && !scale_up.is_empty() {
            // Lab-only: every cluster with members keeps its Services.
            scale_up = self
                .params
                .scheduler
                .iter()
                .map(|c| (c.cluster.clone(), c.replicaset))
                .collect();
        }
        // params.ServiceNameWithCluster is still empty here (HostConfigMapHandler
        // fills it later in the chain): every cluster that scales up is put on
        // the policies of Services 0..replicaset-1, and only those clusters.
        let mut upsert: BTreeMap<usize, Vec<String>> = BTreeMap::new();
        for (cluster, replicaset) in &scale_up {
            for index in 0..(*replicaset).max(0) as usize {
                upsert.entry(index).or_default().push(cluster.clone());
            }
        }
        let most = self
            .params
            .scheduler
            .first()
            .map(|c| c.replicaset)
            .unwrap_or(0)
            .max(0) as usize;
        for index in 0..most {
            let Some(clusters) = upsert.get(&index).filter(|c| !c.is_empty()).cloned() else {
                continue;
            };
            let service = member_service_name(&name, index);
            let label = service_label(&self.labels(), &name, &service);
            self.ensure_service(&service, &label)?;
            let pp_label = service_pp_label(&label, &format!("{name}-service-pp"));
            self.upsert_policy(
                &format!("{service}-pp"),
                pp_label,
                ResourceRef::new(Kind::Service, &service),
                clusters,
                None,
            );
        }
        Ok(())
    }

    /// `UpsertArbiterHandler`.
    fn upsert_arbiter(&mut self) -> Result<(), String> {
        let name = self.name();
        let service = arbiter_service_name(&name);
        let label = arbiter_label(&self.labels(), &service);
        let op_name = format!("{name}-arbiter");
        let pp_name = format!("{service}-pp");
        if self.object.spec.config.arbiter {
            let Some(first) = self.params.scheduler.first_mut() else {
                return Err("FedState panics: empty scheduler result".into());
            };
            first.arbiter = true;
            let cluster = first.cluster.clone();
            self.upsert_override(
                &op_name,
                OverridePolicy {
                    labels: label.clone(),
                    resource: ResourceRef::new(Kind::MongoDB, &name),
                    clusters: Some(vec![cluster.clone()]),
                    overrider: Overrider::AddPath {
                        path: "/spec/arbiter".into(),
                        value: json!(true),
                    },
                },
            );
            self.ensure_service(&service, &label)?;
            self.upsert_policy(
                &pp_name,
                one(LABEL_ARBITER, &name),
                ResourceRef::new(Kind::Service, &service),
                vec![cluster],
                None,
            );
        } else {
            if self.objects.override_policies.remove(&op_name).is_some() {
                self.log.push(format!("deleted OverridePolicy {op_name}"));
            }
            if self.objects.services.remove(&service).is_some() {
                self.log.push(format!("deleted Service {service}"));
            }
            if self.objects.propagation_policies.remove(&pp_name).is_some() {
                self.log
                    .push(format!("deleted PropagationPolicy {pp_name}"));
            }
            if let Some(hostconf) = self.objects.config_maps.get_mut(&hostconf_name(&name)) {
                hostconf.data.insert("arbiters".into(), String::new());
            }
        }
        Ok(())
    }

    /// `HostConfigMapHandler`: hostconf rebuilt from the member Services'
    /// policies (in name order, each policy's clusters in its order), plus the
    /// arbiter; propagated to the clusters with members.
    fn host_config_map(&mut self) -> Result<(), String> {
        let name = self.name();
        let pp_selector = service_pp_label(&self.labels(), &format!("{name}-service-pp"));
        let mut datas = Vec::new();
        let policies: Vec<PropagationPolicy> = self
            .objects
            .propagation_policies
            .values()
            .filter(|p| matches(&p.labels, &pp_selector))
            .cloned()
            .collect();
        for policy in policies {
            let service = self
                .objects
                .services
                .get(&policy.resource.name)
                .ok_or_else(|| format!("services \"{}\" not found", policy.resource.name))?;
            for cluster in &policy.clusters {
                let vip = self
                    .params
                    .cluster_to_vip
                    .get(cluster)
                    .cloned()
                    .unwrap_or_default();
                datas.push(host_line(&vip, service.node_port));
                self.params
                    .service_name_with_cluster
                    .entry(cluster.clone())
                    .or_default()
                    .push(policy.resource.name.clone());
            }
        }
        let mut arbiters = Vec::new();
        if self.object.spec.config.arbiter {
            let service_name = arbiter_service_name(&name);
            let service = self.objects.services.get(&service_name).ok_or_else(|| {
                format!("get arbiter svc failed, err: services \"{service_name}\" not found")
            })?;
            let cluster = self
                .params
                .scheduler
                .iter()
                .rev()
                .find(|c| c.arbiter)
                .map(|c| c.cluster.clone())
                .unwrap_or_default();
            let vip = self
                .params
                .cluster_to_vip
                .get(&cluster)
                .cloned()
                .unwrap_or_default();
            arbiters.push(host_line(&vip, service.node_port));
            self.params
                .arbiter_map
                .insert(cluster.clone(), service.node_port);
            self.params
                .service_name_with_cluster
                .entry(cluster)
                .or_default()
                .push(service_name);
        }
        let cm_name = hostconf_name(&name);
        let cm_label = config_map_label(&self.labels(), &name);
        let data = hostconf_data(&datas, &arbiters);
        match self.objects.config_maps.get_mut(&cm_name) {
            Some(existing) => {
                if existing.data != data {
                    self.log
                        .push(format!("hostconf: {}", data["datas"].replace('\n', " ")));
                    existing.data = data;
                }
            }
            None => {
                self.log.push(format!(
                    "created hostconf: {}",
                    data["datas"].replace('\n', " ")
                ));
                self.objects.config_maps.insert(
                    cm_name.clone(),
                    ConfigMapTemplate {
                        labels: cm_label.clone(),
                        data,
                        user_owned: false,
                    },
                );
            }
        }
        let pp_label = config_map_pp_label(&cm_label, &format!("{name}-configmap-pp"));
        let active = self.params.active.clone();
        self.upsert_policy(
            &format!("{cm_name}-pp"),
            pp_label,
            ResourceRef::new(Kind::ConfigMap, &cm_name),
            active,
            None,
        );
        Ok(())
    }

    /// `MongoDependencyHandler`: the `configRef` ConfigMap (a user's object in
    /// the control plane) propagated to the clusters with members.
    fn mongo_dependency(&mut self) -> Result<(), String> {
        let Some(reference) = self.object.spec.config.config_ref.clone() else {
            return Ok(());
        };
        let name = self.name();
        let found = self.objects.config_maps.get(&reference).ok_or_else(|| {
            format!(
                "can't get the configMap {reference}, {}: configmaps \"{reference}\" not found",
                self.object.namespace
            )
        })?;
        let label =
            custom_config_map_pp_label(&found.labels, &format!("{name}-custom-configmap-pp"));
        let active = self.params.active.clone();
        self.upsert_policy(
            &format!("{reference}-custom-configmap-pp"),
            label,
            ResourceRef::new(Kind::ConfigMap, &reference),
            active,
            None,
        );
        Ok(())
    }

    /// `MongoHandler`: the template (replaced only when its members or
    /// resources change, `EnsureMongoWithoutSetRef`), `rsInit` and the VIP
    /// labels by OverridePolicy, and the divided, weighted policy.
    fn mongo(&mut self) -> Result<(), String> {
        let name = self.name();
        let labels = base_label(&self.labels(), &name);
        let spec = generate_mongo(self.object, self.rng);
        match self.objects.mongodbs.get_mut(&name) {
            Some(existing) => {
                if existing.spec.get("members") != spec.get("members")
                    || existing.spec.get("resources") != spec.get("resources")
                {
                    existing.generation += 1;
                    self.log.push(format!(
                        "MongoDB template: members {} (generation {})",
                        spec["members"], existing.generation
                    ));
                    existing.spec = spec;
                    existing.labels = labels.clone();
                }
            }
            None => {
                self.log.push(format!(
                    "created MongoDB template: members {}",
                    spec["members"]
                ));
                self.objects.mongodbs.insert(
                    name.clone(),
                    MongoDBTemplate {
                        labels: labels.clone(),
                        spec,
                        generation: 1,
                        status: Json::Null,
                    },
                );
            }
        }
        let first = self
            .params
            .scheduler
            .first()
            .map(|c| c.cluster.clone())
            .ok_or_else(|| "FedState panics: empty scheduler result".to_string())?;
        self.upsert_override(
            &format!("{name}-init"),
            OverridePolicy {
                labels: init_label(&self.labels(), &name),
                resource: ResourceRef::new(Kind::MongoDB, &name),
                clusters: Some(vec![first]),
                overrider: Overrider::AddPath {
                    path: "/spec/rsInit".into(),
                    value: json!(true),
                },
            },
        );
        for cluster in self.params.active.clone() {
            let vip = self
                .params
                .cluster_to_vip
                .get(&cluster)
                .cloned()
                .unwrap_or_default();
            self.upsert_override(
                &format!("{name}-{cluster}-vip"),
                OverridePolicy {
                    labels: cluster_vip_label(&self.labels(), &name),
                    resource: ResourceRef::new(Kind::MongoDB, &name),
                    clusters: Some(vec![cluster.clone()]),
                    overrider: Overrider::AddLabels(one(LABEL_CLUSTER_VIP_INSTANCE, &vip)),
                },
            );
        }
        // GenerateMongoPP: weights in scheduler order, up to the first cluster
        // without members.
        let weights: Vec<StaticClusterWeight> = self
            .params
            .scheduler
            .iter()
            .take_while(|c| c.replicaset != 0)
            .map(|c| StaticClusterWeight {
                cluster: c.cluster.clone(),
                weight: i64::from(c.replicaset),
            })
            .collect();
        let active = self.params.active.clone();
        self.upsert_policy(
            &name,
            labels,
            ResourceRef::new(Kind::MongoDB, &name),
            active,
            Some(weights),
        );
        Ok(())
    }

    /// `StatusHandler`: the MultiCloudMongoDB's status from the ResourceBinding
    /// `<name>-mongodb` (`None`: not created yet).
    pub fn status(&mut self, binding: Option<&ResourceBinding>) -> Result<(), String> {
        let Some(binding) = binding else {
            self.defer_condition(
                "ServerReady",
                "False",
                "ServerReady",
                format!("Service Dispatch Failed And NotReady For External Service, Err: resourcebindings.work.karmada.io \"{}-mongodb\" not found", self.object.name),
            );
            return Err(format!(
                "Get ResourceBinding Failed: {}-mongodb not found",
                self.object.name
            ));
        };
        let status = &mut self.object.status;
        status.state = "UnKnown".into();
        let mut active = Vec::new();
        for cluster in &self.params.active {
            if !active.contains(cluster) {
                active.push(cluster.clone());
            }
        }
        if binding.aggregated_status.len() < active.len() {
            status.result = self
                .params
                .scheduler
                .iter()
                .map(|c| ServiceTopology {
                    replicaset_status: Some(0),
                    replicaset_spec: Some(i64::from(c.replicaset)),
                    connect_addr_with_role: BTreeMap::new(),
                    cluster: c.cluster.clone(),
                    state: "Unknown".into(),
                    current_revision: "Unknown".into(),
                    applied: false,
                })
                .collect();
            self.defer_condition(
                "ServerReady",
                "False",
                "ServerReady",
                "Service Dispatch Failed And NotReady For External Service".into(),
            );
            return Ok(());
        }
        let mut result: Vec<ServiceTopology> = Vec::new();
        let mut external = Vec::new();
        let mut healthy = 0;
        for (i, item) in binding.aggregated_status.iter().enumerate() {
            let Some(reflected) = &item.status else {
                continue;
            };
            let reflected: MongoStatusAsFedStateReadsIt = serde_json::from_value(reflected.clone())
                .map_err(|e| format!("Unmarshal MongoStatus Failed, Err: {e}"))?;
            let spec = self
                .params
                .scheduler
                .iter()
                .filter(|c| c.cluster == item.cluster_name)
                .map(|c| i64::from(c.replicaset))
                .next_back()
                .unwrap_or(0);
            result.push(ServiceTopology {
                replicaset_status: Some(reflected.current_info.members),
                replicaset_spec: Some(spec),
                connect_addr_with_role: BTreeMap::new(),
                cluster: item.cluster_name.clone(),
                state: reflected.state.clone(),
                current_revision: reflected.current_revision.clone(),
                applied: item.applied,
            });
            let vip = self
                .params
                .cluster_to_vip
                .get(&item.cluster_name)
                .cloned()
                .unwrap_or_default();
            // Result[i]: indexed by the binding's item, not by the result's.
            let index_out_of_range = || {
                format!(
                    "FedState panics: StatusHandler indexes status.result by the ResourceBinding item ({i}), and a cluster without status came first"
                )
            };
            if let Some(port) = self.params.arbiter_map.get(&item.cluster_name) {
                result
                    .get_mut(i)
                    .ok_or_else(index_out_of_range)?
                    .connect_addr_with_role
                    .insert(join_host_port(&vip, *port), ARBITER_ROLE.into());
            }
            for member in &reflected.replset {
                if member.name.contains(vip.as_str()) {
                    result
                        .get_mut(i)
                        .ok_or_else(index_out_of_range)?
                        .connect_addr_with_role
                        .insert(member.name.clone(), member.state_str.clone());
                    external.push(member.name.clone());
                }
            }
            if reflected.state == "Running" {
                healthy += 1;
            }
        }
        status.result = result;
        status.external_addr = external.join(",");
        if healthy == binding.aggregated_status.len() {
            status.state = "Health".into();
            self.defer_condition(
                "ServerReady",
                "True",
                "ServerReady",
                "Service Dispatch Successful And Ready For External Service".into(),
            );
        } else {
            status.state = "UnHealth".into();
            self.defer_condition(
                "ServerReady",
                "False",
                "ServerReady",
                "Service Dispatch Failed And NotReady For External Service".into(),
            );
        }
        Ok(())
    }
}

/// `net.JoinHostPort`.
fn join_host_port(host: &str, port: i32) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// The fields of FedState's `MongoDBStatus` its StatusHandler reads from a
/// ResourceBinding item (Go's decoder ignores every other field).
#[derive(Deserialize, Default, Debug)]
#[serde(rename_all = "camelCase")]
struct MongoStatusAsFedStateReadsIt {
    #[serde(default)]
    state: String,
    #[serde(default)]
    current_revision: String,
    #[serde(default)]
    current_info: CurrentInfo,
    #[serde(default)]
    replset: Vec<ReplSetMember>,
}

#[derive(Deserialize, Default, Debug)]
struct CurrentInfo {
    #[serde(default)]
    members: i64,
}

#[derive(Deserialize, Default, Debug)]
#[serde(rename_all = "camelCase")]
struct ReplSetMember {
    #[serde(default)]
    name: String,
    #[serde(default)]
    state_str: String,
}
