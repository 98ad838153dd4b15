//! The fleet listener's requests. Joining needs no certificate (the token vouches for the
//! machine); everything else needs the fleet CA's certificate of an enrolled, unrevoked node
//! (its current one), or of an operator. Every error body is `{"error": "..."}`.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use factbuoy_pki::SigningRequest;
use factbuoy_protocol::fleet::{
    Enrollment, FleetRoute, FleetRunRequest, IDLE_SECONDS_HEADER, JoinRequest, LONG_POLL_SECONDS,
    MAX_PLUGIN_BYTES, PARKED_POLL, RenewRequest,
};
use factbuoy_protocol::identity::Role;
use factbuoy_protocol::names::NodeName;
use factbuoy_protocol::types::{ErrorBody, now_rfc3339, rfc3339};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::HeaderValue;
use hyper::upgrade::OnUpgrade;
use hyper::{Method, Request, Response, StatusCode, header};
use tokio::sync::watch;

use super::admission::revoked;
use super::registry::{self, EnrolledNode};
use super::runs::{self, StartError};
use super::shared::Fleet;
use super::{plugins, tokens};
use crate::routes::http::{
    Rejection, empty, full, json_response as json, metrics_response, reject, upload_rejection,
};
use crate::serving::park::{Answered, Park};
use crate::serving::{Body, Peer};

/// Largest join or renewal body.
const MAX_ENROLL_BYTES: usize = 16 << 10;
/// Largest run request (a plan with its parameters).
const MAX_RUN_REQUEST_BYTES: usize = 4 << 20;
/// Time allowed to send a body.
const BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// Answers one request; never fails (a rejection is a JSON error).
pub(crate) async fn handle(
    fleet: Arc<Fleet>,
    peer: Arc<Peer>,
    request: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    Ok(match respond(&fleet, &peer, request).await {
        Ok(response) => response,
        Err(rejection) => {
            fleet.metrics.reject(rejection.reason);
            if rejection.status == StatusCode::FORBIDDEN || rejection.status == StatusCode::CONFLICT
            {
                tracing::warn!(peer = %peer.address, status = %rejection.status, "{}", rejection.message);
            }
            json(
                rejection.status,
                &ErrorBody {
                    error: rejection.message,
                },
            )
        }
    })
}

async fn respond(
    fleet: &Arc<Fleet>,
    peer: &Peer,
    mut request: Request<Incoming>,
) -> Result<Response<Body>, Rejection> {
    let route = FleetRoute::parse(request.uri().path()).ok_or_else(|| {
        reject(
            StatusCode::NOT_FOUND,
            "not-found",
            "no such fleet route; see docs/protocol.md",
        )
    })?;
    let methods: &[Method] = match route {
        FleetRoute::NextRun { .. } | FleetRoute::Metrics | FleetRoute::Health => &[Method::GET],
        FleetRoute::Plugin { .. } => &[Method::GET, Method::PUT],
        _ => &[Method::POST],
    };
    if !methods.contains(request.method()) {
        let names: Vec<&str> = methods.iter().map(Method::as_str).collect();
        return Err(reject(
            StatusCode::METHOD_NOT_ALLOWED,
            "method",
            format!("use {} for {}", names.join(" or "), route.path()),
        ));
    }
    // The future of every request, an idle long poll's too, is as large as its largest arm:
    // the other arms box what they wait for.
    match route {
        // Signing and the synced writes of the registry and tokens run off the event loop.
        FleetRoute::Join => {
            let version = agent_version(&request);
            let body: JoinRequest = read_json(request, MAX_ENROLL_BYTES).await?;
            let fleet = fleet.clone();
            blocking(move || join(&fleet, body, version)).await
        }
        FleetRoute::Renew => {
            let node = enrolled(fleet, peer)?;
            let body: RenewRequest = read_json(request, MAX_ENROLL_BYTES).await?;
            let fleet = fleet.clone();
            blocking(move || renew(&fleet, &node, &body)).await
        }
        FleetRoute::NextRun { after } => {
            let node = enrolled(fleet, peer)?;
            fleet.metrics.polls.inc();
            let version = agent_version(&request);
            seen(fleet, &node, version.clone());
            let upgrade = asks_to_park(&request).then(|| hyper::upgrade::on(&mut request));
            // The request's head holds on to hyper's read buffer, so while the poll waits hyper
            // would read into a second one: 8 KiB more for every idle agent.
            drop(request);
            next_run(fleet, peer, node, version, after, upgrade).await
        }
        FleetRoute::Plugin { sha256 } => {
            operator(peer, "storing plugins")?;
            if request.method() == Method::GET {
                return if plugins::is_stored(&fleet.dir, &sha256) {
                    Ok(empty(StatusCode::NO_CONTENT))
                } else {
                    Err(reject(
                        StatusCode::NOT_FOUND,
                        "not-stored",
                        format!("the fleet stores no plugin {sha256}; PUT it here"),
                    ))
                };
            }
            let declared = request
                .headers()
                .get(header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok());
            if declared.is_some_and(|n| n > MAX_PLUGIN_BYTES) {
                return Err(reject(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "too-large",
                    format!("a plugin may have at most {MAX_PLUGIN_BYTES} bytes"),
                ));
            }
            Box::pin(plugins::receive(&fleet.dir, &sha256, request.into_body()))
                .await
                .map_err(upload_rejection)?;
            tracing::info!(plugin = %sha256, "stored a plugin");
            Ok(empty(StatusCode::CREATED))
        }
        FleetRoute::Metrics => {
            operator(peer, "reading the fleet's metrics")?;
            // The revocations are files: read off the event loop, as the registry's lock is
            // held only while the gauges are set.
            let fleet = fleet.clone();
            tokio::task::spawn_blocking(move || {
                let revoked = registry::revoked_nodes(&fleet.dir)
                    .map_err(|e| internal("reading the revocations", &e))?;
                let runs = fleet.runs.taking_part();
                let registry = fleet.registry.lock().unwrap();
                Ok(metrics_response(fleet.metrics.encode(
                    &registry.0,
                    &revoked,
                    &runs,
                )))
            })
            .await
            .map_err(|e| internal("reading the fleet's metrics", &e))?
        }
        FleetRoute::Health => Ok(Response::new(full("ok\n"))),
        FleetRoute::Runs => {
            operator(peer, "starting a run")?;
            let body: FleetRunRequest = read_json(request, MAX_RUN_REQUEST_BYTES).await?;
            match Box::pin(runs::start(fleet, body)).await {
                Ok(started) => Ok(json(StatusCode::CREATED, &started)),
                Err(e @ StartError::Invalid(_)) => {
                    Err(reject(StatusCode::BAD_REQUEST, "bad-run", e.to_string()))
                }
                Err(e @ StartError::NoNodes) => {
                    Err(reject(StatusCode::CONFLICT, "no-nodes", e.to_string()))
                }
                Err(e @ StartError::NoPorts(_)) => Err(reject(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "no-ports",
                    e.to_string(),
                )),
                Err(e @ StartError::Failed(_)) => {
                    tracing::error!("{e}");
                    Err(reject(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "storage",
                        e.to_string(),
                    ))
                }
            }
        }
    }
}

/// Refuses anyone but the fleet's operator (`what` they tried).
fn operator(peer: &Peer, what: &str) -> Result<(), Rejection> {
    if matches!(peer.role, Some(Role::Operator { .. })) {
        return Ok(());
    }
    Err(reject(
        StatusCode::FORBIDDEN,
        "role",
        format!(
            "{what} takes the fleet's operator certificate (`operator/` in the fleet directory)"
        ),
    ))
}

/// Runs an enrollment on the blocking pool and answers with its certificate.
async fn blocking(
    enroll: impl FnOnce() -> Result<Enrollment, Rejection> + Send + 'static,
) -> Result<Response<Body>, Rejection> {
    match tokio::task::spawn_blocking(enroll).await {
        Ok(enrolled) => enrolled.map(|enrollment| json(StatusCode::OK, &enrollment)),
        Err(e) => Err(reject(
            StatusCode::INTERNAL_SERVER_ERROR,
            "panic",
            format!("the enrollment failed: {e}; retry"),
        )),
    }
}

/// Reads a JSON body of at most `limit` bytes within [`BODY_TIMEOUT`]. Boxed: inline, the
/// read would take room in the future of every request, an idle long poll's too.
fn read_json<T: serde::de::DeserializeOwned + Send + 'static>(
    request: Request<Incoming>,
    limit: usize,
) -> Pin<Box<dyn Future<Output = Result<T, Rejection>> + Send>> {
    Box::pin(async move {
        let collected = tokio::time::timeout(
            BODY_TIMEOUT,
            Limited::new(request.into_body(), limit).collect(),
        )
        .await
        .map_err(|_| {
            reject(
                StatusCode::REQUEST_TIMEOUT,
                "slow-body",
                format!("the body did not arrive within {}s", BODY_TIMEOUT.as_secs()),
            )
        })?
        .map_err(|e| {
            reject(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too-large",
                format!("the body was cut off or is larger than {limit} bytes: {e}"),
            )
        })?;
        serde_json::from_slice(&collected.to_bytes()).map_err(|e| {
            reject(
                StatusCode::BAD_REQUEST,
                "bad-json",
                format!("the body is not the JSON this route takes: {e}"),
            )
        })
    })
}

/// The node whose current enrollment certificate `peer` presented.
fn enrolled(fleet: &Fleet, peer: &Peer) -> Result<NodeName, Rejection> {
    let Some(Role::Agent { node }) = &peer.role else {
        return Err(reject(
            StatusCode::FORBIDDEN,
            "role",
            "this route takes an enrollment certificate; join the fleet first (`factbuoy agent join`)",
        ));
    };
    if let Some(why) = revoked(&fleet.dir, node) {
        return Err(reject(StatusCode::FORBIDDEN, "revoked", why));
    }
    let registry = fleet.registry.lock().unwrap();
    match registry.0.get(node) {
        Some(record) if Some(&record.certificate_sha256) == peer.certificate_sha256.as_ref() => {
            Ok(node.clone())
        }
        Some(_) => Err(reject(
            StatusCode::FORBIDDEN,
            "replaced",
            format!(
                "this certificate of node {node} was replaced (renewed, or the name joined from another machine); use the current one or join again"
            ),
        )),
        None => Err(reject(
            StatusCode::FORBIDDEN,
            "unknown-node",
            format!("node {node} is not enrolled in this fleet; join it with a token"),
        )),
    }
}

/// The agent's version, as its request's User-Agent says (its first 64 characters).
fn agent_version(request: &Request<Incoming>) -> Option<String> {
    request
        .headers()
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.chars().take(64).collect::<String>())
}

/// Records that `node` asked for work (or acknowledged a parked poll's `idle`), and with which
/// agent version.
fn seen(fleet: &Fleet, node: &NodeName, version: Option<String>) {
    let mut registry = fleet.registry.lock().unwrap();
    if let Some(record) = registry.0.get_mut(node) {
        record.last_seen = Some(now_rfc3339());
        record.agent_version = version;
        registry.1 = true;
    }
}

fn signing_request(csr: &str) -> Result<SigningRequest, Rejection> {
    SigningRequest::parse(csr)
        .map_err(|e| reject(StatusCode::BAD_REQUEST, "bad-csr", e.to_string()))
}

/// An enrollment signed and its record staged, not yet in force: [`Signed::record`] makes it
/// the node's only accepted certificate.
struct Signed {
    record: EnrolledNode,
    staged: registry::StagedRecord,
    enrollment: Enrollment,
}

impl Signed {
    /// Puts the record in place and in the registry; hands out the certificate.
    fn record(
        self,
        registry: &mut (registry::Registry, bool),
    ) -> Result<Enrollment, std::io::Error> {
        self.staged.commit()?;
        registry.0.insert(self.record.name.clone(), self.record);
        // `last-seen.json` may still hold the membership before: written again soon.
        registry.1 = true;
        Ok(self.enrollment)
    }
}

fn internal(what: &str, e: &dyn std::fmt::Display) -> Rejection {
    tracing::error!("{what}: {e}");
    reject(
        StatusCode::INTERNAL_SERVER_ERROR,
        "storage",
        format!("{what}: {e}; retry"),
    )
}

/// Signs an enrollment certificate for `node` and stages its record (the disk refuses here, if
/// it does); nothing is handed out or in force yet.
fn sign(
    fleet: &Fleet,
    node: &NodeName,
    csr: &SigningRequest,
    enrolled_at: String,
    agent_version: Option<String>,
) -> Result<Signed, Rejection> {
    let validity = time::Duration::seconds(
        i64::try_from(fleet.settings.certificate_validity_seconds).unwrap_or(i64::MAX),
    );
    let certificate = fleet
        .ca
        .sign_request_for(csr, &Role::Agent { node: node.clone() }, validity)
        .map_err(|e| internal("signing the certificate", &e))?;
    let fingerprint = factbuoy_pki::fingerprint_pem(&certificate)
        .ok_or_else(|| internal("reading the signed certificate", &"unparsable"))?;
    let not_after = rfc3339(fingerprint.not_after.into());
    let record = EnrolledNode {
        name: node.clone(),
        enrolled_at,
        certificate_sha256: fingerprint.sha256,
        certificate_expires: not_after.clone(),
        last_seen: Some(now_rfc3339()),
        agent_version,
    };
    let staged = registry::stage_record(&fleet.dir, &record)
        .map_err(|e| internal("recording the node", &e))?;
    Ok(Signed {
        record,
        staged,
        enrollment: Enrollment {
            node: node.clone(),
            certificate,
            ca: fleet.ca.cert_pem().to_owned(),
            not_after,
        },
    })
}

/// A join, all or nothing: the node's record is staged first, then the token spent (the
/// commit point), then the record put in place; a token is spent only if the node is recorded.
fn join(
    fleet: &Fleet,
    body: JoinRequest,
    version: Option<String>,
) -> Result<Enrollment, Rejection> {
    let csr = signing_request(&body.csr)?;
    let node = body.node;
    let token = |outcome: std::io::Result<Result<(), tokens::TokenRefusal>>| match outcome {
        Ok(Ok(())) => Ok(()),
        Ok(Err(why)) => Err(reject(StatusCode::FORBIDDEN, "token", why.to_string())),
        Err(e) => Err(internal("reading or writing the tokens", &e)),
    };
    // The token first: without one, nothing is said about which names are enrolled.
    token(tokens::check(&fleet.dir, &body.token))?;
    let mut registry = fleet.registry.lock().unwrap();
    let revoked = registry::is_revoked(&fleet.dir, &node);
    if registry.0.contains_key(&node) && !revoked {
        return Err(reject(
            StatusCode::CONFLICT,
            "name-taken",
            format!(
                "node name {node} is already enrolled by another machine; choose another --node, or revoke the old one first (`factbuoy fleet revoke {node}`)"
            ),
        ));
    }
    // A fresh record: nothing of a membership before; seen now, with the agent that joined.
    let signed = sign(fleet, &node, &csr, now_rfc3339(), version)?;
    // Spent only once everything else would admit the machine and its record is on disk; a
    // refusal or a failure here drops the staged record.
    token(tokens::redeem(&fleet.dir, &body.token))?;
    let enrollment = match signed.record(&mut registry) {
        Ok(enrollment) => enrollment,
        Err(e) => {
            if let Err(refund) = tokens::refund(&fleet.dir, &body.token) {
                tracing::error!(
                    "node {node} was not recorded, and its token stays spent: {refund}"
                );
            }
            return Err(internal("recording the node", &e));
        }
    };
    if revoked && let Err(e) = registry::unrevoke(&fleet.dir, &node) {
        tracing::error!("node {node} joined again, but its revocation stays: {e}");
    }
    fleet.metrics.joins.inc();
    tracing::info!(%node, "a machine joined the fleet");
    Ok(enrollment)
}

fn renew(fleet: &Fleet, node: &NodeName, body: &RenewRequest) -> Result<Enrollment, Rejection> {
    let csr = signing_request(&body.csr)?;
    let mut registry = fleet.registry.lock().unwrap();
    let (enrolled_at, version) = match registry.0.get(node) {
        Some(record) => (record.enrolled_at.clone(), record.agent_version.clone()),
        None => (now_rfc3339(), None),
    };
    let enrollment = sign(fleet, node, &csr, enrolled_at, version)?
        .record(&mut registry)
        .map_err(|e| internal("recording the node", &e))?;
    tracing::info!(%node, "renewed an enrollment certificate");
    Ok(enrollment)
}

/// Whether a poll asks to be parked ([`PARKED_POLL`]) while nothing answers it.
fn asks_to_park(request: &Request<Incoming>) -> bool {
    let has = |name, wanted: &str| {
        request.headers().get_all(name).iter().any(|value| {
            value.to_str().is_ok_and(|value| {
                value
                    .split(',')
                    .any(|token| token.trim().eq_ignore_ascii_case(wanted))
            })
        })
    };
    has(header::CONNECTION, "upgrade") && has(header::UPGRADE, PARKED_POLL)
}

/// The next run for `node` after `after`: its offer at once if there is one, 403 if the node is
/// revoked. Otherwise a poll that asked to be parked is answered 101 and parked on its
/// connection ([`Park`]), told `idle` every `idle_seconds` of the fleet's settings; any other
/// waits here for an answer up to [`LONG_POLL_SECONDS`], 204 if none came.
async fn next_run(
    fleet: &Arc<Fleet>,
    peer: &Peer,
    node: NodeName,
    version: Option<String>,
    after: u64,
    upgrade: Option<OnUpgrade>,
) -> Result<Response<Body>, Rejection> {
    let changes = Changes::of(fleet);
    if let Some(answer) = answer(fleet, &node, after) {
        return answer;
    }
    // Counted as connected while the poll waits, however it ends.
    let waiting = fleet.metrics.waiting();
    let Some(upgrade) = upgrade else {
        let wait = Duration::from_secs(LONG_POLL_SECONDS);
        let answer = tokio::time::timeout(wait, answer_on_change(fleet, &node, after, changes))
            .await
            .unwrap_or_else(|_| Ok(empty(StatusCode::NO_CONTENT)));
        drop(waiting);
        return answer;
    };
    let answered: Answered = {
        let (fleet, node) = (fleet.clone(), node.clone());
        // One wait for the whole park, across its periods: a period that ends unanswered
        // looks at nothing again. The park drops it when its connection ends.
        Box::pin(async move {
            let _waiting = waiting;
            let _ = answer_on_change(&fleet, &node, after, changes).await;
        })
    };
    let alive = {
        let fleet = fleet.clone();
        move || seen(&fleet, &node, version.clone())
    };
    peer.parked.park(Park {
        upgrade,
        period: Duration::from_secs(fleet.settings.idle_seconds),
        answered,
        alive: Box::new(alive),
    });
    let mut switching = empty(StatusCode::SWITCHING_PROTOCOLS);
    let headers = switching.headers_mut();
    headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    headers.insert(header::UPGRADE, HeaderValue::from_static(PARKED_POLL));
    headers.insert(
        IDLE_SECONDS_HEADER,
        HeaderValue::from(fleet.settings.idle_seconds),
    );
    Ok(switching)
}

/// What a poll of `node` after `after` is answered now, if anything: 403 if the node is
/// revoked, else the offer of a run.
fn answer(fleet: &Fleet, node: &NodeName, after: u64) -> Option<Result<Response<Body>, Rejection>> {
    if let Some(why) = revoked(&fleet.dir, node) {
        return Some(Err(reject(StatusCode::FORBIDDEN, "revoked", why)));
    }
    let offer = fleet.runs.offer(&fleet.ticket_key, node, after)?;
    Some(Ok(json(StatusCode::OK, &offer)))
}

/// What may change a poll's [`answer`]: a run starting, or revocations found. Taken before the
/// poll first looks for its answer, so that neither slips in between the look and the wait.
struct Changes {
    started: watch::Receiver<u64>,
    revocations: watch::Receiver<u64>,
}

impl Changes {
    fn of(fleet: &Fleet) -> Changes {
        Changes {
            started: fleet.runs.watch(),
            revocations: fleet.revocations.subscribe(),
        }
    }

    /// Waits for the next change (for ever, once nothing can change any more).
    async fn next(&mut self) {
        tokio::select! {
            Ok(()) = self.started.changed() => {}
            Ok(()) = self.revocations.changed() => {}
            else => std::future::pending().await,
        }
    }
}

/// [`answer`] once one of the `changes` brings one.
async fn answer_on_change(
    fleet: &Fleet,
    node: &NodeName,
    after: u64,
    mut changes: Changes,
) -> Result<Response<Body>, Rejection> {
    loop {
        changes.next().await;
        if let Some(answer) = answer(fleet, node, after) {
            return answer;
        }
    }
}
