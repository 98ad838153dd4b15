//! The bundle: one `<UTC timestamp>_factbuoy_<run id>.tar.gz` per run, which people open long
//! after the run to see what the fleet looked like.
//!
//! [`layout`] names every path in it, [`writer`] writes one in a single streaming pass,
//! [`reader`] reads one (a `.tar.gz` or an extracted folder) without unpacking it, refusing
//! hostile entries, [`inspect`] answers `factbuoy inspect` from it, and [`ansible_cache`]
//! hands the setup plugin's facts to Ansible's `jsonfile` fact cache. The bundle is Sonobuoy's
//! layout plus `meta/`; docs/bundle.md describes it for users, docs/inspect.md its reading.

pub mod ansible_cache;
pub mod drift;
pub mod export;
pub mod inspect;
pub mod layout;
pub mod logs;
pub mod reader;
pub mod report;
pub mod sql;
pub mod writer;
