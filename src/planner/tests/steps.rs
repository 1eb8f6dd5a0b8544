//! What the planner returns: names and sentences.

use super::*;

#[test]
fn reasons_are_pascal_case_and_messages_read_as_sentences() {
    let steps = [
        Step::Wait {
            reason: WaitReason::NotEnoughHealthyVoters {
                healthy: 1,
                needed: 2,
            },
        },
        Step::Refuse {
            reason: Refusal::InvalidConfig {
                problems: vec![ConfigProblem::NoVoters],
            },
        },
        Step::InSync,
        Step::DeleteStatefulSet {
            slot: MemberSlot::Data(3),
            delete_pvc: false,
        },
    ];
    for step in steps {
        let reason = step.reason();
        assert!(reason
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_uppercase()));
        assert!(
            reason.chars().all(|c| c.is_ascii_alphanumeric()),
            "{reason}"
        );
        assert!(!step.to_string().is_empty());
    }
    assert_eq!(
        Step::Refuse {
            reason: Refusal::InvalidConfig {
                problems: vec![ConfigProblem::NoVoters]
            }
        }
        .to_string(),
        "refused: the resulting config would be invalid: no member has a vote"
    );
}

#[test]
fn a_step_is_named_by_the_change_wait_or_refusal_it_carries() {
    let named = [
        (
            Step::Reconfig {
                config: config(vec![voter(0, local(0))]),
                change: Change::UpdateSettings,
            },
            "UpdateSettings",
        ),
        (
            Step::Wait {
                reason: WaitReason::NoPrimary,
            },
            "NoPrimary",
        ),
        (
            Step::Refuse {
                reason: Refusal::NothingToInitiate,
            },
            "NothingToInitiate",
        ),
        (Step::InSync, "InSync"),
    ];
    for (step, name) in named {
        assert_eq!(step.reason(), name, "{step}");
    }
}
