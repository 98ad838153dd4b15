//! Who may read the page: a browser that holds the token the server printed, asking by the
//! address the server listens on.
//!
//! The token arrives once in the URL (`?token=`), as Jupyter's does, and is then kept in an
//! `HttpOnly`, `SameSite=Strict` cookie; programs may send it as `Authorization: Bearer`.
//! `Host` must be the listen address, so a page of another site that rebinds its DNS name to
//! 127.0.0.1 is refused, and `Origin`, when a browser sends one, must be this server, so no
//! other page can read the stream or the API.

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
    pub(crate) fn new(token: String, authority: String) -> Access {
        Access { token, authority }
    }

    /// The cookie's name: the port in it, so two servers on one host keep their own.
    pub(crate) fn cookie_name(&self) -> String {
        let port = self.authority.rsplit(':').next().unwrap_or_default();
        format!("factbuoy-status-{port}")
    }

    /// The `Set-Cookie` value that keeps the token for the rest of the visit.
    pub(crate) fn set_cookie(&self) -> String {
        format!(
            "{}={}; Path=/; HttpOnly; SameSite=Strict",
            self.cookie_name(),
            self.token
        )
    }

    /// Checks a request's `Host`, `Origin` and token, in that order.
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
            && origin.to_str().ok() != Some(format!("http://{}", self.authority).as_str())
        {
            return Err(Refusal::Origin);
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
        let mut builder = hyper::Request::builder().uri(uri);
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.body(()).unwrap().into_parts().0
    }

    fn access() -> Access {
        Access::new("abc123".to_owned(), "127.0.0.1:8080".to_owned())
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
    fn tokens_are_long_and_fresh() {
        let (a, b) = (new_token(), new_token());
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
    }
}
