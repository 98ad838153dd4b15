//! A fleet: a long-lived aggregator for machines outside any cluster. It keeps an enrollment CA,
//! join tokens and a registry of enrolled nodes in its directory (all of which survive restarts),
//! and starts runs on an operator's request. Each run is an ordinary run of this crate (its own
//! CA, id, directory and bundle), whose expected nodes are the enrolled ones; agents learn of it
//! by long-polling the fleet and get a run certificate through the run's enrollment with a
//! credential the fleet gave them (`admission`). Agents only ever connect out.
//!
//! Everything it keeps is in its directory, laid out as [`FleetDir`] says.
//!
//! Inside: the directory and its settings (`dir`), the enrolled nodes ([`registry`]), join
//! tokens ([`tokens`]), run credentials (`admission`), stored plugins (`plugins`), the runs
//! served and offered to agents (`offers`, `runs`), revocations reaching them
//! (`revocations`), what the fleet counts for Prometheus (`metrics`), what the listener and
//! its tasks share (`shared`), the fleet listener's routes (`routes`), and serving it all
//! (`serve`).

mod admission;
mod dir;
mod metrics;
mod offers;
mod plugins;
pub mod registry;
mod revocations;
mod routes;
mod runs;
mod serve;
mod shared;
pub mod tokens;

pub use dir::{FleetDir, FleetSettings, PortRange, ca_pin, settings};
pub use serve::{RunningFleet, serve};
