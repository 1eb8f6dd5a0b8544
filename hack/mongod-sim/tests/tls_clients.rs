//! pymongo and mongosh against a member at requireTLS (127.147.*), with
//! certificates made by openssl at test time: the CA alone connects; a wrong
//! CA, a certificate without the dialled IP and an expired certificate each
//! fail with the client's own verification error; plain is refused. Tools
//! from `MMO_PYTHON` / `MMO_MONGOSH`; without them the tests print `SKIPPED`
//! unless `MMO_REQUIRE_TOOLS=1`.

mod common;
mod tls_pki;

use common::tool;
use mongod_sim::tls::TlsMode;
use mongod_sim::{MemberSpec, Network, Volume};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;
use tls_pki::*;

/// pymongo's outcome of a ping with URI `uri`: "ok" or the error text.
const PYMONGO: &str = r#"
import sys, pymongo
try:
    c = pymongo.MongoClient(sys.argv[1], serverSelectionTimeoutMS=2000)
    c.admin.command("ping")
    print("ok")
except Exception as e:
    print(type(e).__name__ + ": " + str(e))
"#;

fn pymongo(python: &PathBuf, uri: &str) -> String {
    let out = Command::new(python)
        .args(["-c", PYMONGO, uri])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Starts one member at requireTLS (clients need no certificate) serving `key`.
async fn member(net: &std::sync::Arc<Network>, listen: &str, key: &str, ca: &str) {
    let mut spec = MemberSpec::new(listen.parse().unwrap(), "rs0");
    spec.tls = tls_open(TlsMode::RequireTls, key, ca);
    net.start_member(spec, Volume::new()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pymongo_and_mongosh_verify_the_member_as_they_verify_mongod() {
    let python = tool("MMO_PYTHON");
    let mongosh = tool("MMO_MONGOSH");
    if python.is_none() && mongosh.is_none() {
        return;
    }
    let pki = Pki::new("clients");
    let ca = pki.ca("ca");
    let wrong = pki.ca("wrong");
    let good = pki.leaf(
        "ca",
        "good",
        &["127.147.0.1"],
        "/O=MongoDB/CN=good",
        Validity::Now,
    );
    let other_ip = pki.leaf(
        "ca",
        "other-ip",
        &["127.147.0.9"],
        "/O=MongoDB/CN=other",
        Validity::Now,
    );
    let expiring = pki.leaf(
        "ca",
        "expiring",
        &["127.147.0.3"],
        "/O=MongoDB/CN=exp",
        Validity::ExpiresIn(3),
    );
    let net = Network::new();
    member(&net, "127.147.0.1:27017", &good, &ca).await;
    member(&net, "127.147.0.2:27017", &other_ip, &ca).await;
    member(&net, "127.147.0.3:27017", &expiring, &ca).await;
    // The third member's certificate expires while it runs.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let uri = |host: &str, ca: &str| {
        format!("mongodb://{host}/?directConnection=true&tls=true&tlsCAFile={ca}")
    };
    if let Some(python) = &python {
        assert_eq!(pymongo(python, &uri("127.147.0.1:27017", &ca)), "ok");
        let wrong_ca = pymongo(python, &uri("127.147.0.1:27017", &wrong));
        assert!(
            wrong_ca.contains("certificate verify failed: unable to get local issuer certificate"),
            "{wrong_ca}"
        );
        let mismatch = pymongo(python, &uri("127.147.0.2:27017", &ca));
        assert!(
            mismatch.contains("certificate verify failed: IP address mismatch"),
            "{mismatch}"
        );
        let expired = pymongo(python, &uri("127.147.0.3:27017", &ca));
        assert!(
            expired.contains("certificate verify failed: certificate has expired"),
            "{expired}"
        );
        let plain = pymongo(python, "mongodb://127.147.0.1:27017/?directConnection=true");
        assert!(plain.starts_with("ServerSelectionTimeoutError"), "{plain}");
    }
    if let Some(mongosh) = &mongosh {
        let run = |ca: &str| {
            let out = Command::new(mongosh)
                .args(["--quiet", "--tls", "--tlsCAFile", ca, "mongodb://127.147.0.1:27017/?directConnection=true&serverSelectionTimeoutMS=3000", "--eval", "db.adminCommand({ping: 1}).ok"])
                .output()
                .unwrap();
            (
                out.status.success(),
                format!(
                    "{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ),
            )
        };
        let (ok, out) = run(&ca);
        assert!(ok && out.trim().ends_with('1'), "{out}");
        let (ok, out) = run(&wrong);
        assert!(
            !ok && out.contains("unable to get local issuer certificate"),
            "{out}"
        );
    }
    net.stop_all();
}
