//! SCRAM-SHA-1 and SCRAM-SHA-256 (RFC 5802 / 7677) as mongod implements them:
//! credentials stored like `admin.system.users` (`storedKey`/`serverKey`), and the
//! server side of the saslStart/saslContinue conversation.

use base64::{engine::general_purpose::STANDARD as B64, Engine};
use bson::{doc, Document};
use hmac::{Hmac, KeyInit, Mac};
use sha1::Sha1;
use sha2::{Digest, Sha256};

/// Iteration count used for new credentials (mongod's minimum, 5000; its defaults
/// are 10000 / 15000 — lowered to keep unoptimized test builds fast).
pub const ITERATIONS: u32 = 5000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    Sha1,
    Sha256,
}

impl Mechanism {
    pub fn parse(name: &str) -> Option<Mechanism> {
        match name {
            "SCRAM-SHA-1" => Some(Mechanism::Sha1),
            "SCRAM-SHA-256" => Some(Mechanism::Sha256),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Sha1 => "SCRAM-SHA-1",
            Mechanism::Sha256 => "SCRAM-SHA-256",
        }
    }
    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        match self {
            Mechanism::Sha1 => {
                let mut m = <Hmac<Sha1> as KeyInit>::new_from_slice(key)
                    .expect("hmac accepts any key length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
            Mechanism::Sha256 => {
                let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(key)
                    .expect("hmac accepts any key length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
        }
    }
    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            Mechanism::Sha1 => Sha1::digest(data).to_vec(),
            Mechanism::Sha256 => Sha256::digest(data).to_vec(),
        }
    }
    fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            Mechanism::Sha1 => {
                let mut out = [0u8; 20];
                pbkdf2::pbkdf2_hmac::<Sha1>(password, salt, iterations, &mut out);
                out.to_vec()
            }
            Mechanism::Sha256 => {
                let mut out = [0u8; 32];
                pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out);
                out.to_vec()
            }
        }
    }
}

/// SCRAM-SHA-1 hashes the password the MONGODB-CR way first.
fn sha1_password_digest(user: &str, password: &str) -> String {
    let digest = md5::Md5::digest(format!("{user}:mongo:{password}").as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn mechanism_password(mech: Mechanism, user: &str, password: &str) -> String {
    match mech {
        Mechanism::Sha1 => sha1_password_digest(user, password),
        // SASLprep is the identity for the ASCII passwords this simulator is used with.
        Mechanism::Sha256 => password.to_string(),
    }
}

/// The `credentials` sub-document for a new user.
pub fn make_credentials(user: &str, password: &str) -> Document {
    let mut creds = Document::new();
    for mech in [Mechanism::Sha1, Mechanism::Sha256] {
        let salt: [u8; 16] = rand::random();
        let salted = mech.salted_password(
            mechanism_password(mech, user, password).as_bytes(),
            &salt,
            ITERATIONS,
        );
        let client_key = mech.hmac(&salted, b"Client Key");
        let stored_key = mech.hash(&client_key);
        let server_key = mech.hmac(&salted, b"Server Key");
        creds.insert(
            mech.name(),
            doc! {
                "iterationCount": ITERATIONS as i32,
                "salt": B64.encode(salt),
                "storedKey": B64.encode(stored_key),
                "serverKey": B64.encode(server_key),
            },
        );
    }
    creds
}

/// An in-progress SCRAM conversation on one connection.
#[derive(Debug, Clone)]
pub struct Conversation {
    pub mechanism: Mechanism,
    pub db: String,
    pub user: String,
    client_first_bare: String,
    server_first: String,
    nonce: String,
    stored_key: Vec<u8>,
    server_key: Vec<u8>,
    pub finished: bool,
}

fn attrs(msg: &str) -> impl Iterator<Item = (&str, &str)> {
    msg.split(',').filter_map(|kv| kv.split_once('='))
}

/// Starts a conversation from the client-first message. `user_doc` is the stored
/// user (None → authentication fails, after the same round trip as mongod).
pub fn start(
    mechanism: Mechanism,
    db: &str,
    payload: &[u8],
    lookup: impl Fn(&str) -> Option<Document>,
) -> Result<(Conversation, String), String> {
    let msg = std::str::from_utf8(payload).map_err(|_| "payload is not utf-8".to_string())?;
    let bare = msg
        .strip_prefix("n,,")
        .or_else(|| msg.strip_prefix("y,,"))
        .ok_or("unsupported GS2 header")?;
    let mut user = None;
    let mut client_nonce = None;
    for (k, v) in attrs(bare) {
        match k {
            "n" => user = Some(v.replace("=2C", ",").replace("=3D", "=")),
            "r" => client_nonce = Some(v.to_string()),
            _ => {}
        }
    }
    let user = user.ok_or("missing user name")?;
    let client_nonce = client_nonce.ok_or("missing nonce")?;
    let user_doc = lookup(&user).ok_or("user not found")?;
    let cred = user_doc
        .get_document("credentials")
        .ok()
        .and_then(|c| c.get_document(mechanism.name()).ok())
        .ok_or("user has no credentials for this mechanism")?;
    let decode = |k: &str| {
        cred.get_str(k)
            .ok()
            .and_then(|s| B64.decode(s).ok())
            .ok_or("bad stored credentials")
    };
    let salt = cred
        .get_str("salt")
        .map_err(|_| "bad stored credentials")?
        .to_string();
    let iterations = cred
        .get_i32("iterationCount")
        .map_err(|_| "bad stored credentials")?;
    let server_nonce: [u8; 24] = rand::random();
    let nonce = format!("{client_nonce}{}", B64.encode(server_nonce));
    let server_first = format!("r={nonce},s={salt},i={iterations}");
    let conv = Conversation {
        mechanism,
        db: db.to_string(),
        user,
        client_first_bare: bare.to_string(),
        server_first: server_first.clone(),
        nonce,
        stored_key: decode("storedKey")?,
        server_key: decode("serverKey")?,
        finished: false,
    };
    Ok((conv, server_first))
}

impl Conversation {
    /// Verifies the client-final message and returns the server-final message.
    pub fn finish(&mut self, payload: &[u8]) -> Result<String, String> {
        let msg = std::str::from_utf8(payload).map_err(|_| "payload is not utf-8".to_string())?;
        let (without_proof, proof) = msg.rsplit_once(",p=").ok_or("missing proof")?;
        let nonce = attrs(without_proof)
            .find(|(k, _)| *k == "r")
            .map(|(_, v)| v)
            .ok_or("missing nonce")?;
        if nonce != self.nonce {
            return Err("nonce mismatch".into());
        }
        let proof = B64
            .decode(proof)
            .map_err(|_| "bad proof encoding".to_string())?;
        let auth_message = format!(
            "{},{},{}",
            self.client_first_bare, self.server_first, without_proof
        );
        let client_signature = self
            .mechanism
            .hmac(&self.stored_key, auth_message.as_bytes());
        if proof.len() != client_signature.len() {
            return Err("bad proof length".into());
        }
        let client_key: Vec<u8> = proof
            .iter()
            .zip(&client_signature)
            .map(|(a, b)| a ^ b)
            .collect();
        if self.mechanism.hash(&client_key) != self.stored_key {
            return Err("proof mismatch".into());
        }
        let server_signature = self
            .mechanism
            .hmac(&self.server_key, auth_message.as_bytes());
        self.finished = true;
        Ok(format!("v={}", B64.encode(server_signature)))
    }
}
