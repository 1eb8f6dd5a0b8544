//! One accepted connection, told TLS or plain by its first 16 bytes, as
//! mongod's `CommonAsioSession::maybeHandshakeSSLForIngress`
//! (`src/mongo/transport/asio/asio_session_impl.cpp`) does: a wire message
//! header's `responseTo` is 0 or -1 in a client's first message; anything
//! else is taken for a TLS ClientHello.
//!
//! - TLS with the mode disabled: closed ("SSL handshake received but server
//!   is started without SSL support");
//! - TLS: handshake with the certificate key file; then the client's
//!   certificate is checked against the CA file (`parseAndValidatePeerCertificate`),
//!   and a missing or invalid one closes the connection;
//! - plain under requireTLS: closed, `SSLHandshakeFailed` "The server is
//!   configured to only allow SSL connections";
//! - plain under preferTLS: served, logged (23838).

use crate::member::Member;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A connection's stream, plain or TLS.
pub(crate) trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

/// The TCP stream with the bytes already read put back in front.
struct Replayed {
    head: Vec<u8>,
    pos: usize,
    inner: TcpStream,
}

impl AsyncRead for Replayed {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.pos < self.head.len() {
            let n = (self.head.len() - self.pos).min(buf.remaining());
            let start = self.pos;
            buf.put_slice(&self.head[start..start + n]);
            self.pos += n;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Replayed {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Why a connection was closed before its first command.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Refused {
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("SSLHandshakeFailed: {0}")]
    Tls(String),
}

/// The connection to serve, or why it is closed.
pub(crate) async fn accept(
    member: &Member,
    mut stream: TcpStream,
) -> Result<Box<dyn Stream>, Refused> {
    let state = member.tls().state();
    let Some(material) = state
        .material
        .filter(|_| state.mode != super::TlsMode::Disabled)
    else {
        // TLS disabled: every byte is read as the wire protocol (a
        // ClientHello is garbage, which closes the connection).
        return Ok(Box::new(stream));
    };
    let mut head = [0u8; 16];
    stream.read_exact(&mut head).await?;
    let response_to = i32::from_le_bytes(head[8..12].try_into().expect("4 bytes"));
    let replayed = Replayed {
        head: head.to_vec(),
        pos: 0,
        inner: stream,
    };
    if response_to == 0 || response_to == -1 {
        return match state.mode {
            super::TlsMode::RequireTls => Err(Refused::Tls(
                "The server is configured to only allow SSL connections".into(),
            )),
            mode => {
                if mode == super::TlsMode::PreferTls {
                    tracing::info!(
                        id = 23838,
                        member = %member.listen(),
                        "SSL mode is set to 'preferred' and connection to remote is not using SSL."
                    );
                }
                Ok(Box::new(replayed))
            }
        };
    }
    let acceptor = tokio_rustls::TlsAcceptor::from(material.server_config.clone());
    let tls = acceptor
        .accept(replayed)
        .await
        .map_err(|e| Refused::Tls(e.to_string()))?;
    let peer: Vec<_> = tls
        .get_ref()
        .1
        .peer_certificates()
        .map(|c| c.iter().map(|c| c.clone().into_owned()).collect())
        .unwrap_or_default();
    let allow_without = member.tls().spec().allow_connections_without_certificates;
    material
        .check_client(&peer, allow_without)
        .map_err(Refused::Tls)?;
    Ok(Box::new(tls))
}
