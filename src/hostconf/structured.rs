//! The structured format: key `members.yaml`, a YAML list of one mapping per
//! member with its votes, priority, hidden flag and tags.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::error::cut;
use super::{
    Builder, EntryProblem, HostConf, HostConfError, HostConfMember, MemberAddress, Position,
    MEMBERS_YAML,
};

/// How many characters of the YAML parser's message an error keeps.
const MESSAGE_LIMIT: usize = 200;
/// The most `[` and `{` accepted in all: the YAML parser's time grows with the
/// square of the flow nesting depth.
const MAX_FLOW_OPENERS: usize = 2000;

/// One entry of `members.yaml` as written. Unknown fields are errors: a
/// misspelt `prority` must not be silently dropped.
#[derive(Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(deny_unknown_fields, rename = "member")]
pub(super) struct RawMember {
    pub(super) host: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(super) arbiter: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) votes: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) priority: Option<f64>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(super) hidden: bool,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(super) tags: BTreeMap<String, String>,
}

impl RawMember {
    /// The member, once its own rules hold: votes 0 or 1, priority 0–1000 and
    /// 0 (or absent) for an arbiter, a hidden member and a non-voter; an
    /// arbiter votes and has no tags.
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

/// Parses a block-style or flow-style YAML list; an entry's position is the
/// line of its `-` in block style, else its 1-based entry number.
pub(super) fn parse(text: &str) -> Result<HostConf, HostConfError> {
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
