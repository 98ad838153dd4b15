//! A fleet from its operator's side: serving it ([`serve`]), administering it on the machine
//! that serves it ([`Fleet`]: join tokens, enrolled nodes, revocation, pruning), and runs over
//! its nodes ([`FleetTarget`]). The fleet's directory is found by one rule,
//! [`StateDir::find_fleet`], for `run --fleet` and every administrative command alike.

mod run;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;

use factbuoy_aggregator::fleet::{
    self as served, FleetDir, FleetSettings, PortRange, RunningFleet,
};
use factbuoy_aggregator::fleet::{registry, tokens};
use factbuoy_protocol::names::NodeName;
use serde::Serialize;

use crate::prune::{self, PruneOptions, Pruning};
use crate::state::StateDir;

pub use run::{FleetStart, FleetTarget};
pub(crate) use run::{Requested, start};
pub use tokens::Token;

/// A fleet's directory on the machine that serves it, holding a fleet.
pub struct Fleet {
    dir: FleetDir,
}

/// A join token just made, and the line that joins a machine with it.
#[derive(Debug, Clone, Serialize)]
pub struct JoinToken {
    /// The address agents dial, HOST:PORT.
    pub address: String,
    /// The token, `ID.SECRET`: shown once, never stored.
    pub token: String,
    /// The pin of the fleet's CA, which the joining agent checks.
    pub ca_pin: String,
    /// The shell line that joins a machine, the token on standard input (a command line is
    /// readable by every user of the machine, in /proc, while the join runs).
    pub command: String,
}

/// A node enrolled in the fleet.
#[derive(Debug, Clone, Serialize)]
pub struct FleetNode {
    /// The name it was enrolled as.
    pub name: NodeName,
    /// When its agent last asked for work, RFC 3339; `None`: never.
    pub last_seen: Option<String>,
    /// The factbuoy version its agent last reported.
    pub agent_version: Option<String>,
    /// When it joined, RFC 3339.
    pub enrolled_at: String,
    /// When its certificate expires, RFC 3339.
    pub certificate_expires: String,
    /// Whether it was revoked: its agent is refused.
    pub revoked: bool,
}

/// The fleet's operator credentials as one document, to carry them from the machine (or pod)
/// that serves the fleet to an operator's: `fleet credentials export | fleet credentials import`.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct OperatorCredentials {
    /// The fleet's CA certificate, which the operator trusts the fleet's server by.
    pub ca_pem: String,
    /// The operator's certificate.
    pub client_pem: String,
    /// Its private key.
    pub client_key: String,
}

impl OperatorCredentials {
    /// Writes them into `dir` (made 0700, the key 0600) as `run --fleet --fleet-credentials DIR`
    /// reads them: `ca.pem`, `client.pem`, `client.key`.
    pub fn write(&self, dir: &Path) -> anyhow::Result<()> {
        use std::os::unix::fs::DirBuilderExt;
        // Checked before anything is made: a half-written directory would be read later.
        factbuoy_pki::fingerprint_pem(&self.ca_pem).context("the CA certificate does not parse")?;
        factbuoy_pki::fingerprint_pem(&self.client_pem)
            .context("the operator certificate does not parse")?;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("making {}", dir.display()))?;
        std::fs::write(dir.join("ca.pem"), &self.ca_pem)?;
        std::fs::write(dir.join("client.pem"), &self.client_pem)?;
        factbuoy_pki::write_private(&dir.join("client.key"), &self.client_key)?;
        Ok(())
    }
}

impl Fleet {
    /// The fleet's operator credentials (its `operator/`), to export.
    pub fn operator_credentials(&self) -> anyhow::Result<OperatorCredentials> {
        let dir = self.dir.operator();
        let read = |name: &str| {
            std::fs::read_to_string(dir.join(name))
                .with_context(|| format!("reading {}", dir.join(name).display()))
        };
        Ok(OperatorCredentials {
            ca_pem: read("ca.pem")?,
            client_pem: read("client.pem")?,
            client_key: read("client.key")?,
        })
    }

    /// The fleet in `dir`, else the one [`StateDir::find_fleet`] finds; it must hold a fleet.
    pub fn open(dir: Option<&Path>) -> anyhow::Result<Fleet> {
        let dir = FleetDir::new(match dir {
            Some(dir) => dir.to_owned(),
            None => StateDir::from_env()?.find_fleet(None)?,
        });
        anyhow::ensure!(
            dir.holds_fleet(),
            "no fleet in {}: `factbuoy fleet serve --dir {}` serves one there, or name a fleet's directory with --dir",
            dir.root().display(),
            shell_word(dir.root())
        );
        Ok(Fleet { dir })
    }

    /// Makes a join token valid for `ttl` and `uses` joins.
    pub fn create_token(&self, ttl: Duration, uses: u32) -> anyhow::Result<JoinToken> {
        let settings = served::settings(&self.dir)?;
        let token = tokens::create(&self.dir, ttl, Some(uses))?;
        let ca_pin = served::ca_pin(&self.dir)?;
        let address = settings.advertised();
        let command = format!(
            "echo {token} | factbuoy agent join {address} --token-file - --ca-pin {ca_pin}"
        );
        Ok(JoinToken {
            address,
            token,
            ca_pin,
            command,
        })
    }

    /// The fleet's join tokens, without their secrets.
    pub fn tokens(&self) -> anyhow::Result<Vec<Token>> {
        Ok(tokens::list(&self.dir)?)
    }

    /// Deletes the join token `id`: no machine joins with it any more.
    pub fn delete_token(&self, id: &str) -> anyhow::Result<()> {
        anyhow::ensure!(
            tokens::delete(&self.dir, id)?,
            "no token {id:?} in this fleet; `factbuoy fleet token list` shows them"
        );
        Ok(())
    }

    /// The nodes enrolled in the fleet, revoked ones included.
    pub fn nodes(&self) -> anyhow::Result<Vec<FleetNode>> {
        Ok(registry::load(&self.dir)?
            .into_values()
            .map(|record| FleetNode {
                revoked: registry::is_revoked(&self.dir, &record.name),
                name: record.name,
                last_seen: record.last_seen,
                agent_version: record.agent_version,
                enrolled_at: record.enrolled_at,
                certificate_expires: record.certificate_expires,
            })
            .collect())
    }

    /// Revokes `node`: its agent is refused at its next request, and may join again only with
    /// a new token.
    pub fn revoke(&self, node: &NodeName) -> anyhow::Result<()> {
        anyhow::ensure!(
            registry::load(&self.dir)?.contains_key(node),
            "no node {node} is enrolled in this fleet; `factbuoy fleet nodes` lists them"
        );
        Ok(registry::revoke(&self.dir, node)?)
    }

    /// Prunes the fleet's runs that ended ([`prune::prune_fleet`]).
    pub fn prune(&self, options: &PruneOptions) -> anyhow::Result<Pruning> {
        prune::prune_fleet(&self.dir, options)
    }
}

/// How `fleet serve` serves, as its operator chose.
pub struct FleetServeOptions {
    /// The fleet's directory [default: `fleet/` of the [`StateDir`]].
    pub dir: Option<PathBuf>,
    /// Where to listen, for agents and operators alike; port 0 picks one, kept across restarts.
    pub listen: SocketAddr,
    /// The names and addresses agents dial [default: the listen address when it is not
    /// unspecified, and this host's name].
    pub names: Vec<String>,
    /// How long enrollment certificates are valid.
    pub certificate_validity: Duration,
    /// How long a finished run still answers on its listeners.
    pub serve_finished_for: Duration,
    /// How often an idle line is written on an agent's waiting connection.
    pub idle_every: Duration,
    /// The ports runs listen on [default: any free ones].
    pub run_ports: Option<PortRange>,
}

/// A fleet this process serves, until it is dropped.
pub struct Serving {
    /// The fleet as it serves.
    pub running: RunningFleet,
    /// Its directory.
    pub dir: PathBuf,
    /// The command that makes a join token, as it runs from here: with `--dir` exactly when
    /// [`Fleet::open`] would not find this fleet without it.
    pub token_create: String,
}

/// Serves the fleet in `options.dir` (made on the first start), and remembers its addresses so
/// that `run --fleet ADDRESS` from this machine finds its operator credentials.
pub async fn serve(options: FleetServeOptions) -> anyhow::Result<Serving> {
    let state = StateDir::from_env()?;
    let dir = FleetDir::new(options.dir.unwrap_or_else(|| state.fleet()));
    let mut names = options.names;
    if names.is_empty() {
        if !options.listen.ip().is_unspecified() {
            names.push(options.listen.ip().to_string());
        }
        if let Some(host) = sysinfo::System::host_name() {
            names.push(host);
        }
    }
    let settings = FleetSettings {
        listen: options.listen,
        server_names: names,
        certificate_validity_seconds: options.certificate_validity.as_secs().max(10),
        finished_run_seconds: options.serve_finished_for.as_secs(),
        idle_seconds: options.idle_every.as_secs(),
        run_ports: options.run_ports,
    };
    let running = served::serve(dir.clone(), settings, factbuoy_catalog::bundled_component).await?;
    let port = running.address.port();
    let mut addresses = vec![running.settings.advertised(), running.address.to_string()];
    if running.address.ip().is_unspecified() || running.address.ip().is_loopback() {
        addresses.extend([format!("127.0.0.1:{port}"), format!("localhost:{port}")]);
    }
    if let Err(e) = state.remember_fleet(&addresses, dir.root()) {
        tracing::warn!("remembering where this fleet's operator credentials are: {e:#}");
    }
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
    Ok(Serving {
        running,
        dir: dir.root().to_owned(),
        token_create,
    })
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
