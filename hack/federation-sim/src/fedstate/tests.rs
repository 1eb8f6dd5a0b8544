//! FedState's control plane, pass by pass, over the objects it keeps.

use std::collections::{BTreeMap, BTreeSet};

use base64::Engine;
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::json;

use super::*;
use crate::karmada::{
    AggregatedStatusItem, Labels, NodePorts, Objects, Overrider, ResourceBinding,
};

const VIPS: [(&str, &str); 4] = [
    ("a", "127.9.1.1"),
    ("b", "127.9.2.1"),
    ("c", "127.9.3.1"),
    ("d", "127.9.4.1"),
];

fn vips() -> BTreeMap<String, String> {
    VIPS.iter()
        .map(|(c, v)| (c.to_string(), v.to_string()))
        .collect()
}

/// A federation that admitted `members` and ran its first two passes, the
/// second with the binding Karmada made of them.
fn formed(members: &[(&str, i32)]) -> Federation {
    let mut federation = Federation::new(admitted(members));
    federation.pass(None);
    let local: Vec<(&str, usize)> = members
        .iter()
        .map(|(cluster, count)| (*cluster, *count as usize))
        .collect();
    let binding = federation.binding(&local);
    federation.pass(Some(&binding));
    federation
}

fn admitted(members: &[(&str, i32)]) -> MultiCloudMongoDB {
    admit(
        MultiCloudMongoDB::sample("demo", "default", members),
        None,
        &mut StdRng::seed_from_u64(1),
    )
    .unwrap()
}

/// A pass's result and log (ignored by the passes that only set a scene).
struct Outcome(Result<Handled, String>, #[allow(dead_code)] Vec<String>);

/// One instance's control-plane state, passed through FedState's handlers.
struct Federation {
    object: MultiCloudMongoDB,
    objects: Objects,
    ports: NodePorts,
    rng: StdRng,
    deviations: Deviations,
}

impl Federation {
    fn new(object: MultiCloudMongoDB) -> Self {
        Federation {
            object,
            objects: Objects::default(),
            ports: NodePorts::default(),
            rng: StdRng::seed_from_u64(7),
            deviations: Deviations::default(),
        }
    }

    fn pass(&mut self, binding: Option<&ResourceBinding>) -> Outcome {
        let mut pass = Pass::new(
            &mut self.object,
            &mut self.objects,
            &mut self.ports,
            &mut self.rng,
            &self.deviations,
            "2026-01-01T00:00:00Z".into(),
        );
        let mut outcome = pass.handle(&vips());
        if outcome == Ok(Handled::ReadStatus) {
            if let Err(error) = pass.status(binding) {
                outcome = Err(error);
            }
        }
        pass.finish();
        Outcome(outcome, pass.log)
    }

    fn scale(&mut self, members: &[(&str, i32)]) {
        let mut next = MultiCloudMongoDB::sample("demo", "default", members);
        next.spec.config = self.object.spec.config.clone();
        self.object = admit(next, Some(&self.object), &mut self.rng).unwrap();
    }

    fn port(&self, index: usize) -> i32 {
        self.objects.services[&member_service_name("demo", index)].node_port
    }

    fn service_clusters(&self, index: usize) -> Vec<String> {
        let mut clusters = self.objects.propagation_policies
            [&format!("{}-pp", member_service_name("demo", index))]
            .clusters
            .clone();
        clusters.sort();
        clusters
    }

    fn hostconf(&self) -> &BTreeMap<String, String> {
        &self.objects.config_maps["demo-hostconf"].data
    }

    /// The status every cluster reports when `members` per cluster are in
    /// the set (FedState's StatusHandler reads `currentInfo.members`,
    /// `state` and `replset`).
    fn binding(&self, local: &[(&str, usize)]) -> ResourceBinding {
        let mut replset = Vec::new();
        for (cluster, count) in local {
            for index in 0..*count {
                replset.push(json!({"name": format!("{}:{}", vips()[*cluster], self.port(index)), "stateStr": "SECONDARY"}));
            }
        }
        ResourceBinding {
                name: "demo-mongodb".into(),
                clusters: vec![],
                aggregated_status: local
                    .iter()
                    .map(|(cluster, count)| AggregatedStatusItem {
                        cluster_name: cluster.to_string(),
                        status: Some(json!({"state": "Running", "currentInfo": {"members": count}, "replset": replset})),
                        applied: true,
                        health: "Healthy".into(),
                    })
                    .collect(),
            }
    }
}

#[test]
fn the_webhook_defaults_image_and_root_password_and_refuses_what_fedstate_refuses() {
    let object = admitted(&[("a", 1)]);
    assert_eq!(object.spec.image_setting.image, "mongo:3.6");
    let password = object.root_password().unwrap();
    assert_eq!(password.len(), 12, "8 bytes in base64");
    assert!(password.ends_with('='));
    assert_eq!(
        base64::engine::general_purpose::STANDARD
            .decode(password)
            .unwrap()
            .len(),
        8
    );
    assert_eq!(
        object.spec.scheduler.scheduler_mode.as_deref(),
        Some("Uniform")
    );

    let again = admit(
        MultiCloudMongoDB::sample("demo", "default", &[("a", 2)]),
        Some(&object),
        &mut StdRng::seed_from_u64(2),
    )
    .unwrap();
    assert_eq!(
        again.root_password(),
        object.root_password(),
        "kept on update"
    );

    let mut no_resource = MultiCloudMongoDB::sample("demo", "default", &[("a", 1)]);
    no_resource.spec.resource = ResourceSetting::default();
    assert!(admit(no_resource, None, &mut StdRng::seed_from_u64(1))
        .unwrap_err()
        .contains("500mi"));
    let mut no_result = MultiCloudMongoDB::sample("demo", "default", &[]);
    no_result.spec.replicaset = Some(1);
    assert!(
        admit(no_result, Some(&object), &mut StdRng::seed_from_u64(1))
            .unwrap_err()
            .contains("not schedulerResult")
    );
}

#[test]
fn the_payload_is_fedstates_generate_mongo() {
    let mut object = admitted(&[("a", 2), ("b", 2), ("c", 1)]);
    object.spec.auth.root_passwd = Some("s3cr3t+/AA==".into());
    object.spec.config.config_set = Some(BTreeMap::from([("LOG_LEVEL".into(), "info".into())]));
    object.spec.config.config_ref = Some("my-custom-mongo-conf".into());
    let payload = generate_mongo(&object, &mut StdRng::seed_from_u64(1));
    assert_eq!(
        payload,
        json!({
            "type": "ReplicaSet",
            "members": 5,
            "image": "mongo:3.6",
            "rootPassword": "s3cr3t+/AA==",
            "resources": {"limits": {"cpu": "2", "memory": "512Mi"}, "requests": {"cpu": "1", "memory": "512Mi"}},
            "persistence": {"storage": "1Gi"},
            "metricsExporterSpec": {"enable": false, "resources": {}},
            "dbUserSpec": {},
            "imagePullSecret": {},
            "customConfigRef": "my-custom-mongo-conf",
            "config": [{"name": "LOG_LEVEL", "value": "info"}],
        })
    );
}

#[test]
fn config_entries_come_in_go_map_order() {
    let mut object = admitted(&[("a", 1)]);
    object.spec.config.config_set = Some(
        ["a", "b", "c", "d", "e"]
            .iter()
            .map(|k| (format!("setParameter.{k}"), "1".to_string()))
            .collect(),
    );
    let orders: BTreeSet<String> = (0..20)
        .map(|seed| generate_mongo(&object, &mut StdRng::seed_from_u64(seed))["config"].to_string())
        .collect();
    assert!(
        orders.len() > 1,
        "the order changes from one payload to the next"
    );
}

#[test]
fn creation_makes_services_hostconf_and_the_template_in_fedstates_shape() {
    let mut federation = Federation::new(admitted(&[("a", 2), ("b", 2), ("c", 1)]));
    federation.object.labels = Labels::from([("team".into(), "db".into())]);
    federation.object.spec.config.arbiter = true;
    let Outcome(outcome, _) = federation.pass(None);
    assert!(outcome.unwrap_err().contains("demo-mongodb not found"));
    let objects = &federation.objects;
    assert_eq!(
        objects.services.keys().collect::<Vec<_>>(),
        ["demo-mongodb-0", "demo-mongodb-1", "demo-mongodb-arbiter"]
    );
    assert_eq!(federation.service_clusters(0), ["a", "b", "c"]);
    assert_eq!(federation.service_clusters(1), ["a", "b"]);
    let member = &objects.services["demo-mongodb-1"];
    assert_eq!(
        member.labels,
        Labels::from([
            ("app".into(), "demo-mongodb-1".into()),
            ("app.kubernetes.io/instance".into(), "demo".into()),
            ("team".into(), "db".into()),
        ])
    );
    assert_eq!(member.selector, member.labels);
    let arbiter = &objects.services["demo-mongodb-arbiter"];
    assert_eq!(
        arbiter.labels,
        Labels::from([
            ("app".into(), "demo-mongodb-arbiter".into()),
            ("team".into(), "db".into()),
        ]),
        "the arbiter Service has no app.kubernetes.io/instance"
    );
    assert_ne!(federation.port(0), federation.port(1));
    // hostconf: both keys, no trailing newline, the arbiter on the cluster
    // with most members (a, first of the tie).
    let hostconf = federation.hostconf();
    let mut datas: Vec<&str> = hostconf["datas"].split('\n').collect();
    datas.sort();
    let mut expected = vec![
        format!("host:'127.9.1.1:{}'", federation.port(0)),
        format!("host:'127.9.2.1:{}'", federation.port(0)),
        format!("host:'127.9.3.1:{}'", federation.port(0)),
        format!("host:'127.9.1.1:{}'", federation.port(1)),
        format!("host:'127.9.2.1:{}'", federation.port(1)),
    ];
    expected.sort();
    assert_eq!(datas, expected);
    assert!(!hostconf["datas"].ends_with('\n'));
    assert_eq!(
        hostconf["arbiters"],
        format!("host:'127.9.1.1:{}'", arbiter.node_port)
    );
    let template = &objects.mongodbs["demo"];
    assert_eq!(template.spec["members"], 5);
    assert_eq!(
        template.labels,
        Labels::from([
            ("app.kubernetes.io/instance".into(), "demo".into()),
            ("team".into(), "db".into())
        ])
    );
    let weights = objects.propagation_policies["demo"]
        .static_weights
        .clone()
        .unwrap();
    assert_eq!(
        weights
            .iter()
            .map(|w| (w.cluster.as_str(), w.weight))
            .collect::<Vec<_>>(),
        [("a", 2), ("b", 2), ("c", 1)]
    );
    let ops = &objects.override_policies;
    assert_eq!(ops["demo-init"].clusters, Some(vec!["a".to_string()]));
    assert_eq!(ops["demo-arbiter"].clusters, Some(vec!["a".to_string()]));
    assert_eq!(
        ops["demo-b-vip"].overrider,
        Overrider::AddLabels(one(LABEL_CLUSTER_VIP_INSTANCE, "127.9.2.1"))
    );
}

#[test]
fn rs_init_and_the_arbiter_follow_the_cluster_with_most_members_every_pass() {
    let mut federation = Federation::new(admitted(&[("a", 2), ("b", 2), ("c", 1)]));
    federation.object.spec.config.arbiter = true;
    federation.pass(None);
    let before = federation.binding(&[("a", 2), ("b", 2), ("c", 1)]);
    federation.pass(Some(&before)).0.unwrap();
    federation.scale(&[("a", 1), ("b", 2), ("c", 1)]);
    federation.pass(Some(&before)).0.unwrap();
    let ops = &federation.objects.override_policies;
    assert_eq!(ops["demo-init"].clusters, Some(vec!["b".to_string()]));
    assert_eq!(ops["demo-arbiter"].clusters, Some(vec!["b".to_string()]));
    assert_eq!(
        federation.objects.propagation_policies["demo-mongodb-arbiter-pp"].clusters,
        ["b"]
    );
}

#[test]
fn scale_down_waits_for_current_members_then_drops_services_by_node_port() {
    let mut federation = formed(&[("a", 3), ("b", 2), ("c", 1)]);
    let port2 = federation.port(2);
    federation.scale(&[("a", 1), ("b", 2), ("c", 1)]);

    // a still reports 3 members: nothing is deleted, the template shrinks.
    let Outcome(outcome, _) =
        federation.pass(Some(&federation.binding(&[("a", 3), ("b", 2), ("c", 1)])));
    outcome.unwrap();
    assert_eq!(federation.objects.mongodbs["demo"].spec["members"], 4);
    assert_eq!(federation.service_clusters(1), ["a", "b"]);
    assert!(federation.hostconf()["datas"].contains(&format!("127.9.1.1:{port2}")));

    // a's members 1 and 2 left the set. The pass that reads it from the
    // binding still decides on the previous pass's status.result.
    let shrunk = federation.binding(&[("a", 1), ("b", 2), ("c", 1)]);
    federation.pass(Some(&shrunk)).0.unwrap();
    assert!(federation.objects.services.contains_key("demo-mongodb-2"));
    // The next one cleans up: Service 2 (no cluster uses its nodePort)
    // goes, a leaves Service 1's policy; the deleted policy ends the pass
    // (FedState re-creates it with its resourceVersion).
    let Outcome(outcome, _) = federation.pass(Some(&shrunk));
    assert!(outcome
        .unwrap_err()
        .contains("resourceVersion should not be set"));
    assert!(!federation.objects.services.contains_key("demo-mongodb-2"));
    assert!(!federation
        .objects
        .propagation_policies
        .contains_key("demo-mongodb-2-pp"));
    assert_eq!(federation.service_clusters(1), ["b"]);
    assert!(
        federation.hostconf()["datas"].contains(&format!("127.9.1.1:{port2}")),
        "not rebuilt yet"
    );

    // The next pass rebuilds hostconf.
    let Outcome(outcome, _) =
        federation.pass(Some(&federation.binding(&[("a", 1), ("b", 2), ("c", 1)])));
    outcome.unwrap();
    let datas = &federation.hostconf()["datas"];
    assert_eq!(datas.lines().count(), 4);
    assert!(!datas.contains(&format!(":{port2}'")));
    assert!(!datas.contains(&format!("127.9.1.1:{}", federation.port(1))));
}

#[test]
fn scale_to_zero_withdraws_mongodb_and_hostconf_then_services_once_the_cluster_left_the_binding() {
    let mut federation = formed(&[("a", 2), ("b", 2), ("c", 1)]);
    federation.scale(&[("a", 2), ("b", 2), ("c", 0)]);
    // c still in the binding, reporting 1 member.
    let Outcome(outcome, _) =
        federation.pass(Some(&federation.binding(&[("a", 2), ("b", 2), ("c", 1)])));
    outcome.unwrap();
    let policies = &federation.objects.propagation_policies;
    assert_eq!(
        policies["demo"].clusters,
        ["a", "b"],
        "MongoDB withdrawn from c"
    );
    assert_eq!(
        policies["demo-hostconf-pp"].clusters,
        ["a", "b"],
        "hostconf withdrawn from c, same pass"
    );
    assert_eq!(
        federation.service_clusters(0),
        ["a", "b", "c"],
        "Services wait"
    );
    // Karmada dropped c from the binding: once status.result has no c,
    // FedState no longer waits for it.
    let without_c = federation.binding(&[("a", 2), ("b", 2)]);
    federation.pass(Some(&without_c)).0.unwrap();
    assert_eq!(federation.service_clusters(0), ["a", "b", "c"]);
    let Outcome(outcome, _) = federation.pass(Some(&without_c));
    outcome.unwrap();
    assert_eq!(federation.service_clusters(0), ["a", "b"]);
    assert_eq!(federation.hostconf()["datas"].lines().count(), 4);
}

#[test]
fn a_scale_down_before_any_status_deletes_every_member_service() {
    // FedState checks the clusters that shrink against status.result; with
    // no result yet (the binding was never read) every check passes and
    // ScaleDownCleaner finds no Service in use.
    let mut federation = Federation::new(admitted(&[("a", 2), ("b", 2), ("c", 1)]));
    federation.pass(None);
    federation.scale(&[("a", 1), ("b", 2), ("c", 1)]);
    let Outcome(outcome, _) = federation.pass(None);
    assert!(outcome.is_err());
    assert!(federation.objects.services.is_empty());
}

#[test]
fn a_partial_scale_up_rewrites_service_policies_with_only_the_growing_clusters() {
    let mut federation = formed(&[("a", 2), ("b", 2), ("c", 1)]);
    federation.scale(&[("a", 3), ("b", 2), ("c", 2)]);
    federation.pass(Some(&federation.binding(&[("a", 2), ("b", 2), ("c", 1)])));
    // FedState's ClusterScaleHandler: b does not grow, so it loses its Services.
    assert_eq!(federation.service_clusters(0), ["a", "c"]);
    assert_eq!(federation.service_clusters(1), ["a", "c"]);
    assert_eq!(federation.service_clusters(2), ["a"]);
    assert!(!federation.hostconf()["datas"].contains("127.9.2.1"));

    let mut corrected = Federation::new(admitted(&[("a", 2), ("b", 2), ("c", 1)]));
    corrected.deviations.keep_unchanged_clusters_on_scale_up = true;
    corrected.pass(None);
    corrected.scale(&[("a", 3), ("b", 2), ("c", 2)]);
    corrected.pass(None);
    assert_eq!(corrected.service_clusters(0), ["a", "b", "c"]);
    assert_eq!(corrected.service_clusters(1), ["a", "b", "c"]);
    assert_eq!(corrected.service_clusters(2), ["a"]);
    assert_eq!(corrected.hostconf()["datas"].lines().count(), 7);
}

#[test]
fn status_is_read_from_the_binding_as_fedstate_reads_it() {
    let mut federation = Federation::new(admitted(&[("a", 2), ("b", 1)]));
    federation.object.spec.config.arbiter = true;
    federation.pass(None);
    let binding = federation.binding(&[("a", 2), ("b", 1)]);
    federation.pass(Some(&binding)).0.unwrap();
    let status = &federation.object.status;
    assert_eq!(status.state, "Health");
    assert_eq!(status.result.len(), 2);
    assert_eq!(status.result[0].replicaset_status, Some(2));
    let arbiter_port = federation.objects.services["demo-mongodb-arbiter"].node_port;
    assert_eq!(
        status.result[0].connect_addr_with_role[&format!("127.9.1.1:{arbiter_port}")],
        "ARBITER"
    );
    assert_eq!(status.external_addr.split(',').count(), 3);
    let types: Vec<&str> = status.conditions.iter().map(|c| c.type_.as_str()).collect();
    assert_eq!(
        types,
        ["ServerReady", "ServerCheck", "ServerScheduledResult"]
    );
}

#[test]
fn deletion_goes_in_fedstates_order_and_the_arbiter_service_waits_for_garbage_collection() {
    let mut federation = Federation::new(admitted(&[("a", 1), ("b", 1)]));
    federation.object.spec.config.arbiter = true;
    federation.pass(None);
    let deleted = delete_external_resources(&federation.object, &mut federation.objects);
    let kinds: Vec<&str> = deleted
        .iter()
        .map(|d| d.split(' ').next().unwrap())
        .collect();
    let first = |kind: &str| kinds.iter().position(|k| *k == kind).unwrap();
    assert!(first("PropagationPolicy") < first("Service"));
    assert!(first("Service") < first("ConfigMap"));
    assert!(first("ConfigMap") < first("MongoDB"));
    assert!(first("MongoDB") < first("OverridePolicy"));
    assert_eq!(
        federation.objects.services.keys().collect::<Vec<_>>(),
        ["demo-mongodb-arbiter"]
    );
    let collected = garbage_collect(&mut federation.objects);
    assert!(collected.contains(&"Service demo-mongodb-arbiter".to_string()));
    assert_eq!(federation.objects, Objects::default());
}

#[test]
fn a_slot_scaled_down_and_up_again_flips_member_0s_policy_on_every_pass() {
    // 1/2/1 -> 1/1/1 -> 1/2/1 (the lab's member_data scenario). The scale-in
    // is clean: b keeps member 0, Service 1 and its policy go (the policy's
    // re-create fails once), the next pass rebuilds hostconf.
    let mut federation = formed(&[("a", 1), ("b", 2), ("c", 1)]);
    federation.scale(&[("a", 1), ("b", 1), ("c", 1)]);
    let shrunk = federation.binding(&[("a", 1), ("b", 1), ("c", 1)]);
    federation.pass(Some(&shrunk)).0.unwrap();
    let Outcome(outcome, _) = federation.pass(Some(&shrunk));
    assert!(outcome
        .unwrap_err()
        .contains("resourceVersion should not be set"));
    federation.pass(Some(&shrunk)).0.unwrap();
    federation.pass(Some(&shrunk)).0.unwrap();
    assert!(!federation.objects.services.contains_key("demo-mongodb-1"));
    assert_eq!(federation.service_clusters(0), ["a", "b", "c"]);
    assert_eq!(federation.hostconf()["datas"].lines().count(), 3);

    // The scale-up grows b only. ClusterScaleHandler (params.
    // ServiceNameWithCluster still empty) gives Services 0 and 1 to b alone;
    // hostconf then lists a and c with no member, so the next pass "scales
    // them up" and gives Service 0 to a and c alone, hostconf then lists b
    // once, and so on: member 0's Service leaves and comes back to every
    // cluster on every pass, whatever the data plane reports.
    let mut corrected = Federation {
        object: federation.object.clone(),
        objects: federation.objects.clone(),
        ports: federation.ports.clone(),
        rng: StdRng::seed_from_u64(7),
        deviations: Deviations {
            keep_unchanged_clusters_on_scale_up: true,
        },
    };
    federation.scale(&[("a", 1), ("b", 2), ("c", 1)]);
    for _ in 0..3 {
        federation.pass(Some(&shrunk)).0.unwrap();
        assert_eq!(federation.service_clusters(0), ["b"]);
        assert_eq!(federation.service_clusters(1), ["b"]);
        assert!(!federation.hostconf()["datas"].contains("127.9.1.1"));
        federation.pass(Some(&shrunk)).0.unwrap();
        assert_eq!(federation.service_clusters(0), ["a", "c"]);
        assert_eq!(federation.service_clusters(1), ["b"]);
        assert!(
            !federation.hostconf()["datas"].contains(&format!("127.9.2.1:{}", federation.port(0)))
        );
    }

    // With the lab-only correction the scale-up settles in one pass.
    corrected.scale(&[("a", 1), ("b", 2), ("c", 1)]);
    for _ in 0..3 {
        corrected.pass(Some(&shrunk)).0.unwrap();
        assert_eq!(corrected.service_clusters(0), ["a", "b", "c"]);
        assert_eq!(corrected.service_clusters(1), ["b"]);
        assert_eq!(corrected.hostconf()["datas"].lines().count(), 4);
    }
}
