//! TLS (`spec.tls`), set by a FedState user through an OverridePolicy, with
//! each cluster's certificate Secret its own (its VIP as an IP SAN, one CA
//! for the set): a set created at requireTLS serves TLS only, and an
//! application reaches it with `tls=true` and the CA alone; a certificate
//! without the cluster's VIP is refused before any member is built with it.
//!
//! Labs 102 and 103.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::ByteString;
use kube::api::{ListParams, PostParams};
use kube::Api;
use kube::ResourceExt;
use lab::lab::Lab;
use lab::observe::SetSampler;
use mongod_sim::pki::{Pki, Validity};
use mongodb::bson::doc;
use mongodb::options::{ClientOptions, ServerAddress, Tls, TlsOptions};

use crate::harness::*;
use federation_sim::control_plane::InstanceRequest;

pub(crate) const CERTIFICATE_SECRET: &str = "member-certificate";
pub(crate) const CA: &str = "lab-ca";

/// Each cluster's certificate Secret, as cert-manager writes it: a leaf
/// for `ips` (the cluster's VIP, unless a test leaves it out), signed by
/// the one CA.
async fn put_certificates(lab: &Lab, pki: &Pki, ips_of: impl Fn(&str) -> Vec<String>) -> Outcome {
    for cluster in lab.clusters() {
        let ips = ips_of(&cluster.vip.to_string());
        let ips: Vec<&str> = ips.iter().map(String::as_str).collect();
        let subject = format!("/O=lab/OU=tls/CN={}", cluster.name);
        let files = pki.leaf_files(CA, &cluster.name, &ips, &subject, Validity::Now);
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(CERTIFICATE_SECRET.into()),
                ..ObjectMeta::default()
            },
            type_: Some("kubernetes.io/tls".into()),
            data: Some(BTreeMap::from([
                ("tls.crt".into(), ByteString(files.certificate)),
                ("tls.key".into(), ByteString(files.key)),
                ("ca.crt".into(), ByteString(files.ca)),
            ])),
            ..Secret::default()
        };
        Api::<Secret>::namespaced(cluster.client.clone(), "default")
            .create(&PostParams::default(), &secret)
            .await
            .map_err(fail("create the certificate Secret"))?;
    }
    Ok(())
}

/// FedState's instance with `spec.tls` at `mode` added in every cluster by
/// an OverridePolicy, as a FedState user does it (on a new or a running set).
async fn apply_at_mode(lab: &Lab, name: &str, split: &str, mode: &str) -> Outcome {
    apply_request_at_mode(lab, &request(name, split), mode).await
}

/// [`apply_at_mode`] for any instance request (another image).
async fn apply_request_at_mode(lab: &Lab, request: &InstanceRequest, mode: &str) -> Outcome {
    apply_tls(lab, request, tls_at(mode)).await
}

/// `spec.tls` at `mode` with the clusters' certificate Secrets.
pub(crate) fn tls_at(mode: &str) -> serde_json::Value {
    serde_json::json!({
        "mode": mode,
        "certificateSecretRef": {"name": CERTIFICATE_SECRET},
        "allowConnectionsWithoutCertificates": true,
    })
}

/// `request` with `spec.tls` set to `tls` in every cluster by an
/// OverridePolicy.
pub(crate) async fn apply_tls(
    lab: &Lab,
    request: &InstanceRequest,
    tls: serde_json::Value,
) -> Outcome {
    let mut submission = federation_sim::control_plane::ToSubmission::to_submission(request);
    submission.lab.tls = Some(tls);
    lab.control_plane()
        .apply(&submission)
        .await
        .map_err(fail("apply"))
}

/// A set formed in a lab whose clusters hold their certificate Secrets,
/// created with `spec.tls` at a mode or without it, and Ready; FedState's
/// passes run while it lives.
pub(crate) struct FormedSet {
    pub(crate) pki: Pki,
    pub(crate) hosts: Vec<String>,
    _passes: ControlPlanePasses,
}

impl FormedSet {
    /// Instance `name` of `split` in lab `number`, at `mode` (`None`: no
    /// `spec.tls`), once every cluster says `TLSReady` when it is set.
    pub(crate) async fn form(
        lab: &Lab,
        number: u8,
        name: &str,
        split: &str,
        mode: Option<&str>,
    ) -> Result<FormedSet, String> {
        Self::form_from(lab, number, &request(name, split), split, mode).await
    }

    /// [`FormedSet::form`] from any instance request (another image).
    pub(crate) async fn form_from(
        lab: &Lab,
        number: u8,
        request: &InstanceRequest,
        split: &str,
        mode: Option<&str>,
    ) -> Result<FormedSet, String> {
        let name = request.name.as_str();
        let pki = Pki::new(&format!("lab-{number}"));
        pki.ca(CA);
        put_certificates(lab, &pki, |vip| vec![vip.to_string()]).await?;
        match mode {
            Some(mode) => apply_request_at_mode(lab, request, mode).await?,
            None => lab
                .control_plane()
                .apply(request)
                .await
                .map_err(fail("apply"))?,
        }
        let passes = ControlPlanePasses::start(lab);
        ready(lab, name, split).await?;
        if mode.is_some() {
            wait_for(
                lab,
                name,
                "TLSReady everywhere",
                lab.clusters().len(),
                |m| reason_is(m, "TLSReady", "TLSReady"),
            )
            .await?;
        }
        let hosts = hosts_of(lab, 0, name).await?;
        Ok(FormedSet {
            pki,
            hosts,
            _passes: passes,
        })
    }

    /// The CA file applications trust.
    pub(crate) fn ca_file(&self) -> String {
        self.pki.path(&format!("{CA}.pem"))
    }

    /// A w:"majority" writer over TLS with the CA alone.
    pub(crate) async fn tls_writer(
        &self,
        lab: &Lab,
        name: &str,
    ) -> Result<Option<MajorityWriter>, String> {
        let options = format!("&tls=true&tlsCAFile={}", self.ca_file());
        MajorityWriter::start_with(lab, name, &self.hosts, &options).await
    }
}

/// Fails when `samples` saw more than one member of the set down at once.
pub(crate) fn at_most_one_down(samples: &[lab::observe::SetSample]) -> Outcome {
    let most = lab::observe::most_down(samples)
        .map(|s| s.down().len())
        .unwrap_or(0);
    if most > 1 {
        return Err(format!("{most} members down at once"));
    }
    Ok(())
}

/// An application's client of one member: TLS with the CA file only.
fn tls_client(host: &str, ca_file: &str) -> Result<mongodb::Client, String> {
    let options = ClientOptions::builder()
        .hosts(vec![ServerAddress::parse(host).map_err(fail("host"))?])
        .direct_connection(true)
        .server_selection_timeout(Duration::from_secs(10))
        .tls(Tls::Enabled(
            TlsOptions::builder()
                .ca_file_path(std::path::PathBuf::from(ca_file))
                .build(),
        ))
        .build();
    mongodb::Client::with_options(options).map_err(fail("client"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_set_created_at_require_tls_serves_tls_only_and_an_application_reaches_it_with_the_ca() {
    const NAME: &str = "secure";
    const SPLIT: &str = "a=1,b=1,c=1";
    scenario(102, 3, async |lab| {
        let set = FormedSet::form(lab, 102, NAME, SPLIT, Some("requireTLS")).await?;
        let (hosts, ca_file) = (&set.hosts, set.ca_file());
        let writer = set.tls_writer(lab, NAME).await?;

        for host in hosts {
            tls_client(host, &ca_file)?
                .database("admin")
                .run_command(doc! {"hello": 1})
                .await
                .map_err(|e| format!("{host} over TLS with the CA only: {e}"))?;
            let plain = anonymous_direct(host)?
                .database("admin")
                .run_command(doc! {"hello": 1})
                .await;
            if plain.is_ok() {
                return Err(format!("{host} answered a plain connection at requireTLS"));
            }
        }
        for (cluster, mongodb) in statuses(lab, NAME).await? {
            let status = mongodb.status.unwrap_or_default();
            let modes: Vec<_> = status.local_members.iter().map(|m| m.tls_mode).collect();
            if modes
                .iter()
                .any(|m| m.map(|m| m.as_str()) != Some("requireTLS"))
            {
                return Err(format!("{cluster}: local members' modes {modes:?}"));
            }
            let certificate = status.tls.ok_or(format!("{cluster}: no status.tls"))?;
            if !certificate.subject.contains(&format!("CN={cluster}")) {
                return Err(format!("{cluster}: status.tls {certificate:?}"));
            }
        }
        if let Some(writer) = writer {
            writer.stop_and_check().await?;
        }
        Ok(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_without_the_clusters_vip_is_refused_and_nothing_is_built() {
    const NAME: &str = "refused";
    scenario(103, 2, async |lab| {
        let pki = Pki::new("lab-103");
        pki.ca(CA);
        put_certificates(lab, &pki, |_| vec!["10.255.0.1".to_string()]).await?;
        apply_at_mode(lab, NAME, "a=1,b=1", "requireTLS").await?;
        let _passes = ControlPlanePasses::start(lab);
        wait_for(lab, NAME, "TLSCertificateInvalid everywhere", 2, |m| {
            reason_is(m, "Ready", "TLSCertificateInvalid")
        })
        .await?;
        for cluster in lab.clusters() {
            let built = Api::<StatefulSet>::namespaced(cluster.client.clone(), "default")
                .list(&ListParams::default())
                .await
                .map_err(fail("StatefulSets"))?;
            if !built.items.is_empty() {
                return Err(format!("{}: StatefulSets were built", cluster.name));
            }
        }
        Ok(())
    })
    .await;
}

/// The `--tlsMode` each member pod of `name` runs (absent: `disabled`), by
/// cluster and pod.
async fn modes_run(lab: &Lab, name: &str) -> Result<BTreeMap<String, String>, String> {
    option_run(lab, name, "--tlsMode", "disabled").await
}

/// The value of mongod's `option` in each member pod of `name` (`absent`
/// when not given), by cluster and pod; pods being deleted left out.
pub(crate) async fn option_run(
    lab: &Lab,
    name: &str,
    option: &str,
    absent: &str,
) -> Result<BTreeMap<String, String>, String> {
    let selector = ListParams::default().labels(&format!("app.kubernetes.io/instance={name}"));
    let mut found = BTreeMap::new();
    for cluster in lab.clusters() {
        let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), "default");
        for pod in pods.list(&selector).await.map_err(fail("pods"))? {
            let Some(mongod) = pod
                .spec
                .iter()
                .flat_map(|s| s.containers.iter())
                .find(|c| c.name == "mongod")
            else {
                continue;
            };
            if pod.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let args = mongod.args.clone().unwrap_or_default();
            let value = args
                .iter()
                .skip_while(|a| *a != option)
                .nth(1)
                .cloned()
                .unwrap_or_else(|| absent.into());
            found.insert(format!("{}/{}", cluster.name, pod.name_any()), value);
        }
    }
    Ok(found)
}

const MODES: [&str; 4] = ["disabled", "allowTLS", "preferTLS", "requireTLS"];

/// Polls the modes the pods run until every one of `count` runs `mode`,
/// failing as soon as two run modes two steps apart.
async fn until_every_pod_runs(
    lab: &Lab,
    name: &str,
    count: usize,
    mode: &str,
    seen: &mut Vec<BTreeMap<String, String>>,
) -> Outcome {
    let ladder = Ladder {
        option: "--tlsMode",
        rungs: &MODES,
    };
    ladder
        .until_every_pod_runs(lab, name, count, mode, seen)
        .await
}

/// One of mongod's options whose values the set climbs one at a time.
pub(crate) struct Ladder {
    /// The option (`--tlsMode`); its absence means the first rung.
    pub(crate) option: &'static str,
    /// Its values, weakest first.
    pub(crate) rungs: &'static [&'static str],
}

impl Ladder {
    /// Polls the option's value in every member pod of `name` until every
    /// one of `count` runs `target`, failing as soon as two run values two
    /// rungs apart; each new picture is kept in `seen`.
    pub(crate) async fn until_every_pod_runs(
        &self,
        lab: &Lab,
        name: &str,
        count: usize,
        target: &str,
        seen: &mut Vec<BTreeMap<String, String>>,
    ) -> Outcome {
        let rank = |value: &str| {
            self.rungs
                .iter()
                .position(|r| *r == value)
                .unwrap_or(usize::MAX)
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(420);
        loop {
            let run = option_run(lab, name, self.option, self.rungs[0]).await?;
            let ranks: Vec<usize> = run.values().map(|m| rank(m)).collect();
            if let (Some(low), Some(high)) = (ranks.iter().min(), ranks.iter().max()) {
                if high - low > 1 {
                    return Err(format!("{} two steps apart: {run:?}", self.option));
                }
            }
            if seen.last() != Some(&run) {
                eprintln!("{}: {run:?}", self.option);
                seen.push(run.clone());
            }
            if run.len() == count && run.values().all(|m| m == target) {
                return Ok(());
            }
            if std::time::Instant::now() > deadline {
                return Err(format!("not every pod at {target} after 420 s: {run:?}"));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_set_goes_live_to_require_tls_one_mode_at_a_time_with_one_member_down() {
    const NAME: &str = "golive";
    const SPLIT: &str = "a=1,b=1,c=1";
    scenario(104, 3, async |lab| {
        let set = FormedSet::form(lab, 104, NAME, SPLIT, None).await?;
        let hosts = &set.hosts;
        let plain_writer = MajorityWriter::start(lab, NAME, hosts).await?;
        let mut sampler = SetSampler::start(
            lab.network().clone(),
            hosts.clone(),
            Duration::from_millis(50),
        );
        let mut seen = Vec::new();

        apply_at_mode(lab, NAME, SPLIT, "requireTLS").await?;
        // From allowTLS on every member takes TLS, and up to preferTLS plain:
        // the TLS writer starts at allowTLS, the plain one stops there.
        until_every_pod_runs(lab, NAME, 3, "allowTLS", &mut seen).await?;
        let tls_writer = set.tls_writer(lab, NAME).await?;
        if let Some(writer) = plain_writer {
            writer
                .stop_and_check()
                .await
                .map_err(|e| format!("the plain writer: {e}"))?;
        }
        until_every_pod_runs(lab, NAME, 3, "requireTLS", &mut seen).await?;
        wait_for(lab, NAME, "TLSReady everywhere", 3, |m| {
            reason_is(m, "TLSReady", "TLSReady")
        })
        .await?;
        ready(lab, NAME, SPLIT).await?;
        at_most_one_down(&sampler.stop())?;
        let steps: Vec<&str> = MODES
            .iter()
            .copied()
            .filter(|mode| seen.iter().any(|run| run.values().all(|m| m == mode)))
            .collect();
        if steps != MODES {
            return Err(format!("the set did not run each mode in turn: {steps:?}"));
        }
        for host in hosts {
            let plain = anonymous_direct(host)?
                .database("admin")
                .run_command(doc! {"hello": 1})
                .await;
            if plain.is_ok() {
                return Err(format!("{host} answered a plain connection at requireTLS"));
            }
        }
        if let Some(writer) = tls_writer {
            writer
                .stop_and_check()
                .await
                .map_err(|e| format!("the TLS writer: {e}"))?;
        }
        Ok(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_set_at_require_tls_steps_back_down_to_disabled_through_an_operator_restart() {
    const NAME: &str = "golow";
    const SPLIT: &str = "a=1,b=1,c=1";
    scenario(105, 3, async |lab| {
        let set = FormedSet::form(lab, 105, NAME, SPLIT, Some("requireTLS")).await?;
        let hosts = &set.hosts;
        let tls_writer = set.tls_writer(lab, NAME).await?;
        let mut sampler = SetSampler::start(
            lab.network().clone(),
            hosts.clone(),
            Duration::from_millis(50),
        );
        let mut seen = Vec::new();

        apply_at_mode(lab, NAME, SPLIT, "disabled").await?;
        // Down to preferTLS every member takes plain connections too, and
        // TLS down to allowTLS: the writers change over at preferTLS.
        until_every_pod_runs(lab, NAME, 3, "preferTLS", &mut seen).await?;
        let plain_writer = MajorityWriter::start(lab, NAME, hosts).await?;
        if let Some(writer) = tls_writer {
            writer
                .stop_and_check()
                .await
                .map_err(|e| format!("the TLS writer: {e}"))?;
        }
        // Cluster a's operator dies mid-step and comes back 3 s later: it
        // plans again from what the members report.
        let deadline = std::time::Instant::now() + Duration::from_secs(300);
        while !modes_run(lab, NAME)
            .await?
            .values()
            .any(|m| m == "allowTLS")
        {
            if std::time::Instant::now() > deadline {
                return Err("no member reached allowTLS".into());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        lab.kill_operator(0).await.map_err(fail("kill"))?;
        tokio::time::sleep(Duration::from_secs(3)).await;
        lab.restart_operator(0).map_err(fail("restart"))?;
        until_every_pod_runs(lab, NAME, 3, "disabled", &mut seen).await?;
        wait_for(lab, NAME, "TLSReady at disabled everywhere", 3, |m| {
            reason_is(m, "TLSReady", "TLSReady")
        })
        .await?;
        ready(lab, NAME, SPLIT).await?;
        at_most_one_down(&sampler.stop())?;
        let steps: Vec<&str> = MODES
            .iter()
            .rev()
            .copied()
            .filter(|mode| seen.iter().any(|run| run.values().all(|m| m == mode)))
            .collect();
        if steps != ["requireTLS", "preferTLS", "allowTLS", "disabled"] {
            return Err(format!("the set did not run each mode in turn: {steps:?}"));
        }
        if let Some(writer) = plain_writer {
            writer
                .stop_and_check()
                .await
                .map_err(|e| format!("the plain writer: {e}"))?;
        }
        Ok(())
    })
    .await;
}

/// The uid of each member pod of `name`, by cluster and pod.
pub(crate) async fn pod_uids(lab: &Lab, name: &str) -> Result<BTreeMap<String, String>, String> {
    let pods = member_pods(lab, name).await?;
    Ok(pods.into_iter().map(|(pod, (uid, _))| (pod, uid)).collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_cut_off_mid_change_holds_the_next_step_until_it_is_back() {
    const NAME: &str = "cutoff";
    const SPLIT: &str = "a=1,b=1,c=1";
    scenario(106, 3, async |lab| {
        let set = FormedSet::form(lab, 106, NAME, SPLIT, None).await?;
        let mut seen = Vec::new();

        apply_at_mode(lab, NAME, SPLIT, "requireTLS").await?;
        until_every_pod_runs(lab, NAME, 3, "allowTLS", &mut seen).await?;
        let writer = set.tls_writer(lab, NAME).await?;
        // Cluster c is cut off from the others while every member runs
        // allowTLS: a and b wait for it, and neither restarts its member
        // (with c away, a second member down would leave no majority). c may
        // have restarted its own member onto preferTLS just before the cut,
        // under a lease taken while it could: then the step waits for a's and
        // b's members, not c's, and only `Degraded` names c.
        let c = &lab.clusters()[2];
        let c_host = c.vip.to_string();
        lab.network().cut_site(&c.name);
        for index in 0..2 {
            until_in(
                lab,
                index,
                NAME,
                "c's member seen down, the step held for it",
                |m| {
                    reason_saying(m, "Degraded", "MembersUnhealthy", &c_host)
                        && reason_is(m, "TLSReady", "TLSWaitingForPeers")
                },
            )
            .await?;
        }
        // A restart decided before the cut may still be finishing: from here
        // on, with c's member seen down, none may start.
        let before = pod_uids(lab, NAME).await?;
        let held_until = std::time::Instant::now() + Duration::from_secs(15);
        while std::time::Instant::now() < held_until {
            let run = modes_run(lab, NAME).await?;
            if run.values().any(|m| m == "requireTLS") {
                return Err(format!(
                    "a member reached requireTLS with c cut off: {run:?}"
                ));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let after = pod_uids(lab, NAME).await?;
        let restarted: Vec<&String> = before
            .iter()
            .filter(|(pod, uid)| !pod.starts_with("c/") && after.get(*pod) != Some(uid))
            .map(|(pod, _)| pod)
            .collect();
        if !restarted.is_empty() {
            return Err(format!("restarted while c was cut off: {restarted:?}"));
        }
        lab.network().heal_site(&c.name);
        until_every_pod_runs(lab, NAME, 3, "requireTLS", &mut seen).await?;
        wait_for(lab, NAME, "TLSReady everywhere", 3, |m| {
            reason_is(m, "TLSReady", "TLSReady")
        })
        .await?;
        ready(lab, NAME, SPLIT).await?;
        if let Some(writer) = writer {
            writer
                .stop_and_check()
                .await
                .map_err(|e| format!("the TLS writer: {e}"))?;
        }
        Ok(())
    })
    .await;
}
