//! `hardware`: CPUs, memory, DMI, block devices, mounts, uptime (Ansible's LinuxHardware).

mod cpu;
mod devices;
mod dmi;
mod lvm;
mod memory;
mod mounts;

use crate::ctx::Ctx;

pub fn collect(ctx: &mut Ctx) {
    cpu::collect(ctx);
    memory::collect(ctx);
    dmi::collect(ctx);
    dmi::s390_sysinfo(ctx);
    devices::collect(ctx);
    uptime(ctx);
    lvm::collect(ctx);
    mounts::collect(ctx);
}

fn uptime(ctx: &mut Ctx) {
    let seconds = ctx
        .read("/proc/uptime")
        .and_then(|t| t.split(' ').next().and_then(|s| s.parse::<f64>().ok()));
    if let Some(seconds) = seconds {
        ctx.set("uptime_seconds", seconds as i64);
    }
}
