//! How the CLI speaks: the output format, the exit status, and writing to stdout.

use std::process::ExitCode;

use clap::ValueEnum;

/// Output format: text for people, json for machines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// `yaml` is the same: `gen` and `delete --dry-run` print YAML as their text.
    #[value(alias = "yaml")]
    Text,
    Json,
}

/// How a command ended, mapped to the exit code.
pub enum ExitStatus {
    Success,
    PluginFailed,
    InvalidInput,
}

impl From<ExitStatus> for ExitCode {
    fn from(status: ExitStatus) -> Self {
        match status {
            ExitStatus::Success => ExitCode::SUCCESS,
            ExitStatus::PluginFailed => ExitCode::from(1),
            ExitStatus::InvalidInput => ExitCode::from(2),
        }
    }
}

/// Writes `text` and a newline to stdout. A closed pipe (`factbuoy ... | head`) ends the
/// output quietly, as it does for other Unix tools, instead of panicking.
pub fn emit(text: &str) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match writeln!(stdout, "{text}").and_then(|()| stdout.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => {
            eprintln!("error: writing to stdout: {e}");
            std::process::exit(2)
        }
        Ok(()) => {}
    }
}

/// Writes `value` as pretty JSON and a newline to stdout as it is serialised, without building
/// it in memory first; a closed pipe ends the output quietly, as [`emit`] does.
pub fn emit_json(value: &impl serde::Serialize) {
    use std::io::Write;
    let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
    let written = serde_json::to_writer_pretty(&mut stdout, value)
        .map_err(std::io::Error::from)
        .and_then(|()| writeln!(stdout))
        .and_then(|()| stdout.flush());
    match written {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => {
            eprintln!("error: writing the report to stdout: {e}");
            std::process::exit(2)
        }
        Ok(()) => {}
    }
}

/// Prints an error that ended a command: a sentence on stderr, or a JSON object on stdout.
pub fn report_error(error: &anyhow::Error, format: Format) {
    match format {
        // A plugin's describe failure carries its own text (a panic message).
        Format::Text => eprintln!(
            "error: {}",
            factbuoy_protocol::text::printable(&format!("{error:#}"))
        ),
        Format::Json => emit(&serde_json::json!({ "error": format!("{error:#}") }).to_string()),
    }
}
