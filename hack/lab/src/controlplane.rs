//! The control-plane stand-in: does to the member clusters exactly what FedState's
//! control plane and Karmada do (see `shared/design/contract.md`), and nothing more.
//!
//! For an instance `<name>` split over clusters (`a=2,b=2,c=1`) it writes into every
//! cluster that hosts members:
//! - the `MongoDB` object with that cluster's `spec.members`, the VIP label,
//!   `rsInit` on the cluster with most members (kept once chosen) and `arbiter`;
//! - Services `<name>-mongodb-<i>` for `i < members`, NodePort, with the **same
//!   nodePort for index `i` in every cluster** (allocated by the first cluster's API
//!   server, then requested explicitly everywhere else);
//! - the hostconf ConfigMap listing every member `VIP:NodePort` (FedState format);
//! - the shared credentials Secret (keyfile and root user, generated once).
//!
//! On scale-in it lowers `spec.members` and deletes a Service only once its member
//! has disappeared from that cluster's `status.replset`, as FedState does.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use anyhow::{anyhow, bail, Context, Result};
use base64::Engine;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::ByteString;
use kube::api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use mongodb_member_operator::api::{
    CredentialsSecretRef, MongoDB, MongoDBSpec, ReplicaSetSettings, INSTANCE_LABEL, VIP_LABEL,
};
use mongodb_member_operator::hostconf::{HostConf, HostConfMember, MemberAddress};
use rand::distr::{Alphanumeric, SampleString};

/// Field manager of everything the stand-in writes.
pub const FIELD_MANAGER: &str = "lab-control-plane";
/// Port of mongod in every member pod.
const MONGO_PORT: i32 = 27017;

/// One member cluster as the control plane sees it.
#[derive(Clone)]
pub struct MemberCluster {
    /// Cluster name (also its kubeconfig context).
    pub name: String,
    /// The cluster's VIP: every member it hosts is reachable at `VIP:nodePort`.
    pub vip: Ipv4Addr,
    /// Client for the cluster's API server.
    pub client: Client,
}

/// How many members each cluster hosts, e.g. `a=2,b=2,c=1`.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Split(pub BTreeMap<String, u32>);

impl Split {
    /// Parses `cluster=count[,cluster=count…]`.
    pub fn parse(text: &str) -> Result<Split> {
        let mut counts = BTreeMap::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (cluster, count) = part
                .split_once('=')
                .ok_or_else(|| anyhow!("split entry {part:?} is not cluster=count"))?;
            let count: u32 = count
                .trim()
                .parse()
                .with_context(|| format!("split entry {part:?}: count is not a number"))?;
            if counts.insert(cluster.trim().to_string(), count).is_some() {
                bail!("split names cluster {cluster:?} twice");
            }
        }
        if counts.is_empty() {
            bail!("empty split: expected cluster=count[,cluster=count…]");
        }
        Ok(Split(counts))
    }

    /// Members hosted by `cluster` (0 when not named).
    pub fn members_of(&self, cluster: &str) -> u32 {
        self.0.get(cluster).copied().unwrap_or(0)
    }

    /// Total members over all clusters.
    pub fn total(&self) -> u32 {
        self.0.values().sum()
    }
}

/// What the control plane is asked to run.
#[derive(Clone, Debug)]
pub struct InstanceRequest {
    /// Instance name.
    pub name: String,
    /// Namespace, the same in every cluster.
    pub namespace: String,
    /// Members per cluster.
    pub split: Split,
    /// mongod image.
    pub image: String,
    /// Replica-set settings (the lab shortens MongoDB's timeouts).
    pub settings: ReplicaSetSettings,
}

/// The control-plane stand-in over a set of member clusters.
pub struct ControlPlane {
    clusters: Vec<MemberCluster>,
}

impl ControlPlane {
    /// A control plane propagating to these clusters (order matters for ties).
    pub fn new(clusters: Vec<MemberCluster>) -> Self {
        ControlPlane { clusters }
    }

    /// The member clusters.
    pub fn clusters(&self) -> &[MemberCluster] {
        &self.clusters
    }

    fn cluster(&self, name: &str) -> Option<&MemberCluster> {
        self.clusters.iter().find(|c| c.name == name)
    }

    /// Creates or updates the instance in every cluster (also used to scale).
    pub async fn apply(&self, request: &InstanceRequest) -> Result<()> {
        for cluster in request.split.0.keys() {
            if self.cluster(cluster).is_none() {
                let known: Vec<&str> = self.clusters.iter().map(|c| c.name.as_str()).collect();
                bail!(
                    "split names unknown cluster {cluster:?} (clusters: {})",
                    known.join(", ")
                );
            }
        }
        if request.split.total() == 0 || request.split.total() > 50 {
            bail!(
                "a replica set has 1 to 50 members, the split asks for {}",
                request.split.total()
            );
        }
        let targets = self.target_clusters(request).await?;
        let rs_init = self.choose_rs_init_cluster(request, &targets).await?;
        let credentials = self.ensure_credentials(request, &targets).await?;
        // Where the object exists, its new `spec.members` goes out before any new
        // Service: the continuous pass deletes Services whose index is at or above
        // `spec.members`, and would otherwise take a Service created for a scale-out
        // for one left over from a scale-in.
        for cluster in &targets {
            if self
                .mongodb_api(cluster, &request.namespace)
                .get_opt(&request.name)
                .await?
                .is_some()
            {
                self.apply_mongodb(cluster, request, cluster.name == rs_init, &credentials)
                    .await?;
            }
        }
        let max_members = request.split.0.values().copied().max().unwrap_or(0);
        let node_ports = self.ensure_node_ports(request, max_members).await?;
        let hostconf = self.hostconf(request, &node_ports);
        for cluster in &targets {
            self.apply_hostconf(cluster, request, &hostconf).await?;
            self.apply_mongodb(cluster, request, cluster.name == rs_init, &credentials)
                .await?;
        }
        Ok(())
    }

    /// Clusters that receive the instance: those with members now, and those that
    /// already hold it (they keep it with `members: 0` until their members left).
    async fn target_clusters(&self, request: &InstanceRequest) -> Result<Vec<MemberCluster>> {
        let mut targets = Vec::new();
        for cluster in &self.clusters {
            let hosts_members = request.split.members_of(&cluster.name) > 0;
            let holds_it = self
                .mongodb_api(cluster, &request.namespace)
                .get_opt(&request.name)
                .await?
                .is_some();
            if hosts_members || holds_it {
                targets.push(cluster.clone());
            }
        }
        Ok(targets)
    }

    /// The cluster that may initiate: the one already marked, else the one with most members.
    async fn choose_rs_init_cluster(
        &self,
        request: &InstanceRequest,
        targets: &[MemberCluster],
    ) -> Result<String> {
        for cluster in targets {
            if let Some(existing) = self
                .mongodb_api(cluster, &request.namespace)
                .get_opt(&request.name)
                .await?
            {
                if existing.spec.rs_init {
                    return Ok(cluster.name.clone());
                }
            }
        }
        targets
            .iter()
            .max_by_key(|c| {
                (
                    request.split.members_of(&c.name),
                    std::cmp::Reverse(self.position(&c.name)),
                )
            })
            .map(|c| c.name.clone())
            .ok_or_else(|| anyhow!("no cluster hosts a member"))
    }

    fn position(&self, cluster: &str) -> usize {
        self.clusters
            .iter()
            .position(|c| c.name == cluster)
            .unwrap_or(usize::MAX)
    }

    /// The nodePort of each member index, identical in every cluster: an existing
    /// Service's port wins; otherwise the first cluster that needs the Service
    /// allocates one and the others request the same.
    async fn ensure_node_ports(
        &self,
        request: &InstanceRequest,
        max_members: u32,
    ) -> Result<Vec<i32>> {
        let mut ports = Vec::new();
        for index in 0..max_members {
            let service_name = member_service_name(&request.name, index);
            let mut port = None;
            for cluster in &self.clusters {
                let existing =
                    Api::<Service>::namespaced(cluster.client.clone(), &request.namespace)
                        .get_opt(&service_name)
                        .await?;
                if let Some(found) = existing.as_ref().and_then(node_port_of) {
                    port = Some(found);
                    break;
                }
            }
            for cluster in &self.clusters {
                if index >= request.split.members_of(&cluster.name) {
                    continue;
                }
                let api = Api::<Service>::namespaced(cluster.client.clone(), &request.namespace);
                if let Some(existing) = api.get_opt(&service_name).await? {
                    if node_port_of(&existing) != port {
                        bail!(
                            "Service {service_name} in cluster {} has nodePort {:?}, expected {:?}",
                            cluster.name,
                            node_port_of(&existing),
                            port
                        );
                    }
                    continue;
                }
                let created = api
                    .create(
                        &PostParams::default(),
                        &member_service(request, index, port),
                    )
                    .await
                    .with_context(|| {
                        format!(
                            "creating Service {service_name} in cluster {}",
                            cluster.name
                        )
                    })?;
                port = Some(node_port_of(&created).ok_or_else(|| {
                    anyhow!(
                        "cluster {} allocated no nodePort for {service_name}",
                        cluster.name
                    )
                })?);
            }
            ports.push(port.ok_or_else(|| anyhow!("no nodePort for {service_name}"))?);
        }
        Ok(ports)
    }

    /// The shared credentials Secret, generated once and copied to every cluster.
    async fn ensure_credentials(
        &self,
        request: &InstanceRequest,
        targets: &[MemberCluster],
    ) -> Result<CredentialsSecretRef> {
        let secret_name = format!("{}-shared-credentials", request.name);
        let mut data = None;
        for cluster in &self.clusters {
            if let Some(secret) =
                Api::<Secret>::namespaced(cluster.client.clone(), &request.namespace)
                    .get_opt(&secret_name)
                    .await?
            {
                data = secret.data;
                break;
            }
        }
        let data = data.unwrap_or_else(generate_credentials);
        for cluster in targets {
            let secret = Secret {
                metadata: ObjectMeta {
                    name: Some(secret_name.clone()),
                    namespace: Some(request.namespace.clone()),
                    labels: Some(instance_labels(&request.name)),
                    ..Default::default()
                },
                data: Some(data.clone()),
                type_: Some("Opaque".to_string()),
                ..Default::default()
            };
            server_side_apply(
                Api::<Secret>::namespaced(cluster.client.clone(), &request.namespace),
                &secret_name,
                &secret,
            )
            .await?;
        }
        Ok(CredentialsSecretRef {
            name: secret_name,
            keyfile_key: "keyfile".to_string(),
            username_key: "username".to_string(),
            password_key: "password".to_string(),
        })
    }

    /// Every member of the set, `VIP:nodePort`, as the split asks.
    fn hostconf(&self, request: &InstanceRequest, node_ports: &[i32]) -> HostConf {
        let mut members = Vec::new();
        for cluster in &self.clusters {
            for index in 0..request.split.members_of(&cluster.name) {
                let port = node_ports[index as usize];
                members.push(HostConfMember {
                    address: MemberAddress {
                        host: cluster.vip.to_string(),
                        port: port as u16,
                    },
                    arbiter: false,
                    votes: None,
                    priority: None,
                    hidden: false,
                    tags: BTreeMap::new(),
                });
            }
        }
        HostConf { members }
    }

    async fn apply_hostconf(
        &self,
        cluster: &MemberCluster,
        request: &InstanceRequest,
        hostconf: &HostConf,
    ) -> Result<()> {
        let name = format!("{}-hostconf", request.name);
        let config_map = ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(request.namespace.clone()),
                labels: Some(instance_labels(&request.name)),
                ..Default::default()
            },
            data: Some(hostconf.to_fedstate_data()),
            ..Default::default()
        };
        server_side_apply(
            Api::<ConfigMap>::namespaced(cluster.client.clone(), &request.namespace),
            &name,
            &config_map,
        )
        .await
    }

    async fn apply_mongodb(
        &self,
        cluster: &MemberCluster,
        request: &InstanceRequest,
        rs_init: bool,
        credentials: &CredentialsSecretRef,
    ) -> Result<()> {
        let spec: MongoDBSpec = serde_json::from_value(serde_json::json!({
            "members": request.split.members_of(&cluster.name),
            "rsInit": rs_init,
            "image": request.image,
            "memberConfigRef": format!("{}-hostconf", request.name),
            "credentialsSecretRef": credentials,
            "replicaSetSettings": request.settings,
        }))?;
        let mut labels = instance_labels(&request.name);
        labels.insert(VIP_LABEL.to_string(), cluster.vip.to_string());
        let mut mongodb = MongoDB::new(&request.name, spec);
        mongodb.metadata.namespace = Some(request.namespace.clone());
        mongodb.metadata.labels = Some(labels);
        server_side_apply(
            self.mongodb_api(cluster, &request.namespace),
            &request.name,
            &mongodb,
        )
        .await
    }

    /// Deletes Services whose member has left `status.replset` in its cluster
    /// (index ≥ that cluster's `spec.members`). Returns `cluster/service` names deleted.
    pub async fn prune_departed_services(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Vec<String>> {
        let mut deleted = Vec::new();
        for cluster in &self.clusters {
            let Some(mongodb) = self.mongodb_api(cluster, namespace).get_opt(name).await? else {
                continue;
            };
            let listed: Vec<String> = mongodb
                .status
                .iter()
                .flat_map(|s| s.replset.iter().map(|m| m.name.clone()))
                .collect();
            let services = Api::<Service>::namespaced(cluster.client.clone(), namespace);
            let selector = format!("{INSTANCE_LABEL}={name},{PROPAGATED_BY_LABEL}={FIELD_MANAGER}");
            for service in services
                .list(&ListParams::default().labels(&selector))
                .await?
            {
                let service_name = service.metadata.name.clone().unwrap_or_default();
                let Some(index) = member_index(name, &service_name) else {
                    continue;
                };
                if index < mongodb.spec.members as u32 {
                    continue;
                }
                let Some(port) = node_port_of(&service) else {
                    continue;
                };
                let host = format!("{}:{port}", cluster.vip);
                if !listed.contains(&host) {
                    services
                        .delete(&service_name, &DeleteParams::default())
                        .await?;
                    deleted.push(format!("{}/{service_name}", cluster.name));
                }
            }
        }
        Ok(deleted)
    }

    /// What the control plane does continuously: in every cluster, delete the
    /// Services of members that left the set, and the propagated objects of
    /// instances whose `MongoDB` object is gone. Returns what it deleted.
    pub async fn reconcile_all(&self, namespace: &str) -> Result<Vec<String>> {
        let mut deleted = Vec::new();
        let mut alive_per_cluster = Vec::new();
        for cluster in &self.clusters {
            let alive: BTreeSet<String> = self
                .mongodb_api(cluster, namespace)
                .list(&ListParams::default())
                .await?
                .iter()
                .map(|m| m.name_any())
                .collect();
            alive_per_cluster.push(alive);
        }
        let instances: BTreeSet<&String> = alive_per_cluster.iter().flatten().collect();
        for instance in instances {
            deleted.extend(self.prune_departed_services(namespace, instance).await?);
        }
        for (cluster, alive) in self.clusters.iter().zip(&alive_per_cluster) {
            deleted.extend(delete_orphans::<Service>(cluster, namespace, alive).await?);
            deleted.extend(delete_orphans::<ConfigMap>(cluster, namespace, alive).await?);
            deleted.extend(delete_orphans::<Secret>(cluster, namespace, alive).await?);
        }
        Ok(deleted)
    }

    /// Runs [`ControlPlane::reconcile_all`] every second, forever (the
    /// continuous part of the control plane). `report` hears what it deleted.
    pub async fn run(self, namespace: String, report: impl Fn(&str)) {
        loop {
            match self.reconcile_all(&namespace).await {
                Ok(deleted) => deleted.iter().for_each(|d| report(d)),
                Err(error) => tracing::warn!(%error, "control plane pass failed"),
            }
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        }
    }

    /// Deletes the `MongoDB` object in every cluster (the operators then take
    /// their members out of the set and drop their finalizers).
    pub async fn delete(&self, namespace: &str, name: &str) -> Result<()> {
        for cluster in &self.clusters {
            match self
                .mongodb_api(cluster, namespace)
                .delete(name, &DeleteParams::default())
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(error) => {
                    return Err(error).with_context(|| {
                        format!("deleting MongoDB {name} in cluster {}", cluster.name)
                    })
                }
            }
        }
        Ok(())
    }

    /// The `MongoDB` object of each cluster that holds one.
    pub async fn statuses(&self, namespace: &str, name: &str) -> Result<Vec<(String, MongoDB)>> {
        let mut found = Vec::new();
        for cluster in &self.clusters {
            if let Some(mongodb) = self.mongodb_api(cluster, namespace).get_opt(name).await? {
                found.push((cluster.name.clone(), mongodb));
            }
        }
        Ok(found)
    }

    fn mongodb_api(&self, cluster: &MemberCluster, namespace: &str) -> Api<MongoDB> {
        Api::namespaced(cluster.client.clone(), namespace)
    }
}

/// Deletes the objects of kind `K` the stand-in propagated for instances that no
/// longer have a `MongoDB` in `cluster`; returns `cluster/Kind/name` of each.
async fn delete_orphans<K>(
    cluster: &MemberCluster,
    namespace: &str,
    alive: &BTreeSet<String>,
) -> Result<Vec<String>>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let api = Api::<K>::namespaced(cluster.client.clone(), namespace);
    let propagated =
        ListParams::default().labels(&format!("{PROPAGATED_BY_LABEL}={FIELD_MANAGER}"));
    let mut deleted = Vec::new();
    for object in api.list(&propagated).await? {
        if object
            .labels()
            .get(INSTANCE_LABEL)
            .is_some_and(|instance| !alive.contains(instance))
        {
            api.delete(&object.name_any(), &DeleteParams::default())
                .await?;
            deleted.push(format!(
                "{}/{}/{}",
                cluster.name,
                K::kind(&()),
                object.name_any()
            ));
        }
    }
    Ok(deleted)
}

/// `<name>-mongodb-<index>`.
pub fn member_service_name(instance: &str, index: u32) -> String {
    format!("{instance}-mongodb-{index}")
}

fn member_index(instance: &str, service_name: &str) -> Option<u32> {
    service_name
        .strip_prefix(&format!("{instance}-mongodb-"))?
        .parse()
        .ok()
}

/// Label marking what the stand-in propagated.
pub const PROPAGATED_BY_LABEL: &str = "app.kubernetes.io/managed-by";

fn instance_selector(instance: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(INSTANCE_LABEL.to_string(), instance.to_string())])
}

/// Labels of every object the stand-in propagates.
fn instance_labels(instance: &str) -> BTreeMap<String, String> {
    let mut labels = instance_selector(instance);
    labels.insert(PROPAGATED_BY_LABEL.to_string(), FIELD_MANAGER.to_string());
    labels
}

fn member_service(request: &InstanceRequest, index: u32, node_port: Option<i32>) -> Service {
    let service_name = member_service_name(&request.name, index);
    let mut selector = instance_selector(&request.name);
    selector.insert("app".to_string(), service_name.clone());
    let mut labels = instance_labels(&request.name);
    labels.insert("app".to_string(), service_name.clone());
    Service {
        metadata: ObjectMeta {
            name: Some(service_name),
            namespace: Some(request.namespace.clone()),
            labels: Some(labels),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("NodePort".to_string()),
            selector: Some(selector),
            ports: Some(vec![ServicePort {
                name: Some("mongo".to_string()),
                port: MONGO_PORT,
                target_port: Some(IntOrString::Int(MONGO_PORT)),
                node_port,
                protocol: Some("TCP".to_string()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn node_port_of(service: &Service) -> Option<i32> {
    service.spec.as_ref()?.ports.as_ref()?.first()?.node_port
}

/// A fresh keyfile (756 base64 characters) and root user.
fn generate_credentials() -> BTreeMap<String, ByteString> {
    let mut rng = rand::rng();
    let key_bytes: Vec<u8> = (0..567)
        .map(|_| rand::Rng::random::<u8>(&mut rng))
        .collect();
    let keyfile = base64::engine::general_purpose::STANDARD.encode(key_bytes);
    let password = Alphanumeric.sample_string(&mut rng, 24);
    BTreeMap::from([
        ("keyfile".to_string(), ByteString(keyfile.into_bytes())),
        ("username".to_string(), ByteString(b"root".to_vec())),
        ("password".to_string(), ByteString(password.into_bytes())),
    ])
}

async fn server_side_apply<K>(api: Api<K>, name: &str, object: &K) -> Result<()>
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(object),
    )
    .await
    .with_context(|| format!("applying {name}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_parses_counts_per_cluster() {
        let split = Split::parse("a=2, b=2,c=1").unwrap();
        assert_eq!(split.members_of("a"), 2);
        assert_eq!(split.members_of("c"), 1);
        assert_eq!(split.members_of("d"), 0);
        assert_eq!(split.total(), 5);
    }

    #[test]
    fn split_refuses_malformed_entries() {
        assert!(Split::parse("").is_err());
        assert!(Split::parse("a").is_err());
        assert!(Split::parse("a=x").is_err());
        assert!(Split::parse("a=1,a=2").is_err());
    }

    #[test]
    fn member_index_reads_only_this_instances_services() {
        assert_eq!(member_index("demo", "demo-mongodb-3"), Some(3));
        assert_eq!(member_index("demo", "demo-mongodb-arbiter"), None);
        assert_eq!(member_index("demo", "other-mongodb-1"), None);
    }

    #[test]
    fn generated_keyfile_is_valid_for_mongod() {
        let data = generate_credentials();
        let keyfile = String::from_utf8(data["keyfile"].0.clone()).unwrap();
        assert!((6..=1024).contains(&keyfile.len()));
        assert!(keyfile
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '/' || c == '='));
    }
}
