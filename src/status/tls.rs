//! With `spec.tls`: condition `TLSReady` and the certificate in status.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::conditions::Verdict;
use super::{condition, ConditionType, StatusInput};
use crate::api::{TlsMode, TlsStatus};
use crate::hostconf::MemberAddress;
use crate::member::MemberSlot;
use crate::tls::CheckedCertificate;

/// A certificate expiring sooner than this is announced (cert-manager
/// renews at two thirds of a 90-day certificate's life, 30 days before).
const EXPIRING_WITHIN_SECONDS: i64 = 21 * 86_400;

/// What a pass with `spec.tls` saw of TLS.
#[derive(Clone, Copy, Debug)]
pub struct TlsSeen<'a> {
    /// The mode the members are built with.
    pub mode: TlsMode,
    /// The certificate they are given (`None` at `disabled`).
    pub certificate: Option<&'a CheckedCertificate>,
    /// The mode each local data member that answered runs.
    pub modes: &'a BTreeMap<MemberAddress, TlsMode>,
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
    /// A local data member does not run the spec's mode yet, or did not say.
    #[strum(serialize = "TLSWaitingForMembers")]
    TlsWaitingForMembers,
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
    let mode = seen.mode.as_str();
    let waiting: Vec<String> = input
        .local_members
        .iter()
        .filter(|view| matches!(view.slot, MemberSlot::Data(_)))
        .filter_map(|view| {
            let host = view.host.as_ref()?;
            match seen.modes.get(host) {
                Some(running) if *running == seen.mode => None,
                Some(running) => Some(format!("{host} runs {}", running.as_str())),
                None => Some(format!("{host} did not say")),
            }
        })
        .collect();
    let (ready, reason, message) = if !waiting.is_empty() {
        let message = format!("waiting for {mode} on {}", waiting.join(", "));
        (false, TlsReason::TlsWaitingForMembers, message)
    } else {
        match seen.certificate.filter(|c| expiring(c, &input.now)) {
            Some(certificate) => {
                let message = format!(
                    "every local member runs {mode}; the certificate expires at {}: renew it",
                    time(certificate.not_after).map_or_else(String::new, |t| t.0.to_string())
                );
                (true, TlsReason::TlsCertificateExpiring, message)
            }
            None => (
                true,
                TlsReason::TlsReady,
                format!("every local member runs {mode}"),
            ),
        }
    };
    Some(Verdict::new(ready, reason.into(), message))
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
