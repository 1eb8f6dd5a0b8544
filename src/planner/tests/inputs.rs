//! How the planner's input is put together from what a pass observed, and
//! what it tells the controller: whether a leaving cluster has left, and which
//! entries to record on the StatefulSets.

use std::collections::BTreeMap;

use crate::api::MongoDBStatus;
use crate::build::fixtures;
use crate::hostconf::MemberAddress;
use crate::member::{MemberSlot, RecordedEntry, Wanted};
use crate::observe::fixtures::{address, probe, validated, TWO, VIP};
use crate::observe::{Observed, ObservedSet};
use crate::planner::{entries_to_record, has_left, PlanInput, Step, WaitReason};
use crate::validate::Validated;

#[test]
fn the_plan_input_separates_local_and_remote_answers() {
    let mut mongodb = fixtures::mongodb();
    mongodb.spec.members = 2;
    mongodb.spec.rs_init = true;
    mongodb.status = Some(MongoDBStatus {
        replica_set_id: Some("id-1".into()),
        ..MongoDBStatus::default()
    });
    let probes = BTreeMap::from([
        (address(VIP, 30001), probe(true)),
        (address("10.0.0.2", 30001), probe(true)),
        (address(VIP, 39999), probe(true)),
    ]);
    let input = PlanInput::from_observation(
        &mongodb,
        &validated(),
        TWO,
        &probes,
        None,
        Some(address(VIP, 30001)),
        None,
    );
    assert_eq!(input.local_vip, VIP);
    assert_eq!(
        (input.desired_members, input.arbiter_wanted, input.rs_init),
        (2, false, true)
    );
    assert_eq!(input.known_replica_set_id.as_deref(), Some("id-1"));
    assert_eq!(input.observed, Observed::Unreachable);
    assert_eq!(input.stepped_down_recently, Some(address(VIP, 30001)));
    let slots: Vec<MemberSlot> = input.local_members.iter().map(|m| m.slot).collect();
    assert_eq!(
        slots,
        vec![
            MemberSlot::Data(0),
            MemberSlot::Data(1),
            MemberSlot::Data(3)
        ]
    );
    let first = &input.local_members[0];
    assert!(first.stateful_set_exists && first.pod_running && first.probe.is_some());
    let second = &input.local_members[1];
    assert!(second.stateful_set_exists && !second.pod_running && second.probe.is_none());
    assert_eq!(input.local_members[2].address, Some(address(VIP, 30004)));
    assert_eq!(
        input.remote_probes.keys().cloned().collect::<Vec<_>>(),
        vec![address("10.0.0.2", 30001)],
        "an unknown address with this cluster's VIP is neither local nor remote"
    );
}

#[test]
fn a_leaving_cluster_has_left_when_in_sync_or_when_nothing_holds_a_config() {
    let mongodb = fixtures::mongodb();
    let nothing = Wanted {
        members: 0,
        arbiter: false,
    };
    let fresh = BTreeMap::from([(address(VIP, 30001), probe(false))]);
    let unread =
        PlanInput::from_observation(&mongodb, &validated(), nothing, &fresh, None, None, None);
    assert!(has_left(
        &unread,
        &Step::Wait {
            reason: WaitReason::NoPrimary
        }
    ));
    let configured = BTreeMap::from([(address(VIP, 30001), probe(true))]);
    let still_member = PlanInput::from_observation(
        &mongodb,
        &validated(),
        nothing,
        &configured,
        None,
        None,
        None,
    );
    assert!(!has_left(
        &still_member,
        &Step::Wait {
            reason: WaitReason::NoPrimary
        }
    ));
    assert!(has_left(&still_member, &Step::InSync));
}

#[test]
fn an_observed_set_is_handed_over_as_configured() {
    let set = ObservedSet {
        config: crate::replset::ReplicaSetConfig {
            set_name: "replset-0".into(),
            version: 1,
            term: None,
            members: vec![],
            settings: crate::replset::ConfigSettings::from_desired(&Default::default(), None),
        },
        primary: None,
        members: BTreeMap::new(),
        config_committed: false,
        write_concern: Default::default(),
    };
    let input = PlanInput::from_observation(
        &fixtures::mongodb(),
        &validated(),
        TWO,
        &BTreeMap::new(),
        Some(set.clone()),
        None,
        None,
    );
    assert_eq!(input.observed, Observed::Configured(set));
}

#[test]
fn a_member_entry_is_recorded_once_and_again_when_it_changes() {
    use crate::replset::{ConfigMember, ConfigSettings, ReplicaSetConfig};
    let entry = |id: i64, port: u16| ConfigMember {
        id,
        host: address(VIP, port),
        arbiter_only: false,
        votes: 1,
        priority: 1.0,
        hidden: false,
        tags: BTreeMap::new(),
        newly_added: false,
    };
    let set = |primary: Option<MemberAddress>| ObservedSet {
        config: ReplicaSetConfig {
            set_name: "replset-0".into(),
            version: 3,
            term: Some(1),
            members: vec![entry(0, 30001), entry(4, 30004)],
            settings: ConfigSettings::from_desired(&Default::default(), Some("id-1".into())),
        },
        primary,
        members: BTreeMap::new(),
        config_committed: true,
        write_concern: Default::default(),
    };
    let mut validated = validated();
    let input = |validated: &Validated, set: ObservedSet| {
        PlanInput::from_observation(
            &fixtures::mongodb(),
            validated,
            TWO,
            &BTreeMap::new(),
            Some(set),
            None,
            None,
        )
    };
    let with_primary = set(Some(address(VIP, 30001)));
    // Slot 0 is at 30001 in the config; slot 3 (recorded host 30004) too;
    // slot 1 is not in the config.
    let recorded = |id, port| RecordedEntry {
        id,
        host: address(VIP, port),
    };
    assert_eq!(
        entries_to_record(&input(&validated, with_primary.clone())),
        vec![
            (MemberSlot::Data(0), recorded(0, 30001)),
            (MemberSlot::Data(3), recorded(4, 30004)),
        ]
    );
    assert_eq!(
        entries_to_record(&input(&validated, set(None))),
        vec![],
        "nothing is recorded from a config read without a primary"
    );
    // A config the primary has not committed may still be rolled back (a
    // failover before it reached a majority): a record taken from it could
    // name a host the committed config never had.
    let uncommitted = ObservedSet {
        config_committed: false,
        ..with_primary.clone()
    };
    assert_eq!(
        entries_to_record(&input(&validated, uncommitted)),
        vec![],
        "nothing is recorded from a config not yet committed"
    );
    for (slot, entry) in [(0, recorded(0, 30001)), (3, recorded(4, 30004))] {
        let facts = validated.stateful_sets.get_mut(&MemberSlot::Data(slot));
        facts.expect("a StatefulSet").recorded_entry = Some(entry);
    }
    assert_eq!(
        entries_to_record(&input(&validated, with_primary.clone())),
        vec![],
        "what is recorded is not written again"
    );
    // Slot 0's Service now has another nodePort: it is still known by its
    // record, which stays until its entry takes the new host.
    validated
        .services
        .get_mut(&MemberSlot::Data(0))
        .expect("a Service")
        .node_port = Some(30101);
    assert_eq!(
        entries_to_record(&input(&validated, with_primary.clone())),
        vec![]
    );
    let mut readdressed = with_primary;
    readdressed.config.members[0].host = address(VIP, 30101);
    assert_eq!(
        entries_to_record(&input(&validated, readdressed)),
        vec![(MemberSlot::Data(0), recorded(0, 30101))]
    );
}
