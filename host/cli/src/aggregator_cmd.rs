//! `factbuoy aggregator ...` and `factbuoy agent`: the two halves of a run as separate
//! processes, for agents on other machines (outbound connections only) and for restarting an
//! aggregator mid-run.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use bytesize::ByteSize;
use clap::{Args, Subcommand};
use factbuoy_protocol::identity::Role;
use factbuoy_protocol::names::NodeName;
use factbuoy_protocol::tls::Identity;
use factbuoy_protocol::{Client, Scope};

use factbuoy_agent::AgentConfig;
use factbuoy_aggregator::config::{self, PlanScope, RunConfig, ServerLimits};
use factbuoy_aggregator::{Run, RunDir};
use factbuoy_protocol::types::now_rfc3339;
use factbuoy_runtime::{Limits, Runtime, RuntimeOptions, limits};

use crate::output::{Ended, ExitStatus, Format, emit, emit_document};
use crate::plan::{self, PluginChoices};

// Parsed once per process; boxing the large variant would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum AggregatorCommand {
    /// Create a run directory: its CA, certificates, plan and expected nodes.
    #[command(after_help = "Examples:\n  \
        factbuoy aggregator create --run-dir ./run --node web-1 --node web-2 \\\n      \
        --listen 0.0.0.0:7443 --server-name aggregator.example.com\n  \
        factbuoy aggregator create --run-dir ./run --node db-1 --plugin setup -p setup:gather_subset=hardware")]
    Create(CreateArgs),
    /// Issue a client certificate from a run's CA into a directory (ca.pem, client.pem, client.key).
    #[command(after_help = "Examples:\n  \
        factbuoy aggregator issue --run-dir ./run --role agent:web-1 --out ./web-1-creds\n  \
        factbuoy aggregator issue --run-dir ./run --role global:runner --out ./global-creds")]
    Issue {
        #[arg(long, value_name = "DIR")]
        run_dir: PathBuf,
        /// `agent:NODE`, `operator:NAME` or `global:NAME`; NODE must be one of the run's nodes.
        #[arg(long, value_parser = Role::parse)]
        role: Role,
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
    /// Serve a run: a new one, or one whose aggregator stopped, continuing where it was.
    #[command(after_help = "Examples:\n  \
        factbuoy aggregator serve --run-dir ./run\n  \
        factbuoy aggregator serve --run-dir ./run --exit-when-complete   # then the bundle is in --out")]
    Serve {
        #[arg(long, value_name = "DIR")]
        run_dir: PathBuf,
        /// Exit once the bundle is written instead of serving it until stopped.
        #[arg(long)]
        exit_when_complete: bool,
    },
    /// Serve a run as a pod of a Kubernetes cluster: what the aggregator pod of
    /// `factbuoy run --kubernetes` (and of `factbuoy gen`'s manifests) runs.
    #[command(after_help = "Examples:\n  \
        # As the aggregator pod's container runs it (see `factbuoy gen`):\n  \
        factbuoy aggregator serve-kubernetes --plan /etc/factbuoy/run.json \\\n      \
        --operator-ca /etc/factbuoy/operator-ca.pem --run-dir /var/lib/factbuoy --resources nodes")]
    ServeKubernetes(crate::kube_serve::ServeKubernetesArgs),
}

#[derive(Debug, Args)]
pub struct CreateArgs {
    #[arg(long, value_name = "DIR")]
    run_dir: PathBuf,
    /// A node expected to send results; repeat for each.
    #[arg(long = "node", required = true)]
    nodes: Vec<NodeName>,
    /// Plugins to run, by bundled name or path [default: as for `factbuoy run`].
    #[arg(long = "plugin", value_name = "NAME|PATH", value_parser = plan::PluginName, hide_possible_values = true)]
    plugins: Vec<String>,
    /// PLUGIN:NAME=VALUE.
    #[arg(short, long = "param", value_parser = plan::scoped_param)]
    params: Vec<(String, String)>,
    /// One of the run's plugins whose single result covers the whole run (a cluster-level
    /// gatherer) instead of one per node. Agents do not run it; the holder of a `global:`
    /// certificate delivers its result. Repeat for each.
    #[arg(long = "global", value_name = "PLUGIN", value_parser = crate::plan::PluginName, hide_possible_values = true)]
    global: Vec<String>,
    /// PLUGIN:CAPABILITY, for plugins from files.
    #[arg(long, value_parser = plan::scoped_grant)]
    grant: Vec<(String, String)>,
    /// Agent listener address; port 0 picks one at the first start, kept for restarts.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Operator listener address.
    #[arg(long, default_value = "127.0.0.1:0")]
    operator_listen: SocketAddr,
    /// A name or address agents dial, for the server certificate; repeat for each.
    #[arg(long = "server-name", default_values = ["localhost", "127.0.0.1"])]
    server_names: Vec<String>,
    /// Where the bundle is written.
    #[arg(long, default_value = ".", value_name = "DIR")]
    out: PathBuf,
    #[arg(long, default_value_t = config::DEFAULT_HEARTBEAT.into())]
    heartbeat: humantime::Duration,
    /// Silence after which a node is marked lost.
    #[arg(long, default_value_t = config::DEFAULT_LOST_AFTER.into())]
    lost_after: humantime::Duration,
    #[arg(long, default_value_t = config::DEFAULT_RUN_TIMEOUT.into())]
    timeout: humantime::Duration,
    #[arg(long, default_value_t = limits::DEFAULT_DEADLINE.into())]
    plugin_timeout: humantime::Duration,
    /// Largest accepted result file.
    #[arg(long, default_value_t = ByteSize::b(config::DEFAULT_MAX_FILE_BYTES))]
    max_file: ByteSize,
    /// Slowest accepted average upload rate, per second, once an upload is older than the grace.
    #[arg(long, default_value_t = ByteSize::b(config::DEFAULT_MIN_UPLOAD_BYTES_PER_SECOND))]
    min_upload_rate: ByteSize,
    #[arg(long, default_value_t = config::DEFAULT_UPLOAD_GRACE.into())]
    upload_grace: humantime::Duration,
    /// Connections each listener serves at once; more are closed as they arrive.
    #[arg(long, default_value_t = config::DEFAULT_MAX_CONNECTIONS)]
    max_connections: usize,
}

/// Examples shown by `factbuoy agent --help`.
const AGENT_EXAMPLES: &str = "\
Examples:
  # With a certificate issued by `factbuoy aggregator issue --role agent:node-1`:
  factbuoy agent --aggregator 10.0.0.5:7443 --node node-1 --credentials ./creds

  # Run the run's global plugins once, with a certificate for `--role global:runner`:
  factbuoy agent --aggregator 10.0.0.5:7443 --global --credentials ./global-creds

  # In a pod: enroll with the projected ServiceAccount token, verify the aggregator by the
  # name in its certificate, and stay up once the results are delivered:
  factbuoy agent --aggregator $FACTBUOY_SERVICE_HOST:7443 --ca /etc/factbuoy/ca.pem \\
      --server-name aggregator.factbuoy.svc \\
      --enroll-credential-file /var/run/secrets/factbuoy/token --root /host --stay-alive";

#[derive(Debug, Args)]
#[command(after_help = AGENT_EXAMPLES)]
#[command(group(clap::ArgGroup::new("identity").required(true).args(["credentials", "enroll_credential_file"])))]
#[command(group(clap::ArgGroup::new("speaks_for").args(["node", "global"])))]
pub struct AgentArgs {
    /// The aggregator's agent listener, HOST:PORT.
    #[arg(long, required = true)]
    aggregator: Option<String>,
    /// This node's name, as in its certificate (with --credentials).
    #[arg(
        long,
        requires = "credentials",
        conflicts_with = "enroll_credential_file"
    )]
    node: Option<NodeName>,
    /// Run the run's global plugins (once for the whole run) instead of a node's plugins;
    /// --credentials are then issued for a `global:NAME` role.
    #[arg(long, requires = "credentials")]
    global: bool,
    /// Directory with ca.pem, client.pem and client.key, issued for --node (or --global).
    #[arg(long, value_name = "DIR", requires = "speaks_for")]
    credentials: Option<PathBuf>,
    /// Instead of --credentials and --node: make a key on this node and ask the aggregator for
    /// a certificate, presenting the credential in FILE (a ServiceAccount token; read again at
    /// each attempt). The aggregator decides which node it is for. Needs --ca.
    #[arg(long, value_name = "FILE", requires = "ca")]
    enroll_credential_file: Option<PathBuf>,
    /// The run's CA certificate (PEM), to verify the aggregator when enrolling.
    #[arg(long, value_name = "FILE", requires = "enroll_credential_file")]
    ca: Option<PathBuf>,
    /// The name to verify in the aggregator's certificate, when it differs from the host
    /// dialled (a Service's address from the environment, say).
    #[arg(long, value_name = "NAME")]
    server_name: Option<String>,
    /// Once the results are delivered (or delivery failed for good), free the plugin engine
    /// and wait for SIGTERM or SIGINT, then exit 0: a DaemonSet pod must neither restart nor
    /// run its plugins again.
    #[arg(long)]
    stay_alive: bool,
    /// Host directory plugins' paths are mapped onto (`/host` in a pod).
    #[arg(long, default_value = "/", value_name = "DIR")]
    root: PathBuf,
    /// Where artifacts wait for upload [default: a temporary directory].
    #[arg(long, value_name = "DIR")]
    spool: Option<PathBuf>,
    /// How long each request is retried before the agent gives up on it.
    #[arg(long, default_value_t = factbuoy_agent::RETRY_FOR.into())]
    retry_for: humantime::Duration,
}

pub async fn aggregator(command: AggregatorCommand, format: Format) -> anyhow::Result<ExitStatus> {
    match command {
        AggregatorCommand::Create(args) => create(args, format).await,
        AggregatorCommand::Issue { run_dir, role, out } => {
            let run = Run::open(RunDir::new(run_dir))?;
            if let Role::Agent { node } = &role
                && !run.config().nodes.contains(node)
            {
                anyhow::bail!(
                    "node {node:?} is not a node of run {}; its nodes are given to `aggregator create --node`",
                    run.config().run_id
                );
            }
            run.issue_to_files(&role, &out)?;
            emit(&format!(
                "issued a certificate for the {role} into {}",
                out.display()
            ));
            Ok(ExitStatus::Success)
        }
        AggregatorCommand::ServeKubernetes(args) => crate::kube_serve::serve(args).await,
        AggregatorCommand::Serve {
            run_dir,
            exit_when_complete,
        } => {
            let run = Run::open(RunDir::new(run_dir))?;
            let mut running =
                factbuoy_aggregator::start(run, factbuoy_catalog::bundled_component).await?;
            // One line for scripts: where the listeners are.
            emit(
                &serde_json::json!({
                    "agent_address": running.agent_address,
                    "operator_address": running.operator_address,
                })
                .to_string(),
            );
            let status = running.finished().await;
            tracing::info!("run {:?}", status);
            if !exit_when_complete {
                // Keep serving status and the bundle until stopped.
                std::future::pending::<()>().await;
            }
            Ok(ExitStatus::Success)
        }
    }
}

async fn create(args: CreateArgs, format: Format) -> anyhow::Result<ExitStatus> {
    let runtime = Runtime::new(RuntimeOptions::default())?;
    let plugins = if args.plugins.is_empty() {
        plan::default_plugins(std::path::Path::new("/"))
    } else {
        args.plugins.clone()
    };
    let choices = PluginChoices {
        plugins: &plugins,
        params: &args.params,
        grants: &args.grant,
        deadline: *args.plugin_timeout,
    };
    let planned = plan::build(&runtime, &choices).await?;
    let mut plans = planned.plans;
    for global in &args.global {
        let plan = plans
            .iter_mut()
            .find(|p| p.name == *global)
            .with_context(|| {
                format!("--global {global:?} names no plugin of this run; add it with --plugin")
            })?;
        plan.scope = PlanScope::Global;
    }
    let run_id = crate::run_cmd::new_run_id();
    let config = RunConfig {
        run_id: run_id.clone(),
        created: now_rfc3339(),
        factbuoy_version: env!("CARGO_PKG_VERSION").to_owned(),
        plugins: plans,
        nodes: args.nodes,
        dynamic_nodes: false,
        heartbeat_seconds: args.heartbeat.as_secs().max(1),
        lost_after_seconds: args.lost_after.as_secs().max(1),
        run_timeout_seconds: args.timeout.as_secs().max(1),
        agent_listen: args.listen,
        operator_listen: args.operator_listen,
        server_names: args.server_names,
        bundle_dir: std::path::absolute(&args.out)?,
        operator_ca: None,
        limits: ServerLimits {
            max_file_bytes: args.max_file.as_u64(),
            min_upload_bytes_per_second: args.min_upload_rate.as_u64(),
            upload_grace_seconds: args.upload_grace.as_secs(),
            max_connections: args.max_connections.max(1),
            ..ServerLimits::default()
        },
    };
    Run::create(RunDir::new(&args.run_dir), config, &planned.components)?;
    match format {
        Format::Table => emit(&format!(
            "created run {run_id} in {}",
            args.run_dir.display()
        )),
        machine => emit_document(
            &serde_json::json!({ "run_id": run_id, "run_dir": args.run_dir }),
            machine,
        ),
    }
    Ok(ExitStatus::Success)
}

/// `factbuoy agent`: one run's agent, or a fleet member's `join` and `serve`.
#[derive(Debug, clap::Args)]
pub struct AgentCommand {
    #[command(subcommand)]
    action: Option<AgentAction>,
    #[command(flatten)]
    run: AgentArgs,
}

#[derive(Debug, clap::Subcommand)]
enum AgentAction {
    /// Join a fleet with a token: make this machine's key, get its enrollment certificate.
    #[command(after_help = "Examples:\n  \
        factbuoy agent join fleet.example.com:7443 --token 0a1b2c3d4e5f.SECRET --ca-pin sha256:...\n  \
        factbuoy agent join 10.0.0.5:7443 --token ... --ca-pin ... --node db-7 --state-dir /var/lib/factbuoy-agent")]
    Join(crate::fleet_cmd::JoinArgs),
    /// Serve the fleet this machine joined: wait for runs, take part in each, renew the enrollment.
    #[command(
        after_help = "Examples:\n  factbuoy agent serve\n  factbuoy agent serve --state-dir /var/lib/factbuoy-agent -v"
    )]
    Serve(crate::fleet_cmd::AgentServeArgs),
}

pub async fn agent_command(command: AgentCommand, format: Format) -> anyhow::Result<ExitStatus> {
    match command.action {
        Some(AgentAction::Join(args)) => crate::fleet_cmd::join(args, format).await,
        Some(AgentAction::Serve(args)) => crate::fleet_cmd::serve_agent(args).await,
        None => agent(command.run, format).await,
    }
}

async fn agent(args: AgentArgs, format: Format) -> anyhow::Result<ExitStatus> {
    if !args.stay_alive {
        return deliver(args, format).await;
    }
    // The engine and everything else of the run are dropped when `deliver` returns.
    match deliver(args, format).await {
        Ok(_) => tracing::info!("the agent is done; waiting for SIGTERM or SIGINT"),
        Err(e) => tracing::error!("the agent failed: {e:#}; waiting for SIGTERM or SIGINT"),
    }
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = terminate.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    Ok(ExitStatus::Success)
}

/// Applies `--server-name` to `client`.
fn named(client: Client, server_name: Option<&str>) -> anyhow::Result<Client> {
    Ok(match server_name {
        Some(name) => client.with_server_name(name)?,
        None => client,
    })
}

/// Runs the node's plan and delivers the results.
async fn deliver(args: AgentArgs, format: Format) -> anyhow::Result<ExitStatus> {
    let server_name = args.server_name.as_deref();
    let aggregator = args
        .aggregator
        .as_deref()
        .expect("clap requires --aggregator");
    let (identity, scope) = match (&args.enroll_credential_file, &args.credentials, args.node) {
        (Some(credential_file), _, _) => {
            let ca_file = args.ca.as_ref().expect("clap requires --ca");
            let ca_pem = std::fs::read_to_string(ca_file)
                .with_context(|| format!("reading the CA certificate {}", ca_file.display()))?;
            let anonymous = named(Client::anonymous(aggregator, &ca_pem)?, server_name)?;
            let enrolled =
                factbuoy_agent::enroll(&anonymous, &ca_pem, credential_file, *args.retry_for)
                    .await?;
            (enrolled.identity, Scope::Node(enrolled.node))
        }
        (None, Some(credentials), node) => (
            Identity::from_files(
                &credentials.join("ca.pem"),
                &credentials.join("client.pem"),
                &credentials.join("client.key"),
            )?,
            match node {
                Some(node) => Scope::Node(node),
                None => Scope::Global,
            },
        ),
        _ => anyhow::bail!(
            "give --credentials with --node or --global, or --enroll-credential-file and --ca"
        ),
    };
    let client = named(Client::new(aggregator, &identity)?, server_name)?;
    let runtime = Arc::new(Runtime::new(RuntimeOptions {
        limits: Limits::default(),
        ..RuntimeOptions::default()
    })?);
    // Without --spool: a private temporary directory, removed when the agent ends.
    let temporary_spool;
    let spool_dir = match args.spool {
        Some(dir) => dir,
        None => {
            use std::os::unix::fs::PermissionsExt;
            temporary_spool = tempfile::Builder::new()
                .prefix("factbuoy-spool-")
                .permissions(std::fs::Permissions::from_mode(0o700))
                .tempdir()
                .context("creating a spool directory under the temporary directory; name one with --spool")?;
            temporary_spool.path().to_owned()
        }
    };
    let config = Arc::new(AgentConfig {
        scope,
        host_root: args.root,
        spool_dir,
        retry_for: *args.retry_for,
        parallel: AgentConfig::all_cores(),
    });
    // Input was fine by now: an agent that cannot deliver failed (exit 1), as a plugin does.
    let summary = factbuoy_agent::run(client, runtime, config, Arc::default())
        .await
        .map_err(|e| Ended::Failed(format!("{e:#}")))?;
    match format {
        Format::Table => {
            for (plugin, outcome) in &summary.results {
                emit(&format!("{plugin}: {}", crate::summary::wire_name(outcome)));
            }
        }
        machine => emit_document(&summary, machine),
    }
    let all_succeeded = summary
        .results
        .iter()
        .all(|(_, o)| *o == factbuoy_protocol::types::Outcome::Succeeded);
    Ok(if all_succeeded {
        ExitStatus::Success
    } else {
        ExitStatus::Failed
    })
}
