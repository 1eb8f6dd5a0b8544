//! The simulated kubelet, StatefulSet controller and kube-proxy against the
//! real API server simulator, over HTTP through kube-rs, as the lab runs them.
//! Containers run in an echo runtime: each container port answers a line
//! naming the pod, then echoes what it receives.

use std::collections::BTreeMap;
use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use apiserver_sim::{ApiServer, ApiServerHandle, InjectedError};
use cluster_sim::{
    BoxFuture, ClusterOptions, ClusterSim, ClusterSimHandle, ContainerExit, ContainerRuntime,
    Ipv4Prefix, ResolvedContainer, ResolvedVolume, RestartBackoff, RunningContainer,
};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Namespace, PersistentVolumeClaim, Pod, Secret, Service};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

const NS: &str = "sim";
const DEADLINE: Duration = Duration::from_secs(90);

// ---------------------------------------------------------------- echo runtime

/// Runs containers as TCP listeners on podIP:containerPort that greet with
/// `<pod> <pod uid> <container>` and then echo. Init containers exit 0 at once.
#[derive(Default)]
struct EchoRuntime {
    starts: Mutex<Vec<ResolvedContainer>>,
}

impl EchoRuntime {
    fn starts(&self) -> Vec<ResolvedContainer> {
        self.starts.lock().unwrap().clone()
    }
}

struct EchoContainer {
    tasks: Mutex<Vec<JoinHandle<()>>>,
    exited: watch::Sender<Option<ContainerExit>>,
}

impl ContainerRuntime for EchoRuntime {
    fn start(
        &self,
        container: ResolvedContainer,
    ) -> BoxFuture<'_, anyhow::Result<Box<dyn RunningContainer>>> {
        Box::pin(async move {
            self.starts.lock().unwrap().push(container.clone());
            let (exited, _) = watch::channel(None);
            let mut tasks = Vec::new();
            if container.init {
                exited.send_replace(Some(ContainerExit::SUCCESS));
            } else {
                for port in &container.ports {
                    let listener =
                        TcpListener::bind((container.pod_ip, port.container_port)).await?;
                    let greeting = format!(
                        "{} {} {}\n",
                        container.pod.name, container.pod.uid, container.name
                    );
                    tasks.push(tokio::spawn(echo(listener, greeting)));
                }
            }
            Ok(Box::new(EchoContainer {
                tasks: Mutex::new(tasks),
                exited,
            }) as Box<dyn RunningContainer>)
        })
    }
}

async fn echo(listener: TcpListener, greeting: String) {
    let mut connections = JoinSet::new();
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            continue;
        };
        let greeting = greeting.clone();
        connections.spawn(async move {
            if stream.write_all(greeting.as_bytes()).await.is_err() {
                return;
            }
            let mut buffer = [0u8; 1024];
            while let Ok(n) = stream.read(&mut buffer).await {
                if n == 0 || stream.write_all(&buffer[..n]).await.is_err() {
                    break;
                }
            }
        });
        while connections.try_join_next().is_some() {}
    }
}

impl RunningContainer for EchoContainer {
    fn wait(&self) -> BoxFuture<'_, ContainerExit> {
        let mut exited = self.exited.subscribe();
        Box::pin(async move {
            loop {
                if let Some(exit) = *exited.borrow_and_update() {
                    return exit;
                }
                if exited.changed().await.is_err() {
                    return ContainerExit::KILLED;
                }
            }
        })
    }

    fn stop(&self, grace: Duration) -> BoxFuture<'_, ContainerExit> {
        let tasks: Vec<JoinHandle<()>> = std::mem::take(&mut *self.tasks.lock().unwrap());
        Box::pin(async move {
            for task in tasks {
                task.abort();
                let _ = task.await;
            }
            let exit = if grace.is_zero() {
                ContainerExit::KILLED
            } else {
                ContainerExit::TERMINATED
            };
            self.exited
                .send_if_modified(|e| e.is_none() && e.replace(exit).is_none());
            self.exited.borrow().unwrap_or(exit)
        })
    }
}

impl Drop for EchoContainer {
    fn drop(&mut self) {
        for task in self.tasks.lock().unwrap().iter() {
            task.abort();
        }
    }
}

// ---------------------------------------------------------------- test bench

struct Bench {
    server: ApiServerHandle,
    client: Client,
    runtime: Arc<EchoRuntime>,
    cluster: Option<ClusterSimHandle>,
    vip: Ipv4Addr,
    prefix: Ipv4Prefix,
}

impl Bench {
    /// An API server and a cluster simulator with VIP 127.<octet>.0.1 and pods in 127.<octet>.1.0/24.
    async fn start(octet: u8) -> Bench {
        let server = ApiServer::start("127.0.0.1:0".parse().unwrap())
            .await
            .expect("API server starts");
        let config = kube::Config::new(server.url().parse().unwrap());
        let client = Client::try_from(config).expect("client");
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
        namespaces
            .create(&PostParams::default(), &namespace)
            .await
            .expect("namespace created");
        let runtime = Arc::new(EchoRuntime::default());
        let vip = Ipv4Addr::new(127, octet, 0, 1);
        let prefix = Ipv4Prefix::new(Ipv4Addr::new(127, octet, 1, 0), 24).unwrap();
        let mut options = ClusterOptions::new(format!("c{octet}"), vip, prefix, runtime.clone());
        options.restart_backoff = RestartBackoff {
            initial: Duration::from_millis(500),
            max: Duration::from_secs(2),
        };
        let cluster = ClusterSim::start(client.clone(), options)
            .await
            .expect("cluster simulator starts");
        Bench {
            server,
            client,
            runtime,
            cluster: Some(cluster),
            vip,
            prefix,
        }
    }

    /// A one-pod StatefulSet `demo-mongodb-0` behind a NodePort Service on
    /// `node_port`, Ready: the Service's front (`VIP:node_port`) and the pod's IP.
    async fn one_member_behind_node_port(&self, node_port: u16) -> (SocketAddr, Ipv4Addr) {
        create_secret(&self.client).await;
        self.create_set(mongo_set("demo-mongodb-0", 1, json!({})))
            .await;
        create_node_port(&self.client, "demo-mongodb-0", "demo-mongodb-0", node_port).await;
        self.wait_ready("demo-mongodb-0", 1).await;
        let front = SocketAddr::from((self.vip, node_port));
        let pod_ip = pod(self, "demo-mongodb-0-0")
            .await
            .status
            .unwrap()
            .pod_ip
            .unwrap()
            .parse()
            .unwrap();
        (front, pod_ip)
    }

    fn cluster(&self) -> &ClusterSimHandle {
        self.cluster.as_ref().expect("running")
    }

    async fn stop(mut self) {
        if let Some(cluster) = self.cluster.take() {
            cluster.shutdown().await;
        }
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), NS)
    }

    fn sets(&self) -> Api<StatefulSet> {
        Api::namespaced(self.client.clone(), NS)
    }

    fn claims(&self) -> Api<PersistentVolumeClaim> {
        Api::namespaced(self.client.clone(), NS)
    }

    async fn create_set(&self, set: serde_json::Value) {
        let set: StatefulSet = serde_json::from_value(set).unwrap();
        self.sets()
            .create(&PostParams::default(), &set)
            .await
            .expect("StatefulSet created");
    }

    async fn pod_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .pods()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .map(|p| p.name_any())
            .collect();
        names.sort();
        names
    }

    async fn claim_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .claims()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .map(|p| p.name_any())
            .collect();
        names.sort();
        names
    }

    async fn set_status(&self, name: &str) -> serde_json::Value {
        let set = self.sets().get(name).await.unwrap();
        serde_json::to_value(set.status.unwrap_or_default()).unwrap()
    }

    async fn wait_ready(&self, name: &str, replicas: i64) {
        eventually(&format!("{name} has {replicas} ready replicas"), || async {
            let status = self.set_status(name).await;
            let ready = status["readyReplicas"].as_i64().unwrap_or(0) == replicas
                && status["replicas"].as_i64() == Some(replicas);
            let converged = status["currentRevision"] == status["updateRevision"]
                && status["updatedReplicas"].as_i64() == Some(replicas);
            ready && converged
        })
        .await;
    }
}

/// Polls `condition` until it holds, failing the test after a generous deadline.
async fn eventually<F, Fut>(what: &str, condition: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !condition().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A StatefulSet whose pods listen on 27017 (named `mongo`), Ready by a TCP probe on it.
fn mongo_set(name: &str, replicas: i32, extra_spec: serde_json::Value) -> serde_json::Value {
    let mut set = json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name, "app.kubernetes.io/instance": "demo"}},
                "spec": {
                    "terminationGracePeriodSeconds": 2,
                    "initContainers": [{"name": "init", "image": "busybox:1.36"}],
                    "containers": [{
                        "name": "mongod", "image": "mongo:7.0",
                        "ports": [{"name": "mongo", "containerPort": 27017}],
                        "env": [
                            {"name": "MONGO_INITDB_ROOT_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}},
                            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                            {"name": "GREETING", "value": "hello $(POD_NAME)"}
                        ],
                        "volumeMounts": [{"name": "data", "mountPath": "/data/db"}, {"name": "keyfile", "mountPath": "/etc/keyfile"}],
                        "readinessProbe": {"tcpSocket": {"port": "mongo"}, "periodSeconds": 1, "failureThreshold": 1}
                    }],
                    "volumes": [{"name": "keyfile", "secret": {"secretName": "creds", "items": [{"key": "keyfile", "path": "key"}]}}]
                }
            },
            "volumeClaimTemplates": [{
                "metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
            }]
        }
    });
    if let (Some(spec), Some(extra)) = (set["spec"].as_object_mut(), extra_spec.as_object()) {
        spec.extend(extra.clone());
    }
    set
}

async fn create_secret(client: &Client) {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "creds", "namespace": NS},
        "stringData": {"password": "pa55word", "keyfile": "shared-keyfile"}
    }))
    .unwrap();
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .expect("secret created");
}

async fn create_node_port(client: &Client, name: &str, selector_app: &str, node_port: u16) {
    let services: Api<Service> = Api::namespaced(client.clone(), NS);
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "type": "NodePort",
            "selector": {"app.kubernetes.io/instance": "demo", "app": selector_app},
            "ports": [{"name": "mongo", "port": 27017, "targetPort": "mongo", "nodePort": node_port}]
        }
    }))
    .unwrap();
    services
        .create(&PostParams::default(), &service)
        .await
        .expect("service created");
}

/// Connects to `address`, reads the greeting, checks an echo round trip; the greeting.
async fn greet(address: SocketAddr) -> Option<String> {
    let stream = tokio::time::timeout(Duration::from_secs(3), TcpStream::connect(address))
        .await
        .ok()?
        .ok()?;
    greet_over(stream).await
}

/// Reads the echo container's greeting on `stream` and checks that bytes come
/// back unchanged.
async fn greet_over(stream: TcpStream) -> Option<String> {
    let mut stream = BufReader::new(stream);
    let mut greeting = String::new();
    tokio::time::timeout(Duration::from_secs(3), stream.read_line(&mut greeting))
        .await
        .ok()?
        .ok()?;
    if greeting.is_empty() {
        return None;
    }
    let payload = b"\x00\x01binary\xffpayload";
    stream.get_mut().write_all(payload).await.ok()?;
    let mut echoed = vec![0u8; payload.len()];
    tokio::time::timeout(Duration::from_secs(3), stream.read_exact(&mut echoed))
        .await
        .ok()?
        .ok()?;
    assert_eq!(&echoed, payload, "bytes cross the proxy unchanged");
    Some(greeting.trim_end().to_string())
}

/// [`greet`] over a connection whose source address is `from` (e.g. a pod's IP).
async fn greet_from(from: Ipv4Addr, address: SocketAddr) -> Option<String> {
    let socket = tokio::net::TcpSocket::new_v4().ok()?;
    socket.bind(SocketAddr::from((from, 0))).ok()?;
    let stream = tokio::time::timeout(Duration::from_secs(3), socket.connect(address))
        .await
        .ok()?
        .ok()?;
    greet_over(stream).await
}

async fn pod(bench: &Bench, name: &str) -> Pod {
    bench.pods().get(name).await.unwrap()
}

fn label<'a>(pod: &'a Pod, key: &str) -> &'a str {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
        .unwrap_or_default()
}

// ---------------------------------------------------------------- specification

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statefulset_gets_ordered_pods_with_claims_resolved_config_and_ready_status() {
    let bench = Bench::start(61).await;
    create_secret(&bench.client).await;
    bench.create_set(mongo_set("db", 3, json!({}))).await;
    bench.wait_ready("db", 3).await;

    assert_eq!(bench.pod_names().await, ["db-0", "db-1", "db-2"]);
    assert_eq!(
        bench.claim_names().await,
        ["data-db-0", "data-db-1", "data-db-2"]
    );
    let set = bench.sets().get("db").await.unwrap();
    let status = bench.set_status("db").await;
    assert_eq!(
        status["observedGeneration"].as_i64(),
        set.metadata.generation
    );
    assert_eq!(status["availableReplicas"].as_i64(), Some(3));
    assert_eq!(status["currentReplicas"].as_i64(), Some(3));

    for ordinal in 0..3 {
        let name = format!("db-{ordinal}");
        let pod = pod(&bench, &name).await;
        assert_eq!(label(&pod, "statefulset.kubernetes.io/pod-name"), name);
        assert_eq!(
            label(&pod, "apps.kubernetes.io/pod-index"),
            ordinal.to_string()
        );
        assert_eq!(
            label(&pod, "controller-revision-hash"),
            status["updateRevision"].as_str().unwrap()
        );
        let owner = &pod.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.controller),
            ("StatefulSet", "db", Some(true))
        );
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.node_name.as_deref(), Some(bench.cluster().node_name()));
        let pod_status = pod.status.as_ref().unwrap();
        assert_eq!(pod_status.phase.as_deref(), Some("Running"));
        let ip: Ipv4Addr = pod_status.pod_ip.as_deref().unwrap().parse().unwrap();
        assert!(
            bench.prefix.contains(ip) && ip != bench.vip,
            "{ip} is a pod address of this cluster"
        );
        assert_eq!(
            pod_status.host_ip.as_deref(),
            Some(bench.vip.to_string().as_str())
        );
        let conditions: BTreeMap<&str, &str> = pod_status
            .conditions
            .iter()
            .flatten()
            .map(|c| (c.type_.as_str(), c.status.as_str()))
            .collect();
        for type_ in ["PodScheduled", "Initialized", "ContainersReady", "Ready"] {
            assert_eq!(
                conditions.get(type_),
                Some(&"True"),
                "{name} condition {type_}"
            );
        }
        let container = &pod_status.container_statuses.as_ref().unwrap()[0];
        assert!(container.ready && container.state.as_ref().unwrap().running.is_some());
        let init = &pod_status.init_container_statuses.as_ref().unwrap()[0];
        assert_eq!(
            init.state
                .as_ref()
                .unwrap()
                .terminated
                .as_ref()
                .unwrap()
                .reason
                .as_deref(),
            Some("Completed")
        );
        let claim = bench
            .claims()
            .get(&format!("data-db-{ordinal}"))
            .await
            .unwrap();
        assert_eq!(claim.status.unwrap().phase.as_deref(), Some("Bound"));
    }

    let starts = bench.runtime.starts();
    let order: Vec<(String, String)> = starts
        .iter()
        .map(|c| (c.pod.name.clone(), c.name.clone()))
        .collect();
    let expected: Vec<(String, String)> = (0..3)
        .flat_map(|o| {
            [
                (format!("db-{o}"), "init".to_string()),
                (format!("db-{o}"), "mongod".to_string()),
            ]
        })
        .collect();
    assert_eq!(
        order, expected,
        "init containers first, and each pod only once its predecessor is Ready"
    );
    let mongod = starts
        .iter()
        .find(|c| c.pod.name == "db-1" && c.name == "mongod")
        .unwrap();
    assert_eq!(
        mongod.env_value("MONGO_INITDB_ROOT_PASSWORD"),
        Some("pa55word")
    );
    assert_eq!(mongod.env_value("GREETING"), Some("hello db-1"));
    let claim = mongod
        .persistent_volume_claim()
        .expect("the claim is mounted");
    assert_eq!(claim.claim_name, "data-db-1");
    assert_eq!(
        Some(claim.claim_uid.clone()),
        bench.claims().get("data-db-1").await.unwrap().uid()
    );
    let keyfile = mongod
        .mounts
        .iter()
        .find(|m| m.mount_path == "/etc/keyfile")
        .unwrap();
    match &keyfile.volume {
        ResolvedVolume::Secret { files, .. } => assert_eq!(
            files.get("key").map(Vec::as_slice),
            Some(&b"shared-keyfile"[..])
        ),
        other => panic!("keyfile volume resolved as {other:?}"),
    }

    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(bench.client.clone());
    let node = nodes
        .get(bench.cluster().node_name())
        .await
        .expect("the kubelet registered its node");
    let node_status = node.status.unwrap();
    assert!(node_status
        .conditions
        .unwrap()
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True"));
    assert_eq!(
        node_status.addresses.unwrap()[0].address,
        bench.vip.to_string()
    );

    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(bench.client.clone(), NS);
    eventually("the kubelet and scheduler recorded events", || async {
        let reasons: Vec<String> = events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|e| e.reason)
            .collect();
        [
            "Scheduled",
            "Pulled",
            "Created",
            "Started",
            "SuccessfulCreate",
        ]
        .iter()
        .all(|r| reasons.iter().any(|x| x == r))
    })
    .await;
    bench.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_ready_waits_for_readiness_while_parallel_creates_every_pod() {
    let bench = Bench::start(62).await;
    create_secret(&bench.client).await;
    let never_ready = |name: &str, policy: &str| {
        let mut set = mongo_set(name, 3, json!({"podManagementPolicy": policy}));
        set["spec"]["template"]["spec"]["containers"][0]["readinessProbe"] =
            json!({"tcpSocket": {"port": 1}, "periodSeconds": 1});
        set
    };
    bench
        .create_set(never_ready("ordered", "OrderedReady"))
        .await;
    bench.create_set(never_ready("parallel", "Parallel")).await;
    eventually("all Parallel pods run", || async {
        let names = bench.pod_names().await;
        ["parallel-0", "parallel-1", "parallel-2"]
            .iter()
            .all(|n| names.iter().any(|x| x == n))
    })
    .await;
    eventually("ordered-0 runs unready", || async {
        bench
            .pods()
            .get_opt("ordered-0")
            .await
            .unwrap()
            .is_some_and(|p| p.status.and_then(|s| s.phase).as_deref() == Some("Running"))
    })
    .await;
    // The OrderedReady set must not have created its second pod meanwhile; re-check after the Parallel set settled.
    eventually("the parallel set reports 3 replicas", || async {
        bench.set_status("parallel").await["replicas"].as_i64() == Some(3)
    })
    .await;
    let names = bench.pod_names().await;
    assert!(
        !names.iter().any(|n| n == "ordered-1"),
        "ordered-1 must wait for ordered-0 to be Ready: {names:?}"
    );
    assert_eq!(
        bench.set_status("ordered").await["readyReplicas"]
            .as_i64()
            .unwrap_or(0),
        0
    );
    bench.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaling_down_removes_the_highest_ordinals_and_keeps_their_claims_by_default() {
    let bench = Bench::start(63).await;
    create_secret(&bench.client).await;
    bench.create_set(mongo_set("db", 3, json!({}))).await;
    bench.wait_ready("db", 3).await;
    let claim_uid = bench.claims().get("data-db-2").await.unwrap().uid();

    bench
        .sets()
        .patch(
            "db",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 1}})),
        )
        .await
        .unwrap();
    eventually("only db-0 remains", || async {
        bench.pod_names().await == ["db-0"]
    })
    .await;
    bench.wait_ready("db", 1).await;
    assert_eq!(
        bench.claim_names().await,
        ["data-db-0", "data-db-1", "data-db-2"],
        "claims are retained"
    );

    bench
        .sets()
        .patch(
            "db",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    bench.wait_ready("db", 3).await;
    let restarted = bench
        .runtime
        .starts()
        .into_iter()
        .rev()
        .find(|c| c.pod.name == "db-2" && c.name == "mongod")
        .unwrap();
    assert_eq!(
        Some(
            restarted
                .persistent_volume_claim()
                .unwrap()
                .claim_uid
                .clone()
        ),
        claim_uid,
        "db-2 gets its old claim back"
    );
    bench.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_are_deleted_when_the_retention_policy_says_delete() {
    let bench = Bench::start(64).await;
    create_secret(&bench.client).await;
    let policy = json!({"persistentVolumeClaimRetentionPolicy": {"whenScaled": "Delete", "whenDeleted": "Delete"}});
    bench.create_set(mongo_set("db", 2, policy)).await;
    bench.wait_ready("db", 2).await;

    bench
        .sets()
        .patch(
            "db",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 1}})),
        )
        .await
        .unwrap();
    eventually("the scaled-down claim is garbage collected", || async {
        bench.claim_names().await == ["data-db-0"]
    })
    .await;

    bench
        .sets()
        .delete("db", &DeleteParams::default())
        .await
        .unwrap();
    eventually("pods and claims go with the StatefulSet", || async {
        bench.pod_names().await.is_empty() && bench.claim_names().await.is_empty()
    })
    .await;
    bench.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_deleted_under_a_running_pod_is_not_made_again() {
    // Kubernetes' processReplica makes missing claims for a pending pod only.
    let bench = Bench::start(73).await;
    create_secret(&bench.client).await;
    bench.create_set(mongo_set("db", 1, json!({}))).await;
    bench.wait_ready("db", 1).await;
    bench
        .claims()
        .delete("data-db-0", &DeleteParams::default())
        .await
        .unwrap();
    // Scaling up makes the controller sync the set (and db-0) again.
    bench
        .sets()
        .patch(
            "db",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 2}})),
        )
        .await
        .unwrap();
    bench.wait_ready("db", 2).await;
    assert_eq!(
        bench.claim_names().await,
        ["data-db-1"],
        "db-1 got its claim; running db-0's deleted one was not made again"
    );
    bench.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_update_replaces_pods_from_the_highest_ordinal_one_at_a_time() {
    let bench = Bench::start(65).await;
    create_secret(&bench.client).await;
    bench.create_set(mongo_set("db", 3, json!({}))).await;
    bench.wait_ready("db", 3).await;
    let old_revision = bench.set_status("db").await["updateRevision"].clone();
    let before = bench.runtime.starts().len();

    let patch =
        json!({"spec": {"template": {"metadata": {"annotations": {"restartedAt": "now"}}}}});
    bench
        .sets()
        .patch("db", &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap();
    eventually("the update revision changes", || async {
        bench.set_status("db").await["updateRevision"] != old_revision
    })
    .await;
    bench.wait_ready("db", 3).await;

    let restarted: Vec<String> = bench.runtime.starts()[before..]
        .iter()
        .filter(|c| c.name == "mongod")
        .map(|c| c.pod.name.clone())
        .collect();
    assert_eq!(restarted, ["db-2", "db-1", "db-0"]);
    let status = bench.set_status("db").await;
    assert_eq!(status["currentRevision"], status["updateRevision"]);
    for name in ["db-0", "db-1", "db-2"] {
        assert_eq!(
            label(&pod(&bench, name).await, "controller-revision-hash"),
            status["updateRevision"].as_str().unwrap()
        );
    }
    bench.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_port_carries_bytes_to_the_ready_pod_and_follows_it_when_replaced() {
    let bench = Bench::start(66).await;
    create_secret(&bench.client).await;
    bench
        .create_set(mongo_set("demo-mongodb-0", 1, json!({})))
        .await;
    create_node_port(&bench.client, "demo-mongodb-0", "demo-mongodb-0", 30017).await;
    bench.wait_ready("demo-mongodb-0", 1).await;
    let front = SocketAddr::from((bench.vip, 30017));

    let first = pod(&bench, "demo-mongodb-0-0").await;
    let first_uid = first.uid().unwrap();
    let first_ip: Ipv4Addr = first
        .status
        .as_ref()
        .unwrap()
        .pod_ip
        .as_deref()
        .unwrap()
        .parse()
        .unwrap();
    let routes = bench.cluster().routes();
    let expected = Some(SocketAddr::from((first_ip, 27017)));
    eventually("the route names the pod", || async {
        routes.borrow().get(&front).copied() == Some(expected)
    })
    .await;
    eventually("the nodePort answers from the pod", || async {
        greet(front).await.is_some_and(|g| g.contains(&first_uid))
    })
    .await;
    let endpoints: Api<k8s_openapi::api::core::v1::Endpoints> =
        Api::namespaced(bench.client.clone(), NS);
    eventually("the Service's Endpoints list the pod", || async {
        let found = endpoints.get_opt("demo-mongodb-0").await.unwrap();
        let subset = found
            .and_then(|e| e.subsets)
            .and_then(|s| s.into_iter().next());
        subset.is_some_and(|s| {
            s.addresses
                .is_some_and(|a| a.len() == 1 && a[0].ip == first_ip.to_string())
                && s.ports.is_some_and(|p| p.len() == 1 && p[0].port == 27017)
        })
    })
    .await;

    bench
        .pods()
        .delete("demo-mongodb-0-0", &DeleteParams::default())
        .await
        .unwrap();
    eventually("a replacement pod is Ready", || async {
        let pod = bench.pods().get_opt("demo-mongodb-0-0").await.unwrap();
        pod.is_some_and(|p| {
            p.uid() != Some(first_uid.clone())
                && p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
    })
    .await;
    let second = pod(&bench, "demo-mongodb-0-0").await;
    let second_uid = second.uid().unwrap();
    eventually("new connections reach the replacement", || async {
        greet(front).await.is_some_and(|g| g.contains(&second_uid))
    })
    .await;
    bench.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cutting_the_vip_refuses_connections_until_healed() {
    let bench = Bench::start(67).await;
    create_secret(&bench.client).await;
    bench
        .create_set(mongo_set("demo-mongodb-0", 1, json!({})))
        .await;
    create_node_port(&bench.client, "demo-mongodb-0", "demo-mongodb-0", 30018).await;
    bench.wait_ready("demo-mongodb-0", 1).await;
    let front = SocketAddr::from((bench.vip, 30018));
    eventually("the nodePort answers", || async {
        greet(front).await.is_some()
    })
    .await;

    bench.cluster().cut_vip();
    eventually("connections to the VIP are refused", || async {
        TcpStream::connect(front).await.is_err()
    })
    .await;
    let pod_ip = pod(&bench, "demo-mongodb-0-0")
        .await
        .status
        .unwrap()
        .pod_ip
        .unwrap();
    assert!(
        greet(SocketAddr::from((
            pod_ip.parse::<Ipv4Addr>().unwrap(),
            27017
        )))
        .await
        .is_some(),
        "the pod itself keeps running"
    );

    bench.cluster().heal();
    eventually("the nodePort answers again", || async {
        greet(front).await.is_some()
    })
    .await;
    bench.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_hairpin_a_pod_cannot_reach_itself_through_its_node_port() {
    let bench = Bench::start(116).await;
    let (front, pod_ip) = bench.one_member_behind_node_port(30019).await;
    let other = Ipv4Addr::new(127, 116, 2, 1);
    eventually("the pod reaches itself through its nodePort", || async {
        greet_from(pod_ip, front).await.is_some()
    })
    .await;

    bench.cluster().set_hairpin(false);
    eventually("the pod's own connections are reset", || async {
        greet_from(pod_ip, front).await.is_none()
    })
    .await;
    assert!(
        greet_from(other, front).await.is_some(),
        "other clients still reach the pod"
    );
    bench.cluster().heal();
    assert!(
        greet_from(pod_ip, front).await.is_none(),
        "heal keeps the cluster's hairpin setting"
    );
    bench.cluster().set_hairpin(true);
    eventually("hairpin again", || async {
        greet_from(pod_ip, front).await.is_some()
    })
    .await;
    bench.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_container_restarts_and_counts_the_restart() {
    let bench = Bench::start(68).await;
    create_secret(&bench.client).await;
    bench.create_set(mongo_set("db", 1, json!({}))).await;
    bench.wait_ready("db", 1).await;

    bench
        .cluster()
        .kill_container(NS, "db-0", "mongod")
        .await
        .expect("the container is killed");
    eventually("the container restarted and is Ready again", || async {
        let status = pod(&bench, "db-0").await.status.unwrap();
        let container = &status.container_statuses.unwrap()[0];
        let last_exit = container
            .last_state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .map(|t| t.exit_code);
        container.restart_count == 1 && container.ready && last_exit == Some(137)
    })
    .await;
    assert!(bench
        .cluster()
        .kill_container(NS, "db-0", "nope")
        .await
        .is_err());
    assert!(bench
        .cluster()
        .kill_container(NS, "absent", "mongod")
        .await
        .is_err());
    bench.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_cluster_stops_its_containers_and_healing_restarts_them_at_the_same_address() {
    let bench = Bench::start(69).await;
    let (front, pod_ip) = bench.one_member_behind_node_port(30019).await;
    let direct = SocketAddr::from((pod_ip, 27017));
    eventually("the nodePort answers", || async {
        greet(front).await.is_some()
    })
    .await;

    bench.cluster().lose_cluster();
    eventually("nothing answers, neither the VIP nor the pod", || async {
        TcpStream::connect(front).await.is_err() && TcpStream::connect(direct).await.is_err()
    })
    .await;

    bench.cluster().heal();
    eventually(
        "the pod answers again at its old address and through the VIP",
        || async { greet(direct).await.is_some() && greet(front).await.is_some() },
    )
    .await;
    bench.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_waits_with_a_config_error_until_its_secret_exists() {
    let bench = Bench::start(70).await;
    bench.create_set(mongo_set("db", 1, json!({}))).await;
    eventually(
        "the container waits with CreateContainerConfigError",
        || async {
            let pod = bench.pods().get_opt("db-0").await.unwrap();
            let waiting = pod
                .and_then(|p| p.status)
                .and_then(|s| s.container_statuses)
                .and_then(|cs| cs.into_iter().next())
                .and_then(|c| c.state)
                .and_then(|s| s.waiting);
            waiting.is_some_and(|w| {
                w.reason.as_deref() == Some("CreateContainerConfigError")
                    && w.message.is_some_and(|m| m.contains("creds"))
            })
        },
    )
    .await;
    assert!(
        bench.runtime.starts().iter().all(|c| c.init),
        "the main container never started without its Secret"
    );
    create_secret(&bench.client).await;
    bench.wait_ready("db", 1).await;
    bench.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_liveness_probe_restarts_a_plain_pods_container() {
    let bench = Bench::start(71).await;
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "lonely", "namespace": NS},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "server", "image": "mongo:7.0",
                "ports": [{"name": "mongo", "containerPort": 27017}],
                "livenessProbe": {"tcpSocket": {"port": 27018}, "periodSeconds": 1, "failureThreshold": 1}
            }]
        }
    }))
    .unwrap();
    bench
        .pods()
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();
    eventually(
        "the container was restarted for failing its liveness probe",
        || async {
            let status = bench
                .pods()
                .get("lonely")
                .await
                .unwrap()
                .status
                .unwrap_or_default();
            status
                .container_statuses
                .is_some_and(|cs| cs[0].restart_count >= 1)
        },
    )
    .await;
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(bench.client.clone(), NS);
    eventually("Unhealthy and Killing events were recorded", || async {
        let reasons: Vec<String> = events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|e| e.reason)
            .collect();
        reasons.iter().any(|r| r == "Unhealthy") && reasons.iter().any(|r| r == "Killing")
    })
    .await;
    bench.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_start_and_status_converges_through_api_errors_and_dropped_watches() {
    let bench = Bench::start(72).await;
    create_secret(&bench.client).await;
    bench
        .server
        .faults()
        .fail_share(0.2, InjectedError::Internal);
    let set: StatefulSet = serde_json::from_value(mongo_set("db", 2, json!({}))).unwrap();
    eventually("the StatefulSet is created despite errors", || async {
        bench
            .sets()
            .create(&PostParams::default(), &set)
            .await
            .is_ok()
            || bench.sets().get("db").await.is_ok()
    })
    .await;
    bench.server.faults().drop_watches();
    eventually(
        "both replicas are reported ready despite errors",
        || async {
            let status = bench.sets().get("db").await.ok().and_then(|s| s.status);
            status.is_some_and(|s| s.ready_replicas == Some(2))
        },
    )
    .await;
    bench.server.faults().clear();
    assert!(
        bench.server.faults().injected_count() > 0,
        "errors were injected"
    );
    assert_eq!(bench.pod_names().await, ["db-0", "db-1"]);
    bench.stop().await;
}
