//! The TLS server parameters and `rotateCertificates`.
//!
//! - `getParameter` `tlsMode` / `clusterAuthMode`
//!   (`TLSModeServerParameter::append`, `ClusterAuthModeServerParameter::append`).
//! - `setParameter tlsMode`: only allowTLS → preferTLS and preferTLS →
//!   requireTLS, else 2 BadValue "Illegal state transition for tlsMode,
//!   attempt to change from X to Y" (`checkTLSModeTransition`,
//!   `src/mongo/util/net/ssl_parameters.cpp`; the same in 4.4).
//! - `setParameter clusterAuthMode` (`ClusterAuthModeServerParameter::setFromString`,
//!   `src/mongo/util/net/ssl_parameters_auth.cpp`): from 5.0, a mode that
//!   `allowsX509` needs preferTLS or requireTLS (2 "Illegal state
//!   transition for clusterAuthMode, need to enable SSL for outgoing
//!   connections"), then `ClusterAuthMode::canTransitionTo` allows keyFile
//!   → sendKeyFile → sendX509 → x509 one step at a time (5579202 "Illegal
//!   state transition for clusterAuthMode from 'a' to 'b'"); in 4.4 only
//!   sendKeyFile → sendX509 (TLS needed as above) and sendX509 → x509, else
//!   2 "Illegal state transition for clusterAuthMode, change from a to b".
//! - `rotateCertificates` (5.0+, `src/mongo/db/commands/rotate_certificates_command.cpp`,
//!   `SSLManagerCoordinator::rotate`): reads the files again; invalid ones
//!   fail the command with 140 InvalidSSLConfiguration and the old ones stay.

use super::{ClusterAuthMode, MemberTls, TlsMode};
use crate::commands::{db_of, CmdResult};
use crate::error::{self, fail, CmdError};
use crate::member::Member;
use crate::version::ServerVersion;
use bson::{doc, Bson, Document};
use std::sync::Arc;

/// The parameters `getParameter` reads here, into `reply`.
pub(crate) fn get_parameters(member: &Member, body: &Document, reply: &mut Document) {
    let all = matches!(body.get("getParameter"), Some(Bson::String(s)) if s == "*");
    let state = member.tls().state();
    if all || body.contains_key("tlsMode") {
        reply.insert("tlsMode", state.mode.name());
    }
    if all || body.contains_key("clusterAuthMode") {
        reply.insert(
            "clusterAuthMode",
            state
                .cluster_auth_mode
                .map_or("undefined", ClusterAuthMode::name),
        );
    }
}

/// Fields of a command that are not parameters (generic arguments).
fn is_generic_argument(name: &str) -> bool {
    name.starts_with('$')
        || matches!(
            name,
            "setParameter" | "lsid" | "comment" | "maxTimeMS" | "readPreference" | "writeConcern"
        )
}

/// `setParameter`, for the parameters modelled here; any other is refused
/// as mongod refuses one it does not know.
pub(crate) fn set_parameter(member: &Member, body: &Document) -> CmdResult {
    if db_of(body) != "admin" {
        return fail(
            error::UNAUTHORIZED,
            "setParameter may only be run against the admin database.",
        );
    }
    let mut reply = doc! {};
    for (name, value) in body.iter().filter(|(n, _)| !is_generic_argument(n)) {
        let value = match value {
            Bson::String(s) => s.clone(),
            other => other.to_string(),
        };
        let was = match name.as_str() {
            "tlsMode" => set_tls_mode(member.tls(), &value)?,
            "clusterAuthMode" => set_cluster_auth_mode(member.tls(), member.version(), &value)?,
            other => {
                return fail(
                    error::INVALID_OPTIONS,
                    format!("attempted to set unrecognized parameter [{other}], use help:true to see options "),
                )
            }
        };
        reply.insert("was", was);
    }
    if reply.is_empty() {
        return fail(
            error::INVALID_OPTIONS,
            "no option found to set, use help:true to see options ",
        );
    }
    Ok(reply)
}

fn set_tls_mode(tls: &MemberTls, value: &str) -> Result<String, CmdError> {
    let requested = TlsMode::parse(value).ok_or_else(|| {
        CmdError::new(error::BAD_VALUE, format!("Invalid tlsMode value: {value}"))
    })?;
    tls.update(|state| {
        let old = state.mode;
        let legal = matches!(
            (old, requested),
            (TlsMode::AllowTls, TlsMode::PreferTls) | (TlsMode::PreferTls, TlsMode::RequireTls)
        );
        if !legal {
            return Err(CmdError::new(
                error::BAD_VALUE,
                format!(
                    "Illegal state transition for tlsMode, attempt to change from {} to {value}",
                    old.name()
                ),
            ));
        }
        state.mode = requested;
        Ok(old.name().to_string())
    })
}

fn set_cluster_auth_mode(
    tls: &MemberTls,
    version: ServerVersion,
    value: &str,
) -> Result<String, CmdError> {
    let modern = version >= ServerVersion::new(5, 0, 0);
    let requested = ClusterAuthMode::parse(value).ok_or_else(|| {
        let message = if modern {
            format!("Invalid clusterAuthMode '{value}'")
        } else {
            format!("Invalid clusterAuthMode '{value}', expected one of: 'keyFile', 'sendKeyFile', 'sendX509', or 'x509'")
        };
        CmdError::new(error::BAD_VALUE, message)
    })?;
    tls.update(|state| {
        let old = state.cluster_auth_mode;
        let old_name = old.map_or("undefined", ClusterAuthMode::name);
        let tls_outgoing = state.mode.dials_tls();
        let need_tls = || {
            CmdError::new(
                error::BAD_VALUE,
                "Illegal state transition for clusterAuthMode, need to enable SSL for outgoing connections",
            )
        };
        use ClusterAuthMode::*;
        if modern {
            if requested.allows_x509() && !tls_outgoing {
                return Err(need_tls());
            }
            let legal = match old {
                None => true,
                Some(KeyFile) => requested == SendKeyFile,
                Some(SendKeyFile) => requested == SendX509,
                Some(SendX509) => requested == X509,
                Some(X509) => false,
            };
            if !legal {
                return Err(CmdError::new(
                    error::ILLEGAL_CLUSTER_AUTH_MODE_TRANSITION,
                    format!("Illegal state transition for clusterAuthMode from '{old_name}' to '{value}'"),
                ));
            }
        } else {
            match (old, requested) {
                (Some(SendKeyFile), SendX509) if !tls_outgoing => return Err(need_tls()),
                (Some(SendKeyFile), SendX509) | (Some(SendX509), X509) => {}
                _ => {
                    return Err(CmdError::new(
                        error::BAD_VALUE,
                        format!("Illegal state transition for clusterAuthMode, change from {old_name} to {value}"),
                    ))
                }
            }
        }
        state.cluster_auth_mode = Some(requested);
        Ok(old_name.to_string())
    })
}

/// `rotateCertificates`.
pub(crate) fn rotate_certificates(member: &Arc<Member>, body: &Document) -> CmdResult {
    if member.version() < ServerVersion::new(5, 0, 0) {
        return fail(
            error::COMMAND_NOT_FOUND,
            "no such command: 'rotateCertificates'",
        );
    }
    if db_of(body) != "admin" {
        return fail(
            error::UNAUTHORIZED,
            "rotateCertificates may only be run against the admin database.",
        );
    }
    let tls = member.tls();
    if tls.state().mode == TlsMode::Disabled {
        return Ok(doc! {});
    }
    let material = super::material::Material::load(tls.spec())
        .map_err(|e| CmdError::new(error::INVALID_SSL_CONFIGURATION, e.to_string()))?;
    tls.update(|state| state.material = Some(Arc::new(material)));
    let message = body.get_str("message").unwrap_or_default();
    tracing::info!(id = 4988500, member = %member.listen(), message, "Certificate rotation completed successfully");
    Ok(doc! {})
}
