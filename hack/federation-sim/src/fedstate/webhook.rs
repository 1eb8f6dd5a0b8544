//! FedState's admission webhooks, `api/v1alpha1/multicloudmongodb_webhook.go`
//! (`Default`, `ValidateUpdate`), with `pkg/util/rand.go` (`GenerateKey`) for
//! the root password it generates.

use base64::Engine;
use rand::RngCore;

use super::MultiCloudMongoDB;

/// The webhook's default image (`defaultMongoImage`).
pub const DEFAULT_IMAGE: &str = "mongo:3.6";

/// `util.GenerateKey(8)`: 8 random bytes in standard base64 (12 characters,
/// possibly with `+`, `/` and a trailing `=`).
pub fn generate_root_password(rng: &mut impl RngCore) -> String {
    let mut bytes = [0u8; 8];
    rng.fill_bytes(&mut bytes);
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// What the Karmada API server stores for a `kubectl apply` of `object`
/// (`old`: the stored object, if any): fields the user did not set keep their
/// stored (webhook-defaulted) values, then FedState's mutating webhook
/// (`Default`) and, on update, its validating webhook (`ValidateUpdate`) run.
pub fn admit(
    mut object: MultiCloudMongoDB,
    old: Option<&MultiCloudMongoDB>,
    rng: &mut impl RngCore,
) -> Result<MultiCloudMongoDB, String> {
    if let Some(old) = old {
        if object.spec.auth.root_passwd.is_none() {
            object.spec.auth.root_passwd = old.spec.auth.root_passwd.clone();
        }
        if object.spec.scheduler.scheduler_name.is_none() {
            object.spec.scheduler.scheduler_name = old.spec.scheduler.scheduler_name.clone();
        }
        if object.spec.scheduler.scheduler_mode.is_none() {
            object.spec.scheduler.scheduler_mode = old.spec.scheduler.scheduler_mode.clone();
        }
        object.status = old.status.clone();
    }
    // Default()
    if object.spec.scheduler.scheduler_name.is_none() {
        object.spec.scheduler.scheduler_name = Some("multicloud-middleware-scheduler".into());
    }
    if object.spec.scheduler.scheduler_mode.is_none() {
        object.spec.scheduler.scheduler_mode = Some("Uniform".into());
    }
    if object.spec.auth.root_passwd.is_none() {
        object.spec.auth.root_passwd = Some(generate_root_password(rng));
    }
    if object.spec.resource.is_empty() {
        return Err(
            "FedState's mutating webhook panics on a MultiCloudMongoDB without \
                    spec.resource (its default calls resource.MustParse(\"500mi\"), not a \
                    quantity), so the API server refuses the object: set spec.resource"
                .into(),
        );
    }
    if object.spec.image_setting.image.is_empty() {
        object.spec.image_setting.image = DEFAULT_IMAGE.into();
    }
    // ValidateUpdate()
    if old.is_some() {
        match object.spec.replicaset {
            None => {
                return Err("FedState's validating webhook panics on an update without \
                            spec.replicaset"
                    .into())
            }
            Some(n) if n < 1 => {
                return Err(format!(
                    "number of replicas cannot be less than 1, name: {}",
                    object.name
                ))
            }
            _ => {}
        }
        if object.scheduler_result.cluster_with_replicaset.is_empty() {
            return Err(format!("not schedulerResult, name: {}", object.name));
        }
    }
    Ok(object)
}
