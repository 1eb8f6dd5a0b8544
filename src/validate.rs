//! Stage `validate` (pure): checks what the control plane propagated before the
//! operator acts on it — the VIP label, the hostconf ConfigMap and the shared
//! credentials — and says precisely what is wrong. A failed check stops the pass
//! with a condition and an Event; the operator then waits for the object to change.

use std::collections::BTreeMap;

use crate::api::VIP_LABEL;
use crate::hostconf::HostConf;
use crate::mongo::RootCredentials;
use crate::status::Problem;

/// The shortest and longest keyfile mongod accepts.
const KEYFILE_LENGTH: std::ops::RangeInclusive<usize> = 6..=1024;

/// This cluster's VIP, from the `MongoDB` object's labels.
pub fn vip(labels: &BTreeMap<String, String>) -> Result<String, Problem> {
    let vip = labels.get(VIP_LABEL).map(|v| v.trim()).unwrap_or_default();
    if vip.is_empty() {
        return Err(Problem {
            reason: "VipLabelMissing",
            message: format!("label {VIP_LABEL} is missing: the control plane sets it to this cluster's VIP, which every member address starts with"),
        });
    }
    let unbracketed_non_ipv6 =
        vip.contains(':') && !vip.starts_with('[') && vip.parse::<std::net::Ipv6Addr>().is_err();
    if unbracketed_non_ipv6 || vip.contains(char::is_whitespace) {
        return Err(Problem {
            reason: "VipLabelInvalid",
            message: format!("label {VIP_LABEL} is {vip:?}, not an IP address or host name"),
        });
    }
    Ok(vip.to_string())
}

/// The hostconf ConfigMap's data, parsed.
pub fn hostconf(
    config_map: &str,
    data: Option<&BTreeMap<String, String>>,
) -> Result<HostConf, Problem> {
    let empty = BTreeMap::new();
    HostConf::from_config_map_data(data.unwrap_or(&empty)).map_err(|error| Problem {
        reason: "HostconfInvalid",
        message: format!("ConfigMap {config_map}: {error}"),
    })
}

/// The keyfile and root user read from the credentials Secret.
pub struct SharedCredentials {
    /// The keyfile content (checked, never logged).
    pub keyfile: String,
    /// The root user.
    pub root: RootCredentials,
}

impl std::fmt::Debug for SharedCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedCredentials")
            .field("keyfile", &"<redacted>")
            .field("root", &self.root)
            .finish()
    }
}

/// Checks the credentials Secret's values: the keyfile must be 6–1024 base64
/// characters (mongod refuses anything else), the user and password non-empty.
/// Messages name the Secret and key, never a value.
pub fn credentials(
    secret: &str,
    keyfile_key: &str,
    keyfile: Option<&[u8]>,
    username_key: &str,
    username: Option<&[u8]>,
    password_key: &str,
    password: Option<&[u8]>,
) -> Result<SharedCredentials, Problem> {
    let text = |key: &str, value: Option<&[u8]>| -> Result<String, Problem> {
        let value = value.ok_or_else(|| Problem {
            reason: "CredentialsInvalid",
            message: format!("Secret {secret} has no key {key:?}"),
        })?;
        let value = std::str::from_utf8(value).map_err(|_| Problem {
            reason: "CredentialsInvalid",
            message: format!("Secret {secret} key {key:?} is not UTF-8 text"),
        })?;
        if value.trim().is_empty() {
            return Err(Problem {
                reason: "CredentialsInvalid",
                message: format!("Secret {secret} key {key:?} is empty"),
            });
        }
        Ok(value.to_string())
    };
    let keyfile = text(keyfile_key, keyfile)?;
    let compact: String = keyfile.chars().filter(|c| !c.is_whitespace()).collect();
    if !KEYFILE_LENGTH.contains(&compact.len())
        || !compact
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '/' || c == '=')
    {
        return Err(Problem {
            reason: "KeyfileInvalid",
            message: format!("Secret {secret} key {keyfile_key:?}: a keyfile is 6 to 1024 base64 characters (found {} characters)", compact.len()),
        });
    }
    let username = text(username_key, username)?;
    let password = text(password_key, password)?;
    Ok(SharedCredentials {
        keyfile,
        root: RootCredentials { username, password },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_vip_label_is_named() {
        let problem = vip(&BTreeMap::new()).unwrap_err();
        assert_eq!(problem.reason, "VipLabelMissing");
        assert!(problem.message.contains(VIP_LABEL));
        let labels = BTreeMap::from([(VIP_LABEL.to_string(), "10.29.5.107".to_string())]);
        assert_eq!(vip(&labels).unwrap(), "10.29.5.107");
        let labels = BTreeMap::from([(VIP_LABEL.to_string(), "10.0.0.1 x".to_string())]);
        assert_eq!(vip(&labels).unwrap_err().reason, "VipLabelInvalid");
    }

    #[test]
    fn hostconf_errors_name_the_config_map() {
        let data = BTreeMap::from([("datas".to_string(), "host:'10.0.0.1:3x'".to_string())]);
        let problem = hostconf("demo-hostconf", Some(&data)).unwrap_err();
        assert_eq!(problem.reason, "HostconfInvalid");
        assert!(
            problem.message.starts_with("ConfigMap demo-hostconf: "),
            "{}",
            problem.message
        );
        assert!(problem.message.contains("line 1"));
        assert!(hostconf("demo-hostconf", None).is_err());
    }

    #[test]
    fn credentials_are_checked_without_echoing_them() {
        let keyfile = "a".repeat(756);
        let ok = credentials(
            "s",
            "keyfile",
            Some(keyfile.as_bytes()),
            "username",
            Some(b"root"),
            "password",
            Some(b"pw-123456"),
        );
        assert_eq!(ok.map(|c| c.root.username).unwrap(), "root");
        let short = credentials(
            "s",
            "keyfile",
            Some(b"abc"),
            "username",
            Some(b"root"),
            "password",
            Some(b"pw-123456"),
        )
        .unwrap_err();
        assert_eq!(short.reason, "KeyfileInvalid");
        let bad_chars = credentials(
            "s",
            "keyfile",
            Some(b"abc$%^&*()"),
            "username",
            Some(b"root"),
            "password",
            Some(b"pw-123456"),
        )
        .unwrap_err();
        assert_eq!(bad_chars.reason, "KeyfileInvalid");
        assert!(!bad_chars.message.contains("abc$"));
        let missing = credentials(
            "s",
            "keyfile",
            Some(keyfile.as_bytes()),
            "username",
            Some(b"root"),
            "password",
            None,
        )
        .unwrap_err();
        assert!(missing.message.contains("has no key \"password\""));
        let empty = credentials(
            "s",
            "keyfile",
            Some(keyfile.as_bytes()),
            "username",
            Some(b" "),
            "password",
            Some(b"pw-123456"),
        )
        .unwrap_err();
        assert!(empty.message.contains("\"username\" is empty"));
    }
}
