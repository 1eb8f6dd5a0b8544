//! TLS between members and with the Rust driver (127.140–144.*), with
//! certificates made by openssl at test time: a set at requireTLS forms and
//! elects; members whose certificates fail cannot reach each other and the
//! primary shows them as mongod does; x.509 cluster membership by O/OU;
//! setParameter's tlsMode / clusterAuthMode transitions; rotateCertificates;
//! what mongod refuses at start.

mod common;
mod tls_pki;

use bson::{doc, Document};
use common::*;
use mongod_sim::tls::{ClusterAuthMode, TlsMode};
use mongod_sim::{MemberSpec, ServerVersion, Volume};
use std::time::Duration;
use tls_pki::*;

/// URI options of a client trusting `ca`.
fn over_tls(ca: &str) -> String {
    format!("&tls=true&tlsCAFile={ca}")
}

/// The primary's `replSetGetStatus` entry for `host`, over TLS.
async fn entry(set: &Set, primary: &str, ca: &str, host: &str) -> Option<Document> {
    set.status_entry(primary, &over_tls(ca), host).await
}

/// A direct client of `host` that gives up after 1.5 s.
async fn quick(host: &str, extra: &str) -> mongodb::Client {
    mongodb::Client::with_uri_str(format!(
        "mongodb://{host}/?directConnection=true&serverSelectionTimeoutMS=1500{extra}"
    ))
    .await
    .unwrap()
}

/// Adds `extra` to `set` as non-voting members through the primary.
async fn add_non_voters(set: &Set, primary: &str, uri: &str, voters: &[String], extra: &[String]) {
    let mut members: Vec<Document> = voters
        .iter()
        .enumerate()
        .map(|(i, h)| doc! {"_id": i as i32, "host": h})
        .collect();
    for (i, h) in extra.iter().enumerate() {
        members.push(doc! {"_id": (voters.len() + i) as i32, "host": h, "votes": 0, "priority": 0});
    }
    set.direct(primary, uri)
        .await
        .database("admin")
        .run_command(doc! {"replSetReconfig": {
            "_id": "rs0", "version": 2, "members": members,
            "settings": {"electionTimeoutMillis": ELECTION_TIMEOUT_MS as i64, "heartbeatIntervalMillis": HEARTBEAT_MS as i64},
        }})
        .await
        .expect("reconfig");
}

/// Whether a client trusting `ca` reaches `set`'s first member.
async fn ping(set: &Set, ca: &str) -> bool {
    let c = quick(&set.hosts[0], &over_tls(ca)).await;
    c.database("admin")
        .run_command(doc! {"ping": 1})
        .await
        .is_ok()
}

/// Starts a one-member set on `host` with `spec`'s TLS and initiates it
/// through a client trusting `ca`.
async fn primary_of_one(set: &Set, ca: &str) {
    set.direct(&set.hosts[0], &over_tls(ca))
        .await
        .database("admin")
        .run_command(doc! {"replSetInitiate": set.config(&set.hosts[..1])})
        .await
        .expect("initiate over TLS");
    set.wait_primary(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_three_member_set_at_require_tls_forms_and_elects() {
    let pki = Pki::new("set");
    let ca = pki.ca("ca");
    for i in 1..=3 {
        pki.leaf(
            "ca",
            &format!("m{i}"),
            &[&format!("127.141.0.{i}")],
            &format!("/O=MongoDB/OU=rs0/CN=m{i}"),
            Validity::Now,
        );
    }
    let set = Set::start(141, 3, |s| {
        let n = last_octet(s);
        s.tls = tls(TlsMode::RequireTls, &pki.path(&format!("m{n}.pem")), &ca);
    })
    .await;
    // The Rust driver (rustls, IP SAN checked) sees the set over TLS; its
    // own certificate is the member's leaf, as the CA asks for one.
    let client_cert = format!(
        "{}&tlsCertificateKeyFile={}",
        over_tls(&ca),
        pki.path("m1.pem")
    );
    let primary = set.initiate_via(&client_cert).await;
    let client = set.client(&client_cert).await;
    client
        .database("app")
        .collection::<Document>("c")
        .insert_one(doc! {"x": 1})
        .await
        .expect("a majority write over TLS");
    for host in &set.hosts {
        let e = set
            .direct(&primary, &client_cert)
            .await
            .database("admin")
            .run_command(doc! {"replSetGetStatus": 1})
            .await
            .unwrap();
        let me = e
            .get_array("members")
            .unwrap()
            .iter()
            .filter_map(|m| m.as_document())
            .find(|m| m.get_str("name") == Ok(host))
            .unwrap()
            .clone();
        assert_eq!(me.get_f64("health"), Ok(1.0), "{me}");
    }
    // Without a client certificate the member closes the connection.
    let no_cert = quick(&primary, &over_tls(&ca)).await;
    assert!(no_cert
        .database("admin")
        .run_command(doc! {"ping": 1})
        .await
        .is_err());
    // Plain is refused under requireTLS.
    let plain = quick(&primary, "").await;
    assert!(plain
        .database("admin")
        .run_command(doc! {"ping": 1})
        .await
        .is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_whose_certificates_fail_verification_are_down_with_mongods_reason() {
    let pki = Pki::new("bad");
    let ca = pki.ca("ca");
    let other_ca = pki.ca("other");
    pki.leaf(
        "ca",
        "m1",
        &["127.142.0.1"],
        "/O=MongoDB/OU=rs0/CN=m1",
        Validity::Now,
    );
    pki.leaf(
        "ca",
        "m2",
        &["127.142.0.2"],
        "/O=MongoDB/OU=rs0/CN=m2",
        Validity::Now,
    );
    // m3: signed by a CA the others do not trust; m4: its IP is not a SAN.
    pki.leaf(
        "other",
        "m3",
        &["127.142.0.3"],
        "/O=MongoDB/OU=rs0/CN=m3",
        Validity::Now,
    );
    pki.leaf(
        "ca",
        "m4",
        &["127.142.0.99"],
        "/O=MongoDB/OU=rs0/CN=m4",
        Validity::Now,
    );
    let set = Set::start(142, 4, |s| {
        let n = last_octet(s);
        let trusted = if n == "3" { &other_ca } else { &ca };
        s.tls = tls_open(
            TlsMode::RequireTls,
            &pki.path(&format!("m{n}.pem")),
            trusted,
        );
    })
    .await;
    let c = set.direct(&set.hosts[0], &over_tls(&ca)).await;
    c.database("admin")
        .run_command(doc! {"replSetInitiate": set.config(&set.hosts[..2])})
        .await
        .unwrap();
    let primary = set.wait_primary(None).await;
    add_non_voters(
        &set,
        &primary,
        &over_tls(&ca),
        &set.hosts[..2],
        &set.hosts[2..],
    )
    .await;
    let mut seen = Vec::new();
    for (host, reason) in [
        (&set.hosts[2], "SSL peer certificate validation failed: unable to get local issuer certificate".to_string()),
        (&set.hosts[3], "The server certificate does not match the host name. Hostname: 127.142.0.4 does not match SAN(s): 127.142.0.99 ".to_string()),
    ] {
        wait_until("the primary's view of the bad member", || async {
            entry(&set, &primary, &ca, host).await.is_some_and(|e| e.get_str("lastHeartbeatMessage") == Ok(reason.as_str()))
        })
        .await;
        let e = entry(&set, &primary, &ca, host).await.unwrap();
        assert_eq!(e.get_f64("health"), Ok(0.0), "{e}");
        assert_eq!(e.get_i32("state"), Ok(8), "{e}");
        assert_eq!(e.get_str("stateStr"), Ok("(not reachable/healthy)"));
        assert!(!e.contains_key("authenticated"), "a TLS failure is no auth issue: {e}");
        seen.push(e);
    }
    assert_eq!(
        set.state(&set.hosts[2]),
        Some(mongod_sim::MemberState::Startup),
        "m3 never got the config"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn x509_members_agree_on_o_and_ou_and_a_foreign_unit_is_an_auth_issue() {
    let pki = Pki::new("x509");
    let ca = pki.ca("ca");
    pki.leaf(
        "ca",
        "m1",
        &["127.143.0.1"],
        "/O=MongoDB/OU=rs0/CN=m1",
        Validity::Now,
    );
    pki.leaf(
        "ca",
        "m2",
        &["127.143.0.2"],
        "/O=MongoDB/OU=rs0/CN=m2",
        Validity::Now,
    );
    pki.leaf(
        "ca",
        "m3",
        &["127.143.0.3"],
        "/O=MongoDB/OU=other/CN=m3",
        Validity::Now,
    );
    let set = Set::start(143, 3, |s| {
        let n = last_octet(s);
        s.tls = mongod_sim::tls::TlsSpec {
            allow_connections_without_certificates: true,
            ..tls_x509(
                TlsMode::RequireTls,
                &pki.path(&format!("m{n}.pem")),
                &ca,
                ClusterAuthMode::X509,
            )
        };
    })
    .await;
    // The member of another unit fails the initiate's quorum check (74),
    // as with mongod: it joins later, as a non-voter.
    let c = set.direct(&set.hosts[0], &over_tls(&ca)).await;
    expect_code(
        c.database("admin")
            .run_command(doc! {"replSetInitiate": set.config(&set.hosts)})
            .await,
        74,
    )
    .await;
    c.database("admin")
        .run_command(doc! {"replSetInitiate": set.config(&set.hosts[..2])})
        .await
        .unwrap();
    let primary = set.wait_primary(None).await;
    add_non_voters(
        &set,
        &primary,
        &over_tls(&ca),
        &set.hosts[..2],
        &set.hosts[2..],
    )
    .await;
    let odd = &set.hosts[2];
    let good = set
        .hosts
        .iter()
        .find(|h| *h != &primary && *h != odd)
        .unwrap();
    wait_until("the other rs0 member is a secondary", || async {
        entry(&set, &primary, &ca, good)
            .await
            .is_some_and(|e| e.get_f64("health") == Ok(1.0))
    })
    .await;
    wait_until("the member of OU=other is refused", || async {
        entry(&set, &primary, &ca, odd)
            .await
            .is_some_and(|e| e.get_bool("authenticated") == Ok(false))
    })
    .await;
    let e = entry(&set, &primary, &ca, odd).await.unwrap();
    assert_eq!(e.get_f64("health"), Ok(0.0), "{e}");
    let admin = set.direct(&primary, &over_tls(&ca)).await.database("admin");
    let p = admin
        .run_command(doc! {"getParameter": 1, "clusterAuthMode": 1, "tlsMode": 1})
        .await
        .unwrap();
    assert_eq!(p.get_str("clusterAuthMode"), Ok("x509"));
    assert_eq!(p.get_str("tlsMode"), Ok("requireTLS"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_parameter_moves_tls_and_cluster_auth_one_step_at_a_time() {
    let pki = Pki::new("steps");
    let ca = pki.ca("ca");
    let key = pki.leaf(
        "ca",
        "m1",
        &["127.144.0.1"],
        "/O=MongoDB/OU=rs0/CN=m1",
        Validity::Now,
    );
    let set = Set::start(144, 1, |s| {
        s.keyfile = Some("sharedkey1".into());
        s.tls = tls_open(TlsMode::AllowTls, &key, &ca);
    })
    .await;
    let host = &set.hosts[0];
    set.initiate().await;
    // A plain client (the localhost exception: no user yet).
    set.direct(host, "")
        .await
        .database("admin")
        .run_command(doc! {"createUser": "root", "pwd": "pw", "roles": ["root"]})
        .await
        .unwrap();
    let admin = set
        .direct_auth(host, "root", "pw", "SCRAM-SHA-256")
        .await
        .database("admin");
    let p = admin
        .run_command(doc! {"getParameter": 1, "tlsMode": 1, "clusterAuthMode": 1})
        .await
        .unwrap();
    assert_eq!(p.get_str("tlsMode"), Ok("allowTLS"));
    assert_eq!(p.get_str("clusterAuthMode"), Ok("keyFile"));
    let refused = expect_code(
        admin
            .run_command(doc! {"setParameter": 1, "tlsMode": "requireTLS"})
            .await,
        2,
    )
    .await;
    assert!(
        refused.to_string().contains(
            "Illegal state transition for tlsMode, attempt to change from allowTLS to requireTLS"
        ),
        "{refused}"
    );
    let x509 = expect_code(
        admin
            .run_command(doc! {"setParameter": 1, "clusterAuthMode": "sendKeyFile"})
            .await,
        2,
    )
    .await;
    assert!(
        x509.to_string()
            .contains("need to enable SSL for outgoing connections"),
        "{x509}"
    );
    let was = admin
        .run_command(doc! {"setParameter": 1, "tlsMode": "preferTLS"})
        .await
        .unwrap();
    assert_eq!(was.get_str("was"), Ok("allowTLS"));
    let skip = expect_code(
        admin
            .run_command(doc! {"setParameter": 1, "clusterAuthMode": "x509"})
            .await,
        5579202,
    )
    .await;
    assert!(
        skip.to_string()
            .contains("Illegal state transition for clusterAuthMode from 'keyFile' to 'x509'"),
        "{skip}"
    );
    for (mode, was) in [
        ("sendKeyFile", "keyFile"),
        ("sendX509", "sendKeyFile"),
        ("x509", "sendX509"),
    ] {
        let reply = admin
            .run_command(doc! {"setParameter": 1, "clusterAuthMode": mode})
            .await
            .unwrap();
        assert_eq!(reply.get_str("was"), Ok(was));
    }
    admin
        .run_command(doc! {"setParameter": 1, "tlsMode": "requireTLS"})
        .await
        .unwrap();
    expect_code(
        admin
            .run_command(doc! {"setParameter": 1, "tlsMode": "preferTLS"})
            .await,
        2,
    )
    .await;
    // New plain connections are refused from now on.
    let plain = quick(host, "").await;
    assert!(plain
        .database("admin")
        .run_command(doc! {"ping": 1})
        .await
        .is_err());
    let tls_client = set.direct(host, &over_tls(&ca)).await;
    tls_client
        .database("admin")
        .run_command(doc! {"ping": 1})
        .await
        .expect("TLS still in");

    // 4.4 knows no keyFile → sendKeyFile at run time.
    let old = Pki::new("steps44");
    let ca44 = old.ca("ca");
    let key44 = old.leaf(
        "ca",
        "m2",
        &["127.144.0.2"],
        "/O=MongoDB/OU=rs0/CN=m2",
        Validity::Now,
    );
    let mut spec = MemberSpec::new("127.144.0.2:27017".parse().unwrap(), "rs0");
    spec.version = ServerVersion::new(4, 4, 29);
    spec.keyfile = Some("sharedkey1".into());
    spec.tls = tls_open(TlsMode::PreferTls, &key44, &ca44);
    set.net.start_member(spec, Volume::new()).await.unwrap();
    let local44 = set
        .direct("127.144.0.2:27017", &over_tls(&ca44))
        .await
        .database("admin");
    let host44 = vec!["127.144.0.2:27017".to_string()];
    local44
        .run_command(doc! {"replSetInitiate": set.config(&host44)})
        .await
        .unwrap();
    wait_until("the 4.4 member leads", || async {
        set.net.member(&host44[0]).map(|m| m.state()) == Some(mongod_sim::MemberState::Primary)
    })
    .await;
    local44
        .run_command(doc! {"createUser": "root", "pwd": "pw", "roles": ["root"]})
        .await
        .unwrap();
    let admin44 = mongodb::Client::with_uri_str(format!(
        "mongodb://root:pw@127.144.0.2:27017/?directConnection=true&authSource=admin{}",
        over_tls(&ca44)
    ))
    .await
    .unwrap()
    .database("admin");
    let refused44 = expect_code(
        admin44
            .run_command(doc! {"setParameter": 1, "clusterAuthMode": "sendKeyFile"})
            .await,
        2,
    )
    .await;
    assert!(
        refused44.to_string().contains(
            "Illegal state transition for clusterAuthMode, change from keyFile to sendKeyFile"
        ),
        "{refused44}"
    );
    expect_code(
        admin44.run_command(doc! {"rotateCertificates": 1}).await,
        59,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotate_certificates_reloads_the_files_and_keeps_the_old_ones_when_the_new_are_bad() {
    let pki = Pki::new("rotate");
    let old_ca = pki.ca("old");
    let new_ca = pki.ca("new");
    let key = pki.leaf(
        "old",
        "m1",
        &["127.145.0.1"],
        "/O=MongoDB/OU=rs0/CN=m1",
        Validity::Now,
    );
    let set = Set::start(145, 1, |s| {
        s.tls = tls_open(TlsMode::RequireTls, &key, &old_ca)
    })
    .await;
    let host = &set.hosts[0];
    primary_of_one(&set, &old_ca).await;
    assert!(ping(&set, &old_ca).await && !ping(&set, &new_ca).await);
    // A new leaf from the new CA replaces the file: served after rotation only.
    let renewed = pki.leaf(
        "new",
        "m1-renewed",
        &["127.145.0.1"],
        "/O=MongoDB/OU=rs0/CN=m1",
        Validity::Now,
    );
    std::fs::copy(&renewed, &key).unwrap();
    assert!(ping(&set, &old_ca).await, "no rotation yet: the old leaf");
    let admin = set.direct(host, &over_tls(&old_ca)).await.database("admin");
    admin
        .run_command(doc! {"rotateCertificates": 1, "message": "renewed"})
        .await
        .expect("rotation");
    assert!(ping(&set, &new_ca).await && !ping(&set, &old_ca).await);
    // An unreadable file: 140, and the member keeps serving the last good one.
    std::fs::write(&key, "not a certificate").unwrap();
    let admin = set.direct(host, &over_tls(&new_ca)).await.database("admin");
    let bad = expect_code(admin.run_command(doc! {"rotateCertificates": 1}).await, 140).await;
    assert!(
        bad.to_string().contains("Can not set up PEM key file."),
        "{bad}"
    );
    let expired = pki.leaf(
        "new",
        "m1-expired",
        &["127.145.0.1"],
        "/O=MongoDB/OU=rs0/CN=m1",
        Validity::ExpiresIn(1),
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    std::fs::copy(&expired, &key).unwrap();
    let late = expect_code(admin.run_command(doc! {"rotateCertificates": 1}).await, 140).await;
    assert!(
        late.to_string()
            .contains("The provided SSL certificate is expired or not yet valid."),
        "{late}"
    );
    assert!(ping(&set, &new_ca).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn options_mongod_refuses_end_the_process_with_code_1() {
    let pki = Pki::new("refused");
    let ca = pki.ca("ca");
    let key = pki.leaf(
        "ca",
        "m1",
        &["127.146.0.1"],
        "/O=MongoDB/OU=rs0/CN=m1",
        Validity::Now,
    );
    let expired = pki.leaf(
        "ca",
        "m2",
        &["127.146.0.2"],
        "/O=MongoDB/OU=rs0/CN=m2",
        Validity::ExpiresIn(1),
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let net = mongod_sim::Network::new();
    let cases = [
        (
            "127.146.0.1:27017",
            mongod_sim::tls::TlsSpec {
                certificate_key_file: None,
                ..tls(TlsMode::RequireTls, &key, &ca)
            },
        ),
        ("127.146.0.2:27017", tls(TlsMode::RequireTls, &expired, &ca)),
        (
            "127.146.0.3:27017",
            mongod_sim::tls::TlsSpec {
                cluster_auth_mode: Some(ClusterAuthMode::X509),
                ..Default::default()
            },
        ),
        (
            "127.146.0.4:27017",
            mongod_sim::tls::TlsSpec {
                ca_file: None,
                ..tls(TlsMode::RequireTls, &key, &ca)
            },
        ),
    ];
    for (listen, spec_tls) in cases {
        let mut spec = MemberSpec::new(listen.parse().unwrap(), "rs0");
        spec.tls = spec_tls;
        net.start_member(spec, Volume::new()).await.unwrap();
        wait_until("the member exits", || async {
            net.member(listen).is_none()
        })
        .await;
    }
    // Without a CA file a 7.0.5 (before SERVER-72839) still starts.
    let mut spec = MemberSpec::new("127.146.0.5:27017".parse().unwrap(), "rs0");
    spec.version = ServerVersion::new(7, 0, 5);
    spec.tls = mongod_sim::tls::TlsSpec {
        ca_file: None,
        ..tls(TlsMode::RequireTls, &key, &ca)
    };
    net.start_member(spec, Volume::new()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(net.member("127.146.0.5:27017").is_some());
    net.stop_all();
}

/// The last octet of a member's listen address: its number in the set.
fn last_octet(spec: &MemberSpec) -> String {
    let ip = spec.listen.ip().to_string();
    ip.rsplit('.').next().unwrap_or_default().to_string()
}
