//! The client against a real TLS server on loopback that answers as the aggregator would, or
//! deliberately does not.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use http_body_util::Full;
use hyper::service::service_fn;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, SanType};
use tokio::net::TcpListener;

use super::*;

/// A CA, a server certificate for 127.0.0.1 and a client identity, as PEM.
fn credentials() -> (Arc<rustls::ServerConfig>, Identity) {
    credentials_for(SanType::IpAddress("127.0.0.1".parse().unwrap()))
}

/// A CA, a server certificate naming only `server`, and a client identity.
fn credentials_for(server: SanType) -> (Arc<rustls::ServerConfig>, Identity) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::default();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let sign = |san: SanType| {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::default();
        params.subject_alt_names = vec![san];
        (
            params.signed_by(&key, &issuer).unwrap().pem(),
            key.serialize_pem(),
        )
    };
    let (server_cert, server_key) = sign(server);
    let (client_cert, client_key) = sign(SanType::URI(
        "urn:factbuoy:operator:test".try_into().unwrap(),
    ));
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(
            crate::tls::certificates(&ca_cert.pem(), "ca")
                .unwrap()
                .remove(0),
        )
        .unwrap();
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        crate::tls::provider(),
    )
    .build()
    .unwrap();
    let server = rustls::ServerConfig::builder_with_provider(crate::tls::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            crate::tls::certificates(&server_cert, "server").unwrap(),
            crate::tls::private_key(&server_key, "server key").unwrap(),
        )
        .unwrap();
    let identity = Identity {
        ca_pem: ca_cert.pem(),
        cert_pem: client_cert,
        key_pem: client_key,
    };
    (Arc::new(server), identity)
}

type Handler = Arc<dyn Fn(&Request<Incoming>) -> Response<Full<Bytes>> + Send + Sync>;

/// Serves `handler` over mutual TLS on a loopback port; records each request's path and Range.
async fn serve(handler: Handler) -> (String, Identity, Arc<Mutex<Vec<(String, Option<String>)>>>) {
    serve_as(handler, credentials()).await
}

async fn serve_as(
    handler: Handler,
    (tls, identity): (Arc<rustls::ServerConfig>, Identity),
) -> (String, Identity, Arc<Mutex<Vec<(String, Option<String>)>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let recorded = seen.clone();
    tokio::spawn(async move {
        let acceptor = tokio_rustls::TlsAcceptor::from(tls);
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let (acceptor, handler, seen) = (acceptor.clone(), handler.clone(), seen.clone());
            tokio::spawn(async move {
                let Ok(stream) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = service_fn(move |request: Request<Incoming>| {
                    let range = request
                        .headers()
                        .get("range")
                        .map(|v| v.to_str().unwrap().to_owned());
                    seen.lock()
                        .unwrap()
                        .push((request.uri().path().to_owned(), range));
                    let response = handler(&request);
                    async move { Ok::<_, Infallible>(response) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (address, identity, recorded)
}

const BUNDLE: &[u8] = b"0123456789abcdefghij";

/// Answers the bundle route with RFC 9110 ranges of the form `bytes=N-`.
fn bundle_server() -> Handler {
    Arc::new(|request| {
        let range = request
            .headers()
            .get("range")
            .map(|v| v.to_str().unwrap().to_owned());
        match range.and_then(|r| {
            r.strip_prefix("bytes=")?
                .strip_suffix('-')?
                .parse::<usize>()
                .ok()
        }) {
            Some(start) if start >= BUNDLE.len() => Response::builder()
                .status(StatusCode::RANGE_NOT_SATISFIABLE)
                .body(Full::new(Bytes::new()))
                .unwrap(),
            Some(start) => Response::builder()
                .status(StatusCode::PARTIAL_CONTENT)
                .body(Full::new(Bytes::from_static(&BUNDLE[start..])))
                .unwrap(),
            None => Response::new(Full::new(Bytes::from_static(BUNDLE))),
        }
    })
}

#[tokio::test]
async fn a_partial_download_resumes_where_it_stopped() {
    let (address, identity, seen) = serve(bundle_server()).await;
    let client = Client::new(&address, &identity).unwrap();
    let dir = std::env::temp_dir().join(format!("factbuoy-client-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let dest = dir.join("bundle.tar.gz");
    std::fs::write(&dest, &BUNDLE[..7]).unwrap();
    let whole = |resumed_from| Downloaded {
        size: BUNDLE.len() as u64,
        resumed_from,
    };
    assert_eq!(client.download_bundle(&dest).await.unwrap(), whole(7));
    assert_eq!(std::fs::read(&dest).unwrap(), BUNDLE);
    // Complete already: the server's 416 means there is nothing more, not an error.
    assert_eq!(
        client.download_bundle(&dest).await.unwrap(),
        whole(BUNDLE.len() as u64)
    );
    std::fs::remove_file(&dest).unwrap();
    assert_eq!(client.download_bundle(&dest).await.unwrap(), whole(0));
    assert_eq!(std::fs::read(&dest).unwrap(), BUNDLE);
    std::fs::remove_dir_all(&dir).unwrap();
    let ranges: Vec<Option<String>> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|(_, r)| r.clone())
        .collect();
    assert_eq!(
        ranges,
        [
            Some("bytes=7-".to_owned()),
            Some("bytes=20-".to_owned()),
            None
        ]
    );
}

#[tokio::test]
async fn refusals_carry_the_servers_message_and_say_whether_to_retry() {
    let handler: Handler = Arc::new(|request| {
        let (status, message) = match request.uri().path() {
            "/status" => (StatusCode::SERVICE_UNAVAILABLE, "restarting"),
            _ => (
                StatusCode::FORBIDDEN,
                "an agent certificate cannot read status",
            ),
        };
        let body = serde_json::to_vec(&ErrorBody {
            error: message.to_owned(),
        })
        .unwrap();
        Response::builder()
            .status(status)
            .body(Full::new(Bytes::from(body)))
            .unwrap()
    });
    let (address, identity, _) = serve(handler).await;
    let client = Client::new(&address, &identity).unwrap();
    let unavailable = client.status().await.unwrap_err();
    assert_eq!(unavailable.status(), Some(StatusCode::SERVICE_UNAVAILABLE));
    assert!(unavailable.is_retryable());
    assert!(
        unavailable.to_string().contains("restarting"),
        "{unavailable}"
    );
    let forbidden = client.metrics().await.unwrap_err();
    assert_eq!(forbidden.status(), Some(StatusCode::FORBIDDEN));
    assert!(!forbidden.is_retryable());
    assert!(
        forbidden.to_string().contains("cannot read status"),
        "{forbidden}"
    );
}

#[tokio::test]
async fn a_component_whose_digest_differs_is_refused() {
    let handler: Handler =
        Arc::new(|_| Response::new(Full::new(Bytes::from_static(b"not the wasm"))));
    let (address, identity, _) = serve(handler).await;
    let client = Client::new(&address, &identity).unwrap();
    let wanted = crate::digest::sha256_hex(b"the wasm");
    let error = client.component(&wanted).await.unwrap_err();
    assert!(matches!(error, ClientError::Decode(_)), "{error}");
    assert!(!error.is_retryable());
}

#[tokio::test]
async fn an_unreachable_aggregator_is_retryable_and_bad_addresses_are_not() {
    let (_, identity) = credentials();
    // A port nothing listens on: bind one, then free it.
    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let client = Client::new(&free.to_string(), &identity).unwrap();
    let error = client
        .heartbeat(&crate::names::NodeName::parse("n1").unwrap())
        .await
        .unwrap_err();
    assert!(
        matches!(error, ClientError::Connect { .. }) && error.is_retryable(),
        "{error}"
    );
    assert!(matches!(
        Client::new("no-port", &identity),
        Err(ClientError::Address(_))
    ));
    assert!(Client::new("[::1]:8443", &identity).is_ok());
}

#[tokio::test]
async fn the_server_is_verified_against_the_name_given_not_the_address_dialled() {
    let name = "aggregator.factbuoy.svc";
    let status = Arc::new(|_: &Request<Incoming>| {
        Response::new(Full::new(Bytes::from_static(
            b"{\"run_id\":\"r\",\"status\":\"running\",\"plugins\":[]}",
        )))
    });
    let (address, identity, seen) = serve_as(
        status,
        credentials_for(SanType::DnsName(name.try_into().unwrap())),
    )
    .await;
    // Dialled by address, the certificate (naming only the DNS name) does not match.
    let by_address = Client::new(&address, &identity).unwrap();
    assert!(matches!(
        by_address.status().await,
        Err(ClientError::Handshake { .. })
    ));
    let named = Client::new(&address, &identity)
        .unwrap()
        .with_server_name(name)
        .unwrap();
    assert_eq!(named.status().await.unwrap().run_id, "r");
    // Another name is refused even though the address is the same.
    let wrong = Client::new(&address, &identity)
        .unwrap()
        .with_server_name("other.factbuoy.svc")
        .unwrap();
    assert!(matches!(
        wrong.status().await,
        Err(ClientError::Handshake { .. })
    ));
    assert_eq!(seen.lock().unwrap().len(), 1);
}

/// Carries every request to one fixed TCP address, whatever the client was told to dial.
struct Tunnel {
    to: String,
    dialled: Mutex<Vec<String>>,
}

impl Dial for Tunnel {
    fn dial<'a>(&'a self, address: &'a str) -> Dialing<'a> {
        Box::pin(async move {
            self.dialled.lock().unwrap().push(address.to_owned());
            let tcp = TcpStream::connect(&self.to).await?;
            Ok(Box::new(tcp) as Box<dyn Stream>)
        })
    }
}

#[tokio::test]
async fn a_dialer_carries_the_requests() {
    let (address, identity, seen) = serve(bundle_server()).await;
    let tunnel = Arc::new(Tunnel {
        to: address.clone(),
        dialled: Mutex::new(Vec::new()),
    });
    // Nothing listens on port 9 of 127.0.0.1: only the tunnel reaches the server.
    let client = Client::new("127.0.0.1:9", &identity)
        .unwrap()
        .with_dialer(tunnel.clone());
    let bytes = client.metrics().await.unwrap();
    assert_eq!(bytes.as_bytes(), BUNDLE);
    assert_eq!(*tunnel.dialled.lock().unwrap(), ["127.0.0.1:9"]);
    assert_eq!(seen.lock().unwrap().len(), 1);
    // Without it, the same client finds nothing there.
    let direct = Client::new("127.0.0.1:9", &identity).unwrap();
    assert!(matches!(
        direct.metrics().await,
        Err(ClientError::Connect { .. })
    ));
}

#[test]
fn a_parked_poll_waits_for_the_period_the_fleet_names_within_one_second_and_fifteen_minutes() {
    let named = |value: &str| {
        let mut headers = hyper::HeaderMap::new();
        headers.insert(IDLE_SECONDS_HEADER, value.parse().unwrap());
        idle_period(&headers)
    };
    assert_eq!(named("10"), Duration::from_secs(10));
    // A fleet cannot make its agents wait longer than a connection lives, or not at all.
    assert_eq!(named("86400"), Duration::from_secs(MAX_IDLE_SECONDS));
    assert_eq!(named("0"), Duration::from_secs(1));
    assert_eq!(named("soon"), Duration::from_secs(DEFAULT_IDLE_SECONDS));
    assert_eq!(
        idle_period(&hyper::HeaderMap::new()),
        Duration::from_secs(DEFAULT_IDLE_SECONDS)
    );
}
