//! The cluster-wide write concern pinned without the rsInit cluster. mongod
//! 5.0+ refuses every reconfig that changes the implicit default write
//! concern while none is set, its own `newlyAdded` clearing included, so a
//! set left without one can never grow across the change. Here the rsInit
//! cluster's operator stops between initiate and the pin, and the primary
//! moves to another cluster: the cluster whose member is the primary pins it
//! there, and a member added across the change gets its vote. A w:"majority"
//! writer runs throughout and loses nothing.
//!
//! Lab 68, two clusters.

use std::time::{Duration, Instant};

use crate::e2e::{fedstate_sample, set_shape};
use crate::harness::*;
use lab::lab::Lab;
use mongod_sim::MemberState;
use mongodb::bson::doc;

const NAME: &str = "pin";
/// How long the pin and the new member's vote may take once the primary moved.
const PIN_TIMEOUT: Duration = Duration::from_secs(90);

/// Waits until some member of the lab holds a replica-set config (it left
/// STARTUP): the rsInit cluster's operator has just initiated the set.
async fn until_initiated(lab: &Lab) -> Outcome {
    let deadline = Instant::now() + READY_TIMEOUT;
    let network = lab.network();
    loop {
        let initiated = network.running().iter().any(|listen| {
            network
                .member(listen)
                .is_some_and(|m| m.state() != MemberState::Startup)
        });
        if initiated {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("the set was not initiated in {READY_TIMEOUT:?}"));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `getDefaultRWConcern` and `replSetGetStatus.votingMembersCount` as the set
/// answers them.
async fn pin_and_voters(client: &mongodb::Client) -> Result<(String, String, i64), String> {
    let admin = client.database("admin");
    let mut replies = Vec::new();
    for command in ["getDefaultRWConcern", "replSetGetStatus"] {
        let reply = admin.run_command(doc! {command: 1}).await;
        replies.push(reply.map_err(fail(command))?);
    }
    let (defaults, status) = (&replies[0], &replies[1]);
    let source = defaults
        .get_str("defaultWriteConcernSource")
        .unwrap_or_default()
        .to_string();
    let w = defaults
        .get_document("defaultWriteConcern")
        .ok()
        .and_then(|wc| wc.get("w"))
        .map(ToString::to_string)
        .unwrap_or_default();
    let voters = status
        .get_i32("votingMembersCount")
        .map(i64::from)
        .or_else(|_| status.get_i64("votingMembersCount"))
        .map_err(fail("votingMembersCount"))?;
    Ok((source, w, voters))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_rs_init_cluster_the_primarys_cluster_pins_the_write_concern() {
    scenario(68, 2, async |lab| {
        // a0, a1 and the arbiter (with rsInit, FedState's first largest
        // cluster), b0: three data voters and an arbiter, implicitly {w: 1}.
        let three = fedstate_sample(NAME, &[("a", 2), ("b", 1)], true);
        lab.control_plane()
            .apply(&three)
            .await
            .map_err(fail("apply"))?;
        until_initiated(lab).await?;
        lab.kill_operator(0).await.map_err(fail("stop a"))?;
        until_in(lab, 1, NAME, "the set formed", |m| {
            set_shape(m) == (4, 1, 1)
        })
        .await?;
        let hosts = hosts_of(lab, 1, NAME).await?;
        let client = mongo(lab, NAME, &hosts, false).await?;
        let (source, _, _) = pin_and_voters(&client).await?;
        if source != "implicit" {
            return Err(format!(
                "the rsInit cluster pinned the write concern ({source}) before it was stopped: \
                 nothing is left to show"
            ));
        }
        // The primary moves to b; a's operator stays stopped.
        let b0 = member_host(lab, 1, NAME, 0).await?;
        make_primary(lab, NAME, &b0).await?;
        let writer = MajorityWriter::start(lab, NAME, &hosts).await?;

        // b1 makes four data voters and an arbiter, implicitly {w: "majority"}:
        // mongod clears its newlyAdded only with a cluster-wide write concern.
        // a stays the first largest cluster, so rsInit stays there.
        lab.control_plane()
            .apply(
                &fedstate_sample(NAME, &[("a", 2), ("b", 2)], true)
                    .keep_unchanged_clusters_on_scale_up(),
            )
            .await
            .map_err(fail("scale b"))?;
        let deadline = Instant::now() + PIN_TIMEOUT;
        loop {
            let (source, w, voters) = pin_and_voters(&client).await?;
            if source == "global" && voters == 5 {
                eprintln!("pinned {w}; b1 votes");
                break;
            }
            if Instant::now() > deadline {
                let conditions = until_in(lab, 1, NAME, "b's status", |_| true)
                    .await?
                    .status
                    .map(|s| s.conditions)
                    .unwrap_or_default();
                return Err(format!(
                    "after {PIN_TIMEOUT:?} the write concern is {source} {w} and {voters} \
                     members vote (5 wanted): {conditions:#?}"
                ));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        if let Some(writer) = writer {
            writer.stop_and_check().await?;
        }
        Ok(())
    })
    .await;
}
