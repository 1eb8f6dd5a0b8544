use super::*;

const OLD: &str = "b2xkIGtleSBvbGQga2V5IG9sZCBrZXk=";
const NEW: &str = "bmV3IGtleSBuZXcga2V5IG5ldyBrZXk=";
const OTHER: &str = "b3RoZXIga2V5IG90aGVyIGtleSBvdGhlcg==";

fn member(host: &str, port: u16) -> MemberAddress {
    MemberAddress::parse(&format!("{host}:{port}")).unwrap()
}

fn two(first: &str, second: &str) -> Keyfile {
    Keyfile::parse(&format!("- {first}\n- {second}\n")).unwrap()
}

/// Members a0, a1 (VIP 10.0.0.1) and b0 (VIP 10.0.0.2) running these keyfiles.
fn run(a0: &Keyfile, a1: &Keyfile, b0: Option<&Keyfile>) -> KeysRun {
    BTreeMap::from([
        (member("10.0.0.1", 30001), Some(a0.fingerprints())),
        (member("10.0.0.1", 30002), Some(a1.fingerprints())),
        (member("10.0.0.2", 30001), b0.map(Keyfile::fingerprints)),
    ])
}

#[test]
fn a_keyfile_is_rendered_as_the_yaml_sequence_mongod_reads_and_parsed_back() {
    let keyfile = two(OLD, NEW);
    assert_eq!(keyfile.render(), format!("- {OLD}\n- {NEW}\n"));
    assert_eq!(Keyfile::parse(&keyfile.render()), Some(keyfile));
    // One key written as a plain scalar, whitespace removed as mongod does.
    let plain = format!("{}\n  {}\n", &OLD[..10], &OLD[10..]);
    assert_eq!(Keyfile::parse(&plain), Some(Keyfile::of_key(OLD)));
    assert_eq!(
        Keyfile::parse("- a\n- b\n- c\n"),
        None,
        "mongod takes two keys at most"
    );
    assert_eq!(Keyfile::parse(" \n"), None);
}

#[test]
fn debug_shows_fingerprints_never_keys() {
    let shown = format!("{:?}", two(OLD, NEW));
    assert!(!shown.contains(OLD) && !shown.contains(NEW), "{shown}");
    assert!(shown.contains(&fingerprint(OLD)), "{shown}");
}

#[test]
fn a_new_instance_and_an_unchanged_key_run_the_secrets_key() {
    let new = Keyfile::of_key(NEW);
    assert_eq!(plan_keyfile(&new, &[], None), new);
    assert_eq!(plan_keyfile(&new, std::slice::from_ref(&new), None), new);
}

#[test]
fn a_new_key_is_added_beside_the_old_one_every_member_holds() {
    let (old, new) = (Keyfile::of_key(OLD), Keyfile::of_key(NEW));
    let everyone_old = run(&old, &old, Some(&old));
    assert_eq!(
        plan_keyfile(&new, std::slice::from_ref(&old), Some(&everyone_old)),
        two(OLD, NEW)
    );
}

#[test]
fn without_knowing_what_every_member_runs_the_keyfile_stays() {
    let (old, new) = (Keyfile::of_key(OLD), Keyfile::of_key(NEW));
    assert_eq!(plan_keyfile(&new, std::slice::from_ref(&old), None), old);
    let b_unknown = run(&old, &old, None);
    assert_eq!(
        plan_keyfile(&new, std::slice::from_ref(&old), Some(&b_unknown)),
        old
    );
    assert_eq!(
        plan_keyfile(&new, std::slice::from_ref(&old), Some(&KeysRun::new())),
        old
    );
}

#[test]
fn the_old_key_goes_once_every_member_holds_the_new_one() {
    let (both, new) = (two(OLD, NEW), Keyfile::of_key(NEW));
    let half = run(&both, &both, Some(&Keyfile::of_key(OLD)));
    assert_eq!(
        plan_keyfile(&new, std::slice::from_ref(&both), Some(&half)),
        both,
        "b still runs the old key alone"
    );
    let all_both = run(&both, &both, Some(&both));
    assert_eq!(
        plan_keyfile(&new, std::slice::from_ref(&both), Some(&all_both)),
        new
    );
    // A member already on the new key alone holds it too.
    let mixed = run(&new, &both, Some(&both));
    assert_eq!(
        plan_keyfile(&new, std::slice::from_ref(&both), Some(&mixed)),
        new
    );
}

#[test]
fn a_third_key_mid_rotation_goes_beside_the_key_every_member_holds() {
    let both = two(OLD, NEW);
    let all_both = run(&both, &both, Some(&both));
    let other = Keyfile::of_key(OTHER);
    assert_eq!(
        plan_keyfile(&other, std::slice::from_ref(&both), Some(&all_both)),
        two(OLD, OTHER)
    );
    // b moved on to the new key alone: only the new key is held everywhere.
    let b_new = run(&both, &both, Some(&Keyfile::of_key(NEW)));
    assert_eq!(
        plan_keyfile(&other, std::slice::from_ref(&both), Some(&b_new)),
        two(NEW, OTHER)
    );
}

#[test]
fn a_keyfile_sharing_no_key_with_a_member_waits() {
    let (old, other, new) = (
        Keyfile::of_key(OLD),
        Keyfile::of_key(OTHER),
        Keyfile::of_key(NEW),
    );
    let b_other = run(&old, &old, Some(&other));
    assert_eq!(
        plan_keyfile(&new, std::slice::from_ref(&old), Some(&b_other)),
        old
    );
    let progress = keyfile_progress(&new, &old, &b_other, "10.0.0.1");
    assert_eq!(progress.reason, KeyfileReason::WaitingForMembers);
    assert!(
        progress
            .message
            .contains("10.0.0.1:30001, 10.0.0.1:30002 and 10.0.0.2:30001"),
        "{}",
        progress.message
    );
}

#[test]
fn a_restart_is_allowed_only_onto_keys_every_other_member_shares() {
    let (old, both, new) = (Keyfile::of_key(OLD), two(OLD, NEW), Keyfile::of_key(NEW));
    let a0 = member("10.0.0.1", 30001);
    let everyone_old = run(&old, &old, Some(&old));
    assert_eq!(
        restart_keeps_a_shared_key(&a0, &both.fingerprints(), &everyone_old),
        Ok(())
    );
    assert_eq!(
        restart_keeps_a_shared_key(&a0, &new.fingerprints(), &everyone_old),
        Err(member("10.0.0.1", 30002))
    );
    // Its own keys do not count; a member not reported blocks.
    let b_unknown = run(&old, &both, None);
    assert_eq!(
        restart_keeps_a_shared_key(&a0, &new.fingerprints(), &b_unknown),
        Err(member("10.0.0.2", 30001))
    );
}

#[test]
fn the_condition_follows_the_two_phases_and_names_who_is_behind() {
    let (old, both, new) = (Keyfile::of_key(OLD), two(OLD, NEW), Keyfile::of_key(NEW));
    let at =
        |planned: &Keyfile, run: &KeysRun, vip: &str| keyfile_progress(&new, planned, run, vip);

    let progress = at(&both, &run(&old, &old, Some(&old)), "10.0.0.1");
    assert_eq!(
        (progress.in_place, progress.reason),
        (false, KeyfileReason::AddingNewKey)
    );
    assert!(
        progress
            .message
            .contains("10.0.0.1:30001 and 10.0.0.1:30002"),
        "{}",
        progress.message
    );

    let progress = at(&both, &run(&both, &both, Some(&old)), "10.0.0.1");
    assert_eq!(progress.reason, KeyfileReason::NewKeyMissingElsewhere);
    assert!(
        progress
            .message
            .contains("10.0.0.2:30001 run a keyfile without"),
        "{}",
        progress.message
    );

    // Cluster b, whose Secret still holds the old key, sees a's extra key.
    let old_desired = keyfile_progress(&old, &old, &run(&both, &both, Some(&old)), "10.0.0.2");
    assert_eq!(old_desired.reason, KeyfileReason::OtherKeysRun);

    let progress = at(&new, &run(&new, &both, Some(&both)), "10.0.0.1");
    assert_eq!(progress.reason, KeyfileReason::OtherKeysRun);
    assert!(
        progress
            .message
            .starts_with("10.0.0.1:30002 and 10.0.0.2:30001"),
        "{}",
        progress.message
    );

    let progress = at(&new, &run(&new, &new, Some(&new)), "10.0.0.1");
    assert_eq!(
        (progress.in_place, progress.reason),
        (true, KeyfileReason::KeyfileInPlace)
    );
    assert!(!progress.message.contains(NEW), "{}", progress.message);

    let unknown = keyfile_progress(&new, &new, &KeysRun::new(), "10.0.0.1");
    assert_eq!(
        (unknown.in_place, unknown.reason),
        (false, KeyfileReason::KeysRunUnknown)
    );
}
