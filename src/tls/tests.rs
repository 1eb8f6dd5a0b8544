use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use mongod_sim::pki::{LeafFiles, Pki, Validity};

use super::*;
use crate::api::{ClusterAuthMode, SecretRef, TlsSettings};
use crate::build::fixtures::mongodb;
use crate::tls::modes::TlsStep;

const VIP: &str = "10.0.0.1";

/// The clock, for checks made now.
pub(super) fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn with_tls(mode: TlsMode) -> MongoDB {
    let mut mongodb = mongodb();
    mongodb.spec.tls = Some(TlsSettings {
        mode,
        certificate_secret_ref: Some(SecretRef {
            name: "member-certificate".into(),
        }),
        allow_connections_without_certificates: false,
        cluster_auth_mode: Default::default(),
    });
    mongodb
}

fn secret(files: &LeafFiles, leave_out: &str) -> Secret {
    let data = [
        (CERTIFICATE_KEY, &files.certificate),
        (PRIVATE_KEY_KEY, &files.key),
        (CA_KEY, &files.ca),
    ]
    .into_iter()
    .filter(|(key, _)| *key != leave_out)
    .map(|(key, bytes)| (key.to_string(), ByteString(bytes.clone())))
    .collect::<BTreeMap<_, _>>();
    Secret {
        data: Some(data),
        ..Secret::default()
    }
}

fn good_leaf(pki: &Pki) -> LeafFiles {
    pki.ca("ca");
    pki.leaf_files("ca", "m", &[VIP], "/O=lab/CN=m", Validity::Now)
}

#[test]
fn without_tls_or_at_disabled_the_members_get_none() {
    let disabled = TlsMode::Disabled;
    assert_eq!(
        member_tls(&mongodb(), None, VIP, disabled.into(), now()),
        Ok(None)
    );
    let spec_disabled = with_tls(disabled);
    assert_eq!(
        member_tls(&spec_disabled, None, VIP, disabled.into(), now()),
        Ok(None)
    );
}

#[test]
fn a_checked_certificate_is_given_with_its_key_in_one_file() {
    let pki = Pki::new("member-tls-good");
    let files = good_leaf(&pki);
    let mongodb = with_tls(TlsMode::RequireTls);
    let tls = member_tls(
        &mongodb,
        Some(&secret(&files, "")),
        VIP,
        TlsMode::RequireTls.into(),
        now(),
    )
    .unwrap()
    .unwrap();
    assert_eq!(tls.mode, TlsMode::RequireTls);
    assert!(tls.certificate_key.starts_with(&files.certificate));
    assert!(tls.certificate_key.ends_with(&files.key));
    assert_eq!(tls.ca, files.ca);
    assert_eq!(tls.certificate.subject, "CN=m,O=lab");
    assert!(!format!("{tls:?}").contains("PRIVATE KEY"));
}

#[test]
fn a_missing_secret_key_or_bad_certificate_is_refused_by_name() {
    let mongodb = with_tls(TlsMode::PreferTls);
    assert_eq!(
        member_tls(&mongodb, None, VIP, TlsMode::PreferTls.into(), now()),
        Err(InvalidInput::TlsCertificateMissing {
            name: "member-certificate".into()
        })
    );
    let pki = Pki::new("member-tls-bad");
    let files = good_leaf(&pki);
    assert_eq!(
        member_tls(
            &mongodb,
            Some(&secret(&files, CA_KEY)),
            VIP,
            TlsMode::PreferTls.into(),
            now()
        ),
        Err(InvalidInput::TlsCertificateKeyMissing {
            secret: "member-certificate".into(),
            key: CA_KEY,
        })
    );
    let elsewhere = member_tls(
        &mongodb,
        Some(&secret(&files, "")),
        "10.9.9.9",
        TlsMode::Disabled.into(),
        now(),
    );
    assert_eq!(
        elsewhere,
        Err(InvalidInput::TlsCertificateInvalid {
            secret: "member-certificate".into(),
            fault: CertificateFault::VipNotInSans {
                vip: "10.9.9.9".into()
            },
        })
    );
    let reason: &str = (&elsewhere.unwrap_err()).into();
    assert_eq!(reason, "TLSCertificateInvalid");
}

#[test]
fn a_step_down_keeps_the_certificate_until_the_members_run_disabled() {
    let pki = Pki::new("member-tls-down");
    let files = good_leaf(&pki);
    let secret = secret(&files, "");
    let spec_disabled = with_tls(TlsMode::Disabled);
    let stepping = member_tls(
        &spec_disabled,
        Some(&secret),
        VIP,
        TlsMode::AllowTls.into(),
        now(),
    );
    assert_eq!(stepping.unwrap().unwrap().mode, TlsMode::AllowTls);
    assert_eq!(
        member_tls(&mongodb(), None, VIP, TlsMode::PreferTls.into(), now()),
        Err(InvalidInput::TlsCertificateStillNeeded {
            running: TlsMode::PreferTls
        })
    );
    let first_step = member_tls(
        &with_tls(TlsMode::RequireTls),
        Some(&secret),
        VIP,
        TlsMode::Disabled.into(),
        now(),
    );
    assert_eq!(first_step.unwrap().unwrap().mode, TlsMode::Disabled);
}

#[test]
fn membership_is_the_subjects_dc_o_and_ou_sorted() {
    assert_eq!(membership("CN=m,OU=rs0,O=MongoDB"), "O=MongoDB,OU=rs0");
    assert_eq!(
        membership("CN=a\\,b,OU=x+DC=example,DC=com"),
        "DC=com,DC=example,OU=x"
    );
    assert_eq!(membership("CN=m"), "");
}

#[test]
fn x509_membership_needs_a_subject_naming_it() {
    let pki = Pki::new("member-tls-x509");
    pki.ca("ca");
    let bare = pki.leaf_files("ca", "m", &[VIP], "/CN=m", Validity::Now);
    let mut mongodb = with_tls(TlsMode::RequireTls);
    let x509 = TlsStep::of(TlsMode::RequireTls, ClusterAuthMode::X509);
    let keyfile = member_tls(&mongodb, Some(&secret(&bare, "")), VIP, x509, now());
    assert!(
        matches!(
            keyfile,
            Err(InvalidInput::TlsCertificateInvalid {
                fault: CertificateFault::NoMembershipAttributes { .. },
                ..
            })
        ),
        "{keyfile:?}"
    );
    mongodb.spec.tls.as_mut().unwrap().cluster_auth_mode = ClusterAuthMode::SendKeyFile;
    let required = TlsMode::RequireTls.into();
    assert!(member_tls(&mongodb, Some(&secret(&bare, "")), VIP, required, now()).is_err());
    let named = good_leaf(&pki);
    let tls = member_tls(&mongodb, Some(&secret(&named, "")), VIP, x509, now())
        .unwrap()
        .unwrap();
    assert_eq!(tls.cluster_auth, ClusterAuthMode::X509);
}
