//! A client for both sides of the aggregator: agents (plan, components, uploads, progress,
//! heartbeats) and operators (status, metrics, bundle download with resume).
//!
//! Each request opens its own mutually authenticated TLS connection: simple, and what an agent
//! retrying across an aggregator restart needs anyway.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper::client::conn::http1::SendRequest;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_util::io::ReaderStream;

use crate::digest;
use crate::fleet::{
    DEFAULT_IDLE_SECONDS, Enrollment, FleetRoute, FleetRunRequest, FleetRunStarted, IDLE_ACK,
    IDLE_SECONDS_HEADER, JoinRequest, MAX_IDLE_SECONDS, PARKED_POLL, RenewRequest, RunOffer, Wake,
};
use crate::names::NodeName;
use crate::routes::{Route, Scope};
use crate::tls::{Identity, TlsError, anonymous_client_config, client_config};
use crate::types::{
    AgentPlan, EnrollRequest, EnrollResponse, ErrorBody, ProgressUpdate, ResultManifest,
    StatusDocument,
};

/// Default time allowed for one request, connection included (uploads get longer per byte).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// Largest JSON response read into memory.
const MAX_JSON_RESPONSE: usize = 64 << 20;
/// Sent with every request: a fleet aggregator lists each node's agent version from it.
pub const USER_AGENT: &str = concat!("factbuoy/", env!("CARGO_PKG_VERSION"));

type Body = BoxBody<Bytes, std::io::Error>;

/// Why a request to the aggregator failed; [`ClientError::is_retryable`] says whether to try again.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The TCP connection could not be opened.
    #[error("connecting to {address}: {error}")]
    Connect {
        /// The `HOST:PORT` dialled.
        address: String,
        /// What the connect call returned.
        error: std::io::Error,
    },
    /// The TLS handshake failed: an untrusted server, or our certificate refused.
    #[error("TLS with {address}: {error}")]
    Handshake {
        /// The `HOST:PORT` dialled.
        address: String,
        /// What the handshake returned.
        error: std::io::Error,
    },
    /// The HTTP exchange broke off.
    #[error("HTTP: {0}")]
    Http(#[from] hyper::Error),
    /// The aggregator answered with a status other than 2xx.
    #[error("{method} {path}: {status}: {message}")]
    Status {
        /// The request's method.
        method: Method,
        /// The request's path.
        path: String,
        /// The status answered.
        status: StatusCode,
        /// The [`ErrorBody`]'s `error`, or the raw body when it is not one.
        message: String,
    },
    /// A parked long poll's stream broke before its wake line: the fleet stopped, or the
    /// network dropped the connection (docs/protocol.md, "Parked polls").
    #[error("the parked poll's connection broke: {0}")]
    Parked(std::io::Error),
    /// No answer within the request's time allowance.
    #[error("request timed out after {0:?}")]
    Timeout(Duration),
    /// A request could not be built, or an answer was not what was expected (bad JSON, too
    /// large, a component whose digest differs from the one asked for).
    #[error("unexpected response: {0}")]
    Decode(String),
    /// A local file (an upload's source, the bundle's destination) could not be read or written.
    #[error("reading or writing a local file: {0}")]
    Io(#[from] std::io::Error),
    /// The identity could not be turned into a TLS configuration.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// The aggregator address is not `HOST:PORT` with a valid host.
    #[error("invalid aggregator address {0:?}; expected HOST:PORT")]
    Address(String),
}

impl ClientError {
    /// Whether trying again later may succeed: transport failures, timeouts, 5xx and 429.
    pub fn is_retryable(&self) -> bool {
        match self {
            ClientError::Connect { .. }
            | ClientError::Handshake { .. }
            | ClientError::Http(_)
            | ClientError::Parked(_)
            | ClientError::Timeout(_) => true,
            ClientError::Status { status, .. } => {
                status.is_server_error() || *status == StatusCode::TOO_MANY_REQUESTS
            }
            _ => false,
        }
    }

    /// The HTTP status, for errors that came with one.
    pub fn status(&self) -> Option<StatusCode> {
        match self {
            ClientError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// A byte stream a request travels over: a TCP connection, or anything that carries bytes to
/// the listener (a Kubernetes port-forward, say).
pub trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

/// The future a [`Dial`] returns.
pub type Dialing<'a> = Pin<Box<dyn Future<Output = std::io::Result<Box<dyn Stream>>> + Send + 'a>>;

/// Opens the stream each request is sent over, in place of a TCP connection to the address
/// (TLS still runs inside it, against the server name).
pub trait Dial: Send + Sync {
    /// A new stream to the listener at `address` (the `HOST:PORT` the client was made with).
    fn dial<'a>(&'a self, address: &'a str) -> Dialing<'a>;
}

/// A client of one aggregator listener, with one identity (or none, to enroll).
#[derive(Clone)]
pub struct Client {
    address: String,
    server_name: ServerName<'static>,
    connector: TlsConnector,
    timeout: Duration,
    dialer: Option<Arc<dyn Dial>>,
    /// With [`Client::keep_alive`]: the connection kept between requests.
    kept: Option<Arc<tokio::sync::Mutex<Option<SendRequest<Body>>>>>,
}

impl Client {
    /// `address` is `HOST:PORT`; the host must be a name or address in the server certificate,
    /// unless [`Client::with_server_name`] names another.
    pub fn new(address: &str, identity: &Identity) -> Result<Self, ClientError> {
        Client::with_config(address, client_config(identity)?)
    }

    /// A client that presents no certificate and trusts only `ca_pem`: it can only enroll
    /// ([`Client::enroll`]); the aggregator refuses it everything else.
    pub fn anonymous(address: &str, ca_pem: &str) -> Result<Self, ClientError> {
        Client::with_config(address, anonymous_client_config(ca_pem)?)
    }

    /// A client that presents no certificate and trusts a server whose chain carries the CA
    /// pinned by `pin` (`sha256:...`, see [`crate::tls::ca_pin`]): to join a fleet
    /// ([`Client::join`]) before the agent holds any certificate.
    pub fn pinned(address: &str, pin: &str) -> Result<Self, ClientError> {
        Client::with_config(address, crate::tls::pinned_client_config(pin))
    }

    fn with_config(address: &str, config: Arc<rustls::ClientConfig>) -> Result<Self, ClientError> {
        let host = address
            .rsplit_once(':')
            .map(|(host, _)| host.trim_start_matches('[').trim_end_matches(']'))
            .ok_or_else(|| ClientError::Address(address.to_owned()))?;
        let server_name = ServerName::try_from(host.to_owned())
            .map_err(|_| ClientError::Address(address.to_owned()))?;
        Ok(Client {
            address: address.to_owned(),
            server_name,
            connector: TlsConnector::from(config),
            timeout: DEFAULT_TIMEOUT,
            dialer: None,
            kept: None,
        })
    }

    /// Verifies the server's certificate against `name` instead of the dialled host: in a pod,
    /// the agent dials the Service's address from its environment but the aggregator's
    /// certificate names a fixed DNS name.
    pub fn with_server_name(mut self, name: &str) -> Result<Self, ClientError> {
        self.server_name = ServerName::try_from(name.to_owned())
            .map_err(|_| ClientError::Address(name.to_owned()))?;
        Ok(self)
    }

    /// Opens each request's stream with `dialer` instead of a TCP connection to the address.
    pub fn with_dialer(mut self, dialer: Arc<dyn Dial>) -> Self {
        self.dialer = Some(dialer);
        self
    }

    /// Sets the time allowed for one request, connection included (default
    /// [`DEFAULT_TIMEOUT`]); uploads get a second more per 10 MB, bundle downloads a day.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The `HOST:PORT` this client dials.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Keeps one connection open between requests (HTTP/1.1 keep-alive) instead of opening
    /// one per request: for a client that polls, which then shakes hands once, not at every
    /// poll. Requests through it (and its clones) take turns on that connection.
    pub fn keep_alive(mut self) -> Self {
        self.kept = Some(Arc::default());
        self
    }

    async fn send(&self, request: Request<Body>) -> Result<Response<Incoming>, ClientError> {
        let Some(kept) = &self.kept else {
            let mut sender = self.connect().await?;
            return Ok(sender.send_request(request).await?);
        };
        let mut slot = kept.lock().await;
        let reusable = match slot.as_mut() {
            Some(sender) => !sender.is_closed() && sender.ready().await.is_ok(),
            None => false,
        };
        if !reusable {
            *slot = Some(self.connect().await?);
        }
        let sender = slot.as_mut().expect("a connection was just made");
        let response = sender.send_request(request).await;
        if response.is_err() {
            *slot = None;
        }
        Ok(response?)
    }

    /// A new connection: TCP (or the dialer's stream), TLS, HTTP/1.1.
    async fn connect(&self) -> Result<SendRequest<Body>, ClientError> {
        let address = self.address.clone();
        let connect_error = |source| ClientError::Connect {
            address: address.clone(),
            error: source,
        };
        let stream: Box<dyn Stream> = match &self.dialer {
            Some(dialer) => dialer.dial(&address).await.map_err(connect_error)?,
            None => {
                let tcp = TcpStream::connect(&address).await.map_err(connect_error)?;
                tcp.set_nodelay(true)?;
                Box::new(tcp)
            }
        };
        let tls = self
            .connector
            .connect(self.server_name.clone(), stream)
            .await
            .map_err(|source| ClientError::Handshake {
                address,
                error: source,
            })?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await?;
        // With upgrades: a parked poll's `101` hands the stream to [`Client::parked`].
        tokio::spawn(connection.with_upgrades());
        Ok(sender)
    }

    /// Sends a request and turns a non-2xx answer into [`ClientError::Status`].
    async fn call(
        &self,
        method: Method,
        route: &Route,
        headers: &[(&str, String)],
        body: Body,
        timeout: Duration,
    ) -> Result<Response<Incoming>, ClientError> {
        self.call_path(method, route.path(), headers, body, timeout)
            .await
    }

    async fn call_path(
        &self,
        method: Method,
        path: String,
        headers: &[(&str, String)],
        body: Body,
        timeout: Duration,
    ) -> Result<Response<Incoming>, ClientError> {
        let mut builder = Request::builder()
            .method(method.clone())
            .uri(&path)
            .header(hyper::header::HOST, &self.address)
            .header(hyper::header::USER_AGENT, USER_AGENT);
        for (name, value) in headers {
            builder = builder.header(*name, value);
        }
        let request = builder
            .body(body)
            .map_err(|e| ClientError::Decode(e.to_string()))?;
        let response = tokio::time::timeout(timeout, self.send(request))
            .await
            .map_err(|_| ClientError::Timeout(timeout))??;
        if response.status().is_success()
            || response.status() == StatusCode::PARTIAL_CONTENT
            || response.status() == StatusCode::SWITCHING_PROTOCOLS
        {
            return Ok(response);
        }
        let status = response.status();
        let bytes = read_limited(response.into_body(), MAX_JSON_RESPONSE)
            .await
            .unwrap_or_default();
        let message = serde_json::from_slice::<ErrorBody>(&bytes)
            .map(|b| b.error)
            .unwrap_or_else(|_| String::from_utf8_lossy(&bytes).into_owned());
        Err(ClientError::Status {
            method,
            path,
            status,
            message,
        })
    }

    async fn json<T: serde::de::DeserializeOwned>(&self, route: &Route) -> Result<T, ClientError> {
        let response = self
            .call(Method::GET, route, &[], empty(), self.timeout)
            .await?;
        let bytes = read_limited(response.into_body(), MAX_JSON_RESPONSE).await?;
        serde_json::from_slice(&bytes).map_err(|e| ClientError::Decode(e.to_string()))
    }

    async fn post_json<T: serde::Serialize>(
        &self,
        method: Method,
        route: &Route,
        value: &T,
    ) -> Result<(), ClientError> {
        let body = serde_json::to_vec(value).map_err(|e| ClientError::Decode(e.to_string()))?;
        let headers = [("content-type", "application/json".to_owned())];
        self.call(method, route, &headers, full(body), self.timeout)
            .await?;
        Ok(())
    }

    /// Asks for a certificate for this agent's node: `csr_pem` is a PEM certificate signing
    /// request made with the agent's own key, `credential` what vouches for it. 403 means the
    /// credential admits no node (the message says why); 503 and transport errors are
    /// retryable.
    pub async fn enroll(
        &self,
        csr_pem: &str,
        credential: &str,
    ) -> Result<EnrollResponse, ClientError> {
        let body = serde_json::to_vec(&EnrollRequest {
            csr: csr_pem.to_owned(),
            credential: credential.to_owned(),
        })
        .map_err(|e| ClientError::Decode(e.to_string()))?;
        let headers = [("content-type", "application/json".to_owned())];
        let response = self
            .call(
                Method::POST,
                &Route::Enroll,
                &headers,
                full(body),
                self.timeout,
            )
            .await?;
        let bytes = read_limited(response.into_body(), MAX_JSON_RESPONSE).await?;
        serde_json::from_slice(&bytes).map_err(|e| ClientError::Decode(e.to_string()))
    }

    /// Joins a fleet (a [`Client::pinned`] client): `request` carries the token, the node's
    /// name and the CSR of a key made here. 403 and 409 say why the join was refused.
    pub async fn join(&self, request: &JoinRequest) -> Result<Enrollment, ClientError> {
        self.exchange(Method::POST, FleetRoute::Join.path(), request)
            .await
    }

    /// Renews the enrollment certificate this client presents, for the key of `csr_pem`.
    pub async fn renew(&self, csr_pem: &str) -> Result<Enrollment, ClientError> {
        let request = RenewRequest {
            csr: csr_pem.to_owned(),
        };
        self.exchange(Method::POST, FleetRoute::Renew.path(), &request)
            .await
    }

    /// Waits for a run after the fleet's run number `after` that this node takes part in. The
    /// poll asks to be parked ([`PARKED_POLL`]) and then waits as long as it takes,
    /// acknowledging the fleet's `idle` lines; a fleet that parks nothing answers it as a plain
    /// long poll, `None` when no run started within [`crate::fleet::LONG_POLL_SECONDS`].
    pub async fn next_run(&self, after: u64) -> Result<Option<RunOffer>, ClientError> {
        // A fleet answers a plain poll within 50 s.
        let timeout = self
            .timeout
            .max(Duration::from_secs(crate::fleet::LONG_POLL_SECONDS) + LATE_LINE);
        let park = [
            ("connection", "upgrade".to_owned()),
            ("upgrade", PARKED_POLL.to_owned()),
        ];
        loop {
            let response = self
                .call_path(
                    Method::GET,
                    FleetRoute::NextRun { after }.path(),
                    &park,
                    empty(),
                    timeout,
                )
                .await?;
            match response.status() {
                StatusCode::NO_CONTENT => return Ok(None),
                // `changed` (the answer is there: ask again) or `close` (the same, on a new
                // connection).
                StatusCode::SWITCHING_PROTOCOLS => {
                    let period = idle_period(response.headers());
                    self.parked(response, self.timeout.max(period + LATE_LINE))
                        .await?
                }
                _ => {
                    let bytes = read_limited(response.into_body(), MAX_JSON_RESPONSE).await?;
                    return serde_json::from_slice(&bytes)
                        .map(Some)
                        .map_err(|e| ClientError::Decode(e.to_string()));
                }
            }
        }
    }

    /// Waits on a parked poll's stream, acknowledging each `idle` line, until `changed` (the
    /// stream speaks HTTP/1.1 again and is the kept connection from then on; a client without
    /// one drops it) or `close`. A line must come within `timeout`.
    async fn parked(
        &self,
        response: Response<Incoming>,
        timeout: Duration,
    ) -> Result<(), ClientError> {
        let upgraded = hyper::upgrade::on(response).await?;
        let mut stream = TokioIo::new(upgraded);
        loop {
            let wake = tokio::time::timeout(timeout, read_wake(&mut stream))
                .await
                .map_err(|_| ClientError::Timeout(timeout))??;
            match wake {
                Wake::Idle => {
                    stream
                        .write_all(IDLE_ACK)
                        .await
                        .map_err(ClientError::Parked)?;
                    stream.flush().await.map_err(ClientError::Parked)?;
                }
                Wake::Close => return Ok(()),
                Wake::Changed => {
                    if let Some(kept) = &self.kept {
                        let (sender, connection) =
                            hyper::client::conn::http1::handshake(stream.into_inner()).await?;
                        tokio::spawn(connection.with_upgrades());
                        *kept.lock().await = Some(sender);
                    }
                    return Ok(());
                }
            }
        }
    }

    /// Starts a run over every enrolled node of a fleet (an operator of the fleet's CA).
    pub async fn start_fleet_run(
        &self,
        request: &FleetRunRequest,
    ) -> Result<FleetRunStarted, ClientError> {
        self.exchange(Method::POST, FleetRoute::Runs.path(), request)
            .await
    }

    /// Makes sure the fleet stores a plugin component, uploading it unless the fleet already
    /// holds these bytes (operator). Returns whether it was uploaded.
    pub async fn store_fleet_plugin(&self, sha256: &str, wasm: &[u8]) -> Result<bool, ClientError> {
        let path = FleetRoute::Plugin {
            sha256: sha256.to_owned(),
        }
        .path();
        match self
            .call_path(Method::GET, path.clone(), &[], empty(), self.timeout)
            .await
        {
            Ok(_) => return Ok(false),
            Err(e) if e.status() == Some(StatusCode::NOT_FOUND) => {}
            Err(e) => return Err(e),
        }
        let size = wasm.len() as u64;
        let headers = [
            (
                digest::CONTENT_DIGEST,
                digest::header_value(sha256).unwrap_or_default(),
            ),
            ("content-length", size.to_string()),
            ("content-type", "application/wasm".to_owned()),
        ];
        // Allow for slow links: the base timeout plus a second per 10 MB.
        let timeout = self.timeout + Duration::from_secs(size / 10_000_000);
        self.call_path(Method::PUT, path, &headers, full(wasm.to_vec()), timeout)
            .await?;
        Ok(true)
    }

    /// Sends `value` as JSON to `path` and reads the JSON answer.
    async fn exchange<T: serde::Serialize, R: serde::de::DeserializeOwned>(
        &self,
        method: Method,
        path: String,
        value: &T,
    ) -> Result<R, ClientError> {
        let body = serde_json::to_vec(value).map_err(|e| ClientError::Decode(e.to_string()))?;
        let headers = [("content-type", "application/json".to_owned())];
        let response = self
            .call_path(method, path, &headers, full(body), self.timeout)
            .await?;
        let bytes = read_limited(response.into_body(), MAX_JSON_RESPONSE).await?;
        serde_json::from_slice(&bytes).map_err(|e| ClientError::Decode(e.to_string()))
    }

    /// What a node's agent, or the runner of the global plugins, is to run.
    pub async fn plan(&self, scope: &Scope) -> Result<AgentPlan, ClientError> {
        self.json(&Route::Plan {
            scope: scope.clone(),
        })
        .await
    }

    /// Downloads a plugin component and checks its digest.
    pub async fn component(&self, sha256: &str) -> Result<Vec<u8>, ClientError> {
        let route = Route::Component {
            sha256: sha256.to_owned(),
        };
        let response = self
            .call(Method::GET, &route, &[], empty(), self.timeout)
            .await?;
        let bytes = read_limited(response.into_body(), 256 << 20).await?;
        let actual = hex(&Sha256::digest(&bytes));
        if actual != sha256 {
            return Err(ClientError::Decode(format!(
                "component {sha256} arrived with digest {actual}"
            )));
        }
        Ok(bytes.to_vec())
    }

    /// Uploads one artifact of a result from a file, with its digest.
    pub async fn put_file(
        &self,
        scope: &Scope,
        plugin: &str,
        name: &crate::names::ArtifactName,
        path: &Path,
        sha256: &str,
    ) -> Result<(), ClientError> {
        let file = tokio::fs::File::open(path).await?;
        let size = file.metadata().await?.len();
        let stream = ReaderStream::with_capacity(file, 256 << 10);
        let body = BodyExt::boxed(StreamBody::new(file_frames(stream)));
        let headers = [
            (
                digest::CONTENT_DIGEST,
                digest::header_value(sha256).unwrap_or_default(),
            ),
            ("content-length", size.to_string()),
            ("content-type", "application/octet-stream".to_owned()),
        ];
        let route = Route::ResultFile {
            scope: scope.clone(),
            plugin: plugin.to_owned(),
            name: name.clone(),
        };
        // Allow for slow links: the base timeout plus a second per 10 MB.
        let timeout = self.timeout + Duration::from_secs(size / 10_000_000);
        self.call(Method::PUT, &route, &headers, body, timeout)
            .await?;
        Ok(())
    }

    /// Completes a result. A 409 means the aggregator already holds a complete result.
    pub async fn commit(
        &self,
        scope: &Scope,
        plugin: &str,
        manifest: &ResultManifest,
    ) -> Result<(), ClientError> {
        let route = Route::ResultCommit {
            scope: scope.clone(),
            plugin: plugin.to_owned(),
        };
        self.post_json(Method::PUT, &route, manifest).await
    }

    /// Sends a plugin's progress report, for the plugin `update` names.
    pub async fn progress(
        &self,
        scope: &Scope,
        update: &ProgressUpdate,
    ) -> Result<(), ClientError> {
        let route = Route::Progress {
            scope: scope.clone(),
            plugin: update.plugin.clone(),
        };
        self.post_json(Method::POST, &route, update).await
    }

    /// Tells the aggregator that `node`'s agent is still alive.
    pub async fn heartbeat(&self, node: &NodeName) -> Result<(), ClientError> {
        let route = Route::Heartbeat { node: node.clone() };
        self.call(Method::POST, &route, &[], empty(), self.timeout)
            .await?;
        Ok(())
    }

    /// The run's status (operator).
    pub async fn status(&self) -> Result<StatusDocument, ClientError> {
        self.json(&Route::Status).await
    }

    /// Prometheus metrics (operator).
    pub async fn metrics(&self) -> Result<String, ClientError> {
        let response = self
            .call(Method::GET, &Route::Metrics, &[], empty(), self.timeout)
            .await?;
        let bytes = read_limited(response.into_body(), MAX_JSON_RESPONSE).await?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// Downloads the bundle to `dest`, resuming a partial download already there.
    pub async fn download_bundle(&self, dest: &Path) -> Result<Downloaded, ClientError> {
        let have = match tokio::fs::metadata(dest).await {
            Ok(meta) => meta.len(),
            Err(_) => 0,
        };
        let headers: Vec<(&str, String)> = if have > 0 {
            vec![("range", format!("bytes={have}-"))]
        } else {
            Vec::new()
        };
        let response = self
            .call(
                Method::GET,
                &Route::Bundle,
                &headers,
                empty(),
                Duration::from_secs(24 * 3600),
            )
            .await;
        let response = match response {
            // Already complete: the server has nothing past what we hold.
            Err(e) if e.status() == Some(StatusCode::RANGE_NOT_SATISFIABLE) => {
                return Ok(Downloaded {
                    size: have,
                    resumed_from: have,
                });
            }
            other => other?,
        };
        let resumed = response.status() == StatusCode::PARTIAL_CONTENT;
        // Readable by its owner only, as the aggregator writes it.
        let mut file = tokio::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(resumed)
            .truncate(!resumed)
            .mode(0o600)
            .open(dest)
            .await?;
        let mut body = response.into_body();
        let mut written = if resumed { have } else { 0 };
        while let Some(frame) = body.frame().await {
            if let Ok(data) = frame?.into_data() {
                file.write_all(&data).await?;
                written += data.len() as u64;
            }
        }
        file.flush().await?;
        Ok(Downloaded {
            size: written,
            resumed_from: if resumed { have } else { 0 },
        })
    }
}

/// A finished bundle download.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Downloaded {
    /// The file's size.
    pub size: u64,
    /// The bytes that were already there and kept: 0 for a download from the start.
    pub resumed_from: u64,
}

fn empty() -> Body {
    full(Vec::new())
}

fn full(bytes: Vec<u8>) -> Body {
    Full::new(Bytes::from(bytes))
        .map_err(|never| match never {})
        .boxed()
}

/// A file's bytes as body frames.
fn file_frames(
    stream: ReaderStream<tokio::fs::File>,
) -> impl futures_util::Stream<Item = Result<Frame<Bytes>, std::io::Error>> {
    use futures_util::StreamExt;
    stream.map(|chunk| chunk.map(Frame::data))
}

/// How late past its period a fleet's answer or line may come before the agent gives up on
/// the connection and polls again on a new one.
const LATE_LINE: Duration = Duration::from_secs(15);

/// The period between `idle` lines the `101` of a parked poll names ([`IDLE_SECONDS_HEADER`]),
/// held within 1 s and [`MAX_IDLE_SECONDS`]; [`DEFAULT_IDLE_SECONDS`] when it names none.
fn idle_period(headers: &hyper::HeaderMap) -> Duration {
    let seconds = headers
        .get(IDLE_SECONDS_HEADER)
        .and_then(|value| value.to_str().ok()?.parse::<u64>().ok())
        .unwrap_or(DEFAULT_IDLE_SECONDS);
    Duration::from_secs(seconds.clamp(1, MAX_IDLE_SECONDS))
}

/// Reads a parked poll's next [`Wake`] line.
async fn read_wake(stream: &mut (impl AsyncRead + Unpin)) -> Result<Wake, ClientError> {
    let mut line = Vec::with_capacity(Wake::MAX_LINE);
    while !line.ends_with(b"\n") && line.len() < Wake::MAX_LINE {
        line.push(stream.read_u8().await.map_err(ClientError::Parked)?);
    }
    Wake::parse(&line).ok_or_else(|| {
        ClientError::Decode(format!(
            "a parked poll's line was {:?}, not one of changed, idle or close",
            String::from_utf8_lossy(&line)
        ))
    })
}

/// Reads a body of at most `limit` bytes.
pub async fn read_limited(mut body: Incoming, limit: usize) -> Result<Bytes, ClientError> {
    let mut collected = Vec::new();
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame?.into_data() {
            if collected.len() + data.len() > limit {
                return Err(ClientError::Decode(format!(
                    "response larger than {limit} bytes"
                )));
            }
            collected.extend_from_slice(&data);
        }
    }
    Ok(Bytes::from(collected))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests;
