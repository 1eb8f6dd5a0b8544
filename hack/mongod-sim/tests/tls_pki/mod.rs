//! Certificates made by the `openssl` CLI at test time (no private key is
//! checked in): CAs, and leaves carrying the cert and key in one PEM file as
//! `--tlsCertificateKeyFile` takes them. Also the members' TLS options.
#![allow(dead_code)]

use mongod_sim::tls::{ClusterAuthMode, TlsMode, TlsSpec};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// A scratch directory of certificates, removed when dropped.
pub struct Pki {
    pub dir: PathBuf,
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// When a leaf is valid.
pub enum Validity {
    /// From yesterday for 30 days.
    Now,
    /// Until `secs` seconds from now (it expires while the test runs).
    ExpiresIn(u64),
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the openssl CLI");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `YYYYMMDDHHMMSSZ` of now + `offset` seconds.
fn openssl_time(offset: i64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
        + offset;
    let (days, secs) = (now.div_euclid(86_400), now.rem_euclid(86_400));
    // civil_from_days (Howard Hinnant).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}{:02}{:02}{:02}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

impl Pki {
    pub fn new(name: &str) -> Pki {
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "mongod-sim-tls-{name}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Pki { dir }
    }

    pub fn path(&self, file: &str) -> String {
        self.dir.join(file).to_string_lossy().into_owned()
    }

    /// A self-signed CA `name` (`name.pem`, `name.key`).
    pub fn ca(&self, name: &str) -> String {
        openssl(
            &self.dir,
            &[
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-keyout",
                &format!("{name}.key"),
                "-out",
                &format!("{name}.pem"),
                "-days",
                "30",
                "-subj",
                &format!("/CN={name}"),
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
            ],
        );
        std::fs::write(
            self.dir.join(format!("{name}.cnf")),
            "[ca]\ndefault_ca = d\n[d]\ndatabase = {name}.index\nnew_certs_dir = .\nserial = {name}.serial\ndefault_md = sha256\npolicy = p\nunique_subject = no\n[p]\ncommonName = supplied\n"
                .replace("{name}", name),
        )
        .unwrap();
        std::fs::write(self.dir.join(format!("{name}.index")), "").unwrap();
        std::fs::write(self.dir.join(format!("{name}.serial")), "01\n").unwrap();
        self.path(&format!("{name}.pem"))
    }

    /// A leaf `file` signed by `ca`, for the IP addresses `ips`, with
    /// subject `subject` (e.g. `/O=MongoDB/OU=rs0/CN=m1`): `file` holds the
    /// certificate then the key. Returns its path.
    pub fn leaf(
        &self,
        ca: &str,
        file: &str,
        ips: &[&str],
        subject: &str,
        validity: Validity,
    ) -> String {
        let sans: Vec<String> = ips.iter().map(|ip| format!("IP:{ip}")).collect();
        std::fs::write(
            self.dir.join(format!("{file}.ext")),
            format!(
                "subjectAltName={}\nextendedKeyUsage=serverAuth,clientAuth\nkeyUsage=digitalSignature\n",
                sans.join(",")
            ),
        )
        .unwrap();
        openssl(
            &self.dir,
            &[
                "req",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-keyout",
                &format!("{file}.key"),
                "-out",
                &format!("{file}.csr"),
                "-subj",
                subject,
            ],
        );
        let (start, end) = match validity {
            Validity::Now => (openssl_time(-86_400), openssl_time(30 * 86_400)),
            Validity::ExpiresIn(secs) => (openssl_time(-86_400), openssl_time(secs as i64)),
        };
        openssl(
            &self.dir,
            &[
                "ca",
                "-batch",
                "-config",
                &format!("{ca}.cnf"),
                "-cert",
                &format!("{ca}.pem"),
                "-keyfile",
                &format!("{ca}.key"),
                "-in",
                &format!("{file}.csr"),
                "-out",
                &format!("{file}.crt"),
                "-startdate",
                &start,
                "-enddate",
                &end,
                "-extfile",
                &format!("{file}.ext"),
                "-notext",
                "-preserveDN",
            ],
        );
        let cert = std::fs::read(self.dir.join(format!("{file}.crt"))).unwrap();
        let key = std::fs::read(self.dir.join(format!("{file}.key"))).unwrap();
        std::fs::write(self.dir.join(format!("{file}.pem")), [cert, key].concat()).unwrap();
        self.path(&format!("{file}.pem"))
    }
}

/// The TLS options of a member at `mode` serving `key_file`, trusting `ca`.
pub fn tls(mode: TlsMode, key_file: &str, ca: &str) -> TlsSpec {
    TlsSpec {
        mode,
        certificate_key_file: Some(key_file.into()),
        ca_file: Some(ca.into()),
        ..TlsSpec::default()
    }
}

/// [`tls`] that also lets clients in without a certificate.
pub fn tls_open(mode: TlsMode, key_file: &str, ca: &str) -> TlsSpec {
    TlsSpec {
        allow_connections_without_certificates: true,
        ..tls(mode, key_file, ca)
    }
}

/// [`tls`] with `clusterAuthMode`.
pub fn tls_x509(mode: TlsMode, key_file: &str, ca: &str, auth: ClusterAuthMode) -> TlsSpec {
    TlsSpec {
        cluster_auth_mode: Some(auth),
        ..tls(mode, key_file, ca)
    }
}
