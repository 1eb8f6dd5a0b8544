//! Test equipment: certificates made by the `openssl` CLI at test time (no
//! private key is checked in), for the tests of mongod-sim, the lab and the
//! operator. CAs, intermediates, and leaves whose cert and key sit in one PEM
//! file as `--tlsCertificateKeyFile` takes them, or apart as a cert-manager
//! Secret holds them.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// A scratch directory of certificates, removed when dropped.
pub struct Pki {
    pub dir: PathBuf,
    /// The `extendedKeyUsage` of the leaves made next (openssl's syntax):
    /// `serverAuth,clientAuth` unless a test sets another.
    pub extended_key_usage: &'static str,
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// When a certificate is valid.
pub enum Validity {
    /// From yesterday for 30 days.
    Now,
    /// From yesterday until `secs` seconds from now (it expires while the
    /// test runs).
    ExpiresIn(u64),
    /// From tomorrow for 30 days.
    NotYetValid,
    /// From 30 days ago until yesterday.
    Expired,
}

impl Validity {
    /// openssl's start and end dates.
    fn dates(&self) -> (String, String) {
        const DAY: i64 = 86_400;
        let (start, end) = match self {
            Validity::Now => (-DAY, 30 * DAY),
            Validity::ExpiresIn(secs) => (-DAY, *secs as i64),
            Validity::NotYetValid => (DAY, 31 * DAY),
            Validity::Expired => (-30 * DAY, -DAY),
        };
        (openssl_time(start), openssl_time(end))
    }
}

/// A leaf's files as a cert-manager Secret holds them.
pub struct LeafFiles {
    /// `tls.crt`: the certificate, PEM.
    pub certificate: Vec<u8>,
    /// `tls.key`: its private key, PEM.
    pub key: Vec<u8>,
    /// `ca.crt`: the CA that signed it, PEM.
    pub ca: Vec<u8>,
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
        Pki {
            dir,
            extended_key_usage: "serverAuth,clientAuth",
        }
    }

    pub fn path(&self, file: &str) -> String {
        self.dir.join(file).to_string_lossy().into_owned()
    }

    fn read(&self, file: &str) -> Vec<u8> {
        std::fs::read(self.dir.join(file)).unwrap()
    }

    /// A self-signed CA `name` (`name.pem`, `name.key`). Returns the path
    /// of its certificate.
    pub fn ca(&self, name: &str) -> String {
        self.request(
            name,
            &[
                "-x509",
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
        self.signer(name);
        self.path(&format!("{name}.pem"))
    }

    /// An intermediate CA `name` signed by `ca` (`name.pem` holds its
    /// certificate alone, `name.key` its key), which then signs leaves as
    /// a CA does. Returns the path of its certificate.
    pub fn intermediate(&self, ca: &str, name: &str) -> String {
        self.issue(
            ca,
            name,
            &format!("/CN={name}"),
            "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n",
            Validity::Now,
        );
        std::fs::write(
            self.dir.join(format!("{name}.pem")),
            self.read(&format!("{name}.crt")),
        )
        .unwrap();
        self.signer(name);
        self.path(&format!("{name}.pem"))
    }

    /// `openssl req` with a new P-256 key `name.key`, then `rest`.
    fn request(&self, name: &str, rest: &[&str]) {
        let key = format!("{name}.key");
        let mut args = vec![
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &key,
        ];
        args.extend_from_slice(rest);
        openssl(&self.dir, &args);
    }

    /// The `openssl ca` configuration that lets CA `name` sign.
    fn signer(&self, name: &str) {
        std::fs::write(
            self.dir.join(format!("{name}.cnf")),
            "[ca]\ndefault_ca = d\n[d]\ndatabase = {name}.index\nnew_certs_dir = .\nserial = {name}.serial\ndefault_md = sha256\npolicy = p\nunique_subject = no\n[p]\ncommonName = supplied\n"
                .replace("{name}", name),
        )
        .unwrap();
        std::fs::write(self.dir.join(format!("{name}.index")), "").unwrap();
        std::fs::write(self.dir.join(format!("{name}.serial")), "01\n").unwrap();
    }

    /// A new key `file.key` and its certificate `file.crt`, for `subject`,
    /// signed by `ca` with the extensions `ext` (an openssl extfile).
    fn issue(&self, ca: &str, file: &str, subject: &str, ext: &str, validity: Validity) {
        std::fs::write(self.dir.join(format!("{file}.ext")), ext).unwrap();
        self.request(file, &["-out", &format!("{file}.csr"), "-subj", subject]);
        let (start, end) = validity.dates();
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
    }

    /// A leaf `file` signed by `ca`, for the IP addresses `ips`, with
    /// subject `subject` (e.g. `/O=MongoDB/OU=rs0/CN=m1`): `file.pem` holds
    /// the certificate then the key. Returns its path.
    pub fn leaf(
        &self,
        ca: &str,
        file: &str,
        ips: &[&str],
        subject: &str,
        validity: Validity,
    ) -> String {
        let sans: Vec<String> = ips.iter().map(|ip| format!("IP:{ip}")).collect();
        let ext = format!(
            "subjectAltName={}\nextendedKeyUsage={}\nkeyUsage=digitalSignature\n",
            sans.join(","),
            self.extended_key_usage
        );
        self.issue(ca, file, subject, &ext, validity);
        let pem = [
            self.read(&format!("{file}.crt")),
            self.read(&format!("{file}.key")),
        ]
        .concat();
        std::fs::write(self.dir.join(format!("{file}.pem")), pem).unwrap();
        self.path(&format!("{file}.pem"))
    }

    /// [`Pki::leaf`], as the three files of a cert-manager Secret.
    pub fn leaf_files(
        &self,
        ca: &str,
        file: &str,
        ips: &[&str],
        subject: &str,
        validity: Validity,
    ) -> LeafFiles {
        self.leaf(ca, file, ips, subject, validity);
        LeafFiles {
            certificate: self.read(&format!("{file}.crt")),
            key: self.read(&format!("{file}.key")),
            ca: self.read(&format!("{ca}.pem")),
        }
    }
}
