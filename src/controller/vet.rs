//! Stage `vet` (TLS I/O): a certificate or CA bundle that differs from the
//! files the members mount is given to them only once every member that
//! runs TLS, local or remote, dialled at its `VIP:NodePort`, takes it; a new
//! bundle first, with the certificate the members run
//! ([`crate::tls::rotation`]). Until then they keep the files they run,
//! unless those fail the checks themselves (expired: keeping them saves
//! nothing).

use futures::future::join_all;

use crate::mongo::served::{takes, PeerTlsError};
use crate::tls::modes::ModesRun;
use crate::tls::rotation::{files_change, members_to_vet, with_files, FilesChange, MountedFiles};
use crate::tls::{MemberTls, TlsPlanned};
use crate::validate::Validated;

/// `planned` as given to the members: its files when nothing differs from
/// the `mounted` ones or every member takes them, the mounted certificate
/// with a new bundle while the bundle goes first; the mounted files, with
/// why, when a member does not take the new ones.
pub async fn vet(
    mut planned: TlsPlanned,
    mounted: Option<&MountedFiles>,
    validated: &Validated,
    modes_run: Option<&ModesRun>,
    now_unix_seconds: i64,
) -> (TlsPlanned, Option<PeerTlsError>) {
    let (Some(members), Some(mounted)) = (planned.members.clone(), mounted) else {
        return (planned, None);
    };
    let (vip, now) = (validated.vip.as_str(), now_unix_seconds);
    let candidate = match files_change(Some(mounted), &members) {
        FilesChange::None => return (planned, None),
        FilesChange::Certificate => members,
        FilesChange::Bundle => {
            with_files(&members, &mounted.certificate_key, &members.ca, vip, now).unwrap_or(members)
        }
    };
    let peers = members_to_vet(&validated.hostconf, modes_run);
    let Some(refusal) = first_refusal(&peers, &candidate).await else {
        tracing::info!("every member takes the new certificate files");
        planned.members = Some(candidate);
        return (planned, None);
    };
    match with_files(&candidate, &mounted.certificate_key, &mounted.ca, vip, now) {
        Ok(kept) => {
            tracing::info!(%refusal, "the new certificate files are held");
            planned.members = Some(kept);
            (planned, Some(refusal))
        }
        Err(fault) => {
            tracing::warn!(%refusal, %fault, "the files the members run fail the checks: the new ones are given");
            (planned, None)
        }
    }
}

/// The first of `peers` that does not take `files`, and why.
async fn first_refusal(
    peers: &[crate::hostconf::MemberAddress],
    files: &MemberTls,
) -> Option<PeerTlsError> {
    let answers = join_all(peers.iter().map(|peer| takes(peer, files))).await;
    answers.into_iter().find_map(Result::err)
}
