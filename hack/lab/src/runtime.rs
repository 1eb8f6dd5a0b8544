//! The lab's container runtime: runs a pod's `mongod` container as a mongod-sim
//! member, with the durable state of the pod's PersistentVolumeClaim.
//!
//! - A container whose arguments carry `--replSet` is mongod: it listens on the
//!   pod IP and port `--port` (27017 by default), reads its keyfile from the file
//!   `--keyFile` names, and creates the root user from
//!   `MONGO_INITDB_ROOT_USERNAME` / `_PASSWORD` when its data is empty (what the
//!   official image's entrypoint does). Its data lives with the PVC's uid: a
//!   restarted pod resumes it, a new PVC starts empty.
//! - Init containers cannot run shell scripts here. They are emulated by what
//!   the member pods' init container does: every file of a Secret volume it
//!   mounts is copied into the emptyDir volumes it mounts writable.
//! - Any other container (the metrics exporter) runs idle until stopped.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use kubelet_sim::{
    BoxFuture, ContainerExit, ContainerRuntime, ResolvedContainer, ResolvedVolume, RunningContainer,
};
use mongod_sim::{MemberSpec, Network, RootUser, Volume};
use tokio::sync::watch;

/// Files of one emptyDir, by path relative to the volume.
type DirFiles = BTreeMap<String, Vec<u8>>;

/// Runs the containers of one simulated cluster.
pub struct MongodRuntime {
    network: Arc<Network>,
    site: String,
    volumes: Mutex<BTreeMap<String, Volume>>,
    empty_dirs: Mutex<BTreeMap<(String, String), DirFiles>>,
}

impl MongodRuntime {
    /// A runtime starting members on `network`, tagged with the cluster's `site`
    /// (so a whole cluster can be cut off).
    pub fn new(network: Arc<Network>, site: impl Into<String>) -> Self {
        MongodRuntime {
            network,
            site: site.into(),
            volumes: Mutex::default(),
            empty_dirs: Mutex::default(),
        }
    }

    fn volume_of(&self, container: &ResolvedContainer) -> Volume {
        match container.persistent_volume_claim() {
            Some(claim) => self
                .volumes
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(claim.claim_uid.clone())
                .or_default()
                .clone(),
            None => Volume::new(),
        }
    }

    fn run_init(&self, container: &ResolvedContainer) -> Box<dyn RunningContainer> {
        let mut files = DirFiles::new();
        for mount in &container.mounts {
            if let ResolvedVolume::Secret {
                files: secret_files,
                ..
            } = &mount.volume
            {
                files.extend(secret_files.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
        }
        let mut dirs = self.empty_dirs.lock().unwrap_or_else(|p| p.into_inner());
        for mount in container
            .mounts
            .iter()
            .filter(|m| matches!(m.volume, ResolvedVolume::EmptyDir) && !m.read_only)
        {
            dirs.entry((container.pod.uid.clone(), mount.volume_name.clone()))
                .or_default()
                .extend(files.clone());
        }
        Box::new(Exited)
    }

    /// The content of the file at `path` as the container sees it.
    fn read_file(&self, container: &ResolvedContainer, path: &str) -> Option<Vec<u8>> {
        let mount = container
            .mounts
            .iter()
            .filter(|m| path.starts_with(&m.mount_path))
            .max_by_key(|m| m.mount_path.len())?;
        let relative = path[mount.mount_path.len()..].trim_start_matches('/');
        match &mount.volume {
            ResolvedVolume::Secret { files, .. } | ResolvedVolume::ConfigMap { files, .. } => {
                files.get(relative).cloned()
            }
            ResolvedVolume::EmptyDir => {
                let dirs = self.empty_dirs.lock().unwrap_or_else(|p| p.into_inner());
                dirs.get(&(container.pod.uid.clone(), mount.volume_name.clone()))?
                    .get(relative)
                    .cloned()
            }
            _ => None,
        }
    }

    async fn run_mongod(
        &self,
        container: &ResolvedContainer,
    ) -> anyhow::Result<Box<dyn RunningContainer>> {
        let args: Vec<&str> = container
            .command
            .iter()
            .chain(&container.args)
            .map(String::as_str)
            .collect();
        let flag = |name: &str| {
            args.iter()
                .position(|a| *a == name)
                .and_then(|i| args.get(i + 1))
                .copied()
        };
        let repl_set = flag("--replSet").ok_or_else(|| anyhow!("mongod without --replSet"))?;
        let port: u16 = flag("--port")
            .unwrap_or("27017")
            .parse()
            .context("--port")?;
        let keyfile = match flag("--keyFile") {
            Some(path) => {
                let bytes = self
                    .read_file(container, path)
                    .ok_or_else(|| anyhow!("keyfile {path} does not exist in the container"))?;
                Some(String::from_utf8(bytes).context("keyfile is not text")?)
            }
            None => None,
        };
        let root_user = match (
            container.env_value("MONGO_INITDB_ROOT_USERNAME"),
            container.env_value("MONGO_INITDB_ROOT_PASSWORD"),
        ) {
            (Some(name), Some(password)) => Some(RootUser {
                username: name.to_string(),
                password: password.to_string(),
            }),
            _ => None,
        };
        let listen = SocketAddr::from((container.pod_ip, port));
        let spec = MemberSpec {
            listen,
            repl_set: repl_set.to_string(),
            keyfile,
            root_user,
        };
        let volume = self.volume_of(container);
        self.network
            .start_member(spec, volume)
            .await
            .with_context(|| format!("starting mongod on {listen}"))?;
        self.network.set_site(&listen.to_string(), &self.site);
        let (exited, _) = watch::channel(None);
        Ok(Box::new(MongodContainer {
            network: self.network.clone(),
            listen: listen.to_string(),
            exited: Arc::new(exited),
        }))
    }
}

impl ContainerRuntime for MongodRuntime {
    fn start(
        &self,
        container: ResolvedContainer,
    ) -> BoxFuture<'_, anyhow::Result<Box<dyn RunningContainer>>> {
        Box::pin(async move {
            if container.init {
                return Ok(self.run_init(&container));
            }
            let is_mongod = container
                .command
                .iter()
                .chain(&container.args)
                .any(|a| a == "--replSet");
            if is_mongod {
                return self.run_mongod(&container).await;
            }
            if container.image.is_empty() {
                bail!("container {} has no image", container.name);
            }
            let (exited, _) = watch::channel(None);
            Ok(Box::new(IdleContainer {
                exited: Arc::new(exited),
            }) as Box<dyn RunningContainer>)
        })
    }
}

/// An init container that already completed.
struct Exited;

impl RunningContainer for Exited {
    fn wait(&self) -> BoxFuture<'_, ContainerExit> {
        Box::pin(async { ContainerExit::SUCCESS })
    }
    fn stop(&self, _grace: Duration) -> BoxFuture<'_, ContainerExit> {
        Box::pin(async { ContainerExit::SUCCESS })
    }
}

/// A mongod-sim member running as a container.
struct MongodContainer {
    network: Arc<Network>,
    listen: String,
    exited: Arc<watch::Sender<Option<ContainerExit>>>,
}

impl RunningContainer for MongodContainer {
    fn wait(&self) -> BoxFuture<'_, ContainerExit> {
        let mut exited = self.exited.subscribe();
        let network = self.network.clone();
        let listen = self.listen.clone();
        Box::pin(async move {
            loop {
                if let Some(exit) = *exited.borrow() {
                    return exit;
                }
                if network.member(&listen).is_none() {
                    return ContainerExit::KILLED;
                }
                tokio::select! {
                    _ = exited.changed() => {}
                    _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                }
            }
        })
    }

    fn stop(&self, _grace: Duration) -> BoxFuture<'_, ContainerExit> {
        self.network.stop_member(&self.listen);
        self.exited.send_replace(Some(ContainerExit::TERMINATED));
        Box::pin(async { ContainerExit::TERMINATED })
    }
}

impl Drop for MongodContainer {
    fn drop(&mut self) {
        self.network.stop_member(&self.listen);
    }
}

/// A container with nothing to simulate: it runs until stopped.
struct IdleContainer {
    exited: Arc<watch::Sender<Option<ContainerExit>>>,
}

impl RunningContainer for IdleContainer {
    fn wait(&self) -> BoxFuture<'_, ContainerExit> {
        let mut exited = self.exited.subscribe();
        Box::pin(async move {
            loop {
                if let Some(exit) = *exited.borrow() {
                    return exit;
                }
                if exited.changed().await.is_err() {
                    return ContainerExit::KILLED;
                }
            }
        })
    }

    fn stop(&self, _grace: Duration) -> BoxFuture<'_, ContainerExit> {
        self.exited.send_replace(Some(ContainerExit::TERMINATED));
        Box::pin(async { ContainerExit::TERMINATED })
    }
}
