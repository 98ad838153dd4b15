//! What an instance's plugin said while it ran (`progress` and `logging`): relayed to an observer
//! (the CLI, the agent) and kept, within a byte budget, for the report.

use std::sync::Arc;

use crate::bindings::factbuoy::plugin::{logging, progress};

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
    pub(crate) recorded_bytes: usize,
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
    pub(crate) fn admit(&mut self, plugin: &str, bytes: usize, budget: usize) -> bool {
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
