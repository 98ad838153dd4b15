//! Who a client certificate speaks for, written into the certificate as a URI subject
//! alternative name: `urn:factbuoy:agent:<node>`, `urn:factbuoy:operator:<name>` or
//! `urn:factbuoy:global:<name>`.

use std::fmt;

const PREFIX: &str = "urn:factbuoy:";

/// The role a certificate grants.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Role {
    /// May upload results, progress and heartbeats for this node only.
    Agent {
        /// The node this agent speaks for.
        node: String,
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

    /// Reads a role back from a certificate's URI.
    pub fn from_uri(uri: &str) -> Option<Role> {
        let rest = uri.strip_prefix(PREFIX)?;
        let (kind, name) = rest.split_once(':')?;
        crate::names::check_identifier("role", name).ok()?;
        let name = name.to_owned();
        match kind {
            "agent" => Some(Role::Agent { node: name }),
            "operator" => Some(Role::Operator { name }),
            "global" => Some(Role::Global { name }),
            _ => None,
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
                node: "node-1".into(),
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
        ] {
            assert_eq!(Role::from_uri(bad), None, "{bad}");
        }
    }
}
