//! How the CLI speaks: the output format, the exit status, and writing to stdout.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use clap::ValueEnum;

/// Output format (`-o`), kubectl's convention: a table for people, JSON or YAML for machines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Tables and sentences for people.
    #[value(alias = "text")]
    Table,
    /// One JSON document: pretty on a terminal, one line when piped.
    Json,
    /// One YAML document.
    Yaml,
}

/// The exit codes, as `factbuoy --help` documents them.
pub const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  a plugin or the run failed (the summary says which and why)
  2  invalid input: arguments, parameters, a file that is not a usable plugin
  3  not ready yet: the run is still going (retrieve without --wait)
  4  no such run: nothing known here by that id or directory";

/// How a command ended, mapped to the exit code ([`EXIT_CODES`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    Success,
    Failed,
    InvalidInput,
    NotReady,
    NoSuchRun,
}

impl From<ExitStatus> for ExitCode {
    fn from(status: ExitStatus) -> Self {
        ExitCode::from(match status {
            ExitStatus::Success => 0,
            ExitStatus::Failed => 1,
            ExitStatus::InvalidInput => 2,
            ExitStatus::NotReady => 3,
            ExitStatus::NoSuchRun => 4,
        })
    }
}

/// An error that ends a command with its own exit status rather than "invalid input".
#[derive(Debug, thiserror::Error)]
pub enum Ended {
    /// The run is still going and what was asked for does not exist yet.
    #[error("{0}")]
    NotReady(String),
    /// The command ran and what it ran failed (an agent that could not deliver, say).
    #[error("{0}")]
    Failed(String),
}

/// The exit status an error that ended a command maps to.
pub fn exit_status_of(error: &anyhow::Error) -> ExitStatus {
    use factbuoy_operator::Error as Operator;
    // `plugin build`: a toolchain that ran and failed, not one missing or a project refused.
    if error
        .downcast_ref::<factbuoy_authoring::Error>()
        .is_some_and(factbuoy_authoring::Error::is_failed_build)
    {
        return ExitStatus::Failed;
    }
    match (
        error.downcast_ref::<Ended>(),
        error.downcast_ref::<Operator>(),
    ) {
        (Some(Ended::NotReady(_)), _) | (_, Some(Operator::NotReady(_))) => ExitStatus::NotReady,
        (_, Some(Operator::NoSuchRun(_))) => ExitStatus::NoSuchRun,
        (Some(Ended::Failed(_)), _) | (_, Some(Operator::Stopped(_))) => ExitStatus::Failed,
        (_, Some(Operator::Other(cause))) => exit_status_of(cause),
        (None, None) => ExitStatus::InvalidInput,
    }
}

/// Writes `text` and a newline to stdout. A closed pipe (`factbuoy ... | head`) ends the
/// output quietly, as it does for other Unix tools, instead of panicking.
pub fn emit(text: &str) {
    emit_with(|out| writeln!(out, "{text}"));
}

/// Writes `value` as one document in `format` (JSON for [`Format::Table`] too, for commands
/// whose only output is a document): JSON pretty on a terminal and one line when piped, as it
/// is serialised, without building it in memory first.
pub fn emit_document(value: &impl serde::Serialize, format: Format) {
    emit_with(|out| {
        match format {
            Format::Yaml => {
                let text = serde_saphyr::to_string(value).map_err(std::io::Error::other)?;
                write!(out, "{}", text.trim_end())?;
            }
            Format::Json | Format::Table if std::io::stdout().is_terminal() => {
                serde_json::to_writer_pretty(&mut *out, value)?
            }
            Format::Json | Format::Table => serde_json::to_writer(&mut *out, value)?,
        }
        writeln!(out)
    });
}

/// Runs `write` on buffered stdout (a completion script, a man page, a document): a closed
/// pipe exits 0 quietly, any other error exits 2.
pub fn emit_with(write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) {
    let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
    match write(&mut stdout).and_then(|()| stdout.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => {
            // Nothing more can be written where the output goes; say why where it can be seen.
            let _ = writeln!(std::io::stderr(), "error: writing to stdout: {e}");
            std::process::exit(2)
        }
        Ok(()) => {}
    }
}

/// Prints an error that ended a command: a sentence on stderr, or a document on stdout.
pub fn report_error(error: &anyhow::Error, format: Format) {
    let text = sentence(error);
    match format {
        // A plugin's describe failure carries its own text (a panic message).
        Format::Table => {
            let _ = writeln!(
                std::io::stderr(),
                "error: {}",
                factbuoy_protocol::text::printable(&text)
            );
        }
        Format::Json | Format::Yaml => emit_document(&serde_json::json!({ "error": text }), format),
    }
}

/// An error and its causes as one sentence, `what: why: why`, as anyhow's `{:#}` writes it,
/// but for a cause that a message before it already says: many errors name their cause in
/// their own message and also give it as their source, which would print it twice.
pub fn sentence(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let said = cause.to_string();
        if text.is_empty() {
            text = said;
        } else if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cause already in its error's message is said once; one that is not is added.
    #[test]
    fn an_error_says_each_cause_once() {
        #[derive(Debug, thiserror::Error)]
        #[error("reading the plan: {0}")]
        struct Reading(#[from] std::io::Error);
        let io = || std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let error = anyhow::Error::new(Reading::from(io())).context("starting the run");
        assert_eq!(
            sentence(&error),
            "starting the run: reading the plan: no such file"
        );
        let error = anyhow::Error::new(io()).context("starting the run");
        assert_eq!(sentence(&error), "starting the run: no such file");
    }

    /// `plugin build`: a toolchain that ran and failed is a failed command, one that is missing
    /// is invalid input, as `plugin build --help` says.
    #[test]
    fn a_failed_build_exits_1_and_a_missing_toolchain_2() {
        use factbuoy_authoring::Error;
        let failed = anyhow::Error::new(Error::BuildFailed("cargo build failed".into()));
        assert_eq!(exit_status_of(&failed), ExitStatus::Failed);
        let missing = anyhow::Error::new(Error::MissingToolchain("install it".into()));
        assert_eq!(exit_status_of(&missing), ExitStatus::InvalidInput);
    }
}
