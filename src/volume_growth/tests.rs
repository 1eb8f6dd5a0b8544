use super::*;

fn q(text: &str) -> Quantity {
    Quantity(text.into())
}

fn volume(index: u32, template: &str, requested: &str, capacity: &str) -> MemberVolume {
    let stateful_set = format!("demo-mongodb-{index}");
    MemberVolume {
        claim: Some(ClaimVolume {
            name: format!("data-{stateful_set}-0"),
            requested: Some(q(requested)),
            capacity: Some(q(capacity)),
            conditions: vec![],
        }),
        stateful_set,
        template: Some(q(template)),
        deleting: false,
    }
}

#[test]
fn volumes_at_the_spec_size_are_in_place() {
    let volumes = [
        volume(0, "8Gi", "8Gi", "8Gi"),
        volume(1, "8192Mi", "8Gi", "8Gi"),
    ];
    assert_eq!(plan_growth(&q("8Gi"), &volumes), GrowthStep::InPlace);
}

#[test]
fn a_larger_size_expands_every_small_claim_first_then_replaces_each_template() {
    let mut volumes = vec![
        volume(0, "1Gi", "1Gi", "1Gi"),
        volume(1, "1Gi", "8Gi", "1Gi"),
    ];
    assert_eq!(
        plan_growth(&q("8Gi"), &volumes),
        GrowthStep::Expand {
            claims: vec!["data-demo-mongodb-0-0".into()],
            to: q("8Gi")
        }
    );
    volumes[0].claim.as_mut().unwrap().requested = Some(q("8Gi"));
    assert_eq!(
        plan_growth(&q("8Gi"), &volumes),
        GrowthStep::ReplaceTemplate {
            stateful_set: "demo-mongodb-0".into()
        }
    );
    volumes[0].deleting = true;
    assert_eq!(
        plan_growth(&q("8Gi"), &volumes),
        GrowthStep::ReplaceTemplate {
            stateful_set: "demo-mongodb-1".into()
        },
        "a StatefulSet being deleted is not deleted again"
    );
    volumes[0].template = Some(q("8Gi"));
    volumes[0].deleting = false;
    volumes[1].template = Some(q("8Gi"));
    volumes[1].claim.as_mut().unwrap().conditions = vec!["FileSystemResizePending".into()];
    assert_eq!(
        plan_growth(&q("8Gi"), &volumes),
        GrowthStep::Resizing {
            claims: vec![
                ClaimProgress {
                    name: "data-demo-mongodb-0-0".into(),
                    capacity: Some(q("1Gi")),
                    conditions: vec![]
                },
                ClaimProgress {
                    name: "data-demo-mongodb-1-0".into(),
                    capacity: Some(q("1Gi")),
                    conditions: vec!["FileSystemResizePending".into()]
                }
            ]
        }
    );
    volumes[0].claim.as_mut().unwrap().capacity = Some(q("8Gi"));
    volumes[1].claim.as_mut().unwrap().capacity = Some(q("8Gi"));
    assert_eq!(plan_growth(&q("8Gi"), &volumes), GrowthStep::InPlace);
}

#[test]
fn a_smaller_size_is_refused_whether_templates_or_claims_are_larger() {
    let volumes = [volume(0, "8Gi", "8Gi", "8Gi")];
    assert_eq!(
        plan_growth(&q("4Gi"), &volumes),
        GrowthStep::DecreaseRefused {
            from: q("8Gi"),
            to: q("4Gi")
        }
    );
    // Back to the old size half-way through a growth: the claim asked for more.
    let half_way = [volume(0, "1Gi", "8Gi", "1Gi")];
    assert_eq!(
        plan_growth(&q("1Gi"), &half_way),
        GrowthStep::DecreaseRefused {
            from: q("8Gi"),
            to: q("1Gi")
        }
    );
}

#[test]
fn a_member_without_a_claim_or_stateful_set_yet_waits_for_nothing() {
    let volumes = [MemberVolume {
        stateful_set: "demo-mongodb-0".into(),
        template: None,
        deleting: false,
        claim: None,
    }];
    assert_eq!(plan_growth(&q("8Gi"), &volumes), GrowthStep::InPlace);
}

#[test]
fn a_new_member_gets_the_spec_size_unless_a_decrease_was_refused() {
    let templates = [q("8Gi")];
    assert_eq!(new_claim_storage(&q("16Gi"), &templates), q("16Gi"));
    assert_eq!(new_claim_storage(&q("8Gi"), &templates), q("8Gi"));
    assert_eq!(new_claim_storage(&q("4Gi"), &templates), q("8Gi"));
    assert_eq!(new_claim_storage(&q("4Gi"), &[]), q("4Gi"));
}
