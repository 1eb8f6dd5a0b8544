//! The operations on the spec: the scripts load in Karmada's Lua 5.1 VM;
//! `GetReplicas` (members and the requirement of each), `ReviseReplica` and
//! `GetDependencies`.

use super::*;

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
