//! The FedState format: keys `datas` and `arbiters`, one `host:'<host>:<port>'`
//! per line.

use std::collections::BTreeMap;

use super::error::quote;
use super::{
    Builder, EntryProblem, HostConf, HostConfError, HostConfMember, MemberAddress, Position,
    ARBITERS, DATAS,
};

/// Parses `datas` (required, at least one data-bearing member) and `arbiters`
/// (optional, at most one member). Blank lines and whitespace around a line are
/// ignored.
pub(super) fn parse(data: &BTreeMap<String, String>) -> Result<HostConf, HostConfError> {
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

/// A member as the FedState format gives it: an address and whether it is the
/// arbiter, everything else left to the operator.
pub(super) fn plain_member(address: MemberAddress, arbiter: bool) -> HostConfMember {
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

/// One `host:'<host>:<port>'` line, exactly: FedState's own parser splits on
/// `host:'` and fails on anything else, so double quotes (refused with a hint)
/// and any text after the closing quote are errors rather than tolerated.
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
