//! The objects FedState builds, `pkg/driver/k8s/obj.go`: the names of the
//! member Services and of hostconf, the `MongoDB` payload (`GenerateMongo`) and
//! hostconf's data (`GenerateConfigMap`).

use std::collections::BTreeMap;

use rand::seq::SliceRandom;
use rand::Rng;
use serde_json::{json, Value as Json};

use super::{MultiCloudMongoDB, ResourceSetting};

/// `<name>-mongodb-<index>`.
pub fn member_service_name(name: &str, index: usize) -> String {
    format!("{name}-mongodb-{index}")
}

/// `<name>-mongodb-arbiter`.
pub fn arbiter_service_name(name: &str) -> String {
    format!("{name}-mongodb-arbiter")
}

/// `<name>-hostconf`.
pub fn hostconf_name(name: &str) -> String {
    format!("{name}-hostconf")
}

fn resource_json(resource: &ResourceSetting) -> Json {
    serde_json::to_value(resource).unwrap_or_else(|_| json!({}))
}

/// `GenerateMongo`: the MongoDB spec FedState sends, with the **total** number
/// of members. Go's `encoding/json` of `MongoDBSpec`: `dbUserSpec`,
/// `imagePullSecret` and `persistence` are structs (always sent, `{}` when
/// empty); the exporter is `{enable, resources}`; `config[]` comes from the
/// `configSet` map in random order; no `imagePullPolicy`, no storage class, no
/// `memberConfigRef`, no `rsInit`/`arbiter` (those come from OverridePolicies).
pub fn generate_mongo(object: &MultiCloudMongoDB, rng: &mut impl Rng) -> Json {
    let spec = &object.spec;
    let mut mongo = json!({
        "type": "ReplicaSet",
        "resources": resource_json(&spec.resource),
        "persistence": if spec.storage.storage_size.is_empty() { json!({}) } else { json!({"storage": spec.storage.storage_size}) },
        "metricsExporterSpec": {"enable": spec.export.enable, "resources": resource_json(&spec.export.resource)},
        "dbUserSpec": {},
        "imagePullSecret": {},
    });
    let fields = mongo.as_object_mut().expect("object");
    if !spec.image_setting.image.is_empty() {
        fields.insert("image".into(), json!(spec.image_setting.image));
    }
    if let Some(password) = spec.auth.root_passwd.as_deref().filter(|p| !p.is_empty()) {
        fields.insert("rootPassword".into(), json!(password));
    }
    let members = spec.replicaset.unwrap_or_default();
    if members != 0 {
        fields.insert("members".into(), json!(members));
    }
    if let Some(reference) = &spec.config.config_ref {
        if !reference.is_empty() {
            fields.insert("customConfigRef".into(), json!(reference));
        }
    }
    if let Some(config_set) = &spec.config.config_set {
        let mut entries: Vec<Json> = config_set
            .iter()
            .map(|(name, value)| json!({"name": name, "value": value}))
            .collect();
        entries.shuffle(rng);
        if !entries.is_empty() {
            fields.insert("config".into(), Json::Array(entries));
        }
    }
    mongo
}

/// `GenerateConfigMap`'s data: both keys, each a `host:'VIP:nodePort'` per line
/// joined with `\n` (no trailing newline; `arbiters` empty when there is none).
pub fn hostconf_data(datas: &[String], arbiters: &[String]) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("arbiters".to_string(), arbiters.join("\n")),
        ("datas".to_string(), datas.join("\n")),
    ])
}

pub(super) fn host_line(vip: &str, node_port: i32) -> String {
    format!("host:'{vip}:{node_port}'")
}
