//! The members' TLS options, over the certificates of [`mongod_sim::pki`].
#![allow(dead_code)]

pub use mongod_sim::pki::{Pki, Validity};
use mongod_sim::tls::{ClusterAuthMode, TlsMode, TlsSpec};

/// The TLS options of a member at `mode` serving `key_file`, trusting `ca`.
pub fn tls(mode: TlsMode, key_file: &str, ca: &str) -> TlsSpec {
    TlsSpec {
        mode,
        certificate_key_file: Some(key_file.into()),
        ca_file: Some(ca.into()),
        ..TlsSpec::default()
    }
}

/// [`tls`] that also lets clients in without a certificate.
pub fn tls_open(mode: TlsMode, key_file: &str, ca: &str) -> TlsSpec {
    TlsSpec {
        allow_connections_without_certificates: true,
        ..tls(mode, key_file, ca)
    }
}

/// [`tls`] with `clusterAuthMode`.
pub fn tls_x509(mode: TlsMode, key_file: &str, ca: &str, auth: ClusterAuthMode) -> TlsSpec {
    TlsSpec {
        cluster_auth_mode: Some(auth),
        ..tls(mode, key_file, ca)
    }
}
