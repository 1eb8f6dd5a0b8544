//! The checks of a member certificate before any member is given it: a
//! Secret that mongod would refuse, or that would leave members unable to
//! reach each other, is refused here with what is wrong and what to do.
//!
//! mongod serves the certificate, presents it as its client certificate to
//! its peers, and verifies theirs against `ca.crt`; every member of a
//! cluster is reached at the cluster's VIP. So the key must match, the
//! certificate must be valid now, chain to `ca.crt` for both serverAuth and
//! clientAuth, and carry the VIP as an IP SAN.

mod der;

use k8s_openapi::jiff::Timestamp;
use rustls::crypto::ring::sign::any_supported_type;
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use std::time::Duration;
use webpki::{EndEntityCert, KeyUsage};

/// The three files of a certificate Secret (cert-manager's keys). No
/// `Debug`: `key` is secret.
pub struct CertificateFiles<'a> {
    /// `tls.crt`: the certificate, then any intermediates, PEM.
    pub certificate: &'a [u8],
    /// `tls.key`: its private key, PEM (PKCS#8, SEC1 EC or PKCS#1 RSA).
    pub key: &'a [u8],
    /// `ca.crt`: the CAs members trust, PEM.
    pub ca: &'a [u8],
}

/// What the checks found out of a certificate that passed them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckedCertificate {
    /// Unix seconds.
    pub not_before: i64,
    /// Unix seconds.
    pub not_after: i64,
    /// The subject as RFC 4514 text, e.g. `CN=m1,OU=rs0,O=MongoDB`.
    pub subject: String,
}

/// Why a certificate is refused, each naming what is wrong (never key
/// material).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, strum::IntoStaticStr)]
pub enum CertificateFault {
    #[error(
        "tls.crt holds no PEM certificate that parses as X.509: put the member certificate \
         there, followed by any intermediate CAs"
    )]
    NoCertificate,
    #[error(
        "tls.key holds no PEM private key: put the certificate's key there \
         (PKCS#8, SEC1 EC or PKCS#1 RSA)"
    )]
    NoKey,
    #[error(
        "tls.key holds a private key that cannot be used: issue the certificate with an RSA, \
         ECDSA P-256/P-384 or Ed25519 key"
    )]
    UnusableKey,
    #[error(
        "ca.crt holds no PEM CA certificate, or one that does not parse: put the CA bundle \
         that signs the members' certificates there"
    )]
    NoCa,
    #[error(
        "tls.key is not the key of the certificate in tls.crt: put that certificate's own key \
         there"
    )]
    KeyMismatch,
    #[error(
        "the certificate in tls.crt is not valid before {}: wait, or issue one valid now",
        utc(*.not_before)
    )]
    NotYetValid { not_before: i64 },
    #[error("the certificate in tls.crt expired at {}: renew it", utc(*.not_after))]
    Expired { not_after: i64 },
    #[error(
        "the certificate in tls.crt does not chain to a CA of ca.crt ({reason}): issue it from \
         one of them, or add its CA to ca.crt and any intermediate CAs to tls.crt"
    )]
    NotSigned { reason: String },
    #[error(
        "a certificate of tls.crt has an extended key usage without {usage}: mongod serves this \
         certificate and presents it to its peers as a client, so issue it for both \
         serverAuth and clientAuth"
    )]
    MissingUsage { usage: &'static str },
    #[error(
        "the certificate in tls.crt has no O, OU or DC in its subject ({subject}): with \
         x.509 membership mongod takes a peer as a member by those attributes, so issue every \
         member's certificate with the same ones"
    )]
    NoMembershipAttributes { subject: String },
    #[error("the cluster's VIP {vip:?} is not an IP address")]
    VipNotAnIp { vip: String },
    #[error(
        "the certificate in tls.crt has no IP SAN {vip}: members are reached at the cluster's \
         VIP, so add it to the certificate's subjectAltName"
    )]
    VipNotInSans { vip: String },
}

/// Checks `files` as the certificate of the members reached at `vip`
/// (an IP address, IPv6 possibly in brackets), at `now_unix_seconds`.
pub fn check_certificate(
    files: &CertificateFiles,
    vip: &str,
    now_unix_seconds: i64,
) -> Result<CheckedCertificate, CertificateFault> {
    use CertificateFault::*;
    let chain = certificates(files.certificate);
    let (leaf_der, intermediates) = chain.split_first().ok_or(NoCertificate)?;
    let leaf = EndEntityCert::try_from(leaf_der).map_err(|_| NoCertificate)?;
    let checked = der::fields(leaf_der).ok_or(NoCertificate)?;

    let key = PrivateKeyDer::from_pem_slice(files.key).map_err(|_| NoKey)?;
    let key = any_supported_type(&key).map_err(|_| UnusableKey)?;

    let cas = certificates(files.ca);
    let anchors = cas
        .iter()
        .map(webpki::anchor_from_trusted_cert)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| NoCa)?;
    if anchors.is_empty() {
        return Err(NoCa);
    }

    CertifiedKey::new(vec![leaf_der.clone()], key)
        .keys_match()
        .map_err(|_| KeyMismatch)?;

    if now_unix_seconds < checked.not_before {
        return Err(NotYetValid {
            not_before: checked.not_before,
        });
    }
    if now_unix_seconds > checked.not_after {
        return Err(Expired {
            not_after: checked.not_after,
        });
    }

    let now = UnixTime::since_unix_epoch(Duration::from_secs(
        u64::try_from(now_unix_seconds).unwrap_or(0),
    ));
    for (usage, name) in [
        (KeyUsage::server_auth(), "serverAuth"),
        (KeyUsage::client_auth(), "clientAuth"),
    ] {
        leaf.verify_for_usage(
            webpki::ALL_VERIFICATION_ALGS,
            &anchors,
            intermediates,
            now,
            usage,
            None,
            None,
        )
        .map_err(|error| match error {
            webpki::Error::RequiredEkuNotFoundContext(_) => MissingUsage { usage: name },
            error => NotSigned {
                reason: error.to_string(),
            },
        })?;
    }

    let ip = vip
        .strip_prefix('[')
        .and_then(|ip| ip.strip_suffix(']'))
        .unwrap_or(vip);
    let ip: std::net::IpAddr = ip.parse().map_err(|_| VipNotAnIp { vip: vip.into() })?;
    leaf.verify_is_valid_for_subject_name(&ServerName::IpAddress(ip.into()))
        .map_err(|_| VipNotInSans { vip: vip.into() })?;

    Ok(checked)
}

/// The certificates of the PEM `pem`; none if one is broken.
fn certificates(pem: &[u8]) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .unwrap_or_default()
}

/// `seconds` as an RFC 3339 UTC date.
fn utc(seconds: i64) -> String {
    Timestamp::from_second(seconds)
        .map_or_else(|_| format!("{seconds} (unix seconds)"), |at| at.to_string())
}

#[cfg(test)]
mod tests;
