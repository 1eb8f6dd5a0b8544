//! What a member of this cluster is, in the words every stage shares: its
//! slot (data member by index, or the arbiter), how many the spec wants, and
//! the config entry recorded on its StatefulSet. The builders name objects by
//! slot, validation reads slots and recorded entries back, and the planner
//! decides per slot; none of them needs the others to say what a member is.

use std::fmt;

use crate::api::MongoDB;
use crate::hostconf::MemberAddress;

/// Which member of this cluster a Service/StatefulSet pair is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MemberSlot {
    /// Data-bearing member `<name>-mongodb-<index>`.
    Data(u32),
    /// The arbiter `<name>-mongodb-arbiter`.
    Arbiter,
}

impl fmt::Display for MemberSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MemberSlot::Data(index) => write!(f, "member {index}"),
            MemberSlot::Arbiter => f.write_str("the arbiter"),
        }
    }
}

/// How many members this cluster wants: `spec.members` and `spec.arbiter`, or
/// nothing while the object is being deleted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wanted {
    /// Data members wanted here (slots `0..members`).
    pub members: u32,
    /// Whether the arbiter is wanted here.
    pub arbiter: bool,
}

impl Wanted {
    /// What `mongodb` asks for; nothing when `leaving`.
    pub fn of(mongodb: &MongoDB, leaving: bool) -> Self {
        if leaving {
            return Wanted {
                members: 0,
                arbiter: false,
            };
        }
        Wanted {
            members: u32::try_from(mongodb.spec.members).unwrap_or(0),
            arbiter: mongodb.spec.arbiter,
        }
    }

    /// Whether `slot` is wanted.
    pub fn wants(&self, slot: MemberSlot) -> bool {
        match slot {
            MemberSlot::Data(index) => index < self.members,
            MemberSlot::Arbiter => self.arbiter,
        }
    }

    /// The wanted slots: data members by index, then the arbiter.
    pub fn slots(&self) -> impl Iterator<Item = MemberSlot> {
        (0..self.members)
            .map(MemberSlot::Data)
            .chain(self.arbiter.then_some(MemberSlot::Arbiter))
    }
}

/// A config entry as recorded on a member's StatefulSet: its `_id` and the
/// host it had then. Both must match for an entry to be taken as the
/// member's: an `_id` alone could have been given to another member since.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RecordedEntry {
    /// The member's `_id` in the config.
    pub id: i64,
    /// Its host in the config.
    pub host: MemberAddress,
}

/// `<_id>@<host>`, as on the StatefulSet.
impl fmt::Display for RecordedEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.id, self.host)
    }
}

/// Why a recorded entry could not be read back.
#[derive(Debug, thiserror::Error)]
#[error("not `<_id>@<host:port>`: {0:?}")]
pub struct RecordedEntryInvalid(String);

impl std::str::FromStr for RecordedEntry {
    type Err = RecordedEntryInvalid;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = || RecordedEntryInvalid(text.to_owned());
        let (id, host) = text.split_once('@').ok_or_else(invalid)?;
        Ok(RecordedEntry {
            id: id.parse().map_err(|_| invalid())?,
            host: MemberAddress::parse(host).map_err(|_| invalid())?,
        })
    }
}
