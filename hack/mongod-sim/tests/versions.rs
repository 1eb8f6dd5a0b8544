//! Server versions and featureCompatibilityVersion through the Rust `mongodb`
//! driver: what a member of a given version reports, getParameter /
//! setFeatureCompatibilityVersion with mongod's codes, the startup check on data
//! the binary cannot run, and what replication or an initial sync does to a
//! member whose binary is too old for the set's FCV.

mod common;

use bson::{doc, Bson, Document};
use common::*;
use mongod_sim::{MemberState, ServerVersion};
use std::time::Duration;

fn v(s: &str) -> ServerVersion {
    s.parse().unwrap()
}

async fn fcv_of(set: &Set, host: &str) -> Document {
    set.direct(host, "")
        .await
        .database("admin")
        .run_command(doc! {"getParameter": 1, "featureCompatibilityVersion": 1})
        .await
        .unwrap()
        .get_document("featureCompatibilityVersion")
        .unwrap()
        .clone()
}

/// Stops `host` and starts it again running `version` (a new image on the same PVC).
async fn restart_as(set: &mut Set, host: &str, version: ServerVersion) {
    let i = set.hosts.iter().position(|h| h == host).unwrap();
    set.net.stop_member_and_wait(host).await;
    set.specs[i].version = version;
    set.net
        .start_member(set.specs[i].clone(), set.volumes[i].clone())
        .await
        .unwrap();
}

/// Waits until `host` is gone from the network (its process exited).
async fn wait_exited(set: &Set, host: &str) {
    wait_until("the member exits", || async {
        set.net.member(host).is_none()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_reports_its_version_and_the_driver_works_with_8_0() {
    let set = Set::start(92, 3, |s| s.version = v("8.0.3")).await;
    let direct = set.direct(&set.hosts[0], "").await;
    let admin = direct.database("admin");
    // Before initiate the FCV is not known yet (258), as on mongod.
    expect_code(
        admin
            .run_command(doc! {"getParameter": 1, "featureCompatibilityVersion": 1})
            .await,
        258,
    )
    .await;
    let info = admin.run_command(doc! {"buildInfo": 1}).await.unwrap();
    assert_eq!(info.get_str("version"), Ok("8.0.3"));
    assert_eq!(
        info.get_array("versionArray").unwrap(),
        &vec![
            Bson::Int32(8),
            Bson::Int32(0),
            Bson::Int32(3),
            Bson::Int32(0)
        ]
    );
    let hello = admin.run_command(doc! {"hello": 1}).await.unwrap();
    assert_eq!(hello.get_i32("maxWireVersion"), Ok(25));
    let status = admin.run_command(doc! {"serverStatus": 1}).await.unwrap();
    assert_eq!(status.get_str("version"), Ok("8.0.3"));

    // The driver discovers and writes to an 8.0 set (maxWireVersion 25).
    let primary = set.initiate().await;
    let client = set.client("").await;
    let coll = client.database("app").collection::<Document>("c");
    coll.insert_one(doc! {"_id": 1}).await.unwrap();
    coll.update_one(doc! {"_id": 1}, doc! {"$set": {"x": 1}})
        .await
        .unwrap();
    assert_eq!(
        coll.find_one(doc! {}).await.unwrap(),
        Some(doc! {"_id": 1, "x": 1})
    );
    // initiate set the FCV to the binary's MAJOR.MINOR; every member has it, as
    // a document in admin.system.version.
    for h in &set.hosts {
        wait_until("FCV replicated", || async {
            fcv_of(&set, h).await == doc! {"version": "8.0"}
        })
        .await;
    }
    let stored = set
        .direct(&primary, "")
        .await
        .database("admin")
        .collection::<Document>("system.version")
        .find_one(doc! {"_id": "featureCompatibilityVersion"})
        .await
        .unwrap();
    assert_eq!(
        stored,
        Some(doc! {"_id": "featureCompatibilityVersion", "version": "8.0"})
    );

    // A 7.0 member reports 7.0.14 / 21 by default.
    let old = Set::start(93, 1, |_| {}).await;
    let hello = old
        .direct(&old.hosts[0], "")
        .await
        .database("admin")
        .run_command(doc! {"hello": 1})
        .await
        .unwrap();
    assert_eq!(hello.get_i32("maxWireVersion"), Ok(21));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_feature_compatibility_version_needs_confirm_and_a_permitted_transition() {
    let set = Set::start(94, 3, |s| s.version = v("8.0.0")).await;
    let primary = set.initiate().await;
    let prim = set.direct(&primary, "").await;
    let admin = prim.database("admin");
    let set_fcv = |version: &str, confirm: bool| {
        let mut cmd = doc! {"setFeatureCompatibilityVersion": version};
        if confirm {
            cmd.insert("confirm", true);
        }
        admin.run_command(cmd)
    };
    // Since 7.0 mongod wants confirm: true (7369100), for a downgrade...
    let e = expect_code(set_fcv("7.0", false).await, 7369100).await;
    assert!(
        format!("{e}").contains("Once you have downgraded the FCV, if you choose to downgrade the binary version, it will require support assistance. Please re-run this command with 'confirm: true' to acknowledge this and continue with the FCV downgrade."),
        "{e}"
    );
    set_fcv("7.0", true).await.unwrap();
    for h in &set.hosts {
        wait_until("downgraded FCV on every member", || async {
            fcv_of(&set, h).await == doc! {"version": "7.0"}
        })
        .await;
    }
    // ...and for an upgrade.
    let e = expect_code(set_fcv("8.0", false).await, 7369100).await;
    assert!(
        format!("{e}").contains("Once you have upgraded to 8.0, you will not be able to downgrade FCV and binary version without support assistance."),
        "{e}"
    );
    // Values the binary does not know: 4926900; a transition it does not permit
    // (to last-continuous): 5147403.
    let e = expect_code(set_fcv("6.0", true).await, 4926900).await;
    assert!(
        format!("{e}").contains("Invalid feature compatibility version value '6.0'; expected '7.0' or '7.3' or '8.0'. See https://docs.mongodb.com/master/release-notes/7.0-compatibility/#feature-compatibility."),
        "{e}"
    );
    let e = expect_code(set_fcv("7.3", true).await, 5147403).await;
    assert!(
        format!("{e}").contains(
            "cannot set featureCompatibilityVersion to '7.3' while featureCompatibilityVersion is '7.0'"
        ),
        "{e}"
    );
    // Setting the current value is accepted (and waits for a majority).
    set_fcv("7.0", true).await.unwrap();
    // Only on the primary, only on admin.
    let secondary = set.hosts.iter().find(|h| **h != primary).unwrap();
    expect_code(
        set.direct(secondary, "")
            .await
            .database("admin")
            .run_command(doc! {"setFeatureCompatibilityVersion": "8.0", "confirm": true})
            .await,
        10107,
    )
    .await;
    expect_code(
        prim.database("app")
            .run_command(doc! {"setFeatureCompatibilityVersion": "8.0", "confirm": true})
            .await,
        13,
    )
    .await;

    // The upgrade waits for a majority at each step: with both secondaries
    // lagging and a wtimeout it fails with 64 and leaves the upgrading document
    // (version 7.0, targetVersion 8.0), as mongod does; run again later, it
    // completes.
    for h in set.hosts.iter().filter(|h| **h != primary) {
        set.net.set_lag(h, Duration::from_secs(60));
    }
    expect_code(
        admin
            .run_command(
                doc! {"setFeatureCompatibilityVersion": "8.0", "confirm": true,
                "writeConcern": {"wtimeout": 300}},
            )
            .await,
        64,
    )
    .await;
    assert_eq!(
        fcv_of(&set, &primary).await,
        doc! {"version": "7.0", "targetVersion": "8.0"}
    );
    for h in &set.hosts {
        set.net.set_lag(h, Duration::ZERO);
    }
    set_fcv("8.0", true).await.unwrap();
    for h in &set.hosts {
        wait_until("upgraded FCV on every member", || async {
            fcv_of(&set, h).await == doc! {"version": "8.0"}
        })
        .await;
    }
    // Writing the FCV document directly goes through the same parser.
    let e = prim
        .database("admin")
        .collection::<Document>("system.version")
        .update_one(
            doc! {"_id": "featureCompatibilityVersion"},
            doc! {"$set": {"version": "9.9"}},
        )
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), Some(4926900), "{e}");
    let e = prim
        .database("admin")
        .collection::<Document>("system.version")
        .delete_one(doc! {"_id": "featureCompatibilityVersion"})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), Some(40670), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_refuses_to_start_on_data_whose_fcv_its_binary_cannot_run() {
    let mut set = Set::start(95, 1, |s| s.version = v("6.0.19")).await;
    set.initiate().await;
    let host = set.hosts[0].clone();
    assert_eq!(fcv_of(&set, &host).await, doc! {"version": "6.0"});

    // An 8.0 binary on FCV 6.0 data: mongod's startup check fails, exit code 62.
    set.net.stop_member_and_wait(&host).await;
    let err = mongod_sim::fcv::startup_check(v("8.0.3"), &set.volumes[0].snapshot()).unwrap_err();
    assert_eq!(err.exit_code, 62);
    assert!(err.message.starts_with("UPGRADE PROBLEM: Found an invalid featureCompatibilityVersion document (ERROR: Location4926900: Invalid featureCompatibilityVersion document in admin.system.version: { _id: \"featureCompatibilityVersion\", version: \"6.0\" }."), "{}", err.message);
    set.specs[0].version = v("8.0.3");
    set.net
        .start_member(set.specs[0].clone(), set.volumes[0].clone())
        .await
        .unwrap();
    let refused = set.net.member(&host);
    wait_exited(&set, &host).await;
    if let Some(m) = refused {
        assert_eq!(m.exit_code(), Some(62));
    }
    assert!(
        std::net::TcpStream::connect(&host).is_err(),
        "a member that refused to start listens"
    );

    // The path mongod documents: 6.0 → 7.0 binary, FCV 7.0, then 8.0 binary.
    restart_as(&mut set, &host, v("7.0.14")).await;
    set.wait_primary(None).await;
    assert_eq!(fcv_of(&set, &host).await, doc! {"version": "6.0"});
    set.direct(&host, "")
        .await
        .database("admin")
        .run_command(doc! {"setFeatureCompatibilityVersion": "7.0", "confirm": true})
        .await
        .unwrap();
    restart_as(&mut set, &host, v("8.0.3")).await;
    set.wait_primary(None).await;
    set.direct(&host, "")
        .await
        .database("admin")
        .run_command(doc! {"setFeatureCompatibilityVersion": "8.0", "confirm": true})
        .await
        .unwrap();

    // A 7.0 binary on FCV 8.0 data refuses as well.
    set.net.stop_member_and_wait(&host).await;
    set.specs[0].version = v("7.0.14");
    set.net
        .start_member(set.specs[0].clone(), set.volumes[0].clone())
        .await
        .unwrap();
    let refused = set.net.member(&host);
    wait_exited(&set, &host).await;
    if let Some(m) = refused {
        assert_eq!(m.exit_code(), Some(62));
    }
    // Back on 8.0 it runs, data intact.
    restart_as(&mut set, &host, v("8.0.3")).await;
    set.wait_primary(None).await;
    assert_eq!(fcv_of(&set, &host).await, doc! {"version": "8.0"});
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secondary_whose_binary_cannot_parse_a_replicated_fcv_dies() {
    // A rolling upgrade 7.0 → 8.0 with one member left behind on 7.0.
    let mut set = Set::start(96, 3, |_| {}).await;
    set.initiate().await;
    let hosts = set.hosts.clone();
    let behind = hosts[2].clone();
    for h in &hosts[..2] {
        restart_as(&mut set, h, v("8.0.3")).await;
        wait_until("member back", || async {
            matches!(
                set.state(h),
                Some(MemberState::Primary | MemberState::Secondary)
            )
        })
        .await;
    }
    // An 8.0 member must be primary to upgrade the FCV (a 7.0 one refuses "8.0").
    let mut primary = set.wait_primary(None).await;
    if primary == behind {
        let _ = set
            .direct(&primary, "")
            .await
            .database("admin")
            .run_command(doc! {"replSetStepDown": 30, "secondaryCatchUpPeriodSecs": 5})
            .await;
        primary = set.wait_primary(Some(&behind)).await;
    }
    let old_member = set.net.member(&behind).unwrap();
    set.direct(&primary, "")
        .await
        .database("admin")
        .run_command(doc! {"setFeatureCompatibilityVersion": "8.0", "confirm": true})
        .await
        .unwrap();
    // The 7.0 member applies {version: "7.0", targetVersion: "8.0"}, cannot parse
    // it, and its oplog applier's fatal assertion ends the process (exit 14).
    wait_exited(&set, &behind).await;
    assert_eq!(old_member.exit_code(), Some(14));
    // Restarted on 8.0 it catches up.
    let i = hosts.iter().position(|h| *h == behind).unwrap();
    set.specs[i].version = v("8.0.3");
    set.net
        .start_member(set.specs[i].clone(), set.volumes[i].clone())
        .await
        .unwrap();
    wait_until("upgraded member syncs the FCV", || async {
        set.state(&behind) == Some(MemberState::Secondary)
            && fcv_of(&set, &behind).await == doc! {"version": "8.0"}
    })
    .await;

    // A new 7.0 member added to the FCV 8.0 set cannot initial-sync: its attempts
    // fail (1 s apart) and after 10 it gives up with a fatal assertion (exit 14).
    let newcomer = "127.96.0.4:27017".to_string();
    let spec = mongod_sim::MemberSpec::new(newcomer.parse().unwrap(), "rs0");
    set.net
        .start_member(spec, mongod_sim::Volume::new())
        .await
        .unwrap();
    let newcomer_member = set.net.member(&newcomer).unwrap();
    let prim = set.direct(&primary, "").await;
    let mut cfg = prim
        .database("admin")
        .run_command(doc! {"replSetGetConfig": 1})
        .await
        .unwrap()
        .get_document("config")
        .unwrap()
        .clone();
    let mut members = cfg.get_array("members").unwrap().clone();
    members.push(Bson::Document(
        doc! {"_id": 3, "host": &newcomer, "priority": 0, "votes": 0},
    ));
    cfg.insert("members", members);
    cfg.insert("version", cfg.get_i32("version").unwrap() + 1);
    prim.database("admin")
        .run_command(doc! {"replSetReconfig": cfg})
        .await
        .unwrap();
    wait_exited(&set, &newcomer).await;
    assert_eq!(newcomer_member.exit_code(), Some(14));
}
