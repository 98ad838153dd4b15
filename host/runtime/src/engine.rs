//! The one wasmtime [`Engine`] a process shares, configured for the sandbox's limits, and the
//! epoch ticker that drives deadlines.

use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use super::limits::{EPOCH_TICK, Limits};

/// Plugin instances that may be alive at once with the pooling allocator; instantiating one more
/// fails with wasmtime's error. Far above what an agent runs at once.
pub const POOL_INSTANCES: u32 = 64;
/// Linear memories per component (Rust components have one; adapters may add one).
const MEMORIES_PER_COMPONENT: u32 = 2;
/// Host stack room kept beyond the wasm stack on each async fiber.
const FIBER_HOST_STACK_BYTES: usize = 1 << 20;

/// How instances get their memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Allocator {
    /// Pre-reserved slots: the fastest instantiation.
    Pooling,
    /// Memory mapped per instance; used when the address space cannot hold the pool.
    OnDemand,
}

/// Builds the engine, preferring the pooling allocator and falling back to on-demand
/// allocation (with small reservations) when the pool cannot be reserved, for example under a
/// tight `ulimit -v`.
pub fn build(limits: &Limits) -> wasmtime::Result<(Engine, Allocator)> {
    let mut pooling = PoolingAllocationConfig::new();
    pooling
        .total_component_instances(POOL_INSTANCES)
        .total_core_instances(POOL_INSTANCES * 4)
        .total_memories(POOL_INSTANCES * MEMORIES_PER_COMPONENT)
        .max_memories_per_component(MEMORIES_PER_COMPONENT)
        .total_tables(POOL_INSTANCES * 4)
        .total_stacks(POOL_INSTANCES)
        .max_memory_size(limits.memory_bytes as usize);
    let mut config = base_config(limits);
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(pooling));
    match Engine::new(&config) {
        Ok(engine) => return Ok((engine, Allocator::Pooling)),
        Err(e) => tracing::info!("pooling allocator unavailable ({e:#}); allocating on demand"),
    }
    let mut config = base_config(limits);
    config
        .allocation_strategy(InstanceAllocationStrategy::OnDemand)
        .memory_reservation(0)
        .memory_guard_size(64 << 10)
        .memory_reservation_for_growth(1 << 20);
    Ok((Engine::new(&config)?, Allocator::OnDemand))
}

fn base_config(limits: &Limits) -> Config {
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .epoch_interruption(true)
        .max_wasm_stack(limits.stack_bytes)
        .async_stack_size(limits.stack_bytes + FIBER_HOST_STACK_BYTES);
    config
}

/// Advances the engine's epoch every [`EPOCH_TICK`] until the engine is dropped.
pub fn start_epoch_ticker(engine: &Engine) {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("factbuoy-epoch".into())
        .spawn(move || {
            while let Some(engine) = weak.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(EPOCH_TICK);
            }
        })
        .expect("spawning the epoch ticker thread");
}
