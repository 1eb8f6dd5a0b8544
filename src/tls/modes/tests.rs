use super::*;
use TlsMode::{AllowTls, Disabled, PreferTls, RequireTls};

fn member(port: u16) -> MemberAddress {
    MemberAddress {
        host: "10.0.0.1".into(),
        port,
    }
}

fn run(modes: &[Option<TlsMode>]) -> ModesRun {
    modes
        .iter()
        .enumerate()
        .map(|(i, mode)| (member(30001 + i as u16), *mode))
        .collect()
}

#[test]
fn steps_go_one_mode_at_a_time_both_ways() {
    assert_eq!(step_towards(Disabled, RequireTls), AllowTls);
    assert_eq!(step_towards(PreferTls, RequireTls), RequireTls);
    assert_eq!(step_towards(RequireTls, Disabled), PreferTls);
    assert_eq!(step_towards(AllowTls, AllowTls), AllowTls);
}

#[test]
fn a_new_set_is_built_at_the_spec_mode_and_a_joining_cluster_near_the_set() {
    assert_eq!(plan_mode(RequireTls, None, None).template, RequireTls);
    let disabled_set = run(&[Some(Disabled), Some(Disabled)]);
    assert_eq!(
        plan_mode(RequireTls, None, Some(&disabled_set)).template,
        AllowTls
    );
    let straddling = run(&[Some(PreferTls), Some(RequireTls)]);
    assert_eq!(
        plan_mode(Disabled, None, Some(&straddling)).template,
        PreferTls
    );
    assert_eq!(
        plan_mode(RequireTls, None, Some(&run(&[None]))).template,
        RequireTls
    );
}

#[test]
fn a_cluster_steps_once_every_member_runs_within_one_step_of_the_next_mode() {
    let everyone_disabled = run(&[Some(Disabled), Some(Disabled), Some(Disabled)]);
    let plan = plan_mode(RequireTls, Some(Disabled), Some(&everyone_disabled));
    assert_eq!(
        (plan.template, plan.standing),
        (AllowTls, ModeStanding::Stepping)
    );
    assert_eq!(plan.waiting_for.len(), 3);

    let one_ahead = run(&[Some(AllowTls), Some(Disabled), Some(Disabled)]);
    assert_eq!(
        plan_mode(RequireTls, Some(Disabled), Some(&one_ahead)).template,
        AllowTls
    );

    let one_behind = run(&[Some(Disabled), Some(AllowTls), Some(AllowTls)]);
    let plan = plan_mode(RequireTls, Some(AllowTls), Some(&one_behind));
    assert_eq!(
        plan.template, AllowTls,
        "no further while one runs disabled"
    );
    assert_eq!(plan.waiting_for, vec![(member(30001), Some(Disabled))]);

    let down = run(&[Some(PreferTls), Some(RequireTls)]);
    assert_eq!(
        plan_mode(Disabled, Some(RequireTls), Some(&down)).template,
        PreferTls
    );

    let silent = run(&[None, Some(AllowTls)]);
    let plan = plan_mode(RequireTls, Some(AllowTls), Some(&silent));
    assert_eq!(plan.template, PreferTls);
    assert_eq!(
        plan.waiting_for,
        vec![(member(30001), None), (member(30002), Some(AllowTls))]
    );
    let unread = plan_mode(RequireTls, Some(AllowTls), None);
    assert_eq!(
        (unread.template, unread.standing),
        (AllowTls, ModeStanding::ModesUnknown)
    );
}

#[test]
fn the_mode_is_in_place_once_every_member_runs_it() {
    let everywhere = run(&[Some(RequireTls), Some(RequireTls)]);
    assert_eq!(
        plan_mode(RequireTls, Some(RequireTls), Some(&everywhere)).standing,
        ModeStanding::InPlace
    );
    let rolling = run(&[Some(PreferTls), Some(RequireTls)]);
    assert_eq!(
        plan_mode(RequireTls, Some(RequireTls), Some(&rolling)).standing,
        ModeStanding::Stepping
    );
}

#[test]
fn a_restart_never_leaves_two_modes_two_steps_apart() {
    let set = run(&[Some(AllowTls), Some(AllowTls), Some(PreferTls)]);
    assert_eq!(
        restart_keeps_modes_adjacent(&member(30001), PreferTls, &set),
        Ok(())
    );
    assert_eq!(
        restart_keeps_modes_adjacent(&member(30001), Disabled, &set),
        Err((member(30003), Some(PreferTls)))
    );
    let silent = run(&[Some(AllowTls), None]);
    assert_eq!(
        restart_keeps_modes_adjacent(&member(30001), AllowTls, &silent),
        Err((member(30002), None))
    );
}

#[test]
fn clients_use_tls_unless_a_member_runs_or_is_built_disabled() {
    let allow = run(&[Some(AllowTls), Some(PreferTls)]);
    assert!(clients_use_tls(PreferTls, Some(AllowTls), Some(&allow)));
    assert!(!clients_use_tls(Disabled, Some(AllowTls), Some(&allow)));
    let half = run(&[Some(Disabled), Some(AllowTls)]);
    assert!(!clients_use_tls(AllowTls, Some(AllowTls), Some(&half)));
    assert!(!clients_use_tls(PreferTls, Some(PreferTls), None));
    assert!(clients_use_tls(RequireTls, None, None));
}
