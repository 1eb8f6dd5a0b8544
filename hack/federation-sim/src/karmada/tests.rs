//! Karmada's scheduling and rendering, with the chart's Lua and FedState's policies.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::json;

use super::render::json_pointer_add;
use super::*;
use crate::interpreter::Interpreter;

fn weights(list: &[(&str, i64)]) -> Vec<StaticClusterWeight> {
    list.iter()
        .map(|(c, w)| StaticClusterWeight {
            cluster: c.to_string(),
            weight: *w,
        })
        .collect()
}

fn clusters(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| n.to_string()).collect()
}

fn shares(targets: &[TargetCluster]) -> Vec<(&str, i64)> {
    targets
        .iter()
        .map(|t| (t.name.as_str(), t.replicas))
        .collect()
}

#[test]
fn static_weights_equal_to_the_split_give_the_split() {
    let result = divide_by_static_weight(
        5,
        &clusters(&["a", "b", "c"]),
        &weights(&[("a", 2), ("b", 2), ("c", 1)]),
    );
    assert_eq!(shares(&result), [("a", 2), ("b", 2), ("c", 1)]);
}

#[test]
fn the_remainder_goes_by_weight_then_name_and_empty_shares_are_dropped() {
    let result = divide_by_static_weight(
        7,
        &clusters(&["a", "b", "c"]),
        &weights(&[("a", 2), ("b", 2), ("c", 1)]),
    );
    assert_eq!(shares(&result), [("a", 3), ("b", 3), ("c", 1)]);
    let result = divide_by_static_weight(
        2,
        &clusters(&["a", "b", "c"]),
        &weights(&[("c", 1), ("b", 1), ("a", 1)]),
    );
    assert_eq!(shares(&result), [("a", 1), ("b", 1)]);
    let unweighted = divide_by_static_weight(3, &clusters(&["a", "b"]), &[]);
    assert_eq!(shares(&unweighted), [("a", 2), ("b", 1)]);
}

/// FedState's objects for a 2+2+1 set with an arbiter, and the lab's
/// replica-set timeouts as one more OverridePolicy.
fn federation() -> Objects {
    use crate::fedstate::{admit, MultiCloudMongoDB, Pass};
    use rand::SeedableRng;
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    let mut object = admit(
        MultiCloudMongoDB::sample("demo", "default", &[("a", 2), ("b", 2), ("c", 1)]),
        None,
        &mut rng,
    )
    .unwrap();
    object.spec.config.arbiter = true;
    let mut objects = Objects::default();
    let vips: BTreeMap<String, String> =
        [("a", "127.9.1.1"), ("b", "127.9.2.1"), ("c", "127.9.3.1")]
            .iter()
            .map(|(c, v)| (c.to_string(), v.to_string()))
            .collect();
    let mut ports = NodePorts::default();
    let deviations = Default::default();
    let mut pass = Pass::new(
        &mut object,
        &mut objects,
        &mut ports,
        &mut rng,
        &deviations,
        String::new(),
    );
    pass.handle(&vips).unwrap();
    objects.override_policies.insert(
        "demo-lab-replica-set-settings".into(),
        OverridePolicy {
            labels: Labels::new(),
            resource: ResourceRef::new(Kind::MongoDB, "demo"),
            clusters: None,
            overrider: Overrider::AddPath {
                path: "/spec/replicaSetSettings".into(),
                value: json!({"electionTimeoutMillis": 2000}),
            },
        },
    );
    objects
}

#[test]
fn each_cluster_gets_its_share_through_the_charts_lua_and_fedstates_overrides() {
    let interpreter = Interpreter::from_checkout().unwrap();
    let objects = federation();
    assert_eq!(
        objects.mongodbs["demo"].spec["members"], 5,
        "the template has the total"
    );
    let schedule = schedule_mongodb(&objects, "default", "demo", &interpreter).unwrap();
    assert_eq!(shares(&schedule), [("a", 2), ("b", 2), ("c", 1)]);
    let schedules = BTreeMap::from([("demo".to_string(), schedule)]);
    let resource = ResourceRef::new(Kind::MongoDB, "demo");
    let render = |cluster: &str| {
        render_member_object(
            "default",
            &objects,
            &resource,
            cluster,
            &schedules,
            &interpreter,
        )
        .unwrap()
    };
    let a = render("a");
    assert_eq!(a["spec"]["members"], 2);
    assert_eq!(a["spec"]["rsInit"], true);
    assert_eq!(a["spec"]["arbiter"], true);
    assert_eq!(
        a["spec"]["replicaSetSettings"]["electionTimeoutMillis"],
        2000
    );
    assert_eq!(
        a["metadata"]["labels"]["app.multicloudmongodb.io/vip"],
        "127.9.1.1"
    );
    assert_eq!(
        a["metadata"]["labels"]["app.kubernetes.io/instance"],
        "demo"
    );
    assert_eq!(
        a["metadata"]["annotations"][TEMPLATE_GENERATION_ANNOTATION],
        "1"
    );
    let c = render("c");
    assert_eq!(c["spec"]["members"], 1);
    assert_eq!(c["spec"].get("rsInit"), None);
    assert_eq!(c["spec"].get("arbiter"), None);
    assert_eq!(c["spec"]["imagePullSecret"], json!({}));
    assert_eq!(
        c["metadata"]["labels"]["app.multicloudmongodb.io/vip"],
        "127.9.3.1"
    );
    assert!(render_member_object(
        "default",
        &objects,
        &resource,
        "d",
        &schedules,
        &interpreter
    )
    .is_err());

    let service = render_member_object(
        "default",
        &objects,
        &ResourceRef::new(Kind::Service, "demo-mongodb-arbiter"),
        "a",
        &schedules,
        &interpreter,
    )
    .unwrap();
    assert_eq!(service["spec"]["type"], "NodePort");
    assert_eq!(
        service["spec"]["ports"][0]["nodePort"],
        objects.services["demo-mongodb-arbiter"].node_port
    );
    assert_eq!(
        service["metadata"]["labels"].get("app.kubernetes.io/instance"),
        None
    );
    let placed = placement(
        &objects,
        &ResourceRef::new(Kind::Service, "demo-mongodb-arbiter"),
        &schedules,
    );
    assert_eq!(placed, Some(BTreeSet::from(["a".to_string()])));
}

#[test]
fn plaintext_add_creates_or_replaces_a_member() {
    let mut object = json!({"spec": {"members": 2}});
    json_pointer_add(&mut object, "/spec/rsInit", json!(true)).unwrap();
    json_pointer_add(&mut object, "/spec/members", json!(3)).unwrap();
    assert_eq!(object, json!({"spec": {"members": 3, "rsInit": true}}));
    assert!(json_pointer_add(&mut object, "/status/x", json!(1)).is_err());
    // Into an array element, by index (a Service's port).
    let mut service = json!({"spec": {"ports": [{"port": 27017, "nodePort": 31001}]}});
    json_pointer_add(&mut service, "/spec/ports/0/nodePort", json!(31002)).unwrap();
    assert_eq!(service["spec"]["ports"][0]["nodePort"], json!(31002));
    assert!(json_pointer_add(&mut service, "/spec/ports/1/nodePort", json!(1)).is_err());
}
