use k8s_openapi::ByteString;
use mongod_sim::pki::{LeafFiles, Pki, Validity};

use super::*;
use crate::hostconf::HostConfMember;
use crate::tls::tests::now;

const VIP: &str = "10.0.0.1";

/// The members' TLS from `files`, as stage `tls` gives it.
fn planned(files: &LeafFiles) -> MemberTls {
    let certificate_files = CertificateFiles {
        certificate: &files.certificate,
        key: &files.key,
        ca: &files.ca,
    };
    MemberTls {
        mode: TlsMode::RequireTls,
        cluster_auth: crate::api::ClusterAuthMode::KeyFile,
        allow_connections_without_certificates: false,
        certificate_key: [files.certificate.clone(), files.key.clone()].concat(),
        ca: files.ca.clone(),
        certificate: check_certificate(&certificate_files, VIP, now()).unwrap(),
    }
}

fn mounted(tls: &MemberTls) -> MountedFiles {
    let secret = Secret {
        data: Some(
            [
                (TLS_CERTIFICATE_KEY_FILE, &tls.certificate_key),
                (TLS_CA_FILE, &tls.ca),
            ]
            .into_iter()
            .map(|(key, bytes)| (key.to_string(), ByteString(bytes.clone())))
            .collect(),
        ),
        ..Secret::default()
    };
    MountedFiles::of(&secret).unwrap()
}

#[test]
fn a_new_certificate_or_bundle_is_told_apart_from_the_mounted_files() {
    let pki = Pki::new("rotation-change");
    pki.ca("old");
    pki.ca("new");
    let first = planned(&pki.leaf_files("old", "a", &[VIP], "/O=lab/CN=a", Validity::Now));
    let renewed = planned(&pki.leaf_files("old", "b", &[VIP], "/O=lab/CN=a", Validity::Now));
    let reissued = planned(&pki.leaf_files("new", "c", &[VIP], "/O=lab/CN=a", Validity::Now));
    let running = mounted(&first);
    assert_eq!(files_change(None, &first), FilesChange::None);
    assert_eq!(files_change(Some(&running), &first), FilesChange::None);
    assert_eq!(
        files_change(Some(&running), &renewed),
        FilesChange::Certificate
    );
    assert_eq!(files_change(Some(&running), &reissued), FilesChange::Bundle);
    assert!(!format!("{running:?}").contains("PRIVATE KEY"));
}

#[test]
fn held_files_are_the_mounted_ones_checked_again() {
    let pki = Pki::new("rotation-kept");
    pki.ca("ca");
    let first = planned(&pki.leaf_files("ca", "a", &[VIP], "/O=lab/CN=a", Validity::Now));
    let renewed = planned(&pki.leaf_files("ca", "b", &[VIP], "/O=lab/CN=b", Validity::Now));
    let running = mounted(&first);
    let held = with_files(&renewed, &running.certificate_key, &running.ca, VIP, now()).unwrap();
    assert_eq!(held.certificate_key, first.certificate_key);
    assert_eq!(held.ca, first.ca);
    assert_eq!(held.certificate.subject, "CN=a,O=lab");
    assert_eq!(held.mode, renewed.mode);

    let expired = pki.leaf_files("ca", "x", &[VIP], "/O=lab/CN=x", Validity::Expired);
    let expired = MountedFiles {
        certificate_key: [expired.certificate, expired.key].concat(),
        ca: expired.ca,
    };
    assert!(matches!(
        with_files(&renewed, &expired.certificate_key, &expired.ca, VIP, now()),
        Err(CertificateFault::Expired { .. })
    ));
}

#[test]
fn a_restart_loads_a_new_bundle_always_and_a_new_certificate_before_5_0() {
    let pki = Pki::new("rotation-restart");
    pki.ca("old");
    pki.ca("new");
    let first = planned(&pki.leaf_files("old", "a", &[VIP], "/O=lab/CN=a", Validity::Now));
    let renewed = planned(&pki.leaf_files("old", "b", &[VIP], "/O=lab/CN=a", Validity::Now));
    let both = MemberTls {
        ca: [
            first.ca.clone(),
            std::fs::read(pki.path("new.pem")).unwrap(),
        ]
        .concat(),
        ..first.clone()
    };
    assert_eq!(
        restart_digest(&first, true),
        restart_digest(&renewed, true),
        "from 5.0 a new certificate is loaded in place"
    );
    assert_ne!(
        restart_digest(&first, false),
        restart_digest(&renewed, false)
    );
    assert_ne!(restart_digest(&first, true), restart_digest(&both, true));
    assert!(rotates_in_place("mongo:5.0.31"));
    assert!(rotates_in_place("registry.example/mongo:8.0"));
    assert!(!rotates_in_place("mongo:4.4.29"));
    assert!(!rotates_in_place("mongo:latest"));
}

#[test]
fn the_served_certificate_is_the_first_of_the_file() {
    let pki = Pki::new("rotation-leaf");
    pki.ca("ca");
    let files = pki.leaf_files("ca", "a", &[VIP], "/O=lab/CN=a", Validity::Now);
    let leaf = leaf_of(&planned(&files).certificate_key).unwrap();
    let expected = CertificateDer::from_pem_slice(&files.certificate).unwrap();
    assert_eq!(leaf, expected.as_ref());
    assert_eq!(leaf_of(b"no certificate"), None);
}

#[test]
fn members_at_disabled_are_not_asked_to_take_new_files() {
    let member = |port: u16| MemberAddress {
        host: "10.0.0.1".into(),
        port,
    };
    let hostconf = HostConf {
        members: [1, 2, 3]
            .map(|port| HostConfMember {
                address: member(port),
                arbiter: false,
                votes: None,
                priority: None,
                hidden: false,
                tags: Default::default(),
            })
            .to_vec(),
    };
    assert_eq!(members_to_vet(&hostconf, None).len(), 3);
    let run = ModesRun::from([
        (member(1), Some(TlsMode::AllowTls.into())),
        (member(2), Some(TlsMode::Disabled.into())),
        (member(3), None),
    ]);
    assert_eq!(
        members_to_vet(&hostconf, Some(&run)),
        vec![member(1), member(3)]
    );
}
