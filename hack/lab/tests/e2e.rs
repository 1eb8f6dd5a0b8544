//! End-to-end: the real operator binary, once per simulated cluster, forms and
//! changes one replica set across clusters, driven by the control-plane stand-in,
//! and reports it through `kubectl`. Each test runs its own lab on its own
//! 127.n.*.* addresses and shuts everything down.

use std::time::{Duration, Instant};

use crate::harness::*;
use federation_sim::control_plane::{Split, ToSubmission};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret};
use kube::Api;
use lab::lab::Lab;
use lab::observe;
use mongodb::bson::{doc, Document};
use mongodb::options::{ClientOptions, Credential, ServerAddress};
use mongodb_member_operator::api::MongoDB;

fn voters(config: &Document) -> usize {
    config
        .get_array("members")
        .map(|m| {
            m.iter()
                .filter_map(|m| m.as_document())
                .filter(|m| m.get_i32("votes").unwrap_or(1) > 0)
                .count()
        })
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_split_forms_one_replica_set_over_three_clusters_readable_with_kubectl() {
    scenario(41, 3, async |lab| {
        let control_plane = lab.control_plane();
        let split = Split::parse("a=2,b=2,c=1").unwrap();
        control_plane
            .apply(&request("demo", "a=2,b=2,c=1"))
            .await
            .map_err(|e| e.to_string())?;
        // The rsInit cluster's operator dies while the set forms, and comes back.
        tokio::time::sleep(Duration::from_secs(3)).await;
        lab.kill_operator(0).await.map_err(fail("kill"))?;
        tokio::time::sleep(Duration::from_secs(2)).await;
        lab.restart_operator(0).map_err(fail("restart"))?;
        let views = observe::wait_ready(
            &control_plane,
            "default",
            "demo",
            &split,
            READY_TIMEOUT,
            |_| {},
        )
        .await
        .map_err(|e| e.to_string())?;
        let config = config(
            lab,
            "demo",
            &views[0]
                .replset
                .iter()
                .map(|(host, _)| host.clone())
                .collect::<Vec<_>>(),
        )
        .await?;
        if version(&config) >= 10_000 {
            return Err(format!(
                "config version {} betrays a forced reconfig",
                version(&config)
            ));
        }
        let initiated = lab
            .kubectl(
                "a",
                &[
                    "get",
                    "events",
                    "--field-selector",
                    "reason=Initiate",
                    "-o",
                    "name",
                ],
            )
            .await
            .map_err(fail("events"))?;
        if initiated.lines().count() != 1 {
            return Err(format!(
                "expected exactly one Initiate Event, found: {initiated:?}"
            ));
        }
        let mut ids = std::collections::BTreeSet::new();
        for context in ["a", "b", "c"] {
            ids.insert(
                lab.kubectl(
                    context,
                    &[
                        "get",
                        "mongodb",
                        "demo",
                        "-o",
                        "jsonpath={.status.replicaSetId}",
                    ],
                )
                .await
                .map_err(fail("replicaSetId"))?,
            );
        }
        if ids.len() != 1 || replica_set_id(&config).as_ref() != ids.iter().next() {
            return Err(format!(
                "the clusters report replicaSetIds {ids:?}, the set has {:?}",
                replica_set_id(&config)
            ));
        }
        for view in &views {
            if view.replset.len() != 5 {
                return Err(format!(
                    "cluster {} lists {} members",
                    view.cluster,
                    view.replset.len()
                ));
            }
        }
        let primaries = lab.network().primaries();
        if primaries.len() != 1 {
            return Err(format!("expected exactly one primary, found {primaries:?}"));
        }
        for (context, ready) in [("a", "2/2"), ("b", "2/2"), ("c", "1/1")] {
            let table = lab
                .kubectl(context, &["get", "mongodb"])
                .await
                .map_err(|e| e.to_string())?;
            for column in ["STATE", "MEMBERS", "PRIMARY", "AGE", "Running", ready] {
                if !table.contains(column) {
                    return Err(format!(
                        "kubectl get mongodb in {context} lacks {column}:\n{table}"
                    ));
                }
            }
            let described = lab
                .kubectl(context, &["describe", "mongodb", "demo"])
                .await
                .map_err(|e| e.to_string())?;
            for needle in ["Ready", "ReplicaSetInitialized", "MembersInSync", "Replset"] {
                if !described.contains(needle) {
                    return Err(format!(
                        "kubectl describe mongodb in {context} lacks {needle}:\n{described}"
                    ));
                }
            }
        }
        let described = lab
            .kubectl("a", &["describe", "mongodb", "demo"])
            .await
            .map_err(|e| e.to_string())?;
        if !described.contains("Initiate") {
            return Err(format!(
                "the rsInit cluster's Events lack Initiate:\n{described}"
            ));
        }
        the_control_plane_propagated_equal_node_ports_and_a_correct_hostconf(lab, "demo", &split)
            .await?;
        the_operator_users_exist(lab, "demo").await?;
        no_secret_appears_in_logs_events_or_status(lab, "demo").await
    })
    .await;
}

/// The contract's objects: `<name>-mongodb-<i>` Services with the same nodePort
/// for index `i` in every cluster, and a hostconf listing exactly `VIP:nodePort`
/// of every member.
async fn the_control_plane_propagated_equal_node_ports_and_a_correct_hostconf(
    lab: &Lab,
    name: &str,
    split: &Split,
) -> Outcome {
    let mut expected = std::collections::BTreeSet::new();
    let mut ports = std::collections::BTreeMap::new();
    for (index, cluster) in lab.clusters().iter().enumerate() {
        for member in 0..split.members_of(&cluster.name) {
            let host = member_host(lab, index, name, member).await?;
            let port = host.rsplit(':').next().unwrap_or_default().to_string();
            if let Some(other) = ports.insert(member, port.clone()) {
                if other != port {
                    return Err(format!(
                        "member index {member} has nodePort {port} in {} but {other} elsewhere",
                        cluster.name
                    ));
                }
            }
            expected.insert(host);
        }
    }
    for cluster in lab.clusters() {
        let config_maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
            Api::namespaced(cluster.client.clone(), "default");
        let hostconf = config_maps
            .get(&format!("{name}-hostconf"))
            .await
            .map_err(fail("hostconf"))?;
        let parsed = mongodb_member_operator::hostconf::HostConf::from_config_map_data(
            &hostconf.data.unwrap_or_default(),
        )
        .map_err(fail("hostconf parse"))?;
        let listed: std::collections::BTreeSet<String> = parsed
            .members
            .iter()
            .map(|m| m.address.to_string())
            .collect();
        if listed != expected {
            return Err(format!(
                "hostconf in {} lists {listed:?}, expected {expected:?}",
                cluster.name
            ));
        }
    }
    Ok(())
}

/// clusterAdmin and clusterMonitor are created through the set.
async fn the_operator_users_exist(lab: &Lab, name: &str) -> Outcome {
    let hosts = hosts_of(lab, 0, name).await?;
    let client = mongo(lab, name, &hosts, false).await?;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let users = client
            .database("admin")
            .run_command(doc! {"usersInfo": 1})
            .await
            .map_err(fail("usersInfo"))?;
        let names: Vec<String> = users
            .get_array("users")
            .map(|u| {
                u.iter()
                    .filter_map(|u| u.as_document()?.get_str("user").ok().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        if names.iter().any(|n| n == "clusterAdmin") && names.iter().any(|n| n == "clusterMonitor")
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("operator users missing, found {names:?}"));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The root password, the keyfile and the derived user passwords appear in no
/// operator log, no Event and no status.
async fn no_secret_appears_in_logs_events_or_status(lab: &Lab, name: &str) -> Outcome {
    let secrets: Api<Secret> = Api::namespaced(lab.clusters()[0].client.clone(), "default");
    let mut needles = Vec::new();
    for secret_name in [
        format!("{name}-credentials"),
        format!("{name}-admin-credentials"),
        format!("{name}-monitor-credentials"),
    ] {
        let secret = secrets.get(&secret_name).await.map_err(fail("secret"))?;
        for (key, value) in secret.data.unwrap_or_default() {
            if key == "password" || key == "keyfile" {
                let text = String::from_utf8_lossy(&value.0).into_owned();
                needles.push(text.chars().take(24).collect::<String>());
            }
        }
    }
    if needles.len() != 4 {
        return Err(format!(
            "expected 4 secret values to look for, found {}",
            needles.len()
        ));
    }
    for (index, cluster) in lab.clusters().iter().enumerate() {
        let log = std::fs::read_to_string(lab.operator_log(index)).map_err(fail("log"))?;
        let events = lab
            .kubectl(&cluster.name, &["get", "events", "-A", "-o", "json"])
            .await
            .map_err(fail("events"))?;
        let status = lab
            .kubectl(&cluster.name, &["get", "mongodb", name, "-o", "json"])
            .await
            .map_err(fail("status"))?;
        let status = status
            .split("\"status\"")
            .nth(1)
            .unwrap_or_default()
            .to_string();
        for (what, text) in [
            ("operator log", &log),
            ("Events", &events),
            ("status", &status),
        ] {
            if needles.iter().any(|needle| text.contains(needle.as_str())) {
                return Err(format!(
                    "a secret value appears in the {what} of cluster {}",
                    cluster.name
                ));
            }
        }
        if !events.contains("Initiate") && index == 0 {
            return Err(
                "the Events of cluster a lack Initiate: the scan would prove nothing".into(),
            );
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaling_out_adds_members_one_at_a_time_even_across_an_operator_restart() {
    scenario(42, 4, async |lab| {
        let control_plane = lab.control_plane();
        let passes = ControlPlanePasses::start(lab);
        control_plane
            .apply(&request("grow", "a=2,b=2,c=1"))
            .await
            .map_err(fail("apply"))?;
        observe::wait_ready(
            &control_plane,
            "default",
            "grow",
            &Split::parse("a=2,b=2,c=1").unwrap(),
            READY_TIMEOUT,
            |_| {},
        )
        .await
        .map_err(fail("2+2+1"))?;
        let hosts = hosts_of(lab, 0, "grow").await?;
        let first = config(lab, "grow", &hosts).await?;

        // FedState (d28f763) cannot scale out only some clusters: it rewrites
        // every member Service's policy with just the clusters that grow, which
        // withdraws the others' Services (hack/lab/README.md). This test is about
        // the operator's scale-out, so it runs with the lab-only correction.
        control_plane
            .apply(
                &request("grow", "a=3,b=2,c=2")
                    .to_submission()
                    .keep_unchanged_clusters_on_scale_up(),
            )
            .await
            .map_err(fail("scale"))?;
        lab.kill_operator(0).await.map_err(fail("kill"))?;
        tokio::time::sleep(Duration::from_secs(2)).await;
        lab.restart_operator(0).map_err(fail("restart"))?;
        observe::wait_ready(
            &control_plane,
            "default",
            "grow",
            &Split::parse("a=3,b=2,c=2").unwrap(),
            READY_TIMEOUT,
            |_| {},
        )
        .await
        .map_err(fail("3+2+2"))?;

        control_plane
            .apply(
                &request("grow", "a=3,b=2,c=2,d=1")
                    .to_submission()
                    .keep_unchanged_clusters_on_scale_up(),
            )
            .await
            .map_err(fail("fourth cluster"))?;
        observe::wait_ready(
            &control_plane,
            "default",
            "grow",
            &Split::parse("a=3,b=2,c=2,d=1").unwrap(),
            READY_TIMEOUT,
            |_| {},
        )
        .await
        .map_err(fail("3+2+2+1"))?;
        drop(passes);

        let hosts = hosts_of(lab, 3, "grow").await?;
        let last = config(lab, "grow", &hosts).await?;
        if voters(&last) != 7 {
            return Err(format!(
                "8 members should have 7 voters, found {}",
                voters(&last)
            ));
        }
        if replica_set_id(&first) != replica_set_id(&last) {
            return Err("the replicaSetId changed: the set was initiated twice".into());
        }
        if version(&last) >= 10_000 {
            return Err(format!(
                "config version {} betrays a forced reconfig",
                version(&last)
            ));
        }
        Ok(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaling_in_steps_the_primary_down_first_and_loses_no_majority_write() {
    scenario(43, 3, async |lab| {
        let control_plane = lab.control_plane();
        let passes = ControlPlanePasses::start(lab);
        control_plane
            .apply(&request("shrink", "a=2,b=2,c=1"))
            .await
            .map_err(fail("apply"))?;
        observe::wait_ready(
            &control_plane,
            "default",
            "shrink",
            &Split::parse("a=2,b=2,c=1").unwrap(),
            READY_TIMEOUT,
            |_| {},
        )
        .await
        .map_err(fail("2+2+1"))?;
        let leaving = member_host(lab, 0, "shrink", 1).await?;
        make_primary(lab, "shrink", &leaving).await?;
        let hosts = hosts_of(lab, 0, "shrink").await?;
        let first = config(lab, "shrink", &hosts).await?;
        let writer = MajorityWriter::start(lab, "shrink", &hosts).await?;
        tokio::time::sleep(Duration::from_secs(2)).await;

        control_plane
            .apply(&request("shrink", "a=1,b=2,c=1"))
            .await
            .map_err(fail("scale in"))?;
        tokio::time::sleep(Duration::from_secs(1)).await;
        lab.kill_operator(0).await.map_err(fail("kill"))?;
        tokio::time::sleep(Duration::from_secs(2)).await;
        lab.restart_operator(0).map_err(fail("restart"))?;
        observe::wait_ready(
            &control_plane,
            "default",
            "shrink",
            &Split::parse("a=1,b=2,c=1").unwrap(),
            READY_TIMEOUT,
            |_| {},
        )
        .await
        .map_err(fail("1+2+1"))?;
        if let Some(writer) = writer {
            writer.stop_and_check().await?;
        }
        drop(passes);

        let remaining = hosts_of(lab, 1, "shrink").await?;
        if remaining.contains(&leaving) || remaining.len() != 4 {
            return Err(format!("{leaving} should have left: {remaining:?}"));
        }
        let a = lab.clusters()[0].client.clone();
        let stateful_sets: Api<StatefulSet> = Api::namespaced(a.clone(), "default");
        if stateful_sets
            .get_opt("shrink-mongodb-1")
            .await
            .map_err(fail("sts"))?
            .is_some()
        {
            return Err("the StatefulSet of the removed member still exists".into());
        }
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(a, "default");
        if claims
            .get_opt("data-shrink-mongodb-1-0")
            .await
            .map_err(fail("pvc"))?
            .is_none()
        {
            return Err(
                "the PVC of the removed member was deleted despite the Retain policy".into(),
            );
        }
        let described = lab
            .kubectl("a", &["describe", "mongodb", "shrink"])
            .await
            .map_err(fail("describe"))?;
        // An Event is published once its step is done: the RemoveMember of a
        // removal the kill interrupted right after its reconfig is lost (the
        // restarted operator finds the member gone and goes on to the
        // StatefulSet), as an Event is lost with any operator killed then.
        // The removal itself is checked above; these two are always there.
        for reason in ["StepDown", "DeleteStatefulSet"] {
            if !described.contains(reason) {
                return Err(format!(
                    "no {reason} Event in kubectl describe:\n{described}"
                ));
            }
        }
        let last = config(lab, "shrink", &remaining).await?;
        if replica_set_id(&first) != replica_set_id(&last) || version(&last) >= 10_000 {
            return Err("second initiate or forced reconfig detected".into());
        }
        Ok(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_holding_the_primary_gives_up_all_its_members_across_an_operator_restart() {
    scenario(44, 3, async |lab| {
        let control_plane = lab.control_plane();
        let passes = ControlPlanePasses::start(lab);
        control_plane
            .apply(&request("leave", "a=2,b=2,c=1"))
            .await
            .map_err(fail("apply"))?;
        observe::wait_ready(
            &control_plane,
            "default",
            "leave",
            &Split::parse("a=2,b=2,c=1").unwrap(),
            READY_TIMEOUT,
            |_| {},
        )
        .await
        .map_err(fail("2+2+1"))?;
        let leaving = member_host(lab, 2, "leave", 0).await?;
        make_primary(lab, "leave", &leaving).await?;
        let first = config(lab, "leave", &hosts_of(lab, 0, "leave").await?).await?;
        // As a FedState user would: scale only once the MultiCloudMongoDB reports
        // the set (FedState's scale-down reads its own, possibly stale, status).
        control_plane
            .settled("default", "leave", READY_TIMEOUT)
            .await
            .map_err(fail("FedState's status"))?;
        control_plane
            .apply(&request("leave", "a=2,b=2,c=0"))
            .await
            .map_err(fail("scale in"))?;
        lab.kill_operator(2).await.map_err(fail("kill"))?;
        tokio::time::sleep(Duration::from_secs(2)).await;
        lab.restart_operator(2).map_err(fail("restart"))?;
        observe::wait_ready(
            &control_plane,
            "default",
            "leave",
            &Split::parse("a=2,b=2").unwrap(),
            READY_TIMEOUT,
            |_| {},
        )
        .await
        .map_err(fail("2+2"))?;
        drop(passes);
        let remaining = hosts_of(lab, 0, "leave").await?;
        if remaining.contains(&leaving) || remaining.len() != 4 {
            return Err(format!("{leaving} should have left: {remaining:?}"));
        }
        let last = config(lab, "leave", &remaining).await?;
        if replica_set_id(&first) != replica_set_id(&last) || version(&last) >= 10_000 {
            return Err("second initiate or forced reconfig detected".into());
        }
        let stateful_sets: Api<StatefulSet> =
            Api::namespaced(lab.clusters()[2].client.clone(), "default");
        let deadline = Instant::now() + Duration::from_secs(60);
        while stateful_sets
            .get_opt("leave-mongodb-0")
            .await
            .map_err(fail("sts"))?
            .is_some()
        {
            if Instant::now() > deadline {
                return Err("cluster c still runs its StatefulSet".into());
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        Ok(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_holds_every_change_and_deleting_in_one_cluster_removes_only_its_members() {
    scenario(45, 3, async |lab| {
        let control_plane = lab.control_plane();
        let split = Split::parse("a=2,b=2,c=1").unwrap();
        control_plane
            .apply(&request("part", "a=2,b=2,c=1"))
            .await
            .map_err(fail("apply"))?;
        observe::wait_ready(
            &control_plane,
            "default",
            "part",
            &split,
            READY_TIMEOUT,
            |_| {},
        )
        .await
        .map_err(fail("2+2+1"))?;

        lab.kubectl(
            "c",
            &[
                "patch",
                "mongodb",
                "part",
                "--type",
                "merge",
                "-p",
                r#"{"spec":{"pause":true,"members":0}}"#,
            ],
        )
        .await
        .map_err(fail("pause"))?;
        let deadline = Instant::now() + Duration::from_secs(60);
        while lab
            .kubectl(
                "c",
                &["get", "mongodb", "part", "-o", "jsonpath={.status.state}"],
            )
            .await
            .map_err(fail("state"))?
            != "Pause"
        {
            if Instant::now() > deadline {
                return Err("status.state never became Pause".into());
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
        if hosts_of(lab, 0, "part").await?.len() != 5 {
            return Err("a paused cluster's member left the set".into());
        }
        lab.kubectl(
            "c",
            &[
                "patch",
                "mongodb",
                "part",
                "--type",
                "merge",
                "-p",
                r#"{"spec":{"pause":false,"members":1}}"#,
            ],
        )
        .await
        .map_err(fail("unpause"))?;
        observe::wait_ready(
            &control_plane,
            "default",
            "part",
            &split,
            READY_TIMEOUT,
            |_| {},
        )
        .await
        .map_err(fail("after pause"))?;

        lab.kubectl("b", &["delete", "mongodb", "part", "--wait=false"])
            .await
            .map_err(fail("kubectl delete"))?;
        let api: Api<MongoDB> = Api::namespaced(lab.clusters()[1].client.clone(), "default");
        let deadline = Instant::now() + READY_TIMEOUT;
        while api.get_opt("part").await.map_err(fail("get"))?.is_some() {
            if Instant::now() > deadline {
                return Err("the MongoDB in cluster b was never finalized".into());
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let remaining = hosts_of(lab, 0, "part").await?;
            let vip_b = lab.clusters()[1].vip.to_string();
            if remaining.len() == 3
                && !remaining
                    .iter()
                    .any(|h| h.starts_with(&format!("{vip_b}:")))
            {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "expected the 3 members of a and c, found {remaining:?}"
                ));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        Ok(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_hostconf_is_reported_in_conditions_and_events() {
    scenario(46, 1, async |lab| {
        let manifest = std::env::temp_dir().join(format!("mmo-orphan-{}.yaml", std::process::id()));
        std::fs::write(
            &manifest,
            "apiVersion: middleware.fedstate.io/v1alpha1\nkind: MongoDB\nmetadata:\n  name: orphan\n  namespace: default\n  labels:\n    app.multicloudmongodb.io/vip: 127.46.1.1\nspec:\n  members: 1\n  rsInit: true\n  rootPassword: not-a-real-one\n",
        )
        .map_err(fail("manifest"))?;
        lab.kubectl("a", &["apply", "-f", &manifest.display().to_string()]).await.map_err(fail("kubectl apply"))?;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let described = lab.kubectl("a", &["describe", "mongodb", "orphan"]).await.map_err(fail("describe"))?;
            let condition = described.contains("HostconfMissing") && described.contains("orphan-hostconf");
            let event = described.lines().any(|l| l.contains("Warning") && l.contains("HostconfMissing"));
            let state = lab.kubectl("a", &["get", "mongodb", "orphan", "-o", "jsonpath={.status.state}"]).await.map_err(fail("get"))?;
            if condition && event && state == "Error" {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("no HostconfMissing condition and Warning Event (state {state:?}):\n{described}"));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    })
    .await;
}

// ------------------------------------------------------ FedState's own payloads

/// `replset` states of a cluster's status: how many members, primaries, arbiters.
pub(crate) fn set_shape(mongodb: &MongoDB) -> (usize, usize, usize) {
    let replset = mongodb
        .status
        .as_ref()
        .map(|s| s.replset.clone())
        .unwrap_or_default();
    let count = |state: &str| replset.iter().filter(|m| m.state_str == state).count();
    let healthy = replset
        .iter()
        .all(|m| matches!(m.state_str.as_str(), "PRIMARY" | "SECONDARY" | "ARBITER"));
    if !healthy {
        return (0, 0, 0);
    }
    (replset.len(), count("PRIMARY"), count("ARBITER"))
}

/// FedState's sample `MultiCloudMongoDB` over `members`, with a 4.4+ image (its
/// default mongo:3.6 is refused) and the lab-only short timeouts.
pub(crate) fn fedstate_sample(
    name: &str,
    members: &[(&str, i32)],
    arbiter: bool,
) -> federation_sim::control_plane::Submission {
    let mut object = federation_sim::fedstate::MultiCloudMongoDB::sample(name, "default", members);
    object.spec.image_setting.image = "mongo:7.0".into();
    object.spec.config.arbiter = arbiter;
    federation_sim::control_plane::Submission {
        object,
        custom_config: None,
        lab: federation_sim::control_plane::LabOnly {
            replica_set_settings: Some(federation_sim::control_plane::lab_replica_set_settings()),
            tls: None,
            deviations: Default::default(),
        },
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fedstates_default_image_is_accepted_and_refused_in_status_saying_what_to_set() {
    scenario(47, 2, async |lab| {
        let mut fedstate_default = request("old", "a=1,b=1");
        // Empty: FedState's webhook defaults spec.imageSetting.image to mongo:3.6.
        fedstate_default.image = String::new();
        lab.control_plane()
            .apply(&fedstate_default)
            .await
            .map_err(fail("apply"))?;
        wait_for(lab, "old", "refused in status", 2, |m| {
            m.spec.image == "mongo:3.6"
                && m.status.as_ref().and_then(|s| s.state)
                    == Some(mongodb_member_operator::api::MongoState::Error)
                && ready_condition(m).is_some_and(|c| c.reason == "UnsupportedMongoDBVersion")
        })
        .await?;
        let (_, mongodb) = statuses(lab, "old").await?.remove(0);
        let message = &ready_condition(&mongodb).unwrap().message;
        for expected in ["mongo:3.6", "4.4.2 or later", "spec.imageSetting.image"] {
            if !message.contains(expected) {
                return Err(format!("the message does not say {expected:?}: {message}"));
            }
        }
        let described = lab
            .kubectl("a", &["describe", "mongodb", "old"])
            .await
            .map_err(fail("describe"))?;
        if !described.contains("UnsupportedMongoDBVersion") {
            return Err(format!("no Warning Event:\n{described}"));
        }
        for cluster in lab.clusters() {
            let stateful_sets: Api<StatefulSet> =
                Api::namespaced(cluster.client.clone(), "default");
            let list = stateful_sets
                .list(&Default::default())
                .await
                .map_err(fail("list"))?;
            if !list.items.is_empty() {
                return Err(format!(
                    "{} runs a StatefulSet for a refused image",
                    cluster.name
                ));
            }
        }
        Ok(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fedstates_sample_payload_forms_a_set_an_application_reaches_as_root_with_majority_writes()
{
    scenario(48, 3, async |lab| {
        let control_plane = lab.control_plane();
        let members = [("a", 2), ("b", 2), ("c", 1)];
        let mut submission = fedstate_sample("sample", &members, false);
        // FedState's sample data plane object carries a config entry too.
        submission.object.spec.config.config_set =
            Some([("LOG_LEVEL".to_string(), "info".to_string())].into());
        control_plane
            .apply(&submission)
            .await
            .map_err(fail("apply"))?;
        observe::wait_ready(
            &control_plane,
            "default",
            "sample",
            &Split::parse("a=2,b=2,c=1").unwrap(),
            READY_TIMEOUT,
            |_| {},
        )
        .await
        .map_err(fail("2+2+1"))?;
        let (_, mongodb) = statuses(lab, "sample").await?.remove(0);
        let config_accepted = mongodb
            .status
            .iter()
            .flat_map(|s| &s.conditions)
            .find(|c| c.type_ == "ConfigAccepted")
            .ok_or("no ConfigAccepted condition")?;
        if config_accepted.status != "False" || !config_accepted.message.contains("LOG_LEVEL") {
            return Err(format!("LOG_LEVEL is not reported: {config_accepted:?}"));
        }
        // The application: FedState's root user and generated rootPassword.
        let password = control_plane
            .root_password("default", "sample")
            .await
            .ok_or("FedState generated no rootPassword")?;
        let hosts = hosts_of(lab, 0, "sample").await?;
        let options = ClientOptions::builder()
            .hosts(
                hosts
                    .iter()
                    .map(|h| ServerAddress::parse(h).unwrap())
                    .collect::<Vec<_>>(),
            )
            .repl_set_name(Some("replset-0".to_string()))
            .credential(
                Credential::builder()
                    .username("root".to_string())
                    .password(password)
                    .source("admin".to_string())
                    .build(),
            )
            .server_selection_timeout(Duration::from_secs(20))
            .build();
        let client = mongodb::Client::with_options(options).map_err(fail("client"))?;
        let orders = client.database("shop").collection::<Document>("orders");
        let majority = mongodb::options::WriteConcern::majority();
        for n in 0..20 {
            orders
                .insert_one(doc! {"n": n})
                .write_concern(majority.clone())
                .await
                .map_err(fail("w:majority insert as root"))?;
        }
        let count = orders
            .count_documents(doc! {})
            .await
            .map_err(fail("count"))?;
        if count != 20 {
            return Err(format!("{count} documents read back, 20 written"));
        }
        Ok(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_arbiter_set_forms_scales_out_and_in_and_survives_losing_its_primary() {
    scenario(49, 3, async |lab| {
        let control_plane = lab.control_plane();
        // FedState puts the arbiter (and rsInit) on the cluster with most members.
        let shape = |data: usize| move |m: &MongoDB| set_shape(m) == (data + 1, 1, 1);
        control_plane
            .apply(&fedstate_sample(
                "arb",
                &[("a", 2), ("b", 1), ("c", 1)],
                true,
            ))
            .await
            .map_err(fail("apply"))?;
        wait_for(lab, "arb", "2+1+1 and an arbiter", 3, shape(4)).await?;
        let hosts = hosts_of(lab, 0, "arb").await?;
        let first = config(lab, "arb", &hosts).await?;
        let writer = MajorityWriter::start(lab, "arb", &hosts).await?;

        control_plane
            .settled("default", "arb", READY_TIMEOUT)
            .await
            .map_err(fail("FedState's status"))?;
        control_plane
            .apply(
                &fedstate_sample("arb", &[("a", 2), ("b", 1), ("c", 2)], true)
                    .keep_unchanged_clusters_on_scale_up(),
            )
            .await
            .map_err(fail("scale out"))?;
        wait_for(lab, "arb", "2+1+2 and an arbiter", 3, shape(5)).await?;

        control_plane
            .settled("default", "arb", READY_TIMEOUT)
            .await
            .map_err(fail("FedState's status"))?;
        control_plane
            .apply(&fedstate_sample(
                "arb",
                &[("a", 2), ("b", 1), ("c", 1)],
                true,
            ))
            .await
            .map_err(fail("scale in"))?;
        wait_for(lab, "arb", "back to 2+1+1 and an arbiter", 3, shape(4)).await?;

        // Lose the primary: kill its mongod; a new primary is elected and the
        // killed member comes back.
        let (_, mongodb) = statuses(lab, "arb").await?.remove(0);
        let primary = mongodb.status.and_then(|s| s.primary).ok_or("no primary")?;
        let mut killed = false;
        for (index, (_, object)) in statuses(lab, "arb").await?.into_iter().enumerate() {
            let local = object.status.iter().flat_map(|s| s.local_members.clone());
            if let Some(member) = local
                .into_iter()
                .find(|m| m.host.as_deref() == Some(primary.as_str()))
            {
                lab.clusters()[index]
                    .node
                    .kill_container("default", &member.pod, "mongod")
                    .await
                    .map_err(fail("kill mongod"))?;
                killed = true;
            }
        }
        if !killed {
            return Err(format!("no cluster runs the primary {primary}"));
        }
        wait_for(lab, "arb", "a new primary", 3, |m| {
            m.status
                .as_ref()
                .and_then(|s| s.primary.as_deref())
                .is_some_and(|p| p != primary)
        })
        .await?;
        wait_for(lab, "arb", "every member back", 3, shape(4)).await?;
        if let Some(writer) = writer {
            writer.stop_and_check().await?;
        }
        let last = config(lab, "arb", &hosts_of(lab, 0, "arb").await?).await?;
        if replica_set_id(&first) != replica_set_id(&last) || version(&last) >= 10_000 {
            return Err("second initiate or forced reconfig detected".into());
        }
        Ok(())
    })
    .await;
}
