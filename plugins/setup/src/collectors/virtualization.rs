//! `virtual`: virtualization type, role and technologies (Ansible's LinuxVirtual, shared with
//! host-facts through `factbuoy_guest::linux::virt`).

use factbuoy_guest::host_info;
use factbuoy_guest::linux::virt;

use crate::ctx::Ctx;

pub fn collect(ctx: &mut Ctx) {
    let markers = host_info::existing_markers();
    let found = virt::detect(&ctx.fs, &markers);
    ctx.set("virtualization_type", found.kind);
    ctx.set("virtualization_role", found.role);
    ctx.set(
        "virtualization_tech_guest",
        found.guest_tech.into_iter().collect::<Vec<_>>(),
    );
    ctx.set(
        "virtualization_tech_host",
        found.host_tech.into_iter().collect::<Vec<_>>(),
    );
}
