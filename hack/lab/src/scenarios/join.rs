//! **join**: a scale-out 1+1+1 → 2+1+1, from the new member answering at
//! its `VIP:nodePort` to the config listing it.

use super::*;

pub(super) const JOIN_OVERHEAD: &str = "join overhead";
const JOIN_RUNS: &str = "scale-out → new mongod runs";
const JOIN_ANSWERS: &str = "new mongod runs → answers at its address";
const JOIN_LISTED_TO_READY: &str = "in the config → Ready everywhere";
const JOIN_READY: &str = "scale-out → Ready everywhere";

pub(super) const JOIN_NOTE: &str = "mongod-sim is looked at every 10 ms on a thread of its own. The new mongod *runs* at the first look where a member listens on an address that did not before the scale-out; it *answers at its address* at the first look where a running member is reached at the new `VIP:nodePort` (kube-proxy's route, which follows the pod's readiness and which the lab mirrors into mongod-sim's aliases); it is *in the config* at the first look where the newest config any member holds lists that host (what `replSetGetConfig` answers, `newlyAdded` or not). The scale-out is FedState's, with the lab-only `keep_unchanged_clusters_on_scale_up` correction (FedState itself withdraws the other clusters' Services on a partial scale-up). *Ready everywhere*: every cluster's `MongoDB` Running with the whole set and one PRIMARY, polled every 50 ms.";

pub(super) fn join_rows() -> Vec<Row> {
    vec![
        Row::new(
            JOIN_OVERHEAD,
            "new member answers at `VIP:nodePort` → host in the replica-set config",
        ),
        Row::new(
            JOIN_RUNS,
            "control-plane write → the new member's mongod listens (StatefulSet, pod, container)",
        ),
        Row::new(
            JOIN_ANSWERS,
            "mongod listens → reached at its `VIP:nodePort` (the pod's readiness probe, kube-proxy)",
        ),
        Row::new(
            JOIN_LISTED_TO_READY,
            "host in the config → every cluster's `MongoDB` Ready",
        ),
        Row::new(
            JOIN_READY,
            "control-plane write → every cluster's `MongoDB` Ready",
        ),
    ]
}

pub(super) async fn join(lab: &Lab) -> Result<Figures> {
    let control_plane = lab.control_plane();
    let name = Scenario::Join.instance();
    let before_split = Split::parse("a=1,b=1,c=1")?;
    let after_split = Split::parse("a=2,b=1,c=1")?;
    control_plane
        .apply(
            &request(name, &before_split)
                .to_submission()
                .keep_unchanged_clusters_on_scale_up(),
        )
        .await?;
    ready_at(&control_plane, name, &before_split).await?;
    let mut probe = look_at(lab.network().clone());
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = probe.latest().context("no look at the network")?;
    let asked = Instant::now();
    control_plane
        .apply(
            &request(name, &after_split)
                .to_submission()
                .keep_unchanged_clusters_on_scale_up(),
        )
        .await?;
    let ready = ready_at(&control_plane, name, &after_split).await?;
    let looks = probe.stop();
    let after = looks.last().map(Look::config_hosts).unwrap_or_default();
    let before_hosts = before.config_hosts();
    let added: Vec<&String> = after.difference(&before_hosts).collect();
    let [host] = added[..] else {
        bail!("expected one new member in the config, found {added:?}");
    };
    let runs = first(&looks, asked, |l| !l.running.is_subset(&before.running))
        .context("no new mongod ever ran")?;
    let answers = first(&looks, asked, |l| l.reachable.contains(host))
        .with_context(|| format!("{host} never answered"))?;
    let listed = first(&looks, asked, |l| l.config_hosts().contains(host))
        .with_context(|| format!("{host} never entered the config"))?;
    Ok(BTreeMap::from([
        (JOIN_OVERHEAD, Ok(listed.saturating_duration_since(answers))),
        (JOIN_RUNS, Ok(runs - asked)),
        (JOIN_ANSWERS, Ok(answers.saturating_duration_since(runs))),
        (
            JOIN_LISTED_TO_READY,
            Ok(ready.saturating_duration_since(listed)),
        ),
        (JOIN_READY, Ok(ready - asked)),
    ]))
}
