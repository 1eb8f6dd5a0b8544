//! Replica-set model behaviour through the library API: awaitable hello, site
//! cuts, rollback of unreplicated writes, durable state across restarts, priority
//! takeover; and wire-protocol framing with raw sockets.

mod common;

use bson::{doc, Document};
use common::*;
use mongod_sim::{DurableState, MemberState, Volume};
use mongodb::options::{Acknowledgment, WriteConcern};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn awaitable_hello_holds_until_topology_change_or_timeout() {
    let set = Set::start(81, 1, |_| {}).await;
    let c = set.direct(&set.hosts[0], "").await;
    let admin = c.database("admin");
    let tv = topology_version(&admin).await;

    let start = Instant::now();
    let r = admin
        .run_command(doc! {"hello": 1, "topologyVersion": tv.clone(), "maxAwaitTimeMS": 400_i64})
        .await
        .unwrap();
    assert!(
        start.elapsed() >= Duration::from_millis(350),
        "hello returned after {:?}",
        start.elapsed()
    );
    assert_eq!(r.get_document("topologyVersion").unwrap(), &tv);

    // A stale counter answers at once.
    let stale = doc! {"processId": tv.get_object_id("processId").unwrap(), "counter": -1_i64};
    let start = Instant::now();
    admin
        .run_command(doc! {"hello": 1, "topologyVersion": stale, "maxAwaitTimeMS": 10_000_i64})
        .await
        .unwrap();
    assert!(start.elapsed() < Duration::from_secs(5));

    // A waiting hello returns as soon as the topology changes (here: initiate).
    let waiter = {
        let admin = admin.clone();
        let tv = tv.clone();
        tokio::spawn(async move {
            let start = Instant::now();
            let r = admin
                .run_command(doc! {"hello": 1, "topologyVersion": tv, "maxAwaitTimeMS": 20_000_i64})
                .await
                .unwrap();
            (start.elapsed(), r)
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let other = set.direct(&set.hosts[0], "").await;
    other
        .database("admin")
        .run_command(doc! {"replSetInitiate": set.config(&set.hosts)})
        .await
        .unwrap();
    let (waited, r) = waiter.await.unwrap();
    assert!(waited < Duration::from_secs(10), "waited {waited:?}");
    assert!(
        r.get_document("topologyVersion")
            .unwrap()
            .get_i64("counter")
            .unwrap()
            > tv.get_i64("counter").unwrap()
    );
}

/// Topology changes that happen while no awaitable hello waits (here: initiate,
/// election, every member's role) must still leave each member holding the next
/// awaitable hello: the clients here poll, so nobody waits while the set forms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn awaitable_hello_is_held_after_topology_changes_nobody_waited_for() {
    let set = Set::start(88, 3, |_| {}).await;
    let poll = "&serverMonitoringMode=poll";
    set.initiate_via(poll).await;
    for host in &set.hosts {
        let admin = set.direct(host, poll).await.database("admin");
        let mut held = None;
        for _ in 0..3 {
            let tv = topology_version(&admin).await;
            let start = Instant::now();
            let r = admin
                .run_command(
                    doc! {"hello": 1, "topologyVersion": tv.clone(), "maxAwaitTimeMS": 400_i64},
                )
                .await
                .unwrap();
            if r.get_document("topologyVersion").unwrap() == &tv {
                held = Some(start.elapsed());
                break;
            }
        }
        let held = held.unwrap_or_else(|| panic!("{host}: topologyVersion kept changing"));
        assert!(
            held >= Duration::from_millis(350),
            "{host} answered an awaitable hello after {held:?} with an unchanged topologyVersion"
        );
    }
}

/// The member's current `topologyVersion`, from a plain hello.
async fn topology_version(admin: &mongodb::Database) -> Document {
    admin
        .run_command(doc! {"hello": 1})
        .await
        .unwrap()
        .get_document("topologyVersion")
        .unwrap()
        .clone()
}

fn op_msg(request_id: i32, flags: u32, body: &Document, checksum: bool) -> Vec<u8> {
    let mut payload = flags.to_le_bytes().to_vec();
    payload.push(0);
    body.to_writer(&mut payload).unwrap();
    if checksum {
        payload.extend_from_slice(&[0, 0, 0, 0]);
    }
    frame(request_id, 2013, &payload)
}

fn frame(request_id: i32, op: i32, payload: &[u8]) -> Vec<u8> {
    let mut out = ((16 + payload.len()) as i32).to_le_bytes().to_vec();
    out.extend_from_slice(&request_id.to_le_bytes());
    out.extend_from_slice(&0i32.to_le_bytes());
    out.extend_from_slice(&op.to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// Reads one reply: (responseTo, opcode, document).
async fn read_reply(s: &mut TcpStream) -> (i32, i32, Document) {
    let mut header = [0u8; 16];
    s.read_exact(&mut header).await.unwrap();
    let len = i32::from_le_bytes(header[0..4].try_into().unwrap()) as usize;
    let response_to = i32::from_le_bytes(header[8..12].try_into().unwrap());
    let op = i32::from_le_bytes(header[12..16].try_into().unwrap());
    let mut body = vec![0u8; len - 16];
    s.read_exact(&mut body).await.unwrap();
    let doc_start = if op == 1 { 20 } else { 5 };
    (
        response_to,
        op,
        Document::from_reader(&mut &body[doc_start..]).unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wire_protocol_op_query_handshake_checksum_sequences_more_to_come_and_garbage() {
    let set = Set::start(82, 1, |_| {}).await;
    let addr = set.hosts[0].clone();
    let mut s = TcpStream::connect(&addr).await.unwrap();

    // OP_QUERY isMaster on admin.$cmd → OP_REPLY.
    let mut q = 0i32.to_le_bytes().to_vec();
    q.extend_from_slice(b"admin.$cmd\0");
    q.extend_from_slice(&0i32.to_le_bytes());
    q.extend_from_slice(&(-1i32).to_le_bytes());
    doc! {"isMaster": 1, "client": {"application": {"name": "raw"}}}
        .to_writer(&mut q)
        .unwrap();
    s.write_all(&frame(7, 2004, &q)).await.unwrap();
    let (to, op, reply) = read_reply(&mut s).await;
    assert_eq!((to, op), (7, 1));
    assert!(!reply.get_bool("ismaster").unwrap());
    assert!(reply.get("compression").is_none());

    // Checksum flag: the trailing CRC is ignored.
    s.write_all(&op_msg(8, 1, &doc! {"ping": 1, "$db": "admin"}, true))
        .await
        .unwrap();
    let (to, op, reply) = read_reply(&mut s).await;
    assert_eq!((to, op), (8, 2013));
    assert_eq!(reply.get_f64("ok").unwrap(), 1.0);

    // moreToCome: no reply to the first message.
    s.write_all(&op_msg(9, 2, &doc! {"ping": 1, "$db": "admin"}, false))
        .await
        .unwrap();
    s.write_all(&op_msg(10, 0, &doc! {"hello": 1, "$db": "admin"}, false))
        .await
        .unwrap();
    let (to, _, reply) = read_reply(&mut s).await;
    assert_eq!(to, 10);
    assert!(reply.contains_key("topologyVersion"));

    // A kind-1 document sequence is merged into the body.
    let mut payload = 0u32.to_le_bytes().to_vec();
    payload.push(0);
    doc! {"usersInfo": 1, "$db": "admin"}
        .to_writer(&mut payload)
        .unwrap();
    let mut seq = b"extra\0".to_vec();
    doc! {"a": 1}.to_writer(&mut seq).unwrap();
    payload.push(1);
    payload.extend_from_slice(&((seq.len() + 4) as i32).to_le_bytes());
    payload.extend_from_slice(&seq);
    s.write_all(&frame(11, 2013, &payload)).await.unwrap();
    let (to, _, reply) = read_reply(&mut s).await;
    assert_eq!(to, 11);
    assert_eq!(reply.get_f64("ok").unwrap(), 1.0, "{reply}");

    // Garbage closes that connection only.
    let mut g = TcpStream::connect(&addr).await.unwrap();
    g.write_all(&[0xff; 64]).await.unwrap();
    let mut buf = [0u8; 16];
    let n = tokio::time::timeout(Duration::from_secs(10), g.read(&mut buf))
        .await
        .unwrap()
        .unwrap_or(0);
    assert_eq!(n, 0, "server should close a connection that sends garbage");
    let mut g2 = TcpStream::connect(&addr).await.unwrap();
    g2.write_all(&frame(3, 2013, &[0, 0, 0, 0, 0, 200, 0, 0, 0]))
        .await
        .unwrap();
    let n = tokio::time::timeout(Duration::from_secs(10), g2.read(&mut buf))
        .await
        .unwrap()
        .unwrap_or(0);
    assert_eq!(n, 0);
    s.write_all(&op_msg(12, 0, &doc! {"ping": 1, "$db": "admin"}, false))
        .await
        .unwrap();
    assert_eq!(read_reply(&mut s).await.0, 12);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn site_cut_primary_steps_down_and_the_majority_side_elects() {
    let set = Set::start(83, 3, |_| {}).await;
    for (i, h) in set.hosts.iter().enumerate() {
        set.net.set_site(h, &format!("site-{i}"));
    }
    let old = set.initiate().await;
    let site = format!("site-{}", set.hosts.iter().position(|h| *h == old).unwrap());
    set.net.cut_site(&site);
    let new = set.wait_primary(Some(&old)).await;
    wait_until("cut-off primary steps down", || async {
        set.state(&old) == Some(MemberState::Secondary)
    })
    .await;
    assert_ne!(new, old);
    set.net.heal_site(&site);
    wait_until("old primary follows the new one", || async {
        set.net.member(&old).map(|m| m.term()) == set.net.member(&new).map(|m| m.term())
            && set.state(&old) == Some(MemberState::Secondary)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn former_primary_rolls_back_writes_the_majority_never_had() {
    let set = Set::start(84, 3, |_| {}).await;
    let old = set.initiate().await;
    let direct = set.direct(&old, "").await;
    let coll = direct.database("app").collection::<Document>("c");
    let majority = WriteConcern::builder().w(Acknowledgment::Majority).build();
    coll.insert_one(doc! {"_id": "committed"})
        .write_concern(majority)
        .await
        .unwrap();

    set.net.isolate(&old);
    let w1 = WriteConcern::builder().w(Acknowledgment::Nodes(1)).build();
    coll.insert_one(doc! {"_id": "doomed"})
        .write_concern(w1)
        .await
        .expect("w:1 write on the isolated primary");
    let new = set.wait_primary(Some(&old)).await;
    set.net.heal(&old);
    wait_until("old primary rolled back and caught up", || async {
        let m = set.net.member(&old).unwrap();
        let n = set.net.member(&new).unwrap();
        m.state() == MemberState::Secondary && m.last_optime() == n.last_optime()
    })
    .await;
    let state = set.volumes[set.hosts.iter().position(|h| *h == old).unwrap()].snapshot();
    let ids: Vec<String> = state
        .collection("app.c")
        .iter()
        .filter_map(|d| d.get_str("_id").ok().map(String::from))
        .collect();
    assert_eq!(ids, vec!["committed".to_string()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durable_state_survives_restart_and_a_serde_round_trip() {
    let set = Set::start(85, 1, |_| {}).await;
    let host = set.hosts[0].clone();
    set.initiate().await;
    let c = set.direct(&host, "").await;
    c.database("app")
        .collection::<Document>("c")
        .insert_one(doc! {"_id": 1, "v": "kept"})
        .await
        .unwrap();
    let term_before = set.net.member(&host).unwrap().term();
    set.net.stop_member_and_wait(&host).await;

    let json = serde_json::to_string(&set.volumes[0].snapshot()).unwrap();
    let restored: DurableState = serde_json::from_str(&json).unwrap();
    assert_eq!(restored, set.volumes[0].snapshot());
    set.net
        .start_member(set.specs[0].clone(), Volume::from_state(restored))
        .await
        .unwrap();
    set.wait_primary(None).await;
    let m = set.net.member(&host).unwrap();
    assert!(m.term() > term_before);
    assert_eq!(m.config().unwrap().version, 1);
    let c = set.direct(&host, "").await;
    let found = collect(
        c.database("app")
            .collection::<Document>("c")
            .find(doc! {"_id": 1})
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(found.len(), 1);

    // A fresh volume is an empty member: no config.
    set.net.stop_member_and_wait(&host).await;
    set.net
        .start_member(set.specs[0].clone(), Volume::new())
        .await
        .unwrap();
    assert!(set.net.member(&host).unwrap().config().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn higher_priority_member_takes_over_when_caught_up() {
    let set = Set::start(86, 3, |_| {}).await;
    let mut cfg = set.config(&set.hosts);
    let mut members = cfg.get_array("members").unwrap().clone();
    members[2]
        .as_document_mut()
        .unwrap()
        .insert("priority", 5.0);
    cfg.insert("members", members);
    set.direct(&set.hosts[0], "")
        .await
        .database("admin")
        .run_command(doc! {"replSetInitiate": cfg})
        .await
        .unwrap();
    wait_until("highest priority member is primary", || async {
        set.primary().as_deref() == Some(set.hosts[2].as_str())
    })
    .await;
    let hello = set
        .direct(&set.hosts[2], "")
        .await
        .database("admin")
        .run_command(doc! {"hello": 1})
        .await
        .unwrap();
    let term = set.net.member(&set.hosts[2]).unwrap().term();
    let mut expected = [0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0];
    expected[4..].copy_from_slice(&term.to_be_bytes());
    assert_eq!(hello.get_object_id("electionId").unwrap().bytes(), expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn primary_behind_a_cut_ingress_is_replaced_and_steps_down_on_the_higher_term() {
    let set = Set::start(87, 3, |_| {}).await;
    for (i, h) in set.hosts.iter().enumerate() {
        set.net.set_site(h, &format!("site-{i}"));
    }
    let old = set.initiate().await;
    let site = format!("site-{}", set.hosts.iter().position(|h| *h == old).unwrap());
    // The old primary still reaches everyone (and so still sees a majority), but
    // nobody reaches it: the others elect, and it learns the new term by dialing out.
    set.net.cut_site_ingress(&site);
    let new = set.wait_primary(Some(&old)).await;
    wait_until("old primary steps down", || async {
        set.state(&old) == Some(MemberState::Secondary)
    })
    .await;
    assert_ne!(new, old);
    set.net.heal_site_ingress(&site);
    wait_until("old primary catches up", || async {
        set.net.member(&old).unwrap().last_optime() == set.net.member(&new).unwrap().last_optime()
    })
    .await;
}
