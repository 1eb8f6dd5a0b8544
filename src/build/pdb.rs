//! The PodDisruptionBudget of the data members: voluntary disruptions (node
//! drains) take down at most one of this cluster's members at a time.

use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::labels::{instance_labels, instance_selector, Component, COMPONENT_LABEL};
use super::{names, BuildContext};

/// `<name>-mongodb`: `maxUnavailable: 1` over the instance's data members. A
/// member that is not ready anyway may always be evicted (`AlwaysAllow`), so a
/// crash-looping member never blocks a node drain.
pub fn member_pod_disruption_budget(ctx: &BuildContext) -> PodDisruptionBudget {
    let mut match_labels = instance_selector(ctx.name());
    match_labels.insert(
        COMPONENT_LABEL.to_string(),
        Component::Member.as_str().to_string(),
    );
    PodDisruptionBudget {
        metadata: ctx.object_meta(
            names::pod_disruption_budget(ctx.name()),
            instance_labels(ctx.name()),
        ),
        spec: Some(PodDisruptionBudgetSpec {
            max_unavailable: Some(IntOrString::Int(1)),
            selector: Some(LabelSelector {
                match_labels: Some(match_labels),
                match_expressions: None,
            }),
            unhealthy_pod_eviction_policy: Some("AlwaysAllow".to_string()),
            ..PodDisruptionBudgetSpec::default()
        }),
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::fixtures::*;
    use super::*;

    #[test]
    fn pod_disruption_budget_allows_one_data_member_down() {
        let mongodb = mongodb();
        let pdb = member_pod_disruption_budget(&BuildContext::from_mongodb(&mongodb).unwrap());
        assert_eq!(pdb.metadata.name.as_deref(), Some("demo-mongodb"));
        assert_eq!(
            pdb.metadata.owner_references.unwrap()[0].controller,
            Some(true)
        );
        let spec = pdb.spec.unwrap();
        assert_eq!(spec.max_unavailable, Some(IntOrString::Int(1)));
        assert_eq!(spec.min_available, None);
        assert_eq!(
            spec.selector.unwrap().match_labels.unwrap(),
            BTreeMap::from([
                ("app.kubernetes.io/instance".to_string(), NAME.to_string()),
                (
                    "app.kubernetes.io/component".to_string(),
                    "member".to_string()
                ),
            ])
        );
    }
}
