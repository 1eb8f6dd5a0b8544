//! The Rust `mongodb` driver writing to mongod-sim: "no majority write is
//! lost" through kills and step-downs, and update/delete replicated with write
//! concern, failing as mongod's do (write-concern errors, not primary).

mod common;

use bson::{doc, Document};
use common::*;
use mongod_sim::MemberState;
use mongodb::options::{Acknowledgment, WriteConcern};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn majority_writes_survive_kills_and_stepdowns() {
    let set = Set::start(67, 3, |_| {}).await;
    set.initiate().await;
    let client = set.client("&retryWrites=true").await;
    let majority = WriteConcern::builder()
        .w(Acknowledgment::Majority)
        .w_timeout(Duration::from_secs(5))
        .build();
    let coll = client.database("app").collection::<Document>("history");
    let mut acked = Vec::new();
    let mut next = 0;
    for round in 0..4 {
        for _ in 0..10 {
            next += 1;
            if coll
                .insert_one(doc! {"_id": next})
                .write_concern(majority.clone())
                .await
                .is_ok()
            {
                acked.push(next);
            }
        }
        let primary = set.wait_primary(None).await;
        if round % 2 == 0 {
            set.net.stop_member_and_wait(&primary).await;
            set.wait_primary(Some(&primary)).await;
            set.restart(&primary).await;
        } else {
            let _ = set
                .direct(&primary, "")
                .await
                .database("admin")
                .run_command(doc! {"replSetStepDown": 5, "secondaryCatchUpPeriodSecs": 2})
                .await;
            set.wait_primary(Some(&primary)).await;
        }
    }
    assert!(
        acked.len() >= 30,
        "too few acknowledged writes: {}",
        acked.len()
    );
    wait_until("every member back", || async {
        set.hosts.iter().all(|h| {
            matches!(
                set.state(h),
                Some(MemberState::Primary | MemberState::Secondary)
            )
        })
    })
    .await;
    let primary = set.wait_primary(None).await;
    let direct = set.direct(&primary, "").await;
    let found = collect(
        direct
            .database("app")
            .collection::<Document>("history")
            .find(doc! {})
            .await
            .unwrap(),
    )
    .await;
    let ids: std::collections::HashSet<i32> =
        found.iter().filter_map(|d| d.get_i32("_id").ok()).collect();
    for id in &acked {
        assert!(
            ids.contains(id),
            "majority-acknowledged write {id} was lost"
        );
    }
}

/// All documents of `coll` as read from `host` directly.
async fn docs_on(set: &Set, host: &str, coll: &str) -> Vec<Document> {
    let c = set.direct(host, "&readPreference=secondaryPreferred").await;
    collect(
        c.database("app")
            .collection::<Document>(coll)
            .find(doc! {})
            .await
            .unwrap(),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_and_delete_replicate_with_majority_write_concern_like_mongod() {
    let set = Set::start(90, 3, |_| {}).await;
    set.initiate().await;
    let client = set.client("").await;
    let majority = WriteConcern::builder()
        .w(Acknowledgment::Majority)
        .w_timeout(Duration::from_secs(10))
        .build();
    let coll = client.database("app").collection::<Document>("leases");

    // replace_one with upsert on an `_id` filter: the new document takes that `_id`.
    let r = coll
        .replace_one(doc! {"_id": "lease"}, doc! {"holder": "a", "term": 1})
        .upsert(true)
        .write_concern(majority.clone())
        .await
        .unwrap();
    assert_eq!((r.matched_count, r.modified_count), (0, 0));
    assert_eq!(r.upserted_id, Some(bson::Bson::String("lease".into())));
    // A conditional renewal by the holder; a takeover attempt by another holder
    // matches nothing; setting what is already there modifies nothing.
    let renew = |holder: &str, term: i32| {
        coll.update_one(
            doc! {"_id": "lease", "holder": holder},
            doc! {"$set": {"term": term}},
        )
        .write_concern(majority.clone())
    };
    let r = renew("a", 2).await.unwrap();
    assert_eq!((r.matched_count, r.modified_count), (1, 1));
    let r = renew("b", 3).await.unwrap();
    assert_eq!(
        (r.matched_count, r.modified_count, r.upserted_id),
        (0, 0, None)
    );
    let r = renew("a", 2).await.unwrap();
    assert_eq!((r.matched_count, r.modified_count), (1, 0));
    // $unset, and an upsert without `_id` in the filter (an ObjectId is made,
    // $setOnInsert applies).
    let r = coll
        .update_one(doc! {"_id": "lease"}, doc! {"$unset": {"term": ""}})
        .await
        .unwrap();
    assert_eq!(r.modified_count, 1);
    let r = coll
        .update_one(
            doc! {"kind": "marker"},
            doc! {"$set": {"v": 1}, "$setOnInsert": {"created": true}},
        )
        .upsert(true)
        .write_concern(majority.clone())
        .await
        .unwrap();
    assert!(
        matches!(r.upserted_id, Some(bson::Bson::ObjectId(_))),
        "{r:?}"
    );
    let marker = coll
        .find_one(doc! {"kind": "marker"})
        .await
        .unwrap()
        .unwrap();
    assert_eq!(marker.get_bool("created"), Ok(true));
    assert_eq!(marker.keys().next().map(String::as_str), Some("_id"));
    let r = coll
        .update_many(doc! {}, doc! {"$set": {"tag": "t"}})
        .write_concern(majority.clone())
        .await
        .unwrap();
    assert_eq!((r.matched_count, r.modified_count), (2, 2));

    // mongod's write errors.
    let e = coll
        .update_one(doc! {"_id": "lease"}, doc! {"$inc": {"n": 1}})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), Some(9), "{e}");
    assert!(
        format!("{e}").contains("Unknown modifier: $inc. Expected a valid update modifier"),
        "{e}"
    );
    let e = coll
        .update_one(doc! {"_id": "lease"}, doc! {"$set": {"_id": "other"}})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), Some(66), "{e}");
    let e = coll
        .update_one(
            doc! {"_id": "lease", "holder": "nobody"},
            doc! {"$set": {"x": 1}},
        )
        .upsert(true)
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), Some(11000), "{e}");
    let e = coll
        .update_one(
            doc! {"_id": "lease"},
            doc! {"$set": {"a": 1}, "$unset": {"a": ""}},
        )
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), Some(40), "{e}");

    // Every member gets the changes through the oplog.
    let expected = coll.find(doc! {}).await.unwrap();
    let expected = collect(expected).await;
    assert_eq!(expected.len(), 2);
    for h in &set.hosts {
        wait_until("updates replicated", || async {
            docs_on(&set, h, "leases").await == expected
        })
        .await;
    }

    // delete_one / delete_many.
    let r = coll
        .delete_one(doc! {"_id": "lease"})
        .write_concern(majority.clone())
        .await
        .unwrap();
    assert_eq!(r.deleted_count, 1);
    let r = coll
        .delete_one(doc! {"_id": "lease"})
        .write_concern(majority.clone())
        .await
        .unwrap();
    assert_eq!(r.deleted_count, 0);
    let r = coll
        .delete_many(doc! {"tag": "t"})
        .write_concern(majority.clone())
        .await
        .unwrap();
    assert_eq!(r.deleted_count, 1);
    for h in &set.hosts {
        wait_until("deletes replicated", || async {
            docs_on(&set, h, "leases").await.is_empty()
        })
        .await;
    }
    // The command as mongod parses it: limit must be 0 or 1, and is required.
    let app = client.database("app");
    expect_code(
        app.run_command(doc! {"delete": "leases", "deletes": [{"q": {}, "limit": 2}]})
            .await,
        9,
    )
    .await;
    expect_code(
        app.run_command(doc! {"delete": "leases", "deletes": [{"q": {}}]})
            .await,
        40414,
    )
    .await;
    expect_code(
        app.run_command(doc! {"update": "leases", "updates": [{"q": {}, "u": 1}]})
            .await,
        9,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_and_delete_write_concern_failures_and_not_primary() {
    let set = Set::start(91, 3, |_| {}).await;
    let primary = set.initiate().await;
    let secondaries: Vec<String> = set
        .hosts
        .iter()
        .filter(|h| **h != primary)
        .cloned()
        .collect();
    let prim = set.direct(&primary, "&retryWrites=false").await;
    let coll = prim.database("app").collection::<Document>("leases");
    coll.insert_one(doc! {"_id": 1, "v": 0}).await.unwrap();

    // On a secondary: 10107.
    let sec = set.direct(&secondaries[0], "&retryWrites=false").await;
    let sec_coll = sec.database("app").collection::<Document>("leases");
    let e = sec_coll
        .update_one(doc! {"_id": 1}, doc! {"$set": {"v": 1}})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), Some(10107), "{e}");
    let e = sec_coll.delete_one(doc! {"_id": 1}).await.unwrap_err();
    assert_eq!(code_of(&e), Some(10107), "{e}");

    // w:3 with one secondary lagging: the write is applied, the concern times out (64).
    set.net.set_lag(&secondaries[0], Duration::from_secs(60));
    let w3 = WriteConcern::builder()
        .w(Acknowledgment::Nodes(3))
        .w_timeout(Duration::from_millis(300))
        .build();
    let e = coll
        .update_one(doc! {"_id": 1}, doc! {"$set": {"v": 1}})
        .write_concern(w3.clone())
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), Some(64), "{e}");
    let e = coll
        .delete_one(doc! {"_id": "absent"})
        .write_concern(w3)
        .await
        .unwrap_err();
    assert_eq!(
        code_of(&e),
        Some(64),
        "a delete that removes nothing still waits for the write concern: {e}"
    );
    // w:2 is met by the other secondary.
    let w2 = WriteConcern::builder()
        .w(Acknowledgment::Nodes(2))
        .w_timeout(Duration::from_secs(10))
        .build();
    coll.update_one(doc! {"_id": 1}, doc! {"$set": {"v": 2}})
        .write_concern(w2)
        .await
        .unwrap();

    // Both secondaries lagging: a majority update waits; a step-down ends the
    // wait with 11602.
    set.net.set_lag(&secondaries[1], Duration::from_secs(60));
    let waiting = {
        let coll = coll.clone();
        tokio::spawn(async move {
            coll.update_one(doc! {"_id": 1}, doc! {"$set": {"v": 3}})
                .write_concern(WriteConcern::builder().w(Acknowledgment::Majority).build())
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _ = prim
        .database("admin")
        .run_command(doc! {"replSetStepDown": 30, "secondaryCatchUpPeriodSecs": 1, "force": true})
        .await;
    let e = waiting.await.unwrap().unwrap_err();
    assert_eq!(code_of(&e), Some(11602), "{e}");
    for h in &set.hosts {
        set.net.set_lag(h, Duration::ZERO);
    }
}
