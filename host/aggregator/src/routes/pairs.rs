//! What an agent sends for a (plugin, node) pair: each file of its result (streamed to the
//! staging area), the manifest that commits them, and its progress.

use std::sync::Arc;
use std::time::Instant;

use factbuoy_protocol::digest;
use factbuoy_protocol::names::ArtifactName;
use factbuoy_protocol::routes::Scope;
use factbuoy_protocol::types::{Outcome, PairStatus, ProgressUpdate, ResultManifest, now_rfc3339};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode, header};

use super::http::{Rejection, empty, json_response, read_json, reject, upload_rejection};
use crate::commit::CommitError;
use crate::live::shared::Shared;
use crate::metrics::OutcomeLabel;
use crate::model::pair::Committed;
use crate::model::state::CommitCheck;
use crate::serving::Body;

/// The pair a result or progress is for must be one this run expects, and still open.
pub(crate) fn check_open(shared: &Shared, plugin: &str, scope: &Scope) -> Result<(), Rejection> {
    let label = scope.label();
    match shared.state.lock().unwrap().check_commit(plugin, scope) {
        CommitCheck::Open => Ok(()),
        CommitCheck::Duplicate => Err(reject(
            StatusCode::CONFLICT,
            "duplicate",
            format!("a complete result of {plugin} for {label} is already stored; nothing to do"),
        )),
        CommitCheck::Closed => Err(reject(
            StatusCode::CONFLICT,
            "closed",
            "the run has ended; no more results are accepted",
        )),
        CommitCheck::NodeClosed(why) => Err(reject(StatusCode::CONFLICT, "node-closed", why)),
        CommitCheck::Unexpected => Err(reject(
            StatusCode::FORBIDDEN,
            "unexpected",
            format!("this run expects no result of plugin {plugin:?} for {label:?}"),
        )),
    }
}

/// `PUT` of one file of a result.
pub(crate) async fn receive_file(
    shared: &Shared,
    scope: &Scope,
    plugin: &str,
    name: &ArtifactName,
    request: Request<Incoming>,
) -> Result<Response<Body>, Rejection> {
    let label = scope.label();
    check_open(shared, plugin, scope)?;
    let limits = &shared.config.limits;
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limits.max_file_bytes) {
        return Err(reject(
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
            reject(
                StatusCode::BAD_REQUEST,
                "no-digest",
                "send the file's sha-256 as `Content-Digest: sha-256=:<base64>:`",
            )
        })?;
    let started = Instant::now();
    let received = shared
        .results
        .staging()
        .receive_file(plugin, label, name, &expected, request.into_body(), limits)
        .await;
    let size = received.map_err(upload_rejection)?;
    // The result may have been completed while the body streamed in. Commits hold the pair's
    // lock from their check until the state records them, so the pair is either still open (a
    // later commit takes or clears this file), or complete without it (then it is deleted and
    // the answer is 409).
    let _pair = shared.results.staging().lock_pair(plugin, label).await;
    if let Err(rejection) = check_open(shared, plugin, scope) {
        shared
            .results
            .staging()
            .discard(plugin, label, name, size, &expected)
            .map_err(|e| {
                reject(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "storage",
                    format!("deleting an upload that came too late: {e}"),
                )
            })?;
        return Err(rejection);
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

/// `PUT` of a result's manifest: its commit.
pub(crate) async fn commit(
    shared: &Arc<Shared>,
    scope: &Scope,
    plugin: &str,
    request: Request<Incoming>,
) -> Result<Response<Body>, Rejection> {
    let label = scope.label();
    check_open(shared, plugin, scope)?;
    let manifest: ResultManifest = read_json(&shared.config.limits, request).await?;
    // Commits of one pair take turns (the check, the tree on disk and the record must not
    // interleave); other pairs and every other request go on. The run stays open until the
    // commit is recorded: packaging waits for it.
    let _open = shared.open.read().await;
    let pair = shared.results.staging().lock_pair(plugin, label).await;
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
        let committed = worker.results.commit(&plugin_name, &label_name, &manifest);
        (committed, manifest, pair)
    })
    .await
    .map_err(|e| {
        reject(
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
            return Err(reject(
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
            return Err(reject(status, "storage", e.to_string()));
        }
        Err(e) => {
            return Err(reject(
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
        .get_or_create(&OutcomeLabel {
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

/// `POST` of a progress update.
pub(crate) async fn progress(
    shared: &Shared,
    scope: &Scope,
    plugin: &str,
    request: Request<Incoming>,
) -> Result<Response<Body>, Rejection> {
    let label = scope.label().to_owned();
    if shared.state.lock().unwrap().pair(plugin, scope).is_none() {
        return Err(reject(
            StatusCode::FORBIDDEN,
            "unexpected",
            format!("this run expects no plugin {plugin:?} for {label:?}"),
        ));
    }
    let mut update: ProgressUpdate = read_json(&shared.config.limits, request).await?;
    // Every pair's latest update is in each status document: each must stay small.
    update
        .check_caps()
        .map_err(|e| reject(StatusCode::PAYLOAD_TOO_LARGE, "too-large", e))?;
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
