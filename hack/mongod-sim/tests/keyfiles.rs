//! Internal authentication with one or two keys, checked with the Rust
//! driver: a member restarted on a keyfile holding the set's key and a new
//! one stays healthy; one on a foreign key alone is reported by the primary
//! as mongod reports an authentication issue (`health: 0`, `state: 6`,
//! `authenticated: false`); the two keys in either order work, the second
//! one being tried when the first is refused.

mod common;

use bson::Document;
use common::*;
use mongod_sim::{MemberSpec, Volume};

/// Restarts member `index` of `set` on its volume with `keyfile`.
async fn restart_with(set: &Set, index: usize, keyfile: &str) {
    let host = &set.hosts[index];
    set.net.stop_member_and_wait(host).await;
    let spec = MemberSpec {
        keyfile: Some(keyfile.into()),
        ..set.specs[index].clone()
    };
    let volume: Volume = set.volumes[index].clone();
    set.net
        .start_member(spec, volume)
        .await
        .expect("restart member");
}

async fn wait_healthy(set: &Set, primary: &str, host: &str, healthy: bool) -> Document {
    wait_until("the primary's view of the member", || async {
        set.status_entry(primary, "", host)
            .await
            .is_some_and(|e| (e.get_f64("health") == Ok(1.0)) == healthy)
    })
    .await;
    set.status_entry(primary, "", host).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_on_both_keys_stays_in_and_one_on_a_foreign_key_is_an_auth_issue() {
    let set = Set::start(71, 3, |s| s.keyfile = Some("oldkey1\n".into())).await;
    let primary = set.initiate().await;
    let index = set.hosts.iter().position(|h| *h != primary).unwrap();
    let host = set.hosts[index].clone();
    wait_healthy(&set, &primary, &host, true).await;

    // Old and new keys: it authenticates with the old one, accepts both.
    restart_with(&set, index, "- oldkey1\n- newkey2\n").await;
    let both = wait_healthy(&set, &primary, &host, true).await;
    assert!(both.get("authenticated").is_none(), "{both}");

    // The new key alone, peers on the old one: refused both ways.
    restart_with(&set, index, "newkey2").await;
    let refused = wait_healthy(&set, &primary, &host, false).await;
    assert_eq!(refused.get_i32("state"), Ok(6), "{refused}");
    assert_eq!(refused.get_str("stateStr"), Ok("(not reachable/healthy)"));
    assert_eq!(refused.get_bool("authenticated"), Ok(false), "{refused}");
    assert_eq!(refused.get_str("lastHeartbeatMessage"), Ok(""));

    // New key first, old second: its first key is refused, the second taken.
    restart_with(&set, index, "- newkey2\n- oldkey1\n").await;
    wait_healthy(&set, &primary, &host, true).await;

    // A stopped member is DOWN, not an auth issue.
    set.net.stop_member_and_wait(&host).await;
    let down = wait_healthy(&set, &primary, &host, false).await;
    assert_eq!(down.get_i32("state"), Ok(8), "{down}");
    assert!(down.get("authenticated").is_none(), "{down}");
}
