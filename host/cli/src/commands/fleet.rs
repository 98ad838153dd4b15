//! `factbuoy fleet`: a long-lived aggregator for machines outside any cluster: serve it, make
//! join tokens, list and revoke nodes, prune finished runs. A machine's side is `factbuoy agent
//! join|serve`, a run over every enrolled node `factbuoy run --fleet`. docs/fleet.md is the
//! guide; the aggregator crate's `fleet` module does the work, and the operator library's
//! `prune` the pruning.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use factbuoy_aggregator::fleet::{self, FleetDir, FleetSettings, registry, tokens};
use factbuoy_operator::StateDir;
use factbuoy_operator::prune::{self, PruneOptions};
use factbuoy_protocol::names::NodeName;
use serde::Serialize;

use crate::output::{ExitStatus, Format, emit, emit_document};

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
    /// The fleet named, else the one found as `run --fleet` finds it; it must hold a fleet.
    fn fleet(&self) -> anyhow::Result<FleetDir> {
        let dir = FleetDir::new(match &self.dir {
            Some(dir) => dir.clone(),
            None => StateDir::from_env()?.find_fleet(None)?,
        });
        anyhow::ensure!(
            dir.holds_fleet(),
            "no fleet in {}: `factbuoy fleet serve --dir {}` serves one there, or name a fleet's directory with --dir",
            dir.root().display(),
            shell_word(dir.root())
        );
        Ok(dir)
    }
}

/// `path` as one word of a shell command line: quoted when it holds anything but letters,
/// digits and `/._-+:@%,=`.
fn shell_word(path: &Path) -> String {
    let text = path.display().to_string();
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+:@%,=".contains(c);
    if !text.is_empty() && text.chars().all(plain) {
        text
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
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
            // The token travels on standard input: a command line is readable by every user
            // of the machine (in /proc) while the join runs; `echo` is the shell's own.
            let line = format!(
                "echo {token} | factbuoy agent join {address} --token-file - --ca-pin {pin}"
            );
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
                    let mut rows = vec![vec![
                        "ID".to_owned(),
                        "EXPIRES".to_owned(),
                        "USES LEFT".to_owned(),
                        "USED".to_owned(),
                    ]];
                    for t in &tokens {
                        let expired = if tokens::expired(&t.expires) {
                            " (expired)"
                        } else {
                            ""
                        };
                        rows.push(vec![
                            t.id.clone(),
                            t.expires.clone(),
                            t.uses_left.map_or("unlimited".into(), |n| n.to_string()),
                            format!("{}{expired}", t.used),
                        ]);
                    }
                    emit(&crate::table::aligned(&rows, 0).join("\n"));
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
        FleetCommand::Prune(args) => {
            let options = PruneOptions {
                older_than: *args.older_than,
                dry_run: args.dry_run,
                all: args.all,
            };
            let pruning = prune::prune_fleet(&args.dir.fleet()?, &options)?;
            match format {
                Format::Table => emit(&crate::pruning::lines(&pruning, args.dry_run).join("\n")),
                machine => emit_document(&pruning, machine),
            }
            Ok(ExitStatus::Success)
        }
    }
}

async fn serve(args: ServeArgs, format: Format) -> anyhow::Result<ExitStatus> {
    let state = StateDir::from_env()?;
    let dir = FleetDir::new(match &args.dir.dir {
        Some(dir) => dir.clone(),
        None => state.fleet(),
    });
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
        finished_run_seconds: args.serve_finished_for.as_secs(),
        idle_seconds: args.idle_every.as_secs(),
    };
    let running = fleet::serve(dir.clone(), settings, factbuoy_catalog::bundled_component).await?;
    // `run --fleet ADDRESS` from this machine finds the operator credentials of this fleet.
    let port = running.address.port();
    let mut addresses = vec![running.settings.advertised(), running.address.to_string()];
    if running.address.ip().is_unspecified() || running.address.ip().is_loopback() {
        addresses.extend([format!("127.0.0.1:{port}"), format!("localhost:{port}")]);
    }
    if let Err(e) = state.remember_fleet(&addresses, dir.root()) {
        tracing::warn!("remembering where this fleet's operator credentials are: {e:#}");
    }
    // The hint must run as printed: it names the directory unless the fleet commands find it.
    let found = state.find_fleet(None).ok().map(std::path::absolute);
    let token_create = match found {
        Some(Ok(found)) if std::path::absolute(dir.root())? == found => {
            "factbuoy fleet token create".to_owned()
        }
        _ => format!(
            "factbuoy fleet token create --dir {}",
            shell_word(dir.root())
        ),
    };
    let document = serde_json::json!({
        "address": running.address,
        "advertised": running.settings.advertised(),
        "dir": dir.root(),
        "max_agents": running.max_agents,
    });
    match format {
        Format::Table => emit(&format!(
            "fleet listening on {} (agents dial {}; up to {} at once); `{token_create}` makes a \
             join token",
            running.address,
            running.settings.advertised(),
            running.max_agents
        )),
        machine => emit_document(&document, machine),
    }
    crate::signals::interrupted().await;
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
            emit(&crate::table::aligned(&rows, 0).join("\n"));
        }
        machine => emit_document(&lines, machine),
    }
    Ok(ExitStatus::Success)
}
