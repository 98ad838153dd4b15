//! Writing factbuoy plugins: [`new_project`] writes a project in Rust, Python or JavaScript that
//! holds the WIT contract and the SDK, so that it builds outside any factbuoy checkout, and
//! [`build`] turns a project into a component with its language's toolchain (cargo, or a
//! componentize tool), found in the project or on PATH, skipping a Python or JavaScript build
//! whose inputs did not change since the last one; [`SourceWatch`] waits for the author's next
//! save, for a loop that builds and runs on every one.
//!
//! Not here: the flags and the printing (the `factbuoy` binary maps `plugin new` and `plugin
//! build` onto these calls), and loading or running a component (the runtime's). A build speaks
//! on standard error, as cargo does: the toolchain's own output and a line saying what it runs;
//! its logs go through `tracing`.

mod build;
mod error;
mod new;
mod toolchain;
mod watch;

pub use build::{Runnable, build, build_for_run};
pub use error::Error;
pub use new::{Lang, new_project};
pub use watch::SourceWatch;
