//! mongod 5.0+'s reconfig rules about write concern and PSA sets, through the
//! Rust driver: `setDefaultRWConcern` / `getDefaultRWConcern`, the implicit
//! default write concern a reconfig may not change (force included, and the
//! primary's own `newlyAdded` removal), the PSA re-add rule, and what a
//! production client sees of `newlyAdded` members. Addresses 127.110.*.

mod common;

use bson::{doc, Bson, Document};
use common::{expect_code, wait_until, Set};
use mongod_sim::{MemberSpec, ServerVersion};
use std::time::Duration;

fn version(s: &str) -> ServerVersion {
    s.parse().unwrap()
}

/// `{w: "majority", wtimeout: 0}` reported as the default, from `source`.
fn assert_write_default(reply: &Document, source: &str) {
    let expected = doc! {"w": "majority", "wtimeout": 0};
    assert_eq!(
        reply.get_document("defaultWriteConcern"),
        Ok(&expected),
        "{reply}"
    );
    assert_eq!(
        reply.get_str("defaultWriteConcernSource"),
        Ok(source),
        "{reply}"
    );
}

/// The config the primary holds, as a replSetReconfig argument (version + 1).
async fn next_config(set: &Set, primary: &str) -> Document {
    let mut config = set.replset_config(primary).await;
    let v = config.get_i32("version").unwrap();
    config.insert("version", v + 1);
    config
}

fn with_member(mut config: Document, member: Document) -> Document {
    let mut members = config.get_array("members").unwrap().clone();
    members.push(Bson::Document(member));
    config.insert("members", members);
    config
}

/// Whether the primary's config still flags member `id` newlyAdded.
fn newly_added(set: &Set, primary: &str, id: i64) -> bool {
    let config = set.net.member(primary).unwrap().config().unwrap();
    config.members.iter().any(|m| m.id == id && m.newly_added)
}

/// Initiates members `data` (data-bearing) plus `arbiters` and waits for a primary.
async fn initiate(set: &Set, data: &[usize], arbiters: &[usize]) -> String {
    let mut members: Vec<Document> = data
        .iter()
        .map(|&i| doc! {"_id": i as i32, "host": set.hosts[i].clone()})
        .collect();
    members.extend(
        arbiters
            .iter()
            .map(|&i| doc! {"_id": i as i32, "host": set.hosts[i].clone(), "arbiterOnly": true}),
    );
    let mut config = set.config(&[]);
    config.insert("members", members);
    set.direct(&set.hosts[data[0]], "")
        .await
        .database("admin")
        .run_command(doc! {"replSetInitiate": config})
        .await
        .expect("initiate");
    set.wait_primary(None).await
}

async fn add_and_wait_secondary(set: &Set, primary: &str, member: Document) {
    let host = member.get_str("host").unwrap().to_string();
    let config = with_member(next_config(set, primary).await, member);
    set.direct(primary, "")
        .await
        .database("admin")
        .run_command(doc! {"replSetReconfig": config})
        .await
        .expect("add member");
    wait_until("the new member SECONDARY", || async {
        set.state(&host) == Some(mongod_sim::MemberState::Secondary)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reconfig_changing_the_implicit_default_is_refused_until_one_is_set() {
    let set = Set::start_at("127.110.1", 3, |_| {}).await;
    let primary = initiate(&set, &[0, 1], &[]).await;
    let admin = set.direct(&primary, "").await.database("admin");

    // Two data members, no arbiter: {w: "majority"}, implicit.
    let defaults = admin
        .run_command(doc! {"getDefaultRWConcern": 1})
        .await
        .unwrap();
    assert_write_default(&defaults, "implicit");
    assert!(!defaults.contains_key("updateOpTime"), "{defaults}");
    assert_eq!(defaults.get_str("defaultReadConcernSource"), Ok("implicit"));

    // An arbiter makes it {w: 1}: refused, forced or not.
    let with_arbiter = with_member(
        next_config(&set, &primary).await,
        doc! {"_id": 2, "host": set.hosts[2].clone(), "arbiterOnly": true},
    );
    let e = expect_code(
        admin
            .run_command(doc! {"replSetReconfig": with_arbiter.clone()})
            .await,
        103,
    )
    .await;
    assert!(
        e.to_string()
            .contains("would change the implicit default write concern"),
        "{e}"
    );
    expect_code(
        admin
            .run_command(doc! {"replSetReconfig": with_arbiter.clone(), "force": true})
            .await,
        103,
    )
    .await;

    // setDefaultRWConcern: its checks, then the reconfig passes.
    let secondary = set.hosts[..2].iter().find(|h| **h != primary).unwrap();
    let on_secondary = set.direct(secondary, "").await.database("admin");
    expect_code(
        on_secondary
            .run_command(doc! {"setDefaultRWConcern": 1, "defaultWriteConcern": {"w": 1}})
            .await,
        10107,
    )
    .await;
    let refused = [
        (doc! {}, 2),
        (doc! {"defaultWriteConcern": {"w": 0}}, 2),
        (doc! {"defaultWriteConcern": {"w": "dc"}}, 79),
    ];
    for (args, code) in refused {
        let mut command = doc! {"setDefaultRWConcern": 1};
        command.extend(args);
        expect_code(admin.run_command(command).await, code).await;
    }
    let set_reply = admin
        .run_command(doc! {"setDefaultRWConcern": 1, "defaultWriteConcern": {"w": "majority"}})
        .await
        .unwrap();
    assert_write_default(&set_reply, "global");
    for field in ["updateOpTime", "updateWallClockTime"] {
        assert!(set_reply.contains_key(field), "{set_reply}");
    }
    expect_code(
        admin
            .run_command(doc! {"setDefaultRWConcern": 1, "defaultWriteConcern": {}})
            .await,
        20,
    )
    .await;
    admin
        .run_command(doc! {"replSetReconfig": with_arbiter})
        .await
        .expect("accepted with a cluster-wide write concern");

    // Replicated and durable: the secondary knows it, also after a restart.
    let global = |d: &Document| d.get_str("defaultWriteConcernSource").ok() == Some("global");
    let reply = on_secondary
        .run_command(doc! {"getDefaultRWConcern": 1})
        .await
        .unwrap();
    assert!(global(&reply), "{reply}");
    set.net.stop_member_and_wait(secondary).await;
    set.restart(secondary).await;
    wait_until("the restarted member knows the default", || async {
        let c = set.direct(secondary, "").await.database("admin");
        c.run_command(doc! {"getDefaultRWConcern": 1})
            .await
            .is_ok_and(|d| global(&d))
    })
    .await;

    // A production mongod refuses the test-only replSetGetConfig option.
    for include in [true, false] {
        expect_code(
            admin
                .run_command(doc! {"replSetGetConfig": 1, "$_internalIncludeNewlyAdded": include})
                .await,
            72,
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mongod_4_4_has_neither_rule() {
    let set = Set::start_at("127.110.2", 3, |s: &mut MemberSpec| {
        s.version = version("4.4.29")
    })
    .await;
    let primary = initiate(&set, &[0], &[1]).await;
    let admin = set.direct(&primary, "").await.database("admin");
    let defaults = admin
        .run_command(doc! {"getDefaultRWConcern": 1})
        .await
        .unwrap();
    assert!(!defaults.contains_key("defaultWriteConcern"), "{defaults}");
    assert!(
        !defaults.contains_key("defaultWriteConcernSource"),
        "{defaults}"
    );
    // PSA re-add in one step, and a flip of what 5.0 would call the default.
    add_and_wait_secondary(
        &set,
        &primary,
        doc! {"_id": 2, "host": set.hosts[2].clone()},
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_5_0_set_at_fcv_4_4_has_no_implicit_default_rule() {
    let set = Set::start_at("127.110.5", 3, |s: &mut MemberSpec| {
        s.version = version("5.0.30")
    })
    .await;
    let primary = initiate(&set, &[0, 1], &[]).await;
    let admin = set.direct(&primary, "").await.database("admin");
    admin
        .run_command(doc! {"setFeatureCompatibilityVersion": "4.4"})
        .await
        .expect("5.0 downgrades its FCV to 4.4");
    let defaults = admin
        .run_command(doc! {"getDefaultRWConcern": 1})
        .await
        .unwrap();
    assert!(!defaults.contains_key("defaultWriteConcern"), "{defaults}");
    assert_eq!(
        defaults.get_str("defaultWriteConcernSource"),
        Ok("implicit")
    );
    let with_arbiter = with_member(
        next_config(&set, &primary).await,
        doc! {"_id": 2, "host": set.hosts[2].clone(), "arbiterOnly": true},
    );
    admin
        .run_command(doc! {"replSetReconfig": with_arbiter})
        .await
        .expect("no implicit-default rule below FCV 5.0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writes_without_a_write_concern_wait_for_the_default() {
    let set = Set::start_at("127.110.6", 3, |_| {}).await;
    // Two data members and an arbiter: the implicit default is {w: 1}.
    let primary = initiate(&set, &[0, 1], &[2]).await;
    let secondary = set.hosts[..2].iter().find(|h| **h != primary).unwrap();
    wait_until("the secondary SECONDARY", || async {
        set.state(secondary) == Some(mongod_sim::MemberState::Secondary)
    })
    .await;
    set.net.isolate(secondary);
    let test = set.direct(&primary, "").await.database("test");
    let insert =
        |n: i32| doc! {"insert": "c", "documents": [{"_id": n}], "writeConcern": {"wtimeout": 300}};
    let reply = test.run_command(insert(1)).await.unwrap();
    assert!(!reply.contains_key("writeConcernError"), "{reply}");

    // A cluster-wide {w: "majority"} (set with w:1: the secondary is cut off).
    set.direct(&primary, "")
        .await
        .database("admin")
        .run_command(doc! {"setDefaultRWConcern": 1, "defaultWriteConcern": {"w": "majority"}, "writeConcern": {"w": 1}})
        .await
        .unwrap();
    let reply = test.run_command(insert(2)).await.unwrap();
    let error = reply
        .get_document("writeConcernError")
        .expect("waits for a majority");
    assert_eq!(error.get_i32("code"), Ok(64), "{reply}");
    set.net.heal(secondary);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_psa_secondary_is_readded_with_its_vote_first_then_its_priority() {
    let set = Set::start_at("127.110.3", 3, |_| {}).await;
    let primary = initiate(&set, &[0], &[1]).await;
    let admin = set.direct(&primary, "").await.database("admin");
    let data = doc! {"_id": 2, "host": set.hosts[2].clone()};
    let e = expect_code(
        admin
            .run_command(doc! {"replSetReconfig": with_member(next_config(&set, &primary).await, data.clone())})
            .await,
        103,
    )
    .await;
    assert!(e.to_string().contains("PSA topology"), "{e}");

    // rs.reconfigForPSASet: votes with priority 0, then the priority.
    let mut step1 = data.clone();
    step1.insert("priority", 0);
    add_and_wait_secondary(&set, &primary, step1).await;
    wait_until("newlyAdded cleared", || async {
        !newly_added(&set, &primary, 2)
    })
    .await;
    let mut config = next_config(&set, &primary).await;
    let mut members = config.get_array("members").unwrap().clone();
    for m in members.iter_mut().filter_map(|m| m.as_document_mut()) {
        if m.get_i32("_id") == Ok(2) {
            m.insert("priority", 1.0);
        }
    }
    config.insert("members", members);
    admin
        .run_command(doc! {"replSetReconfig": config})
        .await
        .expect("the priority in a second reconfig");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_newly_added_member_stays_so_while_its_vote_would_change_the_default() {
    let set = Set::start_at("127.110.4", 6, |_| {}).await;
    // Two data members and an arbiter: {w: 1}. A third data member keeps it
    // ({3 data + arbiter}: 3 is not more than a majority of 4), a fourth makes it
    // {w: "majority"}, so its newlyAdded removal is refused.
    let primary = initiate(&set, &[0, 1], &[2]).await;
    add_and_wait_secondary(
        &set,
        &primary,
        doc! {"_id": 3, "host": set.hosts[3].clone()},
    )
    .await;
    wait_until("member 3 votes", || async {
        !newly_added(&set, &primary, 3)
    })
    .await;
    add_and_wait_secondary(
        &set,
        &primary,
        doc! {"_id": 4, "host": set.hosts[4].clone()},
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        newly_added(&set, &primary, 4),
        "the removal would flip the default"
    );

    // What a production client sees: priority 0, so a passive in hello, while
    // replSetGetConfig shows the configured votes and priority.
    let admin = set.direct(&primary, "").await.database("admin");
    let hello = admin.run_command(doc! {"hello": 1}).await.unwrap();
    let host4 = Bson::String(set.hosts[4].clone());
    assert!(
        hello.get_array("passives").unwrap().contains(&host4),
        "{hello}"
    );
    assert!(
        !hello.get_array("hosts").unwrap().contains(&host4),
        "{hello}"
    );
    let config = set.replset_config(&primary).await;
    let entry = config
        .get_array("members")
        .unwrap()
        .iter()
        .filter_map(|m| m.as_document())
        .find(|m| m.get_i32("_id") == Ok(4))
        .unwrap()
        .clone();
    assert_eq!(entry.get_i32("votes"), Ok(1), "{entry}");
    assert!(!entry.contains_key("newlyAdded"), "{entry}");

    admin
        .run_command(doc! {"setDefaultRWConcern": 1, "defaultWriteConcern": {"w": "majority"}})
        .await
        .unwrap();
    wait_until("member 4 votes", || async {
        !newly_added(&set, &primary, 4)
    })
    .await;

    // From 5.3 a second arbiter needs allowMultipleArbiters on every member.
    let second_arbiter = with_member(
        next_config(&set, &primary).await,
        doc! {"_id": 5, "host": set.hosts[5].clone(), "arbiterOnly": true},
    );
    let e = expect_code(
        admin
            .run_command(doc! {"replSetReconfig": second_arbiter})
            .await,
        103,
    )
    .await;
    assert!(e.to_string().contains("allowMultipleArbiters"), "{e}");
}
