//! `factbuoy inspect logs`: the journal entries of a bundle's systemd-logs results, filtered
//! by node, unit, priority, time and text, merged across nodes in time order.
//!
//! Each node's `journal.jsonl` is in journalctl's order, which is not strictly by time (files
//! interleave). The merge keeps each node's order and, at every step, takes the node whose next
//! entry is the earliest, as `journalctl` does across files. A bundle streams nodes one after
//! another, so the entries each node keeps are first written to one temporary file, a segment
//! per node; the merge then reads every segment at once through small buffers. Memory is a
//! buffer and an entry per node, whatever the journals' sizes.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::os::unix::fs::FileExt;

use factbuoy_bundle::layout::result_parts;
use factbuoy_bundle::reader::{Bundle, Entry, ReadError};
use serde_json::Value;
use wildmatch::WildMatch;

/// The plugin whose results hold journals, and its artifact (docs/systemd-logs.md).
pub(crate) const JOURNAL_SOURCE: (&str, &str) = ("systemd-logs", "journal.jsonl");

/// The longest journal line read: journalctl writes fields of 4096 bytes or more as `null`
/// unless told otherwise, so real lines are far shorter; a longer one is refused, by entry.
pub const MAX_LINE_BYTES: u64 = 16 * 1024 * 1024;

/// journald's message id of a coredump (`MESSAGE_ID` of systemd-coredump's entries).
const COREDUMP_MESSAGE_ID: &str = "fc2e22bc6ee647b6b90729ab34a250b1";

/// Which entries to keep. Every filter given must match.
#[derive(Debug, Default, Clone)]
pub struct Filter {
    /// Only these nodes (none: every node).
    pub nodes: Vec<String>,
    /// Only entries about these units, matched as `journalctl -u` matches.
    pub units: Vec<Unit>,
    /// Only entries of this priority (0 emerg ... 7 debug) or more severe.
    pub priority: Option<u8>,
    /// Only entries at or after this time, microseconds since the epoch.
    pub since: Option<u64>,
    /// Only entries at or before this time, microseconds since the epoch.
    pub until: Option<u64>,
    /// Only entries whose message contains this text.
    pub grep: Option<String>,
}

/// A unit name or pattern, as `journalctl -u` takes it.
#[derive(Debug, Clone)]
pub struct Unit {
    name: String,
    pattern: WildMatch,
}

impl Unit {
    /// `sshd` means `sshd.service`, as in journalctl; `*` and `?` make a pattern.
    pub fn new(given: &str) -> Unit {
        let pattern = given.contains(['*', '?']);
        let name = if pattern || given.contains('.') {
            given.to_owned()
        } else {
            format!("{given}.service")
        };
        Unit {
            pattern: WildMatch::new(&name),
            name,
        }
    }

    /// The unit name or pattern, completed.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether `entry` is about this unit: what the unit logged, systemd-coredump's report of
    /// its crash, PID 1's messages about it, and those of root's daemons about it, the matches
    /// `journalctl -u` makes.
    fn matches(&self, entry: &Value) -> bool {
        let field = |name: &str| entry.get(name).and_then(Value::as_str);
        let is = |name: &str| field(name).is_some_and(|unit| self.pattern.matches(unit));
        is("_SYSTEMD_UNIT")
            || (field("MESSAGE_ID") == Some(COREDUMP_MESSAGE_ID) && is("COREDUMP_UNIT"))
            || (field("_PID") == Some("1") && is("UNIT"))
            || (field("_UID") == Some("0") && is("OBJECT_SYSTEMD_UNIT"))
    }
}

impl Filter {
    fn keeps_node(&self, node: &str) -> bool {
        self.nodes.is_empty() || self.nodes.iter().any(|n| n == node)
    }

    fn keeps(&self, entry: &Value, time: Option<u64>) -> bool {
        if !self.units.is_empty() && !self.units.iter().any(|u| u.matches(entry)) {
            return false;
        }
        if let Some(level) = self.priority {
            let priority = entry
                .get("PRIORITY")
                .and_then(Value::as_str)
                .and_then(|p| p.parse::<u8>().ok());
            if priority.is_none_or(|p| p > level) {
                return false;
            }
        }
        if self.since.is_some() || self.until.is_some() {
            let Some(time) = time else { return false };
            if self.since.is_some_and(|since| time < since)
                || self.until.is_some_and(|until| time > until)
            {
                return false;
            }
        }
        if let Some(text) = &self.grep
            && !message(entry).is_some_and(|m| m.contains(text.as_str()))
        {
            return false;
        }
        true
    }
}

/// An entry's `MESSAGE` as text: journalctl writes a message that is not UTF-8 as an array of
/// byte values, and a long one (4096 bytes or more) as `null`.
pub fn message(entry: &Value) -> Option<String> {
    match entry.get("MESSAGE")? {
        Value::String(text) => Some(text.clone()),
        Value::Array(bytes) => {
            let bytes: Vec<u8> = bytes
                .iter()
                .filter_map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok()))
                .collect();
            Some(String::from_utf8_lossy(&bytes).into_owned())
        }
        _ => None,
    }
}

/// An entry's time, microseconds since the epoch (`__REALTIME_TIMESTAMP`).
pub(crate) fn time(entry: &Value) -> Option<u64> {
    entry.get("__REALTIME_TIMESTAMP")?.as_str()?.parse().ok()
}

/// One entry of the merged stream.
pub struct LogEntry {
    /// The node it was logged on.
    pub node: String,
    /// Its time, microseconds since the epoch; `None` for an entry without one (they sort
    /// first).
    pub time: Option<u64>,
    /// The entry, as journalctl wrote it.
    pub entry: Value,
}

/// What [`merge`] found besides the entries.
#[derive(Debug, Default)]
pub struct Merged {
    /// The nodes with a journal in the bundle.
    pub nodes: Vec<String>,
    /// The entries handed over.
    pub entries: u64,
    /// The entries read from the journals of the nodes asked for, before the other filters.
    pub read: u64,
}

/// Why the logs could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LogsError {
    /// The bundle could not be read.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// A line of a journal is not a JSON entry.
    #[error(
        "entry {entry}, line {line}: not a journal entry as journalctl -o json writes them: {cause}"
    )]
    Line {
        /// The journal's path in the bundle.
        entry: String,
        /// The line number.
        line: u64,
        /// Why.
        cause: String,
    },
    /// The temporary file the entries are merged from.
    #[error("the temporary file for merging the journals: {0}")]
    Spill(std::io::Error),
    /// `emit` failed (stdout closed, say).
    #[error(transparent)]
    Emit(std::io::Error),
}

/// Each node's kept entries: a stretch of the temporary file.
struct Segment {
    node: String,
    start: u64,
    end: u64,
}

/// Hands every entry of `bundle`'s journals that `filter` keeps to `emit`, merged across nodes
/// in time order (each node's own order kept).
pub fn merge(
    bundle: &Bundle,
    filter: &Filter,
    mut emit: impl FnMut(LogEntry) -> std::io::Result<()>,
) -> Result<Merged, LogsError> {
    let spill = tempfile::tempfile().map_err(LogsError::Spill)?;
    let mut segments = Vec::new();
    let mut merged = Merged::default();
    {
        let mut out = BufWriter::new(&spill);
        let mut written = 0u64;
        each_journal(bundle, |node, entry, path| {
            merged.nodes.push(node.to_owned());
            if !filter.keeps_node(node) {
                return Ok(());
            }
            let start = written;
            keep(
                entry,
                path,
                filter,
                &mut out,
                &mut written,
                &mut merged.read,
            )?;
            segments.push(Segment {
                node: node.to_owned(),
                start,
                end: written,
            });
            Ok(())
        })?;
        out.flush().map_err(LogsError::Spill)?;
    }

    // Each segment's next entry, earliest first; ties go to the node found first.
    let mut readers: Vec<SegmentLines> = segments
        .iter()
        .map(|s| SegmentLines::new(&spill, s))
        .collect();
    let mut heap = BinaryHeap::new();
    for (i, reader) in readers.iter_mut().enumerate() {
        if let Some((time, _)) = reader.peek().map_err(LogsError::Spill)? {
            heap.push(Reverse((time, i)));
        }
    }
    while let Some(Reverse((_, i))) = heap.pop() {
        let (time, line) = readers[i]
            .take()
            .map_err(LogsError::Spill)?
            .expect("a segment in the heap has a next entry");
        let entry: Value = serde_json::from_slice(&line)
            .map_err(|e| LogsError::Spill(std::io::Error::other(e)))?;
        emit(LogEntry {
            node: segments[i].node.clone(),
            time: (time != NO_TIME).then_some(time),
            entry,
        })
        .map_err(LogsError::Emit)?;
        merged.entries += 1;
        if let Some((time, _)) = readers[i].peek().map_err(LogsError::Spill)? {
            heap.push(Reverse((time, i)));
        }
    }
    Ok(merged)
}

/// Hands each node's journal in `bundle` to `journal(node, entry, path)`, in the bundle's
/// order; the first error `journal` returns ends the walk and is returned.
pub(crate) fn each_journal(
    bundle: &Bundle,
    mut journal: impl FnMut(&str, &mut Entry<'_>, &str) -> Result<(), Kept>,
) -> Result<(), LogsError> {
    let mut failed: Option<LogsError> = None;
    let walked = bundle.walk(|visited| {
        let entry = visited.map_err(ReadError::Refused)?;
        let path = entry.path().to_owned();
        let Some((plugin, "results", node, file)) = result_parts(&path) else {
            return Ok(());
        };
        if (plugin, file) != JOURNAL_SOURCE {
            return Ok(());
        }
        match journal(node, entry, &path) {
            Ok(()) => Ok(()),
            Err(Kept::Read(e)) => Err(e),
            Err(Kept::Other(e)) => {
                failed = Some(e);
                // Ends the walk; `failed` is what is reported.
                Err(ReadError::Read {
                    entry: path.clone(),
                    cause: std::io::Error::other("stopped"),
                })
            }
        }
    });
    if let Some(e) = failed {
        return Err(e);
    }
    Ok(walked?)
}

/// The sort key of an entry without a time: before every other.
const NO_TIME: u64 = 0;

/// Why reading a journal stopped: the bundle, or anything else (a bad line, the spill file).
pub(crate) enum Kept {
    Read(ReadError),
    Other(LogsError),
}

/// Filters one journal into the temporary file, a line per kept entry: its time as 16 hex
/// digits, a space, the entry as it was written.
fn keep(
    entry: &mut Entry<'_>,
    path: &str,
    filter: &Filter,
    out: &mut impl Write,
    written: &mut u64,
    read_entries: &mut u64,
) -> Result<(), Kept> {
    each_entry(entry, path, |text, value| {
        *read_entries += 1;
        let when = time(&value);
        if !filter.keeps(&value, when) {
            return Ok(());
        }
        let spill = |e| Kept::Other(LogsError::Spill(e));
        write!(out, "{:016x} ", when.unwrap_or(NO_TIME)).map_err(spill)?;
        out.write_all(text).map_err(spill)?;
        out.write_all(b"\n").map_err(spill)?;
        *written += 17 + text.len() as u64 + 1;
        Ok(())
    })
}

/// Calls `found(text, entry)` with each entry of the journal `entry` (at `path` in the
/// bundle), in its order, a line at a time through a small buffer, blank lines passed over. A
/// line longer than [`MAX_LINE_BYTES`], or one that is not a JSON object, is an error naming
/// the journal and the line.
pub(crate) fn each_entry(
    entry: &mut Entry<'_>,
    path: &str,
    mut found: impl FnMut(&[u8], Value) -> Result<(), Kept>,
) -> Result<(), Kept> {
    let read_error = |cause| {
        Kept::Read(ReadError::Read {
            entry: path.to_owned(),
            cause,
        })
    };
    let mut lines = BufReader::with_capacity(64 * 1024, entry);
    let mut line = Vec::new();
    let mut number = 0u64;
    loop {
        line.clear();
        number += 1;
        let read = (&mut lines)
            .take(MAX_LINE_BYTES + 1)
            .read_until(b'\n', &mut line)
            .map_err(read_error)?;
        if read == 0 {
            return Ok(());
        }
        if line.len() as u64 > MAX_LINE_BYTES {
            return Err(Kept::Other(LogsError::Line {
                entry: path.to_owned(),
                line: number,
                cause: format!("longer than {MAX_LINE_BYTES} bytes"),
            }));
        }
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let value: Value = serde_json::from_slice(text).map_err(|e| {
            Kept::Other(LogsError::Line {
                entry: path.to_owned(),
                line: number,
                cause: e.to_string(),
            })
        })?;
        if !value.is_object() {
            return Err(Kept::Other(LogsError::Line {
                entry: path.to_owned(),
                line: number,
                cause: "not a JSON object".into(),
            }));
        }
        found(text, value)?;
    }
}

/// Reads one segment of the temporary file, an entry at a time.
struct SegmentLines<'f> {
    lines: BufReader<At<'f>>,
    next: Option<(u64, Vec<u8>)>,
}

impl<'f> SegmentLines<'f> {
    fn new(file: &'f File, segment: &Segment) -> Self {
        SegmentLines {
            // Small buffers: one per node is open at once.
            lines: BufReader::with_capacity(
                16 * 1024,
                At {
                    file,
                    position: segment.start,
                    end: segment.end,
                },
            ),
            next: None,
        }
    }

    /// The next entry's time and line, read if need be.
    fn peek(&mut self) -> std::io::Result<Option<(u64, &[u8])>> {
        if self.next.is_none() {
            let mut line = Vec::new();
            if self.lines.read_until(b'\n', &mut line)? == 0 {
                return Ok(None);
            }
            let time = std::str::from_utf8(&line[..16])
                .ok()
                .and_then(|t| u64::from_str_radix(t, 16).ok())
                .ok_or_else(|| std::io::Error::other("a damaged temporary file"))?;
            line.drain(..17);
            line.pop();
            self.next = Some((time, line));
        }
        Ok(self.next.as_ref().map(|(t, l)| (*t, l.as_slice())))
    }

    /// The next entry, consumed.
    fn take(&mut self) -> std::io::Result<Option<(u64, Vec<u8>)>> {
        self.peek()?;
        Ok(self.next.take())
    }
}

/// A stretch of a file read by position, so that every segment has its own cursor on one file.
struct At<'f> {
    file: &'f File,
    position: u64,
    end: u64,
}

impl Read for At<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = usize::try_from(self.end - self.position).unwrap_or(usize::MAX);
        let want = buf.len().min(left);
        if want == 0 {
            return Ok(0);
        }
        let n = self.file.read_at(&mut buf[..want], self.position)?;
        self.position += n as u64;
        Ok(n)
    }
}

/// journalctl's priority names, most severe first.
const PRIORITIES: [&str; 8] = [
    "emerg", "alert", "crit", "err", "warning", "notice", "info", "debug",
];

/// A priority as journalctl's `-p` takes it: 0-7 or a name (`err`, `warning`, ...).
pub fn priority(given: &str) -> Result<u8, String> {
    let aliases = [("error", 3), ("warn", 4), ("panic", 0)];
    given
        .parse::<u8>()
        .ok()
        .filter(|p| *p <= 7)
        .or_else(|| PRIORITIES.iter().position(|p| *p == given).map(|p| p as u8))
        .or_else(|| aliases.iter().find(|(a, _)| *a == given).map(|(_, p)| *p))
        .ok_or_else(|| {
            format!(
                "{given:?} is not a priority: 0-7, or {}",
                PRIORITIES.join(", ")
            )
        })
}

/// A point in time as microseconds since the epoch, journald's unit, in the forms the
/// systemd-logs plugin's own `since` takes (`1h`, `yesterday`, `2026-11-23 14:00`, UTC).
pub fn micros_since_epoch(given: &str) -> Result<u64, String> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    factbuoy_linux::timespec::parse(given, factbuoy_linux::timespec::micros(now))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_unit_matches_as_journalctl_u_does() {
        let sshd = Unit::new("sshd");
        assert_eq!(sshd.name(), "sshd.service");
        let entry = |fields: Value| fields;
        assert!(sshd.matches(&entry(serde_json::json!({"_SYSTEMD_UNIT": "sshd.service"}))));
        assert!(sshd.matches(&entry(
            serde_json::json!({"_PID": "1", "UNIT": "sshd.service"})
        )));
        assert!(!sshd.matches(&entry(
            serde_json::json!({"_PID": "77", "UNIT": "sshd.service"})
        )));
        assert!(sshd.matches(&entry(
            serde_json::json!({"_UID": "0", "OBJECT_SYSTEMD_UNIT": "sshd.service"})
        )));
        assert!(sshd.matches(&entry(serde_json::json!({
            "MESSAGE_ID": COREDUMP_MESSAGE_ID, "COREDUMP_UNIT": "sshd.service"
        }))));
        assert!(Unit::new("unit-*").matches(&entry(
            serde_json::json!({"_SYSTEMD_UNIT": "unit-27.service"})
        )));
        assert_eq!(
            Unit::new("systemd-journald.socket").name(),
            "systemd-journald.socket"
        );
    }
}
