//! `mongod-sim` binary: runs several replica-set members in one process and offers
//! a small control interface (HTTP on `--control`, and commands on stdin) to stop,
//! start, cut, heal and lag members and to dump the state as JSON.

use anyhow::{bail, Context, Result};
use mongod_sim::{MemberSpec, Network, RootUser, ServerVersion, Volume};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

const USAGE: &str = "usage: mongod-sim --member ADDR [--member ADDR ...] [--repl-set NAME] \
[--root-user NAME --root-password-file FILE] [--keyfile FILE] [--lag-ms N] [--control ADDR] \
[--server-version X.Y[.Z]] [--oplog-size-bytes N] [--disk-size QUANTITY] [--initial-sync-ms N]
  The root user/password may also come from MONGO_INITDB_ROOT_USERNAME / MONGO_INITDB_ROOT_PASSWORD.
  --server-version: the mongod version every member runs (default 7.0.14).
  --oplog-size-bytes: the capped oplog's size in bytes, as --oplogSize gives it in MB
    (default: 5 % of the free disk, at least 990 MB; never truncated without --disk-size).
  --disk-size: each member's volume, a Kubernetes quantity such as 1Gi (default: never full).
  --initial-sync-ms: how long an initial sync takes (default 0).
  Control commands (stdin lines, or HTTP GET/POST /<command>/<args...>):
    stop HOST | start HOST | cut HOST | heal HOST | heal-all | lag HOST MS | state
    | version HOST X.Y[.Z]   (the version HOST runs from its next start)
    | route ALIAS HOST | unroute ALIAS   (ALIAS, e.g. VIP:nodePort, reaches HOST or nothing)
    | site HOST SITE | hairpin SITE on|off   (off: SITE's members cannot reach their own ALIAS)
    | wipe HOST              (a stopped member's data is deleted: it starts empty)
    | oplog-size BYTES|none  (every member's oplog size in bytes, from now on)
    | initial-sync-ms MS     (how long every initial sync that starts takes)
    | commands HOST          (JSON: how many of each command HOST received, by client appName)";

struct Options {
    members: Vec<SocketAddr>,
    repl_set: String,
    root_user: Option<RootUser>,
    keyfile: Option<String>,
    lag: Duration,
    control: Option<SocketAddr>,
    version: ServerVersion,
    oplog_size_bytes: Option<u64>,
    disk: Option<mongod_sim::Disk>,
    initial_sync_duration: Duration,
}

fn parse_args() -> Result<Options> {
    let mut args = std::env::args().skip(1);
    let mut members = Vec::new();
    let mut repl_set = "replset-0".to_string();
    let mut root_name = std::env::var("MONGO_INITDB_ROOT_USERNAME").ok();
    let mut root_password = std::env::var("MONGO_INITDB_ROOT_PASSWORD").ok();
    let mut keyfile = None;
    let mut lag = Duration::ZERO;
    let mut control = None;
    let mut version = ServerVersion::DEFAULT;
    let mut oplog_size_bytes = None;
    let mut disk = None;
    let mut initial_sync_duration = Duration::ZERO;
    while let Some(flag) = args.next() {
        let mut value = || {
            args.next()
                .with_context(|| format!("{flag} needs a value\n{USAGE}"))
        };
        match flag.as_str() {
            "--member" => members.push(value()?.parse().context("--member must be IP:PORT")?),
            "--repl-set" => repl_set = value()?,
            "--root-user" => root_name = Some(value()?),
            "--root-password-file" => {
                let path = value()?;
                root_password = Some(
                    std::fs::read_to_string(&path)
                        .with_context(|| format!("reading {path}"))?
                        .trim_end()
                        .to_string(),
                );
            }
            "--keyfile" => {
                let path = value()?;
                let content =
                    std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
                keyfile = Some(content);
            }
            "--lag-ms" => {
                lag = Duration::from_millis(value()?.parse().context("--lag-ms must be a number")?)
            }
            "--control" => control = Some(value()?.parse().context("--control must be IP:PORT")?),
            "--server-version" => {
                version = value()?
                    .parse()
                    .map_err(|e: String| anyhow::anyhow!(e))
                    .context("--server-version")?
            }
            "--oplog-size-bytes" => {
                oplog_size_bytes = Some(
                    value()?
                        .parse()
                        .context("--oplog-size-bytes must be a number")?,
                )
            }
            "--disk-size" => {
                let size = value()?;
                let bytes = mongod_sim::disk::parse_quantity(&size)
                    .with_context(|| format!("--disk-size {size:?} is not a quantity"))?;
                disk = Some(mongod_sim::Disk::new(bytes));
            }
            "--initial-sync-ms" => {
                initial_sync_duration = Duration::from_millis(
                    value()?
                        .parse()
                        .context("--initial-sync-ms must be a number")?,
                )
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => bail!("unknown argument {other}\n{USAGE}"),
        }
    }
    if members.is_empty() {
        bail!("at least one --member is required\n{USAGE}");
    }
    let root_user = match (root_name, root_password) {
        (Some(username), Some(password)) => Some(RootUser { username, password }),
        (None, None) => None,
        _ => bail!("the root user needs both a name and a password"),
    };
    Ok(Options {
        members,
        repl_set,
        root_user,
        keyfile,
        lag,
        control,
        version,
        oplog_size_bytes,
        disk,
        initial_sync_duration,
    })
}

/// The running simulation and the volumes of its members.
struct Sim {
    net: Arc<Network>,
    specs: Mutex<BTreeMap<String, MemberSpec>>,
    volumes: Mutex<BTreeMap<String, Volume>>,
}

impl Sim {
    async fn start(&self, host: &str) -> Result<()> {
        let spec = self
            .specs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(host)
            .with_context(|| format!("unknown member {host}"))?
            .clone();
        let volume = self
            .volumes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(host.to_string())
            .or_default()
            .clone();
        // mongod exits at startup on data its binary cannot run, or on a
        // volume with no room left.
        let state = volume.snapshot();
        if let Err(e) = mongod_sim::fcv::startup_check(spec.version, &state)
            .and_then(|()| mongod_sim::disk::startup_check(&spec, &state))
        {
            bail!(
                "mongod {} exited with code {}: {}",
                spec.version,
                e.exit_code,
                e.message
            );
        }
        self.net.start_member(spec, volume).await?;
        Ok(())
    }

    fn set_version(&self, host: &str, version: &str) -> Result<String> {
        let version: ServerVersion = version.parse().map_err(|e: String| anyhow::anyhow!(e))?;
        let mut specs = self.specs.lock().unwrap_or_else(|p| p.into_inner());
        let spec = specs
            .get_mut(host)
            .with_context(|| format!("unknown member {host}"))?;
        spec.version = version;
        Ok(format!("{host} runs {version} from its next start"))
    }

    /// Deletes a stopped member's data: its next start is on an empty volume.
    fn wipe(&self, host: &str) -> Result<String> {
        if self.net.member(host).is_some() {
            bail!("{host} is running; stop it first");
        }
        let mut volumes = self.volumes.lock().unwrap_or_else(|p| p.into_inner());
        if !self
            .specs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(host)
        {
            bail!("unknown member {host}");
        }
        volumes.insert(host.to_string(), Volume::new());
        Ok(format!("{host} starts on an empty volume"))
    }

    /// How many of each command `host` received, by client `appName` (the
    /// benchmark counters), as JSON: `{"<app>": {"<command>": n}}`, `""`
    /// for a client that gave no name.
    fn commands_of(&self, host: &str) -> String {
        let mut by_app: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
        for (key, n) in self.net.command_counts() {
            if key.member == host {
                let app = by_app.entry(key.app.unwrap_or_default()).or_default();
                *app.entry(key.command).or_default() += n;
            }
        }
        serde_json::to_string(&by_app).unwrap_or_default()
    }

    /// Runs one control command and returns its answer (JSON or a short message).
    async fn control(&self, line: &str) -> String {
        let words: Vec<&str> = line.split_whitespace().collect();
        let result: Result<String> = match words.as_slice() {
            ["stop", host] => Ok(if self.net.stop_member_and_wait(host).await {
                "stopped".into()
            } else {
                "not running".into()
            }),
            ["start", host] => self.start(host).await.map(|_| "started".into()),
            ["version", host, version] => self.set_version(host, version),
            ["wipe", host] => self.wipe(host),
            ["oplog-size", "none"] => {
                self.net.set_oplog_size(None);
                Ok("oplog never truncated".into())
            }
            ["oplog-size", bytes] => bytes
                .parse::<u64>()
                .map(|n| {
                    self.net.set_oplog_size(Some(n));
                    format!("oplog size {n} bytes")
                })
                .context("oplog-size needs a number of bytes or none"),
            ["initial-sync-ms", ms] => ms
                .parse::<u64>()
                .map(|ms| {
                    self.net
                        .set_initial_sync_duration(Duration::from_millis(ms));
                    "initial sync duration set".to_string()
                })
                .context("initial-sync-ms needs milliseconds"),
            ["cut", host] => {
                self.net.isolate(host);
                Ok("cut".into())
            }
            ["heal", host] => {
                self.net.heal(host);
                Ok("healed".into())
            }
            ["heal-all"] => {
                self.net.heal_all();
                Ok("healed".into())
            }
            ["lag", host, ms] => ms
                .parse::<u64>()
                .map(|ms| {
                    self.net.set_lag(host, Duration::from_millis(ms));
                    "lag set".to_string()
                })
                .context("lag needs milliseconds"),
            ["route", alias, host] => {
                self.net.add_alias(host, alias);
                Ok("routed".into())
            }
            ["unroute", alias] => {
                self.net.remove_alias(alias);
                Ok("unrouted".into())
            }
            ["site", host, site] => {
                self.net.set_site(host, site);
                Ok("site set".into())
            }
            ["hairpin", site, switch @ ("on" | "off")] => {
                self.net.set_hairpin(site, *switch == "on");
                Ok(format!("hairpin {switch}"))
            }
            ["state"] => Ok(serde_json::to_string_pretty(&self.net.dump()).unwrap_or_default()),
            ["commands", host] => Ok(self.commands_of(host)),
            _ => Err(anyhow::anyhow!("unknown command {line:?}\n{USAGE}")),
        };
        match result {
            Ok(s) => s,
            Err(e) => format!("error: {e:#}"),
        }
    }
}

async fn serve_control(sim: Arc<Sim>, listener: tokio::net::TcpListener) -> Result<()> {
    loop {
        let (mut stream, _) = listener.accept().await?;
        let sim = sim.clone();
        tokio::spawn(async move {
            // Read until the end of the headers (requests carry no body we need).
            let mut buf = Vec::new();
            let mut chunk = [0u8; 1024];
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 16 * 1024 {
                match tokio::time::timeout(Duration::from_secs(5), stream.read(&mut chunk)).await {
                    Ok(Ok(n)) if n > 0 => buf.extend_from_slice(&chunk[..n]),
                    _ => return,
                }
            }
            let request = String::from_utf8_lossy(&buf);
            let path = request
                .lines()
                .next()
                .and_then(|l| l.split_whitespace().nth(1))
                .unwrap_or("/");
            let command = path.trim_matches('/').replace('/', " ");
            let answer = sim.control(&command).await;
            let status = if answer.starts_with("error:") {
                "400 Bad Request"
            } else {
                "200 OK"
            };
            let response = format!("HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}\n", answer.len() + 1);
            let _ = stream.write_all(response.as_bytes()).await;
        });
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let opts = parse_args()?;
    let net = Network::new();
    let specs = opts
        .members
        .iter()
        .map(|addr| {
            let spec = MemberSpec {
                listen: *addr,
                repl_set: opts.repl_set.clone(),
                keyfile: opts.keyfile.clone(),
                root_user: opts.root_user.clone(),
                version: opts.version,
                oplog_size_bytes: opts.oplog_size_bytes,
                disk: opts.disk,
                initial_sync_duration: opts.initial_sync_duration,
                clients_on_own_host: true,
                tls: mongod_sim::tls::TlsSpec::default(),
            };
            (addr.to_string(), spec)
        })
        .collect();
    let sim = Arc::new(Sim {
        net: net.clone(),
        specs: Mutex::new(specs),
        volumes: Mutex::new(BTreeMap::new()),
    });
    for addr in &opts.members {
        sim.start(&addr.to_string()).await?;
        if !opts.lag.is_zero() {
            net.set_lag(&addr.to_string(), opts.lag);
        }
    }
    if let Some(addr) = opts.control {
        // Bound before the ready line, so scripts can use it as soon as they see it.
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("binding control address {addr}"))?;
        let sim = sim.clone();
        tokio::spawn(async move {
            if let Err(e) = serve_control(sim, listener).await {
                eprintln!("control interface failed: {e:#}");
            }
        });
    }
    let hosts: Vec<String> = opts.members.iter().map(|a| a.to_string()).collect();
    let control = opts
        .control
        .map(|c| format!(" control={c}"))
        .unwrap_or_default();
    println!("mongod-sim ready: {}{control}", hosts.join(" "));
    let stdin_sim = sim.clone();
    tokio::spawn(async move {
        let mut lines = BufReader::new(tokio::io::stdin()).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if line.trim().is_empty() {
                continue;
            }
            println!("{}", stdin_sim.control(&line).await);
        }
    });
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r?,
        _ = term.recv() => {}
    }
    net.stop_all();
    Ok(())
}
