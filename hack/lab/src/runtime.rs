//! The lab's container runtime: runs a pod's `mongod` container as a mongod-sim
//! member, with the durable state of the pod's PersistentVolumeClaim.
//!
//! - A container whose first argument is `mongod` is mongod. Its arguments and
//!   the `--config` file they name go through mongod's startup parsing
//!   ([`startup_options`]): an option or `setParameter` mongod refuses, or a
//!   configuration that cannot start (`processManagement.fork`, a log file
//!   outside a writable volume) ends the container with mongod's exit code,
//!   so the pod crash-loops as it would. Otherwise it listens on the
//!   pod IP and port `--port` (27017 by default), reads its keyfile from the file
//!   `--keyFile` names, its TLS files (`--tlsCertificateKeyFile`,
//!   `--tlsCAFile`, `--tlsClusterFile`) from the mounted volumes each time it
//!   reads them (at start, and on `rotateCertificates`: a Secret volume has the
//!   files the kubelet last refreshed in place), and creates the root user from
//!   `MONGO_INITDB_ROOT_USERNAME` / `_PASSWORD` when its data is empty (what the
//!   official image's entrypoint does). Its data lives with the PVC's uid: a
//!   restarted pod resumes it, a new PVC starts empty.
//! - The mongod version comes from the image tag: the first `MAJOR.MINOR[.PATCH]`
//!   in the tag (`mongo:7.0` → 7.0.0, `mongo:8.0.3` → 8.0.3,
//!   `docker.io/library/mongo:7.0.14` → 7.0.14, `registry:5000/x/mongo:6.0-jammy`
//!   → 6.0.0; a digest after `@` is ignored). An image without a tag, or whose tag
//!   has no such number (`mongo:latest`), runs the simulator's default,
//!   [`ServerVersion::DEFAULT`] (7.0.14). The member reports it in `buildInfo`,
//!   `serverStatus` and `hello.maxWireVersion`.
//! - Like mongod, the container exits at once with code 62 when the PVC's data has
//!   a featureCompatibilityVersion its version cannot run (an 8.0 image on FCV 6.0
//!   data, a 7.0 image on FCV 8.0 data), logging mongod's "UPGRADE PROBLEM"
//!   error; and it exits with code 14 when replication or an initial sync brings
//!   it an FCV its version cannot parse (mongod's fatal assertion).
//! - Its volume is as large as the PVC requests (`spec.resources.requests.
//!   storage`): mongod sizes its oplog from it (5 % of the free disk, at least
//!   990 MB, unless `--oplogSize` says), and a write that does not fit ends
//!   the container with 134 (WiredTiger's panic aborts mongod), as does a
//!   start with no room left, so the pod crash-loops.
//! - Init containers cannot run shell scripts here. They are emulated by what
//!   the member pods' init container does: every file of a Secret volume it
//!   mounts is copied into the emptyDir volumes it mounts writable.
//! - Any other container (the metrics exporter) runs idle until stopped, but
//!   for one of an image tagged [`CRASH_LOOP_TAG`], which exits with code 1
//!   as soon as it starts: the lab's exporter that cannot start (a bad image,
//!   a member it cannot reach, too little memory), so its pod crash-loops.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use cluster_sim::{
    BoxFuture, ContainerExit, ContainerRuntime, ResolvedContainer, ResolvedVolume, RunningContainer,
};
use mongod_sim::tls::{FileReader, TlsSpec};
use mongod_sim::{
    startup_options, Disk, Member, MemberSpec, Network, RootUser, ServerVersion, Volume,
};
use tokio::sync::watch;

/// The image tag of a container that exits with code 1 as soon as it starts.
pub const CRASH_LOOP_TAG: &str = "lab-crash-loop";

/// Files of one emptyDir, by path relative to the volume.
type DirFiles = BTreeMap<String, Vec<u8>>;

/// Runs the containers of one simulated cluster.
pub struct MongodRuntime {
    network: Arc<Network>,
    site: String,
    volumes: Mutex<BTreeMap<String, Volume>>,
    empty_dirs: EmptyDirs,
}

/// Every pod's emptyDir files, by pod uid and volume name.
type EmptyDirs = Arc<Mutex<BTreeMap<(String, String), DirFiles>>>;

impl MongodRuntime {
    /// A runtime starting members on `network`, tagged with the cluster's `site`
    /// (so a whole cluster can be cut off).
    pub fn new(network: Arc<Network>, site: impl Into<String>) -> Self {
        MongodRuntime {
            network,
            site: site.into(),
            volumes: Mutex::default(),
            empty_dirs: EmptyDirs::default(),
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
                files.extend(
                    secret_files
                        .snapshot()
                        .iter()
                        .map(|(k, v)| (k.clone(), v.clone())),
                );
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
        Box::new(Exited(ContainerExit::SUCCESS))
    }

    /// The content of the file at `path` as the container sees it.
    fn read_file(&self, container: &ResolvedContainer, path: &str) -> Option<Vec<u8>> {
        read_mounted(&self.empty_dirs, container, path)
    }

    /// Reads the container's files whenever mongod asks (at start, and again
    /// on `rotateCertificates`). The container's Secret and ConfigMap volumes
    /// are handles the kubelet keeps current, so each read sees the files as
    /// the kubelet last refreshed them.
    fn file_reader(&self, container: &ResolvedContainer) -> FileReader {
        let empty_dirs = self.empty_dirs.clone();
        let container = container.clone();
        Arc::new(move |path: &str| read_mounted(&empty_dirs, &container, path))
    }

    async fn run_mongod(
        &self,
        container: &ResolvedContainer,
    ) -> anyhow::Result<Box<dyn RunningContainer>> {
        let args: Vec<String> = container
            .command
            .iter()
            .chain(&container.args)
            .cloned()
            .collect();
        let read_file = |path: &str| self.read_file(container, path);
        let writable = |path: &str| writable_path(container, path);
        // mongod parses its command line and `--config` file first; what it
        // refuses ends the process with mongod's exit code.
        let options = match startup_options::parse(
            &args,
            &startup_options::Container {
                read_file: &read_file,
                writable: &writable,
            },
        ) {
            Ok(options) => options,
            Err(exit) => {
                tracing::error!(pod = %container.pod.name, container = %container.name,
                    exit_code = exit.exit_code, output = %exit.message, "mongod exited at start");
                return Ok(Box::new(Exited(ContainerExit {
                    exit_code: exit.exit_code,
                })));
            }
        };
        let repl_set = options
            .repl_set
            .ok_or_else(|| anyhow!("mongod without --replSet"))?;
        let port = options.port;
        let keyfile = match options.key_file.as_deref() {
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
            keyfile,
            root_user,
            version: server_version_of_image(&container.image),
            oplog_size_bytes: options.oplog_size_bytes,
            disk: disk_of(container, options.diagnostic_data),
            // Every client of a lab member (the operator, a test, the
            // writer) stands for a process in another pod.
            clients_on_own_host: false,
            tls: TlsSpec {
                files: Some(self.file_reader(container)),
                ..options.tls
            },
            ..MemberSpec::new(listen, &repl_set)
        };
        let volume = self.volume_of(container);
        // mongod's startup checks of the data's featureCompatibilityVersion and
        // of the room left on its volume: the process logs the error and exits
        // before it listens.
        let state = volume.snapshot();
        if let Err(e) = mongod_sim::fcv::startup_check(spec.version, &state)
            .and_then(|()| mongod_sim::disk::startup_check(&spec, &state))
        {
            tracing::error!(pod = %container.pod.name, container = %container.name, version = %spec.version,
                id = e.log_id, error = %e.message, "{}", e.log_msg);
            return Ok(Box::new(Exited(ContainerExit {
                exit_code: e.exit_code,
            })));
        }
        self.network
            .start_member(spec, volume)
            .await
            .with_context(|| format!("starting mongod on {listen}"))?;
        self.network.set_site(&listen.to_string(), &self.site);
        let (exited, _) = watch::channel(None);
        Ok(Box::new(MongodContainer {
            network: self.network.clone(),
            listen: listen.to_string(),
            member: self.network.member(&listen.to_string()),
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
            // The official image's entrypoint runs mongod when its first
            // argument is `mongod` (what the operator passes).
            let is_mongod = container
                .command
                .iter()
                .chain(&container.args)
                .next()
                .is_some_and(|first| first == "mongod");
            if is_mongod {
                return self.run_mongod(&container).await;
            }
            if container.image.is_empty() {
                bail!("container {} has no image", container.name);
            }
            if container.image.ends_with(&format!(":{CRASH_LOOP_TAG}")) {
                return Ok(
                    Box::new(Exited(ContainerExit { exit_code: 1 })) as Box<dyn RunningContainer>
                );
            }
            let (exited, _) = watch::channel(None);
            Ok(Box::new(IdleContainer {
                exited: Arc::new(exited),
            }) as Box<dyn RunningContainer>)
        })
    }
}

/// The content of the file at `path` as `container` sees it.
fn read_mounted(
    empty_dirs: &EmptyDirs,
    container: &ResolvedContainer,
    path: &str,
) -> Option<Vec<u8>> {
    let mount = container
        .mounts
        .iter()
        .filter(|m| path.starts_with(&m.mount_path))
        .max_by_key(|m| m.mount_path.len())?;
    let relative = path[mount.mount_path.len()..].trim_start_matches('/');
    match &mount.volume {
        ResolvedVolume::Secret { files, .. } | ResolvedVolume::ConfigMap { files, .. } => {
            files.get(relative)
        }
        ResolvedVolume::EmptyDir => {
            let dirs = empty_dirs.lock().unwrap_or_else(|p| p.into_inner());
            dirs.get(&(container.pod.uid.clone(), mount.volume_name.clone()))?
                .get(relative)
                .cloned()
        }
        _ => None,
    }
}

/// The volume mongod runs on: its PVC's requested storage (none without a
/// claim, or with a request the simulator cannot read: a disk that never
/// fills).
fn disk_of(container: &ResolvedContainer, diagnostic_data: bool) -> Option<Disk> {
    let request = container
        .persistent_volume_claim()?
        .requested_storage
        .as_deref()?;
    let capacity_bytes = mongod_sim::disk::parse_quantity(request)?;
    Some(Disk {
        capacity_bytes,
        diagnostic_data,
    })
}

/// Can the container create or append to the file at `path`? Only under a
/// writable emptyDir or volume claim mount: the member pods' root filesystem
/// is read-only (`readOnlyRootFilesystem`), and the runtime counts every
/// container's so.
fn writable_path(container: &ResolvedContainer, path: &str) -> bool {
    container.mounts.iter().any(|m| {
        !m.read_only
            && matches!(
                m.volume,
                ResolvedVolume::EmptyDir | ResolvedVolume::PersistentVolumeClaim(_)
            )
            && path.starts_with(&format!("{}/", m.mount_path.trim_end_matches('/')))
    })
}

/// The mongod version an image runs: the first `MAJOR.MINOR[.PATCH]` in its tag,
/// else [`ServerVersion::DEFAULT`].
pub fn server_version_of_image(image: &str) -> ServerVersion {
    let reference = image.split('@').next().unwrap_or_default();
    let name = reference.rsplit('/').next().unwrap_or_default();
    let Some((_, tag)) = name.split_once(':') else {
        return ServerVersion::DEFAULT;
    };
    first_version_in(tag).unwrap_or(ServerVersion::DEFAULT)
}

/// The first `MAJOR.MINOR[.PATCH]` (digits separated by dots) in `s`.
fn first_version_in(s: &str) -> Option<ServerVersion> {
    let bytes = s.as_bytes();
    let mut start = 0;
    while start < bytes.len() {
        if !bytes[start].is_ascii_digit() || (start > 0 && bytes[start - 1].is_ascii_digit()) {
            start += 1;
            continue;
        }
        // Up to three dot-separated numbers from here.
        let mut numbers = Vec::new();
        let mut i = start;
        while numbers.len() < 3 {
            let from = i;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            if i == from {
                break;
            }
            numbers.push(&s[from..i]);
            if i + 1 < bytes.len() && bytes[i] == b'.' && bytes[i + 1].is_ascii_digit() {
                i += 1;
            } else {
                break;
            }
        }
        if numbers.len() >= 2 {
            if let Some(v) = ServerVersion::parse(&numbers.join(".")) {
                return Some(v);
            }
        }
        start = i.max(start + 1);
    }
    None
}

/// A container that already ended (a completed init container, or a mongod that
/// exited at startup).
struct Exited(ContainerExit);

impl RunningContainer for Exited {
    fn wait(&self) -> BoxFuture<'_, ContainerExit> {
        let exit = self.0;
        Box::pin(async move { exit })
    }
    fn stop(&self, _grace: Duration) -> BoxFuture<'_, ContainerExit> {
        let exit = self.0;
        Box::pin(async move { exit })
    }
}

/// A mongod-sim member running as a container.
struct MongodContainer {
    network: Arc<Network>,
    listen: String,
    /// The member this container started (to read how it died).
    member: Option<Arc<Member>>,
    exited: Arc<watch::Sender<Option<ContainerExit>>>,
}

impl RunningContainer for MongodContainer {
    fn wait(&self) -> BoxFuture<'_, ContainerExit> {
        let mut exited = self.exited.subscribe();
        let network = self.network.clone();
        let listen = self.listen.clone();
        let member = self.member.clone();
        Box::pin(async move {
            loop {
                if let Some(exit) = *exited.borrow() {
                    return exit;
                }
                let running = network
                    .member(&listen)
                    .is_some_and(|m| member.as_ref().is_none_or(|mine| Arc::ptr_eq(&m, mine)));
                if !running {
                    // A member that died on its own (a fatal assertion) exits
                    // with its code; any other disappearance is a kill.
                    return match member.as_ref().and_then(|m| m.exit_code()) {
                        Some(exit_code) => ContainerExit { exit_code },
                        None => ContainerExit::KILLED,
                    };
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

#[cfg(test)]
mod tests {
    use super::*;
    use cluster_sim::{ClaimIdentity, PodIdentity, ResolvedMount};
    use mongod_sim::state::SYSTEM_VERSION_NS;
    use mongod_sim::{Fcv, Release};

    fn mongod_container(image: &str, pod_ip: [u8; 4]) -> ResolvedContainer {
        ResolvedContainer {
            pod: PodIdentity {
                namespace: "db".into(),
                name: "rs-0".into(),
                uid: "pod-uid".into(),
            },
            pod_ip: pod_ip.into(),
            name: "mongod".into(),
            init: false,
            image: image.into(),
            command: vec!["mongod".into()],
            args: vec!["--replSet".into(), "rs0".into()],
            env: Vec::new(),
            mounts: vec![ResolvedMount {
                volume_name: "data".into(),
                mount_path: "/data/db".into(),
                sub_path: None,
                read_only: false,
                volume: ResolvedVolume::PersistentVolumeClaim(ClaimIdentity {
                    namespace: "db".into(),
                    claim_name: "data-rs-0".into(),
                    claim_uid: "claim-uid".into(),
                    requested_storage: Some("1Gi".into()),
                }),
            }],
            ports: Vec::new(),
        }
    }

    #[tokio::test]
    async fn a_mongod_image_too_old_for_the_pvcs_fcv_exits_with_62() {
        let network = Network::new();
        let runtime = MongodRuntime::new(network.clone(), "cluster-a");
        // The PVC holds data of an FCV 8.0 set.
        let mut state = mongod_sim::DurableState::default();
        state.data.insert(
            SYSTEM_VERSION_NS.into(),
            vec![Fcv::Version(Release::new(8, 0)).document()],
        );
        runtime
            .volumes
            .lock()
            .unwrap()
            .insert("claim-uid".into(), Volume::from_state(state));

        let old = runtime
            .start(mongod_container("mongo:7.0.14", [127, 97, 0, 1]))
            .await
            .unwrap();
        assert_eq!(old.wait().await.exit_code, 62);
        assert!(network.member("127.97.0.1:27017").is_none());

        let new = runtime
            .start(mongod_container("mongo:8.0.3", [127, 97, 0, 1]))
            .await
            .unwrap();
        let member = network
            .member("127.97.0.1:27017")
            .expect("8.0 runs FCV 8.0 data");
        assert_eq!(member.version().to_string(), "8.0.3");
        assert_eq!(new.stop(Duration::ZERO).await, ContainerExit::TERMINATED);
    }

    #[tokio::test]
    async fn a_mongod_given_an_option_it_refuses_exits_as_mongod_does() {
        let network = Network::new();
        let runtime = MongodRuntime::new(network.clone(), "a");
        let mut container = mongod_container("mongo:7.0.14", [127, 97, 0, 2]);
        container
            .args
            .extend(["--setParameter".into(), "LOG_LEVEL=info".into()]);
        let refused = runtime.start(container).await.unwrap();
        assert_eq!(refused.wait().await.exit_code, 2);
        assert!(network.member("127.97.0.2:27017").is_none());
    }

    #[tokio::test]
    async fn a_volume_smaller_than_the_journal_and_diagnostic_data_exits_with_134() {
        let network = Network::new();
        let runtime = MongodRuntime::new(network.clone(), "a");
        let mut small = mongod_container("mongo:7.0.14", [127, 118, 0, 1]);
        if let ResolvedVolume::PersistentVolumeClaim(claim) = &mut small.mounts[0].volume {
            claim.requested_storage = Some("400Mi".into());
        }
        let full = runtime.start(small).await.unwrap();
        assert_eq!(full.wait().await.exit_code, 134);
        assert!(network.member("127.118.0.1:27017").is_none());

        // Without diagnostic data collection the same volume holds the journal.
        let mut lean = mongod_container("mongo:7.0.14", [127, 118, 0, 1]);
        lean.args.extend([
            "--setParameter".into(),
            "diagnosticDataCollectionEnabled=false".into(),
        ]);
        if let ResolvedVolume::PersistentVolumeClaim(claim) = &mut lean.mounts[0].volume {
            claim.requested_storage = Some("400Mi".into());
        }
        let running = runtime.start(lean).await.unwrap();
        assert!(network.member("127.118.0.1:27017").is_some());
        assert_eq!(
            running.stop(Duration::ZERO).await,
            ContainerExit::TERMINATED
        );
    }

    #[test]
    fn the_version_is_the_first_number_of_the_image_tag() {
        let v = |s: &str| server_version_of_image(s).to_string();
        assert_eq!(v("mongo:7.0"), "7.0.0");
        assert_eq!(v("mongo:8.0.3"), "8.0.3");
        assert_eq!(v("docker.io/library/mongo:7.0.14"), "7.0.14");
        assert_eq!(v("registry:5000/x/mongo:6.0-jammy"), "6.0.0");
        assert_eq!(v("mongo:8.0.3-noble@sha256:0123abcd"), "8.0.3");
        assert_eq!(v("mongo:4.4.29-focal"), "4.4.29");
        assert_eq!(v("mongo:jammy-7.0"), "7.0.0");
    }

    #[test]
    fn no_tag_or_no_number_runs_the_default() {
        let default = ServerVersion::DEFAULT.to_string();
        assert_eq!(default, "7.0.14");
        for image in [
            "mongo",
            "registry:5000/x/mongo",
            "mongo:latest",
            "mongo:8",
            "",
            "mongo@sha256:7.0.1",
        ] {
            assert_eq!(
                server_version_of_image(image).to_string(),
                default,
                "{image}"
            );
        }
    }
}
