//! The Rust `mongodb` driver against mongod-sim: discovery, failover,
//! documented error codes, SCRAM auth, members that recognise themselves under
//! another address, reconfig commitment, the per-client command counters, and
//! SCRAM carried in the handshake.
//! Writes through the driver are in `driver_writes.rs`.

mod common;

use bson::{doc, Bson, Document};
use common::*;
use mongod_sim::MemberState;
use mongodb::options::{Acknowledgment, WriteConcern};
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn driver_discovers_set_and_follows_failover_after_primary_stopped() {
    let set = Set::start(61, 3, |_| {}).await;
    let old = set.initiate().await;
    let client = set.client("").await;
    let coll = client.database("app").collection::<Document>("items");
    coll.insert_one(doc! {"n": 1})
        .await
        .expect("insert via discovered primary");

    set.net.stop_member_and_wait(&old).await;
    let stopped = Instant::now();
    let new = set.wait_primary(Some(&old)).await;
    let took = stopped.elapsed();
    // electionTimeout (+15% random offset) + one heartbeat, with slack for a noisy machine.
    let bound = Duration::from_millis(ELECTION_TIMEOUT_MS * 115 / 100 + HEARTBEAT_MS)
        + Duration::from_secs(3);
    eprintln!("new primary after {took:?} (election timeout {ELECTION_TIMEOUT_MS} ms, heartbeat {HEARTBEAT_MS} ms, bound with slack {bound:?})");
    assert!(took < bound, "new primary after {took:?}, bound {bound:?}");
    assert_ne!(new, old);
    coll.insert_one(doc! {"n": 2})
        .await
        .expect("insert after failover");

    set.restart(&old).await;
    wait_until("old primary rejoins as SECONDARY", || async {
        set.state(&old) == Some(MemberState::Secondary)
    })
    .await;
    let found = collect(coll.find(doc! {}).await.unwrap()).await;
    assert_eq!(found.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documented_error_codes_for_initiate_reconfig_and_stepdown() {
    let set = Set::start(62, 3, |_| {}).await;
    let direct = set.direct(&set.hosts[0], "").await;
    let admin = direct.database("admin");
    let e = expect_code(admin.run_command(doc! {"replSetGetStatus": 1}).await, 94).await;
    assert!(format!("{e}").contains("NotYetInitialized"), "{e}");
    expect_code(admin.run_command(doc! {"noSuchThing": 1}).await, 59).await;

    let primary = set.initiate().await;
    expect_code(
        admin
            .run_command(doc! {"replSetInitiate": set.config(&set.hosts)})
            .await,
        23,
    )
    .await;

    let secondary = set.hosts.iter().find(|h| **h != primary).unwrap().clone();
    let sec = set.direct(&secondary, "").await;
    let cfg = sec
        .database("admin")
        .run_command(doc! {"replSetGetConfig": 1})
        .await
        .unwrap();
    let mut cfg = cfg.get_document("config").unwrap().clone();
    let version = cfg.get_i32("version").unwrap();
    cfg.insert("version", version + 1);
    expect_code(
        sec.database("admin")
            .run_command(doc! {"replSetReconfig": cfg.clone()})
            .await,
        10107,
    )
    .await;
    expect_code(
        sec.database("admin")
            .run_command(doc! {"replSetStepDown": 60})
            .await,
        10107,
    )
    .await;

    // Removing two voters in one reconfig: 103.
    let prim = set.direct(&primary, "").await;
    let padmin = prim.database("admin");
    wait_until("config committed", || async {
        padmin
            .run_command(doc! {"replSetGetConfig": 1, "commitmentStatus": true})
            .await
            .map(|r| r.get_bool("commitmentStatus").unwrap_or(false))
            .unwrap_or(false)
    })
    .await;
    let mut two_gone = cfg.clone();
    let keep: Vec<bson::Bson> = cfg
        .get_array("members")
        .unwrap()
        .iter()
        .filter(|m| m.as_document().unwrap().get_str("host").unwrap() == primary)
        .cloned()
        .collect();
    two_gone.insert("members", keep);
    let e = expect_code(
        padmin.run_command(doc! {"replSetReconfig": two_gone}).await,
        103,
    )
    .await;
    assert!(format!("{e}").contains("at most 1 voting member"), "{e}");

    // Bad stepDown periods: 2.
    expect_code(
        padmin
            .run_command(doc! {"replSetStepDown": 5, "secondaryCatchUpPeriodSecs": 10})
            .await,
        2,
    )
    .await;

    // A version that does not increase: 103.
    let mut same = cfg.clone();
    same.insert("version", version);
    expect_code(
        padmin.run_command(doc! {"replSetReconfig": same}).await,
        103,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stepdown_without_caught_up_secondary_fails_with_262() {
    let set = Set::start(63, 3, |_| {}).await;
    let primary = set.initiate().await;
    for h in set.hosts.iter().filter(|h| **h != primary) {
        set.net.set_lag(h, Duration::from_secs(60));
    }
    let prim = set.direct(&primary, "").await;
    let w1 = WriteConcern::builder().w(Acknowledgment::Nodes(1)).build();
    prim.database("app")
        .collection::<Document>("c")
        .insert_one(doc! {"x": 1})
        .write_concern(w1)
        .await
        .unwrap();
    let started = Instant::now();
    let e = expect_code(
        prim.database("admin")
            .run_command(doc! {"replSetStepDown": 3, "secondaryCatchUpPeriodSecs": 1})
            .await,
        262,
    )
    .await;
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "gave up too early: {e}"
    );
    assert_eq!(set.state(&primary), Some(MemberState::Primary));

    // Without lag a caught-up secondary exists: the step-down succeeds and another
    // member becomes primary.
    for h in &set.hosts {
        set.net.set_lag(h, Duration::ZERO);
    }
    prim.database("admin")
        .run_command(doc! {"replSetStepDown": 10, "secondaryCatchUpPeriodSecs": 5})
        .await
        .expect("stepdown");
    let new = set.wait_primary(Some(&primary)).await;
    assert_ne!(new, primary);
}

/// Access control on: a keyfile and the root user `root` / `s3cret`.
fn with_root(spec: &mut mongod_sim::MemberSpec) {
    spec.keyfile = Some("c2VjcmV0a2V5ZmlsZWNvbnRlbnQ=".into());
    spec.root_user = Some(mongod_sim::RootUser {
        username: "root".into(),
        password: "s3cret".into(),
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scram_sha256_auth_and_unauthenticated_commands_get_13() {
    let set = Set::start(64, 3, with_root).await;
    let anon = set.direct(&set.hosts[0], "").await;
    expect_code(
        anon.database("admin")
            .run_command(doc! {"replSetGetStatus": 1})
            .await,
        13,
    )
    .await;
    anon.database("admin")
        .run_command(doc! {"ping": 1})
        .await
        .expect("ping needs no auth");

    let auth = |host: String, user: &'static str, pw: &'static str, mech: &'static str| {
        let set = &set;
        async move { set.direct_auth(&host, user, pw, mech).await }
    };
    let root = auth(set.hosts[0].clone(), "root", "s3cret", "SCRAM-SHA-256").await;
    root.database("admin")
        .run_command(doc! {"replSetInitiate": set.config(&set.hosts)})
        .await
        .expect("initiate as root");
    let primary = set.wait_primary(None).await;

    let bad = auth(primary.clone(), "root", "wrong", "SCRAM-SHA-256").await;
    let e = bad
        .database("admin")
        .run_command(doc! {"ping": 1})
        .await
        .expect_err("bad password");
    assert!(
        matches!(
            e.kind.as_ref(),
            mongodb::error::ErrorKind::Authentication { .. }
        ),
        "{e}"
    );

    let proot = auth(primary.clone(), "root", "s3cret", "SCRAM-SHA-256").await;
    proot
        .database("admin")
        .run_command(doc! {"createUser": "app", "pwd": "apppw", "roles": ["readWrite"]})
        .await
        .expect("createUser");
    let info = proot
        .database("admin")
        .run_command(doc! {"usersInfo": "app"})
        .await
        .unwrap();
    assert_eq!(info.get_array("users").unwrap().len(), 1);
    // Users replicate: every member authenticates the new user, with both mechanisms.
    for (i, h) in set.hosts.iter().enumerate() {
        let mech = if i % 2 == 0 {
            "SCRAM-SHA-1"
        } else {
            "SCRAM-SHA-256"
        };
        wait_until("user replicated", || async {
            auth(h.clone(), "app", "apppw", mech)
                .await
                .database("admin")
                .run_command(doc! {"ping": 1})
                .await
                .is_ok()
        })
        .await;
    }
    proot
        .database("admin")
        .run_command(doc! {"dropUser": "app"})
        .await
        .expect("dropUser");
    expect_code(
        proot
            .database("admin")
            .run_command(doc! {"dropUser": "app"})
            .await,
        11,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mismatched_keyfile_members_cannot_talk() {
    let set = Set::start(65, 2, |_| {}).await;
    let mut odd = set.specs[1].clone();
    odd.listen = "127.65.0.3:27017".parse().unwrap();
    odd.keyfile = Some("b3RoZXJrZXk=".into());
    set.net
        .start_member(odd, mongod_sim::Volume::new())
        .await
        .unwrap();
    let mut hosts = set.hosts.clone();
    hosts.push("127.65.0.3:27017".into());
    let c = set.direct(&set.hosts[0], "").await;
    expect_code(
        c.database("admin")
            .run_command(doc! {"replSetInitiate": set.config(&hosts)})
            .await,
        74,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn member_recognises_alias_as_self_and_reports_it_as_me() {
    let set = Set::start(66, 3, |_| {}).await;
    let aliases: Vec<String> = (1..=3).map(|i| format!("127.66.10.{i}:30001")).collect();
    for (h, a) in set.hosts.iter().zip(&aliases) {
        set.net.add_alias(h, a);
    }
    let c = set.direct(&set.hosts[1], "").await;
    c.database("admin")
        .run_command(doc! {"replSetInitiate": set.config(&aliases)})
        .await
        .expect("initiate with aliases");
    set.wait_primary(None).await;
    wait_until("all members report their alias", || async {
        let mut ok = true;
        for (h, a) in set.hosts.iter().zip(&aliases) {
            let hello = set
                .direct(h, "")
                .await
                .database("admin")
                .run_command(doc! {"hello": 1})
                .await
                .unwrap();
            ok &= hello.get_str("me").ok() == Some(a.as_str());
        }
        ok
    })
    .await;
}

/// A member reached through a NodePort whose port changes (its Service
/// recreated): the old alias goes, a new one comes, and a reconfig gives its
/// entry the new host under the same `_id`. mongod accepts that as no voting
/// change, does not flag the member `newlyAdded`, and the member answers with
/// the new host as `me`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voter_readdressed_under_its_id_is_no_voting_change_and_not_newly_added() {
    let set = Set::start(89, 3, |_| {}).await;
    let aliases: Vec<String> = (1..=3).map(|i| format!("127.89.10.{i}:30001")).collect();
    for (h, a) in set.hosts.iter().zip(&aliases) {
        set.net.add_alias(h, a);
    }
    let c = set.direct(&set.hosts[0], "").await;
    c.database("admin")
        .run_command(doc! {"replSetInitiate": set.config(&aliases)})
        .await
        .expect("initiate with aliases");
    let primary = set.wait_primary(None).await;
    let moved = set.hosts.iter().position(|h| h != &primary).unwrap();
    let new_alias = format!("127.89.10.{}:30002", moved + 1);
    set.net.remove_alias(&aliases[moved]);
    set.net.add_alias(&set.hosts[moved], &new_alias);

    let admin = set.direct(&primary, "").await.database("admin");
    let mut config = admin
        .run_command(doc! {"replSetGetConfig": 1})
        .await
        .unwrap()
        .get_document("config")
        .unwrap()
        .clone();
    let version = config.get_i32("version").unwrap();
    config.insert("version", version + 1);
    let mut members = config.get_array("members").unwrap().clone();
    members[moved]
        .as_document_mut()
        .unwrap()
        .insert("host", new_alias.clone());
    config.insert("members", members);
    admin
        .run_command(doc! {"replSetReconfig": config})
        .await
        .expect("a host change under the same _id is accepted");

    // Not newlyAdded: hello lists it under `hosts` (a newlyAdded member has
    // priority 0 and is listed under `passives`).
    let hello = admin.run_command(doc! {"hello": 1}).await.unwrap();
    let hosts = hello.get_array("hosts").unwrap();
    assert!(
        hosts.contains(&bson::Bson::String(new_alias.clone())),
        "{hello}"
    );
    wait_until(
        "the readdressed member answers with its new host",
        || async {
            let hello = set
                .direct(&set.hosts[moved], "")
                .await
                .database("admin")
                .run_command(doc! {"hello": 1})
                .await
                .unwrap();
            hello.get_str("me").ok() == Some(new_alias.as_str())
                && hello.get_bool("secondary") == Ok(true)
        },
    )
    .await;
}

/// `replSetGetConfig`'s `commitmentStatus` on `admin` (false on any error).
async fn commitment_status(admin: &mongodb::Database) -> bool {
    admin
        .run_command(doc! {"replSetGetConfig": 1, "commitmentStatus": true})
        .await
        .map(|r| r.get_bool("commitmentStatus").unwrap_or(false))
        .unwrap_or(false)
}

/// The config `admin`'s member holds.
/// Initiates `set` with a long election timeout (the primary stays in place
/// while its peers are cut off or lag) and steps its first member up; a direct
/// client to it.
async fn first_member_primary_with_slow_elections(set: &Set) -> mongodb::Client {
    let mut cfg = set.config(&set.hosts);
    cfg.insert(
        "settings",
        doc! {"electionTimeoutMillis": 20_000_i64, "heartbeatIntervalMillis": 200_i64},
    );
    let client = set.direct(&set.hosts[0], "").await;
    let admin = client.database("admin");
    admin
        .run_command(doc! {"replSetInitiate": cfg})
        .await
        .unwrap();
    wait_until("members SECONDARY", || async {
        set.hosts
            .iter()
            .all(|h| set.state(h) == Some(MemberState::Secondary))
    })
    .await;
    admin
        .run_command(doc! {"replSetStepUp": 1})
        .await
        .expect("replSetStepUp");
    client
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconfig_waits_for_current_config_commit_and_reports_308_after_max_time() {
    let set = Set::start(68, 3, |_| {}).await;
    let h1 = first_member_primary_with_slow_elections(&set).await;
    let admin = h1.database("admin");
    assert_eq!(set.primary().as_deref(), Some(set.hosts[0].as_str()));
    expect_code(admin.run_command(doc! {"replSetFreeze": 10}).await, 95).await;
    let committed = || commitment_status(&admin);
    wait_until("config committed", committed).await;

    set.net.isolate(&set.hosts[1]);
    set.net.isolate(&set.hosts[2]);
    let current = || current_config(&admin);
    let mut forced = current().await;
    forced.insert("version", forced.get_i32("version").unwrap() + 1);
    admin
        .run_command(doc! {"replSetReconfig": forced, "force": true})
        .await
        .expect("force reconfig");
    let forced_version = current().await.get_i32("version").unwrap();
    assert!(
        forced_version > 10_000,
        "force adds 10000+: {forced_version}"
    );

    let mut next = current().await;
    next.insert("version", forced_version + 1);
    let started = Instant::now();
    expect_code(
        admin
            .run_command(doc! {"replSetReconfig": next.clone(), "maxTimeMS": 500})
            .await,
        308,
    )
    .await;
    assert!(started.elapsed() >= Duration::from_millis(450));

    // Once the peers are back the forced config commits and the reconfig goes through.
    set.net.heal_all();
    admin
        .run_command(doc! {"replSetReconfig": next})
        .await
        .expect("reconfig after heal");
    assert_eq!(
        current().await.get_i32("version").unwrap(),
        forced_version + 1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn localhost_exception_allows_initiate_and_the_first_user_only() {
    let set = Set::start(69, 1, |spec| spec.keyfile = Some("bG9jYWxob3N0a2V5".into())).await;
    let anon = set.direct(&set.hosts[0], "").await;
    let admin = anon.database("admin");
    admin
        .run_command(doc! {"replSetInitiate": set.config(&set.hosts)})
        .await
        .expect("initiate under the localhost exception");
    expect_code(admin.run_command(doc! {"replSetGetConfig": 1}).await, 13).await;
    set.wait_primary(None).await;
    admin
        .run_command(doc! {"replSetGetStatus": 1})
        .await
        .expect("status under the localhost exception");
    admin
        .run_command(doc! {"createUser": "admin", "pwd": "pw", "roles": ["root"]})
        .await
        .expect("first user");
    expect_code(admin.run_command(doc! {"replSetGetStatus": 1}).await, 13).await;
    let authed = set
        .direct_auth(&set.hosts[0], "admin", "pw", "SCRAM-SHA-256")
        .await;
    authed
        .database("admin")
        .run_command(doc! {"replSetGetConfig": 1})
        .await
        .expect("authenticated");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_localhost_exception_for_clients_on_another_host() {
    let set = Set::start(70, 1, |spec| {
        spec.keyfile = Some("bG9jYWxob3N0a2V5".into());
        spec.clients_on_own_host = false;
    })
    .await;
    let anon = set.direct(&set.hosts[0], "").await;
    let admin = anon.database("admin");
    for refused in [
        doc! {"replSetInitiate": set.config(&set.hosts)},
        doc! {"replSetGetStatus": 1},
        doc! {"createUser": "admin", "pwd": "pw", "roles": ["root"]},
    ] {
        expect_code(admin.run_command(refused).await, 13).await;
    }
    for allowed in [doc! {"hello": 1}, doc! {"buildInfo": 1}, doc! {"ping": 1}] {
        admin.run_command(allowed).await.expect("needs no user");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initiate_without_version_and_count_documents_as_mongod() {
    let set = Set::start(60, 1, |_| {}).await;
    let direct = set.direct(&set.hosts[0], "").await;
    let admin = direct.database("admin");
    // The form of MongoDB's tutorials and rs.initiate(config): mongod takes it as version 1.
    let mut cfg = set.config(&set.hosts);
    cfg.remove("version");
    let mut two = cfg.clone();
    two.insert("version", 2);
    expect_code(admin.run_command(doc! {"replSetInitiate": two}).await, 93).await;
    admin
        .run_command(doc! {"replSetInitiate": cfg})
        .await
        .expect("initiate without a version");
    set.wait_primary(None).await;
    let got = admin
        .run_command(doc! {"replSetGetConfig": 1})
        .await
        .unwrap();
    assert_eq!(
        got.get_document("config").unwrap().get_i32("version"),
        Ok(1)
    );

    let coll = direct.database("app").collection::<Document>("items");
    let docs: Vec<Document> = (0..10)
        .map(|i| doc! {"_id": i, "even": i % 2 == 0})
        .collect();
    coll.insert_many(docs).await.unwrap();
    assert_eq!(coll.count_documents(doc! {}).await.unwrap(), 10);
    assert_eq!(coll.count_documents(doc! {"even": true}).await.unwrap(), 5);
    assert_eq!(
        coll.count_documents(doc! {})
            .skip(3)
            .limit(4)
            .await
            .unwrap(),
        4
    );
    assert_eq!(coll.count_documents(doc! {"_id": 99}).await.unwrap(), 0);
    let grouped = collect(
        coll.aggregate(vec![
            doc! {"$match": {"even": false}},
            doc! {"$group": {"_id": "$even", "n": {"$sum": 1}, "ids": {"$sum": "$_id"}}},
        ])
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(grouped, vec![doc! {"_id": false, "n": 5, "ids": 25}]);

    let app = direct.database("app");
    let agg =
        |pipeline: Vec<Document>| doc! {"aggregate": "items", "pipeline": pipeline, "cursor": {}};
    for (pipeline, code) in [
        (vec![doc! {"$frobnicate": {}}], 40324),
        (vec![doc! {"$match": {}, "$limit": 1}], 40323),
        (vec![doc! {"$limit": 0}], 15958),
        (vec![doc! {"$limit": "x"}], 5107201),
        (vec![doc! {"$skip": -1}], 5107200),
        (vec![doc! {"$match": 1}], 15959),
        (vec![doc! {"$group": {"n": {"$sum": 1}}}], 15955),
        (vec![doc! {"$group": {"_id": 1, "n": {"$frob": 1}}}], 15952),
    ] {
        expect_code(app.run_command(agg(pipeline)).await, code).await;
    }
    expect_code(
        app.run_command(doc! {"aggregate": "items", "pipeline": []})
            .await,
        9,
    )
    .await;
    expect_code(
        app.run_command(doc! {"aggregate": 1, "pipeline": [{"$match": {}}], "cursor": {}})
            .await,
        73,
    )
    .await;
    // Query operators are not modelled: refused, never compared as values.
    expect_code(
        app.run_command(agg(vec![doc! {"$match": {"_id": {"$gt": 1}}}]))
            .await,
        2,
    )
    .await;
}

/// mongod's "oplog commitment" (topology_coordinator's
/// getConfigOplogCommitmentOpTime): after a reconfig the primary may not
/// reconfig again (308, and `commitmentStatus` false) until what was committed
/// under the previous config is on a majority of the current one. Without it, a
/// removal then an addition can leave a committed write on a minority of the
/// new voters, and an election by the others loses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconfig_waits_until_writes_committed_in_the_previous_config_are_committed_in_this_one()
{
    let set = Set::start(75, 5, |_| {}).await;
    let h0 = first_member_primary_with_slow_elections(&set).await;
    let admin = h0.database("admin");
    let committed = || commitment_status(&admin);
    wait_until("config committed", committed).await;

    // h1 and h2 stop replicating: a majority write lands on h0, h3, h4.
    set.net.set_lag(&set.hosts[1], Duration::from_secs(600));
    set.net.set_lag(&set.hosts[2], Duration::from_secs(600));
    h0.database("app")
        .collection::<Document>("c")
        .insert_one(doc! {"_id": 1})
        .write_concern(WriteConcern::majority())
        .await
        .expect("majority write on h0, h3, h4");

    // Remove h4: in the new config the write is on h0 and h3, two of four voters.
    let current = || current_config(&admin);
    let mut without_h4 = current().await;
    let members: Vec<Bson> = without_h4
        .get_array("members")
        .unwrap()
        .iter()
        .filter(|m| m.as_document().unwrap().get_str("host").unwrap() != set.hosts[4])
        .cloned()
        .collect();
    without_h4.insert("members", members);
    without_h4.insert("version", without_h4.get_i32("version").unwrap() + 1);
    admin
        .run_command(doc! {"replSetReconfig": without_h4})
        .await
        .expect("remove h4");

    // Not committed in this config: no further reconfig, commitmentStatus false.
    assert!(!committed().await, "the write is on 2 of 4 voters");
    let mut next = current().await;
    next.insert("version", next.get_i32("version").unwrap() + 1);
    expect_code(
        admin
            .run_command(doc! {"replSetReconfig": next.clone(), "maxTimeMS": 500})
            .await,
        308,
    )
    .await;

    // h1 catches up: the write is on three of four, the next reconfig goes through.
    set.net.set_lag(&set.hosts[1], Duration::ZERO);
    wait_until("committed in the new config", committed).await;
    admin
        .run_command(doc! {"replSetReconfig": next})
        .await
        .expect("reconfig once committed in this config");
}

/// The benchmark counters: each command a member receives, by client appName
/// (the driver's handshake) and command name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_are_counted_by_member_client_and_command() {
    let set = Set::start(76, 1, |_| {}).await;
    let host = set.hosts[0].clone();
    let client = set.direct(&host, "&appName=bench-counter").await;
    for _ in 0..3 {
        client
            .database("admin")
            .run_command(doc! {"ping": 1})
            .await
            .expect("ping");
    }
    let count = |command: &str| set.commands_received(&host, "bench-counter", command);
    assert_eq!(count("ping"), 3);
    assert!(
        count("hello") + count("isMaster") >= 1,
        "{:?}",
        set.net.command_counts()
    );
}

/// SCRAM rides on the handshake (`speculativeAuthenticate`, 4.4+): the
/// driver's first saslStart is answered in its `isMaster`, so a connection
/// authenticates with one saslContinue. A wrong password still fails; an
/// unknown user's speculative start is dropped and the driver's own
/// saslStart is refused. A malformed field fails the handshake itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scram_rides_on_the_handshake_and_a_malformed_speculation_fails_it() {
    let set = Set::start(77, 1, with_root).await;
    let host = set.hosts[0].clone();
    let connect = |user: &str, password: &str, app: &str| {
        let uri = format!(
            "mongodb://{user}:{password}@{host}/?directConnection=true&authSource=admin\
             &authMechanism=SCRAM-SHA-256&serverSelectionTimeoutMS=10000&appName={app}"
        );
        async move { mongodb::Client::with_uri_str(uri).await.unwrap() }
    };
    let count = |app: &str, command: &str| set.commands_received(&host, app, command);
    let ping = doc! {"ping": 1};

    let root = connect("root", "s3cret", "speculative").await;
    root.database("admin")
        .run_command(ping.clone())
        .await
        .expect("authenticated");
    assert_eq!(count("speculative", "saslStart"), 0);
    assert_eq!(count("speculative", "saslContinue"), 1);

    let wrong = connect("root", "wrong", "wrong-password").await;
    let refused = wrong.database("admin").run_command(ping.clone()).await;
    let refused = refused.expect_err("a wrong password");
    assert!(
        matches!(
            refused.kind.as_ref(),
            mongodb::error::ErrorKind::Authentication { .. }
        ),
        "{refused}"
    );
    assert_eq!(count("wrong-password", "saslStart"), 0);

    let stranger = connect("nobody", "s3cret", "unknown-user").await;
    let refused = stranger.database("admin").run_command(ping).await;
    refused.expect_err("an unknown user");
    assert!(count("unknown-user", "saslStart") >= 1);

    let anon = set.direct(&host, "").await;
    let admin = anon.database("admin");
    let client_first = bson::Binary {
        subtype: bson::spec::BinarySubtype::Generic,
        bytes: b"n,,n=root,r=fyko+d2lbbFgONRv9qkxdawL".to_vec(),
    };
    let start =
        doc! {"saslStart": 1, "mechanism": "SCRAM-SHA-256", "payload": client_first, "db": "admin"};
    let hello = admin
        .run_command(doc! {"hello": 1, "speculativeAuthenticate": start.clone()})
        .await
        .expect("hello with a speculative start");
    let answer = hello
        .get_document("speculativeAuthenticate")
        .expect("answered");
    assert_eq!(answer.get_i32("conversationId"), Ok(1));
    assert_eq!(answer.get_bool("done"), Ok(false));
    let mut without_db = start.clone();
    without_db.remove("db");
    let hello = admin
        .run_command(doc! {"hello": 1, "speculativeAuthenticate": without_db})
        .await
        .expect("hello with a start without db");
    assert!(!hello.contains_key("speculativeAuthenticate"), "{hello}");
    for (speculative, code) in [
        (Bson::Int32(1), 2),
        (Bson::Document(doc! {}), 2),
        (Bson::Document(doc! {"saslContinue": 1}), 51769),
    ] {
        expect_code(
            admin
                .run_command(doc! {"hello": 1, "speculativeAuthenticate": speculative})
                .await,
            code,
        )
        .await;
    }
}
