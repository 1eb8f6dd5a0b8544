use super::set_reading::members_from_status;
use super::*;
use crate::observe::MemberProbe;
use mongodb::bson::{DateTime, Timestamp};

#[test]
fn status_members_give_primary_health_and_lag() {
    let status = doc! {
        "set": "replset-0", "myState": 1, "ok": 1.0,
        "members": [
            {"_id": 0, "name": "127.0.10.1:30001", "health": 1.0, "state": 1, "stateStr": "PRIMARY",
             "optimeDate": DateTime::from_millis(100_000), "configVersion": 4},
            {"_id": 1, "name": "127.0.11.1:30001", "health": 1.0, "state": 2, "stateStr": "SECONDARY",
             "optimeDate": DateTime::from_millis(97_000), "syncSourceHost": "127.0.10.1:30001", "configVersion": 4},
            {"_id": 2, "name": "127.0.12.1:30001", "health": 0.0, "state": 8, "stateStr": "(not reachable/healthy)"},
        ]
    };
    let (primary, members) = members_from_status(&status);
    assert_eq!(primary.unwrap().to_string(), "127.0.10.1:30001");
    let secondary = &members[&MemberAddress::parse("127.0.11.1:30001").unwrap()];
    assert_eq!(secondary.lag_secs, Some(3));
    assert!(secondary.healthy);
    assert_eq!(secondary.config_version, Some(4));
    let down = &members[&MemberAddress::parse("127.0.12.1:30001").unwrap()];
    assert!(!down.healthy);
    assert_eq!(down.state, MemberState::Down);
}

#[test]
fn an_unreachable_member_has_no_lag_rather_than_seconds_since_the_epoch() {
    // mongod reports optimeDate 1970-01-01 for a member it cannot reach.
    let status = doc! {
        "set": "replset-0", "myState": 1, "ok": 1.0,
        "members": [
            {"_id": 0, "name": "127.0.10.1:30001", "health": 1.0, "state": 1,
             "optime": {"ts": Timestamp { time: 1_700_000_000, increment: 1 }, "t": 3_i64},
             "optimeDate": DateTime::from_millis(1_700_000_000_000)},
            {"_id": 1, "name": "127.0.11.1:30001", "health": 0.0, "state": 8,
             "optime": {"ts": Timestamp { time: 0, increment: 0 }, "t": -1_i64},
             "optimeDate": DateTime::from_millis(0)},
        ]
    };
    let (_, members) = members_from_status(&status);
    let down = &members[&MemberAddress::parse("127.0.11.1:30001").unwrap()];
    assert_eq!(down.lag_secs, None);
}

#[test]
fn of_two_members_shown_primary_the_one_of_the_highest_term_is_the_primary() {
    // A stale primary (term 4) still seen as PRIMARY, listed after the new one (term 5).
    let member = |id: i32, host: &str, term: i64, secs: u32| {
        doc! {"_id": id, "name": host, "health": 1.0, "state": 1,
        "optime": {"ts": Timestamp { time: secs, increment: 1 }, "t": term},
        "optimeDate": DateTime::from_millis(i64::from(secs) * 1000)}
    };
    for members in [
        vec![
            member(0, "127.0.10.1:30001", 5, 200),
            member(1, "127.0.11.1:30001", 4, 100),
        ],
        vec![
            member(1, "127.0.11.1:30001", 4, 100),
            member(0, "127.0.10.1:30001", 5, 200),
        ],
    ] {
        let status = doc! {"set": "replset-0", "ok": 1.0, "members": members};
        let (primary, members) = members_from_status(&status);
        assert_eq!(primary.unwrap().to_string(), "127.0.10.1:30001");
        let stale = &members[&MemberAddress::parse("127.0.11.1:30001").unwrap()];
        assert_eq!(
            stale.lag_secs,
            Some(100),
            "measured against the primary of term 5"
        );
    }
}

#[test]
fn credentials_never_show_in_debug_output() {
    let credentials = RootCredentials {
        username: "root".into(),
        password: "s3cr3t-value".into(),
    };
    assert!(!format!("{credentials:?}").contains("s3cr3t-value"));
    let user = UserSpec {
        database: "admin".into(),
        name: "u".into(),
        password: "s3cr3t-value".into(),
        roles: vec![],
    };
    assert!(!format!("{user:?}").contains("s3cr3t-value"));
}

/// The root user of the simulated members.
fn root() -> RootCredentials {
    RootCredentials {
        username: "root".into(),
        password: "root-Pa55word".into(),
    }
}

/// [`root`] as the image's entrypoint creates it on an empty volume.
fn root_user() -> mongod_sim::RootUser {
    let credentials = root();
    mongod_sim::RootUser {
        username: credentials.username,
        password: credentials.password,
    }
}

/// Starts a simulated mongod at each of `members`, `configure`d.
async fn start_members(
    network: &std::sync::Arc<mongod_sim::Network>,
    members: &[MemberAddress],
    configure: impl Fn(&MemberAddress, &mut mongod_sim::MemberSpec),
) {
    for member in members {
        let mut spec = mongod_sim::MemberSpec::new(member.to_string().parse().unwrap(), "rs0");
        configure(member, &mut spec);
        network
            .start_member(spec, mongod_sim::Volume::new())
            .await
            .expect("member starts");
    }
}

/// Three member addresses on `127.<range>.<pid>.1..3`, this process's own.
fn three_members(range: u8) -> Vec<MemberAddress> {
    (1..=3)
        .map(|i| MemberAddress {
            host: format!("127.{range}.{}.{i}", std::process::id() % 250),
            port: 27017,
        })
        .collect()
}

/// The first config of `members` (short timeouts), `arbiter` among them as
/// the arbiter.
fn initial_config(members: &[MemberAddress], arbiter: Option<&MemberAddress>) -> ReplicaSetConfig {
    use crate::replset::{ConfigMember, ConfigSettings};
    ReplicaSetConfig {
        set_name: "rs0".into(),
        version: 1,
        term: None,
        members: members
            .iter()
            .zip(0..)
            .map(|(host, id)| ConfigMember {
                id,
                host: host.clone(),
                arbiter_only: Some(host) == arbiter,
                votes: 1,
                priority: if Some(host) == arbiter { 0.0 } else { 1.0 },
                hidden: false,
                tags: Default::default(),
                newly_added: false,
            })
            .collect(),
        settings: ConfigSettings::from_desired(
            &crate::api::ReplicaSetSettings {
                election_timeout_millis: 1000,
                heartbeat_interval_millis: 200,
                ..Default::default()
            },
            None,
        ),
    }
}

/// Three mongod-sim members with a root user, initiated through the gateway,
/// once one of them is primary: (gateway, members, credentials, primary).
async fn running_set(
    range: u8,
) -> (
    MongoGateway,
    Vec<MemberAddress>,
    RootCredentials,
    MemberAddress,
    std::sync::Arc<mongod_sim::Network>,
) {
    let credentials = root();
    let network = mongod_sim::Network::new();
    let members = three_members(range);
    start_members(&network, &members, |_, spec| {
        spec.root_user = Some(root_user());
    })
    .await;
    let config = initial_config(&members, None);
    let gateway = MongoGateway::new();
    gateway
        .initiate(&members[0], &config, &credentials)
        .await
        .expect("initiated");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(reading) = gateway.observe_set(&members, "rs0", &credentials).await {
            if let Some(primary) = reading.set.primary {
                return (gateway, members, credentials, primary, network);
            }
        }
        assert!(std::time::Instant::now() < deadline, "no primary elected");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Asks a member at `address` with a fresh gateway: its answer and how
/// long it took.
async fn ask_timed(address: std::net::SocketAddr) -> (Result<MemberProbe, MongoError>, Duration) {
    let credentials = root();
    let member = MemberAddress {
        host: address.ip().to_string(),
        port: address.port(),
    };
    let gateway = MongoGateway::new();
    let asked = std::time::Instant::now();
    let answer = gateway.ask_member(&member, &credentials).await;
    let took = asked.elapsed();
    gateway.close().await;
    (answer, took)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_whose_address_turns_connections_away_is_unreachable_at_once() {
    // Another cluster's member before its pod runs: kube-proxy rejects the
    // connection (nothing listens), or (the lab's proxy) accepts and resets
    // it. A pass must not wait out the server-selection timeout for it:
    // with many instances, those waits would hold every worker.
    let host = format!("127.94.{}.1", std::process::id() % 250);
    let closed = std::net::TcpListener::bind((host.as_str(), 0)).unwrap();
    let nothing_listens = closed.local_addr().unwrap();
    drop(closed);
    let resetting = tokio::net::TcpListener::bind((host.as_str(), 0))
        .await
        .unwrap();
    let resets = resetting.local_addr().unwrap();
    let acceptor = tokio::spawn(async move {
        while let Ok((connection, _)) = resetting.accept().await {
            drop(connection);
        }
    });
    for address in [nothing_listens, resets] {
        let (answer, took) = ask_timed(address).await;
        assert!(
            matches!(answer, Err(MongoError::Unreachable(_))),
            "{address}: {answer:?}"
        );
        assert!(
            took < DIRECT_SELECTION_TIMEOUT / 2,
            "{address} was asked for {took:?} (server selection gives up after {DIRECT_SELECTION_TIMEOUT:?})"
        );
    }
    acceptor.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_down_goes_to_the_planned_primary_only() {
    // A step-down planned for a member that is no longer primary must not
    // step down whichever member the driver now sees as primary.
    let (gateway, members, credentials, primary, network) = running_set(93).await;
    let not_primary = members.iter().find(|m| **m != primary).unwrap().clone();
    let refused = gateway.step_down(&not_primary, 60, 10, &credentials).await;
    assert_eq!(
        refused.unwrap_err().code(),
        Some(codes::NOT_WRITABLE_PRIMARY)
    );
    let reading = gateway
        .observe_set(&members, "rs0", &credentials)
        .await
        .unwrap();
    assert_eq!(
        reading.set.primary,
        Some(primary),
        "the primary stayed primary"
    );
    network.stop_all();
}

/// A TCP relay to `target` that can turn into a black hole: once
/// `swallow` is set it stops forwarding in both directions and keeps the
/// connections open, as a network that drops packets does.
async fn relay(
    listen_host: &str,
    target: std::net::SocketAddr,
) -> (
    std::net::SocketAddr,
    std::sync::Arc<std::sync::atomic::AtomicBool>,
) {
    use std::sync::atomic::{AtomicBool, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind((listen_host, 0))
        .await
        .unwrap();
    let address = listener.local_addr().unwrap();
    let swallow = std::sync::Arc::new(AtomicBool::new(false));
    let switch = swallow.clone();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = tokio::net::TcpStream::connect(target).await else {
                continue;
            };
            let (client_read, client_write) = client.into_split();
            let (server_read, server_write) = server.into_split();
            for (mut from, mut to, swallow) in [
                (
                    Box::new(client_read) as Box<dyn tokio::io::AsyncRead + Send + Unpin>,
                    Box::new(server_write) as Box<dyn tokio::io::AsyncWrite + Send + Unpin>,
                    switch.clone(),
                ),
                (
                    Box::new(server_read) as _,
                    Box::new(client_write) as _,
                    switch.clone(),
                ),
            ] {
                tokio::spawn(async move {
                    let mut buffer = vec![0u8; 64 * 1024];
                    while let Ok(read) = from.read(&mut buffer).await {
                        if read == 0 {
                            break;
                        }
                        if swallow.load(Ordering::SeqCst) {
                            // Dropped on the floor; the connection stays open.
                            continue;
                        }
                        if to.write_all(&buffer[..read]).await.is_err() {
                            break;
                        }
                    }
                    // Keep the other side open: a lost route closes nothing.
                    std::future::pending::<()>().await;
                });
            }
        }
    });
    (address, swallow)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_a_pass_clients_is_bounded_when_a_member_stops_answering() {
    // A member asked during a pass whose route then drops every packet (a
    // partition that leaves connections half-open): mongod never answers
    // again and the driver's connections have no read timeout. Ending the
    // pass must not wait on it, or the instance is never looked at again.
    let (_, _, credentials, primary, network) = running_set(92).await;
    let listen: std::net::SocketAddr = primary.to_string().parse().unwrap();
    let host = primary.host.clone();
    let (relayed, swallow) = relay(&host, listen).await;
    let member = MemberAddress {
        host: relayed.ip().to_string(),
        port: relayed.port(),
    };
    let gateway = MongoGateway::new();
    gateway
        .ask_member(&member, &credentials)
        .await
        .expect("the member answers through the relay");
    swallow.store(true, std::sync::atomic::Ordering::SeqCst);
    let started = std::time::Instant::now();
    let closed = tokio::time::timeout(Duration::from_secs(60), gateway.close()).await;
    assert!(
        closed.is_ok() && started.elapsed() <= Duration::from_secs(10),
        "closing the clients took {:?} (still waiting: {})",
        started.elapsed(),
        closed.is_err()
    );
    network.stop_all();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_arbiter_without_users_is_asked_hello_and_build_info_only() {
    let credentials = root();
    let network = mongod_sim::Network::new();
    let members = three_members(98);
    let arbiter = &members[2];
    start_members(&network, &members, |member, spec| {
        spec.keyfile = Some("YXJiaXRlcmtleWZpbGU=".into());
        spec.clients_on_own_host = false;
        spec.root_user = (member != arbiter).then(root_user);
    })
    .await;
    let gateway = MongoGateway::new();
    let fresh = gateway.ask_arbiter(arbiter).await.expect("hello answered");
    assert!(!fresh.has_config && fresh.state.is_none(), "{fresh:?}");
    // With credentials, a member without users refuses them.
    let refused = gateway.ask_member(arbiter, &credentials).await.unwrap_err();
    assert_eq!(
        refused.code(),
        Some(codes::AUTHENTICATION_FAILED),
        "{refused}"
    );

    let config = initial_config(&members, Some(arbiter));
    gateway
        .initiate(&members[0], &config, &credentials)
        .await
        .expect("initiated");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let probe = loop {
        let probe = gateway.ask_arbiter(arbiter).await.expect("hello answered");
        if probe.state == Some(MemberState::Arbiter) {
            break probe;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not ARBITER: {probe:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(probe.has_config);
    assert_eq!(probe.set_name.as_deref(), Some("rs0"));
    assert_eq!(probe.me.as_ref(), Some(arbiter));
    // The driver no longer authenticates to it: any other question is refused.
    let unauthorized = gateway.ask_member(arbiter, &credentials).await.unwrap_err();
    assert_eq!(
        unauthorized.code(),
        Some(codes::UNAUTHORIZED),
        "{unauthorized}"
    );
    let version = gateway
        .server_version(arbiter, None)
        .await
        .expect("buildInfo");
    assert!(version.starts_with("7.0"), "{version}");
    gateway.close().await;
    network.stop_all();
}

/// A TLS client's files: `leaf` (certificate then key) trusting `ca`.
fn client_files(leaf: &str, ca: &str) -> crate::tls::MemberTls {
    crate::tls::MemberTls {
        mode: TlsMode::RequireTls,
        cluster_auth: crate::api::ClusterAuthMode::KeyFile,
        allow_connections_without_certificates: false,
        certificate_key: std::fs::read(leaf).unwrap(),
        ca: std::fs::read(ca).unwrap(),
        certificate: crate::tls::CheckedCertificate {
            not_before: 0,
            not_after: 0,
            subject: String::new(),
        },
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_shows_its_certificate_and_whether_it_takes_a_peers() {
    use mongod_sim::pki::{Pki, Validity};
    use served::{served_certificate, takes, PeerTlsError};

    let pki = Pki::new("served");
    let (old_ca, new_ca) = (pki.ca("old"), pki.ca("new"));
    let member = MemberAddress {
        host: format!("127.99.{}.1", std::process::id() % 250),
        port: 27017,
    };
    let subject = "/O=lab/CN=m";
    let ip = [member.host.as_str()];
    let serving = pki.leaf("old", "m", &ip, subject, Validity::Now);
    let network = mongod_sim::Network::new();
    start_members(&network, std::slice::from_ref(&member), |_, spec| {
        spec.tls = mongod_sim::tls::TlsSpec {
            mode: mongod_sim::tls::TlsMode::RequireTls,
            certificate_key_file: Some(serving.clone()),
            ca_file: Some(old_ca.clone()),
            ..Default::default()
        };
    })
    .await;
    let served = served_certificate(&member, &client_files(&serving, &old_ca))
        .await
        .expect("a certificate served");
    let files = client_files(&serving, &old_ca);
    assert_eq!(
        Some(served),
        crate::tls::rotation::leaf_of(&files.certificate_key)
    );
    takes(&member, &files)
        .await
        .expect("its own files are taken");

    // A bundle without the member's CA does not verify what it serves.
    let renewed = pki.leaf("new", "n", &ip, subject, Validity::Now);
    let refused = takes(&member, &client_files(&renewed, &new_ca))
        .await
        .unwrap_err();
    assert!(
        matches!(refused, PeerTlsError::ServedCertificateRefused { .. }),
        "{refused}"
    );
    // Both CAs verify it, but the member's bundle does not verify the new
    // certificate: it closes the connection.
    let both = pki.dir.join("both.pem");
    std::fs::write(
        &both,
        [
            std::fs::read(&old_ca).unwrap(),
            std::fs::read(&new_ca).unwrap(),
        ]
        .concat(),
    )
    .unwrap();
    let refused = takes(&member, &client_files(&renewed, both.to_str().unwrap()))
        .await
        .unwrap_err();
    assert!(
        matches!(refused, PeerTlsError::CertificateRefused { .. }),
        "{refused}"
    );
    let gone = MemberAddress {
        port: 27018,
        ..member.clone()
    };
    let unreachable = takes(&gone, &files).await.unwrap_err();
    assert!(
        matches!(unreachable, PeerTlsError::Unreachable { .. }),
        "{unreachable}"
    );
    network.stop_all();
}

/// The commands each member received, by (member, command), since `before`.
fn commands_since(
    network: &mongod_sim::Network,
    before: &std::collections::BTreeMap<mongod_sim::CommandKey, u64>,
) -> std::collections::BTreeMap<(String, String), u64> {
    let mut sent = std::collections::BTreeMap::new();
    for (key, n) in network.command_counts() {
        let n = n - before.get(&key).copied().unwrap_or(0);
        if n > 0 {
            *sent.entry((key.member, key.command)).or_default() += n;
        }
    }
    sent
}

/// What a pass of the controller asks at rest, the member `local` being
/// this cluster's: its probe, the set, the roll's state, versions and FCV.
async fn pass_at_rest(gateway: &MongoGateway, local: &MemberAddress, seeds: &[MemberAddress]) {
    let credentials = root();
    gateway
        .ask_member(local, &credentials)
        .await
        .expect("probe");
    let reading = gateway
        .observe_set(seeds, "rs0", &credentials)
        .await
        .expect("set read");
    let primary = reading.set.primary.expect("a primary");
    gateway
        .read_roll_state(&primary, &credentials)
        .await
        .expect("roll state");
    gateway
        .server_version(local, Some(&credentials))
        .await
        .expect("version");
    gateway
        .feature_compatibility_version(&primary, &credentials)
        .await
        .expect("fcv");
    gateway.close().await;
}

/// The commands `member` received among `sent`, by command.
fn received<'a>(
    sent: &'a BTreeMap<(String, String), u64>,
    member: &MemberAddress,
) -> BTreeMap<&'a str, u64> {
    sent.iter()
        .filter(|((to, _), _)| *to == member.to_string())
        .map(|((_, command), n)| (command.as_str(), *n))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_rest_a_pass_asks_what_may_have_changed_only() {
    let (gateway, members, credentials, primary, network) = running_set(97).await;
    gateway.close().await;
    let secondary = members.iter().find(|m| **m != primary).unwrap();
    let third = members
        .iter()
        .find(|m| **m != primary && *m != secondary)
        .unwrap();
    let seen = MembersSeen::default();
    for local in [&primary, secondary] {
        // The first passes learn the versions, probes and committed config
        // (once every voter holds the elected primary's config term).
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let sent = loop {
            let before = network.command_counts();
            pass_at_rest(&MongoGateway::remembering(seen.clone()), local, &members).await;
            let sent = commands_since(&network, &before);
            let learnt = |(_, command): &(String, String)| {
                matches!(command.as_str(), "replSetGetConfig" | "buildInfo")
            };
            if !sent.keys().any(learnt) {
                break sent;
            }
            assert!(std::time::Instant::now() < deadline, "{sent:?}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        // The monitors' own checks aside (a pass that outlasts 500 ms on a
        // busy machine sees one more).
        let total: u64 = sent
            .iter()
            .filter(|((_, command), _)| command != "hello")
            .map(|(_, n)| n)
            .sum();
        assert!(total <= 11, "{total} commands at rest: {sent:?}");
        let on_primary = received(&sent, &primary);
        for asked_before in ["replSetGetConfig", "buildInfo"] {
            assert!(!on_primary.contains_key(asked_before), "{sent:?}");
        }
        assert_eq!(on_primary.get("replSetGetStatus"), Some(&1), "{sent:?}");
        assert!(received(&sent, third).is_empty(), "no seed list: {sent:?}");
        if local == secondary {
            // Its monitor's handshake alone: no credentials, no session.
            let on_local = received(&sent, secondary);
            assert!(
                on_local.keys().all(|c| matches!(*c, "isMaster" | "hello")),
                "{sent:?}"
            );
        }
    }

    // A primary named wrongly (a member that is not primary any more):
    // the set is read through the seed list.
    let gateway = MongoGateway::new();
    let naming_third = doc! {"setName": "rs0", "secondary": true, "primary": third.to_string()};
    gateway.saw_hello(secondary, &naming_third);
    let reading = gateway
        .observe_set(&members, "rs0", &credentials)
        .await
        .expect("read through the seeds");
    assert_eq!(reading.set.primary.as_ref(), Some(&primary));
    gateway.close().await;

    // The set's root password changed elsewhere: the member answers from
    // memory, but the set cannot be read; asked again without the memory,
    // it refuses the credentials.
    let changed = RootCredentials {
        username: credentials.username.clone(),
        password: "changed-Pa55word".into(),
    };
    gateway
        .set_password(&members, "rs0", "root", &changed.password, &credentials)
        .await
        .expect("password changed");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let fresh = MongoGateway::new();
        let refused = fresh.ask_member(secondary, &credentials).await;
        fresh.close().await;
        if refused.is_err_and(|e| e.code() == Some(codes::AUTHENTICATION_FAILED)) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the password never replicated"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let gateway = MongoGateway::remembering(seen.clone());
    gateway
        .ask_member(secondary, &credentials)
        .await
        .expect("answered from memory");
    assert!(gateway
        .observe_set(&members, "rs0", &credentials)
        .await
        .is_err());
    assert!(gateway.forget_answers_from_memory());
    let refused = gateway
        .ask_member(secondary, &credentials)
        .await
        .unwrap_err();
    assert_eq!(
        refused.code(),
        Some(codes::AUTHENTICATION_FAILED),
        "{refused}"
    );
    gateway.close().await;
    network.stop_all();
}
