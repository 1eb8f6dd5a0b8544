//! FedState's designed waits beside the figures measured.

use super::convergence::{BEFORE_INITIATE, INITIATE_TO_PRIMARY};
use super::join::JOIN_OVERHEAD;
use super::no_primary::STEP_DOWN_TO_REMOVED;
use super::reaction::{REACT_HOSTCONF, REACT_SERVICE};
use super::*;

/// One of FedState's designed waits (fedstate/fedstate at d28f763), the
/// figure we measured for the same thing (a row of a scenario), and where.
struct Wait {
    what: &'static str,
    source: &'static str,
    fedstate: Duration,
    ours: (Scenario, &'static str),
}

const WAITS: [Wait; 6] = [
    Wait {
        what: "before initiating: sleep `SyncWaitTime` (10 s) \"waiting for mongod to start\"",
        source: "`pkg/controller/mongodb/core/mongo_config.go:39` (`SyncWaitTime = 10 * time.Second`: `pkg/util/ctx.go:10`)",
        fedstate: Duration::from_secs(10),
        ours: (Scenario::Convergence, BEFORE_INITIATE),
    },
    Wait {
        what: "after initiating: sleep `SyncWaitTime` (10 s) \"waiting for the election\"",
        source: "`pkg/controller/mongodb/core/mongo_config.go:93`",
        fedstate: Duration::from_secs(10),
        ours: (Scenario::Convergence, INITIATE_TO_PRIMARY),
    },
    Wait {
        what: "after each step-down (scale-in): sleep 3 s, then remove the member",
        source: "`pkg/controller/mongodb/core/sync.go:208` (and `pkg/controller/mongodb/mode/replica/replica.go:232` in a restart)",
        fedstate: Duration::from_secs(3),
        ours: (Scenario::NoPrimary, STEP_DOWN_TO_REMOVED),
    },
    Wait {
        what: "every pass that syncs members polls the pods with `wait.Poll` every 10 s, the first look after 10 s, before it configures the set",
        source: "`pkg/controller/mongodb/core/sync.go:20,56` (called at `:134`)",
        fedstate: Duration::from_secs(10),
        ours: (Scenario::Join, JOIN_OVERHEAD),
    },
    Wait {
        what: "a Ready instance is looked at again only every 60 s (`RequeueAfter`); the controller watches `MongoDB`, StatefulSets and Pods only, so a hostconf change waits for it (up to 60 s)",
        source: "`controllers/mongodb_controller.go:186` (watches: `:293-296`)",
        fedstate: Duration::from_secs(60),
        ours: (Scenario::Reaction, REACT_HOSTCONF),
    },
    Wait {
        what: "the same 60 s polling for a member Service change (up to 60 s)",
        source: "`controllers/mongodb_controller.go:186` (watches: `:293-296`)",
        fedstate: Duration::from_secs(60),
        ours: (Scenario::Reaction, REACT_SERVICE),
    },
];

/// FedState's designed waits beside the figures we measured in `measured`
/// (scenarios not run are left out), as ratios FedState / ours.
pub fn fedstate_waits(measured: &[(Scenario, &Timed)], command: &str) -> String {
    let mut out = format!(
        "### FedState's designed waits beside ours\n\nReproduce: `{command}`\n\n\
         | FedState's wait | FedState source (d28f763) | FedState | ours: what | ours: median / worst | FedState ÷ ours (median / worst) |\n\
         |---|---|---|---|---|---|\n"
    );
    for wait in &WAITS {
        let Some((_, timed)) = measured.iter().find(|(s, _)| *s == wait.ours.0) else {
            continue;
        };
        let Some(summary) = timed
            .row(wait.ours.1)
            .and_then(|row| timing::summarize(&row.figures))
        else {
            continue;
        };
        let ratio = |ours: Duration| {
            if ours.is_zero() {
                "∞".to_string()
            } else {
                format!("{:.0}×", wait.fedstate.as_secs_f64() / ours.as_secs_f64())
            }
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} ({:?}) | {} / {} | {} / {} |\n",
            wait.what,
            wait.source,
            human(wait.fedstate),
            wait.ours.1,
            wait.ours.0,
            human(summary.median),
            human(summary.worst),
            ratio(summary.median),
            ratio(summary.worst),
        ));
    }
    out
}
