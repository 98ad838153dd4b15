//! Names that arrive from plugins or over the wire, checked before anything is stored under them.
//!
//! Artifact names are relative paths chosen by plugins. The rules are strict on purpose, so that
//! a name is safe as a file path on any system and as a tar entry: `/`-separated components of
//! printable characters, none of them empty, `.` or `..`, no backslash, no leading `/`, bounded
//! length and depth. Node and plugin names follow Kubernetes' DNS-subdomain rules.

use std::fmt;
use std::path::PathBuf;

/// Longest accepted name, in bytes.
pub const MAX_NAME_BYTES: usize = 512;
/// Longest accepted component, in bytes (most file systems allow 255).
pub const MAX_COMPONENT_BYTES: usize = 255;
/// Deepest accepted nesting.
pub const MAX_DEPTH: usize = 8;

/// A name that passed the rules above.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
pub struct ArtifactName(String);

/// Why a name was refused; the message quotes the name and the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("artifact name {name:?} {reason}")]
pub struct InvalidName {
    /// The refused name, cut to [`MAX_NAME_BYTES`] characters.
    pub name: String,
    /// The rule it breaks, worded to follow the name (`is empty`, `contains a backslash; ...`).
    pub reason: &'static str,
}

impl ArtifactName {
    /// Checks `name` against the rules in the module documentation.
    pub fn parse(name: &str) -> Result<Self, InvalidName> {
        let refuse = |reason| {
            Err(InvalidName {
                name: name.chars().take(MAX_NAME_BYTES).collect(),
                reason,
            })
        };
        if name.is_empty() {
            return refuse("is empty");
        }
        if name.len() > MAX_NAME_BYTES {
            return refuse("is too long (at most 512 bytes)");
        }
        if name.starts_with('/') {
            return refuse("is absolute; use a relative path such as `facts.json`");
        }
        if name.contains('\\') {
            return refuse("contains a backslash; separate directories with `/`");
        }
        if name.chars().any(char::is_control) {
            return refuse("contains a control character");
        }
        let components: Vec<&str> = name.split('/').collect();
        if components.len() > MAX_DEPTH {
            return refuse("is nested too deeply (at most 8 components)");
        }
        for component in components {
            match component {
                "" => return refuse("has an empty component (`//` or a trailing `/`)"),
                "." | ".." => return refuse("contains `.` or `..`"),
                c if c.len() > MAX_COMPONENT_BYTES => {
                    return refuse("has a component longer than 255 bytes");
                }
                _ => {}
            }
        }
        Ok(ArtifactName(name.to_owned()))
    }

    /// The name as the plugin gave it, `/`-separated.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The name as a relative path, safe to join onto a directory.
    pub fn to_relative_path(&self) -> PathBuf {
        self.0.split('/').collect()
    }
}

impl fmt::Display for ArtifactName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Longest node or plugin name (a DNS subdomain).
pub const MAX_IDENTIFIER_BYTES: usize = 253;

/// Why a node or plugin name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{kind} name {name:?} must be 1-253 characters of a-z, 0-9, `-` and `.`, starting and ending with a letter or digit"
)]
pub struct InvalidIdentifier {
    /// What the name was for: `node`, `plugin`, `role`.
    pub kind: &'static str,
    /// The refused name, cut to [`MAX_IDENTIFIER_BYTES`] characters.
    pub name: String,
}

/// Checks a node or plugin name: lower-case letters, digits, `-` and `.`, starting and ending
/// with a letter or digit (Kubernetes node names follow the same rule).
pub fn check_identifier(kind: &'static str, name: &str) -> Result<(), InvalidIdentifier> {
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = name.as_bytes();
    let valid = !bytes.is_empty()
        && bytes.len() <= MAX_IDENTIFIER_BYTES
        && alnum(bytes[0])
        && alnum(bytes[bytes.len() - 1])
        && bytes.iter().all(|&b| alnum(b) || b == b'-' || b == b'.')
        && !name.contains("..");
    if valid {
        Ok(())
    } else {
        Err(InvalidIdentifier {
            kind,
            name: name.chars().take(MAX_IDENTIFIER_BYTES).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_ordinary_relative_paths() {
        for name in [
            "facts.json",
            "logs/kern.json",
            "a b/ü-ñ.txt",
            "..hidden",
            "x..y",
        ] {
            assert_eq!(ArtifactName::parse(name).unwrap().as_str(), name);
        }
        assert_eq!(
            ArtifactName::parse("logs/kern.json")
                .unwrap()
                .to_relative_path(),
            PathBuf::from("logs").join("kern.json")
        );
    }

    #[test]
    fn refuses_traversal_and_odd_names_with_a_reason() {
        let cases = [
            ("", "is empty"),
            ("/etc/passwd", "is absolute"),
            ("../escape", "contains `.` or `..`"),
            ("a/../../b", "contains `.` or `..`"),
            ("./a", "contains `.` or `..`"),
            ("a\\b", "backslash"),
            ("a//b", "empty component"),
            ("dir/", "empty component"),
            ("nul\0byte", "control character"),
            ("new\nline", "control character"),
            ("a/b/c/d/e/f/g/h/i", "nested too deeply"),
        ];
        for (name, reason) in cases {
            let err = ArtifactName::parse(name).unwrap_err();
            assert!(err.to_string().contains(reason), "{name:?}: {err}");
        }
        assert!(ArtifactName::parse(&"x".repeat(256)).is_err());
        assert!(ArtifactName::parse(&"x/".repeat(300)).is_err());
    }

    #[test]
    fn identifiers_follow_dns_subdomain_rules() {
        for ok in ["node-1", "ip-10-0-0-1.ec2.internal", "a", "setup"] {
            assert!(check_identifier("node", ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "-a",
            "a-",
            "A",
            "a_b",
            "a/b",
            "..",
            "a..b",
            "ü",
            &"a".repeat(254),
        ] {
            assert!(check_identifier("node", bad).is_err(), "{bad}");
        }
    }
}
