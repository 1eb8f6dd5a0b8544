//! The REST surface on the wire, checked with a bare HTTP/1.1 client:
//! discovery, OpenAPI v3, metadata-only and Table responses, watch semantics
//! (in-stream 410, bookmarks, initial events, selectors, timeouts), errors and
//! fault injection.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use apiserver_sim::{
    ApiServer, ApiServerHandle, Faults, Gvr, InjectedError, PatchType, ServerConfig, Store,
    WriteOptions,
};
use serde_json::{json, Value};

const BINARY: u8 = 3;

struct Server {
    runtime: tokio::runtime::Runtime,
    handle: Option<ApiServerHandle>,
}

impl Server {
    fn start() -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let config = ServerConfig {
            bookmark_interval: Duration::from_millis(200),
            ..Default::default()
        };
        let addr = SocketAddr::new(common::unique_ip(BINARY), 0);
        let handle = runtime
            .block_on(ApiServer::start_with(
                addr,
                Store::new(),
                Arc::new(Faults::default()),
                config,
            ))
            .unwrap();
        Server {
            runtime,
            handle: Some(handle),
        }
    }
    fn handle(&self) -> &ApiServerHandle {
        self.handle.as_ref().unwrap()
    }
    fn store(&self) -> Store {
        self.handle().store().clone()
    }
    fn connect(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> TcpStream {
        let mut s = TcpStream::connect(self.handle().addr()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: sim\r\nConnection: close\r\nContent-Length: {}\r\n",
            body.len()
        );
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(body);
        s.write_all(req.as_bytes()).unwrap();
        s
    }
    /// A whole response: (status, content-type, body as JSON or Null).
    fn call(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> (u16, String, Value) {
        let mut raw = Vec::new();
        self.connect(method, path, headers, body)
            .read_to_end(&mut raw)
            .unwrap();
        let text = String::from_utf8_lossy(&raw).into_owned();
        let (head, rest) = text.split_once("\r\n\r\n").unwrap();
        let status: u16 = head.split_whitespace().nth(1).unwrap().parse().unwrap();
        let ct = head
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-type: ")
                    .map(String::from)
            })
            .unwrap_or_default();
        let body = if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            dechunk(rest)
        } else {
            rest.to_string()
        };
        (
            status,
            ct,
            serde_json::from_str(&body).unwrap_or(Value::Null),
        )
    }
    fn get(&self, path: &str, accept: &str) -> Value {
        let (code, _, v) = self.call("GET", path, &[("Accept", accept)], "");
        assert_eq!(code, 200, "GET {path}: {v}");
        v
    }
    /// Opens a watch; returns an iterator over its events (JSON lines).
    fn watch(&self, path: &str, accept: &str) -> impl Iterator<Item = Value> {
        let s = self.connect("GET", path, &[("Accept", accept)], "");
        BufReader::new(s)
            .lines()
            .map_while(Result::ok)
            .filter(|l| l.starts_with('{'))
            .map(|l| serde_json::from_str(&l).unwrap())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut h) = self.handle.take() {
            self.runtime.block_on(h.stop());
        }
    }
}

fn dechunk(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some((size, tail)) = rest.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || tail.len() < n {
            break;
        }
        out.push_str(&tail[..n]);
        rest = tail[n..].trim_start_matches("\r\n");
    }
    out
}

const JSON: &str = "application/json";
const AGGREGATED: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";
const META_LIST: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
const META: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

fn add_crd(store: &Store) {
    let crd: Value = serde_yaml::from_str(include_str!("fixtures/widgets-crd.yaml")).unwrap();
    store
        .create(
            &Gvr::new("apiextensions.k8s.io", "v1", "customresourcedefinitions"),
            None,
            crd,
            &WriteOptions::manager("t"),
        )
        .unwrap();
}

#[test]
fn discovery_is_served_legacy_and_aggregated() {
    let s = Server::start();
    add_crd(&s.store());
    assert_eq!(s.get("/version", JSON)["major"], "1");
    assert_eq!(s.get("/api", JSON)["versions"], json!(["v1"]));
    let groups = s.get("/apis", JSON);
    assert!(groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .any(|g| g["name"] == "sim.example.com"));
    let apps = s.get("/apis/apps/v1", JSON);
    let names: Vec<&str> = apps["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"statefulsets")
            && names.contains(&"statefulsets/status")
            && names.contains(&"statefulsets/scale")
    );
    let (code, ct, agg) = s.call("GET", "/apis", &[("Accept", AGGREGATED)], "");
    assert_eq!(code, 200);
    assert!(ct.contains("as=apigroupdiscoverylist"), "{ct}");
    assert_eq!(agg["kind"], "APIGroupDiscoveryList");
    let widgets = agg["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["metadata"]["name"] == "sim.example.com")
        .unwrap();
    let r = &widgets["versions"][0]["resources"][0];
    assert_eq!(
        (
            r["resource"].as_str(),
            r["scope"].as_str(),
            r["responseKind"]["kind"].as_str()
        ),
        (Some("widgets"), Some("Namespaced"), Some("Widget"))
    );
    assert_eq!(r["subresources"][0]["subresource"], "status");
    let core = s.get("/api", AGGREGATED);
    assert_eq!(core["items"][0]["metadata"]["name"], "");
}

#[test]
fn openapi_v3_documents_carry_kinds_and_crd_schemas() {
    let s = Server::start();
    add_crd(&s.store());
    let (code, _, _) = s.call("GET", "/openapi/v2", &[], "");
    assert_eq!(code, 404);
    let index = s.get("/openapi/v3", JSON);
    let url = index["paths"]["apis/sim.example.com/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(url.starts_with("/openapi/v3/apis/sim.example.com/v1?hash="));
    let doc = s.get(&url, JSON);
    let schema = &doc["components"]["schemas"]["com.example.sim.v1.Widget"];
    assert_eq!(
        schema["x-kubernetes-group-version-kind"],
        json!([{"group": "sim.example.com", "version": "v1", "kind": "Widget"}])
    );
    assert_eq!(
        schema["properties"]["spec"]["properties"]["size"]["minimum"],
        1
    );
    let patch =
        &doc["paths"]["/apis/sim.example.com/v1/namespaces/{namespace}/widgets/{name}"]["patch"];
    assert!(patch["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["name"] == "fieldValidation"));
    assert!(
        s.get("/openapi/v3/api/v1", JSON)["components"]["schemas"]["io.k8s.api.core.v1.Pod"]
            .is_object()
    );
}

#[test]
fn metadata_only_and_table_forms() {
    let s = Server::start();
    s.store()
        .create(
            &Gvr::core("configmaps"),
            Some("default"),
            json!({"metadata": {"name": "a", "labels": {"x": "y"}}, "data": {"k": "v"}}),
            &WriteOptions::manager("t"),
        )
        .unwrap();
    let list = s.get(
        "/api/v1/namespaces/default/configmaps?&limit=500",
        META_LIST,
    );
    assert_eq!(list["kind"], "PartialObjectMetadataList");
    assert_eq!(list["items"][0]["kind"], "PartialObjectMetadata");
    assert_eq!(list["items"][0]["metadata"]["labels"]["x"], "y");
    assert!(list["items"][0].get("data").is_none());
    assert!(list["metadata"]["resourceVersion"].is_string());
    let one = s.get("/api/v1/namespaces/default/configmaps/a", META);
    assert_eq!(one["kind"], "PartialObjectMetadata");
    let table = s.get("/api/v1/namespaces/default/configmaps", TABLE);
    assert_eq!(table["kind"], "Table");
    let cols: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(cols, vec!["Name", "Data", "Age"]);
    assert_eq!(table["rows"][0]["cells"][0], "a");
    assert_eq!(table["rows"][0]["cells"][1], 1);
    assert_eq!(table["rows"][0]["object"]["kind"], "PartialObjectMetadata");
}

#[test]
fn errors_use_status_objects_and_http_codes() {
    let s = Server::start();
    let (code, _, st) = s.call("GET", "/api/v1/namespaces/default/configmaps/none", &[], "");
    assert_eq!(
        (code, st["kind"].as_str(), st["reason"].as_str()),
        (404, Some("Status"), Some("NotFound"))
    );
    s.store()
        .create(
            &Gvr::core("configmaps"),
            Some("default"),
            json!({"metadata": {"name": "a"}}),
            &WriteOptions::manager("t"),
        )
        .unwrap();
    let (code, _, st) = s.call(
        "PATCH",
        "/api/v1/namespaces/default/configmaps/a",
        &[("Content-Type", "application/json")],
        "{}",
    );
    assert_eq!(
        (code, st["reason"].as_str()),
        (415, Some("UnsupportedMediaType"))
    );
    let (code, _, _) = s.call(
        "POST",
        "/api/v1/namespaces/default/configmaps/a",
        &[("Content-Type", "application/json")],
        "{}",
    );
    assert_eq!(code, 405);
    let (code, _, st) = s.call(
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &[("Content-Type", "application/json")],
        "{not json",
    );
    assert_eq!((code, st["reason"].as_str()), (400, Some("BadRequest")));
    let (code, _, st) = s.call(
        "GET",
        "/api/v1/namespaces/default/configmaps?labelSelector=a%20in%20b)",
        &[],
        "",
    );
    assert_eq!((code, st["reason"].as_str()), (400, Some("BadRequest")));
    let (code, _, _) = s.call("GET", "/apis/nope.example.com/v1/things", &[], "");
    assert_eq!(code, 404);
}

#[test]
fn watch_from_a_too_old_resource_version_gets_an_in_stream_410() {
    let s = Server::start();
    let store = s.store();
    for i in 0..(apiserver_sim::store::HISTORY_LEN + 5) {
        store
            .create(
                &Gvr::core("configmaps"),
                Some("default"),
                json!({"metadata": {"name": format!("c{i}")}}),
                &WriteOptions::manager("t"),
            )
            .unwrap();
    }
    let mut w = s.watch("/api/v1/namespaces/default/configmaps?&watch=true&resourceVersion=2&allowWatchBookmarks=true", JSON);
    let ev = w.next().unwrap();
    assert_eq!(ev["type"], "ERROR");
    assert_eq!(
        (
            ev["object"]["kind"].as_str(),
            ev["object"]["code"].as_i64(),
            ev["object"]["reason"].as_str()
        ),
        (Some("Status"), Some(410), Some("Expired"))
    );
    assert!(w.next().is_none(), "the stream closes after the error");
}

#[test]
fn watches_replay_stream_bookmark_and_honour_selectors() {
    let s = Server::start();
    let store = s.store();
    let cms = Gvr::core("configmaps");
    let a = store
        .create(
            &cms,
            Some("default"),
            json!({"metadata": {"name": "a", "labels": {"app": "x"}}}),
            &WriteOptions::manager("t"),
        )
        .unwrap();
    let rv = a["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let mut w = s.watch(&format!("/api/v1/namespaces/default/configmaps?&watch=true&labelSelector=app%3Dx&allowWatchBookmarks=true&resourceVersion={rv}"), META);
    store
        .create(
            &cms,
            Some("default"),
            json!({"metadata": {"name": "other"}}),
            &WriteOptions::manager("t"),
        )
        .unwrap();
    store
        .patch(
            &cms,
            Some("default"),
            "a",
            PatchType::Merge,
            &json!({"data": {"k": "v"}}),
            &WriteOptions::manager("t"),
        )
        .unwrap();
    store
        .patch(
            &cms,
            Some("default"),
            "a",
            PatchType::Merge,
            &json!({"metadata": {"labels": {"app": "y"}}}),
            &WriteOptions::manager("t"),
        )
        .unwrap();
    let mut kinds = Vec::new();
    let mut bookmarks = 0;
    for ev in w.by_ref() {
        match ev["type"].as_str().unwrap() {
            "BOOKMARK" => {
                bookmarks += 1;
                assert_eq!(ev["object"]["kind"], "PartialObjectMetadata");
            }
            t => {
                assert_eq!(ev["object"]["kind"], "PartialObjectMetadata");
                assert_eq!(ev["object"]["metadata"]["name"], "a");
                kinds.push(t.to_string());
            }
        }
        if kinds.len() == 2 && bookmarks > 0 {
            break;
        }
    }
    assert_eq!(
        kinds,
        vec!["MODIFIED", "DELETED"],
        "leaving the selector is a DELETED"
    );
}

#[test]
fn send_initial_events_ends_with_the_initial_events_end_bookmark_and_timeout_closes() {
    let s = Server::start();
    let store = s.store();
    store
        .create(
            &Gvr::core("configmaps"),
            Some("default"),
            json!({"metadata": {"name": "a"}}),
            &WriteOptions::manager("t"),
        )
        .unwrap();
    let w = s.watch("/api/v1/namespaces/default/configmaps?&watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1", JSON);
    let events: Vec<Value> = w.collect();
    assert_eq!(events[0]["type"], "ADDED");
    assert_eq!(events[0]["object"]["metadata"]["name"], "a");
    assert_eq!(events[1]["type"], "BOOKMARK");
    assert_eq!(
        events[1]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    let (code, _, _) = s.call(
        "GET",
        "/api/v1/configmaps?watch=true&sendInitialEvents=true",
        &[],
        "",
    );
    assert_eq!(
        code, 422,
        "sendInitialEvents needs resourceVersionMatch=NotOlderThan"
    );
}

#[test]
fn injected_faults_fail_requests_and_drop_watches() {
    let s = Server::start();
    s.handle().faults().fail_next(2, InjectedError::Unavailable);
    assert_eq!(s.call("GET", "/api/v1/namespaces", &[], "").0, 503);
    assert_eq!(s.call("GET", "/api/v1/namespaces", &[], "").0, 503);
    assert_eq!(s.call("GET", "/api/v1/namespaces", &[], "").0, 200);
    s.handle()
        .faults()
        .fail_share(1.0, InjectedError::TooManyRequests);
    assert_eq!(s.call("GET", "/api/v1/namespaces", &[], "").0, 429);
    s.handle().faults().clear();
    let w = s.watch("/api/v1/namespaces?watch=true&resourceVersion=0", JSON);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for ev in w {
            if tx.send(ev).is_err() {
                break;
            }
        }
    });
    let first = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the initial events");
    assert_eq!(first["type"], "ADDED");
    s.handle().faults().drop_watches();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        match rx.recv_timeout(Duration::from_secs(1)) {
            Ok(_) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => assert!(
                std::time::Instant::now() < deadline,
                "the watch ends when dropped"
            ),
        }
    }
}

#[test]
fn scale_subresource_reads_and_writes_replicas() {
    let s = Server::start();
    let sts = json!({"metadata": {"name": "db"}, "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "db"}}, "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "c", "image": "i:1"}]}}}});
    s.store()
        .create(
            &Gvr::new("apps", "v1", "statefulsets"),
            Some("default"),
            sts,
            &WriteOptions::manager("t"),
        )
        .unwrap();
    let scale = s.get(
        "/apis/apps/v1/namespaces/default/statefulsets/db/scale",
        JSON,
    );
    assert_eq!(
        (
            scale["kind"].as_str(),
            scale["spec"]["replicas"].as_i64(),
            scale["status"]["selector"].as_str()
        ),
        (Some("Scale"), Some(1), Some("app=db"))
    );
    let (code, _, v) = s.call(
        "PATCH",
        "/apis/apps/v1/namespaces/default/statefulsets/db/scale",
        &[("Content-Type", "application/merge-patch+json")],
        r#"{"spec":{"replicas":4}}"#,
    );
    assert_eq!(code, 200, "{v}");
    let got = s
        .store()
        .get(
            &Gvr::new("apps", "v1", "statefulsets"),
            Some("default"),
            "db",
        )
        .unwrap();
    assert_eq!(got["spec"]["replicas"], 4);
}

/// `apps/v1` ReplicaSets, which the Deployment controller creates and
/// scales: served with `status` and `scale`, defaulted and generation-tracked
/// as kube-apiserver's `rsStrategy` does; Deployments get their strategy defaults.
#[test]
fn replica_sets_are_served_with_status_and_scale_and_deployments_defaulted() {
    let s = Server::start();
    let apps = s.get("/apis/apps/v1", JSON);
    let resources = apps["resources"].as_array().unwrap();
    let names: Vec<&str> = resources
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    for name in [
        "replicasets",
        "replicasets/status",
        "replicasets/scale",
        "deployments",
        "deployments/status",
        "deployments/scale",
    ] {
        assert!(names.contains(&name), "{name} in {names:?}");
    }
    let rs_resource = resources
        .iter()
        .find(|r| r["name"] == "replicasets")
        .unwrap();
    assert_eq!(rs_resource["kind"], "ReplicaSet");
    assert_eq!(rs_resource["shortNames"], json!(["rs"]));

    let rs = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "web-abc", "labels": {"app": "web"}},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i:1"}]}}}});
    let (code, _, created) = s.call(
        "POST",
        "/apis/apps/v1/namespaces/default/replicasets",
        &[("Content-Type", JSON)],
        &rs.to_string(),
    );
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["metadata"]["generation"], 1);
    assert_eq!(created["spec"]["replicas"], 1, "SetDefaults_ReplicaSet");
    assert_eq!(created["status"], json!({"replicas": 0}));
    assert_eq!(
        created["spec"]["template"]["spec"]["restartPolicy"],
        "Always"
    );

    let (code, _, v) = s.call(
        "PATCH",
        "/apis/apps/v1/namespaces/default/replicasets/web-abc/status",
        &[("Content-Type", "application/merge-patch+json")],
        r#"{"status":{"replicas":1,"readyReplicas":1,"observedGeneration":1},"spec":{"replicas":7}}"#,
    );
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["status"]["readyReplicas"], 1);
    assert_eq!(v["spec"]["replicas"], 1, "/status ignores the spec");
    assert_eq!(v["metadata"]["generation"], 1);

    let path = "/apis/apps/v1/namespaces/default/replicasets/web-abc/scale";
    let scale = s.get(path, JSON);
    assert_eq!(
        (
            scale["kind"].as_str(),
            scale["spec"]["replicas"].as_i64(),
            scale["status"]["replicas"].as_i64(),
            scale["status"]["selector"].as_str()
        ),
        (Some("Scale"), Some(1), Some(1), Some("app=web"))
    );
    let (code, _, v) = s.call(
        "PATCH",
        path,
        &[("Content-Type", "application/merge-patch+json")],
        r#"{"spec":{"replicas":3}}"#,
    );
    assert_eq!(code, 200, "{v}");
    let got = s
        .store()
        .get(
            &Gvr::new("apps", "v1", "replicasets"),
            Some("default"),
            "web-abc",
        )
        .unwrap();
    assert_eq!(got["spec"]["replicas"], 3);
    assert_eq!(
        got["metadata"]["generation"], 2,
        "a spec change is a new generation"
    );

    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i:1"}]}}}});
    let (code, _, created) = s.call(
        "POST",
        "/apis/apps/v1/namespaces/default/deployments",
        &[("Content-Type", JSON)],
        &deployment.to_string(),
    );
    assert_eq!(code, 201, "{created}");
    let spec = &created["spec"];
    assert_eq!(
        spec["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}),
        "SetDefaults_Deployment"
    );
    assert_eq!(
        (
            &spec["replicas"],
            &spec["revisionHistoryLimit"],
            &spec["progressDeadlineSeconds"]
        ),
        (&json!(1), &json!(10), &json!(600))
    );
    let recreate = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "batch"},
        "spec": {"strategy": {"type": "Recreate"}, "selector": {"matchLabels": {"app": "batch"}},
            "template": {"metadata": {"labels": {"app": "batch"}}, "spec": {"containers": [{"name": "c", "image": "i:1"}]}}}});
    let (code, _, created) = s.call(
        "POST",
        "/apis/apps/v1/namespaces/default/deployments",
        &[("Content-Type", JSON)],
        &recreate.to_string(),
    );
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["spec"]["strategy"], json!({"type": "Recreate"}));
}

#[test]
fn the_binary_prints_a_ready_line_and_writes_a_kubeconfig() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kc");
    let listen = SocketAddr::new(common::unique_ip(BINARY), 0)
        .ip()
        .to_string()
        + ":0";
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_apiserver-sim"))
        .args([
            "--listen",
            &listen,
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--context",
            "c1",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("apiserver-sim ready: http://"), "{line}");
    let url = line.trim().rsplit(' ').next().unwrap().to_string();
    let kc = std::fs::read_to_string(&kubeconfig).unwrap();
    assert!(
        kc.contains(&format!("server: {url}"))
            && kc.contains("current-context: c1")
            && kc.contains("user: {}"),
        "{kc}"
    );
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn dry_run_creates_nothing_and_deletecollection_honours_selectors() {
    let s = Server::start();
    let body = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dry"}}"#;
    let (code, _, obj) = s.call(
        "POST",
        "/api/v1/namespaces/default/configmaps?dryRun=All",
        &[("Content-Type", "application/json")],
        body,
    );
    assert_eq!(code, 201);
    assert_eq!(obj["metadata"]["name"], "dry");
    assert_eq!(
        s.call("GET", "/api/v1/namespaces/default/configmaps/dry", &[], "")
            .0,
        404
    );
    let store = s.store();
    for (name, tier) in [("a", "x"), ("b", "x"), ("c", "y")] {
        store
            .create(
                &Gvr::core("configmaps"),
                Some("default"),
                json!({"metadata": {"name": name, "labels": {"tier": tier}}}),
                &WriteOptions::manager("t"),
            )
            .unwrap();
    }
    let (code, _, list) = s.call(
        "DELETE",
        "/api/v1/namespaces/default/configmaps?labelSelector=tier%3Dx",
        &[],
        "",
    );
    assert_eq!(code, 200);
    assert_eq!(list["items"].as_array().unwrap().len(), 2);
    let left = s.get("/api/v1/namespaces/default/configmaps", JSON);
    let names: Vec<&str> = left["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["c"]);
}
