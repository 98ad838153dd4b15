//! The end-to-end tests: the real `factbuoy` binary against real components (docs/architecture.md,
//! Tests). One test binary with a module per area, as wasmtime's `tests/all`, so that the heavy
//! dependencies are linked once. The groups that need a process of their own are binaries beside
//! it: the sandbox's timing and memory tests (`tests/sandbox*.rs`, whose margins other tests'
//! load would eat) and the Kubernetes tests (`tests/kube_shared/`, whose tests share the test
//! cluster their process starts and removes, and `tests/kube_nodes/`, whose tests change nodes
//! and start a cluster each).
//!
//! `cargo test -p factbuoy --test all` runs these; `cargo test -p factbuoy --test all cli_runs::`
//! one area.

#[path = "../support/mod.rs"]
mod support;

mod agent_container;
mod aggregator;
mod aggregator_enroll;
mod aggregator_faults;
mod aggregator_names;
mod aggregator_nodes;
mod ansible_fact_cache;
mod ansible_role;
mod architecture;
mod cli;
mod cli_runs;
mod cli_terminal;
mod compile_cache;
mod contract;
mod deploy_units;
mod estate;
mod examples;
mod fleet;
mod fleet_cli;
mod fleet_lifecycle;
mod fleet_metrics;
mod fleet_routes;
mod history;
mod host_facts;
mod image;
mod inspect;
mod journal;
mod json_keys;
mod operator;
mod option_positions;
mod plugin_authoring;
mod plugin_authoring_js;
mod plugin_authoring_python;
mod registry;
mod setup_plugin;
mod setup_programs;
mod status_web;
