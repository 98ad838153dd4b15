//! The host side of each interface a plugin imports, one module per interface, all implemented
//! on [`super::state::RunState`].

pub mod ethtool;
pub mod host_fs;
pub mod host_info;
pub mod output;
pub mod progress;

use super::bindings::factbuoy::plugin::types;
use super::state::RunState;
use super::violation::Violation;

impl RunState {
    /// Refuses a call whose data is above the per-call limit.
    pub(super) fn check_call_size(
        &mut self,
        call: &'static str,
        size: usize,
    ) -> wasmtime::Result<()> {
        let limit = self.limits.host_call_bytes;
        if size > limit {
            return Err(self.violate(Violation::HostCall { call, size, limit }));
        }
        Ok(())
    }
}

/// `types` declares no functions, only what the other interfaces share.
impl types::Host for RunState {}
