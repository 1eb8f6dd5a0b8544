//! Turning a container spec into a [`ResolvedContainer`]: environment from
//! literal values, Secrets, ConfigMaps and the downward API (`envFrom` first,
//! then `env`, with `$(VAR)` expansion as the kubelet does), and volumes from
//! Secrets, ConfigMaps, emptyDirs and PersistentVolumeClaims. Failures read like
//! the kubelet's `CreateContainerConfigError` / `FailedMount` messages and never
//! contain a Secret's value.

use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;

use anyhow::{anyhow, bail};
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, PersistentVolumeClaim, Pod, Secret,
    SecretVolumeSource, Volume,
};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Client, ResourceExt};

use crate::api_errors::is_status;
use crate::cache::Cache;
use crate::runtime::{
    ClaimIdentity, PodIdentity, ResolvedContainer, ResolvedEnvVar, ResolvedMount, ResolvedPort,
    ResolvedVolume,
};

/// Reads the Secrets, ConfigMaps and claims a pod refers to, each at most once per resolution.
pub struct Resolver<'a> {
    client: &'a Client,
    /// Secrets and ConfigMaps read from the watch caches rather than by GET.
    watched: Option<&'a Cache>,
    pod: &'a Pod,
    namespace: String,
    secrets: HashMap<String, Option<Secret>>,
    config_maps: HashMap<String, Option<ConfigMap>>,
}

impl<'a> Resolver<'a> {
    /// A resolver for containers of `pod`.
    pub fn new(client: &'a Client, pod: &'a Pod) -> Self {
        Resolver {
            client,
            watched: None,
            pod,
            namespace: pod.namespace().unwrap_or_default(),
            secrets: HashMap::new(),
            config_maps: HashMap::new(),
        }
    }

    /// A resolver for `pod` that reads Secrets and ConfigMaps from `cache`
    /// (the kubelet's refresh of running pods' volumes).
    pub fn watching(client: &'a Client, cache: &'a Cache, pod: &'a Pod) -> Self {
        Resolver {
            watched: Some(cache),
            ..Resolver::new(client, pod)
        }
    }

    /// Resolves `container` (an init container when `init`) for a pod at `pod_ip`.
    pub async fn resolve(
        &mut self,
        container: &Container,
        init: bool,
        pod_ip: Ipv4Addr,
        node_ip: Ipv4Addr,
    ) -> anyhow::Result<ResolvedContainer> {
        let env = self.environment(container, pod_ip, node_ip).await?;
        let lookup: HashMap<&str, &str> = env
            .iter()
            .map(|e| (e.name.as_str(), e.value.as_str()))
            .collect();
        let command = container
            .command
            .iter()
            .flatten()
            .map(|s| expand(s, &lookup))
            .collect();
        let args = container
            .args
            .iter()
            .flatten()
            .map(|s| expand(s, &lookup))
            .collect();
        let mut mounts = Vec::new();
        for mount in container.volume_mounts.iter().flatten() {
            let volume = self
                .pod
                .spec
                .as_ref()
                .and_then(|s| s.volumes.as_ref())
                .and_then(|vs| vs.iter().find(|v| v.name == mount.name))
                .ok_or_else(|| {
                    anyhow!(
                        "volume {:?} mounted at {} is not defined in the pod",
                        mount.name,
                        mount.mount_path
                    )
                })?;
            mounts.push(ResolvedMount {
                volume_name: mount.name.clone(),
                mount_path: mount.mount_path.clone(),
                sub_path: mount.sub_path.clone().filter(|s| !s.is_empty()),
                read_only: mount.read_only.unwrap_or(false),
                volume: self.volume(volume).await?,
            });
        }
        let ports = container
            .ports
            .iter()
            .flatten()
            .filter_map(|p| {
                Some(ResolvedPort {
                    name: p.name.clone(),
                    container_port: u16::try_from(p.container_port).ok()?,
                    protocol: p.protocol.clone().unwrap_or_else(|| "TCP".into()),
                })
            })
            .collect();
        Ok(ResolvedContainer {
            pod: PodIdentity {
                namespace: self.namespace.clone(),
                name: self.pod.name_any(),
                uid: self.pod.uid().unwrap_or_default(),
            },
            pod_ip,
            name: container.name.clone(),
            init,
            image: container.image.clone().unwrap_or_default(),
            command,
            args,
            env,
            mounts,
            ports,
        })
    }

    async fn environment(
        &mut self,
        container: &Container,
        pod_ip: Ipv4Addr,
        node_ip: Ipv4Addr,
    ) -> anyhow::Result<Vec<ResolvedEnvVar>> {
        let mut env: Vec<ResolvedEnvVar> = Vec::new();
        for source in container.env_from.iter().flatten() {
            let prefix = source.prefix.clone().unwrap_or_default();
            let pairs: Vec<(String, String)> = if let Some(reference) = &source.config_map_ref {
                match self.config_map(&reference.name).await? {
                    Some(cm) => config_map_entries(&cm)
                        .map(|(k, v)| (k, String::from_utf8_lossy(&v).into_owned()))
                        .collect(),
                    None if reference.optional == Some(true) => vec![],
                    None => bail!("configmap {:?} not found", reference.name),
                }
            } else if let Some(reference) = &source.secret_ref {
                match self.secret(&reference.name).await? {
                    Some(secret) => secret_entries(&secret)
                        .map(|(k, v)| (k, String::from_utf8_lossy(&v).into_owned()))
                        .collect(),
                    None if reference.optional == Some(true) => vec![],
                    None => bail!("secret {:?} not found", reference.name),
                }
            } else {
                vec![]
            };
            env.extend(pairs.into_iter().map(|(k, value)| ResolvedEnvVar {
                name: format!("{prefix}{k}"),
                value,
            }));
        }
        for var in container.env.iter().flatten() {
            let value = match &var.value_from {
                None => {
                    let lookup: HashMap<&str, &str> = env
                        .iter()
                        .map(|e| (e.name.as_str(), e.value.as_str()))
                        .collect();
                    Some(expand(var.value.as_deref().unwrap_or_default(), &lookup))
                }
                Some(source) => {
                    if let Some(key_ref) = &source.secret_key_ref {
                        let optional = key_ref.optional == Some(true);
                        match self.secret(&key_ref.name).await? {
                            Some(secret) => {
                                match secret_entries(&secret).find(|(k, _)| *k == key_ref.key) {
                                    Some((_, v)) => Some(String::from_utf8_lossy(&v).into_owned()),
                                    None if optional => None,
                                    None => bail!(
                                        "couldn't find key {} in Secret {}/{}",
                                        key_ref.key,
                                        self.namespace,
                                        key_ref.name
                                    ),
                                }
                            }
                            None if optional => None,
                            None => bail!("secret {:?} not found", key_ref.name),
                        }
                    } else if let Some(key_ref) = &source.config_map_key_ref {
                        let optional = key_ref.optional == Some(true);
                        match self.config_map(&key_ref.name).await? {
                            Some(cm) => {
                                match config_map_entries(&cm).find(|(k, _)| *k == key_ref.key) {
                                    Some((_, v)) => Some(String::from_utf8_lossy(&v).into_owned()),
                                    None if optional => None,
                                    None => bail!(
                                        "couldn't find key {} in ConfigMap {}/{}",
                                        key_ref.key,
                                        self.namespace,
                                        key_ref.name
                                    ),
                                }
                            }
                            None if optional => None,
                            None => bail!("configmap {:?} not found", key_ref.name),
                        }
                    } else if let Some(field) = &source.field_ref {
                        Some(self.field(&field.field_path, pod_ip, node_ip)?)
                    } else if let Some(resource) = &source.resource_field_ref {
                        let container_resources = container.resources.as_ref();
                        let quantity = match resource.resource.split_once('.') {
                            Some(("limits", name)) => container_resources
                                .and_then(|r| r.limits.as_ref())
                                .and_then(|l| l.get(name)),
                            Some(("requests", name)) => container_resources
                                .and_then(|r| r.requests.as_ref())
                                .and_then(|l| l.get(name)),
                            _ => None,
                        };
                        Some(quantity.map(|q| q.0.clone()).unwrap_or_else(|| "0".into()))
                    } else {
                        None
                    }
                }
            };
            if let Some(value) = value {
                env.push(ResolvedEnvVar {
                    name: var.name.clone(),
                    value,
                });
            }
        }
        Ok(env)
    }

    fn field(&self, path: &str, pod_ip: Ipv4Addr, node_ip: Ipv4Addr) -> anyhow::Result<String> {
        let meta = &self.pod.metadata;
        let spec = self.pod.spec.as_ref();
        let keyed = |prefix: &str, map: Option<&BTreeMap<String, String>>| -> Option<String> {
            let key = path
                .strip_prefix(prefix)?
                .strip_prefix("['")?
                .strip_suffix("']")?;
            Some(map.and_then(|m| m.get(key)).cloned().unwrap_or_default())
        };
        let value = match path {
            "metadata.name" => meta.name.clone().unwrap_or_default(),
            "metadata.namespace" => self.namespace.clone(),
            "metadata.uid" => meta.uid.clone().unwrap_or_default(),
            "spec.nodeName" => spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
            "spec.serviceAccountName" => spec
                .and_then(|s| s.service_account_name.clone())
                .unwrap_or_else(|| "default".into()),
            "status.podIP" | "status.podIPs" => pod_ip.to_string(),
            "status.hostIP" | "status.hostIPs" => node_ip.to_string(),
            _ => keyed("metadata.labels", meta.labels.as_ref())
                .or_else(|| keyed("metadata.annotations", meta.annotations.as_ref()))
                .ok_or_else(|| anyhow!("unsupported fieldRef {path:?}"))?,
        };
        Ok(value)
    }

    async fn volume(&mut self, volume: &Volume) -> anyhow::Result<ResolvedVolume> {
        if let Some(source) = &volume.secret {
            return Ok(ResolvedVolume::Secret {
                secret_name: source.secret_name.clone().unwrap_or_default(),
                files: self.secret_files(&volume.name, source).await?.into(),
            });
        }
        if let Some(source) = &volume.config_map {
            return Ok(ResolvedVolume::ConfigMap {
                config_map_name: source.name.clone(),
                files: self.config_map_files(&volume.name, source).await?.into(),
            });
        }
        if volume.empty_dir.is_some() {
            return Ok(ResolvedVolume::EmptyDir);
        }
        if let Some(source) = &volume.persistent_volume_claim {
            let api: Api<PersistentVolumeClaim> =
                Api::namespaced(self.client.clone(), &self.namespace);
            let claim = match api.get(&source.claim_name).await {
                Ok(claim) => claim,
                Err(error) if is_status(&error, 404) => {
                    bail!("persistentvolumeclaim {:?} not found", source.claim_name)
                }
                Err(error) => return Err(error.into()),
            };
            if claim.metadata.deletion_timestamp.is_some() {
                bail!(
                    "persistentvolumeclaim {:?} is being deleted",
                    source.claim_name
                );
            }
            return Ok(ResolvedVolume::PersistentVolumeClaim(ClaimIdentity {
                namespace: self.namespace.clone(),
                claim_name: source.claim_name.clone(),
                claim_uid: claim.uid().unwrap_or_default(),
                requested_storage: claim
                    .spec
                    .as_ref()
                    .and_then(|spec| spec.resources.as_ref())
                    .and_then(|resources| resources.requests.as_ref())
                    .and_then(|requests| requests.get("storage"))
                    .map(|quantity| quantity.0.clone()),
            }));
        }
        let value = serde_json::to_value(volume).unwrap_or_default();
        let kind = value
            .as_object()
            .and_then(|o| o.keys().find(|k| *k != "name").cloned())
            .unwrap_or_else(|| "unknown".into());
        Ok(ResolvedVolume::Unsupported { kind })
    }

    /// The files of Secret volume `volume` as the kubelet's secret plugin
    /// writes them (`SetUpAt`, `MakePayload`): every key, or the `items` at
    /// their paths; an `optional` Secret that does not exist gives no files.
    pub(super) async fn secret_files(
        &mut self,
        volume: &str,
        source: &SecretVolumeSource,
    ) -> anyhow::Result<BTreeMap<String, Vec<u8>>> {
        let name = source.secret_name.clone().unwrap_or_default();
        let optional = source.optional == Some(true);
        let entries: Vec<(String, Vec<u8>)> = match self.secret(&name).await? {
            Some(secret) => secret_entries(&secret).collect(),
            None if optional => vec![],
            None => {
                bail!("MountVolume.SetUp failed for volume {volume:?} : secret {name:?} not found")
            }
        };
        project(entries, source.items.as_deref(), optional, volume)
    }

    /// The files of ConfigMap volume `volume`, as [`Self::secret_files`] for a ConfigMap.
    pub(super) async fn config_map_files(
        &mut self,
        volume: &str,
        source: &ConfigMapVolumeSource,
    ) -> anyhow::Result<BTreeMap<String, Vec<u8>>> {
        let name = &source.name;
        let optional = source.optional == Some(true);
        let entries: Vec<(String, Vec<u8>)> = match self.config_map(name).await? {
            Some(cm) => config_map_entries(&cm).collect(),
            None if optional => vec![],
            None => bail!(
                "MountVolume.SetUp failed for volume {volume:?} : configmap {name:?} not found"
            ),
        };
        project(entries, source.items.as_deref(), optional, volume)
    }

    async fn secret(&mut self, name: &str) -> anyhow::Result<Option<Secret>> {
        if let Some(found) = self.secrets.get(name) {
            return Ok(found.clone());
        }
        if let Some(cache) = self.watched {
            let reference = ObjectRef::new(name).within(&self.namespace);
            return Ok(cache.secrets.get(&reference).map(|s| (*s).clone()));
        }
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &self.namespace);
        let found = api.get_opt(name).await?;
        self.secrets.insert(name.to_string(), found.clone());
        Ok(found)
    }

    async fn config_map(&mut self, name: &str) -> anyhow::Result<Option<ConfigMap>> {
        if let Some(found) = self.config_maps.get(name) {
            return Ok(found.clone());
        }
        if let Some(cache) = self.watched {
            let reference = ObjectRef::new(name).within(&self.namespace);
            return Ok(cache.config_maps.get(&reference).map(|c| (*c).clone()));
        }
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.namespace);
        let found = api.get_opt(name).await?;
        self.config_maps.insert(name.to_string(), found.clone());
        Ok(found)
    }
}

fn secret_entries(secret: &Secret) -> impl Iterator<Item = (String, Vec<u8>)> + '_ {
    let data = secret
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()));
    let string_data = secret
        .string_data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.clone().into_bytes()));
    data.chain(string_data)
}

fn config_map_entries(cm: &ConfigMap) -> impl Iterator<Item = (String, Vec<u8>)> + '_ {
    let data = cm
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.clone().into_bytes()));
    let binary = cm
        .binary_data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()));
    data.chain(binary)
}

/// Files of a Secret or ConfigMap volume: every key, or only the listed `items` at their paths.
fn project(
    entries: Vec<(String, Vec<u8>)>,
    items: Option<&[k8s_openapi::api::core::v1::KeyToPath]>,
    optional: bool,
    volume: &str,
) -> anyhow::Result<BTreeMap<String, Vec<u8>>> {
    let Some(items) = items.filter(|i| !i.is_empty()) else {
        return Ok(entries.into_iter().collect());
    };
    let by_key: BTreeMap<String, Vec<u8>> = entries.into_iter().collect();
    let mut files = BTreeMap::new();
    for item in items {
        match by_key.get(&item.key) {
            Some(bytes) => {
                files.insert(item.path.clone(), bytes.clone());
            }
            None if optional => {}
            None => bail!(
                "MountVolume.SetUp failed for volume {volume:?} : configured key {:?} not found",
                item.key
            ),
        }
    }
    Ok(files)
}

/// Expands `$(NAME)` references from `env` (unknown references stay as written;
/// `$$` escapes a `$`), as Kubernetes does for `env` values, `command` and `args`.
pub fn expand(input: &str, env: &HashMap<&str, &str>) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(position) = rest.find('$') {
        out.push_str(&rest[..position]);
        let after = &rest[position + 1..];
        if let Some(stripped) = after.strip_prefix('$') {
            out.push('$');
            rest = stripped;
        } else if let Some(reference) = after.strip_prefix('(') {
            match reference.find(')') {
                Some(end) => {
                    let name = &reference[..end];
                    match env.get(name) {
                        Some(value) => out.push_str(value),
                        None => {
                            out.push_str("$(");
                            out.push_str(name);
                            out.push(')');
                        }
                    }
                    rest = &reference[end + 1..];
                }
                None => {
                    out.push_str("$(");
                    rest = reference;
                }
            }
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_expand_like_kubernetes() {
        let env = HashMap::from([("A", "1"), ("B", "two")]);
        assert_eq!(expand("x$(A)y$(B)", &env), "x1ytwo");
        assert_eq!(expand("$(C) stays", &env), "$(C) stays");
        assert_eq!(expand("$$(A) escaped", &env), "$(A) escaped");
        assert_eq!(expand("dangling $(A", &env), "dangling $(A");
        assert_eq!(expand("cost $5", &env), "cost $5");
        assert_eq!(expand("trailing $", &env), "trailing $");
    }

    #[test]
    fn listed_items_select_and_rename_keys() {
        let entries = vec![
            ("a".to_string(), b"1".to_vec()),
            ("b".to_string(), b"2".to_vec()),
        ];
        let items = [k8s_openapi::api::core::v1::KeyToPath {
            key: "b".into(),
            path: "dir/b.txt".into(),
            mode: None,
        }];
        let files = project(entries.clone(), Some(&items), false, "v").unwrap();
        assert_eq!(
            files,
            BTreeMap::from([("dir/b.txt".to_string(), b"2".to_vec())])
        );
        assert_eq!(project(entries.clone(), None, false, "v").unwrap().len(), 2);
        let missing = [k8s_openapi::api::core::v1::KeyToPath {
            key: "zz".into(),
            path: "zz".into(),
            mode: None,
        }];
        assert!(project(entries.clone(), Some(&missing), false, "v").is_err());
        assert!(project(entries, Some(&missing), true, "v")
            .unwrap()
            .is_empty());
    }
}
