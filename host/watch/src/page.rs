//! The pages: static HTML, one stylesheet and one script per page, embedded in the binary; the
//! scripts are modules that share `page.js` (making elements, asking for JSON). They render
//! everything from the API's JSON through text nodes, never as HTML, and the
//! Content-Security-Policy the server sends with them lets them reach this server only.

/// A page or an asset: its content type and its text.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Asset {
    pub(crate) content_type: &'static str,
    pub(crate) body: &'static str,
}

const HTML: &str = "text/html; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const SCRIPT: &str = "text/javascript; charset=utf-8";

/// `/`: the runs.
pub(crate) const RUNS: Asset = Asset {
    content_type: HTML,
    body: include_str!("page/runs.html"),
};

/// `/runs/{id}`: one run, live.
pub(crate) const RUN: Asset = Asset {
    content_type: HTML,
    body: include_str!("page/run.html"),
};

/// `/assets/{name}`.
pub(crate) fn asset(name: &str) -> Option<Asset> {
    let (content_type, body) = match name {
        "page.css" => (CSS, include_str!("page/page.css")),
        "runs.js" => (SCRIPT, include_str!("page/runs.js")),
        "run.js" => (SCRIPT, include_str!("page/run.js")),
        "page.js" => (SCRIPT, include_str!("page/page.js")),
        _ => return None,
    };
    Some(Asset { content_type, body })
}
