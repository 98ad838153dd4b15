//! `factbuoy plugin new`: writes a ready plugin project in Rust, Python or JavaScript from the templates in
//! host/cli/templates/, with this binary's WIT contract, so that the project builds outside any
//! checkout of factbuoy.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::ValueEnum;
use factbuoy_runtime::description::is_valid_plugin_name;

/// The contract this binary runs, written into every new project as `wit/gatherer.wit`.
const GATHERER_WIT: &str = include_str!("../../../wit/gatherer.wit");

/// The language a plugin project is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
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

/// The Python SDK is copied whole into each project (no package index needed to build it).
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
    Template {
        path: "factbuoy_plugin/__init__.py",
        text: include_str!("../../../guest-sdk/python/factbuoy_plugin/__init__.py"),
    },
    Template {
        path: "factbuoy_plugin/describe.py",
        text: include_str!("../../../guest-sdk/python/factbuoy_plugin/describe.py"),
    },
    Template {
        path: "factbuoy_plugin/errors.py",
        text: include_str!("../../../guest-sdk/python/factbuoy_plugin/errors.py"),
    },
    Template {
        path: "factbuoy_plugin/export.py",
        text: include_str!("../../../guest-sdk/python/factbuoy_plugin/export.py"),
    },
    Template {
        path: "factbuoy_plugin/host_info.py",
        text: include_str!("../../../guest-sdk/python/factbuoy_plugin/host_info.py"),
    },
    Template {
        path: "factbuoy_plugin/log.py",
        text: include_str!("../../../guest-sdk/python/factbuoy_plugin/log.py"),
    },
    Template {
        path: "factbuoy_plugin/output.py",
        text: include_str!("../../../guest-sdk/python/factbuoy_plugin/output.py"),
    },
    Template {
        path: "factbuoy_plugin/params.py",
        text: include_str!("../../../guest-sdk/python/factbuoy_plugin/params.py"),
    },
    Template {
        path: "factbuoy_plugin/progress.py",
        text: include_str!("../../../guest-sdk/python/factbuoy_plugin/progress.py"),
    },
];

/// The JavaScript SDK is copied whole into each project, like the Python one.
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
    Template {
        path: "factbuoy-plugin/index.js",
        text: include_str!("../../../guest-sdk/js/factbuoy-plugin/index.js"),
    },
    Template {
        path: "factbuoy-plugin/describe.js",
        text: include_str!("../../../guest-sdk/js/factbuoy-plugin/describe.js"),
    },
    Template {
        path: "factbuoy-plugin/errors.js",
        text: include_str!("../../../guest-sdk/js/factbuoy-plugin/errors.js"),
    },
    Template {
        path: "factbuoy-plugin/fs.js",
        text: include_str!("../../../guest-sdk/js/factbuoy-plugin/fs.js"),
    },
    Template {
        path: "factbuoy-plugin/host.js",
        text: include_str!("../../../guest-sdk/js/factbuoy-plugin/host.js"),
    },
    Template {
        path: "factbuoy-plugin/output.js",
        text: include_str!("../../../guest-sdk/js/factbuoy-plugin/output.js"),
    },
    Template {
        path: "factbuoy-plugin/params.js",
        text: include_str!("../../../guest-sdk/js/factbuoy-plugin/params.js"),
    },
];

/// Writes a new `lang` project for a plugin called `name` into `dir` (which must not exist) and
/// returns the paths written, relative to `dir`.
pub fn create(name: &str, lang: Lang, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    anyhow::ensure!(
        is_valid_plugin_name(name) && name.starts_with(|c: char| c.is_ascii_lowercase()),
        "plugin name {name:?} must be a-z, 0-9 and `-`, starting with a letter (it names the \
         plugin in URLs and bundles, and the crate or module)"
    );
    anyhow::ensure!(
        !dir.exists(),
        "{} already exists; choose another name or --dir, or remove it",
        dir.display()
    );
    let templates = match lang {
        Lang::Rust => RUST,
        Lang::Python => PYTHON,
        Lang::Js => JS,
    };
    let crate_name = name.replace('-', "_");
    let files = templates
        .iter()
        .map(|t| {
            let text = t
                .text
                .replace("{{name}}", name)
                .replace("{{crate}}", &crate_name);
            (PathBuf::from(t.path), text)
        })
        .chain([(PathBuf::from("wit/gatherer.wit"), GATHERER_WIT.to_owned())]);
    let mut written = Vec::new();
    for (path, text) in files {
        let target = dir.join(&path);
        let parent = target.parent().expect("a template path has a parent");
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
        std::fs::write(&target, text).with_context(|| format!("writing {}", target.display()))?;
        written.push(path);
    }
    Ok(written)
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
            let written = create("disk-usage", lang, &dir).unwrap();
            assert!(written.contains(&PathBuf::from("wit/gatherer.wit")));
            let text = std::fs::read_to_string(dir.join(source)).unwrap();
            assert!(text.contains("\"disk-usage\""), "{text}");
            assert!(!text.contains("{{"), "{text}");
        }
        let cargo = std::fs::read_to_string(tmp.path().join("Rust/Cargo.toml")).unwrap();
        assert!(cargo.contains("name = \"disk-usage\""));
    }

    #[test]
    fn refuses_bad_names_and_existing_directories() {
        let tmp = tempfile::tempdir().unwrap();
        let err = create("Disk", Lang::Rust, &tmp.path().join("x")).unwrap_err();
        assert!(err.to_string().contains("must be a-z"), "{err}");
        let err = create("disk", Lang::Python, tmp.path()).unwrap_err();
        assert!(err.to_string().contains("already exists"), "{err}");
    }
}
