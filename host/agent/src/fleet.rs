//! The agent as a member of a fleet: it joins once with a token (its key is made here and never
//! leaves the machine), then serves: long-polls the fleet for runs, takes part in each with a
//! run certificate over a fresh key, renews its enrollment certificate before it expires, and
//! backs off while the fleet is away. It only ever connects out.
//!
//! The state directory holds `agent.json` (the fleet's address, the node's name, the last run
//! it took part in), the fleet CA `ca.pem`, and the enrollment certificate `client.pem` with its
//! key `client.key` (0600).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use factbuoy_protocol::fleet::{Enrollment, JoinRequest, RunOffer};
use factbuoy_protocol::names::NodeName;
use factbuoy_protocol::text::printable;
use factbuoy_protocol::tls::Identity;
use factbuoy_protocol::tls::ca_pin;
use factbuoy_protocol::types::rfc3339;
use factbuoy_protocol::{Client, ClientError, Scope};
use factbuoy_runtime::{Limits, Runtime, RuntimeOptions};
use serde::{Deserialize, Serialize};

use crate::{AgentConfig, AgentSummary};

/// The longest wait between two attempts to reach an absent fleet.
const BACKOFF_MAX: Duration = Duration::from_secs(60);

/// What `agent.json` holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Membership {
    /// The fleet's `HOST:PORT`.
    pub fleet: String,
    /// This machine's node name.
    pub node: NodeName,
    /// The fleet's number of the last run this agent took part in.
    pub last_run: u64,
    /// When the enrollment certificate was issued and when it expires, RFC 3339.
    pub certificate_issued: String,
    /// When the enrollment certificate expires, RFC 3339.
    pub certificate_expires: String,
}

/// A fleet member's state directory: its membership, key and certificate.
#[derive(Debug, Clone)]
pub struct MemberDir(PathBuf);

impl MemberDir {
    /// The state in `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        MemberDir(root.into())
    }

    fn membership_file(&self) -> PathBuf {
        self.0.join("agent.json")
    }

    /// The membership, if this machine joined a fleet.
    pub fn membership(&self) -> anyhow::Result<Option<Membership>> {
        match std::fs::read(self.membership_file()) {
            Ok(bytes) => Ok(Some(serde_json::from_slice(&bytes).with_context(|| {
                format!("reading {}", self.membership_file().display())
            })?)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => {
                Err(e).with_context(|| format!("reading {}", self.membership_file().display()))
            }
        }
    }

    fn save_membership(&self, membership: &Membership) -> anyhow::Result<()> {
        factbuoy_pki::write_private(
            &self.membership_file(),
            &serde_json::to_string_pretty(membership)?,
        )?;
        Ok(())
    }

    /// The enrollment identity: the fleet CA, the certificate and its key.
    pub fn identity(&self) -> anyhow::Result<Identity> {
        Ok(Identity::from_files(
            &self.0.join("ca.pem"),
            &self.0.join("client.pem"),
            &self.0.join("client.key"),
        )?)
    }

    /// Saves a certificate and the key it was issued for (the key first: a certificate is
    /// never on disk without its key).
    fn save_identity(&self, enrollment: &Enrollment, key_pem: &str) -> anyhow::Result<()> {
        factbuoy_pki::write_private(&self.0.join("ca.pem"), &enrollment.ca)?;
        factbuoy_pki::write_private(&self.0.join("client.key"), key_pem)?;
        factbuoy_pki::write_private(&self.0.join("client.pem"), &enrollment.certificate)?;
        Ok(())
    }

    fn spool(&self, run_id: &str) -> PathBuf {
        self.0.join("spool").join(run_id)
    }
}

/// Joins the fleet at `fleet` (`HOST:PORT`) as `node`, trusting the aggregator only if its CA
/// matches `pin`, and records the membership in `state`. Refused when `state` already holds one.
pub async fn join(
    fleet: &str,
    token: &str,
    pin: &str,
    node: NodeName,
    state: &MemberDir,
    retry_for: Duration,
) -> anyhow::Result<Membership> {
    if let Some(membership) = state.membership()? {
        anyhow::bail!(
            "{} already holds a membership (fleet {}, node {}); remove it to join again, or use another --state-dir",
            state.0.display(),
            membership.fleet,
            membership.node
        );
    }
    if !factbuoy_protocol::tls::is_pin(pin) {
        anyhow::bail!(
            "--ca-pin {pin:?} is not sha256:<64 hex digits> as `factbuoy fleet token create` prints it"
        );
    }
    make_private_dir(&state.0)?;
    let client = Client::pinned(fleet, pin)?;
    let key = factbuoy_pki::KeyRequest::new(node.as_str())?;
    let request = JoinRequest {
        token: token.trim().to_owned(),
        node: node.clone(),
        csr: key.csr_pem.clone(),
    };
    // A handshake refused while joining is the pin (or the name dialled) not matching: trying
    // again cannot help. The fleet being away shows as a refused connection, which is retried.
    let retryable =
        |e: &ClientError| e.is_retryable() && !matches!(e, ClientError::Handshake { .. });
    let enrollment = crate::retry_when(retry_for, "joining the fleet", retryable, || {
        client.join(&request)
    })
    .await
    .map_err(|e| refusal("joining the fleet", e))?;
    // The chain the handshake checked held the pinned CA; the answer must name the same one.
    if ca_pin(&enrollment.ca)? != pin {
        anyhow::bail!(
            "the fleet answered with a CA that does not match --ca-pin {pin}; not joining"
        );
    }
    state.save_identity(&enrollment, &key.key_pem)?;
    let membership = Membership {
        fleet: fleet.to_owned(),
        node: enrollment.node,
        last_run: 0,
        certificate_issued: rfc3339(SystemTime::now()),
        certificate_expires: enrollment.not_after,
    };
    state.save_membership(&membership)?;
    tracing::info!(node = %membership.node, fleet, "joined the fleet");
    Ok(membership)
}

/// How [`serve`] runs the plans.
#[derive(Debug, Clone)]
pub struct MemberOptions {
    /// The host directory plugins' paths are mapped onto.
    pub host_root: PathBuf,
    /// How long each request of a run is retried.
    pub retry_for: Duration,
}

/// Serves the fleet `state` joined until it refuses this agent (revoked, say): that is the only
/// error it returns. Everything else (the fleet away, a run that fails) is logged and waited out.
pub async fn serve(state: &MemberDir, options: &MemberOptions) -> anyhow::Result<()> {
    let mut membership = state
        .membership()?
        .context("this machine has not joined a fleet; run `factbuoy agent join` first")?;
    let mut backoff = Backoff::default();
    tracing::info!(node = %membership.node, fleet = %membership.fleet, "serving the fleet");
    // Polls go over one kept connection, made again after a renewal (a new certificate).
    let mut client = Client::new(&membership.fleet, &state.identity()?)?.keep_alive();
    loop {
        if renewal_due(&membership) {
            match renew(state, &mut membership).await {
                Ok(()) => {
                    client = Client::new(&membership.fleet, &state.identity()?)?.keep_alive();
                }
                Err(e) if is_refusal(&e) => return Err(e),
                Err(e) => {
                    // The fleet is away: no poll either until it is back.
                    let wait = backoff.next();
                    tracing::warn!(
                        "renewing the enrollment certificate: {e:#}; trying again in {wait:?}"
                    );
                    tokio::time::sleep(wait).await;
                    continue;
                }
            }
        }
        // A poll is given up when the certificate is due for renewal, so that it is renewed
        // while it is still valid, however short its life.
        let poll = client.next_run(membership.last_run);
        let answer = tokio::select! {
            answer = poll => answer,
            _ = tokio::time::sleep(until_renewal(&membership)) => continue,
        };
        match answer {
            Ok(None) => backoff.reset(),
            Ok(Some(offer)) => {
                backoff.reset();
                let number = offer.number;
                let run_id = offer.run_id.clone();
                match take_part(state, &membership, offer, options).await {
                    Ok(summary) => {
                        tracing::info!(run = %run_id, results = summary.results.len(), "took part in a run")
                    }
                    Err(e) => {
                        tracing::error!(run = %run_id, "taking part in the run failed: {e:#}")
                    }
                }
                membership.last_run = number;
                state.save_membership(&membership)?;
            }
            Err(e) if !e.is_retryable() => return Err(refusal("asking the fleet for work", e)),
            Err(e) => {
                let wait = backoff.next();
                tracing::warn!("the fleet is not answering ({e}); trying again in {wait:?}");
                tokio::time::sleep(wait).await;
            }
        }
    }
}

/// When the certificate is to be renewed: once a third of its life is left. `None` when the
/// membership's times do not parse (then it is renewed at once).
fn renewal_time(membership: &Membership) -> Option<time::OffsetDateTime> {
    let parse = |text: &str| {
        time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).ok()
    };
    let issued = parse(&membership.certificate_issued)?;
    let expires = parse(&membership.certificate_expires)?;
    Some(issued + (expires - issued) * 2 / 3)
}

fn renewal_due(membership: &Membership) -> bool {
    renewal_time(membership).is_none_or(|at| time::OffsetDateTime::now_utc() >= at)
}

/// How long until the certificate is due for renewal.
fn until_renewal(membership: &Membership) -> Duration {
    renewal_time(membership)
        .map(|at| at - time::OffsetDateTime::now_utc())
        .and_then(|left| Duration::try_from(left).ok())
        .unwrap_or(Duration::ZERO)
}

async fn renew(state: &MemberDir, membership: &mut Membership) -> anyhow::Result<()> {
    let expired = time::OffsetDateTime::parse(
        &membership.certificate_expires,
        &time::format_description::well_known::Rfc3339,
    )
    .is_ok_and(|at| at <= time::OffsetDateTime::now_utc());
    if expired {
        // Nothing proves this machine to the fleet any more.
        return Err(FleetRefused(format!(
            "the enrollment certificate expired at {} while this agent was not running; join again with a new token (remove {} first)",
            membership.certificate_expires,
            state.0.display()
        ))
        .into());
    }
    let client = Client::new(&membership.fleet, &state.identity()?)?;
    let key = factbuoy_pki::KeyRequest::new(membership.node.as_str())?;
    let enrollment = client
        .renew(&key.csr_pem)
        .await
        .map_err(|e| refusal("renewing the enrollment certificate", e))?;
    state.save_identity(&enrollment, &key.key_pem)?;
    membership.certificate_issued = rfc3339(SystemTime::now());
    membership.certificate_expires = enrollment.not_after;
    state.save_membership(membership)?;
    tracing::info!(expires = %membership.certificate_expires, "renewed the enrollment certificate");
    Ok(())
}

/// Runs the plan of the run `offer` names: enrolls with the run (a key made for it), runs the
/// plugins, delivers the results.
async fn take_part(
    state: &MemberDir,
    membership: &Membership,
    offer: RunOffer,
    options: &MemberOptions,
) -> anyhow::Result<AgentSummary> {
    let host = membership
        .fleet
        .rsplit_once(':')
        .map(|(host, _)| host)
        .context("the fleet address is not HOST:PORT")?;
    let address = format!("{host}:{}", offer.agent_port);
    tracing::info!(run = %offer.run_id, %address, "taking part in a run");
    let anonymous = Client::anonymous(&address, &offer.ca)?;
    let credential = offer.credential.clone();
    let enrolled = crate::enroll_with(&anonymous, &offer.ca, options.retry_for, || {
        Ok(credential.clone())
    })
    .await?;
    let client = Client::new(&address, &enrolled.identity)?;
    let spool = state.spool(&offer.run_id);
    make_private_dir(&spool)?;
    // A run's engine is dropped with it: an idle agent holds no compiled plugins in memory.
    let runtime = Arc::new(Runtime::new(RuntimeOptions {
        limits: Limits::default(),
        ..RuntimeOptions::default()
    })?);
    let config = Arc::new(AgentConfig {
        scope: Scope::Node(enrolled.node),
        host_root: options.host_root.clone(),
        spool_dir: spool.clone(),
        retry_for: options.retry_for,
        parallel: AgentConfig::all_cores(),
        stop: factbuoy_runtime::StopSignal::new(),
    });
    let summary = crate::run(client, runtime, config, Arc::default()).await;
    let _ = std::fs::remove_dir_all(&spool);
    summary
}

/// The join token in `file`, or on standard input for `-`: its first line, trimmed.
pub fn read_join_token(file: &Path) -> anyhow::Result<String> {
    let text = if file == Path::new("-") {
        std::io::read_to_string(std::io::stdin())
            .map_err(|e| anyhow::anyhow!("reading the join token from standard input: {e}"))?
    } else {
        std::fs::read_to_string(file)
            .map_err(|e| anyhow::anyhow!("reading the join token from {}: {e}", file.display()))?
    };
    let token = text.lines().next().unwrap_or_default().trim();
    anyhow::ensure!(
        !token.is_empty(),
        "no join token in {}; `factbuoy fleet token create` makes one",
        if file == Path::new("-") {
            "standard input".to_owned()
        } else {
            file.display().to_string()
        }
    );
    Ok(token.to_owned())
}

/// Whether `e` is the fleet refusing this agent (rather than being away).
fn is_refusal(e: &anyhow::Error) -> bool {
    e.downcast_ref::<FleetRefused>().is_some()
}

/// The fleet refused a request for good (4xx): revoked, replaced, a bad token.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct FleetRefused(String);

fn refusal(what: &str, e: ClientError) -> anyhow::Error {
    match e {
        ClientError::Status {
            status, message, ..
        } if status.is_client_error() => FleetRefused(format!(
            "{what}: the fleet refused ({status}): {}",
            printable(&message)
        ))
        .into(),
        other => anyhow::anyhow!("{what}: {other}"),
    }
}

fn make_private_dir(path: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .with_context(|| format!("creating {}", path.display()))
}

/// Exponential backoff with full jitter, from a second up to [`BACKOFF_MAX`].
#[derive(Debug, Default)]
struct Backoff(u32);

impl Backoff {
    fn next(&mut self) -> Duration {
        let ceiling = Duration::from_secs(1u64 << self.0.min(6)).min(BACKOFF_MAX);
        self.0 += 1;
        ceiling.mul_f64(0.5 + rand::random::<f64>() / 2.0)
    }

    fn reset(&mut self) {
        self.0 = 0;
    }
}
