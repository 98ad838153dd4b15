//! A run in memory, before it is served: [`Run::create`] makes its directory (its CA and
//! certificates, configuration and initial state), [`Run::open`] reads one back, new or
//! interrupted. The crate's `start` serves it.

use anyhow::Context;
use factbuoy_pki::{Issued, RunCa};
use factbuoy_protocol::identity::Role;
use factbuoy_protocol::types::RunStatus;

use crate::model::config::RunConfig;
use crate::model::state::RunState;
use crate::persistence::run_dir::RunDir;

/// A run: its directory, configuration, state and CA, in memory.
pub struct Run {
    pub(crate) dir: RunDir,
    pub(crate) config: RunConfig,
    pub(crate) state: RunState,
    pub(crate) ca: RunCa,
    pub(crate) server: Issued,
}

impl Run {
    /// Creates a run directory: its CA, server and operator certificates, configuration and
    /// initial state. `components` are plugin components not bundled in this binary.
    pub fn create(
        dir: RunDir,
        config: RunConfig,
        components: &[(String, Vec<u8>)],
    ) -> anyhow::Result<Run> {
        use std::os::unix::fs::DirBuilderExt;
        let root = dir.root();
        if root.exists() && std::fs::read_dir(root)?.next().is_some() {
            anyhow::bail!(
                "{} already holds a run; choose another --run-dir",
                root.display()
            );
        }
        let mut private = std::fs::DirBuilder::new();
        private.recursive(true).mode(0o700);
        private.create(root)?;
        private.create(dir.pki())?;
        let ca = RunCa::create(&config.run_id)?;
        ca.save(&dir.pki())?;
        let server = ca.issue_server(&config.server_names)?;
        server.save(&dir.pki(), "server")?;
        let operator = ca.issue_client(&Role::Operator {
            name: "operator".into(),
        })?;
        operator.save(&dir.pki(), "operator")?;
        for (sha256, bytes) in components {
            let path = dir.component(sha256);
            std::fs::create_dir_all(path.parent().expect("component paths have a parent"))?;
            std::fs::write(path, bytes)?;
        }
        dir.save_config(&config)?;
        let state = RunState::new(&config);
        dir.save_state(&state)?;
        Ok(Run {
            dir,
            config,
            state,
            ca,
            server,
        })
    }

    /// Reads back the run in `dir`, new or interrupted.
    pub fn open(dir: RunDir) -> anyhow::Result<Run> {
        let config = dir.load_config()?;
        let state = dir.load_state(&config).context("loading the run's state")?;
        let ca = RunCa::load(&dir.pki(), &config.run_id)?;
        let server = Issued::load(&dir.pki(), "server")?;
        Ok(Run {
            dir,
            config,
            state,
            ca,
            server,
        })
    }

    /// The run's configuration.
    pub fn config(&self) -> &RunConfig {
        &self.config
    }

    /// The run's directory.
    pub fn dir(&self) -> &RunDir {
        &self.dir
    }

    /// The run's CA.
    pub fn ca(&self) -> &RunCa {
        &self.ca
    }

    /// Where the run is, as its directory says.
    pub fn status(&self) -> RunStatus {
        self.state.status
    }

    /// Issues a client certificate for `role` from the run's CA.
    pub fn issue(&self, role: &Role) -> anyhow::Result<Issued> {
        Ok(self.ca.issue_client(role)?)
    }

    /// Writes a client certificate for `role` into `dir` (ca.pem, client.pem, client.key
    /// 0600), for an agent started by hand.
    pub fn issue_to_files(&self, role: &Role, dir: &std::path::Path) -> anyhow::Result<()> {
        let issued = self.issue(role)?;
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("ca.pem"), self.ca.cert_pem())?;
        issued.save(dir, "client")?;
        Ok(())
    }
}
