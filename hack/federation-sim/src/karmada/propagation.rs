//! Karmada at work over the member clusters: propagation
//! (`pkg/controllers/execution/execution_controller.go`: create, update,
//! withdraw what a policy no longer places, with
//! `pkg/util/objectwatcher/objectwatcher.go`), the ResourceBinding's
//! `aggregatedStatus` (`pkg/controllers/status/work_status_controller.go`:
//! the chart's `ReflectStatus` and `InterpretHealth` of each member object;
//! a member object deleted behind Karmada's back is created again, and a
//! member `MongoDB` edited behind its back written again) and the template's
//! status (`pkg/controllers/status/rb_status_controller.go`: the chart's
//! `AggregateStatus`).

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{anyhow, Context, Result};
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams};
use kube::Api;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use super::{
    mongodb_template_object, placement, render_member_object, schedule_mongodb, Kind,
    MongoDBTemplate, Objects, ResourceRef, TargetCluster,
};
use crate::control_plane::MemberCluster;
use crate::interpreter::Interpreter;

/// Field manager of what "Karmada" writes into member clusters.
pub const FIELD_MANAGER: &str = "karmada";
/// One entry of a ResourceBinding's `status.aggregatedStatus`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AggregatedStatusItem {
    /// Cluster.
    pub cluster_name: String,
    /// `ReflectStatus` of the member object; `None` until it is observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Json>,
    /// The member object exists.
    pub applied: bool,
    /// `Healthy`, `Unhealthy` (from `InterpretHealth`) or `Unknown`.
    pub health: String,
}

/// The ResourceBinding `<name>-mongodb` as FedState's StatusHandler reads it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResourceBinding {
    /// `metadata.name`.
    pub name: String,
    /// `spec.clusters`.
    pub clusters: Vec<TargetCluster>,
    /// `status.aggregatedStatus`, by cluster name.
    pub aggregated_status: Vec<AggregatedStatusItem>,
}

/// What Karmada has done so far for one instance: where each template is
/// propagated (its Works) and what it last wrote there.
#[derive(Clone, Debug, Default)]
pub struct Bindings {
    /// Clusters holding each template.
    pub works: BTreeMap<ResourceRef, BTreeSet<String>>,
    /// The MongoDB templates' scheduling results.
    pub schedules: BTreeMap<String, Vec<TargetCluster>>,
    /// The object last written per (template, cluster), and the member object's
    /// generation then (MongoDB only; 0 otherwise).
    applied: BTreeMap<(ResourceRef, String), (Json, i64)>,
}

/// Propagates every template of `objects` to the member clusters as Karmada
/// would: withdraws what its policy no longer places somewhere, writes what
/// changed, and creates again a member object that is gone although its
/// template still places it there. Returns `cluster/Kind/name
/// applied|updated|deleted` lines.
///
/// Withdrawing is `objectWatcherImpl.Delete`
/// (`pkg/util/objectwatcher/objectwatcher.go`): one delete with
/// `propagationPolicy: Background`, not waited for; a member object held by a
/// finalizer stays (Terminating) until its holder lets it go, and Karmada
/// never strips member finalizers.
///
/// A member object deleted behind Karmada's back (really gone: its GET is a
/// 404; one with a `deletionTimestamp` still exists and is left alone) is
/// created again, as the work status controller does on the member's delete
/// event (`pkg/controllers/status/work_status_controller.go`
/// `handleDeleteEvent` → `recreateResourceIfNeeded`, v1.13–v1.19; later the
/// execution controller's `onDelete`): here at the next sync rather than at
/// once. A member that cannot be read is not touched (Karmada hears no delete
/// event from it).
pub async fn sync(
    clusters: &[MemberCluster],
    namespace: &str,
    objects: &Objects,
    bindings: &mut Bindings,
    interpreter: &Interpreter,
) -> Result<Vec<String>> {
    bindings.schedules.clear();
    for name in objects.mongodbs.keys() {
        bindings.schedules.insert(
            name.clone(),
            schedule_mongodb(objects, namespace, name, interpreter)?,
        );
    }
    let mut done = Vec::new();
    let mut templates = objects.templates();
    // Templates gone from the API server: withdrawn everywhere.
    templates.extend(
        bindings
            .works
            .keys()
            .filter(|r| !objects.has_template(r))
            .cloned()
            .collect::<Vec<_>>(),
    );
    for resource in templates {
        let previous = bindings.works.get(&resource).cloned().unwrap_or_default();
        let desired = if objects.has_template(&resource) {
            placement(objects, &resource, &bindings.schedules).unwrap_or_else(|| previous.clone())
        } else {
            BTreeSet::new()
        };
        for cluster_name in previous.difference(&desired) {
            let cluster = member(clusters, cluster_name)?;
            let api = Api::<DynamicObject>::namespaced_with(
                cluster.client.clone(),
                namespace,
                &resource.kind.api_resource(),
            );
            match api
                .delete(&resource.name, &DeleteParams::background())
                .await
            {
                Ok(_) => done.push(format!(
                    "{cluster_name}/{:?}/{} deleted",
                    resource.kind, resource.name
                )),
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(error) => {
                    return Err(error).with_context(|| {
                        format!(
                            "withdrawing {:?} {} from cluster {cluster_name}",
                            resource.kind, resource.name
                        )
                    })
                }
            }
            bindings
                .applied
                .remove(&(resource.clone(), cluster_name.clone()));
            bindings
                .works
                .entry(resource.clone())
                .or_default()
                .remove(cluster_name);
        }
        for cluster_name in &desired {
            let cluster = member(clusters, cluster_name)?;
            let rendered = render_member_object(
                namespace,
                objects,
                &resource,
                cluster_name,
                &bindings.schedules,
                interpreter,
            )?;
            let key = (resource.clone(), cluster_name.clone());
            let api = Api::<DynamicObject>::namespaced_with(
                cluster.client.clone(),
                namespace,
                &resource.kind.api_resource(),
            );
            if bindings.applied.get(&key).map(|(o, _)| o) == Some(&rendered) {
                match api.get_opt(&resource.name).await {
                    Ok(None) => {
                        // `recreateResourceIfNeeded`.
                        bindings.applied.remove(&key);
                    }
                    Ok(Some(_)) => continue,
                    Err(error) => {
                        tracing::debug!(
                            cluster = %cluster_name,
                            kind = ?resource.kind,
                            name = %resource.name,
                            %error,
                            "member object unreadable; left as it is"
                        );
                        continue;
                    }
                }
            }
            let written = api
                .patch(
                    &resource.name,
                    &PatchParams::apply(FIELD_MANAGER).force(),
                    &Patch::Apply(&rendered),
                )
                .await
                .with_context(|| {
                    format!(
                        "propagating {:?} {} to cluster {cluster_name}",
                        resource.kind, resource.name
                    )
                })?;
            let verb = if bindings.applied.contains_key(&key) {
                "updated"
            } else {
                "applied"
            };
            done.push(format!(
                "{cluster_name}/{:?}/{} {verb}",
                resource.kind, resource.name
            ));
            bindings.applied.insert(
                key,
                (rendered, written.metadata.generation.unwrap_or_default()),
            );
            bindings
                .works
                .entry(resource.clone())
                .or_default()
                .insert(cluster_name.clone());
        }
        if bindings
            .works
            .get(&resource)
            .is_some_and(BTreeSet::is_empty)
        {
            bindings.works.remove(&resource);
        }
    }
    Ok(done)
}

fn member<'a>(clusters: &'a [MemberCluster], name: &str) -> Result<&'a MemberCluster> {
    clusters
        .iter()
        .find(|c| c.name == name)
        .ok_or_else(|| anyhow!("no member cluster {name}"))
}

/// Reads the ResourceBinding of MongoDB `name`: every scheduled cluster's object,
/// through the chart's `ReflectStatus` and `InterpretHealth`. A member object
/// edited (its generation changed) behind Karmada's back is written again at
/// the next sync (Karmada's work status controller does the same); one that is
/// gone is reported not applied, and [`sync`] creates it again.
pub async fn read_binding(
    clusters: &[MemberCluster],
    namespace: &str,
    name: &str,
    bindings: &mut Bindings,
    interpreter: &Interpreter,
) -> Result<ResourceBinding> {
    let targets = bindings.schedules.get(name).cloned().unwrap_or_default();
    let resource = ResourceRef::new(Kind::MongoDB, name);
    let mut items = Vec::new();
    for target in &targets {
        let cluster = member(clusters, &target.name)?;
        let api = Api::<DynamicObject>::namespaced_with(
            cluster.client.clone(),
            namespace,
            &Kind::MongoDB.api_resource(),
        );
        let observed = api
            .get_opt(name)
            .await
            .with_context(|| format!("reading MongoDB {name} in cluster {}", target.name))?;
        let key = (resource.clone(), target.name.clone());
        let Some(observed) = observed else {
            bindings.applied.remove(&key);
            items.push(AggregatedStatusItem {
                cluster_name: target.name.clone(),
                status: None,
                applied: false,
                health: "Unknown".into(),
            });
            continue;
        };
        if let Some((_, generation)) = bindings.applied.get(&key) {
            if observed.metadata.generation.unwrap_or_default() != *generation
                && observed.metadata.deletion_timestamp.is_none()
            {
                bindings.applied.remove(&key);
            }
        }
        let observed = serde_json::to_value(&observed)?;
        let status = interpreter.reflect_status(&observed)?;
        let health = if interpreter.interpret_health(&observed)? {
            "Healthy"
        } else {
            "Unhealthy"
        };
        items.push(AggregatedStatusItem {
            cluster_name: target.name.clone(),
            status: Some(status),
            applied: true,
            health: health.into(),
        });
    }
    items.sort_by(|a, b| a.cluster_name.cmp(&b.cluster_name));
    Ok(ResourceBinding {
        name: format!("{name}-mongodb"),
        clusters: targets,
        aggregated_status: items,
    })
}

/// The template's status as Karmada writes it back: the chart's `AggregateStatus`.
pub fn aggregate(
    namespace: &str,
    name: &str,
    template: &MongoDBTemplate,
    binding: &ResourceBinding,
    interpreter: &Interpreter,
) -> Result<Json> {
    let items: Vec<Json> = binding
        .aggregated_status
        .iter()
        .map(serde_json::to_value)
        .collect::<serde_json::Result<_>>()?;
    let aggregated = interpreter
        .aggregate_status(&mongodb_template_object(namespace, name, template), &items)?;
    Ok(aggregated.get("status").cloned().unwrap_or(Json::Null))
}
