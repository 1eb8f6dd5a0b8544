//! The simulated kubelet, StatefulSet controller and kube-proxy against the
//! real API server simulator, over HTTP through kube-rs, as the lab runs them.
//! Containers run in an echo runtime: each container port answers a line
//! naming the pod, then echoes what it receives.
//!
//! This file holds the echo runtime and the test bench (an API server
//! simulator, the cluster simulator against it, and helpers to create objects
//! and greet pods); the tests are in [`stateful_sets`], [`node_ports`],
//! [`kubelet`], [`volumes`] and [`deployments`].

mod deployments;
mod kubelet;
mod node_ports;
mod stateful_sets;
mod volumes;

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
/// `<pod> <pod uid> <container>` and then echo. Init containers exit 0 at once;
/// a container whose command is `false` exits 1 at once.
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
            } else if container.command.first().map(String::as_str) == Some("false") {
                exited.send_replace(Some(ContainerExit { exit_code: 1 }));
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
        Bench::start_with(octet, |_| {}).await
    }

    /// [`Bench::start`], with the cluster options changed by `configure` first.
    async fn start_with(octet: u8, configure: impl FnOnce(&mut ClusterOptions)) -> Bench {
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
        configure(&mut options);
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
    eventually_within(DEADLINE, what, condition).await
}

/// Polls `condition` until it holds, failing the test after `patience`.
async fn eventually_within<F, Fut>(patience: Duration, what: &str, condition: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + patience;
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
