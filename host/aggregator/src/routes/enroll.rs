//! `POST /api/v1/enroll`: an agent without a certificate presents a credential and a signing
//! request, and gets a certificate for the node the run's admission says the credential admits
//! (the crate's `enroll` holds the port and its bounds).

use std::sync::Arc;
use std::time::{Duration, Instant};

use factbuoy_pki::SigningRequest;
use factbuoy_protocol::identity::Role;
use factbuoy_protocol::types::{EnrollRequest, EnrollResponse, ErrorBody};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode, header};

use super::http::{Rejection, full, json_response, read_json_within, reject};
use crate::enroll::{
    ADMISSION_QUEUE_WAIT, ADMISSION_TIMEOUT, MAX_ADMISSIONS_IN_FLIGHT, MAX_ENROLL_BYTES,
    NotAdmitted, RETRY_AFTER_SECONDS,
};
use crate::live::node_set::{NodeSet, NodeSetError};
use crate::live::shared::Shared;
use crate::model::nodes::note;
use crate::serving::Body;

/// An enrollment that takes this long is logged as a warning, with where its time went.
const SLOW_ENROLLMENT: Duration = Duration::from_secs(1);

/// `POST /api/v1/enroll`: a certificate for the node the credential admits.
pub(crate) async fn enroll(
    shared: &Arc<Shared>,
    request: Request<Incoming>,
) -> Result<Response<Body>, Rejection> {
    let Some(enrollment) = &shared.enrollment else {
        return Err(reject(
            StatusCode::NOT_FOUND,
            "no-enrollment",
            "this run enrolls no agents: use a certificate issued with `factbuoy aggregator issue`",
        ));
    };
    let arrived = Instant::now();
    let refused = |status: StatusCode, reason: &'static str, message: String| {
        tracing::warn!(%status, "enrollment refused: {message}");
        reject(status, reason, message)
    };
    let body: EnrollRequest =
        read_json_within(&shared.config.limits, request, MAX_ENROLL_BYTES).await?;
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
    // A semaphore's waiters are served in order of arrival.
    let Ok(Ok(_permit)) =
        tokio::time::timeout(ADMISSION_QUEUE_WAIT, enrollment.in_flight.acquire()).await
    else {
        return Ok(unavailable(format!(
            "{MAX_ADMISSIONS_IN_FLIGHT} enrollments were being admitted for the {}s this one \
             waited; retry after {RETRY_AFTER_SECONDS}s",
            ADMISSION_QUEUE_WAIT.as_secs()
        )));
    };
    let waited = arrived.elapsed();
    let admitted = tokio::time::timeout(
        ADMISSION_TIMEOUT,
        enrollment.admission.admit(&body.credential),
    )
    .await;
    let admission = arrived.elapsed() - waited;
    let node = match admitted {
        Err(_) => {
            return Ok(unavailable(format!(
                "the admission did not decide within {}s; retry",
                ADMISSION_TIMEOUT.as_secs()
            )));
        }
        Ok(Err(NotAdmitted::Unavailable(why))) => {
            return Ok(unavailable(format!(
                "the admission cannot decide now: {}; retry",
                note(&why)
            )));
        }
        Ok(Err(NotAdmitted::Refused(why))) => {
            return Err(refused(
                StatusCode::FORBIDDEN,
                "enroll-refused",
                format!("the credential was refused: {}", note(&why)),
            ));
        }
        Ok(Ok(node)) => node,
    };
    let nodes = NodeSet::new(shared.clone());
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
    // Where an enrollment's time went: the wait for a turn and the admission (a TokenReview,
    // in Kubernetes). A slow one is a warning: agents start late when the admission's backend
    // is slow or the turns are too few.
    let (waited_ms, admission_ms, total_ms) = (
        waited.as_millis() as u64,
        admission.as_millis() as u64,
        arrived.elapsed().as_millis() as u64,
    );
    if total_ms >= SLOW_ENROLLMENT.as_millis() as u64 {
        tracing::warn!(
            %node, waited_ms, admission_ms, total_ms,
            "enrolling an agent took over {} s", SLOW_ENROLLMENT.as_secs()
        );
    } else {
        tracing::info!(%node, waited_ms, admission_ms, total_ms, "enrolled an agent");
    }
    Ok(json_response(
        StatusCode::OK,
        &EnrollResponse {
            node,
            certificate,
            ca: enrollment.ca.cert_pem().to_owned(),
        },
    ))
}
