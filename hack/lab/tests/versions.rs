//! Upgrading across releases: an instance created on MongoDB 5.0 is raised to
//! 6.0, 7.0 and 8.0, each step a new image in every cluster (rolled one
//! member at a time) and then the featureCompatibilityVersion the user asks
//! for, while a w:"majority" writer runs and loses nothing. Each binary gets
//! the `setFeatureCompatibilityVersion` it knows: mongod refuses `confirm`
//! before 7.0 and requires it from 7.0 on.
//!
//! The instance is FedState's arbiter topology. An arbiter never applies the
//! oplog, so an FCV document on its disk never moves: one written at its
//! birth would stop it two releases later (exit 62). Its FCV is not asked:
//! an arbiter holds no users, and it answers only `hello` and `buildInfo`.
//!
//! Lab number 56, one cluster of two data members and the arbiter (the roll
//! across clusters is `rolling`'s subject).

use std::time::{Duration, Instant};

use crate::e2e::{fedstate_sample, set_shape};
use crate::harness::*;
use crate::rolling::{everywhere, versions};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use lab::lab::Lab;
use serde_json::json;

/// How long one step (a roll of three members, or an FCV raise) may take.
const STEP_TIMEOUT: Duration = Duration::from_secs(180);

/// Waits until every member runs `release`, every data member with FCV `fcv`,
/// and the cluster's status reports that FCV (the next image is checked
/// against it).
pub(crate) async fn wait_release(
    lab: &Lab,
    name: &str,
    hosts: &[String],
    release: &str,
    fcv: &str,
) -> Outcome {
    let deadline = Instant::now() + STEP_TIMEOUT;
    loop {
        // A member restarting turns the read away: not there yet.
        let seen = versions(lab, name, hosts).await;
        let members_there = seen.as_ref().is_ok_and(|members| {
            members.iter().all(|(_, version, member_fcv)| {
                version.starts_with(&format!("{release}."))
                    && member_fcv
                        .as_deref()
                        .is_none_or(|member_fcv| member_fcv == fcv)
            })
        });
        let reported = statuses(lab, name).await?.iter().all(|(_, m)| {
            m.status
                .as_ref()
                .and_then(|s| s.feature_compatibility_version.as_deref())
                == Some(fcv)
        });
        if members_there && reported {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "not every member on {release} with FCV {fcv} (reported: {reported}) after \
                 {STEP_TIMEOUT:?}: (host, buildInfo.version, FCV) {seen:?}; pods' last exit \
                 codes {:?}",
                last_exit_codes(lab).await
            ));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Each pod's mongod container's last exit code, when it ended (62: mongod
/// refused the featureCompatibilityVersion on its disk).
async fn last_exit_codes(lab: &Lab) -> Vec<(String, i32)> {
    let api: Api<Pod> = Api::namespaced(lab.clusters()[0].client.clone(), "default");
    let Ok(pods) = api.list(&Default::default()).await else {
        return Vec::new();
    };
    pods.items
        .into_iter()
        .filter_map(|pod| {
            let name = pod.metadata.name?;
            let statuses = pod.status?.container_statuses?;
            let mongod = statuses.into_iter().find(|c| c.name == "mongod")?;
            let code = mongod.last_state?.terminated?.exit_code;
            Some((name, code))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_arbiter_set_created_on_5_0_is_raised_release_by_release_to_8_0() {
    let started = Instant::now();
    scenario(56, 1, async |lab| {
        let _passes = ControlPlanePasses::start(lab);
        let name = "versions";
        let mut instance = fedstate_sample(name, &[("a", 2)], true);
        instance.object.spec.image_setting.image = "mongo:5.0".into();
        lab.control_plane()
            .apply(&instance)
            .await
            .map_err(fail("apply"))?;
        wait_for(lab, name, "2 and an arbiter", 1, |m| {
            set_shape(m) == (3, 1, 1)
        })
        .await?;
        let hosts = hosts_of(lab, 0, name).await?;
        wait_release(lab, name, &hosts, "5.0", "5.0").await?;
        eprintln!("{name}: ready on 5.0 after {:?}", started.elapsed());
        let writer = MajorityWriter::start(lab, name, &hosts).await?;
        let mut fcv = "5.0";
        for release in ["6.0", "7.0", "8.0"] {
            // A user's OverridePolicy (FedState passes no image change alone),
            // the same policy each step.
            let control_plane = lab.control_plane();
            let image = everywhere(name, "/spec/image", json!(format!("mongo:{release}")));
            control_plane
                .apply_override_policy("default", name, &format!("{name}-image"), image)
                .await
                .map_err(fail("OverridePolicy image"))?;
            wait_release(lab, name, &hosts, release, fcv).await?;
            let raise = everywhere(name, "/spec/featureCompatibilityVersion", json!(release));
            control_plane
                .apply_override_policy("default", name, &format!("{name}-fcv"), raise)
                .await
                .map_err(fail("OverridePolicy featureCompatibilityVersion"))?;
            wait_release(lab, name, &hosts, release, release).await?;
            fcv = release;
            eprintln!(
                "{name}: {release} with FCV {release} after {:?}",
                started.elapsed()
            );
        }
        match writer {
            Some(writer) => writer.stop_and_check().await,
            None => Ok(()),
        }
    })
    .await;
    eprintln!("versions: done in {:?}", started.elapsed());
}
