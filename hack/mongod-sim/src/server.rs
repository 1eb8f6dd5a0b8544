//! TCP serving for one member: accepts connections on its pod address (TLS
//! or plain by the member's mode, [`crate::tls::ingress`]), decodes
//! requests, dispatches commands and writes replies. Closes everything when the
//! member stops. Garbage on a connection closes that connection only.

use crate::commands::{self, Connection};
use crate::member::Member;
use crate::tls::ingress::{self, Stream};
use crate::wire::{self, Request};
use std::sync::Arc;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::watch;

pub(crate) async fn serve(
    member: Arc<Member>,
    listener: TcpListener,
    shutdown: watch::Receiver<bool>,
) {
    loop {
        let mut stop = shutdown.clone();
        let accepted = tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            a = listener.accept() => a,
        };
        let Ok((stream, _)) = accepted else { continue };
        let _ = stream.set_nodelay(true);
        let m = member.clone();
        let mut stop = shutdown.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = stop.wait_for(|s| *s) => {}
                () = serve_connection(m, stream) => {}
            }
        });
    }
}

/// Accepts one connection (TLS or plain) and serves it until it closes.
async fn serve_connection(member: Arc<Member>, stream: tokio::net::TcpStream) {
    let stream = match ingress::accept(&member, stream).await {
        Ok(stream) => stream,
        Err(refused) => {
            tracing::warn!(member = %member.listen(), error = %refused, "connection ended before its first command");
            return;
        }
    };
    if let Err(e) = handle_connection(member, stream).await {
        tracing::debug!("connection closed: {e}");
    }
}

async fn handle_connection(
    member: Arc<Member>,
    stream: Box<dyn Stream>,
) -> Result<(), wire::WireError> {
    let (mut rd, mut wr) = tokio::io::split(stream);
    let mut conn = Connection::new(member.next_connection_id());
    while let Some(req) = wire::read_request(&mut rd).await? {
        match req {
            Request::Msg {
                request_id,
                more_to_come,
                body,
            } => {
                let reply = commands::dispatch(&member, &mut conn, body).await;
                if member.exit_code().is_some() {
                    // The process died running the command: no reply.
                    return Ok(());
                }
                if !more_to_come {
                    wr.write_all(&wire::encode_msg(request_id, &reply)).await?;
                }
            }
            Request::Query {
                request_id,
                collection,
                query,
            } => {
                let reply = if collection.ends_with(".$cmd") {
                    commands::dispatch_legacy(&member, &mut conn, query).await
                } else {
                    crate::error::CmdError::new(
                        crate::error::COMMAND_NOT_FOUND,
                        "OP_QUERY is only supported for commands",
                    )
                    .to_document()
                };
                wr.write_all(&wire::encode_reply(request_id, &reply))
                    .await?;
            }
        }
    }
    Ok(())
}
