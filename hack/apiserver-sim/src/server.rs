//! Running the API server: binding a loopback address, serving HTTP/1.1
//! connections, and the handle tests and the lab use (URL, store, faults,
//! stop and restart keeping the store).

use std::net::SocketAddr;
use std::sync::Arc;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::faults::Faults;
use crate::http::{handle, ServerConfig, ServerState};
use crate::kubeconfig;
use crate::rbac;
use crate::store::Store;

/// Entry point: starts API servers.
pub struct ApiServer;

impl ApiServer {
    /// Starts a server with a fresh store on `addr` (port 0 picks a free port).
    pub async fn start(addr: SocketAddr) -> std::io::Result<ApiServerHandle> {
        Self::start_with(
            addr,
            Store::new(),
            Arc::new(Faults::default()),
            ServerConfig::default(),
        )
        .await
    }

    /// Starts a server on `addr` serving an existing store (e.g. after a restart).
    pub async fn start_with(
        addr: SocketAddr,
        store: Store,
        faults: Arc<Faults>,
        config: ServerConfig,
    ) -> std::io::Result<ApiServerHandle> {
        if config.auth.is_some() {
            rbac::ensure_bootstrap_policy(&store);
        }
        let listener = TcpListener::bind(addr).await?;
        let local = listener.local_addr()?;
        let state = Arc::new(ServerState {
            store: store.clone(),
            faults: faults.clone(),
            config: config.clone(),
            address: local.to_string(),
        });
        let (stop_tx, mut stop_rx) = watch::channel(false);
        let task = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            loop {
                tokio::select! {
                    _ = stop_rx.changed() => break,
                    accepted = listener.accept() => {
                        let Ok((stream, _)) = accepted else { continue };
                        let state = state.clone();
                        connections.spawn(async move {
                            let service = service_fn(move |req| {
                                let state = state.clone();
                                async move { Ok::<_, std::convert::Infallible>(handle(state, req).await) }
                            });
                            let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
                        });
                    }
                    Some(_) = connections.join_next(), if !connections.is_empty() => {}
                }
            }
            connections.abort_all();
            while connections.join_next().await.is_some() {}
        });
        tracing::info!(address = %local, "apiserver-sim listening");
        Ok(ApiServerHandle {
            addr: local,
            store,
            faults,
            config,
            stop: Some(stop_tx),
            task: Some(task),
        })
    }
}

/// A running (or stopped) server.
pub struct ApiServerHandle {
    addr: SocketAddr,
    store: Store,
    faults: Arc<Faults>,
    config: ServerConfig,
    stop: Option<watch::Sender<bool>>,
    task: Option<JoinHandle<()>>,
}

impl ApiServerHandle {
    /// `http://host:port`
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The in-process store (same code path as HTTP requests).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Fault switches (injected errors, dropping watches).
    pub fn faults(&self) -> &Arc<Faults> {
        &self.faults
    }

    /// A kubeconfig with one context named `name` pointing at this server
    /// (no credentials: anonymous when the server authenticates).
    pub fn kubeconfig(&self, name: &str) -> String {
        kubeconfig::render(&[(name.to_string(), self.url())], name)
    }

    /// A kubeconfig with one context named `name` whose user sends `token`.
    pub fn kubeconfig_with_token(&self, name: &str, token: &str) -> String {
        kubeconfig::render_with_tokens(
            &[(name.to_string(), self.url(), Some(token.to_string()))],
            name,
        )
    }

    /// The requests served so far, by user, verb and resource (RBAC mode).
    pub fn requests(&self) -> &Arc<crate::requests::RequestCounts> {
        &self.config.requests
    }

    /// The token authenticator, when the server authenticates (RBAC mode).
    pub fn auth(&self) -> Option<&Arc<crate::auth::Authenticator>> {
        self.config.auth.as_ref()
    }

    /// Stops listening and closes every connection (open watches end abruptly). The store is kept.
    pub async fn stop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(true);
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }

    /// Whether the server is serving.
    pub fn is_running(&self) -> bool {
        self.task.is_some()
    }

    /// Starts serving again on the same address with the same store and faults.
    pub async fn restart(&mut self) -> std::io::Result<()> {
        self.stop().await;
        let fresh = ApiServer::start_with(
            self.addr,
            self.store.clone(),
            self.faults.clone(),
            self.config.clone(),
        )
        .await?;
        *self = fresh;
        Ok(())
    }
}

impl Drop for ApiServerHandle {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(true);
        }
    }
}
