//! Reading a bundle offline: what `factbuoy inspect` and `factbuoy ansible fact-cache` answer
//! from a run's bundle (a `.tar.gz` or its extracted folder), long after the run and far from
//! the fleet. docs/inspect.md describes every answer for users.
//!
//! Each answer is one streaming pass of [`factbuoy_bundle::reader::Bundle::walk`], keeping only
//! what it returns: whether every file matches `meta/index.json` ([`verify`]), the run at a
//! glance ([`summary`]), a node's facts ([`facts`]), one path into every node's facts
//! ([`query`]), where nodes or bundles disagree ([`drift`]), the facts as SQLite tables
//! ([`sql`]), the journals merged in time order ([`logs`]), exports for other tools ([`export`],
//! [`ansible_cache`]) and one self-contained HTML page ([`report`]). A directory of bundles is
//! read as one history per origin, through an index of what changed ([`history`]); bundles of
//! several origins (clusters, fleets) are read side by side, never as one estate ([`origin`]).
//!
//! Not here: the bundle's layout, reader and writer (factbuoy-bundle, which the aggregator
//! links to write bundles without linking SQLite, CSV or JSONPath), and printing (the binary).

pub mod ansible_cache;
mod declared;
pub mod drift;
pub mod export;
mod facts;
pub mod history;
mod journal_summary;
mod keyed;
pub mod logs;
mod meta;
pub mod origin;
mod raw;
pub mod report;
pub mod sql;
mod summary;
mod verify;

pub use facts::{
    Answer, FactPath, MAX_FACTS_BYTES, OnlyNode, PathError, PluginFacts, PluginValues, facts,
    leaves, only_node_facts, query,
};
pub use summary::{
    NodeBytes, PairError, PairOutcome, PluginBytes, PluginVersion, RunSummary, Sizes, Summary,
    summary,
};
pub use verify::{Problem, Verification, verify};
