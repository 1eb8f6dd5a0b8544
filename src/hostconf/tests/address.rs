use super::*;

#[test]
fn address_accepts_ipv4_dns_and_bracketed_ipv6() {
    assert_eq!(
        addr("10.29.5.107:38018"),
        MemberAddress {
            host: "10.29.5.107".into(),
            port: 38018
        }
    );
    assert_eq!(
        addr("mongo-a.example_zone.local:1").host,
        "mongo-a.example_zone.local"
    );
    let v6 = addr("[fd00::1]:65535");
    assert_eq!((v6.host.as_str(), v6.port), ("fd00::1", 65535));
    assert_eq!(v6.to_string(), "[fd00::1]:65535");
    assert_eq!(addr("10.0.0.1:30001").to_string(), "10.0.0.1:30001");
}

#[test]
fn address_rejects_malformed_input_with_a_reason() {
    let cases = [
        ("", "expected <host>:<port>"),
        ("10.0.0.1", "expected <host>:<port>"),
        (":30001", "empty host"),
        ("10.0.0.1:", "port \"\" is not a number"),
        ("10.0.0.1:3x", "port \"3x\" is not a number"),
        ("10.0.0.1:+1", "port \"+1\" is not a number"),
        ("10.0.0.1:030001", "leading zero"),
        ("10.0.0.1:0", "port 0 is outside 1-65535"),
        ("10.0.0.1:70000", "port 70000 is outside 1-65535"),
        ("10.0.0.1: 30001", "is not a number"),
        ("10.0.0 .1:30001", "invalid character ' '"),
        ("a/b:1", "invalid character '/'"),
        ("fd00::1:27017", "must be written in brackets"),
        ("[fd00::1]27017", "expected <host>:<port>"),
        ("[10.0.0.1]:27017", "invalid IPv6"),
        ("[fd00::1:27017", "invalid IPv6"),
        ("10.0.0.256:1", "invalid IPv4"),
    ];
    for (input, want) in cases {
        let e = MemberAddress::parse(input).expect_err(input).to_string();
        assert!(e.contains(want), "{input:?}: {e:?} lacks {want:?}");
    }
    let long = format!("{}:1", "a".repeat(254));
    assert!(MemberAddress::parse(&long)
        .unwrap_err()
        .to_string()
        .contains("longer than 253"));
}

#[test]
fn address_error_quotes_at_most_80_characters() {
    let huge = format!("{}:1", "x".repeat(10_000));
    let e = MemberAddress::parse(&huge).unwrap_err().to_string();
    assert!(e.len() < 200, "{e}");
    assert!(e.contains("(10002 characters)"), "{e}");
}
