//! The model of a run, in memory: its configuration, the (plugin, node) pairs it expects and
//! the results committed for them, its nodes and what its dispatcher said of each, and the
//! run's state with the rules that follow from it (whether a result may be accepted, which
//! pairs are lost, the status document). No disk, no network, no clock but the one passed in:
//! the layers above load and save it (`persistence`) and change it as requests arrive.

pub mod config;
pub(crate) mod nodes;
pub(crate) mod pair;
pub(crate) mod state;
