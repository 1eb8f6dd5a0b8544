//! The pod spec every member runs: mongod, the keyfile init container,
//! their volumes, probes, resources, security and scheduling. The arbiter's is
//! the same without the root user's environment ([`arbiter_pod_spec`]). The
//! exporter runs in a pod of its own ([`super::exporter`]).
//!
//! The spec depends only on the `MongoDB` object, never on which member runs it,
//! so its hash is one revision for the whole instance.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, Capabilities, ConfigMapVolumeSource, Container, ContainerPort, EmptyDirVolumeSource,
    EnvVar, EnvVarSource, KeyToPath, LocalObjectReference, PodAffinityTerm, PodAntiAffinity,
    PodSecurityContext, PodSpec, Probe, ResourceRequirements, SeccompProfile, SecretKeySelector,
    SecretVolumeSource, SecurityContext, TCPSocketAction, Volume, VolumeMount,
    WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::labels::member_pods_selector;
use super::mongod_options::mongod_settings;
use super::secrets::{
    keyfile_secret_name, KEYFILE_SECRET_KEY, TLS_CA_FILE, TLS_CERTIFICATE_KEY_FILE,
};
use super::{names, BuildContext};
use crate::api::{ClusterAuthMode, ResourceSetting};
use crate::keyfile::Keyfile;

/// Port of mongod, in the pod and on every Service.
pub const MONGODB_PORT: i32 = 27017;
/// Port of the exporter.
pub const METRICS_PORT: i32 = 9216;
/// Where mongod finds the keyfile: a read-only, in-memory copy of the
/// operator's keyfile Secret ([`super::keyfile_secret`]), made by the pod's
/// init container.
pub const KEYFILE_PATH: &str = "/etc/mongodb/keyfile/keyfile";
/// mongod's data directory, on the member's PVC.
pub const DATA_PATH: &str = "/data/db";
/// Name of the volume claim template holding a member's data.
pub const DATA_VOLUME: &str = "data";
/// Key of the custom configuration in the `spec.customConfigRef` ConfigMap.
pub const CUSTOM_CONFIG_KEY: &str = "mongod.yaml";

const MONGOD_CONTAINER: &str = "mongod";
/// The official image's entrypoint creates the root user from these.
const ROOT_USER_ENV_PREFIX: &str = "MONGO_INITDB_";
const KEYFILE_INIT_CONTAINER: &str = "keyfile-init";

const KEYFILE_SECRET_VOLUME: &str = "keyfile-secret";
const KEYFILE_SECRET_DIR: &str = "/etc/mongodb/keyfile-secret";
const KEYFILE_VOLUME: &str = "keyfile";
const KEYFILE_DIR: &str = "/etc/mongodb/keyfile";
const KEYFILE_FILE: &str = "keyfile";
const TMP_VOLUME: &str = "tmp";
const TMP_PATH: &str = "/tmp";
const TLS_VOLUME: &str = "tls";
/// Where mongod finds the TLS Secret's files. Mounted whole (no `subPath`), so
/// the kubelet refreshes them in place when the Secret changes.
const TLS_DIR: &str = "/etc/mongodb/tls";
/// Readable by mongod's group (the pod's fsGroup): mongod does not check
/// these files' modes, and runs as a user other than the files' owner.
const TLS_MODE: i32 = 0o440;
const CUSTOM_CONFIG_VOLUME: &str = "custom-config";
const CUSTOM_CONFIG_DIR: &str = "/etc/mongodb/custom";
const CUSTOM_CONFIG_PATH: &str = "/etc/mongodb/custom/mongod.yaml";

/// User and group of the `mongodb` account in the official image.
const MONGODB_UID: i64 = 999;
/// Long enough for mongod to step down and shut down cleanly (≥ 30 required).
const TERMINATION_GRACE_PERIOD_SECONDS: i64 = 60;
/// Read-only for the owner: mongod refuses a keyfile readable by group or others.
const KEYFILE_MODE: i32 = 0o400;
/// Anti-affinity topology when the user gives no affinity.
const HOSTNAME_TOPOLOGY_KEY: &str = "kubernetes.io/hostname";

/// The path of a file of the TLS Secret in the member and exporter pods.
pub(super) fn tls_path(file: &str) -> String {
    format!("{TLS_DIR}/{file}")
}

/// The TLS Secret's volume and its read-only mount, with TLS on.
pub(super) fn tls_volume_and_mount(ctx: &BuildContext) -> Option<(Volume, VolumeMount)> {
    Some((tls_volume(ctx)?, mount(TLS_VOLUME, TLS_DIR, true)))
}

fn tls_volume(ctx: &BuildContext) -> Option<Volume> {
    ctx.tls()?;
    Some(Volume {
        name: TLS_VOLUME.to_string(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(names::tls_secret(ctx.name())),
            default_mode: Some(TLS_MODE),
            optional: Some(false),
            ..SecretVolumeSource::default()
        }),
        ..Volume::default()
    })
}

/// The pod spec of every member of the instance.
pub(super) fn member_pod_spec(ctx: &BuildContext, keyfile: &Keyfile) -> PodSpec {
    let spec = ctx.spec();
    let user_pod_spec = spec.pod_spec.clone().unwrap_or_default();
    PodSpec {
        init_containers: Some(vec![keyfile_init_container(ctx)]),
        containers: vec![mongod_container(ctx)],
        volumes: Some(pod_volumes(ctx, keyfile)),
        security_context: Some(pod_security_context(user_pod_spec.security_context)),
        affinity: Some(
            user_pod_spec
                .affinity
                .unwrap_or_else(|| default_anti_affinity(ctx.name())),
        ),
        node_selector: user_pod_spec.node_selector,
        tolerations: user_pod_spec.tolerations,
        topology_spread_constraints: user_pod_spec.topology_spread_constraints,
        image_pull_secrets: image_pull_secrets(ctx),
        termination_grace_period_seconds: Some(TERMINATION_GRACE_PERIOD_SECONDS),
        // mongod needs no Kubernetes API access and no Service environment variables.
        automount_service_account_token: Some(false),
        enable_service_links: Some(false),
        ..PodSpec::default()
    }
}

/// The arbiter's pod spec: the members' without `MONGO_INITDB_*`. Nothing
/// authenticates to an arbiter (drivers never do, and its peers use the
/// keyfile), and the entrypoint's first start that would create the root user
/// also writes a featureCompatibilityVersion document. An arbiter never
/// applies the oplog, so that document would never move, and two releases
/// later mongod would refuse to start on it (exit 62).
pub(super) fn arbiter_pod_spec(member_spec: PodSpec) -> PodSpec {
    let mut spec = member_spec;
    for container in &mut spec.containers {
        if container.name == MONGOD_CONTAINER {
            let env = container.env.take().unwrap_or_default().into_iter();
            let kept: Vec<EnvVar> = env
                .filter(|variable| !variable.name.starts_with(ROOT_USER_ENV_PREFIX))
                .collect();
            container.env = (!kept.is_empty()).then_some(kept);
        }
    }
    spec
}

/// The image pull Secret, when the spec gives registry credentials.
pub(super) fn image_pull_secrets(ctx: &BuildContext) -> Option<Vec<LocalObjectReference>> {
    ctx.spec().registry_credentials().map(|_| {
        vec![LocalObjectReference {
            name: names::image_pull_secret(ctx.name()),
        }]
    })
}

/// mongod, started through the official image's entrypoint (only `args`, no
/// `command`): the entrypoint creates the root user from
/// `MONGO_INITDB_ROOT_USERNAME`/`_PASSWORD` on an empty data directory.
fn mongod_container(ctx: &BuildContext) -> Container {
    let spec = ctx.spec();
    let mut volume_mounts = vec![
        mount(DATA_VOLUME, DATA_PATH, false),
        mount(TMP_VOLUME, TMP_PATH, false),
        mount(KEYFILE_VOLUME, KEYFILE_DIR, true),
    ];
    if spec.custom_config_ref.is_some() {
        volume_mounts.push(mount(CUSTOM_CONFIG_VOLUME, CUSTOM_CONFIG_DIR, true));
    }
    if ctx.tls().is_some() {
        volume_mounts.push(mount(TLS_VOLUME, TLS_DIR, true));
    }
    let credentials = ctx.credentials();
    Container {
        name: MONGOD_CONTAINER.to_string(),
        image: Some(spec.image.clone()),
        image_pull_policy: Some(spec.image_pull_policy.as_str().to_string()),
        args: Some(mongod_args(ctx)),
        env: Some(vec![
            secret_env(
                "MONGO_INITDB_ROOT_USERNAME",
                credentials.secret_name(),
                credentials.username_key(),
            ),
            secret_env(
                "MONGO_INITDB_ROOT_PASSWORD",
                credentials.secret_name(),
                credentials.password_key(),
            ),
        ]),
        ports: Some(vec![container_port("mongodb", MONGODB_PORT)]),
        readiness_probe: Some(readiness_probe()),
        liveness_probe: Some(liveness_probe()),
        startup_probe: Some(startup_probe()),
        resources: Some(resource_requirements(&spec.resources)),
        security_context: Some(container_security_context()),
        volume_mounts: Some(volume_mounts),
        ..Container::default()
    }
}

/// `mongod --replSet … --bind_ip_all --port … --dbpath … --keyFile … --auth`,
/// `--config` when a custom configuration is given, the TLS options with
/// `spec.tls`, then the settings of `spec.config` the operator accepts
/// ([`mongod_settings`]), ordered by name. Only paths, never a secret.
fn mongod_args(ctx: &BuildContext) -> Vec<String> {
    let spec = ctx.spec();
    let port = MONGODB_PORT.to_string();
    let mut args: Vec<String> = [
        "mongod",
        "--replSet",
        spec.repl_set_name.as_str(),
        "--bind_ip_all",
        "--port",
        port.as_str(),
        "--dbpath",
        DATA_PATH,
        "--keyFile",
        KEYFILE_PATH,
        "--auth",
    ]
    .map(String::from)
    .into();
    if spec.custom_config_ref.is_some() {
        args.extend(["--config".to_string(), CUSTOM_CONFIG_PATH.to_string()]);
    }
    if let Some(tls) = ctx.tls() {
        args.extend(
            [
                "--tlsMode",
                tls.mode.as_str(),
                "--tlsCertificateKeyFile",
                &tls_path(TLS_CERTIFICATE_KEY_FILE),
                "--tlsCAFile",
                &tls_path(TLS_CA_FILE),
            ]
            .map(String::from),
        );
        if tls.allow_connections_without_certificates {
            args.push("--tlsAllowConnectionsWithoutCertificates".to_string());
        }
        if tls.cluster_auth != ClusterAuthMode::KeyFile {
            args.extend([
                "--clusterAuthMode".to_string(),
                tls.cluster_auth.as_str().to_string(),
            ]);
        }
    }
    args.extend(mongod_settings(&spec.config).args);
    args
}

/// Copies the keyfile out of its Secret volume before mongod starts.
///
/// mongod refuses a keyfile readable by group or others, and Kubernetes widens
/// a Secret volume's file modes (0400 becomes 0440, group = fsGroup) when the pod
/// has an `fsGroup` — which it needs for the data volume. So the Secret volume
/// (defaultMode 0400) is mounted read-only here only, and this container (same
/// image, same restricted security context, running as mongod's user) copies the
/// key into an in-memory emptyDir with mode 0400; mongod mounts that emptyDir
/// read-only. The old copy is removed first: a restarted pod keeps its emptyDir,
/// and a 0400 file cannot be overwritten by a non-root user.
fn keyfile_init_container(ctx: &BuildContext) -> Container {
    let spec = ctx.spec();
    let source = format!("{KEYFILE_SECRET_DIR}/{KEYFILE_FILE}");
    let script =
        format!("set -eu; umask 0377; rm -f {KEYFILE_PATH}; cp {source} {KEYFILE_PATH}; chmod 0400 {KEYFILE_PATH}");
    Container {
        name: KEYFILE_INIT_CONTAINER.to_string(),
        image: Some(spec.image.clone()),
        image_pull_policy: Some(spec.image_pull_policy.as_str().to_string()),
        command: Some(vec!["sh".to_string(), "-c".to_string(), script]),
        resources: Some(resource_requirements(&spec.resources)),
        security_context: Some(container_security_context()),
        volume_mounts: Some(vec![
            mount(KEYFILE_SECRET_VOLUME, KEYFILE_SECRET_DIR, true),
            mount(KEYFILE_VOLUME, KEYFILE_DIR, false),
        ]),
        ..Container::default()
    }
}

fn pod_volumes(ctx: &BuildContext, keyfile: &Keyfile) -> Vec<Volume> {
    let mut volumes = vec![
        Volume {
            name: KEYFILE_SECRET_VOLUME.to_string(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(keyfile_secret_name(ctx.name(), keyfile)),
                items: Some(vec![KeyToPath {
                    key: KEYFILE_SECRET_KEY.to_string(),
                    path: KEYFILE_FILE.to_string(),
                    mode: None,
                }]),
                default_mode: Some(KEYFILE_MODE),
                optional: Some(false),
            }),
            ..Volume::default()
        },
        Volume {
            name: KEYFILE_VOLUME.to_string(),
            empty_dir: Some(EmptyDirVolumeSource {
                medium: Some("Memory".to_string()),
                size_limit: Some(Quantity("1Mi".to_string())),
            }),
            ..Volume::default()
        },
        Volume {
            name: TMP_VOLUME.to_string(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Volume::default()
        },
    ];
    volumes.extend(tls_volume(ctx));
    if let Some(config_map) = &ctx.spec().custom_config_ref {
        volumes.push(Volume {
            name: CUSTOM_CONFIG_VOLUME.to_string(),
            config_map: Some(ConfigMapVolumeSource {
                name: config_map.clone(),
                items: Some(vec![KeyToPath {
                    key: CUSTOM_CONFIG_KEY.to_string(),
                    path: CUSTOM_CONFIG_KEY.to_string(),
                    mode: None,
                }]),
                ..ConfigMapVolumeSource::default()
            }),
            ..Volume::default()
        });
    }
    volumes
}

/// The restricted defaults (non-root as mongod's user 999, fsGroup 999,
/// RuntimeDefault seccomp), under whatever the user set in
/// `spec.podSpec.securityContext`: a field the user set wins.
pub(super) fn pod_security_context(user: Option<PodSecurityContext>) -> PodSecurityContext {
    let mut context = user.unwrap_or_default();
    context.run_as_non_root.get_or_insert(true);
    context.run_as_user.get_or_insert(MONGODB_UID);
    context.run_as_group.get_or_insert(MONGODB_UID);
    context.fs_group.get_or_insert(MONGODB_UID);
    // Re-own the data volume only when its root does not match already (large volumes).
    context
        .fs_group_change_policy
        .get_or_insert_with(|| "OnRootMismatch".to_string());
    context
        .seccomp_profile
        .get_or_insert_with(|| SeccompProfile {
            type_: "RuntimeDefault".to_string(),
            localhost_profile: None,
        });
    context
}

/// The restricted container security context shared by every container.
pub(super) fn container_security_context() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".to_string()]),
            add: None,
        }),
        read_only_root_filesystem: Some(true),
        run_as_non_root: Some(true),
        ..SecurityContext::default()
    }
}

/// Members of the instance prefer different nodes.
fn default_anti_affinity(instance: &str) -> Affinity {
    let match_labels = member_pods_selector(instance);
    Affinity {
        pod_anti_affinity: Some(PodAntiAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![
                WeightedPodAffinityTerm {
                    weight: 100,
                    pod_affinity_term: PodAffinityTerm {
                        label_selector: Some(LabelSelector {
                            match_labels: Some(match_labels),
                            match_expressions: None,
                        }),
                        topology_key: HOSTNAME_TOPOLOGY_KEY.to_string(),
                        ..PodAffinityTerm::default()
                    },
                },
            ]),
            required_during_scheduling_ignored_during_execution: None,
        }),
        ..Affinity::default()
    }
}

/// Ready as soon as mongod accepts connections, whatever its replica-set state:
/// a member must be reachable through its Service before it can join the set or
/// vote in an election, and the propagated Services do not publish not-ready
/// addresses.
fn readiness_probe() -> Probe {
    Probe {
        initial_delay_seconds: Some(5),
        ..tcp_probe(10, 3)
    }
}

/// Restarts mongod only after two minutes without a listening port.
fn liveness_probe() -> Probe {
    Probe {
        initial_delay_seconds: Some(30),
        ..tcp_probe(20, 6)
    }
}

/// Gives mongod 30 minutes to open its port (journal recovery of a large data set).
fn startup_probe() -> Probe {
    tcp_probe(10, 180)
}

fn tcp_probe(period_seconds: i32, failure_threshold: i32) -> Probe {
    Probe {
        tcp_socket: Some(TCPSocketAction {
            port: IntOrString::Int(MONGODB_PORT),
            host: None,
        }),
        period_seconds: Some(period_seconds),
        timeout_seconds: Some(5),
        failure_threshold: Some(failure_threshold),
        ..Probe::default()
    }
}

pub(super) fn resource_requirements(setting: &ResourceSetting) -> ResourceRequirements {
    let non_empty = |quantities: &BTreeMap<String, Quantity>| {
        (!quantities.is_empty()).then(|| quantities.clone())
    };
    ResourceRequirements {
        limits: non_empty(&setting.limits),
        requests: non_empty(&setting.requests),
        claims: None,
    }
}

pub(super) fn secret_env(variable: &str, secret_name: &str, key: &str) -> EnvVar {
    EnvVar {
        name: variable.to_string(),
        value: None,
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret_name.to_string(),
                key: key.to_string(),
                optional: Some(false),
            }),
            ..EnvVarSource::default()
        }),
    }
}

pub(super) fn container_port(name: &str, port: i32) -> ContainerPort {
    ContainerPort {
        name: Some(name.to_string()),
        container_port: port,
        protocol: Some("TCP".to_string()),
        ..ContainerPort::default()
    }
}

fn mount(volume: &str, path: &str, read_only: bool) -> VolumeMount {
    VolumeMount {
        name: volume.to_string(),
        mount_path: path.to_string(),
        read_only: read_only.then_some(true),
        ..VolumeMount::default()
    }
}
