//! With `spec.tls`: condition `TLSReady` and the certificate in status.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::conditions::Verdict;
use super::{condition, ConditionType, StatusInput};
use crate::api::{TlsMode, TlsStatus};
use crate::hostconf::MemberAddress;
use crate::member::MemberSlot;
use crate::tls::modes::TlsStep;
use crate::tls::modes::{ModePlan, ModeStanding};
use crate::tls::rotation::FilesStanding;
use crate::tls::CheckedCertificate;

/// A certificate expiring sooner than this is announced (cert-manager
/// renews at two thirds of a 90-day certificate's life, 30 days before).
const EXPIRING_WITHIN_SECONDS: i64 = 21 * 86_400;

/// What a pass with `spec.tls` saw of TLS.
#[derive(Clone, Copy, Debug)]
pub struct TlsSeen<'a> {
    /// `spec.tls.mode` and `clusterAuthMode`.
    pub mode: TlsStep,
    /// The step this cluster's members are built at, and who it waits for.
    pub plan: &'a ModePlan,
    /// The certificate they are given (`None` at `disabled`).
    pub certificate: Option<&'a CheckedCertificate>,
    /// The mode each local data member that answered runs.
    pub modes: &'a BTreeMap<MemberAddress, TlsMode>,
    /// New certificate files held back, or a member still to load them.
    pub files: Option<&'a FilesStanding>,
}

/// `TLSReady`'s reasons.
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::IntoStaticStr, strum::VariantNames)]
pub enum TlsReason {
    /// Every local data member runs the spec's mode.
    #[strum(serialize = "TLSReady")]
    TlsReady,
    /// Every local data member runs the spec's mode; the certificate expires soon.
    #[strum(serialize = "TLSCertificateExpiring")]
    TlsCertificateExpiring,
    /// The set moves towards the spec's mode one step at a time; the members
    /// named do not run this cluster's step yet, all of them local.
    #[strum(serialize = "TLSStepping")]
    TlsStepping,
    /// As `TLSStepping`, waiting for members of other clusters (or members
    /// not reported): a cluster cut off holds the next step.
    #[strum(serialize = "TLSWaitingForPeers")]
    TlsWaitingForPeers,
    /// The members' modes have not been read since the operator started.
    #[strum(serialize = "TLSModesUnknown")]
    TlsModesUnknown,
    /// The set runs the spec's mode, but a local data member answered another
    /// mode, or did not answer.
    #[strum(serialize = "TLSWaitingForMembers")]
    TlsWaitingForMembers,
    /// A new certificate or CA bundle is held back: a member, named, does
    /// not take it. The members keep the files they run.
    #[strum(serialize = "TLSCertificateHeld")]
    TlsCertificateHeld,
    /// A local member, named, still serves the previous certificate: it is
    /// asked to load the new one (`rotateCertificates`).
    #[strum(serialize = "TLSCertificateRotating")]
    TlsCertificateRotating,
}

/// `TLSReady`, with `spec.tls`: whether every local data member runs its
/// mode, and whether the certificate expires soon. `None` without
/// `spec.tls`; with a pass that saw no TLS (invalid input), as it was.
pub(super) fn tls_ready<'a>(input: &StatusInput<'a>) -> Option<Verdict<'a>> {
    input.mongodb.spec.tls.as_ref()?;
    let Some(seen) = input.tls else {
        let previous = condition(input.mongodb.status.as_ref(), ConditionType::TlsReady)?;
        return Some(Verdict::new(
            previous.status == "True",
            &previous.reason,
            previous.message.clone(),
        ));
    };
    let mode = seen.mode.to_string();
    let plan = seen.plan;
    let step = plan.template.to_string();
    let named = |members: &[(MemberAddress, Option<TlsStep>)]| -> String {
        let names: Vec<String> = members
            .iter()
            .map(|(member, mode)| match mode {
                Some(mode) => format!("{member} runs {mode}"),
                None => format!("{member} not reported"),
            })
            .collect();
        names.join(", ")
    };
    let local_vip = input.local_members.iter().find_map(|v| v.host.as_ref());
    if let Some(FilesStanding::Held { why }) = seen.files {
        let message = format!("the new certificate files are held, the members keep theirs: {why}");
        return Some(Verdict::new(
            false,
            TlsReason::TlsCertificateHeld.into(),
            message,
        ));
    }
    let (ready, reason, message) = match plan.standing {
        ModeStanding::ModesUnknown => (
            false,
            TlsReason::TlsModesUnknown,
            format!("built at {step}; the modes the members run are read at the next roll"),
        ),
        ModeStanding::Stepping => {
            let elsewhere = plan.waiting_for.iter().any(|(member, mode)| {
                mode.is_none() || local_vip.is_none_or(|local| local.host != member.host)
            });
            let reason = if elsewhere {
                TlsReason::TlsWaitingForPeers
            } else {
                TlsReason::TlsStepping
            };
            let message = format!(
                "moving to {mode} one step at a time, this cluster at {step}; waiting for {}",
                named(&plan.waiting_for)
            );
            (false, reason, message)
        }
        ModeStanding::InPlace => match seen.files {
            Some(FilesStanding::Rotating { member, why }) => (
                false,
                TlsReason::TlsCertificateRotating,
                format!("{member} is to load its new certificate: {why}"),
            ),
            _ => local_verdict(input, seen),
        },
    };
    Some(Verdict::new(ready, reason.into(), message))
}

/// With every member of the set reported at the spec's mode: whether the
/// local data members say so too, and whether the certificate expires soon.
fn local_verdict(input: &StatusInput, seen: TlsSeen) -> (bool, TlsReason, String) {
    let mode = seen.mode.to_string();
    let waiting: Vec<String> = input
        .local_members
        .iter()
        .filter(|view| matches!(view.slot, MemberSlot::Data(_)))
        .filter_map(|view| {
            let host = view.host.as_ref()?;
            match seen.modes.get(host) {
                Some(running) if *running == seen.mode.mode => None,
                Some(running) => Some(format!("{host} runs {}", running.as_str())),
                None => Some(format!("{host} did not say")),
            }
        })
        .collect();
    if !waiting.is_empty() {
        let message = format!("waiting for {mode} on {}", waiting.join(", "));
        return (false, TlsReason::TlsWaitingForMembers, message);
    }
    match seen.certificate.filter(|c| expiring(c, &input.now)) {
        Some(certificate) => {
            let message = format!(
                "every member runs {mode}; the certificate expires at {}: renew it",
                time(certificate.not_after).map_or_else(String::new, |t| t.0.to_string())
            );
            (true, TlsReason::TlsCertificateExpiring, message)
        }
        None => (
            true,
            TlsReason::TlsReady,
            format!("every member runs {mode}"),
        ),
    }
}

/// `status.tls`: the certificate given to the members, or the last one.
pub(super) fn tls_status(input: &StatusInput, previous: Option<TlsStatus>) -> Option<TlsStatus> {
    input.mongodb.spec.tls.as_ref()?;
    let Some(seen) = input.tls else {
        return previous;
    };
    let certificate = seen.certificate?;
    Some(TlsStatus {
        subject: certificate.subject.clone(),
        not_after: time(certificate.not_after)?,
    })
}

fn expiring(certificate: &CheckedCertificate, now: &Time) -> bool {
    certificate.not_after - now.0.as_second() < EXPIRING_WITHIN_SECONDS
}

fn time(unix_seconds: i64) -> Option<Time> {
    k8s_openapi::jiff::Timestamp::from_second(unix_seconds)
        .ok()
        .map(Time)
}
