//! The compilation cache as `plugin cache list` and `plugin cache prune` show it: a row per
//! compiled plugin (plugin, size, when last used, digest) and the totals.

use std::path::Path;
use std::time::SystemTime;

use bytesize::ByteSize;
use factbuoy_protocol::text::printable;
use factbuoy_runtime::cache::CacheEntry;

/// `plugin cache list`: the entries in aligned columns, then how many take how much of the cap.
pub fn list_lines(entries: &[CacheEntry], max_bytes: u64, root: &Path) -> Vec<String> {
    let total: u64 = entries.iter().map(|e| e.size_bytes).sum();
    let mut lines = Vec::new();
    if !entries.is_empty() {
        let rows: Vec<[String; 4]> = entries.iter().map(row).collect();
        let width = |i: usize| rows.iter().map(|r| r[i].len()).max().unwrap_or(0);
        let widths = [width(0).max(6), width(1).max(4), width(2).max(9)];
        lines.push(format!(
            "{:w0$}  {:>w1$}  {:w2$}  DIGEST",
            "PLUGIN",
            "SIZE",
            "LAST USED",
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2]
        ));
        for [plugin, size, used, digest] in rows {
            lines.push(format!(
                "{plugin:w0$}  {size:>w1$}  {used:w2$}  {digest}",
                w0 = widths[0],
                w1 = widths[1],
                w2 = widths[2]
            ));
        }
    }
    lines.push(format!(
        "{} compiled {}, {} of at most {} in {}",
        entries.len(),
        plural(entries.len()),
        ByteSize::b(total),
        ByteSize::b(max_bytes),
        root.display()
    ));
    lines
}

/// `plugin cache prune`: a line per entry removed (or that would be, for a dry run), then what
/// that frees and what is kept.
pub fn prune_lines(removing: &[CacheEntry], freed: u64, kept: u64, dry_run: bool) -> Vec<String> {
    let mut lines = Vec::new();
    let verb = if dry_run { "would remove" } else { "removed" };
    for entry in removing {
        let [plugin, size, used, digest] = row(entry);
        lines.push(format!("{verb} {plugin} ({size}, used {used}) {digest}"));
    }
    lines.push(format!(
        "{verb} {} compiled {}, {}; {} kept",
        removing.len(),
        plural(removing.len()),
        ByteSize::b(freed),
        ByteSize::b(kept)
    ));
    lines
}

/// An entry's row: plugin, size, when last used, digest (short; marked when another version's).
fn row(entry: &CacheEntry) -> [String; 4] {
    let plugin = entry
        .plugin
        .as_deref()
        .map_or_else(|| "?".to_owned(), |name| printable(name).into_owned());
    let digest = &entry.sha256[..entry.sha256.len().min(12)];
    let digest = if entry.current {
        digest.to_owned()
    } else {
        format!("{digest} (another factbuoy version's)")
    };
    [
        plugin,
        ByteSize::b(entry.size_bytes).to_string(),
        ago(entry.last_used),
        digest,
    ]
}

/// "plugin" or "plugins", for `count` of them.
fn plural(count: usize) -> &'static str {
    if count == 1 { "plugin" } else { "plugins" }
}

/// How long ago `time` was, in its largest unit: `40s ago`, `3m ago`, `5h ago`, `2d ago`.
fn ago(time: SystemTime) -> String {
    let seconds = SystemTime::now()
        .duration_since(time)
        .unwrap_or_default()
        .as_secs();
    match seconds {
        0..60 => format!("{seconds}s ago"),
        60..3600 => format!("{}m ago", seconds / 60),
        3600..86400 => format!("{}h ago", seconds / 3600),
        _ => format!("{}d ago", seconds / 86400),
    }
}
