//! `factbuoy inspect`'s answers as a person reads them: a bundle's summary, drift and changes
//! ([`drift`]), a directory's history ([`history`]), log entries. What a bundle's author chose
//! (node names, fact values, messages) is cut to fit here and made printable where it is printed.

pub mod drift;
pub mod history;

use factbuoy_inspect::logs::LogEntry;
use factbuoy_inspect::{Answer, PluginFacts, Summary, Verification};
use factbuoy_protocol::text::printable;
use serde_json::Value;

use crate::summary::EMPTY_PASS;
use crate::table::{bytes, count, cut, fitted};

/// The widest a value is shown in a table; `-o json` has it whole.
const MAX_CELL_CHARS: usize = 100;

/// The most node names a cell lists before "and N more".
const MAX_NAMES: usize = 5;

/// Node names, the first few: `web-1, web-2 and 298 more`.
pub fn names(nodes: &[String]) -> String {
    let shown = nodes[..nodes.len().min(MAX_NAMES)].join(", ");
    match nodes.len().saturating_sub(MAX_NAMES) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

/// A value as a table shows it: strings bare, anything else as compact JSON, cut to fit.
pub fn cell(value: &Value) -> String {
    let text = match value {
        Value::String(text) if text.is_empty() => "\"\"".into(),
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    cut(&text, MAX_CELL_CHARS)
}

/// `inspect summary`: the run, its plugins, a table of nodes down and plugins across, the errors
/// and warnings, and the sizes.
pub fn summary_lines(summary: &Summary) -> Vec<String> {
    let run = &summary.run;
    // A pair that did not pass: it failed, or ended without a result (lost, timed out). A
    // run that completed with such pairs says so, as the report's badge does.
    let failures = summary
        .results
        .iter()
        .filter(|o| match &o.result_status {
            Some(result) if o.status == "complete" => result == "failed",
            _ => o.status != "skipped",
        })
        .count();
    let status = if run.status == "complete" && failures > 0 {
        format!("complete with {}", count(failures, "failure"))
    } else {
        run.status.clone()
    };
    let mut lines = vec![format!("run {}: {status}", run.run_id)];
    if let Some(error) = &run.error {
        lines.push(format!("  error: {error}"));
    }
    let or_unknown = |v: &Option<String>| v.clone().unwrap_or_else(|| "unknown".into());
    lines.push(format!(
        "  created {}, last activity {}, factbuoy {}",
        or_unknown(&run.created),
        or_unknown(&run.last_activity),
        or_unknown(&run.factbuoy_version)
    ));
    let plugins: Vec<String> = run
        .plugins
        .iter()
        .map(|p| format!("{} {}", p.name, or_unknown(&p.version)))
        .collect();
    lines.push(format!("  plugins: {}", plugins.join(", ")));
    lines.push(String::new());

    // Nodes down, plugins across: a fleet has more nodes than plugins.
    let mut columns: Vec<String> = Vec::new();
    for outcome in &summary.results {
        if !columns.contains(&outcome.plugin) {
            columns.push(outcome.plugin.clone());
        }
    }
    let mut rows = vec![
        std::iter::once("NODE".to_owned())
            .chain(columns.iter().cloned())
            .collect::<Vec<_>>(),
    ];
    for node in &run.nodes {
        let mut row = vec![node.clone()];
        for plugin in &columns {
            let cell = summary
                .results
                .iter()
                .find(|o| &o.plugin == plugin && &o.node == node)
                // `lost`, `timed-out`, `interrupted` say more than the stand-in's `failed`.
                .map(|o| match &o.result_status {
                    Some(_) if o.status == "complete" && o.empty => EMPTY_PASS.to_owned(),
                    Some(result) if o.status == "complete" => result.clone(),
                    _ => o.status.clone(),
                })
                .unwrap_or_else(|| "-".into());
            row.push(cell);
        }
        rows.push(row);
    }
    lines.extend(fitted(&rows, 0));

    if !summary.errors.is_empty() {
        lines.push(String::new());
        lines.push("Errors:".into());
        for e in &summary.errors {
            lines.push(format!("  - {} on {}: {}", e.plugin, e.node, e.error));
        }
    }
    if summary.results.iter().any(|o| !o.warnings.is_empty()) {
        lines.push(String::new());
        lines.push("Warnings:".into());
        for o in &summary.results {
            for warning in &o.warnings {
                lines.push(format!("  - {} on {}: {warning}", o.plugin, o.node));
            }
        }
    }
    let sizes = &summary.sizes;
    lines.push(String::new());
    let packed = sizes
        .bundle_bytes
        .map(|b| format!(" in a {} bundle", bytes(b)))
        .unwrap_or_default();
    lines.push(format!(
        "Sizes: {} files, {}{packed}",
        sizes.files,
        bytes(sizes.content_bytes)
    ));
    let by_plugin: Vec<String> = sizes
        .by_plugin
        .iter()
        .map(|p| format!("{} {}", p.plugin, bytes(p.bytes)))
        .collect();
    lines.push(format!("  by plugin: {}", by_plugin.join(", ")));
    lines
}

/// One entry of `inspect logs` in journalctl's short form with its node: time, node,
/// identifier, pid and message on one line, printable (a message's own line breaks and escape
/// sequences shown escaped), `time` as RFC 3339 with microseconds.
pub fn log_line(found: &LogEntry, time: Option<&str>) -> String {
    let field = |name: &str| found.entry.get(name).and_then(Value::as_str);
    let ident = field("SYSLOG_IDENTIFIER")
        .or_else(|| field("_COMM"))
        .or_else(|| field("_SYSTEMD_UNIT"))
        .unwrap_or("-");
    let pid = field("_PID")
        .or_else(|| field("SYSLOG_PID"))
        .map(|pid| format!("[{pid}]"))
        .unwrap_or_default();
    let message = factbuoy_inspect::logs::message(&found.entry)
        .unwrap_or_else(|| "[no message, or one too long to show: -o json has the entry]".into());
    let line = format!(
        "{} {} {ident}{pid}: {message}",
        time.unwrap_or("-"),
        found.node
    );
    printable(&line).into_owned()
}

/// One line per host an Ansible fact cache was written for: its files and how many facts.
/// Host names are the bundle's node names, whatever its author chose: escaped.
pub fn fact_cache_lines(written: &[factbuoy_inspect::ansible_cache::Written]) -> Vec<String> {
    written
        .iter()
        .map(|w| {
            let files: Vec<String> = w.files.iter().map(|f| f.display().to_string()).collect();
            let line = format!("{}: {} facts -> {}", w.host, w.facts, files.join(", "));
            printable(&line).into_owned()
        })
        .collect()
}

/// `inspect verify`: that every file matches the index, or each problem found; then the
/// bundle's sha-256 when it was computed. `name` is the bundle as the user named it.
pub fn verify_text(name: &str, verification: &Verification) -> String {
    let mut text = if verification.problems.is_empty() {
        format!(
            "{name}: every file matches meta/index.json ({} files, the index among them, {})",
            verification.files,
            bytes(verification.bytes)
        )
    } else {
        let count = verification.problems.len();
        let plural = if count == 1 { "" } else { "s" };
        let mut lines = vec![format!("{name}: {count} problem{plural}")];
        for problem in &verification.problems {
            lines.push(format!("  - {}: {}", problem.entry, problem.problem));
        }
        let shown: Vec<String> = lines.iter().map(|l| printable(l).into_owned()).collect();
        shown.join("\n")
    };
    if let Some(sha256) = &verification.bundle_sha256 {
        text.push_str(&format!("\nsha256 {sha256}"));
    }
    text
}

/// `inspect facts`: a row per leaf of each plugin's facts, under a header.
pub fn facts_rows(facts: &[PluginFacts]) -> Vec<Vec<String>> {
    let mut rows = vec![vec!["PLUGIN".to_owned(), "PATH".into(), "VALUE".into()]];
    for document in facts {
        for (path, value) in factbuoy_inspect::leaves(&document.facts) {
            rows.push(vec![document.plugin.clone(), path, cell(value)]);
        }
    }
    rows
}

/// `inspect query`: a row per value found, per node and plugin (`-` where a plugin has none).
pub fn query_rows(answers: &[Answer]) -> Vec<Vec<String>> {
    let mut rows = vec![vec!["NODE".to_owned(), "PLUGIN".into(), "VALUE".into()]];
    for answer in answers {
        for found in &answer.plugins {
            let plugin = &found.plugin;
            if found.values.is_empty() {
                rows.push(vec![answer.node.clone(), plugin.clone(), "-".into()]);
            }
            for value in &found.values {
                rows.push(vec![answer.node.clone(), plugin.clone(), cell(value)]);
            }
        }
    }
    rows
}

/// `inspect sql`: the answer's columns, then its rows with each value as a cell.
pub fn sql_rows(answer: &factbuoy_inspect::sql::Answer) -> Vec<Vec<String>> {
    let mut rows = vec![answer.columns.clone()];
    rows.extend(
        answer
            .rows
            .iter()
            .map(|row| row.iter().map(cell).collect::<Vec<_>>()),
    );
    rows
}
