//! `progress` and `logging`: what a plugin says while it runs. Records are relayed to an
//! observer (the CLI, the agent) and kept, within a byte budget, for the run's report.

use std::sync::Arc;

use factbuoy_protocol::text::{printable, printable_lines};

use crate::bindings::factbuoy::plugin::{logging, progress};
use crate::interfaces::InstanceState;

pub use logging::Level;
/// A progress report as a plugin sends it (the contract's `progress-update`).
pub use progress::ProgressUpdate as PluginProgress;

/// Receives a plugin's progress and logs as they happen.
pub trait ProgressObserver: Send + Sync {
    /// A progress report from `plugin`. Its warnings and errors are the new ones that fit the
    /// report's recording limit: a relay carries no more than the report keeps.
    fn progress(&self, plugin: &str, update: &PluginProgress);
    /// A log record from `plugin`, one that fits the report's recording limit. The text is the
    /// plugin's: escape it ([`factbuoy_protocol::text::printable`]) before printing it.
    fn log(&self, plugin: &str, level: Level, message: &str);
}

/// One log record kept for the report.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LogRecord {
    /// The severity the plugin gave it, written in lower case as the contract spells it
    /// (`info`), not as the bindings' derive would (`Info`).
    #[serde(serialize_with = "serialize_level")]
    pub level: Level,
    /// The text, as the plugin wrote it.
    pub message: String,
}

/// A level as the contract spells it: `trace`, `debug`, `info`, `warn`, `error`.
pub fn level_name(level: Level) -> &'static str {
    match level {
        Level::Trace => "trace",
        Level::Debug => "debug",
        Level::Info => "info",
        Level::Warn => "warn",
        Level::Error => "error",
    }
}

fn serialize_level<S: serde::Serializer>(level: &Level, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(level_name(*level))
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
    fn admit(&mut self, plugin: &str, bytes: usize, budget: usize) -> bool {
        let bytes = bytes + crate::limits::RECORD_OVERHEAD_BYTES;
        if self.recorded_bytes + bytes > budget {
            if self.dropped == 0 {
                tracing::warn!(
                    %plugin,
                    "the plugin's log records and warnings reached the recording limit of \
                     {budget} bytes; further ones are dropped (counted in the report)"
                );
            }
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
        // Only what the report keeps is relayed, so relays share the report's cap.
        let budget = self.limits.recorded_log_bytes;
        let PluginProgress {
            message,
            total,
            completed,
            warnings,
            errors,
        } = update;
        let warnings: Vec<String> = warnings
            .into_iter()
            .filter(|w| self.progress.admit(&self.plugin, w.len(), budget))
            .collect();
        let errors: Vec<String> = errors
            .into_iter()
            .filter(|e| self.progress.admit(&self.plugin, e.len(), budget))
            .collect();
        for warning in &warnings {
            tracing::warn!(plugin = %self.plugin, "{}", printable(warning));
        }
        for error in &errors {
            tracing::error!(plugin = %self.plugin, "{}", printable(error));
        }
        let update = PluginProgress {
            message,
            total,
            completed,
            warnings,
            errors,
        };
        if let Some(observer) = &self.progress.observer {
            observer.progress(&self.plugin, &update);
        }
        self.progress.warnings.extend(update.warnings);
        self.progress.errors.extend(update.errors);
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
        // Only what the report keeps is relayed, so relays share the report's cap.
        if !self
            .progress
            .admit(plugin, message.len(), self.limits.recorded_log_bytes)
        {
            return Ok(());
        }
        // A traceback is lines: printed as lines, each made safe.
        let shown = printable_lines(&message);
        match level {
            Level::Trace => tracing::trace!(%plugin, "{shown}"),
            Level::Debug => tracing::debug!(%plugin, "{shown}"),
            Level::Info => tracing::info!(%plugin, "{shown}"),
            Level::Warn => tracing::warn!(%plugin, "{shown}"),
            Level::Error => tracing::error!(%plugin, "{shown}"),
        }
        if let Some(observer) = &self.progress.observer {
            observer.log(plugin, level, &message);
        }
        self.progress.logs.push(LogRecord { level, message });
        Ok(())
    }
}
