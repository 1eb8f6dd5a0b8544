//! `lab override`: a user's own OverridePolicy on an instance's `MongoDB`
//! template, sent to the control plane of a running lab as the CLI does.
//! Karmada writes it to the member clusters and FedState's passes keep it
//! there; the same policy name again replaces the policy instead of adding a
//! second.

use std::path::Path;

use kube::Api;
use mongodb_member_operator::api::MongoDB;

use crate::harness::*;

const NAME: &str = "pinned";
const LABEL: &str = "team";

/// `lab override NAME POLICY ARGS…` against the lab in `state_dir`.
async fn lab_override(state_dir: &Path, policy: &str, args: &[&str]) -> Outcome {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_lab"))
        .arg("--state-dir")
        .arg(state_dir)
        .args(["override", NAME, policy])
        .args(args)
        .output()
        .await
        .map_err(fail("running lab override"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "lab override {policy} {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

/// The label `team` of the instance's `MongoDB` in every cluster, in order.
async fn labels(lab: &lab::lab::Lab) -> Result<Vec<Option<String>>, String> {
    let mut found = Vec::new();
    for cluster in lab.clusters() {
        let api: Api<MongoDB> = Api::namespaced(cluster.client.clone(), "default");
        let mongodb = api.get(NAME).await.map_err(fail("MongoDB"))?;
        found.push(mongodb.metadata.labels.unwrap_or_default().remove(LABEL));
    }
    Ok(found)
}

fn some(values: &[&str]) -> Vec<Option<String>> {
    values
        .iter()
        .map(|v| (!v.is_empty()).then(|| v.to_string()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_override_reaches_the_member_clusters_stays_and_is_replaced_by_name() {
    scenario(90, 2, async |lab| {
        let control_plane = lab.control_plane();
        let socket = {
            let (control_plane, state_dir) = (lab.control_plane(), lab.state_dir().to_path_buf());
            tokio::spawn(async move {
                federation_sim::control_plane::serve(control_plane, 90, &state_dir).await
            })
        };
        let outcome = async {
            control_plane
                .apply(&request(NAME, "a=1,b=1"))
                .await
                .map_err(fail("apply"))?;
            let pointer = format!("/metadata/labels/{LABEL}");
            let state_dir = lab.state_dir().to_path_buf();
            while !state_dir.join("control-plane").exists() {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }

            lab_override(
                &state_dir,
                "team",
                &["--path", &pointer, "--value", "\"blue\"", "--clusters", "b"],
            )
            .await?;
            if labels(lab).await? != some(&["", "blue"]) {
                return Err(format!(
                    "after the override for b: {:?}",
                    labels(lab).await?
                ));
            }

            // FedState's next pass renders the template again: the policy
            // stays applied.
            control_plane
                .reconcile("default", NAME)
                .await
                .map_err(fail("a pass"))?;
            if labels(lab).await? != some(&["", "blue"]) {
                return Err(format!("after a FedState pass: {:?}", labels(lab).await?));
            }

            // The same policy name again, for cluster a: it replaces the
            // policy, so b's object loses the label.
            lab_override(
                &state_dir,
                "team",
                &[
                    "--path",
                    &pointer,
                    "--value",
                    "\"green\"",
                    "--clusters",
                    "a",
                ],
            )
            .await?;
            if labels(lab).await? != some(&["green", ""]) {
                return Err(format!(
                    "after the policy replaced by one for a: {:?}",
                    labels(lab).await?
                ));
            }
            Ok(())
        }
        .await;
        socket.abort();
        outcome
    })
    .await;
}
