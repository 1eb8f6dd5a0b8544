use super::*;

// ---- FedState format: accepted forms ----

#[test]
fn fedstate_sample_parses_into_data_members_and_arbiter() {
    let conf = parse(&[
        (
            "datas",
            "host:'10.29.5.107:38018'\nhost:'10.29.5.108:38018'\n",
        ),
        ("arbiters", "host:'10.29.5.107:38825'\n"),
    ])
    .unwrap();
    let data: Vec<_> = conf.data_members().map(|m| m.address.to_string()).collect();
    assert_eq!(data, ["10.29.5.107:38018", "10.29.5.108:38018"]);
    let arbiter = conf.arbiter().unwrap();
    assert_eq!(arbiter.address, addr("10.29.5.107:38825"));
    assert!(arbiter.arbiter && arbiter.votes.is_none() && arbiter.priority.is_none());
    let local: Vec<_> = conf
        .local_to("10.29.5.107")
        .map(|m| m.address.port)
        .collect();
    assert_eq!(local, [38018, 38825]);
    assert_eq!(conf.local_to("10.29.5.1").count(), 0);
}

#[test]
fn fedstate_tolerates_blank_lines_surrounding_whitespace_and_crlf() {
    let conf = parse(&[(
        "datas",
        "\n  host:'10.0.0.1:30001'  \r\n\t\n\thost:'10.0.0.2:30001'\r\n\n",
    )])
    .unwrap();
    assert_eq!(addresses(&conf), ["10.0.0.1:30001", "10.0.0.2:30001"]);
    assert!(conf.arbiter().is_none());
}

#[test]
fn fedstate_accepts_missing_or_empty_arbiters_and_ignores_other_keys() {
    for arbiters in [None, Some(""), Some("\n \n")] {
        let mut d = data(&[("datas", "host:'10.0.0.1:30001'"), ("note", "x")]);
        if let Some(a) = arbiters {
            d.insert("arbiters".into(), a.into());
        }
        let conf = HostConf::from_config_map_data(&d).unwrap();
        assert_eq!(conf.members.len(), 1);
        assert!(conf.arbiter().is_none());
    }
}

#[test]
fn local_to_accepts_ipv6_vip_with_or_without_brackets() {
    let conf = parse(&[("datas", "host:'[fd00::1]:30001'\nhost:'10.0.0.1:30001'")]).unwrap();
    assert_eq!(conf.local_to("fd00::1").count(), 1);
    assert_eq!(conf.local_to("[fd00::1]").count(), 1);
}

// ---- FedState format: errors ----

fn datas_error(datas: &str) -> String {
    error(&[("datas", datas)])
}

#[test]
fn fedstate_line_not_in_host_form_names_key_line_and_text() {
    let e = datas_error("host:'10.0.0.1:30001'\n\nhost:10.0.0.2:30001\n");
    assert_eq!(
        e,
        r#"hostconf key "datas", line 3: expected host:'<host>:<port>', found "host:10.0.0.2:30001""#
    );
    for line in [
        "10.0.0.1:30001",
        "Host:'10.0.0.1:30001'",
        "host: '10.0.0.1:30001'",
        "# host:'10.0.0.1:30001'",
        "- host:'10.0.0.1:30001'",
    ] {
        let e = datas_error(line);
        assert!(
            e.starts_with(r#"hostconf key "datas", line 1: expected host:'<host>:<port>', found"#),
            "{e}"
        );
    }
}

#[test]
fn fedstate_non_numeric_port_names_line() {
    let e = datas_error("host:'10.0.0.1:30001'\nhost:'10.0.0.2:30001'\nhost:'10.0.0.1:3x'");
    assert_eq!(
        e,
        r#"hostconf key "datas", line 3: port "3x" is not a number (in "10.0.0.1:3x")"#
    );
}

#[test]
fn fedstate_port_out_of_range_names_line() {
    let e = datas_error("host:'10.0.0.1:70000'");
    assert_eq!(
        e,
        r#"hostconf key "datas", line 1: port 70000 is outside 1-65535 (in "10.0.0.1:70000")"#
    );
}

#[test]
fn fedstate_duplicate_names_both_lines() {
    let e = datas_error("host:'10.0.0.1:30001'\nhost:'10.0.0.2:30001'\nhost:'10.0.0.1:30001'");
    assert_eq!(
        e,
        r#"hostconf key "datas", line 3: duplicate member 10.0.0.1:30001 (first on line 1)"#
    );
}

#[test]
fn fedstate_member_in_both_datas_and_arbiters_is_a_duplicate() {
    let e = error(&[
        ("datas", "host:'10.0.0.2:30001'\nhost:'10.0.0.1:30001'"),
        ("arbiters", "host:'10.0.0.1:30001'"),
    ]);
    assert_eq!(
        e,
        r#"hostconf key "arbiters", line 1: duplicate member 10.0.0.1:30001 (first in key "datas", line 2)"#
    );
}

#[test]
fn fedstate_two_arbiters_are_refused() {
    let e = error(&[
        ("datas", "host:'10.0.0.1:30001'"),
        (
            "arbiters",
            "host:'10.0.0.1:30002'\n\nhost:'10.0.0.2:30002'\n",
        ),
    ]);
    assert_eq!(
        e,
        r#"hostconf key "arbiters" holds 2 members (lines 1, 3), at most 1 is allowed"#
    );
}

#[test]
fn fedstate_quote_and_garbage_errors_name_the_line() {
    let cases = [
        ("host:\"10.0.0.1:30001\"", "double quotes are not accepted"),
        ("host:'10.0.0.1:30001", "missing the closing '"),
        (
            "host:'10.0.0.1:30001' # a",
            "unexpected text after the closing quote: \" # a\"",
        ),
        (
            "host:'10.0.0.1:30001'x",
            "unexpected text after the closing quote: \"x\"",
        ),
        (
            "host:'10.0.0.1:30001''",
            "unexpected text after the closing quote",
        ),
        ("host:':30001'", "empty host"),
        ("host:''", "expected <host>:<port>, found \"\""),
        ("host:'10.0.0.1 :30001'", "invalid character ' '"),
        ("host:' 10.0.0.1:30001'", "invalid character ' '"),
        ("host:'10.0.0.1:30001 '", "is not a number"),
    ];
    for (line, want) in cases {
        let e = datas_error(&format!("host:'10.0.0.9:1'\n{line}"));
        assert!(
            e.starts_with(r#"hostconf key "datas", line 2: "#),
            "{line}: {e}"
        );
        assert!(e.contains(want), "{line}: {e} lacks {want}");
    }
    let e = error(&[
        ("datas", "host:'10.0.0.1:1'"),
        ("arbiters", "host:'10.0.0.1:1 '"),
    ]);
    assert!(e.starts_with(r#"hostconf key "arbiters", line 1: "#), "{e}");
}

#[test]
fn fedstate_huge_line_is_quoted_truncated() {
    let line = format!("host:'{}", "9".repeat(100_000));
    let e = datas_error(&line);
    assert!(
        e.starts_with(r#"hostconf key "datas", line 1: missing the closing ' in "host:'999"#),
        "{e}"
    );
    assert!(e.len() < 200, "{} bytes", e.len());
}

#[test]
fn fedstate_without_data_members_is_refused() {
    assert_eq!(
        datas_error("\n\n"),
        r#"hostconf key "datas" lists no data-bearing member"#
    );
    assert_eq!(
        error(&[("arbiters", "host:'10.0.0.1:1'")]),
        r#"hostconf key "datas" is missing (key "arbiters" alone lists no data-bearing member)"#
    );
}

#[test]
fn more_than_50_members_are_refused() {
    let datas: Vec<String> = (1..=51).map(|p| format!("host:'10.0.0.1:{p}'")).collect();
    assert_eq!(
        datas_error(&datas.join("\n")),
        "hostconf lists 51 members, a replica set holds at most 50"
    );
    assert!(parse(&[("datas", &datas[..50].join("\n"))]).is_ok());
}

// ---- rendering ----

#[test]
fn to_fedstate_data_writes_both_keys_without_trailing_newline() {
    let conf = parse(&[("members.yaml", STRUCTURED)]).unwrap();
    assert_eq!(
        conf.to_fedstate_data(),
        data(&[
            (
                "datas",
                "host:'10.29.5.107:38018'\nhost:'10.29.5.108:38018'"
            ),
            ("arbiters", "host:'10.29.5.107:38825'"),
        ])
    );
    let no_arbiter = parse(&[("datas", "host:'[fd00::1]:1'")]).unwrap();
    assert_eq!(
        no_arbiter.to_fedstate_data(),
        data(&[("datas", "host:'[fd00::1]:1'"), ("arbiters", "")])
    );
}
