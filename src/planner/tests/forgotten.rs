//! Removing the members of a lost cluster an SRE asked this cluster to
//! forget: only then, one per reconfig, the arbiter last, a primary stepped
//! down first.

use super::*;

/// a: three voters (a0 primary); b: two voters; c (`THIRD_VIP`): a voter and
/// an arbiter, both down.
fn c_lost() -> (Vec<LocalMemberFacts>, ObservedSet) {
    let (facts, set) = three_local_in_sync(2);
    let mut members = set.config.members.clone();
    members.push(voter(20, third(0)));
    members.push(ConfigMember {
        arbiter_only: true,
        priority: 0.0,
        ..voter(21, addr(THIRD_VIP, port_of(MemberSlot::Arbiter)))
    });
    let mut set = healthy(config(members), &local(0));
    for (host, status) in set.members.iter_mut() {
        if host.host == THIRD_VIP {
            *status = member_status(MemberState::Down, false, None);
        }
    }
    (facts, set)
}

#[test]
fn another_clusters_dead_members_stay_unless_that_cluster_is_forgotten() {
    let (facts, set) = c_lost();
    let input = input(3, facts, Observed::Configured(set));
    assert!(!matches!(plan(&input), Step::Reconfig { .. }));
}

#[test]
fn a_forgotten_clusters_members_leave_one_per_reconfig_the_arbiter_last() {
    let (facts, mut set) = c_lost();
    let arbiter = addr(THIRD_VIP, port_of(MemberSlot::Arbiter));
    let mut removed = Vec::new();
    loop {
        let mut input = input(3, facts.clone(), Observed::Configured(set.clone()));
        input.forgotten_cluster = Some(THIRD_VIP.to_owned());
        let step = plan(&input);
        let Step::Reconfig { config, change } = step else {
            assert_eq!(step, Step::InSync);
            break;
        };
        let Change::RemoveForgottenMember { host } = change else {
            panic!("not a forgotten member's removal: {change:?}");
        };
        assert_eq!(config.version, set.config.version + 1);
        assert_eq!(config.members.len(), set.config.members.len() - 1);
        assert!(config.members.iter().all(|m| m.host != host));
        removed.push(host);
        set.config = config;
        set.members
            .retain(|h, _| set.config.members.iter().any(|m| &m.host == h));
    }
    assert_eq!(removed, [third(0), arbiter]);
    assert!(set.config.members.iter().all(|m| m.host.host != THIRD_VIP));
    assert_eq!(set.config.members.len(), 5, "a and b are untouched");
}

#[test]
fn a_forgotten_member_that_is_primary_is_stepped_down_to_one_that_stays() {
    let (facts, set) = c_lost();
    let mut set = healthy(set.config, &third(0));
    set.members.insert(
        local(0),
        member_status(MemberState::Secondary, true, Some(0)),
    );
    let mut input = input(3, facts, Observed::Configured(set));
    input.forgotten_cluster = Some(THIRD_VIP.to_owned());
    assert_eq!(
        plan(&input),
        Step::StepDown {
            primary: third(0),
            step_down_secs: STEP_DOWN_SECS,
            secondary_catch_up_period_secs: SECONDARY_CATCH_UP_PERIOD_SECS,
        }
    );
}
