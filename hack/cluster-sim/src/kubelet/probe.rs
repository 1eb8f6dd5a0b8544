//! Container probes (readiness, liveness, startup) as the kubelet runs them:
//! `tcpSocket` connects, `httpGet` sends a GET and accepts a 2xx/3xx status,
//! `exec` and `grpc` are not executed and count as succeeding (the simulator
//! runs no processes). Timing fields follow the documented defaults.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// A probe's schedule and its running tally of results.
#[derive(Debug, Clone)]
pub struct ProbeState {
    probe: Probe,
    /// When the probe runs next.
    pub next_run: Instant,
    successes: i32,
    failures: i32,
}

/// What a probe result changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeVerdict {
    /// The success threshold has been reached.
    Succeeded,
    /// The failure threshold has been reached; the message says why.
    Failed(String),
    /// Neither threshold reached yet.
    Undecided,
}

impl ProbeState {
    /// Starts the schedule of `probe` for a container that started now.
    pub fn new(probe: Probe) -> Self {
        let delay = seconds(probe.initial_delay_seconds, 0);
        ProbeState {
            probe,
            next_run: Instant::now() + delay,
            successes: 0,
            failures: 0,
        }
    }

    /// Runs the probe against the container at `pod_ip` and updates the tally.
    pub async fn run(&mut self, pod_ip: Ipv4Addr, container: &Container) -> ProbeVerdict {
        self.next_run = Instant::now() + seconds(self.probe.period_seconds, 10);
        let timeout = seconds(self.probe.timeout_seconds, 1);
        match run_probe(&self.probe, pod_ip, container, timeout).await {
            Ok(()) => {
                self.failures = 0;
                self.successes += 1;
                if self.successes >= self.probe.success_threshold.unwrap_or(1).max(1) {
                    return ProbeVerdict::Succeeded;
                }
            }
            Err(message) => {
                self.successes = 0;
                self.failures += 1;
                if self.failures >= self.probe.failure_threshold.unwrap_or(3).max(1) {
                    return ProbeVerdict::Failed(message);
                }
            }
        }
        ProbeVerdict::Undecided
    }
}

fn seconds(value: Option<i32>, default: u64) -> Duration {
    Duration::from_secs(value.and_then(|v| u64::try_from(v).ok()).unwrap_or(default))
}

/// The port a probe names: a number, or the name of one of the container's ports.
fn resolve_port(port: &IntOrString, container: &Container) -> Result<u16, String> {
    match port {
        IntOrString::Int(n) => u16::try_from(*n).map_err(|_| format!("invalid port {n}")),
        IntOrString::String(name) => container
            .ports
            .iter()
            .flatten()
            .find(|p| p.name.as_deref() == Some(name.as_str()))
            .and_then(|p| u16::try_from(p.container_port).ok())
            .ok_or_else(|| format!("port {name:?} not found in container")),
    }
}

fn probe_host(host: Option<&str>, pod_ip: Ipv4Addr) -> IpAddr {
    host.and_then(|h| h.parse().ok())
        .unwrap_or(IpAddr::V4(pod_ip))
}

async fn run_probe(
    probe: &Probe,
    pod_ip: Ipv4Addr,
    container: &Container,
    timeout: Duration,
) -> Result<(), String> {
    if let Some(tcp) = &probe.tcp_socket {
        let address = SocketAddr::new(
            probe_host(tcp.host.as_deref(), pod_ip),
            resolve_port(&tcp.port, container)?,
        );
        return match tokio::time::timeout(timeout, TcpStream::connect(address)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(error)) => Err(format!("dial tcp {address}: connect: {error}")),
            Err(_) => Err(format!("dial tcp {address}: i/o timeout")),
        };
    }
    if let Some(http) = &probe.http_get {
        let port = http.port.clone();
        let address = SocketAddr::new(
            probe_host(http.host.as_deref(), pod_ip),
            resolve_port(&port, container)?,
        );
        let path = http.path.clone().unwrap_or_else(|| "/".into());
        return match tokio::time::timeout(timeout, http_get(address, &path)).await {
            Ok(Ok(status)) if (200..400).contains(&status) => Ok(()),
            Ok(Ok(status)) => Err(format!("HTTP probe failed with statuscode: {status}")),
            Ok(Err(error)) => Err(format!("Get \"http://{address}{path}\": {error}")),
            Err(_) => Err(format!(
                "Get \"http://{address}{path}\": context deadline exceeded"
            )),
        };
    }
    // exec and grpc probes are not run: the simulator has no processes to exec into.
    Ok(())
}

async fn http_get(address: SocketAddr, path: &str) -> std::io::Result<u16> {
    let mut stream = TcpStream::connect(address).await?;
    let request = format!("GET {path} HTTP/1.0\r\nHost: {address}\r\nUser-Agent: kube-probe/1.33\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut response = Vec::new();
    let mut buffer = [0u8; 256];
    while !response.contains(&b'\n') && response.len() < 4096 {
        let n = stream.read(&mut buffer).await?;
        if n == 0 {
            break;
        }
        response.extend_from_slice(&buffer[..n]);
    }
    let line = String::from_utf8_lossy(&response);
    line.split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidData, "malformed HTTP response")
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ContainerPort, ExecAction, TCPSocketAction};
    use tokio::net::TcpListener;

    fn container() -> Container {
        Container {
            name: "c".into(),
            ports: Some(vec![ContainerPort {
                name: Some("mongo".into()),
                container_port: 27017,
                ..Default::default()
            }]),
            ..Default::default()
        }
    }

    #[test]
    fn named_probe_ports_resolve_through_container_ports() {
        assert_eq!(
            resolve_port(&IntOrString::String("mongo".into()), &container()),
            Ok(27017)
        );
        assert_eq!(resolve_port(&IntOrString::Int(80), &container()), Ok(80));
        assert!(resolve_port(&IntOrString::String("nope".into()), &container()).is_err());
        assert!(resolve_port(&IntOrString::Int(70000), &container()).is_err());
    }

    #[tokio::test]
    async fn tcp_probes_succeed_only_while_something_listens() {
        let ip = Ipv4Addr::new(127, 31, 0, 1);
        let listener = TcpListener::bind((ip, 0)).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let probe = Probe {
            tcp_socket: Some(TCPSocketAction {
                host: None,
                port: IntOrString::Int(i32::from(port)),
            }),
            failure_threshold: Some(1),
            ..Default::default()
        };
        let mut state = ProbeState::new(probe);
        assert_eq!(state.run(ip, &container()).await, ProbeVerdict::Succeeded);
        drop(listener);
        assert!(matches!(
            state.run(ip, &container()).await,
            ProbeVerdict::Failed(_)
        ));
    }

    #[tokio::test]
    async fn exec_probes_are_treated_as_succeeding() {
        let probe = Probe {
            exec: Some(ExecAction {
                command: Some(vec!["false".into()]),
            }),
            ..Default::default()
        };
        let mut state = ProbeState::new(probe);
        assert_eq!(
            state.run(Ipv4Addr::new(127, 31, 0, 2), &container()).await,
            ProbeVerdict::Succeeded
        );
    }
}
