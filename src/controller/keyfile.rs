//! The keyfile Secrets no member needs any more, deleted (Kubernetes I/O).
//!
//! Each keyfile the members ran is an immutable Secret of its own
//! ([`crate::build::keyfile_secret`]); once every local StatefulSet's
//! template and every local pod mounts the one planned, the others go. While
//! any of them mounts another one, nothing is deleted: a pod re-created from
//! a template the cache has not shown yet still finds its Secret.

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams};

use super::context::PassContext;
use crate::build::names;
use crate::validate::{keyfile_secret_names, ReferencedObjects};

/// Deletes the instance's keyfile Secrets other than `planned` once every
/// local template and pod mounts `planned` (as `referenced` read them).
pub async fn prune_keyfile_secrets(
    ctx: &PassContext,
    referenced: &ReferencedObjects,
    planned: &str,
) {
    let instance = &ctx.instance;
    let mounted = keyfile_secret_names(&referenced.stateful_sets, &referenced.pods);
    if mounted.iter().any(|name| name != planned) {
        return;
    }
    let prefix = names::keyfile_secret_prefix(&instance.name);
    let unused: Vec<String> = ctx
        .caches
        .secrets
        .names_in(&instance.namespace)
        .into_iter()
        .filter(|name| name.starts_with(&prefix) && name != planned)
        .collect();
    let secrets = Api::<Secret>::namespaced(ctx.client.clone(), &instance.namespace);
    for name in unused {
        match secrets.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {
                tracing::info!(instance = %instance, secret = %name, "an unused keyfile Secret deleted")
            }
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => {
                tracing::warn!(instance = %instance, secret = %name, %error, "an unused keyfile Secret could not be deleted")
            }
        }
    }
}
