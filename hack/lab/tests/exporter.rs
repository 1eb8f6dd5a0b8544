//! An exporter that cannot hurt its member: cluster a enables the metrics
//! exporter with an image that exits at once (the lab's `lab-crash-loop`
//! tag: an exporter that cannot start, is OOM-killed or cannot reach its
//! member). The exporter crash-loops; every member stays reachable at its
//! `VIP:NodePort`, no member pod is replaced, and switching the exporter off
//! removes it. A w:"majority" writer runs throughout and loses nothing.
//!
//! Lab 75.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use federation_sim::karmada::{Kind, OverridePolicy, Overrider, ResourceRef};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use mongodb::bson::doc;
use serde_json::json;

use crate::harness::*;
use lab::lab::Lab;
use lab::observe::SetSampler;
use lab::runtime::CRASH_LOOP_TAG;

const NAME: &str = "metrics";
const SPLIT: &str = "a=2,b=2,c=1";
const SAMPLE_EVERY: Duration = Duration::from_millis(50);
const EXPORTER_CONTAINER: &str = "metrics-exporter";
const WAIT: Duration = Duration::from_secs(120);

/// `spec.metricsExporterSpec` of a's `MongoDB`, by an OverridePolicy.
fn exporter_in_a(spec: serde_json::Value) -> OverridePolicy {
    OverridePolicy {
        labels: Default::default(),
        resource: ResourceRef::new(Kind::MongoDB, NAME),
        clusters: Some(vec!["a".into()]),
        overrider: Overrider::AddPath {
            path: "/spec/metricsExporterSpec".into(),
            value: spec,
        },
    }
}

/// Cluster a's pods: member pods by name with their uid, and the restart
/// count of every exporter container.
async fn pods_of_a(lab: &Lab) -> Result<(BTreeMap<String, String>, Vec<i32>), String> {
    let api: Api<Pod> = Api::namespaced(lab.clusters()[0].client.clone(), "default");
    let mut members = BTreeMap::new();
    let mut exporters = Vec::new();
    for pod in api.list(&Default::default()).await.map_err(fail("pods"))? {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let statuses = pod
            .status
            .and_then(|s| s.container_statuses)
            .unwrap_or_default();
        exporters.extend(
            statuses
                .iter()
                .filter(|c| c.name == EXPORTER_CONTAINER)
                .map(|c| c.restart_count),
        );
        if statuses.iter().any(|c| c.name == "mongod") {
            members.insert(name, pod.metadata.uid.unwrap_or_default());
        }
    }
    Ok((members, exporters))
}

/// Whether every member answers `ping` at its `VIP:NodePort`.
async fn every_member_answers(hosts: &[String]) -> Outcome {
    for host in hosts {
        let client = anonymous_direct(host)?;
        let answered = client.database("admin").run_command(doc! {"ping": 1}).await;
        answered.map_err(|e| format!("{host} does not answer: {e}"))?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_looping_exporter_leaves_its_member_reachable_and_can_be_switched_off() {
    scenario(75, 3, async |lab| {
        let control_plane = lab.control_plane();
        control_plane
            .apply(&request(NAME, SPLIT))
            .await
            .map_err(fail("apply"))?;
        ready(lab, NAME, SPLIT).await?;
        let hosts = hosts_of(lab, 0, NAME).await?;
        let writer = TimedMajorityWriter::start(lab, NAME, &hosts).await?;
        if let Some(writer) = &writer {
            writer.wait_acknowledged(10, Duration::from_secs(60)).await?;
        }
        let sampler = SetSampler::start(lab.network().clone(), hosts.clone(), SAMPLE_EVERY);
        let (members_before, _) = pods_of_a(lab).await?;

        // a's exporter cannot start: it crash-loops.
        let image = format!("percona/mongodb_exporter:{CRASH_LOOP_TAG}");
        control_plane
            .apply_override_policy(
                "default",
                NAME,
                "metrics-exporter-in-a",
                exporter_in_a(json!({"enable": true, "image": image})),
            )
            .await
            .map_err(fail("enable the exporter in a"))?;
        let deadline = Instant::now() + WAIT;
        loop {
            let (_, exporters) = pods_of_a(lab).await?;
            if exporters.len() == 2 && exporters.iter().all(|restarts| *restarts >= 2) {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!("a's exporters did not crash-loop: {exporters:?}"));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        every_member_answers(&hosts).await?;
        if let Some(writer) = &writer {
            let so_far = writer.acknowledged().len();
            writer.wait_acknowledged(so_far + 20, Duration::from_secs(60)).await?;
        }
        let (members_during, _) = pods_of_a(lab).await?;
        if members_during != members_before {
            return Err(format!(
                "a's member pods were replaced for the exporter: {members_before:?} -> {members_during:?}"
            ));
        }

        // Switched off, the exporter goes; the members stay as they are.
        control_plane
            .apply_override_policy(
                "default",
                NAME,
                "metrics-exporter-in-a",
                exporter_in_a(json!({"enable": false})),
            )
            .await
            .map_err(fail("switch the exporter off in a"))?;
        let deadline = Instant::now() + WAIT;
        loop {
            let (members, exporters) = pods_of_a(lab).await?;
            if exporters.is_empty() {
                if members != members_before {
                    return Err(format!("a's member pods changed: {members:?}"));
                }
                break;
            }
            if Instant::now() > deadline {
                return Err(format!("a's exporters stayed after enable: false: {exporters:?}"));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        every_member_answers(&hosts).await?;

        let mut sampler = sampler;
        let samples = sampler.stop();
        let acknowledged = match writer {
            Some(writer) => writer.stop_and_check().await?.len(),
            None => 0,
        };
        eprintln!("{} samples; {acknowledged} majority writes acknowledged, none lost", samples.len());
        one_primary_per_term(&samples)
    })
    .await;
}
