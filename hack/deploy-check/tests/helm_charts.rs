//! Proves that both Helm charts render and lint cleanly with the real Helm engine
//! (helm-python-sdk, driven by `hack/deploy-check/render_charts.py`), with default
//! values and with `watchNamespace` set, and that what they render is right: the
//! manifests are valid Kubernetes objects (they deserialize into `k8s-openapi`
//! types), the Deployment passes the operator's settings as env (the pod's
//! identity from the downward API) and runs restricted, RBAC is least-privilege
//! (exact rules, no wildcards; the leader-election Lease only in the release
//! namespace) and cluster-wide or namespaced as asked, two replicas elect a
//! leader, the image can be pinned by digest, the ServiceMonitor and alerts use
//! what the operator exports, `values.schema.json` refuses bad values, and the
//! Karmada chart's policies select exactly the objects the member chart creates.
//!
//! Needs the python from `MMO_PYTHON` (set by `eval "$(hack/test-tools.sh)"`).
//! Without it each test prints `SKIPPED: …` and passes, unless
//! `MMO_REQUIRE_TOOLS=1`, which makes it fail.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use serde_json::{json, Value as Json};

const MEMBER: &str = "mongodb-member-operator";
const KARMADA: &str = "mongodb-member-operator-karmada";
/// Release name and namespace `render_charts.py` installs the member chart with.
const RELEASE: &str = "mongodb-member-operator";
const WATCHED: &str = "databases";

fn repository_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The output of `render_charts.py`, or `None` when the tools are not installed.
fn rendered() -> Option<&'static Json> {
    static RENDERED: OnceLock<Option<Json>> = OnceLock::new();
    let rendered = RENDERED.get_or_init(|| {
        let Some(python) = std::env::var_os("MMO_PYTHON").filter(|p| !p.is_empty()) else {
            assert!(
                std::env::var("MMO_REQUIRE_TOOLS").as_deref() != Ok("1"),
                "MMO_REQUIRE_TOOLS=1 but MMO_PYTHON is unset: run eval \"$(hack/test-tools.sh)\""
            );
            return None;
        };
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("render_charts.py");
        let output = Command::new(&python)
            .arg(&script)
            .arg(repository_root())
            .output()
            .expect("run render_charts.py");
        assert!(
            output.status.success(),
            "render_charts.py failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        Some(serde_json::from_slice(&output.stdout).expect("render_charts.py prints JSON"))
    });
    if rendered.is_none() {
        println!("SKIPPED: MMO_PYTHON is unset; run eval \"$(hack/test-tools.sh)\" to render the charts with helm-python-sdk");
    }
    rendered.as_ref()
}

fn case<'a>(rendered: &'a Json, chart: &str, name: &str) -> &'a Json {
    rendered["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .find(|c| c["chart"] == chart && c["case"] == name)
        .unwrap_or_else(|| panic!("render_charts.py has no case {chart}/{name}"))
}

/// Every YAML document a case rendered (NOTES.txt aside), template by template.
fn documents(case: &Json) -> Vec<Json> {
    assert!(
        case["error"].is_null(),
        "{}/{} does not render: {}",
        case["chart"],
        case["case"],
        case["error"]
    );
    let manifests = case["manifests"].as_object().expect("manifests");
    let mut docs = Vec::new();
    for (path, text) in manifests {
        if path.ends_with("NOTES.txt") {
            continue;
        }
        for document in serde_yaml::Deserializer::from_str(text.as_str().expect("manifest text")) {
            let doc: Json = serde::Deserialize::deserialize(document)
                .unwrap_or_else(|err| panic!("{path} is not YAML: {err}"));
            if !doc.is_null() {
                docs.push(doc);
            }
        }
    }
    docs
}

fn of_kind<T: serde::de::DeserializeOwned>(docs: &[Json], kind: &str) -> Vec<T> {
    docs.iter()
        .filter(|d| d["kind"] == kind)
        .map(|d| {
            serde_json::from_value(d.clone())
                .unwrap_or_else(|err| panic!("a rendered {kind} is not a valid {kind}: {err}\n{d}"))
        })
        .collect()
}

fn one<T: serde::de::DeserializeOwned>(docs: &[Json], kind: &str) -> T {
    let mut found: Vec<T> = of_kind(docs, kind);
    assert_eq!(found.len(), 1, "exactly one {kind}");
    found.remove(0)
}

/// The document parsed as `T` and written back.
fn round_trip<T: serde::de::DeserializeOwned + serde::Serialize>(doc: &Json) -> Json {
    let typed: T = serde_json::from_value(doc.clone())
        .unwrap_or_else(|err| panic!("not a valid {}: {err}\n{doc}", doc["kind"]));
    serde_json::to_value(typed).expect("serialize")
}

fn env_of(deployment: &Deployment) -> Vec<(String, String)> {
    let container = &deployment
        .spec
        .as_ref()
        .expect("spec")
        .template
        .spec
        .as_ref()
        .expect("pod spec")
        .containers[0];
    container
        .env
        .iter()
        .flatten()
        .map(|e| {
            let field = e
                .value_from
                .as_ref()
                .and_then(|v| v.field_ref.as_ref())
                .map(|f| format!("fieldRef:{}", f.field_path));
            let value = field.or_else(|| e.value.clone()).unwrap_or_default();
            (e.name.clone(), value)
        })
        .collect()
}

/// The cases the chart refuses to render, each with what its error must say.
const REFUSED: [(&str, &str); 4] = [
    ("badLogFormat", "/logFormat"),
    (
        "replicasWithoutLeaderElection",
        "replicas > 1 needs leaderElection.enabled",
    ),
    (
        "unknownValue",
        "additional properties 'replica' not allowed",
    ),
    ("badDigest", "/image/digest"),
];

/// The Role and RoleBinding of the leader-election Lease: the Lease only, in
/// the release namespace, bound to the operator's ServiceAccount. Returns the
/// other Roles.
fn check_leader_election_rbac(docs: &[Json]) -> Vec<Role> {
    let (election, others): (Vec<Role>, Vec<Role>) =
        of_kind::<Role>(docs, "Role").into_iter().partition(|r| {
            r.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.ends_with("-leader-election"))
        });
    assert_eq!(election.len(), 1, "one leader-election Role");
    let role = &election[0];
    assert_eq!(role.metadata.namespace.as_deref(), Some(RELEASE));
    let expected: BTreeSet<(String, String, BTreeSet<String>)> = BTreeSet::from([(
        "coordination.k8s.io".to_string(),
        "leases".to_string(),
        ["get", "create", "update"].map(String::from).into(),
    )]);
    assert_eq!(flatten(role.rules.as_deref().expect("rules")), expected);
    let binding = of_kind::<RoleBinding>(docs, "RoleBinding")
        .into_iter()
        .find(|b| b.role_ref.name == role.metadata.name.clone().unwrap_or_default())
        .expect("the leader-election RoleBinding");
    let subject = &binding.subjects.expect("subjects")[0];
    assert_eq!(
        (subject.name.as_str(), subject.namespace.as_deref()),
        (RELEASE, Some(RELEASE))
    );
    others
}

/// The rules the operator needs, as (apiGroup, resource, verbs): exactly the
/// API calls of `src/main.rs` and `src/controller/`, one comment per rule
/// naming them. See the chart's `_helpers.tpl` and README. There is no
/// `update` (every write is a patch or a server-side apply), no core `events`,
/// no `mongodbs/finalizers` (the operator's owner references do not set
/// `blockOwnerDeletion`) and never `pods/exec`. `create` stands beside `patch`
/// where the operator server-side applies: kube-apiserver authorizes an apply
/// that creates its object as a `create` too.
fn needed_rules() -> BTreeSet<(String, String, BTreeSet<String>)> {
    let rule = |group: &str, resource: &str, verbs: &[&str]| {
        (
            group.to_string(),
            resource.to_string(),
            verbs.iter().map(|v| v.to_string()).collect(),
        )
    };
    BTreeSet::from([
        // list, watch: `Controller::new` over MongoDB objects (controller/mod.rs `run`);
        // patch: `finalizer::claim`/`release` (JSON patch of metadata.finalizers).
        rule(
            "middleware.fedstate.io",
            "mongodbs",
            &["list", "watch", "patch"],
        ),
        // patch: `write_status` (server-side apply of the status subresource).
        rule("middleware.fedstate.io", "mongodbs/status", &["patch"]),
        // list, watch: `Controller::owns::<StatefulSet>` and `dereference`'s list;
        // create, patch: `apply::apply` (server-side apply) and `record::record`
        // (merge patch of the member-entry annotation); delete: `apply::delete_member`, and `grow::grow` (orphaning delete).
        rule(
            "apps",
            "statefulsets",
            &["list", "watch", "create", "patch", "delete"],
        ),
        // list, watch: `Controller::owns::<Deployment>` (the exporters);
        // create, patch: `apply::apply`; delete: `apply::remove_unwanted_exporters`.
        rule(
            "apps",
            "deployments",
            &["list", "watch", "create", "patch", "delete"],
        ),
        // get: `dereference` reads FedState's arbiter Service by name
        // (`ByName`); list, watch: the cache of Services with an instance
        // label, and the metadata-only watch of the others (`caches::reflect`);
        // create, patch: `apply::apply`, and the member Services' finalizer
        // (`service_hold::hold`); delete: `apply::remove_unwanted_exporters`
        // (a disabled exporter's Service).
        rule(
            "",
            "services",
            &["get", "list", "watch", "create", "patch", "delete"],
        ),
        // get: `dereference` reads the Secrets it needs by name (`ByName`);
        // list, watch: the metadata-only Secret watch
        // (`Api<PartialObjectMeta<Secret>>`); create, patch: `apply::apply`;
        // delete: `keyfile::prune_keyfile_secrets`.
        rule(
            "",
            "secrets",
            &["get", "list", "watch", "create", "patch", "delete"],
        ),
        // get: `dereference` reads hostconf and the custom config by name
        // (`ByName`); list, watch: the metadata-only ConfigMap watch.
        rule("", "configmaps", &["get", "list", "watch"]),
        // list, watch: the data claims' cache (`caches::reflect`); patch:
        // `grow::grow` expands a claim; delete: `apply::delete_member` deletes
        // a removed member's data claim.
        rule(
            "",
            "persistentvolumeclaims",
            &["list", "watch", "patch", "delete"],
        ),
        // list, watch: the cache of the member pods; delete: the roll
        // (`roll::roll`, OnDelete StatefulSets: the pod is replaced on the new
        // revision).
        rule("", "pods", &["list", "watch", "delete"]),
        // list, watch: `Controller::owns::<PodDisruptionBudget>`; create, patch:
        // `apply::apply`.
        rule(
            "policy",
            "poddisruptionbudgets",
            &["list", "watch", "create", "patch"],
        ),
        // create, patch: `events::Recorder::publish` (events.k8s.io/v1; a
        // repeated Event's series is a merge patch).
        rule("events.k8s.io", "events", &["create", "patch"]),
    ])
}

/// Flattens rules to (apiGroup, resource, verbs), refusing wildcards.
fn flatten(rules: &[PolicyRule]) -> BTreeSet<(String, String, BTreeSet<String>)> {
    let mut flat = BTreeSet::new();
    for rule in rules {
        let groups = rule.api_groups.clone().unwrap_or_default();
        let resources = rule.resources.clone().unwrap_or_default();
        assert!(rule.non_resource_urls.is_none(), "no non-resource URLs");
        for value in groups.iter().chain(&resources).chain(&rule.verbs) {
            assert!(!value.contains('*'), "wildcard in rule {rule:?}");
        }
        for group in &groups {
            for resource in &resources {
                flat.insert((
                    group.clone(),
                    resource.clone(),
                    rule.verbs.iter().cloned().collect(),
                ));
            }
        }
    }
    flat
}

/// The startup check's rule: get the MongoDB CRD by name, and only it.
fn assert_is_the_crd_rule(rule: &PolicyRule) {
    assert_eq!(
        rule.api_groups.as_deref(),
        Some(&["apiextensions.k8s.io".to_string()][..])
    );
    assert_eq!(
        rule.resources.as_deref(),
        Some(&["customresourcedefinitions".to_string()][..])
    );
    assert_eq!(
        rule.resource_names.as_deref(),
        Some(&["mongodbs.middleware.fedstate.io".to_string()][..])
    );
    // get: `wait_for_crd` (main.rs) reads the CRD by name, nothing else.
    assert_eq!(rule.verbs, ["get"]);
}

#[test]
fn both_charts_render_and_lint_without_errors() {
    let Some(rendered) = rendered() else { return };
    let cases = rendered["cases"].as_array().expect("cases");
    assert_eq!(cases.len(), 9);
    let refused: Vec<&str> = REFUSED.iter().map(|(name, _)| *name).collect();
    for case in cases {
        if refused.contains(&case["case"].as_str().unwrap_or_default()) {
            continue;
        }
        let errors: Vec<&Json> = case["lint"]["messages"]
            .as_array()
            .expect("lint messages")
            .iter()
            .filter(|m| m["severity"] == 3)
            .collect();
        assert!(
            errors.is_empty(),
            "lint errors in {}/{}: {errors:?}",
            case["chart"],
            case["case"]
        );
        assert_eq!(
            case["lint"]["errors"],
            json!([]),
            "{}/{}",
            case["chart"],
            case["case"]
        );
        assert!(!documents(case).is_empty());
    }
}

#[test]
fn bad_values_are_refused_when_rendering_with_a_message_naming_them() {
    let Some(rendered) = rendered() else { return };
    for (name, says) in REFUSED {
        let error = case(rendered, MEMBER, name)["error"]
            .as_str()
            .unwrap_or_else(|| panic!("rendering {name} fails"))
            .to_string();
        assert!(error.contains(says), "{name}: {error}");
    }
}

#[test]
fn two_replicas_elect_a_leader_roll_on_upgrade_and_pin_the_image_by_digest() {
    let Some(rendered) = rendered() else { return };
    let docs = documents(case(rendered, MEMBER, "operations"));
    let deployment: Deployment = one(&docs, "Deployment");
    let spec = deployment.spec.clone().expect("spec");
    assert_eq!(spec.replicas, Some(2));
    assert_eq!(
        spec.strategy.and_then(|s| s.type_).as_deref(),
        Some("RollingUpdate"),
        "a new pod stands by for the Lease: no need to stop the old one first"
    );
    let container = &spec.template.spec.expect("pod spec").containers[0];
    assert_eq!(
        container.image.as_deref(),
        Some(
            format!(
                "ghcr.io/fedstate/mongodb-member-operator@sha256:{}",
                "ab".repeat(32)
            )
            .as_str()
        )
    );
    let env = env_of(&deployment);
    assert!(env.contains(&("CLUSTER_NAME".into(), "member1".into())));
    assert!(env.contains(&("LEADER_ELECTION_NAMESPACE".into(), RELEASE.into())));
    check_leader_election_rbac(&docs);
}

#[test]
fn the_service_monitor_scrapes_the_metrics_port_and_the_alerts_use_exported_metrics() {
    let Some(rendered) = rendered() else { return };
    let docs = documents(case(rendered, MEMBER, "operations"));
    let monitor = docs
        .iter()
        .find(|d| d["kind"] == "ServiceMonitor")
        .expect("a ServiceMonitor");
    assert_eq!(monitor["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(monitor["spec"]["endpoints"][0]["port"], "metrics");
    let service: Service = one(&docs, "Service");
    let selector = &monitor["spec"]["selector"]["matchLabels"];
    let labels = serde_json::to_value(service.metadata.labels.expect("labels")).expect("labels");
    for (key, value) in selector.as_object().expect("matchLabels") {
        assert_eq!(
            &labels[key], value,
            "the ServiceMonitor selects the metrics Service"
        );
    }
    let rule = docs
        .iter()
        .find(|d| d["kind"] == "PrometheusRule")
        .expect("a PrometheusRule");
    let telemetry = std::fs::read_to_string(repository_root().join("src/telemetry.rs"))
        .expect("src/telemetry.rs");
    let alerts: Vec<&Json> = rule["spec"]["groups"][0]["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .collect();
    let names: BTreeSet<&str> = alerts.iter().filter_map(|a| a["alert"].as_str()).collect();
    assert_eq!(
        names,
        BTreeSet::from([
            "MongoDBReplicaSetNoPrimary",
            "MongoDBMemberDown",
            "MongoDBOperatorStuck",
            "MongoDBOperatorPassesFailing"
        ])
    );
    for alert in alerts {
        let expr = alert["expr"].as_str().expect("expr");
        let metric = expr
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .find(|word| word.starts_with("mongodb_operator_"))
            .unwrap_or_else(|| panic!("{expr} uses no operator metric"));
        assert!(
            telemetry.contains(&format!("\"{metric}")),
            "{metric} (in {expr}) is not a metric the operator exports"
        );
    }
}

#[test]
fn deployment_passes_the_operator_settings_as_env_and_probes_the_metrics_port() {
    let Some(rendered) = rendered() else { return };
    for (name, watched) in [("default", ""), ("watchNamespace", WATCHED)] {
        let deployment: Deployment = one(&documents(case(rendered, MEMBER, name)), "Deployment");
        let expected = [
            ("WATCH_NAMESPACE", watched),
            ("METRICS_ADDRESS", "0.0.0.0:8080"),
            ("CONCURRENCY", "16"),
            ("LOG_FORMAT", "text"),
            ("CLUSTER_NAME", ""),
            ("POD_NAME", "fieldRef:metadata.name"),
            ("POD_NAMESPACE", "fieldRef:metadata.namespace"),
            ("LEADER_ELECTION_NAMESPACE", RELEASE),
        ];
        let expected: Vec<(String, String)> = expected
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(env_of(&deployment), expected, "case {name}");

        let spec = deployment.spec.as_ref().expect("spec");
        assert_eq!(spec.replicas, Some(1));
        // Leader election is on by default: the new pod of an upgrade stands
        // by until the old one has gone and its Lease expired.
        assert_eq!(
            spec.strategy.as_ref().and_then(|s| s.type_.as_deref()),
            Some("RollingUpdate")
        );
        let pod = spec.template.spec.as_ref().expect("pod spec");
        assert_eq!(pod.service_account_name.as_deref(), Some(RELEASE));
        let container = &pod.containers[0];
        assert_eq!(
            container.image.as_deref(),
            Some("ghcr.io/fedstate/mongodb-member-operator:0.1.0"),
            "tag defaults to appVersion"
        );
        let port = &container.ports.as_ref().expect("ports")[0];
        assert_eq!(
            (port.name.as_deref(), port.container_port),
            (Some("metrics"), 8080)
        );
        for (probe, path) in [
            (&container.liveness_probe, "/healthz"),
            (&container.readiness_probe, "/readyz"),
        ] {
            let get = probe
                .as_ref()
                .and_then(|p| p.http_get.as_ref())
                .expect("HTTP probe");
            assert_eq!(get.path.as_deref(), Some(path));
            assert_eq!(
                serde_json::to_value(&get.port).expect("port"),
                json!("metrics")
            );
        }
        let resources = container.resources.as_ref().expect("resources");
        assert!(resources.requests.is_some() && resources.limits.is_some());
    }
}

#[test]
fn deployment_runs_with_a_restricted_security_context() {
    let Some(rendered) = rendered() else { return };
    let deployment: Deployment = one(&documents(case(rendered, MEMBER, "default")), "Deployment");
    let pod = deployment
        .spec
        .expect("spec")
        .template
        .spec
        .expect("pod spec");
    let pod_context = pod.security_context.expect("pod securityContext");
    assert_eq!(pod_context.run_as_non_root, Some(true));
    assert_eq!(pod_context.run_as_user, Some(65532));
    assert_eq!(
        pod_context.seccomp_profile.expect("pod seccomp").type_,
        "RuntimeDefault"
    );
    let context = pod.containers[0]
        .security_context
        .clone()
        .expect("container securityContext");
    assert_eq!(context.run_as_non_root, Some(true));
    assert_eq!(context.run_as_user, Some(65532));
    assert_eq!(context.read_only_root_filesystem, Some(true));
    assert_eq!(context.allow_privilege_escalation, Some(false));
    assert_eq!(context.privileged, None);
    let capabilities = context.capabilities.expect("capabilities");
    assert_eq!(capabilities.drop, Some(vec!["ALL".to_string()]));
    assert_eq!(capabilities.add, None);
    assert_eq!(
        context.seccomp_profile.expect("container seccomp").type_,
        "RuntimeDefault"
    );
}

#[test]
fn rbac_is_a_cluster_role_without_watch_namespace_with_exactly_the_needed_rules() {
    let Some(rendered) = rendered() else { return };
    let docs = documents(case(rendered, MEMBER, "default"));
    assert!(
        check_leader_election_rbac(&docs).is_empty(),
        "no Role but the Lease's"
    );
    let role: ClusterRole = one(&docs, "ClusterRole");
    let rules = role.rules.clone().expect("rules");
    let (crd_rules, other_rules): (Vec<PolicyRule>, Vec<PolicyRule>) =
        rules.into_iter().partition(|r| r.resource_names.is_some());
    assert_eq!(crd_rules.len(), 1);
    assert_is_the_crd_rule(&crd_rules[0]);
    assert_eq!(flatten(&other_rules), needed_rules());

    let binding: ClusterRoleBinding = one(&docs, "ClusterRoleBinding");
    assert_eq!(
        (
            binding.role_ref.kind.as_str(),
            binding.role_ref.name.as_str()
        ),
        ("ClusterRole", role.metadata.name.as_deref().expect("name"))
    );
    let subject = &binding.subjects.expect("subjects")[0];
    assert_eq!(
        (
            subject.kind.as_str(),
            subject.name.as_str(),
            subject.namespace.as_deref()
        ),
        ("ServiceAccount", RELEASE, Some(RELEASE))
    );
}

#[test]
fn rbac_is_a_role_in_the_watched_namespace_plus_only_the_crd_read_cluster_wide() {
    let Some(rendered) = rendered() else { return };
    let docs = documents(case(rendered, MEMBER, "watchNamespace"));
    let roles = check_leader_election_rbac(&docs);
    assert_eq!(roles.len(), 1, "one Role for the watched namespace");
    let role = roles[0].clone();
    assert_eq!(role.metadata.namespace.as_deref(), Some(WATCHED));
    assert_eq!(
        flatten(role.rules.as_deref().expect("rules")),
        needed_rules()
    );
    assert!(role
        .rules
        .iter()
        .flatten()
        .all(|r| r.resource_names.is_none()));

    let binding = of_kind::<RoleBinding>(&docs, "RoleBinding")
        .into_iter()
        .find(|b| b.metadata.namespace.as_deref() == Some(WATCHED))
        .expect("a RoleBinding in the watched namespace");
    assert_eq!(
        (
            binding.role_ref.kind.as_str(),
            binding.role_ref.name.as_str()
        ),
        ("Role", role.metadata.name.as_deref().expect("name"))
    );
    let subject = &binding.subjects.expect("subjects")[0];
    assert_eq!(
        (subject.name.as_str(), subject.namespace.as_deref()),
        (RELEASE, Some(RELEASE)),
        "the operator's ServiceAccount in its own namespace"
    );

    let cluster_role: ClusterRole = one(&docs, "ClusterRole");
    let cluster_rules = cluster_role.rules.expect("rules");
    assert_eq!(
        cluster_rules.len(),
        1,
        "cluster-wide, only the CRD read of the startup check"
    );
    assert_is_the_crd_rule(&cluster_rules[0]);
    let cluster_binding: ClusterRoleBinding = one(&docs, "ClusterRoleBinding");
    assert_eq!(
        cluster_binding.role_ref.name,
        cluster_role.metadata.name.expect("name")
    );
}

#[test]
fn member_chart_renders_valid_kubernetes_objects_that_reference_each_other() {
    let Some(rendered) = rendered() else { return };
    for name in ["default", "watchNamespace"] {
        let docs = documents(case(rendered, MEMBER, name));
        let kinds: BTreeSet<&str> = docs
            .iter()
            .map(|d| d["kind"].as_str().expect("kind"))
            .collect();
        // The same kinds either way: with watchNamespace the Role is the
        // watched namespace's, besides the leader-election Lease's.
        let expected = BTreeSet::from([
            "Deployment",
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "Service",
        ]);
        assert_eq!(kinds, expected, "case {name}");
        // Every document is its k8s-openapi type, field for field: a misspelt or
        // misplaced field would be dropped by the round trip and show up here.
        for doc in &docs {
            let kind = doc["kind"].as_str().expect("kind");
            let typed = match kind {
                "Deployment" => round_trip::<Deployment>(doc),
                "ServiceAccount" => round_trip::<ServiceAccount>(doc),
                "Service" => round_trip::<Service>(doc),
                "ClusterRole" => round_trip::<ClusterRole>(doc),
                "ClusterRoleBinding" => round_trip::<ClusterRoleBinding>(doc),
                "Role" => round_trip::<Role>(doc),
                "RoleBinding" => round_trip::<RoleBinding>(doc),
                other => panic!("unexpected kind {other}"),
            };
            assert_eq!(
                &typed, doc,
                "{kind} {} has fields Kubernetes does not know",
                doc["metadata"]["name"]
            );
        }

        let account: ServiceAccount = one(&docs, "ServiceAccount");
        assert_eq!(account.metadata.name.as_deref(), Some(RELEASE));
        assert_eq!(account.metadata.namespace.as_deref(), Some(RELEASE));

        let deployment: Deployment = one(&docs, "Deployment");
        let spec = deployment.spec.expect("spec");
        let selector = spec.selector.match_labels.expect("matchLabels");
        let pod_labels = spec
            .template
            .metadata
            .expect("pod metadata")
            .labels
            .expect("pod labels");
        assert!(
            selector.iter().all(|(k, v)| pod_labels.get(k) == Some(v)),
            "the Deployment selects its pods"
        );

        let service: Service = one(&docs, "Service");
        let service_spec = service.spec.expect("service spec");
        assert_eq!(
            service_spec.selector.expect("service selector"),
            selector,
            "the metrics Service selects the operator pod"
        );
        let port = &service_spec.ports.expect("ports")[0];
        assert_eq!((port.name.as_deref(), port.port), (Some("metrics"), 8080));
        assert_eq!(
            serde_json::to_value(&port.target_port).expect("targetPort"),
            json!("metrics")
        );
    }
}

#[test]
fn karmada_chart_ships_the_interpreter_exactly_as_written() {
    let Some(rendered) = rendered() else { return };
    let docs = documents(case(rendered, KARMADA, "default"));
    let interpreters: Vec<&Json> = docs
        .iter()
        .filter(|d| d["kind"] == "ResourceInterpreterCustomization")
        .collect();
    assert_eq!(interpreters.len(), 1);
    let path = repository_root().join(
        "charts/mongodb-member-operator-karmada/templates/resourceinterpretercustomization.yaml",
    );
    let written: Json =
        serde_yaml::from_str(&std::fs::read_to_string(path).expect("read the customization"))
            .expect("YAML");
    assert_eq!(
        interpreters[0], &written,
        "the scripts the Lua tests run are the scripts Helm installs"
    );
}

/// Does a Karmada resource selector pick this object?
fn selects(selector: &Json, object: &Json) -> bool {
    if selector["apiVersion"] != object["apiVersion"] || selector["kind"] != object["kind"] {
        return false;
    }
    if let Some(namespace) = selector["namespace"].as_str() {
        if object["metadata"]["namespace"].as_str() != Some(namespace) {
            return false;
        }
    }
    if let Some(name) = selector["name"].as_str() {
        if object["metadata"]["name"].as_str() != Some(name) {
            return false;
        }
    }
    let wanted = selector["labelSelector"]["matchLabels"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    wanted
        .iter()
        .all(|(k, v)| &object["metadata"]["labels"][k] == v)
}

#[test]
fn karmada_policies_propagate_the_crd_and_every_operator_object_to_the_chosen_clusters() {
    let Some(rendered) = rendered() else { return };
    let karmada = documents(case(rendered, KARMADA, "default"));
    let policies: Vec<&Json> = karmada
        .iter()
        .filter(|d| {
            d["kind"]
                .as_str()
                .is_some_and(|k| k.ends_with("PropagationPolicy"))
        })
        .collect();
    assert_eq!(policies.len(), 3, "CRD, operator objects, operator RBAC");
    let selectors: Vec<&Json> = policies
        .iter()
        .flat_map(|p| {
            p["spec"]["resourceSelectors"]
                .as_array()
                .expect("resourceSelectors")
        })
        .collect();
    for policy in &policies {
        assert_eq!(policy["apiVersion"], "policy.karmada.io/v1alpha1");
        assert!(
            policy["spec"]["placement"].get("clusterAffinity").is_none(),
            "default: every member cluster"
        );
        assert_eq!(
            policy["spec"]["placement"]["replicaScheduling"]["replicaSchedulingType"],
            "Duplicated"
        );
    }

    let crd: Json = serde_yaml::from_str(
        &std::fs::read_to_string(repository_root().join("crds/mongodb.yaml"))
            .expect("read the CRD"),
    )
    .expect("YAML");
    assert!(
        selectors.iter().any(|s| selects(s, &crd)),
        "the MongoDB CRD is propagated"
    );

    // The member chart as installed into the Karmada control plane, in the
    // namespace the Karmada chart's values name.
    for name in ["default", "watchNamespace"] {
        for object in documents(case(rendered, MEMBER, name)) {
            let picked = selectors.iter().filter(|s| selects(s, &object)).count();
            assert_eq!(
                picked, 1,
                "{} {} is propagated by exactly one selector (case {name})",
                object["kind"], object["metadata"]["name"]
            );
        }
    }
    let namespaced = policies
        .iter()
        .find(|p| p["kind"] == "PropagationPolicy")
        .expect("a PropagationPolicy");
    assert_eq!(namespaced["metadata"]["namespace"], RELEASE);

    let narrowed = documents(case(rendered, KARMADA, "clusterAffinity"));
    for policy in narrowed.iter().filter(|d| {
        d["kind"]
            .as_str()
            .is_some_and(|k| k.ends_with("PropagationPolicy"))
    }) {
        assert_eq!(
            policy["spec"]["placement"]["clusterAffinity"],
            json!({"clusterNames": ["member1", "member2", "member3"]})
        );
    }
}
