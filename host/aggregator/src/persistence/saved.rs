//! A run as its directory keeps it between processes: the configuration (`run.json`, with the
//! secret parameters apart in `secrets.json`, 0600, only while the run may still hand out
//! plans), the run-level state (`state.json`), and the state rebuilt from those and the records
//! (`records`). Read back by a restarted aggregator, and by `factbuoy status` for a run whose
//! aggregator is gone.

use std::time::SystemTime;

use factbuoy_protocol::types::StatusDocument;

use super::files::write_atomically;
use super::run_dir::RunDir;
use crate::model::config::RunConfig;
use crate::model::pair::Pair;
use crate::model::state::RunState;

/// A secret parameter, as `secrets.json` keeps it: `(plugin, NAME, VALUE)`.
type Secret = (String, String, String);

impl RunDir {
    /// The run's configuration: `run.json`, and the secret parameters beside it while the run
    /// has them.
    pub fn load_config(&self) -> anyhow::Result<RunConfig> {
        let path = self.config();
        let text = std::fs::read_to_string(&path).map_err(|e| {
            anyhow::anyhow!(
                "reading {}: {e}; is this a factbuoy run directory?",
                path.display()
            )
        })?;
        let mut config: RunConfig = serde_json::from_str(&text)?;
        let secrets = self.secrets();
        if secrets.exists() {
            let text = std::fs::read_to_string(&secrets)
                .map_err(|e| anyhow::anyhow!("reading {}: {e}", secrets.display()))?;
            let secrets: Vec<Secret> = serde_json::from_str(&text)?;
            for (plugin, name, value) in secrets {
                if let Some(plan) = config.plugins.iter_mut().find(|p| p.name == plugin) {
                    plan.params.push((name, value));
                }
            }
        }
        Ok(config)
    }

    /// Writes `run.json`, atomically, without secret parameters; those go to `secrets.json`,
    /// readable by the owner only.
    pub(crate) fn save_config(&self, config: &RunConfig) -> anyhow::Result<()> {
        let secrets: Vec<Secret> = config
            .plugins
            .iter()
            .flat_map(|plan| {
                plan.params
                    .iter()
                    .filter(|(name, _)| plan.is_secret(name))
                    .map(|(name, value)| (plan.name.clone(), name.clone(), value.clone()))
            })
            .collect();
        if !secrets.is_empty() {
            factbuoy_pki::write_private(&self.secrets(), &serde_json::to_string(&secrets)?)?;
        }
        Ok(write_atomically(
            &self.config(),
            &serde_json::to_vec_pretty(&config.without_secrets())?,
        )?)
    }

    /// Removes the run's secret parameters from disk, once no plan will be handed out again.
    pub(crate) fn forget_secrets(&self) -> std::io::Result<()> {
        match std::fs::remove_file(self.secrets()) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// The state saved here for a run of `config`: the run-level fields from `state.json` (if
    /// any), the nodes from their records, the pairs from their commit records.
    pub(crate) fn load_state(&self, config: &RunConfig) -> anyhow::Result<RunState> {
        let mut state = RunState::new(config);
        if let Ok(bytes) = std::fs::read(self.state()) {
            let saved: RunState = serde_json::from_slice(&bytes)?;
            state.status = saved.status;
            state.tar_info = saved.tar_info;
            state.started = saved.started;
            state.finished = saved.finished;
            state.error = saved.error;
            state.settled = saved.settled;
            state.interrupted = saved.interrupted;
        }
        let now = SystemTime::now();
        for record in self.read_node_records()? {
            state.set_node(config, &record.node, record.disposition, now);
        }
        for (plugin, nodes) in state.pairs.iter_mut() {
            for (scope, pair) in nodes.iter_mut() {
                if let Some(record) = self.read_commit_record(plugin, scope.label())? {
                    *pair = Pair {
                        status: record.status,
                        committed: Some(record.committed),
                        progress: None,
                    };
                }
            }
        }
        Ok(state)
    }

    /// Saves the run-level fields of `state` in `state.json`.
    pub(crate) fn save_state(&self, state: &RunState) -> anyhow::Result<()> {
        Ok(write_atomically(
            &self.state(),
            &serde_json::to_vec_pretty(state)?,
        )?)
    }

    /// The run's status document as its directory holds it: the final status of a retired run,
    /// else the one its saved state makes. A run whose aggregator stopped says what it said
    /// last (`running`, say): whether the run still goes on is for the caller to find out.
    pub fn saved_status(&self) -> anyhow::Result<StatusDocument> {
        if let Some(document) = self.load_final_status()? {
            return Ok(document);
        }
        let config = self.load_config()?;
        Ok(self.load_state(&config)?.document(&config.run_id))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use factbuoy_protocol::names::NodeName;
    use factbuoy_protocol::routes::Scope;
    use factbuoy_protocol::types::{Outcome, PairStatus, RunStatus};

    use super::*;
    use crate::model::config::{ServerLimits, sample};
    use crate::model::pair::Committed;

    #[test]
    fn a_run_file_from_before_dynamic_nodes_loads_as_fixed() {
        let temporary = tempfile::tempdir().unwrap();
        let dir = RunDir::new(temporary.path());
        let old = serde_json::json!({
            "run_id": "r", "created": "", "factbuoy_version": "0.1.0", "plugins": [],
            "nodes": ["a"], "heartbeat_seconds": 5, "lost_after_seconds": 60,
            "run_timeout_seconds": 600, "agent_listen": "127.0.0.1:0",
            "operator_listen": "127.0.0.1:0", "server_names": [], "bundle_dir": "/tmp",
            "limits": ServerLimits::default(),
        });
        std::fs::write(dir.config(), old.to_string()).unwrap();
        let config = dir.load_config().unwrap();
        assert!(!config.dynamic_nodes);
    }

    #[test]
    fn commits_and_status_survive_a_restart() {
        let temporary = tempfile::tempdir().unwrap();
        let dir = RunDir::new(temporary.path());
        let config = sample();
        let mut state = RunState::new(&config);
        let committed = Committed {
            outcome: Outcome::Succeeded,
            files: BTreeMap::new(),
            synthetic: false,
            commit_id: String::new(),
            report: false,
            error: None,
            warnings: Vec::new(),
        };
        let node = Scope::Node(NodeName::parse("a").unwrap());
        dir.write_commit_record("setup", node.label(), PairStatus::Complete, &committed)
            .unwrap();
        state.apply_commit("setup", &node, PairStatus::Complete, committed);
        state.status = RunStatus::PostProcessing;
        dir.save_state(&state).unwrap();
        let loaded = dir.load_state(&config).unwrap();
        assert_eq!(loaded.pairs, state.pairs);
        assert_eq!(loaded.status, RunStatus::PostProcessing);
        assert_eq!(loaded.missing_pairs().len(), 2);
    }
}
