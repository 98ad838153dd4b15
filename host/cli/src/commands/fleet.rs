//! `factbuoy fleet`: a long-lived aggregator for machines outside any cluster: serve it, make
//! join tokens, list and revoke nodes, prune finished runs. A machine's side is `factbuoy agent
//! join|serve`, a run over every enrolled node `factbuoy run --fleet`. docs/fleet.md is the
//! guide; the operator library's `fleet` module does the work, over the aggregator's.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use factbuoy_aggregator::fleet::PortRange;
use factbuoy_operator::fleet::{self, Fleet, OperatorCredentials};
use factbuoy_operator::prune::PruneOptions;
use factbuoy_protocol::names::NodeName;

use crate::output::{ExitStatus, Format, emit, emit_document};

mod generate;

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
    /// Remove finished runs' directories and their bundles from the fleet's directory.
    #[command(after_help = "Examples:\n  \
        factbuoy fleet prune --older-than 30d --dry-run   # what would be removed\n  \
        factbuoy fleet prune --older-than 30d             # runs that ended a month ago, and their bundles\n  \
        factbuoy fleet prune --older-than 30d --all       # runs without a bundle too")]
    Prune(PruneArgs),
    /// Print (or --apply) the objects that serve a fleet inside a Kubernetes cluster: a
    /// Deployment of one replica, its directory on a PersistentVolumeClaim, a NodePort or
    /// LoadBalancer Service for the machines outside. See docs/fleet.md.
    #[command(after_help = "Examples:\n  \
        factbuoy fleet gen --name 192.0.2.10 > hub.yaml && kubectl apply -f hub.yaml\n  \
        factbuoy fleet gen --name fleet.example.com --service load-balancer --apply\n  \
        factbuoy fleet gen --name 192.0.2.10 --storage-class local-path -o json")]
    Gen(generate::GenArgs),
    /// Carry the fleet's operator credentials to another machine: `export` prints them where
    /// the fleet is served (its pod, say), `import` writes them for `run --fleet`.
    #[command(
        subcommand,
        after_help = "Examples:\n  \
            kubectl -n factbuoy-fleet exec deploy/factbuoy-fleet -- factbuoy fleet credentials export \\\n    \
            | factbuoy fleet credentials import ~/.config/factbuoy/fleet-operator\n  \
            factbuoy run --fleet 192.0.2.10:30443 --fleet-credentials ~/.config/factbuoy/fleet-operator"
    )]
    Credentials(CredentialsCommand),
}

#[derive(Debug, Subcommand)]
pub enum CredentialsCommand {
    /// Print the fleet's operator credentials (its CA, the operator's certificate and key) as
    /// one JSON document. It holds a private key: send it only to where `import` reads it.
    #[command(after_help = "Examples:\n  \
        factbuoy fleet credentials export > fleet-operator.json\n  \
        kubectl -n factbuoy-fleet exec deploy/factbuoy-fleet -- \\\n    \
        factbuoy fleet credentials export > fleet-operator.json")]
    Export(DirArgs),
    /// Read what `export` printed from standard input and write it into DIR (0700, the key
    /// 0600), the directory `run --fleet --fleet-credentials DIR` reads.
    #[command(after_help = "Examples:\n  \
        factbuoy fleet credentials import fleet-operator < fleet-operator.json\n  \
        factbuoy run --fleet 192.0.2.10:30443 --fleet-credentials fleet-operator")]
    Import {
        /// Where to write `ca.pem`, `client.pem` and `client.key`.
        dir: PathBuf,
    },
}

#[derive(Debug, Args)]
pub struct PruneArgs {
    #[command(flatten)]
    dir: DirArgs,
    /// Only runs that ended longer ago than this, e.g. 12h or 30d (0s: every finished run).
    #[arg(long, value_name = "DURATION")]
    older_than: humantime::Duration,
    /// List what would be removed, and remove nothing.
    #[arg(long)]
    dry_run: bool,
    /// Also remove runs that ended without a bundle (a full disk): their directory holds the
    /// only copy of their results.
    #[arg(long)]
    all: bool,
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
    /// The fleet's directory [default: ~/.local/state/factbuoy/fleet when a fleet was served
    /// from it, else the one fleet served from this machine, as `run --fleet` finds it].
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

impl DirArgs {
    fn fleet(&self) -> anyhow::Result<Fleet> {
        Fleet::open(self.dir.as_deref())
    }
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
    /// How long a finished run still answers `status` and `retrieve` before the fleet closes its
    /// listeners and frees its memory; its bundle stays in the fleet's bundles/ either way.
    #[arg(long, default_value = "1h")]
    serve_finished_for: humantime::Duration,
    /// How often the fleet writes `idle` on an agent's waiting connection, which the agent
    /// answers: keep it under the idle timeout of every NAT, firewall and load balancer between
    /// the agents and the fleet (4 minutes is the shortest common default). Longer costs less
    /// CPU per idle agent. From 1s to 15m.
    #[arg(long, default_value = "170s")]
    idle_every: humantime::Duration,
    /// The ports runs listen on, FIRST-LAST: each run served takes two (for agents, for
    /// operators), a finished one until --serve-finished-for has passed [default: any free
    /// ports]. Behind a firewall or a Kubernetes Service, every port must be known in advance.
    #[arg(long, value_name = "FIRST-LAST")]
    run_ports: Option<PortRange>,
}

pub async fn execute(command: FleetCommand, format: Format) -> anyhow::Result<ExitStatus> {
    match command {
        FleetCommand::Serve(args) => serve(args, format).await,
        FleetCommand::Token(TokenCommand::Create { dir, ttl, uses }) => {
            let join = dir.fleet()?.create_token(*ttl, uses)?;
            match format {
                Format::Table => emit(&join.command),
                machine => emit_document(&join, machine),
            }
            Ok(ExitStatus::Success)
        }
        FleetCommand::Token(TokenCommand::List(dir)) => {
            let tokens = dir.fleet()?.tokens()?;
            match format {
                Format::Table => {
                    let mut rows = vec![vec![
                        "ID".to_owned(),
                        "EXPIRES".to_owned(),
                        "USES LEFT".to_owned(),
                        "USED".to_owned(),
                    ]];
                    for t in &tokens {
                        let expired = if t.expired() { " (expired)" } else { "" };
                        rows.push(vec![
                            t.id.clone(),
                            t.expires.clone(),
                            t.uses_left.map_or("unlimited".into(), |n| n.to_string()),
                            format!("{}{expired}", t.used),
                        ]);
                    }
                    emit(&factbuoy_present::table::aligned(&rows, 0).join("\n"));
                }
                machine => emit_document(&tokens, machine),
            }
            Ok(ExitStatus::Success)
        }
        FleetCommand::Token(TokenCommand::Delete { id, dir }) => {
            dir.fleet()?.delete_token(&id)?;
            emit(&format!("deleted token {id}"));
            Ok(ExitStatus::Success)
        }
        FleetCommand::Nodes(dir) => nodes(&dir.fleet()?, format),
        FleetCommand::Revoke { node, dir } => {
            dir.fleet()?.revoke(&node)?;
            emit(&format!(
                "revoked {node}: its agent is refused at its next request; it may join again only with a new token"
            ));
            Ok(ExitStatus::Success)
        }
        FleetCommand::Gen(args) => generate::generate(args, format).await,
        FleetCommand::Credentials(CredentialsCommand::Export(dir)) => {
            let credentials = dir.fleet()?.operator_credentials()?;
            emit(&serde_json::to_string_pretty(&credentials)?);
            Ok(ExitStatus::Success)
        }
        FleetCommand::Credentials(CredentialsCommand::Import { dir }) => {
            let credentials: OperatorCredentials = serde_json::from_reader(std::io::stdin().lock())
                .context(
                    "reading the credentials on standard input: pipe in what `factbuoy fleet credentials export` printed",
                )?;
            credentials.write(&dir)?;
            emit(&format!(
                "wrote the fleet's operator credentials into {}; `factbuoy run --fleet ADDRESS --fleet-credentials {}` uses them",
                dir.display(),
                dir.display()
            ));
            Ok(ExitStatus::Success)
        }
        FleetCommand::Prune(args) => {
            let options = PruneOptions {
                older_than: *args.older_than,
                dry_run: args.dry_run,
                all: args.all,
            };
            let pruning = args.dir.fleet()?.prune(&options)?;
            match format {
                Format::Table => emit(&crate::pruning::lines(&pruning, args.dry_run).join("\n")),
                machine => emit_document(&pruning, machine),
            }
            Ok(ExitStatus::Success)
        }
    }
}

async fn serve(args: ServeArgs, format: Format) -> anyhow::Result<ExitStatus> {
    // Listening from here on: a kubelet may stop a pod that still waits for the directory.
    let stop = crate::signals::interrupted();
    tokio::pin!(stop);
    let serving = tokio::select! {
        serving = fleet::serve(fleet::FleetServeOptions {
            dir: args.dir.dir,
            listen: args.listen,
            names: args.names,
            certificate_validity: *args.certificate_validity,
            serve_finished_for: *args.serve_finished_for,
            idle_every: *args.idle_every,
            run_ports: args.run_ports,
        }) => serving?,
        signal = &mut stop => {
            tracing::info!("{signal} before the fleet served: stopping");
            return Ok(ExitStatus::Success);
        }
    };
    let running = &serving.running;
    let document = serde_json::json!({
        "address": running.address,
        "advertised": running.settings.advertised(),
        "dir": serving.dir,
        "max_agents": running.max_agents,
    });
    match format {
        Format::Table => emit(&format!(
            "fleet listening on {} (agents dial {}; up to {} at once); `{}` makes a join token",
            running.address,
            running.settings.advertised(),
            running.max_agents,
            serving.token_create
        )),
        machine => emit_document(&document, machine),
    }
    stop.await;
    drop(serving);
    Ok(ExitStatus::Success)
}

fn nodes(fleet: &Fleet, format: Format) -> anyhow::Result<ExitStatus> {
    let lines = fleet.nodes()?;
    match format {
        Format::Table => {
            let mut rows = vec![vec![
                "NAME".to_owned(),
                "LAST SEEN".to_owned(),
                "AGENT".to_owned(),
                "ENROLLED".to_owned(),
                "CERTIFICATE EXPIRES".to_owned(),
            ]];
            for n in &lines {
                let revoked = if n.revoked { "  (revoked)" } else { "" };
                rows.push(vec![
                    n.name.as_str().to_owned(),
                    n.last_seen.clone().unwrap_or_else(|| "never".to_owned()),
                    n.agent_version.clone().unwrap_or_else(|| "-".to_owned()),
                    n.enrolled_at.clone(),
                    format!("{}{revoked}", n.certificate_expires),
                ]);
            }
            emit(&factbuoy_present::table::aligned(&rows, 0).join("\n"));
        }
        machine => emit_document(&lines, machine),
    }
    Ok(ExitStatus::Success)
}
