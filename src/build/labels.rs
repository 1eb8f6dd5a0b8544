//! The labels of every built object: the recommended `app.kubernetes.io/*` set,
//! with a `component` telling members, the arbiter and the exporter apart.

use std::collections::BTreeMap;

use crate::api::INSTANCE_LABEL;

/// `app.kubernetes.io/name`, always [`APP_NAME`].
pub const NAME_LABEL: &str = "app.kubernetes.io/name";
/// Value of [`NAME_LABEL`].
pub const APP_NAME: &str = "mongodb";
/// `app.kubernetes.io/managed-by`, always [`MANAGER`].
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// Value of [`MANAGED_BY_LABEL`]: the objects this operator owns.
pub const MANAGER: &str = "mongodb-member-operator";
/// `app.kubernetes.io/component`, see [`Component`].
pub const COMPONENT_LABEL: &str = "app.kubernetes.io/component";

/// What part of the instance an object or pod is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Component {
    /// A data-bearing member.
    Member,
    /// The arbiter.
    Arbiter,
    /// The metrics exporter.
    Metrics,
}

impl Component {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Component::Member => "member",
            Component::Arbiter => "arbiter",
            Component::Metrics => "metrics",
        }
    }
}

/// `{app.kubernetes.io/instance: <name>}`: selects every pod of the instance.
pub fn instance_selector(instance: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(INSTANCE_LABEL.to_string(), instance.to_string())])
}

/// `{app.kubernetes.io/instance: <name>, app.kubernetes.io/name: mongodb}`:
/// the instance's member pods (data members and arbiter), not its exporter's.
pub fn member_pods_selector(instance: &str) -> BTreeMap<String, String> {
    let mut selector = instance_selector(instance);
    selector.insert(NAME_LABEL.to_string(), APP_NAME.to_string());
    selector
}

/// Name, instance and managed-by labels: what every built object carries.
pub fn instance_labels(instance: &str) -> BTreeMap<String, String> {
    let mut labels = instance_selector(instance);
    labels.insert(NAME_LABEL.to_string(), APP_NAME.to_string());
    labels.insert(MANAGED_BY_LABEL.to_string(), MANAGER.to_string());
    labels
}

/// [`instance_labels`] plus the component.
pub fn component_labels(instance: &str, component: Component) -> BTreeMap<String, String> {
    let mut labels = instance_labels(instance);
    labels.insert(COMPONENT_LABEL.to_string(), component.as_str().to_string());
    labels
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn component_labels_are_the_recommended_set() {
        let labels = component_labels("demo", Component::Arbiter);
        assert_eq!(
            labels,
            BTreeMap::from([
                ("app.kubernetes.io/name".to_string(), "mongodb".to_string()),
                ("app.kubernetes.io/instance".to_string(), "demo".to_string()),
                (
                    "app.kubernetes.io/managed-by".to_string(),
                    "mongodb-member-operator".to_string()
                ),
                (
                    "app.kubernetes.io/component".to_string(),
                    "arbiter".to_string()
                ),
            ])
        );
    }
}
