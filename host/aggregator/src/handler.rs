//! Requests: routing, authorization by certificate role, and the answer to each endpoint.
//!
//! Status codes: 400 malformed request or names, 403 a certificate that may not do this or an
//! unexpected (plugin, node), 404 unknown path, 405 wrong method, 408 a stalled or too slow
//! upload, 409 a true duplicate or a finished run, 413 too large, 416 an unsatisfiable range.
//! Every error body is `{"error": "..."}` with a sentence a person can act on.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use factbuoy_protocol::digest;
use factbuoy_protocol::identity::Role;
use factbuoy_protocol::routes::{Route, RouteError, Scope};
use factbuoy_protocol::types::{
    ErrorBody, Outcome, PairStatus, Plan, PlannedPlugin, ProgressUpdate, ResultManifest,
};
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper::{Method, Request, Response, StatusCode, header};
use tokio::io::{AsyncReadExt, AsyncSeekExt};

use super::config::PlanScope;
use crate::shared::{ComponentSource, Shared};
use factbuoy_protocol::types::now_rfc3339;

use super::state::{CommitCheck, Committed};
use super::storage::{CommitError, Pace, UploadError};

/// The body of every response: whole JSON or text, or the bundle streamed from disk.
pub type Body = BoxBody<Bytes, std::io::Error>;

/// Which listener a request arrived on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listener {
    /// Serves everything under `/api/v1/`.
    Agent,
    /// Serves `/status`, `/metrics` and `/bundle`.
    Operator,
}

/// A response that ends a request early: its status, the reason it is counted under in the
/// metrics, and the message of its `{"error": ...}` body.
pub(crate) struct Refusal {
    pub(crate) status: StatusCode,
    pub(crate) reason: &'static str,
    pub(crate) message: String,
}

pub(crate) fn refuse(
    status: StatusCode,
    reason: &'static str,
    message: impl Into<String>,
) -> Refusal {
    Refusal {
        status,
        reason,
        message: message.into(),
    }
}

pub(crate) fn json_response(status: StatusCode, value: &impl serde::Serialize) -> Response<Body> {
    let bytes = serde_json::to_vec(value).expect("serialising a response");
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .body(full(bytes))
        .expect("a valid response")
}

fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed()
}

pub(crate) fn empty(status: StatusCode) -> Response<Body> {
    Response::builder()
        .status(status)
        .body(full(Bytes::new()))
        .expect("a valid response")
}

/// Answers one request that arrived on `listener` from a client whose certificate carries
/// `role` (`None`: no factbuoy role). Never fails: a refusal is a JSON error response.
pub async fn handle(
    shared: Arc<Shared>,
    listener: Listener,
    role: Option<Role>,
    request: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let response = match respond(&shared, listener, role, request).await {
        Ok(response) => response,
        Err(refusal) => {
            shared.metrics.reject(refusal.reason);
            tracing::debug!(status = %refusal.status, "{}", refusal.message);
            json_response(
                refusal.status,
                &ErrorBody {
                    error: refusal.message,
                },
            )
        }
    };
    Ok(response)
}

async fn respond(
    shared: &Arc<Shared>,
    listener: Listener,
    role: Option<Role>,
    request: Request<Incoming>,
) -> Result<Response<Body>, Refusal> {
    let route = Route::parse(request.uri().path()).map_err(|e| match e {
        RouteError::NotFound(_) => refuse(StatusCode::NOT_FOUND, "not-found", e.to_string()),
        other => refuse(StatusCode::BAD_REQUEST, "bad-name", other.to_string()),
    })?;
    if route == Route::Enroll && listener == Listener::Agent {
        // The one route open to clients without a certificate.
        if request.method() != Method::POST {
            return Err(refuse(
                StatusCode::METHOD_NOT_ALLOWED,
                "method",
                format!("use POST for {}", route.path()),
            ));
        }
        return enroll(shared, request).await;
    }
    let role = role.ok_or_else(|| {
        refuse(
            StatusCode::FORBIDDEN,
            "no-role",
            "no client certificate, or one that carries no factbuoy role: only enrollment is open without one",
        )
    })?;
    authorize(&role, &route)?;
    let serves = match route {
        Route::Status | Route::Bundle | Route::Metrics => Listener::Operator,
        _ => Listener::Agent,
    };
    if serves != listener {
        return Err(refuse(
            StatusCode::NOT_FOUND,
            "wrong-listener",
            format!(
                "{} is served on the {} listener",
                route.path(),
                if serves == Listener::Operator {
                    "operator"
                } else {
                    "agent"
                }
            ),
        ));
    }
    let method = request.method().clone();
    let expect = |wanted: Method| {
        if method == wanted {
            Ok(())
        } else {
            Err(refuse(
                StatusCode::METHOD_NOT_ALLOWED,
                "method",
                format!("use {wanted} for {}", route.path()),
            ))
        }
    };
    match &route {
        Route::ResultFile {
            scope,
            plugin,
            name,
        } => {
            expect(Method::PUT)?;
            receive_file(shared, scope, plugin, name, request).await
        }
        Route::ResultCommit { scope, plugin } => {
            expect(Method::PUT)?;
            commit(shared, scope, plugin, request).await
        }
        Route::Progress { scope, plugin } => {
            expect(Method::POST)?;
            progress(shared, scope, plugin, request).await
        }
        Route::Heartbeat { node } => {
            expect(Method::POST)?;
            shared
                .state
                .lock()
                .unwrap()
                .heartbeats
                .insert(node.clone(), std::time::SystemTime::now());
            Ok(empty(StatusCode::NO_CONTENT))
        }
        Route::Plan { scope } => {
            expect(Method::GET)?;
            Ok(json_response(StatusCode::OK, &plan(shared, scope)))
        }
        Route::Component { sha256 } => {
            expect(Method::GET)?;
            component(shared, sha256).await
        }
        Route::Status => {
            expect(Method::GET)?;
            let document = shared.state.lock().unwrap().document(&shared.config.run_id);
            Ok(json_response(StatusCode::OK, &document))
        }
        Route::Metrics => {
            expect(Method::GET)?;
            shared.update_node_gauges();
            Ok(Response::builder()
                .header(header::CONTENT_TYPE, "text/plain; version=0.0.4")
                .body(full(shared.metrics.encode()))
                .expect("a valid response"))
        }
        Route::Bundle => {
            expect(Method::GET)?;
            bundle(shared, &request).await
        }
        // Answered above on the agent listener.
        Route::Enroll => Err(refuse(
            StatusCode::NOT_FOUND,
            "wrong-listener",
            "enrollment is served on the agent listener",
        )),
    }
}

/// Whether `role` may use `route`: a node's agent speaks only for its node, operators only read.
fn authorize(role: &Role, route: &Route) -> Result<(), Refusal> {
    let allowed = match (route, role) {
        (
            Route::ResultFile {
                scope: Scope::Node(n),
                ..
            }
            | Route::ResultCommit {
                scope: Scope::Node(n),
                ..
            }
            | Route::Progress {
                scope: Scope::Node(n),
                ..
            }
            | Route::Heartbeat { node: n }
            | Route::Plan {
                scope: Scope::Node(n),
            },
            Role::Agent { node },
        ) => n == node,
        (
            Route::ResultFile {
                scope: Scope::Global,
                ..
            }
            | Route::ResultCommit {
                scope: Scope::Global,
                ..
            }
            | Route::Progress {
                scope: Scope::Global,
                ..
            }
            | Route::Plan {
                scope: Scope::Global,
            },
            Role::Global { .. },
        ) => true,
        (Route::Component { .. }, Role::Agent { .. } | Role::Global { .. }) => true,
        (Route::Status | Route::Bundle | Route::Metrics, Role::Operator { .. }) => true,
        _ => false,
    };
    if allowed {
        Ok(())
    } else {
        Err(refuse(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!("the {role} may not use {}", route.path()),
        ))
    }
}

/// The pair a result or progress is for must be one this run expects, and still open.
fn check_open(shared: &Shared, plugin: &str, scope: &Scope) -> Result<(), Refusal> {
    let label = scope.label();
    match shared.state.lock().unwrap().check_commit(plugin, scope) {
        CommitCheck::Open => Ok(()),
        CommitCheck::Duplicate => Err(refuse(
            StatusCode::CONFLICT,
            "duplicate",
            format!("a complete result of {plugin} for {label} is already stored; nothing to do"),
        )),
        CommitCheck::Closed => Err(refuse(
            StatusCode::CONFLICT,
            "closed",
            "the run has ended; no more results are accepted",
        )),
        CommitCheck::NodeClosed(why) => Err(refuse(StatusCode::CONFLICT, "node-closed", why)),
        CommitCheck::Unexpected => Err(refuse(
            StatusCode::FORBIDDEN,
            "unexpected",
            format!("this run expects no result of plugin {plugin:?} for {label:?}"),
        )),
    }
}

/// The answer to an upload that could not be stored.
pub(crate) fn upload_refusal(e: UploadError) -> Refusal {
    let (status, reason) = match &e {
        UploadError::TooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, "too-large"),
        UploadError::Stalled(_) | UploadError::TooSlow { .. } => {
            (StatusCode::REQUEST_TIMEOUT, "too-slow")
        }
        UploadError::DigestMismatch { .. } => (StatusCode::BAD_REQUEST, "digest-mismatch"),
        UploadError::Interrupted(_) => (StatusCode::BAD_REQUEST, "interrupted"),
        UploadError::Io(e) if super::storage::is_disk_full(e) => {
            (StatusCode::INSUFFICIENT_STORAGE, "disk-full")
        }
        UploadError::Io(_) => (StatusCode::INTERNAL_SERVER_ERROR, "storage"),
    };
    refuse(status, reason, e.to_string())
}

async fn receive_file(
    shared: &Shared,
    scope: &Scope,
    plugin: &str,
    name: &factbuoy_protocol::names::ArtifactName,
    request: Request<Incoming>,
) -> Result<Response<Body>, Refusal> {
    let label = scope.label();
    check_open(shared, plugin, scope)?;
    let limits = &shared.config.limits;
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limits.max_file_bytes) {
        return Err(refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too-large",
            format!(
                "the file is larger than the limit of {} bytes",
                limits.max_file_bytes
            ),
        ));
    }
    let expected = request
        .headers()
        .get(digest::CONTENT_DIGEST)
        .and_then(|v| v.to_str().ok())
        .and_then(digest::parse_sha256)
        .ok_or_else(|| {
            refuse(
                StatusCode::BAD_REQUEST,
                "no-digest",
                "send the file's sha-256 as `Content-Digest: sha-256=:<base64>:`",
            )
        })?;
    let started = Instant::now();
    let received = shared
        .storage
        .receive_file(plugin, label, name, &expected, request.into_body(), limits)
        .await;
    let size = received.map_err(upload_refusal)?;
    // The result may have been completed while the body streamed in. Commits hold the pair's
    // lock from their check until the state records them, so the pair is either still open (a
    // later commit takes or clears this file), or complete without it (then it is deleted and
    // the answer is 409).
    let _pair = shared.storage.lock_pair(plugin, label).await;
    if let Err(refusal) = check_open(shared, plugin, scope) {
        shared
            .storage
            .discard(plugin, label, name, size, &expected)
            .map_err(|e| {
                refuse(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "storage",
                    format!("deleting an upload that came too late: {e}"),
                )
            })?;
        return Err(refusal);
    }
    shared.metrics.bytes_received.inc_by(size);
    shared
        .metrics
        .upload_seconds
        .observe(started.elapsed().as_secs_f64());
    shared.state.lock().unwrap().mark_running(plugin, scope);
    Ok(json_response(
        StatusCode::CREATED,
        &serde_json::json!({ "size": size, "sha256": expected }),
    ))
}

async fn read_json<T: serde::de::DeserializeOwned>(
    shared: &Shared,
    request: Request<Incoming>,
) -> Result<T, Refusal> {
    read_json_within(shared, request, shared.config.limits.max_json_bytes).await
}

async fn read_json_within<T: serde::de::DeserializeOwned>(
    shared: &Shared,
    request: Request<Incoming>,
    limit: u64,
) -> Result<T, Refusal> {
    let mut body = request.into_body();
    let mut bytes = Vec::new();
    // The same pace rules as file uploads: a slow body must not hold a connection slot.
    let mut pace = Pace::new(&shared.config.limits);
    while let Some(data) = pace.next(&mut body).await.map_err(|e| match e {
        UploadError::Interrupted(_) => {
            refuse(StatusCode::BAD_REQUEST, "interrupted", e.to_string())
        }
        _ => refuse(StatusCode::REQUEST_TIMEOUT, "too-slow", e.to_string()),
    })? {
        if (bytes.len() + data.len()) as u64 > limit {
            return Err(refuse(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too-large",
                format!("the JSON body is larger than {limit} bytes"),
            ));
        }
        bytes.extend_from_slice(&data);
    }
    serde_json::from_slice(&bytes).map_err(|e| {
        refuse(
            StatusCode::BAD_REQUEST,
            "bad-json",
            format!("the body is not the expected JSON: {e}"),
        )
    })
}

async fn commit(
    shared: &Arc<Shared>,
    scope: &Scope,
    plugin: &str,
    request: Request<Incoming>,
) -> Result<Response<Body>, Refusal> {
    let label = scope.label();
    check_open(shared, plugin, scope)?;
    let manifest: ResultManifest = read_json(shared, request).await?;
    // Commits of one pair take turns (the check, the tree on disk and the record must not
    // interleave); other pairs and every other request go on. The run stays open until the
    // commit is recorded: packaging waits for it.
    let _open = shared.open.read().await;
    let pair = shared.storage.lock_pair(plugin, label).await;
    check_open(shared, plugin, scope)?;
    if shared
        .state
        .lock()
        .unwrap()
        .pair(plugin, scope)
        .and_then(|p| p.committed.as_ref())
        .is_some_and(|c| !c.synthetic && c.outcome == manifest.outcome && same_files(c, &manifest))
    {
        // The retry of a commit that took effect before its answer was lost.
        return Ok(empty(StatusCode::CREATED));
    }
    let worker = shared.clone();
    let (plugin_name, label_name) = (plugin.to_owned(), label.to_owned());
    // The pair's lock comes back with the outcome and is held until the state says so: an
    // upload that checks the pair after it sees the result complete.
    let (committed, manifest, _pair) = tokio::task::spawn_blocking(move || {
        let committed = worker.storage.commit(&plugin_name, &label_name, &manifest);
        (committed, manifest, pair)
    })
    .await
    .map_err(|e| {
        refuse(
            StatusCode::INTERNAL_SERVER_ERROR,
            "storage",
            format!("the commit crashed: {e}; commit again"),
        )
    })?;
    let committed = match committed {
        Ok(committed) => committed,
        Err(CommitError::Unfinished(committed, e)) => {
            // Recorded, so it is the result: a retry is answered as done, and packaging (or the
            // next start) moves it into place first.
            tracing::error!("the result of {plugin} for {label} is recorded but not in place: {e}");
            shared.state.lock().unwrap().apply_commit(
                plugin,
                scope,
                PairStatus::Complete,
                *committed,
            );
            shared.changed.notify_one();
            return Err(refuse(
                StatusCode::INTERNAL_SERVER_ERROR,
                "storage",
                format!(
                    "the result is recorded, but moving it into place failed: {e}; it is kept, and committing again is answered as done"
                ),
            ));
        }
        Err(e @ CommitError::Io(_)) => {
            let status = if e.is_disk_full() {
                StatusCode::INSUFFICIENT_STORAGE
            } else {
                StatusCode::INTERNAL_SERVER_ERROR
            };
            tracing::error!("committing the result of {plugin} for {label}: {e}");
            return Err(refuse(status, "storage", e.to_string()));
        }
        Err(e) => {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                "bad-manifest",
                e.to_string(),
            ));
        }
    };
    shared
        .state
        .lock()
        .unwrap()
        .apply_commit(plugin, scope, PairStatus::Complete, committed);
    let outcome = match manifest.outcome {
        Outcome::Succeeded => "succeeded",
        Outcome::Failed => "failed",
    };
    shared
        .metrics
        .results
        .get_or_create(&super::metrics::OutcomeLabel {
            outcome: outcome.to_owned(),
        })
        .inc();
    shared.changed.notify_one();
    Ok(empty(StatusCode::CREATED))
}

/// Whether a committed result holds exactly the files `manifest` names.
fn same_files(committed: &Committed, manifest: &ResultManifest) -> bool {
    committed.files.len() == manifest.files.len()
        && manifest.files.iter().all(|f| {
            committed
                .files
                .get(&f.name)
                .is_some_and(|(size, sha256)| *size == f.size && *sha256 == f.sha256)
        })
}

async fn progress(
    shared: &Shared,
    scope: &Scope,
    plugin: &str,
    request: Request<Incoming>,
) -> Result<Response<Body>, Refusal> {
    let label = scope.label().to_owned();
    if shared.state.lock().unwrap().pair(plugin, scope).is_none() {
        return Err(refuse(
            StatusCode::FORBIDDEN,
            "unexpected",
            format!("this run expects no plugin {plugin:?} for {label:?}"),
        ));
    }
    let mut update: ProgressUpdate = read_json(shared, request).await?;
    // Every pair's latest update is in each status document: each must stay small.
    update
        .check_caps()
        .map_err(|e| refuse(StatusCode::PAYLOAD_TOO_LARGE, "too-large", e))?;
    // The route, checked against the certificate, says whose progress this is.
    update.plugin = plugin.to_owned();
    update.node = label;
    if update.timestamp.is_empty() {
        update.timestamp = now_rfc3339();
    }
    let mut state = shared.state.lock().unwrap();
    state.mark_running(plugin, scope);
    if let Some(pair) = state.pair_mut(plugin, scope) {
        pair.progress = Some(update);
    }
    Ok(empty(StatusCode::ACCEPTED))
}

/// `POST /api/v1/enroll`: a certificate for the node the credential admits.
async fn enroll(
    shared: &Arc<Shared>,
    request: Request<Incoming>,
) -> Result<Response<Body>, Refusal> {
    use crate::enroll::{ADMISSION_TIMEOUT, MAX_ENROLL_BYTES, RETRY_AFTER_SECONDS, Refusal as Why};
    use crate::nodes::{NodeSet, NodeSetError, note};
    use factbuoy_pki::SigningRequest;
    use factbuoy_protocol::types::{EnrollRequest, EnrollResponse};

    let Some(enrollment) = &shared.enrollment else {
        return Err(refuse(
            StatusCode::NOT_FOUND,
            "no-enrollment",
            "this run enrolls no agents: use a certificate issued with `factbuoy aggregator issue`",
        ));
    };
    let refused = |status: StatusCode, reason: &'static str, message: String| {
        tracing::warn!(%status, "enrollment refused: {message}");
        refuse(status, reason, message)
    };
    let body: EnrollRequest = read_json_within(shared, request, MAX_ENROLL_BYTES).await?;
    let csr = SigningRequest::parse(&body.csr)
        .map_err(|e| refused(StatusCode::BAD_REQUEST, "bad-csr", e.to_string()))?;
    let unavailable = |message: String| {
        shared.metrics.reject("enroll-unavailable");
        tracing::warn!("enrollment deferred: {message}");
        Response::builder()
            .status(StatusCode::SERVICE_UNAVAILABLE)
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::RETRY_AFTER, RETRY_AFTER_SECONDS)
            .body(full(
                serde_json::to_vec(&ErrorBody { error: message }).expect("serialising an error"),
            ))
            .expect("a valid response")
    };
    let Ok(_permit) = enrollment.in_flight.try_acquire() else {
        return Ok(unavailable(format!(
            "{} enrollments are being admitted already; retry after {RETRY_AFTER_SECONDS}s",
            crate::enroll::MAX_ADMISSIONS_IN_FLIGHT
        )));
    };
    let admitted = tokio::time::timeout(
        ADMISSION_TIMEOUT,
        enrollment.admission.admit(&body.credential),
    )
    .await;
    let node = match admitted {
        Err(_) => {
            return Ok(unavailable(format!(
                "the admission did not decide within {}s; retry",
                ADMISSION_TIMEOUT.as_secs()
            )));
        }
        Ok(Err(Why::Unavailable(why))) => {
            return Ok(unavailable(format!(
                "the admission cannot decide now: {}; retry",
                note(&why)
            )));
        }
        Ok(Err(Why::Refused(why))) => {
            return Err(refused(
                StatusCode::FORBIDDEN,
                "enroll-refused",
                format!("the credential was refused: {}", note(&why)),
            ));
        }
        Ok(Ok(node)) => node,
    };
    let nodes = NodeSet {
        shared: shared.clone(),
    };
    nodes.expect(&node).await.map_err(|e| match e {
        NodeSetError::NotInRun(_) | NodeSetError::Final(_) => {
            refused(StatusCode::FORBIDDEN, "enroll-node", e.to_string())
        }
        NodeSetError::Ended(_) => refused(StatusCode::CONFLICT, "closed", e.to_string()),
        NodeSetError::Io(_) | NodeSetError::StandIn(_) => refused(
            StatusCode::INTERNAL_SERVER_ERROR,
            "storage",
            format!("{e}; retry"),
        ),
    })?;
    let role = Role::Agent { node: node.clone() };
    let certificate = enrollment.ca.sign_request(&csr, &role).map_err(|e| {
        refused(
            StatusCode::INTERNAL_SERVER_ERROR,
            "sign",
            format!("signing the certificate: {e}"),
        )
    })?;
    tracing::info!(%node, "enrolled an agent");
    Ok(json_response(
        StatusCode::OK,
        &EnrollResponse {
            node,
            certificate,
            ca: enrollment.ca.cert_pem().to_owned(),
        },
    ))
}

/// A node's agent runs the per-node plugins (none for a node the run does not expect); the
/// global runner runs the global ones.
fn plan(shared: &Shared, scope: &Scope) -> Plan {
    let wanted = match scope {
        Scope::Node(node) => shared
            .state
            .lock()
            .unwrap()
            .plans_for(node)
            .then_some(PlanScope::PerNode),
        Scope::Global => Some(PlanScope::Global),
    };
    Plan {
        run_id: shared.config.run_id.clone(),
        plugins: shared
            .config
            .plugins
            .iter()
            .filter(|p| Some(p.scope) == wanted)
            .map(|p| PlannedPlugin {
                name: p.name.clone(),
                sha256: p.sha256.clone(),
                params: p.params.clone(),
                grants: p.grants.clone(),
                denies: p.denies.clone(),
                deadline_seconds: p.deadline_seconds,
            })
            .collect(),
        heartbeat_seconds: shared.config.heartbeat_seconds,
    }
}

async fn component(shared: &Shared, sha256: &str) -> Result<Response<Body>, Refusal> {
    let not_found = || {
        refuse(
            StatusCode::NOT_FOUND,
            "not-found",
            format!("no plugin component {sha256} in this run"),
        )
    };
    let storage =
        |e: std::io::Error| refuse(StatusCode::INTERNAL_SERVER_ERROR, "storage", e.to_string());
    let (length, body) = match shared.component(sha256).ok_or_else(not_found)? {
        ComponentSource::Bundled(wasm) => (wasm.len() as u64, full(Bytes::from_static(wasm))),
        ComponentSource::Stored(path) => {
            let file = match tokio::fs::File::open(&path).await {
                Ok(file) => file,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(not_found()),
                Err(e) => return Err(storage(e)),
            };
            let length = file.metadata().await.map_err(storage)?.len();
            let stream = tokio_util::io::ReaderStream::with_capacity(file, 256 << 10);
            let body = StreamBody::new(futures_util::StreamExt::map(stream, |chunk| {
                chunk.map(Frame::data)
            }))
            .boxed();
            (length, body)
        }
    };
    Ok(Response::builder()
        .header(header::CONTENT_TYPE, "application/wasm")
        .header(header::CONTENT_LENGTH, length)
        .body(body)
        .expect("a valid response"))
}

/// Serves the finished bundle, from an offset when the client asks for a range.
async fn bundle(shared: &Shared, request: &Request<Incoming>) -> Result<Response<Body>, Refusal> {
    let (status, tar_info) = {
        let state = shared.state.lock().unwrap();
        (state.status, state.tar_info.clone())
    };
    // A bundle exists once the run ended complete, or failed after packaging (interrupted).
    let Some(tar_info) = tar_info else {
        let spelled = serde_json::to_value(status).unwrap_or_default();
        return Err(refuse(
            StatusCode::CONFLICT,
            "not-ready",
            format!(
                "the bundle is not ready: the run is {}",
                spelled.as_str().unwrap_or_default()
            ),
        ));
    };
    let path = shared.config.bundle_dir.join(&tar_info.name);
    let mut file = tokio::fs::File::open(&path).await.map_err(|e| {
        refuse(
            StatusCode::INTERNAL_SERVER_ERROR,
            "storage",
            format!("opening the bundle: {e}"),
        )
    })?;
    let size = tar_info.size;
    let range = request
        .headers()
        .get(header::RANGE)
        .map(|v| v.to_str().unwrap_or_default());
    let (start, end, partial) = match range.map(|text| byte_range(text, size)) {
        None | Some(RangeAnswer::Whole) => (0, size, false),
        Some(RangeAnswer::Part(start, last)) => (start, last + 1, true),
        Some(RangeAnswer::Refused(why)) => {
            shared.metrics.reject("range");
            return Ok(Response::builder()
                .status(StatusCode::RANGE_NOT_SATISFIABLE)
                .header(header::CONTENT_TYPE, "application/json")
                .header(header::CONTENT_RANGE, format!("bytes */{size}"))
                .body(full(
                    serde_json::to_vec(&ErrorBody {
                        error: format!(
                            "{why}: the bundle has {size} bytes; ask for one range such as `bytes=N-`, `bytes=N-M` or `bytes=-N`"
                        ),
                    })
                    .expect("serialising an error"),
                ))
                .expect("a valid response"));
        }
    };
    file.seek(std::io::SeekFrom::Start(start))
        .await
        .map_err(|e| refuse(StatusCode::INTERNAL_SERVER_ERROR, "storage", e.to_string()))?;
    let stream = tokio_util::io::ReaderStream::with_capacity(file.take(end - start), 256 << 10);
    let body = StreamBody::new(futures_util::StreamExt::map(stream, |chunk| {
        chunk.map(Frame::data)
    }))
    .boxed();
    let mut response = Response::builder()
        .header(header::CONTENT_TYPE, "application/gzip")
        .header(header::CONTENT_LENGTH, end - start)
        .header(header::ACCEPT_RANGES, "bytes")
        .header(
            "content-digest",
            digest::header_value(&tar_info.sha256).unwrap_or_default(),
        );
    if partial {
        response = response.status(StatusCode::PARTIAL_CONTENT).header(
            header::CONTENT_RANGE,
            format!("bytes {start}-{}/{size}", end - 1),
        );
    }
    Ok(response.body(body).expect("a valid response"))
}

/// How a `Range` header is answered (RFC 9110, section 14).
#[derive(Debug, PartialEq, Eq)]
enum RangeAnswer {
    /// Serve the whole bundle with 200: a unit other than `bytes`, which must be ignored, or
    /// several ranges, which a server may ignore (no multipart answers are made).
    Whole,
    /// Serve bytes `start..=last` with 206.
    Part(u64, u64),
    /// Answer 416: unsatisfiable, or malformed (which a server may refuse); holds why.
    Refused(String),
}

fn byte_range(text: &str, size: u64) -> RangeAnswer {
    use http_range_header::{RangeInvalid, RangeUnsatisfiableError};
    let ranges =
        http_range_header::parse_range_header(text).and_then(|parsed| parsed.validate(size));
    match ranges.as_deref() {
        Ok([one]) => RangeAnswer::Part(*one.start(), *one.end()),
        Ok(_) => RangeAnswer::Whole,
        Err(RangeUnsatisfiableError::Invalid(RangeInvalid::DoesNotStartWithToken)) => {
            RangeAnswer::Whole
        }
        Err(e) => RangeAnswer::Refused(format!("{e} ({text:?})")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use factbuoy_protocol::names::NodeName;

    #[test]
    fn agents_speak_only_for_their_node_and_operators_only_read() {
        let node = |n: &str| NodeName::parse(n).unwrap();
        let agent = Role::Agent { node: node("a") };
        let operator = Role::Operator { name: "cli".into() };
        let global = Role::Global { name: "g".into() };
        let commit = |scope| Route::ResultCommit {
            scope,
            plugin: "p".into(),
        };
        assert!(authorize(&agent, &commit(Scope::Node(node("a")))).is_ok());
        assert!(authorize(&agent, &commit(Scope::Node(node("b")))).is_err());
        assert!(authorize(&agent, &commit(Scope::Global)).is_err());
        assert!(authorize(&global, &commit(Scope::Global)).is_ok());
        assert!(authorize(&agent, &Route::Status).is_err());
        assert!(authorize(&agent, &Route::Bundle).is_err());
        assert!(authorize(&operator, &Route::Status).is_ok());
        assert!(authorize(&operator, &commit(Scope::Node(node("a")))).is_err());
        assert!(authorize(&operator, &Route::Heartbeat { node: node("a") }).is_err());
        assert!(authorize(&agent, &Route::Heartbeat { node: node("b") }).is_err());
        let plan = |scope| Route::Plan { scope };
        assert!(authorize(&agent, &plan(Scope::Node(node("a")))).is_ok());
        assert!(authorize(&agent, &plan(Scope::Node(node("b")))).is_err());
        assert!(authorize(&agent, &plan(Scope::Global)).is_err());
        assert!(authorize(&global, &plan(Scope::Global)).is_ok());
        assert!(authorize(&global, &plan(Scope::Node(node("a")))).is_err());
        assert!(authorize(&operator, &plan(Scope::Global)).is_err());
    }

    #[test]
    fn ranges_follow_rfc_9110() {
        use RangeAnswer::*;
        assert_eq!(byte_range("bytes=100-", 1000), Part(100, 999));
        assert_eq!(byte_range("bytes=0-0", 1000), Part(0, 0));
        assert_eq!(byte_range("bytes=5-9", 1000), Part(5, 9));
        assert_eq!(byte_range("bytes=990-5000", 1000), Part(990, 999));
        assert_eq!(byte_range("bytes=-5", 1000), Part(995, 999));
        assert_eq!(byte_range("bytes=-5000", 1000), Part(0, 999));
        assert_eq!(byte_range("items=1-", 1000), Whole);
        assert_eq!(byte_range("bytes=0-1,5-6", 1000), Whole);
        assert_eq!(byte_range("bytes=0-5,3-8", 1000), Whole);
        for refused in ["bytes=10-5", "bytes=1000-", "bytes=-0", "bytes=x-"] {
            assert!(matches!(byte_range(refused, 1000), Refused(_)), "{refused}");
        }
    }
}
