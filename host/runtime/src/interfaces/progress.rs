//! `progress` and `logging`: what a plugin says while it runs. Records are relayed to an
//! observer (the CLI, the agent) and kept, within a byte budget, for the run's report.

use std::sync::Arc;

use crate::bindings::factbuoy::plugin::{logging, progress};
use crate::interfaces::InstanceState;

pub use logging::Level;
/// A progress report as a plugin sends it (the contract's `progress-update`).
pub use progress::ProgressUpdate as PluginProgress;

/// Receives a plugin's progress and logs as they happen.
pub trait ProgressObserver: Send + Sync {
    /// A progress report from `plugin`, as sent: its warnings and errors are the new ones only.
    fn progress(&self, plugin: &str, update: &PluginProgress);
    /// A log record from `plugin`.
    fn log(&self, plugin: &str, level: Level, message: &str);
}

/// One log record kept for the report.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LogRecord {
    /// The severity the plugin gave it.
    pub level: Level,
    /// The text, as the plugin wrote it.
    pub message: String,
}

/// What a run said, bounded by `recorded_log_bytes`.
#[derive(Default)]
pub struct ProgressState {
    pub(crate) latest: Option<PluginProgress>,
    pub(crate) warnings: Vec<String>,
    pub(crate) errors: Vec<String>,
    pub(crate) logs: Vec<LogRecord>,
    /// Records dropped because the budget was spent.
    pub(crate) dropped: u64,
    recorded_bytes: usize,
    pub(crate) observer: Option<Arc<dyn ProgressObserver>>,
}

impl ProgressState {
    /// Nothing recorded yet; reports and logs are also relayed to `observer`, if any.
    pub fn new(observer: Option<Arc<dyn ProgressObserver>>) -> Self {
        ProgressState {
            observer,
            ..Default::default()
        }
    }

    /// Whether a record of `bytes` more fits in the budget (with its overhead, so that empty
    /// records are bounded too); counts a drop when it does not.
    fn admit(&mut self, bytes: usize, budget: usize) -> bool {
        let bytes = bytes + crate::limits::RECORD_OVERHEAD_BYTES;
        if self.recorded_bytes + bytes > budget {
            self.dropped += 1;
            return false;
        }
        self.recorded_bytes += bytes;
        true
    }
}

fn update_size(update: &PluginProgress) -> usize {
    update.message.len()
        + update
            .warnings
            .iter()
            .chain(&update.errors)
            .map(String::len)
            .sum::<usize>()
}

impl progress::Host for InstanceState {
    fn report(&mut self, update: PluginProgress) -> wasmtime::Result<()> {
        let size = update_size(&update);
        self.check_call_size("progress.report", size)?;
        if let Err(violation) = self.charge_metadata(size) {
            return Err(self.violate(violation));
        }
        if let Some(observer) = &self.progress.observer {
            observer.progress(&self.plugin, &update);
        }
        let budget = self.limits.recorded_log_bytes;
        for warning in &update.warnings {
            tracing::warn!(plugin = %self.plugin, "{warning}");
            if self.progress.admit(warning.len(), budget) {
                self.progress.warnings.push(warning.clone());
            }
        }
        for error in &update.errors {
            tracing::error!(plugin = %self.plugin, "{error}");
            if self.progress.admit(error.len(), budget) {
                self.progress.errors.push(error.clone());
            }
        }
        // An update carrying only warnings or errors does not move the counters.
        let moves = update.total != 0 || update.completed != 0 || !update.message.is_empty();
        if moves {
            self.progress.latest = Some(PluginProgress {
                warnings: Vec::new(),
                errors: Vec::new(),
                ..update
            });
        }
        Ok(())
    }
}

impl logging::Host for InstanceState {
    fn log(&mut self, level: Level, message: String) -> wasmtime::Result<()> {
        self.check_call_size("logging.log", message.len())?;
        if let Err(violation) = self.charge_metadata(message.len()) {
            return Err(self.violate(violation));
        }
        let plugin = &self.plugin;
        match level {
            Level::Trace => tracing::trace!(%plugin, "{message}"),
            Level::Debug => tracing::debug!(%plugin, "{message}"),
            Level::Info => tracing::info!(%plugin, "{message}"),
            Level::Warn => tracing::warn!(%plugin, "{message}"),
            Level::Error => tracing::error!(%plugin, "{message}"),
        }
        if let Some(observer) = &self.progress.observer {
            observer.log(plugin, level, &message);
        }
        if self
            .progress
            .admit(message.len(), self.limits.recorded_log_bytes)
        {
            self.progress.logs.push(LogRecord { level, message });
        }
        Ok(())
    }
}
