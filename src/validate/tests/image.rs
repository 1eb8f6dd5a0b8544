use super::*;

#[test]
fn images_older_than_4_4_2_are_refused_with_what_to_set() {
    for (image, version) in [
        ("mongo:4.4.0", "4.4.0"),
        ("mongo:4.4.1-focal", "4.4.1-focal"),
        ("mongo:3.6", "3.6"),
        ("fedstate.io/atsctoo/mongo:3.6", "3.6"),
        ("mongo:4.2.24", "4.2.24"),
        ("registry:5000/mongo:4.0", "4.0"),
        ("mongo:v3", "v3"),
        ("mongo:4.0-bionic", "4.0-bionic"),
    ] {
        let error = supported_image(image).unwrap_err();
        assert_eq!(error.reason(), "UnsupportedMongoDBVersion", "{image}");
        let message = error.to_string();
        assert!(
            message.contains(&format!("spec.image {image} is MongoDB {version}")),
            "{message}"
        );
        assert!(message.contains("4.4.2 or later"), "{message}");
        assert!(
            message.contains("spec.imageSetting.image"),
            "says where to set it with FedState: {message}"
        );
    }
    for image in [
        "mongo:4.4",
        "mongo:4.4.2",
        "mongo:4.4.29-focal",
        "mongo:5.0.0",
        "mongo:7.0.14",
        "registry:5000/mongo:8.0",
        "mongo",
        "mongo:latest",
        "mongo:30",
        "mongo@sha256:0123abcd",
    ] {
        supported_image(image).unwrap_or_else(|e| panic!("{image}: {e}"));
    }
}

#[test]
fn the_image_moves_one_release_past_the_feature_compatibility_version_at_most() {
    assert!(version_change_allowed("mongo:8.0", Some("7.0")).is_ok());
    assert!(version_change_allowed("mongo:7.0.14", Some("7.0")).is_ok());
    assert!(
        version_change_allowed("mongo:8.0", None).is_ok(),
        "no FCV known yet"
    );
    assert!(version_change_allowed("mongo:latest", Some("6.0")).is_ok());
    let skip = version_change_allowed("mongo:8.0", Some("6.0")).unwrap_err();
    assert_eq!(skip.reason(), "VersionChangeRefused");
    assert!(skip.to_string().contains("skips a release"), "{skip}");
    assert!(skip.to_string().contains("6.0 or 7.0"), "{skip}");
    let downgrade = version_change_allowed("registry:5000/mongo:6.0", Some("7.0")).unwrap_err();
    assert!(
        downgrade.to_string().contains("downgrade below"),
        "{downgrade}"
    );
    assert!(downgrade.to_string().contains("7.0 or 8.0"), "{downgrade}");
}
