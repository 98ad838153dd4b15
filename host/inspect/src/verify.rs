//! `factbuoy inspect verify`: whether every file of a bundle matches `meta/index.json`, in one
//! streaming pass of [`Bundle::walk_and_digest`] that also takes the `.tar.gz` file's own
//! sha-256.

use std::collections::HashMap;

use factbuoy_bundle::layout;
use factbuoy_bundle::reader::{Bundle, MAX_INDEX_BYTES, ReadError, safe_path};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// One problem [`verify`] found, and the entry it is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// The entry's path (or the bundle's, for a problem of the whole archive).
    pub entry: String,
    /// What is wrong with it.
    pub problem: String,
}

/// What [`verify`] found.
#[derive(Debug, Clone, Serialize)]
pub struct Verification {
    /// The regular files read.
    pub files: u64,
    /// Their content's bytes.
    pub bytes: u64,
    /// The entries `meta/index.json` lists.
    pub indexed: u64,
    /// The `.tar.gz` file's size and sha-256 (none for a folder), to compare with `tar_info`.
    pub bundle_size: Option<u64>,
    /// See `bundle_size`.
    pub bundle_sha256: Option<String>,
    /// Everything wrong; empty when the bundle is whole.
    pub problems: Vec<Problem>,
    /// When the bundle is whole, a sha-256 of what it holds: every file's path, size and
    /// sha-256, in the order of their paths. Two bundles of the same files have the same one,
    /// however each was compressed or archived.
    pub content_sha256: Option<String>,
}

#[derive(Deserialize)]
struct IndexEntry {
    path: String,
    size: u64,
    sha256: String,
}

/// Checks every file of `bundle` against `meta/index.json` (size and sha-256, streamed), and
/// lists files present but not indexed, indexed but missing, and every refused entry. When
/// `expected_sha256` is given, the `.tar.gz` file's own digest is checked against it too.
pub fn verify(bundle: &Bundle, expected_sha256: Option<&str>) -> Verification {
    let mut problems = Vec::new();
    // Names are needed for "present but not indexed"; digests are kept raw (32 bytes, not 88).
    let mut found: HashMap<String, (u64, [u8; 32])> = HashMap::new();
    let mut index: Option<Vec<IndexEntry>> = None;
    let (mut files, mut bytes) = (0, 0);
    let walked = bundle.walk_and_digest(|visited| {
        let entry = match visited {
            Ok(entry) => entry,
            Err(refused) => {
                problems.push(Problem {
                    entry: refused.entry.clone(),
                    problem: refused.to_string(),
                });
                return Ok(());
            }
        };
        files += 1;
        if entry.path() == layout::INDEX {
            bytes += entry.size();
            match entry.read_json(MAX_INDEX_BYTES) {
                Ok(read) => index = Some(read),
                Err(e @ (ReadError::Read { .. } | ReadError::Corrupt { .. })) => return Err(e),
                Err(e) => problems.push(Problem {
                    entry: layout::INDEX.into(),
                    problem: e.to_string(),
                }),
            }
            return Ok(());
        }
        let (size, sha256) = entry.digest()?;
        bytes += size;
        found.insert(entry.path().to_owned(), (size, sha256));
        Ok(())
    });
    let (mut bundle_size, mut bundle_sha256) = (None, None);
    let whole = match walked {
        Ok(digest) => {
            if let Some((size, sha256)) = digest {
                if let Some(expected) = expected_sha256
                    && !expected.eq_ignore_ascii_case(&sha256)
                {
                    problems.push(Problem {
                        entry: bundle.path().display().to_string(),
                        problem: format!(
                            "the bundle's sha-256 is {sha256}, not the {expected} expected"
                        ),
                    });
                }
                bundle_size = Some(size);
                bundle_sha256 = Some(sha256);
            }
            true
        }
        Err(e) => {
            problems.push(Problem {
                entry: e.entry().to_owned(),
                problem: e.to_string(),
            });
            false
        }
    };
    let indexed = index.as_ref().map_or(0, |i| i.len() as u64);
    let mut content = whole.then(Sha256::new);
    match index {
        None if whole => {
            content = None;
            problems.push(Problem {
                entry: layout::INDEX.into(),
                problem: "no usable index: the bundle's files cannot be checked".into(),
            })
        }
        None => {}
        Some(index) => {
            let mut listed = std::collections::HashSet::new();
            for item in index {
                if safe_path(&item.path).ok().as_deref() != Some(item.path.as_str()) {
                    problems.push(Problem {
                        entry: item.path.clone(),
                        problem: "meta/index.json lists a path no bundle entry can have".into(),
                    });
                    continue;
                }
                if !listed.insert(item.path.clone()) {
                    problems.push(Problem {
                        entry: item.path.clone(),
                        problem: "meta/index.json lists it twice".into(),
                    });
                    continue;
                }
                match found.get(&item.path) {
                    // Past a corrupt stretch the rest was never reached: not "missing".
                    None if !whole => {}
                    None => problems.push(Problem {
                        entry: item.path.clone(),
                        problem: "indexed but missing from the bundle".into(),
                    }),
                    Some((size, _)) if *size != item.size => problems.push(Problem {
                        entry: item.path.clone(),
                        problem: format!("{size} bytes, but meta/index.json says {}", item.size),
                    }),
                    Some((_, sha256))
                        if !hex::encode(sha256).eq_ignore_ascii_case(&item.sha256) =>
                    {
                        problems.push(Problem {
                            entry: item.path.clone(),
                            problem: format!(
                                "sha-256 {}, but meta/index.json says {}",
                                hex::encode(sha256),
                                item.sha256
                            ),
                        })
                    }
                    Some(_) => {}
                }
            }
            if let Some(content) = &mut content {
                let mut files: Vec<(&String, &(u64, [u8; 32]))> = found.iter().collect();
                files.sort();
                for (path, (size, sha256)) in files {
                    content.update(format!("{path}\0{size}\0{}\n", hex::encode(sha256)));
                }
            }
            let mut unlisted: Vec<&String> =
                found.keys().filter(|p| !listed.contains(*p)).collect();
            unlisted.sort();
            for path in unlisted {
                problems.push(Problem {
                    entry: path.clone(),
                    problem: "present but not in meta/index.json".into(),
                });
            }
        }
    }
    let content_sha256 = content
        .filter(|_| problems.is_empty())
        .map(|content| hex::encode(content.finalize()));
    Verification {
        files,
        bytes,
        indexed,
        bundle_size,
        bundle_sha256,
        problems,
        content_sha256,
    }
}
