//! The root password the replica set holds (Kubernetes and MongoDB I/O):
//! remembered in a Secret the operator owns, and, when the credentials Secret
//! brings a new one, set on the set by the rsInit cluster's operator through
//! the one remembered.
//!
//! mongod reads the root password only to create the root user on an empty
//! data directory; a restart cannot change it on a running set. So the new
//! password is set with `updateUser`, once, w:"majority", by one cluster's
//! operator, and every cluster then authenticates with it. A crash between
//! `updateUser` and remembering is harmless: the next pass authenticates with
//! the new password and remembers it.

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::runtime::events::EventType;
use kube::ResourceExt;

use super::apply::apply_secret;
use super::context::PassContext;
use super::events::Notice;
use crate::api::MongoDB;
use crate::build::{self, names, BuildContext};
use crate::validate::{kept_user, RootCredentials, Validated};

/// Remembers `root` as the password the set holds, in
/// `<name>-held-root-credentials`; written only when it differs from what
/// this operator last wrote.
pub async fn remember_root(ctx: &PassContext, mongodb: &MongoDB, root: &RootCredentials) {
    let Ok(build_ctx) = BuildContext::from_mongodb(mongodb) else {
        return;
    };
    let secret = build::secrets::held_root_secret(&build_ctx, &root.username, &root.password);
    if let Err(error) = apply_secret(ctx, &secret).await {
        tracing::warn!(instance = %ctx.instance, %error, "the held root password could not be remembered");
    }
}

/// Sets the credentials Secret's new root password on the set, through the
/// one remembered, when this cluster initiates the set (`spec.rsInit`).
/// Returns whether the set now holds the new password.
pub async fn set_new_root_password(
    ctx: &PassContext,
    mongodb: &MongoDB,
    validated: &Validated,
) -> bool {
    if !mongodb.spec.rs_init {
        return false;
    }
    let new = &validated.root;
    let Some(held) = remembered_root(ctx, mongodb).await else {
        return false;
    };
    if held.username != new.username || held.password == new.password {
        return false;
    }
    let seeds: Vec<_> = validated
        .hostconf
        .members
        .iter()
        .map(|m| m.address.clone())
        .collect();
    let set_name = &mongodb.spec.repl_set_name;
    let set = ctx
        .gateway
        .set_password(&seeds, set_name, &new.username, &new.password, &held)
        .await;
    let (type_, reason, message) = match &set {
        Ok(()) => (
            EventType::Normal,
            Notice::RootPasswordSet,
            format!(
                "the root user {}'s new password is set on the replica set; every cluster uses it",
                new.username
            ),
        ),
        Err(error) => (
            EventType::Warning,
            Notice::RootPasswordNotSet,
            format!(
                "the root user {}'s new password could not be set on the replica set: {error}",
                new.username
            ),
        ),
    };
    ctx.events.publish(type_, reason.into(), message).await;
    if set.is_ok() {
        remember_root(ctx, mongodb, new).await;
    }
    set.is_ok()
}

/// The root user as remembered in `<name>-held-root-credentials`, if any.
async fn remembered_root(ctx: &PassContext, mongodb: &MongoDB) -> Option<RootCredentials> {
    let secrets = Api::<Secret>::namespaced(ctx.client.clone(), &ctx.instance.namespace);
    let name = names::held_root_secret(&mongodb.name_any());
    match secrets.get_opt(&name).await {
        Ok(secret) => kept_user(secret.as_ref()?),
        Err(error) => {
            tracing::warn!(instance = %ctx.instance, %error, "the held root password could not be read");
            None
        }
    }
}
