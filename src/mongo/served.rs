//! A member's TLS as a peer meets it: the certificate it serves, and whether
//! it takes a connection made with given files — what a certificate change
//! is checked by (stages `vet` and `rotate`). The driver shows neither the
//! served certificate nor why a handshake failed, so these speak TLS
//! themselves (rustls, as the driver does) and send one `hello`; and
//! `rotateCertificates`, through the driver.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mongodb::bson::doc;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::{MongoError, MongoGateway};
use crate::hostconf::MemberAddress;
use crate::tls::MemberTls;
use crate::validate::RootCredentials;

/// How long one handshake (and its `hello`) may take.
const PEER_TIMEOUT: Duration = Duration::from_secs(5);
/// OP_MSG, the wire protocol's message.
const OP_MSG: i32 = 2013;

/// Why a member's TLS could not be read or did not take the files.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PeerTlsError {
    /// No connection, or no answer in time.
    #[error("{member} does not answer ({why})")]
    Unreachable { member: String, why: String },
    /// The CA bundle does not verify the certificate the member serves.
    #[error("{member} serves a certificate the CA bundle does not verify ({why})")]
    ServedCertificateRefused { member: String, why: String },
    /// The member closed the connection after the handshake: it refuses
    /// the certificate as a client's (its own CA bundle does not verify it).
    #[error("{member} refuses the certificate as a peer's ({why})")]
    CertificateRefused { member: String, why: String },
    /// The handshake failed otherwise (a member that runs no TLS).
    #[error("the TLS handshake with {member} failed ({why})")]
    Handshake { member: String, why: String },
    /// The files themselves cannot be used by a client.
    #[error("the certificate files cannot be used as a client's ({why})")]
    Files { why: String },
}

/// The certificate `member` serves (DER), read from a handshake presenting
/// `files`' certificate; the served one is not verified.
pub async fn served_certificate(
    member: &MemberAddress,
    files: &MemberTls,
) -> Result<Vec<u8>, PeerTlsError> {
    let handshake = Handshake::new(files, false)?;
    handshake.meet(member, false).await
}

/// Whether `member` takes a connection made with `files`: the certificate
/// it serves verifies against `files`' CA bundle for its address, and it
/// answers a `hello` sent over that connection, having verified `files`'
/// certificate against its own bundle.
pub async fn takes(member: &MemberAddress, files: &MemberTls) -> Result<(), PeerTlsError> {
    let handshake = Handshake::new(files, true)?;
    handshake.meet(member, true).await.map(drop)
}

impl MongoGateway {
    /// `rotateCertificates` (5.0+) on `member`, asked directly: it loads its
    /// certificate and CA files again for new connections.
    pub async fn rotate_certificates(
        &self,
        member: &MemberAddress,
        credentials: &RootCredentials,
    ) -> Result<(), MongoError> {
        let target = member.to_string();
        let client = self.client(std::slice::from_ref(member), true, None, credentials)?;
        let command = doc! {"rotateCertificates": 1, "message": "mongodb-member-operator"};
        Self::ask(&client, command, &target).await.map(drop)
    }
}

/// A client's TLS set up from a member's files.
struct Handshake {
    connector: TlsConnector,
    verifier: Arc<Recording>,
}

impl Handshake {
    /// `verify`: the served certificate must verify against `files`' bundle.
    fn new(files: &MemberTls, verify: bool) -> Result<Handshake, PeerTlsError> {
        let unusable = |why: String| PeerTlsError::Files { why };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = RootCertStore::empty();
        for ca in CertificateDer::pem_slice_iter(&files.ca) {
            let ca = ca.map_err(|error| unusable(error.to_string()))?;
            roots.add(ca).map_err(|error| unusable(error.to_string()))?;
        }
        let inner = if verify {
            let verifier =
                WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                    .build()
                    .map_err(|error| unusable(error.to_string()))?;
            Some(verifier)
        } else {
            None
        };
        let verifier = Arc::new(Recording {
            inner,
            algorithms: provider.signature_verification_algorithms,
            served: Mutex::default(),
        });
        let chain = CertificateDer::pem_slice_iter(&files.certificate_key)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| unusable(error.to_string()))?;
        let key = PrivateKeyDer::from_pem_slice(&files.certificate_key)
            .map_err(|error| unusable(error.to_string()))?;
        let config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|error| unusable(error.to_string()))?
            .dangerous()
            .with_custom_certificate_verifier(verifier.clone())
            .with_client_auth_cert(chain, key)
            .map_err(|error| unusable(error.to_string()))?;
        Ok(Handshake {
            connector: TlsConnector::from(Arc::new(config)),
            verifier,
        })
    }

    /// Meets `member`: the certificate it served, once it answered a
    /// `hello` too when `say_hello`.
    async fn meet(&self, member: &MemberAddress, say_hello: bool) -> Result<Vec<u8>, PeerTlsError> {
        let target = member.to_string();
        let unreachable = |why: String| PeerTlsError::Unreachable {
            member: target.clone(),
            why,
        };
        let host = member.host.trim_matches(['[', ']']);
        let name = ServerName::try_from(host.to_string())
            .map_err(|error| unreachable(error.to_string()))?;
        let meeting = async {
            let stream = TcpStream::connect((host, member.port))
                .await
                .map_err(|error| unreachable(error.to_string()))?;
            let handshake = self.connector.connect(name, stream).await;
            let served = self.verifier.served();
            let mut stream = match handshake {
                Ok(stream) => stream,
                Err(error) => {
                    let why = error.to_string();
                    return Err(match served {
                        Some(_) if self.verifier.inner.is_some() => {
                            PeerTlsError::ServedCertificateRefused {
                                member: target.clone(),
                                why,
                            }
                        }
                        _ => PeerTlsError::Handshake {
                            member: target.clone(),
                            why,
                        },
                    });
                }
            };
            let served = served.ok_or_else(|| PeerTlsError::Handshake {
                member: target.clone(),
                why: "no certificate served".to_string(),
            })?;
            if say_hello {
                hello(&mut stream)
                    .await
                    .map_err(|why| PeerTlsError::CertificateRefused {
                        member: target.clone(),
                        why,
                    })?;
            }
            Ok(served)
        };
        tokio::time::timeout(PEER_TIMEOUT, meeting)
            .await
            .map_err(|_| unreachable(format!("no answer in {PEER_TIMEOUT:?}")))?
    }
}

/// Sends `hello` and reads the answer's header and body.
async fn hello<S: AsyncReadExt + AsyncWriteExt + Unpin>(stream: &mut S) -> Result<(), String> {
    let mut body = Vec::new();
    doc! {"hello": 1, "$db": "admin"}
        .to_writer(&mut body)
        .map_err(|error| error.to_string())?;
    let length = i32::try_from(16 + 4 + 1 + body.len()).map_err(|error| error.to_string())?;
    let mut message = Vec::with_capacity(body.len() + 21);
    for field in [length, 1, 0, OP_MSG] {
        message.extend_from_slice(&field.to_le_bytes());
    }
    message.extend_from_slice(&0u32.to_le_bytes());
    message.push(0);
    message.extend_from_slice(&body);
    let closed = |error: std::io::Error| format!("the connection closed: {error}");
    stream.write_all(&message).await.map_err(closed)?;
    stream.flush().await.map_err(closed)?;
    let mut header = [0u8; 16];
    stream.read_exact(&mut header).await.map_err(closed)?;
    let length = i32::from_le_bytes([header[0], header[1], header[2], header[3]]);
    let op_code = i32::from_le_bytes([header[12], header[13], header[14], header[15]]);
    if op_code != OP_MSG || length <= 16 {
        return Err(format!("an answer of op code {op_code}, length {length}"));
    }
    let mut rest = vec![0u8; usize::try_from(length - 16).unwrap_or(0)];
    stream.read_exact(&mut rest).await.map_err(closed)?;
    Ok(())
}

/// A verifier that keeps the certificate served, then verifies it with
/// `inner` (none: accepts it, to read it only).
#[derive(Debug)]
struct Recording {
    inner: Option<Arc<WebPkiServerVerifier>>,
    algorithms: WebPkiSupportedAlgorithms,
    served: Mutex<Option<Vec<u8>>>,
}

impl Recording {
    fn served(&self) -> Option<Vec<u8>> {
        self.served
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }
}

impl ServerCertVerifier for Recording {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        *self
            .served
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(end_entity.as_ref().to_vec());
        match &self.inner {
            Some(inner) => {
                inner.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
            }
            None => Ok(ServerCertVerified::assertion()),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, signature, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, signature, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}
