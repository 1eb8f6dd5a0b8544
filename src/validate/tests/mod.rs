mod admitted_by_the_api_server;
mod credentials;
mod image;

use k8s_openapi::api::apps::v1::StatefulSetSpec;
use k8s_openapi::api::core::v1::{PodStatus, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::*;
use crate::build::MEMBER_HOST_ANNOTATION;

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
        certificate_secret: None,
        mounted_tls_secret: None,
        operator_credentials: None,
        keyfile_secrets: vec![],
        custom_config: None,
        claims: vec![],
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
    let storage = mongodb.spec.persistence.storage.clone();
    let wanted = Wanted {
        members: 2,
        arbiter: true,
    };
    let targets = validated.member_targets(wanted, &storage);
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
fn the_content_digest_follows_the_custom_config_alone() {
    let mut mongodb = stored(&[(VIP_LABEL, "10.0.0.1")]);
    mongodb.spec.credentials_secret_ref = None;
    mongodb.spec.root_password = Some("first-password".into());
    mongodb.spec.custom_config_ref = Some("custom".into());
    let hostconf = Some(config_map(&[("datas", "host:'10.0.0.1:30001'")]));
    let with_config = |content: Option<&str>| ReferencedObjects {
        hostconf: hostconf.clone(),
        custom_config: content.map(|c| config_map(&[(crate::build::CUSTOM_CONFIG_KEY, c)])),
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
    // The keyfile enters the revision through its Secret's name, not here.
    let mut new_password = mongodb.clone();
    new_password.spec.root_password = Some("second-password".into());
    assert_eq!(
        first,
        digest(&new_password, "net:\n  maxIncomingConnections: 100")
    );
    // Leaving needs no custom config: nothing is built.
    assert!(validate(&mongodb, &with_config(None), true).is_ok());
}

#[test]
fn the_desired_keyfile_follows_the_credentials_secret_and_the_digest_neither_it_nor_the_password() {
    // mongod reads the root password only to create the root user on an empty
    // data directory: a restart cannot bring a new one to the set, so a new
    // password must not roll the pods; a new keyfile is planned and rolled
    // in its phases (`crate::keyfile`).
    let mut mongodb = build::fixtures::mongodb_with_secret_ref();
    mongodb.metadata.labels = Some(BTreeMap::from([(
        VIP_LABEL.to_string(),
        "10.0.0.1".to_string(),
    )]));
    let digest = |keyfile: &str, password: &str| {
        let secret: Secret = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "shared-creds"},
            "stringData": {"kf": keyfile, "user": "root", "pass": password}
        }))
        .unwrap();
        let secret = Secret {
            data: secret.string_data.map(|data| {
                data.into_iter()
                    .map(|(k, v)| (k, k8s_openapi::ByteString(v.into_bytes())))
                    .collect()
            }),
            string_data: None,
            ..secret
        };
        let referenced = ReferencedObjects {
            hostconf: Some(config_map(&[("datas", "host:'10.0.0.1:30001'")])),
            credentials_secret: Some(secret),
            ..ReferencedObjects::default()
        };
        let validated = validate(&mongodb, &referenced, false).unwrap();
        (validated.content_digest, validated.desired_keyfile)
    };
    let first = digest("c2hhcmVkLWtleWZpbGU=", "first-password");
    assert_eq!(first, digest("c2hhcmVkLWtleWZpbGU=", "second-password"));
    let other = digest("b3RoZXIta2V5ZmlsZQ==", "first-password");
    assert_eq!(first.0, other.0);
    assert_eq!(first.1, Some(Keyfile::of_key("c2hhcmVkLWtleWZpbGU=")));
    assert_eq!(other.1, Some(Keyfile::of_key("b3RoZXIta2V5ZmlsZQ==")));
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
