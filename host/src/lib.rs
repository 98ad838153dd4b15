//! factbuoy gathers facts about hosts with gatherer plugins that run as sandboxed WebAssembly
//! components.
//!
//! This crate is the `factbuoy` binary's library: the sandbox [`runtime`], the [`plugin`]
//! catalog and parameter handling, [`capabilities`], and the [`cli`]. The contract plugins are
//! written against lives in `wit/`; plugin authors use the `factbuoy-guest` crate.

pub mod agent;
pub mod aggregator;
pub mod capabilities;
pub mod cli;
pub mod digest;
pub mod pki;
pub mod plugin;
pub mod runtime;
