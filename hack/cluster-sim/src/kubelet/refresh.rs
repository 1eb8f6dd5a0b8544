//! Keeping the Secret and ConfigMap volumes of running containers current, as
//! the kubelet does: on every pod sync (`--sync-frequency`) its volume manager
//! marks the pod's volumes whose plugin `RequiresRemount` for a new `SetUp`,
//! and the secret and configMap plugins write the object's current files
//! through the atomic writer, which swaps the whole set at once. Here each pod
//! worker re-resolves, every `volume_sync_period`, the Secret and ConfigMap
//! mounts of its running containers from the watch caches (the kubelet's
//! default `Watch` change detection strategy) with the same code as at container start
//! (`items` projected, `optional` applied) and swaps the files in when they
//! changed. A `subPath` mount is never refreshed (it is a bind mount of the
//! files as they were at start); a Secret or ConfigMap that cannot be read,
//! or no longer fits (gone and not `optional`, a listed key missing), leaves
//! the files as they are, with a debug log line.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::{Client, ResourceExt};
use tokio::time::Instant;

use super::resolve::Resolver;
use crate::cache::Cache;
use crate::runtime::{ResolvedContainer, ResolvedVolume, VolumeFiles};

/// A Secret or ConfigMap mount of a running container that the kubelet keeps current.
pub struct RefreshableMount {
    container: String,
    volume: String,
    files: VolumeFiles,
}

/// The mounts of `container` that are refreshed while it runs: its Secret and
/// ConfigMap volumes, but for those mounted with `subPath`. They share their
/// files with the container the runtime was given.
pub fn refreshable(container: &ResolvedContainer) -> Vec<RefreshableMount> {
    container
        .mounts
        .iter()
        .filter(|m| m.sub_path.is_none())
        .filter_map(|m| match &m.volume {
            ResolvedVolume::Secret { files, .. } | ResolvedVolume::ConfigMap { files, .. } => {
                Some(RefreshableMount {
                    container: container.name.clone(),
                    volume: m.volume_name.clone(),
                    files: files.clone(),
                })
            }
            _ => None,
        })
        .collect()
}

/// When a pod worker next refreshes its containers' volumes.
pub struct VolumeRefresh {
    period: Duration,
    next: Instant,
}

impl VolumeRefresh {
    /// Refreshes every `period`, the first one a period from now.
    pub fn new(period: Duration) -> Self {
        VolumeRefresh {
            period,
            next: Instant::now() + period,
        }
    }

    /// When the next refresh is due.
    pub fn due(&self) -> Instant {
        self.next
    }

    /// Re-reads the Secrets and ConfigMaps behind `mounts` (each object once)
    /// and swaps in the files of every mount whose content changed; the next
    /// refresh is then a period away.
    pub async fn run(
        &mut self,
        client: &Client,
        cache: &Cache,
        pod: &Pod,
        mounts: &[&RefreshableMount],
    ) {
        let mut resolver = Resolver::watching(client, cache, pod);
        let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_deref());
        for mount in mounts {
            let Some(volume) = volumes
                .into_iter()
                .flatten()
                .find(|v| v.name == mount.volume)
            else {
                continue;
            };
            let files = if let Some(source) = &volume.secret {
                resolver.secret_files(&volume.name, source).await
            } else if let Some(source) = &volume.config_map {
                resolver.config_map_files(&volume.name, source).await
            } else {
                continue;
            };
            match files {
                Ok(files) => {
                    if mount.files.replace(files) {
                        tracing::debug!(pod = %pod.name_any(), container = %mount.container,
                            volume = %mount.volume, "refreshed the files of a volume");
                    }
                }
                Err(error) => {
                    tracing::debug!(pod = %pod.name_any(), container = %mount.container,
                        volume = %mount.volume, error = format!("{error:#}"),
                        "could not refresh a volume; its files stay as they are");
                }
            }
        }
        self.next = Instant::now() + self.period;
    }
}
