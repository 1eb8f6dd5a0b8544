//! Fidelity checks against the real `kubectl` (on PATH): what an SRE does with
//! a cluster must work against the simulator as against kube-apiserver.

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use apiserver_sim::{Gvr, PatchType, WriteOptions};
use common::{wait_for, TestCluster};
use serde_json::json;

const BINARY: u8 = 1;

fn with_crd() -> TestCluster {
    let c = TestCluster::start(BINARY);
    let out = c.kubectl_ok(&["apply", "-f", &c.fixture("widgets-crd.yaml")]);
    assert!(
        out.contains(
            "customresourcedefinition.apiextensions.k8s.io/widgets.sim.example.com created"
        ),
        "{out}"
    );
    c
}

#[test]
fn kubectl_version_and_api_resources_see_builtin_and_custom_kinds() {
    let c = with_crd();
    let out = c.kubectl_ok(&["version", "-o", "json"]);
    assert!(out.contains("\"serverVersion\""), "{out}");
    let out = c.kubectl_ok(&["api-resources"]);
    for line in [
        "statefulsets",
        "sts",
        "apps/v1",
        "widgets",
        "wd",
        "sim.example.com/v1",
        "leases",
        "poddisruptionbudgets",
    ] {
        assert!(out.contains(line), "api-resources lacks {line}:\n{out}");
    }
}

#[test]
fn kubectl_client_side_apply_creates_configures_and_leaves_unchanged() {
    let c = with_crd();
    let widget = c.fixture("widget.yaml");
    assert!(c
        .kubectl_ok(&["apply", "-f", &widget])
        .contains("widget.sim.example.com/w1 created"));
    assert!(c
        .kubectl_ok(&["apply", "-f", &widget])
        .contains("widget.sim.example.com/w1 unchanged"));
    let bigger = c.write(
        "w1.yaml",
        &std::fs::read_to_string(&widget)
            .unwrap()
            .replace("size: 3", "size: 4"),
    );
    assert!(c
        .kubectl_ok(&["apply", "-f", &bigger])
        .contains("widget.sim.example.com/w1 configured"));
    let yaml = c.kubectl_ok(&["get", "widget", "w1", "-o", "yaml", "--show-managed-fields"]);
    assert!(
        yaml.contains("size: 4") && yaml.contains("color: green"),
        "{yaml}"
    );
    assert!(
        yaml.contains("kubectl.kubernetes.io/last-applied-configuration"),
        "{yaml}"
    );
    assert!(
        yaml.contains("manager: kubectl-client-side-apply"),
        "{yaml}"
    );
}

#[test]
fn kubectl_get_prints_the_crd_printer_columns() {
    let c = with_crd();
    c.kubectl_ok(&["apply", "-f", &c.fixture("widget.yaml")]);
    c.store()
        .patch(
            &Gvr::new("sim.example.com", "v1", "widgets"),
            Some("default"),
            "w1",
            PatchType::Merge,
            &json!({"status": {"phase": "Ready"}}),
            &WriteOptions::manager("test").status(),
        )
        .unwrap();
    let out = c.kubectl_ok(&["get", "widgets"]);
    let mut lines = out.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(header, vec!["NAME", "SIZE", "PHASE", "AGE"], "{out}");
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(&row[..3], &["w1", "3", "Ready"], "{out}");
    let out = c.kubectl_ok(&["get", "wd", "-A", "--show-labels"]);
    assert!(
        out.contains("NAMESPACE") && out.contains("app=demo"),
        "{out}"
    );
    let out = c.kubectl_ok(&["get", "namespaces"]);
    assert!(out.contains("default") && out.contains("Active"), "{out}");
}

#[test]
fn kubectl_refuses_invalid_custom_resources_with_the_servers_message() {
    let c = with_crd();
    let bad = c.write(
        "bad.yaml",
        &std::fs::read_to_string(c.fixture("widget.yaml"))
            .unwrap()
            .replace("size: 3", "size: 0"),
    );
    let (ok, _, err) = c.kubectl(&["apply", "-f", &bad]);
    assert!(!ok);
    assert!(
        err.contains("is invalid") && err.contains("spec.size"),
        "{err}"
    );
    let unknown = c.write(
        "unknown.yaml",
        &std::fs::read_to_string(c.fixture("widget.yaml"))
            .unwrap()
            .replace("size: 3", "size: 3\n  shape: round"),
    );
    let (ok, _, err) = c.kubectl(&["apply", "-f", &unknown]);
    assert!(!ok, "fieldValidation=Strict refuses unknown fields");
    assert!(err.contains("unknown field \"spec.shape\""), "{err}");
}

#[test]
fn kubectl_server_side_apply_owns_fields_and_reports_conflicts() {
    let c = TestCluster::start(BINARY);
    c.kubectl_ok(&[
        "apply",
        "--server-side",
        "-f",
        &c.fixture("widgets-crd.yaml"),
    ]);
    let widget = c.fixture("widget.yaml");
    let out = c.kubectl_ok(&["apply", "--server-side", "-f", &widget]);
    assert!(
        out.contains("widget.sim.example.com/w1 serverside-applied"),
        "{out}"
    );
    let bigger = c.write(
        "w1.yaml",
        &std::fs::read_to_string(&widget)
            .unwrap()
            .replace("size: 3", "size: 5"),
    );
    let (ok, _, err) = c.kubectl(&[
        "apply",
        "--server-side",
        "--field-manager",
        "other",
        "-f",
        &bigger,
    ]);
    assert!(!ok);
    assert!(
        err.contains("conflict") && err.contains("\"kubectl\"") && err.contains(".spec.size"),
        "{err}"
    );
    c.kubectl_ok(&[
        "apply",
        "--server-side",
        "--field-manager",
        "other",
        "--force-conflicts",
        "-f",
        &bigger,
    ]);
    let yaml = c.kubectl_ok(&["get", "widget", "w1", "-o", "yaml", "--show-managed-fields"]);
    assert!(
        yaml.contains("size: 5")
            && yaml.contains("manager: other")
            && yaml.contains("operation: Apply"),
        "{yaml}"
    );
}

/// A list item a server-side applier no longer sends goes whole, as
/// structured-merge-diff removes it: no half item without its key is left.
#[test]
fn kubectl_server_side_apply_drops_an_item_no_longer_applied() {
    let c = TestCluster::start(BINARY);
    let pod = |mounts: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: c\n    image: i\n    volumeMounts:\n{mounts}  volumes:\n  - name: data\n    emptyDir: {{}}\n  - name: tls\n    emptyDir: {{}}\n"
        )
    };
    let data = "    - name: data\n      mountPath: /data\n";
    let tls = "    - name: tls\n      mountPath: /etc/tls\n      readOnly: true\n";
    let both = c.write("both.yaml", &pod(&format!("{data}{tls}")));
    c.kubectl_ok(&["apply", "--server-side", "-f", &both]);
    let one = c.write("one.yaml", &pod(data));
    c.kubectl_ok(&["apply", "--server-side", "-f", &one]);
    let mounts = c.kubectl_ok(&[
        "get",
        "pod",
        "p",
        "-o",
        "jsonpath={.spec.containers[0].volumeMounts}",
    ]);
    assert_eq!(mounts, r#"[{"mountPath":"/data","name":"data"}]"#);
}

#[test]
fn kubectl_applies_builtin_kinds_with_strategic_merge() {
    let c = TestCluster::start(BINARY);
    let sts = r#"apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
spec:
  replicas: 1
  serviceName: db
  selector:
    matchLabels: {app: db}
  template:
    metadata:
      labels: {app: db}
    spec:
      containers:
        - name: mongod
          image: mongo:7
          env:
            - {name: A, value: "1"}
        - name: sidecar
          image: busybox:1
"#;
    let f = c.write("sts.yaml", sts);
    c.kubectl_ok(&["apply", "-f", &f]);
    let f2 = c.write(
        "sts2.yaml",
        &sts.replace("mongo:7", "mongo:8")
            .replace("replicas: 1", "replicas: 3"),
    );
    assert!(c.kubectl_ok(&["apply", "-f", &f2]).contains("configured"));
    let got = c
        .store()
        .get(
            &Gvr::new("apps", "v1", "statefulsets"),
            Some("default"),
            "db",
        )
        .unwrap();
    assert_eq!(got["spec"]["replicas"], 3);
    assert_eq!(
        got["spec"]["template"]["spec"]["containers"][0]["image"],
        "mongo:8"
    );
    assert_eq!(
        got["spec"]["template"]["spec"]["containers"][1]["name"],
        "sidecar"
    );
    assert_eq!(got["metadata"]["generation"], 2);
    c.kubectl_ok(&["scale", "statefulset", "db", "--replicas=2"]);
    c.kubectl_ok(&["label", "statefulset", "db", "tier=data"]);
    let cm = c.write("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\n  labels: {tier: data}\ndata: {a: b}\n");
    c.kubectl_ok(&["create", "-f", &cm]);
    c.kubectl_ok(&["patch", "configmap", "cfg", "-p", r#"{"data":{"c":"d"}}"#]);
    c.kubectl_ok(&[
        "patch",
        "configmap",
        "cfg",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/data/a"}]"#,
    ]);
    let out = c.kubectl_ok(&["get", "sts,cm", "-l", "tier=data"]);
    assert!(
        out.contains("statefulset.apps/db") && out.contains("0/2"),
        "{out}"
    );
    assert!(
        out.contains("configmap/cfg") && out.contains("DATA"),
        "{out}"
    );
    let cm = c
        .store()
        .get(&Gvr::core("configmaps"), Some("default"), "cfg")
        .unwrap();
    assert_eq!(cm["data"], json!({"c": "d"}));
}

#[test]
fn kubectl_create_generators_send_protobuf_that_the_server_decodes() {
    let c = TestCluster::start(BINARY);
    c.kubectl_ok(&["create", "namespace", "db"]);
    c.kubectl_ok(&[
        "create",
        "secret",
        "generic",
        "creds",
        "-n",
        "db",
        "--from-literal=username=root",
    ]);
    c.kubectl_ok(&[
        "create",
        "configmap",
        "conf",
        "-n",
        "db",
        "--from-literal=k=v",
    ]);
    let secret = c
        .store()
        .get(&Gvr::core("secrets"), Some("db"), "creds")
        .unwrap();
    assert_eq!(secret["data"]["username"], "cm9vdA==");
    assert_eq!(secret["type"], "Opaque");
    assert!(secret["metadata"].get("generation").is_none());
    let out = c.kubectl_ok(&["get", "secrets,configmaps", "-n", "db"]);
    assert!(
        out.contains("secret/creds") && out.contains("Opaque") && out.contains("configmap/conf"),
        "{out}"
    );
}

#[test]
fn kubectl_get_watch_streams_changes() {
    let c = with_crd();
    c.kubectl_ok(&["apply", "-f", &c.fixture("widget.yaml")]);
    let mut child = c
        .kubectl_cmd(&["get", "widgets", "-w", "--output-watch-events"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let next = || {
        rx.recv_timeout(Duration::from_secs(60))
            .expect("a line from kubectl get -w")
    };
    assert!(next().contains("EVENT"));
    assert!(next().contains("w1"));
    let widgets = Gvr::new("sim.example.com", "v1", "widgets");
    c.store()
        .patch(
            &widgets,
            Some("default"),
            "w1",
            PatchType::Merge,
            &json!({"spec": {"size": 7}}),
            &WriteOptions::manager("test"),
        )
        .unwrap();
    let line = wait_for("the MODIFIED line", || {
        Some(next()).filter(|l| l.contains("MODIFIED"))
    });
    assert!(line.contains("w1") && line.contains('7'), "{line}");
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn kubectl_describe_shows_events() {
    let c = with_crd();
    c.kubectl_ok(&["apply", "-f", &c.fixture("widget.yaml")]);
    let w = c
        .store()
        .get(
            &Gvr::new("sim.example.com", "v1", "widgets"),
            Some("default"),
            "w1",
        )
        .unwrap();
    c.store()
        .create(
            &Gvr::new("events.k8s.io", "v1", "events"),
            Some("default"),
            json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"generateName": "w1."},
                "regarding": {"apiVersion": "sim.example.com/v1", "kind": "Widget", "name": "w1", "namespace": "default", "uid": w["metadata"]["uid"]},
                "reason": "Polished", "note": "widget polished", "type": "Normal", "action": "Polish",
                "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "sim/test", "reportingInstance": "t"}),
            &WriteOptions::manager("test"),
        )
        .unwrap();
    let out = c.kubectl_ok(&["describe", "widget", "w1"]);
    assert!(out.contains("Name:") && out.contains("w1"), "{out}");
    assert!(
        out.contains("Events:") && out.contains("Polished") && out.contains("widget polished"),
        "{out}"
    );
}

#[test]
fn kubectl_delete_removes_the_object_and_get_reports_not_found() {
    let c = with_crd();
    c.kubectl_ok(&["apply", "-f", &c.fixture("widget.yaml")]);
    let out = c.kubectl_ok(&["delete", "-f", &c.fixture("widget.yaml")]);
    assert!(
        out.contains("widget.sim.example.com \"w1\" deleted"),
        "{out}"
    );
    let (ok, _, err) = c.kubectl(&["get", "widget", "w1"]);
    assert!(!ok);
    assert!(
        err.contains("Error from server (NotFound): widgets.sim.example.com \"w1\" not found"),
        "{err}"
    );
    let out = c.kubectl_ok(&["delete", "crd", "widgets.sim.example.com"]);
    assert!(out.contains("deleted"), "{out}");
}

#[test]
fn an_injected_conflict_fails_only_a_write_that_names_its_resource_version() {
    let c = with_crd();
    c.kubectl_ok(&["apply", "-f", &c.fixture("widget.yaml")]);
    let current = c.kubectl_ok(&["get", "widget", "w1", "-o", "yaml"]);
    assert!(current.contains("resourceVersion:"), "{current}");
    let faults = c.server.as_ref().unwrap().faults().clone();
    faults.fail_next(1, apiserver_sim::InjectedError::Conflict);
    // A patch without a resourceVersion: kube-apiserver retries it on the
    // current object, it never conflicts.
    c.kubectl_ok(&["label", "widget", "w1", "tier=gold"]);
    assert_eq!(faults.injected_count(), 0);
    // An update based on the resourceVersion read above.
    let file = c.write("w1-read.yaml", &current.replace("size: 3", "size: 5"));
    let (ok, _, err) = c.kubectl(&["replace", "-f", &file]);
    assert!(!ok);
    assert!(
        err.contains("Error from server (Conflict): error when replacing \"",)
            && err.contains(
                "Operation cannot be fulfilled on widgets.sim.example.com \"w1\": the object has \
             been modified; please apply your changes to the latest version and try again"
            ),
        "{err}"
    );
    assert_eq!(
        faults.injected_count_of(apiserver_sim::InjectedError::Conflict),
        1
    );
}

#[test]
fn an_injected_410_ends_a_watch_from_a_resource_version_with_an_expired_error_event() {
    let c = with_crd();
    c.kubectl_ok(&["apply", "-f", &c.fixture("widget.yaml")]);
    let faults = c.server.as_ref().unwrap().faults().clone();
    for (error, reason) in [
        (apiserver_sim::InjectedError::Expired, "Expired"),
        (apiserver_sim::InjectedError::Gone, "Gone"),
    ] {
        faults.fail_share(1.0, error);
        // kubectl lists (not injected), then watches from the list's
        // resourceVersion: the watch gets the 410 as an ERROR event.
        // kubectl prints the Status as a row of its table and the watch ends.
        let (_, out, err) = c.kubectl(&["get", "widgets", "-w", "--request-timeout=20s"]);
        faults.clear();
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[1].starts_with("w1 "), "the list went through: {out}");
        assert!(
            lines.iter().any(
                |l| l.split_whitespace().collect::<Vec<_>>() == ["STATUS", "REASON", "MESSAGE"]
            ),
            "{out}"
        );
        let status = lines.last().unwrap().split_whitespace().collect::<Vec<_>>();
        assert_eq!(
            status[..5],
            ["Failure", reason, "too", "old", "resource"],
            "{out} {err}"
        );
        assert_eq!(faults.injected_count_of(error), 1, "{out} {err}");
    }
}
