//! The container runtime interface: what the simulated kubelet hands to whoever
//! actually "runs" a container (the lab plugs mongod-sim in here), and the fully
//! resolved description of one container it hands over.
//!
//! Everything a container needs is resolved by the kubelet before `start` is
//! called: environment values from Secrets and ConfigMaps, mounted Secret and
//! ConfigMap files, and the identity of the pod's PersistentVolumeClaims (so a
//! runtime can keep durable state per claim). Mounted Secret and ConfigMap
//! files are a shared [`VolumeFiles`] handle that the kubelet keeps current
//! while the container runs (but for `subPath` mounts), as the real kubelet
//! refreshes those volumes in place. `Debug` output never shows environment
//! values or file contents.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::net::Ipv4Addr;
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// A boxed future, as the object-safe runtime traits return.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Starts containers. One runtime serves every pod of a cluster.
pub trait ContainerRuntime: Send + Sync + 'static {
    /// Starts `container` and returns a handle to it once it runs.
    ///
    /// An error is reported on the pod as a `RunContainerError` and the kubelet
    /// retries with its crash-loop back-off.
    fn start(
        &self,
        container: ResolvedContainer,
    ) -> BoxFuture<'_, anyhow::Result<Box<dyn RunningContainer>>>;
}

/// A container the runtime started.
///
/// Dropping the handle must stop the container immediately: the simulator drops
/// handles when it is shut down or dropped.
pub trait RunningContainer: Send + Sync {
    /// Resolves when the container has exited (by itself, or because it was
    /// stopped), with how it exited. May be called again after it resolved.
    fn wait(&self) -> BoxFuture<'_, ContainerExit>;

    /// Asks the container to stop (SIGTERM), and kills it if it is still running
    /// after `grace` (SIGKILL). Resolves once it has exited.
    fn stop(&self, grace: Duration) -> BoxFuture<'_, ContainerExit>;
}

/// How a container process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContainerExit {
    /// The process exit code (`0` success, `137` killed, `143` terminated).
    pub exit_code: i32,
}

impl ContainerExit {
    /// Exit code of a process killed by SIGKILL.
    pub const KILLED: ContainerExit = ContainerExit { exit_code: 137 };
    /// Exit code of a process that ended on SIGTERM.
    pub const TERMINATED: ContainerExit = ContainerExit { exit_code: 143 };
    /// Exit code of a process that completed successfully.
    pub const SUCCESS: ContainerExit = ContainerExit { exit_code: 0 };

    /// The `reason` Kubernetes reports for this exit in a terminated container state.
    pub fn reason(&self) -> &'static str {
        if self.exit_code == 0 {
            "Completed"
        } else {
            "Error"
        }
    }
}

/// The pod a container belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodIdentity {
    /// Namespace of the pod.
    pub namespace: String,
    /// Name of the pod.
    pub name: String,
    /// `metadata.uid` of the pod.
    pub uid: String,
}

/// One container of a pod, with everything it refers to looked up.
#[derive(Debug, Clone)]
pub struct ResolvedContainer {
    /// The pod the container belongs to.
    pub pod: PodIdentity,
    /// The pod's IP address: the container listens on it.
    pub pod_ip: Ipv4Addr,
    /// The container's name.
    pub name: String,
    /// Whether this is an init container (it is expected to exit, with code 0 on success).
    pub init: bool,
    /// The container image.
    pub image: String,
    /// `command`, with `$(VAR)` references expanded.
    pub command: Vec<String>,
    /// `args`, with `$(VAR)` references expanded.
    pub args: Vec<String>,
    /// The environment, in the order Kubernetes builds it (`envFrom` first, then `env`),
    /// values resolved. Later entries override earlier ones with the same name.
    pub env: Vec<ResolvedEnvVar>,
    /// The container's volume mounts with their volumes' contents.
    pub mounts: Vec<ResolvedMount>,
    /// Declared container ports.
    pub ports: Vec<ResolvedPort>,
}

impl ResolvedContainer {
    /// The value of environment variable `name` (the last definition wins).
    pub fn env_value(&self, name: &str) -> Option<&str> {
        self.env
            .iter()
            .rev()
            .find(|e| e.name == name)
            .map(|e| e.value.as_str())
    }

    /// The first mounted PersistentVolumeClaim, if any.
    pub fn persistent_volume_claim(&self) -> Option<&ClaimIdentity> {
        self.mounts.iter().find_map(|m| match &m.volume {
            ResolvedVolume::PersistentVolumeClaim(claim) => Some(claim),
            _ => None,
        })
    }
}

/// One resolved environment variable. Its `Debug` form hides the value.
#[derive(Clone, PartialEq, Eq)]
pub struct ResolvedEnvVar {
    /// Variable name.
    pub name: String,
    /// Resolved value (may come from a Secret: never log it).
    pub value: String,
}

impl fmt::Debug for ResolvedEnvVar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}=<{} bytes>", self.name, self.value.len())
    }
}

/// A declared container port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedPort {
    /// Port name (`mongo`), if named.
    pub name: Option<String>,
    /// Port number.
    pub container_port: u16,
    /// `TCP`, `UDP` or `SCTP`.
    pub protocol: String,
}

/// One `volumeMount` of a container.
#[derive(Debug, Clone)]
pub struct ResolvedMount {
    /// Name of the pod volume.
    pub volume_name: String,
    /// Where it is mounted in the container.
    pub mount_path: String,
    /// `subPath` within the volume, if any.
    pub sub_path: Option<String>,
    /// Whether the mount is read-only.
    pub read_only: bool,
    /// The volume's content or identity.
    pub volume: ResolvedVolume,
}

/// The identity of a PersistentVolumeClaim: durable state belongs to it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClaimIdentity {
    /// Namespace of the claim.
    pub namespace: String,
    /// `metadata.name` of the claim.
    pub claim_name: String,
    /// `metadata.uid` of the claim: a recreated claim has a new uid (and empty data).
    pub claim_uid: String,
    /// `spec.resources.requests.storage` of the claim (a quantity such as
    /// `1Gi`): the size of the volume the container gets.
    pub requested_storage: Option<String>,
}

/// The files of a Secret or ConfigMap volume (path relative to the mount →
/// bytes), as a handle that clones share: while the container runs, the
/// kubelet swaps in the whole new set of files at once when the Secret or
/// ConfigMap changes (as the real kubelet's atomic writer does), so a runtime
/// that keeps its [`ResolvedContainer`] and reads through it sees the current
/// content. A `subPath` mount's files are never swapped. `Debug` shows the
/// paths only.
#[derive(Clone, Default)]
pub struct VolumeFiles(Arc<RwLock<Arc<Files>>>);

/// Files by path relative to the mount.
type Files = BTreeMap<String, Vec<u8>>;

impl VolumeFiles {
    /// A handle holding `files`.
    pub fn new(files: BTreeMap<String, Vec<u8>>) -> Self {
        VolumeFiles(Arc::new(RwLock::new(Arc::new(files))))
    }

    /// The current content of the file at `path` (relative to the mount).
    pub fn get(&self, path: &str) -> Option<Vec<u8>> {
        self.snapshot().get(path).cloned()
    }

    /// Every file as it is now: one consistent set, never half of an update.
    pub fn snapshot(&self) -> Arc<BTreeMap<String, Vec<u8>>> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Swaps in `files` as a whole, if they differ from the current ones;
    /// whether they did.
    pub(crate) fn replace(&self, files: BTreeMap<String, Vec<u8>>) -> bool {
        let mut current = self.0.write().unwrap_or_else(|p| p.into_inner());
        if **current == files {
            return false;
        }
        *current = Arc::new(files);
        true
    }
}

impl From<BTreeMap<String, Vec<u8>>> for VolumeFiles {
    fn from(files: BTreeMap<String, Vec<u8>>) -> Self {
        VolumeFiles::new(files)
    }
}

impl fmt::Debug for VolumeFiles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.snapshot().keys()).finish()
    }
}

/// A volume, resolved to what a container sees.
#[derive(Clone)]
pub enum ResolvedVolume {
    /// A Secret volume: file path (relative to the mount) → bytes.
    Secret {
        /// Name of the Secret.
        secret_name: String,
        /// Files by relative path, kept current while the container runs.
        files: VolumeFiles,
    },
    /// A ConfigMap volume: file path (relative to the mount) → bytes.
    ConfigMap {
        /// Name of the ConfigMap.
        config_map_name: String,
        /// Files by relative path, kept current while the container runs.
        files: VolumeFiles,
    },
    /// An emptyDir, private to the pod (a new pod uid means a new empty directory).
    EmptyDir,
    /// A PersistentVolumeClaim.
    PersistentVolumeClaim(ClaimIdentity),
    /// A volume kind the simulator does not resolve (hostPath, projected, …).
    Unsupported {
        /// The volume source's field name (`hostPath`, `projected`, …).
        kind: String,
    },
}

impl fmt::Debug for ResolvedVolume {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResolvedVolume::Secret { secret_name, files } => {
                write!(f, "Secret({secret_name}, files: {files:?})")
            }
            ResolvedVolume::ConfigMap {
                config_map_name,
                files,
            } => {
                write!(f, "ConfigMap({config_map_name}, files: {files:?})")
            }
            ResolvedVolume::EmptyDir => write!(f, "EmptyDir"),
            ResolvedVolume::PersistentVolumeClaim(claim) => {
                write!(f, "PersistentVolumeClaim({claim:?})")
            }
            ResolvedVolume::Unsupported { kind } => write!(f, "Unsupported({kind})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_hides_environment_values_and_file_contents() {
        let var = ResolvedEnvVar {
            name: "MONGO_INITDB_ROOT_PASSWORD".into(),
            value: "s3cret".into(),
        };
        let volume = ResolvedVolume::Secret {
            secret_name: "creds".into(),
            files: BTreeMap::from([("keyfile".to_string(), b"topsecret".to_vec())]).into(),
        };
        let shown = format!("{var:?} {volume:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(!shown.contains("topsecret"), "{shown}");
        assert!(
            shown.contains("MONGO_INITDB_ROOT_PASSWORD") && shown.contains("keyfile"),
            "{shown}"
        );
    }

    #[test]
    fn debug_output_hides_refreshed_file_contents_of_a_whole_container() {
        let files = VolumeFiles::new(BTreeMap::from([(
            "tls.pem".to_string(),
            b"-----BEGIN PRIVATE KEY----- old".to_vec(),
        )]));
        let container = ResolvedContainer {
            pod: PodIdentity {
                namespace: "ns".into(),
                name: "db-0".into(),
                uid: "uid".into(),
            },
            pod_ip: Ipv4Addr::new(127, 0, 0, 2),
            name: "mongod".into(),
            init: false,
            image: "mongo:7.0".into(),
            command: vec![],
            args: vec![],
            env: vec![],
            mounts: vec![
                ResolvedMount {
                    volume_name: "tls".into(),
                    mount_path: "/tls".into(),
                    sub_path: None,
                    read_only: true,
                    volume: ResolvedVolume::Secret {
                        secret_name: "db-tls".into(),
                        files: files.clone(),
                    },
                },
                ResolvedMount {
                    volume_name: "conf".into(),
                    mount_path: "/conf".into(),
                    sub_path: None,
                    read_only: true,
                    volume: ResolvedVolume::ConfigMap {
                        config_map_name: "db-conf".into(),
                        files: BTreeMap::from([(
                            "mongod.conf".to_string(),
                            b"net: {port: 27017}".to_vec(),
                        )])
                        .into(),
                    },
                },
            ],
            ports: vec![],
        };
        assert!(files.replace(BTreeMap::from([
            (
                "tls.pem".to_string(),
                b"-----BEGIN PRIVATE KEY----- new".to_vec()
            ),
            (
                "ca.pem".to_string(),
                b"-----BEGIN CERTIFICATE-----".to_vec()
            ),
        ])));
        let shown = format!("{container:?}");
        assert!(!shown.contains("BEGIN"), "{shown}");
        assert!(!shown.contains("27017"), "{shown}");
        assert!(
            shown.contains("tls.pem") && shown.contains("ca.pem") && shown.contains("mongod.conf"),
            "{shown}"
        );
    }

    #[test]
    fn clones_share_volume_files_and_a_replacement_swaps_them_all_at_once() {
        let old = BTreeMap::from([
            ("a".to_string(), b"1".to_vec()),
            ("b".to_string(), b"2".to_vec()),
        ]);
        let files = VolumeFiles::new(old.clone());
        let clone = files.clone();
        let before = clone.snapshot();
        assert!(!files.replace(old.clone()), "the same files are no change");
        let new = BTreeMap::from([("a".to_string(), b"10".to_vec())]);
        assert!(files.replace(new.clone()));
        assert_eq!(*clone.snapshot(), new);
        assert_eq!(clone.get("a"), Some(b"10".to_vec()));
        assert_eq!(clone.get("b"), None);
        assert_eq!(*before, old, "a snapshot taken before stays whole");
    }
}
