//! Fidelity checks against kube-rs (the operator's client): kube-runtime's
//! watcher re-lists after an in-stream 410, a burst of one kind's writes does
//! not expire another kind's watch, and a controller whose reconciles write
//! nothing new settles instead of spinning.

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use apiserver_sim::{ApiServer, ApiServerHandle, Gvr, WriteOptions};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, WatchEvent,
    WatchParams,
};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event as RecordedEvent, EventType, Recorder, Reporter};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::Client;
use kube::Resource;
use serde_json::json;

const BINARY: u8 = 2;

async fn start() -> (ApiServerHandle, Client) {
    let server = ApiServer::start(SocketAddr::new(common::unique_ip(BINARY), 0))
        .await
        .unwrap();
    let config = kube::Config::new(server.url().parse::<hyper::Uri>().unwrap());
    let client = Client::try_from(config).unwrap();
    (server, client)
}

async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watcher_relists_after_an_in_stream_410() {
    let (mut server, client) = start().await;
    let store = server.store().clone();
    let cms = Gvr::core("configmaps");
    store
        .create(
            &cms,
            Some("default"),
            json!({"metadata": {"name": "before"}}),
            &WriteOptions::manager("t"),
        )
        .unwrap();

    let inits = Arc::new(AtomicUsize::new(0));
    let seen_after = Arc::new(AtomicUsize::new(0));
    let (i2, s2) = (inits.clone(), seen_after.clone());
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let task = tokio::spawn(async move {
        let mut stream = watcher::watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(Event::Init) => {
                    i2.fetch_add(1, Ordering::SeqCst);
                }
                Ok(Event::InitApply(cm)) if cm.metadata.name.as_deref() == Some("after") => {
                    s2.fetch_add(1, Ordering::SeqCst);
                }
                _ => {}
            }
        }
    });
    eventually("the first list", || inits.load(Ordering::SeqCst) == 1).await;

    // While the server is down, more ConfigMap changes happen than their watch
    // history holds.
    server.stop().await;
    store
        .create(
            &cms,
            Some("default"),
            json!({"metadata": {"name": "after"}}),
            &WriteOptions::manager("t"),
        )
        .unwrap();
    for i in 0..(apiserver_sim::store::HISTORY_LEN + 5) {
        store
            .create(
                &cms,
                Some("default"),
                json!({"metadata": {"name": format!("s{i}")}}),
                &WriteOptions::manager("t"),
            )
            .unwrap();
    }
    server.restart().await.unwrap();

    // The re-watch from the old resourceVersion gets an in-stream 410; the watcher re-lists.
    eventually("a re-list that sees the new object", || {
        inits.load(Ordering::SeqCst) >= 2 && seen_after.load(Ordering::SeqCst) >= 1
    })
    .await;
    task.abort();
    server.stop().await;
}

/// kube-apiserver keeps one watch cache per resource: a burst of ConfigMap
/// writes longer than the history does not expire a Pod watch resumed from
/// the last Pod resourceVersion seen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_one_kind_does_not_expire_another_kinds_watch() {
    let (mut server, client) = start().await;
    let store = server.store().clone();
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let pod = |name: &str| json!({"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    let opts = WriteOptions::manager("t");
    store
        .create(&Gvr::core("pods"), Some("default"), pod("p1"), &opts)
        .unwrap();
    let listed = pods.list(&ListParams::default()).await.unwrap();
    let from = listed.metadata.resource_version.unwrap();

    for i in 0..(apiserver_sim::store::HISTORY_LEN + 5) {
        store
            .create(
                &Gvr::core("configmaps"),
                Some("default"),
                json!({"metadata": {"name": format!("c{i}")}}),
                &opts,
            )
            .unwrap();
    }
    let mut events = pods
        .watch(&WatchParams::default().timeout(30), &from)
        .await
        .unwrap()
        .boxed();
    store
        .create(&Gvr::core("pods"), Some("default"), pod("p2"), &opts)
        .unwrap();
    let first = tokio::time::timeout(Duration::from_secs(20), events.next())
        .await
        .expect("an event")
        .expect("an open stream")
        .unwrap();
    match first {
        WatchEvent::Added(p) => assert_eq!(p.metadata.name.as_deref(), Some("p2")),
        other => panic!("the Pod watch must see p2 added, got {other:?}"),
    }
    server.stop().await;
}

#[derive(Debug)]
struct ReconcileError(#[allow(dead_code)] kube::Error);

impl std::fmt::Display for ReconcileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

impl std::error::Error for ReconcileError {}

struct Ctx {
    client: Client,
    recorder: Recorder,
    ar: ApiResource,
    reconciles: AtomicUsize,
}

async fn reconcile(obj: Arc<DynamicObject>, ctx: Arc<Ctx>) -> Result<Action, ReconcileError> {
    ctx.reconciles.fetch_add(1, Ordering::SeqCst);
    let name = obj.metadata.name.clone().unwrap_or_default();
    let uid = obj.metadata.uid.clone().unwrap_or_default();
    let pp = PatchParams::apply("widget-controller").force();
    // The same owned ConfigMap and the same status every time: no-op writes after the first.
    let cms: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), "default");
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("{name}-config"), "ownerReferences": [{"apiVersion": "sim.example.com/v1", "kind": "Widget", "name": name, "uid": uid, "controller": true}]},
        "data": {"size": obj.data["spec"]["size"].to_string()}});
    cms.patch(&format!("{name}-config"), &pp, &Patch::Apply(&cm))
        .await
        .map_err(ReconcileError)?;
    let widgets: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), "default", &ctx.ar);
    let status = json!({"apiVersion": "sim.example.com/v1", "kind": "Widget", "metadata": {"name": name}, "status": {"phase": "Ready"}});
    widgets
        .patch_status(&name, &pp, &Patch::Apply(&status))
        .await
        .map_err(ReconcileError)?;
    let reference = obj.object_ref(&ctx.ar);
    let event = RecordedEvent {
        type_: EventType::Normal,
        reason: "Reconciled".into(),
        note: Some("widget reconciled".into()),
        action: "Reconcile".into(),
        secondary: None,
    };
    ctx.recorder
        .publish(&event, &reference)
        .await
        .map_err(ReconcileError)?;
    widgets
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"seen": "yes"}}})),
        )
        .await
        .map_err(ReconcileError)?;
    Ok(Action::await_change())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_doing_no_op_writes_settles() {
    let (mut server, client) = start().await;
    let store = server.store().clone();
    let crd: serde_json::Value =
        serde_yaml::from_str(include_str!("fixtures/widgets-crd.yaml")).unwrap();
    store
        .create(
            &Gvr::new("apiextensions.k8s.io", "v1", "customresourcedefinitions"),
            None,
            crd,
            &WriteOptions::manager("t"),
        )
        .unwrap();
    store
        .create(&Gvr::new("sim.example.com", "v1", "widgets"), Some("default"),
            json!({"apiVersion": "sim.example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": 2}}), &WriteOptions::manager("t"))
        .unwrap();

    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("sim.example.com", "v1", "Widget"),
        "widgets",
    );
    let reporter = Reporter {
        controller: "widget-controller".into(),
        instance: None,
    };
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        recorder: Recorder::new(client.clone(), reporter),
        ar: ar.clone(),
        reconciles: AtomicUsize::new(0),
    });
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let controller = Controller::new_with(widgets, watcher::Config::default(), ar)
        .owns(
            Api::<ConfigMap>::namespaced(client.clone(), "default"),
            watcher::Config::default(),
        )
        .run(
            reconcile,
            |_, _, _| Action::requeue(Duration::from_secs(1)),
            ctx.clone(),
        )
        .for_each(|_| async {});
    let task = tokio::spawn(controller);

    eventually("the status write", || {
        store
            .get(
                &Gvr::new("sim.example.com", "v1", "widgets"),
                Some("default"),
                "w1",
            )
            .ok()
            .is_some_and(|w| w["status"]["phase"] == "Ready")
    })
    .await;
    // Settled: the reconcile count stops moving for a while (bounded by the deadline).
    let mut last = ctx.reconciles.load(Ordering::SeqCst);
    let mut stable_since = Instant::now();
    eventually("the controller to settle", || {
        let now = ctx.reconciles.load(Ordering::SeqCst);
        if now != last {
            last = now;
            stable_since = Instant::now();
        }
        stable_since.elapsed() > Duration::from_secs(2)
    })
    .await;
    assert!(
        last <= 5,
        "a controller doing no-op writes must not spin ({last} reconciles)"
    );
    // The events.k8s.io Events the recorder wrote are core/v1 Events about the widget too.
    let about_w1 = apiserver_sim::ListOptions {
        field_selector: Some("involvedObject.name=w1,involvedObject.kind=Widget".into()),
        ..Default::default()
    };
    let mut events = Vec::new();
    eventually("the recorded event", || {
        events = store
            .list(&Gvr::core("events"), Some("default"), &about_w1)
            .unwrap()
            .items;
        !events.is_empty()
    })
    .await;
    assert_eq!(events.len(), 1, "repeats become a series of one Event");
    assert_eq!(events[0]["reason"], "Reconciled");
    assert_eq!(events[0]["reportingComponent"], "widget-controller");
    task.abort();
    server.stop().await;
}
