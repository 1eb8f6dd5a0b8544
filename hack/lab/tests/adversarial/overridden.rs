//! One cluster's objects changed by a user's OverridePolicy: its election
//! settings (it says so and never fights the rsInit cluster), a Service
//! selector that makes the API server refuse the member StatefulSet (a
//! removal in the same cluster still completes), and a member Service's
//! nodePort (the member keeps its config entry under the new host).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use super::{condition, events, override_in, phase, ready, same_set, wait_in};
use crate::harness::*;
use federation_sim::karmada::{Kind, ResourceRef};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Service;
use kube::Api;
use lab::lab::Lab;
use mongodb::bson::Document;
use serde_json::json;

fn election_timeout(config: &Document) -> Option<i64> {
    let settings = config.get_document("settings").ok()?;
    settings
        .get_i32("electionTimeoutMillis")
        .map(i64::from)
        .or_else(|_| settings.get_i64("electionTimeoutMillis"))
        .ok()
}

/// Config versions and election timeouts read from the primary every second
/// for `window`.
async fn watch_config(
    lab: &Lab,
    name: &str,
    hosts: &[String],
    window: Duration,
) -> Result<Vec<(i64, Option<i64>)>, String> {
    let until = Instant::now() + window;
    let mut seen = Vec::new();
    while Instant::now() < until {
        let current = config(lab, name, hosts).await?;
        seen.push((version(&current), election_timeout(&current)));
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    Ok(seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_whose_settings_differ_says_so_and_never_fights_the_rs_init_cluster() {
    let started = Instant::now();
    scenario(62, 3, async |lab| {
        let control_plane = lab.control_plane();
        control_plane
            .apply(&request("fight", "a=2,b=2,c=1"))
            .await
            .map_err(fail("apply"))?;
        ready(lab, "fight", "a=2,b=2,c=1").await?;
        phase(started, "fight: a=2,b=2,c=1 everywhere");
        let hosts = hosts_of(lab, 0, "fight").await?;
        let writer = MajorityWriter::start(lab, "fight", &hosts).await?;
        let first = config(lab, "fight", &hosts).await?;
        if election_timeout(&first) != Some(2_000) {
            return Err(format!("the set starts without the lab's 2 s: {first}"));
        }

        // A user's OverridePolicy gives cluster c (not rsInit: a has most
        // members) slower elections; the others keep the lab's 2 s.
        control_plane
            .apply_override_policy(
                "default",
                "fight",
                "fight-slower-elections-in-c",
                override_in(
                    "c",
                    ResourceRef::new(Kind::MongoDB, "fight"),
                    "/spec/replicaSetSettings/electionTimeoutMillis",
                    json!(5_000),
                ),
            )
            .await
            .map_err(fail("OverridePolicy"))?;
        let c = wait_in(lab, 2, "fight", "SettingsMatch=False naming 5000", |m| {
            m.spec.replica_set_settings.election_timeout_millis == 5_000
                && condition(m, "SettingsMatch").is_some_and(|c| {
                    c.status == "False"
                        && c.reason == "SettingsDiffer"
                        && c.message.contains("electionTimeoutMillis 5000")
                        && c.message.contains("(2000, ")
                })
        })
        .await?;
        eprintln!(
            "cluster c: {:?}",
            condition(&c, "SettingsMatch").map(|c| &c.message)
        );
        phase(started, "c reports its settings differ");
        let before = version(&config(lab, "fight", &hosts).await?);
        let seen = watch_config(lab, "fight", &hosts, Duration::from_secs(20)).await?;
        let highest = seen.iter().map(|(v, _)| *v).max().unwrap_or(before);
        eprintln!("20 s with c's 5000: versions {before} → {highest}");
        phase(started, "20 s observed");
        if highest > before + 1 {
            return Err(format!(
                "the config version climbed from {before} to {highest} in 20 s: {seen:?}"
            ));
        }
        if seen.iter().any(|(_, timeout)| *timeout != Some(2_000)) {
            return Err(format!(
                "the set left the rsInit cluster's 2000 ms: {seen:?}"
            ));
        }
        for cluster in [0, 1] {
            wait_in(lab, cluster, "fight", "SettingsMatch=True", |m| {
                condition(m, "SettingsMatch").is_some_and(|c| c.status == "True")
            })
            .await?;
        }

        // The template changes (every cluster gets 3 s; c keeps its own 5 s).
        let mut changed = request("fight", "a=2,b=2,c=1");
        changed.settings.election_timeout_millis = 3_000;
        let before = highest;
        control_plane
            .apply(&changed)
            .await
            .map_err(fail("apply 3 s"))?;
        let deadline = Instant::now() + Duration::from_secs(60);
        while election_timeout(&config(lab, "fight", &hosts).await?) != Some(3_000) {
            if Instant::now() > deadline {
                return Err("the set never took the template's 3000 ms".into());
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let seen = watch_config(lab, "fight", &hosts, Duration::from_secs(10)).await?;
        eprintln!("after the template's 3000: {seen:?} (from version {before})");
        phase(started, "the set took 3000 ms once");
        if seen
            .iter()
            .any(|&(v, timeout)| v != before + 1 || timeout != Some(3_000))
        {
            return Err(format!(
                "expected version {} with 3000 ms and nothing else, saw {seen:?}",
                before + 1
            ));
        }
        wait_in(
            lab,
            2,
            "fight",
            "SettingsMatch=False naming 5000 and 3000",
            |m| {
                condition(m, "SettingsMatch").is_some_and(|c| {
                    c.status == "False"
                        && c.message.contains("electionTimeoutMillis 5000")
                        && c.message.contains("(3000, ")
                })
            },
        )
        .await?;
        if let Some(writer) = writer {
            writer.stop_and_check().await?;
        }
        phase(started, "every acknowledged write read back");
        same_set(&first, &config(lab, "fight", &hosts).await?)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_object_does_not_stop_a_removal_in_the_same_cluster() {
    let started = Instant::now();
    scenario(63, 3, async |lab| {
        let _passes = ControlPlanePasses::start(lab);
        let control_plane = lab.control_plane();
        control_plane
            .apply(&request("refuse", "a=2,b=2,c=1"))
            .await
            .map_err(fail("apply"))?;
        ready(lab, "refuse", "a=2,b=2,c=1").await?;
        phase(started, "refuse: a=2,b=2,c=1 everywhere");
        let hosts = hosts_of(lab, 0, "refuse").await?;
        let first = config(lab, "refuse", &hosts).await?;
        let leaving = member_host(lab, 0, "refuse", 1).await?;
        let writer = MajorityWriter::start(lab, "refuse", &hosts).await?;

        // A user's OverridePolicy narrows member 0's Service selector in cluster
        // a to member pods (its pod is one, so the NodePort still routes to it).
        // The operator's StatefulSet follows the Service's selector, and a
        // StatefulSet's selector is immutable: the API server refuses it.
        control_plane
            .apply_override_policy(
                "default",
                "refuse",
                "refuse-member-0-selector-in-a",
                override_in(
                    "a",
                    ResourceRef::new(Kind::Service, "refuse-mongodb-0"),
                    "/spec/selector/app.kubernetes.io~1component",
                    json!("member"),
                ),
            )
            .await
            .map_err(fail("OverridePolicy"))?;
        let failing = "StatefulSet refuse-mongodb-0";
        wait_in(lab, 0, "refuse", "ObjectsApplied=False", |m| {
            condition(m, "ObjectsApplied")
                .is_some_and(|c| c.status == "False" && c.message.contains(failing))
        })
        .await?;
        phase(started, "a reports ObjectsApplied=False");

        // Something else in the same cluster: one member fewer.
        control_plane
            .settled("default", "refuse", READY_TIMEOUT)
            .await
            .map_err(fail("FedState's status"))?;
        control_plane
            .apply(&request("refuse", "a=1,b=2,c=1"))
            .await
            .map_err(fail("scale in"))?;
        ready(lab, "refuse", "a=1,b=2,c=1").await?;
        phase(started, "refuse: a=1,b=2,c=1 everywhere");
        let remaining = hosts_of(lab, 1, "refuse").await?;
        if remaining.contains(&leaving) || remaining.len() != 4 {
            return Err(format!("{leaving} should have left: {remaining:?}"));
        }
        let stateful_sets: Api<StatefulSet> =
            Api::namespaced(lab.clusters()[0].client.clone(), "default");
        let deadline = Instant::now() + Duration::from_secs(60);
        while stateful_sets
            .get_opt("refuse-mongodb-1")
            .await
            .map_err(fail("StatefulSet"))?
            .is_some()
        {
            if Instant::now() > deadline {
                return Err("the removed member's StatefulSet was not deleted".into());
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        // Status is still written, after the scale-in, and still names the refusal.
        let a = wait_in(lab, 0, "refuse", "status of the new generation", |m| {
            m.status.as_ref().and_then(|s| s.observed_generation) == m.metadata.generation
                && m.spec.members == 1
                && condition(m, "ObjectsApplied")
                    .is_some_and(|c| c.status == "False" && c.message.contains(failing))
        })
        .await?;
        eprintln!(
            "cluster a: {:?}",
            condition(&a, "ObjectsApplied").map(|c| &c.message)
        );
        let warnings = events(lab, 0, "refuse", "ApplyFailed").await?;
        if !warnings.iter().any(|e| {
            e.type_.as_deref() == Some("Warning")
                && e.note.as_deref().is_some_and(|n| n.contains(failing))
        }) {
            return Err(format!(
                "no Warning Event ApplyFailed naming {failing}: {warnings:?}"
            ));
        }
        if let Some(writer) = writer {
            writer.stop_and_check().await?;
        }
        phase(started, "every acknowledged write read back");
        same_set(&first, &config(lab, "refuse", &remaining).await?)
    })
    .await;
}

/// The `(_id, host, votes)` of each entry of a config.
fn entries(config: &Document) -> Vec<(i64, String, i64)> {
    let number = |m: &Document, key: &str| {
        m.get_i32(key)
            .map(i64::from)
            .or_else(|_| m.get_i64(key))
            .or_else(|_| m.get_f64(key).map(|f| f as i64))
            .unwrap_or(1)
    };
    config
        .get_array("members")
        .map(|members| {
            members
                .iter()
                .filter_map(|m| m.as_document())
                .map(|m| {
                    (
                        number(m, "_id"),
                        m.get_str("host").unwrap_or_default().to_string(),
                        number(m, "votes"),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_whose_node_port_changes_keeps_its_entry_and_no_write_is_lost() {
    let started = Instant::now();
    scenario(66, 3, async |lab| {
        let control_plane = lab.control_plane();
        control_plane
            .apply(&request("move", "a=2,b=2,c=1"))
            .await
            .map_err(fail("apply"))?;
        ready(lab, "move", "a=2,b=2,c=1").await?;
        phase(started, "move: a=2,b=2,c=1 everywhere");
        // The primary is a member that stays.
        let stays = member_host(lab, 0, "move", 0).await?;
        make_primary(lab, "move", &stays).await?;
        let moving = [member_host(lab, 1, "move", 1).await?];
        let hosts = hosts_of(lab, 0, "move").await?;
        let first = config(lab, "move", &hosts).await?;
        let before = entries(&first);
        let writer = MajorityWriter::start(lab, "move", &hosts).await?;

        // A user's OverridePolicy gives member 1's Service another nodePort in
        // cluster b (Karmada updates it there; kube-proxy follows): the same
        // mongod, with its data and its entry, is now reached at another host.
        let services: Api<Service> = Api::namespaced(lab.clusters()[1].client.clone(), "default");
        let mut taken = BTreeSet::new();
        for service in services
            .list(&Default::default())
            .await
            .map_err(fail("Services"))?
        {
            for port in service.spec.and_then(|s| s.ports).unwrap_or_default() {
                taken.extend(port.node_port);
            }
        }
        let new_port = (31_000..32_000)
            .find(|p| !taken.contains(p))
            .ok_or("no free nodePort")?;
        control_plane
            .apply_override_policy(
                "default",
                "move",
                "move-member-1-node-port-in-b",
                override_in(
                    "b",
                    ResourceRef::new(Kind::Service, "move-mongodb-1"),
                    "/spec/ports/0/nodePort",
                    json!(new_port),
                ),
            )
            .await
            .map_err(fail("OverridePolicy"))?;
        let moved = [member_host(lab, 1, "move", 1).await?];
        if moved == moving {
            return Err(format!("the Service kept its nodePort: {moved:?}"));
        }
        phase(started, "b's Service move-mongodb-1 has another nodePort");

        // Until the entry has its new host: never a sixth entry, the same
        // `_id`s and votes throughout.
        let seeds = [stays.clone()];
        let deadline = Instant::now() + READY_TIMEOUT;
        let mut versions = BTreeSet::new();
        loop {
            let now = entries(&config(lab, "move", &seeds).await?);
            versions.insert(version(&config(lab, "move", &seeds).await?));
            let ids = |e: &[(i64, String, i64)]| -> Vec<(i64, i64)> {
                e.iter().map(|(id, _, votes)| (*id, *votes)).collect()
            };
            if ids(&now) != ids(&before) {
                return Err(format!(
                    "entries changed other than by host: {before:?} then {now:?}"
                ));
            }
            let hosts: BTreeSet<&String> = now.iter().map(|(_, host, _)| host).collect();
            if moved.iter().all(|h| hosts.contains(h)) && !moving.iter().any(|h| hosts.contains(h))
            {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!("the moved members keep their old hosts: {now:?}"));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        phase(started, "the entry has its new host");
        // Ready again everywhere: hostconf still lists the old address (FedState
        // writes it from the nodePort it allocated), so the other clusters
        // are not asked to wait for that member.
        wait_in(lab, 1, "move", "b Ready", |m| {
            condition(m, "Ready").is_some_and(|c| c.status == "True")
        })
        .await?;
        phase(started, "b Ready again");
        // The recorded entry follows the new host.
        let stateful_sets: Api<StatefulSet> =
            Api::namespaced(lab.clusters()[1].client.clone(), "default");
        let recorded = wait_for_annotation(&stateful_sets, "move-mongodb-1", &moved[0]).await?;
        eprintln!("config versions seen: {versions:?}; a's member 1 recorded as {recorded}");
        if let Some(writer) = writer {
            writer.stop_and_check().await?;
        }
        phase(started, "every acknowledged write read back");
        same_set(
            &first,
            &config(lab, "move", &hosts_of(lab, 1, "move").await?).await?,
        )
    })
    .await;
}

/// Waits until StatefulSet `name` records a config entry at `host`; returns it.
async fn wait_for_annotation(
    stateful_sets: &Api<StatefulSet>,
    name: &str,
    host: &str,
) -> Result<String, String> {
    let key = "middleware.fedstate.io/member-config-entry";
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let stateful_set = stateful_sets.get(name).await.map_err(fail("StatefulSet"))?;
        let recorded = stateful_set
            .metadata
            .annotations
            .and_then(|a| a.get(key).cloned());
        if let Some(recorded) = recorded.filter(|r| r.ends_with(&format!("@{host}"))) {
            return Ok(recorded);
        }
        if Instant::now() > deadline {
            return Err(format!("{name} does not record an entry at {host}"));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
