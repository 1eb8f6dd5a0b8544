//! The certificate files as mongod's SSL manager loads them
//! (`SSLManagerOpenSSL::initSSLContext`, `src/mongo/util/net/ssl_manager_openssl.cpp`),
//! and peer verification with rustls/webpki: chain to the CA file, validity
//! dates, the dialled host (an IP address must be an IP SAN). Failures are
//! worded as mongod words them (`parseAndValidatePeerCertificate`: "SSL peer
//! certificate validation failed: " and OpenSSL's `X509_verify_cert_error_string`,
//! OpenSSL 3 as in the official images; "The server certificate does not
//! match the host name. …").

use super::der::{certificate_info, CertificateInfo};
use super::TlsSpec;
use rustls::client::danger::ServerCertVerifier;
use rustls::crypto::CryptoProvider;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::WebPkiClientVerifier;
use rustls::{CertificateError, DistinguishedName, RootCertStore, ServerConfig, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use std::sync::Arc;

/// Why the files could not be loaded: mongod's `InvalidSSLConfiguration`
/// (140) reasons.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MaterialError {
    #[error("Can not set up PEM key file.")]
    PemKeyFile,
    #[error("Can not set up ssl clusterFile.")]
    ClusterFile,
    #[error("Can not set up CA file.")]
    CaFile,
    #[error("The provided SSL certificate is expired or not yet valid.")]
    NotValidNow,
    #[error("The use of TLS without specifying a chain of trust is no longer supported")]
    NoChainOfTrust,
}

/// One certificate chain with its key.
pub struct Identity {
    pub chain: Vec<CertificateDer<'static>>,
    /// The leaf's subject and dates.
    pub leaf: CertificateInfo,
}

/// What the SSL manager holds once the files are read.
pub struct Material {
    /// What it serves on its port.
    pub server: Identity,
    /// What it presents to members it dials.
    pub cluster: Identity,
    /// The CA file's certificates; `None` without a CA file.
    pub roots: Option<Arc<RootCertStore>>,
    /// The rustls configuration of its port.
    pub server_config: Arc<ServerConfig>,
}

pub(crate) fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn now() -> i64 {
    UnixTime::now().as_secs() as i64
}

/// A PEM file: its certificates and, when `with_key`, its private key.
fn read_identity(
    spec: &TlsSpec,
    path: &str,
    error: MaterialError,
) -> Result<(Identity, PrivateKeyDer<'static>), MaterialError> {
    let bytes = read(spec, path).ok_or(error.clone())?;
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<_, _>>()
        .map_err(|_| error.clone())?;
    let key = PrivateKeyDer::from_pem_slice(&bytes).map_err(|_| error.clone())?;
    let leaf = chain
        .first()
        .and_then(|c| certificate_info(c).ok())
        .ok_or(error)?;
    // `_parseAndValidateCertificate`: mongod refuses its own certificate
    // outside its validity dates.
    if !(leaf.not_before..=leaf.not_after).contains(&now()) {
        return Err(MaterialError::NotValidNow);
    }
    Ok((Identity { chain, leaf }, key))
}

fn read(spec: &TlsSpec, path: &str) -> Option<Vec<u8>> {
    match &spec.files {
        Some(reader) => reader(path),
        None => std::fs::read(path).ok(),
    }
}

impl Material {
    /// Reads the certificate key file, the cluster file and the CA file.
    pub fn load(spec: &TlsSpec) -> Result<Material, MaterialError> {
        let key_path = spec
            .certificate_key_file
            .as_deref()
            .ok_or(MaterialError::PemKeyFile)?;
        let (server, key) = read_identity(spec, key_path, MaterialError::PemKeyFile)?;
        let cluster = match spec.cluster_file.as_deref() {
            Some(path) => read_identity(spec, path, MaterialError::ClusterFile)?.0,
            None => Identity {
                chain: server.chain.clone(),
                leaf: server.leaf.clone(),
            },
        };
        let roots = match spec.ca_file.as_deref() {
            None => None,
            Some(path) => {
                let bytes = read(spec, path).ok_or(MaterialError::CaFile)?;
                let mut store = RootCertStore::empty();
                for cert in CertificateDer::pem_slice_iter(&bytes) {
                    store
                        .add(cert.map_err(|_| MaterialError::CaFile)?)
                        .map_err(|_| MaterialError::CaFile)?;
                }
                if store.is_empty() {
                    return Err(MaterialError::CaFile);
                }
                Some(Arc::new(store))
            }
        };
        let verifier: Arc<dyn ClientCertVerifier> = match &roots {
            // `!_sslConfiguration.hasCA && isSSLServer`: no client certificate
            // is asked for or checked.
            None => WebPkiClientVerifier::no_client_auth(),
            Some(roots) => Arc::new(AfterHandshake(client_verifier(roots))),
        };
        let server_config = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|_| MaterialError::PemKeyFile)?
            .with_client_cert_verifier(verifier)
            .with_single_cert(server.chain.clone(), key)
            .map_err(|_| MaterialError::PemKeyFile)?;
        Ok(Material {
            server,
            cluster,
            roots,
            server_config: Arc::new(server_config),
        })
    }

    /// As the side that accepted a connection: may a peer presenting
    /// `chain` (empty: none) stay? mongod's `parseAndValidatePeerCertificate`
    /// after the handshake; `allow_without`:
    /// `--tlsAllowConnectionsWithoutCertificates`.
    pub fn check_client(
        &self,
        chain: &[CertificateDer<'static>],
        allow_without: bool,
    ) -> Result<(), String> {
        let Some(roots) = &self.roots else {
            return Ok(());
        };
        let Some((leaf, intermediates)) = chain.split_first() else {
            return if allow_without {
                Ok(())
            } else {
                Err("no SSL certificate provided by peer; connection rejected".into())
            };
        };
        client_verifier(roots)
            .verify_client_cert(leaf, intermediates, UnixTime::now())
            .map(|_| ())
            .map_err(|e| validation_failed(&e, ""))
    }
}

fn client_verifier(roots: &Arc<RootCertStore>) -> Arc<dyn ClientCertVerifier> {
    WebPkiClientVerifier::builder_with_provider(roots.clone(), provider())
        .allow_unauthenticated()
        .build()
        .expect("a non-empty root store builds a verifier")
}

/// As the dialling side: does `chain`, served by the member dialled as
/// `host` (`IP:port` or `name:port`), verify against `roots`?
pub fn check_server(
    roots: Option<&Arc<RootCertStore>>,
    chain: &[CertificateDer<'static>],
    host: &str,
) -> Result<(), String> {
    let name = host.rsplit_once(':').map_or(host, |(name, _)| name);
    let server_name =
        ServerName::try_from(name.to_string()).map_err(|_| format!("bad host name {name}"))?;
    let (leaf, intermediates) = chain.split_first().ok_or("no certificate served")?;
    // Without a CA file mongod uses the system store, which holds none of a
    // private CA.
    let empty = Arc::new(RootCertStore::empty());
    let roots = roots.unwrap_or(&empty);
    if roots.is_empty() {
        return Err(
            "SSL peer certificate validation failed: unable to get local issuer certificate".into(),
        );
    }
    rustls::client::WebPkiServerVerifier::builder_with_provider(roots.clone(), provider())
        .build()
        .map_err(|e| e.to_string())?
        .verify_server_cert(leaf, intermediates, &server_name, &[], UnixTime::now())
        .map(|_| ())
        .map_err(|e| validation_failed(&e, name))
}

/// mongod's message for a failed verification of a peer's certificate.
fn validation_failed(error: &rustls::Error, host: &str) -> String {
    let rustls::Error::InvalidCertificate(error) = error else {
        return format!("SSL peer certificate validation failed: {error}");
    };
    let reason = match error {
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
            "certificate has expired".to_string()
        }
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
            "certificate is not yet valid".to_string()
        }
        CertificateError::UnknownIssuer => "unable to get local issuer certificate".to_string(),
        CertificateError::BadSignature => "certificate signature failure".to_string(),
        CertificateError::NotValidForNameContext { presented, .. } => {
            let sans: String = presented
                .iter()
                .map(|name| format!("{} ", presented_name(name)))
                .collect();
            return format!(
                "The server certificate does not match the host name. Hostname: {host} does not match SAN(s): {sans}"
            );
        }
        CertificateError::NotValidForName => {
            return format!(
                "The server certificate does not match the host name. Hostname: {host} does not match "
            );
        }
        other => format!("{other:?}"),
    };
    format!("SSL peer certificate validation failed: {reason}")
}

/// A SAN as rustls reports it (`IpAddress(1.2.3.4)`, `DnsName("a.b")`),
/// as mongod prints it (the name alone).
fn presented_name(name: &str) -> &str {
    name.split_once('(')
        .and_then(|(_, rest)| rest.strip_suffix(')'))
        .map_or(name, |inner| inner.trim_matches('"'))
}

/// The handshake's client-certificate check as mongod's OpenSSL context
/// has it: a certificate is asked for (`SSL_VERIFY_PEER`) and its
/// signature over the handshake checked, but the handshake goes on whatever
/// the certificate; the session then checks it and closes the connection
/// ([`Material::check_client`]).
#[derive(Debug)]
struct AfterHandshake(Arc<dyn ClientCertVerifier>);

impl ClientCertVerifier for AfterHandshake {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.0.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// mongod's x.509 cluster-membership rule (`SSLConfiguration::isClusterMember`,
/// `src/mongo/util/net/ssl_manager.cpp`, with `canonicalizeClusterDN`): the
/// peer's subject, reduced to its DC, O and OU attributes and sorted, is
/// non-empty and equal to this member's server certificate subject reduced
/// the same way.
pub fn is_cluster_member(peer: &CertificateInfo, own: &CertificateInfo) -> bool {
    const DC: &str = "0.9.2342.19200300.100.1.25";
    const O: &str = "2.5.4.10";
    const OU: &str = "2.5.4.11";
    let canonical = |info: &CertificateInfo| {
        let mut kept: Vec<(String, String)> = info
            .subject
            .iter()
            .filter(|(oid, _)| matches!(oid.as_str(), DC | O | OU))
            .cloned()
            .collect();
        kept.sort();
        kept
    };
    let peer = canonical(peer);
    !peer.is_empty() && peer == canonical(own)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::der::tests::certificate;

    #[test]
    fn sans_are_printed_as_mongod_prints_them() {
        assert_eq!(presented_name("IpAddress(127.0.0.1)"), "127.0.0.1");
        assert_eq!(presented_name("DnsName(\"db.example\")"), "db.example");
        assert_eq!(presented_name("db.example"), "db.example");
    }

    #[test]
    fn cluster_members_agree_on_o_ou_and_dc_whatever_their_cn() {
        let info = |o: &str, ou: &str, cn: &str| certificate_info(&certificate(o, ou, cn)).unwrap();
        let own = info("MongoDB", "rs0", "m1");
        assert!(is_cluster_member(&info("MongoDB", "rs0", "m2"), &own));
        assert!(!is_cluster_member(&info("MongoDB", "rs1", "m2"), &own));
        assert!(!is_cluster_member(&info("Other", "rs0", "m1"), &own));
        let no_org = CertificateInfo {
            subject: vec![("2.5.4.3".into(), "m1".into())],
            ..own.clone()
        };
        assert!(
            !is_cluster_member(&no_org, &no_org),
            "an empty O/OU/DC is never a member"
        );
    }
}
