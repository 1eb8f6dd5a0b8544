//! Prints the `MongoDB` CustomResourceDefinition as YAML (`cargo run --bin crdgen > crds/mongodb.yaml`).
fn main() -> anyhow::Result<()> {
    print!("{}", mongodb_member_operator::crd::crd_yaml()?);
    Ok(())
}
