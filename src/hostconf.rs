//! Parser of the **hostconf** ConfigMap: the list of every member of the
//! cross-cluster replica set, written by the control plane and propagated to
//! every member cluster.
//!
//! A member is named by its address `<cluster VIP>:<nodePort>`, exactly the host
//! string of the replica-set config and of `status.replset[].name`. The list is a
//! set: the order of lines or entries carries no meaning (FedState rewrites it in
//! whatever order its own lists happen to be), so nothing — `_id`, votes,
//! priority — may be derived from positions.
//!
//! Two formats are accepted. A ConfigMap uses exactly one of them: holding
//! `members.yaml` together with `datas` or `arbiters` is an error, and so is
//! holding neither. Other keys are ignored.
//!
//! # FedState format (keys `datas` and `arbiters`)
//!
//! ```yaml
//! data:
//!   datas: |
//!     host:'10.29.5.107:38018'
//!     host:'10.29.5.108:38018'
//!   arbiters: |
//!     host:'10.29.5.107:38825'
//! ```
//!
//! - `datas` (required) lists the data-bearing members, one `host:'<host>:<port>'`
//!   per line; `arbiters` (optional) lists at most one arbiter the same way.
//! - Blank lines are ignored, and so is whitespace before and after a line
//!   (`\r` of CRLF included). Nothing else is lenient: the prefix is exactly
//!   `host:'`, the quotes are single quotes (FedState's own parser splits on
//!   `host:'` and fails on anything else, so `host:"…"` is rejected with a hint),
//!   and nothing may follow the closing quote — no comment, no comma.
//! - The format carries addresses and arbiter-ness only; votes and priority are
//!   left to the operator (`None` in [`HostConfMember`]).
//!
//! [`HostConf::to_fedstate_data`] writes this format: one line per member, lines
//! joined by `\n` without a trailing newline (FedState's control plane reads its
//! own hostconf without skipping an empty last line), and always both keys
//! (`arbiters` empty when there is no arbiter).
//!
//! # Structured format (key `members.yaml`)
//!
//! For control planes other than FedState. A YAML list, one mapping per member:
//!
//! ```yaml
//! data:
//!   members.yaml: |
//!     - host: 10.29.5.107:38018
//!       priority: 2
//!       tags: {site: east}
//!     - host: 10.29.5.108:38018
//!       votes: 0
//!       priority: 0
//!     - host: 10.29.5.107:38825
//!       arbiter: true
//! ```
//!
//! | field | type | default | rule |
//! |---|---|---|---|
//! | `host` | string | required | `<host>:<port>`, see *Addresses* |
//! | `arbiter` | bool | `false` | at most one member is an arbiter |
//! | `votes` | integer | chosen by the operator | 0 or 1; an arbiter cannot have 0 |
//! | `priority` | number | chosen by the operator | 0–1000; must be 0 (or absent) for an arbiter, a hidden member and a member with `votes: 0` |
//! | `hidden` | bool | `false` | |
//! | `tags` | map string → string | empty | an arbiter cannot have tags |
//!
//! Unknown fields are errors (a misspelt `prority` must not be silently dropped).
//! Tag values are strings; a plain scalar such as `rack: 1` is read as `"1"`.
//! Block style (above) and flow style (`[{host: 10.0.0.1:30001}, …]`) are both
//! accepted, but at most 2000 `[` and `{` characters in all: the YAML parser's
//! time grows with the square of the nesting depth.
//!
//! # Addresses
//!
//! `<host>:<port>`, where the host is an IPv4 address (`10.0.0.1`), a DNS name
//! (ASCII letters, digits, `.`, `-`, `_`; at most 253 characters) or an IPv6
//! address in brackets (`[fd00::1]:30001`), and the port is a decimal number in
//! 1–65535 without sign or leading zero. Whitespace anywhere inside is an error.
//! Hosts are compared exactly as written (no case folding, no resolution).
//!
//! # Rules for the whole list (both formats)
//!
//! - at least one data-bearing member and at most 50 members;
//! - no address twice (a member in both `datas` and `arbiters` is a duplicate);
//! - at most 7 members given a vote explicitly (`votes: 1`, or an arbiter);
//! - at least one data-bearing member that may become primary (not hidden, not
//!   `votes: 0`, not `priority: 0`).
//!
//! # Errors
//!
//! [`HostConfError`] names the key, the line (1-based, within the value of that
//! key) and the problem, e.g.
//! `hostconf key "datas", line 3: port 70000 is outside 1-65535 (in "10.0.0.1:70000")`.
//! In `members.yaml` an entry's position is the line of its `-` when the list is
//! written in block style, otherwise (flow style `[{…}, {…}]`) its 1-based entry
//! number. Quoted input is cut to 80 characters.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use serde::Deserialize;

const DATAS: &str = "datas";
const ARBITERS: &str = "arbiters";
const MEMBERS_YAML: &str = "members.yaml";
const MAX_MEMBERS: usize = 50;
const MAX_VOTERS: usize = 7;
const MAX_HOST_LEN: usize = 253;
const QUOTE_LIMIT: usize = 80;
const MESSAGE_LIMIT: usize = 200;
const MAX_FLOW_OPENERS: usize = 2000;

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
    /// Parses `host:port` (see the module documentation, *Addresses*).
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

/// One member listed in hostconf. `votes` and `priority` are `None` when the
/// control plane leaves them to the operator (always, in the FedState format).
#[derive(Clone, Debug, PartialEq)]
pub struct HostConfMember {
    pub address: MemberAddress,
    pub arbiter: bool,
    pub votes: Option<u8>,
    pub priority: Option<f64>,
    pub hidden: bool,
    pub tags: BTreeMap<String, String>,
}

/// Every member of the replica set, as the control plane listed it (order
/// carries no meaning).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct HostConf {
    pub members: Vec<HostConfMember>,
}

/// Where a member was found within the value of a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Position {
    /// 1-based line.
    Line(usize),
    /// 1-based entry of a flow-style `members.yaml` list, whose lines are unknown.
    Entry(usize),
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Position::Line(n) => write!(f, "line {n}"),
            Position::Entry(n) => write!(f, "entry {n}"),
        }
    }
}

/// What is wrong with one line (or one `members.yaml` entry).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum EntryProblem {
    #[error("expected host:'<host>:<port>', found {found}")]
    NotAHostLine { found: String },
    #[error("double quotes are not accepted, write host:'<host>:<port>' (found {found})")]
    DoubleQuotes { found: String },
    #[error("missing the closing ' in {found}")]
    MissingClosingQuote { found: String },
    #[error("unexpected text after the closing quote: {found}")]
    TrailingText { found: String },
    #[error(transparent)]
    Address(#[from] AddressError),
    #[error("duplicate member {address} (first {})", first_seen(*.same_key, .first_key, *.first_at))]
    Duplicate {
        address: MemberAddress,
        first_key: &'static str,
        first_at: Position,
        same_key: bool,
    },
    #[error("a second arbiter, at most 1 is allowed (the first is on {first_at})")]
    SecondArbiter { first_at: Position },
    #[error("votes must be 0 or 1, found {found}")]
    Votes { found: i64 },
    #[error("priority must be between 0 and 1000, found {found}")]
    Priority { found: f64 },
    #[error("an arbiter must have priority 0, found {found}")]
    ArbiterPriority { found: f64 },
    #[error("an arbiter must vote, votes 0 is not allowed")]
    ArbiterWithoutVote,
    #[error("an arbiter cannot have tags")]
    ArbiterTags,
    #[error("a hidden member must have priority 0, found {found}")]
    HiddenPriority { found: f64 },
    #[error("a member with votes 0 must have priority 0, found {found}")]
    NonVoterPriority { found: f64 },
}

fn first_seen(same_key: bool, first_key: &str, first_at: Position) -> String {
    if same_key {
        format!("on {first_at}")
    } else {
        format!("in key {first_key:?}, {first_at}")
    }
}

/// Why a hostconf ConfigMap was refused. Every message starts with `hostconf`
/// and, when one key is at fault, names it, and the line when one line is.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum HostConfError {
    #[error("hostconf lists no members: expected key \"datas\" (FedState format) or key \"members.yaml\" (structured format), found keys {keys}")]
    NoFormat { keys: String },
    #[error("hostconf mixes two formats: key \"members.yaml\" cannot be used together with key {fedstate_key:?}")]
    MixedFormats { fedstate_key: &'static str },
    #[error(
        "hostconf key \"datas\" is missing (key \"arbiters\" alone lists no data-bearing member)"
    )]
    MissingDatas,
    #[error("hostconf key {key:?}, {at}: {problem}")]
    At {
        key: &'static str,
        at: Position,
        problem: EntryProblem,
    },
    #[error("hostconf key \"arbiters\" holds {} members (lines {}), at most 1 is allowed", .lines.len(), join_lines(.lines))]
    TooManyArbiters { lines: Vec<usize> },
    #[error("hostconf key \"members.yaml\"{}: {message}", line_suffix(*.line))]
    Yaml {
        line: Option<usize>,
        message: String,
    },
    #[error("hostconf key {key:?} lists no data-bearing member")]
    NoDataMember { key: &'static str },
    #[error("hostconf lists {count} members, a replica set holds at most 50")]
    TooManyMembers { count: usize },
    #[error("hostconf gives a vote to {count} members, a replica set allows at most 7 voters")]
    TooManyVoters { count: usize },
    #[error("hostconf leaves no data-bearing member that may become primary (each is hidden, has votes 0 or priority 0)")]
    NoElectableMember,
}

fn line_suffix(line: Option<usize>) -> String {
    line.map(|n| format!(", line {n}")).unwrap_or_default()
}

fn join_lines(lines: &[usize]) -> String {
    let shown: Vec<String> = lines.iter().take(10).map(usize::to_string).collect();
    let more = if lines.len() > 10 { ", …" } else { "" };
    format!("{}{more}", shown.join(", "))
}

/// One entry of `members.yaml` as written.
#[derive(Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(deny_unknown_fields, rename = "member")]
struct RawMember {
    host: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    arbiter: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    votes: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    priority: Option<f64>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    hidden: bool,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    tags: BTreeMap<String, String>,
}

impl RawMember {
    fn into_member(self) -> Result<HostConfMember, EntryProblem> {
        let address = MemberAddress::parse(&self.host)?;
        let votes = match self.votes {
            None => None,
            Some(v @ (0 | 1)) => Some(v as u8),
            Some(found) => return Err(EntryProblem::Votes { found }),
        };
        let positive_priority = match self.priority {
            Some(p) if !(0.0..=1000.0).contains(&p) => {
                return Err(EntryProblem::Priority { found: p })
            }
            Some(p) if p > 0.0 => Some(p),
            _ => None,
        };
        if self.arbiter {
            if let Some(found) = positive_priority {
                return Err(EntryProblem::ArbiterPriority { found });
            }
            if votes == Some(0) {
                return Err(EntryProblem::ArbiterWithoutVote);
            }
            if !self.tags.is_empty() {
                return Err(EntryProblem::ArbiterTags);
            }
        }
        if let Some(found) = positive_priority {
            if self.hidden {
                return Err(EntryProblem::HiddenPriority { found });
            }
            if votes == Some(0) {
                return Err(EntryProblem::NonVoterPriority { found });
            }
        }
        Ok(HostConfMember {
            address,
            arbiter: self.arbiter,
            votes,
            priority: self.priority,
            hidden: self.hidden,
            tags: self.tags,
        })
    }
}

/// Collects members, refusing duplicates and a second arbiter.
#[derive(Default)]
struct Builder {
    members: Vec<HostConfMember>,
    seen: HashMap<MemberAddress, (&'static str, Position)>,
    arbiter_at: Option<Position>,
}

impl Builder {
    fn push(
        &mut self,
        key: &'static str,
        at: Position,
        member: HostConfMember,
    ) -> Result<(), HostConfError> {
        let problem = if let Some(&(first_key, first_at)) = self.seen.get(&member.address) {
            Some(EntryProblem::Duplicate {
                address: member.address.clone(),
                first_key,
                first_at,
                same_key: first_key == key,
            })
        } else {
            match (member.arbiter, self.arbiter_at) {
                (true, Some(first_at)) => Some(EntryProblem::SecondArbiter { first_at }),
                _ => None,
            }
        };
        if let Some(problem) = problem {
            return Err(HostConfError::At { key, at, problem });
        }
        if member.arbiter {
            self.arbiter_at = Some(at);
        }
        self.seen.insert(member.address.clone(), (key, at));
        self.members.push(member);
        Ok(())
    }
}

impl HostConf {
    /// Parses a ConfigMap's `data` in either format (see the module
    /// documentation); holding both formats, or neither, is an error.
    pub fn from_config_map_data(
        data: &BTreeMap<String, String>,
    ) -> Result<HostConf, HostConfError> {
        let fedstate_key = [DATAS, ARBITERS]
            .into_iter()
            .find(|k| data.contains_key(*k));
        let conf = match (fedstate_key, data.get(MEMBERS_YAML)) {
            (Some(fedstate_key), Some(_)) => {
                return Err(HostConfError::MixedFormats { fedstate_key })
            }
            (Some(_), None) => parse_fedstate(data)?,
            (None, Some(yaml)) => parse_structured(yaml)?,
            (None, None) => {
                return Err(HostConfError::NoFormat {
                    keys: key_list(data),
                })
            }
        };
        conf.check_whole_list()?;
        Ok(conf)
    }

    /// The data-bearing members (every member but the arbiter).
    pub fn data_members(&self) -> impl Iterator<Item = &HostConfMember> {
        self.members.iter().filter(|m| !m.arbiter)
    }

    /// The arbiter, if one is listed.
    pub fn arbiter(&self) -> Option<&HostConfMember> {
        self.members.iter().find(|m| m.arbiter)
    }

    /// Members whose host is this cluster's VIP (an IPv6 VIP may be given with
    /// or without brackets).
    pub fn local_to(&self, vip: &str) -> impl Iterator<Item = &HostConfMember> + '_ {
        let vip = vip
            .strip_prefix('[')
            .and_then(|v| v.strip_suffix(']'))
            .unwrap_or(vip)
            .to_owned();
        self.members.iter().filter(move |m| m.address.host == vip)
    }

    /// Renders the FedState format (`datas` and `arbiters`; see the module
    /// documentation). Votes, priority, hidden and tags are not part of it.
    pub fn to_fedstate_data(&self) -> BTreeMap<String, String> {
        let line = |m: &HostConfMember| format!("host:'{}'", m.address);
        let datas: Vec<String> = self.data_members().map(line).collect();
        BTreeMap::from([
            (DATAS.to_owned(), datas.join("\n")),
            (
                ARBITERS.to_owned(),
                self.arbiter().map(line).unwrap_or_default(),
            ),
        ])
    }

    fn check_whole_list(&self) -> Result<(), HostConfError> {
        let count = self.members.len();
        if count > MAX_MEMBERS {
            return Err(HostConfError::TooManyMembers { count });
        }
        let voters = self
            .members
            .iter()
            .filter(|m| m.votes == Some(1) || (m.arbiter && m.votes.is_none()))
            .count();
        if voters > MAX_VOTERS {
            return Err(HostConfError::TooManyVoters { count: voters });
        }
        let may_be_primary = self
            .data_members()
            .any(|m| !m.hidden && m.votes != Some(0) && m.priority.is_none_or(|p| p > 0.0));
        if !may_be_primary {
            return Err(HostConfError::NoElectableMember);
        }
        Ok(())
    }
}

fn parse_fedstate(data: &BTreeMap<String, String>) -> Result<HostConf, HostConfError> {
    let datas = data.get(DATAS).ok_or(HostConfError::MissingDatas)?;
    let mut builder = Builder::default();
    for (line, address) in fedstate_lines(DATAS, datas)? {
        builder.push(DATAS, Position::Line(line), plain_member(address, false))?;
    }
    if builder.members.is_empty() {
        return Err(HostConfError::NoDataMember { key: DATAS });
    }
    let arbiters = match data.get(ARBITERS) {
        Some(text) => fedstate_lines(ARBITERS, text)?,
        None => Vec::new(),
    };
    if arbiters.len() > 1 {
        return Err(HostConfError::TooManyArbiters {
            lines: arbiters.iter().map(|(line, _)| *line).collect(),
        });
    }
    for (line, address) in arbiters {
        builder.push(ARBITERS, Position::Line(line), plain_member(address, true))?;
    }
    Ok(HostConf {
        members: builder.members,
    })
}

fn plain_member(address: MemberAddress, arbiter: bool) -> HostConfMember {
    HostConfMember {
        address,
        arbiter,
        votes: None,
        priority: None,
        hidden: false,
        tags: BTreeMap::new(),
    }
}

/// The addresses of the non-blank lines of `text`, with their 1-based line numbers.
fn fedstate_lines(
    key: &'static str,
    text: &str,
) -> Result<Vec<(usize, MemberAddress)>, HostConfError> {
    text.lines()
        .enumerate()
        .map(|(i, line)| (i + 1, line.trim()))
        .filter(|(_, line)| !line.is_empty())
        .map(|(n, line)| {
            parse_fedstate_line(line)
                .map(|address| (n, address))
                .map_err(|problem| HostConfError::At {
                    key,
                    at: Position::Line(n),
                    problem,
                })
        })
        .collect()
}

fn parse_fedstate_line(line: &str) -> Result<MemberAddress, EntryProblem> {
    let Some(rest) = line.strip_prefix("host:'") else {
        return Err(if line.starts_with("host:\"") {
            EntryProblem::DoubleQuotes { found: quote(line) }
        } else {
            EntryProblem::NotAHostLine { found: quote(line) }
        });
    };
    let Some((inner, after)) = rest.split_once('\'') else {
        return Err(EntryProblem::MissingClosingQuote { found: quote(line) });
    };
    if !after.is_empty() {
        return Err(EntryProblem::TrailingText {
            found: quote(after),
        });
    }
    Ok(MemberAddress::parse(inner)?)
}

fn parse_structured(text: &str) -> Result<HostConf, HostConfError> {
    // libyaml's time grows with the square of the flow nesting depth: refuse
    // deep `[[[[…`/`{{{{…` before parsing rather than spend minutes on it.
    let openers = text.bytes().filter(|b| matches!(b, b'[' | b'{')).count();
    if openers > MAX_FLOW_OPENERS {
        return Err(HostConfError::Yaml {
            line: None,
            message: format!(
                "holds {openers} '[' or '{{' characters, at most {MAX_FLOW_OPENERS} are accepted"
            ),
        });
    }
    let raw: Vec<RawMember> = serde_yaml::from_str::<Option<Vec<RawMember>>>(text)
        .map_err(|e| HostConfError::Yaml {
            line: e.location().map(|l| l.line()),
            message: cut(&e.to_string(), MESSAGE_LIMIT),
        })?
        .unwrap_or_default();
    let lines = block_entry_lines(text);
    let by_line = lines.len() == raw.len();
    let mut builder = Builder::default();
    for (i, entry) in raw.into_iter().enumerate() {
        let at = match by_line {
            true => Position::Line(lines[i]),
            false => Position::Entry(i + 1),
        };
        let member = entry.into_member().map_err(|problem| HostConfError::At {
            key: MEMBERS_YAML,
            at,
            problem,
        })?;
        builder.push(MEMBERS_YAML, at, member)?;
    }
    if builder.members.iter().all(|m| m.arbiter) {
        return Err(HostConfError::NoDataMember { key: MEMBERS_YAML });
    }
    Ok(HostConf {
        members: builder.members,
    })
}

/// 1-based lines of the `-` items of a top-level block sequence; empty when the
/// text is not one (flow style), in which case positions fall back to entries.
fn block_entry_lines(text: &str) -> Vec<usize> {
    let mut indent = None;
    let mut lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let body = line.trim_start_matches(' ');
        if body.trim().is_empty() || body.starts_with('#') {
            continue;
        }
        let is_item = body == "-" || body.starts_with("- ") || body.starts_with("-\t");
        let here = line.len() - body.len();
        match indent {
            None if is_item => indent = Some(here),
            None if body.starts_with("---") || body.starts_with('%') => continue,
            None => return Vec::new(),
            Some(_) => {}
        }
        if is_item && indent == Some(here) {
            lines.push(i + 1);
        }
    }
    lines
}

fn key_list(data: &BTreeMap<String, String>) -> String {
    if data.is_empty() {
        return "(none)".to_owned();
    }
    let shown: Vec<String> = data.keys().take(10).map(|k| quote(k)).collect();
    let more = if data.len() > 10 { ", …" } else { "" };
    format!("{}{more}", shown.join(", "))
}

/// `s` in double quotes with escapes, cut to [`QUOTE_LIMIT`] characters.
fn quote(s: &str) -> String {
    match s.char_indices().nth(QUOTE_LIMIT) {
        None => format!("{s:?}"),
        Some((end, _)) => format!("{:?}… ({} characters)", &s[..end], s.chars().count()),
    }
}

/// `s` cut to `limit` characters, unquoted (for digits and parser messages).
fn cut(s: &str, limit: usize) -> String {
    match s.char_indices().nth(limit) {
        None => s.to_owned(),
        Some((end, _)) => format!("{}…", &s[..end]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn parse(pairs: &[(&str, &str)]) -> Result<HostConf, HostConfError> {
        HostConf::from_config_map_data(&data(pairs))
    }

    fn error(pairs: &[(&str, &str)]) -> String {
        match parse(pairs) {
            Ok(conf) => panic!("expected an error, parsed {conf:?}"),
            Err(e) => e.to_string(),
        }
    }

    fn addr(s: &str) -> MemberAddress {
        MemberAddress::parse(s).unwrap()
    }

    fn addresses(conf: &HostConf) -> Vec<String> {
        conf.members.iter().map(|m| m.address.to_string()).collect()
    }

    // ---- addresses ----

    #[test]
    fn address_accepts_ipv4_dns_and_bracketed_ipv6() {
        assert_eq!(
            addr("10.29.5.107:38018"),
            MemberAddress {
                host: "10.29.5.107".into(),
                port: 38018
            }
        );
        assert_eq!(
            addr("mongo-a.example_zone.local:1").host,
            "mongo-a.example_zone.local"
        );
        let v6 = addr("[fd00::1]:65535");
        assert_eq!((v6.host.as_str(), v6.port), ("fd00::1", 65535));
        assert_eq!(v6.to_string(), "[fd00::1]:65535");
        assert_eq!(addr("10.0.0.1:30001").to_string(), "10.0.0.1:30001");
    }

    #[test]
    fn address_rejects_malformed_input_with_a_reason() {
        let cases = [
            ("", "expected <host>:<port>"),
            ("10.0.0.1", "expected <host>:<port>"),
            (":30001", "empty host"),
            ("10.0.0.1:", "port \"\" is not a number"),
            ("10.0.0.1:3x", "port \"3x\" is not a number"),
            ("10.0.0.1:+1", "port \"+1\" is not a number"),
            ("10.0.0.1:030001", "leading zero"),
            ("10.0.0.1:0", "port 0 is outside 1-65535"),
            ("10.0.0.1:70000", "port 70000 is outside 1-65535"),
            ("10.0.0.1: 30001", "is not a number"),
            ("10.0.0 .1:30001", "invalid character ' '"),
            ("a/b:1", "invalid character '/'"),
            ("fd00::1:27017", "must be written in brackets"),
            ("[fd00::1]27017", "expected <host>:<port>"),
            ("[10.0.0.1]:27017", "invalid IPv6"),
            ("[fd00::1:27017", "invalid IPv6"),
            ("10.0.0.256:1", "invalid IPv4"),
        ];
        for (input, want) in cases {
            let e = MemberAddress::parse(input).expect_err(input).to_string();
            assert!(e.contains(want), "{input:?}: {e:?} lacks {want:?}");
        }
        let long = format!("{}:1", "a".repeat(254));
        assert!(MemberAddress::parse(&long)
            .unwrap_err()
            .to_string()
            .contains("longer than 253"));
    }

    #[test]
    fn address_error_quotes_at_most_80_characters() {
        let huge = format!("{}:1", "x".repeat(10_000));
        let e = MemberAddress::parse(&huge).unwrap_err().to_string();
        assert!(e.len() < 200, "{e}");
        assert!(e.contains("(10002 characters)"), "{e}");
    }

    // ---- FedState format: accepted forms ----

    #[test]
    fn fedstate_sample_parses_into_data_members_and_arbiter() {
        let conf = parse(&[
            (
                "datas",
                "host:'10.29.5.107:38018'\nhost:'10.29.5.108:38018'\n",
            ),
            ("arbiters", "host:'10.29.5.107:38825'\n"),
        ])
        .unwrap();
        let data: Vec<_> = conf.data_members().map(|m| m.address.to_string()).collect();
        assert_eq!(data, ["10.29.5.107:38018", "10.29.5.108:38018"]);
        let arbiter = conf.arbiter().unwrap();
        assert_eq!(arbiter.address, addr("10.29.5.107:38825"));
        assert!(arbiter.arbiter && arbiter.votes.is_none() && arbiter.priority.is_none());
        let local: Vec<_> = conf
            .local_to("10.29.5.107")
            .map(|m| m.address.port)
            .collect();
        assert_eq!(local, [38018, 38825]);
        assert_eq!(conf.local_to("10.29.5.1").count(), 0);
    }

    #[test]
    fn fedstate_tolerates_blank_lines_surrounding_whitespace_and_crlf() {
        let conf = parse(&[(
            "datas",
            "\n  host:'10.0.0.1:30001'  \r\n\t\n\thost:'10.0.0.2:30001'\r\n\n",
        )])
        .unwrap();
        assert_eq!(addresses(&conf), ["10.0.0.1:30001", "10.0.0.2:30001"]);
        assert!(conf.arbiter().is_none());
    }

    #[test]
    fn fedstate_accepts_missing_or_empty_arbiters_and_ignores_other_keys() {
        for arbiters in [None, Some(""), Some("\n \n")] {
            let mut d = data(&[("datas", "host:'10.0.0.1:30001'"), ("note", "x")]);
            if let Some(a) = arbiters {
                d.insert("arbiters".into(), a.into());
            }
            let conf = HostConf::from_config_map_data(&d).unwrap();
            assert_eq!(conf.members.len(), 1);
            assert!(conf.arbiter().is_none());
        }
    }

    #[test]
    fn local_to_accepts_ipv6_vip_with_or_without_brackets() {
        let conf = parse(&[("datas", "host:'[fd00::1]:30001'\nhost:'10.0.0.1:30001'")]).unwrap();
        assert_eq!(conf.local_to("fd00::1").count(), 1);
        assert_eq!(conf.local_to("[fd00::1]").count(), 1);
    }

    // ---- FedState format: errors ----

    fn datas_error(datas: &str) -> String {
        error(&[("datas", datas)])
    }

    #[test]
    fn fedstate_line_not_in_host_form_names_key_line_and_text() {
        let e = datas_error("host:'10.0.0.1:30001'\n\nhost:10.0.0.2:30001\n");
        assert_eq!(
            e,
            r#"hostconf key "datas", line 3: expected host:'<host>:<port>', found "host:10.0.0.2:30001""#
        );
        for line in [
            "10.0.0.1:30001",
            "Host:'10.0.0.1:30001'",
            "host: '10.0.0.1:30001'",
            "# host:'10.0.0.1:30001'",
            "- host:'10.0.0.1:30001'",
        ] {
            let e = datas_error(line);
            assert!(
                e.starts_with(
                    r#"hostconf key "datas", line 1: expected host:'<host>:<port>', found"#
                ),
                "{e}"
            );
        }
    }

    #[test]
    fn fedstate_non_numeric_port_names_line() {
        let e = datas_error("host:'10.0.0.1:30001'\nhost:'10.0.0.2:30001'\nhost:'10.0.0.1:3x'");
        assert_eq!(
            e,
            r#"hostconf key "datas", line 3: port "3x" is not a number (in "10.0.0.1:3x")"#
        );
    }

    #[test]
    fn fedstate_port_out_of_range_names_line() {
        let e = datas_error("host:'10.0.0.1:70000'");
        assert_eq!(
            e,
            r#"hostconf key "datas", line 1: port 70000 is outside 1-65535 (in "10.0.0.1:70000")"#
        );
    }

    #[test]
    fn fedstate_duplicate_names_both_lines() {
        let e = datas_error("host:'10.0.0.1:30001'\nhost:'10.0.0.2:30001'\nhost:'10.0.0.1:30001'");
        assert_eq!(
            e,
            r#"hostconf key "datas", line 3: duplicate member 10.0.0.1:30001 (first on line 1)"#
        );
    }

    #[test]
    fn fedstate_member_in_both_datas_and_arbiters_is_a_duplicate() {
        let e = error(&[
            ("datas", "host:'10.0.0.2:30001'\nhost:'10.0.0.1:30001'"),
            ("arbiters", "host:'10.0.0.1:30001'"),
        ]);
        assert_eq!(
            e,
            r#"hostconf key "arbiters", line 1: duplicate member 10.0.0.1:30001 (first in key "datas", line 2)"#
        );
    }

    #[test]
    fn fedstate_two_arbiters_are_refused() {
        let e = error(&[
            ("datas", "host:'10.0.0.1:30001'"),
            (
                "arbiters",
                "host:'10.0.0.1:30002'\n\nhost:'10.0.0.2:30002'\n",
            ),
        ]);
        assert_eq!(
            e,
            r#"hostconf key "arbiters" holds 2 members (lines 1, 3), at most 1 is allowed"#
        );
    }

    #[test]
    fn fedstate_quote_and_garbage_errors_name_the_line() {
        let cases = [
            ("host:\"10.0.0.1:30001\"", "double quotes are not accepted"),
            ("host:'10.0.0.1:30001", "missing the closing '"),
            (
                "host:'10.0.0.1:30001' # a",
                "unexpected text after the closing quote: \" # a\"",
            ),
            (
                "host:'10.0.0.1:30001'x",
                "unexpected text after the closing quote: \"x\"",
            ),
            (
                "host:'10.0.0.1:30001''",
                "unexpected text after the closing quote",
            ),
            ("host:':30001'", "empty host"),
            ("host:''", "expected <host>:<port>, found \"\""),
            ("host:'10.0.0.1 :30001'", "invalid character ' '"),
            ("host:' 10.0.0.1:30001'", "invalid character ' '"),
            ("host:'10.0.0.1:30001 '", "is not a number"),
        ];
        for (line, want) in cases {
            let e = datas_error(&format!("host:'10.0.0.9:1'\n{line}"));
            assert!(
                e.starts_with(r#"hostconf key "datas", line 2: "#),
                "{line}: {e}"
            );
            assert!(e.contains(want), "{line}: {e} lacks {want}");
        }
        let e = error(&[
            ("datas", "host:'10.0.0.1:1'"),
            ("arbiters", "host:'10.0.0.1:1 '"),
        ]);
        assert!(e.starts_with(r#"hostconf key "arbiters", line 1: "#), "{e}");
    }

    #[test]
    fn fedstate_huge_line_is_quoted_truncated() {
        let line = format!("host:'{}", "9".repeat(100_000));
        let e = datas_error(&line);
        assert!(
            e.starts_with(r#"hostconf key "datas", line 1: missing the closing ' in "host:'999"#),
            "{e}"
        );
        assert!(e.len() < 200, "{} bytes", e.len());
    }

    #[test]
    fn fedstate_without_data_members_is_refused() {
        assert_eq!(
            datas_error("\n\n"),
            r#"hostconf key "datas" lists no data-bearing member"#
        );
        assert_eq!(
            error(&[("arbiters", "host:'10.0.0.1:1'")]),
            r#"hostconf key "datas" is missing (key "arbiters" alone lists no data-bearing member)"#
        );
    }

    #[test]
    fn more_than_50_members_are_refused() {
        let datas: Vec<String> = (1..=51).map(|p| format!("host:'10.0.0.1:{p}'")).collect();
        assert_eq!(
            datas_error(&datas.join("\n")),
            "hostconf lists 51 members, a replica set holds at most 50"
        );
        assert!(parse(&[("datas", &datas[..50].join("\n"))]).is_ok());
    }

    // ---- choice of format ----

    #[test]
    fn both_formats_or_neither_are_refused() {
        let e = error(&[
            ("datas", "host:'10.0.0.1:1'"),
            ("members.yaml", "- host: 10.0.0.1:1"),
        ]);
        assert_eq!(
            e,
            r#"hostconf mixes two formats: key "members.yaml" cannot be used together with key "datas""#
        );
        let e = error(&[("arbiters", ""), ("members.yaml", "- host: 10.0.0.1:1")]);
        assert!(e.contains(r#"together with key "arbiters""#), "{e}");
        let e = error(&[("data", "host:'10.0.0.1:1'")]);
        assert!(
            e.starts_with("hostconf lists no members: expected key \"datas\""),
            "{e}"
        );
        assert!(e.ends_with(r#"found keys "data""#), "{e}");
        assert!(error(&[]).ends_with("found keys (none)"));
    }

    // ---- structured format ----

    const STRUCTURED: &str = "\
# members of rs0
- host: 10.29.5.107:38018
  priority: 2
  tags: {site: east}
- host: \"10.29.5.108:38018\"
  votes: 0
  priority: 0
  hidden: true
- host: 10.29.5.107:38825
  arbiter: true
";

    #[test]
    fn structured_list_parses_every_field() {
        let conf = parse(&[("members.yaml", STRUCTURED)]).unwrap();
        let first = &conf.members[0];
        assert_eq!(first.address, addr("10.29.5.107:38018"));
        assert_eq!(
            (first.votes, first.priority, first.hidden, first.arbiter),
            (None, Some(2.0), false, false)
        );
        assert_eq!(
            first.tags,
            BTreeMap::from([("site".to_string(), "east".to_string())])
        );
        let second = &conf.members[1];
        assert_eq!(
            (second.votes, second.priority, second.hidden),
            (Some(0), Some(0.0), true)
        );
        assert_eq!(conf.arbiter().unwrap().address.port, 38825);
        assert_eq!(conf.data_members().count(), 2);
    }

    #[test]
    fn structured_flow_style_is_accepted() {
        let conf = parse(&[(
            "members.yaml",
            "[{host: 10.0.0.1:1}, {host: 10.0.0.2:1, votes: 1, priority: 0.5}]",
        )])
        .unwrap();
        assert_eq!(conf.members[1].priority, Some(0.5));
        assert_eq!(conf.members[1].votes, Some(1));
    }

    fn yaml_error(yaml: &str) -> String {
        error(&[("members.yaml", yaml)])
    }

    #[test]
    fn structured_rule_violations_name_the_entry_line() {
        let cases = [
            ("  votes: 2", "votes must be 0 or 1, found 2"),
            (
                "  priority: 1001",
                "priority must be between 0 and 1000, found 1001",
            ),
            (
                "  priority: -1",
                "priority must be between 0 and 1000, found -1",
            ),
            (
                "  priority: .nan",
                "priority must be between 0 and 1000, found NaN",
            ),
            (
                "  arbiter: true\n  priority: 1",
                "an arbiter must have priority 0, found 1",
            ),
            (
                "  arbiter: true\n  votes: 0",
                "an arbiter must vote, votes 0 is not allowed",
            ),
            (
                "  arbiter: true\n  tags: {a: b}",
                "an arbiter cannot have tags",
            ),
            (
                "  hidden: true\n  priority: 1",
                "a hidden member must have priority 0, found 1",
            ),
            (
                "  votes: 0\n  priority: 0.5",
                "a member with votes 0 must have priority 0, found 0.5",
            ),
        ];
        for (fields, want) in cases {
            let yaml = format!("- host: 10.0.0.1:1\n\n- host: 10.0.0.2:1\n{fields}\n");
            let e = yaml_error(&yaml);
            assert_eq!(
                e,
                format!(r#"hostconf key "members.yaml", line 3: {want}"#),
                "{fields}"
            );
        }
    }

    #[test]
    fn structured_bad_host_and_duplicate_name_lines() {
        let e = yaml_error("- host: 10.0.0.1:1\n- host: 10.0.0.1:70000\n");
        assert_eq!(
            e,
            r#"hostconf key "members.yaml", line 2: port 70000 is outside 1-65535 (in "10.0.0.1:70000")"#
        );
        let e = yaml_error("---\n- host: 10.0.0.1:1\n  tags:\n    - x: y\n- host: 10.0.0.1:1\n");
        assert!(
            e.starts_with(r#"hostconf key "members.yaml", line 4: "#),
            "{e}"
        );
        let e = yaml_error("- host: 10.0.0.1:1\n  tags: {}\n- host: 10.0.0.1:1\n");
        assert_eq!(
            e,
            r#"hostconf key "members.yaml", line 3: duplicate member 10.0.0.1:1 (first on line 1)"#
        );
        let e = yaml_error("[{host: 10.0.0.1:1}, {host: 10.0.0.1:1}]");
        assert_eq!(
            e,
            r#"hostconf key "members.yaml", entry 2: duplicate member 10.0.0.1:1 (first on entry 1)"#
        );
        let e = yaml_error("- {host: 10.0.0.1:1, arbiter: true}\n- {host: 10.0.0.2:1}\n- {host: 10.0.0.3:1, arbiter: true}");
        assert_eq!(
            e,
            r#"hostconf key "members.yaml", line 3: a second arbiter, at most 1 is allowed (the first is on line 1)"#
        );
    }

    #[test]
    fn structured_yaml_and_schema_errors_name_the_line() {
        let e = yaml_error("- host: 10.0.0.1:1\n  prority: 2\n");
        assert!(
            e.starts_with(r#"hostconf key "members.yaml", line 2: "#),
            "{e}"
        );
        assert!(e.contains("unknown field `prority`"), "{e}");
        let e = yaml_error("- host: 10.0.0.1:1\n- votes: 1\n");
        assert!(
            e.starts_with(r#"hostconf key "members.yaml", line 2: "#)
                && e.contains("missing field `host`"),
            "{e}"
        );
        let e = yaml_error("- host: 10.0.0.1:1\n  tags: {rack: [1]}\n");
        assert!(
            e.starts_with(r#"hostconf key "members.yaml", line 2: "#),
            "{e}"
        );
        let e = yaml_error("- host: [10.0.0.1:1\n");
        assert!(
            e.starts_with(r#"hostconf key "members.yaml", line "#),
            "{e}"
        );
        let e = yaml_error("host: 10.0.0.1:1\n");
        assert!(e.contains("expected a sequence"), "{e}");
        let e = yaml_error(&format!(
            "- host: 10.0.0.1:1\n  {}: 1\n",
            "x".repeat(100_000)
        ));
        assert!(
            e.starts_with(r#"hostconf key "members.yaml", line 2: "#),
            "{e}"
        );
        assert!(e.chars().count() < 300, "{} bytes", e.len());
    }

    #[test]
    fn structured_deep_flow_nesting_is_refused_before_parsing() {
        let e = yaml_error(&format!(
            "- host: 10.0.0.1:1\n  tags: {{a: {}}}\n",
            "[".repeat(1_000_000)
        ));
        assert_eq!(
            e,
            r#"hostconf key "members.yaml": holds 1000001 '[' or '{' characters, at most 2000 are accepted"#
        );
    }

    #[test]
    fn structured_whole_list_rules() {
        assert_eq!(
            yaml_error(""),
            r#"hostconf key "members.yaml" lists no data-bearing member"#
        );
        assert_eq!(
            yaml_error("[]"),
            r#"hostconf key "members.yaml" lists no data-bearing member"#
        );
        assert_eq!(
            yaml_error("- {host: 10.0.0.1:1, arbiter: true}"),
            r#"hostconf key "members.yaml" lists no data-bearing member"#
        );
        let voters: Vec<String> = (1..=8)
            .map(|p| format!("- {{host: 10.0.0.1:{p}, votes: 1}}"))
            .collect();
        assert_eq!(
            yaml_error(&voters.join("\n")),
            "hostconf gives a vote to 8 members, a replica set allows at most 7 voters"
        );
        let mut seven = voters[..7].to_vec();
        seven.push("- {host: 10.0.0.2:1, arbiter: true}".into());
        assert!(yaml_error(&seven.join("\n")).contains("8 members"));
        assert!(parse(&[("members.yaml", &voters[..7].join("\n"))]).is_ok());
        let e = yaml_error("- {host: 10.0.0.1:1, priority: 0}\n- {host: 10.0.0.2:1, hidden: true}\n- {host: 10.0.0.3:1, votes: 0}\n- {host: 10.0.0.4:1, arbiter: true}");
        assert!(
            e.starts_with("hostconf leaves no data-bearing member that may become primary"),
            "{e}"
        );
    }

    // ---- rendering ----

    #[test]
    fn to_fedstate_data_writes_both_keys_without_trailing_newline() {
        let conf = parse(&[("members.yaml", STRUCTURED)]).unwrap();
        assert_eq!(
            conf.to_fedstate_data(),
            data(&[
                (
                    "datas",
                    "host:'10.29.5.107:38018'\nhost:'10.29.5.108:38018'"
                ),
                ("arbiters", "host:'10.29.5.107:38825'"),
            ])
        );
        let no_arbiter = parse(&[("datas", "host:'[fd00::1]:1'")]).unwrap();
        assert_eq!(
            no_arbiter.to_fedstate_data(),
            data(&[("datas", "host:'[fd00::1]:1'"), ("arbiters", "")])
        );
    }

    // ---- properties ----

    fn host() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<[u8; 4]>().prop_map(|o| Ipv4Addr::from(o).to_string()),
            "[a-z][a-z0-9-]{0,12}(\\.[a-z][a-z0-9_]{0,6}){0,3}",
            any::<[u16; 8]>().prop_map(|s| Ipv6Addr::from(s).to_string()),
        ]
    }

    /// Distinct addresses over a few distinct VIPs, in random order.
    fn address_set() -> impl Strategy<Value = Vec<MemberAddress>> {
        prop::collection::btree_set(host(), 1..4)
            .prop_flat_map(|vips| {
                let vips: Vec<String> = vips.into_iter().collect();
                prop::collection::btree_set((0..vips.len(), 1..=u16::MAX), 1..20).prop_map(
                    move |set| {
                        set.into_iter()
                            .map(|(v, port)| MemberAddress {
                                host: vips[v].clone(),
                                port,
                            })
                            .collect::<Vec<_>>()
                    },
                )
            })
            .prop_shuffle()
    }

    /// Addresses plus which of them (if any, and only with 2 members or more)
    /// is the arbiter.
    fn addresses_and_arbiter() -> impl Strategy<Value = (Vec<MemberAddress>, Option<usize>)> {
        address_set().prop_flat_map(|addrs| {
            let n = addrs.len();
            let arbiter = if n > 1 {
                prop::option::of(0..n).boxed()
            } else {
                Just(None).boxed()
            };
            (Just(addrs), arbiter)
        })
    }

    /// A valid FedState list: plain members, one of them maybe the arbiter.
    fn fedstate_conf() -> impl Strategy<Value = HostConf> {
        addresses_and_arbiter().prop_map(|(addrs, arbiter)| HostConf {
            members: addrs
                .into_iter()
                .enumerate()
                .map(|(i, a)| plain_member(a, arbiter == Some(i)))
                .collect(),
        })
    }

    type Attributes = (bool, Option<u8>, Option<f64>, BTreeMap<String, String>);

    fn attributes() -> impl Strategy<Value = Attributes> {
        (
            any::<bool>(),
            prop::option::of(0u8..=1),
            prop::option::of(prop_oneof![Just(0.0), 0.0..=1000.0f64]),
            prop::collection::btree_map("[a-z]{1,5}", "[ -~]{0,8}", 0..3),
        )
    }

    /// A valid structured list: random attributes, then bent to satisfy every
    /// rule (one member surely electable, at most 7 voters, zero priorities
    /// where required, arbiter without tags nor `votes: 0`).
    fn structured_conf() -> impl Strategy<Value = HostConf> {
        addresses_and_arbiter()
            .prop_flat_map(|(addrs, arbiter)| {
                let n = addrs.len();
                (
                    Just(addrs),
                    Just(arbiter),
                    prop::collection::vec(attributes(), n),
                )
            })
            .prop_map(|(addrs, arbiter_at, attrs)| {
                let electable_at = if arbiter_at == Some(0) { 1 } else { 0 };
                let mut voters = usize::from(arbiter_at.is_some());
                let members = addrs
                    .into_iter()
                    .zip(attrs)
                    .enumerate()
                    .map(
                        |(i, (address, (mut hidden, mut votes, mut priority, mut tags)))| {
                            let arbiter = arbiter_at == Some(i);
                            if arbiter {
                                hidden = false;
                                tags.clear();
                                votes = votes.filter(|v| *v == 1);
                            } else if i == electable_at {
                                (hidden, votes, priority) = (false, None, None);
                            } else if votes == Some(1) {
                                if voters == MAX_VOTERS {
                                    votes = Some(0);
                                } else {
                                    voters += 1;
                                }
                            }
                            if arbiter || hidden || votes == Some(0) {
                                priority = priority.map(|_| 0.0);
                            }
                            HostConfMember {
                                address,
                                arbiter,
                                votes,
                                priority,
                                hidden,
                                tags,
                            }
                        },
                    )
                    .collect();
                HostConf { members }
            })
    }

    fn sorted(conf: &HostConf) -> Vec<HostConfMember> {
        let mut m = conf.members.clone();
        m.sort_by(|a, b| a.address.cmp(&b.address));
        m
    }

    fn to_members_yaml(conf: &HostConf) -> String {
        let raw: Vec<RawMember> = conf
            .members
            .iter()
            .map(|m| RawMember {
                host: m.address.to_string(),
                arbiter: m.arbiter,
                votes: m.votes.map(i64::from),
                priority: m.priority,
                hidden: m.hidden,
                tags: m.tags.clone(),
            })
            .collect();
        serde_yaml::to_string(&raw).unwrap()
    }

    /// Turns a valid `host:'…'` line into an invalid one.
    fn corrupt(line: &str, how: usize) -> String {
        let inner = &line["host:'".len()..line.len() - 1];
        match how {
            0 => line[..line.len() - 1].to_string(),
            1 => format!("host:\"{inner}\""),
            2 => format!("{line} trailing"),
            3 => format!("host:'{inner}0000000'"),
            4 => format!("host:'{inner}x'"),
            5 => format!("host:':{}'", inner.rsplit_once(':').unwrap().1),
            6 => format!("host:'{} {inner}'", "z"),
            7 => inner.to_string(),
            _ => format!("host:'{}'", inner.rsplit_once(':').unwrap().0),
        }
    }

    proptest! {
        #[test]
        fn fedstate_list_round_trips(conf in fedstate_conf()) {
            let rendered = conf.to_fedstate_data();
            let back = HostConf::from_config_map_data(&rendered).unwrap();
            prop_assert_eq!(sorted(&back), sorted(&conf));
        }

        #[test]
        fn structured_list_round_trips_through_yaml(conf in structured_conf()) {
            let yaml = to_members_yaml(&conf);
            let d = BTreeMap::from([(MEMBERS_YAML.to_string(), yaml.clone())]);
            let back = HostConf::from_config_map_data(&d);
            prop_assert!(back.is_ok(), "{:?}\n{}", back, yaml);
            prop_assert_eq!(sorted(&back.unwrap()), sorted(&conf));
        }

        #[test]
        fn structured_list_round_trips_through_fedstate_addresses(conf in structured_conf()) {
            let back = HostConf::from_config_map_data(&conf.to_fedstate_data()).unwrap();
            let key = |c: &HostConf| {
                let mut v: Vec<_> = c.members.iter().map(|m| (m.address.clone(), m.arbiter)).collect();
                v.sort();
                v
            };
            prop_assert_eq!(key(&back), key(&conf));
        }

        #[test]
        fn arbitrary_text_never_panics(text in ".{0,300}", bytes in prop::collection::vec(any::<u8>(), 0..300)) {
            let lossy = String::from_utf8_lossy(&bytes).into_owned();
            for value in [&text, &lossy] {
                for key in [DATAS, ARBITERS, MEMBERS_YAML] {
                    let _ = HostConf::from_config_map_data(&BTreeMap::from([(key.to_string(), value.clone())]));
                }
                let _ = HostConf::from_config_map_data(&BTreeMap::from([
                    (DATAS.to_string(), "host:'10.0.0.1:1'".to_string()),
                    (ARBITERS.to_string(), value.clone()),
                ]));
                let _ = MemberAddress::parse(value);
            }
        }

        #[test]
        fn host_shaped_noise_never_panics(lines in prop::collection::vec("host:'[\\[\\]:0-9a-f. '\"x-]{0,20}'?.{0,3}", 0..8)) {
            let _ = HostConf::from_config_map_data(&BTreeMap::from([(DATAS.to_string(), lines.join("\n"))]));
        }

        #[test]
        fn one_corrupted_line_is_named(conf in fedstate_conf(), pick in any::<prop::sample::Index>(), how in 0usize..9, blank_lines in 0usize..3) {
            let datas = conf.to_fedstate_data()[DATAS].clone();
            let mut lines: Vec<String> = datas.lines().map(str::to_string).collect();
            let i = pick.index(lines.len());
            lines[i] = corrupt(&lines[i], how);
            let mut text = "\n".repeat(blank_lines);
            text.push_str(&lines.join("\n"));
            let e = HostConf::from_config_map_data(&BTreeMap::from([(DATAS.to_string(), text)]));
            let want = format!("hostconf key \"datas\", line {}: ", blank_lines + i + 1);
            match e {
                Err(e) => prop_assert!(e.to_string().starts_with(&want), "{} does not start with {}", e, want),
                Ok(c) => prop_assert!(false, "corruption {} of line {} accepted: {:?}", how, i, c),
            }
        }
    }
}
