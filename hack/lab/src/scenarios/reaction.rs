//! **reaction**: from each change's own watch event (`spec.members`, a
//! member Service's nodePort, hostconf, the credentials Secret) to the
//! operator's first effect.

use super::*;

const REACT_MEMBERS: &str = "`spec.members` +1";
pub(super) const REACT_SERVICE: &str = "member Service's nodePort";
pub(super) const REACT_HOSTCONF: &str = "hostconf: a line added";
const REACT_SECRET: &str = "credentials Secret: a new password";

pub(super) const REACTION_NOTE: &str = "Both instants are when the event reaches the bench through a kube-rs watcher on that cluster's apiserver-sim (the change's own event and the effect's), or, for the config, the first 10 ms look at mongod-sim that shows it; so each figure is the operator's reaction plus one watch delivery. One 1+1+1 instance per run, its credentials from a Secret of our own in every cluster (`spec.credentialsSecretRef`, by an OverridePolicy applied with the instance, holding what the operator would derive from the root password). The four changes, in this order: `spec.members` through the control plane (FedState's scale-out of cluster a, with the lab-only `keep_unchanged_clusters_on_scale_up`), timed from cluster a's `MongoDB` showing `spec.members: 2` to cluster a's new member StatefulSet created; then, once Ready, the nodePort of the Service of a member that is not PRIMARY, in its own cluster (replaced directly in that cluster's API server, as Karmada would write it), timed to the first config that lists the member at its new `VIP:nodePort` (the operator's reconfig); then, once cluster a's `MongoDB` has not changed for 3 s, one more `host:'VIP:port'` line in cluster a's hostconf for a member that does not exist yet (as FedState writes hostconf ahead of a scale-out), timed to the first change of cluster a's `MongoDB` status (hostconf is put back afterwards); then, once quiet again, a new root password in the Secret of every cluster, timed from cluster a's Secret event to the first of cluster a's StatefulSets with another pod template revision (`middleware.fedstate.io/revision`). The set still holds the old password, so the operator then reports `CredentialsRefused` (its log: \"the members refuse the root user of Secret …\"); the StatefulSets update `OnDelete`, so no pod restarts for the new revision by itself.";

pub(super) fn reaction_rows() -> Vec<Row> {
    vec![
        Row::new(
            REACT_MEMBERS,
            "cluster a's `MongoDB` event with `spec.members: 2` → new StatefulSet created (watch)",
        ),
        Row::new(
            REACT_SERVICE,
            "Service event with the new nodePort → config lists the member at it (reconfig)",
        ),
        Row::new(
            REACT_HOSTCONF,
            "hostconf ConfigMap event → `MongoDB` status changed (watch)",
        ),
        Row::new(
            REACT_SECRET,
            "Secret event with the new password → a StatefulSet's pod template revision changed (watch; the operator then refuses the credentials, see below)",
        ),
    ]
}

pub(super) async fn reaction(lab: &Lab) -> Result<Figures> {
    let control_plane = lab.control_plane();
    let name = Scenario::Reaction.instance();
    let a = &lab.clusters()[0];
    let mongodbs = Recorder::<MongoDB>::start(Api::namespaced(a.client.clone(), NAMESPACE));
    let stateful_sets =
        Recorder::<StatefulSet>::start(Api::namespaced(a.client.clone(), NAMESPACE));
    let config_maps = Recorder::<ConfigMap>::start(Api::namespaced(a.client.clone(), NAMESPACE));
    let secrets = Recorder::<Secret>::start(Api::namespaced(a.client.clone(), NAMESPACE));
    // The credentials come from a Secret of our own in every cluster
    // (`spec.credentialsSecretRef`, set by an OverridePolicy right after the
    // instance is applied), holding what the operator would derive from the
    // root password: a switch from one to the other changes no credential.
    let secret_name = format!("{name}-shared-credentials");
    for cluster in lab.clusters() {
        put_credentials(cluster, &secret_name, ROOT_PASSWORD).await?;
    }
    let first_split = Split::parse("a=1,b=1,c=1")?;
    let mut submission = request(name, &first_split)
        .to_submission()
        .keep_unchanged_clusters_on_scale_up();
    submission.object.spec.auth.root_passwd = Some(ROOT_PASSWORD.to_string());
    control_plane.apply(&submission).await?;
    control_plane
        .apply_override_policy(
            NAMESPACE,
            name,
            &secret_name,
            OverridePolicy {
                labels: BTreeMap::new(),
                resource: ResourceRef::new(Kind::MongoDB, name),
                clusters: None,
                overrider: Overrider::AddPath {
                    path: "/spec/credentialsSecretRef".into(),
                    value: json!({
                        "name": secret_name,
                        "keyfileKey": "keyfile",
                        "usernameKey": "username",
                        "passwordKey": "password",
                    }),
                },
            },
        )
        .await?;
    ready_at(&control_plane, name, &first_split).await?;
    let mut probe = look_at(lab.network().clone());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut figures = Figures::new();

    // spec.members: a=1 → a=2.
    let split = Split::parse("a=2,b=1,c=1")?;
    let members = async {
        let existing: BTreeSet<String> = stateful_sets
            .seen()
            .iter()
            .map(|(_, s)| s.name_any())
            .collect();
        let asked = Instant::now();
        control_plane.scale(NAMESPACE, name, &split, None).await?;
        let changed = mongodbs
            .wait_for(asked, |m| m.name_any() == name && m.spec.members == 2)
            .await
            .context("cluster a's MongoDB never asked for 2 members")?;
        let created = stateful_sets
            .wait_for(asked, |s| !existing.contains(&s.name_any()))
            .await
            .context("no new StatefulSet in cluster a")?;
        ready_at(&control_plane, name, &split).await?;
        anyhow::Ok(created.saturating_duration_since(changed))
    };
    figures.insert(REACT_MEMBERS, members.await.map_err(|e| format!("{e:#}")));
    tokio::time::sleep(Duration::from_secs(2)).await;

    // A member Service's nodePort, in the cluster of a member that is not PRIMARY.
    let service = async {
        let (cluster, service_name) = non_primary_member_service(lab, name).await?;
        let services = Api::<Service>::namespaced(cluster.client.clone(), NAMESPACE);
        let service_events = Recorder::<Service>::start(services.clone());
        tokio::time::sleep(Duration::from_secs(1)).await;
        let port = free_node_port(lab).await?;
        let mut service = services.get(&service_name).await?;
        let ports = service
            .spec
            .as_mut()
            .and_then(|s| s.ports.as_mut())
            .context("a member Service without ports")?;
        ports[0].node_port = Some(port);
        let asked = Instant::now();
        services
            .replace(&service_name, &PostParams::default(), &service)
            .await
            .context("moving the member Service's nodePort")?;
        let moved = service_events
            .wait_for(asked, |s| {
                s.name_any() == service_name && node_port(s) == Some(port)
            })
            .await?;
        let new_host = format!("{}:{port}", cluster.vip);
        let reconfigured = wait_look(&probe, moved, |l| l.config_hosts().contains(&new_host))
            .await
            .with_context(|| format!("the config never listed {new_host}"))?;
        anyhow::Ok(reconfigured.saturating_duration_since(moved))
    };
    figures.insert(REACT_SERVICE, service.await.map_err(|e| format!("{e:#}")));

    // hostconf: one more line, once the status is quiet; then put back.
    let hostconf_name = format!("{name}-hostconf");
    let config_maps_api = Api::<ConfigMap>::namespaced(a.client.clone(), NAMESPACE);
    let original = config_maps_api.get(&hostconf_name).await?;
    let hostconf = async {
        quiet(&mongodbs, name, QUIET).await?;
        let mut hostconf = original.clone();
        let extra = format!(
            "host:'{}:{}'",
            lab.clusters()[2].vip,
            free_node_port(lab).await?
        );
        let data = hostconf.data.get_or_insert_with(Default::default);
        let datas = data.entry("datas".to_string()).or_default();
        datas.push('\n');
        datas.push_str(&extra);
        let asked = Instant::now();
        config_maps_api
            .replace(&hostconf_name, &PostParams::default(), &hostconf)
            .await
            .context("adding a line to hostconf")?;
        let written = config_maps
            .wait_for(asked, |c| {
                c.name_any() == hostconf_name
                    && c.data
                        .as_ref()
                        .and_then(|d| d.get("datas"))
                        .is_some_and(|d| d.contains(&extra))
            })
            .await?;
        let status_then = mongodbs
            .last_before(name, written)
            .map(|m| serde_json::to_value(&m.status))
            .transpose()?;
        let reacted = mongodbs
            .wait_for(written, |m| {
                m.name_any() == name && serde_json::to_value(&m.status).ok() != status_then
            })
            .await
            .context("cluster a's MongoDB status never changed after the hostconf change")?;
        anyhow::Ok(reacted.saturating_duration_since(written))
    };
    figures.insert(REACT_HOSTCONF, hostconf.await.map_err(|e| format!("{e:#}")));
    let mut restored = config_maps_api.get(&hostconf_name).await?;
    restored.data = original.data.clone();
    config_maps_api
        .replace(&hostconf_name, &PostParams::default(), &restored)
        .await
        .context("putting hostconf back")?;

    // The credentials Secret: a new root password in every cluster.
    let secret = async {
        quiet(&mongodbs, name, QUIET).await?;
        let revisions_then = template_revisions(&stateful_sets.seen());
        let asked = Instant::now();
        for cluster in lab.clusters() {
            put_credentials(cluster, &secret_name, NEW_ROOT_PASSWORD).await?;
        }
        let written = secrets
            .wait_for(asked, |s| {
                s.name_any() == secret_name
                    && s.data
                        .as_ref()
                        .and_then(|d| d.get("password"))
                        .is_some_and(|p| p.0 == NEW_ROOT_PASSWORD.as_bytes())
            })
            .await?;
        let rolled = stateful_sets
            .wait_for(written, |s| {
                let revision = observe::template_revision(s);
                revision.is_some() && revisions_then.get(&s.name_any()) != Some(&revision)
            })
            .await
            .context("no StatefulSet of cluster a got a new pod template revision")?;
        anyhow::Ok(rolled.saturating_duration_since(written))
    };
    figures.insert(REACT_SECRET, secret.await.map_err(|e| format!("{e:#}")));
    probe.stop();
    // Let the operators finish the pass the last change started (their logs
    // then show it) before the lab stops them.
    tokio::time::sleep(Duration::from_secs(2)).await;
    Ok(figures)
}

/// The root password the reaction scenario starts with, and the one its
/// Secret change sets.
const ROOT_PASSWORD: &str = "bench-root-password-1";
const NEW_ROOT_PASSWORD: &str = "bench-root-password-2";
/// How long an object must not have changed before a change is timed.
const QUIET: Duration = Duration::from_secs(3);

/// Creates or replaces Secret `name` in `cluster` with the credentials the
/// operator would derive from `password` (user `root`, keyfile derived).
async fn put_credentials(
    cluster: &crate::lab::LabCluster,
    name: &str,
    password: &str,
) -> Result<()> {
    let secrets = Api::<Secret>::namespaced(cluster.client.clone(), NAMESPACE);
    let data = BTreeMap::from([
        ("keyfile".to_string(), derive_keyfile(password)),
        ("username".to_string(), DERIVED_ROOT_USER.to_string()),
        ("password".to_string(), password.to_string()),
    ]);
    let mut secret = secrets.get_opt(name).await?.unwrap_or_else(|| Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        ..Default::default()
    });
    secret.data = Some(
        data.into_iter()
            .map(|(k, v)| (k, k8s_openapi::ByteString(v.into_bytes())))
            .collect(),
    );
    secret.string_data = None;
    if secret.metadata.resource_version.is_some() {
        secrets
            .replace(name, &PostParams::default(), &secret)
            .await?;
    } else {
        secrets.create(&PostParams::default(), &secret).await?;
    }
    Ok(())
}

/// The last pod template revision seen of every StatefulSet.
fn template_revisions(seen: &[(Instant, StatefulSet)]) -> BTreeMap<String, Option<String>> {
    seen.iter()
        .map(|(_, s)| (s.name_any(), observe::template_revision(s)))
        .collect()
}

/// A member Service (its cluster and name) of a member that is not PRIMARY,
/// in a cluster other than a: the StatefulSet `<name>-mongodb-<i>` there has
/// the Service of the same name.
async fn non_primary_member_service<'a>(
    lab: &'a Lab,
    name: &str,
) -> Result<(&'a crate::lab::LabCluster, String)> {
    let primaries: BTreeSet<String> = lab
        .network()
        .primaries()
        .iter()
        .flat_map(|listen| lab.network().aliases_of(listen))
        .collect();
    for cluster in &lab.clusters()[1..] {
        let stateful_sets = Api::<StatefulSet>::namespaced(cluster.client.clone(), NAMESPACE);
        let services = Api::<Service>::namespaced(cluster.client.clone(), NAMESPACE);
        for stateful_set in stateful_sets.list(&Default::default()).await? {
            let member = stateful_set.name_any();
            if !member.starts_with(&format!("{name}-mongodb-")) {
                continue;
            }
            let Some(service) = services.get_opt(&member).await? else {
                continue;
            };
            let Some(port) = node_port(&service) else {
                continue;
            };
            if !primaries.contains(&format!("{}:{port}", cluster.vip)) {
                return Ok((cluster, member));
            }
        }
    }
    bail!("no member Service of a secondary outside cluster a")
}

pub(super) fn node_port(service: &Service) -> Option<i32> {
    service.spec.as_ref()?.ports.as_ref()?.first()?.node_port
}

/// A nodePort no Service of any cluster uses.
async fn free_node_port(lab: &Lab) -> Result<i32> {
    let mut taken = BTreeSet::new();
    for cluster in lab.clusters() {
        let services = Api::<Service>::all(cluster.client.clone());
        for service in services.list(&Default::default()).await? {
            taken.extend(node_port(&service));
        }
    }
    (31_000..32_000)
        .find(|port| !taken.contains(port))
        .context("no free nodePort")
}

/// Waits until `name`'s `MongoDB` has had no event for `period`; returns the
/// instant of its last event.
async fn quiet(records: &Recorder<MongoDB>, name: &str, period: Duration) -> Result<Instant> {
    let deadline = Instant::now() + EFFECT_TIMEOUT;
    loop {
        let last = records
            .seen()
            .iter()
            .rev()
            .find(|(_, m)| m.name_any() == name)
            .map(|(at, _)| *at)
            .context("no MongoDB event at all")?;
        if last.elapsed() >= period {
            return Ok(last);
        }
        if Instant::now() > deadline {
            bail!("{name}'s MongoDB kept changing");
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}
