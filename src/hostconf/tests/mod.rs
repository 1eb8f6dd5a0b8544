mod address;
mod fedstate;
mod properties;
mod structured;

use super::*;

fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn parse(pairs: &[(&str, &str)]) -> Result<HostConf, HostConfError> {
    HostConf::from_config_map_data(&data(pairs))
}

fn error(pairs: &[(&str, &str)]) -> String {
    match parse(pairs) {
        Ok(conf) => panic!("expected an error, parsed {conf:?}"),
        Err(e) => e.to_string(),
    }
}

fn addr(s: &str) -> MemberAddress {
    MemberAddress::parse(s).unwrap()
}

fn addresses(conf: &HostConf) -> Vec<String> {
    conf.members.iter().map(|m| m.address.to_string()).collect()
}

/// A structured list using every field, in block style with a comment.
const STRUCTURED: &str = "\
# members of rs0
- host: 10.29.5.107:38018
  priority: 2
  tags: {site: east}
- host: \"10.29.5.108:38018\"
  votes: 0
  priority: 0
  hidden: true
- host: 10.29.5.107:38825
  arbiter: true
";

// ---- choice of format ----

#[test]
fn both_formats_or_neither_are_refused() {
    let e = error(&[
        ("datas", "host:'10.0.0.1:1'"),
        ("members.yaml", "- host: 10.0.0.1:1"),
    ]);
    assert_eq!(
        e,
        r#"hostconf mixes two formats: key "members.yaml" cannot be used together with key "datas""#
    );
    let e = error(&[("arbiters", ""), ("members.yaml", "- host: 10.0.0.1:1")]);
    assert!(e.contains(r#"together with key "arbiters""#), "{e}");
    let e = error(&[("data", "host:'10.0.0.1:1'")]);
    assert!(
        e.starts_with("hostconf lists no members: expected key \"datas\""),
        "{e}"
    );
    assert!(e.ends_with(r#"found keys "data""#), "{e}");
    assert!(error(&[]).ends_with("found keys (none)"));
}
