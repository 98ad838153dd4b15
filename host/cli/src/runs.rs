//! Where the CLI remembers runs, so that `status` and `retrieve` find them from another
//! terminal: the current run in a private state file, and each Kubernetes run's cluster and
//! namespace beside its operator credentials.
//!
//! A local run is found by its run directory (its operator listener is on loopback); a
//! Kubernetes run by its cluster, namespace and run id (its operator listener is reached
//! through port-forward).

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use factbuoy_aggregator::RunDir;

use crate::kube_cmd::{ClusterArgs, operator_dir};
use crate::output::Ended;

/// Environment variable that overrides where the CLI keeps its state.
pub const STATE_DIR_ENV: &str = "FACTBUOY_STATE_DIR";

/// The name of a Kubernetes run's record in its operator directory.
const KUBE_RUN_FILE: &str = "run.json";

/// Where a run is.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RunAt {
    /// A run on this host.
    Local {
        run_id: String,
        run_dir: PathBuf,
        operator_address: SocketAddr,
    },
    /// A run in a Kubernetes cluster.
    Kubernetes(KubeRun),
    /// A run of a fleet (`run --fleet`).
    Fleet(crate::fleet_cmd::FleetRunAt),
}

/// A Kubernetes run: which cluster, as the command that started it named it, and where in it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KubeRun {
    pub run_id: String,
    pub namespace: String,
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
}

impl KubeRun {
    /// The cluster flags that reach it, `overrides` first.
    pub fn cluster(&self, overrides: &ClusterArgs) -> ClusterArgs {
        ClusterArgs {
            kubeconfig: overrides
                .kubeconfig
                .clone()
                .or_else(|| self.kubeconfig.clone()),
            context: overrides.context.clone().or_else(|| self.context.clone()),
        }
    }

    /// Saves the record beside the run's operator credentials, where [`locate`] finds it by
    /// run id.
    pub fn save(&self) -> anyhow::Result<()> {
        let path = operator_dir(&self.run_id)?.join(KUBE_RUN_FILE);
        std::fs::write(&path, serde_json::to_string_pretty(self)?)
            .with_context(|| format!("writing {}", path.display()))
    }

    fn load(run_id: &str) -> anyhow::Result<Option<KubeRun>> {
        let path = operator_dir(run_id)?.join(KUBE_RUN_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(Some(serde_json::from_str(&text).with_context(|| {
                format!("{} is not a Kubernetes run's record", path.display())
            })?)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }
}

/// The CLI's state directory: `$FACTBUOY_STATE_DIR`, else `$XDG_STATE_HOME/factbuoy`
/// (`~/.local/state/factbuoy`).
pub fn state_dir() -> anyhow::Result<PathBuf> {
    std::env::var_os(STATE_DIR_ENV)
        .map(PathBuf::from)
        .or_else(|| dirs::state_dir().map(|d| d.join("factbuoy")))
        .context("no state directory: set FACTBUOY_STATE_DIR")
}

fn current_file() -> anyhow::Result<PathBuf> {
    Ok(state_dir()?.join("current-run.json"))
}

/// Makes `run` the current run.
pub fn remember(run: &RunAt) -> anyhow::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    let path = current_file()?;
    let dir = path.parent().expect("the state file has a directory");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    factbuoy_pki::write_private(&path, &serde_json::to_string_pretty(run)?)?;
    Ok(())
}

/// The run `status` and `retrieve` talk about: the one in `run_dir`, else the one with
/// `run_id` (a Kubernetes run's record, else a local run directory), else the current one.
pub fn locate(run_dir: Option<PathBuf>, run_id: Option<&str>) -> anyhow::Result<RunAt> {
    let local = |run_dir: PathBuf| -> anyhow::Result<RunAt> {
        if !RunDir::new(&run_dir).config().exists() {
            return Err(Ended::NoSuchRun(format!(
                "{} holds no run (no run.json there)",
                run_dir.display()
            ))
            .into());
        }
        let config = RunDir::new(&run_dir).load_config()?;
        Ok(RunAt::Local {
            run_id: config.run_id,
            run_dir,
            operator_address: config.operator_listen,
        })
    };
    if let Some(dir) = run_dir {
        return local(dir);
    }
    if let Some(run_id) = run_id {
        if let Some(kube) = KubeRun::load(run_id)? {
            return Ok(RunAt::Kubernetes(kube));
        }
        let dir = local_runs_dir()?.join(run_id);
        if !dir.exists() {
            return Err(Ended::NoSuchRun(format!(
                "no run {run_id} is known here: neither a Kubernetes run started from this machine nor a local run in {}",
                dir.display()
            ))
            .into());
        }
        return local(dir);
    }
    let path = current_file()?;
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Ended::NoSuchRun(format!(
                "no current run ({} is missing); start one with `factbuoy run`",
                path.display()
            ))
            .into());
        }
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    serde_json::from_str(&text).with_context(|| format!("{} is unreadable", path.display()))
}

/// Where local runs keep their directories by default: `<state dir>/runs/<run id>`.
pub fn local_runs_dir() -> anyhow::Result<PathBuf> {
    Ok(state_dir()?.join("runs"))
}

/// Forgets the current run if it is the one in `run_dir` (a pruned run).
pub fn forget_if_current(run_dir: &std::path::Path) -> anyhow::Result<()> {
    let path = current_file()?;
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(());
    };
    if let Ok(RunAt::Local {
        run_dir: current, ..
    }) = serde_json::from_str(&text)
        && current == run_dir
    {
        std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
    }
    Ok(())
}
