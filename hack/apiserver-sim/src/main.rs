//! `apiserver-sim --listen 127.0.0.1:PORT [--kubeconfig PATH] [--context NAME]`:
//! runs one simulated API server until interrupted, printing a ready line.

use std::net::SocketAddr;

use anyhow::{bail, Context, Result};
use apiserver_sim::ApiServer;

#[tokio::main]
async fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let mut listen: Option<SocketAddr> = None;
    let mut kubeconfig: Option<String> = None;
    let mut context = "apiserver-sim".to_string();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--listen" => {
                listen = Some(
                    args.next()
                        .context("--listen needs an address")?
                        .parse()
                        .context("--listen: bad address")?,
                )
            }
            "--kubeconfig" => kubeconfig = Some(args.next().context("--kubeconfig needs a path")?),
            "--context" => context = args.next().context("--context needs a name")?,
            "-h" | "--help" => {
                println!("usage: apiserver-sim --listen 127.0.0.1:PORT [--kubeconfig PATH] [--context NAME]");
                return Ok(());
            }
            other => bail!("unknown argument: {other}"),
        }
    }
    let listen = listen.unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0)));
    let mut server = ApiServer::start(listen)
        .await
        .with_context(|| format!("binding {listen}"))?;
    if let Some(path) = &kubeconfig {
        std::fs::write(path, server.kubeconfig(&context))
            .with_context(|| format!("writing {path}"))?;
    }
    println!("apiserver-sim ready: {}", server.url());
    tokio::signal::ctrl_c().await?;
    server.stop().await;
    Ok(())
}
