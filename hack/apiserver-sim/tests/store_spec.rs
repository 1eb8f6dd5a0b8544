//! Specification of the store's semantics (kube-apiserver storage behaviour),
//! exercised through the library API the HTTP handlers and in-process
//! controllers share.

use std::time::Duration;

use apiserver_sim::{
    DeleteOptions, Deleted, EventType, Gvr, ListOptions, PatchType, Propagation, Store,
    WriteOptions,
};
use serde_json::{json, Value};

fn cm() -> Gvr {
    Gvr::core("configmaps")
}

fn widgets() -> Gvr {
    Gvr::new("sim.example.com", "v1", "widgets")
}

fn mgr() -> WriteOptions {
    WriteOptions::manager("test")
}

fn rv(v: &Value) -> u64 {
    v["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

fn crd() -> Value {
    serde_yaml::from_str(include_str!("fixtures/widgets-crd.yaml")).unwrap()
}

fn store_with_crd() -> Store {
    let s = Store::new();
    s.create(
        &Gvr::new("apiextensions.k8s.io", "v1", "customresourcedefinitions"),
        None,
        crd(),
        &mgr(),
    )
    .unwrap();
    s
}

fn configmap(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

#[tokio::test]
async fn a_write_that_changes_nothing_keeps_the_resource_version_and_emits_no_event() {
    let s = Store::new();
    let created = s
        .create(
            &cm(),
            Some("default"),
            configmap("a", json!({"k": "v"})),
            &mgr(),
        )
        .unwrap();
    let mut sub = s
        .subscribe(&cm(), Some("default"), Some(rv(&created)))
        .unwrap();
    let same = s
        .update(&cm(), Some("default"), "a", created.clone(), &mgr())
        .unwrap();
    assert_eq!(rv(&same), rv(&created));
    let patched = s
        .patch(
            &cm(),
            Some("default"),
            "a",
            PatchType::Merge,
            &json!({"data": {"k": "v"}}),
            &mgr(),
        )
        .unwrap();
    assert_eq!(rv(&patched), rv(&created));
    let applied = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "v"}});
    let first = s
        .apply(
            &cm(),
            Some("default"),
            "a",
            applied.clone(),
            &WriteOptions::manager("ssa").force(),
        )
        .unwrap();
    let second = s
        .apply(
            &cm(),
            Some("default"),
            "a",
            applied,
            &WriteOptions::manager("ssa").force(),
        )
        .unwrap();
    assert_eq!(
        rv(&first),
        rv(&second),
        "re-applying the same configuration is a no-op"
    );
    // The only event is the one for the first apply (a new manager entry).
    let ev = sub.next().await.unwrap().unwrap();
    assert_eq!(ev.rv, rv(&first));
    assert!(
        tokio::time::timeout(Duration::from_millis(200), sub.next())
            .await
            .is_err(),
        "no further events"
    );
}

#[test]
fn resource_versions_are_one_global_increasing_counter() {
    let s = Store::new();
    let a = s
        .create(&cm(), Some("default"), configmap("a", json!({})), &mgr())
        .unwrap();
    let b = s
        .create(
            &Gvr::core("secrets"),
            Some("default"),
            json!({"metadata": {"name": "b"}}),
            &mgr(),
        )
        .unwrap();
    assert_eq!(rv(&b), rv(&a) + 1);
    assert_eq!(s.resource_version(), rv(&b));
    assert!(!a["metadata"]["uid"].as_str().unwrap().is_empty());
    assert!(a["metadata"]["creationTimestamp"].is_string());
    assert_eq!(b["type"], "Opaque", "defaulting");
}

#[test]
fn generation_counts_spec_changes_only() {
    let s = Store::new();
    let sts = Gvr::new("apps", "v1", "statefulsets");
    let obj = json!({"metadata": {"name": "db"}, "spec": {"replicas": 1, "selector": {"matchLabels": {"a": "b"}},
        "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i:1"}]}}}});
    let v1 = s.create(&sts, Some("default"), obj, &mgr()).unwrap();
    assert_eq!(v1["metadata"]["generation"], 1);
    let v2 = s
        .patch(
            &sts,
            Some("default"),
            "db",
            PatchType::Merge,
            &json!({"metadata": {"labels": {"x": "y"}}}),
            &mgr(),
        )
        .unwrap();
    assert_eq!(
        v2["metadata"]["generation"], 1,
        "metadata changes keep the generation"
    );
    let v3 = s
        .patch(
            &sts,
            Some("default"),
            "db",
            PatchType::Merge,
            &json!({"status": {"replicas": 1}}),
            &mgr().status(),
        )
        .unwrap();
    assert_eq!(
        v3["metadata"]["generation"], 1,
        "status changes keep the generation"
    );
    assert_eq!(v3["status"]["replicas"], 1);
    let v4 = s
        .patch(
            &sts,
            Some("default"),
            "db",
            PatchType::Merge,
            &json!({"spec": {"replicas": 3}}),
            &mgr(),
        )
        .unwrap();
    assert_eq!(v4["metadata"]["generation"], 2);
}

#[test]
fn the_status_subresource_splits_writes() {
    let s = store_with_crd();
    let w = json!({"apiVersion": "sim.example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 2}, "status": {"phase": "Ignored"}});
    let created = s.create(&widgets(), Some("default"), w, &mgr()).unwrap();
    assert!(
        created.get("status").is_none(),
        "status is dropped on create"
    );
    assert_eq!(created["spec"]["color"], "green", "schema defaults applied");
    let mut main = created.clone();
    main["status"] = json!({"phase": "X"});
    main["spec"]["size"] = json!(4);
    let after_main = s
        .update(&widgets(), Some("default"), "w", main, &mgr())
        .unwrap();
    assert!(
        after_main.get("status").is_none(),
        "the main endpoint ignores status"
    );
    assert_eq!(after_main["spec"]["size"], 4);
    let mut st = after_main.clone();
    st["status"] = json!({"phase": "Ready"});
    st["spec"]["size"] = json!(5);
    let after_status = s
        .update(&widgets(), Some("default"), "w", st, &mgr().status())
        .unwrap();
    assert_eq!(after_status["status"]["phase"], "Ready");
    assert_eq!(
        after_status["spec"]["size"], 4,
        "/status ignores everything but status"
    );
    assert_eq!(after_status["metadata"]["generation"], 2);
}

#[test]
fn custom_resources_are_admitted_against_their_schema_and_rules() {
    let s = store_with_crd();
    let mk = |spec: Value| json!({"apiVersion": "sim.example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": spec});
    let e = s
        .create(&widgets(), Some("default"), mk(json!({"size": 0})), &mgr())
        .unwrap_err();
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert!(e.message.contains("spec.size"), "{}", e.message);
    let e = s
        .create(
            &widgets(),
            Some("default"),
            mk(json!({"size": 2, "color": "pink"})),
            &mgr(),
        )
        .unwrap_err();
    assert!(e.message.contains("spec.color"), "{}", e.message);
    let e = s
        .create(&widgets(), Some("default"), mk(json!({"size": 20})), &mgr())
        .unwrap_err();
    assert!(e.message.contains("only red widgets"), "{}", e.message);
    let ok = s
        .create(
            &widgets(),
            Some("default"),
            mk(json!({"size": 20, "color": "red", "bogus": 1})),
            &mgr(),
        )
        .unwrap();
    assert!(
        ok["spec"].get("bogus").is_none(),
        "unknown fields are pruned"
    );
    let strict = WriteOptions {
        strict_fields: true,
        ..mgr()
    };
    let e = s
        .create(&widgets(), Some("default"), json!({"apiVersion": "sim.example.com/v1", "kind": "Widget", "metadata": {"name": "w2"}, "spec": {"size": 1, "bogus": 1}}), &strict)
        .unwrap_err();
    assert_eq!(e.code, 400);
    assert!(
        e.message.contains("unknown field \"spec.bogus\""),
        "{}",
        e.message
    );
}

#[test]
fn errors_are_kubernetes_statuses_with_the_right_codes() {
    let s = Store::new();
    s.create(&cm(), Some("default"), configmap("a", json!({})), &mgr())
        .unwrap();
    let e = s
        .create(&cm(), Some("default"), configmap("a", json!({})), &mgr())
        .unwrap_err();
    assert_eq!(
        (e.code, e.reason.as_str(), e.message.as_str()),
        (409, "AlreadyExists", "configmaps \"a\" already exists")
    );
    let e = s.get(&cm(), Some("default"), "nope").unwrap_err();
    assert_eq!((e.code, e.reason.as_str()), (404, "NotFound"));
    assert_eq!(
        e.to_status()["details"],
        json!({"name": "nope", "kind": "configmaps"})
    );
    let e = s
        .create(&cm(), Some("missing-ns"), configmap("a", json!({})), &mgr())
        .unwrap_err();
    assert_eq!(e.message, "namespaces \"missing-ns\" not found");
    let e = s
        .create(
            &cm(),
            Some("default"),
            configmap("Bad_Name", json!({})),
            &mgr(),
        )
        .unwrap_err();
    assert_eq!(e.code, 422);
    let e = s
        .patch(
            &cm(),
            Some("default"),
            "a",
            PatchType::Json,
            &json!([{"op": "test", "path": "/data/x", "value": 1}]),
            &mgr(),
        )
        .unwrap_err();
    assert_eq!(e.code, 422);
}

#[test]
fn updates_with_a_stale_resource_version_conflict() {
    let s = Store::new();
    let a = s
        .create(
            &cm(),
            Some("default"),
            configmap("a", json!({"k": "1"})),
            &mgr(),
        )
        .unwrap();
    let mut first = a.clone();
    first["data"]["k"] = json!("2");
    s.update(&cm(), Some("default"), "a", first, &mgr())
        .unwrap();
    let mut stale = a;
    stale["data"]["k"] = json!("3");
    let e = s
        .update(&cm(), Some("default"), "a", stale, &mgr())
        .unwrap_err();
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    assert!(e.message.contains("the object has been modified"));
}

#[test]
fn generate_name_makes_a_unique_name() {
    let s = Store::new();
    let a = s
        .create(
            &cm(),
            Some("default"),
            json!({"metadata": {"generateName": "x-"}}),
            &mgr(),
        )
        .unwrap();
    let b = s
        .create(
            &cm(),
            Some("default"),
            json!({"metadata": {"generateName": "x-"}}),
            &mgr(),
        )
        .unwrap();
    let (na, nb) = (
        a["metadata"]["name"].as_str().unwrap(),
        b["metadata"]["name"].as_str().unwrap(),
    );
    assert!(na.starts_with("x-") && na.len() == 7 && na != nb);
}

#[test]
fn server_side_apply_tracks_owners_conflicts_and_removals() {
    let s = Store::new();
    let cfg = |data: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": data});
    let created = s
        .apply(
            &cm(),
            Some("default"),
            "c",
            cfg(json!({"a": "1", "b": "2"})),
            &WriteOptions::manager("alice"),
        )
        .unwrap();
    assert_eq!(created["data"], json!({"a": "1", "b": "2"}));
    assert_eq!(created["metadata"]["managedFields"][0]["manager"], "alice");
    assert_eq!(
        created["metadata"]["managedFields"][0]["operation"],
        "Apply"
    );
    assert_eq!(
        created["metadata"]["managedFields"][0]["fieldsV1"],
        json!({"f:data": {"f:a": {}, "f:b": {}}})
    );

    let e = s
        .apply(
            &cm(),
            Some("default"),
            "c",
            cfg(json!({"a": "9"})),
            &WriteOptions::manager("bob"),
        )
        .unwrap_err();
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    assert!(
        e.message.contains("conflict with \"alice\"") && e.message.contains(".data.a"),
        "{}",
        e.message
    );

    let forced = s
        .apply(
            &cm(),
            Some("default"),
            "c",
            cfg(json!({"a": "9"})),
            &WriteOptions::manager("bob").force(),
        )
        .unwrap();
    assert_eq!(forced["data"], json!({"a": "9", "b": "2"}));

    let dropped = s
        .apply(
            &cm(),
            Some("default"),
            "c",
            cfg(json!({})),
            &WriteOptions::manager("alice"),
        )
        .unwrap();
    assert_eq!(
        dropped["data"],
        json!({"a": "9"}),
        "alice's b is removed; bob's a stays"
    );

    let e = s
        .apply(
            &cm(),
            Some("default"),
            "c",
            cfg(json!({})),
            &WriteOptions::default(),
        )
        .unwrap_err();
    assert_eq!(e.code, 400, "fieldManager is required");
}

#[test]
fn clients_may_replace_managed_fields_explicitly() {
    let s = Store::new();
    let cfg = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}});
    let v1 = s
        .apply(
            &cm(),
            Some("default"),
            "c",
            cfg,
            &WriteOptions::manager("alice"),
        )
        .unwrap();
    let mut cleared = v1.clone();
    cleared["metadata"]["managedFields"] = json!([{}]);
    let v2 = s
        .update(&cm(), Some("default"), "c", cleared, &mgr())
        .unwrap();
    assert!(
        v2["metadata"].get("managedFields").is_none(),
        "[{{}}] clears managedFields"
    );
    assert_eq!(v2["data"]["a"], "1");
}

#[test]
fn server_side_apply_merges_lists_by_key() {
    let s = Store::new();
    let pods = Gvr::core("pods");
    let pod = |containers: Value| json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": containers}});
    s.apply(
        &pods,
        Some("default"),
        "p",
        pod(json!([{"name": "a", "image": "a:1"}])),
        &WriteOptions::manager("one"),
    )
    .unwrap();
    let both = s
        .apply(
            &pods,
            Some("default"),
            "p",
            pod(json!([{"name": "b", "image": "b:1"}])),
            &WriteOptions::manager("two"),
        )
        .unwrap();
    let names: Vec<&str> = both["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["a", "b"]);
}

#[test]
fn deleting_an_object_with_finalizers_marks_it_and_the_last_finalizer_removes_it() {
    let s = Store::new();
    s.create(
        &cm(),
        Some("default"),
        json!({"metadata": {"name": "f", "finalizers": ["x/y"]}}),
        &mgr(),
    )
    .unwrap();
    let pending = match s
        .delete(&cm(), Some("default"), "f", &DeleteOptions::default())
        .unwrap()
    {
        Deleted::Pending(v) => v,
        Deleted::Gone(_) => panic!("finalizers keep the object"),
    };
    assert!(pending["metadata"]["deletionTimestamp"].is_string());
    let e = s
        .patch(
            &cm(),
            Some("default"),
            "f",
            PatchType::Merge,
            &json!({"metadata": {"finalizers": ["x/y", "new"]}}),
            &mgr(),
        )
        .unwrap_err();
    assert_eq!(e.code, 422, "no new finalizers while deleting");
    s.patch(
        &cm(),
        Some("default"),
        "f",
        PatchType::Merge,
        &json!({"metadata": {"finalizers": null}}),
        &mgr(),
    )
    .unwrap();
    assert_eq!(s.get(&cm(), Some("default"), "f").unwrap_err().code, 404);
}

fn owned_by(name: &str, owner: &Value) -> Value {
    json!({"metadata": {"name": name, "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"]}]}})
}

#[test]
fn garbage_collection_follows_owner_references() {
    let s = Store::new();
    let owner = s
        .create(
            &cm(),
            Some("default"),
            configmap("owner", json!({})),
            &mgr(),
        )
        .unwrap();
    s.create(
        &Gvr::core("secrets"),
        Some("default"),
        owned_by("dep", &owner),
        &mgr(),
    )
    .unwrap();
    let grandchild_owner = s
        .get(&Gvr::core("secrets"), Some("default"), "dep")
        .unwrap();
    s.create(&cm(), Some("default"), json!({"metadata": {"name": "grandchild", "ownerReferences": [{"apiVersion": "v1", "kind": "Secret", "name": "dep", "uid": grandchild_owner["metadata"]["uid"]}]}}), &mgr()).unwrap();
    s.delete(&cm(), Some("default"), "owner", &DeleteOptions::default())
        .unwrap();
    assert_eq!(
        s.get(&Gvr::core("secrets"), Some("default"), "dep")
            .unwrap_err()
            .code,
        404
    );
    assert_eq!(
        s.get(&cm(), Some("default"), "grandchild")
            .unwrap_err()
            .code,
        404
    );

    let owner = s
        .create(
            &cm(),
            Some("default"),
            configmap("owner2", json!({})),
            &mgr(),
        )
        .unwrap();
    s.create(
        &Gvr::core("secrets"),
        Some("default"),
        owned_by("orphan", &owner),
        &mgr(),
    )
    .unwrap();
    let pending = s
        .delete(
            &cm(),
            Some("default"),
            "owner2",
            &DeleteOptions {
                propagation: Propagation::Orphan,
                ..Default::default()
            },
        )
        .unwrap();
    // The call only marks the owner with the `orphan` finalizer; the garbage
    // collector strips the dependents' references, then the finalizer.
    let Deleted::Pending(pending) = pending else {
        panic!("an orphaning delete leaves the owner to the garbage collector")
    };
    assert_eq!(pending["metadata"]["finalizers"], json!(["orphan"]));
    assert!(pending["metadata"]["deletionTimestamp"].is_string());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while s.get(&cm(), Some("default"), "owner2").is_ok() {
        assert!(
            std::time::Instant::now() < deadline,
            "the garbage collector never removed the orphaning owner"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let orphan = s
        .get(&Gvr::core("secrets"), Some("default"), "orphan")
        .unwrap();
    assert!(orphan["metadata"].get("ownerReferences").is_none());
    assert!(orphan["metadata"].get("deletionTimestamp").is_none());

    let owner = s
        .create(
            &cm(),
            Some("default"),
            configmap("owner3", json!({})),
            &mgr(),
        )
        .unwrap();
    s.create(&Gvr::core("secrets"), Some("default"), json!({"metadata": {"name": "blocked", "finalizers": ["hold"], "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner3", "uid": owner["metadata"]["uid"], "blockOwnerDeletion": true}]}}), &mgr()).unwrap();
    let r = s
        .delete(
            &cm(),
            Some("default"),
            "owner3",
            &DeleteOptions {
                propagation: Propagation::Foreground,
                ..Default::default()
            },
        )
        .unwrap();
    assert!(
        matches!(r, Deleted::Pending(_)),
        "foreground deletion waits for dependents"
    );
    assert_eq!(
        s.get(&cm(), Some("default"), "owner3").unwrap()["metadata"]["finalizers"],
        json!(["foregroundDeletion"])
    );
    // The garbage collector takes the dependents on after the call returned,
    // as kube-controller-manager's does.
    let secret = || {
        s.get(&Gvr::core("secrets"), Some("default"), "blocked")
            .unwrap()
    };
    assert!(
        secret()["metadata"].get("deletionTimestamp").is_none(),
        "the delete call itself leaves the dependents to the garbage collector"
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while secret()["metadata"].get("deletionTimestamp").is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "the garbage collector never deleted the dependent"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    s.patch(
        &Gvr::core("secrets"),
        Some("default"),
        "blocked",
        PatchType::Merge,
        &json!({"metadata": {"finalizers": null}}),
        &mgr(),
    )
    .unwrap();
    assert_eq!(
        s.get(&cm(), Some("default"), "owner3").unwrap_err().code,
        404,
        "owner goes once the dependent is gone"
    );
}

#[test]
fn deleting_a_namespace_deletes_its_contents() {
    let s = Store::new();
    let ns = Gvr::core("namespaces");
    s.create(&ns, None, json!({"metadata": {"name": "tmp"}}), &mgr())
        .unwrap();
    s.create(&cm(), Some("tmp"), configmap("a", json!({})), &mgr())
        .unwrap();
    s.delete(&ns, None, "tmp", &DeleteOptions::default())
        .unwrap();
    assert_eq!(s.get(&ns, None, "tmp").unwrap_err().code, 404);
    assert_eq!(s.get(&cm(), Some("tmp"), "a").unwrap_err().code, 404);
}

#[test]
fn lists_filter_by_selectors_and_page_with_continue() {
    let s = Store::new();
    for i in 0..5 {
        let tier = if i % 2 == 0 { "even" } else { "odd" };
        s.create(
            &cm(),
            Some("default"),
            json!({"metadata": {"name": format!("c{i}"), "labels": {"tier": tier}}}),
            &mgr(),
        )
        .unwrap();
    }
    s.create(
        &cm(),
        Some("kube-system"),
        configmap("other", json!({})),
        &mgr(),
    )
    .unwrap();
    let sel = |l: &str| ListOptions {
        label_selector: Some(l.into()),
        ..Default::default()
    };
    assert_eq!(
        s.list(&cm(), Some("default"), &sel("tier=even"))
            .unwrap()
            .items
            .len(),
        3
    );
    assert_eq!(
        s.list(&cm(), Some("default"), &sel("tier notin (even)"))
            .unwrap()
            .items
            .len(),
        2
    );
    assert_eq!(
        s.list(&cm(), None, &sel("!tier")).unwrap().items.len(),
        1,
        "all namespaces"
    );
    let by_name = ListOptions {
        field_selector: Some("metadata.name=c3".into()),
        ..Default::default()
    };
    assert_eq!(
        s.list(&cm(), None, &by_name).unwrap().items[0]["metadata"]["name"],
        "c3"
    );

    let mut names = Vec::new();
    let mut opts = ListOptions {
        limit: Some(2),
        ..Default::default()
    };
    loop {
        let page = s.list(&cm(), Some("default"), &opts).unwrap();
        names.extend(
            page.items
                .iter()
                .map(|o| o["metadata"]["name"].as_str().unwrap().to_string()),
        );
        match page.continue_token {
            Some(t) => {
                assert!(page.remaining_item_count.unwrap() > 0);
                opts.continue_token = Some(t)
            }
            None => break,
        }
    }
    assert_eq!(names, vec!["c0", "c1", "c2", "c3", "c4"]);
}

#[tokio::test]
async fn subscriptions_replay_history_and_expire_when_too_old() {
    let s = Store::new();
    let first = s
        .create(
            &cm(),
            Some("default"),
            configmap("a", json!({"n": "0"})),
            &mgr(),
        )
        .unwrap();
    let start = rv(&first);
    s.patch(
        &cm(),
        Some("default"),
        "a",
        PatchType::Merge,
        &json!({"data": {"n": "1"}}),
        &mgr(),
    )
    .unwrap();
    s.delete(&cm(), Some("default"), "a", &DeleteOptions::default())
        .unwrap();
    let mut sub = s
        .subscribe(&cm(), Some("default"), Some(start - 1))
        .unwrap();
    let kinds: Vec<EventType> = futures_take(&mut sub, 3).await;
    assert_eq!(
        kinds,
        vec![EventType::Added, EventType::Modified, EventType::Deleted]
    );

    for i in 0..(apiserver_sim::store::HISTORY_LEN + 10) {
        s.create(
            &cm(),
            Some("default"),
            json!({"metadata": {"name": format!("c{i}")}}),
            &mgr(),
        )
        .unwrap();
    }
    let e = s
        .subscribe(&cm(), Some("default"), Some(start))
        .err()
        .unwrap();
    assert_eq!((e.code, e.reason.as_str()), (410, "Expired"));
}

/// A subscriber of one kind that reads nothing while another kind changes
/// more times than a watch channel holds is not lagged out: each resource has
/// its own history and channel, as each has its own Cacher in kube-apiserver.
#[tokio::test]
async fn another_kinds_burst_neither_expires_nor_lags_a_subscription() {
    let s = Store::new();
    let secrets = Gvr::core("secrets");
    let from = s.resource_version();
    let mut live = s.subscribe(&secrets, Some("default"), None).unwrap();
    for i in 0..5000 {
        s.create(
            &cm(),
            Some("default"),
            json!({"metadata": {"name": format!("c{i}")}}),
            &mgr(),
        )
        .unwrap();
    }
    s.create(
        &secrets,
        Some("default"),
        json!({"metadata": {"name": "after"}}),
        &mgr(),
    )
    .unwrap();
    assert_eq!(futures_take(&mut live, 1).await, vec![EventType::Added]);
    let mut resumed = s.subscribe(&secrets, Some("default"), Some(from)).unwrap();
    assert_eq!(futures_take(&mut resumed, 1).await, vec![EventType::Added]);
}

async fn futures_take(sub: &mut apiserver_sim::Subscription, n: usize) -> Vec<EventType> {
    let mut out = Vec::new();
    for _ in 0..n {
        let ev = tokio::time::timeout(Duration::from_secs(10), sub.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        out.push(ev.kind);
    }
    out
}

#[tokio::test]
async fn registering_a_crd_serves_its_kind_and_deleting_it_removes_the_objects() {
    let s = store_with_crd();
    assert_eq!(s.gvr_for("sim.example.com/v1", "Widget"), Some(widgets()));
    let crds = Gvr::new("apiextensions.k8s.io", "v1", "customresourcedefinitions");
    let stored = s.get(&crds, None, "widgets.sim.example.com").unwrap();
    let conditions = stored["status"]["conditions"].as_array().unwrap();
    assert!(conditions
        .iter()
        .any(|c| c["type"] == "Established" && c["status"] == "True"));
    s.create(&widgets(), Some("default"), json!({"apiVersion": "sim.example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}}), &mgr()).unwrap();
    let mut sub = s.subscribe(&widgets(), None, None).unwrap();
    s.delete(
        &crds,
        None,
        "widgets.sim.example.com",
        &DeleteOptions::default(),
    )
    .unwrap();
    assert_eq!(
        s.get(&widgets(), Some("default"), "w").unwrap_err().code,
        404
    );
    assert!(s.registry().get(&widgets()).is_none());
    let ev = sub.next().await.unwrap().unwrap();
    assert_eq!(ev.kind, EventType::Deleted, "watchers see the objects go");
    assert!(
        sub.next().await.unwrap().is_none(),
        "then their watch ends with the CRD"
    );
    assert_eq!(s.gvr_for("sim.example.com/v1", "Widget"), None);
    assert_eq!(
        s.gvr_for("apps/v1", "StatefulSet"),
        Some(Gvr::new("apps", "v1", "statefulsets"))
    );
}

#[test]
fn core_and_events_k8s_io_events_share_one_store() {
    let s = Store::new();
    let v1 = Gvr::new("events.k8s.io", "v1", "events");
    s.create(&v1, Some("default"), json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e1"},
        "regarding": {"kind": "Widget", "name": "w", "namespace": "default"}, "note": "hi", "reason": "Made", "type": "Normal",
        "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "c", "reportingInstance": "i", "action": "Make"}), &mgr()).unwrap();
    let core = s.get(&Gvr::core("events"), Some("default"), "e1").unwrap();
    assert_eq!(core["apiVersion"], "v1");
    assert_eq!(core["involvedObject"]["name"], "w");
    assert_eq!(core["message"], "hi");
    let sel = ListOptions {
        field_selector: Some("involvedObject.name=w,involvedObject.kind=Widget".into()),
        ..Default::default()
    };
    assert_eq!(
        s.list(&Gvr::core("events"), Some("default"), &sel)
            .unwrap()
            .items
            .len(),
        1
    );
}

#[test]
fn services_get_cluster_ips_and_node_ports_and_apply_keeps_them() {
    let s = Store::new();
    let svcs = Gvr::core("services");
    let svc = |np: Option<i64>| {
        let mut port = json!({"name": "mongo", "port": 27017});
        if let Some(n) = np {
            port["nodePort"] = json!(n);
        }
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "db-0"}, "spec": {"type": "NodePort", "ports": [port]}})
    };
    let a = s
        .apply(
            &svcs,
            Some("default"),
            "db-0",
            svc(Some(31000)),
            &WriteOptions::manager("plane"),
        )
        .unwrap();
    assert_eq!(a["spec"]["ports"][0]["nodePort"], 31000);
    assert_eq!(a["spec"]["ports"][0]["protocol"], "TCP");
    assert!(a["spec"]["clusterIP"]
        .as_str()
        .unwrap()
        .starts_with("10.96."));
    let again = s
        .apply(
            &svcs,
            Some("default"),
            "db-0",
            svc(Some(31000)),
            &WriteOptions::manager("plane"),
        )
        .unwrap();
    assert_eq!(
        again["spec"]["ports"].as_array().unwrap().len(),
        1,
        "ports merge by port and (defaulted) protocol"
    );
    assert_eq!(rv(&again), rv(&a));
    let mut other = svc(Some(31000));
    other["metadata"]["name"] = json!("db-1");
    let e = s
        .create(&svcs, Some("kube-system"), other, &mgr())
        .unwrap_err();
    assert_eq!(e.code, 422);
    assert!(
        e.message.contains("provided port is already allocated"),
        "{}",
        e.message
    );
}

#[test]
fn a_service_held_by_a_finalizer_keeps_its_node_port_until_the_last_finalizer_goes() {
    let s = Store::new();
    let svcs = Gvr::core("services");
    let svc = |name: &str, finalizers: Value| {
        json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "finalizers": finalizers},
            "spec": {"type": "NodePort", "ports": [{"name": "mongo", "port": 27017, "nodePort": 31121}]}})
    };
    s.create(
        &svcs,
        Some("default"),
        svc("held", json!(["example.com/hold"])),
        &mgr(),
    )
    .unwrap();
    // A DELETE without a propagationPolicy is a Background delete (the HTTP
    // handler's default): no `foregroundDeletion` finalizer, the object stays.
    assert_eq!(
        DeleteOptions::default().propagation,
        Propagation::Background
    );
    let pending = match s
        .delete(&svcs, Some("default"), "held", &DeleteOptions::default())
        .unwrap()
    {
        Deleted::Pending(v) => v,
        Deleted::Gone(_) => panic!("the finalizer keeps the Service"),
    };
    assert!(pending["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(
        pending["metadata"]["finalizers"],
        json!(["example.com/hold"])
    );
    let stored = s.get(&svcs, Some("default"), "held").unwrap();
    assert!(stored["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(stored["spec"]["ports"][0]["nodePort"], 31121);

    // Its nodePort stays allocated (kube-apiserver releases it in `REST.afterDelete`).
    let e = s
        .create(&svcs, Some("kube-system"), svc("thief", json!([])), &mgr())
        .unwrap_err();
    assert_eq!(e.code, 422);
    assert!(
        e.message.contains("provided port is already allocated"),
        "{}",
        e.message
    );

    // No finalizer can be added once it is being deleted.
    let e = s
        .patch(
            &svcs,
            Some("default"),
            "held",
            PatchType::Merge,
            &json!({"metadata": {"finalizers": ["example.com/hold", "example.com/late"]}}),
            &mgr(),
        )
        .unwrap_err();
    assert_eq!(e.code, 422);
    assert!(
        e.message
            .contains("no new finalizers can be added if the object is being deleted"),
        "{}",
        e.message
    );
    // Other writes still go through, and keep the deletionTimestamp and nodePort.
    let labelled = s
        .patch(
            &svcs,
            Some("default"),
            "held",
            PatchType::Merge,
            &json!({"metadata": {"labels": {"step": "terminating"}}}),
            &mgr(),
        )
        .unwrap();
    assert_eq!(
        labelled["metadata"]["deletionTimestamp"],
        stored["metadata"]["deletionTimestamp"]
    );
    assert_eq!(labelled["spec"]["ports"][0]["nodePort"], 31121);

    // The last finalizer removes it and frees the nodePort.
    s.patch(
        &svcs,
        Some("default"),
        "held",
        PatchType::Merge,
        &json!({"metadata": {"finalizers": null}}),
        &mgr(),
    )
    .unwrap();
    assert_eq!(s.get(&svcs, Some("default"), "held").unwrap_err().code, 404);
    let reused = s
        .create(&svcs, Some("kube-system"), svc("thief", json!([])), &mgr())
        .unwrap();
    assert_eq!(reused["spec"]["ports"][0]["nodePort"], 31121);
}
