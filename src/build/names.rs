//! Names of the objects built for an instance `<name>`.
//!
//! Member names are fixed by the contract: the control plane propagates Services
//! `<name>-mongodb-<i>` and `<name>-mongodb-arbiter`, and each member's
//! StatefulSet has the same name as its Service.

use crate::member::MemberSlot;

/// A member's Service and StatefulSet name: [`member`] or [`arbiter`].
pub fn slot(instance: &str, slot: MemberSlot) -> String {
    match slot {
        MemberSlot::Data(index) => member(instance, index),
        MemberSlot::Arbiter => arbiter(instance),
    }
}

/// Which member a Service or StatefulSet name is, for this instance: the
/// inverse of [`slot`] (`None` for any other name).
pub fn slot_of(instance: &str, object_name: &str) -> Option<MemberSlot> {
    if object_name == arbiter(instance) {
        return Some(MemberSlot::Arbiter);
    }
    let index = object_name.strip_prefix(&format!("{instance}-mongodb-"))?;
    if index.is_empty() || index.starts_with('0') && index.len() > 1 {
        return None;
    }
    index.parse().ok().map(MemberSlot::Data)
}

/// The hostconf ConfigMap the control plane propagates: `spec.memberConfigRef`
/// when set, else `<name>-hostconf`.
pub fn hostconf(instance: &str, member_config_ref: Option<&str>) -> String {
    match member_config_ref {
        Some(name) if !name.is_empty() => name.to_string(),
        _ => format!("{instance}-hostconf"),
    }
}

/// The instance whose arbiter `object_name` names (`<instance>-mongodb-arbiter`).
pub fn instance_of_arbiter(object_name: &str) -> Option<&str> {
    object_name
        .strip_suffix("-mongodb-arbiter")
        .filter(|instance| !instance.is_empty())
}

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

/// `<member>-metrics`: the Deployment of the exporter of the member whose
/// StatefulSet is `member` (see [`member`] and [`arbiter`]).
pub fn exporter(member: &str) -> String {
    format!("{member}-metrics")
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

/// `<name>-held-root-credentials`: the root password the replica set is known
/// to hold, kept by the operator to set a new one through it.
pub fn held_root_secret(instance: &str) -> String {
    format!("{instance}-held-root-credentials")
}

/// `<name>-keyfile-<digest>`: the keyfile the members run, one immutable
/// Secret per content (its digest: 10 hex characters of the SHA-256 of the
/// file), so that a pod runs exactly the keyfile its template names.
pub fn keyfile_secret(instance: &str, file_digest: &str) -> String {
    format!("{}{}", keyfile_secret_prefix(instance), &file_digest[..10])
}

/// `<name>-mongod-tls`: the members' certificate, key and CA bundle as
/// mongod reads them.
pub fn tls_secret(instance: &str) -> String {
    format!("{instance}-mongod-tls")
}

/// What every keyfile Secret of the instance's name starts with.
pub fn keyfile_secret_prefix(instance: &str) -> String {
    format!("{instance}-keyfile-")
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

    #[test]
    fn slots_are_read_from_this_instances_names_only() {
        assert_eq!(slot_of("demo", "demo-mongodb-0"), Some(MemberSlot::Data(0)));
        assert_eq!(
            slot_of("demo", "demo-mongodb-12"),
            Some(MemberSlot::Data(12))
        );
        assert_eq!(
            slot_of("demo", "demo-mongodb-arbiter"),
            Some(MemberSlot::Arbiter)
        );
        assert_eq!(slot_of("demo", "demo-mongodb-headless"), None);
        assert_eq!(slot_of("demo", "demo-mongodb-metrics"), None);
        assert_eq!(slot_of("demo", "demo-mongodb-01"), None);
        assert_eq!(slot_of("demo", "other-mongodb-0"), None);
        assert_eq!(slot_of("demo", "demo-mongodb-"), None);
        for s in [
            MemberSlot::Data(0),
            MemberSlot::Data(7),
            MemberSlot::Arbiter,
        ] {
            assert_eq!(slot_of("demo", &slot("demo", s)), Some(s));
        }
    }

    #[test]
    fn the_arbiters_instance_is_read_from_its_name() {
        assert_eq!(instance_of_arbiter(&arbiter("demo")), Some("demo"));
        assert_eq!(instance_of_arbiter("my-db-mongodb-arbiter"), Some("my-db"));
        assert_eq!(instance_of_arbiter("-mongodb-arbiter"), None);
        assert_eq!(instance_of_arbiter("demo-mongodb-0"), None);
    }

    #[test]
    fn hostconf_is_the_reference_or_the_instance_default() {
        assert_eq!(hostconf("demo", None), "demo-hostconf");
        assert_eq!(hostconf("demo", Some("")), "demo-hostconf");
        assert_eq!(hostconf("demo", Some("shared")), "shared");
    }
}
