//! **convergence**: a 2+2+1 instance from its objects written to Ready
//! everywhere, split into pod start, elections and the rest.

use super::*;

const CONVERGED: &str = "total";
const POD_START: &str = "pod start";
const POD_READY: &str = "readiness probe";
const ELECTIONS: &str = "elections";
const OPERATOR: &str = "operator (the rest)";
const CONTROL_PLANE: &str = "  of which the control plane's pass";
const FIRST_POD: &str = "write → first member pod created";
pub(super) const BEFORE_INITIATE: &str = "members answer → initiated";
pub(super) const INITIATE_TO_PRIMARY: &str = "initiated → first PRIMARY";
const PRIMARY_TO_READY: &str = "first PRIMARY → Ready everywhere";

pub(super) const CONVERGENCE_NOTE: &str = "From just before the control plane's `apply` (FedState's pass and Karmada's propagation, run at once) to the first 50 ms poll that finds every cluster's `MongoDB` Running with the same five members and one PRIMARY. The total is split into parts that do not overlap, each the time covered (overlaps counted once) by intervals observed outside the operator: *pod start*, each member pod from its first watch event (created) to its first event with the `mongod` container running (cluster-sim's kubelet status; kube-rs watchers on every cluster); *readiness probe*, outside pod start, each pod from `mongod` running to its first event with condition Ready (the member pods' readiness probe, which the operator builds: `readiness_probe` in `src/build/pod.rs`; kube-proxy routes the member's `VIP:nodePort` only to a Ready pod); *elections*, outside both, the looks at mongod-sim (every 10 ms) in which some member holds a config but none is PRIMARY; *operator*, the rest (it includes the control plane's pass, given apart, cluster-sim's StatefulSet controller creating the pods, and the watch and poll delays). The last rows are instants on the way: *members answer → initiated* from the last member of the first config answering at its `VIP:nodePort` to the first look where a member holds a config; *initiated → first PRIMARY*; *first PRIMARY → Ready everywhere*.";

pub(super) fn convergence_rows() -> Vec<Row> {
    vec![
        Row::new(
            CONVERGED,
            "control-plane write → every cluster's `MongoDB` Ready (50 ms poll)",
        ),
        Row::new(POD_START, "pod created → `mongod` running"),
        Row::new(POD_READY, "`mongod` running → pod Ready"),
        Row::new(ELECTIONS, "a config but no PRIMARY (10 ms looks)"),
        Row::new(OPERATOR, "total − the three above"),
        Row::new(CONTROL_PLANE, "the `apply` call: FedState's pass, Karmada"),
        Row::new(
            FIRST_POD,
            "control-plane write → first member pod's first event",
        ),
        Row::new(
            BEFORE_INITIATE,
            "last member of the first config answers → a member holds a config",
        ),
        Row::new(INITIATE_TO_PRIMARY, "a member holds a config → a PRIMARY"),
        Row::new(
            PRIMARY_TO_READY,
            "a PRIMARY → every cluster's `MongoDB` Ready",
        ),
    ]
}

/// A member pod's life as its watch events show it: created, `mongod`
/// running, Ready.
struct PodTimes {
    created: Instant,
    running: Option<Instant>,
    ready: Option<Instant>,
}

pub(super) async fn convergence(lab: &Lab) -> Result<Figures> {
    let control_plane = lab.control_plane();
    let name = Scenario::Convergence.instance();
    let split = Split::parse("a=2,b=2,c=1")?;
    let pods: Vec<Recorder<Pod>> = lab
        .clusters()
        .iter()
        .map(|c| Recorder::start(Api::namespaced(c.client.clone(), NAMESPACE)))
        .collect();
    let mut probe = look_at(lab.network().clone());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let start = Instant::now();
    control_plane.apply(&request(name, &split)).await?;
    let applied = Instant::now();
    let ready = ready_at(&control_plane, name, &split).await?;
    let looks = probe.stop();
    let mut times: Vec<PodTimes> = Vec::new();
    for recorder in &pods {
        let mut by_uid: BTreeMap<String, PodTimes> = BTreeMap::new();
        for (at, pod) in recorder.seen() {
            if at < start || !has_container(&pod, "mongod") {
                continue;
            }
            let entry = by_uid
                .entry(pod.uid().unwrap_or_default())
                .or_insert(PodTimes {
                    created: at,
                    running: None,
                    ready: None,
                });
            if entry.running.is_none() && mongod_running(&pod) {
                entry.running = Some(at);
            }
            if entry.ready.is_none() && pod_ready(&pod) {
                entry.ready = Some(at);
            }
        }
        times.extend(by_uid.into_values());
    }
    ensure!(
        times.len() >= split.total() as usize,
        "saw {} member pods",
        times.len()
    );
    let starting: Vec<(Instant, Instant)> = times
        .iter()
        .map(|t| (t.created, t.running.unwrap_or(ready)))
        .collect();
    let probing: Vec<(Instant, Instant)> = times
        .iter()
        .filter_map(|t| Some((t.running?, t.ready.unwrap_or(ready))))
        .collect();
    let electing = timing::spans(
        &looks
            .iter()
            .map(|l| (l.at, l.config.is_some() && l.primaries == 0))
            .collect::<Vec<_>>(),
    );
    let union = |parts: &[&[(Instant, Instant)]]| {
        let all: Vec<(Instant, Instant)> = parts.iter().flat_map(|p| p.iter().copied()).collect();
        timing::covered(&all, start, ready)
    };
    let pod_start = union(&[&starting]);
    let with_probe = union(&[&starting, &probing]);
    let waiting = union(&[&starting, &probing, &electing]);
    let total = ready - start;
    let first_pod = times
        .iter()
        .map(|t| t.created)
        .min()
        .context("no member pod")?;
    let initiated = looks
        .iter()
        .find(|l| l.config.is_some())
        .context("no member ever held a config")?;
    let all_answer = initiated
        .config_hosts()
        .iter()
        .map(|host| first(&looks, start, |l| l.reachable.contains(host)))
        .collect::<Option<Vec<Instant>>>()
        .and_then(|answers| answers.into_iter().max());
    let primary = first(&looks, start, |l| l.primaries > 0);
    Ok(BTreeMap::from([
        (CONVERGED, Ok(total)),
        (POD_START, Ok(pod_start)),
        (POD_READY, Ok(with_probe - pod_start)),
        (ELECTIONS, Ok(waiting - with_probe)),
        (OPERATOR, Ok(total - waiting)),
        (CONTROL_PLANE, Ok(applied - start)),
        (FIRST_POD, Ok(first_pod.saturating_duration_since(start))),
        (
            BEFORE_INITIATE,
            all_answer
                .map(|at| initiated.at.saturating_duration_since(at))
                .ok_or_else(|| "a member of the first config never answered".to_string()),
        ),
        (
            INITIATE_TO_PRIMARY,
            primary
                .map(|at| at.saturating_duration_since(initiated.at))
                .ok_or_else(|| "no PRIMARY seen".to_string()),
        ),
        (
            PRIMARY_TO_READY,
            primary
                .map(|at| ready.saturating_duration_since(at))
                .ok_or_else(|| "no PRIMARY seen".to_string()),
        ),
    ]))
}

fn pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        })
}

fn has_container(pod: &Pod, name: &str) -> bool {
    pod.spec
        .as_ref()
        .is_some_and(|s| s.containers.iter().any(|c| c.name == name))
}

fn mongod_running(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .is_some_and(|statuses| {
            statuses.iter().any(|c| {
                c.name == "mongod"
                    && c.state
                        .as_ref()
                        .is_some_and(|state| state.running.is_some())
            })
        })
}
