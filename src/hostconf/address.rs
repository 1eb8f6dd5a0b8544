//! Member addresses: `<host>:<port>` as the replica-set config, hostconf and
//! status write them.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use super::error::{cut, quote, QUOTE_LIMIT};

const MAX_HOST_LEN: usize = 253;

/// A member address `host:port` exactly as in the replica-set config, hostconf
/// and status. The host is the cluster VIP: an IPv4 address or a DNS name, or an
/// IPv6 address (kept without its brackets; [`fmt::Display`] puts them back).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MemberAddress {
    pub host: String,
    pub port: u16,
}

/// Why a `host:port` string is not a member address.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    #[error("expected <host>:<port>, found {found}")]
    MissingPort { found: String },
    #[error("empty host in {found}")]
    EmptyHost { found: String },
    #[error("invalid character {ch:?} in the host of {found}")]
    HostCharacter { ch: char, found: String },
    #[error("an IPv6 host must be written in brackets, as [fd00::1]:27017; found {found}")]
    UnbracketedIpv6 { found: String },
    #[error("invalid IPv6 address in brackets in {found}")]
    Ipv6 { found: String },
    #[error("invalid IPv4 address in {found}")]
    Ipv4 { found: String },
    #[error("host is longer than 253 characters in {found}")]
    HostTooLong { found: String },
    #[error("port {port} is not a number (in {found})")]
    PortNotNumber { port: String, found: String },
    #[error("port {port} has a leading zero (in {found})")]
    PortLeadingZero { port: String, found: String },
    #[error("port {port} is outside 1-65535 (in {found})")]
    PortOutOfRange { port: String, found: String },
}

impl MemberAddress {
    /// Parses `host:port`: an IPv4 address, a DNS name or a bracketed IPv6
    /// address, then a decimal port in 1–65535 without sign or leading zero.
    /// Whitespace anywhere is an error; hosts are kept exactly as written.
    pub fn parse(s: &str) -> Result<Self, AddressError> {
        let found = || quote(s);
        let (host, port) = if let Some(rest) = s.strip_prefix('[') {
            let (inner, after) = rest
                .split_once(']')
                .ok_or_else(|| AddressError::Ipv6 { found: found() })?;
            let port = after
                .strip_prefix(':')
                .ok_or_else(|| AddressError::MissingPort { found: found() })?;
            if inner.parse::<Ipv6Addr>().is_err() {
                return Err(AddressError::Ipv6 { found: found() });
            }
            (inner, port)
        } else {
            let (host, port) = s
                .rsplit_once(':')
                .ok_or_else(|| AddressError::MissingPort { found: found() })?;
            check_host(host, s)?;
            (host, port)
        };
        let port = parse_port(port, s)?;
        Ok(MemberAddress {
            host: host.to_owned(),
            port,
        })
    }
}

fn check_host(host: &str, whole: &str) -> Result<(), AddressError> {
    let found = quote(whole);
    if host.is_empty() {
        return Err(AddressError::EmptyHost { found });
    }
    if let Some(ch) = host
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')))
    {
        return Err(if ch == ':' {
            AddressError::UnbracketedIpv6 { found }
        } else {
            AddressError::HostCharacter { ch, found }
        });
    }
    if host.len() > MAX_HOST_LEN {
        return Err(AddressError::HostTooLong { found });
    }
    let looks_ipv4 = host.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    if looks_ipv4 && host.parse::<Ipv4Addr>().is_err() {
        return Err(AddressError::Ipv4 { found });
    }
    Ok(())
}

fn parse_port(port: &str, whole: &str) -> Result<u16, AddressError> {
    let found = quote(whole);
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
        return Err(AddressError::PortNotNumber {
            port: quote(port),
            found,
        });
    }
    if port.len() > 1 && port.starts_with('0') {
        return Err(AddressError::PortLeadingZero {
            port: quote(port),
            found,
        });
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(AddressError::PortOutOfRange {
            port: cut(port, QUOTE_LIMIT),
            found,
        }),
    }
}

impl fmt::Display for MemberAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}
