//! Runs remembered across processes: the current run in the state directory's
//! `current-run.json`, and each Kubernetes run's record beside its operator credentials, so
//! that `status` and `retrieve` find a run from another terminal by its id or as the current
//! one.
//!
//! A local run is found by its run directory (its operator listener is on loopback); a
//! Kubernetes run by its cluster, namespace and run id (its operator listener is reached through
//! port-forward); a fleet run by the fleet's address and operator credentials.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use factbuoy_aggregator::RunDir;
use factbuoy_aggregator::fleet::FleetDir;
use factbuoy_kubernetes::ClusterRef;
use factbuoy_protocol::Client;
use factbuoy_protocol::tls::Identity;

use crate::error::{Error, Result};
use crate::state::StateDir;

/// The name of a Kubernetes run's record in its operator directory.
const KUBE_RUN_FILE: &str = "run.json";
/// The folder of fleet runs' records in the state directory, one `<run id>.json` each.
const FLEET_RUNS_DIR: &str = "fleet-runs";
/// The fleets served from this machine: the addresses they are dialled at, and their folders.
const FLEETS_FILE: &str = "fleets.json";

/// Where a run is. Serialised untagged: `current-run.json` files written by earlier versions
/// read back.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RunRecord {
    /// A run on this host.
    Local(LocalRun),
    /// A run in a Kubernetes cluster.
    Kubernetes(KubeRun),
    /// A run of a fleet (`run --fleet`).
    Fleet(FleetRun),
}

/// A run on this host, served from its run directory.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LocalRun {
    /// The run's id.
    pub run_id: String,
    /// Its run directory.
    pub run_dir: PathBuf,
    /// Its operator listener, on loopback.
    pub operator_address: SocketAddr,
}

/// A Kubernetes run: which cluster, as the command that started it named it, and where in it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KubeRun {
    /// The run's id.
    pub run_id: String,
    /// The namespace of its objects.
    pub namespace: String,
    /// The kubeconfig the run was started with, absolute.
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context the run was started with.
    pub context: Option<String>,
    /// When the run was created, RFC 3339 (absent in records written before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
}

/// A fleet run: the fleet's operator credentials and the run's operator listener.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FleetRun {
    /// The run's id.
    pub run_id: String,
    /// The run's operator listener, HOST:PORT.
    pub fleet_operator_address: String,
    /// The fleet's operator credentials: `client.pem`, `client.key`.
    pub credentials: PathBuf,
    /// The run's CA certificate, PEM.
    pub run_ca: String,
    /// When the run was started, RFC 3339 (absent in records written before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
}

/// Which run a command talks about.
#[derive(Debug, Clone)]
pub enum WhichRun {
    /// The current run: the one started last from this machine.
    Current,
    /// A run by id: a Kubernetes run started from this machine, or a local run.
    Id(String),
    /// The local run in this directory.
    Dir(PathBuf),
}

impl RunRecord {
    /// The run's id.
    pub fn run_id(&self) -> &str {
        match self {
            RunRecord::Local(run) => &run.run_id,
            RunRecord::Kubernetes(run) => &run.run_id,
            RunRecord::Fleet(run) => &run.run_id,
        }
    }
}

impl KubeRun {
    /// The cluster it runs in: the one it was started with, with `overrides` first.
    pub fn cluster(&self, overrides: &ClusterRef) -> ClusterRef {
        ClusterRef {
            kubeconfig: overrides
                .kubeconfig
                .clone()
                .or_else(|| self.kubeconfig.clone()),
            context: overrides.context.clone().or_else(|| self.context.clone()),
        }
    }

    /// Saves the record beside the run's operator credentials, where [`StateDir::locate`] finds
    /// it by run id.
    pub(crate) fn save(&self, state: &StateDir) -> anyhow::Result<()> {
        let path = state.kubernetes_run(&self.run_id).join(KUBE_RUN_FILE);
        std::fs::write(&path, serde_json::to_string_pretty(self)?)
            .with_context(|| format!("writing {}", path.display()))
    }

    fn load(state: &StateDir, run_id: &str) -> anyhow::Result<Option<KubeRun>> {
        let path = state.kubernetes_run(run_id).join(KUBE_RUN_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(Some(serde_json::from_str(&text).with_context(|| {
                format!("{} is not a Kubernetes run's record", path.display())
            })?)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }
}

impl FleetRun {
    /// Saves the record in the state directory, where [`StateDir::records`] lists it.
    pub(crate) fn save(&self, state: &StateDir) -> anyhow::Result<()> {
        let dir = state.root().join(FLEET_RUNS_DIR);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let path = dir.join(format!("{}.json", self.run_id));
        factbuoy_pki::write_private(&path, &serde_json::to_string_pretty(self)?)?;
        Ok(())
    }

    /// The record of the fleet run `run_id` started from this machine, if there is one.
    fn load(state: &StateDir, run_id: &str) -> anyhow::Result<Option<FleetRun>> {
        // A run id is a file name here: nothing that would leave the folder.
        if run_id.is_empty()
            || !run_id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-')
        {
            return Ok(None);
        }
        let path = state
            .root()
            .join(FLEET_RUNS_DIR)
            .join(format!("{run_id}.json"));
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(anyhow::Error::from(e).context(format!("reading {}", path.display())));
            }
        };
        Ok(Some(serde_json::from_str(&text).with_context(|| {
            format!("{} is unreadable", path.display())
        })?))
    }

    /// An operator client of the run.
    pub fn operator(&self) -> anyhow::Result<Client> {
        let identity = Identity {
            ca_pem: self.run_ca.clone(),
            ..fleet_operator_identity(&self.credentials)?
        };
        Ok(Client::new(&self.fleet_operator_address, &identity)?
            .with_timeout(Duration::from_secs(10)))
    }
}

/// The fleet's operator credentials in `credentials` (`ca.pem`, `client.pem`, `client.key`).
pub(crate) fn fleet_operator_identity(credentials: &Path) -> anyhow::Result<Identity> {
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

impl StateDir {
    /// Makes `run` the current run.
    pub fn remember(&self, run: &RunRecord) -> Result<()> {
        self.create()?;
        factbuoy_pki::write_private(
            &self.current_run(),
            &serde_json::to_string_pretty(run).map_err(anyhow::Error::from)?,
        )
        .map_err(anyhow::Error::from)?;
        Ok(())
    }

    /// The run `which` names: the local run in a directory, else the one with an id (a
    /// Kubernetes run's record, a fleet run's, else a local run directory), else the current
    /// one.
    pub fn locate(&self, which: &WhichRun) -> Result<RunRecord> {
        match which {
            WhichRun::Dir(dir) => local(dir),
            WhichRun::Id(run_id) => {
                if let Some(kube) = KubeRun::load(self, run_id)? {
                    return Ok(RunRecord::Kubernetes(kube));
                }
                // A fleet run by its id, as `factbuoy runs` lists it.
                if let Some(fleet) = FleetRun::load(self, run_id)? {
                    return Ok(RunRecord::Fleet(fleet));
                }
                let dir = self.local_runs().join(run_id);
                if !dir.exists() {
                    return Err(Error::NoSuchRun(format!(
                        "no run {run_id} is known here: neither a Kubernetes or fleet run started from this machine nor a local run in {}",
                        dir.display()
                    )));
                }
                local(&dir)
            }
            WhichRun::Current => {
                let path = self.current_run();
                let text = match std::fs::read_to_string(&path) {
                    Ok(text) => text,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        return Err(Error::NoSuchRun(format!(
                            "no current run ({} is missing); start one with `factbuoy run`",
                            path.display()
                        )));
                    }
                    Err(e) => {
                        return Err(anyhow::Error::from(e)
                            .context(format!("reading {}", path.display()))
                            .into());
                    }
                };
                Ok(serde_json::from_str(&text)
                    .with_context(|| format!("{} is unreadable", path.display()))?)
            }
        }
    }

    /// Every run this machine knows of: the local runs in its runs folder, and the Kubernetes
    /// and fleet runs started from here. A record that cannot be read is left out with a
    /// warning.
    pub fn records(&self) -> anyhow::Result<Vec<RunRecord>> {
        let mut records = Vec::new();
        for dir in entries(&self.local_runs())? {
            match local(&dir) {
                Ok(record) => records.push(record),
                Err(e) => tracing::warn!("{}: {e}", dir.display()),
            }
        }
        for dir in entries(&self.root().join("kube"))? {
            let run_id = dir
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            match KubeRun::load(self, &run_id) {
                Ok(Some(record)) => records.push(RunRecord::Kubernetes(record)),
                Ok(None) => {}
                Err(e) => tracing::warn!("{e:#}"),
            }
        }
        for path in entries(&self.root().join(FLEET_RUNS_DIR))? {
            let read = std::fs::read_to_string(&path)
                .map_err(anyhow::Error::from)
                .and_then(|text| Ok(serde_json::from_str::<FleetRun>(&text)?));
            match read {
                Ok(record) => records.push(RunRecord::Fleet(record)),
                Err(e) => tracing::warn!("{}: {e:#}", path.display()),
            }
        }
        Ok(records)
    }

    /// Remembers that the fleet in `dir` is served at `addresses` (HOST:PORT), so that a run
    /// started from this machine finds its operator credentials whatever `--dir` it was served
    /// from.
    pub fn remember_fleet(&self, addresses: &[String], dir: &Path) -> anyhow::Result<()> {
        self.create()?;
        let path = self.root().join(FLEETS_FILE);
        let mut fleets = self.fleets();
        fleets.retain(|_, known| known != dir);
        for address in addresses {
            fleets.insert(address.clone(), std::path::absolute(dir)?);
        }
        factbuoy_pki::write_private(&path, &serde_json::to_string_pretty(&fleets)?)?;
        Ok(())
    }

    /// The directory of the fleet a command means, by one rule for `run --fleet ADDRESS` and
    /// the `fleet` commands: the fleet served from this machine at `address`, when one is;
    /// else the state directory's `fleet/` when a fleet was served from it; else the one fleet
    /// served from this machine. With none, `fleet/`; with several, an error naming them.
    pub fn find_fleet(&self, address: Option<&str>) -> anyhow::Result<PathBuf> {
        let fleets = self.fleets();
        if let Some(dir) = address.and_then(|address| fleets.get(address)) {
            return Ok(dir.clone());
        }
        let default = self.fleet();
        if FleetDir::new(&default).holds_fleet() {
            return Ok(default);
        }
        let mut served: Vec<PathBuf> = fleets
            .into_values()
            .filter(|dir| FleetDir::new(dir).holds_fleet())
            .collect();
        served.sort();
        served.dedup();
        match served.as_slice() {
            [] => Ok(default),
            [one] => Ok(one.clone()),
            several => anyhow::bail!(
                "{} fleets are served from this machine ({}); name one with --dir DIR (with `run --fleet`, its operator credentials with --fleet-credentials DIR/operator)",
                several.len(),
                several
                    .iter()
                    .map(|dir| dir.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    fn fleets(&self) -> std::collections::BTreeMap<String, PathBuf> {
        std::fs::read_to_string(self.root().join(FLEETS_FILE))
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or_default()
    }

    /// Forgets the current run if it is the local run in `run_dir` (a pruned run).
    pub(crate) fn forget_if_current(&self, run_dir: &Path) -> anyhow::Result<()> {
        let path = self.current_run();
        let Ok(text) = std::fs::read_to_string(&path) else {
            return Ok(());
        };
        if let Ok(RunRecord::Local(current)) = serde_json::from_str(&text)
            && current.run_dir == run_dir
        {
            std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
        }
        Ok(())
    }

    /// Refuses a run this machine knows as a local or fleet run, whose state `delete` does not
    /// remove, naming the command that does.
    pub fn refuse_delete_of_local_or_fleet_run(&self, run_id: &str) -> anyhow::Result<()> {
        let known = self.records()?.into_iter().find(|r| r.run_id() == run_id);
        match known {
            Some(RunRecord::Local(run)) => anyhow::bail!(
                "run {run_id} is a local run (in {}): `factbuoy delete` removes what a Kubernetes run made in its cluster; `factbuoy prune` removes the state of local runs that ended (`--all` also of those that ended without a bundle, `--dry-run` lists them first)",
                run.run_dir.display()
            ),
            Some(RunRecord::Fleet(run)) => anyhow::bail!(
                "run {run_id} is a fleet run (served at {}): `factbuoy delete` removes what a Kubernetes run made in its cluster; `factbuoy fleet prune --older-than DURATION` on the fleet's machine removes the fleet's finished runs and their bundles",
                run.fleet_operator_address
            ),
            Some(RunRecord::Kubernetes(_)) | None => Ok(()),
        }
    }
}

/// The entries of `dir`, none when it does not exist.
fn entries(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    match std::fs::read_dir(dir) {
        Ok(entries) => Ok(entries
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e).with_context(|| format!("listing {}", dir.display())),
    }
}

/// The local run in `run_dir`.
fn local(run_dir: &Path) -> Result<RunRecord> {
    if !RunDir::new(run_dir).config().exists() {
        return Err(Error::NoSuchRun(format!(
            "{} holds no run (no run.json there)",
            run_dir.display()
        )));
    }
    let config = RunDir::new(run_dir).load_config()?;
    Ok(RunRecord::Local(LocalRun {
        run_id: config.run_id,
        run_dir: run_dir.to_owned(),
        operator_address: config.operator_listen,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The records earlier versions wrote must still be found.
    #[test]
    fn records_read_back_in_the_shape_earlier_versions_wrote() {
        let local: RunRecord = serde_json::from_str(
            r#"{"run_id":"0a1b2c3d4e5f","run_dir":"/tmp/r","operator_address":"127.0.0.1:4000"}"#,
        )
        .unwrap();
        assert!(matches!(local, RunRecord::Local(ref r) if r.run_id == "0a1b2c3d4e5f"));
        let kube: RunRecord = serde_json::from_str(
            r#"{"run_id":"0a1b2c3d4e5f","namespace":"factbuoy-0a1b2c3d4e5f","kubeconfig":null,"context":"prod"}"#,
        )
        .unwrap();
        assert!(
            matches!(kube, RunRecord::Kubernetes(ref r) if r.context.as_deref() == Some("prod"))
        );
        let fleet: RunRecord = serde_json::from_str(
            r#"{"run_id":"0a1b2c3d4e5f","fleet_operator_address":"f:7444","credentials":"/c","run_ca":"PEM"}"#,
        )
        .unwrap();
        assert!(matches!(fleet, RunRecord::Fleet(ref r) if r.run_ca == "PEM"));
    }

    #[test]
    fn a_missing_current_run_is_no_such_run() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::at(dir.path());
        assert!(matches!(
            state.locate(&WhichRun::Current),
            Err(Error::NoSuchRun(_))
        ));
        assert!(matches!(
            state.locate(&WhichRun::Id("0a1b2c3d4e5f".into())),
            Err(Error::NoSuchRun(_))
        ));
        assert!(matches!(
            state.locate(&WhichRun::Dir(dir.path().join("nothing"))),
            Err(Error::NoSuchRun(_))
        ));
    }

    #[test]
    fn a_fleet_run_is_found_by_its_id_and_a_path_is_no_id() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::at(dir.path());
        let run = FleetRun {
            run_id: "0a1b2c3d4e5f".to_owned(),
            fleet_operator_address: "127.0.0.1:7444".to_owned(),
            credentials: dir.path().join("operator"),
            run_ca: "PEM".to_owned(),
            created: None,
        };
        run.save(&state).unwrap();
        assert!(matches!(
            state.locate(&WhichRun::Id("0a1b2c3d4e5f".into())),
            Ok(RunRecord::Fleet(ref found)) if found.run_ca == "PEM"
        ));
        // A run id never walks out of the records' folder.
        std::fs::write(dir.path().join("x.json"), "{}").unwrap();
        assert!(matches!(
            state.locate(&WhichRun::Id("../x".into())),
            Err(Error::NoSuchRun(_))
        ));
    }
}
