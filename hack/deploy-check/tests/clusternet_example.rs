//! Proves that `examples/clusternet/` places one MongoDB instance over three
//! Clusternet child clusters as FedState's control plane would: each cluster
//! gets the MongoDB with its share (members, rsInit, arbiter, VIP label), the
//! hostconf, the credentials Secret and the Services of exactly the members it
//! hosts.
//!
//! The Subscriptions and Localizations are checked against Clusternet's API
//! (clusternet/clusternet `pkg/apis/apps/v1alpha1/subscription.go` and
//! `localization.go`: required and known fields, enums, ranges). Each
//! Localization's overrides are applied to the MongoDB template as Clusternet
//! applies them (JSON patch, RFC 6902; merge patch, RFC 7386; lower priority
//! first; values in JSON or YAML), and every cluster's resulting MongoDB passes
//! the generated CRD's schema (via `hack/crd-admission`) with no unknown field.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crd_admission::Admission;
use serde_json::{json, Map, Value as Json};

const EXAMPLE: &str = "examples/clusternet";
const CLUSTER_NAME_LABEL: &str = "clusters.clusternet.io/cluster-name";
const VIP_LABEL: &str = "app.multicloudmongodb.io/vip";

fn repository_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every YAML document of the example's files.
fn documents() -> Vec<Json> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(repository_root().join(EXAMPLE))
        .expect("read the example")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let mut documents = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read a YAML file");
        for document in serde_yaml::Deserializer::from_str(&text) {
            let value: Json = serde::Deserialize::deserialize(document)
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            if !value.is_null() {
                documents.push(value);
            }
        }
    }
    documents
}

fn text<'a>(value: &'a Json, what: &str) -> &'a str {
    value
        .as_str()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| panic!("{what} is required (a non-empty string)"))
}

/// Fields outside `known` are refused (the API server would prune or refuse them).
fn only_known(object: &Json, known: &[&str], what: &str) {
    let fields = object
        .as_object()
        .unwrap_or_else(|| panic!("{what} is an object"));
    for key in fields.keys() {
        assert!(
            known.contains(&key.as_str()),
            "{what}.{key} is not a field of Clusternet's API"
        );
    }
}

/// A template's key: (kind, namespace, name).
type Key = (String, String, String);

fn key_of(object: &Json) -> Key {
    (
        object["kind"].as_str().unwrap_or("").to_string(),
        object["metadata"]["namespace"]
            .as_str()
            .unwrap_or("")
            .to_string(),
        object["metadata"]["name"]
            .as_str()
            .unwrap_or("")
            .to_string(),
    )
}

/// `Feed`: kind, apiVersion and name required; namespace for namespaced kinds.
fn feed_key(feed: &Json, what: &str) -> Key {
    only_known(feed, &["kind", "apiVersion", "namespace", "name"], what);
    let kind = text(&feed["kind"], &format!("{what}.kind"));
    text(&feed["apiVersion"], &format!("{what}.apiVersion"));
    let name = text(&feed["name"], &format!("{what}.name"));
    let namespace = feed["namespace"].as_str().unwrap_or("");
    assert_eq!(
        namespace.is_empty(),
        kind == "Namespace",
        "{what}: a namespaced kind names its namespace"
    );
    (kind.to_string(), namespace.to_string(), name.to_string())
}

/// The clusters a Subscription subscribes and the templates it feeds.
fn check_subscription(subscription: &Json) -> (Vec<String>, Vec<Key>) {
    let name = text(&subscription["metadata"]["name"], "Subscription name");
    text(
        &subscription["metadata"]["namespace"],
        "Subscription namespace",
    );
    let spec = &subscription["spec"];
    only_known(
        spec,
        &[
            "schedulerName",
            "schedulingStrategy",
            "dividingScheduling",
            "subscribers",
            "clusterTolerations",
            "feeds",
        ],
        &format!("Subscription {name} spec"),
    );
    let strategy = spec["schedulingStrategy"].as_str().unwrap_or("Replication");
    assert_eq!(
        strategy, "Replication",
        "{name}: every subscribed cluster gets each feed, its share from its Localization"
    );
    assert!(
        spec.get("dividingScheduling").is_none(),
        "{name}: dividingScheduling is for Dividing only"
    );
    let subscribers = spec["subscribers"]
        .as_array()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| panic!("{name}: spec.subscribers is required"));
    let clusters = subscribers
        .iter()
        .map(|subscriber| {
            only_known(subscriber, &["clusterAffinity", "weight"], "subscriber");
            let affinity = &subscriber["clusterAffinity"];
            only_known(
                affinity,
                &["matchLabels", "matchExpressions"],
                "clusterAffinity",
            );
            text(
                &affinity["matchLabels"][CLUSTER_NAME_LABEL],
                &format!("{name}: a subscriber's matchLabels.{CLUSTER_NAME_LABEL}"),
            )
            .to_string()
        })
        .collect();
    let feeds = spec["feeds"]
        .as_array()
        .filter(|f| !f.is_empty())
        .unwrap_or_else(|| panic!("{name}: spec.feeds is required"))
        .iter()
        .enumerate()
        .map(|(i, feed)| feed_key(feed, &format!("{name}: feeds[{i}]")))
        .collect();
    (clusters, feeds)
}

/// An override's value: JSON or YAML, as Clusternet accepts it.
fn override_value(value: &str, what: &str) -> Json {
    serde_yaml::from_str(value).unwrap_or_else(|e| panic!("{what}: not JSON or YAML: {e}"))
}

/// RFC 6901 reference tokens.
fn pointer_tokens(path: &str) -> Vec<String> {
    assert!(path.starts_with('/'), "JSON pointer {path:?} starts with /");
    path[1..]
        .split('/')
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect()
}

/// RFC 6902: add, remove, replace and test (what an override needs).
fn json_patch(target: &mut Json, patch: &Json, what: &str) {
    for (i, operation) in patch
        .as_array()
        .unwrap_or_else(|| panic!("{what}: a JSON patch is a list"))
        .iter()
        .enumerate()
    {
        let op = text(&operation["op"], &format!("{what}[{i}].op"));
        let tokens = pointer_tokens(text(&operation["path"], &format!("{what}[{i}].path")));
        let (last, parents) = tokens.split_last().expect("a path below the root");
        let mut parent = &mut *target;
        for token in parents {
            parent = match parent {
                Json::Object(map) => map.get_mut(token),
                Json::Array(items) => token.parse::<usize>().ok().and_then(|i| items.get_mut(i)),
                _ => None,
            }
            .unwrap_or_else(|| panic!("{what}[{i}]: no {token} on the path"));
        }
        let value = || {
            operation
                .get("value")
                .cloned()
                .unwrap_or_else(|| panic!("{what}[{i}]: {op} needs a value"))
        };
        match (op, parent) {
            ("add", Json::Object(map)) => {
                map.insert(last.clone(), value());
            }
            ("add", Json::Array(items)) => {
                let index = if last == "-" {
                    items.len()
                } else {
                    last.parse().expect("an index")
                };
                assert!(index <= items.len(), "{what}[{i}]: index out of range");
                items.insert(index, value());
            }
            ("replace", Json::Object(map)) => {
                assert!(
                    map.contains_key(last),
                    "{what}[{i}]: replace needs an existing {last}"
                );
                map.insert(last.clone(), value());
            }
            ("remove", Json::Object(map)) => {
                assert!(
                    map.remove(last).is_some(),
                    "{what}[{i}]: remove needs an existing {last}"
                );
            }
            ("test", Json::Object(map)) => {
                assert_eq!(map.get(last), Some(&value()), "{what}[{i}]: test failed");
            }
            (op, _) => panic!("{what}[{i}]: {op} at {:?} is not handled here", tokens),
        }
    }
}

/// RFC 7386.
fn merge_patch(target: &mut Json, patch: &Json) {
    let Json::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Json::Object(Map::new());
    }
    let map = target.as_object_mut().expect("object");
    for (key, value) in patch {
        if value.is_null() {
            map.remove(key);
        } else {
            merge_patch(map.entry(key.clone()).or_insert(Json::Null), value);
        }
    }
}

/// The MongoDB a cluster gets: the template with its Localizations applied,
/// lower priority first.
fn localized(template: &Json, localizations: &[&Json]) -> Json {
    let mut ordered: Vec<&Json> = localizations.to_vec();
    ordered.sort_by_key(|l| l["spec"]["priority"].as_i64().unwrap_or(500));
    let mut object = template.clone();
    for localization in ordered {
        let name = localization["metadata"]["name"].as_str().unwrap_or("");
        for (i, item) in localization["spec"]["overrides"]
            .as_array()
            .unwrap_or_else(|| panic!("{name}: spec.overrides"))
            .iter()
            .enumerate()
        {
            let what = format!("Localization {name} overrides[{i}]");
            only_known(item, &["name", "value", "type"], &what);
            let value = override_value(text(&item["value"], &format!("{what}.value")), &what);
            match text(&item["type"], &format!("{what}.type")) {
                "JSONPatch" => json_patch(&mut object, &value, &what),
                "MergePatch" => merge_patch(&mut object, &value),
                "Helm" => panic!("{what}: Helm overrides only apply to HelmCharts"),
                other => panic!("{what}: type {other} is not JSONPatch, MergePatch or Helm"),
            }
        }
    }
    object
}

/// `(data hosts, arbiter hosts)` of a FedState hostconf: `host:'VIP:port'` lines.
fn hostconf_hosts(hostconf: &Json) -> (Vec<String>, Vec<String>) {
    let hosts = |key: &str| -> Vec<String> {
        hostconf["data"][key]
            .as_str()
            .unwrap_or("")
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(|line| {
                line.strip_prefix("host:'")
                    .and_then(|l| l.strip_suffix('\''))
                    .unwrap_or_else(|| panic!("hostconf line {line:?} is host:'VIP:port'"))
                    .to_string()
            })
            .collect()
    };
    (hosts("datas"), hosts("arbiters"))
}

fn crd_admission() -> Admission {
    let crd: Json = serde_yaml::from_str(
        &std::fs::read_to_string(repository_root().join("crds/mongodb.yaml"))
            .expect("read the CRD"),
    )
    .expect("the CRD is YAML");
    Admission::new(&crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
        .expect("the CRD schema compiles")
}

#[test]
fn the_clusternet_example_gives_each_cluster_its_share_of_one_replica_set() {
    let documents = documents();
    let of_kind = |kind: &str| -> Vec<&Json> {
        documents
            .iter()
            .filter(|d| d["kind"] == kind)
            .collect::<Vec<_>>()
    };
    let templates: BTreeMap<Key, &Json> = documents
        .iter()
        .filter(|d| {
            !d["apiVersion"]
                .as_str()
                .unwrap_or("")
                .starts_with("apps.clusternet.io/")
        })
        .map(|d| (key_of(d), d))
        .collect();

    // Subscriptions: which cluster gets which template.
    let mut fed: BTreeMap<String, BTreeSet<Key>> = BTreeMap::new();
    for subscription in of_kind("Subscription") {
        assert_eq!(subscription["apiVersion"], "apps.clusternet.io/v1alpha1");
        let (clusters, feeds) = check_subscription(subscription);
        for feed in &feeds {
            let template = templates
                .get(feed)
                .unwrap_or_else(|| panic!("feed {feed:?} is not among the example's objects"));
            assert_eq!(
                template["metadata"]["namespace"].as_str().unwrap_or(""),
                subscription["metadata"]["namespace"]
                    .as_str()
                    .filter(|_| feed.0 != "Namespace")
                    .unwrap_or(""),
                "feed {feed:?} is in the Subscription's namespace"
            );
        }
        for cluster in clusters {
            fed.entry(cluster)
                .or_default()
                .extend(feeds.iter().cloned());
        }
    }
    assert_eq!(
        fed.keys().collect::<Vec<_>>(),
        ["member1", "member2", "member3"]
    );
    let every_template: BTreeSet<Key> = templates.keys().cloned().collect();
    let fed_somewhere: BTreeSet<Key> = fed.values().flatten().cloned().collect();
    assert_eq!(
        fed_somewhere, every_template,
        "every object is fed to some cluster"
    );

    // Localizations: one per cluster, for the MongoDB, in its cluster's namespace.
    let mongodb_key: Key = ("MongoDB".into(), "db".into(), "demo".into());
    let template = templates[&mongodb_key];
    let mut by_cluster: BTreeMap<String, Vec<&Json>> = BTreeMap::new();
    for localization in of_kind("Localization") {
        assert_eq!(localization["apiVersion"], "apps.clusternet.io/v1alpha1");
        let name = text(&localization["metadata"]["name"], "Localization name");
        let namespace = text(
            &localization["metadata"]["namespace"],
            "Localization namespace",
        );
        let spec = &localization["spec"];
        only_known(
            spec,
            &["overridePolicy", "overrides", "priority", "feed"],
            &format!("Localization {name} spec"),
        );
        let policy = spec["overridePolicy"].as_str().unwrap_or("ApplyLater");
        assert!(
            ["ApplyNow", "ApplyLater"].contains(&policy),
            "{name}: overridePolicy"
        );
        let priority = spec["priority"].as_i64().unwrap_or(500);
        assert!(
            (0..=1000).contains(&priority),
            "{name}: priority in 0..=1000"
        );
        assert_eq!(
            feed_key(&spec["feed"], &format!("{name}.feed")),
            mongodb_key
        );
        // The example's stand-in for the ManagedCluster's namespace.
        let cluster = namespace
            .strip_prefix("clusternet-")
            .unwrap_or_else(|| panic!("{name}: namespace {namespace} is a cluster's"));
        by_cluster
            .entry(cluster.to_string())
            .or_default()
            .push(localization);
    }
    assert_eq!(
        by_cluster.keys().collect::<Vec<_>>(),
        fed.keys().collect::<Vec<_>>(),
        "a Localization for every subscribed cluster, none for another"
    );

    let hostconf = templates[&("ConfigMap".into(), "db".into(), "demo-hostconf".into())];
    let (datas, arbiters) = hostconf_hosts(hostconf);
    let admission = crd_admission();
    let service_port = |name: &str| -> i64 {
        templates[&("Service".to_string(), "db".to_string(), name.to_string())]["spec"]["ports"][0]
            ["nodePort"]
            .as_i64()
            .expect("a nodePort")
    };
    let (mut members, mut initiators, mut arbiter_clusters) = (0, 0, 0);
    let mut hosts_placed: Vec<String> = Vec::new();
    for (cluster, localizations) in &by_cluster {
        let mut mongodb = localized(template, localizations);
        let admitted = admission
            .admit_reporting(&mut mongodb, None)
            .unwrap_or_else(|errors| {
                panic!(
                    "{cluster}: the CRD refuses the MongoDB: {}",
                    errors
                        .iter()
                        .map(|e| e.to_string())
                        .collect::<Vec<_>>()
                        .join("; ")
                )
            });
        assert!(
            admitted.unknown_fields.is_empty(),
            "{cluster}: fields the CRD does not know: {:?}",
            admitted.unknown_fields
        );
        let spec = &mongodb["spec"];
        let share = spec["members"].as_i64().expect("members");
        let arbiter = spec["arbiter"] == true;
        members += share;
        initiators += i64::from(spec["rsInit"] == true);
        arbiter_clusters += i64::from(arbiter);
        let vip = text(&mongodb["metadata"]["labels"][VIP_LABEL], "the VIP label");

        // The cluster's objects: exactly what its members need.
        let mut expected: BTreeSet<Key> = BTreeSet::from([
            ("Namespace".into(), String::new(), "db".into()),
            mongodb_key.clone(),
            ("ConfigMap".into(), "db".into(), "demo-hostconf".into()),
        ]);
        let secret = text(
            &spec["credentialsSecretRef"]["name"],
            "credentialsSecretRef.name",
        );
        expected.insert(("Secret".into(), "db".into(), secret.into()));
        let secret = templates[&("Secret".to_string(), "db".to_string(), secret.to_string())];
        for key in ["keyfileKey", "usernameKey", "passwordKey"] {
            let field = text(&spec["credentialsSecretRef"][key], key);
            assert!(
                secret["stringData"].get(field).is_some() || secret["data"].get(field).is_some(),
                "the Secret has {field}"
            );
        }
        for index in 0..share {
            let service = format!("demo-mongodb-{index}");
            let host = format!("{vip}:{}", service_port(&service));
            assert!(
                datas.contains(&host),
                "{cluster}: {host} is in the hostconf's datas"
            );
            hosts_placed.push(host);
            expected.insert(("Service".into(), "db".into(), service));
        }
        if arbiter {
            let host = format!("{vip}:{}", service_port("demo-mongodb-arbiter"));
            assert_eq!(
                arbiters,
                std::slice::from_ref(&host),
                "{cluster}: the hostconf's arbiter"
            );
            hosts_placed.push(host);
            expected.insert(("Service".into(), "db".into(), "demo-mongodb-arbiter".into()));
        }
        assert_eq!(fed[cluster], expected, "{cluster}: its objects");
    }
    assert_eq!(initiators, 1, "exactly one cluster initiates the set");
    assert!(arbiter_clusters <= 1, "at most one arbiter");
    assert_eq!(arbiter_clusters as usize, arbiters.len());
    assert_eq!(
        members as usize,
        datas.len(),
        "the shares add up to the hostconf"
    );
    hosts_placed.sort();
    let mut listed: Vec<String> = datas.iter().chain(&arbiters).cloned().collect();
    listed.sort();
    assert_eq!(hosts_placed, listed, "every hostconf member is hosted once");
    let voters = datas.len() + arbiters.len();
    assert!(voters % 2 == 1, "{voters} voters: an odd number");
}

#[test]
fn the_override_helpers_follow_the_rfcs() {
    let mut object = json!({"spec": {"members": 1, "list": [1, 2]}, "metadata": {}});
    json_patch(
        &mut object,
        &json!([
            {"op": "replace", "path": "/spec/members", "value": 2},
            {"op": "add", "path": "/spec/list/-", "value": 3},
            {"op": "add", "path": "/spec/list/0", "value": 0},
            {"op": "add", "path": "/metadata/a~1b", "value": "x"},
            {"op": "test", "path": "/spec/members", "value": 2},
            {"op": "remove", "path": "/metadata/a~1b"}
        ]),
        "patch",
    );
    assert_eq!(
        object,
        json!({"spec": {"members": 2, "list": [0, 1, 2, 3]}, "metadata": {}})
    );
    merge_patch(
        &mut object,
        &json!({"metadata": {"labels": {"a": "b"}}, "spec": {"list": null, "members": 3}}),
    );
    assert_eq!(
        object,
        json!({"spec": {"members": 3}, "metadata": {"labels": {"a": "b"}}})
    );
}
