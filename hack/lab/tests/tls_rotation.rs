//! A running set's certificates changed under a w:"majority" writer, read
//! by `openssl s_client` from every member: a renewed certificate is loaded
//! by every member without a restart (`rotateCertificates`, once the kubelet
//! refreshed the files); a new CA goes in as a bundle holding both CAs,
//! a certificate from the new CA is held while a member does not trust it
//! yet, and a bundle without the old CA while a member serves a certificate
//! it signed.
//!
//! Before 5.0 a renewed certificate rolls the members instead.
//!
//! Labs 107, 108 and 109.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kube::api::PostParams;
use kube::Api;
use lab::lab::Lab;
use lab::observe::SetSampler;

use crate::harness::*;
use crate::tls::{at_most_one_down, pod_uids, FormedSet, CA, CERTIFICATE_SECRET};

/// Puts `certificate`, `key` and `ca` into cluster `index`'s certificate
/// Secret, as cert-manager does when it renews.
async fn renew(lab: &Lab, index: usize, certificate: &[u8], key: &[u8], ca: &[u8]) -> Outcome {
    let api: Api<Secret> = Api::namespaced(lab.clusters()[index].client.clone(), "default");
    let mut secret = api
        .get(CERTIFICATE_SECRET)
        .await
        .map_err(fail("read the certificate Secret"))?;
    secret.data = Some(BTreeMap::from([
        ("tls.crt".into(), ByteString(certificate.to_vec())),
        ("tls.key".into(), ByteString(key.to_vec())),
        ("ca.crt".into(), ByteString(ca.to_vec())),
    ]));
    api.replace(CERTIFICATE_SECRET, &PostParams::default(), &secret)
        .await
        .map_err(fail("renew the certificate Secret"))?;
    Ok(())
}

/// openssl's SHA-256 fingerprint of the PEM certificate `pem`.
fn fingerprint(pem: &[u8]) -> Result<String, String> {
    let mut child = Command::new("openssl")
        .args(["x509", "-noout", "-fingerprint", "-sha256"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(fail("openssl x509"))?;
    child
        .stdin
        .take()
        .ok_or("no stdin")?
        .write_all(pem)
        .map_err(fail("openssl x509 input"))?;
    let out = child.wait_with_output().map_err(fail("openssl x509"))?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The fingerprint of the certificate `host` serves, as `openssl s_client`
/// reads it.
async fn served(host: String) -> Result<String, String> {
    let out = tokio::task::spawn_blocking(move || {
        Command::new("timeout")
            .args(["10", "openssl", "s_client", "-connect", &host])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
    })
    .await
    .map_err(fail("s_client task"))?
    .map_err(fail("openssl s_client"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let begin = text
        .find("-----BEGIN CERTIFICATE-----")
        .ok_or("no certificate served")?;
    let end = text[begin..]
        .find("-----END CERTIFICATE-----")
        .ok_or("a cut certificate")?;
    fingerprint(text[begin..begin + end + 25].as_bytes())
}

/// Until each of `hosts` serves the certificate its VIP maps to in `expected`.
async fn until_served(hosts: &[String], expected: &BTreeMap<String, String>) -> Outcome {
    let vip_of = |host: &String| {
        host.rsplit_once(':')
            .map_or(host.clone(), |(vip, _)| vip.into())
    };
    if let Some(vip) = expected
        .keys()
        .find(|vip| !hosts.iter().any(|h| vip_of(h) == **vip))
    {
        return Err(format!("no member at {vip} among {hosts:?}"));
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(420);
    loop {
        let mut wrong = Vec::new();
        for host in hosts {
            let Some(want) = expected.get(&vip_of(host)) else {
                continue;
            };
            match served(host.clone()).await {
                Ok(got) if &got == want => {}
                Ok(got) => wrong.push(format!("{host} serves {got}")),
                Err(e) => wrong.push(format!("{host}: {e}")),
            }
        }
        if wrong.is_empty() {
            return Ok(());
        }
        if std::time::Instant::now() > deadline {
            return Err(format!("after 420 s: {wrong:?}"));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Each cluster's certificate renewed (same CA) on a set of `image` formed
/// at requireTLS in lab `number`, until every member serves its new one;
/// the member pods as they were before and after.
async fn renew_every_certificate(
    lab: &Lab,
    number: u8,
    image: &str,
) -> Result<(PodsRun, PodsRun), String> {
    const NAME: &str = "renewal";
    const SPLIT: &str = "a=1,b=1,c=1";
    let mut request = request(NAME, SPLIT);
    request.image = image.into();
    let set = FormedSet::form_from(lab, number, &request, SPLIT, Some("requireTLS")).await?;
    let writer = set.tls_writer(lab, NAME).await?;
    let mut sampler = SetSampler::start(
        lab.network().clone(),
        set.hosts.clone(),
        Duration::from_millis(50),
    );
    let before = member_pods(lab, NAME).await?;

    let mut expected = BTreeMap::new();
    for (index, cluster) in lab.clusters().iter().enumerate() {
        let vip = cluster.vip.to_string();
        let file = format!("{}-renewed", cluster.name);
        let subject = format!("/O=lab/OU=tls/CN={file}");
        let files = set.pki.leaf_files(
            CA,
            &file,
            &[vip.as_str()],
            &subject,
            mongod_sim::pki::Validity::Now,
        );
        renew(lab, index, &files.certificate, &files.key, &files.ca).await?;
        expected.insert(vip, fingerprint(&files.certificate)?);
    }
    until_served(&set.hosts, &expected).await?;
    wait_for(lab, NAME, "the renewed certificates in status", 3, |m| {
        reason_is(m, "TLSReady", "TLSReady")
            && m.status
                .as_ref()
                .and_then(|s| s.tls.as_ref())
                .is_some_and(|tls| tls.subject.contains("-renewed"))
    })
    .await?;
    ready(lab, NAME, SPLIT).await?;
    at_most_one_down(&sampler.stop())?;
    if let Some(writer) = writer {
        writer.stop_and_check().await?;
    }
    let after = member_pods(lab, NAME).await?;
    Ok((before, after))
}

/// Each member pod's uid and its containers' restarts, by cluster and pod.
type PodsRun = BTreeMap<String, (String, i32)>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewed_certificate_is_loaded_by_every_member_without_a_restart() {
    scenario(107, 3, async |lab| {
        let (before, after) = renew_every_certificate(lab, 107, "mongo:7.0").await?;
        if before != after {
            return Err(format!("pods restarted: {before:?} → {after:?}"));
        }
        for index in 0..3 {
            let reasons = event_reasons_in(lab, index, "renewal").await?;
            if !reasons.iter().any(|r| r == "CertificateRotated") {
                return Err(format!(
                    "cluster {index}: no CertificateRotated in {reasons:?}"
                ));
            }
        }
        Ok(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn before_5_0_a_renewed_certificate_rolls_the_members_one_at_a_time() {
    scenario(109, 3, async |lab| {
        let (before, after) = renew_every_certificate(lab, 109, "mongo:4.4.29").await?;
        let replaced = before
            .iter()
            .filter(|(pod, (uid, _))| after.get(*pod).is_some_and(|(new, _)| new != uid))
            .count();
        if replaced != before.len() {
            return Err(format!("not every pod replaced: {before:?} → {after:?}"));
        }
        Ok(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_ca_goes_in_as_a_bundle_first_and_its_certificates_wait_until_trusted() {
    const NAME: &str = "newca";
    const SPLIT: &str = "a=1,b=1,c=1";
    const NEW_CA: &str = "lab-ca-2";
    scenario(108, 3, async |lab| {
        let set = FormedSet::form(lab, 108, NAME, SPLIT, Some("requireTLS")).await?;
        let pki = &set.pki;
        pki.ca(NEW_CA);
        let read = |file: &str| std::fs::read(pki.path(file)).map_err(fail("read"));
        let both = [read(&format!("{CA}.pem"))?, read(&format!("{NEW_CA}.pem"))?].concat();
        let both_file = pki.path("both.pem");
        std::fs::write(&both_file, &both).map_err(fail("write both"))?;
        let options = format!("&tls=true&tlsCAFile={both_file}");
        let writer = MajorityWriter::start_with(lab, NAME, &set.hosts, &options).await?;
        let mut sampler = SetSampler::start(
            lab.network().clone(),
            set.hosts.clone(),
            Duration::from_millis(50),
        );
        let vip = |index: usize| lab.clusters()[index].vip.to_string();

        // Cluster a's certificate from the new CA, with both CAs: its bundle
        // goes in first; its certificate waits, as b and c trust only the
        // old CA.
        let a_vip = vip(0);
        let subject = "/O=lab/OU=tls/CN=a-new";
        let new_a = pki.leaf_files(
            NEW_CA,
            "a-new",
            &[a_vip.as_str()],
            subject,
            mongod_sim::pki::Validity::Now,
        );
        renew(lab, 0, &new_a.certificate, &new_a.key, &both).await?;
        until_in(lab, 0, NAME, "a's new certificate held", |m| {
            reason_saying(
                m,
                "TLSReady",
                "TLSCertificateHeld",
                "refuses the certificate as a peer's",
            )
        })
        .await?;
        // The bundle rolls a's member; its old certificate stays, and it
        // restarts no more while the new one is held.
        let old_a = fingerprint(&read("a.crt")?)?;
        let old = BTreeMap::from([(a_vip.clone(), old_a.clone())]);
        until_served(&set.hosts, &old).await?;
        until_in(lab, 0, NAME, "a's bundle rolled in", |m| {
            reason_is(m, "UpToDate", "PodsOnRevision")
                && reason_is(m, "TLSReady", "TLSCertificateHeld")
        })
        .await?;
        let uids = pod_uids(lab, NAME).await?;
        let a_host = set
            .hosts
            .iter()
            .find(|h| h.starts_with(&format!("{a_vip}:")))
            .ok_or("no member of a")?;
        let held_until = std::time::Instant::now() + Duration::from_secs(10);
        while std::time::Instant::now() < held_until {
            let serving = served(a_host.clone()).await?;
            if serving != old_a {
                return Err(format!("a serves {serving} while b and c do not trust it"));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        if pod_uids(lab, NAME).await? != uids {
            return Err("a pod restarted while the certificate was held".into());
        }

        // b and c trust both CAs: their bundles roll in, then a's certificate.
        for (index, name) in [(1, "b"), (2, "c")] {
            let (certificate, key) = (read(&format!("{name}.crt"))?, read(&format!("{name}.key"))?);
            renew(lab, index, &certificate, &key, &both).await?;
        }
        let expected = BTreeMap::from([(a_vip.clone(), fingerprint(&new_a.certificate)?)]);
        until_served(&set.hosts, &expected).await?;
        wait_for(lab, NAME, "TLSReady everywhere", 3, |m| {
            reason_is(m, "TLSReady", "TLSReady")
        })
        .await?;
        ready(lab, NAME, SPLIT).await?;

        // A bundle without the old CA in a, while b and c still serve
        // certificates it signed: held, and no member of a restarts.
        let uids = pod_uids(lab, NAME).await?;
        let new_only = read(&format!("{NEW_CA}.pem"))?;
        renew(lab, 0, &new_a.certificate, &new_a.key, &new_only).await?;
        until_in(lab, 0, NAME, "a's bundle without the old CA held", |m| {
            m.status.as_ref().is_some_and(|s| {
                s.conditions.iter().any(|c| {
                    c.type_ == "TLSReady"
                        && c.reason == "TLSCertificateHeld"
                        && c.message
                            .contains("serves a certificate the CA bundle does not verify")
                })
            })
        })
        .await?;
        if pod_uids(lab, NAME).await? != uids {
            return Err("a pod restarted for a bundle that was held".into());
        }
        at_most_one_down(&sampler.stop())?;
        if let Some(writer) = writer {
            writer.stop_and_check().await?;
        }
        Ok(())
    })
    .await;
}
