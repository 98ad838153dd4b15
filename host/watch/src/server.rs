//! The HTTP server: it binds, checks every request ([`access`](crate::access)), and answers the
//! pages, the API's documents and its event streams.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Channel, Full};
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use factbuoy_kubernetes::ClusterRef;
use factbuoy_operator::StateDir;
use factbuoy_operator::list;

use crate::Error;
use crate::access::{Access, Admitted, new_token};
use crate::api::{API_VERSION, RunList};
use crate::bundles::{BundleError, Bundles};
use crate::page::{self, Asset};
use crate::polling::{Latest, Pollers};

/// How long an idle event stream waits before a comment line keeps it (and proxies) open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// How long a connection may take to send a request's head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

type Body = BoxBody<Bytes, Infallible>;

/// What to serve and where.
#[derive(Debug, Clone)]
pub struct PageOptions {
    /// The address to listen on; a loopback one (port 0 picks a free port).
    pub listen: SocketAddr,
    /// The operator's machine state: its runs' records and credentials.
    pub state: StateDir,
    /// How Kubernetes runs' clusters are reached, as `status --kubeconfig/--context` say.
    pub cluster: ClusterRef,
    /// Where the page's "retrieve" downloads bundles, as `factbuoy retrieve --out`.
    pub out: PathBuf,
    /// Serve HTTPS with this certificate; required on an address that is not loopback.
    pub tls: Option<TlsIdentity>,
}

/// The page's certificate (chain) and key, PEM.
#[derive(Clone)]
pub struct TlsIdentity {
    /// The certificate, then any intermediates.
    pub cert_pem: String,
    /// Its private key.
    pub key_pem: String,
}

impl std::fmt::Debug for TlsIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key in a log.
        f.debug_struct("TlsIdentity").finish_non_exhaustive()
    }
}

impl TlsIdentity {
    /// A server configuration with this certificate, no client certificate asked: the token
    /// is the browser's credential.
    fn server_config(&self) -> Result<Arc<rustls::ServerConfig>, Error> {
        use factbuoy_protocol::tls;
        let tls_error = |e: &dyn std::fmt::Display| Error::Tls(e.to_string());
        let certificates =
            tls::certificates(&self.cert_pem, "certificate").map_err(|e| tls_error(&e))?;
        let key = tls::private_key(&self.key_pem, "key").map_err(|e| tls_error(&e))?;
        let mut config = rustls::ServerConfig::builder_with_provider(tls::provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| tls_error(&e))?
            .with_no_client_auth()
            .with_single_cert(certificates, key)
            .map_err(|e| tls_error(&e))?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

/// The server, serving until it is dropped.
pub struct PageServer {
    address: SocketAddr,
    scheme: &'static str,
    token: String,
    task: JoinHandle<()>,
}

impl PageServer {
    /// The address it listens on.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The URL to open: `path` (`/` or `/runs/ID`) with the token.
    pub fn url(&self, path: &str) -> String {
        format!(
            "{}://{}{path}?token={}",
            self.scheme, self.address, self.token
        )
    }
}

impl Drop for PageServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Binds `options.listen` and serves there: plain HTTP on loopback, HTTPS anywhere (and only
/// HTTPS off loopback, where the token and the run would otherwise cross the network in clear).
pub async fn serve(options: PageOptions) -> Result<PageServer, Error> {
    if options.listen.ip().is_unspecified() {
        return Err(Error::Unspecified(options.listen));
    }
    if !options.listen.ip().is_loopback() && options.tls.is_none() {
        return Err(Error::NotLoopback(options.listen));
    }
    let tls = options
        .tls
        .as_ref()
        .map(TlsIdentity::server_config)
        .transpose()?
        .map(TlsAcceptor::from);
    let listener = TcpListener::bind(options.listen)
        .await
        .map_err(|source| Error::Bind {
            address: options.listen,
            source,
        })?;
    let address = listener.local_addr().map_err(|source| Error::Bind {
        address: options.listen,
        source,
    })?;
    let token = new_token();
    let scheme = if tls.is_some() { "https" } else { "http" };
    let shared = Arc::new(Shared {
        access: Access::new(token.clone(), address.to_string(), scheme),
        pollers: Pollers::new(options.state, options.cluster),
        bundles: Bundles::new(options.out),
    });
    let task = tokio::spawn(accept(listener, tls, shared));
    Ok(PageServer {
        address,
        scheme,
        token,
        task,
    })
}

/// What every request's handler shares.
struct Shared {
    access: Access,
    pollers: Pollers,
    bundles: Bundles,
}

async fn accept(listener: TcpListener, tls: Option<TlsAcceptor>, shared: Arc<Shared>) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of file descriptors, say: wait rather than spin.
                tracing::warn!("accepting a connection to the status page: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let shared = shared.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            match tls {
                None => connection(stream, shared).await,
                Some(tls) => {
                    // A client that never finishes its handshake holds nothing for long.
                    match tokio::time::timeout(HEAD_TIMEOUT, tls.accept(stream)).await {
                        Ok(Ok(stream)) => connection(stream, shared).await,
                        Ok(Err(e)) => {
                            tracing::debug!("a TLS handshake with the status page failed: {e}")
                        }
                        Err(_) => tracing::debug!("a TLS handshake with the status page timed out"),
                    }
                }
            }
        });
    }
}

/// Serves the requests of one connection, plain or TLS.
async fn connection<S>(stream: S, shared: Arc<Shared>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |request| {
        let shared = shared.clone();
        async move { Ok::<_, Infallible>(answer(&shared, request).await) }
    });
    let served = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .serve_connection(TokioIo::new(stream), service)
        .await;
    if let Err(e) = served {
        tracing::debug!("a status page connection ended: {e}");
    }
}

/// The answer to one request.
async fn answer(shared: &Shared, request: Request<Incoming>) -> Response<Body> {
    let (parts, _body) = request.into_parts();
    let admitted = match shared.access.check(&parts) {
        Ok(admitted) => admitted,
        Err(refusal) => {
            tracing::debug!(uri = %parts.uri.path(), ?refusal, "refused");
            return text(StatusCode::FORBIDDEN, refusal.message());
        }
    };
    let path = parts.uri.path();
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    // Retrieving is the one request that does something: POST only, so no link or image
    // triggers it; everything else only reads.
    let wanted = match segments.as_slice() {
        ["api", "v1", "runs", _, "retrieve"] => Method::POST,
        _ => Method::GET,
    };
    if parts.method != wanted {
        return text(
            StatusCode::METHOD_NOT_ALLOWED,
            "not served with this method",
        );
    }
    let mut response = match (admitted, segments.as_slice()) {
        // The token leaves the address bar (and the history) once the cookie holds it.
        (Admitted::FromUrl, [""] | ["runs", _]) => Response::builder()
            .status(StatusCode::SEE_OTHER)
            .header(header::LOCATION, path)
            .body(full(Bytes::new()))
            .expect("a valid response"),
        (_, [""]) => content(page::RUNS),
        (_, ["runs", _]) => content(page::RUN),
        (_, ["runs", run_id, "report"]) => report(shared, run_id).await,
        (_, ["assets", name]) => page::asset(name).map_or_else(not_found, content),
        (_, ["api", "v1", "runs"]) => run_list(shared).await,
        (_, ["api", "v1", "runs", run_id]) => run(shared, run_id).await,
        (_, ["api", "v1", "runs", run_id, "events"]) => events(shared, run_id),
        (_, ["api", "v1", "runs", run_id, "retrieve"]) => retrieve(shared, run_id).await,
        _ => not_found(),
    };
    let headers = response.headers_mut();
    if admitted == Admitted::FromUrl {
        let cookie = HeaderValue::from_str(&shared.access.set_cookie()).expect("a hex token");
        headers.insert(header::SET_COOKIE, cookie);
    }
    for (name, value) in [
        (header::CACHE_CONTROL, "no-store"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "no-referrer"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

/// `/api/v1/runs`.
async fn run_list(shared: &Shared) -> Response<Body> {
    // Kubernetes and fleet runs are not asked here: one slow cluster would hold the list.
    match list::list(shared.pollers.state(), &ClusterRef::default(), false).await {
        Ok(runs) => json(
            StatusCode::OK,
            &RunList {
                api_version: API_VERSION,
                runs,
            },
        ),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &format!("{e:#}")),
    }
}

/// `/api/v1/runs/{id}`: the run as polled, after its first poll.
async fn run(shared: &Shared, run_id: &str) -> Response<Body> {
    let Some(mut latest) = shared.pollers.watch(run_id) else {
        return no_such_run(run_id);
    };
    match latest.wait_for(Option::is_some).await {
        Ok(view) => json(StatusCode::OK, view.as_deref().expect("waited for")),
        Err(_) => error(StatusCode::SERVICE_UNAVAILABLE, "the run's poller stopped"),
    }
}

/// `POST /api/v1/runs/{id}/retrieve`: downloads the bundle here, as `factbuoy retrieve`.
async fn retrieve(shared: &Shared, run_id: &str) -> Response<Body> {
    match shared.bundles.retrieve(&shared.pollers, run_id).await {
        Ok(fetched) => json(StatusCode::OK, &fetched),
        Err(e) => bundle_error(&e),
    }
}

/// `/runs/{id}/report`: the HTML report of the run's bundle on this machine.
async fn report(shared: &Shared, run_id: &str) -> Response<Body> {
    // A local run's bundle is here already: its path is in the run's view.
    let Some(mut latest) = shared.pollers.watch(run_id) else {
        return no_such_run(run_id);
    };
    let local = match latest.wait_for(Option::is_some).await {
        Ok(view) => view
            .as_ref()
            .and_then(|view| view.bundle_path.clone())
            .map(PathBuf::from),
        Err(_) => return error(StatusCode::SERVICE_UNAVAILABLE, "the run's poller stopped"),
    };
    match shared.bundles.report(run_id, local).await {
        Ok(html) => Response::builder()
            .header(header::CONTENT_TYPE, "text/html; charset=utf-8")
            // The report's own policy: it is one file, its script and style inline, nothing
            // fetched.
            .header(
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
            )
            .body(full(html))
            .expect("a valid response"),
        Err(e) => bundle_error(&e),
    }
}

fn bundle_error(e: &BundleError) -> Response<Body> {
    let status = match e {
        BundleError::NoSuchRun(_) => StatusCode::NOT_FOUND,
        BundleError::NotHere(_) => StatusCode::CONFLICT,
        BundleError::Operator(_) | BundleError::Report { .. } => StatusCode::BAD_GATEWAY,
    };
    error(status, &e.to_string())
}

/// `/api/v1/runs/{id}/events`: a `status` event with the run now, then one each time it
/// changes, until it has ended.
fn events(shared: &Shared, run_id: &str) -> Response<Body> {
    let Some(latest) = shared.pollers.watch(run_id) else {
        return no_such_run(run_id);
    };
    let (sender, body) = Channel::<Bytes, Infallible>::new(4);
    tokio::spawn(stream_events(latest, sender));
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(body.boxed())
        .expect("a valid response")
}

/// Writes `latest`'s views as server-sent events into `sender` until the run ends or the
/// client goes.
async fn stream_events(
    mut latest: Latest,
    mut sender: http_body_util::channel::Sender<Bytes, Infallible>,
) {
    let mut id = 0u64;
    loop {
        let view = latest.borrow_and_update().clone();
        if let Some(view) = view {
            id += 1;
            let data = serde_json::to_string(&*view).expect("a view serialises");
            let event = format!("event: status\nid: {id}\ndata: {data}\n\n");
            if sender.send_data(Bytes::from(event)).await.is_err() {
                return;
            }
            if view.ended {
                return;
            }
        }
        tokio::select! {
            changed = latest.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            () = tokio::time::sleep(KEEP_ALIVE) => {
                if sender.send_data(Bytes::from_static(b": keep-alive\n\n")).await.is_err() {
                    return;
                }
            }
        }
    }
}

fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed()
}

/// A page or an asset.
fn content(asset: Asset) -> Response<Body> {
    Response::builder()
        .header(header::CONTENT_TYPE, asset.content_type)
        .header(
            header::CONTENT_SECURITY_POLICY,
            // Nothing but this server: no inline script, no other site, no frames (the
            // empty data: icon keeps browsers from asking for /favicon.ico).
            "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        )
        .body(full(asset.body))
        .expect("a valid response")
}

fn json(status: StatusCode, value: &impl serde::Serialize) -> Response<Body> {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .body(full(
            serde_json::to_vec(value).expect("a document serialises"),
        ))
        .expect("a valid response")
}

fn error(status: StatusCode, message: &str) -> Response<Body> {
    json(status, &serde_json::json!({ "error": message }))
}

fn text(status: StatusCode, message: &'static str) -> Response<Body> {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(full(message))
        .expect("a valid response")
}

fn not_found() -> Response<Body> {
    error(StatusCode::NOT_FOUND, "no such page")
}

fn no_such_run(run_id: &str) -> Response<Body> {
    error(
        StatusCode::NOT_FOUND,
        &format!("no run {run_id} is known here (`factbuoy runs` lists them)"),
    )
}
