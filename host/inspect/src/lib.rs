//! Reading a bundle offline: everything `factbuoy inspect` and `factbuoy ansible fact-cache`
//! answer from a run's bundle, long after the run.

pub mod ansible_cache;
pub mod drift;
pub mod export;
pub mod inspect;
pub mod logs;
pub mod report;
pub mod sql;
