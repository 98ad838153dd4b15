//! The bundle: one `<UTC timestamp>_factbuoy_<run id>.tar.gz` per run, which people open long
//! after the run to see what the fleet looked like.
//!
//! [`layout`] names every path in it, [`writer`] writes one in a single streaming pass, and
//! [`reader`] reads one (a `.tar.gz` or an extracted folder) without unpacking it, refusing
//! hostile entries. The bundle is Sonobuoy's layout plus `meta/`; docs/bundle.md describes it
//! for users. Not here: what is asked of a bundle once written (verify, summary, queries,
//! drift, SQL, exports, the HTML report), which is factbuoy-inspect's, so the aggregator that
//! writes bundles links none of it.

pub mod layout;
pub mod reader;
pub mod writer;
