//! A new primary's catch-up phase, through the Rust driver (mongod's
//! `CatchupState`, see README *Elections*). The scenario is the lab's: five
//! writes acknowledged with w:"majority" by h0 and h2 while h1 lags; h2 is
//! lost; a forced reconfig keeps {h0, h1, arbiter}; h0 steps down and h1,
//! behind h0, wins with the arbiter's vote.
//!
//! - by default h1 is PRIMARY but not writable (hello `isWritablePrimary:
//!   false`, `secondary: true`, writes 10107) until it has fetched the entries
//!   from h0; nothing is rolled back;
//! - with `catchUpTimeoutMillis: 0` it takes writes at once and h0 rolls the
//!   five writes back (what mongod does with that setting);
//! - with a timeout, it gives up after it and becomes writable without them;
//! - stepping down while catching up abandons the phase: no entry in its term.
//!
//! Addresses: 127.72.0.11–44 and 127.73.0.11–44 only (the fidelity tests hold
//! 127.72.0.1–3 and 127.73.0.1–2).

mod common;

use bson::{doc, Bson, Document};
use common::*;
use mongod_sim::MemberState;
use mongodb::options::WriteConcern;
use std::time::{Duration, Instant};

const WRITES: i32 = 5;

/// The lab's scenario up to h1's election (see the module doc); returns the
/// set (hosts h0, h1, h2, arbiter). `catch_up_timeout_ms`:
/// `settings.catchUpTimeoutMillis`, or the default (-1, no limit).
async fn behind_member_about_to_win(
    prefix: &str,
    first: usize,
    catch_up_timeout_ms: Option<i64>,
) -> Set {
    let set = Set::start_from(prefix, first, 4, |_| {}).await;
    let (h0, h1, h2, arb) = (&set.hosts[0], &set.hosts[1], &set.hosts[2], &set.hosts[3]);
    // Slow elections: only replSetStepUp elects here.
    let mut settings =
        doc! {"electionTimeoutMillis": 20_000_i64, "heartbeatIntervalMillis": HEARTBEAT_MS as i64};
    if let Some(ms) = catch_up_timeout_ms {
        settings.insert("catchUpTimeoutMillis", ms);
    }
    let members: Vec<Document> = [h0, h1, h2]
        .iter()
        .enumerate()
        .map(|(i, h)| doc! {"_id": i as i32, "host": h.as_str()})
        .collect();
    let c0 = set.direct(h0, "&retryWrites=false").await;
    let admin0 = c0.database("admin");
    admin0
        .run_command(doc! {"replSetInitiate": {
            "_id": "rs0", "version": 1, "members": members, "settings": settings,
        }})
        .await
        .expect("initiate");
    wait_until("members SECONDARY", || async {
        [h0, h1, h2]
            .iter()
            .all(|h| set.state(h) == Some(MemberState::Secondary))
    })
    .await;
    admin0
        .run_command(doc! {"replSetStepUp": 1})
        .await
        .expect("h0 steps up");
    wait_until("h0 writable", || async { writable_primary(&set, h0) }).await;
    // A cluster-wide write concern: the forced config (with an arbiter)
    // changes the implicit default one.
    admin0
        .run_command(doc! {"setDefaultRWConcern": 1, "defaultWriteConcern": {"w": "majority"}})
        .await
        .expect("setDefaultRWConcern");
    wait_until("h1 and h2 caught up", || async {
        let last = member_last(&set, h0);
        member_last(&set, h1) == last && member_last(&set, h2) == last
    })
    .await;

    // h1 lags: the majority writes land on h0 and h2.
    set.net.set_lag(h1, Duration::from_secs(60));
    let coll = c0.database("app").collection::<Document>("c");
    for i in 1..=WRITES {
        coll.insert_one(doc! {"_id": i})
            .write_concern(WriteConcern::majority())
            .await
            .expect("w:majority write on h0 and h2");
    }
    assert!(member_last(&set, h1) < member_last(&set, h0));

    // h2 is lost; a forced reconfig keeps {h0, h1, arbiter}.
    set.net.stop_member_and_wait(h2).await;
    let mut forced = current_config(&admin0).await;
    forced.insert("version", forced.get_i32("version").unwrap() + 1);
    forced.insert(
        "members",
        vec![
            Bson::Document(doc! {"_id": 0, "host": h0.as_str()}),
            Bson::Document(doc! {"_id": 1, "host": h1.as_str()}),
            Bson::Document(doc! {"_id": 3, "host": arb.as_str(), "arbiterOnly": true}),
        ],
    );
    admin0
        .run_command(doc! {"replSetReconfig": forced, "force": true})
        .await
        .expect("forced reconfig");
    wait_until("h1 and the arbiter hold the forced config", || async {
        let version = |h: &str| {
            set.net
                .member(h)
                .and_then(|m| m.config())
                .map(|c| c.version)
        };
        set.state(arb) == Some(MemberState::Arbiter) && version(h1) == version(h0)
    })
    .await;
    // h0 steps down (frozen for two minutes): h1 can win with the arbiter's vote.
    admin0
        .run_command(doc! {"replSetStepDown": 120, "secondaryCatchUpPeriodSecs": 0, "force": true})
        .await
        .expect("h0 steps down");
    wait_until("h0 SECONDARY", || async {
        set.state(h0) == Some(MemberState::Secondary)
    })
    .await;
    set
}

fn member_last(set: &Set, host: &str) -> mongod_sim::OpTime {
    set.net.member(host).expect("running").last_optime()
}

fn writable_primary(set: &Set, host: &str) -> bool {
    set.net
        .member(host)
        .is_some_and(|m| m.is_writable_primary())
}

async fn step_up(set: &Set, host: &str) {
    set.direct(host, "")
        .await
        .database("admin")
        .run_command(doc! {"replSetStepUp": 1})
        .await
        .expect("replSetStepUp");
    assert_eq!(set.state(host), Some(MemberState::Primary));
}

async fn hello(set: &Set, host: &str) -> Document {
    set.direct(host, "")
        .await
        .database("admin")
        .run_command(doc! {"hello": 1})
        .await
        .expect("hello")
}

/// The `_id`s of `app.c` on `host` (a direct connection reads a secondary too).
async fn ids(set: &Set, host: &str) -> Vec<i32> {
    let client = set.direct(host, "").await;
    let coll = client.database("app").collection::<Document>("c");
    let mut ids: Vec<i32> = collect(coll.find(doc! {}).await.expect("find"))
        .await
        .iter()
        .map(|d| d.get_i32("_id").unwrap())
        .collect();
    ids.sort();
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_elected_behind_a_reachable_member_catches_up_before_it_takes_writes() {
    let set = behind_member_about_to_win("127.72.0", 11, None).await;
    let (h0, h1) = (set.hosts[0].clone(), set.hosts[1].clone());
    let h0_last = member_last(&set, &h0);
    step_up(&set, &h1).await;

    // Catching up (the lag holds h0's entries back): PRIMARY, not writable.
    let reply = hello(&set, &h1).await;
    assert_eq!(reply.get_bool("isWritablePrimary"), Ok(false), "{reply}");
    assert_eq!(reply.get_bool("secondary"), Ok(true), "{reply}");
    assert_eq!(reply.get_str("primary"), Ok(h1.as_str()), "{reply}");
    let counter = reply
        .get_document("topologyVersion")
        .unwrap()
        .get_i64("counter")
        .unwrap();
    let c1 = set.direct(&h1, "&retryWrites=false").await;
    let refused = c1
        .database("app")
        .collection::<Document>("c")
        .insert_one(doc! {"_id": 100})
        .await
        .expect_err("no writes while catching up");
    assert_eq!(code_of(&refused), Some(10107), "{refused}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(set.state(&h1), Some(MemberState::Primary));
    assert!(!writable_primary(&set, &h1), "still catching up");
    assert_eq!(member_last(&set, &h0), h0_last, "h0 rolled nothing back");

    // The lag ends: h1 fetches h0's entries, then writes its no-op and is writable.
    set.net.set_lag(&h1, Duration::ZERO);
    wait_until("h1 writable", || async { writable_primary(&set, &h1) }).await;
    let reply = hello(&set, &h1).await;
    assert_eq!(reply.get_bool("isWritablePrimary"), Ok(true), "{reply}");
    assert_eq!(reply.get_bool("secondary"), Ok(false), "{reply}");
    let after = reply
        .get_document("topologyVersion")
        .unwrap()
        .get_i64("counter")
        .unwrap();
    assert!(after > counter, "the end of catch-up is a topology change");
    let h1_member = set.net.member(&h1).unwrap();
    assert_eq!(h1_member.last_optime().t, h1_member.term(), "its no-op");
    assert!(h1_member.last_optime() > h0_last);
    assert_eq!(ids(&set, &h1).await, (1..=WRITES).collect::<Vec<_>>());

    // A new majority write needs h0: it syncs from h1 without a rollback.
    c1.database("app")
        .collection::<Document>("c")
        .insert_one(doc! {"_id": 6})
        .write_concern(WriteConcern::majority())
        .await
        .expect("w:majority write on the new primary");
    assert_eq!(ids(&set, &h0).await, (1..=6).collect::<Vec<_>>());
    assert_eq!(ids(&set, &h1).await, (1..=6).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_catch_up_timeout_zero_the_new_primary_writes_at_once_and_the_majority_writes_roll_back(
) {
    let set = behind_member_about_to_win("127.73.0", 11, Some(0)).await;
    let (h0, h1) = (set.hosts[0].clone(), set.hosts[1].clone());
    step_up(&set, &h1).await;
    assert!(writable_primary(&set, &h1), "no catch-up phase");
    let reply = hello(&set, &h1).await;
    assert_eq!(reply.get_bool("isWritablePrimary"), Ok(true), "{reply}");
    assert!(ids(&set, &h1).await.is_empty(), "h1 never had the writes");

    // h0 syncs from the new primary and rolls the five writes back.
    wait_until("h0 synced from h1", || async {
        member_last(&set, &h0) == member_last(&set, &h1)
    })
    .await;
    assert!(ids(&set, &h0).await.is_empty(), "rolled back on h0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catch_up_gives_up_after_catch_up_timeout_millis() {
    let set = behind_member_about_to_win("127.72.0", 21, Some(1500)).await;
    let (h0, h1) = (set.hosts[0].clone(), set.hosts[1].clone());
    let started = Instant::now();
    step_up(&set, &h1).await;
    assert!(!writable_primary(&set, &h1), "catching up");
    wait_until("h1 writable", || async { writable_primary(&set, &h1) }).await;
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(1400) && took < Duration::from_secs(10),
        "writable after {took:?}"
    );
    // The lag still held the entries back: h1 has none, and h0 rolls them back.
    assert!(ids(&set, &h1).await.is_empty());
    wait_until("h0 synced from h1", || async {
        member_last(&set, &h0) == member_last(&set, &h1)
    })
    .await;
    assert!(ids(&set, &h0).await.is_empty(), "rolled back on h0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stepping_down_while_catching_up_abandons_the_catch_up() {
    let set = behind_member_about_to_win("127.73.0", 21, None).await;
    let (h0, h1) = (set.hosts[0].clone(), set.hosts[1].clone());
    let h0_last = member_last(&set, &h0);
    step_up(&set, &h1).await;
    assert!(!writable_primary(&set, &h1), "catching up");

    // Nothing written in its term: the step-down needs no caught-up secondary.
    set.direct(&h1, "")
        .await
        .database("admin")
        .run_command(doc! {"replSetStepDown": 60, "secondaryCatchUpPeriodSecs": 10})
        .await
        .expect("step down while catching up");
    assert_eq!(set.state(&h1), Some(MemberState::Secondary));
    set.net.set_lag(&h1, Duration::ZERO);
    wait_until("h1 has h0's entries", || async {
        member_last(&set, &h1) == h0_last
    })
    .await;
    let h1_member = set.net.member(&h1).unwrap();
    assert!(
        h1_member.last_optime().t < h1_member.term(),
        "no entry written in the abandoned term"
    );
    assert_eq!(ids(&set, &h0).await, (1..=WRITES).collect::<Vec<_>>());
    assert_eq!(ids(&set, &h1).await, (1..=WRITES).collect::<Vec<_>>());
}
