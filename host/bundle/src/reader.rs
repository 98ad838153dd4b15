//! Reads a bundle, a `.tar.gz` or its extracted folder, without unpacking it: the archive is
//! streamed once, and only the entries asked for are read, each up to a size cap.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use anyhow::Context;

use crate::layout::{self, ResultKind};

/// A node's name and the bytes of its file, or why they could not be read.
pub type NodeFile = (String, Result<Vec<u8>, String>);

/// Each node's `artifact` among `plugin`'s results in the bundle at `path` (a `.tar.gz` or an
/// extracted folder), in the order they are found. A file that cannot be read, or is larger
/// than `max_bytes`, is an error for that node only; an archive cut short keeps the nodes read
/// before the cut and reports the rest as one error under `(rest of the bundle)`.
pub fn node_files(
    path: &Path,
    plugin: &str,
    artifact: &str,
    max_bytes: u64,
) -> anyhow::Result<Vec<NodeFile>> {
    // `plugins/<plugin>/results/`, the folder holding one folder per node.
    let results = layout::result_dir(plugin, "", ResultKind::Results);
    let results = results.trim_end_matches('/');
    if path.is_dir() {
        let folder = path.join(results);
        let mut found = Vec::new();
        let entries = match std::fs::read_dir(&folder) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(found),
            Err(e) => return Err(e).with_context(|| format!("listing {}", folder.display())),
        };
        for entry in entries {
            let entry = entry.with_context(|| format!("listing {}", folder.display()))?;
            let node = entry.file_name().to_string_lossy().into_owned();
            let file = entry.path().join(artifact);
            if !file.exists() {
                continue;
            }
            let name = file.display().to_string();
            let read = File::open(&file)
                .map_err(|e| format!("reading {name}: {e}"))
                .and_then(|f| read_capped(f, &name, max_bytes));
            found.push((node, read));
        }
        return Ok(found);
    }
    let file =
        File::open(path).with_context(|| format!("opening the bundle {}", path.display()))?;
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(BufReader::new(file)));
    let mut found = Vec::new();
    let unreadable = |found: &[NodeFile]| {
        if found.is_empty() {
            format!(
                "{} is corrupt, truncated or not a .tar.gz bundle",
                path.display()
            )
        } else {
            format!(
                "{} is corrupt or truncated after the nodes read so far",
                path.display()
            )
        }
    };
    let entries = archive.entries().with_context(|| unreadable(&found))?;
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) if found.is_empty() => return Err(e).context(unreadable(&found)),
            Err(e) => {
                let error = format!("{}: {e}", unreadable(&found));
                found.push(("(rest of the bundle)".to_owned(), Err(error)));
                break;
            }
        };
        let name = entry
            .path()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let Some(node) = name
            .strip_prefix(results)
            .and_then(|rest| rest.strip_prefix('/'))
            .and_then(|rest| rest.strip_suffix(artifact))
            .and_then(|rest| rest.strip_suffix('/'))
            .filter(|node| !node.is_empty() && !node.contains('/'))
        else {
            continue;
        };
        let node = node.to_owned();
        let read = read_capped(entry, &name, max_bytes);
        found.push((node, read));
    }
    Ok(found)
}

/// Reads at most `max_bytes` (one more tells a larger file apart).
fn read_capped(source: impl Read, name: &str, max_bytes: u64) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    source
        .take(max_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("reading {name}: {e}"))?;
    if bytes.len() as u64 > max_bytes {
        return Err(format!("{name} is larger than {max_bytes} bytes"));
    }
    Ok(bytes)
}
