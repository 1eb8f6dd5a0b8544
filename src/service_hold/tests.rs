use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::json;

use super::*;
use crate::replset::{ConfigMember, ConfigSettings, ReplicaSetConfig};

const VIP: &str = "10.0.0.1";

fn service(name: &str, node_port: Option<u16>, deleting: bool, held: bool) -> MemberServiceObject {
    MemberServiceObject {
        name: name.into(),
        node_port,
        deleting,
        finalizers: if held {
            vec![SERVICE_FINALIZER.into()]
        } else {
            vec![]
        },
    }
}

fn set_with(ports: &[u16], committed: bool) -> ObservedSet {
    let members = ports
        .iter()
        .enumerate()
        .map(|(id, port)| ConfigMember {
            id: id as i64,
            host: MemberAddress {
                host: VIP.into(),
                port: *port,
            },
            arbiter_only: false,
            votes: 1,
            priority: 1.0,
            hidden: false,
            tags: BTreeMap::new(),
            newly_added: false,
        })
        .collect();
    ObservedSet {
        config: ReplicaSetConfig {
            set_name: "demo".into(),
            version: 3,
            term: Some(1),
            members,
            settings: ConfigSettings::from_desired(&Default::default(), None),
        },
        primary: None,
        members: BTreeMap::new(),
        config_committed: committed,
        write_concern: Default::default(),
    }
}

#[test]
fn a_live_instance_claims_every_member_service_it_does_not_hold_yet() {
    let services = [
        service("demo-mongodb-0", Some(30001), false, false),
        service("demo-mongodb-1", Some(30002), false, true),
    ];
    let holds = plan_holds(&services, InstanceLife::Live, Membership::Unknown);
    assert_eq!(holds.claim, [services[0].clone()]);
    assert!(holds.release.is_empty() && holds.held.is_empty());
}

#[test]
fn a_deleted_service_is_held_while_its_member_is_in_the_committed_config() {
    let set = set_with(&[30001, 30002], true);
    let services = [
        service("demo-mongodb-0", Some(30001), true, true),
        service("demo-mongodb-1", Some(30003), true, true),
    ];
    let membership = Membership::of(Some(&set), Some(VIP));
    let holds = plan_holds(&services, InstanceLife::Live, membership);
    assert_eq!(
        holds.held,
        [HeldService {
            name: "demo-mongodb-0".into(),
            address: Some(MemberAddress {
                host: VIP.into(),
                port: 30001
            }),
            reason: HoldReason::MemberInReplicaSet,
        }]
    );
    assert_eq!(
        holds.release,
        [(services[1].clone(), ReleaseReason::MemberLeft)]
    );
    assert!(
        holds.claim.is_empty(),
        "a deleting Service is never claimed"
    );
}

#[test]
fn without_a_committed_config_a_deleted_service_is_held() {
    let uncommitted = set_with(&[], false);
    let services = [service("demo-mongodb-0", Some(30001), true, true)];
    for membership in [
        Membership::of(Some(&uncommitted), Some(VIP)),
        Membership::of(None, Some(VIP)),
        Membership::of(Some(&set_with(&[], true)), None),
    ] {
        let holds = plan_holds(&services, InstanceLife::Live, membership);
        assert!(holds.release.is_empty(), "{membership:?}");
        assert_eq!(holds.held[0].reason, HoldReason::MembershipUnknown);
    }
}

#[test]
fn a_leaving_instance_claims_nothing_and_a_gone_one_releases_everything_it_holds() {
    let set = set_with(&[30001], true);
    let services = [
        service("demo-mongodb-0", Some(30001), true, true),
        service("demo-mongodb-1", Some(30002), false, true),
        service("demo-mongodb-2", Some(30003), false, false),
    ];
    let membership = Membership::of(Some(&set), Some(VIP));
    let leaving = plan_holds(&services, InstanceLife::Leaving, membership);
    assert!(leaving.claim.is_empty());
    assert!(leaving.release.is_empty());
    assert_eq!(leaving.held.len(), 1);

    let gone = plan_holds(&services, InstanceLife::Gone, membership);
    let released: Vec<_> = gone
        .release
        .iter()
        .map(|(s, r)| (s.name.as_str(), *r))
        .collect();
    assert_eq!(
        released,
        [
            ("demo-mongodb-0", ReleaseReason::InstanceGone),
            ("demo-mongodb-1", ReleaseReason::InstanceGone)
        ]
    );
    assert!(gone.claim.is_empty() && gone.held.is_empty());
}

#[test]
fn a_deleted_service_without_a_node_port_routes_nothing_and_goes() {
    let services = [service("demo-mongodb-0", None, true, true)];
    let holds = plan_holds(&services, InstanceLife::Live, Membership::Unknown);
    assert_eq!(
        holds.release,
        [(services[0].clone(), ReleaseReason::NoNodePort)]
    );
}

#[test]
fn only_node_port_services_named_after_a_member_slot_are_member_services() {
    let parse = |value: serde_json::Value| serde_json::from_value::<Service>(value).unwrap();
    let member = |name: &str, type_: &str| {
        parse(json!({
            "metadata": {"name": name, "finalizers": ["example.com/other"]},
            "spec": {"type": type_, "ports": [{"port": 27017, "nodePort": 30001}]},
        }))
    };
    let mut deleting = member("demo-mongodb-arbiter", "NodePort");
    deleting.metadata.deletion_timestamp =
        Some(Time(k8s_openapi::jiff::Timestamp::from_second(1).unwrap()));
    let services = [
        member("demo-mongodb-0", "NodePort"),
        member("demo-mongodb-headless", "ClusterIP"),
        member("demo-mongodb-1", "ClusterIP"),
        member("other-mongodb-0", "NodePort"),
        deleting,
    ];
    let objects = MemberServiceObject::of_instance("demo", &services);
    assert_eq!(
        objects,
        [
            MemberServiceObject {
                name: "demo-mongodb-0".into(),
                node_port: Some(30001),
                deleting: false,
                finalizers: vec!["example.com/other".into()],
            },
            MemberServiceObject {
                name: "demo-mongodb-arbiter".into(),
                node_port: Some(30001),
                deleting: true,
                finalizers: vec!["example.com/other".into()],
            },
        ]
    );
}

#[test]
fn a_held_service_says_which_member_keeps_it_and_why() {
    let held = HeldService {
        name: "demo-mongodb-0".into(),
        address: Some(MemberAddress {
            host: VIP.into(),
            port: 30001,
        }),
        reason: HoldReason::MemberInReplicaSet,
    };
    assert_eq!(
        held.describe(),
        "Service demo-mongodb-0 (10.0.0.1:30001) was deleted and is held: its member is in the replica set; released once it has left"
    );
}
