//! Every URL of the protocol, built and parsed in one place so that agents, operators and the
//! aggregator cannot disagree about them. Path segments are percent-encoded when built and
//! decoded, then checked, when parsed: a route never carries a name that failed the rules in
//! [`crate::names`].

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};

use crate::names::{
    ArtifactName, IdentifierKind, InvalidIdentifier, InvalidName, NodeName, check_identifier,
};

/// Prefix of every agent-side route.
pub const API_PREFIX: &str = "/api/v1";

/// Bytes left unencoded in a path segment: unreserved characters.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Whose result or progress a route is about. The two cannot be confused: a [`NodeName`] is
/// never `global`.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case", tag = "kind", content = "node")]
pub enum Scope {
    /// One node's result of a per-node plugin.
    Node(NodeName),
    /// The single result of a plugin that runs once per run, not per node.
    Global,
}

impl Scope {
    fn segments(&self) -> String {
        match self {
            Scope::Node(node) => format!("by-node/{}", encode(node.as_str())),
            Scope::Global => "global".to_owned(),
        }
    }

    /// The node's name, or `global`: the name of the scope's folder in the bundle.
    pub fn label(&self) -> &str {
        match self {
            Scope::Node(node) => node.as_str(),
            Scope::Global => "global",
        }
    }
}

/// A parsed request path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `PUT /api/v1/results/{scope}/{plugin}/files/{name}`: one artifact of a result.
    ResultFile {
        /// Whose result.
        scope: Scope,
        /// The plugin that produced it.
        plugin: String,
        /// The artifact's name within the result.
        name: ArtifactName,
    },
    /// `PUT /api/v1/results/{scope}/{plugin}`: the manifest that completes a result.
    ResultCommit {
        /// Whose result.
        scope: Scope,
        /// The plugin that produced it.
        plugin: String,
    },
    /// `POST /api/v1/progress/{scope}/{plugin}`.
    Progress {
        /// Whose progress.
        scope: Scope,
        /// The plugin reporting.
        plugin: String,
    },
    /// `POST /api/v1/heartbeat/by-node/{node}`.
    Heartbeat {
        /// The node whose agent is alive.
        node: NodeName,
    },
    /// `GET /api/v1/plan/{scope}`: what a node's agent (`by-node/{node}`) or the runner of the
    /// global plugins (`global`) is to run.
    Plan {
        /// Whose plan.
        scope: Scope,
    },
    /// `GET /api/v1/plugins/{sha256}`: a plugin component by its digest.
    Component {
        /// Lower-case hex sha-256 of the component's bytes.
        sha256: String,
    },
    /// `POST /api/v1/enroll`: an agent without a certificate asks for one, presenting a
    /// credential; the only route served to clients without a certificate.
    Enroll,
    /// `GET /status` (operator).
    Status,
    /// `GET /bundle` (operator), with HTTP Range.
    Bundle,
    /// `GET /metrics` (operator), Prometheus text format.
    Metrics,
}

/// Why a path is not a route; the server answers 400 (bad names) or 404 (unknown paths).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// No route has this shape (404); holds the path, cut to 200 characters.
    #[error("no such endpoint: {0}")]
    NotFound(String),
    /// A segment does not decode to UTF-8 (400).
    #[error("path segment is not valid percent-encoded UTF-8")]
    BadEncoding,
    /// A node or plugin name breaks the DNS-subdomain rule (400).
    #[error(transparent)]
    Identifier(#[from] InvalidIdentifier),
    /// An artifact name breaks the rules of [`crate::names`] (400).
    #[error(transparent)]
    Name(#[from] InvalidName),
}

fn encode(segment: &str) -> String {
    utf8_percent_encode(segment, SEGMENT).to_string()
}

fn decode(segment: &str) -> Result<String, RouteError> {
    percent_decode_str(segment)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| RouteError::BadEncoding)
}

impl Route {
    /// The path of this route, percent-encoded.
    pub fn path(&self) -> String {
        match self {
            Route::ResultFile {
                scope,
                plugin,
                name,
            } => {
                let name: Vec<String> = name.as_str().split('/').map(encode).collect();
                format!(
                    "{API_PREFIX}/results/{}/{}/files/{}",
                    scope.segments(),
                    encode(plugin),
                    name.join("/")
                )
            }
            Route::ResultCommit { scope, plugin } => {
                format!(
                    "{API_PREFIX}/results/{}/{}",
                    scope.segments(),
                    encode(plugin)
                )
            }
            Route::Progress { scope, plugin } => {
                format!(
                    "{API_PREFIX}/progress/{}/{}",
                    scope.segments(),
                    encode(plugin)
                )
            }
            Route::Heartbeat { node } => {
                format!("{API_PREFIX}/heartbeat/by-node/{}", encode(node.as_str()))
            }
            Route::Plan { scope } => format!("{API_PREFIX}/plan/{}", scope.segments()),
            Route::Component { sha256 } => format!("{API_PREFIX}/plugins/{}", encode(sha256)),
            Route::Enroll => format!("{API_PREFIX}/enroll"),
            Route::Status => "/status".to_owned(),
            Route::Bundle => "/bundle".to_owned(),
            Route::Metrics => "/metrics".to_owned(),
        }
    }

    /// Parses a request path (without the query). Names are decoded and checked.
    pub fn parse(path: &str) -> Result<Route, RouteError> {
        let not_found = || RouteError::NotFound(path.chars().take(200).collect());
        match path {
            "/status" => return Ok(Route::Status),
            "/bundle" => return Ok(Route::Bundle),
            "/metrics" => return Ok(Route::Metrics),
            _ => {}
        }
        let rest = path.strip_prefix(API_PREFIX).ok_or_else(not_found)?;
        let raw: Vec<&str> = rest.split('/').skip(1).collect();
        let segments: Vec<String> = raw.iter().map(|s| decode(s)).collect::<Result<_, _>>()?;
        let seg: Vec<&str> = segments.iter().map(String::as_str).collect();
        let node = |name: &str| -> Result<NodeName, RouteError> { Ok(NodeName::parse(name)?) };
        let plugin = |name: &str| -> Result<String, RouteError> {
            check_identifier(IdentifierKind::Plugin, name)?;
            Ok(name.to_owned())
        };
        // Splits `by-node/{node}/...` or `global/...` into the scope and what follows.
        let scoped = |seg: &[&'_ str]| -> Result<(Scope, usize), RouteError> {
            match seg {
                ["by-node", n, ..] => Ok((Scope::Node(node(n)?), 2)),
                ["global", ..] => Ok((Scope::Global, 1)),
                _ => Err(not_found()),
            }
        };
        match seg.as_slice() {
            ["results", tail @ ..] => {
                let (scope, used) = scoped(tail)?;
                match &tail[used..] {
                    [p] => Ok(Route::ResultCommit {
                        scope,
                        plugin: plugin(p)?,
                    }),
                    [p, "files", name @ ..] if !name.is_empty() => Ok(Route::ResultFile {
                        scope,
                        plugin: plugin(p)?,
                        name: ArtifactName::parse(&name.join("/"))?,
                    }),
                    _ => Err(not_found()),
                }
            }
            ["progress", tail @ ..] => {
                let (scope, used) = scoped(tail)?;
                match &tail[used..] {
                    [p] => Ok(Route::Progress {
                        scope,
                        plugin: plugin(p)?,
                    }),
                    _ => Err(not_found()),
                }
            }
            ["enroll"] => Ok(Route::Enroll),
            ["heartbeat", "by-node", n] => Ok(Route::Heartbeat { node: node(n)? }),
            ["plan", tail @ ..] => match scoped(tail)? {
                (scope, used) if used == tail.len() => Ok(Route::Plan { scope }),
                _ => Err(not_found()),
            },
            ["plugins", digest]
                if digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit()) =>
            {
                Ok(Route::Component {
                    sha256: digest.to_ascii_lowercase(),
                })
            }
            _ => Err(not_found()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(n: &str) -> Scope {
        Scope::Node(NodeName::parse(n).unwrap())
    }

    #[test]
    fn every_route_round_trips() {
        let routes = [
            Route::ResultFile {
                scope: node("node-1"),
                plugin: "setup".into(),
                name: ArtifactName::parse("logs/kern ü.json").unwrap(),
            },
            Route::ResultFile {
                scope: Scope::Global,
                plugin: "cluster".into(),
                name: ArtifactName::parse("a.json").unwrap(),
            },
            Route::ResultCommit {
                scope: node("n.example.com"),
                plugin: "host-facts".into(),
            },
            Route::ResultCommit {
                scope: Scope::Global,
                plugin: "cluster".into(),
            },
            Route::Progress {
                scope: node("n1"),
                plugin: "p".into(),
            },
            Route::Progress {
                scope: Scope::Global,
                plugin: "p".into(),
            },
            Route::Heartbeat {
                node: NodeName::parse("n1").unwrap(),
            },
            Route::Plan { scope: node("n1") },
            Route::Plan {
                scope: Scope::Global,
            },
            Route::Component {
                sha256: "ab".repeat(32),
            },
            Route::Status,
            Route::Bundle,
            Route::Metrics,
        ];
        for route in routes {
            assert_eq!(
                Route::parse(&route.path()).unwrap(),
                route,
                "{}",
                route.path()
            );
        }
    }

    #[test]
    fn traversal_and_odd_names_are_refused() {
        let refused = [
            "/api/v1/results/by-node/n1/setup/files/..%2Fescape",
            "/api/v1/results/by-node/n1/setup/files/a/../../b",
            "/api/v1/results/by-node/n1/setup/files/%2Fetc%2Fpasswd",
            "/api/v1/results/by-node/..%2Fx/setup",
            "/api/v1/results/by-node/N1/setup",
            "/api/v1/results/by-node/n1/se%00tup",
            "/api/v1/results/by-node/n1/setup/files/a%5Cb",
            "/api/v1/results/by-node/n1/setup/files/%ff",
            // `global` is a scope of its own, never a node.
            "/api/v1/results/by-node/global/setup",
            "/api/v1/results/by-node/global/setup/files/a.json",
            "/api/v1/progress/by-node/global/setup",
            "/api/v1/heartbeat/by-node/global",
        ];
        for path in refused {
            let error = Route::parse(path).unwrap_err();
            assert!(!matches!(error, RouteError::NotFound(_)), "{path}: {error}");
        }
        for path in [
            "/",
            "/api/v2/status",
            "/api/v1/results",
            "/api/v1/plugins/xyz",
            "/statusx",
        ] {
            assert!(
                matches!(Route::parse(path), Err(RouteError::NotFound(_))),
                "{path}"
            );
        }
    }
}
