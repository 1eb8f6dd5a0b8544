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
//!
//! This file holds the federation the tests share (the resource template,
//! each cluster's report, the calls into the VM and the schema check); the
//! tests are by operation: [`spec`], [`reflect`], [`aggregate`], [`health`],
//! and Karmada's own format in [`thirdparty`].

mod aggregate;
mod health;
mod reflect;
mod spec;
mod thirdparty;

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
    /// `status.defaultWriteConcern` as this cluster last read it (`null`: not
    /// read yet).
    default_write_concern: Json,
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
            default_write_concern: json!({"w": "majority", "source": "global"}),
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
        let mut status = json!({
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
        });
        if !self.default_write_concern.is_null() {
            status["defaultWriteConcern"] = self.default_write_concern.clone();
        }
        status
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
