//! Sandbox overhead: cold compile, cached load, and a full run of a trivial plugin, with raw
//! wasmtime (instantiate one component and call one export, nothing else) measured in the same
//! process as the floor. Prints median and p99; run with `cargo bench -p factbuoy-runtime --bench runtime`.

#[path = "../../../tests/support/fixtures.rs"]
mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use factbuoy_runtime::bindings::{CONTRACT_VERSION, PLUGIN_EXPORT};
use factbuoy_runtime::grants::GrantSet;
use factbuoy_runtime::params;
use factbuoy_runtime::sink::MemorySink;
use factbuoy_runtime::{Invocation, Limits, Runtime, RuntimeOptions, engine};
use wasmtime::Store;
use wasmtime::component::{Component, Linker, ResourceTable, Val};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

const COLD_ITERATIONS: usize = 5;
const LOAD_ITERATIONS: usize = 200;
const RUN_ITERATIONS: usize = 5000;

struct Stats {
    median: Duration,
    p99: Duration,
}

fn stats(mut samples: Vec<Duration>) -> Stats {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    Stats {
        median: at(0.5),
        p99: at(0.99),
    }
}

fn print(name: &str, s: &Stats) {
    println!(
        "{name:<44} median {:>10.1} µs   p99 {:>10.1} µs",
        micros(s.median),
        micros(s.p99)
    );
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

struct RawState {
    wasi: WasiCtx,
    table: ResourceTable,
}

impl WasiView for RawState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// The floor: wasmtime alone, pooling engine, instantiate the same component and call `describe`.
async fn raw_wasmtime(wasm: &[u8]) -> Stats {
    let (engine, _) = engine::build(&Limits::default()).unwrap();
    let component = Component::new(&engine, wasm).unwrap();
    let mut linker = Linker::<RawState>::new(&engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker).unwrap();
    linker.define_unknown_imports_as_traps(&component).unwrap();
    let pre = linker.instantiate_pre(&component).unwrap();
    let mut samples = Vec::with_capacity(RUN_ITERATIONS);
    for _ in 0..RUN_ITERATIONS {
        let started = Instant::now();
        let state = RawState {
            wasi: WasiCtxBuilder::new().build(),
            table: ResourceTable::new(),
        };
        let mut store = Store::new(&engine, state);
        store.set_epoch_deadline(u64::MAX / 2);
        let instance = pre.instantiate_async(&mut store).await.unwrap();
        let interface = instance
            .get_export_index(
                &mut store,
                None,
                &format!("{PLUGIN_EXPORT}@{CONTRACT_VERSION}"),
            )
            .unwrap();
        let describe = instance
            .get_export_index(&mut store, Some(&interface), "describe")
            .unwrap();
        let func = instance.get_func(&mut store, describe).unwrap();
        let mut results = [Val::Bool(false)];
        func.call_async(&mut store, &[], &mut results)
            .await
            .unwrap();
        samples.push(started.elapsed());
    }
    stats(samples)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let wasm = std::fs::read(support::fixture("hostile")).unwrap();
    let cache = tempfile::tempdir().unwrap();
    println!(
        "trivial plugin: tests/plugins/hostile, mode=well-behaved ({} KiB)",
        wasm.len() / 1024
    );

    let uncached = Runtime::new(RuntimeOptions {
        limits: Limits::default(),
        cache_dir: None,
    })
    .unwrap();
    let mut cold = Vec::new();
    for _ in 0..COLD_ITERATIONS {
        let started = Instant::now();
        uncached.load("hostile", &wasm, None).await.unwrap();
        cold.push(started.elapsed());
    }

    let runtime = Runtime::new(RuntimeOptions {
        limits: Limits::default(),
        cache_dir: Some(cache.path().to_owned()),
    })
    .unwrap();
    let digest = factbuoy_protocol::digest::sha256_hex(&wasm);
    runtime.load("hostile", &wasm, Some(&digest)).await.unwrap();
    let mut cached = Vec::new();
    for _ in 0..LOAD_ITERATIONS {
        let started = Instant::now();
        runtime.load("hostile", &wasm, Some(&digest)).await.unwrap();
        cached.push(started.elapsed());
    }

    let plugin = runtime.load("hostile", &wasm, Some(&digest)).await.unwrap();
    let given = vec![("mode".to_owned(), "well-behaved".to_owned())];
    let resolved = params::resolve(&plugin.info.parameters, &given).unwrap();
    let mut runs = Vec::with_capacity(RUN_ITERATIONS);
    for _ in 0..RUN_ITERATIONS {
        let request = Invocation {
            params: resolved.clone(),
            grants: GrantSet::default(),
            host_root: "/".into(),
            sink: Arc::new(MemorySink::default()),
            observer: None,
            limits: None,
            stop: None,
        };
        let started = Instant::now();
        let report = runtime.invoke(&plugin, request).await;
        runs.push(started.elapsed());
        assert!(report.succeeded, "{report:?}");
    }

    let floor = raw_wasmtime(&wasm).await;
    let run = stats(runs);
    println!("allocator: {:?}", runtime.allocator());
    print("cold compile + link + describe", &stats(cold));
    print("cached load + link + describe", &stats(cached));
    print("run: instantiate + gather + report", &run);
    print("raw wasmtime: instantiate + describe (floor)", &floor);
    println!(
        "ratio run / floor: median {:.2}x, p99 {:.2}x",
        micros(run.median) / micros(floor.median),
        micros(run.p99) / micros(floor.p99)
    );
}
