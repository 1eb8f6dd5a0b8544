//! The files the driver reads to connect with TLS: the CA bundle, and the
//! member certificate with its key, which the operator presents as its
//! client certificate (the driver takes them only as files).

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::tls::MemberTls;

/// The directory of the files, private to the operator's user.
const DIRECTORY: &str = "mongodb-member-operator-tls";

/// Where a pass's clients find their TLS files.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ClientTls {
    /// The CA bundle.
    pub ca_file: PathBuf,
    /// The certificate then its key.
    pub certificate_key_file: PathBuf,
}

impl ClientTls {
    /// Writes `tls`'s files, once per content (named by their digest), mode
    /// 0600 in a directory of mode 0700 under the temporary directory.
    pub fn write(tls: &MemberTls) -> std::io::Result<ClientTls> {
        let directory = std::env::temp_dir().join(DIRECTORY);
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&directory)?;
        Ok(ClientTls {
            ca_file: write_once(&directory, "ca", &tls.ca)?,
            certificate_key_file: write_once(&directory, "client", &tls.certificate_key)?,
        })
    }
}

/// `<kind>-<digest>.pem` holding `content`, written unless it exists
/// (through a temporary name, so a reader never sees half a file).
fn write_once(directory: &Path, kind: &str, content: &[u8]) -> std::io::Result<PathBuf> {
    let digest = crate::build::sha256_hex(content);
    let path = directory.join(format!("{kind}-{}.pem", &digest[..16]));
    if path.exists() {
        return Ok(path);
    }
    let partial = directory.join(format!(".{kind}-{}.{}", &digest[..16], std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&partial)?;
    file.write_all(content)?;
    file.sync_all()?;
    std::fs::rename(&partial, &path)?;
    Ok(path)
}
