//! The sandbox: loads gatherer components and invokes them with every limit enforced together.
//!
//! One [`Runtime`] per process shares one wasmtime engine. A plugin is compiled once (and cached
//! on disk), pre-linked once, described once, and then instantiated afresh for every invocation
//! (one execution of its `gather`; a collection *run* invokes each plugin once per node). What an
//! invocation may touch is the intersection of what the plugin asks for and what it is granted;
//! what it may consume is bounded by [`Limits`]. Whatever happens inside, [`Runtime::invoke`] returns a
//! [`InvocationReport`]: a plugin failing never fails the host.
//!
//! The surface, as kube-runtime chooses its own: the types of a load and an invocation at the
//! root ([`Runtime`], [`LoadedPlugin`], [`Invocation`], [`InvocationReport`], [`Limits`]), and a
//! public module for each thing a caller writes or reads: [`grants`], [`params`], [`sink`],
//! [`cache`], [`failure`], [`definition`] and [`description`] of a plugin, the contract's types
//! ([`bindings`]) and lines ([`contract`]), and the wasmtime [`engine`] as the sandbox configures
//! it (benchmarks compare against wasmtime alone with it). How the sandbox works (the host's
//! interfaces, the filesystem guard, captures, violations) is private.

pub mod bindings;
pub mod cache;
mod capture;
pub mod contract;
pub mod definition;
pub mod description;
pub mod engine;
pub mod failure;
mod fsguard;
pub mod grants;
mod instance;
mod interfaces;
mod invoke;
pub mod limits;
mod load;
pub mod params;
pub mod sink;
mod stop;
mod violation;

pub use capture::Captured;
pub use instance::output::ArtifactRecord;
pub use instance::progress::{Level, LogRecord, PluginProgress, ProgressObserver, level_name};
pub use invoke::{Invocation, InvocationReport, PASSED_ENVIRONMENT};
pub use limits::Limits;
pub use load::{
    DESCRIBE_DEADLINE, LoadError, LoadReport, LoadedPlugin, Runtime, RuntimeOptions,
    SOURCES_GUEST_PATH,
};
pub use stop::StopSignal;
