//! Credentials: where they come from, the Secrets the operator derives, and the
//! pure derivations behind them.
//!
//! Two sources of the keyfile and root user ([`CredentialsSource`]):
//! - a propagated Secret named by `spec.credentialsSecretRef` (preferred): the
//!   operator only refers to it and creates nothing;
//! - FedState's plain-text `spec.rootPassword` (fallback): the operator builds
//!   `<name>-credentials` with a keyfile derived from the password, so that every
//!   cluster computes the same keyfile without exchanging anything.
//!
//! The operator-managed users (`clusterMonitor` for the exporter, `clusterAdmin`
//! for the operator) get passwords derived from the root password with
//! HMAC-SHA256: users replicate through the replica set, so every cluster must
//! compute the same password. The derivations are domain-separated and versioned
//! so that no derived value equals another or the root password's hash.
//!
//! Values built here are secrets: never log, format or put them in status. The
//! status holds only a [`fingerprint`].

use std::collections::BTreeMap;

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use sha2::{Digest, Sha256};

use super::labels::instance_labels;
use super::{names, BuildContext, BuildError};
use crate::api::{ImagePullSecretSpec, MongoDBSpec};
use crate::keyfile::Keyfile;

/// Key of the keyfile in the derived credentials Secret.
pub const KEYFILE_KEY: &str = "keyfile";
/// Key of a user's name in every Secret the operator builds.
pub const USERNAME_KEY: &str = "username";
/// Key of a user's password in every Secret the operator builds.
pub const PASSWORD_KEY: &str = "password";
/// Key of the database name in the database user's Secret.
pub const DATABASE_KEY: &str = "database";
/// The root user's name when derived from `spec.rootPassword` (FedState's).
pub const DERIVED_ROOT_USER: &str = "root";
/// The exporter's user, with role `clusterMonitor`.
pub const MONITOR_USER: &str = "clusterMonitor";
/// The operator's user, with role `clusterAdmin`.
pub const ADMIN_USER: &str = "clusterAdmin";

const KEYFILE_DOMAIN: &[u8] = b"mongodb-member-operator/keyfile/v1";
const USER_PASSWORD_DOMAIN: &str = "mongodb-member-operator/user-password/v1";
/// SHA-256 blocks in a derived keyfile: 18 × 32 bytes = 576 bytes = 768 base64
/// characters, no padding, inside mongod's 6–1024.
const KEYFILE_BLOCKS: usize = 18;
/// Length of a derived user password: 32 base64url characters = 192 bits.
const USER_PASSWORD_CHARS: usize = 32;

/// Where the keyfile and the root user's name and password live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialsSource {
    /// A Secret propagated to every cluster (`spec.credentialsSecretRef`); the
    /// operator creates nothing.
    Referenced {
        /// Secret name, in the instance's namespace.
        secret_name: String,
        /// Key of the keyfile.
        keyfile_key: String,
        /// Key of the root user's name.
        username_key: String,
        /// Key of the root user's password.
        password_key: String,
    },
    /// FedState's fallback: the operator builds this Secret from
    /// `spec.rootPassword` with [`derived_credentials_secret`].
    DerivedFromRootPassword {
        /// `<name>-credentials`.
        secret_name: String,
    },
}

impl CredentialsSource {
    /// The referenced Secret when `spec.credentialsSecretRef` is set (even if
    /// `spec.rootPassword` is set too), else derivation from a non-empty
    /// `spec.rootPassword`.
    pub(super) fn resolve(instance: &str, spec: &MongoDBSpec) -> Result<Self, BuildError> {
        if let Some(reference) = &spec.credentials_secret_ref {
            return Ok(CredentialsSource::Referenced {
                secret_name: reference.name.clone(),
                keyfile_key: reference.keyfile_key.clone(),
                username_key: reference.username_key.clone(),
                password_key: reference.password_key.clone(),
            });
        }
        match spec_root_password(spec) {
            Some(_) => Ok(CredentialsSource::DerivedFromRootPassword {
                secret_name: names::derived_credentials_secret(instance),
            }),
            None => Err(BuildError::MissingCredentials {
                name: instance.to_string(),
            }),
        }
    }

    /// Name of the Secret holding the credentials.
    pub fn secret_name(&self) -> &str {
        match self {
            CredentialsSource::Referenced { secret_name, .. }
            | CredentialsSource::DerivedFromRootPassword { secret_name } => secret_name,
        }
    }

    /// Key of the keyfile in that Secret.
    pub fn keyfile_key(&self) -> &str {
        match self {
            CredentialsSource::Referenced { keyfile_key, .. } => keyfile_key,
            CredentialsSource::DerivedFromRootPassword { .. } => KEYFILE_KEY,
        }
    }

    /// Key of the root user's name in that Secret.
    pub fn username_key(&self) -> &str {
        match self {
            CredentialsSource::Referenced { username_key, .. } => username_key,
            CredentialsSource::DerivedFromRootPassword { .. } => USERNAME_KEY,
        }
    }

    /// Key of the root user's password in that Secret.
    pub fn password_key(&self) -> &str {
        match self {
            CredentialsSource::Referenced { password_key, .. } => password_key,
            CredentialsSource::DerivedFromRootPassword { .. } => PASSWORD_KEY,
        }
    }
}

/// The keyfile derived from `spec.rootPassword`, when the credentials come
/// from it (no `spec.credentialsSecretRef`).
pub(super) fn derived_keyfile(spec: &MongoDBSpec) -> Option<String> {
    if spec.credentials_secret_ref.is_some() {
        return None;
    }
    spec_root_password(spec).map(derive_keyfile)
}

/// `spec.rootPassword` when set and not empty.
fn spec_root_password(spec: &MongoDBSpec) -> Option<&str> {
    spec.root_password
        .as_deref()
        .filter(|password| !password.is_empty())
}

/// The keyfile every cluster derives from the same root password: base64 of a
/// chain of SHA-256 blocks over a domain-separated input (block 0 hashes the
/// domain and the password, each next block hashes the previous one with them).
/// 768 base64 characters.
pub fn derive_keyfile(root_password: &str) -> String {
    let mut material = Vec::with_capacity(KEYFILE_BLOCKS * 32);
    let mut previous: Option<[u8; 32]> = None;
    for _ in 0..KEYFILE_BLOCKS {
        let mut hasher = Sha256::new();
        if let Some(block) = previous {
            hasher.update(block);
        }
        hasher.update(KEYFILE_DOMAIN);
        hasher.update([0u8]);
        hasher.update(root_password.as_bytes());
        let block: [u8; 32] = hasher.finalize().into();
        material.extend_from_slice(&block);
        previous = Some(block);
    }
    STANDARD.encode(material)
}

/// The password of an operator-managed user, derived from the root password:
/// HMAC-SHA256 keyed by the root password over a versioned domain and the user
/// name, base64url, 32 characters. The same in every cluster.
pub fn derive_user_password(root_password: &str, user: &str) -> String {
    let message = format!("{USER_PASSWORD_DOMAIN}:{user}");
    let mut password =
        URL_SAFE_NO_PAD.encode(hmac_sha256(root_password.as_bytes(), message.as_bytes()));
    password.truncate(USER_PASSWORD_CHARS);
    password
}

/// A non-secret fingerprint of a secret, for status: the first 16 hex digits of
/// its SHA-256.
pub fn fingerprint(secret: &str) -> String {
    let mut hex = sha256_hex(secret.as_bytes());
    hex.truncate(16);
    hex
}

/// Lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// HMAC-SHA256 (RFC 2104).
fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    const BLOCK_SIZE: usize = 64;
    let mut block_key = [0u8; BLOCK_SIZE];
    if key.len() > BLOCK_SIZE {
        block_key[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block_key[..key.len()].copy_from_slice(key);
    }
    let padded = |pad: u8| block_key.map(|byte| byte ^ pad);
    let inner = Sha256::new()
        .chain_update(padded(0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(padded(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

/// `<name>-credentials` (keyfile, `username: root`, password) when the
/// credentials are derived from `spec.rootPassword`; `None` when they come from
/// a referenced Secret.
pub fn derived_credentials_secret(ctx: &BuildContext) -> Result<Option<Secret>, BuildError> {
    let CredentialsSource::DerivedFromRootPassword { secret_name } = ctx.credentials() else {
        return Ok(None);
    };
    let root_password =
        spec_root_password(ctx.spec()).ok_or_else(|| BuildError::MissingCredentials {
            name: ctx.name().to_string(),
        })?;
    let data = [
        (KEYFILE_KEY, derive_keyfile(root_password)),
        (USERNAME_KEY, DERIVED_ROOT_USER.to_string()),
        (PASSWORD_KEY, root_password.to_string()),
    ];
    Ok(Some(opaque_secret(ctx, secret_name.clone(), data)))
}

/// The key of the file mongod reads in a keyfile Secret.
pub const KEYFILE_SECRET_KEY: &str = "keyfile";

/// `<name>-keyfile-<digest>`: the keyfile this cluster's members run
/// ([`BuildContext::keyfile`]), immutable: a new keyfile is a new Secret.
pub fn keyfile_secret(ctx: &BuildContext) -> Result<Secret, BuildError> {
    let keyfile = ctx.keyfile()?;
    let name = keyfile_secret_name(ctx.name(), keyfile);
    Ok(Secret {
        immutable: Some(true),
        ..opaque_secret(ctx, name, [(KEYFILE_SECRET_KEY, keyfile.render())])
    })
}

/// The key of the certificate then its key, in the TLS Secret.
pub const TLS_CERTIFICATE_KEY_FILE: &str = "mongod.pem";
/// The key of the CA bundle, in the TLS Secret.
pub const TLS_CA_FILE: &str = "ca.pem";

/// `<name>-mongod-tls`: the members' certificate and key in the one file
/// mongod reads (`--tlsCertificateKeyFile`), and the CA bundle, from
/// `spec.tls.certificateSecretRef` once checked. Updated in place, so a
/// member's mounted files follow it without a restart.
pub fn tls_secret(ctx: &BuildContext) -> Option<Secret> {
    let tls = ctx.tls()?;
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    Some(opaque_secret(
        ctx,
        names::tls_secret(ctx.name()),
        [
            (TLS_CERTIFICATE_KEY_FILE, text(&tls.certificate_key)),
            (TLS_CA_FILE, text(&tls.ca)),
        ],
    ))
}

/// The name of the Secret holding `keyfile` ([`names::keyfile_secret`]).
pub fn keyfile_secret_name(instance: &str, keyfile: &Keyfile) -> String {
    names::keyfile_secret(instance, &sha256_hex(keyfile.render().as_bytes()))
}

/// `<name>-monitor-credentials`: the exporter's `clusterMonitor` user, with its
/// password derived from the root password (read by the caller from the
/// credentials Secret or `spec.rootPassword`).
pub fn monitor_credentials_secret(ctx: &BuildContext, root_password: &str) -> Secret {
    operator_user_secret(
        ctx,
        names::monitor_credentials_secret(ctx.name()),
        MONITOR_USER,
        root_password,
    )
}

/// `<name>-admin-credentials`: the operator's `clusterAdmin` user, with its
/// password derived from the root password.
pub fn admin_credentials_secret(ctx: &BuildContext, root_password: &str) -> Secret {
    operator_user_secret(
        ctx,
        names::admin_credentials_secret(ctx.name()),
        ADMIN_USER,
        root_password,
    )
}

fn operator_user_secret(
    ctx: &BuildContext,
    secret_name: String,
    user: &str,
    root_password: &str,
) -> Secret {
    let data = [
        (USERNAME_KEY, user.to_string()),
        (PASSWORD_KEY, derive_user_password(root_password, user)),
    ];
    opaque_secret(ctx, secret_name, data)
}

/// `<name>-held-root-credentials`: the root user as the replica set last
/// took it, so that a new password in the credentials Secret can be set on
/// the set through the one it still holds.
pub fn held_root_secret(ctx: &BuildContext, username: &str, password: &str) -> Secret {
    let data = [
        (USERNAME_KEY, username.to_string()),
        (PASSWORD_KEY, password.to_string()),
    ];
    opaque_secret(ctx, names::held_root_secret(ctx.name()), data)
}

/// `<name>-dbuser` (database, username, password) when `spec.dbUserSpec.enable`.
/// The password is `spec.dbUserSpec.password`, or, when that is empty, derived
/// from the root password like the operator-managed users' (so every cluster
/// agrees on it).
pub fn db_user_secret(
    ctx: &BuildContext,
    root_password: &str,
) -> Result<Option<Secret>, BuildError> {
    let db_user = &ctx.spec().db_user_spec;
    if !db_user.enable {
        return Ok(None);
    }
    if db_user.name.is_empty() || db_user.user.is_empty() {
        return Err(BuildError::IncompleteDbUser);
    }
    let password = match db_user.password.as_deref() {
        Some(password) if !password.is_empty() => password.to_string(),
        _ => derive_user_password(root_password, &db_user.user),
    };
    let data = [
        (DATABASE_KEY, db_user.name.clone()),
        (USERNAME_KEY, db_user.user.clone()),
        (PASSWORD_KEY, password),
    ];
    Ok(Some(opaque_secret(
        ctx,
        names::db_user_secret(ctx.name()),
        data,
    )))
}

/// `<name>-image-pull`, a `kubernetes.io/dockerconfigjson` Secret, when
/// `spec.imagePullSecret` holds a user and a password.
pub fn image_pull_secret(ctx: &BuildContext) -> Option<Secret> {
    let registry = ctx.spec().registry_credentials()?;
    let data = BTreeMap::from([(
        ".dockerconfigjson".to_string(),
        ByteString(docker_config_json(registry)),
    )]);
    Some(Secret {
        metadata: ctx.object_meta(
            names::image_pull_secret(ctx.name()),
            instance_labels(ctx.name()),
        ),
        type_: Some("kubernetes.io/dockerconfigjson".to_string()),
        data: Some(data),
        ..Secret::default()
    })
}

/// `{"auths": {<registry>: {username, password, auth}}}` as the kubelet reads it.
fn docker_config_json(registry: &ImagePullSecretSpec) -> Vec<u8> {
    let auth = STANDARD.encode(format!("{}:{}", registry.username, registry.password));
    let config = serde_json::json!({
        "auths": {
            registry.registry.as_str(): { "username": registry.username, "password": registry.password, "auth": auth }
        }
    });
    config.to_string().into_bytes()
}

fn opaque_secret<const N: usize>(
    ctx: &BuildContext,
    secret_name: String,
    data: [(&str, String); N],
) -> Secret {
    let data = data
        .into_iter()
        .map(|(key, value)| (key.to_string(), ByteString(value.into_bytes())))
        .collect();
    Secret {
        metadata: ctx.object_meta(secret_name, instance_labels(ctx.name())),
        type_: Some("Opaque".to_string()),
        data: Some(data),
        ..Secret::default()
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::*;
    use crate::api::DbUserSpec;

    fn value(secret: &Secret, key: &str) -> String {
        String::from_utf8(secret.data.as_ref().unwrap()[key].0.clone()).unwrap()
    }

    fn is_base64_char(c: char) -> bool {
        c.is_ascii_alphanumeric() || c == '+' || c == '/' || c == '='
    }

    #[test]
    fn derived_keyfile_is_the_same_for_the_same_password_and_differs_for_another() {
        assert_eq!(derive_keyfile(ROOT_PASSWORD), derive_keyfile(ROOT_PASSWORD));
        assert_ne!(
            derive_keyfile(ROOT_PASSWORD),
            derive_keyfile("another password")
        );
    }

    #[test]
    fn derived_keyfile_has_a_length_and_charset_mongod_accepts() {
        for password in ["", "x", ROOT_PASSWORD, &"long".repeat(500)] {
            let keyfile = derive_keyfile(password);
            assert!(
                (6..=1024).contains(&keyfile.len()),
                "length {}",
                keyfile.len()
            );
            assert_eq!(keyfile.len(), 768);
            assert!(keyfile.chars().all(is_base64_char));
        }
    }

    #[test]
    fn derived_user_passwords_are_deterministic_and_separate_users_and_root_passwords() {
        let monitor = derive_user_password(ROOT_PASSWORD, MONITOR_USER);
        assert_eq!(monitor, derive_user_password(ROOT_PASSWORD, MONITOR_USER));
        assert_ne!(monitor, derive_user_password(ROOT_PASSWORD, ADMIN_USER));
        assert_ne!(
            monitor,
            derive_user_password("another password", MONITOR_USER)
        );
        assert_eq!(monitor.len(), 32);
        assert!(monitor
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'));
    }

    #[test]
    fn hmac_sha256_matches_rfc_4231_test_vectors() {
        let hex = |bytes: [u8; 32]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
        assert_eq!(
            hex(hmac_sha256(b"Jefe", b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        // Test case 6: a key longer than the block size is hashed first.
        assert_eq!(
            hex(hmac_sha256(
                &[0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First"
            )),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn fingerprint_is_16_hex_digits_of_sha256() {
        assert_eq!(fingerprint("abc"), "ba7816bf8f01cfea");
        assert_ne!(fingerprint("abd"), fingerprint("abc"));
    }

    #[test]
    fn credentials_come_from_the_referenced_secret_when_one_is_set() {
        let mut mongodb = mongodb_with_secret_ref();
        mongodb.spec.root_password = Some(ROOT_PASSWORD.to_string());
        let ctx = BuildContext::from_mongodb(&mongodb).unwrap();
        assert_eq!(
            ctx.credentials(),
            &CredentialsSource::Referenced {
                secret_name: "shared-creds".to_string(),
                keyfile_key: "kf".to_string(),
                username_key: "user".to_string(),
                password_key: "pass".to_string(),
            }
        );
        assert_eq!(derived_credentials_secret(&ctx).unwrap(), None);
    }

    #[test]
    fn credentials_derived_from_root_password_build_the_fedstate_secret() {
        let mongodb = mongodb();
        let ctx = BuildContext::from_mongodb(&mongodb).unwrap();
        let source = ctx.credentials();
        assert_eq!(
            (
                source.secret_name(),
                source.keyfile_key(),
                source.username_key(),
                source.password_key()
            ),
            ("demo-credentials", "keyfile", "username", "password")
        );
        let secret = derived_credentials_secret(&ctx).unwrap().unwrap();
        assert_eq!(secret.metadata.name.as_deref(), Some("demo-credentials"));
        assert_eq!(secret.metadata.namespace.as_deref(), Some(NAMESPACE));
        assert_eq!(
            secret.metadata.owner_references.as_ref().unwrap()[0].controller,
            Some(true)
        );
        assert_eq!(value(&secret, "keyfile"), derive_keyfile(ROOT_PASSWORD));
        assert_eq!(value(&secret, "username"), "root");
        assert_eq!(value(&secret, "password"), ROOT_PASSWORD);
    }

    #[test]
    fn operator_user_secrets_hold_the_derived_passwords() {
        let mongodb = mongodb();
        let ctx = BuildContext::from_mongodb(&mongodb).unwrap();
        let monitor = monitor_credentials_secret(&ctx, ROOT_PASSWORD);
        assert_eq!(
            monitor.metadata.name.as_deref(),
            Some("demo-monitor-credentials")
        );
        assert_eq!(value(&monitor, "username"), "clusterMonitor");
        assert_eq!(
            value(&monitor, "password"),
            derive_user_password(ROOT_PASSWORD, "clusterMonitor")
        );
        let admin = admin_credentials_secret(&ctx, ROOT_PASSWORD);
        assert_eq!(
            admin.metadata.name.as_deref(),
            Some("demo-admin-credentials")
        );
        assert_eq!(value(&admin, "username"), "clusterAdmin");
        assert_eq!(
            value(&admin, "password"),
            derive_user_password(ROOT_PASSWORD, "clusterAdmin")
        );
        assert!(admin.metadata.owner_references.is_some());
    }

    #[test]
    fn db_user_secret_exists_only_when_enabled_and_uses_the_spec_password() {
        let mut mongodb = mongodb();
        let ctx = BuildContext::from_mongodb(&mongodb).unwrap();
        assert_eq!(db_user_secret(&ctx, ROOT_PASSWORD).unwrap(), None);

        mongodb.spec.db_user_spec = DbUserSpec {
            enable: true,
            name: "app".into(),
            user: "appuser".into(),
            password: Some("app-pw".into()),
        };
        let ctx = BuildContext::from_mongodb(&mongodb).unwrap();
        let secret = db_user_secret(&ctx, ROOT_PASSWORD).unwrap().unwrap();
        assert_eq!(secret.metadata.name.as_deref(), Some("demo-dbuser"));
        assert_eq!(
            (value(&secret, "database"), value(&secret, "username")),
            ("app".into(), "appuser".into())
        );
        assert_eq!(value(&secret, "password"), "app-pw");
    }

    #[test]
    fn db_user_secret_without_spec_password_derives_one_every_cluster_agrees_on() {
        let mut mongodb = mongodb();
        mongodb.spec.db_user_spec = DbUserSpec {
            enable: true,
            name: "app".into(),
            user: "appuser".into(),
            password: None,
        };
        let ctx = BuildContext::from_mongodb(&mongodb).unwrap();
        let secret = db_user_secret(&ctx, ROOT_PASSWORD).unwrap().unwrap();
        assert_eq!(
            value(&secret, "password"),
            derive_user_password(ROOT_PASSWORD, "appuser")
        );
    }

    #[test]
    fn db_user_secret_refuses_an_enabled_user_without_names() {
        let mut mongodb = mongodb();
        mongodb.spec.db_user_spec = DbUserSpec {
            enable: true,
            ..DbUserSpec::default()
        };
        let ctx = BuildContext::from_mongodb(&mongodb).unwrap();
        assert_eq!(
            db_user_secret(&ctx, ROOT_PASSWORD).unwrap_err(),
            BuildError::IncompleteDbUser
        );
    }

    #[test]
    fn image_pull_secret_is_a_docker_config_json_only_when_requested() {
        let mut mongodb = mongodb();
        assert_eq!(
            image_pull_secret(&BuildContext::from_mongodb(&mongodb).unwrap()),
            None
        );

        mongodb.spec.image_pull_secret = Some(ImagePullSecretSpec {
            username: "puller".into(),
            password: "registry-pw".into(),
            registry: "registry.example.com".into(),
        });
        let secret = image_pull_secret(&BuildContext::from_mongodb(&mongodb).unwrap()).unwrap();
        assert_eq!(secret.metadata.name.as_deref(), Some("demo-image-pull"));
        assert_eq!(
            secret.type_.as_deref(),
            Some("kubernetes.io/dockerconfigjson")
        );
        let config: serde_json::Value =
            serde_json::from_str(&value(&secret, ".dockerconfigjson")).unwrap();
        let entry = &config["auths"]["registry.example.com"];
        assert_eq!(entry["username"], "puller");
        assert_eq!(entry["password"], "registry-pw");
        assert_eq!(entry["auth"], STANDARD.encode("puller:registry-pw"));
    }

    #[test]
    fn the_keyfile_secret_is_immutable_and_named_by_its_content() {
        let mongodb = mongodb();
        let ctx = BuildContext::from_mongodb(&mongodb).unwrap();
        let secret = keyfile_secret(&ctx).unwrap();
        assert_eq!(secret.immutable, Some(true));
        let file = value(&secret, KEYFILE_SECRET_KEY);
        assert_eq!(file, format!("- {}\n", derive_keyfile(ROOT_PASSWORD)));
        let other = Keyfile::of_key("b3RoZXIga2V5ZmlsZQ==");
        let renamed = keyfile_secret(&ctx.clone().with_keyfile(other)).unwrap();
        assert_ne!(secret.metadata.name, renamed.metadata.name);
        assert!(secret.metadata.name.unwrap().starts_with("demo-keyfile-"));
        // A referenced credentials Secret's keyfile must be planned first.
        let referenced = mongodb_with_secret_ref();
        let unplanned = BuildContext::from_mongodb(&referenced).unwrap();
        assert_eq!(
            keyfile_secret(&unplanned),
            Err(BuildError::KeyfileNotPlanned)
        );
    }
}
