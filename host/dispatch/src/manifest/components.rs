//! Plugin components that are not in the image travel to the aggregator pod in ConfigMaps, and
//! agents fetch them from the aggregator by digest. A ConfigMap holds at most 1 MiB and a Python
//! plugin is about 19 MB, so each component is cut into parts of [`PART_BYTES`], one ConfigMap
//! per part, mounted side by side under [`COMPONENTS_DIR`]. The aggregator joins the parts and
//! checks the result against the component's digest before it serves a byte of it.

use std::collections::BTreeMap;
use std::path::Path;

/// Where the aggregator pod mounts the parts: `<dir>/<part number>/<key>`.
pub const COMPONENTS_DIR: &str = "/etc/factbuoy/components";
/// Bytes of a component in one ConfigMap: under the 1 MiB limit, with room for the object's
/// metadata in etcd's 1.5 MiB request limit.
pub const PART_BYTES: usize = 960 * 1024;
/// Most bytes of components one run may store in the cluster: etcd holds them until the run is
/// deleted, so this bounds what a run costs the control plane.
pub const MAX_COMPONENTS_BYTES: usize = 128 << 20;
/// Prefix of the parts' ConfigMap names (`factbuoy-plugin-part-0`, ...).
pub const PART_CONFIG_MAP_PREFIX: &str = "factbuoy-plugin-part-";

/// One piece of a component: the ConfigMap key it is stored under names the component's digest,
/// the piece's index and their count (`<sha256>.<index>-of-<count>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// The ConfigMap key.
    pub key: String,
    /// The piece's bytes.
    pub bytes: Vec<u8>,
}

/// Cuts `components` (digest, bytes) into parts of at most [`PART_BYTES`], in order.
pub fn split(components: &[(String, Vec<u8>)]) -> Vec<Part> {
    let mut parts = Vec::new();
    for (sha256, wasm) in components {
        let count = wasm.len().div_ceil(PART_BYTES);
        for (index, chunk) in wasm.chunks(PART_BYTES).enumerate() {
            parts.push(Part {
                key: format!("{sha256}.{index}-of-{count}"),
                bytes: chunk.to_vec(),
            });
        }
    }
    parts
}

/// Why the parts under [`COMPONENTS_DIR`] do not make whole components.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    /// A file could not be read.
    #[error("reading the plugin parts in {path}: {error}")]
    Io {
        /// The file or folder.
        path: String,
        /// Why.
        error: std::io::Error,
    },
    /// A file whose name is not `<sha256>.<index>-of-<count>`.
    #[error(
        "{0} is not a plugin part (`<sha256>.<index>-of-<count>`); were the run's ConfigMaps edited?"
    )]
    BadName(String),
    /// Some part of a component is not there.
    #[error(
        "plugin component {sha256} lacks part {index} of {count}; apply the run's ConfigMaps `{PART_CONFIG_MAP_PREFIX}*` again"
    )]
    Missing {
        /// The component's digest.
        sha256: String,
        /// The first missing part.
        index: usize,
        /// How many parts it has.
        count: usize,
    },
    /// The joined parts are not the component the plan names.
    #[error(
        "plugin component {expected} joined from its parts has digest {actual}; its ConfigMaps were changed or mixed with another run's"
    )]
    Digest {
        /// The digest the parts are named after.
        expected: String,
        /// The digest of what they joined into.
        actual: String,
    },
}

/// Joins the parts found under `dir` (one folder per part's ConfigMap) into components, each
/// checked against its digest. A missing `dir` holds none.
pub fn join(dir: &Path) -> Result<Vec<(String, Vec<u8>)>, JoinError> {
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| JoinError::Io {
            path,
            error: source,
        }
    };
    // digest -> (count, index -> bytes)
    let mut found: BTreeMap<String, (usize, BTreeMap<usize, Vec<u8>>)> = BTreeMap::new();
    let folders = match std::fs::read_dir(dir) {
        Ok(folders) => folders,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(dir)(e)),
    };
    for folder in folders {
        let folder = folder.map_err(io(dir))?.path();
        for entry in std::fs::read_dir(&folder).map_err(io(&folder))? {
            let path = entry.map_err(io(&folder))?.path();
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
                return Err(JoinError::BadName(path.display().to_string()));
            };
            // A ConfigMap volume also holds `..data` and the timestamped folder it links to.
            if name.starts_with('.') {
                continue;
            }
            let (sha256, index, count) =
                parse_key(name).ok_or_else(|| JoinError::BadName(name.to_owned()))?;
            let bytes = std::fs::read(&path).map_err(io(&path))?;
            found
                .entry(sha256.to_owned())
                .or_insert_with(|| (count, BTreeMap::new()))
                .1
                .insert(index, bytes);
        }
    }
    let mut components = Vec::new();
    for (sha256, (count, mut pieces)) in found {
        let mut wasm = Vec::new();
        for index in 0..count {
            let piece = pieces.remove(&index).ok_or_else(|| JoinError::Missing {
                sha256: sha256.clone(),
                index,
                count,
            })?;
            wasm.extend_from_slice(&piece);
        }
        let actual = factbuoy_protocol::digest::sha256_hex(&wasm);
        if actual != sha256 {
            return Err(JoinError::Digest {
                expected: sha256,
                actual,
            });
        }
        components.push((sha256, wasm));
    }
    Ok(components)
}

/// `<sha256>.<index>-of-<count>`, with a lower-case hex digest and `index < count`.
fn parse_key(key: &str) -> Option<(&str, usize, usize)> {
    let (sha256, position) = key.split_once('.')?;
    let (index, count) = position.split_once("-of-")?;
    let (index, count): (usize, usize) = (index.parse().ok()?, count.parse().ok()?);
    let hex = sha256.len() == 64
        && sha256
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    (hex && index < count).then_some((sha256, index, count))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn component(len: usize, seed: u8) -> (String, Vec<u8>) {
        let wasm: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(seed)).collect();
        (factbuoy_protocol::digest::sha256_hex(&wasm), wasm)
    }

    /// Lays the parts out as the pod sees them: one folder per ConfigMap.
    fn mount(parts: &[Part]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (n, part) in parts.iter().enumerate() {
            let folder = dir.path().join(n.to_string());
            std::fs::create_dir_all(folder.join("..data")).unwrap();
            std::fs::write(folder.join(&part.key), &part.bytes).unwrap();
        }
        dir
    }

    #[test]
    fn components_larger_than_a_config_map_are_cut_and_joined_whole() {
        let big = component(3 * PART_BYTES + 17, 7);
        let small = component(1000, 3);
        let parts = split(&[big.clone(), small.clone()]);
        assert_eq!(parts.len(), 5);
        assert!(parts.iter().all(|p| p.bytes.len() <= PART_BYTES));
        assert_eq!(parts[0].key, format!("{}.0-of-4", big.0));
        let dir = mount(&parts);
        let mut joined = join(dir.path()).unwrap();
        joined.sort();
        let mut expected = vec![big, small];
        expected.sort();
        assert_eq!(joined, expected);
    }

    #[test]
    fn a_missing_or_altered_part_is_refused_by_name() {
        let big = component(2 * PART_BYTES, 5);
        let mut parts = split(std::slice::from_ref(&big));
        let dir = mount(&parts[..1]);
        let error = join(dir.path()).unwrap_err().to_string();
        assert!(error.contains("lacks part 1 of 2"), "{error}");

        parts[1].bytes[0] ^= 1;
        let dir = mount(&parts);
        let error = join(dir.path()).unwrap_err().to_string();
        assert!(error.contains(&format!("{} joined", big.0)), "{error}");

        let dir = mount(&[Part {
            key: "not-a-digest.0-of-1".into(),
            bytes: vec![],
        }]);
        assert!(matches!(join(dir.path()), Err(JoinError::BadName(_))));
    }

    #[test]
    fn no_folder_means_no_components() {
        let dir = tempfile::tempdir().unwrap();
        assert!(join(&dir.path().join("absent")).unwrap().is_empty());
    }
}
