//! Lists the SDK files `factbuoy plugin new` copies into a new project (`sdk_files.rs` in
//! OUT_DIR): the Rust SDK crate (guest-sdk/) with the Linux parsers it shares with the host
//! (linux/), the Python package and the JavaScript package, every file of each embedded as it
//! is. A file added to an SDK is copied with it, without a list kept by hand.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// A folder of the repository copied into new projects: the folder, the folder it becomes in a
/// project, and the entries left out (other SDKs, build output, caches).
type Folder = (&'static str, &'static str, &'static [&'static str]);

/// Each SDK: the constant that lists it and its folders. The Rust SDK's Cargo.toml inherits
/// factbuoy-linux from the workspace, which the Rust template's Cargo.toml declares at
/// `factbuoy-linux/`.
const SDKS: &[(&str, &[Folder])] = &[
    (
        "RUST_SDK",
        &[
            ("guest-sdk", "factbuoy-guest", &["python", "js", "target"]),
            ("linux", "factbuoy-linux", &["target"]),
        ],
    ),
    (
        "PYTHON_SDK",
        &[(
            "guest-sdk/python/factbuoy_plugin",
            "factbuoy_plugin",
            &["__pycache__"],
        )],
    ),
    (
        "JS_SDK",
        &[(
            "guest-sdk/js/factbuoy-plugin",
            "factbuoy-plugin",
            &["node_modules"],
        )],
    ),
];

fn main() {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap());
    // host/authoring -> the workspace root.
    let workspace = manifest_dir.ancestors().nth(2).unwrap();
    versions(workspace);
    let mut generated = String::new();
    for (constant, folders) in SDKS {
        let listed: Vec<String> = folders
            .iter()
            .map(|(folder, ..)| format!("{folder}/"))
            .collect();
        writeln!(
            generated,
            "/// The files of {}, as `plugin new` writes them: (path in the project, bytes).\n\
             pub const {constant}: &[(&str, &[u8])] = &[",
            listed.join(" and ")
        )
        .unwrap();
        for (folder, into, skip) in *folders {
            let root = workspace.join(folder);
            // A folder: cargo reruns this when any file below it changes, or one is added.
            println!("cargo:rerun-if-changed={}", root.display());
            let mut files = Vec::new();
            walk(&root, &root, skip, &mut files);
            files.sort();
            for relative in files {
                writeln!(
                    generated,
                    "    ({:?}, include_bytes!({:?})),",
                    format!("{into}/{relative}"),
                    root.join(&relative).display().to_string()
                )
                .unwrap();
            }
        }
        generated.push_str("];\n");
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap()).join("sdk_files.rs");
    std::fs::write(out, generated).unwrap();
}

/// Hands the contract's and the SDKs' versions, stated once in the workspace's Cargo.toml
/// (`[workspace.metadata.factbuoy]`), to the crate as `FACTBUOY_CONTRACT_VERSION` and
/// `FACTBUOY_SDK_VERSION`. Read line by line: the table holds only `key = "value"` lines, and
/// the crate's tests check what came out against every other mention.
fn versions(workspace: &Path) {
    let manifest = workspace.join("Cargo.toml");
    println!("cargo:rerun-if-changed={}", manifest.display());
    let text = std::fs::read_to_string(&manifest).unwrap();
    let table = text
        .split_once("\n[workspace.metadata.factbuoy]\n")
        .expect("the workspace's Cargo.toml has a [workspace.metadata.factbuoy] table")
        .1;
    let table = table.split("\n[").next().unwrap();
    for (key, variable) in [
        ("contract", "FACTBUOY_CONTRACT_VERSION"),
        ("sdk", "FACTBUOY_SDK_VERSION"),
    ] {
        let value = table
            .lines()
            .find_map(|line| {
                let (k, v) = line.split_once('=')?;
                (k.trim() == key).then(|| v.trim().trim_matches('"').to_owned())
            })
            .unwrap_or_else(|| panic!("[workspace.metadata.factbuoy] has no {key}"));
        println!("cargo:rustc-env={variable}={value}");
    }
}

/// Adds the files below `dir` to `files`, as `/`-separated paths relative to `root`, leaving out
/// entries named in `skip` at any depth.
fn walk(root: &Path, dir: &Path, skip: &[&str], files: &mut Vec<String>) {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy();
        if skip.contains(&name.as_ref()) || name.ends_with(".pyc") {
            continue;
        }
        if path.is_dir() {
            walk(root, &path, skip, files);
        } else {
            let relative = path.strip_prefix(root).unwrap();
            let parts: Vec<_> = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            files.push(parts.join("/"));
        }
    }
}
