//! Stage `tls` (pure): what this cluster's members run of `spec.tls` — the
//! mode, and the certificate Secret's files, checked before any member is
//! given them: this cluster's VIP as an IP SAN, the certificate's dates, its
//! chain to `ca.crt`, its key, its usage as server and as client.

mod certificate;
pub mod modes;
pub mod rotation;
#[cfg(test)]
mod tests;

use std::fmt;

use k8s_openapi::api::core::v1::Secret;

use crate::api::{ClusterAuthMode, MongoDB, TlsMode};
use crate::validate::InvalidInput;
use modes::{clients_use_tls, plan_mode, ModePlan, ModesRun, TlsStep};

pub use certificate::{check_certificate, CertificateFault, CertificateFiles, CheckedCertificate};

/// The certificate Secret's keys, as cert-manager writes them.
pub const CERTIFICATE_KEY: &str = "tls.crt";
/// The private key's key.
pub const PRIVATE_KEY_KEY: &str = "tls.key";
/// The CA bundle's key.
pub const CA_KEY: &str = "ca.crt";

/// What the local members run of TLS, with its certificate.
#[derive(Clone, PartialEq, Eq)]
pub struct MemberTls {
    /// mongod's `--tlsMode`, the planned step (`disabled`: no TLS options).
    pub mode: TlsMode,
    /// mongod's `--clusterAuthMode` at the planned step (`keyFile`: not given).
    pub cluster_auth: ClusterAuthMode,
    /// mongod's `--tlsAllowConnectionsWithoutCertificates`.
    pub allow_connections_without_certificates: bool,
    /// The certificate then its key: mongod's `--tlsCertificateKeyFile`,
    /// and the operator's client certificate.
    pub certificate_key: Vec<u8>,
    /// The CA bundle: mongod's `--tlsCAFile`, and the operator's.
    pub ca: Vec<u8>,
    /// What the checks found.
    pub certificate: CheckedCertificate,
}

/// Never the key.
impl fmt::Debug for MemberTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemberTls")
            .field("mode", &self.mode)
            .field("cluster_auth", &self.cluster_auth)
            .field(
                "allow_connections_without_certificates",
                &self.allow_connections_without_certificates,
            )
            .field("certificate", &self.certificate)
            .finish_non_exhaustive()
    }
}

/// Stage `tls`'s outcome.
#[derive(Clone, Debug)]
pub struct TlsPlanned {
    /// `spec.tls.mode` and `clusterAuthMode` (`None`: no `spec.tls`).
    pub desired: Option<TlsStep>,
    /// The step the members are built at.
    pub plan: ModePlan,
    /// What they run with it (`None`: no TLS at all).
    pub members: Option<MemberTls>,
    /// Whether this pass's MongoDB clients use TLS.
    pub clients_use_tls: bool,
}

/// Stage `tls`: the step of this cluster's mode from what every member ran
/// at the last roll (`run`) and the mode the members are `built` with, then
/// what they run at it.
pub fn plan_tls(
    mongodb: &MongoDB,
    secret: Option<&Secret>,
    vip: &str,
    built: Option<TlsStep>,
    run: Option<&ModesRun>,
    now_unix_seconds: i64,
) -> Result<TlsPlanned, InvalidInput> {
    let desired = (mongodb.spec.tls.as_ref()).map(|t| TlsStep::of(t.mode, t.cluster_auth_mode));
    let disabled = TlsStep::keyfile(TlsMode::Disabled);
    let plan = plan_mode(desired.unwrap_or(disabled), built, run);
    let members = member_tls(mongodb, secret, vip, plan.template, now_unix_seconds)?;
    let clients_use_tls = clients_use_tls(plan.template, built, run);
    Ok(TlsPlanned {
        desired,
        plan,
        members,
        clients_use_tls,
    })
}

/// The TLS this cluster's members run at the planned `template` mode
/// ([`modes::plan_mode`]): `None` while both it and `spec.tls.mode` are
/// `disabled` (or there is no `spec.tls`); otherwise the certificate, checked
/// even before the first step so that a bad one stops the change before any
/// member restarts.
pub fn member_tls(
    mongodb: &MongoDB,
    secret: Option<&Secret>,
    vip: &str,
    template: TlsStep,
    now_unix_seconds: i64,
) -> Result<Option<MemberTls>, InvalidInput> {
    let settings = mongodb.spec.tls.as_ref();
    let desired = settings.map_or(TlsMode::Disabled, |s| s.mode);
    if desired == TlsMode::Disabled && template.mode == TlsMode::Disabled {
        return Ok(None);
    }
    let Some(name) = settings
        .and_then(|s| s.certificate_secret_ref.as_ref())
        .map(|r| r.name.clone())
    else {
        return Err(InvalidInput::TlsCertificateStillNeeded {
            running: template.mode,
        });
    };
    let Some(secret) = secret else {
        return Err(InvalidInput::TlsCertificateMissing { name });
    };
    let data = secret.data.clone().unwrap_or_default();
    let file = |key: &'static str| {
        data.get(key)
            .map(|v| v.0.clone())
            .filter(|v| !v.is_empty())
            .ok_or_else(|| InvalidInput::TlsCertificateKeyMissing {
                secret: name.clone(),
                key,
            })
    };
    let (certificate, key, ca) = (
        file(CERTIFICATE_KEY)?,
        file(PRIVATE_KEY_KEY)?,
        file(CA_KEY)?,
    );
    let files = CertificateFiles {
        certificate: &certificate,
        key: &key,
        ca: &ca,
    };
    let x509 = settings.is_some_and(|s| s.cluster_auth_mode != ClusterAuthMode::KeyFile)
        || template.auth != ClusterAuthMode::KeyFile;
    let checked = check_certificate(&files, vip, now_unix_seconds)
        .and_then(|checked| membership_checked(checked, x509))
        .map_err(|fault| InvalidInput::TlsCertificateInvalid {
            secret: name.clone(),
            fault,
        })?;
    Ok(Some(MemberTls {
        mode: template.mode,
        cluster_auth: template.auth,
        allow_connections_without_certificates: settings
            .is_some_and(|s| s.allow_connections_without_certificates),
        certificate_key: concatenated(&certificate, &key),
        ca,
        certificate: checked,
    }))
}

/// With x.509 membership, a certificate whose subject names its cluster
/// membership: mongod takes a peer's certificate as a member's when their
/// subjects agree on O, OU and DC, so at least one must be there.
fn membership_checked(
    checked: CheckedCertificate,
    x509: bool,
) -> Result<CheckedCertificate, CertificateFault> {
    if x509 && membership(&checked.subject).is_empty() {
        return Err(CertificateFault::NoMembershipAttributes {
            subject: checked.subject,
        });
    }
    Ok(checked)
}

/// The attributes of `subject` (RFC 4514 text) mongod compares to tell a
/// member's certificate (`SSLConfiguration::isClusterMember`,
/// `canonicalizeClusterDN`): its DC, O and OU, sorted, as `TYPE=value`
/// joined by commas; empty when it has none.
pub fn membership(subject: &str) -> String {
    let mut attributes: Vec<&str> = Vec::new();
    let mut start = 0;
    let mut escaped = false;
    for (i, c) in subject.char_indices() {
        match c {
            '\\' if !escaped => escaped = true,
            ',' | '+' if !escaped => {
                attributes.push(&subject[start..i]);
                start = i + 1;
            }
            _ => escaped = false,
        }
    }
    attributes.push(&subject[start..]);
    let mut kept: Vec<&str> = attributes
        .into_iter()
        .map(str::trim)
        .filter(|a| ["DC=", "O=", "OU="].iter().any(|t| a.starts_with(t)))
        .collect();
    kept.sort_unstable();
    kept.join(",")
}

/// Two PEM files as one, a line break between them when the first lacks one.
fn concatenated(first: &[u8], second: &[u8]) -> Vec<u8> {
    let mut joined = first.to_vec();
    if !joined.ends_with(b"\n") {
        joined.push(b'\n');
    }
    joined.extend_from_slice(second);
    joined
}
