//! `AggregateStatus`: one status for the whole replica set from every
//! cluster's reflected status, admitted against the CRD's schema.

use super::*;

#[test]
fn aggregate_status_unions_five_members_from_three_clusters_sums_members_and_picks_the_primary() {
    let mut reports = three_running_clusters();
    // member3 last saw config version 6, from which a member of member2 looked down.
    reports[2].config_version = 6;
    reports[2].down = vec!["10.0.2.10:30018"];
    let aggregated = aggregate(items_for(&reports));
    let status = &aggregated["status"];

    let replset = status["replset"].as_array().expect("replset");
    let names: Vec<&str> = replset
        .iter()
        .map(|m| m["name"].as_str().expect("name"))
        .collect();
    assert_eq!(
        names,
        [
            "10.0.1.10:30017",
            "10.0.1.10:30018",
            "10.0.2.10:30017",
            "10.0.2.10:30018",
            "10.0.3.10:30017"
        ]
    );
    let ids: Vec<i64> = replset
        .iter()
        .map(|m| m["_id"].as_i64().expect("_id"))
        .collect();
    assert_eq!(ids, [0, 1, 2, 3, 4], "sorted by _id, each member once");
    assert_eq!(
        replset[3]["stateStr"], "SECONDARY",
        "the view from the newest config wins over member3's stale one"
    );
    assert_eq!(replset[3]["health"], json!(1));
    assert_eq!(replset[0]["stateStr"], "PRIMARY");

    assert_eq!(status["currentInfo"], json!({"members": 5}));
    assert_eq!(status["primary"], PRIMARY);
    assert_eq!(status["configVersion"], json!(7));
    assert_eq!(status["replicaSetId"], REPLICA_SET_ID);
    assert_eq!(status["readyMembers"], "5/5");
    assert_eq!(status["state"], "Running");
    assert_eq!(
        status["observedGeneration"],
        json!(GENERATION),
        "every cluster runs the current template"
    );

    let conditions = status["conditions"].as_array().expect("conditions");
    let types: Vec<&str> = conditions
        .iter()
        .map(|c| c["type"].as_str().expect("type"))
        .collect();
    assert_eq!(types, ["Degraded", "Ready", "ReplicaSetInitialized"]);
    assert!(
        conditions
            .iter()
            .all(|c| c.get("observedGeneration").is_none()),
        "member generations mean nothing in the control plane"
    );

    // The spec and metadata of the resource template are left alone.
    assert_eq!(aggregated["spec"], desired_object()["spec"]);
    assert_eq!(aggregated["metadata"], desired_object()["metadata"]);
}

#[test]
fn aggregate_keeps_the_healthier_view_of_a_member_when_clusters_share_a_config() {
    let mut reports = three_running_clusters();
    // member1 (first by name) cannot reach member3's only member; the others can,
    // on the same config.
    reports[0].down = vec!["10.0.3.10:30017"];
    for order in [[0, 1, 2], [1, 0, 2], [2, 1, 0]] {
        let items = items_for(&reports);
        let items: Vec<Json> = order.iter().map(|&i| items[i].clone()).collect();
        let status = aggregate(items)["status"].clone();
        let member = &status["replset"][4];
        assert_eq!(
            (member["name"].as_str(), member["stateStr"].as_str()),
            (Some("10.0.3.10:30017"), Some("SECONDARY")),
            "order {order:?}"
        );
    }
}

#[test]
fn aggregate_status_handles_a_cluster_with_no_status() {
    let reports = three_running_clusters();
    let mut items = items_for(&reports[..2]);
    items.push(json!({"clusterName": "member3", "applied": true}));
    let mut desired = desired_object();
    desired["status"] = json!({"observedGeneration": 2});
    let status = aggregate_onto(desired.clone(), items)["status"].clone();
    assert_eq!(
        status["state"], "Unknown",
        "not Running while a cluster has not reported"
    );
    assert_eq!(
        status["replset"].as_array().expect("replset").len(),
        5,
        "the reporting clusters see all five members"
    );
    assert_eq!(status["currentInfo"], json!({"members": 4}));
    assert_eq!(status["readyMembers"], "4/4");
    assert_eq!(status["primary"], PRIMARY);
    assert_eq!(
        status["observedGeneration"],
        json!(2),
        "observedGeneration waits for every cluster"
    );

    // A status item whose reflected status is empty, and one that is null.
    let mut items = items_for(&reports[..1]);
    items.push(json!({"clusterName": "member2", "status": {}, "applied": true}));
    items.push(Json::Null);
    let status = aggregate_onto(desired, items)["status"].clone();
    assert_eq!(status["state"], "Unknown");
    assert_eq!(status["currentInfo"], json!({"members": 2}));
}

#[test]
fn aggregate_status_before_any_bound_cluster_reports_is_unknown_with_no_lists() {
    let items = vec![
        json!({"clusterName": "member1"}),
        json!({"clusterName": "member2", "status": {}}),
    ];
    let status = aggregate(items)["status"].clone();
    assert_eq!(
        status,
        json!({"state": "Unknown", "currentInfo": {"members": 0}})
    );
}

#[test]
fn aggregate_state_is_error_if_any_cluster_errs_then_reconciling_then_pause() {
    let cases = [
        (vec!["Running", "Error", "Reconciling"], "Error"),
        (vec!["Running", "Reconciling", "Pause"], "Reconciling"),
        (vec!["Pause", "Running", "Running"], "Pause"),
        (vec!["Running", "Unknown", "Running"], "Unknown"),
        (vec!["Running", "Running", "Running"], "Running"),
    ];
    for (states, expected) in cases {
        let mut reports = three_running_clusters();
        for (report, state) in reports.iter_mut().zip(&states) {
            report.state = *state;
        }
        assert_eq!(
            aggregate(items_for(&reports))["status"]["state"],
            expected,
            "cluster states {states:?}"
        );
    }
}

#[test]
fn aggregate_status_refuses_two_replica_sets_under_one_name() {
    let reports = three_running_clusters();
    let mut items = items_for(&reports);
    items[2]["status"]["replicaSetId"] = json!("0000000000000000000000ff");
    let status = aggregate(items)["status"].clone();
    assert_eq!(
        status["state"], "Error",
        "clusters disagree on the replica set they belong to"
    );
    assert!(status.get("replicaSetId").is_none());
}

#[test]
fn aggregate_conditions_report_the_worst_cluster_by_name() {
    let mut reports = three_running_clusters();
    reports[1].state = "Reconciling";
    reports[1].healthy_local = 1;
    reports[1].degraded = true;
    let status = aggregate(items_for(&reports))["status"].clone();
    let condition = |type_: &str| {
        status["conditions"]
            .as_array()
            .expect("conditions")
            .iter()
            .find(|c| c["type"] == type_)
            .cloned()
            .expect(type_)
    };
    assert_eq!(condition("Ready")["status"], "False");
    assert_eq!(
        condition("Ready")["message"],
        "member2: 1/2 local members healthy"
    );
    assert_eq!(condition("Degraded")["status"], "True");
    assert_eq!(condition("Degraded")["reason"], "MemberUnreachable");
    assert_eq!(condition("ReplicaSetInitialized")["status"], "True");
    assert_eq!(status["currentInfo"], json!({"members": 4}));
    assert_eq!(status["readyMembers"], "4/5");
    assert_eq!(status["state"], "Reconciling");
}

#[test]
fn aggregate_observed_generation_waits_for_a_cluster_on_an_older_template() {
    let reports = three_running_clusters();
    let mut items = items_for(&reports);
    items[1]["status"]["resourceTemplateGeneration"] = json!(GENERATION - 1);
    let mut desired = desired_object();
    desired["status"] = json!({"observedGeneration": GENERATION - 1});
    assert_eq!(
        aggregate_onto(desired, items)["status"]["observedGeneration"],
        json!(GENERATION - 1)
    );
}

#[test]
fn aggregate_replset_and_primary_come_from_the_newest_config_only() {
    const REMOVED: &str = "10.0.2.10:30018";
    let reports = three_running_clusters();
    let mut items = items_for(&reports);
    // member3 has seen config 8, which removed the second member of member2 and
    // has no primary yet; member1 and member2 still report config 7 with it.
    let status = &mut items[2]["status"];
    status["configVersion"] = json!(8);
    status["replset"] = Json::Array(
        status["replset"]
            .as_array()
            .expect("replset")
            .iter()
            .filter(|m| m["name"] != REMOVED)
            .cloned()
            .collect(),
    );
    status.as_object_mut().expect("status").remove("primary");
    let aggregated = aggregate(items.clone());
    let names: Vec<&str> = aggregated["status"]["replset"]
        .as_array()
        .expect("replset")
        .iter()
        .map(|m| m["name"].as_str().expect("name"))
        .collect();
    assert!(
        !names.contains(&REMOVED),
        "a member removed by the newest config is not listed: {names:?}"
    );
    assert_eq!(names.len(), 4);
    assert_eq!(aggregated["status"]["configVersion"], json!(8));
    assert!(
        aggregated["status"].get("primary").is_none(),
        "no primary known in config 8, the older reports' primary is not taken"
    );

    // Two clusters on config 8: the union of their views, and their primary.
    items[1]["status"]["configVersion"] = json!(8);
    items[1]["status"]["replset"] = items[2]["status"]["replset"].clone();
    items[1]["status"]["primary"] = json!("10.0.2.10:30017");
    let aggregated = aggregate(items);
    assert_eq!(aggregated["status"]["primary"], "10.0.2.10:30017");
    assert_eq!(
        aggregated["status"]["replset"]
            .as_array()
            .expect("replset")
            .len(),
        4
    );
}

#[test]
fn aggregate_status_without_status_items_leaves_the_status_as_it_is() {
    let mut desired = desired_object();
    desired["status"] = aggregate(items_for(&three_running_clusters()))["status"].clone();
    // Karmada passes nil (a nil Go slice marshals as null) before any work
    // reports, and an empty list once no cluster is bound.
    for items in [Json::Null, json!([])] {
        assert_eq!(
            aggregate_items(desired.clone(), items.clone()),
            desired,
            "items {items}"
        );
    }
    let bare = desired_object();
    assert_eq!(aggregate_items(bare.clone(), Json::Null), bare);
}

#[test]
fn aggregate_default_write_concern_is_the_most_authoritative_report() {
    let concern = |w: &str, source: &str| json!({"w": w, "source": source});
    let of = |reports: &[ClusterReport]| aggregate(items_for(reports))["status"].clone();

    // Every cluster read the pinned value.
    let mut reports = three_running_clusters();
    assert_eq!(
        of(&reports)["defaultWriteConcern"],
        concern("majority", "global")
    );

    // Two clusters read it before the pin: a global one cannot be unset, so
    // the one cluster that saw it is right, whichever it is.
    reports[0].default_write_concern = concern("majority", "implicit");
    reports[1].default_write_concern = concern("majority", "implicit");
    reports[2].default_write_concern = concern("1", "global");
    let items = items_for(&reports);
    for order in [[0, 1, 2], [2, 1, 0], [1, 2, 0]] {
        let items: Vec<Json> = order.iter().map(|&i| items[i].clone()).collect();
        assert_eq!(
            aggregate(items)["status"]["defaultWriteConcern"],
            concern("1", "global"),
            "order {order:?}"
        );
    }

    // Implicit everywhere: mongod derives it from the config, so the newest
    // config's report wins over the first cluster by name.
    reports[2].default_write_concern = concern("1", "implicit");
    reports[2].config_version = 8;
    assert_eq!(
        of(&reports)["defaultWriteConcern"],
        concern("1", "implicit")
    );
    // On the same config, the first cluster by name.
    reports[2].config_version = 7;
    assert_eq!(
        of(&reports)["defaultWriteConcern"],
        concern("majority", "implicit")
    );

    // Before 5.0 none is set and `w` is absent; an implicit report still wins.
    reports[0].default_write_concern = json!({"source": "none"});
    assert_eq!(
        of(&reports)["defaultWriteConcern"],
        concern("majority", "implicit")
    );
    for report in &mut reports {
        report.default_write_concern = json!({"source": "none"});
    }
    assert_eq!(
        of(&reports)["defaultWriteConcern"],
        json!({"source": "none"})
    );

    // No cluster has read one yet: none in the aggregate either.
    for report in &mut reports {
        report.default_write_concern = Json::Null;
    }
    assert!(of(&reports).get("defaultWriteConcern").is_none());
}
