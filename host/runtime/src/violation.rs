//! A sandbox limit a plugin crossed. Raised as the trap's error (or recorded, for limits the
//! plugin is told about through a WIT error), and turned into the run's failure.

use std::time::Duration;

/// A limit crossed, with the values its message quotes.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Violation {
    /// Its run was interrupted: stopped before it finished ([`crate::StopSignal`]).
    #[error(
        "was stopped before it finished: its run was interrupted; its artifacts hold what it wrote until then (partial)"
    )]
    Stopped,
    /// The run lasted longer than the deadline it holds.
    #[error("ran past its deadline of {}", humantime::format_duration(*.0))]
    Deadline(Duration),
    /// A linear memory was to grow past the memory limit.
    #[error("tried to grow its memory to {desired} bytes, above the limit of {limit} bytes")]
    Memory {
        /// The limit, in bytes.
        limit: u64,
        /// The size asked for, in bytes.
        desired: u64,
    },
    /// A table was to grow past the table limit.
    #[error("tried to grow a table to {desired} elements, above the limit of {limit}")]
    Table {
        /// The limit, in elements.
        limit: usize,
        /// The size asked for, in elements.
        desired: usize,
    },
    /// The artifacts together reached the output limit it holds, in bytes.
    #[error("wrote more than the output limit of {0} bytes; the output was cut there")]
    Output(u64),
    /// One host call carried more data than the per-call limit.
    #[error("passed {size} bytes to `{call}`, above the per-call limit of {limit} bytes")]
    HostCall {
        /// The call, as `interface.function` (`artifact.write`).
        call: &'static str,
        /// The bytes it carried.
        size: usize,
        /// The limit, in bytes.
        limit: usize,
    },
    /// The metadata handed to the host reached the metadata limit it holds, in bytes.
    #[error(
        "handed the host more than the metadata limit of {0} bytes (artifact names and media \
         types, progress, warnings, errors and log records together)"
    )]
    Metadata(usize),
    /// More artifacts were open at once than the limit it holds.
    #[error("had more than {0} artifacts open at once; finish one before creating another")]
    OpenArtifacts(usize),
    /// The plugin called an interface it was not granted.
    #[error("called `{interface}` without the `{capability}` capability")]
    CapabilityDenied {
        /// The WIT interface called.
        interface: &'static str,
        /// The capability that allows it, in written form.
        capability: &'static str,
    },
}
