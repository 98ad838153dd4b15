//! Memory and swap in MiB, rounded down, from `/proc/meminfo`.

use factbuoy_guest::linux::meminfo;
use serde_json::{Value, json};

use crate::ctx::Ctx;

pub fn collect(ctx: &mut Ctx) {
    let Some(text) = ctx.read_raw("/proc/meminfo") else {
        return;
    };
    let info = meminfo::parse(&text);
    let mb = |key: &str| info.get(key).map(|kib| kib / 1024);
    for key in ["MemTotal", "SwapTotal", "MemFree", "SwapFree"] {
        if let Some(value) = mb(key) {
            ctx.set(format!("{}_mb", key.to_lowercase()), value);
        }
    }
    let (total, free, cached, buffers) =
        (mb("MemTotal"), mb("MemFree"), mb("Cached"), mb("Buffers"));
    let (swap_total, swap_free) = (mb("SwapTotal"), mb("SwapFree"));
    let nocache_free = match (cached, free, buffers) {
        (Some(c), Some(f), Some(b)) => Some(c + f + b),
        _ => None,
    };
    let opt = |v: Option<u64>| v.map(Value::from).unwrap_or(Value::Null);
    let minus = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (Some(a), Some(b)) => Value::from(a as i64 - b as i64),
        _ => Value::Null,
    };
    ctx.set(
        "memory_mb",
        json!({
            "real": { "total": opt(total), "used": minus(total, free), "free": opt(free) },
            "nocache": { "free": opt(nocache_free), "used": minus(total, nocache_free) },
            "swap": {
                "total": opt(swap_total),
                "free": opt(swap_free),
                "used": minus(swap_total, swap_free),
                "cached": opt(mb("SwapCached")),
            },
        }),
    );
}
