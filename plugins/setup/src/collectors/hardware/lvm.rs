//! `lvm`: volume groups, logical and physical volumes as Ansible reads them from `vgs`, `lvs`
//! and `pvs` (`--units g --nosuffix`), computed from the metadata those programs read. The
//! copy the LVM tools write to `/etc/lvm/backup` after every change is read rather than the
//! metadata areas on the disks themselves: the same text, and reading it needs no grant of raw
//! block devices (whose every byte a plugin could then read).

use factbuoy_guest::hostfs::basename;
use factbuoy_guest::linux::lvm::{self, VolumeGroup};
use serde_json::{Map, Value, json};

use crate::ctx::Ctx;

pub fn collect(ctx: &mut Ctx) {
    let facts = facts(ctx);
    ctx.set("lvm", facts);
}

fn facts(ctx: &Ctx) -> Value {
    // Ansible asks only when `vgs` is installed, and only as root; `N/A` otherwise.
    if ctx.find_bin("vgs").is_none() || !is_root(ctx) {
        return "N/A".into();
    }
    let mut groups: Vec<VolumeGroup> = ctx
        .list(lvm::BACKUP_DIR)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|name| {
            let path = format!("{}/{name}", lvm::BACKUP_DIR);
            let text = ctx.read_raw(&path)?;
            VolumeGroup::parse(&text)
                .map_err(|e| ctx.warn(format!("lvm: {path}: {e}")))
                .ok()
        })
        .collect();
    // The order the tools print in, so that Ansible's last-wins keys come out the same.
    groups.sort_by(|a, b| a.name.cmp(&b.name));

    let mut vgs = Map::new();
    let mut lvs = Map::new();
    let mut pvs: Vec<(String, Value)> = Vec::new();
    for vg in &groups {
        let size = |extents: u64| lvm::gib(extents * vg.extent_bytes);
        vgs.insert(
            vg.name.clone(),
            json!({
                "size_g": size(vg.extents()),
                "free_g": size(vg.free_extents()),
                "num_lvs": vg.logical_volumes.len().to_string(),
                "num_pvs": vg.physical_volumes.len().to_string(),
            }),
        );
        let mut volumes: Vec<_> = vg.logical_volumes.iter().collect();
        volumes.sort_by(|a, b| a.name.cmp(&b.name));
        for lv in volumes {
            lvs.insert(
                lv.name.clone(),
                json!({ "size_g": size(lv.extents), "vg": vg.name }),
            );
        }
        for pv in &vg.physical_volumes {
            pvs.push((
                device_name(ctx, &pv.id, &pv.device_hint),
                json!({
                    "size_g": size(pv.extents),
                    "free_g": size(pv.free_extents),
                    "vg": vg.name,
                }),
            ));
        }
    }
    pvs.sort_by(|a, b| a.0.cmp(&b.0));
    let mut facts = Map::new();
    if ctx.find_bin("lvs").is_some() {
        facts.insert("lvs".into(), lvs.into());
    } else {
        facts.insert("lvs".into(), Map::new().into());
    }
    let pvs: Map<String, Value> = if ctx.find_bin("pvs").is_some() {
        pvs.into_iter().collect()
    } else {
        Map::new()
    };
    facts.insert("vgs".into(), vgs.into());
    facts.insert("pvs".into(), pvs.into());
    facts.into()
}

/// The real user of the factbuoy process is root (Ansible's `os.getuid() == 0`).
fn is_root(ctx: &Ctx) -> bool {
    ctx.read_raw("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().next())
        == Some("0")
}

/// The device a PV is on now, named as `pvs` names it: udev's `lvm-pv-uuid-<id>` link finds
/// it, else the device recorded with the metadata. A device-mapper device (`dm-3`) is named
/// by its `/dev/mapper` name, as Ansible renames it with `dmsetup`.
fn device_name(ctx: &Ctx, id: &str, hint: &str) -> String {
    let kernel_name = ctx
        .fs
        .read_link(&format!("/dev/disk/by-id/lvm-pv-uuid-{id}"))
        .map(|target| basename(&target).to_owned())
        .ok();
    let kernel_name = match kernel_name {
        Some(name) => name,
        None => match hint.strip_prefix("/dev/") {
            Some(name) if name.starts_with("dm-") => name.to_owned(),
            _ => return hint.to_owned(),
        },
    };
    if kernel_name.starts_with("dm-")
        && let Some(name) = ctx
            .read(&format!("/sys/block/{kernel_name}/dm/name"))
            .filter(|n| !n.is_empty())
    {
        return format!("/dev/mapper/{name}");
    }
    format!("/dev/{kernel_name}")
}
