//! Server versions and featureCompatibilityVersion (FCV) rules, as mongod derives
//! them from its release tables (`src/mongo/util/version/releases.yml` and the
//! generated `releases.h`): a binary of release `latest` runs data whose FCV is
//! `latest`, its last-continuous release (the FCV just before it) or its last LTS
//! release (the LTS just before it); its `maxWireVersion` counts the FCVs since 4.0.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A mongod binary version (what the container image runs), e.g. 7.0.14.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ServerVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

/// A release as FCVs name it: `MAJOR.MINOR` (e.g. "7.0").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Release {
    pub major: u32,
    pub minor: u32,
}

impl fmt::Display for Release {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl Release {
    pub const fn new(major: u32, minor: u32) -> Release {
        Release { major, minor }
    }

    /// Parses exactly `MAJOR.MINOR` (FCV strings), e.g. "8.0".
    pub fn parse(s: &str) -> Option<Release> {
        let (major, minor) = s.split_once('.')?;
        let digits = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
        if !digits(major) || !digits(minor) {
            return None;
        }
        Some(Release {
            major: major.parse().ok()?,
            minor: minor.parse().ok()?,
        })
    }
}

/// Every FCV since 4.0 (`featureCompatibilityVersions` of releases.yml, the
/// development/rapid releases included), in order.
const FCVS: &[Release] = &[
    Release::new(4, 0),
    Release::new(4, 2),
    Release::new(4, 4),
    Release::new(4, 7),
    Release::new(4, 8),
    Release::new(4, 9),
    Release::new(5, 0),
    Release::new(5, 1),
    Release::new(5, 2),
    Release::new(5, 3),
    Release::new(6, 0),
    Release::new(6, 1),
    Release::new(6, 2),
    Release::new(6, 3),
    Release::new(7, 0),
    Release::new(7, 1),
    Release::new(7, 2),
    Release::new(7, 3),
    Release::new(8, 0),
    Release::new(8, 1),
    Release::new(8, 2),
];

/// The long-term-support releases since 4.0 (`longTermSupportReleases`).
const LTS: &[Release] = &[
    Release::new(4, 0),
    Release::new(4, 2),
    Release::new(4, 4),
    Release::new(5, 0),
    Release::new(6, 0),
    Release::new(7, 0),
    Release::new(8, 0),
];

/// Wire version of 4.0 (`REPLICA_SET_TRANSACTIONS`); every later FCV adds one
/// (4.2: 8, 4.4: 9, 5.0: 13, 6.0: 17, 7.0: 21, 8.0: 25).
const WIRE_VERSION_40: i32 = 7;

impl ServerVersion {
    /// What a member runs when nothing says otherwise (the image the project
    /// started with, `mongo:7.0.14`).
    pub const DEFAULT: ServerVersion = ServerVersion::new(7, 0, 14);

    pub const fn new(major: u32, minor: u32, patch: u32) -> ServerVersion {
        ServerVersion {
            major,
            minor,
            patch,
        }
    }

    /// Parses `MAJOR.MINOR[.PATCH]` (a missing patch is 0); nothing else.
    pub fn parse(s: &str) -> Option<ServerVersion> {
        let parts: Vec<&str> = s.split('.').collect();
        if !(2..=3).contains(&parts.len())
            || parts
                .iter()
                .any(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()))
        {
            return None;
        }
        let n = |i: usize| -> Option<u32> { parts.get(i).map_or(Some(0), |p| p.parse().ok()) };
        Some(ServerVersion::new(n(0)?, n(1)?, n(2)?))
    }

    /// `MAJOR.MINOR`: the release, and the FCV a fresh deployment of it gets.
    pub fn release(self) -> Release {
        Release::new(self.major, self.minor)
    }

    /// `buildInfo.versionArray`.
    pub fn version_array(self) -> [i32; 4] {
        [self.major as i32, self.minor as i32, self.patch as i32, 0]
    }

    /// `hello.maxWireVersion` as mongod of this release reports it.
    pub fn max_wire_version(self) -> i32 {
        let release = self.release();
        match FCVS.iter().position(|r| *r >= release) {
            Some(i) if FCVS[i] == release => WIRE_VERSION_40 + i as i32,
            // A release between two listed FCVs speaks the older one's protocol.
            Some(0) => match (self.major, self.minor) {
                (3, m) if m >= 6 => 6,
                (3, m) if m >= 4 => 5,
                (3, m) if m >= 2 => 4,
                (3, _) => 3,
                _ => 0,
            },
            Some(i) => WIRE_VERSION_40 + i as i32 - 1,
            // Newer than the table: one more per minor release past its end.
            None => {
                let last = *FCVS.last().expect("non-empty table");
                let past = if self.major == last.major {
                    self.minor - last.minor
                } else {
                    1
                };
                WIRE_VERSION_40 + FCVS.len() as i32 - 1 + past as i32
            }
        }
    }

    /// The FCV this binary calls "last LTS": the newest LTS release before it.
    pub fn last_lts(self) -> Release {
        let latest = self.release();
        LTS.iter()
            .rev()
            .find(|r| **r < latest)
            .copied()
            .unwrap_or(latest)
    }

    /// The FCV this binary calls "last continuous": the newest FCV before it.
    pub fn last_continuous(self) -> Release {
        let latest = self.release();
        FCVS.iter()
            .rev()
            .find(|r| **r < latest)
            .copied()
            .unwrap_or(latest)
    }

    /// The FCVs this binary accepts: last LTS, last continuous, latest.
    pub fn runnable_fcvs(self) -> [Release; 3] {
        [self.last_lts(), self.last_continuous(), self.release()]
    }

    /// Does this binary know the `hello` command? It arrived in 5.0 and was
    /// backported to 4.4.2, 4.2.10, 4.0.21 and 3.6.21 (the manual's `hello`
    /// page, "New in version 4.4.2: (and 4.2.10, 4.0.21, and 3.6.21)"); before
    /// it, `isMaster` alone answers and `hello` is an unknown command.
    pub fn knows_hello(self) -> bool {
        let first_patch = match (self.major, self.minor) {
            (4, 4) => 2,
            (4, 2) => 10,
            (4, 0) => 21,
            (3, 6) => 21,
            (major, minor) => return (major, minor) > (4, 4),
        };
        self.patch >= first_patch
    }

    /// Does `setFeatureCompatibilityVersion` know its `confirm` field? It came
    /// with 7.0 (`set_feature_compatibility_version.idl`); the command's IDL is
    /// `strict`, so an earlier binary refuses the field (40415).
    pub fn knows_fcv_confirm(self) -> bool {
        self >= ServerVersion::new(7, 0, 0)
    }

    /// Can this binary run data whose FCV document says `version`?
    pub fn can_run(self, version: Release) -> bool {
        self.runnable_fcvs().contains(&version)
    }
}

impl Default for ServerVersion {
    fn default() -> Self {
        ServerVersion::DEFAULT
    }
}

impl fmt::Display for ServerVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

impl std::str::FromStr for ServerVersion {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ServerVersion::parse(s).ok_or_else(|| format!("not a MAJOR.MINOR[.PATCH] version: {s:?}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_versions_as_mongod_reports_them() {
        let wire = |s: &str| ServerVersion::parse(s).unwrap().max_wire_version();
        assert_eq!(wire("4.2.0"), 8);
        assert_eq!(wire("4.4.29"), 9);
        assert_eq!(wire("5.0.30"), 13);
        assert_eq!(wire("6.0.19"), 17);
        assert_eq!(wire("7.0.14"), 21);
        assert_eq!(wire("8.0.3"), 25);
        assert_eq!(wire("3.6"), 6);
    }

    #[test]
    fn runnable_fcvs_follow_the_release_tables() {
        let v = |s: &str| ServerVersion::parse(s).unwrap();
        let r = |s: &str| Release::parse(s).unwrap();
        assert_eq!(v("7.0.14").runnable_fcvs(), [r("6.0"), r("6.3"), r("7.0")]);
        assert_eq!(v("8.0").runnable_fcvs(), [r("7.0"), r("7.3"), r("8.0")]);
        assert_eq!(v("6.0").runnable_fcvs(), [r("5.0"), r("5.3"), r("6.0")]);
        assert!(!v("8.0.0").can_run(r("6.0")));
        assert!(!v("7.0.0").can_run(r("8.0")));
        assert!(v("8.0.0").can_run(r("7.0")));
    }

    #[test]
    fn hello_exists_from_the_patch_releases_it_was_backported_to() {
        let knows = |s: &str| ServerVersion::parse(s).unwrap().knows_hello();
        assert!(!knows("4.4.0"));
        assert!(!knows("4.4.1"));
        assert!(knows("4.4.2"));
        assert!(!knows("4.2.9"));
        assert!(knows("4.2.10"));
        assert!(knows("5.0.0"));
        assert!(!knows("3.4.24"));
    }

    #[test]
    fn versions_parse_strictly() {
        assert_eq!(
            ServerVersion::parse("8.0"),
            Some(ServerVersion::new(8, 0, 0))
        );
        assert_eq!(ServerVersion::parse("8.0.3").unwrap().to_string(), "8.0.3");
        assert_eq!(ServerVersion::parse("8"), None);
        assert_eq!(ServerVersion::parse("8.0.3.1"), None);
        assert_eq!(ServerVersion::parse("8.x"), None);
        assert_eq!(Release::parse("7.0"), Some(Release::new(7, 0)));
        assert_eq!(Release::parse("7.0.1"), None);
        assert_eq!(Release::parse(" 7.0"), None);
    }
}
