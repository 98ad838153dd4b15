//! `factbuoy fleet` (a long-lived aggregator for machines outside any cluster: serve it, make
//! join tokens, list and revoke nodes), `factbuoy agent join|serve` (a machine's side) and
//! `factbuoy run --fleet` (a run over every enrolled node). docs/fleet.md is the guide; the
//! aggregator crate's `fleet` module does the work.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use factbuoy_agent::fleet::{ServeOptions, StateDir};
use factbuoy_aggregator::fleet::{self, FleetDir, FleetSettings, registry, tokens};
use factbuoy_protocol::Client;
use factbuoy_protocol::fleet::FleetRunRequest;
use factbuoy_protocol::names::NodeName;
use factbuoy_protocol::tls::Identity;
use factbuoy_runtime::{Limits, Runtime, RuntimeOptions};
use serde::Serialize;

use crate::output::{Ended, ExitStatus, Format, emit, emit_document};
use crate::plan;
use crate::runs::{self, RunAt};

#[derive(Debug, Subcommand)]
pub enum FleetCommand {
    /// Serve the fleet: enrollment, runs, the registry of nodes. Prints the address it listens on.
    #[command(after_help = "Examples:\n  \
        factbuoy fleet serve --dir /var/lib/factbuoy-fleet --listen 0.0.0.0:7443 --name fleet.example.com")]
    Serve(ServeArgs),
    /// Make, list and delete join tokens.
    #[command(
        subcommand,
        after_help = "Examples:\n  factbuoy fleet token create --ttl 1h\n  factbuoy fleet token list\n  factbuoy fleet token delete 5f0c2a9d81e4"
    )]
    Token(TokenCommand),
    /// List the enrolled nodes: last seen, agent version, enrollment, certificate expiry.
    #[command(after_help = "Examples:\n  factbuoy fleet nodes\n  factbuoy fleet nodes -o json")]
    Nodes(DirArgs),
    /// Revoke a node: its agent is refused at its next request, and later runs leave it out.
    #[command(after_help = "Examples:\n  factbuoy fleet revoke db-7")]
    Revoke {
        /// The node to revoke.
        node: NodeName,
        #[command(flatten)]
        dir: DirArgs,
    },
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Make a join token and print the command a machine runs to join with it.
    #[command(after_help = "Examples:\n  \
        factbuoy fleet token create --ttl 1h\n  \
        factbuoy fleet token create --ttl 24h --uses 20   # a batch of machines")]
    Create {
        #[command(flatten)]
        dir: DirArgs,
        /// How long the token is accepted.
        #[arg(long, default_value = "1h")]
        ttl: humantime::Duration,
        /// How many machines may join with it.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
        uses: u32,
    },
    /// List the tokens (never their secrets).
    #[command(
        after_help = "Examples:\n  factbuoy fleet token list\n  factbuoy fleet token list -o json"
    )]
    List(DirArgs),
    /// Delete a token: no machine joins with it any more.
    #[command(after_help = "Examples:\n  factbuoy fleet token delete 5f0c2a9d81e4")]
    Delete {
        /// The token's ID (the part before the dot).
        id: String,
        #[command(flatten)]
        dir: DirArgs,
    },
}

#[derive(Debug, Args)]
pub struct DirArgs {
    /// The fleet's directory [default: ~/.local/state/factbuoy/fleet].
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

impl DirArgs {
    fn fleet(&self) -> anyhow::Result<FleetDir> {
        Ok(FleetDir::new(match &self.dir {
            Some(dir) => dir.clone(),
            None => default_fleet_dir()?,
        }))
    }
}

fn default_fleet_dir() -> anyhow::Result<PathBuf> {
    Ok(runs::state_dir()?.join("fleet"))
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    dir: DirArgs,
    /// Where to listen, for agents and operators alike. Port 0 picks one, kept across restarts.
    #[arg(long, default_value = "0.0.0.0:7443")]
    listen: SocketAddr,
    /// A name or address agents dial (repeat it): put in the fleet's certificate and its runs'
    /// [default: the listen address when it is not 0.0.0.0, and this host's name].
    #[arg(long = "name", value_name = "NAME")]
    names: Vec<String>,
    /// How long enrollment certificates are valid; agents renew them when a third is left.
    #[arg(long, default_value = "30d")]
    certificate_validity: humantime::Duration,
}

pub async fn execute(command: FleetCommand, format: Format) -> anyhow::Result<ExitStatus> {
    match command {
        FleetCommand::Serve(args) => serve(args, format).await,
        FleetCommand::Token(TokenCommand::Create { dir, ttl, uses }) => {
            let dir = dir.fleet()?;
            let settings = fleet::settings(&dir)?;
            let token = tokens::create(&dir, *ttl, Some(uses))?;
            let pin = fleet::ca_pin(&dir)?;
            let address = settings.advertised();
            let line = format!("factbuoy agent join {address} --token {token} --ca-pin {pin}");
            match format {
                Format::Table => emit(&line),
                machine => emit_document(
                    &serde_json::json!({
                        "address": address, "token": token, "ca_pin": pin, "command": line,
                    }),
                    machine,
                ),
            }
            Ok(ExitStatus::Success)
        }
        FleetCommand::Token(TokenCommand::List(dir)) => {
            let tokens = tokens::list(&dir.fleet()?)?;
            match format {
                Format::Table => {
                    emit("ID            EXPIRES                USES LEFT  USED");
                    for t in &tokens {
                        let left = t.uses_left.map_or("unlimited".into(), |n| n.to_string());
                        let expired = if tokens::expired(&t.expires) {
                            " (expired)"
                        } else {
                            ""
                        };
                        emit(&format!(
                            "{:<13} {:<22} {:<10} {}{expired}",
                            t.id, t.expires, left, t.used
                        ));
                    }
                }
                machine => emit_document(&tokens, machine),
            }
            Ok(ExitStatus::Success)
        }
        FleetCommand::Token(TokenCommand::Delete { id, dir }) => {
            anyhow::ensure!(
                tokens::delete(&dir.fleet()?, &id)?,
                "no token {id:?} in this fleet; `factbuoy fleet token list` shows them"
            );
            emit(&format!("deleted token {id}"));
            Ok(ExitStatus::Success)
        }
        FleetCommand::Nodes(dir) => nodes(&dir.fleet()?, format),
        FleetCommand::Revoke { node, dir } => {
            let dir = dir.fleet()?;
            anyhow::ensure!(
                registry::load(&dir)?.contains_key(&node),
                "no node {node} is enrolled in this fleet; `factbuoy fleet nodes` lists them"
            );
            registry::revoke(&dir, &node)?;
            emit(&format!(
                "revoked {node}: its agent is refused at its next request; it may join again only with a new token"
            ));
            Ok(ExitStatus::Success)
        }
    }
}

async fn serve(args: ServeArgs, format: Format) -> anyhow::Result<ExitStatus> {
    let dir = args.dir.fleet()?;
    let mut names = args.names;
    if names.is_empty() {
        if !args.listen.ip().is_unspecified() {
            names.push(args.listen.ip().to_string());
        }
        if let Some(host) = sysinfo::System::host_name() {
            names.push(host);
        }
    }
    let settings = FleetSettings {
        listen: args.listen,
        server_names: names,
        certificate_validity_seconds: args.certificate_validity.as_secs().max(10),
    };
    let running = fleet::serve(dir.clone(), settings, factbuoy_catalog::bundled_component).await?;
    let document = serde_json::json!({
        "address": running.address,
        "advertised": running.settings.advertised(),
        "dir": dir.root(),
    });
    match format {
        Format::Table => emit(&format!(
            "fleet listening on {} (agents dial {}); `factbuoy fleet token create` makes a join token",
            running.address,
            running.settings.advertised()
        )),
        machine => emit_document(&document, machine),
    }
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = terminate.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    drop(running);
    Ok(ExitStatus::Success)
}

/// One line of `fleet nodes`.
#[derive(Serialize)]
struct NodeLine {
    name: NodeName,
    last_seen: Option<String>,
    agent_version: Option<String>,
    enrolled_at: String,
    certificate_expires: String,
    revoked: bool,
}

fn nodes(dir: &FleetDir, format: Format) -> anyhow::Result<ExitStatus> {
    let lines: Vec<NodeLine> = registry::load(dir)?
        .into_values()
        .map(|record| NodeLine {
            revoked: registry::is_revoked(dir, &record.name),
            name: record.name,
            last_seen: record.last_seen,
            agent_version: record.agent_version,
            enrolled_at: record.enrolled_at,
            certificate_expires: record.certificate_expires,
        })
        .collect();
    match format {
        Format::Table => {
            emit(
                "NAME                 LAST SEEN              AGENT             ENROLLED               CERTIFICATE EXPIRES",
            );
            for n in &lines {
                let revoked = if n.revoked { "  (revoked)" } else { "" };
                emit(&format!(
                    "{:<20} {:<22} {:<17} {:<22} {}{revoked}",
                    n.name.as_str(),
                    n.last_seen.as_deref().unwrap_or("never"),
                    n.agent_version.as_deref().unwrap_or("-"),
                    n.enrolled_at,
                    n.certificate_expires
                ));
            }
        }
        machine => emit_document(&lines, machine),
    }
    Ok(ExitStatus::Success)
}

#[derive(Debug, Args)]
pub struct JoinArgs {
    /// The fleet's address, HOST:PORT, as the join line names it.
    address: String,
    /// The join token, ID.SECRET.
    #[arg(long, env = "FACTBUOY_JOIN_TOKEN", hide_env_values = true)]
    token: String,
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
    fn dir(&self) -> anyhow::Result<StateDir> {
        Ok(StateDir::new(match &self.state_dir {
            Some(dir) => dir.clone(),
            None => match std::env::var_os("STATE_DIRECTORY") {
                Some(dir) => PathBuf::from(dir),
                None => runs::state_dir()?.join("agent"),
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

pub async fn join(args: JoinArgs, format: Format) -> anyhow::Result<ExitStatus> {
    let node = match args.node {
        Some(node) => node,
        None => NodeName::parse(&plan::node_name(
            &sysinfo::System::host_name().unwrap_or_default(),
        ))
        .context("this host's name makes no valid node name; name it with --node")?,
    };
    let state = args.state.dir()?;
    let membership = factbuoy_agent::fleet::join(
        &args.address,
        &args.token,
        &args.ca_pin,
        node,
        &state,
        Duration::from_secs(60),
    )
    .await?;
    match format {
        Format::Table => emit(&format!(
            "joined the fleet at {} as {}; `factbuoy agent serve` takes part in its runs",
            membership.fleet, membership.node
        )),
        machine => emit_document(&membership, machine),
    }
    Ok(ExitStatus::Success)
}

pub async fn serve_agent(args: AgentServeArgs) -> anyhow::Result<ExitStatus> {
    let state = args.state.dir()?;
    let options = ServeOptions {
        host_root: args.root,
        retry_for: *args.retry_for,
    };
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        // Refused (revoked, say): exit 1, which the systemd unit does not restart.
        served = factbuoy_agent::fleet::serve(&state, &options) => {
            served.map_err(|e| Ended::Failed(format!("{e:#}")))?
        }
        _ = terminate.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    Ok(ExitStatus::Success)
}

/// Where a fleet run is followed from this machine: the fleet's operator credentials and the
/// run's operator listener.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct FleetRunAt {
    pub run_id: String,
    /// The run's operator listener, HOST:PORT.
    pub fleet_operator_address: String,
    /// The fleet's operator credentials: `client.pem`, `client.key`.
    pub credentials: PathBuf,
    /// The run's CA certificate, PEM.
    pub run_ca: String,
}

impl FleetRunAt {
    /// An operator client of the run.
    pub fn operator(&self) -> anyhow::Result<Client> {
        let identity = Identity {
            ca_pem: self.run_ca.clone(),
            ..operator_identity(&self.credentials)?
        };
        Ok(Client::new(&self.fleet_operator_address, &identity)?
            .with_timeout(Duration::from_secs(10)))
    }
}

fn operator_identity(credentials: &Path) -> anyhow::Result<Identity> {
    Identity::from_files(
        &credentials.join("ca.pem"),
        &credentials.join("client.pem"),
        &credentials.join("client.key"),
    )
    .with_context(|| {
        format!(
            "reading the fleet's operator credentials in {}; name them with --fleet-credentials (`operator/` in the fleet's directory)",
            credentials.display()
        )
    })
}

/// How long a fleet run may go past its timeout before the CLI stops following it.
const PACKAGING_GRACE: Duration = Duration::from_secs(300);

/// `run`'s options for a fleet run.
#[derive(Debug, Args)]
pub struct FleetRunArgs {
    /// Collect every node enrolled in the fleet at ADDRESS (HOST:PORT; see docs/fleet.md),
    /// follow the run, download the bundle into --out.
    #[arg(long = "fleet", value_name = "ADDRESS", conflicts_with = "kubernetes")]
    pub address: Option<String>,
    /// The fleet's operator credentials [default: operator/ in the default fleet directory,
    /// ~/.local/state/factbuoy/fleet].
    #[arg(long, value_name = "DIR", requires = "address")]
    fleet_credentials: Option<PathBuf>,
    /// How long a node may stay silent (its machine off, say) before its results are given up
    /// as lost.
    #[arg(long, default_value_t = factbuoy_aggregator::config::DEFAULT_LOST_AFTER.into(), requires = "address")]
    lost_after: humantime::Duration,
    /// Start a run every PERIOD (`24h`, say) until stopped, each with its own bundle in --out;
    /// a run that fails is reported and the schedule goes on.
    #[arg(long, value_name = "PERIOD", requires = "address")]
    every: Option<humantime::Duration>,
}

/// `factbuoy run --fleet ADDRESS`: starts a run over every enrolled node, follows it and
/// downloads its bundle into `out`; with `--every`, again each period until stopped.
pub async fn run(
    args: &FleetRunArgs,
    plugin_args: &plan::PluginArgs,
    timeout: Duration,
    out: &Path,
    format: Format,
) -> anyhow::Result<ExitStatus> {
    let address = args.address.as_deref().expect("called for --fleet only");
    let credentials = match &args.fleet_credentials {
        Some(dir) => dir.clone(),
        None => FleetDir::new(default_fleet_dir()?).operator(),
    };
    let identity = operator_identity(&credentials)?;
    let runtime = Arc::new(Runtime::new(RuntimeOptions {
        limits: Limits {
            deadline: *plugin_args.plugin_timeout,
            ..Limits::default()
        },
        ..RuntimeOptions::default()
    })?);
    let plugins = if plugin_args.plugins.is_empty() {
        plan::default_plugins(Path::new("/"))
    } else {
        plugin_args.plugins.clone()
    };
    let planned = plan::build(&runtime, &plugin_args.choices(&plugins)).await?;
    drop(runtime);
    let request = FleetRunRequest {
        plugins: planned
            .plans
            .iter()
            .map(serde_json::to_value)
            .collect::<Result<_, _>>()?,
        timeout_seconds: timeout.as_secs().max(1),
        lost_after_seconds: args.lost_after.as_secs().max(1),
    };
    let fleet = Client::new(address, &identity)?;
    let once = || {
        run_once(
            &fleet,
            &request,
            &planned.components,
            &credentials,
            timeout,
            out,
            format,
        )
    };
    let Some(every) = args.every else {
        return once().await;
    };
    loop {
        let next = tokio::time::Instant::now() + *every;
        match once().await {
            Ok(_) => {}
            Err(e) => eprintln!("the scheduled run failed: {e:#}; the next one starts on time"),
        }
        tokio::time::sleep_until(next).await;
    }
}

/// One fleet run, from its request to its bundle in `out`. The plugins from files
/// (`components`: digest, bytes) are stored in the fleet first, each only if it lacks them.
async fn run_once(
    fleet: &Client,
    request: &FleetRunRequest,
    components: &[(String, Vec<u8>)],
    credentials: &Path,
    timeout: Duration,
    out: &Path,
    format: Format,
) -> anyhow::Result<ExitStatus> {
    let address = fleet.address();
    for (sha256, wasm) in components {
        if fleet
            .store_fleet_plugin(sha256, wasm)
            .await
            .with_context(|| format!("storing plugin {sha256} in the fleet"))?
        {
            eprintln!("stored plugin {sha256} ({} bytes) in the fleet", wasm.len());
        }
    }
    let started = fleet
        .start_fleet_run(request)
        .await
        .context("asking the fleet to start the run")?;
    let host = address
        .rsplit_once(':')
        .map(|(host, _)| host)
        .context("the fleet address is not HOST:PORT")?;
    let at = FleetRunAt {
        run_id: started.run_id.clone(),
        fleet_operator_address: format!("{host}:{}", started.operator_port),
        credentials: credentials.to_owned(),
        run_ca: started.ca.clone(),
    };
    runs::remember(&RunAt::Fleet(at.clone()))?;
    eprintln!(
        "run {} (fleet run {}): {} nodes",
        started.run_id,
        started.number,
        started.nodes.len()
    );
    let operator = at.operator()?;
    let stuck = format!("see the fleet aggregator's log at {address}");
    let status = crate::kube_run::follow(
        &operator,
        &started.run_id,
        timeout + PACKAGING_GRACE,
        &stuck,
        format,
    )
    .await?;
    crate::kube_run::finish(&operator, &status, out, "factbuoy retrieve", format).await
}
