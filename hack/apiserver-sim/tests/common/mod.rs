//! Test harness shared by the fidelity tests: an in-process server on its own
//! 127.x.y.z address (running on its own runtime), a kubeconfig for it, and a
//! real `kubectl` with its own HOME and cache directory.

#![allow(dead_code)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use std::sync::Arc;

use apiserver_sim::{ApiServer, ApiServerHandle, Authenticator, Faults, ServerConfig, Store};

/// A loopback address no other test (in any test binary of this crate) uses.
pub fn unique_ip(binary: u8) -> IpAddr {
    static NEXT: AtomicU32 = AtomicU32::new(1);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let pid = std::process::id();
    IpAddr::V4(Ipv4Addr::new(
        127,
        100 + binary,
        (pid % 250) as u8,
        (n % 250) as u8 + 1,
    ))
}

/// A server running on its own runtime, with a temp dir holding a kubeconfig and kubectl's HOME.
pub struct TestCluster {
    pub runtime: tokio::runtime::Runtime,
    pub server: Option<ApiServerHandle>,
    pub dir: tempfile::TempDir,
    pub kubeconfig: PathBuf,
}

impl TestCluster {
    pub fn start(binary: u8) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let addr = SocketAddr::new(unique_ip(binary), 0);
        let server = runtime
            .block_on(ApiServer::start(addr))
            .expect("start server");
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, server.kubeconfig("sim")).unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        TestCluster {
            runtime,
            server: Some(server),
            dir,
            kubeconfig,
        }
    }

    /// A server in RBAC mode authenticating with `auth`. kubectl sends no
    /// credentials over plain HTTP: its kubeconfig has none (with
    /// `Unauthenticated::Admin`, kubectl is an administrator).
    pub fn start_rbac(binary: u8, auth: Authenticator) -> (Self, Arc<Authenticator>) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let addr = SocketAddr::new(unique_ip(binary), 0);
        let auth = Arc::new(auth);
        let server = runtime
            .block_on(ApiServer::start_with(
                addr,
                Store::new(),
                Arc::new(Faults::default()),
                ServerConfig::with_rbac(auth.clone()),
            ))
            .expect("start server");
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, server.kubeconfig("sim")).unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        (
            TestCluster {
                runtime,
                server: Some(server),
                dir,
                kubeconfig,
            },
            auth,
        )
    }

    pub fn store(&self) -> Store {
        self.server.as_ref().unwrap().store().clone()
    }

    pub fn url(&self) -> String {
        self.server.as_ref().unwrap().url()
    }

    /// A `kubectl` command against this cluster.
    pub fn kubectl_cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new("kubectl");
        c.env("HOME", self.dir.path().join("home"))
            .env("KUBECONFIG", &self.kubeconfig)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .arg("--cache-dir")
            .arg(self.dir.path().join("cache"))
            .args(args);
        c
    }

    /// Runs kubectl; returns (success, stdout, stderr).
    pub fn kubectl(&self, args: &[&str]) -> (bool, String, String) {
        let Output {
            status,
            stdout,
            stderr,
        } = self.kubectl_cmd(args).output().expect("run kubectl");
        (
            status.success(),
            String::from_utf8_lossy(&stdout).into_owned(),
            String::from_utf8_lossy(&stderr).into_owned(),
        )
    }

    /// Runs kubectl and fails the test unless it succeeds; returns stdout.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.kubectl(args);
        assert!(ok, "kubectl {args:?} failed:\nstdout: {out}\nstderr: {err}");
        out
    }

    pub fn fixture(&self, name: &str) -> String {
        format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
    }

    /// Writes a file in the temp dir; returns its path.
    pub fn write(&self, name: &str, content: &str) -> String {
        let p = self.dir.path().join(name);
        std::fs::write(&p, content).unwrap();
        p.to_string_lossy().into_owned()
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        if let Some(mut s) = self.server.take() {
            self.runtime.block_on(s.stop());
        }
    }
}

/// Polls `f` until it returns Some or the (generous) deadline passes.
pub fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
