//! Acting as another user, as kube-apiserver's impersonation filter
//! (`k8s.io/apiserver/pkg/endpoints/filters/impersonation.go`) allows it.

use super::{authorize, forbidden, Attributes, Decision};
use crate::auth::{UserInfo, AUTHENTICATED, UNAUTHENTICATED};
use crate::error::ApiError;
use crate::store::Store;

/// What a request asks to act as (`Impersonate-User`, `Impersonate-Group`,
/// `Impersonate-Uid` headers; `kubectl --as`, `--as-group`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Impersonation {
    /// `Impersonate-User`.
    pub user: Option<String>,
    /// Every `Impersonate-Group`.
    pub groups: Vec<String>,
    /// `Impersonate-Uid`.
    pub uid: Option<String>,
}

/// The user a request acts as, as kube-apiserver's impersonation filter
/// decides it: `requester` must be allowed to `impersonate` the user
/// (`users`, or `serviceaccounts` in their namespace), each group (`groups`)
/// and the uid (`uids.authentication.k8s.io`); a ServiceAccount without groups
/// gets its fixed groups; `system:authenticated` is added unless a group says
/// otherwise.
pub fn impersonate(
    store: &Store,
    requester: UserInfo,
    asked: &Impersonation,
) -> Result<UserInfo, ApiError> {
    let Some(name) = asked.user.as_deref() else {
        if asked.groups.is_empty() && asked.uid.is_none() {
            return Ok(requester);
        }
        return Err(ApiError::internal(
            "requested impersonation of groups or a uid without impersonating a user",
        ));
    };
    let check = |resource: &str, group: &str, namespace: &str, object: &str| {
        let attributes = Attributes {
            user: Some(requester.clone()),
            verb: "impersonate".to_string(),
            resource_request: true,
            api_group: group.to_string(),
            namespace: namespace.to_string(),
            resource: resource.to_string(),
            name: object.to_string(),
            ..Default::default()
        };
        match authorize(store, &attributes) {
            Decision::Allow(_) => Ok(()),
            Decision::Deny(reason) => Err(forbidden(&attributes, &reason)),
        }
    };
    let mut groups = asked.groups.clone();
    let service_account = name
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.split_once(':'));
    match service_account {
        Some((namespace, account)) => {
            check("serviceaccounts", "", namespace, account)?;
            if groups.is_empty() {
                groups = vec![
                    crate::auth::SERVICE_ACCOUNTS.to_string(),
                    format!("{}:{namespace}", crate::auth::SERVICE_ACCOUNTS),
                ];
            }
        }
        None => check("users", "", "", name)?,
    }
    for group in &asked.groups {
        check("groups", "", "", group)?;
    }
    if let Some(uid) = &asked.uid {
        check("uids", "authentication.k8s.io", "", uid)?;
    }
    if name == crate::auth::ANONYMOUS {
        if !groups.iter().any(|g| g == UNAUTHENTICATED) {
            groups.push(UNAUTHENTICATED.to_string());
        }
    } else if !groups
        .iter()
        .any(|g| g == AUTHENTICATED || g == UNAUTHENTICATED)
    {
        groups.push(AUTHENTICATED.to_string());
    }
    Ok(UserInfo {
        name: name.to_string(),
        uid: asked.uid.clone().unwrap_or_default(),
        groups,
    })
}
