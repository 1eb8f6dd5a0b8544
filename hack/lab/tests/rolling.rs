//! Rolling restarts: a change of the member pods' template (resources, image,
//! custom mongod configuration) that Karmada propagates to every cluster at
//! once must restart the members of the replica set ONE at a time across all
//! clusters — secondaries first, the primary last and only after a step-down —
//! while a w:"majority" writer runs and loses nothing.
//!
//! This module holds the scenarios and the changes they make (the instance
//! requests they submit); [`watch`] holds the observer that judges each roll,
//! independently of the operators' own status.
//!
//! Each test runs its own lab (numbers 70–73) on a 2+2+1 split and shuts it
//! down.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::harness::*;
use federation_sim::control_plane::{Split, Submission, ToSubmission};
use federation_sim::karmada::{Kind, OverridePolicy, Overrider, ResourceRef};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use lab::lab::Lab;
use lab::observe::{self};
use mongodb::bson::doc;
use serde_json::{json, Value};

pub(crate) mod watch;

pub(crate) use watch::{acknowledged_between, longest_write_gap, rolled_status};
use watch::{phase, raw_objects, seconds, Bounds, Roll, ROLL_TIMEOUT, STATUS_GRACE};

/// Members per cluster: five voters, two clusters of two and one of one.
const SPLIT: &str = "a=2,b=2,c=1";
/// How long raising the FCV may take once asked.
const FCV_TIMEOUT: Duration = Duration::from_secs(60);

/// Starts the lab's control plane and the instance `submission` on a 2+2+1
/// split; waits until the set is ready everywhere.
async fn ready_instance(lab: &Lab, submission: &Submission, started: Instant) -> Outcome {
    let name = submission.object.name.clone();
    lab.control_plane()
        .apply(submission)
        .await
        .map_err(fail("apply"))?;
    observe::wait_ready(
        &lab.control_plane(),
        "default",
        &name,
        &Split::parse(SPLIT).map_err(fail("split"))?,
        READY_TIMEOUT,
        |_| {},
    )
    .await
    .map_err(fail(SPLIT))?;
    phase(started, &format!("{name}: {SPLIT} everywhere"));
    Ok(())
}

/// The instance request with other mongod resources (FedState's
/// `spec.resource`, which its control plane propagates to every cluster).
fn with_resources(name: &str, cpu: &str, memory: &str) -> Submission {
    sized(name, SPLIT, cpu, memory)
}

/// An instance of `split` with mongod requests `cpu` / `memory` (limits of
/// 2 CPUs and `memory`).
pub(crate) fn sized(name: &str, split: &str, cpu: &str, memory: &str) -> Submission {
    let mut submission = request(name, split).to_submission();
    let quantities = |cpu: &str| {
        BTreeMap::from([
            ("cpu".to_string(), cpu.to_string()),
            ("memory".to_string(), memory.to_string()),
        ])
    };
    submission.object.spec.resource.limits = quantities("2");
    submission.object.spec.resource.requests = quantities(cpu);
    submission
}

/// A user's OverridePolicy adding `value` at `path` of the instance's
/// `MongoDB` in every cluster.
pub(crate) fn everywhere(name: &str, path: &str, value: Value) -> OverridePolicy {
    OverridePolicy {
        labels: Default::default(),
        resource: ResourceRef::new(Kind::MongoDB, name),
        clusters: None,
        overrider: Overrider::AddPath {
            path: path.to_string(),
            value,
        },
    }
}

// ------------------------------------------------------------ 1: resources

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resources_change_restarts_one_member_of_the_set_at_a_time_the_primary_last() {
    let started = Instant::now();
    scenario(70, 3, async |lab| {
        let _passes = ControlPlanePasses::start(lab);
        let name = "resources";
        ready_instance(lab, &with_resources(name, "1", "512Mi"), started).await?;
        let mut roll = Roll::begin(lab, name, started).await?;

        // FedState's spec.resource changes: its control plane replaces the
        // template and Karmada writes every cluster's MongoDB at once.
        roll.changing();
        lab.control_plane()
            .apply(&with_resources(name, "1500m", "1Gi"))
            .await
            .map_err(fail("apply the new resources"))?;
        phase(started, "resources: requests 1500m / 1Gi applied");
        if roll.wait_new_template(lab).await? {
            roll.wait_rolled(lab).await?;
        }
        roll.finish(lab, &Bounds::of(&request(name, SPLIT).settings))
            .await
    })
    .await;
    phase(started, "resources: done");
}

// ---------------------------------------------------------- 2: image 7 → 8

/// `buildInfo.version` and the FCV of every member, read from each member
/// directly; an arbiter's FCV is `None`: it holds no users, and answers only
/// what needs no authentication (`hello`, `buildInfo`).
pub(crate) async fn versions(
    lab: &Lab,
    name: &str,
    hosts: &[String],
) -> Result<Vec<(String, String, Option<String>)>, String> {
    let mut found = Vec::new();
    for host in hosts {
        let anonymous = anonymous_direct(host)?;
        let admin = anonymous.database("admin");
        let hello = admin
            .run_command(doc! {"hello": 1})
            .await
            .map_err(fail("hello"))?;
        let build = admin
            .run_command(doc! {"buildInfo": 1})
            .await
            .map_err(fail("buildInfo"))?;
        let version = build.get_str("version").unwrap_or_default().to_string();
        if hello.get_bool("arbiterOnly").unwrap_or(false) {
            found.push((host.clone(), version, None));
            continue;
        }
        let client = mongo(lab, name, std::slice::from_ref(host), true).await?;
        let fcv = client
            .database("admin")
            .run_command(doc! {"getParameter": 1, "featureCompatibilityVersion": 1})
            .await
            .map_err(fail("getParameter featureCompatibilityVersion"))?;
        let fcv = fcv
            .get_document("featureCompatibilityVersion")
            .ok()
            .and_then(|f| f.get_str("version").ok())
            .unwrap_or_default()
            .to_string();
        found.push((host.clone(), version, Some(fcv)));
    }
    Ok(found)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_upgrade_to_8_0_rolls_one_member_at_a_time_and_raises_the_fcv_only_when_asked() {
    let started = Instant::now();
    scenario(71, 3, async |lab| {
        let _passes = ControlPlanePasses::start(lab);
        let name = "upgrade";
        let control_plane = lab.control_plane();
        ready_instance(lab, &request(name, SPLIT).to_submission(), started).await?;
        let mut roll = Roll::begin(lab, name, started).await?;
        let hosts: Vec<String> = roll.members.iter().map(|m| m.host.clone()).collect();
        let first = versions(lab, name, &hosts).await?;
        if first
            .iter()
            .any(|(_, version, fcv)| !version.starts_with("7.0") || fcv.as_deref() != Some("7.0"))
        {
            return Err(format!(
                "the set does not start on 7.0 with FCV 7.0: {first:?}"
            ));
        }

        // FedState never propagates an image change alone (it replaces the
        // template only when members or resources change): a user upgrades
        // with an OverridePolicy on the MongoDB in every cluster.
        roll.changing();
        control_plane
            .apply_override_policy(
                "default",
                name,
                &format!("{name}-mongo-8-0"),
                everywhere(name, "/spec/image", json!("mongo:8.0")),
            )
            .await
            .map_err(fail("OverridePolicy image"))?;
        phase(started, "upgrade: image mongo:8.0 in every cluster");
        if roll.wait_new_template(lab).await? {
            roll.wait_rolled(lab).await?;
        }
        let upgraded = versions(lab, name, &hosts).await?;
        eprintln!("after the roll (host, buildInfo.version, FCV): {upgraded:?}");
        let not_8: Vec<&(String, String, Option<String>)> = upgraded
            .iter()
            .filter(|(_, version, _)| !version.starts_with("8.0"))
            .collect();
        if !not_8.is_empty() {
            roll.failures.push(format!(
                "after the roll, members not on 8.0 (host, buildInfo.version, FCV): {not_8:?}"
            ));
        }
        let raised: Vec<&(String, String, Option<String>)> = upgraded
            .iter()
            .filter(|(_, _, fcv)| fcv.as_deref() != Some("7.0"))
            .collect();
        if !raised.is_empty() {
            roll.failures
                .push(format!("the FCV left 7.0 before it was asked: {raised:?}"));
        }

        // The user asks for FCV 8.0, again with an OverridePolicy.
        control_plane
            .apply_override_policy(
                "default",
                name,
                &format!("{name}-fcv-8-0"),
                everywhere(name, "/spec/featureCompatibilityVersion", json!("8.0")),
            )
            .await
            .map_err(fail("OverridePolicy featureCompatibilityVersion"))?;
        phase(
            started,
            "upgrade: featureCompatibilityVersion 8.0 in every cluster",
        );
        let deadline = Instant::now() + FCV_TIMEOUT;
        loop {
            let now = versions(lab, name, &hosts).await?;
            if now.iter().all(|(_, _, fcv)| fcv.as_deref() == Some("8.0")) {
                phase(started, "upgrade: FCV 8.0 on every member");
                // The status says so from the next pass on (a status write
                // wakes no pass): within STATUS_GRACE, as for the roll.
                let reported = Instant::now() + STATUS_GRACE;
                while rolled_status(lab, name).await?.is_err() && Instant::now() < reported {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                phase(started, "upgrade: every cluster reports it");
                break;
            }
            if Instant::now() > deadline {
                roll.failures.push(format!(
                    "FCV 8.0 was asked in every cluster, not on every member after {} (host, \
                     buildInfo.version, FCV): {now:?}",
                    seconds(FCV_TIMEOUT)
                ));
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        roll.finish(lab, &Bounds::of(&request(name, SPLIT).settings))
            .await
    })
    .await;
    phase(started, "upgrade: done");
}

// ------------------------------------------------------- 3: custom config

/// The instance with FedState's `spec.config.configRef` naming a ConfigMap
/// the user created in the control plane with `mongod.yaml` (the key the
/// operator mounts as mongod's `--config` file): FedState propagates it to
/// every cluster with members, the `MongoDB` names it in `customConfigRef`.
fn with_custom_config(name: &str, mongod_yaml: &str) -> Submission {
    let mut submission = request(name, SPLIT).to_submission();
    submission.object.spec.config.config_ref = Some(format!("{name}-custom"));
    submission.custom_config = Some(BTreeMap::from([(
        mongodb_member_operator::build::CUSTOM_CONFIG_KEY.to_string(),
        mongod_yaml.to_string(),
    )]));
    submission
}

/// Waits until every cluster's `<name>-custom` ConfigMap holds `mongod_yaml`.
async fn wait_custom_config(lab: &Lab, name: &str, mongod_yaml: &str) -> Outcome {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut seen = Vec::new();
        for cluster in lab.clusters() {
            let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
            let data = config_maps
                .get_opt(&format!("{name}-custom"))
                .await
                .map_err(fail("ConfigMap"))?
                .and_then(|c| c.data)
                .and_then(|d| {
                    d.get(mongodb_member_operator::build::CUSTOM_CONFIG_KEY)
                        .cloned()
                });
            seen.push(data);
        }
        if seen.iter().all(|d| d.as_deref() == Some(mongod_yaml)) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "the clusters' {name}-custom ConfigMaps hold {seen:?}, not {mongod_yaml:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_config_change_rolls_the_members_one_at_a_time() {
    let started = Instant::now();
    scenario(72, 3, async |lab| {
        let _passes = ControlPlanePasses::start(lab);
        let name = "custom";
        let (old, new) = (
            "operationProfiling:\n  slowOpThresholdMs: 100\n",
            "operationProfiling:\n  slowOpThresholdMs: 250\n",
        );
        ready_instance(lab, &with_custom_config(name, old), started).await?;
        wait_custom_config(lab, name, old).await?;
        let mut roll = Roll::begin(lab, name, started).await?;
        let objects = raw_objects(lab, name).await?;
        if objects
            .iter()
            .any(|(_, o)| o["spec"]["customConfigRef"] != json!(format!("{name}-custom")))
        {
            return Err(format!(
                "the MongoDBs do not name {name}-custom in spec.customConfigRef"
            ));
        }

        // The user edits the ConfigMap in the control plane: only its content
        // changes (customConfigRef is immutable), in every cluster at once.
        roll.changing();
        lab.control_plane()
            .apply(&with_custom_config(name, new))
            .await
            .map_err(fail("apply the new custom config"))?;
        wait_custom_config(lab, name, new).await?;
        phase(
            started,
            "custom: every cluster's ConfigMap has the new mongod.yaml",
        );
        if roll.wait_new_template(lab).await? {
            roll.wait_rolled(lab).await?;
        }
        roll.finish(lab, &Bounds::of(&request(name, SPLIT).settings))
            .await
    })
    .await;
    phase(started, "custom: done");
}

// ------------------------------------------------ 4: an operator killed

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_roll_completes_safely_when_the_primary_clusters_operator_is_killed_mid_roll() {
    let started = Instant::now();
    scenario(73, 3, async |lab| {
        let _passes = ControlPlanePasses::start(lab);
        let name = "killed";
        ready_instance(lab, &with_resources(name, "1", "512Mi"), started).await?;
        // The primary is in cluster a (index 0), which also hosts a secondary.
        let primary_cluster = 0;
        let primary = member_host(lab, primary_cluster, name, 0).await?;
        make_primary(lab, name, &primary).await?;
        phase(
            started,
            &format!("killed: {primary} (cluster a) is primary"),
        );
        let mut roll = Roll::begin(lab, name, started).await?;

        roll.changing();
        lab.control_plane()
            .apply(&with_resources(name, "1500m", "1Gi"))
            .await
            .map_err(fail("apply the new resources"))?;
        phase(started, "killed: requests 1500m / 1Gi applied");

        // As soon as a member of cluster a goes down for its restart, cluster
        // a's operator dies (SIGKILL) and comes back 3 s later.
        let of_a: BTreeSet<String> = roll
            .members
            .iter()
            .filter(|m| m.cluster == primary_cluster)
            .map(|m| m.host.clone())
            .collect();
        let deadline = Instant::now() + ROLL_TIMEOUT;
        let stopped = loop {
            let samples = roll.sampler.samples();
            if let Some(stop) = roll
                .stops(lab, &samples)
                .into_iter()
                .find(|stop| of_a.contains(&stop.host))
            {
                break Some(stop);
            }
            if Instant::now() > deadline {
                break None;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        match stopped {
            Some(stop) => {
                lab.kill_operator(primary_cluster)
                    .await
                    .map_err(fail("kill"))?;
                phase(
                    started,
                    &format!(
                        "killed: a member of cluster a stopped ({}); cluster a's operator killed",
                        stop.describe(&roll)
                    ),
                );
                tokio::time::sleep(Duration::from_secs(3)).await;
                lab.restart_operator(primary_cluster)
                    .map_err(fail("restart"))?;
                phase(started, "killed: cluster a's operator restarted");
            }
            None => roll.failures.push(format!(
                "no member of cluster a went down within {} of the change",
                seconds(ROLL_TIMEOUT)
            )),
        }
        if roll.wait_new_template(lab).await? {
            roll.wait_rolled(lab).await?;
        }
        roll.finish(lab, &Bounds::of(&request(name, SPLIT).settings))
            .await
    })
    .await;
    phase(started, "killed: done");
}
