//! Looking for a value (a secret) in everything a run left: files, and the entries of every
//! `.tar.gz` bundle among them.

use std::io::Read;
use std::path::Path;

/// Every file below `dir` that holds `needle`, looking inside `.tar.gz` bundles too.
pub fn files_holding(dir: &Path, needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(path) = pending.pop() {
        if path.is_dir() {
            pending.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        // Sockets and other special files hold nothing to read.
        if !path.is_file() {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        if contains(&bytes, needle) {
            found.push(path.display().to_string());
        }
        if path.to_string_lossy().ends_with(".tar.gz") {
            let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(&bytes[..]));
            for entry in archive.entries().unwrap() {
                let mut entry = entry.unwrap();
                let mut content = Vec::new();
                entry.read_to_end(&mut content).unwrap();
                if contains(&content, needle) {
                    let name = entry.path().unwrap().display().to_string();
                    found.push(format!("{} in {}", name, path.display()));
                }
            }
        }
    }
    found
}

/// Whether `haystack` holds `needle`'s bytes.
pub fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}
