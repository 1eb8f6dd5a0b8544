//! The roll's safety where a step-down cannot hand the primary over: a set
//! whose only electable member is the primary. mongod refuses writes while a
//! step-down waits for a secondary to catch up and fails it with 262 after
//! `secondaryCatchUpPeriodSecs` (10 s) when none is electable, so a roll
//! that asks for it again and again refuses writes most of the time and
//! never restarts the member. The roll must restart such a member once,
//! without a step-down, while a w:"majority" writer loses nothing and waits
//! no longer than one restart.
//!
//! A config of two voters cannot keep a majority through either restart; its
//! roll goes on, each restart said in a Warning Event.
//!
//! Lab 54: one cluster, `members: 1`. Lab 55: two clusters of one member.

use std::time::{Duration, Instant};

use crate::harness::*;
use crate::rolling::{acknowledged_between, longest_write_gap, rolled_status, sized};
use lab::lab::Lab;

/// How long the roll of one member may take, from the change to every
/// status saying it is over.
const ROLL_TIMEOUT: Duration = Duration::from_secs(90);
/// The longest time the writer may go without an acknowledged write: one
/// restart of the pod (deleted, re-created, mongod up, elected alone, found
/// by the driver), well under two of mongod's 10 s step-down waits.
const LONGEST_GAP: Duration = Duration::from_secs(15);

/// A gap in the writer's acknowledgements this long is a restart or a
/// step-down's wait; one restart makes one.
const REFUSAL: Duration = Duration::from_secs(5);

/// How many times the writer went longer than `limit` without an
/// acknowledged write between `from` and `to`.
fn gaps_over(
    acknowledged: &[(Instant, u64)],
    from: Instant,
    to: Instant,
    limit: Duration,
) -> usize {
    acknowledged_between(acknowledged, from, to)
        .windows(2)
        .filter(|w| w[1] - w[0] > limit)
        .count()
}

/// The reasons of every cluster's Events about instance `name`.
pub(super) async fn event_reasons(lab: &Lab, name: &str) -> Result<Vec<String>, String> {
    let mut reasons = Vec::new();
    for index in 0..lab.clusters().len() {
        reasons.extend(event_reasons_in(lab, index, name).await?);
    }
    Ok(reasons)
}

/// What one roll scenario expects.
struct Expected {
    /// The Warning Event reason every restart of the roll carries.
    caveat: &'static str,
    /// How many writer gaps over [`REFUSAL`] the roll may cost (one per
    /// primary lost).
    long_gaps: usize,
}

/// Rolls instance `name` of `split` through a change of `spec.resources`
/// under a w:"majority" writer: the roll ends, every acknowledged write
/// survives, the writer's gaps stay within `expected`, and the restarts say
/// what they cost.
async fn roll_through_a_resources_change(
    lab: &Lab,
    name: &str,
    split: &str,
    expected: Expected,
) -> Outcome {
    let _passes = ControlPlanePasses::start(lab);
    let control_plane = lab.control_plane();
    control_plane
        .apply(&sized(name, split, "1", "512Mi"))
        .await
        .map_err(fail("apply"))?;
    ready(lab, name, split).await?;
    let hosts = hosts_of(lab, 0, name).await?;
    let writer = TimedMajorityWriter::start(lab, name, &hosts).await?;
    if let Some(writer) = &writer {
        writer.wait_acknowledged(5, Duration::from_secs(60)).await?;
    }
    let before = member_revisions(lab, name).await?;
    let changed_at = Instant::now();
    control_plane
        .apply(&sized(name, split, "1500m", "1Gi"))
        .await
        .map_err(fail("apply the new resources"))?;
    let deadline = changed_at + ROLL_TIMEOUT;
    let rolled = loop {
        // Up to date only once every pod was replaced on the new template.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let status = rolled_status(lab, name).await?;
        let now = member_revisions(lab, name).await?;
        let restarted = !now.is_empty() && now.iter().all(|r| r.is_some() && !before.contains(r));
        if status.is_ok() && restarted {
            break Ok(());
        }
        if Instant::now() > deadline {
            break Err(format!(
                "the roll was not over {ROLL_TIMEOUT:?} after the change: {}",
                status.err().unwrap_or_default()
            ));
        }
    };
    let reasons = event_reasons(lab, name).await?;
    let Some(writer) = writer else {
        return rolled;
    };
    // A few writes after the roll, so the last gap ends.
    let before_end = writer.acknowledged().len();
    writer
        .wait_acknowledged(before_end + 3, Duration::from_secs(60))
        .await?;
    let ended = Instant::now();
    let acknowledged = writer.stop_and_check().await?;
    let (gap, from) = longest_write_gap(&acknowledged, changed_at, ended);
    let long_gaps = gaps_over(&acknowledged, changed_at, ended, REFUSAL);
    eprintln!(
        "{name}: longest write gap {:.1} s from +{:.1} s after the change; {long_gaps} gap(s) \
         over {REFUSAL:?}",
        gap.as_secs_f64(),
        from.saturating_duration_since(changed_at).as_secs_f64()
    );
    rolled?;
    if long_gaps > expected.long_gaps {
        return Err(format!(
            "the writer went without an acknowledged write for more than {REFUSAL:?} \
             {long_gaps} times, at most {} expected: repeated ones are step-downs refusing \
             writes while they wait",
            expected.long_gaps
        ));
    }
    if gap > LONGEST_GAP {
        return Err(format!(
            "the writer went {:.1} s without an acknowledged write (from +{:.1} s after \
             the change), longer than one restart ({LONGEST_GAP:?})",
            gap.as_secs_f64(),
            from.saturating_duration_since(changed_at).as_secs_f64()
        ));
    }
    if !reasons.iter().any(|r| r == expected.caveat) {
        return Err(format!("no Event {} among {reasons:?}", expected.caveat));
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_member_instance_rolls_through_a_template_change_without_refusing_writes_for_long() {
    scenario(54, 1, async |lab| {
        let expected = Expected {
            caveat: "RestartingPrimaryWithoutStepDown",
            long_gaps: 1,
        };
        roll_through_a_resources_change(lab, "lone", "a=1", expected).await
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_two_voter_set_rolls_one_member_at_a_time_saying_each_restart_costs_the_primary() {
    scenario(55, 2, async |lab| {
        // Each restart leaves one voter: no primary until the member is back;
        // the primary's step-down hands over first, an election more.
        let expected = Expected {
            caveat: "RestartingOneOfTwoVoters",
            long_gaps: 3,
        };
        roll_through_a_resources_change(lab, "pair", "a=1,b=1", expected).await
    })
    .await;
}
