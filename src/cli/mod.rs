//! The `kubectl mongodb` plugin's pure part (no client, no clock, no I/O):
//! what the on-call SRE reads about one replica set spread over several
//! clusters, and what the plugin decides about a disaster-recovery request
//! or a request to forget a lost cluster.
//! The binary (`src/bin/kubectl-mongodb.rs`) reads the `MongoDB` objects,
//! watches and patches them, and prints what this module renders.
//!
//! - [`status`]: one table of the whole set from every cluster's report
//!   (`status.replset`, `localMembers`, conditions, config version,
//!   `recovery`), with the clusters that cannot be read, disagree or look
//!   stale said as such;
//! - [`recover`]: the dry run of a recovery request from the chosen
//!   cluster's status, the refusals, and the phases followed afterwards;
//! - [`forget`]: the same for forgetting a lost cluster.

pub mod forget;
pub mod recover;
pub mod status;

#[cfg(test)]
mod fixtures;

use k8s_openapi::jiff::Timestamp;

/// How long ago `since` was, in the largest two units (`42s`, `3m10s`,
/// `2h5m`, `4d3h`); `0s` for a time in the future (clock skew).
pub fn age(since: Timestamp, now: Timestamp) -> String {
    let seconds = now.duration_since(since).as_secs().max(0);
    let (days, hours, minutes, secs) = (
        seconds / 86_400,
        seconds / 3_600 % 24,
        seconds / 60 % 60,
        seconds % 60,
    );
    match (days, hours, minutes) {
        (0, 0, 0) => format!("{secs}s"),
        (0, 0, _) => format!("{minutes}m{secs}s"),
        (0, _, _) => format!("{hours}h{minutes}m"),
        _ => format!("{days}d{hours}h"),
    }
}

/// `items` joined with `, `, or `none`.
fn list(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_string()
    } else {
        items.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_are_given_in_their_two_largest_units() {
        let now = Timestamp::from_second(1_000_000).unwrap();
        let ago = |seconds: i64| age(Timestamp::from_second(1_000_000 - seconds).unwrap(), now);
        assert_eq!(ago(42), "42s");
        assert_eq!(ago(190), "3m10s");
        assert_eq!(ago(2 * 3600 + 5 * 60 + 7), "2h5m");
        assert_eq!(ago(4 * 86_400 + 3 * 3600), "4d3h");
        assert_eq!(ago(-5), "0s");
    }
}
