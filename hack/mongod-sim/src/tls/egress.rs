//! A member dialling a member, in-process: the connection each side's TLS
//! mode makes of it, both certificate checks, then internal authentication
//! by keyfile or certificate.
//!
//! - The dialler uses TLS from preferTLS on, plain below (the manual's
//!   `net.tls.mode`); the receiver refuses plain under requireTLS and TLS
//!   when disabled ([`super::ingress`]). A refused connection is closed: the
//!   dialler sees "Connection closed by peer".
//! - Over TLS the dialler verifies the served certificate (the receiver's
//!   certificate key file) against its own CA file and the dialled host
//!   ([`check_server`]), and presents its cluster file, which the receiver
//!   checks as any client's ([`Material::check_client`](super::material::Material::check_client)).
//! - Authentication (`authenticateInternalClient`,
//!   `src/mongo/client/authenticate.cpp`): a dialler whose mode `sendsX509`
//!   authenticates with its certificate (MONGODB-X509 as `__system`),
//!   which the receiver accepts when its mode `allowsX509` and the
//!   certificate's subject is a cluster member's ([`is_cluster_member`]);
//!   otherwise with its keyfile, accepted when the receiver's mode
//!   `allowsKeyFile` ([`crate::keyfile`]).

use super::material::{check_server, is_cluster_member};
use super::{ClusterAuthMode, TlsMode};
use crate::member::Member;

/// What a dial met beyond the network.
pub(crate) enum Outcome {
    Authenticated,
    /// The connection failed (TLS refused or a certificate check): mongod's
    /// reason, shown as the heartbeat's `lastHeartbeatMessage`.
    ConnectionFailed(String),
    /// Connected, and internal authentication refused.
    AuthenticationFailed,
}

const CLOSED: &str = "Connection closed by peer";

/// `from` dials `to` as `host`.
pub(crate) fn dial(from: &Member, to: &Member, host: &str) -> Outcome {
    let mine = from.tls().state();
    let theirs = to.tls().state();
    let over_tls = mine.mode.dials_tls();
    let presented = if over_tls {
        match (&mine.material, &theirs.material) {
            // The receiver has TLS disabled: a ClientHello is refused.
            (_, None) => return Outcome::ConnectionFailed(CLOSED.into()),
            (None, _) => return Outcome::ConnectionFailed(CLOSED.into()),
            (Some(own), Some(peer)) => {
                if theirs.mode == TlsMode::Disabled {
                    return Outcome::ConnectionFailed(CLOSED.into());
                }
                if let Err(reason) = check_server(own.roots.as_ref(), &peer.server.chain, host) {
                    return Outcome::ConnectionFailed(reason);
                }
                let allow_without = to.tls().spec().allow_connections_without_certificates;
                if peer
                    .check_client(&own.cluster.chain, allow_without)
                    .is_err()
                {
                    return Outcome::ConnectionFailed(CLOSED.into());
                }
                // The receiver learns a verified subject only when it
                // asked for a certificate (it has a CA file).
                peer.roots.as_ref().map(|_| (own.clone(), peer.clone()))
            }
        }
    } else {
        if theirs.mode == TlsMode::RequireTls {
            return Outcome::ConnectionFailed(CLOSED.into());
        }
        None
    };
    let sends_x509 = mine
        .cluster_auth_mode
        .is_some_and(ClusterAuthMode::sends_x509);
    let receiver = theirs.cluster_auth_mode;
    let accepted = if sends_x509 {
        receiver.is_some_and(ClusterAuthMode::allows_x509)
            && presented
                .is_some_and(|(own, peer)| is_cluster_member(&own.cluster.leaf, &peer.server.leaf))
    } else {
        receiver.is_none_or(ClusterAuthMode::allows_key_file)
            && match (from.keyfile(), to.keyfile()) {
                (Some(mine), Some(theirs)) => mine.authenticates_to(theirs),
                (None, None) => true,
                _ => false,
            }
    };
    if accepted {
        Outcome::Authenticated
    } else {
        Outcome::AuthenticationFailed
    }
}
