//! Plugins as users name them: a bundled plugin by name, or a component file by path; and
//! what a run needs to know about them before it starts (parameters, default grants).

pub mod metadata;
pub mod params;

use std::path::{Path, PathBuf};

use crate::capabilities::GrantSet;
use crate::runtime::{LoadError, LoadedPlugin, Runtime};

/// A plugin compiled into this binary by `host/build.rs`.
pub struct BundledPlugin {
    pub name: &'static str,
    pub wasm: &'static [u8],
    /// Hex sha-256 of `wasm`, computed at build time.
    pub sha256: &'static str,
}

include!(concat!(env!("OUT_DIR"), "/bundled.rs"));

pub fn bundled(name: &str) -> Option<&'static BundledPlugin> {
    BUNDLED.iter().find(|p| p.name == name)
}

/// What the user named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PluginRef {
    Bundled(&'static str),
    File(PathBuf),
}

#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error(
        "no bundled plugin is named {name:?} and no file is at that path; bundled plugins: {}",
        bundled_names()
    )]
    Unknown { name: String },
    #[error("{path}: cannot read the plugin")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Load(#[from] LoadError),
}

fn bundled_names() -> String {
    BUNDLED
        .iter()
        .map(|p| p.name)
        .collect::<Vec<_>>()
        .join(", ")
}

impl PluginRef {
    /// A bundled plugin's name wins; anything that looks like a path, or exists as a file, is a
    /// file.
    pub fn parse(text: &str) -> Result<Self, ResolveError> {
        if let Some(plugin) = bundled(text) {
            return Ok(PluginRef::Bundled(plugin.name));
        }
        let path = Path::new(text);
        if text.contains('/') || text.ends_with(".wasm") || path.exists() {
            return Ok(PluginRef::File(path.to_owned()));
        }
        Err(ResolveError::Unknown {
            name: text.to_owned(),
        })
    }

    /// Grants a run gives by default: bundled plugins were reviewed with this binary and get
    /// what they ask for; a plugin from a file gets nothing unless granted.
    pub fn default_grants(&self) -> GrantSet {
        GrantSet {
            everything_requested: matches!(self, PluginRef::Bundled(_)),
            ..GrantSet::default()
        }
    }

    pub async fn load(&self, runtime: &Runtime) -> Result<LoadedPlugin, ResolveError> {
        match self {
            PluginRef::Bundled(name) => {
                let plugin = bundled(name).expect("resolved from the bundled list");
                Ok(runtime.load(name, plugin.wasm, Some(plugin.sha256)).await?)
            }
            PluginRef::File(path) => {
                let label = path.display().to_string();
                let wasm = std::fs::read(path).map_err(|source| ResolveError::Read {
                    path: label.clone(),
                    source,
                })?;
                Ok(runtime.load(&label, &wasm, None).await?)
            }
        }
    }
}
