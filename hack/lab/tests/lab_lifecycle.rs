//! The lab itself: a lab started after another one with the same number (the
//! same addresses), in the same process, starts empty. `lab bench --scenario
//! all` runs its measurements so, one fresh lab after another: the second found
//! the first's hundred instances in its control plane and propagated them
//! into its new clusters.

use crate::harness::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lab_started_after_one_with_the_same_number_has_an_empty_control_plane() {
    scenario(96, 1, async |lab| {
        lab.control_plane()
            .apply(&request("left-behind", "a=1"))
            .await
            .map_err(fail("apply"))
    })
    .await;
    scenario(96, 1, async |lab| {
        match lab
            .control_plane()
            .multicloudmongodb("default", "left-behind")
            .await
        {
            None => Ok(()),
            Some(_) => Err("the new lab's control plane holds the old lab's instance".to_string()),
        }
    })
    .await;
}
