use super::*;
use mongod_sim::pki::{LeafFiles, Pki, Validity};
use std::time::{SystemTime, UNIX_EPOCH};

const VIP: &str = "10.0.0.1";
const DAY: i64 = 86_400;

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn check(files: &LeafFiles, vip: &str) -> Result<CheckedCertificate, CertificateFault> {
    let files = CertificateFiles {
        certificate: &files.certificate,
        key: &files.key,
        ca: &files.ca,
    };
    check_certificate(&files, vip, now())
}

/// A CA `ca` and a leaf `m1` of it for `ips`, valid at `validity`.
fn leaf(pki: &Pki, ips: &[&str], validity: Validity) -> LeafFiles {
    pki.ca("ca");
    pki.leaf_files("ca", "m1", ips, "/O=MongoDB/OU=rs0/CN=m1", validity)
}

#[test]
fn a_leaf_for_the_vip_passes_with_its_dates_and_subject() {
    let pki = Pki::new("cert-good");
    let files = leaf(&pki, &["10.0.0.9", VIP], Validity::Now);
    let checked = check(&files, VIP).unwrap();
    assert_eq!(checked.subject, "CN=m1,OU=rs0,O=MongoDB");
    // Validity::Now: from yesterday for 30 days, to the second it was made.
    assert!(
        (checked.not_before - (now() - DAY)).abs() < 60,
        "{checked:?}"
    );
    assert!(
        (checked.not_after - (now() + 30 * DAY)).abs() < 60,
        "{checked:?}"
    );
}

#[test]
fn an_ipv6_vip_is_found_bracketed_or_not() {
    let pki = Pki::new("cert-v6");
    let files = leaf(&pki, &["fd00::1"], Validity::Now);
    assert!(check(&files, "fd00::1").is_ok());
    assert!(check(&files, "[fd00::1]").is_ok());
    assert_eq!(
        check(&files, "[fd00::2]"),
        Err(CertificateFault::VipNotInSans {
            vip: "[fd00::2]".into()
        })
    );
}

#[test]
fn the_vip_must_be_an_ip_san() {
    let pki = Pki::new("cert-vip");
    let files = leaf(&pki, &["10.0.0.2"], Validity::Now);
    let fault = check(&files, VIP).unwrap_err();
    assert_eq!(fault, CertificateFault::VipNotInSans { vip: VIP.into() });
    assert!(fault.to_string().contains("10.0.0.1"), "{fault}");
    assert_eq!(
        check(&files, "mongo.example.org"),
        Err(CertificateFault::VipNotAnIp {
            vip: "mongo.example.org".into()
        })
    );
}

#[test]
fn a_leaf_of_another_ca_is_not_signed() {
    let pki = Pki::new("cert-other-ca");
    let files = leaf(&pki, &[VIP], Validity::Now);
    pki.ca("other");
    let other = std::fs::read(pki.path("other.pem")).unwrap();
    let fault = check(&LeafFiles { ca: other, ..files }, VIP).unwrap_err();
    assert_eq!(
        fault,
        CertificateFault::NotSigned {
            reason: "UnknownIssuer".into()
        }
    );
    assert!(fault.to_string().contains("UnknownIssuer"), "{fault}");
}

#[test]
fn the_key_of_another_leaf_does_not_match() {
    let pki = Pki::new("cert-key");
    let files = leaf(&pki, &[VIP], Validity::Now);
    let other = pki.leaf_files("ca", "m2", &[VIP], "/CN=m2", Validity::Now);
    assert_eq!(
        check(
            &LeafFiles {
                key: other.key,
                ..files
            },
            VIP
        ),
        Err(CertificateFault::KeyMismatch)
    );
}

#[test]
fn an_expired_leaf_says_so_with_its_date() {
    let pki = Pki::new("cert-expired");
    let files = leaf(&pki, &[VIP], Validity::Expired);
    let fault = check(&files, VIP).unwrap_err();
    let CertificateFault::Expired { not_after } = fault else {
        panic!("{fault:?}");
    };
    assert!((not_after - (now() - DAY)).abs() < 60);
    let date = Timestamp::from_second(not_after).unwrap().to_string();
    assert!(fault.to_string().contains(&date), "{fault}");
}

#[test]
fn a_leaf_not_yet_valid_says_so_with_its_date() {
    let pki = Pki::new("cert-not-yet");
    let files = leaf(&pki, &[VIP], Validity::NotYetValid);
    let fault = check(&files, VIP).unwrap_err();
    let CertificateFault::NotYetValid { not_before } = fault else {
        panic!("{fault:?}");
    };
    assert!((not_before - (now() + DAY)).abs() < 60);
    let date = Timestamp::from_second(not_before).unwrap().to_string();
    assert!(fault.to_string().contains(&date), "{fault}");
}

#[test]
fn garbage_in_each_file_names_that_file() {
    let pki = Pki::new("cert-garbage");
    let files = leaf(&pki, &[VIP], Validity::Now);
    let broken = |label: &str| {
        format!("-----BEGIN {label}-----\nbm90IERFUg==\n-----END {label}-----\n").into_bytes()
    };
    let bad_base64 = b"-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n";
    for (certificate, fault) in [
        (b"garbage".to_vec(), CertificateFault::NoCertificate),
        (Vec::new(), CertificateFault::NoCertificate),
        (bad_base64.to_vec(), CertificateFault::NoCertificate),
        (broken("CERTIFICATE"), CertificateFault::NoCertificate),
    ] {
        let files = LeafFiles {
            certificate,
            key: files.key.clone(),
            ca: files.ca.clone(),
        };
        assert_eq!(check(&files, VIP), Err(fault));
    }
    for (key, fault) in [
        (b"garbage".to_vec(), CertificateFault::NoKey),
        (files.certificate.clone(), CertificateFault::NoKey),
        (broken("PRIVATE KEY"), CertificateFault::UnusableKey),
        (broken("EC PRIVATE KEY"), CertificateFault::UnusableKey),
    ] {
        let files = LeafFiles {
            certificate: files.certificate.clone(),
            key,
            ca: files.ca.clone(),
        };
        assert_eq!(check(&files, VIP), Err(fault));
    }
    for ca in [
        b"garbage".to_vec(),
        bad_base64.to_vec(),
        broken("CERTIFICATE"),
    ] {
        let files = LeafFiles {
            certificate: files.certificate.clone(),
            key: files.key.clone(),
            ca,
        };
        assert_eq!(check(&files, VIP), Err(CertificateFault::NoCa));
    }
    for (fault, file) in [
        (CertificateFault::NoCertificate, "tls.crt"),
        (CertificateFault::NoKey, "tls.key"),
        (CertificateFault::UnusableKey, "tls.key"),
        (CertificateFault::NoCa, "ca.crt"),
        (CertificateFault::KeyMismatch, "tls.key"),
    ] {
        assert!(fault.to_string().contains(file), "{fault}");
    }
}

#[test]
fn a_leaf_without_client_auth_is_refused() {
    let mut pki = Pki::new("cert-eku");
    pki.ca("ca");
    pki.extended_key_usage = "serverAuth";
    let server_only = pki.leaf_files("ca", "server", &[VIP], "/CN=s", Validity::Now);
    let fault = check(&server_only, VIP).unwrap_err();
    assert_eq!(
        fault,
        CertificateFault::MissingUsage {
            usage: "clientAuth"
        }
    );
    assert!(fault.to_string().contains("clientAuth"), "{fault}");
    pki.extended_key_usage = "clientAuth";
    let client_only = pki.leaf_files("ca", "client", &[VIP], "/CN=c", Validity::Now);
    assert_eq!(
        check(&client_only, VIP),
        Err(CertificateFault::MissingUsage {
            usage: "serverAuth"
        })
    );
}

#[test]
fn a_bundle_of_two_cas_verifies_a_leaf_of_either() {
    let pki = Pki::new("cert-bundle");
    pki.ca("old");
    pki.ca("new");
    let bundle = [
        std::fs::read(pki.path("old.pem")).unwrap(),
        std::fs::read(pki.path("new.pem")).unwrap(),
    ]
    .concat();
    for ca in ["old", "new"] {
        let files = pki.leaf_files(
            ca,
            &format!("m-{ca}"),
            &[VIP],
            &format!("/CN={ca}"),
            Validity::Now,
        );
        let files = LeafFiles {
            ca: bundle.clone(),
            ..files
        };
        assert_eq!(check(&files, VIP).unwrap().subject, format!("CN={ca}"));
    }
}

#[test]
fn an_intermediate_in_tls_crt_chains_to_the_root_in_ca_crt() {
    let pki = Pki::new("cert-intermediate");
    pki.ca("root");
    let intermediate = std::fs::read(pki.intermediate("root", "issuer")).unwrap();
    let files = pki.leaf_files("issuer", "m1", &[VIP], "/CN=m1", Validity::Now);
    let root = std::fs::read(pki.path("root.pem")).unwrap();
    let chained = LeafFiles {
        certificate: [files.certificate.clone(), intermediate].concat(),
        key: files.key.clone(),
        ca: root.clone(),
    };
    assert_eq!(check(&chained, VIP).unwrap().subject, "CN=m1");
    // Without the intermediate, the leaf does not reach the root.
    let unchained = LeafFiles { ca: root, ..files };
    assert!(matches!(
        check(&unchained, VIP),
        Err(CertificateFault::NotSigned { .. })
    ));
}

#[test]
fn no_fault_shows_key_material() {
    let pki = Pki::new("cert-secret");
    let files = leaf(&pki, &["10.0.0.2"], Validity::Now);
    let other = pki.leaf_files("ca", "m2", &[VIP], "/CN=m2", Validity::Now);
    let key = String::from_utf8(files.key.clone()).unwrap();
    let body: Vec<&str> = key
        .lines()
        .filter(|line| !line.starts_with("-----"))
        .collect();
    for fault in [
        check(&files, VIP).unwrap_err(),
        check(
            &LeafFiles {
                key: other.key,
                ..files
            },
            VIP,
        )
        .unwrap_err(),
    ] {
        let shown = format!("{fault} {fault:?}");
        assert!(body.iter().all(|line| !shown.contains(line)), "{shown}");
    }
}
