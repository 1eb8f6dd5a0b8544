use k8s_openapi::api::core::v1::{
    Affinity, Container, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    PodSecurityContext, Toleration, TopologySpreadConstraint, Volume,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::super::fixtures::*;
use super::super::pod::KEYFILE_PATH;
use super::super::secrets;
use super::*;
use crate::api::{ConfigVar, MemberPodSpec, MongoDB, ResourceSetting};
use crate::keyfile::Keyfile;

/// The keyfile planned for an instance whose credentials Secret is referenced.
const PLANNED_KEY: &str = "cGxhbm5lZCBrZXlmaWxl";

fn build(mongodb: &MongoDB, target: &MemberTarget) -> MemberStatefulSet {
    let mut ctx = BuildContext::from_mongodb(mongodb).unwrap();
    if ctx.keyfile().is_err() {
        ctx = ctx.with_keyfile(Keyfile::of_key(PLANNED_KEY));
    }
    member_stateful_set(&ctx, target).unwrap()
}

fn pod_spec(mongodb: &MongoDB) -> PodSpec {
    build(mongodb, &member(0))
        .stateful_set
        .spec
        .unwrap()
        .template
        .spec
        .unwrap()
}

fn container<'a>(pod: &'a PodSpec, name: &str) -> &'a Container {
    pod.containers
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no container {name}"))
}

fn init_container(pod: &PodSpec) -> &Container {
    &pod.init_containers.as_ref().unwrap()[0]
}

fn volume<'a>(pod: &'a PodSpec, name: &str) -> Option<&'a Volume> {
    pod.volumes
        .as_ref()
        .unwrap()
        .iter()
        .find(|v| v.name == name)
}

fn args_of(container: &Container) -> Vec<String> {
    container.args.clone().unwrap_or_default()
}

/// `(variable, secret, key)` for every env variable; panics on a plain value.
fn secret_refs(container: &Container) -> Vec<(String, String, String)> {
    container
        .env
        .iter()
        .flatten()
        .map(|env| {
            assert_eq!(env.value, None, "{} has a plain value", env.name);
            let reference = env
                .value_from
                .as_ref()
                .unwrap()
                .secret_key_ref
                .as_ref()
                .unwrap();
            (
                env.name.clone(),
                reference.name.clone(),
                reference.key.clone(),
            )
        })
        .collect()
}

#[test]
fn statefulset_selects_exactly_the_member_service_selector_and_pods_carry_it() {
    let target = member(1);
    let spec = build(&mongodb(), &target).stateful_set.spec.unwrap();
    assert_eq!(spec.selector.match_labels.as_ref(), Some(&target.selector));
    assert_eq!(spec.selector.match_expressions, None);
    let pod_labels = spec.template.metadata.unwrap().labels.unwrap();
    for (key, value) in &target.selector {
        assert_eq!(pod_labels.get(key), Some(value), "pod label {key}");
    }
    assert_eq!(pod_labels["app.kubernetes.io/name"], "mongodb");
    assert_eq!(
        pod_labels["app.kubernetes.io/managed-by"],
        "mongodb-member-operator"
    );
    assert_eq!(pod_labels["app.kubernetes.io/component"], "member");
}

#[test]
fn statefulset_runs_one_parallel_replica_behind_the_headless_service_and_retains_claims() {
    let stateful_set = build(&mongodb(), &member(1)).stateful_set;
    assert_eq!(
        stateful_set.metadata.name.as_deref(),
        Some("demo-mongodb-1")
    );
    assert_eq!(stateful_set.metadata.namespace.as_deref(), Some(NAMESPACE));
    let owner = &stateful_set.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("MongoDB", NAME, Some(true))
    );
    let spec = stateful_set.spec.unwrap();
    assert_eq!(spec.replicas, Some(1));
    assert_eq!(spec.service_name.as_deref(), Some("demo-mongodb-headless"));
    assert_eq!(spec.pod_management_policy.as_deref(), Some("Parallel"));
    assert_eq!(
        spec.update_strategy.unwrap().type_.as_deref(),
        Some("OnDelete")
    );
    let retention = spec.persistent_volume_claim_retention_policy.unwrap();
    assert_eq!(
        (
            retention.when_deleted.as_deref(),
            retention.when_scaled.as_deref()
        ),
        (Some("Retain"), Some("Retain"))
    );
}

#[test]
fn statefulset_records_the_member_host_only_when_known() {
    let annotations = build(&mongodb(), &member(0))
        .stateful_set
        .metadata
        .annotations
        .unwrap();
    assert_eq!(annotations[MEMBER_HOST_ANNOTATION], "10.29.5.107:38018");
    let unknown_host = MemberTarget {
        host: None,
        ..member(0)
    };
    let annotations = build(&mongodb(), &unknown_host)
        .stateful_set
        .metadata
        .annotations
        .unwrap();
    assert!(!annotations.contains_key(MEMBER_HOST_ANNOTATION));
    assert!(annotations[KEYFILE_SECRET_ANNOTATION].starts_with("demo-keyfile-"));
}

#[test]
fn statefulset_refuses_a_member_whose_service_has_no_selector() {
    let target = MemberTarget {
        selector: BTreeMap::new(),
        ..member(3)
    };
    let error =
        member_stateful_set(&BuildContext::from_mongodb(&mongodb()).unwrap(), &target).unwrap_err();
    assert_eq!(
        error,
        BuildError::EmptySelector {
            member: "demo-mongodb-3".to_string()
        }
    );
}

#[test]
fn arbiter_statefulset_is_named_and_labelled_as_the_arbiter() {
    let selector = BTreeMap::from([("app".to_string(), "demo-mongodb-arbiter".to_string())]);
    let target = MemberTarget {
        slot: MemberSlot::Arbiter,
        selector,
        host: None,
        claim_storage: None,
    };
    let stateful_set = build(&mongodb(), &target).stateful_set;
    assert_eq!(
        stateful_set.metadata.name.as_deref(),
        Some("demo-mongodb-arbiter")
    );
    let pod_labels = stateful_set
        .spec
        .unwrap()
        .template
        .metadata
        .unwrap()
        .labels
        .unwrap();
    assert_eq!(pod_labels["app.kubernetes.io/component"], "arbiter");
    assert_eq!(pod_labels["app"], "demo-mongodb-arbiter");
    assert_eq!(pod_labels["app.kubernetes.io/instance"], NAME);
}

#[test]
fn the_arbiter_gets_no_root_user_and_the_members_revision() {
    let member = build(&mongodb(), &member(0));
    let selector = BTreeMap::from([("app".to_string(), "demo-mongodb-arbiter".to_string())]);
    let arbiter = build(
        &mongodb(),
        &MemberTarget {
            slot: MemberSlot::Arbiter,
            selector,
            host: None,
            claim_storage: None,
        },
    );
    assert_eq!(arbiter.revision, member.revision);
    let arbiter_pod = arbiter.stateful_set.spec.unwrap().template.spec.unwrap();
    assert_eq!(secret_refs(container(&arbiter_pod, "mongod")), []);
    let member_pod = member.stateful_set.spec.unwrap().template.spec.unwrap();
    assert_eq!(secret_refs(container(&member_pod, "mongod")).len(), 2);
    // Nothing else differs.
    let mut without_root_user = member_pod.clone();
    without_root_user.containers[0].env = None;
    assert_eq!(arbiter_pod, without_root_user);
}

#[test]
fn mongod_args_enable_replica_set_keyfile_and_auth_and_never_carry_a_secret() {
    let pod = pod_spec(&mongodb());
    let mongod = container(&pod, "mongod");
    assert_eq!(
        mongod.command, None,
        "the official entrypoint must run to create the root user"
    );
    assert_eq!(mongod.image.as_deref(), Some("mongo:7.0"));
    assert_eq!(mongod.image_pull_policy.as_deref(), Some("IfNotPresent"));
    let args = args_of(mongod);
    assert_eq!(args[0], "mongod");
    for expected in [
        ["--replSet", "replset-0"],
        ["--keyFile", KEYFILE_PATH],
        ["--port", "27017"],
        ["--dbpath", "/data/db"],
    ] {
        assert!(
            args.windows(2).any(|pair| pair == expected),
            "{expected:?} in {args:?}"
        );
    }
    assert!(args.contains(&"--bind_ip_all".to_string()));
    assert!(args.contains(&"--auth".to_string()));
    let keyfile = secrets::derive_keyfile(ROOT_PASSWORD);
    for container in pod
        .containers
        .iter()
        .chain(pod.init_containers.iter().flatten())
    {
        let command_line = [
            container.command.clone().unwrap_or_default(),
            args_of(container),
        ]
        .concat()
        .join(" ");
        assert!(
            !command_line.contains(ROOT_PASSWORD),
            "{} args carry the password",
            container.name
        );
        assert!(
            !command_line.contains(&keyfile),
            "{} args carry the keyfile",
            container.name
        );
    }
    let port = &mongod.ports.as_ref().unwrap()[0];
    assert_eq!(
        (port.name.as_deref(), port.container_port),
        (Some("mongodb"), 27017)
    );
}

#[test]
fn root_credentials_reach_mongod_only_through_secret_key_refs() {
    let derived = pod_spec(&mongodb());
    assert_eq!(
        secret_refs(container(&derived, "mongod")),
        [
            (
                "MONGO_INITDB_ROOT_USERNAME".into(),
                "demo-credentials".into(),
                "username".into()
            ),
            (
                "MONGO_INITDB_ROOT_PASSWORD".into(),
                "demo-credentials".into(),
                "password".into()
            ),
        ]
    );
    let referenced = pod_spec(&mongodb_with_secret_ref());
    assert_eq!(
        secret_refs(container(&referenced, "mongod")),
        [
            (
                "MONGO_INITDB_ROOT_USERNAME".into(),
                "shared-creds".into(),
                "user".into()
            ),
            (
                "MONGO_INITDB_ROOT_PASSWORD".into(),
                "shared-creds".into(),
                "pass".into()
            ),
        ]
    );
}

#[test]
fn keyfile_secret_volume_is_0400_and_every_keyfile_mount_is_read_only() {
    let pod = pod_spec(&mongodb_with_secret_ref());
    let secret = volume(&pod, "keyfile-secret")
        .unwrap()
        .secret
        .as_ref()
        .unwrap();
    let planned = Keyfile::of_key(PLANNED_KEY);
    let name = secrets::keyfile_secret_name(NAME, &planned);
    assert_eq!(secret.secret_name.as_deref(), Some(name.as_str()));
    assert!(name.starts_with("demo-keyfile-") && name.len() == "demo-keyfile-".len() + 10);
    assert_eq!(secret.default_mode, Some(0o400));
    let item = &secret.items.as_ref().unwrap()[0];
    assert_eq!(
        (item.key.as_str(), item.path.as_str()),
        ("keyfile", "keyfile")
    );
    let copy = volume(&pod, "keyfile").unwrap().empty_dir.as_ref().unwrap();
    assert_eq!(copy.medium.as_deref(), Some("Memory"));

    let init = init_container(&pod);
    assert_eq!(init.image, container(&pod, "mongod").image);
    assert_eq!(
        init.security_context,
        container(&pod, "mongod").security_context
    );
    let script = init.command.as_ref().unwrap().join(" ");
    assert!(
        script.contains(&format!(
            "cp /etc/mongodb/keyfile-secret/keyfile {KEYFILE_PATH}"
        )),
        "{script}"
    );
    assert!(
        script.contains(&format!("chmod 0400 {KEYFILE_PATH}")),
        "{script}"
    );

    let mounts_of = |volume_name: &str| {
        pod.containers
            .iter()
            .chain(pod.init_containers.iter().flatten())
            .flat_map(|c| {
                c.volume_mounts
                    .iter()
                    .flatten()
                    .map(move |m| (c.name.clone(), m.clone()))
            })
            .filter(|(_, m)| m.name == volume_name)
            .collect::<Vec<_>>()
    };
    let secret_mounts = mounts_of("keyfile-secret");
    assert_eq!(
        secret_mounts.len(),
        1,
        "only the init container sees the Secret"
    );
    assert_eq!(secret_mounts[0].0, "keyfile-init");
    assert_eq!(secret_mounts[0].1.read_only, Some(true));
    let mongod_copy_mounts: Vec<_> = mounts_of("keyfile")
        .into_iter()
        .filter(|(c, _)| c == "mongod")
        .collect();
    assert_eq!(mongod_copy_mounts.len(), 1);
    assert_eq!(mongod_copy_mounts[0].1.read_only, Some(true));
    assert_eq!(mongod_copy_mounts[0].1.mount_path, "/etc/mongodb/keyfile");
}

#[test]
fn data_claim_template_requests_the_spec_storage_and_class() {
    let default_class = build(&mongodb(), &member(0))
        .stateful_set
        .spec
        .unwrap()
        .volume_claim_templates
        .unwrap();
    assert_eq!(
        default_class[0].spec.as_ref().unwrap().storage_class_name,
        None
    );

    let mut mongodb = mongodb();
    mongodb.spec.persistence.storage = Quantity("20Gi".to_string());
    mongodb.spec.persistence.storage_class_name = Some("fast-ssd".to_string());
    let spec = build(&mongodb, &member(0)).stateful_set.spec.unwrap();
    let claims = spec.volume_claim_templates.unwrap();
    assert_eq!(claims.len(), 1);
    assert_eq!(claims[0].metadata.name.as_deref(), Some("data"));
    let claim = claims[0].spec.as_ref().unwrap();
    assert_eq!(claim.access_modes, Some(vec!["ReadWriteOnce".to_string()]));
    assert_eq!(
        claim.resources.as_ref().unwrap().requests.as_ref().unwrap()["storage"],
        Quantity("20Gi".into())
    );
    assert_eq!(claim.storage_class_name.as_deref(), Some("fast-ssd"));

    let pod = spec.template.spec.unwrap();
    let mounts = container(&pod, "mongod").volume_mounts.clone().unwrap();
    assert!(mounts
        .iter()
        .any(|m| m.name == "data" && m.mount_path == "/data/db" && m.read_only.is_none()));
    assert!(mounts
        .iter()
        .any(|m| m.name == "tmp" && m.mount_path == "/tmp"));
    assert!(volume(&pod, "tmp").unwrap().empty_dir.is_some());
}

#[test]
fn probes_check_the_port_and_not_the_replica_set_state() {
    let pod = pod_spec(&mongodb());
    let mongod = container(&pod, "mongod");
    for probe in [
        &mongod.readiness_probe,
        &mongod.liveness_probe,
        &mongod.startup_probe,
    ] {
        let probe = probe.as_ref().unwrap();
        assert_eq!(probe.exec, None);
        assert_eq!(
            probe.tcp_socket.as_ref().unwrap().port,
            IntOrString::Int(27017)
        );
    }
    let liveness = mongod.liveness_probe.as_ref().unwrap();
    assert!(
        liveness.initial_delay_seconds.unwrap() >= 30 && liveness.failure_threshold.unwrap() >= 5
    );
    let startup = mongod.startup_probe.as_ref().unwrap();
    assert!(startup.failure_threshold.unwrap() * startup.period_seconds.unwrap() >= 600);
}

#[test]
fn pod_and_every_container_run_restricted() {
    let pod = pod_spec(&mongodb());
    let context = pod.security_context.as_ref().unwrap();
    assert_eq!(context.run_as_non_root, Some(true));
    assert_eq!(
        (context.run_as_user, context.run_as_group, context.fs_group),
        (Some(999), Some(999), Some(999))
    );
    assert_eq!(
        context.seccomp_profile.as_ref().unwrap().type_,
        "RuntimeDefault"
    );
    let containers: Vec<_> = pod
        .containers
        .iter()
        .chain(pod.init_containers.iter().flatten())
        .collect();
    assert_eq!(containers.len(), 2);
    for container in containers {
        let context = container.security_context.as_ref().unwrap();
        assert_eq!(
            context.allow_privilege_escalation,
            Some(false),
            "{}",
            container.name
        );
        assert_eq!(
            context.capabilities.as_ref().unwrap().drop,
            Some(vec!["ALL".to_string()])
        );
        assert_eq!(context.read_only_root_filesystem, Some(true));
        assert_eq!(context.run_as_non_root, Some(true));
    }
    assert_eq!(pod.automount_service_account_token, Some(false));
}

#[test]
fn user_pod_security_context_fields_win_and_defaults_fill_the_rest() {
    let mut mongodb = mongodb();
    mongodb.spec.pod_spec = Some(MemberPodSpec {
        security_context: Some(PodSecurityContext {
            run_as_user: Some(1001),
            fs_group: Some(2000),
            ..PodSecurityContext::default()
        }),
        ..MemberPodSpec::default()
    });
    let context = pod_spec(&mongodb).security_context.unwrap();
    assert_eq!(
        (context.run_as_user, context.fs_group),
        (Some(1001), Some(2000))
    );
    assert_eq!(
        (context.run_as_group, context.run_as_non_root),
        (Some(999), Some(true))
    );
    assert_eq!(context.seccomp_profile.unwrap().type_, "RuntimeDefault");
}

#[test]
fn termination_grace_period_is_at_least_30_seconds() {
    assert!(
        pod_spec(&mongodb())
            .termination_grace_period_seconds
            .unwrap()
            >= 30
    );
}

#[test]
fn members_prefer_different_nodes_by_default() {
    let affinity = pod_spec(&mongodb()).affinity.unwrap();
    let anti = affinity.pod_anti_affinity.unwrap();
    assert_eq!(
        anti.required_during_scheduling_ignored_during_execution,
        None
    );
    let term = &anti
        .preferred_during_scheduling_ignored_during_execution
        .unwrap()[0]
        .pod_affinity_term;
    assert_eq!(term.topology_key, "kubernetes.io/hostname");
    let match_labels = term
        .label_selector
        .as_ref()
        .unwrap()
        .match_labels
        .as_ref()
        .unwrap();
    assert_eq!(match_labels["app.kubernetes.io/instance"], NAME);
}

#[test]
fn user_affinity_replaces_the_default_anti_affinity() {
    let user_affinity = Affinity {
        node_affinity: Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_expressions: Some(vec![NodeSelectorRequirement {
                        key: "disk".into(),
                        operator: "In".into(),
                        values: Some(vec!["ssd".into()]),
                    }]),
                    match_fields: None,
                }],
            }),
            preferred_during_scheduling_ignored_during_execution: None,
        }),
        ..Affinity::default()
    };
    let mut mongodb = mongodb();
    mongodb.spec.pod_spec = Some(MemberPodSpec {
        affinity: Some(user_affinity.clone()),
        ..MemberPodSpec::default()
    });
    assert_eq!(pod_spec(&mongodb).affinity, Some(user_affinity));
}

#[test]
fn user_scheduling_constraints_pass_through() {
    let toleration = Toleration {
        key: Some("dedicated".into()),
        operator: Some("Exists".into()),
        ..Toleration::default()
    };
    let spread = TopologySpreadConstraint {
        max_skew: 1,
        topology_key: "topology.kubernetes.io/zone".into(),
        when_unsatisfiable: "ScheduleAnyway".into(),
        ..TopologySpreadConstraint::default()
    };
    let node_selector = BTreeMap::from([("disk".to_string(), "ssd".to_string())]);
    let mut mongodb = mongodb();
    mongodb.spec.pod_spec = Some(MemberPodSpec {
        node_selector: Some(node_selector.clone()),
        tolerations: Some(vec![toleration.clone()]),
        topology_spread_constraints: Some(vec![spread.clone()]),
        ..MemberPodSpec::default()
    });
    let pod = pod_spec(&mongodb);
    assert_eq!(pod.node_selector, Some(node_selector));
    assert_eq!(pod.tolerations, Some(vec![toleration]));
    assert_eq!(pod.topology_spread_constraints, Some(vec![spread]));
}

#[test]
fn mongod_resources_come_from_the_spec() {
    let mut mongodb = mongodb();
    let cpu = BTreeMap::from([("cpu".to_string(), Quantity("2".into()))]);
    mongodb.spec.resources = ResourceSetting {
        limits: cpu.clone(),
        requests: BTreeMap::new(),
    };
    let resources = container(&pod_spec(&mongodb), "mongod")
        .resources
        .clone()
        .unwrap();
    assert_eq!((resources.limits, resources.requests), (Some(cpu), None));
}

#[test]
fn custom_config_is_mounted_and_passed_only_when_set() {
    let without = pod_spec(&mongodb());
    assert!(volume(&without, "custom-config").is_none());
    assert!(!args_of(container(&without, "mongod")).contains(&"--config".to_string()));

    let mut mongodb = mongodb();
    mongodb.spec.custom_config_ref = Some("demo-custom".to_string());
    let with = pod_spec(&mongodb);
    let config_map = volume(&with, "custom-config")
        .unwrap()
        .config_map
        .as_ref()
        .unwrap();
    assert_eq!(config_map.name, "demo-custom");
    assert_eq!(config_map.items.as_ref().unwrap()[0].key, "mongod.yaml");
    let mongod = container(&with, "mongod");
    assert!(args_of(mongod)
        .windows(2)
        .any(|pair| pair == ["--config", "/etc/mongodb/custom/mongod.yaml"]));
    let mount = mongod
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.name == "custom-config")
        .unwrap();
    assert_eq!(
        (mount.mount_path.as_str(), mount.read_only),
        ("/etc/mongodb/custom", Some(true))
    );
}

#[test]
fn spec_config_settings_become_mongod_options_in_a_stable_order_and_unknown_ones_never_do() {
    let mut mongodb = mongodb();
    let entry = |name: &str, value: &str| ConfigVar {
        name: name.into(),
        value: value.into(),
    };
    mongodb.spec.config = vec![
        entry("storage.wiredTiger.engineConfig.cacheSizeGB", "0.5"),
        entry("LOG_LEVEL", "info"),
        entry("replication.oplogSizeMB", "2048"),
    ];
    let first =
        member_stateful_set(&BuildContext::from_mongodb(&mongodb).unwrap(), &member(0)).unwrap();
    let args = args_of(container(&pod_spec(&mongodb), "mongod"));
    assert!(
        args.ends_with(&[
            "--oplogSize".to_string(),
            "2048".to_string(),
            "--wiredTigerCacheSizeGB".to_string(),
            "0.5".to_string(),
        ]),
        "{args:?}"
    );
    assert!(!args.iter().any(|a| a.contains("LOG_LEVEL")), "{args:?}");
    mongodb.spec.config.reverse();
    let reordered =
        member_stateful_set(&BuildContext::from_mongodb(&mongodb).unwrap(), &member(0)).unwrap();
    assert_eq!(
        first.revision, reordered.revision,
        "the order FedState sends them in changes nothing"
    );
}

#[test]
fn enabling_the_exporter_leaves_the_member_pod_template_unchanged() {
    // A container of the member's pod counts in its Ready condition: the
    // exporter runs beside the members, and switching it restarts none.
    let disabled = mongodb();
    let mut enabled = mongodb();
    enabled.spec.metrics_exporter_spec.enable = true;
    let template = |mongodb: &MongoDB| {
        let built = build(mongodb, &member(1));
        let template = built.stateful_set.spec.unwrap().template;
        (serde_json::to_string(&template).unwrap(), built.revision)
    };
    assert_eq!(template(&enabled), template(&disabled));
}

#[test]
fn pods_use_the_image_pull_secret_only_when_one_is_given() {
    assert_eq!(pod_spec(&mongodb()).image_pull_secrets, None);
    let mut mongodb = mongodb();
    mongodb.spec.image_pull_secret = Some(crate::api::ImagePullSecretSpec {
        username: "u".into(),
        password: "p".into(),
        registry: "r".into(),
    });
    let references = pod_spec(&mongodb).image_pull_secrets.unwrap();
    assert_eq!(references[0].name, "demo-image-pull");
}

#[test]
fn revision_changes_when_the_image_changes_and_not_otherwise() {
    let mongodb = mongodb();
    let first = build(&mongodb, &member(0));
    assert_eq!(first.revision.len(), 10);
    assert!(first.revision.chars().all(|c| c.is_ascii_hexdigit()));
    let template = first
        .stateful_set
        .spec
        .as_ref()
        .unwrap()
        .template
        .metadata
        .clone()
        .unwrap();
    assert_eq!(
        template.annotations.unwrap()[REVISION_ANNOTATION],
        first.revision
    );

    assert_eq!(
        build(&mongodb, &member(0)).revision,
        first.revision,
        "stable across builds"
    );
    assert_eq!(
        build(&mongodb, &member(4)).revision,
        first.revision,
        "same for every member"
    );
    let moved = MemberTarget {
        host: Some("10.0.0.1:30000".into()),
        ..member(0)
    };
    assert_eq!(
        build(&mongodb, &moved).revision,
        first.revision,
        "independent of the host"
    );

    let mut upgraded = mongodb.clone();
    upgraded.spec.image = "mongo:8.0".to_string();
    assert_ne!(build(&upgraded, &member(0)).revision, first.revision);
}

#[test]
fn revision_changes_with_the_content_digest() {
    let mongodb = mongodb();
    let ctx = BuildContext::from_mongodb(&mongodb).unwrap();
    let plain = member_stateful_set(&ctx, &member(0)).unwrap().revision;
    let with = |digest: &str| {
        let ctx = ctx.clone().with_content_digest(digest.to_owned());
        member_stateful_set(&ctx, &member(0)).unwrap().revision
    };
    assert_ne!(with("aa"), plain);
    assert_ne!(with("aa"), with("ab"));
    assert_eq!(with("aa"), with("aa"));
}

#[test]
fn the_template_names_the_keys_of_the_keyfile_its_pods_run_and_changes_with_it() {
    let mongodb = mongodb_with_secret_ref();
    let planned = |keyfile: Keyfile| {
        let ctx = BuildContext::from_mongodb(&mongodb)
            .unwrap()
            .with_keyfile(keyfile);
        member_stateful_set(&ctx, &member(0)).unwrap()
    };
    let both = Keyfile::parse(&format!("- {PLANNED_KEY}\n- bmV3IGtleWZpbGU=\n")).unwrap();
    let one = planned(Keyfile::of_key(PLANNED_KEY));
    let two = planned(both.clone());
    let keys = |built: &MemberStatefulSet| {
        let template = &built.stateful_set.spec.as_ref().unwrap().template;
        template
            .metadata
            .as_ref()
            .unwrap()
            .annotations
            .as_ref()
            .unwrap()[KEYFILE_KEYS_ANNOTATION]
            .clone()
    };
    assert_eq!(keys(&one), secrets::fingerprint(PLANNED_KEY));
    assert_eq!(keys(&two), both.fingerprints().join(","));
    assert_ne!(one.revision, two.revision, "a new keyfile rolls the pods");
}

/// Members given TLS at `mode` (the certificate as the checks found it).
fn with_tls(mode: crate::api::TlsMode) -> MemberStatefulSet {
    let tls = member_tls(mode, b"CERT\nKEY\n", b"CA\n");
    let mongodb = mongodb();
    let ctx = BuildContext::from_mongodb(&mongodb)
        .unwrap()
        .with_tls(Some(tls));
    member_stateful_set(&ctx, &member(0)).unwrap()
}

#[test]
fn a_payload_without_tls_keeps_the_revision_it_had_before_tls_existed() {
    // The revision of this payload built by f5d4768, before `spec.tls`.
    assert_eq!(build(&mongodb(), &member(0)).revision, PINNED_REVISION);
}

#[test]
fn tls_gives_mongod_its_mode_files_and_volume() {
    let built = with_tls(crate::api::TlsMode::RequireTls);
    let pod = built
        .stateful_set
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .clone()
        .unwrap();
    let args = args_of(container(&pod, "mongod"));
    let tail: Vec<&str> = args
        .iter()
        .skip_while(|a| *a != "--tlsMode")
        .map(String::as_str)
        .collect();
    assert_eq!(
        tail,
        [
            "--tlsMode",
            "requireTLS",
            "--tlsCertificateKeyFile",
            "/etc/mongodb/tls/mongod.pem",
            "--tlsCAFile",
            "/etc/mongodb/tls/ca.pem",
            "--tlsAllowConnectionsWithoutCertificates",
        ]
    );
    let secret = volume(&pod, "tls").unwrap().secret.clone().unwrap();
    assert_eq!(secret.secret_name.as_deref(), Some("demo-mongod-tls"));
    assert_eq!(secret.default_mode, Some(0o440));
    assert!(secret.items.is_none(), "mounted whole: refreshed in place");
    let mounts = container(&pod, "mongod").volume_mounts.clone().unwrap();
    assert!(mounts.iter().any(|m| m.name == "tls"
        && m.mount_path == "/etc/mongodb/tls"
        && m.read_only == Some(true)));
    let annotations = built.stateful_set.metadata.annotations.unwrap();
    assert_eq!(annotations[TLS_MODE_ANNOTATION], "requireTLS");
    assert_ne!(built.revision, build(&mongodb(), &member(0)).revision);
    assert_ne!(
        with_tls(crate::api::TlsMode::PreferTls).revision,
        built.revision
    );
}

#[test]
fn without_tls_nothing_of_it_is_built() {
    let pod = pod_spec(&mongodb());
    assert!(volume(&pod, "tls").is_none());
    assert!(!args_of(container(&pod, "mongod"))
        .iter()
        .any(|a| a.starts_with("--tls")));
    let built = build(&mongodb(), &member(0));
    assert!(!built
        .stateful_set
        .metadata
        .annotations
        .unwrap()
        .contains_key(TLS_MODE_ANNOTATION));
}

const PINNED_REVISION: &str = "1d36beadcf";

/// The revision of members of `image` given `certificate_key` and `ca`.
fn revision_with_files(image: &str, certificate_key: &[u8], ca: &[u8]) -> String {
    let tls = member_tls(crate::api::TlsMode::RequireTls, certificate_key, ca);
    let mut mongodb = mongodb();
    mongodb.spec.image = image.into();
    let ctx = BuildContext::from_mongodb(&mongodb)
        .unwrap()
        .with_tls(Some(tls));
    member_stateful_set(&ctx, &member(0)).unwrap().revision
}

#[test]
fn files_a_member_loads_only_by_restarting_roll_it() {
    let first = revision_with_files("mongo:7.0", b"CERT\nKEY\n", b"CA\n");
    assert_eq!(
        revision_with_files("mongo:7.0", b"RENEWED\nKEY\n", b"CA\n"),
        first,
        "from 5.0 a new certificate is loaded in place"
    );
    assert_ne!(
        revision_with_files("mongo:7.0", b"CERT\nKEY\n", b"CA\nNEW CA\n"),
        first,
        "a new bundle rolls"
    );
    assert_ne!(
        revision_with_files("mongo:4.4.29", b"CERT\nKEY\n", b"CA\n"),
        revision_with_files("mongo:4.4.29", b"RENEWED\nKEY\n", b"CA\n"),
        "before 5.0 a new certificate rolls"
    );
}
