//! A bundle's journals at a glance, for the report: how many entries of each priority, the
//! units that logged most, and the latest errors. One pass over every journal, an entry at a
//! time; the latest errors are kept in a heap by time, so memory is the counts and those
//! errors whatever the journals' size or the fleet's.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use factbuoy_bundle::reader::Bundle;
use serde::Serialize;
use serde_json::Value;

use crate::logs::{self, LogsError};

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
    /// The latest of them, at most [`LATEST_ERRORS`], in time order (ties in the order read).
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
    let mut nodes = Vec::new();
    let mut entries = 0;
    let mut priorities = [0u64; 8];
    let mut units: HashMap<String, (u64, u64)> = HashMap::new();
    // The latest errors: (time, the order read) -> the error, earliest on top to be dropped.
    let mut latest: BinaryHeap<Reverse<(u64, u64, ErrorAt)>> = BinaryHeap::new();
    let mut error_count = 0;
    logs::each_journal(bundle, |node, entry, path| {
        let node = node.to_owned();
        let read = logs::each_entry(entry, path, |_, value| {
            entries += 1;
            let priority = value
                .get("PRIORITY")
                .and_then(Value::as_str)
                .and_then(|p| p.parse::<u8>().ok())
                .filter(|p| *p <= 7);
            let unit = unit_of(&value);
            let is_error = priority.is_some_and(|p| p <= ERROR_PRIORITY);
            if let Some(p) = priority {
                priorities[usize::from(p)] += 1;
            }
            let counts = units.entry(unit.to_owned()).or_default();
            counts.0 += 1;
            if is_error {
                counts.1 += 1;
                error_count += 1;
                let at = logs::time(&value).unwrap_or(0);
                if latest.len() < LATEST_ERRORS
                    || latest.peek().is_some_and(|Reverse((t, _, _))| at >= *t)
                {
                    latest.push(Reverse((
                        at,
                        error_count,
                        ErrorAt(JournalError {
                            node: node.clone(),
                            time: logs::time(&value).and_then(rfc3339),
                            unit: unit.to_owned(),
                            priority: priority.map_or("", |p| PRIORITY_NAMES[usize::from(p)]),
                            message: logs::message(&value).unwrap_or_default(),
                        }),
                    )));
                    if latest.len() > LATEST_ERRORS {
                        latest.pop();
                    }
                }
            }
            Ok(())
        });
        nodes.push(node);
        read
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
    // In time order, ties in the order read.
    let mut errors: Vec<(u64, u64, JournalError)> = latest
        .into_iter()
        .map(|Reverse((at, read, ErrorAt(e)))| (at, read, e))
        .collect();
    errors.sort_by_key(|(at, read, _)| (*at, *read));
    Ok(JournalSummary {
        nodes,
        entries,
        by_priority: PRIORITY_NAMES
            .iter()
            .zip(priorities)
            .filter(|(_, n)| *n > 0)
            .map(|(priority, entries)| PriorityCount { priority, entries })
            .collect(),
        units,
        unit_count,
        error_count,
        errors: errors.into_iter().map(|(_, _, e)| e).collect(),
    })
}

/// An error in the heap of the latest, ordered by the time and read order beside it alone.
#[derive(Debug)]
struct ErrorAt(JournalError);

impl PartialEq for ErrorAt {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl Eq for ErrorAt {}
impl PartialOrd for ErrorAt {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for ErrorAt {
    fn cmp(&self, _: &Self) -> std::cmp::Ordering {
        std::cmp::Ordering::Equal
    }
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
