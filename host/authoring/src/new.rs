//! New projects (`factbuoy plugin new`): a ready plugin project in Rust, Python or JavaScript
//! from the templates in host/authoring/templates/, with this factbuoy's WIT contract and SDK,
//! so that the project builds outside any checkout of factbuoy.

use std::path::{Path, PathBuf};

use factbuoy_protocol::names::is_valid_plugin_name;

use crate::error::{Error, IoContext as _};

/// The contract this factbuoy runs, written into every new project as `wit/gatherer.wit`.
const GATHERER_WIT: &str = include_str!("../../../wit/gatherer.wit");

/// The guest SDKs' version, from the workspace's `[workspace.metadata.factbuoy]` (build.rs): a
/// Rust project names its copy of the SDK by it.
const SDK_VERSION: &str = env!("FACTBUOY_SDK_VERSION");

/// The language a plugin project is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Lang {
    /// Rust, built with cargo for wasm32-wasip2.
    Rust,
    /// Python, built with componentize-py.
    Python,
    /// JavaScript, built with componentize-js (jco's componentize).
    Js,
}

impl Lang {
    /// The language's name, for people.
    pub fn name(self) -> &'static str {
        match self {
            Lang::Rust => "Rust",
            Lang::Python => "Python",
            Lang::Js => "JavaScript",
        }
    }

    /// What to run in a new project to build it.
    pub fn build_steps(self) -> &'static str {
        match self {
            // The toolchain comes from the npm registry, pinned in the project's package.json.
            Lang::Js => "npm install && factbuoy plugin build",
            Lang::Rust | Lang::Python => "factbuoy plugin build",
        }
    }
}

/// A file of a new project: its path in the project and its template text.
struct Template {
    path: &'static str,
    text: &'static str,
}

const RUST: &[Template] = &[
    Template {
        path: "Cargo.toml",
        text: include_str!("../templates/rust/Cargo.toml.tmpl"),
    },
    Template {
        path: "src/lib.rs",
        text: include_str!("../templates/rust/lib.rs"),
    },
    Template {
        path: "README.md",
        text: include_str!("../templates/rust/README.md"),
    },
    Template {
        path: ".gitignore",
        text: include_str!("../templates/rust/gitignore"),
    },
];

const PYTHON: &[Template] = &[
    Template {
        path: "app.py",
        text: include_str!("../templates/python/app.py"),
    },
    Template {
        path: "README.md",
        text: include_str!("../templates/python/README.md"),
    },
    Template {
        path: ".gitignore",
        text: include_str!("../templates/python/gitignore"),
    },
];

const JS: &[Template] = &[
    Template {
        path: "package.json",
        text: include_str!("../templates/js/package.json"),
    },
    Template {
        path: "app.js",
        text: include_str!("../templates/js/app.js"),
    },
    Template {
        path: "README.md",
        text: include_str!("../templates/js/README.md"),
    },
    Template {
        path: ".gitignore",
        text: include_str!("../templates/js/gitignore"),
    },
];

/// The SDKs, copied whole into each project, so that it builds without a package index (for
/// Rust, only crates.io's ordinary dependencies) and outside any factbuoy checkout. Listed by
/// build.rs.
mod sdk {
    include!(concat!(env!("OUT_DIR"), "/sdk_files.rs"));
}

/// Writes a new `lang` project for a plugin called `name` into `dir` (which must not exist) and
/// returns the paths written, relative to `dir`. A name that is not a plugin's, or a `dir` that
/// exists, is an [`Error::Invalid`].
pub fn new_project(name: &str, lang: Lang, dir: &Path) -> Result<Vec<PathBuf>, Error> {
    if !(is_valid_plugin_name(name) && name.starts_with(|c: char| c.is_ascii_lowercase())) {
        return Err(Error::Invalid(format!(
            "plugin name {name:?} must be a-z, 0-9 and `-`, starting with a letter (it names the \
             plugin in URLs and bundles, and the crate or module)"
        )));
    }
    if dir.exists() {
        return Err(Error::Invalid(format!(
            "{} already exists; choose another name or --dir, or remove it",
            dir.display()
        )));
    }
    let (templates, sdk) = match lang {
        Lang::Rust => (RUST, sdk::RUST_SDK),
        Lang::Python => (PYTHON, sdk::PYTHON_SDK),
        Lang::Js => (JS, sdk::JS_SDK),
    };
    let files = templates
        .iter()
        .map(|t| (t.path, render(t.text, name).into_bytes()))
        .chain(sdk.iter().map(|(path, bytes)| (*path, bytes.to_vec())))
        .chain([("wit/gatherer.wit", GATHERER_WIT.as_bytes().to_vec())]);
    let mut written = Vec::new();
    for (path, bytes) in files {
        let target = dir.join(path);
        let parent = target.parent().expect("a template path has a parent");
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
        std::fs::write(&target, bytes).with_context(|| format!("writing {}", target.display()))?;
        written.push(PathBuf::from(path));
    }
    Ok(written)
}

/// A template's text for the plugin `name` (`{{name}}`; `{{crate}}`: the name as a Rust
/// identifier; `{{sdk_version}}`: the SDK's version).
fn render(template: &str, name: &str) -> String {
    template
        .replace("{{name}}", name)
        .replace("{{crate}}", &name.replace('-', "_"))
        .replace("{{sdk_version}}", SDK_VERSION)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_each_language_with_the_name_filled_in() {
        let tmp = tempfile::tempdir().unwrap();
        for (lang, source) in [
            (Lang::Rust, "src/lib.rs"),
            (Lang::Python, "app.py"),
            (Lang::Js, "app.js"),
        ] {
            let dir = tmp.path().join(format!("{lang:?}"));
            let written = new_project("disk-usage", lang, &dir).unwrap();
            assert!(written.contains(&PathBuf::from("wit/gatherer.wit")));
            let text = std::fs::read_to_string(dir.join(source)).unwrap();
            assert!(text.contains("\"disk-usage\""), "{text}");
            assert!(!text.contains("{{"), "{text}");
        }
        let cargo = std::fs::read_to_string(tmp.path().join("Rust/Cargo.toml")).unwrap();
        assert!(cargo.contains("name = \"disk-usage\""));
    }

    #[test]
    fn each_project_holds_its_sdk_whole_and_its_readme_links_nowhere_made_up() {
        let tmp = tempfile::tempdir().unwrap();
        for (lang, sdk_file) in [
            (Lang::Rust, "factbuoy-guest/src/lib.rs"),
            (Lang::Rust, "factbuoy-linux/src/lib.rs"),
            (Lang::Python, "factbuoy_plugin/host_info.pyi"),
            (Lang::Python, "factbuoy_plugin/py.typed"),
            (Lang::Js, "factbuoy-plugin/index.d.ts"),
        ] {
            let dir = tmp.path().join(format!("{lang:?}"));
            if !dir.exists() {
                new_project("disk-usage", lang, &dir).unwrap();
            }
            assert!(dir.join(sdk_file).is_file(), "{lang:?}: no {sdk_file}");
            let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
            assert!(!readme.contains("example.invalid"), "{readme}");
        }
        assert!(
            !tmp.path()
                .join("Python/factbuoy_plugin/__pycache__")
                .exists()
        );
    }

    /// The README shows what `plugin new my-facts --lang rust` writes into src/lib.rs, word for
    /// word (tests/all/plugin_authoring.rs builds and runs it outside the repository).
    #[test]
    fn the_readmes_rust_example_is_what_plugin_new_writes() {
        let readme = include_str!("../../../README.md");
        let section = readme
            .split_once("## Writing a plugin")
            .expect("the README has a \"## Writing a plugin\" section")
            .1;
        let example = section
            .split_once("```rust\n")
            .and_then(|(_, rest)| rest.split_once("```"))
            .expect("the section has a ```rust block")
            .0;
        assert_eq!(
            example,
            render(include_str!("../templates/rust/lib.rs"), "my-facts")
        );
    }

    /// The SDK copied into a Rust project carries the SDKs' version, which the project's
    /// Cargo.toml names; the Linux parsers copied with it carry the workspace's, as the
    /// workspace's crates inherit it.
    #[test]
    fn the_copied_sdk_crates_have_their_versions() {
        let manifest = |path: &str| {
            let (_, text) = sdk::RUST_SDK.iter().find(|(p, _)| *p == path).unwrap();
            std::str::from_utf8(text).unwrap()
        };
        let guest = manifest("factbuoy-guest/Cargo.toml");
        assert!(
            guest.contains(&format!("\nversion = \"{SDK_VERSION}\"\n")),
            "{guest}"
        );
        let linux = manifest("factbuoy-linux/Cargo.toml");
        let version = format!("\nversion = \"{}\"\n", env!("CARGO_PKG_VERSION"));
        assert!(linux.contains(&version), "{linux}");
        let project = render(include_str!("../templates/rust/Cargo.toml.tmpl"), "x");
        let dependency = format!(
            "factbuoy-guest = {{ version = \"{SDK_VERSION}\", path = \"factbuoy-guest\" }}"
        );
        assert!(project.contains(&dependency), "{project}");
    }

    /// The versions stated once in the workspace's Cargo.toml are the ones every other place
    /// says: the WIT package line and the host's `CONTRACT_VERSION` (which `factbuoy version`
    /// prints), the Rust, Python and JavaScript SDKs' manifests, the workspace's dependency on
    /// the SDK, and the docs that name them. The SDKs speak the contract's line, so they share
    /// its major and minor version (docs/wit-versioning.md, "Versions of the contract and the
    /// SDKs").
    #[test]
    fn every_mention_of_the_contract_and_sdk_versions_is_the_one_stated() {
        let contract = env!("FACTBUOY_CONTRACT_VERSION");
        let line = |version: &str| version.rsplit_once('.').unwrap().0.to_owned();
        assert_eq!(line(SDK_VERSION), line(contract));
        for (place, text, expected) in [
            (
                "wit/gatherer.wit",
                GATHERER_WIT,
                format!("\npackage factbuoy:plugin@{contract};\n"),
            ),
            (
                "host/runtime/src/bindings.rs",
                include_str!("../../runtime/src/bindings.rs"),
                format!("pub const CONTRACT_VERSION: &str = \"{contract}\";"),
            ),
            (
                "guest-sdk/Cargo.toml",
                include_str!("../../../guest-sdk/Cargo.toml"),
                format!("\nversion = \"{SDK_VERSION}\"\n"),
            ),
            (
                "guest-sdk/python/pyproject.toml",
                include_str!("../../../guest-sdk/python/pyproject.toml"),
                format!("\nversion = \"{SDK_VERSION}\"\n"),
            ),
            (
                "guest-sdk/js/package.json",
                include_str!("../../../guest-sdk/js/package.json"),
                format!("\n  \"version\": \"{SDK_VERSION}\",\n"),
            ),
            (
                "Cargo.toml",
                include_str!("../../../Cargo.toml"),
                format!("factbuoy-guest = {{ path = \"guest-sdk\", version = \"{SDK_VERSION}\" }}"),
            ),
            (
                "docs/wit-versioning.md",
                include_str!("../../../docs/wit-versioning.md"),
                format!("Today the contract is {contract} and the SDKs are {SDK_VERSION}."),
            ),
            (
                "docs/cli.md",
                include_str!("../../../docs/cli.md"),
                format!(
                    "factbuoy-guest = {{ version = \"{SDK_VERSION}\", path = \"factbuoy-guest\" }}"
                ),
            ),
        ] {
            assert!(
                text.contains(&expected),
                "{place} does not say {expected:?}"
            );
        }
    }

    #[test]
    fn refuses_bad_names_and_existing_directories() {
        let tmp = tempfile::tempdir().unwrap();
        let err = new_project("Disk", Lang::Rust, &tmp.path().join("x")).unwrap_err();
        assert!(err.to_string().contains("must be a-z"), "{err}");
        let err = new_project("disk", Lang::Python, tmp.path()).unwrap_err();
        assert!(err.to_string().contains("already exists"), "{err}");
    }
}
