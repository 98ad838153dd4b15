//! How factbuoy shows runs, plugins and bundles to people: rows in aligned columns fitted to the
//! terminal ([`table`]), a run's summary, status table and progress bar ([`summary`]), what
//! `plugin info` and `plugin run` print ([`plugin`]; [`json_report`] for `-o json`,
//! [`terminal_sink`] for artifacts on a terminal), the compilation cache ([`cache`]), and
//! `factbuoy inspect`'s answers as text ([`inspect`]).
//!
//! It makes text and documents from what the other crates answer; it does not parse flags,
//! choose the output format, print errors or decide exit codes (the binary does), and it never
//! gathers, serves or reads anything itself beyond the artifact files it is handed.

pub mod cache;
pub mod inspect;
pub mod json_report;
pub mod plugin;
pub mod summary;
pub mod table;
pub mod terminal_sink;
