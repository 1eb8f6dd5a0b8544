//! Names of the objects built for an instance `<name>`.
//!
//! Member names are fixed by the contract: the control plane propagates Services
//! `<name>-mongodb-<i>` and `<name>-mongodb-arbiter`, and each member's
//! StatefulSet has the same name as its Service.

/// `<name>-mongodb-<index>`: a data member's Service and StatefulSet.
pub fn member(instance: &str, index: u32) -> String {
    format!("{instance}-mongodb-{index}")
}

/// `<name>-mongodb-arbiter`: the arbiter's Service and StatefulSet.
pub fn arbiter(instance: &str) -> String {
    format!("{instance}-mongodb-arbiter")
}

/// `data-<member>-0`: the PVC the member StatefulSet `member` (see [`member`] and
/// [`arbiter`]) claims for its only pod.
pub fn data_claim(member: &str) -> String {
    format!("{}-{member}-0", super::DATA_VOLUME)
}

/// `<name>-mongodb-headless`: the operator-owned governing Service of the member StatefulSets.
pub fn headless_service(instance: &str) -> String {
    format!("{instance}-mongodb-headless")
}

/// `<name>-mongodb-metrics`: the exporter's Service.
pub fn metrics_service(instance: &str) -> String {
    format!("{instance}-mongodb-metrics")
}

/// `<name>-mongodb`: the PodDisruptionBudget of the data members.
pub fn pod_disruption_budget(instance: &str) -> String {
    format!("{instance}-mongodb")
}

/// `<name>-credentials`: keyfile and root user derived from `spec.rootPassword`.
pub fn derived_credentials_secret(instance: &str) -> String {
    format!("{instance}-credentials")
}

/// `<name>-monitor-credentials`: the exporter's `clusterMonitor` user.
pub fn monitor_credentials_secret(instance: &str) -> String {
    format!("{instance}-monitor-credentials")
}

/// `<name>-admin-credentials`: the operator's `clusterAdmin` user.
pub fn admin_credentials_secret(instance: &str) -> String {
    format!("{instance}-admin-credentials")
}

/// `<name>-dbuser`: the application database user (`spec.dbUserSpec`).
pub fn db_user_secret(instance: &str) -> String {
    format!("{instance}-dbuser")
}

/// `<name>-image-pull`: the registry credentials of `spec.imagePullSecret`.
pub fn image_pull_secret(instance: &str) -> String {
    format!("{instance}-image-pull")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_claim_is_named_like_the_statefulset_controller_names_it() {
        assert_eq!(data_claim(&member("demo", 2)), "data-demo-mongodb-2-0");
    }
}
