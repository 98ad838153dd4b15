//! `factbuoy inspect logs`: every node's journal entries, merged in time order by
//! [`factbuoy_inspect::logs`], printed as they come.

use std::path::PathBuf;

use anyhow::bail;
use clap::Args;
use factbuoy_bundle::reader::Bundle;
use factbuoy_inspect::logs;
use factbuoy_present::inspect::{self as present, names};
use factbuoy_present::table::count;
use serde_json::Value;

use crate::output::{ExitStatus, Format};

#[derive(Debug, Args)]
pub struct LogsArgs {
    /// The bundle: a .tar.gz or the folder it was extracted to.
    bundle: PathBuf,
    /// Only this node's entries (may be repeated).
    #[arg(long, value_name = "NODE")]
    node: Vec<String>,
    /// Only entries about this unit or unit pattern (may be repeated).
    #[arg(short, long, value_name = "UNIT")]
    unit: Vec<String>,
    /// Only entries of this priority or more severe: 0-7, or emerg, alert, crit, err,
    /// warning, notice, info, debug.
    #[arg(long, value_name = "LEVEL", value_parser = logs::priority)]
    priority: Option<u8>,
    /// Only entries at or after this time: a duration ago (`1h`, `2days`, `2days ago`), `today`,
    /// `yesterday`, a UTC date and time (`2026-11-23 14:00`) or `@SECONDS`.
    #[arg(long, value_name = "TIME", value_parser = logs::micros_since_epoch)]
    since: Option<u64>,
    /// Only entries at or before this time, written as for --since.
    #[arg(long, value_name = "TIME", value_parser = logs::micros_since_epoch)]
    until: Option<u64>,
    /// Only entries whose message contains TEXT.
    #[arg(short, long, value_name = "TEXT")]
    grep: Option<String>,
}

pub fn logs(args: LogsArgs, format: Format) -> anyhow::Result<ExitStatus> {
    let bundle = Bundle::open(&args.bundle)?;
    let filter = logs::Filter {
        nodes: args.node.clone(),
        units: args.unit.iter().map(|u| logs::Unit::new(u)).collect(),
        priority: args.priority,
        since: args.since,
        until: args.until,
        grep: args.grep.clone(),
    };
    // Entries are written as they are merged, never gathered.
    let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
    let merged = logs::merge(&bundle, &filter, |found| {
        write_entry(&mut stdout, &found, format)
    })
    .and_then(|merged| {
        std::io::Write::flush(&mut stdout)
            .map(|()| merged)
            .map_err(logs::LogsError::Emit)
    });
    let merged = match merged {
        // `factbuoy inspect logs ... | head`: a closed pipe ends the output quietly.
        Err(logs::LogsError::Emit(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            return Ok(ExitStatus::Success);
        }
        other => other?,
    };
    if merged.nodes.is_empty() {
        bail!(
            "{} has no journals (plugins/systemd-logs/results/<node>/journal.jsonl): was the \
             systemd-logs plugin part of the run, with its default output=json?",
            args.bundle.display()
        );
    }
    let missing: Vec<&str> = args
        .node
        .iter()
        .filter(|n| !merged.nodes.contains(n))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        bail!(
            "{} has no journal for {}; it has journals for {}",
            args.bundle.display(),
            missing.join(", "),
            names(&merged.nodes)
        );
    }
    if merged.entries == 0 {
        // Nothing printed: say why, so that an empty output is not mistaken for a quiet node.
        let journals = count(merged.nodes.len(), "journal");
        if merged.read == 0 {
            let hold = if merged.nodes.len() == 1 {
                "holds"
            } else {
                "hold"
            };
            eprintln!(
                "{}: its {journals} {hold} no entries (the systemd-logs plugin found none to collect)",
                args.bundle.display()
            );
        } else {
            eprintln!(
                "{}: none of the {} entries of its {journals} matches the filters",
                args.bundle.display(),
                merged.read
            );
        }
    }
    Ok(ExitStatus::Success)
}

/// One line of `-o json`: the fields in this order.
#[derive(serde::Serialize)]
struct LogLine<'a> {
    node: &'a str,
    time: Option<String>,
    entry: &'a Value,
}

/// Writes one merged entry: journalctl's short form with the node for people, a JSON line or
/// a YAML document for machines.
fn write_entry(
    out: &mut impl std::io::Write,
    found: &logs::LogEntry,
    format: Format,
) -> std::io::Result<()> {
    let time = found.time.map(|micros| {
        let at = std::time::UNIX_EPOCH + std::time::Duration::from_micros(micros);
        humantime::format_rfc3339_micros(at).to_string()
    });
    match format {
        // One entry, one line: nothing the bundle's author chose reaches the terminal raw.
        Format::Table => writeln!(out, "{}", present::log_line(found, time.as_deref())),
        Format::Json => {
            let line = LogLine {
                node: &found.node,
                time,
                entry: &found.entry,
            };
            serde_json::to_writer(&mut *out, &line)?;
            writeln!(out)
        }
        Format::Yaml => {
            let line = LogLine {
                node: &found.node,
                time,
                entry: &found.entry,
            };
            let text = serde_saphyr::to_string(&line).map_err(std::io::Error::other)?;
            writeln!(out, "---\n{}", text.trim_end())
        }
    }
}
