//! Enrollment: an agent that holds no certificate generates its key where it runs and asks for
//! a certificate for its node, presenting a credential. Who the credential admits is decided
//! by an [`Admission`] the serving binary supplies (a Kubernetes TokenReview, say; this crate
//! knows nothing of Kubernetes). The certificate names the **admitted** node, whatever the
//! request asks for: only the request's public key is used, once its self-signature is checked.
//!
//! Every enrollment is bounded: its body ([`MAX_ENROLL_BYTES`]), the admissions in flight at
//! once ([`MAX_ADMISSIONS_IN_FLIGHT`]; more wait their turn, first come first served, for up to
//! [`ADMISSION_QUEUE_WAIT`], then are answered 503 with `Retry-After`), and each admission's
//! time ([`ADMISSION_TIMEOUT`], then 503). Credentials are never logged. The route
//! that answers enrollments is the crate's `routes::enroll`. An admission may be withdrawn
//! while the run serves ([`Admission::withdrawn`]): every request of the node's agent is then
//! refused.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use factbuoy_pki::RunCa;
use factbuoy_protocol::names::NodeName;
use tokio::sync::Semaphore;

/// Largest enrollment request body.
pub const MAX_ENROLL_BYTES: u64 = 16 << 10;
/// Admissions running at once; more wait their turn. Kubernetes' admission is a TokenReview
/// (and a read of the agent's pod, if its pod watch has not seen it): the API server answers
/// TokenReviews no faster with more than this many in flight, only later
/// (bench/kube-scale.sh measures its rate by reviews in flight; docs/kubernetes.md has the
/// figures: thousands a second, far more than a DaemonSet starts pods), and more would take
/// its in-flight allowance (200 writes by default) from the controllers that create the
/// agents' pods.
pub const MAX_ADMISSIONS_IN_FLIGHT: usize = 16;
/// Longest an enrollment waits for its turn before it is answered 503 (and retries). Waiting
/// in line instead of retrying keeps the order of arrival: no agent is passed over again and
/// again by newcomers.
pub const ADMISSION_QUEUE_WAIT: Duration = Duration::from_secs(5);
/// Longest an admission may take before the agent is answered 503 (and retries).
pub const ADMISSION_TIMEOUT: Duration = Duration::from_secs(10);
/// Seconds an agent is asked to wait before it retries after a 503.
pub const RETRY_AFTER_SECONDS: u64 = 1;

/// Why an admission admitted no node.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotAdmitted {
    /// The credential admits no node (answered 403 with the message, escaped and bounded): it
    /// should say what is wrong and what to do.
    #[error("{0}")]
    Refused(String),
    /// The admission cannot decide now (its backend is down, say): answered 503, and the agent
    /// retries.
    #[error("{0}")]
    Unavailable(String),
}

/// The future an admission returns.
pub type Admitting<'a> = Pin<Box<dyn Future<Output = Result<NodeName, NotAdmitted>> + Send + 'a>>;

/// Decides which node, if any, a credential speaks for.
pub trait Admission: Send + Sync {
    /// The node `credential` admits. Never log the credential.
    fn admit<'a>(&'a self, credential: &'a str) -> Admitting<'a>;

    /// Why `node`, admitted before, is no longer (a fleet's revocation, say), if it is not:
    /// asked at every request its agent makes, which is then refused (403) with this message.
    /// Quick: no I/O beyond a look at a file. By default an admission is never withdrawn.
    fn withdrawn(&self, node: &NodeName) -> Option<String> {
        let _ = node;
        None
    }
}

/// What the agent listener needs to enroll agents.
pub(crate) struct Enrollment {
    pub(crate) admission: Arc<dyn Admission>,
    pub(crate) in_flight: Semaphore,
    pub(crate) ca: RunCa,
}

impl Enrollment {
    pub(crate) fn new(admission: Arc<dyn Admission>, ca: RunCa) -> Self {
        Enrollment {
            admission,
            in_flight: Semaphore::new(MAX_ADMISSIONS_IN_FLIGHT),
            ca,
        }
    }
}
