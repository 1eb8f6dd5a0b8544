//! Proves that the Karmada resource interpreter shipped in
//! `charts/mongodb-member-operator-karmada/templates/resourceinterpretercustomization.yaml`
//! does what the control plane relies on, by running its Lua scripts, as they are
//! written in the chart, in Karmada's VM (`hack/karmada-lua`: the same libraries,
//! the same functions locked out, raising Karmada's errors).
//!
//! Objects cross into Lua and back the way Karmada converts them (`karmada-lua`):
//! JSON arrays become plain tables and `null` becomes `nil`; on the way back an
//! empty table is `[]`, then dropped unless a reference object says what it was
//! (Karmada's empty-table ambiguity), so a script that returns an empty table
//! where a list belongs loses the field, as it would in Karmada.
//!
//! The federation is a 2+2+1 replica set over three clusters; each cluster's
//! status is written as the operator writes it, reflected with `ReflectStatus`
//! and aggregated with `AggregateStatus`, and the aggregated status is admitted
//! against the generated CRD's schema (what the Karmada API server enforces when
//! the status is written back to the resource template).
//!
//! The test cases in Karmada's third-party format
//! (`charts/mongodb-member-operator-karmada/thirdparty/.../testdata/`) run here
//! too, against the same scripts.

use std::path::{Path, PathBuf};

use crd_admission::Admission;
use karmada_lua::{integral_numbers, mlua, Customization, Operation};
use serde_json::{json, Value as Json};

const CUSTOMIZATION: &str =
    "charts/mongodb-member-operator-karmada/templates/resourceinterpretercustomization.yaml";
const TEMPLATE_GENERATION: &str = "resourcetemplate.karmada.io/generation";
/// The resource template's generation in the control plane.
const GENERATION: i64 = 3;
const REPLICA_SET_ID: &str = "6740f1c2a1b2c3d4e5f60718";

fn repository_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn customization() -> Json {
    let text = std::fs::read_to_string(repository_root().join(CUSTOMIZATION))
        .expect("read the customization");
    serde_yaml::from_str(&text).expect("the customization is YAML")
}

/// One interpreter operation's script, loaded into a fresh VM set up as Karmada's is.
fn vm(operation: Operation) -> karmada_lua::Interpreter {
    Customization::load(&repository_root().join(CUSTOMIZATION))
        .expect("the chart's customization")
        .interpreter(operation)
        .unwrap_or_else(|| {
            panic!(
                "spec.customizations.{}.luaScript is missing",
                operation.key()
            )
        })
        .unwrap_or_else(|err| panic!("{err}"))
}

/// One interpreter operation's script, called the way the tests below call it.
struct Interpreter {
    vm: karmada_lua::Interpreter,
}

impl Interpreter {
    fn load(operation: Operation) -> Interpreter {
        Interpreter { vm: vm(operation) }
    }

    /// Calls `function` with JSON arguments as Karmada does, and returns its
    /// results as Karmada converts them (see `karmada-lua`).
    fn call(&self, function: &str, args: &[Json]) -> Vec<Json> {
        let fail = |err: karmada_lua::Error| -> ! { panic!("{function} failed: {err}") };
        match function {
            "GetReplicas" => {
                let (replicas, requires) =
                    self.vm.get_replicas(&args[0]).unwrap_or_else(|e| fail(e));
                vec![json!(replicas), requires]
            }
            "ReviseReplica" => {
                let replicas = args[1].as_i64().expect("replicas");
                vec![self
                    .vm
                    .revise_replica(&args[0], replicas)
                    .unwrap_or_else(|e| fail(e))]
            }
            "ReflectStatus" => vec![self.vm.reflect_status(&args[0]).unwrap_or_else(|e| fail(e))],
            "AggregateStatus" => vec![self
                .vm
                .aggregate_status(&args[0], &args[1])
                .unwrap_or_else(|e| fail(e))],
            "InterpretHealth" => vec![json!(self
                .vm
                .interpret_health(&args[0])
                .unwrap_or_else(|e| fail(e)))],
            "GetDependencies" => vec![self
                .vm
                .get_dependencies(&args[0])
                .unwrap_or_else(|e| fail(e))],
            other => panic!("{other} is not an interpreter operation"),
        }
    }

    fn call_one(&self, function: &str, args: &[Json]) -> Json {
        let mut results = self.call(function, args);
        assert_eq!(results.len(), 1, "{function} returns one value");
        results.remove(0)
    }
}

/// A member of the replica set: cluster VIP, nodePort of its Service, `_id`.
struct Member {
    vip: &'static str,
    node_port: i64,
    id: i64,
}

impl Member {
    fn host(&self) -> String {
        format!("{}:{}", self.vip, self.node_port)
    }
}

/// The 2+2+1 federation: two members in member1 (which initiated the set and
/// hosts the primary), two in member2, one in member3.
const CLUSTERS: [(&str, &str, i64); 3] = [
    ("member1", "10.0.1.10", 2),
    ("member2", "10.0.2.10", 2),
    ("member3", "10.0.3.10", 1),
];
const PRIMARY: &str = "10.0.1.10:30017";

fn all_members() -> Vec<Member> {
    let mut id = 0;
    let mut members = Vec::new();
    for (_, vip, count) in CLUSTERS {
        for index in 0..count {
            members.push(Member {
                vip,
                node_port: 30017 + index,
                id,
            });
            id += 1;
        }
    }
    members
}

/// The resource template in the Karmada control plane: all five members.
fn desired_object() -> Json {
    json!({
        "apiVersion": "middleware.fedstate.io/v1alpha1",
        "kind": "MongoDB",
        "metadata": {
            "name": "demo",
            "namespace": "db",
            "generation": GENERATION,
            "uid": "0b7c6a8e-5f0e-4c4b-9d1e-3f2a1b0c9d8e",
            "labels": {"app.kubernetes.io/instance": "demo"}
        },
        "spec": {
            "members": 5,
            "rsInit": false,
            "arbiter": false,
            "type": "ReplicaSet",
            "image": "mongo:7.0",
            "imagePullPolicy": "IfNotPresent",
            "resources": {
                "limits": {"cpu": "1", "memory": "1Gi"},
                "requests": {"cpu": "500m", "memory": "512Mi"}
            },
            "persistence": {"storage": "10Gi"},
            "podSpec": {
                "nodeSelector": {"node-role.kubernetes.io/database": "true"},
                "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "database", "effect": "NoSchedule"}],
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z1", "z2"]}]}]
                }}}
            },
            "credentialsSecretRef": {"name": "demo-credentials", "keyfileKey": "keyfile", "usernameKey": "username", "passwordKey": "password"},
            "dbUserSpec": {"enable": false, "name": "", "user": ""},
            "metricsExporterSpec": {"enable": false, "image": "percona/mongodb_exporter:0.43"},
            "pause": false,
            "replSetName": "replset-0",
            "removedMemberPvcPolicy": "Retain",
            "replicaSetSettings": {"electionTimeoutMillis": 10000, "heartbeatIntervalMillis": 2000, "catchUpTimeoutMillis": -1, "chainingAllowed": true}
        }
    })
}

/// `replSetGetStatus` as one cluster's operator reports it: every member of the
/// set, with `down` hosts unreachable from there.
fn replset_view(down: &[&str]) -> Json {
    let members: Vec<Json> = all_members()
        .iter()
        .map(|m| {
            let host = m.host();
            if down.contains(&host.as_str()) {
                json!({"_id": m.id, "name": host, "health": 0.0, "state": 8, "stateStr": "(not reachable/healthy)"})
            } else if host == PRIMARY {
                json!({"_id": m.id, "name": host, "health": 1.0, "state": 1, "stateStr": "PRIMARY"})
            } else {
                json!({"_id": m.id, "name": host, "health": 1.0, "state": 2, "stateStr": "SECONDARY", "syncSourceHost": PRIMARY})
            }
        })
        .collect();
    Json::Array(members)
}

/// What a cluster's reconcile writes, shaped as the operator's `MongoDBStatus`
/// serializes (camelCase, `health` as a float, conditions with observedGeneration).
struct ClusterReport {
    cluster: &'static str,
    state: &'static str,
    healthy_local: i64,
    config_version: i64,
    down: Vec<&'static str>,
    degraded: bool,
}

impl ClusterReport {
    fn running(cluster: &'static str) -> ClusterReport {
        let count = CLUSTERS
            .iter()
            .find(|(name, _, _)| *name == cluster)
            .expect("known cluster")
            .2;
        ClusterReport {
            cluster,
            state: "Running",
            healthy_local: count,
            config_version: 7,
            down: vec![],
            degraded: false,
        }
    }

    fn desired_local(&self) -> i64 {
        CLUSTERS
            .iter()
            .find(|(name, _, _)| *name == self.cluster)
            .expect("known cluster")
            .2
    }

    fn vip(&self) -> &'static str {
        CLUSTERS
            .iter()
            .find(|(name, _, _)| *name == self.cluster)
            .expect("known cluster")
            .1
    }

    /// The member cluster's own generation of its MongoDB object.
    fn member_generation(&self) -> i64 {
        match self.cluster {
            "member1" => 4,
            "member2" => 2,
            _ => 1,
        }
    }

    fn status(&self) -> Json {
        let generation = self.member_generation();
        let desired = self.desired_local();
        let condition = |type_: &str, status: &str, reason: &str, message: &str| {
            json!({"type": type_, "status": status, "reason": reason, "message": message,
                   "lastTransitionTime": "2026-11-21T22:00:00Z", "observedGeneration": generation})
        };
        let local_members: Vec<Json> = all_members()
            .iter()
            .filter(|m| m.vip == self.vip())
            .map(|m| {
                let index = m.node_port - 30017;
                json!({"index": index, "statefulSet": format!("demo-mongodb-{index}"), "pod": format!("demo-mongodb-{index}-0"),
                       "nodePort": m.node_port, "host": m.host(),
                       "role": if m.host() == PRIMARY { "PRIMARY" } else { "SECONDARY" }, "lagSeconds": 0})
            })
            .collect();
        let ready = self.healthy_local == desired;
        json!({
            "state": self.state,
            "restartState": "NotInProcess",
            "replset": replset_view(&self.down),
            "currentRevision": "demo-5d8f7c9b6",
            "replicaSetObservedAt": "2026-11-23T10:00:00Z",
            "currentInfo": {"members": self.healthy_local},
            "conditions": [
                condition("Ready", if ready { "True" } else { "False" }, if ready { "AllMembersReady" } else { "MembersNotReady" },
                          &format!("{}/{} local members healthy", self.healthy_local, desired)),
                condition("ReplicaSetInitialized", "True", "Initialized", "replica set replset-0 is initialized"),
                condition("Degraded", if self.degraded { "True" } else { "False" }, if self.degraded { "MemberUnreachable" } else { "AsExpected" },
                          if self.degraded { "a local member is unreachable" } else { "" }),
            ],
            "observedGeneration": generation,
            "primary": PRIMARY,
            "configVersion": self.config_version,
            "replicaSetId": REPLICA_SET_ID,
            "readyMembers": format!("{}/{}", self.healthy_local, desired),
            "localMembers": local_members
        })
    }

    /// The MongoDB object in the member cluster, as Karmada observes it.
    fn observed_object(&self) -> Json {
        let mut object = desired_object();
        object["spec"]["members"] = json!(self.desired_local());
        object["spec"]["rsInit"] = json!(self.cluster == "member1");
        object["metadata"]["generation"] = json!(self.member_generation());
        object["metadata"]["labels"]["app.multicloudmongodb.io/vip"] = json!(self.vip());
        object["metadata"]["annotations"] = json!({ TEMPLATE_GENERATION: GENERATION.to_string() });
        object["status"] = self.status();
        object
    }
}

/// Karmada's `AggregatedStatusItem` for a cluster, its status from `ReflectStatus`.
fn status_item(reflect: &Interpreter, report: &ClusterReport) -> Json {
    let status = reflect.call_one("ReflectStatus", &[report.observed_object()]);
    json!({"clusterName": report.cluster, "status": status, "applied": true, "health": "Healthy"})
}

fn aggregate(items: Vec<Json>) -> Json {
    aggregate_onto(desired_object(), items)
}

fn aggregate_onto(desired: Json, items: Vec<Json>) -> Json {
    aggregate_items(desired, Json::Array(items))
}

/// `AggregateStatus` with `items` as Karmada passes them (`null` when the
/// binding has no aggregated status yet). Karmada writes back only the status
/// (`UpdateStatus`): that is what is admitted, on the resource template.
fn aggregate_items(desired: Json, items: Json) -> Json {
    let aggregated = Interpreter::load(Operation::StatusAggregation)
        .call_one("AggregateStatus", &[desired.clone(), items]);
    assert_lists_are_lists(&aggregated["status"]);
    let mut written = desired;
    match aggregated.get("status") {
        Some(status) => written["status"] = status.clone(),
        None => {
            written.as_object_mut().expect("object").remove("status");
        }
    }
    admit(&written);
    aggregated
}

/// The list fields of the aggregated status came back as JSON arrays (never an
/// empty table read as an object).
fn assert_lists_are_lists(status: &Json) {
    for field in ["replset", "conditions"] {
        if let Some(value) = status.get(field) {
            assert!(
                value.is_array(),
                "status.{field} must be a list, got {value}"
            );
        }
    }
}

/// The aggregated object passes the CRD's schema, with nothing pruned: the Karmada
/// API server accepts it when the status is written back.
fn admit(object: &Json) {
    let crd: Json = serde_yaml::from_str(
        &std::fs::read_to_string(repository_root().join("crds/mongodb.yaml"))
            .expect("read the CRD"),
    )
    .expect("the CRD is YAML");
    let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    let admission = Admission::new(schema).expect("the CRD schema compiles");
    let mut candidate = object.clone();
    match admission.admit_reporting(&mut candidate, None) {
        Ok(admitted) => assert!(
            admitted.unknown_fields.is_empty(),
            "fields the CRD does not know: {:?}",
            admitted.unknown_fields
        ),
        Err(errors) => panic!(
            "the CRD refuses the aggregated object: {}",
            errors
                .iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("; ")
        ),
    }
}

fn three_running_clusters() -> Vec<ClusterReport> {
    vec![
        ClusterReport::running("member1"),
        ClusterReport::running("member2"),
        ClusterReport::running("member3"),
    ]
}

fn items_for(reports: &[ClusterReport]) -> Vec<Json> {
    let reflect = Interpreter::load(Operation::StatusReflection);
    reports
        .iter()
        .map(|report| status_item(&reflect, report))
        .collect()
}

#[test]
fn scripts_load_in_a_lua_5_1_vm_without_io_debug_or_coroutines() {
    for operation in Operation::ALL {
        let interpreter = Interpreter::load(operation);
        let globals = interpreter.vm.lua().globals();
        let version: String = globals.get("_VERSION").expect("_VERSION");
        assert_eq!(version, "Lua 5.1");
        for absent in ["io", "debug", "coroutine"] {
            assert!(
                globals.get::<mlua::Value>(absent).expect("global").is_nil(),
                "{absent} is not in Karmada's VM"
            );
        }
    }
    let customization = customization();
    assert_eq!(customization["apiVersion"], "config.karmada.io/v1alpha1");
    assert_eq!(customization["kind"], "ResourceInterpreterCustomization");
    assert_eq!(
        customization["spec"]["target"],
        json!({"apiVersion": "middleware.fedstate.io/v1alpha1", "kind": "MongoDB"})
    );
}

#[test]
fn get_replicas_returns_spec_members_and_a_requirement_from_requests_node_selector_tolerations_and_affinity(
) {
    let results =
        Interpreter::load(Operation::ReplicaResource).call("GetReplicas", &[desired_object()]);
    assert_eq!(
        results.len(),
        2,
        "GetReplicas returns replicas and requirement"
    );
    assert_eq!(results[0], json!(5));
    assert_eq!(
        results[1],
        json!({
            "namespace": "db",
            "resourceRequest": {"cpu": "500m", "memory": "512Mi"},
            "nodeClaim": {
                "nodeSelector": {"node-role.kubernetes.io/database": "true"},
                "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "database", "effect": "NoSchedule"}],
                "hardNodeAffinity": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z1", "z2"]}]}]}
            }
        })
    );
}

#[test]
fn get_replicas_without_pod_spec_claims_no_nodes_and_defaults_to_one_member() {
    let mut object = desired_object();
    object["spec"]
        .as_object_mut()
        .expect("spec")
        .remove("podSpec");
    object["spec"]["members"] = json!(3);
    let results =
        Interpreter::load(Operation::ReplicaResource).call("GetReplicas", &[object.clone()]);
    assert_eq!(results[0], json!(3));
    assert_eq!(
        results[1],
        json!({"namespace": "db", "resourceRequest": {"cpu": "500m", "memory": "512Mi"}})
    );

    object["spec"]
        .as_object_mut()
        .expect("spec")
        .remove("members");
    object["spec"]["resources"] = json!({"limits": {"cpu": "1"}});
    let results = Interpreter::load(Operation::ReplicaResource).call("GetReplicas", &[object]);
    assert_eq!(results[0], json!(1), "the CRD's default for spec.members");
    assert_eq!(results[1], json!({"namespace": "db"}));
}

#[test]
fn revise_replica_sets_spec_members_and_keeps_the_rest_of_the_object() {
    let revise = Interpreter::load(Operation::ReplicaRevision);
    for share in [2, 1, 0] {
        let revised = revise.call_one("ReviseReplica", &[desired_object(), json!(share)]);
        let mut expected = desired_object();
        expected["spec"]["members"] = json!(share);
        assert_eq!(revised, expected);
    }
}

#[test]
fn reflect_status_keeps_what_the_control_plane_needs_and_drops_local_details() {
    let report = ClusterReport::running("member1");
    let reflected = Interpreter::load(Operation::StatusReflection)
        .call_one("ReflectStatus", &[report.observed_object()]);
    let written = integral_numbers(report.status());
    for field in [
        "state",
        "replset",
        "currentInfo",
        "conditions",
        "primary",
        "configVersion",
        "replicaSetId",
        "readyMembers",
        "observedGeneration",
        // FedState's control plane reads each cluster's currentRevision from the
        // ResourceBinding (pkg/controller/multicloudmongodb/core.go).
        "currentRevision",
        "replicaSetObservedAt",
    ] {
        assert_eq!(
            reflected[field], written[field],
            "status.{field} is reflected unchanged"
        );
    }
    for local in ["localMembers", "restartState"] {
        assert!(
            reflected.get(local).is_none(),
            "status.{local} stays in the member cluster"
        );
    }
    assert_eq!(reflected["generation"], json!(report.member_generation()));
    assert_eq!(reflected["resourceTemplateGeneration"], json!(GENERATION));
}

#[test]
fn reflect_status_of_an_object_without_status_is_empty() {
    let mut object = ClusterReport::running("member3").observed_object();
    object.as_object_mut().expect("object").remove("status");
    assert_eq!(
        Interpreter::load(Operation::StatusReflection).call_one("ReflectStatus", &[object]),
        json!({})
    );
}

#[test]
fn aggregate_status_unions_five_members_from_three_clusters_sums_members_and_picks_the_primary() {
    let mut reports = three_running_clusters();
    // member3 last saw config version 6, from which a member of member2 looked down.
    reports[2].config_version = 6;
    reports[2].down = vec!["10.0.2.10:30018"];
    let aggregated = aggregate(items_for(&reports));
    let status = &aggregated["status"];

    let replset = status["replset"].as_array().expect("replset");
    let names: Vec<&str> = replset
        .iter()
        .map(|m| m["name"].as_str().expect("name"))
        .collect();
    assert_eq!(
        names,
        [
            "10.0.1.10:30017",
            "10.0.1.10:30018",
            "10.0.2.10:30017",
            "10.0.2.10:30018",
            "10.0.3.10:30017"
        ]
    );
    let ids: Vec<i64> = replset
        .iter()
        .map(|m| m["_id"].as_i64().expect("_id"))
        .collect();
    assert_eq!(ids, [0, 1, 2, 3, 4], "sorted by _id, each member once");
    assert_eq!(
        replset[3]["stateStr"], "SECONDARY",
        "the view from the newest config wins over member3's stale one"
    );
    assert_eq!(replset[3]["health"], json!(1));
    assert_eq!(replset[0]["stateStr"], "PRIMARY");

    assert_eq!(status["currentInfo"], json!({"members": 5}));
    assert_eq!(status["primary"], PRIMARY);
    assert_eq!(status["configVersion"], json!(7));
    assert_eq!(status["replicaSetId"], REPLICA_SET_ID);
    assert_eq!(status["readyMembers"], "5/5");
    assert_eq!(status["state"], "Running");
    assert_eq!(
        status["observedGeneration"],
        json!(GENERATION),
        "every cluster runs the current template"
    );

    let conditions = status["conditions"].as_array().expect("conditions");
    let types: Vec<&str> = conditions
        .iter()
        .map(|c| c["type"].as_str().expect("type"))
        .collect();
    assert_eq!(types, ["Degraded", "Ready", "ReplicaSetInitialized"]);
    assert!(
        conditions
            .iter()
            .all(|c| c.get("observedGeneration").is_none()),
        "member generations mean nothing in the control plane"
    );

    // The spec and metadata of the resource template are left alone.
    assert_eq!(aggregated["spec"], desired_object()["spec"]);
    assert_eq!(aggregated["metadata"], desired_object()["metadata"]);
}

#[test]
fn aggregate_keeps_the_healthier_view_of_a_member_when_clusters_share_a_config() {
    let mut reports = three_running_clusters();
    // member1 (first by name) cannot reach member3's only member; the others can,
    // on the same config.
    reports[0].down = vec!["10.0.3.10:30017"];
    for order in [[0, 1, 2], [1, 0, 2], [2, 1, 0]] {
        let items = items_for(&reports);
        let items: Vec<Json> = order.iter().map(|&i| items[i].clone()).collect();
        let status = aggregate(items)["status"].clone();
        let member = &status["replset"][4];
        assert_eq!(
            (member["name"].as_str(), member["stateStr"].as_str()),
            (Some("10.0.3.10:30017"), Some("SECONDARY")),
            "order {order:?}"
        );
    }
}

#[test]
fn aggregate_status_handles_a_cluster_with_no_status() {
    let reports = three_running_clusters();
    let mut items = items_for(&reports[..2]);
    items.push(json!({"clusterName": "member3", "applied": true}));
    let mut desired = desired_object();
    desired["status"] = json!({"observedGeneration": 2});
    let status = aggregate_onto(desired.clone(), items)["status"].clone();
    assert_eq!(
        status["state"], "Unknown",
        "not Running while a cluster has not reported"
    );
    assert_eq!(
        status["replset"].as_array().expect("replset").len(),
        5,
        "the reporting clusters see all five members"
    );
    assert_eq!(status["currentInfo"], json!({"members": 4}));
    assert_eq!(status["readyMembers"], "4/4");
    assert_eq!(status["primary"], PRIMARY);
    assert_eq!(
        status["observedGeneration"],
        json!(2),
        "observedGeneration waits for every cluster"
    );

    // A status item whose reflected status is empty, and one that is null.
    let mut items = items_for(&reports[..1]);
    items.push(json!({"clusterName": "member2", "status": {}, "applied": true}));
    items.push(Json::Null);
    let status = aggregate_onto(desired, items)["status"].clone();
    assert_eq!(status["state"], "Unknown");
    assert_eq!(status["currentInfo"], json!({"members": 2}));
}

#[test]
fn aggregate_status_before_any_bound_cluster_reports_is_unknown_with_no_lists() {
    let items = vec![
        json!({"clusterName": "member1"}),
        json!({"clusterName": "member2", "status": {}}),
    ];
    let status = aggregate(items)["status"].clone();
    assert_eq!(
        status,
        json!({"state": "Unknown", "currentInfo": {"members": 0}})
    );
}

#[test]
fn aggregate_state_is_error_if_any_cluster_errs_then_reconciling_then_pause() {
    let cases = [
        (vec!["Running", "Error", "Reconciling"], "Error"),
        (vec!["Running", "Reconciling", "Pause"], "Reconciling"),
        (vec!["Pause", "Running", "Running"], "Pause"),
        (vec!["Running", "Unknown", "Running"], "Unknown"),
        (vec!["Running", "Running", "Running"], "Running"),
    ];
    for (states, expected) in cases {
        let mut reports = three_running_clusters();
        for (report, state) in reports.iter_mut().zip(&states) {
            report.state = *state;
        }
        assert_eq!(
            aggregate(items_for(&reports))["status"]["state"],
            expected,
            "cluster states {states:?}"
        );
    }
}

#[test]
fn aggregate_status_refuses_two_replica_sets_under_one_name() {
    let reports = three_running_clusters();
    let mut items = items_for(&reports);
    items[2]["status"]["replicaSetId"] = json!("0000000000000000000000ff");
    let status = aggregate(items)["status"].clone();
    assert_eq!(
        status["state"], "Error",
        "clusters disagree on the replica set they belong to"
    );
    assert!(status.get("replicaSetId").is_none());
}

#[test]
fn aggregate_conditions_report_the_worst_cluster_by_name() {
    let mut reports = three_running_clusters();
    reports[1].state = "Reconciling";
    reports[1].healthy_local = 1;
    reports[1].degraded = true;
    let status = aggregate(items_for(&reports))["status"].clone();
    let condition = |type_: &str| {
        status["conditions"]
            .as_array()
            .expect("conditions")
            .iter()
            .find(|c| c["type"] == type_)
            .cloned()
            .expect(type_)
    };
    assert_eq!(condition("Ready")["status"], "False");
    assert_eq!(
        condition("Ready")["message"],
        "member2: 1/2 local members healthy"
    );
    assert_eq!(condition("Degraded")["status"], "True");
    assert_eq!(condition("Degraded")["reason"], "MemberUnreachable");
    assert_eq!(condition("ReplicaSetInitialized")["status"], "True");
    assert_eq!(status["currentInfo"], json!({"members": 4}));
    assert_eq!(status["readyMembers"], "4/5");
    assert_eq!(status["state"], "Reconciling");
}

#[test]
fn aggregate_observed_generation_waits_for_a_cluster_on_an_older_template() {
    let reports = three_running_clusters();
    let mut items = items_for(&reports);
    items[1]["status"]["resourceTemplateGeneration"] = json!(GENERATION - 1);
    let mut desired = desired_object();
    desired["status"] = json!({"observedGeneration": GENERATION - 1});
    assert_eq!(
        aggregate_onto(desired, items)["status"]["observedGeneration"],
        json!(GENERATION - 1)
    );
}

#[test]
fn interpret_health_is_true_iff_all_local_members_are_healthy_for_the_current_generation() {
    let health = Interpreter::load(Operation::HealthInterpretation);
    let interpret = |object: Json| health.call_one("InterpretHealth", &[object]);

    assert_eq!(
        interpret(ClusterReport::running("member1").observed_object()),
        json!(true)
    );

    let mut short = ClusterReport::running("member2");
    short.healthy_local = 1;
    assert_eq!(
        interpret(short.observed_object()),
        json!(false),
        "1 of 2 members healthy"
    );

    let mut stale = ClusterReport::running("member1").observed_object();
    stale["metadata"]["generation"] = json!(5);
    assert_eq!(
        interpret(stale),
        json!(false),
        "status describes an older spec"
    );

    let mut no_generation = ClusterReport::running("member3").observed_object();
    no_generation["status"]
        .as_object_mut()
        .expect("status")
        .remove("observedGeneration");
    assert_eq!(
        interpret(no_generation),
        json!(true),
        "counts match and no observedGeneration to compare"
    );

    let mut no_status = ClusterReport::running("member3").observed_object();
    no_status.as_object_mut().expect("object").remove("status");
    assert_eq!(interpret(no_status), json!(false));

    let mut scaled_down = ClusterReport::running("member3").observed_object();
    scaled_down["spec"]["members"] = json!(0);
    scaled_down["status"]["currentInfo"]["members"] = json!(0);
    assert_eq!(
        interpret(scaled_down),
        json!(true),
        "a cluster asked to host no member and hosting none"
    );
}

#[test]
fn get_dependencies_lists_hostconf_credentials_and_custom_config_in_the_object_namespace() {
    let dependencies = Interpreter::load(Operation::DependencyInterpretation);
    let get = |object: Json| dependencies.call_one("GetDependencies", &[object]);

    let configmap = |name: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "namespace": "db", "name": name});
    let secret =
        |name: &str| json!({"apiVersion": "v1", "kind": "Secret", "namespace": "db", "name": name});

    assert_eq!(
        get(desired_object()),
        json!([configmap("demo-hostconf"), secret("demo-credentials")])
    );

    let mut custom = desired_object();
    custom["spec"]["memberConfigRef"] = json!("demo-members");
    custom["spec"]["customConfigRef"] = json!("demo-mongod-conf");
    assert_eq!(
        get(custom),
        json!([
            configmap("demo-members"),
            secret("demo-credentials"),
            configmap("demo-mongod-conf")
        ])
    );

    let mut fedstate = desired_object();
    fedstate["spec"]
        .as_object_mut()
        .expect("spec")
        .remove("credentialsSecretRef");
    fedstate["spec"]["rootPassword"] = json!("from-the-control-plane");
    fedstate["spec"]["memberConfigRef"] = json!("");
    assert_eq!(
        get(fedstate),
        json!([configmap("demo-hostconf")]),
        "FedState's spec: only the hostconf"
    );
}

#[test]
fn aggregate_replset_and_primary_come_from_the_newest_config_only() {
    const REMOVED: &str = "10.0.2.10:30018";
    let reports = three_running_clusters();
    let mut items = items_for(&reports);
    // member3 has seen config 8, which removed the second member of member2 and
    // has no primary yet; member1 and member2 still report config 7 with it.
    let status = &mut items[2]["status"];
    status["configVersion"] = json!(8);
    status["replset"] = Json::Array(
        status["replset"]
            .as_array()
            .expect("replset")
            .iter()
            .filter(|m| m["name"] != REMOVED)
            .cloned()
            .collect(),
    );
    status.as_object_mut().expect("status").remove("primary");
    let aggregated = aggregate(items.clone());
    let names: Vec<&str> = aggregated["status"]["replset"]
        .as_array()
        .expect("replset")
        .iter()
        .map(|m| m["name"].as_str().expect("name"))
        .collect();
    assert!(
        !names.contains(&REMOVED),
        "a member removed by the newest config is not listed: {names:?}"
    );
    assert_eq!(names.len(), 4);
    assert_eq!(aggregated["status"]["configVersion"], json!(8));
    assert!(
        aggregated["status"].get("primary").is_none(),
        "no primary known in config 8, the older reports' primary is not taken"
    );

    // Two clusters on config 8: the union of their views, and their primary.
    items[1]["status"]["configVersion"] = json!(8);
    items[1]["status"]["replset"] = items[2]["status"]["replset"].clone();
    items[1]["status"]["primary"] = json!("10.0.2.10:30017");
    let aggregated = aggregate(items);
    assert_eq!(aggregated["status"]["primary"], "10.0.2.10:30017");
    assert_eq!(
        aggregated["status"]["replset"]
            .as_array()
            .expect("replset")
            .len(),
        4
    );
}

#[test]
fn interpret_health_is_false_in_error_and_while_paused() {
    let health = Interpreter::load(Operation::HealthInterpretation);
    let interpret = |object: Json| health.call_one("InterpretHealth", &[object]);
    let mut error = ClusterReport::running("member1");
    error.state = "Error";
    assert_eq!(
        interpret(error.observed_object()),
        json!(false),
        "state Error"
    );
    let mut paused = ClusterReport::running("member1");
    paused.state = "Pause";
    assert_eq!(
        interpret(paused.observed_object()),
        json!(false),
        "state Pause"
    );
    let mut pause_asked = ClusterReport::running("member1").observed_object();
    pause_asked["spec"]["pause"] = json!(true);
    assert_eq!(interpret(pause_asked), json!(false), "spec.pause");
}

#[test]
fn aggregate_status_without_status_items_leaves_the_status_as_it_is() {
    let mut desired = desired_object();
    desired["status"] = aggregate(items_for(&three_running_clusters()))["status"].clone();
    // Karmada passes nil (a nil Go slice marshals as null) before any work
    // reports, and an empty list once no cluster is bound.
    for items in [Json::Null, json!([])] {
        assert_eq!(
            aggregate_items(desired.clone(), items.clone()),
            desired,
            "items {items}"
        );
    }
    let bare = desired_object();
    assert_eq!(aggregate_items(bare.clone(), Json::Null), bare);
}

/// Karmada's third-party layout: `<group>/<version>/<kind>/customizations.yaml`
/// and `testdata/<operation>-test.yaml` (karmada-io/karmada
/// `pkg/resourceinterpreter/default/thirdparty/`).
const THIRDPARTY: &str =
    "charts/mongodb-member-operator-karmada/thirdparty/middleware.fedstate.io/v1alpha1/MongoDB";

#[test]
fn the_thirdparty_customization_is_the_charts() {
    let path = repository_root()
        .join(THIRDPARTY)
        .join("customizations.yaml");
    let thirdparty: Json =
        serde_yaml::from_str(&std::fs::read_to_string(&path).expect("read customizations.yaml"))
            .expect("customizations.yaml is YAML");
    let chart = customization();
    assert_eq!(thirdparty["apiVersion"], chart["apiVersion"]);
    assert_eq!(thirdparty["kind"], chart["kind"]);
    assert_eq!(
        thirdparty["spec"], chart["spec"],
        "{THIRDPARTY}/customizations.yaml has the chart's scripts"
    );
    // TestThirdPartyCustomizationsFile: the directory names the target.
    let mut parts = THIRDPARTY.rsplit('/');
    let (kind, version, group) = (parts.next(), parts.next(), parts.next());
    assert_eq!(thirdparty["spec"]["target"]["kind"].as_str(), kind);
    assert_eq!(
        thirdparty["spec"]["target"]["apiVersion"],
        format!("{}/{}", group.expect("group"), version.expect("version"))
    );
}

/// `deepEqual` of Karmada's thirdparty_test.go, for an `Unstructured`: fields
/// whose expected value is `{{EXCLUDE}}` are left out of both sides.
fn without_excluded(expected: &Json, actual: &Json) -> (Json, Json) {
    fn strip(expected: &Json, actual: &Json) -> (Json, Json) {
        match (expected, actual) {
            (Json::Object(e), Json::Object(a)) => {
                let mut e2 = serde_json::Map::new();
                let mut a2 = a.clone();
                for (key, value) in e {
                    if value == "{{EXCLUDE}}" {
                        a2.remove(key);
                        continue;
                    }
                    match a.get(key) {
                        Some(actual_value) => {
                            let (e3, a3) = strip(value, actual_value);
                            e2.insert(key.clone(), e3);
                            a2.insert(key.clone(), a3);
                        }
                        None => {
                            e2.insert(key.clone(), value.clone());
                        }
                    }
                }
                (Json::Object(e2), Json::Object(a2))
            }
            _ => (expected.clone(), actual.clone()),
        }
    }
    strip(expected, actual)
}

/// `sortDependencies`: by apiVersion, kind, namespace, name.
fn sorted_dependencies(dependencies: &Json) -> Vec<(String, String, String, String)> {
    let field = |d: &Json, f: &str| d[f].as_str().unwrap_or("").to_string();
    let mut list: Vec<_> = dependencies
        .as_array()
        .expect("a list of dependencies")
        .iter()
        .map(|d| {
            (
                field(d, "apiVersion"),
                field(d, "kind"),
                field(d, "namespace"),
                field(d, "name"),
            )
        })
        .collect();
    list.sort();
    list
}

/// One `IndividualTest`'s results, named as Karmada's rules name them
/// (`pkg/util/interpreter/rule.go`).
fn run_thirdparty_case(
    case: &Json,
) -> Result<Vec<(&'static str, Json)>, Box<dyn std::error::Error>> {
    let desired = case.get("desiredObj").filter(|o| !o.is_null());
    let observed = case.get("observedObj").filter(|o| !o.is_null());
    // getObjectOrError: exactly one of them.
    let object = match (desired, observed) {
        (Some(o), None) | (None, Some(o)) => o,
        _ => return Err("exactly one of desiredObj and observedObj".into()),
    };
    let operation = case["operation"].as_str().unwrap_or("");
    let customization = match operation {
        "InterpretReplica" => Operation::ReplicaResource,
        "ReviseReplica" => Operation::ReplicaRevision,
        "InterpretStatus" => Operation::StatusReflection,
        "AggregateStatus" => Operation::StatusAggregation,
        "InterpretHealth" => Operation::HealthInterpretation,
        "InterpretDependency" => Operation::DependencyInterpretation,
        other => return Err(format!("operation {other} is not supported here").into()),
    };
    let vm = vm(customization);
    Ok(match operation {
        "InterpretReplica" => {
            let (replica, requires) = vm.get_replicas(object)?;
            vec![("replica", json!(replica)), ("requires", requires)]
        }
        "ReviseReplica" => {
            let replicas = case["inputReplicas"].as_i64().unwrap_or(0);
            vec![("revised", vm.revise_replica(object, replicas)?)]
        }
        "InterpretStatus" => vec![("status", vm.reflect_status(object)?)],
        "AggregateStatus" => {
            // A missing statusItems is a nil slice: null in Lua's eyes.
            let items = case.get("statusItems").cloned().unwrap_or(Json::Null);
            vec![("aggregatedStatus", vm.aggregate_status(object, &items)?)]
        }
        "InterpretHealth" => vec![("healthy", json!(vm.interpret_health(object)?))],
        _ => vec![("dependencies", vm.get_dependencies(object)?)],
    })
}

#[test]
fn the_thirdparty_testdata_pass_against_the_charts_scripts() {
    let testdata = repository_root().join(THIRDPARTY).join("testdata");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&testdata)
        .expect("read testdata")
        .map(|entry| entry.expect("entry").path())
        .collect();
    files.sort();
    let mut operations = std::collections::BTreeSet::new();
    let mut cases = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read a testdata file");
        for document in serde_yaml::Deserializer::from_str(&text) {
            let case: Json = serde::Deserialize::deserialize(document).expect("a YAML test case");
            let name = format!(
                "{}: {}",
                file.display(),
                case["name"].as_str().unwrap_or("")
            );
            let results = run_thirdparty_case(&case).unwrap_or_else(|err| panic!("{name}: {err}"));
            let output = case["output"].as_object().expect("output");
            for key in output.keys() {
                assert!(
                    results.iter().any(|(result, _)| result == key),
                    "{name}: output key {key} is not a result of {}",
                    case["operation"]
                );
            }
            for (result, actual) in results {
                let Some(expected) = output.get(result) else {
                    continue;
                };
                let expected = integral_numbers(expected.clone());
                match result {
                    "revised" | "aggregatedStatus" => {
                        let (expected, actual) = without_excluded(&expected, &actual);
                        assert!(
                            actual == expected,
                            "{name}: {result}\nexpected:\n{}\ngot:\n{}",
                            serde_json::to_string_pretty(&expected).expect("JSON"),
                            serde_json::to_string_pretty(&actual).expect("JSON")
                        );
                    }
                    "dependencies" => assert_eq!(
                        sorted_dependencies(&actual),
                        sorted_dependencies(&expected),
                        "{name}: {result}"
                    ),
                    _ => assert_eq!(actual, expected, "{name}: {result}"),
                }
            }
            operations.insert(case["operation"].as_str().expect("operation").to_string());
            cases += 1;
        }
    }
    assert_eq!(
        operations.into_iter().collect::<Vec<_>>(),
        [
            "AggregateStatus",
            "InterpretDependency",
            "InterpretHealth",
            "InterpretReplica",
            "InterpretStatus",
            "ReviseReplica"
        ],
        "every customized operation has test cases"
    );
    assert!(cases >= 18, "{cases} cases");
}
