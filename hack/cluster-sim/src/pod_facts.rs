//! Facts about pods that several simulated components read the same way
//! Kubernetes' own helpers do (`podutil.IsPodReady`, `isRunningAndReady`, …).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::ResourceExt;

/// Whether the pod's `Ready` condition is `True`.
pub fn is_ready(pod: &Pod) -> bool {
    condition_is_true(pod, "Ready")
}

/// Whether the pod's condition `type_` is `True`.
pub fn condition_is_true(pod: &Pod, type_: &str) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == type_ && c.status == "True"))
}

/// The pod's phase (`Pending` when unset).
pub fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

/// Whether the pod is `Pending` (not yet running: its claims may still be made).
pub fn is_pending(pod: &Pod) -> bool {
    phase(pod) == "Pending"
}

/// Whether the pod has finished for good (`Succeeded` or `Failed`).
pub fn is_terminal(pod: &Pod) -> bool {
    matches!(phase(pod), "Succeeded" | "Failed")
}

/// Whether the pod is being deleted.
pub fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// `Running` and `Ready`, and not being deleted: what the StatefulSet controller waits for.
pub fn is_running_and_ready(pod: &Pod) -> bool {
    phase(pod) == "Running" && is_ready(pod) && !is_terminating(pod)
}

/// The uid of the pod's controller (the ownerReference with `controller: true`).
pub fn controller_uid(pod: &Pod) -> Option<&str> {
    pod.metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|o| o.controller == Some(true))
        .map(|o| o.uid.as_str())
}

/// Whether `labels` satisfy a Service selector (a plain map; an empty selector selects nothing,
/// as for Services).
pub fn service_selects(
    selector: &BTreeMap<String, String>,
    labels: Option<&BTreeMap<String, String>>,
) -> bool {
    !selector.is_empty()
        && labels.is_some_and(|labels| selector.iter().all(|(k, v)| labels.get(k) == Some(v)))
}

/// Whether `labels` satisfy a `LabelSelector` (matchLabels and matchExpressions; an empty
/// selector selects everything, as for workloads). Unknown operators select nothing.
pub fn label_selector_matches(
    selector: &LabelSelector,
    labels: Option<&BTreeMap<String, String>>,
) -> bool {
    let empty = BTreeMap::new();
    let labels = labels.unwrap_or(&empty);
    let match_labels = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let match_expressions = selector.match_expressions.iter().flatten().all(|e| {
        let values = e.values.as_deref().unwrap_or_default();
        let value = labels.get(&e.key);
        match e.operator.as_str() {
            "In" => value.is_some_and(|v| values.contains(v)),
            "NotIn" => value.is_none_or(|v| !values.contains(v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            _ => false,
        }
    });
    match_labels && match_expressions
}

/// The pods by (namespace, label, value), so that the endpoints controller
/// and the proxy look at the pods that may match each Service instead of at
/// every pod for every Service (which made `lab bench` with 1,000 instances
/// spend both cores there).
pub struct PodsByLabel(HashMap<(String, String, String), Vec<Arc<Pod>>>);

impl PodsByLabel {
    pub fn new(pods: Vec<Arc<Pod>>) -> Self {
        let mut index: HashMap<_, Vec<Arc<Pod>>> = HashMap::new();
        for pod in pods {
            let namespace = pod.namespace().unwrap_or_default();
            for (key, value) in pod.labels() {
                index
                    .entry((namespace.clone(), key.clone(), value.clone()))
                    .or_default()
                    .push(pod.clone());
            }
        }
        PodsByLabel(index)
    }

    /// The pods of `service`'s namespace carrying its selector's first
    /// label (the rest of the selector is for `subsets` to check).
    pub fn candidates(&self, service: &Service) -> Vec<Arc<Pod>> {
        let selector = service
            .spec
            .as_ref()
            .and_then(|spec| spec.selector.as_ref());
        let Some((key, value)) = selector.and_then(|selector| selector.iter().next()) else {
            return Vec::new();
        };
        let namespace = service.namespace().unwrap_or_default();
        self.0
            .get(&(namespace, key.clone(), value.clone()))
            .cloned()
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn an_empty_service_selector_selects_nothing() {
        assert!(!service_selects(
            &BTreeMap::new(),
            Some(&labels(&[("a", "b")]))
        ));
        assert!(service_selects(
            &labels(&[("a", "b")]),
            Some(&labels(&[("a", "b"), ("c", "d")]))
        ));
        assert!(!service_selects(&labels(&[("a", "b")]), None));
    }

    #[test]
    fn label_selectors_evaluate_match_labels_and_expressions() {
        let selector = LabelSelector {
            match_labels: Some(labels(&[("app", "db")])),
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "tier".into(),
                operator: "In".into(),
                values: Some(vec!["a".into(), "b".into()]),
            }]),
        };
        assert!(label_selector_matches(
            &selector,
            Some(&labels(&[("app", "db"), ("tier", "a")]))
        ));
        assert!(!label_selector_matches(
            &selector,
            Some(&labels(&[("app", "db"), ("tier", "c")]))
        ));
        assert!(!label_selector_matches(&selector, None));
        assert!(label_selector_matches(&LabelSelector::default(), None));
    }
}
