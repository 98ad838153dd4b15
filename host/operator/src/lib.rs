//! What an operator does with collection runs, for the `factbuoy` binary and for programs: plan a
//! run ([`plan`]), start it on a [`Target`] (this host, a Kubernetes cluster, a fleet) and follow
//! it to its bundle ([`start`], [`Started::finish`]), find it again from another process
//! ([`records`], in the [`StateDir`]), ask its status and fetch its bundle ([`follow`]), and
//! prune finished local runs ([`prune`]), run one plugin on this host now ([`here`]), and serve
//! and administer a fleet ([`fleet`]).
//!
//! Sonobuoy's `pkg/client` is the model: the binary maps flags onto these calls and prints what
//! they return. Not here: the aggregator and the agent themselves, the sandbox, the cluster's
//! mechanics (the kubernetes crate), how anything is printed.

pub mod error;
pub mod fleet;
pub mod follow;
pub mod here;
pub mod list;
pub mod plan;
pub mod prune;
pub mod records;
pub mod separate;
pub mod start;
pub mod state;

mod kubernetes;
mod local;

pub use error::{Error, Result};
pub use fleet::{FleetStart, FleetTarget};
pub use follow::Finished;
pub use kubernetes::{KubernetesTarget, generate};
pub use local::{Interrupts, LocalTarget, this_host};
pub use plan::{Plan, PluginSelection};
pub use records::{RunRecord, WhichRun};
pub use start::{RunRequest, Started, Target, start};
pub use state::StateDir;
