//! Builders for what a plugin says about itself in `describe`.

use crate::__bindings::factbuoy::plugin::types::{
    self, ArtifactSpec, CapabilityRequest, ParamSpec, ParamType, PluginInfo,
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

    /// Declares an artifact the plugin writes.
    pub fn artifact(mut self, name: &str, media_type: &str, description: &str) -> Self {
        self.info.artifacts.push(ArtifactSpec {
            name: name.to_owned(),
            media_type: media_type.to_owned(),
            description: description.to_owned(),
        });
        self
    }

    #[doc(hidden)]
    pub fn into_wit(self) -> PluginInfo {
        self.info
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
