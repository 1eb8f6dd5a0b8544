//! Faults: the operator killed (SIGKILL) the moment it has
//! planned a step — initiate, add, promote, step-down, remove — and restarted a
//! second later, while a w:"majority" writer runs and the set is sampled every
//! 50 ms. The step may or may not have been carried out; the restarted operator
//! must resume from the live config: one initiate, no forced reconfig, never two
//! primaries in one term, the desired members in the end, no acknowledged write
//! lost. (A kill mid-roll is `rolling.rs`'s.)

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::harness::*;
use federation_sim::control_plane::ToSubmission;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::PostParams;
use kube::Api;
use lab::lab::Lab;
use lab::observe::SetSampler;

/// How often the set is sampled.
const SAMPLE_EVERY: Duration = Duration::from_millis(50);
/// How long to wait for an operator to plan the step it is killed at.
const STEP_TIMEOUT: Duration = Duration::from_secs(120);

/// Kills operator `index` the moment its log shows a planned step containing
/// `step` on a line after the first `seen` lines, and restarts it a second
/// later. Returns the step's log line.
async fn kill_at_step(
    lab: &mut Lab,
    index: usize,
    step: &str,
    seen: usize,
) -> Result<String, String> {
    let deadline = Instant::now() + STEP_TIMEOUT;
    let line = loop {
        let log = std::fs::read_to_string(lab.operator_log(index)).unwrap_or_default();
        let found = log
            .lines()
            .skip(seen)
            .find(|l| l.contains(" planned ") && l.contains(step))
            .map(str::to_owned);
        if let Some(line) = found {
            break line;
        }
        if Instant::now() > deadline {
            return Err(format!(
                "operator {index} never planned a step with {step:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    lab.kill_operator(index).await.map_err(fail("kill"))?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    lab.restart_operator(index).map_err(fail("restart"))?;
    Ok(line)
}

/// How many lines operator `index` has logged so far.
fn log_lines(lab: &Lab, index: usize) -> usize {
    std::fs::read_to_string(lab.operator_log(index))
        .unwrap_or_default()
        .lines()
        .count()
}

/// The text after `step=` of a log line (colour codes removed).
fn step_of(line: &str) -> String {
    let plain: String = line
        .split('\u{1b}')
        .enumerate()
        .map(|(i, part)| match (i, part.find('m')) {
            (0, _) => part,
            (_, Some(end)) => &part[end + 1..],
            (_, None) => part,
        })
        .collect();
    plain
        .split_once("step=")
        .map_or(plain.clone(), |(_, step)| step.trim().to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_killed_the_moment_it_plans_each_step_resumes_from_the_live_config() {
    scenario(82, 3, async |lab| {
        let control_plane = lab.control_plane();
        let passes = ControlPlanePasses::start(lab);
        let mut killed = Vec::new();

        // Initiate, in the rsInit cluster (a): seven voters.
        control_plane
            .apply(&request("faults", "a=3,b=3,c=1"))
            .await
            .map_err(fail("apply"))?;
        killed.push(kill_at_step(lab, 0, "initiate replica set", 0).await?);
        ready(lab, "faults", "a=3,b=3,c=1").await?;
        let hosts = hosts_of(lab, 0, "faults").await?;
        let first = config(lab, "faults", &hosts).await?;
        let writer = TimedMajorityWriter::start(lab, "faults", &hosts).await?;
        let mut sampler = SetSampler::start(lab.network().clone(), hosts.clone(), SAMPLE_EVERY);

        // Add in cluster c: an eighth member, which joins without a vote
        // (seven vote already).
        let seen = log_lines(lab, 2);
        control_plane
            .apply(
                &request("faults", "a=3,b=3,c=2")
                    .to_submission()
                    .keep_unchanged_clusters_on_scale_up(),
            )
            .await
            .map_err(fail("scale out"))?;
        killed.push(kill_at_step(lab, 2, "add ", seen).await?);
        ready(lab, "faults", "a=3,b=3,c=2").await?;
        let mut samples = sampler.stop();
        let grown = hosts_of(lab, 0, "faults").await?;
        let mut sampler = SetSampler::start(lab.network().clone(), grown, SAMPLE_EVERY);

        // Step-down and remove: cluster a, made to hold the primary, gives up
        // a member; then c promotes its non-voter into the freed vote.
        let leaving = member_host(lab, 0, "faults", 2).await?;
        let promoted = member_host(lab, 2, "faults", 1).await?;
        make_primary(lab, "faults", &leaving).await?;
        control_plane
            .settled("default", "faults", READY_TIMEOUT)
            .await
            .map_err(fail("FedState's status"))?;
        let seen = log_lines(lab, 0);
        let seen_in_c = log_lines(lab, 2);
        control_plane
            .apply(&request("faults", "a=2,b=3,c=2"))
            .await
            .map_err(fail("scale in"))?;
        killed.push(kill_at_step(lab, 0, "step primary", seen).await?);
        let seen = log_lines(lab, 0);
        killed.push(kill_at_step(lab, 0, "remove ", seen).await?);
        killed.push(kill_at_step(lab, 2, "give ", seen_in_c).await?);
        ready(lab, "faults", "a=2,b=3,c=2").await?;
        drop(passes);

        samples.extend(sampler.stop());
        let acknowledged = match writer {
            Some(writer) => writer.stop_and_check().await?.len(),
            None => 0,
        };
        let remaining = hosts_of(lab, 1, "faults").await?;
        let last = config(lab, "faults", &remaining).await?;
        eprintln!(
            "killed at: {:?}\n{} samples, {} majority writes acknowledged, none lost; config \
             version {} -> {}",
            killed.iter().map(|l| step_of(l)).collect::<Vec<_>>(),
            samples.len(),
            acknowledged,
            version(&first),
            version(&last)
        );
        if remaining.contains(&leaving) || remaining.len() != 7 {
            return Err(format!("{leaving} should have left: {remaining:?}"));
        }
        let promoted_votes = last.get_array("members").ok().and_then(|members| {
            members
                .iter()
                .filter_map(|m| m.as_document())
                .find(|m| m.get_str("host").ok() == Some(promoted.as_str()))
                .and_then(|m| m.get_i32("votes").ok())
        });
        if promoted_votes != Some(1) {
            return Err(format!(
                "{promoted} was not promoted: votes {promoted_votes:?}"
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
        one_primary_per_term(&samples)
    })
    .await;
}

/// Waits until `host` answers SECONDARY again on a running member other than
/// `gone` (the listen address it had before its fault); returns the new one.
async fn back_as_secondary(
    sampler: &SetSampler,
    host: &str,
    gone: &str,
    timeout: Duration,
) -> Result<String, String> {
    let deadline = Instant::now() + timeout;
    let mut left = false;
    loop {
        let member = sampler
            .latest()
            .and_then(|s| s.members.into_iter().find(|m| m.host == host));
        if let Some(member) = member {
            left |= member.listen.as_deref() != Some(gone);
            if left && member.state == Some(mongod_sim::MemberState::Secondary) {
                return Ok(member.listen.unwrap_or_default());
            }
        }
        if Instant::now() > deadline {
            return Err(format!("{host} is not back as SECONDARY after {timeout:?}"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The running member (its listen address) that `host` reaches.
fn listen_of(lab: &Lab, host: &str) -> Result<String, String> {
    let network = lab.network();
    network
        .running()
        .into_iter()
        .find(|listen| network.aliases_of(listen).iter().any(|a| a == host))
        .ok_or_else(|| format!("no running member answers at {host}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_mongod_and_a_lost_volume_rejoin_by_resync_never_by_initiate() {
    scenario(83, 3, async |lab| {
        let control_plane = lab.control_plane();
        let passes = ControlPlanePasses::start(lab);
        control_plane
            .apply(&request("disks", "a=2,b=2,c=1"))
            .await
            .map_err(fail("apply"))?;
        ready(lab, "disks", "a=2,b=2,c=1").await?;
        let hosts = hosts_of(lab, 0, "disks").await?;
        let first = config(lab, "disks", &hosts).await?;
        let writer = TimedMajorityWriter::start(lab, "disks", &hosts).await?;
        if let Some(writer) = &writer {
            writer.wait_acknowledged(5, Duration::from_secs(60)).await?;
        }
        let sampler = SetSampler::start(lab.network().clone(), hosts.clone(), SAMPLE_EVERY);

        // mongod crashes: kubelet restarts the container on the same volume.
        let crashed = member_host(lab, 1, "disks", 1).await?;
        let listen = listen_of(lab, &crashed)?;
        lab.network().stop_member(&listen);
        back_as_secondary(&sampler, &crashed, &listen, Duration::from_secs(90)).await?;

        // A member's volume is lost (PVC and pod deleted, as when a disk is
        // replaced): its pod comes back on a new, empty volume (the lab's
        // runtime keys data by the claim's uid) and must resync from the set,
        // never be initiated. (mongod-sim's initial sync copies at once, so
        // STARTUP2 is too short to sample.)
        let lost = member_host(lab, 2, "disks", 0).await?;
        let listen = listen_of(lab, &lost)?;
        let claims: Api<PersistentVolumeClaim> =
            Api::namespaced(lab.clusters()[2].client.clone(), "default");
        let claim = "data-disks-mongodb-0-0";
        let claim_uid = |found: Option<PersistentVolumeClaim>| found.and_then(|c| c.metadata.uid);
        let old_claim = claim_uid(claims.get_opt(claim).await.map_err(fail("PVC"))?);
        let initiates_before = std::fs::read_to_string(lab.operator_log(2))
            .unwrap_or_default()
            .matches("initiate replica set")
            .count();
        lab.kubectl("c", &["delete", "pvc", claim, "--wait=false"])
            .await
            .map_err(fail("delete the PVC"))?;
        lab.kubectl("c", &["delete", "pod", "disks-mongodb-0-0", "--wait=false"])
            .await
            .map_err(fail("delete the pod"))?;
        back_as_secondary(&sampler, &lost, &listen, Duration::from_secs(120)).await?;
        let new_claim = claim_uid(claims.get_opt(claim).await.map_err(fail("PVC"))?);
        if new_claim.is_none() || new_claim == old_claim {
            return Err(format!(
                "the member's PVC was not replaced: {old_claim:?} -> {new_claim:?}"
            ));
        }
        let initiates_after = std::fs::read_to_string(lab.operator_log(2))
            .unwrap_or_default()
            .matches("initiate replica set")
            .count();
        drop(passes);

        // The set takes majority writes again: ten more before the writer
        // stops (the member comes back within seconds now that its pod is
        // Ready as soon as mongod listens: 7 writes in all were once too few
        // to judge).
        if let Some(writer) = &writer {
            let now = writer.acknowledged().len();
            writer
                .wait_acknowledged(now + 10, Duration::from_secs(60))
                .await?;
        }
        let mut sampler = sampler;
        let samples = sampler.stop();
        let acknowledged = match writer {
            Some(writer) => writer.stop_and_check().await?.len(),
            None => 0,
        };
        let last = config(lab, "disks", &hosts).await?;
        eprintln!(
            "{} samples, {} majority writes acknowledged, none lost; config version {} -> {}",
            samples.len(),
            acknowledged,
            version(&first),
            version(&last)
        );
        if initiates_after != initiates_before {
            return Err("cluster c's operator planned an initiate for the empty member".into());
        }
        if replica_set_id(&first) != replica_set_id(&last) || version(&last) >= 10_000 {
            return Err("second initiate or forced reconfig detected".into());
        }
        one_primary_per_term(&samples)
    })
    .await;
}

/// Waits until every one of `hosts` answers PRIMARY or SECONDARY.
async fn all_healthy(sampler: &SetSampler, hosts: &[String], timeout: Duration) -> Outcome {
    let deadline = Instant::now() + timeout;
    loop {
        let sample = sampler.latest();
        let healthy = |host: &String| {
            sample.as_ref().is_some_and(|s| {
                s.members.iter().any(|m| {
                    &m.host == host
                        && matches!(
                            m.state,
                            Some(
                                mongod_sim::MemberState::Primary
                                    | mongod_sim::MemberState::Secondary
                            )
                        )
                })
            })
        };
        if hosts.iter().all(healthy) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "not every member is healthy after {timeout:?}: {sample:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_minority_cluster_a_cut_vip_and_a_failing_api_server_are_survived() {
    scenario(84, 3, async |lab| {
        let control_plane = lab.control_plane();
        let passes = ControlPlanePasses::start(lab);
        control_plane
            .apply(&request("weather", "a=2,b=2,c=1"))
            .await
            .map_err(fail("apply"))?;
        ready(lab, "weather", "a=2,b=2,c=1").await?;
        let hosts = hosts_of(lab, 0, "weather").await?;
        // The primary in cluster a: the clusters cut below are minorities
        // without it, so the writer keeps a primary it can reach.
        let a0 = member_host(lab, 0, "weather", 0).await?;
        make_primary(lab, "weather", &a0).await?;
        let first = config(lab, "weather", &hosts).await?;
        let writer = TimedMajorityWriter::start(lab, "weather", &hosts).await?;
        let sampler = SetSampler::start(lab.network().clone(), hosts.clone(), SAMPLE_EVERY);
        let acknowledged = |writer: &Option<TimedMajorityWriter>| {
            writer.as_ref().map_or(0, |w| w.acknowledged().len())
        };
        let keeps_writing = |writer: &Option<TimedMajorityWriter>, since: usize| {
            let Some(writer) = writer else {
                return Ok(());
            };
            let now = writer.acknowledged().len();
            if now > since {
                Ok(())
            } else {
                Err(format!(
                    "no majority write acknowledged while a minority was cut ({now})"
                ))
            }
        };

        // A minority cluster (c: 1 of 5 voters) is lost, then comes back.
        let c = &lab.clusters()[2];
        let before = acknowledged(&writer);
        c.node.lose_cluster();
        lab.network().cut_site(&c.name);
        tokio::time::sleep(Duration::from_secs(8)).await;
        keeps_writing(&writer, before)?;
        c.node.heal();
        lab.network().heal_site(&c.name);
        all_healthy(&sampler, &hosts, Duration::from_secs(90)).await?;

        // Cluster b's VIP is cut (2 of 5 voters unreachable; its pods run).
        let b = &lab.clusters()[1];
        let before = acknowledged(&writer);
        b.node.cut_vip();
        lab.network().cut_site_ingress(&b.name);
        tokio::time::sleep(Duration::from_secs(8)).await;
        keeps_writing(&writer, before)?;
        b.node.heal();
        lab.network().heal_site_ingress(&b.name);
        all_healthy(&sampler, &hosts, Duration::from_secs(90)).await?;

        // Cluster a's API server fails a third of the requests (500, 429)
        // and drops its watches while a scales out.
        let a = &lab.clusters()[0];
        a.api
            .faults()
            .fail_share(0.33, apiserver_sim::InjectedError::Internal);
        control_plane
            .apply(
                &request("weather", "a=3,b=2,c=1")
                    .to_submission()
                    .keep_unchanged_clusters_on_scale_up(),
            )
            .await
            .map_err(fail("scale out"))?;
        for _ in 0..3 {
            tokio::time::sleep(Duration::from_secs(2)).await;
            a.api.faults().drop_watches();
        }
        a.api
            .faults()
            .fail_share(0.33, apiserver_sim::InjectedError::TooManyRequests);
        tokio::time::sleep(Duration::from_secs(4)).await;
        // Then every watch resumed from a resourceVersion is answered 410
        // Expired (kube-apiserver's watch cache past its history; the
        // watchers must re-list), and writes naming a resourceVersion 409.
        a.api
            .faults()
            .fail_share(0.5, apiserver_sim::InjectedError::Expired);
        for _ in 0..2 {
            a.api.faults().drop_watches();
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
        a.api
            .faults()
            .fail_share(0.33, apiserver_sim::InjectedError::Conflict);
        tokio::time::sleep(Duration::from_secs(2)).await;
        let injected = a.api.faults().injected_count();
        let count = |error| a.api.faults().injected_count_of(error);
        let expired = count(apiserver_sim::InjectedError::Expired);
        let conflicts = count(apiserver_sim::InjectedError::Conflict);
        a.api.faults().clear();
        ready(lab, "weather", "a=3,b=2,c=1").await?;
        drop(passes);

        let mut sampler = sampler;
        let samples = sampler.stop();
        let acknowledged = match writer {
            Some(writer) => writer.stop_and_check().await?.len(),
            None => 0,
        };
        let last = config(lab, "weather", &hosts_of(lab, 0, "weather").await?).await?;
        eprintln!(
            "{} samples, {injected} API requests failed on purpose ({expired} watches \
             expired, {conflicts} writes conflicted), {} majority writes acknowledged, none \
             lost; config version {} -> {}",
            samples.len(),
            acknowledged,
            version(&first),
            version(&last)
        );
        if injected == 0 || expired == 0 {
            return Err("no API request (or no watch) was failed: the fault proved nothing".into());
        }
        if replica_set_id(&first) != replica_set_id(&last) || version(&last) >= 10_000 {
            return Err("second initiate or forced reconfig detected".into());
        }
        one_primary_per_term(&samples)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_propagated_service_deleted_and_restored_changes_nothing_in_the_set() {
    scenario(85, 3, async |lab| {
        let control_plane = lab.control_plane();
        control_plane
            .apply(&request("svc", "a=2,b=2,c=1"))
            .await
            .map_err(fail("apply"))?;
        ready(lab, "svc", "a=2,b=2,c=1").await?;
        let hosts = hosts_of(lab, 0, "svc").await?;
        let first = config(lab, "svc", &hosts).await?;
        let writer = TimedMajorityWriter::start(lab, "svc", &hosts).await?;
        let sampler = SetSampler::start(lab.network().clone(), hosts.clone(), SAMPLE_EVERY);
        let member = member_host(lab, 1, "svc", 1).await?;

        // The member's Service is deleted in cluster b (a human, a broken
        // propagation): the operator's finalizer holds it while its member is
        // in the set, so it keeps routing and status says why.
        let services: Api<Service> = Api::namespaced(lab.clusters()[1].client.clone(), "default");
        let mut saved = services
            .get("svc-mongodb-1")
            .await
            .map_err(fail("Service"))?;
        lab.kubectl("b", &["delete", "service", "svc-mongodb-1", "--wait=false"])
            .await
            .map_err(fail("delete the Service"))?;
        until_in(lab, 1, "svc", "b holds the deleted Service", |m| {
            reason_is(m, "MemberServicesHeld", "MemberInReplicaSet")
        })
        .await?;
        let held = services
            .get("svc-mongodb-1")
            .await
            .map_err(fail("the held Service"))?;
        if held.metadata.deletion_timestamp.is_none() {
            return Err("the Service is held but not being deleted".into());
        }
        all_healthy(&sampler, &hosts, Duration::from_secs(60)).await?;

        // Released by hand, as the runbook says; the operator keeps the
        // member (its address is recorded on its StatefulSet): no remove, no
        // re-add while its Service is gone.
        let index = held
            .metadata
            .finalizers
            .unwrap_or_default()
            .iter()
            .position(|f| f == "middleware.fedstate.io/member-service")
            .ok_or("the held Service lacks the operator's finalizer")?;
        let release = format!(
            r#"[{{"op":"test","path":"/metadata/finalizers/{index}","value":"middleware.fedstate.io/member-service"}},{{"op":"remove","path":"/metadata/finalizers/{index}"}}]"#
        );
        let seen = log_lines(lab, 1);
        lab.kubectl(
            "b",
            &["patch", "service", "svc-mongodb-1", "--type", "json", "-p", &release],
        )
        .await
        .map_err(fail("release the Service"))?;
        let deadline = Instant::now() + Duration::from_secs(30);
        while services
            .get_opt("svc-mongodb-1")
            .await
            .map_err(fail("Service"))?
            .is_some()
        {
            if Instant::now() > deadline {
                return Err("the Service released by hand did not go".into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Wait for the pass the deletion triggers in b, then hold a while.
        let deadline = Instant::now() + Duration::from_secs(30);
        while !std::fs::read_to_string(lab.operator_log(1))
            .unwrap_or_default()
            .lines()
            .skip(seen)
            .any(|l| l.contains("Service.v1./svc-mongodb-1") && l.contains(" planned "))
        {
            if Instant::now() > deadline {
                return Err("cluster b's operator never planned after the deletion".into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(Duration::from_secs(3)).await;
        let during = config(lab, "svc", &hosts).await?;
        // Restored as it was (same nodePort), as Karmada re-applies a
        // propagated object deleted in a member cluster (the lab's stand-in
        // does so only in its passes, which this scenario does not run).
        saved.metadata = ObjectMeta {
            name: saved.metadata.name.take(),
            namespace: saved.metadata.namespace.take(),
            labels: saved.metadata.labels.take(),
            annotations: saved.metadata.annotations.take(),
            ..ObjectMeta::default()
        };
        if let Some(spec) = saved.spec.as_mut() {
            spec.cluster_ip = None;
            spec.cluster_ips = None;
        }
        saved.status = None;
        services
            .create(&PostParams::default(), &saved)
            .await
            .map_err(fail("restore the Service"))?;
        let restored = member_host(lab, 1, "svc", 1).await?;
        all_healthy(&sampler, &hosts, Duration::from_secs(60)).await?;

        let mut sampler = sampler;
        let samples = sampler.stop();
        let acknowledged = match writer {
            Some(writer) => writer.stop_and_check().await?.len(),
            None => 0,
        };
        let last = config(lab, "svc", &hosts).await?;
        eprintln!(
            "{} samples, {} majority writes acknowledged, none lost; config version {} -> {} \
             (while the Service was gone: {}); member {member} restored at {restored}",
            samples.len(),
            acknowledged,
            version(&first),
            version(&last),
            version(&during)
        );
        if version(&during) != version(&first) || version(&last) != version(&first) {
            return Err("the config changed while a Service was missing".into());
        }
        if restored != member {
            return Err(format!(
                "the member's address moved: {member} -> {restored}"
            ));
        }
        Ok(())
    })
    .await;
}

/// The propagated credentials Secret of the inputs scenario, as a user
/// writes it in every cluster (Karmada propagates a user's Secret; the lab's
/// stand-in does not, so the test writes it). Named as the derived one would
/// be, so that the writer's helper finds the root user.
const INPUTS: &str = "inputs";
const INPUTS_SECRET: &str = "inputs-credentials";
const INPUTS_PASSWORD: &str = "lab-86-root-password";
/// A root password the set does not hold (never to be seen in a log).
const INPUTS_WRONG_PASSWORD: &str = "lab-86-not-the-root-password";

fn inputs_keyfile(seed: &str) -> String {
    use base64::Engine;
    let bytes: Vec<u8> = (0..96u32)
        .map(|i| seed.as_bytes()[i as usize % seed.len()].wrapping_add(i as u8))
        .collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn inputs_secret(keyfile: &str, password: &str) -> k8s_openapi::api::core::v1::Secret {
    use k8s_openapi::ByteString;
    k8s_openapi::api::core::v1::Secret {
        metadata: ObjectMeta {
            name: Some(INPUTS_SECRET.into()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([
            ("keyfile".into(), ByteString(keyfile.as_bytes().to_vec())),
            ("username".into(), ByteString(b"root".to_vec())),
            ("password".into(), ByteString(password.as_bytes().to_vec())),
        ])),
        ..Default::default()
    }
}

/// Writes (creates or replaces) the credentials Secret in cluster `index`.
async fn put_secret(lab: &Lab, index: usize, keyfile: &str, password: &str) -> Outcome {
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(lab.clusters()[index].client.clone(), "default");
    let secret = inputs_secret(keyfile, password);
    match secrets
        .get_opt(INPUTS_SECRET)
        .await
        .map_err(fail("Secret"))?
    {
        Some(found) => {
            let mut secret = secret;
            secret.metadata.resource_version = found.metadata.resource_version;
            secrets
                .replace(INPUTS_SECRET, &PostParams::default(), &secret)
                .await
                .map(drop)
                .map_err(fail("replace the Secret"))
        }
        None => secrets
            .create(&PostParams::default(), &secret)
            .await
            .map(drop)
            .map_err(fail("create the Secret")),
    }
}

/// The Ready condition of cluster `index`'s object: (status, reason, message).
async fn ready_of(lab: &Lab, index: usize) -> Result<(String, String, String), String> {
    let api: Api<mongodb_member_operator::api::MongoDB> =
        Api::namespaced(lab.clusters()[index].client.clone(), "default");
    let mongodb = api.get(INPUTS).await.map_err(fail("MongoDB"))?;
    Ok(ready_condition(&mongodb)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
        .unwrap_or_default())
}

/// Waits until cluster `index` reports Ready=False with `reason`, and a
/// Warning Event with that reason is listed by kubectl; returns the
/// condition's and the Event's messages.
async fn reported(lab: &Lab, index: usize, reason: &str) -> Result<(String, String), String> {
    let context = lab.clusters()[index].name.clone();
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let (status, found, message) = ready_of(lab, index).await?;
        if status == "False" && found == reason {
            let events = lab
                .kubectl(
                    &context,
                    &[
                        "get",
                        "events",
                        "--field-selector",
                        &format!("involvedObject.name={INPUTS},reason={reason},type=Warning"),
                        "-o",
                        "jsonpath={.items[*].message}",
                    ],
                )
                .await
                .map_err(fail("kubectl get events"))?;
            if !events.trim().is_empty() {
                return Ok((message, events.trim().to_owned()));
            }
        }
        if Instant::now() > deadline {
            return Err(format!(
                "cluster {context} does not report {reason}: Ready {status} {found}: {message}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The uids of the member StatefulSets and pods of cluster `index`, by kind and name.
async fn workload_of(lab: &Lab, index: usize) -> Result<BTreeMap<String, String>, String> {
    use k8s_openapi::api::apps::v1::StatefulSet;
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::ListParams;
    use kube::ResourceExt;
    let client = lab.clusters()[index].client.clone();
    let selector = ListParams::default().labels(&format!("app.kubernetes.io/instance={INPUTS}"));
    let mut found = BTreeMap::new();
    for set in Api::<StatefulSet>::namespaced(client.clone(), "default")
        .list(&selector)
        .await
        .map_err(fail("StatefulSets"))?
    {
        found.insert(
            format!("statefulset/{}", set.name_any()),
            set.uid().unwrap_or_default(),
        );
    }
    for pod in Api::<Pod>::namespaced(client, "default")
        .list(&selector)
        .await
        .map_err(fail("pods"))?
    {
        found.insert(
            format!("pod/{}", pod.name_any()),
            pod.uid().unwrap_or_default(),
        );
    }
    Ok(found)
}

/// Holds `hold` and checks that the config and cluster `index`'s workload
/// stay as they were.
async fn nothing_changes(
    lab: &Lab,
    index: usize,
    hosts: &[String],
    version_before: i64,
    workload_before: &BTreeMap<String, String>,
    hold: Duration,
) -> Outcome {
    tokio::time::sleep(hold).await;
    let now = version(&config(lab, INPUTS, hosts).await?);
    if now != version_before {
        return Err(format!(
            "the config changed while the input was wrong: version {version_before} -> {now}"
        ));
    }
    let workload = workload_of(lab, index).await?;
    if &workload != workload_before {
        return Err(format!(
            "cluster {}'s members changed while the input was wrong: {workload_before:?} -> \
             {workload:?}",
            lab.clusters()[index].name
        ));
    }
    Ok(())
}

/// Wrong inputs on a running set: b's hostconf corrupted, c's
/// credentials Secret deleted, a wrong root password in b's Secret, a keyfile
/// in c that the others do not share; each reported where it is wrong and put
/// back, while a w:"majority" writer runs. The first three change nothing; the
/// keyfile is half a rotation: c's member runs the old key and the new one and
/// waits there, restarted once (one member down), until the keyfile is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_hostconf_credentials_and_keyfile_are_reported_and_change_nothing() {
    scenario(86, 3, async |lab| {
        let started = Instant::now();
        let phase = |what: &str| eprintln!("[{:>5.1}s] {what}", started.elapsed().as_secs_f64());
        let keyfile = inputs_keyfile("wrong inputs shared keyfile");
        // The user's Secret in every cluster, and the user's own field of the
        // MongoDB object naming it, written before Karmada's first write (the
        // manifest names no secret).
        for index in 0..3 {
            put_secret(lab, index, &keyfile, INPUTS_PASSWORD).await?;
        }
        let reference = format!("  credentialsSecretRef:\n    name: {INPUTS_SECRET}\n");
        apply_user_fields(lab, INPUTS, "lab-credentials", &reference).await?;
        let control_plane = lab.control_plane();
        control_plane
            .apply(&request(INPUTS, "a=2,b=2,c=1"))
            .await
            .map_err(fail("apply"))?;
        ready(lab, INPUTS, "a=2,b=2,c=1").await?;
        phase("ready");
        let hosts = hosts_of(lab, 0, INPUTS).await?;
        let first = config(lab, INPUTS, &hosts).await?;
        let writer = TimedMajorityWriter::start(lab, INPUTS, &hosts).await?;
        if let Some(writer) = &writer {
            writer.wait_acknowledged(5, Duration::from_secs(60)).await?;
        }
        let mut sampler = SetSampler::start(lab.network().clone(), hosts.clone(), SAMPLE_EVERY);
        let hold = Duration::from_secs(3);
        let v = version(&first);

        // 1. Cluster b's hostconf corrupted: a member list that does not parse.
        let config_maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
            Api::namespaced(lab.clusters()[1].client.clone(), "default");
        let hostconf_name = format!("{INPUTS}-hostconf");
        let saved = config_maps
            .get(&hostconf_name)
            .await
            .map_err(fail("hostconf"))?;
        let workload = workload_of(lab, 1).await?;
        let mut corrupted = saved.clone();
        corrupted.data = Some(BTreeMap::from([(
            "datas".to_string(),
            "host:'127.86.1.1:not-a-port'\nthis is not a member list".to_string(),
        )]));
        config_maps
            .replace(&hostconf_name, &PostParams::default(), &corrupted)
            .await
            .map_err(fail("corrupt hostconf"))?;
        let (condition, event) = reported(lab, 1, "HostconfInvalid").await?;
        phase(&format!(
            "1. b reports HostconfInvalid: {condition} | Event: {event}"
        ));
        nothing_changes(lab, 1, &hosts, v, &workload, hold).await?;
        let mut restored = saved.clone();
        restored.metadata.resource_version = None;
        config_maps
            .replace(&hostconf_name, &PostParams::default(), &restored)
            .await
            .map_err(fail("restore hostconf"))?;
        ready(lab, INPUTS, "a=2,b=2,c=1").await?;
        phase("1. hostconf restored: ready");

        // 2. The credentials Secret missing in cluster c.
        let workload = workload_of(lab, 2).await?;
        lab.kubectl("c", &["delete", "secret", INPUTS_SECRET])
            .await
            .map_err(fail("delete the Secret"))?;
        let (condition, event) = reported(lab, 2, "CredentialsSecretMissing").await?;
        phase(&format!(
            "2. c reports CredentialsSecretMissing: {condition} | Event: {event}"
        ));
        nothing_changes(lab, 2, &hosts, v, &workload, hold).await?;
        put_secret(lab, 2, &keyfile, INPUTS_PASSWORD).await?;
        ready(lab, INPUTS, "a=2,b=2,c=1").await?;
        phase("2. Secret restored: ready");

        // 3. A wrong root password in cluster b's Secret: the members refuse
        // it. (The pods' revision does not cover the root password, and b is
        // not the rsInit cluster: nothing rolls and nothing is set.)
        let workload = workload_of(lab, 1).await?;
        put_secret(lab, 1, &keyfile, INPUTS_WRONG_PASSWORD).await?;
        let (condition, event) = reported(lab, 1, "CredentialsRefused").await?;
        phase(&format!(
            "3. b reports CredentialsRefused: {condition} | Event: {event}"
        ));
        if condition.contains(INPUTS_WRONG_PASSWORD) || event.contains(INPUTS_WRONG_PASSWORD) {
            return Err("the password is in the condition or the Event".into());
        }
        nothing_changes(lab, 1, &hosts, v, &workload, hold).await?;
        put_secret(lab, 1, &keyfile, INPUTS_PASSWORD).await?;
        ready(lab, INPUTS, "a=2,b=2,c=1").await?;
        phase("3. password restored: ready");

        // 4. A keyfile in cluster c that differs from the other clusters'.
        // c rolls its member onto a keyfile of the old key and the new one
        // and stops there (`NewKeyMissingElsewhere`): the others never hold
        // the new key. Nobody is cut off; the set writes on.
        let watcher = UnhealthyWatcher::start(mongo(lab, INPUTS, &hosts, false).await?);
        let other = inputs_keyfile("a keyfile only cluster c has");
        put_secret(lab, 2, &other, INPUTS_PASSWORD).await?;
        let deadline = Instant::now() + Duration::from_secs(90);
        let degraded = loop {
            let api: Api<mongodb_member_operator::api::MongoDB> =
                Api::namespaced(lab.clusters()[2].client.clone(), "default");
            let found = api.get(INPUTS).await.map_err(fail("MongoDB"))?;
            let keyfile = found.status.as_ref().and_then(|s| {
                s.conditions
                    .iter()
                    .find(|c| c.type_ == "KeyfileInPlace" && c.status == "False")
                    .map(|c| format!("{}: {}", c.reason, c.message))
            });
            if let Some(keyfile) = keyfile.filter(|k| k.starts_with("NewKeyMissingElsewhere")) {
                break keyfile;
            }
            if Instant::now() > deadline {
                return Err("cluster c never reported its new key missing elsewhere".into());
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        };
        let (ready_c, up_to_date) = {
            let api: Api<mongodb_member_operator::api::MongoDB> =
                Api::namespaced(lab.clusters()[2].client.clone(), "default");
            let found = api.get(INPUTS).await.map_err(fail("MongoDB"))?;
            let of = |type_: &str| {
                found
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.iter().find(|c| c.type_ == type_))
                    .map(|c| format!("{} {}: {}", c.status, c.reason, c.message))
                    .unwrap_or_default()
            };
            (of("Ready"), of("UpToDate"))
        };
        phase(&format!(
            "4. c: KeyfileInPlace {degraded} | Ready {ready_c} | UpToDate {up_to_date}"
        ));
        let before = writer.as_ref().map_or(0, |w| w.acknowledged().len());
        tokio::time::sleep(hold).await;
        let after = writer.as_ref().map_or(1, |w| w.acknowledged().len());
        if writer.is_some() && after <= before {
            return Err("no majority write acknowledged while c's keyfile differs".into());
        }
        put_secret(lab, 2, &keyfile, INPUTS_PASSWORD).await?;
        ready(lab, INPUTS, "a=2,b=2,c=1").await?;
        all_healthy(&sampler, &hosts, Duration::from_secs(60)).await?;
        let most_unhealthy = watcher.stop();
        phase(&format!(
            "4. keyfile restored: every member healthy, ready; at most {most_unhealthy} member(s) \
             unhealthy in the primary's view; {} writes acknowledged while c's keyfile differed",
            after - before
        ));
        if most_unhealthy > 1 {
            return Err(format!("{most_unhealthy} members were down at once"));
        }

        let samples = sampler.stop();
        let acknowledged = match writer {
            Some(writer) => writer.stop_and_check().await?.len(),
            None => 0,
        };
        let last = config(lab, INPUTS, &hosts).await?;
        let most_down = samples.iter().map(|s| s.down().len()).max().unwrap_or(0);
        eprintln!(
            "{} samples, at most {most_down} member(s) down, {} majority writes acknowledged, \
             none lost; config version {} -> {}; {:.0} s",
            samples.len(),
            acknowledged,
            version(&first),
            version(&last),
            started.elapsed().as_secs_f64()
        );
        if replica_set_id(&first) != replica_set_id(&last) || version(&last) >= 10_000 {
            return Err("second initiate or forced reconfig detected".into());
        }
        for index in 0..3 {
            let log = std::fs::read_to_string(lab.operator_log(index)).unwrap_or_default();
            if log.contains(INPUTS_WRONG_PASSWORD) || log.contains(INPUTS_PASSWORD) {
                return Err(format!("operator {index} logged a root password"));
            }
        }
        one_primary_per_term(&samples)
    })
    .await;
}
