//! Why a hostconf ConfigMap is refused, and where: the key, the line and the
//! problem, with quoted input cut short.

use std::fmt;

use super::address::AddressError;
use super::MemberAddress;

/// How many characters of the input an error message quotes.
pub(super) const QUOTE_LIMIT: usize = 80;

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

/// `s` in double quotes with escapes, cut to [`QUOTE_LIMIT`] characters.
pub(super) fn quote(s: &str) -> String {
    match s.char_indices().nth(QUOTE_LIMIT) {
        None => format!("{s:?}"),
        Some((end, _)) => format!("{:?}… ({} characters)", &s[..end], s.chars().count()),
    }
}

/// `s` cut to `limit` characters, unquoted (for digits and parser messages).
pub(super) fn cut(s: &str, limit: usize) -> String {
    match s.char_indices().nth(limit) {
        None => s.to_owned(),
        Some((end, _)) => format!("{}…", &s[..end]),
    }
}
