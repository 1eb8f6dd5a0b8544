use super::*;

#[test]
fn structured_list_parses_every_field() {
    let conf = parse(&[("members.yaml", STRUCTURED)]).unwrap();
    let first = &conf.members[0];
    assert_eq!(first.address, addr("10.29.5.107:38018"));
    assert_eq!(
        (first.votes, first.priority, first.hidden, first.arbiter),
        (None, Some(2.0), false, false)
    );
    assert_eq!(
        first.tags,
        BTreeMap::from([("site".to_string(), "east".to_string())])
    );
    let second = &conf.members[1];
    assert_eq!(
        (second.votes, second.priority, second.hidden),
        (Some(0), Some(0.0), true)
    );
    assert_eq!(conf.arbiter().unwrap().address.port, 38825);
    assert_eq!(conf.data_members().count(), 2);
}

#[test]
fn structured_flow_style_is_accepted() {
    let conf = parse(&[(
        "members.yaml",
        "[{host: 10.0.0.1:1}, {host: 10.0.0.2:1, votes: 1, priority: 0.5}]",
    )])
    .unwrap();
    assert_eq!(conf.members[1].priority, Some(0.5));
    assert_eq!(conf.members[1].votes, Some(1));
}

fn yaml_error(yaml: &str) -> String {
    error(&[("members.yaml", yaml)])
}

#[test]
fn structured_rule_violations_name_the_entry_line() {
    let cases = [
        ("  votes: 2", "votes must be 0 or 1, found 2"),
        (
            "  priority: 1001",
            "priority must be between 0 and 1000, found 1001",
        ),
        (
            "  priority: -1",
            "priority must be between 0 and 1000, found -1",
        ),
        (
            "  priority: .nan",
            "priority must be between 0 and 1000, found NaN",
        ),
        (
            "  arbiter: true\n  priority: 1",
            "an arbiter must have priority 0, found 1",
        ),
        (
            "  arbiter: true\n  votes: 0",
            "an arbiter must vote, votes 0 is not allowed",
        ),
        (
            "  arbiter: true\n  tags: {a: b}",
            "an arbiter cannot have tags",
        ),
        (
            "  hidden: true\n  priority: 1",
            "a hidden member must have priority 0, found 1",
        ),
        (
            "  votes: 0\n  priority: 0.5",
            "a member with votes 0 must have priority 0, found 0.5",
        ),
    ];
    for (fields, want) in cases {
        let yaml = format!("- host: 10.0.0.1:1\n\n- host: 10.0.0.2:1\n{fields}\n");
        let e = yaml_error(&yaml);
        assert_eq!(
            e,
            format!(r#"hostconf key "members.yaml", line 3: {want}"#),
            "{fields}"
        );
    }
}

#[test]
fn structured_bad_host_and_duplicate_name_lines() {
    let e = yaml_error("- host: 10.0.0.1:1\n- host: 10.0.0.1:70000\n");
    assert_eq!(
        e,
        r#"hostconf key "members.yaml", line 2: port 70000 is outside 1-65535 (in "10.0.0.1:70000")"#
    );
    let e = yaml_error("---\n- host: 10.0.0.1:1\n  tags:\n    - x: y\n- host: 10.0.0.1:1\n");
    assert!(
        e.starts_with(r#"hostconf key "members.yaml", line 4: "#),
        "{e}"
    );
    let e = yaml_error("- host: 10.0.0.1:1\n  tags: {}\n- host: 10.0.0.1:1\n");
    assert_eq!(
        e,
        r#"hostconf key "members.yaml", line 3: duplicate member 10.0.0.1:1 (first on line 1)"#
    );
    let e = yaml_error("[{host: 10.0.0.1:1}, {host: 10.0.0.1:1}]");
    assert_eq!(
        e,
        r#"hostconf key "members.yaml", entry 2: duplicate member 10.0.0.1:1 (first on entry 1)"#
    );
    let e = yaml_error("- {host: 10.0.0.1:1, arbiter: true}\n- {host: 10.0.0.2:1}\n- {host: 10.0.0.3:1, arbiter: true}");
    assert_eq!(
        e,
        r#"hostconf key "members.yaml", line 3: a second arbiter, at most 1 is allowed (the first is on line 1)"#
    );
}

#[test]
fn structured_yaml_and_schema_errors_name_the_line() {
    let e = yaml_error("- host: 10.0.0.1:1\n  prority: 2\n");
    assert!(
        e.starts_with(r#"hostconf key "members.yaml", line 2: "#),
        "{e}"
    );
    assert!(e.contains("unknown field `prority`"), "{e}");
    let e = yaml_error("- host: 10.0.0.1:1\n- votes: 1\n");
    assert!(
        e.starts_with(r#"hostconf key "members.yaml", line 2: "#)
            && e.contains("missing field `host`"),
        "{e}"
    );
    let e = yaml_error("- host: 10.0.0.1:1\n  tags: {rack: [1]}\n");
    assert!(
        e.starts_with(r#"hostconf key "members.yaml", line 2: "#),
        "{e}"
    );
    let e = yaml_error("- host: [10.0.0.1:1\n");
    assert!(
        e.starts_with(r#"hostconf key "members.yaml", line "#),
        "{e}"
    );
    let e = yaml_error("host: 10.0.0.1:1\n");
    assert!(e.contains("expected a sequence"), "{e}");
    let e = yaml_error(&format!(
        "- host: 10.0.0.1:1\n  {}: 1\n",
        "x".repeat(100_000)
    ));
    assert!(
        e.starts_with(r#"hostconf key "members.yaml", line 2: "#),
        "{e}"
    );
    assert!(e.chars().count() < 300, "{} bytes", e.len());
}

#[test]
fn structured_deep_flow_nesting_is_refused_before_parsing() {
    let e = yaml_error(&format!(
        "- host: 10.0.0.1:1\n  tags: {{a: {}}}\n",
        "[".repeat(1_000_000)
    ));
    assert_eq!(
        e,
        r#"hostconf key "members.yaml": holds 1000001 '[' or '{' characters, at most 2000 are accepted"#
    );
}

#[test]
fn structured_whole_list_rules() {
    assert_eq!(
        yaml_error(""),
        r#"hostconf key "members.yaml" lists no data-bearing member"#
    );
    assert_eq!(
        yaml_error("[]"),
        r#"hostconf key "members.yaml" lists no data-bearing member"#
    );
    assert_eq!(
        yaml_error("- {host: 10.0.0.1:1, arbiter: true}"),
        r#"hostconf key "members.yaml" lists no data-bearing member"#
    );
    let voters: Vec<String> = (1..=8)
        .map(|p| format!("- {{host: 10.0.0.1:{p}, votes: 1}}"))
        .collect();
    assert_eq!(
        yaml_error(&voters.join("\n")),
        "hostconf gives a vote to 8 members, a replica set allows at most 7 voters"
    );
    let mut seven = voters[..7].to_vec();
    seven.push("- {host: 10.0.0.2:1, arbiter: true}".into());
    assert!(yaml_error(&seven.join("\n")).contains("8 members"));
    assert!(parse(&[("members.yaml", &voters[..7].join("\n"))]).is_ok());
    let e = yaml_error("- {host: 10.0.0.1:1, priority: 0}\n- {host: 10.0.0.2:1, hidden: true}\n- {host: 10.0.0.3:1, votes: 0}\n- {host: 10.0.0.4:1, arbiter: true}");
    assert!(
        e.starts_with("hostconf leaves no data-bearing member that may become primary"),
        "{e}"
    );
}
