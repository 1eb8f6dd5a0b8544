//! The keyfile of internal (member-to-member) authentication, as mongod
//! reads and uses it.
//!
//! - Reading (`src/mongo/db/auth/security_file.cpp`, `readSecurityFile`): the
//!   file is YAML, a scalar or a sequence of scalars, one key each; whitespace
//!   inside a key is dropped (`stripString`), any character outside the base64
//!   alphabet and `=` is refused, and a file without a key is refused (50981).
//! - Setting up (`src/mongo/db/auth/security_key.cpp`, `setUpSecurityKey`,
//!   `CredentialsGenerator::generate`): at most two keys (20258), each of 6 to
//!   1024 characters (20255); otherwise mongod does not start.
//! - Outgoing (`src/mongo/client/authenticate.cpp`, `authenticateInternalClient`):
//!   the first key, then the second only when the first fails with
//!   AuthenticationFailed.
//! - Incoming (`src/mongo/db/auth/sasl_scram_server_conversation.cpp`,
//!   `_firstStep`/`_secondStep`): `__system` is accepted with either key.

use crate::fcv::StartupError;

/// mongod's exit code when its security set-up fails (`quickExit` with
/// `ExitCode::fail` when `initializeServerSecurityGlobalState` returns false).
const SECURITY_SETUP_EXIT_CODE: i32 = 1;

/// The keys of a keyfile, in file order.
#[derive(Clone, PartialEq, Eq)]
pub struct Keyfile {
    keys: Vec<String>,
}

impl std::fmt::Debug for Keyfile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Keyfile({} key(s), redacted)", self.keys.len())
    }
}

impl Keyfile {
    /// Reads `content` as mongod reads a keyfile.
    pub fn read(content: &str) -> Result<Self, StartupError> {
        let refused = |log_id: i32, log_msg: &'static str, message: String| StartupError {
            exit_code: SECURITY_SETUP_EXIT_CODE,
            log_id,
            log_msg,
            message,
        };
        let scalars = serde_yaml::from_str::<Vec<String>>(content)
            .or_else(|_| serde_yaml::from_str::<String>(content).map(|key| vec![key]))
            .map_err(|_| {
                refused(
                    20254,
                    "Read security file failed",
                    "Only strings and sequences are supported for YAML key files".into(),
                )
            })?;
        let mut keys = Vec::new();
        for scalar in scalars {
            let key: String = scalar
                .chars()
                .filter(|c| !matches!(c, '\x09'..='\x0D' | ' '))
                .collect();
            if let Some(bad) = key
                .chars()
                .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=')))
            {
                return Err(refused(
                    20254,
                    "Read security file failed",
                    format!("invalid char in key file: {bad}"),
                ));
            }
            keys.push(key);
        }
        if keys.is_empty() {
            return Err(refused(
                50981,
                "Read security file failed",
                "Security key file does not contain any valid keys".into(),
            ));
        }
        if keys.len() > 2 {
            return Err(refused(
                20258,
                "Only two keys are supported in the security key file",
                format!("{} keys are specified", keys.len()),
            ));
        }
        if let Some(key) = keys.iter().find(|k| !(6..=1024).contains(&k.len())) {
            return Err(refused(
                20255,
                "Security key size is out range",
                format!("a key has length {}, must be between 6 and 1024", key.len()),
            ));
        }
        Ok(Keyfile { keys })
    }

    /// Whether a member with this keyfile authenticates as `__system` to a
    /// member with `peer`'s: its first key, else its second, is one of the
    /// peer's.
    pub fn authenticates_to(&self, peer: &Keyfile) -> bool {
        self.keys.iter().any(|key| peer.keys.contains(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_key_and_a_yaml_list_are_read_as_mongod_reads_them() {
        let one = Keyfile::read("  abcdef\n  ghijkl \n").unwrap();
        assert_eq!(
            one.keys,
            ["abcdefghijkl"],
            "a folded scalar, whitespace dropped"
        );
        let two = Keyfile::read("- old+key/1=\n- new key 2\n").unwrap();
        assert_eq!(two.keys, ["old+key/1=", "newkey2"]);
        let numeric = Keyfile::read("- 1234567\n- 7654321\n").unwrap();
        assert_eq!(numeric.keys, ["1234567", "7654321"]);
    }

    #[test]
    fn keyfiles_mongod_refuses_stop_it_at_start() {
        let code = |content: &str| Keyfile::read(content).unwrap_err().log_id;
        assert_eq!(code("- aaaaaa\n- bbbbbb\n- cccccc\n"), 20258);
        assert_eq!(code("short"), 20255);
        assert_eq!(code("key: value"), 20254);
        assert_eq!(code("abcdef!gh"), 20254);
        assert_eq!(code("[]"), 50981);
        assert_eq!(Keyfile::read("abc").unwrap_err().exit_code, 1);
    }

    #[test]
    fn a_member_authenticates_with_either_key_to_a_peer_holding_one_of_them() {
        let old = Keyfile::read("oldkey1").unwrap();
        let new = Keyfile::read("newkey2").unwrap();
        let both = Keyfile::read("- oldkey1\n- newkey2\n").unwrap();
        assert!(both.authenticates_to(&old) && both.authenticates_to(&new));
        assert!(old.authenticates_to(&both) && new.authenticates_to(&both));
        assert!(!old.authenticates_to(&new) && !new.authenticates_to(&old));
    }
}
