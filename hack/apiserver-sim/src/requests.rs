//! Request counters for benchmarks: how many requests the server served, by
//! user, verb and resource, as kube-apiserver's `apiserver_request_total`
//! metric counts them (which has no user label; audit logs have it). Counted
//! once authorized, so refused requests are not counted.

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::rbac::Attributes;

/// Which requests were served.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RequestKey {
    /// The user name (`system:serviceaccount:…` for the operator).
    pub user: String,
    /// The kube verb (`get`, `list`, `watch`, `create`, `update`, `patch`,
    /// `delete`, …).
    pub verb: String,
    /// The resource, with its subresource (`mongodbs/status`), or the path of
    /// a non-resource request.
    pub resource: String,
}

impl RequestKey {
    /// Whether the request changes something (create, update, patch, delete).
    pub fn is_write(&self) -> bool {
        matches!(
            self.verb.as_str(),
            "create" | "update" | "patch" | "delete" | "deletecollection"
        )
    }
}

/// The counters of one server (kept across its restarts).
#[derive(Debug, Default)]
pub struct RequestCounts(Mutex<BTreeMap<RequestKey, u64>>);

impl RequestCounts {
    /// Counts one authorized request.
    pub fn count(&self, attributes: &Attributes) {
        let resource = match (
            attributes.resource_request,
            attributes.subresource.is_empty(),
        ) {
            (false, _) => attributes.path.clone(),
            (true, true) => attributes.resource.clone(),
            (true, false) => format!("{}/{}", attributes.resource, attributes.subresource),
        };
        let key = RequestKey {
            user: attributes
                .user
                .as_ref()
                .map(|u| u.name.clone())
                .unwrap_or_default(),
            verb: attributes.verb.clone(),
            resource,
        };
        *self.lock().entry(key).or_default() += 1;
    }

    /// Every counter so far.
    pub fn snapshot(&self) -> BTreeMap<RequestKey, u64> {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<RequestKey, u64>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::auth::UserInfo;
    use crate::rbac::request_attributes;

    #[test]
    fn requests_are_counted_by_user_verb_and_resource_writes_told_apart() {
        let counts = RequestCounts::default();
        let operator = UserInfo::new("system:serviceaccount:ops:operator", &[]);
        let none = HashMap::new();
        let watch = HashMap::from([("watch".to_string(), "true".to_string())]);
        let path = "/apis/middleware.fedstate.io/v1alpha1/namespaces/default/mongodbs";
        counts.count(&request_attributes(operator.clone(), "GET", path, &none));
        counts.count(&request_attributes(operator.clone(), "GET", path, &none));
        counts.count(&request_attributes(operator.clone(), "GET", path, &watch));
        let status = format!("{path}/demo/status");
        counts.count(&request_attributes(
            operator.clone(),
            "PATCH",
            &status,
            &none,
        ));
        let got = counts.snapshot();
        let key = |verb: &str, resource: &str| RequestKey {
            user: operator.name.clone(),
            verb: verb.to_string(),
            resource: resource.to_string(),
        };
        assert_eq!(got.get(&key("list", "mongodbs")), Some(&2));
        assert_eq!(got.get(&key("watch", "mongodbs")), Some(&1));
        assert_eq!(got.get(&key("patch", "mongodbs/status")), Some(&1));
        assert!(key("patch", "mongodbs/status").is_write());
        assert!(!key("watch", "mongodbs").is_write());
    }
}
