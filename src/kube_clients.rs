//! The operator's two Kubernetes clients. Watches stay quiet for minutes
//! between events (kube-runtime's watcher bounds them by their own idle
//! timeout), so their client has no read timeout; every other request — a
//! pass's reads and writes, its Events, the leader Lease — goes through a
//! client that gives up on an API server that does not answer. Without one,
//! a request on a connection a load balancer dropped silently waits for
//! ever: the instance's passes stop, and a leader renewing its Lease never
//! learns it lost it.

use std::time::Duration;

use kube::{Client, Config};

/// How long a request may go without a byte of its answer before it fails.
/// The operator's requests read or write one object, answered in
/// milliseconds by a healthy API server (which itself gives up after its
/// `--request-timeout`, a minute by default); client-go checks an idle
/// connection after the same 30 seconds.
pub const REQUEST_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// The clients for watches and for requests, to one API server.
#[derive(Clone)]
pub struct KubeClients {
    /// For watches (and the initial lists their reflectors make).
    pub watches: Client,
    /// For every request that expects an answer.
    pub requests: Client,
}

impl KubeClients {
    /// The clients for the API server the environment names (in-cluster
    /// service account, else the kubeconfig).
    pub async fn infer() -> Result<Self, kube::Error> {
        let config = Config::infer().await.map_err(kube::Error::InferConfig)?;
        Self::from_config(config)
    }

    /// The clients for `config`.
    pub fn from_config(config: Config) -> Result<Self, kube::Error> {
        Self::with_read_timeout(config, REQUEST_READ_TIMEOUT)
    }

    fn with_read_timeout(config: Config, read_timeout: Duration) -> Result<Self, kube::Error> {
        let mut requests = config.clone();
        requests.read_timeout = Some(read_timeout);
        Ok(KubeClients {
            watches: Client::try_from(config)?,
            requests: Client::try_from(requests)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::Api;
    use std::time::Duration;

    #[tokio::test]
    async fn a_request_the_api_server_never_answers_fails_instead_of_waiting_for_ever() {
        // An API server reached through a connection that stopped carrying
        // packets: the request is sent and nothing ever comes back.
        let host = format!("127.95.{}.1", std::process::id() % 250);
        let listener = tokio::net::TcpListener::bind((host.as_str(), 0))
            .await
            .unwrap();
        let address = listener.local_addr().unwrap();
        let black_hole = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((connection, _)) = listener.accept().await {
                held.push(connection);
            }
        });
        let config = Config::new(format!("http://{address}").parse().unwrap());
        let clients = KubeClients::with_read_timeout(config, Duration::from_secs(2)).unwrap();
        let config_maps: Api<ConfigMap> = Api::namespaced(clients.requests, "default");
        let started = std::time::Instant::now();
        let answer =
            tokio::time::timeout(Duration::from_secs(60), config_maps.get_opt("anything")).await;
        assert!(
            matches!(answer, Ok(Err(_))) && started.elapsed() < Duration::from_secs(10),
            "after {:?} the request is still waiting ({})",
            started.elapsed(),
            answer.is_err()
        );
        black_hole.abort();
    }
}
