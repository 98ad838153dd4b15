//! The pages: static HTML, one stylesheet and one script per page, embedded in the binary.
//! The scripts render everything from the API's JSON through text nodes, never as HTML, and
//! the Content-Security-Policy lets them reach this server only.

use hyper::Response;

use crate::server::{Body, content};

const RUNS_HTML: &str = include_str!("page/runs.html");
const RUN_HTML: &str = include_str!("page/run.html");
const CSS: &str = include_str!("page/page.css");
const RUNS_JS: &str = include_str!("page/runs.js");
const RUN_JS: &str = include_str!("page/run.js");

const HTML: &str = "text/html; charset=utf-8";

/// `/`: the runs.
pub(crate) fn runs() -> Response<Body> {
    content(HTML, RUNS_HTML)
}

/// `/runs/{id}`: one run, live.
pub(crate) fn run() -> Response<Body> {
    content(HTML, RUN_HTML)
}

/// `/assets/{name}`.
pub(crate) fn asset(name: &str) -> Option<Response<Body>> {
    let (content_type, body) = match name {
        "page.css" => ("text/css; charset=utf-8", CSS),
        "runs.js" => ("text/javascript; charset=utf-8", RUNS_JS),
        "run.js" => ("text/javascript; charset=utf-8", RUN_JS),
        _ => return None,
    };
    Some(content(content_type, body))
}
