//! Stage `rotate` (TLS and MongoDB I/O): from 5.0, a local member that
//! serves another certificate than its files hold loads them with
//! `rotateCertificates`, one member a pass, checked by the certificate it
//! serves after. The kubelet refreshes the mounted files within its sync
//! period; until it has, the member still serves the previous certificate
//! and is asked again a few seconds later. Before 5.0 the roll restarts the
//! members instead ([`crate::tls::rotation::restart_digest`]). Once every
//! local member was seen serving the planned certificate, none is asked
//! until it changes: a restarted member reads its files at start.

use std::time::Duration;

use kube::runtime::events::EventType;

use super::context::PassContext;
use super::events::Notice;
use super::observe::MongoAnswers;
use crate::api::{MongoDB, TlsMode};
use crate::build::sha256_hex;
use crate::hostconf::MemberAddress;
use crate::mongo::served::served_certificate;
use crate::tls::rotation::{leaf_of, rotates_in_place, FilesStanding};
use crate::tls::TlsPlanned;
use crate::validate::Validated;

/// How soon the next member is looked at, after one loaded its files.
const NEXT_MEMBER: Duration = Duration::from_secs(1);
/// How soon a member that still serves the previous certificate is asked
/// again (the kubelet's refresh takes up to its sync period, a minute by
/// default).
const ASK_AGAIN: Duration = Duration::from_secs(5);

/// What the stage did.
#[derive(Default)]
pub struct Rotated {
    /// A member still to load its files, and why.
    pub standing: Option<FilesStanding>,
    /// When to look again.
    pub requeue: Option<Duration>,
}

/// Asks the first local member that serves another certificate than its
/// files hold to load them, and checks what it serves after.
pub async fn rotate(
    ctx: &PassContext,
    mongodb: &MongoDB,
    validated: &Validated,
    answers: &MongoAnswers,
    tls: &TlsPlanned,
) -> Rotated {
    let Some(files) = tls.members.as_ref().filter(|m| m.mode != TlsMode::Disabled) else {
        return Rotated::default();
    };
    if !rotates_in_place(&mongodb.spec.image) {
        return Rotated::default();
    }
    let Some(leaf) = leaf_of(&files.certificate_key) else {
        return Rotated::default();
    };
    let digest = sha256_hex(&leaf);
    if ctx.memory().served_certificate.as_ref() == Some(&digest) {
        return Rotated::default();
    }
    let mut every_one_seen = true;
    for member in validated.hostconf.local_to(&validated.vip) {
        let member = &member.address;
        if !answers.probes.contains_key(member) {
            every_one_seen = false;
            continue;
        }
        match served_certificate(member, files).await {
            Ok(served) if served == leaf => continue,
            Ok(_) => {}
            Err(error) => {
                tracing::debug!(%member, %error, "the certificate served could not be read");
                every_one_seen = false;
                continue;
            }
        }
        if let Err(error) = ctx
            .gateway
            .rotate_certificates(member, &validated.root)
            .await
        {
            let why = format!("rotateCertificates failed: {error}");
            return waiting(member, why);
        }
        return match served_certificate(member, files).await {
            Ok(served) if served == leaf => {
                let message = format!("{member} serves the new certificate");
                tracing::info!(%member, "loaded the new certificate");
                let reason = Notice::CertificateRotated.into();
                ctx.events.publish(EventType::Normal, reason, message).await;
                Rotated {
                    standing: None,
                    requeue: Some(NEXT_MEMBER),
                }
            }
            _ => waiting(
                member,
                "it still serves the previous certificate: the kubelet has not refreshed its \
                 files yet (within its sync period)"
                    .to_string(),
            ),
        };
    }
    if every_one_seen {
        ctx.remember(|memory| memory.served_certificate = Some(digest));
    }
    Rotated::default()
}

fn waiting(member: &MemberAddress, why: String) -> Rotated {
    tracing::info!(%member, why, "waiting for a member to load its certificate");
    Rotated {
        standing: Some(FilesStanding::Rotating {
            member: member.clone(),
            why,
        }),
        requeue: Some(ASK_AGAIN),
    }
}
