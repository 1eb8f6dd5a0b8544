use super::*;
use crate::api::ClusterAuthMode;

const DISABLED: TlsStep = TlsStep::keyfile(TlsMode::Disabled);
const ALLOW: TlsStep = TlsStep::keyfile(TlsMode::AllowTls);
const PREFER: TlsStep = TlsStep::keyfile(TlsMode::PreferTls);
const REQUIRE: TlsStep = TlsStep::keyfile(TlsMode::RequireTls);

fn member(port: u16) -> MemberAddress {
    MemberAddress {
        host: "10.0.0.1".into(),
        port,
    }
}

fn run(modes: &[Option<TlsStep>]) -> ModesRun {
    modes
        .iter()
        .enumerate()
        .map(|(i, mode)| (member(30001 + i as u16), *mode))
        .collect()
}

#[test]
fn steps_go_one_mode_at_a_time_both_ways() {
    assert_eq!(step_towards(DISABLED, REQUIRE), ALLOW);
    assert_eq!(step_towards(PREFER, REQUIRE), REQUIRE);
    assert_eq!(step_towards(REQUIRE, DISABLED), PREFER);
    assert_eq!(step_towards(ALLOW, ALLOW), ALLOW);
}

#[test]
fn a_new_set_is_built_at_the_spec_mode_and_a_joining_cluster_near_the_set() {
    assert_eq!(plan_mode(REQUIRE, None, None).template, REQUIRE);
    let disabled_set = run(&[Some(DISABLED), Some(DISABLED)]);
    assert_eq!(
        plan_mode(REQUIRE, None, Some(&disabled_set)).template,
        ALLOW
    );
    let straddling = run(&[Some(PREFER), Some(REQUIRE)]);
    assert_eq!(
        plan_mode(DISABLED, None, Some(&straddling)).template,
        PREFER
    );
    assert_eq!(
        plan_mode(REQUIRE, None, Some(&run(&[None]))).template,
        REQUIRE
    );
}

#[test]
fn a_cluster_steps_once_every_member_runs_within_one_step_of_the_next_mode() {
    let everyone_disabled = run(&[Some(DISABLED), Some(DISABLED), Some(DISABLED)]);
    let plan = plan_mode(REQUIRE, Some(DISABLED), Some(&everyone_disabled));
    assert_eq!(
        (plan.template, plan.standing),
        (ALLOW, ModeStanding::Stepping)
    );
    assert_eq!(plan.waiting_for.len(), 3);

    let one_ahead = run(&[Some(ALLOW), Some(DISABLED), Some(DISABLED)]);
    assert_eq!(
        plan_mode(REQUIRE, Some(DISABLED), Some(&one_ahead)).template,
        ALLOW
    );

    let one_behind = run(&[Some(DISABLED), Some(ALLOW), Some(ALLOW)]);
    let plan = plan_mode(REQUIRE, Some(ALLOW), Some(&one_behind));
    assert_eq!(plan.template, ALLOW, "no further while one runs disabled");
    assert_eq!(plan.waiting_for, vec![(member(30001), Some(DISABLED))]);

    let down = run(&[Some(PREFER), Some(REQUIRE)]);
    assert_eq!(
        plan_mode(DISABLED, Some(REQUIRE), Some(&down)).template,
        PREFER
    );

    let silent = run(&[None, Some(ALLOW)]);
    let plan = plan_mode(REQUIRE, Some(ALLOW), Some(&silent));
    assert_eq!(plan.template, PREFER);
    assert_eq!(
        plan.waiting_for,
        vec![(member(30001), None), (member(30002), Some(ALLOW))]
    );
    let unread = plan_mode(REQUIRE, Some(ALLOW), None);
    assert_eq!(
        (unread.template, unread.standing),
        (ALLOW, ModeStanding::ModesUnknown)
    );
}

#[test]
fn the_mode_is_in_place_once_every_member_runs_it() {
    let everywhere = run(&[Some(REQUIRE), Some(REQUIRE)]);
    assert_eq!(
        plan_mode(REQUIRE, Some(REQUIRE), Some(&everywhere)).standing,
        ModeStanding::InPlace
    );
    let rolling = run(&[Some(PREFER), Some(REQUIRE)]);
    assert_eq!(
        plan_mode(REQUIRE, Some(REQUIRE), Some(&rolling)).standing,
        ModeStanding::Stepping
    );
}

#[test]
fn a_restart_never_leaves_two_modes_two_steps_apart() {
    let set = run(&[Some(ALLOW), Some(ALLOW), Some(PREFER)]);
    assert_eq!(
        restart_keeps_modes_adjacent(&member(30001), PREFER, &set),
        Ok(())
    );
    assert_eq!(
        restart_keeps_modes_adjacent(&member(30001), DISABLED, &set),
        Err((member(30003), Some(PREFER)))
    );
    let silent = run(&[Some(ALLOW), None]);
    assert_eq!(
        restart_keeps_modes_adjacent(&member(30001), ALLOW, &silent),
        Err((member(30002), None))
    );
}

#[test]
fn clients_use_tls_unless_a_member_runs_or_is_built_disabled() {
    let allow = run(&[Some(ALLOW), Some(PREFER)]);
    assert!(clients_use_tls(PREFER, Some(ALLOW), Some(&allow)));
    assert!(!clients_use_tls(DISABLED, Some(ALLOW), Some(&allow)));
    let half = run(&[Some(DISABLED), Some(ALLOW)]);
    assert!(!clients_use_tls(ALLOW, Some(ALLOW), Some(&half)));
    assert!(!clients_use_tls(PREFER, Some(PREFER), None));
    assert!(clients_use_tls(REQUIRE, None, None));
}

const SEND_KEY_FILE: TlsStep = TlsStep {
    mode: TlsMode::RequireTls,
    auth: ClusterAuthMode::SendKeyFile,
};
const SEND_X509: TlsStep = TlsStep {
    mode: TlsMode::RequireTls,
    auth: ClusterAuthMode::SendX509,
};
const X509: TlsStep = TlsStep {
    mode: TlsMode::RequireTls,
    auth: ClusterAuthMode::X509,
};

#[test]
fn x509_membership_is_three_more_steps_at_require_tls() {
    assert_eq!(step_towards(REQUIRE, X509), SEND_KEY_FILE);
    assert_eq!(step_towards(SEND_X509, DISABLED), SEND_KEY_FILE);
    let at_require = run(&[Some(REQUIRE), Some(REQUIRE)]);
    assert_eq!(
        plan_mode(X509, Some(REQUIRE), Some(&at_require)).template,
        SEND_KEY_FILE
    );
    // Going back down, the keyfile comes back before the TLS mode moves.
    let at_x509 = run(&[Some(X509), Some(X509)]);
    assert_eq!(
        plan_mode(DISABLED, Some(X509), Some(&at_x509)).template,
        SEND_X509
    );
    assert_eq!(
        restart_keeps_modes_adjacent(&member(30001), SEND_X509, &at_require),
        Err((member(30002), Some(REQUIRE)))
    );
    assert_eq!(X509.to_string(), "requireTLS/x509");
    assert_eq!(REQUIRE.to_string(), "requireTLS");
    assert_eq!(
        TlsStep::of(TlsMode::PreferTls, ClusterAuthMode::X509),
        PREFER
    );
}
