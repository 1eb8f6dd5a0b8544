//! What a restart must keep with every other member of the set: a keyfile
//! key in common and a TLS mode within one step, each from what the members'
//! operators reported.

use super::{LocalPod, RollInput, RollWait};
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
