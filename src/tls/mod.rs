//! Stage `tls` (pure): what this cluster's members run of `spec.tls` — the
//! mode, and the certificate Secret's files, checked before any member is
//! given them: this cluster's VIP as an IP SAN, the certificate's dates, its
//! chain to `ca.crt`, its key, its usage as server and as client.

mod certificate;
#[cfg(test)]
mod tests;

use std::fmt;

use k8s_openapi::api::core::v1::Secret;

use crate::api::{MongoDB, TlsMode};
use crate::validate::InvalidInput;

pub use certificate::{check_certificate, CertificateFault, CertificateFiles, CheckedCertificate};

/// The certificate Secret's keys, as cert-manager writes them.
pub const CERTIFICATE_KEY: &str = "tls.crt";
/// The private key's key.
pub const PRIVATE_KEY_KEY: &str = "tls.key";
/// The CA bundle's key.
pub const CA_KEY: &str = "ca.crt";

/// What every local member runs with TLS on (a mode other than `disabled`).
#[derive(Clone, PartialEq, Eq)]
pub struct MemberTls {
    /// mongod's `--tlsMode`.
    pub mode: TlsMode,
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
            .field(
                "allow_connections_without_certificates",
                &self.allow_connections_without_certificates,
            )
            .field("certificate", &self.certificate)
            .finish_non_exhaustive()
    }
}

/// The TLS this cluster's members run: `None` without `spec.tls` or at
/// `disabled` (the pods are built as without TLS); otherwise the checked
/// certificate. `running` is the mode the existing member StatefulSets were
/// built with: a running set changes mode only through MongoDB's steps,
/// which this operator does not take, so a change is refused.
pub fn member_tls(
    mongodb: &MongoDB,
    secret: Option<&Secret>,
    vip: &str,
    running: Option<TlsMode>,
    now_unix_seconds: i64,
) -> Result<Option<MemberTls>, InvalidInput> {
    let settings = mongodb.spec.tls.as_ref();
    let mode = settings.map_or(TlsMode::Disabled, |s| s.mode);
    if let Some(running) = running.filter(|running| *running != mode) {
        return Err(InvalidInput::TlsModeChangeRefused {
            running,
            wanted: mode,
        });
    }
    let Some(settings) = settings.filter(|_| mode != TlsMode::Disabled) else {
        return Ok(None);
    };
    let name = settings
        .certificate_secret_ref
        .as_ref()
        .map(|r| r.name.clone())
        .unwrap_or_default();
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
    let checked = check_certificate(&files, vip, now_unix_seconds).map_err(|fault| {
        InvalidInput::TlsCertificateInvalid {
            secret: name.clone(),
            fault,
        }
    })?;
    Ok(Some(MemberTls {
        mode,
        allow_connections_without_certificates: settings.allow_connections_without_certificates,
        certificate_key: concatenated(&certificate, &key),
        ca,
        certificate: checked,
    }))
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
