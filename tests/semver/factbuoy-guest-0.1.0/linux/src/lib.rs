//! Parsers for the Linux files facts come from (and for journalctl's time specifications), shared by the guest SDK (`factbuoy-guest`) and
//! the host's `host-info`, so that the same host answers the same way through either.
//!
//! Nothing here opens a file: parsers take text, and [`paths::resolve`] takes a function that
//! reads one symlink. The crate builds for `wasm32-wasip2` and for the host alike.

pub mod mounts;
pub mod os_release;
pub mod paths;
pub mod timespec;
