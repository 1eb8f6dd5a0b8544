//! `kubectl mongodb`: the kubectl plugin for the on-call SRE who looks after
//! one replica set spread over several member clusters. This binary does the
//! I/O — kubeconfig, one client per context, reads, watches, the merge patch,
//! the terminal — and prints what [`mongodb_member_operator::cli`] renders
//! and decides.

use std::collections::BTreeSet;
use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context as _};
use clap::{Args, Parser, Subcommand};
use futures::StreamExt;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client, Config};
use mongodb_member_operator::api::{ForgetClusterPhase, MongoDB, RecoveryPhase};
use mongodb_member_operator::cli::status::{self, ContextReport, Unread};
use mongodb_member_operator::cli::{forget, recover};
use tokio::sync::mpsc;

/// Looks after one MongoDB replica set spread over the member clusters of a
/// federation, through the `MongoDB` object each cluster's operator reports
/// on (`middleware.fedstate.io/v1alpha1`).
///
/// Install it on PATH as `kubectl-mongodb` and run `kubectl mongodb …`.
/// Every command reads the kubeconfig (`--kubeconfig`, else `$KUBECONFIG`,
/// else `~/.kube/config`), one context per member cluster.
#[derive(Parser, Debug)]
#[command(name = "kubectl-mongodb", bin_name = "kubectl mongodb", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    common: Common,
}

/// Options of every command.
#[derive(Args, Debug)]
struct Common {
    /// The kubeconfig to read (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, global = true, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// The namespace of the MongoDB object (default: each context's namespace,
    /// else `default`).
    #[arg(short = 'n', long, global = true, value_name = "NS")]
    namespace: Option<String>,
    /// How long one request to an API server may take before its context is
    /// reported unreachable, in seconds.
    #[arg(long, global = true, value_name = "SECONDS", default_value_t = 10)]
    request_timeout: u64,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// One table of the whole replica set, from every cluster's report.
    ///
    /// Reads the MongoDB object NAME in every context of the kubeconfig (or
    /// those given with --context) and prints: every member across the
    /// clusters (its cluster, state, health, lag; the primary marked `*`), as
    /// the report with the highest config version (then the latest
    /// observation) has them; then per cluster its state, ready members,
    /// config version, how old its view is, the Ready and Degraded reasons,
    /// restart state, revision and disaster recovery; then what each
    /// cluster's operator does or waits for, in its own words. Clusters that
    /// disagree are said to: `behind` (a lower config version), `STALE?` (an
    /// older report whose members are up while the latest view has them
    /// down: is its operator running?). A context that cannot be read gets a
    /// one-line error on stderr (which context, why); the others are still
    /// printed, and the exit status is 1.
    Status(StatusArgs),
    /// Ask one surviving cluster's operator for a disaster recovery.
    ///
    /// For a replica set that lost a majority of its voters (two of three
    /// clusters gone): prints the dry run from cluster CONTEXT's status (its
    /// VotingMajorityLost message names the voters gone, which a forced
    /// reconfig drops; the members that answer are kept), refuses (exit 1)
    /// when CONTEXT does not report a lost voting majority, asks for
    /// confirmation (--yes, or y on a terminal), then sets the annotation
    /// `middleware.fedstate.io/disaster-recovery=<reason>` on CONTEXT's object
    /// and follows `status.recovery` (Planned, Forced, Done; or Refused),
    /// printing each phase. Exits 0 once Done. Make sure the lost clusters
    /// are down or fenced first: see docs/disaster-recovery.md.
    Recover(RecoverArgs),
    /// Ask one surviving cluster's operator to forget a cluster lost for good.
    ///
    /// For a set that still has a voting majority but keeps the dead members
    /// of a cluster that will not come back (every roll and FCV raise waits
    /// on them, and they count in the majority): prints the dry run from
    /// cluster CONTEXT's status (the members at the lost cluster's VIP, which
    /// are removed; the others, kept), refuses (exit 1) while a member at
    /// that VIP is up, when CONTEXT reports a lost voting majority (use
    /// `recover`), or when no member is at that VIP; asks for confirmation
    /// (--yes, or y on a terminal), then sets the annotation
    /// `middleware.fedstate.io/forget-cluster=<VIP> <reason>` on CONTEXT's
    /// object and follows `status.forgetCluster` (Removing, Done; or
    /// Refused), printing each phase. Exits 0 once Done. See
    /// docs/disaster-recovery.md.
    ForgetCluster(ForgetClusterArgs),
}

#[derive(Args, Debug)]
struct StatusArgs {
    /// The MongoDB object's name.
    name: String,
    /// A context to read (repeatable); default: every context of the kubeconfig.
    #[arg(long = "context", value_name = "CONTEXT")]
    contexts: Vec<String>,
    /// Keep watching every context and print the view again when a report
    /// changes (Ctrl-C ends; exit 1 if a context could not be read then).
    #[arg(short, long)]
    watch: bool,
}

#[derive(Args, Debug)]
struct RecoverArgs {
    /// The MongoDB object's name.
    name: String,
    /// The surviving cluster to ask (one context).
    #[arg(long, value_name = "CONTEXT")]
    context: String,
    /// Why: becomes the annotation's value and names the request (the
    /// operator carries out or refuses a request once).
    #[arg(long, value_parser = recover::parse_reason)]
    reason: String,
    /// Ask without a confirmation prompt.
    #[arg(short, long)]
    yes: bool,
    /// How long to follow the recovery before giving up, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 600)]
    timeout: u64,
}

#[derive(Args, Debug)]
struct ForgetClusterArgs {
    /// The MongoDB object's name.
    name: String,
    /// The surviving cluster to ask (one context).
    #[arg(long, value_name = "CONTEXT")]
    context: String,
    /// The lost cluster's VIP: the host part of its members' addresses, as
    /// `kubectl mongodb status` shows them.
    #[arg(long, value_name = "VIP")]
    cluster: String,
    /// Why (default: the time asked); with the VIP it names the request.
    #[arg(long)]
    reason: Option<String>,
    /// Ask without a confirmation prompt.
    #[arg(short, long)]
    yes: bool,
    /// How long to follow the removals before giving up, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 600)]
    timeout: u64,
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match &cli.command {
        Command::Status(args) => run_status(&cli.common, args).await,
        Command::Recover(args) => run_recover(&cli.common, args).await,
        Command::ForgetCluster(args) => run_forget_cluster(&cli.common, args).await,
    };
    match outcome {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {}", one_line(error.as_ref()));
            ExitCode::FAILURE
        }
    }
}

/// A context's client and namespace, or why it has none.
struct Target {
    context: String,
    namespace: String,
    client: Result<Client, Unread>,
}

fn read_kubeconfig(common: &Common) -> anyhow::Result<Kubeconfig> {
    match &common.kubeconfig {
        Some(path) => Kubeconfig::read_from(path)
            .with_context(|| format!("bad kubeconfig {}", path.display())),
        None => Kubeconfig::read().context(
            "no usable kubeconfig: pass --kubeconfig, or set KUBECONFIG, or create ~/.kube/config",
        ),
    }
}

/// One target per context asked for (every context of the kubeconfig when
/// none is), in the order given.
async fn targets(common: &Common, asked: &[String]) -> anyhow::Result<Vec<Target>> {
    let kubeconfig = read_kubeconfig(common)?;
    let known: Vec<String> = kubeconfig.contexts.iter().map(|c| c.name.clone()).collect();
    let contexts = if asked.is_empty() {
        known.clone()
    } else {
        let mut seen = BTreeSet::new();
        asked
            .iter()
            .filter(|c| seen.insert(c.as_str()))
            .cloned()
            .collect()
    };
    if contexts.is_empty() {
        bail!("the kubeconfig has no context");
    }
    let timeout = Duration::from_secs(common.request_timeout.max(1));
    let mut targets = Vec::new();
    for context in contexts {
        let fallback = common.namespace.clone().unwrap_or_else(|| "default".into());
        if !known.contains(&context) {
            let why = format!("not in the kubeconfig (it has {})", known.join(", "));
            targets.push(Target {
                context,
                namespace: fallback,
                client: Err(Unread::BadContext(why)),
            });
            continue;
        }
        let options = KubeConfigOptions {
            context: Some(context.clone()),
            ..Default::default()
        };
        let target = match Config::from_custom_kubeconfig(kubeconfig.clone(), &options).await {
            Ok(mut config) => {
                config.connect_timeout = Some(timeout);
                // The SRE needs to know now which cluster fails and why, not
                // after minutes of retries; watches retry with their own backoff.
                config.default_retry = false;
                let namespace = common
                    .namespace
                    .clone()
                    .unwrap_or_else(|| config.default_namespace.clone());
                let client = Client::try_from(config).map_err(|e| Unread::BadContext(one_line(&e)));
                Target {
                    context,
                    namespace,
                    client,
                }
            }
            Err(error) => Target {
                context,
                namespace: fallback,
                client: Err(Unread::BadContext(one_line(&error))),
            },
        };
        targets.push(target);
    }
    Ok(targets)
}

fn api(client: &Client, namespace: &str) -> Api<MongoDB> {
    Api::namespaced(client.clone(), namespace)
}

/// A Kubernetes client error in one line.
fn describe(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => {
            format!("{} ({} {})", status.message, status.code, status.reason)
        }
        other => one_line(other),
    }
}

/// An error and its causes in one line, each cause once (many errors
/// repeat their source's text in their own).
fn one_line(error: &(dyn std::error::Error + 'static)) -> String {
    let mut line = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !line.contains(&text) {
            line.push_str(&format!(": {text}"));
        }
        source = cause.source();
    }
    line
}

/// Reads NAME in one context, within the request timeout.
async fn read(target: &Target, name: &str, timeout: Duration) -> ContextReport {
    let outcome = match &target.client {
        Err(unread) => Err(unread.clone()),
        Ok(client) => {
            match tokio::time::timeout(timeout, api(client, &target.namespace).get_opt(name)).await
            {
                Err(_) => Err(Unread::Unreachable(format!(
                    "no answer within {}s",
                    timeout.as_secs()
                ))),
                Ok(Err(error)) => Err(Unread::Unreachable(describe(&error))),
                Ok(Ok(None)) => Err(Unread::NotFound),
                Ok(Ok(Some(mongodb))) => Ok(mongodb),
            }
        }
    };
    ContextReport {
        context: target.context.clone(),
        namespace: target.namespace.clone(),
        outcome,
    }
}

/// Prints the view (errors on stderr); true when every context was read.
fn print_view(name: &str, reports: &[ContextReport]) -> bool {
    print!("{}", status::render(name, reports, Timestamp::now()));
    let errors = status::errors(name, reports);
    for error in &errors {
        eprintln!("error: {error}");
    }
    let _ = std::io::stdout().flush();
    errors.is_empty()
}

async fn run_status(common: &Common, args: &StatusArgs) -> anyhow::Result<ExitCode> {
    let targets = targets(common, &args.contexts).await?;
    let timeout = Duration::from_secs(common.request_timeout.max(1));
    let reads = targets.iter().map(|t| read(t, &args.name, timeout));
    let mut reports: Vec<ContextReport> = futures::future::join_all(reads).await;
    let mut all_read = print_view(&args.name, &reports);
    if !args.watch {
        return Ok(exit(all_read));
    }
    // One watch per context, each sending what its context now gives.
    let (sender, mut updates) = mpsc::channel::<(usize, Result<MongoDB, Unread>)>(64);
    for (index, target) in targets.iter().enumerate() {
        if let Ok(client) = &target.client {
            let api = api(client, &target.namespace);
            let config = watcher::Config::default().fields(&format!("metadata.name={}", args.name));
            tokio::spawn(watch_one(index, api, config, sender.clone()));
        }
    }
    drop(sender);
    loop {
        tokio::select! {
            update = updates.recv() => {
                let Some((index, outcome)) = update else { break };
                let before = summary(&reports[index]);
                reports[index].outcome = outcome;
                if summary(&reports[index]) != before {
                    println!("\n--- {}", Timestamp::now().round(k8s_openapi::jiff::Unit::Second)?);
                    all_read = print_view(&args.name, &reports);
                }
            }
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    Ok(exit(all_read))
}

/// What a watch re-prints on: the status, or the error.
fn summary(report: &ContextReport) -> Result<Option<String>, String> {
    match &report.outcome {
        Ok(mongodb) => Ok(mongodb
            .status
            .as_ref()
            .map(|s| serde_json::to_string(s).unwrap_or_default())),
        Err(unread) => Err(format!("{unread:?}")),
    }
}

/// Watches one context's object and sends each new state of it.
async fn watch_one(
    index: usize,
    api: Api<MongoDB>,
    config: watcher::Config,
    sender: mpsc::Sender<(usize, Result<MongoDB, Unread>)>,
) {
    let mut events = watcher(api, config).default_backoff().boxed();
    let mut listed = None;
    while let Some(event) = events.next().await {
        let outcome = match event {
            Ok(watcher::Event::Init) => {
                listed = None;
                continue;
            }
            Ok(watcher::Event::InitApply(mongodb)) => {
                listed = Some(mongodb);
                continue;
            }
            Ok(watcher::Event::InitDone) => listed.take().ok_or(Unread::NotFound),
            Ok(watcher::Event::Apply(mongodb)) => Ok(mongodb),
            Ok(watcher::Event::Delete(_)) => Err(Unread::NotFound),
            Err(error) => Err(Unread::Unreachable(format!("watch: {error}"))),
        };
        if sender.send((index, outcome)).await.is_err() {
            return;
        }
    }
}

fn exit(success: bool) -> ExitCode {
    if success {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The one context asked and its object NAME, read.
async fn read_one(common: &Common, context: &str, name: &str) -> anyhow::Result<(Target, MongoDB)> {
    let target = targets(common, &[context.to_string()])
        .await?
        .pop()
        .context("no context")?;
    let timeout = Duration::from_secs(common.request_timeout.max(1));
    let report = read(&target, name, timeout).await;
    match report.outcome {
        Ok(mongodb) => Ok((target, mongodb)),
        Err(_) => bail!("{}", status::errors(name, &[report]).join("; ")),
    }
}

async fn run_recover(common: &Common, args: &RecoverArgs) -> anyhow::Result<ExitCode> {
    let (target, mongodb) = read_one(common, &args.context, &args.name).await?;
    let plan = match recover::dry_run(&args.context, &mongodb, &args.reason) {
        Ok(plan) => plan,
        Err(refusal) => {
            eprintln!("refused: {refusal}");
            return Ok(ExitCode::FAILURE);
        }
    };
    println!("{plan}");
    let client = target.client.ok().context("no client")?;
    let api = api(&client, &target.namespace);
    if plan.already_asked {
        println!(
            "this request is on {}'s object already: following it",
            args.context
        );
    } else {
        let question = recover::question(&args.context, &args.name);
        if !args.yes && !confirm(&question)? {
            eprintln!(
                "refused: not confirmed (pass --yes, or answer y on a terminal); nothing asked"
            );
            return Ok(ExitCode::FAILURE);
        }
        let patch = recover::annotation_patch(&args.reason);
        api.patch(&args.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| anyhow::anyhow!("annotating {}: {}", args.context, describe(&e)))?;
        println!(
            "asked: {} {}/{} annotated with the request; following status.recovery",
            args.context, target.namespace, args.name
        );
    }
    follow(api, args).await
}

/// Asks `question` on the terminal; false when stdin is not one.
fn confirm(question: &str) -> anyhow::Result<bool> {
    if !std::io::stdin().is_terminal() {
        return Ok(false);
    }
    print!("{question}");
    std::io::stdout().flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    Ok(recover::confirmed(&answer))
}

/// Prints each phase of the recovery until Done (0) or Refused (1).
async fn follow(api: Api<MongoDB>, args: &RecoverArgs) -> anyhow::Result<ExitCode> {
    let follow = Follow {
        context: &args.context,
        name: &args.name,
        timeout: args.timeout,
    };
    follow
        .phases(api, |mongodb| {
            let recovery = recover::progress(mongodb, &args.reason)?;
            let end = match recovery.phase {
                RecoveryPhase::Done => Some(ExitCode::SUCCESS),
                RecoveryPhase::Refused => Some(ExitCode::FAILURE),
                RecoveryPhase::Planned | RecoveryPhase::Forced => None,
            };
            Some(FollowedPhase {
                phase: recovery.phase.into(),
                line: recover::phase_line(recovery),
                end,
            })
        })
        .await
}

async fn run_forget_cluster(common: &Common, args: &ForgetClusterArgs) -> anyhow::Result<ExitCode> {
    let (target, mongodb) = read_one(common, &args.context, &args.name).await?;
    let plan = match forget::dry_run(&args.context, &mongodb, &args.cluster) {
        Ok(plan) => plan,
        Err(refusal) => {
            eprintln!("refused: {refusal}");
            return Ok(ExitCode::FAILURE);
        }
    };
    println!("{plan}");
    let question = forget::question(&args.context, &args.name, &args.cluster);
    if !args.yes && !confirm(&question)? {
        eprintln!("refused: not confirmed (pass --yes, or answer y on a terminal); nothing asked");
        return Ok(ExitCode::FAILURE);
    }
    let reason = match &args.reason {
        Some(reason) => reason.clone(),
        None => format!(
            "asked at {}",
            Timestamp::now().round(k8s_openapi::jiff::Unit::Second)?
        ),
    };
    let request = forget::request(&args.cluster, &reason);
    let client = target.client.ok().context("no client")?;
    let api = api(&client, &target.namespace);
    let patch = forget::annotation_patch(&request);
    api.patch(&args.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| anyhow::anyhow!("annotating {}: {}", args.context, describe(&e)))?;
    println!(
        "asked: {} {}/{} annotated with the request; following status.forgetCluster",
        args.context, target.namespace, args.name
    );
    let follow = Follow {
        context: &args.context,
        name: &args.name,
        timeout: args.timeout,
    };
    follow
        .phases(api, |mongodb| {
            let forgetting = forget::progress(mongodb, &request)?;
            let end = match forgetting.phase {
                ForgetClusterPhase::Done => Some(ExitCode::SUCCESS),
                ForgetClusterPhase::Refused => Some(ExitCode::FAILURE),
                ForgetClusterPhase::Removing => None,
            };
            Some(FollowedPhase {
                phase: forgetting.phase.into(),
                line: forget::phase_line(forgetting),
                end,
            })
        })
        .await
}

/// A request's phase as its operator reports it.
struct FollowedPhase {
    /// The phase's name: a line is printed once per phase.
    phase: &'static str,
    /// What to print.
    line: String,
    /// The exit code, when the phase ends the request.
    end: Option<ExitCode>,
}

/// Following one request on one object until its operator ends it.
struct Follow<'a> {
    context: &'a str,
    name: &'a str,
    timeout: u64,
}

impl Follow<'_> {
    /// Prints the line of each new phase `phase` gives for the object, until
    /// one ends the request.
    async fn phases(
        &self,
        api: Api<MongoDB>,
        phase: impl Fn(&MongoDB) -> Option<FollowedPhase>,
    ) -> anyhow::Result<ExitCode> {
        let config = watcher::Config::default().fields(&format!("metadata.name={}", self.name));
        let mut objects = watcher(api, config)
            .default_backoff()
            .applied_objects()
            .boxed();
        let mut last = None;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(self.timeout);
        loop {
            let next = tokio::time::timeout_at(deadline, objects.next()).await;
            let mongodb = match next {
                Err(_) => bail!(
                    "no Done or Refused from {}'s operator within {}s: is it running? (follow it \
                     with `kubectl mongodb status {}`)",
                    self.context,
                    self.timeout,
                    self.name
                ),
                Ok(None) => bail!("the watch on {} ended", self.context),
                Ok(Some(Err(error))) => {
                    eprintln!("watch on {}: {error}; retrying", self.context);
                    continue;
                }
                Ok(Some(Ok(mongodb))) => mongodb,
            };
            let Some(followed) = phase(&mongodb) else {
                continue;
            };
            if last == Some(followed.phase) {
                continue;
            }
            last = Some(followed.phase);
            println!("{}", followed.line);
            if let Some(code) = followed.end {
                return Ok(code);
            }
        }
    }
}
