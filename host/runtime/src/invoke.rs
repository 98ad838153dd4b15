//! Invoking a loaded plugin once, with every limit enforced together: what it may reach is
//! what it asks for and is granted, what it may consume is bounded by [`Limits`]; whatever
//! happens inside ends up in the [`InvocationReport`].

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use wasmtime_wasi::FsPerms;

use crate::bindings::{ParamValue, PluginInfo};
use crate::capture::Captured;
use crate::failure::PluginFailure;
use crate::grants::{Effective, GrantSet};
use crate::instance::Access;
use crate::instance::output::ArtifactRecord;
use crate::instance::progress::{LogRecord, PluginProgress, ProgressObserver};
use crate::limits::Limits;
use crate::load::{LoadReport, LoadedPlugin, PANIC_SEARCH_BYTES, Runtime, wasi_builder};
use crate::sink::ArtifactSink;
use crate::stop::StopSignal;
use crate::violation::Violation;
use crate::{failure, fsguard, grants};

/// One invocation of a plugin: what it is given and granted.
pub struct Invocation {
    /// Parameters already resolved against the plugin's description.
    pub params: Vec<(String, ParamValue)>,
    /// What the run grants; the plugin gets the intersection with what it asks for.
    pub grants: GrantSet,
    /// The host directory that granted guest paths are mapped onto (`/`, or `/host` in a pod).
    pub host_root: PathBuf,
    /// Where the plugin's artifacts go.
    pub sink: Arc<dyn ArtifactSink>,
    /// Told of progress and logs as they happen; `None` when no one is watching.
    pub observer: Option<Arc<dyn ProgressObserver>>,
    /// Overrides the runtime's limits for this run. The stack limit is engine-wide and stays;
    /// the memory limit can only be lowered.
    pub limits: Option<Limits>,
    /// Stops the invocation before it finishes when given (its run is interrupted); `None`: it
    /// runs to its end or its deadline.
    pub stop: Option<StopSignal>,
}

/// What happened in one invocation.
#[derive(Debug, Clone, serde::Serialize)]
pub struct InvocationReport {
    /// The plugin's name, as its description gives it.
    pub plugin: String,
    /// The plugin's own version, as its description gives it.
    pub version: String,
    /// Where the plugin came from: the [`LoadedPlugin::label`].
    pub source: String,
    /// Whether the run ended without a failure.
    pub succeeded: bool,
    /// Why the run failed; `None` when it succeeded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<PluginFailure>,
    /// What the run could reach: what the plugin asked for, limited to what was granted.
    pub granted: Effective,
    /// Granted paths that do not exist below the host root, so nothing was mapped there.
    pub absent_paths: Vec<String>,
    /// Paths the plugin tried to open that no grant covers (the first 16, normalised); each
    /// has a warning naming the `--grant` that allows it. The plugin saw "permission denied".
    pub ungranted_paths: Vec<String>,
    /// Every artifact the plugin created, in the order it created them.
    pub artifacts: Vec<ArtifactRecord>,
    /// The latest progress report that carried counters or a message, without its warnings and
    /// errors (those are in `warnings` and `errors`).
    pub progress: Option<PluginProgress>,
    /// The warnings the plugin reported, within the recording budget, and the host's own (a
    /// granted path it could not map).
    pub warnings: Vec<String>,
    /// The errors the plugin reported, within the recording budget.
    pub errors: Vec<String>,
    /// The plugin's log records, within the recording budget.
    pub logs: Vec<LogRecord>,
    /// Log records and warnings dropped because the recording budget was spent.
    pub dropped_records: u64,
    /// What the plugin wrote to stdout, within the capture limit.
    pub stdout: Captured,
    /// What the plugin wrote to stderr, within the capture limit.
    pub stderr: Captured,
    /// Wall-clock time of the run, in milliseconds; 0 when it ended before the plugin started
    /// (a capability missing).
    pub duration_ms: f64,
    /// How the plugin was loaded before this run: from the compiled-plugin cache or compiled.
    pub load: LoadReport,
}

impl InvocationReport {
    /// One line for people: `plugin "x" 0.1.0: <what went wrong>`.
    pub fn failure_line(&self) -> Option<String> {
        self.failure
            .as_ref()
            .map(|f| format!("plugin {:?} {}: {f}", self.plugin, self.version))
    }
}

impl Runtime {
    /// Invokes a loaded plugin once. Never fails: every problem ends up in the report.
    pub async fn invoke(&self, plugin: &LoadedPlugin, invocation: Invocation) -> InvocationReport {
        let started = Instant::now();
        let mut limits = invocation.limits.unwrap_or_else(|| self.limits.clone());
        // The engine's memory slots are sized for the runtime's limit: above it, growth would
        // fail in the allocator before the limiter could report it by name.
        limits.memory_bytes = limits.memory_bytes.min(self.limits.memory_bytes);
        let info = &plugin.info;
        let mut report = InvocationReport {
            plugin: info.name.clone(),
            version: info.version.clone(),
            source: plugin.label.clone(),
            succeeded: false,
            failure: None,
            granted: Effective::default(),
            absent_paths: Vec::new(),
            ungranted_paths: Vec::new(),
            artifacts: Vec::new(),
            progress: None,
            warnings: Vec::new(),
            errors: Vec::new(),
            logs: Vec::new(),
            dropped_records: 0,
            stdout: Captured::default(),
            stderr: Captured::default(),
            duration_ms: 0.0,
            load: plugin.load,
        };
        let effective = match invocation.grants.effective(&info.capabilities) {
            Ok(effective) => effective,
            Err(e) => {
                report.failure = Some(PluginFailure::Failed {
                    message: e.to_string(),
                });
                return report;
            }
        };
        report.granted = effective.clone();
        if !effective.missing_required.is_empty() {
            report.failure = Some(PluginFailure::MissingCapabilities {
                plugin: info.name.clone(),
                missing: effective.missing_required,
            });
            return report;
        }

        let mut wasi = wasi_builder();
        wasi.envs(&passed_environment(std::env::vars_os()));
        let mut mapped = Vec::new();
        let mut guard = fsguard::FsGuard::default();
        for guest_path in &effective.read_paths {
            let host_path = host_path(&invocation.host_root, guest_path);
            if !host_path.is_dir() {
                report.absent_paths.push(guest_path.clone());
                continue;
            }
            // A grant is a path the plugin opens too: `read:/proc/1/fd` maps nothing.
            let checked = std::fs::File::open(&host_path)
                .map_err(fsguard::PathRefusal::from)
                .and_then(|dir| guard.check(&dir, fsguard::ProcUse::Open));
            if let Err(refusal) = checked {
                report.warnings.push(format!(
                    "did not map {guest_path} from {}: {refusal}",
                    host_path.display()
                ));
                continue;
            }
            match wasi.preopened_dir(&host_path, guest_path, FsPerms::ReadOnly) {
                Ok(_) => mapped.push(guest_path.clone()),
                Err(e) => report.warnings.push(format!(
                    "could not map {guest_path} from {}: {e:#}",
                    host_path.display()
                )),
            }
        }
        if let Some(sources) = &plugin.sources
            && let Err(e) = crate::load::map_sources(&mut wasi, sources)
        {
            report.failure = Some(PluginFailure::Failed {
                message: format!("the development build's sources: {e}"),
            });
            return report;
        }
        // Paths outside every grant lead to an empty directory, where the host sees them.
        let ungranted_root = self
            .ungranted_root
            .as_ref()
            .filter(|_| !mapped.iter().any(|p| p == "/"))
            .and_then(|dir| {
                wasi.preopened_dir(dir.path(), "/", FsPerms::ReadOnly)
                    .ok()?;
                std::fs::File::open(dir.path()).ok()
            });
        let deadline = limits.deadline;
        let stack_bytes = self.limits.stack_bytes;
        let mut store = self.new_store(
            &info.name,
            wasi,
            limits,
            Access {
                host_info: effective.host_info,
                host_root: invocation.host_root,
                read_paths: mapped,
            },
            (invocation.sink, invocation.observer),
            invocation.stop.clone(),
        );
        store.data_mut().output.declared = info.artifacts.clone();
        if let Some(dir) = &ungranted_root
            && let Err(e) = store
                .data_mut()
                .fs_guard
                .watch_ungranted_root(dir, &report.absent_paths)
        {
            tracing::debug!("cannot watch the empty directory mapped at /: {e}");
        }
        let call = plugin.pre.gather(&mut store, &invocation.params);
        // The epoch callback ends a plugin that computes past its deadline or is stopped; this
        // ends one that is stuck in a host call.
        let stop = invocation.stop;
        let stopped = async {
            match &stop {
                Some(stop) => stop.stopped().await,
                None => std::future::pending().await,
            }
        };
        let outcome = tokio::select! {
            outcome = tokio::time::timeout(deadline, call) => outcome.map_err(|_| Violation::Deadline(deadline)),
            () = stopped => Err(Violation::Stopped),
        };
        let state = store.data_mut();
        state.output.finish_all().await;
        let stderr_tail = state.stderr.last_text(PANIC_SEARCH_BYTES);
        let failure = match outcome {
            Err(violation) => {
                state.violation.get_or_insert(violation);
                None
            }
            Ok(Err(e)) => Some(failure::classify_trap(&e, &stderr_tail, stack_bytes)),
            Ok(Ok(Err(gather_error))) => {
                Some(failure::bounded(gather_error, state.limits.host_call_bytes).into())
            }
            Ok(Ok(Ok(()))) => None,
        };
        // A limit the plugin was told about through a WIT error (the output limit) decides the
        // failure even if the plugin went on and returned normally.
        report.failure = match state.violation.clone() {
            Some(violation) => Some(PluginFailure::from(violation).for_plugin(&info.name)),
            None => failure,
        };
        report.succeeded = report.failure.is_none();
        report.artifacts = std::mem::take(&mut state.output.records);
        report.progress = state.progress.latest.take();
        report.warnings.append(&mut state.progress.warnings);
        report.warnings.append(&mut state.output.warnings);
        report.ungranted_paths = std::mem::take(&mut state.fs_guard.ungranted)
            .into_iter()
            .collect();
        for path in &report.ungranted_paths {
            report.warnings.push(ungranted_warning(info, path));
        }
        report.errors = std::mem::take(&mut state.progress.errors);
        report.logs = std::mem::take(&mut state.progress.logs);
        report.dropped_records = state.progress.dropped;
        report.stdout = state.stdout.snapshot();
        report.stderr = state.stderr.snapshot();
        report.duration_ms = started.elapsed().as_secs_f64() * 1e3;
        report
    }
}

/// What to tell the author of `plugin` about `path`, which it tried to open and no grant covers:
/// the `--grant` of its own request that covers the path, or that it requests none (grants only
/// ever give what a plugin asks for).
fn ungranted_warning(plugin: &PluginInfo, path: &str) -> String {
    let covering =
        plugin.capabilities.iter().find_map(|request| {
            match grants::Grant::from_request(&request.capability) {
                Ok(grants::Grant::Read(asked)) if grants::is_within(path, &asked) => Some(asked),
                _ => None,
            }
        });
    match covering {
        Some(asked) => format!(
            "opened {path}, which is not granted: add --grant {}:read:{asked}",
            plugin.name
        ),
        None => format!(
            "opened {path}, which is not granted, and its description asks for no path that covers it \
             (a plugin only ever gets the read paths it asks for)"
        ),
    }
}

/// The variables of the factbuoy process's environment a plugin sees (through
/// `wasi:cli/environment`), besides every `LC_*`: who and where the process runs, never a
/// token or password. Ansible's `env` and `user_id` facts come from them.
pub const PASSED_ENVIRONMENT: &[&str] = &[
    "HOME", "LANG", "LANGUAGE", "LOGNAME", "USER", "PATH", "SHELL", "TERM", "TZ", "PWD",
];

/// The part of `vars` a plugin sees: [`PASSED_ENVIRONMENT`] and `LC_*`, when valid UTF-8.
fn passed_environment(
    vars: impl Iterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
) -> Vec<(String, String)> {
    vars.filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?)))
        .filter(|(name, _)| {
            PASSED_ENVIRONMENT.contains(&name.as_str())
                || name.strip_prefix("LC_").is_some_and(|rest| {
                    !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_uppercase() || b == b'_')
                })
        })
        .collect()
}

/// Where a guest path lives on the host: below `root`.
fn host_path(root: &Path, guest_path: &str) -> PathBuf {
    root.join(guest_path.trim_start_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ungranted_path_is_answered_with_the_request_that_covers_it_or_none() {
        use crate::bindings::{Capability, CapabilityRequest};
        let info = PluginInfo {
            name: "p".into(),
            version: "1.0.0".into(),
            description: String::new(),
            parameters: Vec::new(),
            capabilities: vec![
                CapabilityRequest {
                    capability: Capability::HostInfo,
                    required: true,
                    reason: String::new(),
                },
                CapabilityRequest {
                    capability: Capability::ReadPath("/etc".into()),
                    required: false,
                    reason: String::new(),
                },
            ],
            artifacts: Vec::new(),
        };
        assert_eq!(
            ungranted_warning(&info, "/etc/ssh/sshd_config"),
            "opened /etc/ssh/sshd_config, which is not granted: add --grant p:read:/etc"
        );
        let uncovered = ungranted_warning(&info, "/var/log/syslog");
        assert!(
            uncovered.contains("its description asks for no path that covers it"),
            "{uncovered}"
        );
    }

    #[test]
    fn only_named_variables_are_passed() {
        let vars = [
            ("HOME", "/root"),
            ("LC_TIME", "C"),
            ("LC_", "x"),
            ("LC_lower", "x"),
            ("AWS_SECRET_ACCESS_KEY", "k"),
            ("USER", "root"),
            ("FACTBUOY_TOKEN", "t"),
        ]
        .map(|(n, v)| (n.into(), v.into()));
        assert_eq!(
            passed_environment(vars.into_iter()),
            [("HOME", "/root"), ("LC_TIME", "C"), ("USER", "root")]
                .map(|(n, v)| (n.to_owned(), v.to_owned()))
        );
    }

    #[test]
    fn guest_paths_map_below_the_root() {
        assert_eq!(
            host_path(Path::new("/host"), "/proc"),
            PathBuf::from("/host/proc")
        );
        assert_eq!(
            host_path(Path::new("/"), "/var/log/journal"),
            PathBuf::from("/var/log/journal")
        );
    }
}
