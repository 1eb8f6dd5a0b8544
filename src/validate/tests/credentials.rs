use super::*;

#[test]
fn credentials_are_checked_without_echoing_them() {
    let keyfile = "a".repeat(756);
    let key = |k| (k, Some(keyfile.as_bytes()));
    let ok = credentials(
        "s",
        key("keyfile"),
        ("username", Some(b"root")),
        ("password", Some(b"pw-123456")),
    );
    assert_eq!(ok.map(|c| c.username).unwrap(), "root");
    let short = credentials(
        "s",
        ("keyfile", Some(b"abc")),
        ("username", Some(b"root")),
        ("password", Some(b"pw-123456")),
    )
    .unwrap_err();
    assert_eq!(short.reason(), "KeyfileInvalid");
    let bad_chars = credentials(
        "s",
        ("keyfile", Some(b"abc$%^&*()")),
        ("username", Some(b"root")),
        ("password", Some(b"pw-123456")),
    )
    .unwrap_err();
    assert_eq!(bad_chars.reason(), "KeyfileInvalid");
    assert!(!bad_chars.to_string().contains("abc$"));
    let missing = credentials(
        "s",
        key("keyfile"),
        ("username", Some(b"root")),
        ("password", None),
    )
    .unwrap_err();
    assert_eq!(missing.reason(), "CredentialsInvalid");
    assert!(missing.to_string().contains("has no key \"password\""));
    let empty = credentials(
        "s",
        key("keyfile"),
        ("username", Some(b" ")),
        ("password", Some(b"pw-123456")),
    )
    .unwrap_err();
    assert!(empty.to_string().contains("\"username\" is empty"));
    let binary = credentials(
        "s",
        key("keyfile"),
        ("username", Some(&[0xff, 0xfe])),
        ("password", Some(b"pw")),
    )
    .unwrap_err();
    assert!(binary
        .to_string()
        .contains("\"username\" is not UTF-8 text"));
}

#[test]
fn root_credentials_never_show_in_debug_output() {
    let credentials = RootCredentials {
        username: "root".into(),
        password: "s3cr3t-value".into(),
    };
    assert!(!format!("{credentials:?}").contains("s3cr3t-value"));
}

#[test]
fn a_keyfile_of_the_right_length_with_other_characters_is_named_for_its_characters() {
    let root = ("username", Some(&b"root"[..]));
    let password = ("password", Some(&b"pw-123456"[..]));
    let error = credentials("s", ("keyfile", Some(b"abc$%^&*()")), root, password).unwrap_err();
    assert_eq!(error.reason(), "KeyfileInvalid");
    let message = error.to_string();
    assert!(
        message.contains("character 4 is not a base64 character"),
        "says which character is wrong, not the length: {message}"
    );
    assert!(!message.contains("found 10 characters"), "{message}");
    assert!(
        !message.contains('$'),
        "never echoes the keyfile: {message}"
    );
    let short = credentials("s", ("keyfile", Some(b"abc")), root, password).unwrap_err();
    assert!(
        short
            .to_string()
            .contains("6 to 1024 base64 characters (found 3)"),
        "{short}"
    );
}

#[test]
fn a_missing_credentials_key_names_what_it_should_hold() {
    let keyfile = "a".repeat(756);
    let missing = credentials(
        "demo-keys",
        ("keyfile", Some(keyfile.as_bytes())),
        ("username", Some(b"root")),
        ("pass", None),
    )
    .unwrap_err();
    assert_eq!(
        missing.to_string(),
        "Secret demo-keys has no key \"pass\": add the root user's password under it, \
         or set spec.credentialsSecretRef.passwordKey to the key that holds it"
    );
    let no_keyfile = credentials(
        "demo-keys",
        ("kf", None),
        ("username", Some(b"root")),
        ("pass", Some(b"pw")),
    )
    .unwrap_err();
    assert!(
        no_keyfile.to_string().contains(
            "add the replica set's keyfile under it, or set spec.credentialsSecretRef.keyfileKey"
        ),
        "{no_keyfile}"
    );
    let binary = credentials(
        "demo-keys",
        ("keyfile", Some(keyfile.as_bytes())),
        ("username", Some(b"root")),
        ("password", Some(&[0xff, 0xfe])),
    )
    .unwrap_err();
    assert_eq!(
        binary.to_string(),
        "Secret demo-keys key \"password\" is not UTF-8 text: the root user's password \
         must be text"
    );
}
