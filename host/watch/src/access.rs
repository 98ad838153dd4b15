//! Who may read the page: a browser that holds the token the server printed, asking by the
//! address the server listens on.
//!
//! The token arrives once in the URL (`?token=`), as Jupyter's does, and is then kept in an
//! `HttpOnly`, `SameSite=Strict` cookie; programs may send it as `Authorization: Bearer`.
//! `Host` must be the listen address, so a page of another site that rebinds its DNS name to
//! 127.0.0.1 is refused, and `Origin`, when a browser sends one, must be this server, so no
//! other page can read the stream or the API. A request that does something (a POST) must name
//! its `Origin`, this server, so a form or script on another site cannot make it even blind.

use hyper::Method;
use hyper::header::{AUTHORIZATION, COOKIE, HOST, ORIGIN};
use hyper::http::request::Parts;

/// A fresh token: 32 random bytes, hex.
pub(crate) fn new_token() -> String {
    hex::encode(rand::random::<[u8; 32]>())
}

/// What the server checks every request against.
#[derive(Debug, Clone)]
pub(crate) struct Access {
    /// The token the URL carried.
    token: String,
    /// `ip:port` as the server listens, the only `Host` it answers.
    authority: String,
    /// `http`, or `https` when it serves TLS: the scheme of the only `Origin` it answers.
    scheme: &'static str,
}

/// Why a request is refused (a 403 that says which check failed, and nothing else).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// No token, or not this server's.
    Token,
    /// `Host` is not the listen address.
    Host,
    /// `Origin` is another site.
    Origin,
    /// A request that is not a read (POST) without an `Origin`.
    NoOrigin,
}

impl Refusal {
    /// The body of the 403.
    pub(crate) fn message(self) -> &'static str {
        match self {
            Refusal::Token => {
                "forbidden: open the URL `factbuoy status --web` printed, with its token"
            }
            Refusal::Host => "forbidden: the Host header is not this server's address",
            Refusal::Origin => "forbidden: the request comes from another site",
            Refusal::NoOrigin => {
                "forbidden: a POST must come from this server's page, with its Origin"
            }
        }
    }
}

/// A request that passed: whether its token came in the URL (the answer then sets the cookie).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admitted {
    /// By cookie or `Authorization`.
    Held,
    /// By `?token=`: the cookie is set with the answer.
    FromUrl,
}

impl Access {
    pub(crate) fn new(token: String, authority: String, scheme: &'static str) -> Access {
        Access {
            token,
            authority,
            scheme,
        }
    }

    /// The cookie's name: the port in it, so two servers on one host keep their own.
    pub(crate) fn cookie_name(&self) -> String {
        let port = self.authority.rsplit(':').next().unwrap_or_default();
        format!("factbuoy-status-{port}")
    }

    /// The `Set-Cookie` value that keeps the token for the rest of the visit.
    pub(crate) fn set_cookie(&self) -> String {
        // Over TLS, the browser must never send it over plain HTTP.
        let secure = if self.scheme == "https" {
            "; Secure"
        } else {
            ""
        };
        format!(
            "{}={}; Path=/; HttpOnly; SameSite=Strict{secure}",
            self.cookie_name(),
            self.token
        )
    }

    /// Checks a request's `Host`, `Origin` (required unless it is a GET or HEAD) and token, in
    /// that order.
    pub(crate) fn check(&self, request: &Parts) -> Result<Admitted, Refusal> {
        let header = |name| {
            request
                .headers
                .get(name)
                .and_then(|v: &hyper::header::HeaderValue| v.to_str().ok())
        };
        if header(HOST) != Some(self.authority.as_str()) {
            return Err(Refusal::Host);
        }
        if let Some(origin) = request.headers.get(ORIGIN)
            && origin.to_str().ok()
                != Some(format!("{}://{}", self.scheme, self.authority).as_str())
        {
            return Err(Refusal::Origin);
        }
        let reads = request.method == Method::GET || request.method == Method::HEAD;
        if !reads && !request.headers.contains_key(ORIGIN) {
            return Err(Refusal::NoOrigin);
        }
        let from_url = request.uri.query().is_some_and(|query| {
            form_urlencoded::parse(query.as_bytes())
                .any(|(key, value)| key == "token" && same(&value, &self.token))
        });
        if from_url {
            return Ok(Admitted::FromUrl);
        }
        let cookie_name = self.cookie_name();
        let from_cookie = request.headers.get_all(COOKIE).iter().any(|cookies| {
            cookies.to_str().is_ok_and(|cookies| {
                cookies.split(';').any(|pair| {
                    pair.trim().split_once('=').is_some_and(|(name, value)| {
                        name == cookie_name && same(value, &self.token)
                    })
                })
            })
        });
        let from_header = header(AUTHORIZATION)
            .and_then(|v| v.strip_prefix("Bearer "))
            .is_some_and(|v| same(v, &self.token));
        if from_cookie || from_header {
            Ok(Admitted::Held)
        } else {
            Err(Refusal::Token)
        }
    }
}

/// Compares a presented token with ours in time that does not depend on where they differ.
fn same(presented: &str, token: &str) -> bool {
    presented.len() == token.len()
        && presented
            .bytes()
            .zip(token.bytes())
            .fold(0u8, |differ, (a, b)| differ | (a ^ b))
            == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(uri: &str, headers: &[(&str, &str)]) -> Parts {
        parts_of(Method::GET, uri, headers)
    }

    fn parts_of(method: Method, uri: &str, headers: &[(&str, &str)]) -> Parts {
        let mut builder = hyper::Request::builder().method(method).uri(uri);
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.body(()).unwrap().into_parts().0
    }

    fn access() -> Access {
        Access::new("abc123".to_owned(), "127.0.0.1:8080".to_owned(), "http")
    }

    const HOST_OK: (&str, &str) = ("host", "127.0.0.1:8080");

    #[test]
    fn the_token_is_taken_from_the_url_the_cookie_or_a_bearer_header() {
        let access = access();
        assert_eq!(
            access.check(&parts("/?token=abc123", &[HOST_OK])),
            Ok(Admitted::FromUrl)
        );
        let cookie = ("cookie", "other=1; factbuoy-status-8080=abc123");
        assert_eq!(
            access.check(&parts("/", &[HOST_OK, cookie])),
            Ok(Admitted::Held)
        );
        let bearer = ("authorization", "Bearer abc123");
        assert_eq!(
            access.check(&parts("/api/v1/runs", &[HOST_OK, bearer])),
            Ok(Admitted::Held)
        );
        assert!(access.set_cookie().contains("HttpOnly; SameSite=Strict"));
    }

    #[test]
    fn a_missing_or_wrong_token_is_refused() {
        let access = access();
        for uri in [
            "/",
            "/?token=",
            "/?token=abc124",
            "/?token=abc1234",
            "/?tok=abc123",
        ] {
            assert_eq!(
                access.check(&parts(uri, &[HOST_OK])),
                Err(Refusal::Token),
                "{uri}"
            );
        }
        // Another port's cookie is not this server's.
        let cookie = ("cookie", "factbuoy-status-8081=abc123");
        assert_eq!(
            access.check(&parts("/", &[HOST_OK, cookie])),
            Err(Refusal::Token)
        );
    }

    #[test]
    fn another_host_or_origin_is_refused_even_with_the_token() {
        let access = access();
        for host in ["evil.example:8080", "localhost:8080", "127.0.0.1:8081", ""] {
            assert_eq!(
                access.check(&parts("/?token=abc123", &[("host", host)])),
                Err(Refusal::Host),
                "{host}"
            );
        }
        assert_eq!(
            access.check(&parts("/?token=abc123", &[])),
            Err(Refusal::Host)
        );
        let evil = ("origin", "http://evil.example");
        assert_eq!(
            access.check(&parts("/?token=abc123", &[HOST_OK, evil])),
            Err(Refusal::Origin)
        );
        let ours = ("origin", "http://127.0.0.1:8080");
        assert_eq!(
            access.check(&parts("/?token=abc123", &[HOST_OK, ours])),
            Ok(Admitted::FromUrl)
        );
    }

    #[test]
    fn a_post_must_name_this_server_as_its_origin() {
        let access = access();
        let bearer = ("authorization", "Bearer abc123");
        let retrieve = "/api/v1/runs/0a1b2c3d4e5f/retrieve";
        assert_eq!(
            access.check(&parts_of(Method::POST, retrieve, &[HOST_OK, bearer])),
            Err(Refusal::NoOrigin)
        );
        let evil = ("origin", "http://evil.example");
        assert_eq!(
            access.check(&parts_of(Method::POST, retrieve, &[HOST_OK, bearer, evil])),
            Err(Refusal::Origin)
        );
        let ours = ("origin", "http://127.0.0.1:8080");
        assert_eq!(
            access.check(&parts_of(Method::POST, retrieve, &[HOST_OK, bearer, ours])),
            Ok(Admitted::Held)
        );
    }

    #[test]
    fn over_tls_the_origin_is_https_and_the_cookie_secure() {
        let access = Access::new("abc123".to_owned(), "10.0.0.5:8443".to_owned(), "https");
        let host = ("host", "10.0.0.5:8443");
        let plain = ("origin", "http://10.0.0.5:8443");
        assert_eq!(
            access.check(&parts("/?token=abc123", &[host, plain])),
            Err(Refusal::Origin)
        );
        let tls = ("origin", "https://10.0.0.5:8443");
        assert_eq!(
            access.check(&parts("/?token=abc123", &[host, tls])),
            Ok(Admitted::FromUrl)
        );
        assert!(access.set_cookie().ends_with("; Secure"));
    }

    #[test]
    fn tokens_are_long_and_fresh() {
        let (a, b) = (new_token(), new_token());
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
    }
}
