//! Stage `validate` (pure): turns the objects the `dereference` stage read into
//! the checked input of one pass — this cluster's VIP, the hostconf member
//! list, the shared credentials, the member Services and StatefulSets by slot —
//! or into an [`InvalidInput`] that says precisely what is wrong and what to do.
//!
//! An invalid input stops the pass with a condition and an Event; the operator
//! then waits for the object to change. Messages name objects and keys, never a
//! secret value.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use kube::ResourceExt;

use crate::api::{MongoDB, DEFAULT_IMAGE, VIP_LABEL};
use crate::build::{
    self, names, BuildContext, BuildError, CredentialsSource, MemberTarget,
    MEMBER_ENTRY_ANNOTATION, MEMBER_HOST_ANNOTATION, REVISION_ANNOTATION,
};
use crate::hostconf::{HostConf, HostConfError, HostConfMember, MemberAddress};
use crate::member::{MemberSlot, RecordedEntry, Wanted};
use crate::replset::MemberState;
use crate::roll::PodFacts;

/// The longest StatefulSet name whose pods can be created: the pods carry the
/// label `controller-revision-hash: <name>-<hash of up to 10 characters>`, and
/// a label value has at most 63 characters.
const MAX_STATEFUL_SET_NAME: usize = 52;

/// The shortest and longest keyfile mongod accepts.
const KEYFILE_LENGTH: std::ops::RangeInclusive<usize> = 6..=1024;

/// The objects a `MongoDB` refers to, as read from the API server, unchecked.
#[derive(Clone, Debug, Default)]
pub struct ReferencedObjects {
    /// The hostconf ConfigMap, if it exists.
    pub hostconf: Option<ConfigMap>,
    /// The credentials Secret of `spec.credentialsSecretRef`, if it is set and exists.
    pub credentials_secret: Option<Secret>,
    /// Services carrying the instance label.
    pub services: Vec<Service>,
    /// StatefulSets carrying the instance label.
    pub stateful_sets: Vec<StatefulSet>,
    /// Pods carrying the instance label.
    pub pods: Vec<Pod>,
    /// The custom mongod config ConfigMap of `spec.customConfigRef`, if it is
    /// set and exists.
    pub custom_config: Option<ConfigMap>,
    /// The operator's own `clusterAdmin` credentials Secret, read while the
    /// object is being deleted: leaving must not need the shared credentials.
    pub operator_credentials: Option<Secret>,
}

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
         its username or password is not the one the replica set holds. Put the set's root \
         credentials back in the Secret; nothing is changed until they authenticate",
        members.join(", ")
    )]
    CredentialsRefused {
        /// The credentials Secret's name.
        secret: String,
        /// The members that refused them.
        members: Vec<String>,
    },
    /// The image runs a MongoDB release older than 4.4.
    #[error(
        "spec.image {image} is MongoDB {version}; this operator needs MongoDB 4.4 or later \
         (safe reconfig: one voting change at a time, newlyAdded members, commitmentStatus). \
         Set spec.image to a 4.4+ image such as {DEFAULT_IMAGE}; with FedState, set \
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

/// The root user's name and password. `Debug` never shows the password.
#[derive(Clone, PartialEq, Eq)]
pub struct RootCredentials {
    /// User name.
    pub username: String,
    /// Password.
    pub password: String,
}

impl fmt::Debug for RootCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RootCredentials")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// A propagated member Service, as far as the operator needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct MemberService {
    /// Its selector: the member pods must carry it.
    pub selector: BTreeMap<String, String>,
    /// Its nodePort, once allocated.
    pub node_port: Option<i32>,
}

/// A StatefulSet this operator runs for a member.
#[derive(Clone, Debug, PartialEq)]
pub struct MemberStatefulSetFacts {
    /// The member host recorded on it (kept for when the Service is gone).
    pub recorded_host: Option<MemberAddress>,
    /// The config entry it was last seen as ([`MEMBER_ENTRY_ANNOTATION`]).
    pub recorded_entry: Option<RecordedEntry>,
    /// Whether its pod is running.
    pub pod_running: bool,
    /// Whether its pod is Ready: only then does its Service route to it.
    pub pod_ready: bool,
    /// Its pod (`<statefulset>-0`), when one exists.
    pub pod: Option<PodFacts>,
}

/// The checked input of a pass.
#[derive(Clone, Debug)]
pub struct Validated {
    /// This cluster's VIP.
    pub vip: String,
    /// Every member of the set.
    pub hostconf: HostConf,
    /// The user the operator authenticates as: the root user (the keyfile
    /// beside it checked), or, while leaving without the shared credentials, the
    /// operator's own clusterAdmin.
    pub root: RootCredentials,
    /// Propagated member Services by slot.
    pub services: BTreeMap<MemberSlot, MemberService>,
    /// This operator's member StatefulSets by slot.
    pub stateful_sets: BTreeMap<MemberSlot, MemberStatefulSetFacts>,
    /// What the member pods run with beyond their spec — the content of the
    /// credentials and of the custom config — as a digest that enters the
    /// pods' revision, so a change of content rolls the pods.
    pub content_digest: String,
}

impl Validated {
    /// A slot's address: `VIP:nodePort` from its Service, else the host recorded
    /// on its StatefulSet.
    pub fn address(&self, slot: MemberSlot) -> Option<MemberAddress> {
        let from_service = self
            .services
            .get(&slot)
            .and_then(|s| s.node_port)
            .and_then(|port| u16::try_from(port).ok())
            .map(|port| MemberAddress {
                host: self.vip.clone(),
                port,
            });
        from_service.or_else(|| {
            self.stateful_sets
                .get(&slot)
                .and_then(|s| s.recorded_host.clone())
        })
    }

    /// Whether the pod of `slot`'s StatefulSet is running.
    pub fn pod_running(&self, slot: MemberSlot) -> bool {
        self.stateful_sets.get(&slot).is_some_and(|s| s.pod_running)
    }

    /// Whether the pod of `slot`'s StatefulSet is Ready.
    pub fn pod_ready(&self, slot: MemberSlot) -> bool {
        self.stateful_sets.get(&slot).is_some_and(|s| s.pod_ready)
    }

    /// The members this cluster runs: each wanted slot once its propagated
    /// Service exists.
    pub fn member_targets(&self, wanted: Wanted) -> Vec<MemberTarget> {
        wanted
            .slots()
            .filter_map(|slot| {
                let service = self.services.get(&slot)?;
                Some(MemberTarget {
                    slot,
                    selector: service.selector.clone(),
                    host: self.address(slot).map(|a| a.to_string()),
                })
            })
            .collect()
    }
}

/// Checks everything `mongodb` refers to. While `leaving`, what only a member
/// that stays needs is not asked for: a missing or bad hostconf is replaced by
/// the members status last observed, and missing shared credentials by the
/// operator's own clusterAdmin user.
pub fn validate(
    mongodb: &MongoDB,
    referenced: &ReferencedObjects,
    leaving: bool,
) -> Result<Validated, InvalidInput> {
    let instance = mongodb.name_any();
    let vip = vip(mongodb.labels())?;
    if !leaving {
        supported_image(&mongodb.spec.image)?;
        let fcv = mongodb
            .status
            .as_ref()
            .and_then(|s| s.feature_compatibility_version.as_deref());
        version_change_allowed(&mongodb.spec.image, fcv)?;
        member_names_fit(&instance, Wanted::of(mongodb, false))?;
    }
    let hostconf = match (propagated_hostconf(mongodb, referenced), leaving) {
        (Ok(hostconf), _) => hostconf,
        (Err(_), true) => last_observed_members(mongodb),
        (Err(invalid), false) => return Err(invalid),
    };
    let shared = shared_root_credentials(mongodb, referenced);
    let content_digest = match (&shared, leaving) {
        (Ok((root, keyfile)), false) => content_digest(mongodb, referenced, root, keyfile)?,
        _ => String::new(),
    };
    let root = match (shared, leaving) {
        (Ok((root, _)), _) => root,
        (Err(invalid), true) => operator_admin(referenced).ok_or(invalid)?,
        (Err(invalid), false) => return Err(invalid),
    };
    Ok(Validated {
        vip,
        hostconf,
        root,
        services: member_services(&instance, &referenced.services),
        stateful_sets: member_stateful_sets(mongodb, &referenced.stateful_sets, &referenced.pods),
        content_digest,
    })
}

/// The digest of what the pods run with beyond their spec: an HMAC keyed by
/// the keyfile over the root credentials and the keyfile (so the revision it
/// enters shows nothing about them to whoever cannot read the keyfile), and
/// the custom config's content. A missing custom config is refused: the pods
/// cannot start without it.
fn content_digest(
    mongodb: &MongoDB,
    referenced: &ReferencedObjects,
    root: &RootCredentials,
    keyfile: &str,
) -> Result<String, InvalidInput> {
    let mut content = Vec::new();
    for part in [
        root.username.as_bytes(),
        root.password.as_bytes(),
        keyfile.as_bytes(),
    ] {
        content.extend_from_slice(&(part.len() as u64).to_be_bytes());
        content.extend_from_slice(part);
    }
    if let Some(name) = &mongodb.spec.custom_config_ref {
        let Some(config_map) = &referenced.custom_config else {
            return Err(InvalidInput::CustomConfigMissing { name: name.clone() });
        };
        let data = config_map.data.iter().flatten();
        let binary = config_map.binary_data.iter().flatten();
        for (key, value) in data
            .map(|(k, v)| (k, v.as_bytes()))
            .chain(binary.map(|(k, v)| (k, v.0.as_slice())))
        {
            for part in [key.as_bytes(), value] {
                content.extend_from_slice(&(part.len() as u64).to_be_bytes());
                content.extend_from_slice(part);
            }
        }
    }
    Ok(build::content_digest(keyfile.as_bytes(), &content))
}

/// This cluster's VIP, from the `MongoDB` object's labels.
pub fn vip(labels: &BTreeMap<String, String>) -> Result<String, InvalidInput> {
    let vip = labels.get(VIP_LABEL).map(|v| v.trim()).unwrap_or_default();
    if vip.is_empty() {
        return Err(InvalidInput::VipLabelMissing);
    }
    let unbracketed_non_ipv6 =
        vip.contains(':') && !vip.starts_with('[') && vip.parse::<std::net::Ipv6Addr>().is_err();
    if unbracketed_non_ipv6 || vip.contains(char::is_whitespace) {
        return Err(InvalidInput::VipLabelInvalid {
            vip: vip.to_string(),
        });
    }
    Ok(vip.to_string())
}

/// Refuses images whose tag names a MongoDB release older than 4.4. A tag
/// that names no version (`latest`, a digest, none) is accepted: the operator
/// cannot tell, and mongod itself will say.
pub fn supported_image(image: &str) -> Result<(), InvalidInput> {
    let Some((tag, release)) = image_release(image) else {
        return Ok(());
    };
    if release < (4, 4) {
        return Err(InvalidInput::UnsupportedMongoDBVersion {
            image: image.to_string(),
            version: tag.to_string(),
        });
    }
    Ok(())
}

/// MongoDB's releases in upgrade order: a binary runs data whose
/// featureCompatibilityVersion is its own release or the one before.
const RELEASES: [(u32, u32); 5] = [(4, 4), (5, 0), (6, 0), (7, 0), (8, 0)];

/// The tag of `image` and the `(major, minor)` release it names, when it names one.
pub fn image_release(image: &str) -> Option<(&str, (u32, u32))> {
    let without_digest = image.split('@').next().unwrap_or(image);
    let last_segment = without_digest.rsplit('/').next().unwrap_or(without_digest);
    let (_, tag) = last_segment.split_once(':')?;
    let digits = tag.strip_prefix('v').unwrap_or(tag);
    let mut numbers = digits
        .split(|c: char| !c.is_ascii_digit())
        .map(|part| part.parse::<u32>().ok());
    let (Some(Some(major)), minor) = (numbers.next(), numbers.next()) else {
        return None;
    };
    Some((tag, (major, minor.flatten().unwrap_or(0))))
}

/// `"MAJOR.MINOR"` as a release.
fn parse_release(text: &str) -> Option<(u32, u32)> {
    let (major, minor) = text.split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// Refuses an image the set's featureCompatibilityVersion (as last observed,
/// `fcv`) cannot run on: a release below the FCV (a downgrade below it), or
/// more than one release past it (a release skipped). Unknown releases or
/// FCV: accepted, mongod will say.
pub fn version_change_allowed(image: &str, fcv: Option<&str>) -> Result<(), InvalidInput> {
    let (Some((_, release)), Some(fcv_release)) =
        (image_release(image), fcv.and_then(parse_release))
    else {
        return Ok(());
    };
    let Some(position) = RELEASES.iter().position(|r| *r == fcv_release) else {
        return Ok(());
    };
    let next = RELEASES.get(position + 1).copied();
    if release == fcv_release || Some(release) == next {
        return Ok(());
    }
    let show = |(major, minor): (u32, u32)| format!("{major}.{minor}");
    let allowed = match next {
        Some(next) => format!("{} or {}", show(fcv_release), show(next)),
        None => show(fcv_release),
    };
    let why = if release < fcv_release {
        "a downgrade below the featureCompatibilityVersion"
    } else {
        "it skips a release"
    };
    Err(InvalidInput::VersionChangeRefused {
        image: image.to_string(),
        fcv: show(fcv_release),
        why: why.to_string(),
        allowed,
    })
}

/// Refuses an instance name whose wanted member StatefulSets would be too
/// long for their pods to be created.
pub fn member_names_fit(instance: &str, wanted: Wanted) -> Result<(), InvalidInput> {
    let too_long = wanted
        .slots()
        .map(|slot| names::slot(instance, slot))
        .find(|name| name.len() > MAX_STATEFUL_SET_NAME);
    match too_long {
        Some(stateful_set) => Err(InvalidInput::NameTooLong {
            length: stateful_set.len(),
            stateful_set,
        }),
        None => Ok(()),
    }
}

/// The hostconf ConfigMap's data, parsed.
pub fn hostconf(
    config_map: &str,
    data: Option<&BTreeMap<String, String>>,
) -> Result<HostConf, InvalidInput> {
    let empty = BTreeMap::new();
    HostConf::from_config_map_data(data.unwrap_or(&empty)).map_err(|source| {
        InvalidInput::HostconfInvalid {
            name: config_map.to_string(),
            source: Box::new(source),
        }
    })
}

/// The propagated hostconf, parsed.
fn propagated_hostconf(
    mongodb: &MongoDB,
    referenced: &ReferencedObjects,
) -> Result<HostConf, InvalidInput> {
    let instance = mongodb.name_any();
    let name = names::hostconf(&instance, mongodb.spec.member_config_ref.as_deref());
    match &referenced.hostconf {
        Some(config_map) => hostconf(&name, config_map.data.as_ref()),
        None => Err(InvalidInput::HostconfMissing { name }),
    }
}

/// The members of the set as status last observed them, standing in for
/// hostconf while leaving (state 7 is an arbiter).
fn last_observed_members(mongodb: &MongoDB) -> HostConf {
    let replset = mongodb.status.iter().flat_map(|s| &s.replset);
    let members = replset
        .filter_map(|member| {
            let address = MemberAddress::parse(&member.name).ok()?;
            Some(HostConfMember {
                address,
                arbiter: member.state == MemberState::Arbiter.code(),
                votes: None,
                priority: None,
                hidden: false,
                tags: BTreeMap::new(),
            })
        })
        .collect();
    HostConf { members }
}

/// The operator's clusterAdmin user, from the Secret it keeps.
fn operator_admin(referenced: &ReferencedObjects) -> Option<RootCredentials> {
    let data = referenced.operator_credentials.as_ref()?.data.as_ref()?;
    let text = |key: &str| {
        let value = data.get(key)?;
        String::from_utf8(value.0.clone())
            .ok()
            .filter(|v| !v.is_empty())
    };
    Some(RootCredentials {
        username: text(build::secrets::USERNAME_KEY)?,
        password: text(build::secrets::PASSWORD_KEY)?,
    })
}

/// The root user: from the referenced Secret, or derived from
/// `spec.rootPassword` (FedState's fallback); the keyfile beside it is checked.
fn shared_root_credentials(
    mongodb: &MongoDB,
    referenced: &ReferencedObjects,
) -> Result<(RootCredentials, String), InvalidInput> {
    let source = BuildContext::from_mongodb(mongodb)?.credentials().clone();
    let secret = referenced.credentials_secret.as_ref();
    match &source {
        CredentialsSource::Referenced {
            secret_name,
            keyfile_key,
            username_key,
            password_key,
        } => {
            let Some(secret) = secret else {
                return Err(InvalidInput::CredentialsSecretMissing {
                    name: secret_name.clone(),
                });
            };
            let data = secret.data.clone().unwrap_or_default();
            let value = |key: &str| data.get(key).map(|v| v.0.as_slice());
            let root = credentials(
                secret_name,
                (keyfile_key, value(keyfile_key)),
                (username_key, value(username_key)),
                (password_key, value(password_key)),
            )?;
            let keyfile = String::from_utf8_lossy(value(keyfile_key).unwrap_or_default());
            Ok((root, keyfile.into_owned()))
        }
        CredentialsSource::DerivedFromRootPassword { secret_name } => {
            let password = mongodb.spec.root_password.clone().unwrap_or_default();
            if password.trim().is_empty() {
                return Err(BuildError::MissingCredentials {
                    name: mongodb.name_any(),
                }
                .into());
            }
            let keyfile = build::derive_keyfile(&password);
            let root = credentials(
                secret_name,
                ("keyfile", Some(keyfile.as_bytes())),
                (
                    "username",
                    Some(build::secrets::DERIVED_ROOT_USER.as_bytes()),
                ),
                ("password", Some(password.as_bytes())),
            )?;
            Ok((root, keyfile))
        }
    }
}

/// A key of the credentials Secret and its value, if present.
type SecretEntry<'a> = (&'a str, Option<&'a [u8]>);

/// Checks the credentials Secret's values: the keyfile must be 6–1024 base64
/// characters (mongod refuses anything else), the user and password non-empty.
/// Returns the root user.
pub fn credentials(
    secret: &str,
    keyfile: SecretEntry,
    username: SecretEntry,
    password: SecretEntry,
) -> Result<RootCredentials, InvalidInput> {
    let text = |(key, value): SecretEntry, role| -> Result<String, InvalidInput> {
        let invalid = |fault| InvalidInput::CredentialsInvalid {
            secret: secret.to_string(),
            fault,
        };
        let key = key.to_string();
        let Some(value) = value else {
            return Err(invalid(CredentialFault::Missing { key, role }));
        };
        let Ok(value) = std::str::from_utf8(value) else {
            return Err(invalid(CredentialFault::NotText { key, role }));
        };
        if value.trim().is_empty() {
            return Err(invalid(CredentialFault::Empty { key, role }));
        }
        Ok(value.to_string())
    };
    let keyfile_key = keyfile.0;
    let keyfile = text(keyfile, CredentialRole::Keyfile)?;
    let invalid_keyfile = |fault| InvalidInput::KeyfileInvalid {
        secret: secret.to_string(),
        key: keyfile_key.to_string(),
        fault,
    };
    let base64 = |c: char| c.is_ascii_alphanumeric() || c == '+' || c == '/' || c == '=';
    if let Some(index) = keyfile
        .chars()
        .position(|c| !c.is_whitespace() && !base64(c))
    {
        return Err(invalid_keyfile(KeyfileFault::NotBase64 {
            position: index + 1,
        }));
    }
    let length = keyfile.chars().filter(|c| !c.is_whitespace()).count();
    if !KEYFILE_LENGTH.contains(&length) {
        return Err(invalid_keyfile(KeyfileFault::Length { length }));
    }
    let username = text(username, CredentialRole::Username)?;
    let password = text(password, CredentialRole::Password)?;
    Ok(RootCredentials { username, password })
}

/// The propagated NodePort Services of this instance's members, by slot.
fn member_services(instance: &str, services: &[Service]) -> BTreeMap<MemberSlot, MemberService> {
    services
        .iter()
        .filter_map(|service| {
            let slot = names::slot_of(instance, &service.name_any())?;
            let spec = service.spec.as_ref()?;
            if spec.type_.as_deref() != Some("NodePort") {
                return None;
            }
            let node_port = spec
                .ports
                .as_ref()
                .and_then(|ports| ports.first())
                .and_then(|p| p.node_port);
            let selector = spec.selector.clone().unwrap_or_default();
            Some((
                slot,
                MemberService {
                    selector,
                    node_port,
                },
            ))
        })
        .collect()
}

/// The member StatefulSets this object owns, by slot, with their pod's state.
fn member_stateful_sets(
    mongodb: &MongoDB,
    stateful_sets: &[StatefulSet],
    pods: &[Pod],
) -> BTreeMap<MemberSlot, MemberStatefulSetFacts> {
    let instance = mongodb.name_any();
    stateful_sets
        .iter()
        .filter(|s| {
            s.owner_references()
                .iter()
                .any(|o| Some(&o.uid) == mongodb.metadata.uid.as_ref())
        })
        .filter_map(|stateful_set| {
            let name = stateful_set.name_any();
            let slot = names::slot_of(&instance, &name)?;
            let recorded_host = stateful_set
                .annotations()
                .get(MEMBER_HOST_ANNOTATION)
                .and_then(|h| MemberAddress::parse(h).ok());
            let recorded_entry = stateful_set
                .annotations()
                .get(MEMBER_ENTRY_ANNOTATION)
                .and_then(|e| e.parse().ok());
            let pod_name = format!("{name}-0");
            let pod = pods
                .iter()
                .find(|pod| pod.metadata.name.as_deref() == Some(pod_name.as_str()));
            let pod_running = pod.is_some_and(is_running);
            let pod_ready = pod_running && pod.is_some_and(is_ready);
            let pod = pod.map(|pod| PodFacts {
                uid: pod.uid().unwrap_or_default(),
                revision: pod.annotations().get(REVISION_ANNOTATION).cloned(),
                terminating: pod.metadata.deletion_timestamp.is_some(),
            });
            Some((
                slot,
                MemberStatefulSetFacts {
                    recorded_host,
                    recorded_entry,
                    pod_running,
                    pod_ready,
                    pod,
                },
            ))
        })
        .collect()
}

/// Whether `pod` runs and is not being deleted.
fn is_running(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

/// Whether `pod`'s `Ready` condition is `True`.
fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::StatefulSetSpec;
    use k8s_openapi::api::core::v1::{PodStatus, ServicePort, ServiceSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

    #[test]
    fn a_missing_vip_label_is_named() {
        let problem = vip(&BTreeMap::new()).unwrap_err();
        assert_eq!(problem.reason(), "VipLabelMissing");
        assert!(problem.to_string().contains(VIP_LABEL));
        let labels = BTreeMap::from([(VIP_LABEL.to_string(), "10.29.5.107".to_string())]);
        assert_eq!(vip(&labels).unwrap(), "10.29.5.107");
        let labels = BTreeMap::from([(VIP_LABEL.to_string(), "10.0.0.1 x".to_string())]);
        assert_eq!(vip(&labels).unwrap_err().reason(), "VipLabelInvalid");
    }

    #[test]
    fn hostconf_errors_name_the_config_map() {
        let data = BTreeMap::from([("datas".to_string(), "host:'10.0.0.1:3x'".to_string())]);
        let problem = hostconf("demo-hostconf", Some(&data)).unwrap_err();
        assert_eq!(problem.reason(), "HostconfInvalid");
        let message = problem.to_string();
        assert!(
            message.starts_with("ConfigMap demo-hostconf: "),
            "{message}"
        );
        assert!(message.contains("line 1"));
        assert!(
            std::error::Error::source(&problem).is_some(),
            "the parse error is kept as the source"
        );
        assert!(hostconf("demo-hostconf", None).is_err());
    }

    #[test]
    fn credentials_are_checked_without_echoing_them() {
        let keyfile = "a".repeat(756);
        let key = |k| (k, Some(keyfile.as_bytes()));
        let ok = credentials(
            "s",
            key("keyfile"),
            ("username", Some(b"root")),
            ("password", Some(b"pw-123456")),
        );
        assert_eq!(ok.map(|c| c.username).unwrap(), "root");
        let short = credentials(
            "s",
            ("keyfile", Some(b"abc")),
            ("username", Some(b"root")),
            ("password", Some(b"pw-123456")),
        )
        .unwrap_err();
        assert_eq!(short.reason(), "KeyfileInvalid");
        let bad_chars = credentials(
            "s",
            ("keyfile", Some(b"abc$%^&*()")),
            ("username", Some(b"root")),
            ("password", Some(b"pw-123456")),
        )
        .unwrap_err();
        assert_eq!(bad_chars.reason(), "KeyfileInvalid");
        assert!(!bad_chars.to_string().contains("abc$"));
        let missing = credentials(
            "s",
            key("keyfile"),
            ("username", Some(b"root")),
            ("password", None),
        )
        .unwrap_err();
        assert_eq!(missing.reason(), "CredentialsInvalid");
        assert!(missing.to_string().contains("has no key \"password\""));
        let empty = credentials(
            "s",
            key("keyfile"),
            ("username", Some(b" ")),
            ("password", Some(b"pw-123456")),
        )
        .unwrap_err();
        assert!(empty.to_string().contains("\"username\" is empty"));
        let binary = credentials(
            "s",
            key("keyfile"),
            ("username", Some(&[0xff, 0xfe])),
            ("password", Some(b"pw")),
        )
        .unwrap_err();
        assert!(binary
            .to_string()
            .contains("\"username\" is not UTF-8 text"));
    }

    fn stored(labels: &[(&str, &str)]) -> MongoDB {
        let mut mongodb = build::fixtures::mongodb();
        mongodb.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        mongodb
    }

    fn config_map(data: &[(&str, &str)]) -> ConfigMap {
        ConfigMap {
            data: Some(
                data.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..ConfigMap::default()
        }
    }

    fn node_port_service(name: &str, node_port: i32) -> Service {
        Service {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            spec: Some(ServiceSpec {
                type_: Some("NodePort".into()),
                selector: Some(BTreeMap::from([("app".to_string(), name.to_string())])),
                ports: Some(vec![ServicePort {
                    port: 27017,
                    node_port: Some(node_port),
                    ..ServicePort::default()
                }]),
                ..ServiceSpec::default()
            }),
            ..Service::default()
        }
    }

    fn owned_stateful_set(mongodb: &MongoDB, name: &str, host: Option<&str>) -> StatefulSet {
        let owner = OwnerReference {
            uid: mongodb.metadata.uid.clone().unwrap(),
            ..OwnerReference::default()
        };
        StatefulSet {
            metadata: ObjectMeta {
                name: Some(name.into()),
                owner_references: Some(vec![owner]),
                annotations: host
                    .map(|h| BTreeMap::from([(MEMBER_HOST_ANNOTATION.to_string(), h.to_string())])),
                ..ObjectMeta::default()
            },
            spec: Some(StatefulSetSpec::default()),
            ..StatefulSet::default()
        }
    }

    fn pod(name: &str, phase: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            status: Some(PodStatus {
                phase: Some(phase.into()),
                ..PodStatus::default()
            }),
            ..Pod::default()
        }
    }

    #[test]
    fn validation_stops_at_the_first_missing_reference_in_order() {
        let mongodb = stored(&[]);
        let nothing = ReferencedObjects::default();
        assert_eq!(
            validate(&mongodb, &nothing, false).unwrap_err(),
            InvalidInput::VipLabelMissing
        );
        let mongodb = stored(&[(VIP_LABEL, "10.0.0.1")]);
        let missing = validate(&mongodb, &nothing, false).unwrap_err();
        assert_eq!(missing.reason(), "HostconfMissing");
        assert!(
            missing.to_string().contains("ConfigMap demo-hostconf "),
            "{missing}"
        );
        let with_hostconf = ReferencedObjects {
            hostconf: Some(config_map(&[("datas", "host:'10.0.0.1:30001'")])),
            ..ReferencedObjects::default()
        };
        let mut no_credentials = mongodb.clone();
        no_credentials.spec.root_password = None;
        assert_eq!(
            validate(&no_credentials, &with_hostconf, false)
                .unwrap_err()
                .reason(),
            "MissingCredentials"
        );
    }

    #[test]
    fn members_are_read_by_slot_from_owned_objects_only() {
        let mongodb = stored(&[(VIP_LABEL, "10.0.0.1")]);
        let mut stranger = owned_stateful_set(&mongodb, "demo-mongodb-2", None);
        stranger.metadata.owner_references.as_mut().unwrap()[0].uid = "another".into();
        let mut cluster_ip = node_port_service("demo-mongodb-3", 30004);
        cluster_ip.spec.as_mut().unwrap().type_ = Some("ClusterIP".into());
        let referenced = ReferencedObjects {
            hostconf: Some(config_map(&[(
                "datas",
                "host:'10.0.0.1:30001'\nhost:'10.0.0.1:30002'",
            )])),
            credentials_secret: None,
            operator_credentials: None,
            custom_config: None,
            services: vec![
                node_port_service("demo-mongodb-0", 30001),
                node_port_service("demo-mongodb-headless", 1),
                cluster_ip,
            ],
            stateful_sets: vec![
                owned_stateful_set(&mongodb, "demo-mongodb-0", None),
                owned_stateful_set(&mongodb, "demo-mongodb-1", Some("10.0.0.1:30002")),
                stranger,
            ],
            pods: vec![
                pod("demo-mongodb-0-0", "Running"),
                pod("demo-mongodb-1-0", "Pending"),
            ],
        };
        let validated = validate(&mongodb, &referenced, false).unwrap();
        assert_eq!(validated.vip, "10.0.0.1");
        assert_eq!(validated.hostconf.members.len(), 2);
        assert_eq!(
            validated.services.keys().copied().collect::<Vec<_>>(),
            vec![MemberSlot::Data(0)]
        );
        assert_eq!(
            validated.stateful_sets.keys().copied().collect::<Vec<_>>(),
            vec![MemberSlot::Data(0), MemberSlot::Data(1)]
        );
        assert!(validated.pod_running(MemberSlot::Data(0)));
        assert!(!validated.pod_running(MemberSlot::Data(1)));
        // Running, but no Ready condition yet.
        assert!(!validated.pod_ready(MemberSlot::Data(0)));
        let mut ready = referenced.clone();
        ready.pods[0]
            .status
            .as_mut()
            .unwrap()
            .conditions
            .get_or_insert_with(Vec::new)
            .push(k8s_openapi::api::core::v1::PodCondition {
                type_: "Ready".into(),
                status: "True".into(),
                ..Default::default()
            });
        let validated_ready = validate(&mongodb, &ready, false).unwrap();
        assert!(validated_ready.pod_ready(MemberSlot::Data(0)));
        assert_eq!(
            validated.address(MemberSlot::Data(0)).unwrap().to_string(),
            "10.0.0.1:30001"
        );
        assert_eq!(
            validated.address(MemberSlot::Data(1)).unwrap().to_string(),
            "10.0.0.1:30002",
            "the recorded host once the Service is gone"
        );
        assert_eq!(validated.address(MemberSlot::Data(2)), None);
        let targets = validated.member_targets(Wanted {
            members: 2,
            arbiter: true,
        });
        assert_eq!(
            targets.len(),
            1,
            "only members whose Service exists are run"
        );
        assert_eq!(targets[0].host.as_deref(), Some("10.0.0.1:30001"));
    }

    #[test]
    fn a_leaving_object_wants_nothing() {
        let mut mongodb = stored(&[]);
        mongodb.spec.members = 2;
        mongodb.spec.arbiter = true;
        let wanted = Wanted::of(&mongodb, false);
        assert_eq!(
            wanted.slots().collect::<Vec<_>>(),
            vec![
                MemberSlot::Data(0),
                MemberSlot::Data(1),
                MemberSlot::Arbiter
            ]
        );
        assert!(wanted.wants(MemberSlot::Data(1)) && !wanted.wants(MemberSlot::Data(2)));
        assert_eq!(Wanted::of(&mongodb, true).slots().count(), 0);
        mongodb.spec.members = -1;
        assert_eq!(Wanted::of(&mongodb, false).members, 0);
    }

    #[test]
    fn images_older_than_4_4_are_refused_with_what_to_set() {
        for (image, version) in [
            ("mongo:3.6", "3.6"),
            ("fedstate.io/atsctoo/mongo:3.6", "3.6"),
            ("mongo:4.2.24", "4.2.24"),
            ("registry:5000/mongo:4.0", "4.0"),
            ("mongo:v3", "v3"),
            ("mongo:4.0-bionic", "4.0-bionic"),
        ] {
            let error = supported_image(image).unwrap_err();
            assert_eq!(error.reason(), "UnsupportedMongoDBVersion", "{image}");
            let message = error.to_string();
            assert!(
                message.contains(&format!("spec.image {image} is MongoDB {version}")),
                "{message}"
            );
            assert!(message.contains("4.4 or later"), "{message}");
            assert!(
                message.contains("spec.imageSetting.image"),
                "says where to set it with FedState: {message}"
            );
        }
        for image in [
            "mongo:4.4",
            "mongo:7.0.14",
            "registry:5000/mongo:8.0",
            "mongo",
            "mongo:latest",
            "mongo:30",
            "mongo@sha256:0123abcd",
        ] {
            supported_image(image).unwrap_or_else(|e| panic!("{image}: {e}"));
        }
    }

    #[test]
    fn the_content_digest_follows_the_custom_config_and_the_credentials() {
        let mut mongodb = stored(&[(VIP_LABEL, "10.0.0.1")]);
        mongodb.spec.credentials_secret_ref = None;
        mongodb.spec.root_password = Some("first-password".into());
        mongodb.spec.custom_config_ref = Some("custom".into());
        let hostconf = Some(config_map(&[("datas", "host:'10.0.0.1:30001'")]));
        let with_config = |content: Option<&str>| ReferencedObjects {
            hostconf: hostconf.clone(),
            custom_config: content.map(|c| config_map(&[("custom.conf", c)])),
            ..ReferencedObjects::default()
        };
        assert_eq!(
            validate(&mongodb, &with_config(None), false).unwrap_err(),
            InvalidInput::CustomConfigMissing {
                name: "custom".into()
            }
        );
        let digest = |mongodb: &MongoDB, content| {
            validate(mongodb, &with_config(Some(content)), false)
                .unwrap()
                .content_digest
        };
        let first = digest(&mongodb, "net:\n  maxIncomingConnections: 100");
        assert_eq!(first.len(), 64);
        assert_eq!(
            first,
            digest(&mongodb, "net:\n  maxIncomingConnections: 100")
        );
        assert_ne!(
            first,
            digest(&mongodb, "net:\n  maxIncomingConnections: 200")
        );
        let mut new_password = mongodb.clone();
        new_password.spec.root_password = Some("second-password".into());
        assert_ne!(
            first,
            digest(&new_password, "net:\n  maxIncomingConnections: 100")
        );
        // Leaving needs no custom config: nothing is built.
        assert!(validate(&mongodb, &with_config(None), true).is_ok());
    }

    #[test]
    fn the_image_moves_one_release_past_the_feature_compatibility_version_at_most() {
        assert!(version_change_allowed("mongo:8.0", Some("7.0")).is_ok());
        assert!(version_change_allowed("mongo:7.0.14", Some("7.0")).is_ok());
        assert!(
            version_change_allowed("mongo:8.0", None).is_ok(),
            "no FCV known yet"
        );
        assert!(version_change_allowed("mongo:latest", Some("6.0")).is_ok());
        let skip = version_change_allowed("mongo:8.0", Some("6.0")).unwrap_err();
        assert_eq!(skip.reason(), "VersionChangeRefused");
        assert!(skip.to_string().contains("skips a release"), "{skip}");
        assert!(skip.to_string().contains("6.0 or 7.0"), "{skip}");
        let downgrade = version_change_allowed("registry:5000/mongo:6.0", Some("7.0")).unwrap_err();
        assert!(
            downgrade.to_string().contains("downgrade below"),
            "{downgrade}"
        );
        assert!(downgrade.to_string().contains("7.0 or 8.0"), "{downgrade}");
    }

    #[test]
    fn an_old_image_makes_the_whole_input_invalid() {
        let mut mongodb = stored(&[(VIP_LABEL, "10.0.0.1")]);
        mongodb.spec.image = "mongo:3.6".into();
        let referenced = ReferencedObjects {
            hostconf: Some(config_map(&[("datas", "host:'10.0.0.1:30001'")])),
            ..ReferencedObjects::default()
        };
        assert_eq!(
            validate(&mongodb, &referenced, false).unwrap_err().reason(),
            "UnsupportedMongoDBVersion"
        );
    }

    #[test]
    fn names_too_long_for_member_statefulsets_are_refused_in_status() {
        let with_arbiter = Wanted {
            members: 3,
            arbiter: true,
        };
        assert!(member_names_fit(&"a".repeat(36), with_arbiter).is_ok());
        let data_only = Wanted {
            members: 3,
            arbiter: false,
        };
        assert!(
            member_names_fit(&"a".repeat(42), data_only).is_ok(),
            "a-…-mongodb-2 is 52"
        );
        assert!(member_names_fit(&"a".repeat(43), data_only).is_err());
        let error = member_names_fit(&"a".repeat(37), with_arbiter).unwrap_err();
        assert_eq!(error.reason(), "NameTooLong");
        let message = error.to_string();
        assert!(
            message.contains(&format!("{}-mongodb-arbiter", "a".repeat(37))),
            "{message}"
        );
        assert!(message.contains("52"), "{message}");
    }

    #[test]
    fn a_leaving_object_needs_neither_hostconf_nor_the_credentials_secret() {
        // FedState withdraws the MongoDB and hostconf together when a cluster's
        // share drops to 0: leaving uses what the operator already knows.
        let mut mongodb = build::fixtures::mongodb_with_secret_ref();
        mongodb.metadata.labels = Some(BTreeMap::from([(
            VIP_LABEL.to_string(),
            "10.0.0.1".to_string(),
        )]));
        let member = |name: &str, state: i32| crate::api::ReplSetMemberStatus {
            id: 0,
            name: name.into(),
            health: 1.0,
            state,
            state_str: String::new(),
            sync_source_host: String::new(),
        };
        mongodb.status = Some(crate::api::MongoDBStatus {
            replset: vec![
                member("10.0.0.1:30001", 1),
                member("10.0.0.2:30001", 2),
                member("10.0.0.3:30002", 7),
            ],
            ..Default::default()
        });
        let admin: Secret = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "demo-admin-credentials"},
            "stringData": {},
            "data": {"username": "Y2x1c3RlckFkbWlu", "password": "YWRtaW4tcHc="}
        }))
        .unwrap();
        let referenced = ReferencedObjects {
            operator_credentials: Some(admin),
            ..ReferencedObjects::default()
        };
        let error = validate(&mongodb, &referenced, false).unwrap_err();
        assert_eq!(
            error.reason(),
            "HostconfMissing",
            "a member that stays needs hostconf"
        );
        let leaving = validate(&mongodb, &referenced, true).expect("leaving goes on");
        let hosts: Vec<String> = leaving
            .hostconf
            .members
            .iter()
            .map(|m| m.address.to_string())
            .collect();
        assert_eq!(
            hosts,
            ["10.0.0.1:30001", "10.0.0.2:30001", "10.0.0.3:30002"]
        );
        assert!(
            leaving.hostconf.members[2].arbiter,
            "state 7 is the arbiter"
        );
        assert_eq!(leaving.root.username, "clusterAdmin");
        assert_eq!(leaving.root.password, "admin-pw");

        let nothing = ReferencedObjects::default();
        assert_eq!(
            validate(&mongodb, &nothing, true).unwrap_err().reason(),
            "CredentialsSecretMissing"
        );
    }

    #[test]
    fn root_credentials_never_show_in_debug_output() {
        let credentials = RootCredentials {
            username: "root".into(),
            password: "s3cr3t-value".into(),
        };
        assert!(!format!("{credentials:?}").contains("s3cr3t-value"));
    }

    #[test]
    fn a_keyfile_of_the_right_length_with_other_characters_is_named_for_its_characters() {
        let root = ("username", Some(&b"root"[..]));
        let password = ("password", Some(&b"pw-123456"[..]));
        let error = credentials("s", ("keyfile", Some(b"abc$%^&*()")), root, password).unwrap_err();
        assert_eq!(error.reason(), "KeyfileInvalid");
        let message = error.to_string();
        assert!(
            message.contains("character 4 is not a base64 character"),
            "says which character is wrong, not the length: {message}"
        );
        assert!(!message.contains("found 10 characters"), "{message}");
        assert!(
            !message.contains('$'),
            "never echoes the keyfile: {message}"
        );
        let short = credentials("s", ("keyfile", Some(b"abc")), root, password).unwrap_err();
        assert!(
            short
                .to_string()
                .contains("6 to 1024 base64 characters (found 3)"),
            "{short}"
        );
    }

    #[test]
    fn a_missing_credentials_key_names_what_it_should_hold() {
        let keyfile = "a".repeat(756);
        let missing = credentials(
            "demo-keys",
            ("keyfile", Some(keyfile.as_bytes())),
            ("username", Some(b"root")),
            ("pass", None),
        )
        .unwrap_err();
        assert_eq!(
            missing.to_string(),
            "Secret demo-keys has no key \"pass\": add the root user's password under it, \
             or set spec.credentialsSecretRef.passwordKey to the key that holds it"
        );
        let no_keyfile = credentials(
            "demo-keys",
            ("kf", None),
            ("username", Some(b"root")),
            ("pass", Some(b"pw")),
        )
        .unwrap_err();
        assert!(
            no_keyfile
                .to_string()
                .contains("add the replica set's keyfile under it, or set spec.credentialsSecretRef.keyfileKey"),
            "{no_keyfile}"
        );
        let binary = credentials(
            "demo-keys",
            ("keyfile", Some(keyfile.as_bytes())),
            ("username", Some(b"root")),
            ("password", Some(&[0xff, 0xfe])),
        )
        .unwrap_err();
        assert_eq!(
            binary.to_string(),
            "Secret demo-keys key \"password\" is not UTF-8 text: the root user's password \
             must be text"
        );
    }

    #[test]
    fn a_blank_root_password_is_no_credentials() {
        // Not a Secret's key: the user wrote spec.rootPassword, and only that
        // may be named.
        let mut mongodb = stored(&[(VIP_LABEL, "10.0.0.1")]);
        mongodb.spec.root_password = Some(" \n".into());
        let referenced = ReferencedObjects {
            hostconf: Some(config_map(&[("datas", "host:'10.0.0.1:30001'")])),
            ..ReferencedObjects::default()
        };
        let error = validate(&mongodb, &referenced, false).unwrap_err();
        assert_eq!(error.reason(), "MissingCredentials", "{error}");
        assert!(error.to_string().contains("spec.rootPassword"), "{error}");
    }

    /// What the API server refuses before this stage ever sees it: the
    /// generated CRD's schema and CEL rules, run through the project's
    /// kube-apiserver-faithful admission library (`hack/crd-admission`).
    /// `validate` trusts these (a name the API cannot hold never reaches a
    /// request; a quantity is one).
    mod admitted_by_the_api_server {
        use kube::CustomResourceExt;
        use serde_json::{json, Value};

        use crate::api::MongoDB;

        fn admit(spec: Value) -> Result<Value, String> {
            let crd = serde_json::to_value(MongoDB::crd()).unwrap();
            let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
            let admission = crd_admission::Admission::new(schema).unwrap();
            let mut object = json!({
                "apiVersion": "middleware.fedstate.io/v1alpha1",
                "kind": "MongoDB",
                "metadata": {"name": "demo", "namespace": "default"},
                "spec": spec,
            });
            admission
                .admit(&mut object, None)
                .map(|_| object)
                .map_err(|errors| {
                    errors
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join("\n")
                })
        }

        fn with_password(mut fields: Value) -> Value {
            fields["rootPassword"] = json!("a-root-password");
            fields
        }

        #[test]
        fn quantities_must_be_kubernetes_quantities() {
            for (spec, field) in [
                (
                    json!({"persistence": {"storage": "lots"}}),
                    "spec.persistence.storage",
                ),
                (
                    json!({"persistence": {"storage": "10 GB"}}),
                    "spec.persistence.storage",
                ),
                (
                    json!({"resources": {"limits": {"cpu": "two"}}}),
                    "spec.resources.limits.cpu",
                ),
                (
                    json!({"resources": {"requests": {"memory": "1GiB"}}}),
                    "spec.resources.requests.memory",
                ),
                (
                    json!({"metricsExporterSpec": {"resources": {"limits": {"cpu": "x"}}}}),
                    "spec.metricsExporterSpec.resources.limits.cpu",
                ),
            ] {
                let error = admit(with_password(spec.clone())).unwrap_err();
                assert!(
                    error.starts_with(&format!("{field}: Invalid value: ")),
                    "{spec}: {error}"
                );
                assert!(error.contains("in body should match '^(\\+|-)?"), "{error}");
            }
            for storage in [
                json!("1Gi"),
                json!("500M"),
                json!(1073741824),
                json!("1.5Gi"),
                json!("2e9"),
            ] {
                admit(with_password(json!({"persistence": {"storage": storage}})))
                    .unwrap_or_else(|e| panic!("{storage}: {e}"));
            }
            admit(with_password(
                json!({"resources": {"limits": {"cpu": "1500m", "memory": "1Gi"}, "requests": {"cpu": 1}}}),
            ))
            .expect("quantities admitted");
        }

        #[test]
        fn referenced_names_must_be_names_kubernetes_can_hold() {
            let secret = |reference: Value| json!({"credentialsSecretRef": reference});
            for (spec, field) in [
                (
                    secret(json!({"name": "Not_A_Name"})),
                    "spec.credentialsSecretRef.name",
                ),
                (
                    secret(json!({"name": "keys", "keyfileKey": ""})),
                    "spec.credentialsSecretRef.keyfileKey",
                ),
                (
                    secret(json!({"name": "keys", "passwordKey": "root password"})),
                    "spec.credentialsSecretRef.passwordKey",
                ),
                (
                    secret(json!({"name": "keys", "usernameKey": "a/b"})),
                    "spec.credentialsSecretRef.usernameKey",
                ),
                (
                    with_password(json!({"memberConfigRef": "Bad Name"})),
                    "spec.memberConfigRef",
                ),
                (
                    with_password(json!({"customConfigRef": "bad/custom"})),
                    "spec.customConfigRef",
                ),
                (
                    with_password(json!({"customConfigRef": ""})),
                    "spec.customConfigRef",
                ),
            ] {
                let error = admit(spec.clone()).unwrap_err();
                assert!(
                    error.starts_with(&format!("{field}: Invalid value: ")),
                    "{spec}: {error}"
                );
            }
            admit(secret(
                json!({"name": "demo.keys-1", "keyfileKey": "key_file.1", "usernameKey": "user-name"}),
            ))
            .expect("valid names admitted");
            admit(with_password(
                json!({"memberConfigRef": "", "customConfigRef": "demo-custom"}),
            ))
            .expect("an empty memberConfigRef means <name>-hostconf");
        }

        #[test]
        fn an_empty_root_password_is_no_credentials() {
            let error = admit(json!({"rootPassword": ""})).unwrap_err();
            assert!(
                error.contains("set spec.credentialsSecretRef (preferred) or spec.rootPassword"),
                "{error}"
            );
            admit(json!({"rootPassword": "", "credentialsSecretRef": {"name": "keys"}}))
                .expect("the Secret is enough");
        }
    }
}
