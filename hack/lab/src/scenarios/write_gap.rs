//! **write-gap**: what an application sees of a planned scale-in. A pymongo
//! w:"majority" writer through every member's `VIP:NodePort` runs while the
//! PRIMARY's cluster is scaled to 0 through the control plane; the longest
//! time between two acknowledged writes, laid beside when the PRIMARY stepped
//! down, the new one was elected, the leaving member left the config, its
//! Service and pod were deleted, its route went and its mongod stopped, and
//! what the driver saw (its SDAM and command events).

mod writer;

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher::Event;

use super::no_primary::member_host;
use super::*;
use writer::Writer;

/// The instance: 2+2+1, the PRIMARY in cluster c, which is scaled to 0.
const SPLIT: &str = "a=2,b=2,c=1";
const SCALED: &str = "a=2,b=2,c=0";
const REMAINING: &str = "a=2,b=2";
/// The cluster scaled to 0.
const LEAVING_CLUSTER: usize = 2;
/// Writes acknowledged before the scale-in is asked.
const WARM_UP_WRITES: usize = 20;
/// Writing on after the leaving member's mongod stopped.
const AFTERWARDS: Duration = Duration::from_secs(3);

const LONGEST_GAP: &str = "longest write gap";
const STEP_DOWN: &str = "→ step-down";
const NEW_PRIMARY: &str = "→ new PRIMARY";
const DRIVER_PRIMARY: &str = "→ first insert to the new PRIMARY";
const REMOVED: &str = "→ removed from the config";
const SERVICE_DELETED: &str = "→ Service deleted";
const ROUTE_GONE: &str = "→ route gone";
const POD_DELETING: &str = "→ pod deleting";
const STOPPED: &str = "→ mongod stopped";
const GAP_STARTS: &str = "→ the gap's last write before it";

const WRITE_GAP_NOTE: &str = "Instance 2+2+1; cluster c's member is made PRIMARY (`replSetStepUp`) and FedState's status let settle; the pymongo writer of the end-to-end scenarios (`tests/majority_writer.py`: w:\"majority\", the next write 50 ms after an answer, 250 ms after a failure), run as an application's driver runs it, with retryable writes (`retryWrites=true`, pymongo's default: a write that fails with a retryable error or a network error is sent once more, with the same session and txnNumber, to the primary the driver selects next, and mongod-sim, as mongod, recognises a retry of a write it applied, also on a new primary), writes through every member's `VIP:NodePort`; then c is scaled to 0 through the control plane (FedState's scheduler result `c=0`, Karmada's propagation). *Longest write gap*: the longest time between two acknowledgements reaching the bench (the later one after the scale-in request), to 3 s after both every cluster's `MongoDB` is Ready and c's mongod has stopped (Ready everywhere comes up to 30 s after the scale-in: the clusters whose objects did not change see it at their periodic pass). The other rows are instants after the scale-in request: the leaving member no longer PRIMARY and another member PRIMARY (mongod-sim's states, every 10 ms), the writer's first insert sent to the new PRIMARY (the driver's command events; its SDAM events are published from a queue pymongo drains once a second, `EVENTS_QUEUE_FREQUENCY`, so their times in the timeline are when they were published), the first 10 ms look where the newest config lacks the leaving member, the leaving member's Service and pod getting a deletionTimestamp (a kube-rs watcher on c's apiserver-sim), its `VIP:NodePort` no longer reaching it (the proxy's routes) and its mongod stopped (mongod-sim's record of the stop). Every run's timeline, the driver's events included, is written to `<state-dir>/write-gap-<run>.timeline`.";

fn rows() -> Vec<Row> {
    let mut gap = Row::new(
        LONGEST_GAP,
        "longest time between two acknowledged majority writes",
    );
    gap.against = Some(("the 0.5 s target".to_string(), Duration::from_millis(500)));
    let after =
        |what: &str, measured: &str| Row::new(what, &format!("scale-in request {measured}"));
    vec![
        gap,
        after(
            GAP_STARTS,
            "→ the acknowledgement the longest gap starts at",
        ),
        after(STEP_DOWN, "→ the leaving member no longer PRIMARY"),
        after(NEW_PRIMARY, "→ another member PRIMARY"),
        after(
            DRIVER_PRIMARY,
            "→ the driver's first insert sent to the new PRIMARY",
        ),
        after(REMOVED, "→ the newest config without the leaving member"),
        after(
            SERVICE_DELETED,
            "→ the leaving member's Service has a deletionTimestamp",
        ),
        after(ROUTE_GONE, "→ its `VIP:NodePort` no longer reaches it"),
        after(POD_DELETING, "→ its pod has a deletionTimestamp"),
        after(STOPPED, "→ its mongod stopped"),
    ]
}

/// One run: its figures, and the writes and timeline behind them.
struct Measured {
    figures: Figures,
    /// Writes acknowledged from the scale-in request on.
    writes: usize,
    /// Acknowledged writes missing from the read-back.
    lost: usize,
    /// The longest gap, in seconds after the request.
    gap: (f64, f64),
    /// Everything observed, in seconds after the request.
    timeline: Vec<(f64, String)>,
}

/// Runs the scenario `runs` times, each in a fresh lab; every run's writes
/// and what fell inside its longest gap go into a table of their own.
pub(super) async fn run(options: &LabOptions, runs: usize) -> Result<Timed> {
    let timed = Timed {
        title: "Write gap: a w:\"majority\" pymongo writer while the PRIMARY's cluster is scaled to 0 (2+2+1 → 2+2+0)".into(),
        rows: rows(),
        notes: vec![WRITE_GAP_NOTE.to_string()],
    };
    let mut table = String::from(
        "| run | writes acknowledged from the scale-in | lost | longest gap (s after the scale-in) | in the gap |\n|---|---|---|---|---|\n",
    );
    let mut timed = each_run(options, runs, timed, async |lab, run| {
        let measured = match write_gap(lab).await {
            Ok(measured) => measured,
            Err(error) => {
                table.push_str(&format!("| {run} | — | — | — | failed |\n"));
                return Err(error);
            }
        };
        let path = lab.state_dir().join(format!("write-gap-{run}.timeline"));
        let text: String = measured
            .timeline
            .iter()
            .map(|(at, what)| format!("{at:+9.3} {what}\n"))
            .collect();
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        let (from, to) = measured.gap;
        let inside: Vec<String> = measured
            .timeline
            .iter()
            .filter(|(at, what)| *at > from && *at < to && is_telling(what))
            .map(|(at, what)| format!("{at:+.3} {}", brief(what)))
            .collect();
        eprintln!(
            "run {run}: {} writes, {} lost, gap {from:+.3} → {to:+.3}; timeline in {}",
            measured.writes,
            measured.lost,
            path.display()
        );
        table.push_str(&format!(
            "| {run} | {} | {} | {} ({from:+.2} → {to:+.2}) | {} |\n",
            measured.writes,
            measured.lost,
            human(Duration::from_secs_f64(to - from)),
            inside.join("; ")
        ));
        if measured.lost > 0 {
            bail!("{} acknowledged writes were lost", measured.lost);
        }
        Ok(measured.figures)
    })
    .await?;
    timed.notes.push(table);
    Ok(timed)
}

/// The timeline entries worth listing inside a gap: the bench's own
/// observations, the operators' steps and the driver's failures and
/// heartbeats, not its routine nor its SDAM events (published late).
fn is_telling(what: &str) -> bool {
    [
        "bench ",
        "k8s ",
        "operator ",
        "driver write-error",
        "driver insert-failed",
        "driver pool-",
        "driver heartbeat-succeeded",
    ]
    .iter()
    .any(|kind| what.starts_with(kind))
}

/// An entry cut to its first 100 characters, for the table.
fn brief(what: &str) -> String {
    let what = what
        .split_once("::pass: planned ")
        .map_or(what.to_string(), |(who, step)| {
            format!("{} {step}", who.split(':').next().unwrap_or(who))
        });
    what.chars().take(100).collect()
}

async fn write_gap(lab: &Lab) -> Result<Measured> {
    let control_plane = lab.control_plane();
    let name = Scenario::WriteGap.instance();
    let split = Split::parse(SPLIT)?;
    control_plane.apply(&request(name, &split)).await?;
    ready_at(&control_plane, name, &split).await?;
    control_plane
        .settled(NAMESPACE, name, READY_TIMEOUT)
        .await?;
    let leaving = member_host(lab, LEAVING_CLUSTER, name, 0).await?;
    observe::make_primary(lab, name, &leaving).await?;
    let hosts = replset_hosts(&control_plane, name).await?;
    let (username, password) = observe::root_credentials(lab, name).await?;
    let writer = Writer::start(&hosts, &username, &password)?;
    writer
        .wait_acknowledged(WARM_UP_WRITES, READY_TIMEOUT)
        .await?;
    let cluster = &lab.clusters()[LEAVING_CLUSTER];
    let services = Deletions::start(Api::<Service>::namespaced(
        cluster.client.clone(),
        NAMESPACE,
    ));
    let pods = Deletions::start(Api::<Pod>::namespaced(cluster.client.clone(), NAMESPACE));
    let mut sampler = SetSampler::start(lab.network().clone(), hosts, LOOK_EVERY);
    let mut probe = look_at(lab.network().clone());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let logs = OperatorLogs::mark(lab);
    let asked = Instant::now();
    let asked_wall = std::time::SystemTime::now();
    control_plane
        .scale(NAMESPACE, name, &Split::parse(SCALED)?, None)
        .await?;
    let listen = sampler
        .samples()
        .iter()
        .rev()
        .find(|s| s.at < asked)
        .and_then(|s| s.members.iter().find(|m| m.host == leaving)?.listen.clone())
        .with_context(|| format!("{leaving} reached no member before the scale-in"))?;
    ready_at(&control_plane, name, &Split::parse(REMAINING)?).await?;
    let stopped = wait_stopped(lab, &listen, asked).await?;
    let end = stopped.max(Instant::now()) + AFTERWARDS;
    tokio::time::sleep_until(end.into()).await;
    let written = writer.stop().await?;
    let samples = sampler.stop();
    let looks = probe.stop();

    let since = |at: Instant| at.saturating_duration_since(asked);
    let seconds = |at: Instant| {
        if at >= asked {
            (at - asked).as_secs_f64()
        } else {
            -(asked - at).as_secs_f64()
        }
    };
    let mut timeline: Vec<(f64, String)> = Vec::new();
    let mut mark = |at: Option<Instant>, what: &str| {
        if let Some(at) = at {
            timeline.push((seconds(at), format!("bench {what}")));
        }
        at.map(since).ok_or_else(|| "not seen".to_string())
    };
    let stepped_down = samples
        .iter()
        .find(|s| s.at >= asked && !s.primaries().iter().any(|(_, h)| *h == leaving))
        .map(|s| s.at);
    let new_primary = samples.iter().find_map(|s| {
        let (_, host) = s.primaries().into_iter().find(|(_, h)| *h != leaving)?;
        (s.at >= asked).then(|| (s.at, host.to_string()))
    });
    let removed = first(&looks, asked, |l| {
        l.config.is_some() && !l.config_hosts().contains(&leaving)
    });
    let route_gone = samples
        .iter()
        .find(|s| {
            s.at >= asked
                && s.members
                    .iter()
                    .any(|m| m.host == leaving && m.listen.is_none())
        })
        .map(|s| s.at);
    let member = format!("{name}-mongodb-0");
    let service_deleted = services.first_deleting(&member, asked);
    let pod_deleting = pods.first_deleting(&format!("{member}-0"), asked);
    // The first insert the driver sends to the new PRIMARY: its SDAM events
    // are no clock for this, pymongo publishes them from a queue it drains
    // once a second (`EVENTS_QUEUE_FREQUENCY`); command events are published
    // as the command goes.
    let driver_primary = new_primary.as_ref().and_then(|(elected, host)| {
        let sent = format!("insert-started {host}");
        written
            .events
            .iter()
            .find(|(at, what)| *at >= *elected && *what == sent)
            .map(|(at, _)| *at)
    });
    let mut figures = Figures::new();
    figures.insert(
        STEP_DOWN,
        mark(stepped_down, "leaving member no longer PRIMARY"),
    );
    figures.insert(
        NEW_PRIMARY,
        mark(
            new_primary.as_ref().map(|(at, _)| *at),
            &format!(
                "new PRIMARY {}",
                new_primary.as_ref().map(|(_, h)| h.as_str()).unwrap_or("?")
            ),
        ),
    );
    figures.insert(
        DRIVER_PRIMARY,
        mark(
            driver_primary,
            "the driver's first insert to the new PRIMARY",
        ),
    );
    figures.insert(REMOVED, mark(removed, "config without the leaving member"));
    figures.insert(
        SERVICE_DELETED,
        mark(service_deleted, "leaving Service deletionTimestamp"),
    );
    figures.insert(
        ROUTE_GONE,
        mark(route_gone, "leaving VIP:NodePort reaches nothing"),
    );
    figures.insert(
        POD_DELETING,
        mark(pod_deleting, "leaving pod deletionTimestamp"),
    );
    figures.insert(STOPPED, mark(Some(stopped), "leaving mongod stopped"));
    for (at, what) in services.seen().into_iter().chain(pods.seen()) {
        if at >= asked {
            timeline.push((seconds(at), format!("k8s {what}")));
        }
    }
    timeline.push((0.0, "bench scale-in requested".to_string()));
    timeline.extend(logs.since(lab, asked_wall));
    let acknowledged: Vec<Instant> = written.acknowledged.iter().map(|(at, _)| *at).collect();
    let (gap_from, gap_to) = longest_gap(&acknowledged, asked, end)
        .context("no acknowledged write after the scale-in request")?;
    figures.insert(LONGEST_GAP, Ok(gap_to - gap_from));
    figures.insert(GAP_STARTS, Ok(since(gap_from)));
    for (at, what) in &written.events {
        if *at >= asked - Duration::from_secs(1) {
            timeline.push((seconds(*at), format!("driver {what}")));
        }
    }
    for (at, n) in &written.acknowledged {
        if *at >= gap_from && *at <= gap_to {
            timeline.push((seconds(*at), format!("writer ACK {n}")));
        }
    }
    timeline.sort_by(|a, b| a.0.total_cmp(&b.0));
    Ok(Measured {
        figures,
        writes: acknowledged.iter().filter(|at| **at >= asked).count(),
        lost: written.lost.len(),
        gap: (seconds(gap_from), seconds(gap_to)),
        timeline,
    })
}

/// The longest time between two consecutive acknowledgements whose later one
/// arrived within `(after, until]`: its two ends.
fn longest_gap(
    acknowledged: &[Instant],
    after: Instant,
    until: Instant,
) -> Option<(Instant, Instant)> {
    acknowledged
        .windows(2)
        .filter(|pair| pair[1] > after && pair[1] <= until)
        .map(|pair| (pair[0], pair[1]))
        .max_by_key(|(from, to)| *to - *from)
}

/// When mongod-sim recorded the stop of the member listening on `listen`
/// (its pod address: by then its host is neither in its config nor routed),
/// after `after`.
async fn wait_stopped(lab: &Lab, listen: &str, after: Instant) -> Result<Instant> {
    let deadline = Instant::now() + EFFECT_TIMEOUT;
    loop {
        let stopped = lab
            .network()
            .stops()
            .into_iter()
            .find(|stop| stop.at >= after && stop.listen == listen);
        if let Some(stop) = stopped {
            return Ok(stop.at);
        }
        if Instant::now() > deadline {
            bail!("the mongod at {listen} did not stop within {EFFECT_TIMEOUT:?}");
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

/// Where each operator's log ended before the scale-in.
struct OperatorLogs(Vec<u64>);

impl OperatorLogs {
    fn mark(lab: &Lab) -> OperatorLogs {
        let length = |index| std::fs::metadata(lab.operator_log(index)).map_or(0, |m| m.len());
        OperatorLogs((0..lab.clusters().len()).map(length).collect())
    }

    /// Each operator's steps (a `planned` line other than "in sync") and
    /// warnings logged since [`OperatorLogs::mark`], in seconds after
    /// `asked` (the log's UTC time of day against the clock's).
    fn since(&self, lab: &Lab, asked: std::time::SystemTime) -> Vec<(f64, String)> {
        let asked_of_day = asked
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64() % 86_400.0);
        let mut found = Vec::new();
        for (index, start) in self.0.iter().enumerate() {
            let Ok(text) = std::fs::read(lab.operator_log(index)) else {
                continue;
            };
            let text = String::from_utf8_lossy(text.get(*start as usize..).unwrap_or_default());
            let cluster = &lab.clusters()[index].name;
            for line in text.lines().map(without_colours) {
                let telling = (line.contains(" planned ") && !line.contains("in sync"))
                    || line.contains(" WARN ")
                    || line.contains(" ERROR ");
                let Some(of_day) = time_of_day(&line).filter(|_| telling) else {
                    continue;
                };
                let what = line.split_once(": ").map_or(line.as_str(), |(_, w)| w);
                found.push((of_day - asked_of_day, format!("operator {cluster}: {what}")));
            }
        }
        found
    }
}

/// A log line without its terminal colour codes (`ESC [ … m`).
fn without_colours(line: &str) -> String {
    let mut plain = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            chars.by_ref().find(|c| *c == 'm');
        } else {
            plain.push(c);
        }
    }
    plain
}

/// Seconds since midnight UTC of a log line that starts with an RFC 3339 time.
fn time_of_day(line: &str) -> Option<f64> {
    let time = line.get(11..)?.split('Z').next()?;
    let mut parts = time.split(':');
    let hours: f64 = parts.next()?.parse().ok()?;
    let minutes: f64 = parts.next()?.parse().ok()?;
    let seconds: f64 = parts.next()?.parse().ok()?;
    Some(hours * 3600.0 + minutes * 60.0 + seconds)
}

/// When objects of one API got a deletionTimestamp and went, as a kube-rs
/// watcher delivers them, until dropped.
struct Deletions {
    seen: Arc<Mutex<Vec<(Instant, String, bool)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Deletions {
    fn start<K>(api: Api<K>) -> Deletions
    where
        K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
        K::DynamicType: Default,
    {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let task = tokio::spawn(async move {
            let mut events = std::pin::pin!(watcher(api, watcher::Config::default()));
            while let Some(event) = events.next().await {
                let (object, gone) = match event {
                    Ok(Event::Apply(object)) => (object, false),
                    Ok(Event::Delete(object)) => (object, true),
                    _ => continue,
                };
                if gone || object.meta().deletion_timestamp.is_some() {
                    sink.lock().unwrap_or_else(|p| p.into_inner()).push((
                        Instant::now(),
                        object.name_any(),
                        gone,
                    ));
                }
            }
        });
        Deletions { seen, task }
    }

    /// The first time `name` was seen deleting (or gone) at or after `after`.
    fn first_deleting(&self, name: &str, after: Instant) -> Option<Instant> {
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.iter()
            .find(|(at, seen, _)| *at >= after && seen == name)
            .map(|(at, _, _)| *at)
    }

    /// Each deletion event: when, and what.
    fn seen(&self) -> Vec<(Instant, String)> {
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.iter()
            .map(|(at, name, gone)| {
                (
                    *at,
                    format!("{name} {}", if *gone { "gone" } else { "deleting" }),
                )
            })
            .collect()
    }
}

impl Drop for Deletions {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gap_lists_steps_briefly() {
        let step = "operator c: ConfigMap.v1./gap-hostconf.default}: mongodb_member_operator::controller::pass: planned instance=default/gap step=remove";
        assert_eq!(brief(step), "operator c instance=default/gap step=remove");
        assert!(is_telling(step) && !is_telling("driver insert-started 127.0.0.1:1"));
    }

    #[test]
    fn operator_log_lines_are_read_without_colours_at_their_time_of_day() {
        let line = "\u{1b}[2m2026-11-28T03:27:12.500000Z\u{1b}[0m \u{1b}[32m INFO\u{1b}[0m pass: planned step=remove";
        let plain = without_colours(line);
        assert_eq!(
            plain,
            "2026-11-28T03:27:12.500000Z  INFO pass: planned step=remove"
        );
        assert_eq!(time_of_day(&plain), Some(3.0 * 3600.0 + 27.0 * 60.0 + 12.5));
    }

    #[test]
    fn the_longest_gap_ends_after_the_request() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let acknowledged = [at(0), at(900), at(1000), at(1100), at(1600), at(1700)];
        // The 900 ms before the request do not count.
        assert_eq!(
            longest_gap(&acknowledged, at(950), at(2000)),
            Some((at(1100), at(1600)))
        );
        assert_eq!(
            longest_gap(&acknowledged, at(1000), at(1650)),
            Some((at(1100), at(1600)))
        );
        assert_eq!(longest_gap(&acknowledged, at(1700), at(2000)), None);
    }
}
