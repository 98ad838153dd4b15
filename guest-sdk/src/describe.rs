//! Builders for what a plugin says about itself in `describe`.

use crate::__bindings::factbuoy::plugin::types::{
    self, ArtifactKind, ArtifactSpec, CapabilityRequest, ListKeys, ParamSpec, ParamType, PluginInfo,
};

/// What a plugin is: its name, version, parameters, capabilities and artifacts.
#[derive(Debug, Clone)]
pub struct Description {
    info: PluginInfo,
}

impl Description {
    /// `name` is lower-case `a-z`, `0-9` and `-`; `version` is semver (`env!("CARGO_PKG_VERSION")`
    /// is a good choice).
    pub fn new(name: &str, version: &str, description: &str) -> Self {
        Description {
            info: PluginInfo {
                name: name.to_owned(),
                version: version.to_owned(),
                description: description.to_owned(),
                parameters: Vec::new(),
                capabilities: Vec::new(),
                artifacts: Vec::new(),
            },
        }
    }

    /// Declares a parameter.
    pub fn param(mut self, param: Param) -> Self {
        self.info.parameters.push(param.spec);
        self
    }

    /// Asks for a capability `gather` cannot work without; the host refuses to run the plugin
    /// unless it is granted. `reason` is shown to the operator.
    pub fn capability(self, capability: Capability, reason: &str) -> Self {
        self.request(capability, true, reason)
    }

    /// Asks for a capability the plugin can do without (it must cope with its absence).
    pub fn optional_capability(self, capability: Capability, reason: &str) -> Self {
        self.request(capability, false, reason)
    }

    fn request(mut self, capability: Capability, required: bool, reason: &str) -> Self {
        self.info.capabilities.push(CapabilityRequest {
            capability: capability.into_wit(),
            required,
            reason: reason.to_owned(),
        });
        self
    }

    /// Declares an artifact the plugin writes and what kind of data it holds, which tells
    /// `factbuoy inspect` how to read it.
    pub fn writes(mut self, artifact: Artifact) -> Self {
        self.info.artifacts.push(artifact.spec);
        self
    }

    /// Declares an artifact by its media type, as SDK 0.1 did: it gets the kind its media type
    /// implies, the one the host gives a 0.1 plugin's artifacts (`application/json` and
    /// `application/*+json`: a facts document; JSON Lines: a table; anything else: opaque), with
    /// no keys. Kept so that 0.1 plugins compile against every 0.2 SDK (docs/wit-versioning.md).
    #[deprecated(
        since = "0.2.0",
        note = "say what kind of data the artifact holds: `.writes(Artifact::facts(name, \
                description))` for a JSON document, `.writes(Artifact::table(name, \
                description))` for JSON Lines, `.writes(Artifact::opaque(name, media_type, \
                description))` for anything else"
    )]
    pub fn artifact(self, name: &str, media_type: &str, description: &str) -> Self {
        self.writes(Artifact::by_media_type(name, media_type, description))
    }

    #[doc(hidden)]
    pub fn into_wit(self) -> PluginInfo {
        self.info
    }
}

/// An artifact a plugin writes; start with the constructor for its kind.
#[derive(Debug, Clone)]
pub struct Artifact {
    spec: ArtifactSpec,
}

impl Artifact {
    fn new(name: &str, media_type: &str, description: &str, kind: ArtifactKind) -> Self {
        Artifact {
            spec: ArtifactSpec {
                name: name.to_owned(),
                media_type: media_type.to_owned(),
                description: description.to_owned(),
                kind,
            },
        }
    }

    /// The kind `media_type` implies, as `factbuoy_protocol::artifacts::ArtifactKind::
    /// from_media_type` reads it on the host (which the SDK does not link).
    fn by_media_type(name: &str, media_type: &str, description: &str) -> Self {
        let essence = media_type
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        let kind = match essence.as_str() {
            "application/jsonl"
            | "application/x-ndjson"
            | "application/x-jsonlines"
            | "application/jsonlines" => ArtifactKind::Table(Vec::new()),
            "application/json" => ArtifactKind::Facts(Vec::new()),
            other if other.starts_with("application/") && other.ends_with("+json") => {
                ArtifactKind::Facts(Vec::new())
            }
            _ => ArtifactKind::Opaque,
        };
        Self::new(name, media_type, description, kind)
    }

    /// One JSON document about the node, an object at its top (`application/json`):
    /// `inspect facts`, `query`, `diff` and `sql` read it. Name the keys of its lists with
    /// [`Artifact::list_keys`].
    pub fn facts(name: &str, description: &str) -> Self {
        Self::new(
            name,
            "application/json",
            description,
            ArtifactKind::Facts(Vec::new()),
        )
    }

    /// JSON Lines (`application/jsonl`): one JSON object per line, one row per item.
    /// `inspect sql` makes it a table named `<plugin>_<artifact>`. Name the columns that
    /// identify a row with [`Artifact::row_keys`].
    pub fn table(name: &str, description: &str) -> Self {
        Self::new(
            name,
            "application/jsonl",
            description,
            ArtifactKind::Table(Vec::new()),
        )
    }

    /// Time-ordered entries, one JSON object per line with the journal's field names
    /// (`__REALTIME_TIMESTAMP`, `MESSAGE`, `PRIORITY`), as `journalctl -o json` writes them.
    pub fn log(name: &str, description: &str) -> Self {
        Self::new(name, "application/jsonl", description, ArtifactKind::Log)
    }

    /// Anything else, of media type `media_type`: kept in the bundle, not interpreted.
    pub fn opaque(name: &str, media_type: &str, description: &str) -> Self {
        Self::new(name, media_type, description, ArtifactKind::Opaque)
    }

    /// Says the items of the list at `path` (field names from the document's top, joined by
    /// `.`: `mounts`, or `interfaces.addresses` for the lists inside each interface) are told
    /// apart by the fields `keys`, so that a diff shows an item added, removed or changed
    /// instead of every later position changing. For facts documents.
    pub fn list_keys(mut self, path: &str, keys: &[&str]) -> Self {
        if let ArtifactKind::Facts(lists) = &mut self.spec.kind {
            lists.push(ListKeys {
                path: path.to_owned(),
                keys: keys.iter().map(|k| (*k).to_owned()).collect(),
            });
        }
        self
    }

    /// Says the columns `keys` identify a row. For tables.
    pub fn row_keys(mut self, keys: &[&str]) -> Self {
        if let ArtifactKind::Table(columns) = &mut self.spec.kind {
            *columns = keys.iter().map(|k| (*k).to_owned()).collect();
        }
        self
    }

    /// Overrides the media type its kind gives it.
    pub fn media_type(mut self, media_type: &str) -> Self {
        self.spec.media_type = media_type.to_owned();
        self
    }
}

/// Something beyond pure computation that a plugin asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Capability {
    /// Call the [`crate::host_info`] functions.
    HostInfo,
    /// Read files below this absolute path, for example `/proc`. The host maps it read-only
    /// onto the same path below the host root.
    ReadPath(String),
}

impl Capability {
    /// Shorthand for [`Capability::ReadPath`].
    pub fn read(path: &str) -> Self {
        Capability::ReadPath(path.to_owned())
    }

    fn into_wit(self) -> types::Capability {
        match self {
            Capability::HostInfo => types::Capability::HostInfo,
            Capability::ReadPath(p) => types::Capability::ReadPath(p),
        }
    }
}

/// One parameter a plugin accepts; start with the constructor for its type.
#[derive(Debug, Clone)]
pub struct Param {
    spec: ParamSpec,
}

impl Param {
    fn new(name: &str, ty: ParamType) -> Self {
        Param {
            spec: ParamSpec {
                name: name.to_owned(),
                description: String::new(),
                type_: ty,
                required: false,
                default: None,
                secret: false,
            },
        }
    }

    /// Any text.
    pub fn string(name: &str) -> Self {
        Self::new(name, ParamType::String)
    }
    /// A signed 64-bit integer.
    pub fn integer(name: &str) -> Self {
        Self::new(name, ParamType::Integer)
    }
    /// A 64-bit float.
    pub fn float(name: &str) -> Self {
        Self::new(name, ParamType::Float)
    }
    /// `true` or `false`.
    pub fn boolean(name: &str) -> Self {
        Self::new(name, ParamType::Boolean)
    }
    /// A span of time such as `60m`; read it with [`crate::Params::duration`].
    pub fn duration(name: &str) -> Self {
        Self::new(name, ParamType::Duration)
    }
    /// A list of text values, comma-separated or repeated on the command line.
    pub fn string_list(name: &str) -> Self {
        Self::new(name, ParamType::StringList)
    }

    /// What the parameter means, for `factbuoy plugin info`.
    pub fn describe(mut self, description: &str) -> Self {
        self.spec.description = description.to_owned();
        self
    }
    /// The user must give a value.
    pub fn required(mut self) -> Self {
        self.spec.required = true;
        self
    }
    /// The value used when the user gives none, written as a user would write it (`60m`, `a,b`).
    pub fn default(mut self, value: &str) -> Self {
        self.spec.default = Some(value.to_owned());
        self
    }
    /// The host never logs the value nor writes it into a bundle.
    pub fn secret(mut self) -> Self {
        self.spec.secret = true;
        self
    }
}

/// A plugin written against SDK 0.1.0 (that release's own example, word for word) still compiles
/// and declares the kind its artifact's media type implies:
///
/// ```
/// use factbuoy_guest::prelude::*;
///
/// struct Uptime;
///
/// impl Gatherer for Uptime {
///     fn describe() -> Description {
///         Description::new("uptime", "0.1.0", "How long this host has been up.")
///             .param(Param::boolean("pretty").default("false").describe("Indent the JSON."))
///             .capability(Capability::HostInfo, "reads the uptime")
///             .artifact("uptime.json", "application/json", "seconds since boot")
///     }
///
///     fn gather(params: &Params) -> Result<(), GatherError> {
///         let seconds = host_info::uptime_seconds();
///         progress::report(1, 1, "read the uptime");
///         let facts = serde_json::json!({ "uptime_seconds": seconds });
///         if params.boolean("pretty")? {
///             output::write_json_pretty("uptime.json", &facts)
///         } else {
///             output::write_json("uptime.json", &facts)
///         }
///     }
/// }
///
/// export_gatherer!(Uptime);
/// # use factbuoy_guest::__bindings::factbuoy::plugin::types::ArtifactKind;
/// # let artifacts = Uptime::describe().into_wit().artifacts;
/// # assert!(matches!(artifacts[0].kind, ArtifactKind::Facts(ref keys) if keys.is_empty()));
/// # assert_eq!(artifacts[0].media_type, "application/json");
/// ```
///
/// but with a warning: the same call is refused where deprecations are denied.
///
/// ```compile_fail
/// #![deny(deprecated)]
/// use factbuoy_guest::prelude::*;
/// Description::new("uptime", "0.1.0", "How long this host has been up.")
///     .artifact("uptime.json", "application/json", "seconds since boot");
/// ```
#[cfg(doctest)]
pub struct Sdk01Plugins;

#[cfg(test)]
mod tests {
    use super::*;

    /// The deprecated 0.1 `artifact` gives each media type the kind the host gives a 0.1
    /// plugin's (protocol::artifacts' `artifacts_without_a_kind_get_the_one_their_media_type_
    /// suggests`), and keeps the media type as written.
    #[test]
    #[allow(deprecated)]
    fn the_01_artifact_takes_its_kind_from_its_media_type() {
        let described = Description::new("old", "0.1.0", "a 0.1 plugin")
            .artifact("a.json", "application/json", "")
            .artifact("b.json", "Application/JSON; charset=utf-8", "")
            .artifact("c.json", "application/vnd.example+json", "")
            .artifact("d.jsonl", "application/jsonl", "")
            .artifact("e.ndjson", "application/x-ndjson", "")
            .artifact("f.jsonl", "application/x-jsonlines", "")
            .artifact("g.jsonl", "application/jsonlines", "")
            .artifact("h.txt", "text/plain", "")
            .artifact("i.json", "text/json", "")
            .into_wit();
        let kinds: Vec<_> = described
            .artifacts
            .iter()
            .map(|a| match &a.kind {
                ArtifactKind::Facts(keys) if keys.is_empty() => "facts",
                ArtifactKind::Table(keys) if keys.is_empty() => "table",
                ArtifactKind::Opaque => "opaque",
                other => panic!("{}: {other:?}", a.name),
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "facts", "facts", "facts", "table", "table", "table", "table", "opaque", "opaque"
            ]
        );
        assert_eq!(
            described.artifacts[1].media_type,
            "Application/JSON; charset=utf-8"
        );
    }
}
