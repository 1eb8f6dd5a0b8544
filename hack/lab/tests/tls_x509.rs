//! x.509 membership: a running set at requireTLS moves its cluster
//! authentication from keyfiles to x.509 certificates (`keyFile` →
//! `sendKeyFile` → `sendX509` → `x509`), one mode at a time set-wide, under
//! a w:"majority" writer that loses nothing, with at most one member down,
//! and no two members two modes apart at any sample (mongod-sim's members
//! authenticate each other with their certificates, and compare their
//! subjects' O, OU and DC).
//!
//! Lab 110.

use std::collections::BTreeMap;
use std::time::Duration;

use lab::observe::SetSampler;

use crate::harness::*;
use crate::tls::{apply_tls, at_most_one_down, tls_at, FormedSet, Ladder};

/// The cluster authentication modes, weakest first.
const AUTH_MODES: [&str; 4] = ["keyFile", "sendKeyFile", "sendX509", "x509"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_set_moves_to_x509_membership_one_mode_at_a_time() {
    const NAME: &str = "membership";
    const SPLIT: &str = "a=1,b=1,c=1";
    scenario(110, 3, async |lab| {
        let set = FormedSet::form(lab, 110, NAME, SPLIT, Some("requireTLS")).await?;
        let writer = set.tls_writer(lab, NAME).await?;
        let mut sampler = SetSampler::start(
            lab.network().clone(),
            set.hosts.clone(),
            Duration::from_millis(50),
        );
        let mut tls = tls_at("requireTLS");
        tls["clusterAuthMode"] = "x509".into();
        apply_tls(lab, &request(NAME, SPLIT), tls).await?;

        let mut seen: Vec<BTreeMap<String, String>> = Vec::new();
        let ladder = Ladder {
            option: "--clusterAuthMode",
            rungs: &AUTH_MODES,
        };
        ladder
            .until_every_pod_runs(lab, NAME, 3, "x509", &mut seen)
            .await?;
        wait_for(lab, NAME, "TLSReady everywhere", 3, |m| {
            reason_is(m, "TLSReady", "TLSReady")
        })
        .await?;
        ready(lab, NAME, SPLIT).await?;
        at_most_one_down(&sampler.stop())?;
        let steps: Vec<&str> = AUTH_MODES
            .iter()
            .copied()
            .filter(|mode| seen.iter().any(|run| run.values().all(|m| m == mode)))
            .collect();
        if steps != AUTH_MODES {
            return Err(format!("the set did not run each mode in turn: {steps:?}"));
        }
        if let Some(writer) = writer {
            writer.stop_and_check().await?;
        }
        Ok(())
    })
    .await;
}
