//! Requests of a run's two listeners: routing, authorization by certificate role, and which
//! route answers each.
//!
//! Status codes: 400 malformed request or names, 403 a certificate that may not do this, a node
//! whose admission was withdrawn (a revoked fleet node) or an unexpected (plugin, node), 404
//! unknown path, 405 wrong method, 408 a stalled or too slow upload, 409 a true duplicate or a
//! finished run, 413 too large, 416 an unsatisfiable range.
//! Every error body is `{"error": "..."}` with a sentence a person can act on.

use std::convert::Infallible;
use std::sync::Arc;

use factbuoy_protocol::identity::Role;
use factbuoy_protocol::routes::{Route, RouteError, Scope};
use factbuoy_protocol::types::{AgentPlan, ErrorBody, PlannedPlugin};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};

use super::http::{Rejection, empty, json_response, metrics_response, reject};
use super::{downloads, enroll, pairs};
use crate::live::shared::Shared;
use crate::model::config::PlanScope;
use crate::serving::Body;

/// Which listener a request arrived on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Listener {
    /// Serves everything under `/api/v1/`.
    Agent,
    /// Serves `/status`, `/metrics` and `/bundle`.
    Operator,
}

/// Answers one request that arrived on `listener` from a client whose certificate carries
/// `role` (`None`: no factbuoy role). Never fails: a rejection is a JSON error response.
pub(crate) async fn handle(
    shared: Arc<Shared>,
    listener: Listener,
    role: Option<Role>,
    request: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let response = match respond(&shared, listener, role, request).await {
        Ok(response) => response,
        Err(rejection) => {
            shared.metrics.reject(rejection.reason);
            tracing::debug!(status = %rejection.status, "{}", rejection.message);
            json_response(
                rejection.status,
                &ErrorBody {
                    error: rejection.message,
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
) -> Result<Response<Body>, Rejection> {
    let route = Route::parse(request.uri().path()).map_err(|e| match e {
        RouteError::NotFound(_) => reject(StatusCode::NOT_FOUND, "not-found", e.to_string()),
        other => reject(StatusCode::BAD_REQUEST, "bad-name", other.to_string()),
    })?;
    if route == Route::Enroll && listener == Listener::Agent {
        // The one route open to clients without a certificate.
        if request.method() != Method::POST {
            return Err(reject(
                StatusCode::METHOD_NOT_ALLOWED,
                "method",
                format!("use POST for {}", route.path()),
            ));
        }
        return enroll::enroll(shared, request).await;
    }
    let role = role.ok_or_else(|| {
        reject(
            StatusCode::FORBIDDEN,
            "no-role",
            "no client certificate, or one that carries no factbuoy role: only enrollment is open without one",
        )
    })?;
    authorize(&role, &route)?;
    if let (Some(enrollment), Role::Agent { node }) = (&shared.enrollment, &role)
        && let Some(why) = enrollment.admission.withdrawn(node)
    {
        return Err(reject(StatusCode::FORBIDDEN, "withdrawn", why));
    }
    let serves = match route {
        Route::Status | Route::Bundle | Route::Metrics => Listener::Operator,
        _ => Listener::Agent,
    };
    if serves != listener {
        return Err(reject(
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
            Err(reject(
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
            pairs::receive_file(shared, scope, plugin, name, request).await
        }
        Route::ResultCommit { scope, plugin } => {
            expect(Method::PUT)?;
            pairs::commit(shared, scope, plugin, request).await
        }
        Route::Progress { scope, plugin } => {
            expect(Method::POST)?;
            pairs::progress(shared, scope, plugin, request).await
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
            downloads::component(shared, sha256).await
        }
        Route::Status => {
            expect(Method::GET)?;
            Ok(json_response(StatusCode::OK, &shared.status_document()))
        }
        Route::Metrics => {
            expect(Method::GET)?;
            shared.update_node_gauges();
            Ok(metrics_response(shared.metrics.encode()))
        }
        Route::Bundle => {
            expect(Method::GET)?;
            downloads::bundle(shared, &request).await
        }
        // Answered above on the agent listener.
        Route::Enroll => Err(reject(
            StatusCode::NOT_FOUND,
            "wrong-listener",
            "enrollment is served on the agent listener",
        )),
    }
}

/// Whether `role` may use `route`: a node's agent speaks only for its node, operators only read.
fn authorize(role: &Role, route: &Route) -> Result<(), Rejection> {
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
        Err(reject(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!("the {role} may not use {}", route.path()),
        ))
    }
}

/// A node's agent runs the per-node plugins (none for a node the run does not expect); the
/// global runner runs the global ones.
fn plan(shared: &Shared, scope: &Scope) -> AgentPlan {
    let wanted = match scope {
        Scope::Node(node) => shared
            .state
            .lock()
            .unwrap()
            .plans_for(node)
            .then_some(PlanScope::PerNode),
        Scope::Global => Some(PlanScope::Global),
    };
    AgentPlan {
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
}
