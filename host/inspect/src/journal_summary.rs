//! A bundle's journals at a glance, for the report: how many entries of each priority, the
//! units that logged most, and the latest errors, read through [`logs::merge`] so that the
//! errors come in time order across nodes and memory stays bounded whatever the journals' size.

use std::collections::{HashMap, VecDeque};

use factbuoy_bundle::reader::Bundle;
use serde::Serialize;
use serde_json::Value;

use crate::logs::{self, Filter, LogsError};

/// The units listed, those that logged most.
pub const TOP_UNITS: usize = 20;

/// The errors listed, the latest.
pub const LATEST_ERRORS: usize = 100;

/// The most severe priority counted as an error's: `err` (3) and above (`crit`, `alert`,
/// `emerg`), as `journalctl -p err` selects.
const ERROR_PRIORITY: u8 = 3;

/// The priorities' names, 0 to 7, as journalctl names them.
const PRIORITY_NAMES: [&str; 8] = [
    "emerg", "alert", "crit", "err", "warning", "notice", "info", "debug",
];

/// What the journals of a bundle hold.
#[derive(Debug, Default, Serialize)]
pub struct JournalSummary {
    /// The nodes with a journal in the bundle.
    pub nodes: Vec<String>,
    /// Every entry.
    pub entries: u64,
    /// Entries by priority, most severe first; entries without a priority are not in it.
    pub by_priority: Vec<PriorityCount>,
    /// The units (or, for what no unit logged, the syslog identifier) that logged most, at
    /// most [`TOP_UNITS`], most entries first.
    pub units: Vec<UnitCount>,
    /// How many units there are in all.
    pub unit_count: usize,
    /// Entries of priority `err` or more severe.
    pub error_count: u64,
    /// The latest of them, at most [`LATEST_ERRORS`], in time order.
    pub errors: Vec<JournalError>,
}

/// A priority and its entries.
#[derive(Debug, Serialize)]
pub struct PriorityCount {
    /// Its name (`err`).
    pub priority: &'static str,
    /// How many entries.
    pub entries: u64,
}

/// A unit and its entries.
#[derive(Debug, Serialize)]
pub struct UnitCount {
    /// The unit (`sshd.service`), the syslog identifier of what no unit logged, or `(none)`.
    pub unit: String,
    /// How many entries.
    pub entries: u64,
    /// How many of them are errors.
    pub errors: u64,
}

/// One error entry.
#[derive(Debug, Serialize)]
pub struct JournalError {
    /// The node.
    pub node: String,
    /// When, RFC 3339 UTC to the second; `None` for an entry without a time.
    pub time: Option<String>,
    /// Its unit, as [`UnitCount::unit`].
    pub unit: String,
    /// Its priority's name.
    pub priority: &'static str,
    /// Its message.
    pub message: String,
}

/// Summarises every journal of `bundle`.
pub fn summarize(bundle: &Bundle) -> Result<JournalSummary, LogsError> {
    let mut priorities = [0u64; 8];
    let mut units: HashMap<String, (u64, u64)> = HashMap::new();
    let mut errors = VecDeque::with_capacity(LATEST_ERRORS);
    let mut error_count = 0;
    let merged = logs::merge(bundle, &Filter::default(), |e| {
        let priority = e
            .entry
            .get("PRIORITY")
            .and_then(Value::as_str)
            .and_then(|p| p.parse::<u8>().ok())
            .filter(|p| *p <= 7);
        let unit = unit_of(&e.entry);
        let is_error = priority.is_some_and(|p| p <= ERROR_PRIORITY);
        if let Some(p) = priority {
            priorities[usize::from(p)] += 1;
        }
        let counts = units.entry(unit.to_owned()).or_default();
        counts.0 += 1;
        if is_error {
            counts.1 += 1;
            error_count += 1;
            if errors.len() == LATEST_ERRORS {
                errors.pop_front();
            }
            errors.push_back(JournalError {
                node: e.node,
                time: e.time.and_then(rfc3339),
                unit: unit.to_owned(),
                priority: priority.map_or("", |p| PRIORITY_NAMES[usize::from(p)]),
                message: logs::message(&e.entry).unwrap_or_default(),
            });
        }
        Ok(())
    })?;
    let unit_count = units.len();
    let mut units: Vec<UnitCount> = units
        .into_iter()
        .map(|(unit, (entries, errors))| UnitCount {
            unit,
            entries,
            errors,
        })
        .collect();
    units.sort_by(|a, b| b.entries.cmp(&a.entries).then_with(|| a.unit.cmp(&b.unit)));
    units.truncate(TOP_UNITS);
    Ok(JournalSummary {
        nodes: merged.nodes,
        entries: merged.entries,
        by_priority: PRIORITY_NAMES
            .iter()
            .zip(priorities)
            .filter(|(_, n)| *n > 0)
            .map(|(priority, entries)| PriorityCount { priority, entries })
            .collect(),
        units,
        unit_count,
        error_count,
        errors: errors.into(),
    })
}

/// What logged an entry: its unit, else its syslog identifier (the kernel's are `kernel`).
fn unit_of(entry: &Value) -> &str {
    ["_SYSTEMD_UNIT", "SYSLOG_IDENTIFIER"]
        .iter()
        .find_map(|field| entry.get(*field).and_then(Value::as_str))
        .unwrap_or("(none)")
}

/// Microseconds since the epoch as RFC 3339 UTC, to the second.
fn rfc3339(micros: u64) -> Option<String> {
    let seconds = i64::try_from(micros / 1_000_000).ok()?;
    let at = time::OffsetDateTime::from_unix_timestamp(seconds).ok()?;
    at.format(&time::format_description::well_known::Rfc3339)
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_counted_under_its_unit_else_its_identifier() {
        let entry = |v: Value| unit_of(&v).to_owned();
        assert_eq!(
            entry(serde_json::json!({"_SYSTEMD_UNIT": "ssh.service", "SYSLOG_IDENTIFIER": "sshd"})),
            "ssh.service"
        );
        assert_eq!(
            entry(serde_json::json!({"SYSLOG_IDENTIFIER": "kernel"})),
            "kernel"
        );
        assert_eq!(entry(serde_json::json!({})), "(none)");
    }

    #[test]
    fn times_are_to_the_second() {
        assert_eq!(
            rfc3339(1_764_123_456_789_012).as_deref(),
            Some("2025-11-26T02:17:36Z")
        );
    }
}
