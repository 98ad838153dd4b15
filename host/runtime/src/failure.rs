//! Why a plugin run failed, classified from the trap (or the plugin's own error) so that the
//! report says what happened in words: a deadline, a limit, a panic and its message.

use wasmtime::Trap;

use super::bindings::GatherError;
use super::violation::Violation;

/// How a failed run ended.
#[derive(Debug, Clone, PartialEq, serde::Serialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum PluginFailure {
    /// A sandbox limit was crossed; the message names the limit and its value.
    #[error("{message}")]
    LimitExceeded {
        /// Which limit.
        limit: LimitKind,
        /// What the plugin did, and the limit's value.
        message: String,
    },
    /// The plugin needs capabilities the run did not grant.
    #[error("needs capabilities that were not granted: {}; grant them with {}", .missing.join(", "), grant_flags(.plugin, .missing))]
    MissingCapabilities {
        /// The plugin's name, for the `--grant PLUGIN:CAPABILITY` that fixes it.
        plugin: String,
        /// The required capabilities not granted, in written form (`host-info`, `read:/proc`).
        missing: Vec<String>,
    },
    /// The plugin called an interface it was not granted.
    #[error("{message}")]
    CapabilityDenied {
        /// The capability that would have allowed the call, in written form.
        capability: String,
        /// What was called, and how to grant it.
        message: String,
    },
    /// A Rust panic; `message` is the panic's own text.
    #[error("panicked: {message}")]
    Panicked {
        /// The panic's text, then its source location.
        message: String,
    },
    /// Any other trap. `message` is the trap itself; `detail` adds the wasm backtrace.
    #[error("crashed: {message}")]
    Trapped {
        /// The trap's root cause.
        message: String,
        /// The whole error chain, with the wasm backtrace.
        detail: String,
    },
    /// The plugin was stopped before it finished, its run interrupted; its artifacts are
    /// partial.
    #[error("{message}")]
    Stopped {
        /// What happened, and that the artifacts are partial.
        message: String,
    },
    /// The plugin rejected its parameters.
    #[error("rejected its parameters: {message}")]
    InvalidParameters {
        /// The plugin's explanation.
        message: String,
    },
    /// What the plugin gathers is not available here.
    #[error("unavailable: {message}")]
    Unavailable {
        /// What is missing, in the plugin's words.
        message: String,
    },
    /// The plugin reported a failure.
    #[error("failed: {message}")]
    Failed {
        /// What went wrong, in the plugin's words (or the host's, for grants it cannot apply).
        message: String,
    },
}

/// Which limit a [`PluginFailure::LimitExceeded`] is about; see [`crate::Limits`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LimitKind {
    /// The wall-clock deadline.
    Deadline,
    /// The size of a linear memory.
    Memory,
    /// The wasm stack.
    Stack,
    /// The elements of a table.
    Table,
    /// The bytes of all artifacts together.
    Output,
    /// The bytes one host call may carry.
    HostCall,
    /// The metadata (names, media types, progress, logs) of the whole run.
    Metadata,
    /// The artifacts open at once.
    OpenArtifacts,
}

/// The `--grant` flags that grant `missing` to `plugin`, as every command takes them.
pub fn grant_flags(plugin: &str, missing: &[String]) -> String {
    missing
        .iter()
        .map(|c| format!("--grant {plugin}:{c}"))
        .collect::<Vec<_>>()
        .join(" ")
}

impl PluginFailure {
    /// Adds to a denied call the `--grant` that allows it to `plugin`.
    pub fn for_plugin(self, plugin: &str) -> Self {
        match self {
            PluginFailure::CapabilityDenied {
                capability,
                message,
            } => PluginFailure::CapabilityDenied {
                message: format!("{message}; grant it with --grant {plugin}:{capability}"),
                capability,
            },
            other => other,
        }
    }
}

impl From<Violation> for PluginFailure {
    fn from(violation: Violation) -> Self {
        let limit = match &violation {
            Violation::Stopped => {
                return PluginFailure::Stopped {
                    message: violation.to_string(),
                };
            }
            Violation::Deadline(_) => LimitKind::Deadline,
            Violation::Memory { .. } => LimitKind::Memory,
            Violation::Table { .. } => LimitKind::Table,
            Violation::Output(_) => LimitKind::Output,
            Violation::HostCall { .. } => LimitKind::HostCall,
            Violation::Metadata(_) => LimitKind::Metadata,
            Violation::OpenArtifacts(_) => LimitKind::OpenArtifacts,
            Violation::CapabilityDenied { capability, .. } => {
                return PluginFailure::CapabilityDenied {
                    capability: (*capability).to_owned(),
                    message: violation.to_string(),
                };
            }
        };
        PluginFailure::LimitExceeded {
            limit,
            message: violation.to_string(),
        }
    }
}

impl From<GatherError> for PluginFailure {
    fn from(error: GatherError) -> Self {
        match error {
            GatherError::InvalidParameters(message) => PluginFailure::InvalidParameters { message },
            GatherError::Unavailable(message) => PluginFailure::Unavailable { message },
            GatherError::Failed(message) => PluginFailure::Failed { message },
        }
    }
}

/// The plugin's own error with its message cut to `max_bytes`: the message is plugin-controlled
/// text that the report, the terminal and the bundle carry.
pub fn bounded(error: GatherError, max_bytes: usize) -> GatherError {
    let cut = |mut message: String| {
        if message.len() > max_bytes {
            let total = message.len();
            let mut end = max_bytes;
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            message.truncate(end);
            message.push_str(&format!("... ({} more bytes cut)", total - end));
        }
        message
    };
    match error {
        GatherError::InvalidParameters(m) => GatherError::InvalidParameters(cut(m)),
        GatherError::Unavailable(m) => GatherError::Unavailable(cut(m)),
        GatherError::Failed(m) => GatherError::Failed(cut(m)),
    }
}

/// Classifies a trap. `stderr_tail` is the end of what the plugin printed, where a Rust panic
/// leaves its message; `stack_bytes` is the stack limit, for the message.
pub fn classify_trap(
    error: &wasmtime::Error,
    stderr_tail: &str,
    stack_bytes: usize,
) -> PluginFailure {
    if let Some(violation) = error.chain().find_map(|e| e.downcast_ref::<Violation>()) {
        return violation.clone().into();
    }
    match error.chain().find_map(|e| e.downcast_ref::<Trap>()) {
        Some(Trap::StackOverflow) => PluginFailure::LimitExceeded {
            limit: LimitKind::Stack,
            message: format!("overflowed its wasm stack (limit {stack_bytes} bytes)"),
        },
        Some(Trap::UnreachableCodeReached) => match panic_message(stderr_tail) {
            Some(message) => PluginFailure::Panicked { message },
            None => trapped(error),
        },
        _ => trapped(error),
    }
}

fn trapped(error: &wasmtime::Error) -> PluginFailure {
    PluginFailure::Trapped {
        message: error.root_cause().to_string(),
        detail: format!("{error:#}"),
    }
}

/// The message of the last Rust panic in `stderr`: `panicked at FILE:LINE:COL:` and the lines
/// after it, up to the `note:` Rust adds. componentize-py's interpreter panics on an exception
/// its export cannot return, with a message that names no exception: when a Python traceback
/// was written before it, the exception and its innermost frame are the message.
pub fn panic_message(stderr: &str) -> Option<String> {
    let start = stderr.rfind("panicked at ")?;
    let after = &stderr[start + "panicked at ".len()..];
    let (location, rest) = after.split_once(":\n").unwrap_or((after, ""));
    let message: Vec<&str> = rest
        .lines()
        .take_while(|line| !line.starts_with("note: "))
        .collect();
    let message = message.join("\n");
    let before = &stderr[..start];
    if message.trim() == PYTHON_UNEXPECTED
        && let Some(traceback) = before.rfind(PYTHON_TRACEBACK)
    {
        // The exception (the traceback's last line; the one after it starts the panic's, `thread
        // '<unnamed>' panicked at`) and the innermost frame, as a panic's location is written.
        let mut lines: Vec<&str> = before[traceback..].lines().collect();
        lines.pop();
        let exception = lines.iter().rev().map(|l| l.trim()).find(|l| !l.is_empty());
        let exception = exception.unwrap_or_default();
        let location = lines.iter().rev().find_map(|line| {
            let (file, rest) = line
                .trim()
                .strip_prefix("File \"")?
                .split_once("\", line ")?;
            let number = rest.split(',').next()?;
            Some(format!("{file}:{number}"))
        });
        return Some(match location {
            Some(location) => format!("{exception} (at {location})"),
            None => exception.to_owned(),
        });
    }
    Some(format!("{} (at {location})", message.trim()))
}

/// What componentize-py's interpreter panics with when an export raises an exception it cannot
/// return.
const PYTHON_UNEXPECTED: &str = "Python function threw an unexpected exception";
/// The first line of a traceback as Python prints it.
const PYTHON_TRACEBACK: &str = "Traceback (most recent call last):";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panic_message_takes_the_last_panic_and_drops_the_note() {
        let stderr = "noise\nthread '<unnamed>' panicked at src/lib.rs:3:5:\nfirst\n\
                      thread '<unnamed>' panicked at src/lib.rs:9:13:\nboom\ntwo lines\n\
                      note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n";
        assert_eq!(
            panic_message(stderr).unwrap(),
            "boom\ntwo lines (at src/lib.rs:9:13)"
        );
        assert_eq!(panic_message("no panic here"), None);
    }

    #[test]
    fn an_exception_python_could_not_return_is_told_by_its_traceback() {
        let traceback = "Traceback (most recent call last):\n  File \"app.py\", line 38, in \
                         <module>\n    undefined_name()\nNameError: name 'undefined_name' is not \
                         defined";
        let stderr = format!(
            "Traceback (most recent call last):\nan older one\n{traceback}\n\nthread '<unnamed>' \
             panicked at runtime/src/lib.rs:1280:25:\n{PYTHON_UNEXPECTED}\nnote: run with\n"
        );
        assert_eq!(
            panic_message(&stderr).unwrap(),
            "NameError: name 'undefined_name' is not defined (at app.py:38)"
        );
        // Another panic keeps its own message, whatever was written before it.
        let other = stderr.replace(PYTHON_UNEXPECTED, "index out of bounds");
        assert_eq!(
            panic_message(&other).unwrap(),
            "index out of bounds (at runtime/src/lib.rs:1280:25)"
        );
    }

    #[test]
    fn missing_capabilities_say_how_to_grant_them() {
        let failure = PluginFailure::MissingCapabilities {
            plugin: "hello".into(),
            missing: vec!["host-info".into(), "read:/proc".into()],
        };
        assert_eq!(
            failure.to_string(),
            "needs capabilities that were not granted: host-info, read:/proc; \
             grant them with --grant hello:host-info --grant hello:read:/proc"
        );
    }
}
