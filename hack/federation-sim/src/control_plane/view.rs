//! What the control plane knows of an instance, as `lab status` shows it.

use anyhow::{anyhow, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use super::ControlPlane;
use crate::fedstate::MultiCloudMongoDB;
use crate::karmada::{self, ResourceBinding};

/// What the control plane knows of an instance, for `lab status`.
#[derive(Serialize, Deserialize, Clone, Debug)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlaneView {
    /// The `MultiCloudMongoDB` with FedState's status (root password redacted).
    pub multicloudmongodb: MultiCloudMongoDB,
    /// The MongoDB's ResourceBinding, as FedState reads it.
    pub binding: Option<ResourceBinding>,
    /// The template's generation in the Karmada API server.
    pub template_generation: Option<i64>,
    /// The template's status: the chart's `AggregateStatus`.
    pub aggregated: Json,
    /// The last things the control plane did.
    pub log: Vec<String>,
}

impl ControlPlane {
    /// What the control plane knows of `namespace/name`: FedState's status,
    /// the ResourceBinding (read now) and the aggregated status.
    pub async fn view(&self, namespace: &str, name: &str) -> Result<ControlPlaneView> {
        let interpreter = self.interpreter()?.clone();
        let mut state = self.shared.state.lock().await;
        let instance = state
            .instances
            .get_mut(&(namespace.to_string(), name.to_string()))
            .ok_or_else(|| anyhow!("no MultiCloudMongoDB {namespace}/{name}"))?;
        let binding = if instance.objects.mongodbs.contains_key(name) {
            Some(
                karmada::read_binding(
                    &self.clusters,
                    namespace,
                    name,
                    &mut instance.bindings,
                    &interpreter,
                )
                .await?,
            )
        } else {
            None
        };
        let template = instance.objects.mongodbs.get(name);
        let aggregated = match (template, &binding) {
            (Some(template), Some(binding)) => {
                karmada::aggregate(namespace, name, template, binding, &interpreter)?
            }
            _ => Json::Null,
        };
        let mut object = instance.object.clone();
        if object.spec.auth.root_passwd.is_some() {
            object.spec.auth.root_passwd = Some("(redacted)".into());
        }
        Ok(ControlPlaneView {
            multicloudmongodb: object,
            binding,
            template_generation: template.map(|t| t.generation),
            aggregated,
            log: instance.log.clone(),
        })
    }
}

/// `lab status`'s view of the control plane.
pub fn describe(view: &ControlPlaneView) -> String {
    let object = &view.multicloudmongodb;
    let status = &object.status;
    let mut out = format!(
        "MultiCloudMongoDB {} (FedState): state {}, replicaset {}, image {}\n",
        object.name,
        or_dash(&status.state),
        object.spec.replicaset.unwrap_or_default(),
        or_dash(&object.spec.image_setting.image),
    );
    out.push_str(&format!(
        "  externalAddr {}\n",
        or_dash(&status.external_addr)
    ));
    out.push_str(&format!(
        "  {:<8} {:>4} {:>6} {:<12} {:<7}  {}\n",
        "CLUSTER", "SPEC", "STATUS", "STATE", "APPLIED", "CONNECT ADDRESSES"
    ));
    for result in &status.result {
        let addresses: Vec<String> = result
            .connect_addr_with_role
            .iter()
            .map(|(a, r)| format!("{a}={r}"))
            .collect();
        out.push_str(&format!(
            "  {:<8} {:>4} {:>6} {:<12} {:<7}  {}\n",
            result.cluster,
            result.replicaset_spec.unwrap_or_default(),
            result.replicaset_status.unwrap_or_default(),
            or_dash(&result.state),
            result.applied,
            if addresses.is_empty() {
                "-".to_string()
            } else {
                addresses.join(" ")
            }
        ));
    }
    for condition in &status.conditions {
        out.push_str(&format!(
            "  condition {}={} {}: {}\n",
            condition.type_, condition.status, condition.reason, condition.message
        ));
    }
    if let Some(binding) = &view.binding {
        out.push_str(&format!(
            "ResourceBinding {} (Karmada; ReflectStatus and InterpretHealth from the chart):\n",
            binding.name
        ));
        out.push_str(&format!(
            "  {:<8} {:>5} {:<9} {:<12} {:>6} {:>7}  {}\n",
            "CLUSTER", "SHARE", "HEALTH", "STATE", "READY", "CURRENT", "PRIMARY"
        ));
        for item in &binding.aggregated_status {
            let share = binding
                .clusters
                .iter()
                .find(|c| c.name == item.cluster_name)
                .map(|c| c.replicas)
                .unwrap_or_default();
            let s = item.status.clone().unwrap_or(Json::Null);
            out.push_str(&format!(
                "  {:<8} {:>5} {:<9} {:<12} {:>6} {:>7}  {}\n",
                item.cluster_name,
                share,
                item.health,
                s["state"].as_str().unwrap_or("-"),
                s["readyMembers"].as_str().unwrap_or("-"),
                s["currentInfo"]["members"]
                    .as_i64()
                    .map(|n| n.to_string())
                    .unwrap_or_else(|| "-".into()),
                s["primary"].as_str().unwrap_or("-"),
            ));
        }
    }
    if !view.aggregated.is_null() {
        let a = &view.aggregated;
        out.push_str(&format!(
            "MongoDB template (AggregateStatus from the chart): state {}, readyMembers {}, members {}, primary {}, observedGeneration {}/{}\n",
            a["state"].as_str().unwrap_or("-"),
            a["readyMembers"].as_str().unwrap_or("-"),
            a["currentInfo"]["members"].as_i64().map(|n| n.to_string()).unwrap_or_else(|| "-".into()),
            a["primary"].as_str().unwrap_or("-"),
            a["observedGeneration"].as_i64().map(|n| n.to_string()).unwrap_or_else(|| "-".into()),
            view.template_generation.map(|n| n.to_string()).unwrap_or_else(|| "-".into()),
        ));
    }
    out
}

fn or_dash(text: &str) -> &str {
    if text.is_empty() {
        "-"
    } else {
        text
    }
}
