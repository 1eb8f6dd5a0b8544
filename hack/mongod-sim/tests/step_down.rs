//! replSetStepDown as mongod's `stepDown` runs it, through the Rust driver:
//! writes refused while the primary waits for a secondary to catch up, a write
//! waiting for its write concern interrupted, 262 when no electable secondary
//! (priority > 0) is caught up, writes accepted again after the failure, and a
//! step-down that succeeds hands the election to the electable secondary.

mod common;

use bson::{doc, Document};
use common::*;
use mongod_sim::MemberState;
use mongodb::options::{Acknowledgment, WriteConcern};
use std::time::{Duration, Instant};

/// Members 2 and 3 at priority 0: member 1 is the only electable one.
fn one_electable(set: &Set) -> Document {
    let members: Vec<Document> = set
        .hosts
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let priority = if i == 0 { 1 } else { 0 };
            doc! {"_id": i as i32, "host": h, "priority": priority}
        })
        .collect();
    doc! {
        "_id": "rs0", "version": 1, "members": members,
        "settings": { "electionTimeoutMillis": ELECTION_TIMEOUT_MS as i64, "heartbeatIntervalMillis": HEARTBEAT_MS as i64 },
    }
}

async fn writable(client: &mongodb::Client) -> bool {
    let hello = client
        .database("admin")
        .run_command(doc! {"hello": 1})
        .await
        .expect("hello");
    hello.get_bool("isWritablePrimary").unwrap_or(false)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_down_refuses_writes_while_it_waits_and_needs_an_electable_caught_up_secondary() {
    let set = Set::start(112, 3, |_| {}).await;
    let first = set.direct(&set.hosts[0], "").await;
    first
        .database("admin")
        .run_command(doc! {"replSetInitiate": one_electable(&set)})
        .await
        .expect("initiate");
    let primary = set.wait_primary(None).await;
    assert_eq!(primary, set.hosts[0]);
    set.wait_all_healthy().await;
    let prim = set.direct(&primary, "&retryWrites=false").await;
    let coll = prim.database("app").collection::<Document>("c");
    coll.insert_one(doc! {"x": 0}).await.expect("first write");

    // A write waiting for its write concern (a lagging member it needs) is
    // interrupted when the attempt begins.
    let lagging = set.hosts[2].clone();
    set.net.set_lag(&lagging, Duration::from_secs(60));
    let w3 = WriteConcern::builder()
        .w(Acknowledgment::Nodes(3))
        .w_timeout(Duration::from_secs(20))
        .build();
    let waiting = {
        let coll = coll.clone();
        tokio::spawn(async move { coll.insert_one(doc! {"x": 1}).write_concern(w3).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;

    let started = Instant::now();
    let step_down = {
        let prim = prim.clone();
        tokio::spawn(async move {
            prim.database("admin")
                .run_command(doc! {"replSetStepDown": 30, "secondaryCatchUpPeriodSecs": 3})
                .await
        })
    };
    let interrupted = waiting.await.unwrap().expect_err("interrupted");
    assert_eq!(code_of(&interrupted), Some(11602), "{interrupted}");

    // While it waits: hello says not writable, a write gets 10107.
    let fresh = set.direct(&primary, "&retryWrites=false").await;
    wait_until("hello says not writable", || async {
        !writable(&fresh).await
    })
    .await;
    // (A fresh client: the first one waits for its monitor after the 11602.)
    let refused = fresh
        .database("app")
        .collection::<Document>("c")
        .insert_one(doc! {"x": 2})
        .await
        .expect_err("refused while stepping down");
    assert_eq!(code_of(&refused), Some(10107), "{refused}");
    assert_eq!(set.state(&primary), Some(MemberState::Primary));

    // Only priority-0 secondaries, even caught up: 262 after the catch-up period.
    set.net.set_lag(&lagging, Duration::ZERO);
    let failed = step_down.await.unwrap();
    expect_code(failed, 262).await;
    assert!(
        started.elapsed() >= Duration::from_millis(2900),
        "gave up after {:?}",
        started.elapsed()
    );
    // Still primary, and writable again.
    assert_eq!(set.state(&primary), Some(MemberState::Primary));
    assert!(writable(&prim).await);
    coll.insert_one(doc! {"x": 3}).await.expect("writes resume");

    // With member 2 electable the step-down succeeds and hands over to it.
    let mut config = current_config(&prim.database("admin")).await;
    let version = config.get_i32("version").unwrap();
    config.insert("version", version + 1);
    let mut members = config.get_array("members").unwrap().clone();
    if let Some(bson::Bson::Document(m)) = members.get_mut(1) {
        m.insert("priority", 1);
    }
    config.insert("members", members);
    prim.database("admin")
        .run_command(doc! {"replSetReconfig": config})
        .await
        .expect("reconfig");
    prim.database("admin")
        .run_command(doc! {"replSetStepDown": 30, "secondaryCatchUpPeriodSecs": 10})
        .await
        .expect("step-down with an electable secondary");
    let new = set.wait_primary(Some(&primary)).await;
    assert_eq!(new, set.hosts[1], "handed over to the electable secondary");
}
