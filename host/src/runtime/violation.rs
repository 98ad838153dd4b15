//! A sandbox limit a plugin crossed. Raised as the trap's error (or recorded, for limits the
//! plugin is told about through a WIT error), and turned into the run's failure.

use std::time::Duration;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Violation {
    #[error("ran past its deadline of {}", humantime::format_duration(*.0))]
    Deadline(Duration),
    #[error("tried to grow its memory to {desired} bytes, above the limit of {limit} bytes")]
    Memory { limit: u64, desired: u64 },
    #[error("tried to grow a table to {desired} elements, above the limit of {limit}")]
    Table { limit: usize, desired: usize },
    #[error("wrote more than the output limit of {0} bytes; the output was cut there")]
    Output(u64),
    #[error("passed {size} bytes to `{call}`, above the per-call limit of {limit} bytes")]
    HostCall {
        call: &'static str,
        size: usize,
        limit: usize,
    },
    #[error(
        "called `{interface}` without the `{capability}` capability; grant it with --grant {capability}"
    )]
    CapabilityDenied {
        interface: &'static str,
        capability: &'static str,
    },
}
