//! Checks on what a plugin's `describe` returns, so that a malformed description is refused
//! with a precise message at load time instead of causing confusion later.

use std::collections::HashSet;

use crate::bindings::{ArtifactKind, PluginInfo};
use crate::grants::Grant;
use crate::params::parse_value;
use factbuoy_protocol::names::{
    ArtifactName, IdentifierKind, MAX_PLUGIN_NAME_BYTES, check_identifier,
};

/// Longest plugin or parameter name.
pub const MAX_NAME_LEN: usize = MAX_PLUGIN_NAME_BYTES;

/// The rule for a plugin's name lives with the other names' rules, where `plugin new` (which
/// links no wasmtime) checks a new project's name by it too.
pub use factbuoy_protocol::names::is_valid_plugin_name;

fn is_valid_param_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// Bytes of text in a description, and one record's overhead for each part of it, as counted
/// against the metadata budget.
pub fn text_bytes(info: &PluginInfo) -> usize {
    use crate::bindings::Capability;
    use crate::limits::RECORD_OVERHEAD_BYTES as RECORD;
    let params: usize = info
        .parameters
        .iter()
        .map(|p| {
            RECORD + p.name.len() + p.description.len() + p.default.as_ref().map_or(0, String::len)
        })
        .sum();
    let capabilities: usize = info
        .capabilities
        .iter()
        .map(|c| {
            let path = match &c.capability {
                Capability::HostInfo => 0,
                Capability::ReadPath(path) => path.len(),
            };
            RECORD + path + c.reason.len()
        })
        .sum();
    let artifacts: usize = info
        .artifacts
        .iter()
        .map(|a| {
            RECORD + a.name.len() + a.media_type.len() + a.description.len() + kind_bytes(&a.kind)
        })
        .sum();
    info.name.len()
        + info.version.len()
        + info.description.len()
        + params
        + capabilities
        + artifacts
}

fn kind_bytes(kind: &ArtifactKind) -> usize {
    use crate::limits::RECORD_OVERHEAD_BYTES as RECORD;
    let names = |names: &[String]| names.iter().map(|n| RECORD + n.len()).sum::<usize>();
    match kind {
        ArtifactKind::Facts(lists) => lists
            .iter()
            .map(|list| RECORD + list.path.len() + names(&list.keys))
            .sum(),
        ArtifactKind::Table(keys) => names(keys),
        ArtifactKind::Log | ArtifactKind::Opaque => 0,
    }
}

/// Every problem with a description, or nothing.
pub fn problems(info: &PluginInfo) -> Vec<String> {
    let mut problems = Vec::new();
    if !is_valid_plugin_name(&info.name) {
        problems.push(format!(
            "name {:?} must be 1-63 characters of a-z, 0-9 and `-`, not starting with `-`",
            info.name
        ));
    } else if let Err(e) = check_identifier(IdentifierKind::Plugin, &info.name) {
        // The rules every name of a run follows: no Windows device name, for one.
        problems.push(e.to_string());
    }
    if info.version.trim().is_empty() {
        problems.push("version is empty".to_owned());
    }
    let mut seen = HashSet::new();
    for param in &info.parameters {
        if !is_valid_param_name(&param.name) {
            problems.push(format!(
                "parameter name {:?} must be a-z, 0-9, `_` and `-`",
                param.name
            ));
        }
        if !seen.insert(param.name.as_str()) {
            problems.push(format!("parameter `{}` is declared twice", param.name));
        }
        if param.required && param.default.is_some() {
            problems.push(format!(
                "parameter `{}` is required and also has a default",
                param.name
            ));
        }
        if let Some(default) = &param.default
            && let Err(e) = parse_value(param.type_, default)
        {
            problems.push(format!("parameter `{}` default {e}", param.name));
        }
    }
    for request in &info.capabilities {
        if let Err(e) = Grant::from_request(&request.capability) {
            problems.push(e.to_string());
        }
    }
    let mut artifacts = HashSet::new();
    for artifact in &info.artifacts {
        if let Err(e) = ArtifactName::parse(&artifact.name) {
            problems.push(e.to_string());
        }
        if !artifacts.insert(artifact.name.as_str()) {
            problems.push(format!("artifact `{}` is declared twice", artifact.name));
        }
        problems.extend(kind_problems(&artifact.name, &artifact.kind));
    }
    problems
}

/// What is wrong with the keys an artifact's kind declares: a list without a path or without
/// keys, or a key that is empty.
fn kind_problems(artifact: &str, kind: &ArtifactKind) -> Vec<String> {
    let mut problems = Vec::new();
    let empty_key = |keys: &[String]| keys.iter().any(|k| k.is_empty());
    match kind {
        ArtifactKind::Facts(lists) => {
            for list in lists {
                if list.path.is_empty() || list.path.split('.').any(str::is_empty) {
                    problems.push(format!(
                        "artifact `{artifact}` names a list by {:?}: a path is field names joined by `.`",
                        list.path
                    ));
                }
                if list.keys.is_empty() || empty_key(&list.keys) {
                    problems.push(format!(
                        "artifact `{artifact}`'s list `{}` needs at least one key, none empty",
                        list.path
                    ));
                }
            }
        }
        ArtifactKind::Table(keys) if empty_key(keys) => {
            problems.push(format!("artifact `{artifact}` names an empty row key"));
        }
        _ => {}
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bindings::{Capability, CapabilityRequest, ParamSpec, ParamType};

    #[test]
    fn finds_each_kind_of_problem() {
        let param = |name: &str, required, default: Option<&str>| ParamSpec {
            name: name.into(),
            description: String::new(),
            type_: ParamType::Integer,
            required,
            default: default.map(Into::into),
            secret: false,
        };
        let info = PluginInfo {
            name: "Bad_Name".into(),
            version: " ".into(),
            description: String::new(),
            parameters: vec![
                param("n", false, Some("x")),
                param("n", true, Some("1")),
                param("Big", false, None),
            ],
            capabilities: vec![CapabilityRequest {
                capability: Capability::ReadPath("relative".into()),
                required: true,
                reason: String::new(),
            }],
            artifacts: vec![],
        };
        let found = problems(&info);
        assert_eq!(found.len(), 7, "{found:#?}");
        // Every string counts against the metadata budget, each part with its overhead.
        let text = "Bad_Name".len()
            + " ".len()
            + "n".len()
            + "x".len()
            + "n".len()
            + "1".len()
            + "Big".len()
            + "relative".len();
        assert_eq!(
            text_bytes(&info),
            text + 4 * crate::limits::RECORD_OVERHEAD_BYTES
        );
        assert!(is_valid_plugin_name("systemd-logs") && !is_valid_plugin_name("-x"));
    }

    #[test]
    fn artifacts_and_their_keys_are_checked_and_counted() {
        use crate::bindings::{ArtifactSpec, ListKeys};
        let artifact = |name: &str, kind| ArtifactSpec {
            name: name.into(),
            media_type: String::new(),
            description: String::new(),
            kind,
        };
        let list = |path: &str, keys: &[&str]| ListKeys {
            path: path.into(),
            keys: keys.iter().map(|k| k.to_string()).collect(),
        };
        let info = PluginInfo {
            name: "p".into(),
            version: "1".into(),
            description: String::new(),
            parameters: vec![],
            capabilities: vec![],
            artifacts: vec![
                artifact(
                    "f.json",
                    ArtifactKind::Facts(vec![
                        list("mounts", &["mount"]),
                        list("", &["x"]),
                        list("a..b", &["x"]),
                        list("disks", &[]),
                        list("nics", &[""]),
                    ]),
                ),
                artifact("f.json", ArtifactKind::Log),
                artifact("t.jsonl", ArtifactKind::Table(vec!["".into()])),
            ],
        };
        let found = problems(&info);
        assert_eq!(found.len(), 6, "{found:#?}");
        assert!(
            found.iter().any(|p| p.contains("declared twice")),
            "{found:#?}"
        );
        // A plugin cannot grow the host's memory through keys it does not pay for.
        let record = crate::limits::RECORD_OVERHEAD_BYTES;
        let lists = [
            ("mounts", &["mount"][..]),
            ("", &["x"]),
            ("a..b", &["x"]),
            ("disks", &[]),
            ("nics", &[""]),
        ];
        let keys: usize = lists
            .iter()
            .map(|(path, keys)| {
                record + path.len() + keys.iter().map(|k| record + k.len()).sum::<usize>()
            })
            .sum();
        let artifacts = 3 * record + "f.json".len() * 2 + "t.jsonl".len() + keys + record;
        assert_eq!(text_bytes(&info), "p".len() + "1".len() + artifacts);
    }
}
