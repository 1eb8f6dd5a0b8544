//! Day-two changes of the credentials on a running set, under a w:"majority"
//! writer: a new root password in the credentials Secret of every cluster, as
//! the control plane propagates it; a keyfile changed in one cluster only,
//! held at the old and the new key until it is put back; a new keyfile in
//! every cluster, rolled in its two phases.
//!
//! Labs 77, 69 and 79.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::harness::*;
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::ByteString;
use kube::api::{ListParams, PostParams};
use kube::{Api, ResourceExt};
use lab::lab::Lab;
use lab::observe::SetSampler;

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
            Some(python) => MajorityWriter::start_as(
                ROTATED,
                &hosts,
                &python,
                WRITER_USER,
                WRITER_PASSWORD,
                "",
            )?,
            None => None,
        };
        tokio::time::sleep(Duration::from_secs(2)).await;
        let before = member_pods(lab, ROTATED).await?;

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
        let after = member_pods(lab, ROTATED).await?;
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

/// A new keyfile in cluster c only: c's member runs the old and the new key
/// and waits there, every cluster names the others' members, nobody is cut
/// off; put back, c's member returns to the old key alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyfile_that_differs_in_one_cluster_is_held_at_both_keys_and_reported() {
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
        let a0 = member_host(lab, 0, MISMATCH, 0).await?;
        let c0 = member_host(lab, 2, MISMATCH, 0).await?;
        let writer = TimedMajorityWriter::start(lab, MISMATCH, &hosts).await?;
        if let Some(writer) = &writer {
            writer.wait_acknowledged(5, Duration::from_secs(60)).await?;
        }
        let old_key = keys_run(lab, MISMATCH).await?;

        // Cluster c alone gets another keyfile.
        put_in(
            lab,
            2,
            credentials_secret(MISMATCH_SECRET, 9, MISMATCH_PASSWORD),
        )
        .await?;
        let c = until_in(lab, 2, MISMATCH, "c waits for the others", |m| {
            reason_is(m, "KeyfileInPlace", "NewKeyMissingElsewhere")
        })
        .await?;
        let said = |m: &mongodb_member_operator::api::MongoDB| {
            m.status
                .as_ref()
                .and_then(|s| s.conditions.iter().find(|c| c.type_ == "KeyfileInPlace"))
                .map(|c| c.message.clone())
                .unwrap_or_default()
        };
        if !said(&c).contains(&a0) {
            return Err(format!("c does not name a's member: {}", said(&c)));
        }
        let a = until_in(lab, 0, MISMATCH, "a names c's member", |m| {
            reason_is(m, "KeyfileInPlace", "OtherKeysRun") && said(m).contains(&c0)
        })
        .await?;
        eprintln!("c: {}\na: {}", said(&c), said(&a));
        let run = keys_run(lab, MISMATCH).await?;
        let c_pod = format!("c/{MISMATCH}-mongodb-0-0");
        let first_old = old_key.get(&c_pod).and_then(|k| k.first()).cloned();
        match run.get(&c_pod) {
            Some(keys) if keys.len() == 2 && keys.first() == first_old.as_ref() => {}
            other => {
                return Err(format!(
                    "c's member runs {other:?}, not the old and the new key"
                ))
            }
        }
        ready(lab, MISMATCH, MISMATCH_SPLIT).await?;
        if let Some(writer) = &writer {
            let before = writer.acknowledged().len();
            writer
                .wait_acknowledged(before + 5, Duration::from_secs(60))
                .await?;
        }

        // The keyfile put back: c's member returns to the old key alone.
        put_in(
            lab,
            2,
            credentials_secret(MISMATCH_SECRET, 7, MISMATCH_PASSWORD),
        )
        .await?;
        for index in 0..3 {
            until_in(lab, index, MISMATCH, "the keyfile in place", |m| {
                reason_is(m, "KeyfileInPlace", "KeyfileInPlace")
            })
            .await?;
            let reasons = event_reasons_in(lab, index, MISMATCH).await?;
            if reasons.iter().any(|r| r == "KeyfileMismatch") {
                return Err(format!(
                    "cluster {index} reported a KeyfileMismatch: {reasons:?}"
                ));
            }
        }
        ready(lab, MISMATCH, MISMATCH_SPLIT).await?;
        if keys_run(lab, MISMATCH).await? != old_key {
            return Err("the members do not run the old key alone again".into());
        }
        if let Some(writer) = writer {
            let acknowledged = writer.stop_and_check().await?.len();
            eprintln!("{acknowledged} majority writes acknowledged, none lost");
        }
        Ok(())
    })
    .await;
}

const ROTATING: &str = "rotating";
/// Named as the derived Secret would be (the harness reads the root user there).
const ROTATING_SECRET: &str = "rotating-credentials";
const ROTATING_PASSWORD: &str = "rotating-root-password";
const ROTATING_SPLIT: &str = "a=1,b=1,c=1";
/// How long the two phases of the rotation may take, every member restarted twice.
const KEYFILE_ROTATION_TIMEOUT: Duration = Duration::from_secs(360);

/// The keys of the keyfile each member pod of `name` runs: the operator's
/// keyfile Secret its `keyfile-secret` volume names, read as mongod reads it
/// (a YAML sequence of keys), by `cluster/pod`.
async fn keys_run(lab: &Lab, name: &str) -> Result<BTreeMap<String, Vec<String>>, String> {
    let selector = ListParams::default().labels(&format!("app.kubernetes.io/instance={name}"));
    let mut found = BTreeMap::new();
    for cluster in lab.clusters() {
        let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), "default");
        let secrets: Api<Secret> = Api::namespaced(cluster.client.clone(), "default");
        for pod in pods.list(&selector).await.map_err(fail("pods"))? {
            if pod.name_any().ends_with("-metrics") || pod.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let secret_name = pod
                .spec
                .iter()
                .flat_map(|s| s.volumes.iter().flatten())
                .find(|v| v.name == "keyfile-secret")
                .and_then(|v| v.secret.as_ref()?.secret_name.clone())
                .ok_or_else(|| format!("pod {} mounts no keyfile Secret", pod.name_any()))?;
            let secret = secrets
                .get(&secret_name)
                .await
                .map_err(fail("keyfile Secret"))?;
            let text = secret
                .data
                .as_ref()
                .and_then(|d| d.get("keyfile"))
                .map(|v| String::from_utf8_lossy(&v.0).into_owned())
                .unwrap_or_default();
            let keys = text
                .lines()
                .filter_map(|line| line.trim().strip_prefix("- "))
                .map(str::to_string)
                .collect();
            found.insert(format!("{}/{}", cluster.name, pod.name_any()), keys);
        }
    }
    Ok(found)
}

/// A new keyfile in every cluster's credentials Secret, as the control plane
/// propagates it: every member runs the old and the new key, then the new
/// key alone, with at most one member of the set down at any sample and no
/// member refused by its peers, an operator killed mid-way; the writer loses
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_keyfile_is_rolled_in_two_phases_with_one_member_down_at_a_time() {
    scenario(79, 3, async |lab| {
        let started = Instant::now();
        let phase = |what: &str| eprintln!("[{:>5.1}s] {what}", started.elapsed().as_secs_f64());
        for index in 0..3 {
            let secret = credentials_secret(ROTATING_SECRET, 7, ROTATING_PASSWORD);
            put_in(lab, index, secret).await?;
        }
        let reference = format!("  credentialsSecretRef:\n    name: {ROTATING_SECRET}\n");
        apply_user_fields(lab, ROTATING, "lab-credentials", &reference).await?;
        let _passes = ControlPlanePasses::start(lab);
        lab.control_plane()
            .apply(&request(ROTATING, ROTATING_SPLIT))
            .await
            .map_err(fail("apply"))?;
        ready(lab, ROTATING, ROTATING_SPLIT).await?;
        phase("ready");
        let hosts = hosts_of(lab, 0, ROTATING).await?;
        let writer = TimedMajorityWriter::start(lab, ROTATING, &hosts).await?;
        if let Some(writer) = &writer {
            writer.wait_acknowledged(5, Duration::from_secs(60)).await?;
        }
        let mut sampler =
            SetSampler::start(lab.network().clone(), hosts.clone(), Duration::from_millis(50));
        let unhealthy = UnhealthyWatcher::start(mongo(lab, ROTATING, &hosts, false).await?);
        let before = member_pods(lab, ROTATING).await?;
        if before.is_empty() {
            return Err("no member pod found".into());
        }
        let old_key = keys_run(lab, ROTATING).await?;

        for index in 0..3 {
            let secret = credentials_secret(ROTATING_SECRET, 9, ROTATING_PASSWORD);
            put_in(lab, index, secret).await?;
        }
        phase("the new keyfile is in every cluster's Secret");
        let new_key = {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD.encode([9u8; 96])
        };
        let deadline = Instant::now() + KEYFILE_ROTATION_TIMEOUT;
        let mut saw_both = false;
        let mut killed = false;
        loop {
            let run = keys_run(lab, ROTATING).await?;
            saw_both |= run.values().any(|keys| keys.len() == 2 && keys[1] == new_key);
            // Cluster a's operator dies once a member runs both keys, and
            // comes back 3 s later: it plans again from what is stored.
            if saw_both && !killed {
                lab.kill_operator(0).await.map_err(fail("kill"))?;
                phase("a member runs both keys: cluster a's operator killed");
                tokio::time::sleep(Duration::from_secs(3)).await;
                lab.restart_operator(0).map_err(fail("restart"))?;
                phase("cluster a's operator restarted");
                killed = true;
            }
            let rotated = run.len() == before.len()
                && run.values().all(|keys| keys == std::slice::from_ref(&new_key));
            if rotated {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "the keyfile was not rotated in {KEYFILE_ROTATION_TIMEOUT:?}: {} pod(s) run the old key alone, {run:?}",
                    run.values().filter(|keys| old_key.values().any(|old| old == *keys)).count()
                ));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        phase("every member runs the new key alone");
        if !saw_both {
            return Err("no member was seen running the old and the new key".into());
        }
        ready(lab, ROTATING, ROTATING_SPLIT).await?;
        for index in 0..3 {
            until_in(lab, index, ROTATING, "the keyfile in place", |m| {
                reason_is(m, "KeyfileInPlace", "KeyfileInPlace")
            })
            .await?;
            let reasons = event_reasons_in(lab, index, ROTATING).await?;
            if reasons.iter().any(|r| r == "KeyfileMismatch") {
                return Err(format!("cluster {index} reported a KeyfileMismatch: {reasons:?}"));
            }
        }
        phase("every cluster Ready, its keyfile in place");
        let most_unhealthy = unhealthy.stop();
        let samples = sampler.stop();
        let most = lab::observe::most_down(&samples).map(|s| s.down().len()).unwrap_or(0);
        if most > 1 || most_unhealthy > 1 {
            return Err(format!(
                "more than one member down at once: {most} by their own state, {most_unhealthy} as the primary saw them"
            ));
        }
        let after = member_pods(lab, ROTATING).await?;
        if let Some((pod, _)) = before.iter().find(|(pod, (uid, _))| after.get(*pod).map(|a| &a.0) == Some(uid)) {
            return Err(format!("{pod} was never restarted onto the new keyfile"));
        }
        if let Some(writer) = writer {
            let acknowledged = writer.stop_and_check().await?.len();
            eprintln!("{acknowledged} majority writes acknowledged, none lost");
        }
        Ok(())
    })
    .await;
}
