//! The host side of each interface a plugin imports, one module per interface, implemented on
//! the store's data ([`InstanceState`](crate::instance::InstanceState)).

pub mod host_fs;
pub mod host_info;
pub mod output;
pub mod progress;
pub mod v0_1;
pub mod wasi_filesystem;

use crate::bindings::factbuoy::plugin::types;
use crate::instance::InstanceState;

/// `types` declares no functions, only what the other interfaces share.
impl types::Host for InstanceState {}
