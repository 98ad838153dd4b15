//! Who a client certificate speaks for, written into the certificate as a URI subject
//! alternative name: `urn:factbuoy:agent:<node>`, `urn:factbuoy:operator:<name>` or
//! `urn:factbuoy:global:<name>`.

use std::fmt;

use crate::names::{IdentifierKind, NodeName, check_identifier};

const PREFIX: &str = "urn:factbuoy:";

/// The role a certificate grants.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Role {
    /// May upload results, progress and heartbeats for this node only.
    Agent {
        /// The node this agent speaks for; never `global`, which is no node.
        node: NodeName,
    },
    /// May read status, metrics and the bundle; may not upload.
    Operator {
        /// Who holds the certificate, for logs.
        name: String,
    },
    /// May upload global (not per-node) results and progress.
    Global {
        /// Who holds the certificate, for logs.
        name: String,
    },
}

impl Role {
    /// The URI to put in the certificate.
    pub fn uri(&self) -> String {
        match self {
            Role::Agent { node } => format!("{PREFIX}agent:{node}"),
            Role::Operator { name } => format!("{PREFIX}operator:{name}"),
            Role::Global { name } => format!("{PREFIX}global:{name}"),
        }
    }

    /// Reads a role back from a certificate's URI; `None` for anything that is not exactly one
    /// of the three forms with a valid name (an agent for the reserved node `global` included).
    pub fn from_uri(uri: &str) -> Option<Role> {
        Role::parse(uri.strip_prefix(PREFIX)?).ok()
    }

    /// Reads a role as written on the command line: `agent:NODE`, `operator:NAME` or
    /// `global:NAME`; the error says what is wrong with it.
    pub fn parse(text: &str) -> Result<Role, String> {
        let (kind, name) = text.split_once(':').ok_or_else(|| {
            format!("expected agent:NODE, operator:NAME or global:NAME, got {text:?}")
        })?;
        let named = |name: &str| {
            check_identifier(IdentifierKind::Role, name)
                .map(|()| name.to_owned())
                .map_err(|e| e.to_string())
        };
        match kind {
            "agent" => Ok(Role::Agent {
                node: NodeName::parse(name).map_err(|e| e.to_string())?,
            }),
            "operator" => Ok(Role::Operator { name: named(name)? }),
            "global" => Ok(Role::Global { name: named(name)? }),
            _ => Err(format!(
                "expected agent:NODE, operator:NAME or global:NAME, got {text:?}"
            )),
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Role::Agent { node } => write!(f, "agent for node {node:?}"),
            Role::Operator { name } => write!(f, "operator {name:?}"),
            Role::Global { name } => write!(f, "global uploader {name:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_round_trip_through_their_uri() {
        for role in [
            Role::Agent {
                node: NodeName::parse("node-1").unwrap(),
            },
            Role::Operator { name: "cli".into() },
            Role::Global {
                name: "cluster".into(),
            },
        ] {
            assert_eq!(Role::from_uri(&role.uri()), Some(role));
        }
        for bad in [
            "urn:factbuoy:root:x",
            "urn:other:agent:x",
            "urn:factbuoy:agent:../x",
            "urn:factbuoy:agent:",
            "urn:factbuoy:agent:global",
        ] {
            assert_eq!(Role::from_uri(bad), None, "{bad}");
        }
    }
}
