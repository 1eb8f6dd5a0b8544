//! The root user and the keyfile: read from the credentials Secret or derived
//! from `spec.rootPassword`, and checked as mongod will check them.

use std::fmt;

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;

use super::{CredentialFault, CredentialRole, InvalidInput, KeyfileFault, ReferencedObjects};
use crate::api::MongoDB;
use crate::build::{self, BuildContext, BuildError, CredentialsSource};

/// The shortest and longest keyfile mongod accepts.
const KEYFILE_LENGTH: std::ops::RangeInclusive<usize> = 6..=1024;

/// The root user's name and password. `Debug` never shows the password.
#[derive(Clone, PartialEq, Eq)]
pub struct RootCredentials {
    /// User name.
    pub username: String,
    /// Password.
    pub password: String,
}

impl fmt::Debug for RootCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RootCredentials")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// The operator's clusterAdmin user, from the Secret it keeps.
pub(super) fn operator_admin(referenced: &ReferencedObjects) -> Option<RootCredentials> {
    kept_user(referenced.operator_credentials.as_ref()?)
}

/// The user of one of the Secrets the operator keeps (`username`, `password`).
pub fn kept_user(secret: &Secret) -> Option<RootCredentials> {
    let data = secret.data.as_ref()?;
    let text = |key: &str| {
        let value = data.get(key)?;
        String::from_utf8(value.0.clone())
            .ok()
            .filter(|v| !v.is_empty())
    };
    Some(RootCredentials {
        username: text(build::secrets::USERNAME_KEY)?,
        password: text(build::secrets::PASSWORD_KEY)?,
    })
}

/// The root user: from the referenced Secret, or derived from
/// `spec.rootPassword` (FedState's fallback); the keyfile beside it is checked.
pub(super) fn shared_root_credentials(
    mongodb: &MongoDB,
    referenced: &ReferencedObjects,
) -> Result<(RootCredentials, String), InvalidInput> {
    let source = BuildContext::from_mongodb(mongodb)?.credentials().clone();
    let secret = referenced.credentials_secret.as_ref();
    match &source {
        CredentialsSource::Referenced {
            secret_name,
            keyfile_key,
            username_key,
            password_key,
        } => {
            let Some(secret) = secret else {
                return Err(InvalidInput::CredentialsSecretMissing {
                    name: secret_name.clone(),
                });
            };
            let data = secret.data.clone().unwrap_or_default();
            let value = |key: &str| data.get(key).map(|v| v.0.as_slice());
            let root = credentials(
                secret_name,
                (keyfile_key, value(keyfile_key)),
                (username_key, value(username_key)),
                (password_key, value(password_key)),
            )?;
            let keyfile = String::from_utf8_lossy(value(keyfile_key).unwrap_or_default());
            Ok((root, keyfile.into_owned()))
        }
        CredentialsSource::DerivedFromRootPassword { secret_name } => {
            let password = mongodb.spec.root_password.clone().unwrap_or_default();
            if password.trim().is_empty() {
                return Err(BuildError::MissingCredentials {
                    name: mongodb.name_any(),
                }
                .into());
            }
            let keyfile = build::derive_keyfile(&password);
            let root = credentials(
                secret_name,
                ("keyfile", Some(keyfile.as_bytes())),
                (
                    "username",
                    Some(build::secrets::DERIVED_ROOT_USER.as_bytes()),
                ),
                ("password", Some(password.as_bytes())),
            )?;
            Ok((root, keyfile))
        }
    }
}

/// A key of the credentials Secret and its value, if present.
type SecretEntry<'a> = (&'a str, Option<&'a [u8]>);

/// Checks the credentials Secret's values: the keyfile must be 6–1024 base64
/// characters (mongod refuses anything else), the user and password non-empty.
/// Returns the root user.
pub fn credentials(
    secret: &str,
    keyfile: SecretEntry,
    username: SecretEntry,
    password: SecretEntry,
) -> Result<RootCredentials, InvalidInput> {
    let text = |(key, value): SecretEntry, role| -> Result<String, InvalidInput> {
        let invalid = |fault| InvalidInput::CredentialsInvalid {
            secret: secret.to_string(),
            fault,
        };
        let key = key.to_string();
        let Some(value) = value else {
            return Err(invalid(CredentialFault::Missing { key, role }));
        };
        let Ok(value) = std::str::from_utf8(value) else {
            return Err(invalid(CredentialFault::NotText { key, role }));
        };
        if value.trim().is_empty() {
            return Err(invalid(CredentialFault::Empty { key, role }));
        }
        Ok(value.to_string())
    };
    let keyfile_key = keyfile.0;
    let keyfile = text(keyfile, CredentialRole::Keyfile)?;
    let invalid_keyfile = |fault| InvalidInput::KeyfileInvalid {
        secret: secret.to_string(),
        key: keyfile_key.to_string(),
        fault,
    };
    let base64 = |c: char| c.is_ascii_alphanumeric() || c == '+' || c == '/' || c == '=';
    if let Some(index) = keyfile
        .chars()
        .position(|c| !c.is_whitespace() && !base64(c))
    {
        return Err(invalid_keyfile(KeyfileFault::NotBase64 {
            position: index + 1,
        }));
    }
    let length = keyfile.chars().filter(|c| !c.is_whitespace()).count();
    if !KEYFILE_LENGTH.contains(&length) {
        return Err(invalid_keyfile(KeyfileFault::Length { length }));
    }
    let username = text(username, CredentialRole::Username)?;
    let password = text(password, CredentialRole::Password)?;
    Ok(RootCredentials { username, password })
}
