//! Why the input of a pass cannot be used, said so that the reader knows what
//! to change.

use std::fmt;

use super::MAX_STATEFUL_SET_NAME;
use crate::api::{TlsMode, DEFAULT_IMAGE, VIP_LABEL};
use crate::build::BuildError;
use crate::hostconf::HostConfError;
use crate::tls::CertificateFault;

/// Why the input of a pass cannot be used; the variant's name is the bounded
/// reason of the condition and the Event.
#[derive(Debug, Clone, PartialEq, thiserror::Error, strum::IntoStaticStr, strum::VariantNames)]
pub enum InvalidInput {
    /// The VIP label is absent or blank.
    #[error(
        "label {VIP_LABEL} is missing: the control plane sets it to this cluster's VIP, \
         which every member address starts with"
    )]
    VipLabelMissing,
    /// The VIP label is not an address.
    #[error("label {VIP_LABEL} is {vip:?}, not an IP address or host name")]
    VipLabelInvalid {
        /// The label's value.
        vip: String,
    },
    /// The hostconf ConfigMap does not exist.
    #[error(
        "ConfigMap {name} (spec.memberConfigRef) does not exist yet; the control plane \
         propagates it"
    )]
    HostconfMissing {
        /// The ConfigMap's name.
        name: String,
    },
    /// The hostconf ConfigMap cannot be parsed.
    #[error("ConfigMap {name}: {source}")]
    HostconfInvalid {
        /// The ConfigMap's name.
        name: String,
        /// What is wrong, with the key and line.
        #[source]
        source: Box<HostConfError>,
    },
    /// The custom config ConfigMap does not exist.
    #[error(
        "ConfigMap {name} (spec.customConfigRef) does not exist yet: the member pods \
         mount it and cannot start without it"
    )]
    CustomConfigMissing {
        /// The ConfigMap's name.
        name: String,
    },
    /// The custom config holds what makes mongod exit at start.
    #[error(
        "ConfigMap {name} (spec.customConfigRef) is refused: {why}; mongod would not start \
         with it, so no pod gets it until it is fixed"
    )]
    CustomConfigRefused {
        /// The ConfigMap's name.
        name: String,
        /// What mongod would refuse.
        why: String,
    },
    /// The credentials Secret does not exist.
    #[error("Secret {name} (spec.credentialsSecretRef) does not exist yet")]
    CredentialsSecretMissing {
        /// The Secret's name.
        name: String,
    },
    /// A credentials value is missing, empty or not text.
    #[error("Secret {secret} {fault}")]
    CredentialsInvalid {
        /// The Secret's name.
        secret: String,
        /// What is wrong with which key.
        fault: CredentialFault,
    },
    /// The keyfile is not one mongod accepts.
    #[error("Secret {secret} key {key:?}: {fault}")]
    KeyfileInvalid {
        /// The Secret's name.
        secret: String,
        /// The keyfile's key.
        key: String,
        /// What is wrong with it.
        fault: KeyfileFault,
    },
    /// The members refuse the root user: its password (or name) is not the
    /// one the replica set holds.
    #[error(
        "the members refuse the root user of Secret {secret} (authentication failed at {}): \
         its username or password is not the one the replica set holds. A new password in \
         every cluster's Secret is set on the set by the rsInit cluster's operator, through \
         the one it remembers; otherwise put the set's root credentials back in the Secret. \
         Nothing is changed here until they authenticate",
        members.join(", ")
    )]
    CredentialsRefused {
        /// The credentials Secret's name.
        secret: String,
        /// The members that refused them.
        members: Vec<String>,
    },
    /// The image runs a MongoDB release older than 4.4.2.
    #[error(
        "spec.image {image} is MongoDB {version}; this operator needs MongoDB 4.4.2 or later \
         (safe reconfig: one voting change at a time, newlyAdded members, commitmentStatus; \
         the hello command, from 4.4.2). \
         Set spec.image to a 4.4.2+ image such as {DEFAULT_IMAGE}; with FedState, set \
         spec.imageSetting.image of the MultiCloudMongoDB (its webhook defaults to mongo:3.6; \
         FedState passes an image change on only with a replicaset or resource change)"
    )]
    UnsupportedMongoDBVersion {
        /// The image.
        image: String,
        /// The version its tag names.
        version: String,
    },
    /// The image's release cannot run on the set's featureCompatibilityVersion.
    #[error(
        "spec.image {image} is refused: {why} (featureCompatibilityVersion {fcv}); MongoDB \
         moves one release at a time: use a {allowed} image, then raise \
         spec.featureCompatibilityVersion once every member runs it"
    )]
    VersionChangeRefused {
        /// The image.
        image: String,
        /// The set's featureCompatibilityVersion.
        fcv: String,
        /// Why it is refused.
        why: String,
        /// The releases allowed.
        allowed: String,
    },
    /// The certificate Secret of `spec.tls` does not exist.
    #[error(
        "Secret {name} (spec.tls.certificateSecretRef) does not exist yet; nothing is built \
         with TLS until it does"
    )]
    #[strum(serialize = "TLSCertificateMissing")]
    TlsCertificateMissing {
        /// The Secret's name.
        name: String,
    },
    /// A key of the certificate Secret is missing or empty.
    #[error(
        "Secret {secret} (spec.tls.certificateSecretRef) has no {key}: it needs tls.crt, \
         tls.key and ca.crt, as cert-manager writes them"
    )]
    #[strum(serialize = "TLSCertificateKeyMissing")]
    TlsCertificateKeyMissing {
        /// The Secret's name.
        secret: String,
        /// The missing key.
        key: &'static str,
    },
    /// The certificate is refused: no member is given it.
    #[error(
        "Secret {secret} (spec.tls.certificateSecretRef): {fault}; no member is given it, \
         and nothing restarts"
    )]
    #[strum(serialize = "TLSCertificateInvalid")]
    TlsCertificateInvalid {
        /// The Secret's name.
        secret: String,
        /// What is wrong with it.
        fault: CertificateFault,
    },
    /// The operator cannot write the TLS files its MongoDB driver reads.
    #[error(
        "the operator cannot write the TLS files of its MongoDB clients under its temporary \
         directory ({why}); give its pod a writable /tmp (the chart mounts an in-memory one)"
    )]
    #[strum(serialize = "TLSClientFilesUnwritable")]
    TlsClientFilesUnwritable {
        /// The operating system's error.
        why: String,
    },
    /// The members still run TLS, but `spec.tls` names no certificate.
    #[error(
        "the members still run TLS ({}) and step down one mode at a time, each with the \
         certificate: set spec.tls.mode to disabled and keep spec.tls.certificateSecretRef \
         until condition TLSReady says every member runs disabled",
        running.as_str()
    )]
    #[strum(serialize = "TLSCertificateStillNeeded")]
    TlsCertificateStillNeeded {
        /// The mode the members are to run.
        running: TlsMode,
    },
    /// A member StatefulSet's name would be too long for Kubernetes.
    #[error(
        "StatefulSet {stateful_set} would be {length} characters long; a StatefulSet name \
         longer than {MAX_STATEFUL_SET_NAME} makes its pods' controller-revision-hash label \
         exceed 63 characters, so no pod could be created. Use a shorter MongoDB name"
    )]
    NameTooLong {
        /// The StatefulSet name.
        stateful_set: String,
        /// Its length.
        length: usize,
    },
    /// The object itself cannot be built from (no uid, no credentials, …).
    #[error(transparent)]
    Spec(#[from] BuildError),
}

impl InvalidInput {
    /// A bounded PascalCase reason: the variant's name, or the build error's.
    pub fn reason(&self) -> &'static str {
        match self {
            InvalidInput::Spec(error) => error.reason(),
            other => other.into(),
        }
    }
}

/// What a key of the credentials Secret holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CredentialRole {
    /// The replica set's keyfile.
    Keyfile,
    /// The root user's name.
    Username,
    /// The root user's password.
    Password,
}

impl CredentialRole {
    /// What the key holds, for people.
    fn holds(self) -> &'static str {
        match self {
            CredentialRole::Keyfile => "the replica set's keyfile",
            CredentialRole::Username => "the root user's name",
            CredentialRole::Password => "the root user's password",
        }
    }

    /// The field of `spec.credentialsSecretRef` that names the key.
    fn spec_field(self) -> &'static str {
        match self {
            CredentialRole::Keyfile => "spec.credentialsSecretRef.keyfileKey",
            CredentialRole::Username => "spec.credentialsSecretRef.usernameKey",
            CredentialRole::Password => "spec.credentialsSecretRef.passwordKey",
        }
    }
}

/// What is wrong with one key of the credentials Secret.
#[derive(Debug, Clone, PartialEq)]
pub enum CredentialFault {
    /// The key is absent.
    Missing {
        /// The key.
        key: String,
        /// What it should hold.
        role: CredentialRole,
    },
    /// The value is not UTF-8.
    NotText {
        /// The key.
        key: String,
        /// What it holds.
        role: CredentialRole,
    },
    /// The value is blank.
    Empty {
        /// The key.
        key: String,
        /// What it should hold.
        role: CredentialRole,
    },
}

impl fmt::Display for CredentialFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CredentialFault::Missing { key, role } => write!(
                f,
                "has no key {key:?}: add {} under it, or set {} to the key that holds it",
                role.holds(),
                role.spec_field()
            ),
            CredentialFault::NotText { key, role } => write!(
                f,
                "key {key:?} is not UTF-8 text: {} must be text",
                role.holds()
            ),
            CredentialFault::Empty { key, role } => {
                write!(f, "key {key:?} is empty: put {} there", role.holds())
            }
        }
    }
}

/// What is wrong with a keyfile. Never shows any of its characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyfileFault {
    /// Too short or too long.
    Length {
        /// How many non-blank characters it holds.
        length: usize,
    },
    /// A character outside base64's alphabet.
    NotBase64 {
        /// The 1-based position of the first such character in the value.
        position: usize,
    },
}

impl fmt::Display for KeyfileFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyfileFault::Length { length } => write!(
                f,
                "a keyfile is 6 to 1024 base64 characters (found {length}); generate one \
                 with `openssl rand -base64 756`"
            ),
            KeyfileFault::NotBase64 { position } => write!(
                f,
                "character {position} is not a base64 character: a keyfile holds only \
                 A-Z, a-z, 0-9, +, / and = (whitespace is ignored); generate one with \
                 `openssl rand -base64 756`"
            ),
        }
    }
}
