//! A plugin's definition as factbuoy writes it: `plugin info -o json`, `plugin list -o json`,
//! the bundle's `plugins/<plugin>/definition.json` and each plugin's `definition` in
//! `meta/run.json`. Its own type rather than the WIT bindings' derive, so that the JSON is spelled
//! as every other document (snake_case keys, lower-case values, capabilities in the written form
//! `--grant` takes) and does not change when the bindings do.

use serde::{Deserialize, Serialize};

use crate::bindings::{
    ArtifactKind, ArtifactSpec, Capability, CapabilityRequest, ParamSpec, PluginInfo,
};
use crate::params::type_name;
pub use factbuoy_protocol::artifacts::ArtifactDefinition;
use factbuoy_protocol::artifacts::{self, ListKeys};

/// What a plugin's `describe` returned, for people and programs to read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Definition {
    /// The plugin's name.
    pub name: String,
    /// The plugin's own version.
    pub version: String,
    /// What it gathers.
    pub description: String,
    /// The parameters it accepts.
    pub parameters: Vec<ParameterDefinition>,
    /// The capabilities it asks for.
    pub capabilities: Vec<CapabilityDefinition>,
    /// The artifacts it declares it writes.
    pub artifacts: Vec<ArtifactDefinition>,
}

/// One parameter a plugin accepts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParameterDefinition {
    /// Its name, as `-p PLUGIN:NAME=VALUE` gives it.
    pub name: String,
    /// What the value means.
    pub description: String,
    /// The value's type: `string`, `integer`, `float`, `boolean`, `duration` or `string-list`.
    pub r#type: String,
    /// Whether a value must be given.
    pub required: bool,
    /// The value used when none is given, written as a user would write it.
    pub default: Option<String>,
    /// Whether the value is secret: never logged, never written into a bundle.
    pub secret: bool,
}

/// One capability a plugin asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapabilityDefinition {
    /// The capability in written form: `host-info` or `read:/ABSOLUTE/PATH`.
    pub capability: String,
    /// Whether the plugin cannot work at all without it.
    pub required: bool,
    /// Why the plugin needs it.
    pub reason: String,
}

/// A requested capability in the written form `--grant` takes, as the plugin wrote it.
pub fn written(capability: &Capability) -> String {
    match capability {
        Capability::HostInfo => "host-info".to_owned(),
        Capability::ReadPath(path) => format!("read:{path}"),
    }
}

impl From<&PluginInfo> for Definition {
    fn from(info: &PluginInfo) -> Self {
        Definition {
            name: info.name.clone(),
            version: info.version.clone(),
            description: info.description.clone(),
            parameters: info.parameters.iter().map(Into::into).collect(),
            capabilities: info.capabilities.iter().map(Into::into).collect(),
            artifacts: info.artifacts.iter().map(Into::into).collect(),
        }
    }
}

impl From<&ParamSpec> for ParameterDefinition {
    fn from(spec: &ParamSpec) -> Self {
        ParameterDefinition {
            name: spec.name.clone(),
            description: spec.description.clone(),
            r#type: type_name(spec.type_).to_owned(),
            required: spec.required,
            default: spec.default.clone(),
            secret: spec.secret,
        }
    }
}

impl From<&CapabilityRequest> for CapabilityDefinition {
    fn from(request: &CapabilityRequest) -> Self {
        CapabilityDefinition {
            capability: written(&request.capability),
            required: request.required,
            reason: request.reason.clone(),
        }
    }
}

impl From<&ArtifactSpec> for ArtifactDefinition {
    fn from(spec: &ArtifactSpec) -> Self {
        ArtifactDefinition {
            name: spec.name.clone(),
            media_type: spec.media_type.clone(),
            description: spec.description.clone(),
            kind: match &spec.kind {
                ArtifactKind::Facts(lists) => artifacts::ArtifactKind::Facts {
                    list_keys: lists
                        .iter()
                        .map(|list| ListKeys {
                            path: list.path.clone(),
                            keys: list.keys.clone(),
                        })
                        .collect(),
                },
                ArtifactKind::Table(keys) => artifacts::ArtifactKind::Table {
                    row_keys: keys.clone(),
                },
                ArtifactKind::Log => artifacts::ArtifactKind::Log,
                ArtifactKind::Opaque => artifacts::ArtifactKind::Opaque,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bindings::ParamType;

    #[test]
    fn is_spelled_as_every_other_document() {
        let info = PluginInfo {
            name: "p".into(),
            version: "1.0.0".into(),
            description: "d".into(),
            parameters: vec![ParamSpec {
                name: "paths".into(),
                description: "where".into(),
                type_: ParamType::StringList,
                required: false,
                default: Some("a,b".into()),
                secret: false,
            }],
            capabilities: vec![
                CapabilityRequest {
                    capability: Capability::HostInfo,
                    required: true,
                    reason: "names".into(),
                },
                CapabilityRequest {
                    capability: Capability::ReadPath("/proc".into()),
                    required: false,
                    reason: "counters".into(),
                },
            ],
            artifacts: vec![
                ArtifactSpec {
                    name: "facts.json".into(),
                    media_type: "application/json".into(),
                    description: "facts".into(),
                    kind: ArtifactKind::Facts(vec![crate::bindings::ListKeys {
                        path: "mounts".into(),
                        keys: vec!["mount".into()],
                    }]),
                },
                ArtifactSpec {
                    name: "rows.jsonl".into(),
                    media_type: "application/jsonl".into(),
                    description: "rows".into(),
                    kind: ArtifactKind::Table(vec!["name".into()]),
                },
            ],
        };
        let definition = Definition::from(&info);
        let json = serde_json::to_value(&definition).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "name": "p", "version": "1.0.0", "description": "d",
                "parameters": [{"name": "paths", "description": "where", "type": "string-list",
                    "required": false, "default": "a,b", "secret": false}],
                "capabilities": [
                    {"capability": "host-info", "required": true, "reason": "names"},
                    {"capability": "read:/proc", "required": false, "reason": "counters"},
                ],
                "artifacts": [
                    {"name": "facts.json", "media_type": "application/json",
                        "description": "facts", "kind": "facts",
                        "list_keys": [{"path": "mounts", "keys": ["mount"]}]},
                    {"name": "rows.jsonl", "media_type": "application/jsonl",
                        "description": "rows", "kind": "table", "row_keys": ["name"]},
                ],
            })
        );
        // Every written capability is one `--grant` takes.
        for capability in &definition.capabilities {
            capability
                .capability
                .parse::<crate::grants::Grant>()
                .unwrap();
        }
        assert_eq!(
            serde_json::from_value::<Definition>(json).unwrap(),
            definition
        );
    }
}
