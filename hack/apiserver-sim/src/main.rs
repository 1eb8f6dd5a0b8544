//! `apiserver-sim --listen 127.0.0.1:PORT [--kubeconfig PATH] [--context NAME]
//! [--authorization-mode AlwaysAllow|RBAC] [--token-auth-file PATH] [--anonymous-auth=false]
//! [--insecure-admin]`:
//! runs one simulated API server until interrupted, printing a ready line.
//!
//! With `--authorization-mode RBAC` requests are authenticated by bearer token
//! (tokens of `--token-auth-file`, kube-apiserver's CSV format) and authorized
//! by the stored RBAC objects; the kubeconfig written then carries a new
//! `system:masters` token (user `kubernetes-admin`) for kube-rs clients.
//! kubectl sends no credentials over plain HTTP: with `--insecure-admin`,
//! requests without a token are `system:unsecured` in `system:masters` (as on
//! kube-apiserver's former insecure port), and `kubectl --as=…` impersonates.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use apiserver_sim::auth::Unauthenticated;
use apiserver_sim::{ApiServer, Authenticator, Faults, ServerConfig, Store};

const USAGE: &str =
    "usage: apiserver-sim --listen 127.0.0.1:PORT [--kubeconfig PATH] [--context NAME] \
[--authorization-mode AlwaysAllow|RBAC] [--token-auth-file PATH] [--anonymous-auth=false] [--insecure-admin]";

#[tokio::main]
async fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let mut listen: Option<SocketAddr> = None;
    let mut kubeconfig: Option<String> = None;
    let mut context = "apiserver-sim".to_string();
    let mut rbac = false;
    let mut token_file: Option<String> = None;
    let mut unauthenticated = Unauthenticated::Anonymous;
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
            "--authorization-mode" => {
                rbac = match args.next().as_deref() {
                    Some("AlwaysAllow") => false,
                    Some("RBAC") => true,
                    other => bail!("--authorization-mode: AlwaysAllow or RBAC, not {other:?}"),
                }
            }
            "--token-auth-file" => {
                token_file = Some(args.next().context("--token-auth-file needs a path")?)
            }
            "--anonymous-auth=false" => unauthenticated = Unauthenticated::Refused,
            "--anonymous-auth=true" => unauthenticated = Unauthenticated::Anonymous,
            "--insecure-admin" => unauthenticated = Unauthenticated::Admin,
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            other => bail!("unknown argument: {other}\n{USAGE}"),
        }
    }
    if !rbac && (token_file.is_some() || unauthenticated != Unauthenticated::Anonymous) {
        bail!("--token-auth-file, --anonymous-auth and --insecure-admin need --authorization-mode RBAC");
    }
    let listen = listen.unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0)));
    let auth = if rbac {
        let auth = match &token_file {
            Some(path) => Authenticator::from_token_file(
                &std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?,
            )
            .map_err(anyhow::Error::msg)?,
            None => Authenticator::new(),
        };
        Some(Arc::new(auth.unauthenticated(unauthenticated)))
    } else {
        None
    };
    let config = match &auth {
        Some(auth) => ServerConfig::with_rbac(auth.clone()),
        None => ServerConfig::default(),
    };
    let mut server =
        ApiServer::start_with(listen, Store::new(), Arc::new(Faults::default()), config)
            .await
            .with_context(|| format!("binding {listen}"))?;
    if let Some(path) = &kubeconfig {
        let text = match &auth {
            Some(auth) => {
                server.kubeconfig_with_token(&context, &auth.admin_token("kubernetes-admin"))
            }
            None => server.kubeconfig(&context),
        };
        std::fs::write(path, text).with_context(|| format!("writing {path}"))?;
    }
    println!("apiserver-sim ready: {}", server.url());
    tokio::signal::ctrl_c().await?;
    server.stop().await;
    Ok(())
}
