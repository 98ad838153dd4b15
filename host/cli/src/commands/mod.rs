//! One module per command of the binary. None imports another: what two commands share is a
//! flag group (`crate::flags`), a way of printing (`crate::output`, `crate::table`,
//! `crate::summary`), or belongs in a library crate.

pub mod agent;
pub mod aggregator;
pub mod ansible;
pub mod delete;
pub mod fleet;
pub mod generate;
pub mod inspect;
pub mod man;
pub mod plugin;
pub mod prune;
pub mod retrieve;
pub mod run;
pub mod runs;
pub mod status;
pub mod version;
