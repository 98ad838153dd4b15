//! `progress` and `logging`: what a plugin says while it runs, relayed to the observer and kept,
//! within a byte budget, for the report.

use factbuoy_protocol::text::{printable, printable_lines};

use crate::bindings::factbuoy::plugin::{logging, progress};
use crate::instance::InstanceState;
use crate::instance::progress::{Level, LogRecord, PluginProgress};

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
