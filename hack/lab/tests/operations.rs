//! Running the operator: two replicas in one cluster elect a leader
//! on a Lease and only the leader acts; when it is killed the standby takes
//! over and acts; its `/metrics` carry the cluster's identity and say what
//! the replica set and the operator do; `/healthz` and `/readyz` answer. A
//! w:"majority" writer runs throughout.

use std::time::{Duration, Instant};

use crate::harness::*;
use lab::lab::Lab;
use lab::observe::SetSampler;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const NAME: &str = "orders";

/// GET `path` from replica `replica`'s metrics endpoint: (status line, body).
async fn get(lab: &Lab, replica: u8, path: &str) -> Result<(String, String), String> {
    let address = lab.metrics_address(0, replica);
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .map_err(fail("connect"))?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(fail("send"))?;
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .await
        .map_err(fail("read"))?;
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head.lines().next().unwrap_or_default().to_string();
    Ok((status, body.to_string()))
}

fn log_of(lab: &Lab, replica: u8) -> String {
    std::fs::read_to_string(lab.replica_log(0, replica)).unwrap_or_default()
}

/// Waits until replica `replica`'s log contains `needle`.
async fn logged(lab: &Lab, replica: u8, needle: &str, timeout: Duration) -> Outcome {
    let deadline = Instant::now() + timeout;
    while !log_of(lab, replica).contains(needle) {
        if Instant::now() > deadline {
            return Err(format!(
                "replica {replica} never logged {needle:?} in {timeout:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// The metrics of `replica` contain each of `lines`.
async fn exposes(lab: &Lab, replica: u8, lines: &[String]) -> Outcome {
    let (status, metrics) = get(lab, replica, "/metrics").await?;
    if !status.contains("200") {
        return Err(format!("/metrics answered {status}"));
    }
    for line in lines {
        if !metrics.lines().any(|l| l == line) {
            return Err(format!(
                "replica {replica}'s metrics lack {line:?}:\n{metrics}"
            ));
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_elect_one_leader_that_alone_acts_and_reports_metrics() {
    scenario(89, 1, async |lab| {
        logged(lab, 0, "leading", Duration::from_secs(60)).await?;
        lab.start_standby_operator(0).map_err(fail("standby"))?;
        logged(lab, 1, "standing by", Duration::from_secs(60)).await?;

        let control_plane = lab.control_plane();
        let passes = ControlPlanePasses::start(lab);
        control_plane
            .apply(&request(NAME, "a=1"))
            .await
            .map_err(fail("apply"))?;
        ready(lab, NAME, "a=1").await?;
        let hosts = hosts_of(lab, 0, NAME).await?;
        let writer = TimedMajorityWriter::start(lab, NAME, &hosts).await?;
        let sampler = SetSampler::start(lab.network().clone(), hosts.clone(), Duration::from_millis(50));

        // Only the leader acts.
        if !log_of(lab, 0).contains(" planned ") {
            return Err("the leader planned nothing".into());
        }
        if log_of(lab, 1).contains(" planned ") {
            return Err("the standby replica planned a step".into());
        }
        // What the leader's metrics say, with the cluster's identity.
        let instance = format!("instance=\"default/{NAME}\"");
        exposes(
            lab,
            0,
            &[
                format!("mongodb_operator_replica_set_members{{cluster=\"a\",{instance},state=\"PRIMARY\"}} 1"),
                format!("mongodb_operator_replica_set_has_primary{{cluster=\"a\",{instance}}} 1"),
                format!("mongodb_operator_instance_ready{{cluster=\"a\",{instance},reason=\"AllMembersReady\"}} 1"),
                "mongodb_operator_steps_total{cluster=\"a\",step=\"Initiate\"} 1".to_string(),
                format!("mongodb_operator_pods_outdated{{cluster=\"a\",{instance}}} 0"),
            ],
        )
        .await?;
        for replica in [0, 1] {
            for path in ["/healthz", "/readyz"] {
                let (status, _) = get(lab, replica, path).await?;
                if !status.contains("200") {
                    return Err(format!("replica {replica} {path}: {status}"));
                }
            }
        }

        // The leader dies: the standby takes the Lease over and acts.
        lab.kill_operator(0).await.map_err(fail("kill"))?;
        let killed_at = Instant::now();
        logged(lab, 1, "leading", Duration::from_secs(60)).await?;
        let took_over_after = killed_at.elapsed();
        control_plane
            .apply(&request(NAME, "a=2"))
            .await
            .map_err(fail("scale out"))?;
        ready(lab, NAME, "a=2").await?;
        if !log_of(lab, 1).contains(" planned ") {
            return Err("the new leader planned nothing".into());
        }
        exposes(
            lab,
            1,
            &["mongodb_operator_steps_total{cluster=\"a\",step=\"AddMember\"} 1".to_string()],
        )
        .await?;
        // Back, the old leader stands by.
        let before = log_of(lab, 0).matches("standing by").count();
        lab.restart_operator(0).map_err(fail("restart"))?;
        let deadline = Instant::now() + Duration::from_secs(60);
        while log_of(lab, 0).matches("standing by").count() <= before {
            if Instant::now() > deadline {
                return Err("the restarted replica did not stand by".into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        drop(passes);

        let mut sampler = sampler;
        let samples = sampler.stop();
        let acknowledged = match writer {
            Some(writer) => writer.stop_and_check().await?.len(),
            None => 0,
        };
        eprintln!(
            "the standby led {took_over_after:?} after the leader was killed (Lease 15 s); {} \
             samples; {acknowledged} majority writes acknowledged, none lost",
            samples.len()
        );
        one_primary_per_term(&samples)
    })
    .await;
}
