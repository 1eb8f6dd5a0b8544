use std::net::{Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;

use super::*;
use crate::hostconf::fedstate::plain_member;
use crate::hostconf::structured::RawMember;

fn host() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<[u8; 4]>().prop_map(|o| Ipv4Addr::from(o).to_string()),
        "[a-z][a-z0-9-]{0,12}(\\.[a-z][a-z0-9_]{0,6}){0,3}",
        any::<[u16; 8]>().prop_map(|s| Ipv6Addr::from(s).to_string()),
    ]
}

/// Distinct addresses over a few distinct VIPs, in random order.
fn address_set() -> impl Strategy<Value = Vec<MemberAddress>> {
    prop::collection::btree_set(host(), 1..4)
        .prop_flat_map(|vips| {
            let vips: Vec<String> = vips.into_iter().collect();
            prop::collection::btree_set((0..vips.len(), 1..=u16::MAX), 1..20).prop_map(move |set| {
                set.into_iter()
                    .map(|(v, port)| MemberAddress {
                        host: vips[v].clone(),
                        port,
                    })
                    .collect::<Vec<_>>()
            })
        })
        .prop_shuffle()
}

/// Addresses plus which of them (if any, and only with 2 members or more)
/// is the arbiter.
fn addresses_and_arbiter() -> impl Strategy<Value = (Vec<MemberAddress>, Option<usize>)> {
    address_set().prop_flat_map(|addrs| {
        let n = addrs.len();
        let arbiter = if n > 1 {
            prop::option::of(0..n).boxed()
        } else {
            Just(None).boxed()
        };
        (Just(addrs), arbiter)
    })
}

/// A valid FedState list: plain members, one of them maybe the arbiter.
fn fedstate_conf() -> impl Strategy<Value = HostConf> {
    addresses_and_arbiter().prop_map(|(addrs, arbiter)| HostConf {
        members: addrs
            .into_iter()
            .enumerate()
            .map(|(i, a)| plain_member(a, arbiter == Some(i)))
            .collect(),
    })
}

type Attributes = (bool, Option<u8>, Option<f64>, BTreeMap<String, String>);

fn attributes() -> impl Strategy<Value = Attributes> {
    (
        any::<bool>(),
        prop::option::of(0u8..=1),
        prop::option::of(prop_oneof![Just(0.0), 0.0..=1000.0f64]),
        prop::collection::btree_map("[a-z]{1,5}", "[ -~]{0,8}", 0..3),
    )
}

/// A valid structured list: random attributes, then bent to satisfy every
/// rule (one member surely electable, at most 7 voters, zero priorities
/// where required, arbiter without tags nor `votes: 0`).
fn structured_conf() -> impl Strategy<Value = HostConf> {
    addresses_and_arbiter()
        .prop_flat_map(|(addrs, arbiter)| {
            let n = addrs.len();
            (
                Just(addrs),
                Just(arbiter),
                prop::collection::vec(attributes(), n),
            )
        })
        .prop_map(|(addrs, arbiter_at, attrs)| {
            let electable_at = if arbiter_at == Some(0) { 1 } else { 0 };
            let mut voters = usize::from(arbiter_at.is_some());
            let members = addrs
                .into_iter()
                .zip(attrs)
                .enumerate()
                .map(
                    |(i, (address, (mut hidden, mut votes, mut priority, mut tags)))| {
                        let arbiter = arbiter_at == Some(i);
                        if arbiter {
                            hidden = false;
                            tags.clear();
                            votes = votes.filter(|v| *v == 1);
                        } else if i == electable_at {
                            (hidden, votes, priority) = (false, None, None);
                        } else if votes == Some(1) {
                            if voters == MAX_VOTERS {
                                votes = Some(0);
                            } else {
                                voters += 1;
                            }
                        }
                        if arbiter || hidden || votes == Some(0) {
                            priority = priority.map(|_| 0.0);
                        }
                        HostConfMember {
                            address,
                            arbiter,
                            votes,
                            priority,
                            hidden,
                            tags,
                        }
                    },
                )
                .collect();
            HostConf { members }
        })
}

fn sorted(conf: &HostConf) -> Vec<HostConfMember> {
    let mut m = conf.members.clone();
    m.sort_by(|a, b| a.address.cmp(&b.address));
    m
}

fn to_members_yaml(conf: &HostConf) -> String {
    let raw: Vec<RawMember> = conf
        .members
        .iter()
        .map(|m| RawMember {
            host: m.address.to_string(),
            arbiter: m.arbiter,
            votes: m.votes.map(i64::from),
            priority: m.priority,
            hidden: m.hidden,
            tags: m.tags.clone(),
        })
        .collect();
    serde_yaml::to_string(&raw).unwrap()
}

/// Turns a valid `host:'…'` line into an invalid one.
fn corrupt(line: &str, how: usize) -> String {
    let inner = &line["host:'".len()..line.len() - 1];
    match how {
        0 => line[..line.len() - 1].to_string(),
        1 => format!("host:\"{inner}\""),
        2 => format!("{line} trailing"),
        3 => format!("host:'{inner}0000000'"),
        4 => format!("host:'{inner}x'"),
        5 => format!("host:':{}'", inner.rsplit_once(':').unwrap().1),
        6 => format!("host:'{} {inner}'", "z"),
        7 => inner.to_string(),
        _ => format!("host:'{}'", inner.rsplit_once(':').unwrap().0),
    }
}

proptest! {
    #[test]
    fn fedstate_list_round_trips(conf in fedstate_conf()) {
        let rendered = conf.to_fedstate_data();
        let back = HostConf::from_config_map_data(&rendered).unwrap();
        prop_assert_eq!(sorted(&back), sorted(&conf));
    }

    #[test]
    fn structured_list_round_trips_through_yaml(conf in structured_conf()) {
        let yaml = to_members_yaml(&conf);
        let d = BTreeMap::from([(MEMBERS_YAML.to_string(), yaml.clone())]);
        let back = HostConf::from_config_map_data(&d);
        prop_assert!(back.is_ok(), "{:?}\n{}", back, yaml);
        prop_assert_eq!(sorted(&back.unwrap()), sorted(&conf));
    }

    #[test]
    fn structured_list_round_trips_through_fedstate_addresses(conf in structured_conf()) {
        let back = HostConf::from_config_map_data(&conf.to_fedstate_data()).unwrap();
        let key = |c: &HostConf| {
            let mut v: Vec<_> = c.members.iter().map(|m| (m.address.clone(), m.arbiter)).collect();
            v.sort();
            v
        };
        prop_assert_eq!(key(&back), key(&conf));
    }

    #[test]
    fn arbitrary_text_never_panics(text in ".{0,300}", bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let lossy = String::from_utf8_lossy(&bytes).into_owned();
        for value in [&text, &lossy] {
            for key in [DATAS, ARBITERS, MEMBERS_YAML] {
                let _ = HostConf::from_config_map_data(&BTreeMap::from([(key.to_string(), value.clone())]));
            }
            let _ = HostConf::from_config_map_data(&BTreeMap::from([
                (DATAS.to_string(), "host:'10.0.0.1:1'".to_string()),
                (ARBITERS.to_string(), value.clone()),
            ]));
            let _ = MemberAddress::parse(value);
        }
    }

    #[test]
    fn host_shaped_noise_never_panics(lines in prop::collection::vec("host:'[\\[\\]:0-9a-f. '\"x-]{0,20}'?.{0,3}", 0..8)) {
        let _ = HostConf::from_config_map_data(&BTreeMap::from([(DATAS.to_string(), lines.join("\n"))]));
    }

    #[test]
    fn one_corrupted_line_is_named(conf in fedstate_conf(), pick in any::<prop::sample::Index>(), how in 0usize..9, blank_lines in 0usize..3) {
        let datas = conf.to_fedstate_data()[DATAS].clone();
        let mut lines: Vec<String> = datas.lines().map(str::to_string).collect();
        let i = pick.index(lines.len());
        lines[i] = corrupt(&lines[i], how);
        let mut text = "\n".repeat(blank_lines);
        text.push_str(&lines.join("\n"));
        let e = HostConf::from_config_map_data(&BTreeMap::from([(DATAS.to_string(), text)]));
        let want = format!("hostconf key \"datas\", line {}: ", blank_lines + i + 1);
        match e {
            Err(e) => prop_assert!(e.to_string().starts_with(&want), "{} does not start with {}", e, want),
            Ok(c) => prop_assert!(false, "corruption {} of line {} accepted: {:?}", how, i, c),
        }
    }
}
