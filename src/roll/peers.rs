//! What a restart must keep with every other member of the set: a keyfile
//! key in common, a TLS mode within one step, and with x.509 membership a
//! certificate that names the same membership, each from what the members'
//! operators reported.

use super::{LocalPod, RollInput, RollWait};
use crate::api::ClusterAuthMode;
use crate::keyfile::restart_keeps_a_shared_key;
use crate::tls::modes::restart_keeps_modes_adjacent;

/// A member whose template runs other keys than its pod is restarted only
/// onto keys every other member of the config runs one of
/// ([`restart_keeps_a_shared_key`]): otherwise its peers would refuse it.
pub(super) fn keeps_a_shared_key(input: &RollInput, candidate: &LocalPod) -> Result<(), RollWait> {
    let running = candidate.pod.as_ref().and_then(|pod| pod.keyfile.as_ref());
    let (Some(desired), Some(running)) = (&candidate.desired_keyfile, running) else {
        return Ok(());
    };
    if desired == running {
        return Ok(());
    }
    restart_keeps_a_shared_key(&candidate.address, desired, &input.keys_run()).map_err(|peer| {
        RollWait::KeyfileWouldShareNoKey {
            member: candidate.address.clone(),
            peer,
        }
    })
}

/// A member whose template runs another TLS mode than its pod is restarted
/// only while every other member's reported mode stays within one step of
/// it ([`restart_keeps_modes_adjacent`]): two steps apart, one member
/// refuses what the other dials.
pub(super) fn keeps_modes_adjacent(
    input: &RollInput,
    candidate: &LocalPod,
) -> Result<(), RollWait> {
    let Some(running) = candidate.pod.as_ref().map(|pod| pod.tls_mode) else {
        return Ok(());
    };
    if running == candidate.desired_tls_mode {
        return Ok(());
    }
    restart_keeps_modes_adjacent(
        &candidate.address,
        candidate.desired_tls_mode,
        &input.modes_run(),
    )
    .map_err(|(peer, peer_mode)| RollWait::TlsModesWouldSpanTwoSteps {
        member: candidate.address.clone(),
        mode: candidate.desired_tls_mode,
        peer,
        peer_mode,
    })
}

/// A member restarted onto a cluster authentication mode other than
/// `keyFile` must name, in its certificate, the membership every other
/// member's certificate names (reported by their operators): mongod takes a
/// peer's certificate as a member's only when their subjects agree on DC, O
/// and OU, and the first member sending its certificate would be refused.
pub(super) fn keeps_one_membership(
    input: &RollInput,
    candidate: &LocalPod,
) -> Result<(), RollWait> {
    let desired = candidate.desired_tls_mode;
    let running = candidate.pod.as_ref().map(|pod| pod.tls_mode);
    if desired.auth == ClusterAuthMode::KeyFile || running == Some(desired) {
        return Ok(());
    }
    let membership = candidate.membership.clone().unwrap_or_default();
    let others = input
        .set
        .config
        .members
        .iter()
        .filter(|m| m.host != candidate.address);
    for other in others {
        let peer_membership = input
            .reports
            .get(&other.host)
            .and_then(|report| report.membership.clone());
        if membership.is_empty() || peer_membership.as_ref() != Some(&membership) {
            return Err(RollWait::X509MembershipDiffers {
                member: candidate.address.clone(),
                mode: desired,
                membership,
                peer: other.host.clone(),
                peer_membership,
            });
        }
    }
    Ok(())
}
