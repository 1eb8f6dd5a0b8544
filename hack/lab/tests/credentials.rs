//! Day-two changes of the credentials on a running set, under a w:"majority"
//! writer: a new root password in the credentials Secret of every cluster, as
//! the control plane propagates it; a keyfile changed in one cluster only,
//! which stops the roll as `KeyfileMismatch` until it is put back.
//!
//! Labs 77 and 69.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::harness::*;
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::ByteString;
use kube::api::{ListParams, PostParams};
use kube::{Api, ResourceExt};
use lab::lab::Lab;

const ROTATED: &str = "rotated";
/// Named as the derived Secret would be, so that the harness's helpers find
/// the root user in it.
const ROTATED_SECRET: &str = "rotated-credentials";
const FIRST_PASSWORD: &str = "first-root-password";
const SECOND_PASSWORD: &str = "second-root-password";
/// A user of the writer's own: the root password changes under it.
const WRITER_USER: &str = "lab-writer";
const WRITER_PASSWORD: &str = "lab-writer-password";
/// How long the set has to take the new password, every cluster to use it.
const ROTATION_TIMEOUT: Duration = Duration::from_secs(90);

/// The user's credentials Secret `name`: a keyfile of bytes `key_byte`,
/// the root user.
fn credentials_secret(name: &str, key_byte: u8, password: &str) -> Secret {
    use base64::Engine;
    let keyfile = base64::engine::general_purpose::STANDARD.encode([key_byte; 96]);
    Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([
            ("keyfile".into(), ByteString(keyfile.into_bytes())),
            ("username".into(), ByteString(b"root".to_vec())),
            ("password".into(), ByteString(password.as_bytes().to_vec())),
        ])),
        ..Secret::default()
    }
}

/// Writes (creates or replaces) the credentials Secret in every cluster, as
/// Karmada propagates a user's Secret (the lab's stand-in does not).
async fn put_everywhere(lab: &Lab, password: &str) -> Outcome {
    for index in 0..lab.clusters().len() {
        put_in(lab, index, credentials_secret(ROTATED_SECRET, 7, password)).await?;
    }
    Ok(())
}

/// Writes (creates or replaces) `secret` in cluster `index`.
async fn put_in(lab: &Lab, index: usize, mut secret: Secret) -> Outcome {
    let secrets: Api<Secret> = Api::namespaced(lab.clusters()[index].client.clone(), "default");
    let name = secret.name_any();
    match secrets.get_opt(&name).await.map_err(fail("Secret"))? {
        Some(found) => {
            secret.metadata.resource_version = found.metadata.resource_version;
            secrets
                .replace(&name, &PostParams::default(), &secret)
                .await
                .map_err(fail("replace the Secret"))?;
        }
        None => {
            secrets
                .create(&PostParams::default(), &secret)
                .await
                .map_err(fail("create the Secret"))?;
        }
    }
    Ok(())
}

/// Every member pod of every cluster: its uid and its containers' restarts.
async fn pods(lab: &Lab) -> Result<BTreeMap<String, (String, i32)>, String> {
    let selector = ListParams::default().labels(&format!("app.kubernetes.io/instance={ROTATED}"));
    let mut found = BTreeMap::new();
    for cluster in lab.clusters() {
        let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), "default");
        for pod in pods.list(&selector).await.map_err(fail("pods"))? {
            let restarts = pod
                .status
                .iter()
                .flat_map(|s| s.container_statuses.iter().flatten())
                .map(|c| c.restart_count)
                .sum();
            found.insert(
                format!("{}/{}", cluster.name, pod.name_any()),
                (pod.uid().unwrap_or_default(), restarts),
            );
        }
    }
    Ok(found)
}

/// Whether the set takes `password` for the root user (a fresh client).
async fn root_accepted(hosts: &[String], password: &str) -> bool {
    let uri = format!(
        "mongodb://root:{password}@{}/?replicaSet=replset-0&authSource=admin\
         &serverSelectionTimeoutMS=3000",
        hosts.join(",")
    );
    let Ok(client) = mongodb::Client::with_uri_str(&uri).await else {
        return false;
    };
    let answer = client
        .database("admin")
        .run_command(mongodb::bson::doc! {"connectionStatus": 1})
        .await;
    client.shutdown().await;
    answer.is_ok()
}

/// A new root password in every cluster's Secret: the rsInit cluster's
/// operator sets it on the set with the one it still holds, every cluster
/// then uses it, no pod restarts, and the writer loses nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_root_password_is_set_on_the_running_set_without_a_restart() {
    scenario(77, 3, async |lab| {
        let started = Instant::now();
        let phase = |what: &str| eprintln!("[{:>5.1}s] {what}", started.elapsed().as_secs_f64());
        put_everywhere(lab, FIRST_PASSWORD).await?;
        let reference = format!("  credentialsSecretRef:\n    name: {ROTATED_SECRET}\n");
        apply_user_fields(lab, ROTATED, "lab-credentials", &reference).await?;
        lab.control_plane()
            .apply(&request(ROTATED, "a=1,b=1,c=1"))
            .await
            .map_err(fail("apply"))?;
        ready(lab, ROTATED, "a=1,b=1,c=1").await?;
        phase("ready");
        let hosts = hosts_of(lab, 0, ROTATED).await?;
        mongo(lab, ROTATED, &hosts, false)
            .await?
            .database("admin")
            .run_command(mongodb::bson::doc! {
                "createUser": WRITER_USER,
                "pwd": WRITER_PASSWORD,
                "roles": [{"role": "readWrite", "db": "lab"}],
                "writeConcern": {"w": "majority"},
            })
            .await
            .map_err(fail("the writer's user"))?;
        let writer = match writer_python()? {
            Some(python) => {
                MajorityWriter::start_as(ROTATED, &hosts, &python, WRITER_USER, WRITER_PASSWORD)?
            }
            None => None,
        };
        tokio::time::sleep(Duration::from_secs(2)).await;
        let before = pods(lab).await?;

        put_everywhere(lab, SECOND_PASSWORD).await?;
        phase("the new password is in every cluster's Secret");
        let deadline = Instant::now() + ROTATION_TIMEOUT;
        while !root_accepted(&hosts, SECOND_PASSWORD).await {
            if Instant::now() > deadline {
                return Err(format!(
                    "the set never took the new root password in {ROTATION_TIMEOUT:?}"
                ));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        phase("the set takes the new password");
        if root_accepted(&hosts, FIRST_PASSWORD).await {
            return Err("the set still takes the old root password".into());
        }
        ready(lab, ROTATED, "a=1,b=1,c=1").await?;
        phase("every cluster is Ready again");
        // Ready on the new password: every cluster's last pass read the set with it.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let after = pods(lab).await?;
        if before != after {
            return Err(format!(
                "pods were restarted for the password: {before:?} -> {after:?}"
            ));
        }
        if let Some(writer) = writer {
            writer.stop_and_check().await?;
        }
        Ok(())
    })
    .await;
}

const MISMATCH: &str = "mismatch";
/// Named as the derived Secret would be (the harness reads the root user there).
const MISMATCH_SECRET: &str = "mismatch-credentials";
const MISMATCH_PASSWORD: &str = "mismatch-root-password";
const MISMATCH_SPLIT: &str = "a=1,b=1,c=1";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyfile_that_differs_in_one_cluster_stops_the_roll_as_keyfile_mismatch() {
    scenario(69, 3, async |lab| {
        for index in 0..3 {
            let secret = credentials_secret(MISMATCH_SECRET, 7, MISMATCH_PASSWORD);
            put_in(lab, index, secret).await?;
        }
        let reference = format!("  credentialsSecretRef:\n    name: {MISMATCH_SECRET}\n");
        apply_user_fields(lab, MISMATCH, "lab-credentials", &reference).await?;
        let _passes = ControlPlanePasses::start(lab);
        lab.control_plane()
            .apply(&request(MISMATCH, MISMATCH_SPLIT))
            .await
            .map_err(fail("apply"))?;
        ready(lab, MISMATCH, MISMATCH_SPLIT).await?;
        let hosts = hosts_of(lab, 0, MISMATCH).await?;
        let c0 = member_host(lab, 2, MISMATCH, 0).await?;
        let c_vip = c0
            .rsplit_once(':')
            .map(|(vip, _)| vip.to_string())
            .unwrap_or_default();
        let writer = TimedMajorityWriter::start(lab, MISMATCH, &hosts).await?;
        if let Some(writer) = &writer {
            writer.wait_acknowledged(5, Duration::from_secs(60)).await?;
        }

        // Cluster c alone gets another keyfile: its member restarts on it,
        // and the set refuses it.
        put_in(
            lab,
            2,
            credentials_secret(MISMATCH_SECRET, 9, MISMATCH_PASSWORD),
        )
        .await?;
        // The primary's cluster says so, naming c; c's roll stops there with
        // a Warning Event (its UpToDate says so only for that one pass: its
        // pods then all run their revision).
        let degraded = until_in(
            lab,
            0,
            MISMATCH,
            "a reports Degraded KeyfileMismatch",
            |m| reason_is(m, "Degraded", "KeyfileMismatch"),
        )
        .await?;
        let said = degraded
            .status
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Degraded"))
            .map(|c| c.message.clone())
            .unwrap_or_default();
        if !said.contains(&format!("cluster {c_vip}")) {
            return Err(format!("the mismatch does not name cluster c: {said}"));
        }
        let deadline = Instant::now() + READY_TIMEOUT;
        while !event_reasons_in(lab, 2, MISMATCH)
            .await?
            .iter()
            .any(|r| r == "KeyfileMismatch")
        {
            if Instant::now() > deadline {
                return Err("c's roll never stopped with a KeyfileMismatch Event".into());
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        if let Some(writer) = &writer {
            let before = writer.acknowledged().len();
            writer
                .wait_acknowledged(before + 5, Duration::from_secs(60))
                .await?;
        }

        // The keyfile put back: c restarts its member again, and it rejoins.
        put_in(
            lab,
            2,
            credentials_secret(MISMATCH_SECRET, 7, MISMATCH_PASSWORD),
        )
        .await?;
        ready(lab, MISMATCH, MISMATCH_SPLIT).await?;
        until_in(lab, 2, MISMATCH, "c's roll over", |m| {
            m.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "UpToDate" && c.status == "True")
            }) && !reason_is(m, "Degraded", "KeyfileMismatch")
        })
        .await?;
        if let Some(writer) = writer {
            let acknowledged = writer.stop_and_check().await?.len();
            eprintln!("{acknowledged} majority writes acknowledged, none lost");
        }
        Ok(())
    })
    .await;
}
