//! The checked-in CRD under `crds/` must be exactly what the types generate.

use mongodb_member_operator::crd::{crd_yaml, CRD_PATH};

#[test]
fn checked_in_crd_matches_the_generated_one() {
    let generated = crd_yaml().expect("the CRD serializes");
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(CRD_PATH);
    let checked_in = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    assert!(
        generated == checked_in,
        "{} is out of date with src/api.rs: run `cargo run --bin crdgen > {}`",
        CRD_PATH,
        CRD_PATH
    );
}
