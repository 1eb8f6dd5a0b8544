//! Authentication, as kube-apiserver's bearer-token authenticators do it: a
//! request's `Authorization: Bearer <token>` names a user (static tokens, like
//! `--token-auth-file`) or a ServiceAccount (`system:serviceaccount:<ns>:<name>`,
//! valid while that ServiceAccount exists). Authenticated users get the
//! `system:authenticated` group; a request without a bearer token is
//! `system:anonymous` in `system:unauthenticated`; an unknown token is a 401.
//!
//! Differences from kube-apiserver: tokens are opaque random strings (not
//! JWTs), never expire and are registered through this module's API or a token
//! file, not through the TokenRequest API or Secrets. See the README.

use std::collections::HashMap;
use std::sync::RwLock;

use serde_json::Value;

use crate::error::ApiError;
use crate::registry::Gvr;
use crate::store::Store;

/// The group every authenticated user is in.
pub const AUTHENTICATED: &str = "system:authenticated";
/// The group of anonymous requests.
pub const UNAUTHENTICATED: &str = "system:unauthenticated";
/// The user name of anonymous requests.
pub const ANONYMOUS: &str = "system:anonymous";
/// The group whose members every request is allowed to (kube-apiserver's
/// privileged group, authorized before RBAC).
pub const MASTERS: &str = "system:masters";
/// The user of unauthenticated requests in [`Unauthenticated::Admin`] mode
/// (the insecure port's user).
pub const UNSECURED: &str = "system:unsecured";
/// The group of every ServiceAccount.
pub const SERVICE_ACCOUNTS: &str = "system:serviceaccounts";

/// Who made a request (`user.Info`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    /// User name, e.g. `system:serviceaccount:ns:name`.
    pub name: String,
    /// User uid (a ServiceAccount's uid), may be empty.
    pub uid: String,
    /// Groups, `system:authenticated` included for authenticated users.
    pub groups: Vec<String>,
}

impl UserInfo {
    /// A user with these groups (`system:authenticated` is added when missing,
    /// as kube-apiserver's authenticated-group adder does).
    pub fn new(name: &str, groups: &[&str]) -> Self {
        let mut groups: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
        if !groups.iter().any(|g| g == AUTHENTICATED) {
            groups.push(AUTHENTICATED.to_string());
        }
        UserInfo {
            name: name.to_string(),
            uid: String::new(),
            groups,
        }
    }

    /// `system:anonymous` in `system:unauthenticated`.
    pub fn anonymous() -> Self {
        UserInfo {
            name: ANONYMOUS.to_string(),
            uid: String::new(),
            groups: vec![UNAUTHENTICATED.to_string()],
        }
    }

    /// The identity of ServiceAccount `namespace/name`.
    pub fn service_account(namespace: &str, name: &str, uid: &str) -> Self {
        UserInfo {
            name: service_account_user(namespace, name),
            uid: uid.to_string(),
            groups: vec![
                SERVICE_ACCOUNTS.to_string(),
                format!("{SERVICE_ACCOUNTS}:{namespace}"),
                AUTHENTICATED.to_string(),
            ],
        }
    }

    /// In `group`?
    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }
}

/// `system:serviceaccount:<namespace>:<name>`.
pub fn service_account_user(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

#[derive(Debug, Clone)]
enum Credential {
    Static(UserInfo),
    ServiceAccount {
        namespace: String,
        name: String,
        /// The ServiceAccount's uid when the token was issued: a ServiceAccount
        /// deleted and created again does not accept older tokens.
        uid: Option<String>,
    },
}

/// Who a request without a bearer token is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unauthenticated {
    /// `system:anonymous` in `system:unauthenticated` (kube-apiserver's default
    /// `--anonymous-auth=true`); RBAC decides what it may do.
    Anonymous,
    /// A 401 (`--anonymous-auth=false`).
    Refused,
    /// `system:unsecured` in `system:masters`: what kube-apiserver's plain-HTTP
    /// insecure port (removed in 1.20) made of every request. The harness mode:
    /// kubectl (client-go) sends no credentials over plain HTTP, so it reaches
    /// the simulator without a token, as an administrator.
    Admin,
}

/// The token authenticator of a server in RBAC mode.
pub struct Authenticator {
    tokens: RwLock<HashMap<String, Credential>>,
    unauthenticated: Unauthenticated,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let count = self.tokens.read().map(|t| t.len()).unwrap_or_default();
        f.debug_struct("Authenticator")
            .field("tokens", &count)
            .field("unauthenticated", &self.unauthenticated)
            .finish()
    }
}

impl Default for Authenticator {
    fn default() -> Self {
        Self::new()
    }
}

/// A fresh random token (128 bits, hex).
fn random_token() -> String {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    let mut out = String::new();
    for _ in 0..2 {
        let mut h = RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default(),
        );
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out
}

impl Authenticator {
    /// No tokens yet; anonymous requests allowed (kube-apiserver's default
    /// `--anonymous-auth=true`: they are `system:anonymous`, and RBAC decides).
    pub fn new() -> Self {
        Authenticator {
            tokens: RwLock::new(HashMap::new()),
            unauthenticated: Unauthenticated::Anonymous,
        }
    }

    /// What requests without a bearer token are (see [`Unauthenticated`]).
    pub fn unauthenticated(mut self, who: Unauthenticated) -> Self {
        self.unauthenticated = who;
        self
    }

    /// Reads a kube-apiserver `--token-auth-file`: CSV lines
    /// `token,user,uid[,"group1,group2"]` (blank lines and `#` comments skipped).
    pub fn from_token_file(text: &str) -> Result<Self, String> {
        let auth = Self::new();
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fields = csv_fields(line);
            if fields.len() < 3 {
                return Err(format!(
                    "token file line {}: at least 3 columns are required (token,user,uid)",
                    number + 1
                ));
            }
            let groups: Vec<&str> = fields
                .get(3)
                .map(|g| {
                    g.split(',')
                        .map(str::trim)
                        .filter(|g| !g.is_empty())
                        .collect()
                })
                .unwrap_or_default();
            let mut user = UserInfo::new(&fields[1], &groups);
            user.uid = fields[2].clone();
            auth.add_token(&fields[0], user);
        }
        Ok(auth)
    }

    /// Registers a static token for `user`.
    pub fn add_token(&self, token: &str, user: UserInfo) {
        self.write()
            .insert(token.to_string(), Credential::Static(user));
    }

    /// A new token for a cluster administrator (`system:masters`), the
    /// identity of kubectl, the harness and the in-process controllers.
    pub fn admin_token(&self, name: &str) -> String {
        let token = random_token();
        self.add_token(&token, UserInfo::new(name, &[MASTERS]));
        token
    }

    /// A new token for ServiceAccount `namespace/name`. It authenticates while
    /// that ServiceAccount exists in `store` (with the uid it has now, if it
    /// exists now).
    pub fn service_account_token(&self, store: &Store, namespace: &str, name: &str) -> String {
        let uid = store
            .get(&Gvr::core("serviceaccounts"), Some(namespace), name)
            .ok()
            .and_then(|sa| {
                sa.pointer("/metadata/uid")
                    .and_then(Value::as_str)
                    .map(String::from)
            });
        let token = random_token();
        self.write().insert(
            token.clone(),
            Credential::ServiceAccount {
                namespace: namespace.to_string(),
                name: name.to_string(),
                uid,
            },
        );
        token
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, Credential>> {
        self.tokens.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Who sent a request with this `Authorization` header value (empty when
    /// absent); a 401 Unauthorized when the token is not valid.
    pub fn authenticate(&self, store: &Store, authorization: &str) -> Result<UserInfo, ApiError> {
        let Some(token) = bearer_token(authorization) else {
            return match self.unauthenticated {
                Unauthenticated::Anonymous => Ok(UserInfo::anonymous()),
                Unauthenticated::Refused => Err(ApiError::unauthorized()),
                Unauthenticated::Admin => Ok(UserInfo::new(UNSECURED, &[MASTERS])),
            };
        };
        let credential = self
            .tokens
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(token)
            .cloned();
        match credential {
            Some(Credential::Static(user)) => Ok(user),
            Some(Credential::ServiceAccount {
                namespace,
                name,
                uid,
            }) => {
                let account = store
                    .get(&Gvr::core("serviceaccounts"), Some(&namespace), &name)
                    .map_err(|_| ApiError::unauthorized())?;
                let current = account
                    .pointer("/metadata/uid")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if uid.as_deref().is_some_and(|uid| uid != current)
                    || account.pointer("/metadata/deletionTimestamp").is_some()
                {
                    return Err(ApiError::unauthorized());
                }
                Ok(UserInfo::service_account(&namespace, &name, current))
            }
            None => Err(ApiError::unauthorized()),
        }
    }
}

/// The token of `Authorization: Bearer <token>`, as kube-apiserver's bearer
/// token authenticator reads it (scheme case-insensitive; no or an empty token:
/// not a bearer request).
fn bearer_token(header: &str) -> Option<&str> {
    let header = header.trim();
    let mut parts = header.splitn(3, ' ');
    let scheme = parts.next()?;
    let token = parts.next()?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The fields of one CSV line (double quotes group, `""` is a quote).
fn csv_fields(line: &str) -> Vec<String> {
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            ',' if !quoted => fields.push(std::mem::take(&mut field)),
            c => field.push(c),
        }
    }
    fields.push(field);
    fields
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::WriteOptions;
    use serde_json::json;

    #[test]
    fn token_file_users_are_authenticated_with_their_groups() {
        let auth = Authenticator::from_token_file(
            "# comment\nsecret1,alice,1001,\"dev,ops\"\nsecret2,bob,1002\n",
        )
        .unwrap();
        let store = Store::new();
        let alice = auth.authenticate(&store, "Bearer secret1").unwrap();
        assert_eq!(alice.name, "alice");
        assert_eq!(alice.uid, "1001");
        assert_eq!(alice.groups, ["dev", "ops", AUTHENTICATED]);
        let bob = auth.authenticate(&store, "bearer secret2").unwrap();
        assert_eq!(bob.groups, [AUTHENTICATED]);
        assert_eq!(
            auth.authenticate(&store, "Bearer nope").unwrap_err().code,
            401
        );
        assert_eq!(
            auth.authenticate(&store, "").unwrap(),
            UserInfo::anonymous()
        );
        assert_eq!(
            auth.authenticate(&store, "Basic abc").unwrap(),
            UserInfo::anonymous(),
            "not a bearer token: the next authenticator (anonymous)"
        );
        let strict = Authenticator::new().unauthenticated(Unauthenticated::Refused);
        assert_eq!(strict.authenticate(&store, "").unwrap_err().code, 401);
        let insecure = Authenticator::new().unauthenticated(Unauthenticated::Admin);
        let admin = insecure.authenticate(&store, "").unwrap();
        assert_eq!(admin.name, "system:unsecured");
        assert_eq!(admin.groups, ["system:masters", "system:authenticated"]);
        assert_eq!(
            insecure
                .authenticate(&store, "Bearer nope")
                .unwrap_err()
                .code,
            401,
            "a token that authenticates no one is never an administrator"
        );
    }

    #[test]
    fn service_account_tokens_hold_while_the_account_exists() {
        let store = Store::new();
        store
            .create(
                &Gvr::core("namespaces"),
                None,
                json!({"metadata": {"name": "ops"}}),
                &WriteOptions::default(),
            )
            .unwrap();
        let sa = Gvr::core("serviceaccounts");
        store
            .create(
                &sa,
                Some("ops"),
                json!({"metadata": {"name": "robot"}}),
                &WriteOptions::default(),
            )
            .unwrap();
        let auth = Authenticator::new();
        let token = auth.service_account_token(&store, "ops", "robot");
        let user = auth
            .authenticate(&store, &format!("Bearer {token}"))
            .unwrap();
        assert_eq!(user.name, "system:serviceaccount:ops:robot");
        assert_eq!(
            user.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:ops",
                "system:authenticated"
            ]
        );
        assert!(!user.uid.is_empty());
        store
            .delete(&sa, Some("ops"), "robot", &Default::default())
            .unwrap();
        assert_eq!(
            auth.authenticate(&store, &format!("Bearer {token}"))
                .unwrap_err()
                .code,
            401
        );
        store
            .create(
                &sa,
                Some("ops"),
                json!({"metadata": {"name": "robot"}}),
                &WriteOptions::default(),
            )
            .unwrap();
        assert_eq!(
            auth.authenticate(&store, &format!("Bearer {token}"))
                .unwrap_err()
                .code,
            401,
            "a new account of the same name has another uid"
        );
    }
}
