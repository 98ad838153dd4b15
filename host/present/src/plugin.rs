//! Plugins as a person reads them: what `plugin info` says of one, and what `plugin run` says of
//! an invocation. Every string here but the numbers is the plugin's, so all of it is shown
//! [`printable`].

use factbuoy_protocol::text::printable;
use factbuoy_runtime::InvocationReport;
use factbuoy_runtime::bindings::{ArtifactKind, Capability, PluginInfo};
use factbuoy_runtime::params::type_name;

/// `plugin info`: the plugin's name, version and description, its parameters, capabilities
/// and artifacts, every string the plugin's made printable.
pub fn describe_text(info: &PluginInfo) -> String {
    let mut text = format!("{} {}\n{}\n", info.name, info.version, info.description);
    if !info.parameters.is_empty() {
        text.push_str("\nParameters:\n");
        for p in &info.parameters {
            let mut notes = vec![type_name(p.type_).to_owned()];
            if p.required {
                notes.push("required".into());
            }
            if let Some(default) = &p.default {
                notes.push(format!("default {default}"));
            }
            if p.secret {
                notes.push("secret".into());
            }
            text.push_str(&format!(
                "  {} ({})\n      {}\n",
                p.name,
                notes.join(", "),
                p.description
            ));
        }
    }
    if !info.capabilities.is_empty() {
        text.push_str("\nCapabilities:\n");
        for c in &info.capabilities {
            let written = match &c.capability {
                Capability::HostInfo => "host-info".to_owned(),
                Capability::ReadPath(path) => format!("read:{path}"),
            };
            let need = if c.required { "required" } else { "optional" };
            text.push_str(&format!("  {written} ({need})\n      {}\n", c.reason));
        }
    }
    if !info.artifacts.is_empty() {
        text.push_str("\nArtifacts:\n");
        for a in &info.artifacts {
            text.push_str(&format!(
                "  {} ({}, {})\n      {}\n",
                a.name,
                a.media_type,
                kind_text(&a.kind),
                a.description
            ));
        }
    }
    // Every string here is the plugin's.
    text.lines().map(|l| printable(l) + "\n").collect()
}

/// An artifact's kind as `plugin info` shows it: `facts, mounts by mount_point`, `table by
/// name`, `log`, `opaque`.
fn kind_text(kind: &ArtifactKind) -> String {
    let keys = |keys: &[String]| keys.join(" + ");
    match kind {
        ArtifactKind::Facts(lists) if !lists.is_empty() => {
            let lists: Vec<String> = lists
                .iter()
                .map(|list| format!("{} by {}", list.path, keys(&list.keys)))
                .collect();
            format!("facts; {}", lists.join("; "))
        }
        ArtifactKind::Facts(_) => "facts".to_owned(),
        ArtifactKind::Table(columns) if !columns.is_empty() => {
            format!("table by {}", keys(columns))
        }
        ArtifactKind::Table(_) => "table".to_owned(),
        ArtifactKind::Log => "log".to_owned(),
        ArtifactKind::Opaque => "opaque".to_owned(),
    }
}

/// `plugin run`'s summary of an invocation: its outcome and duration, its artifacts, notes,
/// warnings and errors, and the plugin's stderr when it failed. A granted path missing on this host is noted when the operator named it (`read_grants`);
/// one a bundled plugin asks for and does without (`/dev/disk` in a container) only in the log.
pub fn run_lines(report: &InvocationReport, read_grants: &[String]) -> Vec<String> {
    let mut lines = Vec::new();
    // Everything below but the numbers is the plugin's text.
    let status = match report.failure_line() {
        Some(line) => format!("error: {}", printable(&line)),
        None => format!(
            "{} {}: succeeded",
            report.plugin,
            printable(&report.version)
        ),
    };
    lines.push(format!("{status} ({:.1} ms)", report.duration_ms));
    for artifact in &report.artifacts {
        let cut = if artifact.truncated {
            ", truncated"
        } else {
            ""
        };
        lines.push(format!(
            "  artifact {} ({}, {} bytes{cut})",
            artifact.name,
            printable(&artifact.media_type),
            artifact.size_bytes
        ));
    }
    for path in &report.absent_paths {
        if read_grants.contains(path) {
            lines.push(format!(
                "  note: granted {path} does not exist below the root; nothing mapped"
            ));
        } else {
            tracing::info!("{path} does not exist below the root; nothing mapped there");
        }
    }
    for warning in &report.warnings {
        lines.push(format!("  warning: {}", printable(warning)));
    }
    for error in &report.errors {
        lines.push(format!("  error: {}", printable(error)));
    }
    if report.failure.is_some() && !report.stderr.text.is_empty() {
        lines.push(format!("  plugin stderr:\n{}", indent(&report.stderr.text)));
    }
    lines
}

/// `text`'s lines indented and made printable.
fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("    {}", printable(l)))
        .collect::<Vec<_>>()
        .join("\n")
}
