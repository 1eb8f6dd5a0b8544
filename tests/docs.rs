//! The operator documentation must keep up with the code:
//!
//! - every reason the operator can put in a condition, an Event or a failure
//!   metric, and every condition type, is named in `docs/runbook.md` as
//!   `` `Name` `` (in backticks);
//! - every field of `spec` and `status` in `crds/mongodb.yaml`, and every printer
//!   column, is named in `docs/api-reference.md` as `` `spec.a.b` ``
//!   (list items as `` `spec.a[].b` ``, column names as `` `Name` ``).
//!
//! Public reason enums are read through strum's `VariantNames`. Three enums are
//! private to their modules and cannot be reached from here — the controller's
//! `Notice` (`src/controller/events.rs`), `RecoveryNotice`
//! (`src/controller/recovery.rs`), `ForgetNotice` (`src/controller/forget.rs`)
//! and status's `StatusReason` (`src/status.rs`) —
//! so their variants are read from the source text instead ([`variants_in_source`]).

use std::collections::BTreeSet;
use std::path::Path;

use mongodb_member_operator::build::BuildError;
use mongodb_member_operator::controller::FailedStage;
use mongodb_member_operator::forget::ForgetRefusal;
use mongodb_member_operator::keyfile::KeyfileReason;
use mongodb_member_operator::planner::{Change, Refusal, Step, WaitReason};
use mongodb_member_operator::recovery::RecoveryRefusal;
use mongodb_member_operator::roll::{RestartCaveat, RollStep, RollWait};
use mongodb_member_operator::service_hold::{HoldReason, ReleaseReason};
use mongodb_member_operator::status::{ConditionType, TlsReason};
use mongodb_member_operator::validate::InvalidInput;
use mongodb_member_operator::volume_growth::VolumesReason;
use strum::VariantNames;

fn read(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// The names of `names` that `doc` does not show in backticks.
fn missing<'a>(doc: &str, names: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    names
        .into_iter()
        .filter(|name| !doc.contains(&format!("`{name}`")))
        .map(str::to_string)
        .collect()
}

/// The variant names of `enum <name>` as written in `source`: the first
/// identifier of each line at the enum's top level (outside any bracket)
/// that starts with a capital letter; attributes, doc comments and fields are
/// skipped.
fn variants_in_source(source: &str, name: &str) -> Vec<String> {
    let start = source
        .find(&format!("enum {name} {{"))
        .unwrap_or_else(|| panic!("enum {name} not found"));
    let mut depth = 0usize;
    let mut variants = Vec::new();
    for line in source[start..].lines() {
        let trimmed = line.trim();
        if depth == 1 && trimmed.starts_with(|c: char| c.is_ascii_uppercase()) {
            let ident: String = trimmed
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            variants.push(ident);
        }
        depth += line.matches(['{', '(', '[']).count();
        depth -= line.matches(['}', ')', ']']).count();
        if depth == 0 {
            break;
        }
    }
    assert!(!variants.is_empty(), "no variants read for enum {name}");
    variants
}

/// Every reason the operator can produce, by where it comes from.
fn reasons() -> Vec<(&'static str, Vec<String>)> {
    let owned = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
    // Step's own reasons: a reconfig, a wait and a refusal are reported by
    // their Change, WaitReason or Refusal instead (`Step::reason`).
    let steps: Vec<String> = Step::VARIANTS
        .iter()
        .filter(|v| !matches!(**v, "Reconfig" | "Wait" | "Refuse"))
        .map(|v| v.to_string())
        .collect();
    // InvalidInput::Spec is reported by its BuildError's name.
    let invalid: Vec<String> = InvalidInput::VARIANTS
        .iter()
        .filter(|v| **v != "Spec")
        .map(|v| v.to_string())
        .collect();
    // RollStep::Wait is reported by its RollWait (a renewal too, in
    // conditions; a failed renewal is a Warning Event `RenewingRestartLease`).
    let roll_steps: Vec<String> = RollStep::VARIANTS
        .iter()
        .filter(|v| **v != "Wait")
        .map(|v| v.to_string())
        .collect();
    vec![
        ("ConditionType", owned(ConditionType::VARIANTS)),
        ("Step", steps),
        ("Change", owned(Change::VARIANTS)),
        ("WaitReason", owned(WaitReason::VARIANTS)),
        ("Refusal", owned(Refusal::VARIANTS)),
        ("InvalidInput", invalid),
        ("BuildError", owned(BuildError::VARIANTS)),
        ("RollStep", roll_steps),
        ("RollWait", owned(RollWait::VARIANTS)),
        ("RestartCaveat", owned(RestartCaveat::VARIANTS)),
        ("RecoveryRefusal", owned(RecoveryRefusal::VARIANTS)),
        ("ForgetRefusal", owned(ForgetRefusal::VARIANTS)),
        ("FailedStage", owned(FailedStage::VARIANTS)),
        ("VolumesReason", owned(VolumesReason::VARIANTS)),
        ("KeyfileReason", owned(KeyfileReason::VARIANTS)),
        ("TlsReason", owned(TlsReason::VARIANTS)),
        ("HoldReason", owned(HoldReason::VARIANTS)),
        ("ReleaseReason", owned(ReleaseReason::VARIANTS)),
        (
            "Notice",
            variants_in_source(&read("src/controller/events.rs"), "Notice"),
        ),
        (
            "RecoveryNotice",
            variants_in_source(&read("src/controller/recovery.rs"), "RecoveryNotice"),
        ),
        (
            "ForgetNotice",
            variants_in_source(&read("src/controller/forget.rs"), "ForgetNotice"),
        ),
        (
            "StatusReason",
            variants_in_source(&read("src/status/conditions.rs"), "StatusReason"),
        ),
    ]
}

#[test]
fn the_runbook_names_every_condition_type_and_reason() {
    let runbook = read("docs/runbook.md");
    let gaps: Vec<String> = reasons()
        .into_iter()
        .flat_map(|(origin, names)| {
            missing(&runbook, names.iter().map(String::as_str))
                .into_iter()
                .map(move |name| format!("{origin}::{name}"))
        })
        .collect();
    assert!(
        gaps.is_empty(),
        "docs/runbook.md does not name (as `Name`): {}",
        gaps.join(", ")
    );
}

#[test]
fn roll_reasons_are_the_names_status_and_events_use() {
    // VariantNames follows strum's `serialize`, as IntoStaticStr does: the
    // runbook must name `TakingRestartLease`, not `Acquire`.
    assert!(RollStep::VARIANTS.contains(&"TakingRestartLease"));
    assert!(!RollStep::VARIANTS.contains(&"Acquire"));
}

#[test]
fn source_variants_are_read_as_written() {
    let source = "enum E {\n    /// doc\n    A,\n    #[x]\n    B { field: u8 },\n    C(\n        String,\n    ),\n}\nenum F { Z }";
    assert_eq!(variants_in_source(source, "E"), ["A", "B", "C"]);
}

/// Dotted paths of every property under `schema` (`[]` for list items). The
/// contents of Kubernetes' own types embedded in the spec are not listed.
fn field_paths(prefix: &str, schema: &serde_yaml::Value, out: &mut BTreeSet<String>) {
    const EMBEDDED: [&str; 5] = [
        "spec.podSpec.affinity",
        "spec.podSpec.securityContext",
        "spec.podSpec.tolerations",
        "spec.podSpec.topologySpreadConstraints",
        "status.conditions",
    ];
    out.insert(prefix.to_string());
    if EMBEDDED.contains(&prefix) {
        return;
    }
    if let Some(properties) = schema.get("properties").and_then(|p| p.as_mapping()) {
        for (name, child) in properties {
            let name = name.as_str().expect("property names are strings");
            field_paths(&format!("{prefix}.{name}"), child, out);
        }
    }
    if let Some(items) = schema.get("items") {
        if items.get("properties").is_some() {
            let items_prefix = format!("{prefix}[]");
            for (name, child) in items["properties"].as_mapping().into_iter().flatten() {
                let name = name.as_str().expect("property names are strings");
                field_paths(&format!("{items_prefix}.{name}"), child, out);
            }
        }
    }
}

#[test]
fn the_api_reference_names_every_crd_field_and_printer_column() {
    let crd: serde_yaml::Value =
        serde_yaml::from_str(&read("crds/mongodb.yaml")).expect("the CRD parses");
    let version = &crd["spec"]["versions"][0];
    let schema = &version["schema"]["openAPIV3Schema"]["properties"];
    let mut paths = BTreeSet::new();
    field_paths("spec", &schema["spec"], &mut paths);
    field_paths("status", &schema["status"], &mut paths);
    assert!(
        paths.len() > 80,
        "the walk found only {} fields",
        paths.len()
    );
    paths.remove("spec");
    paths.remove("status");

    let columns: Vec<String> = version["additionalPrinterColumns"]
        .as_sequence()
        .expect("printer columns")
        .iter()
        .map(|c| c["name"].as_str().expect("column name").to_string())
        .collect();

    let reference = read("docs/api-reference.md");
    let mut gaps = missing(&reference, paths.iter().map(String::as_str));
    gaps.extend(missing(&reference, columns.iter().map(String::as_str)));
    gaps.extend(missing(
        &reference,
        [mongodb_member_operator::api::RECOVERY_ANNOTATION],
    ));
    assert!(
        gaps.is_empty(),
        "docs/api-reference.md does not name: {}",
        gaps.join(", ")
    );
}
