//! The fleet protocol: remote agents outside any cluster join a long-lived fleet aggregator with
//! a token, then wait for runs. Agents only ever connect out. docs/protocol.md (section "Fleet")
//! describes it; [`crate::Client`] speaks it.
//!
//! - **Join** (no client certificate; the agent trusts the aggregator through the CA pin the
//!   operator handed it with the token, [`crate::tls::ca_pin`]): a [`JoinRequest`] with the token and a CSR of a key made
//!   on the agent's machine; the answer is an enrollment certificate for the node.
//! - **Renew** (enrollment certificate): a new certificate over a new key, before the old expires.
//! - **Next run** (enrollment certificate): a long poll answered with a [`RunOffer`] for the
//!   next run the node takes part in, or 204 when none started within the wait.
//! - **Start a run** (operator certificate of the fleet CA): [`FleetRunRequest`] carries the
//!   plan as JSON the aggregator understands; the answer says where to follow the run.
//! - **Plugins from files** (operator certificate): stored by the fleet by digest
//!   ([`FleetRoute::Plugin`]) before a run names them; agents then fetch them from the run.

use serde::{Deserialize, Serialize};

use crate::names::NodeName;
use crate::routes::API_PREFIX;

/// The longest a [`FleetRoute::NextRun`] poll held in HTTP waits before it is answered 204:
/// each idle agent then costs the fleet an exchange every 50 s, and the connection is never
/// silent long enough for a NAT or a load balancer to drop it (minutes, commonly).
pub const LONG_POLL_SECONDS: u64 = 50;

/// The `Upgrade` protocol a [`FleetRoute::NextRun`] poll asks for (docs/protocol.md, "Parked
/// polls"): when nothing answers the poll at once, the fleet answers `101 Switching Protocols`
/// and holds the bare TLS stream, without any HTTP state, writing a [`Wake`] line at the end of
/// each period it names in [`IDLE_SECONDS_HEADER`]; the agent acknowledges each `idle` line with
/// [`IDLE_ACK`], and after `changed` both sides speak HTTP/1.1 on the connection again. An idle
/// agent costs the fleet its TLS session and no HTTP buffers, and a line each way a period.
pub const PARKED_POLL: &str = "factbuoy-parked-poll";

/// The header of the `101` answer to a parked poll: the seconds between `idle` lines.
pub const IDLE_SECONDS_HEADER: &str = "factbuoy-idle-seconds";

/// The seconds between `idle` lines a fleet writes by default: under 4 minutes, the shortest
/// idle timeout common NATs and load balancers have by default (Azure's), with room for a
/// late line. Each line costs the fleet a TLS record each way, so a longer period is less CPU
/// per idle agent.
pub const DEFAULT_IDLE_SECONDS: u64 = 170;

/// The longest period between `idle` lines a fleet may name, and an agent waits for: a
/// connection's lifetime (docs/protocol.md, "Limits").
pub const MAX_IDLE_SECONDS: u64 = 15 * 60;

/// What an agent writes on a parked poll after each `idle` line, and nothing else: it is there.
pub const IDLE_ACK: &[u8] = b"\n";

/// A line the fleet writes on a parked poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// A run or a revocation may answer the poll: the stream speaks HTTP again; ask again now.
    Changed,
    /// Nothing happened for a period ([`IDLE_SECONDS_HEADER`]): acknowledge with [`IDLE_ACK`]
    /// and wait on.
    Idle,
    /// The fleet closes the connection (its lifetime is over): ask again on a new one.
    Close,
}

impl Wake {
    /// The longest line, newline included.
    pub const MAX_LINE: usize = 8;

    /// The line on the wire, newline included.
    pub fn line(self) -> &'static [u8] {
        match self {
            Wake::Changed => b"changed\n",
            Wake::Idle => b"idle\n",
            Wake::Close => b"close\n",
        }
    }

    /// The wake a line (newline included) stands for.
    pub fn parse(line: &[u8]) -> Option<Wake> {
        [Wake::Changed, Wake::Idle, Wake::Close]
            .into_iter()
            .find(|wake| wake.line() == line)
    }
}

/// A request path of the fleet listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FleetRoute {
    /// `POST /api/v1/fleet/join`: a [`JoinRequest`], without a client certificate.
    Join,
    /// `POST /api/v1/fleet/renew`: a [`RenewRequest`], with the enrollment certificate.
    Renew,
    /// `GET /api/v1/fleet/runs/next/{after}`: the next run after the fleet's run number `after`.
    NextRun {
        /// The number of the last run the agent took part in (0: none).
        after: u64,
    },
    /// `POST /api/v1/fleet/runs`: an operator starts a run.
    Runs,
    /// `GET|PUT /api/v1/fleet/plugins/{sha256}`: whether the fleet stores a plugin component
    /// (204 or 404), or an operator uploads one (at most [`MAX_PLUGIN_BYTES`]).
    Plugin {
        /// Lower-case hex sha-256 of the component.
        sha256: String,
    },
    /// `GET /metrics`: an operator (or the Prometheus that holds its certificate) reads the
    /// fleet's metrics, where Prometheus looks for them.
    Metrics,
    /// `GET /healthz`: anyone (a kubelet's probe, a load balancer's health check) learns that
    /// the fleet serves; the answer says nothing else.
    Health,
}

/// Largest plugin component a fleet stores (a Python plugin is about 19 MB).
pub const MAX_PLUGIN_BYTES: u64 = 128 << 20;

/// Whether `text` is a lower-case hex sha-256, as routes and file names carry digests.
pub fn is_sha256_hex(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

impl FleetRoute {
    /// The route's path.
    pub fn path(&self) -> String {
        match self {
            FleetRoute::Join => format!("{API_PREFIX}/fleet/join"),
            FleetRoute::Renew => format!("{API_PREFIX}/fleet/renew"),
            FleetRoute::NextRun { after } => format!("{API_PREFIX}/fleet/runs/next/{after}"),
            FleetRoute::Runs => format!("{API_PREFIX}/fleet/runs"),
            FleetRoute::Plugin { sha256 } => format!("{API_PREFIX}/fleet/plugins/{sha256}"),
            FleetRoute::Metrics => "/metrics".to_owned(),
            FleetRoute::Health => "/healthz".to_owned(),
        }
    }

    /// Parses a request path (without the query); `None` for any other path.
    pub fn parse(path: &str) -> Option<FleetRoute> {
        match path {
            "/metrics" => return Some(FleetRoute::Metrics),
            "/healthz" => return Some(FleetRoute::Health),
            _ => {}
        }
        let rest = path.strip_prefix(API_PREFIX)?.strip_prefix("/fleet/")?;
        match rest {
            "join" => Some(FleetRoute::Join),
            "renew" => Some(FleetRoute::Renew),
            "runs" => Some(FleetRoute::Runs),
            _ if rest.starts_with("plugins/") => {
                let sha256 = &rest["plugins/".len()..];
                is_sha256_hex(sha256).then(|| FleetRoute::Plugin {
                    sha256: sha256.to_owned(),
                })
            }
            _ => {
                let after = rest.strip_prefix("runs/next/")?;
                // Digits only: `+1` or ` 1` are not numbers here.
                (!after.is_empty()
                    && after.len() <= 20
                    && after.bytes().all(|b| b.is_ascii_digit()))
                .then(|| after.parse().ok())
                .flatten()
                .map(|after| FleetRoute::NextRun { after })
            }
        }
    }
}

/// What a machine sends to join the fleet.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JoinRequest {
    /// The join token, `ID.SECRET`; secret, never logged.
    pub token: String,
    /// The name the machine takes in the fleet; one no other machine holds.
    pub node: NodeName,
    /// A PEM `CERTIFICATE REQUEST` signed with a key made on the machine; only its public key is
    /// used.
    pub csr: String,
}

impl std::fmt::Debug for JoinRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "JoinRequest {{ node: {:?}, token: <redacted> }}",
            self.node
        )
    }
}

/// The answer to a join or a renewal: the enrollment certificate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Enrollment {
    /// The node the certificate is bound to.
    pub node: NodeName,
    /// The enrollment certificate, PEM, for the role `agent:<node>`, signed by the fleet CA.
    pub certificate: String,
    /// The fleet CA's certificate, PEM (its pin is the one the agent was given).
    pub ca: String,
    /// When the certificate expires, RFC 3339.
    pub not_after: String,
}

/// A renewal: a new key's request, sent with the enrollment certificate it replaces.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RenewRequest {
    /// A PEM `CERTIFICATE REQUEST` for the new key.
    pub csr: String,
}

/// A run the node takes part in.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunOffer {
    /// The fleet's number of the run; the agent's next poll asks for runs after it.
    pub number: u64,
    /// The run's id.
    pub run_id: String,
    /// The port of the run's agent listener, on the host the agent dialled for the fleet.
    pub agent_port: u16,
    /// The run's CA certificate, PEM: the agent trusts it for this run.
    pub ca: String,
    /// What the agent presents to the run's `POST /api/v1/enroll` for a run certificate of its
    /// node (over a key made for the run); secret, never logged.
    pub credential: String,
}

impl std::fmt::Debug for RunOffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "RunOffer {{ number: {}, run_id: {:?}, agent_port: {}, credential: <redacted> }}",
            self.number, self.run_id, self.agent_port
        )
    }
}

/// An operator's request for a run over every enrolled node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FleetRunRequest {
    /// The plugins, as the aggregator's `run.json` lists them (`factbuoy_aggregator::config::RunPlugin`).
    pub plugins: Vec<serde_json::Value>,
    /// The run's deadline, in seconds.
    pub timeout_seconds: u64,
    /// Silence, in seconds, after which a node is given up as lost.
    pub lost_after_seconds: u64,
}

/// Where a started run is followed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetRunStarted {
    /// The fleet's number of the run.
    pub number: u64,
    /// The run's id.
    pub run_id: String,
    /// The port of the run's operator listener, on the fleet's host; it accepts the fleet's
    /// operator certificates.
    pub operator_port: u16,
    /// The run's CA certificate, PEM, which signs its listeners' certificates.
    pub ca: String,
    /// The nodes the run expects: every enrolled node not revoked.
    pub nodes: Vec<NodeName>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_wake_line_fits_the_longest_and_reads_back_as_itself() {
        for wake in [Wake::Changed, Wake::Idle, Wake::Close] {
            assert!(wake.line().len() <= Wake::MAX_LINE, "{wake:?}");
            assert_eq!(Wake::parse(wake.line()), Some(wake));
        }
        for bad in [&b"changed"[..], b"idle\r\n", b"", b"\n", b"closed\n"] {
            assert_eq!(Wake::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn routes_round_trip_and_numbers_are_plain_digits() {
        for route in [
            FleetRoute::Join,
            FleetRoute::Renew,
            FleetRoute::Runs,
            FleetRoute::NextRun { after: 0 },
            FleetRoute::NextRun { after: u64::MAX },
            FleetRoute::Plugin {
                sha256: "0a".repeat(32),
            },
        ] {
            assert_eq!(FleetRoute::parse(&route.path()), Some(route));
        }
        for bad in [
            "/api/v1/fleet/runs/next/",
            "/api/v1/fleet/runs/next/+1",
            "/api/v1/fleet/runs/next/-1",
            "/api/v1/fleet/runs/next/99999999999999999999",
            "/api/v1/fleet/joins",
            "/api/v1/plan/global",
            "/api/v1/fleet/plugins/",
            "/api/v1/fleet/plugins/../../etc/passwd",
            &format!("/api/v1/fleet/plugins/{}", "0A".repeat(32)),
            &format!("/api/v1/fleet/plugins/{}", "0a".repeat(33)),
        ] {
            assert_eq!(FleetRoute::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn secrets_stay_out_of_debug_output() {
        let join = JoinRequest {
            token: "abc.secret".into(),
            node: NodeName::parse("n").unwrap(),
            csr: String::new(),
        };
        assert!(!format!("{join:?}").contains("secret"));
        let offer = RunOffer {
            number: 1,
            run_id: "r".into(),
            agent_port: 1,
            ca: String::new(),
            credential: "ticket".into(),
        };
        assert!(!format!("{offer:?}").contains("ticket"));
    }
}
