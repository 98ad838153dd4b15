//! A run while it is served: what the request handlers, the node set and the watchdog share
//! ([`shared`]), the dispatcher's handle on the run's nodes ([`node_set`]), the error results
//! that stand in for missing ones ([`stand_in`]), the watchdog that makes every run end
//! ([`watchdog`]), and the packaging of the bundle ([`package`]). Below the HTTP routes, which
//! call into it; above upload, commit and persistence, which it drives.

pub(crate) mod node_set;
pub(crate) mod package;
pub(crate) mod shared;
pub(crate) mod stand_in;
pub(crate) mod watchdog;
