//! TLS as mongod runs it (`src/tls/`; TLS.md): the modes of one port
//! (`--tlsMode`), the certificate files, internal authentication by x.509
//! (`--clusterAuthMode`), what mongod refuses at start, and the runtime state
//! that `setParameter` and `rotateCertificates` change.
//!
//! - [`material`]: reading the PEM files, verifying peers with rustls/webpki
//!   and mongod's words for a failure;
//! - `ingress`: one accepted connection, TLS or plain by its first bytes;
//! - `egress`: a member dialling a member (in-process);
//! - `commands`: `getParameter` / `setParameter` of `tlsMode` and
//!   `clusterAuthMode`, `rotateCertificates`.

pub(crate) mod commands;
pub mod der;
pub(crate) mod egress;
pub(crate) mod ingress;
pub mod material;

use crate::version::ServerVersion;
use material::{Material, MaterialError};
use std::sync::{Arc, Mutex};

/// `net.tls.mode` (`SSLParams::SSLModes`; `SSLParams::tlsModeParse` /
/// `tlsModeFormat`, `src/mongo/util/net/ssl_options.cpp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TlsMode {
    #[default]
    Disabled,
    AllowTls,
    PreferTls,
    RequireTls,
}

impl TlsMode {
    pub fn parse(s: &str) -> Option<TlsMode> {
        Some(match s {
            "disabled" => TlsMode::Disabled,
            "allowTLS" => TlsMode::AllowTls,
            "preferTLS" => TlsMode::PreferTls,
            "requireTLS" => TlsMode::RequireTls,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            TlsMode::Disabled => "disabled",
            TlsMode::AllowTls => "allowTLS",
            TlsMode::PreferTls => "preferTLS",
            TlsMode::RequireTls => "requireTLS",
        }
    }

    /// Outgoing connections use TLS from preferTLS on (the manual's
    /// `net.tls.mode`: allowTLS "connections between servers do not use
    /// TLS", preferTLS "connections between servers use TLS").
    pub fn dials_tls(self) -> bool {
        matches!(self, TlsMode::PreferTls | TlsMode::RequireTls)
    }
}

/// `security.clusterAuthMode` (`src/mongo/db/auth/cluster_auth_mode.cpp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterAuthMode {
    KeyFile,
    SendKeyFile,
    SendX509,
    X509,
}

impl ClusterAuthMode {
    pub fn parse(s: &str) -> Option<ClusterAuthMode> {
        Some(match s {
            "keyFile" => ClusterAuthMode::KeyFile,
            "sendKeyFile" => ClusterAuthMode::SendKeyFile,
            "sendX509" => ClusterAuthMode::SendX509,
            "x509" => ClusterAuthMode::X509,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            ClusterAuthMode::KeyFile => "keyFile",
            ClusterAuthMode::SendKeyFile => "sendKeyFile",
            ClusterAuthMode::SendX509 => "sendX509",
            ClusterAuthMode::X509 => "x509",
        }
    }

    /// `allowsX509`: accepts a peer's certificate as its identity.
    pub fn allows_x509(self) -> bool {
        self != ClusterAuthMode::KeyFile
    }

    /// `allowsKeyFile`: accepts a peer's keyfile (SCRAM as `__system`).
    pub fn allows_key_file(self) -> bool {
        self != ClusterAuthMode::X509
    }

    /// `sendsX509`: authenticates to peers with its certificate.
    pub fn sends_x509(self) -> bool {
        matches!(self, ClusterAuthMode::SendX509 | ClusterAuthMode::X509)
    }
}

/// Reads a file of the member's container (`None`: it cannot be read).
pub type FileReader = Arc<dyn Fn(&str) -> Option<Vec<u8>> + Send + Sync>;

/// The TLS options a member starts with (`net.tls.*`,
/// `security.clusterAuthMode`). [`TlsSpec::default`] is a member started
/// without any of them: TLS disabled, keyfile authentication as before.
#[derive(Clone, Default)]
pub struct TlsSpec {
    pub mode: TlsMode,
    /// `--tlsCertificateKeyFile`: the certificate chain and private key it serves.
    pub certificate_key_file: Option<String>,
    /// `--tlsCAFile`: the CAs it verifies peers' certificates against.
    pub ca_file: Option<String>,
    /// `--tlsClusterFile`: what it presents to members it dials (default the
    /// certificate key file).
    pub cluster_file: Option<String>,
    /// `--tlsAllowConnectionsWithoutCertificates`.
    pub allow_connections_without_certificates: bool,
    /// `--clusterAuthMode`; `None`: not given.
    pub cluster_auth_mode: Option<ClusterAuthMode>,
    /// How the files are read (`None`: the process's filesystem).
    pub files: Option<FileReader>,
}

impl std::fmt::Debug for TlsSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSpec")
            .field("mode", &self.mode)
            .field("certificate_key_file", &self.certificate_key_file)
            .field("ca_file", &self.ca_file)
            .field("cluster_file", &self.cluster_file)
            .field(
                "allow_connections_without_certificates",
                &self.allow_connections_without_certificates,
            )
            .field("cluster_auth_mode", &self.cluster_auth_mode)
            .finish()
    }
}

/// Equal options (and the same file reader).
impl PartialEq for TlsSpec {
    fn eq(&self, other: &TlsSpec) -> bool {
        let same_files = match (&self.files, &other.files) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        same_files
            && self.mode == other.mode
            && self.certificate_key_file == other.certificate_key_file
            && self.ca_file == other.ca_file
            && self.cluster_file == other.cluster_file
            && self.allow_connections_without_certificates
                == other.allow_connections_without_certificates
            && self.cluster_auth_mode == other.cluster_auth_mode
    }
}

impl Eq for TlsSpec {}

/// A TLS option mongod refuses at start. Every one ends the process through
/// "Error during global initialization" (log 20574, exit code 1): the
/// checks run in the `SSLServerOptions` startup-options POST initializer
/// and in the SSL manager's initializer, outside the store initializer that
/// exits with 2.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code_name}: {message}")]
pub struct TlsStartupError {
    pub code_name: &'static str,
    pub message: String,
}

impl TlsStartupError {
    fn bad_value(message: &str) -> TlsStartupError {
        TlsStartupError {
            code_name: "BadValue",
            message: message.to_string(),
        }
    }
}

/// mongod's exit code for a failed global initializer (`ExitCode::fail`).
pub const GLOBAL_INIT_EXIT_CODE: i32 = 1;

impl TlsSpec {
    /// mongod's `SSLServerOptions` POST initializer
    /// (`src/mongo/util/net/ssl_options_server.cpp`), in its order, for the
    /// options modelled; `keyfile`: whether `--keyFile` is given.
    pub fn check_options(&self, version: ServerVersion) -> Result<(), TlsStartupError> {
        let mode = self.cluster_auth_mode;
        let allows_x509 = mode.is_some_and(|m| m.allows_x509_at_start(version));
        if self.mode != TlsMode::Disabled {
            if self.certificate_key_file.is_none() {
                return Err(TlsStartupError::bad_value(
                    "need tlsCertificateKeyFile or certificateSelector when TLS is enabled",
                ));
            }
            if self.ca_file.is_none() && allows_x509 {
                return Err(TlsStartupError::bad_value(
                    "No TLS certificate validation can be performed since no CA file has been provided; please specify an tlsCAFile parameter",
                ));
            }
        } else if self.certificate_key_file.is_some()
            || self.cluster_file.is_some()
            || self.ca_file.is_some()
            || self.allow_connections_without_certificates
        {
            return Err(TlsStartupError::bad_value(
                "need to enable TLS via the sslMode/tlsMode flag when using TLS configuration parameters",
            ));
        }
        if mode.is_some_and(|m| m != ClusterAuthMode::KeyFile) && self.mode == TlsMode::Disabled {
            return Err(TlsStartupError::bad_value(
                "need to enable TLS via the tlsMode flag",
            ));
        }
        if self.mode == TlsMode::AllowTls && mode.is_some_and(ClusterAuthMode::sends_x509) {
            return Err(TlsStartupError::bad_value(
                "cannot have x.509 cluster authentication in allowTLS mode",
            ));
        }
        Ok(())
    }

    /// Reads the files as the SSL manager does at start: the chain and key,
    /// the CA file (SERVER-72839: required from 4.4.29, 5.0.25, 6.0.14,
    /// 7.0.6 and in 7.3 on) and the cluster file.
    pub(crate) fn load(&self, version: ServerVersion) -> Result<Option<Material>, MaterialError> {
        if self.mode == TlsMode::Disabled {
            return Ok(None);
        }
        if self.ca_file.is_none() && requires_chain_of_trust(version) {
            return Err(MaterialError::NoChainOfTrust);
        }
        Material::load(self).map(Some)
    }
}

impl ClusterAuthMode {
    /// Which modes need a CA file at start: `x509` alone before 5.0 (the
    /// 4.4 branch compared with `ClusterAuthMode_x509`), every mode that
    /// `allowsX509` from 5.0 on (`clusterAuthMode.allowsX509()`).
    fn allows_x509_at_start(self, version: ServerVersion) -> bool {
        if version >= ServerVersion::new(5, 0, 0) {
            self.allows_x509()
        } else {
            self == ClusterAuthMode::X509
        }
    }
}

/// SERVER-72839 (CVE-2024-1351): TLS without a CA file no longer starts.
fn requires_chain_of_trust(version: ServerVersion) -> bool {
    let first_patch = match (version.major, version.minor) {
        (4, 4) => 29,
        (5, 0) => 25,
        (6, 0) => 14,
        (7, 0) => 6,
        (major, minor) => return (major, minor) >= (7, 3),
    };
    version.patch >= first_patch
}

/// mongod's start as far as TLS goes: the options, then the files; a
/// refusal as the [`StartupError`](crate::fcv::StartupError) the process
/// exits with (log 20574, exit code 1).
pub(crate) fn startup(
    spec: &TlsSpec,
    version: ServerVersion,
) -> Result<Option<Material>, crate::fcv::StartupError> {
    let refused = |message: String| crate::fcv::StartupError {
        exit_code: GLOBAL_INIT_EXIT_CODE,
        log_id: 20574,
        log_msg: "Error during global initialization",
        message,
    };
    spec.check_options(version)
        .map_err(|e| refused(e.to_string()))?;
    spec.load(version)
        .map_err(|e| refused(format!("InvalidSSLConfiguration: {e}")))
}

/// A member's TLS at run time: the mode and cluster authentication mode
/// (`setParameter` moves them on) and the loaded files (`rotateCertificates`
/// replaces them).
pub(crate) struct MemberTls {
    spec: TlsSpec,
    state: Mutex<TlsState>,
}

#[derive(Clone)]
pub(crate) struct TlsState {
    pub mode: TlsMode,
    /// `None`: never given (`getParameter` says "undefined").
    pub cluster_auth_mode: Option<ClusterAuthMode>,
    pub material: Option<Arc<Material>>,
}

impl MemberTls {
    pub fn new(spec: TlsSpec, material: Option<Material>, keyfile: bool) -> MemberTls {
        // With a keyfile and no mode, mongod authenticates its members by
        // keyfile (`ClusterAuthMode::kKeyFile`).
        let cluster_auth_mode = spec
            .cluster_auth_mode
            .or(keyfile.then_some(ClusterAuthMode::KeyFile));
        MemberTls {
            state: Mutex::new(TlsState {
                mode: spec.mode,
                cluster_auth_mode,
                material: material.map(Arc::new),
            }),
            spec,
        }
    }

    pub fn state(&self) -> TlsState {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub(crate) fn update<T>(&self, f: impl FnOnce(&mut TlsState) -> T) -> T {
        f(&mut self.state.lock().unwrap_or_else(|p| p.into_inner()))
    }

    pub fn spec(&self) -> &TlsSpec {
        &self.spec
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(mode: TlsMode) -> TlsSpec {
        TlsSpec {
            mode,
            certificate_key_file: Some("/tls/server.pem".into()),
            ca_file: Some("/tls/ca.pem".into()),
            ..TlsSpec::default()
        }
    }

    const V70: ServerVersion = ServerVersion::new(7, 0, 14);
    const V44: ServerVersion = ServerVersion::new(4, 4, 29);

    #[test]
    fn what_mongod_refuses_at_start() {
        let message = |s: TlsSpec, v| s.check_options(v).unwrap_err().message;
        assert!(spec(TlsMode::RequireTls).check_options(V70).is_ok());
        assert!(TlsSpec::default().check_options(V70).is_ok());
        let no_key = TlsSpec {
            certificate_key_file: None,
            ..spec(TlsMode::RequireTls)
        };
        assert!(message(no_key, V70).starts_with("need tlsCertificateKeyFile"));
        assert!(message(spec(TlsMode::Disabled), V70)
            .starts_with("need to enable TLS via the sslMode/tlsMode flag when using"));
        let x509_plain = TlsSpec {
            cluster_auth_mode: Some(ClusterAuthMode::X509),
            ..TlsSpec::default()
        };
        assert_eq!(
            message(x509_plain, V70),
            "need to enable TLS via the tlsMode flag"
        );
        let allow_x509 = TlsSpec {
            cluster_auth_mode: Some(ClusterAuthMode::SendX509),
            ..spec(TlsMode::AllowTls)
        };
        assert_eq!(
            message(allow_x509, V70),
            "cannot have x.509 cluster authentication in allowTLS mode"
        );
        let no_ca = TlsSpec {
            ca_file: None,
            cluster_auth_mode: Some(ClusterAuthMode::SendKeyFile),
            ..spec(TlsMode::PreferTls)
        };
        assert!(message(no_ca.clone(), V70).starts_with("No TLS certificate validation"));
        assert!(
            no_ca.check_options(V44).is_ok(),
            "4.4 needs a CA for x509 alone"
        );
    }

    #[test]
    fn the_chain_of_trust_is_required_from_the_patches_of_server_72839() {
        for (version, required) in [
            ("4.4.28", false),
            ("4.4.29", true),
            ("5.0.25", true),
            ("6.0.13", false),
            ("7.0.6", true),
            ("7.0.5", false),
            ("8.0.0", true),
        ] {
            let v = ServerVersion::parse(version).unwrap();
            assert_eq!(requires_chain_of_trust(v), required, "{version}");
        }
    }
}
