//! Proves that both charts ship the generated MongoDB CRD unchanged: each
//! `charts/*/crds/mongodb.yaml` is byte-identical to `crds/mongodb.yaml`, the file
//! `crdgen` writes from `src/api.rs`. A CRD change that is not copied into the
//! charts fails here.

use std::path::{Path, PathBuf};

fn repository_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn assert_same_bytes(copy: &str) {
    let root = repository_root();
    let generated = std::fs::read(root.join("crds/mongodb.yaml")).expect("read crds/mongodb.yaml");
    let copied = std::fs::read(root.join(copy)).unwrap_or_else(|err| panic!("read {copy}: {err}"));
    assert!(
        generated == copied,
        "{copy} differs from crds/mongodb.yaml; refresh it with: cp crds/mongodb.yaml {copy}"
    );
}

#[test]
fn member_chart_crd_is_byte_identical_to_the_generated_crd() {
    assert_same_bytes("charts/mongodb-member-operator/crds/mongodb.yaml");
}

#[test]
fn karmada_chart_crd_is_byte_identical_to_the_generated_crd() {
    assert_same_bytes("charts/mongodb-member-operator-karmada/crds/mongodb.yaml");
}
