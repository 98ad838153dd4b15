//! `factbuoy agent`: a node's agent for one run, with a certificate issued by hand or enrolled
//! with a credential (in a pod, its ServiceAccount token); and a fleet member's `agent join`
//! and `agent serve`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use factbuoy_agent::fleet::{MemberDir, MemberOptions};
use factbuoy_agent::{AgentConfig, Credentials};
use factbuoy_operator::StateDir;
use factbuoy_protocol::names::NodeName;

use factbuoy_protocol::Scope;
use factbuoy_runtime::{Limits, Runtime, RuntimeOptions};

use crate::output::{Ended, ExitStatus, Format, emit, emit_document};

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
        echo 0a1b2c3d4e5f.SECRET | \\\n      \
        factbuoy agent join fleet.example.com:7443 --token-file - --ca-pin sha256:...\n  \
        factbuoy agent join 10.0.0.5:7443 --token-file token --ca-pin sha256:... \\\n      \
        --node db-7 --state-dir /var/lib/factbuoy-agent")]
    Join(JoinArgs),
    /// Serve the fleet this machine joined: wait for runs, take part in each, renew the enrollment.
    #[command(
        after_help = "Examples:\n  factbuoy agent serve\n  factbuoy agent serve --state-dir /var/lib/factbuoy-agent -v"
    )]
    Serve(AgentServeArgs),
    /// Make DIR, a node's cache of compiled plugins, belong to the agents' user with mode 0700:
    /// what a Kubernetes run's init container does (as root, with only CAP_CHOWN and
    /// CAP_FOWNER) before the unprivileged agent uses it. DIR itself changes, nothing in it.
    #[command(
        after_help = "Examples:\n  factbuoy agent prepare-cache /var/cache/factbuoy --owner 65532:65532"
    )]
    PrepareCache(PrepareCacheArgs),
}

#[derive(Debug, Args)]
struct PrepareCacheArgs {
    /// The cache directory (made if missing; a symbolic link is refused).
    #[arg(value_name = "DIR")]
    dir: PathBuf,
    /// Its owner and group.
    #[arg(long, value_name = "UID:GID", value_parser = owner)]
    owner: (u32, u32),
}

/// `--owner UID:GID`.
fn owner(value: &str) -> Result<(u32, u32), String> {
    let (uid, gid) = value
        .split_once(':')
        .ok_or_else(|| "expected UID:GID, such as 65532:65532".to_owned())?;
    let number = |n: &str| n.parse::<u32>().map_err(|e| format!("{n:?}: {e}"));
    Ok((number(uid)?, number(gid)?))
}

fn prepare_cache(args: PrepareCacheArgs) -> anyhow::Result<ExitStatus> {
    let (uid, gid) = args.owner;
    factbuoy_runtime::cache::prepare_dir(&args.dir, uid, gid).with_context(|| {
        format!(
            "giving {} to {uid}:{gid} with mode 0700",
            args.dir.display()
        )
    })?;
    Ok(ExitStatus::Success)
}

pub async fn agent_command(command: AgentCommand, format: Format) -> anyhow::Result<ExitStatus> {
    match command.action {
        Some(AgentAction::Join(args)) => join(args, format).await,
        Some(AgentAction::Serve(args)) => serve_member(args).await,
        Some(AgentAction::PrepareCache(args)) => prepare_cache(args),
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
        Err(e) => tracing::error!(
            "the agent failed: {}; waiting for SIGTERM or SIGINT",
            crate::output::sentence(&e)
        ),
    }
    crate::signals::interrupted().await;
    Ok(ExitStatus::Success)
}

/// Runs the node's plan and delivers the results.
async fn deliver(args: AgentArgs, format: Format) -> anyhow::Result<ExitStatus> {
    let server_name = args.server_name.as_deref();
    let aggregator = args
        .aggregator
        .as_deref()
        .expect("clap requires --aggregator");
    let credentials = match (args.enroll_credential_file, args.credentials, args.node) {
        (Some(credential_file), _, _) => Credentials::Enrolled {
            credential_file,
            ca_file: args.ca.expect("clap requires --ca"),
        },
        (None, Some(dir), node) => Credentials::Issued {
            dir,
            scope: node.map_or(Scope::Global, Scope::Node),
        },
        _ => anyhow::bail!(
            "give --credentials with --node or --global, or --enroll-credential-file and --ca"
        ),
    };
    let (client, scope) =
        factbuoy_agent::connect(aggregator, server_name, &credentials, *args.retry_for).await?;
    let runtime = Arc::new(Runtime::new(RuntimeOptions {
        limits: Limits::default(),
        ..RuntimeOptions::default()
    })?);
    // Without --spool: a private temporary directory, removed when the agent ends.
    let temporary_spool;
    let spool_dir = match args.spool {
        Some(dir) => dir,
        None => {
            temporary_spool = factbuoy_agent::private_spool().context(
                "creating a spool directory under the temporary directory; name one with --spool",
            )?;
            temporary_spool.path().to_owned()
        }
    };
    let config = Arc::new(AgentConfig {
        scope,
        host_root: args.root,
        spool_dir,
        retry_for: *args.retry_for,
        parallel: AgentConfig::all_cores(),
        stop: factbuoy_runtime::StopSignal::new(),
    });
    // Input was fine by now: an agent that cannot deliver failed (exit 1), as a plugin does.
    let summary = factbuoy_agent::run(client, runtime, config, Arc::default())
        .await
        .map_err(|e| Ended::Failed(crate::output::sentence(&e)))?;
    match format {
        Format::Table => {
            for (plugin, outcome) in &summary.results {
                emit(&format!(
                    "{plugin}: {}",
                    factbuoy_protocol::types::wire_name(outcome)
                ));
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

#[derive(Debug, Args)]
pub struct JoinArgs {
    /// The fleet's address, HOST:PORT, as the join line names it.
    address: String,
    /// The join token, ID.SECRET. Deprecated: every user of this machine can read a command
    /// line (in /proc) while the join runs; use --token-file, or FACTBUOY_JOIN_TOKEN.
    #[arg(
        long,
        env = "FACTBUOY_JOIN_TOKEN",
        hide_env_values = true,
        required_unless_present = "token_file"
    )]
    token: Option<String>,
    /// Read the join token from FILE, or from standard input with `-` (as the join line
    /// `factbuoy fleet token create` prints does); it wins over --token.
    #[arg(long, value_name = "FILE|-")]
    token_file: Option<PathBuf>,
    /// The pin of the fleet's CA (sha256:...): the agent trusts only an aggregator holding it.
    #[arg(long)]
    ca_pin: String,
    /// This machine's node name [default: its host name].
    #[arg(long)]
    node: Option<NodeName>,
    #[command(flatten)]
    state: StateArgs,
}

#[derive(Debug, Args)]
pub struct StateArgs {
    /// Where the agent keeps its enrollment [default: $STATE_DIRECTORY (systemd's), else
    /// ~/.local/state/factbuoy/agent].
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
}

impl StateArgs {
    fn dir(&self) -> anyhow::Result<MemberDir> {
        Ok(MemberDir::new(match &self.state_dir {
            Some(dir) => dir.clone(),
            None => match std::env::var_os("STATE_DIRECTORY") {
                Some(dir) => PathBuf::from(dir),
                None => StateDir::from_env()?.agent(),
            },
        }))
    }
}

#[derive(Debug, Args)]
pub struct AgentServeArgs {
    #[command(flatten)]
    state: StateArgs,
    /// Host directory plugins' paths are mapped onto.
    #[arg(long, default_value = "/", value_name = "DIR")]
    root: PathBuf,
    /// How long each request of a run is retried.
    #[arg(long, default_value_t = factbuoy_agent::RETRY_FOR.into())]
    retry_for: humantime::Duration,
}

async fn join(args: JoinArgs, format: Format) -> anyhow::Result<ExitStatus> {
    let node = match args.node {
        Some(node) => node,
        None => factbuoy_operator::this_host()?,
    };
    let token = match &args.token_file {
        Some(file) => factbuoy_agent::fleet::read_join_token(file)?,
        None => {
            if std::env::var_os("FACTBUOY_JOIN_TOKEN").is_none() {
                tracing::warn!(
                    "--token is deprecated: every user of this machine can read it in /proc while the join runs; use --token-file (`-` for standard input) or FACTBUOY_JOIN_TOKEN"
                );
            }
            args.token
                .clone()
                .context("no join token: give --token-file, or FACTBUOY_JOIN_TOKEN")?
        }
    };
    let state = args.state.dir()?;
    let membership = factbuoy_agent::fleet::join(
        &args.address,
        &token,
        &args.ca_pin,
        node,
        &state,
        Duration::from_secs(60),
    )
    .await?;
    // The same state directory serves it: say so when it is not the default one.
    let serve = match &args.state.state_dir {
        Some(dir) => format!("factbuoy agent serve --state-dir {}", dir.display()),
        None => "factbuoy agent serve".to_owned(),
    };
    match format {
        Format::Table => emit(&format!(
            "joined the fleet at {} as {}; `{serve}` takes part in its runs",
            membership.fleet, membership.node
        )),
        machine => emit_document(&membership, machine),
    }
    Ok(ExitStatus::Success)
}

async fn serve_member(args: AgentServeArgs) -> anyhow::Result<ExitStatus> {
    let state = args.state.dir()?;
    let options = MemberOptions {
        host_root: args.root,
        retry_for: *args.retry_for,
    };
    // A service's first line in its journal says what it serves.
    if let Some(membership) = state.membership()? {
        eprintln!(
            "serving the fleet at {} as node {}; waiting for runs",
            membership.fleet, membership.node
        );
    }
    tokio::select! {
        // Refused (revoked, say): exit 1, which the systemd unit does not restart.
        served = factbuoy_agent::fleet::serve(&state, &options) => {
            served.map_err(|e| Ended::Failed(crate::output::sentence(&e)))?
        }
        _ = crate::signals::interrupted() => {}
    }
    Ok(ExitStatus::Success)
}
