//! **no-primary**: a scale-in that removes the PRIMARY; the longest time
//! without one, against one election timeout.

use super::reaction::node_port;
use super::*;

const NO_PRIMARY: &str = "no PRIMARY";
pub(super) const STEP_DOWN_TO_REMOVED: &str = "step-down → removed";
const SCALE_IN_READY: &str = "scale-in → Ready everywhere";

pub(super) const NO_PRIMARY_NOTE: &str = "Before the scale-in the leaving member (cluster a's `<name>-mongodb-1`, the member FedState's scale-in withdraws) is made PRIMARY with `replSetStepUp` (the Rust driver, as root) and FedState's status is let settle, as a FedState user must before scaling in. Every member is then sampled every 10 ms on its own thread from mongod-sim (`observe::SetSampler`: each member's state as `hello`/`replSetGetStatus` report it) from the scale-in request until Ready everywhere; *no PRIMARY* is the longest stretch of consecutive samples in which none of the five is PRIMARY (0: no sample without one; the resolution is one sample, 10 ms), against one election timeout (`electionTimeoutMillis` 2000, the lab's `lab_replica_set_settings`). *Step-down → removed*: from the first sample where the leaving member is no longer PRIMARY to the first 10 ms look where the newest config no longer lists it.";

pub(super) fn no_primary_rows() -> Vec<Row> {
    let mut window = Row::new(
        NO_PRIMARY,
        "longest stretch of 10 ms samples with no member PRIMARY",
    );
    window.against = Some((
        "election timeout".to_string(),
        Duration::from_millis(lab_replica_set_settings().election_timeout_millis as u64),
    ));
    vec![
        window,
        Row::new(
            STEP_DOWN_TO_REMOVED,
            "leaving member no longer PRIMARY → config without it",
        ),
        Row::new(
            SCALE_IN_READY,
            "control-plane write → every cluster's `MongoDB` Ready",
        ),
    ]
}

pub(super) async fn no_primary(lab: &Lab) -> Result<Figures> {
    let control_plane = lab.control_plane();
    let name = Scenario::NoPrimary.instance();
    let split = Split::parse("a=2,b=2,c=1")?;
    control_plane.apply(&request(name, &split)).await?;
    ready_at(&control_plane, name, &split).await?;
    control_plane
        .settled(NAMESPACE, name, READY_TIMEOUT)
        .await?;
    let leaving = member_host(lab, 0, name, 1).await?;
    observe::make_primary(lab, name, &leaving).await?;
    let hosts = replset_hosts(&control_plane, name).await?;
    let mut sampler = SetSampler::start(lab.network().clone(), hosts, LOOK_EVERY);
    let mut probe = look_at(lab.network().clone());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let smaller = Split::parse("a=1,b=2,c=1")?;
    let asked = Instant::now();
    control_plane.scale(NAMESPACE, name, &smaller, None).await?;
    let ready = ready_at(&control_plane, name, &smaller).await?;
    let samples = sampler.stop();
    let looks = probe.stop();
    let primary_then = samples
        .iter()
        .rev()
        .find(|s| s.at <= asked)
        .map(|s| s.primaries().iter().any(|(_, host)| *host == leaving))
        .unwrap_or(false);
    ensure!(
        primary_then,
        "{leaving} was not PRIMARY when the scale-in was asked"
    );
    let without: Vec<(Instant, bool)> = samples
        .iter()
        .filter(|s| s.at >= asked)
        .map(|s| (s.at, s.primaries().is_empty()))
        .collect();
    let stepped_down = samples
        .iter()
        .find(|s| s.at >= asked && !s.primaries().iter().any(|(_, host)| *host == leaving))
        .map(|s| s.at)
        .context("the leaving member never stopped being PRIMARY")?;
    let removed = first(&looks, asked, |l| {
        l.config.is_some() && !l.config_hosts().contains(&leaving)
    })
    .context("the leaving member never left the config")?;
    Ok(BTreeMap::from([
        (NO_PRIMARY, Ok(timing::longest_span(&without))),
        (
            STEP_DOWN_TO_REMOVED,
            Ok(removed.saturating_duration_since(stepped_down)),
        ),
        (SCALE_IN_READY, Ok(ready - asked)),
    ]))
}

/// `VIP:nodePort` of the member Service `<name>-mongodb-<index>` in cluster `cluster`.
pub(super) async fn member_host(
    lab: &Lab,
    cluster: usize,
    name: &str,
    index: u32,
) -> Result<String> {
    let cluster = &lab.clusters()[cluster];
    let service = Api::<Service>::namespaced(cluster.client.clone(), NAMESPACE)
        .get(&format!("{name}-mongodb-{index}"))
        .await?;
    let port = node_port(&service).context("a member Service without a nodePort")?;
    Ok(format!("{}:{port}", cluster.vip))
}
