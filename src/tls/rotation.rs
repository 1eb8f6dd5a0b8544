//! A running set's certificate or CA bundle changed: what is given to the
//! members, and how they load it.
//!
//! - New files reach the members only once every member that runs TLS takes
//!   them: its served certificate verifies against the new CA bundle, and it
//!   accepts the new certificate as a client's (stage `vet`). Until then the
//!   members keep the files they mount: a bundle that would refuse a peer, or
//!   a certificate a peer would refuse, would cut members off.
//! - A new bundle goes first, with the certificate the members run
//!   ([`with_files`]); the new certificate follows once every member runs
//!   the bundle that trusts it, its own cluster's included. So a CA is
//!   rotated by a bundle holding both CAs, then certificates from the new CA,
//!   then the bundle without the old one; a step given too early is held.
//! - The members mount the files from one Secret without `subPath`, so the
//!   kubelet refreshes them in place. From 5.0 a member loads a new
//!   certificate with `rotateCertificates`, checked by the certificate it
//!   serves after ([`rotates_in_place`]); a new CA bundle, or any new file
//!   before 5.0, is loaded by a restart through the roll ([`restart_digest`]
//!   changes the pod template's revision). The served certificate shows that
//!   `rotateCertificates` read the new files; nothing shows which bundle a
//!   running member verifies with.

use std::fmt;

use k8s_openapi::api::core::v1::Secret;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;

use super::modes::ModesRun;
use super::{check_certificate, CertificateFault, CertificateFiles, MemberTls};
use crate::api::TlsMode;
use crate::build::{sha256_hex, TLS_CA_FILE, TLS_CERTIFICATE_KEY_FILE};
use crate::hostconf::{HostConf, MemberAddress};
use crate::validate::image_release;

/// The files the members mount now: the operator's TLS Secret as read.
#[derive(Clone, PartialEq, Eq)]
pub struct MountedFiles {
    /// The certificate then its key (`mongod.pem`).
    pub certificate_key: Vec<u8>,
    /// The CA bundle (`ca.pem`).
    pub ca: Vec<u8>,
}

/// Never the key.
impl fmt::Debug for MountedFiles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MountedFiles").finish_non_exhaustive()
    }
}

impl MountedFiles {
    /// The files of the operator's TLS Secret, when it holds both.
    pub fn of(secret: &Secret) -> Option<MountedFiles> {
        let data = secret.data.as_ref()?;
        let file = |key: &str| Some(data.get(key)?.0.clone()).filter(|v| !v.is_empty());
        Some(MountedFiles {
            certificate_key: file(TLS_CERTIFICATE_KEY_FILE)?,
            ca: file(TLS_CA_FILE)?,
        })
    }
}

/// Which of the members' files a new Secret changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FilesChange {
    /// None: nothing to check or load.
    None,
    /// The certificate (or its key), with the same CA bundle.
    Certificate,
    /// The CA bundle (and maybe the certificate).
    Bundle,
}

/// What `planned` changes of the `mounted` files (`None` mounted: nothing
/// runs them yet, so nothing to check).
pub fn files_change(mounted: Option<&MountedFiles>, planned: &MemberTls) -> FilesChange {
    match mounted {
        None => FilesChange::None,
        Some(mounted) if mounted.ca != planned.ca => FilesChange::Bundle,
        Some(mounted) if mounted.certificate_key != planned.certificate_key => {
            FilesChange::Certificate
        }
        Some(_) => FilesChange::None,
    }
}

/// The members' TLS at `planned`'s mode with other files — the mounted
/// ones kept, or the mounted certificate with the new bundle — checked as
/// the Secret's are ([`check_certificate`]).
pub fn with_files(
    planned: &MemberTls,
    certificate_key: &[u8],
    ca: &[u8],
    vip: &str,
    now_unix_seconds: i64,
) -> Result<MemberTls, CertificateFault> {
    let files = CertificateFiles {
        certificate: certificate_key,
        key: certificate_key,
        ca,
    };
    let certificate = check_certificate(&files, vip, now_unix_seconds)?;
    Ok(MemberTls {
        certificate_key: certificate_key.to_vec(),
        ca: ca.to_vec(),
        certificate,
        ..planned.clone()
    })
}

/// Whether members of `image` load a new certificate without a restart
/// (`rotateCertificates`, 5.0+). An image whose tag names no release is
/// restarted: that works on every release.
pub fn rotates_in_place(image: &str) -> bool {
    image_release(image).is_some_and(|(_, release)| release >= (5, 0))
}

/// The digest of the files a member loads only by restarting: the CA
/// bundle, and the certificate too unless it `rotates_in_place`. Folded into
/// the pod template's revision, so a change of them rolls the set.
pub fn restart_digest(tls: &MemberTls, rotates_in_place: bool) -> String {
    let mut files = tls.ca.clone();
    if !rotates_in_place {
        files.push(0);
        files.extend_from_slice(&tls.certificate_key);
    }
    sha256_hex(&files)
}

/// The member certificate of a certificate-then-key file (DER), the one a
/// member serves.
pub fn leaf_of(certificate_key: &[u8]) -> Option<Vec<u8>> {
    let first = CertificateDer::pem_slice_iter(certificate_key).next()?;
    Some(first.ok()?.as_ref().to_vec())
}

/// Where the members' files stand, for condition `TLSReady`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FilesStanding {
    /// New files are held back: a member does not take them (`why`).
    Held { why: String },
    /// `member` serves another certificate than its files hold: it is asked
    /// to load them (`why`: what it does meanwhile).
    Rotating { member: MemberAddress, why: String },
}

/// The members new files must be taken by: every member of the set that
/// runs TLS, as the last roll read their modes (one at `disabled` reads the
/// files when it restarts onto TLS); before any roll read them, every member
/// the hostconf lists.
pub fn members_to_vet(hostconf: &HostConf, modes_run: Option<&ModesRun>) -> Vec<MemberAddress> {
    match modes_run {
        Some(run) => run
            .iter()
            .filter(|(_, step)| !step.is_some_and(|s| s.mode == TlsMode::Disabled))
            .map(|(member, _)| member.clone())
            .collect(),
        None => hostconf.members.iter().map(|m| m.address.clone()).collect(),
    }
}

#[cfg(test)]
mod tests;
